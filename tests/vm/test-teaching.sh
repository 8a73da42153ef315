#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# VM test of the teaching tools: 'qhca explain' on one RDMA WRITE, SEND, READ and atomic
# (qhca-lesson), and on the errors a student should see (a forged rkey, a packet the fabric
# loses, an RNR): each story has its steps in order with values that agree with the capture
# (explain_check.py, through tshark); perftest under explain; tracing off afterwards; the
# guest's 'rdma resource show' and the device's own view list the same QP in the same
# state; the WRITE, SEND and READ on an iWARP port (TCP segments, MPA FPDUs and their CRCs,
# DDP placement, TCP's ACKs, against tshark's decoding); and docs/tutorial.md, every
# command of it, with its output as the page shows it.
set -uo pipefail
. "$(dirname "$0")/lib.sh"

xdir=$(mktemp -d)
trap 'rm -rf "$xdir"' EXIT

explained() {	# explained OP: explain qhca-lesson OP, then check its story
    local op=$1 lesson=${1#iwarp-}
    [ "$op" = loss ] && { lesson=write; "$qhca" fabric set 1 in drop=1 || return 1; }
    "$qhca" explain --out "$xdir/$op" -- qhca-lesson "$lesson" > "$xdir/$op.log" 2>&1 ||
        { tail -n 30 "$xdir/$op.log"; return 1; }
    grep -q "as the lesson expects" "$xdir/$op.log" || { tail -n 30 "$xdir/$op.log"; return 1; }
    python3 "$root/tests/vm/explain_check.py" "$xdir/$op" "$op"
}

tracing_off() {	# after explain, the event is off again in both guests
    local i st
    for i in 1 2; do
        st=$(python3 - "$i" <<'EOF'
import json, socket, sys, os
s = socket.socket(socket.AF_UNIX)
s.connect(os.path.join(os.environ["QHCA_RUN"], "vm%s.qmp" % sys.argv[1]))
f = s.makefile("rw")
f.readline()
for cmd in ({"execute": "qmp_capabilities"},
            {"execute": "trace-event-get-state", "arguments": {"name": "qhca_step"}}):
    f.write(json.dumps(cmd) + "\n"); f.flush()
    while True:
        r = json.loads(f.readline())
        if "event" not in r:
            break
print(r["return"][0]["state"])
EOF
)
        echo "vm$i: qhca_step $st"
        [ "$st" = disabled ] || return 1
    done
}

perftest_explained() {	# perftest pairs itself: the server runs the same command
    "$qhca" explain --out "$xdir/perf" -- ib_write_bw -s 8192 -n 5 > "$xdir/perf.log" 2>&1 ||
        { tail -n 20 "$xdir/perf.log"; return 1; }
    python3 - "$xdir/perf/story.jsonl" <<'EOF'
import json, sys
story = [json.loads(l) for l in open(sys.argv[1])]
tx = [e for e in story if e["kind"] == "tx" and e["fields"]["op"] == "RDMA_WRITE_FIRST"]
rx = [e for e in story if e["kind"] == "rx" and e["fields"]["op"] == "RDMA_WRITE_FIRST"]
cqe = [e for e in story if e["kind"] == "cqe" and e["fields"]["status"] == "SUCCESS"]
print("%d WRITEs sent, %d received, %d completions" % (len(tx), len(rx), len(cqe)))
sys.exit(0 if len(tx) == 5 and len(rx) == 5 and cqe and all("frame" in e for e in tx) else 1)
EOF
}

views_agree() {	# a lesson server waits with its QP in RESET: both views say so
    local qpn guest dev
    "$qhca" exec 2 -- 'setsid qhca-lesson write -p 18790 > /dev/null 2>&1 < /dev/null &' || return 1
    eventually 10 "$qhca" exec 2 -- 'rdma resource show qp | grep -q "comm qhca-lesson"' ||
        { echo "no qhca-lesson QP in rdma resource show"; return 1; }
    guest=$("$qhca" exec 2 -- 'rdma resource show qp' | grep "comm qhca-lesson")
    echo "guest: $guest"
    qpn=$(echo "$guest" | sed -n 's/.* lqpn \([0-9]*\) .*/\1/p')
    dev=$("$qhca" device 2 --json | python3 -c "
import json, sys
v = json.load(sys.stdin)
print(' '.join('%d:%s' % (q['qpn'], q['state']) for q in v['qps']))")
    echo "device: $dev"
    "$qhca" exec 2 -- 'pkill qhca-lesson'
    [ -n "$qpn" ] && echo "$guest" | grep -q "state RESET" && [[ " $dev " == *" $qpn:RESET "* ]]
}

vm_up 2
for op in write send read atomic bad-rkey loss rnr; do
    check "explain: qhca-lesson $op, story checked against the capture" explained "$op"
done
check "explain: ib_write_bw, the server paired by itself" perftest_explained
check "tracing is off again after explain" tracing_off
check "rdma resource show and the device's view: the same QP in RESET" views_agree
vm_down
vm_up 2 --iwarp
for op in write send read; do
    check "explain on iWARP: qhca-lesson $op, TCP, MPA and DDP checked against the capture" \
        explained "iwarp-$op"
done
vm_down
check "docs/tutorial.md: every command runs, its output as the page says" \
    python3 "$root/tests/vm/tutorial_check.py" "$root/docs/tutorial.md"
"$qhca" down > /dev/null 2>&1
finish
