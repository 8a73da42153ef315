#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# VM test of "your own kernel" (docs/flavours.md): qhca.ko built with 'make driver KDIR=TREE'
# against a kernel tree that is not the flavour's, and that kernel booted with 'up --kernel
# BZIMAGE --modules DIR' under the default flavour's userland; RDMA between two such guests.
#
# The tree (QHCA_KERNEL_FROM):
#   unpacked  (make check) an unpacked Debian build tree, Debian 12's 6.1: its headers,
#             kbuild, image and modules as the debian12 flavour fetches them, standing for a
#             tree you built
#   source    (make check-kernels) a kernel built here from Debian's linux source with qhca's
#             small configuration (scripts/build-kernel.sh, images/kernel.config): minutes
#             on 2 cores the first time, which make check should not spend (docs/flavours.md)
set -uo pipefail
. "$(dirname "$0")/lib.sh"
. "$root/scripts/lib.sh"

from=${QHCA_KERNEL_FROM:-unpacked}
work=$(mktemp -d /tmp/qhca-kernel.XXXXXX)
trap 'rm -rf "$work"' EXIT

case $from in
unpacked)
    export QHCA_FLAVOUR=debian12	# whose kernel and build root lend the tree
    flavour_init
    what="an unpacked Debian 6.1 tree, its image and its modules"
    # 6.1 unpacks Debian 13's initramfs (330 MiB with 6.1's uncompressed modules) only with
    # more than 1 GiB ("Initramfs unpacking failed: write error"); 6.12 and 7.x with 1 GiB.
    mem=1536 ;;
source)
    what="a kernel built from Debian's linux source with images/kernel.config"
    mem=1024 ;;
*)  echo "QHCA_KERNEL_FROM=$from: unpacked or source" >&2; exit 2 ;;
esac

# A tree like a developer's: the prepared headers of Debian's 6.1 (the build root has them,
# with the kbuild programs) behind a Makefile of our own, and the kernel's image and modules.
unpacked_tree() {
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
    printf 'tree: %s\nbzImage: %s\nmodules: %s\n' "$work/tree" "$work/bzImage" "$work/mods" > "$work/paths"
}
# Built from source, or taken from the cache when images/kernel.config and the source did not
# change (the build script decides).
source_tree() {
    local t0=$SECONDS
    bash "$root/scripts/build-kernel.sh" > "$work/paths" || return 1
    echo "# the kernel's build took $((SECONDS - t0)) s" >> "$work/paths"
}
check "$what" ${from}_tree || { finish; exit 1; }
grep '^#' "$work/paths"
tree=$(sed -n 's/^tree: //p' "$work/paths") bzimage=$(sed -n 's/^bzImage: //p' "$work/paths")
mods=$(sed -n 's/^modules: //p' "$work/paths")
rel=$(sed -n 's/^#define UTS_RELEASE "\(.*\)"/\1/p' "$tree/include/generated/utsrelease.h")
[ -n "$rel" ] || { echo "Bail out! no release in $tree/include/generated/utsrelease.h"; exit 1; }
rm -rf "${QHCA_CACHE:?}/driver-kdir/$rel"
check "make driver KDIR=TREE builds qhca.ko against it" eval '
    out=$(make -s -C "$root" driver KDIR="$tree" 2>&1); rc=$?; echo "$out"; [ $rc = 0 ] &&
    grep -q "driver: $QHCA_CACHE/driver-kdir/$rel/guest-driver/qhca.ko" <<<"$out" &&
    modinfo -F vermagic "$QHCA_CACHE/driver-kdir/$rel/guest-driver/qhca.ko" | grep -q "^${rel} "'
# The guests: the default flavour's userland on 6.1; on a kernel from source, the userland
# of the flavour whose source it is.
[ "$from" = source ] || unset QHCA_FLAVOUR
check "up --kernel without --modules is refused, and says why" eval '
    msg=$("$qhca" up -n 1 --kernel "$bzimage" 2>&1); [ $? != 0 ] && grep -q "needs --modules" <<<"$msg"'
# Another kernel than the modules': the flavour image's own kernel (Debian's) with them.
check "up --kernel with another kernel's --modules is refused, and says why" eval '
    msg=$("$qhca" up -n 1 --kernel "$QHCA_CACHE/flavour-debian13/image/vmlinuz" --modules "$mods" 2>&1)
    [ $? != 0 ] && grep -q "holds the modules of $rel" <<<"$msg"'
# A module directory whose modules.dep points outside it, or at a link out of it, is
# refused before anything is copied (scripts/kernel-layer.sh).
crafted() {	# crafted DEP_PATH [LINK_TARGET]: a --modules directory naming DEP_PATH as virtio_pci
    local d=$work/crafted/lib/modules/$rel
    rm -rf "$work/crafted" && mkdir -p "$d/kernel"
    echo "$1:" > "$d/modules.dep"
    [ -z "${2:-}" ] || ln -s "$2" "$d/$1"
    msg=$(bash "$root/scripts/kernel-layer.sh" --lenient "$d" "$QHCA_CACHE/driver-kdir/$rel/guest-driver/qhca.ko" lib "$work/layer.cpio" 2>&1)
    [ $? != 0 ] && grep -q "not a module file inside" <<<"$msg" && [ ! -e "$work/layer.cpio" ]
}
check "a --modules directory naming ../ or a link out of it is refused" eval '
    crafted ../../../../../tmp/virtio_pci.ko && crafted kernel/virtio_pci.ko /etc/hostname'
# A disk image of your own: a qcow2 that names a backing file or an external data file (a
# file of the host, here the launcher's ssh key, which the guest would read) is refused; the
# same header without them is taken (refused later only for want of anything else).
qcow2() {	# qcow2 FILE VERSION BACKING_NAME INCOMPATIBLE: a qcow2 header and nothing else
    python3 - "$@" << 'EOF2'
import struct, sys
path, version, backing, incompat = sys.argv[1], int(sys.argv[2]), sys.argv[3].encode(), int(sys.argv[4])
h = bytearray(4096)
struct.pack_into(">4sIQI", h, 0, b"QFI\xfb", version, 512 if backing else 0, len(backing))
struct.pack_into(">IQ", h, 20, 16, 1 << 30)	# cluster bits, size
struct.pack_into(">Q", h, 72, incompat)
h[512:512 + len(backing)] = backing
open(path, "wb").write(h)
EOF2
}
disk_refused() {	# disk_refused IMAGE WORDS: up --disk IMAGE fails, saying WORDS, booting nothing
    msg=$("$qhca" up -n 1 --disk "$1" 2>&1); rc=$?
    echo "$msg" | tail -n 2
    [ $rc != 0 ] && grep -q "$2" <<<"$msg" && ! grep -q "booting" <<<"$msg"
}
check "up --disk refuses a qcow2 with a backing file (the host's file in the guest)" eval '
    qcow2 "$work/back.qcow2" 3 "$QHCA_CACHE/ssh/id_ed25519" 0 &&
    disk_refused "$work/back.qcow2" "a qcow2 image with a backing file"'
check "up --disk refuses a qcow2 with an external data file" eval '
    qcow2 "$work/data.qcow2" 3 "" 4 && disk_refused "$work/data.qcow2" "external data file"'
check "the same qcow2 header without either is taken as qcow2" eval '
    qcow2 "$work/plain.qcow2" 3 "" 0 && qcow2 "$work/v2.qcow2" 2 "" 4 &&
    PYTHONPATH="$root/tools" python3 -c "import sys; from qhcatool.vms import disk_format
assert [disk_format(p) for p in sys.argv[1:]] == [\"qcow2\", \"qcow2\", \"raw\"]" \
        "$work/plain.qcow2" "$work/v2.qcow2" "$bzimage"'
vm_up 2 --mem "$mem" --kernel "$bzimage" --modules "$mods"
check "the guests run that kernel ($rel) with qhca.ko from KDIR loaded" eval '
    for i in 1 2; do
        [ "$("$qhca" exec $i -- uname -r)" = "$rel" ] || exit 1
        "$qhca" exec $i -- "grep -q ^qhca /proc/modules && ibv_devinfo -d qhca_0 | grep -q PORT_ACTIVE" || exit 1
    done'
check "ibv_rc_pingpong 4 KiB x 100 between them, data checked" pingpong ibv_rc_pingpong -s 4096 -n 100 -c
check "ib_write_bw between them" perf ib_write_bw -n 200
check "no kernel BUG, oops, warning or qhca error in either guest" eval 'kernel_log_clean 1 && kernel_log_clean 2'
vm_down
finish
