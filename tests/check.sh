#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Run the test tiers, lowest first, and print one summary line, the last, alone:
#   N passed, N failed, N skipped
#   tests/check.sh [selftest|unit|sanitize|fuzz|fuzz-qemu|qtest|qtest-sanitize|vm|vm-storage|vm-migrate|flavours|kernels|qemu|disk ...]
#   (default: all but fuzz-qemu, qtest-sanitize, vm-storage, vm-migrate, kernels, qemu and
#   disk, the long runs of make check-sanitize, check-storage, check-migrate, check-kernels,
#   check-qemu and check-disk)
# Expects the builds of 'make all' in $QHCA_CACHE (selftest needs none). Sourced (as
# tests/selftest.sh does), it only defines the functions.
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"

total_pass=0 total_fail=0 total_skip=0
failed_tiers=()

# Count the TAP lines of a test's output and add them to the totals: "ok" passed, "ok ...
# # SKIP" skipped (never passed), "not ok" failed. A runner that failed with no "not ok" line
# (crash, build error) or that ran no test at all counts as one failure.
tally() {	# tally TIER LOGFILE EXIT_CODE [SECONDS]
    local tier=$1 log=$2 rc=$3 p f s
    [ -r "$log" ] || { echo "tally: no log $log" >&2; return 1; }
    s=$(grep -ciE '^ok .*# *skip' "$log")
    p=$(grep -cE '^ok ' "$log")
    p=$((p - s))
    f=$(grep -cE '^not ok ' "$log")
    if [ "$rc" != 0 ] && [ "$f" = 0 ]; then
        f=1	# the runner itself failed (crash, build error): count it
    elif [ $((p + f + s)) = 0 ]; then
        f=1	# it printed no result at all: nothing was tested
        echo "==> $tier: no test result in its output" >&2
    fi
    total_pass=$((total_pass + p))
    total_fail=$((total_fail + f))
    total_skip=$((total_skip + s))
    [ "$f" = 0 ] || failed_tiers+=("$tier")
    echo "==> $tier: $p passed, $f failed, $s skipped${4:+ in $4 s}" >&2
}

summary() {	# the final line, alone (CI reads it): N passed, N failed, N skipped
    [ ${#failed_tiers[@]} = 0 ] || echo "failed tiers: ${failed_tiers[*]}" >&2
    echo "$total_pass passed, $total_fail failed, $total_skip skipped"
    [ "$total_fail" = 0 ]
}

run_tier() {	# run_tier NAME COMMAND...
    local name=$1 log rc t0=$SECONDS; shift
    log=$(mktemp)
    step "test tier: $name"
    "$@" 2>&1 | tee "$log"
    rc=${PIPESTATUS[0]}
    tally "$name" "$log" "$rc" $((SECONDS - t0))
    rm -f "$log"
    return "$rc"
}

unit_tests() {	# unit_tests plain|sanitize
    local build rc=0 t every=3
    build=$(bash "$QHCA_ROOT/scripts/build-host.sh" "$1") || return 1
    # The transport and IB tests once more with the nodes' engines saved and loaded every
    # few steps (test-migrate.c): every 3 steps, every 11 under the sanitizers (slower).
    [ "$1" = sanitize ] && every=11
    local list=(test-engine test-roce test-iwarp test-tcp test-iw-cm test-ib test-transport test-bounds
                test-timers test-fabric test-ibswitch test-migrate migrate:test-transport
                migrate:test-ib)
    # Every unit test meson builds runs here: one left out of the list would never fail.
    local built
    built=$(sed -n "s/.*executable('\(test-[a-z0-9-]*\)'.*/\1/p" "$QHCA_ROOT/meson.build")
    [ "$(wc -w <<<"$built")" -ge 10 ] ||
        { echo "not ok - found only '$built' in meson.build's unit tests"; rc=1; }
    for t in $built; do
        [[ " ${list[*]} " == *" $t "* ]] ||
            { echo "not ok - $t: meson builds it, tests/check.sh does not run it"; rc=1; }
    done
    for t in "${list[@]}"; do
        local env=()
        if [ "${t%%:*}" = migrate ]; then
            t=${t#migrate:}
            env=(env "QHCA_TEST_MIGRATE=$every")
            echo "# $t with QHCA_TEST_MIGRATE=$every"
        fi
        if [ "$1" = sanitize ]; then
            # UBSan goes on after a report (halting would orphan the fabric tests' clients):
            # any report fails the test all the same.
            out=$("${env[@]}" "$build/$t" 2>&1) || rc=1
            printf '%s\n' "$out"
            if grep -q 'runtime error:' <<<"$out"; then
                echo "not ok - $t: UndefinedBehaviorSanitizer reported a runtime error"
                rc=1
            fi
        else
            "${env[@]}" "$build/$t" || rc=1
        fi
    done
    return $rc
}

qtests() {	# qtests [sanitize | dir BUILD]
    local b="$QHCA_CACHE/qemu" wrap="$QHCA_CACHE/qtest-wrap"
    if [ "${1:-}" = dir ]; then
        b=$2 wrap="$QHCA_CACHE/qtest-wrap-$(basename "$2")"
    elif [ "${1:-}" = sanitize ]; then
        bash "$QHCA_ROOT/scripts/build-qemu.sh" sanitize > /dev/null ||
            { echo "not ok - the ASan/UBSan QEMU did not build"; return 1; }
        b="$QHCA_CACHE/qemu-sanitize" wrap="$QHCA_CACHE/qtest-wrap-sanitize"
        # Any sanitizer report fails the run; QEMU's own exit-time leaks are not ours to judge.
        export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1
        export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
    fi
    [ -x "$b/tests/qtest/qhca-test" ] || { echo "not ok - qhca-test is not built (make qemu)"; return 1; }
    # A wrapper so QEMU finds SeaBIOS and the option ROMs; named like the binary so that
    # libqtest derives the architecture from it.
    mkdir -p "$wrap"
    printf '#!/bin/sh\nexec %s -L /usr/share/seabios -L %s "$@"\n' \
        "$b/qemu-system-x86_64" "$b/pc-bios/optionrom" > "$wrap/qemu-system-x86_64"
    chmod +x "$wrap/qemu-system-x86_64"
    QTEST_QEMU_BINARY="$wrap/qemu-system-x86_64" \
        "$b/tests/qtest/qhca-test" --tap 2>&1 | grep -v '^# starting QEMU'
    return "${PIPESTATUS[0]}"
}

# build_flavour F: the driver, siw, provider and image of flavour F (QHCA_FLAVOUR, scripts/lib.sh).
build_flavour() {
    local s
    for s in build-driver build-siw build-provider build-image; do
        QHCA_FLAVOUR=$1 bash "$QHCA_ROOT/scripts/$s.sh" > /dev/null ||
            { echo "not ok - $1: scripts/$s.sh failed"; return 1; }
    done
    echo "ok - $1: driver, siw, provider and image built"
}

# flavour_test F TEST [VAR=VALUE...]: tests/vm/TEST.sh on guests of flavour F (the VM tests
# follow QHCA_FLAVOUR), with the environment given.
flavour_test() {
    local f=$1 t=$2; shift 2
    run_tier "$f: $t" env QHCA_FLAVOUR="$f" "$@" bash "$QHCA_ROOT/tests/vm/$t.sh"
}

# flavour_tier F short|long: build flavour F; short: its guests come up and run the
# pingpongs and perftest (make check, for the flavours beside the default); long: also the
# verbs, NVMe-oF and middleware tiers (make check-kernels, each flavour its own kernel:
# 6.1, 6.12, 7.x).
flavour_tier() {
    run_tier "$1: build" build_flavour "$1" || return 0
    flavour_test "$1" test-foundation
    flavour_test "$1" smoke-flavour
    [ "$2" = long ] || return 0
    flavour_test "$1" test-verbs
    flavour_test "$1" test-storage QHCA_STORAGE_ONLY=nvme
    flavour_test "$1" test-middleware
}

# What the VM tiers need on the host: tshark (the wire test decodes captures with it), the
# verbs headers and a compiler (test-share builds a program on the host, as README shows).
VM_HOST_PKGS="tshark gcc libibverbs-dev librdmacm-dev"

# make check-qemu: the device on the newest QEMU whose source the archive serves (QEMU=SERIES
# for another): it builds with qemu-patches/, its qtests pass, guests boot and run RDMA on it;
# and the QEMU-side files and patches pass that tree's own scripts/checkpatch.pl.
qemu_build() {	# qemu_build SERIES: writes the source tree and build of it to $QHCA_CACHE/check-qemu
    local out
    out=$(QEMU=$1 bash "$QHCA_ROOT/scripts/build-qemu.sh") ||
        { echo "not ok - QEMU $1 with qemu-patches/ did not build"; return 1; }
    printf '%s\n' "$out" > "$QHCA_CACHE/check-qemu"
    echo "ok - QEMU $(sed -n 's/^qemu-version: //p' <<<"$out") builds with qemu-patches/"
    # A newer series that the archive lists but whose source this mirror does not serve is
    # not tested: a skip, named, never a pass.
    sed -n 's/^qemu-unavailable: //p' <<<"$out" | while read -r v; do
        echo "ok - QEMU $v, listed in the archive # SKIP its source could not be downloaded here; QEMU $(sed -n 's/^qemu-version: //p' <<<"$out") was built instead"
    done
}
checkpatch() {	# checkpatch TREE: the QEMU-side files and the patches, by TREE's checkpatch.pl
    local f out rc=0
    cd "$QHCA_ROOT" || return 1
    # Relative paths: checkpatch judges tests/ by the rules it has for tests.
    for f in hw-model/qemu/* tests/qtest/qhca-test.c qemu-patches/*.patch qemu-patches/*/*.patch; do
        case $f in *.patch) out=$(perl "$1/scripts/checkpatch.pl" --no-tree "$f" 2>&1) ;;
                   *) out=$(perl "$1/scripts/checkpatch.pl" --no-tree -f "$f" 2>&1) ;; esac
        if grep -q '^total: 0 errors, 0 warnings' <<<"$out"; then
            echo "ok - checkpatch.pl: $f"
        else
            echo "not ok - checkpatch.pl: $f"
            grep -E '^(ERROR|WARNING|total)' <<<"$out" | head -n 10 | sed 's/^/#   /'
            rc=1
        fi
    done
    return $rc
}
qemu_tier() {
    local series=${QEMU:-newest} src build
    run_tier "qemu $series: build" qemu_build "$series" || return 0
    src=$(sed -n 's/^qemu-src: //p' "$QHCA_CACHE/check-qemu")
    build=$(dirname "$(sed -n 's/^qemu: //p' "$QHCA_CACHE/check-qemu")")
    run_tier "qemu $series: qtest" qtests dir "$build"
    run_tier "qemu $series: checkpatch.pl" checkpatch "$src"
    run_tier "qemu $series: vm test-foundation" env QHCA_QEMU_DIR="$build" \
        bash "$QHCA_ROOT/tests/vm/test-foundation.sh"
    run_tier "qemu $series: vm smoke (pingpongs, perftest)" env QHCA_QEMU_DIR="$build" \
        bash "$QHCA_ROOT/tests/vm/smoke-flavour.sh"
}

# Sourced: the functions only.
[ "${BASH_SOURCE[0]}" = "$0" ] || return 0

tiers=("$@")
[ ${#tiers[@]} -gt 0 ] || tiers=(selftest unit sanitize fuzz qtest vm flavours)

for tier in "${tiers[@]}"; do
    case $tier in
    selftest) run_tier "selftest (the harness: check, skip, tally; the launcher)" bash "$QHCA_ROOT/tests/selftest.sh" ;;
    # test-iwarp has tshark decode the iWARP frames it builds
    unit) need_pkgs tshark; run_tier "unit (engine, fabric)" unit_tests plain ;;
    sanitize) need_pkgs tshark; run_tier "unit under ASan+UBSan" unit_tests sanitize ;;
    # the engine's targets (make fuzz runs QEMU's generic-fuzz too: its own QEMU build)
    fuzz) run_tier "fuzz smoke runs (${QHCA_FUZZ_SECONDS:-10} s each)" \
              bash "$QHCA_ROOT/scripts/fuzz.sh" "${QHCA_FUZZ_SECONDS:-10}" engine ;;
    fuzz-qemu) run_tier "QEMU's generic-fuzz over the device (${QHCA_FUZZ_SECONDS:-60} s)" \
              bash "$QHCA_ROOT/scripts/fuzz.sh" "${QHCA_FUZZ_SECONDS:-60}" qemu ;;
    qtest) run_tier "qtest (device through its registers)" qtests ;;
    qtest-sanitize) run_tier "qtest with QEMU and the qtest built with ASan+UBSan" qtests sanitize ;;
    vm) need_pkgs $VM_HOST_PKGS
        for t in "$QHCA_ROOT"/tests/vm/test-*.sh; do
            run_tier "vm: $(basename "$t" .sh)" env QHCA_STORAGE_QUICK=0 "$t"
        done
        # the kernel's storage protocols once more, over the device as an iWARP RNIC: each
        # once (make check-storage: with link toggles and second rounds, as over RoCE)
        run_tier "vm: test-storage over iWARP, quick (NVMe-oF, NFS, iSER)" \
            env QHCA_STORAGE_DEV=iwarp QHCA_STORAGE_QUICK=1 bash "$QHCA_ROOT/tests/vm/test-storage.sh" ;;
    vm-storage) need_pkgs $VM_HOST_PKGS	# make check-storage
        run_tier "vm: test-storage over iWARP (NVMe-oF, NFS, iSER)" \
            env QHCA_STORAGE_DEV=iwarp QHCA_STORAGE_QUICK=0 bash "$QHCA_ROOT/tests/vm/test-storage.sh" ;;
    # The other flavours' short tiers (the vm tier runs the default flavour, $QHCA_FLAVOUR).
    flavours) need_pkgs $VM_HOST_PKGS
        for f in $FLAVOURS; do
            [ "$f" = "$QHCA_FLAVOUR" ] || flavour_tier "$f" short
        done ;;
    vm-migrate) need_pkgs $VM_HOST_PKGS	# make check-migrate (QHCA_MIGRATE_STORAGE=1)
        run_tier "vm: test-migrate with the kernel's storage consumers" \
            bash "$QHCA_ROOT/tests/vm/test-migrate.sh" ;;
    qemu) need_pkgs $VM_HOST_PKGS
        qemu_tier ;;
    disk) need_pkgs $VM_HOST_PKGS
        run_tier "vm: a stock Debian 13 disk guest (disk-guest)" bash "$QHCA_ROOT/tests/vm/disk-guest.sh" ;;
    kernels) need_pkgs $VM_HOST_PKGS
        for f in $FLAVOURS; do flavour_tier "$f" long; done
        # Your kernel tree, built here from Debian's source (make check boots an unpacked one).
        run_tier "vm: test-kernel, a kernel built from Debian's linux source" \
            env QHCA_KERNEL_FROM=source bash "$QHCA_ROOT/tests/vm/test-kernel.sh" ;;
    *) die "unknown test tier '$tier' (selftest, unit, sanitize, fuzz, fuzz-qemu, qtest, qtest-sanitize, vm, vm-storage, vm-migrate, flavours, kernels, qemu, disk)" ;;
    esac
done

summary
