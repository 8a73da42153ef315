// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * qhca completer (IBA 9.7.5.2 and 9.9.3.1 for RC): ACKs, NAKs, READ responses and ATOMIC
 * acknowledgements complete send WQEs in order; each response is first classified into a
 * named event (enum comp_event), then handled by one function. The retransmission and RNR
 * timers, flushing in the error state and the send CQEs live here too.
 */
#include <stdlib.h>
#include <string.h>

#include "engine_internal.h"

/* ---------------------------------------------------------------- completion */
static uint8_t wc_opcode(uint8_t wr)
{
	switch (wr) {
	case QHCA_WR_RDMA_WRITE:
	case QHCA_WR_RDMA_WRITE_WITH_IMM:
		return QHCA_WC_RDMA_WRITE;
	case QHCA_WR_RDMA_READ:
		return QHCA_WC_RDMA_READ;
	case QHCA_WR_ATOMIC_CMP_AND_SWP:
		return QHCA_WC_COMP_SWAP;
	case QHCA_WR_ATOMIC_FETCH_AND_ADD:
		return QHCA_WC_FETCH_ADD;
	case QHCA_WR_REG_MR:
		return QHCA_WC_REG_MR;
	case QHCA_WR_LOCAL_INV:
		return QHCA_WC_LOCAL_INV;
	case QHCA_WR_BIND_MW:
		return QHCA_WC_BIND_MW;
	case QHCA_WR_ATOMIC_WRITE:
		return QHCA_WC_ATOMIC_WRITE;
	default:
		return QHCA_WC_SEND;
	}
}

/* A send completion names its WQE's SQ index, so the guest knows which slots are free. */
static void post_send_cqe(struct qhca_engine *e, struct qhca_qp *qp, uint32_t idx,
			  uint64_t wr_id, uint8_t opcode, uint8_t status, uint32_t len)
{
	struct qhca_cqe cqe;

	memset(&cqe, 0, sizeof(cqe));
	cqe.wr_id = wr_id;
	cqe.byte_len = len;
	cqe.qpn_status = QHCA_FIELD_PREP(QHCA_CQE_QPN_MASK, qp->qpn) |
			 QHCA_FIELD_PREP(QHCA_CQE_STATUS_MASK, status);
	cqe.opcode = wc_opcode(opcode);
	cqe.src_qp_flags = QHCA_FIELD_PREP(QHCA_CQE_WQE_INDEX_MASK, idx);
	qhca_cq_post(e, qp->send_cq, &cqe, false);
}

/* Complete finished WQEs in order; an error completion takes the QP to the error state. */
void qhca_comp_ready(struct qhca_engine *e, struct qhca_qp *qp)
{
	while (qp->sq.ci != qp->sq_next && qhca_sq_slot(qp, qp->sq.ci)->done) {
		struct qhca_send_wqe *sw = qhca_sq_slot(qp, qp->sq.ci);

		if (qhca_wr_is_rd_atomic(sw->hdr.opcode) && qp->rd_atomic_out)
			qp->rd_atomic_out--;
		if (sw->status != QHCA_WC_SUCCESS || qp->sig_all ||
		    (sw->hdr.flags & QHCA_WQE_SIGNALED))
			post_send_cqe(e, qp, qp->sq.ci, sw->hdr.wr_id, sw->hdr.opcode, sw->status,
				      (uint32_t)sw->length);
		qhca_sgl_release(&sw->sgl);
		qp->sq.ci++;
		if (sw->status != QHCA_WC_SUCCESS) {
			qhca_qp_error(e, qp, 0);
			return;
		}
	}
	if (qp->sq.ci == qp->sq_next && qp->state == QHCA_QPS_SQD)
		qhca_event_async(e, QHCA_EVENT_SQ_DRAINED, qp->qpn, 0);
}

static uint64_t timeout_ns(struct qhca_qp *qp)
{
	/* 4.096 us * 2^timeout (IBA 9.7.6.1.3); 0 means no timeout. */
	return qp->timeout ? 4096ull << qp->timeout : 0;
}

void qhca_comp_arm_timer(struct qhca_engine *e, struct qhca_qp *qp)
{
	if (!qhca_qp_reliable(qp) || qp->rnr_wait)
		return;
	if (qp->sq.ci == qp->sq_next || !timeout_ns(qp))
		qhca_qp_set_deadline(e, qp, UINT64_MAX);
	else
		qhca_qp_set_deadline(e, qp, e->ops->now_ns(e->opaque) + timeout_ns(qp));
	qhca_timer_update(e);
}

/* The first WQE not yet done, or NULL. */
static struct qhca_send_wqe *oldest(struct qhca_qp *qp)
{
	uint32_t i;

	for (i = qp->sq.ci; i != qp->sq_next; i++)
		if (!qhca_sq_slot(qp, i)->done)
			return qhca_sq_slot(qp, i);
	return NULL;
}

/* Everything before @psn arrived: SENDs and WRITEs up to it are done. A READ or ATOMIC
 * in that range without its response means the response was lost: returns its first PSN
 * to resend from, or -1. */
static int64_t ack_until(struct qhca_qp *qp, uint32_t psn, bool inclusive)
{
	uint32_t i;

	for (i = qp->sq.ci; i != qp->sq_next; i++) {
		struct qhca_send_wqe *sw = qhca_sq_slot(qp, i);
		int32_t d = qhca_psn_diff(sw->last_psn, psn);

		if (sw->done)
			continue;
		if (d > 0 || (d == 0 && !inclusive))
			break;
		if (qhca_wr_is_rd_atomic(sw->hdr.opcode))
			return sw->first_psn;
		sw->done = true;
		sw->status = QHCA_WC_SUCCESS;
	}
	return -1;
}

static void fail_at(struct qhca_qp *qp, uint32_t psn, uint8_t status)
{
	uint32_t i;

	for (i = qp->sq.ci; i != qp->sq_next; i++) {
		struct qhca_send_wqe *sw = qhca_sq_slot(qp, i);

		if (!sw->done && qhca_psn_diff(psn, sw->last_psn) <= 0) {
			sw->done = true;
			sw->status = status;
			return;
		}
	}
}

/*
 * What a response does to the send queue (IBA 9.7.5.2, 9.9.3.1): the completer classifies
 * each response into one of these events, then one function handles each.
 */
enum comp_event {
	COMP_STALE,		/* nothing outstanding at its PSN: a duplicate or a late one */
	COMP_ACK,		/* ACK: everything up to its PSN arrived */
	COMP_RNR_NAK,		/* receiver not ready: wait, then send again */
	COMP_SEQ_NAK,		/* PSN sequence error: send again from its PSN */
	COMP_ERR_NAK,		/* invalid request, remote access or operation error */
	COMP_READ_RESPONSE,	/* data of an RDMA READ */
	COMP_ATOMIC_ACK,	/* the original value of an ATOMIC */
	COMP_IGNORE,		/* a reserved AETH code */
	COMP_EVENT_MAX
};

static const char *const comp_event_names[COMP_EVENT_MAX] = {
	[COMP_STALE] = "stale", [COMP_ACK] = "ACK", [COMP_RNR_NAK] = "RNR NAK",
	[COMP_SEQ_NAK] = "sequence NAK", [COMP_ERR_NAK] = "error NAK",
	[COMP_READ_RESPONSE] = "READ response", [COMP_ATOMIC_ACK] = "ATOMIC ACK",
	[COMP_IGNORE] = "reserved AETH",
};

static enum comp_event comp_classify(struct qhca_qp *qp, const struct roce_pkt *p)
{
	const struct roce_opcode_info *oi = roce_opcode_info(p->opcode);
	struct qhca_send_wqe *sw = oldest(qp);

	if (!sw || qhca_psn_diff(p->psn, sw->first_psn) < 0 || qhca_psn_diff(p->psn, qp->psn) >= 0)
		return COMP_STALE;
	if ((p->opcode & ~ROCE_TS_MASK) == ROCE_OP_ATOMIC_ACKNOWLEDGE)
		return COMP_ATOMIC_ACK;
	if (oi->flags & ROCE_F_READ)
		return COMP_READ_RESPONSE;
	switch (ROCE_AETH_TYPE(p->aeth_syndrome)) {
	case ROCE_AETH_TYPE_ACK:
		return COMP_ACK;
	case ROCE_AETH_TYPE_RNR_NAK:
		return COMP_RNR_NAK;
	case ROCE_AETH_TYPE_NAK:
		return p->aeth_syndrome == ROCE_AETH_NAK_PSN_SEQ ? COMP_SEQ_NAK : COMP_ERR_NAK;
	default:
		return COMP_IGNORE;
	}
}

static void comp_ack(struct qhca_engine *e, struct qhca_qp *qp, const struct roce_pkt *p)
{
	int64_t again = ack_until(qp, p->psn, true);

	qp->retries = qp->rnr_retries = 0;
	if (again >= 0)
		qhca_req_retransmit(e, qp, (uint32_t)again);
}

static void comp_rnr_nak(struct qhca_engine *e, struct qhca_qp *qp, const struct roce_pkt *p)
{
	e->cnt.rnr_naks_received++;
	ack_until(qp, p->psn, false);
	if (qp->rnr_retry != 7 && qp->rnr_retries++ >= qp->rnr_retry) {
		fail_at(qp, p->psn, QHCA_WC_RNR_RETRY_EXC_ERR);
		return;
	}
	qp->rnr_wait = true;
	qhca_qp_set_deadline(e, qp, e->ops->now_ns(e->opaque) +
			     (uint64_t)roce_rnr_timer_us[ROCE_AETH_VALUE(p->aeth_syndrome)] * 1000);
	qhca_timer_update(e);
}

static void comp_seq_nak(struct qhca_engine *e, struct qhca_qp *qp, const struct roce_pkt *p)
{
	e->cnt.naks_received++;
	ack_until(qp, p->psn, false);
	qhca_req_retransmit(e, qp, p->psn);
}

static void comp_err_nak(struct qhca_engine *e, struct qhca_qp *qp, const struct roce_pkt *p)
{
	uint8_t syn = p->aeth_syndrome;

	e->cnt.naks_received++;
	ack_until(qp, p->psn, false);
	fail_at(qp, p->psn, syn == ROCE_AETH_NAK_INV_REQ ? QHCA_WC_REM_INV_REQ_ERR :
			    syn == ROCE_AETH_NAK_REM_ACCESS ? QHCA_WC_REM_ACCESS_ERR :
			    QHCA_WC_REM_OP_ERR);
}

/* READ response data lands in the WQE's buffers, in PSN order; false for a gap, which
 * waits for the timer (nothing else may happen then: no completion, no new timer). */
static bool comp_read_response(struct qhca_engine *e, struct qhca_qp *qp,
			       const struct roce_pkt *p)
{
	struct qhca_send_wqe *sw;
	uint32_t k, want;
	uint64_t off;

	ack_until(qp, p->psn, false);
	sw = oldest(qp);
	if (sw && sw->hdr.opcode == QHCA_WR_ATOMIC_WRITE && p->psn == sw->first_psn) {
		/* Its answer: a READ RESPONSE ONLY without payload. */
		sw->done = true;
		sw->status = (p->opcode & 0x1f) == ROCE_OP_READ_RESPONSE_ONLY && !p->payload_len ?
			     QHCA_WC_SUCCESS : QHCA_WC_BAD_RESP_ERR;
		qp->retries = 0;
		return true;
	}
	if (!sw || sw->hdr.opcode != QHCA_WR_RDMA_READ || p->psn != sw->read_next) {
		e->cnt.roce_rx_out_of_seq++;
		return false;
	}
	k = (uint32_t)qhca_psn_diff(p->psn, sw->first_psn);
	off = (uint64_t)k * qp->mtu;
	want = sw->length - off < qp->mtu ? (uint32_t)(sw->length - off) : qp->mtu;
	if (p->payload_len != want) {
		fail_at(qp, sw->first_psn, QHCA_WC_BAD_RESP_ERR);
	} else if (p->payload_len && qhca_wqe_xfer(e, sw, off, (uint8_t *)p->payload,
						   p->payload_len, true)) {
		fail_at(qp, sw->first_psn, QHCA_WC_LOC_PROT_ERR);
	} else {
		sw->read_next = (sw->read_next + 1) & 0xffffff;
		if (k == sw->npkts - 1) {
			sw->done = true;
			sw->status = QHCA_WC_SUCCESS;
		}
	}
	qp->retries = 0;
	return true;
}

static void comp_atomic_ack(struct qhca_engine *e, struct qhca_qp *qp, const struct roce_pkt *p)
{
	struct qhca_send_wqe *sw;

	ack_until(qp, p->psn, false);
	sw = oldest(qp);
	if (sw && (sw->hdr.opcode == QHCA_WR_ATOMIC_CMP_AND_SWP ||
		   sw->hdr.opcode == QHCA_WR_ATOMIC_FETCH_AND_ADD) && sw->first_psn == p->psn) {
		uint64_t orig = p->atomic_orig;

		sw->done = true;
		sw->status = qhca_wqe_xfer(e, sw, 0, (uint8_t *)&orig, 8, true) ?
			     QHCA_WC_LOC_PROT_ERR : QHCA_WC_SUCCESS;
	}
	qp->retries = 0;
}

void qhca_req_response(struct qhca_engine *e, struct qhca_qp *qp, const struct roce_pkt *p)
{
	enum comp_event ev;

	/* Responses of this QP's service from its peer, to a QP that sends requests. */
	if ((qp->type != QHCA_QPT_RC && qp->type != QHCA_QPT_XRC_INI) ||
	    (p->opcode & ROCE_TS_MASK) != qhca_qp_ts(qp) ||
	    (qp->state != QHCA_QPS_RTS && qp->state != QHCA_QPS_SQD &&
	     qp->state != QHCA_QPS_SQE) ||
	    memcmp(p->sgid, qp->av.dgid, 16)) {
		e->cnt.roce_rx_bad_state++;
		return;
	}
	ev = comp_classify(qp, p);
	qhca_log(e, QHCA_LOG_EVENT, "QP 0x%x: %s PSN 0x%x", qp->qpn, comp_event_names[ev], p->psn);
	switch (ev) {
	case COMP_STALE:
		e->cnt.roce_rx_dup++;
		return;
	case COMP_ACK:
		comp_ack(e, qp, p);
		break;
	case COMP_RNR_NAK:
		comp_rnr_nak(e, qp, p);
		break;
	case COMP_SEQ_NAK:
		comp_seq_nak(e, qp, p);
		break;
	case COMP_ERR_NAK:
		comp_err_nak(e, qp, p);
		break;
	case COMP_READ_RESPONSE:
		if (!comp_read_response(e, qp, p))
			return;
		break;
	case COMP_ATOMIC_ACK:
		comp_atomic_ack(e, qp, p);
		break;
	case COMP_IGNORE:
	case COMP_EVENT_MAX:
		break;
	}
	qhca_comp_ready(e, qp);
	if (qp->state == QHCA_QPS_RTS) {
		if (!qp->rnr_wait)
			qhca_comp_arm_timer(e, qp);
		qhca_req_run(e, qp);
	}
}

void qhca_req_timer(struct qhca_engine *e, struct qhca_qp *qp, uint64_t now)
{
	struct qhca_send_wqe *sw;

	if (now < qp->deadline)
		return;
	qhca_qp_set_deadline(e, qp, UINT64_MAX);
	if (qp->state != QHCA_QPS_RTS && qp->state != QHCA_QPS_SQD)
		return;
	sw = oldest(qp);
	if (!sw)
		return;
	if (qp->rnr_wait) {
		qp->rnr_wait = false;
	} else if (qhca_tx_stopped(e) && qp->tx_idx != qp->sq_next) {
		qhca_comp_arm_timer(e, qp);	/* waiting for the platform to send, nothing lost */
		return;
	} else {
		e->cnt.timeouts++;
		if (qp->retries++ >= qp->retry_cnt) {
			qhca_log(e, QHCA_LOG_EVENT, "QP 0x%x: retry count exceeded", qp->qpn);
			sw->done = true;
			sw->status = QHCA_WC_RETRY_EXC_ERR;
			qhca_comp_ready(e, qp);
			return;
		}
	}
	qhca_req_retransmit(e, qp, sw->hdr.opcode == QHCA_WR_RDMA_READ ? sw->read_next :
				      sw->first_psn);
	qhca_comp_arm_timer(e, qp);
	qhca_loopback_drain(e);
}

void qhca_req_flush(struct qhca_engine *e, struct qhca_qp *qp)
{
	/* Started WQEs from their snapshots, the rest from the ring: all complete flushed. */
	while (qp->sq.ci != qp->sq_next) {
		struct qhca_send_wqe *sw = qhca_sq_slot(qp, qp->sq.ci);

		qhca_sgl_release(&sw->sgl);
		post_send_cqe(e, qp, qp->sq.ci++, sw->hdr.wr_id, sw->hdr.opcode,
			      QHCA_WC_WR_FLUSH_ERR, 0);
	}
	while (qp->sq.ci != qp->sq.pi) {
		struct qhca_sq_wqe w;

		memset(&w, 0, sizeof(w));
		qhca_wq_read(e, &qp->sq, qp->sq.ci, 0, &w, sizeof(w));
		post_send_cqe(e, qp, qp->sq.ci, w.wr_id, w.opcode, QHCA_WC_WR_FLUSH_ERR, 0);
		qp->sq.ci++;
	}
	qp->sq_next = qp->tx_idx = qp->sq.ci;
	qp->rd_atomic_out = 0;
	qhca_qp_set_deadline(e, qp, UINT64_MAX);
	qp->rnr_wait = false;
}

