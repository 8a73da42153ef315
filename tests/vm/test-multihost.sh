#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# VM test of more than one host, on this one machine (docs/fabric.md, "More than one host"):
#  a. two "hosts": two launcher runs, each with its own fabric switch in a network namespace
#     of its own, the namespaces joined by a veth pair. Host A's fabric has guest 1 and a
#     spare port listening on TCP in its namespace; host B's (guest 2, up --first 2) has a
#     trunk port that connects to it across the veth. ping, ibv_rc_pingpong -c and
#     qhca-rcstress (RC, every byte checked) between guest 1 and guest 2 through both
#     switches; both fabrics show the trunk connected; nothing listens outside the
#     namespaces. (Without root, or with QHCA_MULTIHOST_LOOPBACK=1: the two fabrics on
#     loopback TCP instead.)
#  b. up --netdev dgram: the two guests' qhca devices point to point over UDP on 127.0.0.1,
#     no fabric: ibv_rc_pingpong -c, ib_write_bw, rping.
#  c. up --netdev tap (root): each guest on a tap of a Linux bridge in a namespace the
#     launcher makes: the same checks, the bridge's ports counted the frames and learned both
#     guests' MACs, and down removes the namespace.
#  d. two hosts joined by VXLAN (root): in each namespace of part a a bridge with a VXLAN port
#     to the other over the veth (1500-byte underlay: bridge MTU 1450, device mtu=1024, guest
#     IP MTU 1450); up --bridge br0 --netns on each; ping at 1450 unfragmented, pingpong,
#     ib_write_bw, rcstress, rping; both bridges learned the remote MAC on the VXLAN port and
#     the VXLAN's UDP crossed the veth; down removes only the taps.
# Guest traffic never leaves this machine: the trunk's TCP stays inside the two namespaces
# (or on loopback), the dgram sockets are bound to 127.0.0.1, the bridge lives in a namespace.
set -uo pipefail
. "$(dirname "$0")/lib.sh"

run_a=$QHCA_RUN-a run_b=$QHCA_RUN-b
qa() { QHCA_RUN=$run_a "$qhca" "$@"; }
qb() { QHCA_RUN=$run_b "$qhca" "$@"; }
# xa I CMD: CMD in guest I of host A (at most 300 s); xb on host B; x in parts b and c.
xa() { QHCA_RUN=$run_a timeout 300 "$qhca" exec "$1" -- "${@:2}"; }
xb() { QHCA_RUN=$run_b timeout 300 "$qhca" exec "$1" -- "${@:2}"; }
x() { timeout 300 "$qhca" exec "$1" -- "${@:2}"; }
root=0; [ "$(id -u)" = 0 ] && root=1
ns_a=qhca-mh$$-a ns_b=qhca-mh$$-b	# the two "hosts" of part a (only with root)
tmp=$(mktemp -d)

cleanup() {
    qa down > /dev/null 2>&1; qb down > /dev/null 2>&1; "$qhca" down > /dev/null 2>&1
    for ns in "$ns_a" "$ns_b"; do
        [ -e "/run/netns/$ns" ] && ip netns del "$ns"
    done
    rm -rf "$tmp"
}
trap cleanup EXIT

# pair SERVER_EXEC CLIENT_EXEC SERVER_CMD CLIENT_CMD: SERVER_CMD in the background of one
# guest, then CLIENT_CMD in another; both must exit 0. *_EXEC: "xa 1", "xb 2", "x 2"...
pair() {
    local sx=$1 cx=$2 srv=$3 cli=$4 out rc
    $sx "pkill -f '^${srv%% *}'; rm -f /tmp/srv.log /tmp/srv.rc; setsid sh -c '$srv > /tmp/srv.log 2>&1; echo \$? > /tmp/srv.rc' < /dev/null > /dev/null 2>&1 &" || return 1
    sleep 1.5
    out=$($cx "$cli" 2>&1)
    rc=$?
    echo "$out" | tail -n 4
    eventually 30 $sx 'test -s /tmp/srv.rc' || { echo "server did not finish"; return 1; }
    [ "$rc" = 0 ] && [ "$($sx cat /tmp/srv.rc)" = 0 ] ||
        { echo "client rc $rc; server:"; $sx tail -n 20 /tmp/srv.log; return 1; }
}

# verbs SERVER_EXEC CLIENT_EXEC: the checks every part runs between guest 2 (server) and 1.
rc_pingpong() {
    pair "$1" "$2" "ibv_rc_pingpong -d qhca_0 -g 3 -s 65536 -n 100 -c" \
                   "ibv_rc_pingpong -d qhca_0 -g 3 -s 65536 -n 100 -c 192.168.77.2"
}
write_bw() {
    pair "$1" "$2" "ib_write_bw -d qhca_0 -x 3 -s 65536 -n 100" \
                   "ib_write_bw -d qhca_0 -x 3 -s 65536 -n 100 192.168.77.2"
}
rping_pair() {
    pair "$1" "$2" "modprobe rdma_ucm; rping -s -a 192.168.77.2 -C 20 -V" \
                   "modprobe rdma_ucm; rping -c -a 192.168.77.2 -C 20 -V"
}
rcstress() {
    pair "$1" "$2" "qhca-rcstress -s -p 18841" "qhca-rcstress -p 18841 -b 16M 192.168.77.2"
}

netns_gone() {	# netns_gone NS: no namespace NS (ip netns list, /run/netns)
    local list
    list=$(ip netns list) || return 1
    ! grep -qw "^$1" <<< "$list" && ! test -e "/run/netns/$1"
}

elapsed() { echo "$(date +%s.%N) - $1" | bc; }
t_all=$(date +%s.%N)

# ---- a. two hosts, two switches, one trunk ----

# The "network" between the hosts: two namespaces and a veth pair made inside them (the veth
# never exists in this namespace). Host A is 10.77.0.1, host B 10.77.0.2.
make_hosts() {
    ip netns add "$ns_a" && ip netns add "$ns_b" &&
    ip -n "$ns_a" link add veth-a type veth peer name veth-b netns "$ns_b" &&
    ip -n "$ns_a" addr add 10.77.0.1/24 dev veth-a && ip -n "$ns_b" addr add 10.77.0.2/24 dev veth-b &&
    ip -n "$ns_a" link set veth-a up && ip -n "$ns_b" link set veth-b up &&
    ip -n "$ns_a" link set lo up && ip -n "$ns_b" link set lo up
}

# Two free TCP ports P, P+1 on 127.0.0.1 (the loopback variant, without root).
free_pair() {
    python3 -c '
import socket
for p in range(17000, 18000, 2):
    try:
        ss = [socket.socket() for _ in range(2)]
        for s, q in zip(ss, (p, p + 1)):
            s.bind(("127.0.0.1", q))
        print(p)
        break
    except OSError:
        pass
    finally:
        for s in ss:
            s.close()'
}

# Both hosts up at once (each waits for its own guest; B's trunk retries every second until
# A's fabric listens).
two_hosts_up() {
    qa up -n 1 --spare-ports 1 "${a_args[@]}" > "$tmp/a.log" 2>&1 &
    local pa=$!
    qb up -n 1 --first 2 "${b_args[@]}" > "$tmp/b.log" 2>&1 &
    local pb=$! ra rb
    wait $pa; ra=$?
    wait $pb; rb=$?
    sed 's/^/A: /' "$tmp/a.log"; sed 's/^/B: /' "$tmp/b.log"
    [ "$ra" = 0 ] && [ "$rb" = 0 ]
}

# Port 2 of B's fabric is a trunk and connected, port 2 of A's fabric (spare) is connected.
trunk_connected() {
    local ja jb
    ja=$(qa fabric show --json) && jb=$(qb fabric show --json) || return 1
    python3 - "$ja" "$jb" "$trunk" << 'EOF'
import json, sys
a, b, trunk = json.loads(sys.argv[1]), json.loads(sys.argv[2]), sys.argv[3]
pa = {p["port"]: p for p in a["ports"]}
pb = {p["port"]: p for p in b["ports"]}
assert pb[2].get("trunk") == trunk, ("B's port 2", pb[2].get("trunk"), trunk)
assert pb[2]["connected"] and pa[2]["connected"], ("trunk not connected", pa[2], pb[2])
assert pa[1]["connected"] and pb[1]["connected"], "a guest is not connected"
assert pa[2]["counters"]["rx_frames"] > 0 and pb[2]["counters"]["tx_frames"] > 0
print("A port 2 (spare): connected, rx %d tx %d frames; B port 2: trunk %s, connected, "
      "rx %d tx %d frames" % (pa[2]["counters"]["rx_frames"], pa[2]["counters"]["tx_frames"],
                              trunk, pb[2]["counters"]["rx_frames"],
                              pb[2]["counters"]["tx_frames"]))
EOF
}

# The trunk's TCP connection is in A's namespace, from B's address, over the veth; nothing
# of it listens in this (the host's) namespace.
trunk_over_veth() {
    local conn
    conn=$(ip netns exec "$ns_a" ss -tn state established "( sport = :7001 )") || return 1
    echo "$conn"
    grep -q "10.77.0.2:" <<< "$conn" || return 1
    local listen
    listen=$(ss -tln) && grep -q '^LISTEN' <<< "$listen" || { echo "ss -tln failed or listed nothing"; return 1; }
    ! grep -E "[:.]700[01] " <<< "$listen" || { echo "listening in the host's namespace"; return 1; }
    local rx
    rx=$(ip -n "$ns_b" -s -j link show veth-b |
         python3 -c 'import json, sys; print(json.load(sys.stdin)[0]["stats64"]["rx"]["bytes"])')
    echo "veth-b received $rx bytes"
    [ "$rx" -gt 16000000 ]
}

# only_loopback: the local addresses (4th column of ss) of the socket lines on stdin: at least
# one, every one on 127.0.0.1.
only_loopback() {
    awk '{ n++; print "  " $4; if ($4 !~ /^127\.0\.0\.1:[0-9]+$/) bad++ }
         END { if (!n) print "no socket"; else if (bad) print bad " not on 127.0.0.1"; exit !(n && !bad) }'
}

fabric_listens_only() {	# the fabrics' TCP sockets are on 127.0.0.1 only: ss ran, listed
    # host A's listener for B's trunk, and no fabric socket elsewhere
    local out mine
    out=$(ss -tlnp) || { echo "ss -tlnp failed"; return 1; }
    mine=$(grep 'qhca-fabric' <<< "$out") || { echo "no TCP listener of qhca-fabric: $out"; return 1; }
    echo "$mine"
    grep -qF "${trunk#tcp:} " <<< "$mine" || { echo "host A's fabric does not listen on ${trunk#tcp:}"; return 1; }
    only_loopback <<< "$mine"
}

echo "# a. two hosts: two fabrics joined by a trunk"
t=$(date +%s.%N)
qa down > /dev/null 2>&1; qb down > /dev/null 2>&1; "$qhca" down > /dev/null 2>&1
netns_hosts=$root; [ "${QHCA_MULTIHOST_LOOPBACK:-0}" = 1 ] && netns_hosts=0
if [ "$netns_hosts" = 1 ]; then
    check "two namespaces joined by a veth pair (the hosts' network)" make_hosts
    a_args=(--fabric-netns "$ns_a" --fabric-tcp 10.77.0.1:7000)
    trunk=tcp:10.77.0.1:7001
    b_args=(--fabric-netns "$ns_b" --trunk "$trunk")
else
    skip "two namespaces joined by a veth pair" "the fabrics use loopback TCP instead"
    p=$(free_pair)
    a_args=(--fabric-tcp "127.0.0.1:$p")
    trunk=tcp:127.0.0.1:$((p + 1))
    b_args=(--trunk "$trunk")
fi
check "host A: up -n 1 --spare-ports 1 ${a_args[*]}; host B: up -n 1 --first 2 ${b_args[*]}" \
    two_hosts_up
echo "# both up after $(elapsed "$t") s"
check "guest 2 is vm2 with 192.168.77.2 on host B" xb 2 'hostname | grep -qx vm2 && ip -4 addr | grep -q "192.168.77.2/24"'
check "ping guest 1 (A) -> guest 2 (B) over the qhca netdev, through the trunk" \
    eventually 20 xa 1 ping -c 2 -W 5 192.168.77.2
check "ibv_rc_pingpong -c across the trunk" rc_pingpong "xb 2" "xa 1"
check "qhca-rcstress -b 16M across the trunk (RC, every byte checked)" rcstress "xb 2" "xa 1"
check "fabric show --json: B's trunk port and A's spare port connected, frames through" \
    trunk_connected
if [ "$netns_hosts" = 1 ]; then
    check "the trunk's TCP crosses the veth inside the namespaces, nothing listens outside" \
        trunk_over_veth
else
    check "the fabrics listen on loopback only" fabric_listens_only
fi
check "host A down" qa down
check "host B down" qb down
check "down leaves nothing running" nothing_running
if [ "$netns_hosts" = 1 ]; then
    check "the two namespaces removed" \
        eval "ip netns del $ns_a && ip netns del $ns_b && netns_gone $ns_a && netns_gone $ns_b"
fi
echo "# part a took $(elapsed "$t") s"

# ---- b. --netdev dgram ----

udp_loopback_only() {	# the QEMUs' UDP sockets are bound to 127.0.0.1
    local pids out
    pids=$(python3 -c "import json; print('|'.join(str(v['pid']) for v in json.load(open('$QHCA_RUN/state.json'))['vms']))")
    [ -n "$pids" ] || { echo "no pids in state.json"; return 1; }
    out=$(ss -ulpn) || { echo "ss -ulpn failed"; return 1; }
    out=$(grep -E "pid=($pids)," <<< "$out") || { echo "no UDP socket of the guests' QEMU"; return 1; }
    echo "$out"
    only_loopback <<< "$out"
}

echo "# b. up --netdev dgram"
t=$(date +%s.%N)
vm_up 2 --netdev dgram
check "the qhca devices' UDP sockets are on 127.0.0.1 only" udp_loopback_only
check "ping over dgram" eventually 20 x 1 ping -c 2 -W 5 192.168.77.2
check "ibv_rc_pingpong -c over dgram" rc_pingpong "x 2" "x 1"
check "ib_write_bw over dgram" write_bw "x 2" "x 1"
check "rping over dgram" rping_pair "x 2" "x 1"
no_fabric_refused() {	# qhca fabric show says there is no fabric (not: any other failure)
    local out rc
    out=$("$qhca" fabric show 2>&1)
    rc=$?
    echo "$out"
    [ "$rc" = 1 ] && grep -q "this run has no fabric: its guests are on --netdev dgram" <<< "$out"
}
check "fabric commands refused (no fabric)" no_fabric_refused
vm_down
echo "# part b took $(elapsed "$t") s"

# ---- c. --netdev tap ----

netns_of_run() {
    python3 -c "import json; print(json.load(open('$QHCA_RUN/state.json'))['netns'])"
}

# The bridge forwarded the guests' frames: each tap's counters (rx: sent by its guest, tx:
# the bridge's to the guest), and both guests' MACs learned on their taps.
bridge_saw_frames() {
    local fdb
    ip -n "$ns" -s link show || return 1
    fdb=$(bridge -n "$ns" fdb show br br0) || return 1
    echo "$fdb" | grep "52:54:00:51:48:"
    ip -n "$ns" -s -j link show | python3 -c '
import json, sys
d = {l["ifname"]: l["stats64"] for l in json.load(sys.stdin)}
for t in ("qhcatap1", "qhcatap2"):
    assert d[t]["rx"]["packets"] > 500 and d[t]["tx"]["packets"] > 500, (t, d[t])
    assert d[t]["rx"]["bytes"] > 1000000 or d[t]["tx"]["bytes"] > 1000000, (t, d[t])' &&
    grep -q "52:54:00:51:48:01 dev qhcatap1 " <<< "$fdb" &&
    grep -q "52:54:00:51:48:02 dev qhcatap2 " <<< "$fdb"
}

not_in_host_ns() {	# the taps exist in the namespace, and not in this one ("does not
    # exist", not any failure of ip)
    local t out
    for t in qhcatap1 qhcatap2; do
        ip -n "$ns" link show "$t" > /dev/null || { echo "no $t in $ns"; return 1; }
        out=$(ip link show "$t" 2>&1) && { echo "$t is in the host's namespace"; return 1; }
        grep -q "Device \"$t\" does not exist" <<< "$out" || { echo "ip link show $t: $out"; return 1; }
    done
}

echo "# c. up --netdev tap"
t=$(date +%s.%N)
if [ "$root" = 1 ]; then
    vm_up 2 --netdev tap
    ns=$(netns_of_run)
    echo "# namespace $ns"
    check "the taps are only in the namespace $ns" not_in_host_ns
    check "ping over the bridge" eventually 20 x 1 ping -c 2 -W 5 192.168.77.2
    check "ibv_rc_pingpong -c over the bridge" rc_pingpong "x 2" "x 1"
    check "ib_write_bw over the bridge" write_bw "x 2" "x 1"
    check "rping over the bridge" rping_pair "x 2" "x 1"
    check "the bridge in $ns forwarded the frames and learned both MACs" bridge_saw_frames
    vm_down
    check "down removed the namespace $ns" netns_gone "$ns"
else
    skip "up --netdev tap" "not root (a namespace, a bridge and taps need root)"
fi
echo "# part c took $(elapsed "$t") s"

# ---- d. two hosts, a bridge each, joined by VXLAN ----

# Each "host" (namespace) gets what a site's host has: a bridge br0 with a VXLAN port (VNI 77,
# UDP 4789) to the other host over the veth, which keeps its 1500-byte MTU; so the bridge
# carries 1450-byte frames, and the guests take RoCE MTU 1024 and IP MTU 1450.
make_vxlan() {	# make_vxlan NS LOCAL REMOTE DEV
    ip -n "$1" link add br0 type bridge &&
    ip -n "$1" link add vxlan77 type vxlan id 77 local "$2" remote "$3" dstport 4789 dev "$4" &&
    ip -n "$1" link set vxlan77 master br0 up && ip -n "$1" link set br0 up
}

vxlan_hosts_up() {
    QHCA_DEVICE_PROPS=mtu=1024 qa up -n 1 --bridge br0 --netns "$ns_a" > "$tmp/a.log" 2>&1 &
    local pa=$!
    QHCA_DEVICE_PROPS=mtu=1024 qb up -n 1 --first 2 --bridge br0 --netns "$ns_b" > "$tmp/b.log" 2>&1 &
    local pb=$! ra rb
    wait $pa; ra=$?
    wait $pb; rb=$?
    sed 's/^/A: /' "$tmp/a.log"; sed 's/^/B: /' "$tmp/b.log"
    [ "$ra" = 0 ] && [ "$rb" = 0 ] && grep -q "bridge br0 in namespace $ns_a (MTU 1450)" "$tmp/a.log" &&
        grep -q "bridge br0 in namespace $ns_b (MTU 1450)" "$tmp/b.log"
}

# The qhca netdev of the guest (the one with 192.168.77.I) at MTU 1450, as on such a site.
GUEST_MTU='dev=$(ip -o -4 addr show to 192.168.77.0/24 | cut -d" " -f2) && ip link set dev $dev mtu 1450 && ip link show dev $dev | grep -q "mtu 1450"'
active_mtu_1024() {	# the port's active MTU is the device's mtu=1024
    local out
    out=$(xa 1 ibv_devinfo -d qhca_0) || return 1
    grep -E "active_mtu|max_mtu" <<< "$out"
    grep -q "active_mtu:.*1024" <<< "$out"
}

# Both bridges learned the other host's guest behind their VXLAN port, and the VXLAN's UDP
# crossed the veth: B's veth received more than 16 MB (the rcstress) in UDP to port 4789.
vxlan_carried() {
    local fa fb
    fa=$(bridge -n "$ns_a" fdb show br br0) && fb=$(bridge -n "$ns_b" fdb show br br0) || return 1
    grep -q "52:54:00:51:48:02 dev vxlan77 " <<< "$fa" || { echo "A: $fa"; return 1; }
    grep -q "52:54:00:51:48:01 dev vxlan77 " <<< "$fb" || { echo "B: $fb"; return 1; }
    grep -q "52:54:00:51:48:01 dev qhcatap1 " <<< "$fa" || { echo "A: $fa"; return 1; }
    grep -q "52:54:00:51:48:02 dev qhcatap2 " <<< "$fb" || { echo "B: $fb"; return 1; }
    ip -n "$ns_b" -s -j link show | python3 -c '
import json, sys
d = {l["ifname"]: l["stats64"] for l in json.load(sys.stdin)}
print("B: vxlan77 rx %d bytes, veth-b rx %d bytes" % (d["vxlan77"]["rx"]["bytes"], d["veth-b"]["rx"]["bytes"]))
assert d["vxlan77"]["rx"]["bytes"] > 16000000, d["vxlan77"]
assert d["veth-b"]["rx"]["bytes"] > d["vxlan77"]["rx"]["bytes"], "the VXLAN did not cross the veth"'
}

# down removed the taps and left the bridges (they are the site's, not qhca's).
taps_gone_bridges_kept() {
    local n
    for n in "$ns_a" "$ns_b"; do
        ip -n "$n" link show br0 > /dev/null && ip -n "$n" link show vxlan77 > /dev/null || return 1
    done
    ! ip -n "$ns_a" link show qhcatap1 > /dev/null 2>&1 && ! ip -n "$ns_b" link show qhcatap2 > /dev/null 2>&1
}

echo "# d. two hosts, a bridge each, joined by VXLAN"
t=$(date +%s.%N)
if [ "$root" = 1 ]; then
    check "two namespaces joined by a veth pair, a bridge with a VXLAN port in each" \
        eval 'make_hosts && make_vxlan "$ns_a" 10.77.0.1 10.77.0.2 veth-a && make_vxlan "$ns_b" 10.77.0.2 10.77.0.1 veth-b'
    # A tap of that name that is not this run's (another run's guest 2): refused, left alone.
    check "a tap name that exists is refused, and the tap left alone" eval '
        ip -n "$ns_b" tuntap add dev qhcatap2 mode tap &&
        out=$(qb up -n 1 --first 2 --bridge br0 --netns "$ns_b" 2>&1); rc=$?; echo "$out" | tail -n 1
        ip -n "$ns_b" link show qhcatap2 > /dev/null && ip -n "$ns_b" link del qhcatap2 &&
        [ $rc != 0 ] && grep -q "qhcatap2 exists already in namespace $ns_b" <<< "$out"'
    check "host A: up -n 1 --bridge br0 --netns A; host B: up -n 1 --first 2 --bridge br0 --netns B (mtu=1024)" \
        vxlan_hosts_up
    check "the guests' qhca netdevs at MTU 1450" eval 'xa 1 "$GUEST_MTU" && xb 2 "$GUEST_MTU"'
    check "the port's active MTU is 1024" active_mtu_1024
    check "ping with 1450-byte packets, not fragmented, across the VXLAN" \
        eventually 20 xa 1 ping -c 2 -W 5 -M do -s 1422 192.168.77.2
    check "ibv_rc_pingpong -c across the VXLAN" rc_pingpong "xb 2" "xa 1"
    check "ib_write_bw across the VXLAN" write_bw "xb 2" "xa 1"
    check "qhca-rcstress -m 1024 -b 16M across the VXLAN (RC, every byte checked)" \
        pair "xb 2" "xa 1" "qhca-rcstress -s -m 1024 -p 18841" "qhca-rcstress -m 1024 -p 18841 -b 16M 192.168.77.2"
    check "rping across the VXLAN" rping_pair "xb 2" "xa 1"
    check "both bridges learned the remote guest on vxlan77; the VXLAN's UDP crossed the veth" \
        vxlan_carried
    check "host A down" qa down
    check "host B down" qb down
    check "down removed the taps and kept the bridges" taps_gone_bridges_kept
    check "the two namespaces removed" \
        eval "ip netns del $ns_a && ip netns del $ns_b && netns_gone $ns_a && netns_gone $ns_b"
else
    skip "two hosts joined by VXLAN" "not root (namespaces, bridges, VXLAN and taps need root)"
fi
echo "# part d took $(elapsed "$t") s"
echo "# total $(elapsed "$t_all") s"
finish
