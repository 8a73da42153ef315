// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * qhca provider: completion queues. The ring lives in this process's memory; completions
 * are polled from it (ibv_poll_cq or the extended CQ's start/next/end_poll) with no system
 * call, each freeing the ring slots of its QP or SRQ, and the CQ is armed with one store to
 * the context's doorbell page.
 */
#include <endian.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <util/udma_barrier.h>

#include "qhca.h"

/* A receive from an XRC SRQ? Its source QP field holds the SRQ's XRC SRQ number. */
static bool cqe_xrc(const struct qhca_cqe *cqe)
{
	return cqe->opcode >= QHCA_WC_RECV &&
	       (QHCA_FIELD_GET(QHCA_CQE_FLAGS_MASK, le32toh(cqe->src_qp_flags)) &
		QHCA_CQE_FLAG_XRC);
}

/* ---------------------------------------------------------------- QPs by number */
/* The QP numbered @qpn, or NULL; ctx->qp_lock is held. */
static struct qhca_qp *qp_find(struct qhca_context *ctx, uint32_t qpn)
{
	struct qhca_qp *qp;

	for (qp = ctx->qp_hash[qpn & ctx->qp_hash_mask]; qp && qp->qpn != qpn; qp = qp->hash_next)
		;
	return qp;
}

/* The ring a receive CQE of an XRC SRQ took its WQE from; ctx->qp_lock is held. */
static struct qhca_ring *xrc_srq_ring(struct qhca_context *ctx, uint32_t xrc_srqn)
{
	struct qhca_srq *srq;

	for (srq = ctx->srq_hash[xrc_srqn % QHCA_QP_HASH]; srq && srq->xrc_srqn != xrc_srqn;
	     srq = srq->hash_next)
		;
	return srq ? &srq->rq : NULL;
}

/*
 * A polled CQE frees ring slots (abi/qhca_abi.h): a send completion every SQ slot up to its
 * WQE, a receive completion one slot of the RQ or SRQ (the device takes receive WQEs in
 * ring order and copies them). The QP is found by the CQE's QP number, but an XRC SRQ by
 * the number in the CQE (the QP is an XRC_TGT QP, perhaps of another process). A CQE that
 * would free more than is outstanding (left from before a reset to RESET) frees nothing.
 */
static void cqe_retire(struct qhca_context *ctx, const struct qhca_cqe *cqe)
{
	uint32_t qpn = QHCA_FIELD_GET(QHCA_CQE_QPN_MASK, le32toh(cqe->qpn_status));
	uint32_t idx = QHCA_FIELD_GET(QHCA_CQE_WQE_INDEX_MASK, le32toh(cqe->src_qp_flags));
	struct qhca_ring *r = NULL;
	struct qhca_qp *qp;
	uint32_t ci, n = 1;

	pthread_mutex_lock(&ctx->qp_lock);
	if (cqe_xrc(cqe)) {
		r = xrc_srq_ring(ctx, QHCA_FIELD_GET(QHCA_CQE_SRC_QP_MASK,
						     le32toh(cqe->src_qp_flags)));
	} else {
		qp = qp_find(ctx, qpn);
		if (qp && cqe->opcode < QHCA_WC_RECV) {
			r = &qp->sq;
			ci = __atomic_load_n(&r->ci, __ATOMIC_RELAXED);
			/* The WQE's index mod 2^24, the width of its field: so is the count. */
			n = QHCA_FIELD_GET(QHCA_CQE_WQE_INDEX_MASK, idx + 1 - ci);
		} else if (qp) {
			r = qp->srq ? &qp->srq->rq : &qp->rq;
		}
	}
	if (r) {
		ci = __atomic_load_n(&r->ci, __ATOMIC_RELAXED);
		if (n <= __atomic_load_n(&r->pi, __ATOMIC_RELAXED) - ci)
			__atomic_fetch_add(&r->ci, n, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&ctx->qp_lock);
}

/* ---------------------------------------------------------------- completion queues */
/* A CQ with its ring for @cqe entries; the caller creates it in the kernel. */
static struct qhca_cq *cq_alloc(struct qhca_context *ctx, uint32_t cqe, struct qhca_pd *parent,
				struct qhca_create_cq_cmd *drv)
{
	struct qhca_cq *cq;
	uint32_t log2;

	if (cqe < 1 || cqe > ctx->max_cqe) {
		errno = EINVAL;
		return NULL;
	}
	cq = calloc(1, sizeof(*cq));
	if (!cq)
		return NULL;
	log2 = qhca_log2_ceil((uint64_t)cqe + 1);	/* one slot stays empty */
	cq->size = (sizeof(struct qhca_cqe) << log2) + sizeof(struct qhca_cq_dbrec);
	cq->parent = parent;
	cq->ring = qhca_buf_alloc(parent, cq->size, QHCA_RES_TYPE_CQ, &cq->custom);
	if (!cq->ring) {
		free(cq);
		return NULL;
	}
	cq->log2 = log2;
	cq->dbrec = (struct qhca_cq_dbrec *)((uint8_t *)cq->ring + (sizeof(struct qhca_cqe) << log2));
	pthread_spin_init(&cq->lock, PTHREAD_PROCESS_PRIVATE);
	drv->buf_addr = (uintptr_t)cq->ring;
	drv->log2_entries = log2;
	return cq;
}

/*
 * ibv_resize_cq: a new ring; the device moves the completions not yet polled to its start
 * and both sides start over at index 0. Nobody polls meanwhile (the CQ's lock).
 */
int qhca_resize_cq(struct ibv_cq *ibcq, int cqe)
{
	struct qhca_context *ctx = to_qctx(ibcq->context);
	struct qhca_cq *cq = to_qcq(ibcq);
	struct ib_uverbs_resize_cq_resp resp;
	struct qhca_uresize_cq cmd = {};
	uint32_t log2;
	bool custom;
	size_t size;
	void *ring;
	int ret;

	if (cqe < 1 || (uint32_t)cqe > ctx->max_cqe)
		return EINVAL;
	log2 = qhca_log2_ceil((uint64_t)cqe + 1);	/* one slot stays empty */
	size = (sizeof(struct qhca_cqe) << log2) + sizeof(struct qhca_cq_dbrec);
	ring = qhca_buf_alloc(cq->parent, size, QHCA_RES_TYPE_CQ, &custom);
	if (!ring)
		return ENOMEM;
	cmd.drv_payload.buf_addr = (uintptr_t)ring;
	cmd.drv_payload.log2_entries = log2;
	pthread_spin_lock(&cq->lock);
	ret = ibv_cmd_resize_cq(ibcq, cqe, &cmd.ibv_cmd, sizeof(cmd), &resp, sizeof(resp));
	if (ret) {
		pthread_spin_unlock(&cq->lock);
		qhca_buf_free(cq->parent, custom, ring, size, QHCA_RES_TYPE_CQ);
		return ret;
	}
	qhca_buf_free(cq->parent, cq->custom, cq->ring, cq->size, QHCA_RES_TYPE_CQ);
	cq->custom = custom;
	cq->ring = ring;
	cq->size = size;
	cq->log2 = log2;
	cq->ci = 0;
	cq->dbrec = (struct qhca_cq_dbrec *)((uint8_t *)ring + (sizeof(struct qhca_cqe) << log2));
	pthread_spin_unlock(&cq->lock);
	return 0;
}

static void cq_free(struct qhca_cq *cq)
{
	pthread_spin_destroy(&cq->lock);
	qhca_buf_free(cq->parent, cq->custom, cq->ring, cq->size, QHCA_RES_TYPE_CQ);
	free(cq);
}

struct ibv_cq *qhca_create_cq(struct ibv_context *context, int cqe,
			      struct ibv_comp_channel *channel, int comp_vector)
{
	struct qhca_ucreate_cq cmd = {};
	struct qhca_ucreate_cq_resp resp = {};
	struct qhca_cq *cq;

	if (cqe < 1) {
		errno = EINVAL;
		return NULL;
	}
	cq = cq_alloc(to_qctx(context), (uint32_t)cqe, NULL, &cmd.drv_payload);
	if (!cq)
		return NULL;
	if (ibv_cmd_create_cq(context, cqe, channel, comp_vector, &cq->vcq.cq, &cmd.ibv_cmd,
			      sizeof(cmd), &resp.ibv_resp, sizeof(resp))) {
		cq_free(cq);
		return NULL;
	}
	cq->cqn = resp.cqn;
	return &cq->vcq.cq;
}

/* ---------------------------------------------------------------- extended CQ */
static enum ibv_wc_opcode wc_opcode(uint8_t op);

static struct qhca_cq *to_qcq_ex(struct ibv_cq_ex *ex)
{
	return container_of(ex, struct qhca_cq, vcq.cq_ex);
}

/* The CQE at @ci if the device has written it (then read the rest only after this). */
static struct qhca_cqe *cqe_valid(struct qhca_cq *cq, uint32_t ci)
{
	struct qhca_cqe *cqe = &cq->ring[ci & ((1u << cq->log2) - 1)];
	uint8_t phase = ((ci >> cq->log2) & 1) ? 0 : QHCA_CQE_OWNER_PHASE;

	if ((*(volatile uint8_t *)&cqe->owner & QHCA_CQE_OWNER_PHASE) != phase)
		return NULL;
	udma_from_device_barrier();	/* the CQE only after its owner byte */
	return cqe;
}

/* The next CQE to report, past those dropped (QHCA_CQE_OPCODE_STALE); the CQ is locked. */
static struct qhca_cqe *cqe_next(struct qhca_cq *cq)
{
	struct qhca_cqe *cqe;

	while ((cqe = cqe_valid(cq, cq->ci)) && cqe->opcode == QHCA_CQE_OPCODE_STALE)
		cq->ci++;
	return cqe;
}

/*
 * A QP went to RESET or away (@xrc false, @num its number), or an XRC SRQ went away (@xrc
 * true, @num its XRC SRQ number): its completions not yet polled are dropped (as mlx5 does
 * for QPs), each freeing its ring slots first (an SRQ outlives the QP). Receives of an XRC
 * SRQ belong to the SRQ, not to the XRC_TGT QP whose number they carry.
 */
void qhca_cq_clean(struct qhca_cq *cq, uint32_t num, bool xrc)
{
	struct qhca_cqe *cqe;
	uint32_t ci, n;

	pthread_spin_lock(&cq->lock);
	for (ci = cq->ci; ci - cq->ci < (1u << cq->log2) && (cqe = cqe_valid(cq, ci)); ci++) {
		n = xrc ? QHCA_FIELD_GET(QHCA_CQE_SRC_QP_MASK, le32toh(cqe->src_qp_flags)) :
		    QHCA_FIELD_GET(QHCA_CQE_QPN_MASK, le32toh(cqe->qpn_status));
		if (n == num && cqe_xrc(cqe) == xrc && cqe->opcode != QHCA_CQE_OPCODE_STALE) {
			cqe_retire(to_qctx(cq->vcq.cq.context), cqe);
			cqe->opcode = QHCA_CQE_OPCODE_STALE;
		}
	}
	pthread_spin_unlock(&cq->lock);
}

/* Take the CQE at ci if it is valid; fill the fields start_poll/next_poll must set. */
static int cq_ex_take(struct qhca_cq *cq)
{
	struct qhca_cqe *cqe = cqe_next(cq);

	if (!cqe)
		return ENOENT;
	cq->cur = cqe;
	cq->ci++;
	cqe_retire(to_qctx(cq->vcq.cq.context), cqe);
	cq->vcq.cq_ex.wr_id = le64toh(cqe->wr_id);
	cq->vcq.cq_ex.status = QHCA_FIELD_GET(QHCA_CQE_STATUS_MASK, le32toh(cqe->qpn_status));
	return 0;
}

static int cq_ex_start_poll(struct ibv_cq_ex *ex, struct ibv_poll_cq_attr *attr)
{
	struct qhca_cq *cq = to_qcq_ex(ex);
	int ret;

	if (attr->comp_mask)
		return EINVAL;
	pthread_spin_lock(&cq->lock);
	ret = cq_ex_take(cq);
	if (ret)
		pthread_spin_unlock(&cq->lock);
	return ret;
}

static int cq_ex_next_poll(struct ibv_cq_ex *ex)
{
	return cq_ex_take(to_qcq_ex(ex));
}

static void cq_ex_end_poll(struct ibv_cq_ex *ex)
{
	struct qhca_cq *cq = to_qcq_ex(ex);

	cq->dbrec->ci = htole32(cq->ci);
	pthread_spin_unlock(&cq->lock);
}

static enum ibv_wc_opcode cq_ex_read_opcode(struct ibv_cq_ex *ex)
{
	return wc_opcode(to_qcq_ex(ex)->cur->opcode);
}

static uint32_t cq_ex_read_vendor_err(struct ibv_cq_ex *ex)
{
	return 0;
}

static uint32_t cq_ex_read_byte_len(struct ibv_cq_ex *ex)
{
	return le32toh(to_qcq_ex(ex)->cur->byte_len);
}

/* Immediate data, or the invalidated rkey in host order: ibv_wc_read_invalidated_rkey()
 * reads it through this same call. */
static __be32 cq_ex_read_imm_data(struct ibv_cq_ex *ex)
{
	const struct qhca_cqe *cqe = to_qcq_ex(ex)->cur;

	if (QHCA_FIELD_GET(QHCA_CQE_FLAGS_MASK, le32toh(cqe->src_qp_flags)) & QHCA_CQE_FLAG_INV)
		return (__be32)le32toh(cqe->imm);
	return htobe32(le32toh(cqe->imm));
}

static uint32_t cq_ex_read_qp_num(struct ibv_cq_ex *ex)
{
	return QHCA_FIELD_GET(QHCA_CQE_QPN_MASK, le32toh(to_qcq_ex(ex)->cur->qpn_status));
}

/* Receives: the sender's QP (UD); 0 for XRC, whose field holds the XRC SRQ number. */
static uint32_t cq_ex_read_src_qp(struct ibv_cq_ex *ex)
{
	const struct qhca_cqe *cqe = to_qcq_ex(ex)->cur;

	return cqe->opcode >= QHCA_WC_RECV && !cqe_xrc(cqe) ?
	       QHCA_FIELD_GET(QHCA_CQE_SRC_QP_MASK, le32toh(cqe->src_qp_flags)) : 0;
}

static unsigned int cq_ex_read_wc_flags(struct ibv_cq_ex *ex)
{
	uint8_t f = QHCA_FIELD_GET(QHCA_CQE_FLAGS_MASK, le32toh(to_qcq_ex(ex)->cur->src_qp_flags));

	return (f & QHCA_CQE_FLAG_IMM ? IBV_WC_WITH_IMM : 0) |
	       (f & QHCA_CQE_FLAG_INV ? IBV_WC_WITH_INV : 0) |
	       (f & QHCA_CQE_FLAG_GRH ? IBV_WC_GRH : 0);
}

/* The SL of a UD receive: the LRH's on an InfiniBand port; over RoCE the network header
 * type, as ConnectX reports it (QHCA_WC_SL_*). */
static uint8_t cqe_sl(const struct qhca_cqe *cqe)
{
	uint8_t f = QHCA_FIELD_GET(QHCA_CQE_FLAGS_MASK, le32toh(cqe->src_qp_flags));

	return f & QHCA_CQE_FLAG_IB ? cqe->ib.sl : QHCA_WC_SL_OF_FLAGS(f);
}

static bool cqe_ib(const struct qhca_cqe *cqe)
{
	return QHCA_FIELD_GET(QHCA_CQE_FLAGS_MASK, le32toh(cqe->src_qp_flags)) & QHCA_CQE_FLAG_IB;
}

static uint8_t cq_ex_read_sl(struct ibv_cq_ex *ex)
{
	return cqe_sl(to_qcq_ex(ex)->cur);
}

/* LIDs: on an InfiniBand port only (RoCE has none). */
static uint32_t cq_ex_read_slid(struct ibv_cq_ex *ex)
{
	const struct qhca_cqe *cqe = to_qcq_ex(ex)->cur;

	return cqe_ib(cqe) ? le16toh(cqe->ib.slid) : 0;
}

static uint8_t cq_ex_read_dlid_path_bits(struct ibv_cq_ex *ex)
{
	const struct qhca_cqe *cqe = to_qcq_ex(ex)->cur;

	return cqe_ib(cqe) ? cqe->ib.dlid_path_bits : 0;
}

struct ibv_cq_ex *qhca_create_cq_ex(struct ibv_context *context,
				   struct ibv_cq_init_attr_ex *attr)
{
	struct qhca_ucreate_cq_ex cmd = {};
	struct qhca_ucreate_cq_ex_resp resp = {};
	struct ibv_cq_ex *ex;
	struct qhca_cq *cq;

	struct qhca_pd *parent = NULL;

	/* The standard work completion fields; no timestamps, tags or flow tags. */
	if ((attr->wc_flags & ~(uint64_t)IBV_WC_STANDARD_FLAGS) ||
	    (attr->comp_mask & ~(uint32_t)(IBV_CQ_INIT_ATTR_MASK_FLAGS |
					   IBV_CQ_INIT_ATTR_MASK_PD)) ||
	    ((attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS) && attr->flags)) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	if (attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_PD) {
		/* Only a parent domain: its allocators give the ring. */
		if (!attr->parent_domain || !to_qpd(attr->parent_domain)->protection) {
			errno = EINVAL;
			return NULL;
		}
		parent = qhca_parent_of(attr->parent_domain);
	}
	cq = cq_alloc(to_qctx(context), attr->cqe, parent, &cmd.drv_payload);
	if (!cq)
		return NULL;
	if (qhca_cmd_create_cq_ex(context, attr, &cq->vcq, &cmd.ibv_cmd, sizeof(cmd),
				  &resp.ibv_resp, sizeof(resp))) {
		cq_free(cq);
		return NULL;
	}
	cq->cqn = resp.cqn;
	ex = &cq->vcq.cq_ex;
	ex->start_poll = cq_ex_start_poll;
	ex->next_poll = cq_ex_next_poll;
	ex->end_poll = cq_ex_end_poll;
	ex->read_opcode = cq_ex_read_opcode;
	ex->read_vendor_err = cq_ex_read_vendor_err;
	ex->read_byte_len = cq_ex_read_byte_len;
	ex->read_imm_data = cq_ex_read_imm_data;
	ex->read_qp_num = cq_ex_read_qp_num;
	ex->read_src_qp = cq_ex_read_src_qp;
	ex->read_wc_flags = cq_ex_read_wc_flags;
	ex->read_slid = cq_ex_read_slid;
	ex->read_sl = cq_ex_read_sl;
	ex->read_dlid_path_bits = cq_ex_read_dlid_path_bits;
	return ex;
}

int qhca_destroy_cq(struct ibv_cq *ibcq)
{
	struct qhca_cq *cq = to_qcq(ibcq);
	int ret;

	ret = ibv_cmd_destroy_cq(ibcq);
	if (ret)
		return ret;
	cq_free(cq);
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
	case QHCA_WC_BIND_MW:
		return IBV_WC_BIND_MW;
	case QHCA_WC_ATOMIC_WRITE:
		return IBV_WC_ATOMIC_WRITE;
	case QHCA_WC_LOCAL_INV:
		return IBV_WC_LOCAL_INV;
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
	int n = 0;

	pthread_spin_lock(&cq->lock);
	while (n < ne) {
		struct qhca_cqe *cqe = cqe_next(cq);
		uint8_t flags;

		if (!cqe)
			break;
		memset(&wc[n], 0, sizeof(wc[n]));
		wc[n].wr_id = le64toh(cqe->wr_id);
		wc[n].status = QHCA_FIELD_GET(QHCA_CQE_STATUS_MASK, le32toh(cqe->qpn_status));
		wc[n].opcode = wc_opcode(cqe->opcode);
		wc[n].byte_len = le32toh(cqe->byte_len);
		wc[n].qp_num = QHCA_FIELD_GET(QHCA_CQE_QPN_MASK, le32toh(cqe->qpn_status));
		if (cqe->opcode >= QHCA_WC_RECV && !cqe_xrc(cqe))	/* XRC: the SRQ's */
			wc[n].src_qp = QHCA_FIELD_GET(QHCA_CQE_SRC_QP_MASK,
						      le32toh(cqe->src_qp_flags));
		flags = QHCA_FIELD_GET(QHCA_CQE_FLAGS_MASK, le32toh(cqe->src_qp_flags));
		if (flags & QHCA_CQE_FLAG_IMM) {
			wc[n].imm_data = htobe32(le32toh(cqe->imm));
			wc[n].wc_flags |= IBV_WC_WITH_IMM;
		} else if (flags & QHCA_CQE_FLAG_INV) {
			wc[n].invalidated_rkey = le32toh(cqe->imm);
			wc[n].wc_flags |= IBV_WC_WITH_INV;
		}
		if (flags & QHCA_CQE_FLAG_GRH)
			wc[n].wc_flags |= IBV_WC_GRH;
		wc[n].sl = cqe_sl(cqe);
		if (flags & QHCA_CQE_FLAG_IB) {
			wc[n].slid = le16toh(cqe->ib.slid);
			wc[n].dlid_path_bits = cqe->ib.dlid_path_bits;
		}
		cqe_retire(to_qctx(ibcq->context), cqe);
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

	qhca_ring_doorbell(to_qctx(ibcq->context),
			   solicited ? QHCA_DB_CQ_ARM_SE : QHCA_DB_CQ_ARM, cq->cqn, cq->ci);
	return 0;
}
