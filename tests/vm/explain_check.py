#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Check what 'qhca explain' wrote for one qhca-lesson operation:

  explain_check.py DIR OP

OP is write, send, read, atomic, bad-rkey, loss (a write with one packet dropped by the
fabric) or rnr. The story (story.jsonl) must have every expected step in the right order;
each packet's values must agree with the capture as tshark decodes it (frame number, PSN,
destination QP, RETH rkey and length, size); keys and lengths must agree between the sides;
the SVG must be well-formed and name every actor. Exit status 0 when all holds; each
failure is printed."""
import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET

fails = []


def fail(msg):
    fails.append(msg)
    print("FAIL: " + msg)


def want(cond, msg):
    if not cond:
        fail(msg)
    return cond


def load(d):
    with open(os.path.join(d, "story.jsonl")) as f:
        return [json.loads(line) for line in f]


def matches(e, vm, kind, /, **fields):
    if e["vm"] != vm or e["kind"] != kind:
        return False
    for k, v in fields.items():
        got = e["fields"].get(k)
        if callable(v):
            if got is None or not v(got):
                return False
        elif got != v:
            return False
    return True


def in_order(story, expected):
    """Each (vm, kind, fields) of EXPECTED found after the one before; returns the steps."""
    at, found = 0, []
    for vm, kind, fields in expected:
        for i in range(at, len(story)):
            if matches(story[i], vm, kind, **fields):
                found.append(story[i])
                at = i + 1
                break
        else:
            fail("no step %s %s %s after step %d" % (vm, kind, fields, at))
            return found
    return found


def tshark(cap):
    """frame number -> decoded fields, as tshark sees the capture."""
    fields = ["frame.number", "frame.len", "infiniband.bth.opcode", "infiniband.bth.psn",
              "infiniband.bth.destqp", "infiniband.reth.r_key", "infiniband.reth.dmalen",
              "infiniband.aeth.syndrome", "frame.comment"]
    p = subprocess.run(["tshark", "-r", cap, "-T", "fields", "-E", "separator=\t"] +
                       [a for f in fields for a in ("-e", f)], capture_output=True, text=True)
    want(p.returncode == 0, "tshark failed: %s" % p.stderr.strip())
    out = {}
    for line in p.stdout.splitlines():
        v = line.split("\t")
        if v and v[0].isdigit():
            out[int(v[0])] = dict(zip(fields, v + [""] * (len(fields) - len(v))))
    return out


def check_capture(story, frames):
    """Every packet step with a frame agrees with that frame as tshark decodes it."""
    n = 0
    for e in story:
        if e["kind"] not in ("tx", "rx") or "frame" not in e:
            continue
        n += 1
        fr, f = frames.get(e["frame"]), e["fields"]
        if not want(fr is not None, "step %d: frame %s not in the capture" % (e["n"], e["frame"])):
            continue
        want(int(fr["infiniband.bth.psn"] or -1) == int(f["psn"], 16),
             "step %d: PSN %s, frame %d has %s" % (e["n"], f["psn"], e["frame"],
                                                   fr["infiniband.bth.psn"]))
        want(int(fr["infiniband.bth.destqp"] or "-1", 16) == int(f["dqp"], 16),
             "step %d: QP %s, frame %d has %s" % (e["n"], f["dqp"], e["frame"],
                                                  fr["infiniband.bth.destqp"]))
        if e["kind"] == "tx":
            want(int(fr["frame.len"]) == int(f["size"]),
                 "step %d: %s B, frame %d is %s B" % (e["n"], f["size"], e["frame"],
                                                      fr["frame.len"]))
        if "dmalen" in f:
            want(int(fr["infiniband.reth.r_key"] or "-1", 16) == int(f["rkey"], 16) and
                 int(fr["infiniband.reth.dmalen"] or -1) == int(f["dmalen"]),
                 "step %d: RETH rkey %s len %s, frame %d has %s %s" % (
                     e["n"], f["rkey"], f["dmalen"], e["frame"], fr["infiniband.reth.r_key"],
                     fr["infiniband.reth.dmalen"]))
    want(n >= 2, "only %d packet steps have a frame number" % n)


def check_svg(d):
    try:
        root = ET.parse(os.path.join(d, "sequence.svg")).getroot()
    except ET.ParseError as e:
        fail("sequence.svg is not well-formed: %s" % e)
        return
    texts = " ".join("".join(t.itertext()) for t in root.iter("{http://www.w3.org/2000/svg}text"))
    for actor in ("vm1 application", "vm1 memory", "vm1 qhca device", "the fabric",
                  "vm2 qhca device", "vm2 memory", "vm2 application"):
        want(actor in texts, "sequence.svg names no actor '%s'" % actor)


def data_len(story, vm, first):
    return sum(int(e["fields"]["len"]) for e in story
               if e["vm"] == vm and e["kind"] == "tx" and e["fields"]["op"].startswith(first))


def main():
    d, op = sys.argv[1], sys.argv[2]
    story = load(d)
    with open(os.path.join(d, "story.txt")) as f:
        numbered = [line for line in f if re.match(r"\s*\d+\s+[\d.]+ ms", line)]
    want(len(numbered) == len(story), "story.txt has %d steps, story.jsonl %d" %
         (len(numbered), len(story)))
    want([e["n"] for e in story] == list(range(1, len(story) + 1)), "steps not numbered 1..N")
    want(all(a["t_ns"] <= b["t_ns"] for a, b in zip(story, story[1:])), "steps not in time order")
    ok = lambda v: v == "ok"
    rkey = next((e["fields"]["key"] for e in story if matches(e, "vm2", "mr")), None)
    want(rkey is not None, "vm2 registered no region")
    wr = lambda v: v.startswith("RDMA_WRITE")
    common_head = [("vm1", "post", {}), ("vm1", "db", {"queue": "sq"}),
                   ("vm1", "wqe", {})]
    tail = lambda opname: [("vm1", "cqe", {"status": "SUCCESS", "op": opname}),
                           ("vm1", "eqe", {}), ("vm1", "irq", {"raised": "1"})]
    if op == "write":
        steps = in_order(story, common_head + [
            ("vm1", "key", {"kind": "lkey", "result": ok}),
            ("vm1", "dma", {"dir": "from-guest"}),
            ("vm1", "tx", {"op": "RDMA_WRITE_FIRST", "rkey": rkey, "dmalen": "8192"}),
            ("vm2", "rx", {"op": "RDMA_WRITE_FIRST"}),
            ("vm2", "key", {"kind": "rkey", "key": rkey, "result": ok}),
            ("vm2", "dma", {"dir": "to-guest"}),
            ("vm2", "tx", {"op": "ACKNOWLEDGE", "aeth": "ACK"}),
            ("vm1", "rx", {"op": "ACKNOWLEDGE"})] + tail("RDMA_WRITE"))
        want(data_len(story, "vm1", "RDMA_WRITE") == 8192, "the WRITE's packets carry %d B" %
             data_len(story, "vm1", "RDMA_WRITE"))
    elif op == "send":
        in_order(story, [("vm2", "post", {}), ("vm2", "db", {"queue": "rq"})] + common_head + [
            ("vm1", "tx", {"op": "SEND_FIRST"}), ("vm2", "rx", {"op": "SEND_FIRST"}),
            ("vm2", "rwqe", {"status": "ok"}), ("vm2", "dma", {"dir": "to-guest"}),
            ("vm2", "cqe", {"status": "SUCCESS", "op": "RECV", "len": "8192"}),
            ("vm2", "irq", {"raised": "1"})])
        in_order(story, [("vm2", "tx", {"op": "ACKNOWLEDGE"}), ("vm1", "rx", {"op": "ACKNOWLEDGE"})]
                 + tail("SEND"))
    elif op == "read":
        in_order(story, common_head + [
            ("vm1", "key", {"kind": "lkey", "need": "0x1", "result": ok}),
            ("vm1", "tx", {"op": "RDMA_READ_REQUEST", "rkey": rkey, "dmalen": "8192"}),
            ("vm2", "rx", {"op": "RDMA_READ_REQUEST"}),
            ("vm2", "key", {"kind": "rkey", "need": "0x4", "result": ok}),
            ("vm2", "dma", {"dir": "from-guest"}),
            ("vm2", "tx", {"op": "RDMA_READ_RESPONSE_FIRST"}),
            ("vm1", "rx", {"op": "RDMA_READ_RESPONSE_FIRST"}),
            ("vm1", "dma", {"dir": "to-guest"})] + tail("RDMA_READ"))
        want(data_len(story, "vm2", "RDMA_READ_RESPONSE") == 8192,
             "the READ responses carry %d B" % data_len(story, "vm2", "RDMA_READ_RESPONSE"))
    elif op == "atomic":
        in_order(story, common_head + [
            ("vm1", "tx", {"op": "FETCH_ADD", "rkey": rkey, "swap_add": "0x1"}),
            ("vm2", "rx", {"op": "FETCH_ADD"}),
            ("vm2", "key", {"kind": "rkey", "need": "0x8", "result": ok}),
            ("vm2", "dma", {"dir": "from-guest", "len": "8"}),
            ("vm2", "dma", {"dir": "to-guest", "len": "8"}),
            ("vm2", "tx", {"op": "ATOMIC_ACKNOWLEDGE", "orig": "0x29"}),
            ("vm1", "rx", {"op": "ATOMIC_ACKNOWLEDGE", "orig": "0x29"}),
            ("vm1", "dma", {"dir": "to-guest", "len": "8"})] + tail("FETCH_ADD"))
    elif op == "bad-rkey":
        in_order(story, common_head + [
            ("vm1", "tx", {"op": "RDMA_WRITE_FIRST", "rkey": lambda v: v != rkey}),
            ("vm2", "rx", {"op": "RDMA_WRITE_FIRST"}),
            ("vm2", "key", {"kind": "rkey", "result": "no such key"}),
            ("vm2", "tx", {"op": "ACKNOWLEDGE", "aeth": "NAK_REM_ACCESS"}),
            ("vm1", "nak", {"aeth": "NAK_REM_ACCESS"}),
            ("vm1", "cqe", {"status": "REM_ACCESS_ERR"})])
        want(not any(matches(e, "vm2", "dma", dir="to-guest") for e in story),
             "the forged rkey wrote into vm2's memory")
    elif op == "loss":
        lost = [e for e in story if e["kind"] == "tx" and e["vm"] == "vm1" and
                "lost" in e.get("text", "")]
        want(len(lost) == 1, "%d packets shown lost, not 1" % len(lost))
        in_order(story, common_head + [
            ("vm1", "tx", {"op": "RDMA_WRITE_FIRST"}),
            ("vm2", "seq", {"what": "gap"}),
            ("vm2", "tx", {"aeth": "NAK_PSN_SEQ"}),
            ("vm1", "nak", {"aeth": "NAK_PSN_SEQ"}),
            ("vm1", "retx", {"why": "nak"}),
            ("vm1", "tx", {"op": "RDMA_WRITE_FIRST"}),
            ("vm2", "rx", {"op": "RDMA_WRITE_FIRST"})] + tail("RDMA_WRITE"))
        frames = tshark(os.path.join(d, "capture.pcapng"))
        if lost and want("frame" in lost[0], "the lost packet's step has no frame number"):
            want("lost" in frames.get(lost[0]["frame"], {}).get("frame.comment", ""),
                 "the capture's frame %d does not say it was lost" % lost[0]["frame"])
    elif op == "rnr":
        in_order(story, common_head + [
            ("vm1", "tx", {"op": "SEND_FIRST"}),
            ("vm2", "tx", {"aeth": "RNR_NAK"}),
            ("vm1", "nak", {"aeth": "RNR_NAK"}),
            ("vm2", "db", {"queue": "rq"}),
            ("vm1", "retx", {"why": "rnr"}),
            ("vm2", "rwqe", {"status": "ok"}),
            ("vm2", "cqe", {"status": "SUCCESS", "op": "RECV"})] + tail("SEND"))
    else:
        fail("unknown operation %s" % op)
    check_capture(story, tshark(os.path.join(d, "capture.pcapng")))
    check_svg(d)
    print("%s: %d steps checked, %s" % (op, len(story), "all agree" if not fails else
                                         "%d failures" % len(fails)))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
