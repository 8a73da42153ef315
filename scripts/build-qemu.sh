#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Build qemu-system-x86_64 with the qhca device, and the qhca qtest.
#   build-qemu.sh [sanitize|fuzz]   sanitize: a second build with ASan and UBSan, for the
#                                   qtests; fuzz: QEMU's libFuzzer build (clang, ASan), for
#                                   generic-fuzz over the device's BARs and DMA
#                                   (qemu-fuzz-x86_64, see scripts/fuzz.sh)
#   QEMU=<series>   the QEMU to build: 10.0 (default, Debian 13's) or a newer series Debian's
#                   source packages have (10.2, 11.1, ...); 'newest' picks the highest
#   QEMU_SRC=<dir>  use this QEMU tree (10.0 or newer) instead of Debian's source package
# Everything is cached under $QHCA_CACHE; a second run rebuilds only what changed.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

flavour=${1:-plain}
bash "$QHCA_ROOT/scripts/setup-apt.sh"
# gcc-multilib: QEMU's configure builds the x86 option ROMs (linuxboot_dma.bin for -kernel)
# only when the host compiler can emit 32-bit code; Debian's +ds source ships no ROM images.
need_pkgs build-essential gcc-multilib seabios ccache ninja-build pkg-config flex bison bzip2 xz-utils dpkg-dev \
    python3-venv libglib2.0-dev libpixman-1-dev zlib1g-dev libslirp-dev libisal-dev
need_backports meson 1.5 python3-pycotap

# qemu_patches VERSION: qemu-patches/*.patch for every QEMU, then the series' own:
# qemu-patches/10.0/ up to 10.0.x, qemu-patches/10.1+/ from the 10.1 cycle (10.0.50) on.
qemu_patches() {
    patches=("$QHCA_ROOT"/qemu-patches/*.patch)
    if dpkg --compare-versions "$1" lt 10.0.50; then
        patches+=("$QHCA_ROOT"/qemu-patches/10.0/*.patch)
    else
        patches+=("$QHCA_ROOT"/qemu-patches/10.1+/*.patch)
    fi
    patch_sum=$(cat "${patches[@]}" | sha256sum | cut -c1-12)
}
series=${QEMU:-10.0}
sfx=""	# the build's and its link's suffix: none for 10.0 and QEMU_SRC, -SERIES otherwise

if [ -n "${QEMU_SRC:-}" ]; then
    src=$(cd "$QEMU_SRC" && pwd) || die "QEMU_SRC=$QEMU_SRC is not a directory"
    ver=$(cat "$src/VERSION" 2>/dev/null || true)
    dpkg --compare-versions "${ver:-0}" ge 10.0 ||
        die "QEMU_SRC must be a QEMU 10.0 or newer tree (VERSION says ${ver:-nothing})"
    qemu_patches "$ver"
    for p in "${patches[@]}"; do
        if patch -d "$src" -p1 -R --dry-run -s -f < "$p" >/dev/null 2>&1; then
            continue	# already applied
        fi
        step "qemu: applying $(basename "$p") to $src"
        patch -d "$src" -p1 -s -f < "$p" || die "$(basename "$p") does not apply to $src"
    done
    build="$QHCA_CACHE/qemu-build-$(echo "$src" | sha256sum | cut -c1-8)"
    [ "$flavour" = plain ] || build="$build-$flavour"
else
    dl="$QHCA_CACHE/dl/qemu"
    mkdir -p "$dl"
    # The source versions of every suite qapt knows (scripts/lib.sh), e.g. 1:11.1.3+ds-1.
    srcvers=$(qapt_cache showsrc qemu 2>/dev/null | sed -n 's/^Version: //p' | sort -uV)
    # The series to try, newest first: the one asked for, or with 'newest' every series the
    # archive lists (a listed source can still be missing from a mirror: the next is taken).
    if [ "$series" = newest ]; then
        tries=$(sed -E 's/^[0-9]+://; s/^([0-9]+\.[0-9]+).*/\1/' <<<"$srcvers" | sort -uV | tac)
    else
        tries=$series
    fi
    tarball= unavailable=()
    for series in $tries; do
        dpkg --compare-versions "$series" ge 10.0 || continue
        tarball=$(ls "$dl"/qemu_"$series".*.orig.tar.xz 2>/dev/null | sort -V | tail -n1 || true)
        [ -z "$tarball" ] || break
        v=$(grep -E "^([0-9]+:)?${series//./\\.}\." <<<"$srcvers" | tail -n1 || true)
        [ -n "$v" ] || die "no QEMU $series source in apt (have: $(echo $srcvers))"
        step "qemu: downloading Debian's QEMU source package $v"
        (cd "$dl" && qapt source -q --download-only "qemu=$v" 2>&1 |
             grep -E '^(Get|Fetched|E:)' | sed 's/^/    /') || true
        tarball=$(ls "$dl"/qemu_"$series".*.orig.tar.xz 2>/dev/null | sort -V | tail -n1 || true)
        [ -n "$tarball" ] && break
        echo "    QEMU $v: its source could not be downloaded from this archive" >&2
        unavailable+=("$v")
    done
    [ -n "$tarball" ] || die "no QEMU source could be downloaded (tried: $(echo $tries))"
    ver=$(basename "$tarball" | sed -E 's/qemu_([0-9.]+).*/\1/')
    qemu_patches "$ver"
    # One tree per version, unpacked and patched again when qemu-patches/ or the tarball
    # change: its path stays, so the builds keep their configuration and ccache finds what did
    # not change. The stamp names the tarball too: another tarball of the same version (a new
    # Debian upload) is unpacked again.
    src="$QHCA_CACHE/qemu-$ver"
    stamp="$patch_sum $(basename "$tarball")"
    if [ "$(cat "$src/.qhca-patched" 2>/dev/null)" != "$stamp" ]; then
        step "qemu: unpacking $(basename "$tarball") and applying qemu-patches/"
        rm -rf "$src.tmp" && mkdir -p "$src.tmp"
        # --touch: every file gets the time of now, not the tarball's. With the times of the
        # tarball, a file that the old patches changed (and the build compiled) and the new ones
        # no longer change would be older than its object: ninja would keep the object of
        # the old patches. Now everything is rebuilt; ccache makes that cheap.
        tar -xf "$tarball" -C "$src.tmp" --strip-components=1 --touch
        for p in "${patches[@]}"; do
            patch -d "$src.tmp" -p1 -s -f < "$p" || die "$(basename "$p") does not apply to QEMU $ver"
        done
        echo "$stamp" > "$src.tmp/.qhca-patched"
        rm -rf "$src" && mv "$src.tmp" "$src"
        # Older trees (other versions of the series, or named by their patch set) go.
        for old in "$QHCA_CACHE"/qemu-"$series".*; do
            [ "$old" = "$src" ] || case "$old" in *-build) ;; *) rm -rf "$old" ;; esac
        done
    fi
    # 10.0 keeps the paths it had; another series builds beside it.
    [ "$series" = 10.0 ] || sfx="-$series"
    build="$QHCA_CACHE/qemu-build$sfx"
    [ "$flavour" = plain ] || build="$QHCA_CACHE/qemu-build$sfx-$flavour"
fi

# Copy the device model into the tree; unchanged files keep their time stamps.
sync_dir() {	# sync_dir FROM TO: make TO hold exactly FROM's regular files
    local from=$1 to=$2 f
    mkdir -p "$to"
    for f in "$from"/*; do
        [ -f "$f" ] || continue
        cmp -s "$f" "$to/$(basename "$f")" || cp "$f" "$to/"
    done
    for f in "$to"/*; do
        [ -f "$f" ] && [ ! -f "$from/$(basename "$f")" ] && rm -f "$f"
    done
    return 0
}
sync_dir "$QHCA_ROOT/hw-model/qemu" "$src/hw/qhca"
sync_dir "$QHCA_ROOT/hw-model/engine" "$src/hw/qhca/engine"
sync_dir "$QHCA_ROOT/wire" "$src/hw/qhca/wire"
sync_dir "$QHCA_ROOT/abi" "$src/hw/qhca/abi"
cmp -s "$QHCA_ROOT/tests/qtest/qhca-test.c" "$src/tests/qtest/qhca-test.c" ||
    cp "$QHCA_ROOT/tests/qtest/qhca-test.c" "$src/tests/qtest/qhca-test.c"

# ccache's compiler wrappers first on PATH: rebuilds after a cache wipe are fast.
export PATH=/usr/lib/ccache:$PATH
export CCACHE_DIR=${CCACHE_DIR:-$QHCA_CACHE/ccache}
config_args=(--target-list=x86_64-softmmu --python=/usr/bin/python3
    --without-default-features --enable-tcg --enable-kvm --enable-slirp
    --disable-docs --disable-download --disable-install-blobs --enable-trace-backends=log)
# From 10.1 on, Rust devices are an option: off, so that no Rust toolchain is needed; and
# the device trees of pc-bios/dtb, which Debian's source ships without their compiled form,
# are compiled (dtc).
if dpkg --compare-versions "$ver" ge 10.0.50; then
    config_args+=(--disable-rust)
    need_pkgs device-tree-compiler
fi
compilers=()
case $flavour in
# virtfs: 'qhca up --share' (9p on virtio; QEMU's xattr calls come from the C library).
plain) config_args+=(--enable-virtfs --enable-attr) ;;
sanitize) config_args+=(--enable-asan --enable-ubsan) ;;
fuzz) need_pkgs clang libclang-rt-14-dev
      config_args+=(--enable-fuzzing --enable-asan)
      compilers=(--cc=clang --cxx=clang++) ;;
*) die "build-qemu.sh: unknown flavour '$flavour' (plain, sanitize, fuzz)" ;;
esac
config_sum=$( (echo "$src"; command -v cc; echo optionrom; printf '%s\n' "${config_args[@]}" "${compilers[@]}") | sha256sum | cut -c1-12)
if [ ! -f "$build/build.ninja" ] || [ "$(cat "$build/.qhca-config" 2>/dev/null)" != "$config_sum" ]; then
    step "qemu: configuring in $build"
    rm -rf "$build" && mkdir -p "$build"
    (cd "$build" && "$src/configure" "${compilers[@]}" "${config_args[@]}" > configure.log 2>&1) ||
        { tail -n 30 "$build/configure.log"; die "QEMU configure failed; full log: $build/configure.log"; }
    echo "$config_sum" > "$build/.qhca-config"
fi

if [ "$flavour" = fuzz ]; then
    step "qemu: building qemu-fuzz-x86_64 (libFuzzer, ASan; cold build: 10-15 min on 2 cores)"
    ninja_progress "$build" qemu-fuzz-x86_64
    ln -sfn "$build" "$QHCA_CACHE/qemu-fuzz$sfx"
    echo "qemu: $build/qemu-fuzz-x86_64"
    exit 0
fi

step "qemu: building qemu-system-x86_64 and the qhca qtest ($flavour; cold build: 5-10 min on 2 cores)"
ninja_progress "$build" qemu-system-x86_64 tests/qtest/qhca-test
make -s -C "$build" pc-bios/optionrom/all > "$build/optionrom.log" 2>&1 ||
    { tail -n 20 "$build/optionrom.log"; die "building QEMU's option ROMs failed; log: $build/optionrom.log"; }
[ -f "$build/pc-bios/optionrom/linuxboot_dma.bin" ] || die "linuxboot_dma.bin was not built; see $build/optionrom.log"
# $QHCA_CACHE/qemu is the launcher's (10.0 unless QEMU_SRC says otherwise); another series
# is $QHCA_CACHE/qemu-SERIES (QHCA_QEMU_DIR=... tools/qhca up runs it).
if [ "$flavour" = sanitize ]; then
    ln -sfn "$build" "$QHCA_CACHE/qemu$sfx-sanitize"
else
    ln -sfn "$build" "$QHCA_CACHE/qemu$sfx"
fi
# Newer series the archive lists whose source could not be had (QEMU=newest fell back).
for v in "${unavailable[@]:-}"; do [ -z "$v" ] || echo "qemu-unavailable: $v"; done
echo "qemu-src: $src"
echo "qemu-version: $(cat "$src/VERSION")"
echo "qemu: $build/qemu-system-x86_64"
