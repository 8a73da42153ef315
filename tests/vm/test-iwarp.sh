#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# VM test of iWARP between two guests. For now both ends are Linux siw (soft-iWARP, siw.ko
# built out of tree from Debian's linux source by scripts/build-siw.sh: Debian's kernels
# lack it) on each guest's virtio-net NIC of the fabric, made at boot by 'qhca up --siw':
# the partner that qhca's own iWARP device is to interoperate with. Per iWARP end: the
# device is there, ACTIVE on the NIC, and reports transport iWARP; per pair of ends: rping
# over rdma_cm with its data verified, ib_write_bw and ib_read_bw through rdma_cm (-R), each
# seen on the NICs' byte counters. One 'up'.
set -uo pipefail
. "$(dirname "$0")/lib.sh"

# The iWARP ends, NAME=GUEST:DEVICE:ADDRESS (the address rdma_cm resolves to DEVICE), and the
# pairs checked, CLIENT:SERVER. qhca's iWARP device will add its ends here, and pairs of
# them with siw's (qhca <-> siw); the checks below take any pair.
declare -A END=([siw1]=1:siw0:192.168.78.1 [siw2]=2:siw0:192.168.78.2)
ENDS=(siw1 siw2)
PAIRS=(siw1:siw2)
ITERS=${QHCA_IWARP_ITERS:-200}	# perftest's iterations of 64 KiB

guest_of() { echo "${END[$1]%%:*}"; }
dev_of() { local r=${END[$1]#*:}; echo "${r%%:*}"; }
addr_of() { echo "${END[$1]##*:}"; }

figures=$(mktemp)
trap 'rm -f "$figures"' EXIT

# The virtio-net NIC of the fabric (MAC 52:54:00:52:58:I, tools/qhca), on which siw runs.
NIC_OF='$(grep -l 52:54:00:52:58 /sys/class/net/*/address | cut -d/ -f5)'

device_ok() {	# device_ok END: the end's device is ACTIVE on the virtio-net NIC, and
    # ibv_devinfo says its transport is iWARP, its port active on an Ethernet link
    local g d out nic
    g=$(guest_of "$1") d=$(dev_of "$1")
    nic=$("$qhca" exec "$g" -- "echo $NIC_OF") || return 1
    out=$("$qhca" exec "$g" -- rdma link show "$d/1") || return 1
    echo "$out"
    grep -q "state ACTIVE .*netdev $nic\b" <<<"$out" || { echo "want $d/1 ACTIVE on $nic"; return 1; }
    out=$("$qhca" exec "$g" -- ibv_devinfo -d "$d") || return 1
    echo "$out"
    grep -qE '^\s*transport:\s+iWARP \(1\)' <<<"$out" &&
        grep -qE '^\s*state:\s+PORT_ACTIVE' <<<"$out" &&
        grep -qE '^\s*link_layer:\s+Ethernet' <<<"$out"
}

nic_bytes() {	# nic_bytes GUEST: "TX RX", the bytes its virtio-net NIC has sent and received
    local v
    v=$("$qhca" exec "$1" -- "n=$NIC_OF; echo \$(cat /sys/class/net/\$n/statistics/tx_bytes) \$(cat /sys/class/net/\$n/statistics/rx_bytes)") ||
        { echo "vm$1: reading the NIC's counters failed"; return 1; }
    [[ $v =~ ^[0-9]+\ [0-9]+$ ]] || { echo "vm$1: no byte counters: '$v'"; return 1; }
    echo "$v"
}

# on_nics "CTX CRX STX SRX" CLIENT_END SERVER_END COMMAND...: COMMAND succeeds, and meanwhile
# the client's NIC sent at least CTX bytes and received CRX, the server's sent STX and
# received SRX: the traffic went through the iWARP devices' NICs (the ends in two guests).
on_nics() {
    local -a min=($1)
    local c=$2 s=$3 cg sg bc bs v rc bad=0 k=0 g b tx rx
    shift 3
    cg=$(guest_of "$c") sg=$(guest_of "$s")
    bc=$(nic_bytes "$cg") || { echo "$bc"; return 1; }
    bs=$(nic_bytes "$sg") || { echo "$bs"; return 1; }
    "$@"
    rc=$?
    for g in "$cg:$bc" "$sg:$bs"; do
        b=${g#*:} g=${g%%:*}
        v=$(nic_bytes "$g") || { echo "$v"; return 1; }
        tx=$((${v% *} - ${b% *})) rx=$((${v#* } - ${b#* }))
        echo "vm$g NIC: $tx B sent, $rx B received (at least ${min[k]} and ${min[k + 1]} wanted)"
        [ "$tx" -ge "${min[k]}" ] && [ "$rx" -ge "${min[k + 1]}" ] || bad=1
        k=$((k + 2))
    done
    [ "$bad" = 0 ] || echo "the traffic did not go through the NICs"
    [ "$rc" = 0 ] && [ "$bad" = 0 ]
}

# client_server CLIENT_END SERVER_END SERVER_CMD CLIENT_CMD: SERVER_CMD in the server's guest,
# and once an rdma_cm ID listens there, CLIENT_CMD in the client's guest (at most 40 s); both
# must exit 0. Prints the end of the server's output (as # lines), then the client's.
client_server() {
    local cg sg srv=$3 cli=$4 out rc src
    cg=$(guest_of "$1") sg=$(guest_of "$2")
    "$qhca" exec "$sg" -- "pkill -x ${srv%% *}; rm -f /tmp/iw-srv.log /tmp/iw-srv.rc; setsid sh -c '$srv > /tmp/iw-srv.log 2>&1; echo \$? > /tmp/iw-srv.rc' < /dev/null > /dev/null 2>&1 &" ||
        return 1
    eventually 15 "$qhca" exec "$sg" -- \
        'rdma resource show cm_id 2>/dev/null | grep -q "state LISTEN" || test -s /tmp/iw-srv.rc' ||
        echo "# the server listens on no rdma_cm ID after 15 s"
    # The client's errors after its output: written as they come, they could split a line
    # of it that a check counts.
    out=$(timeout 40 "$qhca" exec "$cg" -- \
        "$cli 2> /tmp/iw-cli.err; rc=\$?; cat /tmp/iw-cli.err; exit \$rc" 2>&1)
    rc=$?
    [ "$rc" != 124 ] || { echo "the client ran 40 s: stopped"; "$qhca" exec "$cg" -- "pkill -x ${cli%% *}"; }
    if eventually 20 "$qhca" exec "$sg" -- 'test -s /tmp/iw-srv.rc'; then
        src=$("$qhca" exec "$sg" -- cat /tmp/iw-srv.rc)
    else
        src="nothing: it did not finish"
        "$qhca" exec "$sg" -- "pkill -x ${srv%% *}"
    fi
    echo "# server exited $src:"
    "$qhca" exec "$sg" -- tail -n 6 /tmp/iw-srv.log | sed 's/^/# /'
    echo "$out"
    [ "$rc" = 0 ] || echo "the client exited $rc"
    [ "$rc" = 0 ] && [ "$src" = 0 ]
}

rping_ok() {	# rping_ok CLIENT_END SERVER_END: 20 pings of 256 B over rdma_cm, the client
    # checking each one's data (-V) and printing it (-v): all 20 there (-d: each step shown,
    # for a failure's output)
    local a out n
    a=$(addr_of "$2")
    out=$(client_server "$1" "$2" "rping -s -d -a $a -C 20 -S 256 -V" \
        "rping -c -d -a $a -C 20 -S 256 -V -v")
    local rc=$?
    echo "$out" | cut -c1-100
    n=$(grep -c '^ping data: rdma-ping-' <<<"$out")
    [ "$n" = 20 ] || { echo "$n pings of 20 printed"; return 1; }
    return $rc
}

# perf_ok PROG CLIENT_END SERVER_END: perftest PROG through rdma_cm (-R), ITERS messages of
# 64 KiB; it must run on the client end's device, over iWARP, and print a bandwidth above 0
# (kept in $figures for the summary). perftest times a run by the TSC, whose rate it samples
# first: in a TCG guest on a busy host the sample can come out too scattered ("Correlation
# coefficient r^2 ... < 0.9"), and perftest then moves the data but prints no figure ("Can't
# produce a report"). That alone, not iWARP, is given one more run.
perf_ok() {
    local p=$1 c=$2 s=$3 d a out rc line bw unit try
    d=$(dev_of "$c") a=$(addr_of "$s")
    for try in 1 2; do
        out=$(client_server "$c" "$s" "$p -R -d $(dev_of "$s") -n $ITERS -s 65536" \
            "$p -R -d $d -n $ITERS -s 65536 $a")
        rc=$?
        echo "$out"
        [ "$rc" != 0 ] && [ "$try" = 1 ] && grep -q "Can't produce a report" <<<"$out" &&
            grep -q 'Correlation coefficient r^2' <<<"$out" || break
        echo "# perftest could not time its run (the TSC sample above): once more"
    done
    [ "$rc" = 0 ] || return 1
    grep -qE "Device +: $d\b" <<<"$out" || { echo "not run on $d"; return 1; }
    grep -qE 'Transport type +: IW\b' <<<"$out" || { echo "the transport is not iWARP (IW)"; return 1; }
    line=$(grep -m1 -A1 '^ *#bytes' <<<"$out" | tail -n1)
    unit=$(grep -m1 '^ *#bytes' <<<"$out" | sed -n 's/.*BW average\[\([^]]*\)\].*/\1/p')
    read -r _ _ _ bw _ <<<"$line"
    [[ $bw =~ ^[0-9]+(\.[0-9]+)?$ ]] && awk -v b="$bw" 'BEGIN { exit !(b > 0) }' ||
        { echo "no bandwidth figure in '$line'"; return 1; }
    echo "$p $c -> $s: $bw ${unit:-MB/sec} (64 KiB x $ITERS)" >> "$figures"
}

t0=$SECONDS
vm_up 2 --siw
for e in "${ENDS[@]}"; do
    check "$e: $(dev_of "$e") in vm$(guest_of "$e") is iWARP, ACTIVE on the virtio-net NIC" \
        device_ok "$e"
done
for pr in "${PAIRS[@]}"; do
    c=${pr%%:*} s=${pr#*:}
    what="$c -> $s ($(dev_of "$c") vm$(guest_of "$c") to $(dev_of "$s") vm$(guest_of "$s"))"
    # rping: each ping's 256 B is read by the server (RDMA READ) and written back (WRITE).
    check "$what: rping over rdma_cm, 20 pings, data verified" \
        on_nics "5120 5120 5120 5120" "$c" "$s" rping_ok "$c" "$s"
    n=$((ITERS * 65536))
    check "$what: ib_write_bw -R" on_nics "$n 0 0 $n" "$c" "$s" perf_ok ib_write_bw "$c" "$s"
    check "$what: ib_read_bw -R" on_nics "0 $n $n 0" "$c" "$s" perf_ok ib_read_bw "$c" "$s"
done
while read -r l; do echo "# $l"; done < "$figures"
for g in 1 2; do
    check "vm$g: the kernel log has no BUG, oops or warning" kernel_log_clean "$g"
done
vm_down
echo "# test-iwarp took $((SECONDS - t0)) s"
finish
