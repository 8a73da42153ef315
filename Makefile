# SPDX-License-Identifier: GPL-2.0-or-later
# qhca: make demo | make check | make all, and the finer targets below.
# Everything built goes to $(QHCA_CACHE) (default ~/.cache/qhca), never into this tree.
SHELL := /bin/bash
export QHCA_CACHE ?= $(HOME)/.cache/qhca
.NOTPARALLEL:

TIME = @t0=$$(date +%s); trap 'echo "==> $@: $$(( $$(date +%s) - t0 )) s" >&2' EXIT;

.PHONY: help all host qemu driver provider image unit sanitize fuzz qtest vmtest check demo bench down clean

help:
	@echo "make demo      build everything, boot two VMs and print ibv_devinfo from each"
	@echo "make check     build everything and run the whole test suite (CI runs this)"
	@echo "make all       build QEMU+qhca, the guest driver, provider and image"
	@echo "make bench     qhca against Linux rxe between the same two VMs (figures, not a test)"
	@echo "make fuzz      run the fuzz targets FUZZ_SECONDS each (default 60)"
	@echo "finer targets: host qemu driver provider image unit sanitize qtest vmtest down clean"
	@echo "cache: $(QHCA_CACHE)"

all: host qemu driver provider image

host:
	$(TIME) bash scripts/build-host.sh plain > /dev/null

qemu:
	$(TIME) bash scripts/build-qemu.sh

driver:
	$(TIME) bash scripts/build-driver.sh

provider:
	$(TIME) bash scripts/build-provider.sh

image: driver provider
	$(TIME) bash scripts/build-image.sh

unit: host
	@bash tests/check.sh unit

sanitize:
	@bash tests/check.sh sanitize

# make fuzz FUZZ_SECONDS=1800 for a long run; make check runs 20 s of each target.
FUZZ_SECONDS ?= 60
fuzz:
	@bash scripts/fuzz.sh $(FUZZ_SECONDS)

qtest: qemu
	@bash tests/check.sh qtest

vmtest: all
	@bash tests/check.sh vm

check: all
	@bash tests/check.sh

demo: all
	@bash scripts/demo.sh

# qhca against Linux rxe in the same two VMs, and the host memcpy baseline (not a test).
bench: all
	@bash bench/run.sh

down:
	@tools/qhca down

# Removes the whole cache: the next build is a cold one.
clean:
	-@tools/qhca down 2>/dev/null
	rm -rf "$(QHCA_CACHE)"
