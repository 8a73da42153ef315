// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * qhca provider: queue pairs, their rings in this process's memory (or a parent domain's),
 * their place in the context's table that the poller finds them by, and the XRC_RECV QPs
 * that have no rings.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "qhca.h"

/* ---------------------------------------------------------------- QPs by number */
/*
 * Add @qp; ctx->qp_lock is held. The table (QHCA_QP_HASH buckets from the context's
 * start) doubles when it holds a QP a bucket, up to 2^20 buckets: QPNs differ in their low
 * bits (the device's slot). Should the larger table not be allocated the chains just grow
 * longer: adding never fails.
 */
static void qp_hash_add(struct qhca_context *ctx, struct qhca_qp *qp)
{
	uint32_t size = ctx->qp_hash_mask + 1, i;
	struct qhca_qp **t, *q, *next;

	if (ctx->nqps >= size && size < (1u << 20)) {
		t = calloc(2 * (size_t)size, sizeof(*t));
		if (t) {
			for (i = 0; i < size; i++)
				for (q = ctx->qp_hash[i]; q; q = next) {
					next = q->hash_next;
					q->hash_next = t[q->qpn & (2 * size - 1)];
					t[q->qpn & (2 * size - 1)] = q;
				}
			free(ctx->qp_hash);
			ctx->qp_hash = t;
			ctx->qp_hash_mask = 2 * size - 1;
		}
	}
	qp->hash_next = ctx->qp_hash[qp->qpn & ctx->qp_hash_mask];
	ctx->qp_hash[qp->qpn & ctx->qp_hash_mask] = qp;
	ctx->nqps++;
}

/* Remove @qp if it is there; ctx->qp_lock is held. */
static void qp_hash_del(struct qhca_context *ctx, struct qhca_qp *qp)
{
	struct qhca_qp **pp;

	for (pp = &ctx->qp_hash[qp->qpn & ctx->qp_hash_mask]; *pp; pp = &(*pp)->hash_next)
		if (*pp == qp) {
			*pp = qp->hash_next;
			ctx->nqps--;
			return;
		}
}

/* ---------------------------------------------------------------- queue pairs */
/* Send WQE: header, UD segment, then max_send_sge SGEs or max_inline_data bytes. */
static int sq_stride_log2(const struct ibv_qp_cap *cap, bool ud, uint32_t *log2)
{
	uint64_t data = (uint64_t)cap->max_send_sge * sizeof(struct qhca_sge);

	if (cap->max_inline_data > data)
		data = cap->max_inline_data;
	if (!ud && data < sizeof(struct qhca_bind_mw_seg))
		data = sizeof(struct qhca_bind_mw_seg);	/* room for a BIND_MW */
	return qhca_stride_log2(sizeof(struct qhca_sq_wqe) +
				(ud ? sizeof(struct qhca_ud_seg) : 0) + data, log2);
}

/* Every capability of a new QP within the device's limits (receive ones unless an SRQ). */
static int check_qp_cap(const struct qhca_context *ctx, const struct ibv_qp_cap *cap, bool srq)
{
	if (cap->max_send_wr > ctx->max_qp_wr || cap->max_send_sge > ctx->max_send_sge ||
	    cap->max_inline_data > ctx->max_inline_data)
		return EINVAL;
	if (!srq && (cap->max_recv_wr > ctx->max_qp_wr || cap->max_recv_sge > ctx->max_recv_sge))
		return EINVAL;
	return 0;
}

static void qp_free(struct qhca_qp *qp)
{
	free(qp->wr_scratch);
	qhca_wq_buf_free(&qp->sq, QHCA_RES_TYPE_QP);
	qhca_wq_buf_free(&qp->rq, QHCA_RES_TYPE_QP);
	free(qp);
}

/* Size and allocate the rings of a new QP; fills the driver part of the command. */
static struct qhca_qp *qp_alloc(struct qhca_context *ctx, struct ibv_pd *pd,
				enum ibv_qp_type type, struct ibv_qp_cap *cap, bool srq,
				struct qhca_create_qp_cmd *drv)
{
	bool ud = type == IBV_QPT_UD, xrc = type == IBV_QPT_XRC_SEND;
	struct qhca_ring sq = {}, rq = {};
	struct qhca_qp *qp;
	int err;

	if (type != IBV_QPT_RC && type != IBV_QPT_UC && !ud && !xrc) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	/* XRC_SEND has no receive queue: sized like one with an SRQ. */
	srq = srq || xrc;
	if (srq) {	/* ignored with an SRQ (ibv_create_qp(3)): the kernel sees none */
		cap->max_recv_wr = 0;
		cap->max_recv_sge = 0;
	}
	err = check_qp_cap(ctx, cap, srq);
	if (!err)
		err = qhca_ring_entries_log2(cap->max_send_wr, ctx->max_qp_wr, &sq.log2);
	if (!err)
		err = sq_stride_log2(cap, ud, &sq.stride_log2);
	if (!err && !srq)
		err = qhca_ring_entries_log2(cap->max_recv_wr, ctx->max_qp_wr, &rq.log2);
	if (!err && !srq)
		err = qhca_rq_stride_log2(cap->max_recv_sge, &rq.stride_log2);
	if (err) {
		errno = err;
		return NULL;
	}
	qp = calloc(1, sizeof(*qp));
	if (!qp)
		return NULL;
	pthread_spin_init(&qp->sq_lock, PTHREAD_PROCESS_PRIVATE);
	pthread_spin_init(&qp->rq_lock, PTHREAD_PROCESS_PRIVATE);
	qp->ud = ud;
	qp->xrc_send = xrc;
	qp->sq = sq;
	qp->wr_scratch = malloc((size_t)1 << qp->sq.stride_log2);
	if (!qhca_wq_buf_alloc(&qp->sq, qhca_parent_of(pd), QHCA_RES_TYPE_QP) || !qp->wr_scratch)
		goto err;
	if (!srq) {
		qp->rq = rq;
		if (!qhca_wq_buf_alloc(&qp->rq, qhca_parent_of(pd), QHCA_RES_TYPE_QP))
			goto err;
	}
	qp->max_inline = cap->max_inline_data;
	drv->sq_addr = (uintptr_t)qp->sq.buf;
	drv->rq_addr = (uintptr_t)qp->rq.buf;
	drv->sq_log2 = qp->sq.log2;
	drv->rq_log2 = qp->rq.log2;
	drv->sq_stride_log2 = qp->sq.stride_log2;
	drv->rq_stride_log2 = qp->rq.stride_log2;
	return qp;
err:
	qp_free(qp);
	return NULL;
}

/* The kernel made the QP: report its capacities, let the poller find it by number. */
static void qp_created(struct qhca_context *ctx, struct qhca_qp *qp,
		       const struct qhca_ucreate_qp_resp *resp, struct ibv_qp_cap *cap,
		       struct ibv_srq *srq)
{
	qp->qpn = resp->qpn;
	qp->srq = srq ? to_qsrq(srq) : NULL;
	cap->max_send_wr = 1u << qp->sq.log2;
	cap->max_recv_wr = qp->rq.buf ? 1u << qp->rq.log2 : 0;	/* none with an SRQ or XRC */
	pthread_mutex_lock(&ctx->qp_lock);
	qp_hash_add(ctx, qp);
	pthread_mutex_unlock(&ctx->qp_lock);
}

struct ibv_qp *qhca_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *attr)
{
	struct qhca_ucreate_qp cmd = {};
	struct qhca_ucreate_qp_resp resp = {};
	struct qhca_qp *qp;

	qp = qp_alloc(to_qctx(pd->context), pd, attr->qp_type, &attr->cap, attr->srq,
		      &cmd.drv_payload);
	if (!qp)
		return NULL;
	if (ibv_cmd_create_qp(pd, &qp->vqp.qp, attr, &cmd.ibv_cmd, sizeof(cmd), &resp.ibv_resp,
			      sizeof(resp))) {
		qp_free(qp);
		return NULL;
	}
	qp_created(to_qctx(pd->context), qp, &resp, &attr->cap, attr->srq);
	return &qp->vqp.qp;
}

/*
 * Drop the completions of a QP that went to RESET or away from its CQs. An XRC_RECV QP has
 * none of its own (its receives belong to its SRQs), XRC_SEND no receive CQ (libibverbs
 * keeps the one the application may have passed).
 */
static void qp_clean_cqs(struct qhca_qp *qp)
{
	struct ibv_qp *ibqp = &qp->vqp.qp;

	if (ibqp->qp_type == IBV_QPT_XRC_RECV)
		return;
	qhca_cq_clean(to_qcq(ibqp->send_cq), qp->qpn, false);
	if (ibqp->qp_type != IBV_QPT_XRC_SEND && ibqp->recv_cq != ibqp->send_cq)
		qhca_cq_clean(to_qcq(ibqp->recv_cq), qp->qpn, false);
}

int qhca_query_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr, int mask,
		  struct ibv_qp_init_attr *init)
{
	struct ibv_query_qp cmd;

	return ibv_cmd_query_qp(ibqp, attr, mask, init, &cmd, sizeof(cmd));
}

int qhca_modify_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr, int mask)
{
	struct qhca_qp *qp = to_qqp(ibqp);
	struct ibv_modify_qp cmd;
	int ret;

	ret = ibv_cmd_modify_qp(ibqp, attr, mask, &cmd, sizeof(cmd));
	if (!ret && (mask & IBV_QP_STATE) && attr->qp_state == IBV_QPS_RESET) {
		qp_clean_cqs(qp);
		/* The device starts both rings over at index 0. */
		pthread_spin_lock(&qp->sq_lock);
		pthread_spin_lock(&qp->rq_lock);
		qp->sq.pi = qp->rq.pi = 0;
		__atomic_store_n(&qp->sq.ci, 0, __ATOMIC_RELEASE);
		__atomic_store_n(&qp->rq.ci, 0, __ATOMIC_RELEASE);
		pthread_spin_unlock(&qp->rq_lock);
		pthread_spin_unlock(&qp->sq_lock);
	}
	return ret;
}

int qhca_destroy_qp(struct ibv_qp *ibqp)
{
	struct qhca_context *ctx = to_qctx(ibqp->context);
	struct qhca_qp *qp = to_qqp(ibqp);
	int ret;

	ret = ibv_cmd_destroy_qp(ibqp);
	if (ret)
		return ret;
	qp_clean_cqs(qp);
	pthread_mutex_lock(&ctx->qp_lock);
	qp_hash_del(ctx, qp);
	pthread_mutex_unlock(&ctx->qp_lock);
	qp_free(qp);
	return 0;
}

/* A QP with no rings of its own: XRC_RECV, created or opened. */
static struct qhca_qp *xrc_recv_alloc(void)
{
	struct qhca_qp *qp = calloc(1, sizeof(*qp));

	if (!qp)
		return NULL;
	pthread_spin_init(&qp->sq_lock, PTHREAD_PROCESS_PRIVATE);
	pthread_spin_init(&qp->rq_lock, PTHREAD_PROCESS_PRIVATE);
	return qp;
}

/*
 * XRC_RECV: the kernel makes an XRC_TGT QP in the domain, with no driver data (ib_core
 * passes the driver none for it) and no rings: the domain's XRC SRQs receive for it. It
 * is not in qp_hash: its completions are its SRQs'.
 */
static struct ibv_qp *create_xrc_recv(struct ibv_context *context,
				      struct ibv_qp_init_attr_ex *attr)
{
	struct ib_uverbs_create_qp_resp resp = {};
	struct ibv_create_qp cmd = {};
	struct ibv_qp_init_attr_ex a;
	struct qhca_qp *qp;

	/* CREATE_FLAGS is accepted with no flag: none is implemented. */
	if ((attr->comp_mask & ~(uint32_t)(IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_XRCD |
					   IBV_QP_INIT_ATTR_CREATE_FLAGS)) ||
	    ((attr->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) && attr->create_flags)) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	if (!(attr->comp_mask & IBV_QP_INIT_ATTR_XRCD) || !attr->xrcd) {
		errno = EINVAL;
		return NULL;
	}
	qp = xrc_recv_alloc();
	if (!qp)
		return NULL;
	a = *attr;
	a.comp_mask &= ~(uint32_t)(IBV_QP_INIT_ATTR_CREATE_FLAGS | IBV_QP_INIT_ATTR_PD);
	if (ibv_cmd_create_qp_ex(context, &qp->vqp, &a, &cmd, sizeof(cmd), &resp,
				 sizeof(resp))) {
		qp_free(qp);
		return NULL;
	}
	attr->cap = a.cap;
	qp->qpn = qp->vqp.qp.qp_num;
	return &qp->vqp.qp;
}

/* ibv_open_qp: another handle of an XRC_TGT QP of the domain, perhaps another process's. */
struct ibv_qp *qhca_open_qp(struct ibv_context *context, struct ibv_qp_open_attr *attr)
{
	struct ib_uverbs_create_qp_resp resp = {};
	struct ibv_open_qp cmd = {};
	struct qhca_qp *qp;
	int ret;

	qp = xrc_recv_alloc();
	if (!qp)
		return NULL;
	ret = ibv_cmd_open_qp(context, &qp->vqp, sizeof(qp->vqp), attr, &cmd, sizeof(cmd),
			      &resp, sizeof(resp));
	if (ret) {
		qp_free(qp);
		errno = ret;
		return NULL;
	}
	qp->qpn = attr->qp_num;
	return &qp->vqp.qp;
}

struct ibv_qp *qhca_create_qp_ex(struct ibv_context *context, struct ibv_qp_init_attr_ex *attr)
{
	struct qhca_ucreate_qp cmd = {};
	struct qhca_ucreate_qp_resp resp = {};
	struct ibv_qp_init_attr_ex a;
	struct qhca_qp *qp;

	if (attr->qp_type == IBV_QPT_XRC_RECV)
		return create_xrc_recv(context, attr);
	/* CREATE_FLAGS is accepted with no flag: none is implemented. */
	if ((attr->comp_mask & ~(uint32_t)(IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS |
					   IBV_QP_INIT_ATTR_CREATE_FLAGS)) ||
	    !(attr->comp_mask & IBV_QP_INIT_ATTR_PD) ||
	    ((attr->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) && attr->create_flags) ||
	    ((attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) &&
	     (attr->send_ops_flags & ~(uint64_t)QHCA_SEND_OPS))) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	qp = qp_alloc(to_qctx(context), attr->pd, attr->qp_type, &attr->cap, attr->srq,
		      &cmd.drv_payload);
	if (!qp)
		return NULL;
	/* libibverbs' command takes no CREATE_FLAGS mask: it is empty here anyway. */
	a = *attr;
	a.comp_mask &= ~(uint32_t)IBV_QP_INIT_ATTR_CREATE_FLAGS;
	if (ibv_cmd_create_qp_ex(context, &qp->vqp, &a, &cmd.ibv_cmd, sizeof(cmd),
				 &resp.ibv_resp, sizeof(resp))) {
		qp_free(qp);
		return NULL;
	}
	attr->cap = a.cap;
	qp_created(to_qctx(context), qp, &resp, &attr->cap, attr->srq);
	if (attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) {
		qhca_wr_set_ops(&qp->vqp.qp_ex);
		qp->vqp.comp_mask |= VERBS_QP_EX;
	}
	return &qp->vqp.qp;
}
