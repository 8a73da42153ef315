# SPDX-License-Identifier: GPL-2.0-or-later
# Sourced by bench/run.sh (and runnable alone: bash bench/middleware.sh, with two VMs up with
# --rxe and rxe0 made): the stacks above verbs between the two guests, on qhca_0 and on rxe0,
# each named by device only (UCX_NET_DEVICES, fi_pingpong -d, Open MPI -x UCX_NET_DEVICES):
# UCX tag latency and 1 MiB tag bandwidth (ucx_perftest), libfabric 1 MiB ping-pong over msg
# and rdm (fi_pingpong), MPI 8 B latency and 1 MiB ping-pong bandwidth (qhca-mpi-check, Open
# MPI on UCX). A figure is "failed" when the stack does not run on that device with its
# defaults; the table's notes then give the client's last words, so every gap says why.
# Debian 13's ucx_perftest is built with MPI and starts in MPI mode (-P 1) unless told
# -P 0 (older ones have no -P): asked of the guest's own binary, as test-middleware does.
UCX_PERFTEST='ucx_perftest $(ucx_perftest -h 2>&1 | grep -q -- " -P <0|1>" && echo -P 0)'

# mw_pair DEV_ADDR SERVER CLIENT: the server in guest 2, the client (with the server's
# address appended) in guest 1; prints the client's output.
mw_pair() {
    "$qhca" exec 2 -- "setsid sh -c '$2' > /tmp/mw.log 2>&1 < /dev/null &"
    sleep 2
    timeout 300 "$qhca" exec 1 -- "$3 $1" 2>&1
    sleep 1
    "$qhca" exec 2 -- 'pkill -f ucx_perftest; pkill -f fi_pingpong' > /dev/null 2>&1
}

# mw_why NAME KEY OUTPUT: no figure: why, into mw_note[NAME KEY]: the client's first line
# that reads as an error (MPI's and UCX's banners of stars and dashes are not one), else its
# last line with words; control characters out, at most 100 characters.
mw_why() {
    [ -z "${mw[$1 $2]}" ] || return 0
    mw_note[$1 $2]=$(tr -d '\r' <<<"$3" | tr -c '[:print:]\n' ' ' | awk '
        /End of error message/ || !/[A-Za-z]/ { next }
        !e && tolower($0) ~ /error|fail|unable|cannot|could not|not found|refused|timed out|no such/ { e = $0 }
        { l = $0 }
        END { print (e != "" ? e : l) }' | sed 's/^ *//' | cut -c1-100)
    : "${mw_note[$1 $2]:=no output}"
}

# mw_bench NAME DEV ADDR: the figures of one device into mw[NAME ...]
mw_bench() {
    local name=$1 dev=$2 addr=$3 env="UCX_NET_DEVICES=$2:1" out
    step "bench: $name: ucx_perftest tag_lat, tag_bw 1 MiB"
    out=$(mw_pair "$addr" "$env $UCX_PERFTEST -t tag_lat -n 2000" "$env $UCX_PERFTEST -t tag_lat -n 2000")
    mw[$name ucx_lat]=$(awk '/Final:/ { print $4 }' <<<"$out")
    mw_why "$name" ucx_lat "$out"
    out=$(mw_pair "$addr" "$env $UCX_PERFTEST -t tag_bw -s 1048576 -n 200" \
          "$env $UCX_PERFTEST -t tag_bw -s 1048576 -n 200")
    mw[$name ucx_bw]=$(awk '/Final:/ { print $6 }' <<<"$out")
    mw_why "$name" ucx_bw "$out"
    step "bench: $name: fi_pingpong msg and rdm, 1 MiB"
    out=$(mw_pair "$addr" "fi_pingpong -p verbs -d $dev -e msg -S 1048576 -I 100" \
          "fi_pingpong -p verbs -d $dev -e msg -S 1048576 -I 100")
    mw[$name fi_msg]=$(awk '$1 == "1m" { print $6 }' <<<"$out")
    mw_why "$name" fi_msg "$out"
    out=$(mw_pair "$addr" "fi_pingpong -p \"verbs;ofi_rxm\" -d $dev -e rdm -S 1048576 -I 100" \
          "fi_pingpong -p \"verbs;ofi_rxm\" -d $dev -e rdm -S 1048576 -I 100")
    mw[$name fi_rdm]=$(awk '$1 == "1m" { print $6 }' <<<"$out")
    mw_why "$name" fi_rdm "$out"
    step "bench: $name: MPI (Open MPI on UCX) ping-pong, 8 B and 1 MiB"
    out=$(timeout 300 "$qhca" exec 1 -- "mpirun --mca pml ucx -x $env -np 2 --host vm1,vm2 qhca-mpi-check.openmpi" 2>&1)
    mw[$name mpi_lat]=$(awk '/ping-pong of 8 B/ && / ok / { print $(NF-3) }' <<<"$out")
    mw[$name mpi_bw]=$(awk '/ping-pong of 1 MiB/ && / ok / { print $(NF-1) }' <<<"$out")
    mw_why "$name" mpi_lat "$out"
    mw_why "$name" mpi_bw "$out"
    local k
    for k in ucx_lat ucx_bw fi_msg fi_rdm mpi_lat mpi_bw; do
        [ -n "${mw[$name $k]}" ] || mw[$name $k]=failed
    done
}

# mw_report OUT: the table rows, and JSON lines into OUT
mw_report() {
    local t k name d notes=
    for t in "ucx_lat UCX tag_lat 8 B (us)" "ucx_bw UCX tag_bw 1 MiB (MB/s)" \
             "fi_msg fi_pingpong msg 1 MiB (MB/s)" "fi_rdm fi_pingpong rdm 1 MiB (MB/s)" \
             "mpi_lat MPI ping-pong 8 B (us)" "mpi_bw MPI ping-pong 1 MiB (MB/s)"; do
        k=${t%% *} name=${t#* }
        printf '%-30s %14s %18s\n' "$name" "${mw[qhca $k]}" "${mw[rxe $k]}"
        printf '{"test":"%s","qhca":"%s","rxe":"%s"}\n' "$name" "${mw[qhca $k]}" "${mw[rxe $k]}" >> "$1"
        for d in qhca rxe; do
            [ -z "${mw_note[$d $k]:-}" ] ||
                notes+=$(printf '  %s, %s: failed: %s' "$name" "$d" "${mw_note[$d $k]}")$'\n'
        done
    done
    printf '%s' "$notes"
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
    set -uo pipefail
    . "$(dirname "$0")/../scripts/lib.sh"
    qhca="$QHCA_ROOT/tools/qhca"
    declare -A mw mw_note
    mw_bench qhca qhca_0 192.168.77.2
    mw_bench rxe rxe0 192.168.78.2
    printf '%-30s %14s %18s\n' "" "qhca" "rxe (virtio-net)"
    mw_report /dev/null
fi
