/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The transport harness: two engines, each with its own fake guest memory, joined by an
 * in-memory link that can drop, reorder and duplicate frames by a seeded generator, and a
 * tiny driver (EQ, PD, CQs, QPs, regions, WQEs, doorbells, polling). Used by the transport
 * unit tests and by the device-alone benchmark (bench/engine_bench.c).
 */
#ifndef QHCA_TRANSPORT_HARNESS_H
#define QHCA_TRANSPORT_HARNESS_H

#include <stdlib.h>
#include <string.h>

#include "engine_internal.h"
#include "unit.h"

#define MEM_BASE	0x10000000ull
#define MEM_SIZE	(8u << 20)
#define MAX_FRAMES	4096

struct node {
	struct qhca_engine e;
	uint8_t *mem;
	uint64_t brk;		/* bump allocator in guest memory */
	uint64_t deadline;
	uint8_t mac[6];
	uint8_t gid[16];
	uint32_t eq, pd, uctx;
	unsigned comp_events, async_events;
	int id;
	uint64_t aq;			/* the admin SQ, its CQ 4096 bytes on (4 entries each) */
	uint32_t aq_tail, acq_head;	/* commands run (node_admin), completions taken */
};

struct frame {
	int to;
	uint64_t due;		/* with link_delay_ns: when it arrives */
	size_t len;
	uint8_t data[4200];
};

static struct node nodes[2];
static uint8_t harness_path_mtu = 3;	/* IBA encoding: 1024 bytes */
static uint8_t harness_link = QHCA_LINK_ROCE;	/* the nodes' link layer (test_ib.c: IB) */
static uint8_t harness_av_flags;	/* connect_qp's ib_flags: QHCA_AV_ROCE_V1 for RoCE v1 */
static struct frame *link_q;
static unsigned link_n;
static uint64_t now;
static unsigned drop_pct, dup_pct, reorder_pct;
/* > 0: a frame arrives link_delay_ns after it was sent, plus up to link_jitter_ns (frames
 * overtake one another by it), and timers fire meanwhile: ACKs late enough for spurious
 * retransmission timeouts, as on a busy host. 0: frames arrive before any timer fires. */
static uint64_t link_delay_ns, link_jitter_ns;
static unsigned long frames_sent, frames_dropped;
static unsigned long frames_v1;		/* of frames_sent, RoCE v1 ones (Ethertype 0x8915) */
static unsigned link_cap;		/* > 0: push back when this many frames wait */
static unsigned long tx_blocks;

/* ---------------------------------------------------------------- fake platform */
static inline int mem_rw(struct node *n, uint64_t addr, void *buf, size_t len, bool write)
{
	if (addr < MEM_BASE || addr - MEM_BASE > MEM_SIZE || len > MEM_SIZE - (addr - MEM_BASE))
		return -1;
	if (write)
		memcpy(n->mem + (addr - MEM_BASE), buf, len);
	else
		memcpy(buf, n->mem + (addr - MEM_BASE), len);
	return 0;
}

static inline int op_read(void *o, uint64_t a, void *b, size_t l)
{
	return mem_rw(o, a, b, l, false);
}

/* A test's hook, run before every write the device makes to a node's memory (NULL: none). */
static void (*dma_write_hook)(struct node *n, uint64_t gpa, size_t len);

static inline int op_write(void *o, uint64_t a, const void *b, size_t l)
{
	if (dma_write_hook)
		dma_write_hook(o, a, l);
	return mem_rw(o, a, (void *)b, l, true);
}

static inline void op_notify(void *o, unsigned v)
{
	struct node *n = o;

	if (v == 0)
		n->async_events++;
	else
		n->comp_events++;
}

/* QHCA_HARNESS_LOG set: every frame on the link, log line and teaching step to stderr,
 * with the virtual time (for reading a failing test's story). */
static int harness_log_on = -1;

static inline bool harness_log(void)
{
	if (harness_log_on < 0)
		harness_log_on = getenv("QHCA_HARNESS_LOG") != NULL;
	return harness_log_on;
}

/* The link is a ring of frames: frame k (0: the oldest) of link_n is link_at(k). */
static unsigned link_head;

static inline struct frame *link_at(unsigned k)
{
	return &link_q[(link_head + k) % MAX_FRAMES];
}

/* Take frame @i (0: the oldest) off the link into @out. */
static inline void link_take(unsigned i, struct frame *out)
{
	unsigned k;

	struct frame *f = link_at(i);

	out->to = f->to;
	out->len = f->len;
	memcpy(out->data, f->data, f->len);	/* not the whole buffer */
	if (i == 0) {
		link_head = (link_head + 1) % MAX_FRAMES;
	} else {
		for (k = i; k + 1 < link_n; k++)
			*link_at(k) = *link_at(k + 1);
	}
	link_n--;
}

static inline void enqueue(int to, const void *f, size_t len)
{
	struct frame *fr;

	if (link_n == MAX_FRAMES) {
		frames_dropped++;	/* as a full link drops */
		return;
	}
	fr = link_at(link_n++);
	fr->to = to;
	fr->due = now + link_delay_ns + (link_jitter_ns ? (uint64_t)rand() % link_jitter_ns : 0);
	fr->len = len;
	memcpy(fr->data, f, len);
}

static inline void op_xmit(void *o, const void *f, size_t len)
{
	struct node *n = o;

	frames_sent++;
	if (len >= 14 && ((const uint8_t *)f)[12] == 0x89 && ((const uint8_t *)f)[13] == 0x15)
		frames_v1++;
	if (drop_pct && (unsigned)rand() % 100 < drop_pct) {
		if (harness_log())
			fprintf(stderr, "  [%llu] link: lost a frame of node %d\n",
				(unsigned long long)now, n->id);
		frames_dropped++;
		return;
	}
	enqueue(1 - n->id, f, len);
	if (dup_pct && (unsigned)rand() % 100 < dup_pct)
		enqueue(1 - n->id, f, len);
	if (link_cap && link_n >= link_cap && !n->e.tx_blocked) {
		tx_blocks++;
		qhca_engine_tx_block(&n->e);
	}
}

static inline uint64_t op_now(void *o)
{
	return now;
}

static inline void op_timer(void *o, uint64_t deadline)
{
	((struct node *)o)->deadline = deadline;
}

/* Host-side error reports: a guest can cause none of them (they reach the host's log). */
static unsigned long host_errors;

static inline void op_log(void *o, enum qhca_log_level level, const char *func, const char *msg)
{
	if (harness_log())
		fprintf(stderr, "  [%llu] node %d: %s: %s\n", (unsigned long long)now,
			((struct node *)o)->id, func, msg);
	if (level == QHCA_LOG_ERR) {
		host_errors++;
		fprintf(stderr, "  host error from %s: %s\n", func, msg);
	}
}

/* Only host-side errors are looked at: the engine formats no other message. */
static inline bool op_log_enabled(void *o, enum qhca_log_level level)
{
	return level == QHCA_LOG_ERR || harness_log();
}

/* The teaching trace of both nodes, "N kind key=value ...\n" a step, in order. */
static char step_log[1 << 16];
static size_t step_len;

static inline void op_step(void *o, const char *line)
{
	int n = snprintf(step_log + step_len, sizeof(step_log) - step_len, "%d %s\n",
			 ((struct node *)o)->id, line);

	if (harness_log())
		fprintf(stderr, "  [%llu] %d %s\n", (unsigned long long)now,
			((struct node *)o)->id, line);

	if (n > 0 && step_len + (size_t)n < sizeof(step_log))
		step_len += (size_t)n;
}

/* The next line of the teaching trace from *at on that contains every one of @parts (NULL
 * ends them); *at moves past it. Steps between are allowed: this checks their order. */
static inline bool step_next(const char **at, const char *const *parts)
{
	const char *line = *at;

	while (*line) {
		const char *end = strchr(line, '\n');
		char buf[600];
		size_t n = end ? (size_t)(end - line) : strlen(line), i;
		bool all = true;

		snprintf(buf, sizeof(buf), "%.*s", (int)n, line);
		for (i = 0; parts[i]; i++)
			all = all && strstr(buf, parts[i]) != NULL;
		line += n + (end ? 1 : 0);
		if (all) {
			*at = line;
			return true;
		}
	}
	fprintf(stderr, "  no step with \"%s\"... after:\n%.400s\n", parts[0], *at);
	return false;
}

#define STEP(at, ...) CHECK(step_next(&(at), (const char *const[]){ __VA_ARGS__, NULL }))

static const struct qhca_engine_ops ops = {
	.dma_read = op_read,
	.dma_write = op_write,
	.notify = op_notify,
	.xmit = op_xmit,
	.now_ns = op_now,
	.timer_arm = op_timer,
	.log_enabled = op_log_enabled,
	.log = op_log,
	.step = op_step,
};

/*
 * Live migration of a node: its engine's state saved, the engine freed, a new one made in
 * its place from the state (qhca_engine_load_into) and resumed, as QEMU's adapter does.
 * With harness_migrate_every > 0 (QHCA_TEST_MIGRATE=N) pump moves a node every N steps,
 * the two in turn: every test then runs with its objects and messages moved mid-flight.
 */
static unsigned harness_migrate_every;
static unsigned long harness_steps, harness_migrations;

static inline void migrate_node(struct node *n)
{
	struct qhca_engine_config c = n->e.cfg;
	bool tracing = n->e.tracing;
	uint8_t *buf = NULL;
	size_t len = 0;
	char why[256];

	CHECK_EQ(qhca_engine_save(&n->e, &buf, &len), 0);
	qhca_engine_fini(&n->e);
	CHECK_EQ(qhca_engine_init(&n->e, &c, &ops, n), 0);
	if (qhca_engine_load_into(&n->e, buf, len, why, sizeof(why))) {
		fprintf(stderr, "  node %d: state refused: %s\n", n->id, why);
		CHECK(!"a saved state loads");
	}
	free(buf);
	qhca_engine_set_tracing(&n->e, tracing);
	n->deadline = UINT64_MAX;
	qhca_engine_resume(&n->e);
	harness_migrations++;
}

/* The frame that arrives first (of the earliest due, the oldest). */
static inline unsigned link_earliest(void)
{
	unsigned i, best = 0;

	for (i = 1; i < link_n; i++)
		if (link_at(i)->due < link_at(best)->due)
			best = i;
	return best;
}

/* Hand frame @f (taken at place @i of the link) to its node. */
static inline void link_deliver(struct frame *f, unsigned i)
{
	if (harness_log())
		fprintf(stderr, "  [%llu] link: frame %u of %u to node %d, %zu bytes\n",
			(unsigned long long)now, i, link_n + 1, f->to, f->len);
	qhca_engine_receive(&nodes[f->to].e, f->data, f->len);
}

/* An iWARP node's bookkeeping of its connections (deadline heap, reap queue, hash) is right
 * after every step: a deadline not moved where it changed fails here, not as a late timer. */
static inline void harness_iw_check(void)
{
	static bool told;
	int i;

	for (i = 0; i < 2; i++) {
		const char *why = qhca_iw_check(&nodes[i].e);

		if (why && !told) {
			fprintf(stderr, "  node %d: iWARP connections: %s\n", i, why);
			told = true;
		}
		CHECK(!why);
	}
}

/* Deliver frames (maybe out of order) and fire timers, at most @steps of them: true if
 * nothing was left to do. */
static inline bool pump_steps(unsigned steps)
{
	unsigned rounds = 0;

	while (rounds++ < steps) {
		harness_iw_check();
		if (harness_migrate_every && ++harness_steps % harness_migrate_every == 0)
			migrate_node(&nodes[harness_steps / harness_migrate_every % 2]);
		if (link_n && link_delay_ns) {
			unsigned i = link_earliest();
			struct frame f;

			if (link_at(i)->due <= nodes[0].deadline &&
			    link_at(i)->due <= nodes[1].deadline) {
				if (link_at(i)->due > now)
					now = link_at(i)->due;
				link_take(i, &f);
				link_deliver(&f, i);
				continue;
			}
		} else if (link_n) {
			unsigned i = 0;
			struct frame f;

			if (reorder_pct && link_n > 1 && (unsigned)rand() % 100 < reorder_pct)
				i = 1 + (unsigned)rand() % (link_n - 1);
			link_take(i, &f);
			link_deliver(&f, i);
			continue;
		}
		if ((nodes[0].e.tx_blocked || nodes[1].e.tx_blocked) && !link_n) {
			/* The link drained: let blocked senders go on. */
			if (nodes[0].e.tx_blocked)
				qhca_engine_tx_resume(&nodes[0].e);
			if (nodes[1].e.tx_blocked)
				qhca_engine_tx_resume(&nodes[1].e);
			continue;
		}
		{
			uint64_t next = nodes[0].deadline < nodes[1].deadline ? nodes[0].deadline :
					nodes[1].deadline;
			int i;

			if (next == UINT64_MAX)
				return true;
			if (next > now)
				now = next;
			for (i = 0; i < 2; i++)
				if (nodes[i].deadline <= now) {
					nodes[i].deadline = UINT64_MAX;
					qhca_engine_timer(&nodes[i].e);
				}
		}
	}
	return false;
}

/* unit_main() for the harness's tests; with QHCA_TEST_MIGRATE=N, every one of them again
 * with the nodes moved every N steps (and failing if none was moved). */
static inline int harness_main(const struct unit_test *tests, int argc, char **argv)
{
	const char *every = getenv("QHCA_TEST_MIGRATE");
	int rc;

	if (every)
		harness_migrate_every = (unsigned)atoi(every);
	rc = unit_main(tests, argc, argv);
	if (harness_migrate_every) {
		printf("%lu migrations\n", harness_migrations);
		if (!harness_migrations)
			rc = 1;
	}
	return rc;
}

/* Deliver frames and fire timers until nothing is left to do. */
static inline void pump(void)
{
	if (!pump_steps(200000))
		CHECK(!"pump did not settle");
}

/* ---------------------------------------------------------------- a tiny driver */
static inline uint64_t galloc(struct node *n, size_t size)
{
	uint64_t a = (n->brk + 4095) & ~4095ull;

	n->brk = a + size;
	CHECK(n->brk <= MEM_BASE + MEM_SIZE);
	memset(n->mem + (a - MEM_BASE), 0, size);
	return a;
}

static inline void *gptr(struct node *n, uint64_t addr)
{
	return n->mem + (addr - MEM_BASE);
}

/* A contiguous buffer and a one-level page list for it. */
static inline struct qhca_pbl pbl_for(struct node *n, uint64_t buf, size_t size)
{
	uint32_t np = (uint32_t)((size + 4095) / 4096), i;
	uint64_t list = galloc(n, np * 8);
	struct qhca_pbl p = { .addr = list, .npages = np, .levels = 1 };

	for (i = 0; i < np; i++)
		((uint64_t *)gptr(n, list))[i] = buf + (uint64_t)i * 4096;
	return p;
}

/* The limits of the QEMU device's properties at their defaults (hw-model/qemu/qhca.c). */
static inline struct qhca_engine_config harness_default_cfg(void)
{
	struct qhca_engine_config c = {
		.db_pages = 256, .msix_vectors = 5, .max_pd = 1024, .max_qp = 262144,
		.max_qp_wr = 32768, .max_cq = 1024, .max_cqe = 4194303, .max_mr = 4096,
		.max_mr_size_mb = 4096, .max_srq = 256, .max_sge = 30, .max_inline = 256,
		.mtu = 4096, .link = harness_link, .host_mem_mb = QHCA_HOST_MEM_MB,
	};

	return c;
}

/* A node with the configuration @c (its MAC is set here). */
static inline void node_init_cfg(struct node *n, int id, struct qhca_engine_config c)
{
	struct qhca_cmd_create_eq eqc;
	uint64_t aq;

	c.mac[0] = 0x52;
	c.mac[1] = 0x54;
	c.mac[2] = 0;
	c.mac[3] = 0x51;
	c.mac[4] = 0x48;
	c.mac[5] = (uint8_t)(id + 1);

	if (!n->mem)
		n->mem = malloc(MEM_SIZE);
	memset(n->mem, 0, MEM_SIZE);
	n->brk = MEM_BASE;
	n->id = id;
	n->deadline = UINT64_MAX;
	n->comp_events = n->async_events = 0;
	memcpy(n->mac, c.mac, 6);
	memset(n->gid, 0, 16);
	n->gid[10] = n->gid[11] = 0xff;
	n->gid[12] = 192;
	n->gid[13] = 168;
	n->gid[14] = 77;
	n->gid[15] = (uint8_t)(id + 1);
	CHECK_EQ(qhca_engine_init(&n->e, &c, &ops, n), 0);
	aq = galloc(n, 8192);
	n->aq = aq;
	n->aq_tail = n->acq_head = 0;
	qhca_engine_reg_write(&n->e, QHCA_REG_ASQ_BASE_LO, (uint32_t)aq);
	qhca_engine_reg_write(&n->e, QHCA_REG_ACQ_BASE_LO, (uint32_t)aq + 4096);
	qhca_engine_reg_write(&n->e, QHCA_REG_AQ_DEPTH, 2);
	qhca_engine_reg_write(&n->e, QHCA_REG_CTRL, QHCA_CTRL_ENABLE);
	qhca_engine_set_link(&n->e, true);
	eqc = (struct qhca_cmd_create_eq){ .ring_addr = galloc(n, 4096), .log2_entries = 8,
					   .vector = 2 };
	CHECK_EQ(qhca_eq_create(&n->e, &eqc, &n->eq), QHCA_ST_OK);
	n->pd = qhca_obj_alloc(&n->e.pd, QHCA_HANDLE_KERNEL);
	n->uctx = 0;
}

static inline void node_init(struct node *n, int id)
{
	struct qhca_engine_config c = {
		.db_pages = 8, .msix_vectors = 5, .max_pd = 8, .max_qp = 16, .max_qp_wr = 1024,
		.max_cq = 16, .max_cqe = 4096, .max_mr = 64, .max_mr_size_mb = 64, .max_srq = 4,
		.max_sge = 4, .max_inline = 256, .mtu = 4096, .link = harness_link,
	};

	node_init_cfg(n, id, c);
}

/* Run one command on node @n's admin queue, as the driver does: its status, 0xffff if no
 * completion came. */
static inline uint16_t node_admin(struct node *n, struct qhca_cmd *cmd)
{
	struct qhca_cqe_admin *c = gptr(n, n->aq + 4096 + (n->acq_head % 4) * sizeof(*c));

	cmd->hdr.cmd_id = (uint16_t)n->aq_tail;
	memcpy(gptr(n, n->aq + (n->aq_tail % 4) * QHCA_CMD_SIZE), cmd, sizeof(*cmd));
	qhca_engine_reg_write(&n->e, QHCA_REG_ASQ_TAIL, ++n->aq_tail % 4);
	if ((c->flags & QHCA_CQE_PHASE) != (n->acq_head / 4 % 2 ? 0 : QHCA_CQE_PHASE) ||
	    c->cmd_id != cmd->hdr.cmd_id)
		return 0xffff;
	qhca_engine_reg_write(&n->e, QHCA_REG_ACQ_HEAD, ++n->acq_head % 4);
	return c->status;
}

/* Port counter @which of node @n (enum qhca_counter), read with QUERY_COUNTERS. */
static inline uint64_t node_counter(struct node *n, unsigned which)
{
	struct qhca_cmd cmd = { .hdr = { .opcode = QHCA_CMD_QUERY_COUNTERS,
					 .len = sizeof(struct qhca_cmd_obj) } };
	uint64_t out = galloc(n, sizeof(struct qhca_counters_block));

	cmd.obj.out_addr = out;
	cmd.obj.out_len = sizeof(struct qhca_counters_block);
	CHECK_EQ(node_admin(n, &cmd), QHCA_ST_OK);
	return ((struct qhca_counters_block *)gptr(n, out))->value[which];
}

/* Two nodes with the limits @c (NULL: small ones). */
static inline void setup_cfg(const struct qhca_engine_config *c)
{
	static bool seeded;

	if (!link_q)
		link_q = malloc(MAX_FRAMES * sizeof(*link_q));
	if (!seeded) {
		srand(12345);
		seeded = true;
	}
	link_n = link_head = 0;
	frames_sent = frames_dropped = frames_v1 = 0;
	now = 1000;
	drop_pct = dup_pct = reorder_pct = link_cap = 0;
	link_delay_ns = link_jitter_ns = 0;
	tx_blocks = 0;
	host_errors = 0;
	dma_write_hook = NULL;
	if (c) {
		node_init_cfg(&nodes[0], 0, *c);
		node_init_cfg(&nodes[1], 1, *c);
	} else {
		node_init(&nodes[0], 0);
		node_init(&nodes[1], 1);
	}
}

/* Two nodes; with the QEMU device's default limits if @defaults, else small ones. */
static inline void setup_limits(bool defaults)
{
	struct qhca_engine_config c = harness_default_cfg();

	setup_cfg(defaults ? &c : NULL);
}

static inline void setup(void)
{
	setup_limits(false);
}

static inline void teardown(void)
{
	/* QHCA_TEST_MIGRATE: whatever state the test left loads (and the checks that follow
	 * hold for the moved engines) */
	if (harness_migrate_every) {
		migrate_node(&nodes[0]);
		migrate_node(&nodes[1]);
	}
	/* Whatever the test made the guests do, nothing was the host's fault. */
	CHECK_EQ(host_errors, 0);
	qhca_engine_fini(&nodes[0].e);
	qhca_engine_fini(&nodes[1].e);
}

struct cq {
	uint32_t cqn;
	uint64_t ring;
	uint32_t log2, ci;
};

static inline struct cq make_cq(struct node *n, uint32_t log2)
{
	struct cq cq = { .log2 = log2 };
	size_t size = (32u << log2) + 64;
	struct qhca_cq_create c = { .log2_entries = log2, .eq = n->eq };

	cq.ring = galloc(n, size);
	c.pbl = pbl_for(n, cq.ring, size);
	CHECK_EQ(qhca_cq_create(&n->e, &c, &cq.cqn), QHCA_ST_OK);
	return cq;
}

/* Poll one CQE; returns 0 if the CQ is empty. */
static inline int poll_cq(struct node *n, struct cq *cq, struct qhca_cqe *out)
{
	struct qhca_cqe *c = gptr(n, cq->ring + (uint64_t)(cq->ci & ((1u << cq->log2) - 1)) * 32);
	uint8_t phase = ((cq->ci >> cq->log2) & 1) ? 0 : 1;

	memset(out, 0, sizeof(*out));
	if ((c->owner & 1) != phase)
		return 0;
	*out = *c;
	cq->ci++;
	*(uint32_t *)gptr(n, cq->ring + (32u << cq->log2)) = cq->ci;
	return 1;
}

static inline uint8_t cqe_status(const struct qhca_cqe *c)
{
	return (uint8_t)QHCA_FIELD_GET(QHCA_CQE_STATUS_MASK, c->qpn_status);
}

static inline uint8_t cqe_flags(const struct qhca_cqe *c)
{
	return (uint8_t)QHCA_FIELD_GET(QHCA_CQE_FLAGS_MASK, c->src_qp_flags);
}

struct qp {
	uint32_t qpn;
	struct node *n;
	uint64_t sq, rq;
	uint32_t sq_pi, rq_pi;
	uint32_t log2;
	struct cq scq, rcq;
};

#define SQ_STRIDE_LOG2	8	/* 256: header, UD segment, 8 SGEs */
#define RQ_STRIDE_LOG2	6
#define SQ_SIZE		128	/* more than the device's window of WQEs in flight */

static inline struct qp make_qp(struct node *n, uint8_t type, uint32_t srq)
{
	struct qp q = { .n = n, .log2 = 6 };
	struct qhca_qp_create c = { .pd = n->pd, .type = type, .sq_log2 = 7, .rq_log2 = 6,
				    .sq_stride_log2 = SQ_STRIDE_LOG2,
				    .rq_stride_log2 = RQ_STRIDE_LOG2, .max_inline = 128,
				    .srq = srq };

	q.scq = make_cq(n, 8);
	q.rcq = make_cq(n, 8);
	c.send_cq = q.scq.cqn;
	c.recv_cq = q.rcq.cqn;
	q.sq = galloc(n, SQ_SIZE << SQ_STRIDE_LOG2);
	q.rq = galloc(n, 64u << RQ_STRIDE_LOG2);
	c.sq_pbl = pbl_for(n, q.sq, SQ_SIZE << SQ_STRIDE_LOG2);
	c.rq_pbl = pbl_for(n, q.rq, 64u << RQ_STRIDE_LOG2);
	CHECK_EQ(qhca_qp_create(&n->e, &c, &q.qpn), QHCA_ST_OK);
	return q;
}

static inline uint16_t modify(struct qp *q, uint32_t mask, struct qhca_qp_attr *a)
{
	a->mask = mask;
	return qhca_qp_modify(&q->n->e, q->qpn, a);
}

/* Bring a connected QP to RTS towards @peer. */
static inline void connect_qp(struct qp *q, struct qp *peer, uint32_t access)
{
	struct qhca_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.state = QHCA_QPS_INIT;
	a.access_flags = access;
	CHECK_EQ(modify(q, QHCA_QP_STATE | QHCA_QP_ACCESS_FLAGS | QHCA_QP_PKEY_INDEX |
			QHCA_QP_PORT, &a), QHCA_ST_OK);
	memset(&a, 0, sizeof(a));
	a.state = QHCA_QPS_RTR;
	a.path_mtu = harness_path_mtu;
	a.dest_qpn = peer->qpn;
	a.rq_psn = 0xfffff0;	/* wraps around 2^24 soon */
	a.max_dest_rd_atomic = 4;
	a.min_rnr_timer = 1;
	memcpy(a.av.dgid, peer->n->gid, 16);
	memcpy(a.av.sgid, q->n->gid, 16);
	memcpy(a.av.dmac, peer->n->mac, 6);
	a.av.dlid = peer->n->e.ib.pi.lid;	/* an InfiniBand port's address */
	a.av.ib_flags = harness_av_flags;
	CHECK_EQ(modify(q, QHCA_QP_STATE | QHCA_QP_AV | QHCA_QP_PATH_MTU | QHCA_QP_DEST_QPN |
			QHCA_QP_RQ_PSN | QHCA_QP_MAX_DEST_RD_ATOMIC | QHCA_QP_MIN_RNR_TIMER, &a),
		 QHCA_ST_OK);
	memset(&a, 0, sizeof(a));
	a.state = QHCA_QPS_RTS;
	a.sq_psn = 0xfffff0;
	a.timeout = 10;		/* 4 ms */
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 4;
	CHECK_EQ(modify(q, QHCA_QP_STATE | QHCA_QP_SQ_PSN | QHCA_QP_TIMEOUT | QHCA_QP_RETRY_CNT |
			QHCA_QP_RNR_RETRY | QHCA_QP_MAX_QP_RD_ATOMIC, &a), QHCA_ST_OK);
}

static inline void connect_pair(struct qp *a, struct qp *b)
{
	connect_qp(a, b, QHCA_ACCESS_ALL);
	connect_qp(b, a, QHCA_ACCESS_ALL);
}

/* A memory region over a fresh buffer of @size bytes; returns its key. */
static inline uint32_t make_mr(struct node *n, size_t size, uint32_t access, uint64_t *buf)
{
	struct qhca_mr_create c = { .pd = n->pd, .access = access, .length = size };
	uint32_t key;

	*buf = galloc(n, size);
	c.iova = 0x7f0000000000ull + (*buf - MEM_BASE);	/* virtual addresses differ */
	c.pbl = pbl_for(n, *buf, size);
	CHECK_EQ(qhca_mr_create(&n->e, &c, &key), QHCA_ST_OK);
	*buf = c.iova;
	return key;
}

static inline uint64_t va_to_gpa(uint64_t va)
{
	return va - 0x7f0000000000ull + MEM_BASE;
}

static inline void ring(struct node *n, uint32_t reg, uint32_t num, uint32_t pi)
{
	qhca_engine_db_write(&n->e, reg, QHCA_FIELD_PREP(QHCA_DB_INDEX_MASK, pi) |
			     QHCA_FIELD_PREP(QHCA_DB_NUM_MASK, num), 8);
}

static inline void post_recv(struct qp *q, uint64_t wr_id, uint64_t va, uint32_t len, uint32_t lkey)
{
	uint64_t w = q->rq + ((uint64_t)(q->rq_pi & 63) << RQ_STRIDE_LOG2);
	struct qhca_rq_wqe *h = gptr(q->n, w);
	struct qhca_sge *s = gptr(q->n, w + sizeof(*h));

	h->wr_id = wr_id;
	h->num_sge = 1;
	s->addr = va;
	s->length = len;
	s->lkey = lkey;
	ring(q->n, QHCA_DB_RQ, q->qpn, ++q->rq_pi);
}

static inline struct qhca_sq_wqe *sq_wqe(struct qp *q, uint8_t op, uint64_t wr_id, uint64_t va,
				   uint32_t len, uint32_t lkey)
{
	uint64_t w = q->sq + ((uint64_t)(q->sq_pi & (SQ_SIZE - 1)) << SQ_STRIDE_LOG2);
	struct qhca_sq_wqe *h = gptr(q->n, w);
	struct qhca_sge *s = gptr(q->n, w + sizeof(*h));

	memset(h, 0, 1u << SQ_STRIDE_LOG2);
	h->wr_id = wr_id;
	h->opcode = op;
	h->flags = QHCA_WQE_SIGNALED;
	h->num_sge = 1;
	s->addr = va;
	s->length = len;
	s->lkey = lkey;
	return h;
}

static inline void post_send(struct qp *q)
{
	ring(q->n, QHCA_DB_SQ, q->qpn, ++q->sq_pi);
}

static inline void fill(struct node *n, uint64_t va, size_t len, uint8_t seed)
{
	uint8_t *p = gptr(n, va_to_gpa(va));
	size_t i;

	for (i = 0; i < len; i++)
		p[i] = (uint8_t)(seed + i * 7 + (i >> 8));
}

static inline bool same(struct node *a, uint64_t va_a, struct node *b, uint64_t va_b, size_t len)
{
	return !memcmp(gptr(a, va_to_gpa(va_a)), gptr(b, va_to_gpa(va_b)), len);
}

/* Expect exactly one CQE with @status (and @wr_id) on @cq. */
static inline void expect_cqe(struct node *n, struct cq *cq, uint64_t wr_id, uint8_t status,
		       uint8_t opcode, uint32_t len)
{
	struct qhca_cqe c;

	if (!poll_cq(n, cq, &c)) {
		CHECK(!"expected a completion");
		return;
	}
	CHECK_EQ(c.wr_id, wr_id);
	CHECK_EQ(cqe_status(&c), status);
	if (status == QHCA_WC_SUCCESS) {
		CHECK_EQ(c.opcode, opcode);
		if (len != UINT32_MAX)
			CHECK_EQ(c.byte_len, len);
	}
}

static inline void expect_empty(struct node *n, struct cq *cq)
{
	struct qhca_cqe c;

	CHECK_EQ(poll_cq(n, cq, &c), 0);
}

/* Fast-register regions: one with room for @max_pages, REG_MR and LOCAL_INV WQEs. */
static inline uint32_t make_frmr(struct node *n, uint32_t max_pages)
{
	struct qhca_mr_create c = { .pd = n->pd, .flags = QHCA_MR_FAST_REG,
				    .pbl.npages = max_pages };
	uint32_t key;

	CHECK_EQ(qhca_mr_create(&n->e, &c, &key), QHCA_ST_OK);
	return key;
}

/* The key with its variant byte replaced (ib_update_fast_reg_key). */
static inline uint32_t variant(uint32_t key, uint8_t v)
{
	return (key & QHCA_MR_KEY_INDEX_MASK) | v;
}

/* A REG_MR WQE on @q for @key; the caller fills the rest of the segment. */
static inline struct qhca_reg_mr_seg *reg_wqe(struct qp *q, uint64_t wr_id, uint32_t key)
{
	struct qhca_sq_wqe *h = sq_wqe(q, QHCA_WR_REG_MR, wr_id, 0, 0, 0);
	struct qhca_reg_mr_seg *r = (struct qhca_reg_mr_seg *)(h + 1);

	h->num_sge = 0;
	memset(r, 0, sizeof(*r));
	r->key = key;
	r->access = QHCA_ACCESS_ALL;
	r->page_shift = 12;
	return r;
}

/* Post a REG_MR on @q: @key to @length bytes at @iova, of @npages 4 KiB pages listed at
 * @pbl, with @access. */
static inline void post_reg(struct qp *q, uint64_t wr_id, uint32_t key, uint32_t access,
			    uint64_t iova, uint32_t length, uint64_t pbl, uint32_t npages)
{
	struct qhca_reg_mr_seg *r = reg_wqe(q, wr_id, key);

	r->access = access;
	r->iova = iova;
	r->length = length;
	r->pbl_addr = pbl;
	r->npages = npages;
	post_send(q);
}

static inline void inv_wqe(struct qp *q, uint64_t wr_id, uint32_t key)
{
	struct qhca_sq_wqe *h = sq_wqe(q, QHCA_WR_LOCAL_INV, wr_id, 0, 0, 0);

	h->num_sge = 0;
	h->imm_inv = key;
}

/* Send queues as deep as the device allows, of 128-byte WQEs (a header and a REG_MR
 * segment): an RC QP of node @n with 2^@log2 of them and a send CQ with room for twice as
 * many completions, in RTS towards @peer (no frame goes to it: REG_MR is local). */
#define DEEP_STRIDE_LOG2	7

static inline struct qp make_deep_qp(struct node *n, uint32_t log2, struct qp *peer)
{
	struct qp q = { .n = n, .log2 = 6 };
	size_t sq_bytes = (size_t)1 << (log2 + DEEP_STRIDE_LOG2);
	struct qhca_qp_create c = { .pd = n->pd, .type = QHCA_QPT_RC, .sq_log2 = log2,
				    .rq_log2 = 6, .sq_stride_log2 = DEEP_STRIDE_LOG2,
				    .rq_stride_log2 = RQ_STRIDE_LOG2 };

	q.scq = make_cq(n, log2 + 1);
	q.rcq = make_cq(n, 4);
	c.send_cq = q.scq.cqn;
	c.recv_cq = q.rcq.cqn;
	q.sq = galloc(n, sq_bytes);
	q.rq = galloc(n, 64u << RQ_STRIDE_LOG2);
	c.sq_pbl = pbl_for(n, q.sq, sq_bytes);
	c.rq_pbl = pbl_for(n, q.rq, 64u << RQ_STRIDE_LOG2);
	CHECK_EQ(qhca_qp_create(&n->e, &c, &q.qpn), QHCA_ST_OK);
	connect_qp(&q, peer, QHCA_ACCESS_ALL);
	return q;
}

/* Write a REG_MR WQE at the producer index of deep QP @q (the doorbell is the caller's):
 * @key to the 512 pages of 4 KiB listed at @pbl. */
static inline void deep_reg(struct qp *q, uint32_t log2, uint64_t wr_id, uint32_t key,
			    uint64_t pbl)
{
	uint64_t w = q->sq + ((uint64_t)(q->sq_pi++ & ((1u << log2) - 1)) << DEEP_STRIDE_LOG2);
	struct qhca_sq_wqe *h = gptr(q->n, w);
	struct qhca_reg_mr_seg *r = (struct qhca_reg_mr_seg *)(h + 1);

	memset(h, 0, 1u << DEEP_STRIDE_LOG2);
	h->wr_id = wr_id;
	h->opcode = QHCA_WR_REG_MR;
	h->flags = QHCA_WQE_SIGNALED;
	r->key = key;
	r->access = QHCA_ACCESS_LOCAL_WRITE | QHCA_ACCESS_REMOTE_WRITE;
	r->iova = 0x5000000000ull;
	r->length = QHCA_MAX_FAST_REG_PAGES * 4096u;
	r->pbl_addr = pbl;
	r->npages = QHCA_MAX_FAST_REG_PAGES;
	r->page_shift = 12;
}

/* A page list of QHCA_MAX_FAST_REG_PAGES pages (any: REG_MR does not touch them). */
static inline uint64_t fast_reg_list(struct node *n)
{
	uint64_t list = galloc(n, 4096);
	uint32_t i;

	for (i = 0; i < QHCA_MAX_FAST_REG_PAGES; i++)
		((uint64_t *)gptr(n, list))[i] = MEM_BASE + (uint64_t)i * 4096;
	return list;
}

/* Take the completions on @cq: each the next of the sequence *@next (wr_ids), with
 * @status; how many there were. */
static inline uint32_t take_in_order(struct node *n, struct cq *cq, uint64_t *next,
				     uint8_t status)
{
	struct qhca_cqe c;
	uint32_t got = 0;

	while (poll_cq(n, cq, &c)) {
		if (c.wr_id != *next || cqe_status(&c) != status ||
		    (status == QHCA_WC_SUCCESS && c.opcode != QHCA_WC_REG_MR)) {
			fprintf(stderr, "  completion wr_id %llu status %u, expected %llu status %u\n",
				(unsigned long long)c.wr_id, cqe_status(&c),
				(unsigned long long)*next, status);
			CHECK(!"completions in order");
			*next = c.wr_id;
		}
		(*next)++;
		got++;
	}
	return got;
}

/* Node @n's timer callback, if it is armed at once (work a budget deferred): false if not. */
static inline bool timer_now(struct node *n)
{
	if (n->deadline != 0)
		return false;
	n->deadline = UINT64_MAX;
	qhca_engine_timer(&n->e);
	return true;
}

/* Post an RDMA WRITE of @len bytes from @lbuf (@lkey) to @raddr (@rkey) on @a. */
static inline struct qhca_sq_wqe *post_write(struct qp *a, uint64_t wr_id, uint64_t lbuf,
					     uint32_t len, uint32_t lkey, uint64_t raddr,
					     uint32_t rkey)
{
	struct qhca_sq_wqe *w = sq_wqe(a, QHCA_WR_RDMA_WRITE, wr_id, lbuf, len, lkey);

	w->remote_addr = raddr;
	w->rkey = rkey;
	post_send(a);
	return w;
}

/* Two connected RC QPs and a region on each: @lkey on node 0 (local write), @rkey on
 * node 1 with @raccess; @size bytes each. */
static inline void rc_pair(struct qp *a, struct qp *b, size_t size, uint32_t *lkey, uint64_t *lbuf,
		    uint32_t *rkey, uint64_t *rbuf, uint32_t raccess)
{
	*a = make_qp(&nodes[0], QHCA_QPT_RC, 0);
	*b = make_qp(&nodes[1], QHCA_QPT_RC, 0);
	connect_pair(a, b);
	*lkey = make_mr(&nodes[0], size, QHCA_ACCESS_LOCAL_WRITE, lbuf);
	*rkey = make_mr(&nodes[1], size, raccess, rbuf);
}

#endif
