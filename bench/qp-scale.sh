#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# make bench-qp: how many QPs one qhca device takes and what each costs. Boots one VM, runs
# qhca-qp-scale (bench/qp_scale.c) in it, which creates RC QPs until the device refuses
# or QHCA_QPS is reached, connects them in pairs over the device's loopback, moves one
# checked message over each and destroys them; meanwhile this script reads the memory of
# the VM's QEMU from the host: before, with every QP connected and used, and after. A
# benchmark, not a test: it reports, it does not judge.
#   QHCA_QPS=N          QPs to create (default 16384; 0: until the device or guest refuses)
#   QHCA_VM_MEM=MIB     the guest's memory (default 1024)
#   QHCA_DEVICE_PROPS   device properties, e.g. max-qp=20000 to see the device refuse
#   QHCA_BENCH_OUT=F    also append the JSON line to F (make bench: its results.txt)
# Host memory is split the way QEMU's mappings are: the guest's RAM (pages the guest touched,
# which the host keeps even after the guest frees them), and QEMU's own anonymous memory
# (heap, arenas: the device's objects; TCG's code buffer excluded).
set -uo pipefail
. "$(dirname "$0")/../scripts/lib.sh"
qhca="$QHCA_ROOT/tools/qhca"
export QHCA_RUN=${QHCA_RUN:-$QHCA_CACHE/run-qps}
n=${QHCA_QPS:-16384}
mem=${QHCA_VM_MEM:-1024}
timeout=${QHCA_QPS_TIMEOUT:-7200}

# host_mem PID: "RSS GUEST_RAM QEMU_OWN" in KiB from /proc/PID/smaps. The guest's RAM is the
# private rw mapping of exactly its size; QEMU's own memory is every other private
# anonymous rw mapping and the heap (TCG's rwx code buffer and files are neither).
host_mem() {
    local rss
    rss=$(awk '/^VmRSS:/ { print $2 }' "/proc/$1/status") || return 1
    awk -v ram=$((mem * 1024)) -v rss="$rss" '
        /^[0-9a-f]+-[0-9a-f]+ / { perm = $2; anon = (NF == 5); heap = ($6 == "[heap]") }
        /^Size:/ { size = $2 }
        /^Rss:/ {
            if (anon && perm == "rw-p" && size == ram) guest += $2
            else if ((anon || heap) && perm == "rw-p") own += $2
        }
        END { print rss, guest + 0, own + 0 }' "/proc/$1/smaps"
}

guest() { "$qhca" exec 1 -- "$@"; }

"$qhca" down > /dev/null 2>&1
trap '"$qhca" down > /dev/null 2>&1' EXIT
step "bench-qp: booting one VM ($mem MiB${QHCA_DEVICE_PROPS:+, $QHCA_DEVICE_PROPS})"
"$qhca" up -n 1 --mem "$mem" || die "the VM did not boot"
pid=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["vms"][0]["pid"])' \
      "$QHCA_RUN/state.json") || die "no QEMU pid in $QHCA_RUN/state.json"
sleep 5	# let the guest settle after boot
read -r rss0 ram0 own0 <<<"$(host_mem "$pid")"
echo "QEMU pid $pid before: VmRSS $rss0 KiB (guest RAM $ram0, QEMU's own $own0)"

step "bench-qp: qhca-qp-scale ${n/#0/until refused} QPs"
arg=""
[ "$n" != 0 ] && arg="-n $n"
guest "rm -f /tmp/qps.*; setsid sh -c 'qhca-qp-scale $arg -p /tmp/qps > /tmp/qps.out 2>&1;
       echo \$? > /tmp/qps.rc' < /dev/null > /dev/null 2>&1 &" || die "cannot start qhca-qp-scale"
t0=$(date +%s)
state=""
while [ $(($(date +%s) - t0)) -lt "$timeout" ]; do
    sleep 5
    state=$(guest 'if [ -e /tmp/qps.ready ]; then echo ready; elif [ -e /tmp/qps.rc ]; then
                   echo exited; else tail -n 1 /tmp/qps.out; fi' 2>/dev/null)
    case $state in
    ready|exited) break ;;
    *) [ -n "$state" ] && echo "  $(($(date +%s) - t0)) s: $state" ;;
    esac
done
[ "$state" = ready ] || { guest cat /tmp/qps.out; die "qhca-qp-scale did not get its QPs up ($state)"; }
up_s=$(($(date +%s) - t0))
read -r rss1 ram1 own1 <<<"$(host_mem "$pid")"
echo "QEMU with every QP connected and used (after $up_s s): VmRSS $rss1 KiB (guest RAM $ram1, QEMU's own $own1)"
guest 'rdma resource show 2>/dev/null | grep qhca_0'
guest 'touch /tmp/qps.go'
t0=$(date +%s)
until guest 'test -e /tmp/qps.rc' 2> /dev/null; do
    [ $(($(date +%s) - t0)) -lt "$timeout" ] || die "qhca-qp-scale did not finish"
    sleep 5
done
read -r rss2 ram2 own2 <<<"$(host_mem "$pid")"
echo "QEMU after destroying them: VmRSS $rss2 KiB (guest RAM $ram2, QEMU's own $own2)"
out=$(guest cat /tmp/qps.out)
rc=$(guest cat /tmp/qps.rc)
echo "$out"
[ "$rc" = 0 ] || die "qhca-qp-scale failed (exit $rc)"

json=$(grep '^{"test":"qp_scale"' <<<"$out" | tail -n 1)
json=$(python3 - "$json" "$rss0 $ram0 $own0 $rss1 $ram1 $own1 $rss2 $ram2 $own2" "$mem" <<'EOF'
import json, sys
r = json.loads(sys.argv[1])
rss0, ram0, own0, rss1, ram1, own1, rss2, ram2, own2 = map(int, sys.argv[2].split())
n = r["qps"]
r.update({
    "vm_mem_mib": int(sys.argv[3]),
    "host_rss_bytes_per_qp": round((rss1 - rss0) * 1024 / n),
    "host_qemu_own_bytes_per_qp": round((own1 - own0) * 1024 / n),
    "host_guest_ram_bytes_per_qp": round((ram1 - ram0) * 1024 / n),
    "host_qemu_own_kib_after_destroy": own2 - own0,
})
print(json.dumps(r, separators=(",", ":")))
EOF
) || die "cannot read the program's figures"
python3 - "$json" <<'EOF'
import json, sys
r = json.loads(sys.argv[1])
print("host memory per QP: %d bytes of QEMU's VmRSS, of which %d QEMU's own (the device) and "
      "%d guest RAM touched; QEMU's own after destroy: %+d KiB"
      % (r["host_rss_bytes_per_qp"], r["host_qemu_own_bytes_per_qp"],
         r["host_guest_ram_bytes_per_qp"], r["host_qemu_own_kib_after_destroy"]))
EOF
echo "$json"
[ -n "${QHCA_BENCH_OUT:-}" ] && echo "$json" >> "$QHCA_BENCH_OUT"
exit 0
