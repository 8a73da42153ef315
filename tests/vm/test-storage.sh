#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# VM test of the kernel's storage and file protocols over RDMA between two guests: target or
# server in guest 2, initiator or client in guest 1, data written, read back and checked,
# everything torn down, and each protocol once more with guest 2's link down for a few
# seconds in the middle of the I/O (the initiator must reconnect and finish with no data
# error). NVMe over Fabrics (nvmet-rdma, nvme-rdma), NFS over RDMA (v3 and v4.2), RDS
# (qhca-rds), iSER (LIO + open-iscsi) and SRP (ib_srpt + ib_srp). docs/storage.md has the
# same set-ups by hand.
#
#   QHCA_STORAGE_DEV=qhca   (default) over qhca_0, the guests' 192.168.77.I
#   QHCA_STORAGE_DEV=rxe    over Linux rxe on a virtio-net NIC, the guests' 192.168.78.I
#   QHCA_STORAGE_DEV=iwarp  over qhca_0 as an iWARP RNIC (up --iwarp), 192.168.77.I: NVMe-oF,
#                           NFS and iSER (RDS and SRP do not run on iWARP in Linux)
#   QHCA_STORAGE_ONLY="nvme nfs rds iser srp"   run only these workloads
#   QHCA_STORAGE_NFS_SIZES="1 4097 1048576 33554432"   NFS file sizes in bytes
#   QHCA_STORAGE_DISRUPT=migrate   instead of a link toggle, live-migrate guest 2 and then
#                           guest 1 during the I/O (qhca migrate); each workload runs only its
#                           set-up, the I/O across the moves and its teardown (test-migrate)
#   QHCA_STORAGE_QUICK=1    each workload once: set-up, checked transfers, teardown (no link
#                           toggle, no second round; make check over iWARP)
# The kernel ULPs pick the RDMA device by IP address (rdma_cm), so the address is the switch.
set -uo pipefail
. "$(dirname "$0")/lib.sh"

dev=${QHCA_STORAGE_DEV:-qhca}
# toggle_loops: the I/O across a link toggle repeats so that it outlasts the toggle on the
# faster device.
workloads="nvme nfs rds iser srp"
case $dev in
qhca) net=192.168.77 up_args=() toggle_loops=8 ;;
rxe) net=192.168.78 up_args=(--rxe) toggle_loops=1 ;;
# Linux has no RDS over iWARP (rds_rdma takes IB and RoCE devices only) and no SRP (its
# initiator needs IB's or RoCE's connection manager)
iwarp) net=192.168.77 up_args=(--iwarp) toggle_loops=8 workloads="nvme nfs iser" ;;
*) echo "QHCA_STORAGE_DEV must be qhca, rxe or iwarp, not '$dev'" >&2; exit 2 ;;
esac
srv=$net.2 cli=$net.1
only=${QHCA_STORAGE_ONLY-$workloads}
disrupt=${QHCA_STORAGE_DISRUPT:-link}
case $disrupt in
link|migrate) ;;
*) echo "QHCA_STORAGE_DISRUPT must be link or migrate, not '$disrupt'" >&2; exit 2 ;;
esac
quick=${QHCA_STORAGE_QUICK:-0}
case $quick in
0|1) ;;
*) echo "QHCA_STORAGE_QUICK must be 0 or 1, not '$quick'" >&2; exit 2 ;;
esac
[ "$quick" = 0 ] || [ "$disrupt" = link ] ||
    { echo "QHCA_STORAGE_QUICK=1 has no disruption: not with QHCA_STORAGE_DISRUPT=$disrupt" >&2; exit 2; }
nfs_sizes=${QHCA_STORAGE_NFS_SIZES-1 4097 1048576 33554432}
# The guests keep their files in RAM (tmpfs): NFS needs room for its largest file twice.
export QHCA_VM_MEM=${QHCA_VM_MEM:-1536}

# Helpers put in front of every guest script: fail prints what went wrong and exits; try runs
# a command and fails with its output.
prelude="set -u
SRV=$srv CLI=$cli"'
fail() { echo "$(hostname): $*" >&2; exit 1; }
try() { _o=$("$@" 2>&1) || fail "$* failed: $_o"; }
# the netdev that has address $1
nic_of() { ip -o -4 addr show | awk -v a="$1" "index(\$4, a \"/\") == 1 {print \$2}"; }
'

gsh() {	# gsh I TIMEOUT [ARGS...] < SCRIPT: run the shell script on stdin in guest I
    local i=$1 t=$2 rc; shift 2
    { printf '%s\n' "$prelude" "$guest_lib"; cat; } | timeout "$t" "$qhca" exec "$i" -- "sh -s -- $*"
    rc=$?
    [ "$rc" = 124 ] && echo "guest $i: timed out after $t s"
    return "$rc"
}

link() {	# link up|down: guest 2's RDMA link (qhca: the port; rxe: its virtio-net NIC)
    if [ "$dev" != rxe ]; then
        "$qhca" link 2 "$1"
    else
        gsh 2 30 "$srv" "$1" <<<'ip link set dev "$(nic_of "$1")" "$2" || fail "ip link set $2 failed"'
    fi
}

bg_start() {	# bg_start I < SCRIPT: run the script in guest I in the background (bg_wait)
    local i=$1
    { printf '%s\n' "$prelude" "$guest_lib"; cat; } | "$qhca" exec "$i" -- 'cat > /tmp/bg.sh' || return 1
    "$qhca" exec "$i" -- "rm -f /tmp/bg.rc /tmp/bg.log; setsid sh -c 'sh /tmp/bg.sh > /tmp/bg.log 2>&1; echo \$? > /tmp/bg.rc' < /dev/null > /dev/null 2>&1 &"
}

bg_wait() {	# bg_wait I TIMEOUT: wait for the background script of guest I; its status and log
    local rc
    eventually "$2" "$qhca" exec "$1" -- 'test -s /tmp/bg.rc' ||
        { echo "guest $1: still running after $2 s:"; "$qhca" exec "$1" -- 'tail -n 20 /tmp/bg.log'; return 1; }
    rc=$("$qhca" exec "$1" -- 'cat /tmp/bg.rc')
    "$qhca" exec "$1" -- 'tail -n 20 /tmp/bg.log'
    [ "$rc" = 0 ]
}

toggle_during() {	# toggle_during BEFORE DOWN TIMEOUT < SCRIPT: run SCRIPT in guest 1; after
    # BEFORE s take guest 2's link down for DOWN s (QHCA_STORAGE_DISRUPT=migrate: move guest 2,
    # then guest 1, to new QEMU processes); SCRIPT must then finish with status 0
    bg_start 1 || return 1
    sleep "$1"
    if [ "$disrupt" = migrate ]; then
        # The script repeats its I/O until /tmp/stop appears (migrate_loop).
        "$qhca" exec 1 -- 'test ! -e /tmp/bg.rc' ||
            { echo "the I/O ended before the first move: it tested nothing"; return 1; }
        "$qhca" migrate 2 || return 1
        "$qhca" migrate 1 || return 1
        "$qhca" exec 1 -- 'test ! -e /tmp/bg.rc' ||
            { echo "the I/O ended before the last move:"; bg_wait 1 5; return 1; }
        "$qhca" exec 1 -- 'touch /tmp/stop' || return 1
        bg_wait 1 "$3"
        return
    fi
    link down || return 1
    echo "link of guest 2 down"
    "$qhca" exec 1 -- 'test ! -e /tmp/bg.rc' ||
        { echo "the I/O finished before the link went down: it tested nothing"; link up; return 1; }
    sleep "$2"
    link up || return 1
    echo "link of guest 2 up again"
    bg_wait 1 "$3"
}

no_oops() {	# no kernel warning, oops or hung task in either guest (the logs read)
    local i bad=0
    for i in 1 2; do
        kernel_log_clean "$i" "BUG:|Oops|WARNING:|blocked for more than|Call Trace" | head -n 20
        [ "${PIPESTATUS[0]}" = 0 ] || bad=1
    done
    [ "$bad" = 0 ]
}

t_start=0
section() {	# section NAME: start timing a workload (the time goes to the log)
    [ "$t_start" = 0 ] || echo "# $section took $(( $(date +%s) - t_start )) s"
    section=$1 t_start=$(date +%s)
}

block_io() {	# block_io PROTO: fio with verification at 512 B to 1 MiB on PROTO's disk (PROTO_io)
    check "$1: fio verify bs=512 iodepth=32" "$1_io" 512 32 4m
    check "$1: fio verify bs=4k iodepth=128" "$1_io" 4k 128 16m
    check "$1: fio verify bs=64k iodepth=32" "$1_io" 64k 32 32m
    check "$1: fio verify bs=1m iodepth=8" "$1_io" 1m 8 32m
}

wanted() { [[ " $only " == *" $1 "* ]]; }

selection_valid() {	# QHCA_STORAGE_ONLY names at least one workload and only known ones;
    # QHCA_STORAGE_NFS_SIZES at least one size, each a positive number of bytes
    local w n=0 bad=0
    for w in $only; do
        n=$((n + 1))
        [[ " $workloads " == *" $w "* ]] || { echo "unknown workload '$w' (known: $workloads)"; bad=1; }
    done
    [ "$n" -gt 0 ] || { echo "QHCA_STORAGE_ONLY selects no workload (known: $workloads)"; bad=1; }
    n=0
    for w in $nfs_sizes; do
        n=$((n + 1))
        [[ $w =~ ^[1-9][0-9]*$ ]] || { echo "QHCA_STORAGE_NFS_SIZES: '$w' is not a size in bytes"; bad=1; }
    done
    [ "$n" -gt 0 ] || { echo "QHCA_STORAGE_NFS_SIZES has no size"; bad=1; }
    [ "$bad" = 0 ]
}

# ---------------------------------------------------------------- set-up
rdma_setup() {	# the RDMA device on $net.I in each guest, ACTIVE: qhca_0 (its netdev has the
    # address), or in rxe mode an rxe device made on the fabric NIC
    local i want=qhca_0
    [ "$dev" = rxe ] && want=rxe0
    for i in 1 2; do
        gsh "$i" 60 "$net.$i" "$dev" "$want" <<'EOF' || return 1
n=$(nic_of "$1"); [ -n "$n" ] || fail "no NIC has $1"
if [ "$2" = rxe ]; then
    rdma link show rxe0/1 > /dev/null 2>&1 || try rdma link add rxe0 type rxe netdev "$n"
fi
rdma link show "$3/1" | grep -q 'state ACTIVE' || fail "$3 is not ACTIVE: $(rdma link show "$3/1")"
if [ "$2" = iwarp ]; then
    grep -q RNIC /sys/class/infiniband/$3/node_type || fail "$3 is not an iWARP RNIC"
fi
[ "$(rdma_dev_of "$1")" = "$3" ] || fail "the RDMA device of $1 ($n) is '$(rdma_dev_of "$1")', not $3"
echo "$(hostname): $3 on $n ($1), ACTIVE"
EOF
    done
}

# Functions for the guest scripts (see prelude). fio_v DEV BS IODEPTH SIZE [EXTRA...]: fio
# with crc32c verification of every block written.
guest_lib='migrate_loop() {	# migrate_loop CMD...: CMD again and again until /tmp/stop, 2 times
    # at least (QHCA_STORAGE_DISRUPT=migrate: the moves happen meanwhile)
    rm -f /tmp/stop; _n=0
    while [ $_n -lt 2 ] || [ ! -e /tmp/stop ]; do "$@" || exit 1; _n=$((_n + 1)); done
    echo "$_n rounds while the guests moved"
}
fio_v() {
    _d=$1 _bs=$2 _qd=$3 _sz=$4; shift 4
    fio --name=verify --filename="$_d" --ioengine=libaio --direct=1 --rw=randwrite \
        --bs="$_bs" --iodepth="$_qd" --size="$_sz" --verify=crc32c --verify_fatal=1 \
        --do_verify=1 "$@" > /tmp/fio.log 2>&1 ||
        fail "fio bs=$_bs iodepth=$_qd size=$_sz on $_d: data error or I/O error: $(grep -iE "err|verify|bad" /tmp/fio.log | head -n 8)"
    grep -q "err= 0" /tmp/fio.log || fail "fio on $_d reported an error: $(tail -n 5 /tmp/fio.log)"
    echo "fio bs=$_bs iodepth=$_qd size=$_sz on $_d: $(grep -E "^ *(READ|WRITE):" /tmp/fio.log | sed "s/,.*//" | xargs)"
}
'

# ---------------------------------------------------------------- NVMe over Fabrics
nqn_file=nqn.2014-08.org.qhca:file
nqn_null=nqn.2014-08.org.qhca:nullb

nvme_target() {	# guest 2: nvmet-rdma with a file namespace (tmpfs) and a null_blk one
    gsh 2 120 "$srv" "$nqn_file" "$nqn_null" <<'EOF'
try modprobe nvmet-rdma
try modprobe null_blk nr_devices=0
# null_blk keeps data only when memory backed: 32 MiB of 512-byte blocks.
nb=/sys/kernel/config/nullb/nullb0
{ mkdir $nb && echo 1 > $nb/memory_backed && echo 32 > $nb/size && echo 512 > $nb/blocksize &&
  echo 1 > $nb/power; } || fail "null_blk: memory-backed nullb0 not created"
[ -b /dev/nullb0 ] || fail "null_blk: /dev/nullb0 missing"
try truncate -s 64M /tmp/nvme-file.img
n=/sys/kernel/config/nvmet
subsys() {	# subsys NQN DEVICE_PATH BUFFERED
    s=$n/subsystems/$1
    { mkdir $s && echo 1 > $s/attr_allow_any_host && mkdir $s/namespaces/1 &&
      echo "$2" > $s/namespaces/1/device_path && echo "$3" > $s/namespaces/1/buffered_io &&
      echo 1 > $s/namespaces/1/enable; } || fail "nvmet: subsystem $1 with namespace $2 not created"
}
subsys "$2" /tmp/nvme-file.img 1
subsys "$3" /dev/nullb0 0
p=$n/ports/1
{ mkdir $p && echo rdma > $p/addr_trtype && echo ipv4 > $p/addr_adrfam &&
  echo "$1" > $p/addr_traddr && echo 4420 > $p/addr_trsvcid; } || fail "nvmet: port 1 not created"
ln -s $n/subsystems/$2 $p/subsystems/$2 && ln -s $n/subsystems/$3 $p/subsystems/$3 ||
    fail "nvmet: port $1:4420 refused the subsystems: $(dmesg | tail -n 3)"
dmesg | grep -q "enabling port 1 ($1:4420)" || fail "nvmet-rdma did not enable $1:4420: $(dmesg | tail -n 3)"
EOF
}

guest_lib+='iscsi_disk() {	# the disk of the iSCSI session
    iscsiadm -m session -P3 2> /dev/null | sed -n "s/.*Attached scsi disk \(sd[a-z]*\).*/\1/p" | head -n 1
}
srp_disk() {	# the disk behind ib_srp
    for h in /sys/class/scsi_host/host*; do
        [ "$(cat $h/proc_name 2> /dev/null)" = ib_srp ] || continue
        for b in $h/device/target*/*/block/*; do [ -e "$b" ] && echo ${b##*/}; done
    done | head -n 1
}
rdma_dev_of() {	# the RDMA device whose netdev has address $1
    rdma link show | sed -n "s/^link \([^/]*\)\/1 .* netdev $(nic_of $1) *$/\1/p" | head -n 1
}
'
guest_lib+='nsdev() {	# the block device of the namespace of subsystem $1
    for b in /sys/block/nvme*n*; do
        case ${b##*/} in *c*) continue ;; esac
        [ "$(cat $b/device/subsysnqn 2>/dev/null)" = "$1" ] && echo /dev/${b##*/}
    done
}
connect() {
    nvme connect -t rdma -a "$SRV" -s 4420 -n "$1" --reconnect-delay=2 --ctrl-loss-tmo=60 > /tmp/nc.log 2>&1 ||
        fail "nvme connect to $1 at $SRV:4420 failed: $(cat /tmp/nc.log; dmesg | tail -n 5)"
    for _i in 1 2 3 4 5 6 7 8 9 10; do [ -n "$(nsdev "$1")" ] && return 0; sleep 1; done
    fail "nvme connect $1: no block device appeared: $(nvme list)"
}
'

nvme_connect() {	# guest 1: discover and connect both subsystems
    gsh 1 120 "$nqn_file" "$nqn_null" <<'EOF'
try modprobe nvme-rdma
# Requeued I/O waits for the reconnect; a short timeout makes a dead link show sooner.
echo 10 > /sys/module/nvme_core/parameters/io_timeout
out=$(nvme discover -t rdma -a "$SRV" -s 4420 2>&1) || fail "nvme discover at $SRV:4420 failed: $out"
for q in "$1" "$2"; do
    echo "$out" | grep -q "subnqn: *$q\$" || fail "nvme discover does not list $q: $out"
done
connect "$1"
connect "$2"
nvme list | grep -q "$(nsdev "$1")" || fail "nvme list does not show $(nsdev "$1"): $(nvme list)"
echo "file namespace $(nsdev "$1"), null_blk namespace $(nsdev "$2")"
EOF
}

nvme_io() {	# nvme_io NQN BS IODEPTH SIZE [EXTRA...]: fio with verification on a namespace
    local q=$1; shift
    gsh 1 300 "$q" "$@" <<'EOF'
d=$(nsdev "$1"); shift
[ -n "$d" ] || fail "no namespace of $1 connected"
fio_v "$d" "$@"
EOF
}

nvme_poll() {	# connect the file subsystem with a poll queue (its CQ polled: IB_POLL_DIRECT)
    gsh 1 300 "$nqn_file" <<'EOF'
dmesg -c > /dev/null
nvme connect -t rdma -a "$SRV" -s 4420 -n "$1" --nr-poll-queues=1 > /tmp/nc.log 2>&1 ||
    fail "nvme connect --nr-poll-queues=1 failed: $(cat /tmp/nc.log; dmesg | tail -n 5)"
for _i in 1 2 3 4 5 6 7 8 9 10; do [ -n "$(nsdev "$1")" ] && break; sleep 1; done
dmesg | grep -q "mapped [0-9]*/[0-9]*/1 default/read/poll queues" ||
    fail "no poll queue: $(dmesg | grep mapped)"
fio_v "$(nsdev "$1")" 4k 1 8m --ioengine=pvsync2 --hipri=1
nvme disconnect -n "$1" > /dev/null || fail "nvme disconnect -n $1 failed"
EOF
}

nvme_disconnect() {	# guest 1: disconnect both; no NVMe device left
    gsh 1 60 "$nqn_file" "$nqn_null" <<'EOF'
for q in "$1" "$2"; do
    out=$(nvme disconnect -n "$q" 2>&1) || fail "nvme disconnect -n $q failed: $out"
    echo "$out" | grep -q "disconnected 1 controller" || fail "nvme disconnect -n $q: $out"
done
[ -z "$(ls /sys/class/nvme/ 2>/dev/null)" ] || fail "controllers left after disconnect: $(ls /sys/class/nvme/)"
EOF
}

nvme_persist() {	# connect again: the data of the last run is still there (fio --verify_only)
    gsh 1 300 "$nqn_file" <<'EOF'
connect "$1"
fio_v "$(nsdev "$1")" 1m 8 32m --verify_only
nvme disconnect -n "$1" > /dev/null || fail "nvme disconnect -n $1 failed"
EOF
}

nvme_toggle() {	# fio over the file namespace with guest 2's link down for 5 s in the middle
    # (migrate: fio over and over while both guests move)
    local repeat=
    [ "$disrupt" = migrate ] && repeat=migrate_loop
    toggle_during 4 5 240 <<EOF
connect $nqn_file
$repeat fio_v "\$(nsdev $nqn_file)" 64k 32 48m --loops=$toggle_loops
nvme disconnect -n $nqn_file > /dev/null || fail "nvme disconnect -n $nqn_file failed"
EOF
    local rc=$?
    "$qhca" exec 1 -- 'dmesg | grep -E "nvme nvme[0-9]+: (Reconnecting|Successfully reconnected|failed)" | tail -n 3'
    return "$rc"
}

nvme_teardown() {	# guest 2: ports, subsystems, null_blk and the modules gone; guest 1: nvme-rdma
    gsh 2 120 "$nqn_file" "$nqn_null" <<'EOF'
n=/sys/kernel/config/nvmet
rm -f $n/ports/1/subsystems/* || fail "nvmet: unlinking subsystems from port 1 failed"
rmdir $n/ports/1 || fail "nvmet: removing port 1 failed"
for q in "$1" "$2"; do
    echo 0 > $n/subsystems/$q/namespaces/1/enable; rmdir $n/subsystems/$q/namespaces/1 &&
        rmdir $n/subsystems/$q || fail "nvmet: removing subsystem $q failed"
done
rmdir /sys/kernel/config/nullb/nullb0 || fail "null_blk: removing nullb0 failed"
rm -f /tmp/nvme-file.img
try modprobe -r nvmet-rdma nvmet null_blk
EOF
    gsh 1 60 <<<'try modprobe -r nvme-rdma nvme-fabrics'
}

nvme_again() { nvme_target && nvme_connect && nvme_disconnect && nvme_teardown; }

# ---------------------------------------------------------------- NFS over RDMA
nfs_server() {	# guest 2: nfsd exporting a tmpfs, RDMA listener on 20049; files to read
    gsh 2 180 "$net.0/24" $nfs_sizes <<'EOF'
try modprobe nfsd
try modprobe rpcrdma
mkdir -p /proc/fs/nfsd /export /run/rpcbind /var/lib/nfs/v4recovery
grep -q " /proc/fs/nfsd " /proc/mounts || try mount -t nfsd nfsd /proc/fs/nfsd
try mount -t tmpfs -o size=800m tmpfs /export
echo "/export $1(rw,no_root_squash,insecure,fsid=1,no_subtree_check)" > /etc/exports
shift
pidof rpcbind > /dev/null || try rpcbind -w
try exportfs -ra
try rpc.mountd
# No client to reclaim state: a short grace period, or NFSv4 opens wait 90 s.
echo 10 > /proc/fs/nfsd/nfsv4gracetime && echo 10 > /proc/fs/nfsd/nfsv4leasetime ||
    fail "nfsd: setting grace and lease time failed"
try rpc.nfsd 8
echo rdma 20049 > /proc/fs/nfsd/portlist || fail "nfsd: no RDMA listener on 20049: $(dmesg | tail -n 3)"
grep -q "^rdma 20049" /proc/fs/nfsd/portlist || fail "nfsd: portlist lacks rdma 20049: $(cat /proc/fs/nfsd/portlist)"
# Files for the server-to-client direction, with their checksums.
cd /export && for s in "$@"; do
    head -c "$s" /dev/urandom > srv.$s || fail "writing /export/srv.$s failed"
done
sha256sum srv.* > srv.sums
EOF
}

nfs_client() {	# nfs_client VERS OPTS: both directions through one mount, checked by sha256
    gsh 1 900 "$1" "$2" $nfs_sizes <<'EOF'
v=$1 o=$2; shift 2
m=/mnt/nfs
mkdir -p $m
mnt() { mount -t nfs -o "$o" "$SRV:/export" $m > /tmp/m.log 2>&1 ||
    fail "mount -t nfs -o $o $SRV:/export failed: $(cat /tmp/m.log; dmesg | tail -n 3)"
    grep " $m " /proc/mounts | grep -q "proto=rdma" || fail "the NFS mount does not use RDMA: $(grep " $m " /proc/mounts)"; }
umnt() { umount $m || fail "umount $m (vers=$v) failed"
    ! grep -q " $m " /proc/mounts || fail "$m still mounted"; }
mnt
rm -f /tmp/cli.sums
for s in "$@"; do
    head -c "$s" /dev/urandom > /tmp/cli.$s && cp /tmp/cli.$s $m/cli.$s.v$v ||
        fail "copying a $s-byte file to $SRV:/export (vers=$v) failed"
    echo "$(sha256sum < /tmp/cli.$s | cut -d" " -f1)  cli.$s.v$v" >> /tmp/cli.sums
    rm -f /tmp/cli.$s
done
cp /tmp/cli.sums $m/cli.v$v.sums || fail "copying the checksums to the server failed"
# A fresh mount: what follows is read over the wire, not from this client's page cache.
umnt
mnt
(cd $m && sha256sum -c /tmp/cli.sums > /tmp/c.log 2>&1) || fail "files written over NFS vers=$v read back wrong: $(grep -v OK /tmp/c.log)"
(cd $m && sha256sum -c srv.sums > /tmp/c.log 2>&1) || fail "server files read over NFS vers=$v wrong: $(grep -v OK /tmp/c.log)"
umnt
echo "vers=$v: $# files each way (sizes $*) checked"
EOF
}

nfs_server_check() {	# nfs_server_check VERS: the client's files arrived intact (checksums)
    gsh 2 300 "$1" <<'EOF'
cd /export || fail "no /export"
[ -s cli.v$1.sums ] || fail "no checksums from the client (cli.v$1.sums)"
sha256sum -c cli.v$1.sums > /tmp/c.log 2>&1 || fail "files written by the client over vers=$1 differ on the server: $(grep -v OK /tmp/c.log)"
echo "$(wc -l < cli.v$1.sums) client files checked"
rm -f cli.*
EOF
}

nfs_toggle() {	# write and read a 64 MiB file with guest 2's link down for 5 s meanwhile
    # (migrate: over and over while both guests move)
    local repeat=
    [ "$disrupt" = migrate ] && repeat=migrate_loop
    toggle_during 3 5 300 <<EOF
m=/mnt/nfs
mkdir -p \$m
copy() {
    mount -t nfs -o rdma,port=20049,vers=4.2 "\$SRV:/export" \$m || fail "mount vers=4.2 failed"
    head -c 67108864 /dev/urandom > /tmp/big || fail "no room for a 64 MiB file in /tmp"
    a=\$(sha256sum < /tmp/big)
    cp /tmp/big \$m/big && sync || fail "writing 64 MiB over NFS while the link went down failed"
    umount \$m && mount -t nfs -o rdma,port=20049,vers=4.2 "\$SRV:/export" \$m || fail "remount failed"
    b=\$(sha256sum < \$m/big) || fail "reading back over NFS failed"
    [ "\$a" = "\$b" ] || fail "64 MiB file read back wrong after the link toggle"
    rm -f \$m/big /tmp/big; umount \$m || fail "umount failed"
    echo "64 MiB written and read back intact"
}
$repeat copy
EOF
}

nfs_teardown() {	# server stopped, exports gone, modules unloaded on both sides
    gsh 1 60 <<<'grep -q " nfs" /proc/mounts && fail "NFS still mounted"; try modprobe -r nfsv4 nfsv3 rpcrdma'
    gsh 2 120 <<'EOF'
rm -f /export/* && try rpc.nfsd 0 && try exportfs -ua
kill $(pidof rpc.mountd) $(pidof rpcbind) 2> /dev/null
try umount /proc/fs/nfsd
try umount /export
try modprobe -r nfsd rpcrdma
EOF
}

nfs_again() {
    local nfs_sizes=4097
    nfs_server && nfs_client 4.2 rdma,port=20049,vers=4.2 && nfs_teardown
}

# ---------------------------------------------------------------- RDS
rds_server() {	# guest 2: qhca-rds server in the background, bound before we go on
    gsh 2 60 "$@" <<'EOF'
try modprobe rds_rdma
rm -f /tmp/rds.log /tmp/rds.rc
setsid sh -c "qhca-rds server $SRV 18634 $* > /tmp/rds.log 2>&1; echo \$? > /tmp/rds.rc" < /dev/null > /dev/null 2>&1 &
for i in 1 2 3 4 5 6 7 8 9 10; do
    grep -q bound /tmp/rds.log 2> /dev/null && exit 0
    [ -s /tmp/rds.rc ] && fail "qhca-rds server failed: $(cat /tmp/rds.log)"
    sleep 0.5
done
fail "qhca-rds server not bound after 5 s: $(cat /tmp/rds.log)"
EOF
}

rds_server_done() {	# the server saw every message right and exited 0
    eventually 60 "$qhca" exec 2 -- 'test -s /tmp/rds.rc' || { echo "qhca-rds server still running"; return 1; }
    "$qhca" exec 2 -- 'cat /tmp/rds.log; test "$(cat /tmp/rds.rc)" = 0'
}

rds_pingpong() {	# rds_pingpong CLIENT_ARGS: 1 B to 1 MiB messages both ways, checked
    rds_server || return 1
    gsh 1 300 "$@" <<'EOF' || { "$qhca" exec 2 -- 'cat /tmp/rds.log'; return 1; }
try modprobe rds_rdma
qhca-rds client $CLI $SRV 18634 "$@" || fail "qhca-rds client failed (status $?)"
EOF
    rds_server_done
}

rds_toggle() {	# messages keep flowing for 25 s; guest 2's link down for 5 s meanwhile
    rds_server -w 90 || return 1
    toggle_during 5 5 300 <<<'qhca-rds client $CLI $SRV 18634 -r 1 -t 25 -w 90 || fail "qhca-rds client failed (status $?)"' ||
        { "$qhca" exec 2 -- 'cat /tmp/rds.log'; rds_diagnose; return 1; }
    rds_server_done
}

# After a link loss RDS/IB drops the connection and its shutdown worker waits until every
# posted receive has come back flushed. RDS arms its receive CQ for solicited completions
# only, and rxe raises no completion event for an error (flush) completion on such a CQ, so
# the worker waits forever in rds_ib_conn_path_shutdown (D state) and the krdsd workqueue,
# which serves every RDS connection, with it: no RDS reconnects until reboot. Unloading
# rds_rdma tears the connections down the same way and hangs as well.
rds_rxe_gap="rxe raises no event for flush completions on a CQ armed for solicited ones: RDS/IB's shutdown hangs (docs/storage.md)"

rds_diagnose() {	# why RDS did not come back: say so plainly
    "$qhca" exec 1 -- 'dmesg | grep -E "RDS/IB: .*(status|disconnect)" | tail -n 2
        echo 1 > /proc/sys/kernel/sysrq; echo w > /proc/sysrq-trigger; sleep 1
        dmesg | grep -q "rds_ib_conn_path_shutdown" &&
        echo "diagnosis: the RDS/IB shutdown worker hangs in rds_ib_conn_path_shutdown waiting for flushed receives: the device raised no completion event for flush (error) completions on a CQ armed for solicited completions (IBTA: error completions must raise the event)"'
}

rds_unload() {
    local i
    for i in 1 2; do
        gsh "$i" 60 <<<'try modprobe -r rds_rdma rds' || return 1
    done
}

# ---------------------------------------------------------------- iSER (LIO target, open-iscsi)
iqn=iqn.2004-10.org.qhca:target

iser_target() {	# guest 2: LIO iSCSI target, a 64 MiB fileio LUN, portal $SRV:3260 with iSER
    gsh 2 120 "$iqn" <<'EOF'
try modprobe ib_isert
try modprobe target_core_file
C=/sys/kernel/config/target
b=$C/core/fileio_0/disk0
{ mkdir -p $b && echo "fd_dev_name=/tmp/iser.img,fd_dev_size=67108864" > $b/control &&
  echo 1 > $b/enable; } || fail "LIO: fileio backstore /tmp/iser.img not created"
t=$C/iscsi/$1/tpgt_1
{ mkdir -p $t/lun/lun_0 && ln -s $b $t/lun/lun_0/disk0; } || fail "LIO: LUN 0 of $1 not created"
mkdir $t/np/$SRV:3260 || fail "LIO: portal $SRV:3260 not created"
echo 1 > $t/np/$SRV:3260/iser || fail "LIO: iSER refused on portal $SRV:3260: $(dmesg | tail -n 3)"
# No authentication, any initiator (demo mode), writable.
for a in authentication=0 generate_node_acls=1 cache_dynamic_acls=1 demo_mode_write_protect=0; do
    echo ${a#*=} > $t/attrib/${a%=*} || fail "LIO: setting $a failed"
done
echo 1 > $t/enable || fail "LIO: enabling $1 failed"
EOF
}

iser_login() {	# guest 1: iscsid, discovery and login over iSER; the disk appears
    gsh 1 120 "$iqn" <<'EOF'
try modprobe ib_iser
try modprobe sd_mod
mkdir -p /run/lock/iscsi /etc/iscsi/nodes /etc/iscsi/send_targets
pidof iscsid > /dev/null || try iscsid
out=$(iscsiadm -m discovery -t st -p $SRV:3260 -I iser 2>&1) || fail "iSCSI discovery over iSER at $SRV:3260 failed: $out"
echo "$out" | grep -q "$1" || fail "discovery does not list $1: $out"
try iscsiadm -m node -T "$1" -p $SRV:3260 -I iser --login
iscsiadm -m session -P1 | grep -q "Iface Transport: iser" || fail "the session is not over iSER: $(iscsiadm -m session -P1)"
for i in 1 2 3 4 5 6 7 8 9 10; do d=$(iscsi_disk); [ -n "$d" ] && [ -b /dev/$d ] && break; sleep 1; done
[ -b "/dev/$d" ] || fail "no disk attached to the iSER session: $(iscsiadm -m session -P3 | tail -n 5)"
echo "iSER session, disk /dev/$d"
EOF
}

iser_io() {	# iser_io BS IODEPTH SIZE: fio with verification on the iSER disk
    gsh 1 300 "$@" <<'EOF'
d=$(iscsi_disk); [ -b "/dev/$d" ] || fail "no iSER disk"
fio_v /dev/$d "$@"
EOF
}

iser_logout() {	# guest 1: logout, records deleted, iscsid stopped, ib_iser unloaded
    gsh 1 120 "$iqn" <<'EOF'
try iscsiadm -m node -T "$1" -p $SRV:3260 -I iser --logout
# 21: "No active sessions" (ISCSI_ERR_NO_OBJS_FOUND), not any failure of iscsiadm
iscsiadm -m session > /dev/null 2>&1
[ $? = 21 ] || fail "a session is left after logout, or iscsiadm failed: $(iscsiadm -m session 2>&1)"
try iscsiadm -m node -o delete
try iscsiadm -m discoverydb -t st -p $SRV:3260 -I iser -o delete
try iscsiadm -k 0
try modprobe -r ib_iser
EOF
}

iser_toggle() {	# log in, fio with guest 2's link down 5 s, log out
    iser_login || return 1
    toggle_during 3 5 300 <<<"fio_v /dev/\$(iscsi_disk) 64k 32 48m --loops=$toggle_loops" || return 1
    gsh 1 30 <<<'dmesg | grep -E "detected conn error|session recovery|iSER" | tail -n 3'
    iser_logout
}

iser_teardown() {	# guest 2: target gone, LIO modules unloaded
    gsh 2 120 "$iqn" <<'EOF'
C=/sys/kernel/config/target t=$C/iscsi/$1/tpgt_1
echo 0 > $t/enable && rmdir $t/np/$SRV:3260 && rm $t/lun/lun_0/disk0 && rmdir $t/lun/lun_0 $t $C/iscsi/$1 &&
    rmdir $C/iscsi || fail "LIO: removing target $1 failed"
rmdir $C/core/fileio_0/disk0 $C/core/fileio_0 || fail "LIO: removing the backstore failed"
rm -f /tmp/iser.img
try modprobe -r ib_isert iscsi_target_mod target_core_file target_core_iblock target_core_mod
EOF
}

iser_again() { iser_target && iser_login && iser_io 4k 16 4m && iser_logout && iser_teardown; }

# ---------------------------------------------------------------- SRP (ib_srpt, ib_srp)
# ib_srpt names a port by its GID 0 (0x + 32 hex digits) and takes logins through rdma_cm on
# rdma_cm_port; the initiator port ID is 64 zero bits and the interface ID of the initiator's
# GID 0, the target port ID twice srpt_service_guid (the node GUID of the first RDMA device).
srp_target() {	# guest 2: ib_srpt with a 64 MiB fileio LUN for guest 1
    local ini
    ini=$(gsh 1 30 <<<'d=$(rdma_dev_of $CLI); [ -n "$d" ] || fail "no RDMA device has $CLI"; cat /sys/class/infiniband/$d/ports/1/gids/0') ||
        { echo "$ini"; return 1; }
    gsh 2 120 "0x0000000000000000$(echo "${ini#*:*:*:*:}" | tr -d :)" <<'EOF'
try modprobe ib_srpt
try modprobe target_core_file
d=$(rdma_dev_of $SRV); [ -n "$d" ] || fail "no RDMA device has $SRV"
C=/sys/kernel/config/target
b=$C/core/fileio_1/srp0
{ mkdir -p $b && echo "fd_dev_name=/tmp/srp.img,fd_dev_size=67108864" > $b/control &&
  echo 1 > $b/enable; } || fail "LIO: fileio backstore /tmp/srp.img not created"
[ -d $C/srpt ] || mkdir $C/srpt || fail "LIO: the srpt fabric did not register"
w=$C/srpt/0x$(tr -d : < /sys/class/infiniband/$d/ports/1/gids/0)
mkdir $w || fail "ib_srpt: no port $w ($d port 1)"
t=$w/tpgt_1 a=$w/tpgt_1/acls/$1
{ mkdir $t && mkdir $t/lun/lun_0 && ln -s $b $t/lun/lun_0/srp0; } || fail "ib_srpt: LUN 0 not created"
{ mkdir $a && mkdir $a/lun_0 && ln -s $t/lun/lun_0 $a/lun_0/lun_0; } || fail "ib_srpt: ACL for initiator $1 not created"
echo 5000 > $C/srpt/discovery_auth/rdma_cm_port || fail "ib_srpt: no rdma_cm listener on port 5000"
echo 1 > $t/enable || fail "ib_srpt: enabling $w failed"
EOF
}

srp_login() {	# guest 1 adds the target through rdma_cm (IDs from guest 2); the disk appears
    local g
    g=$(gsh 2 10 <<<'cat /sys/module/ib_srpt/parameters/srpt_service_guid') || { echo "$g"; return 1; }
    gsh 1 120 "${g#0x}" <<'EOF'
try modprobe ib_srp
try modprobe sd_mod
d=$(rdma_dev_of $CLI)
f=/sys/class/infiniband_srp/srp-$d-1/add_target
[ -e $f ] || fail "ib_srp: no $f"
echo "id_ext=$1,ioc_guid=$1,dest=$SRV:5000" > $f ||
    fail "ib_srp: add_target id_ext=$1,ioc_guid=$1,dest=$SRV:5000 refused: $(dmesg | grep -i srp | tail -n 3)"
for i in 1 2 3 4 5 6 7 8 9 10; do s=$(srp_disk); [ -n "$s" ] && [ -b /dev/$s ] && break; sleep 1; done
[ -b "/dev/$s" ] || fail "no disk behind the SRP target: $(dmesg | tail -n 3)"
echo "SRP disk /dev/$s"
EOF
}

srp_io() {	# srp_io BS IODEPTH SIZE: fio with verification on the SRP disk
    gsh 1 300 "$@" <<'EOF'
s=$(srp_disk); [ -b "/dev/$s" ] || fail "no SRP disk"
fio_v /dev/$s "$@"
EOF
}

srp_logout() {	# guest 1: remove the SRP target port; no ib_srp host left; ib_srp unloaded
    gsh 1 120 <<'EOF'
for p in /sys/class/srp_remote_ports/*; do
    [ -e "$p/delete" ] && { echo 1 > $p/delete || fail "ib_srp: deleting $p failed"; }
done
for i in 1 2 3 4 5 6 7 8 9 10; do [ -z "$(srp_disk)" ] && break; sleep 1; done
[ -z "$(srp_disk)" ] || fail "the SRP disk is still there"
try modprobe -r ib_srp
EOF
}

srp_toggle() {	# log in, fio with guest 2's link down 5 s, log out
    srp_login || return 1
    toggle_during 3 5 300 <<<"fio_v /dev/\$(srp_disk) 64k 32 48m --loops=$toggle_loops" || return 1
    gsh 1 30 <<<'dmesg | grep -iE "srp.*(reconnect|failed|error)" | tail -n 3'
    srp_logout
}

srp_teardown() {	# guest 2: target gone, ib_srpt and LIO unloaded
    gsh 2 120 <<'EOF'
C=/sys/kernel/config/target
for w in $C/srpt/0x*; do
    t=$w/tpgt_1
    echo 0 > $t/enable; rm -f $t/acls/*/lun_0/lun_0 && rmdir $t/acls/*/lun_0 $t/acls/* &&
        rm $t/lun/lun_0/srp0 && rmdir $t/lun/lun_0 $t $w || fail "ib_srpt: removing $w failed"
done
rmdir $C/srpt $C/core/fileio_1/srp0 $C/core/fileio_1 || fail "LIO: removing srpt or the backstore failed"
rm -f /tmp/srp.img
try modprobe -r ib_srpt target_core_file target_core_iblock target_core_mod
EOF
}

srp_all() { srp_target && srp_login && srp_io 4k 16 4m && srp_logout && srp_teardown; }

# ---------------------------------------------------------------- run
# After a failed check, what the kernels logged last and, over iWARP, why the device ended
# connections (QEMU's -d guest_errors): check shows only the end of the step's own output.
eval "check_step() $(declare -f check | tail -n +2)"
vms_up=0
check() {
    check_step "$@" && return
    local rc=$? g
    [ "$vms_up" = 1 ] || return "$rc"
    [ "$dev" = iwarp ] &&
        grep -h "iWARP connection\|TCP gave up" "$QHCA_RUN"/vm[12].qemu.log 2>/dev/null |
        tail -n 6 | sed 's/^/#   qemu: /'
    for g in 1 2; do
        timeout 20 "$qhca" exec "$g" -- 'dmesg | tail -n 12' 2>/dev/null | sed "s/^/#   vm$g: /"
    done
    return "$rc"
}
[ "$dev" = iwarp ] && export QHCA_QEMU_ARGS="${QHCA_QEMU_ARGS:-} -d guest_errors"
check "QHCA_STORAGE_ONLY ($only) and QHCA_STORAGE_NFS_SIZES ($nfs_sizes) valid" selection_valid ||
    { finish; exit 1; }
vm_up 2 "${up_args[@]}"
vms_up=1
echo "# storage over $dev: target/server $srv (guest 2), initiator/client $cli (guest 1)"
[ "$quick" = 0 ] || echo "# quick: each workload once; no link toggle, no NFS v3, no second round"
check "$dev: RDMA device on $net.x in both guests" rdma_setup
t_all=$(date +%s)

if wanted nvme; then
    section nvme
    check "nvme: nvmet-rdma target in guest 2 (file and null_blk namespaces, $srv:4420)" nvme_target
fi
if wanted nvme && [ "$disrupt" = migrate ]; then
    check "nvme: discover and connect both subsystems from guest 1, nvme list" nvme_connect
    check "nvme: disconnect both subsystems" nvme_disconnect
    check "nvme: both guests migrate during fio: no data error" nvme_toggle
    check "nvme: target torn down, nvmet, nvme-rdma and null_blk unloaded" nvme_teardown
elif wanted nvme && [ "$quick" = 1 ]; then
    check "nvme: discover and connect both subsystems from guest 1, nvme list" nvme_connect
    check "nvme: fio verify (crc32c) bs=4k iodepth=128 on the file namespace" nvme_io "$nqn_file" 4k 128 16m
    check "nvme: fio verify bs=512 iodepth=128 on null_blk (memory backed, 512 B blocks)" \
        nvme_io "$nqn_null" 512 128 4m
    check "nvme: disconnect both subsystems" nvme_disconnect
    check "nvme: target torn down, nvmet, nvme-rdma and null_blk unloaded" nvme_teardown
elif wanted nvme; then
    check "nvme: discover and connect both subsystems from guest 1, nvme list" nvme_connect
    check "nvme: fio verify (crc32c) bs=4k iodepth=128 on the file namespace" nvme_io "$nqn_file" 4k 128 16m
    check "nvme: fio verify bs=64k iodepth=32 on the file namespace" nvme_io "$nqn_file" 64k 32 32m
    check "nvme: fio verify bs=1m iodepth=8 on the file namespace" nvme_io "$nqn_file" 1m 8 32m
    check "nvme: fio verify bs=512 iodepth=128 on null_blk (memory backed, 512 B blocks)" \
        nvme_io "$nqn_null" 512 128 4m
    check "nvme: disconnect both subsystems" nvme_disconnect
    check "nvme: connect again, the data is still there (fio --verify_only)" nvme_persist
    check "nvme: a poll queue (IB_POLL_DIRECT), fio --hipri verify through it" nvme_poll
    check "nvme: guest 2's link down 5 s during fio: reconnect, no data error" nvme_toggle
    check "nvme: target torn down, nvmet, nvme-rdma and null_blk unloaded" nvme_teardown
    check "nvme: a new target and connection work after all that" nvme_again
fi

if wanted nfs; then
    section nfs
    check "nfs: nfsd in guest 2 exporting a tmpfs, RDMA listener on $srv:20049" nfs_server
fi
if wanted nfs && [ "$disrupt" = migrate ]; then
    check "nfs: both guests migrate during a 64 MiB copy: no data error" nfs_toggle
    check "nfs: server stopped, unmounted, nfsd, nfs and rpcrdma unloaded" nfs_teardown
elif wanted nfs && [ "$quick" = 1 ]; then
    check "nfs: vers=4.2 over RDMA, files of $nfs_sizes bytes both ways, sha256 checked" \
        nfs_client 4.2 rdma,port=20049,vers=4.2
    check "nfs: vers=4.2: the server has what the client wrote (sha256)" nfs_server_check 4.2
    check "nfs: server stopped, unmounted, nfsd, nfs and rpcrdma unloaded" nfs_teardown
elif wanted nfs; then
    check "nfs: vers=3 over RDMA, files of $nfs_sizes bytes both ways, sha256 checked" \
        nfs_client 3 rdma,port=20049,vers=3,nolock
    check "nfs: vers=3: the server has what the client wrote (sha256)" nfs_server_check 3
    check "nfs: vers=4.2 over RDMA, files of $nfs_sizes bytes both ways, sha256 checked" \
        nfs_client 4.2 rdma,port=20049,vers=4.2
    check "nfs: vers=4.2: the server has what the client wrote (sha256)" nfs_server_check 4.2
    check "nfs: guest 2's link down 5 s during a 64 MiB copy: no data error" nfs_toggle
    check "nfs: server stopped, unmounted, nfsd, nfs and rpcrdma unloaded" nfs_teardown
    check "nfs: a new server and mount work after all that" nfs_again
fi

if wanted rds; then
    section rds
    check "rds: messages of 1 B to 1 MiB both ways over RDS/RDMA, every byte checked (qhca-rds)" \
        rds_pingpong -r 3
    if [ "$quick" = 1 ] && [ "$dev" != rxe ]; then
        check "rds: rds_rdma and rds unloaded in both guests" rds_unload
    elif [ "$dev" = rxe ]; then
        skip "rds: guest 2's link down 5 s while messages flow" "$rds_rxe_gap"
        skip "rds: rds_rdma and rds unloaded in both guests" "$rds_rxe_gap"
    else
        check "rds: guest 2's link down 5 s while messages flow: none lost or wrong" rds_toggle
        check "rds: a new exchange works after that" rds_pingpong -r 1
        check "rds: rds_rdma and rds unloaded in both guests" rds_unload
    fi
fi

if wanted iser && [ "$quick" = 1 ]; then
    section iser
    check "iser: LIO iSCSI target with iSER in guest 2 ($iqn, 64 MiB fileio, $srv:3260)" iser_target
    check "iser: discovery and login over iSER from guest 1, the disk appears" iser_login
    check "iser: fio verify bs=64k iodepth=32" iser_io 64k 32 32m
    check "iser: logout, records deleted, iscsid stopped, ib_iser unloaded" iser_logout
    check "iser: target torn down, ib_isert and LIO unloaded" iser_teardown
elif wanted iser; then
    section iser
    check "iser: LIO iSCSI target with iSER in guest 2 ($iqn, 64 MiB fileio, $srv:3260)" iser_target
    check "iser: discovery and login over iSER from guest 1, the disk appears" iser_login
    block_io iser
    check "iser: logout, records deleted, iscsid stopped, ib_iser unloaded" iser_logout
    check "iser: guest 2's link down 5 s during fio: session recovers, no data error" iser_toggle
    check "iser: target torn down, ib_isert and LIO unloaded" iser_teardown
    check "iser: a new target and login work after all that" iser_again
fi

if wanted srp && [ "$quick" = 1 ]; then
    section srp
    check "srp: target, login, fio verify bs=4k, logout, teardown" srp_all
elif wanted srp; then
    section srp
    check "srp: ib_srpt target in guest 2 (64 MiB fileio, rdma_cm port 5000, ACL for guest 1)" srp_target
    check "srp: add_target through rdma_cm from guest 1, the disk appears" srp_login
    block_io srp
    check "srp: target port removed, no disk left, ib_srp unloaded" srp_logout
    check "srp: guest 2's link down 5 s during fio: reconnect, no data error" srp_toggle
    check "srp: target torn down, ib_srpt and LIO unloaded" srp_teardown
    check "srp: a new target and login work after all that" srp_all
fi

section end
echo "# all workloads took $(( $(date +%s) - t_all )) s"
check "no kernel oops, warning or hung task in either guest" no_oops
vm_down
finish
