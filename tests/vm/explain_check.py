#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Check what 'qhca explain' wrote for one qhca-lesson operation:

  explain_check.py DIR OP

OP is write, send, read, atomic, bad-rkey, loss (a write with one packet dropped by the
fabric) or rnr; iwarp-write, iwarp-send and iwarp-read are those on an iWARP port (up
--iwarp). The story
(story.jsonl) must have every expected step in the right order; each packet's values must
agree with the capture as tshark decodes it (frame number, PSN, destination QP, RETH rkey
and length, size; on iWARP the TCP sequence and acknowledgement numbers, and each FPDU's
STag, tagged offset and CRC32c, which tshark checks); keys and lengths must agree between
the sides; the SVG must be well-formed and name every actor. Exit status 0 when all holds;
each failure is printed."""
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


TCP_FIELDS = ["frame.number", "frame.len", "tcp.seq_raw", "tcp.ack_raw", "tcp.len",
              "iwarp_mpa.crc", "iwarp_mpa.crc_check", "iwarp_ddp.stag",
              "iwarp_ddp.tagged_offset", "iwarp_rdma.opcode", "_ws.malformed", "tcp.payload"]


def crc32c(data):
    """CRC32c (Castagnoli, RFC 3385's), MPA's: computed here, not taken from tshark, whose
    field shows the CRC the FPDU carries, good or bad."""
    crc = 0xffffffff
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82f63b78 if crc & 1 else 0)
    return crc ^ 0xffffffff


def fpdus(payload):
    """(CRC the FPDU carries, CRC of its bytes) of each FPDU a segment's payload starts with
    and holds whole (qhca aligns FPDUs with segments, RFC 5044's recommendation). The CRC
    goes on the wire as iSCSI's does (RFC 3720 B.4), its low byte first; both are given as
    its 4 bytes read in network order, as tshark and the story show it."""
    out, at = [], 0
    while at + 2 <= len(payload):
        n = 2 + int.from_bytes(payload[at:at + 2], "big")
        end = at + n + (-n % 4)
        if end + 4 > len(payload):
            break
        out.append((int.from_bytes(payload[end:end + 4], "big"),
                    int.from_bytes(crc32c(payload[at:end]).to_bytes(4, "little"), "big")))
        at = end + 4
    return out


def tshark_tcp(cap):
    """frame number -> TCP, MPA, DDP and RDMAP fields as tshark decodes them."""
    p = subprocess.run(["tshark", "-r", cap, "-T", "fields", "-E", "separator=\t",
                        "-E", "aggregator=;"] + [a for f in TCP_FIELDS for a in ("-e", f)],
                       capture_output=True, text=True)
    want(p.returncode == 0, "tshark failed: %s" % p.stderr.strip())
    out = {}
    for line in p.stdout.splitlines():
        v = line.split("\t")
        if v and v[0].isdigit():
            out[int(v[0])] = dict(zip(TCP_FIELDS, v + [""] * (len(TCP_FIELDS) - len(v))))
    return out


def check_capture_tcp(story, frames):
    """iWARP: every TCP step with a frame agrees with it; every FPDU the story tells is in
    a frame with the same CRC32c, which is the CRC of its bytes (computed here), and, as
    tshark decodes it, the same STag and TO; no frame is malformed."""
    n = 0
    crcs = {}
    for no, fr in frames.items():
        want(not fr["_ws.malformed"], "frame %d: tshark says malformed" % no)
        # iwarp_mpa.crc appears only where tshark saw no CRC negotiated
        want(not fr["iwarp_mpa.crc"], "frame %d: an FPDU without a negotiated CRC (%s)" %
             (no, fr["iwarp_mpa.crc"]))
        if not fr["iwarp_ddp.stag"] and not fr["iwarp_rdma.opcode"]:
            continue	# no FPDU in it (the handshake, MPA's request and reply, ACKs)
        for sent, computed in fpdus(bytes.fromhex(fr["tcp.payload"].replace(":", ""))):
            if want(sent == computed, "frame %d: an FPDU carries CRC32c 0x%08x, its bytes "
                    "make 0x%08x" % (no, sent, computed)):
                crcs[sent] = (no, fr)
    for e in story:
        f = e["fields"]
        if e["kind"] in ("tx", "rx") and f.get("wire") == "tcp" and "frame" in e:
            n += 1
            fr = frames.get(e["frame"])
            if not want(fr is not None, "step %d: frame %s not in the capture" %
                        (e["n"], e["frame"])):
                continue
            want(fr["tcp.seq_raw"] == f["seq"] and fr["tcp.ack_raw"] == f["ack"] and
                 fr["tcp.len"] == f["len"],
                 "step %d: seq %s ack %s len %s, frame %d has %s %s %s" % (
                     e["n"], f["seq"], f["ack"], f["len"], e["frame"], fr["tcp.seq_raw"],
                     fr["tcp.ack_raw"], fr["tcp.len"]))
            if e["kind"] == "tx":
                want(fr["frame.len"] == f["size"], "step %d: %s B, frame %d is %s B" % (
                    e["n"], f["size"], e["frame"], fr["frame.len"]))
        elif e["kind"] == "fpdu" and f["dir"] == "out":
            got = crcs.get(int(f["crc"], 16))
            if not want(got is not None, "step %d: no frame has an FPDU with CRC %s" %
                        (e["n"], f["crc"])):
                continue
            no, fr = got
            if "stag" in f:
                want(int(f["stag"], 16) in [int(x, 16) for x in
                                            fr["iwarp_ddp.stag"].split(";") if x] and
                     int(f["to"], 16) in [int(x, 16) if x.startswith("0x") else int(x)
                                          for x in fr["iwarp_ddp.tagged_offset"].split(";") if x],
                     "step %d: STag %s TO %s, frame %d has %s %s" % (
                         e["n"], f["stag"], f["to"], no, fr["iwarp_ddp.stag"],
                         fr["iwarp_ddp.tagged_offset"]))
    want(n >= 4, "only %d TCP steps have a frame number" % n)


def iwarp_write(story):
    """The WRITE on iWARP: the MPA negotiation, then FPDUs in TCP segments, placed by STag,
    the requester's completion once TCP holds the data, the peer's TCP ACK freeing it."""
    ok = lambda v: v == "ok"
    rkey = next((e["fields"]["key"] for e in story if matches(e, "vm2", "mr")), None)
    in_order(story, [("vm1", "mpa", {"dir": "out", "what": "request"}),
                     ("vm2", "mpa", {"dir": "in", "what": "request"}),
                     ("vm2", "mpa", {"dir": "out", "what": "reply"}),
                     ("vm1", "mpa", {"dir": "in", "what": "reply"})])
    in_order(story, [("vm1", "post", {}), ("vm1", "db", {"queue": "sq"}), ("vm1", "wqe", {}),
                     ("vm1", "key", {"kind": "lkey", "result": ok}),
                     ("vm1", "dma", {"dir": "from-guest"}),
                     ("vm1", "fpdu", {"dir": "out", "op": "RDMA Write", "stag": rkey}),
                     ("vm1", "tx", {"wire": "tcp", "len": lambda v: int(v) > 0}),
                     ("vm1", "cqe", {"status": "SUCCESS", "op": "RDMA_WRITE"}),
                     ("vm1", "irq", {"raised": "1"})])
    steps = in_order(story, [
        ("vm1", "tx", {"wire": "tcp", "len": lambda v: int(v) > 0}),
        ("vm2", "rx", {"wire": "tcp", "len": lambda v: int(v) > 0}),
        ("vm2", "fpdu", {"dir": "in", "op": "RDMA Write", "stag": rkey}),
        ("vm2", "key", {"kind": "rkey", "key": rkey, "result": ok}),
        ("vm2", "dma", {"dir": "to-guest"}),
        ("vm2", "tx", {"wire": "tcp", "flags": lambda v: "ACK" in v.split(",")}),
        ("vm1", "acked", {})])
    sent = [e for e in story if matches(e, "vm1", "fpdu", dir="out", op="RDMA Write")]
    got = [e for e in story if matches(e, "vm2", "fpdu", dir="in", op="RDMA Write")]
    want(sum(int(e["fields"]["len"]) for e in sent) == 8192,
         "the WRITE's FPDUs carry %d B" % sum(int(e["fields"]["len"]) for e in sent))
    want([e["fields"]["crc"] for e in sent] == [e["fields"]["crc"] for e in got],
         "the FPDUs' CRCs differ between the sides: %s, %s" %
         ([e["fields"]["crc"] for e in sent], [e["fields"]["crc"] for e in got]))
    want(sent and sent[-1]["fields"]["last"] == "1", "the last FPDU has no L bit")
    return steps


def fpdu_bytes(story, vm, dir, op):
    return sum(int(e["fields"]["len"]) for e in story
               if matches(e, vm, "fpdu", dir=dir, op=op))


def iwarp_send(story):
    """A SEND on iWARP: untagged FPDUs into vm2's posted receive, at their offsets."""
    in_order(story, [("vm2", "post", {}), ("vm2", "db", {"queue": "rq"}),
                     ("vm1", "post", {}), ("vm1", "db", {"queue": "sq"}), ("vm1", "wqe", {}),
                     ("vm1", "fpdu", {"dir": "out", "op": "Send", "msn": "1", "mo": "0"}),
                     ("vm2", "fpdu", {"dir": "in", "op": "Send", "msn": "1", "mo": "0"}),
                     ("vm2", "rwqe", {"status": "ok"}), ("vm2", "dma", {"dir": "to-guest"}),
                     ("vm2", "cqe", {"status": "SUCCESS", "op": "RECV", "len": "8192"})])
    in_order(story, [("vm1", "fpdu", {"dir": "out", "op": "Send", "last": "1"}),
                     ("vm1", "cqe", {"status": "SUCCESS", "op": "SEND"})])
    got = [e["fields"] for e in story if matches(e, "vm2", "fpdu", dir="in", op="Send")]
    want(sum(int(f["len"]) for f in got) == 8192, "the SEND's FPDUs carry %d B" %
         sum(int(f["len"]) for f in got))
    at = 0
    for f in got:	# each where the one before ended (DDP's message offset)
        want(int(f["mo"]) == at, "an FPDU at MO %s, not %d" % (f["mo"], at))
        at += int(f["len"])


def iwarp_read(story):
    """A READ on iWARP: one Read Request FPDU; the Read Responses come back tagged, into
    the requester's sink by its STag."""
    ok = lambda v: v == "ok"
    rkey = next((e["fields"]["key"] for e in story if matches(e, "vm2", "mr")), None)
    sink = next((e["fields"]["key"] for e in story if matches(e, "vm1", "mr")), None)
    in_order(story, [("vm1", "post", {}), ("vm1", "db", {"queue": "sq"}), ("vm1", "wqe", {}),
                     ("vm1", "fpdu", {"dir": "out", "op": "RDMA Read Request",
                                      "src_stag": rkey, "sink_stag": sink, "size": "8192"}),
                     ("vm2", "fpdu", {"dir": "in", "op": "RDMA Read Request"}),
                     ("vm2", "key", {"kind": "rkey", "key": rkey, "need": "0x4",
                                     "result": ok}),
                     ("vm2", "dma", {"dir": "from-guest"}),
                     ("vm2", "fpdu", {"dir": "out", "op": "RDMA Read Response", "stag": sink}),
                     ("vm1", "fpdu", {"dir": "in", "op": "RDMA Read Response", "stag": sink}),
                     ("vm1", "key", {"key": sink, "need": "0x2", "result": ok}),
                     ("vm1", "dma", {"dir": "to-guest"}),
                     ("vm1", "cqe", {"status": "SUCCESS", "op": "RDMA_READ"})])
    want(fpdu_bytes(story, "vm1", "in", "RDMA Read Response") == 8192,
         "the Read Responses carry %d B" % fpdu_bytes(story, "vm1", "in", "RDMA Read Response"))


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
    elif op == "iwarp-write":
        iwarp_write(story)
    elif op == "iwarp-send":
        iwarp_send(story)
    elif op == "iwarp-read":
        iwarp_read(story)
    else:
        fail("unknown operation %s" % op)
    if op.startswith("iwarp"):
        check_capture_tcp(story, tshark_tcp(os.path.join(d, "capture.pcapng")))
    else:
        check_capture(story, tshark(os.path.join(d, "capture.pcapng")))
    check_svg(d)
    print("%s: %d steps checked, %s" % (op, len(story), "all agree" if not fails else
                                         "%d failures" % len(fails)))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
