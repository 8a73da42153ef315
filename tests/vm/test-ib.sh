#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# VM test of the InfiniBand link layer (docs/infiniband.md): guests whose qhca ports are
# InfiniBand on a fabric that is an IB switch (up --ib), brought up by Debian's opensm in a
# guest and used by unmodified programs:
#  a. two guests: before the SM the ports are INIT with no LID; opensm makes them ACTIVE
#     with LIDs; sminfo, ibnetdiscover (two CAs, one switch), smpquery, perfquery, saquery,
#     ibroute, iblinkinfo, ibping; IPoIB ping; ibv_rc/uc/ud/srq_pingpong by LID with -c;
#     perftest RC and UD bandwidth and latency without -x; rping, ib_send_bw -R and ucmatose
#     through rdma_cm (path records from the SA); UD multicast (mckey: a join through the SA,
#     ibv_attach_mcast, the switch's MFT); the SM killed and another started, the ports stay
#     up; a guest's cable pulled and put back (qhca link), the SM brings the port back; the
#     capture of the whole run decoded by tshark with no malformed packet.
#  b. four guests: every pair reaches every other over IPoIB and RC; the switch's forwarding
#     table is the one opensm reports (ibroute against the fabric's own view).
set -uo pipefail
. "$(dirname "$0")/lib.sh"

x() { timeout 300 "$qhca" exec "$1" -- "${@:2}"; }
tmp=$(mktemp -d)
trap '"$qhca" down > /dev/null 2>&1; rm -rf "$tmp"' EXIT

# pair SERVER CLIENT SERVER_CMD CLIENT_CMD: SERVER_CMD in the background of guest SERVER,
# then CLIENT_CMD in guest CLIENT; both must exit 0.
pair() {
    local s=$1 c=$2 srv=$3 cli=$4 out rc
    x "$s" "pkill -f '^${srv%% *}'; rm -f /tmp/srv.log /tmp/srv.rc; setsid sh -c '$srv > /tmp/srv.log 2>&1; echo \$? > /tmp/srv.rc' < /dev/null > /dev/null 2>&1 &" || return 1
    sleep 1.5
    out=$(x "$c" "$cli" 2>&1)
    rc=$?
    echo "$out" | tail -n 4
    eventually 60 x "$s" 'test -s /tmp/srv.rc' || { echo "server did not finish"; return 1; }
    [ "$rc" = 0 ] && [ "$(x "$s" cat /tmp/srv.rc)" = 0 ] ||
        { echo "client rc $rc; server:"; x "$s" tail -n 20 /tmp/srv.log; return 1; }
}

port_field() {	# port_field I FIELD: a field of ibstat's port 1 in guest I
    x "$1" ibstat qhca_0 1 | sed -n "s/^[[:space:]]*$2: //p"
}

active() {	# active I: guest I's port is ACTIVE with a LID
    [ "$(port_field "$1" State)" = Active ] && [ "$(port_field "$1" "Base lid")" != 0 ]
}

lid_of() { port_field "$1" "Base lid"; }

# ---------------------------------------------------------------- the checks
before_sm() {
    [ "$(port_field 1 'Link layer')" = InfiniBand ] && [ "$(port_field 1 State)" = Initializing ] &&
        [ "$(port_field 2 'Base lid')" = 0 ] &&
        x 1 ibv_devinfo -d qhca_0 | grep -q 'link_layer:.*InfiniBand'
}

# IPoIB without an SM: ping runs and every packet is lost (not: ping or ssh failing).
no_data_before_sm() { ping_lost 1 192.168.77.2; }

sm_up() {	# sm_up GUEST N: opensm in GUEST brings guests 1..N to ACTIVE
    local i
    x "$1" 'opensm -B > /dev/null 2>&1' && eventually 20 x "$1" pidof opensm || return 1
    for i in $(seq 1 "$2"); do
        eventually 90 active "$i" || { echo "guest $i: $(port_field "$i" State)"; return 1; }
    done
}

sm_master() { x 2 sminfo | tee /dev/stderr | grep -q "sm lid $1 .*SMINFO_MASTER"; }

discover() {
    local out
    out=$(x 2 ibnetdiscover 2>&1)
    echo "$out" | grep -v '^#' | grep .
    [ "$(echo "$out" | grep -c '^Switch')" = 1 ] && [ "$(echo "$out" | grep -c '^Ca')" = 2 ] &&
        ! echo "$out" | grep -q Duplicate &&
        echo "$out" | grep -q '"vm1 qhca_0' && echo "$out" | grep -q '"vm2 qhca_0'
}

smp_queries() {
    x 2 smpquery nodeinfo "$lid1" | grep -q 'NodeType:.*Channel Adapter' &&
        x 2 smpquery portinfo "$lid1" | grep -q 'LinkState:.*Active'
}

perf_counters() {
    x 2 perfquery "$lid1" 1 | tee /dev/stderr |
        awk -F. '/^PortXmitPkts/ { n = $NF } END { exit !(n > 0) }'
}

sa_queries() {
    [ "$(x 2 saquery -N | grep -c 'NodeRecord dump')" = 3 ] &&
        x 2 saquery -p --slid "$lid2" --dlid "$lid1" | tee /dev/stderr | grep -q "dlid.*$lid1"
}

switch_routes() {
    local out
    out=$(x 1 ibroute "$swlid")
    echo "$out"
    echo "$out" | grep -q "vm1 qhca_0" && echo "$out" | grep -q "vm2 qhca_0"
}

links_up() { [ "$(x 1 iblinkinfo | tee /dev/stderr | grep -c 'Active/  LinkUp')" -ge 4 ]; }

ipoib_both_ways() { x 1 ping -c 3 -W 5 192.168.77.2 && x 2 ping -c 3 -W 5 192.168.77.1; }

sm_killed() {	# opensm was running and is gone (pidof ran and found none); the ports stay up
    x 1 'pkill opensm && sleep 3 && { pidof opensm; [ $? = 1 ]; }' ||
        { echo "opensm was not running, or still runs"; return 1; }
    [ "$(port_field 1 State)" = Active ] && x 2 ping -c 2 -W 3 192.168.77.1
}

new_sm() {
    x 2 'opensm -B > /dev/null 2>&1' && eventually 60 sm_master "$lid2"
}

state_is() { [ "$(port_field "$1" State)" = "$2" ]; }

cable_out() { "$qhca" link 1 down && eventually 30 state_is 1 Down; }

cable_back() {
    # IPoIB finds its way again once the paths and neighbours it cached are renewed.
    "$qhca" link 1 up && eventually 120 active 1 && eventually 120 x 1 ping -c 1 -W 3 192.168.77.2 ||
        { x 1 'ibstat qhca_0 1; ip neigh; cat /sys/kernel/debug/ipoib/ib0_path'; return 1; }
}

ib_json() { "$qhca" fabric show --json | python3 -c "import json, sys; print(json.dumps(json.load(sys.stdin)['ib']))"; }

switch_counters() {
    ib_json | python3 -c "import json, sys; ib = json.load(sys.stdin); print(ib)
sys.exit(not (ib['smps'] > 0 and ib['dropped_crc'] == 0 and ib['forwarded'] > 0))"
}

# tshark, with its RPC-over-RDMA heuristic off: it claims any RC SEND, and an empty one (as
# perftest's rdma_cm handshake sends) then reads as a malformed RPC-over-RDMA header.
# ts [FILTER ARGS]: the number of frames; fails when tshark does (a count of 0 from a tshark
# that failed would pass "nothing malformed").
ts() {
    local out
    out=$(tshark --disable-heuristic rpcrdma_infiniband -r "$tmp/ib.pcapng" -T fields \
              -e frame.number "$@" 2>&1) || { echo "tshark $*: $out" >&2; return 1; }
    grep -c '^[0-9]' <<<"$out"
    return 0	# grep -c exits 1 on a count of 0
}

tshark_decodes() {
    local n lrh smp sa bad
    n=$(ts) && lrh=$(ts -Y 'infiniband.lrh.dlid') &&
        smp=$(ts -Y 'infiniband.mad.mgmtclass == 0x01 || infiniband.mad.mgmtclass == 0x81') &&
        sa=$(ts -Y 'infiniband.mad.mgmtclass == 0x03') && bad=$(ts -Y '_ws.malformed') || return 1
    echo "frames $n, with an LRH $lrh, SMPs $smp, SA $sa, malformed $bad"
    [ "$n" -gt 100 ] && [ "$lrh" = "$n" ] && [ "$smp" -gt 10 ] && [ "$sa" -gt 0 ] && [ "$bad" = 0 ]
}

all_pairs_ipoib() {
    local i j
    for i in 1 2 3 4; do
        for j in 1 2 3 4; do
            [ "$i" = "$j" ] && continue
            x "$i" ping -c 1 -W 5 "192.168.77.$j" > /dev/null || { echo "$i -> $j"; return 1; }
        done
    done
}

lft_matches() {
    local want have
    want=$(x 1 ibroute "$swlid" | python3 -c "import sys
print(' '.join('%d:%d' % (int(w[0], 16), int(w[1])) for w in (l.split() for l in sys.stdin)
               if w and w[0].startswith('0x')))")
    have=$(ib_json | python3 -c "import json, sys; l = json.load(sys.stdin)['lft']
print(' '.join('%s:%d' % (k, v) for k, v in sorted(l.items(), key=lambda kv: int(kv[0]))))")
    echo "opensm: $want"
    echo "switch: $have"
    [ "$(echo $want)" = "$(echo $have)" ] && [ "$(echo $have | wc -w)" = 5 ]
}

switch_lid() { ib_json | python3 -c "import json, sys; print(json.load(sys.stdin)['lid'])"; }

# ---------------------------------------------------------------- a. two guests
explained_ib() {	# the teaching story on InfiniBand: the same steps, LRH packets
    "$qhca" explain --out "$tmp/explain" -- qhca-lesson write > "$tmp/explain.log" 2>&1 ||
        { tail -n 30 "$tmp/explain.log"; return 1; }
    python3 "$root/tests/vm/explain_check.py" "$tmp/explain" write &&
        grep -q "not shown: --all shows them" "$tmp/explain/story.txt"
}

vm_up 2 --ib --capture "$tmp/ib.pcapng"
check "ports are InfiniBand, INIT, no LID before an SM" before_sm
check "no data before the SM (IPoIB ping fails)" no_data_before_sm
check "opensm in guest 1 brings both ports to ACTIVE with LIDs" sm_up 1 2
lid1=$(lid_of 1) lid2=$(lid_of 2) swlid=$(switch_lid)
echo "# LIDs: guest 1 $lid1, guest 2 $lid2, switch $swlid"
check "sminfo: guest 1's SM is master" sm_master "$lid1"
check "ibnetdiscover: one switch, two CAs, no duplicate" discover
check "smpquery nodeinfo and portinfo of guest 1 from guest 2" smp_queries
check "perfquery reads guest 1's counters" perf_counters
check "saquery: three nodes, a path record from guest 2 to guest 1" sa_queries
check "ibroute: the switch routes both CAs" switch_routes
check "iblinkinfo: both links 4X Active/LinkUp" links_up
# the server runs until its timeout ends it: 124 (coreutils) or 143 (the guest's busybox
# timeout execs the program, which then dies of SIGTERM); any other status is a failure
check "ibping guest 2 from guest 1" \
    pair 2 1 "timeout 12 ibping -S; r=\$?; [ \$r = 124 ] || [ \$r = 143 ]" "ibping -c 5 $lid2"
check "IPoIB: ping both ways" ipoib_both_ways
for t in rc uc ud srq; do
    size=4096; [ $t = ud ] && size=2048
    check "ibv_${t}_pingpong by LID (-c, $size B)" \
        pair 2 1 "ibv_${t}_pingpong -d qhca_0 -s $size -n 200 -c" \
                 "ibv_${t}_pingpong -d qhca_0 -s $size -n 200 -c 192.168.77.2"
done
check "ib_write_bw RC without -x" \
    pair 2 1 "ib_write_bw -d qhca_0 -s 65536 -n 500" "ib_write_bw -d qhca_0 -s 65536 -n 500 192.168.77.2"
check "ib_read_bw RC" pair 2 1 "ib_read_bw -d qhca_0 -n 200" "ib_read_bw -d qhca_0 -n 200 192.168.77.2"
check "ib_send_bw UD" pair 2 1 "ib_send_bw -d qhca_0 -c UD -n 500" "ib_send_bw -d qhca_0 -c UD -n 500 192.168.77.2"
check "ib_send_lat RC" pair 2 1 "ib_send_lat -d qhca_0 -n 500" "ib_send_lat -d qhca_0 -n 500 192.168.77.2"
check "ib_send_lat UD" pair 2 1 "ib_send_lat -d qhca_0 -c UD -n 500" "ib_send_lat -d qhca_0 -c UD -n 500 192.168.77.2"
check "ib_send_bw -R (rdma_cm, path record from the SA)" \
    pair 2 1 "ib_send_bw -d qhca_0 -R -n 200" "ib_send_bw -d qhca_0 -R -n 200 192.168.77.2"
check "rping over IPoIB addresses (rdma_cm)" \
    pair 2 1 "rping -s -a 192.168.77.2 -C 20 -v" "rping -c -a 192.168.77.2 -C 20 -v"
check "ucmatose (rdma_cm connections) over IB" \
    pair 2 1 "ucmatose -C 10" "ucmatose -s 192.168.77.2 -C 10"
check "UD multicast: mckey joins through the SA, sends to the MLID, the switch's MFT delivers" \
    pair 2 1 "timeout 60 mckey -m 239.1.2.3 -b 192.168.77.2 -C 10" \
             "mckey -m 239.1.2.3 -b 192.168.77.1 -s -C 10"
check "the SM killed: the ports stay ACTIVE" sm_killed
check "a new SM in guest 2 takes over" new_sm
check "guest 1's cable pulled: its port goes DOWN" cable_out
check "the cable back: the SM brings the port back to ACTIVE" cable_back
check "RC by LID after the port came back" \
    pair 2 1 "ibv_rc_pingpong -d qhca_0 -s 1024 -n 50 -c" \
             "ibv_rc_pingpong -d qhca_0 -s 1024 -n 50 -c 192.168.77.2"
check "the fabric as a switch: SMPs answered, data forwarded, no VCRC drop" switch_counters
check "capture stopped" "$qhca" fabric capture stop
check "tshark decodes the capture: LRH, SMPs, SA and data, nothing malformed" tshark_decodes
check "explain: one RDMA WRITE by LID, the story checked against the capture" explained_ib
vm_down

# ---------------------------------------------------------------- b. four guests
vm_up 4 --ib
check "opensm in guest 3 brings four ports ACTIVE" sm_up 3 4
swlid=$(switch_lid)
check "every pair reaches every other over IPoIB" all_pairs_ipoib
for p in "1 4" "2 3" "4 1"; do
    set -- $p
    check "RC by LID guest $2 -> guest $1" \
        pair "$1" "$2" "ibv_rc_pingpong -d qhca_0 -s 8192 -n 50 -c" \
                       "ibv_rc_pingpong -d qhca_0 -s 8192 -n 50 -c 192.168.77.$1"
done
check "the switch's forwarding table is the one opensm reports" lft_matches
vm_down
finish
