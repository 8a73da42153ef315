# SPDX-License-Identifier: GPL-2.0-or-later
"""Paths, messages, the run's state file and the small facts every command shares
(guest numbering, MACs, ports, device properties).
"""
import ipaddress
import json
import os
import re
import socket
import sys


CACHE = os.environ.get("QHCA_CACHE") or os.path.join(
    os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "qhca")
RUN = os.environ.get("QHCA_RUN") or os.path.join(CACHE, "run")
STATE = os.path.join(RUN, "state.json")
# The QEMU build the guests run: make qemu's (10.0), or another one, QHCA_QEMU_DIR=
# $QHCA_CACHE/qemu-10.2 after 'QEMU=10.2 make qemu' (make check-qemu does).
QEMU_DIR = os.environ.get("QHCA_QEMU_DIR") or os.path.join(CACHE, "qemu")
QEMU = os.path.join(QEMU_DIR, "qemu-system-x86_64")
FABRIC = os.path.join(CACHE, "bin", "qhca-fabric")
SSH_KEY = os.path.join(CACHE, "ssh", "id_ed25519")
SEABIOS = "/usr/share/seabios"
READY_MARK = "qhca-guest-ready"
CONTROL_SOCK = os.path.join(RUN, "fabric", "control.sock")

# The guests' Debian (scripts/lib.sh, docs/flavours.md): each flavour has its own kernel and
# image in CACHE/flavour-NAME/image, built by 'make image FLAVOUR=NAME'.
FLAVOURS = ("debian13", "debian12", "newest")
DEFAULT_FLAVOUR = os.environ.get("QHCA_FLAVOUR") or "debian13"


def image_files(flavour):
    """(kernel, initrd) of FLAVOUR's guest image."""
    d = os.path.join(CACHE, "flavour-" + flavour, "image")
    return os.path.join(d, "vmlinuz"), os.path.join(d, "initrd.cpio")


# Each guest's memory in MiB unless 'up --mem' says otherwise: 1024 lets eight guests (8 GiB)
# run on the 24 GiB development machines beside the host's own work.
DEFAULT_MEM = os.environ.get("QHCA_VM_MEM", "1024")


def die(msg, code=1):
    sys.stderr.write("qhca: error: %s\n" % msg)
    sys.exit(code)


def info(msg):
    sys.stderr.write("qhca: %s\n" % msg)
    sys.stderr.flush()


def size_text(n):
    """N bytes for a message: '1 GiB', '63.3 MiB', '512 KiB', '100 bytes'."""
    for shift, unit in ((40, "TiB"), (30, "GiB"), (20, "MiB"), (10, "KiB")):
        if n >= 1 << shift:
            return ("%d %s" if n % (1 << shift) == 0 else "%.1f %s") % (n / (1 << shift), unit)
    return "%d bytes" % n


def load_state():
    try:
        with open(STATE) as f:
            return json.load(f)
    except FileNotFoundError:
        return None


def save_state(state):
    tmp = STATE + ".tmp"
    with open(tmp, "w") as f:
        json.dump(state, f, indent=1)
    os.replace(tmp, STATE)


def alive(pid):
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie of ours counts as gone.
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def vm_alive(vm):
    """Guest VM's QEMU is running: its pid is alive and still that guest's QEMU (a pid that a
    killed QEMU left can be reused by anything)."""
    pid = vm.get("pid")
    if vm.get("state") == "stopped" or not alive(pid):
        return False
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            argv = f.read().decode(errors="replace").split("\0")
    except OSError:
        return True
    try:
        name = argv[argv.index("-name") + 1].split(",")[0]
    except (ValueError, IndexError):
        return False
    if name != vm.get("qemu_name", "vm%d" % vm["index"]):
        return False
    # A libvirt domain's name is the run's: its QEMU has this run's QMP socket too.
    return not vm.get("qemu_name") or \
        "unix:%s/vm%d.qmp,server=on,wait=off" % (RUN, vm["index"]) in argv


def port_free(port):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.bind(("127.0.0.1", port))
        return True
    except OSError:
        return False
    finally:
        s.close()


def free_port():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def vm_mac(i):
    return "52:54:00:51:48:%02x" % i  # 'Q' 'H' and the VM number


def device_props():
    """Extra properties of every VM's qhca device from QHCA_DEVICE_PROPS ("a=b,c=d")."""
    props = os.environ.get("QHCA_DEVICE_PROPS", "").strip(",")
    if props and not re.fullmatch(r"[a-z0-9-]+=[A-Za-z0-9:.-]+(,[a-z0-9-]+=[A-Za-z0-9:.-]+)*",
                                  props):
        die("QHCA_DEVICE_PROPS must be NAME=VALUE[,NAME=VALUE...], e.g. tx-batch=off")
    return "," + props if props else ""


def mgmt_mac(i):
    return "52:54:00:4d:47:%02x" % i  # 'M' 'G': the management NIC


def rxe_mac(i):
    return "52:54:00:52:58:%02x" % i  # 'R' 'X': the virtio-net NIC for Linux rxe


def is_loopback(host):
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def split_hostport(text, what):
    """HOST:PORT (HOST may be [v6] or a bare v6 address: the port is after the last colon)
    -> (host, port)."""
    host, sep, port = text.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not sep or not host or not port.isdigit() or not 1 <= int(port) <= 65535:
        die("%s %s: expected HOST:PORT" % (what, text))
    return host, int(port)


def vm_entry(state, i):
    if not state:
        die("nothing is up; run 'qhca up' first")
    for vm in state["vms"]:
        if vm["index"] == i:
            return vm
    idx = [vm["index"] for vm in state["vms"]]
    die("no guest %d (guests are %d..%d)" % (i, min(idx), max(idx)))


def running_vm(state, i):
    vm = vm_entry(state, i)
    if not vm_alive(vm):
        die("vm%d is not running (stopped); 'qhca start %d' boots it again" % (i, i))
    return vm
