#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# VM test of the wire: traffic of every kind recorded with QEMU's filter-dump, decoded by
# tshark with no malformed RoCE header, and every ICRC recomputed by an independent checker
# (which must also catch a corrupted frame). RoCE v1 (Ethertype 0x8915) beside v2: the GID
# of each type picks the format, RC, UD and rdma_cm run over v1, and a v1 and a v2 QP pair
# run at the same time on one port.
set -uo pipefail
. "$(dirname "$0")/lib.sh"

pair() {	# pair SERVER_CMD CLIENT_CMD
    "$qhca" exec 2 -- "rm -f /tmp/srv.rc; setsid sh -c '$1 > /tmp/srv.log 2>&1; echo \$? > /tmp/srv.rc' < /dev/null > /dev/null 2>&1 &"
    sleep 1.5
    timeout 120 "$qhca" exec 1 -- "$2" > /dev/null || return 1
    eventually 20 "$qhca" exec 2 -- 'test "$(cat /tmp/srv.rc 2>/dev/null)" = 0'
}

traffic() {
    pair "ibv_rc_pingpong -d qhca_0 -g 3 -s 9000 -n 20 -c" \
         "ibv_rc_pingpong -d qhca_0 -g 3 -s 9000 -n 20 -c 192.168.77.2" &&
    pair "ibv_ud_pingpong -d qhca_0 -g 3 -s 512 -n 20" \
         "ibv_ud_pingpong -d qhca_0 -g 3 -s 512 -n 20 192.168.77.2" &&
    pair "ibv_uc_pingpong -d qhca_0 -g 3 -s 3000 -n 20" \
         "ibv_uc_pingpong -d qhca_0 -g 3 -s 3000 -n 20 192.168.77.2" &&
    pair "ib_read_bw -d qhca_0 -x 3 -s 10000 -n 20" \
         "ib_read_bw -d qhca_0 -x 3 -s 10000 -n 20 192.168.77.2" &&
    pair "ib_atomic_bw -d qhca_0 -x 3 -n 20" "ib_atomic_bw -d qhca_0 -x 3 -n 20 192.168.77.2" &&
    pair "ib_write_bw -d qhca_0 -x 3 -s 5000 -n 20" \
         "ib_write_bw -d qhca_0 -x 3 -s 5000 -n 20 192.168.77.2"
}

gid_types() {	# GID 2 is the IPv4 address's RoCE v1 GID, GID 3 its RoCE v2 one
    local i out
    for i in 1 2; do
        out=$("$qhca" exec $i -- 'p=/sys/class/infiniband/qhca_0/ports/1; for g in 2 3; do
            echo "$(cat $p/gids/$g) $(cat $p/gid_attrs/types/$g)"; done') || return 1
        echo "$out"
        grep -qx "0000:0000:0000:0000:0000:ffff:c0a8:4d0$i IB/RoCE v1" <<<"$(sed -n 1p <<<"$out")" &&
            grep -qx "0000:0000:0000:0000:0000:ffff:c0a8:4d0$i RoCE v2" <<<"$(sed -n 2p <<<"$out")" ||
            return 1
    done
}

traffic_v1() {	# RC, UD and READ on the RoCE v1 GID; rdma_cm with RoCE v1 as its default
    pair "ibv_rc_pingpong -d qhca_0 -g 2 -s 9000 -n 20 -c" \
         "ibv_rc_pingpong -d qhca_0 -g 2 -s 9000 -n 20 -c 192.168.77.2" &&
    pair "ibv_ud_pingpong -d qhca_0 -g 2 -s 512 -n 20" \
         "ibv_ud_pingpong -d qhca_0 -g 2 -s 512 -n 20 192.168.77.2" &&
    pair "ib_read_bw -d qhca_0 -x 2 -s 10000 -n 20" \
         "ib_read_bw -d qhca_0 -x 2 -s 10000 -n 20 192.168.77.2" &&
    cm_mode "IB/RoCE v1" &&
    pair "ib_write_bw -d qhca_0 -R -s 5000 -n 20" \
         "ib_write_bw -d qhca_0 -R -s 5000 -n 20 192.168.77.2" &&
    cm_mode "RoCE v2"
}

cm_mode() {	# rdma_cm's GID type for qhca_0 in both guests (its configfs, as on a ConnectX)
    local i
    for i in 1 2; do
        "$qhca" exec $i -- "modprobe rdma_ucm && d=/sys/kernel/config/rdma_cm/qhca_0 &&
            mkdir -p \$d && echo '$1' > \$d/ports/1/default_roce_mode &&
            test \"\$(cat \$d/ports/1/default_roce_mode)\" = '$1'" || return 1
    done
}

side_by_side() {	# RC pingpongs over RoCE v2 and over RoCE v1 at once, both succeed
    "$qhca" exec 2 -- "rm -f /tmp/sb*; for g in 2 3; do setsid sh -c \"ibv_rc_pingpong -d qhca_0 -g \$g -p 1860\$g -s 4096 -n 800 > /tmp/sb\$g.log 2>&1; echo \\\$? > /tmp/sb\$g.rc\" < /dev/null > /dev/null 2>&1 & done" || return 1
    eventually 15 "$qhca" exec 2 -- 'ss -ltn | grep -q ":18602 " && ss -ltn | grep -q ":18603 "' ||
        return 1
    timeout 120 "$qhca" exec 1 -- "ibv_rc_pingpong -d qhca_0 -g 3 -p 18603 -s 4096 -n 800 192.168.77.2 > /tmp/sb3.log 2>&1 & v2=\$!
        ibv_rc_pingpong -d qhca_0 -g 2 -p 18602 -s 4096 -n 800 192.168.77.2 > /tmp/sb2.log 2>&1 &&
        tail -n 1 /tmp/sb2.log && wait \$v2 && tail -n 1 /tmp/sb3.log" || return 1
    eventually 20 "$qhca" exec 2 -- 'test "$(cat /tmp/sb2.rc /tmp/sb3.rc 2>/dev/null | tr -d "\n")" = 00'
}

# fields FILTER FIELD: FIELD (a number) of every frame of vm1.pcap that matches FILTER, one a
# line; fails when tshark does (so that "no malformed frame" needs a tshark that ran).
# Wireshark's RPC-over-RDMA heuristic is off: it takes perftest's 4-byte SENDs (rdma_cm's
# -R) for truncated RPC headers and calls them malformed.
fields() {
    local out
    out=$(tshark -r "$QHCA_RUN/vm1.pcap" --disable-heuristic rpcrdma_infiniband -Y "$1" \
        -T fields -e "$2" 2>&1) ||
        { echo "tshark -Y '$1': $out" >&2; return 1; }
    grep -E '^[0-9]+$' <<<"$out"
    return 0
}

v1_on_the_wire() {	# RoCE v1 frames decode (Ethertype 0x8915, a GRH, a BTH), UD and RC
    local n ops inter
    n=$(fields 'eth.type == 0x8915 && infiniband.grh && infiniband.bth' frame.number | wc -l) &&
        ops=$(fields 'eth.type == 0x8915' infiniband.bth.opcode | sort -u | tr '\n' ' ') &&
        inter=$(tshark -r "$QHCA_RUN/vm1.pcap" -Y 'eth.type == 0x8915 || udp.dstport == 4791' \
            -T fields -e eth.type 2> /dev/null | uniq | wc -l) || return 1
    echo "$n RoCE v1 frames; opcodes: $ops; $inter runs of v1 and v2 in a row"
    # RC SEND, READ request and response, ACK, UD SEND (the pingpong's and the CM's MADs);
    # and the two pingpongs' frames interleaved (many alternations, not a few)
    [ "$n" -gt 50 ] && grep -qw 4 <<<"$ops" && grep -qw 12 <<<"$ops" &&
        grep -qw 13 <<<"$ops" && grep -qw 17 <<<"$ops" && grep -qw 100 <<<"$ops" &&
        [ "$inter" -gt 40 ]
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
    [ "$rc" = 1 ] && grep -qE '^[0-9]+ RoCE frames \([0-9]+ v1, [0-9]+ v2\): [0-9]+ ICRC correct, 1 wrong$' <<<"$out"
}

icrc_v1_checked() {	# the checker counts v1 frames, and catches one corrupted
    python3 - "$QHCA_RUN/vm2.pcap" "$QHCA_RUN/bad1.pcap" <<'PY'
import struct, sys
d = bytearray(open(sys.argv[1], "rb").read())
off = 24
while off + 16 <= len(d):
    n = struct.unpack("<I", d[off + 8:off + 12])[0]
    f = d[off + 16:off + 16 + n]
    if len(f) > 80 and f[12:14] == b"\x89\x15":
        d[off + 16 + 70] ^= 0x01
        break
    off += 16 + n
else:
    sys.exit("no RoCE v1 frame to corrupt")
open(sys.argv[2], "wb").write(d)
PY
    [ $? = 0 ] || return 1
    local out rc
    out=$("$root/tools/qhca-icrc-check" "$QHCA_RUN/bad1.pcap" 2>&1)
    rc=$?
    echo "$out"
    [ "$rc" = 1 ] && grep -qE '^[0-9]+ RoCE frames \([1-9][0-9]* v1, [0-9]+ v2\): [0-9]+ ICRC correct, 1 wrong$' <<<"$out"
}

"$qhca" down > /dev/null 2>&1
check "up -n 2 --pcap" "$qhca" up -n 2 --pcap || { finish; exit 1; }
check "traffic: RC, UC, UD, READ, ATOMIC, WRITE" traffic
check "GIDs: a RoCE v1 and a v2 entry for the IPv4 address" gid_types
check "RoCE v1: RC, UD, READ; rdma_cm (ib_write_bw -R) in RoCE v1 mode" traffic_v1
check "RoCE v1 and v2 QPs side by side on one port" side_by_side
vm_down	# QEMU closes the pcap files on exit
check "tshark decodes every RoCE header" tshark_clean
check "RoCE v1 on the wire: GRH after Ethernet, RC, UD, READ, interleaved with v2" v1_on_the_wire
check "every ICRC is correct, v1 and v2 (independent checker)" icrc_all_correct
check "the ICRC checker catches a corrupted frame" icrc_checker_catches_corruption
check "the ICRC checker checks RoCE v1 frames and catches a corrupted one" icrc_v1_checked
finish
