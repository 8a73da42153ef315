// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * qhca requester (IBA 9.7.4 for RC, 9.8 for UC and UD): send WQEs are read and checked
 * into snapshots the guest cannot change, split into packets of the path MTU with their
 * PSNs and sent in order, from a cursor per WQE so that the platform can push back between
 * any two packets; go-back-N retransmission moves those cursors back.
 */
#include <stdlib.h>
#include <string.h>

#include "engine_internal.h"

static bool op_allowed(uint8_t type, uint8_t op)
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
	if (qp->type == QHCA_QPT_UD || qp->type == QHCA_QPT_GSI) {
		if (qhca_wq_read(e, &qp->sq, idx, off, &sw->ud, sizeof(sw->ud)) ||
		    roce_gid_is_v4(sw->ud.av.sgid) != roce_gid_is_v4(sw->ud.av.dgid))
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
int qhca_wqe_xfer(struct qhca_engine *e, struct qhca_send_wqe *sw, uint64_t off, uint8_t *buf,
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

/* Send packet @k of @sw (a READ request restarts at response packet @k); -1 if its data
 * cannot be gathered (a region went away under the message). */
static int send_packet(struct qhca_engine *e, struct qhca_qp *qp, struct qhca_send_wqe *sw,
			uint32_t k)
{
	bool ud = qp->type == QHCA_QPT_UD || qp->type == QHCA_QPT_GSI;
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

		len = sw->length - off < qp->mtu ? (uint32_t)(sw->length - off) : qp->mtu;
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
		/* Ask for an ACK at the end of a message and every 16 packets within one. */
		p.ackreq = k == sw->npkts - 1 || (k & 15) == 15;
		p.se = k == sw->npkts - 1 && (sw->hdr.flags & QHCA_WQE_SOLICITED);
	}
	p.xrc_srqn = sw->hdr.xrc_srqn & QHCA_XRC_SRQN_MASK;	/* sent by XRC only */
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

/* ---------------------------------------------------------------- requester */
/* Send what @sw still owes from its cursor; false when the platform pushed back. */
static bool tx_wqe(struct qhca_engine *e, struct qhca_qp *qp, struct qhca_send_wqe *sw)
{
	while (sw->tx_next < sw->npkts) {
		if (qhca_tx_stopped(e))
			return false;
		if (send_packet(e, qp, sw, sw->tx_next)) {
			/* The WQE fails here; the QP goes to the error state when it completes. */
			sw->tx_next = sw->npkts;
			sw->done = true;
			sw->status = QHCA_WC_LOC_PROT_ERR;
			return true;
		}
		/* A READ request asks for all responses from its cursor at once. */
		sw->tx_next = qhca_wr_is_rd_atomic(sw->hdr.opcode) ? sw->npkts : sw->tx_next + 1;
	}
	/* UC and UD complete once sent; RC and XRC when acknowledged. */
	if (!qhca_qp_reliable(qp))
		sw->done = true;
	return true;
}

/* Send, in PSN order, every packet that started WQEs still owe; false if pushed back. */
static bool tx_pump(struct qhca_engine *e, struct qhca_qp *qp)
{
	if ((int32_t)(qp->tx_idx - qp->sq.ci) < 0)
		qp->tx_idx = qp->sq.ci;
	for (; qp->tx_idx != qp->sq_next; qp->tx_idx++) {
		struct qhca_send_wqe *sw = qhca_sq_slot(qp, qp->tx_idx);

		if (!sw->done && !tx_wqe(e, qp, sw)) {
			qhca_tx_wait(e, qp);
			return false;
		}
	}
	return true;
}

_Static_assert(sizeof(struct qhca_bind_mw_seg) == sizeof(struct qhca_reg_mr_seg),
	       "wqe_load reads either segment as sw->reg");

/* REG_MR, BIND_MW and LOCAL_INV, executed when the requester reaches them in SQ order. */
static uint8_t local_op(struct qhca_engine *e, struct qhca_qp *qp, struct qhca_send_wqe *sw)
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

/* Start the WQEs posted, up to the window, and send them; true if any started. */
static bool start_wqes(struct qhca_engine *e, struct qhca_qp *qp)
{
	bool sent = false;

	/* Started messages go out whole before the next one starts, also in SQD. */
	while (tx_pump(e, qp) && qp->sq_next != qp->sq.pi &&
	       qp->sq_next - qp->sq.ci < QHCA_SQ_WINDOW && qp->state == QHCA_QPS_RTS &&
	       !sq_failed(qp)) {
		struct qhca_send_wqe *sw = qhca_sq_slot(qp, qp->sq_next);
		uint8_t status;

		status = wqe_load(e, qp, qp->sq_next, sw);
		if (status == QHCA_WC_SUCCESS && qhca_wr_is_local(sw->hdr.opcode)) {
			/* A fenced one waits until every earlier WQE has completed. */
			if ((sw->hdr.flags & QHCA_WQE_FENCE) && qp->sq.ci != qp->sq_next)
				break;
			qp->sq_next++;
			sw->done = true;
			sw->status = local_op(e, qp, sw);
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
		sw->npkts = sw->length ? (uint32_t)((sw->length + qp->mtu - 1) / qp->mtu) : 1;
		if (sw->hdr.opcode != QHCA_WR_RDMA_READ && qhca_wr_is_rd_atomic(sw->hdr.opcode))
			sw->npkts = 1;
		sw->first_psn = qp->psn;
		sw->last_psn = (qp->psn + sw->npkts - 1) & 0xffffff;
		sw->read_next = sw->first_psn;
		sw->tx_next = 0;
		qp->psn = (qp->psn + sw->npkts) & 0xffffff;
		if (qhca_wr_is_rd_atomic(sw->hdr.opcode))
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
		qhca_comp_ready(e, qp);
	} while (qp->sq.ci != ci && qp->sq_next != qp->sq.pi && qp->state == QHCA_QPS_RTS &&
		 !qhca_tx_stopped(e));
	if (sent && qp->deadline == UINT64_MAX)
		qhca_comp_arm_timer(e, qp);
	if (qhca_tx_stopped(e) && qp->sq_next != qp->sq.pi && qp->state == QHCA_QPS_RTS)
		qhca_tx_wait(e, qp);	/* WQEs posted that did not start */
	qhca_loopback_drain(e);
}

/*
 * Send again everything not acknowledged from @psn on (go back N): move the cursors of the
 * WQEs concerned back, then send. READs ask again for the responses not yet received.
 */
void qhca_req_retransmit(struct qhca_engine *e, struct qhca_qp *qp, uint32_t psn)
{
	bool first = true;
	uint32_t i, k;

	for (i = qp->sq.ci; i != qp->sq_next; i++) {
		struct qhca_send_wqe *sw = qhca_sq_slot(qp, i);

		if (sw->done)
			continue;
		if (sw->hdr.opcode == QHCA_WR_RDMA_READ)
			k = (uint32_t)qhca_psn_diff(sw->read_next, sw->first_psn);
		else if (qhca_psn_diff(sw->last_psn, psn) < 0)
			continue;
		else if (qhca_psn_diff(psn, sw->first_psn) <= 0 || qhca_wr_is_rd_atomic(sw->hdr.opcode))
			k = 0;
		else
			k = (uint32_t)qhca_psn_diff(psn, sw->first_psn);
		if (k >= sw->tx_next)
			continue;	/* not sent yet anyway */
		e->cnt.retransmits += qhca_wr_is_rd_atomic(sw->hdr.opcode) ? 1 : sw->tx_next - k;
		sw->tx_next = k;
		if (first && (int32_t)(i - qp->tx_idx) < 0)
			qp->tx_idx = i;
		first = false;
	}
	tx_pump(e, qp);
}

/* Drop the region references of every WQE in the window (the QP is reset or destroyed). */
void qhca_req_release(struct qhca_qp *qp)
{
	uint32_t i;

	for (i = 0; i < QHCA_SQ_WINDOW; i++)
		qhca_sgl_release(&qp->win[i].sgl);
}

