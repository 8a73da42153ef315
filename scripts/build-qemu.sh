#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Build qemu-system-x86_64 with the qhca device, and the qhca qtest.
#   build-qemu.sh [sanitize|fuzz]   sanitize: a second build with ASan and UBSan, for the
#                                   qtests; fuzz: QEMU's libFuzzer build (clang, ASan), for
#                                   generic-fuzz over the device's BARs and DMA
#                                   (qemu-fuzz-x86_64, see scripts/fuzz.sh)
#   QEMU_SRC=<dir>  use this QEMU 10.0 tree instead of Debian's source package
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

patches=("$QHCA_ROOT"/qemu-patches/*.patch)
patch_sum=$(cat "${patches[@]}" | sha256sum | cut -c1-12)

if [ -n "${QEMU_SRC:-}" ]; then
    src=$(cd "$QEMU_SRC" && pwd) || die "QEMU_SRC=$QEMU_SRC is not a directory"
    [ -f "$src/VERSION" ] && grep -q '^10\.0\.' "$src/VERSION" ||
        die "QEMU_SRC must be a QEMU 10.0.x tree (VERSION says $(cat "$src/VERSION" 2>/dev/null))"
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
    tarball=$(ls "$dl"/qemu_10.0.*.orig.tar.xz 2>/dev/null | sort -V | tail -n1 || true)
    if [ -z "$tarball" ]; then
        step "qemu: downloading Debian's QEMU 10.0 source package"
        (cd "$dl" && { apt-get source -q --download-only qemu/trixie ||
                       apt-get source -q --download-only qemu/bookworm-backports; } 2>&1 |
             grep -E '^(Get|Fetched|E:)' | sed 's/^/    /') || true
        tarball=$(ls "$dl"/qemu_10.0.*.orig.tar.xz 2>/dev/null | sort -V | tail -n1 || true)
        [ -n "$tarball" ] || die "no QEMU 10.0 source found in apt (trixie or bookworm-backports deb-src); run scripts/setup-apt.sh and check 'apt-cache showsrc qemu'"
    fi
    ver=$(basename "$tarball" | sed -E 's/qemu_([0-9.]+).*/\1/')
    src="$QHCA_CACHE/qemu-$ver-$patch_sum"
    if [ ! -f "$src/.qhca-patched" ]; then
        step "qemu: unpacking $(basename "$tarball") and applying qemu-patches/"
        rm -rf "$src.tmp" && mkdir -p "$src.tmp"
        tar -xf "$tarball" -C "$src.tmp" --strip-components=1
        for p in "${patches[@]}"; do
            patch -d "$src.tmp" -p1 -s -f < "$p" || die "$(basename "$p") does not apply to QEMU $ver"
        done
        touch "$src.tmp/.qhca-patched"
        rm -rf "$src" && mv "$src.tmp" "$src"
        # Older trees of other patch sets are not needed any more.
        for old in "$QHCA_CACHE"/qemu-10.0.*; do
            [ "$old" = "$src" ] || case "$old" in *-build) ;; *) rm -rf "$old" ;; esac
        done
    fi
    build="$QHCA_CACHE/qemu-build"
    [ "$flavour" = plain ] || build="$QHCA_CACHE/qemu-build-$flavour"
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
sync_dir "$QHCA_ROOT/abi" "$src/hw/qhca/abi"
cmp -s "$QHCA_ROOT/tests/qtest/qhca-test.c" "$src/tests/qtest/qhca-test.c" ||
    cp "$QHCA_ROOT/tests/qtest/qhca-test.c" "$src/tests/qtest/qhca-test.c"

# ccache's compiler wrappers first on PATH: rebuilds after a cache wipe are fast.
export PATH=/usr/lib/ccache:$PATH
export CCACHE_DIR=${CCACHE_DIR:-$QHCA_CACHE/ccache}
config_args=(--target-list=x86_64-softmmu --python=/usr/bin/python3
    --without-default-features --enable-tcg --enable-kvm --enable-slirp
    --disable-docs --disable-download --disable-install-blobs --enable-trace-backends=log)
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
    ln -sfn "$build" "$QHCA_CACHE/qemu-fuzz"
    echo "qemu: $build/qemu-fuzz-x86_64"
    exit 0
fi

step "qemu: building qemu-system-x86_64 and the qhca qtest ($flavour; cold build: 5-10 min on 2 cores)"
ninja_progress "$build" qemu-system-x86_64 tests/qtest/qhca-test
make -s -C "$build" pc-bios/optionrom/all > "$build/optionrom.log" 2>&1 ||
    { tail -n 20 "$build/optionrom.log"; die "building QEMU's option ROMs failed; log: $build/optionrom.log"; }
[ -f "$build/pc-bios/optionrom/linuxboot_dma.bin" ] || die "linuxboot_dma.bin was not built; see $build/optionrom.log"
if [ "$flavour" = sanitize ]; then
    ln -sfn "$build" "$QHCA_CACHE/qemu-sanitize"
else
    ln -sfn "$build" "$QHCA_CACHE/qemu"
fi
echo "qemu: $build/qemu-system-x86_64"
