#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Self-test of the test harness, no VM needed (the first tier of tests/check.sh): the helpers
# of tests/vm/lib.sh (check, skip, finish, vm_up's guard, the negatives kernel_log_clean and
# ping_lost, via_qhca), the tally and summary of tests/check.sh, what 'qhca run' makes of
# a test's output (tests/selftest_run.py), and what the launcher takes from a guest
# (tests/selftest_launcher.py). A harness that cannot fail makes every test pass;
# here each helper is fed a failing case and must fail it.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
n_ok=0 n_bad=0

say() {	# say NAME CONDITION...: this self-test's own result line
    local name=$1; shift
    if "$@"; then
        echo "ok - selftest: $name"; n_ok=$((n_ok + 1))
    else
        echo "not ok - selftest: $name"; n_bad=$((n_bad + 1))
    fi
}

# lib NAME SCRIPT: run SCRIPT in a fresh bash that sourced tests/vm/lib.sh; its output in
# $out (the lib's own "ok"/"not ok" lines stay in there, out of this test's TAP), its
# status in $rc.
lib() {
    out=$(bash -c '. "$1/vm/lib.sh"; eval "$2"' lib "$here" "$1" 2>&1)
    rc=$?
}

has() { grep -qxF -- "$1" <<<"$out"; }
lacks() { ! grep -qF -- "$1" <<<"$out"; }

# ---- check
lib 'check "a failing command" false; echo "rc=$? pass=$pass fail=$fail"'
say "check: a failing command prints 'not ok'" has "not ok - a failing command"
say "check: a failing command returns non-zero, counted as failed" has "rc=1 pass=0 fail=1"
lib 'check "exit 3" sh -c "exit 3"; echo "rc=$?"'
say "check: returns the command's own status" has "rc=3"
lib 'check "a passing command" true; echo "rc=$? pass=$pass fail=$fail"'
say "check: a passing command prints 'ok'" has "ok - a passing command"
say "check: a passing command returns 0, counted as passed" has "rc=0 pass=1 fail=0"
lib 'check "fails with output" sh -c "echo the reason; exit 1"'
say "check: a failure shows the command's output" has "#   the reason"
lib 'check "guarded" false || { echo guard fired; exit 1; }; echo went on'
say "check: a guard 'check ... || exit' fires" eval 'has "guard fired" && lacks "went on" && [ "$rc" = 1 ]'

# ---- skip and finish
lib 'check a true; skip b "not here"; check c false; echo "pass=$pass fail=$fail skipped=$skipped"; finish; echo "finish=$?"'
say "skip: prints TAP's SKIP directive" has "ok - b # SKIP not here"
say "skip: counted as skipped, not as passed" has "pass=1 fail=1 skipped=1"
say "finish: 'N passed, N failed, N skipped'" has "1 passed, 1 failed, 1 skipped"
say "finish: non-zero after a failure" has "finish=1"
lib 'check a true; skip b why; finish; echo "finish=$?"'
say "finish: 0 when nothing failed" eval 'has "1 passed, 0 failed, 1 skipped" && has "finish=0"'

# ---- vm_up: a failed up ends the test at once
lib 'qhca=false; vm_up 2; echo "went on to the checks"'
say "vm_up: a failed up prints 'not ok' and ends the test (exit 1)" \
    eval 'has "not ok - up -n 2" && lacks "went on" && [ "$rc" = 1 ] && has "0 passed, 1 failed, 0 skipped"'

# ---- the negatives of lib.sh need the specific failure, not any failure. A stand-in for
# tools/qhca: "exec I -- CMD" runs CMD here, with dmesg and ping faked by $FAKE.
stub='fakeq() { [ "$1" = exec ] || return 1; shift 3; case $1 in
    dmesg) eval "$FAKE" ;;
    ping) eval "$FAKE" ;;
    *) bash -c "$*" ;; esac; }; qhca=fakeq'
lib "$stub; FAKE='echo boot; echo fine'; kernel_log_clean 1; echo rc=\$?"
say "kernel_log_clean: a clean log passes" has "rc=0"
lib "$stub; FAKE='echo boot; echo \"WARNING: CPU: 0 at x\"'; kernel_log_clean 1; echo rc=\$?"
say "kernel_log_clean: a warning fails" has "rc=1"
lib "$stub; FAKE='echo boot; echo \"traps: x[1] general protection fault ip:1 in liby\"'; kernel_log_clean 1 \"\$KERNEL_LOG_BAD\" 'traps: x\\[[0-9]+\\]'; echo rc=\$?"
say "kernel_log_clean: a line EXCEPT names passes" has "rc=0"
lib "$stub; FAKE='echo \"traps: x[1] general protection fault\"; echo \"Oops: 0002\"'; kernel_log_clean 1 \"\$KERNEL_LOG_BAD\" 'traps: x\\[[0-9]+\\]'; echo rc=\$?"
say "kernel_log_clean: another bad line still fails with EXCEPT" has "rc=1"
lib "$stub; FAKE='echo boot; echo fine'; kernel_log_clean 1 \"\$KERNEL_LOG_BAD\" 'a[('; echo rc=\$?"
say "kernel_log_clean: a bad EXCEPT regex fails" eval 'has "rc=1" && ! lacks "bad EXCEPT regex"'
lib "$stub; FAKE='return 1'; kernel_log_clean 1; echo rc=\$?"
say "kernel_log_clean: dmesg failing fails (not 'no oops')" has "rc=1"
lib "$stub; FAKE='true'; kernel_log_clean 1; echo rc=\$?"
say "kernel_log_clean: an empty log fails" has "rc=1"
lib "$stub; FAKE='echo \"2 packets transmitted, 0 received, 100% packet loss, time 1001ms\"; return 1'; ping_lost 1 10.0.0.1; echo rc=\$?"
say "ping_lost: ping ran and lost everything: passes" has "rc=0"
lib "$stub; FAKE='echo \"ping: socket: Operation not permitted\"; return 2'; ping_lost 1 10.0.0.1; echo rc=\$?"
say "ping_lost: ping failing to run fails" has "rc=1"
lib "$stub; FAKE='return 255'; ping_lost 1 10.0.0.1; echo rc=\$?"
say "ping_lost: the exec failing fails" has "rc=1"
lib "$stub; FAKE='echo \"2 packets transmitted, 1 received, 50% packet loss\"; return 0'; ping_lost 1 10.0.0.1; echo rc=\$?"
say "ping_lost: a reply fails" has "rc=1"

# via_qhca: counters that grow enough pass; too little growth, unreadable counters or a
# failed command fail.
cnt='d=$(mktemp -d); mkdir -p $d/1 $d/2; for i in 1 2; do echo 100 > $d/$i/tx; echo 100 > $d/$i/rx; done
roce_bytes() { echo "$(cat $d/$1/tx) $(cat $d/$1/rx)"; }
grow() { for i in 1 2; do echo $((100 + $1)) > $d/$i/tx; echo $((100 + $1)) > $d/$i/rx; done; }'
lib "$cnt; via_qhca '1000 1000' grow 1000; echo rc=\$?"
say "via_qhca: counters grown by the bytes moved: passes" has "rc=0"
lib "$cnt; via_qhca '1000 1000' grow 999; echo rc=\$?"
say "via_qhca: counters grown by less than the bytes moved: fails" has "rc=1"
lib "$cnt; via_qhca '1000 1000' eval 'grow 5000; false'; echo rc=\$?"
say "via_qhca: the command failing fails" has "rc=1"
lib "$stub; via_qhca '1' true; echo rc=\$?"
say "via_qhca: counters that cannot be read fail" has "rc=1"

# ---- tests/check.sh: tally and the summary line
tally_out=$(
    . "$here/check.sh"
    log=$(mktemp)
    printf '%s\n' "ok - a" "ok - b # SKIP not here" "not ok - c" "ok 4 /qtest/x # SKIP no kvm" \
        "ok 5 /qtest/y" "# ok - a comment" > "$log"
    tally T1 "$log" 1 2> /dev/null
    echo "t1: $total_pass $total_fail $total_skip"
    : > "$log"; tally T2 "$log" 0 2> /dev/null
    echo "t2: $total_pass $total_fail $total_skip"
    echo "ok - x" > "$log"; tally T3 "$log" 2 2> /dev/null
    echo "t3: $total_pass $total_fail $total_skip"
    rm -f "$log"
    summary 2> /dev/null
    echo "summary=$?"
)
out=$tally_out
say "tally: lines with the SKIP directive counted as skipped, not passed" has "t1: 2 1 2"
say "tally: a runner with no result line counts as a failure" has "t2: 2 2 2"
say "tally: a runner that failed with no 'not ok' counts as a failure" has "t3: 3 3 2"
say "summary: the last line is exactly 'N passed, N failed, N skipped'" \
    eval '[ "$(tail -n 2 <<<"$out" | head -n 1)" = "3 passed, 3 failed, 2 skipped" ]'
say "summary: non-zero after a failure" has "summary=1"

# ---- tests/layers.sh: the layers of the house, on this tree and on a copy that breaks them
say "layers: every layer includes only the headers it may use (tests/layers.sh)" \
    bash "$here/layers.sh"
lay=$(mktemp -d)
mkdir -p "$lay/abi" "$lay/wire" "$lay/hw-model/engine" "$lay/fabric"
touch "$lay/abi/qhca_abi.h" "$lay/wire/roce.h" "$lay/hw-model/engine/engine_internal.h"
printf '#include "roce.h"\n#include "engine_internal.h"\n' > "$lay/fabric/switch.c"
printf '#include "qhca_abi.h"\n' > "$lay/wire/ib.c"
printf '#include "qemu/osdep.h"\n' > "$lay/hw-model/engine/qp.c"
out=$(bash "$here/layers.sh" "$lay" 2>&1); rc=$?
say "layers: a fabric file that includes a device header fails" \
    eval '[ "$rc" != 0 ] && grep -q "fabric/switch.c includes \"engine_internal.h\"" <<<"$out"'
say "layers: a codec that includes abi/ fails (wire/ uses only wire/)" \
    grep -q 'wire/ib.c includes "qhca_abi.h"' <<<"$out"
say "layers: an engine file with a QEMU header fails" grep -q 'engine/qp.c includes a QEMU header' <<<"$out"
say "layers: the fabric may include wire/ headers" eval '! grep -q "includes \"roce.h\"" <<<"$out"'
rm -rf "$lay"

# ---- the launcher in Python, by scripts of their own whose "ok"/"not ok" lines are this
# test's own (a failure of a script with no "not ok" line counts as one):
# tests/selftest_run.py: what 'qhca run' makes of a test's output (tools/qhcatool/tap.py):
# TAP parsing, the verdict of a run, the bounded capture and the TAP and JUnit files;
# tests/selftest_launcher.py: what the launcher takes from a guest (qhca cp's archives, the
# guests' output and serial logs) and the package's shape.
for script in selftest_run.py selftest_launcher.py; do
    py_out=$(python3 "$here/$script" 2>&1)
    py_rc=$?
    py_bad=0
    while IFS= read -r line; do
        case $line in
        "ok - selftest: "*) echo "$line"; n_ok=$((n_ok + 1)) ;;
        "not ok - selftest: "*) echo "$line"; n_bad=$((n_bad + 1)) py_bad=1 ;;
        "") ;;
        *) echo "#   ${line#\#   }" ;;
        esac
    done <<<"$py_out"
    [ "$py_rc" = 0 ] || [ "$py_bad" = 1 ] ||
        say "tests/$script ran to its end (status $py_rc)" false
done

echo "$n_ok passed, $n_bad failed, 0 skipped"
[ "$n_bad" = 0 ]
