#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# make bench-net: the same two guests' ib_write_bw (64 KiB and 1 MiB messages) and
# ib_write_lat on each way of joining them (docs/fabric.md, "Which to choose"; docs/libvirt.md):
# the fabric; a bridge of qhca's own (--netdev tap); two "hosts" (namespaces) whose bridges a
# VXLAN joins over a 1500-byte veth (--bridge; device mtu=1024, guest MTU 1450), beside the
# fabric at mtu=1024; and libvirt running the guests, on the fabric and on a bridge. Needs
# root. A benchmark: it prints figures and judges nothing. Results in $QHCA_RUN/networks.txt.
set -uo pipefail
. "$(dirname "$0")/../scripts/lib.sh"
qhca="$QHCA_ROOT/tools/qhca"
[ "$(id -u)" = 0 ] || die "make bench-net needs root (namespaces, bridges, VXLAN, libvirt)"
export QHCA_RUN=${QHCA_RUN:-$QHCA_CACHE/run-bench-net}
run_b=$QHCA_RUN-b
out=$QHCA_RUN.txt
iters=${QHCA_BENCH_ITERS:-500}
ns_a=qhca-bn$$-a ns_b=qhca-bn$$-b ns_l=qhca-bn$$-l
lvdir=$(mktemp -d /tmp/qhca-bench-libvirtd.XXXXXX)
cleanup() {
    "$qhca" down > /dev/null 2>&1; QHCA_RUN=$run_b "$qhca" down > /dev/null 2>&1
    bash "$QHCA_ROOT/scripts/libvirtd-private.sh" stop "$lvdir" > /dev/null 2>&1
    for n in "$ns_a" "$ns_b" "$ns_l"; do [ -e "/run/netns/$n" ] && ip netns del "$n"; done
    rm -rf "$lvdir"
}
trap cleanup EXIT

# one SERVER_RUN PROG SIZE: PROG between guest 2 (in SERVER_RUN) and guest 1 (in $QHCA_RUN);
# prints MB/s (bandwidth) or typical us (latency).
one() {
    local srun=$1 prog=$2 size=$3 res
    QHCA_RUN=$srun "$qhca" exec 2 -- "pkill -f ^ib_; setsid $prog -d qhca_0 -x 3 -s $size -n $iters -F > /tmp/b.log 2>&1 < /dev/null &"
    sleep 2
    res=$(timeout 300 "$qhca" exec 1 -- "$prog -d qhca_0 -x 3 -s $size -n $iters -F 192.168.77.2" 2>&1 |
          awk -v p="$prog" '/^ *[0-9]+ +[0-9]+ / { if (p ~ /lat/) print $5; else print $4 }' | tail -n1)
    sleep 1
    echo "${res:-failed}"
}

declare -A fig
measure() {	# measure NAME [SERVER_RUN]: the three figures between the guests up now
    local name=$1 srun=${2:-$QHCA_RUN}
    step "bench-net: $name"
    fig[$name bw64k]=$(one "$srun" ib_write_bw 65536)
    fig[$name bw1m]=$(one "$srun" ib_write_bw 1048576)
    fig[$name lat]=$(one "$srun" ib_write_lat 8)
    echo "$name: ${fig[$name bw64k]} MB/s (64 KiB), ${fig[$name bw1m]} MB/s (1 MiB), ${fig[$name lat]} us (8 B)"
}
up() { "$qhca" down > /dev/null 2>&1; "$qhca" up -n 2 "$@" || die "up $* failed"; }
down() { "$qhca" down > /dev/null; }

up; measure "fabric"; down
QHCA_DEVICE_PROPS=mtu=1024 up; measure "fabric, mtu=1024"; down
up --netdev tap; measure "tap on a bridge of qhca's own"; down

# Two hosts: a bridge each with a VXLAN port over a 1500-byte veth (test-multihost, part d).
ip netns add "$ns_a" && ip netns add "$ns_b" &&
ip -n "$ns_a" link add veth-a type veth peer name veth-b netns "$ns_b" &&
ip -n "$ns_a" addr add 10.77.0.1/24 dev veth-a && ip -n "$ns_b" addr add 10.77.0.2/24 dev veth-b &&
for h in "a $ns_a 10.77.0.1 10.77.0.2" "b $ns_b 10.77.0.2 10.77.0.1"; do
    set -- $h
    ip -n "$2" link set "veth-$1" up && ip -n "$2" link add br0 type bridge &&
    ip -n "$2" link add vxlan77 type vxlan id 77 local "$3" remote "$4" dstport 4789 dev "veth-$1" &&
    ip -n "$2" link set vxlan77 master br0 up && ip -n "$2" link set br0 up || exit 1
done || die "cannot make the two hosts"
"$qhca" down > /dev/null 2>&1
QHCA_DEVICE_PROPS=mtu=1024 "$qhca" up -n 1 --bridge br0 --netns "$ns_a" || die "host A: up failed"
QHCA_DEVICE_PROPS=mtu=1024 QHCA_RUN=$run_b "$qhca" up -n 1 --first 2 --bridge br0 --netns "$ns_b" ||
    die "host B: up failed"
mtu='dev=$(ip -o -4 addr show to 192.168.77.0/24 | cut -d" " -f2) && ip link set dev $dev mtu 1450'
"$qhca" exec 1 -- "$mtu" && QHCA_RUN=$run_b "$qhca" exec 2 -- "$mtu" || die "cannot set the guests' MTU"
measure "VXLAN between two hosts, mtu=1024" "$run_b"
down; QHCA_RUN=$run_b "$qhca" down > /dev/null

# libvirt (a daemon of qhca's own, in a namespace with a bridge).
ip netns add "$ns_l" && ip -n "$ns_l" link set lo up && ip -n "$ns_l" link add br0 type bridge &&
ip -n "$ns_l" link set br0 mtu 9000 up || die "cannot make libvirt's namespace"
bash "$QHCA_ROOT/scripts/libvirtd-private.sh" start "$lvdir" "$ns_l" > /dev/null || die "no libvirtd"
uri="qemu:///system?socket=$lvdir/run/libvirt-sock"
up --libvirt "$uri" --netns "$ns_l"; measure "libvirt, on the fabric"; down
up --libvirt "$uri" --netns "$ns_l" --bridge br0; measure "libvirt, libvirt's tap on a bridge"; down

: > "$out"
printf '%-40s %16s %16s %16s\n' "" "write 64 KiB" "write 1 MiB" "write_lat 8 B"
printf '%-40s %16s %16s %16s\n' "" "MB/s" "MB/s" "us (typical)"
for name in "fabric" "fabric, mtu=1024" "tap on a bridge of qhca's own" \
            "VXLAN between two hosts, mtu=1024" "libvirt, on the fabric" \
            "libvirt, libvirt's tap on a bridge"; do
    printf '%-40s %16s %16s %16s\n' "$name" "${fig[$name bw64k]}" "${fig[$name bw1m]}" "${fig[$name lat]}"
    printf '{"net":"%s","write_bw_64k_MBps":"%s","write_bw_1m_MBps":"%s","write_lat_8_us":"%s"}\n' \
        "$name" "${fig[$name bw64k]}" "${fig[$name bw1m]}" "${fig[$name lat]}" >> "$out"
done
echo "results in $out"
