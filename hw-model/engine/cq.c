// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * qhca completion queues: rings of 32-byte CQEs with a phase bit in guest pages, the
 * consumer's index in a record after the ring, arming for the next (or next solicited)
 * completion, and overflow turned into an async CQ error.
 */
#include <stdlib.h>
#include <string.h>

#include "engine_internal.h"

#define CQ_MAX_LOG2	22
#define CQ_MOVE		(4096 / sizeof(struct qhca_cqe))	/* CQEs a resize moves at once */

struct qhca_cq *qhca_cq_find(struct qhca_engine *e, uint32_t cqn)
{
	int64_t idx = qhca_obj_lookup(&e->cq_table, cqn);

	return idx < 0 ? NULL : e->cq[idx];
}

static uint64_t ring_bytes(uint32_t log2)
{
	return (uint64_t)sizeof(struct qhca_cqe) << log2;
}

uint16_t qhca_cq_create(struct qhca_engine *e, const struct qhca_cq_create *c, uint32_t *cqn)
{
	int64_t eq = qhca_obj_lookup(&e->eq_table, c->eq);
	uint64_t need;
	struct qhca_cq *cq;
	uint16_t st;
	uint32_t h;

	if (c->log2_entries < 1 || c->log2_entries > CQ_MAX_LOG2 ||
	    (1u << c->log2_entries) > e->cfg.max_cqe * 2u || c->rsvd)
		return QHCA_ST_BAD_FIELD;
	if (eq < 0 || (c->uctx && qhca_obj_lookup(&e->uctx, c->uctx) < 0))
		return QHCA_ST_BAD_HANDLE;
	need = ring_bytes(c->log2_entries) + sizeof(struct qhca_cq_dbrec);
	if ((uint64_t)c->pbl.npages << QHCA_PAGE_SHIFT < need)
		return QHCA_ST_BAD_FIELD;
	cq = qhca_host_zalloc(e, 1, sizeof(*cq));
	if (!cq)
		return QHCA_ST_NO_RESOURCES;
	st = qhca_pbl_load(e, &c->pbl, (uint32_t)((need + QHCA_PAGE_SIZE - 1) >> QHCA_PAGE_SHIFT),
			   &cq->pages);
	h = st == QHCA_ST_OK ? qhca_obj_alloc(&e->cq_table, c->uctx) : 0;
	if (!h) {
		qhca_host_free(cq->pages);
		qhca_host_free(cq);
		return st == QHCA_ST_OK ? QHCA_ST_NO_RESOURCES : st;
	}
	qhca_obj_hold(&e->uctx, c->uctx);
	cq->handle = h;
	cq->uctx = c->uctx;
	cq->eq = c->eq;
	cq->log2 = c->log2_entries;
	cq->npages = c->pbl.npages;
	e->cq[qhca_obj_lookup(&e->cq_table, h)] = cq;
	*cqn = h;
	return QHCA_ST_OK;
}

/* Read the consumer's index from the record after the ring; -1 if unreadable. */
static int cq_consumer(struct qhca_engine *e, const struct qhca_cq *cq, uint32_t *ci)
{
	return qhca_pages_xfer(e, cq->pages, cq->npages, ring_bytes(cq->log2), ci, sizeof(*ci),
			       false);
}

/* Write @cqe at index @idx of the ring behind @pages: the body, then the owner byte. */
static int cq_write(struct qhca_engine *e, const uint64_t *pages, uint32_t npages,
		    uint32_t log2, uint32_t idx, struct qhca_cqe *cqe)
{
	uint64_t off = (uint64_t)(idx & ((1u << log2) - 1)) * sizeof(*cqe);
	uint8_t phase = ((idx >> log2) & 1) ? 0 : QHCA_CQE_OWNER_PHASE;

	cqe->owner = phase ^ QHCA_CQE_OWNER_PHASE;
	if (qhca_pages_xfer(e, pages, npages, off, cqe, sizeof(*cqe), true))
		return -1;
	return qhca_pages_xfer(e, pages, npages, off + offsetof(struct qhca_cqe, owner), &phase, 1,
			       true);
}

uint16_t qhca_cq_resize(struct qhca_engine *e, uint32_t cqn, const struct qhca_cq_resize *r)
{
	struct qhca_cq *cq = qhca_cq_find(e, cqn);
	struct qhca_cqe move[CQ_MOVE];
	uint64_t need, *pages;
	uint32_t ci, n, i, chunk;
	uint16_t st;

	if (!cq)
		return QHCA_ST_BAD_HANDLE;
	if (r->log2_entries < 1 || r->log2_entries > CQ_MAX_LOG2 ||
	    (1u << r->log2_entries) > e->cfg.max_cqe * 2u || r->rsvd)
		return QHCA_ST_BAD_FIELD;
	need = ring_bytes(r->log2_entries) + sizeof(struct qhca_cq_dbrec);
	if ((uint64_t)r->pbl.npages << QHCA_PAGE_SHIFT < need)
		return QHCA_ST_BAD_FIELD;
	if (cq_consumer(e, cq, &ci))
		return QHCA_ST_DMA_ERROR;
	n = cq->pi - ci;
	if (n > (1u << cq->log2))
		return QHCA_ST_BAD_STATE;	/* the consumer's index is past the producer's */
	if (n >= (1u << r->log2_entries))
		return QHCA_ST_BAD_FIELD;	/* what is not polled yet does not fit */
	st = qhca_pbl_load(e, &r->pbl, (uint32_t)((need + QHCA_PAGE_SIZE - 1) >> QHCA_PAGE_SHIFT),
			   &pages);
	if (st != QHCA_ST_OK)
		return st;
	/*
	 * The CQEs not polled move to the start of the new ring a page's worth at a time: the
	 * consumer index is the guest's, so n may be the whole ring of 4M CQEs (128 MiB) even
	 * on a CQ that never completed anything; that costs two large copies, not 8 million
	 * small ones. The new ring is not the guest's to poll until the command completes, so
	 * each CQE goes whole with its owner bit set for the first lap.
	 */
	for (i = 0; i < n; i += chunk) {
		uint32_t src = (ci + i) & ((1u << cq->log2) - 1), j;

		chunk = n - i < CQ_MOVE ? n - i : CQ_MOVE;
		if (chunk > (1u << cq->log2) - src)
			chunk = (1u << cq->log2) - src;	/* to the old ring's end */
		if (qhca_pages_xfer(e, cq->pages, cq->npages, (uint64_t)src * sizeof(*move),
				    move, chunk * sizeof(*move), false))
			goto dma_err;
		for (j = 0; j < chunk; j++)
			move[j].owner = QHCA_CQE_OWNER_PHASE;	/* index i + j < the new size */
		if (qhca_pages_xfer(e, pages, r->pbl.npages, (uint64_t)i * sizeof(*move), move,
				    chunk * sizeof(*move), true))
			goto dma_err;
	}
	qhca_host_free(cq->pages);
	cq->pages = pages;
	cq->npages = r->pbl.npages;
	cq->log2 = r->log2_entries;
	cq->pi = n;
	qhca_log(e, QHCA_LOG_EVENT, "CQ 0x%x resized to %u entries, %u moved", cqn,
		 1u << cq->log2, n);
	return QHCA_ST_OK;
dma_err:
	qhca_host_free(pages);
	return QHCA_ST_DMA_ERROR;
}

static void cq_free(struct qhca_engine *e, struct qhca_cq *cq)
{
	e->cq[qhca_obj_lookup(&e->cq_table, cq->handle)] = NULL;
	qhca_obj_free(&e->cq_table, cq->handle);
	qhca_obj_unhold(&e->uctx, cq->uctx);
	qhca_host_free(cq->pages);
	qhca_host_free(cq);
}

uint16_t qhca_cq_destroy(struct qhca_engine *e, uint32_t cqn)
{
	struct qhca_cq *cq = qhca_cq_find(e, cqn);

	if (!cq)
		return QHCA_ST_BAD_HANDLE;
	if (cq->refs)
		return QHCA_ST_BUSY;
	cq_free(e, cq);
	return QHCA_ST_OK;
}

void qhca_cq_reset(struct qhca_engine *e)
{
	uint32_t i;

	for (i = 0; i < e->cq_table.capacity; i++)
		if (e->cq[i])
			cq_free(e, e->cq[i]);
	qhca_obj_table_clear(&e->cq_table);
}

static void cq_event(struct qhca_engine *e, struct qhca_cq *cq)
{
	/* The EQ may have been destroyed under the CQ by a misbehaving driver. */
	int64_t eq = qhca_obj_lookup(&e->eq_table, cq->eq);

	cq->armed = cq->armed_solicited = false;
	if (eq >= 0)
		qhca_eq_post(e, (int)eq, QHCA_EVENT_COMP, cq->handle, 0);
}

int qhca_cq_post(struct qhca_engine *e, struct qhca_cq *cq, struct qhca_cqe *cqe, bool solicited)
{
	uint32_t entries = 1u << cq->log2, ci;
	bool event;

	if (cq->overflowed)
		return -1;
	if (cq_consumer(e, cq, &ci))
		ci = cq->pi - entries;	/* unreadable record: treat as full */
	if (cq->pi - ci >= entries) {
		cq->overflowed = true;
		e->cnt.cq_overflows++;
		qhca_log_guest(e, "CQ 0x%x overflow (pi %u, consumer %u)", cq->handle, cq->pi, ci);
		qhca_event_async(e, QHCA_EVENT_CQ_ERR, cq->handle, 0);
		return -1;
	}
	if (cq_write(e, cq->pages, cq->npages, cq->log2, cq->pi, cqe))
		return -1;
	cq->pi++;
	/* Armed for solicited completions, an unsuccessful one fires too (IBA 11.4.2.2):
	 * consumers that arm so wait for their flushed receives (RDS does). */
	event = cq->armed || (cq->armed_solicited &&
			      (solicited || QHCA_FIELD_GET(QHCA_CQE_STATUS_MASK, cqe->qpn_status) !=
					    QHCA_WC_SUCCESS));
	if (qhca_tracing(e))
		qhca_step_cqe(e, cq->handle, (cq->pi - 1) & (entries - 1), cqe, event);
	if (event)
		cq_event(e, cq);
	return 0;
}

bool qhca_page_owns(struct qhca_engine *e, uint32_t page, uint32_t uctx)
{
	return page == 0 ? uctx == QHCA_HANDLE_KERNEL :
			   qhca_obj_lookup(&e->uctx, uctx) == (int64_t)page - 1;
}

void qhca_cq_arm_doorbell(struct qhca_engine *e, uint32_t page, uint64_t value, bool solicited)
{
	uint32_t cqn = QHCA_FIELD_GET(QHCA_DB_NUM_MASK, value);
	uint32_t ci = QHCA_FIELD_GET(QHCA_DB_INDEX_MASK, value);
	struct qhca_cq *cq = qhca_cq_find(e, cqn);

	/* A page may only arm the CQs of the user context it belongs to. */
	if (!cq || !qhca_page_owns(e, page, cq->uctx)) {
		qhca_log_guest(e, "CQ arm doorbell on page %u for CQ 0x%x refused", page, cqn);
		return;
	}
	/*
	 * The next completion written fires the event (IBA 11.4.2.2, ibv_req_notify_cq(3));
	 * those already in the CQ do not, whatever the consumer's index says: consumers poll
	 * once more after arming (the kernel driver reports them as missed events). Firing
	 * for them would be a second event for one completion: perftest's -e mode, which arms
	 * before it polls, takes that for another completion and fails.
	 */
	if (solicited)
		cq->armed_solicited = true;
	else
		cq->armed = true;
	qhca_step(e, "arm cq=0x%x ci=%u pi=%u solicited=%d page=%u", cqn, ci, cq->pi, solicited,
		  page);
	qhca_log(e, QHCA_LOG_EVENT, "CQ 0x%x armed%s, consumer at %u, producer at %u", cqn,
		 solicited ? " (solicited)" : "", ci, cq->pi);
}
