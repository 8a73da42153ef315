# SPDX-License-Identifier: GPL-2.0-or-later
"""Snapshots of running guests, their QPs open: 'qhca snapshot save|load NAME' (QEMU's
savevm and loadvm on every guest at once, so that the guests' connections stay consistent
with each other), and 'up --snapshot' (guests restored from a state saved once after boot
instead of booted; docs/migration.md, "Snapshots")."""
import hashlib
import os
import struct
import time

from .common import CACHE, QEMU, RUN, die, info, load_state, vm_alive
from .qmp import Qmp

VMSTATE_SIZE = 16 << 30		# the vmstate image's virtual size: room for many snapshots


def create_qcow2(path, size=VMSTATE_SIZE):
    """An empty qcow2 (version 3, 64 KiB clusters) of SIZE bytes at PATH, as 'qemu-img
    create -f qcow2' makes it: header, refcount table, one refcount block, the L1 table.
    QEMU keeps the guests' snapshots (savevm) in it; nothing of the guest uses it."""
    cluster = 1 << 16
    l2_span = (cluster // 8) * cluster
    l1_size = (size + l2_span - 1) // l2_span
    l1_clusters = (l1_size * 8 + cluster - 1) // cluster
    header = struct.pack(">4sIQIIQIIQQIIQQQQII", b"QFI\xfb", 3, 0, 0, 16, size, 0, l1_size,
                         3 * cluster, cluster, 1, 0, 0, 0, 0, 0, 4, 104)
    refcount_table = struct.pack(">Q", 2 * cluster)
    refcounts = struct.pack(">%dH" % (3 + l1_clusters), *([1] * (3 + l1_clusters)))
    with open(path + ".new", "wb") as f:
        f.write(header.ljust(cluster, b"\0"))
        f.write(refcount_table.ljust(cluster, b"\0"))
        f.write(refcounts.ljust(cluster, b"\0"))
        f.write(b"\0" * (l1_clusters * cluster))
    os.replace(path + ".new", path)


def vmstate_args(i):
    """The QEMU options of guest I's vmstate image (created if missing)."""
    path = os.path.join(RUN, "vm%d.vmstate.qcow2" % i)
    if not os.path.exists(path):
        create_qcow2(path)
    return ["-drive", "if=none,id=vmstate,format=qcow2,file=%s" % path]


def guests(state):
    """The running guests that can be snapshotted (all, or die saying which cannot)."""
    vms = [vm for vm in state["vms"] if vm_alive(vm)]
    if not vms:
        die("no guest is running")
    for vm in vms:
        if vm.get("libvirt") or vm.get("disk"):
            die("vm%d: 'qhca snapshot' takes guests the launcher booted from its image "
                "(not --disk or --libvirt guests)" % vm["index"])
    return vms


def hmp(q, line):
    out = q.call("human-monitor-command", {"command-line": line}) or ""
    if out.strip():		# savevm and loadvm answer nothing when they succeed
        raise RuntimeError("%s: %s" % (line, out.strip()))


def cmd_snapshot(args):
    state = load_state()
    if not state:
        die("nothing is up")
    vms = guests(state)
    name = args.name
    if not name or any(c in name for c in " ,\"'\\"):
        die("a snapshot name: letters, digits, '-', '_' or '.'")
    qs = {vm["index"]: Qmp(state, vm["index"]) for vm in vms}
    t0 = time.time()
    try:
        # All guests stop before any is saved or loaded, and run again together: the
        # snapshot of each holds the same moment of their connections.
        for q in qs.values():
            q.call("stop")
        for i, q in qs.items():
            hmp(q, ("savevm " if args.verb == "save" else "loadvm ") + name)
    except (OSError, RuntimeError) as e:
        for q in qs.values():
            q.call("cont")
        die("snapshot %s %s: %s" % (args.verb, name, e))
    finally:
        for q in qs.values():
            try:
                q.call("cont")
            except (OSError, RuntimeError):
                pass
            q.close()
    info("%s %s: %s in %.2f s" % ("saved" if args.verb == "save" else "loaded", name,
                                  ", ".join("vm%d" % vm["index"] for vm in vms),
                                  time.time() - t0))
    if args.verb == "load":
        set_clocks(state, [vm["index"] for vm in vms])
    return 0


def set_clocks(state, indexes):
    """A restored guest's clock is the snapshot's: set it to the host's."""
    from .guest import guest_run
    for i in indexes:
        rc, out = guest_run(state, i, "date -s @%d > /dev/null" % round(time.time()))
        if rc:
            info("vm%d: its clock could not be set: %s" % (i, out.strip()))


# ---------------------------------------------------------------- up --snapshot
def snapshot_key(argv):
    """What a saved state depends on: the QEMU binary, the image (kernel, initramfs with the
    driver, provider and programs), the guest's command line without its run's paths and
    ports. A change of any of them makes a new snapshot."""
    h = hashlib.sha256()
    norm = []
    for a in argv:
        a = a.replace(RUN, "RUN")
        if "hostfwd=" in a:
            a = a.split("hostfwd=")[0]
        norm.append(a)
    h.update("\0".join(norm).encode())
    for path in [QEMU] + [a for a in argv if a.startswith("/") and os.path.isfile(a)]:
        st = os.stat(path)
        h.update(("%s %d %d %d" % (path, st.st_size, st.st_mtime_ns, st.st_ino)).encode())
    return h.hexdigest()[:20]


def snapshot_path(argv, i):
    return os.path.join(CACHE, "snapshots", snapshot_key(argv), "vm%d.state" % i)


def restore_args(path):
    return ["-incoming", "defer"] if os.path.exists(path) else []


def wait_migration(q, timeout, want_running=False):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if want_running:
            if (q.call("query-status") or {}).get("running"):
                return
        else:
            st = q.call("query-migrate") or {}
            if st.get("status") == "completed":
                return st
            if st.get("status") in ("failed", "cancelled"):
                raise RuntimeError("migration %s: %s" % (st.get("status"), st.get("error-desc")))
        time.sleep(0.02)
    raise RuntimeError("not done after %d s" % timeout)


def restore(state, vm, path, timeout=60):
    """Guest VM's QEMU, started with -incoming defer, takes its state from PATH."""
    q = Qmp(state, vm["index"])
    try:
        q.call("migrate-incoming", {"uri": "file:" + path})
        wait_migration(q, timeout, want_running=True)
    finally:
        q.close()


def save_after_boot(state, vm, path, timeout=120):
    """Save booted guest VM's state to PATH (it runs on afterwards)."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".tmp"
    q = Qmp(state, vm["index"])
    try:
        q.call("migrate-set-parameters", {"max-bandwidth": 8 << 30})
        q.call("migrate", {"uri": "file:" + tmp})
        st = wait_migration(q, timeout)
        q.call("cont")
    finally:
        q.close()
    os.replace(tmp, path)
    # One snapshot per guest index: what an older image, QEMU or command line left goes.
    top = os.path.join(CACHE, "snapshots")
    for d in os.listdir(top):
        old = os.path.join(top, d, os.path.basename(path))
        if old != path and os.path.exists(old):
            os.unlink(old)
            if not os.listdir(os.path.join(top, d)):
                os.rmdir(os.path.join(top, d))
    return st
