# SPDX-License-Identifier: GPL-2.0-or-later
# Storage figures for make bench (sourced by bench/run.sh, with the VMs up and rxe0 made):
# NVMe over Fabrics against a null_blk namespace (4 KiB random read IOPS at queue depth 32,
# 1 MiB sequential read and write) and NFSv3 over RDMA (sequential read of a 256 MiB file
# after a fresh mount), over the device that owns the addresses NET.1 and NET.2.
# tests/vm/test-storage.sh checks the data; this only measures.

storage_secs=${QHCA_BENCH_STORAGE_SECONDS:-10}

# bench_fio DEVICE RW BS DEPTH: one fio run in guest 1; prints IOPS (randread) or MB/s.
bench_fio() {
    "$qhca" exec 1 -- "fio --name=b --filename=$1 --ioengine=libaio --direct=1 --rw=$2 \
        --bs=$3 --iodepth=$4 --runtime=$storage_secs --time_based --output-format=json" |
        python3 -c 'import json, sys
j = json.load(sys.stdin)["jobs"][0]
d = j["read"] if j["read"]["io_bytes"] else j["write"]
print(int(d["iops"]) if sys.argv[1] == "randread" else round(d["bw"] * 1024 / 1e6, 1))' "$2"
}

# nvme_bench NET: target in guest 2 on NET.2 (null_blk, data discarded), initiator in guest 1;
# prints "IOPS READ_MB WRITE_MB".
nvme_bench() {
    local net=$1 dev r w q
    "$qhca" exec 2 -- "sh -s $net.2" <<'EOF' || return 1
set -e
modprobe nvmet-rdma
modprobe null_blk nr_devices=1 gb=8
cd /sys/kernel/config/nvmet
mkdir subsystems/bench
echo 1 > subsystems/bench/attr_allow_any_host
mkdir subsystems/bench/namespaces/1
echo /dev/nullb0 > subsystems/bench/namespaces/1/device_path
echo 1 > subsystems/bench/namespaces/1/enable
mkdir ports/9
echo rdma > ports/9/addr_trtype
echo ipv4 > ports/9/addr_adrfam
echo "$1" > ports/9/addr_traddr
echo 4420 > ports/9/addr_trsvcid
ln -s /sys/kernel/config/nvmet/subsystems/bench ports/9/subsystems/bench
EOF
    "$qhca" exec 1 -- "modprobe nvme-rdma && nvme connect -t rdma -a $net.2 -s 4420 -n bench > /dev/null" ||
        return 1
    sleep 2
    dev=$("$qhca" exec 1 -- 'for b in /sys/block/nvme*n*; do
        case ${b##*/} in *c*) continue ;; esac
        [ "$(cat $b/device/subsysnqn 2>/dev/null)" = bench ] && echo /dev/${b##*/}; done')
    [ -n "$dev" ] || { echo "no namespace of subsystem bench appeared" >&2; return 1; }
    q=$(bench_fio "$dev" randread 4k 32)
    r=$(bench_fio "$dev" read 1m 8)
    w=$(bench_fio "$dev" write 1m 8)
    "$qhca" exec 1 -- 'nvme disconnect -n bench > /dev/null'
    "$qhca" exec 2 -- 'cd /sys/kernel/config/nvmet && rm ports/9/subsystems/bench &&
        rmdir ports/9 && echo 0 > subsystems/bench/namespaces/1/enable &&
        rmdir subsystems/bench/namespaces/1 subsystems/bench && modprobe -r null_blk'
    echo "${q:-failed} ${r:-failed} ${w:-failed}"
}

# nfs_bench NET: nfsd in guest 2 serving a 256 MiB file over RDMA on NET.2; guest 1 reads it
# after a fresh mount; prints MB/s.
nfs_bench() {
    local net=$1 mbs
    "$qhca" exec 2 -- "sh -s $net.0/24" <<'EOF' || return 1
set -e
modprobe nfsd
modprobe rpcrdma
mkdir -p /proc/fs/nfsd /bench-export /run/rpcbind /var/lib/nfs/v4recovery
grep -q " /proc/fs/nfsd " /proc/mounts || mount -t nfsd nfsd /proc/fs/nfsd
grep -q " /bench-export " /proc/mounts || mount -t tmpfs -o size=300m tmpfs /bench-export
[ -f /bench-export/big ] || head -c 268435456 /dev/zero > /bench-export/big
echo "/bench-export $1(ro,no_root_squash,insecure,fsid=9,no_subtree_check)" > /etc/exports
pidof rpcbind > /dev/null || rpcbind -w
exportfs -ra
pidof rpc.mountd > /dev/null || rpc.mountd
grep -q "^rdma 20049" /proc/fs/nfsd/portlist 2>/dev/null || { rpc.nfsd 8; echo rdma 20049 > /proc/fs/nfsd/portlist; }
EOF
    "$qhca" exec 1 -- "modprobe rpcrdma; mkdir -p /mnt/bench &&
        mount -t nfs -o rdma,port=20049,vers=3,nolock $net.2:/bench-export /mnt/bench" || return 1
    mbs=$("$qhca" exec 1 -- python3 - <<'EOF'
import time
t, n = time.time(), 0
with open("/mnt/bench/big", "rb", buffering=0) as f:
    while True:
        b = f.read(1 << 20)
        if not b:
            break
        n += len(b)
print(round(n / (time.time() - t) / 1e6, 1) if n == 1 << 28 else "short")
EOF
)
    "$qhca" exec 1 -- 'umount /mnt/bench'

    echo "${mbs:-failed}"
}

storage_stop() {	# the NFS server of nfs_bench, in guest 2
    "$qhca" exec 2 -- 'rpc.nfsd 0; exportfs -ua; umount /bench-export; true' > /dev/null 2>&1
}
