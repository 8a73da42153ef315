#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Build the qhca guest kernel module for the flavour's guest kernel (QHCA_FLAVOUR, QHCA_KERNEL)
# inside the flavour's build root, against Debian's headers for that kernel and with the
# compiler that kernel was built with; or with KDIR=TREE against a kernel tree you built.
# Prints "driver: PATH".
set -euo pipefail
. "$(dirname "$0")/lib.sh"

sync_files() {	# sync_files OUT: guest-driver/ and abi/ into OUT; unchanged files keep their times
    local f dst
    mkdir -p "$1/guest-driver" "$1/abi"
    for f in "$QHCA_ROOT"/guest-driver/* "$QHCA_ROOT"/abi/*; do
        dst="$1/$(basename "$(dirname "$f")")/$(basename "$f")"
        cmp -s "$f" "$dst" || cp "$f" "$dst"
    done
}

# --kdir TREE: against a kernel tree you built (make driver KDIR=...), with this machine's
# compiler, into $QHCA_CACHE/driver-kdir/RELEASE ('qhca up --kernel' finds it there).
KDIR=
if [ "${1:-}" = --kdir ]; then
    KDIR=${2:-}
    [ -n "$KDIR" ] || die "--kdir needs a kernel tree"
elif [ $# -gt 0 ]; then
    die "usage: build-driver.sh [--kdir TREE]"
fi
if [ -n "$KDIR" ]; then
    [ -f "$KDIR/Makefile" ] || die "KDIR=$KDIR is no kernel tree (no Makefile)"
    # The release the kernel reports (uname -r), as the tree's build wrote it.
    rel=$(sed -n 's/^#define UTS_RELEASE "\(.*\)"/\1/p' "$KDIR/include/generated/utsrelease.h" 2>/dev/null)
    [ -n "$rel" ] || die "KDIR=$KDIR is not built or prepared (no include/generated/utsrelease.h): run make there first"
    [[ $rel =~ ^[A-Za-z0-9][A-Za-z0-9._+~-]*$ ]] || die "KDIR=$KDIR: its release '$rel' is no kernel release"
    out="$QHCA_CACHE/driver-kdir/$rel"
    need_pkgs make gcc bc
    sync_files "$out"
    step "driver: building qhca.ko for $rel against $KDIR"
    rm -f "$out/guest-driver/qhca.ko"
    make -s -C "$KDIR" M="$out/guest-driver" modules 2>&1 | grep -v '^  ' || true
    [ -f "$out/guest-driver/qhca.ko" ] || die "qhca.ko was not built against $KDIR; see the compiler output above"
    echo "driver: $out/guest-driver/qhca.ko"
    exit 0
fi

bash "$QHCA_ROOT/scripts/setup-apt.sh"
buildroot
fetch_guest_kernel
buildroot_headers "$KERNEL_REL"

out="$FL_DIR/work/driver-$KERNEL_REL"
sync_files "$out"
step "driver: building qhca.ko for $KERNEL_REL ($QHCA_FLAVOUR build root)"
rm -f "$out/guest-driver/qhca.ko"
in_buildroot make -s -C "/usr/src/linux-headers-$KERNEL_REL" M="/work/driver-$KERNEL_REL/guest-driver" \
    CONFIG_DEBUG_INFO_BTF_MODULES= modules 2>&1 | grep -v '^  ' || true
[ -f "$out/guest-driver/qhca.ko" ] || die "qhca.ko was not built for $KERNEL_REL; see the compiler output above"
echo "driver: $out/guest-driver/qhca.ko"
