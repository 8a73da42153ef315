#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# VM test of live migration with open QPs (qhca migrate, docs/migration.md): while RC traffic
# runs both ways (two qhca-rcstress pairs: WRITE, READ, SEND, atomics, every byte and answer
# checked; ib_read_bw on 4 QPs with READs outstanding), guest 1, then guest 2, then guest 1
# again move to new QEMU processes; every transfer ends without error, the guests answer
# at once, UD (ibv_ud_pingpong) and the Ethernet function (ping) work after the moves, the
# device's view shows the QPs where they were. Then (QHCA_MIGRATE_STORAGE=1, make
# check-migrate) the kernel's consumers ride moves out: NVMe over Fabrics with fio verifying
# every block and NFS over RDMA copying and checking files while both guests move
# (test-storage with QHCA_STORAGE_DISRUPT=migrate). Refusals:
# a guest that cannot move says why and keeps running. Snapshots: both guests saved in the
# middle of a transfer and loaded after it ended, which then ends again; 'up --snapshot'
# restoring both guests from their state after boot.
#   QHCA_MIGRATE_STORAGE=1   also the storage part (make check-migrate; make check leaves it
#                            out for time: about 90 s)
set -uo pipefail
. "$(dirname "$0")/lib.sh"

# bg I NAME CMD: CMD in guest I, detached (an ssh session does not survive its guest's move:
# the program must); its output in /tmp/NAME.log, its status in /tmp/NAME.rc.
bg() {
    "$qhca" exec "$1" -- "rm -f /tmp/$2.log /tmp/$2.rc; setsid sh -c '$3 > /tmp/$2.log 2>&1; echo \$? > /tmp/$2.rc' < /dev/null > /dev/null 2>&1 &"
}

# bg_ok I NAME TIMEOUT: NAME in guest I ended within TIMEOUT s with status 0 (its log's tail)
bg_ok() {
    eventually "$3" "$qhca" exec "$1" -- "test -s /tmp/$2.rc" ||
        { echo "vm$1: $2 still running after $3 s:"; "$qhca" exec "$1" -- "tail -n 5 /tmp/$2.log"; return 1; }
    "$qhca" exec "$1" -- "tail -n 4 /tmp/$2.log"
    local rc
    rc=$("$qhca" exec "$1" -- "cat /tmp/$2.rc")
    [ "$rc" = 0 ] && return 0
    # what ended it: its status (128 + a signal) and what the kernel said of it
    echo "vm$1: $2 ended with status $rc"
    "$qhca" exec "$1" -- "dmesg | grep -iE 'segfault|trap|killed|$2' | tail -n 3"
    return 1
}

running() {	# running I NAME: NAME has not ended in guest I (it spans what follows)
    "$qhca" exec "$1" -- "test ! -e /tmp/$2.rc" || { echo "vm$1: $2 ended already"; return 1; }
}

listening() {	# listening I PORT: a TCP listener on PORT in guest I
    eventually 20 "$qhca" exec "$1" -- "ss -ltn 2>/dev/null | grep -q ':$2 '"
}

moved() {	# moved I: qhca migrate I; the guest runs in a new QEMU and answers
    local before after out
    before=$(python3 -c 'import json,sys; print([v["pid"] for v in json.load(open(sys.argv[1]))["vms"] if v["index"] == int(sys.argv[2])][0])' "$QHCA_RUN/state.json" "$1") || return 1
    out=$("$qhca" migrate "$1" 2>&1) || { echo "$out"; return 1; }
    echo "$out" | grep "migrated to"
    after=$(python3 -c 'import json,sys; print([v["pid"] for v in json.load(open(sys.argv[1]))["vms"] if v["index"] == int(sys.argv[2])][0])' "$QHCA_RUN/state.json" "$1") || return 1
    [ "$before" != "$after" ] || { echo "vm$1 still in pid $before"; return 1; }
    # gone (a zombie its reaper has not collected yet is gone too)
    [ ! -e "/proc/$before" ] || [ "$(awk '{print $3}' "/proc/$before/stat" 2>/dev/null)" = Z ] ||
        { echo "the source QEMU $before still runs"; return 1; }
    kill -0 "$after" || return 1
    "$qhca" exec "$1" -- true
}

qps_of() {	# qps_of I: the number of QPs guest I's device holds
    "$qhca" device "$1" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["counts"]["qp"])'
}

vm_up 2
# A guest stops for its move's last round, up to about a second on a busy TCG host: the READs'
# QPs time out after 4.096 us * 2^20 (4.3 s) and 7 retries (-u 20), not perftest's 67 ms
# (-u 14), which a stop of 0.5 s exhausts (RETRY_EXC_ERR, as on any HCA). qhca-rcstress's
# are 268 ms (-t 16), 2 s with their retries.
boot1=$("$qhca" exec 1 -- cat /proc/sys/kernel/random/boot_id)
boot2=$("$qhca" exec 2 -- cat /proc/sys/kernel/random/boot_id)
check "traffic starts: qhca-rcstress both ways (1 GiB each), ib_read_bw on 4 QPs" eval '
    bg 2 rs1 "qhca-rcstress -s -p 18830" && bg 1 rs2 "qhca-rcstress -s -p 18831" &&
    bg 2 rb "ib_read_bw -d qhca_0 -x 3 -q 4 -D 60 -u 20 -p 18515" &&
    listening 2 18830 && listening 1 18831 && listening 2 18515 &&
    bg 1 rc1 "qhca-rcstress -p 18830 -t 16 -b 1G 192.168.77.2" &&
    bg 2 rc2 "qhca-rcstress -p 18831 -t 16 -b 1G -S 7 192.168.77.1" &&
    bg 1 rbc "ib_read_bw -d qhca_0 -x 3 -q 4 -D 60 -u 20 -p 18515 192.168.77.2" && sleep 6 &&
    running 1 rc1 && running 2 rc2 && running 1 rbc'
qps_before=$(( $(qps_of 1) + $(qps_of 2) ))
check "vm1 moves during the traffic" moved 1
check "vm2 moves during the traffic (all three transfers still running)" eval '
    moved 2 && running 1 rc1 && running 2 rc2 && running 1 rbc'
check "the QPs are where they were ($qps_before in both devices)" \
    test "$(( $(qps_of 1) + $(qps_of 2) ))" = "$qps_before"
check "vm1 moves again during the traffic" eval 'moved 1 && running 1 rc1 && running 2 rc2'
check "qhca-rcstress vm1 -> vm2 passed: every byte and answer checked" eval 'bg_ok 1 rc1 300 && bg_ok 2 rs1 30'
check "qhca-rcstress vm2 -> vm1 passed: every byte and answer checked" eval 'bg_ok 2 rc2 300 && bg_ok 1 rs2 30'
check "ib_read_bw (4 QPs) ended without error on both sides" eval 'bg_ok 1 rbc 120 && bg_ok 2 rb 30'
check "the Ethernet function after the moves: ping 192.168.77.2" \
    "$qhca" exec 1 -- ping -c 3 -W 2 192.168.77.2
check "UD after the moves: ibv_ud_pingpong" pingpong ibv_ud_pingpong -n 50 -s 1024
check "RC after the moves: ibv_rc_pingpong" pingpong ibv_rc_pingpong -n 100 -s 8192
check "the guests did not reboot: the same boot IDs" eval '
    [ "$("$qhca" exec 1 -- cat /proc/sys/kernel/random/boot_id)" = "$boot1" ] &&
    [ "$("$qhca" exec 2 -- cat /proc/sys/kernel/random/boot_id)" = "$boot2" ]'
check "no kernel oops or warning in either guest" eval 'kernel_log_clean 1 && kernel_log_clean 2'

# qhca explain across a move: a WRITE posted while guest 2's cable is pulled (its packets
# lost), guest 2 moved meanwhile, the cable back: the story tells the save, the resume, the
# retransmission and the WRITE completing, in that order, and the server checked the bytes.
explain_move() {
    local out=$QHCA_RUN/explain-move py
    rm -rf "$out"
    "$qhca" exec 1 -- rm -f /tmp/go || return 1
    "$qhca" explain --out "$out" -- qhca-lesson write -s 65536 -t 20 -W /tmp/go \
        > "$out.log" 2>&1 &
    local pid=$!
    eventually 30 "$qhca" exec 1 -- 'pgrep -f "qhca-lesson write" > /dev/null' || return 1
    sleep 2		# the client waits for /tmp/go, connected
    "$qhca" fabric link 2 down > /dev/null && "$qhca" exec 1 -- touch /tmp/go &&
        sleep 1 && "$qhca" migrate 2 > /dev/null 2>&1
    local mig=$?
    "$qhca" fabric link 2 up > /dev/null
    wait "$pid" || { echo "explain failed:"; tail -n 8 "$out.log"; return 1; }
    [ "$mig" = 0 ] || { echo "the move failed"; return 1; }
    grep -q "as the lesson expects" "$out.log" || { tail -n 5 "$out.log"; return 1; }
    python3 - "$out/story.jsonl" <<'PY'
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
def first(pred, after=-1, what=""):
    for i, e in enumerate(ev):
        if i > after and pred(e):
            return i
    sys.exit("no %s after step %d" % (what, after + 1))
post = first(lambda e: e["kind"] == "post" and "RDMA_WRITE" in e["text"], what="post of the WRITE")
saved = first(lambda e: e["kind"] == "migrate" and e["fields"]["what"] == "saved" and e["vm"] == "vm2", post, "save")
resumed = first(lambda e: e["kind"] == "migrate" and e["fields"]["what"] == "resumed" and e["vm"] == "vm2", saved, "resume")
retx = first(lambda e: e["kind"] == "retx" and e["vm"] == "vm1", post, "retransmission")
rx = first(lambda e: e["kind"] == "rx" and e["vm"] == "vm2" and "RDMA_WRITE_LAST" in e["text"], resumed, "WRITE at the moved guest")
cqe = first(lambda e: e["kind"] == "cqe" and e["vm"] == "vm1" and "SUCCESS RDMA_WRITE" in e["text"], rx, "completion")
print("steps: post %d, save %d, resume %d, first resend %d, last packet at the new vm2 %d, CQE %d"
      % (post + 1, saved + 1, resumed + 1, retx + 1, rx + 1, cqe + 1))
PY
}
check "explain tells a WRITE that spans a move (save, resume, resend, completion)" explain_move

# What cannot move says so, and the guest runs on.
refused_move() {
    local out
    out=$("$qhca" migrate 9 2>&1) && { echo "migrate 9 succeeded: $out"; return 1; }
    grep -q "no guest 9" <<<"$out" || { echo "$out"; return 1; }
    "$qhca" exec 1 -- true
}
check "migrate of a guest that does not exist is refused" refused_move

# Snapshots: both guests saved together in the middle of a transfer; the transfer ends;
# both loaded: they are back in its middle (its result gone) and it ends again, every byte
# and answer checked both times.
snap_mid() {
    bg 2 rs3 "qhca-rcstress -s -p 18832" && listening 2 18832 &&
        bg 1 rc3 "qhca-rcstress -p 18832 -t 16 -b 512M -S 3 192.168.77.2" && sleep 3 &&
        running 1 rc3 || return 1
    "$qhca" snapshot save mid || return 1
    bg_ok 1 rc3 120 && bg_ok 2 rs3 30 || { echo "the transfer after the save failed"; return 1; }
    sleep 6		# the guests' clocks, back at the save after the load, must be set again
    "$qhca" snapshot load mid || return 1
    "$qhca" exec 1 -- 'test ! -e /tmp/rc3.rc' ||
        { echo "after loadvm the transfer's result is still there: nothing was loaded"; return 1; }
    bg_ok 1 rc3 120 && bg_ok 2 rs3 30 || { echo "the transfer after the load failed"; return 1; }
}
check "snapshot save mid-transfer; the transfer ends; load: it ends again, every byte checked" snap_mid
check "after the snapshots the guests' clocks are the host's (within 5 s)" eval '
    d=$(( $("$qhca" exec 1 -- date +%s) - $(date +%s) )); [ "${d#-}" -le 5 ]'

# up --snapshot: the guests' state after boot saved once, then restored instead of booted
# (in a snapshot directory of this test's own: the first always saves).
export QHCA_SNAPSHOT_DIR=$QHCA_RUN/snapshots
rm -rf "$QHCA_SNAPSHOT_DIR"
up_snapshot() {	# up_snapshot: up --snapshot; prints its last line
    "$qhca" down > /dev/null 2>&1
    local t0=$(date +%s.%N) out
    out=$("$qhca" up -n 2 --snapshot 2>&1) || { echo "$out"; return 1; }
    echo "$out" | grep -E "saved for|restoring|up:"
    echo "# up --snapshot took $(echo "$(date +%s.%N) - $t0" | bc) s"
}
check "up --snapshot with none saved: boots, then saves both guests' state" eval '
    out=$(up_snapshot) && echo "$out" && [ "$(grep -c "saved for" <<<"$out")" = 2 ]'
check "up --snapshot again: both guests restored from it" eval '
    out=$(up_snapshot) && echo "$out" && grep -qF "(2 restored)" <<<"$out"'
check "restored guests do RDMA: ibv_rc_pingpong" pingpong ibv_rc_pingpong -n 100 -s 4096
check "a restored guest moves: qhca migrate 1" moved 1

if [ "${QHCA_MIGRATE_STORAGE:-0}" = 1 ]; then
    storage() {
        QHCA_STORAGE_ONLY="nvme nfs" QHCA_STORAGE_DISRUPT=migrate \
            bash "$(dirname "$0")/test-storage.sh" > /tmp/qhca-migrate-storage.$$ 2>&1
        local rc=$?
        grep -E "^(ok|not ok|#) " /tmp/qhca-migrate-storage.$$ | grep -v "^# up took"
        rm -f /tmp/qhca-migrate-storage.$$
        return "$rc"
    }
    check "NVMe-oF (fio verify) and NFS over RDMA (sha256) while both guests move" storage
fi
vm_down
finish
