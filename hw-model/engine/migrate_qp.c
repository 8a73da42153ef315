// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * qhca engine: the QPs in the migration stream (migrate.h): attributes, PSNs, the congestion
 * window, timers as time remaining, the send WQE snapshots in flight with their SGE lists
 * and their READ and ATOMIC recovery state, the receive, WRITE and READ response in
 * progress, the responder's READ/ATOMIC history; and back, every value checked as a guest's
 * command would be, against the link the stream's configuration names.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "migrate.h"

/* ---------------------------------------------------------------- SGE lists */
static void sgl_put(struct mig_out *o, struct qhca_engine *e, const struct qhca_sgl *sgl)
{
	uint32_t i;

	put32(o, sgl->num);
	for (i = 0; i < sgl->num; i++) {
		mig_put(o, &sgl->sge[i], sizeof(sgl->sge[i]));
		mig_ref_put(o, e, sgl->mr[i]);
	}
}

/* An SGE list a WQE holds: each SGE with bytes holds its region (checked against @pd and
 * @access as qhca_sgl_load does). */
static bool sgl_get(struct mig_in *in, struct qhca_sgl *sgl, uint32_t pd, uint32_t access)
{
	uint32_t i, num = get32(in);
	bool none;

	sgl->num = 0;
	sgl->length = 0;
	CHECK(in, num <= in->e->cfg.max_sge, "an SGE list longer than max_sge");
	for (i = 0; i < num && !in->why; i++) {
		struct qhca_sge *s = &sgl->sge[i];

		mig_get(in, s, sizeof(*s));
		{
			struct mig_range r = { s->addr, s->length, access };

			sgl->mr[i] = mig_ref_get(in, &none, pd, REF_REGION, &r);
		}
		if (in->why)
			return false;
		sgl->num = i + 1;	/* released with the WQE from here on */
		CHECK(in, !s->length == none, "an SGE that holds no region, or one without bytes");
		sgl->length += s->length;
	}
	return !in->why;
}

/* ---------------------------------------------------------------- QPs */
static void rd_recovery_put(struct mig_out *o, const struct qhca_rd_recovery *r)
{
	uint32_t j;

	put64(o, r->map);
	put32(o, r->lost_to);
	put8(o, r->seen);
	put8(o, r->retry);
	put8(o, r->first);
	put8(o, r->npieces);
	for (j = 0; j < r->npieces; j++) {
		put32(o, r->piece[j].lo);
		put32(o, r->piece[j].hi);
		put32(o, r->piece[j].h1);
		put32(o, r->piece[j].h2);
	}
}

static bool rd_recovery_get(struct mig_in *in, struct qhca_rd_recovery *r)
{
	uint32_t j;

	r->map = get64(in);
	r->lost_to = get32(in) & 0xffffff;
	r->seen = getbool(in);
	r->retry = getbool(in);
	r->first = getbool(in);
	r->npieces = get8(in);
	CHECK(in, r->npieces <= QHCA_READ_PIECES, "a READ with too many requests in flight");
	for (j = 0; j < r->npieces; j++) {
		r->piece[j].lo = get32(in) & 0xffffff;
		r->piece[j].hi = get32(in) & 0xffffff;
		r->piece[j].h1 = get32(in) & 0xffffff;
		r->piece[j].h2 = get32(in) & 0xffffff;
	}
	return !in->why;
}

/* Is PSN @x within [@lo, @hi] (24-bit)? */
static bool psn_within(uint32_t x, uint32_t lo, uint32_t hi)
{
	return qhca_psn_diff(x, lo) >= 0 && qhca_psn_diff(x, hi) <= 0;
}

/* A READ's or ATOMIC's recovery state within its own PSNs (rdrecov.c); none for others. */
static bool rd_recovery_ok(struct mig_in *in, const struct qhca_send_wqe *sw, bool rd_atomic)
{
	const struct qhca_rd_recovery *r = &sw->rd;
	uint32_t end = (sw->last_psn + 1) & 0xffffff, j;

	if (!rd_atomic) {
		CHECK(in, !r->map && !r->lost_to && !r->seen && !r->retry && !r->first &&
			  !r->npieces, "recovery state of a work request that has none");
		return true;
	}
	CHECK(in, !r->first || r->npieces, "a READ's first request not in flight");
	CHECK(in, psn_within(sw->read_next, sw->first_psn, end) &&
		  psn_within(r->lost_to, sw->first_psn, end), "READ progress outside its PSNs");
	for (j = 0; j < r->npieces; j++)
		CHECK(in, psn_within(r->piece[j].lo, sw->first_psn, sw->last_psn) &&
			  psn_within(r->piece[j].hi, r->piece[j].lo, sw->last_psn),
		      "a READ request outside its PSNs");
	return true;
}

/* The largest member of the union in struct qhca_send_wqe. */
#define SEG_SIZE (sizeof(struct qhca_ud_seg) > sizeof(struct qhca_reg_mr_seg) ?	\
		  sizeof(struct qhca_ud_seg) : sizeof(struct qhca_reg_mr_seg))

static void send_wqe_put(struct mig_out *o, struct qhca_engine *e, const struct qhca_qp *qp,
			 const struct qhca_send_wqe *sw)
{
	uint32_t inl = (sw->hdr.flags & QHCA_WQE_INLINE) && !(sw->done && sw->status) &&
		       sw->hdr.inline_len <= qp->max_inline ? sw->hdr.inline_len : 0;

	mig_put(o, &sw->hdr, sizeof(sw->hdr));
	mig_put(o, &sw->ud, SEG_SIZE);
	rd_recovery_put(o, &sw->rd);
	sgl_put(o, e, &sw->sgl);
	/* The snapshot's inline bytes: only a WQE that loaded has them (one wqe_load refused
	 * may name more than max_inline; its header is all it keeps). */
	put32(o, inl);
	if (inl)
		mig_put(o, sw->inline_data, inl);
	put64(o, sw->length);
	put32(o, sw->mtu);
	put32(o, sw->first_psn);
	put32(o, sw->last_psn);
	put32(o, sw->npkts);
	put32(o, sw->read_next);
	put32(o, sw->tx_next);
	put8(o, sw->done);
	put8(o, sw->status);
}

/* A snapshot as wqe_load() (req.c) and the start of its message left it. */
static bool send_wqe_get(struct mig_in *in, struct qhca_qp *qp, struct qhca_send_wqe *sw)
{
	bool rd_atomic, local;
	uint32_t inl;

	mig_get(in, &sw->hdr, sizeof(sw->hdr));
	mig_get(in, &sw->ud, SEG_SIZE);
	rd_atomic = qhca_wr_is_rd_atomic(sw->hdr.opcode);
	local = qhca_wr_is_local(sw->hdr.opcode);
	rd_recovery_get(in, &sw->rd);
	sgl_get(in, &sw->sgl, qp->pd, rd_atomic ? QHCA_ACCESS_LOCAL_WRITE : 0);
	inl = get32(in);
	CHECK(in, !in->why && inl <= qp->max_inline && (!inl || (sw->hdr.flags & QHCA_WQE_INLINE)),
	      "bad inline data");
	if (inl)
		mig_get(in, sw->inline_data, inl);
	sw->length = get64(in);
	sw->mtu = get32(in);
	sw->first_psn = get32(in) & 0xffffff;
	sw->last_psn = get32(in) & 0xffffff;
	sw->npkts = get32(in);
	sw->read_next = get32(in) & 0xffffff;
	sw->tx_next = get32(in);
	sw->done = getbool(in);
	sw->status = get8(in);
	CHECK(in, !in->why, "truncated");
	if (sw->done && sw->status) {	/* failed (at its start or later): completes so */
		CHECK(in, !inl, "inline bytes of a failed work request");
		return true;
	}
	CHECK(in, sw->sgl.num == sw->hdr.num_sge || (sw->hdr.flags & QHCA_WQE_INLINE),
	      "a bad SGE count");
	CHECK(in, qhca_wqe_flags_ok(&sw->hdr) &&
		  (!(sw->hdr.flags & QHCA_WQE_READ_INV) || sw->sgl.mr[0]),
	      "flags its work request cannot have");
	CHECK(in, (sw->hdr.flags & QHCA_WQE_INLINE) ? inl == sw->hdr.inline_len &&
		  !sw->sgl.num && !rd_atomic : !inl, "bad inline data");
	CHECK(in, qhca_wr_allowed(qp->type, sw->hdr.opcode), "a work request its QP cannot do");
	if (local) {
		CHECK(in, sw->done, "a local work request not done at its start");
		return true;
	}
	CHECK(in, sw->length <= 0x80000000ull &&
		  (sw->hdr.opcode == QHCA_WR_ATOMIC_WRITE ? sw->length == 8 :
		   sw->hdr.flags & QHCA_WQE_INLINE ? sw->length == inl :
		   sw->length == sw->sgl.length), "a message of a bad length");
	CHECK(in, mtu_ok(sw->mtu) && (!qhca_qp_datagram(qp) || sw->length <= qp->mtu),
	      "a message of a bad MTU or too long for a datagram");
	CHECK(in, sw->npkts == (rd_atomic && sw->hdr.opcode != QHCA_WR_RDMA_READ ? 1 :
				sw->length ? (uint32_t)((sw->length + sw->mtu - 1) / sw->mtu) : 1) &&
		  sw->last_psn == ((sw->first_psn + sw->npkts - 1) & 0xffffff) &&
		  sw->tx_next <= sw->npkts, "a message of bad packets");
	return rd_recovery_ok(in, sw, rd_atomic);
}

static void rd_put(struct mig_out *o, const struct qhca_rd_atomic *rd)
{
	put8(o, rd->valid);
	put8(o, rd->opcode);
	put32(o, rd->psn);
	put32(o, rd->last_psn);
	put64(o, rd->va);
	put32(o, rd->rkey);
	put32(o, rd->len);
	put64(o, rd->orig);
}

static void rd_get(struct mig_in *in, struct qhca_rd_atomic *rd)
{
	rd->valid = getbool(in);
	rd->opcode = get8(in);
	rd->psn = get32(in) & 0xffffff;
	rd->last_psn = get32(in) & 0xffffff;
	rd->va = get64(in);
	rd->rkey = get32(in);
	rd->len = get32(in);
	rd->orig = get64(in);
}

static void qp_put(struct mig_out *o, struct qhca_engine *e, struct qhca_qp *qp, uint64_t now)
{
	uint32_t i;

	put32(o, qp->handle);
	put32(o, qp->qpn);
	put64(o, qp->serial);
	put8(o, qp->type);
	put8(o, qp->state);
	put8(o, qp->sig_all);
	put32(o, qp->pd);
	put32(o, qp->send_cq ? qp->send_cq->handle : 0);
	put32(o, qp->recv_cq ? qp->recv_cq->handle : 0);
	put32(o, qp->srq ? qp->srq->handle : 0);
	put16(o, qp->max_inline);
	put32(o, qp->xrcd);
	put32(o, qp->xrc_srq ? qp->xrc_srq->handle : 0);
	put32(o, qp->win_size);
	mig_wq_put(o, &qp->sq);
	mig_wq_put(o, &qp->rq);
	/* attributes */
	put32(o, qp->mtu);
	put8(o, qp->timeout);
	put8(o, qp->retry_cnt);
	put8(o, qp->rnr_retry);
	put8(o, qp->min_rnr_timer);
	put8(o, qp->max_rd_atomic);
	put8(o, qp->max_dest_rd_atomic);
	put32(o, qp->qkey);
	put32(o, qp->dest_qpn);
	put32(o, qp->access);
	mig_put(o, &qp->av, sizeof(qp->av));
	/* requester */
	put32(o, qp->sq_next);
	/* the next WQE to send from, as tx_pump takes it: behind the consumer index (completions
	 * came while a budget left the QP to the timer) it starts there */
	put32(o, (int32_t)(qp->tx_idx - qp->sq.ci) < 0 ? qp->sq.ci : qp->tx_idx);
	put32(o, qp->psn);
	put32(o, qp->retries);
	put32(o, qp->rnr_retries);
	put32(o, qp->una);
	put32(o, qp->ack_psn);
	put32(o, qp->snd_max);
	put32(o, qp->rewind_psn);
	put32(o, qp->cwnd);
	put32(o, qp->ssthresh);
	put32(o, qp->cwnd_acc);
	put32(o, qp->clean);
	put8(o, qp->rewound);
	put8(o, qp->probe);
	put8(o, qp->dup);
	put32(o, qp->dup_psn);
	put64(o, remaining(qp->deadline, now));
	put8(o, qp->rnr_wait);
	put32(o, qp->rd_atomic_out);
	for (i = qp->sq.ci; i != qp->sq_next; i++)
		send_wqe_put(o, e, qp, qhca_sq_slot(qp, i));
	/* responder */
	put32(o, qp->epsn);
	put32(o, qp->msn);
	put8(o, qp->nak_sent);
	put8(o, qp->recv.active);
	if (qp->recv.active) {
		put64(o, qp->recv.wr_id);
		put32(o, qp->recv.srq ? qp->recv.srq->handle : 0);
		sgl_put(o, e, &qp->recv.sgl);
		put64(o, qp->recv.offset);
	}
	put8(o, qp->write_active);
	put64(o, qp->write_va);
	put64(o, qp->write_left);
	put64(o, qp->write_total);
	put8(o, qp->drop_msg);
	mig_ref_put(o, e, qp->write_mr);
	for (i = 0; i < QHCA_MAX_RD_ATOMIC; i++)
		rd_put(o, &qp->rd[i]);
	put32(o, qp->rd_next);
	put8(o, qp->rr.active);
	put8(o, qp->rr.dropped);
	put32(o, qp->rr.len);
	put32(o, qp->rr.psn);
	put32(o, qp->rr.k);
	put32(o, qp->rr.n);
	put32(o, qp->rr.mtu);
	put64(o, qp->rr.va);
	mig_ref_put(o, e, qp->rr.mr);
}

void mig_qps_put(struct mig_out *o, struct qhca_engine *e, uint64_t now)
{
	struct qhca_list *l;
	uint32_t i, n = 0;

	put32(o, SEC_QP);
	put32(o, e->qp_table.count);
	for (i = 0; i < e->cfg.max_qp; i++)
		if (e->qp[i])
			qp_put(o, e, e->qp[i], now);
	/* the QPs waiting for the transmit path, in their order */
	for (l = e->tx_waiters.next; l != &e->tx_waiters; l = l->next)
		n++;
	put32(o, n);
	for (l = e->tx_waiters.next; l != &e->tx_waiters; l = l->next)
		put32(o, qhca_container_of(l, struct qhca_qp, tx_link)->qpn);
}

/* The QP's record and queues, as qhca_qp_create() makes them. */
static struct qhca_qp *qp_alloc(struct mig_in *in)
{
	struct qhca_engine *e = in->e;
	uint32_t scqn, rcqn, srqn, xsrqn, i, win_size;
	struct qhca_qp *qp;
	int64_t slot;
	bool tgt, ini;
	uint64_t slot_bytes;

	qp = qhca_host_zalloc(e, 1, sizeof(*qp));
	if (!qp) {
		mig_fail(in, "past the host memory budget");
		return NULL;
	}
	qhca_list_init(&qp->tx_link);
	qhca_list_init(&qp->xrc_link);
	qp->deadline = UINT64_MAX;
	qp->handle = get32(in);
	qp->qpn = get32(in);
	slot = mig_live(&e->qp_table, qp->handle);
	if (in->why || slot < 0 || e->qp[slot] ||
	    qp->qpn != (QHCA_FIELD_PREP(QPN_GEN_MASK, qhca_obj_generation(qp->handle)) |
			QHCA_FIELD_PREP(QPN_SLOT_MASK, slot + 2))) {
		qhca_host_free(qp);
		mig_fail(in, "a QP out of its slot");
		return NULL;
	}
	e->qp[slot] = qp;	/* freed with the engine from here on */
	qp->uctx = e->qp_table.owner[slot];
	qp->serial = get64(in);
	qp->type = get8(in);
	qp->state = get8(in);
	qp->sig_all = getbool(in);
	qp->pd = get32(in);
	scqn = get32(in);
	rcqn = get32(in);
	srqn = get32(in);
	qp->max_inline = get16(in);
	qp->xrcd = get32(in);
	xsrqn = get32(in);
	win_size = get32(in);	/* qp->win_size once the window is there (qp_free) */
	tgt = qp->type == QHCA_QPT_XRC_TGT;
	ini = qp->type == QHCA_QPT_XRC_INI;
	if (in->why)
		return NULL;
	if (qp->type > QHCA_QPT_XRC_TGT || qp->state > QHCA_QPS_ERR || !qp->serial ||
	    qp->serial > e->qp_serial) {
		mig_fail(in, "a QP of a bad type or state");
		return NULL;
	}
	if (!(tgt ? mig_live(&e->xrcd, qp->xrcd) >= 0 && !qp->pd && !qp->uctx && !scqn && !rcqn &&
	      !srqn && !qp->max_inline && !qp->sig_all :
	      mig_live(&e->pd, qp->pd) >= 0 && !qp->xrcd && !xsrqn &&
	      (!qp->uctx || mig_live(&e->uctx, qp->uctx) >= 0) &&
	      qp->max_inline <= e->cfg.max_inline && (!ini || (!rcqn && !srqn)))) {
		mig_fail(in, "a QP of bad owners");
		return NULL;
	}
	qhca_obj_hold(&e->xrcd, qp->xrcd);
	qhca_obj_hold(&e->pd, qp->pd);
	qhca_obj_hold(&e->uctx, qp->uctx);
	if (!tgt) {
		qp->send_cq = qhca_cq_find(e, scqn);
		qp->recv_cq = rcqn ? qhca_cq_find(e, rcqn) : NULL;
		qp->srq = srqn ? qhca_srq_find(e, srqn) : NULL;
		if (!qp->send_cq || (!ini && !qp->recv_cq) || (srqn && !qp->srq) ||
		    qp->send_cq->uctx != qp->uctx || (qp->recv_cq && qp->recv_cq->uctx != qp->uctx) ||
		    (qp->srq && (qp->srq->uctx != qp->uctx || qp->srq->xrcd))) {
			mig_fail(in, "a QP with bad CQs or SRQ");
			return NULL;
		}
		qp->send_cq->refs++;
		if (qp->recv_cq)
			qp->recv_cq->refs++;
		if (qp->srq)
			qp->srq->refs++;
	} else if (xsrqn) {
		qp->xrc_srq = qhca_srq_find(e, xsrqn);
		if (!qp->xrc_srq || qp->xrc_srq->xrcd != qp->xrcd) {
			mig_fail(in, "an XRC target of a bad SRQ");
			return NULL;
		}
	}
	/* an XRC target has no queues; XRC initiators and QPs on an SRQ no RQ */
	if (!mig_wq_get(in, &qp->sq, 6, tgt) || !mig_wq_get(in, &qp->rq, 4, tgt || ini || qp->srq))
		return NULL;
	if (!qp->sq.npages != tgt || !qp->rq.npages != (tgt || ini || qp->srq)) {
		mig_fail(in, "a QP with queues it cannot have");
		return NULL;
	}
	/* The window it was given: at most what win_alloc_size() would give today. */
	if (!is_pow2(win_size) || win_size > (1u << qp->sq.log2) || win_size > QHCA_SQ_WINDOW) {
		mig_fail(in, "a QP window of a bad size");
		return NULL;
	}
	slot_bytes = sizeof(*qp->win) + qp->max_inline;
	qp->win = qhca_host_zalloc(e, win_size, sizeof(*qp->win));
	if (qp->win && qp->max_inline) {
		qp->inline_mem = qhca_host_zalloc(e, win_size, qp->max_inline);
		for (i = 0; qp->inline_mem && i < win_size; i++)
			qp->win[i].inline_data = qp->inline_mem + (size_t)i * qp->max_inline;
	}
	if (!qp->win || (qp->max_inline && !qp->inline_mem)) {
		mig_fail(in, "past the host memory budget");
		return NULL;
	}
	qp->win_size = win_size;
	qp->win_bytes = win_size * slot_bytes;
	e->qp_window_bytes += qp->win_bytes;
	return qp;
}

/*
 * What a QP may be on the port's link. QP0 is InfiniBand's, and QP1 and QP0 are the ones
 * CREATE_QP recorded (cmd_create_qp: one each). iWARP's connections are not in the stream
 * (iw_cm.c; QEMU blocks the migration of an iWARP port): an iWARP QP comes unconnected (RESET,
 * INIT, or in error), RC as iWARP has it, and without the RoCE and InfiniBand transport's
 * state, which iWARP never makes: messages started, timers, receives, WRITEs and READ
 * responses in progress, the READ/ATOMIC history (resp_pump would send them as RoCE frames).
 */
static bool qp_link_ok(struct mig_in *in, const struct qhca_qp *qp)
{
	const struct qhca_engine *e = in->e;
	uint32_t i;

	CHECK(in, qp->type != QHCA_QPT_SMI || e->cfg.link == QHCA_LINK_IB,
	      "QP0 on an Ethernet port");
	CHECK(in, (qp->type != QHCA_QPT_GSI || qp->qpn == e->gsi_qpn) &&
		  (qp->type != QHCA_QPT_SMI || qp->qpn == e->smi_qpn),
	      "a special QP that CREATE_QP did not record");
	if (e->cfg.link != QHCA_LINK_IWARP)
		return true;
	CHECK(in, qp->type == QHCA_QPT_RC, "a QP of a type an iWARP port does not have");
	CHECK(in, qp->state == QHCA_QPS_RESET || qp->state == QHCA_QPS_INIT ||
		  qp->state == QHCA_QPS_ERR,
	      "a connected iWARP QP (its TCP connection is not in the stream)");
	CHECK(in, qp->sq_next == qp->sq.ci && qp->deadline == UINT64_MAX && !qp->rnr_wait &&
		  !qp->rd_atomic_out && !qp->recv.active && !qp->write_active && !qp->write_mr &&
		  !qp->rr.active && !qp->rr.mr, "RoCE transport state on an iWARP port");
	for (i = 0; i < QHCA_MAX_RD_ATOMIC; i++)
		CHECK(in, !qp->rd[i].valid, "RoCE's READ/ATOMIC history on an iWARP port");
	return true;
}

static bool qp_get(struct mig_in *in)
{
	struct qhca_engine *e = in->e;
	/* the path MTU is checked on its own (mtu_ok) */
	struct qhca_qp_attr a = { .mask = ~0u & ~(QHCA_QP_STATE | QHCA_QP_CUR_STATE |
						  QHCA_QP_PATH_MTU) };
	struct qhca_qp *qp = qp_alloc(in);
	uint64_t rem;
	uint32_t i, srqn;
	bool none;

	if (!qp)
		return false;
	qp->mtu = get32(in);
	qp->timeout = get8(in);
	qp->retry_cnt = get8(in);
	qp->rnr_retry = get8(in);
	qp->min_rnr_timer = get8(in);
	qp->max_rd_atomic = get8(in);
	qp->max_dest_rd_atomic = get8(in);
	qp->qkey = get32(in);
	qp->dest_qpn = get32(in);
	qp->access = get32(in);
	mig_get(in, &qp->av, sizeof(qp->av));
	/* what MODIFY_QP checks */
	CHECK(in, mtu_ok(qp->mtu) && qp->mtu <= (e->cfg.mtu > 1024 ? e->cfg.mtu : 1024),
	      "a QP of a bad path MTU");
	a.timeout = qp->timeout;
	a.retry_cnt = qp->retry_cnt;
	a.rnr_retry = qp->rnr_retry;
	a.min_rnr_timer = qp->min_rnr_timer;
	a.max_rd_atomic = qp->max_rd_atomic;
	a.max_dest_rd_atomic = qp->max_dest_rd_atomic;
	a.access_flags = qp->access;
	a.dest_qpn = qp->dest_qpn;
	a.av = qp->av;
	CHECK(in, qhca_qp_attr_ok(e, &a), "a QP attribute out of range");
	/* requester */
	qp->sq_next = get32(in);
	qp->tx_idx = get32(in);
	qp->psn = get32(in) & 0xffffff;
	qp->retries = get32(in);
	qp->rnr_retries = get32(in);
	qp->una = get32(in) & 0xffffff;
	qp->ack_psn = get32(in) & 0xffffff;
	qp->snd_max = get32(in) & 0xffffff;
	qp->rewind_psn = get32(in) & 0xffffff;
	qp->cwnd = get32(in);
	qp->ssthresh = get32(in);
	qp->cwnd_acc = get32(in);
	qp->clean = get32(in);
	qp->rewound = getbool(in);
	qp->probe = getbool(in);
	qp->dup = getbool(in);
	qp->dup_psn = get32(in) & 0xffffff;
	rem = get64(in);
	qp->rnr_wait = getbool(in);
	qp->rd_atomic_out = get32(in);
	CHECK(in, qp->sq_next - qp->sq.ci <= qp->win_size &&
		  qp->sq_next - qp->sq.ci <= qp->sq.pi - qp->sq.ci &&
		  qp->tx_idx - qp->sq.ci <= qp->sq_next - qp->sq.ci,
	      "a send queue with more started than posted or room");
	/* a window set up whenever messages are out (start_wqes), halved at most to 1 */
	CHECK(in, qp->cwnd <= QHCA_CWND_MAX && qp->ssthresh <= QHCA_CWND_MAX &&
		  (qp->sq_next == qp->sq.ci || qp->cwnd) &&
		  qp->rd_atomic_out <= QHCA_MAX_RD_ATOMIC, "a bad requester state");
	for (i = qp->sq.ci; i != qp->sq_next && !in->why; i++)
		send_wqe_get(in, qp, qhca_sq_slot(qp, i));
	if (in->why)
		return false;
	if (rem != UINT64_MAX)
		qhca_qp_set_deadline(e, qp, deadline_of(rem, in->now));
	/* responder */
	qp->epsn = get32(in) & 0xffffff;
	qp->msn = get32(in) & 0xffffff;
	qp->nak_sent = getbool(in);
	qp->recv.active = getbool(in);
	CHECK(in, !qp->recv.active || qp->type != QHCA_QPT_XRC_INI, "a receive on an XRC initiator");
	if (qp->recv.active) {
		struct qhca_srq *srq;

		qp->recv.wr_id = get64(in);
		srqn = get32(in);
		srq = srqn ? qhca_srq_find(e, srqn) : NULL;
		/* its queue: the RQ, the QP's SRQ, or an XRC target's an XRC SRQ of its domain */
		CHECK(in, !in->why && (qp->type == QHCA_QPT_XRC_TGT ?
				       srq && srq->xrcd == qp->xrcd : srq == qp->srq),
		      "a receive from another queue");
		qp->recv.srq = srq;
		if (qp->type == QHCA_QPT_XRC_TGT)
			qhca_list_add_tail(&srq->xrc_msgs, &qp->xrc_link);
		/* its SGEs were checked against the PD of its queue */
		sgl_get(in, &qp->recv.sgl, srq ? srq->pd : qp->pd, QHCA_ACCESS_LOCAL_WRITE);
		qp->recv.offset = get64(in);
		CHECK(in, !in->why && qp->recv.offset <= qp->recv.sgl.length, "a bad receive");
	}
	/* An RDMA WRITE in progress holds its target (none for 0 bytes) as resp.c took it: of
	 * the QP's PD (an XRC target's comes with each request), granting remote write over
	 * what is left. */
	qp->write_active = getbool(in);
	qp->write_va = get64(in);
	qp->write_left = get64(in);
	qp->write_total = get64(in);
	qp->drop_msg = getbool(in);
	{
		struct mig_range r = { qp->write_va, qp->write_left, QHCA_ACCESS_REMOTE_WRITE };

		qp->write_mr = mig_ref_get(in, &none, qp->type == QHCA_QPT_XRC_TGT ? 0 : qp->pd,
				       REF_ANY, &r);
	}
	if (in->why)
		return false;
	CHECK(in, qp->write_left <= qp->write_total && (qp->write_active || !qp->write_mr) &&
		  (!qp->write_active || !qp->write_left || qp->write_mr),
	      "a bad RDMA WRITE in progress");
	for (i = 0; i < QHCA_MAX_RD_ATOMIC; i++)
		rd_get(in, &qp->rd[i]);
	qp->rd_next = get32(in);
	qp->rr.active = getbool(in);
	qp->rr.dropped = getbool(in);
	qp->rr.len = get32(in);
	qp->rr.psn = get32(in) & 0xffffff;
	qp->rr.k = get32(in);
	qp->rr.n = get32(in);
	qp->rr.mtu = get32(in);
	qp->rr.va = get64(in);
	/* READ responses to send read from their source (none for 0 bytes), of the QP's PD,
	 * granting remote read over the whole READ */
	{
		struct mig_range r = { qp->rr.va, qp->rr.len, QHCA_ACCESS_REMOTE_READ };

		qp->rr.mr = mig_ref_get(in, &none, qp->type == QHCA_QPT_XRC_TGT ? 0 : qp->pd, REF_ANY,
				    &r);
	}
	if (in->why)
		return false;
	CHECK(in, !qp->rr.mr || qp->rr.active, "a READ response holding a region while idle");
	/* the count of responses as read_npkts() makes it, 32-bit */
	if (qp->rr.active)
		CHECK(in, mtu_ok(qp->rr.mtu) && (!qp->rr.len || qp->rr.mr) &&
			  qp->rr.n == (qp->rr.len ? (qp->rr.len + qp->rr.mtu - 1) / qp->rr.mtu : 1) &&
			  qp->rr.k <= qp->rr.n, "a bad READ response in progress");
	return qp_link_ok(in, qp);
}

bool mig_qps_get(struct mig_in *in)
{
	struct qhca_engine *e = in->e;
	uint32_t n, i;

	expect_section(in, SEC_QP);
	n = get32(in);
	CHECK(in, n == e->qp_table.count, "QPs missing or more than the table has");
	for (i = 0; i < n && !in->why; i++)
		qp_get(in);
	n = get32(in);
	CHECK(in, n <= e->qp_table.count, "more QPs waiting than there are");
	CHECK(in, !n || e->cfg.link != QHCA_LINK_IWARP,
	      "RoCE's QPs waiting to send on an iWARP port");
	for (i = 0; i < n && !in->why; i++) {
		struct qhca_qp *qp = qhca_qp_find(e, get32(in));

		CHECK(in, qp && qhca_list_empty(&qp->tx_link), "a bad QP waiting to send");
		qhca_tx_wait(e, qp);
	}
	/* The send queues a budget left to the timer are not saved: every QP with WQEs to
	 * start or packets to send goes on from the timer once resumed (req.c, "the budget";
	 * one that was waiting for its window or a fence finds it still closed). */
	for (i = 0; i < e->cfg.max_qp && !in->why && e->cfg.link != QHCA_LINK_IWARP; i++) {
		const struct qhca_qp *qp = e->qp[i];

		if (qp && (qp->state == QHCA_QPS_RTS || qp->state == QHCA_QPS_SQD) &&
		    (qp->sq_next != qp->sq.pi || qp->tx_idx != qp->sq_next))
			qhca_req_defer(e, qp);
	}
	/* the kernel's QP1 and (InfiniBand) QP0, as CREATE_QP makes them (admin.c) */
	{
		struct qhca_qp *gsi = e->gsi_qpn ? qhca_qp_find(e, e->gsi_qpn) : NULL;
		struct qhca_qp *smi = e->smi_qpn ? qhca_qp_find(e, e->smi_qpn) : NULL;

		CHECK(in, (!e->gsi_qpn || (gsi && gsi->type == QHCA_QPT_GSI && !gsi->uctx)) &&
			  (!e->smi_qpn || (smi && smi->type == QHCA_QPT_SMI && !smi->uctx &&
					   e->cfg.link == QHCA_LINK_IB)),
		      "a special QP that is not one");
	}
	return !in->why;
}
