#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# VM test of qhca under libvirt (docs/libvirt.md), with Debian's libvirt: a libvirtd of the
# test's own (scripts/libvirtd-private.sh) inside a network namespace, so that its taps,
# bridge and the guests' ssh forwards are on no network of the host.
#  a. up --libvirt on the fabric: both domains defined and running under libvirtd (their QEMU
#     in its mount and network namespaces), the device in the domain's XML; ibv_rc_pingpong, ib_write_bw;
#     kill and start (virsh start) of a guest; down undefines both.
#  b. up --libvirt --bridge br0: libvirt's taps on the bridge, the device a libvirt interface
#     of model qhca; ping, ibv_rc_pingpong, rping, qhca-rcstress; then the XML of
#     docs/libvirt.md, defined and started as a third domain on the same bridge, does RDMA
#     with guest 1; down removes the domains and libvirt's taps.
set -uo pipefail
. "$(dirname "$0")/lib.sh"

if [ "$(id -u)" != 0 ]; then
    skip "qhca under libvirt" "not root (a libvirt daemon, a namespace and a bridge need root)"
    finish; exit $?
fi
ns=qhca-lv$$
lvdir=$(mktemp -d /tmp/qhca-libvirtd.XXXXXX)
docs_dir=$QHCA_RUN-docs
cleanup() {
    "$qhca" down > /dev/null 2>&1
    bash "$root/scripts/libvirtd-private.sh" stop "$lvdir" > /dev/null 2>&1
    [ -e "/run/netns/$ns" ] && ip netns del "$ns"
    rm -rf "$lvdir" "$docs_dir"
}
trap cleanup EXIT

start_libvirtd() {
    ip netns add "$ns" && ip -n "$ns" link set lo up &&
    ip -n "$ns" link add br0 type bridge && ip -n "$ns" link set br0 mtu 9000 up &&
    out=$(bash "$root/scripts/libvirtd-private.sh" start "$lvdir" "$ns") && echo "$out" &&
    grep -qxF "uri: $uri" <<< "$out"
}
uri="qemu:///system?socket=$lvdir/run/libvirt-sock"
check "Debian's libvirtd of the test's own, in namespace $ns with bridge br0" start_libvirtd ||
    { finish; exit 1; }
vsh() { virsh -q -c "$uri" "$@"; }
libvirtd_pid=$(cat "$lvdir/run/libvirtd.pid")

vm_pid() { python3 -c "import json, sys; print(json.load(open('$QHCA_RUN/state.json'))['vms'][$1 - 1]['pid'])"; }
domain() { python3 -c "import json; print(json.load(open('$QHCA_RUN/state.json'))['vms'][$1 - 1]['libvirt']['domain'])"; }

# Both guests are domains that libvirt runs: listed running, their QEMU in libvirtd's
# namespaces.
domains_running() {
    local list i d
    list=$(vsh list --name) || return 1
    echo "$list"
    for i in 1 2; do
        d=$(domain $i) && pid=$(vm_pid $i) && [ -n "$d" ] && [ -n "$pid" ] && [ -n "$libvirtd_pid" ] ||
            { echo "no domain or pid of vm$i in the state, or no libvirtd pid"; return 1; }
        grep -qx "$d" <<< "$list" || { echo "$d is not running"; return 1; }
        # libvirtd's QEMU shares its mount and network namespaces, which are not ours.
        for n in mnt net; do
            [ "$(readlink "/proc/$pid/ns/$n")" = "$(readlink "/proc/$libvirtd_pid/ns/$n")" ] &&
            [ "$(readlink "/proc/$libvirtd_pid/ns/$n")" != "$(readlink /proc/self/ns/$n)" ] ||
                { echo "vm$i's QEMU is not in libvirtd's $n namespace"; return 1; }
        done
    done
}

no_domains() {	# libvirt knows no domain any more (list ran and printed nothing)
    local list
    list=$(vsh list --all --name) || return 1
    [ -z "$(tr -d '[:space:]' <<< "$list")" ] || { echo "left: $list"; return 1; }
}

# ---- a. on the fabric ----
echo "# a. up --libvirt on the fabric"
vm_up 2 --libvirt "$uri" --netns "$ns"
check "both domains run under libvirtd" domains_running
check "libvirt's QEMU runs the qhca device on the fabric's port 1" eval '
    tr "\0" "\n" < "/proc/$(vm_pid 1)/cmdline" > "$lvdir/argv" &&
    grep -q "^qhca,id=qhca0,netdev=fabric,mac=52:54:00:51:48:01," "$lvdir/argv" &&
    grep -q "^stream,id=fabric,.*addr.path=$QHCA_RUN/fabric/port1.sock," "$lvdir/argv"'
check "ibv_rc_pingpong -c" pingpong ibv_rc_pingpong -s 65536 -n 100 -c
check "ib_write_bw" perf ib_write_bw -s 65536 -n 200
check "kill 2 (libvirt sees its domain shut off), start 2 (virsh start)" eval '
    "$qhca" kill 2 > /dev/null && eventually 10 sh -c "virsh -q -c \"$uri\" domstate $(domain 2) | grep -q \"shut off\"" &&
    "$qhca" start 2 && domains_running'
check "ibv_rc_pingpong -c after the restart" pingpong ibv_rc_pingpong -s 4096 -n 50 -c
vm_down
check "down undefined the domains" no_domains

# A domain with the name this run would give guest 1, but not this run's (no <metadata> of
# it): up refuses and leaves it defined.
check "a domain of that name that is not this run's is left alone" eval '
    sed -e "/<metadata>/d" -e "s|<uuid>.*</uuid>||" "$QHCA_RUN/vm1.xml" > "$lvdir/foreign.xml" &&
    name=$(sed -n "s|.*<name>\(.*\)</name>.*|\1|p" "$lvdir/foreign.xml") && [ -n "$name" ] &&
    vsh define "$lvdir/foreign.xml" > /dev/null &&
    out=$("$qhca" up -n 1 --libvirt "$uri" --netns "$ns" 2>&1); rc=$?; echo "$out" | tail -n 2
    vsh list --all --name | grep -qx "$name" && vsh undefine "$name" > /dev/null &&
    [ $rc != 0 ] && grep -q "was not made by this run" <<< "$out"'
check "and nothing of that up is left" eval 'no_domains && nothing_running'

# ---- b. on a bridge, libvirt's taps ----
echo "# b. up --libvirt --bridge br0"
vm_up 2 --libvirt "$uri" --bridge br0 --netns "$ns"
check "both domains run under libvirtd" domains_running
# The device is libvirt's own interface: domiflist names the bridge and the model.
check "the qhca device is a libvirt interface (bridge br0, model qhca)" eval '
    l=$(vsh domiflist "$(domain 1)") && echo "$l" &&
    grep -Eq "^ *vnet[0-9]+ +bridge +br0 +qhca +52:54:00:51:48:01" <<< "$l"'
check "ping over the bridge" eventually 20 "$qhca" exec 1 -- ping -c 2 -W 5 192.168.77.2
check "ibv_rc_pingpong -c over the bridge" pingpong ibv_rc_pingpong -s 65536 -n 100 -c
check "rping over the bridge" pair "modprobe rdma_ucm; rping -s -a 192.168.77.2 -C 20 -V" \
    "modprobe rdma_ucm; rping -c -a 192.168.77.2 -C 20 -V"
check "qhca-rcstress -b 8M over the bridge (RC, every byte checked)" \
    pair "qhca-rcstress -s -p 18841" "qhca-rcstress -p 18841 -b 8M 192.168.77.2"
check "the bridge learned both guests on libvirt's taps" eval '
    f=$(bridge -n "$ns" fdb show br br0) &&
    grep -Eq "52:54:00:51:48:01 dev vnet[0-9]+ " <<< "$f" && grep -Eq "52:54:00:51:48:02 dev vnet[0-9]+ " <<< "$f"'

# The XML of docs/libvirt.md ("Your own domain"), with its @NAME@s filled in, as guest 3.
docs_xml() {
    local port
    port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    mkdir -p "$docs_dir" && echo "$port" > "$docs_dir/port" &&
    awk '/^## Your own domain/ { on = 1 } on && /^```xml$/ { x = 1; next } x && /^```$/ { exit } x' \
        "$root/docs/libvirt.md" |
    sed -e "s|@QEMU@|$QHCA_CACHE/qemu/qemu-system-x86_64|" \
        -e "s|@KERNEL@|$QHCA_CACHE/flavour-debian13/image/vmlinuz|" \
        -e "s|@INITRD@|$QHCA_CACHE/flavour-debian13/image/initrd.cpio|" \
        -e "s|@OPTIONROM@|$QHCA_CACHE/qemu/pc-bios/optionrom|" \
        -e "s|@DIR@|$docs_dir|g" -e "s|@SSH_PORT@|$port|" > "$docs_dir/vm3.xml" &&
    grep -q "<model type='qhca'/>" "$docs_dir/vm3.xml" && ! grep -q @ "$docs_dir/vm3.xml"
}
x3() {	# x3 CMD: CMD in the docs' guest, over its ssh forward in the namespace
    ip netns exec "$ns" ssh -p "$(cat "$docs_dir/port")" -i "$QHCA_CACHE/ssh/id_ed25519" \
        -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR \
        -o BatchMode=yes -o ConnectTimeout=10 root@127.0.0.1 "$@"
}
check "the XML of docs/libvirt.md, filled in" docs_xml
check "virsh define and start it (guest 3 on br0)" eval '
    vsh define "$docs_dir/vm3.xml" && vsh start qhca-docs-vm3'
check "guest 3 boots and answers ssh" eventually 120 x3 'ibv_devinfo -d qhca_0 | grep -q PORT_ACTIVE'
check "ibv_rc_pingpong -c between guest 1 and the docs' guest 3" eval '
    x3 "setsid ibv_rc_pingpong -d qhca_0 -g 3 -s 4096 -n 100 -c > /tmp/pp.log 2>&1 < /dev/null &" &&
    eventually 15 x3 "ss -ltn | grep -q :18515" &&
    timeout 120 "$qhca" exec 1 -- ibv_rc_pingpong -d qhca_0 -g 3 -s 4096 -n 100 -c 192.168.77.3 | tail -n 2 &&
    eventually 20 x3 "grep -q \"100 iters\" /tmp/pp.log"'
check "the docs' domain destroyed and undefined" eval '
    vsh destroy qhca-docs-vm3 && vsh undefine qhca-docs-vm3'
vm_down
check "down undefined the domains" no_domains
check "libvirt's taps are gone from the bridge" eval '
    l=$(ip -n "$ns" -o link show) && echo "$l" | grep -q br0 && ! grep -q vnet <<< "$l"'
finish
