# SPDX-License-Identifier: GPL-2.0-or-later
"""The guests' lifecycle: QEMU's command line, 'up', 'down', 'kill', 'reset', 'start' and
'status'.
"""
import os
import re
import shlex
import signal
import socket
import struct
import subprocess
import sys
import time
import types

from .common import (CACHE, CONTROL_SOCK, DEFAULT_FLAVOUR, DEFAULT_MEM, FABRIC, QEMU, QEMU_DIR,
                     READY_MARK, RUN, SEABIOS, SSH_KEY, STATE, alive, device_props, die,
                     free_port, image_files, info, is_loopback, load_state, mgmt_mac,
                     port_free, running_vm, rxe_mac, save_state, split_hostport, vm_alive,
                     vm_entry, vm_mac)
from .fabric import dgram_netdev, fabric_netdev, start_fabric
from .files import parse_shares, share_qemu_args
from .guest import guest_run, ssh_base, terminal_text
from .kernel import own_kernel_image
from .libvirt import domain_name, domain_xml, libvirt_remove, libvirt_start, local_uri, virsh
from .netns import (BRIDGE, bridge_mtu, bridge_taps_setup, bridge_taps_teardown, need_root,
                    netns_path, open_tap, run_netns, tap_name, tap_setup, tap_teardown)
from .qmp import Qmp
from .snapshot import restore, restore_args, save_after_boot, set_clocks, snapshot_path, vmstate_args


def probe_accel(kernel):
    """KVM if a guest really runs under it here, else TCG. The answer is cached per boot."""
    forced = os.environ.get("QHCA_ACCEL")
    if forced:
        return forced
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        return "tcg"
    try:
        boot_id = open("/proc/sys/kernel/random/boot_id").read().strip()
    except OSError:
        boot_id = "unknown"
    cache = os.path.join(CACHE, "accel-probe")
    try:
        with open(cache) as f:
            cached_boot, accel = f.read().split()
            if cached_boot == boot_id:
                return accel
    except (OSError, ValueError):
        pass
    if not kernel:
        info("KVM not probed (no qhca image built to probe with); using tcg "
             "(QHCA_ACCEL=kvm to try it)")
        return "tcg"
    info("probing KVM (a short guest boot)...")
    log = os.path.join(RUN, "kvm-probe.log")
    cmd = [QEMU, "-machine", "q35", "-accel", "kvm", "-cpu", "host", "-m", "256",
           "-nodefaults", "-no-user-config", "-display", "none", "-no-reboot",
           "-L", SEABIOS, "-L", os.path.join(QEMU_DIR, "pc-bios", "optionrom"),
           "-kernel", kernel, "-append", "console=ttyS0 panic=-1",
           "-serial", "file:" + log]
    accel = "tcg"
    try:
        p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 10
        while time.time() < deadline and p.poll() is None:
            time.sleep(0.5)
            try:
                if "Linux version" in open(log, errors="replace").read():
                    accel = "kvm"
                    break
            except OSError:
                pass
        p.kill()
        p.wait()
    except OSError:
        pass
    info("KVM %s; using %s" % ("works" if accel == "kvm" else "does not run a guest here", accel))
    with open(cache, "w") as f:
        f.write("%s %s\n" % (boot_id, accel))
    return accel


TAP_NETDEV_RE = re.compile(r"tap,id=fabric,fd=\d+")


def disk_format(path):
    """'qcow2' or 'raw', by the file's first bytes. A qcow2 image may name other files that
    QEMU would open and show the guest (a backing file, an external data file: any file the
    launcher can read, its ssh key included); such an image is refused (ValueError)."""
    with open(path, "rb") as f:
        head = f.read(104)
    if head[:4] != b"QFI\xfb":
        return "raw"
    if len(head) < 72:
        raise ValueError("a qcow2 image with a truncated header")
    version, backing = struct.unpack(">IQ", head[4:16])
    if backing:
        raise ValueError("a qcow2 image with a backing file: the guest would read that file "
                         "of the host; make a whole image first (qemu-img convert -O qcow2)")
    if version >= 3:
        if len(head) < 80:
            raise ValueError("a qcow2 v3 image with a truncated header")
        incompatible = struct.unpack(">Q", head[72:80])[0]
        if incompatible & 0x4:
            raise ValueError("a qcow2 image with an external data file: the guest would see "
                             "that file of the host; convert it (qemu-img convert -O qcow2)")
    return "qcow2"


def port_link(args):
    """The qhca device's link property: ib (--ib), iwarp (--iwarp), or the default (roce)."""
    return "ib" if args.ib else "iwarp" if getattr(args, "iwarp", False) else None


def qemu_cmdline(i, netdev, accel, ssh_port, extra, image, rxe_port=None, mem=DEFAULT_MEM,
                 link=None, shares=(), disk=None, siw=False):
    """Guest I's QEMU booting IMAGE (kernel, initrd), or with DISK that disk image through
    its own boot loader: its qhca device on NETDEV (a -netdev value with id=fabric); with
    RXE_PORT also a virtio-net NIC on that fabric port, and with SIW Linux siw on that NIC
    (the guest's init makes siw0); LINK 'ib': an InfiniBand port; SHARES the host directories
    of 'up --share'."""
    run = RUN
    share_args, share_word = share_qemu_args(shares)
    if disk:
        # QEMU's snapshot mode: the guest's writes go to a temporary file of QEMU's, so the
        # image is never written and guests can share it; they last until QEMU exits (a
        # reboot in the guest keeps them: no -no-reboot for a disk guest).
        boot = ["-drive", "file=%s,if=virtio,format=%s,snapshot=on"
                % (disk, disk_format(disk))]
    else:
        boot = ["-no-reboot", "-kernel", image[0], "-initrd", image[1],
                "-append", "console=ttyS0 panic=-1 quiet qhcavm=%d%s%s" % (
                    i, " qhcasiw=1" if siw else "", " " + share_word if share_word else "")]
    cmd = [QEMU, "-name", "vm%d,debug-threads=on" % i,
           "-machine", "q35", "-accel", accel, "-cpu", "host" if accel == "kvm" else "max",
           "-smp", "1", "-m", str(mem),
           "-nodefaults", "-no-user-config", "-display", "none",
           "-L", SEABIOS, "-L", os.path.join(QEMU_DIR, "pc-bios", "optionrom")] + boot + [
           "-chardev", "socket,id=console,path=%s/vm%d.console,server=on,wait=off,"
                       "logfile=%s/vm%d.log" % (run, i, run, i),
           "-serial", "chardev:console",
           "-netdev", netdev,
           "-device", "qhca,id=qhca0,netdev=fabric,mac=%s%s%s"
                      % (vm_mac(i), ",link=" + link if link else "", device_props()),
           "-netdev", "user,id=mgmt,restrict=on,hostfwd=tcp:127.0.0.1:%d-:22" % ssh_port,
           "-device", "virtio-net-pci,netdev=mgmt,romfile=,mac=%s" % mgmt_mac(i),
           "-qmp", "unix:%s/vm%d.qmp,server=on,wait=off" % (run, i)]
    if not disk:	# where savevm keeps snapshots ('qhca snapshot'; no guest device)
        cmd += vmstate_args(i)
    if rxe_port:
        # A virtio-net NIC on the same fabric (ports n+1..2n) to compare with Linux rxe.
        cmd += ["-netdev", fabric_netdev(rxe_port).replace("id=fabric", "id=rxenet", 1),
                "-device", "virtio-net-pci,netdev=rxenet,romfile=,mac=%s" % rxe_mac(i)]
    return cmd + share_args + extra


def stop_pid(pid, name, timeout=10.0):
    """SIGTERM to PID (NAME in the messages), SIGKILL if it is still there after TIMEOUT s."""
    if not alive(pid):
        return
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.time() + timeout
    while time.time() < deadline:
        if not alive(pid):
            return
        time.sleep(0.1)
    info("%s (pid %d) ignored SIGTERM; killing it" % (name, pid))
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def cmd_down(args):
    """qhca down: the guests' QEMU (and libvirt domains) and the fabric stopped, the run's
    sockets, snapshots and taps (or its namespace) removed, the state file gone."""
    state = load_state()
    if not state:
        info("nothing is up")
        return 0
    undefined = []
    for vm in state["vms"]:
        if vm.get("libvirt"):
            err = libvirt_remove(vm)
            if err:
                undefined.append(err)
        if vm_alive(vm):
            stop_pid(vm["pid"], "vm%d" % vm["index"])
    if state.get("fabric_pid"):
        stop_pid(state["fabric_pid"], "fabric")
    for err in undefined:
        info("warning: %s" % err)
    for vm in state["vms"]:
        for suffix in (".console", ".qmp"):
            try:
                os.unlink(os.path.join(RUN, "vm%d%s" % (vm["index"], suffix)))
            except FileNotFoundError:
                pass
        # what moves left (qhca migrate: sockets and logs by generation) and the snapshots
        # of this run (qhca snapshot: the vmstate image)
        for name in os.listdir(RUN):
            if re.match(r"vm%d\.(console\.g\d+|qmp\.g\d+|mig\.sock|qemu\.log\.in|"
                        r"vmstate\.qcow2)$" % vm["index"], name):
                try:
                    os.unlink(os.path.join(RUN, name))
                except OSError:
                    pass
    left = None
    if state.get("tap_bridge"):	# the taps only: the bridge and its namespace are not ours
        bridge_taps_teardown(state["tap_bridge"]["netns"], state.get("taps") or [])
    elif state.get("netns"):
        # Only the namespace 'up --netdev tap' made for this run (never --fabric-netns's).
        try:
            left = tap_teardown(state["netns"], state.get("taps") or [])
        except RuntimeError as e:
            left = str(e)
    if left:
        save_state(state)
        die("down: the VMs are stopped but %s could not be removed: %s" % (state["netns"], left))
    os.unlink(STATE)
    netdev = state.get("netdev", "fabric")
    if state.get("libvirt_bridge"):
        what = "libvirt's taps gone from bridge %s" % state["libvirt_bridge"]
    elif state.get("tap_bridge"):
        what = "their taps removed from bridge %s" % state["tap_bridge"]["bridge"]
    elif netdev == "tap":
        what = "the namespace %s with its bridge and taps removed" % state["netns"]
    elif netdev == "dgram":
        what = "no fabric"
    else:
        what = "the fabric stopped"
    info("down: %d VMs and %s" % (len(state["vms"]), what))
    return 0


def check_artifacts(image, flavour):
    """Dies, saying what to build, if QEMU, the fabric, the image IMAGE of FLAVOUR, the ssh
    key or SeaBIOS is missing."""
    missing = [p for p in (QEMU, FABRIC) + image + (SSH_KEY,) if not os.path.exists(p)]
    if missing:
        die("not built yet: %s\n  run 'make all%s' in the qhca tree first"
            % (", ".join(missing), "" if flavour == DEFAULT_FLAVOUR else " FLAVOUR=" + flavour))
    if not os.path.exists(os.path.join(SEABIOS, "bios-256k.bin")):
        die("SeaBIOS is missing; install Debian's seabios package (make all does)")


# A disk guest's ready mark: systemd's getty on the serial console, once a boot.
DISK_READY_MARK = " login: "


# What ready_marks has read of each serial log: path -> [(device, inode), bytes read, marks
# counted, the end of the last read that may begin a mark].
MARKS_READ = {}
LOG_CHUNK = 1 << 20


def ready_marks(vm):
    """How often guest VM's serial log has its ready mark (once per boot of the guest). The
    guest writes the log: it is read from where the last call stopped, a block at a time
    (a new file, or one shorter than what was read, from its start)."""
    mark = (DISK_READY_MARK if vm.get("disk") else READY_MARK).encode()
    path = os.path.join(RUN, "vm%d.log" % vm["index"])
    try:
        with open(path, "rb") as f:
            st = os.fstat(f.fileno())
            seen = MARKS_READ.get(path)
            if not seen or seen[0] != (st.st_dev, st.st_ino) or st.st_size < seen[1]:
                seen = MARKS_READ[path] = [(st.st_dev, st.st_ino), 0, 0, b""]
            f.seek(seen[1])
            while True:
                data = f.read(LOG_CHUNK)
                if not data:
                    break
                seen[1] += len(data)
                data = seen[3] + data		# a mark split across two reads
                at = 0
                while True:
                    k = data.find(mark, at)
                    if k < 0:
                        break
                    seen[2] += 1
                    at = k + len(mark)
                # What may begin a mark: the last len(mark) - 1 bytes, none of a mark counted.
                seen[3] = data[max(len(data) - len(mark) + 1, at):]
    except OSError:
        return MARKS_READ[path][2] if path in MARKS_READ else 0
    return seen[2]


def wait_ready(state, timeout, indexes=None, since=None, marks=None):
    """Wait until the guests INDEXES (default all) are ready: their serial log has more ready
    marks than MARKS[i] (default 0) and ssh answers. Times are reported from SINCE."""
    pending = set(indexes) if indexes is not None else {vm["index"] for vm in state["vms"]}
    since = since or state["started"]
    marks = marks or {}
    deadline = time.time() + timeout
    while pending and time.time() < deadline:
        for vm in state["vms"]:
            i = vm["index"]
            if i not in pending:
                continue
            if not vm_alive(vm):
                raise RuntimeError("vm%d: QEMU exited; see %s/vm%d.qemu.log" % (i, RUN, i))
            if ready_marks(vm) <= marks.get(i, 0):
                continue
            r = subprocess.run(ssh_base(state, i) + ["true"], stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            if r.returncode == 0:
                pending.discard(i)
                info("vm%d ready (%.1f s)" % (i, time.time() - since))
        time.sleep(0.3)
    if pending:
        raise RuntimeError("guest%s %s not ready after %d s; serial log%s: %s" % (
            "s" if len(pending) > 1 else "", ", ".join(map(str, sorted(pending))), timeout,
            "s" if len(pending) > 1 else "",
            ", ".join("%s/vm%d.log" % (RUN, i) for i in sorted(pending))))


# The end of a serial log that log_tails reads, and the most of a line it shows.
TAIL_BYTES = 64 << 10
TAIL_LINE = 500


def log_tails(indexes, lines=8):
    """The last LINES lines of the serial logs of guests INDEXES on stderr. The guest writes
    them: only their last TAIL_BYTES are read, a line is cut at TAIL_LINE characters, and
    on a terminal the guest's control characters are left out (guest.terminal_text)."""
    for i in indexes:
        try:
            with open(os.path.join(RUN, "vm%d.log" % i), "rb") as f:
                f.seek(max(0, os.fstat(f.fileno()).st_size - TAIL_BYTES))
                tail = f.read(TAIL_BYTES).decode("utf-8", "replace").splitlines()[-lines:]
        except OSError:
            continue
        tail = [t if len(t) <= TAIL_LINE else t[:TAIL_LINE] + " [...]" for t in tail]
        sys.stderr.write(terminal_text("--- vm%d.log (last lines)\n%s\n" % (i, "\n".join(tail))))


# A unix socket path holds at most this many bytes (sun_path, less the NUL); QEMU and the
# fabric refuse longer ones, so refuse them here first, naming the path.
SUN_PATH_MAX = 107


def check_socket_paths(last, nports):
    """Dies if the longest socket path of the run (a fabric port's, the control socket, the
    last guest's console) does not fit in sun_path."""
    longest = max(os.path.join(RUN, "fabric", "port%d.sock" % nports), CONTROL_SOCK,
                  os.path.join(RUN, "vm%d.console" % last), key=len)
    if len(longest.encode()) > SUN_PATH_MAX:
        die("socket path %s is %d bytes long; a unix socket path holds at most %d bytes: "
            "set QHCA_RUN to a shorter directory" % (longest, len(longest.encode()),
                                                    SUN_PATH_MAX))


def boot_timeout(n):
    """Default seconds to wait for N guests: N TCG guests share the host's cores."""
    env = os.environ.get("QHCA_BOOT_TIMEOUT")
    if env:
        return int(env)
    return 180 + 30 * max(0, n - 2)


def disk_boot_timeout(n):
    """As boot_timeout, for guests that boot a distribution with systemd from disk."""
    env = os.environ.get("QHCA_BOOT_TIMEOUT")
    return int(env) if env else 2 * boot_timeout(n)


def launch(vm):
    """Start guest VM's QEMU from its saved argv; records the pid in VM. With --netdev tap the
    guest's tap is opened now and its descriptor handed over (fd=N in the argv is this
    launch's number; vmI.cmdline shows it)."""
    i = vm["index"]
    if vm.get("disk"):	# again: the file may have been replaced since 'up'
        try:
            disk_format(vm["disk"])
        except (OSError, ValueError) as e:
            raise RuntimeError("vm%d: --disk %s: %s" % (i, vm["disk"], e))
    if vm.get("libvirt"):
        libvirt_start(vm)
        vm["state"] = "running"
        vm["booted"] = time.time()
        return
    fds = ()
    if vm.get("tap"):
        fd = open_tap(vm["tap"]["netns"], vm["tap"]["ifname"])
        fds = (fd,)
        vm["argv"] = [TAP_NETDEV_RE.sub("tap,id=fabric,fd=%d" % fd, a) for a in vm["argv"]]
    with open(os.path.join(RUN, "vm%d.cmdline" % i), "w") as f:
        f.write(" ".join(shlex.quote(c) for c in vm["argv"]) + "\n")
    qlog = open(os.path.join(RUN, "vm%d.qemu.log" % i), "w")
    try:
        # QEMU's snapshot mode keeps a disk guest's writes in a file of TMPDIR: the run's.
        env = dict(os.environ, TMPDIR=RUN) if vm.get("disk") else None
        p = subprocess.Popen(vm["argv"], stdout=qlog, stderr=qlog, stdin=subprocess.DEVNULL,
                             start_new_session=True, pass_fds=fds, env=env)
    except OSError as e:
        raise RuntimeError("vm%d: cannot run %s: %s" % (i, vm["argv"][0], e.strerror or e))
    finally:
        qlog.close()
        for fd in fds:
            os.close(fd)
    # Popen returns once the exec has begun; /proc/PID/cmdline, by which vm_alive knows the
    # process, reads empty for a moment after that: wait for it ('start' checks at once).
    deadline = time.time() + 2
    while time.time() < deadline and p.poll() is None:
        try:
            with open("/proc/%d/cmdline" % p.pid, "rb") as f:
                if f.read(1):
                    break
        except OSError:
            break
        time.sleep(0.01)
    vm["pid"] = p.pid
    vm["state"] = "running"
    vm["booted"] = time.time()


def fmt_hostport(host, port):
    """HOST:PORT, an IPv6 HOST in brackets."""
    return ("[%s]:%d" if ":" in host else "%s:%d") % (host, port)


def free_udp_ports(count):
    """COUNT distinct free UDP ports of 127.0.0.1 (held together while they are picked)."""
    socks = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


LOOPBACK_ONLY = ("the launcher keeps guest traffic on this machine: %s must be a loopback "
                 "address (127.0.0.1, ::1, localhost) unless the fabric runs inside a network "
                 "namespace (--fabric-netns); between real hosts run qhca-fabric yourself "
                 "(docs/fabric.md, \"More than one host\")")


def cmd_up(args):
    """qhca up (and the first step of 'qhca run'): the options checked, the fabric's ports
    planned, the run's state made, the network the qhca devices join started, every guest
    set up and launched; returns once they are ready (0), or 1."""
    plan = up_options(args)
    up_host_checks(args, plan)
    plan.timeout = args.timeout if args.timeout is not None else (
        disk_boot_timeout(plan.n) if args.disk else boot_timeout(plan.n))
    plan_fabric(args, plan)
    state = up_state(args, plan)
    start_network(args, plan, state)
    restoring, to_save = launch_guests(args, plan, state)
    return wait_guests(args, plan, state, restoring, to_save)


def up_options(args):
    """up's options checked against each other (nothing on this host is touched): the plan
    of the run so far, a namespace with the guests' count, numbers and memory and the kind
    of network (netdev, on_fabric, trunks)."""
    for what, path in (("the run directory ($QHCA_RUN)", RUN), ("the cache ($QHCA_CACHE)", CACHE)):
        if "," in path:	# QEMU's option strings would take the rest as options of their own
            die("%s %s: QEMU's options cannot take a path with a comma; choose another"
                % (what, path))
    n = args.n
    if n < 1 or n > 16:
        die("-n must be 1..16")
    first = args.first
    if first < 1 or first + n - 1 > 254:
        die("--first %d -n %d: guests are numbered 1..254 (guest I is 192.168.77.I)" % (first, n))
    last = first + n - 1
    indexes = list(range(first, last + 1))
    try:
        mem = int(args.mem)
    except ValueError:
        die("--mem (or QHCA_VM_MEM) must be a number of MiB, not %r" % args.mem)
    if mem < 256:
        die("--mem %d: a guest needs at least 256 MiB (the image lives in its RAM)" % mem)
    netdev = args.netdev or ("tap" if args.bridge else "fabric")
    on_fabric = netdev == "fabric"
    trunks = args.trunk or []
    if args.spare_ports < 0:
        die("--spare-ports must be 0 or more")
    if not on_fabric:
        given = [opt for opt, v in (("--rxe", args.rxe), ("--siw", args.siw),
                                    ("--seed", args.seed is not None),
                                    ("--fabric-script", args.fabric_script),
                                    ("--capture", args.capture), ("--fabric-tcp", args.fabric_tcp),
                                    ("--trunk", trunks), ("--spare-ports", args.spare_ports),
                                    ("--fabric-netns", args.fabric_netns)) if v]
        if given:
            die("--netdev %s runs no fabric, so no %s" % (netdev, ", ".join(given)))
    if args.snapshot:
        why = ("--disk" if args.disk else "--libvirt" if args.libvirt else
               "--share" if args.share or args.share_rw else
               "--iwarp (its TCP connections are not saved yet)" if args.iwarp else
               "--netdev %s" % netdev if netdev != "fabric" else None)
        if why:
            die("--snapshot restores guests the launcher boots from its image onto the fabric: "
                "not with %s" % why)
    if args.ib and args.iwarp:
        die("--ib and --iwarp are two link layers of the port: one of them")
    if args.ib and (not on_fabric or args.rxe or args.siw or trunks or args.fabric_tcp
                    or args.spare_ports):
        die("--ib makes an InfiniBand subnet of one switch, the fabric: it goes with none of "
            "--netdev dgram|tap, --rxe, --siw, --trunk, --fabric-tcp, --spare-ports")
    if args.siw and args.disk:
        die("--siw makes siw0 in qhca's image (its init, its siw.ko): a --disk guest brings "
            "its own kernel and userland; use --rxe for the NIC and 'rdma link add siw0 type "
            "siw netdev NIC' in a guest whose kernel has siw")
    if netdev == "dgram" and n != 2:
        die("--netdev dgram joins exactly two guests point to point: -n 2")
    if netdev == "tap":
        need_root("up --netdev tap")
    if args.bridge and netdev != "tap":
        die("--bridge puts the qhca devices on taps of an existing bridge: it goes with "
            "--netdev tap only")
    if args.netns and not (args.bridge or args.libvirt):
        die("--netns NS names where the bridge of --bridge is (and the daemon of --libvirt); "
            "without --bridge, --netdev tap makes a namespace of its own")
    return types.SimpleNamespace(n=n, first=first, last=last, indexes=indexes, mem=mem,
                                 netdev=netdev, on_fabric=on_fabric, trunks=trunks)


def up_host_checks(args, plan):
    """The rest of up's option checks, against this host: the network namespaces named
    exist, the libvirt of --libvirt is this machine's and answers (and goes with the other
    options), the bridge of --bridge is there."""
    netdev = plan.netdev
    if args.netns:
        need_root("up --netns")
        if not os.path.exists(netns_path(args.netns)):
            die("--netns %s: no such network namespace" % args.netns)
    if args.libvirt:
        if not local_uri(args.libvirt):
            die("--libvirt %s: the launcher needs a libvirt of this machine (qemu:///system, "
                "qemu:///session, or ?socket=PATH): it finds the guests' QEMU processes and "
                "sockets here" % args.libvirt)
        given = [opt for opt, v in (
            ("--netdev dgram", netdev == "dgram"),
            ("--netdev tap without --bridge", netdev == "tap" and not args.bridge),
            ("--rxe", args.rxe), ("--siw", args.siw), ("--share", args.share or args.share_rw),
            ("--disk", args.disk), ("--pcap", args.pcap and args.bridge)) if v]
        if given:
            die("--libvirt runs the guests on the fabric, or on a bridge with libvirt's own "
                "taps (--bridge): not with %s" % ", ".join(given))
        try:
            virsh(args.libvirt, "list", "--all")
        except RuntimeError as e:
            die("--libvirt %s: %s" % (args.libvirt, e))
    if args.bridge:
        try:
            bridge_mtu(args.netns, args.bridge)
        except RuntimeError as e:
            die("--bridge %s: %s" % (args.bridge, e))
    if args.fabric_netns:
        need_root("up --fabric-netns")
        if not os.path.exists(netns_path(args.fabric_netns)):
            die("--fabric-netns %s: no such network namespace (make it with 'ip netns add %s' "
                "and give it the addresses the fabric should use)"
                % (args.fabric_netns, args.fabric_netns))


def plan_fabric(args, plan):
    """The fabric's ports into PLAN: the guests' 1..N, the virtio-net NICs' of --rxe and
    --siw N+1..2N (nic), the trunks (trunk_ports), the spare ones (spare), nports in all;
    TCP's (tcp) and qhca-fabric's arguments (fabric_args). Checked, nothing started."""
    n = plan.n
    nic = args.rxe or args.siw
    rxe_ports = n if nic else 0
    fabric_args = []
    if args.seed is not None:
        fabric_args += ["--seed", str(args.seed)]
    if args.fabric_script:
        script = os.path.abspath(args.fabric_script)
        if not os.path.isfile(script):
            die("--fabric-script %s: no such file" % script)
        fabric_args += ["--script", script]
    if args.capture:
        fabric_args += ["--capture", os.path.abspath(args.capture)]
    if args.ib:
        fabric_args += ["--ib"]
    trunk_ports = {}
    for k, addr in enumerate(plan.trunks):
        port = n + rxe_ports + 1 + k
        kind, _, rest = addr.partition(":")
        if kind == "tcp":
            host, tport = split_hostport(rest, "--trunk %s:" % addr)
            if not args.fabric_netns and not is_loopback(host):
                die(LOOPBACK_ONLY % ("--trunk %s: HOST" % addr))
            addr = "tcp:" + fmt_hostport(host, tport)
        elif kind == "unix" and rest:
            addr = "unix:" + os.path.abspath(rest)
            if len(addr[5:].encode()) > SUN_PATH_MAX:
                die("--trunk %s: a unix socket path holds at most %d bytes" % (addr, SUN_PATH_MAX))
        else:
            die("--trunk %s: expected tcp:HOST:PORT or unix:PATH" % addr)
        trunk_ports[port] = addr
        fabric_args += ["--trunk", "%d=%s" % (port, addr)]
    nports = n + rxe_ports + len(plan.trunks) + args.spare_ports
    spare = list(range(nports - args.spare_ports + 1, nports + 1))
    if nports > 64:
        die("the fabric has at most 64 ports; this asks for %d" % nports)
    tcp = None
    if args.fabric_tcp:
        host, base = split_hostport(args.fabric_tcp, "--fabric-tcp")
        if not args.fabric_netns and not is_loopback(host):
            die(LOOPBACK_ONLY % ("--fabric-tcp %s: HOST" % args.fabric_tcp))
        if base + nports - 1 > 65535:
            die("--fabric-tcp %s: ports %d..%d do not fit below 65536"
                % (args.fabric_tcp, base, base + nports - 1))
        tcp = (host, base)
        fabric_args += ["--tcp", fmt_hostport(host, base)]
    plan.__dict__.update(nic=nic, fabric_args=fabric_args, trunk_ports=trunk_ports,
                         nports=nports, spare=spare, tcp=tcp)


def up_state(args, plan):
    """What the guests boot (shares, image or disk, accel into PLAN) checked and found, an
    earlier run of this directory cleared (refused if it is still up), the old logs gone:
    the new run's state, not saved yet."""
    shares = parse_shares(args.share, args.share_rw)
    image = image_files(args.flavour)
    disk = None
    if args.disk:
        disk = os.path.abspath(args.disk)
        if args.kernel or args.modules or shares:
            die("--disk boots the disk's own kernel and userland: it goes with none of "
                "--kernel, --modules, --share, --share-rw")
        if not os.path.isfile(disk) or not os.access(disk, os.R_OK):
            die("--disk %s: no such readable file (a raw or qcow2 disk image)" % args.disk)
        if "," in disk:
            die("--disk %s: QEMU's -drive cannot take a path with a comma" % disk)
        try:
            disk_format(disk)
        except (OSError, ValueError) as e:
            die("--disk %s: %s" % (args.disk, e))
        image = ()	# the probe below boots the flavour's kernel only if it is built
    check_artifacts(image, args.flavour)
    check_socket_paths(plan.last, plan.nports if plan.on_fabric else 1)
    os.makedirs(RUN, exist_ok=True)
    old = load_state()
    if old:
        if any(vm_alive(vm) for vm in old["vms"]) or alive(old.get("fabric_pid")):
            die("VMs are already up in %s; run 'qhca down' first" % RUN)
        try:
            if old.get("tap_bridge"):
                bridge_taps_teardown(old["tap_bridge"]["netns"], old.get("taps") or [])
            elif old.get("netns"):
                tap_teardown(old["netns"], old.get("taps") or [])
        except RuntimeError:
            pass
        os.unlink(STATE)
    if args.kernel or args.modules:	# after the check above: a refused up writes nothing
        image = own_kernel_image(args.kernel, args.modules, os.path.dirname(image[1]))
    n, mem = plan.n, plan.mem
    try:
        avail = int(re.search(r"MemAvailable:\s+(\d+)", open("/proc/meminfo").read()).group(1))
        if n * mem * 1024 > avail:
            info("warning: %d guests of %d MiB need more than the %d MiB available"
                 % (n, mem, avail // 1024))
    except (OSError, AttributeError):
        pass
    flavour_kernel = image_files(args.flavour)[0]
    accel = probe_accel(flavour_kernel if os.path.exists(flavour_kernel) else None)
    for i in plan.indexes:
        for f in ("vm%d.log" % i, "vm%d.qemu.log" % i, "vm%d.log.prev" % i,
                  "vm%d.qemu.log.prev" % i, "vm%d.pcap.prev" % i):
            try:
                os.unlink(os.path.join(RUN, f))
            except FileNotFoundError:
                pass
    plan.__dict__.update(shares=shares, image=image, disk=disk, accel=accel,
                         control=plan.on_fabric, udp=None, ns=None)
    return {"started": time.time(), "accel": accel, "mem": mem, "vms": [], "fabric_pid": None,
            "control": CONTROL_SOCK if plan.control else None, "first": plan.first,
            "netdev": plan.netdev, "ib": bool(args.ib), "iwarp": bool(args.iwarp),
            "flavour": args.flavour, "rxe": bool(plan.nic), "siw": bool(args.siw)}


def start_network(args, plan, state):
    """What the qhca devices join, started and recorded in STATE: the fabric, the two UDP
    ports of --netdev dgram (plan.udp), or the taps of --netdev tap on a bridge of our own
    or of --bridge (plan.ns: their namespace); with --libvirt and --bridge, libvirt's."""
    indexes = plan.indexes
    if plan.on_fabric:
        start_switch(args, plan, state)
    elif plan.netdev == "dgram":
        udp = plan.udp = free_udp_ports(2)
        state["udp"] = udp
        info("dgram: vm%d on UDP 127.0.0.1:%d, vm%d on UDP 127.0.0.1:%d"
             % (plan.first, udp[0], plan.last, udp[1]))
    elif args.bridge and args.libvirt:
        state["libvirt_bridge"] = args.bridge
        info("tap: libvirt's, on bridge %s%s" % (
            args.bridge, " in namespace " + args.netns if args.netns else ""))
    elif args.bridge:
        ns = plan.ns = args.netns
        try:
            mtu = bridge_taps_setup(ns, args.bridge, indexes)
        except RuntimeError as e:
            die("--bridge %s: %s" % (args.bridge, e))
        state["tap_bridge"] = {"netns": ns, "bridge": args.bridge}
        state["taps"] = indexes
        save_state(state)
        info("tap: bridge %s%s (MTU %d), taps %s" % (
            args.bridge, " in namespace " + ns if ns else "", mtu,
            " ".join(tap_name(i) for i in indexes)))
    else:
        ns = plan.ns = run_netns()
        state["netns"] = ns
        state["taps"] = indexes
        save_state(state)
        try:
            tap_setup(ns, indexes)
        except RuntimeError as e:
            cmd_down(args)
            die("--netdev tap: %s" % e)
        info("tap: namespace %s, bridge %s, taps %s" % (
            ns, BRIDGE, " ".join(tap_name(i) for i in indexes)))


def start_switch(args, plan, state):
    """The fabric (qhca-fabric) started as PLAN says and recorded in STATE; returns once its
    sockets are there, or stops the run and dies with its log."""
    nports, trunk_ports, spare, tcp = plan.nports, plan.trunk_ports, plan.spare, plan.tcp
    fabdir = os.path.join(RUN, "fabric")
    os.makedirs(fabdir, exist_ok=True)
    fab_cmd = [FABRIC, "--dir", fabdir, "--ports", str(nports)]
    if plan.control:
        fab_cmd += ["--control", CONTROL_SOCK]
    fab_cmd += plan.fabric_args
    state["fabric_argv"] = fab_cmd
    state["fabric_ports"] = nports
    state["trunks"] = {str(p): a for p, a in trunk_ports.items()}
    state["spare_ports"] = spare
    state["fabric_tcp"] = fmt_hostport(*tcp) if tcp else None
    state["fabric_netns"] = args.fabric_netns
    fab = start_fabric(fab_cmd, args.fabric_netns)
    state["fabric_pid"] = fab.pid
    save_state(state)
    # A trunk port has no socket of its own; the control socket comes after the TCP ones.
    wanted = [os.path.join(fabdir, "port%d.sock" % p) for p in range(1, nports + 1)
              if p not in trunk_ports]
    if plan.control:
        wanted.append(CONTROL_SOCK)
    started = False
    for _ in range(50):
        if fab.poll() is not None:
            break
        if all(os.path.exists(w) for w in wanted):
            started = True
            break
        time.sleep(0.1)
    if not started:
        cmd_down(args)
        try:
            sys.stderr.write(open(os.path.join(RUN, "fabric.log"), errors="replace").read())
        except OSError:
            pass
        die("the fabric did not start; see %s/fabric.log" % RUN)
    where = " in namespace %s" % args.fabric_netns if args.fabric_netns else ""
    if tcp:
        info("fabric%s: port K also listens on TCP %s + K - 1 (ports %d..%d)"
             % (where, fmt_hostport(*tcp), tcp[1], tcp[1] + nports - 1))
    for p, a in sorted(trunk_ports.items()):
        info("fabric%s: port %d is a trunk to %s" % (where, p, a))
    for p in spare:
        info("fabric: port %d is spare: %s/port%d.sock%s" % (
            p, fabdir, p, ", TCP %s" % fmt_hostport(tcp[0], tcp[1] + p - 1) if tcp else ""))


def guest_setup(args, plan, k, i, extra):
    """Guest I (the K-th of the run) as the state records it: its ssh port, MAC, place on
    the network, and how it starts: QEMU's argv, or its libvirt domain (vmI.xml written, an
    old domain of this run directory's name removed). EXTRA: more QEMU arguments."""
    n, mem, disk, udp, ns = plan.n, plan.mem, plan.disk, plan.udp, plan.ns
    ssh_port = free_port()
    dump = []
    if args.pcap:
        pcap = os.path.join(RUN, "vm%d.pcap" % i)
        dump = ["-object", "filter-dump,id=dump0,netdev=fabric,file=%s,maxlen=65535" % pcap]
    vm = {"index": i, "ssh_port": ssh_port, "mac": vm_mac(i)}
    if disk:
        vm["disk"] = disk
    if plan.on_fabric:
        vm["port"] = k + 1
        nd = fabric_netdev(k + 1)
    elif plan.netdev == "dgram":
        vm["udp"] = [udp[k], udp[1 - k]]
        nd = dgram_netdev(udp[k], udp[1 - k])
    elif args.libvirt:
        nd = None	# libvirt's tap on the bridge
    else:
        vm["tap"] = {"netns": ns, "ifname": tap_name(i)}
        nd = "tap,id=fabric,fd=0"  # the descriptor's number is filled in by launch()
    if args.libvirt:
        name = domain_name(run_netns()[len("qhca-"):], i)
        vm["libvirt"] = {"uri": args.libvirt, "domain": name}
        vm["qemu_name"] = "guest=" + name
        if args.netns:
            vm["ssh_netns"] = args.netns	# libvirt's QEMU forwards ssh there
        err = libvirt_remove(vm)	# a domain an earlier run of this directory left
        if err:
            cmd_down(args)
            die(err)
        with open(os.path.join(RUN, "vm%d.xml" % i), "w") as f:
            f.write(domain_xml(
                name, i, mem, ssh_port, image=plan.image,
                cmdline="console=ttyS0 panic=-1 quiet qhcavm=%d" % i, disk=disk,
                disk_format=disk_format(disk) if disk else None,
                fabric_netdev=None if args.bridge else nd, bridge=args.bridge,
                link=port_link(args), extra=extra + dump))
    else:
        vm["argv"] = qemu_cmdline(i, nd, plan.accel, ssh_port, extra + dump, plan.image,
                                  rxe_port=n + k + 1 if plan.nic else None, mem=mem,
                                  link=port_link(args), shares=plan.shares, disk=disk,
                                  siw=args.siw)
    return vm


def launch_guests(args, plan, state):
    """Every guest set up and launched, one after the other, each added to STATE as it
    starts; with --snapshot restored from its state after boot if one was saved (then
    restored over QMP). Returns (the guests restored, the snapshots to save after boot),
    each by guest number; stops the run and dies if one cannot start."""
    extra = shlex.split(os.environ.get("QHCA_QEMU_ARGS", ""))
    if args.trace:
        extra += ["-trace", args.trace]
    restoring, to_save = {}, {}	# up --snapshot: guests restored, and snapshots to make
    for k, i in enumerate(plan.indexes):
        vm = guest_setup(args, plan, k, i, extra)
        snap = snapshot_path(vm["argv"], i) if args.snapshot else None
        try:
            if snap and restore_args(snap):	# the guest's state after boot, saved before
                boot_argv = vm["argv"]
                vm["argv"] = boot_argv + restore_args(snap)
                try:
                    launch(vm)
                finally:
                    vm["argv"] = boot_argv
                restoring[i] = snap
            else:
                launch(vm)
                if snap:
                    to_save[i] = snap
        except RuntimeError as e:
            if vm.get("libvirt"):	# started, perhaps, but not in the state: down misses it
                libvirt_remove(vm)
            cmd_down(args)
            die(str(e))
        state["vms"].append(vm)
        save_state(state)
    if restoring:
        info("restoring %s from the snapshot taken after boot"
             % ", ".join("vm%d" % i for i in sorted(restoring)))
        try:
            for vm in state["vms"]:
                if vm["index"] in restoring:
                    wait_socket(os.path.join(RUN, "vm%d.qmp" % vm["index"]))
                    restore(state, vm, restoring[vm["index"]])
        except (OSError, RuntimeError) as e:
            cmd_down(args)
            die("restoring from the snapshot failed: %s; 'rm -r %s' makes the next --snapshot "
                "boot and save again" % (e, os.path.dirname(next(iter(restoring.values())))))
    return restoring, to_save


def wait_guests(args, plan, state, restoring, to_save):
    """Until every guest is ready (ssh answers; with --siw siw0 is there): their clocks set
    if RESTORING, the snapshots of TO_SAVE saved. Returns 0, or 1 with the serial logs'
    tails (the run stopped unless --keep)."""
    n = plan.n
    if len(restoring) < n:
        info("booting %d VMs (%s, %d MiB each, timeout %d s); logs in %s"
             % (n - len(restoring), plan.accel, plan.mem, plan.timeout, RUN))
    try:
        # a restored guest prints no boot marks: ssh answering is its readiness
        wait_ready(state, plan.timeout, marks={i: -1 for i in restoring})
    except RuntimeError as e:
        sys.stderr.write("qhca: error: %s\n" % e)
        log_tails([vm["index"] for vm in state["vms"]])
        if not args.keep:
            cmd_down(args)
        return 1
    if restoring:
        set_clocks(state, sorted(restoring))
    if args.siw:
        missing = siw_missing(state)
        if missing:
            sys.stderr.write("qhca: error: %s\n" % missing)
            log_tails([vm["index"] for vm in state["vms"]], lines=4)
            if not args.keep:
                cmd_down(args)
            return 1
    for vm in state["vms"]:
        if vm["index"] in to_save:
            t0 = time.time()
            try:
                save_after_boot(state, vm, to_save[vm["index"]])
            except (OSError, RuntimeError) as e:
                info("vm%d: its snapshot could not be saved: %s" % (vm["index"], e))
                continue
            info("vm%d: its state after boot saved for 'up --snapshot' (%.1f s, %d MiB)"
                 % (vm["index"], time.time() - t0, os.path.getsize(to_save[vm["index"]]) >> 20))
    info("up: %d VMs in %.1f s%s" % (n, time.time() - state["started"],
                                      " (%d restored)" % len(restoring) if restoring else ""))
    return 0


def siw_missing(state):
    """After 'up --siw': why a guest has no siw0 on its virtio-net NIC (None if all have)."""
    bad = []
    for vm in state["vms"]:
        rc, out = guest_run(state, vm["index"], "rdma link show siw0/1")
        if rc != 0 or "siw0/1" not in out:
            bad.append("vm%d" % vm["index"])
    if not bad:
        return None
    return ("%s: no siw0 (the guest's init prints 'qhca-guest: siw0 ...' in the serial log "
            "%s/vmI.log); the image's siw.ko comes from 'make siw' (scripts/build-siw.sh), and "
            "a kernel of your own (--kernel) needs CONFIG_RDMA_SIW=m" % (", ".join(bad), RUN))


def wait_socket(path, timeout=30.0):
    """Until PATH exists (a socket QEMU makes); RuntimeError after TIMEOUT s."""
    deadline = time.time() + timeout
    while not os.path.exists(path):
        if time.time() > deadline:
            raise RuntimeError("no socket %s after %d s" % (path, timeout))
        time.sleep(0.02)


def cmd_kill(args):
    state = load_state()
    i = args.index
    vm = running_vm(state, i)
    pid = vm["pid"]
    if vm.get("libvirt"):	# libvirt's QEMU may not be ours to signal: virsh destroy kills it
        try:
            virsh(vm["libvirt"]["uri"], "destroy", vm["libvirt"]["domain"])
        except RuntimeError as e:
            die("vm%d: %s" % (i, e))
    else:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    deadline = time.time() + 10
    while alive(pid) and time.time() < deadline:
        time.sleep(0.05)
    if alive(pid):
        die("vm%d: QEMU (pid %d) is still there 10 s after SIGKILL" % (i, pid))
    vm["state"] = "stopped"
    vm["stopped"] = time.time()
    save_state(state)
    for suffix in (".console", ".qmp"):
        try:
            os.unlink(os.path.join(RUN, "vm%d%s" % (i, suffix)))
        except FileNotFoundError:
            pass
    if vm.get("port"):
        gone = "its fabric port %d is disconnected" % vm["port"]
    elif vm.get("tap"):
        gone = "its tap %s stays on the bridge, without carrier" % vm["tap"]["ifname"]
    elif vm.get("libvirt"):
        gone = "libvirt removed its tap from the bridge"
    else:
        gone = "its UDP peer hears nothing"
    info("vm%d: killed QEMU (pid %d) with SIGKILL; %s; 'qhca start %d' boots it again"
         % (i, pid, gone, i))
    return 0


def cmd_reset(args):
    state = load_state()
    i = args.index
    vm = running_vm(state, i)
    marks = {i: ready_marks(vm)}
    t0 = time.time()
    # QEMU runs with -no-reboot (reboot=shutdown): a reset request would make it exit. Let
    # resets reboot the guest for now: the host's reset, then the one the firmware (SeaBIOS)
    # makes itself when it finds it has run before (QEMU does not restore its shadow copy);
    # then restore -no-reboot, so that a guest panic still stops QEMU.
    try:
        q = Qmp(state, i)
        try:
            q.call("set-action", {"reboot": "reset"})
            q.call("system_reset")
            fw = q.wait_event(lambda ev: ev.get("event") == "RESET"
                              and (ev.get("data") or {}).get("guest"), 15)
            if not fw:
                info("vm%d: no reset from the firmware within 15 s; restoring -no-reboot "
                     "anyway" % i)
            # A disk guest reboots in place (its writes live as long as its QEMU).
            q.call("set-action", {"reboot": "reset" if vm.get("disk") else "shutdown"})
        finally:
            q.close()
    except (OSError, RuntimeError, ValueError) as e:
        die("vm%d: reset failed: %s" % (i, e))
    info("vm%d: system reset" % i)
    return wait_one(state, i, args, t0, marks)


def cmd_start(args):
    state = load_state()
    i = args.index
    vm = vm_entry(state, i)
    if vm_alive(vm):
        die("vm%d is running (pid %d); 'qhca kill %d' or 'qhca reset %d' first"
            % (i, vm["pid"], i, i))
    if not vm.get("argv") and not vm.get("libvirt"):
        try:
            vm["argv"] = shlex.split(open(os.path.join(RUN, "vm%d.cmdline" % i)).read())
        except OSError as e:
            die("vm%d: no saved command line: %s" % (i, e))
    if not vm.get("ssh_netns") and not port_free(vm["ssh_port"]):
        die("vm%d: its ssh port 127.0.0.1:%d is taken by another program now"
            % (i, vm["ssh_port"]))
    if state.get("netdev", "fabric") == "fabric" and not alive(state.get("fabric_pid")):
        info("warning: the fabric is not running; vm%d boots without its fabric port" % i)
    # Keep the previous run's logs (the crash's last words) beside the new ones.
    for f in ("vm%d.log", "vm%d.qemu.log", "vm%d.pcap"):
        path = os.path.join(RUN, f % i)
        if os.path.exists(path):
            os.replace(path, path + ".prev")
    t0 = time.time()
    try:
        launch(vm)
    except RuntimeError as e:
        die(str(e))
    save_state(state)
    info("vm%d: starting (pid %d, ssh 127.0.0.1:%d)" % (i, vm["pid"], vm["ssh_port"]))
    return wait_one(state, i, args, t0)


def wait_one(state, i, args, t0, marks=None):
    """After 'reset' or 'start': guest I ready (unless --no-wait), or its log's tail and 1."""
    if args.no_wait:
        return 0
    try:
        wait_ready(state, args.timeout, indexes=[i], since=t0, marks=marks)
    except RuntimeError as e:
        sys.stderr.write("qhca: error: %s\n" % e)
        log_tails([i])
        return 1
    return 0


def cmd_status(args):
    state = load_state()
    if not state:
        print("nothing is up (run dir %s)" % RUN)
        return 1
    netdev = state.get("netdev", "fabric")
    if netdev == "fabric":
        net = "fabric pid %s (%s)" % (state["fabric_pid"],
                                      "running" if alive(state["fabric_pid"]) else "stopped")
    elif state.get("libvirt_bridge"):
        net = "libvirt's taps on bridge %s" % state["libvirt_bridge"]
    elif state.get("tap_bridge"):
        tb = state["tap_bridge"]
        net = "netdev tap: bridge %s %s" % (
            tb["bridge"], "in namespace %s" % tb["netns"] if tb["netns"] else "of the host")
    elif netdev == "tap":
        net = "netdev tap: bridge %s in namespace %s (%s)" % (
            BRIDGE, state.get("netns"),
            "present" if os.path.exists(netns_path(state.get("netns") or "-")) else "gone")
    else:
        net = "netdev dgram over UDP on 127.0.0.1, no fabric"
    print("run dir %s, accel %s, %s MiB per guest, %s" % (
        RUN, state["accel"], state.get("mem", "?"), net))
    if state.get("control"):
        print("fabric control %s" % state["control"])
    if state.get("fabric_netns"):
        print("fabric in network namespace %s" % state["fabric_netns"])
    if state.get("fabric_tcp"):
        print("fabric port K also on TCP %s + K - 1" % state["fabric_tcp"])
    for p, a in sorted((state.get("trunks") or {}).items(), key=lambda t: int(t[0])):
        print("fabric port %s: trunk to %s" % (p, a))
    for p in state.get("spare_ports") or []:
        print("fabric port %d: spare" % p)
    for vm in state["vms"]:
        running = vm_alive(vm)
        if vm.get("port"):
            where = "  fabric port %d" % vm["port"]
        elif vm.get("tap"):
            where = "  tap %s" % vm["tap"]["ifname"]
        elif vm.get("udp"):
            where = "  UDP 127.0.0.1:%d -> %d" % tuple(vm["udp"])
        else:
            where = ""
        if vm.get("libvirt"):
            where += "  libvirt domain %s" % vm["libvirt"]["domain"]
        print("vm%d  pid %s (%s)  ssh 127.0.0.1:%d  mac %s%s" % (
            vm["index"], vm.get("pid") if running else "-",
            "running" if running else "stopped", vm["ssh_port"], vm["mac"], where))
    return 0
