/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Shared by the fuzz targets: an engine over a fake 1 MiB guest memory with a few
 * well-formed objects (an enabled admin queue, an EQ, a PD, an MR, CQs, QPs of every type)
 * so that fuzzed input reaches deep code. Everything the device does must be safe for any
 * byte the fuzzer writes into guest memory, registers or frames.
 */
#ifndef QHCA_FUZZ_COMMON_H
#define QHCA_FUZZ_COMMON_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_internal.h"

#define FZ_BASE		0x100000ull
#define FZ_SIZE		(1u << 20)
#define FZ_ASQ		(FZ_BASE + 0x00000)
#define FZ_ACQ		(FZ_BASE + 0x01000)
#define FZ_EQ		(FZ_BASE + 0x02000)
#define FZ_ARGS		(FZ_BASE + 0x03000)	/* command arguments */
#define FZ_PBL		(FZ_BASE + 0x04000)	/* page lists */
#define FZ_RINGS	(FZ_BASE + 0x10000)	/* CQ, SQ and RQ rings */
#define FZ_BUF		(FZ_BASE + 0x80000)	/* data buffers, the MR */
#define FZ_FRMR_PBL	(FZ_PBL + 24 * 0x400)	/* a page list for REG_MR WQEs: FZ_BUF's pages */

static uint8_t fz_mem[FZ_SIZE];
static uint64_t fz_now;

static int fz_rw(uint64_t a, void *b, size_t l, int w)
{
	if (a < FZ_BASE || a - FZ_BASE > FZ_SIZE || l > FZ_SIZE - (a - FZ_BASE))
		return -1;
	if (w)
		memcpy(fz_mem + (a - FZ_BASE), b, l);
	else
		memcpy(b, fz_mem + (a - FZ_BASE), l);
	return 0;
}

static int fz_read(void *o, uint64_t a, void *b, size_t l)
{
	return fz_rw(a, b, l, 0);
}

static int fz_write(void *o, uint64_t a, const void *b, size_t l)
{
	return fz_rw(a, (void *)b, l, 1);
}

static void fz_notify(void *o, unsigned v)
{
}

/* A target may keep transmitted frames (to deliver them later); by default they go nowhere. */
static void (*fz_xmit_hook)(const void *f, size_t l);

static void fz_xmit(void *o, const void *f, size_t l)
{
	volatile uint8_t sink = ((const uint8_t *)f)[l - 1];	/* touch the whole frame */

	(void)sink;
	if (fz_xmit_hook)
		fz_xmit_hook(f, l);
}

static uint64_t fz_clock(void *o)
{
	return fz_now;
}

static void fz_timer(void *o, uint64_t d)
{
}

/* QHCA_FUZZ_LOG=1 prints what the engine does (to replay a reproducer by hand). */
static bool fz_log_enabled(void *o, enum qhca_log_level level)
{
	static int on = -1;

	if (on < 0)
		on = getenv("QHCA_FUZZ_LOG") != NULL;
	return on;
}

static void fz_log(void *o, enum qhca_log_level level, const char *func, const char *msg)
{
	fprintf(stderr, "[%d] %s: %s\n", level, func, msg);
}

/* The teaching trace, on in half the runs (fz_input): it formats hostile values too. */
static size_t fz_step_bytes;

static void fz_step(void *o, const char *line)
{
	fz_step_bytes += strlen(line);
	if (fz_log_enabled(o, QHCA_LOG_EVENT))
		fprintf(stderr, "[step] %s\n", line);
}

static const struct qhca_engine_ops fz_ops = {
	.dma_read = fz_read, .dma_write = fz_write, .notify = fz_notify, .xmit = fz_xmit,
	.now_ns = fz_clock, .timer_arm = fz_timer, .log_enabled = fz_log_enabled, .log = fz_log,
	.step = fz_step,
};

/*
 * The limits of a run, in turn: small ones (deep state is reached quickly), the QEMU
 * device's defaults, and the largest every property allows (rings of 32768 WQEs of 4 KiB,
 * 4M CQEs, 1 KiB inline, 32 SGEs, regions of 1 TiB, 4096 doorbell pages, 64 vectors).
 * Two things are smaller than the device's: the object tables hold at most 4096 objects
 * of a kind (a table's set-up and reset take time in proportion to its size: 262144 QPs
 * made a run 100 ms, and the table code does not depend on its size), and the host memory
 * budget is 256 MiB so that a run stays within libFuzzer's RSS limit (the default budget
 * is held by unit test-bounds). QHCA_FUZZ_LIMITS=small|default|max fixes one.
 */
enum { FZ_SMALL, FZ_DEFAULT, FZ_MAX };

static const struct qhca_engine_config fz_limits[3] = {
	[FZ_SMALL] = {
		.db_pages = 4, .msix_vectors = 4, .max_pd = 4, .max_qp = 8, .max_qp_wr = 64,
		.max_cq = 8, .max_cqe = 64, .max_mr = 8, .max_mr_size_mb = 1, .max_srq = 2,
		.max_sge = 4, .max_inline = 64, .mtu = 1024,
		.mac = { 0x52, 0x54, 0, 0x51, 0x48, 1 },
	},
	[FZ_DEFAULT] = {
		.db_pages = 256, .msix_vectors = 5, .max_pd = 1024, .max_qp = 4096,
		.max_qp_wr = 32768, .max_cq = 1024, .max_cqe = 4194303, .max_mr = 4096,
		.max_mr_size_mb = 4096, .max_srq = 256, .max_sge = 30, .max_inline = 256,
		.mtu = 4096, .host_mem_mb = 256,
		.mac = { 0x52, 0x54, 0, 0x51, 0x48, 1 },
	},
	[FZ_MAX] = {
		.db_pages = QHCA_MAX_DB_PAGES, .msix_vectors = 64, .max_pd = 4096,
		.max_qp = 4096, .max_qp_wr = QHCA_MAX_QP_WR, .max_cq = 4096,
		.max_cqe = QHCA_MAX_CQE, .max_mr = 4096, .max_mr_size_mb = 1u << 20,
		.max_srq = 4096, .max_sge = QHCA_MAX_SGE,
		.max_inline = QHCA_MAX_INLINE, .mtu = 4096, .host_mem_mb = 256,
		.mac = { 0x52, 0x54, 0, 0x51, 0x48, 1 },
	},
};
#define fz_cfg	fz_limits[FZ_SMALL]	/* the MAC, the same in all three */

/*
 * The limits and the teaching trace of a run come from its input (its last byte), so that
 * a finding replays from its input alone: every target calls fz_input() first.
 */
static uint8_t fz_sel;

static void fz_input(const uint8_t *data, size_t size)
{
	fz_sel = size ? data[size - 1] : 0;
}

static const struct qhca_engine_config *fz_pick_limits(void)
{
	static int fixed = -2;

	if (fixed == -2) {
		const char *v = getenv("QHCA_FUZZ_LIMITS");

		fixed = !v ? -1 : !strcmp(v, "small") ? FZ_SMALL :
			!strcmp(v, "default") ? FZ_DEFAULT : !strcmp(v, "max") ? FZ_MAX : -1;
	}
	return &fz_limits[fixed >= 0 ? fixed : fz_sel % 3];
}

struct fz_state {
	struct qhca_engine e;
	uint32_t eq, pd, mr, frmr, mw[2], cq[2], qpn[4], srq;
	uint32_t xrcd, xsrq, xrc_tgt, xrc_ini;	/* XRC: QPNs 6 and 7, connected */
};

/* A doorbell's 64-bit value: the object it names and an index. */
static inline uint64_t fz_db(uint32_t num, uint32_t idx)
{
	return QHCA_FIELD_PREP(QHCA_DB_NUM_MASK, num) | QHCA_FIELD_PREP(QHCA_DB_INDEX_MASK, idx);
}

static struct qhca_pbl fz_pbl(unsigned slot, uint64_t buf, uint32_t pages)
{
	uint64_t list = FZ_PBL + slot * 0x400ull;
	uint32_t i;

	for (i = 0; i < pages; i++) {
		uint64_t a = buf + i * 4096ull;

		memcpy(fz_mem + (list - FZ_BASE) + i * 8, &a, 8);
	}
	return (struct qhca_pbl){ .addr = list, .npages = pages, .levels = 1 };
}

/* Take QP @qpn to RTS; a connected one towards @dest on this very device (loopback), in
 * RoCE v1 when @qpn is odd (both formats reach the transport). */
static void fz_to_rts(struct fz_state *s, uint32_t qpn, bool conn, uint32_t dest)
{
	struct qhca_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.mask = QHCA_QP_STATE | QHCA_QP_ACCESS_FLAGS | QHCA_QP_QKEY;
	a.state = QHCA_QPS_INIT;
	a.access_flags = QHCA_ACCESS_ALL;
	a.qkey = 0x1234;
	qhca_qp_modify(&s->e, qpn, &a);
	memset(&a, 0, sizeof(a));
	a.mask = QHCA_QP_STATE;
	a.state = QHCA_QPS_RTR;
	if (conn) {
		a.mask |= QHCA_QP_AV | QHCA_QP_PATH_MTU | QHCA_QP_DEST_QPN | QHCA_QP_RQ_PSN |
			  QHCA_QP_MAX_DEST_RD_ATOMIC;
		a.path_mtu = 3;
		a.dest_qpn = dest;
		a.max_dest_rd_atomic = 4;
		a.av.sgid[10] = a.av.sgid[11] = a.av.dgid[10] = a.av.dgid[11] = 0xff;
		a.av.sgid[15] = a.av.dgid[15] = 1;
		memcpy(a.av.dmac, fz_cfg.mac, 6);
		a.av.ib_flags = (qpn & 1) ? QHCA_AV_ROCE_V1 : 0;
	}
	qhca_qp_modify(&s->e, qpn, &a);
	memset(&a, 0, sizeof(a));
	a.mask = QHCA_QP_STATE | QHCA_QP_SQ_PSN | QHCA_QP_TIMEOUT | QHCA_QP_RETRY_CNT |
		 QHCA_QP_MAX_QP_RD_ATOMIC | QHCA_QP_RNR_RETRY;
	a.state = QHCA_QPS_RTS;
	a.timeout = 10;
	a.retry_cnt = 2;
	a.rnr_retry = 2;
	a.max_rd_atomic = 4;
	qhca_qp_modify(&s->e, qpn, &a);
}

/* An XRC domain with an XRC SRQ (number 1, its CQ cq[1]) and an XRC_INI QP (QPN 7)
 * connected to an XRC_TGT QP (QPN 6) of this device. */
static void fz_setup_xrc(struct fz_state *s)
{
	struct qhca_srq_create sc = { .pd = s->pd, .log2 = 3, .stride_log2 = 6, .cq = s->cq[1] };
	struct qhca_qp_create q = { .type = QHCA_QPT_XRC_TGT };

	s->xrcd = q.xrcd = sc.xrcd = qhca_obj_alloc(&s->e.xrcd, 0);
	sc.pbl = fz_pbl(10, FZ_RINGS + 0xa000, 1);
	qhca_srq_create(&s->e, &sc, &s->xsrq);
	qhca_qp_create(&s->e, &q, &s->xrc_tgt);
	q = (struct qhca_qp_create){ .type = QHCA_QPT_XRC_INI, .pd = s->pd, .send_cq = s->cq[0],
				     .sq_log2 = 3, .sq_stride_log2 = 8 };
	q.sq_pbl = fz_pbl(11, FZ_RINGS + 0xb000, 1);
	qhca_qp_create(&s->e, &q, &s->xrc_ini);
	fz_to_rts(s, s->xrc_tgt, true, s->xrc_ini);
	fz_to_rts(s, s->xrc_ini, true, s->xrc_tgt);
}

/* A device with objects in place; @deep adds CQs, an MR and QPs of each type in RTS. An
 * InfiniBand port (@link) is brought to ACTIVE with LID 1 as a subnet manager would. */
static void fz_setup_link(struct fz_state *s, int deep, uint8_t link);

static void fz_setup(struct fz_state *s, int deep)
{
	fz_setup_link(s, deep, QHCA_LINK_ROCE);
}

static void fz_ib_activate(struct fz_state *s)
{
	uint8_t mad[256] = { 1, 0x01, 1, 2 }, out[256];
	int state;

	for (state = 3; state <= 4; state++) {	/* ARMED, then ACTIVE */
		mad[16] = 0x00;
		mad[17] = 0x15;			/* PortInfo */
		mad[64 + 16 + 1] = 1;		/* LID 1 */
		mad[64 + 18 + 1] = 1;		/* SM LID 1 */
		mad[64 + 32] = (uint8_t)state;
		qhca_mad_ifc(&s->e, mad, out, false);
	}
}

static void fz_setup_link(struct fz_state *s, int deep, uint8_t link)
{
	struct qhca_cmd_create_eq eq = { .ring_addr = FZ_EQ, .log2_entries = 4, .vector = 0,
					 .flags = QHCA_EQ_ASYNC };
	static const uint8_t types[4] = { QHCA_QPT_RC, QHCA_QPT_UC, QHCA_QPT_UD, QHCA_QPT_GSI };
	int i;

	struct qhca_engine_config cfg;

	memset(fz_mem, 0, sizeof(fz_mem));
	fz_now = 1000;
	cfg = *fz_pick_limits();
	cfg.link = link;
	if (qhca_engine_init(&s->e, &cfg, &fz_ops, NULL))
		abort();
	qhca_engine_set_tracing(&s->e, (fz_sel / 3) & 1);
	if (link == QHCA_LINK_IB)
		fz_ib_activate(s);
	qhca_engine_reg_write(&s->e, QHCA_REG_ASQ_BASE_LO, (uint32_t)FZ_ASQ);
	qhca_engine_reg_write(&s->e, QHCA_REG_ACQ_BASE_LO, (uint32_t)FZ_ACQ);
	qhca_engine_reg_write(&s->e, QHCA_REG_AQ_DEPTH, 4);
	qhca_engine_reg_write(&s->e, QHCA_REG_CTRL, QHCA_CTRL_ENABLE);
	qhca_engine_set_link(&s->e, 1);
	if (!deep)
		return;
	qhca_eq_create(&s->e, &eq, &s->eq);
	s->pd = qhca_obj_alloc(&s->e.pd, 0);
	for (i = 0; i < 2; i++) {
		struct qhca_cq_create c = { .log2_entries = 4, .eq = s->eq };

		c.pbl = fz_pbl(i, FZ_RINGS + i * 0x1000ull, 1);
		qhca_cq_create(&s->e, &c, &s->cq[i]);
	}
	{
		struct qhca_mr_create m = { .pd = s->pd, .access = QHCA_ACCESS_MR_ALL,
					    .iova = 0x10000, .length = 0x8000 };

		m.pbl = fz_pbl(2, FZ_BUF, 8);
		qhca_mr_create(&s->e, &m, &s->mr);
	}
	{
		/* A fast-register region, free until a REG_MR WQE (key 0x200) registers it. */
		struct qhca_mr_create f = { .pd = s->pd, .flags = QHCA_MR_FAST_REG,
					    .pbl.npages = 8 };

		fz_pbl(24, FZ_BUF, 8);
		qhca_mr_create(&s->e, &f, &s->frmr);
		/* Memory windows of type 2 (key 0x300) and 1 (0x400), free until bound. */
		f = (struct qhca_mr_create){ .pd = s->pd, .flags = QHCA_MR_MW_TYPE2 };
		qhca_mr_create(&s->e, &f, &s->mw[0]);
		f.flags = QHCA_MR_MW_TYPE1;
		qhca_mr_create(&s->e, &f, &s->mw[1]);
	}
	for (i = 0; i < 4; i++) {
		struct qhca_qp_create q = { .pd = s->pd, .send_cq = s->cq[0], .recv_cq = s->cq[1],
					    .type = types[i], .sq_log2 = 3, .rq_log2 = 3,
					    .sq_stride_log2 = 8, .rq_stride_log2 = 6,
					    .max_inline = 64 };
		/* Each QP: its SQ page, then its RQ page (page lists take whole pages). */
		uint64_t sq = FZ_RINGS + 0x2000 + i * 0x2000ull, rq = sq + 0x1000;

		q.sq_pbl = fz_pbl(3 + 2 * i, sq, 1);
		q.rq_pbl = fz_pbl(4 + 2 * i, rq, 1);
		if (qhca_qp_create(&s->e, &q, &s->qpn[i]))
			continue;
		if (types[i] == QHCA_QPT_GSI)
			s->e.gsi_qpn = s->qpn[i];
		/* RC and UC: connected to itself, loopback */
		fz_to_rts(s, s->qpn[i], types[i] == QHCA_QPT_RC || types[i] == QHCA_QPT_UC,
			  s->qpn[i]);
	}
	fz_setup_xrc(s);
}

/* Fire every timer until none is left (bounded). */
static void fz_drain_timers(struct fz_state *s)
{
	int i;

	for (i = 0; i < 64; i++) {
		fz_now += 1000000000ull;
		qhca_engine_timer(&s->e);
	}
}

#endif
