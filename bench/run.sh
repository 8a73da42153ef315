#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# make bench: qhca against Linux rxe between the same two VMs in one run (verbs, UCX,
# libfabric and MPI, NVMe-oF and NFS over RDMA), the RDMA families one after the other
# beside rxe and siw (bench/families.sh), the device alone
# (bench-engine) and the fabric switch alone (bench-fabric), the host's memcpy as the
# throughput baseline, 16384 QPs on one device in a VM of its own (bench/qp-scale.sh), and
# live migration and snapshots (bench/migration.sh).
# Prints a table and writes results.txt (JSON lines) in the run directory. A benchmark,
# not a test: it reports, it does not judge.
#   make bench PROFILE=1   also a profile of each guest's QEMU (linux-perf) during a 1 MiB
#                          ib_write_bw, top functions per thread, in the run directory
set -uo pipefail
. "$(dirname "$0")/../scripts/lib.sh"
qhca="$QHCA_ROOT/tools/qhca"
export QHCA_RUN=${QHCA_RUN:-$QHCA_CACHE/run-bench}
out="$QHCA_RUN/results.txt"
iters=${QHCA_BENCH_ITERS:-500}
export QHCA_VM_MEM=${QHCA_VM_MEM:-1536}	# the NFS file lives in the server's RAM

# perf DEV PROG SIZE GID: run PROG between the guests on DEV; prints the figure we report
# (bandwidth: the average MB/s; latency: typical/99th percentile in us).
perf() {
    local dev=$1 prog=$2 size=$3 gid=$4 srv res
    "$qhca" exec 2 -- "setsid $prog -d $dev -x $gid -s $size -n $iters -F > /tmp/b.log 2>&1 < /dev/null &"
    sleep 2
    srv=$([ "$dev" = qhca_0 ] && echo 192.168.77.2 || echo 192.168.78.2)
    res=$(timeout 300 "$qhca" exec 1 -- "$prog -d $dev -x $gid -s $size -n $iters -F $srv" 2>&1 |
          awk -v p="$prog" '/^ *[0-9]+ +[0-9]+ / { if (p ~ /lat/) print $5 "/" $8; else print $4 }' | tail -n1)
    sleep 1
    echo "${res:-failed}"
}

gid_index() {	# the RoCE v2 IPv4 GID of DEV in guest 1
    "$qhca" exec 1 -- "ibv_devinfo -v -d $1" |
        awk '/GID\[/ && /::ffff:/ && /v2/ { sub(/.*GID\[ */, ""); sub(/\].*/, ""); print; exit }'
}

step "bench: host memcpy of 1 MiB blocks"
gcc -O2 -o "$QHCA_CACHE/memcpy-bench" "$QHCA_ROOT/bench/memcpy.c"
memcpy_mb=$("$QHCA_CACHE/memcpy-bench")
echo "host memcpy: $memcpy_mb MB/s"

step "bench: the device alone (two engines back to back in one process)"
host_build=$(bash "$QHCA_ROOT/scripts/build-host.sh" plain) || die "host build failed"
engine_out=$("$host_build/bench-engine") || die "bench-engine failed"
echo "$engine_out"
step "bench: the fabric switch alone (frames through one port pair)"
fabric_out=$("$host_build/bench-fabric") || die "bench-fabric failed"
echo "$fabric_out"

"$qhca" down > /dev/null 2>&1
trap '"$qhca" down > /dev/null 2>&1' EXIT
"$qhca" up -n 2 --rxe || die "VMs did not boot"
tests=("ib_write_bw 65536 MB/s" "ib_write_bw 1048576 MB/s" "ib_read_bw 65536 MB/s"
       "ib_read_bw 1048576 MB/s" "ib_send_bw 65536 MB/s" "ib_send_bw 1048576 MB/s"
       "ib_write_lat 8 us(typ/p99)" "ib_send_lat 8 us(typ/p99)")
declare -A res
run_all() {	# run_all NAME DEVICE: every test on DEVICE, results under NAME
    local name=$1 dev=$2 gid t
    gid=$(gid_index "$dev")
    [ -n "$gid" ] || die "no RoCE v2 GID on $dev"
    for t in "${tests[@]}"; do
        set -- $t
        step "bench: $name: $1 -s $2"
        res[$name $1 $2]=$(perf "$dev" "$1" "$2" "$gid")
    done
}
run_all qhca qhca_0
[ "${PROFILE:-0}" = 1 ] && . "$QHCA_ROOT/bench/profile.sh" && profile_write_bw
# Then Linux rxe on the virtio-net NICs of the same VMs.
for i in 1 2; do
    "$qhca" exec $i -- 'modprobe crc32_generic; modprobe rdma_rxe &&
        rdma link add rxe0 type rxe netdev $(grep -l 52:54:00:52:58 /sys/class/net/*/address | cut -d/ -f5)' ||
        die "cannot create rxe0 in guest $i"
done
sleep 2
run_all rxe rxe0

# The stacks above verbs (UCX, libfabric, MPI) on each device.
. "$QHCA_ROOT/bench/middleware.sh"
declare -A mw mw_note
mw_bench qhca qhca_0 192.168.77.2
mw_bench rxe rxe0 192.168.78.2

# Storage: NVMe-oF and NFS over RDMA, on each device by its addresses.
. "$QHCA_ROOT/bench/storage.sh"
declare -A sto
for d in "qhca 192.168.77" "rxe 192.168.78"; do
    set -- $d
    step "bench: $1: NVMe-oF over a null_blk namespace"
    read -r sto[$1_iops] sto[$1_rd] sto[$1_wr] <<<"$(nvme_bench "$2" || echo failed failed failed)"
    step "bench: $1: NFSv3 over RDMA, sequential read of 256 MiB"
    sto[$1_nfs]=$(nfs_bench "$2" || echo failed)
    storage_stop
done

: > "$out"
printf '%-30s %14s %18s\n' "" "qhca" "rxe (virtio-net)"
for t in "${tests[@]}"; do
    set -- $t
    q=${res[qhca $1 $2]} r=${res[rxe $1 $2]}
    printf '%-30s %14s %18s\n' "$1 -s $2 ($3)" "$q" "$r"
    printf '{"test":"%s","size":%s,"unit":"%s","qhca":"%s","rxe":"%s"}\n' "$1" "$2" "$3" "$q" "$r" >> "$out"
done
for t in "iops NVMe-oF 4 KiB randread QD32 (IOPS)" "rd NVMe-oF 1 MiB seq read (MB/s)" \
         "wr NVMe-oF 1 MiB seq write (MB/s)" "nfs NFSv3/RDMA read 256 MiB (MB/s)"; do
    k=${t%% *} name=${t#* }
    printf '%-30s %14s %18s\n' "$name" "${sto[qhca_$k]}" "${sto[rxe_$k]}"
    printf '{"test":"%s","qhca":"%s","rxe":"%s"}\n' "$name" "${sto[qhca_$k]}" "${sto[rxe_$k]}" >> "$out"
done
mw_report "$out"
printf '{"test":"host_memcpy","size":1048576,"unit":"MB/s","value":"%s"}\n' "$memcpy_mb" >> "$out"
awk '$1 ~ /^(WRITE|READ|SEND)$/ { printf "{\"test\":\"engine %s\",\"size\":%s,\"GB/s\":%s,\"packets/s\":%s,\"ns/packet\":%s}\n", $1, $2, $4, $5, $6 }' \
    <<<"$engine_out" >> "$out"
awk '$2 == "B" { printf "{\"test\":\"fabric\",\"frame\":%s,\"frames/s\":%s,\"MB/s\":%s,\"switch ns/frame\":%s,\"writes/frame\":%s}\n", $1, $3, $4, $5, $6 }' \
    <<<"$fabric_out" >> "$out"
# QPs: one device with 16384 connected QPs, in a VM of its own (the two above go down).
"$qhca" down > /dev/null 2>&1
step "bench: 16384 QPs on one device (bench/qp-scale.sh)"
qps_out=$(QHCA_RUN="$QHCA_CACHE/run-qps" QHCA_BENCH_OUT="$out" bash "$QHCA_ROOT/bench/qp-scale.sh" 2>&1) ||
    qps_out="QPs: failed (make bench-qp shows why)"
# The RDMA families one after the other, beside rxe and siw (bench/families.sh).
"$qhca" down > /dev/null 2>&1
step "bench: RoCE v2, RoCE v1, iWARP and InfiniBand beside rxe and siw (bench/families.sh)"
fam_out=$(QHCA_RUN="$QHCA_CACHE/run-bench-families" bash "$QHCA_ROOT/bench/families.sh" 2>&1) ||
    fam_out="families: failed (make bench-families shows why)"
# Live migration and snapshots (bench/migration.sh), in guests of their own.
"$qhca" down > /dev/null 2>&1
step "bench: live migration and snapshots (bench/migration.sh)"
mig_out=$(QHCA_RUN="$QHCA_CACHE/run-bench-migrate" QHCA_BENCH_OUT="$out" bash "$QHCA_ROOT/bench/migration.sh" 2>&1) ||
    mig_out="migration: failed (make bench-migrate shows why)"
echo "$engine_out" | sed -n '1,2p;/^WRITE/p' | head -n 6
echo "$fabric_out"
grep -E '^(created|create:|modify|first message|destroy:|guest memory|host memory|QPs: failed)' <<<"$qps_out"
sed -n '/^qhca migrate 1/,/^two guests ready after up --snapshot/p;/B\/QP/p;/^migration: failed/p' <<<"$mig_out"
sed -n '/RoCE v2 .*RoCE v1/,/^TCG guests/p;/^families: failed/p' <<<"$fam_out"
echo "host memcpy 1 MiB: $memcpy_mb MB/s; results in $out"
