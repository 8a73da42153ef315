/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * A TCP endpoint (RFC 9293) for the iWARP RNIC: the device terminates TCP itself, as
 * Chelsio's and Intel's RNICs do, and MPA/DDP/RDMAP run on the byte stream it delivers.
 * Standalone and deterministic: no global state, no clock of its own, no randomness.
 *
 * Segments: struct iw_tcp_seg of iwarp.h, parsed (checksums verified) before
 * qtcp_input() and built by the caller from what ops->xmit hands it. The connection is
 * told its addresses once (qtcp_connect()'s template, or the SYN of qtcp_accept()) and
 * checks that every segment it is given carries them.
 *
 * Time: every call takes now_ns (any monotonic clock in nanoseconds); the caller calls
 * qtcp_timer() at or after qtcp_next_deadline() (UINT64_MAX: no deadline).
 *
 * Memory: qtcp_create() makes one allocation of qtcp_footprint() bytes: the connection,
 * a send ring of cfg.snd_buf bytes (unacknowledged and unsent data) and a receive ring of
 * cfg.rcv_buf bytes (in-order bytes the consumer has not taken yet, and out-of-order bytes
 * at their place). Nothing else is ever allocated, so a caller bounds the memory of many
 * connections by their count.
 *
 * Choices (where RFC 9293 leaves one open, or this differs from a host stack):
 * - Out of order: held in the receive ring, at most cfg.ooo_max separate ranges (the
 *   ring bounds their bytes); a segment that would make one more range is dropped.
 *   cfg.ooo_max 0 drops every out-of-order segment. Either way it is answered at once
 *   with a duplicate ACK. A FIN ahead of a gap is remembered and takes effect when the
 *   gap fills.
 * - Receive window: the free room of the receive ring, scaled (RFC 7323, the smallest
 *   shift that fits the ring into 16 bits; our SYN always offers it), with the receiver's
 *   silly window avoidance (RFC 9293 3.8.6.2.2). Segments are accepted up to the ring's
 *   room, which is never less than the window advertised; the right edge may seem to move
 *   back by less than one scale unit (rounding), which senders must tolerate.
 *   qtcp_rx_resume() offers the consumer what it refused before and sends the window
 *   update once the window opened by min(half the ring, one MSS).
 * - Sending: no Nagle (an RNIC sends each FPDU at once); sender silly window avoidance:
 *   a segment shorter than the MSS goes only if it carries all queued data or half the
 *   largest window the peer offered; the persist timer overrides that.
 * - Congestion control: RFC 5681 (initial window cfg.iw_segs, RFC 6928 for 10; byte
 *   counting in slow start, at most one MSS per ACK; restart window after an idle RTO;
 *   the window grows only while it limits what is in flight), limited transmit
 *   (RFC 3042), fast retransmit and NewReno recovery (RFC 6582; a third duplicate ACK
 *   starts recovery if it acknowledges at least "recover", the end of what was sent at
 *   the last recovery or timeout). No SACK, no timestamps, no ECN.
 * - Retransmission timer: RFC 6298 (one timed segment per round trip, Karn's rule,
 *   exponential backoff, cfg.rto_min_ns and cfg.rto_max_ns); after a timeout the send
 *   point goes back to the first unacknowledged byte (go-back-N in slow start). The
 *   backoff ends with the first ACK of new data, as in BSD and lwIP, not only with a new
 *   RTT sample: after a timeout every segment up to snd_max is a retransmission, so
 *   without timestamps Karn's rule may find no sample for a whole window while each loss
 *   doubles the RTO again. cfg.max_retries expiries in a row without progress fail the
 *   connection (RST sent, ops->error). SYN and SYN-ACK: cfg.syn_retries.
 * - snd_nxt is the point the next segment starts at (it moves back after a timeout);
 *   snd_max is RFC 9293's SND.NXT, the end of all that was ever sent: pure ACKs and RSTs
 *   carry it.
 * - Zero window: the persist timer sends a probe of no data at SND.UNA - 1 (answered with
 *   an ACK by every TCP) with backoff up to cfg.rto_max_ns; cfg.max_retries probes
 *   without any answer fail the connection, answered ones never do (a peer that keeps
 *   its window shut keeps the connection: the caller aborts it if it must). A FIN is
 *   sent, and taken, whatever the window.
 * - Delayed ACK: cfg.delack_ns (0: every segment acknowledged at once); an ACK goes at
 *   once for every second full segment, data out of order or filling a gap, a FIN, and
 *   anything not acceptable.
 * - RFC 5961: a RST is taken only at exactly RCV.NXT, elsewhere in the window it draws a
 *   challenge ACK, outside it is dropped; a SYN in a synchronized state draws a challenge
 *   ACK; an ACK older than SND.UNA minus the largest window draws one too. Challenge ACKs
 *   and the ACKs that answer unacceptable segments are limited to cfg.ack_rate a second,
 *   per connection (no shared counter, so no side channel). A RST in TIME_WAIT is
 *   ignored (RFC 1337).
 * - An ACK for data never sent is answered with an ACK and the segment dropped.
 * - Bad flags: SYN with FIN or RST is dropped; URG is ignored (urgent bytes are ordinary
 *   data), so are ECE and CWR.
 * - Close: FIN after all queued data. TIME_WAIT lasts cfg.time_wait_ns (short, bounded);
 *   FIN_WAIT_2 at most cfg.fin_wait2_ns (then a RST and ops->closed). The caller may
 *   destroy a connection in TIME_WAIT at any time.
 * - Passive open: a listener outside the connection sees the SYN (check with qtcp_is_syn())
 *   and calls qtcp_accept(), which answers with a SYN-ACK. Data on a SYN is not taken
 *   (the peer sends it again). Simultaneous open works.
 * - Segments for no connection: qtcp_rst_reply() forms the RST that answers them.
 *
 * Callbacks may call qtcp_send(), qtcp_close(), qtcp_abort() and qtcp_rx_resume() on
 * their own connection (what they send goes out when the outer call finishes), never
 * qtcp_destroy(), qtcp_connect() or qtcp_accept() (those two then fail); ops->xmit must
 * not call into the connection at all. After ops->reset, ops->error or ops->closed the
 * connection is CLOSED: destroy it once the call that reported it returned, or open it
 * again with qtcp_connect() or qtcp_accept().
 */
#ifndef QHCA_TCP_H
#define QHCA_TCP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "iwarp.h"

enum qtcp_state {
	QTCP_CLOSED = 0,
	QTCP_SYN_SENT,
	QTCP_SYN_RECEIVED,
	QTCP_ESTABLISHED,
	QTCP_FIN_WAIT_1,
	QTCP_FIN_WAIT_2,
	QTCP_CLOSE_WAIT,
	QTCP_CLOSING,
	QTCP_LAST_ACK,
	QTCP_TIME_WAIT,
	QTCP_STATE_MAX
};

const char *qtcp_state_name(enum qtcp_state s);

/* Why a connection failed (ops->error). */
enum qtcp_error {
	QTCP_ERR_NONE = 0,
	QTCP_ERR_TIMEOUT,	/* cfg.max_retries retransmission timeouts in a row */
	QTCP_ERR_SYN_TIMEOUT,	/* SYN or SYN-ACK not answered after cfg.syn_retries */
	QTCP_ERR_PROBE_TIMEOUT,	/* zero-window probes not answered */
	QTCP_ERR_MAX
};

const char *qtcp_error_name(enum qtcp_error e);

#define QTCP_OOO_MAX		16	/* cfg.ooo_max at most */
#define QTCP_MIN_MSS		64	/* a peer's MSS below this counts as this */
#define QTCP_MIN_BUF		4096
#define QTCP_MAX_BUF		(1u << 30)
#define QTCP_MIN_MTU		128
#define QTCP_MAX_WSCALE		14
#define QTCP_TW_RESTARTS	4	/* the peer's FIN again restarts TIME_WAIT at most so often */

struct qtcp_config {
	uint32_t snd_buf;	/* send ring bytes */
	uint32_t rcv_buf;	/* receive ring bytes: the largest window */
	uint32_t mtu;		/* path MTU: IP packet bytes (qtcp_set_mtu() changes it) */
	uint32_t ooo_max;	/* out-of-order ranges held, 0..QTCP_OOO_MAX (0: dropped) */
	uint32_t iw_segs;	/* initial congestion window in segments, 0: RFC 3390's */
	uint32_t max_retries;	/* retransmission timeouts in a row before failing */
	uint32_t syn_retries;	/* SYN or SYN-ACK retransmissions before failing */
	uint32_t ack_rate;	/* challenge ACKs and ACKs to bad segments a second */
	uint64_t rto_init_ns, rto_min_ns, rto_max_ns;
	uint64_t delack_ns;	/* delayed ACK timeout; 0: no delayed ACKs */
	uint64_t time_wait_ns;
	uint64_t fin_wait2_ns;	/* 0: FIN_WAIT_2 waits for the peer's FIN forever */
	uint8_t hop_limit;	/* of passively opened connections (IPv4 TTL) */
	uint8_t tclass;		/* of passively opened connections */
};

/* Defaults: 256 KiB rings, MTU 1500, 8 out-of-order ranges, IW10, RTO 1 s initial,
 * 200 ms min, 60 s max, 8 retries, 5 SYN retries, 1000 ACKs/s, no delayed ACK, TIME_WAIT
 * 1 s, FIN_WAIT_2 60 s, hop limit 64. */
void qtcp_config_default(struct qtcp_config *cfg);
/* Is @cfg within bounds? If not, false and the reason in @why. */
bool qtcp_config_check(const struct qtcp_config *cfg, char *why, size_t why_len);
/* Bytes qtcp_create() allocates for @cfg (0 if @cfg is not valid). */
size_t qtcp_footprint(const struct qtcp_config *cfg);

struct qtcp_stats {
	uint64_t segs_in, segs_out;
	uint64_t bytes_sent;		/* new data bytes sent (not retransmissions) */
	uint64_t bytes_acked;		/* data bytes the peer acknowledged */
	uint64_t bytes_delivered;	/* data bytes the consumer took */
	uint64_t retransmits;		/* segments of data, SYN or FIN sent again */
	uint64_t timeouts;		/* retransmission timer expiries */
	uint64_t fast_retransmits;	/* recoveries entered on three duplicate ACKs */
	uint64_t dup_acks;		/* duplicate ACKs received (RFC 5681 definition) */
	uint64_t ooo_segs;		/* data segments received ahead of a gap */
	uint64_t ooo_dropped;		/* of those, not kept */
	uint64_t dup_segs;		/* segments wholly received before */
	uint64_t out_of_window;		/* segments not acceptable (outside the window) */
	uint64_t bad_segs;		/* not for us, bad flags, ACK of unsent data, ... */
	uint64_t challenge_acks;	/* RFC 5961 */
	uint64_t rate_limited;		/* ACKs not sent for cfg.ack_rate */
	uint64_t probes;		/* zero-window probes sent */
};

struct qtcp_ops {
	/* Send @seg (its payload points into the send ring: build or copy it now). */
	void (*xmit)(void *opaque, const struct iw_tcp_seg *seg);
	/* In-order bytes; returns how many it took (the rest is offered again, at the latest
	 * on qtcp_rx_resume()). */
	size_t (*deliver)(void *opaque, const uint8_t *p, size_t n);
	/* The rest may be NULL. */
	void (*connected)(void *opaque);		/* ESTABLISHED */
	void (*acked)(void *opaque, uint32_t n);	/* send ring room freed */
	void (*peer_closed)(void *opaque);		/* FIN: after the last byte delivered */
	void (*closed)(void *opaque);			/* CLOSED after a graceful close */
	void (*reset)(void *opaque);			/* CLOSED by the peer's RST */
	void (*error)(void *opaque, enum qtcp_error err);	/* CLOSED by failure */
};

struct qtcp_range {
	uint32_t start, end;		/* sequence numbers, end exclusive */
};

enum qtcp_timer_kind {
	QTCP_T_RTX,		/* retransmission (SYN, SYN-ACK, data, FIN) */
	QTCP_T_PERSIST,		/* zero-window probe, silly window override */
	QTCP_T_DELACK,
	QTCP_T_CLOSE,		/* TIME_WAIT, FIN_WAIT_2 */
	QTCP_T_MAX
};

/* One connection. Fields are for reading (tests, tracing, the device's view). */
struct qtcp_conn {
	enum qtcp_state state;
	struct qtcp_config cfg;
	const struct qtcp_ops *ops;
	void *opaque;
	struct iw_tcp_seg tmpl;		/* our segments' addresses and ports */
	uint16_t ip_id;

	/* send sequence space */
	uint32_t iss, snd_una, snd_nxt, snd_max;
	uint32_t snd_wnd, max_snd_wnd, snd_wl1, snd_wl2;
	uint8_t snd_wscale, rcv_wscale;	/* both 0 unless both sides sent the option */
	bool wscale_ok;			/* both sides sent it */
	uint32_t peer_mss, mss;		/* mss: of our segments (peer's MSS and the MTU) */
	/* the send ring: data from snd_buf_seq on, snd_len bytes at index snd_head */
	uint8_t *sbuf;
	uint32_t snd_buf_seq, snd_head, snd_len;
	bool fin_queued;		/* qtcp_close(): a FIN follows the data */
	bool syn_rtx;			/* the SYN or SYN-ACK was sent again */

	/* congestion control */
	uint32_t cwnd, ssthresh, ca_acked, recover;
	uint32_t dupacks;
	bool in_recovery, partial_seen;
	uint64_t last_send_ns;

	/* round-trip time, RTO */
	uint64_t srtt, rttvar, rto;	/* ns */
	bool have_rtt;			/* srtt and rttvar hold a measurement */
	bool timing;
	uint32_t rtt_seq;		/* the timed segment is acknowledged by this */
	uint64_t rtt_start;
	uint32_t retries;		/* timeouts in a row */
	uint64_t rto_sent_ns;		/* when the last timeout sent the first segment again */
	uint32_t probes;		/* zero-window probes not answered */
	uint32_t tw_restarts;		/* TIME_WAIT restarted by the peer's FIN again */
	uint32_t persist_shift;		/* backoff of the persist timer */

	/* receive sequence space and the receive ring (rcv_head_seq at index rcv_head) */
	uint32_t irs, rcv_nxt, rcv_adv;	/* rcv_adv: the right edge advertised */
	uint8_t *rbuf;
	uint32_t rcv_head_seq, rcv_head;
	uint32_t rcv_mss;		/* the MSS we advertised */
	struct qtcp_range ooo[QTCP_OOO_MAX];
	uint32_t ooo_n;
	bool fin_rcvd, fin_told, fin_pending;
	uint32_t fin_seq;		/* fin_pending: where the FIN ahead of a gap sits */
	uint32_t unacked_bytes;		/* received since our last ACK */
	bool ack_now;

	uint64_t timer[QTCP_T_MAX];	/* deadlines, UINT64_MAX: off */
	uint64_t rl_start;		/* cfg.ack_rate: this second's start and count */
	uint32_t rl_count;
	uint32_t busy;			/* inside a call: output waits for its end */
	bool in_deliver;
	struct qtcp_stats stats;
};

/* A connection in CLOSED for @cfg, NULL if @cfg is invalid or memory short. */
struct qtcp_conn *qtcp_create(const struct qtcp_config *cfg, const struct qtcp_ops *ops,
			      void *opaque);
void qtcp_destroy(struct qtcp_conn *c);

/*
 * Active open from CLOSED: @tmpl gives the addresses of our segments (smac, dmac, sgid,
 * dgid, ipv6, sport, dport, hop_limit (0: cfg.hop_limit), tclass, flow_label); the SYN
 * goes out with sequence number @isn. Returns 0, or -1 if not CLOSED, inside a callback
 * or the addresses are inconsistent (zero port, a GID not of the address family).
 */
int qtcp_connect(struct qtcp_conn *c, const struct iw_tcp_seg *tmpl, uint32_t isn,
		 uint64_t now_ns);
/* Is @seg a connection request (SYN without ACK, RST, FIN)? */
bool qtcp_is_syn(const struct iw_tcp_seg *seg);
/*
 * Passive open from CLOSED: answer the SYN @syn with a SYN-ACK of sequence number @isn
 * (our segments: hop limit and traffic class from the configuration; c->tmpl may be
 * changed before the next call). Returns 0, or -1 as qtcp_connect(), or if @syn is not a
 * connection request.
 */
int qtcp_accept(struct qtcp_conn *c, const struct iw_tcp_seg *syn, uint32_t isn,
		uint64_t now_ns);

/* A segment for this connection (parsed: checksums good). */
void qtcp_input(struct qtcp_conn *c, const struct iw_tcp_seg *seg, uint64_t now_ns);
/* Call at or after qtcp_next_deadline(). */
void qtcp_timer(struct qtcp_conn *c, uint64_t now_ns);
uint64_t qtcp_next_deadline(const struct qtcp_conn *c);

/* Queue up to @len bytes; returns how many (0 once closing, closed or full). */
size_t qtcp_send(struct qtcp_conn *c, const void *buf, size_t len, uint64_t now_ns);
/* Send ring room: what qtcp_send() would take now. */
size_t qtcp_send_space(const struct qtcp_conn *c);
/* The consumer can take bytes again: deliver what waits, update the window. */
void qtcp_rx_resume(struct qtcp_conn *c, uint64_t now_ns);
/* Graceful close: a FIN after the queued data (RFC 9293 CLOSE). */
void qtcp_close(struct qtcp_conn *c, uint64_t now_ns);
/* Abort: a RST in synchronized states, then CLOSED (no callback). */
void qtcp_abort(struct qtcp_conn *c, uint64_t now_ns);
/* The path MTU changed (IP packet bytes, at least QTCP_MIN_MTU). */
void qtcp_set_mtu(struct qtcp_conn *c, uint32_t mtu);

/*
 * The RST answering @in, a segment for no connection (RFC 9293 3.10.7.1), in @out with
 * the addresses reversed; false if @in is a RST itself (never answered).
 */
bool qtcp_rst_reply(const struct iw_tcp_seg *in, struct iw_tcp_seg *out);

#endif /* QHCA_TCP_H */
