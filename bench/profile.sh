# SPDX-License-Identifier: GPL-2.0-or-later
# Sourced by bench/run.sh for `make bench PROFILE=1`: where each guest's QEMU spends its time
# during a 1 MiB ib_write_bw between the guests, by thread and function (linux-perf), as
# docs/performance.md reads it. Needs the VMs up (run.sh: gid_index, qhca).

profile_write_bw() {
    local gid secs=8 i pid
    need_pkgs linux-perf
    gid=$(gid_index qhca_0)
    step "bench: profile of both QEMUs during ib_write_bw -s 1048576 (${secs} s, linux-perf)"
    "$qhca" exec 2 -- "setsid ib_write_bw -d qhca_0 -x $gid -s 1048576 -D $((secs + 4)) > /tmp/p.log 2>&1 < /dev/null &"
    sleep 2
    "$qhca" exec 1 -- "setsid ib_write_bw -d qhca_0 -x $gid -s 1048576 -D $((secs + 4)) 192.168.77.2 > /tmp/p.log 2>&1 < /dev/null &"
    sleep 2
    for i in 1 2; do
        pid=$(pgrep -f "$QHCA_RUN/vm$i.console" | head -n 1)
        [ -n "$pid" ] || die "no QEMU for vm$i"
        # (command: run.sh has a function of the same name)
        command perf record -q -g -p "$pid" -o "$QHCA_RUN/perf-vm$i.data" -- sleep "$secs" \
            > /dev/null 2>&1 &
    done
    wait
    sleep 6
    for i in 1 2; do
        command perf report -q -i "$QHCA_RUN/perf-vm$i.data" --no-children -g none \
            --sort comm,symbol --percent-limit 1.5 --stdio 2> /dev/null | grep '%' |
            head -n 25 > "$QHCA_RUN/profile-vm$i.txt"
        echo "# vm$i's QEMU ($( [ $i = 1 ] && echo sender || echo receiver)): share, thread, function"
        cat "$QHCA_RUN/profile-vm$i.txt"
    done
}
