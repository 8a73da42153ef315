#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# The short tier of a flavour (tests/check.sh: make check for the flavours beside the
# default, make check-kernels for all): the pingpongs and perftest's four operations between
# two guests of $QHCA_FLAVOUR (QHCA_KERNEL), over qhca_0, on the flavour's own kernel.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
. "$root/scripts/lib.sh"
flavour_init
want=$(guest_kernel_abi)-amd64

vm_up 2 --flavour "$QHCA_FLAVOUR"
check "both guests run the $QHCA_FLAVOUR kernel, $want" eval '
    for i in 1 2; do r=$("$qhca" exec $i -- uname -r) && [ "$r" = "$want" ] || { echo "vm$i: ${r:-no answer}"; exit 1; }; done'
check "ibv_rc_pingpong 4 KiB x 100, data checked" pingpong ibv_rc_pingpong -s 4096 -n 100 -c
check "ibv_ud_pingpong 1 KiB x 100" pingpong ibv_ud_pingpong -s 1024 -n 100
check "ibv_srq_pingpong 4 KiB x 100, 4 QPs" pingpong ibv_srq_pingpong -s 4096 -n 100 -q 4
for op in write read send atomic; do
    check "ib_${op}_bw over RC" perf "ib_${op}_bw" -n 200
done
check "ib_send_lat over RC" perf ib_send_lat -n 200
check "no kernel BUG, oops, warning or qhca error (vm1)" kernel_log_clean 1
check "no kernel BUG, oops, warning or qhca error (vm2)" kernel_log_clean 2
vm_down
finish
