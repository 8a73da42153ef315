// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The iWARP port's connections (iw_cm.c, iw_tx.c, iw_rx.c), two engines back to back: listen, connect, the MPA
 * request and reply with their private data and IRD/ORD, accept and reject, a SYN to no
 * listener, the events the driver gets, a graceful close, all through a lossy link too.
 */
#include "transport_harness.h"
#include "iw_conn.h"

struct evq {
	uint64_t ring;
	uint32_t ci;
	unsigned log2;
};

static struct evq evq[2];

/* An async EQ of 2^@log2 entries on each node, to read the connection events from. */
static void events_init_log2(unsigned log2)
{
	int i;

	for (i = 0; i < 2; i++) {
		struct qhca_cmd_create_eq c = {
			.ring_addr = galloc(&nodes[i], sizeof(struct qhca_eqe) << log2),
			.log2_entries = log2, .vector = 1, .flags = QHCA_EQ_ASYNC };
		uint32_t h;

		CHECK_EQ(qhca_eq_create(&nodes[i].e, &c, &h), QHCA_ST_OK);
		evq[i].ring = c.ring_addr;
		evq[i].ci = 0;
		evq[i].log2 = log2;
	}
}

static void events_init(void)
{
	events_init_log2(8);
}

/* The next event of node @i of @type (others before it are skipped), or false. */
static bool event(int i, uint8_t type, uint32_t *handle, uint64_t *data)
{
	for (;;) {
		const struct qhca_eqe *q = gptr(&nodes[i], evq[i].ring +
						(evq[i].ci & ((1u << evq[i].log2) - 1)) *
						sizeof(*q));
		uint8_t phase = ((evq[i].ci >> evq[i].log2) & 1) ? 0 : QHCA_EQE_PHASE;

		if ((q->flags & QHCA_EQE_PHASE) != phase)
			return false;
		evq[i].ci++;
		if (q->type == type) {
			*handle = q->handle;
			*data = q->data;
			return true;
		}
	}
}

/*
 * Step the link until node @i has an event of @type (a whole pump() would run the clock to
 * the active side's MPA timeout: a driver answers a request at once).
 */
static bool wait_event(int i, uint8_t type, uint32_t *handle, uint64_t *data)
{
	unsigned k;

	for (k = 0; k < 200000; k++) {
		if (event(i, type, handle, data))
			return true;
		pump_steps(1);
	}
	return false;
}

static void to_init(struct qp *q)
{
	struct qhca_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.state = QHCA_QPS_INIT;
	a.access_flags = QHCA_ACCESS_ALL;
	CHECK_EQ(modify(q, QHCA_QP_STATE | QHCA_QP_ACCESS_FLAGS | QHCA_QP_PKEY_INDEX |
			QHCA_QP_PORT, &a), QHCA_ST_OK);
}

static struct qhca_iw_conn conn_args(int from, uint16_t lport, uint16_t rport, const char *pd)
{
	struct qhca_iw_conn a;

	memset(&a, 0, sizeof(a));
	memcpy(a.local_addr, nodes[from].gid, 16);
	memcpy(a.remote_addr, nodes[1 - from].gid, 16);
	a.local_port = lport;
	a.remote_port = rport;
	memcpy(a.dmac, nodes[1 - from].mac, 6);
	a.ird = a.ord = 4;
	a.pd_len = (uint16_t)strlen(pd);
	memcpy(a.private_data, pd, a.pd_len);
	return a;
}

static void iw_setup(void)
{
	harness_link = QHCA_LINK_IWARP;
	setup();
	harness_link = QHCA_LINK_ROCE;
	events_init();
}

static void test_accept(int loss)
{
	struct qhca_iw_listen l = { .port = 4000, .backlog = 4 };
	struct qhca_iw_conn a, q;
	uint32_t lh, ch, pch, h = 0;
	uint64_t d;
	struct qp x, y;

	iw_setup();
	drop_pct = (unsigned)loss;
	CHECK_EQ(qhca_engine_reg_read(&nodes[0].e, QHCA_REG_CAPS) & QHCA_CAP_IWARP,
		 QHCA_CAP_IWARP);
	x = make_qp(&nodes[0], QHCA_QPT_RC, 0);
	y = make_qp(&nodes[1], QHCA_QPT_RC, 0);
	to_init(&x);
	to_init(&y);
	CHECK_EQ(qhca_iw_listen(&nodes[1].e, &l, &lh), QHCA_ST_OK);
	CHECK_EQ(qhca_iw_listen(&nodes[1].e, &l, &h), QHCA_ST_BUSY);	/* the port is taken */
	a = conn_args(0, 5000, 4000, "hello from the active side");
	CHECK_EQ(qhca_iw_connect(&nodes[0].e, x.qpn, &a, &ch), QHCA_ST_OK);
	CHECK_EQ(qhca_iw_connect(&nodes[0].e, x.qpn, &a, &h), QHCA_ST_BUSY);	/* the QP's bound */
	/* The passive side has the request, with the private data and IRD/ORD. */
	CHECK(wait_event(1, QHCA_EVENT_IW_CONNECT_REQUEST, &pch, &d));
	CHECK_EQ(d, lh);
	CHECK_EQ(qhca_iw_query(&nodes[1].e, pch, &q), QHCA_ST_OK);
	CHECK_EQ(q.pd_len, strlen("hello from the active side"));
	CHECK(!memcmp(q.private_data, "hello from the active side", q.pd_len));
	CHECK_EQ(q.mpa_rev, 2);
	CHECK_EQ(q.ird, 4);
	CHECK_EQ(q.remote_port, 5000);
	CHECK_EQ(q.local_port, 4000);
	CHECK(!memcmp(q.remote_addr, nodes[0].gid, 16) && !memcmp(q.dmac, nodes[0].mac, 6));
	CHECK_EQ(q.listener, lh);
	/* The active side has no reply yet. */
	CHECK(!event(0, QHCA_EVENT_IW_CONNECT_REPLY, &h, &d));
	a = conn_args(1, 0, 0, "and back");
	a.qpn = y.qpn;
	CHECK_EQ(qhca_iw_accept(&nodes[1].e, pch, &a), QHCA_ST_OK);
	CHECK_EQ(qhca_iw_accept(&nodes[1].e, pch, &a), QHCA_ST_BAD_STATE);	/* once */
	pump();
	CHECK(event(0, QHCA_EVENT_IW_CONNECT_REPLY, &h, &d));
	CHECK_EQ(h, ch);
	CHECK_EQ(d, QHCA_IW_ST_OK);
	CHECK_EQ(qhca_iw_query(&nodes[0].e, ch, &q), QHCA_ST_OK);
	CHECK_EQ(q.pd_len, strlen("and back"));
	CHECK(!memcmp(q.private_data, "and back", q.pd_len));
	/* A graceful close: the peer hears of it, both connections end, handles free. */
	memset(&a, 0, sizeof(a));
	CHECK_EQ(qhca_iw_disconnect(&nodes[0].e, ch, &a), QHCA_ST_OK);
	/* step by step, as a driver answers the event at once (a whole pump would run into
	 * the closer's FIN_WAIT_2 timeout) */
	h = 0;
	CHECK(wait_event(1, QHCA_EVENT_IW_DISCONNECTED, &h, &d));
	CHECK_EQ(h, pch);
	CHECK_EQ(qhca_iw_disconnect(&nodes[1].e, pch, &a), QHCA_ST_OK);
	now += 5000000000ull;	/* past TIME_WAIT */
	pump();
	h = 0;
	CHECK(event(1, QHCA_EVENT_IW_CLOSED, &h, &d));
	CHECK(h == pch && (d == QHCA_IW_ST_LOCAL || d == QHCA_IW_ST_OK));
	h = 0;
	CHECK(event(0, QHCA_EVENT_IW_CLOSED, &h, &d));
	CHECK(h == ch && (d == QHCA_IW_ST_LOCAL || d == QHCA_IW_ST_OK));
	CHECK(!event(0, QHCA_EVENT_IW_CLOSED, &h, &d) && !event(1, QHCA_EVENT_IW_CLOSED, &h, &d));
	/* the handles stay until the driver releases them */
	CHECK_EQ(qhca_iw_query(&nodes[0].e, ch, &q), QHCA_ST_OK);
	CHECK_EQ(qhca_iw_disconnect(&nodes[0].e, ch, &a), QHCA_ST_OK);
	CHECK_EQ(qhca_iw_disconnect(&nodes[1].e, pch, &a), QHCA_ST_OK);
	CHECK_EQ(qhca_iw_query(&nodes[0].e, ch, &q), QHCA_ST_BAD_HANDLE);
	CHECK_EQ(qhca_iw_query(&nodes[1].e, pch, &q), QHCA_ST_BAD_HANDLE);
	CHECK_EQ(qhca_iw_unlisten(&nodes[1].e, lh), QHCA_ST_OK);
	CHECK_EQ(qhca_iw_unlisten(&nodes[1].e, lh), QHCA_ST_BAD_HANDLE);
	CHECK_EQ(host_errors, 0);
	teardown();
}

static void test_connect_accept(void)
{
	test_accept(0);
}

static void test_connect_accept_lossy(void)
{
	test_accept(20);
}

/* A rejected request: the active side hears REJECTED with the passive side's reasons. */
static void test_reject(void)
{
	struct qhca_iw_listen l = { .port = 4001, .backlog = 1 };
	struct qhca_iw_conn a, q;
	uint32_t lh, ch, pch, h;
	uint64_t d;
	struct qp x;

	iw_setup();
	x = make_qp(&nodes[0], QHCA_QPT_RC, 0);
	to_init(&x);
	CHECK_EQ(qhca_iw_listen(&nodes[1].e, &l, &lh), QHCA_ST_OK);
	a = conn_args(0, 5001, 4001, "may I");
	CHECK_EQ(qhca_iw_connect(&nodes[0].e, x.qpn, &a, &ch), QHCA_ST_OK);
	CHECK(wait_event(1, QHCA_EVENT_IW_CONNECT_REQUEST, &pch, &d));
	a = conn_args(1, 0, 0, "no");
	CHECK_EQ(qhca_iw_reject(&nodes[1].e, pch, &a), QHCA_ST_OK);
	pump();
	CHECK(event(0, QHCA_EVENT_IW_CONNECT_REPLY, &h, &d));
	CHECK_EQ(h, ch);
	CHECK_EQ(d, QHCA_IW_ST_REJECTED);
	/* the reasons came with the reply */
	CHECK_EQ(qhca_iw_query(&nodes[0].e, ch, &q), QHCA_ST_OK);
	CHECK(q.pd_len == 2 && !memcmp(q.private_data, "no", 2));
	now += 5000000000ull;
	pump();
	h = 0;
	CHECK(event(0, QHCA_EVENT_IW_CLOSED, &h, &d));
	CHECK(h == ch && d == QHCA_IW_ST_REJECTED);
	CHECK(event(1, QHCA_EVENT_IW_CLOSED, &h, &d));
	CHECK(h == pch && d == QHCA_IW_ST_REJECTED);
	memset(&a, 0, sizeof(a));
	CHECK_EQ(qhca_iw_disconnect(&nodes[0].e, ch, &a), QHCA_ST_OK);
	CHECK_EQ(qhca_iw_query(&nodes[0].e, ch, &q), QHCA_ST_BAD_HANDLE);
	teardown();
}

/*
 * A SYN to a port nobody listens on is not the device's (it goes to the netdev, not
 * started here, so nothing answers), and the active side gives up after its SYN retries:
 * REPLY with TIMEOUT, then CLOSED. Hostile arguments are refused.
 */
static void test_no_listener(void)
{
	struct qhca_iw_listen l = { .port = 0, .backlog = 1 };
	struct qhca_iw_conn a;
	uint32_t ch, h;
	uint64_t d;
	struct qp x;
	int i;

	iw_setup();
	x = make_qp(&nodes[0], QHCA_QPT_RC, 0);
	CHECK_EQ(qhca_iw_listen(&nodes[1].e, &l, &h), QHCA_ST_BAD_FIELD);	/* port 0 */
	l.port = 1;
	l.backlog = 0;
	CHECK_EQ(qhca_iw_listen(&nodes[1].e, &l, &h), QHCA_ST_BAD_FIELD);
	a = conn_args(0, 5002, 4002, "");
	CHECK_EQ(qhca_iw_connect(&nodes[0].e, x.qpn, &a, &ch), QHCA_ST_BAD_STATE);	/* RESET */
	to_init(&x);
	a.pd_len = QHCA_IW_PD_MAX + 1;
	CHECK_EQ(qhca_iw_connect(&nodes[0].e, x.qpn, &a, &ch), QHCA_ST_BAD_FIELD);
	a.pd_len = 0;
	a.ird = QHCA_MAX_RD_ATOMIC + 1;
	CHECK_EQ(qhca_iw_connect(&nodes[0].e, x.qpn, &a, &ch), QHCA_ST_BAD_FIELD);
	a.ird = 1;
	a.rsvd[5] = 1;
	CHECK_EQ(qhca_iw_connect(&nodes[0].e, x.qpn, &a, &ch), QHCA_ST_BAD_FIELD);
	a.rsvd[5] = 0;
	a.pd_len = QHCA_IW_PD_MAX - 3;		/* RFC 6581's IRD/ORD take 4 bytes */
	CHECK_EQ(qhca_iw_connect(&nodes[0].e, x.qpn, &a, &ch), QHCA_ST_BAD_FIELD);
	a.pd_len = 0;
	CHECK_EQ(qhca_iw_connect(&nodes[0].e, x.qpn + 1, &a, &ch), QHCA_ST_BAD_HANDLE);
	CHECK_EQ(qhca_iw_connect(&nodes[0].e, x.qpn, &a, &ch), QHCA_ST_OK);
	for (i = 0; i < 40 && !event(0, QHCA_EVENT_IW_CONNECT_REPLY, &h, &d); i++) {
		now += 10000000000ull;
		qhca_engine_timer(&nodes[0].e);
		pump();
	}
	CHECK_EQ(h, ch);
	CHECK_EQ(d, QHCA_IW_ST_TIMEOUT);
	pump();
	h = 0;
	CHECK(event(0, QHCA_EVENT_IW_CLOSED, &h, &d) && h == ch);
	CHECK_EQ(qhca_iw_accept(&nodes[0].e, ch, &a), QHCA_ST_BAD_STATE);
	memset(&a, 0, sizeof(a));
	CHECK_EQ(qhca_iw_disconnect(&nodes[0].e, ch, &a), QHCA_ST_OK);	/* released */
	CHECK_EQ(qhca_iw_accept(&nodes[0].e, ch, &a), QHCA_ST_BAD_HANDLE);
	teardown();
}

/* x (node 0) connected to y (node 1) through a listener; both QPs then in RTS. */
static void iw_pair(struct qp *x, struct qp *y, uint16_t ird)
{
	struct qhca_iw_listen l = { .port = 4100, .backlog = 2 };
	struct qhca_iw_conn a;
	uint32_t lh, ch, pch, h;
	uint64_t d;

	*x = make_qp(&nodes[0], QHCA_QPT_RC, 0);
	*y = make_qp(&nodes[1], QHCA_QPT_RC, 0);
	to_init(x);
	to_init(y);
	CHECK_EQ(qhca_iw_listen(&nodes[1].e, &l, &lh), QHCA_ST_OK);
	a = conn_args(0, 5100, 4100, "");
	a.ird = a.ord = ird;
	CHECK_EQ(qhca_iw_connect(&nodes[0].e, x->qpn, &a, &ch), QHCA_ST_OK);
	CHECK(wait_event(1, QHCA_EVENT_IW_CONNECT_REQUEST, &pch, &d));
	a = conn_args(1, 0, 0, "");
	a.qpn = y->qpn;
	a.ird = a.ord = ird;
	CHECK_EQ(qhca_iw_accept(&nodes[1].e, pch, &a), QHCA_ST_OK);
	pump();
	CHECK(event(0, QHCA_EVENT_IW_CONNECT_REPLY, &h, &d) && d == QHCA_IW_ST_OK);
	CHECK_EQ(qhca_qp_find(&nodes[0].e, x->qpn)->state, QHCA_QPS_RTS);
	CHECK_EQ(qhca_qp_find(&nodes[1].e, y->qpn)->state, QHCA_QPS_RTS);
}

/*
 * RDMA over the connection: WRITE (tagged, by STag and offset), SEND (untagged, into the
 * receive of its MSN), READ (a Read Request, answered by tagged Read Responses into a sink
 * with remote write rights), byte-exact, with their completions; @loss percent of the
 * frames lost on the way (TCP brings them back).
 */
static void datapath(unsigned loss)
{
	const uint32_t big = 300000;
	uint64_t xb, yb, xs, ys;
	uint32_t xk, yk, xsk, ysk;
	struct qhca_sq_wqe *w;
	struct qp x, y;

	iw_setup();
	iw_pair(&x, &y, 4);
	drop_pct = loss;
	xk = make_mr(&nodes[0], 1 << 20, QHCA_ACCESS_LOCAL_WRITE | QHCA_ACCESS_REMOTE_WRITE, &xb);
	yk = make_mr(&nodes[1], 1 << 20, QHCA_ACCESS_LOCAL_WRITE | QHCA_ACCESS_REMOTE_WRITE |
		     QHCA_ACCESS_REMOTE_READ, &yb);
	fill(&nodes[0], xb, big, 1);
	fill(&nodes[1], yb + 500000, big, 2);
	/* WRITE x -> y */
	w = sq_wqe(&x, QHCA_WR_RDMA_WRITE, 1, xb, big, xk);
	w->remote_addr = yb;
	w->rkey = yk;
	post_send(&x);
	/* SEND x -> y: 10 000 bytes into a receive of 16 384 */
	xsk = make_mr(&nodes[0], 16384, QHCA_ACCESS_LOCAL_WRITE, &xs);
	ysk = make_mr(&nodes[1], 16384, QHCA_ACCESS_LOCAL_WRITE, &ys);
	fill(&nodes[0], xs, 10000, 3);
	post_recv(&y, 7, ys, 16384, ysk);
	sq_wqe(&x, QHCA_WR_SEND, 2, xs, 10000, xsk);
	post_send(&x);
	/* READ: y's bytes at +500000 into x's at +600000 (x's region: remote write) */
	w = sq_wqe(&x, QHCA_WR_RDMA_READ, 3, xb + 600000, big, xk);
	w->remote_addr = yb + 500000;
	w->rkey = yk;
	post_send(&x);
	pump();
	expect_cqe(&nodes[0], &x.scq, 1, QHCA_WC_SUCCESS, QHCA_WC_RDMA_WRITE, big);
	expect_cqe(&nodes[0], &x.scq, 2, QHCA_WC_SUCCESS, QHCA_WC_SEND, 10000);
	expect_cqe(&nodes[0], &x.scq, 3, QHCA_WC_SUCCESS, QHCA_WC_RDMA_READ, big);
	expect_cqe(&nodes[1], &y.rcq, 7, QHCA_WC_SUCCESS, QHCA_WC_RECV, 10000);
	CHECK(same(&nodes[0], xb, &nodes[1], yb, big));
	CHECK(same(&nodes[0], xs, &nodes[1], ys, 10000));
	CHECK(same(&nodes[1], yb + 500000, &nodes[0], xb + 600000, big));
	CHECK_EQ(host_errors, 0);
	teardown();
}

/*
 * READ with local invalidate over iWARP (what rdma_rw posts for every READ there): the Read
 * Responses placed by the sink's STag, the sink's key invalid after the READ completes.
 * Then the key invalidated and registered anew behind a READ, unfenced (the device runs
 * local work requests as it loads them): the responses go to the new registration, which
 * holds the STag now, but the READ may not invalidate it; it fails, the new one stays.
 */
static void test_read_with_inv(void)
{
	uint64_t yb, buf, list, iova = 0x6600000000ull;
	uint32_t yk, frkey, key, i;
	struct qhca_sq_wqe *w;
	struct qp x, y;
	struct qhca_mr *m;

	iw_setup();
	iw_pair(&x, &y, 4);
	yk = make_mr(&nodes[1], 8192, QHCA_ACCESS_LOCAL_WRITE | QHCA_ACCESS_REMOTE_READ, &yb);
	fill(&nodes[1], yb, 6000, 4);
	frkey = make_frmr(&nodes[0], 4);
	buf = galloc(&nodes[0], 8192);
	list = pbl_for(&nodes[0], buf, 8192).addr;
	key = frkey;
	for (i = 0; i < 2; i++) {
		key = variant(key, (uint8_t)(key + 1));
		post_reg(&x, 10 * i + 1, key, QHCA_ACCESS_LOCAL_WRITE | QHCA_ACCESS_REMOTE_WRITE,
			 iova, 6000, list, 2);
		w = sq_wqe(&x, QHCA_WR_RDMA_READ, 10 * i + 2, iova, 6000, key);
		w->remote_addr = yb;
		w->rkey = yk;
		w->flags |= QHCA_WQE_READ_INV;
		post_send(&x);
		if (i) {	/* behind it: LOCAL_INV, and REG_MR of the same key */
			inv_wqe(&x, 13, key);
			post_send(&x);
			post_reg(&x, 14, key, QHCA_ACCESS_LOCAL_WRITE | QHCA_ACCESS_REMOTE_WRITE |
				 QHCA_ACCESS_REMOTE_READ, iova, 6000, list, 2);
		}
		pump();
		expect_cqe(&nodes[0], &x.scq, 10 * i + 1, QHCA_WC_SUCCESS, QHCA_WC_REG_MR, 0);
		m = qhca_mr_find(&nodes[0].e, key);
		if (!i) {
			expect_cqe(&nodes[0], &x.scq, 2, QHCA_WC_SUCCESS, QHCA_WC_RDMA_READ, 6000);
			CHECK(!memcmp(gptr(&nodes[0], buf), gptr(&nodes[1], va_to_gpa(yb)), 6000));
			CHECK(m && m->invalid);
			continue;
		}
		expect_cqe(&nodes[0], &x.scq, 12, QHCA_WC_LOC_QP_OP_ERR, QHCA_WC_RDMA_READ,
			   UINT32_MAX);
		CHECK(m && !m->invalid);	/* the new registration, untouched */
		CHECK_EQ(m ? m->access & QHCA_ACCESS_REMOTE_READ : 0, QHCA_ACCESS_REMOTE_READ);
	}
	CHECK_EQ(host_errors, 0);
	teardown();
}

/* Step the link until @cq has a completion (an application reacting to it at once, as
 * rping does), then take it: its status, or -1 if none came. */
static int await_cqe(struct node *n, struct cq *cq, uint64_t *wr_id)
{
	struct qhca_cqe c;
	unsigned k;

	for (k = 0; k < 400000; k++) {
		if (poll_cq(n, cq, &c)) {
			*wr_id = c.wr_id;
			return cqe_status(&c);
		}
		if (pump_steps(1))
			break;	/* nothing left to do: none will come */
	}
	return poll_cq(n, cq, &c) ? (*wr_id = c.wr_id, cqe_status(&c)) : -1;
}

/*
 * rping's exchange, @rounds times, through a link that loses, duplicates and reorders
 * (the fabric's impairments in test-iwarp): x SENDs its buffer's address, y READs it, y
 * SENDs, x SENDs again, y WRITEs it back and SENDs. Each step starts as soon as the one
 * before completes, so ACKs, retransmissions and new data overlap as they do in a VM. Every
 * completion succeeds, the bytes arrive, and neither side closes the connection.
 */
static void rping_through(unsigned seed, unsigned rounds, unsigned delay_ms, bool lossy,
			  uint64_t *retransmits, uint64_t *timeouts)
{
	uint64_t rt[2], to[2];
	const uint32_t sz = 4096;
	uint64_t xb, yb, xm, ym, id, st;
	uint32_t xk, yk, xmk, ymk, h, r;
	struct qhca_sq_wqe *w;
	struct qp x, y;
	int bad = 0;

	iw_setup();
	srand(seed);
	iw_pair(&x, &y, 4);
	if (lossy) {
		drop_pct = 2;
		dup_pct = 1;
		reorder_pct = 2;	/* with a delay, its jitter reorders instead */
	}
	link_delay_ns = delay_ms * 1000000ull;
	link_jitter_ns = 3 * link_delay_ns;
	if (getenv("QHCA_HARNESS_LOG")) {
		qhca_engine_set_tracing(&nodes[0].e, true);
		qhca_engine_set_tracing(&nodes[1].e, true);
	}
	xk = make_mr(&nodes[0], sz, QHCA_ACCESS_LOCAL_WRITE | QHCA_ACCESS_REMOTE_WRITE |
		     QHCA_ACCESS_REMOTE_READ, &xb);
	yk = make_mr(&nodes[1], sz, QHCA_ACCESS_LOCAL_WRITE | QHCA_ACCESS_REMOTE_WRITE, &yb);
	xmk = make_mr(&nodes[0], 64, QHCA_ACCESS_LOCAL_WRITE, &xm);
	ymk = make_mr(&nodes[1], 64, QHCA_ACCESS_LOCAL_WRITE, &ym);
	for (r = 0; r < rounds && !bad; r++) {
		fill(&nodes[0], xb, sz, (uint8_t)r);
		post_recv(&y, 1, ym, 64, ymk);
		post_recv(&x, 2, xm, 64, xmk);
		sq_wqe(&x, QHCA_WR_SEND, 3, xm, 16, xmk);
		post_send(&x);
		bad |= await_cqe(&nodes[1], &y.rcq, &id) != QHCA_WC_SUCCESS || id != 1;
		bad |= await_cqe(&nodes[0], &x.scq, &id) != QHCA_WC_SUCCESS || id != 3;
		w = sq_wqe(&y, QHCA_WR_RDMA_READ, 4, yb, sz, yk);
		w->remote_addr = xb;
		w->rkey = xk;
		post_send(&y);
		bad |= await_cqe(&nodes[1], &y.scq, &id) != QHCA_WC_SUCCESS || id != 4;
		bad |= !same(&nodes[0], xb, &nodes[1], yb, sz);
		sq_wqe(&y, QHCA_WR_SEND, 5, ym, 16, ymk);
		post_send(&y);
		bad |= await_cqe(&nodes[0], &x.rcq, &id) != QHCA_WC_SUCCESS || id != 2;
		bad |= await_cqe(&nodes[1], &y.scq, &id) != QHCA_WC_SUCCESS || id != 5;
		post_recv(&y, 6, ym, 64, ymk);
		post_recv(&x, 7, xm, 64, xmk);
		sq_wqe(&x, QHCA_WR_SEND, 8, xm, 16, xmk);
		post_send(&x);
		bad |= await_cqe(&nodes[1], &y.rcq, &id) != QHCA_WC_SUCCESS || id != 6;
		bad |= await_cqe(&nodes[0], &x.scq, &id) != QHCA_WC_SUCCESS || id != 8;
		fill(&nodes[1], yb, sz, (uint8_t)(r + 100));
		w = sq_wqe(&y, QHCA_WR_RDMA_WRITE, 9, yb, sz, yk);
		w->remote_addr = xb;
		w->rkey = xk;
		w->flags = 0;
		post_send(&y);
		sq_wqe(&y, QHCA_WR_SEND, 10, ym, 16, ymk);
		post_send(&y);
		bad |= await_cqe(&nodes[0], &x.rcq, &id) != QHCA_WC_SUCCESS || id != 7;
		bad |= await_cqe(&nodes[1], &y.scq, &id) != QHCA_WC_SUCCESS || id != 10;
		bad |= !same(&nodes[0], xb, &nodes[1], yb, sz);
		if (bad)
			fprintf(stderr, "  seed %u: round %u of rping failed\n", seed, r);
	}
	CHECK(!bad);
	CHECK(!event(0, QHCA_EVENT_IW_CLOSED, &h, &st));
	CHECK(!event(1, QHCA_EVENT_IW_CLOSED, &h, &st));
	pump();				/* the last ACKs arrive */
	for (r = 0; r < 2; r++)
		qhca_iw_tcp_counts(&nodes[r].e, &rt[r], &to[r]);
	*retransmits = rt[0] + rt[1];
	*timeouts = to[0] + to[1];
	if (!lossy) {
		/* The connections close on a link with no loss and no delay (nothing is sent
		 * again): what they counted stays with the devices, and QUERY_COUNTERS reads
		 * it, unchanged. */
		struct qhca_iw_conn none;

		memset(&none, 0, sizeof(none));
		link_delay_ns = link_jitter_ns = 0;
		CHECK_EQ(qhca_iw_disconnect(&nodes[0].e, 1, &none), QHCA_ST_OK);
		CHECK(wait_event(1, QHCA_EVENT_IW_CLOSED, &h, &st));
		CHECK(wait_event(0, QHCA_EVENT_IW_CLOSED, &h, &st));
		CHECK_EQ(qhca_iw_disconnect(&nodes[0].e, 1, &none), QHCA_ST_OK);	/* released */
		CHECK_EQ(qhca_iw_disconnect(&nodes[1].e, 1, &none), QHCA_ST_OK);
		pump();
		for (r = 0; r < 2; r++) {
			CHECK_EQ(node_counter(&nodes[r], QHCA_CNT_RETRANSMITS), rt[r]);
			CHECK_EQ(node_counter(&nodes[r], QHCA_CNT_TIMEOUTS), to[r]);
		}
	}
	CHECK_EQ(host_errors, 0);
	teardown();
}

/*
 * Seeds 1001 on, through a lossy link (2% lost, 1% duplicated), each with one of four
 * delays: none (2% reordered), 20 ms, 80 ms and 150 ms (each + up to three times that of
 * jitter, which reorders). Then, as seed 0, a link that loses nothing but holds frames 150
 * to 600 ms, past TCP's retransmission timeout: the timeouts are spurious, and the exchange
 * rides them out. QHCA_IW_RPING_SEEDS=N: N lossy seeds, 8 unless set;
 * QHCA_IW_RPING_ONE=S: seed S alone (0: the lossless one).
 */
static void test_rping_impaired(void)
{
	static const unsigned delay_ms[4] = { 0, 20, 80, 150 };
	const char *env = getenv("QHCA_IW_RPING_SEEDS"), *one = getenv("QHCA_IW_RPING_ONE");
	unsigned first = one ? (unsigned)atoi(one) : 1001, seeds = env ? (unsigned)atoi(env) : 8;
	uint64_t rt, to, rt_all = 0;
	unsigned s;

	if (!one || first) {
		for (s = first; s < first + (one ? 1 : seeds); s++) {
			rping_through(s, 100, delay_ms[s % 4], true, &rt, &to);
			rt_all += rt;
		}
		CHECK(rt_all > 0);	/* the losses were made good by sending again */
	}
	if (!one || !first) {
		rping_through(0, 30, 150, false, &rt, &to);
		CHECK(to > 0);		/* nothing was lost: each timeout was the delay's */
	}
}

static void test_datapath(void)
{
	datapath(0);
}

static void test_datapath_lossy(void)
{
	datapath(10);
}

/* Let time pass (TIME_WAIT, FIN_WAIT_2) and take node @i's CLOSED event of @handle. */
static bool closed_event(int i, uint32_t handle, uint64_t *st)
{
	uint32_t h = 0;

	now += 70000000000ull;
	pump();
	return event(i, QHCA_EVENT_IW_CLOSED, &h, st) && h == handle;
}

/*
 * The iWARP rules hold: a READ whose sink lacks remote write rights is refused by the
 * requester's own device when its response comes (the READ completes in error); a WRITE
 * into a region without remote write and a SEND with no receive posted (iWARP has no RNR)
 * are refused by the responder. Each time both QPs end in error and both connections close
 * (a Terminate, then TCP's close). The QP's own access flags gate nothing on iWARP (as on
 * siw, and rdma_cm leaves an active side's at 0): a WRITE to a QP without remote write into
 * a region that allows it lands.
 */
static void test_datapath_errors(void)
{
	uint64_t xb, yb, st;
	uint32_t xk, yk;
	struct qhca_sq_wqe *w;
	struct qhca_cqe c;
	struct qp x, y;
	int k;

	for (k = 0; k < 4; k++) {
		iw_setup();
		iw_pair(&x, &y, 2);
		xk = make_mr(&nodes[0], 65536, QHCA_ACCESS_LOCAL_WRITE, &xb);
		yk = make_mr(&nodes[1], 65536, QHCA_ACCESS_LOCAL_WRITE | QHCA_ACCESS_REMOTE_READ |
			     (k == 3 ? QHCA_ACCESS_REMOTE_WRITE : 0), &yb);
		fill(&nodes[0], xb, 4096, 5);
		if (k == 3)	/* the region allows it, the QP does not */
			qhca_qp_find(&nodes[1].e, y.qpn)->access = QHCA_ACCESS_LOCAL_WRITE;
		w = sq_wqe(&x, k == 0 ? QHCA_WR_RDMA_READ : k == 2 ? QHCA_WR_SEND :
			   QHCA_WR_RDMA_WRITE, 1, xb, 4096, xk);
		w->remote_addr = yb;
		w->rkey = yk;
		post_send(&x);
		pump();
		if (k == 3) {
			expect_cqe(&nodes[0], &x.scq, 1, QHCA_WC_SUCCESS, QHCA_WC_RDMA_WRITE, 4096);
			CHECK(same(&nodes[0], xb, &nodes[1], yb, 4096));
			CHECK_EQ(qhca_qp_find(&nodes[1].e, y.qpn)->state, QHCA_QPS_RTS);
			teardown();
			continue;
		}
		CHECK_EQ(qhca_qp_find(&nodes[0].e, x.qpn)->state, QHCA_QPS_ERR);
		CHECK_EQ(qhca_qp_find(&nodes[1].e, y.qpn)->state, QHCA_QPS_ERR);
		CHECK(poll_cq(&nodes[0], &x.scq, &c));
		CHECK_EQ(c.wr_id, 1);
		if (k == 0)
			CHECK(QHCA_FIELD_GET(QHCA_CQE_STATUS_MASK, c.qpn_status) !=
			      QHCA_WC_SUCCESS);
		else	/* done once in TCP's hands: the responder's refusal comes after */
			CHECK_EQ(QHCA_FIELD_GET(QHCA_CQE_STATUS_MASK, c.qpn_status),
				 QHCA_WC_SUCCESS);
		if (k == 1)	/* the refused WRITE placed nothing */
			CHECK(!same(&nodes[0], xb, &nodes[1], yb, 4096));
		/* the Terminate, then a graceful close of TCP */
		CHECK(closed_event(0, 1, &st));
		CHECK_EQ(st, QHCA_IW_ST_OK);
		CHECK(closed_event(1, 1, &st));
		CHECK_EQ(st, QHCA_IW_ST_OK);
		CHECK_EQ(host_errors, 0);
		teardown();
	}
}

/*
 * Who decides a remote access on iWARP: the STag's region alone (RFC 5040 5.1 and 6.2:
 * the Data Sink's and Data Source's STags with their access rights), as Linux siw does;
 * a QP's remote access flags gate nothing (rdma_cm leaves an active side's at 0 on
 * iWARP, so rping's server, which reads and writes the client's buffers, would fail on a
 * device that gated them). Every combination of QP flags and region rights, for WRITE
 * and READ: it goes through exactly when the target region grants it (docs/security.md).
 */
static void test_access_is_the_stags(void)
{
	static const uint32_t qp_access[] = { 0, QHCA_ACCESS_REMOTE_READ | QHCA_ACCESS_REMOTE_WRITE |
					     QHCA_ACCESS_REMOTE_ATOMIC };
	uint64_t xb, yb;
	uint32_t xk, yk, need;
	struct qhca_sq_wqe *w;
	struct qhca_cqe c;
	struct qp x, y;
	int op, q, grant;

	for (op = 0; op < 2; op++)
		for (q = 0; q < 2; q++)
			for (grant = 0; grant < 2; grant++) {
				bool read = op == 1;

				need = read ? QHCA_ACCESS_REMOTE_READ : QHCA_ACCESS_REMOTE_WRITE;
				iw_setup();
				iw_pair(&x, &y, 2);
				/* a READ's sink takes the responses by its STag: remote write */
				xk = make_mr(&nodes[0], 65536, QHCA_ACCESS_LOCAL_WRITE |
					     QHCA_ACCESS_REMOTE_WRITE, &xb);
				yk = make_mr(&nodes[1], 65536, QHCA_ACCESS_LOCAL_WRITE |
					     (grant ? need : 0), &yb);
				fill(&nodes[0], xb, 4096, 5);
				fill(&nodes[1], yb, 4096, 9);
				qhca_qp_find(&nodes[1].e, y.qpn)->access = qp_access[q];
				qhca_qp_find(&nodes[0].e, x.qpn)->access = qp_access[q];
				w = sq_wqe(&x, read ? QHCA_WR_RDMA_READ : QHCA_WR_RDMA_WRITE, 7, xb,
					   4096, xk);
				w->remote_addr = yb;
				w->rkey = yk;
				post_send(&x);
				pump();
				if (grant) {
					expect_cqe(&nodes[0], &x.scq, 7, QHCA_WC_SUCCESS,
						   read ? QHCA_WC_RDMA_READ : QHCA_WC_RDMA_WRITE, 4096);
					CHECK(same(&nodes[0], xb, &nodes[1], yb, 4096));
					CHECK_EQ(qhca_qp_find(&nodes[1].e, y.qpn)->state, QHCA_QPS_RTS);
				} else {
					CHECK(!same(&nodes[0], xb, &nodes[1], yb, 4096));
					CHECK_EQ(qhca_qp_find(&nodes[1].e, y.qpn)->state, QHCA_QPS_ERR);
					CHECK(poll_cq(&nodes[0], &x.scq, &c));
					if (read)
						CHECK(QHCA_FIELD_GET(QHCA_CQE_STATUS_MASK,
								     c.qpn_status) != QHCA_WC_SUCCESS);
				}
				teardown();
			}
}

/*
 * ORD and IRD: four READs with ORD 2 go two at a time (the responder, IRD 2, would end
 * the connection otherwise), a fenced WRITE waits for them; all byte-exact.
 */
static void test_ord_and_fence(void)
{
	const uint32_t n = 100000;
	uint64_t xb, yb;
	uint32_t xk, yk, i;
	struct qhca_sq_wqe *w;
	struct qp x, y;

	iw_setup();
	iw_pair(&x, &y, 2);
	xk = make_mr(&nodes[0], 1 << 20, QHCA_ACCESS_LOCAL_WRITE | QHCA_ACCESS_REMOTE_WRITE, &xb);
	yk = make_mr(&nodes[1], 1 << 20, QHCA_ACCESS_LOCAL_WRITE | QHCA_ACCESS_REMOTE_WRITE |
		     QHCA_ACCESS_REMOTE_READ, &yb);
	fill(&nodes[1], yb, 4 * n, 9);
	for (i = 0; i < 4; i++) {
		w = sq_wqe(&x, QHCA_WR_RDMA_READ, 10 + i, xb + i * n, n, xk);
		w->remote_addr = yb + i * n;
		w->rkey = yk;
		post_send(&x);
	}
	/* the fenced WRITE sends what the first READ brings: sent early, it would carry the
	 * zeros that were there before */
	w = sq_wqe(&x, QHCA_WR_RDMA_WRITE, 20, xb, n, xk);
	w->remote_addr = yb + 5 * n;
	w->rkey = yk;
	w->flags |= QHCA_WQE_FENCE;
	post_send(&x);
	CHECK(qhca_qp_find(&nodes[0].e, x.qpn)->rd_atomic_out <= 2);
	pump();
	for (i = 0; i < 4; i++)
		expect_cqe(&nodes[0], &x.scq, 10 + i, QHCA_WC_SUCCESS, QHCA_WC_RDMA_READ, n);
	expect_cqe(&nodes[0], &x.scq, 20, QHCA_WC_SUCCESS, QHCA_WC_RDMA_WRITE, n);
	CHECK(same(&nodes[0], xb, &nodes[1], yb, 4 * n));
	CHECK(same(&nodes[1], yb, &nodes[1], yb + 5 * n, n));
	CHECK_EQ(qhca_qp_find(&nodes[1].e, y.qpn)->state, QHCA_QPS_RTS);
	CHECK_EQ(qhca_qp_find(&nodes[0].e, x.qpn)->rd_atomic_out, 0);
	/* one READ within ORD, then a fenced WRITE of what it brings: only the fence holds
	 * the WRITE back */
	fill(&nodes[1], yb + 6 * n, n, 7);
	w = sq_wqe(&x, QHCA_WR_RDMA_READ, 30, xb + 6 * n, n, xk);
	w->remote_addr = yb + 6 * n;
	w->rkey = yk;
	post_send(&x);
	w = sq_wqe(&x, QHCA_WR_RDMA_WRITE, 31, xb + 6 * n, n, xk);
	w->remote_addr = yb + 7 * n;
	w->rkey = yk;
	w->flags |= QHCA_WQE_FENCE;
	post_send(&x);
	pump();
	expect_cqe(&nodes[0], &x.scq, 30, QHCA_WC_SUCCESS, QHCA_WC_RDMA_READ, n);
	expect_cqe(&nodes[0], &x.scq, 31, QHCA_WC_SUCCESS, QHCA_WC_RDMA_WRITE, n);
	CHECK(same(&nodes[1], yb + 6 * n, &nodes[1], yb + 7 * n, n));
	teardown();
}

/* A QP destroyed under its connection resets it: both sides hear CLOSED. */
static void test_qp_destroyed(void)
{
	uint64_t st;
	struct qp x, y;

	iw_setup();
	iw_pair(&x, &y, 2);
	CHECK_EQ(qhca_qp_destroy(&nodes[1].e, y.qpn), QHCA_ST_OK);
	CHECK(closed_event(1, 1, &st));
	CHECK_EQ(st, QHCA_IW_ST_LOCAL);
	CHECK(closed_event(0, 1, &st));
	CHECK_EQ(st, QHCA_IW_ST_RESET);
	/* the peer's reset takes the other QP to error, as an RNIC's */
	CHECK_EQ(qhca_qp_find(&nodes[0].e, x.qpn)->state, QHCA_QPS_ERR);
	teardown();
}

/*
 * A graceful close in RDMA mode, as rdma_disconnect on iWARP makes it (the QP to SQD, the
 * driver's IW_DISCONNECT): the peer hears DISCONNECTED and its device answers the FIN with
 * its own at once (iw_cm's DISCONNECT upcall changes no QP state, so nothing else would);
 * both ends then hear CLOSED well before FIN_WAIT_2's minute (the active one after
 * TIME_WAIT's second), and a QP still bound goes to error, the receive it had posted
 * flushed: iw_cm's CLOSE expects the provider to have done so.
 */
static void test_graceful_close(void)
{
	struct qhca_iw_conn none;
	uint64_t t0, st, yb;
	uint32_t h, yk;
	struct qp x, y;

	iw_setup();
	iw_pair(&x, &y, 2);
	yk = make_mr(&nodes[1], 4096, QHCA_ACCESS_LOCAL_WRITE, &yb);
	post_recv(&y, 42, yb, 4096, yk);
	memset(&none, 0, sizeof(none));
	t0 = now;
	CHECK_EQ(qhca_iw_disconnect(&nodes[0].e, 1, &none), QHCA_ST_OK);
	CHECK(wait_event(1, QHCA_EVENT_IW_DISCONNECTED, &h, &st));
	CHECK_EQ(h, 1);
	CHECK(wait_event(1, QHCA_EVENT_IW_CLOSED, &h, &st));
	CHECK_EQ(st, QHCA_IW_ST_OK);
	CHECK(now - t0 < 1000000000ull);	/* the FIN came at once, no timer ran out */
	CHECK_EQ(qhca_qp_find(&nodes[1].e, y.qpn)->state, QHCA_QPS_ERR);
	expect_cqe(&nodes[1], &y.rcq, 42, QHCA_WC_WR_FLUSH_ERR, 0, 0);
	CHECK(wait_event(0, QHCA_EVENT_IW_CLOSED, &h, &st));
	CHECK_EQ(st, QHCA_IW_ST_LOCAL);
	CHECK(now - t0 < 5000000000ull);	/* TIME_WAIT's second, not FIN_WAIT_2's minute */
	CHECK_EQ(qhca_qp_find(&nodes[0].e, x.qpn)->state, QHCA_QPS_ERR);
	/* the driver releases the handles; then they are gone */
	CHECK_EQ(qhca_iw_disconnect(&nodes[0].e, 1, &none), QHCA_ST_OK);
	CHECK_EQ(qhca_iw_disconnect(&nodes[1].e, 1, &none), QHCA_ST_OK);
	CHECK_EQ(qhca_iw_disconnect(&nodes[1].e, 1, &none), QHCA_ST_BAD_HANDLE);
	CHECK_EQ(host_errors, 0);
	teardown();
}

/*
 * A SEND completes once TCP holds all of it, not when the peer acknowledges it (as siw; the
 * peer's delayed ACK would otherwise hold up every exchange of small messages): with every
 * frame lost, its completion is there all the same; once the link works again, TCP's
 * retransmission brings it to the receive, byte-exact.
 */
static void test_send_done_when_queued(void)
{
	uint64_t xs, ys;
	uint32_t xsk, ysk;
	struct qp x, y;

	iw_setup();
	iw_pair(&x, &y, 2);
	xsk = make_mr(&nodes[0], 8192, QHCA_ACCESS_LOCAL_WRITE, &xs);
	ysk = make_mr(&nodes[1], 8192, QHCA_ACCESS_LOCAL_WRITE, &ys);
	fill(&nodes[0], xs, 5000, 4);
	post_recv(&y, 9, ys, 8192, ysk);
	drop_pct = 100;
	sq_wqe(&x, QHCA_WR_SEND, 8, xs, 5000, xsk);
	post_send(&x);
	pump_steps(4);
	CHECK(frames_dropped > 0);
	expect_cqe(&nodes[0], &x.scq, 8, QHCA_WC_SUCCESS, QHCA_WC_SEND, 5000);
	expect_empty(&nodes[1], &y.rcq);
	drop_pct = 0;
	pump();
	expect_cqe(&nodes[1], &y.rcq, 9, QHCA_WC_SUCCESS, QHCA_WC_RECV, 5000);
	CHECK(same(&nodes[0], xs, &nodes[1], ys, 5000));
	CHECK_EQ(host_errors, 0);
	teardown();
}

/*
 * A request the driver has not answered: a FIN from the peer ends it with a RST at once
 * (not a FIN of ours that a peer could leave unacknowledged, the slot and its TCP held
 * outside the half-open bound), its TCP's memory goes back to the budget at CLOSED before
 * the driver releases the handle, and the backlog is free again; a request nobody answers
 * ends after 60 s (a lost CONNECT_REQUEST holds no backlog for ever).
 */
static void test_unanswered_request(void)
{
	struct qhca_iw_listen l = { .port = 4300, .backlog = 1 };
	struct qhca_iw_conn a, none;
	uint32_t lh, ch, pch, h;
	uint64_t d, hb0, t0;
	struct qp x;
	int i;

	iw_setup();
	memset(&none, 0, sizeof(none));
	x = make_qp(&nodes[0], QHCA_QPT_RC, 0);
	to_init(&x);
	CHECK_EQ(qhca_iw_listen(&nodes[1].e, &l, &lh), QHCA_ST_OK);
	hb0 = nodes[1].e.host_bytes;
	a = conn_args(0, 5300, 4300, "");
	CHECK_EQ(qhca_iw_connect(&nodes[0].e, x.qpn, &a, &ch), QHCA_ST_OK);
	CHECK(wait_event(1, QHCA_EVENT_IW_CONNECT_REQUEST, &pch, &d));
	CHECK(nodes[1].e.host_bytes > hb0);
	while (link_n)
		pump_steps(1);
	t0 = now;
	CHECK_EQ(qhca_iw_disconnect(&nodes[0].e, ch, &none), QHCA_ST_OK);	/* a FIN */
	CHECK_EQ(link_n, 1);
	drop_pct = 100;		/* whatever answers it is lost: no ACK of a FIN of ours comes */
	pump_steps(1);
	CHECK(event(1, QHCA_EVENT_IW_CLOSED, &h, &d));	/* at once: a RST ended it */
	CHECK_EQ(now, t0);
	drop_pct = 0;
	CHECK_EQ(h, pch);
	CHECK_EQ(d, QHCA_IW_ST_RESET);
	CHECK_EQ(nodes[1].e.host_bytes, hb0);	/* not released yet, its TCP gone all the same */
	CHECK_EQ(qhca_iw_accept(&nodes[1].e, pch, &none), QHCA_ST_BAD_STATE);
	CHECK_EQ(qhca_iw_disconnect(&nodes[1].e, pch, &none), QHCA_ST_OK);
	CHECK(event(0, QHCA_EVENT_IW_CONNECT_REPLY, &h, &d) && h == ch);	/* LOCAL */
	/* the backlog of 1 takes the next request; this one is never answered, and the
	 * peer's own MPA timeout (10 s) cannot end it: its frames are lost from then on */
	a = conn_args(0, 5301, 4300, "");
	x = make_qp(&nodes[0], QHCA_QPT_RC, 0);
	to_init(&x);
	CHECK_EQ(qhca_iw_connect(&nodes[0].e, x.qpn, &a, &ch), QHCA_ST_OK);
	CHECK(wait_event(1, QHCA_EVENT_IW_CONNECT_REQUEST, &pch, &d));
	drop_pct = 100;
	for (i = 0; i < 10 && !event(1, QHCA_EVENT_IW_CLOSED, &h, &d); i++) {
		now += 10000000000ull;
		qhca_engine_timer(&nodes[1].e);
	}
	CHECK(i == 5 || i == 6);		/* after 60 s, not before */
	CHECK_EQ(h, pch);
	CHECK_EQ(d, QHCA_IW_ST_TIMEOUT);
	CHECK_EQ(nodes[1].e.host_bytes, hb0);
	pump();
	CHECK(event(0, QHCA_EVENT_IW_CONNECT_REPLY, &h, &d));	/* the peer gave up too */
	CHECK_EQ(h, ch);
	CHECK_EQ(d, QHCA_IW_ST_TIMEOUT);
	CHECK_EQ(host_errors, 0);
	teardown();
}

/*
 * The active side sends first (RFC 5044 7.1): a SEND the responder posted before its
 * ACCEPT is held after the MPA reply until the initiator's first FPDU comes (siw as an
 * initiator refuses FPDUs that come before it has taken the reply), then goes at once; with
 * no FPDU from the initiator it goes 200 ms after the reply (a server that speaks first,
 * against an initiator that sends no RTR).
 */
static void test_responder_waits(void)
{
	struct qhca_iw_listen l = { .port = 4400, .backlog = 2 };
	struct qhca_iw_conn a;
	uint64_t xs, ys, d, t0;
	uint32_t xsk, ysk, lh, ch, pch, h;
	struct qp x, y;
	int first;

	for (first = 1; first >= 0; first--) {	/* the initiator speaks first, or not */
		iw_setup();
		x = make_qp(&nodes[0], QHCA_QPT_RC, 0);
		y = make_qp(&nodes[1], QHCA_QPT_RC, 0);
		to_init(&x);
		to_init(&y);
		xsk = make_mr(&nodes[0], 4096, QHCA_ACCESS_LOCAL_WRITE, &xs);
		ysk = make_mr(&nodes[1], 4096, QHCA_ACCESS_LOCAL_WRITE, &ys);
		fill(&nodes[0], xs, 100, 1);
		fill(&nodes[1], ys, 100, 2);
		post_recv(&x, 5, xs + 2048, 2048, xsk);
		post_recv(&y, 6, ys + 2048, 2048, ysk);
		sq_wqe(&y, QHCA_WR_SEND, 7, ys, 100, ysk);	/* the responder's, before ACCEPT */
		post_send(&y);
		CHECK_EQ(qhca_iw_listen(&nodes[1].e, &l, &lh), QHCA_ST_OK);
		a = conn_args(0, 5400, 4400, "");
		CHECK_EQ(qhca_iw_connect(&nodes[0].e, x.qpn, &a, &ch), QHCA_ST_OK);
		CHECK(wait_event(1, QHCA_EVENT_IW_CONNECT_REQUEST, &pch, &d));
		a = conn_args(1, 0, 0, "");
		a.qpn = y.qpn;
		CHECK_EQ(qhca_iw_accept(&nodes[1].e, pch, &a), QHCA_ST_OK);
		t0 = now;
		while (link_n)		/* the frames in flight arrive; no timer runs */
			pump_steps(1);
		CHECK(event(0, QHCA_EVENT_IW_CONNECT_REPLY, &h, &d) && d == QHCA_IW_ST_OK);
		CHECK_EQ(now, t0);
		expect_empty(&nodes[0], &x.rcq);	/* held: nothing from the responder yet */
		if (first) {
			sq_wqe(&x, QHCA_WR_SEND, 8, xs, 100, xsk);
			post_send(&x);
		}
		while (link_n)
			pump_steps(1);
		if (first) {	/* the initiator's FPDU let it go, with no timer run */
			CHECK_EQ(now, t0);
		} else {	/* it goes when its hold runs out */
			expect_empty(&nodes[0], &x.rcq);
			pump();
			CHECK(now - t0 >= 200000000ull);
		}
		expect_cqe(&nodes[0], &x.rcq, 5, QHCA_WC_SUCCESS, QHCA_WC_RECV, 100);
		CHECK(same(&nodes[1], ys, &nodes[0], xs + 2048, 100));
		if (first) {
			pump();
			expect_cqe(&nodes[1], &y.rcq, 6, QHCA_WC_SUCCESS, QHCA_WC_RECV, 100);
		}
		CHECK_EQ(host_errors, 0);
		teardown();
	}
}

/*
 * A closing connection ends in 10 s at the latest: a peer that takes nothing more (here
 * every frame is lost; a hostile one would answer only zero-window probes) cannot hold it,
 * its slot and memory, nor the destroy of a QP that iw_cm keeps until the CLOSE, for as
 * long as TCP's retransmissions would go on.
 */
static void test_close_bounded(void)
{
	struct qhca_iw_conn none;
	uint64_t t0, st;
	uint32_t h;
	struct qp x, y;
	int i;

	iw_setup();
	iw_pair(&x, &y, 2);
	memset(&none, 0, sizeof(none));
	drop_pct = 100;
	t0 = now;
	CHECK_EQ(qhca_iw_disconnect(&nodes[0].e, 1, &none), QHCA_ST_OK);	/* a FIN */
	for (i = 0; i < 30 && !event(0, QHCA_EVENT_IW_CLOSED, &h, &st); i++) {
		now += 1000000000ull;
		qhca_engine_timer(&nodes[0].e);
		pump_steps(100);
	}
	CHECK(now - t0 >= 10000000000ull && now - t0 <= 12000000000ull);
	CHECK_EQ(h, 1);
	CHECK_EQ(st, QHCA_IW_ST_LOCAL);	/* the status of the first end: ours */
	CHECK_EQ(qhca_qp_find(&nodes[0].e, x.qpn)->state, QHCA_QPS_ERR);
	CHECK_EQ(host_errors, 0);
	teardown();
}

/*
 * A peer on node 1's address played by hand: what node 0 sends it is taken off the link
 * (node 1's engine never sees it), and its own segments are built here. It acknowledges
 * node 0's SYN and nothing after it.
 */
static struct {
	struct iw_tcp_seg t;	/* its segments' template: t.seq its next sequence number */
	bool dev_syn;		/* node 0's SYN seen: dev_ack holds */
	uint32_t dev_ack;	/* the ACK it gives: node 0's ISN + 1 */
	unsigned frames;	/* node 0's frames it took */
} hp;

static void hand_peer_init(uint16_t peer_port, uint16_t dev_port)
{
	memset(&hp, 0, sizeof(hp));
	memcpy(hp.t.smac, nodes[1].mac, 6);
	memcpy(hp.t.dmac, nodes[0].mac, 6);
	memcpy(hp.t.sgid, nodes[1].gid, 16);
	memcpy(hp.t.dgid, nodes[0].gid, 16);
	hp.t.ipv6 = !roce_gid_is_v4(nodes[1].gid);
	hp.t.hop_limit = 64;
	hp.t.sport = peer_port;
	hp.t.dport = dev_port;
	hp.t.seq = 0x40000;
}

/* Node 0's frames on the link: taken by the peer. */
static void hand_peer_take(void)
{
	while (link_n) {
		struct iw_tcp_seg s;
		struct frame f;

		link_take(0, &f);
		if (f.to != 1 || iw_tcp_parse(f.data, f.len, &s) != IW_OK)
			continue;
		hp.frames++;
		if ((s.flags & IW_TCP_SYN) && !hp.dev_syn) {
			hp.dev_syn = true;
			hp.dev_ack = s.seq + 1;
		}
	}
}

/* A segment of the peer's with @flags, its window @window, @n bytes of @p. */
static void hand_peer_send(uint8_t flags, uint16_t window, const uint8_t *p, size_t n)
{
	struct iw_tcp_seg t = hp.t;
	uint8_t f[1600];
	size_t len;

	t.flags = flags;
	t.window = window;
	t.ack = (flags & IW_TCP_ACK) ? hp.dev_ack : 0;
	t.payload = p;
	t.payload_len = (uint32_t)n;
	if (flags & IW_TCP_SYN)
		t.mss = 1460;
	len = iw_tcp_build(&t, f, sizeof(f));
	CHECK(len > 0);
	qhca_engine_receive(&nodes[0].e, f, len);
	hp.t.seq += (uint32_t)n + !!(flags & IW_TCP_SYN) + !!(flags & IW_TCP_FIN);
}

/*
 * A connect the peer rejects (its MPA reply with R set) ends in IW_CLOSE_TIMEOUT_NS, as
 * every close of ours does: here the peer's window is shut from its SYN-ACK on and it
 * answers every zero-window probe, so neither our MPA request nor our FIN ever leaves and
 * TCP never gives up. The CLOSED event comes with REJECTED (the first end's status), the
 * connection's host memory is given back, the QP is free once the handle is released.
 */
static void test_rejected_connect_bounded(void)
{
	struct iw_mpa_rr rr = { .reply = true, .crc = true, .reject = true, .rev = 2 };
	struct qhca_iw_conn a, none;
	uint64_t base, held, t0, d, st = 0;
	uint32_t h, hh = 0;
	uint8_t mpa[64];
	bool closed = false;
	size_t n;
	struct qp x;
	int i;

	iw_setup();
	x = make_qp(&nodes[0], QHCA_QPT_RC, 0);
	to_init(&x);
	base = nodes[0].e.host_bytes;
	a = conn_args(0, 5400, 9400, "hi");
	hand_peer_init(9400, 5400);
	CHECK_EQ(qhca_iw_connect(&nodes[0].e, x.qpn, &a, &h), QHCA_ST_OK);
	hand_peer_take();
	CHECK(hp.dev_syn);
	hand_peer_send(IW_TCP_SYN | IW_TCP_ACK, 0, NULL, 0);	/* window 0 from the start */
	hand_peer_take();				/* our ACK; the MPA request waits */
	n = iw_mpa_rr_build(&rr, mpa, sizeof(mpa));
	CHECK(n > 0);
	hand_peer_send(IW_TCP_ACK | IW_TCP_PSH, 0, mpa, n);	/* the reject, window still 0 */
	CHECK(event(0, QHCA_EVENT_IW_CONNECT_REPLY, &hh, &d));
	CHECK(hh == h && d == QHCA_IW_ST_REJECTED);
	held = nodes[0].e.host_bytes - base;
	t0 = now;
	for (i = 0; i < 600 && !closed; i++) {		/* 10 minutes, a second at a time */
		now += 1000000000ull;
		if (nodes[0].deadline <= now) {
			nodes[0].deadline = UINT64_MAX;
			qhca_engine_timer(&nodes[0].e);
		}
		if (link_n) {
			hand_peer_take();
			hand_peer_send(IW_TCP_ACK, 0, NULL, 0);	/* the probe answered: window 0 */
		}
		harness_iw_check();
		closed = event(0, QHCA_EVENT_IW_CLOSED, &hh, &st);
	}
	printf("# a rejected connect under a zero window: %s after %llu s, %u frames to the "
	       "peer, %llu bytes of host memory held\n", closed ? "CLOSED" : "still open",
	       (unsigned long long)((now - t0) / 1000000000ull), hp.frames,
	       (unsigned long long)held);
	CHECK(closed);
	CHECK(now - t0 <= IW_CLOSE_TIMEOUT_NS + 1000000000ull);
	CHECK(hh == h && st == QHCA_IW_ST_REJECTED);
	CHECK_EQ(nodes[0].e.host_bytes, base);
	memset(&none, 0, sizeof(none));
	CHECK_EQ(qhca_iw_disconnect(&nodes[0].e, h, &none), QHCA_ST_OK);	/* released */
	CHECK_EQ(nodes[0].e.iw->nlive, 0);
	CHECK_EQ(qhca_qp_find(&nodes[0].e, x.qpn)->iw_conn, 0);
	link_n = link_head = 0;
	teardown();
}

/* A listener's backlog: with 1, a second request waits until the first is answered. */
static void test_backlog(void)
{
	struct qhca_iw_listen l = { .port = 4200, .backlog = 1 };
	struct qhca_iw_conn a;
	uint32_t lh, h1, h2, p1 = 0, p2 = 0;
	uint64_t d;
	struct qp x1, x2;

	iw_setup();
	x1 = make_qp(&nodes[0], QHCA_QPT_RC, 0);
	x2 = make_qp(&nodes[0], QHCA_QPT_RC, 0);
	to_init(&x1);
	to_init(&x2);
	CHECK_EQ(qhca_iw_listen(&nodes[1].e, &l, &lh), QHCA_ST_OK);
	a = conn_args(0, 6001, 4200, "one");
	CHECK_EQ(qhca_iw_connect(&nodes[0].e, x1.qpn, &a, &h1), QHCA_ST_OK);
	CHECK(wait_event(1, QHCA_EVENT_IW_CONNECT_REQUEST, &p1, &d));
	a = conn_args(0, 6002, 4200, "two");
	CHECK_EQ(qhca_iw_connect(&nodes[0].e, x2.qpn, &a, &h2), QHCA_ST_OK);
	pump_steps(6);		/* its SYN, and one again, dropped: the backlog is full (a
				 * few steps: x1's MPA timeout is 10 s of the clock away) */
	CHECK(!event(1, QHCA_EVENT_IW_CONNECT_REQUEST, &p2, &d));
	a = conn_args(1, 0, 0, "");
	CHECK_EQ(qhca_iw_reject(&nodes[1].e, p1, &a), QHCA_ST_OK);
	CHECK(wait_event(1, QHCA_EVENT_IW_CONNECT_REQUEST, &p2, &d));	/* its SYN again */
	CHECK(p2 != p1);
	teardown();
}

/* The ISNs' PRF against SipHash's reference vectors (the paper's appendix: key 00..0f,
 * messages 00.., lengths 0, 8 and 15). */
static void test_siphash(void)
{
	uint8_t m[64];
	unsigned i;

	for (i = 0; i < sizeof(m); i++)
		m[i] = (uint8_t)i;
	CHECK_EQ(qhca_siphash24(0x0706050403020100ull, 0x0f0e0d0c0b0a0908ull, m, 15),
		 0xa129ca6149be45e5ull);
	CHECK_EQ(qhca_siphash24(0x0706050403020100ull, 0x0f0e0d0c0b0a0908ull, m, 0),
		 0x726fdb47dd0e0e31ull);
	CHECK_EQ(qhca_siphash24(0x0706050403020100ull, 0x0f0e0d0c0b0a0908ull, m, 8),
		 0x93f5f5799a932462ull);
}

/*
 * The teaching trace of iWARP ('qhca explain'): the handshake's segments and the MPA request
 * and reply; a WRITE's FPDUs as built (STag, tagged offset, CRC32c) and queued, the
 * segments that carry them, each FPDU taken whole with the same CRC and placed after its
 * rkey check, the completion, and the peer's ACKs freeing TCP's copy; off, nothing.
 */
static void test_teaching_trace(void)
{
	char q[32], k[32], to[48], crc[32];
	const char *at, *c;
	uint64_t xb, yb;
	uint32_t xk, yk;
	struct qhca_sq_wqe *w;
	struct qp x, y;

	iw_setup();
	step_len = 0;
	qhca_engine_set_tracing(&nodes[0].e, true);
	qhca_engine_set_tracing(&nodes[1].e, true);
	iw_pair(&x, &y, 2);
	step_log[step_len] = 0;
	at = step_log;
	STEP(at, "0 tx wire=tcp ", "flags=SYN ", "len=0 ");
	STEP(at, "1 rx wire=tcp ", "qp=0x0 ", "flags=SYN ");
	STEP(at, "1 tx wire=tcp ", "flags=SYN,ACK ");
	STEP(at, "0 mpa dir=out ", "what=request rev=2 ird=2 ord=2 ");
	STEP(at, "1 mpa dir=in ", "what=request rev=2 ");
	STEP(at, "1 mpa dir=out ", "what=reply ");
	STEP(at, "0 mpa dir=in ", "what=reply ");

	xk = make_mr(&nodes[0], 8192, QHCA_ACCESS_LOCAL_WRITE, &xb);
	yk = make_mr(&nodes[1], 8192, QHCA_ACCESS_LOCAL_WRITE | QHCA_ACCESS_REMOTE_WRITE, &yb);
	fill(&nodes[0], xb, 3000, 6);
	step_len = 0;
	w = sq_wqe(&x, QHCA_WR_RDMA_WRITE, 0x77, xb, 3000, xk);
	w->remote_addr = yb + 8;
	w->rkey = yk;
	post_send(&x);
	pump();
	expect_cqe(&nodes[0], &x.scq, 0x77, QHCA_WC_SUCCESS, QHCA_WC_RDMA_WRITE, 3000);
	CHECK(same(&nodes[0], xb, &nodes[1], yb + 8, 3000));
	step_log[step_len] = 0;
	snprintf(q, sizeof(q), "qp=0x%x ", x.qpn);
	snprintf(k, sizeof(k), "stag=0x%x ", yk);
	snprintf(to, sizeof(to), "to=0x%llx ", (unsigned long long)yb + 8);
	at = step_log;
	STEP(at, "0 wqe ", q, "op=RDMA_WRITE ");
	STEP(at, "0 fpdu dir=out ", q, "op=\"RDMA Write\" ", k, to, "last=0 ");
	/* that line's CRC: the receiver's step names the same, its check good */
	for (c = at - 1; c > step_log && c[-1] != '\n'; c--)
		;
	c = strstr(c, "crc=");
	CHECK(c != NULL);
	snprintf(crc, sizeof(crc), "%.14s", c ? c : "");
	STEP(at, "0 tx wire=tcp ", q, "flags=PSH,ACK ");
	STEP(at, "0 fpdu dir=out ", "op=\"RDMA Write\" ", k, "last=1 ");
	STEP(at, "0 cqe ", "status=SUCCESS ", "wr_id=0x77 ");
	at = step_log;
	STEP(at, "1 rx wire=tcp ");
	STEP(at, "1 fpdu dir=in ", "op=\"RDMA Write\" ", k, to, crc);
	STEP(at, "1 key kind=rkey ", "result=\"ok\"");
	STEP(at, "1 dma dir=to-guest ");
	STEP(at, "1 tx wire=tcp ", "flags=ACK ", "len=0 ");
	STEP(at, "0 acked ", q);

	/* off: nothing */
	qhca_engine_set_tracing(&nodes[0].e, false);
	qhca_engine_set_tracing(&nodes[1].e, false);
	step_len = 0;
	w = sq_wqe(&x, QHCA_WR_RDMA_WRITE, 0x78, xb, 100, xk);
	w->remote_addr = yb;
	w->rkey = yk;
	post_send(&x);
	pump();
	expect_cqe(&nodes[0], &x.scq, 0x78, QHCA_WC_SUCCESS, QHCA_WC_RDMA_WRITE, 100);
	CHECK_EQ(step_len, 0);
	teardown();
}

/*
 * A connection to the node's own address (rdma_cm within one guest, pyverbs' way): the
 * segments loop back inside the device, both ends are ours, a WRITE lands byte-exact; a
 * connection to a port of ours where nobody listens is refused (our own RST, as the guest's
 * stack would answer on the wire). Nothing of it reaches the link.
 */
/* test_loopback's flood: while the device delivers a looped segment into [lo, hi) of guest
 * memory, as many frames as the loopback queue holds and more are looped back to it (RSTs
 * to a port with nobody on it: taken and ignored when their turn comes). */
static struct {
	uint64_t lo, hi;
	uint8_t frame[128];
	size_t len;
	unsigned queued;	/* the queue's frames after the flood, the delivered one not counted */
	bool fired;
} flood;

static void flood_hook(struct node *n, uint64_t gpa, size_t len)
{
	unsigned i;

	if (flood.fired || !n->e.in_loop || gpa < flood.lo || gpa >= flood.hi)
		return;
	flood.fired = true;
	for (i = 0; i < LOOP_QUEUE + 8; i++)
		qhca_xmit_frame(&n->e, flood.frame, flood.len);
	flood.queued = n->e.loop_count;
	(void)len;
}

static void flood_frame(struct node *n)
{
	struct iw_tcp_seg rst = { .hop_limit = 64, .sport = 7001, .dport = 7002,
				  .seq = 1, .flags = IW_TCP_RST, .window = 0 };

	memcpy(rst.dmac, n->mac, 6);
	memcpy(rst.smac, n->mac, 6);
	memcpy(rst.sgid, n->gid, 16);
	memcpy(rst.dgid, n->gid, 16);
	flood.len = iw_tcp_build(&rst, flood.frame, sizeof(flood.frame));
	CHECK(flood.len > 0);
}

/* Frames a node handed its netdev (the guest's stack), taken or not for want of a buffer. */
static uint64_t netdev_frames(struct node *n)
{
	return n->e.cnt.eth_rx_frames + n->e.cnt.eth_rx_no_buffer + n->e.cnt.eth_rx_stopped +
	       n->e.cnt.eth_rx_too_long;
}

/* Hand node @n a TCP segment with a byte of data (none on a SYN) from @sgid:@sport to
 * @dgid:@dport, with @flags, far out of any window; from the wire (node 1's MAC as its
 * source), or looped back inside the device if @looped (with @smac as its source). */
static void forge_seg(struct node *n, const uint8_t *sgid, uint16_t sport, const uint8_t *dgid,
		      uint16_t dport, uint8_t flags, bool looped, const uint8_t *smac)
{
	static const uint8_t one = 0x55;
	struct iw_tcp_seg g;
	uint8_t f[128];
	size_t len;

	memset(&g, 0, sizeof(g));
	memcpy(g.dmac, n->e.mac, 6);
	memcpy(g.smac, smac ? smac : nodes[1].mac, 6);
	memcpy(g.sgid, sgid, 16);
	memcpy(g.dgid, dgid, 16);
	g.hop_limit = 64;
	g.sport = sport;
	g.dport = dport;
	g.seq = 7;
	g.ack = flags & IW_TCP_ACK ? 7 : 0;
	g.flags = flags;
	g.window = 8192;
	if (!(flags & IW_TCP_SYN)) {
		g.payload = &one;
		g.payload_len = 1;
	} else {
		g.mss = 1460;
	}
	len = iw_tcp_build(&g, f, sizeof(f));
	CHECK(len > 0);
	if (looped)
		qhca_iw_loop_receive(&n->e, f, len);
	else
		qhca_engine_receive(&n->e, f, len);
}

static void test_loopback(void)
{
	struct qhca_iw_listen l = { .port = 4300, .backlog = 2 };
	struct qhca_iw_conn a;
	uint32_t lh, ch, pch, h, xk, yk;
	uint64_t d, xb, yb;
	struct qhca_sq_wqe *w;
	struct qp x, y;

	iw_setup();
	x = make_qp(&nodes[0], QHCA_QPT_RC, 0);
	y = make_qp(&nodes[0], QHCA_QPT_RC, 0);
	to_init(&x);
	to_init(&y);
	CHECK_EQ(qhca_iw_listen(&nodes[0].e, &l, &lh), QHCA_ST_OK);
	a = conn_args(0, 5300, 4301, "");	/* nobody listens there */
	memcpy(a.remote_addr, nodes[0].gid, 16);
	memcpy(a.dmac, nodes[0].mac, 6);
	CHECK_EQ(qhca_iw_connect(&nodes[0].e, x.qpn, &a, &ch), QHCA_ST_OK);
	/* the admin doorbell that carried the command delivers what it looped back: the
	 * refusal is there with no time passing */
	qhca_engine_reg_write(&nodes[0].e, QHCA_REG_ASQ_TAIL, 0);
	CHECK(event(0, QHCA_EVENT_IW_CONNECT_REPLY, &h, &d));
	CHECK(h == ch && d == QHCA_IW_ST_REFUSED);
	CHECK(closed_event(0, ch, &d));
	memset(&a, 0, sizeof(a));
	CHECK_EQ(qhca_iw_disconnect(&nodes[0].e, ch, &a), QHCA_ST_OK);	/* released */
	x = make_qp(&nodes[0], QHCA_QPT_RC, 0);	/* the refused connect took x to error */
	to_init(&x);

	a = conn_args(0, 5301, 4300, "hello");
	memcpy(a.remote_addr, nodes[0].gid, 16);
	memcpy(a.dmac, nodes[0].mac, 6);
	CHECK_EQ(qhca_iw_connect(&nodes[0].e, x.qpn, &a, &ch), QHCA_ST_OK);
	qhca_engine_reg_write(&nodes[0].e, QHCA_REG_ACQ_HEAD, 0);	/* as above */
	CHECK(event(0, QHCA_EVENT_IW_CONNECT_REQUEST, &pch, &d));
	CHECK(pch != ch && d == lh);
	a = conn_args(0, 0, 0, "");
	a.qpn = y.qpn;
	CHECK_EQ(qhca_iw_accept(&nodes[0].e, pch, &a), QHCA_ST_OK);
	CHECK(wait_event(0, QHCA_EVENT_IW_CONNECT_REPLY, &h, &d));
	CHECK(h == ch && d == QHCA_IW_ST_OK);
	CHECK_EQ(qhca_qp_find(&nodes[0].e, x.qpn)->state, QHCA_QPS_RTS);
	CHECK_EQ(qhca_qp_find(&nodes[0].e, y.qpn)->state, QHCA_QPS_RTS);
	/* 2 MiB, every byte checked */
	xk = make_mr(&nodes[0], 2 << 20, QHCA_ACCESS_LOCAL_WRITE, &xb);
	yk = make_mr(&nodes[0], (2 << 20) + 4096, QHCA_ACCESS_LOCAL_WRITE | QHCA_ACCESS_REMOTE_WRITE,
		     &yb);
	fill(&nodes[0], xb, 2 << 20, 7);
	w = sq_wqe(&x, QHCA_WR_RDMA_WRITE, 0x99, xb, 2 << 20, xk);
	w->remote_addr = yb + 100;
	w->rkey = yk;
	post_send(&x);
	pump();
	expect_cqe(&nodes[0], &x.scq, 0x99, QHCA_WC_SUCCESS, QHCA_WC_RDMA_WRITE, 2 << 20);
	CHECK(same(&nodes[0], xb, &nodes[0], yb + 100, 2 << 20));

	/* The loopback queue filled, past full, while it delivers a segment: the slot being
	 * delivered is not taken (LOOP_QUEUE - 1 others queued; the rest dropped, as a full
	 * link drops), the segment's FPDU, whose placement a page boundary splits, is placed
	 * whole, and TCP recovers what the flood pushed out. */
	flood_frame(&nodes[0]);
	flood.lo = va_to_gpa(yb);
	flood.hi = va_to_gpa(yb) + 8192;
	dma_write_hook = flood_hook;
	fill(&nodes[0], xb, 64 << 10, 8);
	w = sq_wqe(&x, QHCA_WR_RDMA_WRITE, 0x9a, xb, 64 << 10, xk);
	w->remote_addr = yb + 4096 - 100;	/* the first FPDU's first 100 B in page 0 */
	w->rkey = yk;
	post_send(&x);
	pump();
	dma_write_hook = NULL;
	expect_cqe(&nodes[0], &x.scq, 0x9a, QHCA_WC_SUCCESS, QHCA_WC_RDMA_WRITE, 64 << 10);
	CHECK(flood.fired);
	CHECK_EQ(flood.queued, LOOP_QUEUE - 1);
	CHECK(same(&nodes[0], xb, &nodes[0], yb + 4096 - 100, 64 << 10));
	CHECK_EQ(qhca_qp_find(&nodes[0].e, y.qpn)->state, QHCA_QPS_RTS);

	/* The port's MAC changes (SET_MAC): the connection keeps the old one in its headers,
	 * and its segments still loop back, never to the wire. */
	nodes[0].e.mac[5] ^= 0x40;
	fill(&nodes[0], xb, 64 << 10, 9);
	w = sq_wqe(&x, QHCA_WR_RDMA_WRITE, 0x9b, xb, 64 << 10, xk);
	w->remote_addr = yb;
	w->rkey = yk;
	post_send(&x);
	pump();
	expect_cqe(&nodes[0], &x.scq, 0x9b, QHCA_WC_SUCCESS, QHCA_WC_RDMA_WRITE, 64 << 10);
	CHECK(same(&nodes[0], xb, &nodes[0], yb, 64 << 10));
	CHECK_EQ(frames_sent, 0);	/* nothing went out */
	CHECK(nodes[0].e.cnt.loopback_pkts > 0);

	/* From the wire, nothing reaches a connection to ourselves: wire and loopback are
	 * two worlds, one 4-tuple may be in use in each. A segment for the 4-tuple of one
	 * (out of its window: a connection would answer it) goes to the netdev (whose stack
	 * drops a source address of its own, a martian): for a connection from our address to
	 * itself, and for one between two of the port's addresses; so does a SYN from our
	 * address to itself for a listener. None is answered, nothing changes. */
	x = make_qp(&nodes[0], QHCA_QPT_RC, 0);
	y = make_qp(&nodes[0], QHCA_QPT_RC, 0);
	to_init(&x);
	to_init(&y);
	a = conn_args(0, 5302, 4300, "");
	a.remote_addr[15] = 9;			/* 192.168.77.9, another of the port's */
	memcpy(a.dmac, nodes[0].e.mac, 6);
	CHECK_EQ(qhca_iw_connect(&nodes[0].e, x.qpn, &a, &ch), QHCA_ST_OK);
	qhca_engine_reg_write(&nodes[0].e, QHCA_REG_ACQ_HEAD, 0);
	CHECK(event(0, QHCA_EVENT_IW_CONNECT_REQUEST, &pch, &d));
	a = conn_args(0, 0, 0, "");
	a.qpn = y.qpn;
	CHECK_EQ(qhca_iw_accept(&nodes[0].e, pch, &a), QHCA_ST_OK);
	CHECK(wait_event(0, QHCA_EVENT_IW_CONNECT_REPLY, &h, &d));
	CHECK(h == ch && d == QHCA_IW_ST_OK);
	pump();
	{
		uint64_t loops = nodes[0].e.cnt.loopback_pkts, netdev = netdev_frames(&nodes[0]);
		const uint8_t *me = nodes[0].gid;
		uint8_t other[16];

		memcpy(other, me, 16);
		other[15] = 9;
		forge_seg(&nodes[0], me, 5301, me, 4300, IW_TCP_ACK, false, NULL);
		forge_seg(&nodes[0], other, 4300, me, 5302, IW_TCP_ACK, false, NULL);
		forge_seg(&nodes[0], me, 7000, me, 4300, IW_TCP_SYN, false, NULL);
		CHECK_EQ(netdev_frames(&nodes[0]), netdev + 3);
		pump();
		CHECK_EQ(nodes[0].e.cnt.loopback_pkts, loops);	/* nothing answered */
		CHECK(!event(0, QHCA_EVENT_IW_CONNECT_REQUEST, &h, &d));
		CHECK_EQ(qhca_qp_find(&nodes[0].e, x.qpn)->state, QHCA_QPS_RTS);

		/* A SYN looped back with another MAC as its source (the port's before a
		 * SET_MAC): the connection it makes answers inside the device, not to that
		 * MAC on the wire; so does the RST that ends it (nobody connected), and the
		 * RST to a looped segment for no connection. */
		forge_seg(&nodes[0], other, 7001, me, 4300, IW_TCP_SYN, true, nodes[1].mac);
		forge_seg(&nodes[0], other, 7002, me, 4301, IW_TCP_ACK, true, nodes[1].mac);
		pump();
		CHECK(nodes[0].e.cnt.loopback_pkts >= loops + 3);	/* SYN-ACK, 2 RSTs */
	}
	CHECK_EQ(frames_sent, 0);

	/* Our own address as both ends, resolved to a MAC not the port's (one it had): the
	 * connection loops back all the same, never to the wire. */
	x = make_qp(&nodes[0], QHCA_QPT_RC, 0);
	y = make_qp(&nodes[0], QHCA_QPT_RC, 0);
	to_init(&x);
	to_init(&y);
	a = conn_args(0, 5303, 4300, "");
	memcpy(a.remote_addr, nodes[0].gid, 16);
	memcpy(a.dmac, nodes[1].mac, 6);
	CHECK_EQ(qhca_iw_connect(&nodes[0].e, x.qpn, &a, &ch), QHCA_ST_OK);
	CHECK(wait_event(0, QHCA_EVENT_IW_CONNECT_REQUEST, &pch, &d));
	a = conn_args(0, 0, 0, "");
	a.qpn = y.qpn;
	CHECK_EQ(qhca_iw_accept(&nodes[0].e, pch, &a), QHCA_ST_OK);
	CHECK(wait_event(0, QHCA_EVENT_IW_CONNECT_REPLY, &h, &d));
	CHECK(h == ch && d == QHCA_IW_ST_OK);
	CHECK_EQ(frames_sent, 0);
	CHECK_EQ(host_errors, 0);
	teardown();
}

/*
 * Listeners' addresses as TCP sockets have them: every IPv4 address (::ffff:0.0.0.0) and
 * every IPv6 one (::, V6ONLY: rdma_cm's afonly, nfsd's two listeners) share a port; every
 * address (::) conflicts with both, one address with the wildcard that covers it; an IPv4
 * SYN goes to the IPv4 wildcard's listener. Unknown flags are refused.
 */
static void test_listen_addresses(void)
{
	static const uint8_t v4_any[16] = { [10] = 0xff, [11] = 0xff };
	static const uint8_t v6_one[16] = { 0xfd, [15] = 1 };
	struct qhca_iw_listen l = { .port = 4400, .backlog = 2 };
	uint32_t any4, any6, one, h, ch;
	uint64_t netdev_in;
	struct qhca_iw_conn a;
	struct qp x;
	uint64_t d;

	iw_setup();
	CHECK(!memcmp(nodes[1].gid, v4_any, 12));	/* the harness's addresses are IPv4 */
	/* the IPv6 wildcard first: a scan in slot order finds it before the IPv4 one */
	l.flags = QHCA_IW_V6ONLY;
	CHECK_EQ(qhca_iw_listen(&nodes[1].e, &l, &any6), QHCA_ST_OK);
	CHECK_EQ(qhca_iw_listen(&nodes[1].e, &l, &h), QHCA_ST_BUSY);
	memcpy(l.addr, v6_one, 16);
	CHECK_EQ(qhca_iw_listen(&nodes[1].e, &l, &h), QHCA_ST_BUSY);	/* under :: V6ONLY */
	l.flags = 0;
	CHECK_EQ(qhca_iw_listen(&nodes[1].e, &l, &h), QHCA_ST_BUSY);	/* the same */
	memcpy(l.addr, v4_any, 16);
	l.flags = QHCA_IW_V6ONLY;
	CHECK_EQ(qhca_iw_listen(&nodes[1].e, &l, &h), QHCA_ST_BAD_FIELD);
	l.flags = 0;
	CHECK_EQ(qhca_iw_listen(&nodes[1].e, &l, &any4), QHCA_ST_OK);	/* beside it */
	memset(l.addr, 0, 16);
	CHECK_EQ(qhca_iw_listen(&nodes[1].e, &l, &h), QHCA_ST_BUSY);	/* :: takes IPv4 too */
	l.flags = 2;
	CHECK_EQ(qhca_iw_listen(&nodes[1].e, &l, &h), QHCA_ST_BAD_FIELD);
	l.flags = 0;
	memcpy(l.addr, nodes[1].gid, 16);
	CHECK_EQ(qhca_iw_listen(&nodes[1].e, &l, &h), QHCA_ST_BUSY);	/* under 0.0.0.0 */
	l.port = 4401;
	CHECK_EQ(qhca_iw_listen(&nodes[1].e, &l, &one), QHCA_ST_OK);
	memcpy(l.addr, v4_any, 16);
	CHECK_EQ(qhca_iw_listen(&nodes[1].e, &l, &h), QHCA_ST_BUSY);	/* covers it */
	memcpy(l.addr, v6_one, 16);
	CHECK_EQ(qhca_iw_listen(&nodes[1].e, &l, &h), QHCA_ST_OK);	/* IPv6 beside IPv4 */
	l.port = 4403;		/* one IPv6 address, afonly as nvmet and nfsd set it */
	l.flags = QHCA_IW_V6ONLY;
	CHECK_EQ(qhca_iw_listen(&nodes[1].e, &l, &h), QHCA_ST_OK);
	l.flags = 0;
	CHECK_EQ(qhca_iw_listen(&nodes[1].e, &l, &h), QHCA_ST_BUSY);
	/* a port with only the IPv6 wildcard takes no IPv4 SYN */
	memset(l.addr, 0, 16);
	l.flags = QHCA_IW_V6ONLY;
	l.port = 4402;
	CHECK_EQ(qhca_iw_listen(&nodes[1].e, &l, &h), QHCA_ST_OK);
	x = make_qp(&nodes[0], QHCA_QPT_RC, 0);
	to_init(&x);
	a = conn_args(0, 5402, 4402, "");
	netdev_in = netdev_frames(&nodes[1]);
	CHECK_EQ(qhca_iw_connect(&nodes[0].e, x.qpn, &a, &ch), QHCA_ST_OK);
	pump_steps(2000);	/* the SYN (and its retries) went to the guest's stack */
	CHECK(netdev_frames(&nodes[1]) > netdev_in);
	CHECK(!event(1, QHCA_EVENT_IW_CONNECT_REQUEST, &h, &d));

	/* an IPv4 SYN to 4400: the IPv4 wildcard's, not the IPv6 one's */
	x = make_qp(&nodes[0], QHCA_QPT_RC, 0);
	to_init(&x);
	a = conn_args(0, 5400, 4400, "");
	CHECK_EQ(qhca_iw_connect(&nodes[0].e, x.qpn, &a, &ch), QHCA_ST_OK);
	CHECK(wait_event(1, QHCA_EVENT_IW_CONNECT_REQUEST, &h, &d));
	CHECK_EQ(d, any4);

	/* A SYN from the wire with node 1's own MAC as its source is forged (what the device
	 * sends itself loops back inside it): not for the device's TCP, no SYN-ACK, the
	 * netdev's; the same SYN from node 0's MAC is answered. */
	{
		struct iw_tcp_seg syn;
		uint8_t f[128];
		unsigned long before;
		uint64_t loops;
		size_t n;
		int k;

		for (k = 0; k < 2; k++) {
			memset(&syn, 0, sizeof(syn));
			memcpy(syn.dmac, nodes[1].mac, 6);
			memcpy(syn.smac, k ? nodes[0].mac : nodes[1].mac, 6);
			memcpy(syn.sgid, nodes[0].gid, 16);
			memcpy(syn.dgid, nodes[1].gid, 16);
			syn.hop_limit = 64;
			syn.sport = (uint16_t)(6000 + k);
			syn.dport = 4400;
			syn.seq = 1000;
			syn.flags = IW_TCP_SYN;
			syn.window = 8192;
			syn.mss = 1460;
			n = iw_tcp_build(&syn, f, sizeof(f));
			CHECK(n > 0);
			before = frames_sent;
			loops = nodes[1].e.cnt.loopback_pkts;
			netdev_in = netdev_frames(&nodes[1]);
			qhca_engine_receive(&nodes[1].e, f, n);
			CHECK_EQ(frames_sent - before, (unsigned long)k);
			CHECK_EQ(nodes[1].e.cnt.loopback_pkts, loops);	/* nothing to itself */
			/* the forged one to the netdev, as a plain NIC's */
			CHECK_EQ(netdev_frames(&nodes[1]) - netdev_in, (uint64_t)!k);
		}
	}
	teardown();
}

/* ---------------------------------------------------------------- many connections */
/*
 * Work per segment, doorbell and tick must not grow with the connections the device has
 * (a peer sends 100 000 tiny segments a second): counted, not timed, in e->iw->steps (the
 * connections looked at to find, time and reap them), as test-timers counts the QPs'
 * heap. Two nodes of up to 2048 QPs, an EQ of 4096 events each.
 */
static void iw_setup_many_secret(uint64_t s0, uint64_t s1)
{
	struct qhca_engine_config c = {
		.db_pages = 8, .msix_vectors = 5, .max_pd = 8, .max_qp = 2048, .max_qp_wr = 1024,
		.max_cq = 16, .max_cqe = 4096, .max_mr = 64, .max_mr_size_mb = 64, .max_srq = 4,
		.max_sge = 4, .max_inline = 256, .mtu = 4096, .link = QHCA_LINK_IWARP,
		.isn_secret = { s0, s1 },
	};

	setup_cfg(&c);
	events_init_log2(12);
}

static void iw_setup_many(void)
{
	iw_setup_many_secret(0, 0);
}

/* QPs that only hold a connection: every one of a node shares one CQ and one SQ and RQ
 * ring (nothing is posted to them; the device reads a ring only for work posted). */
static struct lean {
	uint32_t cq;
	struct qhca_pbl sq, rq;
} lean[2];

static uint32_t lean_qp(int i)
{
	struct node *n = &nodes[i];
	struct qhca_qp_create c = { .pd = n->pd, .type = QHCA_QPT_RC, .sq_log2 = 4,
				    .rq_log2 = 4, .sq_stride_log2 = SQ_STRIDE_LOG2,
				    .rq_stride_log2 = RQ_STRIDE_LOG2 };
	struct qhca_qp_attr a;
	uint32_t qpn = 0;

	if (!lean[i].cq) {
		struct cq cq = make_cq(n, 4);

		lean[i].cq = cq.cqn;
		lean[i].sq = pbl_for(n, galloc(n, 16u << SQ_STRIDE_LOG2), 16u << SQ_STRIDE_LOG2);
		lean[i].rq = pbl_for(n, galloc(n, 16u << RQ_STRIDE_LOG2), 16u << RQ_STRIDE_LOG2);
	}
	c.send_cq = c.recv_cq = lean[i].cq;
	c.sq_pbl = lean[i].sq;
	c.rq_pbl = lean[i].rq;
	CHECK_EQ(qhca_qp_create(&n->e, &c, &qpn), QHCA_ST_OK);
	memset(&a, 0, sizeof(a));
	a.mask = QHCA_QP_STATE | QHCA_QP_ACCESS_FLAGS | QHCA_QP_PKEY_INDEX | QHCA_QP_PORT;
	a.state = QHCA_QPS_INIT;
	a.access_flags = QHCA_ACCESS_ALL;
	CHECK_EQ(qhca_qp_modify(&n->e, qpn, &a), QHCA_ST_OK);
	return qpn;
}

static uint64_t iw_steps(int i)
{
	return nodes[i].e.iw->steps;
}

struct conn_work {
	uint64_t seg, db, tick;		/* node 0's steps: most for a segment in, a doorbell, a tick */
};

/*
 * Node 0 with @n connections: one to node 1 that moves a WRITE, and n - 1 that wait on their
 * SYN's retransmission timer (to a port of node 1 where nobody listens; their SYNs are not
 * delivered), each due a microsecond after the one before. Node 0's work for the WRITE's
 * doorbell, a tick that expires one connection, and each segment it then receives.
 */
static struct conn_work conn_work_at(unsigned n)
{
	struct conn_work w = { 0, 0, 0 };
	struct qhca_sq_wqe *q;
	uint64_t xb, yb, s;
	uint32_t xk, yk, h;
	struct qp x, y;
	unsigned i;

	iw_setup_many();
	memset(lean, 0, sizeof(lean));
	iw_pair(&x, &y, 2);
	for (i = 1; i < n; i++) {
		struct qhca_iw_conn a = conn_args(0, (uint16_t)(20000 + i), 9, "");

		now += 1000;
		CHECK_EQ(qhca_iw_connect(&nodes[0].e, lean_qp(0), &a, &h), QHCA_ST_OK);
	}
	link_n = link_head = 0;		/* those SYNs: lost */
	CHECK_EQ(nodes[0].e.iw->nlive, n);
	xk = make_mr(&nodes[0], 4096, QHCA_ACCESS_LOCAL_WRITE, &xb);
	yk = make_mr(&nodes[1], 4096, QHCA_ACCESS_LOCAL_WRITE | QHCA_ACCESS_REMOTE_WRITE, &yb);
	q = sq_wqe(&x, QHCA_WR_RDMA_WRITE, 1, xb, 1000, xk);
	q->remote_addr = yb;
	q->rkey = yk;
	s = iw_steps(0);
	post_send(&x);
	w.db = iw_steps(0) - s;
	/* the earliest of node 0's deadlines: the WRITE's retransmission, or a SYN's */
	CHECK(nodes[0].deadline != UINT64_MAX);
	if (nodes[0].deadline > now)
		now = nodes[0].deadline;
	nodes[0].deadline = UINT64_MAX;
	s = iw_steps(0);
	qhca_engine_timer(&nodes[0].e);
	w.tick = iw_steps(0) - s;
	while (link_n) {
		struct frame f;

		link_take(0, &f);
		s = iw_steps(f.to);
		link_deliver(&f, 0);
		if (f.to == 0 && iw_steps(0) - s > w.seg)
			w.seg = iw_steps(0) - s;
	}
	expect_cqe(&nodes[0], &x.scq, 1, QHCA_WC_SUCCESS, QHCA_WC_RDMA_WRITE, 1000);
	CHECK(w.seg > 0);
	harness_iw_check();
	teardown();
	return w;
}

static void test_conn_work_scale(void)
{
	struct conn_work one = conn_work_at(1), many = conn_work_at(QHCA_IW_MAX_CONN);
	/* a heap of 1024: at most 2 (log2 n + 1) steps to move one entry, a few moves each */
	const uint64_t bound = 4 * (10 + 1);

	printf("# connection work (connections looked at), 1 and %u connections: "
	       "segment %llu and %llu, doorbell %llu and %llu, tick %llu and %llu\n",
	       QHCA_IW_MAX_CONN, (unsigned long long)one.seg, (unsigned long long)many.seg,
	       (unsigned long long)one.db, (unsigned long long)many.db,
	       (unsigned long long)one.tick, (unsigned long long)many.tick);
	CHECK(many.seg <= one.seg + bound);
	CHECK(many.db <= one.db + bound);
	CHECK(many.tick <= one.tick + bound);
}

/*
 * A slot freed and taken again is reaped again: 1032 connections one after the other (so
 * the table's 1024 slots are all reused), each aborted in its handshake, each ends with its
 * CLOSED event and gives its memory back, its handle released and its QP destroyed.
 */
static void test_conn_slots_reused(void)
{
	static uint8_t used[QHCA_IW_MAX_CONN];
	unsigned round, closed = 0, reused = 0, held = 0, rounds = QHCA_IW_MAX_CONN + 8;
	uint64_t base;

	iw_setup_many();
	memset(lean, 0, sizeof(lean));
	memset(used, 0, sizeof(used));
	lean_qp(0);			/* the shared CQ and rings made: not counted below */
	base = nodes[0].e.host_bytes;
	for (round = 0; round < rounds; round++) {
		struct qhca_iw_conn a = conn_args(0, (uint16_t)(5600 + round), 9, "");
		struct qhca_iw_conn none;
		uint32_t qpn = lean_qp(0), h, hh = 0;
		uint64_t st;
		int k;

		CHECK_EQ(qhca_iw_connect(&nodes[0].e, qpn, &a, &h), QHCA_ST_OK);
		reused += used[qhca_obj_lookup(&nodes[0].e.iw->conn_table, h)]++ != 0;
		link_n = link_head = 0;			/* its SYN: lost */
		memset(&none, 0, sizeof(none));
		none.flags = QHCA_IW_ABORT;
		CHECK_EQ(qhca_iw_disconnect(&nodes[0].e, h, &none), QHCA_ST_OK);
		for (k = 0; k < 3 && !event(0, QHCA_EVENT_IW_CLOSED, &hh, &st); k++) {
			nodes[0].deadline = UINT64_MAX;
			qhca_engine_timer(&nodes[0].e);
		}
		if (k < 3 && hh == h) {
			closed++;
			none.flags = 0;
			CHECK_EQ(qhca_iw_disconnect(&nodes[0].e, h, &none), QHCA_ST_OK);
		}
		CHECK_EQ(qhca_qp_destroy(&nodes[0].e, qpn), QHCA_ST_OK);
		held += nodes[0].e.host_bytes != base;
		harness_iw_check();
		link_n = link_head = 0;
	}
	printf("# %u connections in a row: %u on a slot used before, %u CLOSED, %u left memory "
	       "held, %u left\n", rounds, reused, closed, held, nodes[0].e.iw->nlive);
	CHECK(reused >= rounds - QHCA_IW_MAX_CONN);
	CHECK_EQ(closed, rounds);
	CHECK_EQ(held, 0);
	CHECK_EQ(nodes[0].e.iw->nlive, 0);
	teardown();
}

/* The 4-tuple hash as it was before it had a key (iw_cm.c up to issue 40): what a peer that
 * read the source could compute, to choose ports that all land in one chain. */
static uint32_t unkeyed_hash(const uint8_t *laddr, uint16_t lport, const uint8_t *raddr,
			     uint16_t rport)
{
	uint32_t h = (uint32_t)lport << 16 | rport;
	unsigned i;

	for (i = 0; i < 16; i += 4) {
		h ^= (uint32_t)(laddr[i] | laddr[i + 1] << 8 | laddr[i + 2] << 16 |
				(uint32_t)laddr[i + 3] << 24);
		h *= 0x9e3779b1u;
		h ^= (uint32_t)(raddr[i] | raddr[i + 1] << 8 | raddr[i + 2] << 16 |
				(uint32_t)raddr[i + 3] << 24);
		h *= 0x85ebca6bu;
	}
	return (h ^ h >> 15) & (IW_HASH - 1);
}

/* The longest chain of node @i's 4-tuple hash. */
static unsigned longest_chain(int i)
{
	const struct qhca_iw *iw = nodes[i].e.iw;
	unsigned b, longest = 0;

	for (b = 0; b < IW_HASH; b++) {
		unsigned len = 0;
		uint32_t k;

		for (k = iw->hash[b]; k && len <= QHCA_IW_MAX_CONN; k = iw->conn[k - 1].hnext)
			len++;
		if (len > longest)
			longest = len;
	}
	return longest;
}

#define CHAIN_LISTENERS	16

/*
 * A peer (node 0) opens 1024 connections to node 1's listeners (16 ports: with one, a
 * port's 64 512 source ports give at most about 100 in one chain), with the source ports
 * chosen, by brute force over the port space, so that all of them land in one chain of the
 * unkeyed hash; node 1 accepts them all. With the keyed hash they spread: its longest chain
 * stays short, and so does the work of a segment on the first of them (the end of that
 * chain, unkeyed).
 */
static void test_conn_hash_chains(void)
{
	static uint16_t count[IW_HASH], lport[QHCA_IW_MAX_CONN], rport[QHCA_IW_MAX_CONN];
	struct qhca_iw_conn a;
	uint32_t lh, h, first = 0, pch, best = 0, b;
	unsigned i, n = 0, p, chain;
	uint64_t d, s, seg = 0;

	iw_setup_many();
	memset(lean, 0, sizeof(lean));
	memset(count, 0, sizeof(count));
	for (p = 0; p < CHAIN_LISTENERS; p++)
		for (i = 1024; i < 65536; i++)
			count[unkeyed_hash(nodes[1].gid, (uint16_t)(4000 + p), nodes[0].gid,
					   (uint16_t)i)]++;
	for (b = 0; b < IW_HASH; b++)
		if (count[b] > count[best])
			best = b;
	CHECK(count[best] >= QHCA_IW_MAX_CONN);
	for (p = 0; p < CHAIN_LISTENERS && n < QHCA_IW_MAX_CONN; p++)
		for (i = 1024; i < 65536 && n < QHCA_IW_MAX_CONN; i++)
			if (unkeyed_hash(nodes[1].gid, (uint16_t)(4000 + p), nodes[0].gid,
					 (uint16_t)i) == best) {
				lport[n] = (uint16_t)(4000 + p);
				rport[n++] = (uint16_t)i;
			}
	for (p = 0; p < CHAIN_LISTENERS; p++) {
		struct qhca_iw_listen l = { .port = (uint16_t)(4000 + p), .backlog = 4 };

		CHECK_EQ(qhca_iw_listen(&nodes[1].e, &l, &lh), QHCA_ST_OK);
	}
	for (i = 0; i < n; i++) {
		a = conn_args(0, rport[i], lport[i], "");
		CHECK_EQ(qhca_iw_connect(&nodes[0].e, lean_qp(0), &a, &h), QHCA_ST_OK);
		if (!i)
			first = h;
		if (!wait_event(1, QHCA_EVENT_IW_CONNECT_REQUEST, &pch, &d)) {
			CHECK(!"a request for every connection");
			break;
		}
		a = conn_args(1, 0, 0, "");
		a.qpn = lean_qp(1);
		CHECK_EQ(qhca_iw_accept(&nodes[1].e, pch, &a), QHCA_ST_OK);
		if (!wait_event(0, QHCA_EVENT_IW_CONNECT_REPLY, &h, &d) || d != QHCA_IW_ST_OK) {
			CHECK(!"every connection accepted");
			break;
		}
	}
	CHECK_EQ(nodes[1].e.iw->nlive, QHCA_IW_MAX_CONN);
	chain = longest_chain(1);
	/* a segment on the first connection: its FIN */
	memset(&a, 0, sizeof(a));
	CHECK_EQ(qhca_iw_disconnect(&nodes[0].e, first, &a), QHCA_ST_OK);
	while (link_n) {
		struct frame f;

		link_take(0, &f);
		s = iw_steps(f.to);
		link_deliver(&f, 0);
		if (f.to == 1 && iw_steps(1) - s > seg)
			seg = iw_steps(1) - s;
	}
	printf("# %u connections from one peer, ports chosen for the unkeyed hash's bucket %u: "
	       "longest chain %u, work of a segment on the first %llu\n", n, best, chain,
	       (unsigned long long)seg);
	CHECK(chain <= 12);
	CHECK(seg <= 64);
	harness_iw_check();
	teardown();
}

/* The chain of node @i's 4-tuple hash that holds connection @handle (its chains walked). */
static int chain_of(int i, uint32_t handle)
{
	const struct qhca_iw *iw = nodes[i].e.iw;
	const struct iw_conn *c = iw_conn_find(&nodes[i].e, handle);
	uint32_t me = c ? (uint32_t)(c - iw->conn) + 1 : 0;
	unsigned b;

	for (b = 0; me && b < IW_HASH; b++) {
		unsigned len = 0;
		uint32_t k;

		for (k = iw->hash[b]; k && len++ <= QHCA_IW_MAX_CONN; k = iw->conn[k - 1].hnext)
			if (k == me)
				return (int)b;
	}
	return -1;
}

#define KEYED_CONNS	64

/*
 * The 4-tuple hash's key is the device's own, and not the ISNs': the same 64 4-tuples
 * (node 0 connecting to node 1, their SYNs lost) land in other chains under another ISN
 * secret (a key of constants, or none, would give the same chains on every device), and
 * the hash's key is not the ISN secret itself.
 */
static void test_conn_hash_keyed_by_secret(void)
{
	static const uint64_t secret[2][2] = {
		{ 0x0706050403020100ull, 0x0f0e0d0c0b0a0908ull },
		{ 0x8f8e8d8c8b8a8988ull, 0x8786858483828180ull },
	};
	int chain[2][KEYED_CONNS];
	unsigned i, k, same = 0;

	for (k = 0; k < 2; k++) {
		const struct qhca_iw *iw;

		iw_setup_many_secret(secret[k][0], secret[k][1]);
		memset(lean, 0, sizeof(lean));
		iw = nodes[0].e.iw;
		CHECK(memcmp(iw->hash_key, secret[k], sizeof(iw->hash_key)) != 0);
		for (i = 0; i < KEYED_CONNS; i++) {
			struct qhca_iw_conn a = conn_args(0, (uint16_t)(20000 + 13 * i), 9, "");
			uint32_t h;

			CHECK_EQ(qhca_iw_connect(&nodes[0].e, lean_qp(0), &a, &h), QHCA_ST_OK);
			chain[k][i] = chain_of(0, h);
			CHECK(chain[k][i] >= 0);
		}
		link_n = link_head = 0;
		harness_iw_check();
		teardown();
	}
	for (i = 0; i < KEYED_CONNS; i++)
		same += chain[0][i] == chain[1][i];
	printf("# %u 4-tuples under two ISN secrets: %u in the same chain under both\n",
	       KEYED_CONNS, same);
	CHECK(same <= KEYED_CONNS / 8);		/* by chance: 1 in 1024 each */
}

/*
 * What a peer sees of the device, its ISNs, tells nothing of the chains: were the hash keyed
 * with the ISNs' key, an active connection's chain would be its SYN's ISN less the 4 us
 * clock, mod 1024 (the PRF of the same 36 bytes under the same key). Counts the
 * connections of 256 for which that holds: by chance, 1 in 1024 each.
 */
static void test_isn_tells_no_chain(void)
{
	unsigned i, match = 0;

	iw_setup_many_secret(0x243f6a8885a308d3ull, 0x13198a2e03707344ull);
	memset(lean, 0, sizeof(lean));
	for (i = 0; i < 256; i++) {
		struct qhca_iw_conn a = conn_args(0, (uint16_t)(30000 + 7 * i), 4700, "");
		struct iw_tcp_seg s;
		struct frame f;
		uint32_t h;
		int b;

		now += 123457;
		CHECK_EQ(qhca_iw_connect(&nodes[0].e, lean_qp(0), &a, &h), QHCA_ST_OK);
		CHECK_EQ(link_n, 1);
		link_take(0, &f);			/* its SYN: what the peer sees */
		CHECK(iw_tcp_parse(f.data, f.len, &s) == IW_OK && (s.flags & IW_TCP_SYN));
		b = chain_of(0, h);
		CHECK(b >= 0);
		if ((uint32_t)b == ((s.seq - (uint32_t)(now / 4000)) & (IW_HASH - 1)))
			match++;
	}
	printf("# 256 active connections: the chain is the SYN's ISN less the clock, mod %u, "
	       "for %u\n", IW_HASH, match);
	CHECK(match <= 4);
	harness_iw_check();
	teardown();
}

/*
 * iWARP connections are not in the device's state (QEMU blocks the migration of a
 * link=iwarp device: docs/migration.md): an engine saved with a connection under way (its
 * SYN sent to node 1 and lost, its retransmission due) loads with none of it, and its timer
 * wants only what the loaded engine has, not that connection's deadline; the QP it was
 * bound to comes unbound, and a connection made afterwards, on that QP and 4-tuple, arms
 * the timer again.
 */
static void test_not_migrated(void)
{
	struct qhca_iw_conn a;
	const struct iw_conn *c;
	uint64_t host;
	uint32_t h;
	struct qp x;

	iw_setup();
	a = conn_args(0, 5300, 9, "");		/* the nodes' addresses exist from here */
	x = make_qp(&nodes[0], QHCA_QPT_RC, 0);
	to_init(&x);
	host = nodes[0].e.host_bytes;
	CHECK_EQ(qhca_iw_connect(&nodes[0].e, x.qpn, &a, &h), QHCA_ST_OK);
	link_n = link_head = 0;				/* its SYN, lost on the link */
	/* what is saved: a connection alive, with its deadline (no frame for loopback: a
	 * stream with one on an iWARP port is refused, test-migrate link_state_refused) */
	c = iw_conn_find(&nodes[0].e, h);
	CHECK(c && c->state == IWC_TCP && c->tcp && c->tcp->state == QTCP_SYN_SENT);
	CHECK_EQ(nodes[0].e.iw->nlive, 1);
	CHECK_EQ(nodes[0].e.iw->heap_n, 1);
	CHECK_EQ(qhca_iw_deadline(&nodes[0].e), now + 1000000000ull);
	CHECK_EQ(nodes[0].deadline, now + 1000000000ull);
	CHECK_EQ(nodes[0].e.loop_count, 0);
	CHECK_EQ(qhca_qp_find(&nodes[0].e, x.qpn)->iw_conn, h);
	migrate_node(&nodes[0]);			/* loads: nothing refused */
	CHECK_EQ(nodes[0].e.iw->nlive, 0);
	CHECK_EQ(nodes[0].e.iw->heap_n, 0);
	CHECK_EQ(nodes[0].e.iw->reap_n, 0);
	CHECK_EQ(nodes[0].e.iw->half_open, 0);
	CHECK_EQ(nodes[0].e.host_bytes, host);
	CHECK_EQ(qhca_iw_deadline(&nodes[0].e), UINT64_MAX);
	CHECK_EQ(nodes[0].deadline, UINT64_MAX);
	CHECK_EQ(qhca_qp_find(&nodes[0].e, x.qpn)->iw_conn, 0);
	harness_iw_check();
	now += 5000000000ull;
	CHECK_EQ(qhca_iw_connect(&nodes[0].e, x.qpn, &a, &h), QHCA_ST_OK);
	CHECK_EQ(nodes[0].deadline, now + 1000000000ull);	/* RFC 6298's initial RTO */
	CHECK_EQ(nodes[0].e.iw->nlive, 1);
	harness_iw_check();
	link_n = link_head = 0;
	teardown();
}

static const struct unit_test tests[] = {
	{ "not_migrated", test_not_migrated },
	{ "conn_work_scale", test_conn_work_scale },
	{ "conn_slots_reused", test_conn_slots_reused },
	{ "conn_hash_chains", test_conn_hash_chains },
	{ "conn_hash_keyed_by_secret", test_conn_hash_keyed_by_secret },
	{ "isn_tells_no_chain", test_isn_tells_no_chain },
	{ "listen_addresses", test_listen_addresses },
	{ "loopback", test_loopback },
	{ "teaching_trace", test_teaching_trace },
	{ "siphash", test_siphash },
	{ "datapath", test_datapath },
	{ "read_with_inv", test_read_with_inv },
	{ "datapath_lossy", test_datapath_lossy },
	{ "rping_impaired", test_rping_impaired },
	{ "datapath_errors", test_datapath_errors },
	{ "access_is_the_stags", test_access_is_the_stags },
	{ "ord_and_fence", test_ord_and_fence },
	{ "qp_destroyed", test_qp_destroyed },
	{ "graceful_close", test_graceful_close },
	{ "unanswered_request", test_unanswered_request },
	{ "responder_waits", test_responder_waits },
	{ "close_bounded", test_close_bounded },
	{ "rejected_connect_bounded", test_rejected_connect_bounded },
	{ "send_done_when_queued", test_send_done_when_queued },
	{ "backlog", test_backlog },
	{ "connect_accept", test_connect_accept },
	{ "connect_accept_lossy", test_connect_accept_lossy },
	{ "reject", test_reject },
	{ "no_listener", test_no_listener },
	{ NULL, NULL },
};

int main(int argc, char **argv)
{
	return unit_main(tests, argc, argv);
}
