#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# make bench-migrate (and make bench): live migration and snapshots with qhca, figures:
#  - the device's state by the engine alone (bench-migrate: bytes a QP, idle and with WRITEs
#    in flight; save and load times at 1 to 10000 QPs);
#  - three moves of a guest idle and three during qhca-rcstress: QEMU's total time and
#    downtime, and the device's share of the downtime (its save and load, from the trace
#    events qhca_migrate_save/load);
#  - two guests ready after 'up' (a boot) and after 'up --snapshot' (a restore).
# Prints a table and appends JSON lines to the run directory's results.txt. A benchmark, not
# a test: it reports, it does not judge.
set -uo pipefail
. "$(dirname "$0")/../scripts/lib.sh"
qhca="$QHCA_ROOT/tools/qhca"
export QHCA_RUN=${QHCA_RUN:-$QHCA_CACHE/run-bench-migrate}
out=${QHCA_BENCH_OUT:-$QHCA_RUN/results.txt}
mkdir -p "$QHCA_RUN"

step "bench: the device's state, the engine alone (bench-migrate)"
host_build=$(bash "$QHCA_ROOT/scripts/build-host.sh" plain) || die "host build failed"
engine=$("$host_build/bench-migrate") || die "bench-migrate failed"
echo "$engine"
awk '$2 == "QPs" && $3 != "empty" { printf "{\"test\":\"migrate engine\",\"qps\":%s,\"kind\":\"%s\",\"bytes\":%s,\"bytes/qp\":%s,\"save ms\":%s,\"load ms\":%s}\n", $1, $3, $4, $6, $9, $12 }' \
    <<<"$engine" >> "$out"

"$qhca" down > /dev/null 2>&1
trap '"$qhca" down > /dev/null 2>&1' EXIT

# Ready times: a boot, then up --snapshot twice (the first may save, the second restores).
ready() {	# ready ARGS...: seconds until 'up -n 2 ARGS' returns
    local t0=$(date +%s.%N)
    "$qhca" down > /dev/null 2>&1
    t0=$(date +%s.%N)
    "$qhca" up -n 2 "$@" > /dev/null 2>&1 || die "up $* failed"
    echo "$(date +%s.%N) - $t0" | bc
}
step "bench: two guests ready: boot, then up --snapshot"
export QHCA_SNAPSHOT_DIR=$QHCA_RUN/snapshots	# the bench's own: the first saves
rm -rf "$QHCA_SNAPSHOT_DIR"
boot_s=$(ready)
ready --snapshot > /dev/null
snap_s=$(ready --snapshot)
ls "$QHCA_SNAPSHOT_DIR"/*/vm1.state > /dev/null 2>&1 || snap_s="?"
printf '{"test":"ready","boot s":%.1f,"snapshot s":%.1f}\n' "$boot_s" "$snap_s" >> "$out"

# Moves, with the device's trace events for its share.
"$qhca" down > /dev/null 2>&1
"$qhca" up -n 2 --trace 'qhca_migrate_*' > /dev/null 2>&1 || die "up failed"
device_ms() {	# device_ms GEN: the device's save (old QEMU) + load (new QEMU) of move GEN, ms
    local save load
    save=$(sed -n 's/.*qhca_migrate_save .* in \([0-9]*\) ns.*/\1/p' "$QHCA_RUN/vm1.qemu.log.m$1" | tail -n 1)
    load=$(sed -n 's/.*qhca_migrate_load .* in \([0-9]*\) ns.*/\1/p' "$QHCA_RUN/vm1.qemu.log" | tail -n 1)
    [ -n "$save" ] && [ -n "$load" ] || { echo "?"; return; }
    echo "scale=1; ($save + $load) / 1000000" | bc
}
move() {	# move LABEL: qhca migrate 1; prints "total_ms downtime_ms device_ms"
    local o gen
    o=$("$qhca" migrate 1 2>&1) || { echo "failed: $o" >&2; echo "? ? ?"; return; }
    gen=$(python3 -c 'import json,sys; print([v.get("migrations",0) for v in json.load(open(sys.argv[1]))["vms"] if v["index"] == 1][0])' "$QHCA_RUN/state.json")
    echo "$(sed -n 's/.*, \([0-9]*\) ms in all, the guest stopped \([0-9]*\) ms.*/\1 \2/p' <<<"$o") $(device_ms "$gen")"
}
step "bench: three moves of an idle guest"
idle=()
for k in 1 2 3; do idle+=("$(move)"); done
step "bench: three moves during qhca-rcstress (both ways)"
"$qhca" exec 2 -- "setsid sh -c 'qhca-rcstress -s -p 18840 > /tmp/b1.log 2>&1' < /dev/null > /dev/null 2>&1 &"
"$qhca" exec 1 -- "setsid sh -c 'qhca-rcstress -s -p 18841 > /tmp/b2.log 2>&1' < /dev/null > /dev/null 2>&1 &"
sleep 2
"$qhca" exec 1 -- "setsid sh -c 'qhca-rcstress -p 18840 -t 16 -b 4G 192.168.77.2 > /tmp/c1.log 2>&1' < /dev/null > /dev/null 2>&1 &"
"$qhca" exec 2 -- "setsid sh -c 'qhca-rcstress -p 18841 -t 16 -b 4G 192.168.77.1 > /tmp/c2.log 2>&1' < /dev/null > /dev/null 2>&1 &"
sleep 5
busy=()
for k in 1 2 3; do busy+=("$(move)"); sleep 2; done

accel=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get("accel", "?"))' "$QHCA_RUN/state.json" 2>/dev/null)
# downtime: QEMU's, at the source; device: the device's save at the source and its load at
# the destination (from the stream's first byte: that includes waiting for it)
printf '\n%-34s %10s %12s %14s\n' "qhca migrate 1 (${accel:-?}, 1 GiB guest)" "total ms" "downtime ms" "device ms"
for k in 0 1 2; do
    set -- ${idle[k]}
    printf '%-34s %10s %12s %14s\n' "idle, move $((k + 1))" "$1" "$2" "$3"
    printf '{"test":"migrate idle","total ms":"%s","downtime ms":"%s","device ms":"%s"}\n' "$1" "$2" "$3" >> "$out"
done
for k in 0 1 2; do
    set -- ${busy[k]}
    printf '%-34s %10s %12s %14s\n' "rcstress both ways, move $((k + 1))" "$1" "$2" "$3"
    printf '{"test":"migrate busy","total ms":"%s","downtime ms":"%s","device ms":"%s"}\n' "$1" "$2" "$3" >> "$out"
done
printf '%-34s %10.1f s\n%-34s %10.1f s\n' "two guests ready after up" "$boot_s" \
    "two guests ready after up --snapshot" "$snap_s"
echo "results in $out"
