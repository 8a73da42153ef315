#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Build the qhca guest kernel module against Debian's headers for the guest kernel.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

bash "$QHCA_ROOT/scripts/setup-apt.sh"
need_pkgs gcc-12 make libelf1 bc
fetch_guest_kernel

out="$QHCA_CACHE/driver-build"
mkdir -p "$out/guest-driver" "$out/abi"
for f in "$QHCA_ROOT"/guest-driver/* "$QHCA_ROOT"/abi/*; do
    dst="$out/$(basename "$(dirname "$f")")/$(basename "$f")"
    cmp -s "$f" "$dst" || cp "$f" "$dst"
done
step "driver: building qhca.ko for $KERNEL_REL"
make -s -C "$KDIR" M="$out/guest-driver" CONFIG_DEBUG_INFO_BTF_MODULES= modules 2>&1 | grep -v '^  ' || true
[ -f "$out/guest-driver/qhca.ko" ] || die "qhca.ko was not built; see the compiler output above"

echo "driver: $out/guest-driver/qhca.ko"
