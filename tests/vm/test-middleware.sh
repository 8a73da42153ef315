#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# VM test of the stacks above verbs, Debian bookworm's own packages with their default
# settings (only transports and devices are named): UCX (tag, stream, put, get, atomics,
# qhca-ucx-check, over UCX's own choice, over rc and over ud_verbs alone), libfabric
# (fi_pingpong with data verification: msg, rdm on verbs;ofi_rxm, dgram), and MPI with
# every result checked (qhca-mpi-check: collectives, a checked 1 MiB ping-pong, put, get,
# accumulate): Open MPI on UCX (its default here) and on libfabric (mtl ofi), MPICH (over
# UCX), mpi4py; at 2 guests and at 4. Ranks start in the other guests over ssh by name.
# Every check also reads the qhca_0 byte counters (hw_counters tx_bytes, rx_bytes) of each
# guest before and after and wants them grown by at least the bytes the check moves each way
# (via_qhca): the traffic went through the device, not over TCP or shared memory.
set -uo pipefail
. "$(dirname "$0")/lib.sh"

# both SERVER_CMD CLIENT_CMD: the server in guest 2, the client in guest 1; both must
# succeed, and the output of each says "all checks passed" when CHECKED is set. The
# server's command goes into single quotes: it has none of its own.
both() {
    local srv=$1 cli=$2 out rc
    "$qhca" exec 2 -- "rm -f /tmp/srv.log /tmp/srv.rc; setsid sh -c '$srv > /tmp/srv.log 2>&1; echo \$? > /tmp/srv.rc' < /dev/null > /dev/null 2>&1 &" || return 1
    sleep 1
    out=$(timeout 180 "$qhca" exec 1 -- "$cli" 2>&1)
    rc=$?
    echo "$out" | tail -n 12
    eventually 30 "$qhca" exec 2 -- 'test -s /tmp/srv.rc' || { echo "server did not finish"; return 1; }
    echo "server:"; "$qhca" exec 2 -- 'tail -n 4 /tmp/srv.log'
    [ "$rc" = 0 ] && [ "$("$qhca" exec 2 -- cat /tmp/srv.rc)" = 0 ] || return 1
    [ -z "${CHECKED:-}" ] || { grep -q "all checks passed" <<<"$out" &&
                               "$qhca" exec 2 -- 'grep -q "all checks passed" /tmp/srv.log'; }
}

MiB=$((1 << 20))

ucx() {	# ucx [UCX_TLS]: qhca-ucx-check, every result checked on both sides. Each way at
    # least 2 MiB: the tag message and the put (client), the tag reply and the get (server).
    local env=${1:+UCX_TLS=$1 }
    CHECKED=1 via_qhca "$((2 * MiB)) $((2 * MiB))" \
        both "${env}qhca-ucx-check" "${env}qhca-ucx-check 192.168.77.2"
}

fi_pp() {	# fi_pp PROVIDER EP SIZE: fi_pingpong with data verification (-v): 50 messages
    # of SIZE each way
    via_qhca "$((50 * $3)) $((50 * $3))" \
        both "fi_pingpong -p \"$1\" -e $2 -v -I 50 -S $3" "fi_pingpong -p \"$1\" -e $2 -v -I 50 -S $3 192.168.77.2"
}

# ucx_perftest tag_lat: 1000 messages of 4 KiB each way, UCX's defaults otherwise. Debian
# 13's is built with MPI and starts in MPI mode (-P 1) unless told -P 0; older ones have no -P.
perftest() {
    local p='$(ucx_perftest -h 2>&1 | grep -q -- " -P <0|1>" && echo -P 0)'
    via_qhca "$((1000 * 4096)) $((1000 * 4096))" \
        both "ucx_perftest $p -t tag_lat -s 4096 -n 1000" "ucx_perftest $p -t tag_lat -s 4096 -n 1000 192.168.77.2"
}

mpi() {	# mpi N CMD: CMD runs qhca-mpi-check on guests 1..N, every check must hold, through
    # qhca_0: the first and the last rank ping-pong 40 MiB each way (20 checked round trips
    # of 1 MiB, 20 timed), every rank puts 1 MiB into the next one's window.
    local n=$1 i mins=()
    for i in $(seq 1 "$n"); do
        if [ "$i" = 1 ] || [ "$i" = "$n" ]; then mins+=($((40 * MiB))); else mins+=("$MiB"); fi
    done
    via_qhca "${mins[*]}" mpi_run "$@"
}

mpi_run() {	# mpi_run N CMD
    local n=$1 cmd=$2 out rc i try
    for try in 1 2; do
        out=$(timeout 300 "$qhca" exec 1 -- "$cmd" 2>&1)
        rc=$?
        echo "$out" | tail -n 14
        # a run that failed or hung leaves ranks behind
        [ "$rc" = 0 ] || for i in $(seq 1 "$n"); do
            "$qhca" exec "$i" -- 'pkill -f qhca-mpi-check; pkill orted; pkill hydra_pmi_proxy' > /dev/null 2>&1
        done
        # UCX 1.18's own fault, not the device's (docs/middleware.md, "Known issues"): now and
        # then Open MPI's one-sided windows (osc ucx) make UCP ask rc_verbs, which has no
        # remote flush on any device but ConnectX's rc_mlx5, for one, and UCP aborts. Only
        # that abort, and only once, is run again; it is reported each time.
        if [ "$rc" != 0 ] && [ "$try" = 1 ] && grep -q "rc_verbs_ep.c.*flush(remote) is not supported" <<<"$out"; then
            echo "# UCX aborted on rc_verbs' missing remote flush (a known UCX 1.18 fault): once more"
            continue
        fi
        break
    done
    [ "$rc" = 0 ] && grep -q "qhca-mpi-check: $n ranks on $(seq -s, -f 'vm%g' 1 "$n")" <<<"$out" &&
        grep -q "all checks passed" <<<"$out"
}

ssh_by_name() {	# every guest reaches every other by name, with the guests' own key
    local n=$1 i j
    for i in $(seq 1 "$n"); do
        for j in $(seq 1 "$n"); do
            [ "$("$qhca" exec "$i" -- "ssh vm$j hostname")" = "vm$j" ] || { echo "vm$i -> vm$j"; return 1; }
        done
    done
}

mpi4py_run() {	# mpi4py (Open MPI) across the guests: an allreduce, and 1 MiB each way
    # (sendrecv, checked) so that the counters show where the bytes went
    local out
    out=$("$qhca" exec 1 -- "mpirun -np 2 --host vm1,vm2 python3 -c 'from mpi4py import MPI; c = MPI.COMM_WORLD; r = c.Get_rank(); s = c.allreduce(r + 1); d = c.sendrecv(bytes([r + 1]) * (1 << 20), dest=1 - r, source=1 - r); print(\"mpi4py\", r, s, MPI.Get_processor_name(), len(d) == 1 << 20 and d == bytes([2 - r]) * (1 << 20))'" 2>&1)
    echo "$out"
    grep -q "mpi4py 0 3 vm1 True" <<<"$out" && grep -q "mpi4py 1 3 vm2 True" <<<"$out"
}

mpi4py_allreduce() { via_qhca "$MiB $MiB" mpi4py_run; }

ompi_ofi="mpirun --mca pml cm --mca mtl ofi --mca mtl_ofi_provider_include 'verbs;ofi_rxm'"

vm_up 2
# A UCX built without verbs (Debian unstable's 1.23.0~rc1 has no libuct_ib: RDMA on no
# device, hardware or not) cannot be tested here: on the newest flavour, where that is known
# (docs/flavours.md), what needs it (Open MPI's one-sided windows go through osc ucx even
# over libfabric) is counted as skipped. Anywhere else a UCX without verbs is a failure,
# and so is a question that got no answer.
ucx_verbs=$("$qhca" exec 1 -- 'if test -e /usr/lib/x86_64-linux-gnu/ucx/libuct_ib.so.0; then echo yes; else echo no; fi')
check "the guests' UCX was asked whether it has verbs (libuct_ib): '$ucx_verbs'" \
    eval '[ "$ucx_verbs" = yes ] || { [ "$ucx_verbs" = no ] && [ "${QHCA_FLAVOUR:-}" = newest ]; }'
ucx_check() {	# ucx_check NAME COMMAND...: check, or skip where UCX has no verbs
    if [ "$ucx_verbs" = no ] && [ "${QHCA_FLAVOUR:-}" = newest ]; then
        skip "$1" "this distribution's UCX is built without verbs (no libuct_ib)"
    else
        check "$@"
    fi
}
check "ssh between the guests by name (vm1, vm2)" ssh_by_name 2
ucx_check "UCX (its own transport choice): tag, stream, put, get, atomics checked" ucx
ucx_check "UCX over rc (UCX_TLS=rc): tag, stream, put, get, atomics checked" ucx rc
ucx_check "UCX over ud_verbs alone (UCX_TLS=ud_verbs): the same checks" ucx ud_verbs
ucx_check "ucx_perftest tag_lat 4 KiB, UCX defaults" perftest
check "libfabric msg (verbs), fi_pingpong -v, 64 KiB" fi_pp verbs msg 65536
check "libfabric rdm (verbs;ofi_rxm, default FI_UNIVERSE_SIZE), fi_pingpong -v, 64 KiB" \
    fi_pp "verbs;ofi_rxm" rdm 65536
check "libfabric dgram (verbs), fi_pingpong -v, 1 KiB" fi_pp verbs dgram 1024
ucx_check "Open MPI (pml ucx, its default here), 2 guests, every check" \
    mpi 2 "mpirun -np 2 --host vm1,vm2 qhca-mpi-check.openmpi"
ucx_check "Open MPI over libfabric (mtl ofi, verbs;ofi_rxm), 2 guests" \
    mpi 2 "$ompi_ofi -np 2 --host vm1,vm2 qhca-mpi-check.openmpi"
ucx_check "MPICH (ch4:ucx), 2 guests, every check" \
    mpi 2 "mpiexec.mpich -n 2 -hosts vm1,vm2 qhca-mpi-check.mpich"
check "mpi4py: allreduce and 1 MiB each way across the guests" mpi4py_allreduce
vm_up 4
check "ssh between four guests by name" ssh_by_name 4
ucx_check "Open MPI (pml ucx), 4 guests, every check" \
    mpi 4 "mpirun -np 4 --host vm1,vm2,vm3,vm4 qhca-mpi-check.openmpi"
ucx_check "Open MPI over libfabric (mtl ofi, verbs;ofi_rxm), 4 guests" \
    mpi 4 "$ompi_ofi -np 4 --host vm1,vm2,vm3,vm4 qhca-mpi-check.openmpi"
ucx_check "MPICH (ch4:ucx), 4 guests, every check" \
    mpi 4 "mpiexec.mpich -n 4 -hosts vm1,vm2,vm3,vm4 qhca-mpi-check.mpich"
vm_down
finish
