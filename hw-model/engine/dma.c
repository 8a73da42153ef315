// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * qhca engine: the one checked path into guest memory. Every read and write of guest
 * memory goes through qhca_dma_read() or qhca_dma_write(): a range that wraps, starts at 0
 * or passes QHCA_DMA_MAX_LEN is refused before the platform sees it, and the bytes moved
 * count for the admin and send queues' budgets.
 */
#include <stdio.h>

#include "engine_internal.h"

static bool dma_range_ok(struct qhca_engine *e, uint64_t addr, size_t len, const char *what)
{
	if (len == 0)
		return true;
	if (len > QHCA_DMA_MAX_LEN || addr == 0 || addr + len < addr) {
		qhca_log_guest(e, "%s: bad guest range addr=0x%llx len=%zu", what,
			       (unsigned long long)addr, len);
		return false;
	}
	return true;
}

int qhca_dma_read(struct qhca_engine *e, uint64_t addr, void *buf, size_t len)
{
	if (!dma_range_ok(e, addr, len, "read"))
		return -1;
	e->dma_bytes += len;	/* counted for the admin queue's budget */
	e->dma_calls++;
	if (len && e->ops->dma_read(e->opaque, addr, buf, len)) {
		qhca_log_guest(e, "read of %zu bytes at 0x%llx failed", len, (unsigned long long)addr);
		return -1;
	}
	return 0;
}

int qhca_dma_write(struct qhca_engine *e, uint64_t addr, const void *buf, size_t len)
{
	if (!dma_range_ok(e, addr, len, "write"))
		return -1;
	e->dma_bytes += len;
	e->dma_calls++;
	if (len && e->ops->dma_write(e->opaque, addr, buf, len)) {
		qhca_log_guest(e, "write of %zu bytes at 0x%llx failed", len, (unsigned long long)addr);
		return -1;
	}
	return 0;
}

