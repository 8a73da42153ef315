// SPDX-License-Identifier: GPL-2.0
/*
 * qhca admin queue: 64-byte commands in a ring the device reads, 16-byte completions in a
 * ring the device writes with a phase bit. One command is in flight at a time; the admin
 * MSI-X vector wakes the waiter, and a timeout reports the device's status registers.
 */
#include <linux/delay.h>
#include <linux/dma-mapping.h>
#include <linux/interrupt.h>
#include <linux/io.h>

#include "qhca.h"

static int qhca_status_to_errno(u16 status)
{
	switch (status) {
	case QHCA_ST_OK:
		return 0;
	case QHCA_ST_BAD_OPCODE:
		return -EOPNOTSUPP;
	case QHCA_ST_NO_RESOURCES:
		return -ENOMEM;
	case QHCA_ST_BUSY:
		return -EBUSY;
	case QHCA_ST_DMA_ERROR:
		return -EIO;
	case QHCA_ST_BAD_HANDLE:
	case QHCA_ST_BAD_LENGTH:
	case QHCA_ST_BAD_FIELD:
	case QHCA_ST_BAD_STATE:
	default:
		return -EINVAL;
	}
}

static int qhca_wait_status(struct qhca_dev *dev, u32 mask, u32 want)
{
	int i;

	for (i = 0; i < 1000; i++) {
		u32 st = readl(dev->regs + QHCA_REG_STATUS);

		if (st & QHCA_STATUS_FATAL)
			return -EIO;
		if ((st & mask) == want)
			return 0;
		usleep_range(100, 200);
	}
	return -ETIMEDOUT;
}

int qhca_admin_init(struct qhca_dev *dev)
{
	struct qhca_admin *aq = &dev->aq;
	struct device *d = &dev->pdev->dev;
	int err;

	mutex_init(&aq->lock);
	init_completion(&aq->done);
	aq->depth = 1u << QHCA_AQ_DEPTH_LOG2;
	aq->sq = dma_alloc_coherent(d, aq->depth * sizeof(*aq->sq), &aq->sq_dma, GFP_KERNEL);
	aq->cq = dma_alloc_coherent(d, aq->depth * sizeof(*aq->cq), &aq->cq_dma, GFP_KERNEL);
	if (!aq->sq || !aq->cq) {
		err = -ENOMEM;
		goto err_free;
	}
	aq->sq_tail = 0;
	aq->cq_head = 0;
	aq->phase = QHCA_CQE_PHASE;

	writel(QHCA_CTRL_RESET, dev->regs + QHCA_REG_CTRL);
	writel(lower_32_bits(aq->sq_dma), dev->regs + QHCA_REG_ASQ_BASE_LO);
	writel(upper_32_bits(aq->sq_dma), dev->regs + QHCA_REG_ASQ_BASE_HI);
	writel(lower_32_bits(aq->cq_dma), dev->regs + QHCA_REG_ACQ_BASE_LO);
	writel(upper_32_bits(aq->cq_dma), dev->regs + QHCA_REG_ACQ_BASE_HI);
	writel(QHCA_AQ_DEPTH_LOG2, dev->regs + QHCA_REG_AQ_DEPTH);
	writel(QHCA_CTRL_ENABLE, dev->regs + QHCA_REG_CTRL);
	err = qhca_wait_status(dev, QHCA_STATUS_READY, QHCA_STATUS_READY);
	if (err) {
		dev_err(d, "admin queue did not start: status 0x%x error %u\n",
			readl(dev->regs + QHCA_REG_STATUS), readl(dev->regs + QHCA_REG_ERROR));
		goto err_free;
	}
	return 0;

err_free:
	qhca_admin_fini(dev);
	return err;
}

void qhca_admin_fini(struct qhca_dev *dev)
{
	struct qhca_admin *aq = &dev->aq;
	struct device *d = &dev->pdev->dev;

	if (dev->regs)
		writel(QHCA_CTRL_RESET, dev->regs + QHCA_REG_CTRL);
	if (aq->sq)
		dma_free_coherent(d, aq->depth * sizeof(*aq->sq), aq->sq, aq->sq_dma);
	if (aq->cq)
		dma_free_coherent(d, aq->depth * sizeof(*aq->cq), aq->cq, aq->cq_dma);
	aq->sq = NULL;
	aq->cq = NULL;
}

irqreturn_t qhca_admin_irq(int irq, void *data)
{
	struct qhca_dev *dev = data;

	complete(&dev->aq.done);
	qhca_async_eq_poll(dev);
	return IRQ_HANDLED;
}

/* Is the completion at cq_head valid (its phase matches ours)? */
static bool qhca_admin_cqe_ready(struct qhca_admin *aq)
{
	return (READ_ONCE(aq->cq[aq->cq_head].flags) & QHCA_CQE_PHASE) == aq->phase;
}

int qhca_admin_exec(struct qhca_dev *dev, struct qhca_cmd *cmd, u32 *result0, u32 *result1)
{
	struct qhca_admin *aq = &dev->aq;
	struct qhca_cqe_admin cqe;
	unsigned long deadline;
	int err;

	mutex_lock(&aq->lock);
	cmd->hdr.cmd_id = aq->next_id++;
	memcpy(&aq->sq[aq->sq_tail], cmd, sizeof(*cmd));
	aq->sq_tail = (aq->sq_tail + 1) & (aq->depth - 1);
	reinit_completion(&aq->done);
	/* writel orders the command's stores before the doorbell. */
	writel(aq->sq_tail, dev->regs + QHCA_REG_ASQ_TAIL);

	deadline = jiffies + msecs_to_jiffies(QHCA_AQ_TIMEOUT_MS);
	while (!qhca_admin_cqe_ready(aq)) {
		if (time_after(jiffies, deadline)) {
			dev_err(&dev->pdev->dev,
				"admin command %u (opcode 0x%x) timed out: status 0x%x error %u\n",
				cmd->hdr.cmd_id, cmd->hdr.opcode,
				readl(dev->regs + QHCA_REG_STATUS),
				readl(dev->regs + QHCA_REG_ERROR));
			err = -ETIMEDOUT;
			goto out;
		}
		wait_for_completion_timeout(&aq->done, msecs_to_jiffies(10));
	}
	dma_rmb();	/* read the entry only after seeing its phase */
	cqe = aq->cq[aq->cq_head];
	aq->cq_head = (aq->cq_head + 1) & (aq->depth - 1);
	if (!aq->cq_head)
		aq->phase ^= QHCA_CQE_PHASE;
	writel(aq->cq_head, dev->regs + QHCA_REG_ACQ_HEAD);

	if (cqe.cmd_id != cmd->hdr.cmd_id) {
		dev_err(&dev->pdev->dev, "admin completion for id %u, expected %u\n",
			cqe.cmd_id, cmd->hdr.cmd_id);
		err = -EIO;
		goto out;
	}
	err = qhca_status_to_errno(cqe.status);
	if (err)
		dev_dbg(&dev->pdev->dev, "admin opcode 0x%x failed: status %u\n",
			cmd->hdr.opcode, cqe.status);
	if (result0)
		*result0 = cqe.result0;
	if (result1)
		*result1 = cqe.result1;
out:
	mutex_unlock(&aq->lock);
	return err;
}

int qhca_admin_query(struct qhca_dev *dev, u8 opcode, u32 port, void *out, u32 len)
{
	struct device *d = &dev->pdev->dev;
	struct qhca_cmd cmd = {};
	dma_addr_t dma;
	void *buf;
	int err;

	buf = dma_alloc_coherent(d, len, &dma, GFP_KERNEL);
	if (!buf)
		return -ENOMEM;
	cmd.hdr.opcode = opcode;
	cmd.hdr.len = sizeof(cmd.query);
	cmd.query.out_addr = dma;
	cmd.query.out_len = len;
	cmd.query.port = port;
	err = qhca_admin_exec(dev, &cmd, NULL, NULL);
	if (!err)
		memcpy(out, buf, len);
	dma_free_coherent(d, len, buf, dma);
	return err;
}

int qhca_admin_handle_cmd(struct qhca_dev *dev, u8 opcode, u32 handle, u32 *result0)
{
	struct qhca_cmd cmd = {};

	cmd.hdr.opcode = opcode;
	cmd.hdr.len = sizeof(cmd.handle);
	cmd.handle.handle = handle;
	return qhca_admin_exec(dev, &cmd, result0, NULL);
}
