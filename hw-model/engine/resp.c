// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * qhca responder: incoming requests on RC, UC, UD and XRC target QPs (IBA 9.7.5 for RC,
 * 9.8 for UC, 9.8.4 for UD, annex A14 for XRC). Checks the PSN, the opcode sequence, keys,
 * access rights and bounds, moves the data, consumes receive WQEs, answers with ACKs,
 * NAKs, READ responses and ATOMIC acknowledgements, and keeps executed READ/ATOMIC
 * requests to answer duplicates.
 */
#include <string.h>

#include "engine_internal.h"

#define GRH_LEN			40
#define GSI_QKEY		0x80010000u

/* The RDMA WRITE in progress ends: drop its region. */
static void write_end(struct qhca_qp *qp)
{
	if (qp->write_mr)
		qhca_mr_put(qp->write_mr);
	qp->write_mr = NULL;
	qp->write_active = false;
}

/* The READ responses in progress end: drop their region. */
static void read_end(struct qhca_qp *qp)
{
	if (qp->rr.mr)
		qhca_mr_put(qp->rr.mr);
	qp->rr.mr = NULL;
	qp->rr.active = false;
}

/* Forget every message in progress and drop what it held (RESET or destroy). */
void qhca_resp_reset(struct qhca_engine *e, struct qhca_qp *qp)
{
	qp->msn = 0;
	qp->nak_sent = false;
	qhca_recv_drop(qp);
	write_end(qp);
	qp->drop_msg = false;
	memset(qp->rd, 0, sizeof(qp->rd));
	qp->rd_next = 0;
	read_end(qp);
	memset(&qp->rr, 0, sizeof(qp->rr));
}

static void resp_pkt(struct qhca_qp *qp, struct roce_pkt *r, uint8_t opcode, uint32_t psn)
{
	memset(r, 0, sizeof(*r));
	r->opcode = qhca_qp_ts(qp) | opcode;
	r->psn = psn & 0xffffff;
	r->dqpn = qp->dest_qpn;
	r->pkey = ROCE_DEFAULT_PKEY;
	r->aeth_syndrome = ROCE_AETH_ACK;
	r->aeth_msn = qp->msn & 0xffffff;
}

static void send_aeth(struct qhca_engine *e, struct qhca_qp *qp, uint32_t psn, uint8_t syndrome)
{
	struct roce_pkt r;

	resp_pkt(qp, &r, ROCE_OP_ACKNOWLEDGE, psn);
	r.aeth_syndrome = syndrome;
	if (syndrome != ROCE_AETH_ACK) {
		e->cnt.naks_sent++;
		if (ROCE_AETH_TYPE(syndrome) == ROCE_AETH_TYPE_RNR_NAK)
			e->cnt.rnr_naks_sent++;
	}
	qhca_xmit_pkt(e, qp, &r);
}

/* A fatal request error: NAK it (RC) and take the QP to the error state. */
static void resp_error(struct qhca_engine *e, struct qhca_qp *qp, const struct roce_pkt *p,
		       uint8_t syndrome, uint8_t event, const char *why)
{
	qhca_log_guest(e, "QP 0x%x: request PSN 0x%x (%s) refused: %s", qp->qpn, p->psn,
		       roce_opcode_info(p->opcode)->name, why);
	if (syndrome == ROCE_AETH_NAK_REM_ACCESS)
		e->cnt.remote_access_errors++;
	if (qhca_qp_reliable(qp))
		send_aeth(e, qp, p->psn, syndrome);
	qhca_qp_error(e, qp, event);
}

/* Scatter @len bytes into the receive WQE's SGEs at message offset @off; -2: too long. */
static int recv_scatter(struct qhca_engine *e, const struct qhca_recv_ctx *rc, uint64_t off,
			const uint8_t *data, uint32_t len)
{
	return qhca_sgl_xfer(e, &rc->sgl, off, (uint8_t *)data, len, true);
}

/* ---------------------------------------------------------------- UD */
static void resp_ud(struct qhca_engine *e, struct qhca_qp *qp, const struct roce_pkt *p)
{
	uint8_t grh[GRH_LEN];
	struct qhca_recv_ctx rc;
	uint32_t qkey = qp->type == QHCA_QPT_GSI ? GSI_QKEY : qp->qkey;
	int r;

	if ((p->opcode & ROCE_TS_MASK) != ROCE_TS_UD) {
		e->cnt.roce_rx_bad_state++;
		return;
	}
	if (p->deth_qkey != qkey && qp->type != QHCA_QPT_SMI) {	/* QP0: no Q_Key check */
		e->cnt.roce_rx_bad_qkey++;
		return;
	}
	if (p->payload_len > qp->mtu) {
		e->cnt.roce_rx_bad_state++;
		return;
	}
	r = qhca_recv_take(e, qp, &rc);
	if (r == -1) {
		/* UD has no RNR: with no receive posted the datagram is dropped. */
		e->cnt.roce_rx_no_wqe++;
		qhca_log(e, QHCA_LOG_EVENT, "QP 0x%x: datagram dropped, no receive WQE", qp->qpn);
		return;
	}
	if (r < 0) {
		qhca_recv_complete(e, qp, &rc, QHCA_WC_LOC_PROT_ERR, QHCA_WC_RECV, 0, 0, 0, p,
				   false);
		qhca_qp_error(e, qp, QHCA_EVENT_QP_FATAL);
		return;
	}
	/* The first 40 bytes get the GRH: the IPv6 header, or the IPv4 header in its last 20. */
	memset(grh, 0, sizeof(grh));
	if (p->ipv6)
		memcpy(grh, p->l3, GRH_LEN);
	else if (!p->ib)
		memcpy(grh + 20, p->l3, 20);
	/* else an InfiniBand packet without a GRH: the area is left zero, no GRH flag */
	if (rc.sgl.length < GRH_LEN + p->payload_len ||
	    recv_scatter(e, &rc, 0, grh, GRH_LEN) ||
	    recv_scatter(e, &rc, GRH_LEN, p->payload, p->payload_len)) {
		qhca_recv_complete(e, qp, &rc, QHCA_WC_LOC_LEN_ERR, QHCA_WC_RECV, 0, 0, 0, p,
				   false);
		return;		/* a UD QP does not go to the error state for this */
	}
	qhca_recv_complete(e, qp, &rc, QHCA_WC_SUCCESS, QHCA_WC_RECV, GRH_LEN + p->payload_len,
			   p->imm, (roce_opcode_info(p->opcode)->flags & ROCE_F_IMMDT) ?
			   QHCA_CQE_FLAG_IMM : 0, p, p->se);
}

/* ---------------------------------------------------------------- READ and ATOMIC */
/*
 * Send the READ responses due, while the transmit path takes them; true when all are out.
 * The region is checked again on every call (it may have been deregistered meanwhile).
 * Requests that came in while responses waited were dropped: a sequence NAK for the
 * expected PSN makes the requester send them again (IBA 9.7.5.2.1).
 */
bool qhca_resp_pump(struct qhca_engine *e, struct qhca_qp *qp)
{
	struct qhca_mr *mr = qp->rr.mr;
	uint8_t *data;
	struct roce_pkt r;

	if (!qp->rr.active)
		return true;
	if (qp->state < QHCA_QPS_RTR || qp->state == QHCA_QPS_ERR ||
	    (mr && !qhca_mr_usable(mr))) {
		/* The region went away under the READ: the requester times out, asks again
		 * and gets a NAK (resp_duplicate checks the region anew). */
		read_end(qp);
		return true;
	}
	while (qp->rr.k < qp->rr.n) {
		uint32_t k = qp->rr.k, n = qp->rr.n;
		uint64_t off = (uint64_t)k * qp->rr.mtu;
		uint32_t chunk = qhca_pkt_len(qp->rr.len, qp->rr.mtu, k);
		uint8_t op = n == 1 ? ROCE_OP_READ_RESPONSE_ONLY :
			     k == 0 ? ROCE_OP_READ_RESPONSE_FIRST :
			     k == n - 1 ? ROCE_OP_READ_RESPONSE_LAST : ROCE_OP_READ_RESPONSE_MIDDLE;

		if (e->tx_blocked || e->loop_blocked) {
			qhca_tx_wait(e, qp);
			return false;
		}
		/* gathered straight into the frame */
		data = qhca_tx_payload(e, &qp->av, qhca_qp_ts(qp) | op);
		if (chunk && qhca_mr_xfer(e, mr, qp->rr.va + off, data, chunk, false)) {
			qhca_log_guest(e, "QP 0x%x: READ source unreadable", qp->qpn);
			break;
		}
		resp_pkt(qp, &r, op, qp->rr.psn + k);
		r.payload = data;
		r.payload_len = chunk;
		qhca_xmit_pkt(e, qp, &r);
		qp->rr.k++;
	}
	read_end(qp);
	if (qp->rr.dropped) {
		qp->rr.dropped = false;
		qp->nak_sent = true;
		send_aeth(e, qp, qp->epsn, ROCE_AETH_NAK_PSN_SEQ);
	}
	return true;
}

static uint32_t read_npkts(struct qhca_qp *qp, uint32_t len)
{
	return len ? (len + qp->mtu - 1) / qp->mtu : 1;
}

/* Answer a READ of [va, va + len) through @mr (checked; NULL for 0 bytes) from response
 * PSN @psn on. */
static void send_read_responses(struct qhca_engine *e, struct qhca_qp *qp, struct qhca_mr *mr,
				uint64_t va, uint32_t len, uint32_t psn)
{
	read_end(qp);
	qp->rr.active = true;
	qp->rr.mr = mr ? qhca_mr_get(mr) : NULL;
	qp->rr.va = va;
	qp->rr.len = len;
	qp->rr.psn = psn;
	qp->rr.k = 0;
	qp->rr.mtu = qp->mtu;
	qp->rr.n = read_npkts(qp, len);
	qhca_resp_pump(e, qp);
}

static struct qhca_rd_atomic *rd_slot(struct qhca_qp *qp)
{
	uint32_t n = qp->max_dest_rd_atomic ? qp->max_dest_rd_atomic : 1;

	return &qp->rd[qp->rd_next++ % n];
}

static void resp_read(struct qhca_engine *e, struct qhca_qp *qp, const struct roce_pkt *p)
{
	struct qhca_rd_atomic *rd;
	struct qhca_mr *mr = NULL;
	const char *why = NULL;
	uint32_t n = read_npkts(qp, p->reth_len);

	if (!qp->max_dest_rd_atomic) {
		resp_error(e, qp, p, ROCE_AETH_NAK_INV_REQ, QHCA_EVENT_QP_REQ_ERR, "no responder resources");
		return;
	}
	if (!(qp->access & QHCA_ACCESS_REMOTE_READ) ||
	    (p->reth_len && !(mr = qhca_rkey_check(e, qp, p->reth_rkey, p->reth_va, p->reth_len,
						 QHCA_ACCESS_REMOTE_READ, &why)))) {
		resp_error(e, qp, p, ROCE_AETH_NAK_REM_ACCESS, QHCA_EVENT_QP_ACCESS_ERR,
			   why ? why : "QP without remote read");
		return;
	}
	if (p->reth_len > 0x80000000u) {
		resp_error(e, qp, p, ROCE_AETH_NAK_INV_REQ, QHCA_EVENT_QP_REQ_ERR, "READ too long");
		return;
	}
	rd = rd_slot(qp);
	rd->valid = true;
	rd->opcode = ROCE_OP_READ_REQUEST;
	rd->psn = p->psn;
	rd->last_psn = (p->psn + n - 1) & 0xffffff;
	rd->va = p->reth_va;
	rd->rkey = p->reth_rkey;
	rd->len = p->reth_len;
	qp->epsn = (p->psn + n) & 0xffffff;
	qp->msn++;
	send_read_responses(e, qp, mr, p->reth_va, p->reth_len, p->psn);
}

static void send_atomic_ack(struct qhca_engine *e, struct qhca_qp *qp, uint32_t psn,
			    uint64_t orig)
{
	struct roce_pkt r;

	resp_pkt(qp, &r, ROCE_OP_ATOMIC_ACKNOWLEDGE, psn);
	r.atomic_orig = orig;
	qhca_xmit_pkt(e, qp, &r);
}

static void resp_atomic(struct qhca_engine *e, struct qhca_qp *qp, const struct roce_pkt *p)
{
	struct qhca_rd_atomic *rd;
	struct qhca_mr *mr;
	const char *why = "QP without remote atomic";
	uint64_t orig, val;

	if (!qp->max_dest_rd_atomic || p->atomic_va % 8) {
		resp_error(e, qp, p, ROCE_AETH_NAK_INV_REQ, QHCA_EVENT_QP_REQ_ERR,
			   "no responder resources or misaligned atomic");
		return;
	}
	if (!(qp->access & QHCA_ACCESS_REMOTE_ATOMIC) ||
	    !(mr = qhca_rkey_check(e, qp, p->atomic_rkey, p->atomic_va, 8,
				 QHCA_ACCESS_REMOTE_ATOMIC, &why)) ||
	    qhca_mr_xfer(e, mr, p->atomic_va, &orig, 8, false)) {
		resp_error(e, qp, p, ROCE_AETH_NAK_REM_ACCESS, QHCA_EVENT_QP_ACCESS_ERR, why);
		return;
	}
	/* Atomic with respect to this device: it runs to completion under one lock. */
	if ((p->opcode & 0x1f) == ROCE_OP_COMPARE_SWAP)
		val = orig == p->atomic_compare ? p->atomic_swap_add : orig;
	else
		val = orig + p->atomic_swap_add;
	if (qhca_mr_xfer(e, mr, p->atomic_va, &val, 8, true)) {
		resp_error(e, qp, p, ROCE_AETH_NAK_REM_OP, QHCA_EVENT_QP_FATAL, "atomic target unwritable");
		return;
	}
	rd = rd_slot(qp);
	rd->valid = true;
	rd->opcode = p->opcode & 0x1f;
	rd->psn = rd->last_psn = p->psn;
	rd->orig = orig;
	qp->epsn = (p->psn + 1) & 0xffffff;
	qp->msn++;
	send_atomic_ack(e, qp, p->psn, orig);
}

/*
 * ATOMIC WRITE (IBA 1.5): 8 bytes written at once, with remote write rights, and answered
 * like a READ (a READ RESPONSE ONLY without payload, from a responder resource) so that
 * the requester completes it only once it is placed.
 */
static void resp_atomic_write(struct qhca_engine *e, struct qhca_qp *qp, const struct roce_pkt *p)
{
	struct qhca_rd_atomic *rd;
	struct qhca_mr *mr;
	const char *why = "QP without remote write";

	if (!qp->max_dest_rd_atomic || p->reth_va % 8 || p->reth_len != 8 || p->payload_len != 8) {
		resp_error(e, qp, p, ROCE_AETH_NAK_INV_REQ, QHCA_EVENT_QP_REQ_ERR,
			   "no responder resources or a malformed ATOMIC WRITE");
		return;
	}
	if (!(qp->access & QHCA_ACCESS_REMOTE_WRITE) ||
	    !(mr = qhca_rkey_check(e, qp, p->reth_rkey, p->reth_va, 8, QHCA_ACCESS_REMOTE_WRITE,
				   &why))) {
		resp_error(e, qp, p, ROCE_AETH_NAK_REM_ACCESS, QHCA_EVENT_QP_ACCESS_ERR, why);
		return;
	}
	if (qhca_mr_xfer(e, mr, p->reth_va, (void *)p->payload, 8, true)) {
		resp_error(e, qp, p, ROCE_AETH_NAK_REM_OP, QHCA_EVENT_QP_FATAL,
			   "ATOMIC WRITE target unwritable");
		return;
	}
	rd = rd_slot(qp);
	rd->valid = true;
	rd->opcode = ROCE_OP_ATOMIC_WRITE;
	rd->psn = rd->last_psn = p->psn;
	qp->epsn = (p->psn + 1) & 0xffffff;
	qp->msn++;
	send_read_responses(e, qp, NULL, 0, 0, p->psn);
}

/* A request with a PSN we already passed (IBA 9.7.5.1.2): answer it without redoing it. */
static void resp_duplicate(struct qhca_engine *e, struct qhca_qp *qp, const struct roce_pkt *p)
{
	const struct roce_opcode_info *oi = roce_opcode_info(p->opcode);
	uint32_t i;

	e->cnt.roce_rx_dup++;
	if (oi->flags & (ROCE_F_READ | ROCE_F_ATOMIC | ROCE_F_ATOMIC_WRITE)) {
		for (i = 0; i < QHCA_MAX_RD_ATOMIC; i++) {
			struct qhca_rd_atomic *rd = &qp->rd[i];

			if (!rd->valid || qhca_psn_diff(p->psn, rd->psn) < 0 ||
			    qhca_psn_diff(p->psn, rd->last_psn) > 0)
				continue;
			if (rd->opcode == ROCE_OP_READ_REQUEST && (oi->flags & ROCE_F_READ)) {
				/* Re-read from the PSN asked for: the request may be a restart.
				 * Its range is checked again (the region may be gone). */
				struct qhca_mr *mr = NULL;
				const char *why;

				if (p->reth_len && !(mr = qhca_rkey_check(e, qp, p->reth_rkey,
									p->reth_va, p->reth_len,
									QHCA_ACCESS_REMOTE_READ,
									&why))) {
					resp_error(e, qp, p, ROCE_AETH_NAK_REM_ACCESS,
						   QHCA_EVENT_QP_ACCESS_ERR, why);
					return;
				}
				send_read_responses(e, qp, mr, p->reth_va, p->reth_len, p->psn);
			} else if (rd->psn == p->psn && rd->opcode == ROCE_OP_ATOMIC_WRITE &&
				   (oi->flags & ROCE_F_ATOMIC_WRITE)) {
				send_read_responses(e, qp, NULL, 0, 0, p->psn);	/* not redone */
			} else if (rd->psn == p->psn && (oi->flags & ROCE_F_ATOMIC) &&
				   rd->opcode != ROCE_OP_ATOMIC_WRITE) {
				send_atomic_ack(e, qp, p->psn, rd->orig);	/* never redone */
			}
			return;
		}
		return;
	}
	if (p->ackreq)
		send_aeth(e, qp, (qp->epsn - 1) & 0xffffff, ROCE_AETH_ACK);
}

/* ---------------------------------------------------------------- SEND and WRITE */
static bool recv_ready(struct qhca_engine *e, struct qhca_qp *qp, const struct roce_pkt *p)
{
	int r;

	if (qp->recv.active)
		return true;
	r = qhca_recv_take(e, qp, &qp->recv);
	if (r == -1) {
		qhca_step(e, "rnr qp=0x%x psn=0x%x timer=%u", qp->qpn, p->psn, qp->min_rnr_timer);
		/* Receiver not ready: RNR NAK with the QP's timer, the PSN is not consumed.
		 * The requests behind it are dropped without a word, as after any NAK: the
		 * requester sends them again after the timer (IBA 9.7.5.2.8). */
		if (qhca_qp_reliable(qp)) {
			send_aeth(e, qp, p->psn, ROCE_AETH_RNR_NAK(qp->min_rnr_timer));
			qp->nak_sent = true;
		} else
			qp->drop_msg = true;
		return false;
	}
	if (r < 0) {
		qhca_recv_complete(e, qp, &qp->recv, QHCA_WC_LOC_PROT_ERR, QHCA_WC_RECV, 0, 0, 0,
				   NULL, false);
		resp_error(e, qp, p, ROCE_AETH_NAK_REM_OP, QHCA_EVENT_QP_FATAL, "bad receive WQE");
		return false;
	}
	qp->recv.offset = 0;
	return true;
}

static void resp_send(struct qhca_engine *e, struct qhca_qp *qp, const struct roce_pkt *p,
		      uint32_t f)
{
	uint8_t cflags = 0;
	uint32_t imm = 0;
	int r;

	if ((f & ROCE_F_FIRST) && !recv_ready(e, qp, p))
		return;
	r = recv_scatter(e, &qp->recv, qp->recv.offset, p->payload, p->payload_len);
	if (r) {
		qhca_recv_complete(e, qp, &qp->recv, r == -2 ? QHCA_WC_LOC_LEN_ERR :
				   QHCA_WC_LOC_PROT_ERR, QHCA_WC_RECV, 0, 0, 0, NULL, false);
		resp_error(e, qp, p, r == -2 ? ROCE_AETH_NAK_INV_REQ : ROCE_AETH_NAK_REM_OP,
			   QHCA_EVENT_QP_FATAL, "message does not fit the receive WQE");
		return;
	}
	qp->recv.offset += p->payload_len;
	qp->epsn = (p->psn + 1) & 0xffffff;
	if (f & ROCE_F_LAST) {
		if (f & ROCE_F_IMMDT) {
			cflags = QHCA_CQE_FLAG_IMM;
			imm = p->imm;
		} else if (f & ROCE_F_IETH) {
			const char *why;

			/* A fast-register region or type 2 window of this QP's PD. */
			if (qhca_mr_invalidate(e, qp, p->ieth_rkey, true, &why) != QHCA_WC_SUCCESS) {
				qhca_recv_complete(e, qp, &qp->recv, QHCA_WC_REM_INV_REQ_ERR,
						   QHCA_WC_RECV, 0, 0, 0, NULL, false);
				qhca_log_guest(e, "QP 0x%x: SEND_WITH_INV of key 0x%x: %s", qp->qpn,
					       p->ieth_rkey, why);
				resp_error(e, qp, p, ROCE_AETH_NAK_INV_REQ, QHCA_EVENT_QP_REQ_ERR,
					   "SEND_WITH_INV of a key it may not invalidate");
				return;
			}
			cflags = QHCA_CQE_FLAG_INV;
			imm = p->ieth_rkey;
		}
		qp->msn++;
		qhca_recv_complete(e, qp, &qp->recv, QHCA_WC_SUCCESS, QHCA_WC_RECV,
				   (uint32_t)qp->recv.offset, imm, cflags, p, p->se);
	}
	if (qhca_qp_reliable(qp) && p->ackreq)
		send_aeth(e, qp, p->psn, ROCE_AETH_ACK);
}

static void resp_write(struct qhca_engine *e, struct qhca_qp *qp, const struct roce_pkt *p,
		       uint32_t f)
{
	const char *why = "QP without remote write";

	if (f & ROCE_F_FIRST) {
		struct qhca_mr *mr = NULL;

		write_end(qp);
		if (!(qp->access & QHCA_ACCESS_REMOTE_WRITE) ||
		    (p->reth_len && !(mr = qhca_rkey_check(e, qp, p->reth_rkey, p->reth_va,
							 p->reth_len, QHCA_ACCESS_REMOTE_WRITE,
							 &why)))) {
			if (qp->type == QHCA_QPT_UC) {
				/* UC: the message is dropped silently (IBA 9.9.3), the QP lives. */
				qhca_log_guest(e, "QP 0x%x: UC WRITE PSN 0x%x dropped: %s",
					       qp->qpn, p->psn, why);
				e->cnt.remote_access_errors++;
				qp->drop_msg = true;
				qp->epsn = (p->psn + 1) & 0xffffff;
				return;
			}
			resp_error(e, qp, p, ROCE_AETH_NAK_REM_ACCESS, QHCA_EVENT_QP_ACCESS_ERR, why);
			return;
		}
		qp->write_mr = mr ? qhca_mr_get(mr) : NULL;
		qp->write_va = p->reth_va;
		qp->write_left = qp->write_total = p->reth_len;
		qp->write_active = true;
	}
	/* Every packet but the last carries exactly one MTU; nothing past the RETH length. */
	if (p->payload_len > qp->write_left || (!(f & ROCE_F_LAST) && p->payload_len != qp->mtu) ||
	    ((f & ROCE_F_LAST) && p->payload_len != qp->write_left)) {
		resp_error(e, qp, p, ROCE_AETH_NAK_INV_REQ, QHCA_EVENT_QP_REQ_ERR,
			   "RDMA WRITE length disagrees with its RETH");
		return;
	}
	/* WRITE with immediate needs a receive WQE: check before touching memory. */
	if ((f & ROCE_F_IMMDT) && !recv_ready(e, qp, p))
		return;
	if (p->payload_len && !qhca_mr_usable(qp->write_mr)) {
		/* Deregistered or invalidated between the packets of the message. */
		resp_error(e, qp, p, ROCE_AETH_NAK_REM_ACCESS, QHCA_EVENT_QP_ACCESS_ERR,
			   "write target went away");
		return;
	}
	if (p->payload_len &&
	    qhca_mr_xfer(e, qp->write_mr, qp->write_va, (void *)p->payload, p->payload_len, true)) {
		resp_error(e, qp, p, ROCE_AETH_NAK_REM_OP, QHCA_EVENT_QP_FATAL, "write target unwritable");
		return;
	}
	qp->write_va += p->payload_len;
	qp->write_left -= p->payload_len;
	qp->epsn = (p->psn + 1) & 0xffffff;
	if (f & ROCE_F_LAST) {
		write_end(qp);
		qp->msn++;
		if (f & ROCE_F_IMMDT)
			qhca_recv_complete(e, qp, &qp->recv, QHCA_WC_SUCCESS,
					   QHCA_WC_RECV_RDMA_WITH_IMM, (uint32_t)qp->write_total,
					   p->imm, QHCA_CQE_FLAG_IMM, p, p->se);
	}
	if (qhca_qp_reliable(qp) && p->ackreq)
		send_aeth(e, qp, p->psn, ROCE_AETH_ACK);
}

/* ---------------------------------------------------------------- entry */
static void resp_connected(struct qhca_engine *e, struct qhca_qp *qp, const struct roce_pkt *p);

void qhca_resp_request(struct qhca_engine *e, struct qhca_qp *qp, const struct roce_pkt *p)
{
	struct qhca_srq *srq;

	if (qp->state < QHCA_QPS_RTR || qp->state == QHCA_QPS_ERR) {
		e->cnt.roce_rx_bad_state++;
		qhca_step(e, "drop qp=0x%x psn=0x%x why=\"QP in state %s: takes no request\"",
			  qp->qpn, p->psn, qhca_qp_state_name(qp->state));
		return;
	}
	if (qhca_qp_datagram(qp)) {
		resp_ud(e, qp, p);
		return;
	}
	/* Requests of this QP's service from its peer; an XRC_INI QP takes none. */
	if ((p->opcode & ROCE_TS_MASK) != qhca_qp_ts(qp) || qp->type == QHCA_QPT_XRC_INI ||
	    !qhca_from_peer(qp, p)) {
		e->cnt.roce_rx_bad_state++;
		qhca_step(e, "drop qp=0x%x psn=0x%x why=\"not from the QP's peer, or not its "
			  "service\"", qp->qpn, p->psn);
		return;
	}
	if (qp->type != QHCA_QPT_XRC_TGT) {
		resp_connected(e, qp, p);
		return;
	}
	/* XRC: the SRQ the request names gives the receive WQE, the CQ and the PD; it must be
	 * of the target's domain (annex A14: otherwise the request is invalid). */
	srq = qhca_xrc_srq_find(e, p->xrc_srqn);
	qp->xrc_srq = srq && srq->xrcd == qp->xrcd ? srq : NULL;
	/* Out of order, it gets the sequence checks (without an SRQ, no key matches). */
	if (!qp->xrc_srq && qhca_psn_diff(p->psn, qp->epsn) == 0) {
		qhca_log_guest(e, "QP 0x%x: XRC SRQ number 0x%x: %s", qp->qpn, p->xrc_srqn,
			       srq ? "of another domain" : "no such XRC SRQ");
		resp_error(e, qp, p, ROCE_AETH_NAK_INV_REQ, QHCA_EVENT_QP_REQ_ERR,
			   "invalid XRCETH");
	} else
		resp_connected(e, qp, p);
	qp->xrc_srq = NULL;
}

/* A request to a connected QP (RC, UC, XRC_TGT) from its peer. */
static void resp_connected(struct qhca_engine *e, struct qhca_qp *qp, const struct roce_pkt *p)
{
	const struct roce_opcode_info *oi = roce_opcode_info(p->opcode);
	uint32_t f = oi->flags;
	int32_t d;

	if (qp->rr.active && !qhca_resp_pump(e, qp)) {
		/* Still answering a READ: this request waits for the sequence NAK. */
		qp->rr.dropped = true;
		e->cnt.roce_rx_busy++;
		qhca_step(e, "seq qp=0x%x psn=0x%x expected=0x%x what=busy", qp->qpn, p->psn,
			  qp->epsn);
		return;
	}
	d = qhca_psn_diff(p->psn, qp->epsn);
	if (d)
		qhca_step(e, "seq qp=0x%x psn=0x%x expected=0x%x what=%s", qp->qpn, p->psn, qp->epsn,
			  d < 0 ? "duplicate" : qp->type == QHCA_QPT_UC ? "gap-uc" :
			  qp->nak_sent ? "gap-naked" : "gap");
	if (qp->type == QHCA_QPT_UC) {
		/* UC (IBA 9.8.3): a gap loses the message in progress; start over at a FIRST. */
		if (d != 0) {
			e->cnt.roce_rx_out_of_seq++;
			qp->drop_msg = true;
			qp->epsn = p->psn;
		}
		if (qp->drop_msg) {
			if (!(f & ROCE_F_FIRST)) {
				qp->epsn = (p->psn + 1) & 0xffffff;
				return;
			}
			qp->drop_msg = false;
			write_end(qp);
			if (qp->recv.active)
				qp->recv.offset = 0;	/* reuse the WQE for the next message */
		}
	} else if (d < 0) {
		resp_duplicate(e, qp, p);
		return;
	} else if (d > 0) {
		e->cnt.roce_rx_out_of_seq++;
		if (!qp->nak_sent) {
			qp->nak_sent = true;
			send_aeth(e, qp, qp->epsn, ROCE_AETH_NAK_PSN_SEQ);
		}
		return;
	}
	qp->nak_sent = false;

	/* The opcode must continue the message in progress, or start a new one (9.7.5.1.3). */
	if (((f & ROCE_F_SEND) && !(f & ROCE_F_FIRST) && (!qp->recv.active || qp->write_active)) ||
	    ((f & ROCE_F_WRITE) && !(f & ROCE_F_FIRST) && !qp->write_active) ||
	    ((f & ROCE_F_FIRST) && (qp->write_active || (qp->recv.active && qp->recv.offset)))) {
		if (qp->type == QHCA_QPT_UC) {
			qp->drop_msg = true;
			return;
		}
		resp_error(e, qp, p, ROCE_AETH_NAK_INV_REQ, QHCA_EVENT_QP_REQ_ERR, "opcode out of sequence");
		return;
	}
	if (f & ROCE_F_SEND)
		resp_send(e, qp, p, f);
	else if (f & ROCE_F_WRITE)
		resp_write(e, qp, p, f);
	else if (f & ROCE_F_READ)
		resp_read(e, qp, p);
	else if (f & ROCE_F_ATOMIC)
		resp_atomic(e, qp, p);
	else if (f & ROCE_F_ATOMIC_WRITE)
		resp_atomic_write(e, qp, p);
}
