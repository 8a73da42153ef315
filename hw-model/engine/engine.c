// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * qhca engine: its life cycle (configuration checked once, set-up, reset, the end) and the
 * port's link state. Where the rest is: regs.c (BAR0 registers, doorbells), recv.c (a
 * frame's way in), objtable.c (the object tables), dma.c (the one path into guest
 * memory), trace.c (logging and the teaching trace); docs/architecture.md has the map.
 */
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
