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

# fields FILTER FIELD: FIELD (a number) of every frame of vm1.pcap that matches FILTER, one a
# line; fails when tshark does (so that "no malformed frame" needs a tshark that ran).
fields() {
    local out
    out=$(tshark -r "$QHCA_RUN/vm1.pcap" -Y "$1" -T fields -e "$2" 2>&1) ||
        { echo "tshark -Y '$1': $out" >&2; return 1; }
    grep -E '^[0-9]+$' <<<"$out"
    return 0
}

tshark_clean() {	# every RoCE frame decodes, none is malformed, the opcodes are all there
    local n bad ops
    n=$(fields infiniband.bth frame.number | wc -l) &&
        bad=$(fields '_ws.malformed || (infiniband && _ws.expert.severity >= 8388608)' frame.number | wc -l) &&
        ops=$(fields infiniband.bth infiniband.bth.opcode | sort -u | tr '\n' ' ') || return 1
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
else:
    sys.exit("no RoCE v2 frame to corrupt")
open(sys.argv[2], "wb").write(d)
PY
    [ $? = 0 ] || return 1
    # the checker runs, finds the frame and reports exactly that one wrong (status 1)
    local out rc
    out=$("$root/tools/qhca-icrc-check" "$QHCA_RUN/bad.pcap" 2>&1)
    rc=$?
    echo "$out"
    [ "$rc" = 1 ] && grep -qE '^[0-9]+ RoCEv2 frames: [0-9]+ ICRC correct, 1 wrong$' <<<"$out"
}

"$qhca" down > /dev/null 2>&1
check "up -n 2 --pcap" "$qhca" up -n 2 --pcap || { finish; exit 1; }
check "traffic: RC, UC, UD, READ, ATOMIC, WRITE" traffic
vm_down	# QEMU closes the pcap files on exit
check "tshark decodes every RoCE header" tshark_clean
check "every ICRC is correct (independent checker)" icrc_all_correct
check "the ICRC checker catches a corrupted frame" icrc_checker_catches_corruption
finish
