// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * qhca queue pairs and shared receive queues: creation from guest page lists, the state
 * machine of IBA 10.3 (RESET, INIT, RTR, RTS, SQD, SQE, ERR) with the attributes each
 * transition takes, work queue doorbells, receive WQEs, and flushing in the error state.
 */
#include <stdlib.h>
#include <string.h>

#include "engine_internal.h"

static const char *const state_names[] = {
	[QHCA_QPS_RESET] = "RESET", [QHCA_QPS_INIT] = "INIT", [QHCA_QPS_RTR] = "RTR",
	[QHCA_QPS_RTS] = "RTS", [QHCA_QPS_SQD] = "SQD", [QHCA_QPS_SQE] = "SQE",
	[QHCA_QPS_ERR] = "ERR",
};

const char *qhca_qp_state_name(uint8_t state)
{
	return state < sizeof(state_names) / sizeof(state_names[0]) && state_names[state] ?
	       state_names[state] : "?";
}

/*
 * A QPN (24 bits) is the QP's table slot + 2 in its low 21 bits and three bits of the
 * slot's generation above them, so a stale QPN (a doorbell, a command or a packet for a QP
 * that was destroyed) does not reach the QP that took its slot next (QPN_*_MASK).
 */
static uint32_t qpn_slot(uint32_t qpn)
{
	return QHCA_FIELD_GET(QPN_SLOT_MASK, qpn) - 2;
}

struct qhca_qp *qhca_qp_find(struct qhca_engine *e, uint32_t qpn)
{
	struct qhca_qp *qp;

	if (QHCA_FIELD_GET(QPN_SLOT_MASK, qpn) < 2 || qpn_slot(qpn) >= e->cfg.max_qp)
		return NULL;
	qp = e->qp[qpn_slot(qpn)];
	return qp && qp->qpn == qpn ? qp : NULL;
}

/* ---------------------------------------------------------------- work queues */
static uint64_t wqe_addr_off(const struct qhca_wq *wq, uint32_t idx)
{
	return (uint64_t)(idx & ((1u << wq->log2) - 1)) << wq->stride_log2;
}

/* A ring's geometry and page list: OK, BAD_FIELD or NO_RESOURCES (the host memory budget). */
static uint16_t wq_load(struct qhca_engine *e, struct qhca_wq *wq, const struct qhca_pbl *pbl,
			uint32_t log2, uint32_t stride_log2, uint32_t min_stride_log2)
{
	uint64_t bytes;

	memset(wq, 0, sizeof(*wq));
	/* Both exponents come from the guest: range-check them before any shift. */
	if (log2 > 15 || stride_log2 < min_stride_log2 || stride_log2 > 12)
		return QHCA_ST_BAD_FIELD;
	bytes = (uint64_t)1 << (log2 + stride_log2);
	if ((1u << log2) > e->cfg.max_qp_wr || (uint64_t)pbl->npages << QHCA_PAGE_SHIFT < bytes)
		return QHCA_ST_BAD_FIELD;
	wq->log2 = log2;
	wq->stride_log2 = stride_log2;
	wq->npages = pbl->npages;
	return qhca_pbl_load(e, pbl, (uint32_t)((bytes + QHCA_PAGE_SIZE - 1) >> QHCA_PAGE_SHIFT),
			     &wq->pages);
}

/* The guest address of WQE @idx (for the teaching trace); 0 if its page is not known. */
uint64_t qhca_wq_gpa(const struct qhca_wq *wq, uint32_t idx)
{
	uint64_t off = wqe_addr_off(wq, idx);

	return off >> QHCA_PAGE_SHIFT < wq->npages && wq->pages ?
	       wq->pages[off >> QHCA_PAGE_SHIFT] + (off & (QHCA_PAGE_SIZE - 1)) : 0;
}

int qhca_wq_read(struct qhca_engine *e, const struct qhca_wq *wq, uint32_t idx, uint32_t off,
		 void *buf, size_t len)
{
	if (off + len > (1u << wq->stride_log2))
		return -1;
	return qhca_pages_xfer(e, wq->pages, wq->npages, wqe_addr_off(wq, idx) + off, buf, len,
			       false);
}

/* ---------------------------------------------------------------- receive WQEs */
/* Read receive WQE @idx of @wq into @rc, with its SGEs checked against @pd. */
static int recv_fetch(struct qhca_engine *e, const struct qhca_wq *wq, uint32_t idx, uint32_t pd,
		      struct qhca_recv_ctx *rc)
{
	struct qhca_rq_wqe w;
	const char *why;
	uint32_t bad;

	rc->active = false;
	rc->wr_id = 0;
	rc->offset = 0;
	rc->srq = NULL;
	rc->sgl.num = 0;
	if (qhca_wq_read(e, wq, idx, 0, &w, sizeof(w)))
		return -1;
	rc->wr_id = w.wr_id;
	if (w.num_sge > QHCA_MAX_SGE || w.num_sge > e->cfg.max_sge ||
	    qhca_wq_read(e, wq, idx, sizeof(w), rc->sgl.sge, w.num_sge * sizeof(struct qhca_sge)))
		return -2;
	rc->sgl.num = w.num_sge;
	if (qhca_sgl_load(e, &rc->sgl, pd, QHCA_ACCESS_LOCAL_WRITE, &bad, &why)) {
		qhca_log_guest(e, "receive WQE sge %u lkey 0x%x: %s", bad, rc->sgl.sge[bad].lkey, why);
		return -2;
	}
	rc->active = true;
	return 0;
}

/*
 * Take the next receive WQE of @qp (of its SRQ; an XRC_TGT QP: of the XRC SRQ the request
 * names) into @rc: 0, -1 if none is posted, -2 if it is malformed (taken all the same).
 */
int qhca_recv_take(struct qhca_engine *e, struct qhca_qp *qp, struct qhca_recv_ctx *rc)
{
	struct qhca_srq *srq = qp->type == QHCA_QPT_XRC_TGT ? qp->xrc_srq : qp->srq;
	struct qhca_wq *wq = srq ? &srq->wq : &qp->rq;
	int rc_fetch;

	if (qp->type == QHCA_QPT_XRC_TGT && !srq)
		return -2;
	if (wq->ci == wq->pi)
		return -1;
	rc_fetch = recv_fetch(e, wq, wq->ci, srq ? srq->pd : qp->pd, rc);
	qhca_step(e, "rwqe qp=0x%x srq=0x%x slot=%u gpa=0x%llx wr_id=0x%llx len=%llu sges=%u "
		  "status=%s", qp->qpn, srq ? srq->handle : 0, wq->ci,
		  (unsigned long long)qhca_wq_gpa(wq, wq->ci), (unsigned long long)rc->wr_id,
		  (unsigned long long)(rc_fetch ? 0 : rc->sgl.length), rc->sgl.num,
		  rc_fetch ? "bad" : "ok");
	wq->ci++;
	rc->srq = srq;
	rc->active = true;
	/* The SRQ's destruction must find the XRC message that holds one of its WQEs. */
	if (qp->type == QHCA_QPT_XRC_TGT && rc == &qp->recv)
		qhca_list_add_tail(&srq->xrc_msgs, &qp->xrc_link);
	if (srq && srq->limit && srq->wq.pi - srq->wq.ci < srq->limit) {
		srq->limit = 0;	/* one event per arming (IBA 10.2.9.3) */
		qhca_event_async(e, QHCA_EVENT_SRQ_LIMIT, srq->handle, 0);
	}
	return rc_fetch == 0 ? 0 : -2;
}

/* The receive in progress ends without a completion (its SRQ or QP went away). */
void qhca_recv_drop(struct qhca_qp *qp)
{
	qhca_list_del(&qp->xrc_link);
	qp->recv.active = false;
	qp->recv.srq = NULL;
	qhca_sgl_release(&qp->recv.sgl);
}

void qhca_recv_complete(struct qhca_engine *e, struct qhca_qp *qp, struct qhca_recv_ctx *rc,
			uint8_t status, uint8_t opcode, uint32_t byte_len, uint32_t imm,
			uint8_t flags, const struct roce_pkt *p, bool solicited)
{
	/* An XRC SRQ has its own CQ. */
	struct qhca_cq *cq = rc->srq && rc->srq->cq ? rc->srq->cq : qp->recv_cq;
	struct qhca_cqe cqe;

	memset(&cqe, 0, sizeof(cqe));
	cqe.wr_id = rc->wr_id;
	cqe.byte_len = byte_len;
	cqe.imm = imm;
	cqe.qpn_status = QHCA_FIELD_PREP(QHCA_CQE_QPN_MASK, qp->qpn) |
			 QHCA_FIELD_PREP(QHCA_CQE_STATUS_MASK, status);
	cqe.opcode = opcode;
	if (p && qhca_qp_datagram(qp) && p->ib) {
		cqe.ib.slid = p->slid;
		cqe.ib.sl = p->sl;
		cqe.ib.dlid_path_bits = ib_lid_mcast(p->dlid) ? 0 :
					(uint8_t)(p->dlid & ((1u << e->ib.pi.lmc) - 1));
		flags |= QHCA_CQE_FLAG_IB | (p->grh ? QHCA_CQE_FLAG_GRH : 0);
		cqe.src_qp_flags = QHCA_FIELD_PREP(QHCA_CQE_SRC_QP_MASK, p->deth_sqpn);
	} else if (p && qhca_qp_datagram(qp)) {
		memcpy(cqe.smac, p->smac, 6);
		flags |= QHCA_CQE_FLAG_GRH | (p->grh ? QHCA_CQE_FLAG_ROCE_V1 :
					      p->ipv6 ? 0 : QHCA_CQE_FLAG_IPV4);
		cqe.src_qp_flags = QHCA_FIELD_PREP(QHCA_CQE_SRC_QP_MASK, p->deth_sqpn);
	}
	if (rc->srq && rc->srq->xrcd) {
		flags |= QHCA_CQE_FLAG_XRC;
		cqe.src_qp_flags = QHCA_FIELD_PREP(QHCA_CQE_SRC_QP_MASK,
						   rc->srq->handle & QHCA_XRC_SRQN_MASK);
	}
	cqe.src_qp_flags |= QHCA_FIELD_PREP(QHCA_CQE_FLAGS_MASK, flags);
	if (rc == &qp->recv)
		qhca_list_del(&qp->xrc_link);
	rc->active = false;
	rc->srq = NULL;
	qhca_sgl_release(&rc->sgl);
	qhca_log(e, QHCA_LOG_EVENT, "QP 0x%x: receive wr_id 0x%llx status %u len %u", qp->qpn,
		 (unsigned long long)rc->wr_id, status, byte_len);
	if (!cq) {	/* cannot happen: an XRC_TGT QP receives only through an XRC SRQ */
		qhca_log(e, QHCA_LOG_ERR, "QP 0x%x: a receive without a CQ", qp->qpn);
		return;
	}
	if (qhca_cq_post(e, cq, &cqe, solicited) && status == QHCA_WC_SUCCESS)
		qhca_qp_error(e, qp, QHCA_EVENT_QP_FATAL);
}

/* ---------------------------------------------------------------- errors and flushing */
static void flush_rq(struct qhca_engine *e, struct qhca_qp *qp)
{
	struct qhca_recv_ctx rc;

	if (qp->recv.active)
		qhca_recv_complete(e, qp, &qp->recv, QHCA_WC_WR_FLUSH_ERR, QHCA_WC_RECV, 0, 0, 0,
				   NULL, false);
	if (qp->srq || qhca_qp_xrc(qp))
		return;		/* an SRQ's WQEs belong to the other QPs too; XRC has no RQ */
	while (qp->rq.ci != qp->rq.pi) {
		recv_fetch(e, &qp->rq, qp->rq.ci, qp->pd, &rc);
		qp->rq.ci++;
		qhca_recv_complete(e, qp, &rc, QHCA_WC_WR_FLUSH_ERR, QHCA_WC_RECV, 0, 0, 0, NULL,
				   false);
	}
}

void qhca_qp_flush(struct qhca_engine *e, struct qhca_qp *qp)
{
	qhca_comp_flush(e, qp);
	flush_rq(e, qp);
}

void qhca_qp_error(struct qhca_engine *e, struct qhca_qp *qp, uint8_t event)
{
	if (qp->state == QHCA_QPS_ERR || qp->state == QHCA_QPS_RESET)
		return;
	qhca_log(e, QHCA_LOG_EVENT, "QP 0x%x: %s -> ERR", qp->qpn, state_names[qp->state]);
	qp->state = QHCA_QPS_ERR;
	qhca_qp_set_deadline(e, qp, UINT64_MAX);
	if (event)
		qhca_event_async(e, event, qp->qpn, 0);
	qhca_qp_flush(e, qp);
	if (qp->iw_conn)
		qhca_iw_qp_gone(e, qp);	/* its iWARP connection ends too */
}

/* ---------------------------------------------------------------- create and destroy */
static void qp_mem_free(struct qhca_qp *qp)
{
	qhca_host_free(qp->inline_mem);
	qhca_host_free(qp->win);
	qhca_host_free(qp->sq.pages);
	qhca_host_free(qp->rq.pages);
	qhca_host_free(qp);
}

/*
 * The window of send WQE snapshots of a new QP (a snapshot is about 1 KiB, plus its inline
 * data). No more WQEs can be in flight than the SQ holds, so a small SQ gets a small window:
 * tens of thousands of idle QPs stay cheap. And the host memory a guest can make the device
 * take stays bounded whatever max_qp: once the QPs' windows fill the device's budget, new
 * QPs get smaller ones (fewer WQEs in flight, down to one; nothing fails). An XRC_TGT QP
 * has no SQ (log2 0): one slot.
 */
static void win_alloc_size(struct qhca_engine *e, struct qhca_qp *qp, uint32_t max_inline)
{
	uint64_t budget = e->cfg.qp_window_budget ? e->cfg.qp_window_budget :
			  e->host_budget / 2 < QHCA_QP_WINDOW_BUDGET ? e->host_budget / 2 :
			  QHCA_QP_WINDOW_BUDGET;
	uint64_t slot = sizeof(*qp->win) + max_inline;

	qp->win_size = (1u << qp->sq.log2) < QHCA_SQ_WINDOW ? 1u << qp->sq.log2 : QHCA_SQ_WINDOW;
	while (qp->win_size > 1 && e->qp_window_bytes + qp->win_size * slot > budget)
		qp->win_size /= 2;
	qp->win_bytes = qp->win_size * slot;
}

/* An XRC_TGT QP: a domain, the kernel as owner, and nothing else (no queues, no CQs). */
static uint16_t xrc_tgt_check(struct qhca_engine *e, const struct qhca_qp_create *c)
{
	static const struct qhca_qp_create zero;
	struct qhca_qp_create rest = *c;

	rest.type = 0;
	rest.xrcd = 0;
	if (qhca_obj_lookup(&e->xrcd, c->xrcd) < 0)
		return QHCA_ST_BAD_HANDLE;
	return memcmp(&rest, &zero, sizeof(rest)) ? QHCA_ST_BAD_FIELD : QHCA_ST_OK;
}

/* Every other type: a PD, CQs of the same owner, a receive queue or an ordinary SRQ
 * (XRC_INI: neither, nor a receive CQ). */
static uint16_t qp_args_check(struct qhca_engine *e, const struct qhca_qp_create *c,
			      struct qhca_cq *scq, struct qhca_cq *rcq, struct qhca_srq *srq)
{
	bool ini = c->type == QHCA_QPT_XRC_INI;

	if (qhca_obj_lookup(&e->pd, c->pd) < 0 || !scq || (!ini && !rcq) || (c->srq && !srq) ||
	    (c->uctx && qhca_obj_lookup(&e->uctx, c->uctx) < 0))
		return QHCA_ST_BAD_HANDLE;
	if (c->type != QHCA_QPT_RC && c->type != QHCA_QPT_UC && c->type != QHCA_QPT_UD &&
	    c->type != QHCA_QPT_GSI && c->type != QHCA_QPT_SMI && !ini)
		return QHCA_ST_BAD_FIELD;
	if (c->xrcd || (srq && srq->xrcd) ||
	    (ini && (c->recv_cq || c->srq || c->rq_log2 || c->rq_stride_log2 || c->rq_pbl.addr ||
		     c->rq_pbl.npages || c->rq_pbl.levels)))
		return QHCA_ST_BAD_FIELD;
	if (c->max_inline > e->cfg.max_inline || c->sq_sig_all > 1 ||
	    scq->uctx != c->uctx || (rcq && rcq->uctx != c->uctx) ||
	    (srq && srq->uctx != c->uctx))
		return QHCA_ST_BAD_FIELD;
	return QHCA_ST_OK;
}

uint16_t qhca_qp_create(struct qhca_engine *e, const struct qhca_qp_create *c, uint32_t *qpn)
{
	bool tgt = c->type == QHCA_QPT_XRC_TGT;
	struct qhca_cq *scq = NULL, *rcq = NULL;
	struct qhca_srq *srq = NULL;
	struct qhca_qp *qp;
	uint32_t h, i;
	uint16_t st;

	if (tgt) {
		st = xrc_tgt_check(e, c);
	} else {
		scq = qhca_cq_find(e, c->send_cq);
		rcq = c->recv_cq ? qhca_cq_find(e, c->recv_cq) : NULL;
		srq = c->srq ? qhca_srq_find(e, c->srq) : NULL;
		st = qp_args_check(e, c, scq, rcq, srq);
	}
	if (st)
		return st;
	qp = qhca_host_zalloc(e, 1, sizeof(*qp));
	if (!qp)
		return QHCA_ST_NO_RESOURCES;
	/* The SQ holds the header, a UD segment and the SGEs or inline data of a WQE. */
	if (!tgt)
		st = wq_load(e, &qp->sq, &c->sq_pbl, c->sq_log2, c->sq_stride_log2, 6);
	if (!st && !srq && !tgt && c->type != QHCA_QPT_XRC_INI)
		st = wq_load(e, &qp->rq, &c->rq_pbl, c->rq_log2, c->rq_stride_log2, 4);
	if (st)
		goto err;
	st = QHCA_ST_NO_RESOURCES;
	win_alloc_size(e, qp, c->max_inline);
	qp->win = qhca_host_zalloc(e, qp->win_size, sizeof(*qp->win));
	if (!qp->win)
		goto err;
	if (c->max_inline) {
		qp->inline_mem = qhca_host_zalloc(e, qp->win_size, c->max_inline);
		if (!qp->inline_mem)
			goto err;
		for (i = 0; i < qp->win_size; i++)
			qp->win[i].inline_data = qp->inline_mem + (size_t)i * c->max_inline;
	}
	h = qhca_obj_alloc(&e->qp_table, c->uctx);
	if (!h)
		goto err;
	qp->handle = h;
	qp->qpn = QHCA_FIELD_PREP(QPN_GEN_MASK, qhca_obj_generation(h)) |
		  QHCA_FIELD_PREP(QPN_SLOT_MASK, qhca_obj_lookup(&e->qp_table, h) + 2);
	qp->type = c->type;
	qp->state = QHCA_QPS_RESET;
	qp->sig_all = c->sq_sig_all;
	qp->pd = c->pd;
	qp->uctx = c->uctx;
	qp->send_cq = scq;
	qp->recv_cq = rcq;
	qp->srq = srq;
	qp->xrcd = c->xrcd;
	qp->max_inline = c->max_inline;
	/* Connected QPs get their path MTU in RTR; datagrams may use the port's. */
	qp->mtu = c->type == QHCA_QPT_UD || c->type == QHCA_QPT_GSI || c->type == QHCA_QPT_SMI ?
		  e->cfg.mtu : 1024;
	qp->deadline = UINT64_MAX;
	qhca_list_init(&qp->tx_link);
	qhca_list_init(&qp->xrc_link);
	qp->serial = ++e->qp_serial;
	if (scq)
		scq->refs++;
	if (rcq)
		rcq->refs++;
	if (srq)
		srq->refs++;
	qhca_obj_hold(&e->xrcd, qp->xrcd);
	qhca_obj_hold(&e->pd, qp->pd);
	qhca_obj_hold(&e->uctx, qp->uctx);
	e->qp[qpn_slot(qp->qpn)] = qp;
	e->qp_window_bytes += qp->win_bytes;
	*qpn = qp->qpn;
	qhca_log(e, QHCA_LOG_EVENT, "QP 0x%x type %u created", qp->qpn, qp->type);
	return QHCA_ST_OK;
err:
	qp_mem_free(qp);
	return st;
}

static void qp_free(struct qhca_engine *e, struct qhca_qp *qp)
{
	qhca_req_release(qp);
	qhca_resp_reset(e, qp);
	if (qp->send_cq)
		qp->send_cq->refs--;
	if (qp->recv_cq)
		qp->recv_cq->refs--;
	if (qp->srq)
		qp->srq->refs--;
	qhca_obj_unhold(&e->xrcd, qp->xrcd);
	qhca_obj_unhold(&e->pd, qp->pd);
	qhca_obj_unhold(&e->uctx, qp->uctx);
	qhca_qp_unlink(e, qp);
	e->qp[qpn_slot(qp->qpn)] = NULL;
	e->qp_window_bytes -= qp->win_bytes;
	qhca_obj_free(&e->qp_table, qp->handle);
	qp_mem_free(qp);
}

uint16_t qhca_qp_destroy(struct qhca_engine *e, uint32_t qpn)
{
	struct qhca_qp *qp = qhca_qp_find(e, qpn);

	if (!qp)
		return QHCA_ST_BAD_HANDLE;
	qp_free(e, qp);
	qhca_timer_update(e);
	return QHCA_ST_OK;
}

void qhca_qp_reset_all(struct qhca_engine *e)
{
	uint32_t i;

	for (i = 0; i < e->cfg.max_qp; i++)
		if (e->qp[i])
			qp_free(e, e->qp[i]);
	qhca_obj_table_clear(&e->qp_table);
}

/* ---------------------------------------------------------------- state machine */
/* May a QP go from @cur to @next (IBA 10.3.1, figure 124)? */
static bool transition_ok(uint8_t cur, uint8_t next)
{
	if (next == QHCA_QPS_RESET || next == QHCA_QPS_ERR)
		return true;
	switch (cur) {
	case QHCA_QPS_RESET:
		return next == QHCA_QPS_INIT;
	case QHCA_QPS_INIT:
		return next == QHCA_QPS_INIT || next == QHCA_QPS_RTR;
	case QHCA_QPS_RTR:
		return next == QHCA_QPS_RTS;
	case QHCA_QPS_RTS:
		return next == QHCA_QPS_RTS || next == QHCA_QPS_SQD;
	case QHCA_QPS_SQD:
		return next == QHCA_QPS_RTS || next == QHCA_QPS_SQD;
	case QHCA_QPS_SQE:
		return next == QHCA_QPS_RTS;
	default:
		return false;
	}
}

static void qp_to_reset(struct qhca_engine *e, struct qhca_qp *qp)
{
	uint32_t i;

	qp->state = QHCA_QPS_RESET;
	qp->sq.pi = qp->sq.ci = qp->rq.pi = qp->rq.ci = 0;
	qp->sq_next = qp->tx_idx = 0;
	qhca_qp_unlink(e, qp);
	qp->rd_atomic_out = 0;
	qp->retries = qp->rnr_retries = 0;	/* a QP reused after RETRY_EXC_ERR starts anew */
	qhca_req_release(qp);
	for (i = 0; i < qp->win_size; i++)
		qp->win[i].done = false;
	qhca_resp_reset(e, qp);
}

/* Are the attributes @a->mask names within their ranges (MODIFY_QP; a loaded state)? */
bool qhca_qp_attr_ok(const struct qhca_engine *e, const struct qhca_qp_attr *a)
{
	uint32_t m = a->mask;

	return !(((m & QHCA_QP_PATH_MTU) && (a->path_mtu < 1 || a->path_mtu > 5 ||
					    (256u << (a->path_mtu - 1)) > e->cfg.mtu)) ||
		 ((m & QHCA_QP_TIMEOUT) && a->timeout > 31) ||
		 ((m & QHCA_QP_RETRY_CNT) && a->retry_cnt > 7) ||
		 ((m & QHCA_QP_RNR_RETRY) && a->rnr_retry > 7) ||
		 ((m & QHCA_QP_MIN_RNR_TIMER) && a->min_rnr_timer > 31) ||
		 ((m & QHCA_QP_MAX_QP_RD_ATOMIC) && a->max_rd_atomic > QHCA_MAX_RD_ATOMIC) ||
		 ((m & QHCA_QP_MAX_DEST_RD_ATOMIC) &&
		  a->max_dest_rd_atomic > QHCA_MAX_RD_ATOMIC) ||
		 ((m & QHCA_QP_PKEY_INDEX) && a->pkey_index != 0) ||
		 ((m & QHCA_QP_ACCESS_FLAGS) && (a->access_flags & ~QHCA_ACCESS_ALL)) ||
		 ((m & QHCA_QP_DEST_QPN) && a->dest_qpn > 0xffffff) ||
		 ((m & QHCA_QP_AV) && (roce_gid_is_v4(a->av.sgid) != roce_gid_is_v4(a->av.dgid) ||
				       (a->av.dmac[0] & 1) || !qhca_av_flags_ok(e->cfg.link, &a->av))));
}

uint16_t qhca_qp_modify(struct qhca_engine *e, uint32_t qpn, const struct qhca_qp_attr *a)
{
	struct qhca_qp *qp = qhca_qp_find(e, qpn);
	uint32_t m = a->mask;
	uint8_t next;
	bool conn = false;

	if (!qp)
		return QHCA_ST_BAD_HANDLE;
	if (qhca_qp_reliable(qp) || qp->type == QHCA_QPT_UC)
		conn = true;
	next = (m & QHCA_QP_STATE) ? a->state : qp->state;
	if (next > QHCA_QPS_ERR || ((m & QHCA_QP_CUR_STATE) && a->cur_state != qp->state))
		return QHCA_ST_BAD_FIELD;
	if (!transition_ok(qp->state, next)) {
		qhca_log_guest(e, "QP 0x%x: %s -> %s not allowed", qpn, state_names[qp->state],
			       state_names[next]);
		return QHCA_ST_BAD_STATE;
	}
	/* Check every attribute before changing anything. */
	if (!qhca_qp_attr_ok(e, a))
		return QHCA_ST_BAD_FIELD;
	/* What a connected QP must get on its way to RTR and RTS (IBA table 91). */
	if (conn && qp->state == QHCA_QPS_INIT && next == QHCA_QPS_RTR &&
	    (m & (QHCA_QP_AV | QHCA_QP_PATH_MTU | QHCA_QP_DEST_QPN | QHCA_QP_RQ_PSN)) !=
	    (QHCA_QP_AV | QHCA_QP_PATH_MTU | QHCA_QP_DEST_QPN | QHCA_QP_RQ_PSN))
		return QHCA_ST_BAD_FIELD;
	if (qp->state == QHCA_QPS_RTR && next == QHCA_QPS_RTS && !(m & QHCA_QP_SQ_PSN))
		return QHCA_ST_BAD_FIELD;

	if (m & QHCA_QP_ACCESS_FLAGS)
		qp->access = a->access_flags;
	if (m & QHCA_QP_QKEY)
		qp->qkey = a->qkey;
	if (m & QHCA_QP_AV)
		qp->av = a->av;
	if (m & QHCA_QP_PATH_MTU)
		qp->mtu = 256u << (a->path_mtu - 1);
	if (m & QHCA_QP_TIMEOUT)
		qp->timeout = a->timeout;
	if (m & QHCA_QP_RETRY_CNT)
		qp->retry_cnt = a->retry_cnt;
	if (m & QHCA_QP_RNR_RETRY)
		qp->rnr_retry = a->rnr_retry;
	if (m & QHCA_QP_MIN_RNR_TIMER)
		qp->min_rnr_timer = a->min_rnr_timer;
	if (m & QHCA_QP_MAX_QP_RD_ATOMIC)
		qp->max_rd_atomic = a->max_rd_atomic ? a->max_rd_atomic : 1;
	if (m & QHCA_QP_MAX_DEST_RD_ATOMIC)
		qp->max_dest_rd_atomic = a->max_dest_rd_atomic;
	if (m & QHCA_QP_DEST_QPN)
		qp->dest_qpn = a->dest_qpn;
	if (m & QHCA_QP_RQ_PSN)
		qp->epsn = a->rq_psn & 0xffffff;
	if (m & QHCA_QP_SQ_PSN)
		qp->psn = a->sq_psn & 0xffffff;

	if (next != qp->state)
		qhca_log(e, QHCA_LOG_EVENT, "QP 0x%x: %s -> %s", qpn, state_names[qp->state],
			 state_names[next]);
	qhca_step(e, "qp qp=0x%x from=%s to=%s type=%u dqp=0x%x sq_psn=0x%x rq_psn=0x%x mtu=%u "
		  "mask=0x%x", qpn, state_names[qp->state], state_names[next], qp->type,
		  qp->dest_qpn, qp->psn, qp->epsn, qp->mtu, m);
	if (next == QHCA_QPS_RESET) {
		qp_to_reset(e, qp);
	} else if (next == QHCA_QPS_ERR) {
		qhca_qp_error(e, qp, 0);
	} else {
		uint8_t prev = qp->state;

		qp->state = next;
		if (next == QHCA_QPS_RTS && prev != QHCA_QPS_RTS)
			qhca_req_run(e, qp);	/* WQEs posted before RTS start now */
	}
	return QHCA_ST_OK;
}

uint16_t qhca_qp_query(struct qhca_engine *e, uint32_t qpn, struct qhca_qp_attr *a)
{
	struct qhca_qp *qp = qhca_qp_find(e, qpn);
	uint8_t enc = 1;

	if (!qp)
		return QHCA_ST_BAD_HANDLE;
	while ((256u << (enc - 1)) < qp->mtu)
		enc++;
	memset(a, 0, sizeof(*a));
	a->state = qp->state;
	a->cur_state = qp->state;
	a->path_mtu = enc;
	a->timeout = qp->timeout;
	a->retry_cnt = qp->retry_cnt;
	a->rnr_retry = qp->rnr_retry;
	a->min_rnr_timer = qp->min_rnr_timer;
	a->max_rd_atomic = qp->max_rd_atomic;
	a->max_dest_rd_atomic = qp->max_dest_rd_atomic;
	a->qkey = qp->qkey;
	a->rq_psn = qp->epsn;
	a->sq_psn = qp->psn;
	a->dest_qpn = qp->dest_qpn;
	a->access_flags = qp->access;
	a->av = qp->av;
	return QHCA_ST_OK;
}

/* ---------------------------------------------------------------- doorbells */
void qhca_wq_doorbell(struct qhca_engine *e, uint32_t page, uint32_t reg, uint64_t value)
{
	uint32_t num = QHCA_FIELD_GET(QHCA_DB_NUM_MASK, value);
	uint32_t pi = QHCA_FIELD_GET(QHCA_DB_INDEX_MASK, value);
	struct qhca_wq *wq;
	struct qhca_qp *qp = NULL;
	struct qhca_srq *srq = NULL;
	uint32_t owner;

	if (reg == QHCA_DB_SRQ) {
		srq = qhca_srq_find(e, num);
		if (!srq)
			goto refuse;
		wq = &srq->wq;
		owner = srq->uctx;
	} else {
		qp = qhca_qp_find(e, num);
		/* No RQ with an SRQ or for XRC; an XRC_TGT QP has no SQ either. */
		if (!qp || (reg == QHCA_DB_RQ && (qp->srq || qhca_qp_xrc(qp))) ||
		    (reg == QHCA_DB_SQ && qp->type == QHCA_QPT_XRC_TGT))
			goto refuse;
		wq = reg == QHCA_DB_SQ ? &qp->sq : &qp->rq;
		owner = qp->uctx;
	}
	if (!qhca_page_owns(e, page, owner))
		goto refuse;
	if (!qhca_ring_pi_ok(pi, wq->ci, 1u << wq->log2) || pi - wq->ci < wq->pi - wq->ci) {
		qhca_log_guest(e, "doorbell 0x%x for 0x%x: producer %u outside [%u, %u]", reg, num,
			       pi, wq->pi, wq->ci + (1u << wq->log2));
		return;
	}
	qhca_step(e, "db queue=%s %s=0x%x pi=%u->%u page=%u",
		  reg == QHCA_DB_SRQ ? "srq" : reg == QHCA_DB_SQ ? "sq" : "rq",
		  qp ? "qp" : "srq", num, wq->pi, pi, page);
	wq->pi = pi;
	if (!qp)
		return;
	if (qp->state == QHCA_QPS_ERR)
		qhca_qp_flush(e, qp);	/* work posted in the error state completes flushed */
	else if (reg == QHCA_DB_SQ)
		qhca_req_run(e, qp);
	return;
refuse:
	qhca_log_guest(e, "doorbell 0x%x on page %u for 0x%x refused", reg, page, num);
}

/* ---------------------------------------------------------------- shared receive queues */
struct qhca_srq *qhca_srq_find(struct qhca_engine *e, uint32_t srqn)
{
	int64_t idx = qhca_obj_lookup(&e->srq_table, srqn);

	return idx < 0 ? NULL : e->srq[idx];
}

struct qhca_srq *qhca_xrc_srq_find(struct qhca_engine *e, uint32_t n)
{
	int64_t idx = qhca_obj_lookup_masked(&e->srq_table, n, QHCA_XRC_SRQN_MASK);

	return idx < 0 || !e->srq[idx]->xrcd ? NULL : e->srq[idx];
}

uint16_t qhca_srq_create(struct qhca_engine *e, const struct qhca_srq_create *c, uint32_t *srqn)
{
	struct qhca_cq *cq = c->cq ? qhca_cq_find(e, c->cq) : NULL;
	struct qhca_srq *srq;
	uint16_t st;
	uint32_t h;

	if (qhca_obj_lookup(&e->pd, c->pd) < 0 ||
	    (c->uctx && qhca_obj_lookup(&e->uctx, c->uctx) < 0) ||
	    (c->xrcd && (qhca_obj_lookup(&e->xrcd, c->xrcd) < 0 || !cq)))
		return QHCA_ST_BAD_HANDLE;
	if (c->rsvd0 || c->rsvd1 || c->log2 > 15 || c->limit > (1u << c->log2) ||
	    (!c->xrcd && c->cq) || (cq && cq->uctx != c->uctx))
		return QHCA_ST_BAD_FIELD;
	srq = qhca_host_zalloc(e, 1, sizeof(*srq));
	if (!srq)
		return QHCA_ST_NO_RESOURCES;
	st = wq_load(e, &srq->wq, &c->pbl, c->log2, c->stride_log2, 4);
	h = st == QHCA_ST_OK ? qhca_obj_alloc(&e->srq_table, c->uctx) : 0;
	if (!h) {
		qhca_host_free(srq->wq.pages);
		qhca_host_free(srq);
		return st == QHCA_ST_OK ? QHCA_ST_NO_RESOURCES : st;
	}
	qhca_obj_hold(&e->pd, c->pd);
	qhca_obj_hold(&e->uctx, c->uctx);
	qhca_obj_hold(&e->xrcd, c->xrcd);
	if (cq)
		cq->refs++;
	srq->handle = h;
	srq->pd = c->pd;
	srq->uctx = c->uctx;
	srq->limit = c->limit;
	srq->xrcd = c->xrcd;
	srq->cq = cq;
	qhca_list_init(&srq->xrc_msgs);
	e->srq[qhca_obj_lookup(&e->srq_table, h)] = srq;
	*srqn = h;
	return QHCA_ST_OK;
}

uint16_t qhca_srq_modify(struct qhca_engine *e, uint32_t srqn, const struct qhca_srq_modify *m)
{
	struct qhca_srq *srq = qhca_srq_find(e, srqn);

	if (!srq)
		return QHCA_ST_BAD_HANDLE;
	if (m->rsvd || m->limit > (1u << srq->wq.log2))
		return QHCA_ST_BAD_FIELD;
	srq->limit = m->limit;
	return QHCA_ST_OK;
}

uint16_t qhca_srq_query(struct qhca_engine *e, uint32_t srqn, struct qhca_srq_attr *a)
{
	const struct qhca_srq *srq = qhca_srq_find(e, srqn);

	if (!srq)
		return QHCA_ST_BAD_HANDLE;
	memset(a, 0, sizeof(*a));
	a->limit = srq->limit;
	a->log2 = srq->wq.log2;
	a->stride_log2 = srq->wq.stride_log2;
	a->pi = srq->wq.pi;
	a->ci = srq->wq.ci;
	return QHCA_ST_OK;
}

uint16_t qhca_srq_resize(struct qhca_engine *e, uint32_t srqn, const struct qhca_srq_resize *r)
{
	struct qhca_srq *srq = qhca_srq_find(e, srqn);
	uint32_t stride, i;
	struct qhca_wq nw;
	uint8_t *wqe;
	uint16_t st;

	if (!srq)
		return QHCA_ST_BAD_HANDLE;
	if (r->rsvd0 || r->rsvd1 || r->stride_log2 != srq->wq.stride_log2 || r->log2 > 15 ||
	    srq->wq.pi - srq->wq.ci > (1u << r->log2))
		return QHCA_ST_BAD_FIELD;	/* what is posted must fit */
	st = wq_load(e, &nw, &r->pbl, r->log2, r->stride_log2, 4);
	if (st != QHCA_ST_OK)
		return st;
	/* What the device ever reads of a receive WQE: its header and up to max_sge SGEs
	 * (528 bytes at most): 32768 WQEs of 4 KiB move 17 MiB, not 128. */
	stride = 1u << nw.stride_log2;
	if (stride > sizeof(struct qhca_rq_wqe) + e->cfg.max_sge * sizeof(struct qhca_sge))
		stride = sizeof(struct qhca_rq_wqe) + e->cfg.max_sge * sizeof(struct qhca_sge);
	wqe = malloc(stride);
	if (!wqe) {
		qhca_host_free(nw.pages);
		return QHCA_ST_NO_RESOURCES;
	}
	for (i = srq->wq.ci; i != srq->wq.pi; i++) {
		if (qhca_wq_read(e, &srq->wq, i, 0, wqe, stride) ||
		    qhca_pages_xfer(e, nw.pages, nw.npages, wqe_addr_off(&nw, i), wqe, stride,
				    true)) {
			free(wqe);
			qhca_host_free(nw.pages);
			return QHCA_ST_DMA_ERROR;
		}
	}
	free(wqe);
	nw.pi = srq->wq.pi;
	nw.ci = srq->wq.ci;
	qhca_host_free(srq->wq.pages);
	srq->wq = nw;
	if (srq->limit > (1u << nw.log2))
		srq->limit = 0;
	qhca_log(e, QHCA_LOG_EVENT, "SRQ 0x%x resized to %u WQEs", srqn, 1u << nw.log2);
	return QHCA_ST_OK;
}

static void srq_free(struct qhca_engine *e, struct qhca_srq *srq)
{
	/* An XRC message that took one of its WQEs loses it: the rest of the message finds
	 * no receive in progress and is refused (NAK invalid request). */
	while (!qhca_list_empty(&srq->xrc_msgs)) {
		struct qhca_qp *qp = qhca_container_of(srq->xrc_msgs.next, struct qhca_qp,
						       xrc_link);

		qhca_log_guest(e, "XRC SRQ 0x%x destroyed under a message to QP 0x%x",
			       srq->handle, qp->qpn);
		qhca_recv_drop(qp);
	}
	e->srq[qhca_obj_lookup(&e->srq_table, srq->handle)] = NULL;
	qhca_obj_free(&e->srq_table, srq->handle);
	qhca_obj_unhold(&e->pd, srq->pd);
	qhca_obj_unhold(&e->uctx, srq->uctx);
	qhca_obj_unhold(&e->xrcd, srq->xrcd);
	if (srq->cq)
		srq->cq->refs--;
	qhca_host_free(srq->wq.pages);
	qhca_host_free(srq);
}

uint16_t qhca_srq_destroy(struct qhca_engine *e, uint32_t srqn)
{
	struct qhca_srq *srq = qhca_srq_find(e, srqn);

	if (!srq)
		return QHCA_ST_BAD_HANDLE;
	if (srq->refs)
		return QHCA_ST_BUSY;
	srq_free(e, srq);
	return QHCA_ST_OK;
}

void qhca_srq_reset(struct qhca_engine *e)
{
	uint32_t i;

	for (i = 0; i < e->srq_table.capacity; i++)
		if (e->srq[i])
			srq_free(e, e->srq[i]);
	qhca_obj_table_clear(&e->srq_table);
}
