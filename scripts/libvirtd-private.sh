#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# A libvirt daemon of qhca's own, for a host that runs none (a CI runner, a container, this
# project's tests; docs/libvirt.md): Debian's libvirtd (system mode, as root) with its
# configuration, sockets, state and logs all under DIR, in a mount namespace of its own so
# that nothing of the host's /etc/libvirt, /run/libvirt or /var/lib/libvirt is read or
# written. QEMU runs as root, without libvirt's security driver, cgroups or /dev namespace:
# it is a test daemon, not a hardened one.
#   libvirtd-private.sh start DIR [NETNS]   start it (inside network namespace NETNS, which
#                                           must exist); prints "uri: qemu:///system?socket=..."
#                                           DIR must be absent, empty or an earlier one's
#   libvirtd-private.sh stop DIR            stop it and the domains it still runs
# virsh -c URI then talks to it: 'virsh -c "$uri" list --all'.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

usage() { die "usage: $0 start DIR [NETNS] | stop DIR"; }
[ $# -ge 2 ] && [ -n "$2" ] || usage
cmd=$1 dir=$2 netns=${3:-}
case "$dir" in /*) ;; *) dir=$(pwd)/$dir ;; esac
case "$dir" in *"'"*|*,*) die "DIR may not hold a quote or a comma: $dir" ;; esac
mark="$dir/.qhca-libvirtd"	# written by start: DIR is one of ours

need_libvirt() {
    need_pkgs libvirt-daemon-system libvirt-daemon-driver-qemu libvirt-clients
}

# The pid of DIR's libvirtd, if it runs: the pidfile's pid, if that process is libvirtd and in
# a mount namespace other than ours (a pid left by a daemon that died may be anyone's now).
pid_of() {
    local pid
    pid=$(cat "$dir/run/libvirtd.pid" 2> /dev/null) && [[ "$pid" =~ ^[0-9]+$ ]] || return 1
    [ "$(readlink "/proc/$pid/exe" 2> /dev/null)" = /usr/sbin/libvirtd ] &&
        [ "$(readlink "/proc/$pid/ns/mnt")" != "$(readlink /proc/self/ns/mnt)" ] && echo "$pid"
}

case "$cmd" in
start)
    need_libvirt
    if pid=$(pid_of); then
        echo "uri: qemu:///system?socket=$dir/run/libvirt-sock"
        exit 0
    fi
    [ -z "$netns" ] || [ -e "/run/netns/$netns" ] || die "no network namespace $netns"
    # Only a directory of ours is emptied: never a directory someone named by mistake.
    if [ -e "$dir" ] && [ ! -e "$mark" ] && [ -n "$(ls -A "$dir" 2> /dev/null)" ]; then
        die "$dir is not empty and not a libvirtd directory of this script's; name another"
    fi
    mkdir -p "$dir" && chmod 700 "$dir" && touch "$mark" || die "cannot make $dir"
    rm -rf "${dir:?}"/{etc,run,lib,log,cache} && mkdir -p "$dir"/{etc,run,lib,log,cache}
    cat > "$dir/etc/qemu.conf" << 'EOF'
# qhca's private libvirtd (scripts/libvirtd-private.sh): QEMU as root, no confinement.
user = "root"
group = "root"
dynamic_ownership = 0
remember_owner = 0
security_driver = "none"
namespaces = [ ]
cgroup_controllers = [ ]
stdio_handler = "file"
EOF
    cat > "$dir/etc/libvirtd.conf" << 'EOF'
unix_sock_group = "root"
unix_sock_ro_perms = "0700"
unix_sock_rw_perms = "0700"
auth_unix_ro = "none"
auth_unix_rw = "none"
log_outputs = "3:file:/var/log/libvirt/libvirtd.log"
EOF
    : > "$dir/etc/libvirt.conf"
    # The daemon sees DIR's directories at libvirt's own paths, and nothing of the host's.
    # (The mount points themselves are made on the host if missing: libvirt's packages make
    # all but /run/libvirt, which a running system libvirtd would have made too.)
    inner='set -e
mkdir -p /etc/libvirt /run/libvirt /var/lib/libvirt /var/log/libvirt /var/cache/libvirt
for d in etc:/etc/libvirt run:/run/libvirt lib:/var/lib/libvirt log:/var/log/libvirt cache:/var/cache/libvirt; do
    mount --bind "$1/${d%%:*}" "${d#*:}"
done
exec /usr/sbin/libvirtd -d -p /run/libvirt/libvirtd.pid'
    if [ -n "$netns" ]; then
        ip netns exec "$netns" unshare -m --propagation private sh -c "$inner" sh "$dir"
    else
        unshare -m --propagation private sh -c "$inner" sh "$dir"
    fi
    for _ in $(seq 100); do
        [ -S "$dir/run/libvirt-sock" ] && virsh -q -c "qemu:///system?socket=$dir/run/libvirt-sock" \
            list --all > /dev/null 2>&1 && break
        sleep 0.1
    done
    [ -S "$dir/run/libvirt-sock" ] || { tail -n 20 "$dir/log/libvirtd.log" >&2; die "libvirtd did not start; see $dir/log/libvirtd.log"; }
    echo "uri: qemu:///system?socket=$dir/run/libvirt-sock"
    ;;
stop)
    if pid=$(pid_of); then
        uri="qemu:///system?socket=$dir/run/libvirt-sock"
        for d in $(virsh -q -c "$uri" list --name 2> /dev/null); do
            virsh -q -c "$uri" destroy "$d" > /dev/null 2>&1 || true
        done
        kill "$pid"
        for _ in $(seq 50); do kill -0 "$pid" 2> /dev/null || break; sleep 0.1; done
        kill -9 "$pid" 2> /dev/null || true
    fi
    ;;
*) usage ;;
esac
