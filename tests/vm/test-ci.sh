#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# VM test of 'qhca run', the one command for CI (docs/ci.md): the two examples of the page as
# they are written there (a kernel ULP developer's TAP script shared into the guests; an
# rdma-core developer's run of pyverbs' tests on qhca_0), a failing command, a TAP "not ok"
# that exits 0, "ok" lines from a command that fails, guest output full of control
# characters, a failing setup step, --test-timeout (with --leave-up too: the test is killed
# in the guest), a cancellation (SIGTERM), an 'up' that fails and options refused before
# anything boots; each writes TAP and JUnit, exits with the test's status and leaves nothing
# running. Not here: run --install, which needs a disk image (--disk). The parsing and the
# files alone: tests/selftest_run.py.
set -uo pipefail
. "$(dirname "$0")/lib.sh"

work=$(mktemp -d /tmp/qhca-ci.XXXXXX)
trap 'rm -rf "$work"; "$qhca" down > /dev/null 2>&1' EXIT
# Your tests live outside the qhca tree (the tree, the cache and the run directory are never
# shared into guests): a copy of examples/ci, as a developer's own directory.
cp -r "$root/examples/ci" "$work/ci"

# junit_counts FILE TESTS FAILURES SKIPPED: the JUnit file parses and has those counts.
junit_counts() {
    python3 - "$@" <<'EOF'
import sys, xml.etree.ElementTree as ET
path, tests, failures, skipped = sys.argv[1], *map(int, sys.argv[2:])
s = ET.parse(path).getroot().find("testsuite")
got = (int(s.get("tests")), int(s.get("failures")), int(s.get("skipped")))
print("junit %s: tests, failures, skipped = %s" % (path, got))
sys.exit(0 if got == (tests, failures, skipped) and len(s.findall("testcase")) == tests else 1)
EOF
}

# junit_failed FILE NAME: the JUnit file has a failing test case NAME.
junit_failed() {
    python3 - "$@" <<'EOF'
import sys, xml.etree.ElementTree as ET
path, name = sys.argv[1:]
cases = ET.parse(path).getroot().iter("testcase")
failed = [c.get("name") for c in cases if c.find("failure") is not None]
print("junit %s: failing cases %s" % (path, failed))
sys.exit(0 if name in failed else 1)
EOF
}

# A kernel ULP developer (docs/ci.md): a TAP script of NVMe over RDMA between the guests.
ulp() {
    "$qhca" run --share "$work/ci" --junit "$work/nvme.xml" --tap "$work/nvme.tap" \
        -- "$work/ci/nvme-loop.sh" > "$work/ulp.out" 2>&1
    local rc=$?
    tail -n 8 "$work/ulp.out"
    [ "$rc" = 0 ] && junit_counts "$work/nvme.xml" 5 0 0 && [ "$(grep -c '^ok ' "$work/nvme.tap")" = 5 ] &&
        nothing_running
}
check "run: a kernel ULP developer's TAP script (NVMe over RDMA), 5 JUnit cases, status 0, down after" ulp

# An rdma-core developer (docs/ci.md): pyverbs' device tests on qhca_0; unittest's output is
# no TAP, so the command is one test case, passed by its status. pyverbs skips a test that
# needs what it does not find ("No IB devices found" when there is no device at all) and
# passes: the first setup step makes a missing or inactive qhca_0 fail the run, and here the
# only skips allowed are those of device memory, which qhca does not have (9 of 23), and
# the device and port queries must have passed.
rdma_core() {
    local skips
    "$qhca" run -n 1 --junit "$work/pyverbs.xml" --suite pyverbs \
        --setup 'ibv_devinfo -d qhca_0 | grep -q PORT_ACTIVE' \
        --setup 'mkdir -p /tmp/pv && cp -r /usr/share/doc/rdma-core/tests /tmp/pv/ && gunzip -f /tmp/pv/tests/*.gz' \
        -- 'cd /tmp/pv && python3 tests/run_tests.py --dev qhca_0 -v tests.test_device' \
        > "$work/rc.out" 2>&1
    local rc=$?
    tail -n 5 "$work/rc.out"
    skips=$(grep -o "skipped '[^']*'" "$work/rc.out" | sort | uniq -c)
    echo "skips:"; echo "$skips"
    [ "$rc" = 0 ] && grep -q "^OK" "$work/rc.out" && grep -q "^Ran [1-9][0-9]* tests" "$work/rc.out" &&
        ! grep -v "skipped 'Device memory is not supported'" <<<"$skips" | grep -q . &&
        grep -q "^Test ibv_query_device() \.\.\. ok$" "$work/rc.out" &&
        grep -q "^Test ibv_query_port \.\.\. ok$" "$work/rc.out" &&
        junit_counts "$work/pyverbs.xml" 1 0 0 && nothing_running
}
check "run: an rdma-core developer's pyverbs tests on qhca_0, one JUnit case, status 0" rdma_core

# The guest's output is run's stdout; the launcher's own lines (which name the command) go to
# stderr.
failing() {
    "$qhca" run -n 1 --junit "$work/fail.xml" -- 'echo about to fail; exit 3' \
        > "$work/f.out" 2> "$work/f.err"
    local rc=$?
    cat "$work/f.out"
    [ "$rc" = 3 ] && grep -qx "about to fail" "$work/f.out" && junit_counts "$work/fail.xml" 1 1 0 &&
        nothing_running
}
check "run: a failing command's status (3) is run's, its JUnit case a failure, down after" failing

tap_not_ok() {
    "$qhca" run -n 1 --tap "$work/t.tap" --junit "$work/t.xml" \
        -- 'echo "ok 1 - fine"; echo "not ok 2 - broken"; echo "ok 3 - later # SKIP not here"; exit 0' \
        > "$work/t.out" 2>&1
    local rc=$?
    [ "$rc" = 1 ] && junit_counts "$work/t.xml" 3 1 1 && grep -q "^not ok 2 - broken" "$work/t.tap" &&
        nothing_running
}
check "run: a TAP 'not ok' fails the run even when the command exits 0; SKIP counted as skipped" tap_not_ok

refused() {
    local out
    out=$("$qhca" run --install /nonexistent.deb -- true 2>&1)
    [ $? != 0 ] && grep -q "no such .deb" <<<"$out" && nothing_running
}
check "run: a missing package is refused before anything boots" refused

on_refused() {
    local out
    out=$("$qhca" run -n 2 --on 3 --junit "$work/o.xml" -- true 2>&1)
    [ $? != 0 ] && echo "$out" && grep -q -- "--on 3: the guests are 1..2" <<<"$out" &&
        ! grep -q booting <<<"$out" && [ ! -e "$work/o.xml" ] && nothing_running
}
check "run: --on with a guest number outside --first/-n is refused before anything boots" on_refused

# 'up' refuses (-n 17): the reports still say so, with a failing 'qhca up' case.
up_fails() {
    "$qhca" run -n 17 --junit "$work/u.xml" --tap "$work/u.tap" -- true > "$work/u.out" 2>&1
    local rc=$?
    cat "$work/u.out"
    [ "$rc" != 0 ] && junit_counts "$work/u.xml" 1 1 0 && junit_failed "$work/u.xml" "qhca up" &&
        grep -q "^not ok 1 - qhca up$" "$work/u.tap" && nothing_running
}
check "run: when up fails, TAP and JUnit are still written, a failing 'qhca up' case, status not 0" up_fails

# "ok" lines, then a failure: the status fails a JUnit case of its own, never all green. And
# what the guest prints goes into the JUnit file's <system-out> and the names: ESC, NUL, BEL
# and the other characters XML 1.0 forbids must not make the file unreadable. (One run for
# both: each run boots a guest.)
ok_then_exit() {
    "$qhca" run -n 1 --tap "$work/e.tap" --junit "$work/e.xml" \
        -- 'printf "colour \033[31mred\033[0m, nul \000, bel \007, bs \010\nok 1 - esc \033]0;title\007 in a name\n"; echo "ok 2 - fine"; exit 1' \
        > "$work/e.out" 2>&1
    local rc=$?
    [ "$rc" = 1 ] && junit_counts "$work/e.xml" 3 1 0 && junit_failed "$work/e.xml" "exit status 1" &&
        grep -q "^not ok 3 - exit status 1$" "$work/e.tap" &&
        grep -qF 'colour \x1b[31mred' "$work/e.xml" &&
        ! grep -q $'[\x01-\x08\x1b]' "$work/e.xml" "$work/e.tap" && grep -q "^ok 1 - esc " "$work/e.tap" &&
        nothing_running
}
check "run: 'ok' lines and exit 1: a failing 'exit status 1' case in JUnit and TAP; output with ESC, NUL and BEL gives JUnit that xml.etree parses, no control character in it or the TAP" ok_then_exit

setup_fails() {
    "$qhca" run -n 1 --junit "$work/s.xml" --setup 'echo setting up; exit 7' -- 'echo the test ran' \
        > "$work/s.out" 2> "$work/s.err"
    local rc=$?
    cat "$work/s.err"
    [ "$rc" = 1 ] && ! grep -q "the test ran" "$work/s.out" &&
        grep -qF "setup 'echo setting up; exit 7' failed (status 7)" "$work/s.err" &&
        junit_counts "$work/s.xml" 1 1 0 && junit_failed "$work/s.xml" setup && nothing_running
}
check "run: a failing --setup fails the run (status 1, a failing 'setup' case); the test does not run" setup_fails

# --test-timeout: the test killed (in the guest too: with --leave-up the guests stay, and the
# test must not go on in them), a failing 'timeout' case, status 124.
test_timeout() {
    local t0=$SECONDS rc left
    "$qhca" run -n 1 --leave-up --test-timeout 5 --junit "$work/to.xml" --tap "$work/to.tap" \
        -- 'echo "ok 1 - before"; sleep 97 & sleep 98' > "$work/to.out" 2>&1
    rc=$?
    tail -n 3 "$work/to.out"
    left=$("$qhca" exec 1 -- 'ps -eo args | grep -c "^sleep 9[78]"')
    echo "status $rc after $((SECONDS - t0)) s; sleeps left in vm1: $left"
    "$qhca" down > /dev/null 2>&1
    [ "$rc" = 124 ] && junit_counts "$work/to.xml" 2 1 0 && junit_failed "$work/to.xml" timeout &&
        grep -q "^not ok 2 - timeout$" "$work/to.tap" && grep -q "^ok 1 - before" "$work/to.out" &&
        [ "$left" = 0 ] && nothing_running
}
check "run --leave-up --test-timeout 5 -- sleep: killed in the guest too, a failing 'timeout' case, status 124" test_timeout

# CI cancels a job with SIGTERM: the run still writes its reports (a 'cancelled' failure) and
# takes the guests down.
cancelled() {
    local pid rc
    "$qhca" run -n 1 --junit "$work/k.xml" --tap "$work/k.tap" \
        -- 'echo "ok 1 - started"; sleep 300' > "$work/k.out" 2>&1 &
    pid=$!
    eventually 300 grep -q "^ok 1 - started" "$work/k.out" ||
        { kill -KILL "$pid"; echo "the test never started"; return 1; }
    kill -TERM "$pid"
    wait "$pid"
    rc=$?
    tail -n 3 "$work/k.out"
    [ "$rc" = 143 ] && junit_counts "$work/k.xml" 2 1 0 && junit_failed "$work/k.xml" cancelled &&
        grep -q "^not ok 2 - cancelled$" "$work/k.tap" && nothing_running
}
check "run: SIGTERM during the test: the reports written with a 'cancelled' failure, status 143, down after" cancelled
finish
