#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# make demo: boot two VMs on the fabric and show ibv_devinfo from each. The VMs stay up.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
qhca="$QHCA_ROOT/tools/qhca"

"$qhca" down > /dev/null 2>&1 || true
"$qhca" up -n 2
for i in 1 2; do
    step "vm$i: ibv_devinfo"
    "$qhca" exec "$i" -- ibv_devinfo
done
cat <<EOT

The two VMs are still running. Try:
  tools/qhca explain -- qhca-lesson write
                                   one RDMA WRITE from guest 1 to guest 2, step by step
                                   (docs/tutorial.md: the lesson that goes with it)
  tools/qhca ssh 1                 a shell in guest 1 (qhca_0 is its RDMA device)
  tools/qhca exec 2 -- qhca-smoke  open the device and allocate a PD from user space
  tools/qhca console 1             the serial console (leave with Ctrl-])
  tools/qhca down                  stop everything
EOT
