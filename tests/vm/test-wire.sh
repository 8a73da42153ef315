#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# VM test of the wire: traffic of every kind recorded with QEMU's filter-dump, decoded by
# tshark with no malformed RoCE header, and every ICRC recomputed by an independent checker
# (which must also catch a corrupted frame).
set -uo pipefail
. "$(dirname "$0")/lib.sh"

pair() {	# pair SERVER_CMD CLIENT_CMD
    "$qhca" exec 2 -- "rm -f /tmp/srv.rc; setsid sh -c '$1 > /tmp/srv.log 2>&1; echo \$? > /tmp/srv.rc' < /dev/null > /dev/null 2>&1 &"
    sleep 1.5
    timeout 120 "$qhca" exec 1 -- "$2" > /dev/null || return 1
    eventually 20 "$qhca" exec 2 -- 'test "$(cat /tmp/srv.rc 2>/dev/null)" = 0'
}

traffic() {
    pair "ibv_rc_pingpong -d qhca_0 -g 1 -s 9000 -n 20 -c" \
         "ibv_rc_pingpong -d qhca_0 -g 1 -s 9000 -n 20 -c 192.168.77.2" &&
    pair "ibv_ud_pingpong -d qhca_0 -g 1 -s 512 -n 20" \
         "ibv_ud_pingpong -d qhca_0 -g 1 -s 512 -n 20 192.168.77.2" &&
    pair "ibv_uc_pingpong -d qhca_0 -g 1 -s 3000 -n 20" \
         "ibv_uc_pingpong -d qhca_0 -g 1 -s 3000 -n 20 192.168.77.2" &&
    pair "ib_read_bw -d qhca_0 -x 1 -s 10000 -n 20" \
         "ib_read_bw -d qhca_0 -x 1 -s 10000 -n 20 192.168.77.2" &&
    pair "ib_atomic_bw -d qhca_0 -x 1 -n 20" "ib_atomic_bw -d qhca_0 -x 1 -n 20 192.168.77.2" &&
    pair "ib_write_bw -d qhca_0 -x 1 -s 5000 -n 20" \
         "ib_write_bw -d qhca_0 -x 1 -s 5000 -n 20 192.168.77.2"
}

tshark_clean() {	# every RoCE frame decodes, none is malformed, the opcodes are all there
    local f=$QHCA_RUN/vm1.pcap n bad ops
    n=$(tshark -r "$f" -Y infiniband.bth 2>/dev/null | wc -l)
    bad=$(tshark -r "$f" -Y '_ws.malformed || (infiniband && _ws.expert.severity >= 8388608)' \
          2>/dev/null | wc -l)
    ops=$(tshark -r "$f" -Y infiniband.bth -T fields -e infiniband.bth.opcode 2>/dev/null |
          sort -u | tr '\n' ' ')
    echo "$n RoCE frames decoded, $bad malformed; opcodes: $ops"
    [ "$n" -gt 100 ] && [ "$bad" = 0 ] &&
        for op in 0 1 2 6 8 12 13 14 15 17 18 20 32 33 34 100; do
            grep -qw "$op" <<<"$ops" || { echo "opcode $op missing"; return 1; }
        done
}

icrc_all_correct() {
    "$root/tools/qhca-icrc-check" "$QHCA_RUN"/vm1.pcap "$QHCA_RUN"/vm2.pcap
}

icrc_checker_catches_corruption() {	# flip a payload byte of a RoCE frame: the checker fails
    python3 - "$QHCA_RUN/vm1.pcap" "$QHCA_RUN/bad.pcap" <<'PY'
import struct, sys
d = bytearray(open(sys.argv[1], "rb").read())
off = 24
while off + 16 <= len(d):
    n = struct.unpack("<I", d[off + 8:off + 12])[0]
    f = d[off + 16:off + 16 + n]
    if len(f) > 60 and f[12:14] == b"\x08\x00" and f[36:38] == b"\x12\xb7":
        d[off + 16 + 58] ^= 0x40
        break
    off += 16 + n
open(sys.argv[2], "wb").write(d)
PY
    ! "$root/tools/qhca-icrc-check" "$QHCA_RUN/bad.pcap"
}

"$qhca" down > /dev/null 2>&1
check "up -n 2 --pcap" "$qhca" up -n 2 --pcap || { finish; exit 1; }
check "traffic: RC, UC, UD, READ, ATOMIC, WRITE" traffic
vm_down	# QEMU closes the pcap files on exit
check "tshark decodes every RoCE header" tshark_clean
check "every ICRC is correct (independent checker)" icrc_all_correct
check "the ICRC checker catches a corrupted frame" icrc_checker_catches_corruption
finish
