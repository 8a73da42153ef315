#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Build the qhca rdma-core provider (libqhca-rdmavN.so, N the provider ABI of the guests'
# libibverbs) for the flavour's guests (QHCA_FLAVOUR), inside the flavour's build root.
#
# It is built in Debian's source of the rdma-core the guests run. Where the archive lacks
# that source (some mirrors have no rdma-core_44.0.orig.tar.gz, Debian 12's), another
# rdma-core source with the same provider ABI (IBVERBS_PRIVATE_N, the same struct
# verbs_context_ops) is used, and the public verbs headers come from the guests' own
# libibverbs-dev either way, so that structures the provider embeds (ibv_qp_ex grew in 56)
# have the layout of the guests' libibverbs. Prints "provider: PATH".
set -euo pipefail
. "$(dirname "$0")/lib.sh"

bash "$QHCA_ROOT/scripts/setup-apt.sh"
buildroot

# The guests' libibverbs: its version and provider ABI.
gver=$(dpkg-query --admindir="$BR/var/lib/dpkg" -W -f='${Version}' libibverbs-dev)
pabi=$(ls "$BR"/usr/lib/x86_64-linux-gnu/libibverbs/ | sed -n 's/.*-rdmav\([0-9]*\)\.so$/\1/p' | sort -u | head -n1)
[ -n "$pabi" ] || die "the $QHCA_FLAVOUR build root has no rdma-core providers to read the provider ABI from"

dl="$QHCA_CACHE/dl/rdma-core"
mkdir -p "$dl"
src_pabi() { tar -xzOf "$1" --wildcards '*/CMakeLists.txt' 2>/dev/null |
             sed -n 's/^set(IBVERBS_PABI_VERSION "\([0-9]*\)").*/\1/p' | head -n1; }
up=${gver#*:} up=${up%-*}
tarball="$dl/rdma-core_$up.orig.tar.gz"
if [ ! -f "$tarball" ]; then
    step "provider: downloading Debian's rdma-core $gver source"
    (cd "$dl" && qapt source --download-only "rdma-core=$gver" 2>&1 | grep -E '^(Fetched|E:)' |
        sed 's/^/    /') || true
fi
if [ ! -f "$tarball" ]; then
    # Another source with the same provider ABI, newest first.
    for v in $(qapt_cache showsrc rdma-core 2>/dev/null | sed -n 's/^Version: //p' | sort -rV | uniq); do
        u=${v#*:} u=${u%-*}
        [ -f "$dl/rdma-core_$u.orig.tar.gz" ] ||
            (cd "$dl" && qapt source --download-only "rdma-core=$v" > /dev/null 2>&1) || true
        if [ -f "$dl/rdma-core_$u.orig.tar.gz" ] && [ "$(src_pabi "$dl/rdma-core_$u.orig.tar.gz")" = "$pabi" ]; then
            tarball="$dl/rdma-core_$u.orig.tar.gz"
            echo "provider: no rdma-core $up source in the archive; rdma-core $u has the same provider ABI $pabi" >&2
            break
        fi
    done
fi
[ -f "$tarball" ] || die "no rdma-core source with provider ABI $pabi could be downloaded; check 'apt-cache showsrc rdma-core'"
ver=$(basename "$tarball" | sed -E 's/rdma-core_([0-9.]+)\.orig.*/\1/')
[ "$(src_pabi "$tarball")" = "$pabi" ] || die "rdma-core $ver's provider ABI is not the guests' ($pabi)"
src="$FL_DIR/work/rdma-core-$ver"
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
# The guests' public verbs headers (their libibverbs-dev, in the build root).
gi="$src/providers/qhca/guest-include/infiniband"
mkdir -p "$gi"
for h in verbs.h verbs_api.h ib_user_ioctl_verbs.h; do
    cmp -s "$BR/usr/include/infiniband/$h" "$gi/$h" || cp "$BR/usr/include/infiniband/$h" "$gi/"
done

inner="/work/rdma-core-$ver/build"
if [ ! -f "$src/build/build.ninja" ]; then
    step "provider: configuring rdma-core $ver"
    mkdir -p "$src/build"
    in_buildroot sh -c "cd $inner && cmake -GNinja -DNO_MAN_PAGES=1 -DNO_PYVERBS=1 -DENABLE_STATIC=0 \
        -DCMAKE_BUILD_TYPE=RelWithDebInfo .. > cmake.log 2>&1" ||
        { tail -n 20 "$src/build/cmake.log"; rm -f "$src/build/build.ninja"; die "rdma-core cmake failed; log: $src/build/cmake.log"; }
fi
lib="libqhca-rdmav$pabi.so"
step "provider: building $lib (rdma-core $ver, for the $QHCA_FLAVOUR guests' libibverbs $gver)"
NINJA_IN_BUILDROOT=$inner ninja_progress "$src/build" "lib/$lib"
ln -sfn "$src/build/lib/$lib" "$FL_DIR/provider.so"
echo "provider: $src/build/lib/$lib"
