#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# VM test of the guest driver against hostile input and a hung device (issue 8):
#  - driver udata from user space with shift-sized ring geometry, reserved bits and short
#    buffers is refused with EINVAL, unknown comp_mask bits and nonzero bytes past the
#    known structure with EOPNOTSUPP (qhca-udata), and the kernel log stays clean;
#  - an admin command that times out (injected through debugfs: its doorbell is withheld)
#    kills the admin queue: one diagnostic, every later command refused at once, verbs
#    objects and the netdev torn down without warnings; unloading the driver resets the
#    device, and after loading it again the port works (ping to the other guest).
set -uo pipefail
. "$(dirname "$0")/lib.sh"

bad='UBSAN|shift-out-of-bounds|WARNING:|BUG:|Oops|general protection|Call Trace|corruption'

mark() {	# mark I NAME: a line in guest I's kernel log that later checks start from
    "$qhca" exec "$1" -- "echo qhca-test-mark-$2 > /dev/kmsg"
}

log_since() {	# log_since I NAME: guest I's kernel log since the mark NAME
    "$qhca" exec "$1" -- "dmesg | sed -n '/qhca-test-mark-$2/,\$p'"
}

log_clean() {	# log_clean I NAME: no warning, oops or UBSAN report since the mark
    local out
    out=$(log_since "$1" "$2") || return 1
    ! grep -E "$bad" <<<"$out" || return 1
}

dbg=/sys/kernel/debug/qhca
netdev='$(ls /sys/class/infiniband/qhca_0/device/net)'

admin_state_is() {	# admin_state_is I N: 0 live, 1 dead, 2 reset
    [ "$("$qhca" exec "$1" -- "cat $dbg/*/admin_state")" = "$2" ]
}

# A command after the injection: QUERY_PORT (through the port's sysfs state) times out.
time_out() {
    "$qhca" exec 1 -- "for f in $dbg/*/admin_timeout_inject; do echo 1 > \$f; done" || return 1
    ! "$qhca" exec 1 -- "timeout 30 cat /sys/class/infiniband/qhca_0/ports/1/state" &&
        admin_state_is 1 1
}

one_diagnostic() {	# exactly one line, naming opcode, command id, head and tail
    local out
    out=$(log_since 1 timeout | grep 'admin queue dead') || return 1
    echo "$out"
    [ "$(wc -l <<<"$out")" = 1 ] && grep -q 'opcode 0x' <<<"$out" &&
        grep -q 'sq_tail' <<<"$out" && grep -q 'cq_head' <<<"$out"
}

refused_at_once() {	# later commands fail with EIO in well under the 5 s timeout
    local t0 t1 out
    t0=$(date +%s)
    out=$("$qhca" exec 1 -- "cat /sys/class/infiniband/qhca_0/ports/1/state" 2>&1)
    echo "$out"
    grep -q 'Input/output error' <<<"$out" || return 1
    ! "$qhca" exec 1 -- "ibv_rc_pingpong -d qhca_0 -g 1 -p 18700 127.0.0.1" || return 1
    t1=$(date +%s)
    echo "took $((t1 - t0)) s"
    [ $((t1 - t0)) -lt 4 ]
}

reload_works() {	# modprobe: the port is ACTIVE, the queue live, guest 2 answers pings
    "$qhca" exec 1 -- "modprobe qhca" || return 1
    eventually 20 "$qhca" exec 1 -- "ibv_devinfo -d qhca_0 | grep -q PORT_ACTIVE" || return 1
    admin_state_is 1 0 || return 1
    "$qhca" exec 1 -- "n=$netdev; ip addr add 192.168.77.1/24 dev \$n && ip link set \$n up" ||
        return 1
    eventually 20 "$qhca" exec 1 -- ping -c 1 -W 2 192.168.77.2
}

rping_works() {	# RDMA CM between the guests: CM MADs on the kernel's GSI QP and CQs
    "$qhca" exec 2 -- 'pkill -f "^rping"; setsid rping -s -a 192.168.77.2 -C 5 < /dev/null > /tmp/rping.log 2>&1 &' ||
        return 1
    sleep 1.5
    timeout 120 "$qhca" exec 1 -- rping -c -a 192.168.77.2 -C 5 -v -S 64
}

vm_up 2
mark 1 udata
check "hostile driver udata refused (qhca-udata: EINVAL, EOPNOTSUPP)" "$qhca" exec 1 -- qhca-udata
check "hostile driver udata: kernel log clean" log_clean 1 udata
check "verbs still work afterwards (ibv_rc_pingpong loopback)" "$qhca" exec 1 -- \
    'setsid ibv_rc_pingpong -d qhca_0 -g 1 -p 18600 -n 20 < /dev/null > /dev/null 2>&1 & sleep 1.5; ibv_rc_pingpong -d qhca_0 -g 1 -p 18600 -n 20 127.0.0.1'

# Kernel QPs and CQs: used by the CM, torn down and made again by an unload and a load.
mark 1 reload
check "rping between the guests (kernel GSI QP polled)" rping_works
check "rmmod qhca with kernel QPs and CQs in use" "$qhca" exec 1 -- rmmod qhca
check "modprobe qhca again: port ACTIVE, ping guest 2" reload_works
check "rping after the reload" rping_works
check "unload and reload: kernel log clean" log_clean 1 reload

# A verbs process holds objects (context, PD, MR, CQ, QP) across the timeout.
"$qhca" exec 1 -- 'setsid ibv_rc_pingpong -d qhca_0 -g 1 -p 18601 < /dev/null > /tmp/held.log 2>&1 &'
sleep 1
mark 1 timeout
check "admin timeout: the command fails and the queue is dead" time_out
check "admin timeout: one diagnostic with opcode, cmd_id, head and tail" one_diagnostic
check "admin timeout: later commands refused at once (EIO)" refused_at_once
check "admin timeout: a process's verbs objects destroyed" "$qhca" exec 1 -- \
    'pkill -f "^ibv_rc_pingpong"; sleep 1; ! pgrep -f "^ibv_rc_pingpong"'
check "admin timeout: netdev down (its rings kept)" "$qhca" exec 1 -- "ip link set $netdev down"
check "admin timeout: rmmod resets the device" "$qhca" exec 1 -- \
    "rmmod qhca && dmesg | grep -q 'device reset after the admin queue died'"
check "admin timeout: kernel log clean through teardown" log_clean 1 timeout
check "admin timeout: modprobe again, port ACTIVE, ping guest 2" reload_works
vm_down
finish
