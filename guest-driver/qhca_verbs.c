// SPDX-License-Identifier: GPL-2.0
/*
 * qhca ib_device_ops: device and port queries, user contexts with their doorbell page
 * mapped through rdma_user_mmap_entry, and protection domains; the ops table of the whole
 * driver.
 */
#include <linux/io.h>
#include <linux/slab.h>
#include <rdma/ib_mad.h>
#include <rdma/ib_user_verbs.h>
#include <rdma/uverbs_ioctl.h>

#include "qhca.h"

static int qhca_query_device(struct ib_device *ibdev, struct ib_device_attr *attr,
			     struct ib_udata *udata)
{
	struct qhca_dev *dev = to_qdev(ibdev);
	const struct qhca_device_attr *a = &dev->attr;

	/* The core's own query (at registration) passes no udata from 7.x. */
	if (udata && (udata->inlen || udata->outlen))
		return -EINVAL;
	memset(attr, 0, sizeof(*attr));
	attr->fw_ver = a->fw_version;
	attr->sys_image_guid = cpu_to_be64(a->node_guid);
	attr->max_mr_size = a->max_mr_size;
	attr->page_size_cap = a->page_size_cap;
	attr->vendor_id = a->vendor_id;
	attr->vendor_part_id = a->vendor_part_id;
	attr->hw_ver = a->hw_version;
	attr->max_qp = a->max_qp;
	attr->max_qp_wr = a->max_qp_wr;
	attr->max_send_sge = a->max_send_sge;
	attr->max_recv_sge = a->max_recv_sge;
	attr->max_sge_rd = a->max_sge_rd;
	attr->max_cq = a->max_cq;
	attr->max_cqe = a->max_cqe;
	attr->max_mr = a->max_mr;
	attr->max_pd = a->max_pd;
	attr->max_qp_rd_atom = a->max_qp_rd_atom;
	attr->max_qp_init_rd_atom = a->max_qp_init_rd_atom;
	attr->max_srq = a->max_srq;
	attr->max_srq_wr = a->max_srq_wr;
	attr->max_srq_sge = a->max_srq_sge;
	attr->max_ah = a->max_ah;
	attr->max_fast_reg_page_list_len = a->max_fast_reg_page_list_len;
	attr->max_pkeys = a->max_pkeys;
	attr->local_ca_ack_delay = a->local_ca_ack_delay;
	attr->atomic_cap = (a->dev_caps & QHCA_DEV_CAP_ATOMIC) ? IB_ATOMIC_HCA : IB_ATOMIC_NONE;
	attr->max_qp_rd_atom = a->max_qp_rd_atom;
	attr->max_res_rd_atom = min_t(u64, (u64)a->max_qp_rd_atom * a->max_qp, INT_MAX);
	attr->device_cap_flags = IB_DEVICE_RC_RNR_NAK_GEN | IB_DEVICE_SYS_IMAGE_GUID |
				 IB_DEVICE_CHANGE_PHY_PORT;
	/* ibv_modify_srq(IBV_SRQ_MAX_WR): the provider's rings (RESIZE_SRQ) */
	if (a->dev_caps & QHCA_DEV_CAP_SRQ)
		attr->device_cap_flags |= IB_DEVICE_SRQ_RESIZE;
	if (a->dev_caps & QHCA_DEV_CAP_FAST_REG)
		attr->device_cap_flags |= IB_DEVICE_MEM_MGT_EXTENSIONS;
	else
		attr->max_fast_reg_page_list_len = 0;
	if (a->dev_caps & QHCA_DEV_CAP_ATOMIC_WRITE)
		attr->device_cap_flags |= QHCA_IB_DEVICE_ATOMIC_WRITE;
	if (a->dev_caps & QHCA_DEV_CAP_MW) {
		/* Windows share the device's key table with regions. */
		attr->device_cap_flags |= IB_DEVICE_MEM_WINDOW | IB_DEVICE_MEM_WINDOW_TYPE_2B;
		attr->max_mw = a->max_mr;
	}
	if (a->dev_caps & QHCA_DEV_CAP_XRC)
		attr->device_cap_flags |= IB_DEVICE_XRC;
	return 0;
}

static int qhca_query_port(struct ib_device *ibdev, u32 port, struct ib_port_attr *attr)
{
	struct qhca_dev *dev = to_qdev(ibdev);
	struct qhca_port_attr p;
	int err;

	/* Ask the device each time: port state is live. */
	err = qhca_admin_query(dev, QHCA_CMD_QUERY_PORT, port, &p, sizeof(p));
	if (err)
		return err;
	/* ib_core zeroes *attr before calling us. */
	attr->state = p.state;
	attr->phys_state = p.phys_state;
	attr->max_mtu = p.max_mtu;
	attr->active_mtu = p.active_mtu;
	attr->gid_tbl_len = p.gid_tbl_len;
	attr->max_msg_sz = p.max_msg_sz;
	attr->port_cap_flags = p.port_cap_flags;
	attr->pkey_tbl_len = p.pkey_tbl_len;
	attr->active_width = p.active_width;
	attr->active_speed = p.active_speed;
	if (p.link_layer == QHCA_LINK_IB) {
		attr->lid = p.lid;
		attr->sm_lid = p.sm_lid;
		attr->lmc = p.lmc;
		attr->sm_sl = p.sm_sl;
		attr->subnet_timeout = p.subnet_timeout;
		attr->init_type_reply = p.init_type_reply;
		attr->max_vl_num = p.max_vl_num;
		attr->bad_pkey_cntr = 0;
		attr->qkey_viol_cntr = 0;
		return 0;
	}
	attr->ip_gids = !qhca_link_iwarp(to_qdev(ibdev));
	return 0;
}

static int qhca_get_port_immutable(struct ib_device *ibdev, u32 port,
				   struct ib_port_immutable *immutable)
{
	struct ib_port_attr attr = {};
	int err;

	err = ib_query_port(ibdev, port, &attr);
	if (err)
		return err;
	immutable->pkey_tbl_len = attr.pkey_tbl_len;
	immutable->gid_tbl_len = attr.gid_tbl_len;
	/* RoCE v1 and v2 side by side, as ConnectX: ib_core then puts a GID of each type in
	 * the table for every address, and the GID chosen picks the frame format. */
	if (qhca_link_ib(to_qdev(ibdev)))
		immutable->core_cap_flags = RDMA_CORE_PORT_IBA_IB;
	else if (qhca_link_iwarp(to_qdev(ibdev)))
		immutable->core_cap_flags = RDMA_CORE_PORT_IWARP;
	else
		immutable->core_cap_flags = RDMA_CORE_PORT_IBA_ROCE_UDP_ENCAP |
			(to_qdev(ibdev)->caps & QHCA_CAP_ROCE_V1 ? RDMA_CORE_PORT_IBA_ROCE : 0);
	/* iWARP has no MADs (ib_core insists on 0 then) */
	immutable->max_mad_size = qhca_link_iwarp(to_qdev(ibdev)) ? 0 : IB_MGMT_MAD_SIZE;
	return 0;
}

static enum rdma_link_layer qhca_get_link_layer(struct ib_device *ibdev, u32 port)
{
	return qhca_link_ib(to_qdev(ibdev)) ? IB_LINK_LAYER_INFINIBAND : IB_LINK_LAYER_ETHERNET;
}

static int qhca_query_pkey(struct ib_device *ibdev, u32 port, u16 index, u16 *pkey)
{
	if (qhca_link_ib(to_qdev(ibdev)))
		return qhca_query_pkey_ib(to_qdev(ibdev), index, pkey);
	if (index > 0)
		return -EINVAL;
	*pkey = IB_DEFAULT_PKEY_FULL;
	return 0;
}

static void qhca_get_dev_fw_str(struct ib_device *ibdev, char *str)
{
	u64 fw = to_qdev(ibdev)->attr.fw_version;

	snprintf(str, IB_FW_VERSION_NAME_MAX, "%llu.%llu.%llu",
		 FIELD_GET(QHCA_FW_VERSION_MAJOR_MASK, fw),
		 FIELD_GET(QHCA_FW_VERSION_MINOR_MASK, fw),
		 FIELD_GET(QHCA_FW_VERSION_PATCH_MASK, fw));
}

/* ---------------------------------------------------------------- udata */
/*
 * Copy the driver part of a uverbs command (abi/qhca_uabi.h) of @len bytes from user space
 * into @cmd and check it for growth: shorter is EINVAL; bytes past @len (a newer
 * provider's fields) that are not zero, or a bit in the command's @comp_mask (a field of
 * @cmd) outside @known, are EOPNOTSUPP. The caller checks reserved fields and values.
 */
int qhca_ucmd_get(struct ib_udata *udata, void *cmd, size_t len, const u32 *comp_mask,
		  u32 known)
{
	if (udata->inlen < len)
		return -EINVAL;
	if (udata->inlen > len && !ib_is_udata_cleared(udata, len, udata->inlen - len))
		return -EOPNOTSUPP;
	if (ib_copy_from_udata(cmd, udata, len))
		return -EFAULT;
	return *comp_mask & ~known ? -EOPNOTSUPP : 0;
}

/* ---------------------------------------------------------------- user contexts */
static int qhca_alloc_ucontext(struct ib_ucontext *ibuctx, struct ib_udata *udata)
{
	struct qhca_ucontext *uctx = to_quctx(ibuctx);
	struct qhca_dev *dev = to_qdev(ibuctx->device);
	struct qhca_alloc_ucontext_resp resp = {};
	struct qhca_alloc_ucontext_cmd ucmd;
	struct qhca_user_mmap_entry *entry;
	struct qhca_cmd cmd = {};
	int err;

	err = qhca_ucmd_get(udata, &ucmd, sizeof(ucmd), &ucmd.comp_mask,
			    QHCA_ALLOC_UCONTEXT_CMD_COMP_MASK);
	if (err)
		return err;
	if (ucmd.rsvd)
		return -EINVAL;
	cmd.hdr.opcode = QHCA_CMD_CREATE_UCTX;
	err = qhca_admin_exec(dev, &cmd, &uctx->handle, &uctx->db_page);
	if (err)
		return err;
	if (uctx->db_page == 0 || uctx->db_page >= dev->db_pages) {
		err = -EIO;
		goto err_destroy;
	}

	entry = kzalloc(sizeof(*entry), GFP_KERNEL);
	if (!entry) {
		err = -ENOMEM;
		goto err_destroy;
	}
	entry->address = dev->db_bar_start + (u64)uctx->db_page * QHCA_DB_PAGE_SIZE;
	err = rdma_user_mmap_entry_insert(ibuctx, &entry->rdma_entry, PAGE_SIZE);
	if (err) {
		kfree(entry);
		goto err_destroy;
	}
	uctx->db_entry = &entry->rdma_entry;

	resp.db_mmap_offset = rdma_user_mmap_get_offset(uctx->db_entry);
	resp.db_page = uctx->db_page;
	resp.db_page_size = QHCA_DB_PAGE_SIZE;
	resp.max_inline_data = dev->attr.max_inline_data;
	resp.abi_minor = QHCA_ABI_VERSION_MINOR;
	err = ib_copy_to_udata(udata, &resp, min(udata->outlen, sizeof(resp)));
	if (err)
		goto err_remove;
	return 0;

err_remove:
	rdma_user_mmap_entry_remove(uctx->db_entry);
err_destroy:
	qhca_admin_handle_cmd(dev, QHCA_CMD_DESTROY_UCTX, uctx->handle, NULL);
	return err;
}

static void qhca_dealloc_ucontext(struct ib_ucontext *ibuctx)
{
	struct qhca_ucontext *uctx = to_quctx(ibuctx);

	rdma_user_mmap_entry_remove(uctx->db_entry);
	if (qhca_admin_handle_cmd(to_qdev(ibuctx->device), QHCA_CMD_DESTROY_UCTX,
				  uctx->handle, NULL))
		ibdev_warn(ibuctx->device, "destroying user context %u failed\n", uctx->handle);
}

static int qhca_mmap(struct ib_ucontext *ibuctx, struct vm_area_struct *vma)
{
	struct rdma_user_mmap_entry *rdma_entry;
	struct qhca_user_mmap_entry *entry;
	int err;

	rdma_entry = rdma_user_mmap_entry_get(ibuctx, vma);
	if (!rdma_entry)
		return -EINVAL;
	entry = container_of(rdma_entry, struct qhca_user_mmap_entry, rdma_entry);
	err = rdma_user_mmap_io(ibuctx, vma, PFN_DOWN(entry->address), PAGE_SIZE,
				pgprot_noncached(vma->vm_page_prot), rdma_entry);
	rdma_user_mmap_entry_put(rdma_entry);
	return err;
}

static void qhca_mmap_free(struct rdma_user_mmap_entry *rdma_entry)
{
	kfree(container_of(rdma_entry, struct qhca_user_mmap_entry, rdma_entry));
}

/* ---------------------------------------------------------------- protection domains */
static int qhca_alloc_pd(struct ib_pd *ibpd, struct ib_udata *udata)
{
	struct qhca_dev *dev = to_qdev(ibpd->device);
	struct qhca_pd *pd = to_qpd(ibpd);
	struct qhca_ucontext *uctx = rdma_udata_to_drv_context(udata, struct qhca_ucontext,
							       ibucontext);
	u32 owner = uctx ? uctx->handle : QHCA_HANDLE_KERNEL;
	int err;

	err = qhca_admin_handle_cmd(dev, QHCA_CMD_CREATE_PD, owner, &pd->handle);
	if (err)
		return err;
	if (udata && udata->outlen) {
		struct qhca_alloc_pd_resp resp = { .pd_handle = pd->handle };

		err = ib_copy_to_udata(udata, &resp, min(udata->outlen, sizeof(resp)));
		if (err) {
			qhca_admin_handle_cmd(dev, QHCA_CMD_DESTROY_PD, pd->handle, NULL);
			return err;
		}
	}
	return 0;
}

static int qhca_dealloc_pd(struct ib_pd *ibpd, struct ib_udata *udata)
{
	struct qhca_dev *dev = to_qdev(ibpd->device);
	int err;

	err = qhca_admin_handle_cmd(dev, QHCA_CMD_DESTROY_PD, to_qpd(ibpd)->handle, NULL);
	/* A dead queue: the PD is gone for the OS (it holds no memory of ours). */
	return err && !qhca_admin_dead(dev) ? err : 0;
}

/* ---------------------------------------------------------------- XRC domains */
/*
 * ib_core shares one ib_xrcd among the processes that open it through the same file and
 * frees it with the last of them: on the device the kernel owns it (no user context).
 */
static int qhca_alloc_xrcd(struct ib_xrcd *ibxrcd, struct ib_udata *udata)
{
	struct qhca_dev *dev = to_qdev(ibxrcd->device);
	struct qhca_cmd cmd = {};

	if (!(dev->attr.dev_caps & QHCA_DEV_CAP_XRC))
		return -EOPNOTSUPP;
	cmd.hdr.opcode = QHCA_CMD_CREATE_XRCD;
	return qhca_admin_exec(dev, &cmd, &to_qxrcd(ibxrcd)->handle, NULL);
}

static int qhca_dealloc_xrcd(struct ib_xrcd *ibxrcd, struct ib_udata *udata)
{
	struct qhca_dev *dev = to_qdev(ibxrcd->device);
	int err;

	err = qhca_admin_handle_cmd(dev, QHCA_CMD_DESTROY_XRCD, to_qxrcd(ibxrcd)->handle, NULL);
	/* A dead queue: the domain is gone for the OS (it holds no memory of ours). */
	return err && !qhca_admin_dead(dev) ? err : 0;
}

/* ---------------------------------------------------------------- hw_counters */
static const struct rdma_stat_desc qhca_counter_names[QHCA_CNT_MAX] = {
	[QHCA_CNT_TX_PKTS].name = "tx_pkts",
	[QHCA_CNT_TX_BYTES].name = "tx_bytes",
	[QHCA_CNT_RX_PKTS].name = "rx_pkts",
	[QHCA_CNT_RX_BYTES].name = "rx_bytes",
	[QHCA_CNT_RETRANSMITS].name = "retransmits",
	[QHCA_CNT_TIMEOUTS].name = "timeouts",
	[QHCA_CNT_NAKS_SENT].name = "naks_sent",
	[QHCA_CNT_NAKS_RECEIVED].name = "naks_received",
	[QHCA_CNT_RNR_NAKS_SENT].name = "rnr_naks_sent",
	[QHCA_CNT_RNR_NAKS_RECEIVED].name = "rnr_naks_received",
	[QHCA_CNT_DUPLICATES].name = "duplicates",
	[QHCA_CNT_OUT_OF_SEQUENCE].name = "out_of_sequence",
	[QHCA_CNT_DROP_BAD_LENGTH].name = "drop_bad_length",
	[QHCA_CNT_DROP_BAD_IP].name = "drop_bad_ip",
	[QHCA_CNT_DROP_BAD_OPCODE].name = "drop_bad_opcode",
	[QHCA_CNT_DROP_BAD_ICRC].name = "drop_bad_icrc",
	[QHCA_CNT_DROP_NO_QP].name = "drop_no_qp",
	[QHCA_CNT_DROP_BAD_STATE].name = "drop_bad_state",
	[QHCA_CNT_DROP_BAD_PKEY].name = "drop_bad_pkey",
	[QHCA_CNT_DROP_BAD_QKEY].name = "drop_bad_qkey",
	[QHCA_CNT_LOOPBACK_PKTS].name = "loopback_pkts",
	[QHCA_CNT_CQ_OVERFLOWS].name = "cq_overflows",
	[QHCA_CNT_ETH_TX_FRAMES].name = "eth_tx_frames",
	[QHCA_CNT_ETH_RX_FRAMES].name = "eth_rx_frames",
	[QHCA_CNT_ETH_RX_DROPS].name = "eth_rx_drops",
	[QHCA_CNT_DROP_NO_WQE].name = "drop_no_wqe",
	[QHCA_CNT_REMOTE_ACCESS_ERRORS].name = "remote_access_errors",
	[QHCA_CNT_DROP_BUSY].name = "drop_busy",
	[QHCA_CNT_DROP_BAD_VCRC].name = "drop_bad_vcrc",
	[QHCA_CNT_DROP_BAD_LID].name = "drop_bad_lid",
	[QHCA_CNT_SMPS].name = "smps",
};

static struct rdma_hw_stats *qhca_alloc_hw_port_stats(struct ib_device *ibdev, u32 port)
{
	return rdma_alloc_hw_stats_struct(qhca_counter_names, QHCA_CNT_MAX,
					  RDMA_HW_STATS_DEFAULT_LIFESPAN);
}

static int qhca_get_hw_stats(struct ib_device *ibdev, struct rdma_hw_stats *stats, u32 port,
			     int index)
{
	struct qhca_counters_block *b;
	int err, i;

	b = kmalloc(sizeof(*b), GFP_KERNEL);
	if (!b)
		return -ENOMEM;
	err = qhca_obj_cmd(to_qdev(ibdev), QHCA_CMD_QUERY_COUNTERS, 0, NULL, 0, b, sizeof(*b),
			   NULL);
	if (!err)
		for (i = 0; i < QHCA_CNT_MAX; i++)
			stats->value[i] = b->value[i];
	kfree(b);
	return err ? err : QHCA_CNT_MAX;
}

const struct ib_device_ops qhca_dev_ops = {
	.owner = THIS_MODULE,
	.driver_id = RDMA_DRIVER_UNKNOWN,
	.uverbs_abi_ver = QHCA_UVERBS_ABI_VERSION,

	.alloc_hw_port_stats = qhca_alloc_hw_port_stats,
	.alloc_pd = qhca_alloc_pd,
	.alloc_ucontext = qhca_alloc_ucontext,
	.alloc_xrcd = qhca_alloc_xrcd,
	.attach_mcast = qhca_attach_mcast,
	.create_ah = qhca_create_ah,
	.create_cq = qhca_create_cq,
	.create_qp = qhca_create_qp,
	.create_srq = qhca_create_srq,
	.create_user_ah = qhca_create_ah,
	.dealloc_pd = qhca_dealloc_pd,
	.dealloc_ucontext = qhca_dealloc_ucontext,
	.dealloc_xrcd = qhca_dealloc_xrcd,
	.dereg_mr = qhca_dereg_mr,
	.QHCA_OP_RESIZE_CQ = qhca_resize_cq,
	.rereg_user_mr = qhca_rereg_user_mr,
	.alloc_mr = qhca_alloc_mr,
	.alloc_mw = qhca_alloc_mw,
	.dealloc_mw = qhca_dealloc_mw,
	.map_mr_sg = qhca_map_mr_sg,
	.destroy_ah = qhca_destroy_ah,
	.destroy_cq = qhca_destroy_cq,
	.destroy_qp = qhca_destroy_qp,
	.destroy_srq = qhca_destroy_srq,
	.detach_mcast = qhca_detach_mcast,
	.get_dev_fw_str = qhca_get_dev_fw_str,
	.get_dma_mr = qhca_get_dma_mr,
	.get_hw_stats = qhca_get_hw_stats,
	.get_link_layer = qhca_get_link_layer,
	.get_port_immutable = qhca_get_port_immutable,
	.mmap = qhca_mmap,
	.mmap_free = qhca_mmap_free,
	.modify_device = qhca_modify_device,
	.modify_port = qhca_modify_port,
	.modify_qp = qhca_modify_qp,
	.modify_srq = qhca_modify_srq,
	.poll_cq = qhca_poll_cq,
	.post_recv = qhca_post_recv,
	.post_send = qhca_post_send,
	.post_srq_recv = qhca_post_srq_recv,
	.process_mad = qhca_process_mad,
	.query_ah = qhca_query_ah,
	.query_device = qhca_query_device,
	.query_gid = qhca_query_gid,
	.query_pkey = qhca_query_pkey,
	.query_port = qhca_query_port,
	.query_qp = qhca_query_qp,
	.query_srq = qhca_query_srq,
	.reg_user_mr = qhca_reg_user_mr,
	.req_notify_cq = qhca_req_notify_cq,

	INIT_RDMA_OBJ_SIZE(ib_ah, qhca_ah, ibah),
	INIT_RDMA_OBJ_SIZE(ib_cq, qhca_cq, ibcq),
	INIT_RDMA_OBJ_SIZE(ib_mw, qhca_mw, ibmw),
	INIT_RDMA_OBJ_SIZE(ib_pd, qhca_pd, ibpd),
	INIT_RDMA_OBJ_SIZE(ib_qp, qhca_qp, ibqp),
	INIT_RDMA_OBJ_SIZE(ib_srq, qhca_srq, ibsrq),
	INIT_RDMA_OBJ_SIZE(ib_ucontext, qhca_ucontext, ibucontext),
	INIT_RDMA_OBJ_SIZE(ib_xrcd, qhca_xrcd, ibxrcd),
};
