// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * qhca provider datapath: completion queues, queue pairs and shared receive queues whose
 * rings live in this process's memory, work requests written there and announced with one
 * 64-bit store to the context's doorbell page, and completions polled from the ring.
 * No system call on post, doorbell or poll.
 */
#include <endian.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <util/mmio.h>
#include <util/udma_barrier.h>

#include "qhca.h"

/*
 * Rings of one page (the queues of a QP or CQ with few entries) come from chunks of
 * PAGE_CHUNK pages: posix_memalign() of one page costs glibc about a second one (the
 * alignment slack before it), which doubled the memory of a QP with small queues. Freed
 * pages wait on a free list for the next ring; the chunks stay for the process's life.
 */
#define PAGE_CHUNK	64

static pthread_mutex_t page_lock = PTHREAD_MUTEX_INITIALIZER;
static void *page_free_list;	/* linked through each free page's first word */

static void *page_get(void)
{
	void *p;
	int i;

	pthread_mutex_lock(&page_lock);
	p = page_free_list;
	if (p) {
		page_free_list = *(void **)p;
	} else if (!posix_memalign(&p, QHCA_PAGE_SIZE, (size_t)PAGE_CHUNK * QHCA_PAGE_SIZE)) {
		for (i = PAGE_CHUNK - 1; i > 0; i--) {
			void *q = (uint8_t *)p + (size_t)i * QHCA_PAGE_SIZE;

			*(void **)q = page_free_list;
			page_free_list = q;
		}
	} else {
		p = NULL;
	}
	pthread_mutex_unlock(&page_lock);
	return p;
}

static void page_put(void *p)
{
	pthread_mutex_lock(&page_lock);
	*(void **)p = page_free_list;
	page_free_list = p;
	pthread_mutex_unlock(&page_lock);
}

static size_t page_round(size_t size)
{
	return (size + QHCA_PAGE_SIZE - 1) & ~(size_t)(QHCA_PAGE_SIZE - 1);
}

static void *ring_alloc(size_t size)
{
	void *p;

	size = page_round(size);
	if (size == QHCA_PAGE_SIZE)
		p = page_get();
	else if (posix_memalign(&p, QHCA_PAGE_SIZE, size))
		p = NULL;
	if (!p) {
		errno = ENOMEM;
		return NULL;
	}
	memset(p, 0, size);
	return p;
}

/* Free what ring_alloc(@size) gave. */
static void ring_free(void *p, size_t size)
{
	if (!p)
		return;
	if (page_round(size) == QHCA_PAGE_SIZE)
		page_put(p);
	else
		free(p);
}

/* ---------------------------------------------------------------- parent domains */
/* @pd if it is a parent domain with allocators, else NULL. */
static struct qhca_pd *parent_of(struct ibv_pd *pd)
{
	struct qhca_pd *p = pd ? to_qpd(pd) : NULL;

	return p && p->protection && p->alloc ? p : NULL;
}

/*
 * A buffer the device reads or writes: from the allocator of the parent domain @parent
 * unless it defers to the default (then *custom stays false and ring_alloc() gives it).
 * Page aligned and zeroed either way.
 */
static void *buf_alloc(struct qhca_pd *parent, size_t size, uint64_t type, bool *custom)
{
	void *p;

	*custom = false;
	size = (size + QHCA_PAGE_SIZE - 1) & ~(size_t)(QHCA_PAGE_SIZE - 1);
	if (parent) {
		p = parent->alloc(&parent->ibv_pd, parent->pd_context, size, QHCA_PAGE_SIZE, type);
		if (p != IBV_ALLOCATOR_USE_DEFAULT) {
			if (p && ((uintptr_t)p & (QHCA_PAGE_SIZE - 1))) {
				parent->free(&parent->ibv_pd, parent->pd_context, p, type);
				p = NULL;	/* the device needs whole pages */
			}
			if (!p) {
				errno = ENOMEM;
				return NULL;
			}
			memset(p, 0, size);
			*custom = true;
			return p;
		}
	}
	return ring_alloc(size);
}

/* Free what buf_alloc(@parent, @size, @type, @custom) gave. */
static void buf_free(struct qhca_pd *parent, bool custom, void *p, size_t size, uint64_t type)
{
	if (p && custom)
		parent->free(&parent->ibv_pd, parent->pd_context, p, type);
	else
		ring_free(p, size);
}

static void *wq_buf_alloc(struct qhca_ring *r, struct qhca_pd *parent, uint64_t type)
{
	bool custom;

	r->buf = buf_alloc(parent, (size_t)1 << (r->log2 + r->stride_log2), type, &custom);
	r->parent = custom ? parent : NULL;
	return r->buf;
}

static void wq_buf_free(struct qhca_ring *r, uint64_t type)
{
	buf_free(r->parent, r->parent != NULL, r->buf, (size_t)1 << (r->log2 + r->stride_log2),
		 type);
	r->buf = NULL;
}

/*
 * ibv_alloc_parent_domain: the PD it contains (the kernel knows only that one) and, if
 * given, allocators for the rings of QPs, SRQs and CQs created in it. No thread domains.
 */
struct ibv_pd *qhca_alloc_parent_domain(struct ibv_context *context,
					struct ibv_parent_domain_init_attr *attr)
{
	struct qhca_pd *pd;

	if (ibv_check_alloc_parent_domain(attr))
		return NULL;
	if (attr->td || (attr->comp_mask & ~(uint32_t)(IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS |
						      IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT)) ||
	    to_qpd(attr->pd)->protection) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	if ((attr->comp_mask & IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS) &&
	    (!attr->alloc || !attr->free)) {
		errno = EINVAL;
		return NULL;
	}
	pd = calloc(1, sizeof(*pd));
	if (!pd)
		return NULL;
	ibv_initialize_parent_domain(&pd->ibv_pd, attr->pd);
	pd->protection = to_qpd(attr->pd);
	pd->handle = pd->protection->handle;
	if (attr->comp_mask & IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS) {
		pd->alloc = attr->alloc;
		pd->free = attr->free;
	}
	if (attr->comp_mask & IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT)
		pd->pd_context = attr->pd_context;
	return &pd->ibv_pd;
}

/* The smallest l with 2^l >= v, for any v (0 and 1 give 0). */
static unsigned int log2_ceil(uint64_t v)
{
	return v <= 1 ? 0 : 64 - __builtin_clzll(v - 1);
}

/*
 * Capabilities are checked against the device's limits (struct qhca_context) before any
 * arithmetic; what passes is small enough that the sizes below cannot overflow. Failures
 * are EINVAL, as rdma-core providers report a capability beyond the device.
 */

/* log2 of a ring's entries for @want (0 counts as 1) of at most @max: 0 or EINVAL. */
static int ring_entries_log2(uint32_t want, uint32_t max, uint32_t *log2)
{
	if (want > max)
		return EINVAL;
	*log2 = log2_ceil(want ? want : 1);
	/* Rings are powers of two: a device maximum that is not one caps the rounding too. */
	return ((uint64_t)1 << *log2) > max ? EINVAL : 0;
}

/* log2 of a WQE stride of @bytes: a WQE stays within one page. */
static int stride_log2(uint64_t bytes, uint32_t *log2)
{
	*log2 = log2_ceil(bytes);
	return *log2 > QHCA_PAGE_SHIFT ? EINVAL : 0;
}

static void ring_doorbell(struct qhca_context *ctx, uint32_t off, uint32_t num, uint32_t idx)
{
	/* WQEs and records must be visible before the device sees the doorbell. */
	udma_to_device_barrier();
	mmio_write64_le((uint8_t *)ctx->db_page + off,
			htole64(QHCA_FIELD_PREP(QHCA_DB_INDEX_MASK, idx) |
				QHCA_FIELD_PREP(QHCA_DB_NUM_MASK, num)));
}

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

/* Room for one more WQE? */
static bool ring_full(struct qhca_ring *r)
{
	return r->pi - __atomic_load_n(&r->ci, __ATOMIC_ACQUIRE) >= 1u << r->log2;
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
	log2 = log2_ceil((uint64_t)cqe + 1);	/* one slot stays empty */
	cq->size = (sizeof(struct qhca_cqe) << log2) + sizeof(struct qhca_cq_dbrec);
	cq->parent = parent;
	cq->ring = buf_alloc(parent, cq->size, QHCA_RES_TYPE_CQ, &cq->custom);
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
	log2 = log2_ceil((uint64_t)cqe + 1);	/* one slot stays empty */
	size = (sizeof(struct qhca_cqe) << log2) + sizeof(struct qhca_cq_dbrec);
	ring = buf_alloc(cq->parent, size, QHCA_RES_TYPE_CQ, &custom);
	if (!ring)
		return ENOMEM;
	cmd.drv_payload.buf_addr = (uintptr_t)ring;
	cmd.drv_payload.log2_entries = log2;
	pthread_spin_lock(&cq->lock);
	ret = ibv_cmd_resize_cq(ibcq, cqe, &cmd.ibv_cmd, sizeof(cmd), &resp, sizeof(resp));
	if (ret) {
		pthread_spin_unlock(&cq->lock);
		buf_free(cq->parent, custom, ring, size, QHCA_RES_TYPE_CQ);
		return ret;
	}
	buf_free(cq->parent, cq->custom, cq->ring, cq->size, QHCA_RES_TYPE_CQ);
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
	buf_free(cq->parent, cq->custom, cq->ring, cq->size, QHCA_RES_TYPE_CQ);
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
static void cq_clean(struct qhca_cq *cq, uint32_t num, bool xrc)
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
		parent = parent_of(attr->parent_domain);
	}
	cq = cq_alloc(to_qctx(context), attr->cqe, parent, &cmd.drv_payload);
	if (!cq)
		return NULL;
	if (ibv_cmd_create_cq_ex(context, attr, &cq->vcq, &cmd.ibv_cmd, sizeof(cmd),
				 &resp.ibv_resp, sizeof(resp), 0)) {
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

	ring_doorbell(to_qctx(ibcq->context), solicited ? QHCA_DB_CQ_ARM_SE : QHCA_DB_CQ_ARM,
		      cq->cqn, cq->ci);
	return 0;
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
	return stride_log2(sizeof(struct qhca_sq_wqe) + (ud ? sizeof(struct qhca_ud_seg) : 0) +
			   data, log2);
}

static int rq_stride_log2(uint32_t max_sge, uint32_t *log2)
{
	return stride_log2(sizeof(struct qhca_rq_wqe) +
			   (uint64_t)(max_sge ? max_sge : 1) * sizeof(struct qhca_sge), log2);
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
	wq_buf_free(&qp->sq, QHCA_RES_TYPE_QP);
	wq_buf_free(&qp->rq, QHCA_RES_TYPE_QP);
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
		err = ring_entries_log2(cap->max_send_wr, ctx->max_qp_wr, &sq.log2);
	if (!err)
		err = sq_stride_log2(cap, ud, &sq.stride_log2);
	if (!err && !srq)
		err = ring_entries_log2(cap->max_recv_wr, ctx->max_qp_wr, &rq.log2);
	if (!err && !srq)
		err = rq_stride_log2(cap->max_recv_sge, &rq.stride_log2);
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
	if (!wq_buf_alloc(&qp->sq, parent_of(pd), QHCA_RES_TYPE_QP) || !qp->wr_scratch)
		goto err;
	if (!srq) {
		qp->rq = rq;
		if (!wq_buf_alloc(&qp->rq, parent_of(pd), QHCA_RES_TYPE_QP))
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
	cq_clean(to_qcq(ibqp->send_cq), qp->qpn, false);
	if (ibqp->qp_type != IBV_QPT_XRC_SEND && ibqp->recv_cq != ibqp->send_cq)
		cq_clean(to_qcq(ibqp->recv_cq), qp->qpn, false);
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
 * (to SQE or ERR) are states that accept posts (they complete flushed).
 */
static bool send_allowed(const struct ibv_qp *ibqp)
{
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
			ring_doorbell(to_qctx(ibqp->context), QHCA_DB_SQ, qp->qpn, qp->sq.pi);
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
	ring_doorbell(to_qctx(ibqp->context), QHCA_DB_SQ, qp->qpn, qp->sq.pi);
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
	ring_doorbell(to_qctx(ibqp->context), QHCA_DB_RQ, qp->qpn, qp->rq.pi);
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
		ring_doorbell(to_qctx(ex->qp_base.context), QHCA_DB_SQ, qp->qpn, qp->sq.pi);
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

#define QHCA_SEND_OPS (IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM |	\
		       IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM |			\
		       IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |		\
		       IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD | IBV_QP_EX_WITH_SEND_WITH_INV |	\
		       IBV_QP_EX_WITH_LOCAL_INV | IBV_QP_EX_WITH_BIND_MW |			\
		       IBV_QP_EX_WITH_ATOMIC_WRITE)

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
	struct ibv_qp_ex *ex;
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
		ex = &qp->vqp.qp_ex;
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
		qp->vqp.comp_mask |= VERBS_QP_EX;
	}
	return &qp->vqp.qp;
}

/* ---------------------------------------------------------------- shared receive queues */
/* An SRQ with its ring for @attr; fills the driver part of the command. */
static struct qhca_srq *srq_alloc(struct qhca_context *ctx, struct ibv_pd *pd,
				  const struct ibv_srq_attr *attr, struct qhca_create_srq_cmd *drv)
{
	struct qhca_ring rq = {};
	struct qhca_srq *srq;
	int err;

	err = attr->max_sge > ctx->max_srq_sge ? EINVAL :
	      ring_entries_log2(attr->max_wr, ctx->max_srq_wr, &rq.log2);
	if (!err)
		err = rq_stride_log2(attr->max_sge, &rq.stride_log2);
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
	srq->parent = parent_of(pd);
	if (!wq_buf_alloc(&srq->rq, srq->parent, QHCA_RES_TYPE_SRQ)) {
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
	wq_buf_free(&srq->rq, QHCA_RES_TYPE_SRQ);
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
	ret = ring_entries_log2(attr->max_wr, ctx->max_srq_wr, &r.log2);
	if (ret)
		return ret;
	if ((mask & IBV_SRQ_LIMIT) && attr->srq_limit > 1u << r.log2)
		return EINVAL;
	if (!wq_buf_alloc(&r, srq->parent, QHCA_RES_TYPE_SRQ))
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
	wq_buf_free(&r, QHCA_RES_TYPE_SRQ);	/* the old ring, or the new one on failure */
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
		cq_clean(srq->xrc_cq, srq->xrc_srqn, true);
	}
	srq_free(srq);
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
