#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# make bench-families: one RDMA family after the other between the same two VMs, in one
# run, and Linux's software devices beside them: qhca's RoCE v2 and RoCE v1 (one Ethernet
# port, the GID picks the wire) with Linux rxe on the virtio-net NICs; qhca's iWARP port
# (up --iwarp) with Linux siw on the NICs; qhca's InfiniBand port (up --ib, opensm in guest
# 1). perftest's ib_write_bw, ib_read_bw and ib_send_bw at 64 KiB and ib_write_lat at 8 B
# on each (iWARP, siw: through rdma_cm, -R). Prints a table and writes families.txt (JSON
# lines) in the run directory. A benchmark, not a test: it reports, it does not judge.
#   QHCA_BENCH_ITERS   messages per bandwidth run (default 300; latency: 4 times as many)
set -uo pipefail
. "$(dirname "$0")/../scripts/lib.sh"
qhca="$QHCA_ROOT/tools/qhca"
export QHCA_RUN=${QHCA_RUN:-$QHCA_CACHE/run-bench}
out="$QHCA_RUN/families.txt"
iters=${QHCA_BENCH_ITERS:-300}
tests=("ib_write_bw 65536 MB/s" "ib_read_bw 65536 MB/s" "ib_send_bw 65536 MB/s"
       "ib_write_lat 8 us(typ/p99)")
cols=()
declare -A res

gid_of() {	# gid_of DEV TYPE: the index of DEV's GID of an IPv4 address of TYPE (v1, v2;
    # ibv_devinfo writes a v1 one in full, 0000:...:ffff:c0a8:4d01)
    "$qhca" exec 1 -- "ibv_devinfo -v -d $1" |
        awk -v t="$2" '/GID\[/ && /(::|0000:)ffff:/ && $0 ~ t { sub(/.*GID\[ */, ""); sub(/\].*/, ""); print; exit }'
}

# perf COLUMN DEV SERVER_ADDR ARGS: every test on DEV (ARGS: how perftest reaches the peer:
# -x GID, or -R for rdma_cm), the figures under COLUMN. perftest times by the TSC, whose
# rate it samples first; a sample too scattered in a TCG guest gives no figure, or one of
# zero: once more.
perf() {
    local col=$1 dev=$2 srv=$3 args=$4 t prog size n r try
    cols+=("$col")
    for t in "${tests[@]}"; do
        set -- $t
        prog=$1 size=$2 n=$iters
        [[ $prog == *lat ]] && n=$((iters * 4))
        step "bench-families: $col: $prog -s $size"
        for try in 1 2; do
            "$qhca" exec 2 -- "pkill -x $prog; setsid $prog -d $dev $args -s $size -n $n -F > /tmp/b.log 2>&1 < /dev/null &"
            sleep 2
            r=$(timeout 300 "$qhca" exec 1 -- "$prog -d $dev $args -s $size -n $n -F $srv" 2>&1 |
                awk -v p="$prog" '/^ *[0-9]+ +[0-9]+ / { if (p ~ /lat/) print $5 "/" $8; else print $4 }' |
                tail -n1)
            # a zero figure is perftest's TSC sample gone wrong too, not a measurement
            [ -n "$r" ] && ! [[ $r =~ ^0(\.0*)?(/|$) ]] && break
        done
        "$qhca" exec 2 -- "pkill -x $prog" > /dev/null 2>&1
        res[$col $prog]=${r:-failed}
        echo "$col: $prog -s $size: ${r:-failed}"
    done
}

up() {	# up ARGS...: two fresh VMs
    "$qhca" down > /dev/null 2>&1
    "$qhca" up -n 2 "$@" || die "VMs did not boot (up $*)"
}

trap '"$qhca" down > /dev/null 2>&1' EXIT
step "bench-families: RoCE v2 and v1 (qhca), Linux rxe"
up --rxe
for i in 1 2; do
    "$qhca" exec $i -- 'modprobe crc32_generic; modprobe rdma_rxe &&
        rdma link add rxe0 type rxe netdev $(grep -l 52:54:00:52:58 /sys/class/net/*/address | cut -d/ -f5)' ||
        die "cannot create rxe0 in guest $i"
done
sleep 2
g2=$(gid_of qhca_0 v2) g1=$(gid_of qhca_0 v1) gr=$(gid_of rxe0 v2)
[ -n "$g2" ] && [ -n "$g1" ] && [ -n "$gr" ] || die "no RoCE GID (v2: '$g2', v1: '$g1', rxe: '$gr')"
perf "RoCE v2" qhca_0 192.168.77.2 "-x $g2"
perf "RoCE v1" qhca_0 192.168.77.2 "-x $g1"
perf "rxe (v2)" rxe0 192.168.78.2 "-x $gr"

step "bench-families: iWARP (qhca), Linux siw"
up --iwarp --siw
perf "iWARP" qhca_0 192.168.77.2 "-R"
perf "siw" siw0 192.168.78.2 "-R"

step "bench-families: InfiniBand (qhca), opensm in guest 1"
up --ib
"$qhca" exec 1 -- 'opensm -B > /dev/null 2>&1' || die "opensm did not start"
for i in 1 2; do
    "$qhca" exec $i -- 'timeout 90 sh -c "until ibstat qhca_0 1 | grep -q Active; do sleep 1; done"' ||
        die "guest $i's InfiniBand port is not ACTIVE after 90 s"
done
perf "InfiniBand" qhca_0 192.168.77.2 ""
"$qhca" down > /dev/null 2>&1

: > "$out"
{
    printf '%-26s' ""
    for c in "${cols[@]}"; do printf ' %15s' "$c"; done
    printf '\n'
    for t in "${tests[@]}"; do
        set -- $t
        printf '%-26s' "$1 -s $2 ($3)"
        for c in "${cols[@]}"; do printf ' %15s' "${res[$c $1]}"; done
        printf '\n'
    done
} | tee "$QHCA_RUN/families-table.txt"
for t in "${tests[@]}"; do
    set -- $t
    for c in "${cols[@]}"; do
        printf '{"test":"%s","size":%s,"unit":"%s","family":"%s","value":"%s"}\n' \
            "$1" "$2" "$3" "$c" "${res[$c $1]}" >> "$out"
    done
done
echo "TCG guests, $(nproc) host cores, $iters messages per bandwidth run; results in $out"
