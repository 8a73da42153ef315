// SPDX-License-Identifier: GPL-2.0
/*
 * qhca on an InfiniBand port (the device's link=ib): MADs for the device's SMA and PMA
 * (process_mad through MAD_IFC, as mthca and mlx4 hand them to their firmware), GIDs and
 * P_Keys read from the SMA, the port's capability bits (IsSM while opensm holds
 * /dev/infiniband/issmN), the node description, and multicast attachment (IPoIB, UD
 * multicast). docs/infiniband.md tells the whole.
 */
#include <linux/slab.h>
#include <rdma/ib_mad.h>
#include <rdma/ib_smi.h>

#include "qhca.h"

bool qhca_link_ib(const struct qhca_dev *dev)
{
	return dev->port.link_layer == QHCA_LINK_IB;
}

int qhca_process_mad(struct ib_device *ibdev, int mad_flags, u32 port,
		     const struct ib_wc *in_wc, const struct ib_grh *in_grh,
		     const struct ib_mad *in, struct ib_mad *out, size_t *out_mad_size,
		     u16 *out_mad_pkey_index)
{
	struct qhca_dev *dev = to_qdev(ibdev);
	u8 class = in->mad_hdr.mgmt_class;
	u32 answered = 0;
	int err;

	if (!qhca_link_ib(dev))
		return IB_MAD_RESULT_SUCCESS;
	if (class != IB_MGMT_CLASS_SUBN_LID_ROUTED && class != IB_MGMT_CLASS_SUBN_DIRECTED_ROUTE &&
	    class != IB_MGMT_CLASS_PERF_MGMT)
		return IB_MAD_RESULT_SUCCESS;	/* the SA, CM and the rest: for the agents */
	/* The SMA sends no traps, so a TrapRepress has nothing to stop. */
	if (class != IB_MGMT_CLASS_PERF_MGMT && in->mad_hdr.method == IB_MGMT_METHOD_TRAP_REPRESS)
		return IB_MAD_RESULT_SUCCESS | IB_MAD_RESULT_CONSUMED;
	err = qhca_obj_cmd(dev, QHCA_CMD_MAD_IFC, port, in, QHCA_MAD_SIZE, out, QHCA_MAD_SIZE,
			   &answered);
	if (err)
		return IB_MAD_RESULT_FAILURE;
	if (!answered)
		return IB_MAD_RESULT_SUCCESS;	/* SMInfo, responses, traps: the SM's */
	*out_mad_size = sizeof(struct ib_mad);
	return IB_MAD_RESULT_SUCCESS | IB_MAD_RESULT_REPLY;
}

/* Get(@attr, @mod) from the port's own SMA: the 64-byte attribute into @data. */
static int qhca_sma_get(struct qhca_dev *dev, __be16 attr, u32 mod, u8 *data)
{
	struct ib_smp *smp;
	u32 answered = 0;
	int err;

	smp = kzalloc(2 * sizeof(*smp), GFP_KERNEL);
	if (!smp)
		return -ENOMEM;
	smp->base_version = IB_MGMT_BASE_VERSION;
	smp->mgmt_class = IB_MGMT_CLASS_SUBN_LID_ROUTED;
	smp->class_version = 1;
	smp->method = IB_MGMT_METHOD_GET;
	smp->attr_id = attr;
	smp->attr_mod = cpu_to_be32(mod);
	/* Our own cache reads pass without the M_Key (they never show it). */
	err = qhca_obj_cmd(dev, QHCA_CMD_MAD_IFC, 1 | QHCA_MAD_IFC_IGNORE_MKEY, smp, QHCA_MAD_SIZE,
			   smp + 1, QHCA_MAD_SIZE, &answered);
	if (!err && (!answered || smp[1].status))
		err = -EINVAL;
	if (!err)
		memcpy(data, smp[1].data, IB_SMP_DATA_SIZE);
	kfree(smp);
	return err;
}

/* GID index i: the subnet prefix and GUIDInfo entry i (0: the port GUID). */
int qhca_query_gid(struct ib_device *ibdev, u32 port, int index, union ib_gid *gid)
{
	struct qhca_dev *dev = to_qdev(ibdev);
	struct qhca_port_attr p;
	u8 data[IB_SMP_DATA_SIZE];
	int err;

	if (qhca_link_iwarp(dev))
		return qhca_iw_query_gid(dev, index, gid);
	if (index < 0 || index >= dev->port.gid_tbl_len || index >= IB_SMP_DATA_SIZE / 8)
		return -EINVAL;
	err = qhca_admin_query(dev, QHCA_CMD_QUERY_PORT, port, &p, sizeof(p));
	if (!err)
		err = qhca_sma_get(dev, IB_SMP_ATTR_GUID_INFO, 0, data);
	if (err)
		return err;
	gid->global.subnet_prefix = cpu_to_be64(p.gid_prefix);
	memcpy(&gid->global.interface_id, data + 8 * index, 8);
	return 0;
}

int qhca_query_pkey_ib(struct qhca_dev *dev, u16 index, u16 *pkey)
{
	u8 data[IB_SMP_DATA_SIZE];
	int err;

	if (index >= dev->port.pkey_tbl_len || index >= IB_SMP_DATA_SIZE / 2)
		return -EINVAL;
	err = qhca_sma_get(dev, IB_SMP_ATTR_PKEY_TABLE, 0, data);
	if (err)
		return err;
	*pkey = be16_to_cpup((__be16 *)(data + 2 * index));
	return 0;
}

int qhca_modify_port(struct ib_device *ibdev, u32 port, int mask, struct ib_port_modify *pm)
{
	struct qhca_dev *dev = to_qdev(ibdev);
	struct qhca_cmd cmd = {};

	if (!qhca_link_ib(dev))
		return 0;	/* RoCE has no PortInfo to put the bits in */
	cmd.hdr.opcode = QHCA_CMD_MODIFY_PORT;
	cmd.hdr.len = sizeof(cmd.modify_port);
	cmd.modify_port.set_cap = pm->set_port_cap_mask & QHCA_PORT_CAP_MODIFIABLE;
	cmd.modify_port.clr_cap = pm->clr_port_cap_mask & QHCA_PORT_CAP_MODIFIABLE;
	return qhca_admin_exec(dev, &cmd, NULL, NULL);
}

int qhca_modify_device(struct ib_device *ibdev, int mask, struct ib_device_modify *dm)
{
	struct qhca_dev *dev = to_qdev(ibdev);
	int err;

	if (mask & ~IB_DEVICE_MODIFY_NODE_DESC)
		return -EOPNOTSUPP;
	if (!(mask & IB_DEVICE_MODIFY_NODE_DESC))
		return 0;
	if (qhca_link_ib(dev)) {
		err = qhca_obj_cmd(dev, QHCA_CMD_SET_NODE_DESC, 0, dm->node_desc,
				   QHCA_NODE_DESC_SIZE, NULL, 0, NULL);
		if (err)
			return err;
	}
	memcpy(ibdev->node_desc, dm->node_desc, IB_DEVICE_NODE_DESC_MAX);
	return 0;
}

static int qhca_mcast_cmd(struct ib_qp *ibqp, union ib_gid *gid, u16 lid, u8 opcode)
{
	struct qhca_dev *dev = to_qdev(ibqp->device);
	struct qhca_mcast m = { .mlid = lid };

	memcpy(m.gid, gid->raw, sizeof(m.gid));
	return qhca_obj_cmd(dev, opcode, to_qqp(ibqp)->qpn, &m, sizeof(m), NULL, 0, NULL);
}

int qhca_attach_mcast(struct ib_qp *ibqp, union ib_gid *gid, u16 lid)
{
	return qhca_mcast_cmd(ibqp, gid, lid, QHCA_CMD_ATTACH_MCAST);
}

int qhca_detach_mcast(struct ib_qp *ibqp, union ib_gid *gid, u16 lid)
{
	return qhca_mcast_cmd(ibqp, gid, lid, QHCA_CMD_DETACH_MCAST);
}

/*
 * The attributes an AH was made with. ib_mad needs them to match a response to its
 * request (rcv_has_same_gid: the responder's LID or GID against the request's address).
 */
int qhca_query_ah(struct ib_ah *ibah, struct rdma_ah_attr *attr)
{
	struct qhca_ah *ah = to_qah(ibah);
	const struct qhca_av *av = &ah->av;
	union ib_gid dgid;

	memset(attr, 0, sizeof(*attr));
	attr->type = ah->type;
	rdma_ah_set_port_num(attr, ah->port_num);
	if (ah->type == RDMA_AH_ATTR_TYPE_IB) {
		rdma_ah_set_dlid(attr, av->dlid);
		rdma_ah_set_sl(attr, av->sl);
		rdma_ah_set_path_bits(attr, av->ib_flags & QHCA_AV_PATH_BITS_MASK);
	} else if (ah->type == RDMA_AH_ATTR_TYPE_ROCE) {
		memcpy(attr->roce.dmac, av->dmac, ETH_ALEN);
	}
	if (ah->ah_flags & IB_AH_GRH) {
		memcpy(dgid.raw, av->dgid, sizeof(dgid.raw));
		rdma_ah_set_grh(attr, &dgid, av->flow_label, ah->sgid_index, av->hop_limit,
				av->tclass);
	}
	return 0;
}

/* An address on an InfiniBand port: LID, SL and path bits, and a GRH if asked for. */
int qhca_av_from_ib_ah_attr(struct qhca_av *av, const struct rdma_ah_attr *ah)
{
	memset(av, 0, sizeof(*av));
	av->dlid = rdma_ah_get_dlid(ah);
	av->sl = rdma_ah_get_sl(ah);
	av->ib_flags = rdma_ah_get_path_bits(ah) & QHCA_AV_PATH_BITS_MASK;
	if (rdma_ah_get_ah_flags(ah) & IB_AH_GRH) {
		const struct ib_global_route *grh = rdma_ah_read_grh(ah);

		av->ib_flags |= QHCA_AV_GRH;
		memcpy(av->dgid, grh->dgid.raw, 16);
		if (grh->sgid_attr)
			memcpy(av->sgid, grh->sgid_attr->gid.raw, 16);
		av->hop_limit = grh->hop_limit;
		av->tclass = grh->traffic_class;
		av->flow_label = grh->flow_label;
	}
	return 0;
}
