// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Engine unit tests: registers, configuration checks, the admin queue (phase bit, wrap,
 * full completion ring, fatal errors, the work one doorbell does) and every admin command
 * with good and bad input.
 * The engine runs against a fake guest memory of 1 MiB at GUEST_BASE.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine_internal.h"
#include "unit.h"

#define GUEST_BASE	0x100000ull
#define GUEST_SIZE	(1u << 20)
#define ASQ		(GUEST_BASE + 0x0000)
#define ACQ		(GUEST_BASE + 0x1000)
#define OUTBUF		(GUEST_BASE + 0x2000)
#define DEPTH_LOG2	3
#define DEPTH		(1u << DEPTH_LOG2)

static uint8_t guest[GUEST_SIZE];
static unsigned irqs;
static unsigned guest_errors, host_errors;

static int fake_dma_read(void *opaque, uint64_t addr, void *buf, size_t len)
{
	if (addr < GUEST_BASE || addr - GUEST_BASE > GUEST_SIZE ||
	    len > GUEST_SIZE - (addr - GUEST_BASE))
		return -1;
	memcpy(buf, guest + (addr - GUEST_BASE), len);
	return 0;
}

static int fake_dma_write(void *opaque, uint64_t addr, const void *buf, size_t len)
{
	if (addr < GUEST_BASE || addr - GUEST_BASE > GUEST_SIZE ||
	    len > GUEST_SIZE - (addr - GUEST_BASE))
		return -1;
	memcpy(guest + (addr - GUEST_BASE), buf, len);
	return 0;
}

static unsigned irq_vec[8];
static uint8_t last_tx[QHCA_ETH_MAX_FRAME];
static size_t last_tx_len;
static unsigned tx_count;

static void fake_notify(void *opaque, unsigned vector)
{
	irqs++;
	if (vector < 8)
		irq_vec[vector]++;
}

static void fake_xmit(void *opaque, const void *frame, size_t len)
{
	memcpy(last_tx, frame, len);
	last_tx_len = len;
	tx_count++;
}

static void fake_log(void *opaque, enum qhca_log_level level, const char *func,
		     const char *msg)
{
	if (level == QHCA_LOG_GUEST)
		guest_errors++;
	if (level == QHCA_LOG_ERR)
		host_errors++;
	if (getenv("QHCA_TEST_VERBOSE"))
		fprintf(stderr, "    [%d] %s: %s\n", level, func, msg);
}

/* The engine's timer: @armed is what it asked for last (UINT64_MAX: nothing). */
static uint64_t fake_clock, armed = UINT64_MAX;

static uint64_t fake_now(void *opaque)
{
	return fake_clock;
}

static void fake_timer_arm(void *opaque, uint64_t deadline)
{
	armed = deadline;
}

static const struct qhca_engine_ops ops = {
	.dma_read = fake_dma_read,
	.dma_write = fake_dma_write,
	.notify = fake_notify,
	.xmit = fake_xmit,
	.now_ns = fake_now,
	.timer_arm = fake_timer_arm,
	.log = fake_log,
};

static struct qhca_engine_config default_cfg(void)
{
	struct qhca_engine_config c = {
		.db_pages = 8, .msix_vectors = 5, .max_pd = 4, .max_qp = 16, .max_qp_wr = 256,
		.max_cq = 16, .max_cqe = 1024, .max_mr = 16, .max_mr_size_mb = 64,
		.max_srq = 4, .max_sge = 4, .max_inline = 64, .mtu = 1024,
		.mac = { 0x52, 0x54, 0x00, 0x12, 0x34, 0x56 },
	};
	return c;
}

/* Driver-side state of the fake guest. */
static struct qhca_engine eng;
static uint32_t sq_tail, cq_head;
static uint16_t phase;
static uint16_t next_id;

static void start(const struct qhca_engine_config *cfg)
{
	memset(guest, 0, sizeof(guest));
	irqs = guest_errors = host_errors = tx_count = 0;
	memset(irq_vec, 0, sizeof(irq_vec));
	sq_tail = cq_head = 0;
	phase = QHCA_CQE_PHASE;
	fake_clock = 1000;
	armed = UINT64_MAX;
	CHECK_EQ(qhca_engine_init(&eng, cfg, &ops, NULL), 0);
	qhca_engine_reg_write(&eng, QHCA_REG_ASQ_BASE_LO, (uint32_t)ASQ);
	qhca_engine_reg_write(&eng, QHCA_REG_ASQ_BASE_HI, 0);
	qhca_engine_reg_write(&eng, QHCA_REG_ACQ_BASE_LO, (uint32_t)ACQ);
	qhca_engine_reg_write(&eng, QHCA_REG_ACQ_BASE_HI, 0);
	qhca_engine_reg_write(&eng, QHCA_REG_AQ_DEPTH, DEPTH_LOG2);
	qhca_engine_reg_write(&eng, QHCA_REG_CTRL, QHCA_CTRL_ENABLE);
	CHECK_EQ(qhca_engine_reg_read(&eng, QHCA_REG_STATUS), QHCA_STATUS_READY);
}

static void start_default(void)
{
	struct qhca_engine_config c = default_cfg();

	start(&c);
}

static void stop(void)
{
	qhca_engine_fini(&eng);
}

/* Queue a command without ringing the doorbell. */
static uint16_t queue_cmd(struct qhca_cmd *cmd)
{
	cmd->hdr.cmd_id = next_id++;
	memcpy(guest + (ASQ - GUEST_BASE) + sq_tail * QHCA_CMD_SIZE, cmd, sizeof(*cmd));
	sq_tail = (sq_tail + 1) % DEPTH;
	return cmd->hdr.cmd_id;
}

static struct qhca_cqe_admin *cqe_at(uint32_t i)
{
	return (struct qhca_cqe_admin *)(guest + (ACQ - GUEST_BASE) + i * 16);
}

/* Take the next completion; returns 0 if none is valid. */
static int take_cqe(struct qhca_cqe_admin *out)
{
	struct qhca_cqe_admin *c = cqe_at(cq_head);

	if ((c->flags & QHCA_CQE_PHASE) != phase)
		return 0;
	*out = *c;
	cq_head = (cq_head + 1) % DEPTH;
	if (!cq_head)
		phase ^= QHCA_CQE_PHASE;
	qhca_engine_reg_write(&eng, QHCA_REG_ACQ_HEAD, cq_head);
	return 1;
}

/* Submit one command and return its completion status (0xffff if none arrived). */
static uint16_t exec(struct qhca_cmd *cmd, uint32_t *r0, uint32_t *r1)
{
	struct qhca_cqe_admin c;
	uint16_t id = queue_cmd(cmd);

	qhca_engine_reg_write(&eng, QHCA_REG_ASQ_TAIL, sq_tail);
	if (!take_cqe(&c))
		return 0xffff;
	CHECK_EQ(c.cmd_id, id);
	if (r0)
		*r0 = c.result0;
	if (r1)
		*r1 = c.result1;
	return c.status;
}

static uint16_t exec_handle(uint8_t op, uint32_t handle, uint32_t *r0)
{
	struct qhca_cmd cmd = { .hdr = { .opcode = op, .len = sizeof(cmd.handle) } };

	cmd.handle.handle = handle;
	return exec(&cmd, r0, NULL);
}

static uint16_t exec_query(uint8_t op, uint64_t addr, uint32_t len, uint32_t port)
{
	struct qhca_cmd cmd = { .hdr = { .opcode = op, .len = sizeof(cmd.query) } };

	cmd.query.out_addr = addr;
	cmd.query.out_len = len;
	cmd.query.port = port;
	return exec(&cmd, NULL, NULL);
}

static uint16_t exec_create_uctx(uint32_t *handle, uint32_t *page)
{
	struct qhca_cmd cmd = { .hdr = { .opcode = QHCA_CMD_CREATE_UCTX } };

	return exec(&cmd, handle, page);
}

/* ---------------------------------------------------------------- tests */

static void test_identity_registers(void)
{
	start_default();
	CHECK_EQ(qhca_engine_reg_read(&eng, QHCA_REG_VERSION), QHCA_ABI_VERSION);
	CHECK_EQ(qhca_engine_reg_read(&eng, QHCA_REG_CAPS),
		 QHCA_CAP_ADMIN_PHASE | QHCA_CAP_ROCE_V2 | QHCA_CAP_ROCE_V1);
	CHECK_EQ(qhca_engine_reg_read(&eng, QHCA_REG_DB_PAGES), 8);
	CHECK_EQ(qhca_engine_reg_read(&eng, QHCA_REG_MSIX_VECTORS), 5);
	CHECK_EQ(qhca_engine_reg_read(&eng, QHCA_REG_ASQ_BASE_LO), (uint32_t)ASQ);
	CHECK_EQ(qhca_engine_reg_read(&eng, QHCA_REG_AQ_DEPTH), DEPTH_LOG2);
	/* Unknown registers read as zero and are reported as guest errors. */
	CHECK_EQ(qhca_engine_reg_read(&eng, 0xff0), 0);
	CHECK_EQ(guest_errors, 1);
	qhca_engine_reg_write(&eng, QHCA_REG_VERSION, 0x1234);
	CHECK_EQ(qhca_engine_reg_read(&eng, QHCA_REG_VERSION), QHCA_ABI_VERSION);
	stop();
}

static void test_config_check(void)
{
	struct qhca_engine_config c = default_cfg();
	char why[128];

	CHECK(qhca_engine_config_check(&c, why, sizeof(why)));
	c.db_pages = 3;
	CHECK(!qhca_engine_config_check(&c, why, sizeof(why)));
	CHECK(strstr(why, "db-pages") != NULL);
	c = default_cfg();
	c.mtu = 1500;
	CHECK(!qhca_engine_config_check(&c, why, sizeof(why)));
	c = default_cfg();
	c.mac[0] = 0x01;
	CHECK(!qhca_engine_config_check(&c, why, sizeof(why)));
	c = default_cfg();
	c.max_cqe = 0;
	CHECK(!qhca_engine_config_check(&c, why, sizeof(why)));
	c = default_cfg();
	c.max_qp = QHCA_MAX_OBJECTS + 1;
	CHECK(!qhca_engine_config_check(&c, why, sizeof(why)));
	c = default_cfg();
	c.msix_vectors = 2;
	CHECK(!qhca_engine_config_check(&c, why, sizeof(why)));
}

static void test_enable_rejects_bad_queue(void)
{
	struct qhca_engine_config c = default_cfg();
	static const struct { uint32_t asq, acq, depth; } bad[] = {
		{ 0x100800, 0x101000, 3 },	/* unaligned */
		{ 0, 0x101000, 3 },		/* zero base */
		{ 0x100000, 0x101000, 0 },	/* depth too small */
		{ 0x100000, 0x101000, 13 },	/* depth too large */
		{ 0x100000, 0x101000, 0xffffffff },
	};
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		CHECK_EQ(qhca_engine_init(&eng, &c, &ops, NULL), 0);
		irqs = 0;
		qhca_engine_reg_write(&eng, QHCA_REG_ASQ_BASE_LO, bad[i].asq);
		qhca_engine_reg_write(&eng, QHCA_REG_ACQ_BASE_LO, bad[i].acq);
		qhca_engine_reg_write(&eng, QHCA_REG_AQ_DEPTH, bad[i].depth);
		qhca_engine_reg_write(&eng, QHCA_REG_CTRL, QHCA_CTRL_ENABLE);
		CHECK_EQ(qhca_engine_reg_read(&eng, QHCA_REG_STATUS), QHCA_STATUS_FATAL);
		CHECK_EQ(qhca_engine_reg_read(&eng, QHCA_REG_ERROR), QHCA_ERR_AQ_CONFIG);
		CHECK_EQ(irqs, 1);
		/* A doorbell now does nothing. */
		qhca_engine_reg_write(&eng, QHCA_REG_ASQ_TAIL, 1);
		CHECK_EQ(eng.admin_cmds, 0);
		/* Reset clears the error. */
		qhca_engine_reg_write(&eng, QHCA_REG_CTRL, QHCA_CTRL_RESET);
		CHECK_EQ(qhca_engine_reg_read(&eng, QHCA_REG_STATUS), 0);
		CHECK_EQ(qhca_engine_reg_read(&eng, QHCA_REG_ERROR), 0);
		stop();
	}
}

static void test_nop_roundtrip(void)
{
	struct qhca_cmd cmd = { .hdr = { .opcode = QHCA_CMD_NOP } };

	start_default();
	CHECK_EQ(exec(&cmd, NULL, NULL), QHCA_ST_OK);
	CHECK_EQ(irqs, 1);
	CHECK_EQ(cqe_at(0)->sq_head, 1);
	/* Masking vector 0 suppresses the interrupt but not the completion. */
	qhca_engine_reg_write(&eng, QHCA_REG_INTR_MASK, 1);
	CHECK_EQ(exec(&cmd, NULL, NULL), QHCA_ST_OK);
	CHECK_EQ(irqs, 1);
	stop();
}

static void test_phase_wraps(void)
{
	unsigned int i;

	start_default();
	for (i = 0; i < 5 * DEPTH + 3; i++) {
		struct qhca_cmd cmd = { .hdr = { .opcode = QHCA_CMD_NOP } };

		CHECK_EQ(exec(&cmd, NULL, NULL), QHCA_ST_OK);
	}
	CHECK_EQ(eng.admin_cmds, 5 * DEPTH + 3);
	CHECK_EQ(eng.admin_errors, 0);
	stop();
}

static void test_batch_and_full_completion_ring(void)
{
	struct qhca_cqe_admin c;
	unsigned int i, n = 0;

	start_default();
	/* The SQ holds DEPTH - 1 commands; ring once for all of them. */
	for (i = 0; i < DEPTH - 1; i++) {
		struct qhca_cmd cmd = { .hdr = { .opcode = QHCA_CMD_NOP } };

		queue_cmd(&cmd);
	}
	qhca_engine_reg_write(&eng, QHCA_REG_ASQ_TAIL, sq_tail);
	CHECK_EQ(eng.admin_cmds, DEPTH - 1);
	CHECK_EQ(irqs, 1);	/* one interrupt for the batch */
	/* The CQ is now full (head still 0): the next commands wait. */
	for (i = 0; i < 3; i++) {
		struct qhca_cmd cmd = { .hdr = { .opcode = QHCA_CMD_NOP } };

		queue_cmd(&cmd);
	}
	qhca_engine_reg_write(&eng, QHCA_REG_ASQ_TAIL, sq_tail);
	CHECK_EQ(eng.admin_cmds, DEPTH - 1);
	/* Consuming completions (take_cqe rings ACQ_HEAD) lets the rest run. */
	while (take_cqe(&c)) {
		CHECK_EQ(c.status, QHCA_ST_OK);
		n++;
	}
	CHECK_EQ(n, DEPTH - 1 + 3);
	CHECK_EQ(eng.admin_cmds, DEPTH - 1 + 3);
	stop();
}

static void test_query_device(void)
{
	struct qhca_device_attr a;

	start_default();
	CHECK_EQ(exec_query(QHCA_CMD_QUERY_DEVICE, OUTBUF, sizeof(a), 0), QHCA_ST_OK);
	memcpy(&a, guest + (OUTBUF - GUEST_BASE), sizeof(a));
	CHECK_EQ(a.vendor_id, QHCA_PCI_VENDOR_ID);
	CHECK_EQ(a.vendor_part_id, QHCA_PCI_DEVICE_ID);
	CHECK_EQ(a.max_qp, 16);
	CHECK_EQ(a.max_pd, 4);
	CHECK_EQ(a.max_uctx, 7);
	CHECK_EQ(a.max_mr_size, 64ull << 20);
	CHECK_EQ(a.num_comp_vectors, 3);
	CHECK_EQ(a.node_guid, 0x505400fffe123456ull);
	/* Wrong length, wrong port, bad addresses. */
	CHECK_EQ(exec_query(QHCA_CMD_QUERY_DEVICE, OUTBUF, sizeof(a) - 1, 0), QHCA_ST_BAD_FIELD);
	CHECK_EQ(exec_query(QHCA_CMD_QUERY_DEVICE, OUTBUF, sizeof(a), 1), QHCA_ST_BAD_FIELD);
	CHECK_EQ(exec_query(QHCA_CMD_QUERY_DEVICE, 0, sizeof(a), 0), QHCA_ST_DMA_ERROR);
	CHECK_EQ(exec_query(QHCA_CMD_QUERY_DEVICE, 0xfffffffffffffff0ull, sizeof(a), 0),
		 QHCA_ST_DMA_ERROR);
	CHECK_EQ(exec_query(QHCA_CMD_QUERY_DEVICE, GUEST_BASE + GUEST_SIZE - 8, sizeof(a), 0),
		 QHCA_ST_DMA_ERROR);
	CHECK(guest_errors >= 3);
	/* The device still works. */
	CHECK_EQ(exec_query(QHCA_CMD_QUERY_DEVICE, OUTBUF, sizeof(a), 0), QHCA_ST_OK);
	stop();
}

static void test_query_port(void)
{
	struct qhca_port_attr p;

	start_default();
	CHECK_EQ(exec_query(QHCA_CMD_QUERY_PORT, OUTBUF, sizeof(p), 1), QHCA_ST_OK);
	memcpy(&p, guest + (OUTBUF - GUEST_BASE), sizeof(p));
	CHECK_EQ(p.state, 1);		/* no link yet: DOWN */
	CHECK_EQ(p.phys_state, 3);
	qhca_engine_set_link(&eng, true);
	CHECK_EQ(exec_query(QHCA_CMD_QUERY_PORT, OUTBUF, sizeof(p), 1), QHCA_ST_OK);
	memcpy(&p, guest + (OUTBUF - GUEST_BASE), sizeof(p));
	CHECK_EQ(p.state, 4);		/* ACTIVE */
	CHECK_EQ(p.phys_state, 5);
	CHECK_EQ(p.max_mtu, 3);	/* 1024 */
	CHECK_EQ(p.mac[5], 0x56);
	CHECK_EQ(p.pkey_tbl_len, 1);
	CHECK_EQ(exec_query(QHCA_CMD_QUERY_PORT, OUTBUF, sizeof(p), 0), QHCA_ST_BAD_FIELD);
	CHECK_EQ(exec_query(QHCA_CMD_QUERY_PORT, OUTBUF, sizeof(p), 2), QHCA_ST_BAD_FIELD);
	stop();
}

/* SET_MAC: the port answers at the new address (QUERY_PORT, RoCE receive filter); a
 * multicast or zero address and reserved bits are refused; a reset restores the property. */
static void test_set_mac(void)
{
	static const uint8_t mac[6] = { 0x02, 0x11, 0x22, 0x33, 0x44, 0xfe };
	struct qhca_cmd cmd = { .hdr = { .opcode = QHCA_CMD_SET_MAC,
					 .len = sizeof(struct qhca_cmd_set_mac) } };
	struct qhca_port_attr p;

	start_default();
	memcpy(cmd.set_mac.mac, mac, 6);
	CHECK_EQ(exec(&cmd, NULL, NULL), QHCA_ST_OK);
	CHECK_EQ(exec_query(QHCA_CMD_QUERY_PORT, OUTBUF, sizeof(p), 1), QHCA_ST_OK);
	memcpy(&p, guest + (OUTBUF - GUEST_BASE), sizeof(p));
	CHECK(!memcmp(p.mac, mac, 6));
	CHECK(!memcmp(eng.mac, mac, 6));
	cmd.set_mac.mac[0] = 0x01;	/* multicast */
	CHECK_EQ(exec(&cmd, NULL, NULL), QHCA_ST_BAD_FIELD);
	memset(cmd.set_mac.mac, 0, 6);
	CHECK_EQ(exec(&cmd, NULL, NULL), QHCA_ST_BAD_FIELD);
	memcpy(cmd.set_mac.mac, mac, 6);
	cmd.set_mac.rsvd = 1;
	CHECK_EQ(exec(&cmd, NULL, NULL), QHCA_ST_BAD_FIELD);
	CHECK(!memcmp(eng.mac, mac, 6));
	qhca_engine_reg_write(&eng, QHCA_REG_CTRL, QHCA_CTRL_RESET);
	CHECK(!memcmp(eng.mac, eng.cfg.mac, 6));
	stop();
}

static void test_uctx_and_pd_lifecycle(void)
{
	uint32_t uctx, page, pd, kpd, uctx2, page2;

	start_default();
	CHECK_EQ(exec_create_uctx(&uctx, &page), QHCA_ST_OK);
	CHECK(uctx != 0);
	CHECK_EQ(page, 1);
	CHECK_EQ(exec_create_uctx(&uctx2, &page2), QHCA_ST_OK);
	CHECK_EQ(page2, 2);
	CHECK_EQ(exec_handle(QHCA_CMD_CREATE_PD, uctx, &pd), QHCA_ST_OK);
	CHECK(pd != 0);
	CHECK_EQ(exec_handle(QHCA_CMD_CREATE_PD, QHCA_HANDLE_KERNEL, &kpd), QHCA_ST_OK);
	CHECK(kpd != pd);
	/* A context with a PD cannot go. */
	CHECK_EQ(exec_handle(QHCA_CMD_DESTROY_UCTX, uctx, NULL), QHCA_ST_BUSY);
	CHECK_EQ(exec_handle(QHCA_CMD_DESTROY_PD, pd, NULL), QHCA_ST_OK);
	CHECK_EQ(exec_handle(QHCA_CMD_DESTROY_PD, pd, NULL), QHCA_ST_BAD_HANDLE);
	CHECK_EQ(exec_handle(QHCA_CMD_DESTROY_UCTX, uctx, NULL), QHCA_ST_OK);
	CHECK_EQ(exec_handle(QHCA_CMD_DESTROY_UCTX, uctx, NULL), QHCA_ST_BAD_HANDLE);
	/* A PD on a destroyed context is refused. */
	CHECK_EQ(exec_handle(QHCA_CMD_CREATE_PD, uctx, NULL), QHCA_ST_BAD_HANDLE);
	/* A new context: the freed slot is reused last; the stale handle stays invalid. */
	CHECK_EQ(exec_create_uctx(&uctx, &page), QHCA_ST_OK);
	CHECK(page != 0 && page != page2);
	CHECK_EQ(exec_handle(QHCA_CMD_DESTROY_UCTX, uctx ^ (1u << 20), NULL),
		 QHCA_ST_BAD_HANDLE);
	/* Forged handles. */
	CHECK_EQ(exec_handle(QHCA_CMD_DESTROY_PD, 0, NULL), QHCA_ST_BAD_HANDLE);
	CHECK_EQ(exec_handle(QHCA_CMD_DESTROY_PD, 0xffffffff, NULL), QHCA_ST_BAD_HANDLE);
	CHECK_EQ(exec_handle(QHCA_CMD_DESTROY_PD, 5, NULL), QHCA_ST_BAD_HANDLE);
	stop();
}

static void test_resource_limits(void)
{
	uint32_t h, pd;
	int i;

	start_default();
	for (i = 0; i < 7; i++)
		CHECK_EQ(exec_create_uctx(&h, NULL), QHCA_ST_OK);
	CHECK_EQ(exec_create_uctx(&h, NULL), QHCA_ST_NO_RESOURCES);
	for (i = 0; i < 4; i++)
		CHECK_EQ(exec_handle(QHCA_CMD_CREATE_PD, 0, &pd), QHCA_ST_OK);
	CHECK_EQ(exec_handle(QHCA_CMD_CREATE_PD, 0, &pd), QHCA_ST_NO_RESOURCES);
	/* Reset frees everything and invalidates old handles. */
	qhca_engine_reg_write(&eng, QHCA_REG_CTRL, 0);
	qhca_engine_reg_write(&eng, QHCA_REG_CTRL, QHCA_CTRL_ENABLE);
	sq_tail = cq_head = 0;
	phase = QHCA_CQE_PHASE;
	memset(guest + (ACQ - GUEST_BASE), 0, DEPTH * 16);
	CHECK_EQ(exec_handle(QHCA_CMD_DESTROY_PD, pd, NULL), QHCA_ST_BAD_HANDLE);
	CHECK_EQ(exec_handle(QHCA_CMD_CREATE_PD, 0, &pd), QHCA_ST_OK);
	stop();
}

static void test_malformed_commands(void)
{
	struct qhca_cmd cmd;

	start_default();
	memset(&cmd, 0, sizeof(cmd));
	cmd.hdr.opcode = 0x7f;
	CHECK_EQ(exec(&cmd, NULL, NULL), QHCA_ST_BAD_OPCODE);
	cmd.hdr.opcode = 0xff;
	CHECK_EQ(exec(&cmd, NULL, NULL), QHCA_ST_BAD_OPCODE);
	memset(&cmd, 0, sizeof(cmd));
	cmd.hdr.opcode = QHCA_CMD_NOP;
	cmd.hdr.len = 8;
	CHECK_EQ(exec(&cmd, NULL, NULL), QHCA_ST_BAD_LENGTH);
	memset(&cmd, 0, sizeof(cmd));
	cmd.hdr.opcode = QHCA_CMD_CREATE_PD;
	cmd.hdr.len = 0xffff;
	CHECK_EQ(exec(&cmd, NULL, NULL), QHCA_ST_BAD_LENGTH);
	memset(&cmd, 0, sizeof(cmd));
	cmd.hdr.opcode = QHCA_CMD_NOP;
	cmd.hdr.flags = 1;
	CHECK_EQ(exec(&cmd, NULL, NULL), QHCA_ST_BAD_FIELD);
	memset(&cmd, 0, sizeof(cmd));
	cmd.hdr.opcode = QHCA_CMD_CREATE_PD;
	cmd.hdr.len = sizeof(cmd.handle);
	cmd.raw[40] = 1;	/* junk past the body */
	CHECK_EQ(exec(&cmd, NULL, NULL), QHCA_ST_BAD_FIELD);
	memset(&cmd, 0, sizeof(cmd));
	cmd.hdr.opcode = QHCA_CMD_CREATE_PD;
	cmd.hdr.len = sizeof(cmd.handle);
	cmd.handle.rsvd = 1;
	CHECK_EQ(exec(&cmd, NULL, NULL), QHCA_ST_BAD_FIELD);
	CHECK_EQ(eng.admin_errors, 7);
	CHECK_EQ(eng.pd.count, 0);
	memset(&cmd, 0, sizeof(cmd));
	cmd.hdr.opcode = QHCA_CMD_NOP;
	CHECK_EQ(exec(&cmd, NULL, NULL), QHCA_ST_OK);
	stop();
}

static void test_doorbells_past_ring_are_fatal(void)
{
	struct qhca_cmd cmd = { .hdr = { .opcode = QHCA_CMD_NOP } };

	start_default();
	qhca_engine_reg_write(&eng, QHCA_REG_ASQ_TAIL, DEPTH);
	CHECK_EQ(qhca_engine_reg_read(&eng, QHCA_REG_STATUS), QHCA_STATUS_FATAL);
	CHECK_EQ(qhca_engine_reg_read(&eng, QHCA_REG_ERROR), QHCA_ERR_AQ_TAIL);
	CHECK_EQ(exec(&cmd, NULL, NULL), 0xffff);	/* nothing runs */
	stop();

	start_default();
	qhca_engine_reg_write(&eng, QHCA_REG_ACQ_HEAD, 0xffffffff);
	CHECK_EQ(qhca_engine_reg_read(&eng, QHCA_REG_ERROR), QHCA_ERR_AQ_HEAD);
	stop();

	/* The ring itself unreadable: a fatal DMA error, not a crash. */
	start_default();
	qhca_engine_reg_write(&eng, QHCA_REG_CTRL, 0);
	qhca_engine_reg_write(&eng, QHCA_REG_ASQ_BASE_LO, 0);
	qhca_engine_reg_write(&eng, QHCA_REG_ASQ_BASE_HI, 0x10);
	qhca_engine_reg_write(&eng, QHCA_REG_CTRL, QHCA_CTRL_ENABLE);
	CHECK_EQ(qhca_engine_reg_read(&eng, QHCA_REG_STATUS), QHCA_STATUS_READY);
	qhca_engine_reg_write(&eng, QHCA_REG_ASQ_TAIL, 1);
	CHECK_EQ(qhca_engine_reg_read(&eng, QHCA_REG_ERROR), QHCA_ERR_DMA);
	stop();
}

static void test_config_locked_while_enabled(void)
{
	start_default();
	qhca_engine_reg_write(&eng, QHCA_REG_ASQ_BASE_LO, 0x200000);
	qhca_engine_reg_write(&eng, QHCA_REG_AQ_DEPTH, 5);
	CHECK_EQ(qhca_engine_reg_read(&eng, QHCA_REG_ASQ_BASE_LO), (uint32_t)ASQ);
	CHECK_EQ(qhca_engine_reg_read(&eng, QHCA_REG_AQ_DEPTH), DEPTH_LOG2);
	CHECK_EQ(guest_errors, 2);
	/* Doorbell pages without queues are logged, not fatal. */
	qhca_engine_db_write(&eng, 3 * QHCA_DB_PAGE_SIZE + QHCA_DB_SQ, 0x1234, 8);
	CHECK_EQ(qhca_engine_reg_read(&eng, QHCA_REG_STATUS), QHCA_STATUS_READY);
	stop();
}

static void test_obj_table(void)
{
	struct qhca_obj_table t;
	uint32_t a, b, c, i;

	CHECK_EQ(qhca_obj_table_init(&t, 3), 0);
	a = qhca_obj_alloc(&t, 7);
	b = qhca_obj_alloc(&t, 8);
	CHECK(a && b && a != b);
	CHECK_EQ(t.owner[qhca_obj_lookup(&t, a)], 7);
	CHECK_EQ(qhca_obj_lookup(&t, a), 0);
	/* Holders: counted per object, gone with it, never below zero. */
	qhca_obj_hold(&t, a);
	qhca_obj_hold(&t, a);
	CHECK_EQ(qhca_obj_users(&t, a), 2);
	qhca_obj_unhold(&t, a);
	CHECK_EQ(qhca_obj_users(&t, a), 1);
	CHECK_EQ(qhca_obj_users(&t, b), 0);
	qhca_obj_hold(&t, 0);	/* the kernel's handle 0 is no object */
	qhca_obj_free(&t, a);
	CHECK_EQ(qhca_obj_lookup(&t, a), -1);
	CHECK_EQ(qhca_obj_users(&t, a), 0);
	qhca_obj_free(&t, a);	/* double free is harmless */
	CHECK_EQ(t.count, 1);
	/* A freed slot is reused last: the never used third slot comes first. */
	c = qhca_obj_alloc(&t, 9);
	CHECK_EQ(qhca_obj_lookup(&t, c), 2);
	a = qhca_obj_alloc(&t, 7);
	CHECK_EQ(qhca_obj_lookup(&t, a), 0);
	CHECK_EQ(qhca_obj_alloc(&t, 9), 0);	/* full */
	/* Many cycles through one slot: every stale handle stays refused. */
	for (i = 0; i < 100; i++) {
		uint32_t old = c;

		qhca_obj_free(&t, c);
		c = qhca_obj_alloc(&t, 9);
		CHECK(c != old);
		CHECK_EQ(qhca_obj_lookup(&t, old), -1);
	}
	qhca_obj_table_fini(&t);
	CHECK_EQ(qhca_obj_table_init(&t, QHCA_MAX_OBJECTS + 1), -1);
}

/* ---------------------------------------------------------------- event queues */
#define EQ_RING		(GUEST_BASE + 0x4000)

static uint16_t exec_create_eq(uint64_t ring, uint32_t log2, uint16_t vector, uint16_t flags,
			       uint32_t *handle)
{
	struct qhca_cmd cmd = { .hdr = { .opcode = QHCA_CMD_CREATE_EQ,
					 .len = sizeof(cmd.create_eq) } };

	cmd.create_eq.ring_addr = ring;
	cmd.create_eq.log2_entries = log2;
	cmd.create_eq.vector = vector;
	cmd.create_eq.flags = flags;
	return exec(&cmd, handle, NULL);
}

static struct qhca_eqe *eqe_at(unsigned i)
{
	return (struct qhca_eqe *)(guest + (EQ_RING - GUEST_BASE) + i * sizeof(struct qhca_eqe));
}

static void eq_doorbell(uint32_t handle, uint32_t ci)
{
	qhca_engine_db_write(&eng, QHCA_DB_EQ, QHCA_FIELD_PREP(QHCA_DB_INDEX_MASK, ci) |
			     QHCA_FIELD_PREP(QHCA_DB_NUM_MASK, handle), 8);
}

static void test_eq_events(void)
{
	uint32_t eq, eq2;
	unsigned before;

	start_default();
	CHECK_EQ(exec_create_eq(EQ_RING, 2, 0, QHCA_EQ_ASYNC, &eq), QHCA_ST_OK);
	CHECK_EQ(exec_create_eq(EQ_RING + 0x1000, 2, 0, QHCA_EQ_ASYNC, &eq2), QHCA_ST_BUSY);
	before = irq_vec[0];
	qhca_engine_set_link(&eng, true);
	CHECK_EQ(eqe_at(0)->type, QHCA_EVENT_PORT_ACTIVE);
	CHECK_EQ(eqe_at(0)->handle, 1);
	CHECK_EQ(eqe_at(0)->flags, QHCA_EQE_PHASE);
	CHECK_EQ(irq_vec[0], before + 1);
	qhca_engine_set_link(&eng, true);	/* no change, no event */
	CHECK_EQ(eqe_at(1)->flags, 0);
	qhca_engine_set_link(&eng, false);
	qhca_engine_set_link(&eng, true);
	qhca_engine_set_link(&eng, false);	/* fourth event fills the ring */
	CHECK_EQ(eqe_at(3)->type, QHCA_EVENT_PORT_DOWN);
	qhca_engine_set_link(&eng, true);	/* dropped: no room */
	CHECK_EQ(eng.cnt.eq_overflows, 1);
	CHECK_EQ(eqe_at(0)->type, QHCA_EVENT_PORT_ACTIVE);
	CHECK_EQ(eqe_at(0)->flags, QHCA_EQE_PHASE);	/* not overwritten */
	/* A consumer index past the producer is refused. */
	eq_doorbell(eq, 9);
	CHECK_EQ(eng.eq[0].ci, 0);
	eq_doorbell(eq, 4);
	qhca_engine_set_link(&eng, false);
	/* Second pass: phase 0, an overflow report first, then the event. */
	CHECK_EQ(eqe_at(0)->type, QHCA_EVENT_EQ_OVERFLOW);
	CHECK_EQ(eqe_at(0)->handle, eq);
	CHECK_EQ(eqe_at(0)->flags, 0);
	CHECK_EQ(eqe_at(1)->type, QHCA_EVENT_PORT_DOWN);
	CHECK_EQ(eqe_at(1)->flags, 0);
	CHECK_EQ(exec_handle(QHCA_CMD_DESTROY_EQ, eq, NULL), QHCA_ST_OK);
	CHECK_EQ(exec_handle(QHCA_CMD_DESTROY_EQ, eq, NULL), QHCA_ST_BAD_HANDLE);
	/* Without an async EQ, port events go nowhere, and nothing breaks. */
	qhca_engine_set_link(&eng, true);
	CHECK_EQ(exec_create_eq(EQ_RING, 2, 0, QHCA_EQ_ASYNC, &eq2), QHCA_ST_OK);
	stop();
}

static void test_eq_rejects_bad_parameters(void)
{
	uint32_t eq;

	start_default();
	CHECK_EQ(exec_create_eq(EQ_RING + 8, 2, 0, 0, &eq), QHCA_ST_BAD_FIELD);
	CHECK_EQ(exec_create_eq(0, 2, 0, 0, &eq), QHCA_ST_BAD_FIELD);
	CHECK_EQ(exec_create_eq(EQ_RING, 0, 0, 0, &eq), QHCA_ST_BAD_FIELD);
	CHECK_EQ(exec_create_eq(EQ_RING, QHCA_EQ_MAX_LOG2 + 1, 0, 0, &eq), QHCA_ST_BAD_FIELD);
	CHECK_EQ(exec_create_eq(EQ_RING, 2, 5, 0, &eq), QHCA_ST_BAD_FIELD);	/* 5 vectors */
	CHECK_EQ(exec_create_eq(EQ_RING, 2, 0, 0x80, &eq), QHCA_ST_BAD_FIELD);
	CHECK_EQ(exec_create_eq(0xfffffffffffff000ull, 12, 0, 0, &eq), QHCA_ST_BAD_FIELD);
	/* A ring outside guest memory is accepted but each event write fails cleanly, as
	 * the guest's error: nothing reaches the host's log. */
	CHECK_EQ(exec_create_eq(0x7000000000ull, 2, 1, QHCA_EQ_ASYNC, &eq), QHCA_ST_OK);
	guest_errors = 0;
	qhca_engine_set_link(&eng, true);
	CHECK_EQ(irq_vec[1], 0);
	CHECK(guest_errors > 0);
	CHECK_EQ(host_errors, 0);
	eq_doorbell(0xdead, 1);	/* bad handle: logged */
	CHECK(guest_errors > 0);
	stop();
}

/* ---------------------------------------------------------------- Ethernet function */
#define TX_RING		(GUEST_BASE + 0x5000)
#define RX_RING		(GUEST_BASE + 0x6000)
#define BUFS		(GUEST_BASE + 0x10000)

static uint16_t exec_eth_start(uint64_t tx, uint64_t rx, uint32_t log2, uint16_t vector)
{
	struct qhca_cmd cmd = { .hdr = { .opcode = QHCA_CMD_ETH_START,
					 .len = sizeof(cmd.eth_start) } };

	cmd.eth_start.tx_ring = tx;
	cmd.eth_start.rx_ring = rx;
	cmd.eth_start.tx_log2 = log2;
	cmd.eth_start.rx_log2 = log2;
	cmd.eth_start.vector = vector;
	return exec(&cmd, NULL, NULL);
}

static struct qhca_eth_desc *desc(uint64_t ring, unsigned i)
{
	return (struct qhca_eth_desc *)(guest + (ring - GUEST_BASE) + i * 16);
}

static void test_eth_transmit(void)
{
	unsigned i;

	start_default();
	CHECK_EQ(exec_eth_start(TX_RING, RX_RING, 2, 1), QHCA_ST_OK);
	CHECK_EQ(exec_eth_start(TX_RING, RX_RING, 2, 1), QHCA_ST_BAD_STATE);
	qhca_engine_set_link(&eng, true);
	for (i = 0; i < 60; i++)
		guest[BUFS - GUEST_BASE + i] = (uint8_t)(i * 7);
	*desc(TX_RING, 0) = (struct qhca_eth_desc){ .addr = BUFS, .len = 60 };
	*desc(TX_RING, 1) = (struct qhca_eth_desc){ .addr = BUFS, .len = 5 };	/* runt */
	*desc(TX_RING, 2) = (struct qhca_eth_desc){ .addr = 0x10, .len = 60 };	/* unbacked */
	qhca_engine_db_write(&eng, QHCA_DB_ETH_TX, 3, 4);
	CHECK_EQ(tx_count, 1);
	CHECK_EQ(last_tx_len, 60);
	CHECK(!memcmp(last_tx, guest + (BUFS - GUEST_BASE), 60));
	CHECK_EQ(desc(TX_RING, 0)->flags, QHCA_ETH_DESC_DONE);
	CHECK_EQ(desc(TX_RING, 1)->flags, QHCA_ETH_DESC_DONE | QHCA_ETH_DESC_ERROR);
	CHECK_EQ(desc(TX_RING, 2)->flags, QHCA_ETH_DESC_DONE | QHCA_ETH_DESC_ERROR);
	CHECK_EQ(eng.cnt.eth_tx_errors, 2);
	CHECK_EQ(irq_vec[1], 1);
	/* A producer index more than a ring ahead is ignored. */
	qhca_engine_db_write(&eng, QHCA_DB_ETH_TX, 100, 4);
	CHECK_EQ(tx_count, 1);
	/* Link down: the frame is dropped and counted, the descriptor still completes. */
	qhca_engine_set_link(&eng, false);
	*desc(TX_RING, 3) = (struct qhca_eth_desc){ .addr = BUFS, .len = 60 };
	qhca_engine_db_write(&eng, QHCA_DB_ETH_TX, 4, 4);
	CHECK_EQ(tx_count, 1);
	CHECK_EQ(eng.cnt.eth_tx_link_down, 1);
	CHECK_EQ(desc(TX_RING, 3)->flags, QHCA_ETH_DESC_DONE);
	/* Wrap around the 4-entry ring. */
	qhca_engine_set_link(&eng, true);
	*desc(TX_RING, 0) = (struct qhca_eth_desc){ .addr = BUFS, .len = 64 };
	qhca_engine_db_write(&eng, QHCA_DB_ETH_TX, 5, 4);
	CHECK_EQ(tx_count, 2);
	CHECK_EQ(last_tx_len, 64);
	stop();
}

static void test_eth_receive(void)
{
	uint8_t frame[3000];

	memset(frame, 0xab, sizeof(frame));
	start_default();
	qhca_engine_receive(&eng, frame, 100);
	CHECK_EQ(eng.cnt.eth_rx_stopped, 1);
	CHECK_EQ(exec_eth_start(TX_RING, RX_RING, 2, 2), QHCA_ST_OK);
	qhca_engine_receive(&eng, frame, 100);
	CHECK_EQ(eng.cnt.eth_rx_no_buffer, 1);
	*desc(RX_RING, 0) = (struct qhca_eth_desc){ .addr = BUFS, .len = 2048 };
	*desc(RX_RING, 1) = (struct qhca_eth_desc){ .addr = BUFS + 4096, .len = 2048 };
	qhca_engine_db_write(&eng, QHCA_DB_ETH_RX, 2, 4);
	qhca_engine_receive(&eng, frame, 100);
	CHECK_EQ(desc(RX_RING, 0)->len, 100);
	CHECK_EQ(desc(RX_RING, 0)->flags, QHCA_ETH_DESC_DONE);
	CHECK_EQ(guest[BUFS - GUEST_BASE + 99], 0xab);
	CHECK_EQ(guest[BUFS - GUEST_BASE + 100], 0);
	CHECK_EQ(irq_vec[2], 1);
	/* Too long for the posted buffer: dropped, the buffer stays for the next frame. */
	qhca_engine_receive(&eng, frame, 3000);
	CHECK_EQ(eng.cnt.eth_rx_too_long, 1);
	CHECK_EQ(desc(RX_RING, 1)->flags, 0);
	qhca_engine_receive(&eng, frame, 1500);
	CHECK_EQ(desc(RX_RING, 1)->len, 1500);
	CHECK_EQ(eng.cnt.eth_rx_frames, 2);
	qhca_engine_receive(&eng, frame, 60);
	CHECK_EQ(eng.cnt.eth_rx_no_buffer, 2);
	/* An RX producer past the ring is ignored; a stop makes doorbells guest errors. */
	qhca_engine_db_write(&eng, QHCA_DB_ETH_RX, 77, 4);
	CHECK_EQ(eng.eth.rx_pi, 2);
	stop();
}

static void test_eth_start_validation(void)
{
	struct qhca_cmd cmd = { .hdr = { .opcode = QHCA_CMD_ETH_STOP } };

	start_default();
	CHECK_EQ(exec_eth_start(TX_RING + 16, RX_RING, 2, 1), QHCA_ST_BAD_FIELD);
	CHECK_EQ(exec_eth_start(TX_RING, 0, 2, 1), QHCA_ST_BAD_FIELD);
	CHECK_EQ(exec_eth_start(TX_RING, RX_RING, 0, 1), QHCA_ST_BAD_FIELD);
	CHECK_EQ(exec_eth_start(TX_RING, RX_RING, 13, 1), QHCA_ST_BAD_FIELD);
	CHECK_EQ(exec_eth_start(TX_RING, RX_RING, 2, 9), QHCA_ST_BAD_FIELD);
	qhca_engine_db_write(&eng, QHCA_DB_ETH_TX, 1, 4);	/* not started: ignored */
	CHECK_EQ(tx_count, 0);
	CHECK_EQ(exec_eth_start(TX_RING, RX_RING, 2, 1), QHCA_ST_OK);
	CHECK_EQ(exec(&cmd, NULL, NULL), QHCA_ST_OK);
	CHECK_EQ(exec_eth_start(TX_RING, RX_RING, 2, 1), QHCA_ST_OK);
	/* Doorbells on a user page or at an unknown offset are guest errors. */
	guest_errors = 0;
	qhca_engine_db_write(&eng, QHCA_DB_PAGE_SIZE + QHCA_DB_ETH_TX, 1, 4);
	qhca_engine_db_write(&eng, 0x800, 1, 8);
	CHECK_EQ(guest_errors, 2);
	CHECK_EQ(tx_count, 0);
	stop();
}

/* ---------------------------------------------------------------- work per doorbell */
/*
 * One doorbell runs a bounded piece of the admin queue (admin.c: 64 commands or 16 MiB
 * moved, whichever comes first); the engine asks for its timer at once and goes on from
 * there, after the platform has had its turn.
 */
#define ADMIN_BUDGET	64
#define BIG_LOG2	QHCA_AQ_DEPTH_MAX_LOG2
#define BIG		(1u << BIG_LOG2)	/* 4096 commands: 4095 in one doorbell */
#define BIG_ASQ		(GUEST_BASE + 0x40000)	/* 256 KiB */
#define BIG_ACQ		(GUEST_BASE + 0x80000)	/* 64 KiB */

static void start_big(void)
{
	struct qhca_engine_config c = default_cfg();

	memset(guest, 0, sizeof(guest));
	irqs = guest_errors = host_errors = 0;
	fake_clock = 1000;
	armed = UINT64_MAX;
	CHECK_EQ(qhca_engine_init(&eng, &c, &ops, NULL), 0);
	qhca_engine_reg_write(&eng, QHCA_REG_ASQ_BASE_LO, (uint32_t)BIG_ASQ);
	qhca_engine_reg_write(&eng, QHCA_REG_ACQ_BASE_LO, (uint32_t)BIG_ACQ);
	qhca_engine_reg_write(&eng, QHCA_REG_AQ_DEPTH, BIG_LOG2);
	qhca_engine_reg_write(&eng, QHCA_REG_CTRL, QHCA_CTRL_ENABLE);
	CHECK_EQ(qhca_engine_reg_read(&eng, QHCA_REG_STATUS), QHCA_STATUS_READY);
}

/* A NOP with id @id in slot @slot of the big ring. */
static void big_nop(uint32_t slot, uint16_t id)
{
	struct qhca_cmd cmd = { .hdr = { .opcode = QHCA_CMD_NOP, .cmd_id = id } };

	memcpy(guest + (BIG_ASQ - GUEST_BASE) + (size_t)slot * QHCA_CMD_SIZE, &cmd, sizeof(cmd));
}

static const struct qhca_cqe_admin *big_cqe(uint32_t slot)
{
	return (const struct qhca_cqe_admin *)(guest + (BIG_ACQ - GUEST_BASE) + slot * 16);
}

/* Completions [first, first + n) of the big ring: ids from @id on, in order, phase @ph. */
static unsigned big_bad_cqes(uint32_t first, uint32_t n, uint16_t id, uint16_t ph)
{
	unsigned bad = 0;
	uint32_t i;

	for (i = 0; i < n; i++) {
		const struct qhca_cqe_admin *c = big_cqe((first + i) % BIG);

		if (c->cmd_id != (uint16_t)(id + i) || c->status != QHCA_ST_OK ||
		    c->sq_head != (first + i + 1) % BIG || (c->flags & QHCA_CQE_PHASE) != ph)
			bad++;
	}
	return bad;
}

/* The platform's side of the timer: fire it while it is armed, each time checking that a
 * callback does no more than the budget. Returns how many times it fired. */
static unsigned run_timer(void)
{
	unsigned n = 0;

	while (armed != UINT64_MAX && n < 100000) {
		uint64_t cmds = eng.admin_cmds;

		if (armed > fake_clock)
			fake_clock = armed;
		armed = UINT64_MAX;
		qhca_engine_timer(&eng);
		CHECK(eng.admin_cmds - cmds <= ADMIN_BUDGET);
		n++;
	}
	return n;
}

static void test_admin_work_per_doorbell(void)
{
	uint32_t i;

	start_big();
	for (i = 0; i < BIG - 1; i++)
		big_nop(i, (uint16_t)i);
	qhca_engine_reg_write(&eng, QHCA_REG_ASQ_TAIL, 1000);
	CHECK_EQ(eng.admin_cmds, ADMIN_BUDGET);
	CHECK_EQ(irqs, 1);			/* the piece done is reported at once */
	CHECK(armed <= fake_clock);		/* and the rest goes on at once */
	CHECK_EQ(big_bad_cqes(0, ADMIN_BUDGET, 0, QHCA_CQE_PHASE), 0);
	CHECK((big_cqe(ADMIN_BUDGET)->flags & QHCA_CQE_PHASE) == 0);	/* not yet written */
	/* Doorbells while work is pending start no second run, and the new tail is kept. */
	qhca_engine_reg_write(&eng, QHCA_REG_ASQ_TAIL, BIG - 1);
	qhca_engine_reg_write(&eng, QHCA_REG_ACQ_HEAD, 0);
	CHECK_EQ(eng.admin_cmds, ADMIN_BUDGET);
	/* The timer does the rest, a budget at a time: 4095 commands in 64 pieces. */
	CHECK_EQ(run_timer(), (BIG - 1 + ADMIN_BUDGET - 1) / ADMIN_BUDGET - 1);
	CHECK_EQ(eng.admin_cmds, BIG - 1);
	CHECK_EQ(eng.admin_errors, 0);
	CHECK_EQ(big_bad_cqes(0, BIG - 1, 0, QHCA_CQE_PHASE), 0);
	CHECK_EQ(irqs, (BIG - 1 + ADMIN_BUDGET - 1) / ADMIN_BUDGET);
	/* Around both rings: the last slot of the first pass, then the other phase. */
	qhca_engine_reg_write(&eng, QHCA_REG_ACQ_HEAD, BIG - 1);
	for (i = 0; i < 200; i++)
		big_nop((BIG - 1 + i) % BIG, (uint16_t)(BIG - 1 + i));
	qhca_engine_reg_write(&eng, QHCA_REG_ASQ_TAIL, (BIG - 1 + 200) % BIG);
	CHECK_EQ(eng.admin_cmds, BIG - 1 + ADMIN_BUDGET);
	run_timer();
	CHECK_EQ(eng.admin_cmds, BIG - 1 + 200);
	CHECK_EQ(big_bad_cqes(BIG - 1, 1, BIG - 1, QHCA_CQE_PHASE), 0);
	CHECK_EQ(big_bad_cqes(0, 199, BIG, 0), 0);
	CHECK_EQ(armed, UINT64_MAX);
	stop();
}

/* Disable or reset while work is pending: the work is gone, the timer cancelled. */
static void test_admin_reset_while_pending(void)
{
	uint32_t i;

	start_big();
	for (i = 0; i < BIG - 1; i++)
		big_nop(i, (uint16_t)i);
	qhca_engine_reg_write(&eng, QHCA_REG_ASQ_TAIL, BIG - 1);
	CHECK_EQ(eng.admin_cmds, ADMIN_BUDGET);
	CHECK(armed <= fake_clock);
	qhca_engine_reg_write(&eng, QHCA_REG_CTRL, 0);	/* disable */
	CHECK_EQ(armed, UINT64_MAX);
	CHECK(!eng.admin_pending);
	/* Enabled again, the rings start over from slot 0, and a callback that was already on
	 * its way finds nothing of the old work to go on with. */
	memset(guest + (BIG_ACQ - GUEST_BASE), 0, BIG * 16);
	qhca_engine_reg_write(&eng, QHCA_REG_CTRL, QHCA_CTRL_ENABLE);
	qhca_engine_timer(&eng);
	CHECK_EQ(eng.admin_cmds, ADMIN_BUDGET);
	qhca_engine_reg_write(&eng, QHCA_REG_ASQ_TAIL, 10);
	CHECK_EQ(eng.admin_cmds, ADMIN_BUDGET + 10);
	CHECK_EQ(big_bad_cqes(0, 10, 0, QHCA_CQE_PHASE), 0);
	CHECK_EQ(armed, UINT64_MAX);
	qhca_engine_reg_write(&eng, QHCA_REG_ASQ_TAIL, BIG - 1);
	CHECK_EQ(eng.admin_cmds, 2 * ADMIN_BUDGET + 10);
	CHECK(armed <= fake_clock);
	qhca_engine_reg_write(&eng, QHCA_REG_CTRL, QHCA_CTRL_RESET);
	CHECK_EQ(armed, UINT64_MAX);
	CHECK(!eng.admin_pending);
	CHECK_EQ(qhca_engine_reg_read(&eng, QHCA_REG_STATUS), 0);
	stop();
}

/*
 * Bytes count too: a RESIZE_SRQ that moves a full SRQ of 32768 WQEs of 4 KiB (of each the
 * 528 bytes the device reads: header and 32 SGEs; 17 MiB read, 17 MiB written; every page
 * of the ring is the same guest page) ends its doorbell's work.
 */
#define SRQ_DIR		(GUEST_BASE + 0x10000)	/* 64 entries: the list page */
#define SRQ_LIST	(GUEST_BASE + 0x11000)	/* 512 entries: the page */
#define SRQ_PAGE	(GUEST_BASE + 0x20000)

static void test_admin_bytes_per_doorbell(void)
{
	struct qhca_engine_config c = default_cfg();
	struct qhca_cmd cmd = { .hdr = { .opcode = QHCA_CMD_CREATE_SRQ, .len = sizeof(cmd.obj) } };
	struct qhca_cmd nop = { .hdr = { .opcode = QHCA_CMD_NOP } };
	struct qhca_pbl pbl = { .addr = SRQ_DIR, .npages = 32768, .levels = 2 };
	struct qhca_srq_create sc = { .log2 = 15, .stride_log2 = 12, .pbl = pbl };
	struct qhca_srq_resize rs = { .log2 = 15, .stride_log2 = 12, .pbl = pbl };
	struct qhca_cqe_admin cqe;
	uint32_t pd, srqn, i;
	uint16_t id;
	uint64_t cmds, bytes;

	c.max_qp_wr = 32768;
	c.max_sge = 32;
	start(&c);
	CHECK_EQ(exec_handle(QHCA_CMD_CREATE_PD, QHCA_HANDLE_KERNEL, &pd), QHCA_ST_OK);
	for (i = 0; i < 64; i++)
		memcpy(guest + (SRQ_DIR - GUEST_BASE) + i * 8, &(uint64_t){ SRQ_LIST }, 8);
	for (i = 0; i < 512; i++)
		memcpy(guest + (SRQ_LIST - GUEST_BASE) + i * 8, &(uint64_t){ SRQ_PAGE }, 8);
	sc.pd = pd;
	memcpy(guest + (OUTBUF - GUEST_BASE), &sc, sizeof(sc));
	cmd.obj.in_addr = OUTBUF;
	cmd.obj.in_len = sizeof(sc);
	CHECK_EQ(exec(&cmd, &srqn, NULL), QHCA_ST_OK);
	qhca_engine_db_write(&eng, QHCA_DB_SRQ, (32768ull << 32) | srqn, 8);	/* full */
	memcpy(guest + (OUTBUF - GUEST_BASE), &rs, sizeof(rs));
	cmd.hdr.opcode = QHCA_CMD_RESIZE_SRQ;
	cmd.obj.handle = srqn;
	cmd.obj.in_len = sizeof(rs);
	cmds = eng.admin_cmds;
	bytes = eng.dma_bytes;
	id = queue_cmd(&cmd);
	for (i = 0; i < 3; i++)
		queue_cmd(&nop);
	qhca_engine_reg_write(&eng, QHCA_REG_ASQ_TAIL, sq_tail);
	CHECK_EQ(eng.admin_cmds, cmds + 1);	/* 34 MiB moved: the NOPs wait */
	/* what the device reads of each WQE, not its 4 KiB: 34.6 MiB, not 256 */
	CHECK(eng.dma_bytes - bytes < (40u << 20));
	CHECK(armed <= fake_clock);
	CHECK_EQ(run_timer(), 1);
	CHECK_EQ(eng.admin_cmds, cmds + 4);
	for (i = 0; i < 4; i++) {
		CHECK(take_cqe(&cqe));
		CHECK_EQ(cqe.cmd_id, (uint16_t)(id + i));
		CHECK_EQ(cqe.status, QHCA_ST_OK);
	}
	stop();
}

/*
 * QUERY_SRQ through the admin queue, as the driver sends it: the answer is exactly the 16
 * bytes of struct qhca_srq_attr at out_addr (no more, no less), its reserved bytes zero;
 * an unknown handle, a wrong out_len, input given or an answer address outside the guest
 * are refused, and a refused query writes nothing.
 */
static void test_query_srq_admin(void)
{
	struct qhca_cmd cmd = { .hdr = { .opcode = QHCA_CMD_CREATE_SRQ, .len = sizeof(cmd.obj) } };
	struct qhca_pbl pbl = { .addr = SRQ_LIST, .npages = 1, .levels = 1 };
	struct qhca_srq_create sc = { .uctx = QHCA_HANDLE_KERNEL, .log2 = 4, .stride_log2 = 6,
				      .limit = 3, .pbl = pbl };
	struct qhca_srq_attr a;
	uint8_t *ans = guest + (OUTBUF + 0x200 - GUEST_BASE);
	uint32_t pd, srqn, i;

	start_default();
	CHECK_EQ(exec_handle(QHCA_CMD_CREATE_PD, QHCA_HANDLE_KERNEL, &pd), QHCA_ST_OK);
	memcpy(guest + (SRQ_LIST - GUEST_BASE), &(uint64_t){ SRQ_PAGE }, 8);
	sc.pd = pd;
	memcpy(guest + (OUTBUF - GUEST_BASE), &sc, sizeof(sc));
	cmd.obj.in_addr = OUTBUF;
	cmd.obj.in_len = sizeof(sc);
	CHECK_EQ(exec(&cmd, &srqn, NULL), QHCA_ST_OK);
	qhca_engine_db_write(&eng, QHCA_DB_SRQ, (5ull << 32) | srqn, 8);

	memset(&cmd, 0, sizeof(cmd));
	cmd.hdr.opcode = QHCA_CMD_QUERY_SRQ;
	cmd.hdr.len = sizeof(cmd.obj);
	cmd.obj.handle = srqn;
	cmd.obj.out_addr = OUTBUF + 0x200;
	cmd.obj.out_len = sizeof(a);
	memset(ans, 0xa5, 64);
	CHECK_EQ(exec(&cmd, NULL, NULL), QHCA_ST_OK);
	memcpy(&a, ans, sizeof(a));
	CHECK_EQ(a.limit, 3);
	CHECK_EQ(a.log2, 4);
	CHECK_EQ(a.stride_log2, 6);
	CHECK_EQ(a.rsvd[0], 0);
	CHECK_EQ(a.rsvd[1], 0);
	CHECK_EQ(a.pi, 5);
	CHECK_EQ(a.ci, 0);
	for (i = sizeof(a); i < 64; i++)	/* not a byte past the answer */
		CHECK_EQ(ans[i], 0xa5);

	/* Refused, and nothing written. */
	memset(ans, 0xa5, 64);
	cmd.obj.handle = srqn + 1;
	CHECK_EQ(exec(&cmd, NULL, NULL), QHCA_ST_BAD_HANDLE);
	cmd.obj.handle = srqn;
	cmd.obj.out_len = sizeof(a) - 1;
	CHECK_EQ(exec(&cmd, NULL, NULL), QHCA_ST_BAD_FIELD);
	cmd.obj.out_len = sizeof(a) + 1;
	CHECK_EQ(exec(&cmd, NULL, NULL), QHCA_ST_BAD_FIELD);
	cmd.obj.out_len = sizeof(a);
	cmd.obj.in_addr = OUTBUF;
	cmd.obj.in_len = 8;
	CHECK_EQ(exec(&cmd, NULL, NULL), QHCA_ST_BAD_FIELD);
	cmd.obj.in_addr = 0;
	cmd.obj.in_len = 0;
	for (i = 0; i < 64; i++)
		CHECK_EQ(ans[i], 0xa5);
	cmd.obj.out_addr = GUEST_BASE + GUEST_SIZE - 8;	/* runs past the guest's memory */
	CHECK_EQ(exec(&cmd, NULL, NULL), QHCA_ST_DMA_ERROR);
	stop();
}

/* An iWARP command through the admin queue: in and out structures at OUTBUF. */
static uint16_t exec_iw(uint8_t op, uint32_t handle, uint32_t in_len, uint32_t out_len,
			uint32_t *r0)
{
	struct qhca_cmd cmd = { .hdr = { .opcode = op, .len = sizeof(cmd.obj) } };

	cmd.obj.handle = handle;
	cmd.obj.in_addr = in_len ? OUTBUF : 0;
	cmd.obj.in_len = in_len;
	cmd.obj.out_addr = out_len ? OUTBUF + 0x1000 : 0;
	cmd.obj.out_len = out_len;
	return exec(&cmd, r0, NULL);
}

/*
 * The iWARP commands through the admin queue: refused on a RoCE port (BAD_STATE); on an
 * iWARP one their lengths checked, a listener made and unmade, commands on connections and
 * QPs that do not exist refused; the port says iWARP in CAPS.
 */
static void test_iwarp_commands(void)
{
	struct qhca_engine_config c = default_cfg();
	struct qhca_iw_listen l = { .port = 4791, .backlog = 8 };
	struct qhca_iw_conn *conn = (struct qhca_iw_conn *)(guest + (OUTBUF - GUEST_BASE));
	uint32_t h = 0;

	start_default();
	memcpy(guest + (OUTBUF - GUEST_BASE), &l, sizeof(l));
	CHECK_EQ(exec_iw(QHCA_CMD_IW_LISTEN, 0, sizeof(l), 0, &h), QHCA_ST_BAD_STATE);
	CHECK_EQ(exec_iw(QHCA_CMD_IW_QUERY_CONN, 1, 0, sizeof(*conn), NULL), QHCA_ST_BAD_STATE);
	stop();

	c.link = QHCA_LINK_IWARP;
	start(&c);
	CHECK_EQ(qhca_engine_reg_read(&eng, QHCA_REG_CAPS), QHCA_CAP_ADMIN_PHASE | QHCA_CAP_IWARP);
	memcpy(guest + (OUTBUF - GUEST_BASE), &l, sizeof(l));
	CHECK_EQ(exec_iw(QHCA_CMD_IW_LISTEN, 0, sizeof(l) - 1, 0, &h), QHCA_ST_BAD_FIELD);
	CHECK_EQ(exec_iw(QHCA_CMD_IW_LISTEN, 0, sizeof(l), 0, &h), QHCA_ST_OK);
	CHECK(h != 0);
	CHECK_EQ(exec_iw(QHCA_CMD_IW_UNLISTEN, h + 1, 0, 0, NULL), QHCA_ST_BAD_HANDLE);
	CHECK_EQ(exec_iw(QHCA_CMD_IW_UNLISTEN, h, 0, 0, NULL), QHCA_ST_OK);
	memset(conn, 0, sizeof(*conn));	/* (reserved fields: test-iw-cm no_listener) */
	CHECK_EQ(exec_iw(QHCA_CMD_IW_DISCONNECT, 1, sizeof(*conn), 0, NULL), QHCA_ST_BAD_HANDLE);
	CHECK_EQ(exec_iw(QHCA_CMD_IW_ACCEPT, 1, sizeof(*conn), 0, NULL), QHCA_ST_BAD_HANDLE);
	CHECK_EQ(exec_iw(QHCA_CMD_IW_QUERY_CONN, 1, 0, sizeof(*conn), NULL), QHCA_ST_BAD_HANDLE);
	CHECK_EQ(exec_iw(QHCA_CMD_IW_CONNECT, 0x12345, sizeof(*conn), 0, NULL),
		 QHCA_ST_BAD_HANDLE);
	CHECK_EQ(host_errors, 0);
	stop();
}

static const struct unit_test tests[] = {
	{ "iwarp_commands", test_iwarp_commands },
	{ "identity_registers", test_identity_registers },
	{ "config_check", test_config_check },
	{ "enable_rejects_bad_queue", test_enable_rejects_bad_queue },
	{ "nop_roundtrip", test_nop_roundtrip },
	{ "phase_wraps", test_phase_wraps },
	{ "batch_and_full_completion_ring", test_batch_and_full_completion_ring },
	{ "query_device", test_query_device },
	{ "query_port", test_query_port },
	{ "set_mac", test_set_mac },
	{ "uctx_and_pd_lifecycle", test_uctx_and_pd_lifecycle },
	{ "resource_limits", test_resource_limits },
	{ "malformed_commands", test_malformed_commands },
	{ "doorbells_past_ring_are_fatal", test_doorbells_past_ring_are_fatal },
	{ "config_locked_while_enabled", test_config_locked_while_enabled },
	{ "obj_table", test_obj_table },
	{ "eq_events", test_eq_events },
	{ "eq_rejects_bad_parameters", test_eq_rejects_bad_parameters },
	{ "eth_transmit", test_eth_transmit },
	{ "eth_receive", test_eth_receive },
	{ "eth_start_validation", test_eth_start_validation },
	{ "admin_work_per_doorbell", test_admin_work_per_doorbell },
	{ "admin_reset_while_pending", test_admin_reset_while_pending },
	{ "admin_bytes_per_doorbell", test_admin_bytes_per_doorbell },
	{ "query_srq_admin", test_query_srq_admin },
	{}
};

int main(int argc, char **argv)
{
	return unit_main(tests, argc, argv);
}
