#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# VM test: two guests boot on the fabric; in each the qhca module is loaded, ibv_devinfo -v
# shows qhca_0 with an ACTIVE Ethernet port, and a user program opens the device through
# the provider and allocates a PD; exec passes exit codes; down leaves nothing running.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
qhca="$root/tools/qhca"
export QHCA_RUN=${QHCA_RUN:-${QHCA_CACHE:-$HOME/.cache/qhca}/run-check}
pass=0 fail=0

check() {	# check NAME COMMAND...: run COMMAND, count and print the result
    local name=$1; shift
    local out
    if out=$("$@" 2>&1); then
        echo "ok - $name"
        pass=$((pass + 1))
    else
        echo "not ok - $name"
        printf '%s\n' "$out" | tail -n 20 | sed 's/^/#   /'
        fail=$((fail + 1))
    fi
}

devinfo_ok() {	# the guest's ibv_devinfo -v shows what issue 2 promises
    local out
    out=$("$qhca" exec "$1" -- ibv_devinfo -v -d qhca_0) || return 1
    grep -q $'hca_id:\tqhca_0' <<<"$out" &&
        grep -q 'state:[[:space:]]*PORT_ACTIVE' <<<"$out" &&
        grep -q 'link_layer:[[:space:]]*Ethernet' <<<"$out" &&
        grep -q 'vendor_id:[[:space:]]*0x1af4' <<<"$out" || { echo "$out"; return 1; }
}

exit_code_is() {	# exit_code_is WANT I CMD
    local want=$1 i=$2 rc; shift 2
    "$qhca" exec "$i" -- "$@"
    rc=$?
    [ "$rc" = "$want" ] || { echo "exit code $rc, want $want"; return 1; }
}

nothing_running() {
    local left
    left=$(ps -eo pid=,stat=,args= | awk -v run="$QHCA_RUN" '$2 !~ /^Z/ && index($0, run)' |
           grep -v awk || true)
    [ -z "$left" ] || { echo "still running: $left"; return 1; }
}

"$qhca" down > /dev/null 2>&1
start=$(date +%s.%N)
check "up -n 2" "$qhca" up -n 2
echo "# up took $(echo "$(date +%s.%N) - $start" | bc) s"
for i in 1 2; do
    check "vm$i: qhca module loaded" "$qhca" exec "$i" -- 'grep -q "^qhca " /proc/modules'
    check "vm$i: PCI function 1af4:10f0 bound to qhca" "$qhca" exec "$i" -- \
        'for d in /sys/bus/pci/devices/*; do [ "$(cat $d/vendor):$(cat $d/device)" = 0x1af4:0x10f0 ] && [ "$(basename $(readlink $d/driver))" = qhca ] && exit 0; done; exit 1'
    check "vm$i: ibv_devinfo -v shows qhca_0, PORT_ACTIVE, Ethernet" devinfo_ok "$i"
    check "vm$i: user program opens qhca_0 and allocates a PD" "$qhca" exec "$i" -- qhca-smoke
    check "vm$i: no kernel oops or qhca error" "$qhca" exec "$i" -- \
        '! dmesg | grep -E "BUG:|Oops|WARNING:|qhca.*timed out|ib_register_device failed|QUERY_DEVICE failed"'
done
check "exec passes the exit code" exit_code_is 7 1 'exit 7'
check "exec passes an argument vector" "$qhca" exec 2 -- test "a b" = "a b"
check "down" "$qhca" down
check "down leaves nothing running" nothing_running
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
