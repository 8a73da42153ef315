// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * qhca provider: work requests. Send WQEs (ibv_post_send, ibv_bind_mw and the ibv_wr_*
 * builders) and receive WQEs (ibv_post_recv, ibv_post_srq_recv) are written into the
 * rings in this process's memory and announced with one 64-bit store to the context's
 * doorbell page. No system call.
 */
#include <endian.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "qhca.h"

/* Room for one more WQE? */
static bool ring_full(struct qhca_ring *r)
{
	return r->pi - __atomic_load_n(&r->ci, __ATOMIC_ACQUIRE) >= 1u << r->log2;
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
	case IBV_WR_LOCAL_INV:
		*out = QHCA_WR_LOCAL_INV;
		return 0;
	case IBV_WR_BIND_MW:
		*out = QHCA_WR_BIND_MW;
		return 0;
	default:
		return EINVAL;
	}
}

/*
 * The segment of a BIND_MW WQE: @mw bound under @rkey (a new variant of its key) as
 * @info says; length 0 unbinds. The device checks the rest (IBA 10.6.7.2).
 */
static int build_bind(struct qhca_sq_wqe *h, uint8_t *end, struct ibv_mw *mw, uint32_t rkey,
		      const struct ibv_mw_bind_info *info)
{
	const unsigned int rights = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				    IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
	struct qhca_bind_mw_seg *b = (struct qhca_bind_mw_seg *)(h + 1);

	if (!mw || (uint8_t *)(b + 1) > end || (info->mw_access_flags & ~rights) ||
	    (info->length && (!info->mr || info->mr->pd != mw->pd)) ||
	    (rkey & QHCA_MR_KEY_INDEX_MASK) != (mw->rkey & QHCA_MR_KEY_INDEX_MASK))
		return EINVAL;
	memset(b, 0, sizeof(*b));
	b->mw_key = htole32(rkey);
	b->mr_lkey = htole32(info->length ? info->mr->lkey : 0);
	b->addr = htole64(info->addr);
	b->length = htole64(info->length);
	b->access = htole32(info->mw_access_flags);
	return 0;
}

/* The WQE flags of verbs send flags. */
static uint8_t wqe_flags(unsigned int send_flags)
{
	return (send_flags & IBV_SEND_SIGNALED ? QHCA_WQE_SIGNALED : 0) |
	       (send_flags & IBV_SEND_SOLICITED ? QHCA_WQE_SOLICITED : 0) |
	       (send_flags & IBV_SEND_FENCE ? QHCA_WQE_FENCE : 0);
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
	h->flags = wqe_flags(wr->send_flags);
	if (qp->xrc_send)	/* every WQE: the SRQ at the target */
		h->xrc_srqn = htole32(wr->qp_type.xrc.remote_srqn & QHCA_XRC_SRQN_MASK);
	if (wr->opcode == IBV_WR_SEND_WITH_INV || wr->opcode == IBV_WR_LOCAL_INV)
		h->imm_inv = htole32(wr->invalidate_rkey);
	else
		h->imm_inv = htole32(be32toh(wr->imm_data));
	if (wr->opcode == IBV_WR_LOCAL_INV)
		return qp->ud ? EINVAL : 0;
	if (wr->opcode == IBV_WR_BIND_MW)	/* type 1 windows go through ibv_bind_mw */
		return qp->ud || !wr->bind_mw.mw || wr->bind_mw.mw->type != IBV_MW_TYPE_2 ? EINVAL :
		       build_bind(h, end, wr->bind_mw.mw, wr->bind_mw.rkey, &wr->bind_mw.bind_info);
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
			/* len <= max_inline: the subtractions cannot wrap, the sum could */
			if (wr->sg_list[i].length > qp->max_inline - len ||
			    wr->sg_list[i].length > (size_t)(end - seg) - len)
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

/*
 * Posting is refused in the states where IBA forbids it (o11-2.1.1): sends in RESET, INIT
 * and RTR, receives in RESET. libibverbs keeps ibqp->state; the device's own transitions
 * (to SQE or ERR) are states that accept posts (they complete flushed). On iWARP the
 * connection takes the QP to RTS and iw_cm's move to RTS modifies nothing (libibverbs
 * then keeps RTR): sends there wait in the SQ until the connection is up, as on siw.
 */
static bool send_allowed(const struct ibv_qp *ibqp)
{
	if (ibqp->context->device->transport_type == IBV_TRANSPORT_IWARP)
		return ibqp->state != IBV_QPS_RESET;
	return ibqp->state != IBV_QPS_RESET && ibqp->state != IBV_QPS_INIT &&
	       ibqp->state != IBV_QPS_RTR;
}

/* ibv_bind_mw: a type 1 window bound with a BIND_MW WQE under the next variant of its key. */
int qhca_bind_mw(struct ibv_qp *ibqp, struct ibv_mw *mw, struct ibv_mw_bind *bind)
{
	struct qhca_qp *qp = to_qqp(ibqp);
	uint32_t rkey = ibv_inc_rkey(mw->rkey);
	struct qhca_sq_wqe *h;
	int ret;

	if (mw->type != IBV_MW_TYPE_1 || qp->ud || !qp->sq.buf || !send_allowed(ibqp))
		return EINVAL;
	pthread_spin_lock(&qp->sq_lock);
	if (ring_full(&qp->sq)) {
		ret = ENOMEM;
	} else {
		h = wqe_at(&qp->sq, qp->sq.pi);
		memset(h, 0, sizeof(*h));
		h->wr_id = htole64(bind->wr_id);
		h->opcode = QHCA_WR_BIND_MW;
		h->flags = wqe_flags(bind->send_flags);
		ret = build_bind(h, (uint8_t *)h + ((size_t)1 << qp->sq.stride_log2), mw, rkey,
				 &bind->bind_info);
		if (!ret) {
			qp->sq.pi++;
			mw->rkey = rkey;
			qhca_ring_doorbell(to_qctx(ibqp->context), QHCA_DB_SQ, qp->qpn, qp->sq.pi);
		}
	}
	pthread_spin_unlock(&qp->sq_lock);
	return ret;
}

int qhca_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr, struct ibv_send_wr **bad_wr)
{
	struct qhca_qp *qp = to_qqp(ibqp);
	int ret = 0;

	if (!qp->sq.buf || !send_allowed(ibqp)) {	/* no SQ: XRC_RECV */
		*bad_wr = wr;
		return EINVAL;
	}
	pthread_spin_lock(&qp->sq_lock);
	for (; wr; wr = wr->next) {
		ret = ring_full(&qp->sq) ? ENOMEM : build_send(qp, wr, wqe_at(&qp->sq, qp->sq.pi));
		if (ret) {
			*bad_wr = wr;
			break;
		}
		qp->sq.pi++;
	}
	qhca_ring_doorbell(to_qctx(ibqp->context), QHCA_DB_SQ, qp->qpn, qp->sq.pi);
	pthread_spin_unlock(&qp->sq_lock);
	return ret;
}

static int build_recv(struct qhca_ring *r, const struct ibv_recv_wr *wr)
{
	struct qhca_rq_wqe *h = wqe_at(r, r->pi);
	struct qhca_sge *s = (struct qhca_sge *)(h + 1);
	int i;

	if (ring_full(r))
		return ENOMEM;
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

	/* No RQ of its own: an SRQ receives, or the QP is XRC */
	if (ibqp->srq || !qp->rq.buf || ibqp->state == IBV_QPS_RESET) {
		*bad_wr = wr;
		return EINVAL;
	}
	pthread_spin_lock(&qp->rq_lock);
	for (; wr; wr = wr->next) {
		ret = build_recv(&qp->rq, wr);
		if (ret) {
			*bad_wr = wr;
			break;
		}
	}
	qhca_ring_doorbell(to_qctx(ibqp->context), QHCA_DB_RQ, qp->qpn, qp->rq.pi);
	pthread_spin_unlock(&qp->rq_lock);
	return ret;
}

/* ---------------------------------------------------------------- ibv_wr_* */
static struct qhca_qp *to_qqp_ex(struct ibv_qp_ex *ex)
{
	return container_of(ex, struct qhca_qp, vqp.qp_ex);
}

static void wr_start(struct ibv_qp_ex *ex)
{
	struct qhca_qp *qp = to_qqp_ex(ex);

	pthread_spin_lock(&qp->sq_lock);
	qp->wr_start_pi = qp->sq.pi;
	qp->wr_cur = NULL;
	qp->wr_err = 0;
}

static int wr_complete(struct ibv_qp_ex *ex)
{
	struct qhca_qp *qp = to_qqp_ex(ex);
	int err = qp->wr_err;

	if (!err && !send_allowed(&ex->qp_base))
		err = EINVAL;
	if (err)
		qp->sq.pi = qp->wr_start_pi;	/* nothing of a failed batch is posted */
	else
		qhca_ring_doorbell(to_qctx(ex->qp_base.context), QHCA_DB_SQ, qp->qpn, qp->sq.pi);
	pthread_spin_unlock(&qp->sq_lock);
	return err;
}

static void wr_abort(struct ibv_qp_ex *ex)
{
	struct qhca_qp *qp = to_qqp_ex(ex);

	qp->sq.pi = qp->wr_start_pi;
	pthread_spin_unlock(&qp->sq_lock);
}

/* Begin a WQE of @op at the producer index; the setters below complete it. */
static struct qhca_sq_wqe *wr_begin(struct ibv_qp_ex *ex, uint8_t op)
{
	struct qhca_qp *qp = to_qqp_ex(ex);
	struct qhca_sq_wqe *h;

	if (ring_full(&qp->sq)) {
		qp->wr_err = ENOMEM;	/* the batch fails at wr_complete */
		h = (struct qhca_sq_wqe *)qp->wr_scratch;
	} else {
		h = wqe_at(&qp->sq, qp->sq.pi++);
	}
	memset(h, 0, (size_t)1 << qp->sq.stride_log2);
	h->wr_id = htole64(ex->wr_id);
	h->opcode = op;
	h->flags = wqe_flags(ex->wr_flags);
	qp->wr_cur = (uint8_t *)h;
	return h;
}

static void wr_remote(struct qhca_sq_wqe *h, uint32_t rkey, uint64_t addr)
{
	h->rkey = htole32(rkey);
	h->remote_addr = htole64(addr);
}

static void wr_send(struct ibv_qp_ex *ex)
{
	wr_begin(ex, QHCA_WR_SEND);
}

static void wr_send_imm(struct ibv_qp_ex *ex, __be32 imm)
{
	wr_begin(ex, QHCA_WR_SEND_WITH_IMM)->imm_inv = htole32(be32toh(imm));
}

static void wr_send_inv(struct ibv_qp_ex *ex, uint32_t rkey)
{
	wr_begin(ex, QHCA_WR_SEND_WITH_INV)->imm_inv = htole32(rkey);
}

/* IBA 1.5 ATOMIC WRITE: the 8 bytes at @data travel in the WQE. */
static void wr_atomic_write(struct ibv_qp_ex *ex, uint32_t rkey, uint64_t addr, const void *data)
{
	struct qhca_sq_wqe *h = wr_begin(ex, QHCA_WR_ATOMIC_WRITE);

	wr_remote(h, rkey, addr);
	memcpy(&h->compare_add, data, 8);
}

static void wr_local_inv(struct ibv_qp_ex *ex, uint32_t rkey)
{
	wr_begin(ex, QHCA_WR_LOCAL_INV)->imm_inv = htole32(rkey);
}

static void wr_bind_mw(struct ibv_qp_ex *ex, struct ibv_mw *mw, uint32_t rkey,
		       const struct ibv_mw_bind_info *info)
{
	struct qhca_qp *qp = to_qqp_ex(ex);
	struct qhca_sq_wqe *h = wr_begin(ex, QHCA_WR_BIND_MW);

	if (qp->ud || !mw || mw->type != IBV_MW_TYPE_2 ||
	    build_bind(h, (uint8_t *)h + ((size_t)1 << qp->sq.stride_log2), mw, rkey, info))
		qp->wr_err = EINVAL;	/* the batch fails at wr_complete */
}

static void wr_rdma_write(struct ibv_qp_ex *ex, uint32_t rkey, uint64_t addr)
{
	wr_remote(wr_begin(ex, QHCA_WR_RDMA_WRITE), rkey, addr);
}

static void wr_rdma_write_imm(struct ibv_qp_ex *ex, uint32_t rkey, uint64_t addr, __be32 imm)
{
	struct qhca_sq_wqe *h = wr_begin(ex, QHCA_WR_RDMA_WRITE_WITH_IMM);

	wr_remote(h, rkey, addr);
	h->imm_inv = htole32(be32toh(imm));
}

static void wr_rdma_read(struct ibv_qp_ex *ex, uint32_t rkey, uint64_t addr)
{
	wr_remote(wr_begin(ex, QHCA_WR_RDMA_READ), rkey, addr);
}

static void wr_atomic_cmp_swp(struct ibv_qp_ex *ex, uint32_t rkey, uint64_t addr,
			      uint64_t compare, uint64_t swap)
{
	struct qhca_sq_wqe *h = wr_begin(ex, QHCA_WR_ATOMIC_CMP_AND_SWP);

	wr_remote(h, rkey, addr);
	h->compare_add = htole64(compare);
	h->swap = htole64(swap);
}

static void wr_atomic_fetch_add(struct ibv_qp_ex *ex, uint32_t rkey, uint64_t addr,
				uint64_t add)
{
	struct qhca_sq_wqe *h = wr_begin(ex, QHCA_WR_ATOMIC_FETCH_AND_ADD);

	wr_remote(h, rkey, addr);
	h->compare_add = htole64(add);
}

/* Where the data part of the current WQE starts (after the UD segment). */
static uint8_t *wr_data(struct qhca_qp *qp)
{
	return qp->wr_cur + sizeof(struct qhca_sq_wqe) + (qp->ud ? sizeof(struct qhca_ud_seg) : 0);
}

static void wr_set_ud_addr(struct ibv_qp_ex *ex, struct ibv_ah *ah, uint32_t qpn, uint32_t qkey)
{
	struct qhca_qp *qp = to_qqp_ex(ex);
	struct qhca_ud_seg *ud;

	if (!qp->wr_cur || !qp->ud) {
		qp->wr_err = EINVAL;
		return;
	}
	ud = (struct qhca_ud_seg *)(qp->wr_cur + sizeof(struct qhca_sq_wqe));
	ud->av = to_qah(ah)->av;
	ud->dqpn = htole32(qpn);
	ud->qkey = htole32(qkey);
}

/* XRC_SEND: the XRC SRQ at the target that receives (or whose PD the request uses). */
static void wr_set_xrc_srqn(struct ibv_qp_ex *ex, uint32_t remote_srqn)
{
	struct qhca_qp *qp = to_qqp_ex(ex);

	if (!qp->wr_cur || !qp->xrc_send) {
		qp->wr_err = EINVAL;
		return;
	}
	((struct qhca_sq_wqe *)qp->wr_cur)->xrc_srqn = htole32(remote_srqn & QHCA_XRC_SRQN_MASK);
}

static void wr_set_sge_list(struct ibv_qp_ex *ex, size_t n, const struct ibv_sge *sg)
{
	struct qhca_qp *qp = to_qqp_ex(ex);
	struct qhca_sq_wqe *h = (struct qhca_sq_wqe *)qp->wr_cur;
	struct qhca_sge *s;
	size_t i;

	/* n * sizeof(*s) could wrap: compare n with the SGEs that fit */
	if (!h ||
	    n > (size_t)(qp->wr_cur + (1u << qp->sq.stride_log2) - wr_data(qp)) / sizeof(*s)) {
		qp->wr_err = EINVAL;
		return;
	}
	s = (struct qhca_sge *)wr_data(qp);
	for (i = 0; i < n; i++) {
		s[i].addr = htole64(sg[i].addr);
		s[i].length = htole32(sg[i].length);
		s[i].lkey = htole32(sg[i].lkey);
	}
	h->num_sge = (uint8_t)n;
}

static void wr_set_sge(struct ibv_qp_ex *ex, uint32_t lkey, uint64_t addr, uint32_t length)
{
	struct ibv_sge sg = { .addr = addr, .length = length, .lkey = lkey };

	wr_set_sge_list(ex, 1, &sg);
}

static void wr_set_inline_data_list(struct ibv_qp_ex *ex, size_t n, const struct ibv_data_buf *b)
{
	struct qhca_qp *qp = to_qqp_ex(ex);
	struct qhca_sq_wqe *h = (struct qhca_sq_wqe *)qp->wr_cur;
	uint8_t *d;
	size_t i, len = 0;

	if (!h) {
		qp->wr_err = EINVAL;
		return;
	}
	d = wr_data(qp);
	for (i = 0; i < n; i++) {
		/* len <= max_inline: the subtractions cannot wrap, the sum could */
		if (b[i].length > qp->max_inline - len ||
		    b[i].length > (size_t)(qp->wr_cur + (1u << qp->sq.stride_log2) - d) - len) {
			qp->wr_err = ENOMEM;
			return;
		}
		memcpy(d + len, b[i].addr, b[i].length);
		len += b[i].length;
	}
	h->flags |= QHCA_WQE_INLINE;
	h->inline_len = htole32((uint32_t)len);
}

static void wr_set_inline_data(struct ibv_qp_ex *ex, void *addr, size_t length)
{
	struct ibv_data_buf b = { .addr = addr, .length = length };

	wr_set_inline_data_list(ex, 1, &b);
}

/* The ibv_wr_* builders of a QP created with IBV_QP_INIT_ATTR_SEND_OPS_FLAGS. */
void qhca_wr_set_ops(struct ibv_qp_ex *ex)
{
	ex->wr_start = wr_start;
	ex->wr_complete = wr_complete;
	ex->wr_abort = wr_abort;
	ex->wr_send = wr_send;
	ex->wr_send_imm = wr_send_imm;
	ex->wr_send_inv = wr_send_inv;
	ex->wr_local_inv = wr_local_inv;
	ex->wr_atomic_write = wr_atomic_write;
	ex->wr_bind_mw = wr_bind_mw;
	ex->wr_rdma_write = wr_rdma_write;
	ex->wr_rdma_write_imm = wr_rdma_write_imm;
	ex->wr_rdma_read = wr_rdma_read;
	ex->wr_atomic_cmp_swp = wr_atomic_cmp_swp;
	ex->wr_atomic_fetch_add = wr_atomic_fetch_add;
	ex->wr_set_ud_addr = wr_set_ud_addr;
	ex->wr_set_xrc_srqn = wr_set_xrc_srqn;
	ex->wr_set_sge = wr_set_sge;
	ex->wr_set_sge_list = wr_set_sge_list;
	ex->wr_set_inline_data = wr_set_inline_data;
	ex->wr_set_inline_data_list = wr_set_inline_data_list;
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
	qhca_ring_doorbell(to_qctx(ibsrq->context), QHCA_DB_SRQ, srq->srqn, srq->rq.pi);
	pthread_spin_unlock(&srq->lock);
	return ret;
}
