// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * qhca provider: shared receive queues, ordinary and XRC, their rings in this process's
 * memory (or a parent domain's); an XRC SRQ is found by the poller by its XRC SRQ number.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "qhca.h"

/* ---------------------------------------------------------------- shared receive queues */
/* An SRQ with its ring for @attr; fills the driver part of the command. */
static struct qhca_srq *srq_alloc(struct qhca_context *ctx, struct ibv_pd *pd,
				  const struct ibv_srq_attr *attr, struct qhca_create_srq_cmd *drv)
{
	struct qhca_ring rq = {};
	struct qhca_srq *srq;
	int err;

	err = attr->max_sge > ctx->max_srq_sge ? EINVAL :
	      qhca_ring_entries_log2(attr->max_wr, ctx->max_srq_wr, &rq.log2);
	if (!err)
		err = qhca_rq_stride_log2(attr->max_sge, &rq.stride_log2);
	/* The device arms the limit only below the ring's size. */
	if (!err && attr->srq_limit > 1u << rq.log2)
		err = EINVAL;
	if (err) {
		errno = err;
		return NULL;
	}
	srq = calloc(1, sizeof(*srq));
	if (!srq)
		return NULL;
	pthread_spin_init(&srq->lock, PTHREAD_PROCESS_PRIVATE);
	srq->rq = rq;
	srq->parent = qhca_parent_of(pd);
	if (!qhca_wq_buf_alloc(&srq->rq, srq->parent, QHCA_RES_TYPE_SRQ)) {
		free(srq);
		return NULL;
	}
	drv->buf_addr = (uintptr_t)srq->rq.buf;
	drv->log2 = srq->rq.log2;
	drv->stride_log2 = srq->rq.stride_log2;
	return srq;
}

static void srq_free(struct qhca_srq *srq)
{
	qhca_wq_buf_free(&srq->rq, QHCA_RES_TYPE_SRQ);
	free(srq);
}

struct ibv_srq *qhca_create_srq(struct ibv_pd *pd, struct ibv_srq_init_attr *attr)
{
	struct qhca_ucreate_srq cmd = {};
	struct qhca_ucreate_srq_resp resp = {};
	struct qhca_srq *srq;

	srq = srq_alloc(to_qctx(pd->context), pd, &attr->attr, &cmd.drv_payload);
	if (!srq)
		return NULL;
	if (ibv_cmd_create_srq(pd, &srq->vsrq.srq, attr, &cmd.ibv_cmd, sizeof(cmd),
			       &resp.ibv_resp, sizeof(resp))) {
		srq_free(srq);
		return NULL;
	}
	srq->srqn = resp.srqn;
	return &srq->vsrq.srq;
}

/*
 * ibv_create_srq_ex: an ordinary SRQ, or an XRC SRQ of a domain with its own CQ (of this
 * context). The poller finds an XRC SRQ by its XRC SRQ number (srq_hash), which the kernel
 * also reports for ibv_get_srq_num: the SRQ's number on the device, low 24 bits.
 */
struct ibv_srq *qhca_create_srq_ex(struct ibv_context *context,
				   struct ibv_srq_init_attr_ex *attr)
{
	struct qhca_context *ctx = to_qctx(context);
	struct qhca_ucreate_xsrq cmd = {};
	struct qhca_ucreate_xsrq_resp resp = {};
	enum ibv_srq_type type = IBV_SRQT_BASIC;
	struct qhca_srq *srq;
	uint32_t h;

	if (attr->comp_mask & ~(uint32_t)(IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD |
					  IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ)) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	if (attr->comp_mask & IBV_SRQ_INIT_ATTR_TYPE)
		type = attr->srq_type;
	if (type != IBV_SRQT_BASIC && type != IBV_SRQT_XRC) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_PD) || !attr->pd ||
	    (type == IBV_SRQT_XRC &&
	     ((attr->comp_mask & (IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ)) !=
	      (IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ) || !attr->xrcd || !attr->cq ||
	      attr->cq->context != context))) {
		errno = EINVAL;
		return NULL;
	}
	srq = srq_alloc(ctx, attr->pd, &attr->attr, &cmd.drv_payload);
	if (!srq)
		return NULL;
	if (ibv_cmd_create_srq_ex(context, &srq->vsrq, attr, &cmd.ibv_cmd, sizeof(cmd),
				  &resp.ibv_resp, sizeof(resp))) {
		srq_free(srq);
		return NULL;
	}
	srq->srqn = resp.srqn;
	srq->vsrq.srq.pd = attr->pd;
	srq->vsrq.srq.srq_context = attr->srq_context;
	if (type == IBV_SRQT_XRC) {
		srq->xrc_srqn = srq->srqn & QHCA_XRC_SRQN_MASK;
		srq->xrc_cq = to_qcq(attr->cq);
		h = srq->xrc_srqn % QHCA_QP_HASH;
		pthread_mutex_lock(&ctx->qp_lock);
		srq->hash_next = ctx->srq_hash[h];
		ctx->srq_hash[h] = srq;
		pthread_mutex_unlock(&ctx->qp_lock);
	}
	return &srq->vsrq.srq;
}

int qhca_get_srq_num(struct ibv_srq *ibsrq, uint32_t *srq_num)
{
	struct qhca_srq *srq = to_qsrq(ibsrq);

	if (!srq->xrc_cq)	/* only XRC SRQs have one */
		return EINVAL;
	*srq_num = srq->xrc_srqn;
	return 0;
}

int qhca_modify_srq(struct ibv_srq *ibsrq, struct ibv_srq_attr *attr, int mask)
{
	struct qhca_context *ctx = to_qctx(ibsrq->context);
	struct qhca_srq *srq = to_qsrq(ibsrq);
	struct qhca_umodify_srq cmd = {};
	struct qhca_ring r = srq->rq, old;
	int ret;

	if (mask & ~(IBV_SRQ_MAX_WR | IBV_SRQ_LIMIT))
		return EINVAL;
	if (!(mask & IBV_SRQ_MAX_WR)) {
		if ((mask & IBV_SRQ_LIMIT) && attr->srq_limit > 1u << srq->rq.log2)
			return EINVAL;
		return ibv_cmd_modify_srq(ibsrq, attr, mask, &cmd.ibv_cmd, sizeof(cmd));
	}
	/* Resize: a new ring; the device moves what is posted and not taken (RESIZE_SRQ),
	 * at the same indices, so the producer and consumer indices stay. */
	ret = qhca_ring_entries_log2(attr->max_wr, ctx->max_srq_wr, &r.log2);
	if (ret)
		return ret;
	if ((mask & IBV_SRQ_LIMIT) && attr->srq_limit > 1u << r.log2)
		return EINVAL;
	if (!qhca_wq_buf_alloc(&r, srq->parent, QHCA_RES_TYPE_SRQ))
		return ENOMEM;
	cmd.drv_payload.log2 = r.log2;
	cmd.drv_payload.buf_addr = (uintptr_t)r.buf;
	pthread_spin_lock(&srq->lock);
	ret = ibv_cmd_modify_srq(ibsrq, attr, mask, &cmd.ibv_cmd, sizeof(cmd));
	if (!ret) {
		old = srq->rq;
		srq->rq.buf = r.buf;
		srq->rq.parent = r.parent;
		srq->rq.log2 = r.log2;
		r = old;
	}
	pthread_spin_unlock(&srq->lock);
	/* the old ring, or the new one on failure */
	qhca_wq_buf_free(&r, QHCA_RES_TYPE_SRQ);
	return ret;
}

int qhca_query_srq(struct ibv_srq *ibsrq, struct ibv_srq_attr *attr)
{
	struct ibv_query_srq cmd;

	return ibv_cmd_query_srq(ibsrq, attr, &cmd, sizeof(cmd));
}

int qhca_destroy_srq(struct ibv_srq *ibsrq)
{
	struct qhca_context *ctx = to_qctx(ibsrq->context);
	struct qhca_srq *srq = to_qsrq(ibsrq), **pp;
	int ret;

	ret = ibv_cmd_destroy_srq(ibsrq);
	if (ret)
		return ret;
	if (srq->xrc_cq) {
		/* Its receives not yet polled go with it; no later SRQ of its number gets them. */
		pthread_mutex_lock(&ctx->qp_lock);
		for (pp = &ctx->srq_hash[srq->xrc_srqn % QHCA_QP_HASH]; *pp; pp = &(*pp)->hash_next)
			if (*pp == srq) {
				*pp = srq->hash_next;
				break;
			}
		pthread_mutex_unlock(&ctx->qp_lock);
		qhca_cq_clean(srq->xrc_cq, srq->xrc_srqn, true);
	}
	srq_free(srq);
	return 0;
}
