#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# A stock Debian disk image, as the VMs people already run: a partitioned disk with GRUB,
# systemd, Debian's own kernel and its headers, DKMS, OpenSSH and rdma-core's tools, and
# nothing of qhca's (tests/vm/disk-guest.sh installs the packages of 'make deb' in it with apt).
# The only changes to a plain Debian: the launcher's ssh key for root, DHCP on the virtio
# NICs (systemd-networkd) and the serial console, which is what a cloud image's first-boot
# hook would give it.
#   build-disk.sh     prints "disk: IMAGE" (raw, 4 GiB sparse; $QHCA_CACHE/disk/FLAVOUR.img)
# Made again only when this script, the package list or the key changes.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

flavour_init
case $QHCA_FLAVOUR in
debian13|debian12) ;;
*) die "the disk image is made for debian13 or debian12 (FLAVOUR=$QHCA_FLAVOUR)" ;;
esac
qapt_setup
PKGS="systemd-sysv udev dbus linux-image-amd64 linux-headers-amd64 dkms openssh-server
  iproute2 iputils-ping kmod initramfs-tools procps rdma-core ibverbs-utils rdmacm-utils perftest nvme-cli"
key=$QHCA_CACHE/ssh/id_ed25519.pub
[ -f "$key" ] || die "no launcher key $key yet: run 'make image' first"
dir=$QHCA_CACHE/disk
img=$dir/$QHCA_FLAVOUR.img
sum=$( (cat "$0" "$key"; echo "$PKGS $FL_SUITES $DEB_URI") | sha256sum | cut -c1-12)
if [ "$(cat "$img.sum" 2>/dev/null)" = "$sum" ] && [ -f "$img" ]; then
    echo "disk: $img"
    exit 0
fi
need_pkgs mmdebstrap e2fsprogs fdisk grub-common grub-pc-bin
mkdir -p "$dir"
tree=$dir/$QHCA_FLAVOUR.tree
tmp=$dir/$QHCA_FLAVOUR.img.tmp
trap 'rm -rf "$tree" "$tmp"' EXIT
rm -rf "$tree" "$tmp"

step "disk: Debian ${FL_SUITES%% *} with systemd, its kernel and headers, DKMS, OpenSSH and rdma-core (once: about 4 min)"
deb_sources deb "$FL_SUITES" > "$dir/$QHCA_FLAVOUR.sources"
uuid=$(cat /proc/sys/kernel/random/uuid)
mmdebstrap --quiet --variant=minbase --mode=root --include="$(echo $PKGS | tr ' ' ,)" \
    "${FL_SUITES%% *}" "$tree" "$dir/$QHCA_FLAVOUR.sources" ||
    die "mmdebstrap of the disk image failed; sources: $dir/$QHCA_FLAVOUR.sources"

# What a first-boot hook gives a cloud image: a way in, a network, a console.
echo qhca-disk > "$tree/etc/hostname"
echo "UUID=$uuid / ext4 errors=remount-ro 0 1" > "$tree/etc/fstab"
install -d -m 0700 "$tree/root/.ssh"
install -m 0600 "$key" "$tree/root/.ssh/authorized_keys"
cat > "$tree/etc/systemd/network/10-virtio.network" <<'EOF'
# The guests' virtio NICs (the management NIC: QEMU's user-mode network answers DHCP).
[Match]
Driver=virtio_net
[Network]
DHCP=ipv4
EOF
chroot "$tree" systemctl enable -q systemd-networkd ssh
rel=$(ls "$tree/lib/modules" | sort -V | tail -n1)
[ -f "$tree/boot/vmlinuz-$rel" ] && [ -f "$tree/boot/initrd.img-$rel" ] ||
    die "the disk image has no kernel or initramfs for $rel"
rm -f "$tree"/var/cache/apt/archives/*.deb

# GRUB's configuration goes in with the files; GRUB itself as a BIOS disk's boot code does:
# its boot sector in the MBR and its core image, with what it needs to read ext4 and boot
# Linux built in, in the sectors before the partition (no loop device, no mount).
mkdir -p "$tree/boot/grub"
cat > "$tree/boot/grub/grub.cfg" <<EOF
set timeout=0
serial --unit=0 --speed=115200
terminal_input serial
terminal_output serial
menuentry "Debian ${FL_SUITES%% *}" {
	search --no-floppy --fs-uuid --set=root $uuid
	linux /boot/vmlinuz-$rel root=UUID=$uuid ro console=ttyS0,115200 quiet
	initrd /boot/initrd.img-$rel
}
EOF
step "disk: the file system and GRUB ($(du -sh "$tree" | cut -f1) of files)"
truncate -s 4G "$tmp"
printf 'label: dos\nstart=2048, type=83, bootable\n' | sfdisk -q "$tmp"
start=$((2048 * 512))
size_kib=$(( ($(stat -c %s "$tmp") - start) / 1024 ))
mke2fs -q -t ext4 -U "$uuid" -L qhca-root -E offset=$start -d "$tree" "$tmp" "${size_kib}k"
grub-mkimage -O i386-pc -o "$dir/core.img" -p '(hd0,msdos1)/boot/grub' \
    biosdisk part_msdos ext2 normal linux configfile search search_fs_uuid echo test serial \
    terminal gzio ||
    die "grub-mkimage failed"
[ "$(stat -c %s "$dir/core.img")" -le $(( (2048 - 1) * 512 )) ] ||
    die "GRUB's core image does not fit before the partition"
# boot.img's code, not the partition table behind it; it loads the core from sector 1, whose
# first sector lists the rest (grub-mkimage fills the list in).
dd if=/usr/lib/grub/i386-pc/boot.img of="$tmp" bs=440 count=1 conv=notrunc status=none
dd if="$dir/core.img" of="$tmp" bs=512 seek=1 conv=notrunc status=none
rm -f "$dir/core.img"
mv "$tmp" "$img"
echo "$sum" > "$img.sum"
echo "disk: $img"
