// SPDX-License-Identifier: GPL-2.0
/*
 * qhca queue pairs, shared receive queues and address handles: creation with rings in the
 * provider's memory (user) or in DMA memory (kernel), attribute translation for modify and
 * query, and the kernel's post_send, post_recv and post_srq_recv.
 */
#include <linux/dma-mapping.h>
#include <linux/slab.h>
#include <rdma/ib_cache.h>
#include <rdma/ib_umem.h>
#include <rdma/uverbs_ioctl.h>

#include "qhca.h"

/* ---------------------------------------------------------------- rings */
/*
 * A work queue ring: user memory from the provider, or a kernel DMA buffer. The geometry
 * has been validated (qhca_ring_geometry_ok): at most 2^15 entries of at most 4 KiB.
 */
static int qhca_ring_get(struct qhca_dev *dev, struct qhca_ring *r, u64 uaddr, bool user,
			 struct qhca_pbl_buf *pb)
{
	size_t size = (size_t)1 << (r->log2 + r->stride_log2);
	int err;

	size = ALIGN(size, PAGE_SIZE);
	if (user) {
		err = qhca_umem_pbl_get(dev, uaddr, size, IB_ACCESS_LOCAL_WRITE, &r->umem, pb);
	} else {
		r->buf = dma_alloc_coherent(&dev->pdev->dev, size, &r->dma, GFP_KERNEL);
		if (!r->buf)
			return -ENOMEM;
		r->size = size;
		err = qhca_pbl_from_contig(dev, r->dma, size, pb);
	}
	return err;
}

/* Free a ring, or with @keep hand its memory to the admin queue (see qhca_admin.c). */
static void qhca_ring_put(struct qhca_dev *dev, struct qhca_ring *r, bool keep)
{
	qhca_admin_put_umem(dev, keep, r->umem);
	qhca_admin_put_coherent(dev, keep, r->size, r->buf, r->dma);
	r->umem = NULL;
	r->buf = NULL;
}

/* At most 2^15 entries and no more than @max_wr; a WQE stride of at most 4 KiB. */
static bool qhca_ring_geometry_ok(const struct qhca_ring *r, u32 max_wr)
{
	return r->log2 <= QHCA_WQ_MAX_LOG2 && qhca_log2_fits(r->log2, max_wr) &&
	       r->stride_log2 <= QHCA_WQE_MAX_STRIDE_LOG2;
}

/* Computed in 64 bits: the counts come from the caller and the device. */
static u32 qhca_sq_stride_log2(u32 max_sge, u32 max_inline, bool ud)
{
	/* Room for a REG_MR segment too (kernel QPs; user QPs get the provider's stride). */
	u64 bytes = sizeof(struct qhca_sq_wqe) + (ud ? sizeof(struct qhca_ud_seg) : 0) +
		    max3((u64)max_sge * sizeof(struct qhca_sge), (u64)max_inline,
			 (u64)sizeof(struct qhca_reg_mr_seg));

	return order_base_2(bytes);
}

static u32 qhca_rq_stride_log2(u32 max_sge)
{
	return order_base_2(sizeof(struct qhca_rq_wqe) +
			    (u64)max(max_sge, 1u) * sizeof(struct qhca_sge));
}

/*
 * The provider chooses the ring geometry (abi/qhca_uabi.h): it may round up, never down.
 * Every value here comes from user space; the caller checks the limits before any shift.
 */
static int qhca_qp_user_geometry(struct qhca_qp *qp, const struct qhca_create_qp_cmd *u,
				 bool norq)
{
	if (u->sq_log2 < qp->sq.log2 || u->sq_stride_log2 < qp->sq.stride_log2)
		return -EINVAL;
	qp->sq.log2 = u->sq_log2;
	qp->sq.stride_log2 = u->sq_stride_log2;
	if (norq)	/* no receive queue of its own: "rq_addr 0 with an SRQ" (or XRC_INI) */
		return u->rq_addr || u->rq_log2 || u->rq_stride_log2 ? -EINVAL : 0;
	if (u->rq_log2 < qp->rq.log2 || u->rq_stride_log2 < qp->rq.stride_log2)
		return -EINVAL;
	qp->rq.log2 = u->rq_log2;
	qp->rq.stride_log2 = u->rq_stride_log2;
	return 0;
}

/* ---------------------------------------------------------------- QP create and destroy */
/* Let the kernel CQs of a new QP find it when polling (qhca_cq.c). */
static int qhca_qp_attach_cqs(struct qhca_qp *qp, struct ib_cq *scq, struct ib_cq *rcq)
{
	int err = 0;

	if (scq)
		err = qhca_cq_attach_qp(to_qcq(scq), qp);
	if (!err && rcq && rcq != scq)
		err = qhca_cq_attach_qp(to_qcq(rcq), qp);
	return err;
}

/* Forget the QP in its CQs' tables: once this returns, no poller is using it. */
static void qhca_qp_detach_cqs(struct qhca_qp *qp, struct ib_cq *scq, struct ib_cq *rcq)
{
	if (scq)
		qhca_cq_detach_qp(to_qcq(scq), qp);
	if (rcq && rcq != scq)
		qhca_cq_detach_qp(to_qcq(rcq), qp);
}

/*
 * XRC_TGT (IBA 1.2 annex A14): ib_core makes it for uverbs with no udata, PD or CQs, in an
 * XRC domain whose SRQs receive for it, and shares it among the processes of the domain;
 * the kernel owns it on the device. The capabilities user space asked for mean nothing.
 */
static int qhca_create_xrc_tgt(struct qhca_dev *dev, struct qhca_qp *qp,
			       struct ib_qp_init_attr *init)
{
	struct qhca_qp_create c = {};
	int err;

	if (!init->xrcd)
		return -EINVAL;
	c.uctx = QHCA_HANDLE_KERNEL;
	c.type = QHCA_QPT_XRC_TGT;
	c.xrcd = to_qxrcd(init->xrcd)->handle;
	err = qhca_obj_cmd(dev, QHCA_CMD_CREATE_QP, 0, &c, sizeof(c), NULL, 0, &qp->qpn);
	if (err)
		return err;
	err = xa_err(xa_store(&dev->qps, qp->qpn, qp, GFP_KERNEL));
	if (err) {
		qhca_obj_cmd(dev, QHCA_CMD_DESTROY_QP, qp->qpn, NULL, 0, NULL, 0, NULL);
		return err;
	}
	qp->ibqp.qp_num = qp->qpn;
	memset(&init->cap, 0, sizeof(init->cap));
	return 0;
}

int qhca_create_qp(struct ib_qp *ibqp, struct ib_qp_init_attr *init, struct ib_udata *udata)
{
	struct qhca_dev *dev = to_qdev(ibqp->device);
	struct qhca_qp *qp = to_qqp(ibqp);
	struct qhca_ucontext *uctx = rdma_udata_to_drv_context(udata, struct qhca_ucontext,
							       ibucontext);
	bool xrc = dev->attr.dev_caps & QHCA_DEV_CAP_XRC;
	struct ib_qp_cap *cap = &init->cap;
	struct qhca_qp_create c = {};
	struct qhca_pbl_buf sq_pb = {}, rq_pb = {};
	struct qhca_create_qp_cmd ucmd = {};
	bool ud, norq, keep = false;
	int err, derr;

	switch (init->qp_type) {
	case IB_QPT_RC:
	case IB_QPT_UC:
	case IB_QPT_UD:
	case IB_QPT_GSI:
		break;
	case IB_QPT_SMI:	/* QP0: an InfiniBand port's, for ib_mad alone */
		if (!qhca_link_ib(dev) || uctx)
			return -EOPNOTSUPP;
		break;
	case IB_QPT_XRC_INI:
		/* User QPs only: a kernel ib_send_wr cannot name the remote XRC SRQ. */
		if (!xrc || !uctx)
			return -EOPNOTSUPP;
		break;
	case IB_QPT_XRC_TGT:
		if (!xrc)
			return -EOPNOTSUPP;
		break;
	default:
		return -EOPNOTSUPP;
	}
	/* iWARP (RFC 5040) has reliable connections alone: no UD, UC, XRC, nor QP1. */
	if (qhca_link_iwarp(dev) && init->qp_type != IB_QPT_RC)
		return -EOPNOTSUPP;
	if (init->create_flags)
		return -EINVAL;
	spin_lock_init(&qp->sq_lock);
	refcount_set(&qp->iw_refs, 1);
	init_completion(&qp->iw_free);
	spin_lock_init(&qp->rq_lock);
	qp->type = init->qp_type;
	if (init->qp_type == IB_QPT_XRC_TGT)
		return qhca_create_xrc_tgt(dev, qp, init);
	if (cap->max_send_wr > dev->attr.max_qp_wr ||
	    cap->max_recv_wr > dev->attr.max_qp_wr || cap->max_send_sge > dev->attr.max_send_sge ||
	    cap->max_recv_sge > dev->attr.max_recv_sge ||
	    cap->max_inline_data > dev->attr.max_inline_data || cap->max_inline_data > U16_MAX)
		return -EINVAL;
	ud = init->qp_type == IB_QPT_UD || init->qp_type == IB_QPT_GSI ||
	     init->qp_type == IB_QPT_SMI;
	/* No receive queue of its own: an SRQ receives, or nothing (XRC_INI). */
	norq = init->srq || init->qp_type == IB_QPT_XRC_INI;
	qp->sq.log2 = order_base_2(max(cap->max_send_wr, 1u));
	qp->sq.stride_log2 = qhca_sq_stride_log2(cap->max_send_sge, cap->max_inline_data, ud);
	if (!norq) {
		qp->rq.log2 = order_base_2(max(cap->max_recv_wr, 1u));
		qp->rq.stride_log2 = qhca_rq_stride_log2(cap->max_recv_sge);
	}
	if (uctx) {
		err = qhca_ucmd_get(udata, &ucmd, sizeof(ucmd), &ucmd.comp_mask,
				    QHCA_CREATE_QP_CMD_COMP_MASK);
		if (err)
			return err;
		err = qhca_qp_user_geometry(qp, &ucmd, norq);
		if (err)
			return err;
	}
	if (!qhca_ring_geometry_ok(&qp->sq, dev->attr.max_qp_wr) ||
	    (!norq && !qhca_ring_geometry_ok(&qp->rq, dev->attr.max_qp_wr)))
		return -EINVAL;
	err = qhca_ring_get(dev, &qp->sq, ucmd.sq_addr, uctx, &sq_pb);
	if (err)
		goto err_rings;
	if (!norq) {
		err = qhca_ring_get(dev, &qp->rq, ucmd.rq_addr, uctx, &rq_pb);
		if (err)
			goto err_rings;
	}
	c.pd = to_qpd(ibqp->pd)->handle;
	c.send_cq = to_qcq(init->send_cq)->cqn;
	c.recv_cq = init->recv_cq ? to_qcq(init->recv_cq)->cqn : 0;
	c.srq = init->srq ? to_qsrq(init->srq)->srqn : 0;
	c.uctx = uctx ? uctx->handle : QHCA_HANDLE_KERNEL;
	c.type = init->qp_type == IB_QPT_GSI ? QHCA_QPT_GSI :
		 init->qp_type == IB_QPT_SMI ? QHCA_QPT_SMI : init->qp_type;
	c.sq_sig_all = init->sq_sig_type == IB_SIGNAL_ALL_WR;
	c.sq_log2 = qp->sq.log2;
	c.rq_log2 = norq ? 0 : qp->rq.log2;
	c.sq_stride_log2 = qp->sq.stride_log2;
	c.rq_stride_log2 = init->srq ? 4 : norq ? 0 : qp->rq.stride_log2;
	c.max_inline = cap->max_inline_data;
	c.sq_pbl = sq_pb.desc;
	c.rq_pbl = rq_pb.desc;
	err = qhca_obj_cmd(dev, QHCA_CMD_CREATE_QP, 0, &c, sizeof(c), NULL, 0, &qp->qpn);
	keep = qhca_admin_cmd_keep(dev, err);
	if (err)
		goto err_rings;
	qhca_pbl_free(dev, &sq_pb, false);
	qhca_pbl_free(dev, &rq_pb, false);
	qp->max_inline = cap->max_inline_data;
	err = xa_err(xa_store(&dev->qps, qp->qpn, qp, GFP_KERNEL));
	if (err)
		goto err_destroy;
	err = qhca_qp_attach_cqs(qp, init->send_cq, init->recv_cq);
	if (err)
		goto err_xa;
	/* GSI is QP1 and SMI QP0 on the wire whatever the device numbered them. */
	qp->ibqp.qp_num = init->qp_type == IB_QPT_GSI ? 1 : init->qp_type == IB_QPT_SMI ? 0 :
			  qp->qpn;
	cap->max_send_wr = 1u << qp->sq.log2;
	cap->max_recv_wr = norq ? 0 : 1u << qp->rq.log2;
	if (uctx) {
		struct qhca_create_qp_resp uresp = { .qpn = qp->qpn,
						     .max_inline = cap->max_inline_data };

		err = ib_copy_to_udata(udata, &uresp, min(udata->outlen, sizeof(uresp)));
		if (err)
			goto err_xa;
	}
	/* only now may iw_cm take a reference: a failed create frees without waiting */
	WRITE_ONCE(qp->live, true);
	return 0;

err_xa:
	qhca_qp_detach_cqs(qp, init->send_cq, init->recv_cq);
	xa_erase(&dev->qps, qp->qpn);
	synchronize_irq(pci_irq_vector(dev->pdev, QHCA_VEC_ADMIN));	/* async events */
err_destroy:
	derr = qhca_obj_cmd(dev, QHCA_CMD_DESTROY_QP, qp->qpn, NULL, 0, NULL, 0, NULL);
	keep = qhca_admin_obj_keep(dev, derr);
err_rings:
	qhca_pbl_free(dev, &sq_pb, keep);
	qhca_pbl_free(dev, &rq_pb, keep);
	qhca_ring_put(dev, &qp->sq, keep);
	qhca_ring_put(dev, &qp->rq, keep);
	return err;
}

int qhca_destroy_qp(struct ib_qp *ibqp, struct ib_udata *udata)
{
	struct qhca_dev *dev = to_qdev(ibqp->device);
	struct qhca_qp *qp = to_qqp(ibqp);
	int err;

	WRITE_ONCE(qp->live, false);
	err = qhca_obj_cmd(dev, QHCA_CMD_DESTROY_QP, qp->qpn, NULL, 0, NULL, 0, NULL);
	if (err && !qhca_admin_dead(dev))
		return err;
	/* With a dead queue the QP is gone for the OS; its rings stay until reset. */
	qhca_qp_detach_cqs(qp, ibqp->send_cq, ibqp->recv_cq);
	xa_erase(&dev->qps, qp->qpn);
	synchronize_irq(pci_irq_vector(dev->pdev, QHCA_VEC_ADMIN));	/* async events */
	qhca_ring_put(dev, &qp->sq, qhca_admin_obj_keep(dev, err));
	qhca_ring_put(dev, &qp->rq, qhca_admin_obj_keep(dev, err));
	/* The device has reset the QP's connection: iw_cm lets go at its CLOSE (or failed
	 * CONNECT_REPLY) upcall, which that brings. */
	if (!refcount_dec_and_test(&qp->iw_refs))
		while (!wait_for_completion_timeout(&qp->iw_free, 60 * HZ))
			dev_warn(&dev->pdev->dev, "QP 0x%x: iw_cm still holds it after 60 s\n",
				 qp->qpn);
	return 0;
}

/* ---------------------------------------------------------------- modify and query */
static int qhca_av_from_ah_attr(struct qhca_av *av, const struct rdma_ah_attr *ah)
{
	const struct ib_global_route *grh = rdma_ah_read_grh(ah);
	const struct ib_gid_attr *sgid = grh->sgid_attr;

	if (ah->type == RDMA_AH_ATTR_TYPE_IB)
		return qhca_av_from_ib_ah_attr(av, ah);
	if (!(rdma_ah_get_ah_flags(ah) & IB_AH_GRH) || !sgid)
		return -EINVAL;
	/* The source GID's type says how packets are encapsulated: RoCE v1 or v2. */
	if (sgid->gid_type != IB_GID_TYPE_ROCE_UDP_ENCAP && sgid->gid_type != IB_GID_TYPE_ROCE)
		return -EINVAL;
	memset(av, 0, sizeof(*av));
	if (sgid->gid_type == IB_GID_TYPE_ROCE)
		av->ib_flags = QHCA_AV_ROCE_V1;
	memcpy(av->dgid, grh->dgid.raw, 16);
	memcpy(av->sgid, sgid->gid.raw, 16);
	memcpy(av->dmac, ah->roce.dmac, ETH_ALEN);
	av->hop_limit = grh->hop_limit;
	av->tclass = grh->traffic_class;
	av->flow_label = grh->flow_label;
	return 0;
}

int qhca_modify_qp(struct ib_qp *ibqp, struct ib_qp_attr *attr, int mask,
		   struct ib_udata *udata)
{
	struct qhca_dev *dev = to_qdev(ibqp->device);
	struct qhca_qp *qp = to_qqp(ibqp);
	struct qhca_qp_attr a = {};
	int err;

	if (mask & ~(IB_QP_STATE | IB_QP_CUR_STATE | IB_QP_EN_SQD_ASYNC_NOTIFY |
		     IB_QP_ACCESS_FLAGS | IB_QP_PKEY_INDEX | IB_QP_PORT | IB_QP_QKEY |
		     IB_QP_AV | IB_QP_PATH_MTU | IB_QP_TIMEOUT | IB_QP_RETRY_CNT |
		     IB_QP_RNR_RETRY | IB_QP_RQ_PSN | IB_QP_MAX_QP_RD_ATOMIC |
		     IB_QP_MIN_RNR_TIMER | IB_QP_SQ_PSN | IB_QP_MAX_DEST_RD_ATOMIC |
		     IB_QP_DEST_QPN))
		return -EOPNOTSUPP;
	if (qhca_link_iwarp(dev) && !mask)
		return 0;	/* iw_cm's RTS attributes are none at all */
	if (qhca_link_iwarp(dev) && (mask & IB_QP_STATE)) {
		/*
		 * iw_cm's states, as siw and cxgb4 take them: the connection takes the
		 * device's QP from INIT to RTS (RTR and RTS here only follow it), SQD closes
		 * the connection gracefully, ERROR abruptly.
		 */
		switch (attr->qp_state) {
		case IB_QPS_RTR:
		case IB_QPS_RTS:
			qp->state = attr->qp_state;
			return 0;
		case IB_QPS_SQD:
			err = qhca_iw_qp_close(dev, qp->qpn, false);
			if (!err)
				qp->state = IB_QPS_SQD;
			return err;
		case IB_QPS_ERR:
			qhca_iw_qp_close(dev, qp->qpn, true);
			break;
		case IB_QPS_INIT:
			if (qp->state != IB_QPS_RESET) {
				/*
				 * rdma_cm sets the access flags again once connected (a QP
				 * the connection took to RTS): as attributes alone, in
				 * whatever state the device's QP is.
				 */
				mask &= ~IB_QP_STATE;
				break;
			}
			/* rdma_cm gives access flags alone: the port and P_Key are fixed */
			mask |= IB_QP_PKEY_INDEX | IB_QP_PORT;
			attr->pkey_index = 0;
			attr->port_num = 1;
			break;
		default:
			break;
		}
	} else if (!qhca_link_iwarp(dev) &&
		   !ib_modify_qp_is_ok(qp->state, mask & IB_QP_STATE ? attr->qp_state : qp->state,
				       ibqp->qp_type, mask)) {
		return -EINVAL;
	}
	/* IB_QP_* and QHCA_QP_* share their values. */
	a.mask = mask & ~(IB_QP_PORT | IB_QP_EN_SQD_ASYNC_NOTIFY);
	a.state = attr->qp_state;
	a.cur_state = attr->cur_qp_state;
	a.path_mtu = attr->path_mtu;
	a.timeout = attr->timeout;
	a.retry_cnt = attr->retry_cnt;
	a.rnr_retry = attr->rnr_retry;
	a.min_rnr_timer = attr->min_rnr_timer;
	a.max_rd_atomic = attr->max_rd_atomic;
	a.max_dest_rd_atomic = attr->max_dest_rd_atomic;
	a.pkey_index = attr->pkey_index;
	a.qkey = attr->qkey;
	a.rq_psn = attr->rq_psn;
	a.sq_psn = attr->sq_psn;
	a.dest_qpn = attr->dest_qp_num;
	a.access_flags = attr->qp_access_flags & QHCA_ACCESS_ALL;
	if (mask & IB_QP_AV) {
		err = qhca_av_from_ah_attr(&a.av, &attr->ah_attr);
		if (err)
			return err;
	}
	err = qhca_obj_cmd(dev, QHCA_CMD_MODIFY_QP, qp->qpn, &a, sizeof(a), NULL, 0, NULL);
	if (err)
		return err;
	if (mask & IB_QP_STATE)
		qp->state = attr->qp_state;
	if ((mask & IB_QP_STATE) && attr->qp_state == IB_QPS_RESET) {
		unsigned long flags;

		/* The device starts both rings over at index 0. */
		spin_lock_irqsave(&qp->sq_lock, flags);
		qp->sq.pi = 0;
		atomic_set(&qp->sq.ci, 0);
		spin_unlock_irqrestore(&qp->sq_lock, flags);
		spin_lock_irqsave(&qp->rq_lock, flags);
		qp->rq.pi = 0;
		atomic_set(&qp->rq.ci, 0);
		spin_unlock_irqrestore(&qp->rq_lock, flags);
		if (ibqp->send_cq)
			qhca_cq_clean(to_qcq(ibqp->send_cq), qp);
		if (ibqp->recv_cq && ibqp->recv_cq != ibqp->send_cq)
			qhca_cq_clean(to_qcq(ibqp->recv_cq), qp);
	}
	if (mask & IB_QP_AV)
		qp->ah_attr = attr->ah_attr;
	return 0;
}

int qhca_query_qp(struct ib_qp *ibqp, struct ib_qp_attr *attr, int mask,
		  struct ib_qp_init_attr *init)
{
	struct qhca_dev *dev = to_qdev(ibqp->device);
	struct qhca_qp *qp = to_qqp(ibqp);
	struct qhca_qp_attr a;
	int err;

	err = qhca_obj_cmd(dev, QHCA_CMD_QUERY_QP, qp->qpn, NULL, 0, &a, sizeof(a), NULL);
	if (err)
		return err;
	memset(attr, 0, sizeof(*attr));
	memset(init, 0, sizeof(*init));
	attr->qp_state = a.state;
	attr->cur_qp_state = a.state;
	attr->path_mtu = a.path_mtu;
	attr->timeout = a.timeout;
	attr->retry_cnt = a.retry_cnt;
	attr->rnr_retry = a.rnr_retry;
	attr->min_rnr_timer = a.min_rnr_timer;
	attr->max_rd_atomic = a.max_rd_atomic;
	attr->max_dest_rd_atomic = a.max_dest_rd_atomic;
	attr->qkey = a.qkey;
	attr->rq_psn = a.rq_psn;
	attr->sq_psn = a.sq_psn;
	attr->dest_qp_num = a.dest_qpn;
	attr->qp_access_flags = a.access_flags;
	attr->port_num = 1;
	attr->ah_attr = qp->ah_attr;
	if (qp->type != IB_QPT_XRC_TGT) {	/* it has no queues */
		attr->cap.max_send_wr = 1u << qp->sq.log2;
		attr->cap.max_inline_data = qp->max_inline;
		attr->cap.max_send_sge = dev->attr.max_send_sge;
	}
	if (qp->type != IB_QPT_XRC_TGT && qp->type != IB_QPT_XRC_INI) {
		attr->cap.max_recv_wr = ibqp->srq ? 0 : 1u << qp->rq.log2;
		attr->cap.max_recv_sge = dev->attr.max_recv_sge;
	}
	init->qp_type = ibqp->qp_type;
	init->cap = attr->cap;
	init->send_cq = ibqp->send_cq;
	init->recv_cq = ibqp->recv_cq;
	init->srq = ibqp->srq;
	return 0;
}

/* ---------------------------------------------------------------- kernel post */
static void *qhca_wqe(struct qhca_ring *r, u32 idx)
{
	return r->buf + ((size_t)(idx & ((1u << r->log2) - 1)) << r->stride_log2);
}

static int qhca_wr_opcode(enum ib_wr_opcode op, u8 *out)
{
	switch (op) {
	case IB_WR_RDMA_WRITE:
		*out = QHCA_WR_RDMA_WRITE;
		return 0;
	case IB_WR_RDMA_WRITE_WITH_IMM:
		*out = QHCA_WR_RDMA_WRITE_WITH_IMM;
		return 0;
	case IB_WR_SEND:
		*out = QHCA_WR_SEND;
		return 0;
	case IB_WR_SEND_WITH_IMM:
		*out = QHCA_WR_SEND_WITH_IMM;
		return 0;
	case IB_WR_RDMA_READ:
	case IB_WR_RDMA_READ_WITH_INV:	/* with QHCA_WQE_READ_INV */
		*out = QHCA_WR_RDMA_READ;
		return 0;
	case IB_WR_ATOMIC_CMP_AND_SWP:
		*out = QHCA_WR_ATOMIC_CMP_AND_SWP;
		return 0;
	case IB_WR_ATOMIC_FETCH_AND_ADD:
		*out = QHCA_WR_ATOMIC_FETCH_AND_ADD;
		return 0;
	case IB_WR_SEND_WITH_INV:
		*out = QHCA_WR_SEND_WITH_INV;
		return 0;
	case IB_WR_LOCAL_INV:
		*out = QHCA_WR_LOCAL_INV;
		return 0;
	case IB_WR_REG_MR:
		*out = QHCA_WR_REG_MR;
		return 0;
	default:
		return -EOPNOTSUPP;
	}
}

/* The segment of a REG_MR WQE: the region's page list as map_mr_sg left it. */
static int qhca_build_reg_mr(const struct ib_reg_wr *wr, struct qhca_reg_mr_seg *r, void *end)
{
	struct qhca_mr *mr = to_qmr(wr->mr);

	if ((void *)(r + 1) > end || !mr->pages || !mr->npages)
		return -EINVAL;
	memset(r, 0, sizeof(*r));
	r->iova = mr->ibmr.iova;
	r->length = mr->ibmr.length;
	r->pbl_addr = mr->pages_dma;
	r->key = wr->key;
	r->access = (wr->access & IB_ACCESS_LOCAL_WRITE ? QHCA_ACCESS_LOCAL_WRITE : 0) |
		    (wr->access & IB_ACCESS_REMOTE_WRITE ? QHCA_ACCESS_REMOTE_WRITE : 0) |
		    (wr->access & IB_ACCESS_REMOTE_READ ? QHCA_ACCESS_REMOTE_READ : 0) |
		    (wr->access & IB_ACCESS_REMOTE_ATOMIC ? QHCA_ACCESS_REMOTE_ATOMIC : 0);
	r->npages = mr->npages;
	r->page_offset = mr->page_offset;
	r->page_shift = ilog2(mr->ibmr.page_size);
	/* The device reads the key from the WQE; ib_core already gave the MR the new one. */
	mr->key = wr->key;
	return 0;
}

static int qhca_build_send(struct qhca_qp *qp, const struct ib_send_wr *wr, void *w)
{
	struct qhca_sq_wqe *h = w;
	void *seg = w + sizeof(*h);
	u32 stride = 1u << qp->sq.stride_log2;
	int i;

	memset(h, 0, sizeof(*h));
	if (qhca_wr_opcode(wr->opcode, &h->opcode))
		return -EINVAL;
	h->wr_id = wr->wr_id;
	h->flags = (wr->send_flags & IB_SEND_SIGNALED ? QHCA_WQE_SIGNALED : 0) |
		   (wr->send_flags & IB_SEND_SOLICITED ? QHCA_WQE_SOLICITED : 0) |
		   (wr->send_flags & IB_SEND_FENCE ? QHCA_WQE_FENCE : 0);
	if (wr->opcode == IB_WR_RDMA_READ_WITH_INV)
		h->flags |= QHCA_WQE_READ_INV;
	if (wr->opcode == IB_WR_SEND_WITH_INV || wr->opcode == IB_WR_LOCAL_INV ||
	    wr->opcode == IB_WR_RDMA_READ_WITH_INV)
		h->imm_inv = wr->ex.invalidate_rkey;
	else
		h->imm_inv = be32_to_cpu(wr->ex.imm_data);
	if (wr->opcode == IB_WR_REG_MR || wr->opcode == IB_WR_LOCAL_INV) {
		if (qp->type != IB_QPT_RC && qp->type != IB_QPT_UC)
			return -EINVAL;
		return wr->opcode == IB_WR_REG_MR ? qhca_build_reg_mr(reg_wr(wr), seg, w + stride) : 0;
	}
	switch (wr->opcode) {
	case IB_WR_RDMA_WRITE:
	case IB_WR_RDMA_WRITE_WITH_IMM:
	case IB_WR_RDMA_READ:
	case IB_WR_RDMA_READ_WITH_INV:
		h->remote_addr = rdma_wr(wr)->remote_addr;
		h->rkey = rdma_wr(wr)->rkey;
		break;
	case IB_WR_ATOMIC_CMP_AND_SWP:
	case IB_WR_ATOMIC_FETCH_AND_ADD:
		h->remote_addr = atomic_wr(wr)->remote_addr;
		h->rkey = atomic_wr(wr)->rkey;
		h->compare_add = atomic_wr(wr)->compare_add;
		h->swap = atomic_wr(wr)->swap;
		break;
	default:
		break;
	}
	if (qp->type == IB_QPT_UD || qp->type == IB_QPT_GSI || qp->type == IB_QPT_SMI) {
		struct qhca_ud_seg *ud = seg;

		memset(ud, 0, sizeof(*ud));
		ud->av = to_qah(ud_wr(wr)->ah)->av;
		ud->dqpn = ud_wr(wr)->remote_qpn;
		ud->qkey = ud_wr(wr)->remote_qkey;
		seg += sizeof(*ud);
	}
	if (wr->send_flags & IB_SEND_INLINE) {
		u32 len = 0;

		for (i = 0; i < wr->num_sge; i++) {
			/* len <= max_inline, so neither side can wrap */
			if (wr->sg_list[i].length > qp->max_inline - len ||
			    seg + len + wr->sg_list[i].length > w + stride)
				return -EINVAL;
			memcpy(seg + len, (void *)(uintptr_t)wr->sg_list[i].addr,
			       wr->sg_list[i].length);
			len += wr->sg_list[i].length;
		}
		h->flags |= QHCA_WQE_INLINE;
		h->inline_len = len;
		return 0;
	}
	if (wr->num_sge < 0 || seg + wr->num_sge * sizeof(struct qhca_sge) > w + stride)
		return -EINVAL;
	for (i = 0; i < wr->num_sge; i++) {
		struct qhca_sge *s = seg + i * sizeof(*s);

		s->addr = wr->sg_list[i].addr;
		s->length = wr->sg_list[i].length;
		s->lkey = wr->sg_list[i].lkey;
	}
	h->num_sge = wr->num_sge;
	return 0;
}

int qhca_post_send(struct ib_qp *ibqp, const struct ib_send_wr *wr,
		   const struct ib_send_wr **bad_wr)
{
	struct qhca_dev *dev = to_qdev(ibqp->device);
	struct qhca_qp *qp = to_qqp(ibqp);
	unsigned long flags;
	int err = 0;

	/* Kernel rings only: not an XRC_TGT QP, nor a user QP through uverbs' POST_SEND. */
	if (!qp->sq.buf) {
		*bad_wr = wr;
		return -EINVAL;
	}
	spin_lock_irqsave(&qp->sq_lock, flags);
	for (; wr; wr = wr->next) {
		err = qhca_ring_full(&qp->sq) ? -ENOMEM :
		      qhca_build_send(qp, wr, qhca_wqe(&qp->sq, qp->sq.pi));
		if (err) {
			*bad_wr = wr;
			break;
		}
		qp->sq.pi++;
	}
	dma_wmb();	/* WQEs before the doorbell */
	qhca_ring_doorbell(dev, QHCA_DB_SQ, qp->qpn, qp->sq.pi);
	spin_unlock_irqrestore(&qp->sq_lock, flags);
	return err;
}

static int qhca_build_recv(struct qhca_ring *r, const struct ib_recv_wr *wr)
{
	struct qhca_rq_wqe *h = qhca_wqe(r, r->pi);
	struct qhca_sge *s = (void *)(h + 1);
	int i;

	if (qhca_ring_full(r))
		return -ENOMEM;
	if (wr->num_sge < 0 || sizeof(*h) + wr->num_sge * sizeof(*s) > (1u << r->stride_log2))
		return -EINVAL;
	h->wr_id = wr->wr_id;
	h->num_sge = wr->num_sge;
	for (i = 0; i < wr->num_sge; i++) {
		s[i].addr = wr->sg_list[i].addr;
		s[i].length = wr->sg_list[i].length;
		s[i].lkey = wr->sg_list[i].lkey;
	}
	r->pi++;
	return 0;
}

int qhca_post_recv(struct ib_qp *ibqp, const struct ib_recv_wr *wr,
		   const struct ib_recv_wr **bad_wr)
{
	struct qhca_dev *dev = to_qdev(ibqp->device);
	struct qhca_qp *qp = to_qqp(ibqp);
	unsigned long flags;
	int err = 0;

	/* No RQ of its own (an SRQ, XRC) or not in kernel memory (a user QP). */
	if (ibqp->srq || !qp->rq.buf) {
		*bad_wr = wr;
		return -EINVAL;
	}
	spin_lock_irqsave(&qp->rq_lock, flags);
	for (; wr; wr = wr->next) {
		err = qhca_build_recv(&qp->rq, wr);
		if (err) {
			*bad_wr = wr;
			break;
		}
	}
	dma_wmb();
	qhca_ring_doorbell(dev, QHCA_DB_RQ, qp->qpn, qp->rq.pi);
	spin_unlock_irqrestore(&qp->rq_lock, flags);
	return err;
}

/* ---------------------------------------------------------------- SRQ */
int qhca_create_srq(struct ib_srq *ibsrq, struct ib_srq_init_attr *init, struct ib_udata *udata)
{
	struct qhca_dev *dev = to_qdev(ibsrq->device);
	struct qhca_srq *srq = to_qsrq(ibsrq);
	struct qhca_ucontext *uctx = rdma_udata_to_drv_context(udata, struct qhca_ucontext,
							       ibucontext);
	struct qhca_srq_create c = {};
	struct qhca_create_srq_cmd ucmd = {};
	struct qhca_pbl_buf pb = {};
	bool keep = false;
	int err, derr;

	switch (init->srq_type) {
	case IB_SRQT_BASIC:
		break;
	case IB_SRQT_XRC:
		/* User SRQs only: no kernel ULP uses XRC. */
		if (!uctx || !(dev->attr.dev_caps & QHCA_DEV_CAP_XRC))
			return -EOPNOTSUPP;
		if (!init->ext.cq || !init->ext.xrc.xrcd)
			return -EINVAL;
		break;
	default:
		return -EOPNOTSUPP;
	}
	if (init->attr.max_wr > dev->attr.max_srq_wr || init->attr.max_sge > dev->attr.max_srq_sge)
		return -EINVAL;
	spin_lock_init(&srq->lock);
	mutex_init(&srq->resize_lock);
	srq->rq.log2 = order_base_2(max(init->attr.max_wr, 1u));
	srq->rq.stride_log2 = qhca_rq_stride_log2(init->attr.max_sge);
	if (uctx) {
		err = qhca_ucmd_get(udata, &ucmd, sizeof(ucmd), &ucmd.comp_mask,
				    QHCA_CREATE_SRQ_CMD_COMP_MASK);
		if (err)
			return err;
		/* From user space: may round up, never down; checked below before any shift. */
		if (ucmd.log2 < srq->rq.log2 || ucmd.stride_log2 < srq->rq.stride_log2 ||
		    ucmd.rsvd)
			return -EINVAL;
		srq->rq.log2 = ucmd.log2;
		srq->rq.stride_log2 = ucmd.stride_log2;
	}
	if (!qhca_ring_geometry_ok(&srq->rq, dev->attr.max_srq_wr))
		return -EINVAL;
	err = qhca_ring_get(dev, &srq->rq, ucmd.buf_addr, uctx, &pb);
	if (err)
		goto err_ring;
	c.pd = to_qpd(ibsrq->pd)->handle;
	c.uctx = uctx ? uctx->handle : QHCA_HANDLE_KERNEL;
	c.log2 = srq->rq.log2;
	c.stride_log2 = srq->rq.stride_log2;
	c.limit = init->attr.srq_limit;
	c.pbl = pb.desc;
	if (init->srq_type == IB_SRQT_XRC) {	/* its CQ: of the same user context */
		c.xrcd = to_qxrcd(init->ext.xrc.xrcd)->handle;
		c.cq = to_qcq(init->ext.cq)->cqn;
	}
	err = qhca_obj_cmd(dev, QHCA_CMD_CREATE_SRQ, 0, &c, sizeof(c), NULL, 0, &srq->srqn);
	keep = qhca_admin_cmd_keep(dev, err);
	qhca_pbl_free(dev, &pb, keep);
	if (err)
		goto err_ring;
	err = xa_err(xa_store(&dev->srqs, srq->srqn, srq, GFP_KERNEL));
	if (err)
		goto err_destroy;
	init->attr.max_wr = 1u << srq->rq.log2;
	/* What senders name it by; uverbs hands it to user space (ibv_get_srq_num). */
	if (init->srq_type == IB_SRQT_XRC)
		ibsrq->ext.xrc.srq_num = srq->srqn & QHCA_XRC_SRQN_MASK;
	if (uctx) {
		struct qhca_create_srq_resp uresp = { .srqn = srq->srqn };

		err = ib_copy_to_udata(udata, &uresp, min(udata->outlen, sizeof(uresp)));
		if (err)
			goto err_xa;
	}
	return 0;
err_xa:
	xa_erase(&dev->srqs, srq->srqn);
	synchronize_irq(pci_irq_vector(dev->pdev, QHCA_VEC_ADMIN));
err_destroy:
	derr = qhca_obj_cmd(dev, QHCA_CMD_DESTROY_SRQ, srq->srqn, NULL, 0, NULL, 0, NULL);
	keep = qhca_admin_obj_keep(dev, derr);
err_ring:
	qhca_pbl_free(dev, &pb, keep);
	qhca_ring_put(dev, &srq->rq, keep);
	return err;
}

/*
 * IB_SRQ_MAX_WR of a user SRQ: the provider's new ring, pinned; the device moves the WQEs
 * posted and not yet taken into it (EINVAL if they do not fit). The provider does not post
 * meanwhile. Kernel SRQs keep their size: posting cannot wait for an admin command.
 */
static int qhca_srq_resize(struct qhca_dev *dev, struct qhca_srq *srq, u32 max_wr,
			   struct ib_udata *udata)
{
	struct qhca_ucontext *uctx = rdma_udata_to_drv_context(udata, struct qhca_ucontext,
							       ibucontext);
	struct qhca_ring r = { .stride_log2 = srq->rq.stride_log2 }, old;
	struct qhca_modify_srq_cmd ucmd = {};
	struct qhca_srq_resize c = {};
	struct qhca_pbl_buf pb = {};
	bool keep = false;
	int err;

	if (!uctx)
		return -EOPNOTSUPP;
	if (!max_wr || max_wr > dev->attr.max_srq_wr)
		return -EINVAL;
	err = qhca_ucmd_get(udata, &ucmd, sizeof(ucmd), &ucmd.comp_mask,
			    QHCA_MODIFY_SRQ_CMD_COMP_MASK);
	if (err)
		return err;
	/* May round up, never down; checked before any shift. */
	if (ucmd.log2 < order_base_2(max_wr))
		return -EINVAL;
	r.log2 = ucmd.log2;
	if (!qhca_ring_geometry_ok(&r, dev->attr.max_srq_wr))
		return -EINVAL;
	err = qhca_ring_get(dev, &r, ucmd.buf_addr, true, &pb);
	mutex_lock(&srq->resize_lock);
	if (!err) {
		c.log2 = r.log2;
		c.stride_log2 = r.stride_log2;
		c.pbl = pb.desc;
		err = qhca_obj_cmd(dev, QHCA_CMD_RESIZE_SRQ, srq->srqn, &c, sizeof(c), NULL, 0,
				   NULL);
		keep = qhca_admin_cmd_keep(dev, err);
	}
	qhca_pbl_free(dev, &pb, keep);
	if (err) {
		mutex_unlock(&srq->resize_lock);
		qhca_ring_put(dev, &r, keep);
		return err;
	}
	old = srq->rq;
	srq->rq.umem = r.umem;
	srq->rq.log2 = r.log2;
	mutex_unlock(&srq->resize_lock);
	qhca_ring_put(dev, &old, false);
	return 0;
}

int qhca_modify_srq(struct ib_srq *ibsrq, struct ib_srq_attr *attr,
		    enum ib_srq_attr_mask mask, struct ib_udata *udata)
{
	struct qhca_srq_modify m = {};
	int err;

	if (mask & IB_SRQ_MAX_WR) {
		err = qhca_srq_resize(to_qdev(ibsrq->device), to_qsrq(ibsrq), attr->max_wr, udata);
		if (err)
			return err;
	}
	if (!(mask & IB_SRQ_LIMIT))
		return 0;
	m.limit = attr->srq_limit;
	return qhca_obj_cmd(to_qdev(ibsrq->device), QHCA_CMD_MODIFY_SRQ, to_qsrq(ibsrq)->srqn, &m,
			    sizeof(m), NULL, 0, NULL);
}

int qhca_query_srq(struct ib_srq *ibsrq, struct ib_srq_attr *attr)
{
	struct qhca_dev *dev = to_qdev(ibsrq->device);
	struct qhca_srq *srq = to_qsrq(ibsrq);
	struct qhca_srq_attr a = {};
	int err;

	attr->max_wr = 1u << srq->rq.log2;
	attr->max_sge = ((1u << srq->rq.stride_log2) - sizeof(struct qhca_rq_wqe)) /
			sizeof(struct qhca_sge);
	attr->srq_limit = 0;
	if (!(dev->attr.dev_caps & QHCA_DEV_CAP_QUERY_SRQ))
		return 0;	/* a device without QUERY_SRQ: the limit reads 0 */
	/* The armed limit as the device has it: 0 once the limit event fired. */
	err = qhca_obj_cmd(dev, QHCA_CMD_QUERY_SRQ, srq->srqn, NULL, 0, &a, sizeof(a), NULL);
	if (err)
		return err;
	attr->srq_limit = a.limit;
	return 0;
}

int qhca_destroy_srq(struct ib_srq *ibsrq, struct ib_udata *udata)
{
	struct qhca_dev *dev = to_qdev(ibsrq->device);
	struct qhca_srq *srq = to_qsrq(ibsrq);
	int err;

	err = qhca_obj_cmd(dev, QHCA_CMD_DESTROY_SRQ, srq->srqn, NULL, 0, NULL, 0, NULL);
	if (err && !qhca_admin_dead(dev))
		return err;
	/* With a dead queue the SRQ is gone for the OS; its ring stays until reset. */
	xa_erase(&dev->srqs, srq->srqn);
	synchronize_irq(pci_irq_vector(dev->pdev, QHCA_VEC_ADMIN));
	qhca_ring_put(dev, &srq->rq, qhca_admin_obj_keep(dev, err));
	return 0;
}

int qhca_post_srq_recv(struct ib_srq *ibsrq, const struct ib_recv_wr *wr,
		       const struct ib_recv_wr **bad_wr)
{
	struct qhca_dev *dev = to_qdev(ibsrq->device);
	struct qhca_srq *srq = to_qsrq(ibsrq);
	unsigned long flags;
	int err = 0;

	if (!srq->rq.buf) {	/* a user SRQ: the provider posts */
		*bad_wr = wr;
		return -EINVAL;
	}
	spin_lock_irqsave(&srq->lock, flags);
	for (; wr; wr = wr->next) {
		err = qhca_build_recv(&srq->rq, wr);
		if (err) {
			*bad_wr = wr;
			break;
		}
	}
	dma_wmb();
	qhca_ring_doorbell(dev, QHCA_DB_SRQ, srq->srqn, srq->rq.pi);
	spin_unlock_irqrestore(&srq->lock, flags);
	return err;
}

/* ---------------------------------------------------------------- address handles */
int qhca_create_ah(struct ib_ah *ibah, struct rdma_ah_init_attr *init, struct ib_udata *udata)
{
	struct qhca_ah *ah = to_qah(ibah);
	int err;

	err = qhca_av_from_ah_attr(&ah->av, init->ah_attr);
	if (err)
		return err;
	ah->type = init->ah_attr->type;
	ah->ah_flags = rdma_ah_get_ah_flags(init->ah_attr);
	ah->sgid_index = rdma_ah_read_grh(init->ah_attr)->sgid_index;
	ah->port_num = rdma_ah_get_port_num(init->ah_attr);
	if (udata && udata->outlen) {
		struct qhca_create_ah_resp uresp = {};

		memcpy(uresp.dmac, ah->av.dmac, ETH_ALEN);
		err = ib_copy_to_udata(udata, &uresp, min(udata->outlen, sizeof(uresp)));
	}
	return err;
}

int qhca_destroy_ah(struct ib_ah *ibah, u32 flags)
{
	return 0;
}
