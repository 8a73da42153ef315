#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# VM test of the Ethernet function and the port: ping and TCP between guests over the qhca
# netdev, RoCE v2 GIDs from the netdev's addresses, and port state following the link.
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
vm_down
finish
