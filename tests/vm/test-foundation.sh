#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# VM test: two guests boot on the fabric; in each the qhca module is loaded, ibv_devinfo -v
# shows qhca_0 with an ACTIVE Ethernet port, and a user program opens the device through
# the provider and allocates a PD; exec passes exit codes; down leaves nothing running.
set -uo pipefail
. "$(dirname "$0")/lib.sh"

devinfo_ok() {	# the guest's ibv_devinfo -v shows qhca_0, ACTIVE, Ethernet
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

vm_up 2
for i in 1 2; do
    check "vm$i: qhca module loaded" "$qhca" exec "$i" -- 'grep -q "^qhca " /proc/modules'
    check "vm$i: PCI function 1af4:10f0 bound to qhca" "$qhca" exec "$i" -- \
        'for d in /sys/bus/pci/devices/*; do [ "$(cat $d/vendor):$(cat $d/device)" = 0x1af4:0x10f0 ] && [ "$(basename $(readlink $d/driver))" = qhca ] && exit 0; done; exit 1'
    check "vm$i: ibv_devinfo -v shows qhca_0, PORT_ACTIVE, Ethernet" devinfo_ok "$i"
    check "vm$i: user program opens qhca_0 and allocates a PD" "$qhca" exec "$i" -- qhca-smoke
    check "vm$i: no kernel oops or qhca error" kernel_log_clean "$i" \
        "$KERNEL_LOG_BAD|QUERY_DEVICE|unknown parameter"
done
check "exec passes the exit code" exit_code_is 7 1 'exit 7'
check "exec passes an argument vector" "$qhca" exec 2 -- test "a b" = "a b"
vm_down
finish
