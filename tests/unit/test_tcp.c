// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * TCP endpoint tests (tcp.c): two connections back to back through an in-memory network
 * on a virtual clock. Every segment is built into an Ethernet frame with iw_tcp_build()
 * and parsed back with iw_tcp_parse(), so the wire format is in the loop. The network has
 * a rate, a delay, a drop-tail queue, and seeded loss, reordering and duplication.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "iwarp.h"
#include "tcp.h"
#include "unit.h"

#define US		1000ull
#define MS		1000000ull
#define SEC		1000000000ull
#define FRAME_MAX	(IW_TCP_MAX_HDR + 1500)
#define QMAX		4096
#define PAT_LEN		(8u << 20)
#ifndef FUZZ_ITERS
#define FUZZ_ITERS	300000	/* hostile segments into an established pair */
#endif
#ifndef FUZZ_SEED
#define FUZZ_SEED	90
#endif
#ifndef FUZZ_ROUNDS
#define FUZZ_ROUNDS	60	/* connections in various states fed anything */
#endif

/* ---------------------------------------------------------------- PRNG, pattern */
static uint64_t rng_next(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * 0x2545f4914f6cdd1dull;
}

/* true with probability @ppm per million */
static bool chance(uint64_t *s, uint32_t ppm)
{
	return ppm && rng_next(s) % 1000000 < ppm;
}

static uint8_t *pattern[2];	/* what each node sends */

static void make_patterns(void)
{
	uint64_t s = 0x9e3779b97f4a7c15ull;
	uint32_t i, k;

	for (k = 0; k < 2; k++) {
		if (!pattern[k])
			pattern[k] = malloc(PAT_LEN);
		for (i = 0; i < PAT_LEN; i += 8) {
			uint64_t v = rng_next(&s);

			memcpy(pattern[k] + i, &v, 8);
		}
	}
}

/* ---------------------------------------------------------------- the world */
struct frame {
	uint64_t at, order;
	int to;
	uint16_t len;
	uint8_t data[FRAME_MAX];
};

struct link {
	uint32_t loss, reorder, dup;	/* per million */
	uint64_t delay_ns, rate_bps, busy_until;
	uint32_t qlimit, inq;		/* drop-tail queue of frames */
	uint32_t drop_next;		/* drop this many frames */
	uint64_t drop_nth[4];		/* drop the frames with these numbers (from 1) */
	bool cut;
	uint64_t sent, lost, congested;
};

struct world;

struct node {
	struct world *w;
	int id;
	struct qtcp_conn *c;
	struct qtcp_config cfg;
	struct iw_tcp_seg addr;		/* smac, dmac, sgid, dgid, ports of our side */
	bool listen, refuse_conn;	/* passive side; answer SYNs with a RST */
	uint32_t isn;
	/* application: sending */
	size_t tx_total, tx_off;
	bool close_when_sent, close_called;
	bool close_on_fin;		/* qtcp_close() from ops->peer_closed */
	/* application: receiving */
	uint8_t *rx;
	size_t rx_len, rx_cap;
	bool rx_bad, refuse, take_random, resume_each_step;
	uint32_t take_max;
	/* events */
	int connected, peer_closed, closed, reset, error;
	enum qtcp_error err;
	uint64_t connected_at, error_at;
	/* every segment sent */
	uint64_t xmits;
	struct iw_tcp_seg last;
	uint64_t rtx_times[64];		/* when data went out again */
	uint32_t nrtx;
	uint32_t data_end;		/* the highest data sequence sent */
	bool seen_data;
	uint32_t drop_rtx;		/* lose this many retransmissions */
};

struct world {
	uint64_t now, order, rng;
	struct node n[2];
	struct link l[2];		/* l[i]: frames sent by node i */
	struct frame *pool;
	uint32_t heap[QMAX], nheap, free_list[QMAX], nfree;
};

static struct world W;

static bool heap_less(struct world *w, uint32_t a, uint32_t b)
{
	const struct frame *x = &w->pool[a], *y = &w->pool[b];

	return x->at < y->at || (x->at == y->at && x->order < y->order);
}

static void heap_push(struct world *w, uint32_t f)
{
	uint32_t i = w->nheap++;

	w->heap[i] = f;
	while (i && heap_less(w, w->heap[i], w->heap[(i - 1) / 2])) {
		uint32_t p = (i - 1) / 2, t = w->heap[p];

		w->heap[p] = w->heap[i];
		w->heap[i] = t;
		i = p;
	}
}

static uint32_t heap_pop(struct world *w)
{
	uint32_t top = w->heap[0], i = 0;

	w->heap[0] = w->heap[--w->nheap];
	for (;;) {
		uint32_t l = 2 * i + 1, r = l + 1, m = i, t;

		if (l < w->nheap && heap_less(w, w->heap[l], w->heap[m]))
			m = l;
		if (r < w->nheap && heap_less(w, w->heap[r], w->heap[m]))
			m = r;
		if (m == i)
			break;
		t = w->heap[m];
		w->heap[m] = w->heap[i];
		w->heap[i] = t;
		i = m;
	}
	return top;
}

static void enqueue(struct world *w, int from, const uint8_t *buf, size_t len, uint64_t at)
{
	struct link *l = &w->l[from];
	uint32_t f;

	if (!w->nfree || l->inq >= l->qlimit) {
		l->congested++;
		return;
	}
	f = w->free_list[--w->nfree];
	w->pool[f].at = at;
	w->pool[f].order = w->order++;
	w->pool[f].to = from ^ 1;
	w->pool[f].len = (uint16_t)len;
	memcpy(w->pool[f].data, buf, len);
	l->inq++;
	heap_push(w, f);
}

static void net_send_frame(struct world *w, int from, const uint8_t *buf, size_t len)
{
	struct link *l = &w->l[from];
	uint64_t ser = l->rate_bps ? len * 8 * SEC / l->rate_bps : 0, at;
	int copies = 1, i;

	l->sent++;
	if (l->cut)
		return;
	for (i = 0; i < 4; i++)
		if (l->drop_nth[i] == l->sent)
			return;
	if (l->drop_next) {
		l->drop_next--;
		return;
	}
	if (chance(&w->rng, l->loss)) {
		l->lost++;
		return;
	}
	if (chance(&w->rng, l->dup))
		copies = 2;
	if (l->busy_until < w->now)
		l->busy_until = w->now;
	l->busy_until += ser;
	at = l->busy_until + l->delay_ns;
	for (i = 0; i < copies; i++) {
		uint64_t t = at + (uint64_t)i * 3 * US;

		if (chance(&w->rng, l->reorder))
			t += rng_next(&w->rng) % (4 * l->delay_ns + 1);
		enqueue(w, from, buf, len, t);
	}
}

static void net_xmit(void *o, const struct iw_tcp_seg *s)
{
	struct node *n = o;
	uint8_t buf[FRAME_MAX];
	size_t len = iw_tcp_build(s, buf, sizeof(buf));

	CHECK(len != 0);
	n->xmits++;
	n->last = *s;
	n->last.payload = NULL;
	if (s->payload_len) {
		bool rtx = n->seen_data && (int32_t)(s->seq - n->data_end) < 0;

		if (rtx && n->nrtx < 64)
			n->rtx_times[n->nrtx++] = n->w->now;
		if (rtx && n->drop_rtx) {
			n->drop_rtx--;
			len = 0;
		}
		if (!n->seen_data || (int32_t)(s->seq + s->payload_len - n->data_end) > 0)
			n->data_end = s->seq + s->payload_len;
		n->seen_data = true;
	}
	if (len)
		net_send_frame(n->w, n->id, buf, len);
}

/* ---------------------------------------------------------------- the applications */
static void pump(struct node *n)
{
	while (n->c && n->tx_off < n->tx_total) {
		size_t k = qtcp_send(n->c, pattern[n->id] + n->tx_off,
				     n->tx_total - n->tx_off < 70000 ? n->tx_total - n->tx_off :
				     70000, n->w->now);
		if (!k)
			break;
		n->tx_off += k;
	}
	if (n->c && n->connected && n->close_when_sent && !n->close_called &&
	    n->tx_off == n->tx_total) {
		n->close_called = true;
		qtcp_close(n->c, n->w->now);
	}
}

static size_t app_deliver(void *o, const uint8_t *p, size_t len)
{
	struct node *n = o;
	size_t take = len;

	if (n->refuse)
		return 0;
	if (n->take_max && take > n->take_max)
		take = n->take_max;
	if (n->take_random)
		take = rng_next(&n->w->rng) % (take + 1);
	if (take > n->rx_cap - n->rx_len) {
		n->rx_bad = true;	/* more than the peer ever sends */
		take = n->rx_cap - n->rx_len;
	}
	if (memcmp(p, pattern[n->id ^ 1] + n->rx_len, take))
		n->rx_bad = true;
	memcpy(n->rx + n->rx_len, p, take);
	n->rx_len += take;
	return take;
}

static void app_connected(void *o)
{
	struct node *n = o;

	n->connected++;
	n->connected_at = n->w->now;
	pump(n);
}

static void app_acked(void *o, uint32_t bytes)
{
	pump(o);			/* qtcp_send from inside a callback */
}

static void app_peer_closed(void *o)
{
	struct node *n = o;

	n->peer_closed++;
	if (n->close_on_fin)
		qtcp_close(n->c, n->w->now);
}

static void app_closed(void *o)
{
	struct node *n = o;

	n->closed++;
}

static void app_reset(void *o)
{
	struct node *n = o;

	n->reset++;
}

static void app_error(void *o, enum qtcp_error e)
{
	struct node *n = o;

	n->error++;
	n->err = e;
	n->error_at = n->w->now;
}

static const struct qtcp_ops ops = {
	.xmit = net_xmit,
	.deliver = app_deliver,
	.connected = app_connected,
	.acked = app_acked,
	.peer_closed = app_peer_closed,
	.closed = app_closed,
	.reset = app_reset,
	.error = app_error,
};

/* ---------------------------------------------------------------- setting up, running */
static const uint8_t mac[2][6] = { { 0x52, 0x54, 0, 0, 0, 1 }, { 0x52, 0x54, 0, 0, 0, 2 } };

static void set_addr(struct node *n, bool v6)
{
	static const uint8_t v4p[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
	int me = n->id, peer = n->id ^ 1;

	memset(&n->addr, 0, sizeof(n->addr));
	memcpy(n->addr.smac, mac[me], 6);
	memcpy(n->addr.dmac, mac[peer], 6);
	if (v6) {
		static const uint8_t p6[8] = { 0xfd, 0, 0, 0, 0, 0, 0, 1 };

		memcpy(n->addr.sgid, p6, 8);
		memcpy(n->addr.dgid, p6, 8);
		n->addr.sgid[15] = (uint8_t)(me + 1);
		n->addr.dgid[15] = (uint8_t)(peer + 1);
	} else {
		memcpy(n->addr.sgid, v4p, 12);
		memcpy(n->addr.dgid, v4p, 12);
		n->addr.sgid[12] = 10;
		n->addr.sgid[15] = (uint8_t)(me + 1);
		n->addr.dgid[12] = 10;
		n->addr.dgid[15] = (uint8_t)(peer + 1);
	}
	n->addr.ipv6 = v6;
	n->addr.hop_limit = 64;
	n->addr.sport = me ? 5000 : 40000;
	n->addr.dport = me ? 40000 : 5000;
}

static void world_free(struct world *w)
{
	int i;

	for (i = 0; i < 2; i++) {
		qtcp_destroy(w->n[i].c);
		free(w->n[i].rx);
	}
	free(w->pool);
	memset(w, 0, sizeof(*w));
}

/* A clean 1 Gb/s link, 50 us each way; node 0 sends @tx0 bytes, node 1 @tx1. */
static struct world *world_init(uint64_t seed, bool v6, size_t tx0, size_t tx1)
{
	struct world *w = &W;
	uint32_t i;
	int k;

	world_free(w);
	if (!pattern[0])
		make_patterns();
	w->rng = seed * 0x9e3779b97f4a7c15ull + 1;
	w->now = 1 * SEC;
	w->pool = calloc(QMAX, sizeof(*w->pool));
	for (i = 0; i < QMAX; i++)
		w->free_list[w->nfree++] = i;
	for (k = 0; k < 2; k++) {
		struct node *n = &w->n[k];

		n->w = w;
		n->id = k;
		qtcp_config_default(&n->cfg);
		set_addr(n, v6);
		w->l[k].delay_ns = 50 * US;
		w->l[k].rate_bps = 1000000000ull;
		w->l[k].qlimit = 1000;
	}
	w->n[0].tx_total = tx0;
	w->n[1].tx_total = tx1;
	w->n[0].rx_cap = tx1;
	w->n[1].rx_cap = tx0;
	w->n[0].rx = malloc(PAT_LEN);
	w->n[1].rx = malloc(PAT_LEN);
	w->n[0].isn = 0x12345678;
	w->n[1].isn = 0x9abcdef0;
	return w;
}

static void route(struct world *w, struct frame *f)
{
	struct node *n = &w->n[f->to];
	struct iw_tcp_seg s;
	enum iw_parse_result r = iw_tcp_parse(f->data, f->len, &s);

	CHECK_EQ(r, IW_OK);
	if (r != IW_OK)
		return;
	if (!n->c && n->listen && qtcp_is_syn(&s)) {
		n->c = qtcp_create(&n->cfg, &ops, n);
		CHECK(n->c != NULL);
		CHECK_EQ(qtcp_accept(n->c, &s, n->isn, w->now), 0);
		return;
	}
	if (!n->c || n->c->state == QTCP_CLOSED) {
		struct iw_tcp_seg rst;

		/* no connection: the host answers with a RST (RFC 9293 3.10.7.1) */
		if (n->refuse_conn && qtcp_rst_reply(&s, &rst))
			net_xmit(n, &rst);
		return;
	}
	qtcp_input(n->c, &s, w->now);
}

static void connect_node(struct world *w, int k)
{
	struct node *n = &w->n[k];

	n->c = qtcp_create(&n->cfg, &ops, n);
	CHECK(n->c != NULL);
	CHECK_EQ(qtcp_connect(n->c, &n->addr, n->isn, w->now), 0);
}

/* Bytes a node's consumer has not taken yet (it comes back for them every millisecond). */
static bool rx_waiting(const struct node *n)
{
	const struct qtcp_conn *c = n->c;

	return c && n->resume_each_step && c->state != QTCP_CLOSED &&
	       c->rcv_head_seq != c->rcv_nxt - c->fin_rcvd;
}

/* One step of the world: the next event (frame or timer) and all at the same time. */
static bool step(struct world *w, uint64_t limit)
{
	uint64_t t = w->nheap ? w->pool[w->heap[0]].at : UINT64_MAX;
	int k;

	for (k = 0; k < 2; k++) {
		if (w->n[k].c && qtcp_next_deadline(w->n[k].c) < t)
			t = qtcp_next_deadline(w->n[k].c);
		if (rx_waiting(&w->n[k]) && w->now + MS < t)
			t = w->now + MS;
	}
	if (t == UINT64_MAX || t > limit)
		return false;
	if (t > w->now)
		w->now = t;
	while (w->nheap && w->pool[w->heap[0]].at <= w->now) {
		uint32_t f = heap_pop(w);

		w->l[w->pool[f].to ^ 1].inq--;
		route(w, &w->pool[f]);
		w->free_list[w->nfree++] = f;
	}
	for (k = 0; k < 2; k++) {
		struct node *n = &w->n[k];

		if (n->c && qtcp_next_deadline(n->c) <= w->now)
			qtcp_timer(n->c, w->now);
		if (n->c && n->resume_each_step)
			qtcp_rx_resume(n->c, w->now);
		pump(n);
	}
	return true;
}

/* Run until @done or nothing is left to happen or @dur_ns passed; returns done(). */
static bool run(struct world *w, uint64_t dur_ns, bool (*done)(struct world *))
{
	uint64_t limit = w->now + dur_ns;

	while (!(done && done(w)))
		if (!step(w, limit))
			break;
	if (!(done && done(w)) && w->now < limit)
		w->now = limit;
	return done ? done(w) : true;
}

static bool both_connected(struct world *w)
{
	return w->n[0].connected && w->n[1].connected;
}

static bool transfer_done(struct world *w)
{
	int k;

	for (k = 0; k < 2; k++) {
		struct node *n = &w->n[k];

		if (n->rx_len != n->rx_cap || n->tx_off != n->tx_total)
			return false;
		if (n->c && n->c->snd_una != n->c->snd_max)
			return false;
	}
	return true;
}

static void establish(struct world *w)
{
	w->n[1].listen = true;
	connect_node(w, 0);
	CHECK(run(w, 5 * SEC, both_connected));
}

static void check_transfer(struct world *w)
{
	int k;

	for (k = 0; k < 2; k++) {
		CHECK(!w->n[k].rx_bad);
		CHECK_EQ(w->n[k].rx_len, w->n[k].rx_cap);
		CHECK(!memcmp(w->n[k].rx, pattern[k ^ 1], w->n[k].rx_len));
		CHECK_EQ(w->n[k].error, 0);
		CHECK_EQ(w->n[k].reset, 0);
	}
}

static void print_stats(const char *what, const struct qtcp_conn *c)
{
	const struct qtcp_stats *s = &c->stats;

	printf("  %s: segs %llu/%llu rtx %llu rto %llu fr %llu dupack %llu ooo %llu/%llu dup %llu "
	       "oow %llu bad %llu chal %llu probes %llu cwnd %u srtt %llu us\n", what,
	       (unsigned long long)s->segs_out, (unsigned long long)s->segs_in,
	       (unsigned long long)s->retransmits, (unsigned long long)s->timeouts,
	       (unsigned long long)s->fast_retransmits, (unsigned long long)s->dup_acks,
	       (unsigned long long)s->ooo_segs, (unsigned long long)s->ooo_dropped,
	       (unsigned long long)s->dup_segs, (unsigned long long)s->out_of_window,
	       (unsigned long long)s->bad_segs, (unsigned long long)s->challenge_acks,
	       (unsigned long long)s->probes, c->cwnd, (unsigned long long)(c->srtt / US));
}

/* ---------------------------------------------------------------- configuration */
static void test_config(void)
{
	struct qtcp_config cfg;
	char why[128];

	qtcp_config_default(&cfg);
	CHECK(qtcp_config_check(&cfg, why, sizeof(why)));
	CHECK_EQ(qtcp_footprint(&cfg), sizeof(struct qtcp_conn) + (512u << 10));
	cfg.snd_buf = 100;
	CHECK(!qtcp_config_check(&cfg, why, sizeof(why)));
	CHECK(strstr(why, "snd_buf") != NULL);
	CHECK_EQ(qtcp_footprint(&cfg), 0);
	CHECK(qtcp_create(&cfg, &ops, NULL) == NULL);
	qtcp_config_default(&cfg);
	cfg.rto_min_ns = 2 * SEC;	/* above rto_init */
	CHECK(!qtcp_config_check(&cfg, NULL, 0));
	qtcp_config_default(&cfg);
	cfg.ooo_max = QTCP_OOO_MAX + 1;
	CHECK(!qtcp_config_check(&cfg, why, sizeof(why)));
	qtcp_config_default(&cfg);
	cfg.mtu = 64;
	CHECK(!qtcp_config_check(&cfg, why, sizeof(why)));
	CHECK(!strcmp(qtcp_state_name(QTCP_ESTABLISHED), "ESTABLISHED"));
	CHECK(!strcmp(qtcp_state_name(QTCP_TIME_WAIT), "TIME_WAIT"));
	CHECK(!strcmp(qtcp_state_name((enum qtcp_state)99), "?"));
	CHECK(!strcmp(qtcp_error_name(QTCP_ERR_TIMEOUT), "retransmission timeout"));
}

/* ---------------------------------------------------------------- handshakes */
static void handshake(bool v6, int active)
{
	struct world *w = world_init(1, v6, 0, 0);
	struct qtcp_conn *a, *b;

	w->n[active ^ 1].listen = true;
	connect_node(w, active);
	CHECK_EQ(w->n[active].c->state, QTCP_SYN_SENT);
	CHECK(run(w, 1 * SEC, both_connected));
	a = w->n[active].c;
	b = w->n[active ^ 1].c;
	CHECK(a && b);
	if (!a || !b)
		return;
	CHECK_EQ(a->state, QTCP_ESTABLISHED);
	CHECK_EQ(b->state, QTCP_ESTABLISHED);
	/* 256 KiB rings: window scale 3 both ways */
	CHECK_EQ(a->snd_wscale, 3);
	CHECK_EQ(a->rcv_wscale, 3);
	CHECK_EQ(b->snd_wscale, 3);
	CHECK_EQ(a->mss, v6 ? 1440 : 1460);
	CHECK_EQ(b->mss, v6 ? 1440 : 1460);
	CHECK_EQ(a->snd_una, w->n[active].isn + 1);
	CHECK_EQ(b->snd_una, w->n[active ^ 1].isn + 1);
	CHECK_EQ(a->rcv_nxt, w->n[active ^ 1].isn + 1);
	CHECK_EQ(a->snd_wnd, 65535);		/* the SYN-ACK's, not scaled */
	CHECK_EQ(b->snd_wnd, 256u << 10);	/* the ACK's, scaled */
	CHECK(a->have_rtt && b->have_rtt);
	CHECK_EQ(a->rto, 200 * MS);	/* min RTO: the RTT is 100 us */
	CHECK_EQ(a->stats.retransmits + b->stats.retransmits, 0);
	/* one SYN, one SYN-ACK, one ACK */
	CHECK_EQ(w->n[active].xmits, 2);
	CHECK_EQ(w->n[active ^ 1].xmits, 1);
}

static void test_handshake(void)
{
	handshake(false, 0);
	handshake(false, 1);
	handshake(true, 0);
	handshake(true, 1);
}

static void test_handshake_losses(void)
{
	struct world *w = world_init(2, false, 1000, 1000);

	/* the SYN lost: sent again after the initial RTO of 1 s */
	w->n[1].listen = true;
	w->l[0].drop_next = 1;
	connect_node(w, 0);
	CHECK(run(w, 10 * SEC, both_connected));
	CHECK_EQ(w->n[0].c->stats.retransmits, 1);
	CHECK(w->n[0].connected_at >= 2 * SEC && w->n[0].connected_at < 2 * SEC + 1 * MS);
	CHECK_EQ(w->n[0].c->cwnd, w->n[0].c->mss);	/* RFC 5681: IW 1 after SYN loss */
	CHECK(run(w, 10 * SEC, transfer_done));
	check_transfer(w);

	/* the SYN-ACK lost: the SYN again brings the SYN-ACK again */
	w = world_init(3, false, 1000, 1000);
	w->n[1].listen = true;
	w->l[1].drop_next = 1;
	connect_node(w, 0);
	CHECK(run(w, 10 * SEC, both_connected));
	CHECK(run(w, 10 * SEC, transfer_done));
	check_transfer(w);

	/* the handshake's last ACK lost: data from the active side completes it */
	w = world_init(4, false, 1000, 1000);
	w->n[1].listen = true;
	connect_node(w, 0);			/* the SYN is on the wire */
	w->l[0].drop_next = 1;			/* the ACK after the SYN-ACK */
	CHECK(run(w, 10 * SEC, transfer_done));
	check_transfer(w);

	/* simultaneous open */
	w = world_init(5, false, 5000, 7000);
	w->n[1].addr.sport = 5000;
	w->n[0].addr.dport = 5000;
	connect_node(w, 0);
	connect_node(w, 1);
	CHECK(run(w, 5 * SEC, both_connected));
	CHECK_EQ(w->n[0].c->state, QTCP_ESTABLISHED);
	CHECK_EQ(w->n[1].c->state, QTCP_ESTABLISHED);
	CHECK(run(w, 10 * SEC, transfer_done));
	check_transfer(w);

	/* refused: the listener answers with a RST */
	w = world_init(6, false, 0, 0);
	w->n[1].refuse_conn = true;
	connect_node(w, 0);
	run(w, 1 * SEC, NULL);
	CHECK_EQ(w->n[0].reset, 1);
	CHECK_EQ(w->n[0].c->state, QTCP_CLOSED);

	/* nobody there: SYN_TIMEOUT after syn_retries, backing off */
	w = world_init(7, false, 0, 0);
	w->n[0].cfg.syn_retries = 3;
	connect_node(w, 0);
	run(w, 60 * SEC, NULL);
	CHECK_EQ(w->n[0].error, 1);
	CHECK_EQ(w->n[0].err, QTCP_ERR_SYN_TIMEOUT);
	CHECK_EQ(w->n[0].xmits, 4);
	/* SYN at 1 s, again at 2, 4, 8 s; gives up at 16 s */
	CHECK_EQ(w->n[0].error_at, 1 * SEC + 15 * SEC);
}

/* Hostile SYN options: MSS 0 and 1, window scale 14, a SYN with data. */
static void test_accept_options(void)
{
	struct qtcp_config cfg;
	struct node n = { 0 };
	struct qtcp_conn *c;
	struct iw_tcp_seg syn;
	static const uint8_t data[100];

	qtcp_config_default(&cfg);
	n.w = &W;
	set_addr(&n, false);
	memset(&syn, 0, sizeof(syn));
	memcpy(syn.smac, mac[1], 6);
	memcpy(syn.dmac, mac[0], 6);
	memcpy(syn.sgid, n.addr.dgid, 16);
	memcpy(syn.dgid, n.addr.sgid, 16);
	syn.sport = 1234;
	syn.dport = 5000;
	syn.seq = 0xfffffffe;
	syn.flags = IW_TCP_SYN;
	syn.window = 0xffff;
	syn.mss = 1;
	syn.has_wscale = true;
	syn.wscale = 14;
	syn.payload = data;
	syn.payload_len = sizeof(data);

	c = qtcp_create(&cfg, &ops, &n);
	CHECK_EQ(qtcp_accept(c, &syn, 77, 0), 0);
	CHECK_EQ(c->mss, QTCP_MIN_MSS);
	CHECK_EQ(c->snd_wscale, 14);
	CHECK_EQ(c->rcv_nxt, 0xffffffffu);	/* the SYN's data not taken */
	CHECK_EQ(n.last.flags, IW_TCP_SYN | IW_TCP_ACK);
	CHECK_EQ(n.last.ack, 0xffffffffu);
	CHECK_EQ(n.last.seq, 77);
	CHECK(n.last.has_wscale);
	CHECK_EQ(n.last.mss, 1460);
	CHECK_EQ(qtcp_accept(c, &syn, 77, 0), -1);	/* not CLOSED */
	qtcp_destroy(c);

	syn.mss = 0;
	syn.has_wscale = false;
	c = qtcp_create(&cfg, &ops, &n);
	CHECK_EQ(qtcp_accept(c, &syn, 77, 0), 0);
	CHECK_EQ(c->mss, 536);
	CHECK_EQ(c->rcv_wscale, 0);
	CHECK(!n.last.has_wscale);
	qtcp_destroy(c);

	c = qtcp_create(&cfg, &ops, &n);
	syn.flags = IW_TCP_SYN | IW_TCP_ACK;
	CHECK_EQ(qtcp_accept(c, &syn, 77, 0), -1);
	syn.flags = IW_TCP_SYN | IW_TCP_FIN;
	CHECK_EQ(qtcp_accept(c, &syn, 77, 0), -1);
	syn.flags = IW_TCP_SYN;
	syn.sport = 0;
	CHECK_EQ(qtcp_accept(c, &syn, 77, 0), -1);
	syn.sport = 1234;
	syn.ipv6 = true;			/* v4 addresses in a v6 segment */
	CHECK_EQ(qtcp_accept(c, &syn, 77, 0), -1);
	CHECK_EQ(c->state, QTCP_CLOSED);
	qtcp_destroy(c);
}

/* ---------------------------------------------------------------- bulk transfers */
static void test_bulk(void)
{
	struct world *w = world_init(10, false, 4u << 20, 1u << 20);

	establish(w);
	CHECK(run(w, 30 * SEC, transfer_done));
	check_transfer(w);
	/* a clean link with room in the queue: nothing lost, nothing sent twice */
	CHECK_EQ(w->n[0].c->stats.retransmits, 0);
	CHECK_EQ(w->n[1].c->stats.retransmits, 0);
	CHECK_EQ(w->n[0].c->stats.bytes_acked, 4u << 20);
	CHECK_EQ(w->n[1].c->stats.bytes_delivered, 4u << 20);
	CHECK(w->now < 2 * SEC);	/* 5 MiB at 1 Gb/s: well under a second */
	print_stats("bulk A", w->n[0].c);

	/* a consumer that takes random amounts: the ring holds the rest */
	w = world_init(11, true, 2u << 20, 2u << 20);
	w->n[0].take_random = w->n[1].take_random = true;
	w->n[0].resume_each_step = w->n[1].resume_each_step = true;
	w->n[0].cfg.delack_ns = 40 * MS;
	w->n[1].cfg.delack_ns = 40 * MS;
	establish(w);
	CHECK(run(w, 60 * SEC, transfer_done));
	check_transfer(w);
}

/* A link that loses, reorders and duplicates, and a drop-tail queue that fills. */
static void lossy(uint64_t seed, uint32_t ooo_max, size_t bytes, uint32_t isn0, uint32_t isn1)
{
	struct world *w = world_init(seed, seed & 1, bytes, bytes / 4);
	int k;

	for (k = 0; k < 2; k++) {
		w->l[k].loss = 50000;
		w->l[k].reorder = 50000;
		w->l[k].dup = 20000;
		w->l[k].qlimit = 64;
		w->n[k].cfg.ooo_max = ooo_max;
		w->n[k].cfg.max_retries = 15;
	}
	w->n[0].isn = isn0;
	w->n[1].isn = isn1;
	w->n[1].take_random = true;
	w->n[1].resume_each_step = true;
	establish(w);
	CHECK(run(w, 300 * SEC, transfer_done));
	check_transfer(w);
	printf("  seed %llu ooo_max %u: %.2f virtual s, lost %llu+%llu congested %llu\n",
	       (unsigned long long)seed, ooo_max, (double)(w->now - SEC) / SEC,
	       (unsigned long long)w->l[0].lost, (unsigned long long)w->l[1].lost,
	       (unsigned long long)w->l[0].congested);
	for (k = 0; k < 2 && !transfer_done(w); k++) {
		struct qtcp_conn *c = w->n[k].c;

		printf("  DBG %d %s una %x nxt %x max %x len %u bufseq %x fin %d wnd %u cwnd %u "
		       "ssth %u rec %d dupacks %u rcv_nxt %x head %x adv %x ooo %u timers %llx %llx "
		       "%llx %llx now %llx tx_off %zu\n", k, qtcp_state_name(c->state), c->snd_una,
		       c->snd_nxt, c->snd_max, c->snd_len, c->snd_buf_seq, c->fin_queued,
		       c->snd_wnd, c->cwnd, c->ssthresh, c->in_recovery, c->dupacks, c->rcv_nxt,
		       c->rcv_head_seq, c->rcv_adv, c->ooo_n,
		       (unsigned long long)c->timer[0], (unsigned long long)c->timer[1],
		       (unsigned long long)c->timer[2], (unsigned long long)c->timer[3],
		       (unsigned long long)w->now, w->n[k].tx_off);
	}
	if (w->n[0].c)
		print_stats("A", w->n[0].c);
	if (w->n[1].c)
		print_stats("B", w->n[1].c);
	/* bounded: 4 MiB at 5% loss each way in under two virtual minutes */
	CHECK(w->now - SEC < 120 * SEC);
	CHECK(w->n[0].c->stats.retransmits > 0);
	CHECK(w->n[1].c->stats.dup_segs > 0);
	if (ooo_max)
		CHECK(w->n[1].c->stats.ooo_segs > w->n[1].c->stats.ooo_dropped);
}

static void test_lossy(void)
{
	lossy(21, 8, 4u << 20, 0x12345678, 0x9abcdef0);
	lossy(22, 8, 4u << 20, 0x80000000, 0x7fffffff);
	lossy(23, 16, 4u << 20, 1, 2);
	lossy(24, 0, 1u << 20, 0xdeadbeef, 0xfeedface);	/* out of order dropped */
}

static bool all_acked(struct world *w)
{
	const struct qtcp_conn *c = w->n[0].c;

	return w->n[0].tx_off == w->n[0].tx_total && c->snd_una == c->snd_max;
}

/*
 * The path slows down past the RTO, as a busy host's can: RTT 100 us at the handshake,
 * then 800 ms, nothing lost. Small messages go one at a time (each once the one before is
 * acknowledged, as rping's). Karn's rule takes no sample from a segment sent twice; but
 * the ACK bounds the RTT (at least the time since the copy sent again), which lifts the
 * RTO towards the RTT: one timeout a message at most, not two as with the RTO put back
 * to its 200 ms floor each time (without timestamps nothing says the RTT is 800 ms).
 */
static void test_rtt_rise(void)
{
	struct world *w = world_init(40, false, 40 * 100, 0);
	uint64_t timeouts;
	int k;

	w->n[0].tx_total = 0;
	establish(w);
	w->l[0].delay_ns = w->l[1].delay_ns = 400 * MS;
	for (k = 0; k < 40; k++) {
		uint64_t before = w->n[0].c->stats.timeouts;

		w->n[0].tx_total += 100;
		pump(&w->n[0]);
		CHECK(run(w, 60 * SEC, all_acked));
		if (k >= 2)	/* past the first two, one timeout a message */
			CHECK_EQ(w->n[0].c->stats.timeouts - before, 1);
	}
	timeouts = w->n[0].c->stats.timeouts;
	printf("  40 messages, RTT 800 ms: %llu timeouts, RTO %llu ms\n",
	       (unsigned long long)timeouts, (unsigned long long)(w->n[0].c->rto / MS));
	CHECK(w->n[0].c->rto >= 600 * MS);
	CHECK_EQ(w->n[1].rx_len, 40 * 100);
	CHECK(!memcmp(w->n[1].rx, pattern[0], w->n[1].rx_len));
	CHECK_EQ(w->n[0].error, 0);
}

/* Sequence numbers wrap during the transfer, both ways, through a lossy link. */
static void test_wrap(void)
{
	struct world *w = world_init(30, false, 1u << 20, 1u << 20);

	w->n[0].isn = 0xffffff00u;
	w->n[1].isn = 0xfffff000u;
	establish(w);
	CHECK(run(w, 30 * SEC, transfer_done));
	check_transfer(w);
	CHECK(w->n[0].c->snd_una < 0x00200000u);	/* wrapped */
	CHECK(w->n[1].c->snd_una < 0x00200000u);

	lossy(31, 8, 2u << 20, 0xfffffff0u, 0xffffffffu);
	lossy(32, 8, 2u << 20, 0xffff0000u, 0xffe00000u);
}

/* ---------------------------------------------------------------- failures */
static bool a_failed(struct world *w)
{
	return w->n[0].error > 0;
}

static void test_rto_fail(void)
{
	struct world *w = world_init(40, false, 100000, 0);
	uint64_t cut_at;
	uint32_t i;

	w->n[0].cfg.max_retries = 5;
	w->n[0].tx_total = 0;
	establish(w);
	run(w, 10 * MS, NULL);
	w->l[0].cut = w->l[1].cut = true;
	cut_at = w->now;
	w->n[0].tx_total = 100000;
	w->n[0].nrtx = 0;
	pump(&w->n[0]);
	CHECK(run(w, 120 * SEC, a_failed));
	CHECK_EQ(w->n[0].err, QTCP_ERR_TIMEOUT);
	CHECK_EQ(w->n[0].c->state, QTCP_CLOSED);
	CHECK_EQ(w->n[0].c->stats.timeouts, 6);
	CHECK_EQ(qtcp_next_deadline(w->n[0].c), UINT64_MAX);
	/* the first segment again after 200 ms, 400 ms, ... (RFC 6298 backoff) */
	CHECK_EQ(w->n[0].nrtx, 5);
	for (i = 0; i < w->n[0].nrtx; i++)
		CHECK_EQ(w->n[0].rtx_times[i] - cut_at, (200 * MS << (i + 1)) - 200 * MS);
	CHECK_EQ(w->n[0].error_at - cut_at, (200 * MS << 6) - 200 * MS);
	CHECK_EQ(w->n[0].last.flags, IW_TCP_RST | IW_TCP_ACK);	/* a RST as it gives up */
	/* the other side has no data outstanding: it stays */
	CHECK_EQ(w->n[1].c->state, QTCP_ESTABLISHED);

	/* a cut healed before max_retries: the transfer finishes */
	w = world_init(41, false, 200000, 0);
	establish(w);
	w->l[0].cut = true;
	run(w, 1 * SEC, NULL);
	CHECK(w->n[0].c->stats.timeouts >= 2);
	w->l[0].cut = false;
	CHECK(run(w, 30 * SEC, transfer_done));
	check_transfer(w);
	/* Karn: no sample from a segment sent again, so the estimate is the path's */
	CHECK(w->n[0].c->srtt < 10 * MS);
	CHECK_EQ(w->n[0].c->rto, 200 * MS);	/* and the backoff is over */
}

/* ---------------------------------------------------------------- closing */
static bool all_closed(struct world *w)
{
	return w->n[0].closed && w->n[1].closed;
}

static void test_close(void)
{
	struct world *w = world_init(50, false, 300000, 100000);
	struct qtcp_conn *a, *b;

	/* A closes once its data is queued: B reads it all, then the FIN */
	w->n[0].close_when_sent = true;
	establish(w);
	a = w->n[0].c;
	b = w->n[1].c;
	CHECK(run(w, 10 * SEC, transfer_done));
	run(w, 10 * MS, NULL);
	CHECK_EQ(w->n[1].peer_closed, 1);
	CHECK_EQ(w->n[1].rx_len, 300000);
	CHECK_EQ(a->state, QTCP_FIN_WAIT_2);
	CHECK_EQ(b->state, QTCP_CLOSE_WAIT);
	CHECK_EQ(qtcp_send(a, "x", 1, w->now), 0);	/* no sending after close */
	CHECK(qtcp_send(b, pattern[1] + 100000, 1, w->now) == 1);	/* the other way is open */
	w->n[0].rx_cap++;
	run(w, 10 * MS, NULL);
	CHECK_EQ(w->n[0].rx_len, 100001);
	qtcp_close(b, w->now);
	CHECK_EQ(b->state, QTCP_LAST_ACK);
	run(w, 10 * MS, NULL);
	CHECK_EQ(w->n[0].peer_closed, 1);
	CHECK_EQ(w->n[1].closed, 1);
	CHECK_EQ(b->state, QTCP_CLOSED);
	CHECK_EQ(a->state, QTCP_TIME_WAIT);
	CHECK_EQ(w->n[0].closed, 0);
	/* TIME_WAIT: short and bounded (1 s by default) */
	CHECK(run(w, 5 * SEC, all_closed));
	CHECK_EQ(a->state, QTCP_CLOSED);
	CHECK_EQ(qtcp_next_deadline(a), UINT64_MAX);
	CHECK_EQ(qtcp_next_deadline(b), UINT64_MAX);
	CHECK_EQ(w->n[0].reset + w->n[1].reset + w->n[0].error + w->n[1].error, 0);

	/* both close at once: CLOSING, TIME_WAIT, CLOSED on both sides */
	w = world_init(51, false, 50000, 50000);
	w->n[0].close_when_sent = w->n[1].close_when_sent = true;
	w->n[0].cfg.time_wait_ns = w->n[1].cfg.time_wait_ns = 100 * MS;
	establish(w);
	CHECK(run(w, 10 * SEC, all_closed));
	check_transfer(w);
	CHECK_EQ(w->n[0].peer_closed, 1);
	CHECK_EQ(w->n[1].peer_closed, 1);

	/* close through a lossy link: FINs and their ACKs get lost too; B closes when it
	 * sees A's FIN, from the callback */
	w = world_init(52, false, 200000, 200000);
	w->n[0].close_when_sent = true;
	w->n[1].close_on_fin = true;
	w->l[0].loss = w->l[1].loss = 100000;
	establish(w);
	CHECK(run(w, 120 * SEC, all_closed));
	check_transfer(w);

	/* FIN_WAIT_2 bounded: the peer never closes */
	w = world_init(53, false, 1000, 0);
	w->n[0].close_when_sent = true;
	w->n[0].cfg.fin_wait2_ns = 2 * SEC;
	establish(w);
	run(w, 1 * SEC, NULL);
	CHECK_EQ(w->n[0].c->state, QTCP_FIN_WAIT_2);
	run(w, 2 * SEC, NULL);
	CHECK_EQ(w->n[0].closed, 1);
	CHECK_EQ(w->n[0].c->state, QTCP_CLOSED);
	CHECK_EQ(w->n[1].reset, 1);		/* it said so with a RST */

	/* abort: a RST, and the peer is reset */
	w = world_init(54, false, 100000, 0);
	establish(w);
	run(w, 300 * US, NULL);
	qtcp_abort(w->n[0].c, w->now);
	w->n[0].refuse_conn = true;
	CHECK_EQ(w->n[0].c->state, QTCP_CLOSED);
	run(w, 1 * SEC, NULL);
	CHECK_EQ(w->n[1].reset, 1);
	CHECK_EQ(w->n[1].c->state, QTCP_CLOSED);
}

/* ---------------------------------------------------------------- RST and friends */
/* A segment to node @k's connection as its peer would address it. */
static struct iw_tcp_seg to_conn(struct world *w, int k, uint8_t flags, uint32_t seq,
				 uint32_t ack)
{
	const struct qtcp_conn *c = w->n[k].c;
	struct iw_tcp_seg s;

	memset(&s, 0, sizeof(s));
	memcpy(s.smac, c->tmpl.dmac, 6);
	memcpy(s.dmac, c->tmpl.smac, 6);
	memcpy(s.sgid, c->tmpl.dgid, 16);
	memcpy(s.dgid, c->tmpl.sgid, 16);
	s.ipv6 = c->tmpl.ipv6;
	s.sport = c->tmpl.dport;
	s.dport = c->tmpl.sport;
	s.flags = flags;
	s.seq = seq;
	s.ack = ack;
	s.window = 1000;
	return s;
}

/*
 * TIME_WAIT stays bounded: blind FINs of any sequence number do not restart it, and the
 * peer's FIN again (its ACK lost) restarts it only QTCP_TW_RESTARTS times.
 */
static void test_time_wait_bounded(void)
{
	int exact;

	for (exact = 0; exact < 2; exact++) {
		struct world *w = world_init(60 + exact, false, 1000, 1000);
		struct qtcp_conn *a;
		uint64_t rng = 7, t;

		w->n[0].close_when_sent = true;
		w->n[1].close_on_fin = true;
		establish(w);
		a = w->n[0].c;
		CHECK(run(w, 10 * SEC, transfer_done));
		run(w, 50 * MS, NULL);
		CHECK_EQ(a->state, QTCP_TIME_WAIT);
		for (t = 0; t < 20 && a->state == QTCP_TIME_WAIT; t++) {
			struct iw_tcp_seg f = to_conn(w, 0, IW_TCP_FIN | IW_TCP_ACK,
						      exact ? a->rcv_nxt - 1 :
						      (uint32_t)rng_next(&rng), a->snd_max);

			qtcp_input(a, &f, w->now);
			run(w, 500 * MS, NULL);
		}
		CHECK_EQ(a->state, QTCP_CLOSED);
		/* 1 s; with the exact FIN 4 restarts, each 0.5 s into the last */
		CHECK(t <= (exact ? 2u + 2 * QTCP_TW_RESTARTS : 2u));
		CHECK_EQ(a->tw_restarts, exact ? QTCP_TW_RESTARTS : 0);
	}
}

static void test_rst(void)
{
	struct world *w = world_init(60, false, 100000, 0);
	struct qtcp_conn *b;
	struct iw_tcp_seg s;
	uint64_t x;

	establish(w);
	CHECK(run(w, 10 * SEC, transfer_done));
	b = w->n[1].c;

	/* in the window but not at RCV.NXT: a challenge ACK, nothing else */
	x = w->n[1].xmits;
	s = to_conn(w, 1, IW_TCP_RST, b->rcv_nxt + 1000, 0);
	qtcp_input(b, &s, w->now);
	CHECK_EQ(b->state, QTCP_ESTABLISHED);
	CHECK_EQ(w->n[1].xmits, x + 1);
	CHECK_EQ(w->n[1].last.flags, IW_TCP_ACK);
	CHECK_EQ(w->n[1].last.seq, b->snd_max);
	CHECK_EQ(w->n[1].last.ack, b->rcv_nxt);
	CHECK_EQ(b->stats.challenge_acks, 1);
	/* with ACK set it is no different */
	s = to_conn(w, 1, IW_TCP_RST | IW_TCP_ACK, b->rcv_nxt + 1, b->snd_max);
	qtcp_input(b, &s, w->now);
	CHECK_EQ(b->state, QTCP_ESTABLISHED);
	CHECK_EQ(w->n[1].xmits, x + 2);
	CHECK_EQ(b->stats.challenge_acks, 2);

	/* outside the window (before or far after): dropped silently */
	s = to_conn(w, 1, IW_TCP_RST, b->rcv_nxt - 1, 0);
	qtcp_input(b, &s, w->now);
	s = to_conn(w, 1, IW_TCP_RST, b->rcv_nxt + 0x80000000u, 0);
	qtcp_input(b, &s, w->now);
	s = to_conn(w, 1, IW_TCP_RST, b->rcv_nxt + (256u << 10), 0);
	qtcp_input(b, &s, w->now);
	CHECK_EQ(b->state, QTCP_ESTABLISHED);
	CHECK_EQ(w->n[1].xmits, x + 2);

	/* a SYN in ESTABLISHED, in or out of the window: a challenge ACK */
	s = to_conn(w, 1, IW_TCP_SYN, b->rcv_nxt + 5, 0);
	qtcp_input(b, &s, w->now);
	CHECK_EQ(b->state, QTCP_ESTABLISHED);
	CHECK_EQ(b->stats.challenge_acks, 3);
	CHECK_EQ(w->n[1].xmits, x + 3);
	CHECK_EQ(w->n[1].last.flags, IW_TCP_ACK);

	/* an ACK for data never sent: answered with an ACK, ignored */
	s = to_conn(w, 1, IW_TCP_ACK, b->rcv_nxt, b->snd_max + 5000);
	qtcp_input(b, &s, w->now);
	CHECK_EQ(w->n[1].xmits, x + 4);
	CHECK_EQ(b->snd_una, b->snd_max);
	CHECK_EQ(b->state, QTCP_ESTABLISHED);
	/* no ACK bit: dropped without an answer */
	s = to_conn(w, 1, IW_TCP_PSH, b->rcv_nxt, 0);
	qtcp_input(b, &s, w->now);
	CHECK_EQ(w->n[1].xmits, x + 4);
	/* segments for another port or address: not ours */
	s = to_conn(w, 1, IW_TCP_RST, b->rcv_nxt, 0);
	s.sport++;
	qtcp_input(b, &s, w->now);
	s = to_conn(w, 1, IW_TCP_RST, b->rcv_nxt, 0);
	s.sgid[15]++;
	qtcp_input(b, &s, w->now);
	CHECK_EQ(b->state, QTCP_ESTABLISHED);
	CHECK_EQ(b->stats.bad_segs, 5);

	/* the connection still works */
	w->n[0].tx_total = 150000;
	CHECK(w->n[1].rx_cap == 100000);
	w->n[1].rx_cap = 150000;
	CHECK(run(w, 10 * SEC, transfer_done));
	check_transfer(w);

	/* exactly at RCV.NXT: reset */
	s = to_conn(w, 1, IW_TCP_RST, b->rcv_nxt, 0);
	qtcp_input(b, &s, w->now);
	CHECK_EQ(b->state, QTCP_CLOSED);
	CHECK_EQ(w->n[1].reset, 1);

	/* A lost its state, B still sends: A's host answers with qtcp_rst_reply() */
	w = world_init(61, false, 0, 0);
	establish(w);
	qtcp_destroy(w->n[0].c);
	w->n[0].c = NULL;
	w->n[0].refuse_conn = true;
	w->n[1].tx_total = 10000;
	pump(&w->n[1]);
	run(w, 1 * SEC, NULL);
	CHECK_EQ(w->n[1].reset, 1);
	CHECK_EQ(w->n[1].c->state, QTCP_CLOSED);

	/* the challenge ACKs are rate limited */
	w = world_init(62, false, 0, 0);
	w->n[1].cfg.ack_rate = 10;
	establish(w);
	b = w->n[1].c;
	x = w->n[1].xmits;
	for (int i = 0; i < 100; i++) {
		s = to_conn(w, 1, IW_TCP_RST, b->rcv_nxt + 1 + i, 0);
		qtcp_input(b, &s, w->now);
	}
	CHECK(w->n[1].xmits - x <= 10);
	CHECK(b->stats.rate_limited >= 90);
	CHECK_EQ(b->stats.challenge_acks, 100);

	/* SYN_SENT: a RST with a bad ACK is ignored, a SYN-ACK with one draws a RST */
	w = world_init(63, false, 0, 0);
	connect_node(w, 0);
	{
		struct qtcp_conn *a = w->n[0].c;

		s = to_conn(w, 0, IW_TCP_RST | IW_TCP_ACK, 0, a->iss + 7);
		qtcp_input(a, &s, w->now);
		CHECK_EQ(a->state, QTCP_SYN_SENT);
		s = to_conn(w, 0, IW_TCP_RST, 0, 0);
		qtcp_input(a, &s, w->now);
		CHECK_EQ(a->state, QTCP_SYN_SENT);
		s = to_conn(w, 0, IW_TCP_SYN | IW_TCP_ACK, 1000, a->iss);
		qtcp_input(a, &s, w->now);
		CHECK_EQ(a->state, QTCP_SYN_SENT);
		CHECK_EQ(w->n[0].last.flags, IW_TCP_RST);
		CHECK_EQ(w->n[0].last.seq, a->iss);
		s = to_conn(w, 0, IW_TCP_RST | IW_TCP_ACK, 0, a->iss + 1);
		qtcp_input(a, &s, w->now);
		CHECK_EQ(a->state, QTCP_CLOSED);
		CHECK_EQ(w->n[0].reset, 1);
	}
}

/* ---------------------------------------------------------------- flow control */
static void test_zero_window(void)
{
	struct world *w = world_init(70, false, 1u << 20, 0);
	struct qtcp_conn *a, *b;
	uint64_t probes;

	w->n[1].refuse = true;
	establish(w);
	a = w->n[0].c;
	b = w->n[1].c;
	run(w, 1 * SEC, NULL);
	/* B's ring is full and its window closed; A probes, never fails */
	CHECK_EQ(w->n[1].rx_len, 0);
	/* full but for less than the window's scale unit */
	CHECK(b->rcv_nxt - b->rcv_head_seq > (256u << 10) - 8);
	CHECK_EQ(a->snd_wnd, 0);
	CHECK_EQ(a->snd_una, a->snd_max);
	CHECK(a->stats.probes >= 1);
	run(w, 120 * SEC, NULL);
	CHECK_EQ(a->state, QTCP_ESTABLISHED);
	CHECK_EQ(w->n[0].error, 0);
	CHECK(a->stats.probes >= 3);
	/* backed off: not more than a probe every 200 ms << n, at most 60 s apart */
	CHECK(a->stats.probes < 20);
	probes = a->stats.probes;
	CHECK_EQ(b->stats.bytes_delivered, 0);

	/* the consumer reads again; the window update gets lost: a probe finds it */
	w->n[1].refuse = false;
	w->l[1].drop_next = 1;
	qtcp_rx_resume(b, w->now);
	CHECK_EQ(b->rcv_nxt, b->rcv_head_seq);		/* all taken */
	CHECK(w->n[1].rx_len > (256u << 10) - 8);
	CHECK(run(w, 200 * SEC, transfer_done));
	check_transfer(w);
	CHECK(a->stats.probes > probes);

	/* a slow consumer: takes 1000 bytes a call, resumed now and then */
	w = world_init(71, false, 1u << 20, 0);
	w->n[1].take_max = 1000;
	establish(w);
	for (int i = 0; i < 100000 && !transfer_done(w); i++) {
		run(w, 2 * MS, NULL);
		qtcp_rx_resume(w->n[1].c, w->now);
	}
	CHECK(transfer_done(w));
	check_transfer(w);

	/* a small receive ring (4 KiB < 3 MSS): silly window avoidance on both sides */
	w = world_init(72, false, 300000, 0);
	w->n[1].cfg.rcv_buf = 4096;
	w->n[1].take_max = 700;
	w->n[1].resume_each_step = true;
	establish(w);
	CHECK_EQ(w->n[1].c->rcv_wscale, 0);
	CHECK(run(w, 60 * SEC, transfer_done));
	check_transfer(w);
}

/* Fast retransmit on the third duplicate ACK; NewReno: a partial ACK sends the next hole. */
static void test_fast_retransmit(void)
{
	struct world *w = world_init(75, false, 200000, 0);
	struct qtcp_conn *a;

	/* frame 1 is the SYN, 2.. data: the 7th data segment of the initial window lost */
	w->l[0].drop_nth[0] = 8;
	establish(w);
	a = w->n[0].c;
	CHECK(run(w, 1 * SEC, transfer_done));
	check_transfer(w);
	CHECK_EQ(a->stats.fast_retransmits, 1);
	CHECK_EQ(a->stats.retransmits, 1);
	CHECK_EQ(a->stats.timeouts, 0);
	CHECK(a->stats.dup_acks >= 3);
	CHECK(w->n[1].c->stats.ooo_segs >= 3);
	CHECK(w->now - w->n[0].connected_at < 20 * MS);	/* no timeout waited for */

	/* two holes in one window: one recovery, the second hole by the partial ACK */
	w = world_init(76, false, 200000, 0);
	w->l[0].drop_nth[0] = 5;
	w->l[0].drop_nth[1] = 9;
	establish(w);
	a = w->n[0].c;
	CHECK(run(w, 1 * SEC, transfer_done));
	check_transfer(w);
	CHECK_EQ(a->stats.fast_retransmits, 1);
	CHECK_EQ(a->stats.retransmits, 2);
	CHECK_EQ(a->stats.timeouts, 0);
	CHECK(w->now - w->n[0].connected_at < 20 * MS);

	/* the retransmission lost too: the timer, then on */
	w = world_init(77, false, 200000, 0);
	w->l[0].drop_nth[0] = 5;
	w->n[0].drop_rtx = 1;
	establish(w);
	a = w->n[0].c;
	CHECK(run(w, 5 * SEC, transfer_done));
	check_transfer(w);
	CHECK_EQ(a->stats.fast_retransmits, 1);
	CHECK_EQ(a->stats.timeouts, 1);
	CHECK_EQ(w->n[0].nrtx, 2);
	/* RFC 6298: the timer runs from the last ACK of new data, not the fast retransmit */
	CHECK(w->n[0].rtx_times[1] - w->n[0].connected_at >= 200 * MS);
	CHECK(w->n[0].rtx_times[1] - w->n[0].connected_at < 201 * MS);
}

/* One connection fed by hand: a 4 KiB ring's edges, out-of-order ranges and their bound,
 * overlaps, duplicates, a FIN ahead of a gap; sequence numbers wrap on the way. */
static const uint32_t edge_irs = 0xfffffc00u;

static void inject(struct world *w, uint8_t flags, uint32_t seq, uint32_t len)
{
	struct qtcp_conn *c = w->n[1].c;
	struct iw_tcp_seg s = to_conn(w, 1, flags, seq, c->snd_max);

	s.payload = pattern[0] + (uint32_t)(seq - edge_irs - 1);
	s.payload_len = len;
	qtcp_input(c, &s, w->now);
}

static void test_window_edges(void)
{
	struct world *w = world_init(78, false, 0, 0);
	struct node *n = &w->n[1];
	struct qtcp_conn *c;
	struct iw_tcp_seg syn;
	uint64_t x;
	uint32_t base;

	n->cfg.rcv_buf = 4096;
	n->cfg.ooo_max = 2;
	n->refuse = true;
	n->rx_cap = 1u << 20;
	memset(&syn, 0, sizeof(syn));
	memcpy(syn.smac, mac[0], 6);
	memcpy(syn.dmac, mac[1], 6);
	memcpy(syn.sgid, w->n[0].addr.sgid, 16);
	memcpy(syn.dgid, w->n[0].addr.dgid, 16);
	syn.sport = w->n[0].addr.sport;
	syn.dport = w->n[0].addr.dport;
	syn.seq = edge_irs;
	syn.flags = IW_TCP_SYN;
	syn.window = 0xffff;
	syn.mss = 1460;
	syn.has_wscale = true;
	n->c = c = qtcp_create(&n->cfg, &ops, n);
	CHECK_EQ(qtcp_accept(c, &syn, 500, w->now), 0);
	CHECK_EQ(n->last.window, 4096);
	CHECK_EQ(c->rcv_wscale, 0);
	inject(w, IW_TCP_ACK, edge_irs + 1, 0);
	CHECK_EQ(c->state, QTCP_ESTABLISHED);
	CHECK_EQ(n->connected, 1);

	/* the ring fills: 3000 bytes, then 2000 of which 1096 fit */
	inject(w, IW_TCP_ACK | IW_TCP_PSH, edge_irs + 1, 3000);
	CHECK_EQ(c->rcv_nxt, edge_irs + 3001);
	CHECK_EQ(n->last.ack, edge_irs + 3001);
	CHECK_EQ(n->last.window, 1096);
	inject(w, IW_TCP_ACK, edge_irs + 3001, 2000);
	CHECK_EQ(c->rcv_nxt, edge_irs + 4097);
	CHECK_EQ(n->last.ack, edge_irs + 4097);
	CHECK_EQ(n->last.window, 0);
	/* zero window: data at RCV.NXT trimmed away (its ACK field taken), beyond: dropped;
	 * both answered */
	x = n->xmits;
	inject(w, IW_TCP_ACK, c->rcv_nxt, 100);
	inject(w, IW_TCP_ACK, c->rcv_nxt + 10, 10);
	CHECK_EQ(n->xmits, x + 2);
	CHECK_EQ(c->rcv_nxt, edge_irs + 4097);
	CHECK_EQ(c->stats.out_of_window, 1);
	inject(w, IW_TCP_ACK, c->rcv_nxt, 0);		/* a pure ACK: no answer */
	CHECK_EQ(n->xmits, x + 2);
	/* the consumer takes 1000 bytes: too little to open the window (silly window
	 * avoidance: min(half the ring, one MSS)); 1000 more: the window opens */
	n->refuse = false;
	n->take_max = 1000;
	qtcp_rx_resume(c, w->now);
	CHECK_EQ(n->rx_len, 1000);
	CHECK_EQ(n->xmits, x + 2);
	qtcp_rx_resume(c, w->now);
	CHECK_EQ(n->rx_len, 2000);
	CHECK_EQ(n->xmits, x + 3);
	CHECK_EQ(n->last.window, 2000);
	/* the rest: a window update */
	n->take_max = 0;
	qtcp_rx_resume(c, w->now);
	CHECK_EQ(n->rx_len, 4096);
	CHECK_EQ(n->xmits, x + 4);
	CHECK_EQ(n->last.window, 4096);
	x++;

	/* out of order: two ranges kept, a third dropped, one past the edge trimmed */
	base = c->rcv_nxt;
	inject(w, IW_TCP_ACK, base + 1000, 500);
	CHECK_EQ(c->ooo_n, 1);
	CHECK_EQ(n->xmits, x + 4);			/* a duplicate ACK at once */
	CHECK_EQ(n->last.ack, base);
	inject(w, IW_TCP_ACK, base + 3000, 2000);
	CHECK_EQ(c->ooo_n, 2);
	CHECK_EQ(c->ooo[1].end, base + 4096);
	inject(w, IW_TCP_ACK, base + 2000, 100);
	CHECK_EQ(c->ooo_n, 2);
	CHECK_EQ(c->stats.ooo_dropped, 1);
	inject(w, IW_TCP_ACK, base + 4096, 10);
	CHECK_EQ(c->stats.out_of_window, 2);
	inject(w, IW_TCP_ACK, base + 1400, 200);	/* overlaps the first range */
	CHECK_EQ(c->ooo_n, 2);
	CHECK_EQ(c->ooo[0].start, base + 1000);
	CHECK_EQ(c->ooo[0].end, base + 1600);
	CHECK_EQ(n->rx_len, 4096);
	/* the gap fills: up to the second hole */
	inject(w, IW_TCP_ACK, base, 1000);
	CHECK_EQ(c->rcv_nxt, base + 1600);
	CHECK_EQ(n->rx_len, 4096 + 1600);
	CHECK_EQ(n->last.ack, base + 1600);
	/* overlapping both sides of the second hole */
	inject(w, IW_TCP_ACK, base + 1500, 1600);
	CHECK_EQ(c->rcv_nxt, base + 4096);
	CHECK_EQ(c->ooo_n, 0);
	CHECK_EQ(n->rx_len, 4096 + 4096);
	/* wholly old */
	x = n->xmits;
	inject(w, IW_TCP_ACK, base + 100, 200);
	CHECK_EQ(c->stats.dup_segs, 1);
	CHECK_EQ(n->xmits, x + 1);

	/* a FIN ahead of a gap, then the gap */
	base = c->rcv_nxt;
	inject(w, IW_TCP_ACK | IW_TCP_FIN, base + 50, 10);
	CHECK_EQ(c->state, QTCP_ESTABLISHED);
	CHECK(c->fin_pending);
	CHECK_EQ(n->peer_closed, 0);
	inject(w, IW_TCP_ACK, base, 50);
	CHECK_EQ(c->state, QTCP_CLOSE_WAIT);
	CHECK_EQ(c->rcv_nxt, base + 61);
	CHECK_EQ(n->last.ack, base + 61);
	CHECK_EQ(n->peer_closed, 1);
	CHECK_EQ(n->rx_len, 4096 + 4096 + 60);
	CHECK(!n->rx_bad);
	CHECK(!memcmp(n->rx, pattern[0], n->rx_len));
}

/* Delayed ACKs: one small segment waits for the timer, two full segments do not. */
static void test_delayed_ack(void)
{
	struct world *w = world_init(80, false, 0, 0);
	struct qtcp_conn *a, *b;
	uint64_t x;
	static uint8_t buf[3000];

	w->n[1].cfg.delack_ns = 40 * MS;
	w->n[1].rx_cap = sizeof(buf) + 100;
	establish(w);
	a = w->n[0].c;
	b = w->n[1].c;
	run(w, 1 * MS, NULL);
	x = w->n[1].xmits;
	memcpy(buf, pattern[0], sizeof(buf));
	CHECK_EQ(qtcp_send(a, buf, 100, w->now), 100);
	run(w, 10 * MS, NULL);
	CHECK_EQ(w->n[1].rx_len, 100);
	CHECK_EQ(w->n[1].xmits, x);		/* no ACK yet */
	CHECK(qtcp_next_deadline(b) != UINT64_MAX);
	run(w, 40 * MS, NULL);
	CHECK_EQ(w->n[1].xmits, x + 1);	/* the delayed ACK */
	CHECK_EQ(a->snd_una, a->snd_max);
	x = w->n[1].xmits;
	CHECK_EQ(qtcp_send(a, pattern[0] + 100, 2 * 1460, w->now), 2 * 1460);
	run(w, 1 * MS, NULL);
	CHECK_EQ(w->n[1].xmits, x + 1);	/* at once, for two full segments */
	CHECK_EQ(a->snd_una, a->snd_max);
	CHECK(!w->n[1].rx_bad);
}

/* ---------------------------------------------------------------- fuzz */
/* Invariants that must hold whatever arrives. */
static void check_invariants(const struct qtcp_conn *c)
{
	uint32_t i;

	CHECK(c->ooo_n <= c->cfg.ooo_max);
	CHECK(c->snd_len <= c->cfg.snd_buf);
	CHECK(c->snd_head < c->cfg.snd_buf);
	CHECK(c->rcv_head < c->cfg.rcv_buf);
	if (c->state == QTCP_CLOSED || c->state == QTCP_SYN_SENT ||
	    c->state == QTCP_SYN_RECEIVED)
		return;
	CHECK((uint32_t)(c->rcv_nxt - c->fin_rcvd - c->rcv_head_seq) <= c->cfg.rcv_buf);
	CHECK((int32_t)(c->snd_nxt - c->snd_una) >= 0);
	CHECK((int32_t)(c->snd_max - c->snd_nxt) >= 0);
	CHECK(c->cwnd >= c->mss);
	for (i = 0; i < c->ooo_n; i++) {
		CHECK((int32_t)(c->ooo[i].start - c->rcv_nxt) > 0);
		CHECK((int32_t)(c->ooo[i].end - c->ooo[i].start) > 0);
		CHECK((uint32_t)(c->ooo[i].end - c->rcv_head_seq) <= c->cfg.rcv_buf);
		if (i)
			CHECK((int32_t)(c->ooo[i].start - c->ooo[i - 1].end) > 0);
	}
}

static uint32_t pick_near(uint64_t *r, uint32_t base, uint32_t spread)
{
	return base + (uint32_t)(rng_next(r) % (2 * (uint64_t)spread + 1)) - spread;
}

/*
 * A hostile segment to node @k: random flags, sequence, acknowledgment, window and
 * length, but never what a blind attacker could only guess (TCP is not safe against
 * those): a RST exactly at RCV.NXT, a FIN in the window, an ACK in (SND.UNA, SND.MAX], or
 * data in the window other than the bytes the peer sent there.
 */
static void hostile(struct world *w, int k, uint8_t *data)
{
	struct node *n = &w->n[k], *p = &w->n[k ^ 1];
	struct qtcp_conn *c = n->c;
	uint64_t *r = &w->rng;
	uint32_t room = c->rcv_head_seq + c->cfg.rcv_buf - c->rcv_nxt;
	uint32_t sent = p->c->snd_max - p->c->iss - 1;	/* bytes the peer sent, maybe + FIN */
	uint32_t rcv_off = c->rcv_nxt - c->irs - 1;
	struct iw_tcp_seg s;
	int64_t off, d;
	uint32_t len;

	s = to_conn(w, k, (uint8_t)rng_next(r), 0, 0);
	switch (rng_next(r) % 5) {
	case 0:
		s.seq = (uint32_t)rng_next(r);
		break;
	case 1:
		s.seq = c->rcv_nxt;
		break;
	case 2:
		s.seq = pick_near(r, c->rcv_nxt, 4000);
		break;
	case 3:
		s.seq = pick_near(r, c->rcv_nxt + room, 4000);
		break;
	default:
		s.seq = pick_near(r, c->rcv_nxt, 0x40000000);
		break;
	}
	switch (rng_next(r) % 5) {
	case 0:
		s.ack = (uint32_t)rng_next(r);
		break;
	case 1:
		s.ack = c->snd_una;
		break;
	case 2:
		s.ack = c->snd_max + 1 + (uint32_t)(rng_next(r) % 100000);
		break;
	case 3:
		s.ack = c->snd_una - c->max_snd_wnd - 1 - (uint32_t)(rng_next(r) % 100000);
		break;
	default:
		s.ack = pick_near(r, c->snd_una, 0x40000000);
		break;
	}
	if ((int32_t)(s.ack - c->snd_una) > 0 && (int32_t)(s.ack - c->snd_max) <= 0)
		s.ack = c->snd_una;
	s.window = rng_next(r) & 1 ? (uint16_t)rng_next(r) : (rng_next(r) & 1 ? 0 : 0xffff);
	/* a window from an acceptable ACK ahead of the peer's sequence sticks (SND.WL1):
	 * those only at or before RCV.NXT, with the real window */
	if ((s.flags & IW_TCP_ACK) && s.ack == c->snd_una) {
		s.window = (uint16_t)(c->snd_wnd >> c->snd_wscale);
		s.seq = c->rcv_nxt - (uint32_t)(rng_next(r) % 4000);
	}
	len = rng_next(r) % 3 ? (uint32_t)(rng_next(r) % 1461) : 0;
	d = (int32_t)(s.seq - c->rcv_nxt);
	off = (int64_t)rcv_off + d;
	if (len && off >= 0 && off + len <= sent && off + len <= PAT_LEN) {
		memcpy(data, pattern[k ^ 1] + off, len);	/* what the peer sent there */
	} else {
		memset(data, 0xa5, len);
		/* never garbage where it could be taken */
		if (len && d + (int64_t)len > 0 && d < (int64_t)room + 1)
			len = 0;
	}
	s.payload = data;
	s.payload_len = len;
	if ((s.flags & IW_TCP_FIN) && d + (int64_t)len >= -1 && d + (int64_t)len <= room + 1)
		s.flags &= ~IW_TCP_FIN;
	if ((s.flags & IW_TCP_RST) && s.seq == c->rcv_nxt)
		s.seq++;
	qtcp_input(c, &s, w->now);
}

static void test_fuzz_established(void)
{
	struct world *w = world_init(FUZZ_SEED, false, 2u << 20, 512u << 10);
	static uint8_t data[1500];
	int i, k;

	w->l[0].loss = w->l[1].loss = 10000;
	w->l[0].reorder = w->l[1].reorder = 20000;
	w->n[0].resume_each_step = w->n[1].resume_each_step = true;
	w->n[1].take_random = true;
	establish(w);
	for (i = 0; i < FUZZ_ITERS; i++) {
		k = rng_next(&w->rng) % 4 ? 1 : 0;
		hostile(w, k, data);
		check_invariants(w->n[k].c);
		if (i % 8 == 0)
			step(w, w->now + 10 * SEC);
		if (w->n[0].rx_bad || w->n[1].rx_bad)
			break;
	}
	CHECK(!w->n[0].rx_bad && !w->n[1].rx_bad);
	CHECK_EQ(w->n[0].c->state, QTCP_ESTABLISHED);
	CHECK_EQ(w->n[1].c->state, QTCP_ESTABLISHED);
	CHECK(run(w, 300 * SEC, transfer_done));
	check_transfer(w);
	print_stats("fuzzed A", w->n[0].c);
	print_stats("fuzzed B", w->n[1].c);
	CHECK(w->n[1].c->stats.challenge_acks > 0);
	CHECK(w->n[1].c->stats.out_of_window > 0);
}

/* Anything at all into connections in every state: no crash, the invariants hold. */
static void test_fuzz_states(void)
{
	static uint8_t data[1500];
	int round, i;

	for (round = 0; round < FUZZ_ROUNDS; round++) {
		struct world *w = world_init(FUZZ_SEED + round, round & 1, 20000, 20000);
		int k = round % 2;
		struct qtcp_conn *c;

		w->n[1].listen = true;
		w->n[0].rx_cap = w->n[1].rx_cap = 1u << 20;	/* garbage is fine here */
		connect_node(w, 0);
		/* stop at various points: SYN_SENT, SYN_RECEIVED, ESTABLISHED, closing */
		switch (round % 6) {
		case 0:
			break;
		case 1:
			run(w, 60 * US, NULL);
			break;
		case 2:
			run(w, 5 * MS, NULL);
			break;
		case 3:
			w->n[0].close_when_sent = true;
			run(w, 50 * MS, NULL);
			break;
		case 4:
			w->n[0].close_when_sent = w->n[1].close_when_sent = true;
			run(w, 50 * MS, NULL);
			break;
		default:
			w->n[1].close_when_sent = true;
			run(w, 250 * US, NULL);
			break;
		}
		c = w->n[k].c;
		if (!c)
			continue;
		for (i = 0; i < 5000; i++) {
			struct iw_tcp_seg s = to_conn(w, k, (uint8_t)rng_next(&w->rng),
						      (uint32_t)rng_next(&w->rng),
						      (uint32_t)rng_next(&w->rng));
			uint64_t v = rng_next(&w->rng);

			if (v & 1)
				s.seq = pick_near(&w->rng, c->rcv_nxt, 3000);
			if (v & 2)
				s.ack = pick_near(&w->rng, c->snd_una, 3000);
			if (v & 4)
				s.flags &= ~IW_TCP_RST;
			s.window = (uint16_t)rng_next(&w->rng);
			s.mss = (uint16_t)(v >> 8);
			s.has_wscale = v & 8;
			s.wscale = (uint8_t)(v >> 24) % 15;
			s.payload = data;
			s.payload_len = (uint32_t)(v >> 32) % 1461;
			memset(data, (int)(v >> 40), s.payload_len);
			qtcp_input(c, &s, w->now);
			check_invariants(c);
			if (i % 16 == 0)
				step(w, w->now + 10 * SEC);
		}
		run(w, 1000 * SEC, NULL);
		check_invariants(c);
	}
	world_free(&W);
}

static const struct unit_test tests[] = {
	{ "config", test_config },
	{ "handshake", test_handshake },
	{ "handshake_losses", test_handshake_losses },
	{ "accept_options", test_accept_options },
	{ "bulk", test_bulk },
	{ "lossy", test_lossy },
	{ "rtt_rise", test_rtt_rise },
	{ "wrap", test_wrap },
	{ "rto_fail", test_rto_fail },
	{ "close", test_close },
	{ "time_wait_bounded", test_time_wait_bounded },
	{ "rst", test_rst },
	{ "zero_window", test_zero_window },
	{ "fast_retransmit", test_fast_retransmit },
	{ "window_edges", test_window_edges },
	{ "delayed_ack", test_delayed_ack },
	{ "fuzz_established", test_fuzz_established },
	{ "fuzz_states", test_fuzz_states },
	{}
};

int main(int argc, char **argv)
{
	int r;

	make_patterns();
	r = unit_main(tests, argc, argv);
	world_free(&W);
	free(pattern[0]);
	free(pattern[1]);
	return r;
}
