# SPDX-License-Identifier: GPL-2.0-or-later
# Shared helpers for qhca build scripts. Sourced, not run.
QHCA_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
QHCA_CACHE=${QHCA_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/qhca}
export QHCA_ROOT QHCA_CACHE
mkdir -p "$QHCA_CACHE"

step() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }
die() { printf 'qhca: error: %s\n' "$*" >&2; exit 1; }

# Install Debian packages that are not installed yet. Non-root users get the command.
need_pkgs() {
    local missing=() p
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    if [ "$(id -u)" != 0 ]; then
        die "missing packages; run: sudo apt-get install -y ${missing[*]}"
    fi
    step "apt: installing ${missing[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" \
        2>&1 | grep -E '^(Setting up|E:)' | sed 's/^/    /' || true
    for p in "${missing[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
            die "could not install $p (see apt-get output above)"
    done
}

# Install packages from bookworm-backports: need_backports PKG MIN_VERSION [PKG...]
# (the first package is checked against MIN_VERSION, the others only for presence).
need_backports() {
    local first=$1 min=$2; shift 2
    local have
    have=$(dpkg-query -W -f='${Version}' "$first" 2>/dev/null || true)
    if [ -n "$have" ] && dpkg --compare-versions "$have" ge "$min"; then
        local p ok=1
        for p in "$@"; do
            dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || ok=0
        done
        [ $ok = 1 ] && return 0
    fi
    [ "$(id -u)" = 0 ] || die "missing packages; run: sudo apt-get install -y -t bookworm-backports $first $*"
    step "apt: installing $first $* from bookworm-backports"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
        -t bookworm-backports "$first" "$@" 2>&1 | grep -E '^(Setting up|E:)' | sed 's/^/    /' || true
    have=$(dpkg-query -W -f='${Version}' "$first" 2>/dev/null || true)
    [ -n "$have" ] && dpkg --compare-versions "$have" ge "$min" ||
        die "$first >= $min is needed (have '${have:-none}'); is bookworm-backports in apt?"
}

# Run ninja on TARGETS in DIR, printing a progress line every 5% instead of every step.
ninja_progress() {
    local dir=$1; shift
    local log="$dir/ninja.log.txt"
    NINJA_STATUS='[%f/%t] ' ninja -C "$dir" "$@" > "$log" 2>&1 &
    local pid=$! last=-1
    while kill -0 "$pid" 2>/dev/null; do
        sleep 5
        local line pct
        line=$(grep -o '^\[[0-9]*/[0-9]*\]' "$log" | tail -n1 | tr -d '[]' || true)
        if [ -n "$line" ]; then
            pct=$(( ${line%/*} * 100 / ${line#*/} ))
            if [ $(( pct / 5 )) -ne $(( last / 5 )) ]; then
                printf '    %3d%%  (%s steps)\n' "$pct" "$line" >&2
                last=$pct
            fi
        fi
    done
    if ! wait "$pid"; then
        grep -E 'error|FAILED' -A5 "$log" | head -n 60 >&2
        die "build failed in $dir; full log: $log"
    fi
}

# The guest kernel: Debian's 6.12 from bookworm-backports (QHCA_KERNEL overrides, e.g.
# QHCA_KERNEL=6.12.95+deb12). Prints the ABI name such as 6.12.95+deb12.
guest_kernel_abi() {
    if [ -n "${QHCA_KERNEL:-}" ]; then
        echo "$QHCA_KERNEL"
        return
    fi
    local dep
    dep=$(apt-cache show linux-image-amd64/bookworm-backports 2>/dev/null |
          sed -n 's/^Depends: linux-image-\([^ ]*\)-amd64 .*/\1/p' | sort -V | tail -n1)
    [ -n "$dep" ] || die "cannot find linux-image-amd64 in bookworm-backports; run scripts/setup-apt.sh"
    echo "$dep"
}

# Fetch and unpack the guest kernel image, headers and kbuild into $QHCA_CACHE/kernel-ABI/.
# Sets KERNEL_DIR (the unpacked root), KERNEL_REL (uname -r) and KDIR (the headers).
fetch_guest_kernel() {
    local abi
    abi=$(guest_kernel_abi)
    KERNEL_REL="$abi-amd64"
    KERNEL_DIR="$QHCA_CACHE/kernel-$abi"
    KDIR="$KERNEL_DIR/root/usr/src/linux-headers-$KERNEL_REL"
    if [ -f "$KERNEL_DIR/.done" ]; then
        [ -f "$KERNEL_DIR/root/lib/modules/$KERNEL_REL/modules.dep" ] ||
            depmod -b "$KERNEL_DIR/root" "$KERNEL_REL"
        return 0
    fi
    need_pkgs kmod
    step "kernel: downloading Debian's linux $KERNEL_REL image and headers"
    rm -rf "$KERNEL_DIR" && mkdir -p "$KERNEL_DIR/dl" "$KERNEL_DIR/root"
    (cd "$KERNEL_DIR/dl" && apt-get download -q "linux-image-$KERNEL_REL" \
        "linux-headers-$KERNEL_REL" "linux-headers-$abi-common" "linux-kbuild-$abi" 2>&1 |
        grep -E '^(Get|Fetched|E:)' | sed 's/^/    /') || true
    local d n=0
    for d in "$KERNEL_DIR"/dl/*.deb; do
        [ -f "$d" ] || continue
        dpkg-deb -x "$d" "$KERNEL_DIR/root"
        n=$((n + 1))
    done
    [ $n = 4 ] || die "kernel packages for $KERNEL_REL could not be downloaded (got $n of 4)"
    # The headers' Makefile includes the common headers by absolute path: point it here.
    sed -i "s#/usr/src/#$KERNEL_DIR/root/usr/src/#" "$KDIR/Makefile"
    rm -rf "$KERNEL_DIR/dl"
    depmod -b "$KERNEL_DIR/root" "$KERNEL_REL"
    touch "$KERNEL_DIR/.done"
}
