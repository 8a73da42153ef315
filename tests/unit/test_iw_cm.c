// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The iWARP port's connections (iw.c), two engines back to back: listen, connect, the MPA
 * request and reply with their private data and IRD/ORD, accept and reject, a SYN to no
 * listener, the events the driver gets, a graceful close, all through a lossy link too.
 */
#include "transport_harness.h"

struct evq {
	uint64_t ring;
	uint32_t ci;
};

static struct evq evq[2];

/* An async EQ on each node, to read the connection events from. */
static void events_init(void)
{
	int i;

	for (i = 0; i < 2; i++) {
		struct qhca_cmd_create_eq c = { .ring_addr = galloc(&nodes[i], 4096),
						.log2_entries = 8, .vector = 1,
						.flags = QHCA_EQ_ASYNC };
		uint32_t h;

		CHECK_EQ(qhca_eq_create(&nodes[i].e, &c, &h), QHCA_ST_OK);
		evq[i].ring = c.ring_addr;
		evq[i].ci = 0;
	}
}

/* The next event of node @i of @type (others before it are skipped), or false. */
static bool event(int i, uint8_t type, uint32_t *handle, uint64_t *data)
{
	for (;;) {
		const struct qhca_eqe *q = gptr(&nodes[i], evq[i].ring +
						(evq[i].ci & 255) * sizeof(*q));
		uint8_t phase = ((evq[i].ci >> 8) & 1) ? 0 : QHCA_EQE_PHASE;

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

static const struct unit_test tests[] = {
	{ "siphash", test_siphash },
	{ "datapath", test_datapath },
	{ "datapath_lossy", test_datapath_lossy },
	{ "datapath_errors", test_datapath_errors },
	{ "ord_and_fence", test_ord_and_fence },
	{ "qp_destroyed", test_qp_destroyed },
	{ "graceful_close", test_graceful_close },
	{ "unanswered_request", test_unanswered_request },
	{ "responder_waits", test_responder_waits },
	{ "close_bounded", test_close_bounded },
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
