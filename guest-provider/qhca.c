// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * qhca rdma-core provider: device matching, the user context with its doorbell page,
 * device and port queries, protection domains, memory regions and address handles. The
 * queues and the datapath are in qhca_buf.c, qhca_cq.c, qhca_qp.c, qhca_srq.c and
 * qhca_wr.c.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <endian.h>
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
	snprintf(attr->orig_attr.fw_ver, sizeof(attr->orig_attr.fw_ver), "%u.%u.%u",
		 (unsigned int)QHCA_FIELD_GET(QHCA_FW_VERSION_MAJOR_MASK, fw),
		 (unsigned int)QHCA_FIELD_GET(QHCA_FW_VERSION_MINOR_MASK, fw),
		 (unsigned int)QHCA_FIELD_GET(QHCA_FW_VERSION_PATCH_MASK, fw));
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
	struct qhca_ualloc_pd_resp resp = {};
	struct qhca_ualloc_pd cmd = {};
	struct qhca_pd *pd;
	int ret;

	pd = calloc(1, sizeof(*pd));
	if (!pd) {
		errno = ENOMEM;
		return NULL;
	}
	ret = ibv_cmd_alloc_pd(context, &pd->ibv_pd, &cmd.ibv_cmd, sizeof(cmd),
			       &resp.ibv_resp, sizeof(resp));
	if (ret) {
		free(pd);
		errno = ret;
		return NULL;
	}
	pd->handle = resp.pd_handle;
	return &pd->ibv_pd;
}

static int qhca_dealloc_pd(struct ibv_pd *ibpd)
{
	int ret;

	if (to_qpd(ibpd)->protection) {	/* a parent domain: nothing in the kernel */
		free(to_qpd(ibpd));
		return 0;
	}
	ret = ibv_cmd_dealloc_pd(ibpd);
	if (ret)
		return ret;
	free(to_qpd(ibpd));
	return 0;
}

static struct ibv_mr *qhca_reg_mr(struct ibv_pd *pd, void *addr, size_t length,
				  uint64_t hca_va, int access)
{
	struct ib_uverbs_reg_mr_resp resp;
	struct ibv_reg_mr cmd;
	struct verbs_mr *vmr;

	vmr = calloc(1, sizeof(*vmr));
	if (!vmr)
		return NULL;
	if (ibv_cmd_reg_mr(pd, addr, length, hca_va, access, vmr, &cmd, sizeof(cmd), &resp,
			   sizeof(resp))) {
		free(vmr);
		return NULL;
	}
	return &vmr->ibv_mr;
}

/* The kernel makes a new region and the keys change (ibv_cmd_rereg_mr updates them). */
static int qhca_rereg_mr(struct verbs_mr *vmr, int flags, struct ibv_pd *pd, void *addr,
			 size_t length, int access)
{
	struct ib_uverbs_rereg_mr_resp resp;
	struct ibv_rereg_mr cmd;

	return ibv_cmd_rereg_mr(vmr, flags, addr, length, (uintptr_t)addr, access, pd, &cmd,
				sizeof(cmd), &resp, sizeof(resp));
}

static int qhca_dereg_mr(struct verbs_mr *vmr)
{
	int ret = ibv_cmd_dereg_mr(vmr);

	if (ret)
		return ret;
	free(vmr);
	return 0;
}

/* Memory windows: the kernel creates them free; qhca_bind_mw and BIND_MW WQEs bind them. */
static struct ibv_mw *qhca_alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type)
{
	struct ib_uverbs_alloc_mw_resp resp;
	struct ibv_alloc_mw cmd;
	struct ibv_mw *mw = calloc(1, sizeof(*mw));

	if (!mw)
		return NULL;
	if (ibv_cmd_alloc_mw(pd, type, mw, &cmd, sizeof(cmd), &resp, sizeof(resp))) {
		free(mw);
		return NULL;
	}
	return mw;
}

static int qhca_dealloc_mw(struct ibv_mw *mw)
{
	int ret = ibv_cmd_dealloc_mw(mw);

	if (ret)
		return ret;
	free(mw);
	return 0;
}

/* A new AH, made by the kernel too (which resolves RoCE's destination MAC into @resp). */
static struct qhca_ah *qhca_ah_new(struct ibv_pd *pd, struct ibv_ah_attr *attr,
				   struct qhca_ucreate_ah_resp *resp)
{
	struct qhca_ah *ah = calloc(1, sizeof(*ah));

	if (!ah)
		return NULL;
	if (ibv_cmd_create_ah(pd, &ah->ibv_ah, attr, &resp->ibv_resp, sizeof(*resp))) {
		free(ah);
		return NULL;
	}
	return ah;
}

/* An address on an InfiniBand port: LID, SL, path bits, and a GRH if the AH is global. */
static struct ibv_ah *qhca_create_ib_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr)
{
	struct qhca_ucreate_ah_resp resp = {};
	union ibv_gid sgid;
	struct qhca_ah *ah;

	if (attr->is_global &&
	    ibv_query_gid(pd->context, attr->port_num, attr->grh.sgid_index, &sgid)) {
		errno = EINVAL;
		return NULL;
	}
	ah = qhca_ah_new(pd, attr, &resp);
	if (!ah)
		return NULL;
	ah->av.dlid = htole16(attr->dlid);
	ah->av.sl = attr->sl;
	ah->av.ib_flags = attr->src_path_bits & QHCA_AV_PATH_BITS_MASK;
	if (attr->is_global) {
		ah->av.ib_flags |= QHCA_AV_GRH;
		memcpy(ah->av.dgid, attr->grh.dgid.raw, 16);
		memcpy(ah->av.sgid, sgid.raw, 16);
		ah->av.hop_limit = attr->grh.hop_limit;
		ah->av.tclass = attr->grh.traffic_class;
		ah->av.flow_label = htole32(attr->grh.flow_label);
	}
	return &ah->ibv_ah;
}

static struct ibv_ah *qhca_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr)
{
	struct qhca_ucreate_ah_resp resp = {};
	struct ibv_port_attr port;
	struct ibv_gid_entry sgid;
	struct qhca_ah *ah;

	if (ibv_query_port(pd->context, attr->port_num, &port))
		return NULL;
	if (port.link_layer == IBV_LINK_LAYER_INFINIBAND)
		return qhca_create_ib_ah(pd, attr);
	if (!attr->is_global ||
	    ibv_query_gid_ex(pd->context, attr->port_num, attr->grh.sgid_index, &sgid, 0)) {
		errno = EINVAL;
		return NULL;
	}
	/* The source GID's type picks the frame format: RoCE v1 or v2. */
	if (sgid.gid_type != IBV_GID_TYPE_ROCE_V2 && sgid.gid_type != IBV_GID_TYPE_ROCE_V1) {
		errno = EINVAL;
		return NULL;
	}
	ah = qhca_ah_new(pd, attr, &resp);
	if (!ah)
		return NULL;
	if (sgid.gid_type == IBV_GID_TYPE_ROCE_V1)
		ah->av.ib_flags = QHCA_AV_ROCE_V1;
	memcpy(ah->av.dgid, attr->grh.dgid.raw, 16);
	memcpy(ah->av.sgid, sgid.gid.raw, 16);
	memcpy(ah->av.dmac, resp.dmac, 6);
	ah->av.hop_limit = attr->grh.hop_limit;
	ah->av.tclass = attr->grh.traffic_class;
	ah->av.flow_label = htole32(attr->grh.flow_label);
	return &ah->ibv_ah;
}

static int qhca_destroy_ah(struct ibv_ah *ibah)
{
	int ret = ibv_cmd_destroy_ah(ibah);

	if (ret)
		return ret;
	free(to_qah(ibah));
	return 0;
}

/* XRC domains: the kernel shares one among the processes that open the same file. */
static struct ibv_xrcd *qhca_open_xrcd(struct ibv_context *context,
				       struct ibv_xrcd_init_attr *attr)
{
	struct ib_uverbs_open_xrcd_resp resp = {};
	struct ibv_open_xrcd cmd = {};
	struct verbs_xrcd *xrcd;
	int ret;

	xrcd = calloc(1, sizeof(*xrcd));
	if (!xrcd)
		return NULL;
	ret = ibv_cmd_open_xrcd(context, xrcd, sizeof(*xrcd), attr, &cmd, sizeof(cmd), &resp,
				sizeof(resp));
	if (ret) {
		free(xrcd);
		errno = ret;
		return NULL;
	}
	return &xrcd->xrcd;
}

static int qhca_close_xrcd(struct ibv_xrcd *ibxrcd)
{
	struct verbs_xrcd *xrcd = container_of(ibxrcd, struct verbs_xrcd, xrcd);
	int ret = ibv_cmd_close_xrcd(xrcd);

	if (ret)
		return ret;
	free(xrcd);
	return 0;
}

static void qhca_free_context(struct ibv_context *ibctx)
{
	struct qhca_context *ctx = to_qctx(ibctx);

	if (ctx->db_page)
		munmap(ctx->db_page, QHCA_DB_PAGE_SIZE);
	pthread_mutex_destroy(&ctx->qp_lock);
	free(ctx->qp_hash);
	verbs_uninit_context(&ctx->ibv_ctx);
	free(ctx);
}

static const struct verbs_context_ops qhca_ctx_ops = {
	.alloc_mw = qhca_alloc_mw,
	.alloc_parent_domain = qhca_alloc_parent_domain,
	.alloc_pd = qhca_alloc_pd,
	.attach_mcast = ibv_cmd_attach_mcast,
	.bind_mw = qhca_bind_mw,
	.close_xrcd = qhca_close_xrcd,
	.create_ah = qhca_create_ah,
	.create_cq = qhca_create_cq,
	.create_cq_ex = qhca_create_cq_ex,
	.create_qp = qhca_create_qp,
	.create_qp_ex = qhca_create_qp_ex,
	.create_srq = qhca_create_srq,
	.create_srq_ex = qhca_create_srq_ex,
	.dealloc_mw = qhca_dealloc_mw,
	.dealloc_pd = qhca_dealloc_pd,
	.dereg_mr = qhca_dereg_mr,
	.destroy_ah = qhca_destroy_ah,
	.destroy_cq = qhca_destroy_cq,
	.destroy_qp = qhca_destroy_qp,
	.destroy_srq = qhca_destroy_srq,
	.detach_mcast = ibv_cmd_detach_mcast,
	.free_context = qhca_free_context,
	.get_srq_num = qhca_get_srq_num,
	.modify_qp = qhca_modify_qp,
	.modify_srq = qhca_modify_srq,
	.open_qp = qhca_open_qp,
	.open_xrcd = qhca_open_xrcd,
	.poll_cq = qhca_poll_cq,
	.post_recv = qhca_post_recv,
	.post_send = qhca_post_send,
	.post_srq_recv = qhca_post_srq_recv,
	.query_device_ex = qhca_query_device_ex,
	.query_port = qhca_query_port,
	.query_qp = qhca_query_qp,
	.query_srq = qhca_query_srq,
	.reg_mr = qhca_reg_mr,
	.rereg_mr = qhca_rereg_mr,
	.req_notify_cq = qhca_req_notify_cq,
	.resize_cq = qhca_resize_cq,
};

static uint32_t min_u32(uint32_t a, uint32_t b)
{
	return a < b ? a : b;
}

/* The device's limits, for checking what applications ask for before the kernel sees it. */
static int query_limits(struct qhca_context *ctx, uint32_t max_inline_data)
{
	struct ib_uverbs_ex_query_device_resp resp;
	size_t resp_size = sizeof(resp);
	struct ibv_device_attr_ex attr;
	struct ibv_device_attr *a = &attr.orig_attr;
	int ret;

	ret = ibv_cmd_query_device_any(&ctx->ibv_ctx.context, NULL, &attr, sizeof(attr), &resp,
				       &resp_size);
	if (ret)
		return ret;
	/* Negative values would be a kernel bug; they allow nothing. */
	ctx->max_qp_wr = min_u32(a->max_qp_wr > 0 ? a->max_qp_wr : 0, QHCA_PROV_MAX_WR);
	ctx->max_send_sge = min_u32(a->max_sge > 0 ? a->max_sge : 0, QHCA_PROV_MAX_SGE);
	ctx->max_recv_sge = ctx->max_send_sge;	/* uverbs reports the smaller of the two */
	ctx->max_cqe = min_u32(a->max_cqe > 0 ? a->max_cqe : 0, QHCA_PROV_MAX_CQE);
	ctx->max_srq_wr = min_u32(a->max_srq_wr > 0 ? a->max_srq_wr : 0, QHCA_PROV_MAX_WR);
	ctx->max_srq_sge = min_u32(a->max_srq_sge > 0 ? a->max_srq_sge : 0, QHCA_PROV_MAX_SGE);
	ctx->max_inline_data = min_u32(max_inline_data, QHCA_PROV_MAX_INLINE);
	return 0;
}

static struct verbs_context *qhca_alloc_context(struct ibv_device *ibdev, int cmd_fd,
						void *private_data)
{
	struct qhca_uget_context_resp resp = {};
	struct qhca_uget_context cmd = {};
	struct qhca_context *ctx;
	int ret;

	ctx = verbs_init_and_alloc_context(ibdev, cmd_fd, ctx, ibv_ctx,
					   RDMA_DRIVER_UNKNOWN);
	if (!ctx)
		return NULL;
	if (qhca_cmd_get_context(&ctx->ibv_ctx, &cmd.ibv_cmd, sizeof(cmd), &resp.ibv_resp,
				 sizeof(resp)))
		goto err;
	/* Minor 1: send completions carry their WQE index (the provider frees slots by it). */
	if (resp.abi_minor < 1) {
		verbs_err(&ctx->ibv_ctx, "qhca: driver ABI 1.%u too old, need 1.1: update qhca.ko\n",
			  resp.abi_minor);
		errno = EPROTONOSUPPORT;
		goto err;
	}
	if (resp.db_page_size != QHCA_DB_PAGE_SIZE) {
		verbs_err(&ctx->ibv_ctx, "qhca: doorbell page size %u unsupported\n",
			  resp.db_page_size);
		errno = EINVAL;
		goto err;
	}
	ctx->db_page = mmap(NULL, QHCA_DB_PAGE_SIZE, PROT_WRITE, MAP_SHARED, cmd_fd,
			    resp.db_mmap_offset);
	if (ctx->db_page == MAP_FAILED) {
		ctx->db_page = NULL;
		goto err;
	}
	ctx->db_page_index = resp.db_page;
	ret = query_limits(ctx, resp.max_inline_data);
	if (ret) {
		verbs_err(&ctx->ibv_ctx, "qhca: query_device failed: %s\n", strerror(ret));
		goto err_unmap;
	}
	ctx->qp_hash = calloc(QHCA_QP_HASH, sizeof(*ctx->qp_hash));	/* it grows from there */
	if (!ctx->qp_hash) {
		ret = ENOMEM;
		goto err_unmap;
	}
	ctx->qp_hash_mask = QHCA_QP_HASH - 1;
	pthread_mutex_init(&ctx->qp_lock, NULL);
	verbs_set_ops(&ctx->ibv_ctx, &qhca_ctx_ops);
	return &ctx->ibv_ctx;

err_unmap:
	munmap(ctx->db_page, QHCA_DB_PAGE_SIZE);
	errno = ret;
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
