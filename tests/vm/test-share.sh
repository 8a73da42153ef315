#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# VM test of "your own program" (README, docs/tutorial.md): a verbs program written and built
# on the host, shared into both guests with 'up --share' and run between them, in C and in
# Python (pyverbs); the share read-only unless --share-rw; 'qhca cp' into and out of a guest
# byte for byte, and its failures.
set -uo pipefail
. "$(dirname "$0")/lib.sh"

work=$(mktemp -d /tmp/qhca-share.XXXXXX)
trap 'rm -rf "$work"' EXIT
prog=$work/prog	# read-only in the guests
rw=$work/rw	# writable
mkdir -p "$prog" "$rw"
cp "$root/examples/hello_rdma.c" "$root/examples/hello_rdma.py" "$prog/"

# Built here, on the host, against the host's libibverbs and librdmacm: the guests' are the
# same or newer, and a binary linked against an older libibverbs runs on a newer one.
check "hello_rdma.c builds on the host" \
    gcc -O2 -Wall -Wextra -o "$prog/hello_rdma" "$prog/hello_rdma.c" -lrdmacm -libverbs

vm_up 2 --share "$prog" --share-rw "$rw"

check "the share is at the host's path in both guests, read-only" eval '
    for i in 1 2; do
        "$qhca" exec $i -- "grep -q \" $prog 9p .*\\bro\\b\" /proc/mounts && test -x $prog/hello_rdma" || exit 1
        ! "$qhca" exec $i -- "touch $prog/written" 2>/dev/null || exit 1
    done
    [ ! -e "$prog/written" ]'
check "--share-rw: a guest writes, the host reads it" eval '
    "$qhca" exec 1 -- "echo from-vm1 > $rw/note" &&
    [ "$(cat "$rw/note")" = from-vm1 ]'

# run_pair SERVER CLIENT: SERVER in guest 2 in the background, CLIENT in guest 1; both
# outputs checked for the greeting going one way and the answer coming back.
run_pair() {
    "$qhca" exec 2 -- "rm -f /tmp/srv.out /tmp/srv.rc; setsid sh -c '$1 > /tmp/srv.out 2>&1; echo \$? > /tmp/srv.rc' < /dev/null > /dev/null 2>&1 &" || return 1
    local client i
    for i in 1 2 3 4 5 6; do	# the server listens once it is up: retry the connect
        sleep 1
        client=$(timeout 60 "$qhca" exec 1 -- "$2" 2>&1) && break
    done
    echo "client: $client"
    grep -qx "vm1 received: vm2 answers: hello from vm1" <<<"$client" || return 1
    eventually 20 "$qhca" exec 2 -- 'test "$(cat /tmp/srv.rc 2>/dev/null)" = 0' || return 1
    "$qhca" exec 2 -- 'cat /tmp/srv.out' | grep -qx "vm2 received: hello from vm1"
}
# Each side sends one 64-byte message and receives one: at least 64 B each way on qhca_0.
check "C: the host-built hello_rdma runs between the guests over qhca_0" \
    via_qhca "64 64" run_pair "$prog/hello_rdma -s 192.168.77.2" "$prog/hello_rdma 192.168.77.2"
check "Python: hello_rdma.py (pyverbs) runs between the guests over qhca_0" \
    via_qhca "64 64" run_pair "python3 $prog/hello_rdma.py -s 192.168.77.2" \
    "python3 $prog/hello_rdma.py 192.168.77.2"

# ---- qhca cp
mkdir -p "$work/tree/sub"
head -c 3000000 /dev/urandom > "$work/big"
echo one > "$work/tree/a"
echo two > "$work/tree/sub/b"
chmod 750 "$work/tree/a"
check "cp: a file and a directory into a guest, byte for byte" eval '
    "$qhca" cp "$work/big" "$work/tree" 1:/root/ &&
    [ "$("$qhca" exec 1 -- "md5sum < /root/big")" = "$(md5sum < "$work/big")" ] &&
    [ "$("$qhca" exec 1 -- "cat /root/tree/sub/b; stat -c %a /root/tree/a")" = "two
750" ]'
check "cp: a file to a new name, a directory to a new directory" eval '
    "$qhca" cp "$work/big" 1:/root/renamed && "$qhca" cp "$work/tree" 1:/root/copy &&
    "$qhca" exec 1 -- "cmp /root/big /root/renamed && cmp /root/tree/a /root/copy/a &&
                       cmp /root/tree/sub/b /root/copy/sub/b"'
check "cp: out of a guest, a file and a directory" eval '
    mkdir "$work/back" && "$qhca" cp 1:/root/renamed 1:/root/copy "$work/back" &&
    cmp "$work/big" "$work/back/renamed" && cmp "$work/tree/sub/b" "$work/back/copy/sub/b"'
check "cp: a guest's path that does not exist fails, and says so" eval '
    msg=$("$qhca" cp 1:/root/absent "$work" 2>&1); rc=$?
    [ $rc != 0 ] && grep -q "no such file" <<<"$msg" && [ ! -e "$work/absent" ]'
check "cp: a host path that does not exist fails" eval '! "$qhca" cp "$work/absent" 1:/root/ 2>/dev/null'
check "cp: several sources into a guest path that is no directory fails" \
    eval '! "$qhca" cp "$work/big" "$work/tree/a" 1:/root/renamed 2>/dev/null'
check "up --share of a directory the guest needs is refused" eval '
    msg=$("$qhca" up -n 1 --share /usr 2>&1); [ $? != 0 ] && grep -q "the guest itself needs" <<<"$msg"'

check "no kernel oops or qhca error" kernel_log_clean 1
vm_down
finish
