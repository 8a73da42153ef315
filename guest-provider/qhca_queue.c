// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * qhca provider datapath: completion queues, queue pairs and shared receive queues whose
 * rings live in this process's memory, work requests written there and announced with one
 * 64-bit store to the context's doorbell page, and completions polled from the ring.
 * No system call on post, doorbell or poll.
 */
#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <util/mmio.h>
#include <util/udma_barrier.h>

#include "qhca.h"

static void *ring_alloc(size_t size)
{
	void *p;

	size = (size + QHCA_PAGE_SIZE - 1) & ~(size_t)(QHCA_PAGE_SIZE - 1);
	if (posix_memalign(&p, QHCA_PAGE_SIZE, size))
		return NULL;
	memset(p, 0, size);
	return p;
}

static uint8_t log2_ceil(uint32_t v)
{
	uint8_t l = 0;

	while ((1u << l) < v)
		l++;
	return l;
}

static void ring_doorbell(struct qhca_context *ctx, uint32_t off, uint32_t num, uint32_t idx)
{
	/* WQEs and records must be visible before the device sees the doorbell. */
	udma_to_device_barrier();
	mmio_write64_le((uint8_t *)ctx->db_page + off, htole64((uint64_t)idx << 32 | num));
}

/* ---------------------------------------------------------------- completion queues */
struct ibv_cq *qhca_create_cq(struct ibv_context *context, int cqe,
			      struct ibv_comp_channel *channel, int comp_vector)
{
	struct qhca_ucreate_cq cmd = {};
	struct qhca_ucreate_cq_resp resp = {};
	struct qhca_cq *cq;
	uint8_t log2;

	if (cqe < 1 || cqe > (1 << 22) - 1) {
		errno = EINVAL;
		return NULL;
	}
	cq = calloc(1, sizeof(*cq));
	if (!cq)
		return NULL;
	log2 = log2_ceil((uint32_t)cqe + 1);
	cq->size = (sizeof(struct qhca_cqe) << log2) + sizeof(struct qhca_cq_dbrec);
	cq->ring = ring_alloc(cq->size);
	if (!cq->ring)
		goto err;
	cq->log2 = log2;
	cq->dbrec = (struct qhca_cq_dbrec *)((uint8_t *)cq->ring + (sizeof(struct qhca_cqe) << log2));
	pthread_spin_init(&cq->lock, PTHREAD_PROCESS_PRIVATE);
	cmd.drv.buf_addr = (uintptr_t)cq->ring;
	cmd.drv.log2_entries = log2;
	if (ibv_cmd_create_cq(context, cqe, channel, comp_vector, &cq->ibv_cq, &cmd.ibv_cmd,
			      sizeof(cmd), &resp.ibv_resp, sizeof(resp)))
		goto err;
	cq->cqn = resp.drv.cqn;
	return &cq->ibv_cq;
err:
	free(cq->ring);
	free(cq);
	return NULL;
}

int qhca_destroy_cq(struct ibv_cq *ibcq)
{
	struct qhca_cq *cq = to_qcq(ibcq);
	int ret;

	ret = ibv_cmd_destroy_cq(ibcq);
	if (ret)
		return ret;
	pthread_spin_destroy(&cq->lock);
	free(cq->ring);
	free(cq);
	return 0;
}

static enum ibv_wc_opcode wc_opcode(uint8_t op)
{
	switch (op) {
	case QHCA_WC_RDMA_WRITE:
		return IBV_WC_RDMA_WRITE;
	case QHCA_WC_RDMA_READ:
		return IBV_WC_RDMA_READ;
	case QHCA_WC_COMP_SWAP:
		return IBV_WC_COMP_SWAP;
	case QHCA_WC_FETCH_ADD:
		return IBV_WC_FETCH_ADD;
	case QHCA_WC_RECV:
		return IBV_WC_RECV;
	case QHCA_WC_RECV_RDMA_WITH_IMM:
		return IBV_WC_RECV_RDMA_WITH_IMM;
	default:
		return IBV_WC_SEND;
	}
}

int qhca_poll_cq(struct ibv_cq *ibcq, int ne, struct ibv_wc *wc)
{
	struct qhca_cq *cq = to_qcq(ibcq);
	uint32_t mask = (1u << cq->log2) - 1;
	int n = 0;

	pthread_spin_lock(&cq->lock);
	while (n < ne) {
		struct qhca_cqe *cqe = &cq->ring[cq->ci & mask];
		uint8_t phase = ((cq->ci >> cq->log2) & 1) ? 0 : QHCA_CQE_OWNER_PHASE;
		uint8_t flags;

		if ((*(volatile uint8_t *)&cqe->owner & QHCA_CQE_OWNER_PHASE) != phase)
			break;
		udma_from_device_barrier();	/* the CQE only after its owner byte */
		memset(&wc[n], 0, sizeof(wc[n]));
		wc[n].wr_id = le64toh(cqe->wr_id);
		wc[n].status = le32toh(cqe->qpn_status) >> QHCA_CQE_STATUS_SHIFT;
		wc[n].opcode = wc_opcode(cqe->opcode);
		wc[n].byte_len = le32toh(cqe->byte_len);
		wc[n].qp_num = le32toh(cqe->qpn_status) & QHCA_CQE_QPN_MASK;
		wc[n].src_qp = le32toh(cqe->src_qp_flags) & QHCA_CQE_SRC_QP_MASK;
		flags = le32toh(cqe->src_qp_flags) >> QHCA_CQE_FLAGS_SHIFT;
		if (flags & QHCA_CQE_FLAG_IMM) {
			wc[n].imm_data = htobe32(le32toh(cqe->imm));
			wc[n].wc_flags |= IBV_WC_WITH_IMM;
		} else if (flags & QHCA_CQE_FLAG_INV) {
			wc[n].invalidated_rkey = le32toh(cqe->imm);
			wc[n].wc_flags |= IBV_WC_WITH_INV;
		}
		if (flags & QHCA_CQE_FLAG_GRH)
			wc[n].wc_flags |= IBV_WC_GRH;
		cq->ci++;
		n++;
	}
	if (n)
		cq->dbrec->ci = htole32(cq->ci);
	pthread_spin_unlock(&cq->lock);
	return n;
}

int qhca_req_notify_cq(struct ibv_cq *ibcq, int solicited)
{
	struct qhca_cq *cq = to_qcq(ibcq);

	ring_doorbell(to_qctx(ibcq->context), solicited ? QHCA_DB_CQ_ARM_SE : QHCA_DB_CQ_ARM,
		      cq->cqn, cq->ci);
	return 0;
}

/* ---------------------------------------------------------------- queue pairs */
static uint8_t sq_stride_log2(const struct ibv_qp_cap *cap, bool ud)
{
	uint32_t data = cap->max_send_sge * sizeof(struct qhca_sge);

	if (cap->max_inline_data > data)
		data = cap->max_inline_data;
	return log2_ceil(sizeof(struct qhca_sq_wqe) + (ud ? sizeof(struct qhca_ud_seg) : 0) +
			 data);
}

static uint8_t rq_stride_log2(uint32_t max_sge)
{
	return log2_ceil(sizeof(struct qhca_rq_wqe) + (max_sge ? max_sge : 1) *
			 sizeof(struct qhca_sge));
}

struct ibv_qp *qhca_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *attr)
{
	struct qhca_context *ctx = to_qctx(pd->context);
	struct qhca_ucreate_qp cmd = {};
	struct qhca_ucreate_qp_resp resp = {};
	struct qhca_qp *qp;
	bool ud = attr->qp_type == IBV_QPT_UD;

	if (attr->qp_type != IBV_QPT_RC && attr->qp_type != IBV_QPT_UC && !ud) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	if (attr->cap.max_inline_data > ctx->max_inline_data) {
		errno = EINVAL;
		return NULL;
	}
	qp = calloc(1, sizeof(*qp));
	if (!qp)
		return NULL;
	pthread_spin_init(&qp->sq_lock, PTHREAD_PROCESS_PRIVATE);
	pthread_spin_init(&qp->rq_lock, PTHREAD_PROCESS_PRIVATE);
	qp->ud = ud;
	qp->sq.log2 = log2_ceil(attr->cap.max_send_wr ? attr->cap.max_send_wr : 1);
	qp->sq.stride_log2 = sq_stride_log2(&attr->cap, ud);
	qp->sq.buf = ring_alloc((size_t)1 << (qp->sq.log2 + qp->sq.stride_log2));
	if (!qp->sq.buf)
		goto err;
	if (!attr->srq) {
		qp->rq.log2 = log2_ceil(attr->cap.max_recv_wr ? attr->cap.max_recv_wr : 1);
		qp->rq.stride_log2 = rq_stride_log2(attr->cap.max_recv_sge);
		qp->rq.buf = ring_alloc((size_t)1 << (qp->rq.log2 + qp->rq.stride_log2));
		if (!qp->rq.buf)
			goto err;
	}
	qp->max_inline = attr->cap.max_inline_data;
	cmd.drv.sq_addr = (uintptr_t)qp->sq.buf;
	cmd.drv.rq_addr = (uintptr_t)qp->rq.buf;
	cmd.drv.sq_log2 = qp->sq.log2;
	cmd.drv.rq_log2 = qp->rq.log2;
	cmd.drv.sq_stride_log2 = qp->sq.stride_log2;
	cmd.drv.rq_stride_log2 = qp->rq.stride_log2;
	if (ibv_cmd_create_qp(pd, &qp->ibv_qp, attr, &cmd.ibv_cmd, sizeof(cmd), &resp.ibv_resp,
			      sizeof(resp)))
		goto err;
	qp->qpn = resp.drv.qpn;
	attr->cap.max_send_wr = 1u << qp->sq.log2;
	attr->cap.max_recv_wr = attr->srq ? 0 : 1u << qp->rq.log2;
	return &qp->ibv_qp;
err:
	free(qp->sq.buf);
	free(qp->rq.buf);
	free(qp);
	return NULL;
}

int qhca_query_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr, int mask,
		  struct ibv_qp_init_attr *init)
{
	struct ibv_query_qp cmd;

	return ibv_cmd_query_qp(ibqp, attr, mask, init, &cmd, sizeof(cmd));
}

int qhca_modify_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr, int mask)
{
	struct ibv_modify_qp cmd;

	return ibv_cmd_modify_qp(ibqp, attr, mask, &cmd, sizeof(cmd));
}

int qhca_destroy_qp(struct ibv_qp *ibqp)
{
	struct qhca_qp *qp = to_qqp(ibqp);
	int ret;

	ret = ibv_cmd_destroy_qp(ibqp);
	if (ret)
		return ret;
	free(qp->sq.buf);
	free(qp->rq.buf);
	free(qp);
	return 0;
}

static void *wqe_at(struct qhca_ring *r, uint32_t idx)
{
	return (uint8_t *)r->buf + ((size_t)(idx & ((1u << r->log2) - 1)) << r->stride_log2);
}

static int wr_opcode(enum ibv_wr_opcode op, uint8_t *out)
{
	switch (op) {
	case IBV_WR_RDMA_WRITE:
		*out = QHCA_WR_RDMA_WRITE;
		return 0;
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		*out = QHCA_WR_RDMA_WRITE_WITH_IMM;
		return 0;
	case IBV_WR_SEND:
		*out = QHCA_WR_SEND;
		return 0;
	case IBV_WR_SEND_WITH_IMM:
		*out = QHCA_WR_SEND_WITH_IMM;
		return 0;
	case IBV_WR_RDMA_READ:
		*out = QHCA_WR_RDMA_READ;
		return 0;
	case IBV_WR_ATOMIC_CMP_AND_SWP:
		*out = QHCA_WR_ATOMIC_CMP_AND_SWP;
		return 0;
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		*out = QHCA_WR_ATOMIC_FETCH_AND_ADD;
		return 0;
	case IBV_WR_SEND_WITH_INV:
		*out = QHCA_WR_SEND_WITH_INV;
		return 0;
	default:
		return EINVAL;
	}
}

static int build_send(struct qhca_qp *qp, const struct ibv_send_wr *wr, uint8_t *w)
{
	struct qhca_sq_wqe *h = (struct qhca_sq_wqe *)w;
	uint8_t *seg = w + sizeof(*h);
	uint8_t *end = w + (1u << qp->sq.stride_log2);
	int i;

	memset(h, 0, sizeof(*h));
	if (wr_opcode(wr->opcode, &h->opcode))
		return EINVAL;
	h->wr_id = htole64(wr->wr_id);
	h->flags = (wr->send_flags & IBV_SEND_SIGNALED ? QHCA_WQE_SIGNALED : 0) |
		   (wr->send_flags & IBV_SEND_SOLICITED ? QHCA_WQE_SOLICITED : 0) |
		   (wr->send_flags & IBV_SEND_FENCE ? QHCA_WQE_FENCE : 0);
	if (wr->opcode == IBV_WR_SEND_WITH_INV)
		h->imm_inv = htole32(wr->invalidate_rkey);
	else
		h->imm_inv = htole32(be32toh(wr->imm_data));
	switch (wr->opcode) {
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
	case IBV_WR_RDMA_READ:
		h->remote_addr = htole64(wr->wr.rdma.remote_addr);
		h->rkey = htole32(wr->wr.rdma.rkey);
		break;
	case IBV_WR_ATOMIC_CMP_AND_SWP:
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		h->remote_addr = htole64(wr->wr.atomic.remote_addr);
		h->rkey = htole32(wr->wr.atomic.rkey);
		h->compare_add = htole64(wr->wr.atomic.compare_add);
		h->swap = htole64(wr->wr.atomic.swap);
		break;
	default:
		break;
	}
	if (qp->ud) {
		struct qhca_ud_seg *ud = (struct qhca_ud_seg *)seg;

		if (!wr->wr.ud.ah)
			return EINVAL;
		memset(ud, 0, sizeof(*ud));
		ud->av = to_qah(wr->wr.ud.ah)->av;
		ud->dqpn = htole32(wr->wr.ud.remote_qpn);
		ud->qkey = htole32(wr->wr.ud.remote_qkey);
		seg += sizeof(*ud);
	}
	if (wr->send_flags & IBV_SEND_INLINE) {
		uint32_t len = 0;

		for (i = 0; i < wr->num_sge; i++) {
			if (len + wr->sg_list[i].length > qp->max_inline ||
			    seg + len + wr->sg_list[i].length > end)
				return EINVAL;
			memcpy(seg + len, (void *)(uintptr_t)wr->sg_list[i].addr,
			       wr->sg_list[i].length);
			len += wr->sg_list[i].length;
		}
		h->flags |= QHCA_WQE_INLINE;
		h->inline_len = htole32(len);
		return 0;
	}
	if (wr->num_sge < 0 || seg + (size_t)wr->num_sge * sizeof(struct qhca_sge) > end)
		return EINVAL;
	for (i = 0; i < wr->num_sge; i++) {
		struct qhca_sge *s = (struct qhca_sge *)seg + i;

		s->addr = htole64(wr->sg_list[i].addr);
		s->length = htole32(wr->sg_list[i].length);
		s->lkey = htole32(wr->sg_list[i].lkey);
	}
	h->num_sge = (uint8_t)wr->num_sge;
	return 0;
}

int qhca_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr, struct ibv_send_wr **bad_wr)
{
	struct qhca_qp *qp = to_qqp(ibqp);
	int ret = 0;

	pthread_spin_lock(&qp->sq_lock);
	for (; wr; wr = wr->next) {
		ret = build_send(qp, wr, wqe_at(&qp->sq, qp->sq.pi));
		if (ret) {
			*bad_wr = wr;
			break;
		}
		qp->sq.pi++;
	}
	ring_doorbell(to_qctx(ibqp->context), QHCA_DB_SQ, qp->qpn, qp->sq.pi);
	pthread_spin_unlock(&qp->sq_lock);
	return ret;
}

static int build_recv(struct qhca_ring *r, const struct ibv_recv_wr *wr)
{
	struct qhca_rq_wqe *h = wqe_at(r, r->pi);
	struct qhca_sge *s = (struct qhca_sge *)(h + 1);
	int i;

	if (wr->num_sge < 0 ||
	    sizeof(*h) + (size_t)wr->num_sge * sizeof(*s) > (1u << r->stride_log2))
		return EINVAL;
	h->wr_id = htole64(wr->wr_id);
	h->num_sge = htole32(wr->num_sge);
	h->rsvd = 0;
	for (i = 0; i < wr->num_sge; i++) {
		s[i].addr = htole64(wr->sg_list[i].addr);
		s[i].length = htole32(wr->sg_list[i].length);
		s[i].lkey = htole32(wr->sg_list[i].lkey);
	}
	r->pi++;
	return 0;
}

int qhca_post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad_wr)
{
	struct qhca_qp *qp = to_qqp(ibqp);
	int ret = 0;

	if (ibqp->srq)
		return EINVAL;
	pthread_spin_lock(&qp->rq_lock);
	for (; wr; wr = wr->next) {
		ret = build_recv(&qp->rq, wr);
		if (ret) {
			*bad_wr = wr;
			break;
		}
	}
	ring_doorbell(to_qctx(ibqp->context), QHCA_DB_RQ, qp->qpn, qp->rq.pi);
	pthread_spin_unlock(&qp->rq_lock);
	return ret;
}

/* ---------------------------------------------------------------- shared receive queues */
struct ibv_srq *qhca_create_srq(struct ibv_pd *pd, struct ibv_srq_init_attr *attr)
{
	struct qhca_ucreate_srq cmd = {};
	struct qhca_ucreate_srq_resp resp = {};
	struct qhca_srq *srq;

	srq = calloc(1, sizeof(*srq));
	if (!srq)
		return NULL;
	pthread_spin_init(&srq->lock, PTHREAD_PROCESS_PRIVATE);
	srq->rq.log2 = log2_ceil(attr->attr.max_wr ? attr->attr.max_wr : 1);
	srq->rq.stride_log2 = rq_stride_log2(attr->attr.max_sge);
	srq->rq.buf = ring_alloc((size_t)1 << (srq->rq.log2 + srq->rq.stride_log2));
	if (!srq->rq.buf)
		goto err;
	cmd.drv.buf_addr = (uintptr_t)srq->rq.buf;
	cmd.drv.log2 = srq->rq.log2;
	cmd.drv.stride_log2 = srq->rq.stride_log2;
	if (ibv_cmd_create_srq(pd, &srq->ibv_srq, attr, &cmd.ibv_cmd, sizeof(cmd), &resp.ibv_resp,
			       sizeof(resp)))
		goto err;
	srq->srqn = resp.drv.srqn;
	return &srq->ibv_srq;
err:
	free(srq->rq.buf);
	free(srq);
	return NULL;
}

int qhca_modify_srq(struct ibv_srq *ibsrq, struct ibv_srq_attr *attr, int mask)
{
	struct ibv_modify_srq cmd;

	return ibv_cmd_modify_srq(ibsrq, attr, mask, &cmd, sizeof(cmd));
}

int qhca_query_srq(struct ibv_srq *ibsrq, struct ibv_srq_attr *attr)
{
	struct ibv_query_srq cmd;

	return ibv_cmd_query_srq(ibsrq, attr, &cmd, sizeof(cmd));
}

int qhca_destroy_srq(struct ibv_srq *ibsrq)
{
	struct qhca_srq *srq = to_qsrq(ibsrq);
	int ret;

	ret = ibv_cmd_destroy_srq(ibsrq);
	if (ret)
		return ret;
	free(srq->rq.buf);
	free(srq);
	return 0;
}

int qhca_post_srq_recv(struct ibv_srq *ibsrq, struct ibv_recv_wr *wr,
		       struct ibv_recv_wr **bad_wr)
{
	struct qhca_srq *srq = to_qsrq(ibsrq);
	int ret = 0;

	pthread_spin_lock(&srq->lock);
	for (; wr; wr = wr->next) {
		ret = build_recv(&srq->rq, wr);
		if (ret) {
			*bad_wr = wr;
			break;
		}
	}
	ring_doorbell(to_qctx(ibsrq->context), QHCA_DB_SRQ, srq->srqn, srq->rq.pi);
	pthread_spin_unlock(&srq->lock);
	return ret;
}
