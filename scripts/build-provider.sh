#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Build the qhca rdma-core provider (libqhca-rdmav34.so) inside Debian's rdma-core source.
#
# The guest runs rdma-core 44 (bookworm). Its source is used when the archive serves it;
# when it does not (some mirrors lack rdma-core_44.0.orig.tar.gz) the trixie source (56.x)
# is used instead: both export the same provider ABI, IBVERBS_PRIVATE_34, and the same
# struct verbs_context_ops layout. The public verbs headers come from bookworm's
# libibverbs-dev either way, so that structures the provider embeds (ibv_qp_ex grew in
# 56) have the layout of the guest's libibverbs 44.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

bash "$QHCA_ROOT/scripts/setup-apt.sh"
need_pkgs cmake ninja-build pkg-config libnl-3-dev libnl-route-3-dev libudev-dev python3 \
    libibverbs-dev

dl="$QHCA_CACHE/dl/rdma-core"
mkdir -p "$dl"
tarball=$(ls "$dl"/rdma-core_*.orig.tar.gz 2>/dev/null | sort -V | head -n1 || true)
if [ -z "$tarball" ]; then
    for suite in bookworm trixie; do
        step "provider: downloading Debian's rdma-core source ($suite)"
        (cd "$dl" && apt-get source -q --download-only "rdma-core/$suite" 2>&1 |
            grep -E '^(Fetched|E:)' | sed 's/^/    /') || true
        tarball=$(ls "$dl"/rdma-core_*.orig.tar.gz 2>/dev/null | sort -V | head -n1 || true)
        [ -n "$tarball" ] && break
    done
    [ -n "$tarball" ] || die "no rdma-core source could be downloaded; check 'apt-cache showsrc rdma-core'"
fi
ver=$(basename "$tarball" | sed -E 's/rdma-core_([0-9.]+)\.orig.*/\1/')
src="$QHCA_CACHE/rdma-core-$ver"
if [ ! -f "$src/.qhca-unpacked" ]; then
    step "provider: unpacking rdma-core $ver"
    rm -rf "$src" && mkdir -p "$src"
    tar -xzf "$tarball" -C "$src" --strip-components=1
    # Hook providers/qhca into the tree's provider list.
    sed -i 's#^add_subdirectory(providers/erdma)#add_subdirectory(providers/erdma)\nadd_subdirectory(providers/qhca)#' "$src/CMakeLists.txt"
    grep -q 'providers/qhca' "$src/CMakeLists.txt" || die "cannot hook providers/qhca into rdma-core $ver"
    touch "$src/.qhca-unpacked"
fi

mkdir -p "$src/providers/qhca/abi"
for f in "$QHCA_ROOT"/guest-provider/*; do
    cmp -s "$f" "$src/providers/qhca/$(basename "$f")" || cp "$f" "$src/providers/qhca/"
done
# Sources no longer in guest-provider/ (a file split or renamed) leave the copy too.
for f in "$src"/providers/qhca/*.[ch] "$src"/providers/qhca/CMakeLists.txt; do
    if [ -e "$f" ] && [ ! -e "$QHCA_ROOT/guest-provider/$(basename "$f")" ]; then
        rm -f "$f"
    fi
done
for f in "$QHCA_ROOT"/abi/*; do
    cmp -s "$f" "$src/providers/qhca/abi/$(basename "$f")" || cp "$f" "$src/providers/qhca/abi/"
done
# The guest's public verbs headers (bookworm's libibverbs-dev, the guest's rdma-core 44).
gi="$src/providers/qhca/guest-include/infiniband"
mkdir -p "$gi"
for h in verbs.h verbs_api.h ib_user_ioctl_verbs.h; do
    cmp -s "/usr/include/infiniband/$h" "$gi/$h" || cp "/usr/include/infiniband/$h" "$gi/"
done

build="$src/build"
if [ ! -f "$build/build.ninja" ]; then
    step "provider: configuring rdma-core $ver"
    mkdir -p "$build"
    (cd "$build" && cmake -GNinja -DNO_MAN_PAGES=1 -DNO_PYVERBS=1 -DENABLE_STATIC=0 \
        -DCMAKE_BUILD_TYPE=RelWithDebInfo .. > cmake.log 2>&1) ||
        { tail -n 20 "$build/cmake.log"; die "rdma-core cmake failed; log: $build/cmake.log"; }
fi
step "provider: building libqhca-rdmav34.so"
ninja_progress "$build" lib/libqhca-rdmav34.so
ln -sfn "$build/lib/libqhca-rdmav34.so" "$QHCA_CACHE/libqhca-rdmav34.so"
echo "provider: $build/lib/libqhca-rdmav34.so (rdma-core $ver source)"
