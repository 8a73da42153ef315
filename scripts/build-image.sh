#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Build the guest image of the flavour (QHCA_FLAVOUR, see scripts/lib.sh) from Debian
# packages: an uncompressed initramfs in three layers,
#   base.cpio    the packages of images/packages.txt (rebuilt only when they change)
#   kernel.cpio  the guest kernel's modules of images/modules.txt, qhca.ko and siw.ko
#                (scripts/kernel-layer.sh; 'qhca up --kernel' makes one for your kernel)
#   qhca.cpio    init, the provider, test programs, the launcher's ssh key
# concatenated into initrd.cpio, in $QHCA_CACHE/flavour-NAME/image. Each VM gets the image
# in its own RAM: nothing is shared. The guest programs are built in the flavour's build root.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

bash "$QHCA_ROOT/scripts/setup-apt.sh"
need_pkgs mmdebstrap cpio kmod openssh-client gcc
buildroot
fetch_guest_kernel

img="$FL_DIR/image"
mkdir -p "$img"
# One image build at a time (VM tests and builds may run side by side).
exec 9> "$img/.lock"
flock 9

# ---------------------------------------------------------------- base layer
pkgs=$(grep -v '^#' "$QHCA_ROOT/images/packages.txt" | xargs | tr ' ' ',')
base_sum=$( (echo "$FL_SUITES"; echo "$pkgs"; cat "$0" | sed -n '/^# base-begin/,/^# base-end/p') |
    sha256sum | cut -c1-12)
# base-begin
if [ "$(cat "$img/base.sum" 2>/dev/null)" != "$base_sum" ] || [ ! -f "$img/base.cpio" ]; then
    rootfs="$img/rootfs"
    rm -rf "$rootfs"
    deb_sources deb "$FL_SUITES" > "$img/sources"
    step "image: downloading and unpacking Debian ${FL_SUITES%% *} packages: ${pkgs//,/ }"
    mmdebstrap --quiet --variant=extract --mode=root --include="$pkgs" "${FL_SUITES%% *}" "$rootfs" \
        "$img/sources" || die "mmdebstrap failed; check the apt sources in $img/sources"
    # Debian 13 and later ship files in /usr only (merged /usr): the top-level links that
    # base-files and the essential set would make, made here for the extracted packages.
    for d in bin sbin lib lib64; do
        [ -e "$rootfs/$d" ] || [ ! -d "$rootfs/usr/$d" ] || ln -s "usr/$d" "$rootfs/$d"
    done
    # rdma-core's verbs test suite (tests/vm/test-pyverbs.sh) is in python3-pyverbs' docs.
    mv "$rootfs/usr/share/doc/rdma-core/tests" "$rootfs/usr/share/rdma-core-tests" ||
        die "python3-pyverbs has no test suite in /usr/share/doc/rdma-core/tests"
    rm -rf "$rootfs"/usr/share/{doc,man,info,locale,lintian,bash-completion} "$rootfs"/var/cache/apt
    mkdir -p "$rootfs/usr/share/doc/rdma-core"
    mv "$rootfs/usr/share/rdma-core-tests" "$rootfs/usr/share/doc/rdma-core/tests"
    # fio links the client libraries of its Ceph (rados, rbd), GlusterFS and NBD engines,
    # which bring about 70 MiB (ICU, Boost, Ceph, GlusterFS) into each guest's RAM. The guest
    # never uses those engines: replace the four libraries by stubs that define the symbols fio
    # binds (each aborts if ever called) and drop what only they needed.
    if [ -e "$rootfs/usr/bin/fio" ]; then
        step "image: fio without its Ceph, GlusterFS and NBD engines"
        libdir="$rootfs/usr/lib/x86_64-linux-gnu" stubs="$img/fio-stubs"
        rm -rf "$stubs" && mkdir -p "$stubs"
        readelf --dyn-syms -W "$rootfs/usr/bin/fio" | awk '$7 == "UND" {print $8}' > "$stubs/undefined"
        for spec in librados.so.2:rados_ librbd.so.1:rbd_ libgfapi.so.0:glfs_ libnbd.so.0:nbd_; do
            so=${spec%%:*} prefix=${spec#*:}
            grep "^$prefix" "$stubs/undefined" > "$stubs/$so.syms" || die "fio binds no ${prefix}* symbol: update the stubs"
            { echo '#include <stdlib.h>'
              sed 's/@.*//' "$stubs/$so.syms" | sort -u | sed 's/.*/void &(void) { abort(); }/'; } > "$stubs/$so.c"
            for v in $(sed -n 's/.*@//p' "$stubs/$so.syms" | sort -u); do
                echo "$v { global: $(grep "@$v\$" "$stubs/$so.syms" | sed 's/@.*/;/' | xargs) };"
            done > "$stubs/$so.map"
            vs=() && [ -s "$stubs/$so.map" ] && vs=(-Wl,--version-script="$stubs/$so.map")
            rm -f "$libdir/$so" "$libdir/$so".*
            gcc -shared -fPIC -O2 -o "$libdir/$so" -Wl,-soname,"$so" "${vs[@]}" "$stubs/$so.c" ||
                die "building the fio stub $so failed"
        done
        rm -rf "$libdir/ceph"
        "$rootfs/lib64/ld-linux-x86-64.so.2" --library-path "$rootfs/lib/x86_64-linux-gnu:$libdir" \
            "$rootfs/usr/bin/fio" --version > /dev/null || die "fio does not run with the engine stubs"
    fi
    # iproute2's tc plugin for ATM needs libatm, which Debian does not pull in.
    rm -f "$rootfs/usr/lib/x86_64-linux-gnu/tc/q_atm.so"
    # The packages are unpacked, not configured: make the one alternative a library needs
    # (libpsm-infinipath1's, which libfabric and Open MPI link), as its postinst would.
    if [ -e "$rootfs/usr/lib/libpsm1/libpsm_infinipath.so.1.16" ]; then
        ln -sf ../libpsm1/libpsm_infinipath.so.1.16 \
            "$rootfs/usr/lib/x86_64-linux-gnu/libpsm_infinipath.so.1"
    fi
    # hwloc's XML plugin would bring libxml2 and ICU back (see fio above); hwloc parses XML
    # itself without it. UCX's ROCm and CUDA modules (Debian 13 builds ROCm's) bring HIP, HSA
    # and LLVM, about 230 MiB, for GPUs no guest has: UCX loads the modules it finds.
    rm -f "$rootfs/usr/lib/x86_64-linux-gnu/hwloc/hwloc_xml_libxml.so" \
        "$rootfs"/usr/lib/x86_64-linux-gnu/ucx/lib*_{rocm,cuda}*
    # Then the libraries that only those (and fio's stubbed engines) needed go: any library
    # of this list that no ELF file of the image needs any more, until none is left.
    prune="libicu* libxml2.so* libboost_* libfmt.so* libglusterfs.so* libgfrpc.so* libgfxdr.so*
        libamdhip64.so* libamd_comgr.so* libhsa-runtime64.so* libhsakmt.so* libLLVM* libz3.so*
        libdrm_amdgpu.so* libnuma.so*"
    while :; do
        needed=$(find "$rootfs"/usr/{bin,sbin,lib} -type f \( -perm -u+x -o -name '*.so*' \) \
            -exec readelf -d {} + 2>/dev/null | sed -n 's|.*Shared library: \[\(.*\)\]|\1|p' | sort -u || true)
        gone=0
        for pat in $prune; do
            for f in "$rootfs"/usr/lib/x86_64-linux-gnu/$pat; do
                [ -e "$f" ] || [ -L "$f" ] || continue
                soname=$(readelf -d "$f" 2>/dev/null | sed -n 's|.*Library soname: \[\(.*\)\]|\1|p' || true)
                grep -qxF "${soname:-$(basename "$f")}" <<<"$needed" && continue
                rm -f "$f" && gone=1
            done
        done
        [ $gone = 1 ] || break
    done
    # Every shared library that an ELF file of the image needs must be in the image.
    libs=$(find "$rootfs" \( -type f -o -type l \) -name '*.so*' -printf '%f\n' | sort -u)
    missing=$(find "$rootfs"/{bin,sbin,usr/bin,usr/sbin,lib,usr/lib} -type f \( -perm -u+x -o -name '*.so*' \) \
        -exec sh -c 'readelf -d "$1" 2>/dev/null | sed -n "s|.*Shared library: \[\(.*\)\]|\1 $1|p"' _ {} \; |
        while read -r need file; do grep -qxF "$need" <<<"$libs" || echo "$file needs $need"; done)
    [ -z "$missing" ] || die "image: shared libraries missing:
$missing"
    # busybox supplies what the extracted packages lack (sh, mount, setsid, ...). It is run
    # with the image's own C library: a newer Debian's binaries need a newer one than the host's.
    applets=$("$rootfs/lib64/ld-linux-x86-64.so.2" --library-path "$rootfs/usr/lib/x86_64-linux-gnu" \
        "$rootfs/bin/busybox" --list) || die "the image's busybox does not run"
    [ -n "$applets" ] || die "the image's busybox lists no applets"
    for a in $applets; do
        for d in bin sbin usr/bin usr/sbin; do
            [ -e "$rootfs/$d/$a" ] && continue 2
        done
        ln -s /bin/busybox "$rootfs/usr/local/bin/$a" 2>/dev/null || { mkdir -p "$rootfs/usr/local/bin"; ln -s /bin/busybox "$rootfs/usr/local/bin/$a"; }
    done
    [ -e "$rootfs/bin/sh" ] || ln -s busybox "$rootfs/bin/sh"

    (cd "$rootfs" && find . | LC_ALL=C sort | cpio -o -H newc --quiet) > "$img/base.cpio.tmp"
    mv "$img/base.cpio.tmp" "$img/base.cpio"
    echo "$base_sum" > "$img/base.sum"
fi
# base-end

# ---------------------------------------------------------------- qhca layer
keydir="$QHCA_CACHE/ssh"
if [ ! -f "$keydir/id_ed25519" ]; then
    mkdir -p "$keydir" && chmod 700 "$keydir"
    ssh-keygen -q -t ed25519 -N '' -C qhca-launcher -f "$keydir/id_ed25519"
fi
if [ ! -f "$keydir/guest_ed25519" ]; then	# the guests' own key pair (for MPI, below)
    ssh-keygen -q -t ed25519 -N '' -C qhca-guests -f "$keydir/guest_ed25519"
fi
ko="$FL_DIR/work/driver-$KERNEL_REL/guest-driver/qhca.ko"
so=$(readlink -f "$FL_DIR/provider.so" 2>/dev/null || true)
[ -f "$ko" ] || die "qhca.ko for $KERNEL_REL missing: run scripts/build-driver.sh first"
[ -f "$so" ] || die "the $QHCA_FLAVOUR provider is missing: run scripts/build-provider.sh first"

# The qhca layer is made again only when what goes into it changed: its sources and the
# headers they include (the device's ABI among them), the base layer and the build root's
# packages the programs are compiled against.
qhca_sum=$( (echo "$FL_SUITES $base_sum"; cat "$so" "$QHCA_ROOT/images/init" "$QHCA_ROOT"/tests/vm/qhca_*.c \
    "$QHCA_ROOT"/tests/vm/*.h "$QHCA_ROOT"/abi/*.h "$BR/var/lib/dpkg/status" \
    "$QHCA_ROOT"/tests/vm/{qhca_tcp.py,ucx_check.c,mpi_check.c} "$QHCA_ROOT/bench/qp_scale.c" \
    "$keydir"/*.pub; sed -n '/^# qhca-begin/,/^# qhca-end/p' "$0") | sha256sum | cut -c1-12)
# qhca-begin
if [ "$(cat "$img/qhca.sum" 2>/dev/null)" != "$qhca_sum" ] || [ ! -f "$img/qhca.cpio" ]; then
step "image: qhca layer (init, provider, test programs)"
layer="$FL_DIR/work/layer"
inner=/work/layer	# the layer inside the build root
bcc() { in_buildroot "$@"; }	# guest programs: compiled against the guests' own libraries
rm -rf "$layer" && mkdir -p "$layer"/{proc,sys,run,tmp,mnt,var/log,etc/libibverbs.d,root/.ssh,usr/local/bin,usr/lib/x86_64-linux-gnu/libibverbs}
install -m 755 "$QHCA_ROOT/images/init" "$layer/init"
install -m 644 "$so" "$layer/usr/lib/x86_64-linux-gnu/libibverbs/$(basename "$so")"
echo "driver qhca" > "$layer/etc/libibverbs.d/qhca.driver"
# Every tests/vm/qhca_NAME.c becomes the guest program qhca-NAME.
for src in "$QHCA_ROOT"/tests/vm/qhca_*.c; do
    prog=$(basename "$src" .c)
    bcc gcc -O2 -Wall -Wextra -o "$inner/usr/local/bin/${prog//_/-}" "/qhca/tests/vm/$prog.c" \
        -libverbs -lrdmacm ||
        die "test program $src does not build"
done
# Guest benchmarks: bench/qp_scale.c becomes qhca-qp-scale (bench/qp-scale.sh runs it).
bcc gcc -O2 -Wall -Wextra -o "$inner/usr/local/bin/qhca-qp-scale" /qhca/bench/qp_scale.c \
    -libverbs || die "bench/qp_scale.c does not build"
install -m 755 "$QHCA_ROOT/tests/vm/qhca_tcp.py" "$layer/usr/local/bin/qhca-tcp"
# The middleware checks (tests/vm/test-middleware.sh): UCX's UCP API, and one MPI program
# built against each MPI of the image. In /usr/bin: MPI starts ranks in other guests through
# ssh, whose sessions have the system PATH only.
bcc gcc -O2 -Wall -Wextra -o "$inner/usr/local/bin/qhca-ucx-check" /qhca/tests/vm/ucx_check.c \
    -lucp -lucs || die "tests/vm/ucx_check.c does not build"
mkdir -p "$layer/usr/bin"
for mpi in openmpi mpich; do
    bcc "mpicc.$mpi" -O2 -Wall -Wextra -o "$inner/usr/bin/qhca-mpi-check.$mpi" \
        /qhca/tests/vm/mpi_check.c || die "tests/vm/mpi_check.c does not build with $mpi"
done
# ssh between the guests, for MPI: one key pair that every guest holds and trusts, host
# keys not checked (each guest makes new ones at boot), the guests by name (vm1 is
# 192.168.77.1, the fabric's address; the management NICs all have the same one).
install -m 600 "$keydir/guest_ed25519" "$layer/root/.ssh/id_ed25519"
install -m 644 "$keydir/guest_ed25519.pub" "$layer/root/.ssh/id_ed25519.pub"
cat "$keydir/id_ed25519.pub" "$keydir/guest_ed25519.pub" > "$layer/root/.ssh/authorized_keys"
chmod 600 "$layer/root/.ssh/authorized_keys"
printf 'Host *\n  StrictHostKeyChecking no\n  UserKnownHostsFile /dev/null\n  LogLevel ERROR\n' \
    > "$layer/root/.ssh/config"
chmod 700 "$layer/root" "$layer/root/.ssh"
# MPI: Open MPI is mpirun and mpiexec (Debian's default MPI; the image's packages are
# unpacked, not configured, so no alternatives exist); its out-of-band and TCP traffic on
# the fabric's subnet; it runs as root here, which it wants confirmed. MPICH's hydra gets
# the fabric's interface from the init (/root/.mpiexec.hydra.conf).
mkdir -p "$layer/etc/openmpi"
cat > "$layer/etc/openmpi/openmpi-mca-params.conf" <<'EOT'
# qhca guests (scripts/build-image.sh; docs/middleware.md says why each line is here).
# Every management NIC has the same address (10.0.2.15): ranks talk over the fabric's subnet.
oob_tcp_if_include = 192.168.77.0/24
btl_tcp_if_include = 192.168.77.0/24
# Open MPI puts UCX (pml ucx, osc ucx) above its other transports only on the device drivers
# named here, Mellanox's by default; qhca's verbs are the ones UCX uses on those.
opal_common_ucx_devices = mlx*,qhca*
# The openib BTL (gone in Open MPI 5) finds no connection method on a RoCE port, and says so.
btl = ^openib
# One-sided: without a BTL that does RDMA (Debian builds no uct BTL), osc rdma (priority 101)
# takes the BTLs' RDMA emulation over TCP, where its fences never complete; osc ucx does
# one-sided on the device.
osc = ^rdma
EOT
for prog in mpirun mpiexec; do
    printf '#!/bin/sh\n# Open MPI (%s.openmpi); the guests run everything as root.\nexport OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1\nexec %s.openmpi "$@"\n' \
        "$prog" "$prog" > "$layer/usr/bin/$prog"
    chmod 755 "$layer/usr/bin/$prog"
done
cat > "$layer/etc/passwd" <<'EOT'
root:x:0:0:root:/root:/bin/sh
nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin
_rpc:x:100:65534::/run/rpcbind:/usr/sbin/nologin
statd:x:101:65534::/var/lib/nfs:/usr/sbin/nologin
EOT
printf 'root:x:0:\nnogroup:x:65534:\n' > "$layer/etc/group"
printf 'root:*:19000:0:99999:7:::\n' > "$layer/etc/shadow"
printf '/bin/sh\n' > "$layer/etc/shells"
{ printf '127.0.0.1 localhost\n'; for i in $(seq 1 254); do echo "192.168.77.$i vm$i"; done; } \
    > "$layer/etc/hosts"
# ld.so cache for the union of both layers.
mkdir -p "$layer/etc"
cp -a "$layer/usr/lib/x86_64-linux-gnu/libibverbs/." "$img/rootfs/usr/lib/x86_64-linux-gnu/libibverbs/"
ldconfig -r "$img/rootfs" 2>/dev/null || true
cp "$img/rootfs/etc/ld.so.cache" "$layer/etc/ld.so.cache" 2>/dev/null || true
(cd "$layer" && find . | LC_ALL=C sort | cpio -o -H newc --quiet) > "$img/qhca.cpio"
echo "$qhca_sum" > "$img/qhca.sum"
fi
# qhca-end

# The kernel layer: the modules the guests need, qhca.ko and siw.ko (scripts/kernel-layer.sh).
# Its paths are the base's: where /lib is a link to usr/lib (Debian 13 and later), a
# directory lib in a later layer would replace the link when the kernel unpacks the initramfs.
libtop=lib
[ -L "$img/rootfs/lib" ] && libtop=usr/lib
echo "$libtop" > "$img/libtop"
# Linux siw (soft-iWARP, 'qhca up --siw'): Debian's kernels lack it, scripts/build-siw.sh
# builds it from Debian's source of the kernel; a kernel that has siw needs no extra module.
siw_ko= extra=()
if ! kernel_has_module "$KERNEL_DIR/root/lib/modules/$KERNEL_REL" siw; then
    siw_ko="$FL_DIR/work/siw-$KERNEL_REL/drivers/infiniband/sw/siw/siw.ko"
    [ -f "$siw_ko" ] || die "siw.ko for $KERNEL_REL missing: run scripts/build-siw.sh first"
    extra=(--extra "$siw_ko")
fi
kernel_sum=$( (echo "$KERNEL_REL $libtop ${extra[*]}"; cat "$ko" ${siw_ko:+"$siw_ko"} \
    "$QHCA_ROOT/images/modules.txt" "$QHCA_ROOT/scripts/kernel-layer.sh") | sha256sum | cut -c1-12)
if [ "$(cat "$img/kernel.sum" 2>/dev/null)" != "$kernel_sum" ] || [ ! -f "$img/kernel.cpio" ]; then
    step "image: kernel layer for $KERNEL_REL (modules of images/modules.txt, qhca.ko, siw.ko)"
    bash "$QHCA_ROOT/scripts/kernel-layer.sh" "${extra[@]}" \
        "$KERNEL_DIR/root/lib/modules/$KERNEL_REL" "$ko" "$libtop" "$img/kernel.cpio"
    echo "$kernel_sum" > "$img/kernel.sum"
fi

cat "$img/base.cpio" "$img/kernel.cpio" "$img/qhca.cpio" > "$img/initrd.cpio.tmp"
mv "$img/initrd.cpio.tmp" "$img/initrd.cpio"
ln -sf "$KERNEL_IMAGE" "$img/vmlinuz"
echo "image: $img/vmlinuz + $img/initrd.cpio ($(du -m "$img/initrd.cpio" | cut -f1) MiB)"
