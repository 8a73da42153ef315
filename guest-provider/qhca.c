// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * qhca rdma-core provider: device matching, user context with its doorbell page, device
 * and port queries, protection domains. The datapath verbs (CQ, QP, MR, post and poll)
 * are not offered yet; libibverbs answers them with EOPNOTSUPP.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "qhca.h"

static int qhca_query_device_ex(struct ibv_context *context,
				const struct ibv_query_device_ex_input *input,
				struct ibv_device_attr_ex *attr, size_t attr_size)
{
	struct ib_uverbs_ex_query_device_resp resp;
	size_t resp_size = sizeof(resp);
	uint64_t fw;
	int ret;

	ret = ibv_cmd_query_device_any(context, input, attr, attr_size, &resp,
				       &resp_size);
	if (ret)
		return ret;
	fw = resp.base.fw_ver;
	snprintf(attr->orig_attr.fw_ver, sizeof(attr->orig_attr.fw_ver),
		 "%u.%u.%u", (unsigned int)(fw >> 32) & 0xffff,
		 (unsigned int)(fw >> 16) & 0xffff, (unsigned int)fw & 0xffff);
	return 0;
}

static int qhca_query_port(struct ibv_context *context, uint8_t port,
			   struct ibv_port_attr *attr)
{
	struct ibv_query_port cmd;

	return ibv_cmd_query_port(context, port, attr, &cmd, sizeof(cmd));
}

static struct ibv_pd *qhca_alloc_pd(struct ibv_context *context)
{
	struct qhca_alloc_pd_resp_full resp = {};
	struct ibv_alloc_pd cmd;
	struct qhca_pd *pd;
	int ret;

	pd = calloc(1, sizeof(*pd));
	if (!pd) {
		errno = ENOMEM;
		return NULL;
	}
	ret = ibv_cmd_alloc_pd(context, &pd->ibv_pd, &cmd, sizeof(cmd),
			       &resp.ibv_resp, sizeof(resp));
	if (ret) {
		free(pd);
		errno = ret;
		return NULL;
	}
	pd->handle = resp.drv.pd_handle;
	return &pd->ibv_pd;
}

static int qhca_dealloc_pd(struct ibv_pd *ibpd)
{
	int ret;

	ret = ibv_cmd_dealloc_pd(ibpd);
	if (ret)
		return ret;
	free(to_qpd(ibpd));
	return 0;
}

static void qhca_free_context(struct ibv_context *ibctx)
{
	struct qhca_context *ctx = to_qctx(ibctx);

	if (ctx->db_page)
		munmap(ctx->db_page, QHCA_DB_PAGE_SIZE);
	verbs_uninit_context(&ctx->ibv_ctx);
	free(ctx);
}

static const struct verbs_context_ops qhca_ctx_ops = {
	.alloc_pd = qhca_alloc_pd,
	.dealloc_pd = qhca_dealloc_pd,
	.free_context = qhca_free_context,
	.query_device_ex = qhca_query_device_ex,
	.query_port = qhca_query_port,
};

static struct verbs_context *qhca_alloc_context(struct ibv_device *ibdev, int cmd_fd,
						void *private_data)
{
	struct qhca_get_context_resp resp = {};
	struct ibv_get_context cmd;
	struct qhca_context *ctx;

	ctx = verbs_init_and_alloc_context(ibdev, cmd_fd, ctx, ibv_ctx,
					   RDMA_DRIVER_UNKNOWN);
	if (!ctx)
		return NULL;
	if (ibv_cmd_get_context(&ctx->ibv_ctx, &cmd, sizeof(cmd), &resp.ibv_resp,
				sizeof(resp)))
		goto err;
	if (resp.drv.db_page_size != QHCA_DB_PAGE_SIZE) {
		verbs_err(&ctx->ibv_ctx, "qhca: doorbell page size %u unsupported\n",
			  resp.drv.db_page_size);
		errno = EINVAL;
		goto err;
	}
	ctx->db_page = mmap(NULL, QHCA_DB_PAGE_SIZE, PROT_WRITE, MAP_SHARED, cmd_fd,
			    resp.drv.db_mmap_offset);
	if (ctx->db_page == MAP_FAILED) {
		ctx->db_page = NULL;
		goto err;
	}
	ctx->db_page_index = resp.drv.db_page;
	ctx->max_inline_data = resp.drv.max_inline_data;
	verbs_set_ops(&ctx->ibv_ctx, &qhca_ctx_ops);
	return &ctx->ibv_ctx;

err:
	verbs_uninit_context(&ctx->ibv_ctx);
	free(ctx);
	return NULL;
}

static struct verbs_device *qhca_alloc_device(struct verbs_sysfs_dev *sysfs_dev)
{
	struct qhca_device *dev = calloc(1, sizeof(*dev));

	return dev ? &dev->ibv_dev : NULL;
}

static void qhca_uninit_device(struct verbs_device *vdev)
{
	free(container_of(vdev, struct qhca_device, ibv_dev));
}

static const struct verbs_match_ent qhca_match_table[] = {
	VERBS_PCI_MATCH(QHCA_PCI_VENDOR_ID, QHCA_PCI_DEVICE_ID, NULL),
	{}
};

static const struct verbs_device_ops qhca_dev_ops = {
	.name = "qhca",
	.match_min_abi_version = QHCA_UVERBS_ABI_VERSION,
	.match_max_abi_version = QHCA_UVERBS_ABI_VERSION,
	.match_table = qhca_match_table,
	.alloc_device = qhca_alloc_device,
	.uninit_device = qhca_uninit_device,
	.alloc_context = qhca_alloc_context,
};

PROVIDER_DRIVER(qhca, qhca_dev_ops);
