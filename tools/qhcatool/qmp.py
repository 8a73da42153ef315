# SPDX-License-Identifier: GPL-2.0-or-later
"""QEMU's machine protocol (QMP) to a guest's QEMU: 'link' and 'device'."""
import json
import os
import select
import socket
import time

from .common import RUN, die, load_state, running_vm, vm_entry
from .fabric import fabric_request


class Qmp:
    """A QMP connection to guest I's QEMU; events that arrive are kept in self.events."""

    def __init__(self, state, i, path=None):
        vm_entry(state, i)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(10)
        self.sock.connect(path or os.path.join(RUN, "vm%d.qmp" % i))
        self.buf = b""
        self.events = []
        self.read()  # greeting
        self.call("qmp_capabilities")

    def read(self, timeout=10.0):
        """The next message; socket.timeout after TIMEOUT s (nothing read is lost)."""
        deadline = time.time() + timeout
        while b"\n" not in self.buf:
            r, _, _ = select.select([self.sock], [], [], max(0.0, deadline - time.time()))
            if not r:
                raise socket.timeout("no QMP message within %g s" % timeout)
            data = self.sock.recv(65536)
            if not data:
                raise RuntimeError("QEMU closed the QMP connection")
            self.buf += data
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def call(self, cmd, args=None, timeout=10.0):
        msg = {"execute": cmd}
        if args:
            msg["arguments"] = args
        self.sock.sendall(json.dumps(msg).encode() + b"\n")
        while True:
            reply = self.read(timeout)
            if "event" in reply:
                self.events.append(reply)
                continue
            if "error" in reply:
                raise RuntimeError("%s: %s" % (cmd, reply["error"].get("desc",
                                                                       str(reply["error"]))))
            return reply.get("return")

    def wait_event(self, match, timeout):
        """The first event (kept or new) for which MATCH is true, or None after TIMEOUT s."""
        deadline = time.time() + timeout
        while True:
            for ev in self.events:
                if match(ev):
                    self.events.remove(ev)
                    return ev
            left = deadline - time.time()
            if left <= 0:
                return None
            try:
                reply = self.read(left)
            except socket.timeout:
                return None
            if "event" in reply:
                self.events.append(reply)

    def close(self):
        self.sock.close()


def qmp_session(state, i, commands):
    """Run QMP COMMANDS ([(name, arguments or None)...]) on guest I's QEMU, in order, on one
    connection; returns their 'return' values."""
    q = Qmp(state, i)
    try:
        return [q.call(c, a) for c, a in commands]
    finally:
        q.close()


def qmp(state, i, command, arguments=None):
    """Run one QMP command on guest I's QEMU; returns its 'return' value."""
    return qmp_session(state, i, [(command, arguments)])[0]


def cmd_link(args):
    state = load_state()
    vm = running_vm(state, args.index)
    try:
        qmp(state, args.index, "set_link", {"name": "qhca0", "up": args.state == "up"})
    except (OSError, RuntimeError) as e:
        die("vm%d: set_link failed: %s" % (args.index, e))
    # An InfiniBand cable has two ends: the switch's port goes down and up with the guest's,
    # so the subnet manager sees it (SwitchInfo PortStateChange) and brings it back.
    if state.get("ib") and vm.get("port"):
        raw, reply = fabric_request("link %d %s" % (vm["port"], args.state))
        if not reply.get("ok"):
            die("fabric link %d %s: %s" % (vm["port"], args.state, raw))
    return 0


def cmd_device(args):
    """Guest I's device's own view of its objects (the QOM property 'objects' over QMP)."""
    state = load_state()
    running_vm(state, args.index)
    try:
        raw = qmp(state, args.index, "qom-get",
                  {"path": "/machine/peripheral/qhca0", "property": "objects"})
        view = json.loads(raw)
    except (OSError, RuntimeError, ValueError) as e:
        die("vm%d: cannot read the device's objects: %s" % (args.index, e))
    if args.json:
        print(json.dumps(view))
        return 0
    if "error" in view:
        die("vm%d: %s" % (args.index, view["error"]))
    port = view["port"]
    c = view["counts"]
    print("qhca in vm%d: %s port, link %s%s; %d QP, %d CQ, %d SRQ, %d MR, %d PD, %d user contexts"
          % (args.index, view["link"].upper(), "up" if port["link_up"] else "down",
             ", LID %d (SM %d), state %d" % (port["lid"], port["sm_lid"], port["state"])
             if view["link"] == "ib" else ", MAC " + port["mac"],
             c["qp"], c["cq"], c["srq"], c["mr"], c["pd"], c["uctx"]))
    if view["qps"]:
        print("QPs   qpn      type     state  sq pi/ci      rq pi/ci      next_psn unacked  "
              "expected dest")
        for q in view["qps"]:
            print("      0x%06x %-8s %-6s %6d/%-6d %6d/%-6d 0x%06x 0x%06x 0x%06x 0x%06x"
                  % (q["qpn"], q["type"], q["state"], q["sq"]["producer"], q["sq"]["consumer"],
                     q["rq"]["producer"], q["rq"]["consumer"], q["next_psn"],
                     q["unacked_psn"], q["expected_psn"], q["dest_qpn"]))
    if view["cqs"]:
        print("CQs   cqn        entries producer armed")
        for q in view["cqs"]:
            armed = q["armed"]
            print("      0x%08x %7d %8d %s" % (q["cqn"], q["entries"], q["producer"],
                                          armed if isinstance(armed, str) else
                                          "yes" if armed else "no"))
    if view["srqs"]:
        print("SRQs  srqn       entries producer consumer limit")
        for q in view["srqs"]:
            print("      0x%08x %7d %8d %8d %5d" % (q["srqn"], q["entries"], q["producer"],
                                                   q["consumer"], q["limit"]))
    if view["mrs"]:
        print("MRs   key        kind pd         iova               length     access valid")
        for m in view["mrs"]:
            print("      %s %-4s 0x%08x %-18s %10d %-6s %s"
                  % (m["key"], m["kind"], m["pd"], m["iova"], m["length"], m["access"],
                     "yes" if m["valid"] else "no"))
    return 0
