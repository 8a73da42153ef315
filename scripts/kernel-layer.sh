#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# The kernel layer of a guest image: the modules of images/modules.txt (and those they
# need) from a kernel's module tree, qhca.ko built for that kernel, and their modules.dep,
# as one cpio archive. scripts/build-image.sh makes one for the flavour's kernel, 'qhca up
# --kernel' one for a kernel you built.
#   kernel-layer.sh [--lenient] [--extra KO]... MODDIR KO LIBTOP OUT
#     --lenient  a module of modules.txt the kernel has neither as a module nor built in is
#                named in a warning, not an error (a kernel of your own with a small
#                configuration: the tiers that use it fail, the others run)
#     --extra KO another module built out of tree for that kernel (siw.ko, which Debian's
#                kernels lack: scripts/build-siw.sh), put beside qhca.ko without its debug
#                information, with the modules it needs from MODDIR; repeatable
#     MODDIR  the kernel's lib/modules/RELEASE (Debian's unpacked, or make modules_install's)
#     KO      qhca.ko for that kernel
#     LIBTOP  lib or usr/lib: where the image's base keeps lib/ (usr/lib when /lib is a link)
#     OUT     the cpio archive to write
set -euo pipefail
. "$(dirname "$0")/lib.sh"

lenient= extras=()
while [ $# -gt 0 ]; do
    case $1 in
    --lenient) lenient=1; shift ;;
    --extra) [ -f "${2:-}" ] || die "--extra ${2:-}: no such module file"
             extras+=("$2"); shift 2 ;;
    *) break ;;
    esac
done
[ $# = 4 ] || die "usage: kernel-layer.sh [--lenient] [--extra KO]... MODDIR KO LIBTOP OUT"
src=$1 ko=$2 libtop=$3 out=$4
rel=$(basename "$src")
[ -d "$src" ] || die "$src: no such module directory (a lib/modules/RELEASE)"
[ -f "$ko" ] || die "$ko: no qhca.ko (make driver, or make driver KDIR=YOUR-TREE)"
need_pkgs kmod cpio binutils
[ -f "$src/modules.dep" ] || die "$src has no modules.dep (make modules_install writes it)"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
dst="$tmp/root/lib/modules/$rel"
mkdir -p "$dst/extra"

want=() absent=()
have_module() {	# have_module NAME: the module and those it needs are wanted, or it is built
    # in; false if the kernel has neither
    local f
    f=$(grep -E "(^|/)${1//[-_]/[-_]}\.ko(\.[gx]z|\.zst)?:" "$src/modules.dep" | cut -d: -f1 | head -n1 || true)
    if [ -n "$f" ]; then
        want+=("$f" $(grep -E "^$f:" "$src/modules.dep" | cut -d: -f2-))
        return 0
    fi
    grep -qE "/${1//[-_]/[-_]}\.ko$" "$src/modules.builtin" 2>/dev/null
}
# An entry A|B names one module under the names kernels have given it: the first found. A
# module built in (modules.builtin) needs no file. An entry optional:A is taken if the kernel
# has it (siw: Debian's kernels do not; build-siw.sh's siw.ko comes with --extra instead).
for entry in $(grep -v '^#' "$QHCA_ROOT/images/modules.txt"); do
    found= optional=
    [ "${entry#optional:}" = "$entry" ] || { optional=1 entry=${entry#optional:}; }
    for m in ${entry//|/ }; do
        have_module "$m" && { found=1; break; }
    done
    [ -n "$found" ] || [ -n "$optional" ] || absent+=("${entry//|/ or }")
done
# The modules the out-of-tree ones need (modinfo's depends) must be in the kernel.
for x in "${extras[@]}"; do
    for m in $(modinfo -F depends "$x" | tr , ' '); do
        have_module "$m" || die "$x needs $m, which linux $rel has neither as a module nor built in"
    done
done
if [ ${#absent[@]} -gt 0 ]; then
    msg="linux $rel has neither as modules nor built in: ${absent[*]} (docs/flavours.md lists the options qhca and the tests need)"
    [ -n "$lenient" ] || die "$msg"
    echo "qhca: warning: $msg" >&2
fi
# The names come from the directory's modules.dep: each must be a relative path below it,
# without "..", naming a regular file that really is inside it (no link out of it), so that
# a crafted directory can neither write beside the layer nor put the host's files in it.
real_src=$(realpath -e "$src")
inside() {	# inside NAME: $src/NAME is a regular file of the module tree
    case /$1/ in */../*|*/./*|//*) return 1 ;; esac
    [[ $1 =~ ^[A-Za-z0-9_.+/-]+$ ]] || return 1
    [ -f "$src/$1" ] && [ ! -L "$src/$1" ] || return 1
    case $(realpath -e "$src/$1") in "$real_src"/*) return 0 ;; esac
    return 1
}
for f in $(printf '%s\n' "${want[@]}" | sort -u); do
    inside "$f" || die "$src/modules.dep names $f: not a module file inside $src"
    mkdir -p "$dst/$(dirname "$f")"
    cp "$src/$f" "$dst/$f"
done
for f in modules.order modules.builtin modules.builtin.modinfo; do
    if inside "$f"; then cp "$src/$f" "$dst/"; fi
done
cp "$ko" "$dst/extra/qhca.ko"
for x in "${extras[@]}"; do
    [ "$(modinfo -F vermagic "$x" | cut -d' ' -f1)" = "$rel" ] ||
        die "$x is not built for linux $rel (its vermagic: $(modinfo -F vermagic "$x"))"
    # Debian's kernels have DWARF on, so a module built against their headers carries about
    # 6 MB of it, which each guest would hold in RAM (the newest flavour's image then no
    # longer unpacks in 1 GiB); Debian's own modules come without it.
    strip --strip-debug -o "$dst/extra/$(basename "$x")" "$x" || die "strip $x failed"
done
depmod -b "$tmp/root" "$rel"
mkdir -p "$tmp/layer/$(dirname "$libtop")"
mv "$tmp/root/lib" "$tmp/layer/$libtop"
(cd "$tmp/layer" && find . | LC_ALL=C sort | cpio -o -H newc --quiet) > "$out.tmp"
mv "$out.tmp" "$out"
