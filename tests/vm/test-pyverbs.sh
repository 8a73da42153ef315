#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# VM test with rdma-core's own verbs test suite (pyverbs' run_tests.py, from Debian's
# python3-pyverbs in the image, unchanged): the whole suite, module by module with a time
# limit each, on qhca_0 and then on Linux rxe in the same guest. Prints both lines side by
# side, the tests that hung, failed or skipped on qhca_0, and fails on any failure, error or
# hang on qhca_0, or when qhca_0 passes fewer tests than rxe.
#   QHCA_PYVERBS_MODULE_SECONDS   time limit per module (default 150)
set -uo pipefail
. "$(dirname "$0")/lib.sh"
limit=${QHCA_PYVERBS_MODULE_SECONDS:-150}
runner=$(dirname "$0")/pyverbs_run.py

suite() {	# suite DEVICE: the suite on DEVICE; JSON lines in $QHCA_RUN/pyverbs-DEVICE.jsonl
    local out=$QHCA_RUN/pyverbs-$1.jsonl start=$(date +%s)
    timeout $((limit * 40)) "$qhca" exec 1 -- python3 - "$1" "$limit" < "$runner" > "$out" ||
        { echo "the suite did not run to its end on $1"; tail -n 5 "$out"; return 1; }
    echo "# $1: $(wc -l < "$out") modules in $(($(date +%s) - start)) s"
    [ -s "$out" ]
}

summary() {	# the two lines side by side, and what qhca_0 does not pass
    python3 - "$QHCA_RUN/pyverbs-qhca_0.jsonl" "$QHCA_RUN/pyverbs-rxe0.jsonl" <<'PY'
import json, sys
keys = ("ran", "passed", "failed", "errors", "skipped")
tot = {}
for name, path in (("qhca_0", sys.argv[1]), ("rxe0", sys.argv[2])):
    mods = [json.loads(l) for l in open(path) if l.strip()]
    t = {k: sum(m[k] for m in mods) for k in keys}
    t["hung"] = ["%s.%s" % (m["module"], m["hung"]) for m in mods if m["hung"]]
    t["failures"] = ["%s.%s" % (m["module"], f) for m in mods for f in m["failures"]]
    t["skips"] = sorted(set(s.split(": ", 1)[1] for m in mods for s in m["skips"]))
    t["modules"] = len(mods)
    tot[name] = t
print("#          %s   hung" % "  ".join("%8s" % k for k in keys))
for name, t in tot.items():
    print("# %-7s  %s   %s" % (name, "  ".join("%8d" % t[k] for k in keys),
                              ", ".join(t["hung"]) or "none"))
q = tot["qhca_0"]
for f in q["failures"]:
    print("# qhca_0 failed: %s" % f)
print("# qhca_0 skips (%d tests) for these reasons:" % q["skipped"])
for s in q["skips"]:
    print("#   %s" % s)
json.dump(tot, open(sys.argv[1].replace("qhca_0.jsonl", "summary.json"), "w"))
PY
}

verdict() {	# verdict FIELD OP VALUE: compare a total of qhca_0 with a number
    python3 - "$QHCA_RUN/pyverbs-summary.json" "$@" <<'PY'
import json, sys
tot = json.load(open(sys.argv[1]))
field, op, value = sys.argv[2], sys.argv[3], sys.argv[4]
q = tot["qhca_0"][field]
q = len(q) if isinstance(q, list) else q
v = tot["rxe0"]["passed"] if value == "rxe" else int(value)
ok = {"==": q == v, ">=": q >= v, ">": q > v}[op]
print("qhca_0 %s: %s %s %s" % (field, q, op, v))
sys.exit(0 if ok else 1)
PY
}

rxe_up() {	# Linux rxe on the guest's virtio-net NIC of the fabric
    "$qhca" exec 1 -- 'modprobe crc32_generic; modprobe rdma_rxe &&
        rdma link add rxe0 type rxe netdev $(grep -l 52:54:00:52:58 /sys/class/net/*/address | cut -d/ -f5)'
}

"$qhca" down > /dev/null 2>&1
check "up -n 1 --rxe" "$qhca" up -n 1 --rxe || { finish; exit 1; }
check "the suite is in the image" "$qhca" exec 1 -- test -f /usr/share/doc/rdma-core/tests/run_tests.py
check "2 MiB huge pages reserved (parent domain and ODP tests use them)" \
    "$qhca" exec 1 -- 'echo 16 > /proc/sys/vm/nr_hugepages && grep -q "HugePages_Total: *16" /proc/meminfo'
check "the suite on qhca_0 (a time limit per module)" suite qhca_0
check "Linux rxe on the virtio-net NIC" rxe_up
check "the suite on rxe0" suite rxe0
# the verdicts read the summary of this run, never one left by an earlier run
rm -f "$QHCA_RUN/pyverbs-summary.json"
summary
check "both suites summed up (pyverbs-summary.json written)" test -s "$QHCA_RUN/pyverbs-summary.json"
check "qhca_0: no test failed" verdict failed == 0
check "qhca_0: no test errored" verdict errors == 0
check "qhca_0: no module hung" verdict hung == 0
check "qhca_0: the suite ran (more than 150 tests)" verdict ran '>' 150
check "qhca_0 passes at least as many tests as rxe" verdict passed '>=' rxe
vm_down
finish
