// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * What a guest's sizes can cost the host, at the QEMU device's default limits: every page
 * list, record and send window a guest sizes is charged to one budget (host-mem-mb), and a
 * guest that churns objects leaves nothing behind (docs/security.md, "What a guest can
 * cost the host").
 */
#include <malloc.h>

#include "transport_harness.h"

#ifdef __SANITIZE_ADDRESS__
#define HEAP_VISIBLE	0	/* ASan's allocator does not answer mallinfo2 */
#else
#define HEAP_VISIBLE	1
#endif

/* Bytes of the process's heap in use, and taken from the system. */
static uint64_t heap_in_use(void)
{
	struct mallinfo2 m = mallinfo2();

	return m.uordblks + m.hblkhd;
}

static uint64_t heap_from_system(void)
{
	struct mallinfo2 m = mallinfo2();

	return m.arena + m.hblkhd;
}

/*
 * A two-level page list of @npages entries that all name the same guest page: what a
 * hostile driver gives to describe a huge ring or region with a few KiB of its memory.
 */
static struct qhca_pbl same_page_pbl(struct node *n, uint32_t npages)
{
	uint32_t ndir = (npages + QHCA_PBL_PER_PAGE - 1) / QHCA_PBL_PER_PAGE, i;
	uint64_t page = galloc(n, 4096), list = galloc(n, 4096), dir = galloc(n, ndir * 8ull);

	for (i = 0; i < QHCA_PBL_PER_PAGE; i++)
		((uint64_t *)gptr(n, list))[i] = page;
	for (i = 0; i < ndir; i++)
		((uint64_t *)gptr(n, dir))[i] = list;
	return (struct qhca_pbl){ .addr = dir, .npages = npages, .levels = 2 };
}

/*
 * The attack of issue 25: QPs whose two rings of 32768 WQEs of 4 KiB are one guest page
 * listed 65536 times, from about 4.5 KiB of guest memory a QP, cost 512 KiB of page lists
 * each. Without the budget 262144 of them took 128 GiB; with it, creates fail cleanly once
 * the device's host memory is used, and that memory is what the heap grew by.
 */
static void test_qp_page_lists_within_budget(void)
{
	struct node *n = &nodes[0];
	struct qhca_qp_create c;
	struct qhca_pbl pbl;
	uint64_t budget, base, heap0 = 0, grown = 0;
	uint32_t limit, made = 0, i, *qpns;
	uint16_t st = QHCA_ST_OK;
	struct cq cq;

	setup_limits(true);
	budget = n->e.host_budget;
	CHECK_EQ(budget, (uint64_t)QHCA_HOST_MEM_MB << 20);
	cq = make_cq(n, 4);
	pbl = same_page_pbl(n, 32768);
	c = (struct qhca_qp_create){ .pd = n->pd, .type = QHCA_QPT_RC, .send_cq = cq.cqn,
				     .recv_cq = cq.cqn, .sq_log2 = 15, .rq_log2 = 15,
				     .sq_stride_log2 = 12, .rq_stride_log2 = 12,
				     .sq_pbl = pbl, .rq_pbl = pbl };
	limit = (uint32_t)(budget / (512u << 10)) + 64;	/* well past the budget */
	qpns = calloc(limit, sizeof(*qpns));
	base = n->e.host_bytes;
	heap0 = heap_in_use();
	for (i = 0; i < limit; i++) {
		st = qhca_qp_create(&n->e, &c, &qpns[made]);
		if (st != QHCA_ST_OK)
			break;
		made++;
	}
	grown = heap_in_use() - heap0;
	CHECK_EQ(st, QHCA_ST_NO_RESOURCES);
	CHECK(made >= limit / 2);	/* the budget is there to be used */
	/* refused for want of room: less than one more QP's charge was left */
	CHECK(made && budget - n->e.host_bytes < (n->e.host_bytes - base) / made);
	/* The allocator's own overhead aside (a page a large block): under 2 %. */
	if (HEAP_VISIBLE)
		CHECK(grown <= budget + budget / 50);
	/* The budget is the device's: a big region finds none left, nor (soon) a big CQ. */
	{
		struct qhca_mr_create m = { .pd = n->pd, .length = 1ull << 30,
					    .access = QHCA_ACCESS_LOCAL_WRITE,
					    .pbl = same_page_pbl(n, 1u << 18) };
		struct qhca_cq_create cc = { .log2_entries = 22, .eq = n->eq,
					     .pbl = same_page_pbl(n, 32769) };
		uint32_t key, cqn[4], ncq = 0;

		CHECK_EQ(qhca_mr_create(&n->e, &m, &key), QHCA_ST_NO_RESOURCES);
		while (ncq < 4 && (st = qhca_cq_create(&n->e, &cc, &cqn[ncq])) == QHCA_ST_OK)
			ncq++;
		CHECK_EQ(st, QHCA_ST_NO_RESOURCES);
		while (ncq)
			CHECK_EQ(qhca_cq_destroy(&n->e, cqn[--ncq]), QHCA_ST_OK);
	}
	printf("# %u QPs with two 128 MiB rings each: %llu MiB of host memory (budget %llu "
	       "MiB), heap grew %llu MiB\n", made,
	       (unsigned long long)(n->e.host_bytes >> 20), (unsigned long long)(budget >> 20),
	       (unsigned long long)(grown >> 20));
	for (i = 0; i < made; i++)
		CHECK_EQ(qhca_qp_destroy(&n->e, qpns[i]), QHCA_ST_OK);
	CHECK_EQ(n->e.host_bytes, base);
	free(qpns);
	teardown();
}

/* Regions of 4 GiB (max-mr-size-mb) whose 1048576 pages are one: 8 MiB of page list each. */
static void test_mr_page_lists_within_budget(void)
{
	struct node *n = &nodes[0];
	struct qhca_mr_create m;
	uint64_t budget, base;
	uint32_t limit, made = 0, i, *keys;
	uint16_t st = QHCA_ST_OK;

	setup_limits(true);
	budget = n->e.host_budget;
	m = (struct qhca_mr_create){ .pd = n->pd, .iova = 1ull << 40, .length = 4ull << 30,
				     .access = QHCA_ACCESS_LOCAL_WRITE | QHCA_ACCESS_REMOTE_WRITE,
				     .pbl = same_page_pbl(n, 1u << 20) };
	limit = (uint32_t)(budget / (8u << 20)) + 16;
	keys = calloc(limit, sizeof(*keys));
	base = n->e.host_bytes;
	for (i = 0; i < limit; i++) {
		st = qhca_mr_create(&n->e, &m, &keys[made]);
		if (st != QHCA_ST_OK)
			break;
		made++;
	}
	CHECK_EQ(st, QHCA_ST_NO_RESOURCES);
	CHECK(made >= limit / 2);
	CHECK(made && budget - n->e.host_bytes < (n->e.host_bytes - base) / made);
	for (i = 0; i < made; i++)
		CHECK_EQ(qhca_mr_destroy(&n->e, keys[i]), QHCA_ST_OK);
	CHECK_EQ(n->e.host_bytes, base);
	free(keys);
	teardown();
}

/*
 * Every object that is charged is uncharged when it goes, whichever way it goes: destroy,
 * a resize that replaces a ring, a re-registration, a device reset; a create that fails
 * half way gives back what it took.
 */
static void test_budget_accounting(void)
{
	struct node *n = &nodes[0];
	struct qhca_mr_create m;
	struct qhca_cq_resize r;
	struct qhca_srq_create sc;
	struct qhca_srq_resize sr;
	uint32_t key, srqn;
	uint64_t base, buf;
	struct qp q;

	setup_limits(true);
	base = n->e.host_bytes;
	q = make_qp(n, QHCA_QPT_RC, 0);
	CHECK(n->e.host_bytes > base);
	buf = galloc(n, 3 * 4096);
	m = (struct qhca_mr_create){ .pd = n->pd, .iova = 0x1000, .length = 3 * 4096,
				     .access = QHCA_ACCESS_LOCAL_WRITE,
				     .pbl = pbl_for(n, buf, 3 * 4096) };
	CHECK_EQ(qhca_mr_create(&n->e, &m, &key), QHCA_ST_OK);
	m.length = 4096;
	m.pbl.npages = 1;
	CHECK_EQ(qhca_mr_rereg(&n->e, key, &m), QHCA_ST_OK);
	/* A CQ resized to a larger ring, and back. */
	r = (struct qhca_cq_resize){ .log2_entries = 9 };
	buf = galloc(n, (32u << 9) + 64);
	r.pbl = pbl_for(n, buf, (32u << 9) + 64);
	CHECK_EQ(qhca_cq_resize(&n->e, q.scq.cqn, &r), QHCA_ST_OK);
	{
		/* a resize refused after its page list was loaded gives the list back */
		uint64_t before = n->e.host_bytes;

		r.log2_entries = 10;
		CHECK_EQ(qhca_cq_resize(&n->e, q.scq.cqn, &r), QHCA_ST_BAD_FIELD);
		r.log2_entries = 4;
		r.pbl.addr = 0x10;	/* no guest memory there */
		CHECK_EQ(qhca_cq_resize(&n->e, q.scq.cqn, &r), QHCA_ST_BAD_FIELD);
		CHECK_EQ(n->e.host_bytes, before);
		r.pbl = pbl_for(n, galloc(n, (32u << 4) + 64), (32u << 4) + 64);
		CHECK_EQ(qhca_cq_resize(&n->e, q.scq.cqn, &r), QHCA_ST_OK);	/* and back */
		CHECK(n->e.host_bytes < before);
	}
	{
		/* a QP whose RQ's list is unreadable gives back its record and SQ list */
		uint64_t before = n->e.host_bytes;
		struct qhca_qp_create qc = { .pd = n->pd, .type = QHCA_QPT_RC, .sq_log2 = 7,
					     .rq_log2 = 6, .sq_stride_log2 = SQ_STRIDE_LOG2,
					     .rq_stride_log2 = RQ_STRIDE_LOG2, .max_inline = 128,
					     .send_cq = q.scq.cqn, .recv_cq = q.rcq.cqn,
					     .sq_pbl = pbl_for(n, q.sq, SQ_SIZE << SQ_STRIDE_LOG2),
					     .rq_pbl = { .addr = 0x10, .npages = 1, .levels = 1 } };
		uint32_t qpn;

		CHECK_EQ(qhca_qp_create(&n->e, &qc, &qpn), QHCA_ST_BAD_FIELD);
		CHECK_EQ(n->e.host_bytes, before);
	}
	/* An SRQ, resized; then one whose page list is unreadable gives back its record. */
	sc = (struct qhca_srq_create){ .pd = n->pd, .log2 = 6, .stride_log2 = 6 };
	buf = galloc(n, 64u << 6);
	sc.pbl = pbl_for(n, buf, 64u << 6);
	CHECK_EQ(qhca_srq_create(&n->e, &sc, &srqn), QHCA_ST_OK);
	sr = (struct qhca_srq_resize){ .log2 = 8, .stride_log2 = 6 };
	buf = galloc(n, 256u << 6);
	sr.pbl = pbl_for(n, buf, 256u << 6);
	CHECK_EQ(qhca_srq_resize(&n->e, srqn, &sr), QHCA_ST_OK);
	{
		uint64_t before = n->e.host_bytes;
		struct qhca_srq_create bad = sc;
		uint32_t dummy;

		bad.pbl.addr = 0x10;	/* no guest memory there */
		CHECK_EQ(qhca_srq_create(&n->e, &bad, &dummy), QHCA_ST_BAD_FIELD);
		CHECK_EQ(n->e.host_bytes, before);
	}
	CHECK_EQ(qhca_srq_destroy(&n->e, srqn), QHCA_ST_OK);
	CHECK_EQ(qhca_mr_destroy(&n->e, key), QHCA_ST_OK);
	CHECK_EQ(qhca_qp_destroy(&n->e, q.qpn), QHCA_ST_OK);
	CHECK_EQ(qhca_cq_destroy(&n->e, q.scq.cqn), QHCA_ST_OK);
	CHECK_EQ(qhca_cq_destroy(&n->e, q.rcq.cqn), QHCA_ST_OK);
	CHECK_EQ(n->e.host_bytes, base);
	/* A reset frees what is left. */
	q = make_qp(n, QHCA_QPT_UD, 0);
	CHECK(n->e.host_bytes > base);
	qhca_engine_reset(&n->e);
	CHECK_EQ(n->e.host_bytes, 0);
	teardown();
}

/* A property below the smallest budget, or above the largest, is refused. */
static void test_budget_property(void)
{
	struct qhca_engine_config c = harness_default_cfg();
	char why[128];

	CHECK(qhca_engine_config_check(&c, why, sizeof(why)));
	c.host_mem_mb = 15;
	CHECK(!qhca_engine_config_check(&c, why, sizeof(why)));
	CHECK(strstr(why, "host-mem-mb") != NULL);
	c.host_mem_mb = QHCA_MAX_HOST_MEM_MB + 1;
	CHECK(!qhca_engine_config_check(&c, why, sizeof(why)));
	c.host_mem_mb = 16;
	CHECK(qhca_engine_config_check(&c, why, sizeof(why)));
}

/*
 * A guest that creates and destroys objects for ever: after the first round the heap in
 * use comes back to where it was (no leak) and what the process took from the system does
 * not grow round after round (the allocator reuses what it keeps). bench-qp saw QEMU 46 MiB
 * above its start after 16384 QPs: that is the allocator keeping freed memory for reuse.
 */
static void test_churn_leaves_nothing(void)
{
	enum { QPS = 4096, ROUNDS = 4 };
	struct node *n = &nodes[0];
	uint64_t in_use0, system1 = 0, sq, rq, charged0;
	struct qhca_qp_create c;
	uint32_t *qpns = calloc(QPS, sizeof(*qpns)), i, round;
	struct cq cq;

	setup_limits(true);
	cq = make_cq(n, 4);
	sq = galloc(n, 64u << 7);
	rq = galloc(n, 512u << 5);
	c = (struct qhca_qp_create){ .pd = n->pd, .type = QHCA_QPT_RC, .send_cq = cq.cqn,
				     .recv_cq = cq.cqn, .sq_log2 = 6, .rq_log2 = 9,
				     .sq_stride_log2 = 7, .rq_stride_log2 = 5, .max_inline = 64,
				     .sq_pbl = pbl_for(n, sq, 64u << 7),
				     .rq_pbl = pbl_for(n, rq, 512u << 5) };
	in_use0 = heap_in_use();
	charged0 = n->e.host_bytes;
	for (round = 0; round < ROUNDS; round++) {
		for (i = 0; i < QPS; i++)
			CHECK_EQ(qhca_qp_create(&n->e, &c, &qpns[i]), QHCA_ST_OK);
		for (i = 0; i < QPS; i++)
			CHECK_EQ(qhca_qp_destroy(&n->e, qpns[i]), QHCA_ST_OK);
		if (round == 0)
			system1 = heap_from_system();
		CHECK_EQ(n->e.host_bytes, charged0);	/* also under ASan */
	}
	if (HEAP_VISIBLE) {
		printf("# %u rounds of %u QPs: heap in use %+lld bytes, taken from the system "
		       "after round 1 %llu KiB, after round %u %llu KiB\n", ROUNDS, QPS,
		       (long long)(heap_in_use() - in_use0), (unsigned long long)(system1 >> 10),
		       ROUNDS, (unsigned long long)(heap_from_system() >> 10));
		CHECK(heap_in_use() <= in_use0 + 4096);
		CHECK(heap_from_system() <= system1 + (1u << 20));
	}
	free(qpns);
	teardown();
}

/*
 * The send windows' share: half of host-mem-mb (when that is below 512 MiB). Past it new
 * QPs get smaller windows; nothing fails.
 */
static void test_window_share_of_budget(void)
{
	struct qhca_engine_config c = harness_default_cfg();
	struct node *n = &nodes[0];
	uint32_t i, first = 0, last = 0;
	struct qhca_qp_create qc;
	struct cq cq;

	c.host_mem_mb = 16;
	setup_cfg(&c);
	cq = make_cq(n, 4);
	qc = (struct qhca_qp_create){ .pd = n->pd, .type = QHCA_QPT_RC, .sq_log2 = 6,
				      .rq_log2 = 0, .sq_stride_log2 = 7, .rq_stride_log2 = 4,
				      .send_cq = cq.cqn, .recv_cq = cq.cqn,
				      .sq_pbl = pbl_for(n, galloc(n, 64u << 7), 64u << 7),
				      .rq_pbl = pbl_for(n, galloc(n, 4096), 4096) };
	/* 64 slots of about 1 KiB: 8 MiB of windows is about 128 QPs' full windows */
	for (i = 0; i < 160; i++) {
		uint32_t qpn;
		struct qhca_qp *qp;

		if (qhca_qp_create(&n->e, &qc, &qpn) != QHCA_ST_OK)
			break;
		qp = qhca_qp_find(&n->e, qpn);
		if (i == 0)
			first = qp->win_size;
		last = qp->win_size;
	}
	CHECK_EQ(i, 160);
	CHECK_EQ(first, 64);
	CHECK(last < 64);
	/* within the share, but for QPs that got the smallest window of one slot */
	CHECK(n->e.qp_window_bytes <= (8u << 20) + 160 * sizeof(struct qhca_send_wqe));
	teardown();
}

/*
 * RESIZE_CQ moves what is not polled, and the consumer index is the guest's: a CQ of 4M
 * CQEs that never completed anything can claim all of them. They move a page at a time:
 * two copies of 128 MiB in about 100 000 accesses, not 8 million of 32 bytes.
 */
static void test_resize_cq_moves_in_pages(void)
{
	struct node *n = &nodes[0];
	struct qhca_cq_create cc;
	struct qhca_cq_resize r;
	uint64_t calls;
	uint32_t cqn;
	uint8_t *page;

	setup_limits(true);
	cc = (struct qhca_cq_create){ .log2_entries = 22, .eq = n->eq,
				      .pbl = same_page_pbl(n, 32769) };
	CHECK_EQ(qhca_cq_create(&n->e, &cc, &cqn), QHCA_ST_OK);
	/* the record after the ring is at offset 0 of the one page: ci = pi - (4M - 1) */
	page = gptr(n, ((uint64_t *)gptr(n, ((uint64_t *)gptr(n, cc.pbl.addr))[0]))[0]);
	*(uint32_t *)page = 0u - ((1u << 22) - 1);
	r = (struct qhca_cq_resize){ .log2_entries = 22, .pbl = same_page_pbl(n, 32769) };
	calls = n->e.dma_calls;
	CHECK_EQ(qhca_cq_resize(&n->e, cqn, &r), QHCA_ST_OK);
	calls = n->e.dma_calls - calls;
	printf("# RESIZE_CQ of 4194303 CQEs: %llu guest memory accesses\n",
	       (unsigned long long)calls);
	CHECK(calls <= 4 * 32768);	/* a chunk that straddles two pages: 3 accesses */
	teardown();
}

/* ---------------------------------------------------------------- work per doorbell */
/* What a budgeted piece of requester work may move: the budget, and the WQE or packet
 * that crossed it (a REG_MR: its 4 KiB list, the WQE, its completion). */
#define SQ_PIECE_BYTES	(QHCA_SQ_BYTE_BUDGET + 8192ull)

/* @n fast-register regions of 512 pages on node @node. */
static uint32_t *frmrs(struct node *node, uint32_t n)
{
	uint32_t *keys = calloc(n, sizeof(*keys)), i;

	for (i = 0; i < n; i++)
		keys[i] = make_frmr(node, QHCA_MAX_FAST_REG_PAGES);
	return keys;
}

/* Is QP @qpn of node @n waiting in the FIFO of send queues a budget stopped (req.c)? */
static bool sq_waiting(struct node *n, uint32_t qpn)
{
	return n->e.sq_defer_qpn[QHCA_FIELD_GET(QPN_SLOT_MASK, qpn) - 2] == qpn;
}

/*
 * A send queue of the device's greatest depth (max-qp-wr, 32768: QHCA_MAX_QP_WR) full of
 * REG_MRs, each reading a page list of 4 KiB, and one doorbell for all of them: 128 MiB of
 * guest memory under QEMU's lock before the budget. Now the doorbell does at most a
 * budget, the timer (armed at once) the rest a budget at a time, every completion arrives
 * in order, and another QP's doorbell meanwhile is served at once.
 */
static void test_sq_work_per_doorbell(void)
{
	struct qhca_engine_config c = harness_default_cfg();
	struct node *n = &nodes[0];
	const uint32_t depth = QHCA_MAX_QP_WR, log2 = 15;
	uint32_t *keys, *bkeys, first, got, pieces = 0, bad = 0, i;
	uint64_t list, next = 0, bnext = 1000000, bytes;
	struct qp a, b, peer;

	CHECK_EQ(1u << log2, depth);
	c.max_mr = 2 * depth;
	setup_cfg(&c);
	CHECK_EQ(n->e.cfg.max_qp_wr, depth);
	peer = make_qp(&nodes[1], QHCA_QPT_RC, 0);
	a = make_deep_qp(n, log2, &peer);
	b = make_deep_qp(n, 4, &peer);
	list = fast_reg_list(n);
	keys = frmrs(n, depth);
	bkeys = frmrs(n, 4);
	for (i = 0; i < depth; i++)
		deep_reg(&a, log2, i, keys[i], list);
	bytes = n->e.dma_bytes;
	ring(n, QHCA_DB_SQ, a.qpn, a.sq_pi);
	bytes = n->e.dma_bytes - bytes;
	first = take_in_order(n, &a.scq, &next, QHCA_WC_SUCCESS);
	printf("# one doorbell of %u REG_MRs: %u done, %llu KiB of guest memory moved\n", depth,
	       first, (unsigned long long)(bytes >> 10));
	CHECK(first >= 1 && first <= QHCA_SQ_WQE_BUDGET);
	CHECK(bytes <= SQ_PIECE_BYTES);
	CHECK_EQ(n->deadline, 0);	/* the rest goes on from the timer, at once */
	CHECK(sq_waiting(n, a.qpn));
	CHECK_EQ(n->e.sq_defer_n, 1);
	/* its doorbell again while it waits: the index recorded, nothing started, and it
	 * keeps its one place in the line */
	ring(n, QHCA_DB_SQ, a.qpn, a.sq_pi);
	CHECK_EQ(take_in_order(n, &a.scq, &next, QHCA_WC_SUCCESS), 0);
	CHECK(sq_waiting(n, a.qpn));
	CHECK_EQ(n->e.sq_defer_n, 1);
	/* another QP's doorbell meanwhile: served now, not after the first QP's queue */
	for (i = 0; i < 4; i++)
		deep_reg(&b, 4, bnext + i, bkeys[i], list);
	ring(n, QHCA_DB_SQ, b.qpn, b.sq_pi);
	CHECK_EQ(take_in_order(n, &b.scq, &bnext, QHCA_WC_SUCCESS), 4);
	CHECK_EQ(take_in_order(n, &a.scq, &next, QHCA_WC_SUCCESS), 0);
	/* the timer: a budget at a time, each callback armed at once by the one before */
	got = first;
	for (;;) {
		uint32_t k;

		bytes = n->e.dma_bytes;
		if (!timer_now(n))
			break;
		bytes = n->e.dma_bytes - bytes;
		k = take_in_order(n, &a.scq, &next, QHCA_WC_SUCCESS);
		got += k;
		bad += !k || k > QHCA_SQ_WQE_BUDGET || bytes > SQ_PIECE_BYTES;
		if (++pieces > depth)
			break;
	}
	printf("# the rest in %u timer callbacks, %u of them past the budget or idle\n", pieces,
	       bad);
	CHECK_EQ(got, depth);
	CHECK_EQ(bad, 0);
	CHECK(pieces >= (depth - first) / QHCA_SQ_WQE_BUDGET);
	CHECK(n->deadline != 0);	/* nothing left for the timer */
	CHECK(qhca_mr_find(&n->e, keys[depth - 1]) &&
	      !qhca_mr_find(&n->e, keys[depth - 1])->invalid);
	teardown();
	free(keys);
	free(bkeys);
}

/*
 * Five QPs' queues left to the timer by their doorbells' budgets, and meanwhile one of them
 * destroyed (and a new QP made in its slot, under another QPN), one reset and used again,
 * one moved to error: nothing of the others is lost, the error flushes the rest in order,
 * the reset QP's new work and the new QP's run, a timer callback does a budget in all,
 * and the two left alone take turns (each goes on before the other is done).
 */
static void test_sq_budget_across_qps(void)
{
	struct qhca_engine_config c = harness_default_cfg();
	struct node *n = &nodes[0];
	const uint32_t log2 = 10, depth = 1u << log2, again = 300, fresh = 600;
	enum { D, R, E, K1, K2, NQ, NQPS };
	struct qp q[NQPS], peer;
	uint64_t next[NQPS], list;
	uint32_t *keys, k = 0, i, j, dslot, t, got[NQPS] = { 0 }, want[NQPS], bad = 0;
	uint32_t began[NQPS], ended[NQPS];
	struct qhca_qp_attr a;

	c.max_qp = 8;		/* the new QP takes the destroyed one's slot */
	c.max_mr = 8 * depth;
	setup_cfg(&c);
	peer = make_qp(&nodes[1], QHCA_QPT_RC, 0);
	list = fast_reg_list(n);
	keys = frmrs(n, 5 * depth + again + fresh);
	for (j = D; j <= K2; j++) {
		q[j] = make_deep_qp(n, log2, &peer);
		next[j] = j * 100000ull;
		want[j] = depth;
		for (i = 0; i < depth; i++)
			deep_reg(&q[j], log2, next[j] + i, keys[k++], list);
		ring(n, QHCA_DB_SQ, q[j].qpn, q[j].sq_pi);
		got[j] = take_in_order(n, &q[j].scq, &next[j], QHCA_WC_SUCCESS);
		CHECK(got[j] >= 1 && got[j] <= QHCA_SQ_WQE_BUDGET);
	}
	/* D destroyed, and a QP made in its slot */
	dslot = QHCA_FIELD_GET(QPN_SLOT_MASK, q[D].qpn) - 2;
	CHECK_EQ(qhca_qp_destroy(&n->e, q[D].qpn), QHCA_ST_OK);
	for (i = 0; i < c.max_qp && n->e.qp_table.free_q[(n->e.qp_table.free_head) %
							   c.max_qp] != dslot; i++)
		make_qp(n, QHCA_QPT_RC, 0);
	q[NQ] = make_deep_qp(n, log2, &peer);
	CHECK_EQ(QHCA_FIELD_GET(QPN_SLOT_MASK, q[NQ].qpn) - 2, dslot);
	CHECK(q[NQ].qpn != q[D].qpn);
	CHECK_EQ(n->e.sq_defer_n, 5);
	next[NQ] = NQ * 100000ull;
	want[NQ] = fresh;
	for (i = 0; i < fresh; i++)
		deep_reg(&q[NQ], log2, next[NQ] + i, keys[k++], list);
	ring(n, QHCA_DB_SQ, q[NQ].qpn, q[NQ].sq_pi);
	got[NQ] = take_in_order(n, &q[NQ].scq, &next[NQ], QHCA_WC_SUCCESS);
	/* the new QP waits in the destroyed one's place: the slot is in the line once */
	CHECK(sq_waiting(n, q[NQ].qpn) && !sq_waiting(n, q[D].qpn));
	CHECK_EQ(n->e.sq_defer_n, 5);
	/* E to error: the rest completes flushed, in order */
	memset(&a, 0, sizeof(a));
	a.state = QHCA_QPS_ERR;
	CHECK_EQ(modify(&q[E], QHCA_QP_STATE, &a), QHCA_ST_OK);
	CHECK_EQ(take_in_order(n, &q[E].scq, &next[E], QHCA_WC_WR_FLUSH_ERR), depth - got[E]);
	got[E] = depth;
	/* R reset (its WQEs dropped, as IBA 10.3.1 has it), connected again and given more */
	memset(&a, 0, sizeof(a));
	a.state = QHCA_QPS_RESET;
	CHECK_EQ(modify(&q[R], QHCA_QP_STATE, &a), QHCA_ST_OK);
	connect_qp(&q[R], &peer, QHCA_ACCESS_ALL);
	q[R].sq_pi = 0;
	next[R] = 900000;
	got[R] = 0;
	want[R] = again;
	for (i = 0; i < again; i++)
		deep_reg(&q[R], log2, next[R] + i, keys[k++], list);
	ring(n, QHCA_DB_SQ, q[R].qpn, q[R].sq_pi);
	got[R] = take_in_order(n, &q[R].scq, &next[R], QHCA_WC_SUCCESS);
	CHECK_EQ(got[R], 0);	/* it kept its place in the line: its work goes on there */
	CHECK(sq_waiting(n, q[R].qpn));
	/* the timer, until nothing is left for it */
	for (j = 0; j < NQPS; j++)
		began[j] = ended[j] = UINT32_MAX;
	for (t = 0; t < 10 * depth && timer_now(n); t++) {
		uint32_t piece = 0;

		for (j = R; j < NQPS; j++) {
			uint32_t m = take_in_order(n, &q[j].scq, &next[j], QHCA_WC_SUCCESS);

			if (m && began[j] == UINT32_MAX)
				began[j] = t;
			got[j] += m;
			piece += m;
			if (m && got[j] == want[j])
				ended[j] = t;
		}
		bad += !piece || piece > QHCA_SQ_WQE_BUDGET;
	}
	printf("# %u timer callbacks; the two QPs left alone went on at %u and %u, were done at "
	       "%u and %u\n", t, began[K1], began[K2], ended[K1], ended[K2]);
	CHECK_EQ(bad, 0);
	CHECK_EQ(take_in_order(n, &q[D].scq, &next[D], QHCA_WC_SUCCESS), 0);
	for (j = R; j < NQPS; j++)
		CHECK_EQ(got[j], want[j]);
	CHECK(began[K2] < ended[K1] && began[K1] < ended[K2]);
	free(keys);
	teardown();
}

/*
 * The byte budget cuts a message between two packets: a UC WRITE of 64 MiB (a region of
 * one guest page listed 16384 times) gathers at most the budget a run, and completes once.
 */
static void test_sq_bytes_per_doorbell(void)
{
	struct node *n = &nodes[0];
	const uint64_t len = 64ull << 20;
	struct qhca_mr_create m;
	uint64_t bytes, most = 0, next = 7;
	uint32_t lkey, pieces = 0;
	struct qhca_sq_wqe *w;
	struct qhca_cqe cqe;
	struct qp a, b;

	setup_limits(true);
	a = make_qp(n, QHCA_QPT_UC, 0);
	b = make_qp(&nodes[1], QHCA_QPT_UC, 0);
	connect_pair(&a, &b);
	m = (struct qhca_mr_create){ .pd = n->pd, .iova = 1ull << 40, .length = len,
				     .access = QHCA_ACCESS_LOCAL_WRITE,
				     .pbl = same_page_pbl(n, (uint32_t)(len >> 12)) };
	CHECK_EQ(qhca_mr_create(&n->e, &m, &lkey), QHCA_ST_OK);
	w = sq_wqe(&a, QHCA_WR_RDMA_WRITE, next, m.iova, (uint32_t)len, lkey);
	w->remote_addr = 1ull << 40;
	w->rkey = 0x100;
	bytes = n->e.dma_bytes;
	post_send(&a);
	for (;;) {
		bytes = n->e.dma_bytes - bytes;
		most = bytes > most ? bytes : most;
		link_n = link_head = 0;		/* the frames: nobody looks at them */
		pieces++;
		bytes = n->e.dma_bytes;
		if (!timer_now(n) || pieces > 64)
			break;
	}
	printf("# a UC WRITE of 64 MiB: %u runs, at most %llu KiB gathered in one\n", pieces,
	       (unsigned long long)(most >> 10));
	CHECK(most <= SQ_PIECE_BYTES);
	CHECK(pieces >= len / QHCA_SQ_BYTE_BUDGET);
	CHECK(poll_cq(n, &a.scq, &cqe) && cqe.wr_id == next &&
	      cqe_status(&cqe) == QHCA_WC_SUCCESS);
	expect_empty(n, &a.scq);
	teardown();
}

/*
 * An RC QP that waits for its turn behind other QPs' budgets does not spend its retries
 * meanwhile: its WRITE is lost, twelve QPs of 512 REG_MRs each take the timer's budgets
 * ahead of it, and each timer callback comes more than its timeout after the one before.
 * Only the timeouts it could have sent at count (one here): the WRITE is sent again when
 * its turn comes and completes, where it used to end in RETRY_EXC_ERR without a frame
 * sent.
 */
static void test_sq_retry_while_waiting(void)
{
	struct qhca_engine_config c = harness_default_cfg();
	struct node *n = &nodes[0];
	enum { H = 12 };
	const uint32_t log2 = 9, depth = 1u << log2;
	uint32_t lkey, rkey, *keys, i, j, cb, waited = 0, got = 0, vframes = 0;
	uint64_t lbuf, rbuf, list, next[H], timeouts;
	struct qp v, p, h[H], peer;
	struct qhca_cqe cqe;
	bool done = false;

	c.max_mr = H * depth + 64;
	setup_cfg(&c);
	v = make_qp(n, QHCA_QPT_RC, 0);
	p = make_qp(&nodes[1], QHCA_QPT_RC, 0);
	connect_pair(&v, &p);
	lkey = make_mr(n, 4096, QHCA_ACCESS_LOCAL_WRITE, &lbuf);
	rkey = make_mr(&nodes[1], 4096, QHCA_ACCESS_ALL, &rbuf);
	post_write(&v, 1, lbuf, 4096, lkey, rbuf, rkey);
	CHECK(link_n > 0);
	link_n = link_head = 0;		/* the WRITE is lost */
	peer = make_qp(&nodes[1], QHCA_QPT_RC, 0);
	list = fast_reg_list(n);
	keys = frmrs(n, H * depth);
	for (j = 0; j < H; j++) {
		h[j] = make_deep_qp(n, log2, &peer);
		next[j] = j * 100000ull;
		for (i = 0; i < depth; i++)
			deep_reg(&h[j], log2, next[j] + i, keys[j * depth + i], list);
		ring(n, QHCA_DB_SQ, h[j].qpn, h[j].sq_pi);
		got += take_in_order(n, &h[j].scq, &next[j], QHCA_WC_SUCCESS);
	}
	CHECK_EQ(n->e.sq_defer_n, H);
	timeouts = n->e.cnt.timeouts;
	/* each callback comes more than V's timeout (4 ms) after the one before */
	for (cb = 0; cb < 10 * H && !done; cb++) {
		now += 5000000;
		n->deadline = UINT64_MAX;
		qhca_engine_timer(&n->e);
		waited += sq_waiting(n, v.qpn);
		for (j = 0; j < H; j++)
			got += take_in_order(n, &h[j].scq, &next[j], QHCA_WC_SUCCESS);
		while (link_n) {	/* V's frames to the peer, its ACKs back */
			struct frame f;

			link_take(0, &f);
			vframes += f.to == 1;
			link_deliver(&f, 0);
		}
		done = poll_cq(n, &v.scq, &cqe);
	}
	timeouts = n->e.cnt.timeouts - timeouts;
	for (i = 0; i < 10 * H && timer_now(n); i++)	/* what is left of the others */
		for (j = 0; j < H; j++)
			got += take_in_order(n, &h[j].scq, &next[j], QHCA_WC_SUCCESS);
	printf("# V's WRITE: %s, status %u, after %u callbacks, %u of them waiting its turn; "
	       "%llu timeouts counted, %u frames sent\n", done ? "completed" : "not completed",
	       done ? cqe_status(&cqe) : 0, cb, waited, (unsigned long long)timeouts, vframes);
	CHECK(waited > 7);	/* more callbacks than its retry count (7) */
	CHECK(done && cqe.wr_id == 1 && cqe_status(&cqe) == QHCA_WC_SUCCESS);
	CHECK(timeouts < 2);
	CHECK(vframes >= 1);
	CHECK_EQ(got, H * depth);
	expect_empty(n, &v.scq);
	free(keys);
	teardown();
}

/*
 * One admin doorbell is one run of the requester: three MODIFY_QPs from SQD to RTS, each
 * of a QP with 512 REG_MRs posted, in one doorbell start at most a budget between them (a
 * doorbell of 64 commands used to start 64 budgets); the rest goes on from the timer.
 */
static void test_sq_budget_per_admin_doorbell(void)
{
	struct qhca_engine_config c = harness_default_cfg();
	struct node *n = &nodes[0];
	enum { NQ = 3 };	/* the commands the harness's admin ring of 4 holds */
	const uint32_t log2 = 9, depth = 1u << log2;
	uint32_t *keys, i, j, started = 0, got = 0, t;
	uint64_t list, next[NQ], attr;
	struct qhca_qp_attr a, *ga;
	struct qp q[NQ], peer;

	c.max_mr = NQ * depth + 64;
	setup_cfg(&c);
	peer = make_qp(&nodes[1], QHCA_QPT_RC, 0);
	list = fast_reg_list(n);
	keys = frmrs(n, NQ * depth);
	memset(&a, 0, sizeof(a));
	a.state = QHCA_QPS_SQD;
	for (j = 0; j < NQ; j++) {
		q[j] = make_deep_qp(n, log2, &peer);
		CHECK_EQ(modify(&q[j], QHCA_QP_STATE, &a), QHCA_ST_OK);
		next[j] = j * 100000ull;
		for (i = 0; i < depth; i++)
			deep_reg(&q[j], log2, next[j] + i, keys[j * depth + i], list);
		ring(n, QHCA_DB_SQ, q[j].qpn, q[j].sq_pi);	/* SQD: nothing starts */
		CHECK_EQ(take_in_order(n, &q[j].scq, &next[j], QHCA_WC_SUCCESS), 0);
	}
	/* the commands, then one doorbell for them all */
	attr = galloc(n, sizeof(*ga));
	ga = gptr(n, attr);
	memset(ga, 0, sizeof(*ga));
	ga->state = QHCA_QPS_RTS;
	ga->mask = QHCA_QP_STATE;
	for (j = 0; j < NQ; j++) {
		struct qhca_cmd cmd = { .hdr = { .opcode = QHCA_CMD_MODIFY_QP,
						 .len = sizeof(struct qhca_cmd_obj),
						 .cmd_id = (uint16_t)(n->aq_tail + j) } };

		cmd.obj.in_addr = attr;
		cmd.obj.in_len = sizeof(*ga);
		cmd.obj.handle = q[j].qpn;
		memcpy(gptr(n, n->aq + ((n->aq_tail + j) % 4) * QHCA_CMD_SIZE), &cmd, sizeof(cmd));
	}
	n->aq_tail += NQ;
	qhca_engine_reg_write(&n->e, QHCA_REG_ASQ_TAIL, n->aq_tail % 4);
	for (j = 0; j < NQ; j++) {
		struct qhca_cqe_admin *ac = gptr(n, n->aq + 4096 + (n->acq_head % 4) * sizeof(*ac));

		CHECK_EQ(ac->flags & QHCA_CQE_PHASE, n->acq_head / 4 % 2 ? 0 : QHCA_CQE_PHASE);
		CHECK_EQ(ac->status, QHCA_ST_OK);
		n->acq_head++;
	}
	qhca_engine_reg_write(&n->e, QHCA_REG_ACQ_HEAD, n->acq_head % 4);
	for (j = 0; j < NQ; j++)
		started += take_in_order(n, &q[j].scq, &next[j], QHCA_WC_SUCCESS);
	printf("# one admin doorbell of %u MODIFY_QPs to RTS, %u REG_MRs posted: %u done in it\n",
	       NQ, NQ * depth, started);
	CHECK(started >= 1 && started <= QHCA_SQ_WQE_BUDGET);
	CHECK_EQ(n->deadline, 0);	/* the rest from the timer, at once */
	got = started;
	for (t = 0; t < 4 * NQ * depth / QHCA_SQ_WQE_BUDGET && timer_now(n); t++)
		for (j = 0; j < NQ; j++)
			got += take_in_order(n, &q[j].scq, &next[j], QHCA_WC_SUCCESS);
	CHECK_EQ(got, NQ * depth);
	free(keys);
	teardown();
}

static const struct unit_test tests[] = {
	{ "qp_page_lists_within_budget", test_qp_page_lists_within_budget },
	{ "mr_page_lists_within_budget", test_mr_page_lists_within_budget },
	{ "budget_accounting", test_budget_accounting },
	{ "budget_property", test_budget_property },
	{ "churn_leaves_nothing", test_churn_leaves_nothing },
	{ "window_share_of_budget", test_window_share_of_budget },
	{ "resize_cq_moves_in_pages", test_resize_cq_moves_in_pages },
	{ "sq_work_per_doorbell", test_sq_work_per_doorbell },
	{ "sq_budget_across_qps", test_sq_budget_across_qps },
	{ "sq_bytes_per_doorbell", test_sq_bytes_per_doorbell },
	{ "sq_retry_while_waiting", test_sq_retry_while_waiting },
	{ "sq_budget_per_admin_doorbell", test_sq_budget_per_admin_doorbell },
	{ NULL, NULL },
};

int main(int argc, char **argv)
{
	return unit_main(tests, argc, argv);
}
