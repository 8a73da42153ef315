# SPDX-License-Identifier: GPL-2.0-or-later
"""Network namespaces and taps (--netdev tap, --fabric-netns).

'up --netdev tap' puts each guest's qhca device on a tap of a Linux bridge inside a network
namespace of its own, so the guests' frames cross a real kernel bridge and nothing outside
that namespace sees them. QEMU itself stays in the host's namespace: its management NIC is
user-mode networking whose ssh forward must listen on the host's 127.0.0.1. So the launcher
opens each tap inside the namespace (setns into it, open /dev/net/tun, TUNSETIFF, setns
back: a tun file belongs to the namespace it was opened in, whoever holds it later) and
hands the descriptor to QEMU: -netdev tap,id=fabric,fd=N. The taps are persistent (made
with 'ip tuntap add'), so 'start I' after 'kill I' opens guest I's tap again.

'up --netdev tap --bridge BR [--netns NS]' puts the taps on a bridge that exists already, in
NS or in the host's namespace: a site's bridge, or one joined to other hosts by VXLAN. The
launcher then makes and removes only the taps.
"""
import ctypes
import fcntl
import hashlib
import json
import os
import struct
import subprocess

from .common import RUN, die, info


CLONE_NEWNET = 0x40000000


TUNSETIFF = 0x400454CA


IFF_TAP = 0x0002


IFF_NO_PI = 0x1000


BRIDGE = "br0"  # inside the namespace, so the name cannot clash with the host's


_libc = None


def setns_net(fd):
    """Move this thread into the network namespace open at FD (Python 3.11 has no os.setns)."""
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    if _libc.setns(fd, CLONE_NEWNET) != 0:
        e = ctypes.get_errno()
        raise OSError(e, "setns: %s" % os.strerror(e))


def netns_path(name):
    return os.path.join("/run/netns", name)


def run_netns():
    """The namespace of this run's --netdev tap, named after the run directory."""
    return "qhca-" + hashlib.sha1(os.path.realpath(RUN).encode()).hexdigest()[:8]


def tap_name(i):
    return "qhcatap%d" % i


def ip_cmd(*args, check=True):
    try:
        r = subprocess.run(["ip"] + list(args), stdin=subprocess.DEVNULL,
                           capture_output=True, text=True)
    except OSError as e:
        raise RuntimeError("cannot run ip (iproute2): %s" % (e.strerror or e))
    if check and r.returncode:
        raise RuntimeError("ip %s: %s" % (" ".join(args), r.stderr.strip()))
    return r


def need_root(what):
    if os.geteuid() != 0:
        die("%s needs root (it creates or enters network namespaces, bridges and taps); "
            "run it as root" % what)


def tap_setup(ns, indexes):
    """Namespace NS with bridge br0 and a persistent tap for each guest in it. MTU 9000: the
    bridge drops a frame longer than its out port's MTU, and RoCE at MTU 4096 sends 4154-byte
    frames."""
    if os.path.exists(netns_path(ns)):
        info("removing the namespace %s left by an earlier run of %s" % (ns, RUN))
        tap_teardown(ns, indexes)
    ip_cmd("netns", "add", ns)
    ip_cmd("-n", ns, "link", "add", BRIDGE, "type", "bridge")
    ip_cmd("-n", ns, "link", "set", BRIDGE, "mtu", "9000", "up")
    for i in indexes:
        ip_cmd("-n", ns, "tuntap", "add", "dev", tap_name(i), "mode", "tap")
        ip_cmd("-n", ns, "link", "set", tap_name(i), "mtu", "9000", "master", BRIDGE, "up")


def tap_teardown(ns, indexes):
    """Remove what tap_setup made (the taps, the bridge, the namespace); quietly for what is
    not there. Returns what could not be removed."""
    if not os.path.exists(netns_path(ns)):
        return None
    for i in indexes:
        ip_cmd("-n", ns, "link", "del", tap_name(i), check=False)
    ip_cmd("-n", ns, "link", "del", BRIDGE, check=False)
    r = ip_cmd("netns", "del", ns, check=False)
    if os.path.exists(netns_path(ns)):
        return "network namespace %s: %s" % (ns, r.stderr.strip())
    return None


def ns_args(ns):
    """ip's arguments for namespace NS (None: the host's)."""
    return ["-n", ns] if ns else []


def bridge_mtu(ns, bridge):
    """The MTU of bridge BRIDGE in NS (None: the host's namespace); RuntimeError if there is
    no such bridge."""
    r = ip_cmd(*ns_args(ns), "-j", "-d", "link", "show", "dev", bridge, check=False)
    where = "namespace %s" % ns if ns else "the host's namespace"
    try:
        link = json.loads(r.stdout)[0] if r.returncode == 0 else None
    except (ValueError, IndexError):
        link = None
    if not link or (link.get("linkinfo") or {}).get("info_kind") != "bridge":
        raise RuntimeError("no bridge %s in %s (make it first: 'ip%s link add %s type bridge', "
                           "docs/fabric.md)" % (bridge, where, " -n " + ns if ns else "",
                                                bridge))
    return int(link["mtu"])


def tap_owner():
    """The alias the taps of 'up --bridge' carry: this run's directory. 'down' deletes only a
    tap with it (the same name may be another run's tap by then)."""
    return "qhca:" + os.path.realpath(RUN)


def bridge_taps_setup(ns, bridge, indexes):
    """A persistent tap for each guest on the existing bridge BRIDGE of NS (None: the host's
    namespace), with the bridge's MTU. Refuses a tap name that exists: it may be another
    run's guest. Returns the MTU."""
    mtu = bridge_mtu(ns, bridge)
    for i in indexes:
        if ip_cmd(*ns_args(ns), "link", "show", "dev", tap_name(i), check=False).returncode == 0:
            raise RuntimeError("%s exists already%s (another run's guest %d? 'qhca down' there, "
                               "or number these guests with --first)"
                               % (tap_name(i), " in namespace " + ns if ns else "", i))
    made = []
    try:
        for i in indexes:
            ip_cmd(*ns_args(ns), "tuntap", "add", "dev", tap_name(i), "mode", "tap")
            made.append(i)
            ip_cmd(*ns_args(ns), "link", "set", tap_name(i), "alias", tap_owner())
            ip_cmd(*ns_args(ns), "link", "set", tap_name(i), "mtu", str(mtu), "master", bridge,
                   "up")
    except RuntimeError:
        for i in made:	# just made by this call: ours, alias or not
            ip_cmd(*ns_args(ns), "link", "del", tap_name(i), check=False)
        raise
    return mtu


def bridge_taps_teardown(ns, indexes):
    """Remove the taps of bridge_taps_setup that are this run's (by their alias), quietly for
    those that are not there."""
    for i in indexes:
        r = ip_cmd(*ns_args(ns), "-j", "link", "show", "dev", tap_name(i), check=False)
        try:
            link = json.loads(r.stdout)[0] if r.returncode == 0 else {}
        except (ValueError, IndexError):
            link = {}
        if link.get("ifalias") == tap_owner():
            ip_cmd(*ns_args(ns), "link", "del", tap_name(i), check=False)


def open_tap(ns, ifname):
    """A descriptor of tap IFNAME in namespace NS (None: this one), opened from inside it."""
    if not ns:
        return tun_open(ifname, "")
    own = os.open("/proc/self/ns/net", os.O_RDONLY)
    try:
        target = os.open(netns_path(ns), os.O_RDONLY)
    except OSError as e:
        os.close(own)
        raise RuntimeError("network namespace %s: %s (was it removed? 'qhca down' and 'qhca "
                           "up' make it again)" % (ns, e.strerror))
    try:
        try:
            setns_net(target)
        except OSError as e:
            raise RuntimeError("cannot enter network namespace %s: %s" % (ns, e))
        try:
            fd = tun_open(ifname, " in namespace " + ns)
        finally:
            setns_net(own)
    finally:
        os.close(own)
        os.close(target)
    return fd


def tun_open(ifname, where):
    """A descriptor of tap IFNAME in this thread's namespace (WHERE names it in errors)."""
    fd = -1
    try:
        fd = os.open("/dev/net/tun", os.O_RDWR)
        fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH22x", ifname.encode(), IFF_TAP | IFF_NO_PI))
    except OSError as e:
        if fd >= 0:
            os.close(fd)
        raise RuntimeError("tap %s%s: %s" % (ifname, where, e.strerror or e))
    return fd
