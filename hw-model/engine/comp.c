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
		if (sw->status == QHCA_WC_SUCCESS && (sw->hdr.flags & QHCA_WQE_READ_INV)) {
			const char *why;

			/* the sink's key (its one SGE, qhca_wqe_load), now that the data
			 * is in, if it still names the region the READ placed into (not
			 * one registered anew meanwhile); a failure completes the READ
			 * with it, as a LOCAL_INV's */
			if (qhca_mr_find(e, sw->sgl.sge[0].lkey) != sw->sgl.mr[0]) {
				sw->status = QHCA_WC_LOC_QP_OP_ERR;
				why = "its key names another region now";
			} else {
				sw->status = qhca_mr_invalidate(e, qp, sw->sgl.sge[0].lkey, false,
								&why);
			}
			if (sw->status != QHCA_WC_SUCCESS)
				qhca_log_guest(e, "QP 0x%x: READ with invalidate of key 0x%x: %s",
					       qp->qpn, sw->sgl.sge[0].lkey, why);
		}
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

/* ---------------------------------------------------------------- the window */
/*
 * An RC requester keeps at most cwnd packets in flight: PSNs from una, the oldest one not
 * yet acknowledged (a READ's: not yet answered), to the next it sends (tx_wqe in req.c).
 * A responder drops everything after a lost packet until that one comes again (one
 * PSN-sequence NAK, then silence: IBA 9.7.5.1), so with go back N every loss costs about
 * the packets in flight after it, sent twice; the window bounds that cost. The losses of
 * an emulated fabric are mostly impairments, not congestion, so the rules aim at go back
 * N's waste, not at sharing a bottleneck:
 * - start at QHCA_CWND_MAX packets, more than the bandwidth-delay product of any path the
 *   device runs on, so that a lossless link runs exactly as without a window;
 * - a loss (a PSN-sequence NAK acted on, a READ response found missing) halves it, down to
 *   QHCA_CWND_MIN; a timeout sets ssthresh to half of it and the window to one packet,
 *   which asks for an ACK (the timer cannot tell a lost ACK from lost data: one packet
 *   answers that), and it grows back from there;
 * - acknowledged progress grows it: below ssthresh by the packets acknowledged (doubling
 *   per round trip, TCP's slow start), above it by one packet per window (additive, so
 *   that under steady loss it stays small where go back N is dear: near QHCA_CWND_MIN at
 *   10% loss, where a loss costs about a window of packets sent twice; a floor of 8
 *   rather than 4 makes fewer losses, hence fewer lost NAKs and timeouts, for ~3% more
 *   packets);
 * - 4 windows (and at least 64 packets) without a loss mean the impairment has stopped or
 *   become rare: ssthresh goes back to QHCA_CWND_MAX and the window doubles per round trip
 *   (8 to 1024 packets within 2 MiB at path MTU 1024), instead of growing by one packet
 *   per round trip for a thousand round trips.
 * AckReq goes on the packet that fills the window (else only the timer would open it) and
 * every half window (req.c ack_interval); the responder's ACKs are cumulative, so a lost
 * one is covered by the next. Duplicate and late NAKs do not rewind twice (comp_seq_nak).
 * The first packet sent again after a NAK or a timeout goes twice: if it were lost, the
 * responder would stay silent until the timeout. Only the timer finds a lost NAK or a
 * lost last packet or ACK (IBA: nothing else follows them).
 */
static uint32_t una_of(struct qhca_qp *qp)
{
	struct qhca_send_wqe *sw = oldest(qp);

	if (!sw)
		return qp->psn;
	if (qhca_wr_is_rd_atomic(sw->hdr.opcode))
		return sw->read_next;
	return qhca_psn_diff(qp->ack_psn, sw->first_psn) > 0 ? qp->ack_psn : sw->first_psn;
}

static void cwnd_grow(struct qhca_qp *qp, uint32_t n)
{
	if (qp->cwnd >= QHCA_CWND_MAX)
		return;		/* the lossless fast path */
	qp->clean += n;
	if (qp->clean >= 4 * qp->cwnd && qp->clean >= 64)
		qp->ssthresh = QHCA_CWND_MAX;
	if (qp->cwnd < qp->ssthresh) {
		qp->cwnd += n;
	} else {
		qp->cwnd_acc += n;
		qp->cwnd += qp->cwnd_acc / qp->cwnd;
		qp->cwnd_acc %= qp->cwnd;
	}
	if (qp->cwnd > QHCA_CWND_MAX)
		qp->cwnd = QHCA_CWND_MAX;
}

static void cwnd_loss(struct qhca_qp *qp, bool timeout)
{
	uint32_t half = qp->cwnd / 2 > QHCA_CWND_MIN ? qp->cwnd / 2 : QHCA_CWND_MIN;

	qp->ssthresh = half;
	qp->cwnd = timeout ? 1 : half;
	qp->cwnd_acc = qp->clean = 0;
}

/* Every request before @psn reached the responder (an ACK of @psn - 1, a NAK of @psn, an
 * answer at @psn). */
static void acked_to(struct qhca_qp *qp, uint32_t psn)
{
	if (qhca_psn_diff(psn, qp->ack_psn) > 0 && qhca_psn_diff(psn, qp->snd_max) <= 0)
		qp->ack_psn = psn;
}

/* SENDs and WRITEs all of whose packets reached the responder are done, also behind a READ
 * or ATOMIC that still waits for its answer (they complete in order behind it). */
static void complete_acked(struct qhca_qp *qp)
{
	uint32_t i;

	for (i = qp->sq.ci; i != qp->sq_next; i++) {
		struct qhca_send_wqe *sw = qhca_sq_slot(qp, i);

		if (qhca_psn_diff(sw->first_psn, qp->ack_psn) >= 0)
			break;
		if (sw->done)
			continue;
		if (qhca_wr_is_rd_atomic(sw->hdr.opcode)) {
			qhca_rd_reached(sw);
		} else if (qhca_psn_diff(sw->last_psn, qp->ack_psn) < 0) {
			sw->done = true;
			sw->status = QHCA_WC_SUCCESS;
		}
	}
}

/* ---------------------------------------------------------------- READ and ATOMIC */
/* What an answer at @x shows of the READs and ATOMICs before it (rdrecov.c): a loss
 * halves the window. */
static void rd_check(struct qhca_qp *qp, uint32_t x)
{
	if (qhca_rd_answered(qp, x))
		cwnd_loss(qp, false);
}

/* The READ or ATOMIC not yet done whose PSNs hold @psn, or NULL; its SQ index in *@idx. */
static struct qhca_send_wqe *rd_at(struct qhca_qp *qp, uint32_t psn, uint32_t *idx)
{
	uint32_t i;

	for (i = qp->sq.ci; i != qp->sq_next; i++) {
		struct qhca_send_wqe *sw = qhca_sq_slot(qp, i);

		if (qhca_psn_diff(psn, sw->first_psn) < 0)
			break;
		if (!sw->done && qhca_wr_is_rd_atomic(sw->hdr.opcode) &&
		    qhca_psn_diff(psn, sw->last_psn) <= 0) {
			*idx = i;
			return sw;
		}
	}
	return NULL;
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

/* Requests up to its PSN arrived: SENDs and WRITEs are done; a READ or ATOMIC before it
 * without its answer lost that answer. A duplicate or reordered ACK changes nothing. */
static void comp_ack(struct qhca_engine *e, struct qhca_qp *qp, const struct roce_pkt *p)
{
	acked_to(qp, (p->psn + 1) & 0xffffff);
	complete_acked(qp);
	rd_check(qp, (p->psn + 1) & 0xffffff);
}

static void comp_rnr_nak(struct qhca_engine *e, struct qhca_qp *qp, const struct roce_pkt *p)
{
	e->cnt.rnr_naks_received++;
	qhca_step(e, "nak qp=0x%x psn=0x%x aeth=RNR_NAK wait_us=%u retries=%u", qp->qpn, p->psn,
		  roce_rnr_timer_us[ROCE_AETH_VALUE(p->aeth_syndrome)], qp->rnr_retries);
	acked_to(qp, p->psn);
	complete_acked(qp);
	rd_check(qp, p->psn);
	if (qp->rnr_wait)
		return;		/* a duplicate: already waiting */
	if (qp->rnr_retry != 7 && qp->rnr_retries++ >= qp->rnr_retry) {
		fail_at(qp, p->psn, QHCA_WC_RNR_RETRY_EXC_ERR);
		return;
	}
	qp->rnr_wait = true;
	qhca_qp_set_deadline(e, qp, e->ops->now_ns(e->opaque) +
			     (uint64_t)roce_rnr_timer_us[ROCE_AETH_VALUE(p->aeth_syndrome)] * 1000);
	qhca_timer_update(e);
}

/*
 * Everything before the NAK's PSN arrived, that one did not: go back to it at once, and
 * halve the window. The responder sends one such NAK per gap, so a second NAK of the PSN
 * last gone back to is a duplicate (the fabric duplicates frames) or a late copy: the
 * resend from there is under way and it changes nothing. A NAK older than what is
 * acknowledged is stale. Only a responder busy with READ responses NAKs the same PSN again
 * (it dropped the resent request, resp.c qhca_resp_pump): its READ responses come first,
 * and a READ response makes the next NAK count again.
 */
static void comp_seq_nak(struct qhca_engine *e, struct qhca_qp *qp, const struct roce_pkt *p)
{
	e->cnt.naks_received++;
	qhca_step(e, "nak qp=0x%x psn=0x%x aeth=NAK_PSN_SEQ", qp->qpn, p->psn);
	if (qhca_psn_diff(p->psn, qp->ack_psn) < 0)
		return;
	acked_to(qp, p->psn);
	complete_acked(qp);
	rd_check(qp, p->psn);
	if (qp->rnr_wait || (qp->rewound && p->psn == qp->rewind_psn))
		return;
	cwnd_loss(qp, false);
	qhca_step(e, "retx qp=0x%x psn=0x%x why=nak", qp->qpn, p->psn);
	qhca_req_retransmit(e, qp, p->psn, true);
	qp->dup = true;
	qp->dup_psn = p->psn;
	qp->rewind_psn = p->psn;
	qp->rewound = true;
}

static void comp_err_nak(struct qhca_engine *e, struct qhca_qp *qp, const struct roce_pkt *p)
{
	uint8_t syn = p->aeth_syndrome;

	e->cnt.naks_received++;
	qhca_step(e, "nak qp=0x%x psn=0x%x aeth=%s", qp->qpn, p->psn, qhca_aeth_name(syn));
	acked_to(qp, p->psn);
	complete_acked(qp);
	fail_at(qp, p->psn, syn == ROCE_AETH_NAK_INV_REQ ? QHCA_WC_REM_INV_REQ_ERR :
			    syn == ROCE_AETH_NAK_REM_ACCESS ? QHCA_WC_REM_ACCESS_ERR :
			    QHCA_WC_REM_OP_ERR);
}

/* READ response data lands in the WQE's buffers where it belongs, also out of order
 * (rdrecov.c, "READ responses"); the READs complete in order. */
static void comp_read_response(struct qhca_engine *e, struct qhca_qp *qp,
			       const struct roce_pkt *p)
{
	enum qhca_read_resp r;
	struct qhca_send_wqe *sw;
	uint32_t k, want, idx;
	bool lost;
	uint64_t off;

	qp->rewound = false;	/* see comp_seq_nak */
	acked_to(qp, p->psn);
	complete_acked(qp);
	rd_check(qp, p->psn);
	sw = rd_at(qp, p->psn, &idx);
	if (sw && sw->hdr.opcode == QHCA_WR_ATOMIC_WRITE) {
		/* Its answer: a READ RESPONSE ONLY without payload. */
		sw->done = true;
		sw->status = (p->opcode & 0x1f) == ROCE_OP_READ_RESPONSE_ONLY && !p->payload_len ?
			     QHCA_WC_SUCCESS : QHCA_WC_BAD_RESP_ERR;
		return;
	}
	if (!sw || sw->hdr.opcode != QHCA_WR_RDMA_READ) {
		e->cnt.roce_rx_out_of_seq++;
		return;
	}
	lost = qhca_read_lost(sw);
	r = qhca_read_response(sw, p->psn);
	if (r == QHCA_READ_DUP) {
		e->cnt.roce_rx_dup++;
	} else if (r == QHCA_READ_FAR) {
		e->cnt.roce_rx_out_of_seq++;	/* too far ahead to keep: asked for again */
	} else {
		k = (uint32_t)qhca_psn_diff(p->psn, sw->first_psn);
		off = (uint64_t)k * sw->mtu;
		want = qhca_pkt_len(sw->length, sw->mtu, k);
		if (k >= sw->npkts || p->payload_len != want) {
			fail_at(qp, sw->first_psn, QHCA_WC_BAD_RESP_ERR);
			return;
		}
		if (p->payload_len && qhca_wqe_xfer(e, sw, off, (uint8_t *)p->payload,
						    p->payload_len, true)) {
			fail_at(qp, sw->first_psn, QHCA_WC_LOC_PROT_ERR);
			return;
		}
		if (r == QHCA_READ_AHEAD)
			e->cnt.roce_rx_out_of_seq++;
		if (qhca_read_placed(sw, p->psn)) {
			sw->done = true;
			sw->status = QHCA_WC_SUCCESS;
			return;
		}
	}
	if (qhca_read_lost(sw)) {
		if (!lost)
			cwnd_loss(qp, false);
		qhca_rd_wake(qp, idx);
	}
}

static void comp_atomic_ack(struct qhca_engine *e, struct qhca_qp *qp, const struct roce_pkt *p)
{
	struct qhca_send_wqe *sw;
	uint32_t idx;

	acked_to(qp, p->psn);
	complete_acked(qp);
	sw = rd_at(qp, p->psn, &idx);
	if (sw && (sw->hdr.opcode == QHCA_WR_ATOMIC_CMP_AND_SWP ||
		   sw->hdr.opcode == QHCA_WR_ATOMIC_FETCH_AND_ADD)) {
		uint64_t orig = p->atomic_orig;

		sw->done = true;
		sw->status = qhca_wqe_xfer(e, sw, 0, (uint8_t *)&orig, 8, true) ?
			     QHCA_WC_LOC_PROT_ERR : QHCA_WC_SUCCESS;
	}
	rd_check(qp, p->psn);
}

/* The window follows what the response acknowledged (see "the window"). */
static void comp_progress(struct qhca_qp *qp, enum comp_event ev)
{
	uint32_t una = una_of(qp);
	int32_t n = qhca_psn_diff(una, qp->una);

	if (n <= 0)
		return;
	qp->una = una;
	cwnd_grow(qp, (uint32_t)n);
	qp->retries = 0;
	if (ev != COMP_RNR_NAK)
		qp->rnr_retries = 0;
}

void qhca_comp_response(struct qhca_engine *e, struct qhca_qp *qp, const struct roce_pkt *p)
{
	uint32_t una = qp->una;
	enum comp_event ev;

	/* Responses of this QP's service from its peer, to a QP that sends requests. */
	if ((qp->type != QHCA_QPT_RC && qp->type != QHCA_QPT_XRC_INI) ||
	    (p->opcode & ROCE_TS_MASK) != qhca_qp_ts(qp) ||
	    (qp->state != QHCA_QPS_RTS && qp->state != QHCA_QPS_SQD &&
	     qp->state != QHCA_QPS_SQE) ||
	    !qhca_from_peer(qp, p)) {
		e->cnt.roce_rx_bad_state++;
		qhca_step(e, "drop qp=0x%x psn=0x%x why=\"a response the QP does not take in state "
			  "%s\"", qp->qpn, p->psn, qhca_qp_state_name(qp->state));
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
		comp_read_response(e, qp, p);
		break;
	case COMP_ATOMIC_ACK:
		comp_atomic_ack(e, qp, p);
		break;
	case COMP_IGNORE:
	case COMP_EVENT_MAX:
		break;
	}
	qhca_comp_ready(e, qp);
	comp_progress(qp, ev);
	/* In SQD too: a started message goes on as the window opens. */
	if (qp->state == QHCA_QPS_RTS || qp->state == QHCA_QPS_SQD) {
		/* The timer restarts on progress only: answers that move nothing (duplicates,
		 * responses after a loss) must not put off the recovery they may need. */
		if (!qp->rnr_wait && (qp->una != una || qp->deadline == UINT64_MAX))
			qhca_comp_arm_timer(e, qp);
		qhca_req_run(e, qp);
	}
}

/*
 * The timer: nothing moved for the QP's timeout. Send again from the oldest PSN not
 * acknowledged (a READ: the responses missing), a window of one packet that asks for an
 * ACK (sent twice): if only the ACK was lost, that packet's ACK moves everything on, and
 * if data was lost the window grows back from there.
 */
void qhca_comp_timer(struct qhca_engine *e, struct qhca_qp *qp, uint64_t now)
{
	struct qhca_send_wqe *sw;
	bool rnr = false;

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
		rnr = true;	/* the head was not lost: the receiver was not ready */
	} else if (qhca_tx_stopped(e) && qp->tx_idx != qp->sq_next) {
		qhca_comp_arm_timer(e, qp);	/* waiting for the platform to send, nothing lost */
		return;
	} else if (qhca_req_deferred(e, qp) && qp->tx_idx != qp->sq_next) {
		/* Waiting for its turn after a budget (req.c), nothing lost: however long the
		 * line, no timeout counts; its turn sends and starts the timer anew
		 * (qhca_req_run). */
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
		cwnd_loss(qp, true);
		qp->probe = true;
	}
	qp->una = una_of(qp);
	qhca_step(e, "retx qp=0x%x psn=0x%x why=%s retries=%u", qp->qpn, qp->una,
		  rnr ? "rnr" : "timeout", rnr ? qp->rnr_retries : qp->retries);
	qhca_req_retransmit(e, qp, qp->una, false);
	qp->dup = !rnr;		/* an RNR retry once: two copies would draw two RNR NAKs */
	qp->dup_psn = qp->una;
	qhca_comp_arm_timer(e, qp);
	qhca_req_run(e, qp);
}

void qhca_comp_flush(struct qhca_engine *e, struct qhca_qp *qp)
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

