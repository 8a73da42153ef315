#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# VM test of "your own kernel" (docs/flavours.md): qhca.ko built with 'make driver KDIR=TREE'
# against a kernel tree that is not the flavour's, and that kernel booted with 'up --kernel
# BZIMAGE --modules DIR' under the default flavour's userland; RDMA between two such guests.
#
# The tree is an unpacked Debian build tree (Debian 12's 6.1: its headers, kbuild, image and
# modules, as the debian12 flavour fetches them), which stands for a tree you built: building
# a kernel from source takes longer than make check should (docs/flavours.md has the figure).
set -uo pipefail
. "$(dirname "$0")/lib.sh"
. "$root/scripts/lib.sh"

export QHCA_FLAVOUR=debian12	# whose kernel and build root lend the tree
flavour_init
work=$(mktemp -d /tmp/qhca-kernel.XXXXXX)
trap 'rm -rf "$work"' EXIT

# A tree like a developer's: the prepared headers of Debian's 6.1 (the build root has them,
# with the kbuild programs) behind a Makefile of our own, and the kernel's image and modules.
tree() {
    buildroot > /dev/null && fetch_guest_kernel > /dev/null && buildroot_headers "$KERNEL_REL" > /dev/null ||
        return 1
    local h=$BR/usr/src/linux-headers-$KERNEL_REL d
    mkdir -p "$work/tree" "$work/mods/lib/modules"
    echo "include $BR/usr/src/$(sed -n 's|^include /usr/src/||p' "$h/Makefile")" > "$work/tree/Makefile"
    for d in arch include scripts tools Module.symvers; do
        ln -s "$(readlink -f "$h/$d")" "$work/tree/$d"
    done
    cp -a "$KERNEL_DIR/root/lib/modules/$KERNEL_REL" "$work/mods/lib/modules/"
    cp "$KERNEL_IMAGE" "$work/bzImage"
}
check "an unpacked Debian 6.1 tree, its image and its modules" tree || { finish; exit 1; }
fetch_guest_kernel > /dev/null	# made above: its release, here
rel=$KERNEL_REL
rm -rf "$QHCA_CACHE/driver-kdir/$rel"
check "make driver KDIR=TREE builds qhca.ko against it" eval '
    out=$(make -s -C "$root" driver KDIR="$work/tree" 2>&1); rc=$?; echo "$out"; [ $rc = 0 ] &&
    grep -q "driver: $QHCA_CACHE/driver-kdir/$rel/guest-driver/qhca.ko" <<<"$out" &&
    modinfo -F vermagic "$QHCA_CACHE/driver-kdir/$rel/guest-driver/qhca.ko" | grep -q "^${rel} "'
unset QHCA_FLAVOUR	# the guests: the default flavour's userland on that kernel
check "up --kernel without --modules is refused, and says why" eval '
    msg=$("$qhca" up -n 1 --kernel "$work/bzImage" 2>&1); [ $? != 0 ] && grep -q "needs --modules" <<<"$msg"'
# 6.1 unpacks Debian 13's initramfs (330 MiB with 6.1's uncompressed modules) only with more
# than 1 GiB ("Initramfs unpacking failed: write error"); 6.12 and 7.x do with 1 GiB.
vm_up 2 --mem 1536 --kernel "$work/bzImage" --modules "$work/mods"
check "the guests run that kernel ($rel) with qhca.ko from KDIR loaded" eval '
    for i in 1 2; do
        [ "$("$qhca" exec $i -- uname -r)" = "$rel" ] || exit 1
        "$qhca" exec $i -- "grep -q ^qhca /proc/modules && ibv_devinfo -d qhca_0 | grep -q PORT_ACTIVE" || exit 1
    done'
check "ibv_rc_pingpong 4 KiB x 100 between them, data checked" pingpong ibv_rc_pingpong -s 4096 -n 100 -c
check "ib_write_bw between them" perf ib_write_bw -n 200
check "no kernel oops or qhca error" kernel_log_clean 1
vm_down
finish
