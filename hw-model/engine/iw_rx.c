// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The iWARP port's receive side (iw_conn.h): the FPDUs of a connection in RDMA mode, taken
 * whole from TCP's in-order bytes (wire/iwarp.c's extractor, CRC checked), then placed:
 * tagged ones (RDMA Write, Read Response; RFC 5041 5.1) by STag and offset after the
 * region's checks, untagged SENDs (5.2) into the receive WQE of their message, Read
 * Requests queued for iw_tx.c to answer; anything out of order or out of bounds ends the
 * connection with a Terminate (RFC 5040 7).
 */
#include <string.h>

#include "iw_conn.h"

/* A READ of ours answered: its oldest outstanding one (RDMAP answers in order). */
static struct qhca_send_wqe *oldest_read(struct qhca_qp *qp)
{
	uint32_t i;

	for (i = qp->sq.ci; i != qp->sq_next; i++) {
		struct qhca_send_wqe *sw = qhca_sq_slot(qp, i);

		if (!sw->done && sw->hdr.opcode == QHCA_WR_RDMA_READ)
			return sw;
	}
	return NULL;
}

/* A tagged FPDU (RDMA Write, Read Response): placed by STag and offset. */
static bool rx_tagged(struct iw_conn *c, struct qhca_qp *qp, const struct iw_pkt *p)
{
	const char *why = "QP without remote write";
	struct qhca_send_wqe *rd = NULL;
	struct qhca_mr *mr = NULL;

	if (p->opcode == IW_OP_READ_RESP) {
		rd = oldest_read(qp);
		/* its responses in order: each where the last ended, the last at the end */
		if (!rd || p->stag != rd->sgl.sge[0].lkey ||
		    p->to != rd->sgl.sge[0].addr + rd->read_next ||
		    (uint64_t)rd->read_next + p->payload_len > rd->length ||
		    (p->last && rd->read_next + p->payload_len != rd->length)) {
			iw_terminate(c, IW_TERM_LAYER_RDMAP, 2, 0, QHCA_EVENT_QP_REQ_ERR,
				  "a Read Response for no READ of ours");
			return false;
		}
		/* The sink needs remote write rights, as RFC 5040 has it: the responder
		 * writes it by its STag. */
		mr = qhca_rkey_check(c->e, qp, p->stag, p->to, p->payload_len,
				     QHCA_ACCESS_REMOTE_WRITE, &why);
	} else {	/* the region's rights alone, as for a READ (rr_pump) */
		mr = qhca_rkey_check(c->e, qp, p->stag, p->to, p->payload_len,
				     QHCA_ACCESS_REMOTE_WRITE, &why);
	}
	if (!mr) {
		iw_terminate(c, IW_TERM_LAYER_DDP, 0, 0, QHCA_EVENT_QP_ACCESS_ERR, why);
		return false;
	}
	if (p->payload_len &&
	    qhca_mr_xfer(c->e, mr, p->to, (void *)p->payload, p->payload_len, true)) {
		iw_terminate(c, IW_TERM_LAYER_DDP, 0, 0, QHCA_EVENT_QP_FATAL, "placement failed");
		return false;
	}
	if (rd)
		rd->read_next += p->payload_len;
	if (rd && p->last) {
		rd->done = true;	/* qhca_comp_ready counts it out of rd_atomic_out */
		rd->status = QHCA_WC_SUCCESS;
		qhca_comp_ready(c->e, qp);
		iw_req_run(c, qp);		/* a READ waiting for ORD may go */
	}
	return true;
}

/* An untagged SEND FPDU: into the receive WQE of its message, at its offset. */
static bool rx_send(struct iw_conn *c, struct qhca_qp *qp, const struct iw_pkt *p)
{
	struct qhca_recv_ctx *rc = &qp->recv;
	uint8_t cflags = 0;
	uint32_t imm = 0;

	if (p->msn != c->rx_send_msn) {
		iw_terminate(c, IW_TERM_LAYER_DDP, 1, 2, QHCA_EVENT_QP_REQ_ERR, "SEND out of order");
		return false;
	}
	if (!rc->active) {
		int r = qhca_recv_take(c->e, qp, rc);

		if (r < 0) {
			/* No RNR in iWARP: the peer sent into nothing (RFC 5041 7.2). */
			iw_terminate(c, IW_TERM_LAYER_DDP, 1, 1, QHCA_EVENT_QP_FATAL,
				  r == -1 ? "no receive posted" : "bad receive WQE");
			return false;
		}
		rc->offset = 0;
	}
	if (p->mo != rc->offset || (uint64_t)p->mo + p->payload_len > rc->sgl.length ||
	    qhca_sgl_xfer(c->e, &rc->sgl, p->mo, (uint8_t *)p->payload, p->payload_len, true)) {
		qhca_recv_complete(c->e, qp, rc, QHCA_WC_LOC_LEN_ERR, QHCA_WC_RECV, 0, 0, 0, NULL,
				   false);
		iw_terminate(c, IW_TERM_LAYER_DDP, 1, 3, QHCA_EVENT_QP_FATAL,
			  "SEND does not fit its receive");
		return false;
	}
	rc->offset += p->payload_len;
	if (!p->last)
		return true;
	if (iw_opcode_info(p->opcode)->flags & IW_F_INVAL) {
		const char *why;

		if (qhca_mr_invalidate(c->e, qp, p->inval_stag, true, &why) != QHCA_WC_SUCCESS) {
			qhca_recv_complete(c->e, qp, rc, QHCA_WC_REM_INV_REQ_ERR, QHCA_WC_RECV, 0,
					   0, 0, NULL, false);
			iw_terminate(c, IW_TERM_LAYER_RDMAP, 1, 0, QHCA_EVENT_QP_REQ_ERR, why);
			return false;
		}
		cflags = QHCA_CQE_FLAG_INV;
		imm = p->inval_stag;
	}
	c->rx_send_msn++;
	qhca_recv_complete(c->e, qp, rc, QHCA_WC_SUCCESS, QHCA_WC_RECV, (uint32_t)rc->offset,
			   imm, cflags, NULL, (iw_opcode_info(p->opcode)->flags & IW_F_SE) != 0);
	return true;
}

static bool rx_read_req(struct iw_conn *c, struct qhca_qp *qp, const struct iw_pkt *p)
{
	struct iw_rresp *r;

	if (p->msn != c->rx_read_msn || c->rr_n >= (c->ird ? c->ird : 1u) ||
	    p->read_size > 0x80000000u) {
		iw_terminate(c, IW_TERM_LAYER_RDMAP, 2, 0, QHCA_EVENT_QP_REQ_ERR,
			  "Read Request out of order, past IRD, or too long");
		return false;
	}
	r = &c->rr[(c->rr_head + c->rr_n) % QHCA_MAX_RD_ATOMIC];
	r->sink_stag = p->sink_stag;
	r->sink_to = p->sink_to;
	r->size = p->read_size;
	r->src_stag = p->src_stag;
	r->src_to = p->src_to;
	r->off = 0;
	c->rr_n++;
	c->rx_read_msn++;
	iw_req_run(c, qp);
	return true;
}

/* One whole FPDU from the peer, its CRC good. */
static void rx_fpdu(struct iw_conn *c, struct qhca_qp *qp, const uint8_t *f, size_t len)
{
	struct iw_pkt p;
	enum iw_parse_result r = iw_fpdu_parse(f, len, false, &p);

	if (r != IW_OK) {
		iw_terminate(c, IW_TERM_LAYER_DDP, 0, 0, QHCA_EVENT_QP_REQ_ERR,
			  iw_parse_result_name(r));
		return;
	}
	iw_step_fpdu(c, "in", &p, f, len);
	switch (p.opcode) {
	case IW_OP_WRITE:
	case IW_OP_READ_RESP:
		rx_tagged(c, qp, &p);
		break;
	case IW_OP_READ_REQ:
		rx_read_req(c, qp, &p);
		break;
	case IW_OP_TERMINATE:
		c->terminated = true;	/* answered by no Terminate */
		iw_terminate(c, p.term_layer, p.term_etype, p.term_ecode, QHCA_EVENT_QP_FATAL,
			  "the peer terminated");
		break;
	default:
		rx_send(c, qp, &p);
		break;
	}
}

/* In-order bytes of a connection in RDMA mode: FPDUs, placed as they come. */
size_t iw_rx_stream(struct iw_conn *c, const uint8_t *data, size_t n)
{
	struct qhca_qp *qp = iw_qp_of(c);
	size_t left = n;
	bool held = c->tx_hold;

	while (left && !c->terminated) {
		const uint8_t *f;
		size_t flen;
		enum iw_parse_result r = iw_fpdu_rx_next(&c->frx, &data, &left, &f, &flen);

		if (r == IW_INCOMPLETE)
			break;
		if (r != IW_OK || !qp) {
			iw_terminate(c, IW_TERM_LAYER_LLP, 0, r == IW_BAD_CRC ? 2 : 1,
				  QHCA_EVENT_QP_FATAL, qp ? iw_parse_result_name(r) : "no QP");
			break;
		}
		if (qp->state != QHCA_QPS_RTS && qp->state != QHCA_QPS_SQD) {
			iw_terminate(c, IW_TERM_LAYER_RDMAP, 2, 1, QHCA_EVENT_QP_FATAL,
				  "the QP takes no requests in its state");
			break;
		}
		c->tx_hold = false;	/* the initiator's first FPDU: the responder may send */
		rx_fpdu(c, qp, f, flen);
	}
	if (held && !c->tx_hold && qp && c->state == IWC_RTS && !c->terminated)
		iw_req_run(c, qp);
	return n;	/* all taken: placed, or the connection is ending */
}
