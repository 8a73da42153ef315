# SPDX-License-Identifier: GPL-2.0-or-later
"""The fabric switch (qhca-fabric): starting it, its control socket, and 'qhca fabric'."""
import json
import os
import re
import socket
import subprocess

from .common import CONTROL_SOCK, FABRIC, RUN, alive, die, info, load_state
from .netns import netns_path, setns_net


def fabric_netdev(port):
    """The -netdev of a NIC on fabric port PORT (its unix socket)."""
    return ("stream,id=fabric,server=off,addr.type=unix,"
            "addr.path=%s/fabric/port%d.sock,reconnect-ms=1000" % (RUN, port))


def dgram_netdev(local, remote):
    return ("dgram,id=fabric,local.type=inet,local.host=127.0.0.1,local.port=%d,"
            "remote.type=inet,remote.host=127.0.0.1,remote.port=%d" % (local, remote))


def start_fabric(fab_cmd, netns):
    """Start qhca-fabric (inside network namespace NETNS if given); returns the Popen."""
    fab_log = open(os.path.join(RUN, "fabric.log"), "w")
    nsfd = os.open(netns_path(netns), os.O_RDONLY) if netns else None
    try:
        # The child enters the namespace between fork and exec; the descriptor is close-on-exec.
        return subprocess.Popen(fab_cmd, stdout=fab_log, stderr=fab_log,
                                stdin=subprocess.DEVNULL, start_new_session=True,
                                preexec_fn=(lambda: setns_net(nsfd)) if netns else None)
    except (OSError, subprocess.SubprocessError) as e:
        die("cannot start %s%s: %s" % (FABRIC, " in namespace %s" % netns if netns else "", e))
    finally:
        fab_log.close()
        if nsfd is not None:
            os.close(nsfd)


def fabric_request(line):
    """Send one command LINE on the fabric's control socket; returns (raw reply, parsed)."""
    if "\n" in line or "\r" in line:
        die("a fabric command is one line")
    if len(line.encode()) > 4095:
        die("a fabric command is at most 4095 bytes")
    state = load_state()
    path = CONTROL_SOCK
    if state and state.get("netdev", "fabric") != "fabric":
        die("this run has no fabric: its guests are on --netdev %s" % state["netdev"])
    if state and "control" in state and not state["control"]:
        die("the fabric of this run has no control socket (%s was built before it had one): "
            "run 'make all', then 'qhca down' and 'qhca up'" % FABRIC)
    if state and state.get("control"):
        path = state["control"]
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(10)
    try:
        s.connect(path)
    except OSError as e:
        if not state:
            die("nothing is up; run 'qhca up' first (%s: %s)" % (path, e.strerror or e))
        die("cannot connect to the fabric's control socket %s: %s%s" % (
            path, e.strerror or e,
            "" if alive(state.get("fabric_pid")) else " (the fabric is not running)"))
    try:
        s.sendall(line.encode() + b"\n")
        buf = b""
        while not buf.endswith(b"\n"):
            data = s.recv(65536)
            if not data:
                break
            buf += data
    except OSError as e:
        die("fabric control socket %s: %s" % (path, e.strerror or e))
    finally:
        s.close()
    raw = buf.decode(errors="replace").strip()
    if not raw:
        die("the fabric closed the control connection without a reply to %r" % line)
    try:
        reply = json.loads(raw)
    except ValueError:
        die("the fabric's reply is not JSON: %r" % raw)
    if not isinstance(reply, dict) or "ok" not in reply:
        die("the fabric's reply has no 'ok': %r" % raw)
    return raw, reply


def fabric_call(line):
    raw, reply = fabric_request(line)
    if not reply["ok"]:
        die("fabric: %s" % reply.get("error", raw))
    return raw, reply


def fmt_percent(v):
    return "%g%%" % v


def fmt_us(v):
    v = int(v)
    if v and v % 1000000 == 0:
        return "%ds" % (v // 1000000)
    if v and v % 1000 == 0:
        return "%dms" % (v // 1000)
    return "%dus" % v


# How 'show' names each impairment (the names 'set' takes) and formats its value; a key not
# here is shown as key=value.
IMPAIRMENTS = {
    "loss": ("loss", fmt_percent), "reorder": ("reorder", fmt_percent),
    "dup": ("dup", fmt_percent), "corrupt": ("corrupt", fmt_percent),
    "delay_us": ("delay", fmt_us), "jitter_us": ("jitter", fmt_us),
    "rate_mbit": ("rate", lambda v: "%gMbit/s" % v), "mtu": ("mtu", lambda v: "%d" % v),
    "drop": ("drop", lambda v: "%d" % v),
}


def fmt_impairments(d):
    if not isinstance(d, dict):
        return "-" if d in (None, {}) else str(d)
    out = []
    for k, v in d.items():
        if v in (0, 0.0, None, False, "", "0"):
            continue
        name, fmt = IMPAIRMENTS.get(k, (k, str))
        try:
            out.append("%s=%s" % (name, fmt(v)))
        except (TypeError, ValueError):
            out.append("%s=%s" % (name, v))
    return " ".join(out) or "-"


def fmt_cell(v):
    if v is True:
        return "yes"
    if v is False:
        return "no"
    if v is None:
        return "-"
    if isinstance(v, float):
        return "%g" % v
    if isinstance(v, (dict, list)):
        return json.dumps(v, separators=(",", ":"))
    return str(v)


def table(header, rows):
    """Columns aligned; those that hold only numbers to the right."""
    cols = list(zip(header, *rows))
    widths = [max(len(str(c)) for c in col) for col in cols]
    numeric = [all(re.fullmatch(r"-?[0-9.]+|-", str(c)) for c in col[1:])
               and any(str(c) != "-" for c in col[1:]) for col in cols]
    lines = []
    for r in [header] + rows:
        cells = [str(c).rjust(w) if num else str(c).ljust(w)
                 for c, w, num in zip(r, widths, numeric)]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)


def union_keys(dicts):
    keys = []
    for d in dicts:
        for k in d if isinstance(d, dict) else ():
            if k not in keys:
                keys.append(k)
    return keys


def show_fabric(reply):
    ports = [p for p in reply.get("ports") or [] if isinstance(p, dict)]
    head = ["%d port%s" % (len(ports), "" if len(ports) == 1 else "s")]
    if "seed" in reply:
        head.append("seed %s" % reply["seed"])
    if isinstance(reply.get("uptime_ms"), (int, float)):
        head.append("up %.1f s" % (reply["uptime_ms"] / 1000.0))
    if "capture" in reply:
        head.append("capture %s" % (reply["capture"] or "off"))
    for k, v in reply.items():
        if k not in ("ok", "seed", "uptime_ms", "capture", "ports"):
            head.append("%s %s" % (k, fmt_cell(v)))
    print("fabric: " + ", ".join(head))
    if not ports:
        return
    known = ("port", "connected", "link", "in", "out", "counters")
    extra = [k for k in union_keys(ports) if k not in known]
    rows = [[fmt_cell(p.get("port")), fmt_cell(p.get("connected")), fmt_cell(p.get("link"))]
            + [fmt_cell(p.get(k)) for k in extra]
            + [fmt_impairments(p.get("in")), fmt_impairments(p.get("out"))] for p in ports]
    print()
    print(table(["PORT", "CONNECTED", "LINK"] + [k.upper() for k in extra]
                + ["IN (sent by the guest)", "OUT (to the guest)"], rows))
    counters = [p.get("counters") if isinstance(p.get("counters"), dict) else {} for p in ports]
    dir_keys = union_keys([c.get(d) for c in counters for d in ("in", "out")])
    dirs = [d for d in ("in", "out") if any(isinstance(c.get(d), dict) for c in counters)]
    dirs += [k for k in union_keys(counters)
             if k not in dirs and any(isinstance(c.get(k), dict) for c in counters)]
    if dirs:
        rows = []
        for p, c in zip(ports, counters):
            for d in dirs:
                if isinstance(c.get(d), dict):
                    rows.append([fmt_cell(p.get("port")), d]
                                + [fmt_cell(c[d].get(k, "-")) for k in dir_keys])
        print()
        print(table(["PORT", "DIR"] + [k.upper() for k in dir_keys], rows))
    scalars = [k for k in union_keys(counters) if k not in dirs]
    if scalars:
        rows = [[fmt_cell(p.get("port"))] + [fmt_cell(c.get(k, "-")) for k in scalars]
                for p, c in zip(ports, counters)]
        print()
        print(table(["PORT"] + [k.upper() for k in scalars], rows))


PORTS_RE = re.compile(r"all|\d+(-\d+)?(,\d+(-\d+)?)*")


def check_ports(ports):
    if not PORTS_RE.fullmatch(ports):
        die("PORTS is N, N-M, N,M,... or all, not %r" % ports)
    return ports


def cmd_fabric(args):
    v = args.fverb
    if v == "show":
        raw, reply = fabric_call("show")
        if args.json:
            print(raw)
        else:
            show_fabric(reply)
        return 0
    if v == "raw":
        raw, reply = fabric_request(" ".join(args.line))
        print(raw)
        return 0 if reply["ok"] else 1
    if v == "set":
        words = list(args.settings)
        line = ["set", check_ports(args.ports)]
        if words and words[0] in ("in", "out"):
            line.append(words.pop(0))
        if not words:
            die("usage: qhca fabric set PORTS [in|out] KEY=VALUE...")
        for w in words:
            if not re.fullmatch(r"[a-z_]+=\S+", w):
                die("%r is not KEY=VALUE (e.g. loss=5%%, delay=2ms, rate=100, mtu=1500)" % w)
        line += words
    elif v == "clear":
        line = ["clear"] + ([check_ports(args.ports)] if args.ports else [])
    elif v == "link":
        line = ["link", check_ports(args.ports), args.state]
    elif v == "zero":
        line = ["zero"]
    elif v == "seed":
        line = ["seed", str(args.seed)]
    elif v == "capture":
        what = list(args.what)
        if what == ["stop"]:
            line = ["capture", "stop"]
        else:
            if len(what) == 2 and what[0] == "start":
                what = what[1:]
            if len(what) != 1:
                die("usage: qhca fabric capture FILE | stop")
            path = os.path.abspath(what[0])
            if not os.path.isdir(os.path.dirname(path)):
                die("capture %s: no directory %s" % (path, os.path.dirname(path)))
            line = ["capture", "start", path]
    elif v == "script":
        path = os.path.abspath(args.file)
        if not os.path.isfile(path):
            die("script %s: no such file" % path)
        line = ["script", path]
    elif v == "at":
        if not args.command:
            die("usage: qhca fabric at TIME COMMAND...")
        t = args.time
        if not re.fullmatch(r"\d+(\.\d+)?(us|ms|s)?", t):
            die("TIME is a number with us, ms or s (plain: ms), not %r" % t)
        if not re.search(r"[a-z]$", t):
            t += "ms"
        line = ["at", t] + list(args.command)
    else:
        die("unknown fabric command %r" % v)
    for w in line:
        if not w or re.search(r"\s", w):
            die("%r: a fabric command's words have no spaces" % w)
    fabric_call(" ".join(line))
    info("fabric: %s: ok" % " ".join(line))
    return 0
