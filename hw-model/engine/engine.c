// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * qhca engine core: configuration, reset, BAR0 registers, logging and the checked guest
 * memory helpers.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_internal.h"

static bool is_pow2(uint32_t v)
{
	return v && !(v & (v - 1));
}

bool qhca_engine_config_check(const struct qhca_engine_config *c, char *why, size_t why_len)
{
	const char *msg = NULL;

	if (c->db_pages < 2 || c->db_pages > QHCA_MAX_DB_PAGES || !is_pow2(c->db_pages))
		msg = "db-pages must be a power of two in 2..4096";
	else if (c->msix_vectors < 3 || c->msix_vectors > 64)
		msg = "msix-vectors must be in 3..64";
	else if (!c->max_pd || c->max_pd > QHCA_MAX_OBJECTS)
		msg = "max-pd must be in 1..1048576";
	else if (!c->max_qp || c->max_qp > QHCA_MAX_OBJECTS)
		msg = "max-qp must be in 1..1048576";
	else if (!c->max_cq || c->max_cq > QHCA_MAX_OBJECTS)
		msg = "max-cq must be in 1..1048576";
	else if (!c->max_mr || c->max_mr > QHCA_MAX_OBJECTS)
		msg = "max-mr must be in 1..1048576";
	else if (!c->max_srq || c->max_srq > QHCA_MAX_OBJECTS)
		msg = "max-srq must be in 1..1048576";
	else if (c->max_cqe < 64 || c->max_cqe > QHCA_MAX_CQE)
		msg = "max-cqe must be in 64..4194304";
	else if (c->max_qp_wr < 64 || c->max_qp_wr > QHCA_MAX_QP_WR)
		msg = "max-qp-wr must be in 64..32768";
	else if (!c->max_sge || c->max_sge > QHCA_MAX_SGE)
		msg = "max-sge must be in 1..32";
	else if (c->max_inline > QHCA_MAX_INLINE)
		msg = "max-inline must be at most 1024";
	else if (!c->max_mr_size_mb || c->max_mr_size_mb > (1u << 20))
		msg = "max-mr-size-mb must be in 1..1048576";
	else if (c->mtu < 256 || c->mtu > 4096 || !is_pow2(c->mtu))
		msg = "mtu must be 256, 512, 1024, 2048 or 4096";
	else if (c->mac[0] & 1)
		msg = "mac must be a unicast address";
	else if (c->link != QHCA_LINK_ROCE && c->link != QHCA_LINK_IB && c->link != QHCA_LINK_IWARP)
		msg = "link must be roce or ib";
	else if (c->host_mem_mb && (c->host_mem_mb < 16 || c->host_mem_mb > QHCA_MAX_HOST_MEM_MB))
		msg = "host-mem-mb must be in 16..1048576";

	if (msg && why && why_len)
		snprintf(why, why_len, "%s", msg);
	return msg == NULL;
}

void qhca_logf(struct qhca_engine *e, enum qhca_log_level level, const char *func,
	       const char *fmt, ...)
{
	char msg[256];
	va_list ap;

	if (!e->ops->log || (e->ops->log_enabled && !e->ops->log_enabled(e->opaque, level)))
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	e->ops->log(e->opaque, level, func, msg);
}

/* Guest memory: every access goes through one of these two. */
static bool dma_range_ok(struct qhca_engine *e, uint64_t addr, size_t len, const char *what)
{
	if (len == 0)
		return true;
	if (len > QHCA_DMA_MAX_LEN || addr == 0 || addr + len < addr) {
		qhca_log_guest(e, "%s: bad guest range addr=0x%llx len=%zu", what,
			       (unsigned long long)addr, len);
		return false;
	}
	return true;
}

int qhca_dma_read(struct qhca_engine *e, uint64_t addr, void *buf, size_t len)
{
	if (!dma_range_ok(e, addr, len, "read"))
		return -1;
	e->dma_bytes += len;	/* counted for the admin queue's budget */
	e->dma_calls++;
	if (len && e->ops->dma_read(e->opaque, addr, buf, len)) {
		qhca_log_guest(e, "read of %zu bytes at 0x%llx failed", len, (unsigned long long)addr);
		return -1;
	}
	return 0;
}

int qhca_dma_write(struct qhca_engine *e, uint64_t addr, const void *buf, size_t len)
{
	if (!dma_range_ok(e, addr, len, "write"))
		return -1;
	e->dma_bytes += len;
	e->dma_calls++;
	if (len && e->ops->dma_write(e->opaque, addr, buf, len)) {
		qhca_log_guest(e, "write of %zu bytes at 0x%llx failed", len, (unsigned long long)addr);
		return -1;
	}
	return 0;
}

/* ---------------------------------------------------------------- object tables */

/*
 * Free slots wait in a FIFO, so a freed slot is reused as late as possible: together with
 * the generation this keeps stale handles and keys from naming a new object for long.
 * Allocation and freeing take constant time whatever the table's size.
 */
static void free_q_reset(struct qhca_obj_table *t)
{
	uint32_t i;

	t->free_head = 0;
	for (i = 0; i < t->capacity; i++)
		t->free_q[i] = i;
}

int qhca_obj_table_init(struct qhca_obj_table *t, uint32_t capacity)
{
	size_t n = capacity ? capacity : 1;

	memset(t, 0, sizeof(*t));
	if (capacity > QHCA_MAX_OBJECTS)
		return -1;
	t->gen = calloc(n, sizeof(*t->gen));
	t->owner = calloc(n, sizeof(*t->owner));
	t->users = calloc(n, sizeof(*t->users));
	t->free_q = calloc(n, sizeof(*t->free_q));
	if (!t->gen || !t->owner || !t->users || !t->free_q) {
		qhca_obj_table_fini(t);
		return -1;
	}
	t->capacity = capacity;
	free_q_reset(t);
	return 0;
}

void qhca_obj_table_fini(struct qhca_obj_table *t)
{
	free(t->gen);
	free(t->owner);
	free(t->users);
	free(t->free_q);
	memset(t, 0, sizeof(*t));
}

void qhca_obj_table_clear(struct qhca_obj_table *t)
{
	uint32_t i;

	/* Keep generations so that handles from before the reset stay invalid. */
	for (i = 0; i < t->capacity; i++) {
		if (t->gen[i] & OBJ_USED)
			t->gen[i] = ((t->gen[i] + 1) & OBJ_GEN_MASK);
		t->owner[i] = 0;
		t->users[i] = 0;
	}
	t->count = 0;
	free_q_reset(t);
}

uint32_t qhca_obj_alloc(struct qhca_obj_table *t, uint32_t owner)
{
	uint32_t i;

	if (t->count >= t->capacity)
		return 0;
	i = t->free_q[t->free_head];
	t->free_head = (t->free_head + 1) % t->capacity;
	t->gen[i] |= OBJ_USED;
	t->owner[i] = owner;
	t->users[i] = 0;
	t->count++;
	return QHCA_FIELD_PREP(OBJ_HANDLE_GEN_MASK, t->gen[i]) |
	       QHCA_FIELD_PREP(OBJ_HANDLE_INDEX_MASK, i + 1);
}

int64_t qhca_obj_lookup(const struct qhca_obj_table *t, uint32_t handle)
{
	uint32_t idx = QHCA_FIELD_GET(OBJ_HANDLE_INDEX_MASK, handle);
	uint32_t gen = QHCA_FIELD_GET(OBJ_HANDLE_GEN_MASK, handle);

	if (idx == 0 || idx > t->capacity ||
	    (handle & ~(OBJ_HANDLE_GEN_MASK | OBJ_HANDLE_INDEX_MASK)))
		return -1;
	idx--;
	if (t->gen[idx] != (OBJ_USED | gen))
		return -1;
	return idx;
}

/* Slot of the live object whose handle has the bits @key in @mask (a mask that covers the
 * index bits), or -1: for numbers narrower than a handle (XRC SRQ numbers). */
int64_t qhca_obj_lookup_masked(const struct qhca_obj_table *t, uint32_t key, uint32_t mask)
{
	uint32_t idx = QHCA_FIELD_GET(OBJ_HANDLE_INDEX_MASK, key), h;

	if (idx == 0 || idx > t->capacity || (key & ~mask) || !(t->gen[idx - 1] & OBJ_USED))
		return -1;
	h = QHCA_FIELD_PREP(OBJ_HANDLE_GEN_MASK, t->gen[idx - 1] & OBJ_GEN_MASK) |
	    QHCA_FIELD_PREP(OBJ_HANDLE_INDEX_MASK, idx);
	return (h & mask) == key ? (int64_t)idx - 1 : -1;
}

uint32_t qhca_obj_generation(uint32_t handle)
{
	return QHCA_FIELD_GET(OBJ_HANDLE_GEN_MASK, handle);
}

void qhca_obj_hold(struct qhca_obj_table *t, uint32_t handle)
{
	int64_t idx = qhca_obj_lookup(t, handle);

	if (idx >= 0)
		t->users[idx]++;
}

void qhca_obj_unhold(struct qhca_obj_table *t, uint32_t handle)
{
	int64_t idx = qhca_obj_lookup(t, handle);

	if (idx >= 0 && t->users[idx])
		t->users[idx]--;
}

uint32_t qhca_obj_users(const struct qhca_obj_table *t, uint32_t handle)
{
	int64_t idx = qhca_obj_lookup(t, handle);

	return idx < 0 ? 0 : t->users[idx];
}

void qhca_obj_free(struct qhca_obj_table *t, uint32_t handle)
{
	int64_t idx = qhca_obj_lookup(t, handle);

	if (idx < 0)
		return;
	t->gen[idx] = (t->gen[idx] + 1) & OBJ_GEN_MASK;
	t->owner[idx] = 0;
	t->users[idx] = 0;
	t->free_q[(t->free_head + t->capacity - t->count) % t->capacity] = (uint32_t)idx;
	t->count--;
}

/* ---------------------------------------------------------------- life cycle */
int qhca_engine_init(struct qhca_engine *e, const struct qhca_engine_config *cfg,
		     const struct qhca_engine_ops *ops, void *opaque)
{
	memset(e, 0, sizeof(*e));
	e->ops = ops;
	e->opaque = opaque;
	e->cfg = *cfg;
	e->host_budget = (uint64_t)(cfg->host_mem_mb ? cfg->host_mem_mb : QHCA_HOST_MEM_MB) << 20;
	e->async_eq = -1;
	qhca_list_init(&e->tx_waiters);
	if (qhca_obj_table_init(&e->uctx, cfg->db_pages - 1) ||
	    qhca_obj_table_init(&e->pd, cfg->max_pd) ||
	    qhca_obj_table_init(&e->xrcd, cfg->max_pd) ||
	    qhca_obj_table_init(&e->eq_table, QHCA_MAX_EQ) ||
	    qhca_obj_table_init(&e->mr_table, cfg->max_mr) ||
	    qhca_obj_table_init(&e->cq_table, cfg->max_cq) ||
	    qhca_obj_table_init(&e->srq_table, cfg->max_srq) ||
	    qhca_obj_table_init(&e->qp_table, cfg->max_qp))
		goto err;
	e->mr = calloc(cfg->max_mr, sizeof(*e->mr));
	e->cq = calloc(cfg->max_cq, sizeof(*e->cq));
	e->srq = calloc(cfg->max_srq, sizeof(*e->srq));
	e->qp = calloc(cfg->max_qp, sizeof(*e->qp));
	e->pkt = malloc(ROCE_MAX_HDR + 4096 + 8);
	e->payload = malloc(4096);
	if (!e->mr || !e->cq || !e->srq || !e->qp || !e->pkt || !e->payload ||
	    qhca_loopback_init(e) || qhca_timer_init(e) || qhca_iw_init(e))
		goto err;
	qhca_engine_reset(e);
	return 0;
err:
	qhca_engine_fini(e);
	return -1;
}

struct qhca_engine *qhca_engine_new(const struct qhca_engine_config *cfg,
				    const struct qhca_engine_ops *ops, void *opaque)
{
	struct qhca_engine *e = malloc(sizeof(*e));

	if (e && qhca_engine_init(e, cfg, ops, opaque)) {
		free(e);
		return NULL;
	}
	return e;
}

void qhca_engine_free(struct qhca_engine *e)
{
	if (!e)
		return;
	qhca_engine_fini(e);
	free(e);
}

bool qhca_engine_tx_blocked(const struct qhca_engine *e)
{
	return e->tx_blocked;
}

void qhca_engine_fini(struct qhca_engine *e)
{
	qhca_iw_fini(e);	/* first: its connections name QPs */
	if (e->qp && e->srq && e->cq && e->mr) {
		qhca_qp_reset_all(e);
		qhca_srq_reset(e);
		qhca_cq_reset(e);
		qhca_mr_reset(e);
	}
	qhca_obj_table_fini(&e->uctx);
	qhca_obj_table_fini(&e->pd);
	qhca_obj_table_fini(&e->xrcd);
	qhca_obj_table_fini(&e->eq_table);
	qhca_obj_table_fini(&e->mr_table);
	qhca_obj_table_fini(&e->cq_table);
	qhca_obj_table_fini(&e->srq_table);
	qhca_obj_table_fini(&e->qp_table);
	free(e->mr);
	free(e->cq);
	free(e->srq);
	free(e->qp);
	free(e->pkt);
	free(e->payload);
	e->mr = NULL;
	e->cq = NULL;
	e->srq = NULL;
	e->qp = NULL;
	e->pkt = e->payload = NULL;
	qhca_loopback_fini(e);
	qhca_timer_fini(e);
	qhca_mcast_reset(e);
	free(e->eth.frame);
	e->eth.frame = NULL;
}

void qhca_engine_reset(struct qhca_engine *e)
{
	qhca_log(e, QHCA_LOG_EVENT, "device reset");
	e->ctrl = 0;
	e->status = 0;
	e->error = QHCA_ERR_NONE;
	e->intr_mask = 0;
	e->asq_base = 0;
	e->acq_base = 0;
	e->aq_depth_log2 = 0;
	qhca_admin_reset(e);
	/* Connections and queue pairs first: they hold references on CQs and SRQs. */
	qhca_iw_reset(e);
	qhca_qp_reset_all(e);
	qhca_srq_reset(e);
	qhca_cq_reset(e);
	qhca_mr_reset(e);
	e->gsi_qpn = 0;
	e->smi_qpn = 0;
	qhca_mcast_reset(e);
	memcpy(e->mac, e->cfg.mac, 6);	/* the property's address until SET_MAC */
	e->loop_count = 0;
	e->loop_deferred = false;
	e->tx_blocked = e->loop_blocked = false;
	qhca_obj_table_clear(&e->uctx);
	qhca_obj_table_clear(&e->pd);
	qhca_obj_table_clear(&e->xrcd);
	qhca_eq_reset(e);
	qhca_eth_stop(e);
	qhca_ib_port_reset(e);
	qhca_timer_update(e);
}

/* ---------------------------------------------------------------- registers */
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
		qhca_admin_sq_doorbell(e, v);
		qhca_loopback_drain(e);		/* iWARP: a connection to our own address */
		return;
	case QHCA_REG_ACQ_HEAD:
		qhca_admin_cq_doorbell(e, v);
		qhca_loopback_drain(e);
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
			qhca_wq_doorbell(e, (uint32_t)page, (uint32_t)reg, value);
			qhca_loopback_drain(e);
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

static void step_bad(struct qhca_engine *e, size_t len, enum roce_parse_result r)
{
	qhca_step(e, "drop size=%zu why=\"%s\"", len, roce_parse_result_name(r));
}

static void step_drop(struct qhca_engine *e, const struct roce_pkt *p, const char *why)
{
	if (qhca_tracing(e))
		qhca_step_pkt(e, "drop", p->dqpn, p, 0, why);
}

/* A parsed packet for us: to the requester (responses) or the responder of its QP. */
static void dispatch_to_qp(struct qhca_engine *e, const struct roce_pkt *p)
{
	const struct roce_opcode_info *oi = roce_opcode_info(p->opcode);
	struct qhca_qp *qp;

	qp = qhca_qp_find(e, p->dqpn == 0 ? e->smi_qpn : p->dqpn == 1 ? e->gsi_qpn : p->dqpn);
	if (!qp) {
		e->cnt.roce_rx_no_qp++;
		step_drop(e, p, "no such QP");
		return;
	}
	if (oi->flags & ROCE_F_RESP)
		qhca_req_response(e, qp, p);
	else
		qhca_resp_request(e, qp, p);
}

static void roce_dispatch(struct qhca_engine *e, const struct roce_pkt *p)
{
	if ((p->pkey & 0x7fff) != (ROCE_DEFAULT_PKEY & 0x7fff)) {
		e->cnt.roce_rx_bad_pkey++;
		step_drop(e, p, "P_Key not ours");
		return;
	}
	if (p->dqpn == 0) {
		e->cnt.roce_rx_no_qp++;	/* RoCE has no QP0 */
		step_drop(e, p, "RoCE has no QP0");
		return;
	}
	dispatch_to_qp(e, p);
}

/*
 * A packet on the InfiniBand port (IBA 7.9, 10.2.4): QP0 takes VL15 and VL15 only; the
 * DLID must be one of ours, a multicast LID, or (for SMPs) the permissive LID; a port
 * that is not ACTIVE takes only SMPs; the P_Key must be in the table (not checked for
 * SMPs, 10.9.1). Multicast goes to the QPs attached to the group.
 */
static void ib_dispatch(struct qhca_engine *e, const struct roce_pkt *p)
{
	bool smp = p->vl == IB_VL_SMP;
	bool to_us = p->dlid == IB_LID_PERMISSIVE ? smp :
		     qhca_ib_lid_ours(e, p->dlid) || ib_lid_mcast(p->dlid);

	if (smp != (p->dqpn == 0) || !to_us || (!smp && !qhca_ib_active(e))) {
		const char *why = !to_us ? "not our LID" : smp != (p->dqpn == 0) ?
				  "VL15 is for QP0 alone" : "port not active";

		e->cnt.ib_rx_bad_lid++;
		step_drop(e, p, why);
		qhca_log(e, QHCA_LOG_EVENT, "IB packet to LID 0x%x VL %u QP 0x%x dropped: %s",
			 p->dlid, p->vl, p->dqpn, why);
		return;
	}
	if (!smp && !qhca_ib_pkey_ok(e, p->pkey)) {
		e->cnt.roce_rx_bad_pkey++;
		step_drop(e, p, "P_Key not in the table");
		return;
	}
	if (ib_lid_mcast(p->dlid)) {
		if (p->dqpn != 0xffffff || !p->grh) {
			e->cnt.ib_rx_bad_lid++;
			return;
		}
		qhca_mcast_deliver(e, p, 0);
		return;
	}
	dispatch_to_qp(e, p);
}

static enum roce_parse_result parse(struct qhca_engine *e, const uint8_t *frame, size_t len,
				    struct roce_pkt *p)
{
	return e->cfg.link == QHCA_LINK_IB ? ib_parse(frame, len, p) : roce_parse(frame, len, p);
}

static void dispatch(struct qhca_engine *e, const struct roce_pkt *p, size_t len)
{
	if (qhca_tracing(e))
		qhca_step_pkt(e, "rx", p->dqpn, p, len, NULL);
	if (p->ib)
		ib_dispatch(e, p);
	else
		roce_dispatch(e, p);
}

void qhca_roce_receive(struct qhca_engine *e, const uint8_t *frame, size_t len)
{
	struct roce_pkt p;
	enum roce_parse_result r = parse(e, frame, len, &p);

	if (r != ROCE_OK) {
		e->cnt.roce_rx_bad[r]++;
		step_bad(e, len, r);
		qhca_log(e, QHCA_LOG_EVENT, "RoCE frame of %zu bytes dropped: %s", len,
			 roce_parse_result_name(r));
		return;
	}
	e->cnt.roce_rx_pkts++;
	e->cnt.roce_rx_bytes += len;
	dispatch(e, &p, len);
}

/* A packet from the wire that the parser accepted: counted, to its QP, then the loopback. */
static void accept_pkt(struct qhca_engine *e, const struct roce_pkt *p, size_t len)
{
	e->cnt.roce_rx_pkts++;
	e->cnt.roce_rx_bytes += len;
	dispatch(e, p, len);
	qhca_loopback_drain(e);
}

void qhca_engine_receive(struct qhca_engine *e, const uint8_t *frame, size_t len)
{
	struct roce_pkt p;
	enum roce_parse_result r = parse(e, frame, len, &p);

	if (e->cfg.link == QHCA_LINK_IB) {
		if (r != ROCE_OK) {
			/* Raw and IP packets (LNH 0, 1) are not for a CA of ours either. */
			e->cnt.roce_rx_bad[r == ROCE_NOT_ROCE ? ROCE_BAD_OPCODE : r]++;
			step_bad(e, len, r);
			qhca_log_guest(e, "IB packet of %zu bytes dropped: %s", len,
				       roce_parse_result_name(r));
			return;
		}
		accept_pkt(e, &p, len);
		return;
	}
	/* iWARP: our connections' segments to TCP, the rest (RoCE too) to the netdev. */
	if (e->cfg.link == QHCA_LINK_IWARP) {
		/* Our own MAC as the source: what we send ourselves loops back inside
		 * (qhca_xmit_frame), so from the wire it is forged, or the network loops.
		 * Never a segment of our connections (taken, it would make one of them
		 * loop back to us); the netdev sees it, as a plain NIC's stack would (a
		 * bridge's loop detection among them). */
		if (len >= 12 && !memcmp(frame + 6, e->mac, 6)) {
			qhca_step(e, "iw rx size=%zu: our own MAC as the source, to the netdev",
				  len);
			qhca_eth_receive(e, frame, len);
		} else if (!qhca_iw_receive(e, frame, len)) {
			qhca_eth_receive(e, frame, len);
		}
		qhca_loopback_drain(e);
		return;
	}
	/* Ordinary frames go to the netdev; RoCEv2 to our own MAC goes to the transport. */
	if (r == ROCE_NOT_ROCE) {
		qhca_eth_receive(e, frame, len);
		return;
	}
	if (memcmp(frame, e->mac, 6))
		return;		/* flooded by the switch, not for us */
	if (r != ROCE_OK) {
		e->cnt.roce_rx_bad[r]++;
		step_bad(e, len, r);
		qhca_log_guest(e, "RoCE frame of %zu bytes dropped: %s", len,
			       roce_parse_result_name(r));
		return;
	}
	accept_pkt(e, &p, len);
}

void qhca_engine_set_link(struct qhca_engine *e, bool up)
{
	if (e->link_up == up)
		return;
	e->link_up = up;
	qhca_log(e, QHCA_LOG_EVENT, "link %s", up ? "up" : "down");
	if (e->cfg.link == QHCA_LINK_IB)
		qhca_ib_port_link(e, up);	/* up: INIT, until the SM makes it ACTIVE */
	else
		qhca_event_async(e, up ? QHCA_EVENT_PORT_ACTIVE : QHCA_EVENT_PORT_DOWN, 1, 0);
}
