#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Build the host-side C (engine library, unit tests, fabric) with meson.
#   build-host.sh [plain|sanitize]   sanitize: ASan + UBSan build for the unit tests
set -euo pipefail
. "$(dirname "$0")/lib.sh"

flavour=${1:-plain}
bash "$QHCA_ROOT/scripts/setup-apt.sh"
need_pkgs build-essential ninja-build pkg-config zlib1g-dev libisal-dev
need_backports meson 1.5 python3-pycotap

build="$QHCA_CACHE/host-build/$(echo "$QHCA_ROOT" | sha256sum | cut -c1-8)-$flavour"
opts=()
[ "$flavour" = sanitize ] && opts=(-Db_sanitize=address,undefined -Db_lundef=false)
if [ ! -f "$build/build.ninja" ]; then
    meson setup "$build" "$QHCA_ROOT" "${opts[@]}" > /dev/null ||
        die "meson setup failed for $build"
fi
ninja -C "$build" > "$build/ninja.out" 2>&1 || { cat "$build/ninja.out"; die "host build failed"; }
if [ "$flavour" = plain ]; then
    mkdir -p "$QHCA_CACHE/bin"
    install -m 755 "$build/qhca-fabric" "$QHCA_CACHE/bin/qhca-fabric"
fi
echo "$build"
