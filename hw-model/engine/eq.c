// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * qhca event queues: rings of 16-byte events with a phase bit in guest memory, one MSI-X
 * vector each. The async EQ also carries port events. A full EQ drops the event, counts it
 * and reports QHCA_EVENT_EQ_OVERFLOW once there is room again.
 */
#include <string.h>

#include "engine_internal.h"

static uint32_t eq_size(const struct qhca_eq *q)
{
	return 1u << q->log2;
}

uint16_t qhca_eq_create(struct qhca_engine *e, const struct qhca_cmd_create_eq *c,
			uint32_t *handle)
{
	struct qhca_eq *q;
	uint32_t h;
	int64_t idx;

	if (c->log2_entries < 1 || c->log2_entries > QHCA_EQ_MAX_LOG2 ||
	    c->vector >= e->cfg.msix_vectors || (c->flags & ~QHCA_EQ_ASYNC) ||
	    !c->ring_addr || c->ring_addr % 4096 ||
	    c->ring_addr + ((uint64_t)sizeof(struct qhca_eqe) << c->log2_entries) < c->ring_addr)
		return QHCA_ST_BAD_FIELD;
	if ((c->flags & QHCA_EQ_ASYNC) && e->async_eq >= 0)
		return QHCA_ST_BUSY;
	h = qhca_obj_alloc(&e->eq_table, QHCA_HANDLE_KERNEL);
	if (!h)
		return QHCA_ST_NO_RESOURCES;
	idx = qhca_obj_lookup(&e->eq_table, h);
	q = &e->eq[idx];
	memset(q, 0, sizeof(*q));
	q->ring = c->ring_addr;
	q->log2 = c->log2_entries;
	q->vector = c->vector;
	q->handle = h;
	if (c->flags & QHCA_EQ_ASYNC)
		e->async_eq = (int)idx;
	*handle = h;
	return QHCA_ST_OK;
}

uint16_t qhca_eq_destroy(struct qhca_engine *e, uint32_t handle)
{
	int64_t idx = qhca_obj_lookup(&e->eq_table, handle);

	if (idx < 0)
		return QHCA_ST_BAD_HANDLE;
	if (e->async_eq == idx)
		e->async_eq = -1;
	qhca_obj_free(&e->eq_table, handle);
	return QHCA_ST_OK;
}

void qhca_eq_reset(struct qhca_engine *e)
{
	qhca_obj_table_clear(&e->eq_table);
	memset(e->eq, 0, sizeof(e->eq));
	e->async_eq = -1;
}

void qhca_eq_doorbell(struct qhca_engine *e, uint64_t value)
{
	uint32_t handle = QHCA_FIELD_GET(QHCA_DB_NUM_MASK, value);
	uint32_t ci = QHCA_FIELD_GET(QHCA_DB_INDEX_MASK, value);
	int64_t idx = qhca_obj_lookup(&e->eq_table, handle);
	struct qhca_eq *q;

	if (idx < 0) {
		qhca_log_guest(e, "EQ doorbell for bad handle 0x%x", handle);
		return;
	}
	q = &e->eq[idx];
	/* The consumer can only move forward, and not past what was produced. */
	if (q->pi - ci > eq_size(q) || ci - q->ci > q->pi - q->ci) {
		qhca_log_guest(e, "EQ 0x%x doorbell ci %u outside [%u, %u]", handle, ci, q->ci, q->pi);
		return;
	}
	q->ci = ci;
}

static int write_eqe(struct qhca_engine *e, struct qhca_eq *q, uint8_t type, uint32_t handle,
		     uint64_t data)
{
	struct qhca_eqe eqe = {
		.type = type,
		.handle = handle,
		.data = data,
	};
	uint64_t slot = q->ring + (uint64_t)(q->pi & (eq_size(q) - 1)) * sizeof(eqe);
	uint8_t phase = ((q->pi >> q->log2) & 1) ? 0 : QHCA_EQE_PHASE;

	/* The entry with the stale phase first, then the flags byte that makes it valid. */
	eqe.flags = phase ^ QHCA_EQE_PHASE;
	if (qhca_dma_write(e, slot, &eqe, sizeof(eqe)) ||
	    qhca_dma_write(e, slot + offsetof(struct qhca_eqe, flags), &phase, 1))
		return -1;
	qhca_step(e, "eqe eq=%u slot=%u type=%u handle=0x%x gpa=0x%llx", q->handle,
		  q->pi & (eq_size(q) - 1), type, handle, (unsigned long long)slot);
	q->pi++;
	return 0;
}

int qhca_eq_post(struct qhca_engine *e, int idx, uint8_t type, uint32_t handle, uint64_t data)
{
	struct qhca_eq *q = &e->eq[idx];
	uint32_t used = q->pi - q->ci;

	if (q->overflowed && used + 2 <= eq_size(q)) {
		if (write_eqe(e, q, QHCA_EVENT_EQ_OVERFLOW, q->handle, 0) == 0)
			q->overflowed = false;
		used++;
	}
	if (used >= eq_size(q) || q->overflowed) {
		q->overflowed = true;
		e->cnt.eq_overflows++;
		qhca_log(e, QHCA_LOG_EVENT, "EQ %d full: event %u dropped", idx, type);
		return -1;
	}
	if (write_eqe(e, q, type, handle, data)) {
		qhca_log_guest(e, "EQ %d: event %u could not be written to its ring", idx, type);
		return -1;
	}
	if (q->vector >= 32 || !(e->intr_mask & (1u << q->vector))) {
		qhca_step(e, "irq vector=%u raised=1", q->vector);
		e->ops->notify(e->opaque, q->vector);
	} else {
		qhca_step(e, "irq vector=%u raised=0 why=masked", q->vector);
	}
	return 0;
}

void qhca_event_async(struct qhca_engine *e, uint8_t type, uint32_t handle, uint64_t data)
{
	qhca_log(e, QHCA_LOG_EVENT, "async event %u handle 0x%x", type, handle);
	if (e->async_eq >= 0)
		qhca_eq_post(e, e->async_eq, type, handle, data);
}
