// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The engine's state saved and loaded (migrate.c): exact round trips, RC traffic moved
 * mid-flight through a lossy link and a switch-over that loses frames, and hostile streams
 * refused. (test-transport under QHCA_TEST_MIGRATE=N runs every transport test with the
 * nodes moved every N steps: meson's transport-migrate.)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "transport_harness.h"

static uint8_t *save(struct node *n, size_t *len)
{
	uint8_t *buf = NULL;

	CHECK_EQ(qhca_engine_save(&n->e, &buf, len), 0);
	return buf;
}

/* A busy pair: connected RC QPs with WRITEs and READs in flight (the other sections:
 * windows, fast-register regions, SRQs, XRC, UD, multicast, come from test-transport's and
 * test-ib's own tests moved under QHCA_TEST_MIGRATE). */
static void busy_pair(struct qp *a, struct qp *b, uint64_t *lbuf, uint64_t *rbuf)
{
	uint32_t lkey, rkey, i;

	rc_pair(a, b, 1 << 20, &lkey, lbuf, &rkey, rbuf, QHCA_ACCESS_ALL);
	for (i = 0; i < 6; i++) {
		struct qhca_sq_wqe *w = sq_wqe(a, i % 2 ? QHCA_WR_RDMA_READ : QHCA_WR_RDMA_WRITE,
					       i, *lbuf + i * 65536, 65536, lkey);

		w->remote_addr = *rbuf + i * 65536;
		w->rkey = rkey;
		post_send(a);
	}
	pump_steps(40);		/* part of it on the way */
}

/* The counts a load recomputes, equal in @a and @b. */
static void same_counts(struct qhca_engine *a, struct qhca_engine *b)
{
	const struct qhca_obj_table *ta[] = { &a->uctx, &a->pd, &a->xrcd, &a->eq_table },
				    *tb[] = { &b->uctx, &b->pd, &b->xrcd, &b->eq_table };
	uint32_t t, i;

	for (t = 0; t < 4; t++)
		CHECK(!memcmp(ta[t]->users, tb[t]->users, ta[t]->capacity * sizeof(uint32_t)));
	for (i = 0; i < a->cfg.max_cq; i++)
		CHECK(!a->cq[i] == !b->cq[i] && (!a->cq[i] || a->cq[i]->refs == b->cq[i]->refs));
	for (i = 0; i < a->cfg.max_srq; i++)
		CHECK(!a->srq[i] == !b->srq[i] && (!a->srq[i] || a->srq[i]->refs == b->srq[i]->refs));
	for (i = 0; i < a->cfg.max_mr; i++)
		CHECK(!a->mr[i] == !b->mr[i] &&
		      (!a->mr[i] || (a->mr[i]->refs == b->mr[i]->refs &&
				     a->mr[i]->windows == b->mr[i]->windows)));
	CHECK_EQ(a->timer_n, b->timer_n);
}

static void test_round_trip_exact(void)
{
	struct qhca_engine *e2;
	uint8_t *s1, *s2 = NULL;
	size_t l1, l2 = 0;
	uint64_t lbuf, rbuf;
	char why[256];
	struct qp a, b;
	int i;

	setup();
	busy_pair(&a, &b, &lbuf, &rbuf);
	for (i = 0; i < 2; i++) {
		s1 = save(&nodes[i], &l1);
		e2 = qhca_engine_load(&nodes[i].e.cfg, &ops, &nodes[i], s1, l1, why, sizeof(why));
		if (!e2)
			fprintf(stderr, "  refused: %s\n", why);
		CHECK(e2);
		if (!e2)
			break;
		/* the same state: the same stream again, byte for byte, and the same view */
		CHECK_EQ(qhca_engine_save(e2, &s2, &l2), 0);
		CHECK_EQ(l1, l2);
		CHECK(l1 == l2 && !memcmp(s1, s2, l1));
		{
			static char d1[1 << 16], d2[1 << 16];

			qhca_engine_describe(&nodes[i].e, d1, sizeof(d1));
			qhca_engine_describe(e2, d2, sizeof(d2));
			CHECK(!strcmp(d1, d2));
		}
		CHECK_EQ(e2->qp_table.count, nodes[i].e.qp_table.count);
		CHECK_EQ(e2->host_bytes, nodes[i].e.host_bytes);
		CHECK_EQ(e2->qp_window_bytes, nodes[i].e.qp_window_bytes);
		/* what the loader recomputes: holds, references, windows */
		same_counts(&nodes[i].e, e2);
		qhca_engine_free(e2);
		free(s1);
		free(s2);
	}
	pump();
	teardown();
}

/*
 * The lossy mixed traffic of test-transport (WRITE, READ, SEND, FETCH_AND_ADD, with
 * loss, reordering, duplicates and back-pressure), one node moved at random moments, and
 * each move losing the frames on the wire to and from it (the switch-over): every byte
 * arrives, every atomic executes once, the QPs stay in RTS.
 */
static void test_migrate_under_traffic(void)
{
	uint64_t lbuf, rbuf, cnt = 0;
	unsigned long moves = 0;
	uint32_t lkey, rkey, i, j;
	struct qp a, b;

	setup();
	srand(4242);
	rc_pair(&a, &b, 1 << 20, &lkey, &lbuf, &rkey, &rbuf, QHCA_ACCESS_ALL);
	for (i = 0; i < 16; i++) {
		uint32_t off[8], len[8], n = 1 + (uint32_t)rand() % 8, base = 0;
		uint8_t op[8];
		int failures = unit_failures;

		drop_pct = (unsigned)rand() % 3 ? (unsigned)rand() % 10 : 0;
		reorder_pct = (unsigned)rand() % 10;
		dup_pct = (unsigned)rand() % 5;
		fill(&nodes[0], lbuf, 1 << 19, (uint8_t)(i * 7));
		fill(&nodes[1], rbuf + (1 << 19), 1 << 19, (uint8_t)(i * 5));
		memset(gptr(&nodes[0], va_to_gpa(lbuf + (1 << 19))), 0, 1 << 19);
		memset(gptr(&nodes[1], va_to_gpa(rbuf)), 0, 1 << 19);
		cnt = 0;	/* the atomics' counter, in the last 8 bytes of that half */
		for (j = 0; j < n; j++) {
			struct qhca_sq_wqe *w;
			uint32_t r = (uint32_t)rand() % 10;

			op[j] = r < 3 ? QHCA_WR_RDMA_READ : r < 6 ? QHCA_WR_RDMA_WRITE :
				r < 9 ? QHCA_WR_SEND : QHCA_WR_ATOMIC_FETCH_AND_ADD;
			len[j] = op[j] == QHCA_WR_ATOMIC_FETCH_AND_ADD ? 8 :
				 1 + (uint32_t)rand() % 60000;
			off[j] = base;
			base += (len[j] + 63) & ~63u;
			if (op[j] == QHCA_WR_SEND)
				post_recv(&b, 500 + j, rbuf + off[j], 65536, rkey);
			w = sq_wqe(&a, op[j], j, lbuf + (op[j] == QHCA_WR_RDMA_READ ||
							op[j] == QHCA_WR_ATOMIC_FETCH_AND_ADD ?
							(1 << 19) : 0) + off[j], len[j], lkey);
			w->remote_addr = op[j] == QHCA_WR_RDMA_READ ? rbuf + (1 << 19) + off[j] :
					 op[j] == QHCA_WR_ATOMIC_FETCH_AND_ADD ?
					 rbuf + (1 << 19) - 8 : rbuf + off[j];
			w->rkey = rkey;
			w->compare_add = 1;
			post_send(&a);
		}
		/* move a node now and then while it works */
		while (!pump_steps(1 + (unsigned)rand() % 200)) {
			struct node *mv = &nodes[rand() % 2];
			unsigned k;

			for (k = 0; k < link_n;) {
				if (link_at(k)->to == mv->id || (unsigned)rand() % 2) {
					struct frame f;

					link_take(k, &f);	/* lost in the switch-over */
				} else {
					k++;
				}
			}
			migrate_node(mv);
			moves++;
		}
		for (j = 0; j < n; j++) {
			uint8_t wc = op[j] == QHCA_WR_ATOMIC_FETCH_AND_ADD ? QHCA_WC_FETCH_ADD :
				     op[j] == QHCA_WR_RDMA_WRITE ? QHCA_WC_RDMA_WRITE :
				     op[j] == QHCA_WR_RDMA_READ ? QHCA_WC_RDMA_READ : QHCA_WC_SEND;

			expect_cqe(&nodes[0], &a.scq, j, QHCA_WC_SUCCESS, wc, len[j]);
			if (op[j] == QHCA_WR_SEND)
				expect_cqe(&nodes[1], &b.rcq, 500 + j, QHCA_WC_SUCCESS, QHCA_WC_RECV,
					   len[j]);
			if (op[j] == QHCA_WR_RDMA_READ)
				CHECK(same(&nodes[0], lbuf + (1 << 19) + off[j], &nodes[1],
					   rbuf + (1 << 19) + off[j], len[j]));
			else if (op[j] != QHCA_WR_ATOMIC_FETCH_AND_ADD)
				CHECK(same(&nodes[0], lbuf + off[j], &nodes[1], rbuf + off[j], len[j]));
			else
				cnt++;
		}
		/* each FETCH_AND_ADD added 1 exactly once, moves or not */
		CHECK(!memcmp(gptr(&nodes[1], va_to_gpa(rbuf + (1 << 19) - 8)), &cnt, 8));
		expect_empty(&nodes[0], &a.scq);
		CHECK_EQ(qhca_qp_find(&nodes[0].e, a.qpn)->state, QHCA_QPS_RTS);
		CHECK_EQ(qhca_qp_find(&nodes[1].e, b.qpn)->state, QHCA_QPS_RTS);
		if (unit_failures != failures) {
			fprintf(stderr, "  batch %u failed\n", i);
			break;
		}
	}
	printf("# %lu moves during 16 batches of mixed traffic\n", moves);
	CHECK(moves >= 16);
	drop_pct = reorder_pct = dup_pct = 0;
	teardown();
}

/* Frames node 0 sent node 1 (kept by busy_pair's caller): fed to loaded engines. */
static struct frame *kept;
static unsigned nkept;

/* Load @s into a fresh engine of node 1's configuration: true if it was taken. A taken
 * state is then worked: resumed, the kept frames received (twice: the second time
 * duplicates), its timers run, described and reset, as a migrated device would be. */
static bool loads(const uint8_t *s, size_t len, char *why, size_t why_len)
{
	struct qhca_engine *e = qhca_engine_load(&nodes[1].e.cfg, &ops, &nodes[1], s, len, why,
						 why_len);
	static char desc[1 << 16];
	unsigned i, k;

	if (!e)
		return false;
	qhca_engine_resume(e);
	for (k = 0; k < 2; k++)
		for (i = 0; i < nkept; i++)
			qhca_engine_receive(e, kept[i].data, kept[i].len);
	for (i = 0; i < 8; i++) {
		now += 100000000ull;
		qhca_engine_timer(e);
	}
	qhca_engine_describe(e, desc, sizeof(desc));
	qhca_engine_reset(e);
	qhca_engine_free(e);
	link_n = 0;	/* what it sent goes nowhere */
	return true;
}

static void put32_at(uint8_t *s, size_t off, uint32_t v)
{
	memcpy(s + off, &v, 4);
}

/* Streams that must be refused, cleanly (the sanitizer tier runs this under ASan). */
static void test_hostile_streams(void)
{
	struct qhca_engine_config c;
	uint64_t lbuf, rbuf;
	uint8_t *s, *t;
	size_t len, i;
	unsigned flips, taken = 0;
	char why[256];
	struct qp a, b;

	setup();
	busy_pair(&a, &b, &lbuf, &rbuf);
	/* keep what is on the wire to node 1 now, for the loaded engines to receive */
	kept = calloc(link_n + 1, sizeof(*kept));
	for (i = 0; i < link_n; i++)
		if (link_at((unsigned)i)->to == 1)
			kept[nkept++] = *link_at((unsigned)i);
	s = save(&nodes[1], &len);
	t = malloc(len + 1);
	CHECK(loads(s, len, why, sizeof(why)));
	/* every truncation */
	for (i = 0; i < len; i++)
		CHECK(!loads(s, i, why, sizeof(why)));
	/* a byte more */
	memcpy(t, s, len);
	t[len] = 0;
	CHECK(!loads(t, len + 1, why, sizeof(why)));
	CHECK(strstr(why, "bytes after the end") != NULL);
	/* another magic, format version, device interface */
	for (i = 0; i < 16; i += 4) {
		memcpy(t, s, len);
		t[i] ^= 0x40;
		CHECK(!loads(t, len, why, sizeof(why)));
	}
	/* another configuration: the destination's max-qp differs */
	c = nodes[1].e.cfg;
	c.max_qp = 8;
	{
		struct qhca_engine *e = qhca_engine_load(&c, &ops, &nodes[1], s, len, why,
							 sizeof(why));

		CHECK(!e);
		CHECK(strstr(why, "max-qp differs") != NULL);
		qhca_engine_free(e);
	}
	/* object counts past the table: where a table's head is max-qp then the QP count (the
	 * QP table's, and any other of that capacity and count), the count set to 2^31: refused
	 * for that count, not for anything else */
	{
		unsigned probes = 0, counts = 0;

		memcpy(t, s, len);
		for (i = 16; i + 8 <= len; i++) {
			uint32_t v, old;

			memcpy(&v, t + i, 4);
			memcpy(&old, t + i + 4, 4);
			/* a table's head: its capacity and its count */
			if (v != nodes[1].e.cfg.max_qp || old != nodes[1].e.qp_table.count)
				continue;
			put32_at(t, i + 4, 0x80000000u);
			CHECK(!loads(t, len, why, sizeof(why)));
			probes++;
			counts += strstr(why, "more objects than slots") != NULL;
			CHECK(strstr(why, "more objects than slots") != NULL);
			put32_at(t, i + 4, old);
		}
		CHECK(probes > 0);
		CHECK(counts > 0);
	}
	/* random corruption: refused or taken, never a crash, a leak or a host error */
	srand(31337);
	for (flips = 0; flips < 4000; flips++) {
		unsigned k, nb = 1 + (unsigned)rand() % 4;

		memcpy(t, s, len);
		for (k = 0; k < nb; k++)
			t[(size_t)rand() % len] ^= (uint8_t)(1u << (rand() % 8));
		taken += loads(t, len, why, sizeof(why));
	}
	printf("# %u of 4000 corrupted streams loaded (flags, counters, PSNs) and worked, the "
	       "rest refused\n", taken);
	/* both happen: corruption of a check's field is refused, of a mere value taken */
	CHECK(taken > 0 && taken < 4000);
	free(kept);
	kept = NULL;
	nkept = 0;
	free(t);
	free(s);
	pump();
	teardown();
}

/*
 * A SEND whose inline length passes max_inline fails at its start (LOC_QP_OP_ERR) but keeps
 * its header, and waits behind a WRITE in flight to complete: saving then copies none of
 * the length it names (under ASan, an over-read of the snapshot's inline buffer would show).
 */
static void test_failed_inline_wqe_saved(void)
{
	uint64_t lbuf, rbuf;
	uint32_t lkey, rkey;
	struct qhca_sq_wqe *w;
	struct qp a, b;
	uint8_t *st;
	size_t len;
	char why[256];

	setup();
	rc_pair(&a, &b, 1 << 16, &lkey, &lbuf, &rkey, &rbuf, QHCA_ACCESS_ALL);
	w = post_write(&a, 1, lbuf, 4096, lkey, rbuf, rkey);
	(void)w;
	w = sq_wqe(&a, QHCA_WR_SEND, 2, lbuf, 0, lkey);
	w->flags |= QHCA_WQE_INLINE;
	w->num_sge = 0;
	w->inline_len = 1u << 20;	/* max_inline is 256 */
	post_send(&a);
	link_n = 0;	/* the WRITE's packets lost: it waits, unacknowledged, for its timer */
	CHECK_EQ(qhca_qp_find(&nodes[0].e, a.qpn)->sq_next - qhca_qp_find(&nodes[0].e, a.qpn)->sq.ci,
		 2);
	st = save(&nodes[0], &len);
	CHECK(len < 65536);	/* not a MiB of host memory */
	{
		struct qhca_engine *e2 = qhca_engine_load(&nodes[0].e.cfg, &ops, &nodes[0], st, len,
							  why, sizeof(why));

		if (!e2)
			fprintf(stderr, "  refused: %s\n", why);
		CHECK(e2 != NULL);
		qhca_engine_free(e2);
	}
	free(st);
	/* the moved WRITE and the failed SEND complete in order */
	migrate_node(&nodes[0]);
	now += 1000000000ull;
	nodes[0].deadline = now;
	pump();
	expect_cqe(&nodes[0], &a.scq, 1, QHCA_WC_SUCCESS, QHCA_WC_RDMA_WRITE, 4096);
	expect_cqe(&nodes[0], &a.scq, 2, QHCA_WC_LOC_QP_OP_ERR, QHCA_WC_SEND, 0);
	teardown();
}

/*
 * Work a doorbell's budget left to the timer (docs/security.md, "Admin work per doorbell"
 * and the send queue's beside it) moves with the state: 1024 REG_MRs and a UC WRITE of
 * 32 MiB cut between two packets, the node moved before the timer goes on and again half
 * way: every REG_MR completes, in order, the WRITE once.
 */
static void test_sq_budget_moves(void)
{
	struct qhca_engine_config c = harness_default_cfg();
	struct node *n = &nodes[0];
	const uint32_t log2 = 10, depth = 1u << log2;
	const uint64_t len = 32ull << 20;
	uint32_t *keys, i, got, lkey, pieces = 0, j;
	uint64_t list, next = 0, page, list1, dir;
	struct qhca_mr_create m;
	struct qhca_sq_wqe *w;
	struct qhca_cqe cqe;
	struct qp a, u, v, peer;

	c.max_qp = 64;
	c.max_mr = 2 * depth;
	setup_cfg(&c);
	peer = make_qp(&nodes[1], QHCA_QPT_RC, 0);
	a = make_deep_qp(n, log2, &peer);
	list = fast_reg_list(n);
	keys = calloc(depth, sizeof(*keys));
	for (i = 0; i < depth; i++) {
		keys[i] = make_frmr(n, QHCA_MAX_FAST_REG_PAGES);
		deep_reg(&a, log2, i, keys[i], list);
	}
	ring(n, QHCA_DB_SQ, a.qpn, a.sq_pi);
	got = take_in_order(n, &a.scq, &next, QHCA_WC_SUCCESS);
	CHECK(got >= 1 && got <= QHCA_SQ_WQE_BUDGET);
	/* a UC WRITE from a region of one page listed 8192 times (two levels) */
	u = make_qp(n, QHCA_QPT_UC, 0);
	v = make_qp(&nodes[1], QHCA_QPT_UC, 0);
	connect_pair(&u, &v);
	page = galloc(n, 4096);
	list1 = galloc(n, 4096);
	dir = galloc(n, 4096);
	for (j = 0; j < 512; j++)
		((uint64_t *)gptr(n, list1))[j] = page;
	for (j = 0; j < (len >> 12) / 512; j++)
		((uint64_t *)gptr(n, dir))[j] = list1;
	m = (struct qhca_mr_create){ .pd = n->pd, .iova = 1ull << 40, .length = len,
				     .access = QHCA_ACCESS_LOCAL_WRITE,
				     .pbl = { .addr = dir, .npages = (uint32_t)(len >> 12),
					      .levels = 2 } };
	CHECK_EQ(qhca_mr_create(&n->e, &m, &lkey), QHCA_ST_OK);
	w = sq_wqe(&u, QHCA_WR_RDMA_WRITE, 77, m.iova, (uint32_t)len, lkey);
	w->remote_addr = 1ull << 40;
	w->rkey = 0x100;
	post_send(&u);
	link_n = link_head = 0;
	expect_empty(n, &u.scq);	/* cut by the byte budget */
	migrate_node(n);
	/* the load queued both, once each; a doorbell on one of them meanwhile only records
	 * its index */
	CHECK_EQ(n->e.sq_defer_n, 2);
	ring(n, QHCA_DB_SQ, a.qpn, a.sq_pi);
	CHECK_EQ(take_in_order(n, &a.scq, &next, QHCA_WC_SUCCESS), 0);
	CHECK_EQ(n->e.sq_defer_n, 2);
	while (timer_now(n) && pieces < 4 * depth) {
		got += take_in_order(n, &a.scq, &next, QHCA_WC_SUCCESS);
		link_n = link_head = 0;
		if (++pieces == 3)
			migrate_node(n);
	}
	printf("# %u timer callbacks after the move\n", pieces);
	CHECK_EQ(got, depth);
	CHECK(poll_cq(n, &u.scq, &cqe) && cqe.wr_id == 77 && cqe_status(&cqe) == QHCA_WC_SUCCESS);
	expect_empty(n, &u.scq);
	free(keys);
	teardown();
}

/* ---------------------------------------------------------------- the link's own state */
/* The configuration's link byte: after the magic, the two versions and 13 words. */
#define STREAM_LINK_OFF	(8 + 4 + 4 + 13 * 4)

/* Load @s (@len bytes) into a new engine of @n's configuration on link @link, as an
 * incoming migration would; if taken, work it (resume, timers, reset) and say so. */
static bool loads_as(struct node *n, uint8_t link, const uint8_t *s, size_t len, char *why,
		     size_t why_len)
{
	struct qhca_engine_config c = n->e.cfg;
	struct qhca_engine *e;
	unsigned i;

	c.link = link;
	e = qhca_engine_load(&c, &ops, n, s, len, why, why_len);
	if (!e)
		return false;
	qhca_engine_resume(e);
	for (i = 0; i < 4; i++) {
		now += 100000000ull;
		qhca_engine_timer(e);
	}
	qhca_engine_reset(e);
	qhca_engine_free(e);
	link_n = 0;
	return true;
}

/* @n's state saved, its link byte set to @link (what a hostile stream can say), refused by
 * a destination on that link with a message containing @want. */
static void refused_as(struct node *n, uint8_t link, const char *want)
{
	char why[256] = "";
	uint8_t *s;
	size_t len;

	s = save(n, &len);
	CHECK_EQ(s[STREAM_LINK_OFF], n->e.cfg.link);
	s[STREAM_LINK_OFF] = link;
	if (loads_as(n, link, s, len, why, sizeof(why))) {
		fprintf(stderr, "  link %u's state loaded on link %u (wanted: %s)\n",
			n->e.cfg.link, link, want);
		CHECK(!"refused");
	} else if (!strstr(why, want)) {
		fprintf(stderr, "  refused for \"%s\", not \"%s\"\n", why, want);
		CHECK(!"refused for the link");
	}
	free(s);
}

/* An InfiniBand port as a subnet manager leaves it: Set(PortInfo) with @lid, SM LID 1 and
 * ARMED, then ACTIVE, through the SMA (MAD_IFC). */
static void sm_activate(struct node *n, uint16_t lid)
{
	static const uint8_t states[] = { IB_PORT_ARMED, IB_PORT_ACTIVE };
	uint8_t in[IB_MAD_LEN], out[IB_MAD_LEN];
	struct ib_port_info pi;
	unsigned k;

	for (k = 0; k < 2; k++) {
		memset(in, 0, sizeof(in));
		in[IB_MAD_BASE_VERSION] = 1;
		in[IB_MAD_CLASS] = IB_MCLASS_SMP_LID;
		in[IB_MAD_CLASS_VERSION] = 1;
		in[IB_MAD_METHOD] = IB_METHOD_GET;
		ib_put16(in + IB_MAD_ATTR_ID, IB_ATTR_PORT_INFO);
		ib_put32(in + IB_MAD_ATTR_MOD, 1);
		CHECK_EQ(qhca_mad_ifc(&n->e, in, out, false), 1);
		ib_port_info_unpack(out + IB_SMP_DATA, &pi);
		pi.lid = lid;
		pi.sm_lid = 1;
		pi.state = states[k];
		pi.phys_state = IB_PHYS_NOP;
		in[IB_MAD_METHOD] = IB_METHOD_SET;
		ib_port_info_pack(&pi, in + IB_SMP_DATA);
		CHECK_EQ(qhca_mad_ifc(&n->e, in, out, false), 1);
		CHECK_EQ(ib_get16(out + IB_MAD_STATUS), 0);
	}
	CHECK(qhca_ib_active(&n->e));
}

/* The Ethernet function of @n started on two rings of its memory. */
static void eth_start(struct node *n)
{
	struct qhca_cmd_eth_start c = { .tx_ring = galloc(n, 4096), .rx_ring = galloc(n, 4096),
					.tx_log2 = 4, .rx_log2 = 4, .vector = 1 };

	CHECK_EQ(qhca_eth_start(&n->e, &c), QHCA_ST_OK);
}

/*
 * A stream says its link in its configuration, which must be the destination's; the rest
 * must be what a device on that link can hold. Crafted streams that loaded before, each
 * made so that one check alone refuses it (each fails with that check left out): RoCE's
 * state relabelled iWARP (RC QPs with WRITEs and READs in flight; a connected QP with
 * nothing in flight; a QP in error with a WRITE half received; one in error that keeps its
 * READ history; a QP in INIT listed as waiting to send; a UD QP; a frame waiting for
 * loopback), InfiniBand's port (LIDs, an SM, ACTIVE, its counters zeroed) relabelled RoCE
 * and iWARP, QP0 and InfiniBand's counters on Ethernet, a QP1 the admin queue did not
 * record, and the Ethernet function relabelled InfiniBand. Each is refused, for its own
 * reason.
 */
static void test_link_state_refused(void)
{
	struct qhca_qp_attr at;
	uint64_t lbuf, rbuf;
	uint32_t lkey, rkey;
	struct qp a, b, u;

	/* RoCE relabelled iWARP: messages in flight both ways; connected comes first */
	setup();
	busy_pair(&a, &b, &lbuf, &rbuf);
	refused_as(&nodes[0], QHCA_LINK_IWARP, "a connected iWARP QP");
	refused_as(&nodes[1], QHCA_LINK_IWARP, "a connected iWARP QP");
	link_n = 0;
	teardown();
	/* connected with nothing in flight: the QP's state alone */
	setup();
	a = make_qp(&nodes[0], QHCA_QPT_RC, 0);
	b = make_qp(&nodes[1], QHCA_QPT_RC, 0);
	connect_pair(&a, &b);
	refused_as(&nodes[0], QHCA_LINK_IWARP, "a connected iWARP QP");
	teardown();
	/* in error, with the first packet of a WRITE received: the transport's state alone */
	setup();
	rc_pair(&a, &b, 65536, &lkey, &lbuf, &rkey, &rbuf, QHCA_ACCESS_ALL);
	post_write(&a, 1, lbuf, 65536, lkey, rbuf, rkey);
	CHECK(link_n > 1);
	{
		struct frame f;

		link_take(0, &f);
		link_deliver(&f, 0);
	}
	link_n = link_head = 0;
	memset(&at, 0, sizeof(at));
	at.state = QHCA_QPS_ERR;
	CHECK_EQ(modify(&b, QHCA_QP_STATE, &at), QHCA_ST_OK);
	CHECK(qhca_qp_find(&nodes[1].e, b.qpn)->write_active);
	refused_as(&nodes[1], QHCA_LINK_IWARP, "RoCE transport state on an iWARP port");
	teardown();
	/* the responder's READ history, kept in the error state: that alone */
	setup();
	busy_pair(&a, &b, &lbuf, &rbuf);
	pump();
	CHECK_EQ(modify(&b, QHCA_QP_STATE, &at), QHCA_ST_OK);
	refused_as(&nodes[1], QHCA_LINK_IWARP, "RoCE's READ/ATOMIC history on an iWARP port");
	teardown();
	/* a QP in INIT (nothing else of RoCE's) listed as waiting to send */
	setup();
	a = make_qp(&nodes[0], QHCA_QPT_RC, 0);
	memset(&at, 0, sizeof(at));
	at.state = QHCA_QPS_INIT;
	at.access_flags = QHCA_ACCESS_ALL;
	CHECK_EQ(modify(&a, QHCA_QP_STATE | QHCA_QP_ACCESS_FLAGS, &at), QHCA_ST_OK);
	qhca_tx_wait(&nodes[0].e, qhca_qp_find(&nodes[0].e, a.qpn));
	refused_as(&nodes[0], QHCA_LINK_IWARP, "RoCE's QPs waiting to send on an iWARP port");
	teardown();
	setup();
	u = make_qp(&nodes[0], QHCA_QPT_UD, 0);
	refused_as(&nodes[0], QHCA_LINK_IWARP, "a QP of a type an iWARP port does not have");
	(void)u;
	teardown();
	/* a RoCE frame to the port's own address, waiting for the loopback drain */
	setup();
	{
		uint8_t f[64] = { 0 };

		memcpy(f, nodes[0].mac, 6);
		memcpy(f + 6, nodes[0].mac, 6);
		f[12] = 0x89;
		f[13] = 0x15;
		qhca_xmit_frame(&nodes[0].e, f, sizeof(f));
		CHECK_EQ(nodes[0].e.loop_count, 1);
	}
	refused_as(&nodes[0], QHCA_LINK_IWARP, "frames for loopback on an iWARP port");
	teardown();
	/* InfiniBand's port on Ethernet: the port alone (the SMPs that set it not counted) */
	harness_link = QHCA_LINK_IB;
	setup();
	harness_link = QHCA_LINK_ROCE;
	sm_activate(&nodes[0], 5);
	nodes[0].e.cnt.smps = nodes[0].e.cnt.ib_rx_bad_lid = 0;
	refused_as(&nodes[0], QHCA_LINK_ROCE, "InfiniBand port state (LIDs, SM, M_Key");
	refused_as(&nodes[0], QHCA_LINK_IWARP, "InfiniBand port state (LIDs, SM, M_Key");
	teardown();
	setup();
	a = make_qp(&nodes[0], QHCA_QPT_SMI, 0);	/* as no command makes it on RoCE */
	refused_as(&nodes[0], QHCA_LINK_ROCE, "QP0 on an Ethernet port");
	teardown();
	setup();
	nodes[0].e.cnt.smps = 3;
	refused_as(&nodes[0], QHCA_LINK_ROCE, "InfiniBand counters on an Ethernet port");
	teardown();
	/* a special QP that the admin queue did not record as one (CREATE_QP does) */
	setup();
	a = make_qp(&nodes[0], QHCA_QPT_GSI, 0);
	refused_as(&nodes[0], QHCA_LINK_ROCE, "a special QP that CREATE_QP did not record");
	teardown();
	/* Ethernet's function on InfiniBand */
	setup();
	eth_start(&nodes[0]);
	refused_as(&nodes[0], QHCA_LINK_IB, "an Ethernet function on an InfiniBand port");
	teardown();
}

/* A state moved to a new engine of the same configuration: the same stream again. */
static void round_trips(struct node *n)
{
	uint8_t *s1, *s2 = NULL;
	size_t l1, l2 = 0;
	struct qhca_engine *e;
	char why[256];

	s1 = save(n, &l1);
	e = qhca_engine_load(&n->e.cfg, &ops, n, s1, l1, why, sizeof(why));
	if (!e)
		fprintf(stderr, "  link %u: refused: %s\n", n->e.cfg.link, why);
	CHECK(e != NULL);
	if (e) {
		CHECK_EQ(qhca_engine_save(e, &s2, &l2), 0);
		CHECK(l1 == l2 && !memcmp(s1, s2, l1));
		qhca_engine_free(e);
	}
	free(s1);
	free(s2);
	migrate_node(n);	/* and the node goes on from it */
}

/*
 * Each link's own state still moves: RoCE with messages in flight, QP1, the Ethernet
 * function; InfiniBand with its port ACTIVE (LIDs, an SM), QP0 and QP1, a multicast group,
 * an RC pair with messages in flight; iWARP's objects and unconnected QPs (RESET, INIT, in
 * error), the Ethernet function. (test-transport and test-ib move every one of their
 * tests' states too, under QHCA_TEST_MIGRATE.)
 */
static void test_link_state_round_trips(void)
{
	struct qhca_mcast m = { .gid = { 0xff, 0x12, 0x40, 0x1b }, .mlid = 0xc001 };
	struct qhca_qp_attr at;
	uint64_t lbuf, rbuf;
	struct qp a, b, g, u, i0, i1, i2;
	int k;

	setup();
	busy_pair(&a, &b, &lbuf, &rbuf);
	g = make_qp(&nodes[0], QHCA_QPT_GSI, 0);
	nodes[0].e.gsi_qpn = g.qpn;	/* as the admin queue's CREATE_QP records it */
	eth_start(&nodes[0]);
	round_trips(&nodes[0]);
	round_trips(&nodes[1]);
	pump();
	teardown();

	harness_link = QHCA_LINK_IB;
	setup();
	harness_link = QHCA_LINK_ROCE;
	for (k = 0; k < 2; k++)
		sm_activate(&nodes[k], (uint16_t)(k + 1));
	g = make_qp(&nodes[0], QHCA_QPT_SMI, 0);
	nodes[0].e.smi_qpn = g.qpn;
	g = make_qp(&nodes[0], QHCA_QPT_GSI, 0);
	nodes[0].e.gsi_qpn = g.qpn;
	u = make_qp(&nodes[0], QHCA_QPT_UD, 0);
	CHECK_EQ(qhca_mcast_attach(&nodes[0].e, u.qpn, &m), QHCA_ST_OK);
	busy_pair(&a, &b, &lbuf, &rbuf);
	round_trips(&nodes[0]);
	round_trips(&nodes[1]);
	pump();
	teardown();

	harness_link = QHCA_LINK_IWARP;
	setup();
	harness_link = QHCA_LINK_ROCE;
	i0 = make_qp(&nodes[0], QHCA_QPT_RC, 0);
	i1 = make_qp(&nodes[0], QHCA_QPT_RC, 0);
	i2 = make_qp(&nodes[0], QHCA_QPT_RC, 0);
	memset(&at, 0, sizeof(at));
	at.state = QHCA_QPS_INIT;
	at.access_flags = QHCA_ACCESS_ALL;
	CHECK_EQ(modify(&i1, QHCA_QP_STATE | QHCA_QP_ACCESS_FLAGS, &at), QHCA_ST_OK);
	CHECK_EQ(modify(&i2, QHCA_QP_STATE | QHCA_QP_ACCESS_FLAGS, &at), QHCA_ST_OK);
	at.state = QHCA_QPS_ERR;
	CHECK_EQ(modify(&i2, QHCA_QP_STATE, &at), QHCA_ST_OK);
	make_mr(&nodes[0], 4096, QHCA_ACCESS_ALL, &lbuf);
	make_frmr(&nodes[0], 16);
	eth_start(&nodes[0]);
	(void)i0;
	round_trips(&nodes[0]);
	teardown();
}

static const struct unit_test tests[] = {
	{ "failed_inline_wqe_saved", test_failed_inline_wqe_saved },
	{ "round_trip_exact", test_round_trip_exact },
	{ "migrate_under_traffic", test_migrate_under_traffic },
	{ "hostile_streams", test_hostile_streams },
	{ "sq_budget_moves", test_sq_budget_moves },
	{ "link_state_refused", test_link_state_refused },
	{ "link_state_round_trips", test_link_state_round_trips },
	{}
};

int main(int argc, char **argv)
{
	return unit_main(tests, argc, argv);
}
