#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# VM test of 'qhca run', the one command for CI (docs/ci.md): the two examples of the page as
# they are written there (a kernel ULP developer's TAP script shared into the guests; an
# rdma-core developer's run of pyverbs' tests on qhca_0), a failing command and a TAP "not
# ok" that exits 0; each writes TAP and JUnit, exits with the test's status and leaves
# nothing running.
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
# no TAP, so the command is one test case, passed by its status.
rdma_core() {
    "$qhca" run -n 1 --junit "$work/pyverbs.xml" --suite pyverbs \
        --setup 'mkdir -p /tmp/pv && cp -r /usr/share/doc/rdma-core/tests /tmp/pv/ && gunzip -f /tmp/pv/tests/*.gz' \
        -- 'cd /tmp/pv && python3 tests/run_tests.py --dev qhca_0 -v tests.test_device' \
        > "$work/rc.out" 2>&1
    local rc=$?
    tail -n 5 "$work/rc.out"
    [ "$rc" = 0 ] && grep -q "^OK" "$work/rc.out" && grep -q "^Ran [1-9][0-9]* tests" "$work/rc.out" &&
        junit_counts "$work/pyverbs.xml" 1 0 0 &&
        nothing_running
}
check "run: an rdma-core developer's pyverbs tests on qhca_0, one JUnit case, status 0" rdma_core

failing() {
    "$qhca" run -n 1 --junit "$work/fail.xml" -- 'echo about to fail; exit 3' > "$work/f.out" 2>&1
    local rc=$?
    [ "$rc" = 3 ] && grep -q "about to fail" "$work/f.out" && junit_counts "$work/fail.xml" 1 1 0 &&
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
finish
