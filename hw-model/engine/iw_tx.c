// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The iWARP port's transmit side (iw_conn.h): a QP's send WQEs as FPDUs (RDMAP SEND,
 * SEND with Invalidate, RDMA Write, Read Request; RFC 5040), the Read Responses owed to
 * the peer's Read Requests, in order and as TCP has room, and Terminate. A SEND or WRITE
 * completes once TCP holds all of it (RFC 5040 5.2), a READ when its last response came.
 */
#include <stdio.h>
#include <string.h>

#include "iw_conn.h"

/* An FPDU in the teaching trace: built (dir=out) or taken whole with its CRC good (in). */
void iw_step_fpdu(struct iw_conn *c, const char *dir, const struct iw_pkt *p,
		      const uint8_t *fpdu, size_t len)
{
	const struct iw_opcode_info *oi = iw_opcode_info(p->opcode);
	char hdr[160];

	if (!qhca_tracing(c->e) || len < IW_MPA_HLEN + 4)
		return;
	if (oi->flags & IW_F_TAGGED)
		snprintf(hdr, sizeof(hdr), "stag=0x%x to=0x%llx", p->stag,
			 (unsigned long long)p->to);
	else if (p->opcode == IW_OP_READ_REQ)
		snprintf(hdr, sizeof(hdr), "qn=%u msn=%u mo=%u sink_stag=0x%x sink_to=0x%llx "
			 "size=%u src_stag=0x%x src_to=0x%llx", oi->qn, p->msn, p->mo,
			 p->sink_stag, (unsigned long long)p->sink_to, p->read_size,
			 p->src_stag, (unsigned long long)p->src_to);
	else
		snprintf(hdr, sizeof(hdr), "qn=%u msn=%u mo=%u", oi->qn, p->msn, p->mo);
	qhca_stepf(c->e, "fpdu dir=%s qp=0x%x conn=0x%x op=\"%s\" ulpdu=%u len=%u last=%d %s "
		   "crc=0x%08x fpdu=%zu", dir, c->qpn, c->handle, oi->name,
		   (unsigned int)fpdu[0] << 8 | fpdu[1], p->payload_len, p->last, hdr,
		   (uint32_t)fpdu[len - 4] << 24 | (uint32_t)fpdu[len - 3] << 16 |
		   (uint32_t)fpdu[len - 2] << 8 | fpdu[len - 1], len);
}

/* Hand @n bytes to TCP, all or nothing (the caller checked the room). */
bool iw_tcp_queue(struct iw_conn *c, const uint8_t *buf, size_t n)
{
	if (qtcp_send_space(c->tcp) < n)
		return false;
	if (qtcp_send(c->tcp, buf, n, iw_now_ns(c->e)) != n) {
		qhca_log(c->e, QHCA_LOG_ERR, "iWARP connection 0x%x: TCP took part of an FPDU",
			 c->handle);
		return false;
	}
	return true;
}

/* Build @p (its payload already at iw->txbuf's payload place or elsewhere) and queue it;
 * false if TCP has no room for it now. */
static bool fpdu_out(struct iw_conn *c, const struct iw_pkt *p)
{
	uint8_t *buf = c->e->iw->txbuf;
	size_t n = iw_fpdu_build(p, true, buf, IW_TXBUF);

	if (!n) {
		qhca_log(c->e, QHCA_LOG_ERR, "iWARP connection 0x%x: FPDU of op %u not built",
			 c->handle, p->opcode);
		return true;	/* nothing to wait for */
	}
	if (qtcp_send_space(c->tcp) >= n)	/* in the trace before TCP sends it */
		iw_step_fpdu(c, "out", p, buf, n);
	return iw_tcp_queue(c, buf, n);
}

/* Room in TCP for an FPDU of @payload bytes of @opcode? */
static bool fpdu_room(const struct iw_conn *c, uint8_t opcode, uint32_t payload)
{
	return qtcp_send_space(c->tcp) >= iw_fpdu_len_for(iw_opcode_info(opcode)->hdr_len +
							   payload);
}

/* Where an FPDU's payload goes in the build buffer (after the length and headers). */
static uint8_t *payload_at(struct iw_conn *c, uint8_t opcode)
{
	return c->e->iw->txbuf + IW_MPA_HLEN + iw_opcode_info(opcode)->hdr_len;
}

/*
 * Something went wrong on this connection: a Terminate (RFC 5040 4.8) with @layer, @etype
 * and @ecode, then the close; the QP to the error state (@event to the driver).
 */
void iw_terminate(struct iw_conn *c, uint8_t layer, uint8_t etype, uint8_t ecode,
		      uint8_t event, const char *why)
{
	struct qhca_qp *qp = iw_qp_of(c);
	struct iw_pkt t;

	qhca_log_guest(c->e, "iWARP connection 0x%x: terminated: %s", c->handle, why);
	qhca_step(c->e, "iw conn=0x%x terminate why=\"%s\"", c->handle, why);
	if (!c->terminated && c->state == IWC_RTS) {
		memset(&t, 0, sizeof(t));
		t.opcode = IW_OP_TERMINATE;
		t.last = true;
		t.msn = 1;
		t.term_layer = layer;
		t.term_etype = etype;
		t.term_ecode = ecode;
		if (!fpdu_out(c, &t)) {
			c->terminated = true;	/* no room for it behind what is queued */
			qtcp_abort(c->tcp, iw_now_ns(c->e));
			goto qp_error;
		}
	}
	c->terminated = true;
	iw_closing(c);
	qtcp_close(c->tcp, iw_now_ns(c->e));
qp_error:
	if (qp && qp->state != QHCA_QPS_ERR)
		qhca_qp_error(c->e, qp, event);
}

/* The payload one FPDU of @opcode carries at most: the MULPDU (by the connection's MSS)
 * less the opcode's DDP and RDMAP headers. */
static uint32_t fpdu_payload(const struct iw_conn *c, uint8_t opcode)
{
	uint32_t m = iw_mulpdu(c->tcp->mss), h = iw_opcode_info(opcode)->hdr_len;

	m = m > h + 4 ? m - h : 4;
	return m < IW_MAX_ULP_PAYLOAD ? m : IW_MAX_ULP_PAYLOAD;
}

/* Answer the Read Requests queued, in order, as TCP has room; false when it has none. */
static bool rr_pump(struct iw_conn *c, struct qhca_qp *qp)
{
	if (qp->state != QHCA_QPS_RTS && qp->state != QHCA_QPS_SQD)
		return false;	/* a QP in error answers nothing more */
	while (c->rr_n && !c->terminated) {
		struct iw_rresp *r = &c->rr[c->rr_head];
		uint32_t most = fpdu_payload(c, IW_OP_READ_RESP);
		uint32_t chunk = r->size - r->off < most ? r->size - r->off : most;
		const char *why = NULL;
		struct qhca_mr *mr;
		struct iw_pkt p;

		if (!fpdu_room(c, IW_OP_READ_RESP, chunk))
			return false;
		mr = qhca_rkey_check(c->e, qp, r->src_stag, r->src_to + r->off, chunk,
				     QHCA_ACCESS_REMOTE_READ, &why);
		/* The region's rights alone: on iWARP a QP's remote access flags gate
		 * nothing (rdma_cm leaves an active side's at 0; siw ignores them, Chelsio's
		 * RNICs enable reads and writes at creation). */
		if (!mr) {
			iw_terminate(c, IW_TERM_LAYER_RDMAP, 1, 0, QHCA_EVENT_QP_ACCESS_ERR, why);
			return false;
		}
		memset(&p, 0, sizeof(p));
		p.opcode = IW_OP_READ_RESP;
		p.stag = r->sink_stag;
		p.to = r->sink_to + r->off;
		p.payload = payload_at(c, IW_OP_READ_RESP);
		p.payload_len = chunk;
		p.last = r->off + chunk == r->size;
		if (chunk && qhca_mr_xfer(c->e, mr, r->src_to + r->off, (uint8_t *)p.payload,
					  chunk, false)) {
			iw_terminate(c, IW_TERM_LAYER_RDMAP, 1, 0, QHCA_EVENT_QP_FATAL,
				  "READ source not readable");
			return false;
		}
		if (!fpdu_out(c, &p))
			return false;
		r->off += chunk;
		if (p.last) {
			c->rr_head = (c->rr_head + 1) % QHCA_MAX_RD_ATOMIC;
			c->rr_n--;
		}
	}
	return !c->terminated;
}

/* The RDMAP opcode of @sw's FPDUs. */
static uint8_t wqe_opcode(const struct qhca_send_wqe *sw)
{
	bool se = sw->hdr.flags & QHCA_WQE_SOLICITED;

	switch (sw->hdr.opcode) {
	case QHCA_WR_SEND:
		return se ? IW_OP_SEND_SE : IW_OP_SEND;
	case QHCA_WR_SEND_WITH_INV:
		return se ? IW_OP_SEND_SE_INV : IW_OP_SEND_INV;
	case QHCA_WR_RDMA_WRITE:
		return IW_OP_WRITE;
	case QHCA_WR_RDMA_READ:
		return IW_OP_READ_REQ;
	}
	return IW_OP_COUNT;
}

/* Send what is left of @sw's FPDUs; false when TCP has no room for the next. */
static bool wqe_out(struct iw_conn *c, struct qhca_send_wqe *sw)
{
	uint8_t op = wqe_opcode(sw);

	while (sw->tx_next < sw->npkts) {
		uint32_t k = sw->tx_next, len = op == IW_OP_READ_REQ ? 0 :
			     qhca_pkt_len(sw->length, sw->mtu, k);
		struct iw_pkt p;

		if (!fpdu_room(c, op, len))
			return false;
		memset(&p, 0, sizeof(p));
		p.opcode = op;
		p.last = k + 1 == sw->npkts;
		p.payload = payload_at(c, op);
		p.payload_len = len;
		if (op == IW_OP_WRITE) {
			p.stag = sw->hdr.rkey;
			p.to = sw->hdr.remote_addr + (uint64_t)k * sw->mtu;
		} else if (op == IW_OP_READ_REQ) {
			p.msn = sw->first_psn;
			p.sink_stag = sw->sgl.sge[0].lkey;
			p.sink_to = sw->sgl.sge[0].addr;
			p.read_size = (uint32_t)sw->length;
			p.src_stag = sw->hdr.rkey;
			p.src_to = sw->hdr.remote_addr;
		} else {
			p.msn = sw->first_psn;
			p.mo = k * sw->mtu;
			p.inval_stag = sw->hdr.imm_inv;
		}
		if (len && qhca_wqe_xfer(c->e, sw, (uint64_t)k * sw->mtu, (uint8_t *)p.payload, len,
					 false)) {
			sw->tx_next = sw->npkts;
			sw->done = true;
			sw->status = QHCA_WC_LOC_PROT_ERR;
			return true;
		}
		if (!fpdu_out(c, &p))
			return false;
		sw->tx_next++;
	}
	return true;
}

/* What an iWARP QP may post: no atomics, no immediate data (RFC 5040 has none), a READ
 * sink of one buffer (its STag goes in the request). */
static uint8_t iw_wqe_ok(const struct qhca_send_wqe *sw)
{
	if (qhca_wr_is_local(sw->hdr.opcode))
		return QHCA_WC_SUCCESS;
	if (wqe_opcode(sw) == IW_OP_COUNT)
		return QHCA_WC_LOC_QP_OP_ERR;
	if (sw->hdr.opcode == QHCA_WR_RDMA_READ &&
	    (sw->sgl.num != 1 || (sw->hdr.flags & QHCA_WQE_INLINE)))
		return QHCA_WC_LOC_QP_OP_ERR;
	return QHCA_WC_SUCCESS;
}

/* SENDs and WRITEs whose FPDUs are all in TCP's send buffer are done: TCP holds its own
 * copy until the peer acknowledges it, so the guest's buffer is free again. In iWARP a
 * requester's completion says no more (RFC 5040 5.2: not that the data was placed), and
 * siw completes them at that point too; waiting for the ACK would add the peer's delayed
 * ACK (40 ms in Linux) to every exchange of small messages. */
static void acked_done(struct iw_conn *c, struct qhca_qp *qp)
{
	uint32_t i;

	for (i = qp->sq.ci; i != qp->sq_next; i++) {
		struct qhca_send_wqe *sw = qhca_sq_slot(qp, i);

		if (!sw->done && sw->hdr.opcode != QHCA_WR_RDMA_READ &&
		    sw->tx_next == sw->npkts) {
			sw->done = true;
			sw->status = QHCA_WC_SUCCESS;
		}
	}
	qhca_comp_ready(c->e, qp);
}

void iw_req_run(struct iw_conn *c, struct qhca_qp *qp)
{
	if (c->tx_hold)
		return;
	for (;;) {
		struct qhca_send_wqe *sw;
		uint8_t status;

		if (c->terminated || !rr_pump(c, qp))
			break;
		if (qp->sq_next != qp->sq.ci) {
			sw = qhca_sq_slot(qp, qp->sq_next - 1);
			if (sw->tx_next < sw->npkts && !wqe_out(c, sw))
				break;
		}
		if (qp->state != QHCA_QPS_RTS || qp->sq_next == qp->sq.pi ||
		    qp->sq_next - qp->sq.ci >= qp->win_size)
			break;
		if (qp->sq_next != qp->sq.ci) {
			/* a WQE that failed stops the queue: it takes the QP to error */
			sw = qhca_sq_slot(qp, qp->sq_next - 1);
			if (sw->done && sw->status != QHCA_WC_SUCCESS)
				break;
		}
		sw = qhca_sq_slot(qp, qp->sq_next);
		status = qhca_wqe_load(c->e, qp, qp->sq_next, sw);
		if (status == QHCA_WC_SUCCESS)
			status = iw_wqe_ok(sw);
		if (status == QHCA_WC_SUCCESS && qhca_wr_is_local(sw->hdr.opcode)) {
			if ((sw->hdr.flags & QHCA_WQE_FENCE) && qp->sq.ci != qp->sq_next)
				break;
			qp->sq_next++;
			sw->done = true;
			sw->status = qhca_wqe_local_op(c->e, qp, sw);
			continue;
		}
		if (status == QHCA_WC_SUCCESS && ((sw->hdr.flags & QHCA_WQE_FENCE) ?
						  qp->rd_atomic_out != 0 :
						  sw->hdr.opcode == QHCA_WR_RDMA_READ &&
						  qp->rd_atomic_out >= (c->ord ? c->ord : 1u)))
			break;	/* a fence waits for READs; READs beyond ORD wait */
		qp->sq_next++;
		if (status != QHCA_WC_SUCCESS) {
			sw->done = true;
			sw->status = status;
			break;
		}
		sw->mtu = fpdu_payload(c, wqe_opcode(sw));
		sw->npkts = sw->length ? (uint32_t)((sw->length + sw->mtu - 1) / sw->mtu) : 1;
		sw->tx_next = 0;
		if (sw->hdr.opcode == QHCA_WR_RDMA_READ) {
			sw->npkts = 1;
			sw->read_next = 0;	/* bytes of its responses placed */
			sw->first_psn = c->read_msn++;
			qp->rd_atomic_out++;
		} else if (wqe_opcode(sw) != IW_OP_WRITE) {
			sw->first_psn = c->send_msn++;
		}
	}
	acked_done(c, qp);
}

void qhca_iw_req_run(struct qhca_engine *e, struct qhca_qp *qp)
{
	struct iw_conn *c = e->iw && qp->iw_conn ? iw_conn_find(e, qp->iw_conn) : NULL;

	if (!c || c->state != IWC_RTS || iw_qp_of(c) != qp)
		return;
	iw_req_run(c, qp);
	iw_sched(c);	/* reaped from the timer if its TCP ended (a Terminate without room) */
	qhca_timer_update(e);
}

void iw_tcp_acked(void *opaque, uint32_t n)
{
	struct iw_conn *c = opaque;
	struct qhca_qp *qp;

	/* room in TCP's send buffer: the queue may go on */
	qhca_step(c->e, "acked qp=0x%x conn=0x%x bytes=%u", c->qpn, c->handle, n);
	if (c->state == IWC_RTS && (qp = iw_qp_of(c)) != NULL)
		iw_req_run(c, qp);
}
