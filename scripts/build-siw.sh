#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Build Linux siw (soft-iWARP, drivers/infiniband/sw/siw) as a module for the flavour's guest
# kernel (QHCA_FLAVOUR, QHCA_KERNEL), out of tree. Debian builds its kernels without it
# (# CONFIG_RDMA_SIW is not set), and iWARP needs a partner in the guests: siw's sources
# come from Debian's linux-source-X.Y of exactly the kernel's version (scripts/lib.sh,
# guest_kernel_source) and are built inside the flavour's build root against that kernel's
# Debian headers, with CONFIG_RDMA_SIW=m on make's command line, as build-driver.sh builds
# qhca.ko. Built again only when its inputs change (the source package, the headers, the
# compiler, this script). Prints "siw: PATH"; "siw: in-tree" when the kernel has siw itself.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

[ $# = 0 ] || die "usage: build-siw.sh (QHCA_FLAVOUR and QHCA_KERNEL choose the kernel)"

bash "$QHCA_ROOT/scripts/setup-apt.sh"
need_pkgs xz-utils kmod
buildroot
fetch_guest_kernel
# A kernel that has siw (built in, or a module of its own) needs none of this.
if kernel_has_module "$KERNEL_DIR/root/lib/modules/$KERNEL_REL" siw; then
    echo "siw: in-tree"
    exit 0
fi
buildroot_headers "$KERNEL_REL"
guest_kernel_source

hdr=$BR/usr/src/linux-headers-$KERNEL_REL
work=siw-$KERNEL_REL		# in the build root's /work
out=$FL_DIR/work/$work
ko=$out/drivers/infiniband/sw/siw/siw.ko
# The inputs: the source package's version, the kernel's configuration and symbol versions,
# the headers' and compiler's packages in the build root, this script.
sum=$( (echo "$KSRC_PKG $KSRC_VER $KERNEL_REL"; cat "$hdr/.config" "$hdr/Module.symvers" "$0"
        dpkg-query --admindir="$BR/var/lib/dpkg" -W -f='${Package} ${Version}\n' |
            grep -E '^(gcc|cpp|binutils|linux-headers|linux-kbuild)' || true) |
      sha256sum | cut -c1-12)
fresh() { [ "$(cat "$out/.sum" 2>/dev/null)" = "$sum" ] && [ -f "$ko" ]; }
if fresh; then
    echo "siw: $ko"
    exit 0
fi
exec 6> "$FL_DIR/.siw.lock"	# one build at a time; another may have made it meanwhile
flock 6
if fresh; then
    echo "siw: $ko"
    exit 0
fi

# Built beside the last one, which stays until this one is done (an image build may be
# reading it).
new=$out.new
step "siw: sources from Debian's $KSRC_PKG $KSRC_VER (drivers/infiniband/sw/siw, siw-abi.h)"
# siw's user ABI header, include/uapi/rdma/siw-abi.h, is in Debian's headers packages so far;
# the source's own copy (the same version) comes after them on the include path, for headers
# that lack it.
linux_source_files "$new" drivers/infiniband/sw/siw include/uapi/rdma/siw-abi.h
mkdir -p "$new/drivers/infiniband/sw/siw/uapi/rdma"
mv "$new/include/uapi/rdma/siw-abi.h" "$new/drivers/infiniband/sw/siw/uapi/rdma/"
rm -rf "$new/include"
# Kbuild is read before the source's Makefile, which it includes.
sdir=drivers/infiniband/sw/siw	# in the build directory, as in the tree
printf '%s\n' '# Written by scripts/build-siw.sh: the source'\''s ABI header, then its Makefile.' \
    'ccflags-y += -I$(src)/uapi' 'include $(src)/Makefile' > "$new/$sdir/Kbuild"

step "siw: building siw.ko for $KERNEL_REL ($QHCA_FLAVOUR build root, CONFIG_RDMA_SIW=m)"
log=$new/build.log
# CONFIG_DEBUG_INFO_BTF_MODULES off as for qhca.ko: the build root has no pahole.
if ! in_buildroot make -C "/usr/src/linux-headers-$KERNEL_REL" M="/work/$work.new/$sdir" \
        CONFIG_RDMA_SIW=m CONFIG_DEBUG_INFO_BTF_MODULES= modules > "$log" 2>&1 ||
   [ ! -f "$new/$sdir/siw.ko" ]; then
    grep -E 'error|Error|ERROR|undefined' -A3 "$log" | head -n 40 >&2
    die "siw.ko did not build for $KERNEL_REL from $KSRC_PKG $KSRC_VER; the log: $log"
fi
# The compiler's warnings, if any (pahole's version does not matter: no BTF is made).
grep -E 'warning:' "$log" | grep -v 'pahole version' | sed 's/^/    /' >&2 || true
# The module must be for this kernel: its vermagic is the kernel's release.
vermagic=$(modinfo -F vermagic "$new/$sdir/siw.ko")
[ "${vermagic%% *}" = "$KERNEL_REL" ] || die "siw.ko was built for '${vermagic%% *}', not" \
    "$KERNEL_REL: the headers in $hdr are not that kernel's"
echo "$sum" > "$new/.sum"
rm -rf "$out" && mv "$new" "$out"
echo "siw: $ko"
