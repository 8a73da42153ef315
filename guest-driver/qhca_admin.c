// SPDX-License-Identifier: GPL-2.0
/*
 * qhca admin queue: 64-byte commands in a ring the device reads, 16-byte completions in a
 * ring the device writes with a phase bit. One command is in flight at a time; the admin
 * MSI-X vector wakes the waiter.
 *
 * A command that does not complete in time kills the queue (QHCA_AQ_DEAD): it stays in the
 * ring, so a later completion could not be matched to its command, and the device may
 * still act on it at any moment. From then on every command is refused with -EIO without
 * reaching the device, and nothing is recovered until remove resets the device.
 *
 * Ownership of DMA memory. A command names guest memory by bus address: the in and out
 * buffers of queries and object commands, page lists, and the memory of the objects it
 * creates (rings of EQs, CQs, QPs, SRQs and the Ethernet function; user memory behind rings
 * and regions). The device owns such memory
 *   - for buffers a command only reads or writes: from submission until it completes;
 *   - for an object's memory: until the object's destroy command completes.
 * So every caller, after a failed command, asks before freeing:
 *   - qhca_admin_cmd_keep(dev, err) for what the failed command named: true when its fate is
 *     unknown (the queue is dead);
 *   - qhca_admin_obj_keep(dev, err) for an object whose destroy failed: true unless the
 *     device has been reset;
 * and gives memory it must keep to qhca_admin_put_coherent()/qhca_admin_put_umem() with
 * keep set. The queue frees it once the device is reset (qhca_admin_reset_dead() at remove,
 * qhca_admin_fini()); until then it is leaked on purpose. Destroy verbs on a dead queue
 * report success (the device is gone for the OS) and keep the object's memory this way.
 */
#include <linux/delay.h>
#include <linux/dma-mapping.h>
#include <linux/interrupt.h>
#include <linux/io.h>
#include <linux/slab.h>
#include <rdma/ib_umem.h>

#include "qhca.h"

/* Memory the device may still touch: a coherent buffer or pinned user memory. */
struct qhca_kept {
	struct list_head list;
	struct ib_umem *umem;
	void *cpu;
	dma_addr_t dma;
	size_t size;
};

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
	mutex_init(&aq->keep_lock);
	INIT_LIST_HEAD(&aq->kept);
	aq->state = QHCA_AQ_LIVE;
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

static void qhca_kept_free(struct qhca_dev *dev, struct qhca_kept *k)
{
	if (k->umem)
		ib_umem_release(k->umem);
	if (k->cpu)
		dma_free_coherent(&dev->pdev->dev, k->size, k->cpu, k->dma);
}

/* The device has been reset: it touches nothing any more; free what was kept for it. */
static void qhca_admin_release_kept(struct qhca_dev *dev)
{
	struct qhca_admin *aq = &dev->aq;
	struct qhca_kept *k, *tmp;

	mutex_lock(&aq->keep_lock);
	WRITE_ONCE(aq->state, QHCA_AQ_RESET);
	list_for_each_entry_safe(k, tmp, &aq->kept, list) {
		list_del(&k->list);
		qhca_kept_free(dev, k);
		kfree(k);
	}
	mutex_unlock(&aq->keep_lock);
}

/* Hand memory the device may still touch to the queue (see the top of this file). */
static void qhca_admin_keep(struct qhca_dev *dev, struct qhca_kept *what)
{
	struct qhca_admin *aq = &dev->aq;
	struct qhca_kept *k;

	mutex_lock(&aq->keep_lock);
	if (aq->state == QHCA_AQ_RESET) {
		qhca_kept_free(dev, what);
	} else {
		k = kmemdup(what, sizeof(*what), GFP_KERNEL);
		if (k)
			list_add_tail(&k->list, &aq->kept);
		/* else leaked on purpose: never freed while the device may use it */
	}
	mutex_unlock(&aq->keep_lock);
}

/* Free a coherent buffer, or with @keep hand it to the queue until the device is reset. */
void qhca_admin_put_coherent(struct qhca_dev *dev, bool keep, size_t size, void *cpu,
			     dma_addr_t dma)
{
	struct qhca_kept k = { .cpu = cpu, .dma = dma, .size = size };

	if (!cpu)
		return;
	if (keep)
		qhca_admin_keep(dev, &k);
	else
		dma_free_coherent(&dev->pdev->dev, size, cpu, dma);
}

/* Release pinned user memory, or with @keep hand it to the queue until the device is reset. */
void qhca_admin_put_umem(struct qhca_dev *dev, bool keep, struct ib_umem *umem)
{
	struct qhca_kept k = { .umem = umem };

	if (!umem)
		return;
	if (keep)
		qhca_admin_keep(dev, &k);
	else
		ib_umem_release(umem);
}

/* Is the queue refusing commands (dead, or dead and reset)? */
bool qhca_admin_dead(struct qhca_dev *dev)
{
	return READ_ONCE(dev->aq.state) != QHCA_AQ_LIVE;
}

/* After a command failed with @err: may the device still touch the buffers it named? */
bool qhca_admin_cmd_keep(struct qhca_dev *dev, int err)
{
	return err && READ_ONCE(dev->aq.state) == QHCA_AQ_DEAD;
}

/* After an object's destroy failed with @err: may the device still touch its memory? */
bool qhca_admin_obj_keep(struct qhca_dev *dev, int err)
{
	return err && READ_ONCE(dev->aq.state) != QHCA_AQ_RESET;
}

/*
 * Remove: a dead queue's device is reset before anything is torn down, so that every
 * destroy from here on may free at once, and what was kept is freed now.
 */
void qhca_admin_reset_dead(struct qhca_dev *dev)
{
	struct qhca_admin *aq = &dev->aq;
	bool dead;

	mutex_lock(&aq->lock);
	dead = aq->state == QHCA_AQ_DEAD;
	if (dead) {
		writel(QHCA_CTRL_RESET, dev->regs + QHCA_REG_CTRL);
		readl(dev->regs + QHCA_REG_STATUS);	/* the reset is done when this returns */
	}
	mutex_unlock(&aq->lock);
	if (dead) {
		qhca_admin_release_kept(dev);
		dev_info(&dev->pdev->dev, "device reset after the admin queue died\n");
	}
}

void qhca_admin_fini(struct qhca_dev *dev)
{
	struct qhca_admin *aq = &dev->aq;
	struct device *d = &dev->pdev->dev;

	if (dev->regs) {
		writel(QHCA_CTRL_RESET, dev->regs + QHCA_REG_CTRL);
		readl(dev->regs + QHCA_REG_STATUS);
	}
	qhca_admin_release_kept(dev);
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

/*
 * The command at the ring's tail will never be matched to its completion: refuse all
 * commands from now on. Called once, with the queue's lock held.
 */
static void qhca_admin_die(struct qhca_dev *dev, const struct qhca_cmd *cmd, const char *why)
{
	struct qhca_admin *aq = &dev->aq;
	const struct qhca_cqe_admin *head = &aq->cq[aq->cq_head];

	WRITE_ONCE(aq->state, QHCA_AQ_DEAD);
	dev_err(&dev->pdev->dev,
		"admin queue dead: command %u (opcode 0x%x) %s; sq_tail %u cq_head %u phase %u, CQE at head: id %u status %u flags 0x%x; device status 0x%x error %u; refusing all commands until the device is reset\n",
		cmd->hdr.cmd_id, cmd->hdr.opcode, why, aq->sq_tail, aq->cq_head, aq->phase,
		READ_ONCE(head->cmd_id), READ_ONCE(head->status), READ_ONCE(head->flags),
		readl(dev->regs + QHCA_REG_STATUS), readl(dev->regs + QHCA_REG_ERROR));
}

/*
 * Run one command. -EIO without reaching the device once the queue is dead; -ETIMEDOUT
 * (and the queue dead) when the device did not complete it. After a failure the caller
 * follows the ownership rule at the top of this file before freeing anything it named.
 */
int qhca_admin_exec(struct qhca_dev *dev, struct qhca_cmd *cmd, u32 *result0, u32 *result1)
{
	struct qhca_admin *aq = &dev->aq;
	struct qhca_cqe_admin cqe;
	unsigned long deadline;
	int err;

	mutex_lock(&aq->lock);
	if (aq->state != QHCA_AQ_LIVE) {
		err = -EIO;
		goto out;
	}
	cmd->hdr.cmd_id = aq->next_id++;
	memcpy(&aq->sq[aq->sq_tail], cmd, sizeof(*cmd));
	aq->sq_tail = (aq->sq_tail + 1) & (aq->depth - 1);
	reinit_completion(&aq->done);
	/* Fault injection: without its doorbell the device never sees the command. */
	if (READ_ONCE(aq->inject_timeout))
		WRITE_ONCE(aq->inject_timeout, false);
	else	/* writel orders the command's stores before the doorbell. */
		writel(aq->sq_tail, dev->regs + QHCA_REG_ASQ_TAIL);

	deadline = jiffies + msecs_to_jiffies(QHCA_AQ_TIMEOUT_MS);
	while (!qhca_admin_cqe_ready(aq)) {
		if (time_after(jiffies, deadline)) {
			qhca_admin_die(dev, cmd, "timed out");
			err = -ETIMEDOUT;
			goto out;
		}
		wait_for_completion_timeout(&aq->done, msecs_to_jiffies(10));
	}
	dma_rmb();	/* read the entry only after seeing its phase */
	cqe = aq->cq[aq->cq_head];
	if (cqe.cmd_id != cmd->hdr.cmd_id) {
		/* Out of step with the device: this command's fate is unknown too. */
		qhca_admin_die(dev, cmd, "got the completion of another command");
		err = -EIO;
		goto out;
	}
	aq->cq_head = (aq->cq_head + 1) & (aq->depth - 1);
	if (!aq->cq_head)
		aq->phase ^= QHCA_CQE_PHASE;
	writel(aq->cq_head, dev->regs + QHCA_REG_ACQ_HEAD);

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
	qhca_admin_put_coherent(dev, qhca_admin_cmd_keep(dev, err), len, buf, dma);
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
