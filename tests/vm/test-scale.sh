#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# VM test of scale: eight guests on one fabric (the launcher's default memory fits them on
# this machine), RC between the first and the last, then four of them doing all-to-all RC
# traffic at once: every pair runs qhca-rcstress (WRITE, READ, SEND, atomics, every byte
# checked) at the same time, twelve QPs over one switch.
#   QHCA_SCALE_VMS (default 8), QHCA_SCALE_BYTES (default 8M a pair)
set -uo pipefail
. "$(dirname "$0")/lib.sh"

nvm=${QHCA_SCALE_VMS:-8}
bytes=${QHCA_SCALE_BYTES:-8M}

every_guest_has_qhca() {
    local i
    for i in $(seq 1 "$nvm"); do
        "$qhca" exec "$i" -- 'ibv_devinfo -d qhca_0 | grep -q PORT_ACTIVE' ||
            { echo "guest $i: qhca_0 not active"; return 1; }
    done
}

first_to_last() {
    "$qhca" exec "$nvm" -- 'setsid ibv_rc_pingpong -d qhca_0 -g 3 -s 4096 -n 100 -c > /dev/null 2>&1 < /dev/null &'
    sleep 1.5
    timeout 120 "$qhca" exec 1 -- ibv_rc_pingpong -d qhca_0 -g 3 -s 4096 -n 100 -c "192.168.77.$nvm"
}

all_to_all() {	# all_to_all N: every pair i<j of guests 1..N at once, j serving
    local n=$1 i j port pids=() fails=0 rc
    for j in $(seq 2 "$n"); do
        for i in $(seq 1 $((j - 1))); do
            port=$((18900 + 10 * i + j))
            "$qhca" exec "$j" -- "rm -f /tmp/a2a$port.*; setsid sh -c 'qhca-rcstress -s -p $port > /tmp/a2a$port.log 2>&1; echo \$? > /tmp/a2a$port.rc' < /dev/null > /dev/null 2>&1 &" || return 1
        done
    done
    sleep 2
    for j in $(seq 2 "$n"); do
        for i in $(seq 1 $((j - 1))); do
            port=$((18900 + 10 * i + j))
            timeout 900 "$qhca" exec "$i" -- "qhca-rcstress -p $port -b $bytes -S $port 192.168.77.$j" \
                > "$QHCA_RUN/a2a$port.out" 2>&1 &
            pids+=("$!:$i:$j:$port")
        done
    done
    for p in "${pids[@]}"; do
        IFS=: read -r pid i j port <<< "$p"
        wait "$pid"
        rc=$?
        if [ "$rc" != 0 ]; then
            echo "pair $i -> $j failed ($rc):"
            tail -n 5 "$QHCA_RUN/a2a$port.out"
            fails=$((fails + 1))
        else
            echo "pair $i -> $j: $(tail -n 1 "$QHCA_RUN/a2a$port.out")"
        fi
    done
    # the servers checked what they received too: each must have exited 0
    for j in $(seq 2 "$n"); do
        for i in $(seq 1 $((j - 1))); do
            port=$((18900 + 10 * i + j))
            eventually 30 "$qhca" exec "$j" -- "test -s /tmp/a2a$port.rc" &&
                [ "$("$qhca" exec "$j" -- cat /tmp/a2a$port.rc)" = 0 ] ||
                { echo "server of pair $i -> $j failed:"; "$qhca" exec "$j" -- tail -n 5 /tmp/a2a$port.log
                  fails=$((fails + 1)); }
        done
    done
    [ "$fails" = 0 ]
}

no_oops_anywhere() {
    local i
    for i in $(seq 1 "$nvm"); do
        kernel_log_clean "$i" || return 1
    done
}

vm_up "$nvm"
check "$nvm guests, each with an active qhca port" every_guest_has_qhca
check "RC between guest 1 and guest $nvm" first_to_last
check "all-to-all RC among 4 guests at once (6 pairs, $bytes each, every byte checked)" all_to_all 4
check "no kernel oops in any guest" no_oops_anywhere
vm_down
finish
