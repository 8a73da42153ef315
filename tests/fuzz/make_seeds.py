#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Write seed corpora for the fuzz targets: well-formed inputs that reach deep code.

  make_seeds.py DIR     creates DIR/admin, DIR/wqe, DIR/rx, DIR/mixed and DIR/qemu
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


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    for name, gen in (("admin", admin_seeds), ("wqe", wqe_seeds), ("rx", rx_seeds),
                      ("mixed", mixed_seeds), ("qemu", qemu_seeds)):
        d = os.path.join(sys.argv[1], name)
        os.makedirs(d, exist_ok=True)
        for i, seed in enumerate(gen()):
            with open(os.path.join(d, "seed-%02d" % i), "wb") as f:
                f.write(seed)


if __name__ == "__main__":
    main()
