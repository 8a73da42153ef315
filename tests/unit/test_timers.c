// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Timer unit tests: the QPs with a deadline and the engine's one timer (xmit.c). Their
 * cost is counted, not timed: e->timer_steps counts the steps of the structure that keeps
 * the deadlines, and setting, moving or cancelling one deadline, or expiring the earliest,
 * must take O(log n) of them however many QPs wait on long timeouts. Then the order of
 * expiry, cancel and move against a model, and real QPs that leave by destroy, RESET and
 * device reset.
 */
#include <stdio.h>
#include <time.h>

#include "transport_harness.h"

#ifndef TIMER_QPS
#define TIMER_QPS	100000	/* QPs on long timeouts (-DTIMER_QPS=130000 to measure) */
#endif
#ifndef TIMER_DUE
#define TIMER_DUE	4	/* QPs in an RNR loop among them */
#endif

/* ---------------------------------------------------------------- an engine of many QPs */
/* QPs that the tests make themselves: the timers look at nothing but the deadline, and a
 * QP in RESET that expires only loses its deadline (qhca_comp_timer). */
static struct qhca_engine big;
static uint64_t big_armed = UINT64_MAX;
static unsigned long big_arms;

static int big_dma_read(void *o, uint64_t a, void *b, size_t l)
{
	return -1;
}

static int big_dma_write(void *o, uint64_t a, const void *b, size_t l)
{
	return -1;
}

static void big_notify(void *o, unsigned v)
{
}

static void big_xmit(void *o, const void *f, size_t len)
{
}

static void big_timer(void *o, uint64_t deadline)
{
	big_armed = deadline;
	big_arms++;
}

static const struct qhca_engine_ops big_ops = {
	.dma_read = big_dma_read,
	.dma_write = big_dma_write,
	.notify = big_notify,
	.xmit = big_xmit,
	.now_ns = op_now,
	.timer_arm = big_timer,
	.log_enabled = op_log_enabled,
	.log = op_log,
};

static struct qhca_qp *big_init(uint32_t nqp)
{
	struct qhca_engine_config c = {
		.db_pages = 2, .msix_vectors = 3, .max_pd = 1, .max_qp = nqp, .max_qp_wr = 64,
		.max_cq = 1, .max_cqe = 64, .max_mr = 1, .max_mr_size_mb = 1, .max_srq = 1,
		.max_sge = 1, .mtu = 1024, .mac = { 0x52, 0x54, 0, 0, 0, 1 },
	};
	struct qhca_qp *qp = calloc(nqp, sizeof(*qp));
	uint32_t i;

	CHECK(qp != NULL);
	now = 1000;
	big_armed = UINT64_MAX;
	CHECK_EQ(qhca_engine_init(&big, &c, &big_ops, NULL), 0);
	for (i = 0; i < nqp; i++) {
		qp[i].qpn = i + 2;
		qp[i].state = QHCA_QPS_RESET;
		qp[i].deadline = UINT64_MAX;
		qhca_list_init(&qp[i].tx_link);
	}
	return qp;
}

static void big_fini(struct qhca_qp *qp, uint32_t nqp)
{
	uint32_t i;

	for (i = 0; i < nqp; i++)	/* the engine does not own them */
		qhca_qp_unlink(&big, &qp[i]);
	qhca_engine_fini(&big);
	free(qp);
}

static uint64_t rng = 88172645463325252ull;

static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static unsigned log2_up(uint32_t n)
{
	unsigned l = 0;

	while ((1ull << l) < n)
		l++;
	return l;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* ---------------------------------------------------------------- tests */
/*
 * TIMER_QPS QPs on timeouts of 1 to 2 s, and a few in an RNR loop that are due every
 * 10 us: each tick expires the few and they arm again. The work of a tick, of an ACK that
 * moves one deadline and of a cancel is counted in steps: O(log n) each, nothing that
 * grows with the QPs that are not due.
 */
static void test_timers_scale(void)
{
	const uint32_t n = TIMER_QPS, due = TIMER_DUE, rounds = 200;
	const unsigned lg = log2_up(n + due) + 1;
	struct qhca_qp *qp = big_init(n + due);
	uint64_t steps, tick_max = 0, earliest = UINT64_MAX;
	unsigned long arms;
	double t0, t_ticks = 0;
	uint32_t i, r;

	steps = big.timer_steps;
	for (i = 0; i < n; i++) {
		uint64_t d = now + 1000000000ull + rnd() % 1000000000ull;

		qhca_qp_set_deadline(&big, &qp[i], d);
		if (d < earliest)
			earliest = d;
	}
	qhca_timer_update(&big);
	CHECK_EQ(big_armed, earliest);
	CHECK(big.timer_steps - steps <= (uint64_t)n * lg);
	for (r = 0; r < rounds; r++) {
		/* The RNR NAKs arrive: the few arm their timers (comp.c), the timer follows. */
		steps = big.timer_steps;
		for (i = n; i < n + due; i++)
			qhca_qp_set_deadline(&big, &qp[i], now + 10000 + (i - n));
		qhca_timer_update(&big);
		CHECK_EQ(big_armed, now + 10000);
		/* The tick: the few expire, the others are not looked at. */
		now += 10000 + due;
		t0 = now_s();
		big_armed = UINT64_MAX;
		qhca_engine_timer(&big);
		t_ticks += now_s() - t0;
		for (i = n; i < n + due; i++)
			CHECK_EQ(qp[i].deadline, UINT64_MAX);
		CHECK_EQ(big_armed, earliest);
		if (big.timer_steps - steps > tick_max)
			tick_max = big.timer_steps - steps;
	}
	/* Arming the few and the tick that expires them: 2 * due heap operations. */
	CHECK(tick_max <= 2ull * due * lg);
	/* An ACK that makes progress on one of the many: its deadline moves on. Not the
	 * earliest: the platform's timer is not touched. */
	for (i = 0; i < n && qp[i].deadline == earliest; i++)
		;
	steps = big.timer_steps;
	arms = big_arms;
	qhca_qp_set_deadline(&big, &qp[i], qp[i].deadline + 1000000000ull);
	qhca_timer_update(&big);
	CHECK(big.timer_steps - steps <= 2ull * lg);
	CHECK_EQ(big_arms, arms);
	/* Cancelled, every one: O(log n) each, and then the timer is off. */
	steps = big.timer_steps;
	for (i = 0; i < n; i++)
		qhca_qp_set_deadline(&big, &qp[i], UINT64_MAX);
	qhca_timer_update(&big);
	CHECK(big.timer_steps - steps <= (uint64_t)n * lg);
	CHECK_EQ(big_armed, UINT64_MAX);
	if (getenv("QHCA_TEST_VERBOSE"))
		fprintf(stderr, "    %u QPs timed, %u due: at most %llu steps a round, %.1f us a tick\n",
			n, due, (unsigned long long)tick_max, t_ticks / rounds * 1e6);
	big_fini(qp, n + due);
}

/* Is the structure sound: every QP where it says, none due before its parent? */
static bool heap_sound(const struct qhca_engine *e)
{
	uint32_t i;

	for (i = 0; i < e->timer_n; i++) {
		if (e->timer_heap[i]->timer_idx != i + 1 ||
		    (i && e->timer_heap[(i - 1) / 2]->deadline > e->timer_heap[i]->deadline))
			return false;
	}
	return true;
}

/*
 * Random sets, moves (earlier and later), cancels and unlinks of 48 QPs, and ticks at
 * random times, against a model: a tick expires exactly the QPs due by then, and the
 * platform's timer always holds the earliest deadline.
 */
static void test_timers_order_and_cancel(void)
{
	enum { N = 48 };
	struct qhca_qp *qp = big_init(N);
	uint64_t model[N], min;
	unsigned bad_heap = 0, bad_deadline = 0, bad_armed = 0, bad_count = 0;
	uint32_t i, k, count;

	for (i = 0; i < N; i++)
		model[i] = UINT64_MAX;
	for (k = 0; k < 20000; k++) {
		i = (uint32_t)(rnd() % N);
		switch (rnd() % 5) {
		case 0:
		case 1:
		case 2:
			model[i] = now + 1 + rnd() % 100000;
			qhca_qp_set_deadline(&big, &qp[i], model[i]);
			break;
		case 3:
			model[i] = UINT64_MAX;
			qhca_qp_set_deadline(&big, &qp[i], UINT64_MAX);
			break;
		default:
			model[i] = UINT64_MAX;
			qhca_qp_unlink(&big, &qp[i]);
			break;
		}
		if (k % 5 == 0) {
			/* A tick, due or not (a platform may call early). */
			now += rnd() % 30000;
			qhca_engine_timer(&big);
			for (i = 0; i < N; i++)
				if (model[i] <= now)
					model[i] = UINT64_MAX;
		}
		qhca_timer_update(&big);
		min = UINT64_MAX;
		count = 0;
		for (i = 0; i < N; i++) {
			if (model[i] < min)
				min = model[i];
			count += model[i] != UINT64_MAX;
			bad_deadline += qp[i].deadline != model[i];
		}
		bad_armed += big_armed != min;
		bad_count += big.timer_n != count;
		bad_heap += !heap_sound(&big);
	}
	CHECK_EQ(bad_deadline, 0);
	CHECK_EQ(bad_armed, 0);
	CHECK_EQ(bad_count, 0);
	CHECK_EQ(bad_heap, 0);
	big_fini(qp, N);
}

/* 3000 QPs due at once: one callback expires 1024 of them, earliest first, and asks to
 * be called again at once for the rest. */
static void test_timers_budget(void)
{
	enum { N = 3000, BUDGET = 1024 };
	struct qhca_qp *qp = big_init(N);
	static uint64_t d[N];
	unsigned calls = 0, bad_order = 0;
	uint32_t i;

	for (i = 0; i < N; i++) {
		d[i] = now + 1 + (i * 7919u) % N;	/* all different, in no order */
		qhca_qp_set_deadline(&big, &qp[i], d[i]);
	}
	qhca_timer_update(&big);
	now += N + 1;
	while (big_armed != UINT64_MAX && calls < 10) {
		uint32_t before = big.timer_n;

		CHECK(big_armed <= now);
		big_armed = UINT64_MAX;
		qhca_engine_timer(&big);
		CHECK(before - big.timer_n <= BUDGET);
		/* Earliest first: each QP expired was due before every one still waiting. */
		for (i = 0; i < N; i++)
			if (qp[i].deadline == UINT64_MAX && big.timer_n &&
			    d[i] > big.timer_heap[0]->deadline)
				bad_order++;
		calls++;
	}
	CHECK_EQ(calls, (N + BUDGET - 1) / BUDGET);
	CHECK_EQ(big.timer_n, 0);
	CHECK_EQ(bad_order, 0);
	big_fini(qp, N);
}

/* The harness's node 0 arms its timer for @deadline; fire it then. */
static void fire(uint64_t at)
{
	if (at > now)
		now = at;
	nodes[0].deadline = UINT64_MAX;
	qhca_engine_timer(&nodes[0].e);
}

/*
 * Real QPs leave the timers when they are destroyed, go to RESET or the device resets; a
 * QP in RTS with a WQE outstanding on a dead link times out, retries and goes on.
 */
static void test_timers_leave_with_qp(void)
{
	struct qhca_engine *e = &nodes[0].e;
	struct qp a, b, c, d, peer;
	struct qhca_qp *qa, *qb, *qc;
	uint64_t t;

	setup();
	a = make_qp(&nodes[0], QHCA_QPT_RC, 0);
	b = make_qp(&nodes[0], QHCA_QPT_RC, 0);
	c = make_qp(&nodes[0], QHCA_QPT_RC, 0);
	qa = qhca_qp_find(e, a.qpn);
	qb = qhca_qp_find(e, b.qpn);
	qc = qhca_qp_find(e, c.qpn);
	t = now;
	qhca_qp_set_deadline(e, qa, t + 300);
	qhca_qp_set_deadline(e, qb, t + 100);
	qhca_qp_set_deadline(e, qc, t + 200);
	qhca_timer_update(e);
	CHECK_EQ(nodes[0].deadline, t + 100);
	CHECK_EQ(e->timer_n, 3);
	/* Destroyed: the timer moves on to the next. */
	CHECK_EQ(qhca_qp_destroy(e, b.qpn), QHCA_ST_OK);
	CHECK_EQ(nodes[0].deadline, t + 200);
	CHECK_EQ(e->timer_n, 2);
	/* RESET: off the timers; a tick at its old deadline finds nothing due. */
	{
		struct qhca_qp_attr at = { .state = QHCA_QPS_RESET };

		CHECK_EQ(modify(&c, QHCA_QP_STATE, &at), QHCA_ST_OK);
	}
	CHECK_EQ(e->timer_n, 1);
	CHECK_EQ(qc->deadline, UINT64_MAX);
	fire(t + 200);
	CHECK_EQ(qa->deadline, t + 300);
	CHECK_EQ(nodes[0].deadline, t + 300);
	fire(t + 300);		/* in RESET too: it only loses its deadline */
	CHECK_EQ(qa->deadline, UINT64_MAX);
	CHECK_EQ(e->timer_n, 0);
	CHECK_EQ(nodes[0].deadline, UINT64_MAX);
	/* A connected QP with a SEND outstanding on a dead link: it times out and retries. */
	d = make_qp(&nodes[0], QHCA_QPT_RC, 0);
	peer = make_qp(&nodes[1], QHCA_QPT_RC, 0);
	connect_pair(&d, &peer);
	drop_pct = 100;
	{
		uint64_t buf;
		uint32_t lkey = make_mr(&nodes[0], 4096, QHCA_ACCESS_LOCAL_WRITE, &buf);
		sq_wqe(&d, QHCA_WR_SEND, 7, buf, 64, lkey);
		post_send(&d);
	}
	CHECK_EQ(e->timer_n, 1);
	CHECK(qhca_qp_find(e, d.qpn)->deadline != UINT64_MAX);
	t = qhca_qp_find(e, d.qpn)->deadline;
	fire(t);
	CHECK_EQ(e->cnt.timeouts, 1);
	CHECK(qhca_qp_find(e, d.qpn)->deadline > t);
	CHECK_EQ(nodes[0].deadline, qhca_qp_find(e, d.qpn)->deadline);
	CHECK_EQ(e->timer_n, 1);
	drop_pct = 0;
	/* The device resets: no QP, no timer. */
	qhca_engine_reg_write(e, QHCA_REG_CTRL, QHCA_CTRL_RESET);
	CHECK_EQ(e->timer_n, 0);
	CHECK_EQ(nodes[0].deadline, UINT64_MAX);
	link_n = 0;
	teardown();
}

static const struct unit_test tests[] = {
	{ "timers_scale", test_timers_scale },
	{ "timers_order_and_cancel", test_timers_order_and_cancel },
	{ "timers_budget", test_timers_budget },
	{ "timers_leave_with_qp", test_timers_leave_with_qp },
	{}
};

int main(int argc, char **argv)
{
	return unit_main(tests, argc, argv);
}
