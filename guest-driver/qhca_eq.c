// SPDX-License-Identifier: GPL-2.0
/*
 * qhca event queues. The async EQ on MSI-X vector 0 (shared with the admin queue) carries
 * port state changes and QP, CQ and SRQ errors; completion EQs live in qhca_cq.c.
 */
#include <linux/delay.h>
#include <linux/dma-mapping.h>
#include <linux/interrupt.h>
#include <linux/io.h>

#include "qhca.h"

int qhca_eq_create(struct qhca_dev *dev, struct qhca_eq *eq, u32 log2, u16 vector, u16 flags)
{
	size_t size = sizeof(struct qhca_eqe) << log2;
	struct qhca_cmd cmd = {};
	int err;

	eq->log2 = log2;
	eq->ci = 0;
	eq->dev = dev;
	eq->vector = vector;
	eq->ring = dma_alloc_coherent(&dev->pdev->dev, size, &eq->dma, GFP_KERNEL);
	if (!eq->ring)
		return -ENOMEM;
	cmd.hdr.opcode = QHCA_CMD_CREATE_EQ;
	cmd.hdr.len = sizeof(cmd.create_eq);
	cmd.create_eq.ring_addr = eq->dma;
	cmd.create_eq.log2_entries = log2;
	cmd.create_eq.vector = vector;
	cmd.create_eq.flags = flags;
	err = qhca_admin_exec(dev, &cmd, &eq->handle, NULL);
	if (err) {
		qhca_admin_put_coherent(dev, qhca_admin_cmd_keep(dev, err), size, eq->ring,
					eq->dma);
		eq->ring = NULL;
	}
	return err;
}

void qhca_eq_destroy(struct qhca_dev *dev, struct qhca_eq *eq)
{
	struct qhca_eqe *ring = eq->ring;
	int err;

	if (!ring)
		return;
	err = qhca_admin_handle_cmd(dev, QHCA_CMD_DESTROY_EQ, eq->handle, NULL);
	if (err && !qhca_admin_dead(dev))
		dev_warn(&dev->pdev->dev, "DESTROY_EQ %u failed: %d; ring kept until reset\n",
			 eq->handle, err);
	/* No interrupt handler may be reading the ring when it goes. */
	WRITE_ONCE(eq->ring, NULL);
	synchronize_irq(pci_irq_vector(dev->pdev, eq->vector));
	qhca_admin_put_coherent(dev, qhca_admin_obj_keep(dev, err),
				sizeof(struct qhca_eqe) << eq->log2, ring, eq->dma);
}

int qhca_async_eq_init(struct qhca_dev *dev)
{
	/* An iWARP port's connections (up to QHCA_IW_MAX_CONN) bring their events here too:
	 * room for 4 of each, the most the device allows (64 KiB), so that all of them
	 * closing at once overflows nothing. */
	return qhca_eq_create(dev, &dev->async_eq, qhca_link_iwarp(dev) ? QHCA_EQ_MAX_LOG2 :
			      QHCA_ASYNC_EQ_LOG2, QHCA_VEC_ADMIN, QHCA_EQ_ASYNC);
}

void qhca_async_eq_fini(struct qhca_dev *dev)
{
	qhca_eq_destroy(dev, &dev->async_eq);
}

static void qhca_port_event(struct qhca_dev *dev, enum ib_event_type type)
{
	struct ib_event ev = {
		.device = &dev->ibdev,
		.element.port_num = 1,
		.event = type,
	};

	if (type == IB_EVENT_PORT_ACTIVE || type == IB_EVENT_PORT_ERR)
		qhca_eth_link_change(dev, type == IB_EVENT_PORT_ACTIVE);
	ib_dispatch_event(&ev);
}

static void qhca_qp_event(struct qhca_dev *dev, u32 qpn, enum ib_event_type type)
{
	struct qhca_qp *qp = xa_load(&dev->qps, qpn);
	struct ib_event ev = { .device = &dev->ibdev, .event = type };

	if (!qp || !qp->ibqp.event_handler)
		return;
	ev.element.qp = &qp->ibqp;
	qp->ibqp.event_handler(&ev, qp->ibqp.qp_context);
}

/*
 * A CQ's event handler runs under the lock of dev->cqs, which destroy takes to remove the
 * CQ: once qhca_destroy_cq() has removed it, no handler is running on it and none will.
 * (QPs and SRQs get the same from synchronize_irq() in their destroy.)
 *
 * Test hook (debugfs cq_event_delay_ms, tests/vm/test-hardening.sh): while it is nonzero,
 * a CQ_ERR stays in the EQ until its CQ's destroy has begun, and then its handler runs that
 * many milliseconds after the CQ was found, as if the EQ had been walked late and slowly,
 * in the interrupt that completes DESTROY_CQ. Returns false to leave the event for the next
 * interrupt.
 */
#define QHCA_CQ_EVENT_DELAY_MAX_MS	100

static bool qhca_cq_event(struct qhca_dev *dev, u32 cqn)
{
	struct ib_event ev = { .device = &dev->ibdev, .event = IB_EVENT_CQ_ERR };
	u32 delay = READ_ONCE(dev->cq_event_delay_ms);
	struct qhca_cq *cq;
	bool done = true;

	xa_lock(&dev->cqs);	/* in the interrupt handler: interrupts are off */
	cq = xa_load(&dev->cqs, cqn);
	if (!cq || !cq->ibcq.event_handler)
		goto out;
	if (delay && !READ_ONCE(cq->destroying)) {
		done = false;
		goto out;
	}
	WRITE_ONCE(dev->cq_event_cq, cq);
	if (delay)
		mdelay(min_t(u32, delay, QHCA_CQ_EVENT_DELAY_MAX_MS));
	atomic_inc(&dev->cq_events);
	ev.element.cq = &cq->ibcq;
	cq->ibcq.event_handler(&ev, cq->ibcq.cq_context);
	WRITE_ONCE(dev->cq_event_cq, NULL);
out:
	xa_unlock(&dev->cqs);
	return done;
}

static void qhca_srq_event(struct qhca_dev *dev, u32 srqn)
{
	struct qhca_srq *srq = xa_load(&dev->srqs, srqn);
	struct ib_event ev = { .device = &dev->ibdev, .event = IB_EVENT_SRQ_LIMIT_REACHED };

	if (!srq || !srq->ibsrq.event_handler)
		return;
	ev.element.srq = &srq->ibsrq;
	srq->ibsrq.event_handler(&ev, srq->ibsrq.srq_context);
}

/* Called from the vector 0 interrupt. */
void qhca_async_eq_poll(struct qhca_dev *dev)
{
	struct qhca_eq *eq = &dev->async_eq;
	struct qhca_eqe *ring = READ_ONCE(eq->ring);
	u32 start;

	if (!ring)
		return;
	start = eq->ci;
	for (;;) {
		struct qhca_eqe *eqe = &ring[eq->ci & ((1u << eq->log2) - 1)];
		u8 phase = ((eq->ci >> eq->log2) & 1) ? 0 : QHCA_EQE_PHASE;

		if ((READ_ONCE(eqe->flags) & QHCA_EQE_PHASE) != phase)
			break;
		dma_rmb();	/* the event's fields only after its phase */
		switch (eqe->type) {
		case QHCA_EVENT_PORT_ACTIVE:
			qhca_port_event(dev, IB_EVENT_PORT_ACTIVE);
			break;
		case QHCA_EVENT_PORT_DOWN:
			qhca_port_event(dev, IB_EVENT_PORT_ERR);
			break;
		case QHCA_EVENT_LID_CHANGE:
			qhca_port_event(dev, IB_EVENT_LID_CHANGE);
			break;
		case QHCA_EVENT_PKEY_CHANGE:
			qhca_port_event(dev, IB_EVENT_PKEY_CHANGE);
			break;
		case QHCA_EVENT_SM_CHANGE:
			qhca_port_event(dev, IB_EVENT_SM_CHANGE);
			break;
		case QHCA_EVENT_CLIENT_REREG:
			qhca_port_event(dev, IB_EVENT_CLIENT_REREGISTER);
			break;
		case QHCA_EVENT_GID_CHANGE:
			qhca_port_event(dev, IB_EVENT_GID_CHANGE);
			break;
		case QHCA_EVENT_QP_FATAL:
			qhca_qp_event(dev, eqe->handle, IB_EVENT_QP_FATAL);
			break;
		case QHCA_EVENT_QP_REQ_ERR:
			qhca_qp_event(dev, eqe->handle, IB_EVENT_QP_REQ_ERR);
			break;
		case QHCA_EVENT_QP_ACCESS_ERR:
			qhca_qp_event(dev, eqe->handle, IB_EVENT_QP_ACCESS_ERR);
			break;
		case QHCA_EVENT_SQ_DRAINED:
			qhca_qp_event(dev, eqe->handle, IB_EVENT_SQ_DRAINED);
			break;
		case QHCA_EVENT_CQ_ERR:
			if (!qhca_cq_event(dev, eqe->handle))
				goto out;	/* held: walked again at the next interrupt */
			break;
		case QHCA_EVENT_SRQ_LIMIT:
			qhca_srq_event(dev, eqe->handle);
			break;
		case QHCA_EVENT_IW_CONNECT_REQUEST:
		case QHCA_EVENT_IW_CONNECT_REPLY:
		case QHCA_EVENT_IW_ESTABLISHED:
		case QHCA_EVENT_IW_DISCONNECTED:
		case QHCA_EVENT_IW_CLOSED:
			qhca_iw_event(dev, eqe->type, eqe->handle, eqe->data);
			break;
		case QHCA_EVENT_EQ_OVERFLOW:
			dev_warn_ratelimited(&dev->pdev->dev, "async event queue overflowed\n");
			break;
		default:
			dev_warn_ratelimited(&dev->pdev->dev, "unknown async event %u\n",
					     eqe->type);
			break;
		}
		eq->ci++;
	}
out:
	if (eq->ci != start)
		qhca_ring_doorbell(dev, QHCA_DB_EQ, eq->handle, eq->ci);
}
