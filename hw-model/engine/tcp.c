// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * A TCP endpoint for the iWARP RNIC: RFC 9293 (the protocol), RFC 7323 (window scale),
 * RFC 5681, 3042, 6582 (congestion control, limited transmit, NewReno), RFC 6298 (the
 * retransmission timer) and RFC 5961 (blind in-window attacks). tcp.h lists the choices.
 * Every segment is hostile: nothing from the wire is trusted beyond what the checks here
 * let through, and a bad segment is dropped (and counted), never asserted on.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tcp.h"

#define NS_PER_MS	1000000ull
#define NS_PER_SEC	1000000000ull
#define TIMER_OFF	UINT64_MAX
#define RTO_G_NS	1000ull		/* clock granularity G of RFC 6298 */
#define CWND_MAX	(1u << 30)
#define SSTHRESH_INIT	(1u << 30)	/* "arbitrarily high" (RFC 5681 3.1) */
#define MSS_DEFAULT_V4	536		/* no MSS option (RFC 9293 3.7.1) */
#define MSS_DEFAULT_V6	1220

/* ---------------------------------------------------------------- sequence numbers */
/* Serial arithmetic (RFC 1982) on 32-bit sequence numbers: every comparison goes here. */
static bool seq_lt(uint32_t a, uint32_t b)
{
	return (int32_t)(a - b) < 0;
}

static bool seq_le(uint32_t a, uint32_t b)
{
	return (int32_t)(a - b) <= 0;
}

static bool seq_gt(uint32_t a, uint32_t b)
{
	return (int32_t)(a - b) > 0;
}

static bool seq_ge(uint32_t a, uint32_t b)
{
	return (int32_t)(a - b) >= 0;
}

static uint32_t min32(uint32_t a, uint32_t b)
{
	return a < b ? a : b;
}

static uint32_t max32(uint32_t a, uint32_t b)
{
	return a > b ? a : b;
}

static uint64_t min64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

/* ---------------------------------------------------------------- names, configuration */
static const char *const state_names[QTCP_STATE_MAX] = {
	[QTCP_CLOSED] = "CLOSED",
	[QTCP_SYN_SENT] = "SYN_SENT",
	[QTCP_SYN_RECEIVED] = "SYN_RECEIVED",
	[QTCP_ESTABLISHED] = "ESTABLISHED",
	[QTCP_FIN_WAIT_1] = "FIN_WAIT_1",
	[QTCP_FIN_WAIT_2] = "FIN_WAIT_2",
	[QTCP_CLOSE_WAIT] = "CLOSE_WAIT",
	[QTCP_CLOSING] = "CLOSING",
	[QTCP_LAST_ACK] = "LAST_ACK",
	[QTCP_TIME_WAIT] = "TIME_WAIT",
};

const char *qtcp_state_name(enum qtcp_state s)
{
	return (unsigned)s < QTCP_STATE_MAX ? state_names[s] : "?";
}

static const char *const error_names[QTCP_ERR_MAX] = {
	[QTCP_ERR_NONE] = "none",
	[QTCP_ERR_TIMEOUT] = "retransmission timeout",
	[QTCP_ERR_SYN_TIMEOUT] = "connection request timeout",
	[QTCP_ERR_PROBE_TIMEOUT] = "zero-window probe timeout",
};

const char *qtcp_error_name(enum qtcp_error e)
{
	return (unsigned)e < QTCP_ERR_MAX ? error_names[e] : "?";
}

void qtcp_config_default(struct qtcp_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->snd_buf = 256u << 10;
	cfg->rcv_buf = 256u << 10;
	cfg->mtu = 1500;
	cfg->ooo_max = 8;
	cfg->iw_segs = 10;
	cfg->max_retries = 8;
	cfg->syn_retries = 5;
	cfg->ack_rate = 1000;
	cfg->rto_init_ns = 1000 * NS_PER_MS;
	cfg->rto_min_ns = 200 * NS_PER_MS;
	cfg->rto_max_ns = 60 * NS_PER_SEC;
	cfg->delack_ns = 0;
	cfg->time_wait_ns = 1 * NS_PER_SEC;
	cfg->fin_wait2_ns = 60 * NS_PER_SEC;
	cfg->hop_limit = 64;
}

#define CFG_FAIL(...)						\
	do {							\
		if (why && why_len)				\
			snprintf(why, why_len, __VA_ARGS__);	\
		return false;					\
	} while (0)

bool qtcp_config_check(const struct qtcp_config *cfg, char *why, size_t why_len)
{
	if (!cfg)
		CFG_FAIL("no configuration");
	if (cfg->snd_buf < QTCP_MIN_BUF || cfg->snd_buf > QTCP_MAX_BUF)
		CFG_FAIL("snd_buf %u not in %u..%u", cfg->snd_buf, QTCP_MIN_BUF, QTCP_MAX_BUF);
	if (cfg->rcv_buf < QTCP_MIN_BUF || cfg->rcv_buf > QTCP_MAX_BUF)
		CFG_FAIL("rcv_buf %u not in %u..%u", cfg->rcv_buf, QTCP_MIN_BUF, QTCP_MAX_BUF);
	if (cfg->mtu < QTCP_MIN_MTU || cfg->mtu > 0xffff)
		CFG_FAIL("mtu %u not in %u..65535", cfg->mtu, QTCP_MIN_MTU);
	if (cfg->ooo_max > QTCP_OOO_MAX)
		CFG_FAIL("ooo_max %u above %u", cfg->ooo_max, QTCP_OOO_MAX);
	if (cfg->iw_segs > 64)
		CFG_FAIL("iw_segs %u above 64", cfg->iw_segs);
	if (!cfg->max_retries || cfg->max_retries > 64)
		CFG_FAIL("max_retries %u not in 1..64", cfg->max_retries);
	if (cfg->syn_retries > 16)
		CFG_FAIL("syn_retries %u above 16", cfg->syn_retries);
	if (!cfg->ack_rate)
		CFG_FAIL("ack_rate 0");
	if (!cfg->rto_min_ns || cfg->rto_min_ns > cfg->rto_init_ns ||
	    cfg->rto_init_ns > cfg->rto_max_ns || cfg->rto_max_ns > 3600 * NS_PER_SEC)
		CFG_FAIL("RTO: 0 < min <= init <= max <= 3600 s does not hold");
	if (cfg->delack_ns > 500 * NS_PER_MS)
		CFG_FAIL("delack_ns above 500 ms");
	if (cfg->time_wait_ns > 240 * NS_PER_SEC)
		CFG_FAIL("time_wait_ns above 240 s");
	if (cfg->fin_wait2_ns > 3600 * NS_PER_SEC)
		CFG_FAIL("fin_wait2_ns above 3600 s");
	if (!cfg->hop_limit)
		CFG_FAIL("hop_limit 0");
	return true;
}

size_t qtcp_footprint(const struct qtcp_config *cfg)
{
	if (!qtcp_config_check(cfg, NULL, 0))
		return 0;
	return sizeof(struct qtcp_conn) + (size_t)cfg->snd_buf + cfg->rcv_buf;
}

/* The smallest window shift that fits the receive ring into the 16-bit window field. */
static uint8_t want_wscale(const struct qtcp_config *cfg)
{
	uint8_t s = 0;

	while ((cfg->rcv_buf >> s) > 0xffff && s < QTCP_MAX_WSCALE)
		s++;
	return s;
}

struct qtcp_conn *qtcp_create(const struct qtcp_config *cfg, const struct qtcp_ops *ops,
			      void *opaque)
{
	struct qtcp_conn *c;
	size_t size = qtcp_footprint(cfg);
	int i;

	if (!size || !ops || !ops->xmit || !ops->deliver)
		return NULL;
	c = calloc(1, size);
	if (!c)
		return NULL;
	c->cfg = *cfg;
	c->ops = ops;
	c->opaque = opaque;
	c->sbuf = (uint8_t *)(c + 1);
	c->rbuf = c->sbuf + cfg->snd_buf;
	for (i = 0; i < QTCP_T_MAX; i++)
		c->timer[i] = TIMER_OFF;
	return c;
}

void qtcp_destroy(struct qtcp_conn *c)
{
	free(c);
}

/* Forget the previous connection's state (the configuration and the rings stay). */
static void conn_reset(struct qtcp_conn *c)
{
	struct qtcp_config cfg = c->cfg;
	const struct qtcp_ops *ops = c->ops;
	void *opaque = c->opaque;
	uint8_t *sbuf = c->sbuf, *rbuf = c->rbuf;
	int i;

	memset(c, 0, sizeof(*c));
	c->cfg = cfg;
	c->ops = ops;
	c->opaque = opaque;
	c->sbuf = sbuf;
	c->rbuf = rbuf;
	for (i = 0; i < QTCP_T_MAX; i++)
		c->timer[i] = TIMER_OFF;
}

/* ---------------------------------------------------------------- timers */
static void timer_set(struct qtcp_conn *c, enum qtcp_timer_kind k, uint64_t at)
{
	c->timer[k] = at;
}

static void timer_off(struct qtcp_conn *c, enum qtcp_timer_kind k)
{
	c->timer[k] = TIMER_OFF;
}

static uint64_t after(uint64_t now, uint64_t d)
{
	return now + d < now || now + d == TIMER_OFF ? TIMER_OFF - 1 : now + d;
}

uint64_t qtcp_next_deadline(const struct qtcp_conn *c)
{
	uint64_t d = TIMER_OFF;
	int i;

	for (i = 0; i < QTCP_T_MAX; i++)
		d = min64(d, c->timer[i]);
	return d;
}

static void to_closed(struct qtcp_conn *c)
{
	int i;

	c->state = QTCP_CLOSED;
	for (i = 0; i < QTCP_T_MAX; i++)
		c->timer[i] = TIMER_OFF;
	c->ack_now = false;
}

/* ---------------------------------------------------------------- sizes and windows */
static uint32_t ip_hlen(const struct qtcp_conn *c)
{
	return c->tmpl.ipv6 ? IW_IPV6_HLEN : IW_IPV4_HLEN;
}

/* The largest segment the path MTU carries (no TCP options on data segments). */
static uint32_t mtu_mss(const struct qtcp_conn *c)
{
	return min32(c->cfg.mtu - ip_hlen(c) - IW_TCP_HLEN, 0xffff);
}

static void update_mss(struct qtcp_conn *c)
{
	c->mss = max32(min32(c->peer_mss, mtu_mss(c)), QTCP_MIN_MSS);
}

static void set_peer_mss(struct qtcp_conn *c, uint16_t mss)
{
	if (!mss)
		mss = c->tmpl.ipv6 ? MSS_DEFAULT_V6 : MSS_DEFAULT_V4;
	c->peer_mss = max32(mss, QTCP_MIN_MSS);
	update_mss(c);
}

static uint32_t initial_cwnd(const struct qtcp_conn *c)
{
	if (c->cfg.iw_segs)
		return c->cfg.iw_segs * c->mss;
	return min32(4 * c->mss, max32(2 * c->mss, 4380));	/* RFC 3390 */
}

/* The last data byte received in order plus one (a received FIN takes a sequence number
 * but no byte of the ring). */
static uint32_t rcv_data_nxt(const struct qtcp_conn *c)
{
	return c->fin_rcvd ? c->rcv_nxt - 1 : c->rcv_nxt;
}

/* Free room of the receive ring past RCV.NXT: what we accept. */
static uint32_t rcv_room(const struct qtcp_conn *c)
{
	uint32_t edge = c->rcv_head_seq + c->cfg.rcv_buf;

	return seq_gt(edge, c->rcv_nxt) ? edge - c->rcv_nxt : 0;
}

/*
 * The window to advertise now, with receiver silly window avoidance (RFC 9293 3.8.6.2.2):
 * the right edge moves only by at least min(half the ring, one MSS). Returns the window
 * in bytes (a multiple of the scale unit) without committing it.
 */
static uint32_t rcv_window_bytes(const struct qtcp_conn *c)
{
	uint8_t s = c->rcv_wscale;
	uint32_t room = min32(rcv_room(c), (uint32_t)0xffff << s);
	uint32_t step = min32(c->cfg.rcv_buf / 2, c->rcv_mss);
	uint32_t edge = c->rcv_nxt + (room >> s << s);

	if (seq_gt(edge, c->rcv_adv) && edge - c->rcv_adv >= step)
		return room >> s << s;
	/* keep the edge advertised before (never past the ring's room) */
	if (!seq_gt(c->rcv_adv, c->rcv_nxt))
		return 0;
	return min32(c->rcv_adv - c->rcv_nxt, room) >> s << s;
}

/* Would an ACK now move the advertised right edge? */
static bool window_update_due(const struct qtcp_conn *c)
{
	return seq_gt(c->rcv_nxt + rcv_window_bytes(c), c->rcv_adv);
}

/* ---------------------------------------------------------------- segments out */
static void emit(struct qtcp_conn *c, uint32_t seq, uint8_t flags, const uint8_t *p,
		 uint32_t len)
{
	struct iw_tcp_seg s = c->tmpl;

	s.seq = seq;
	s.flags = flags;
	s.ip_id = c->ip_id++;
	if (flags & IW_TCP_SYN) {
		/* the window of a SYN is never scaled (RFC 7323 2.2) */
		uint32_t w = min32(c->cfg.rcv_buf, 0xffff);

		s.window = (uint16_t)w;
		s.mss = (uint16_t)c->rcv_mss;
		if (c->state == QTCP_SYN_SENT || c->wscale_ok) {
			s.has_wscale = true;
			s.wscale = want_wscale(&c->cfg);
		}
		if (flags & IW_TCP_ACK) {
			s.ack = c->rcv_nxt;
			if (seq_gt(c->rcv_nxt + w, c->rcv_adv))
				c->rcv_adv = c->rcv_nxt + w;
		}
	} else if (flags & IW_TCP_ACK) {
		uint32_t w = rcv_window_bytes(c);

		s.ack = c->rcv_nxt;
		s.window = (uint16_t)(w >> c->rcv_wscale);
		if (seq_gt(c->rcv_nxt + w, c->rcv_adv))
			c->rcv_adv = c->rcv_nxt + w;
	}
	if (flags & IW_TCP_ACK) {
		c->ack_now = false;
		c->unacked_bytes = 0;
		timer_off(c, QTCP_T_DELACK);
	}
	s.payload = len ? p : NULL;
	s.payload_len = len;
	c->stats.segs_out++;
	c->ops->xmit(c->opaque, &s);
}

static void send_syn(struct qtcp_conn *c)
{
	emit(c, c->iss, c->state == QTCP_SYN_SENT ? IW_TCP_SYN : IW_TCP_SYN | IW_TCP_ACK,
	     NULL, 0);
}

static void send_ack(struct qtcp_conn *c)
{
	emit(c, c->snd_max, IW_TCP_ACK, NULL, 0);
}

static void send_rst(struct qtcp_conn *c)
{
	emit(c, c->snd_max, IW_TCP_RST | IW_TCP_ACK, NULL, 0);
}

/* At most cfg.ack_rate ACKs a second answer bad or unacceptable segments. */
static bool ack_allowed(struct qtcp_conn *c, uint64_t now)
{
	if (now - c->rl_start >= NS_PER_SEC || now < c->rl_start) {
		c->rl_start = now;
		c->rl_count = 0;
	}
	if (c->rl_count >= c->cfg.ack_rate) {
		c->stats.rate_limited++;
		return false;
	}
	c->rl_count++;
	return true;
}

/* An ACK answering an unacceptable segment (sent when the call finishes). */
static void ack_reply(struct qtcp_conn *c, uint64_t now)
{
	if (ack_allowed(c, now))
		c->ack_now = true;
}

static void challenge_ack(struct qtcp_conn *c, uint64_t now)
{
	c->stats.challenge_acks++;
	ack_reply(c, now);
}

static uint32_t sbuf_index(const struct qtcp_conn *c, uint32_t off)
{
	uint32_t i = c->snd_head + off;	/* both below 2^30: no overflow */

	return i >= c->cfg.snd_buf ? i - c->cfg.snd_buf : i;
}

/*
 * One segment from the send ring at @seq: up to @maxlen data bytes (fewer where the ring
 * wraps), and the FIN if it reaches the end of the data after qtcp_close(). Returns the
 * sequence space sent (0: nothing to send there).
 */
static uint32_t send_at(struct qtcp_conn *c, uint32_t seq, uint32_t maxlen)
{
	uint32_t off = seq - c->snd_buf_seq, len = 0, idx = 0;
	uint8_t flags = IW_TCP_ACK;
	bool fin;

	if (off > c->snd_len)
		return 0;
	if (off < c->snd_len) {
		idx = sbuf_index(c, off);
		len = min32(min32(maxlen, c->snd_len - off), c->cfg.snd_buf - idx);
	}
	fin = c->fin_queued && off + len == c->snd_len;
	if (!len && !fin)
		return 0;
	if (fin)
		flags |= IW_TCP_FIN;
	if (len && off + len == c->snd_len)
		flags |= IW_TCP_PSH;
	emit(c, seq, flags, c->sbuf + idx, len);
	return len + fin;
}

/* Send again from SND.UNA, one segment of what was sent before (fast retransmit, partial
 * ACK, timeout); a FIN queued since goes with it. */
static uint32_t retransmit_first(struct qtcp_conn *c, uint64_t now)
{
	uint32_t n = send_at(c, c->snd_una, min32(c->mss, c->snd_max - c->snd_una));

	if (n) {
		if (seq_gt(c->snd_una + n, c->snd_max))
			c->snd_max = c->snd_una + n;
		if (seq_gt(c->snd_una + n, c->snd_nxt))
			c->snd_nxt = c->snd_una + n;
		c->stats.retransmits++;
		c->timing = false;		/* Karn's rule */
		c->last_send_ns = now;
		if (c->timer[QTCP_T_RTX] == TIMER_OFF)
			timer_set(c, QTCP_T_RTX, after(now, c->rto));
	}
	return n;
}

/* Send at snd_nxt and account for it. */
static uint32_t send_next(struct qtcp_conn *c, uint32_t maxlen, uint64_t now)
{
	uint32_t seq = c->snd_nxt, data_end = c->snd_buf_seq + c->snd_len, n;

	n = send_at(c, seq, maxlen);
	if (!n)
		return 0;
	if (seq == c->snd_max) {
		if (!c->timing) {
			c->timing = true;
			c->rtt_seq = seq + n;
			c->rtt_start = now;
		}
		if (seq_lt(seq, data_end))
			c->stats.bytes_sent += min32(n, data_end - seq);
	} else {
		c->stats.retransmits++;
		c->timing = false;
	}
	c->snd_nxt = seq + n;
	if (seq_gt(c->snd_nxt, c->snd_max))
		c->snd_max = c->snd_nxt;
	if (c->timer[QTCP_T_RTX] == TIMER_OFF)
		timer_set(c, QTCP_T_RTX, after(now, c->rto));
	c->last_send_ns = now;
	return n;
}

static bool can_send_data(const struct qtcp_conn *c)
{
	switch (c->state) {
	case QTCP_ESTABLISHED:
	case QTCP_CLOSE_WAIT:
	case QTCP_FIN_WAIT_1:
	case QTCP_CLOSING:
	case QTCP_LAST_ACK:
		return true;
	default:
		return false;
	}
}

static uint64_t persist_interval(const struct qtcp_conn *c)
{
	uint32_t shift = min32(c->persist_shift, 20);

	return min64(c->rto << shift, c->cfg.rto_max_ns);
}

/* Send what the windows allow (no Nagle; sender silly window avoidance). */
static void output(struct qtcp_conn *c, uint64_t now)
{
	uint32_t data_end;

	if (!can_send_data(c))
		return;
	data_end = c->snd_buf_seq + c->snd_len;
	/* restart after an idle RTO (RFC 5681 4.1) */
	if (c->snd_una == c->snd_max && seq_lt(c->snd_nxt, data_end) &&
	    now - c->last_send_ns >= c->rto)
		c->cwnd = min32(c->cwnd, initial_cwnd(c));
	for (;;) {
		uint32_t avail = seq_lt(c->snd_nxt, data_end) ? data_end - c->snd_nxt : 0;
		bool fin_due = c->fin_queued && c->snd_nxt == data_end;
		/* limited transmit (RFC 3042): two more segments on the first duplicate ACKs */
		uint32_t cw = c->cwnd + (c->in_recovery ? 0 : min32(c->dupacks, 2) * c->mss);
		uint32_t lim = c->snd_una + min32(c->snd_wnd, cw);
		uint32_t usable = seq_gt(lim, c->snd_nxt) ? lim - c->snd_nxt : 0;
		uint32_t len = min32(min32(avail, c->mss), usable);

		if (len < avail && len < c->mss && len < c->max_snd_wnd / 2)
			len = 0;		/* silly window: wait for more */
		if (!len && (avail || !fin_due))
			break;
		if (!send_next(c, len, now))
			break;
		if (seq_gt(c->snd_nxt, data_end))
			break;			/* the FIN went */
	}
	/* nothing in flight, data waiting: only the persist timer gets it going again */
	if (c->snd_una == c->snd_max && seq_lt(c->snd_nxt, data_end)) {
		if (c->timer[QTCP_T_PERSIST] == TIMER_OFF)
			timer_set(c, QTCP_T_PERSIST, after(now, persist_interval(c)));
	} else {
		timer_off(c, QTCP_T_PERSIST);
		c->persist_shift = 0;
	}
}

/* At the end of every call: data, or else an ACK that is due. */
static void flush(struct qtcp_conn *c, uint64_t now)
{
	output(c, now);
	if (!c->ack_now)
		return;
	switch (c->state) {
	case QTCP_CLOSED:
	case QTCP_SYN_SENT:
		c->ack_now = false;
		break;
	case QTCP_SYN_RECEIVED:
		send_syn(c);		/* our SYN-ACK again: the peer may not have it */
		c->ack_now = false;
		break;
	default:
		send_ack(c);
		break;
	}
}

static void enter(struct qtcp_conn *c)
{
	c->busy++;
}

static void leave(struct qtcp_conn *c, uint64_t now)
{
	if (--c->busy == 0)
		flush(c, now);
}

/* ---------------------------------------------------------------- endings */
static void fail(struct qtcp_conn *c, enum qtcp_error err)
{
	if (c->state != QTCP_SYN_SENT)
		send_rst(c);
	to_closed(c);
	if (c->ops->error)
		c->ops->error(c->opaque, err);
}

static void got_reset(struct qtcp_conn *c)
{
	to_closed(c);
	if (c->ops->reset)
		c->ops->reset(c->opaque);
}

static void closed_gracefully(struct qtcp_conn *c)
{
	to_closed(c);
	if (c->ops->closed)
		c->ops->closed(c->opaque);
}

static void enter_time_wait(struct qtcp_conn *c, uint64_t now)
{
	c->state = QTCP_TIME_WAIT;
	timer_off(c, QTCP_T_RTX);
	timer_off(c, QTCP_T_PERSIST);
	timer_set(c, QTCP_T_CLOSE, after(now, c->cfg.time_wait_ns));
}

/* ---------------------------------------------------------------- RTT and RTO */
/* RTO from SRTT and RTTVAR (RFC 6298 2.3), within the configured bounds. */
static void rto_update(struct qtcp_conn *c)
{
	uint64_t var = 4 * c->rttvar > RTO_G_NS ? 4 * c->rttvar : RTO_G_NS;

	c->rto = c->have_rtt ? c->srtt + var : c->cfg.rto_init_ns;
	if (c->rto < c->cfg.rto_min_ns)
		c->rto = c->cfg.rto_min_ns;
	if (c->rto > c->cfg.rto_max_ns)
		c->rto = c->cfg.rto_max_ns;
}

static void rtt_sample(struct qtcp_conn *c, uint64_t r)
{
	if (!c->have_rtt) {
		c->srtt = r;
		c->rttvar = r / 2;
		c->have_rtt = true;
	} else {
		uint64_t delta = c->srtt > r ? c->srtt - r : r - c->srtt;

		c->rttvar = (3 * c->rttvar + delta) / 4;
		c->srtt = (7 * c->srtt + r) / 8;
	}
	rto_update(c);
}

static void rto_backoff(struct qtcp_conn *c)
{
	c->rto = c->rto > c->cfg.rto_max_ns / 2 ? c->cfg.rto_max_ns : c->rto * 2;
}

/* ---------------------------------------------------------------- the receive ring */
static void rbuf_advance(struct qtcp_conn *c, uint32_t n)
{
	c->rcv_head_seq += n;
	c->rcv_head += n;
	if (c->rcv_head >= c->cfg.rcv_buf)
		c->rcv_head -= c->cfg.rcv_buf;
	c->stats.bytes_delivered += n;
}

/* Put @len bytes of sequence @seq at their place; the caller checked they fit. */
static void rbuf_write(struct qtcp_conn *c, uint32_t seq, const uint8_t *p, uint32_t len)
{
	uint32_t idx = c->rcv_head + (seq - c->rcv_head_seq), first;

	if (idx >= c->cfg.rcv_buf)
		idx -= c->cfg.rcv_buf;
	first = min32(len, c->cfg.rcv_buf - idx);
	memcpy(c->rbuf + idx, p, first);
	memcpy(c->rbuf, p + first, len - first);
}

static uint32_t deliver(struct qtcp_conn *c, const uint8_t *p, uint32_t n)
{
	size_t took;

	c->in_deliver = true;
	took = c->ops->deliver(c->opaque, p, n);
	c->in_deliver = false;
	return took > n ? n : (uint32_t)took;
}

/* Offer the consumer the in-order bytes waiting in the ring; tell it of the FIN after the
 * last one. */
static void rx_drain(struct qtcp_conn *c)
{
	if (c->in_deliver)
		return;
	while (c->rcv_head_seq != rcv_data_nxt(c)) {
		uint32_t avail = rcv_data_nxt(c) - c->rcv_head_seq;
		uint32_t chunk = min32(avail, c->cfg.rcv_buf - c->rcv_head), n;

		n = deliver(c, c->rbuf + c->rcv_head, chunk);
		rbuf_advance(c, n);
		if (c->state == QTCP_CLOSED || n < chunk)
			return;
	}
	if (c->fin_rcvd && !c->fin_told) {
		c->fin_told = true;
		if (c->ops->peer_closed)
			c->ops->peer_closed(c->opaque);
	}
}

/* Keep out-of-order bytes [seq, seq + len): false if that would take one range too many. */
static bool ooo_insert(struct qtcp_conn *c, uint32_t seq, const uint8_t *p, uint32_t len)
{
	struct qtcp_range r[QTCP_OOO_MAX + 1];
	uint32_t start = seq, end = seq + len, n = 0, i;
	bool placed = false;

	for (i = 0; i < c->ooo_n; i++) {
		const struct qtcp_range *o = &c->ooo[i];

		if (seq_lt(o->end, start)) {
			r[n++] = *o;
		} else if (seq_lt(end, o->start)) {
			if (!placed) {
				r[n++] = (struct qtcp_range){ start, end };
				placed = true;
			}
			r[n++] = *o;
		} else {			/* overlapping or adjacent: one range */
			if (seq_lt(o->start, start))
				start = o->start;
			if (seq_gt(o->end, end))
				end = o->end;
		}
		if (n > c->cfg.ooo_max)
			return false;
	}
	if (!placed)
		r[n++] = (struct qtcp_range){ start, end };
	if (n > c->cfg.ooo_max)
		return false;
	rbuf_write(c, seq, p, len);
	memcpy(c->ooo, r, n * sizeof(r[0]));
	c->ooo_n = n;
	return true;
}

static void fin_arrived(struct qtcp_conn *c, uint64_t now)
{
	c->fin_rcvd = true;
	c->fin_pending = false;
	c->rcv_nxt++;
	c->ack_now = true;
	switch (c->state) {
	case QTCP_ESTABLISHED:
		c->state = QTCP_CLOSE_WAIT;
		break;
	case QTCP_FIN_WAIT_1:
		/* our FIN not acknowledged yet (else we would be in FIN_WAIT_2) */
		c->state = QTCP_CLOSING;
		break;
	case QTCP_FIN_WAIT_2:
		enter_time_wait(c, now);
		break;
	default:
		break;
	}
}

/* In-order data at RCV.NXT: straight to the consumer if nothing waits before it, the rest
 * into the ring; then the out-of-order ranges it joins. */
static void in_order(struct qtcp_conn *c, const uint8_t *p, uint32_t len, uint64_t now)
{
	uint32_t n = 0;
	bool filled = false;

	if (c->rcv_head_seq == c->rcv_nxt && !c->in_deliver) {
		n = deliver(c, p, len);
		rbuf_advance(c, n);
		if (c->state == QTCP_CLOSED)
			return;
	}
	if (n < len)
		rbuf_write(c, c->rcv_nxt + n, p + n, len - n);
	c->rcv_nxt += len;
	while (c->ooo_n && seq_le(c->ooo[0].start, c->rcv_nxt)) {
		if (seq_gt(c->ooo[0].end, c->rcv_nxt))
			c->rcv_nxt = c->ooo[0].end;
		c->ooo_n--;
		memmove(c->ooo, c->ooo + 1, c->ooo_n * sizeof(c->ooo[0]));
		filled = true;
	}
	c->unacked_bytes += len;
	/* at once: (part of) a gap filled, or every second full segment */
	if (filled || c->ooo_n || !c->cfg.delack_ns || c->unacked_bytes >= 2 * c->rcv_mss)
		c->ack_now = true;
	else if (c->timer[QTCP_T_DELACK] == TIMER_OFF)
		timer_set(c, QTCP_T_DELACK, after(now, c->cfg.delack_ns));
}

/* Data and FIN of an acceptable segment, trimmed to the window. */
static void text_input(struct qtcp_conn *c, uint32_t seq, const uint8_t *p, uint32_t len,
		       bool fin, uint64_t now)
{
	if (c->fin_pending) {		/* nothing goes past a FIN seen ahead of a gap */
		if (seq_ge(seq, c->fin_seq)) {
			len = 0;
			fin = seq == c->fin_seq;
		} else if (seq_gt(seq + len, c->fin_seq)) {
			len = c->fin_seq - seq;
			fin = true;
		}
	}
	if (!len && !fin)
		return;
	if (seq != c->rcv_nxt) {
		c->stats.ooo_segs++;
		c->ack_now = true;		/* a duplicate ACK at once */
		if (len && !ooo_insert(c, seq, p, len)) {
			c->stats.ooo_dropped++;
			return;
		}
		if (fin) {
			c->fin_pending = true;
			c->fin_seq = seq + len;
		}
		return;
	}
	if (len) {
		in_order(c, p, len, now);
		if (c->state == QTCP_CLOSED)
			return;
	}
	if (fin || (c->fin_pending && c->rcv_nxt == c->fin_seq))
		fin_arrived(c, now);
	else if (c->fin_pending && seq_gt(c->rcv_nxt, c->fin_seq))
		c->fin_pending = false;
	rx_drain(c);
}

/* ---------------------------------------------------------------- ACK processing */
static void enter_recovery(struct qtcp_conn *c, uint64_t now)
{
	uint32_t flight = c->snd_max - c->snd_una;

	c->ssthresh = max32(flight / 2, 2 * c->mss);
	c->recover = c->snd_max;
	c->in_recovery = true;
	c->partial_seen = false;
	c->stats.fast_retransmits++;
	retransmit_first(c, now);
	c->cwnd = c->ssthresh + 3 * c->mss;
}

static void dup_ack(struct qtcp_conn *c, uint64_t now)
{
	c->stats.dup_acks++;
	c->dupacks++;
	if (c->in_recovery) {
		c->cwnd = min32(c->cwnd + c->mss, CWND_MAX);	/* inflate */
		return;
	}
	if (c->dupacks == 3 && seq_ge(c->snd_una, c->recover))
		enter_recovery(c, now);
}

static void new_ack(struct qtcp_conn *c, uint32_t ack, uint64_t now)
{
	uint32_t acked = ack - c->snd_una, freed = 0;
	/* the window grows only while it was the limit (RFC 7661's idea, simply) */
	bool cwnd_limited = c->snd_max - c->snd_una + c->mss > c->cwnd;
	bool restart = true;

	if (seq_gt(ack, c->snd_buf_seq)) {
		freed = min32(ack - c->snd_buf_seq, c->snd_len);
		c->snd_head = sbuf_index(c, freed);
		c->snd_len -= freed;
		c->snd_buf_seq += freed;
		c->stats.bytes_acked += freed;
	}
	c->snd_una = ack;
	if (seq_lt(c->snd_nxt, ack))
		c->snd_nxt = ack;
	if (c->timing && seq_ge(ack, c->rtt_seq)) {
		if (now >= c->rtt_start)
			rtt_sample(c, now - c->rtt_start);
		c->timing = false;
	} else if (c->retries) {
		/* Progress after a timeout, with no sample: Karn's rule keeps an ACK of a
		 * segment sent twice from being one. The backoff ends here all the same, not at
		 * the next sample as RFC 6298 has it: after a timeout every segment up to
		 * snd_max is sent again, so there may be no sample for a whole window, and each
		 * loss meanwhile would double the RTO again. But the ACK bounds the RTT: at
		 * least the time since the last copy went, whichever copy it answers (unless the
		 * ACK of that copy was lost, and this one came later). Where that bound as a
		 * sample gives a higher RTO than the estimate so far, it is taken: a path that
		 * turned slower than the RTO (a busy host's) lifts the RTO with it, instead of
		 * the RTO coming back down to where every segment times out. (Without TCP
		 * timestamps, which qtcp does not send, nothing tells which copy an ACK
		 * answers.) */
		uint64_t srtt = c->srtt, rttvar = c->rttvar, collapsed;
		bool had_rtt = c->have_rtt;

		rto_update(c);
		collapsed = c->rto;
		if (now >= c->rto_sent_ns) {
			rtt_sample(c, now - c->rto_sent_ns);
			if (c->rto < collapsed) {	/* no news: as it was */
				c->srtt = srtt;
				c->rttvar = rttvar;
				c->have_rtt = had_rtt;
				c->rto = collapsed;
			}
		}
	}
	c->retries = 0;

	if (c->in_recovery) {
		if (seq_ge(ack, c->recover)) {	/* full ACK (RFC 6582 3.2 step 3) */
			uint32_t flight = c->snd_max - c->snd_una;

			c->cwnd = min32(c->ssthresh, max32(flight, c->mss) + c->mss);
			c->in_recovery = false;
		} else {			/* partial ACK: the next hole */
			retransmit_first(c, now);
			c->cwnd = c->cwnd > acked ? c->cwnd - acked : 0;
			if (acked >= c->mss)
				c->cwnd += c->mss;
			c->cwnd = max32(c->cwnd, c->mss);
			restart = !c->partial_seen;
			c->partial_seen = true;
		}
	} else if (!cwnd_limited) {
		c->ca_acked = 0;
	} else if (c->cwnd < c->ssthresh) {
		c->cwnd = min32(c->cwnd + min32(acked, c->mss), CWND_MAX);
	} else {
		c->ca_acked += acked;
		if (c->ca_acked >= c->cwnd) {
			c->ca_acked -= c->cwnd;
			c->cwnd = min32(c->cwnd + c->mss, CWND_MAX);
		}
	}
	c->dupacks = 0;

	if (c->snd_una == c->snd_max)
		timer_off(c, QTCP_T_RTX);
	else if (restart)
		timer_set(c, QTCP_T_RTX, after(now, c->rto));
	if (freed && c->ops->acked)
		c->ops->acked(c->opaque, freed);
}

static bool fin_acked(const struct qtcp_conn *c)
{
	return c->fin_queued && !c->snd_len && c->snd_una == c->snd_buf_seq + 1;
}

/* The ACK field in a synchronized state (RFC 9293 3.10.7.4, fifth step; RFC 5961 5).
 * Returns false if the segment is to be dropped. */
static bool ack_input(struct qtcp_conn *c, const struct iw_tcp_seg *s, uint64_t now)
{
	uint32_t ack = s->ack;
	uint32_t wnd = (uint32_t)s->window << c->snd_wscale;

	if (seq_gt(ack, c->snd_max)) {		/* acknowledges what we never sent */
		c->stats.bad_segs++;
		ack_reply(c, now);
		return false;
	}
	if (seq_lt(ack, c->snd_una - c->max_snd_wnd)) {	/* far too old */
		c->stats.bad_segs++;
		challenge_ack(c, now);
		return false;
	}
	c->probes = 0;				/* the peer is there */
	if (seq_gt(ack, c->snd_una))
		new_ack(c, ack, now);
	else if (ack == c->snd_una && !s->payload_len &&
		 !(s->flags & (IW_TCP_SYN | IW_TCP_FIN)) && wnd == c->snd_wnd &&
		 c->snd_una != c->snd_max)
		dup_ack(c, now);
	if (c->state == QTCP_CLOSED)		/* a callback aborted */
		return false;
	/* the send window, from the newest segment only (SND.WL1, SND.WL2) */
	if (seq_ge(ack, c->snd_una) &&
	    (seq_lt(c->snd_wl1, s->seq) || (c->snd_wl1 == s->seq && seq_le(c->snd_wl2, ack)))) {
		c->snd_wnd = wnd;
		c->max_snd_wnd = max32(c->max_snd_wnd, wnd);
		c->snd_wl1 = s->seq;
		c->snd_wl2 = ack;
	}
	return true;
}

/* ---------------------------------------------------------------- segment arrives */
static bool addr_match(const struct qtcp_conn *c, const struct iw_tcp_seg *s)
{
	return s->sport == c->tmpl.dport && s->dport == c->tmpl.sport &&
	       s->ipv6 == c->tmpl.ipv6 && !memcmp(s->sgid, c->tmpl.dgid, 16) &&
	       !memcmp(s->dgid, c->tmpl.sgid, 16);
}

static void peer_options(struct qtcp_conn *c, const struct iw_tcp_seg *s)
{
	if (s->has_wscale) {
		c->wscale_ok = true;
		c->snd_wscale = s->wscale > QTCP_MAX_WSCALE ? QTCP_MAX_WSCALE : s->wscale;
		c->rcv_wscale = want_wscale(&c->cfg);
	} else {
		c->wscale_ok = false;
		c->snd_wscale = 0;
		c->rcv_wscale = 0;
	}
	set_peer_mss(c, s->mss);
}

/* The handshake completed: the first ACK of our SYN. */
static void established(struct qtcp_conn *c, const struct iw_tcp_seg *s, uint64_t now)
{
	c->snd_una = s->ack;
	c->snd_wnd = (uint32_t)s->window << (c->state == QTCP_SYN_SENT ? 0 : c->snd_wscale);
	c->max_snd_wnd = c->snd_wnd;
	c->snd_wl1 = s->seq;
	c->snd_wl2 = s->ack;
	if (c->timing && !c->syn_rtx && now >= c->rtt_start)
		rtt_sample(c, now - c->rtt_start);
	else if (!c->have_rtt)
		c->rto = c->cfg.rto_init_ns;	/* no backoff from the handshake */
	c->timing = false;
	c->retries = 0;
	timer_off(c, QTCP_T_RTX);
	c->cwnd = c->syn_rtx ? c->mss : initial_cwnd(c);	/* RFC 5681 3.1 */
	c->ssthresh = SSTHRESH_INIT;
	c->recover = c->snd_una;
	c->last_send_ns = now;
	c->state = c->fin_queued ? QTCP_FIN_WAIT_1 : QTCP_ESTABLISHED;
	if (c->ops->connected)
		c->ops->connected(c->opaque);
}

static void syn_sent_input(struct qtcp_conn *c, const struct iw_tcp_seg *s, uint64_t now)
{
	bool ack_ok = false;

	if (s->flags & IW_TCP_ACK) {
		if (seq_le(s->ack, c->iss) || seq_gt(s->ack, c->snd_max)) {
			c->stats.bad_segs++;
			if (!(s->flags & IW_TCP_RST) && ack_allowed(c, now))
				emit(c, s->ack, IW_TCP_RST, NULL, 0);
			return;
		}
		ack_ok = true;
	}
	if (s->flags & IW_TCP_RST) {
		if (ack_ok)
			got_reset(c);		/* refused */
		else
			c->stats.bad_segs++;
		return;
	}
	if (!(s->flags & IW_TCP_SYN)) {
		c->stats.bad_segs++;
		return;
	}
	c->irs = s->seq;
	c->rcv_nxt = s->seq + 1;
	c->rcv_head_seq = c->rcv_nxt;
	c->rcv_adv = c->rcv_nxt + min32(c->cfg.rcv_buf, 0xffff);
	peer_options(c, s);
	if (!ack_ok) {				/* simultaneous open (RFC 9293 3.5) */
		c->state = QTCP_SYN_RECEIVED;
		c->snd_wnd = s->window;
		c->max_snd_wnd = c->snd_wnd;
		c->snd_wl1 = s->seq;
		c->snd_wl2 = c->iss;
		c->timing = false;
		send_syn(c);
		return;
	}
	established(c, s, now);
	if (c->state == QTCP_CLOSED)
		return;
	c->ack_now = true;
	/* data (or a FIN) on the SYN-ACK */
	if (s->payload_len || (s->flags & IW_TCP_FIN)) {
		uint32_t len = min32(s->payload_len, rcv_room(c));

		text_input(c, c->rcv_nxt, s->payload, len,
			   (s->flags & IW_TCP_FIN) && len == s->payload_len, now);
	}
}

/* A RST in a synchronized state (RFC 5961 3.2). */
static void rst_input(struct qtcp_conn *c, uint32_t seq, uint64_t now)
{
	uint32_t wnd = rcv_room(c);

	if (c->state == QTCP_TIME_WAIT)
		return;				/* RFC 1337 */
	if (seq == c->rcv_nxt) {
		got_reset(c);
		return;
	}
	if (seq_gt(seq, c->rcv_nxt) && seq_lt(seq, c->rcv_nxt + wnd))
		challenge_ack(c, now);
	else
		c->stats.out_of_window++;
}

/* RFC 9293 3.10.7.4, first step: does the segment overlap the receive window? A zero
 * window lets a segment at exactly RCV.NXT in for its ACK (its data is then trimmed). */
static bool acceptable(const struct qtcp_conn *c, uint32_t seq, uint32_t seg_len, uint32_t wnd)
{
	if (!wnd)
		return seq == c->rcv_nxt;
	if (!seg_len)
		return seq_ge(seq, c->rcv_nxt) && seq_lt(seq, c->rcv_nxt + wnd);
	return seq_lt(seq, c->rcv_nxt + wnd) && seq_gt(seq + seg_len, c->rcv_nxt);
}

static void sync_input(struct qtcp_conn *c, const struct iw_tcp_seg *s, uint64_t now)
{
	uint32_t seq = s->seq, len = s->payload_len, wnd = rcv_room(c), seg_len;
	const uint8_t *p = s->payload;
	bool syn = s->flags & IW_TCP_SYN, fin = s->flags & IW_TCP_FIN;

	if (c->state == QTCP_SYN_RECEIVED && syn && seq == c->irs) {
		if (!(s->flags & IW_TCP_ACK)) {	/* the SYN again: our SYN-ACK was lost */
			if (!(s->flags & IW_TCP_RST))
				ack_reply(c, now);
			return;
		}
		seq++;				/* a SYN-ACK (simultaneous open): its ACK */
		syn = false;
	}
	seg_len = len + syn + fin;
	if (s->flags & IW_TCP_RST) {
		rst_input(c, seq, now);
		return;
	}
	if (!acceptable(c, seq, seg_len, wnd)) {
		if (seg_len && seq_le(seq + seg_len, c->rcv_nxt))
			c->stats.dup_segs++;
		else
			c->stats.out_of_window++;
		/* The FIN again, exactly: our ACK was lost. Only so often: a blind FIN of any
		 * sequence number must not hold TIME_WAIT (and its buffers) for ever. */
		if (c->state == QTCP_TIME_WAIT && fin && seq + seg_len == c->rcv_nxt &&
		    c->tw_restarts < QTCP_TW_RESTARTS) {
			c->tw_restarts++;
			timer_set(c, QTCP_T_CLOSE, after(now, c->cfg.time_wait_ns));
		}
		ack_reply(c, now);
		return;
	}
	if (syn) {				/* RFC 5961 4.2 */
		c->stats.bad_segs++;
		challenge_ack(c, now);
		return;
	}
	if (!(s->flags & IW_TCP_ACK)) {
		c->stats.bad_segs++;
		return;
	}
	if (c->state == QTCP_SYN_RECEIVED) {
		if (seq_le(s->ack, c->snd_una) || seq_gt(s->ack, c->snd_max)) {
			c->stats.bad_segs++;
			if (ack_allowed(c, now))
				emit(c, s->ack, IW_TCP_RST, NULL, 0);
			return;
		}
		established(c, s, now);
		if (c->state == QTCP_CLOSED)
			return;
	}
	if (!ack_input(c, s, now))
		return;
	switch (c->state) {
	case QTCP_FIN_WAIT_1:
		if (fin_acked(c)) {
			c->state = QTCP_FIN_WAIT_2;
			if (c->cfg.fin_wait2_ns)
				timer_set(c, QTCP_T_CLOSE, after(now, c->cfg.fin_wait2_ns));
		}
		break;
	case QTCP_CLOSING:
		if (fin_acked(c))
			enter_time_wait(c, now);
		break;
	case QTCP_LAST_ACK:
		if (fin_acked(c))
			closed_gracefully(c);
		return;
	case QTCP_ESTABLISHED:
	case QTCP_FIN_WAIT_2:
		break;
	default:
		return;				/* the FIN came before: no more data */
	}
	if (c->state != QTCP_ESTABLISHED && c->state != QTCP_FIN_WAIT_1 &&
	    c->state != QTCP_FIN_WAIT_2)
		return;

	/* trim what came before (duplicates) and what is past the ring's room */
	if (seq_lt(seq, c->rcv_nxt)) {
		uint32_t cut = min32(c->rcv_nxt - seq, len);

		p += cut;
		len -= cut;
		seq += cut;
		if (seq_lt(seq, c->rcv_nxt))	/* the FIN too was old */
			fin = false;
		c->ack_now = true;
	}
	wnd = rcv_room(c);
	if (len > wnd - (seq - c->rcv_nxt)) {
		len = wnd - (seq - c->rcv_nxt);
		fin = false;
		c->ack_now = true;
	}
	text_input(c, seq, p, len, fin, now);
}

void qtcp_input(struct qtcp_conn *c, const struct iw_tcp_seg *s, uint64_t now_ns)
{
	if (!c || !s)
		return;
	enter(c);
	c->stats.segs_in++;
	if (c->state == QTCP_CLOSED || !addr_match(c, s) || (s->payload_len && !s->payload) ||
	    ((s->flags & IW_TCP_SYN) && (s->flags & (IW_TCP_FIN | IW_TCP_RST)))) {
		c->stats.bad_segs++;
	} else if (c->state == QTCP_SYN_SENT) {
		syn_sent_input(c, s, now_ns);
	} else {
		sync_input(c, s, now_ns);
	}
	leave(c, now_ns);
}

/* ---------------------------------------------------------------- timers */
static void rtx_timeout(struct qtcp_conn *c, uint64_t now)
{
	c->stats.timeouts++;
	if (c->state == QTCP_SYN_SENT || c->state == QTCP_SYN_RECEIVED) {
		if (++c->retries > c->cfg.syn_retries) {
			fail(c, QTCP_ERR_SYN_TIMEOUT);
			return;
		}
		c->syn_rtx = true;
		c->timing = false;
		rto_backoff(c);
		send_syn(c);
		c->stats.retransmits++;
		timer_set(c, QTCP_T_RTX, after(now, c->rto));
		return;
	}
	if (!can_send_data(c) || c->snd_una == c->snd_max)
		return;
	if (++c->retries > c->cfg.max_retries) {
		fail(c, QTCP_ERR_TIMEOUT);
		return;
	}
	/* RFC 5681 3.1 (ssthresh kept when a retransmission is lost again), RFC 6298 5.5 */
	if (c->retries == 1)
		c->ssthresh = max32((c->snd_max - c->snd_una) / 2, 2 * c->mss);
	c->cwnd = c->mss;
	c->ca_acked = 0;
	c->recover = c->snd_max;
	c->in_recovery = false;
	c->dupacks = 0;
	c->timing = false;
	rto_backoff(c);
	/* go back: the first segment now, whatever the peer's window; the rest as ACKs come */
	c->snd_nxt = c->snd_una;
	retransmit_first(c, now);
	c->rto_sent_ns = now;
	timer_set(c, QTCP_T_RTX, after(now, c->rto));
}

static void persist_timeout(struct qtcp_conn *c, uint64_t now)
{
	uint32_t data_end = c->snd_buf_seq + c->snd_len;

	if (!can_send_data(c) || c->snd_una != c->snd_max || !seq_lt(c->snd_nxt, data_end))
		return;
	if (!c->snd_wnd) {
		if (++c->probes > c->cfg.max_retries) {
			fail(c, QTCP_ERR_PROBE_TIMEOUT);
			return;
		}
		/* a probe without data below the window: every TCP answers it with an ACK */
		emit(c, c->snd_una - 1, IW_TCP_ACK, NULL, 0);
		c->stats.probes++;
	} else {
		/* a window too small to fill: send what fits (silly window override) */
		send_next(c, min32(min32(data_end - c->snd_nxt, c->mss), c->snd_wnd), now);
	}
	c->persist_shift++;
	if (c->snd_una == c->snd_max)
		timer_set(c, QTCP_T_PERSIST, after(now, persist_interval(c)));
}

static void close_timeout(struct qtcp_conn *c)
{
	if (c->state == QTCP_TIME_WAIT) {
		closed_gracefully(c);
	} else if (c->state == QTCP_FIN_WAIT_2) {
		send_rst(c);			/* the peer never closed its side */
		closed_gracefully(c);
	}
}

void qtcp_timer(struct qtcp_conn *c, uint64_t now_ns)
{
	enter(c);
	if (c->timer[QTCP_T_RTX] <= now_ns) {
		timer_off(c, QTCP_T_RTX);
		rtx_timeout(c, now_ns);
	}
	if (c->timer[QTCP_T_PERSIST] <= now_ns) {
		timer_off(c, QTCP_T_PERSIST);
		persist_timeout(c, now_ns);
	}
	if (c->timer[QTCP_T_DELACK] <= now_ns) {
		timer_off(c, QTCP_T_DELACK);
		if (c->unacked_bytes)
			c->ack_now = true;
	}
	if (c->timer[QTCP_T_CLOSE] <= now_ns) {
		timer_off(c, QTCP_T_CLOSE);
		close_timeout(c);
	}
	leave(c, now_ns);
}

/* ---------------------------------------------------------------- opening */
static bool gid_is_v4(const uint8_t *g)
{
	static const uint8_t prefix[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

	return !memcmp(g, prefix, sizeof(prefix));
}

static bool addr_valid(const struct iw_tcp_seg *s)
{
	return s->sport && s->dport && gid_is_v4(s->sgid) != s->ipv6 &&
	       gid_is_v4(s->dgid) != s->ipv6;
}

/* What both kinds of open set up once the addresses are known. */
static void open_common(struct qtcp_conn *c, uint32_t isn, uint64_t now)
{
	c->ip_id = (uint16_t)isn;
	c->iss = isn;
	c->snd_una = isn;
	c->snd_nxt = isn + 1;
	c->snd_max = isn + 1;
	c->snd_buf_seq = isn + 1;
	c->recover = isn;
	c->rcv_mss = mtu_mss(c);
	c->rto = c->cfg.rto_init_ns;
	c->ssthresh = SSTHRESH_INIT;
	c->timing = true;
	c->rtt_seq = isn + 1;
	c->rtt_start = now;
	c->last_send_ns = now;
	c->rl_start = now;
}

int qtcp_connect(struct qtcp_conn *c, const struct iw_tcp_seg *tmpl, uint32_t isn,
		 uint64_t now_ns)
{
	if (!c || !tmpl || c->state != QTCP_CLOSED || c->busy || !addr_valid(tmpl))
		return -1;
	conn_reset(c);
	memcpy(c->tmpl.dmac, tmpl->dmac, 6);
	memcpy(c->tmpl.smac, tmpl->smac, 6);
	memcpy(c->tmpl.sgid, tmpl->sgid, 16);
	memcpy(c->tmpl.dgid, tmpl->dgid, 16);
	c->tmpl.ipv6 = tmpl->ipv6;
	c->tmpl.hop_limit = tmpl->hop_limit ? tmpl->hop_limit : c->cfg.hop_limit;
	c->tmpl.tclass = tmpl->tclass;
	c->tmpl.flow_label = tmpl->flow_label & 0xfffff;
	c->tmpl.sport = tmpl->sport;
	c->tmpl.dport = tmpl->dport;
	open_common(c, isn, now_ns);
	c->rcv_wscale = want_wscale(&c->cfg);	/* offered; kept if the peer offers too */
	set_peer_mss(c, 0);
	c->state = QTCP_SYN_SENT;
	send_syn(c);
	timer_set(c, QTCP_T_RTX, after(now_ns, c->rto));
	return 0;
}

bool qtcp_is_syn(const struct iw_tcp_seg *s)
{
	return s && (s->flags & (IW_TCP_SYN | IW_TCP_ACK | IW_TCP_RST | IW_TCP_FIN)) ==
		    IW_TCP_SYN;
}

int qtcp_accept(struct qtcp_conn *c, const struct iw_tcp_seg *syn, uint32_t isn,
		uint64_t now_ns)
{
	if (!c || c->state != QTCP_CLOSED || c->busy || !qtcp_is_syn(syn) ||
	    !addr_valid(syn))
		return -1;
	conn_reset(c);
	memcpy(c->tmpl.dmac, syn->smac, 6);
	memcpy(c->tmpl.smac, syn->dmac, 6);
	memcpy(c->tmpl.sgid, syn->dgid, 16);
	memcpy(c->tmpl.dgid, syn->sgid, 16);
	c->tmpl.ipv6 = syn->ipv6;
	c->tmpl.hop_limit = c->cfg.hop_limit;
	c->tmpl.tclass = c->cfg.tclass;
	c->tmpl.sport = syn->dport;
	c->tmpl.dport = syn->sport;
	c->stats.segs_in++;
	open_common(c, isn, now_ns);
	c->irs = syn->seq;
	c->rcv_nxt = syn->seq + 1;
	c->rcv_head_seq = c->rcv_nxt;
	c->rcv_adv = c->rcv_nxt;
	peer_options(c, syn);
	c->snd_wnd = syn->window;		/* never scaled on a SYN */
	c->max_snd_wnd = c->snd_wnd;
	c->snd_wl1 = syn->seq;
	c->snd_wl2 = isn;
	c->state = QTCP_SYN_RECEIVED;
	send_syn(c);
	timer_set(c, QTCP_T_RTX, after(now_ns, c->rto));
	return 0;
}

/* ---------------------------------------------------------------- the user's calls */
size_t qtcp_send_space(const struct qtcp_conn *c)
{
	switch (c->state) {
	case QTCP_SYN_SENT:
	case QTCP_SYN_RECEIVED:
	case QTCP_ESTABLISHED:
	case QTCP_CLOSE_WAIT:
		return c->fin_queued ? 0 : c->cfg.snd_buf - c->snd_len;
	default:
		return 0;
	}
}

size_t qtcp_send(struct qtcp_conn *c, const void *buf, size_t len, uint64_t now_ns)
{
	uint32_t n, idx, first;

	if (!c || (!buf && len))
		return 0;
	n = (uint32_t)(len < qtcp_send_space(c) ? len : qtcp_send_space(c));
	if (!n)
		return 0;
	idx = sbuf_index(c, c->snd_len);
	first = min32(n, c->cfg.snd_buf - idx);
	memcpy(c->sbuf + idx, buf, first);
	memcpy(c->sbuf, (const uint8_t *)buf + first, n - first);
	c->snd_len += n;
	enter(c);
	leave(c, now_ns);
	return n;
}

void qtcp_rx_resume(struct qtcp_conn *c, uint64_t now_ns)
{
	if (!c || c->in_deliver)
		return;
	enter(c);
	switch (c->state) {
	case QTCP_ESTABLISHED:
	case QTCP_FIN_WAIT_1:
	case QTCP_FIN_WAIT_2:
	case QTCP_CLOSE_WAIT:
	case QTCP_CLOSING:
	case QTCP_LAST_ACK:
	case QTCP_TIME_WAIT:
		rx_drain(c);
		if (c->state != QTCP_CLOSED && !c->fin_rcvd && window_update_due(c))
			c->ack_now = true;
		break;
	default:
		break;
	}
	leave(c, now_ns);
}

void qtcp_close(struct qtcp_conn *c, uint64_t now_ns)
{
	if (!c)
		return;
	enter(c);
	switch (c->state) {
	case QTCP_SYN_SENT:
		to_closed(c);
		break;
	case QTCP_SYN_RECEIVED:		/* the FIN follows once established */
		c->fin_queued = true;
		break;
	case QTCP_ESTABLISHED:
		c->fin_queued = true;
		c->state = QTCP_FIN_WAIT_1;
		break;
	case QTCP_CLOSE_WAIT:
		c->fin_queued = true;
		c->state = QTCP_LAST_ACK;
		break;
	default:
		break;
	}
	leave(c, now_ns);
}

void qtcp_abort(struct qtcp_conn *c, uint64_t now_ns)
{
	if (!c)
		return;
	switch (c->state) {
	case QTCP_SYN_RECEIVED:
	case QTCP_ESTABLISHED:
	case QTCP_FIN_WAIT_1:
	case QTCP_FIN_WAIT_2:
	case QTCP_CLOSE_WAIT:
		send_rst(c);
		break;
	default:
		break;
	}
	to_closed(c);
}

void qtcp_set_mtu(struct qtcp_conn *c, uint32_t mtu)
{
	if (!c)
		return;
	c->cfg.mtu = mtu < QTCP_MIN_MTU ? QTCP_MIN_MTU : mtu > 0xffff ? 0xffff : mtu;
	if (c->peer_mss)
		update_mss(c);
}

bool qtcp_rst_reply(const struct iw_tcp_seg *in, struct iw_tcp_seg *out)
{
	if (!in || !out || (in->flags & IW_TCP_RST))
		return false;
	memset(out, 0, sizeof(*out));
	memcpy(out->dmac, in->smac, 6);
	memcpy(out->smac, in->dmac, 6);
	memcpy(out->sgid, in->dgid, 16);
	memcpy(out->dgid, in->sgid, 16);
	out->ipv6 = in->ipv6;
	out->hop_limit = 64;
	out->sport = in->dport;
	out->dport = in->sport;
	if (in->flags & IW_TCP_ACK) {
		out->seq = in->ack;
		out->flags = IW_TCP_RST;
	} else {
		out->ack = in->seq + in->payload_len + !!(in->flags & IW_TCP_SYN) +
			   !!(in->flags & IW_TCP_FIN);
		out->flags = IW_TCP_RST | IW_TCP_ACK;
	}
	return true;
}
