#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# VM test of the guest driver against hostile input and a hung device (issue 8):
#  - driver udata from user space with shift-sized ring geometry, reserved bits and short
#    buffers is refused with EINVAL, unknown comp_mask bits and nonzero bytes past the
#    known structure with EOPNOTSUPP (qhca-udata), and the kernel log stays clean;
#  - an admin command that times out (injected through debugfs: its doorbell is withheld)
#    kills the admin queue: one diagnostic, every later command refused at once, verbs
#    objects and the netdev torn down without warnings; unloading the driver resets the
#    device, and after loading it again the port works (ping to the other guest);
#  - a CQ destroyed against its CQ_ERR handler (issue 25): the destroy waits for the
#    handler (guest 1 with two vCPUs, debugfs cq_event_delay_ms, qhca-cqevent).
set -uo pipefail
. "$(dirname "$0")/lib.sh"

bad='UBSAN|shift-out-of-bounds|WARNING:|BUG:|Oops|general protection|Call Trace|corruption'

mark() {	# mark I NAME: a line in guest I's kernel log that later checks start from
    "$qhca" exec "$1" -- "echo qhca-test-mark-$2 > /dev/kmsg"
}

log_since() {	# log_since I NAME: guest I's kernel log since the mark NAME
    "$qhca" exec "$1" -- "dmesg | sed -n '/qhca-test-mark-$2/,\$p'"
}

log_clean() {	# log_clean I NAME: the mark is in the log, and no warning, oops or UBSAN
    # report since it (a log without the mark, lost or never written, proves nothing)
    local out rc
    out=$(log_since "$1" "$2") || return 1
    grep -q "qhca-test-mark-$2" <<<"$out" || { echo "vm$1: no mark $2 in the kernel log"; return 1; }
    grep -E "$bad" <<<"$out"
    rc=$?
    [ "$rc" = 1 ]
}

dbg=/sys/kernel/debug/qhca
netdev='$(ls /sys/class/infiniband/qhca_0/device/net)'

admin_state_is() {	# admin_state_is I N: 0 live, 1 dead, 2 reset
    [ "$("$qhca" exec "$1" -- "cat $dbg/*/admin_state")" = "$2" ]
}

# A command after the injection: QUERY_PORT (through the port's sysfs state) times out: cat
# fails (status 1, not timeout's 124 or ssh's 255) with ETIMEDOUT or, the driver having
# reported it as such, EIO; and the queue is dead.
time_out() {
    local out rc
    "$qhca" exec 1 -- "for f in $dbg/*/admin_timeout_inject; do echo 1 > \$f; done" || return 1
    out=$("$qhca" exec 1 -- "timeout 30 cat /sys/class/infiniband/qhca_0/ports/1/state" 2>&1)
    rc=$?
    echo "$out"
    [ "$rc" = 1 ] && grep -qE 'Connection timed out|Input/output error' <<<"$out" ||
        { echo "cat exited $rc"; return 1; }
    admin_state_is 1 1
}

one_diagnostic() {	# exactly one line, naming opcode, command id, head and tail
    local out
    out=$(log_since 1 timeout | grep 'admin queue dead') || return 1
    echo "$out"
    [ "$(wc -l <<<"$out")" = 1 ] && grep -q 'opcode 0x' <<<"$out" &&
        grep -q 'sq_tail' <<<"$out" && grep -q 'cq_head' <<<"$out"
}

# Later commands fail with EIO in well under the 5 s timeout: the port's sysfs state, and a
# verbs client whose server (in guest 2, a working device) waits for it: the client must be
# refused by its own device (a verbs call failing with EIO, strace), before it connects.
refused_at_once() {
    local t0 t1 out rc
    "$qhca" exec 2 -- 'pkill -f "^ibv_rc_pingpong"; setsid timeout 60 ibv_rc_pingpong -d qhca_0 -g 3 -p 18700 < /dev/null > /tmp/refused-srv.log 2>&1 &' ||
        return 1
    sleep 1
    "$qhca" exec 2 -- 'pgrep -f "^ibv_rc_pingpong -d qhca_0 -g 3 -p 18700"' > /dev/null ||
        { echo "the server in guest 2 is not running"; return 1; }
    t0=$(date +%s)
    out=$("$qhca" exec 1 -- "cat /sys/class/infiniband/qhca_0/ports/1/state" 2>&1)
    echo "$out"
    grep -q 'Input/output error' <<<"$out" || return 1
    out=$("$qhca" exec 1 -- "strace -f -Z -o /tmp/refused.strace ibv_rc_pingpong -d qhca_0 -g 3 -p 18700 192.168.77.2" 2>&1)
    rc=$?
    t1=$(date +%s)
    echo "$out"
    "$qhca" exec 2 -- 'pkill -f "^timeout 60 ibv_rc_pingpong"; pkill -f "^ibv_rc_pingpong"'
    "$qhca" exec 1 -- 'grep EIO /tmp/refused.strace' ||
        { echo "no system call of the client failed with EIO"; return 1; }
    [ "$rc" = 1 ] || { echo "the client exited $rc, want 1"; return 1; }
    grep -qE "Couldn't (get context|allocate PD|register MR|create CQ|create QP|get port info)" <<<"$out" ||
        { echo "the client was not refused by its device"; return 1; }
    ! grep -qE "Couldn't connect|local address|remote address" <<<"$out" ||
        { echo "the client got as far as the connection"; return 1; }
    echo "took $((t1 - t0)) s"
    [ $((t1 - t0)) -lt 4 ]
}

# The verbs process holding objects across the timeout: it ran (its context counted by
# rdma resource), and once killed it is gone and so is every user context of the device.
objects_destroyed() {
    local before after rc
    before=$("$qhca" exec 1 -- 'rdma resource show') || return 1
    echo "before: $before"
    grep -qE "qhca_0: .* ctx [1-9]" <<<"$before" || { echo "no user context held"; return 1; }
    "$qhca" exec 1 -- 'pkill -f "^ibv_rc_pingpong"' || { echo "no process held the objects"; return 1; }
    sleep 1
    "$qhca" exec 1 -- 'pgrep -f "^ibv_rc_pingpong"'
    rc=$?
    [ "$rc" = 1 ] || { echo "pgrep exited $rc, want 1 (no such process)"; return 1; }
    after=$("$qhca" exec 1 -- 'rdma resource show') || return 1
    echo "after: $after"
    grep -qE "qhca_0: .* ctx 0( |$)" <<<"$after"
}

# ETH_STOP cannot reach a dead device: the netdev goes down, and the driver keeps the rings
# (says so, once) because the device may still write them; guest 2's pings of guest 1 go
# unanswered, their frames land in those rings (the kernel log stays clean through the
# teardown, the next check).
netdev_down_rings_kept() {
    local out
    "$qhca" exec 1 -- "ip link set $netdev down" || return 1
    out=$("$qhca" exec 1 -- "ip -o link show $netdev") || return 1
    echo "$out"
    ! grep -q '[<,]UP[,>]' <<<"$out" || { echo "the netdev is still up"; return 1; }
    out=$(log_since 1 timeout) || return 1
    grep 'rings kept' <<<"$out"
    [ "$(grep -c 'ETH_STOP failed (-5): rings kept until the device is reset' <<<"$out")" = 1 ] ||
        { echo "no single 'ETH_STOP failed (-5): rings kept' in the kernel log"; return 1; }
    ping_lost 2 192.168.77.1 5
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
    'setsid ibv_rc_pingpong -d qhca_0 -g 3 -p 18600 -n 20 < /dev/null > /dev/null 2>&1 & sleep 1.5; ibv_rc_pingpong -d qhca_0 -g 3 -p 18600 -n 20 127.0.0.1'

# Kernel QPs and CQs: used by the CM, torn down and made again by an unload and a load.
mark 1 reload
check "rping between the guests (kernel GSI QP polled)" rping_works
check "rmmod qhca with kernel QPs and CQs in use" "$qhca" exec 1 -- rmmod qhca
check "modprobe qhca again: port ACTIVE, ping guest 2" reload_works
check "rping after the reload" rping_works
check "unload and reload: kernel log clean" log_clean 1 reload

# A verbs process holds objects (context, PD, MR, CQ, QP) across the timeout.
"$qhca" exec 1 -- 'setsid ibv_rc_pingpong -d qhca_0 -g 3 -p 18601 < /dev/null > /tmp/held.log 2>&1 &'
sleep 1
mark 1 timeout
check "admin timeout: the command fails and the queue is dead" time_out
check "admin timeout: one diagnostic with opcode, cmd_id, head and tail" one_diagnostic
check "admin timeout: later commands refused at once (EIO)" refused_at_once
check "admin timeout: a process's verbs objects destroyed" objects_destroyed
check "admin timeout: netdev down (its rings kept)" netdev_down_rings_kept
check "admin timeout: rmmod resets the device" "$qhca" exec 1 -- \
    "rmmod qhca && dmesg | grep -q 'device reset after the admin queue died'"
check "admin timeout: kernel log clean through teardown" log_clean 1 timeout
check "admin timeout: modprobe again, port ACTIVE, ping guest 2" reload_works

# Destroying a CQ against its CQ_ERR handler (issue 25), in guest 1 again with two vCPUs:
# the admin vector (async EQ) on CPU 0, qhca-cqevent on CPU 1. With cq_event_delay_ms the
# driver runs each CQ_ERR handler only in the interrupt that completes DESTROY_CQ, 20 ms
# late: the destroy must wait for it. The driver counts the handlers run (cq_events) and
# those still running when the destroy returned (cq_events_late: a use after free).
cq_counter() {	# cq_counter NAME: guest 1's debugfs counter NAME
    "$qhca" exec 1 -- "cat $dbg/*/$1"
}

cq_race() {
    local before events late
    before=$(cq_counter cq_events) || return 1
    "$qhca" exec 1 -- "irq=\$(awk -F: '/qhca-admin/ { print \$1 + 0 }' /proc/interrupts) &&
        echo 0 > /proc/irq/\$irq/smp_affinity_list &&
        for f in $dbg/*/cq_event_delay_ms; do echo 20 > \$f; done &&
        taskset -c 1 qhca-cqevent -n 50; r=\$?
        for f in $dbg/*/cq_event_delay_ms; do echo 0 > \$f; done; exit \$r" || return 1
    events=$(cq_counter cq_events) && late=$(cq_counter cq_events_late) || return 1
    events=$((events - before))
    echo "CQ_ERR handlers run against a destroy: $events of 50; still running after it: $late"
    [ "$events" -gt 0 ] && [ "$late" = 0 ]
}

vm_down
export QHCA_QEMU_ARGS="${QHCA_QEMU_ARGS:-} -smp 2"
vm_up 1
if [ "$("$qhca" exec 1 -- nproc)" = 2 ]; then
    mark 1 cqevent
    check "CQ overflow: IBV_EVENT_CQ_ERR reaches user space" "$qhca" exec 1 -- \
        qhca-cqevent -a -n 10
    check "destroy CQ against its CQ_ERR handler: waits for it (cq_events_late 0)" cq_race
    check "destroy CQ against CQ_ERR: kernel log clean" log_clean 1 cqevent
else
    skip "destroy CQ against its CQ_ERR handler" "guest 1 has one vCPU"
fi
vm_down
finish
