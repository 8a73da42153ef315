#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# VM test of the verbs datapath with unmodified programs between two guests: the
# ibv_*_pingpong examples with data checking at several sizes and MTUs, perftest
# bandwidth and latency over RC (and UC/UD sends), loopback to the own port, capabilities
# beyond the device's limits (qhca-limits), the verbs beyond the basics between guests
# (qhca-features), XRC between guests and within one (qhca-xrc), and a check with strace that
# posting and polling make no system call.
set -uo pipefail
. "$(dirname "$0")/lib.sh"

# one_guest SERVER_CMD CLIENT_CMD: both sides in guest 1 (the server in the background);
# both must exit 0.
one_guest() {
    "$qhca" exec 1 -- "rm -f /tmp/lo.log /tmp/lo.rc; setsid sh -c '$1 > /tmp/lo.log 2>&1; echo \$? > /tmp/lo.rc' < /dev/null > /dev/null 2>&1 &" ||
        return 1
    sleep 1.5
    timeout 120 "$qhca" exec 1 -- "$2" || { echo "client failed"; return 1; }
    eventually 20 "$qhca" exec 1 -- 'test -s /tmp/lo.rc' && [ "$("$qhca" exec 1 -- cat /tmp/lo.rc)" = 0 ] ||
        { echo "server:"; "$qhca" exec 1 -- cat /tmp/lo.log; return 1; }
}

loopback() {	# client and server on one guest: two QPs of one port
    one_guest 'ibv_rc_pingpong -d qhca_0 -g 3 -p 18516 -s 8192 -n 100 -c' \
              'ibv_rc_pingpong -d qhca_0 -g 3 -p 18516 -s 8192 -n 100 -c 127.0.0.1' &&
        "$qhca" exec 1 -- 'grep -q iters /tmp/lo.log'
}

loopback_bw() {	# 1 MiB WRITEs between two processes of one guest, through the loopback queue
    # (the client's status is its own: no pipe after it)
    one_guest 'ib_write_bw -d qhca_0 -x 3 -p 18600 -s 1048576 -n 100' \
              'ib_write_bw -d qhca_0 -x 3 -p 18600 -s 1048576 -n 100 127.0.0.1 > /tmp/lo-cli.log 2>&1; rc=$?; tail -n 2 /tmp/lo-cli.log; exit $rc' &&
        "$qhca" exec 1 -- 'grep -q 1048576 /tmp/lo.log'
}

syscalls() {	# syscalls N: ibv_rc_pingpong -n N under strace -c in guest 1; its system calls
    local out
    out=$("$qhca" exec 1 -- "strace -f -c -o /tmp/s$1 ibv_rc_pingpong -d qhca_0 -g 3 -n $1 192.168.77.2 > /dev/null && tail -n 1 /tmp/s$1") ||
        { echo "ibv_rc_pingpong -n $1 under strace failed" >&2; return 1; }
    # the total line: % time, seconds, usecs/call, calls[, errors] total
    awk '$NF == "total" { print $4 }' <<<"$out" | grep -E '^[0-9]+$' ||
        { echo "no total in strace -c: $out" >&2; return 1; }
}

no_syscalls_on_datapath() {	# 20 or 2000 iterations make the same number of system calls
    local few many
    "$qhca" exec 2 -- 'rm -f /tmp/sc.rc; setsid sh -c "ibv_rc_pingpong -d qhca_0 -g 3 -n 20 && ibv_rc_pingpong -d qhca_0 -g 3 -n 2000; echo \$? > /tmp/sc.rc" < /dev/null > /dev/null 2>&1 &'
    sleep 1.5
    few=$(syscalls 20) || return 1
    sleep 1.5
    many=$(syscalls 2000) || return 1
    echo "system calls: $few for 20 round trips, $many for 2000"
    eventually 20 "$qhca" exec 2 -- 'test -s /tmp/sc.rc' && [ "$("$qhca" exec 2 -- cat /tmp/sc.rc)" = 0 ] ||
        { echo "the servers in guest 2 failed"; return 1; }
    [ $((many - few)) -lt 20 ]
}

xrc_one_guest() {	# both sides of qhca-xrc in guest 1
    "$qhca" exec 1 -- 'rm -f /tmp/xrc.log /tmp/xrc.rc; setsid sh -c "qhca-xrc -s > /tmp/xrc.log 2>&1; echo \$? > /tmp/xrc.rc" < /dev/null > /dev/null 2>&1 &'
    sleep 1.5
    timeout 120 "$qhca" exec 1 -- qhca-xrc 127.0.0.1 || return 1
    eventually 20 "$qhca" exec 1 -- 'test -s /tmp/xrc.rc' && [ "$("$qhca" exec 1 -- cat /tmp/xrc.rc)" = 0 ] ||
        { "$qhca" exec 1 -- cat /tmp/xrc.log; return 1; }
}

# The same QP seen by the guest (rdma resource show, restrack) and by the device itself
# (tools/qhca device, the QOM property "objects" over QMP): its number and state agree, and
# the device shows its PSNs moving while ibv_rc_pingpong runs.
views_agree() {
    local g d qpn
    "$qhca" exec 2 -- 'pkill ibv_rc_pingpong; setsid ibv_rc_pingpong -d qhca_0 -g 3 -n 100000 > /dev/null 2>&1 < /dev/null &'
    sleep 1.5
    "$qhca" exec 1 -- 'pkill ibv_rc_pingpong; setsid ibv_rc_pingpong -d qhca_0 -g 3 -n 100000 192.168.77.2 > /dev/null 2>&1 < /dev/null &'
    sleep 3
    g=$("$qhca" exec 1 -- rdma resource show qp | grep 'type RC')
    echo "guest:  $g"
    qpn=$(echo "$g" | sed -n 's/.* lqpn \([0-9]*\) .*/\1/p')
    d=$("$qhca" device 1 --json)
    "$qhca" device 1
    "$qhca" exec 1 -- 'pkill ibv_rc_pingpong'; "$qhca" exec 2 -- 'pkill ibv_rc_pingpong'
    [ -n "$qpn" ] && echo "$g" | grep -q 'state RTS' &&
        echo "$d" | python3 -c "import json, sys
q = [q for q in json.load(sys.stdin)['qps'] if q['qpn'] == $qpn]
sys.exit(not (q and q[0]['type'] == 'RC' and q[0]['state'] == 'RTS' and q[0]['next_psn'] != 0
              and q[0]['sq']['producer'] > 0))"
}

vm_up 2
check "the guest's and the device's view of a QP agree (rdma resource show, qhca device)" \
    views_agree
for s in 1 4096 65536; do
    check "ibv_rc_pingpong -s $s -c" pingpong ibv_rc_pingpong -s "$s" -n 100 -c
done
for m in 256 1024 4096; do
    check "ibv_rc_pingpong -m $m -s 20000 -c" pingpong ibv_rc_pingpong -m "$m" -s 20000 -n 50 -c
done
check "ibv_uc_pingpong -s 4096 -c" pingpong ibv_uc_pingpong -s 4096 -n 100 -c
check "ibv_uc_pingpong -m 512 -s 10000 -c" pingpong ibv_uc_pingpong -m 512 -s 10000 -n 50 -c
check "ibv_ud_pingpong -s 1024 -c" pingpong ibv_ud_pingpong -s 1024 -n 100 -c
check "ibv_ud_pingpong -s 2048 -c" pingpong ibv_ud_pingpong -s 2048 -n 100 -c
check "ibv_srq_pingpong -s 4096 -c" pingpong ibv_srq_pingpong -s 4096 -n 100 -c
check "ibv_srq_pingpong -q 4 -s 100 -c" pingpong ibv_srq_pingpong -q 4 -s 100 -n 100 -c
check "ibv_rc_pingpong -e (completion events)" pingpong ibv_rc_pingpong -s 4096 -n 100 -e
check "loopback: two QPs on one port" loopback
check "loopback: ib_write_bw 1 MiB within one guest" loopback_bw
check "extended verbs: ibv_create_cq_ex, ibv_create_qp_ex and ibv_wr_* (qhca-exverbs)" \
    "$qhca" exec 1 -- qhca-exverbs
check "capabilities beyond the device refused at once with EINVAL, the largest work (qhca-limits)" \
    timeout 300 "$qhca" exec 1 -- qhca-limits
check "ib_send_bw RC" perf ib_send_bw -s 65536 -n 200
check "ib_write_bw RC" perf ib_write_bw -s 65536 -n 200
check "ib_read_bw RC" perf ib_read_bw -s 65536 -n 200
check "ib_read_bw RC 8 MiB (READ responses paced)" perf ib_read_bw -s 8388608 -n 20
check "ib_atomic_bw RC" perf ib_atomic_bw -n 200
check "ib_send_lat RC" perf ib_send_lat -s 8 -n 200
check "ib_write_lat RC" perf ib_write_lat -s 8 -n 200
check "ib_send_lat -e RC (completion events: one event a completion)" perf ib_send_lat -e -s 8 -n 200
check "ib_send_bw UC" perf ib_send_bw -c UC -s 4096 -n 200
check "ib_send_bw UD" perf ib_send_bw -c UD -s 2048 -n 200
check "no system call on post, doorbell or poll (strace)" no_syscalls_on_datapath
check "rping (RDMA CM over the kernel's GSI QP, RDMA READ and WRITE)" \
    pair "modprobe rdma_ucm; rping -s -a 192.168.77.2 -C 20 -V" \
         "modprobe rdma_ucm; rping -c -a 192.168.77.2 -C 20 -V"
# perftest -R: the two ends first meet over TCP, then the server starts listening on rdma_cm
# while the client already connects. A server slower than its client (a TCG guest) has no
# listener yet: the client's REQ is rejected (IB CM: no such service ID), as on any
# hardware, and perftest's own retry of the connection crashes (librdmacm, a GPF). That
# race, and only it, gets one more run; the crash it left is not held against the kernel.
# (check runs a step in a subshell: the race is marked by a file)
raced=$QHCA_RUN/perftest-raced
rm -f "$raced"
perf_cm() {
    local log=$QHCA_RUN/perf-cm.log
    rm -f "$log"
    PAIR_CLIENT_LOG=$log perf "$@" && return 0
    # rejected for want of a listener, while the server still waits for its client (a
    # server that failed or never listened has ended: that is no race)
    grep -q "Event: RDMA_CM_EVENT_REJECTED; error: 8\." "$log" 2>/dev/null &&
        "$qhca" exec 2 -- 'test ! -e /tmp/srv.rc' || return 1
    echo "# the client connected before the server listened (rejected: no such service): once more"
    touch "$raced"
    perf "$@"
}
check "ib_send_bw -R (connection through rdma_cm)" perf_cm ib_send_bw -R -s 4096 -n 100
[ -e "$raced" ] && echo "# ib_send_bw -R ran a second time after the rdma_cm race (its result: the line above)"
check "remote isolation: refused keys, ranges and rights leave every byte (qhca-isolation)" \
    pair "qhca-isolation server" "qhca-isolation client 192.168.77.2"
check "rereg MR, memory windows, ATOMIC WRITE, resize CQ, SEND_WITH_INV between guests (qhca-features)" \
    pair "qhca-features -s" "qhca-features 192.168.77.2"
check "XRC between guests: domains, XRC SRQs with their own CQs, SEND, WRITE, READ, atomics through the target, a foreign SRQ refused (qhca-xrc)" \
    pair "qhca-xrc -s" "qhca-xrc 192.168.77.2"
check "XRC within one guest (qhca-xrc)" xrc_one_guest
check "refused requests counted in remote_access_errors" "$qhca" exec 2 -- \
    'rdma statistic show link qhca_0/1 | grep -E "remote_access_errors ([2-9]|[1-9][0-9])"'
# (iproute2 6.15 prints a counter a line, older ones all on one: the lines joined)
check "hw_counters through rdma statistic" "$qhca" exec 1 -- \
    'rdma statistic show link qhca_0/1 | tr "\n" " " | grep -E "tx_pkts [1-9][0-9]* .*rx_pkts [1-9]"'
if [ -e "$raced" ]; then
    # every line but perftest's own crash in librdmacm after the race above
    check "no kernel oops in guest 1 (but perftest's crash after the race)" kernel_log_clean 1 \
        "$KERNEL_LOG_BAD" 'traps: ib_send_bw\[[0-9]+\] general protection fault .* in librdmacm'
else
    check "no kernel oops in guest 1" kernel_log_clean 1
fi
check "no kernel oops in guest 2" kernel_log_clean 2
vm_down
finish
