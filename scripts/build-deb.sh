#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# make deb: qhca's guest side as two Debian packages for the flavour's release (FLAVOUR=...),
# for guests that are not qhca's own image (a stock Debian with systemd; docs/install-guest.md):
#   qhca-dkms_VERSION_all.deb                the driver's source and its dkms.conf: DKMS
#                                            builds qhca.ko for every kernel the guest has
#   ibverbs-provider-qhca_VERSION_amd64.deb  the rdma-core provider, libqhca-rdmavN.so, and
#                                            /etc/libibverbs.d/qhca.driver
# Both are made in the flavour's build root, so the provider's dependencies are computed
# (dpkg-shlibdeps) against the guests' own libibverbs. Prints "deb: PATH" for each.
set -euo pipefail
# What the packages install gets the modes of the staging tree: not the caller's umask (077
# would make the driver's source and the provider unreadable to the guests' users, 002
# group-writable). The tree is also set to 0755/0644 before dpkg-deb (below).
umask 022
. "$(dirname "$0")/lib.sh"

# The version: VERSION's, then the commits since it changed and the commit, when this is a
# git clone (0.27.0+git12.1a2b3c4d); a newer commit is a newer package for apt.
base=$(cat "$QHCA_ROOT/VERSION")
ver=$base
if git -C "$QHCA_ROOT" rev-parse --git-dir > /dev/null 2>&1; then
    n=$(git -C "$QHCA_ROOT" rev-list --count "$(git -C "$QHCA_ROOT" log -n1 --format=%H -- VERSION)..HEAD")
    ver="$base+git$n.$(git -C "$QHCA_ROOT" rev-parse --short=8 HEAD)"
    [ -z "$(git -C "$QHCA_ROOT" status --porcelain -- guest-driver guest-provider abi)" ] ||
        ver="$ver.dirty"
fi

provider=$(bash "$QHCA_ROOT/scripts/build-provider.sh" | sed -n 's/^provider: //p')
[ -f "$provider" ] || die "the provider was not built (see above)"
buildroot	# sets BR, FL_DIR
need_pkgs chrpath

stage=$FL_DIR/work/deb-stage out=$FL_DIR/work/deb
rm -rf "$stage" && mkdir -p "$stage" "$out"
rm -f "$out"/*.deb

# ---- qhca-dkms: the source DKMS builds, as /usr/src/qhca-VERSION/{guest-driver,abi}
step "deb: qhca-dkms $ver"
d=$stage/dkms src=$stage/dkms/usr/src/qhca-$ver
mkdir -p "$d/DEBIAN" "$src/guest-driver" "$src/abi" "$d/usr/share/doc/qhca-dkms"
cp "$QHCA_ROOT"/guest-driver/{Kbuild,*.c,*.h} "$src/guest-driver/"
cp "$QHCA_ROOT"/abi/*.h "$src/abi/"
sed "s/@VERSION@/$ver/" "$QHCA_ROOT/guest-driver/dkms.conf.in" > "$src/dkms.conf"
cat > "$d/DEBIAN/control" <<EOF
Package: qhca-dkms
Version: $ver
Architecture: all
Section: kernel
Priority: optional
Depends: dkms (>= 3.0)
Recommends: linux-headers-amd64 | linux-headers-generic | linux-headers
Suggests: ibverbs-provider-qhca, rdma-core, ibverbs-utils
Maintainer: qhca developers <qhca@localhost>
Description: kernel driver of the qhca emulated RDMA adapter (DKMS)
 qhca is an RDMA host channel adapter (RoCE v2 and InfiniBand) emulated as a
 QEMU PCI device. This package builds its guest kernel driver, qhca.ko, with
 DKMS for every kernel installed (Linux 6.1 to 7.x). The device appears as
 qhca_0 to the RDMA stack once the module is loaded.
EOF
# DKMS's own helpers add, build and install the module for the installed kernels, and
# remove it with the package, as Debian's dh_dkms packages do.
cat > "$d/DEBIAN/postinst" <<EOF
#!/bin/sh
set -e
if [ "\$1" = configure ]; then
	/usr/lib/dkms/common.postinst qhca "$ver" "" "" "\$2"
fi
EOF
cat > "$d/DEBIAN/prerm" <<EOF
#!/bin/sh
set -e
if [ "\$1" = remove ] || [ "\$1" = upgrade ] || [ "\$1" = deconfigure ]; then
	if dkms status -m qhca -v "$ver" 2>/dev/null | grep -q .; then
		dkms remove -m qhca -v "$ver" --all || true
	fi
fi
EOF
chmod 0755 "$d/DEBIAN/postinst" "$d/DEBIAN/prerm"
cp "$QHCA_ROOT/docs/install-guest.md" "$d/usr/share/doc/qhca-dkms/README.md"

# ---- ibverbs-provider-qhca: the provider and its libibverbs.d entry
step "deb: ibverbs-provider-qhca $ver ($(basename "$provider"))"
p=$stage/provider
mkdir -p "$p/DEBIAN" "$p/usr/lib/x86_64-linux-gnu/libibverbs" "$p/etc/libibverbs.d" \
    "$p/usr/share/doc/ibverbs-provider-qhca"
install -m 0644 "$provider" "$p/usr/lib/x86_64-linux-gnu/libibverbs/"
# rdma-core's build links it with a run path to its own build tree: not in a package.
chrpath -d "$p/usr/lib/x86_64-linux-gnu/libibverbs/$(basename "$provider")" > /dev/null
echo "driver qhca" > "$p/etc/libibverbs.d/qhca.driver"
cp "$QHCA_ROOT/docs/install-guest.md" "$p/usr/share/doc/ibverbs-provider-qhca/README.md"
# The dependencies the guests' libibverbs symbols file gives the provider's private ABI
# (IBVERBS_PRIVATE_N): a libibverbs of another provider ABI does not satisfy them.
in_buildroot sh -c '
    set -e
    cd /work/deb-stage/provider
    mkdir -p debian && printf "Source: qhca\n\nPackage: ibverbs-provider-qhca\nArchitecture: amd64\n" > debian/control
    dpkg-shlibdeps -O -e usr/lib/x86_64-linux-gnu/libibverbs/*.so | sed -n "s/^shlibs:Depends=//p" > ../provider.depends
    rm -rf debian' || die "dpkg-shlibdeps failed in the $QHCA_FLAVOUR build root"
deps=$(cat "$stage/provider.depends")
[ -n "$deps" ] || die "dpkg-shlibdeps found no dependencies of $(basename "$provider")"
# The symbols file bounds libibverbs from below only; the provider ABI may change with any
# major release, and a libibverbs of another ABI would not load the provider: bound it by
# the next major release of the guests' libibverbs as well.
gver=$(dpkg-query --admindir="$BR/var/lib/dpkg" -W -f='${Version}' libibverbs1)
gmaj=${gver#*:} gmaj=${gmaj%%.*}
deps="$deps, libibverbs1 (<< $((gmaj + 1)))"
cat > "$p/DEBIAN/control" <<EOF
Package: ibverbs-provider-qhca
Version: $ver
Architecture: amd64
Section: net
Priority: optional
Depends: $deps
Suggests: qhca-dkms, rdma-core, ibverbs-utils
Maintainer: qhca developers <qhca@localhost>
Description: user-space driver (rdma-core provider) of the qhca emulated RDMA adapter
 qhca is an RDMA host channel adapter (RoCE v2 and InfiniBand) emulated as a
 QEMU PCI device. This package is its provider for libibverbs: verbs
 programs post work requests and poll completions in user space on qhca_0.
EOF

# Whatever the files came with (a checkout's group-writable or private modes): readable by
# all, writable by root only; directories and programs 0755, other files 0644.
chmod -R u+rwX,go+rX,go-w "$stage"
for pkg in dkms provider; do
    in_buildroot dpkg-deb --root-owner-group -Zxz --build "/work/deb-stage/$pkg" /work/deb/ > /dev/null ||
        die "dpkg-deb failed for $pkg"
done
rm -rf "$stage"
for f in "$out"/*.deb; do echo "deb: $f"; done
