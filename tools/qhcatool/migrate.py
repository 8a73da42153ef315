# SPDX-License-Identifier: GPL-2.0-or-later
"""Live migration of a guest to a new QEMU process on this host: 'qhca migrate I'.

The destination QEMU starts from the guest's own command line with '-incoming defer', its
console and QMP sockets beside the source's, no ssh forward yet (the source holds the port)
and its fabric netdev already connecting to the guest's fabric port (the fabric takes the
connection once the source's is gone). QEMU moves the RAM and the devices, qhca's state among
them (docs/migration.md); the source quits as soon as the destination runs, its sockets and
ssh port go to the destination, and the guest's QPs go on: what was on the wire during the
switch-over is lost and recovered by the transport, as after any loss."""
import os
import re
import subprocess
import time

from .common import RUN, die, info, load_state, running_vm, save_state, vm_alive
from .qmp import Qmp
from .vms import stop_pid, wait_ready, wait_socket

# The parts of a guest's argv that name host resources only one QEMU can hold at a time.
HOSTFWD_RE = re.compile(r",hostfwd=[^,]*")


def incoming_argv(argv, i, gen):
    """Guest I's argv for its destination QEMU of generation GEN: console and QMP sockets of
    its own (a QEMU removes the socket paths it made when it exits: the launcher's names are
    symbolic links to the running QEMU's), the console log appended to, no ssh forward
    (added once the source is gone), waiting for the incoming state."""
    out = []
    for a in argv:
        for name in ("console", "qmp"):
            a = a.replace("%s/vm%d.%s," % (RUN, i, name), "%s/vm%d.%s.g%d," % (RUN, i, name, gen))
        a = a.replace("logfile=%s/vm%d.log" % (RUN, i),
                      "logfile=%s/vm%d.log,logappend=on" % (RUN, i))
        # --pcap: the new process's frames in a file of its own (vmI.gGEN.pcap)
        a = a.replace("file=%s/vm%d.pcap" % (RUN, i), "file=%s/vm%d.g%d.pcap" % (RUN, i, gen))
        if a.startswith("user,id=mgmt,"):
            a = HOSTFWD_RE.sub("", a)
        out.append(a)
    return out + ["-incoming", "defer"]


def point(link, target):
    """Make LINK a symbolic link to TARGET (a file of the run directory), atomically."""
    tmp = link + ".new"
    if os.path.lexists(tmp):
        os.unlink(tmp)
    os.symlink(os.path.basename(target), tmp)
    os.replace(tmp, link)


def migratable(state, vm):
    """Why guest VM cannot move (None if it can)."""
    if vm.get("libvirt"):
        return "a libvirt domain: 'virsh migrate' moves it"
    if state.get("netdev", "fabric") != "fabric" or not vm.get("port"):
        return "only guests on the fabric move (--netdev %s)" % state.get("netdev")
    if vm.get("disk"):
        return "a --disk guest's writes live in its QEMU's snapshot file, which does not move"
    if state.get("shares"):
        return "a guest with --share directories (9p) cannot migrate"
    if state.get("iwarp"):
        return "--iwarp: the device's TCP connections are not in its migration state yet"
    if state.get("rxe"):
        return ("--%s: the virtio-net NIC's fabric port would need moving too"
                % ("siw" if state.get("siw") else "rxe"))
    return None


def spawn(argv, i):
    """Start the destination QEMU (its output in vmI.qemu.log.in); returns its pid."""
    with open(os.path.join(RUN, "vm%d.qemu.log.in" % i), "w") as qlog:
        try:
            p = subprocess.Popen(argv, stdout=qlog, stderr=qlog, stdin=subprocess.DEVNULL,
                                 start_new_session=True)
        except OSError as e:
            raise RuntimeError("cannot run %s: %s" % (argv[0], e.strerror or e))
    return p.pid


def settle(q, timeout=30.0):
    """After migrate_cancel: the migration's final status."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        st = q.call("query-migrate") or {}
        if st.get("status") in ("completed", "failed", "cancelled", "none"):
            return st
        time.sleep(0.05)
    return {}


def dest_running(dq, deadline):
    """Wait until the destination runs the guest; its refusal, or no answer, raises."""
    while True:
        st = dq.call("query-migrate") or {}
        if st.get("status") == "failed":
            raise RuntimeError("the destination refused the guest's state: %s"
                               % st.get("error-desc", "see its vmI.qemu.log.in"))
        if (dq.call("query-status") or {}).get("running"):
            return
        if time.time() > deadline:
            raise RuntimeError("the destination did not run the guest in time")
        time.sleep(0.005)


def migrate_one(state, vm, timeout):
    """Move guest VM; returns the figures of the move."""
    i = vm["index"]
    gen = vm.get("migrations", 0) + 1
    src_pid = vm["pid"]
    mig_sock = os.path.join(RUN, "vm%d.mig.sock" % i)
    qmp_in = os.path.join(RUN, "vm%d.qmp.g%d" % (i, gen))
    for p in (mig_sock, qmp_in, os.path.join(RUN, "vm%d.console.g%d" % (i, gen))):
        if os.path.lexists(p):
            os.unlink(p)
    t0 = time.time()
    sq = Qmp(state, i)
    # The teaching trace follows the guest ('qhca explain' while it moves).
    tracing = any(ev.get("state") == "enabled" for ev in
                  sq.call("trace-event-get-state", {"name": "qhca_step"}) or [])
    dest_pid = spawn(incoming_argv(vm["argv"], i, gen), i)
    dq = None
    try:
        wait_socket(qmp_in)
        dq = Qmp(state, i, qmp_in)
        if tracing:
            dq.call("trace-event-set-state", {"name": "qhca_step", "enable": True})
        # A refused state fails the migration, not the process: the source goes on then.
        dq.call("migrate-incoming", {"uri": "unix:" + mig_sock, "exit-on-error": False})
        # Unthrottled on one host (QEMU's default is 128 MiB/s): the less time the guest
        # dirties RAM meanwhile, the shorter the stop at the end.
        sq.call("migrate-set-parameters", {"max-bandwidth": 8 << 30})
        sq.call("migrate", {"uri": "unix:" + mig_sock})
        deadline = time.time() + timeout
        last = time.time()
        while True:
            st = sq.call("query-migrate") or {}
            status = st.get("status")
            if status == "completed":
                break
            if status in ("failed", "cancelled"):
                raise RuntimeError("migration %s: %s" % (status, st.get("error-desc", "")))
            if time.time() > deadline:
                sq.call("migrate_cancel")
                st = settle(sq)
                if st.get("status") == "completed":	# it finished meanwhile
                    break
                raise RuntimeError("migration not done after %d s (status %s)"
                                   % (timeout, status))
            ram = st.get("ram") or {}
            if time.time() - last >= 2:
                last = time.time()
                info("vm%d: migrating: %d MiB of RAM moved, %d MiB left"
                     % (i, ram.get("transferred", 0) >> 20, ram.get("remaining", 0) >> 20))
            time.sleep(0.02)
        figures = {"total_ms": st.get("total-time"), "downtime_ms": st.get("downtime"),
                   "ram_mib": (st.get("ram") or {}).get("transferred", 0) >> 20}
        # The source has sent everything; the guest is the destination's only once it has
        # taken it all (the device's state is checked there, and may be refused).
        dest_running(dq, deadline)
    except BaseException as e:
        # The guest stays where it was: the source runs again if it had stopped.
        for q in (dq, sq):
            if q:
                try:
                    if q is sq:
                        q.call("cont")
                except (OSError, RuntimeError, ValueError):
                    pass
                q.close()
        stop_pid(dest_pid, "vm%d's destination QEMU" % i)
        if not isinstance(e, Exception):
            raise
        raise RuntimeError("vm%d: %s; the guest runs on in its old QEMU" % (i, e))
    sq.close()
    # From here the guest lives in the destination: the source quits at once (the peers'
    # QPs retry for a limited time), and its sockets, log and ssh port go to the new one.
    vm["pid"] = dest_pid	# first: whatever happens next, 'down' stops the right QEMU
    vm["state"] = "running"
    vm["migrations"] = gen
    stop_pid(src_pid, "vm%d's source QEMU" % i, timeout=5)
    figures["switch_ms"] = int((time.time() - t0) * 1000)
    for name in ("console", "qmp"):
        point(os.path.join(RUN, "vm%d.%s" % (i, name)),
              os.path.join(RUN, "vm%d.%s.g%d" % (i, name, gen)))
    # The old process's output stays as vmI.qemu.log.mGEN ('qhca explain' reads on in it).
    os.replace(os.path.join(RUN, "vm%d.qemu.log" % i), os.path.join(RUN, "vm%d.qemu.log.m%d" % (i, gen)))
    os.replace(os.path.join(RUN, "vm%d.qemu.log.in" % i), os.path.join(RUN, "vm%d.qemu.log" % i))
    try:
        out = dq.call("human-monitor-command",
                      {"command-line": "hostfwd_add mgmt tcp:127.0.0.1:%d-:22" % vm["ssh_port"]})
    finally:
        dq.close()
    if out and out.strip():
        info("vm%d: warning: its ssh port 127.0.0.1:%d did not follow: %s"
             % (i, vm["ssh_port"], out.strip()))
    return figures


def cmd_migrate(args):
    state = load_state()
    i = args.index
    vm = running_vm(state, i)
    why = migratable(state, vm)
    if why:
        die("vm%d cannot migrate: %s" % (i, why))
    t0 = time.time()
    try:
        f = migrate_one(state, vm, args.timeout)
    except (OSError, RuntimeError) as e:
        die(str(e))
    finally:
        save_state(state)	# whatever happened, the QEMU the guest runs in
    if not vm_alive(vm):
        die("vm%d: the destination QEMU exited; see %s/vm%d.qemu.log" % (i, RUN, i))
    info("vm%d: migrated to a new QEMU (pid %d): %s MiB of RAM, %s ms in all, the guest "
         "stopped %s ms" % (i, vm["pid"], f["ram_mib"], f["total_ms"], f["downtime_ms"]))
    if args.no_wait:
        return 0
    try:
        wait_ready(state, 60, indexes=[i], since=t0, marks={i: -1})	# ssh answering
    except RuntimeError as e:
        die(str(e))
    return 0
