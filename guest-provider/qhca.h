/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * qhca rdma-core provider: user-space verbs for the qhca emulated RDMA HCA.
 */
#ifndef QHCA_PROVIDER_H
#define QHCA_PROVIDER_H

#include <endian.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include <infiniband/driver.h>
#include <infiniband/kern-abi.h>
#include <util/mmio.h>
#include <util/udma_barrier.h>

#include "qhca_compat.h"
#include "qhca_uabi.h"
#include <kernel-abi/qhca_uabi.h>	/* made from it by CMakeLists.txt */

#define QHCA_QP_HASH	256

struct qhca_device {
	struct verbs_device ibv_dev;
};

struct qhca_context {
	struct verbs_context ibv_ctx;
	void *db_page;			/* this context's doorbell page, mapped write-only */
	uint32_t db_page_index;
	/*
	 * The device's limits (query_device at open, max_inline_data from the context), each at
	 * most what the provider's ring formats can hold: every capability an application asks
	 * for is checked against them before any arithmetic on it (qhca_buf.c).
	 */
	uint32_t max_qp_wr;
	uint32_t max_send_sge, max_recv_sge;
	uint32_t max_inline_data;
	uint32_t max_cqe;
	uint32_t max_srq_wr, max_srq_sge;
	/* QPs by number and XRC SRQs by XRC SRQ number, for the poller to free ring slots
	 * (see cqe_retire); qp_lock guards both. The QPs' table doubles as they come (from
	 * QHCA_QP_HASH buckets), so a poll stays O(1) with the device's 262144 QPs. */
	pthread_mutex_t qp_lock;
	struct qhca_qp **qp_hash;	/* qp_hash_mask + 1 buckets */
	uint32_t qp_hash_mask;
	uint32_t nqps;
	struct qhca_srq *srq_hash[QHCA_QP_HASH];
};

struct qhca_pd {
	struct ibv_pd ibv_pd;
	uint32_t handle;
	/* A parent domain (ibv_alloc_parent_domain): the PD it contains and its allocators
	 * of the rings the device reads and writes (QHCA_RES_TYPE_*). */
	struct qhca_pd *protection;
	void *(*alloc)(struct ibv_pd *pd, void *pd_context, size_t size, size_t alignment,
		       uint64_t resource_type);
	void (*free)(struct ibv_pd *pd, void *pd_context, void *ptr, uint64_t resource_type);
	void *pd_context;
};

/* The resource types a parent domain's allocator is called with ('qhca' and a number). */
#define QHCA_RES_TYPE_QP		((uint64_t)0x71686361 << 32 | 1)	/* SQ and RQ */
#define QHCA_RES_TYPE_SRQ		((uint64_t)0x71686361 << 32 | 2)
#define QHCA_RES_TYPE_CQ		((uint64_t)0x71686361 << 32 | 3)

struct qhca_cq {
	struct verbs_cq vcq;		/* ibv_cq, or ibv_cq_ex for ibv_create_cq_ex */
	uint32_t cqn;
	uint32_t log2;
	uint32_t ci;			/* consumer index, free running */
	struct qhca_cqe *ring;
	struct qhca_cq_dbrec *dbrec;
	size_t size;
	pthread_spinlock_t lock;
	struct qhca_cqe *cur;		/* the CQE being read between start_poll and end_poll */
	struct qhca_pd *parent;		/* created in a parent domain with allocators */
	bool custom;			/* ring from its allocator */
};

struct qhca_ring {
	void *buf;
	struct qhca_pd *parent;		/* buf from this parent domain's allocator, or NULL */
	uint32_t log2, stride_log2;
	uint32_t pi;			/* producer index, free running */
	uint32_t ci;			/* slots before it are free again: set by polling */
};

/*
 * A QP. XRC_SEND has no RQ and names the remote XRC SRQ in every WQE; XRC_RECV (created
 * here or opened with ibv_open_qp) has no rings at all: its XRC SRQs receive for it.
 */
struct qhca_qp {
	struct verbs_qp vqp;		/* ibv_qp, or ibv_qp_ex for the ibv_wr_* API */
	uint32_t qpn;
	bool ud;
	bool xrc_send;
	uint32_t max_inline;
	struct qhca_ring sq, rq;
	pthread_spinlock_t sq_lock, rq_lock;
	struct qhca_srq *srq;
	struct qhca_qp *hash_next;
	uint8_t *wr_scratch;		/* ibv_wr_* on a full SQ builds here, then fails */
	/* ibv_wr_*: the WQE being built, the producer index at wr_start, an error so far */
	uint8_t *wr_cur;
	uint32_t wr_start_pi;
	int wr_err;
};

struct qhca_srq {
	struct verbs_srq vsrq;		/* ibv_srq; srq_type and srq_num for XRC */
	uint32_t srqn;
	/* An XRC SRQ: its number on the wire and in CQEs, its CQ, its place in srq_hash */
	uint32_t xrc_srqn;
	struct qhca_cq *xrc_cq;
	struct qhca_srq *hash_next;
	struct qhca_pd *parent;		/* created in a parent domain with allocators */
	struct qhca_ring rq;
	pthread_spinlock_t lock;
};

struct qhca_ah {
	struct ibv_ah ibv_ah;
	struct qhca_av av;
};

/*
 * uverbs commands with driver data (abi/qhca_uabi.h): struct qhca_uX is the core command
 * (ibv_cmd) followed by ours, struct qhca_uX_resp the core response (ibv_resp) followed by
 * ours; our fields are members of both, as cmd.buf_addr or resp.cqn. The comp_mask of
 * every command is 0: the provider uses no optional field yet.
 */
DECLARE_DRV_CMD(qhca_uget_context, IB_USER_VERBS_CMD_GET_CONTEXT,
		qhca_alloc_ucontext_cmd, qhca_alloc_ucontext_resp);
DECLARE_DRV_CMD(qhca_ualloc_pd, IB_USER_VERBS_CMD_ALLOC_PD, empty, qhca_alloc_pd_resp);
DECLARE_DRV_CMD(qhca_ucreate_cq, IB_USER_VERBS_CMD_CREATE_CQ, qhca_create_cq_cmd,
		qhca_create_cq_resp);
DECLARE_DRV_CMD(qhca_ucreate_cq_ex, IB_USER_VERBS_EX_CMD_CREATE_CQ, qhca_create_cq_cmd,
		qhca_create_cq_resp);
DECLARE_DRV_CMD(qhca_uresize_cq, IB_USER_VERBS_CMD_RESIZE_CQ, qhca_resize_cq_cmd, empty);
DECLARE_DRV_CMD(qhca_umodify_srq, IB_USER_VERBS_CMD_MODIFY_SRQ, qhca_modify_srq_cmd, empty);
DECLARE_DRV_CMD(qhca_ucreate_qp, IB_USER_VERBS_CMD_CREATE_QP, qhca_create_qp_cmd,
		qhca_create_qp_resp);
DECLARE_DRV_CMD(qhca_ucreate_srq, IB_USER_VERBS_CMD_CREATE_SRQ, qhca_create_srq_cmd,
		qhca_create_srq_resp);
DECLARE_DRV_CMD(qhca_ucreate_xsrq, IB_USER_VERBS_CMD_CREATE_XSRQ, qhca_create_srq_cmd,
		qhca_create_srq_resp);
DECLARE_DRV_CMD(qhca_ucreate_ah, IB_USER_VERBS_CMD_CREATE_AH, empty, qhca_create_ah_resp);

static inline struct qhca_context *to_qctx(struct ibv_context *ctx)
{
	return container_of(ctx, struct qhca_context, ibv_ctx.context);
}

static inline struct qhca_pd *to_qpd(struct ibv_pd *pd)
{
	return container_of(pd, struct qhca_pd, ibv_pd);
}

static inline struct qhca_cq *to_qcq(struct ibv_cq *cq)
{
	return container_of(cq, struct qhca_cq, vcq.cq);
}

static inline struct qhca_qp *to_qqp(struct ibv_qp *qp)
{
	return container_of(qp, struct qhca_qp, vqp.qp);
}

static inline struct qhca_srq *to_qsrq(struct ibv_srq *srq)
{
	return container_of(srq, struct qhca_srq, vsrq.srq);
}

static inline struct qhca_ah *to_qah(struct ibv_ah *ah)
{
	return container_of(ah, struct qhca_ah, ibv_ah);
}

/* Ceilings of the provider's own formats, whatever the device reports. */
#define QHCA_PROV_MAX_WR	(1u << 24)	/* ring entries */
#define QHCA_PROV_MAX_CQE	((1u << 24) - 1)
#define QHCA_PROV_MAX_SGE	255		/* num_sge of a send WQE is one byte */
#define QHCA_PROV_MAX_INLINE	QHCA_PAGE_SIZE	/* a WQE never spans more than a page */

/* The smallest l with 2^l >= v, for any v (0 and 1 give 0). */
static inline unsigned int qhca_log2_ceil(uint64_t v)
{
	return v <= 1 ? 0 : 64 - __builtin_clzll(v - 1);
}

static inline void qhca_ring_doorbell(struct qhca_context *ctx, uint32_t off, uint32_t num,
				      uint32_t idx)
{
	/* WQEs and records must be visible before the device sees the doorbell. */
	udma_to_device_barrier();
	mmio_write64_le((uint8_t *)ctx->db_page + off,
			htole64(QHCA_FIELD_PREP(QHCA_DB_INDEX_MASK, idx) |
				QHCA_FIELD_PREP(QHCA_DB_NUM_MASK, num)));
}

/* The operations of the ibv_wr_* API (qhca_wr.c) */
#define QHCA_SEND_OPS (IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM |	\
		       IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM |			\
		       IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |		\
		       IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD | IBV_QP_EX_WITH_SEND_WITH_INV |	\
		       IBV_QP_EX_WITH_LOCAL_INV | IBV_QP_EX_WITH_BIND_MW |			\
		       IBV_QP_EX_WITH_ATOMIC_WRITE)

/* qhca_buf.c: ring memory, parent domains, ring geometry */
struct qhca_pd *qhca_parent_of(struct ibv_pd *pd);
void *qhca_buf_alloc(struct qhca_pd *parent, size_t size, uint64_t type, bool *custom);
void qhca_buf_free(struct qhca_pd *parent, bool custom, void *p, size_t size, uint64_t type);
void *qhca_wq_buf_alloc(struct qhca_ring *r, struct qhca_pd *parent, uint64_t type);
void qhca_wq_buf_free(struct qhca_ring *r, uint64_t type);
struct ibv_pd *qhca_alloc_parent_domain(struct ibv_context *context,
					struct ibv_parent_domain_init_attr *attr);
int qhca_ring_entries_log2(uint32_t want, uint32_t max, uint32_t *log2);
int qhca_stride_log2(uint64_t bytes, uint32_t *log2);
int qhca_rq_stride_log2(uint32_t max_sge, uint32_t *log2);

/* qhca_cq.c */
struct ibv_cq *qhca_create_cq(struct ibv_context *context, int cqe,
			      struct ibv_comp_channel *channel, int comp_vector);
struct ibv_cq_ex *qhca_create_cq_ex(struct ibv_context *context,
				   struct ibv_cq_init_attr_ex *attr);
int qhca_destroy_cq(struct ibv_cq *ibcq);
int qhca_resize_cq(struct ibv_cq *ibcq, int cqe);
int qhca_poll_cq(struct ibv_cq *ibcq, int ne, struct ibv_wc *wc);
int qhca_req_notify_cq(struct ibv_cq *ibcq, int solicited);
void qhca_cq_clean(struct qhca_cq *cq, uint32_t num, bool xrc);

/* qhca_qp.c */
struct ibv_qp *qhca_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *attr);
struct ibv_qp *qhca_create_qp_ex(struct ibv_context *context, struct ibv_qp_init_attr_ex *attr);
struct ibv_qp *qhca_open_qp(struct ibv_context *context, struct ibv_qp_open_attr *attr);
int qhca_query_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr, int mask,
		  struct ibv_qp_init_attr *init);
int qhca_modify_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr, int mask);
int qhca_destroy_qp(struct ibv_qp *ibqp);

/* qhca_srq.c */
struct ibv_srq *qhca_create_srq(struct ibv_pd *pd, struct ibv_srq_init_attr *attr);
struct ibv_srq *qhca_create_srq_ex(struct ibv_context *context,
				   struct ibv_srq_init_attr_ex *attr);
int qhca_get_srq_num(struct ibv_srq *ibsrq, uint32_t *srq_num);
int qhca_modify_srq(struct ibv_srq *ibsrq, struct ibv_srq_attr *attr, int mask);
int qhca_query_srq(struct ibv_srq *ibsrq, struct ibv_srq_attr *attr);
int qhca_destroy_srq(struct ibv_srq *ibsrq);

/* qhca_wr.c */
int qhca_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr, struct ibv_send_wr **bad_wr);
int qhca_bind_mw(struct ibv_qp *ibqp, struct ibv_mw *mw, struct ibv_mw_bind *bind);
int qhca_post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad_wr);
int qhca_post_srq_recv(struct ibv_srq *ibsrq, struct ibv_recv_wr *wr,
		       struct ibv_recv_wr **bad_wr);
void qhca_wr_set_ops(struct ibv_qp_ex *ex);

#endif /* QHCA_PROVIDER_H */
