/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * qhca rdma-core provider: user-space verbs for the qhca emulated RDMA HCA.
 */
#ifndef QHCA_PROVIDER_H
#define QHCA_PROVIDER_H

#include <infiniband/driver.h>
#include <infiniband/kern-abi.h>

#include "qhca_uabi.h"

struct qhca_device {
	struct verbs_device ibv_dev;
};

struct qhca_context {
	struct verbs_context ibv_ctx;
	void *db_page;			/* this context's doorbell page, mapped write-only */
	uint32_t db_page_index;
	uint32_t max_inline_data;
};

struct qhca_pd {
	struct ibv_pd ibv_pd;
	uint32_t handle;
};

struct qhca_get_context_resp {
	struct ib_uverbs_get_context_resp ibv_resp;
	struct qhca_alloc_ucontext_resp drv;
};

struct qhca_alloc_pd_resp_full {
	struct ib_uverbs_alloc_pd_resp ibv_resp;
	struct qhca_alloc_pd_resp drv;
};

static inline struct qhca_context *to_qctx(struct ibv_context *ctx)
{
	return container_of(ctx, struct qhca_context, ibv_ctx.context);
}

static inline struct qhca_pd *to_qpd(struct ibv_pd *pd)
{
	return container_of(pd, struct qhca_pd, ibv_pd);
}

#endif /* QHCA_PROVIDER_H */
