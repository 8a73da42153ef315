#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# make driver-loop: the driver developer's loop, timed on the flavour's kernel
# (QHCA_FLAVOUR, QHCA_KERNEL): the driver edited (a changed source, as after an edit),
# rebuilt, the image's kernel layer made again, two guests booted and ready, and a test that
# passes between them (ibv_rc_pingpong with data checked). Prints each step's time and the
# total; the guests are stopped at the end. A figure, not a test.
set -euo pipefail
. "$(dirname "$0")/../scripts/lib.sh"
export QHCA_RUN=${QHCA_RUN:-$QHCA_CACHE/run-loop}
qhca="$QHCA_ROOT/tools/qhca"
flavour_init
rel=$(guest_kernel_abi)-amd64
# The edit: a line that changes the module (a modinfo field), appended to the driver's
# source in this tree and taken out again however the loop ends.
src="$QHCA_ROOT/guest-driver/qhca_main.c"
saved=$(mktemp)
cp -p "$src" "$saved"
trap 'cp -p "$saved" "$src"; rm -f "$saved"' EXIT

# Once, untimed: everything built, so that the loop measures an edit, not a first build.
bash "$QHCA_ROOT/scripts/build-driver.sh" > /dev/null
bash "$QHCA_ROOT/scripts/build-image.sh" > /dev/null
"$qhca" down > /dev/null 2>&1 || true

now() { date +%s.%N; }
t0=$(now)
echo "MODULE_INFO(driver_loop, \"$(date +%s%N)\");" >> "$src"
bash "$QHCA_ROOT/scripts/build-driver.sh" > /dev/null
t1=$(now)
bash "$QHCA_ROOT/scripts/build-image.sh" > /dev/null
t2=$(now)
"$qhca" up -n 2 > /dev/null 2>&1 || die "up failed; logs in $QHCA_RUN"
t3=$(now)
stamp=$(sed -n 's/^MODULE_INFO(driver_loop, "\(.*\)");$/\1/p' "$src")
[ "$("$qhca" exec 1 -- modinfo -F driver_loop qhca)" = "$stamp" ] ||
    die "the guests do not run the edited driver"
"$qhca" exec 2 -- "setsid sh -c 'ibv_rc_pingpong -d qhca_0 -g 3 -c -n 100 > /tmp/srv.log 2>&1' < /dev/null > /dev/null 2>&1 &"
sleep 1
ok=0
for _ in 1 2 3 4 5; do
    "$qhca" exec 1 -- ibv_rc_pingpong -d qhca_0 -g 3 -c -n 100 192.168.77.2 > /dev/null 2>&1 && { ok=1; break; }
    sleep 0.5
done
t4=$(now)
"$qhca" down > /dev/null 2>&1 || true
[ $ok = 1 ] || die "the test did not pass"
printf 'driver-loop (%s, %s): driver %.1f s, image %.1f s, guests ready %.1f s, test %.1f s: %.1f s in all\n' \
    "$QHCA_FLAVOUR" "$rel" "$(echo "$t1 - $t0" | bc)" "$(echo "$t2 - $t1" | bc)" \
    "$(echo "$t3 - $t2" | bc)" "$(echo "$t4 - $t3" | bc)" "$(echo "$t4 - $t0" | bc)"
