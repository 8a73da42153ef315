#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Run each fuzz target for SECONDS (default 60) on its corpus in $QHCA_CACHE/fuzz/corpus,
# seeded from tests/fuzz/make_seeds.py: the engine targets admin, wqe, rx, mixed, migrate and iwarp, the
# InfiniBand switch's SMA and forwarding (ibswitch), the fabric's control commands and
# scripts (fabric_control), and qemu (QEMU's generic-fuzz over the whole device, built by
# build-qemu.sh fuzz). Prints "ok - fuzz_X: N executions, coverage
# C edges" per target; a crash is "not ok" with the reproducer's path.
#   scripts/fuzz.sh [SECONDS] [TARGET...]   (default: all; "engine": all but qemu)
set -uo pipefail
. "$(dirname "$0")/lib.sh"

secs=${1:-60}
shift || true
engine_targets=(admin wqe rx mixed migrate iwarp ibswitch fabric_control)
[ $# -gt 0 ] || set -- engine qemu
targets=()
for t in "$@"; do
    if [ "$t" = engine ]; then targets+=("${engine_targets[@]}"); else targets+=("$t"); fi
done
dir=$(bash "$QHCA_ROOT/scripts/build-fuzz.sh") || exit 1
fail=0

# QEMU's own libFuzzer build: generic-fuzz drives MMIO/PIO on the qhca device's BARs and
# answers its DMA with fuzzed data, so the adapter (hw-model/qemu) is fuzzed with the engine.
qemu_fuzzer() {	# qemu_fuzzer SECONDS CORPUS LOG
    local b
    b=$(bash "$QHCA_ROOT/scripts/build-qemu.sh" fuzz | sed -n 's/^qemu: //p') || return 1
    # One line: QEMU splits QEMU_FUZZ_ARGS at spaces. The option ROMs come from the plain build.
    QEMU_FUZZ_ARGS="-nodefaults -L /usr/share/seabios -L $QHCA_CACHE/qemu/pc-bios/optionrom -device qhca,mac=52:54:00:51:48:09" \
    QEMU_FUZZ_OBJECTS="qhca*" \
        "$b" --fuzz-target=generic-fuzz -max_total_time="$1" -print_final_stats=1 \
        -timeout=10 -rss_limit_mb=4096 "$2" "$dir/seeds/qemu" > "$3" 2>&1
}

for t in "${targets[@]}"; do
    corpus="$dir/corpus/$t"
    mkdir -p "$corpus" "$dir/crashes/$t"
    log="$dir/fuzz_${t}_${secs}s.log"
    step "fuzz: fuzz_$t for $secs s"
    if [ "$t" = qemu ]; then
        (cd "$dir/crashes/$t" && qemu_fuzzer "$secs" "$corpus" "$log")
    else
        (cd "$dir/crashes/$t" && "$dir/fuzz_$t" -max_total_time="$secs" -print_final_stats=1 \
            -max_len=65536 -timeout=10 -rss_limit_mb=2048 "$corpus" "$dir/seeds/$t" > "$log" 2>&1)
    fi
    rc=$?
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n1)
    cov=$(grep -ao 'cov: [0-9]*' "$log" | tail -n1 | cut -d' ' -f2)
    if [ $rc = 0 ] && ! [[ ${execs:-} =~ ^[1-9][0-9]*$ ]]; then
        # exit 0 but no execution counted: the target did not run (nothing was fuzzed)
        echo "not ok - fuzz_$t: exit 0 but no executions in its log $log"
        tail -n 5 "$log" | sed 's/^/#   /'
        fail=1
    elif [ $rc = 0 ]; then
        echo "ok - fuzz_$t: $execs executions, coverage ${cov:-?} edges"
    else
        echo "not ok - fuzz_$t: exit $rc; reproducer in $dir/crashes/$t; log $log"
        grep -aE 'ERROR|SUMMARY|runtime error' "$log" | head -n 5 | sed 's/^/#   /'
        fail=1
    fi
done
exit $fail
