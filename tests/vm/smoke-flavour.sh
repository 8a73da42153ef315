#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# The short tier of a flavour or kernel other than the default (tests/flavours.sh, make
# check and make check-kernels): the pingpongs, perftest's four operations and a program
# built on the host, between two guests of $QHCA_FLAVOUR (QHCA_KERNEL), over qhca_0.
set -uo pipefail
. "$(dirname "$0")/lib.sh"

vm_up 2
check "the guests run the flavour's kernel ($("$qhca" exec 1 -- uname -r 2>/dev/null))" \
    eval '[ "$("$qhca" exec 1 -- uname -r)" = "$("$qhca" exec 2 -- uname -r)" ]'
check "ibv_rc_pingpong 4 KiB x 100, data checked" pingpong ibv_rc_pingpong -s 4096 -n 100 -c
check "ibv_ud_pingpong 1 KiB x 100" pingpong ibv_ud_pingpong -s 1024 -n 100
check "ibv_srq_pingpong 4 KiB x 100, 4 QPs" pingpong ibv_srq_pingpong -s 4096 -n 100 -q 4
for op in write read send atomic; do
    check "ib_${op}_bw over RC" perf "ib_${op}_bw" -n 200
done
check "ib_send_lat over RC" perf ib_send_lat -n 200
check "no kernel oops or qhca error (vm1)" kernel_log_clean 1
check "no kernel oops or qhca error (vm2)" kernel_log_clean 2
vm_down
finish
