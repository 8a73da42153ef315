# SPDX-License-Identifier: GPL-2.0-or-later
"""Snapshots of running guests, their QPs open: 'qhca snapshot save|load NAME' (QEMU's
savevm and loadvm on every guest at once, so that the guests' connections stay consistent
with each other), and 'up --snapshot' (guests restored from a state saved once after boot
instead of booted; docs/migration.md, "Snapshots")."""
import fcntl
import hashlib
import os
import re
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
    """The QEMU options of guest I's vmstate image, made empty for a new run ('up'): a
    snapshot of an earlier run is never this one's."""
    path = os.path.join(RUN, "vm%d.vmstate.qcow2" % i)
    create_qcow2(path)
    return ["-drive", "if=none,id=vmstate,format=qcow2,file=%s" % path]


def guests(state):
    """The running guests that can be snapshotted (all, or die saying which cannot)."""
    vms = [vm for vm in state["vms"] if vm_alive(vm)]
    if not vms:
        die("no guest is running")
    for vm in vms:
        if vm.get("libvirt") or vm.get("disk") or state.get("shares"):
            die("vm%d: 'qhca snapshot' takes guests the launcher booted from its image "
                "(not --disk, --libvirt or --share guests)" % vm["index"])
    return vms


def hmp(q, line, timeout=600.0):
    """An HMP command; savevm and loadvm answer nothing when they succeed (they may take
    long: a guest's RAM is written or read)."""
    out = q.call("human-monitor-command", {"command-line": line}, timeout=timeout) or ""
    if out.strip():
        raise RuntimeError("%s: %s" % (line, out.strip()))


def has_snapshot(q, name):
    out = q.call("human-monitor-command", {"command-line": "info snapshots"}) or ""
    return any(len(f) > 1 and f[1] == name for f in (l.split() for l in out.splitlines()))


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
    done, failed = [], None
    try:
        if args.verb == "load":
            missing = [i for i, q in qs.items() if not has_snapshot(q, name)]
            if missing:
                raise RuntimeError("no snapshot %s of %s (a snapshot is of all the guests "
                                   "that ran when it was saved)"
                                   % (name, ", ".join("vm%d" % i for i in missing)))
        # All guests stop before any is saved or loaded, and run again together: the
        # snapshot of each holds the same moment of their connections.
        for q in qs.values():
            q.call("stop")
        for i, q in qs.items():
            hmp(q, ("savevm " if args.verb == "save" else "loadvm ") + name)
            done.append(i)
    except (OSError, RuntimeError, ValueError) as e:
        failed = str(e)
        if args.verb == "save":		# all or none: the guests saved lose it again
            for i in done:
                try:
                    hmp(qs[i], "delvm " + name)
                except (OSError, RuntimeError, ValueError):
                    pass
    # A load that failed after some guests were loaded leaves them all stopped: some are
    # at the snapshot, some not, and running them so would tear their connections.
    if not (failed and args.verb == "load" and done):
        for q in qs.values():
            try:
                q.call("cont")
            except (OSError, RuntimeError, ValueError):
                pass
    for q in qs.values():
        q.close()
    if failed:
        if args.verb == "load" and done:
            die("snapshot load %s: %s; %s loaded, the others not: all guests are left "
                "stopped ('qhca snapshot load %s' again, or 'qhca down')"
                % (name, failed, ", ".join("vm%d" % i for i in done), name))
        die("snapshot %s %s: %s; the guests run on as they were" % (args.verb, name, failed))
    info("%s %s: %s in %.2f s" % ("saved" if args.verb == "save" else "loaded", name,
                                  ", ".join("vm%d" % vm["index"] for vm in vms),
                                  time.time() - t0))
    if args.verb == "load":
        set_clocks(state, [vm["index"] for vm in vms])
    return 0


def set_clocks(state, indexes):
    """A restored guest's clock is the snapshot's: set it to the host's."""
    from .guest import guest_run, terminal_text
    for i in indexes:
        rc, out = guest_run(state, i, "date -s @%d > /dev/null" % round(time.time()))
        if rc:
            info("vm%d: its clock could not be set: %s" % (i, terminal_text(out.strip())))


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


def snapshot_dir():
    """Where 'up --snapshot' keeps saved states ($QHCA_SNAPSHOT_DIR, or the cache's)."""
    return os.environ.get("QHCA_SNAPSHOT_DIR") or os.path.join(CACHE, "snapshots")


def snapshot_path(argv, i):
    return os.path.join(snapshot_dir(), snapshot_key(argv), "vm%d.state" % i)


def restore_args(path):
    return ["-incoming", "defer"] if os.path.exists(path) else []


def wait_migration(q, timeout, want_running=False):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if want_running:
            # the main loop may be busy reading the file: a long answer time
            if (q.call("query-status", timeout=timeout) or {}).get("running"):
                return
            st = q.call("query-migrate") or {}
            if st.get("status") == "failed":
                raise RuntimeError("restore failed: %s" % st.get("error-desc"))
        else:
            st = q.call("query-migrate") or {}
            if st.get("status") == "completed":
                return st
            if st.get("status") in ("failed", "cancelled"):
                raise RuntimeError("migration %s: %s" % (st.get("status"), st.get("error-desc")))
        time.sleep(0.02)
    raise RuntimeError("not done after %d s" % timeout)


def restore(state, vm, path, timeout=120):
    """Guest VM's QEMU, started with -incoming defer, takes its state from PATH (whose
    directory's time marks it used: prune keeps it)."""
    os.utime(os.path.dirname(path))
    q = Qmp(state, vm["index"])
    try:
        q.call("migrate-incoming", {"uri": "file:" + path})
        wait_migration(q, timeout, want_running=True)
    finally:
        q.close()


KEEP_SNAPSHOTS = 4	# configurations whose snapshots stay (the most recently used)


def save_after_boot(state, vm, path, timeout=120):
    """Save booted guest VM's state to PATH (it runs on afterwards). A file of this process's
    own until it is whole, then renamed: runs that save the same snapshot at once do not mix
    their bytes, and a restore never meets half a file."""
    d = os.path.dirname(path)
    os.makedirs(d, exist_ok=True)
    tmp = "%s.tmp.%d" % (path, os.getpid())
    q = Qmp(state, vm["index"])
    try:
        q.call("migrate-set-parameters", {"max-bandwidth": 8 << 30})
        q.call("migrate", {"uri": "file:" + tmp})
        try:
            st = wait_migration(q, timeout)
        except RuntimeError:
            q.call("migrate_cancel")
            wait_cancelled(q)
            raise
        finally:
            q.call("cont")		# the guest runs on whatever became of the save
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    finally:
        q.close()
    with open(os.path.join(d, ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        os.replace(tmp, path)
    prune(snapshot_dir())
    return st


def wait_cancelled(q, timeout=30.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if (q.call("query-migrate") or {}).get("status") in ("cancelled", "failed",
                                                             "completed", "none"):
            return
        time.sleep(0.05)


def prune(top):
    """Keep the snapshots of the KEEP_SNAPSHOTS configurations used last (a restore touches
    its directory); the others go, each under its lock."""
    dirs = []
    for name in os.listdir(top):
        p = os.path.join(top, name)
        if os.path.isdir(p) and re.match(r"^[0-9a-f]{20}$", name):
            dirs.append((os.stat(p).st_mtime, p))
    for _, p in sorted(dirs, reverse=True)[KEEP_SNAPSHOTS:]:
        with open(os.path.join(p, ".lock"), "w") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                continue	# in use
            for f in os.listdir(p):
                if f.endswith(".state") or ".state.tmp." in f:
                    os.unlink(os.path.join(p, f))
        try:
            os.unlink(os.path.join(p, ".lock"))
            os.rmdir(p)
        except OSError:
            pass
