// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * qhca requester (IBA 9.7.4 for RC, 9.8 for UC and UD): send WQEs are read and checked
 * into snapshots the guest cannot change, split into packets of the path MTU with their
 * PSNs and sent in order, from a cursor per WQE so that the platform can push back between
 * any two packets; on RC, within a window of packets in flight (comp.c, "the window"), and
 * go-back-N retransmission moves those cursors back. READs ask for lost responses only.
 */
#include <stdlib.h>
#include <string.h>

#include "engine_internal.h"

bool qhca_wr_allowed(uint8_t type, uint8_t op)
{
	if (type == QHCA_QPT_XRC_INI)
		type = QHCA_QPT_RC;	/* XRC sends what RC does */
	switch (op) {
	case QHCA_WR_SEND:
	case QHCA_WR_SEND_WITH_IMM:
		return true;
	case QHCA_WR_RDMA_WRITE:
	case QHCA_WR_RDMA_WRITE_WITH_IMM:
		return type == QHCA_QPT_RC || type == QHCA_QPT_UC;
	case QHCA_WR_RDMA_READ:
	case QHCA_WR_ATOMIC_CMP_AND_SWP:
	case QHCA_WR_ATOMIC_FETCH_AND_ADD:
	case QHCA_WR_SEND_WITH_INV:
	case QHCA_WR_ATOMIC_WRITE:
		return type == QHCA_QPT_RC;
	case QHCA_WR_REG_MR:
	case QHCA_WR_LOCAL_INV:
	case QHCA_WR_BIND_MW:
		return type == QHCA_QPT_RC || type == QHCA_QPT_UC;
	default:
		return false;
	}
}


/* ---------------------------------------------------------------- WQE snapshot */
/* Read and check send WQE @idx; returns a work completion status. */
uint8_t qhca_wqe_load(struct qhca_engine *e, struct qhca_qp *qp, uint32_t idx,
		      struct qhca_send_wqe *sw)
{
	uint32_t off = sizeof(struct qhca_sq_wqe), i, stride = 1u << qp->sq.stride_log2;
	uint8_t *inl = sw->inline_data;
	uint64_t total = 0;

	qhca_sgl_release(&sw->sgl);	/* what the slot's last WQE held */
	memset(sw, 0, offsetof(struct qhca_send_wqe, inline_data));
	sw->inline_data = inl;
	/* and the progress of the slot's last WQE: a local operation loaded here is never
	 * given a geometry, and must not look like one half sent */
	sw->length = 0;
	sw->mtu = sw->first_psn = sw->npkts = sw->read_next = sw->tx_next = 0;
	sw->done = false;
	if (qhca_wq_read(e, &qp->sq, idx, 0, &sw->hdr, sizeof(sw->hdr)))
		return QHCA_WC_LOC_QP_OP_ERR;
	qhca_step(e, "wqe qp=0x%x slot=%u gpa=0x%llx size=%u op=%s wr_id=0x%llx sges=%u flags=0x%x "
		  "inline=%u rkey=0x%x raddr=0x%llx", qp->qpn, idx,
		  (unsigned long long)qhca_wq_gpa(&qp->sq, idx), stride, qhca_wr_name(sw->hdr.opcode),
		  (unsigned long long)sw->hdr.wr_id, sw->hdr.num_sge, sw->hdr.flags,
		  sw->hdr.flags & QHCA_WQE_INLINE ? sw->hdr.inline_len : 0, sw->hdr.rkey,
		  (unsigned long long)sw->hdr.remote_addr);
	if (!qhca_wr_allowed(qp->type, sw->hdr.opcode) || !qhca_wqe_flags_ok(&sw->hdr))
		return QHCA_WC_LOC_QP_OP_ERR;
	if (qhca_wr_is_local(sw->hdr.opcode)) {
		if (sw->hdr.num_sge || (sw->hdr.flags & QHCA_WQE_INLINE))
			return QHCA_WC_LOC_QP_OP_ERR;
		/* REG_MR and BIND_MW: their segment, of the same size (a union) */
		if (sw->hdr.opcode != QHCA_WR_LOCAL_INV &&
		    (off + sizeof(sw->reg) > stride ||
		     qhca_wq_read(e, &qp->sq, idx, off, &sw->reg, sizeof(sw->reg))))
			return QHCA_WC_LOC_QP_OP_ERR;
		return QHCA_WC_SUCCESS;
	}
	if (sw->hdr.opcode == QHCA_WR_ATOMIC_WRITE) {
		/* Its 8 bytes travel in the WQE. */
		if (sw->hdr.num_sge || (sw->hdr.flags & QHCA_WQE_INLINE))
			return QHCA_WC_LOC_QP_OP_ERR;
		if (sw->hdr.remote_addr % 8)
			return QHCA_WC_LOC_LEN_ERR;
		sw->length = 8;
		return QHCA_WC_SUCCESS;
	}
	if (qhca_qp_datagram(qp)) {
		if (qhca_wq_read(e, &qp->sq, idx, off, &sw->ud, sizeof(sw->ud)) ||
		    roce_gid_is_v4(sw->ud.av.sgid) != roce_gid_is_v4(sw->ud.av.dgid) ||
		    !qhca_av_flags_ok(e->cfg.link, &sw->ud.av))
			return QHCA_WC_LOC_QP_OP_ERR;
		off += sizeof(sw->ud);
	}
	if (sw->hdr.flags & QHCA_WQE_INLINE) {
		if (qhca_wr_is_rd_atomic(sw->hdr.opcode) || sw->hdr.inline_len > qp->max_inline ||
		    off + sw->hdr.inline_len > stride ||
		    qhca_wq_read(e, &qp->sq, idx, off, sw->inline_data, sw->hdr.inline_len))
			return QHCA_WC_LOC_QP_OP_ERR;
		total = sw->hdr.inline_len;
	} else {
		uint32_t need = qhca_wr_is_rd_atomic(sw->hdr.opcode) ? QHCA_ACCESS_LOCAL_WRITE : 0;
		const char *why;

		if (sw->hdr.num_sge > e->cfg.max_sge ||
		    off + sw->hdr.num_sge * sizeof(struct qhca_sge) > stride ||
		    qhca_wq_read(e, &qp->sq, idx, off, sw->sgl.sge,
				 sw->hdr.num_sge * sizeof(struct qhca_sge)))
			return QHCA_WC_LOC_QP_OP_ERR;
		sw->sgl.num = sw->hdr.num_sge;
		if (qhca_sgl_load(e, &sw->sgl, qp->pd, need, &i, &why)) {
			qhca_log_guest(e, "QP 0x%x WQE %u sge %u lkey 0x%x: %s", qp->qpn, idx, i,
				       sw->sgl.sge[i].lkey, why);
			return QHCA_WC_LOC_PROT_ERR;
		}
		total = sw->sgl.length;
		/* READ_INV invalidates the region its sink holds: a sink of no bytes holds
		 * none (qhca_sgl_load checks nothing of it) */
		if ((sw->hdr.flags & QHCA_WQE_READ_INV) && !sw->sgl.mr[0])
			return QHCA_WC_LOC_QP_OP_ERR;
	}
	if (total > 0x80000000ull)
		return QHCA_WC_LOC_LEN_ERR;
	if (sw->hdr.opcode == QHCA_WR_ATOMIC_CMP_AND_SWP ||
	    sw->hdr.opcode == QHCA_WR_ATOMIC_FETCH_AND_ADD) {
		if (total != 8 || sw->hdr.remote_addr % 8)
			return QHCA_WC_LOC_LEN_ERR;
	}
	if (qhca_qp_datagram(qp) && total > qp->mtu)
		return QHCA_WC_LOC_LEN_ERR;
	sw->length = total;
	return QHCA_WC_SUCCESS;
}

/* Copy message bytes [off, off + len) from (gather) or to (scatter) the WQE's buffers. */
int qhca_wqe_xfer(struct qhca_engine *e, struct qhca_send_wqe *sw, uint64_t off, uint8_t *buf,
		  uint32_t len, bool to_guest)
{
	if (sw->hdr.flags & QHCA_WQE_INLINE) {
		/* sw->length is at most the QP's max_inline: the bytes snapshotted */
		if (off > sw->length || len > sw->length - off || to_guest)
			return -1;
		memcpy(buf, sw->inline_data + off, len);
		return 0;
	}
	return qhca_sgl_xfer(e, &sw->sgl, off, buf, len, to_guest) ? -1 : 0;
}

/* ---------------------------------------------------------------- packets of a WQE */
static uint8_t req_opcode(struct qhca_qp *qp, const struct qhca_send_wqe *sw, uint32_t k)
{
	uint8_t ts = qhca_qp_ts(qp);
	bool first = k == 0, last = k == sw->npkts - 1, only = first && last;
	uint8_t op;

	switch (sw->hdr.opcode) {
	case QHCA_WR_SEND:
		op = only ? ROCE_OP_SEND_ONLY : first ? ROCE_OP_SEND_FIRST :
		     last ? ROCE_OP_SEND_LAST : ROCE_OP_SEND_MIDDLE;
		break;
	case QHCA_WR_SEND_WITH_IMM:
		op = only ? ROCE_OP_SEND_ONLY_IMM : first ? ROCE_OP_SEND_FIRST :
		     last ? ROCE_OP_SEND_LAST_IMM : ROCE_OP_SEND_MIDDLE;
		break;
	case QHCA_WR_SEND_WITH_INV:
		op = only ? ROCE_OP_SEND_ONLY_INV : first ? ROCE_OP_SEND_FIRST :
		     last ? ROCE_OP_SEND_LAST_INV : ROCE_OP_SEND_MIDDLE;
		break;
	case QHCA_WR_RDMA_WRITE:
		op = only ? ROCE_OP_WRITE_ONLY : first ? ROCE_OP_WRITE_FIRST :
		     last ? ROCE_OP_WRITE_LAST : ROCE_OP_WRITE_MIDDLE;
		break;
	case QHCA_WR_RDMA_WRITE_WITH_IMM:
		op = only ? ROCE_OP_WRITE_ONLY_IMM : first ? ROCE_OP_WRITE_FIRST :
		     last ? ROCE_OP_WRITE_LAST_IMM : ROCE_OP_WRITE_MIDDLE;
		break;
	case QHCA_WR_RDMA_READ:
		op = ROCE_OP_READ_REQUEST;
		break;
	case QHCA_WR_ATOMIC_WRITE:
		op = ROCE_OP_ATOMIC_WRITE;
		break;
	case QHCA_WR_ATOMIC_CMP_AND_SWP:
		op = ROCE_OP_COMPARE_SWAP;
		break;
	default:
		op = ROCE_OP_FETCH_ADD;
		break;
	}
	return ts | op;
}

/* Send packet @k of @sw with AckReq if @ackreq (a READ request restarts at response packet
 * @k and asks for @m responses); -1 if its data cannot be gathered (a region went away
 * under the message). */
static int send_packet(struct qhca_engine *e, struct qhca_qp *qp, struct qhca_send_wqe *sw,
		       uint32_t k, uint32_t m, bool ackreq)
{
	bool ud = qhca_qp_datagram(qp);
	struct roce_pkt p;
	uint64_t off = (uint64_t)k * sw->mtu;
	uint32_t len = 0;

	memset(&p, 0, sizeof(p));
	p.opcode = req_opcode(qp, sw, k);
	p.psn = (sw->first_psn + k) & 0xffffff;
	p.pkey = ROCE_DEFAULT_PKEY;
	p.dqpn = qp->dest_qpn;
	if (sw->hdr.opcode == QHCA_WR_RDMA_READ) {
		p.reth_va = sw->hdr.remote_addr + off;
		p.reth_rkey = sw->hdr.rkey;
		p.reth_len = off >= sw->length ? 0 : sw->length - off < (uint64_t)m * sw->mtu ?
			     (uint32_t)(sw->length - off) : m * sw->mtu;
		p.ackreq = true;
	} else if (sw->hdr.opcode == QHCA_WR_ATOMIC_WRITE) {
		memcpy(e->payload, &sw->hdr.compare_add, 8);
		p.payload = e->payload;
		p.payload_len = 8;
		p.reth_va = sw->hdr.remote_addr;
		p.reth_rkey = sw->hdr.rkey;
		p.reth_len = 8;
		p.ackreq = true;
	} else if (qhca_wr_is_rd_atomic(sw->hdr.opcode)) {
		p.atomic_va = sw->hdr.remote_addr;
		p.atomic_rkey = sw->hdr.rkey;
		p.atomic_swap_add = sw->hdr.opcode == QHCA_WR_ATOMIC_CMP_AND_SWP ?
				    sw->hdr.swap : sw->hdr.compare_add;
		p.atomic_compare = sw->hdr.compare_add;
		p.ackreq = true;
	} else {
		uint8_t *buf = qhca_tx_payload(e, ud ? &sw->ud.av : &qp->av, p.opcode);

		len = qhca_pkt_len(sw->length, sw->mtu, k);
		if (len && qhca_wqe_xfer(e, sw, off, buf, len, false)) {
			qhca_log_guest(e, "QP 0x%x: gather of PSN 0x%x failed", qp->qpn,
				       (sw->first_psn + k) & 0xffffff);
			return -1;
		}
		p.payload = buf;
		p.payload_len = len;
		p.reth_va = sw->hdr.remote_addr;
		p.reth_rkey = sw->hdr.rkey;
		p.reth_len = (uint32_t)sw->length;
		p.imm = sw->hdr.imm_inv;
		p.ieth_rkey = sw->hdr.imm_inv;
		p.ackreq = k == sw->npkts - 1 || ackreq;
		p.se = k == sw->npkts - 1 && (sw->hdr.flags & QHCA_WQE_SOLICITED);
	}
	p.xrc_srqn = sw->hdr.xrc_srqn & QHCA_XRC_SRQN_MASK;	/* sent by XRC only */
	if (qhca_qp_datagram(qp)) {
		p.dqpn = sw->ud.dqpn & 0xffffff;
		p.deth_qkey = (sw->ud.qkey & 0x80000000u) ? qp->qkey : sw->ud.qkey;
		p.deth_sqpn = qp->type == QHCA_QPT_GSI ? 1 : qp->type == QHCA_QPT_SMI ? 0 : qp->qpn;
		p.ackreq = false;
		/* A UD WQE carries its own address vector. */
		{
			struct qhca_av saved = qp->av;

			qp->av = sw->ud.av;
			qhca_xmit_pkt(e, qp, &p);
			qp->av = saved;
		}
		return 0;
	}
	if (qp->type == QHCA_QPT_UC)
		p.ackreq = false;
	qhca_xmit_pkt(e, qp, &p);
	return 0;
}

/* ---------------------------------------------------------------- the budget */
/*
 * A run of the requester starts at most QHCA_SQ_WQE_BUDGET WQEs and sends no packet once
 * QHCA_SQ_BYTE_BUDGET bytes of guest memory were moved, every DMA counted
 * (engine_internal.h says why those). A run is all that one call of the platform does: a
 * doorbell of a work queue or of the admin queue (every command it runs: each MODIFY_QP
 * to RTS starts WQEs), a frame received, a timer callback, the senders let go after
 * back-pressure, a loaded state resumed; runs nested in it share its budget (the QPs the
 * loopback drain's frames move on, each QP one callback runs). A QP the budget stopped
 * waits in a FIFO of QP slots, each standing for the QPN it was queued under: found again
 * by that number, a QP destroyed meanwhile is skipped, and one that took its slot takes
 * its place. The engine's timer, armed at once (as for the admin queue), goes on with them
 * in their order within its own budget; a QP that spends it goes to the end of the line,
 * so it does not hold back the others. While a QP waits there its doorbells only record
 * the index, and every other reason to run it (an ACK, a retransmission, RTS) finds it
 * waiting: the timer's run does what they would have. Its RC timer counts no timeout
 * while it waits with packets to send (qhca_comp_timer): they were not lost, only not let
 * go. A reset QP keeps its place (its new work, if any, goes on then), one in error has
 * nothing left. What waits is not saved: a loaded state queues every QP with work to
 * start or send (migrate.c).
 */
#define SQ_RESUME_QPS	1024	/* QPs one timer callback takes from the FIFO at most */

static uint32_t defer_slot(const struct qhca_qp *qp)
{
	return QHCA_FIELD_GET(QPN_SLOT_MASK, qp->qpn) - 2;
}

bool qhca_req_deferred(const struct qhca_engine *e, const struct qhca_qp *qp)
{
	return e->sq_defer_qpn[defer_slot(qp)] == qp->qpn;
}

void qhca_req_defer(struct qhca_engine *e, const struct qhca_qp *qp)
{
	uint32_t s = defer_slot(qp);

	/* a slot is in the FIFO once (so at most max_qp): a QP destroyed there left it */
	if (!e->sq_defer_qpn[s])
		e->sq_defer_q[(e->sq_defer_head + e->sq_defer_n++) % e->cfg.max_qp] = s;
	e->sq_defer_qpn[s] = qp->qpn;
}

void qhca_req_budget_begin(struct qhca_engine *e)
{
	if (!e->sq_run_depth++) {
		e->sq_run_wqes = 0;
		e->sq_run_bytes = e->dma_bytes;
	}
}

void qhca_req_budget_end(struct qhca_engine *e)
{
	e->sq_run_depth--;
}

static bool budget_spent(const struct qhca_engine *e)
{
	return e->sq_run_wqes >= QHCA_SQ_WQE_BUDGET ||
	       e->dma_bytes - e->sq_run_bytes >= QHCA_SQ_BYTE_BUDGET;
}

void qhca_req_resume(struct qhca_engine *e)
{
	uint32_t n = e->sq_defer_n, i;

	qhca_req_budget_begin(e);
	/* the QPs queued before this callback, each once: one that spends the budget again
	 * is queued behind the others */
	for (i = 0; i < n && i < SQ_RESUME_QPS && !budget_spent(e); i++) {
		uint32_t s = e->sq_defer_q[e->sq_defer_head];
		struct qhca_qp *qp = qhca_qp_find(e, e->sq_defer_qpn[s]);

		e->sq_defer_head = (e->sq_defer_head + 1) % e->cfg.max_qp;
		e->sq_defer_n--;
		e->sq_defer_qpn[s] = 0;
		if (qp)
			qhca_req_run(e, qp);
	}
	qhca_req_budget_end(e);
}

/* ---------------------------------------------------------------- requester */
enum tx_result {
	TX_DONE,	/* the WQE owes nothing (a READ: nothing it may ask for yet) */
	TX_BLOCKED,	/* the platform pushed back */
	TX_WINDOW,	/* the RC window is full: ACKs or responses open it again */
	TX_BUDGET,	/* the run's budget is spent: the timer goes on */
};

/* Packets between two AckReqs within a message: 16, fewer in a small window so that ACKs
 * come back while it still has room (comp.c, "the window"). */
static uint32_t ack_interval(const struct qhca_qp *qp)
{
	return qp->cwnd >= 32 ? 16 : qp->cwnd >= 2 ? qp->cwnd / 2 : 1;
}

/* Count a reliable packet at @psn that asked for @m PSNs: sent again if below snd_max. */
static void tx_account(struct qhca_engine *e, struct qhca_qp *qp, uint32_t psn, uint32_t m)
{
	qp->probe = false;
	if (qhca_psn_diff(psn, qp->snd_max) < 0)
		e->cnt.retransmits++;
	if (qhca_psn_diff((psn + m) & 0xffffff, qp->snd_max) > 0)
		qp->snd_max = (psn + m) & 0xffffff;
}

/*
 * A READ asks for its responses: the first time for all of them in one request (its PSNs
 * are the responder's, so that request covers the whole range; it goes out when its PSN
 * is in the window), later for the ones lost (rdrecov.c, "READ responses"), each run of
 * them in a request of its own (a duplicate READ may ask for a subset of the original), as
 * far as the horizon of responses placed out of order allows and with at most a window of
 * responses asked for again in flight: lost responses are what the window paces here.
 */
static enum tx_result tx_read(struct qhca_engine *e, struct qhca_qp *qp, struct qhca_send_wqe *sw)
{
	for (;;) {
		uint32_t s, n;
		bool whole;

		if (qhca_tx_stopped(e))
			return TX_BLOCKED;
		if (!sw->tx_next) {
			if (qhca_psn_diff(sw->first_psn, qp->una) >= (int32_t)qp->cwnd ||
			    qp->rnr_wait)
				return TX_WINDOW;
			s = sw->first_psn;
			n = sw->npkts;
		} else if (qp->rnr_wait || !qhca_read_again(sw, qp->cwnd, &s, &n)) {
			return TX_DONE;		/* asks again when answers come */
		}
		if (budget_spent(e))
			return TX_BUDGET;
		if (send_packet(e, qp, sw, (uint32_t)qhca_psn_diff(s, sw->first_psn), n, true)) {
			sw->tx_next = sw->npkts;
			sw->done = true;
			sw->status = QHCA_WC_LOC_PROT_ERR;
			return TX_DONE;
		}
		tx_account(e, qp, s, n);
		whole = !sw->tx_next;
		if (whole)
			sw->tx_next = sw->npkts;
		qhca_read_asked(sw, s, n, whole);
	}
}

/* Send what @sw still owes from its cursor, within the RC window. */
static enum tx_result tx_wqe(struct qhca_engine *e, struct qhca_qp *qp, struct qhca_send_wqe *sw)
{
	bool rel = qhca_qp_reliable(qp), rd = qhca_wr_is_rd_atomic(sw->hdr.opcode);

	if (rel && sw->hdr.opcode == QHCA_WR_RDMA_READ)
		return tx_read(e, qp, sw);
	while (sw->tx_next < sw->npkts) {
		uint32_t k = sw->tx_next, psn = (sw->first_psn + k) & 0xffffff;
		bool ackreq = false;

		if (qhca_tx_stopped(e))
			return TX_BLOCKED;
		if (rel) {
			/* Acknowledged already (a NAK or ACK past a go-back point): skip it. */
			if (!rd && qhca_psn_diff(psn, qp->ack_psn) < 0) {
				sw->tx_next++;
				continue;
			}
			if (qhca_psn_diff(psn, qp->una) >= (int32_t)qp->cwnd || qp->rnr_wait)
				return TX_WINDOW;
			/* AckReq every ack_interval packets, on the packet that fills the window
			 * (else nothing would open it but the timer), and after a timeout. */
			ackreq = (qp->cwnd >= 32 ? (k & 15) == 15 :
				  (k + 1) % ack_interval(qp) == 0) ||
				 qp->probe || qhca_psn_diff(psn, qp->una) + 1 >= (int32_t)qp->cwnd;
		}
		if (budget_spent(e))
			return TX_BUDGET;
		if (send_packet(e, qp, sw, k, 1, ackreq)) {
			/* The WQE fails here; the QP goes to the error state when it completes. */
			sw->tx_next = sw->npkts;
			sw->done = true;
			sw->status = QHCA_WC_LOC_PROT_ERR;
			return TX_DONE;
		}
		if (rel && !rd && qp->dup && psn == qp->dup_psn) {
			/* The head of a resend, twice: if it were lost, the responder would stay
			 * silent until the timeout (it NAKs a gap once). */
			qp->dup = false;
			e->cnt.retransmits++;
			qhca_step(e, "dup qp=0x%x psn=0x%x", qp->qpn, psn);
			send_packet(e, qp, sw, k, 1, ackreq);
		}
		if (rel)
			tx_account(e, qp, psn, 1);
		sw->tx_next = rd ? sw->npkts : k + 1;
	}
	/* UC and UD complete once sent; RC and XRC when acknowledged. */
	if (!rel)
		sw->done = true;
	return TX_DONE;
}

/* Send, in PSN order, every packet that started WQEs still owe; false if pushed back by the
 * platform, stopped by the window or by the budget (then *@budget). */
static bool tx_pump(struct qhca_engine *e, struct qhca_qp *qp, bool *budget)
{
	if ((int32_t)(qp->tx_idx - qp->sq.ci) < 0)
		qp->tx_idx = qp->sq.ci;
	for (; qp->tx_idx != qp->sq_next; qp->tx_idx++) {
		struct qhca_send_wqe *sw = qhca_sq_slot(qp, qp->tx_idx);
		enum tx_result r;

		if (sw->done)
			continue;
		r = tx_wqe(e, qp, sw);
		if (r == TX_BLOCKED)
			qhca_tx_wait(e, qp);
		if (r == TX_BUDGET)
			*budget = true;
		if (r != TX_DONE)
			return false;
	}
	return true;
}

_Static_assert(sizeof(struct qhca_bind_mw_seg) == sizeof(struct qhca_reg_mr_seg),
	       "wqe_load reads either segment as sw->reg");

/* REG_MR, BIND_MW and LOCAL_INV, executed when the requester reaches them in SQ order. */
uint8_t qhca_wqe_local_op(struct qhca_engine *e, struct qhca_qp *qp, struct qhca_send_wqe *sw)
{
	const char *why;
	uint8_t status;

	if (sw->hdr.opcode == QHCA_WR_REG_MR)
		return qhca_mr_fast_reg(e, qp->pd, &sw->reg);
	if (sw->hdr.opcode == QHCA_WR_BIND_MW)
		return qhca_mw_bind(e, qp, &sw->bind);
	status = qhca_mr_invalidate(e, qp, sw->hdr.imm_inv, false, &why);
	if (status != QHCA_WC_SUCCESS)
		qhca_log_guest(e, "QP 0x%x LOCAL_INV key 0x%x: %s", qp->qpn, sw->hdr.imm_inv, why);
	return status;
}

/* Did the last WQE started fail? Nothing after it starts: it takes the QP to error. */
static bool sq_failed(struct qhca_qp *qp)
{
	const struct qhca_send_wqe *last = qhca_sq_slot(qp, qp->sq_next - 1);

	return qp->sq_next != qp->sq.ci && last->done && last->status != QHCA_WC_SUCCESS;
}

/* Start the WQEs posted, up to the window, and send them; true if any started. *@budget
 * if the run's budget stopped it. */
static bool start_wqes(struct qhca_engine *e, struct qhca_qp *qp, bool *budget)
{
	bool sent = false;

	if (qp->sq_next == qp->sq.ci) {
		/* Nothing outstanding: the window starts at the next PSN (which a modify may
		 * have set); what it learned of the path stays. */
		qp->una = qp->ack_psn = qp->snd_max = qp->psn;
		qp->rewound = qp->probe = qp->dup = false;
		if (!qp->cwnd) {
			qp->cwnd = qp->ssthresh = QHCA_CWND_MAX;
			qp->cwnd_acc = qp->clean = 0;
		}
	}
	/* Started messages go out whole before the next one starts, also in SQD. */
	while (tx_pump(e, qp, budget) && qp->sq_next != qp->sq.pi &&
	       qp->sq_next - qp->sq.ci < qp->win_size && qp->state == QHCA_QPS_RTS &&
	       !sq_failed(qp)) {
		struct qhca_send_wqe *sw = qhca_sq_slot(qp, qp->sq_next);
		uint8_t status;

		if (budget_spent(e)) {
			*budget = true;
			break;
		}
		e->sq_run_wqes++;
		status = qhca_wqe_load(e, qp, qp->sq_next, sw);
		if (status != QHCA_WC_SUCCESS)
			qhca_step(e, "wqe_bad qp=0x%x slot=%u status=%s", qp->qpn, qp->sq_next,
				  qhca_wc_status_name(status));
		if (status == QHCA_WC_SUCCESS && qhca_wr_is_local(sw->hdr.opcode)) {
			/* A fenced one waits until every earlier WQE has completed. */
			if ((sw->hdr.flags & QHCA_WQE_FENCE) && qp->sq.ci != qp->sq_next)
				break;
			qp->sq_next++;
			sw->done = true;
			sw->status = qhca_wqe_local_op(e, qp, sw);
			continue;
		}
		if (status == QHCA_WC_SUCCESS && qhca_qp_reliable(qp)) {
			/* A fence waits for earlier READs and ATOMICs (IBA 10.8.3.3). */
			if ((sw->hdr.flags & QHCA_WQE_FENCE) && qp->rd_atomic_out)
				break;
			if (qhca_wr_is_rd_atomic(sw->hdr.opcode) &&
			    qp->rd_atomic_out >= (qp->max_rd_atomic ? qp->max_rd_atomic : 1u))
				break;
		}
		qp->sq_next++;
		if (status != QHCA_WC_SUCCESS) {
			sw->done = true;
			sw->status = status;
			break;
		}
		sw->mtu = qp->mtu;
		sw->npkts = sw->length ? (uint32_t)((sw->length + sw->mtu - 1) / sw->mtu) : 1;
		if (sw->hdr.opcode != QHCA_WR_RDMA_READ && qhca_wr_is_rd_atomic(sw->hdr.opcode))
			sw->npkts = 1;
		sw->first_psn = qp->psn;
		sw->last_psn = (qp->psn + sw->npkts - 1) & 0xffffff;
		sw->read_next = sw->first_psn;
		sw->tx_next = 0;
		if (qhca_wr_is_rd_atomic(sw->hdr.opcode))
			qhca_rd_start(sw);
		qp->psn = (qp->psn + sw->npkts) & 0xffffff;
		if (qhca_wr_is_rd_atomic(sw->hdr.opcode))
			qp->rd_atomic_out++;
		sent = true;	/* tx_pump sends it */
	}
	return sent;
}

void qhca_req_run(struct qhca_engine *e, struct qhca_qp *qp)
{
	bool sent = false, budget = false;
	uint32_t ci;

	if (e->cfg.link == QHCA_LINK_IWARP) {
		qhca_iw_req_run(e, qp);		/* FPDUs into the QP's TCP connection */
		return;
	}
	if (qp->state != QHCA_QPS_RTS && qp->state != QHCA_QPS_SQD)
		return;
	if (qhca_req_deferred(e, qp))
		return;		/* the timer goes on with it (qhca_req_resume) */
	qhca_req_budget_begin(e);
	/* UC and UD complete once sent: that opens the window for more at once. */
	do {
		ci = qp->sq.ci;
		sent |= start_wqes(e, qp, &budget);
		qhca_comp_ready(e, qp);
	} while (qp->sq.ci != ci && qp->sq_next != qp->sq.pi && qp->state == QHCA_QPS_RTS &&
		 !qhca_tx_stopped(e) && !budget);
	/* The timer runs while anything is outstanding; it restarts on progress (comp.c). */
	if ((sent || qp->sq.ci != qp->sq_next) && qp->deadline == UINT64_MAX)
		qhca_comp_arm_timer(e, qp);
	if (budget && (qp->state == QHCA_QPS_RTS || qp->state == QHCA_QPS_SQD)) {
		qhca_req_defer(e, qp);
		qhca_timer_update(e);	/* at once */
	}
	if (qhca_tx_stopped(e) && qp->sq_next != qp->sq.pi && qp->state == QHCA_QPS_RTS)
		qhca_tx_wait(e, qp);	/* WQEs posted that did not start */
	qhca_loopback_drain(e);
	qhca_req_budget_end(e);
}

/*
 * Send again everything not acknowledged from @psn on (go back N): move the cursors of the
 * WQEs concerned back, then send as the window allows. A READ or ATOMIC before @psn that
 * still waits for its answer is qhca_rd_answered's (rdrecov.c); from @psn on, it asks again for what
 * it has not received. The caller sends (qhca_req_run); packets are counted as
 * retransmitted when they go out (tx_wqe).
 */
void qhca_req_retransmit(struct qhca_engine *e, struct qhca_qp *qp, uint32_t psn, bool nak)
{
	uint32_t i, k;
	for (i = qp->sq.ci; i != qp->sq_next; i++) {
		struct qhca_send_wqe *sw = qhca_sq_slot(qp, i);

		if (sw->done)
			continue;
		if (qhca_wr_is_rd_atomic(sw->hdr.opcode)) {
			if (qhca_psn_diff(sw->read_next, psn) >= 0)
				qhca_rd_rewind(qp, i, nak);
			continue;
		}
		if (qhca_psn_diff(sw->last_psn, psn) < 0)
			continue;
		k = qhca_psn_diff(psn, sw->first_psn) <= 0 ? 0 :
		    (uint32_t)qhca_psn_diff(psn, sw->first_psn);
		if (k >= sw->tx_next)
			continue;	/* not sent yet anyway */
		sw->tx_next = k;
		if ((int32_t)(i - qp->tx_idx) < 0)
			qp->tx_idx = i;
	}
}

/* Drop the region references of every WQE in the window (the QP is reset or destroyed). */
void qhca_req_release(struct qhca_qp *qp)
{
	uint32_t i;

	for (i = 0; i < qp->win_size; i++)
		qhca_sgl_release(&qp->win[i].sgl);
	qp->cwnd = 0;	/* a new connection learns its path anew */
	qp->rnr_wait = false;
}

