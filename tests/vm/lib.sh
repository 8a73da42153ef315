# SPDX-License-Identifier: GPL-2.0-or-later
# Helpers for the VM tests: sourced, not run. Each test prints "ok - ..." / "not ok - ..."
# lines and ends with "N passed, N failed" (finish).
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
qhca="$root/tools/qhca"
# The cache rule of the Makefile, scripts/lib.sh and tools/qhca (checked by make cache-rule).
export QHCA_CACHE=${QHCA_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/qhca}
export QHCA_RUN=${QHCA_RUN:-$QHCA_CACHE/run-check}
pass=0 fail=0

check() {	# check NAME COMMAND...: run COMMAND, count and print the result
    local name=$1 out; shift
    if out=$("$@" 2>&1); then
        echo "ok - $name"
        pass=$((pass + 1))
    else
        echo "not ok - $name"
        printf '%s\n' "$out" | tail -n 20 | sed 's/^/#   /'
        fail=$((fail + 1))
    fi
}

skip() {	# skip NAME REASON: a check that does not apply here (TAP's "# SKIP"; not counted)
    echo "ok - $1 # SKIP $2"
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

nothing_running() {
    local left
    left=$(ps -eo pid=,stat=,args= | awk -v run="$QHCA_RUN" '$2 !~ /^Z/ && index($0, run)' |
           grep -v awk || true)
    [ -z "$left" ] || { echo "still running: $left"; return 1; }
}

vm_down() {
    check "down" "$qhca" down
    check "down leaves nothing running" nothing_running
}

finish() {
    echo "$pass passed, $fail failed"
    [ "$fail" = 0 ]
}
