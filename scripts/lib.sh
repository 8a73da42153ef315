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
    # NINJA_IN_BUILDROOT=INNER: DIR is INNER inside the flavour's build root; run ninja there.
    if [ -n "${NINJA_IN_BUILDROOT:-}" ]; then
        in_buildroot env NINJA_STATUS='[%f/%t] ' ninja -C "$NINJA_IN_BUILDROOT" "$@" > "$log" 2>&1 &
    else
        NINJA_STATUS='[%f/%t] ' ninja -C "$dir" "$@" > "$log" 2>&1 &
    fi
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

# ---------------------------------------------------------------- guest flavours
# The guests' Debian (docs/flavours.md), chosen by QHCA_FLAVOUR (make FLAVOUR=..., up --flavour):
#   debian13  Debian 13 (trixie) and its kernel, 6.12: the default
#   debian12  Debian 12 (bookworm) and its kernel, 6.1
#   newest    unstable's userland (rdma-core, UCX, libfabric, MPI) and the newest kernel of
#             trixie-backports and unstable (7.x)
# Each has its own build root (that Debian with compilers and -dev packages: the driver, the
# provider and the guest programs are built in it, against exactly what the guest runs) and its
# own image, in $QHCA_CACHE/flavour-NAME. QHCA_KERNEL=ABI (6.12.95+deb12, 7.3.4+deb13) boots
# another kernel of the flavour's kernel suites.
QHCA_FLAVOUR=${QHCA_FLAVOUR:-debian13}
FLAVOURS="debian13 debian12 newest"
flavour_init() {
    case $QHCA_FLAVOUR in
    debian13) FL_SUITES="trixie trixie-updates" FL_KSUITES="trixie trixie-backports"
              FL_KDEFAULT="trixie" ;;
    debian12) FL_SUITES="bookworm bookworm-updates" FL_KSUITES="bookworm bookworm-backports"
              FL_KDEFAULT="bookworm" ;;
    newest)   FL_SUITES="unstable" FL_KSUITES="unstable trixie-backports"
              FL_KDEFAULT="unstable trixie-backports" ;;
    *) die "QHCA_FLAVOUR=$QHCA_FLAVOUR: the flavours are $FLAVOURS" ;;
    esac
    FL_DIR=$QHCA_CACHE/flavour-$QHCA_FLAVOUR
    mkdir -p "$FL_DIR"
}

# The Debian archive and its keyring, from the entry scripts/setup-apt.sh wrote from this
# machine's own apt configuration: sets DEB_URI and DEB_KEY.
debian_archive() {
    local src=/etc/apt/sources.list.d/qhca.sources
    DEB_URI=$(sed -n 's/^URIs: //p' "$src" 2>/dev/null | head -n1)
    DEB_KEY=$(sed -n 's/^Signed-By: //p' "$src" 2>/dev/null | head -n1)
    [ -n "$DEB_URI" ] || die "no Debian URI in $src; run scripts/setup-apt.sh"
}

# deb_sources TYPES SUITES: deb822 apt sources of the archive for SUITES. The Release files
# of unstable, -updates and -backports are not checked for expiry: a mirror that is a
# snapshot serves them past their Valid-Until, and apt (mmdebstrap's with --error-on=any)
# refuses them; the stable releases' have no expiry to check.
deb_sources() {
    debian_archive
    local s stable="" rolling=""
    for s in $2; do
        case $s in bookworm|trixie) stable="$stable $s" ;; *) rolling="$rolling $s" ;; esac
    done
    _deb_stanza() {	# _deb_stanza TYPES SUITES EXTRA
        printf 'Types: %s\nURIs: %s\nSuites: %s\nComponents: main\nSigned-By: %s\n%s' \
            "$1" "$DEB_URI" "$2" "${DEB_KEY:-/usr/share/keyrings/debian-archive-keyring.gpg}" "$3"
    }
    [ -z "$stable" ] || _deb_stanza "$1" "${stable# }" ""
    [ -z "$stable" ] || [ -z "$rolling" ] || echo
    [ -z "$rolling" ] || _deb_stanza "$1" "${rolling# }" "Check-Valid-Until: no"$'\n'
}

# qapt / qapt_cache ARGS: apt-get / apt-cache on a private apt state in $QHCA_CACHE/apt that
# knows every suite the flavours use (deb and deb-src), so that the host's own apt stays as
# it is (a bookworm host never sees trixie's or unstable's packages as upgrades).
QAPT_SUITES="bookworm bookworm-updates bookworm-backports trixie trixie-updates trixie-backports unstable"
qapt_opts=()
qapt_setup() {
    [ ${#qapt_opts[@]} = 0 ] || return 0
    debian_archive
    local d=$QHCA_CACHE/apt want
    mkdir -p "$d"/{etc,lists/partial,cache/archives/partial}
    qapt_opts=(-o Dir::Etc::SourceList=/dev/null -o Dir::Etc::SourceParts="$d/etc"
               -o Dir::Etc::Preferences=/dev/null -o Dir::Etc::PreferencesParts="$d/etc"
               -o Dir::State::Lists="$d/lists" -o Dir::Cache="$d/cache"
               -o Dir::State::status=/dev/null -o APT::Architecture=amd64
               -o APT::Sandbox::User=root -q)
    want=$(deb_sources "deb deb-src" "$QAPT_SUITES")
    # Fresh lists once a day, or when the sources changed.
    if [ "$(cat "$d/etc/qhca.sources" 2>/dev/null)" != "$want" ] ||
       [ -z "$(find "$d/stamp" -mmin -1440 2>/dev/null)" ]; then
        printf '%s\n' "$want" > "$d/etc/qhca.sources"
        step "apt: the flavours' package lists ($QAPT_SUITES)"
        local out
        out=$(apt-get "${qapt_opts[@]}" update 2>&1)
        grep -E '^(E:|W:|Fetched)' <<<"$out" | sed 's/^/    /' || true
        [ -n "$(ls "$d/lists" | grep -v -e partial -e lock)" ] ||
            die "apt could not fetch the package lists from $DEB_URI"
        # A failed or partial update is tried again next time, not trusted for a day.
        grep -q '^E:' <<<"$out" || touch "$d/stamp"
    fi
}
qapt() { qapt_setup; apt-get "${qapt_opts[@]}" "$@"; }
qapt_cache() { qapt_setup; apt-cache "${qapt_opts[@]}" "$@"; }

# The flavour's guest kernel (QHCA_KERNEL overrides): prints its ABI, e.g. 6.12.117+deb13.
guest_kernel_abi() {
    if [ -n "${QHCA_KERNEL:-}" ]; then
        [[ $QHCA_KERNEL =~ ^[0-9][A-Za-z0-9.+~-]*$ ]] ||
            die "QHCA_KERNEL=$QHCA_KERNEL is no Debian kernel ABI (6.12.95+deb12, 7.3.4+deb13)"
        echo "$QHCA_KERNEL"
        return
    fi
    local s dep all="" memo=$QHCA_CACHE/apt/kernel-$QHCA_FLAVOUR
    qapt_setup
    # The answer stands until the package lists are fetched again (qapt_setup's stamp).
    if [ "$memo" -nt "$QHCA_CACHE/apt/stamp" ] && [ -s "$memo" ]; then
        cat "$memo"
        return
    fi
    for s in $FL_KDEFAULT; do
        dep=$(qapt_cache show "linux-image-amd64/$s" 2>/dev/null | grep '^Depends:' |
              grep -o 'linux-image-[^ ,]*-amd64 ' | sed 's/^linux-image-//; s/-amd64 $//' |
              sort -V | tail -n1 || true)
        all="$all $dep"
    done
    dep=$(printf '%s\n' $all | sort -V | tail -n1)
    [ -n "$dep" ] || die "cannot find linux-image-amd64 in $FL_KDEFAULT"
    echo "$dep" | tee "$memo"
}

# kernel_has_module MODDIR NAME: the kernel of the module tree MODDIR (lib/modules/RELEASE)
# has module NAME, as a module or built in.
kernel_has_module() {
    grep -qE "(^|/)$2\.ko(\.[gx]z|\.zst)?:" "$1/modules.dep" 2>/dev/null ||
        grep -qE "(^|/)$2\.ko\$" "$1/modules.builtin" 2>/dev/null
}

# KERNEL_IMAGE: the unpacked kernel's bzImage, /boot/vmlinuz-REL up to 6.x, beside its
# modules in /usr/lib/modules/REL/vmlinuz from 7.x.
kernel_image() {
    KERNEL_IMAGE=$KERNEL_DIR/root/boot/vmlinuz-$KERNEL_REL
    [ -f "$KERNEL_IMAGE" ] || KERNEL_IMAGE=$KERNEL_DIR/root/lib/modules/$KERNEL_REL/vmlinuz
}

# Fetch and unpack the guest kernel's image and modules into $QHCA_CACHE/kernel-ABI/root.
# Sets KERNEL_DIR (the unpacked root), KERNEL_REL (uname -r) and KERNEL_IMAGE.
fetch_guest_kernel() {
    local abi
    abi=$(guest_kernel_abi)
    KERNEL_REL="$abi-amd64"
    KERNEL_DIR="$QHCA_CACHE/kernel-$abi"
    if [ -f "$KERNEL_DIR/.done" ]; then
        [ -f "$KERNEL_DIR/root/lib/modules/$KERNEL_REL/modules.dep" ] ||
            depmod -b "$KERNEL_DIR/root" "$KERNEL_REL"
        kernel_image
        return 0
    fi
    need_pkgs kmod
    step "kernel: downloading Debian's linux $KERNEL_REL"
    rm -rf "$KERNEL_DIR" && mkdir -p "$KERNEL_DIR/dl" "$KERNEL_DIR/root"
    # From 7.x linux-image-REL is a metapackage of linux-binary-REL (the kernel),
    # linux-modules-REL and linux-base-REL: fetch those of its dependencies too.
    local pkgs
    pkgs="linux-image-$KERNEL_REL $(qapt_cache show "linux-image-$KERNEL_REL" 2>/dev/null |
        grep '^Depends:' | grep -o "linux-[a-z]*-$KERNEL_REL " | sort -u | xargs || true)"
    (cd "$KERNEL_DIR/dl" && qapt download $pkgs 2>&1 |
        grep -E '^(Get|Fetched|E:)' | sed 's/^/    /') || true
    local d
    for d in "$KERNEL_DIR"/dl/*.deb; do
        [ -f "$d" ] && dpkg-deb -x "$d" "$KERNEL_DIR/root"
    done
    # Debian 13's packages put modules in /usr/lib (merged /usr); lib/modules is the path used.
    [ -d "$KERNEL_DIR/root/lib" ] || ln -s usr/lib "$KERNEL_DIR/root/lib"
    kernel_image
    [ -f "$KERNEL_IMAGE" ] && [ -d "$KERNEL_DIR/root/lib/modules/$KERNEL_REL" ] ||
        die "the kernel $KERNEL_REL could not be downloaded ($pkgs; is $abi in $FL_KSUITES?" \
            "'QHCA_KERNEL=' picks the flavour's own)"
    rm -rf "$KERNEL_DIR/dl"
    depmod -b "$KERNEL_DIR/root" "$KERNEL_REL"
    touch "$KERNEL_DIR/.done"
}

# ---------------------------------------------------------------- the flavour's build root
# A Debian of the guests' release with compilers, the -dev packages of what the guests run and
# the guest kernel's headers (with the compiler that kernel was built with): the driver, the
# provider and the guest programs are built inside it, so each flavour's binaries match its
# libraries and kernel whatever Debian the host runs. $FL_DIR/buildroot; sets BR.
BR_PKGS="cmake ninja-build pkg-config python3 libnl-3-dev libnl-route-3-dev libudev-dev
  libibverbs-dev librdmacm-dev libucx-dev libfabric-dev libopenmpi-dev libmpich-dev kmod bc
  libelf-dev"
buildroot() {
    flavour_init
    qapt_setup
    BR=$FL_DIR/buildroot
    local suites sum
    suites=$(printf '%s\n' $FL_SUITES $FL_KSUITES | awk '!seen[$0]++' | xargs)
    sum=$(echo "$suites" $BR_PKGS "$DEB_URI" | sha256sum | cut -c1-12)
    [ "$(cat "$BR/.qhca-sum" 2>/dev/null)" = "$sum" ] && return 0
    need_pkgs mmdebstrap util-linux
    exec 8> "$FL_DIR/.buildroot.lock"
    flock 8
    if [ "$(cat "$BR/.qhca-sum" 2>/dev/null)" = "$sum" ]; then	# made while we waited
        exec 8>&-
        return 0
    fi
    step "buildroot: Debian $suites with compilers and -dev packages, for the $QHCA_FLAVOUR" \
         "guests (once: about 2-4 min, 1.5 GiB)"
    deb_sources deb "$suites" > "$FL_DIR/buildroot.sources"
    rm -rf "$BR.tmp"
    mmdebstrap --quiet --variant=buildd --mode=root --include="$(echo $BR_PKGS | tr ' ' ,)" \
        "${FL_SUITES%% *}" "$BR.tmp" "$FL_DIR/buildroot.sources" ||
        die "mmdebstrap of the $QHCA_FLAVOUR build root failed; sources: $FL_DIR/buildroot.sources"
    echo "$sum" > "$BR.tmp/.qhca-sum"
    rm -rf "$BR" && mv "$BR.tmp" "$BR"
    exec 8>&-
}

# in_buildroot CMD...: run CMD in the build root as root, with this tree at /qhca (read-only)
# and $FL_DIR/work at /work; the mounts live in a mount namespace of its own and end with CMD.
in_buildroot() {
    mkdir -p "$FL_DIR/work" "$BR/qhca" "$BR/work"
    unshare -m --fork sh -c '
        br=$1 root=$2 work=$3; shift 3
        mount -t proc proc "$br/proc" && mount --bind "$root" "$br/qhca" &&
        mount -o remount,bind,ro "$br/qhca" && mount --bind "$work" "$br/work" || exit 125
        exec chroot "$br" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 "$@"
    ' in_buildroot "$BR" "$QHCA_ROOT" "$FL_DIR/work" "$@"
}

# buildroot_headers REL: the headers of kernel REL in the build root (apt inside it).
buildroot_headers() {
    [ -f "$BR/usr/src/linux-headers-$1/Makefile" ] && return 0
    step "buildroot: headers of linux $1"
    exec 8> "$FL_DIR/.buildroot.lock"
    flock 8
    in_buildroot sh -c 'apt-get -q update > /dev/null && DEBIAN_FRONTEND=noninteractive \
        apt-get install -y -q -o Dpkg::Use-Pty=0 --no-install-recommends "linux-headers-$1"' \
        buildroot_headers "$1" 2>&1 |
        grep -E '^(Setting up|E:)' | sed 's/^/    /' || true
    exec 8>&-
    [ -f "$BR/usr/src/linux-headers-$1/Makefile" ] ||
        die "the headers of linux $1 could not be installed in $BR (apt output above)"
}

# ---------------------------------------------------------------- the guest kernel's source
# Debian's linux-source-X.Y of exactly the version of the guest kernel's linux-image package:
# the tree Debian built that kernel from, its patches applied, as one tar.xz. Downloaded once
# into $QHCA_CACHE/kernel-src/PKG-VERSION/ and shared: scripts/build-kernel.sh unpacks all of
# it (src/), scripts/build-siw.sh takes only the few files it needs. After fetch_guest_kernel;
# sets KSRC_PKG, KSRC_VER, KSRC_DIR and KSRC_TAR.
guest_kernel_source() {
    local major
    major=$(grep -oE '^[0-9]+\.[0-9]+' <<<"$KERNEL_REL") ||
        die "cannot tell the kernel series of $KERNEL_REL"
    KSRC_PKG=linux-source-$major
    KSRC_VER=$(qapt_cache show "linux-image-$KERNEL_REL" 2>/dev/null | sed -n 's/^Version: //p' |
        head -n1)
    [ -n "$KSRC_VER" ] || die "cannot find the version of linux-image-$KERNEL_REL in the" \
        "package lists ($FL_KSUITES); 'rm $QHCA_CACHE/apt/stamp' fetches them again"
    KSRC_DIR=$QHCA_CACHE/kernel-src/$KSRC_PKG-$KSRC_VER
    KSRC_TAR=$KSRC_DIR/$KSRC_PKG.tar.xz
    mkdir -p "$KSRC_DIR"
}

# linux_source_tarball: $KSRC_TAR, downloaded unless it is there (one download at a time).
linux_source_tarball() {
    [ -s "$KSRC_TAR" ] && return 0
    exec 7> "$KSRC_DIR/.lock"
    flock 7
    if [ ! -s "$KSRC_TAR" ]; then
        step "kernel source: downloading Debian's $KSRC_PKG $KSRC_VER (about 150 MiB, once)"
        rm -rf "$KSRC_DIR/dl" && mkdir -p "$KSRC_DIR/dl"
        (cd "$KSRC_DIR/dl" && qapt download "$KSRC_PKG=$KSRC_VER" 2>&1 |
            grep -E '^(Get|Fetched|E:)' | sed 's/^/    /') || true
        local deb
        deb=$(ls "$KSRC_DIR"/dl/*.deb 2>/dev/null | head -n1)
        [ -n "$deb" ] || die "$KSRC_PKG $KSRC_VER, the source of the guest kernel $KERNEL_REL," \
            "could not be downloaded (apt's output above); it should be in $FL_KSUITES"
        dpkg-deb --fsys-tarfile "$deb" | tar -x -O --wildcards '*/linux-source-*.tar.xz' \
            > "$KSRC_TAR.tmp" && [ -s "$KSRC_TAR.tmp" ] ||
            die "$deb holds no linux-source-*.tar.xz"
        mv "$KSRC_TAR.tmp" "$KSRC_TAR"
        rm -rf "$KSRC_DIR/dl"
    fi
    exec 7>&-
}

# linux_source_tree: the whole tree unpacked in $KSRC_DIR/src.
linux_source_tree() {
    [ -f "$KSRC_DIR/src/Makefile" ] && return 0
    linux_source_tarball
    exec 7> "$KSRC_DIR/.lock"
    flock 7
    if [ ! -f "$KSRC_DIR/src/Makefile" ]; then
        step "kernel source: unpacking $KSRC_PKG $KSRC_VER"
        rm -rf "$KSRC_DIR/src" "$KSRC_DIR/src.tmp" && mkdir -p "$KSRC_DIR/src.tmp"
        tar -xJf "$KSRC_TAR" -C "$KSRC_DIR/src.tmp" --strip-components=1 ||
            die "unpacking $KSRC_TAR failed; remove it to download it again"
        [ -f "$KSRC_DIR/src.tmp/Makefile" ] || die "$KSRC_TAR holds no kernel tree"
        mv "$KSRC_DIR/src.tmp" "$KSRC_DIR/src"
    fi
    exec 7>&-
}

# linux_source_files DEST PATH...: the PATHs of the tree (files or directories, relative to
# its top) copied to DEST, as they are in the tree: from the unpacked tree if there is one,
# else only those out of the tarball (the whole of it is decompressed, but nothing else is
# written).
linux_source_files() {
    local dest=$1 p; shift
    rm -rf "$dest" && mkdir -p "$dest"
    if [ -f "$KSRC_DIR/src/Makefile" ]; then
        for p in "$@"; do
            [ -e "$KSRC_DIR/src/$p" ] || die "$KSRC_PKG $KSRC_VER has no $p"
            (cd "$KSRC_DIR/src" && cp -a --parents "$p" "$dest/") || die "copying $p failed"
        done
    else
        linux_source_tarball
        local pats=()
        for p in "$@"; do pats+=("*/$p"); done	# below the tarball's top directory
        tar -xJf "$KSRC_TAR" -C "$dest" --strip-components=1 --wildcards \
            --no-wildcards-match-slash "${pats[@]}" ||
            die "$KSRC_PKG $KSRC_VER lacks some of $* (tar's message above), or $KSRC_TAR" \
                "is damaged: remove it to download it again"
    fi
}
