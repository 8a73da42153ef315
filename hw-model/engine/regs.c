// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * qhca engine: BAR0's registers (docs/device-interface.md) and the doorbell BAR. A
 * register access and a doorbell are decoded here and handed to the admin queue, the work
 * queues or the CQs; an unknown offset, a read-only register written or a doorbell on a
 * page its writer does not own is a guest error (logged), never a fault of the device.
 */
#include <stdio.h>
#include <string.h>

#include "engine_internal.h"

static void set_lo(uint64_t *reg, uint32_t v)
{
	*reg = (*reg & 0xffffffff00000000ull) | v;
}

static void set_hi(uint64_t *reg, uint32_t v)
{
	*reg = (*reg & 0xffffffffull) | ((uint64_t)v << 32);
}

uint32_t qhca_engine_reg_read(struct qhca_engine *e, uint32_t offset)
{
	switch (offset) {
	case QHCA_REG_VERSION:
		return QHCA_ABI_VERSION;
	case QHCA_REG_CAPS:
		return QHCA_CAP_ADMIN_PHASE |
		       (e->cfg.link == QHCA_LINK_ROCE ? QHCA_CAP_ROCE_V2 | QHCA_CAP_ROCE_V1 :
			e->cfg.link == QHCA_LINK_IWARP ? QHCA_CAP_IWARP : 0);
	case QHCA_REG_DB_PAGES:
		return e->cfg.db_pages;
	case QHCA_REG_MSIX_VECTORS:
		return e->cfg.msix_vectors;
	case QHCA_REG_CTRL:
		return e->ctrl;
	case QHCA_REG_STATUS:
		return e->status;
	case QHCA_REG_ASQ_BASE_LO:
		return (uint32_t)e->asq_base;
	case QHCA_REG_ASQ_BASE_HI:
		return (uint32_t)(e->asq_base >> 32);
	case QHCA_REG_ACQ_BASE_LO:
		return (uint32_t)e->acq_base;
	case QHCA_REG_ACQ_BASE_HI:
		return (uint32_t)(e->acq_base >> 32);
	case QHCA_REG_AQ_DEPTH:
		return e->aq_depth_log2;
	case QHCA_REG_ERROR:
		return e->error;
	case QHCA_REG_INTR_MASK:
		return e->intr_mask;
	case QHCA_REG_ASQ_TAIL:
	case QHCA_REG_ACQ_HEAD:
		return 0;	/* write-only */
	default:
		qhca_log_guest(e, "read of unknown register 0x%x", offset);
		return 0;
	}
}

static void write_ctrl(struct qhca_engine *e, uint32_t v)
{
	if (v & QHCA_CTRL_RESET) {
		qhca_engine_reset(e);
		return;
	}
	if (v & ~QHCA_CTRL_ENABLE)
		qhca_log_guest(e, "reserved CTRL bits 0x%x ignored", v & ~QHCA_CTRL_ENABLE);
	if ((v & QHCA_CTRL_ENABLE) && !(e->ctrl & QHCA_CTRL_ENABLE)) {
		e->ctrl = QHCA_CTRL_ENABLE;
		if (qhca_admin_enable(e))
			e->status = QHCA_STATUS_READY;
	} else if (!(v & QHCA_CTRL_ENABLE) && (e->ctrl & QHCA_CTRL_ENABLE)) {
		/* Disabling is a reset of everything but the queue configuration. */
		uint64_t asq = e->asq_base, acq = e->acq_base;
		uint32_t depth = e->aq_depth_log2, mask = e->intr_mask;

		qhca_engine_reset(e);
		e->asq_base = asq;
		e->acq_base = acq;
		e->aq_depth_log2 = depth;
		e->intr_mask = mask;
	}
}

void qhca_engine_reg_write(struct qhca_engine *e, uint32_t offset, uint32_t v)
{
	bool enabled = e->ctrl & QHCA_CTRL_ENABLE;

	switch (offset) {
	case QHCA_REG_CTRL:
		write_ctrl(e, v);
		return;
	case QHCA_REG_ASQ_BASE_LO:
	case QHCA_REG_ASQ_BASE_HI:
	case QHCA_REG_ACQ_BASE_LO:
	case QHCA_REG_ACQ_BASE_HI:
	case QHCA_REG_AQ_DEPTH:
		if (enabled) {
			qhca_log_guest(e, "write 0x%x to 0x%x while enabled ignored", v, offset);
			return;
		}
		if (offset == QHCA_REG_ASQ_BASE_LO)
			set_lo(&e->asq_base, v);
		else if (offset == QHCA_REG_ASQ_BASE_HI)
			set_hi(&e->asq_base, v);
		else if (offset == QHCA_REG_ACQ_BASE_LO)
			set_lo(&e->acq_base, v);
		else if (offset == QHCA_REG_ACQ_BASE_HI)
			set_hi(&e->acq_base, v);
		else
			e->aq_depth_log2 = v;
		return;
	case QHCA_REG_ASQ_TAIL:
	case QHCA_REG_ACQ_HEAD:
		/* One run of the requester's budget (req.c) for all the doorbell does: the
		 * commands (each MODIFY_QP to RTS starts WQEs) and the frames they loop back
		 * (iWARP: a connection to our own address). */
		qhca_req_budget_begin(e);
		if (offset == QHCA_REG_ASQ_TAIL)
			qhca_admin_sq_doorbell(e, v);
		else
			qhca_admin_cq_doorbell(e, v);
		qhca_loopback_drain(e);
		qhca_req_budget_end(e);
		return;
	case QHCA_REG_INTR_MASK:
		e->intr_mask = v;
		return;
	default:
		qhca_log_guest(e, "write 0x%x to read-only or unknown register 0x%x", v, offset);
		return;
	}
}

void qhca_engine_db_write(struct qhca_engine *e, uint64_t offset, uint64_t value, unsigned size)
{
	uint64_t page = offset / QHCA_DB_PAGE_SIZE, reg = offset % QHCA_DB_PAGE_SIZE;

	if (!(e->status & QHCA_STATUS_READY)) {
		qhca_log_guest(e, "doorbell 0x%llx while the device is not ready",
			       (unsigned long long)offset);
		return;
	}
	switch (reg) {
	case QHCA_DB_SQ:
	case QHCA_DB_RQ:
	case QHCA_DB_SRQ:
		if (size == 8) {
			/* one run of the requester's budget, the drain after it within */
			qhca_req_budget_begin(e);
			qhca_wq_doorbell(e, (uint32_t)page, (uint32_t)reg, value);
			qhca_loopback_drain(e);
			qhca_req_budget_end(e);
			return;
		}
		break;
	case QHCA_DB_CQ_ARM:
	case QHCA_DB_CQ_ARM_SE:
		if (size == 8) {
			qhca_cq_arm_doorbell(e, (uint32_t)page, value, reg == QHCA_DB_CQ_ARM_SE);
			return;
		}
		break;
	}
	if (page == 0) {
		switch (reg) {
		case QHCA_DB_EQ:
			if (size == 8) {
				qhca_eq_doorbell(e, value);
				return;
			}
			break;
		case QHCA_DB_ETH_TX:
			qhca_eth_tx_doorbell(e, (uint32_t)value);
			return;
		case QHCA_DB_ETH_RX:
			qhca_eth_rx_doorbell(e, (uint32_t)value);
			return;
		}
	}
	/* The queue pair and completion queue doorbells arrive with the verbs datapath. */
	qhca_log_guest(e, "doorbell page %llu offset 0x%llx value 0x%llx size %u: no such doorbell",
		       (unsigned long long)page, (unsigned long long)reg,
		       (unsigned long long)value, size);
}

