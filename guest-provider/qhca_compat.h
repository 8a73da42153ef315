/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * What differs between the rdma-core releases the provider is built in (Debian's 44 and
 * 56, provider ABI 34, and 65), in one place: the provider's files call these and never
 * test a version. CMakeLists.txt finds each change in libibverbs' driver.h.
 */
#ifndef QHCA_COMPAT_H
#define QHCA_COMPAT_H

#include <infiniband/driver.h>

/* ibv_cmd_get_context() passes file descriptors along (none here). */
static inline int qhca_cmd_get_context(struct verbs_context *ctx, struct ibv_get_context *cmd,
				       size_t cmd_size, struct ib_uverbs_get_context_resp *resp,
				       size_t resp_size)
{
#ifdef QHCA_HAVE_GET_CONTEXT_FD_ARR
	return ibv_cmd_get_context(ctx, cmd, cmd_size, NULL, resp, resp_size);
#else
	return ibv_cmd_get_context(ctx, cmd, cmd_size, resp, resp_size);
#endif
}

/* ibv_cmd_create_cq_ex() takes a buffer the provider gives (none: qhca passes its ring
 * in its own command). */
static inline int qhca_cmd_create_cq_ex(struct ibv_context *context,
					const struct ibv_cq_init_attr_ex *attr,
					struct verbs_cq *cq, struct ibv_create_cq_ex *cmd,
					size_t cmd_size, struct ib_uverbs_ex_create_cq_resp *resp,
					size_t resp_size)
{
#ifdef QHCA_HAVE_CREATE_CQ_PROV_ATTR
	return ibv_cmd_create_cq_ex(context, attr, NULL, cq, cmd, cmd_size, resp, resp_size, 0);
#else
	return ibv_cmd_create_cq_ex(context, attr, cq, cmd, cmd_size, resp, resp_size, 0);
#endif
}

#endif /* QHCA_COMPAT_H */
