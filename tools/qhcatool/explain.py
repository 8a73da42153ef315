# SPDX-License-Identifier: GPL-2.0-or-later
"""'qhca explain': run an RDMA operation with the devices' step trace and the fabric's
capture on, then hand both to the story renderer (story.py).
"""
import json
import os
import re
import shlex
import sys
import time

from .common import RUN, die, info, load_state, running_vm
from .fabric import fabric_call
from .guest import guest_run, terminal_text
from .qmp import qmp
from . import story


# Programs that run as a server (as given) and a client (the server's address added).
PAIR_PROGRAMS = re.compile(r"^(ib_(write|read|send|atomic)_(bw|lat)|ibv_(rc|uc|ud|srq|xsrq)_pingpong|"
                           r"qhca-lesson)$")


def step_logs(i, log, offset, moved_before, moved_after):
    """The QEMU logs of guest I that hold the run's steps, each with the offset to read from:
    its log from OFFSET; if it moved meanwhile ('qhca migrate'), the log of each QEMU it
    left (vmI.qemu.log.mGEN) from there and the last one from its start."""
    if moved_after == moved_before:
        return [(log, offset)]
    paths = ["%s.m%d" % (log, g) for g in range(moved_before + 1, moved_after + 1)] + [log]
    return [(p, offset if k == 0 else 0) for k, p in enumerate(paths) if os.path.exists(p)]


def cmd_explain(args):
    """Run an RDMA operation between two guests with the teaching trace on and the fabric
    capturing, then tell it as a story (docs/tutorial.md)."""
    state = load_state()
    argv = args.cmd[1:] if args.cmd and args.cmd[0] == "--" else args.cmd
    if args.render:
        if argv:
            die("--render DIR takes no command")
        return story.main(["qhca explain", args.render] + (["--all"] if args.all else []))
    if not argv:
        die("usage: qhca explain [--client I] [--server J] [--server-cmd CMD] [--out DIR] -- CMD...")
    cli, srv = args.client, args.server
    client_cmd = " ".join(shlex.quote(a) for a in argv) if len(argv) > 1 else argv[0]
    server_cmd = args.server_cmd
    if args.alone and server_cmd is not None:
        die("--alone runs no server: drop --server-cmd")
    if server_cmd is None and not args.alone and \
            PAIR_PROGRAMS.match(os.path.basename(shlex.split(client_cmd)[0])):
        server_cmd = client_cmd
        client_cmd += " 192.168.77.%d" % srv
    running_vm(state, cli)
    if server_cmd is not None:
        running_vm(state, srv)
        if cli == srv:
            die("--client and --server name the same guest")
    out = os.path.abspath(args.out or os.path.join(RUN, "explain"))
    os.makedirs(out, exist_ok=True)
    for name in ("story.txt", "story.jsonl", "sequence.svg", "capture.pcapng", "steps.raw"):
        try:
            os.unlink(os.path.join(out, name))
        except FileNotFoundError:
            pass
    fabric = state.get("netdev", "fabric") == "fabric"
    vms = [cli] + ([srv] if server_cmd is not None else [])
    logs = {i: os.path.join(RUN, "vm%d.qemu.log" % i) for i in vms}
    offsets = {i: os.path.getsize(logs[i]) for i in vms}
    moves = {vm["index"]: vm.get("migrations", 0) for vm in state["vms"]}
    cap = os.path.join(out, "capture.pcapng")
    if fabric:
        _, shown = fabric_call("show")
        if shown.get("capture"):
            die("the fabric is capturing into %s already: the story's frame numbers need a "
                "capture of their own ('qhca fabric capture stop' first)" % shown["capture"])
        fabric_call("capture start %s" % cap)
    else:
        info("no fabric in this run (--netdev %s): the story has no capture" % state["netdev"])
    info("tracing on in %s" % ", ".join("vm%d" % i for i in vms))
    rc = 1
    try:
        for i in vms:
            qmp(state, i, "trace-event-set-state", {"name": "qhca_step", "enable": True})
        if server_cmd is not None:
            info("vm%d (server): %s" % (srv, server_cmd))
            guest_run(state, srv, server_cmd, background_log="/tmp/explain-server.log")
            # qhca-lesson's client waits for its server to listen; perftest's does not.
            time.sleep(0.3 if server_cmd.startswith("qhca-lesson") else 1.5)
        info("vm%d (client): %s" % (cli, client_cmd))
        rc, output = guest_run(state, cli, "timeout %d %s" % (args.timeout, client_cmd))
        sys.stderr.write(terminal_text(output))
        if server_cmd is not None:
            deadline = time.time() + 20
            while time.time() < deadline:
                src, _ = guest_run(state, srv, "test -s /tmp/explain-server.log.rc")
                if src == 0:
                    break
                time.sleep(0.5)
            else:
                info("vm%d: the server did not finish; stopping it" % srv)
                guest_run(state, srv, "pkill -f %s" % shlex.quote(shlex.split(server_cmd)[0]))
            _, srv_out = guest_run(state, srv, "cat /tmp/explain-server.log; "
                                               "cat /tmp/explain-server.log.rc")
            lines = srv_out.rstrip("\n").split("\n")
            if lines and lines[-1].strip() != "0":
                info(terminal_text("vm%d: the server failed (status %s):\n%s" % (
                    srv, lines[-1], "\n".join(lines[:-1]))))
                rc = rc or 1
        time.sleep(0.2)		# the last ACKs and completions
    finally:
        for i in vms:
            try:
                qmp(state, i, "trace-event-set-state", {"name": "qhca_step", "enable": False})
            except (OSError, RuntimeError) as e:
                info("vm%d: cannot turn tracing off: %s" % (i, e))
        if fabric:
            fabric_call("capture stop")
    steps = []
    now = {vm["index"]: vm.get("migrations", 0) for vm in load_state()["vms"]}
    with open(os.path.join(out, "steps.raw"), "w") as f:
        for i in vms:
            for path, offset in step_logs(i, logs[i], offsets[i], moves[i], now[i]):
                for st in story.read_steps("vm%d" % i, path, offset):
                    steps.append(st)
                with open(path, "rb") as lf:
                    lf.seek(offset)
                    for raw in lf:
                        line = raw.decode("utf-8", "replace")
                        if "qhca_step t=" in line:
                            f.write("vm%d %s" % (i, line if line.endswith("\n") else line + "\n"))
    ports = {"vm%d" % vm["index"]: "port%d" % vm["port"] for vm in state["vms"] if "port" in vm}
    title = "qhca explain: %s" % client_cmd
    with open(os.path.join(out, "meta.json"), "w") as f:
        json.dump({"ports": ports, "title": title, "client": cli, "server": srv,
                   "client_cmd": client_cmd, "server_cmd": server_cmd, "status": rc}, f)
    if not steps:
        if rc:
            die("the command failed (status %d) before the device did anything" % rc)
        die("no step was traced: is this QEMU built with the teaching trace ('make qemu')?")
    text = story.render(out, steps, story.read_pcapng(cap) if fabric else [],
                               ports, title, args.all)
    sys.stdout.write(text)
    info("written: %s/story.txt, story.jsonl, sequence.svg%s" %
         (out, ", capture.pcapng (frame numbers as in the story)" if fabric else ""))
    if rc:
        info("the command failed (status %d): the story shows how far it got" % rc)
    return rc
