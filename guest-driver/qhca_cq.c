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

#define QHCA_CQ_MAX_LOG2	22

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
		writeq((u64)eq->ci << 32 | eq->handle, dev->db0 + QHCA_DB_EQ);
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
int qhca_create_cq(struct ib_cq *ibcq, const struct ib_cq_init_attr *attr,
		   struct uverbs_attr_bundle *attrs)
{
	struct ib_udata *udata = &attrs->driver_udata;
	struct qhca_dev *dev = to_qdev(ibcq->device);
	struct qhca_cq *cq = to_qcq(ibcq);
	struct qhca_ucontext *uctx = rdma_udata_to_drv_context(udata, struct qhca_ucontext,
							       ibucontext);
	struct qhca_cq_create c = {};
	struct qhca_pbl_buf pb;
	u32 log2;
	int err;

	if (attr->flags || attr->cqe < 1 || attr->cqe > dev->attr.max_cqe)
		return -EINVAL;
	spin_lock_init(&cq->lock);
	log2 = order_base_2(attr->cqe + 1);
	if (uctx) {
		struct qhca_create_cq_cmd ucmd;

		if (ib_copy_from_udata(&ucmd, udata, min(udata->inlen, sizeof(ucmd))) ||
		    udata->inlen < sizeof(ucmd))
			return -EFAULT;
		if (ucmd.log2_entries < log2 || ucmd.log2_entries > QHCA_CQ_MAX_LOG2 || ucmd.rsvd)
			return -EINVAL;
		log2 = ucmd.log2_entries;
		cq->size = (sizeof(struct qhca_cqe) << log2) + sizeof(struct qhca_cq_dbrec);
		cq->umem = ib_umem_get(ibcq->device, ucmd.buf_addr, cq->size,
				       IB_ACCESS_LOCAL_WRITE);
		if (IS_ERR(cq->umem))
			return PTR_ERR(cq->umem);
		err = qhca_pbl_from_umem(dev, cq->umem, &pb);
	} else {
		cq->size = (sizeof(struct qhca_cqe) << log2) + sizeof(struct qhca_cq_dbrec);
		cq->buf = dma_alloc_coherent(&dev->pdev->dev, cq->size, &cq->dma, GFP_KERNEL);
		if (!cq->buf)
			return -ENOMEM;
		cq->dbrec = cq->buf + (sizeof(struct qhca_cqe) << log2);
		err = qhca_pbl_from_contig(dev, cq->dma, cq->size, &pb);
	}
	if (err)
		goto err_buf;
	cq->log2 = log2;
	c.pbl = pb.desc;
	c.log2_entries = log2;
	c.eq = dev->comp_eq[attr->comp_vector % dev->ncomp].handle;
	c.uctx = uctx ? uctx->handle : QHCA_HANDLE_KERNEL;
	err = qhca_obj_cmd(dev, QHCA_CMD_CREATE_CQ, 0, &c, sizeof(c), NULL, 0, &cq->cqn);
	qhca_pbl_free(dev, &pb);
	if (err)
		goto err_buf;
	err = xa_err(xa_store(&dev->cqs, cq->cqn, cq, GFP_KERNEL));
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
	xa_erase(&dev->cqs, cq->cqn);
err_destroy:
	qhca_obj_cmd(dev, QHCA_CMD_DESTROY_CQ, cq->cqn, NULL, 0, NULL, 0, NULL);
err_buf:
	if (cq->umem)
		ib_umem_release(cq->umem);
	if (cq->buf)
		dma_free_coherent(&dev->pdev->dev, cq->size, cq->buf, cq->dma);
	return err;
}

int qhca_destroy_cq(struct ib_cq *ibcq, struct ib_udata *udata)
{
	struct qhca_dev *dev = to_qdev(ibcq->device);
	struct qhca_cq *cq = to_qcq(ibcq);
	int err;

	err = qhca_obj_cmd(dev, QHCA_CMD_DESTROY_CQ, cq->cqn, NULL, 0, NULL, 0, NULL);
	if (err)
		return err;
	xa_erase(&dev->cqs, cq->cqn);
	qhca_comp_sync(dev);
	if (cq->umem)
		ib_umem_release(cq->umem);
	if (cq->buf)
		dma_free_coherent(&dev->pdev->dev, cq->size, cq->buf, cq->dma);
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
	u32 ci, n;

	if (cqe->opcode < QHCA_WC_RECV)
		r = &qp->sq;
	else
		r = qp->ibqp.srq ? &to_qsrq(qp->ibqp.srq)->rq : &qp->rq;
	ci = atomic_read(&r->ci);
	n = r == &qp->sq ? ((cqe->src_qp_flags & QHCA_CQE_WQE_INDEX_MASK) + 1 - ci) &
			   QHCA_CQE_WQE_INDEX_MASK : 1;
	if (n <= READ_ONCE(r->pi) - ci)
		atomic_add(n, &r->ci);
}

int qhca_poll_cq(struct ib_cq *ibcq, int num_entries, struct ib_wc *wc)
{
	struct qhca_dev *dev = to_qdev(ibcq->device);
	struct qhca_cq *cq = to_qcq(ibcq);
	unsigned long flags;
	int n = 0;

	spin_lock_irqsave(&cq->lock, flags);
	while (n < num_entries) {
		struct qhca_cqe *cqe = cq->buf + ((cq->ci & ((1u << cq->log2) - 1)) << 5);
		u8 phase = ((cq->ci >> cq->log2) & 1) ? 0 : QHCA_CQE_OWNER_PHASE;
		u8 cflags;
		struct qhca_qp *qp;

		if ((READ_ONCE(cqe->owner) & QHCA_CQE_OWNER_PHASE) != phase)
			break;
		dma_rmb();
		memset(&wc[n], 0, sizeof(wc[n]));
		qp = xa_load(&dev->qps, cqe->qpn_status & QHCA_CQE_QPN_MASK);
		wc[n].wr_id = cqe->wr_id;
		wc[n].status = cqe->qpn_status >> QHCA_CQE_STATUS_SHIFT;
		wc[n].opcode = qhca_wc_opcode(cqe->opcode);
		wc[n].byte_len = cqe->byte_len;
		wc[n].qp = qp ? &qp->ibqp : NULL;
		if (cqe->opcode >= QHCA_WC_RECV)
			wc[n].src_qp = cqe->src_qp_flags & QHCA_CQE_SRC_QP_MASK;
		if (qp)
			qhca_cqe_retire(qp, cqe);
		wc[n].port_num = 1;
		cflags = cqe->src_qp_flags >> QHCA_CQE_FLAGS_SHIFT;
		if (cflags & QHCA_CQE_FLAG_IMM) {
			wc[n].ex.imm_data = cpu_to_be32(cqe->imm);
			wc[n].wc_flags |= IB_WC_WITH_IMM;
		} else if (cflags & QHCA_CQE_FLAG_INV) {
			wc[n].ex.invalidate_rkey = cqe->imm;
			wc[n].wc_flags |= IB_WC_WITH_INVALIDATE;
		}
		if (cflags & QHCA_CQE_FLAG_GRH) {
			wc[n].wc_flags |= IB_WC_GRH | IB_WC_WITH_SMAC | IB_WC_WITH_NETWORK_HDR_TYPE;
			memcpy(wc[n].smac, cqe->smac, ETH_ALEN);
			wc[n].network_hdr_type = (cflags & QHCA_CQE_FLAG_IPV4) ?
						 RDMA_NETWORK_IPV4 : RDMA_NETWORK_IPV6;
		}
		cq->ci++;
		n++;
	}
	if (n)
		WRITE_ONCE(cq->dbrec->ci, cq->ci);
	spin_unlock_irqrestore(&cq->lock, flags);
	return n;
}

int qhca_req_notify_cq(struct ib_cq *ibcq, enum ib_cq_notify_flags flags)
{
	struct qhca_dev *dev = to_qdev(ibcq->device);
	struct qhca_cq *cq = to_qcq(ibcq);
	u32 off = (flags & IB_CQ_SOLICITED_MASK) == IB_CQ_SOLICITED ? QHCA_DB_CQ_ARM_SE :
		  QHCA_DB_CQ_ARM;

	writeq((u64)READ_ONCE(cq->ci) << 32 | cq->cqn, dev->db0 + off);
	return 0;
}
