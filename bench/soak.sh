#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# make soak: RC loses nothing, the long run. Two guests, every fabric port losing 5%,
# reordering 5%, duplicating 2% and corrupting 1% of frames, both directions; qhca-rcstress
# moves QHCA_SOAK_BYTES (default 1G) of WRITEs, READs, SENDs and atomics with every byte and
# every completion checked, at MTU 4096. Prints the time it took, the bytes, the devices'
# retransmissions, timeouts and dropped corrupt frames, and the fabric's counters, and
# appends them as a JSON line to results.txt in the run directory. Fails on any error.
# Before it, the device alone runs rping's exchange over iWARP through an impaired link for
# QHCA_SOAK_IW_SEEDS (4000) seeds.
set -uo pipefail
. "$(dirname "$0")/../scripts/lib.sh"
qhca="$QHCA_ROOT/tools/qhca"
export QHCA_RUN=${QHCA_RUN:-$QHCA_CACHE/run-soak}
bytes=${QHCA_SOAK_BYTES:-1G}
seed=${QHCA_SOAK_SEED:-1}
out="$QHCA_RUN/results.txt"

counter() {	# counter GUEST NAME
    "$qhca" exec "$1" -- "rdma statistic show link qhca_0/1" | tr ' ' '\n' |
        awk -v k="$2" 'prev == k { print; exit } { prev = $0 }'
}

# First the device alone: rping's exchange over iWARP, 100 rounds a seed through loss,
# duplication, reordering and links slow enough for spurious timeouts (unit test-iw-cm).
iw_seeds=${QHCA_SOAK_IW_SEEDS:-4000}
host_build=$(bash "$QHCA_ROOT/scripts/build-host.sh" plain) || die "host build failed"
step "soak: iWARP, rping's exchange through an impaired link, $iw_seeds seeds (device alone)"
QHCA_IW_RPING_SEEDS=$iw_seeds "$host_build/test-iw-cm" rping_impaired ||
    die "rping over iWARP failed through the impaired link (QHCA_HARNESS_LOG=1 QHCA_IW_RPING_ONE=SEED, the seed it names, for its story)"

"$qhca" down > /dev/null 2>&1
trap '"$qhca" down > /dev/null 2>&1' EXIT
step "soak: two VMs, fabric seed $seed"
"$qhca" up -n 2 --seed "$seed" || die "VMs did not boot"
"$qhca" fabric set all loss=5% reorder=5% dup=2% corrupt=1% || die "fabric set failed"
"$qhca" exec 2 -- 'setsid sh -c "qhca-rcstress -s -T 7200 > /tmp/soak.log 2>&1; echo \$? > /tmp/soak.rc" < /dev/null > /dev/null 2>&1 &'
sleep 1
step "soak: $bytes through 5% loss, 5% reorder, 2% dup, 1% corrupt (every byte checked)"
start=$(date +%s.%N)
"$qhca" exec 1 -- "qhca-rcstress -b $bytes -T 7200 192.168.77.2" | tail -n 8
rc=${PIPESTATUS[0]}
secs=$(echo "$(date +%s.%N) - $start" | bc)
fabric=$("$qhca" fabric show --json | python3 -c '
import json, sys
d = json.load(sys.stdin)
s = {}
for p in d["ports"]:
    for dirn in ("in", "out"):
        for k, v in p["counters"][dirn].items():
            s[k] = s.get(k, 0) + v
print(" ".join("%s=%d" % kv for kv in sorted(s.items())))')
retr=$(( $(counter 1 retransmits) + $(counter 2 retransmits) ))
tmo=$(( $(counter 1 timeouts) + $(counter 2 timeouts) ))
icrc=$(( $(counter 1 drop_bad_icrc) + $(counter 2 drop_bad_icrc) ))
echo "soak: $bytes in $secs s; packets retransmitted $retr, timeouts $tmo, corrupt frames dropped $icrc"
echo "soak: fabric $fabric"
mkdir -p "$QHCA_RUN"
echo "{\"soak_bytes\":\"$bytes\",\"seconds\":$secs,\"retransmits\":$retr,\"timeouts\":$tmo,\"bad_icrc\":$icrc,\"rc\":$rc,\"fabric\":\"$fabric\",\"seed\":$seed}" >> "$out"
[ "$rc" = 0 ] || die "the soak run failed (exit $rc); the server said: $("$qhca" exec 2 -- tail -n 5 /tmp/soak.log)"
