#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Build the qhca guest kernel module for the flavour's guest kernel (QHCA_FLAVOUR, QHCA_KERNEL),
# inside the flavour's build root against Debian's headers for that kernel, with the
# compiler that kernel was built with. Prints "driver: PATH".
set -euo pipefail
. "$(dirname "$0")/lib.sh"

bash "$QHCA_ROOT/scripts/setup-apt.sh"
buildroot
fetch_guest_kernel
buildroot_headers "$KERNEL_REL"

out="$FL_DIR/work/driver-$KERNEL_REL"
mkdir -p "$out/guest-driver" "$out/abi"
for f in "$QHCA_ROOT"/guest-driver/* "$QHCA_ROOT"/abi/*; do
    dst="$out/$(basename "$(dirname "$f")")/$(basename "$f")"
    cmp -s "$f" "$dst" || cp "$f" "$dst"
done
step "driver: building qhca.ko for $KERNEL_REL ($QHCA_FLAVOUR build root)"
rm -f "$out/guest-driver/qhca.ko"
in_buildroot make -s -C "/usr/src/linux-headers-$KERNEL_REL" M="/work/driver-$KERNEL_REL/guest-driver" \
    CONFIG_DEBUG_INFO_BTF_MODULES= modules 2>&1 | grep -v '^  ' || true
[ -f "$out/guest-driver/qhca.ko" ] || die "qhca.ko was not built for $KERNEL_REL; see the compiler output above"
echo "driver: $out/guest-driver/qhca.ko"
