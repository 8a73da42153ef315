# SPDX-License-Identifier: GPL-2.0-or-later
# Helpers for the VM tests: sourced, not run. Each test prints "ok - ..." / "not ok - ..." /
# "ok - ... # SKIP ..." lines and ends with "N passed, N failed, N skipped" (finish).
# tests/selftest.sh checks these helpers without a VM.
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
qhca="$root/tools/qhca"
# The cache rule of the Makefile, scripts/lib.sh and tools/qhca (checked by make cache-rule).
export QHCA_CACHE=${QHCA_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/qhca}
export QHCA_RUN=${QHCA_RUN:-$QHCA_CACHE/run-check}
pass=0 fail=0 skipped=0

check() {	# check NAME COMMAND...: run COMMAND, count and print the result; its status
    local name=$1 out rc; shift
    out=$("$@" 2>&1)
    rc=$?
    if [ "$rc" = 0 ]; then
        echo "ok - $name"
        pass=$((pass + 1))
    else
        echo "not ok - $name"
        printf '%s\n' "$out" | tail -n 20 | sed 's/^/#   /'
        fail=$((fail + 1))
    fi
    return "$rc"
}

skip() {	# skip NAME REASON: a check that does not apply here (TAP's "# SKIP"): counted as
    # skipped, never as passed
    echo "ok - $1 # SKIP $2"
    skipped=$((skipped + 1))
}

# eventually TIMEOUT COMMAND...: retry COMMAND every 0.5 s until it succeeds or TIMEOUT s pass.
eventually() {
    local timeout=$1 t=0; shift
    until "$@"; do
        t=$((t + 1))
        [ "$t" -lt $((timeout * 2)) ] || return 1
        sleep 0.5
    done
}

vm_up() {	# vm_up N [UP_ARGS...]: a fresh set of N VMs, or the test ends here
    local n=$1; shift
    "$qhca" down > /dev/null 2>&1
    local start=$(date +%s.%N)
    check "up -n $n${*:+ $*}" "$qhca" up -n "$n" "$@" || { finish; exit 1; }
    echo "# up took $(echo "$(date +%s.%N) - $start" | bc) s"
}

nothing_running() {	# no live process of this run (ps must list the processes: an empty
    # or failed listing proves nothing)
    local procs left
    procs=$(ps -eo pid=,stat=,args=) || { echo "ps failed"; return 1; }
    grep -q . <<<"$procs" || { echo "ps listed no process"; return 1; }
    left=$(awk -v run="$QHCA_RUN" '$2 !~ /^Z/ && index($0, run)' <<<"$procs") ||
        { echo "awk failed"; return 1; }
    [ -z "$left" ] || { echo "still running: $left"; return 1; }
}

# What a kernel prints when it goes wrong: a BUG (also "kernel BUG at"), an oops, a general
# protection fault, an invalid opcode, a warning, a hung task; and qhca's own errors: an
# admin command timed out, a registration that failed, a QP destroy waiting on iw_cm.
KERNEL_LOG_BAD='BUG:|BUG at|Oops|general protection fault|invalid opcode|WARNING:|blocked for more than|qhca.*timed out|ib_register_device failed|iw_cm still holds'

# kernel_log_clean I [REGEX [EXCEPT]]: guest I's kernel log could be read (dmesg ran and
# printed it) and has no line matching REGEX (default: a BUG, an oops or a warning) but for
# lines matching EXCEPT. A failed dmesg or an empty log fails: they prove nothing.
kernel_log_clean() {
    local re=${2:-"$KERNEL_LOG_BAD"} log rc
    log=$("$qhca" exec "$1" -- dmesg) || { echo "vm$1: dmesg failed"; return 1; }
    [ -n "$log" ] || { echo "vm$1: dmesg printed nothing"; return 1; }
    if [ -n "${3:-}" ]; then
        log=$(grep -Ev -- "$3" <<<"$log")
        [ $? -le 1 ] || { echo "kernel_log_clean: bad EXCEPT regex '$3'"; return 1; }
    fi
    grep -E "$re" <<<"$log"
    rc=$?
    [ "$rc" = 0 ] && echo "vm$1: the kernel log has the lines above"
    [ "$rc" = 1 ]
}

# ping_lost I ADDR [COUNT]: ping ran in guest I and reported every packet to ADDR lost (exit
# status 1, "0 received, 100% packet loss"); ping failing to run, ssh failing or a reply
# all fail this.
ping_lost() {
    local out rc
    out=$("$qhca" exec "$1" -- ping -c "${3:-2}" -W 1 "$2" 2>&1)
    rc=$?
    echo "$out"
    [ "$rc" = 1 ] || { echo "ping exited $rc, want 1 (no reply)"; return 1; }
    grep -qE ' 0 received, .*100% packet loss' <<<"$out" || { echo "ping did not report 100% loss"; return 1; }
}

# roce_bytes I: "TX RX", the bytes guest I's qhca_0 has sent and received as RoCE packets (the
# device's tx_bytes and rx_bytes in hw_counters; TCP over the qhca netdev is not in them).
roce_bytes() {
    local v
    v=$("$qhca" exec "$1" -- 'c=/sys/class/infiniband/qhca_0/ports/1/hw_counters; echo "$(cat $c/tx_bytes) $(cat $c/rx_bytes)"') ||
        { echo "vm$1: reading the hw_counters failed" >&2; return 1; }
    [[ $v =~ ^[0-9]+\ [0-9]+$ ]] || { echo "vm$1: no byte counters: '$v'" >&2; return 1; }
    echo "$v"
}

# via_qhca "MIN1 MIN2 ..." COMMAND...: COMMAND succeeds, and meanwhile guest i's qhca_0 sent
# and received at least MINi bytes of RoCE (guests 1..N, one MIN each): its traffic went
# through the device, not over TCP or shared memory.
via_qhca() {
    local -a mins=($1) before=()
    local i v tx rx rc bad=0
    shift
    for i in "${!mins[@]}"; do
        before[i]=$(roce_bytes $((i + 1))) || return 1
    done
    "$@"
    rc=$?
    for i in "${!mins[@]}"; do
        v=$(roce_bytes $((i + 1))) || return 1
        tx=$((${v% *} - ${before[i]% *})) rx=$((${v#* } - ${before[i]#* }))
        echo "vm$((i + 1)) qhca_0: $tx B sent and $rx B received as RoCE (at least ${mins[i]} each way wanted)"
        [ "$tx" -ge "${mins[i]}" ] && [ "$rx" -ge "${mins[i]}" ] || bad=1
    done
    [ "$bad" = 0 ] || echo "the traffic did not go through qhca_0"
    [ "$rc" = 0 ] && [ "$bad" = 0 ]
}

# pair SERVER_CMD CLIENT_CMD: a server in guest 2 and its client in guest 1; both exit 0.
# With PAIR_CLIENT_LOG set, the client's whole output goes to that file too.
pair() {
    local srv=$1 cli=$2 out rc
    "$qhca" exec 2 -- "pkill -f '^${srv%% *}' ; rm -f /tmp/srv.log /tmp/srv.rc; setsid sh -c '$srv > /tmp/srv.log 2>&1; echo \$? > /tmp/srv.rc' < /dev/null > /dev/null 2>&1 &" || return 1
    # The server listens (perftest and the pingpongs on TCP 18515, perftest -R and rdma_cm
    # programs with an rdma_cm ID): under TCG its start can take longer than any fixed wait.
    eventually 15 "$qhca" exec 2 -- 'ss -ltn 2>/dev/null | grep -q ":18515 " ||
        rdma resource show cm_id 2>/dev/null | grep -q "state LISTEN" || test -s /tmp/srv.rc' ||
        sleep 1.5
    out=$(timeout 120 "$qhca" exec 1 -- "$cli" 2>&1)
    rc=$?
    [ -z "${PAIR_CLIENT_LOG:-}" ] || printf '%s\n' "$out" > "$PAIR_CLIENT_LOG"
    # its last lines: the figures when it worked, else enough to show the first error
    echo "$out" | tail -n "$([ "$rc" = 0 ] && echo 3 || echo 12)"
    eventually 20 "$qhca" exec 2 -- 'test -s /tmp/srv.rc' || { echo "server did not finish"; return 1; }
    [ "$rc" = 0 ] && [ "$("$qhca" exec 2 -- cat /tmp/srv.rc)" = 0 ] ||
        { echo "client rc $rc; server:"; "$qhca" exec 2 -- cat /tmp/srv.log; return 1; }
}

# The RDMA device the pair helpers use: qhca_0, as qhca's image names it; in a stock
# distribution rdma-core's udev rules rename it by its PCI slot (rocep0s2), as they do a
# ConnectX's mlx5_0, and tests of such guests set it.
QHCA_TEST_DEV=${QHCA_TEST_DEV:-qhca_0}
# Its GID index: the RoCE v2 GID of the IPv4 address, 3 on qhca (a RoCE v1 and a v2 entry
# for each address after the two default ones, as on a ConnectX), 1 on rxe.
QHCA_TEST_GID=${QHCA_TEST_GID:-3}

pingpong() {	# pingpong PROG ARGS...: an ibv_*_pingpong between the guests over qhca_0
    local prog=$1; shift
    pair "$prog -d $QHCA_TEST_DEV -g $QHCA_TEST_GID $*" \
         "$prog -d $QHCA_TEST_DEV -g $QHCA_TEST_GID $* 192.168.77.2"
}

perf() {	# perf PROG ARGS...: perftest over TCP-exchanged connection data
    local prog=$1; shift
    pair "$prog -d $QHCA_TEST_DEV -x $QHCA_TEST_GID $*" \
         "$prog -d $QHCA_TEST_DEV -x $QHCA_TEST_GID $* 192.168.77.2"
}

vm_down() {
    check "down" "$qhca" down
    check "down leaves nothing running" nothing_running
}

finish() {
    echo "$pass passed, $fail failed, $skipped skipped"
    [ "$fail" = 0 ]
}
