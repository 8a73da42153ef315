#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# VM test of the Ethernet function and the port: ping and TCP between guests over the qhca
# netdev, RoCE v2 GIDs from the netdev's addresses, port state following the link, and a
# change of the netdev's MAC address that the device follows (SET_MAC) for IP and RoCE.
set -uo pipefail
. "$(dirname "$0")/lib.sh"

gids_ok() {	# guest I has the IPv4-mapped RoCE v2 GID of its fabric address
    local out
    out=$("$qhca" exec "$1" -- ibv_devinfo -v -d qhca_0) || return 1
    grep -q "::ffff:192.168.77.$1, RoCE v2" <<<"$out" &&
        grep -q "fe80::5054:ff:fe51:48" <<<"$out" || { echo "$out" | grep -i gid; return 1; }
}

port_state_is() {	# port_state_is I ACTIVE|DOWN CARRIER
    "$qhca" exec "$1" -- "rdma link show qhca_0/1 | grep -q 'state $2' && \
        [ \"\$(cat /sys/class/infiniband/qhca_0/ports/1/gid_attrs/ndevs/0 2>/dev/null || echo x)\" != '' ] && \
        [ \"\$(cat /sys/class/net/\$(rdma link show qhca_0/1 | sed -n 's/.*netdev \([^ ]*\).*/\1/p')/carrier)\" = $3 ]"
}

tcp_transfer() {	# 1 MiB from guest 1 to guest 2 over TCP, checked by MD5
    "$qhca" exec 2 -- 'rm -f /tmp/rx.sum; setsid qhca-tcp serve 5000 /tmp/rx.sum < /dev/null > /dev/null 2>&1 &' || return 1
    sleep 1
    local sent got
    sent=$("$qhca" exec 1 -- qhca-tcp send 192.168.77.2 5000 1048576) || return 1
    got=$(eventually 20 "$qhca" exec 2 -- cat /tmp/rx.sum 2>/dev/null) || return 1
    echo "sent $sent received $got"
    [ "$sent" = "$got" ] && [ "${sent%% *}" = 1048576 ]
}

netdev_of() {	# the qhca netdev of guest I
    "$qhca" exec "$1" -- "rdma link show qhca_0/1 | sed -n 's/.*netdev \([^ ]*\).*/\1/p'"
}

rc_pingpong() {	# ibv_rc_pingpong over RoCE v2 (GID 1): server in guest 2, client in guest 1
    "$qhca" exec 2 -- "pkill -f '^ibv_rc_pingpong'; rm -f /tmp/pp.log /tmp/pp.rc; setsid sh -c 'ibv_rc_pingpong -d qhca_0 -g 1 -n 50 -s 4096 -c > /tmp/pp.log 2>&1; echo \$? > /tmp/pp.rc' < /dev/null > /dev/null 2>&1 &" || return 1
    sleep 1.5
    timeout 120 "$qhca" exec 1 -- ibv_rc_pingpong -d qhca_0 -g 1 -n 50 -s 4096 -c 192.168.77.2 ||
        { "$qhca" exec 2 -- cat /tmp/pp.log; return 1; }
    eventually 20 "$qhca" exec 2 -- 'test -s /tmp/pp.rc' &&
        [ "$("$qhca" exec 2 -- cat /tmp/pp.rc)" = 0 ] || { "$qhca" exec 2 -- cat /tmp/pp.log; return 1; }
}

set_mac() {	# set_mac MAC: guest 2's qhca netdev takes MAC, and ip link shows it
    local n out
    n=$(netdev_of 2) && [ -n "$n" ] || return 1
    "$qhca" exec 2 -- ip link set dev "$n" address "$1" || return 1
    out=$("$qhca" exec 2 -- ip link show dev "$n") || return 1
    echo "$out"
    grep -q "link/ether $1 " <<<"$out"
}

reach_mac() {	# reach_mac MAC: guest 1 (its neighbour entry forgotten) pings guest 2 at MAC
    local out
    "$qhca" exec 1 -- "ip neigh flush to 192.168.77.2" || return 1
    "$qhca" exec 1 -- ping -c 3 -W 5 192.168.77.2 || return 1
    out=$("$qhca" exec 1 -- ip neigh show 192.168.77.2) || return 1
    echo "$out"
    grep -q "lladdr $1 " <<<"$out"
}

mac_refused() {	# a multicast address is refused and the netdev keeps MAC
    local n out
    n=$(netdev_of 2) || return 1
    ! "$qhca" exec 2 -- ip link set dev "$n" address 03:00:00:00:00:01 || return 1
    out=$("$qhca" exec 2 -- ip link show dev "$n") || return 1
    grep -q "link/ether $1 " <<<"$out"
}

vm_up 2
check "ping guest 2 from guest 1 over qhca" "$qhca" exec 1 -- ping -c 3 -W 5 192.168.77.2
check "ping guest 1 from guest 2 over qhca" "$qhca" exec 2 -- ping -c 3 -W 5 192.168.77.1
check "TCP: 1 MiB from guest 1 to guest 2 intact" tcp_transfer
check "vm1: RoCE v2 GIDs from the netdev's addresses" gids_ok 1
check "vm2: RoCE v2 GIDs from the netdev's addresses" gids_ok 2
check "link down: port DOWN and carrier off" bash -c "'$qhca' link 2 down && $(declare -f eventually port_state_is); qhca='$qhca' eventually 10 port_state_is 2 DOWN 0"
check "link down: guest 1 cannot reach guest 2" bash -c "! '$qhca' exec 1 -- ping -c 2 -W 1 192.168.77.2"
check "link up: port ACTIVE and carrier on" bash -c "'$qhca' link 2 up && $(declare -f eventually port_state_is); qhca='$qhca' eventually 10 port_state_is 2 ACTIVE 1"
check "link up: ping works again" "$qhca" exec 1 -- ping -c 2 -W 5 192.168.77.2
check "device counters: frames sent and received" "$qhca" exec 1 -- \
    'n=$(rdma link show qhca_0/1 | sed -n "s/.*netdev \([^ ]*\).*/\1/p"); [ "$(cat /sys/class/net/$n/statistics/rx_packets)" -gt 0 ] && [ "$(cat /sys/class/net/$n/statistics/tx_packets)" -gt 0 ]'
old_mac=$("$qhca" exec 2 -- "cat /sys/class/net/\$(rdma link show qhca_0/1 | sed -n 's/.*netdev \([^ ]*\).*/\1/p')/address")
new_mac=52:54:00:51:4d:02
echo "# guest 2's qhca MAC: $old_mac"
check "MAC: a multicast address is refused" mac_refused "$old_mac"
check "MAC: guest 2 takes $new_mac (ip link shows it)" set_mac "$new_mac"
check "MAC: ping guest 2 at $new_mac" reach_mac "$new_mac"
check "MAC: ibv_rc_pingpong -g 1 with $new_mac" rc_pingpong
check "MAC: back to $old_mac (ip link shows it)" set_mac "$old_mac"
check "MAC: ping guest 2 at $old_mac" reach_mac "$old_mac"
check "MAC: ibv_rc_pingpong -g 1 with $old_mac" rc_pingpong
vm_down
finish
