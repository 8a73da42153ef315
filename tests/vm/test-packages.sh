#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# The packages of 'make deb' (docs/install-guest.md), installed with apt into a throwaway
# copy of a Debian 13 system (an overlay over the debian13 build root, which has Debian's
# kernel headers and is discarded after): DKMS builds and installs qhca.ko for the guests'
# kernel from the package's source, the provider loads against that Debian's libibverbs, and
# removing the packages removes both. No VM: the short version of tests/vm/disk-guest.sh
# (a stock Debian guest, DKMS in the guest, RDMA between two such guests: make
# check-kernels).
set -uo pipefail
. "$(dirname "$0")/lib.sh"
. "$root/scripts/lib.sh"

export QHCA_FLAVOUR=debian13
flavour_init
work=$(mktemp -d /tmp/qhca-packages.XXXXXX)
trap 'rm -rf "$work"' EXIT

# Made under a umask that lets nobody else read (a CI runner's, a developer's): the packages
# must not take it into the guests' file systems.
check "make deb: two packages (built under umask 077)" eval '
    (umask 077 && bash "$root/scripts/build-deb.sh") > "$work/deb.out" && cat "$work/deb.out" &&
    [ "$(grep -c "^deb: .*\.deb$" "$work/deb.out")" = 2 ] && mkdir -p "$work/debs" &&
    for f in $(sed -n "s/^deb: //p" "$work/deb.out"); do cp "$f" "$work/debs/"; done' ||
    { finish; exit 1; }

# deb_modes: every member of both packages (data and control) is root's, readable by all and
# writable by root only: directories and programs 0755, other files 0644.
deb_modes() {
    local f bad=0 list
    for f in "$work"/debs/*.deb; do
        list=$(dpkg-deb -c "$f" && dpkg-deb --ctrl-tarfile "$f" | tar -tvf -) ||
            { echo "$f: cannot list"; return 1; }
        grep -q . <<<"$list" || { echo "$f: lists nothing"; return 1; }
        if awk '!($1 ~ /^(drwxr-xr-x|-rwxr-xr-x|-rw-r--r--)$/ && $2 == "root/root") {print; n++}
                END {exit (n > 0)}' <<<"$list"; then
            echo "$(basename "$f"): $(wc -l <<<"$list") members, each root's, 0755 or 0644"
        else
            echo "$(basename "$f"): the members above have other modes or owners"
            bad=1
        fi
    done
    [ "$bad" = 0 ]
}
check "the packages' files are root's and 0755 or 0644, whatever the umask of make deb" deb_modes
buildroot > /dev/null
fetch_guest_kernel > /dev/null
buildroot_headers "$KERNEL_REL" > /dev/null
rel=$KERNEL_REL

# in_copy SCRIPT: SCRIPT run by sh in an overlay of the build root (its writes go to
# $work/upper and are discarded), the packages at /debs. In a PID namespace of its own, with
# its own /proc: the packages' maintainer scripts (and DKMS, apt) neither see nor signal the
# host's processes, and whatever they leave running ends with the namespace.
in_copy() {
    mkdir -p "$work/upper" "$work/wd" "$work/merged"
    unshare -m -p --fork --mount-proc sh -c '
        set -e
        mount -t overlay overlay -o "lowerdir=$1,upperdir=$2/upper,workdir=$2/wd" "$2/merged"
        mkdir -p "$2/merged/debs"
        mount --bind "$2/debs" "$2/merged/debs"
        mount -t proc proc "$2/merged/proc"
        exec chroot "$2/merged" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
            LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive sh -c "$3"
    ' in_copy "$BR" "$work" "$1"
}

check "the copy's processes are alone in their PID namespace (the host's unseen)" in_copy "
    set -e
    read -r comm < /proc/1/comm
    [ \"\$comm\" = sh ] || { echo \"PID 1 is \$comm, not the copy's sh\"; exit 1; }
    [ ! -e /proc/$$ ] || { echo 'the test script (host PID $$) is visible'; exit 1; }
    n=\$(ls -d /proc/[0-9]* | wc -l)
    [ \"\$n\" -le 5 ] || { echo \"\$n processes visible\"; exit 1; }"

check "apt-get install of both packages into a Debian 13 system (dkms from the archive)" in_copy '
    set -e
    apt-get -q update > /dev/null
    apt-get install -y -q /debs/qhca-dkms_*.deb /debs/ibverbs-provider-qhca_*.deb > /tmp/apt.log 2>&1 ||
        { tail -n 20 /tmp/apt.log; exit 1; }
    dpkg -s qhca-dkms ibverbs-provider-qhca | grep -c "^Status: install ok installed" | grep -qx 2'

check "DKMS builds and installs qhca.ko from the package for Debian's $rel" in_copy "
    set -e
    v=\$(dpkg-query -W -f='\${Version}' qhca-dkms)
    mkdir -p /lib/modules/$rel && ln -sfn /usr/src/linux-headers-$rel /lib/modules/$rel/build
    dkms build -m qhca -v \"\$v\" -k $rel > /tmp/dkms.log 2>&1 || { tail -n 30 /tmp/dkms.log; exit 1; }
    dkms install -m qhca -v \"\$v\" -k $rel > /tmp/dkms.log 2>&1 || { tail -n 30 /tmp/dkms.log; exit 1; }
    dkms status qhca | grep -q \"$rel.*: installed\"
    ko=\$(find /lib/modules/$rel/updates -name 'qhca.ko*' | head -n 1)
    [ -n \"\$ko\" ] || { echo 'no qhca.ko in /lib/modules/$rel/updates'; exit 1; }
    modinfo -F vermagic \"\$ko\" | grep -q '^$rel ' || { echo \"\$ko: not built for $rel\"; exit 1; }
    modinfo -F alias \"\$ko\" | grep -qi 'v00001AF4d000010F0'"

check "the provider loads against this Debian's libibverbs (its private ABI resolved)" in_copy '
    set -e
    grep -qx "driver qhca" /etc/libibverbs.d/qhca.driver
    so=$(ls /usr/lib/x86_64-linux-gnu/libibverbs/libqhca-rdmav*.so)
    command -v readelf > /dev/null || { echo "no readelf in the copy"; exit 1; }
    dyn=$(readelf -d "$so") || { echo "readelf -d $so failed"; exit 1; }
    if printf "%s\n" "$dyn" | grep -Eq "\((RPATH|RUNPATH)\)"; then
        printf "%s\n" "$dyn" | grep -E "\((RPATH|RUNPATH)\)"; echo "$so has a run path"; exit 1
    fi
    python3 -c "import ctypes, sys; ctypes.CDLL(\"libibverbs.so.1\", ctypes.RTLD_GLOBAL); ctypes.CDLL(sys.argv[1])" "$so"'

check "removing the packages removes the module from every kernel and the provider" in_copy "
    set -e
    v=\$(dpkg-query -W -f='\${Version}' qhca-dkms)
    [ -n \"\$(find /lib/modules/$rel -name 'qhca.ko*')\" ]	# installed by the check before
    apt-get purge -y -q qhca-dkms ibverbs-provider-qhca > /tmp/apt.log 2>&1 || { tail -n 20 /tmp/apt.log; exit 1; }
    [ -z \"\$(find /lib/modules/$rel -name 'qhca.ko*')\" ] || { echo 'qhca.ko is left'; exit 1; }
    [ ! -e /usr/src/qhca-\$v ] || { echo '/usr/src/qhca-'\$v' is left'; exit 1; }
    [ ! -e /etc/libibverbs.d/qhca.driver ] || { echo 'qhca.driver is left'; exit 1; }
    if ls /usr/lib/x86_64-linux-gnu/libibverbs/libqhca-* 2> /dev/null; then echo 'the provider is left'; exit 1; fi"
finish
