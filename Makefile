# SPDX-License-Identifier: GPL-2.0-or-later
# qhca: make demo | make check | make all, and the finer targets below.
# Everything built goes to the cache, never into this tree. The one rule, the same in
# scripts/lib.sh, tools/qhca and tests/vm/lib.sh (checked by 'make cache-rule'):
# $QHCA_CACHE if set, else ${XDG_CACHE_HOME:-$HOME/.cache}/qhca.
SHELL := /bin/bash
QHCA_CACHE := $(or $(QHCA_CACHE),$(or $(XDG_CACHE_HOME),$(HOME)/.cache)/qhca)
export QHCA_CACHE
# The guests' Debian (docs/flavours.md): debian13 (default), debian12 or newest.
FLAVOUR ?= $(or $(QHCA_FLAVOUR),debian13)
export QHCA_FLAVOUR := $(FLAVOUR)
.NOTPARALLEL:

TIME = @t0=$$(date +%s); trap 'echo "==> $@: $$(( $$(date +%s) - t0 )) s" >&2' EXIT;

.PHONY: help all host qemu driver flavour-driver siw provider deb image unit sanitize fuzz qtest vmtest check check-sanitize check-storage check-kernels check-qemu check-disk check-migrate driver-loop demo bench bench-families bench-net bench-qp bench-migrate soak down clean \
	cache-rule print-cache

help:
	@echo "make demo      build everything, boot two VMs and print ibv_devinfo from each"
	@echo "make check     build everything and run the test suite (CI runs this; the long"
	@echo "               runs below, make check-*, are targets of their own)"
	@echo "make check-kernels  the verbs, NVMe-oF and middleware tiers on every flavour and"
	@echo "               its kernel: FLAVOUR=debian12 (6.1), debian13 (6.12), newest (7.x),"
	@echo "               and a kernel built from Debian's linux source (images/kernel.config)"
	@echo "make check-disk  a stock Debian 13 disk guest: make deb's packages with apt, DKMS in"
	@echo "               the guest, pingpong, perftest, NVMe-oF between two (docs/install-guest.md)"
	@echo "make check-qemu  the device on the newest QEMU Debian's archive has the source of"
	@echo "               (QEMU=10.2 for a series): build, qtests, checkpatch.pl, VM tiers"
	@echo "make check-sanitize  QEMU and the qtests under ASan+UBSan, QEMU's generic-fuzz"
	@echo "               over the device (FUZZ_SECONDS, 60)"
	@echo "make check-storage  NVMe-oF, NFS and iSER over iWARP with link toggles and second"
	@echo "               rounds (make check runs each once)"
	@echo "make check-migrate  test-migrate with NVMe-oF and NFS over RDMA while both guests"
	@echo "               move (docs/migration.md)"
	@echo "make all       build QEMU+qhca, the guest driver, provider and image"
	@echo "make bench     qhca against Linux rxe between the same two VMs, the device and the"
	@echo "               fabric alone (figures, not a test); PROFILE=1 adds QEMU profiles"
	@echo "make bench-families  perftest on RoCE v2, RoCE v1, iWARP and InfiniBand, one after"
	@echo "               the other between the same two VMs, beside Linux rxe and siw"
	@echo "make bench-qp  16384 QPs on one device (QHCA_QPS=N, 0: until refused): time per"
	@echo "               create, modify, message and destroy, memory per QP in guest and host"
	@echo "make bench-net ib_write_bw/lat on the fabric, a bridge, VXLAN between two namespaces"
	@echo "               and libvirt (on the fabric, on a bridge): figures side by side (root)"
	@echo "make bench-migrate  live migration and snapshots: device state per QP, downtime"
	@echo "               and the device's share of it, ready after up --snapshot vs a boot"
	@echo "make driver-loop  edit, rebuild the driver, two guests ready, a test passes: timed"
	@echo "make soak      RC through a lossy fabric, 1 GiB with every byte checked (figures)"
	@echo "make fuzz      run the fuzz targets FUZZ_SECONDS each (default 60)"
	@echo "make deb       the driver (DKMS) and the provider as .debs for FLAVOUR's release"
	@echo "finer targets: host qemu driver siw provider image unit sanitize qtest vmtest down"
	@echo "               clean (siw: Linux soft-iWARP for the guests, from Debian's source)"
	@echo "               cache-rule (make, scripts, launcher and VM tests agree on the cache)"
	@echo "cache: $(QHCA_CACHE)"

all: host qemu driver provider image

host:
	$(TIME) bash scripts/build-host.sh plain > /dev/null

qemu:
	$(TIME) bash scripts/build-qemu.sh

# KDIR=TREE: against a kernel tree you built (docs/flavours.md, "Your kernel tree"). Only
# from make's command line: a KDIR in the environment (kernel developers often have one)
# must not turn the flavour's driver into another kernel's.
KDIR_ARG := $(if $(filter command line,$(origin KDIR)),$(KDIR))
driver:
	$(TIME) bash scripts/build-driver.sh $(if $(KDIR_ARG),--kdir "$(KDIR_ARG)")

# The driver for the flavour's kernel, which the image holds, whatever KDIR says.
flavour-driver:
	$(TIME) bash scripts/build-driver.sh

# Linux siw (soft-iWARP) for the flavour's kernel, which Debian builds without it: out of
# tree, from Debian's linux source of that kernel (the image holds it; 'qhca up --siw').
siw:
	$(TIME) bash scripts/build-siw.sh

provider:
	$(TIME) bash scripts/build-provider.sh

# The driver as a DKMS package and the provider as a package, for the flavour's release
# (FLAVOUR=): for guests of your own (docs/install-guest.md).
deb:
	$(TIME) bash scripts/build-deb.sh

image: flavour-driver siw provider
	$(TIME) bash scripts/build-image.sh

unit: host cache-rule
	@bash tests/check.sh unit

print-cache:
	@echo "$(QHCA_CACHE)"

# make, scripts/lib.sh, tools/qhca and tests/vm/lib.sh must find the same cache with
# QHCA_CACHE set, with only XDG_CACHE_HOME set, and with neither (HOME is a scratch directory).
cache-rule:
	@t=$$(mktemp -d) && trap 'rm -rf "$$t"' EXIT && fail=0 && \
	for env in "QHCA_CACHE=$$t/q" "XDG_CACHE_HOME=$$t/x" "XDG_CACHE_HOME=" "HOME=$$t/h"; do \
	    e=(env -u QHCA_CACHE -u XDG_CACHE_HOME -u QHCA_RUN HOME="$$t/h" "$$env"); \
	    case $$env in QHCA_CACHE=*) want=$$t/q ;; XDG_CACHE_HOME=?*) want=$$t/x/qhca ;; \
	                  *) want=$$t/h/.cache/qhca ;; esac; \
	    mk=$$("$${e[@]}" $(MAKE) -s --no-print-directory print-cache); \
	    sh=$$("$${e[@]}" bash -c '. scripts/lib.sh && echo "$$QHCA_CACHE"'); \
	    py=$$("$${e[@]}" tools/qhca paths | sed -n 's/^cache //p'); \
	    vm=$$("$${e[@]}" bash -c '. tests/vm/lib.sh && echo "$${QHCA_RUN%/run-check}"'); \
	    if [ "$$mk $$sh $$py $$vm" = "$$want $$want $$want $$want" ]; then \
	        echo "ok - cache rule with $$env: $$want"; \
	    else \
	        echo "not ok - cache rule with $$env: want $$want; make $$mk, scripts $$sh," \
	             "launcher $$py, vm tests $$vm"; fail=1; \
	    fi; \
	done; exit $$fail

sanitize:
	@bash tests/check.sh sanitize

# make fuzz FUZZ_SECONDS=1800 for a long run; make check runs 10 s of each engine target.
FUZZ_SECONDS ?= 60
fuzz:
	@bash scripts/fuzz.sh $(FUZZ_SECONDS)

qtest: qemu
	@bash tests/check.sh qtest

vmtest: all
	@bash tests/check.sh vm

check: all cache-rule
	@bash tests/check.sh

# The device inside QEMU under the sanitizers: the qtests with QEMU and the qtest built with
# ASan+UBSan, and QEMU's generic-fuzz over the device's BARs and DMA (FUZZ_SECONDS, 60 s);
# each has a QEMU build of its own (about 7 and 5 min the first time).
check-sanitize: qemu
	@QHCA_FUZZ_SECONDS=$(FUZZ_SECONDS) bash tests/check.sh qtest-sanitize fuzz-qemu

# Every flavour, each with its own kernel (Debian 12: 6.1, Debian 13: 6.12, newest: 7.x):
# foundation, pingpongs, perftest, the verbs tier, NVMe-oF and the middleware on each; then
# a kernel built from Debian's source with qhca's small configuration, booted with 'up --kernel'.
check-kernels: host qemu
	@bash tests/check.sh kernels

# qhca in a stock Debian 13 disk guest (GRUB, systemd, Debian's kernel): make deb's packages
# installed with apt, DKMS building qhca.ko in the guest, RDMA between two such guests.
check-disk: all
	@bash tests/check.sh disk

# The device on the newest QEMU whose source the archive serves (QEMU=SERIES for another):
# build, qtests, checkpatch.pl, guests booting and running RDMA on it.
check-qemu: all
	@bash tests/check.sh qemu

demo: all
	@bash scripts/demo.sh

# qhca against Linux rxe in the same two VMs, and the host memcpy baseline (not a test).
bench: all
	@bash bench/run.sh

# The RDMA families one after the other between the same two VMs, beside Linux's software
# devices: RoCE v2 and v1 with rxe, iWARP with siw, InfiniBand (perftest; not a test).
bench-families: all
	@bash bench/families.sh

# QPs on one device until QHCA_QPS (16384) or the device's limit, each connected and used
# once: time per create and memory per QP, guest and host (one VM; make bench runs it too).
bench-qp: all
	@bash bench/qp-scale.sh

# ib_write_bw and ib_write_lat on each way of joining two guests: the fabric, a bridge, VXLAN
# between two namespaces, libvirt on the fabric and on a bridge (root; docs/fabric.md).
bench-net: all
	@bash bench/networks.sh

# NVMe-oF, NFS over RDMA and iSER over the device as an iWARP RNIC, as test-storage runs them
# over RoCE: every transfer size, guest 2's link down 5 s during the I/O, a second round
# (make check runs each once).
check-storage: all
	@bash tests/check.sh vm-storage

# Live migration with the kernel's consumers too: test-migrate with NVMe-oF (fio verify) and
# NFS over RDMA while both guests move (make check runs test-migrate without them).
check-migrate: all
	@QHCA_MIGRATE_STORAGE=1 bash tests/check.sh vm-migrate

# Live migration and snapshots: the device's state by the engine alone, moves idle and
# under load (QEMU's downtime, the device's share), two guests ready after a boot and after
# up --snapshot (docs/migration.md). make bench runs it too.
bench-migrate: all
	@bash bench/migration.sh

# The driver developer's loop, timed: edit, rebuild, two guests ready, a test passes.
driver-loop: host qemu siw provider
	@bash bench/driver-loop.sh

# RC through a lossy fabric for a long time (1 GiB, every byte checked); QHCA_SOAK_BYTES.
soak: all
	@bash bench/soak.sh

down:
	@tools/qhca down

# Removes the whole cache: the next build is a cold one.
clean:
	-@tools/qhca down 2>/dev/null
	rm -rf "$(QHCA_CACHE)"
