#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# VM test of qhca in a stock Debian guest (docs/install-guest.md): a Debian 13 disk image with
# GRUB, systemd and Debian's own kernel (scripts/build-disk.sh) booted with 'up --disk'; the
# two packages of 'make deb' installed in it with apt, DKMS building qhca.ko in the guest;
# after a reboot udev loads the module for the device by itself, and RDMA (the pingpong,
# perftest, NVMe over Fabrics) runs between two such guests.
# Then a package maintainer's 'qhca run --disk --install' of docs/ci.md, as written there.
# make check-disk runs it (QHCA_DISK_SHORT=1: up to the pingpong); make check has the
# short version without a VM, tests/vm/test-packages.sh.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
. "$root/scripts/lib.sh"

export QHCA_FLAVOUR=debian13
work=$(mktemp -d /tmp/qhca-disk.XXXXXX)
trap 'rm -rf "$work"' EXIT

check "make deb: qhca-dkms and ibverbs-provider-qhca for Debian 13" eval '
    bash "$root/scripts/build-deb.sh" > "$work/deb.out" && cat "$work/deb.out" &&
    [ "$(grep -c "^deb: .*\.deb$" "$work/deb.out")" = 2 ] &&
    for f in $(sed -n "s/^deb: //p" "$work/deb.out"); do cp "$f" "$work/"; done' || { finish; exit 1; }
check "a stock Debian 13 disk image (GRUB, systemd, its kernel, DKMS)" eval '
    bash "$root/scripts/build-disk.sh" > "$work/disk.out" && cat "$work/disk.out"' || { finish; exit 1; }
disk=$(sed -n 's/^disk: //p' "$work/disk.out")

# DKMS's compiler needs room beside systemd: 1.5 GiB each.
img_stamp=$(stat -c '%s %Y %Z' "$disk")
vm_up 2 --disk "$disk" --mem 1536
# Each QEMU holds the image read-only and its snapshot file (unlinked at once) in the run
# directory.
snapshot_in_run() {
    local i pid fds
    for i in 0 1; do
        pid=$(python3 -c "import json; print(json.load(open('$QHCA_RUN/state.json'))['vms'][$i]['pid'])") &&
        [ -n "$pid" ] && fds=$(ls -l "/proc/$pid/fd") || return 1
        grep -E -- "-> $QHCA_RUN/vl\.[A-Za-z0-9]+ \(deleted\)$" <<< "$fds" || { echo "vm$((i + 1)): $fds"; return 1; }
        grep -E -- "^lr-x.* -> $disk$" <<< "$fds" || { echo "vm$((i + 1)): the image not read-only: $fds"; return 1; }
    done
}
check "the image read-only in each QEMU, the guests' writes in the run directory (snapshot file)" snapshot_in_run
# The device is there (1af4:10f0), with no driver: nothing of qhca's is in the image.
no_qhca_yet() {
    local i
    for i in 1 2; do
        "$qhca" exec $i -- 'grep -q root=UUID= /proc/cmdline && uname -r | grep -q -- "-amd64$" &&
            d=$(grep -l 0x10f0 /sys/bus/pci/devices/*/device | head -n 1) && [ -n "$d" ] &&
            [ "$(cat ${d%/device}/vendor)" = 0x1af4 ] && [ ! -e ${d%/device}/driver ] &&
            ! grep -q ^qhca /proc/modules &&
            ! ls /usr/lib/x86_64-linux-gnu/libibverbs/libqhca-* 2> /dev/null' || return 1
    done
}
check "the guests run Debian's kernel from the disk; the qhca device has no driver yet" no_qhca_yet

install_pkgs() {	# install_pkgs I: apt installs the two packages copied into guest I
    "$qhca" cp "$work"/*.deb "$1:/root/" || return 1
    local t0=$SECONDS
    "$qhca" exec "$1" -- 'DEBIAN_FRONTEND=noninteractive apt-get install -y -q /root/qhca-dkms_*.deb /root/ibverbs-provider-qhca_*.deb' || return 1
    echo "# vm$1: apt-get install took $((SECONDS - t0)) s (DKMS building qhca.ko in the guest)" >> "$work/times"
}
for i in 1 2; do
    check "vm$i: apt-get install of the two packages (DKMS builds qhca.ko for Debian's kernel)" install_pkgs $i
done
cat "$work/times" 2> /dev/null
installed() {
    local i
    for i in 1 2; do
        "$qhca" exec $i -- 'dkms status qhca | grep -q "$(uname -r).*: installed" &&
            modinfo -n qhca | grep -q "/lib/modules/$(uname -r)/updates/dkms/qhca\.ko" &&
            grep -qx "driver qhca" /etc/libibverbs.d/qhca.driver &&
            ls /usr/lib/x86_64-linux-gnu/libibverbs/libqhca-rdmav34.so' || return 1
    done
}
check "DKMS has qhca installed for the running kernel, the provider is registered" installed

# A reboot, as after installing any driver: nobody loads qhca by hand; udev does, for the
# device (the driver's PCI ID table), and rdma-core's rules load ib_uverbs.
reboot_guest() {	# reboot_guest I: systemctl reboot, then the next boot's login prompt and ssh
    local before
    before=$(grep -c ' login: ' "$QHCA_RUN/vm$1.log")
    "$qhca" exec "$1" -- 'systemctl reboot' > /dev/null 2>&1
    eventually 300 eval '[ "$(grep -c " login: " "$QHCA_RUN/vm'"$1"'.log")" -gt '"$before"' ] &&
        "$qhca" exec '"$1"' -- true'
}
QHCA_RUN=$("$qhca" paths | sed -n 's/^run //p')
for i in 1 2; do
    check "vm$i: reboots (systemctl reboot) and comes back" reboot_guest $i
done
# qhca's RDMA device in guest I: the one whose PCI function the qhca driver has.
qhca_dev() {
    "$qhca" exec "$1" -- 'for d in /sys/class/infiniband/*; do
        [ "$(basename "$(readlink -f $d/device/driver)")" = qhca ] && basename $d; done'
}
loaded() {
    local i d
    for i in 1 2; do
        d=$(qhca_dev $i)
        echo "vm$i: qhca's RDMA device is '$d'"
        [ -n "$d" ] && "$qhca" exec $i -- "grep -q ^qhca /proc/modules && ibv_devinfo -d $d | grep -q PORT_ACTIVE" ||
            return 1
    done
}
check "after the reboot udev has loaded qhca and its RDMA device's port is ACTIVE" loaded
# rdma-core's udev rules name the device by its PCI slot, as they do a ConnectX's.
QHCA_TEST_DEV=$(qhca_dev 1)
check "rdma-core's udev rules renamed it as they do hardware (rocep*), the same in both guests" \
    eval '[[ $QHCA_TEST_DEV == rocep* ]] && [ "$(qhca_dev 2)" = "$QHCA_TEST_DEV" ]'
# The fabric's addresses on qhca's netdev, as an administrator gives them.
addresses() {
    local i
    for i in 1 2; do
        "$qhca" exec $i -- "n=\$(basename \$(ls -d /sys/class/infiniband/$QHCA_TEST_DEV/device/net/*)) &&
            ip addr add 192.168.77.$i/24 dev \$n && ip link set \$n up" || return 1
    done
    eventually 20 "$qhca" exec 1 -- 'ping -c 1 -W 1 192.168.77.2 > /dev/null'
}
check "192.168.77.I on each guest's qhca netdev, and ping between them" addresses
check "ibv_rc_pingpong 4 KiB x 100 between the stock guests, data checked" pingpong ibv_rc_pingpong -s 4096 -n 100 -c
if [ "${QHCA_DISK_SHORT:-}" != 1 ]; then
    check "ib_write_bw between them" perf ib_write_bw -n 200
    check "ib_read_lat between them" perf ib_read_lat -n 100
    nvme_file() {	# NVMe over RDMA: a 64 MiB file namespace on vm2 read by vm1, byte for byte
        "$qhca" exec 2 -- 'set -e; modprobe nvmet-rdma
            head -c 64M /dev/urandom > /var/tmp/ns.img; sha256sum < /var/tmp/ns.img > /var/tmp/ns.sum
            n=/sys/kernel/config/nvmet; s=$n/subsystems/qhca-disk; p=$n/ports/1
            mkdir $s; echo 1 > $s/attr_allow_any_host; mkdir $s/namespaces/1
            echo /var/tmp/ns.img > $s/namespaces/1/device_path; echo 1 > $s/namespaces/1/enable
            mkdir $p; echo rdma > $p/addr_trtype; echo ipv4 > $p/addr_adrfam
            echo 192.168.77.2 > $p/addr_traddr; echo 4420 > $p/addr_trsvcid
            ln -s $s $p/subsystems/qhca-disk' || return 1
        local want got
        want=$("$qhca" exec 2 -- cat /var/tmp/ns.sum) || return 1
        got=$("$qhca" exec 1 -- 'set -e; modprobe nvme-rdma
            nvme connect -t rdma -a 192.168.77.2 -s 4420 -n qhca-disk > /dev/null
            b=
            for t in 1 2 3 4 5 6 7 8 9 10; do	# the namespace block device (not a path, *c*)
                for n in /sys/block/nvme*n*; do
                    case ${n##*/} in *c*) continue ;; esac
                    [ "$(cat $n/device/subsysnqn 2>/dev/null)" = qhca-disk ] && b=${n##*/}
                done
                [ -n "$b" ] && break
                sleep 1
            done
            [ -n "$b" ]
            sum=$(dd if=/dev/$b bs=1M count=64 iflag=direct 2>/dev/null | sha256sum)
            nvme disconnect -n qhca-disk > /dev/null
            echo "$sum"') || return 1
        echo "target $want, read $got"
        [ -n "$want" ] && [ "$want" = "$got" ]
    }
    check "NVMe over RDMA between the stock guests: 64 MiB read back, sha256 equal" nvme_file
fi
check "no kernel BUG, oops, warning or qhca error" eval 'kernel_log_clean 1 && kernel_log_clean 2'
vm_down

# A distribution or package maintainer's CI run (docs/ci.md), as written there: qhca run boots
# two guests from the image, installs the packages in both at once, loads the driver, runs
# ibv_devinfo in the first and goes down.
maintainer() {
    local rc
    "$qhca" run --disk "$disk" --mem 1536 \
        --install "$(ls "$work"/qhca-dkms_*_all.deb)" --install "$(ls "$work"/ibverbs-provider-qhca_*_amd64.deb)" \
        --setup 'modprobe qhca && udevadm settle' --junit "$work/m.xml" -- 'ibv_devinfo' > "$work/m.out" 2>&1
    rc=$?
    grep -E "installed|state:|hca_id|qhca: " "$work/m.out" | tail -n 12
    [ "$rc" = 0 ] && grep -q "vm1: installed" "$work/m.out" && grep -q "vm2: installed" "$work/m.out" &&
        grep -q "PORT_ACTIVE" "$work/m.out" && grep -q 'tests="1" failures="0"' "$work/m.xml" &&
        nothing_running
}
if [ "${QHCA_DISK_SHORT:-}" != 1 ]; then
    check "run --disk --install both packages --setup 'modprobe qhca' -- ibv_devinfo (docs/ci.md)" maintainer
fi
check "the image was never written (size and times as before up)" \
    eval '[ "$(stat -c "%s %Y %Z" "$disk")" = "$img_stamp" ]'
finish
