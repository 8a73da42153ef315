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

port_state_is() {	# port_state_is I ACTIVE|DOWN CARRIER: the port's state, GID 0 still on the
    # port's netdev, and the netdev's carrier
    local link n ndev carrier
    link=$("$qhca" exec "$1" -- rdma link show qhca_0/1) || return 1
    n=$(sed -n 's/.*netdev \([^ ]*\).*/\1/p' <<<"$link")
    [ -n "$n" ] || { echo "no netdev: $link"; return 1; }
    ndev=$("$qhca" exec "$1" -- cat /sys/class/infiniband/qhca_0/ports/1/gid_attrs/ndevs/0) || return 1
    carrier=$("$qhca" exec "$1" -- cat "/sys/class/net/$n/carrier") || return 1
    echo "$link; GID 0 on $ndev; carrier $carrier"
    grep -q "state $2 " <<<"$link" && [ "$ndev" = "$n" ] && [ "$carrier" = "$3" ]
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

rc_pingpong() {	# ibv_rc_pingpong over RoCE v2 (GID 3, of the IPv4 address): server in guest 2, client in guest 1
    "$qhca" exec 2 -- "pkill -f '^ibv_rc_pingpong'; rm -f /tmp/pp.log /tmp/pp.rc; setsid sh -c 'ibv_rc_pingpong -d qhca_0 -g 3 -n 50 -s 4096 -c > /tmp/pp.log 2>&1; echo \$? > /tmp/pp.rc' < /dev/null > /dev/null 2>&1 &" || return 1
    sleep 1.5
    timeout 120 "$qhca" exec 1 -- ibv_rc_pingpong -d qhca_0 -g 3 -n 50 -s 4096 -c 192.168.77.2 ||
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

mac_refused() {	# a multicast address is refused (EADDRNOTAVAIL from the driver) and the
    # netdev keeps MAC
    local n out rc
    n=$(netdev_of 2) && [ -n "$n" ] || return 1
    out=$("$qhca" exec 2 -- ip link set dev "$n" address 03:00:00:00:00:01 2>&1)
    rc=$?
    echo "$out"
    [ "$rc" = 2 ] && grep -q 'Cannot assign requested address' <<<"$out" ||
        { echo "ip exited $rc: not the refusal wanted"; return 1; }
    out=$("$qhca" exec 2 -- ip link show dev "$n") || return 1
    grep -q "link/ether $1 " <<<"$out"
}

vm_up 2
check "ping guest 2 from guest 1 over qhca" "$qhca" exec 1 -- ping -c 3 -W 5 192.168.77.2
check "ping guest 1 from guest 2 over qhca" "$qhca" exec 2 -- ping -c 3 -W 5 192.168.77.1
check "TCP: 1 MiB from guest 1 to guest 2 intact" tcp_transfer
check "vm1: RoCE v2 GIDs from the netdev's addresses" gids_ok 1
check "vm2: RoCE v2 GIDs from the netdev's addresses" gids_ok 2
link_then() {	# link_then I up|down STATE CARRIER: the link of guest I, then its port follows
    "$qhca" link "$1" "$2" && eventually 10 port_state_is "$1" "$3" "$4"
}

check "link down: port DOWN and carrier off" link_then 2 down DOWN 0
check "link down: guest 1 cannot reach guest 2 (ping runs, 100% loss)" ping_lost 1 192.168.77.2
check "link up: port ACTIVE and carrier on" link_then 2 up ACTIVE 1
check "link up: ping works again" "$qhca" exec 1 -- ping -c 2 -W 5 192.168.77.2
check "device counters: frames sent and received" "$qhca" exec 1 -- \
    'n=$(rdma link show qhca_0/1 | sed -n "s/.*netdev \([^ ]*\).*/\1/p"); [ "$(cat /sys/class/net/$n/statistics/rx_packets)" -gt 0 ] && [ "$(cat /sys/class/net/$n/statistics/tx_packets)" -gt 0 ]'
old_mac=$("$qhca" exec 2 -- "cat /sys/class/net/\$(rdma link show qhca_0/1 | sed -n 's/.*netdev \([^ ]*\).*/\1/p')/address")
new_mac=52:54:00:51:4d:02
echo "# guest 2's qhca MAC: $old_mac"
is_mac() { [[ $1 =~ ^([0-9a-f]{2}:){5}[0-9a-f]{2}$ ]] || { echo "not a MAC address: '$1'"; return 1; }; }
check "guest 2's MAC read (the MAC checks below compare with it)" is_mac "$old_mac"
check "MAC: a multicast address is refused" mac_refused "$old_mac"
check "MAC: guest 2 takes $new_mac (ip link shows it)" set_mac "$new_mac"
check "MAC: ping guest 2 at $new_mac" reach_mac "$new_mac"
check "MAC: ibv_rc_pingpong -g 3 with $new_mac" rc_pingpong
check "MAC: back to $old_mac (ip link shows it)" set_mac "$old_mac"
check "MAC: ping guest 2 at $old_mac" reach_mac "$old_mac"
check "MAC: ibv_rc_pingpong -g 3 with $old_mac" rc_pingpong
vm_down
finish
