#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
# A kernel ULP developer's test, run by 'qhca run' in guest 1 (docs/ci.md): NVMe over RDMA
# from guest 1 to a target in guest 2 (reached by ssh as vm2), 64 MiB written and read back.
# Prints TAP, which 'qhca run' turns into JUnit test cases.
set -u
t=0 failed=0
ok() { t=$((t + 1)); echo "ok $t - $1"; }
notok() { t=$((t + 1)); failed=1; echo "not ok $t - $1"; }
echo "1..5"
nqn=nqn.2014-08.org.qhca:ci
if ssh vm2 "set -e; modprobe nvmet-rdma; dd if=/dev/zero of=/tmp/ns.img bs=1M count=64 2>/dev/null
    n=/sys/kernel/config/nvmet; s=\$n/subsystems/$nqn; p=\$n/ports/1
    mkdir \$s; echo 1 > \$s/attr_allow_any_host; mkdir \$s/namespaces/1
    echo /tmp/ns.img > \$s/namespaces/1/device_path; echo 1 > \$s/namespaces/1/enable
    mkdir \$p; echo rdma > \$p/addr_trtype; echo ipv4 > \$p/addr_adrfam
    echo 192.168.77.2 > \$p/addr_traddr; echo 4420 > \$p/addr_trsvcid
    ln -s \$s \$p/subsystems/$nqn"; then
    ok "nvmet-rdma target in vm2 at 192.168.77.2:4420"
else
    notok "nvmet-rdma target in vm2 at 192.168.77.2:4420"
fi
modprobe nvme-rdma &&
    nvme connect -t rdma -a 192.168.77.2 -s 4420 -n $nqn > /dev/null 2>&1 && ok "nvme connect over RDMA" ||
    notok "nvme connect over RDMA"
dev=
for i in 1 2 3 4 5 6 7 8 9 10; do	# the namespace's block device (not a controller path, *c*)
    for n in /sys/block/nvme*n*; do
        case ${n##*/} in *c*) continue ;; esac
        [ "$(cat $n/device/subsysnqn 2>/dev/null)" = $nqn ] && dev=/dev/${n##*/}
    done
    [ -n "$dev" ] && break
    sleep 1
done
[ -n "$dev" ] && ok "namespace $dev" || notok "a namespace appeared"
dd if=/dev/urandom of=/tmp/data bs=1M count=64 2>/dev/null
if [ -n "$dev" ] && dd if=/tmp/data of=$dev bs=1M oflag=direct 2>/dev/null &&
   [ "$(dd if=$dev bs=1M count=64 iflag=direct 2>/dev/null | sha256sum)" = "$(sha256sum < /tmp/data)" ]; then
    ok "64 MiB written and read back over RDMA, sha256 equal"
else
    notok "64 MiB written and read back over RDMA, sha256 equal"
fi
nvme disconnect -n $nqn 2>&1 | grep -q "disconnected 1 controller" && ok "nvme disconnect" ||
    notok "nvme disconnect"
exit $failed
