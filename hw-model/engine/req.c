// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * qhca requester and completer (IBA 9.7.4 and 9.7.5.2 for RC, 9.8 for UC and UD): send
 * WQEs become packets of the path MTU with their PSNs; ACKs, NAKs, READ responses and
 * ATOMIC acknowledgements complete them in order; lost packets are sent again from the
 * first unacknowledged PSN on a NAK or when the QP's timer expires.
 */
#include <stdlib.h>
#include <string.h>

#include "qhca_engine.h"

static struct qhca_send_wqe *slot(struct qhca_qp *qp, uint32_t idx)
{
	return &qp->win[idx % QHCA_SQ_WINDOW];
}

static bool is_rd_atomic(uint8_t op)
{
	return op == QHCA_WR_RDMA_READ || op == QHCA_WR_ATOMIC_CMP_AND_SWP ||
	       op == QHCA_WR_ATOMIC_FETCH_AND_ADD;
}

static bool op_allowed(uint8_t type, uint8_t op)
{
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
		return type == QHCA_QPT_RC;
	default:
		return false;
	}
}

/* ---------------------------------------------------------------- transmit */
static const uint8_t *own_mac(struct qhca_engine *e)
{
	return e->mac;
}

static void loopback_enqueue(struct qhca_engine *e, const uint8_t *frame, size_t len);

void qhca_xmit_pkt(struct qhca_engine *e, struct qhca_qp *qp, struct roce_pkt *p)
{
	const struct qhca_av *av = &qp->av;
	size_t len;

	memcpy(p->dmac, av->dmac, 6);
	memcpy(p->smac, own_mac(e), 6);
	memcpy(p->sgid, av->sgid, 16);
	memcpy(p->dgid, av->dgid, 16);
	p->ipv6 = !roce_gid_is_v4(av->dgid);
	p->hop_limit = av->hop_limit ? av->hop_limit : 64;
	p->tclass = av->tclass;
	p->flow_label = av->flow_label;
	/* The source port spreads flows over ECMP paths (A17.5.1.1): derive it from the QPs. */
	p->udp_sport = 0xc000 | ((qp->qpn * 0x9e37u) ^ p->dqpn) % 0x4000;
	len = roce_build(p, e->pkt, ROCE_MAX_HDR + 4096 + 8);
	if (!len) {
		qhca_log(e, QHCA_LOG_ERR, "QP 0x%x: cannot build opcode 0x%x", qp->qpn, p->opcode);
		return;
	}
	e->cnt.roce_tx_pkts++;
	e->cnt.roce_tx_bytes += len;
	if (!memcmp(av->dmac, own_mac(e), 6)) {
		e->cnt.loopback_pkts++;
		loopback_enqueue(e, e->pkt, len);
	} else if (e->link_up) {
		e->ops->xmit(e->opaque, e->pkt, len);
	}
}

/* ---------------------------------------------------------------- loopback */
/* Requesters stop at half: the rest is room for ACKs and READ responses. */
#define LOOP_QUEUE	1024

static bool tx_stopped(const struct qhca_engine *e)
{
	return e->tx_blocked || e->loop_blocked;
}

static void loopback_enqueue(struct qhca_engine *e, const uint8_t *frame, size_t len)
{
	unsigned slot_i;

	if (e->loop_count == LOOP_QUEUE) {
		qhca_log(e, QHCA_LOG_EVENT, "loopback queue full: frame dropped");
		return;		/* like a full link: the transport recovers */
	}
	slot_i = (e->loop_head + e->loop_count++) % LOOP_QUEUE;
	memcpy(e->loop_q[slot_i], frame, len);
	e->loop_len[slot_i] = len;
	if (e->loop_count >= LOOP_QUEUE / 2)
		e->loop_blocked = true;
}

static void run_requesters(struct qhca_engine *e);

/* Deliver looped-back frames; called when the outermost piece of work is done. */
void qhca_loopback_drain(struct qhca_engine *e)
{
	if (e->in_loop)
		return;
	e->in_loop = true;
	do {
		while (e->loop_count) {
			unsigned i = e->loop_head;

			e->loop_head = (e->loop_head + 1) % LOOP_QUEUE;
			e->loop_count--;
			qhca_roce_receive(e, e->loop_q[i], e->loop_len[i]);
		}
		if (e->loop_blocked) {
			/* Drained: the requesters that stopped for the queue go on. */
			e->loop_blocked = false;
			run_requesters(e);
		}
	} while (e->loop_count);
	e->in_loop = false;
}

int qhca_loopback_init(struct qhca_engine *e)
{
	unsigned i;

	e->loop_q = calloc(LOOP_QUEUE, sizeof(*e->loop_q));
	e->loop_len = calloc(LOOP_QUEUE, sizeof(*e->loop_len));
	if (!e->loop_q || !e->loop_len)
		return -1;
	for (i = 0; i < LOOP_QUEUE; i++) {
		e->loop_q[i] = malloc(ROCE_MAX_HDR + 4096 + 8);
		if (!e->loop_q[i])
			return -1;
	}
	return 0;
}

void qhca_loopback_fini(struct qhca_engine *e)
{
	unsigned i;

	for (i = 0; e->loop_q && i < LOOP_QUEUE; i++)
		free(e->loop_q[i]);
	free(e->loop_q);
	free(e->loop_len);
	e->loop_q = NULL;
	e->loop_len = NULL;
}

/* ---------------------------------------------------------------- WQE snapshot */
/* Read and check send WQE @idx; returns a work completion status. */
static uint8_t wqe_load(struct qhca_engine *e, struct qhca_qp *qp, uint32_t idx,
			struct qhca_send_wqe *sw)
{
	uint32_t off = sizeof(struct qhca_sq_wqe), i, stride = 1u << qp->sq.stride_log2;
	uint8_t *inl = sw->inline_data;
	uint64_t total = 0;

	qhca_sgl_release(&sw->sgl);	/* what the slot's last WQE held */
	memset(sw, 0, offsetof(struct qhca_send_wqe, inline_data));
	sw->inline_data = inl;
	sw->done = false;
	if (qhca_wq_read(e, &qp->sq, idx, 0, &sw->hdr, sizeof(sw->hdr)))
		return QHCA_WC_LOC_QP_OP_ERR;
	if (!op_allowed(qp->type, sw->hdr.opcode) || (sw->hdr.flags & ~0xfu))
		return QHCA_WC_LOC_QP_OP_ERR;
	if (qp->type == QHCA_QPT_UD || qp->type == QHCA_QPT_GSI) {
		if (qhca_wq_read(e, &qp->sq, idx, off, &sw->ud, sizeof(sw->ud)) ||
		    roce_gid_is_v4(sw->ud.av.sgid) != roce_gid_is_v4(sw->ud.av.dgid))
			return QHCA_WC_LOC_QP_OP_ERR;
		off += sizeof(sw->ud);
	}
	if (sw->hdr.flags & QHCA_WQE_INLINE) {
		if (is_rd_atomic(sw->hdr.opcode) || sw->hdr.inline_len > qp->max_inline ||
		    off + sw->hdr.inline_len > stride ||
		    qhca_wq_read(e, &qp->sq, idx, off, sw->inline_data, sw->hdr.inline_len))
			return QHCA_WC_LOC_QP_OP_ERR;
		total = sw->hdr.inline_len;
	} else {
		uint32_t need = is_rd_atomic(sw->hdr.opcode) ? QHCA_ACCESS_LOCAL_WRITE : 0;
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
	}
	if (total > 0x80000000ull)
		return QHCA_WC_LOC_LEN_ERR;
	if (sw->hdr.opcode == QHCA_WR_ATOMIC_CMP_AND_SWP ||
	    sw->hdr.opcode == QHCA_WR_ATOMIC_FETCH_AND_ADD) {
		if (total != 8 || sw->hdr.remote_addr % 8)
			return QHCA_WC_LOC_LEN_ERR;
	}
	if ((qp->type == QHCA_QPT_UD || qp->type == QHCA_QPT_GSI) && total > qp->mtu)
		return QHCA_WC_LOC_LEN_ERR;
	sw->length = total;
	return QHCA_WC_SUCCESS;
}

/* Copy message bytes [off, off + len) from (gather) or to (scatter) the WQE's buffers. */
static int wqe_xfer(struct qhca_engine *e, struct qhca_send_wqe *sw, uint64_t off, uint8_t *buf,
		    uint32_t len, bool to_guest)
{
	if (sw->hdr.flags & QHCA_WQE_INLINE) {
		memcpy(buf, sw->inline_data + off, len);
		return 0;
	}
	return qhca_sgl_xfer(e, &sw->sgl, off, buf, len, to_guest) ? -1 : 0;
}

/* ---------------------------------------------------------------- packets of a WQE */
static uint8_t req_opcode(struct qhca_qp *qp, const struct qhca_send_wqe *sw, uint32_t k)
{
	uint8_t ts = qp->type == QHCA_QPT_RC ? ROCE_TS_RC :
		     qp->type == QHCA_QPT_UC ? ROCE_TS_UC : ROCE_TS_UD;
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
	case QHCA_WR_ATOMIC_CMP_AND_SWP:
		op = ROCE_OP_COMPARE_SWAP;
		break;
	default:
		op = ROCE_OP_FETCH_ADD;
		break;
	}
	return ts | op;
}

/* Send packet @k of @sw (a READ request restarts at response packet @k); -1 if its data
 * cannot be gathered (a region went away under the message). */
static int send_packet(struct qhca_engine *e, struct qhca_qp *qp, struct qhca_send_wqe *sw,
			uint32_t k)
{
	struct roce_pkt p;
	uint64_t off = (uint64_t)k * qp->mtu;
	uint32_t len = 0;

	memset(&p, 0, sizeof(p));
	p.opcode = req_opcode(qp, sw, k);
	p.psn = (sw->first_psn + k) & 0xffffff;
	p.pkey = ROCE_DEFAULT_PKEY;
	p.dqpn = qp->dest_qpn;
	if (sw->hdr.opcode == QHCA_WR_RDMA_READ) {
		p.reth_va = sw->hdr.remote_addr + off;
		p.reth_rkey = sw->hdr.rkey;
		p.reth_len = (uint32_t)(sw->length - off);
		p.ackreq = true;
	} else if (is_rd_atomic(sw->hdr.opcode)) {
		p.atomic_va = sw->hdr.remote_addr;
		p.atomic_rkey = sw->hdr.rkey;
		p.atomic_swap_add = sw->hdr.opcode == QHCA_WR_ATOMIC_CMP_AND_SWP ?
				    sw->hdr.swap : sw->hdr.compare_add;
		p.atomic_compare = sw->hdr.compare_add;
		p.ackreq = true;
	} else {
		len = sw->length - off < qp->mtu ? (uint32_t)(sw->length - off) : qp->mtu;
		if (len && wqe_xfer(e, sw, off, e->payload, len, false)) {
			qhca_log_guest(e, "QP 0x%x: gather of PSN 0x%x failed", qp->qpn,
				       (sw->first_psn + k) & 0xffffff);
			return -1;
		}
		p.payload = e->payload;
		p.payload_len = len;
		p.reth_va = sw->hdr.remote_addr;
		p.reth_rkey = sw->hdr.rkey;
		p.reth_len = (uint32_t)sw->length;
		p.imm = sw->hdr.imm_inv;
		p.ieth_rkey = sw->hdr.imm_inv;
		/* Ask for an ACK at the end of a message and every 16 packets within one. */
		p.ackreq = k == sw->npkts - 1 || (k & 15) == 15;
		p.se = k == sw->npkts - 1 && (sw->hdr.flags & QHCA_WQE_SOLICITED);
	}
	if (qp->type == QHCA_QPT_UD || qp->type == QHCA_QPT_GSI) {
		p.dqpn = sw->ud.dqpn & 0xffffff;
		p.deth_qkey = (sw->ud.qkey & 0x80000000u) ? qp->qkey : sw->ud.qkey;
		p.deth_sqpn = qp->type == QHCA_QPT_GSI ? 1 : qp->qpn;
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
	cqe.qpn_status = qp->qpn | (uint32_t)status << QHCA_CQE_STATUS_SHIFT;
	cqe.opcode = wc_opcode(opcode);
	cqe.src_qp_flags = idx & QHCA_CQE_WQE_INDEX_MASK;
	qhca_cq_post(e, qp->send_cq, &cqe, false);
}

/* Complete finished WQEs in order; an error completion takes the QP to the error state. */
static void complete_ready(struct qhca_engine *e, struct qhca_qp *qp)
{
	while (qp->sq.ci != qp->sq_next && slot(qp, qp->sq.ci)->done) {
		struct qhca_send_wqe *sw = slot(qp, qp->sq.ci);

		if (is_rd_atomic(sw->hdr.opcode) && qp->rd_atomic_out)
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

static void arm_timer(struct qhca_engine *e, struct qhca_qp *qp)
{
	if (qp->type != QHCA_QPT_RC || qp->rnr_wait)
		return;
	if (qp->sq.ci == qp->sq_next || !timeout_ns(qp))
		qhca_qp_set_deadline(e, qp, UINT64_MAX);
	else
		qhca_qp_set_deadline(e, qp, e->ops->now_ns(e->opaque) + timeout_ns(qp));
	qhca_timer_update(e);
}

/* ---------------------------------------------------------------- requester */
/* Send what @sw still owes from its cursor; false when the platform pushed back. */
static bool tx_wqe(struct qhca_engine *e, struct qhca_qp *qp, struct qhca_send_wqe *sw)
{
	while (sw->tx_next < sw->npkts) {
		if (tx_stopped(e))
			return false;
		if (send_packet(e, qp, sw, sw->tx_next)) {
			/* The WQE fails here; the QP goes to the error state when it completes. */
			sw->tx_next = sw->npkts;
			sw->done = true;
			sw->status = QHCA_WC_LOC_PROT_ERR;
			return true;
		}
		/* A READ request asks for all responses from its cursor at once. */
		sw->tx_next = is_rd_atomic(sw->hdr.opcode) ? sw->npkts : sw->tx_next + 1;
	}
	/* UC and UD complete once sent; RC when acknowledged. */
	if (qp->type != QHCA_QPT_RC)
		sw->done = true;
	return true;
}

/* Send, in PSN order, every packet that started WQEs still owe; false if pushed back. */
static bool tx_pump(struct qhca_engine *e, struct qhca_qp *qp)
{
	if ((int32_t)(qp->tx_idx - qp->sq.ci) < 0)
		qp->tx_idx = qp->sq.ci;
	for (; qp->tx_idx != qp->sq_next; qp->tx_idx++) {
		struct qhca_send_wqe *sw = slot(qp, qp->tx_idx);

		if (!sw->done && !tx_wqe(e, qp, sw)) {
			qhca_tx_wait(e, qp);
			return false;
		}
	}
	return true;
}

/* Start the WQEs posted, up to the window, and send them; true if any started. */
static bool start_wqes(struct qhca_engine *e, struct qhca_qp *qp)
{
	bool sent = false;

	/* Started messages go out whole before the next one starts, also in SQD. */
	while (tx_pump(e, qp) && qp->sq_next != qp->sq.pi &&
	       qp->sq_next - qp->sq.ci < QHCA_SQ_WINDOW && qp->state == QHCA_QPS_RTS) {
		struct qhca_send_wqe *sw = slot(qp, qp->sq_next);
		uint8_t status;

		status = wqe_load(e, qp, qp->sq_next, sw);
		if (status == QHCA_WC_SUCCESS && qp->type == QHCA_QPT_RC) {
			/* A fence waits for earlier READs and ATOMICs (IBA 10.8.3.3). */
			if ((sw->hdr.flags & QHCA_WQE_FENCE) && qp->rd_atomic_out)
				break;
			if (is_rd_atomic(sw->hdr.opcode) &&
			    qp->rd_atomic_out >= (qp->max_rd_atomic ? qp->max_rd_atomic : 1u))
				break;
		}
		qp->sq_next++;
		if (status != QHCA_WC_SUCCESS) {
			sw->done = true;
			sw->status = status;
			break;
		}
		sw->npkts = sw->length ? (uint32_t)((sw->length + qp->mtu - 1) / qp->mtu) : 1;
		if (sw->hdr.opcode != QHCA_WR_RDMA_READ && is_rd_atomic(sw->hdr.opcode))
			sw->npkts = 1;
		sw->first_psn = qp->psn;
		sw->last_psn = (qp->psn + sw->npkts - 1) & 0xffffff;
		sw->read_next = sw->first_psn;
		sw->tx_next = 0;
		qp->psn = (qp->psn + sw->npkts) & 0xffffff;
		if (is_rd_atomic(sw->hdr.opcode))
			qp->rd_atomic_out++;
		sent = true;	/* tx_pump sends it */
	}
	return sent;
}

void qhca_req_run(struct qhca_engine *e, struct qhca_qp *qp)
{
	bool sent = false;
	uint32_t ci;

	if (qp->state != QHCA_QPS_RTS && qp->state != QHCA_QPS_SQD)
		return;
	/* UC and UD complete once sent: that opens the window for more at once. */
	do {
		ci = qp->sq.ci;
		sent |= start_wqes(e, qp);
		complete_ready(e, qp);
	} while (qp->sq.ci != ci && qp->sq_next != qp->sq.pi && qp->state == QHCA_QPS_RTS &&
		 !tx_stopped(e));
	if (sent && qp->deadline == UINT64_MAX)
		arm_timer(e, qp);
	if (tx_stopped(e) && qp->sq_next != qp->sq.pi && qp->state == QHCA_QPS_RTS)
		qhca_tx_wait(e, qp);	/* WQEs posted that did not start */
	qhca_loopback_drain(e);
}

/*
 * Send again everything not acknowledged from @psn on (go back N): move the cursors of the
 * WQEs concerned back, then send. READs ask again for the responses not yet received.
 */
static void retransmit_from(struct qhca_engine *e, struct qhca_qp *qp, uint32_t psn)
{
	bool first = true;
	uint32_t i, k;

	for (i = qp->sq.ci; i != qp->sq_next; i++) {
		struct qhca_send_wqe *sw = slot(qp, i);

		if (sw->done)
			continue;
		if (sw->hdr.opcode == QHCA_WR_RDMA_READ)
			k = (uint32_t)qhca_psn_diff(sw->read_next, sw->first_psn);
		else if (qhca_psn_diff(sw->last_psn, psn) < 0)
			continue;
		else if (qhca_psn_diff(psn, sw->first_psn) <= 0 || is_rd_atomic(sw->hdr.opcode))
			k = 0;
		else
			k = (uint32_t)qhca_psn_diff(psn, sw->first_psn);
		if (k >= sw->tx_next)
			continue;	/* not sent yet anyway */
		e->cnt.retransmits += is_rd_atomic(sw->hdr.opcode) ? 1 : sw->tx_next - k;
		sw->tx_next = k;
		if (first && (int32_t)(i - qp->tx_idx) < 0)
			qp->tx_idx = i;
		first = false;
	}
	tx_pump(e, qp);
}

/* The first WQE not yet done, or NULL. */
static struct qhca_send_wqe *oldest(struct qhca_qp *qp)
{
	uint32_t i;

	for (i = qp->sq.ci; i != qp->sq_next; i++)
		if (!slot(qp, i)->done)
			return slot(qp, i);
	return NULL;
}

/* Everything before @psn arrived: SENDs and WRITEs up to it are done. A READ or ATOMIC
 * in that range without its response means the response was lost: returns its first PSN
 * to resend from, or -1. */
static int64_t ack_until(struct qhca_qp *qp, uint32_t psn, bool inclusive)
{
	uint32_t i;

	for (i = qp->sq.ci; i != qp->sq_next; i++) {
		struct qhca_send_wqe *sw = slot(qp, i);
		int32_t d = qhca_psn_diff(sw->last_psn, psn);

		if (sw->done)
			continue;
		if (d > 0 || (d == 0 && !inclusive))
			break;
		if (is_rd_atomic(sw->hdr.opcode))
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
		struct qhca_send_wqe *sw = slot(qp, i);

		if (!sw->done && qhca_psn_diff(psn, sw->last_psn) <= 0) {
			sw->done = true;
			sw->status = status;
			return;
		}
	}
}

void qhca_req_response(struct qhca_engine *e, struct qhca_qp *qp, const struct roce_pkt *p)
{
	const struct roce_opcode_info *oi = roce_opcode_info(p->opcode);
	struct qhca_send_wqe *sw;
	int64_t again;

	if (qp->type != QHCA_QPT_RC || (qp->state != QHCA_QPS_RTS && qp->state != QHCA_QPS_SQD &&
					qp->state != QHCA_QPS_SQE) ||
	    memcmp(p->sgid, qp->av.dgid, 16)) {
		e->cnt.roce_rx_bad_state++;
		return;
	}
	sw = oldest(qp);
	if (!sw || qhca_psn_diff(p->psn, sw->first_psn) < 0 || qhca_psn_diff(p->psn, qp->psn) >= 0) {
		e->cnt.roce_rx_dup++;	/* nothing outstanding at that PSN: a stale response */
		return;
	}
	if (p->opcode == (ROCE_TS_RC | ROCE_OP_ACKNOWLEDGE)) {
		uint8_t syn = p->aeth_syndrome;

		switch (syn >> 5) {
		case 0:		/* ACK */
			again = ack_until(qp, p->psn, true);
			qp->retries = qp->rnr_retries = 0;
			if (again >= 0)
				retransmit_from(e, qp, (uint32_t)again);
			break;
		case 1:		/* RNR NAK */
			e->cnt.rnr_naks_received++;
			ack_until(qp, p->psn, false);
			if (qp->rnr_retry != 7 && qp->rnr_retries++ >= qp->rnr_retry) {
				fail_at(qp, p->psn, QHCA_WC_RNR_RETRY_EXC_ERR);
				break;
			}
			{
				/* IBA table 45: 0 is 655.36 ms, n is about 10 us * 1.25^n. */
				static const uint32_t rnr_us[32] = {
					655360, 10, 20, 30, 40, 60, 80, 120, 160, 240, 320, 480,
					640, 960, 1280, 1920, 2560, 3840, 5120, 7680, 10240, 15360,
					20480, 30720, 40960, 61440, 81920, 122880, 163840, 245760,
					327680, 491520 };

				qp->rnr_wait = true;
				qhca_qp_set_deadline(e, qp, e->ops->now_ns(e->opaque) +
							    (uint64_t)rnr_us[syn & 0x1f] * 1000);
				qhca_timer_update(e);
			}
			break;
		case 3:		/* NAK */
			e->cnt.naks_received++;
			if (syn == 0x60) {	/* PSN sequence error: resend from its PSN */
				ack_until(qp, p->psn, false);
				retransmit_from(e, qp, p->psn);
			} else {
				ack_until(qp, p->psn, false);
				fail_at(qp, p->psn, syn == 0x61 ? QHCA_WC_REM_INV_REQ_ERR :
						    syn == 0x62 ? QHCA_WC_REM_ACCESS_ERR :
						    QHCA_WC_REM_OP_ERR);
			}
			break;
		default:
			break;
		}
	} else if (oi->flags & ROCE_F_READ) {
		ack_until(qp, p->psn, false);
		sw = oldest(qp);
		if (!sw || sw->hdr.opcode != QHCA_WR_RDMA_READ || p->psn != sw->read_next) {
			e->cnt.roce_rx_out_of_seq++;	/* a gap: the timer asks again */
			return;
		}
		{
			uint32_t k = (uint32_t)qhca_psn_diff(p->psn, sw->first_psn);
			uint64_t off = (uint64_t)k * qp->mtu;
			uint32_t want = sw->length - off < qp->mtu ? (uint32_t)(sw->length - off) :
				       qp->mtu;

			if (p->payload_len != want) {
				fail_at(qp, sw->first_psn, QHCA_WC_BAD_RESP_ERR);
			} else if (p->payload_len && wqe_xfer(e, sw, off, (uint8_t *)p->payload,
							      p->payload_len, true)) {
				fail_at(qp, sw->first_psn, QHCA_WC_LOC_PROT_ERR);
			} else {
				sw->read_next = (sw->read_next + 1) & 0xffffff;
				if (k == sw->npkts - 1) {
					sw->done = true;
					sw->status = QHCA_WC_SUCCESS;
				}
			}
		}
		qp->retries = 0;
	} else if (p->opcode == (ROCE_TS_RC | ROCE_OP_ATOMIC_ACKNOWLEDGE)) {
		ack_until(qp, p->psn, false);
		sw = oldest(qp);
		if (sw && is_rd_atomic(sw->hdr.opcode) && sw->hdr.opcode != QHCA_WR_RDMA_READ &&
		    sw->first_psn == p->psn) {
			uint64_t orig = p->atomic_orig;

			sw->done = true;
			sw->status = wqe_xfer(e, sw, 0, (uint8_t *)&orig, 8, true) ?
				     QHCA_WC_LOC_PROT_ERR : QHCA_WC_SUCCESS;
		}
		qp->retries = 0;
	}
	complete_ready(e, qp);
	if (qp->state == QHCA_QPS_RTS) {
		if (!qp->rnr_wait)
			arm_timer(e, qp);
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
	} else if (tx_stopped(e) && qp->tx_idx != qp->sq_next) {
		arm_timer(e, qp);	/* waiting for the platform to send, nothing lost */
		return;
	} else {
		e->cnt.timeouts++;
		if (qp->retries++ >= qp->retry_cnt) {
			qhca_log(e, QHCA_LOG_EVENT, "QP 0x%x: retry count exceeded", qp->qpn);
			sw->done = true;
			sw->status = QHCA_WC_RETRY_EXC_ERR;
			complete_ready(e, qp);
			return;
		}
	}
	retransmit_from(e, qp, sw->hdr.opcode == QHCA_WR_RDMA_READ ? sw->read_next :
				      sw->first_psn);
	arm_timer(e, qp);
	qhca_loopback_drain(e);
}

void qhca_req_flush(struct qhca_engine *e, struct qhca_qp *qp)
{
	/* Started WQEs from their snapshots, the rest from the ring: all complete flushed. */
	while (qp->sq.ci != qp->sq_next) {
		struct qhca_send_wqe *sw = slot(qp, qp->sq.ci);

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

/* Drop the region references of every WQE in the window (the QP is reset or destroyed). */
void qhca_req_release(struct qhca_qp *qp)
{
	uint32_t i;

	for (i = 0; i < QHCA_SQ_WINDOW; i++)
		qhca_sgl_release(&qp->win[i].sgl);
}

/* ---------------------------------------------------------------- the engine's timer */
void qhca_qp_set_deadline(struct qhca_engine *e, struct qhca_qp *qp, uint64_t deadline)
{
	qp->deadline = deadline;
	if (deadline == UINT64_MAX)
		qhca_list_del(&qp->timer_link);
	else if (qhca_list_empty(&qp->timer_link))
		qhca_list_add_tail(&e->timed_qps, &qp->timer_link);
}

void qhca_qp_unlink(struct qhca_engine *e, struct qhca_qp *qp)
{
	qp->deadline = UINT64_MAX;
	qhca_list_del(&qp->timer_link);
	qhca_list_del(&qp->tx_link);
}

/* Arm the platform's timer for the earliest deadline of the QPs that have one. */
void qhca_timer_update(struct qhca_engine *e)
{
	uint64_t next = UINT64_MAX;
	struct qhca_list *l;

	for (l = e->timed_qps.next; l != &e->timed_qps; l = l->next) {
		struct qhca_qp *qp = qhca_container_of(l, struct qhca_qp, timer_link);

		if (qp->deadline < next)
			next = qp->deadline;
	}
	if (e->ops->timer_arm)
		e->ops->timer_arm(e->opaque, next);
}

void qhca_engine_tx_block(struct qhca_engine *e)
{
	e->tx_blocked = true;
}

/* @qp has packets to send once the platform takes frames again. */
void qhca_tx_wait(struct qhca_engine *e, struct qhca_qp *qp)
{
	if (qhca_list_empty(&qp->tx_link))
		qhca_list_add_tail(&e->tx_waiters, &qp->tx_link);
}

/*
 * Let the QPs that were pushed back send, oldest first; one that is pushed back again
 * goes to the end of the line, so one busy QP cannot starve the others.
 */
static void run_requesters(struct qhca_engine *e)
{
	while (!tx_stopped(e) && !qhca_list_empty(&e->tx_waiters)) {
		struct qhca_qp *qp = qhca_container_of(e->tx_waiters.next, struct qhca_qp,
						       tx_link);

		qhca_list_del(&qp->tx_link);
		if (qhca_resp_pump(e, qp))
			qhca_req_run(e, qp);
	}
}

void qhca_engine_tx_resume(struct qhca_engine *e)
{
	e->tx_blocked = false;
	run_requesters(e);
	qhca_loopback_drain(e);
}

/* Run the timers that expired. A QP's handler may change any QP's deadline, so the scan
 * starts over after each; every handled QP leaves with a deadline in the future or none. */
void qhca_engine_timer(struct qhca_engine *e)
{
	uint64_t now = e->ops->now_ns(e->opaque);
	struct qhca_list *l;

again:
	for (l = e->timed_qps.next; l != &e->timed_qps; l = l->next) {
		struct qhca_qp *qp = qhca_container_of(l, struct qhca_qp, timer_link);

		if (qp->deadline <= now) {
			qhca_req_timer(e, qp, now);
			goto again;
		}
	}
	qhca_timer_update(e);
	qhca_loopback_drain(e);
}
