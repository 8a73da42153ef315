# SPDX-License-Identifier: GPL-2.0-or-later
"""Guests as libvirt domains ('up --libvirt URI', docs/libvirt.md).

The launcher writes each guest's domain XML (vmI.xml in the run directory), defines it with
'virsh define' and starts it with 'virsh start'; libvirt runs qhca's QEMU (the domain's
<emulator>). What libvirt has no element for goes in <qemu:commandline>: the firmware search
path of a self-built QEMU, the management NIC (user-mode networking, restrict=on, ssh
forwarded from 127.0.0.1), the QMP socket the launcher's own commands use, and, on the
fabric, the qhca device with its stream netdev (libvirt has no interface for a unix stream
socket). On a bridge, the qhca device is a plain libvirt interface:
<interface type='bridge'> with <model type='qhca'/>, and libvirt makes the tap.
"""
import os
import re
import subprocess
import urllib.parse
import time
import uuid
from xml.sax.saxutils import quoteattr, escape

from .common import QEMU, QEMU_DIR, RUN, SEABIOS, mgmt_mac, vm_mac, device_props

QEMU_NS = "http://libvirt.org/schemas/domain/qemu/1.0"
# The domain's <metadata> names the run directory that made it: 'up' and 'down' touch a
# domain of that name only if it is theirs.
RUN_NS = "urn:qhca:run"

# Devices of <qemu:commandline> come before libvirt's own in QEMU's order; without an address
# they would take the slots libvirt gives its PCIe root ports (1, 2, ...). Slots of their own:
SLOT_MGMT = "bus=pcie.0,addr=0x10"
SLOT_QHCA = "bus=pcie.0,addr=0x11"


def domain_name(run_id, i):
    """Guest I's domain: the run's id keeps two runs on one libvirt apart."""
    return "qhca-%s-vm%d" % (run_id, i)


def _qemu_args(args):
    return "".join("    <qemu:arg value=%s/>\n" % quoteattr(a) for a in args)


def local_uri(uri):
    """URI names a libvirt on this machine (qemu:///system, qemu:///session, ?socket=...): the
    launcher finds the guests' QEMU processes here and reaches their sockets by path."""
    u = urllib.parse.urlsplit(uri)
    return u.scheme in ("qemu", "qemu+unix") and not u.netloc


def _prop_type(v):
    """The type <qemu:property> needs for value V: QEMU's JSON -device takes no string for
    a boolean or number property."""
    if v in ("on", "off", "true", "false", "yes", "no"):
        return "bool", "true" if v in ("on", "true", "yes") else "false"
    try:
        return "unsigned", str(int(v, 0))
    except ValueError:
        return "string", v


def _override(alias, props):
    """<qemu:override> setting the device ALIAS's properties PROPS (",k=v,k=v")."""
    out = ""
    for prop in props.split(",")[1:]:
        k, _, v = prop.partition("=")
        kind, v = _prop_type(v)
        out += "        <qemu:property name=%s type='%s' value=%s/>\n" % (
            quoteattr(k), kind, quoteattr(v))
    if not out:
        return ""
    return ("  <qemu:override>\n    <qemu:device alias=%s>\n      <qemu:frontend>\n%s"
            "      </qemu:frontend>\n    </qemu:device>\n  </qemu:override>\n"
            % (quoteattr(alias), out))


def domain_xml(name, i, mem, ssh_port, image=None, cmdline=None, disk=None, disk_format="raw",
               fabric_netdev=None, bridge=None, link=None, extra=()):
    """The domain XML of guest I: booting IMAGE (kernel, initrd) with CMDLINE, or DISK; its
    qhca device on FABRIC_NETDEV (a -netdev value with id=fabric) or on libvirt's tap of
    BRIDGE."""
    run = RUN
    if disk:
        os_boot = "    <boot dev='hd'/>\n"
        disks = ("    <disk type='file' device='disk'>\n"
                 "      <driver name='qemu' type=%s/>\n"
                 "      <source file=%s/>\n"
                 "      <target dev='vda' bus='virtio'/>\n"
                 "      <transient/>\n"
                 "    </disk>\n" % (quoteattr(disk_format), quoteattr(disk)))
        on_reboot = "restart"
    else:
        os_boot = ("    <kernel>%s</kernel>\n    <initrd>%s</initrd>\n    <cmdline>%s</cmdline>\n"
                   % (escape(image[0]), escape(image[1]), escape(cmdline)))
        disks = ""
        on_reboot = "destroy"	# as -no-reboot: a panic stops the guest
    props = device_props()
    if link:
        props = ",link=" + link + props
    qargs = ["-L", SEABIOS, "-L", os.path.join(QEMU_DIR, "pc-bios", "optionrom"),
             "-netdev", "user,id=mgmt,restrict=on,hostfwd=tcp:127.0.0.1:%d-:22" % ssh_port,
             "-device", "virtio-net-pci,netdev=mgmt,romfile=,mac=%s,%s" % (mgmt_mac(i),
                                                                          SLOT_MGMT),
             "-qmp", qmp_arg(i)] + list(extra)
    if fabric_netdev:
        qargs += ["-netdev", fabric_netdev,
                  "-device", "qhca,id=qhca0,netdev=fabric,mac=%s,%s%s" % (vm_mac(i), SLOT_QHCA,
                                                                          props)]
        iface = override = ""
    else:
        # libvirt passes <model type='qhca'/> through as the device's driver; properties
        # other than the MAC (mtu=, link=) it has no element for: <qemu:override>.
        iface = ("    <interface type='bridge'>\n"
                 "      <source bridge=%s/>\n"
                 "      <mac address=%s/>\n"
                 "      <model type='qhca'/>\n"
                 "      <alias name='ua-qhca0'/>\n"
                 "    </interface>\n" % (quoteattr(bridge), quoteattr(vm_mac(i))))
        override = _override("ua-qhca0", props)
    return ("<domain type='qemu' xmlns:qemu=%s>\n"
            "  <name>%s</name>\n"
            "  <uuid>%s</uuid>\n"
            "  <metadata><qhca:run xmlns:qhca=%s dir=%s/></metadata>\n"
            "  <memory unit='MiB'>%d</memory>\n"
            "  <vcpu>1</vcpu>\n"
            "  <os>\n"
            "    <type arch='x86_64' machine='q35'>hvm</type>\n"
            "%s"
            "  </os>\n"
            "  <features><acpi/></features>\n"
            "  <cpu mode='maximum' check='none'/>\n"
            "  <on_poweroff>destroy</on_poweroff>\n"
            "  <on_reboot>%s</on_reboot>\n"
            "  <on_crash>destroy</on_crash>\n"
            "  <devices>\n"
            "    <emulator>%s</emulator>\n"
            "%s"
            "    <serial type='unix'>\n"
            "      <source mode='bind' path=%s/>\n"
            "      <log file=%s/>\n"
            "      <target port='0'/>\n"
            "    </serial>\n"
            "%s"
            "    <controller type='usb' model='none'/>\n"
            "    <memballoon model='none'/>\n"
            "  </devices>\n"
            "  <qemu:commandline>\n"
            "%s"
            "  </qemu:commandline>\n"
            "%s"
            "</domain>\n"
            % (quoteattr(QEMU_NS), escape(name), uuid.uuid4(), quoteattr(RUN_NS),
               quoteattr(os.path.realpath(run)), mem, os_boot, on_reboot, escape(QEMU), disks,
               quoteattr("%s/vm%d.console" % (run, i)), quoteattr("%s/vm%d.log" % (run, i)),
               iface, _qemu_args(qargs), override))


def virsh(uri, *args, check=True):
    """virsh -c URI ARGS; RuntimeError with virsh's message when it fails and CHECK."""
    try:
        r = subprocess.run(["virsh", "-q", "-c", uri] + list(args), stdin=subprocess.DEVNULL,
                           capture_output=True, text=True, timeout=120)
    except FileNotFoundError:
        raise RuntimeError("virsh is not installed (Debian: apt install libvirt-clients "
                           "libvirt-daemon-system libvirt-daemon-driver-qemu)")
    except subprocess.TimeoutExpired:
        raise RuntimeError("virsh -c %s %s: no answer in 120 s" % (uri, " ".join(args)))
    if check and r.returncode:
        raise RuntimeError("virsh -c %s %s: %s" % (uri, " ".join(args),
                                                   (r.stderr or r.stdout).strip()))
    return r


def qmp_arg(i):
    """Guest I's QMP socket as the launcher gives it to QEMU: with the domain's name, how the
    launcher knows its QEMU among the processes."""
    return "unix:%s/vm%d.qmp,server=on,wait=off" % (RUN, i)


def qemu_pid(name, i, timeout=10.0):
    """The pid of the QEMU that libvirt runs for domain NAME, guest I: qhca's QEMU with
    -name guest=NAME and this run's QMP socket."""
    want = ("guest=" + name).encode()
    qmp = qmp_arg(i).encode()
    deadline = time.time() + timeout
    while True:
        for d in os.listdir("/proc"):
            if not d.isdigit():
                continue
            try:
                with open("/proc/%s/cmdline" % d, "rb") as f:
                    argv = f.read().split(b"\0")
            except OSError:
                continue
            if argv[0] == QEMU.encode() and b"-name" in argv[:-1] and qmp in argv and \
                    argv[argv.index(b"-name") + 1].split(b",")[0] == want:
                return int(d)
        if time.time() > deadline:
            return None
        time.sleep(0.1)


def libvirt_start(vm):
    """Define (again: the XML may be new) and start guest VM's domain; its QEMU's pid in VM."""
    lv = vm["libvirt"]
    i = vm["index"]
    path = os.path.join(RUN, "vm%d.xml" % i)
    virsh(lv["uri"], "define", path)
    virsh(lv["uri"], "start", lv["domain"])
    pid = qemu_pid(lv["domain"], i)
    if not pid:
        raise RuntimeError("vm%d: libvirt started domain %s but no QEMU of it is running; "
                           "see libvirt's log of it (qemu/%s.log in libvirt's log directory)"
                           % (i, lv["domain"], lv["domain"]))
    vm["pid"] = pid


def ours(uri, name):
    """Domain NAME of URI: None if there is none, else whether this run made it."""
    r = virsh(uri, "dumpxml", name, check=False)
    if r.returncode:
        return None
    return re.search(r"<qhca:run [^>]*dir=%s" % re.escape(quoteattr(os.path.realpath(RUN))),
                     r.stdout) is not None


def libvirt_remove(vm):
    """Stop (if it runs) and undefine guest VM's domain if this run made it; returns what went
    wrong, or None."""
    lv = vm["libvirt"]
    mine = ours(lv["uri"], lv["domain"])
    if mine is None:
        return None
    if not mine:
        return ("libvirt's domain %s was not made by this run (%s): left alone"
                % (lv["domain"], RUN))
    virsh(lv["uri"], "destroy", lv["domain"], check=False)
    r = virsh(lv["uri"], "undefine", lv["domain"], check=False)
    if r.returncode and not re.search(r"failed to get domain|Domain not found",
                                      r.stderr + r.stdout):
        return "virsh undefine %s: %s" % (lv["domain"], r.stderr.strip())
    return None
