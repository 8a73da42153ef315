#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Write seed corpora for the fuzz targets: well-formed inputs that reach deep code.

  make_seeds.py DIR     creates DIR/admin, DIR/wqe, DIR/rx, DIR/mixed, DIR/migrate, DIR/qemu and DIR/ibswitch,
                        DIR/fabric_control
"""
import os
import struct
import sys
import zlib


def cmd(opcode, body=b"", cmd_id=1):
    hdr = struct.pack("<BBHHH", opcode, 0, cmd_id, len(body), 0)
    return (hdr + body).ljust(64, b"\0")


def obj(in_len=0, handle=0, out_len=0):
    return struct.pack("<QIIQII", 0x103000, in_len, handle, 0x103000 if out_len else 0, out_len, 0)


def admin_seeds():
    q = struct.pack("<QII", 0x103000, 144, 0)
    yield b"\2" + cmd(0x01, q) + b"\0" * 192                       # QUERY_DEVICE
    yield b"\2" + cmd(0x10) + b"\0" * 192 + b"\2" + cmd(0x12, struct.pack("<II", 1 << 20 | 1, 0))
    cq = struct.pack("<QIB3xIIII", 0x104000, 1, 1, 4, 1, 0, 0)
    yield b"\3" + cmd(0x40, obj(32)) + cq.ljust(192, b"\0")          # CREATE_CQ
    mr = struct.pack("<IIQQII", 1, 15, 0x10000, 0x2000, 0, 0) + struct.pack("<QIB3x", 0x104000, 2, 1)
    yield b"\3" + cmd(0x42, obj(48)) + mr.ljust(192, b"\0")          # CREATE_MR
    yield b"\0" + struct.pack("<II", 0x10, 2) + b"\1" + struct.pack("<Q", 0x100000001)
    yield b"\3" + cmd(0x50, obj(0, 0, 256)) + b"\0" * 192          # QUERY_COUNTERS
    # On the objects of the deep set-up (odd length): REREG_MR of the region (key 0x100),
    # RESIZE_CQ of the first CQ, RESIZE_SRQ.
    pbl = struct.pack("<QIB3x", 0x104000, 2, 1)
    rereg = struct.pack("<IIQQII", 1 << 20 | 1, 15, 0x10000, 0x2000, 0, 0) + pbl
    yield b"\3" + cmd(0x4b, obj(48, 0x100)) + rereg.ljust(193, b"\0")
    resize = pbl + struct.pack("<II", 4, 0)
    yield b"\3" + cmd(0x4c, obj(24, 1 << 20 | 1)) + resize.ljust(193, b"\0")
    yield b"\3" + cmd(0x4d, obj(24, 1 << 20 | 1)) + (struct.pack("<BBHI", 3, 5, 0, 0) +
                                                    pbl).ljust(193, b"\0")


FRMR_KEY = 0x200	# the fast-register region of fz_setup (index 1, first generation)
FRMR_PBL = 0x100000 + 0x4000 + 24 * 0x400	# FZ_FRMR_PBL


def send_wqe(op, length=64, remote=0x10000, rkey=0, imm_inv=0x11223344, flags=1):
    w = struct.pack("<QBBBBIIIQIIQQQ", 7, op, flags, 1, 0, imm_inv, 0, 0, remote, rkey, 0, 1, 2, 0)
    return w + struct.pack("<QII", 0x10000, length, 1 << 8 | 0)


def reg_wqe(key, iova=0x40000, length=0x2000, npages=2, shift=12, flags=1):
    w = struct.pack("<QBBBBIIIQIIQQQ", 8, 0x20, flags, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
    return w + struct.pack("<QQQIIIIB7xQQ", iova, length, FRMR_PBL, key, 0xf, npages, 0, shift, 0, 0)


def bind_wqe(mw_key, mr_key=1 << 8, addr=0x10000, length=0x1000, access=0x6, flags=1):
    w = struct.pack("<QBBBBIIIQIIQQQ", 10, 8, flags, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
    return w + struct.pack("<QQIIII32x", addr, length, mw_key, mr_key, access, 0)


def inv_wqe(key, flags=1):
    return struct.pack("<QBBBBIIIQIIQQQ", 9, 7, flags, 0, 0, key, 0, 0, 0, 0, 0, 0, 0, 0)


def wqe_seeds():
    rq = (struct.pack("<QII", 9, 1, 0) + struct.pack("<QII", 0x10000, 4096, 1 << 8)).ljust(64, b"\0") * 8
    for op in (0, 1, 2, 3, 4, 5, 6, 9):
        ring = send_wqe(op, 64 if op < 5 else 8).ljust(256, b"\0") * 8
        qp = ring[:2048].ljust(4096, b"\0") + rq[:4096].ljust(4096, b"\0")
        yield bytes([0x04, 0x44, 0x05, 0x45, 0x84, 0x85, 0x06, 0x46]) + qp * 4
    # Fast registration on the RC QP: REG_MR, a WRITE through the new key, LOCAL_INV
    # (fenced), a WRITE to the freed key, SEND_WITH_INV of a new registration.
    key = FRMR_KEY | 5
    slots = [reg_wqe(key), send_wqe(0, 4000, 0x40000, key), inv_wqe(key, flags=5),
             send_wqe(0, 64, 0x40000, key), reg_wqe(key + 1), send_wqe(9, 64, imm_inv=key + 1)]
    ring = b"".join(s.ljust(256, b"\0") for s in slots).ljust(2048, b"\0")
    qp = ring.ljust(4096, b"\0") + rq[:4096].ljust(4096, b"\0")
    yield bytes([0x44, 0x0c, 0x10, 0x18, 0x45, 0x46, 0x85, 0x84]) + qp * 4
    # Memory windows (type 2 at key 0x300, type 1 at 0x400): bind, WRITE through the
    # window, LOCAL_INV, SEND_WITH_INV, a bind of length 0.
    slots = [bind_wqe(0x305), send_wqe(0, 64, 0x10000, 0x305), inv_wqe(0x305),
             bind_wqe(0x306), send_wqe(9, 64, imm_inv=0x306), bind_wqe(0x401),
             bind_wqe(0x402, length=0)]
    ring = b"".join(s.ljust(256, b"\0") for s in slots).ljust(2048, b"\0")
    qp = ring.ljust(4096, b"\0") + rq[:4096].ljust(4096, b"\0")
    yield bytes([0x44, 0x1c, 0x45, 0x46, 0x85, 0x84, 0x47, 0x1c]) + qp * 4
    # ATOMIC WRITE (the value in compare_add, no SGE), aligned and not.
    aw = struct.pack("<QBBBBIIIQIIQQQ", 11, 15, 1, 0, 0, 0, 0, 0, 0x10000, 1 << 8, 0,
                     0x1122334455667788, 0, 0)
    aw4 = struct.pack("<QBBBBIIIQIIQQQ", 12, 15, 1, 0, 0, 0, 0, 0, 0x10004, 1 << 8, 0, 1, 0, 0)
    ring = (aw.ljust(256, b"\0") + aw4.ljust(256, b"\0")).ljust(2048, b"\0")
    qp = ring.ljust(4096, b"\0") + rq[:4096].ljust(4096, b"\0")
    yield bytes([0x08, 0x44, 0x45, 0x46, 0x85, 0x84, 0x47, 0x08]) + qp * 4


def roce_frame(opcode, dqpn, psn, payload, reth=b"", extra=b""):
    bth = struct.pack(">BBHI", opcode, 0, 0xffff, dqpn & 0xffffff) + struct.pack(">I", 0x80000000 | psn)
    body = bth + reth + extra + payload
    pad = (4 - len(payload) % 4) % 4
    body = bytearray(body[:1]) + bytearray([pad << 4]) + body[2:]
    body = bytes(body) + b"\0" * pad
    udp_len = 8 + len(body) + 4
    ip = bytearray(struct.pack(">BBHHHBBH4s4s", 0x45, 0, 20 + udp_len, 0, 0x4000, 64, 17, 0,
                               bytes([192, 168, 77, 2]), bytes([192, 168, 77, 1])))
    s = sum(struct.unpack(">10H", bytes(ip)))
    while s >> 16:
        s = (s & 0xffff) + (s >> 16)
    ip[10:12] = struct.pack(">H", ~s & 0xffff)
    udp = struct.pack(">HHHH", 0xc000, 4791, udp_len, 0)
    m = bytearray(ip)
    m[1] = 0xff
    m[8] = 0xff
    m[10] = m[11] = 0xff
    mu = bytearray(udp)
    mu[6] = mu[7] = 0xff
    mb = bytearray(body)
    mb[4] = 0xff
    crc = zlib.crc32(b"\xff" * 8 + bytes(m) + bytes(mu) + bytes(mb)) & 0xffffffff
    eth = bytes.fromhex("525400514801") + bytes.fromhex("525400514802") + b"\x08\x00"
    return eth + bytes(ip) + udp + body + struct.pack("<I", crc)


def roce_v1_frame(opcode, dqpn, psn, payload, reth=b"", extra=b""):
    """RoCE v1: Ethertype 0x8915, a GRH from ::ffff:0.0.0.1 (the fuzzers' QPs' peer) to
    itself, the BTH ...; the ICRC as an InfiniBand packet with that GRH has it."""
    bth = struct.pack(">BBHI", opcode, 0, 0xffff, dqpn & 0xffffff) + struct.pack(">I", 0x80000000 | psn)
    pad = (4 - len(payload) % 4) % 4
    body = bth[:1] + bytes([pad << 4]) + bth[2:] + reth + extra + payload + b"\0" * pad
    gid = bytes(10) + b"\xff\xff" + bytes([0, 0, 0, 1])
    grh = struct.pack(">IHBB", 6 << 28, len(body) + 4, 0x1b, 64) + gid + gid
    m = bytearray(grh)
    m[0] |= 0x0f
    m[1] = m[2] = m[3] = m[7] = 0xff
    mb = bytearray(body)
    mb[4] = 0xff
    crc = zlib.crc32(b"\xff" * 8 + bytes(m) + bytes(mb)) & 0xffffffff
    eth = bytes.fromhex("525400514801") + bytes.fromhex("525400514802") + b"\x89\x15"
    return eth + grh + body + struct.pack("<I", crc)


def ib_frame(opcode, dqpn, psn, payload, reth=b"", extra=b"", dlid=1, vl=0, grh=False):
    """An InfiniBand packet (LRH, GRH if asked, BTH...); fuzz_rx fixes its ICRC and VCRC."""
    bth = struct.pack(">BBHI", opcode, 0, 0xffff, dqpn & 0xffffff) + struct.pack(">I", psn)
    pad = (4 - len(payload) % 4) % 4
    bth = bth[:1] + bytes([pad << 4]) + bth[2:]
    body = bth + reth + extra + payload + b"\0" * pad
    g = b""
    if grh:
        g = struct.pack(">IHBB", 6 << 28, len(body) + 4, 0x1b, 1) + b"\xfe\x80" + b"\0" * 14 + \
            b"\xff\x12" + b"\0" * 14
    words = (8 + len(g) + len(body) + 4) // 4
    lrh = struct.pack(">BBHHH", vl << 4, 3 if grh else 2, dlid, words, 2)
    return lrh + g + body + b"\0" * 6


def rx_seeds():
    # an InfiniBand port: 0xff first, lengths with bit 15 (fix the CRCs)
    frames = [
        ib_frame(0x64, 4, 0, b"ud" * 20, b"", struct.pack(">II", 0x1234, 7)),
        ib_frame(0x64, 4, 0, b"ud grh" * 4, b"", struct.pack(">II", 0x1234, 7), grh=True),
        ib_frame(0x04, 2, 0, b"hello" * 10),
        ib_frame(0x0a, 2, 1, b"w" * 64, struct.pack(">QII", 0x10000, 1 << 8, 64)),
        ib_frame(0x64, 0, 0, bytes(256), b"", struct.pack(">II", 0, 0), dlid=0xffff, vl=15),
        ib_frame(0x64, 0xffffff, 0, b"mc" * 8, b"", struct.pack(">II", 0x1234, 7), dlid=0xc001,
                 grh=True),
        ib_frame(0x04, 2, 0, b"to another LID", dlid=9),
    ]
    yield b"\xff" + b"".join(struct.pack("<H", 0x8000 | len(f)) + f for f in frames)
    for qpn in (2, 3, 4, 5, 1):
        frames = [
            roce_frame(0x04, qpn, 0, b"hello" * 10),
            roce_frame(0x0a, qpn, 0, b"w" * 64, struct.pack(">QII", 0x10000, 1 << 8, 64)),
            roce_frame(0x0c, qpn, 0, b"", struct.pack(">QII", 0x10000, 1 << 8, 128)),
            roce_frame(0x14, qpn, 0, b"", b"", struct.pack(">QIQQ", 0x10000, 1 << 8, 1, 0)),
            roce_frame(0x11, qpn, 0, b"", b"", struct.pack(">I", 0x1f000001)),
            roce_frame(0x1d, qpn, 0, b"8bytes!!", struct.pack(">QII", 0x10000, 1 << 8, 8)),
            roce_frame(0x64, qpn, 0, b"ud" * 20, b"", struct.pack(">II", 0x1234, 7)),
        ]
        yield b"".join(struct.pack("<H", len(f)) + f for f in frames)
        frames = [
            roce_v1_frame(0x04, qpn, 0, b"hello" * 10),
            roce_v1_frame(0x2a, qpn, 1, b"uc" * 32, struct.pack(">QII", 0x10000, 1 << 8, 64)),
            roce_v1_frame(0x0c, qpn, 2, b"", struct.pack(">QII", 0x10000, 1 << 8, 128)),
            roce_v1_frame(0x11, qpn, 0, b"", b"", struct.pack(">I", 0x1f000001)),
            roce_v1_frame(0x64, qpn, 0, b"ud" * 20, b"", struct.pack(">II", 0x1234, 7)),
        ]
        yield b"".join(struct.pack("<H", len(f)) + f for f in frames)
    # XRC: requests to the XRC_TGT QP (6) naming the XRC SRQ (1) in an XRCETH, which comes
    # before the RETH or AtomicETH; responses to the XRC_INI QP (7).
    x = struct.pack(">I", 1)
    frames = [
        roce_frame(0xa4, 6, 0, b"xrc" * 10, x),
        roce_frame(0xaa, 6, 1, b"w" * 64, x + struct.pack(">QII", 0x10000, 1 << 8, 64)),
        roce_frame(0xac, 6, 2, b"", x + struct.pack(">QII", 0x10000, 1 << 8, 128)),
        roce_frame(0xb4, 6, 3, b"", x, struct.pack(">QIQQ", 0x10000, 1 << 8, 1, 0)),
        roce_frame(0xa4, 6, 4, b"bad srq", struct.pack(">I", 2)),
        roce_frame(0xb1, 7, 0, b"", b"", struct.pack(">I", 0x1f000001)),
    ]
    yield b"".join(struct.pack("<H", len(f)) + f for f in frames)


# fuzz_mixed operations (low nibble) and the object they act on (high nibble).
OP_DOORBELL, OP_MEM, OP_FRAME, OP_REPLAY, OP_TIMER, OP_TX, OP_MR_DESTROY, OP_MR_CREATE, \
    OP_QP_DESTROY, OP_QP_MODIFY, OP_QP_CREATE, OP_CQ_DESTROY, OP_SRQ, OP_ADMIN, OP_RESET = range(15)


def mixed_seeds():
    def mem(addr, data):	# write guest memory at a fuzz address (16-byte units)
        off = (addr - 0x100000) // 16
        return bytes([OP_MEM]) + struct.pack("<HB", off, len(data)) + data

    def wqe(op, length, flags=1, remote=0x14000):
        w = struct.pack("<QBBBBIIIQIIQQQ", 7, op, flags, 1, 0, 0x11223344, 0, 0, remote, 1 << 8,
                        0, 1, 2, 0)
        return w + struct.pack("<QII", 0x10000, length, 1 << 8)

    rq = struct.pack("<QII", 9, 1, 0) + struct.pack("<QII", 0x14000, 0x4000, 1 << 8)
    sq0, rq0 = 0x112000, 0x113000	# QP 0 (RC, connected to itself)
    away = bytes([OP_QP_MODIFY]) + struct.pack("<BI", 0x80 | 3, 1 << 7)	# RTS, to "another host"
    # A long WRITE held by back-pressure; its region goes away; the path resumes.
    yield (mem(sq0, wqe(0, 8192)) + bytes([0x10 | OP_TX, OP_DOORBELL, 0, 1, OP_MR_DESTROY,
                                          OP_TX, OP_TIMER, 200]))
    # A SEND to "another host", its frames delivered back one by one around a deregistration.
    yield (mem(rq0, rq) + bytes([OP_DOORBELL, 1, 1]) + away + mem(sq0, wqe(2, 6000)) +
           bytes([OP_DOORBELL, 0, 1, OP_REPLAY, 0, OP_MR_DESTROY, OP_REPLAY, 1, OP_REPLAY, 2,
                  OP_REPLAY, 3, OP_TIMER, 100]))
    # A WRITE to "another host": replayed twice (duplicates), then the QP is destroyed.
    yield (away + mem(sq0, wqe(0, 5000)) + bytes([OP_DOORBELL, 0, 1, OP_REPLAY, 0, OP_REPLAY, 1,
                                                 OP_REPLAY, 0, OP_QP_DESTROY, OP_REPLAY, 2,
                                                 OP_TIMER, 50]))
    # A long WRITE into a fast-registered region, held by back-pressure, while the region
    # is invalidated and registered again under a new variant.
    key = FRMR_KEY | 7
    yield (mem(rq0, rq) + mem(sq0, reg_wqe(key, length=0x8000, npages=8)) +
           mem(sq0 + 256, send_wqe(0, 8192, 0x40000, key)) +
           bytes([0x10 | OP_TX, OP_DOORBELL, 0, 2]) +
           mem(sq0 + 512, inv_wqe(key)) + mem(sq0 + 768, reg_wqe(key + 1)) +
           bytes([OP_DOORBELL, 0, 4, OP_TX, OP_TIMER, 200]))
    # A READ answered in pieces; the region is replaced while responses wait.
    yield (mem(sq0, wqe(4, 8192)) + bytes([0x10 | OP_TX, OP_DOORBELL, 0, 1, OP_MR_DESTROY,
                                          OP_MR_CREATE, 15, 0, 8, 0, 0, OP_TX, OP_TIMER, 255,
                                          OP_RESET, OP_TIMER, 1]))


def qemu_seeds():
    """QEMU's generic-fuzz: operations joined by b"FUZZ" (tests/qtest/fuzz/generic_fuzz.c).

    A write is op 3 with {u8 size (2: 32 bits), u8 region, u32 offset, u64 value}; which
    region an index names depends on the BAR layout, so each seed tries the first four.
    op 7 adds a DMA pattern (u8 index, u8 stride, bytes): what the device reads from guest
    memory (its admin commands, their arguments) is filled with it. op 9 steps the clock.
    """
    def write(region, off, val, size=2):
        return bytes([3]) + struct.pack("<BBxxIQ", size, region, off, val)

    def pattern(data):
        return bytes([7, 0, 0]) + data

    asq, acq = 0x100000, 0x101000
    commands = (cmd(0x12, struct.pack("<II", 0, 0)),                         # CREATE_PD
                cmd(0x01, struct.pack("<QII", 0x102000, 144, 0)),            # QUERY_DEVICE
                cmd(0x20, struct.pack("<QIHH", 0x103000, 4, 0, 1)),          # CREATE_EQ
                cmd(0x10))                                                   # CREATE_UCTX
    for region in range(4):
        for c in commands:
            ops = [pattern(c),
                   write(region, 0x18, asq), write(region, 0x20, acq), write(region, 0x28, 2),
                   write(region, 0x10, 1), write(region, 0x2c, 1), bytes([9]),
                   write(region, 0x2c, 2), write(region, 0x30, 1), bytes([9])]
            yield b"FUZZ".join(ops)
        # Doorbells of page 0 and 1 (SQ, CQ arm, EQ) on whatever region this is.
        yield b"FUZZ".join([write(region, 0x10, 1), write(region, 0x0, 1 << 32 | 2, 3),
                            write(region, 0x1018, 3 << 32 | 1, 3), write(region, 0x40, 5, 3)])
    # Objects of the largest geometry from one guest page listed many times (issue 25: the
    # device's host memory budget). Each DMA read of memory not read before takes the next
    # pattern, in the order the device reads: the commands, their arguments, page lists.
    yield from qemu_large_seeds(write, pattern, asq, acq)


def qemu_large_seeds(write, pattern, asq, acq):
    page = 0x4000000                    # a page list page whose entries all name itself
    same = pattern(struct.pack("<Q", page))
    # Which pattern a read gets is generic-fuzz's to decide: these seeds reach the creates'
    # checks with the largest geometry (seen with -trace qhca_engine); the page lists' own
    # reads still get the first pattern, and the fuzzer goes on from there.

    def pbl(addr, npages, levels):
        return struct.pack("<QIB3x", addr, npages, levels)

    def obj_at(addr, in_len):
        return struct.pack("<QIIQII", addr, in_len, 0, 0, 0, 0)

    eq = pattern(cmd(0x20, struct.pack("<QIHH", 0x103000, 4, 0, 1)))       # CREATE_EQ
    pd = pattern(cmd(0x12, struct.pack("<II", 0, 0)))                      # CREATE_PD
    small_cq = [pattern(cmd(0x40, obj_at(0x3004000, 32))),
                pattern(pbl(0x3005000, 1, 1) + struct.pack("<IIII", 4, 1, 0, 0))] + [same] * 2
    big_cq = [pattern(cmd(0x40, obj_at(0x3006000, 32))),             # 4M CQEs, 32769 pages
              pattern(pbl(0x3007000, 32769, 2) + struct.pack("<IIII", 22, 1, 0, 0))] + [same] * 3
    qp_args = struct.pack("<IIIII8BI", 1, 1, 1, 0, 0, 2, 0, 15, 15, 12, 12, 0, 0, 0)
    big_qp = [pattern(cmd(0x44, obj_at(0x3008000, 64))),             # RC, two 128 MiB rings
              pattern(qp_args + pbl(0x3009000, 32768, 2) + pbl(0x3009000, 32768, 2))] + [same] * 3
    mr_args = struct.pack("<IIQQII", 1, 1, 1 << 40, 4 << 30, 0, 0) + pbl(0x300a000, 1 << 20, 2)
    big_mr = [pattern(cmd(0x42, obj_at(0x300b000, 48))), pattern(mr_args)] + [same] * 3  # 4 GiB
    for region in range(4):         # which index BAR0 has depends on the layout
        start = [write(region, 0x18, asq), write(region, 0x20, acq), write(region, 0x28, 4),
                 write(region, 0x10, 1)]
        for patterns, ncmd in (([eq, pd] + big_cq, 3), ([eq, pd] + small_cq + big_qp, 4),
                               ([pd] + big_mr, 2)):
            for tail in (ncmd, 15):     # once; then on until the budget is spent
                yield b"FUZZ".join(patterns + start + [write(region, 0x2c, tail), bytes([9])])


def ibswitch_seeds():
    """fuzz_ibswitch: a configuration byte, then records (ctl, port, length, bytes)."""
    def rec(ctl, port, body):
        return struct.pack("<BBH", ctl, port, len(body)) + body

    def mad(method, attr, mod=0, data=b"", hops=(1,), mkey=0, dr=True):
        m = bytearray(256)
        m[0:4] = bytes([1, 0x81 if dr else 0x01, 1, method])
        if dr:
            m[6:8] = bytes([1, len(hops)])
            m[32:36] = b"\xff" * 4
            m[129:129 + len(hops)] = bytes(hops)
        m[8:16] = struct.pack(">Q", 0x77)
        m[16:18] = struct.pack(">H", attr)
        m[20:24] = struct.pack(">I", mod)
        m[24:32] = struct.pack(">Q", mkey)
        m[64:64 + len(data)] = data
        return bytes(m)

    GET, SET = 1, 2
    pinfo = bytes(16) + struct.pack(">HH", 3, 1) + bytes(12) + bytes([0x73, 0x50, 0])
    lft = bytes([0xff, 1, 2, 0]) + b"\xff" * 60
    data = [rec(1, 0, ib_frame(0x64, 0x10, 0, b"data" * 16, b"", struct.pack(">II", 0x1234, 7),
                               dlid=2)),
            rec(1, 1, ib_frame(0x64, 0xffffff, 0, b"mc" * 8, b"", struct.pack(">II", 0x1234, 7),
                               dlid=0xc001, grh=True)),
            rec(1, 0, ib_frame(0x04, 2, 0, b"rc" * 30, dlid=3)),
            rec(1, 0, ib_frame(0x64, 0, 0, bytes(256), b"", bytes(8), dlid=9, vl=15))]
    smps = [rec(2, 0, mad(GET, 0x11)), rec(2, 0, mad(GET, 0x12)), rec(2, 0, mad(GET, 0x15, 1)),
            rec(2, 0, mad(SET, 0x19, 0, lft)), rec(2, 0, mad(SET, 0x1b, 0, struct.pack(">HH", 0, 6))),
            rec(2, 0, mad(SET, 0x15, 1, pinfo)), rec(2, 0, mad(GET, 0x16)),
            rec(2, 0, mad(GET, 0x11, hops=(1, 2))), rec(6, 0, mad(GET, 0x15, 0, dr=False)),
            rec(2, 1, mad(0x81, 0x11, hops=(1, 2))), rec(2, 0, mad(SET, 0x12, 0, bytes(11) + b"\x94")),
            rec(2, 0, mad(SET, 0x17, 0, bytes(8))), rec(2, 0, mad(GET, 0x18, 1 << 16)),
            rec(2, 0, mad(GET, 0x10))]
    for cfg in (0x00, 0x05, 0x07):
        yield bytes([cfg]) + b"".join(smps + data)
    # an M_Key at each protection level: SMPs with it (ctl bit 3) and without, the lease
    # running out (clock records), a link flap, a drain
    for level in range(4):
        cfg = 0x01 | 0x08 | level << 4 | 0x40
        recs = [rec(0x0a, 0, mad(GET, 0x15, 0)), rec(2, 0, mad(SET, 0x16, 0, bytes(64))),
                rec(2, 0, mad(GET, 0x15, 0)), rec(0x80, 0, bytes(120)),
                rec(2, 0, mad(GET, 0x15, 0)), rec(0x0a, 0, mad(SET, 0x15, 0, pinfo)),
                rec(0x81, 1, b""), rec(0x82, 0, b""), rec(0x0e, 0, mad(SET, 0x19, 0, lft, dr=False))]
        yield bytes([cfg]) + b"".join(recs + data)


def fabric_control_seeds():
    """fuzz_fabric_control: a flags byte, control lines, then records after "\n@" (the
    target's header comment): c control lines, A-D script files, f frames, t time."""
    def rec(kind, body=b""):
        return b"\n@" + kind + body

    def frame(port, data, fix=1):
        return rec(b"f", bytes([port, fix]) + data)

    def t(exp, drain=True):
        return rec(b"t", bytes([exp | (0x80 if drain else 0)]))

    bcast = b"\xff" * 6 + bytes.fromhex("525400000001") + b"\x08\x00" + bytes(range(64))
    # Ethernet: impairments with a delay line, broadcast into it, timed events, a capture.
    yield (b"\x04" + b"set 2 out delay=1ms rate=10 jitter=100us\nset 1 in dup=50 reorder=50 "
           b"corrupt=10\nset 3 loss=5% mtu=100 drop=2\nlink 3 down\nat 1ms link 3 up\n"
           b"seed 7\nhelp\nzero\ncapture start cap" + frame(0, bcast) + frame(1, bcast) +
           frame(0, bcast, 3) + t(10, False) + rec(b"c", b"show\nclear 2\ncapture stop") +
           t(12))
    # Scripts: nested, one that loads itself, events separated by ';' and comments.
    yield (b"\x02" + b"script A" + rec(b"A", b"\nat 1ms script B # nested\n"
           b"at 2ms port 2 out loss=10%; at 3ms port 1 down\nat 4ms port 1 up\n") +
           rec(b"B", b"\nat 0 port 2 in delay=2ms\nat 1s clear\n") +
           rec(b"c", b"script A\nscript B\nat 5ms script B") + t(12) + t(20) +
           rec(b"C", b"\nat 0 script C\n") + rec(b"c", b"script C\nscript D\nshow") +
           rec(b"D", b"\nat 0 at 1ms at 2ms zero\n" * 8) + rec(b"c", b"script D") + t(21))

    # InfiniBand: the SM programs the switch (ports ACTIVE, LinearFDBTop, the LFT, the MFT),
    # then multicast behind a delay, and show.
    def smp(method, attr, mod, data=b""):
        mad = bytearray(256)
        mad[0:4] = bytes([1, 0x81, 1, method])
        mad[6], mad[7] = 1, 1                                   # hop pointer, hop count
        mad[16:18] = struct.pack(">H", attr)
        mad[20:24] = struct.pack(">I", mod)
        mad[32:36] = b"\xff" * 4                               # DR SLID, DLID permissive
        mad[64:64 + len(data)] = data
        mad[129] = 1                                            # initial path: port 1
        return frame(0, ib_frame(0x64, 0, 0, bytes(mad), b"", struct.pack(">II", 0, 0),
                                 dlid=0xffff, vl=15))
    ib = b"\x07" + b"show"
    for port in range(1, 5):
        for state in (3, 4):                                    # ARMED, ACTIVE
            ib += smp(2, 0x15, port, bytes(32) + bytes([state]))
    ib += smp(2, 0x12, 0, bytes(6) + struct.pack(">H", 0xbfff))  # SwitchInfo: LinearFDBTop
    for block in range(0, 768, 97):
        ib += smp(2, 0x19, block, bytes([2]) * 64)
    ib += smp(2, 0x1b, 0, bytes(2) + struct.pack(">H", 0x1e))   # MFT: MLID 0xc001, ports 1-4
    mc = ib_frame(0x64, 0xffffff, 0, b"mc" * 64, b"", struct.pack(">II", 0x1234, 7), dlid=0xc001,
                  grh=True)
    ib += rec(b"c", b"capture start ibcap\nset 2-4 out delay=1ms") + frame(0, mc) + frame(0, mc)
    yield ib + t(5, False) + frame(1, mc) + rec(b"c", b"show\ncapture stop") + t(12)
    # A flood into a delay line behind the smallest queues (flags: 3 ports, bit 3): 21 copies
    # of a 1000-byte broadcast, most of them dropped and counted.
    big = b"\xff" * 6 + bytes.fromhex("525400000001") + b"\x08\x00" + bytes(986)
    yield (b"\x0c" + b"set 2-3 out delay=10ms" + frame(0, big, 1 | 20 << 2) + t(8, False) +
           rec(b"c", b"show") + t(14))


def migrate_seeds():
    """fuzz_migrate edits a real saved state: nothing (it loads), one flipped byte, a word
    set to a large count, a cut, an insertion."""
    rec = lambda op, off, rest=b"": struct.pack("<BI", op, off) + rest
    yield b""
    yield rec(0, 1000, b"\x01\x10")
    yield rec(1, 600, struct.pack("<I", 0x7fffffff))
    yield rec(2, 2000)
    yield rec(3, 1500, b"\x04\x00\x00\x00\x01")
    yield rec(0, 300, b"\x02\xff\xff") + rec(1, 1200, struct.pack("<I", 1))


def crc32c(b):
    """CRC32c (Castagnoli), bit by bit: the seeds are small."""
    crc = 0xffffffff
    for x in b:
        crc ^= x
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xffffffff


def iwarp_seeds():
    """fuzz_iwarp. The first byte: the side (bit 0: the device connects out), hostile mode
    (bit 1), the driver accepting requests at once (bit 2), no automatic handshake (bit 3),
    the peer's MSS (bits 4-7: 64 + 64 n). Stream mode: the peer's byte stream after the TCP
    handshake (an MPA request or reply: revision 2, CRC, RFC 6581's IRD and ORD, private
    data; then FPDUs: a SEND, an RDMA WRITE into the region, key 0x100, a Read Request of
    it, a Terminate), cut into chunks of [length][bytes], 0xff a timer tick. Hostile mode:
    ops (fuzz_iwarp.c): blind and out-of-window segments, RSTs in and out of the window,
    SYNs on the connection, SYN-ACKs to nothing, SYN floods, a simultaneous open, MPA frames
    malformed and oversized, floods of 1-byte segments in and out of order, zero windows,
    the driver's commands; both sides."""
    def mpa_rr(pd=b"", rev=2, reply=False):
        body = struct.pack(">HH", 4, 4) + pd if rev == 2 else pd
        key = b"MPA ID Rep Frame" if reply else b"MPA ID Req Frame"
        return (key + bytes([0x40 | (0x10 if rev == 2 else 0), rev]) +
                struct.pack(">H", len(body)) + body)

    def mpa_req(pd=b"", rev=2):
        return mpa_rr(pd, rev)

    def fpdu(ulpdu):
        b = struct.pack(">H", len(ulpdu)) + ulpdu
        b += b"\0" * ((4 - len(b) % 4) % 4)
        return b + struct.pack("<I", crc32c(b))

    def untagged(op, qn, msn, mo, data, last=True, extra=b""):
        return fpdu(bytes([(0x40 if last else 0) | 1, 0x40 | op]) + b"\0\0\0\0" +
                    struct.pack(">III", qn, msn, mo) + extra + data)

    def tagged(op, stag, to, data, last=True):
        return fpdu(bytes([0x80 | (0x40 if last else 0) | 1, 0x40 | op]) +
                    struct.pack(">IQ", stag, to) + data)

    def chunks(b, n=200):
        return b"".join(bytes([len(b[i:i + n])]) + b[i:i + n] for i in range(0, len(b), n))

    # the first byte
    ACTIVE, HOSTILE, ACCEPT, RAW = 1, 2, 4, 8

    def mss(n):
        return n << 4		# 64 + 64 n bytes

    # hostile mode's ops (op byte % 16), as fuzz_iwarp.c reads them
    def op_data(b):
        return b"".join(bytes([0, len(b[i:i + 255])]) + b[i:i + 255]
                        for i in range(0, len(b), 255))

    def op_blind(flags, seq, ack, win, data=b"", syn_mss=None):
        b = bytes([1, flags]) + struct.pack(">IIH", seq & 0xffffffff, ack & 0xffffffff, win)
        b += bytes([len(data)]) + data
        return b + (struct.pack(">H", syn_mss) if syn_mss is not None else b"")

    def op_rst(kind, off):
        return bytes([2, kind]) + struct.pack(">h", off)

    def op_syn(kind, arg):
        return bytes([3, kind]) + struct.pack(">H", arg)

    def op_mpa(keysel, flags, rev, pd_len, pd=b"", ird=4, ord_=4):
        return bytes([4, keysel, flags, rev]) + struct.pack(">HHHH", pd_len, ird, ord_,
                                                            len(pd)) + pd

    def op_fpdu(sel, stag=0, to=0, msn=1, mo=0, sink_stag=0, sink_to=0, size=0, term=(0, 0, 0),
                data=b""):
        return (bytes([5, sel]) + struct.pack(">IIHHIII", stag, to, msn, mo, sink_stag, sink_to,
                                              size) + bytes(term) +
                struct.pack(">H", len(data)) + data)

    def op_tiny(count, stride, byte, base):
        return bytes([6, count, stride, byte]) + struct.pack(">H", base)

    def op_tick(n):
        return bytes([7, n])

    def op_ack(back, win):
        return bytes([8]) + struct.pack(">HH", back, win)

    FIN, REPLAY, HANDSHAKE = bytes([9]), bytes([11]), bytes([12])

    def op_driver(sel, extra=b""):
        return bytes([10, sel]) + extra

    def post(op, length, rkey=0x100, raddr=0x10000 >> 8):
        return op_driver(5, bytes([op]) + struct.pack(">HII", length, rkey, raddr))

    LAST, ENH_CRC = 0x10, 0x50
    good_req = op_mpa(0, ENH_CRC, 2, 4 + 2, b"hi")
    good_rep = op_mpa(0, ENH_CRC, 2, 4)
    read_req = struct.pack(">IQIIQ", 0x100, 0x14000, 256, 0x100, 0x10000)

    # stream mode, the device listening (as before), and connecting out
    yield bytes([ACCEPT | mss(8)]) + chunks(mpa_req(b"hi") + untagged(3, 0, 1, 0, b"hello")) + b"\0"
    yield bytes([ACCEPT | mss(4)]) + chunks(mpa_req() + tagged(0, 0x100, 0x10000, b"w" * 300) +
                                            untagged(1, 1, 1, 0, b"", extra=read_req)) + b"\xff\x01"
    yield bytes([ACCEPT | mss(2)]) + chunks(mpa_req() + untagged(3, 0, 1, 0, b"a" * 100, last=False) +
                                            untagged(3, 0, 1, 100, b"b" * 50) +
                                            untagged(7, 2, 1, 0, b"", extra=b"\x00\x10\x00\x00")) + b"\x02"
    yield bytes([0x00]) + chunks(mpa_req(rev=1)) + b"\xff\xff\xff"
    yield bytes([ACTIVE | mss(6)]) + chunks(mpa_rr(reply=True) + untagged(3, 0, 1, 0, b"pong") +
                                            tagged(0, 0x100, 0x10400, b"x" * 200)) + b"\xff\x00"
    yield bytes([ACTIVE | mss(1)]) + chunks(mpa_rr(b"no", reply=True)[:17] + b"\x60\x02") + b"\x01"
    # hostile, the device listening: the datapath, then tiny segments out of order, blind
    # and out-of-window segments, a RST in the window (a challenge ACK), one exactly at
    # RCV.NXT (taken)
    yield (bytes([HOSTILE | ACCEPT | mss(4)]) + good_req +
           op_fpdu(3 | LAST, msn=1, data=b"hello") +
           op_fpdu(0 | LAST, stag=0x100, to=0x10000, data=b"w" * 300) +
           op_tiny(40, 2, 0x41, 1) + op_tiny(8, 0, 0x42, 0) +
           op_blind(0x18, 0x40000000, 0, 65535, b"far") + op_blind(0x10, 5, -3, 0) +
           op_rst(4 | 1, 100) + op_tick(30) + op_rst(1, 0) + op_tick(200) + b"\x00")
    # hostile, listening: SYN on the connection, a SYN-ACK to nothing, a SYN flood past the
    # half-open bound, a zero window and old ACKs, the handshake again, a FIN
    yield (bytes([HOSTILE | ACCEPT | mss(15)]) + good_req + op_syn(0, 10) + op_syn(1, 77) +
           op_syn(2, 0x0090) + op_ack(0, 0) + op_ack(2000, 100) + REPLAY + HANDSHAKE +
           op_fpdu(1 | LAST, sink_stag=0x100, sink_to=0x14000, size=256, stag=0x100, to=0x10000) +
           op_tick(100) + FIN + op_tick(255) + b"\x01")
    # hostile, listening: MPA frames malformed (a bad key; markers; revision 3) and oversized
    # (a length of 0xffff with 700 bytes, then 600 bytes claimed and sent)
    yield (bytes([HOSTILE | ACCEPT | mss(8)]) + op_mpa(2 | (3 << 4), ENH_CRC, 2, 6, b"hi") +
           b"\x02")
    yield (bytes([HOSTILE | mss(8)]) + op_mpa(0, 0x80 | ENH_CRC, 3, 0xffff, b"p" * 700) +
           op_tick(255) + b"\x00")
    yield (bytes([HOSTILE | ACCEPT | mss(9)]) + op_mpa(0, ENH_CRC, 2, 604, b"q" * 600) +
           op_driver(1) + op_tick(50) + b"\x01")
    # hostile, listening: the MPA request and a SEND in 1-byte segments, the driver deciding
    yield (bytes([HOSTILE]) + b"".join(op_data(bytes([x])) for x in mpa_req(b"hi")) +
           op_driver(0) + b"".join(op_data(bytes([x])) for x in untagged(3, 0, 1, 0, b"tiny")) +
           op_driver(2) + op_tick(10) + FIN + b"\x02")
    # hostile, connecting out: the reply, the device's SEND and WRITE and READ into a zero
    # window (its persist timer), the window opened, a Read Request of the peer's, a
    # Terminate, the QP to error
    yield (bytes([HOSTILE | ACTIVE | mss(4)]) + good_rep + post(0, 100) + post(1, 3000) +
           post(2, 512) + op_ack(0, 0) + op_tick(100) + op_tick(200) + op_ack(0, 65535) +
           op_fpdu(2 | LAST, stag=0x100, to=0x10000, data=b"r" * 64) +
           op_fpdu(1 | LAST, sink_stag=0x100, sink_to=0x14000, size=128, stag=0x100, to=0x10000) +
           op_fpdu(7 | LAST, term=(1, 2, 3)) + op_driver(4) + op_tick(255) + b"\x00")
    # hostile, connecting out, no automatic handshake: a simultaneous open (the peer's SYN
    # crossing the device's), then its ACK; another where the peer refuses with a RST
    yield (bytes([HOSTILE | ACTIVE | RAW | mss(2)]) + op_syn(3, 0) +
           op_blind(0x10, 0, 0, 65535) + good_rep + op_fpdu(3 | LAST, msn=1, data=b"s") +
           op_driver(3) + b"\x01")
    yield (bytes([HOSTILE | ACTIVE | RAW | mss(2)]) + op_rst(1, 0) + op_tick(100) + b"\x02")
    yield (bytes([HOSTILE | ACTIVE | RAW | mss(3)]) + op_syn(4, 0) + op_syn(4, 0) +
           HANDSHAKE + op_mpa(0, ENH_CRC | 0x20, 2, 4) + op_tick(255) + b"\x00")


def main():
    if len(sys.argv) != 2 or sys.argv[1].startswith("-"):
        sys.exit(__doc__)
    for name, gen in (("admin", admin_seeds), ("wqe", wqe_seeds), ("rx", rx_seeds),
                      ("mixed", mixed_seeds), ("qemu", qemu_seeds), ("ibswitch", ibswitch_seeds),
                      ("fabric_control", fabric_control_seeds), ("migrate", migrate_seeds),
                      ("iwarp", iwarp_seeds)):
        d = os.path.join(sys.argv[1], name)
        os.makedirs(d, exist_ok=True)
        for i, seed in enumerate(gen()):
            with open(os.path.join(d, "seed-%02d" % i), "wb") as f:
                f.write(seed)


if __name__ == "__main__":
    main()
