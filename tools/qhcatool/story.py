# SPDX-License-Identifier: GPL-2.0-or-later
"""The collector behind 'qhca explain': merge the guests' teaching traces (the QEMU trace
event qhca_step, one line a datapath step with the host's wall clock, see
hw-model/engine/trace.c) and the fabric's pcapng capture on that one clock, then tell what
happened as a numbered story (text), as JSON lines, and as an SVG sequence diagram.

Run alone it renders a directory that 'qhca explain' wrote (steps.raw, capture.pcapng):

  python3 tools/qhcatool/story.py [--all] DIR
"""
import html
import json
import os
import re
import struct
import sys

STEP_RE = re.compile(r"qhca_step t=(\d+) (\w+)(.*)$")
FIELD_RE = re.compile(r'(\w+)=("[^"]*"|\S+)')
ROCE_PORT = 4791


# ---------------------------------------------------------------- reading
def parse_fields(text):
    return {k: v[1:-1] if v.startswith('"') else v for k, v in FIELD_RE.findall(text)}


def read_steps(vm, path, offset=0):
    """The steps in guest VM's QEMU log PATH from byte OFFSET: dicts with t (ns), vm,
    kind and the line's fields (f)."""
    steps = []
    with open(path, "rb") as f:
        f.seek(offset)
        for raw in f:
            m = STEP_RE.search(raw.decode("utf-8", "replace").rstrip("\n"))
            if m:
                steps.append({"t": int(m.group(1)), "vm": vm, "kind": m.group(2),
                              "f": parse_fields(m.group(3))})
    return steps


def tcp_key(data):
    """("tcp", source port, destination port, sequence, acknowledgement, flags) of an
    Ethernet frame with an IPv4 or IPv6 TCP segment (an iWARP port's), or None."""
    if len(data) < 14:
        return None
    et = struct.unpack(">H", data[12:14])[0]
    if et == 0x0800 and len(data) >= 34 and data[23] == 6:
        tcp = 14 + (data[14] & 0xf) * 4
    elif et == 0x86dd and len(data) >= 54 and data[20] == 6:
        tcp = 54
    else:
        return None
    if len(data) < tcp + 20:
        return None
    sport, dport, seq, ack = struct.unpack(">HHII", data[tcp:tcp + 12])
    return ("tcp", sport, dport, seq, ack, data[tcp + 13] & 0x3f)


def step_key(f):
    """The frame key (frame_key) of a tx or rx step's fields F, or None."""
    try:
        if f.get("wire") == "tcp":
            return ("tcp", int(f["sport"]), int(f["dport"]), int(f["seq"]), int(f["ack"]),
                    sum(TCP_FLAGS.get(x, 0) for x in f["flags"].split(",")))
        return ("ib", int(f["dqp"], 16), int(f["psn"], 16))
    except (KeyError, ValueError):
        return None


TCP_FLAGS = {"FIN": 1, "SYN": 2, "RST": 4, "PSH": 8, "ACK": 16, "URG": 32}


def frame_key(data, linktype):
    """A frame's key: ("ib", destination QP, PSN) of a RoCE (v1 or v2) or InfiniBand
    packet, tcp_key of a TCP segment, or None."""
    if linktype != 197:
        k = tcp_key(data)
        if k:
            return k
    k = bth_key(data, linktype)
    return ("ib",) + k[:2] if k else None


def bth_key(data, linktype):
    """(destination QP, PSN, opcode) of a RoCE (v1 or v2) or InfiniBand packet, or None."""
    if linktype == 197:		# ERF: 16 bytes of record header, then the IB packet
        pkt = data[16:]
        if len(pkt) < 8 + 12:
            return None
        lnh = pkt[1] & 3
        if lnh < 2:
            return None
        bth = 8 + (40 if lnh == 3 else 0)
        b = pkt[bth:bth + 12]
    else:
        if len(data) < 14:
            return None
        et = struct.unpack(">H", data[12:14])[0]
        if et == 0x8915:		# RoCE v1: the GRH, then the BTH
            b = data[54:66]
        else:
            if et == 0x0800 and len(data) >= 34 and data[23] == 17:
                udp = 14 + (data[14] & 0xf) * 4
            elif et == 0x86dd and len(data) >= 62 and data[20] == 17:
                udp = 54
            else:
                return None
            if len(data) < udp + 8 + 12 or \
                    struct.unpack(">H", data[udp + 2:udp + 4])[0] != ROCE_PORT:
                return None
            b = data[udp + 8:udp + 20]
    if len(b) < 12:
        return None
    return (int.from_bytes(b[5:8], "big"), int.from_bytes(b[9:12], "big"), b[0])


def read_pcapng(path):
    """Frames of a pcapng file: dicts with no (from 1), t (ns), port (interface name), len,
    key (frame_key or None), comment, other (a short description of a frame that is not
    RDMA)."""
    frames, ifaces = [], []
    if not path or not os.path.exists(path):
        return frames
    with open(path, "rb") as f:
        data = f.read()
    off, endian = 0, "<"
    while off + 12 <= len(data):
        btype, blen = struct.unpack(endian + "II", data[off:off + 8])
        if btype == 0x0A0D0D0A:
            endian = "<" if data[off + 8:off + 12] == b"\x4d\x3c\x2b\x1a" else ">"
            blen = struct.unpack(endian + "I", data[off + 4:off + 8])[0]
        if blen < 12 or off + blen > len(data):
            break
        body = data[off + 8:off + blen - 4]
        if btype == 1:
            linktype = struct.unpack(endian + "H", body[0:2])[0]
            opts = parse_options(body[8:], endian)
            tsres = opts.get(9, b"\x06")[0]
            ifaces.append({"linktype": linktype, "name": opts.get(2, b"").decode(errors="replace"),
                           "div": 10 ** (9 - tsres) if tsres < 10 else 1})
        elif btype == 6 and ifaces:
            iid, hi, lo, caplen, origlen = struct.unpack(endian + "IIIII", body[0:20])
            iface = ifaces[iid] if iid < len(ifaces) else ifaces[0]
            pkt = body[20:20 + caplen]
            opts = parse_options(body[20 + ((caplen + 3) & ~3):], endian)
            key = frame_key(pkt, iface["linktype"])
            size = caplen - 16 if iface["linktype"] == 197 else caplen
            frames.append({"no": len(frames) + 1, "t": ((hi << 32) | lo) * iface["div"],
                           "port": iface["name"], "len": size, "key": key,
                           "comment": opts.get(1, b"").decode(errors="replace") or None,
                           "other": "TCP" if key and key[0] == "tcp" else None if key else
                           describe_other(pkt, iface["linktype"])})
        off += blen
    return frames


def parse_options(b, endian):
    opts, off = {}, 0
    while off + 4 <= len(b):
        code, length = struct.unpack(endian + "HH", b[off:off + 4])
        if code == 0:
            break
        opts.setdefault(code, b[off + 4:off + 4 + length])
        off += 4 + ((length + 3) & ~3)
    return opts


def describe_other(pkt, linktype):
    if linktype == 197:
        return "InfiniBand (not a transport packet)"
    if len(pkt) < 14:
        return "runt"
    et = struct.unpack(">H", pkt[12:14])[0]
    if et == 0x0806:
        return "ARP"
    if et == 0x0800 and len(pkt) >= 34:
        proto = {6: "TCP", 17: "UDP", 1: "ICMP"}.get(pkt[23], "IP proto %d" % pkt[23])
        return proto
    if et == 0x86dd:
        return "IPv6"
    return "ethertype 0x%04x" % et


# ---------------------------------------------------------------- matching
def match_frames(steps, frames, ports):
    """Give each tx and rx step the capture's frame number (step['frame']): a packet
    sent is the earliest frame of its guest's port with its QP, PSN and size not given yet
    (a retransmission is another frame); one received is the earliest such frame that
    reached it and was not received before (lost frames never arrive). PORTS: guest ->
    interface name."""
    by_key = {}
    for fr in frames:
        if fr["key"]:
            by_key.setdefault((fr["key"], fr["len"]), []).append(fr)
    used, received = set(), {}
    for s in sorted(steps, key=lambda x: x["t"]):
        if s["kind"] not in ("tx", "rx"):
            continue
        f = s["f"]
        k = step_key(f)
        try:
            key = (k, int(f.get("size", "0")))
        except ValueError:
            continue
        if not k:
            continue
        cands = by_key.get(key, [])
        if s["kind"] == "tx":
            for fr in cands:
                if fr["no"] not in used and fr["port"] == ports.get(s["vm"]) and \
                        fr["t"] >= s["t"] - 50000:
                    used.add(fr["no"])
                    fr["matched"] = True
                    s["frame"] = fr["no"]
                    if fr["comment"]:
                        s["fate"] = fr["comment"]
                    break
        else:
            # A frame reaches its receiver once (twice if duplicated), in order; a lost one
            # never. The receiver sees it after the capture does.
            for fr in cands:
                lost = fr["comment"] and ("lost" in fr["comment"] or "dropped" in fr["comment"])
                times = 2 if fr["comment"] and "duplicated" in fr["comment"] else 1
                if not lost and received.get((s["vm"], fr["no"]), 0) < times and \
                        fr["t"] <= s["t"] + 50000:
                    received[(s["vm"], fr["no"])] = received.get((s["vm"], fr["no"]), 0) + 1
                    fr["matched"] = True
                    s["frame"] = fr["no"]
                    break


# ---------------------------------------------------------------- the story
def nbytes(v):
    n = int(v)
    return "%d B" % n


ACCESS = [(1, "LOCAL_WRITE"), (2, "REMOTE_WRITE"), (4, "REMOTE_READ"), (8, "REMOTE_ATOMIC"),
          (16, "MW_BIND")]


def access_names(v):
    n = int(v, 16)
    names = [name for bit, name in ACCESS if n & bit]
    return "|".join(names) if names else "none beyond local read"


def packet_text(f):
    parts = ["%s PSN %s to QP %s" % (f.get("op"), f.get("psn"), f.get("dqp"))]
    if "dlid" in f:
        parts[0] += " (LID %s to %s, VL %s)" % (f["slid"], f["dlid"], f["vl"])
    elif f.get("wire") == "rocev1":
        parts[0] += " (RoCE v1)"
    if int(f.get("len", "0")):
        parts.append("%s payload" % nbytes(f["len"]))
    if "dmalen" in f:
        parts.append("RETH va %s rkey %s len %s" % (f["va"], f["rkey"], f["dmalen"]))
    elif "cmp" in f:
        parts.append("AtomicETH va %s rkey %s compare %s swap/add %s" %
                     (f["va"], f["rkey"], f["cmp"], f["swap_add"]))
    if "aeth" in f:
        parts.append("AETH %s MSN %s" % (f["aeth"], f["msn"]))
    if "orig" in f:
        parts.append("original value %s" % f["orig"])
    if "imm" in f:
        parts.append("immediate %s" % f["imm"])
    if f.get("ackreq") == "1":
        parts.append("ACK requested")
    return ", ".join(parts)


WHY_RETX = {"timeout": "no ACK came before the retransmission timer expired",
            "nak": "the responder NAKed a PSN it did not expect (a packet went missing)",
            "rnr": "the RNR NAK's wait is over"}

# The device's event types (abi/qhca_abi.h enum qhca_event_type).
SEQ = {"duplicate": "a duplicate of a request already done; not done again (ACKed if it asks)",
       "gap": "a packet before it went missing; sends a sequence NAK for the expected PSN "
              "and drops it (IBA 9.7.5.1.2)",
       "gap-naked": "ahead of the expected PSN, which it NAKed already: dropped",
       "gap-uc": "UC: the message in progress is lost; waits for the next FIRST",
       "busy": "still sending READ responses: dropped, the sequence NAK comes after them"}

EVENT_TYPES = {1: "a completion event for CQ", 2: "port active, port", 3: "port down, port",
               4: "EQ overflow of EQ", 5: "QP fatal error for QP",
               6: "invalid request from the peer, QP",
               7: "access error by the peer (IBA 11.6.3.1), QP", 8: "CQ error for CQ",
               9: "SRQ limit reached, SRQ", 10: "SQ drained, QP",
               11: "LID change, port", 12: "P_Key change, port", 13: "SM change, port",
               14: "client reregister, port", 15: "GID change, port",
               16: "iWARP: an MPA request came (iw_cm's connect request), connection",
               17: "iWARP: the MPA reply came (iw_cm's connect reply), connection",
               18: "iWARP: the initiator's first FPDU came (established), connection",
               19: "iWARP: the peer closed (FIN), connection",
               20: "iWARP: TCP is done (closed), connection"}


# Steps that name their QP in the field "qp" (for rx and drop: the receiving QP).
QP_STEPS = ("db", "wqe", "wqe_bad", "rwqe", "tx", "rx", "drop", "nak", "retx", "dup", "seq",
            "rnr", "qp", "fpdu", "mpa", "acked")


def user_steps(steps):
    """The steps of the programs' own QPs: those whose doorbells rang on a process's page
    (not page 0, the kernel's), and the QPs they exchange packets with; with the key
    checks, DMA, completions, events and interrupts that belong to them. Returns (kept,
    number left out): the kernel's own QPs (the GSI QP of rdma_cm and of the SM, IPoIB)
    are noise in a lesson, and 'explain --all' shows them."""
    steps = sorted(steps, key=lambda x: x["t"])
    user = {(s["vm"], s["f"]["qp"]) for s in steps
            if s["kind"] == "db" and s["f"].get("page") != "0" and "qp" in s["f"]}
    user_srq = {(s["vm"], s["f"]["srq"]) for s in steps
                if s["kind"] == "db" and s["f"].get("page") != "0" and "srq" in s["f"]}
    user |= {(s["vm"], s["f"]["qp"]) for s in steps
             if s["kind"] == "rwqe" and (s["vm"], s["f"]["srq"]) in user_srq}
    for _ in range(2):	# the peers of user QPs, and their answers
        sent = {(s["vm"], step_key(s["f"])) for s in steps
                if s["kind"] == "tx" and (s["vm"], s["f"].get("qp")) in user}
        user |= {(s["vm"], s["f"]["qp"]) for s in steps if s["kind"] == "rx" and
                 "qp" in s["f"] and step_key(s["f"]) is not None and
                 any(v != s["vm"] and k == step_key(s["f"]) for v, k in sent)}
    kept, anchor, cqe, eqe = [], {}, {}, {}
    for s in steps:
        k, f, vm = s["kind"], s["f"], s["vm"]
        if k in QP_STEPS:
            keep = (vm, f["qp"]) in user if "qp" in f else \
                f.get("page") != "0" if k == "db" else True
            anchor[vm] = keep
        elif k in ("key", "dma"):
            keep = anchor.get(vm, True)
        elif k == "cqe":
            keep = cqe[vm] = (vm, f["qp"]) in user
        elif k == "eqe":
            keep = eqe[vm] = cqe.get(vm, False) if f["type"] == "1" else True
        elif k == "irq":
            keep = eqe.get(vm, True)
        elif k == "arm":
            keep = f.get("page") != "0"
        else:
            keep = True
        if keep:
            kept.append(s)
    return kept, len(steps) - len(kept)



def raw_fields(f):
    return " ".join("%s=%s" % kv for kv in f.items())


def told(fn, f, *args):
    """FN's text of a step, or its raw fields if the step lacks one FN needs (a truncated
    trace line): one odd line does not cost the whole story."""
    try:
        return fn(f, *args)
    except (KeyError, ValueError):
        return raw_fields(f)


def tcp_isns(steps):
    """(source port, destination port) -> the initial sequence number of that direction,
    from the SYNs the steps show: sequence numbers told relative to it, as tshark does."""
    isn = {}
    for s in steps:
        f = s["f"]
        if s["kind"] in ("tx", "rx") and f.get("wire") == "tcp" and \
                "SYN" in f.get("flags", "") and f.get("seq", "").isdigit():
            isn.setdefault((f.get("sport"), f.get("dport")), int(f["seq"]))
    return isn


def tcp_text(f, isn):
    """A TCP segment of an iWARP port, its sequence numbers relative to the SYNs."""
    seq, ack = int(f["seq"]), int(f["ack"])
    mine, theirs = isn.get((f["sport"], f["dport"])), isn.get((f["dport"], f["sport"]))
    if mine is not None:
        seq = (seq - mine) & 0xffffffff
    flags = f["flags"].split(",")
    if "ACK" in flags and theirs is not None:
        ack = (ack - theirs) & 0xffffffff
    n = int(f["len"])
    text = "TCP [%s] port %s -> %s, seq %d" % (f["flags"], f["sport"], f["dport"], seq)
    if "ACK" in flags:
        text += " ack %d" % ack
    text += ", window %s" % f["win"]
    if n:
        text += ", %d B of the byte stream" % n
    elif flags == ["ACK"]:
        text += ", no data: an acknowledgement"
    if "RST" in flags:
        text += ": a reset, the connection ends at once"
    elif "FIN" in flags:
        text += ": its sender is done sending (a graceful close)"
    return text


def fpdu_text(f):
    """An FPDU built (dir=out) or taken (in): MPA, DDP and RDMAP as they say it."""
    if "stag" in f:
        ddp = "DDP tagged: STag %s, TO %s" % (f["stag"], f["to"])
    else:
        ddp = "DDP untagged: queue %s, MSN %s, MO %s" % (f["qn"], f["msn"], f["mo"])
        if "sink_stag" in f:
            ddp += "; read %s B from STag %s at %s into STag %s at %s" % (
                f["size"], f["src_stag"], f["src_to"], f["sink_stag"], f["sink_to"])
    what = "RDMAP %s%s, %s B payload" % (f["op"], ", last" if f["last"] == "1" else "",
                                          f["len"])
    if f["dir"] == "out":
        return "FPDU built and queued into TCP: MPA length %s, %s, %s, CRC32c %s" % (
            f["ulpdu"], ddp, what, f["crc"])
    return "FPDU whole in the TCP stream, its CRC32c %s good: %s, %s%s" % (
        f["crc"], what, ddp, ": placed by STag and offset" if "stag" in f else "")


def story_steps(steps):
    """The steps in time order with the application's own steps put in front of the
    doorbells they rang (the provider wrote the WQE, then the doorbell; the device fetched
    it after): each gets actor, text and arrow (from, to) for the diagram."""
    steps = sorted(steps, key=lambda s: s["t"])
    isn = tcp_isns(steps)
    out = []
    for i, s in enumerate(steps):
        f, k, vm = s["f"], s["kind"], s["vm"]
        app, dev, mem = "%s app" % vm, "%s qhca" % vm, "%s memory" % vm

        def add(actor, text, arrow, src=s, **extra):
            e = {"t": src["t"], "vm": vm, "actor": actor, "kind": src["kind"], "fields": src["f"],
                 "text": text, "arrow": arrow}
            if "frame" in src:
                e["frame"] = src["frame"]
            e.update(extra)
            out.append(e)

        if k == "db":
            a, b = (int(x) for x in f["pi"].split("->"))
            # Doorbell page 0 is the kernel's (its verbs are ib_*), the others a process's.
            verb = "ib_" if f.get("page") == "0" else "ibv_"
            if f["queue"] == "sq":
                for slot in range(a, b):
                    w = next((x for x in steps[i + 1:] if x["vm"] == vm and x["kind"] == "wqe" and
                              x["f"]["qp"] == f["qp"] and int(x["f"]["slot"]) == slot), None)
                    add(app, verb + post_text(w, steps, f["qp"], slot), (app, mem), kind="post")
            elif f["queue"] == "rq":
                add(app, "%spost_recv: a receive WQE in RQ slot%s %s of QP %s" %
                    (verb, "s" if b - a > 1 else "", "%d..%d" % (a, b - 1) if b - a > 1 else a,
                     f["qp"]), (app, mem), kind="post")
            else:
                add(app, "%spost_srq_recv: receive WQEs up to slot %d of SRQ %s" %
                    (verb, b - 1, f["srq"]), (app, mem), kind="post")
            add(dev, "doorbell page %s: %s %s producer %d -> %d" %
                (f["page"], "QP " + f["qp"] if "qp" in f else "SRQ " + f.get("srq"),
                 f["queue"].upper(), a, b), (app, dev))
        elif k == "arm":
            add(app, "%sreq_notify_cq: CQ %s armed%s: its next completion raises an event" %
                ("ib_" if f.get("page") == "0" else "ibv_", f["cq"],
                 " for solicited completions" if f.get("solicited") == "1" else ""),
                (app, dev))
        elif k == "wqe":
            extra = ""
            if f["op"] in ("RDMA_WRITE", "RDMA_WRITE_WITH_IMM", "RDMA_READ") or \
                    f["op"].startswith("ATOMIC"):
                extra = ", rkey %s, remote va %s" % (f["rkey"], f["raddr"])
            add(dev, "fetched the WQE at guest %s (%s B): %s, wr_id %s%s, %s" %
                (f["gpa"], f["size"], f["op"], f["wr_id"], extra,
                 "%s B inline" % f["inline"] if f.get("inline", "0") != "0" else
                 "%s SGE%s" % (f["sges"], "" if f["sges"] == "1" else "s")), (mem, dev))
        elif k == "wqe_bad":
            add(dev, "the WQE in SQ slot %s of QP %s is unusable: it completes with %s" %
                (f["slot"], f["qp"], f["status"]), (dev, dev))
        elif k == "rwqe":
            add(dev, "took the receive WQE in slot %s (guest %s) of %s: wr_id %s, %s B in %s SGE%s%s" %
                (f["slot"], f["gpa"], "SRQ " + f["srq"] if f["srq"] != "0x0" else "QP " + f["qp"],
                 f["wr_id"], f["len"], f["sges"], "" if f["sges"] == "1" else "s",
                 "" if f["status"] == "ok" else " (malformed)"), (mem, dev))
        elif k == "key":
            need = int(f["need"], 16)
            what = "%s %s: PD %s, %s B at va %s%s" % (
                f["kind"], f["key"], f["pd"], f["len"], f["va"],
                ", needs " + access_names(f["need"]) if need else "")
            ok = f["result"] == "ok"
            add(dev, ("checked " + what + ": ok") if ok else
                ("refused " + what + ": " + f["result"]), (dev, dev), ok=ok)
        elif k == "dma":
            if f["dir"] == "to-guest":
                add(dev, "DMA %s to guest %s (va %s, key %s)" %
                    (nbytes(f["len"]), f["gpa"], f["va"], f["key"]), (dev, mem))
            else:
                add(dev, "DMA %s from guest %s (va %s, key %s)" %
                    (nbytes(f["len"]), f["gpa"], f["va"], f["key"]), (mem, dev))
        elif k in ("tx", "rx") and f.get("wire") == "tcp":
            fate = " [fabric: %s]" % s["fate"] if s.get("fate") else ""
            seg = told(tcp_text, f, isn)
            if k == "tx":
                add("wire", "%s sends %s%s" % (vm, seg, fate), (dev, "wire"))
            else:
                add(dev, "received %s" % seg, ("wire", dev))
        elif k == "fpdu":
            add(dev, told(fpdu_text, f), (dev, dev))
        elif k == "mpa" and not {"dir", "what", "rev", "ird", "ord", "pdata"} <= set(f):
            add(dev, "MPA: %s" % raw_fields(f), (dev, dev))
        elif k == "mpa":
            add(dev, "%s an MPA %s (RFC 5044 with RFC 6581: revision %s, CRC on, no markers, "
                "IRD %s ORD %s, %s B private data) %s" %
                ("sent" if f["dir"] == "out" else "received", f["what"], f["rev"], f["ird"],
                 f["ord"], f["pdata"], "into the TCP stream" if f["dir"] == "out" else
                 "from the TCP stream" + (": the connection is in RDMA mode"
                                          if f["what"] == "reply" else "")),
                (dev, dev))
        elif k == "acked":
            add(dev, "the peer's TCP ACK covers %s B more: TCP frees its copy of them (their "
                "WQEs completed when TCP took them)" % f.get("bytes", "?"), (dev, dev))
        elif k == "tx":
            fate = ""
            if s.get("fate"):
                fate = " [fabric: %s]" % s["fate"]
            add("wire", "%s sends %s%s" % (vm, packet_text(f), fate), (dev, "wire"))
        elif k == "rx":
            add(dev, "received %s" % packet_text(f), ("wire", dev))
        elif k == "drop":
            what = " (" + packet_text(f) + ")" if "op" in f else \
                " (PSN %s to QP %s)" % (f["psn"], f["qp"]) if "psn" in f else \
                " of %s B" % f.get("size")
            add(dev, "dropped a packet%s: %s" % (what, f["why"]), (dev, dev), ok=False)
        elif k == "nak":
            what = {"RNR_NAK": "an RNR NAK (the receiver had no receive WQE posted): waits %s us "
                               "before it sends again" % f.get("wait_us"),
                    "NAK_PSN_SEQ": "a sequence NAK: the responder expected PSN %s" % f["psn"]}
            add(dev, "took %s" % what.get(f["aeth"], "a %s for PSN %s: the request failed at "
                                         "the responder" % (f["aeth"], f["psn"])), (dev, dev))
        elif k == "retx":
            add(dev, "sends again from PSN %s: %s" % (f["psn"], WHY_RETX.get(f["why"], f["why"])),
                (dev, dev))
        elif k == "dup":
            add(dev, "sends PSN %s a second time: the head of a resend goes twice, since the "
                "responder NAKs a gap only once and a second loss would wait for the timeout" %
                f["psn"], (dev, dev))
        elif k == "rnr":
            add(dev, "no receive WQE is posted for the SEND at PSN %s: Receiver Not Ready, "
                "answers with an RNR NAK (its min_rnr_timer %s) and drops it" %
                (f["psn"], f["timer"]), (dev, dev), ok=False)
        elif k == "seq":
            add(dev, "PSN %s is not the expected %s: %s" % (f["psn"], f["expected"], SEQ.get(
                f["what"], f["what"])), (dev, dev), ok=f["what"] == "duplicate")
        elif k == "cqe":
            tail = "an event follows (the CQ was armed)" if f["event"] == "1" else \
                "no event (CQ not armed): the application finds it by polling"
            add(dev, "CQE written to CQ %s slot %s: %s %s, wr_id %s, QP %s, %s B; %s" %
                (f["cq"], f["slot"], f["status"], f["op"], f["wr_id"], f["qp"], f["len"], tail),
                (dev, mem), ok=f["status"] == "SUCCESS")
        elif k == "eqe":
            add(dev, "EQE written to EQ %s slot %s: %s 0x%x" %
                (f["eq"], f["slot"], EVENT_TYPES.get(int(f["type"]), "event type %s for" % f["type"]),
                 int(f["handle"], 16)), (dev, mem))
        elif k == "irq":
            add(dev, "MSI-X vector %s %s" % (f["vector"], "raised" if f["raised"] == "1" else
                                              "not raised (%s)" % f.get("why", "masked")),
                (dev, app))
        elif k == "qp":
            if f["from"] == f["to"]:
                continue
            detail = ""
            if f["to"] == "RTR":
                detail = " (destination QP %s, expects PSN %s, path MTU %s)" % \
                    (f["dqp"], f["rq_psn"], f["mtu"])
            elif f["to"] == "RTS":
                detail = " (first PSN it sends %s)" % f["sq_psn"]
            add(dev, "QP %s: %s -> %s%s" % (f["qp"], f["from"], f["to"], detail), (app, dev))
        elif k == "migrate":
            if f["what"] == "saved":
                add(dev, "the guest stops and moves: the device's state saved (%s B, %s QPs, "
                    "every message in flight with it) for a new QEMU process" %
                    (f["bytes"], f["qps"]), (dev, dev))
            else:
                add(dev, "the guest runs again in its new QEMU process: the device goes on "
                    "from its saved state (%s QPs, %s retransmission timers running)%s; "
                    "what was on the wire meanwhile is lost and sent again" %
                    (f["qps"], f["timers"], ", a QP waiting to send" if f.get("waiting") == "1"
                     else ""), (dev, dev))
        elif k == "mr":
            add(dev, "registered a region: key %s, %s B at va %s, PD %s, access %s" %
                (f["key"], f["len"], f["va"], f["pd"], access_names(f["access"])), (app, dev))
    return out


def post_text(w, steps, qp, slot):
    if not w:
        return "post_send: a WQE in SQ slot %d of QP %s" % (slot, qp)
    f = w["f"]
    n = int(f.get("inline", "0"))
    if not n:
        idx = steps.index(w)
        for x in steps[idx + 1:]:
            if x["vm"] != w["vm"] or x["kind"] != "key" or x["f"]["kind"] != "lkey":
                break
            n += int(x["f"]["len"])
    return "post_send: %s %d B, wr_id %s, SQ slot %d of QP %s" % (f["op"], n, f["wr_id"],
                                                                 slot, qp)


def render_text(story, frames, first_t):
    lines = []
    w = max([len(str(len(story)))] + [1])
    for n, e in enumerate(story, 1):
        actor = e["actor"] if e["actor"] == "wire" else e["actor"].replace(" app", " cpu")
        frame = "   (frame %d)" % e["frame"] if "frame" in e else ""
        lines.append("%*d  %9.3f ms  %-9s  %s%s" % (w, n, (e["t"] - first_t) / 1e6, actor,
                                                      e["text"], frame))
    other = [fr for fr in frames if not fr["key"] or
             (fr["key"][0] == "tcp" and not fr.get("matched"))]
    if frames:
        kinds = {}
        for fr in other:
            kinds[fr["other"]] = kinds.get(fr["other"], 0) + 1
        lines.append("")
        lines.append("The capture holds %d frames: %d RDMA transport packets%s." % (
            len(frames), len(frames) - len(other),
            " and %s (the programs' own exchange of QP numbers, PSNs and keys, and the "
            "guests' IP traffic)" % ", ".join("%d %s" % (v, k) for k, v in sorted(kinds.items()))
            if other else ""))
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- the picture
def render_svg(story, title):
    vms = sorted({e["vm"] for e in story}, key=lambda v: int(v[2:]) if v[2:].isdigit() else 0)
    actors = []
    for i, vm in enumerate(vms):
        cols = ["%s app" % vm, "%s memory" % vm, "%s qhca" % vm]
        actors += cols if i == 0 else list(reversed(cols))
        if i == 0:
            actors.append("wire")
    if "wire" not in actors:
        actors.append("wire")
    names = {"app": "application", "memory": "memory", "qhca": "qhca device"}
    col_w, top, row_h, left = 150, 70, 26, 30
    longest = max([len(e["text"]) + 16 for e in story] + [60])
    width = left * 2 + 60 + col_w * (len(actors) - 1) + 40 + int(longest * 6.6)
    height = top + row_h * (len(story) + 1) + 30
    x = {a: left + 60 + i * col_w for i, a in enumerate(actors)}
    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" '
           'font-family="sans-serif" font-size="12">' % (width, height),
           '<title>%s</title>' % html.escape(title),
           '<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" '
           'markerHeight="7" orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="#333"/></marker>'
           '</defs>',
           '<rect width="100%" height="100%" fill="white"/>',
           '<text x="%d" y="22" font-size="15" font-weight="bold">%s</text>' %
           (left, html.escape(title))]
    for a in actors:
        label = "the fabric" if a == "wire" else "%s %s" % (a.split()[0], names[a.split()[1]])
        out.append('<rect x="%d" y="%d" width="%d" height="24" rx="4" fill="%s" stroke="#555"/>' %
                   (x[a] - 65, top - 34, 130, "#e8eefc" if "qhca" in a else
                    "#f4f4f4" if a == "wire" else "#eaf6ea"))
        out.append('<text x="%d" y="%d" text-anchor="middle" class="actor">%s</text>' %
                   (x[a], top - 18, html.escape(label)))
        out.append('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#999" stroke-dasharray="4 3"/>' %
                   (x[a], top - 10, x[a], height - 20))
    text_x = left + 60 + (len(actors) - 1) * col_w + 40
    for n, e in enumerate(story, 1):
        y = top + n * row_h
        a, b = e["arrow"]
        color = "#b00" if e.get("ok") is False or e["kind"] == "drop" else \
            "#06c" if e["kind"] in ("tx", "rx") else "#333"
        if a == b:
            out.append('<path d="M%d,%d h22 v10 h-22" fill="none" stroke="%s" '
                       'marker-end="url(#arrow)"/>' % (x[a], y - 8, color))
        else:
            out.append('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="1.5" '
                       'marker-end="url(#arrow)"/>' % (x[a], y, x[b], y, color))
        mid = (x[a] + x[b]) // 2 if a != b else x[a] + 30
        out.append('<text x="%d" y="%d" text-anchor="middle" font-size="10" fill="%s">%d</text>' %
                   (mid, y - 4, color, n))
        label = e["text"] + ("  [frame %d]" % e["frame"] if "frame" in e else "")
        if e["actor"] != "wire":
            label = "%s: %s" % (e["vm"], label)
        out.append('<text x="%d" y="%d" fill="%s"><title>%s</title><tspan font-weight="bold">'
                   '%d</tspan> %s</text>' %
                   (text_x, y + 4, color, html.escape(" ".join(
                       "%s=%s" % kv for kv in e["fields"].items())), n, html.escape(label)))
    out.append("</svg>")
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------- all of it
def render(outdir, steps, frames, ports, title, everything=False):
    """Write story.txt, story.jsonl and sequence.svg into OUTDIR; returns the story text.
    EVERYTHING: also the steps of the kernel's own QPs (user_steps)."""
    match_frames(steps, frames, ports)
    left_out = 0
    if not everything:
        steps, left_out = user_steps(steps)
    story = story_steps(steps)
    first_t = story[0]["t"] if story else 0
    text = render_text(story, frames, first_t)
    if left_out:
        text += ("%d steps of the kernel's own QPs (rdma_cm's and the subnet manager's MADs, "
                 "IPoIB) are not shown: --all shows them.\n" % left_out)
    with open(os.path.join(outdir, "story.txt"), "w") as f:
        f.write(text)
    with open(os.path.join(outdir, "story.jsonl"), "w") as f:
        for n, e in enumerate(story, 1):
            rec = {"n": n, "t_ns": e["t"], "vm": e["vm"], "actor": e["actor"],
                   "kind": e["kind"], "text": e["text"], "fields": e["fields"]}
            if "frame" in e:
                rec["frame"] = e["frame"]
            f.write(json.dumps(rec) + "\n")
    with open(os.path.join(outdir, "sequence.svg"), "w") as f:
        f.write(render_svg(story, title))
    return text


def load_dir(outdir):
    """Steps and ports as 'qhca explain' saved them (steps.raw, meta.json)."""
    with open(os.path.join(outdir, "meta.json")) as f:
        meta = json.load(f)
    steps = []
    with open(os.path.join(outdir, "steps.raw")) as f:
        for line in f:
            vm, _, rest = line.rstrip("\n").partition(" ")
            m = STEP_RE.search(rest)
            if m:
                steps.append({"t": int(m.group(1)), "vm": vm, "kind": m.group(2),
                              "f": parse_fields(m.group(3))})
    return steps, meta


def main(argv):
    everything = "--all" in argv[1:]
    args = [a for a in argv[1:] if a != "--all"]
    if len(args) != 1 or args[0].startswith("-"):
        sys.stderr.write("usage: %s [--all] DIR   (a directory 'qhca explain' wrote)\n" % argv[0])
        return 2
    steps, meta = load_dir(args[0])
    frames = read_pcapng(os.path.join(args[0], "capture.pcapng"))
    sys.stdout.write(render(args[0], steps, frames, meta["ports"], meta["title"], everything))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
