#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Build a kernel from Debian's linux source (the linux-source package of the flavour's
# kernel, Debian's patches applied) with qhca's small configuration, images/kernel.config,
# as a developer builds their own tree: on this machine, with its compiler.
#   build-kernel.sh        prints "tree: DIR", "bzImage: FILE" and "modules: DIR"
# DIR is a tree for 'make driver KDIR=DIR' (an O= build directory), FILE and the modules
# directory for 'qhca up --kernel FILE --modules DIR'. Kept in $QHCA_CACHE/kernel-src and
# built again only when the source or the configuration changes; with ccache.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

flavour_init
fetch_guest_kernel > /dev/null	# the flavour's kernel: its source is the one built
guest_kernel_source		# linux-source-X.Y of its version (scripts/lib.sh)
major=${KSRC_PKG#linux-source-} ver=$KSRC_VER
conf=$QHCA_ROOT/images/kernel.config
dir=$KSRC_DIR
out=$dir/build
sum=$( (cat "$conf"; gcc --version | head -n1) | sha256sum | cut -c1-12)
report() { echo "tree: $out"; echo "bzImage: $out/arch/x86/boot/bzImage"; echo "modules: $dir/mods"; }
if [ "$(cat "$dir/.built" 2>/dev/null)" = "$sum" ]; then
    report
    exit 0
fi
need_pkgs make gcc bc flex bison libelf-dev libssl-dev cpio xz-utils kmod ccache

linux_source_tree	# $dir/src, downloaded and unpacked once

kmake() { make -C "$dir/src" O="$out" CC="ccache gcc" HOSTCC="ccache gcc" \
    KBUILD_BUILD_TIMESTAMP=qhca KBUILD_BUILD_USER=qhca KBUILD_BUILD_HOST=qhca "$@"; }
step "kernel: configuring $major with images/kernel.config (allnoconfig and qhca's options)"
rm -rf "$out" "$dir/mods" && mkdir -p "$out"
kmake -s allnoconfig KCONFIG_ALLCONFIG="$conf"
# An option the source does not have, or whose dependencies are off, is dropped silently by
# Kconfig: say which, since the guests would miss it.
missing=$(grep -E '^CONFIG_[A-Z0-9_]+=' "$conf" | while read -r l; do
    grep -qxF "$l" "$out/.config" || echo "${l%%=*}"; done)
[ -z "$missing" ] || die "linux $ver drops options of images/kernel.config: $(echo $missing)"

step "kernel: building $major ($(nproc) jobs; about 1 250 files: 7 minutes without ccache)"
log=$dir/build.log
kmake -j"$(nproc)" bzImage modules > "$log" 2>&1 &
pid=$!
while kill -0 "$pid" 2>/dev/null; do
    sleep 15
    printf '    %s files compiled\n' "$(grep -c '^  CC ' "$log" || true)" >&2
done
wait "$pid" || { grep -E 'error|Error' -B2 -A4 "$log" | head -n 40 >&2; die "the kernel build failed; log: $log"; }
kmake -s modules_install INSTALL_MOD_PATH="$dir/mods" > /dev/null
[ -f "$out/arch/x86/boot/bzImage" ] && [ -n "$(ls "$dir"/mods/lib/modules 2>/dev/null)" ] ||
    die "the build made no bzImage or module directory; log: $log"
echo "$sum" > "$dir/.built"
report
