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
rw="$work/rw dir,1"	# writable; a space and a comma in its path (hex on the kernel command line)
mkdir -p "$prog" "$rw"
cp "$root/examples/hello_rdma.c" "$root/examples/hello_rdma.py" "$prog/"

# Built here, on the host, against the host's libibverbs and librdmacm: the guests' are the
# same or newer, and a binary linked against an older libibverbs runs on a newer one.
check "hello_rdma.c builds on the host" \
    gcc -O2 -Wall -Wextra -o "$prog/hello_rdma" "$prog/hello_rdma.c" -lrdmacm -libverbs

vm_up 2 --share "$prog" --share-rw "$rw"

check "the share is at the host's path in both guests" eval '
    for i in 1 2; do
        "$qhca" exec $i -- "grep -q \" $prog 9p \" /proc/mounts && test -x $prog/hello_rdma" || exit 1
    done'
# Read-only in QEMU, not only in the guest's mount: remounted writable, a write still fails.
check "a read-only share refuses a guest's write even remounted rw" eval '
    out=$("$qhca" exec 1 -- "mount -o remount,rw $prog && echo remounted; echo x > $prog/written" 2>&1)
    echo "$out"; grep -q remounted <<<"$out" && grep -q "Read-only file system" <<<"$out" &&
    [ ! -e "$prog/written" ]'
q=$(printf %q "$rw")
check "--share-rw (a path with a space and a comma): a guest writes, the host reads it" eval '
    "$qhca" exec 1 -- "echo from-vm1 > $q/note" && [ "$(cat "$rw/note")" = from-vm1 ]'
# What a guest sets of owners, modes and device nodes stays in extended attributes: the
# host's file is neither setuid nor a device.
check "--share-rw: a guest's setuid bit and device node do not reach the host" eval '
    "$qhca" exec 1 -- "cp /bin/busybox $q/suid && chmod 4755 $q/suid && mknod $q/disk b 8 0 && ls -l $q/suid $q/disk" &&
    [ -f "$rw/suid" ] && [ ! -u "$rw/suid" ] && [ -f "$rw/disk" ] && [ ! -b "$rw/disk" ]'

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
# fails NEEDLE COMMAND...: COMMAND fails and says NEEDLE (not any failure: a crash is none).
fails() {
    local needle=$1 msg; shift
    msg=$("$@" 2>&1) && { echo "succeeded: $msg"; return 1; }
    echo "$msg"; grep -q -- "$needle" <<<"$msg"
}
check "cp: a guest's path that does not exist fails, and says so" eval '
    fails "no such file" "$qhca" cp 1:/root/absent "$work" && [ ! -e "$work/absent" ]'
check "cp: a host path that does not exist fails" fails "No such file" "$qhca" cp "$work/absent" 1:/root/
check "cp: several sources into a guest path that is no directory fails" \
    fails "is not a directory" "$qhca" cp "$work/big" "$work/tree/a" 1:/root/renamed
# A hostile guest answers 'cp I:DIR' with a tar of its own making (its own tar first on
# PATH): a file beside the directory, a device, a link to write through, a setuid file.
evil() {	# evil KIND: the archive a hostile guest sends instead of DIR
    python3 - "$1" <<'EOP'
import io, sys, tarfile
kind = sys.argv[1]
b = io.BytesIO()
with tarfile.open(fileobj=b, mode="w") as tf:
    def add(name, typ=tarfile.REGTYPE, data=b"", link="", mode=0o644):
        ti = tarfile.TarInfo(name); ti.type = typ; ti.mode = mode; ti.linkname = link
        ti.size = len(data) if typ == tarfile.REGTYPE else 0
        tf.addfile(ti, io.BytesIO(data) if typ == tarfile.REGTYPE else None)
    add("loot", tarfile.DIRTYPE, mode=0o755)
    if kind == "beside": add(".bashrc", data=b"evil\n")
    if kind == "device": add("loot/disk", tarfile.BLKTYPE)
    if kind == "through": add("loot/up", tarfile.SYMTYPE, link="/tmp"); add("loot/up/x", tarfile.SYMTYPE, link="y")
    if kind == "suid": add("loot/s", data=b"#!/bin/sh\n", mode=0o4755)
sys.stdout.buffer.write(b.getvalue())
EOP
}
hostile() {	# hostile KIND: the guest's tar sends KIND; cp refuses it, or defuses the setuid bit
    local out=$work/out-$1 rc
    evil "$1" > "$work/evil.tar" && "$qhca" cp "$work/evil.tar" 1:/root/evil.tar || return 1
    # The guest replaces its own tar (it is root there): every later tar in it is the fake.
    "$qhca" exec 1 -- 't=$(command -v tar) && rm -f "$t" && printf "#!/bin/sh\ncat /root/evil.tar\n" > "$t" && chmod 755 "$t" && mkdir -p /root/loot' ||
        return 1
    mkdir -p "$out"
    "$qhca" cp 1:/root/loot "$out"
    rc=$?
    ls -laR "$out"
    [ ! -e "$out/.bashrc" ] && [ ! -e "$out/loot/up/x" ] && [ ! -L /tmp/x ] &&
        [ -z "$(find "$out" \( -perm -4000 -o -type b -o -type c \) -print)" ] || return 1
    if [ "$1" = suid ]; then [ $rc = 0 ] && [ -f "$out/loot/s" ]; else [ $rc != 0 ]; fi
}
for kind in beside device through suid; do
    check "cp: a hostile guest's tar ($kind) writes nothing unsafe on the host" hostile $kind
done
check "up --share of a directory the guest needs is refused" \
    fails "the guest itself needs" "$qhca" up -n 1 --share /usr
check "up --share of a directory holding qhca's cache is refused" \
    fails "holds qhca's cache" "$qhca" up -n 1 --share "$(dirname "$QHCA_CACHE")"

check "no kernel BUG, oops, warning or qhca error" kernel_log_clean 1
vm_down
finish
