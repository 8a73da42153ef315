// SPDX-License-Identifier: GPL-2.0
/*
 * qhca completion queues: user CQs in the provider's memory, kernel CQs in DMA memory,
 * completion event queues (one per completion vector), and the kernel's poll and notify.
 */
#include <linux/dma-mapping.h>
#include <linux/interrupt.h>
#include <linux/slab.h>
#include <rdma/ib_umem.h>
#include <rdma/uverbs_ioctl.h>

#include "qhca.h"


/* ---------------------------------------------------------------- completion EQs */
static irqreturn_t qhca_comp_irq(int irq, void *data)
{
	struct qhca_eq *eq = data;
	struct qhca_dev *dev = eq->dev;
	u32 start = eq->ci;

	for (;;) {
		struct qhca_eqe *eqe = &eq->ring[eq->ci & ((1u << eq->log2) - 1)];
		u8 phase = ((eq->ci >> eq->log2) & 1) ? 0 : QHCA_EQE_PHASE;

		if ((READ_ONCE(eqe->flags) & QHCA_EQE_PHASE) != phase)
			break;
		dma_rmb();
		if (eqe->type == QHCA_EVENT_COMP) {
			struct qhca_cq *cq = xa_load(&dev->cqs, eqe->handle);

			if (cq && cq->ibcq.comp_handler)
				cq->ibcq.comp_handler(&cq->ibcq, cq->ibcq.cq_context);
		}
		eq->ci++;
	}
	if (eq->ci != start)
		qhca_ring_doorbell(dev, QHCA_DB_EQ, eq->handle, eq->ci);
	return IRQ_HANDLED;
}

int qhca_comp_eqs_init(struct qhca_dev *dev)
{
	int i, err;

	dev->ncomp = dev->nvecs - QHCA_VEC_COMP0;
	dev->comp_eq = kcalloc(dev->ncomp, sizeof(*dev->comp_eq), GFP_KERNEL);
	if (!dev->comp_eq)
		return -ENOMEM;
	for (i = 0; i < dev->ncomp; i++) {
		struct qhca_eq *eq = &dev->comp_eq[i];

		eq->dev = dev;
		err = qhca_eq_create(dev, eq, QHCA_COMP_EQ_LOG2, QHCA_VEC_COMP0 + i, 0);
		if (err)
			goto err;
		err = request_irq(pci_irq_vector(dev->pdev, QHCA_VEC_COMP0 + i), qhca_comp_irq, 0,
				  "qhca-comp", eq);
		if (err) {
			qhca_eq_destroy(dev, eq);
			goto err;
		}
	}
	return 0;
err:
	while (--i >= 0) {
		free_irq(pci_irq_vector(dev->pdev, QHCA_VEC_COMP0 + i), &dev->comp_eq[i]);
		qhca_eq_destroy(dev, &dev->comp_eq[i]);
	}
	kfree(dev->comp_eq);
	dev->comp_eq = NULL;
	return err;
}

void qhca_comp_eqs_fini(struct qhca_dev *dev)
{
	int i;

	for (i = 0; dev->comp_eq && i < dev->ncomp; i++) {
		free_irq(pci_irq_vector(dev->pdev, QHCA_VEC_COMP0 + i), &dev->comp_eq[i]);
		qhca_eq_destroy(dev, &dev->comp_eq[i]);
	}
	kfree(dev->comp_eq);
	dev->comp_eq = NULL;
}

/* Wait until no completion handler can still be looking at an object being destroyed. */
static void qhca_comp_sync(struct qhca_dev *dev)
{
	int i;

	for (i = 0; i < dev->ncomp; i++)
		synchronize_irq(pci_irq_vector(dev->pdev, QHCA_VEC_COMP0 + i));
}

/* ---------------------------------------------------------------- create and destroy */
/* Free the CQ's ring, or with @keep hand it to the admin queue (qhca_admin.c). */
static void qhca_cq_put_mem(struct qhca_dev *dev, struct qhca_cq *cq, bool keep)
{
	qhca_admin_put_umem(dev, keep, cq->umem);
	qhca_admin_put_coherent(dev, keep, cq->size, cq->buf, cq->dma);
	cq->umem = NULL;
	cq->buf = NULL;
}

int qhca_create_cq(struct ib_cq *ibcq, const struct ib_cq_init_attr *attr,
		   qhca_create_cq_attrs *attrs)
{
	struct ib_udata *udata = qhca_create_cq_udata(attrs);
	struct qhca_dev *dev = to_qdev(ibcq->device);
	struct qhca_cq *cq = to_qcq(ibcq);
	struct qhca_ucontext *uctx = rdma_udata_to_drv_context(udata, struct qhca_ucontext,
							       ibucontext);
	struct qhca_create_cq_cmd ucmd = {};
	struct qhca_cq_create c = {};
	struct qhca_pbl_buf pb;
	bool keep;
	u32 log2;
	int err, derr;

	if (attr->flags || attr->cqe < 1 || attr->cqe > dev->attr.max_cqe)
		return -EINVAL;
	spin_lock_init(&cq->lock);
	mutex_init(&cq->resize_lock);
	xa_init_flags(&cq->qps, XA_FLAGS_LOCK_IRQ);
	log2 = order_base_2((u64)attr->cqe + 1);	/* one slot stays free */
	if (uctx) {
		err = qhca_ucmd_get(udata, &ucmd, sizeof(ucmd), &ucmd.comp_mask,
				    QHCA_CREATE_CQ_CMD_COMP_MASK);
		if (err)
			return err;
		/* The provider may round up, never down; checked before any shift. */
		if (ucmd.log2_entries < log2 || ucmd.log2_entries > QHCA_CQ_MAX_LOG2)
			return -EINVAL;
		log2 = ucmd.log2_entries;
	}
	if (log2 > QHCA_CQ_MAX_LOG2)
		return -EINVAL;
	cq->size = (sizeof(struct qhca_cqe) << log2) + sizeof(struct qhca_cq_dbrec);
	if (uctx) {
		err = qhca_umem_pbl_get(dev, ucmd.buf_addr, cq->size, IB_ACCESS_LOCAL_WRITE,
					&cq->umem, &pb);
		if (err)
			return err;
	} else {
		cq->buf = dma_alloc_coherent(&dev->pdev->dev, cq->size, &cq->dma, GFP_KERNEL);
		if (!cq->buf)
			return -ENOMEM;
		cq->dbrec = cq->buf + (sizeof(struct qhca_cqe) << log2);
		err = qhca_pbl_from_contig(dev, cq->dma, cq->size, &pb);
	}
	if (err) {
		keep = false;
		goto err_buf;
	}
	cq->log2 = log2;
	c.pbl = pb.desc;
	c.log2_entries = log2;
	c.eq = dev->comp_eq[attr->comp_vector % dev->ncomp].handle;
	c.uctx = uctx ? uctx->handle : QHCA_HANDLE_KERNEL;
	err = qhca_obj_cmd(dev, QHCA_CMD_CREATE_CQ, 0, &c, sizeof(c), NULL, 0, &cq->cqn);
	keep = qhca_admin_cmd_keep(dev, err);
	qhca_pbl_free(dev, &pb, keep);
	if (err)
		goto err_buf;
	err = xa_err(xa_store_irq(&dev->cqs, cq->cqn, cq, GFP_KERNEL));
	if (err)
		goto err_destroy;
	ibcq->cqe = (1 << log2) - 1;
	if (uctx) {
		struct qhca_create_cq_resp uresp = { .cqn = cq->cqn, .log2_entries = log2 };

		err = ib_copy_to_udata(udata, &uresp, min(udata->outlen, sizeof(uresp)));
		if (err)
			goto err_xa;
	}
	return 0;

err_xa:
	xa_erase_irq(&dev->cqs, cq->cqn);	/* async events: see qhca_cq_event() */
	qhca_comp_sync(dev);
err_destroy:
	derr = qhca_obj_cmd(dev, QHCA_CMD_DESTROY_CQ, cq->cqn, NULL, 0, NULL, 0, NULL);
	keep = qhca_admin_obj_keep(dev, derr);
err_buf:
	qhca_cq_put_mem(dev, cq, keep);
	return err;
}

/*
 * ibv_resize_cq: the provider's new ring, pinned; the device moves the completions not
 * yet polled into it (EINVAL if they do not fit). Kernel CQs are sized at creation.
 */
int qhca_resize_cq(struct ib_cq *ibcq, qhca_resize_cqe cqe, struct ib_udata *udata)
{
	struct qhca_dev *dev = to_qdev(ibcq->device);
	struct qhca_cq *cq = to_qcq(ibcq);
	struct qhca_resize_cq_cmd ucmd = {};
	struct qhca_cq_resize r = {};
	struct qhca_pbl_buf pb;
	struct ib_umem *umem;
	size_t size;
	bool keep;
	u32 log2;
	int err;

	if (!cq->umem)
		return -EOPNOTSUPP;
	if (cqe < 1 || (s64)cqe > dev->attr.max_cqe)
		return -EINVAL;
	err = qhca_ucmd_get(udata, &ucmd, sizeof(ucmd), &ucmd.comp_mask,
			    QHCA_RESIZE_CQ_CMD_COMP_MASK);
	if (err)
		return err;
	/* The provider may round up, never down; checked before any shift. */
	log2 = order_base_2((u64)cqe + 1);
	if (ucmd.log2_entries < log2 || ucmd.log2_entries > QHCA_CQ_MAX_LOG2)
		return -EINVAL;
	log2 = ucmd.log2_entries;
	size = (sizeof(struct qhca_cqe) << log2) + sizeof(struct qhca_cq_dbrec);
	err = qhca_umem_pbl_get(dev, ucmd.buf_addr, size, IB_ACCESS_LOCAL_WRITE, &umem, &pb);
	if (err)
		return err;
	r.pbl = pb.desc;
	r.log2_entries = log2;
	mutex_lock(&cq->resize_lock);
	err = qhca_obj_cmd(dev, QHCA_CMD_RESIZE_CQ, cq->cqn, &r, sizeof(r), NULL, 0, NULL);
	keep = qhca_admin_cmd_keep(dev, err);
	qhca_pbl_free(dev, &pb, keep);
	if (err) {
		mutex_unlock(&cq->resize_lock);
		qhca_admin_put_umem(dev, keep, umem);
		return err;
	}
	ib_umem_release(cq->umem);
	cq->umem = umem;
	cq->log2 = log2;
	cq->size = size;
	ibcq->cqe = (1 << log2) - 1;
	mutex_unlock(&cq->resize_lock);
	return 0;
}

int qhca_destroy_cq(struct ib_cq *ibcq, struct ib_udata *udata)
{
	struct qhca_dev *dev = to_qdev(ibcq->device);
	struct qhca_cq *cq = to_qcq(ibcq);
	int err;

	WRITE_ONCE(cq->destroying, true);
	err = qhca_obj_cmd(dev, QHCA_CMD_DESTROY_CQ, cq->cqn, NULL, 0, NULL, 0, NULL);
	if (err && !qhca_admin_dead(dev)) {
		WRITE_ONCE(cq->destroying, false);
		return err;
	}
	/* With a dead queue the CQ is gone for the OS; its ring stays until reset. */
	xa_erase_irq(&dev->cqs, cq->cqn);	/* waits for a CQ_ERR handler on it */
	qhca_comp_sync(dev);
	/* ib_core frees the CQ when we return: no event handler may still be running on it. */
	if (READ_ONCE(dev->cq_event_cq) == cq)
		atomic_inc(&dev->cq_events_late);
	WARN_ON_ONCE(!xa_empty(&cq->qps));	/* ib_core destroys the QPs first */
	xa_destroy(&cq->qps);
	qhca_cq_put_mem(dev, cq, qhca_admin_obj_keep(dev, err));
	return 0;
}

/* ---------------------------------------------------------------- kernel poll and notify */
static enum ib_wc_opcode qhca_wc_opcode(u8 op)
{
	switch (op) {
	case QHCA_WC_RDMA_WRITE:
		return IB_WC_RDMA_WRITE;
	case QHCA_WC_RDMA_READ:
		return IB_WC_RDMA_READ;
	case QHCA_WC_COMP_SWAP:
		return IB_WC_COMP_SWAP;
	case QHCA_WC_FETCH_ADD:
		return IB_WC_FETCH_ADD;
	case QHCA_WC_LOCAL_INV:
		return IB_WC_LOCAL_INV;
	case QHCA_WC_BIND_MW:
		return IB_WC_BIND_MW;
	case QHCA_WC_ATOMIC_WRITE:
		return QHCA_IB_WC_ATOMIC_WRITE;
	case QHCA_WC_REG_MR:
		return IB_WC_REG_MR;
	case QHCA_WC_RECV:
		return IB_WC_RECV;
	case QHCA_WC_RECV_RDMA_WITH_IMM:
		return IB_WC_RECV_RDMA_WITH_IMM;
	default:
		return IB_WC_SEND;
	}
}

/*
 * A polled CQE frees ring slots (abi/qhca_abi.h): a send completion every SQ slot up to its
 * WQE, a receive completion one slot of the RQ or SRQ. One that would free more than is
 * outstanding (left from before a reset) frees nothing.
 */
static void qhca_cqe_retire(struct qhca_qp *qp, const struct qhca_cqe *cqe)
{
	struct qhca_ring *r;
	u32 ci, n, idx;

	if (cqe->opcode < QHCA_WC_RECV) {
		r = &qp->sq;
		ci = atomic_read(&r->ci);
		/* The WQE's index mod 2^24, the width of its field: so is the count. */
		idx = FIELD_GET(QHCA_CQE_WQE_INDEX_MASK, cqe->src_qp_flags);
		n = FIELD_GET(QHCA_CQE_WQE_INDEX_MASK, idx + 1 - ci);
	} else {
		r = qp->ibqp.srq ? &to_qsrq(qp->ibqp.srq)->rq : &qp->rq;
		ci = atomic_read(&r->ci);
		n = 1;
	}
	if (n <= READ_ONCE(r->pi) - ci)
		atomic_add(n, &r->ci);
}

static struct qhca_cqe *qhca_cqe_at(struct qhca_cq *cq, u32 ci)
{
	return cq->buf + ((size_t)(ci & ((1u << cq->log2) - 1)) << 5);
}

/* Has the device written the CQE of free-running index @ci (its phase is current)? */
static bool qhca_cqe_valid(const struct qhca_cq *cq, const struct qhca_cqe *cqe, u32 ci)
{
	u8 phase = ((ci >> cq->log2) & 1) ? 0 : QHCA_CQE_OWNER_PHASE;

	return (READ_ONCE(cqe->owner) & QHCA_CQE_OWNER_PHASE) == phase;
}

/*
 * QP lifetime against poll: a kernel CQ finds the QPs of its CQEs in its own table, under
 * its own lock, and only the QPs that complete on it. qhca_destroy_qp() removes the QP from
 * the tables of its send and receive CQ under each CQ's lock, so once it has, no poller is
 * still using the QP and none can find it again: the QP may be freed.
 */
int qhca_cq_attach_qp(struct qhca_cq *cq, struct qhca_qp *qp)
{
	if (!cq->buf)	/* a user CQ: polled by the provider */
		return 0;
	return xa_insert_irq(&cq->qps, qp->qpn, qp, GFP_KERNEL);
}

/*
 * Mark the CQEs of @qp not yet polled stale; the caller holds the CQ's lock. Each still
 * frees its ring slots first: an SRQ outlives the QP and must get its slots back.
 */
static void qhca_cq_clean_locked(struct qhca_cq *cq, struct qhca_qp *qp)
{
	u32 ci;

	for (ci = cq->ci; ci - cq->ci < (1u << cq->log2); ci++) {
		struct qhca_cqe *cqe = qhca_cqe_at(cq, ci);

		if (!qhca_cqe_valid(cq, cqe, ci))
			break;
		dma_rmb();
		if (FIELD_GET(QHCA_CQE_QPN_MASK, cqe->qpn_status) == qp->qpn &&
		    cqe->opcode != QHCA_CQE_OPCODE_STALE) {
			qhca_cqe_retire(qp, cqe);
			cqe->opcode = QHCA_CQE_OPCODE_STALE;
		}
	}
}

/* A QP went to RESET: what it completed before is not reported after (as mlx5 does). */
void qhca_cq_clean(struct qhca_cq *cq, struct qhca_qp *qp)
{
	unsigned long flags;

	if (!cq->buf)
		return;
	spin_lock_irqsave(&cq->lock, flags);
	qhca_cq_clean_locked(cq, qp);
	spin_unlock_irqrestore(&cq->lock, flags);
}

/*
 * Forget a QP being destroyed (the device has no more completions for it). Its CQEs not yet
 * polled are marked stale, so that neither this QP nor a later one with its QPN gets them.
 */
void qhca_cq_detach_qp(struct qhca_cq *cq, struct qhca_qp *qp)
{
	unsigned long flags;

	if (!cq->buf)
		return;
	spin_lock_irqsave(&cq->lock, flags);
	if (xa_load(&cq->qps, qp->qpn) == qp)
		xa_erase(&cq->qps, qp->qpn);
	qhca_cq_clean_locked(cq, qp);
	spin_unlock_irqrestore(&cq->lock, flags);
}

/* Kernel consumers poll from process, softirq or hardirq context: the CQ lock is irqsave. */
int qhca_poll_cq(struct ib_cq *ibcq, int num_entries, struct ib_wc *wc)
{
	struct qhca_cq *cq = to_qcq(ibcq);
	unsigned long flags;
	int n = 0;
	u32 start;

	spin_lock_irqsave(&cq->lock, flags);
	start = cq->ci;
	while (n < num_entries) {
		struct qhca_cqe *cqe = qhca_cqe_at(cq, cq->ci);
		u8 cflags;
		struct qhca_qp *qp;

		if (!qhca_cqe_valid(cq, cqe, cq->ci))
			break;
		dma_rmb();
		cq->ci++;
		/* Stays valid until we drop the CQ's lock (qhca_cq_detach_qp). */
		qp = cqe->opcode == QHCA_CQE_OPCODE_STALE ? NULL :
		     xa_load(&cq->qps, FIELD_GET(QHCA_CQE_QPN_MASK, cqe->qpn_status));
		if (!qp)	/* of a destroyed QP, or not of a QP of this CQ: dropped */
			continue;
		memset(&wc[n], 0, sizeof(wc[n]));
		wc[n].wr_id = cqe->wr_id;
		wc[n].status = FIELD_GET(QHCA_CQE_STATUS_MASK, cqe->qpn_status);
		wc[n].opcode = qhca_wc_opcode(cqe->opcode);
		wc[n].byte_len = cqe->byte_len;
		wc[n].qp = &qp->ibqp;
		if (cqe->opcode >= QHCA_WC_RECV)
			wc[n].src_qp = FIELD_GET(QHCA_CQE_SRC_QP_MASK, cqe->src_qp_flags);
		qhca_cqe_retire(qp, cqe);
		wc[n].port_num = 1;
		cflags = FIELD_GET(QHCA_CQE_FLAGS_MASK, cqe->src_qp_flags);
		if (cflags & QHCA_CQE_FLAG_IMM) {
			wc[n].ex.imm_data = cpu_to_be32(cqe->imm);
			wc[n].wc_flags |= IB_WC_WITH_IMM;
		} else if (cflags & QHCA_CQE_FLAG_INV) {
			wc[n].ex.invalidate_rkey = cqe->imm;
			wc[n].wc_flags |= IB_WC_WITH_INVALIDATE;
		}
		if (cflags & QHCA_CQE_FLAG_IB) {
			/* An InfiniBand port: what the LRH said; a GRH only if there was one. */
			wc[n].slid = cqe->ib.slid;
			wc[n].sl = cqe->ib.sl;
			wc[n].dlid_path_bits = cqe->ib.dlid_path_bits;
			wc[n].pkey_index = 0;
			if (cflags & QHCA_CQE_FLAG_GRH)
				wc[n].wc_flags |= IB_WC_GRH;
			n++;
			continue;
		}
		wc[n].sl = QHCA_WC_SL_OF_FLAGS(cflags);
		if (cflags & QHCA_CQE_FLAG_GRH) {
			wc[n].wc_flags |= IB_WC_GRH | IB_WC_WITH_SMAC | IB_WC_WITH_NETWORK_HDR_TYPE;
			memcpy(wc[n].smac, cqe->smac, ETH_ALEN);
			wc[n].network_hdr_type = (cflags & QHCA_CQE_FLAG_ROCE_V1) ?
						 RDMA_NETWORK_ROCE_V1 :
						 (cflags & QHCA_CQE_FLAG_IPV4) ?
						 RDMA_NETWORK_IPV4 : RDMA_NETWORK_IPV6;
		}
		n++;
	}
	if (cq->ci != start)
		WRITE_ONCE(cq->dbrec->ci, cq->ci);
	spin_unlock_irqrestore(&cq->lock, flags);
	return n;
}

/* Is a completion waiting to be polled (a kernel CQ)? */
static bool qhca_cq_pending(struct qhca_cq *cq)
{
	unsigned long flags;
	bool valid;

	spin_lock_irqsave(&cq->lock, flags);
	valid = qhca_cqe_valid(cq, qhca_cqe_at(cq, cq->ci), cq->ci);
	spin_unlock_irqrestore(&cq->lock, flags);
	return valid;
}

int qhca_req_notify_cq(struct ib_cq *ibcq, enum ib_cq_notify_flags flags)
{
	struct qhca_dev *dev = to_qdev(ibcq->device);
	struct qhca_cq *cq = to_qcq(ibcq);
	u32 off = (flags & IB_CQ_SOLICITED_MASK) == IB_CQ_SOLICITED ? QHCA_DB_CQ_ARM_SE :
		  QHCA_DB_CQ_ARM;

	qhca_ring_doorbell(dev, off, cq->cqn, READ_ONCE(cq->ci));
	/*
	 * The device fires for completions written after the arm only: those written before
	 * it (after the consumer's last poll) are reported here, so that they are polled.
	 */
	return (flags & IB_CQ_REPORT_MISSED_EVENTS) && cq->buf && qhca_cq_pending(cq);
}
