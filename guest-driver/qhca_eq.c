// SPDX-License-Identifier: GPL-2.0
/*
 * qhca async event queue: port state changes (and later QP/CQ/SRQ errors) arrive as
 * 16-byte events with a phase bit on MSI-X vector 0, which the admin queue shares.
 */
#include <linux/dma-mapping.h>
#include <linux/io.h>

#include "qhca.h"

int qhca_async_eq_init(struct qhca_dev *dev)
{
	struct qhca_eq *eq = &dev->async_eq;
	size_t size = sizeof(struct qhca_eqe) << QHCA_ASYNC_EQ_LOG2;
	struct qhca_cmd cmd = {};
	int err;

	eq->log2 = QHCA_ASYNC_EQ_LOG2;
	eq->ci = 0;
	eq->ring = dma_alloc_coherent(&dev->pdev->dev, size, &eq->dma, GFP_KERNEL);
	if (!eq->ring)
		return -ENOMEM;
	cmd.hdr.opcode = QHCA_CMD_CREATE_EQ;
	cmd.hdr.len = sizeof(cmd.create_eq);
	cmd.create_eq.ring_addr = eq->dma;
	cmd.create_eq.log2_entries = eq->log2;
	cmd.create_eq.vector = QHCA_VEC_ADMIN;
	cmd.create_eq.flags = QHCA_EQ_ASYNC;
	err = qhca_admin_exec(dev, &cmd, &eq->handle, NULL);
	if (err) {
		dma_free_coherent(&dev->pdev->dev, size, eq->ring, eq->dma);
		eq->ring = NULL;
	}
	return err;
}

void qhca_async_eq_fini(struct qhca_dev *dev)
{
	struct qhca_eq *eq = &dev->async_eq;

	if (!eq->ring)
		return;
	qhca_admin_handle_cmd(dev, QHCA_CMD_DESTROY_EQ, eq->handle, NULL);
	dma_free_coherent(&dev->pdev->dev, sizeof(struct qhca_eqe) << eq->log2, eq->ring,
			  eq->dma);
	eq->ring = NULL;
}

static void qhca_port_event(struct qhca_dev *dev, bool up)
{
	struct ib_event ev = {
		.device = &dev->ibdev,
		.element.port_num = 1,
		.event = up ? IB_EVENT_PORT_ACTIVE : IB_EVENT_PORT_ERR,
	};

	qhca_eth_link_change(dev, up);
	ib_dispatch_event(&ev);
}

/* Called from the vector 0 interrupt. */
void qhca_async_eq_poll(struct qhca_dev *dev)
{
	struct qhca_eq *eq = &dev->async_eq;
	u32 start;

	if (!eq->ring)
		return;
	start = eq->ci;
	for (;;) {
		struct qhca_eqe *eqe = &eq->ring[eq->ci & ((1u << eq->log2) - 1)];
		u8 phase = ((eq->ci >> eq->log2) & 1) ? 0 : QHCA_EQE_PHASE;

		if ((READ_ONCE(eqe->flags) & QHCA_EQE_PHASE) != phase)
			break;
		dma_rmb();	/* the event's fields only after its phase */
		switch (eqe->type) {
		case QHCA_EVENT_PORT_ACTIVE:
			qhca_port_event(dev, true);
			break;
		case QHCA_EVENT_PORT_DOWN:
			qhca_port_event(dev, false);
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
	if (eq->ci != start)
		writeq((u64)eq->ci << 32 | eq->handle, dev->db0 + QHCA_DB_EQ);
}
