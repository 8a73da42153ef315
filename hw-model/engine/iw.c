// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The iWARP port's connections (link=iwarp): TCP that the device terminates (tcp.c), MPA's
 * connection set-up (RFC 5044 with RFC 6581, iwarp.c), and the admin commands and events
 * by which the driver runs them for iw_cm (QHCA_CMD_IW_*, QHCA_EVENT_IW_*).
 *
 * A connection is a slot of a table of QHCA_IW_MAX_CONN, its handle the table's (with the
 * slot's generation), found from a received segment by its 4-tuple through a hash of
 * chains. Listeners are a small table of their own. Every frame that is not a TCP segment
 * of one of our connections, or a SYN to one of our listeners, is the netdev's: the guest's
 * own TCP shares the address (the port mapper keeps the ports apart).
 *
 * Life of a connection:
 *   active:  IW_CONNECT -> SYN ... ESTABLISHED -> MPA request sent -> MPA reply in ->
 *            CONNECT_REPLY event (accepted: RTS; rejected: closed)
 *   passive: SYN to a listener -> SYN-ACK ... -> MPA request in -> CONNECT_REQUEST event ->
 *            IW_ACCEPT (MPA reply, RTS) or IW_REJECT (reply with R set, FIN)
 *   then:    FIN from the peer -> DISCONNECTED; IW_DISCONNECT -> FIN or RST; CLOSED
 *            event once TCP is done, and the handle is free.
 * Not yet here: migration of connections.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_internal.h"
#include "iw.h"

#define IW_HASH		1024u	/* chains of the 4-tuple hash (a power of two) */
#define IW_MPA_BUF	IW_MPA_RR_MAX
/* Our FPDUs carry at most this much (e->payload's size): one Ethernet MSS makes less. */
#define IW_MAX_ULP_PAYLOAD	4096u
#define IW_TXBUF	(IW_MAX_ULP_PAYLOAD + 128)
/* The largest FPDU taken from a peer (siw sends one per MSS); a bigger one ends the
 * connection (MPA without markers cannot skip it). */
#define IW_RX_FPDU_MAX	(16384u + 64)
/* Passive connections not yet accepted or rejected, all listeners together: a SYN flood
 * takes no more (each holds TCP's rings until it goes). */
#define IW_MAX_HALF_OPEN	128
/* How long the peer has for its MPA request or reply (siw: 10 s as well). */
#define IW_MPA_TIMEOUT_NS	10000000000ull
/* A passive connection's request waits this long for the driver's ACCEPT or REJECT (as an
 * RNIC's MPA_REQ_RCVD timer): a lost event holds no backlog for ever. */
#define IW_ANSWER_TIMEOUT_NS	60000000000ull
/* A responder sends no FPDU before the initiator's first (RFC 5044 7.1; RFC 6581 exists
 * because of it), or until this long after its MPA reply: applications whose server speaks
 * first (ucmatose) run against initiators that send no RTR (siw by default), and siw as the
 * initiator refuses FPDUs that come before it has taken the reply ("extra data"). */
#define IW_RESPONDER_HOLD_NS	200000000ull
/* A connection that is closing (a FIN or Terminate of ours queued) is reset after this:
 * a peer that acknowledges nothing but zero-window probes holds it no longer, nor the
 * destroy of a QP that iw_cm holds until its CLOSE. */
#define IW_CLOSE_TIMEOUT_NS	10000000000ull

enum iwc_state {
	IWC_FREE = 0,
	IWC_TCP,		/* TCP's handshake under way */
	IWC_MPA_WAIT,		/* active: request sent, reply awaited; passive: request awaited */
	IWC_REQ_PENDING,	/* passive: the driver was told, ACCEPT or REJECT awaited */
	IWC_RTS,		/* RDMA mode */
	IWC_CLOSING,		/* FIN or RST sent or received: TCP winds down */
	IWC_CLOSED,		/* TCP is done, CLOSED told: the handle is the driver's until
				 * it releases it (IW_DISCONNECT), so that it can still query */
};

struct iw_conn {
	uint32_t handle;
	enum iwc_state state;
	bool active;
	bool peer_closed;	/* DISCONNECTED was told */
	struct qhca_engine *e;
	struct qtcp_conn *tcp;
	uint32_t listener;	/* passive: its listener's handle */
	uint32_t qpn;
	uint32_t hnext;		/* hash chain: next slot + 1, 0 ends it */
	uint8_t status;		/* QHCA_IW_ST_* of the end, for the CLOSED event */
	uint16_t ird, ord;	/* ours */
	bool p2p;
	bool peer_enhanced;	/* its MPA frame had RFC 6581's IRD/ORD */
	bool announced;		/* the driver knows its handle: it gets a CLOSED event */
	bool pending;		/* passive, counted in its listener's pending and half_open */
	bool gone;		/* conn_gone ran: its status is kept */
	bool replied;		/* active: the peer's reply came (peer holds it) */
	bool looped;		/* to the port itself: its segments only ever loop back */
	uint32_t live_idx;	/* its place in qhca_iw.live */
	uint64_t mpa_deadline;	/* waiting for the peer's MPA frame, or the driver's answer */
	struct iw_tcp_seg tmpl;	/* the 4-tuple and MACs, kept once TCP is gone (CLOSED) */
	uint64_t close_deadline;	/* closing: reset at this time (IW_CLOSE_TIMEOUT_NS) */
	/* what the peer's request or reply said, and its private data */
	struct qhca_iw_conn peer;
	uint8_t mpa[IW_MPA_BUF];	/* the request or reply as it arrives */
	uint32_t mpa_len;
	/* RDMA mode (the datapath) */
	uint32_t send_msn, read_msn;	/* MSNs of our next SEND and READ request */
	uint32_t rx_send_msn, rx_read_msn;	/* the ones the peer's must have */
	struct iw_rresp {		/* a Read Request to answer (IRD of them at most) */
		uint32_t sink_stag, src_stag, size, off;
		uint64_t sink_to, src_to;
	} rr[QHCA_MAX_RD_ATOMIC];
	uint32_t rr_head, rr_n;
	bool terminated;		/* a Terminate sent or received: nothing more */
	bool tx_hold;			/* responder: nothing sent yet (IW_RESPONDER_HOLD_NS) */
	uint8_t *fbuf;			/* the FPDU extractor's gathering buffer */
	struct iw_fpdu_rx frx;
};

struct iw_listener {
	uint32_t handle;	/* 0: free */
	uint8_t addr[16];
	uint16_t port;
	uint16_t backlog, pending;
	bool v6only;		/* addr :: covers IPv6 addresses only */
};

struct qhca_iw {
	struct qhca_obj_table conn_table;
	struct iw_conn *conn;		/* QHCA_IW_MAX_CONN slots */
	uint32_t hash[IW_HASH];		/* slot + 1 */
	struct qhca_obj_table lsn_table;
	struct iw_listener lsn[QHCA_IW_MAX_LISTEN];
	struct qtcp_config tcfg;
	uint32_t live[QHCA_IW_MAX_CONN];	/* the slots in use: timers and reaping walk
						 * these, not the whole table */
	uint32_t nlive;
	uint32_t half_open;		/* passive connections not yet accepted, all listeners */
	bool reap_due;			/* a connection may be CLOSED: the timer reaps it now */
	uint64_t gone_retransmits;	/* TCP's of the connections already freed */
	uint64_t gone_timeouts;
	struct qhca_iw_conn scratch;	/* a command's argument or answer (admin.c) */
	uint8_t txbuf[IW_TXBUF];	/* one FPDU being built */
};

static const uint8_t zero_addr[16];

/* The datapath (below the connections' callbacks that feed it) */
static bool tcp_queue(struct iw_conn *c, const uint8_t *buf, size_t n);
static bool rdma_mode(struct iw_conn *c, struct qhca_qp *qp);
static size_t rx_stream(struct iw_conn *c, const uint8_t *data, size_t n);
static void tcp_acked(void *opaque, uint32_t n);
static void reap(struct qhca_engine *e);
static struct qhca_qp *qp_of(struct iw_conn *c);
static void req_run(struct iw_conn *c, struct qhca_qp *qp);

/* ---------------------------------------------------------------- lookup */
static uint32_t tuple_hash(const uint8_t *laddr, uint16_t lport, const uint8_t *raddr,
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

/* The connection's addresses: TCP's, or the copy kept after its TCP went at CLOSED. */
static const struct iw_tcp_seg *conn_tmpl(const struct iw_conn *c)
{
	return c->tcp ? &c->tcp->tmpl : &c->tmpl;
}

static uint32_t conn_hash(const struct iw_conn *c)
{
	const struct iw_tcp_seg *t = conn_tmpl(c);

	return tuple_hash(t->sgid, t->sport, t->dgid, t->dport);
}

static void hash_add(struct qhca_iw *iw, struct iw_conn *c)
{
	uint32_t b = conn_hash(c);

	c->hnext = iw->hash[b];
	iw->hash[b] = (uint32_t)(c - iw->conn) + 1;
}

static void hash_del(struct qhca_iw *iw, struct iw_conn *c)
{
	uint32_t *at = &iw->hash[conn_hash(c)], me = (uint32_t)(c - iw->conn) + 1;

	while (*at && *at != me)
		at = &iw->conn[*at - 1].hnext;
	if (*at)
		*at = c->hnext;
	c->hnext = 0;
}

/* The connection a segment @s (as received) belongs to, or NULL: one of ours to ourselves
 * if @looped (the segment looped back inside the device), one on the wire if not. The two
 * never meet, and one 4-tuple may be in use by one of each. */
static struct iw_conn *conn_of_seg(struct qhca_iw *iw, const struct iw_tcp_seg *s, bool looped)
{
	uint32_t i = iw->hash[tuple_hash(s->dgid, s->dport, s->sgid, s->sport)];

	while (i) {
		struct iw_conn *c = &iw->conn[i - 1];
		const struct iw_tcp_seg *t = &c->tcp->tmpl;

		if (t->sport == s->dport && t->dport == s->sport && !memcmp(t->sgid, s->dgid, 16) &&
		    !memcmp(t->dgid, s->sgid, 16) && c->looped == looped)
			return c;
		i = c->hnext;
	}
	return NULL;
}

static struct iw_conn *conn_find(struct qhca_engine *e, uint32_t handle)
{
	int64_t i = qhca_obj_lookup(&e->iw->conn_table, handle);

	return i < 0 ? NULL : &e->iw->conn[i];
}

static const uint8_t v4_any[16] = { [10] = 0xff, [11] = 0xff };	/* ::ffff:0.0.0.0 */

static bool addr_is_v4(const uint8_t a[16])
{
	return !memcmp(a, v4_any, 12);
}

/* What a listener's address covers, as a TCP socket's (abi: struct qhca_iw_listen). */
enum lsn_kind { LSN_ONE, LSN_V4_ANY, LSN_V6_ANY, LSN_ANY };

static enum lsn_kind lsn_kind(const uint8_t addr[16], bool v6only)
{
	if (!memcmp(addr, v4_any, 16))
		return LSN_V4_ANY;
	if (!memcmp(addr, zero_addr, 16))
		return v6only ? LSN_V6_ANY : LSN_ANY;
	return LSN_ONE;
}

/* Does a listener of @addr (@kind) take a connection to @to? */
static bool lsn_covers(const uint8_t addr[16], enum lsn_kind kind, const uint8_t to[16])
{
	switch (kind) {
	case LSN_V4_ANY:
		return addr_is_v4(to);
	case LSN_V6_ANY:
		return !addr_is_v4(to);
	case LSN_ANY:
		return true;
	default:
		return !memcmp(addr, to, 16);
	}
}

/* The listener of a SYN: at most one covers its address (qhca_iw_listen). */
static struct iw_listener *listener_of_syn(struct qhca_iw *iw, const struct iw_tcp_seg *s)
{
	unsigned i;

	for (i = 0; i < QHCA_IW_MAX_LISTEN; i++) {
		struct iw_listener *l = &iw->lsn[i];

		if (l->handle && l->port == s->dport &&
		    lsn_covers(l->addr, lsn_kind(l->addr, l->v6only), s->dgid))
			return l;
	}
	return NULL;
}

static struct iw_listener *listener_find(struct qhca_engine *e, uint32_t handle)
{
	int64_t i = qhca_obj_lookup(&e->iw->lsn_table, handle);

	return i < 0 ? NULL : &e->iw->lsn[i];
}

/* ---------------------------------------------------------------- TCP's callbacks */
static uint64_t now_ns(const struct qhca_engine *e)
{
	return e->ops->now_ns(e->opaque);
}

/* A TCP segment in the teaching trace (trace.c: tx and rx with wire=tcp). */
static void step_seg(struct qhca_engine *e, const char *kind, uint32_t qpn, uint32_t conn,
		     const struct iw_tcp_seg *s, size_t size)
{
	static const char *const names[] = { "FIN", "SYN", "RST", "PSH", "ACK", "URG" };
	char flags[32] = "";
	size_t at = 0;
	unsigned int i;

	if (!qhca_tracing(e))
		return;
	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (s->flags & (1u << i))
			at += (size_t)snprintf(flags + at, sizeof(flags) - at, "%s%s",
					       at ? "," : "", names[i]);
	qhca_stepf(e, "%s wire=tcp qp=0x%x conn=0x%x sport=%u dport=%u seq=%u ack=%u flags=%s "
		   "win=%u len=%u size=%zu", kind, qpn, conn, s->sport, s->dport, s->seq, s->ack,
		   at ? flags : "none", s->window, s->payload_len, size);
}

/* An FPDU in the teaching trace: built (dir=out) or taken whole with its CRC good (in). */
static void step_fpdu(struct iw_conn *c, const char *dir, const struct iw_pkt *p,
		      const uint8_t *fpdu, size_t len)
{
	const struct iw_opcode_info *oi = iw_opcode_info(p->opcode);
	char hdr[160];

	if (!qhca_tracing(c->e) || len < IW_MPA_HLEN + 4)
		return;
	if (oi->flags & IW_F_TAGGED)
		snprintf(hdr, sizeof(hdr), "stag=0x%x to=0x%llx", p->stag,
			 (unsigned long long)p->to);
	else if (p->opcode == IW_OP_READ_REQ)
		snprintf(hdr, sizeof(hdr), "qn=%u msn=%u mo=%u sink_stag=0x%x sink_to=0x%llx "
			 "size=%u src_stag=0x%x src_to=0x%llx", oi->qn, p->msn, p->mo,
			 p->sink_stag, (unsigned long long)p->sink_to, p->read_size,
			 p->src_stag, (unsigned long long)p->src_to);
	else
		snprintf(hdr, sizeof(hdr), "qn=%u msn=%u mo=%u", oi->qn, p->msn, p->mo);
	qhca_stepf(c->e, "fpdu dir=%s qp=0x%x conn=0x%x op=\"%s\" ulpdu=%u len=%u last=%d %s "
		   "crc=0x%08x fpdu=%zu", dir, c->qpn, c->handle, oi->name,
		   (unsigned int)fpdu[0] << 8 | fpdu[1], p->payload_len, p->last, hdr,
		   (uint32_t)fpdu[len - 4] << 24 | (uint32_t)fpdu[len - 3] << 16 |
		   (uint32_t)fpdu[len - 2] << 8 | fpdu[len - 1], len);
}

static void tcp_xmit(void *opaque, const struct iw_tcp_seg *seg)
{
	struct iw_conn *c = opaque;
	struct qhca_engine *e = c->e;
	size_t len = iw_tcp_build(seg, e->pkt, LOOP_FRAME);

	if (!len) {
		qhca_log(e, QHCA_LOG_ERR, "iWARP connection 0x%x: a segment not built", c->handle);
		return;
	}
	step_seg(e, "tx", c->qpn, c->handle, seg, len);
	e->cnt.roce_tx_pkts++;
	e->cnt.roce_tx_bytes += len;
	qhca_xmit_frame(e, e->pkt, len);
}

static void conn_event(struct iw_conn *c, uint8_t type, uint64_t data)
{
	qhca_step(c->e, "iw conn=0x%x event=%u data=%llu", c->handle, type,
		  (unsigned long long)data);
	qhca_event_async(c->e, type, c->handle, data);
}

/* A passive connection is no longer waiting to be accepted: out of its listener's count. */
static void unpend(struct iw_conn *c)
{
	struct iw_listener *l;

	if (!c->pending)
		return;
	c->pending = false;
	c->e->iw->half_open--;
	l = c->listener ? listener_find(c->e, c->listener) : NULL;
	if (l && l->pending)
		l->pending--;
}

/* Our side is closing: it ends in IW_CLOSE_TIMEOUT_NS at the latest. */
static void closing(struct iw_conn *c)
{
	if (c->close_deadline == UINT64_MAX)
		c->close_deadline = now_ns(c->e) + IW_CLOSE_TIMEOUT_NS;
}

/* The end of the connection's TCP: tell the driver, once. */
static void conn_gone(struct iw_conn *c, uint8_t status)
{
	struct qhca_iw *iw = c->e->iw;

	if (c->state == IWC_FREE || c->gone)
		return;			/* the first end's status is the one told */
	unpend(c);
	closing(c);
	if (c->state == IWC_RTS && status != QHCA_IW_ST_OK && status != QHCA_IW_ST_LOCAL) {
		/* reset, timed out or broken under RDMA: the QP to error, as an RNIC's */
		struct qhca_qp *qp = qp_of(c);

		c->state = IWC_CLOSING;		/* qhca_qp_error's connection hook: done */
		c->gone = true;
		c->status = status;
		if (qp)
			qhca_qp_error(c->e, qp, QHCA_EVENT_QP_FATAL);
		return;
	}
	if (c->active && c->state == IWC_MPA_WAIT)
		conn_event(c, QHCA_EVENT_IW_CONNECT_REPLY, status ? status : QHCA_IW_ST_RESET);
	else if (c->active && c->state == IWC_TCP)
		conn_event(c, QHCA_EVENT_IW_CONNECT_REPLY, status ? status : QHCA_IW_ST_REFUSED);
	c->state = IWC_CLOSING;
	c->status = status;
	c->gone = true;
	(void)iw;
}

static void mpa_send(struct iw_conn *c, bool reply, bool reject, const uint8_t *pd,
		     uint16_t pd_len)
{
	/* A reply answers in the request's revision (RFC 6581: RFC 5044's 1 has no IRD/ORD). */
	bool enh = !reply || (c->peer.mpa_rev == 2 && c->peer_enhanced);
	struct iw_mpa_rr rr = {
		.reply = reply, .crc = true, .reject = reject,
		.rev = reply && c->peer.mpa_rev == 1 ? 1 : 2, .enhanced = enh,
		.p2p = enh && c->p2p, .rtr_write = enh && c->p2p, .ird = enh ? c->ird : 0,
		.ord = enh ? c->ord : 0, .pdata = pd, .pdata_len = pd_len,
	};
	uint8_t buf[IW_MPA_BUF];
	size_t n = iw_mpa_rr_build(&rr, buf, sizeof(buf));

	/* in the trace before TCP sends it, if TCP takes it */
	if (n && qtcp_send_space(c->tcp) >= n)
		qhca_step(c->e, "mpa dir=out qp=0x%x conn=0x%x what=%s rev=%u ird=%u ord=%u "
			  "pdata=%u", c->qpn, c->handle,
			  reject ? "reject" : reply ? "reply" : "request", rr.rev, rr.ird, rr.ord,
			  pd_len);
	if (!n || !tcp_queue(c, buf, n)) {
		qhca_log(c->e, QHCA_LOG_EVENT, "iWARP connection 0x%x: MPA %s not sent",
			 c->handle, reply ? "reply" : "request");
		qtcp_abort(c->tcp, now_ns(c->e));
		conn_gone(c, QHCA_IW_ST_PROTOCOL);
	}
}

static void tcp_connected(void *opaque)
{
	struct iw_conn *c = opaque;

	c->state = IWC_MPA_WAIT;
	c->mpa_deadline = now_ns(c->e) + IW_MPA_TIMEOUT_NS;
	if (c->active)
		mpa_send(c, false, false, c->peer.private_data, c->peer.pd_len);
}

/* The peer's MPA request or reply is whole in c->mpa: note it, then tell the driver. */
static void mpa_received(struct iw_conn *c, const struct iw_mpa_rr *rr)
{
	struct qhca_iw_conn *p = &c->peer;
	struct qhca_qp *qp;

	qhca_step(c->e, "mpa dir=in qp=0x%x conn=0x%x what=%s rev=%u ird=%u ord=%u pdata=%u",
		  c->qpn, c->handle, rr->reject ? "reject" : rr->reply ? "reply" : "request",
		  rr->rev, rr->ird, rr->ord, rr->pdata_len);
	memset(p->private_data, 0, sizeof(p->private_data));
	memcpy(p->private_data, rr->pdata, rr->pdata_len);
	p->pd_len = rr->pdata_len;
	p->mpa_rev = rr->rev;
	p->ird = rr->enhanced ? rr->ird : 0;
	p->ord = rr->enhanced ? rr->ord : 0;
	p->flags = rr->p2p ? QHCA_IW_P2P : 0;
	c->peer_enhanced = rr->enhanced;
	c->replied = c->active;
	/* never more READs in flight than the peer answers at once */
	if (c->active && rr->enhanced && rr->ird < c->ord)
		c->ord = rr->ird;
	if (c->active) {
		if (rr->reject) {
			conn_event(c, QHCA_EVENT_IW_CONNECT_REPLY, QHCA_IW_ST_REJECTED);
			c->state = IWC_CLOSING;
			c->status = QHCA_IW_ST_REJECTED;	/* for its CLOSED event */
			c->gone = true;
			qtcp_close(c->tcp, now_ns(c->e));
			return;
		}
		c->mpa_deadline = UINT64_MAX;
		qp = qhca_qp_find(c->e, c->qpn);
		if (!qp || qp->iw_conn != c->handle || qp->state != QHCA_QPS_INIT ||
		    !rdma_mode(c, qp)) {
			qtcp_abort(c->tcp, now_ns(c->e));
			conn_gone(c, QHCA_IW_ST_LOCAL);
			return;
		}
		conn_event(c, QHCA_EVENT_IW_CONNECT_REPLY, QHCA_IW_ST_OK);
		req_run(c, qp);		/* WQEs posted before the reply go now */
		return;
	}
	c->state = IWC_REQ_PENDING;
	c->mpa_deadline = now_ns(c->e) + IW_ANSWER_TIMEOUT_NS;
	c->announced = true;
	conn_event(c, QHCA_EVENT_IW_CONNECT_REQUEST, c->listener);
}

static size_t tcp_deliver(void *opaque, const uint8_t *p, size_t n)
{
	struct iw_conn *c = opaque;
	struct iw_mpa_rr rr;
	size_t take, used;
	enum iw_parse_result r;

	if (c->state == IWC_RTS)
		return rx_stream(c, p, n);
	if (c->state != IWC_MPA_WAIT)
		return 0;	/* nothing more until the driver answers */
	take = n < sizeof(c->mpa) - c->mpa_len ? n : sizeof(c->mpa) - c->mpa_len;
	memcpy(c->mpa + c->mpa_len, p, take);
	c->mpa_len += (uint32_t)take;
	r = iw_mpa_rr_parse(c->mpa, c->mpa_len, &rr, &used);
	if (r == IW_INCOMPLETE)
		return take;
	/* CRC is on if either side asks (RFC 5044 7.1): ours always does. No markers. */
	if (r != IW_OK || rr.reply != c->active || rr.markers) {
		qhca_log_guest(c->e, "iWARP connection 0x%x: bad MPA %s (%s)", c->handle,
			       c->active ? "reply" : "request", iw_parse_result_name(r));
		qtcp_abort(c->tcp, now_ns(c->e));
		conn_gone(c, QHCA_IW_ST_PROTOCOL);
		return n;
	}
	mpa_received(c, &rr);
	/* bytes after the frame are FPDUs: they wait for the datapath */
	return take - (c->mpa_len - used);
}

static void tcp_peer_closed(void *opaque)
{
	struct iw_conn *c = opaque;

	qhca_step(c->e, "iw conn=0x%x peer FIN in state %u", c->handle, c->state);
	/* In RDMA mode the peer's close is answered with ours at once, as an RNIC does
	 * (iw_cm's DISCONNECT upcall changes no QP state); before it, a FIN ends the set-up. */
	if (c->state == IWC_RTS) {
		if (!c->peer_closed)
			conn_event(c, QHCA_EVENT_IW_DISCONNECTED, 0);
		c->peer_closed = true;
		closing(c);
		qtcp_close(c->tcp, now_ns(c->e));
		return;
	}
	/* Before RDMA mode a FIN ends the set-up: a RST, so the slot and its TCP go at once
	 * (a FIN of ours would leave them in LAST_ACK for a peer that never acknowledges it,
	 * uncounted by the half-open bound) */
	if (c->gone) {		/* ours went first (a REJECT, a refused request): done */
		qtcp_close(c->tcp, now_ns(c->e));
		return;
	}
	conn_gone(c, QHCA_IW_ST_RESET);
	qtcp_abort(c->tcp, now_ns(c->e));
}

static void tcp_closed(void *opaque)
{
	qhca_step(((struct iw_conn *)opaque)->e, "iw conn=0x%x TCP closed",
		  ((struct iw_conn *)opaque)->handle);
	conn_gone(opaque, QHCA_IW_ST_OK);
}

static void tcp_reset(void *opaque)
{
	struct iw_conn *c = opaque;

	qhca_step(c->e, "iw conn=0x%x TCP reset in state %u", c->handle, c->state);
	if (c->state != IWC_TCP)	/* a refused connect is no news */
		qhca_log_guest(c->e, "iWARP connection 0x%x: reset by the peer", c->handle);
	conn_gone(c, c->state == IWC_TCP ? QHCA_IW_ST_REFUSED : QHCA_IW_ST_RESET);
}

static void tcp_error(void *opaque, enum qtcp_error err)
{
	struct iw_conn *c = opaque;

	qhca_step(c->e, "iw conn=0x%x TCP error \"%s\"", c->handle, qtcp_error_name(err));
	qhca_log_guest(c->e, "iWARP connection 0x%x: TCP gave up: %s", c->handle,
		       qtcp_error_name(err));
	conn_gone(c, QHCA_IW_ST_TIMEOUT);
}

static const struct qtcp_ops tcp_ops = {
	.xmit = tcp_xmit,
	.deliver = tcp_deliver,
	.connected = tcp_connected,
	.acked = tcp_acked,
	.peer_closed = tcp_peer_closed,
	.closed = tcp_closed,
	.reset = tcp_reset,
	.error = tcp_error,
};

/* ---------------------------------------------------------------- the datapath */
static struct qhca_qp *qp_of(struct iw_conn *c)
{
	struct qhca_qp *qp = c->qpn ? qhca_qp_find(c->e, c->qpn) : NULL;

	return qp && qp->iw_conn == c->handle ? qp : NULL;
}

/* Hand @n bytes to TCP, all or nothing (the caller checked the room). */
static bool tcp_queue(struct iw_conn *c, const uint8_t *buf, size_t n)
{
	if (qtcp_send_space(c->tcp) < n)
		return false;
	if (qtcp_send(c->tcp, buf, n, now_ns(c->e)) != n) {
		qhca_log(c->e, QHCA_LOG_ERR, "iWARP connection 0x%x: TCP took part of an FPDU",
			 c->handle);
		return false;
	}
	return true;
}

/* Build @p (its payload already at iw->txbuf's payload place or elsewhere) and queue it;
 * false if TCP has no room for it now. */
static bool fpdu_out(struct iw_conn *c, const struct iw_pkt *p)
{
	uint8_t *buf = c->e->iw->txbuf;
	size_t n = iw_fpdu_build(p, true, buf, IW_TXBUF);

	if (!n) {
		qhca_log(c->e, QHCA_LOG_ERR, "iWARP connection 0x%x: FPDU of op %u not built",
			 c->handle, p->opcode);
		return true;	/* nothing to wait for */
	}
	if (qtcp_send_space(c->tcp) >= n)	/* in the trace before TCP sends it */
		step_fpdu(c, "out", p, buf, n);
	return tcp_queue(c, buf, n);
}

/* Room in TCP for an FPDU of @payload bytes of @opcode? */
static bool fpdu_room(const struct iw_conn *c, uint8_t opcode, uint32_t payload)
{
	return qtcp_send_space(c->tcp) >= iw_fpdu_len_for(iw_opcode_info(opcode)->hdr_len +
							   payload);
}

/* Where an FPDU's payload goes in the build buffer (after the length and headers). */
static uint8_t *payload_at(struct iw_conn *c, uint8_t opcode)
{
	return c->e->iw->txbuf + IW_MPA_HLEN + iw_opcode_info(opcode)->hdr_len;
}

/*
 * Something went wrong on this connection: a Terminate (RFC 5040 4.8) with @layer, @etype
 * and @ecode, then the close; the QP to the error state (@event to the driver).
 */
static void terminate(struct iw_conn *c, uint8_t layer, uint8_t etype, uint8_t ecode,
		      uint8_t event, const char *why)
{
	struct qhca_qp *qp = qp_of(c);
	struct iw_pkt t;

	qhca_log_guest(c->e, "iWARP connection 0x%x: terminated: %s", c->handle, why);
	qhca_step(c->e, "iw conn=0x%x terminate why=\"%s\"", c->handle, why);
	if (!c->terminated && c->state == IWC_RTS) {
		memset(&t, 0, sizeof(t));
		t.opcode = IW_OP_TERMINATE;
		t.last = true;
		t.msn = 1;
		t.term_layer = layer;
		t.term_etype = etype;
		t.term_ecode = ecode;
		if (!fpdu_out(c, &t)) {
			c->terminated = true;	/* no room for it behind what is queued */
			qtcp_abort(c->tcp, now_ns(c->e));
			goto qp_error;
		}
	}
	c->terminated = true;
	closing(c);
	qtcp_close(c->tcp, now_ns(c->e));
qp_error:
	if (qp && qp->state != QHCA_QPS_ERR)
		qhca_qp_error(c->e, qp, event);
}

/* The payload one FPDU of @opcode carries at most: the MULPDU (by the connection's MSS)
 * less the opcode's DDP and RDMAP headers. */
static uint32_t fpdu_payload(const struct iw_conn *c, uint8_t opcode)
{
	uint32_t m = iw_mulpdu(c->tcp->mss), h = iw_opcode_info(opcode)->hdr_len;

	m = m > h + 4 ? m - h : 4;
	return m < IW_MAX_ULP_PAYLOAD ? m : IW_MAX_ULP_PAYLOAD;
}

/* Answer the Read Requests queued, in order, as TCP has room; false when it has none. */
static bool rr_pump(struct iw_conn *c, struct qhca_qp *qp)
{
	if (qp->state != QHCA_QPS_RTS && qp->state != QHCA_QPS_SQD)
		return false;	/* a QP in error answers nothing more */
	while (c->rr_n && !c->terminated) {
		struct iw_rresp *r = &c->rr[c->rr_head];
		uint32_t most = fpdu_payload(c, IW_OP_READ_RESP);
		uint32_t chunk = r->size - r->off < most ? r->size - r->off : most;
		const char *why = NULL;
		struct qhca_mr *mr;
		struct iw_pkt p;

		if (!fpdu_room(c, IW_OP_READ_RESP, chunk))
			return false;
		mr = qhca_rkey_check(c->e, qp, r->src_stag, r->src_to + r->off, chunk,
				     QHCA_ACCESS_REMOTE_READ, &why);
		/* The region's rights alone: on iWARP a QP's remote access flags gate
		 * nothing (rdma_cm leaves an active side's at 0; siw ignores them, Chelsio's
		 * RNICs enable reads and writes at creation). */
		if (!mr) {
			terminate(c, IW_TERM_LAYER_RDMAP, 1, 0, QHCA_EVENT_QP_ACCESS_ERR, why);
			return false;
		}
		memset(&p, 0, sizeof(p));
		p.opcode = IW_OP_READ_RESP;
		p.stag = r->sink_stag;
		p.to = r->sink_to + r->off;
		p.payload = payload_at(c, IW_OP_READ_RESP);
		p.payload_len = chunk;
		p.last = r->off + chunk == r->size;
		if (chunk && qhca_mr_xfer(c->e, mr, r->src_to + r->off, (uint8_t *)p.payload,
					  chunk, false)) {
			terminate(c, IW_TERM_LAYER_RDMAP, 1, 0, QHCA_EVENT_QP_FATAL,
				  "READ source not readable");
			return false;
		}
		if (!fpdu_out(c, &p))
			return false;
		r->off += chunk;
		if (p.last) {
			c->rr_head = (c->rr_head + 1) % QHCA_MAX_RD_ATOMIC;
			c->rr_n--;
		}
	}
	return !c->terminated;
}

/* The RDMAP opcode of @sw's FPDUs. */
static uint8_t wqe_opcode(const struct qhca_send_wqe *sw)
{
	bool se = sw->hdr.flags & QHCA_WQE_SOLICITED;

	switch (sw->hdr.opcode) {
	case QHCA_WR_SEND:
		return se ? IW_OP_SEND_SE : IW_OP_SEND;
	case QHCA_WR_SEND_WITH_INV:
		return se ? IW_OP_SEND_SE_INV : IW_OP_SEND_INV;
	case QHCA_WR_RDMA_WRITE:
		return IW_OP_WRITE;
	case QHCA_WR_RDMA_READ:
		return IW_OP_READ_REQ;
	}
	return IW_OP_COUNT;
}

/* Send what is left of @sw's FPDUs; false when TCP has no room for the next. */
static bool wqe_out(struct iw_conn *c, struct qhca_send_wqe *sw)
{
	uint8_t op = wqe_opcode(sw);

	while (sw->tx_next < sw->npkts) {
		uint32_t k = sw->tx_next, len = op == IW_OP_READ_REQ ? 0 :
			     qhca_pkt_len(sw->length, sw->mtu, k);
		struct iw_pkt p;

		if (!fpdu_room(c, op, len))
			return false;
		memset(&p, 0, sizeof(p));
		p.opcode = op;
		p.last = k + 1 == sw->npkts;
		p.payload = payload_at(c, op);
		p.payload_len = len;
		if (op == IW_OP_WRITE) {
			p.stag = sw->hdr.rkey;
			p.to = sw->hdr.remote_addr + (uint64_t)k * sw->mtu;
		} else if (op == IW_OP_READ_REQ) {
			p.msn = sw->first_psn;
			p.sink_stag = sw->sgl.sge[0].lkey;
			p.sink_to = sw->sgl.sge[0].addr;
			p.read_size = (uint32_t)sw->length;
			p.src_stag = sw->hdr.rkey;
			p.src_to = sw->hdr.remote_addr;
		} else {
			p.msn = sw->first_psn;
			p.mo = k * sw->mtu;
			p.inval_stag = sw->hdr.imm_inv;
		}
		if (len && qhca_wqe_xfer(c->e, sw, (uint64_t)k * sw->mtu, (uint8_t *)p.payload, len,
					 false)) {
			sw->tx_next = sw->npkts;
			sw->done = true;
			sw->status = QHCA_WC_LOC_PROT_ERR;
			return true;
		}
		if (!fpdu_out(c, &p))
			return false;
		sw->tx_next++;
	}
	return true;
}

/* What an iWARP QP may post: no atomics, no immediate data (RFC 5040 has none), a READ
 * sink of one buffer (its STag goes in the request). */
static uint8_t iw_wqe_ok(const struct qhca_send_wqe *sw)
{
	if (qhca_wr_is_local(sw->hdr.opcode))
		return QHCA_WC_SUCCESS;
	if (wqe_opcode(sw) == IW_OP_COUNT)
		return QHCA_WC_LOC_QP_OP_ERR;
	if (sw->hdr.opcode == QHCA_WR_RDMA_READ &&
	    (sw->sgl.num != 1 || (sw->hdr.flags & QHCA_WQE_INLINE)))
		return QHCA_WC_LOC_QP_OP_ERR;
	return QHCA_WC_SUCCESS;
}

/* SENDs and WRITEs whose FPDUs are all in TCP's send buffer are done: TCP holds its own
 * copy until the peer acknowledges it, so the guest's buffer is free again. In iWARP a
 * requester's completion says no more (RFC 5040 5.2: not that the data was placed), and
 * siw completes them at that point too; waiting for the ACK would add the peer's delayed
 * ACK (40 ms in Linux) to every exchange of small messages. */
static void acked_done(struct iw_conn *c, struct qhca_qp *qp)
{
	uint32_t i;

	for (i = qp->sq.ci; i != qp->sq_next; i++) {
		struct qhca_send_wqe *sw = qhca_sq_slot(qp, i);

		if (!sw->done && sw->hdr.opcode != QHCA_WR_RDMA_READ &&
		    sw->tx_next == sw->npkts) {
			sw->done = true;
			sw->status = QHCA_WC_SUCCESS;
		}
	}
	qhca_comp_ready(c->e, qp);
}

static void req_run(struct iw_conn *c, struct qhca_qp *qp)
{
	if (c->tx_hold)
		return;
	for (;;) {
		struct qhca_send_wqe *sw;
		uint8_t status;

		if (c->terminated || !rr_pump(c, qp))
			break;
		if (qp->sq_next != qp->sq.ci) {
			sw = qhca_sq_slot(qp, qp->sq_next - 1);
			if (sw->tx_next < sw->npkts && !wqe_out(c, sw))
				break;
		}
		if (qp->state != QHCA_QPS_RTS || qp->sq_next == qp->sq.pi ||
		    qp->sq_next - qp->sq.ci >= qp->win_size)
			break;
		if (qp->sq_next != qp->sq.ci) {
			/* a WQE that failed stops the queue: it takes the QP to error */
			sw = qhca_sq_slot(qp, qp->sq_next - 1);
			if (sw->done && sw->status != QHCA_WC_SUCCESS)
				break;
		}
		sw = qhca_sq_slot(qp, qp->sq_next);
		status = qhca_wqe_load(c->e, qp, qp->sq_next, sw);
		if (status == QHCA_WC_SUCCESS)
			status = iw_wqe_ok(sw);
		if (status == QHCA_WC_SUCCESS && qhca_wr_is_local(sw->hdr.opcode)) {
			if ((sw->hdr.flags & QHCA_WQE_FENCE) && qp->sq.ci != qp->sq_next)
				break;
			qp->sq_next++;
			sw->done = true;
			sw->status = qhca_wqe_local_op(c->e, qp, sw);
			continue;
		}
		if (status == QHCA_WC_SUCCESS && ((sw->hdr.flags & QHCA_WQE_FENCE) ?
						  qp->rd_atomic_out != 0 :
						  sw->hdr.opcode == QHCA_WR_RDMA_READ &&
						  qp->rd_atomic_out >= (c->ord ? c->ord : 1u)))
			break;	/* a fence waits for READs; READs beyond ORD wait */
		qp->sq_next++;
		if (status != QHCA_WC_SUCCESS) {
			sw->done = true;
			sw->status = status;
			break;
		}
		sw->mtu = fpdu_payload(c, wqe_opcode(sw));
		sw->npkts = sw->length ? (uint32_t)((sw->length + sw->mtu - 1) / sw->mtu) : 1;
		sw->tx_next = 0;
		if (sw->hdr.opcode == QHCA_WR_RDMA_READ) {
			sw->npkts = 1;
			sw->read_next = 0;	/* bytes of its responses placed */
			sw->first_psn = c->read_msn++;
			qp->rd_atomic_out++;
		} else if (wqe_opcode(sw) != IW_OP_WRITE) {
			sw->first_psn = c->send_msn++;
		}
	}
	acked_done(c, qp);
}

void qhca_iw_req_run(struct qhca_engine *e, struct qhca_qp *qp)
{
	struct iw_conn *c = e->iw && qp->iw_conn ? conn_find(e, qp->iw_conn) : NULL;

	if (!c || c->state != IWC_RTS || qp_of(c) != qp)
		return;
	req_run(c, qp);
	qhca_timer_update(e);
}

/* A READ of ours answered: its oldest outstanding one (RDMAP answers in order). */
static struct qhca_send_wqe *oldest_read(struct qhca_qp *qp)
{
	uint32_t i;

	for (i = qp->sq.ci; i != qp->sq_next; i++) {
		struct qhca_send_wqe *sw = qhca_sq_slot(qp, i);

		if (!sw->done && sw->hdr.opcode == QHCA_WR_RDMA_READ)
			return sw;
	}
	return NULL;
}

/* A tagged FPDU (RDMA Write, Read Response): placed by STag and offset. */
static bool rx_tagged(struct iw_conn *c, struct qhca_qp *qp, const struct iw_pkt *p)
{
	const char *why = "QP without remote write";
	struct qhca_send_wqe *rd = NULL;
	struct qhca_mr *mr = NULL;

	if (p->opcode == IW_OP_READ_RESP) {
		rd = oldest_read(qp);
		/* its responses in order: each where the last ended, the last at the end */
		if (!rd || p->stag != rd->sgl.sge[0].lkey ||
		    p->to != rd->sgl.sge[0].addr + rd->read_next ||
		    (uint64_t)rd->read_next + p->payload_len > rd->length ||
		    (p->last && rd->read_next + p->payload_len != rd->length)) {
			terminate(c, IW_TERM_LAYER_RDMAP, 2, 0, QHCA_EVENT_QP_REQ_ERR,
				  "a Read Response for no READ of ours");
			return false;
		}
		/* The sink needs remote write rights, as RFC 5040 has it: the responder
		 * writes it by its STag. */
		mr = qhca_rkey_check(c->e, qp, p->stag, p->to, p->payload_len,
				     QHCA_ACCESS_REMOTE_WRITE, &why);
	} else {	/* the region's rights alone, as for a READ (rr_pump) */
		mr = qhca_rkey_check(c->e, qp, p->stag, p->to, p->payload_len,
				     QHCA_ACCESS_REMOTE_WRITE, &why);
	}
	if (!mr) {
		terminate(c, IW_TERM_LAYER_DDP, 0, 0, QHCA_EVENT_QP_ACCESS_ERR, why);
		return false;
	}
	if (p->payload_len &&
	    qhca_mr_xfer(c->e, mr, p->to, (void *)p->payload, p->payload_len, true)) {
		terminate(c, IW_TERM_LAYER_DDP, 0, 0, QHCA_EVENT_QP_FATAL, "placement failed");
		return false;
	}
	if (rd)
		rd->read_next += p->payload_len;
	if (rd && p->last) {
		rd->done = true;	/* qhca_comp_ready counts it out of rd_atomic_out */
		rd->status = QHCA_WC_SUCCESS;
		qhca_comp_ready(c->e, qp);
		req_run(c, qp);		/* a READ waiting for ORD may go */
	}
	return true;
}

/* An untagged SEND FPDU: into the receive WQE of its message, at its offset. */
static bool rx_send(struct iw_conn *c, struct qhca_qp *qp, const struct iw_pkt *p)
{
	struct qhca_recv_ctx *rc = &qp->recv;
	uint8_t cflags = 0;
	uint32_t imm = 0;

	if (p->msn != c->rx_send_msn) {
		terminate(c, IW_TERM_LAYER_DDP, 1, 2, QHCA_EVENT_QP_REQ_ERR, "SEND out of order");
		return false;
	}
	if (!rc->active) {
		int r = qhca_recv_take(c->e, qp, rc);

		if (r < 0) {
			/* No RNR in iWARP: the peer sent into nothing (RFC 5041 7.2). */
			terminate(c, IW_TERM_LAYER_DDP, 1, 1, QHCA_EVENT_QP_FATAL,
				  r == -1 ? "no receive posted" : "bad receive WQE");
			return false;
		}
		rc->offset = 0;
	}
	if (p->mo != rc->offset || (uint64_t)p->mo + p->payload_len > rc->sgl.length ||
	    qhca_sgl_xfer(c->e, &rc->sgl, p->mo, (uint8_t *)p->payload, p->payload_len, true)) {
		qhca_recv_complete(c->e, qp, rc, QHCA_WC_LOC_LEN_ERR, QHCA_WC_RECV, 0, 0, 0, NULL,
				   false);
		terminate(c, IW_TERM_LAYER_DDP, 1, 3, QHCA_EVENT_QP_FATAL,
			  "SEND does not fit its receive");
		return false;
	}
	rc->offset += p->payload_len;
	if (!p->last)
		return true;
	if (iw_opcode_info(p->opcode)->flags & IW_F_INVAL) {
		const char *why;

		if (qhca_mr_invalidate(c->e, qp, p->inval_stag, true, &why) != QHCA_WC_SUCCESS) {
			qhca_recv_complete(c->e, qp, rc, QHCA_WC_REM_INV_REQ_ERR, QHCA_WC_RECV, 0,
					   0, 0, NULL, false);
			terminate(c, IW_TERM_LAYER_RDMAP, 1, 0, QHCA_EVENT_QP_REQ_ERR, why);
			return false;
		}
		cflags = QHCA_CQE_FLAG_INV;
		imm = p->inval_stag;
	}
	c->rx_send_msn++;
	qhca_recv_complete(c->e, qp, rc, QHCA_WC_SUCCESS, QHCA_WC_RECV, (uint32_t)rc->offset,
			   imm, cflags, NULL, (iw_opcode_info(p->opcode)->flags & IW_F_SE) != 0);
	return true;
}

static bool rx_read_req(struct iw_conn *c, struct qhca_qp *qp, const struct iw_pkt *p)
{
	struct iw_rresp *r;

	if (p->msn != c->rx_read_msn || c->rr_n >= (c->ird ? c->ird : 1u) ||
	    p->read_size > 0x80000000u) {
		terminate(c, IW_TERM_LAYER_RDMAP, 2, 0, QHCA_EVENT_QP_REQ_ERR,
			  "Read Request out of order, past IRD, or too long");
		return false;
	}
	r = &c->rr[(c->rr_head + c->rr_n) % QHCA_MAX_RD_ATOMIC];
	r->sink_stag = p->sink_stag;
	r->sink_to = p->sink_to;
	r->size = p->read_size;
	r->src_stag = p->src_stag;
	r->src_to = p->src_to;
	r->off = 0;
	c->rr_n++;
	c->rx_read_msn++;
	req_run(c, qp);
	return true;
}

/* One whole FPDU from the peer, its CRC good. */
static void rx_fpdu(struct iw_conn *c, struct qhca_qp *qp, const uint8_t *f, size_t len)
{
	struct iw_pkt p;
	enum iw_parse_result r = iw_fpdu_parse(f, len, false, &p);

	if (r != IW_OK) {
		terminate(c, IW_TERM_LAYER_DDP, 0, 0, QHCA_EVENT_QP_REQ_ERR,
			  iw_parse_result_name(r));
		return;
	}
	step_fpdu(c, "in", &p, f, len);
	switch (p.opcode) {
	case IW_OP_WRITE:
	case IW_OP_READ_RESP:
		rx_tagged(c, qp, &p);
		break;
	case IW_OP_READ_REQ:
		rx_read_req(c, qp, &p);
		break;
	case IW_OP_TERMINATE:
		c->terminated = true;	/* answered by no Terminate */
		terminate(c, p.term_layer, p.term_etype, p.term_ecode, QHCA_EVENT_QP_FATAL,
			  "the peer terminated");
		break;
	default:
		rx_send(c, qp, &p);
		break;
	}
}

/* In-order bytes of a connection in RDMA mode: FPDUs, placed as they come. */
static size_t rx_stream(struct iw_conn *c, const uint8_t *data, size_t n)
{
	struct qhca_qp *qp = qp_of(c);
	size_t left = n;
	bool held = c->tx_hold;

	while (left && !c->terminated) {
		const uint8_t *f;
		size_t flen;
		enum iw_parse_result r = iw_fpdu_rx_next(&c->frx, &data, &left, &f, &flen);

		if (r == IW_INCOMPLETE)
			break;
		if (r != IW_OK || !qp) {
			terminate(c, IW_TERM_LAYER_LLP, 0, r == IW_BAD_CRC ? 2 : 1,
				  QHCA_EVENT_QP_FATAL, qp ? iw_parse_result_name(r) : "no QP");
			break;
		}
		if (qp->state != QHCA_QPS_RTS && qp->state != QHCA_QPS_SQD) {
			terminate(c, IW_TERM_LAYER_RDMAP, 2, 1, QHCA_EVENT_QP_FATAL,
				  "the QP takes no requests in its state");
			break;
		}
		c->tx_hold = false;	/* the initiator's first FPDU: the responder may send */
		rx_fpdu(c, qp, f, flen);
	}
	if (held && !c->tx_hold && qp && c->state == IWC_RTS && !c->terminated)
		req_run(c, qp);
	return n;	/* all taken: placed, or the connection is ending */
}

/* The connection enters RDMA mode on @qp (accepted, or the reply came). */
static bool rdma_mode(struct iw_conn *c, struct qhca_qp *qp)
{
	if (qp->state != QHCA_QPS_INIT || qp->type != QHCA_QPT_RC)
		return false;
	if (!c->fbuf) {
		if (c->e->host_bytes + IW_RX_FPDU_MAX > c->e->host_budget)
			return false;
		c->fbuf = malloc(IW_RX_FPDU_MAX);
		if (!c->fbuf)
			return false;
		c->e->host_bytes += IW_RX_FPDU_MAX;
	}
	iw_fpdu_rx_init(&c->frx, c->fbuf, IW_RX_FPDU_MAX, true);
	c->send_msn = c->read_msn = c->rx_send_msn = c->rx_read_msn = 1;
	c->rr_head = c->rr_n = 0;
	c->terminated = false;
	c->tx_hold = false;
	qp->iw_conn = c->handle;
	qp->state = QHCA_QPS_RTS;
	c->state = IWC_RTS;
	return true;
}

static void tcp_acked(void *opaque, uint32_t n)
{
	struct iw_conn *c = opaque;
	struct qhca_qp *qp;

	/* room in TCP's send buffer: the queue may go on */
	qhca_step(c->e, "acked qp=0x%x conn=0x%x bytes=%u", c->qpn, c->handle, n);
	if (c->state == IWC_RTS && (qp = qp_of(c)) != NULL)
		req_run(c, qp);
}

void qhca_iw_qp_gone(struct qhca_engine *e, struct qhca_qp *qp)
{
	struct iw_conn *c = e->iw && qp->iw_conn ? conn_find(e, qp->iw_conn) : NULL;

	qp->iw_conn = 0;
	if (!c || c->qpn != qp->qpn)
		return;
	qhca_step(e, "iw conn=0x%x QP 0x%x gone in state %u", c->handle, qp->qpn, c->state);
	c->qpn = 0;
	/* A Terminate already on its way closes the connection after it; else a RST. It
	 * may be inside one of TCP's callbacks: the slot is freed later (reap_due). */
	if (!c->terminated && c->state != IWC_CLOSING) {
		qtcp_abort(c->tcp, now_ns(e));
		conn_gone(c, QHCA_IW_ST_LOCAL);
	}
	e->iw->reap_due = true;
	qhca_timer_update(e);
}

/* ---------------------------------------------------------------- connections */
/* SipHash-2-4 (Aumasson and Bernstein) of @len bytes: the keyed PRF of RFC 6528's ISNs. */
static uint64_t rotl64(uint64_t x, int b)
{
	return x << b | x >> (64 - b);
}

uint64_t qhca_siphash24(uint64_t k0, uint64_t k1, const uint8_t *m, size_t len)
{
	uint64_t v[4] = { k0 ^ 0x736f6d6570736575ull, k1 ^ 0x646f72616e646f6dull,
			  k0 ^ 0x6c7967656e657261ull, k1 ^ 0x7465646279746573ull };
	uint64_t b = (uint64_t)len << 56, w;
	size_t i, r, k;

#define SIPROUND do {							\
	v[0] += v[1]; v[1] = rotl64(v[1], 13); v[1] ^= v[0]; v[0] = rotl64(v[0], 32); \
	v[2] += v[3]; v[3] = rotl64(v[3], 16); v[3] ^= v[2];			\
	v[0] += v[3]; v[3] = rotl64(v[3], 21); v[3] ^= v[0];			\
	v[2] += v[1]; v[1] = rotl64(v[1], 17); v[1] ^= v[2]; v[2] = rotl64(v[2], 32); \
} while (0)
	for (i = 0; i + 8 <= len; i += 8) {
		for (w = 0, k = 0; k < 8; k++)
			w |= (uint64_t)m[i + k] << (8 * k);
		v[3] ^= w;
		for (r = 0; r < 2; r++)
			SIPROUND;
		v[0] ^= w;
	}
	for (k = 0; i + k < len; k++)
		b |= (uint64_t)m[i + k] << (8 * k);
	v[3] ^= b;
	for (r = 0; r < 2; r++)
		SIPROUND;
	v[0] ^= b;
	v[2] ^= 0xff;
	for (r = 0; r < 4; r++)
		SIPROUND;
#undef SIPROUND
	return v[0] ^ v[1] ^ v[2] ^ v[3];
}

/* RFC 6528: a 4-microsecond clock plus a keyed PRF of the 4-tuple (@t as we send). */
static uint32_t isn_of(struct qhca_engine *e, const struct iw_tcp_seg *t)
{
	uint8_t m[36];
	memcpy(m, t->sgid, 16);
	memcpy(m + 16, t->dgid, 16);
	m[32] = (uint8_t)(t->sport >> 8);
	m[33] = (uint8_t)t->sport;
	m[34] = (uint8_t)(t->dport >> 8);
	m[35] = (uint8_t)t->dport;
	return (uint32_t)qhca_siphash24(e->cfg.isn_secret[0], e->cfg.isn_secret[1], m, sizeof(m)) +
	       (uint32_t)(now_ns(e) / 4000);
}

static struct iw_conn *conn_new(struct qhca_engine *e)
{
	struct qhca_iw *iw = e->iw;
	uint32_t h = qhca_obj_alloc(&iw->conn_table, 0);
	struct iw_conn *c;
	size_t n;

	if (!h)
		return NULL;
	c = &iw->conn[qhca_obj_lookup(&iw->conn_table, h)];
	/* Its rings are host memory that connections size: in the budget, and given back
	 * when the connection goes. */
	n = qtcp_footprint(&iw->tcfg);
	if (e->host_bytes + n <= e->host_budget)
		c->tcp = qtcp_create(&iw->tcfg, &tcp_ops, c);
	if (!c->tcp) {
		qhca_obj_free(&iw->conn_table, h);
		return NULL;
	}
	e->host_bytes += n;
	c->live_idx = iw->nlive;
	iw->live[iw->nlive++] = (uint32_t)(c - iw->conn);
	c->handle = h;
	c->e = e;
	c->state = IWC_TCP;
	c->active = c->peer_closed = c->p2p = c->peer_enhanced = false;
	c->announced = c->pending = c->gone = c->replied = c->looped = false;
	c->mpa_deadline = c->close_deadline = UINT64_MAX;
	c->listener = c->qpn = 0;
	c->status = QHCA_IW_ST_OK;
	c->mpa_len = 0;
	c->rr_n = 0;
	c->terminated = false;
	memset(&c->peer, 0, sizeof(c->peer));
	return c;
}

/* Free a connection's slot and its memory. */
/* The connection's TCP and buffers go (given back to the budget); its record stays. */
static void conn_shed(struct qhca_engine *e, struct iw_conn *c)
{
	if (c->tcp) {
		c->tmpl = c->tcp->tmpl;
		e->iw->gone_retransmits += c->tcp->stats.retransmits;
		e->iw->gone_timeouts += c->tcp->stats.timeouts;
		qtcp_destroy(c->tcp);
		c->tcp = NULL;
		e->host_bytes -= qtcp_footprint(&e->iw->tcfg);
	}
	if (c->fbuf) {
		free(c->fbuf);
		c->fbuf = NULL;
		e->host_bytes -= IW_RX_FPDU_MAX;
	}
}

static void conn_free(struct qhca_engine *e, struct iw_conn *c)
{
	struct qhca_iw *iw = e->iw;
	struct qhca_qp *qp = qp_of(c);
	uint32_t last;

	if (qp)
		qp->iw_conn = 0;
	unpend(c);
	hash_del(iw, c);
	conn_shed(e, c);		/* a RST is not owed: the caller sent one if it was */
	last = iw->live[--iw->nlive];
	iw->live[c->live_idx] = last;
	iw->conn[last].live_idx = c->live_idx;
	c->state = IWC_FREE;
	qhca_obj_free(&iw->conn_table, c->handle);
	c->handle = 0;
}

/* Connections whose TCP is done: the CLOSED event, and the slot free. */
static void reap(struct qhca_engine *e)
{
	struct qhca_iw *iw = e->iw;
	uint32_t i = 0;

	iw->reap_due = false;
	while (i < iw->nlive) {
		struct iw_conn *c = &iw->conn[iw->live[i]];
		struct qhca_qp *qp;

		if (c->state == IWC_CLOSED || c->tcp->state != QTCP_CLOSED) {
			i++;
			continue;
		}
		conn_gone(c, QHCA_IW_ST_RESET);
		/* The LLP is closed: a QP still bound goes to error, its WQEs flushed, as
		 * iw_cm's CLOSE expects of the provider (rdma_disconnect on iWARP asks only for
		 * SQD; a receive left posted completes flushed). No async event: not a fault. */
		qp = qp_of(c);
		if (qp)
			qhca_qp_error(e, qp, 0);
		if (!c->announced) {
			conn_free(e, c);	/* the last live slot moves to i: looked at next */
			continue;
		}
		/* exactly one CLOSED for every handle the driver was told of; the handle
		 * stays until the driver releases it */
		conn_event(c, QHCA_EVENT_IW_CLOSED, c->status);
		c->state = IWC_CLOSED;
		hash_del(iw, c);
		/* only the record waits for the driver's release: were the event lost, the
		 * memory is not */
		conn_shed(e, c);
		i++;
	}
}

/* ---------------------------------------------------------------- the wire */
/* A frame from the wire, or one of ours looped back (@looped: to our MAC, or to the one
 * the port had when the connection began). */
static bool iw_receive(struct qhca_engine *e, const uint8_t *frame, size_t len, bool looped)
{
	struct qhca_iw *iw = e->iw;
	struct iw_tcp_seg s;
	struct iw_conn *c;
	struct iw_listener *l;

	if (!iw || len < 14 || (!looped && memcmp(frame, e->mac, 6)) ||
	    iw_tcp_parse(frame, len, &s) != IW_OK)
		return false;
	/* From the wire, nothing has its destination's address as its source (a stack drops
	 * such a martian: the netdev's); and nothing from the wire reaches a connection to
	 * ourselves, whose segments only loop back (conn_of_seg). */
	if (!looped && !memcmp(s.sgid, s.dgid, 16))
		return false;
	c = conn_of_seg(iw, &s, looped);
	if (c) {
		e->cnt.roce_rx_pkts++;		/* the port's frames, whatever they carry */
		e->cnt.roce_rx_bytes += len;
		step_seg(e, "rx", c->qpn, c->handle, &s, len);
		qtcp_input(c->tcp, &s, now_ns(e));
		reap(e);
		qhca_timer_update(e);
		return true;
	}
	if (!qtcp_is_syn(&s))
		return false;
	l = listener_of_syn(iw, &s);
	if (!l) {
		qhca_step(e, "iw SYN to port %u: no listener", s.dport);
		return false;
	}	/* the guest's own stack answers (or refuses) it */
	if (l->pending >= l->backlog || iw->half_open >= IW_MAX_HALF_OPEN ||
	    !(c = conn_new(e))) {
		e->cnt.roce_rx_busy++;
		return true;	/* dropped: the peer's SYN comes again */
	}
	c->listener = l->handle;
	c->looped = looped;
	step_seg(e, "rx", 0, c->handle, &s, len);
	/* to ourselves: answered to the MAC the SYN came to, ours (its source may be one we
	 * had before a SET_MAC), so that qhca_xmit_frame loops back all the connection sends */
	if (looped)
		memcpy(s.smac, s.dmac, 6);
	if (qtcp_accept(c->tcp, &s, isn_of(e, &s), now_ns(e))) {
		conn_free(e, c);
		return true;
	}
	c->pending = true;
	l->pending++;
	iw->half_open++;
	hash_add(iw, c);
	qhca_timer_update(e);
	return true;
}

bool qhca_iw_receive(struct qhca_engine *e, const uint8_t *frame, size_t len)
{
	return iw_receive(e, frame, len, false);
}

/*
 * A segment we sent to our own MAC (a connection from the guest to its own address): for a
 * connection or a listener of ours, as from the wire; anything else is refused with a RST,
 * as the guest's stack would refuse it on the wire (a looped-back frame never reaches it).
 */
void qhca_iw_loop_receive(struct qhca_engine *e, const uint8_t *frame, size_t len)
{
	struct iw_tcp_seg s, r;
	size_t n;

	if (iw_receive(e, frame, len, true) || iw_tcp_parse(frame, len, &s) != IW_OK ||
	    !qtcp_rst_reply(&s, &r))
		return;
	qhca_step(e, "iw loopback: port %u refused", s.dport);
	memcpy(r.dmac, r.smac, 6);	/* looped back too, never to the wire */
	n = iw_tcp_build(&r, e->pkt, LOOP_FRAME);
	if (n)
		qhca_xmit_frame(e, e->pkt, n);
}

void qhca_iw_timer(struct qhca_engine *e, uint64_t now)
{
	struct qhca_iw *iw = e->iw;
	uint32_t i;

	if (!iw)
		return;
	for (i = 0; i < iw->nlive; i++) {
		struct iw_conn *c = &iw->conn[iw->live[i]];

		if (!c->tcp)
			continue;	/* CLOSED: waiting for the driver's release */
		if (qtcp_next_deadline(c->tcp) <= now)
			qtcp_timer(c->tcp, now);
		if (c->state == IWC_RTS && c->tx_hold && c->mpa_deadline <= now) {
			struct qhca_qp *qp = qp_of(c);

			c->tx_hold = false;	/* no FPDU came: the responder speaks first */
			if (qp)
				req_run(c, qp);
		}
		if ((c->state == IWC_MPA_WAIT || c->state == IWC_REQ_PENDING) &&
		    c->mpa_deadline <= now) {
			qhca_log_guest(e, "iWARP connection 0x%x: no %s in time", c->handle,
				       c->state == IWC_REQ_PENDING ? "answer from the driver" :
				       c->active ? "MPA reply" : "MPA request");
			qtcp_abort(c->tcp, now);
			conn_gone(c, QHCA_IW_ST_TIMEOUT);
		}
		if (c->close_deadline <= now && c->tcp->state != QTCP_CLOSED &&
		    c->tcp->state != QTCP_TIME_WAIT) {
			qhca_log_guest(e, "iWARP connection 0x%x: not closed in time: reset",
				       c->handle);
			qtcp_abort(c->tcp, now);
			conn_gone(c, QHCA_IW_ST_TIMEOUT);
		}
	}
	reap(e);
}

uint64_t qhca_iw_deadline(const struct qhca_engine *e)
{
	const struct qhca_iw *iw = e->iw;
	uint64_t next = UINT64_MAX;
	uint32_t i;

	if (!iw)
		return next;
	if (iw->reap_due)
		return 0;
	for (i = 0; i < iw->nlive; i++) {
		const struct iw_conn *c = &iw->conn[iw->live[i]];
		uint64_t d;

		if (!c->tcp)
			continue;
		d = qtcp_next_deadline(c->tcp);
		if (d < next)
			next = d;
		if ((c->state == IWC_MPA_WAIT || c->state == IWC_REQ_PENDING ||
		     (c->state == IWC_RTS && c->tx_hold)) && c->mpa_deadline < next)
			next = c->mpa_deadline;
		if (c->close_deadline < next && c->tcp->state != QTCP_TIME_WAIT)
			next = c->close_deadline;
	}
	return next;
}

/* ---------------------------------------------------------------- commands */
static bool port_ok(uint16_t port)
{
	return port != 0;
}

uint16_t qhca_iw_listen(struct qhca_engine *e, const struct qhca_iw_listen *a, uint32_t *handle)
{
	struct qhca_iw *iw = e->iw;
	struct iw_listener *l;
	enum lsn_kind k;
	uint32_t h;
	unsigned i;

	if (!iw)
		return QHCA_ST_BAD_STATE;
	if (!port_ok(a->port) || !a->backlog || a->backlog > QHCA_IW_MAX_BACKLOG ||
	    (a->flags & ~QHCA_IW_V6ONLY))
		return QHCA_ST_BAD_FIELD;
	/* V6ONLY on an IPv4 address is a contradiction; on one IPv6 address it changes
	 * nothing, as on a socket (rdma_cm sets afonly on every listener of nvmet, nfsd) */
	if ((a->flags & QHCA_IW_V6ONLY) && addr_is_v4(a->addr))
		return QHCA_ST_BAD_FIELD;
	k = lsn_kind(a->addr, a->flags & QHCA_IW_V6ONLY);
	for (i = 0; i < QHCA_IW_MAX_LISTEN; i++) {
		const struct iw_listener *o = &iw->lsn[i];
		enum lsn_kind ok = lsn_kind(o->addr, o->v6only);

		/* two listeners of one port may not share an address (EADDRINUSE) */
		if (o->handle && o->port == a->port &&
		    ((k == LSN_ONE && lsn_covers(o->addr, ok, a->addr)) ||
		     (ok == LSN_ONE && lsn_covers(a->addr, k, o->addr)) ||
		     (k != LSN_ONE && ok != LSN_ONE &&
		      (k == ok || k == LSN_ANY || ok == LSN_ANY))))
			return QHCA_ST_BUSY;
	}
	h = qhca_obj_alloc(&iw->lsn_table, 0);
	if (!h)
		return QHCA_ST_NO_RESOURCES;
	l = &iw->lsn[qhca_obj_lookup(&iw->lsn_table, h)];
	l->handle = h;
	memcpy(l->addr, a->addr, 16);
	l->port = a->port;
	l->backlog = a->backlog;
	l->pending = 0;
	l->v6only = a->flags & QHCA_IW_V6ONLY;
	*handle = h;
	qhca_step(e, "iw listen=0x%x port %u backlog %u", h, a->port, a->backlog);
	return QHCA_ST_OK;
}

uint16_t qhca_iw_unlisten(struct qhca_engine *e, uint32_t handle)
{
	struct iw_listener *l = e->iw ? listener_find(e, handle) : NULL;
	uint32_t i = 0;

	if (!l)
		return QHCA_ST_BAD_HANDLE;
	qhca_step(e, "iw listen=0x%x ends", handle);
	/* Its connections not handed out go: a RST; one the driver was told of and has not
	 * answered ends with its CLOSED event (reap). */
	while (i < e->iw->nlive) {
		struct iw_conn *c = &e->iw->conn[e->iw->live[i]];

		if (c->listener != handle) {
			i++;
			continue;
		}
		unpend(c);
		c->listener = 0;
		if (!c->announced) {
			qtcp_abort(c->tcp, now_ns(e));
			conn_free(e, c);	/* the last live one moves to i */
			continue;
		}
		if (c->state == IWC_REQ_PENDING) {
			qtcp_abort(c->tcp, now_ns(e));
			conn_gone(c, QHCA_IW_ST_LOCAL);
		}
		i++;
	}
	reap(e);
	l->handle = 0;
	qhca_obj_free(&e->iw->lsn_table, handle);
	return QHCA_ST_OK;
}

static bool conn_args_ok(const struct qhca_iw_conn *a)
{
	static const uint8_t zero[sizeof(a->rsvd)];

	/* RFC 6581's IRD/ORD take 4 of MPA's 512 bytes of private data */
	return a->pd_len <= QHCA_IW_PD_MAX - 4 && a->ird <= QHCA_IW_MAX_RD &&
	       a->ord <= QHCA_IW_MAX_RD && !(a->flags & ~(QHCA_IW_ABORT | QHCA_IW_P2P)) &&
	       !memcmp(a->rsvd, zero, sizeof(zero));
}

uint16_t qhca_iw_connect(struct qhca_engine *e, uint32_t qpn, const struct qhca_iw_conn *a,
			 uint32_t *handle)
{
	struct qhca_qp *qp = qhca_qp_find(e, qpn);
	struct iw_tcp_seg t;
	struct iw_conn *c;

	if (!e->iw)
		return QHCA_ST_BAD_STATE;
	if (!qp)
		return QHCA_ST_BAD_HANDLE;
	if (qp->type != QHCA_QPT_RC || qp->state != QHCA_QPS_INIT)
		return QHCA_ST_BAD_STATE;
	if (qp->iw_conn)
		return QHCA_ST_BUSY;
	if (!conn_args_ok(a) || !port_ok(a->local_port) || !port_ok(a->remote_port) ||
	    (a->flags & QHCA_IW_ABORT) || roce_gid_is_v4(a->local_addr) !=
	    roce_gid_is_v4(a->remote_addr) || (a->dmac[0] & 1))
		return QHCA_ST_BAD_FIELD;
	memset(&t, 0, sizeof(t));
	memcpy(t.smac, e->mac, 6);
	memcpy(t.dmac, a->dmac, 6);
	/* to our own address: looped back, whatever MAC the driver resolved it to (one the
	 * port had before a SET_MAC): a peer on the wire would be a martian's */
	if (!memcmp(a->local_addr, a->remote_addr, 16))
		memcpy(t.dmac, e->mac, 6);
	memcpy(t.sgid, a->local_addr, 16);
	memcpy(t.dgid, a->remote_addr, 16);
	t.ipv6 = !roce_gid_is_v4(a->local_addr);
	t.sport = a->local_port;
	t.dport = a->remote_port;
	{
		struct iw_tcp_seg probe = t;	/* as a reply would come */

		memcpy(probe.sgid, t.dgid, 16);
		memcpy(probe.dgid, t.sgid, 16);
		probe.sport = t.dport;
		probe.dport = t.sport;
		if (conn_of_seg(e->iw, &probe, !memcmp(t.dmac, e->mac, 6)))
			return QHCA_ST_BUSY;	/* that 4-tuple is in use */
	}
	c = conn_new(e);
	if (!c)
		return QHCA_ST_NO_RESOURCES;
	c->active = true;
	c->looped = !memcmp(t.dmac, e->mac, 6);	/* as qhca_xmit_frame will loop them */
	c->qpn = qpn;
	c->ird = a->ird;
	c->ord = a->ord;
	c->p2p = a->flags & QHCA_IW_P2P;
	memcpy(c->peer.private_data, a->private_data, a->pd_len);	/* ours, until the reply */
	c->peer.pd_len = a->pd_len;
	if (qtcp_connect(c->tcp, &t, isn_of(e, &t), now_ns(e))) {
		conn_free(e, c);
		return QHCA_ST_BAD_FIELD;
	}
	hash_add(e->iw, c);
	c->announced = true;
	qp->iw_conn = c->handle;	/* bound from now: the QP's second connect is BUSY */
	qhca_timer_update(e);
	*handle = c->handle;
	return QHCA_ST_OK;
}

uint16_t qhca_iw_accept(struct qhca_engine *e, uint32_t handle, const struct qhca_iw_conn *a)
{
	struct iw_conn *c = e->iw ? conn_find(e, handle) : NULL;
	struct qhca_qp *qp;

	if (!c)
		return QHCA_ST_BAD_HANDLE;
	if (c->state != IWC_REQ_PENDING)
		return QHCA_ST_BAD_STATE;
	if (!conn_args_ok(a) || (a->flags & QHCA_IW_ABORT))
		return QHCA_ST_BAD_FIELD;
	qp = qhca_qp_find(e, a->qpn);
	if (!qp)
		return QHCA_ST_BAD_HANDLE;
	if (qp->type != QHCA_QPT_RC || qp->state != QHCA_QPS_INIT)
		return QHCA_ST_BAD_STATE;
	if (qp->iw_conn)
		return QHCA_ST_BUSY;	/* bound to another connection */
	c->qpn = a->qpn;
	c->ird = a->ird;
	c->ord = c->peer_enhanced && c->peer.ird < a->ord ? c->peer.ird : a->ord;
	c->p2p = (c->peer.flags & QHCA_IW_P2P) != 0;
	if (!rdma_mode(c, qp))
		return QHCA_ST_NO_RESOURCES;
	unpend(c);
	c->tx_hold = true;
	c->mpa_deadline = now_ns(e) + IW_RESPONDER_HOLD_NS;
	mpa_send(c, true, false, a->private_data, a->pd_len);
	if (c->state == IWC_RTS)
		req_run(c, qp);		/* WQEs posted before the accept go now */
	qtcp_rx_resume(c->tcp, now_ns(e));
	reap(e);
	qhca_timer_update(e);
	return QHCA_ST_OK;
}

uint16_t qhca_iw_reject(struct qhca_engine *e, uint32_t handle, const struct qhca_iw_conn *a)
{
	struct iw_conn *c = e->iw ? conn_find(e, handle) : NULL;

	if (!c)
		return QHCA_ST_BAD_HANDLE;
	if (c->state != IWC_REQ_PENDING)
		return QHCA_ST_BAD_STATE;
	if (!conn_args_ok(a))
		return QHCA_ST_BAD_FIELD;
	mpa_send(c, true, true, a->private_data, a->pd_len);
	conn_gone(c, QHCA_IW_ST_REJECTED);
	qtcp_close(c->tcp, now_ns(e));
	reap(e);
	qhca_timer_update(e);
	return QHCA_ST_OK;
}

uint16_t qhca_iw_query(struct qhca_engine *e, uint32_t handle, struct qhca_iw_conn *out)
{
	struct iw_conn *c = e->iw ? conn_find(e, handle) : NULL;
	const struct iw_tcp_seg *t;

	if (!c)
		return QHCA_ST_BAD_HANDLE;
	t = conn_tmpl(c);
	*out = c->peer;		/* the peer's private data, IRD/ORD, revision, flags */
	memcpy(out->local_addr, t->sgid, 16);
	memcpy(out->remote_addr, t->dgid, 16);
	out->local_port = t->sport;
	out->remote_port = t->dport;
	memcpy(out->dmac, t->dmac, 6);
	out->qpn = c->qpn;
	out->listener = c->listener;
	if (c->active && !c->replied) {
		out->pd_len = 0;	/* no reply yet: ours is not the peer's */
		memset(out->private_data, 0, sizeof(out->private_data));
	}
	memset(out->rsvd, 0, sizeof(out->rsvd));
	return QHCA_ST_OK;
}

uint16_t qhca_iw_disconnect(struct qhca_engine *e, uint32_t handle, const struct qhca_iw_conn *a)
{
	struct iw_conn *c = e->iw ? conn_find(e, handle) : NULL;

	if (!c)
		return QHCA_ST_BAD_HANDLE;
	if (!conn_args_ok(a) || (a->flags & ~QHCA_IW_ABORT))
		return QHCA_ST_BAD_FIELD;
	qhca_step(e, "iw conn=0x%x disconnect flags %u state %u tcp %s", handle, a->flags,
		  c->state, c->tcp ? qtcp_state_name(c->tcp->state) : "gone");
	if (c->state == IWC_CLOSED) {	/* the driver is done with it: the handle goes */
		conn_free(e, c);
		return QHCA_ST_OK;
	}
	if (a->flags & QHCA_IW_ABORT) {
		qtcp_abort(c->tcp, now_ns(e));
	} else {
		struct qhca_qp *qp = c->state == IWC_RTS ? qp_of(c) : NULL;

		/* what a responder held for the initiator's first FPDU goes before the FIN */
		if (qp && c->tx_hold) {
			c->tx_hold = false;
			req_run(c, qp);
		}
		qtcp_close(c->tcp, now_ns(e));
	}
	if (c->state != IWC_CLOSING)
		conn_gone(c, QHCA_IW_ST_LOCAL);
	reap(e);
	qhca_timer_update(e);
	return QHCA_ST_OK;
}

struct qhca_iw_conn *qhca_iw_scratch(struct qhca_engine *e)
{
	return e->iw ? &e->iw->scratch : NULL;
}

/* ---------------------------------------------------------------- set-up */
int qhca_iw_init(struct qhca_engine *e)
{
	struct qhca_iw *iw;

	if (e->cfg.link != QHCA_LINK_IWARP)
		return 0;
	iw = calloc(1, sizeof(*iw));
	if (!iw)
		return -1;
	iw->conn = calloc(QHCA_IW_MAX_CONN, sizeof(*iw->conn));
	if (!iw->conn || qhca_obj_table_init(&iw->conn_table, QHCA_IW_MAX_CONN) ||
	    qhca_obj_table_init(&iw->lsn_table, QHCA_IW_MAX_LISTEN)) {
		qhca_obj_table_fini(&iw->conn_table);
		free(iw->conn);
		free(iw);
		return -1;
	}
	qtcp_config_default(&iw->tcfg);
	iw->tcfg.mtu = 1500;	/* Ethernet's, as the peers' (siw on a virtio-net NIC) */
	e->iw = iw;
	return 0;
}

void qhca_iw_tcp_counts(const struct qhca_engine *e, uint64_t *retransmits, uint64_t *timeouts)
{
	const struct qhca_iw *iw = e->iw;
	uint32_t i;

	*retransmits = iw ? iw->gone_retransmits : 0;
	*timeouts = iw ? iw->gone_timeouts : 0;
	for (i = 0; iw && i < iw->nlive; i++) {
		const struct iw_conn *c = &iw->conn[iw->live[i]];

		if (c->tcp) {
			*retransmits += c->tcp->stats.retransmits;
			*timeouts += c->tcp->stats.timeouts;
		}
	}
}

/* Every connection reset, every listener gone (device reset). */
void qhca_iw_reset(struct qhca_engine *e)
{
	struct qhca_iw *iw = e->iw;

	if (!iw)
		return;
	while (iw->nlive)
		conn_free(e, &iw->conn[iw->live[0]]);
	iw->half_open = 0;
	qhca_obj_table_clear(&iw->conn_table);
	memset(iw->lsn, 0, sizeof(iw->lsn));
	qhca_obj_table_clear(&iw->lsn_table);
}

void qhca_iw_fini(struct qhca_engine *e)
{
	struct qhca_iw *iw = e->iw;

	if (!iw)
		return;
	while (iw->nlive)
		conn_free(e, &iw->conn[iw->live[0]]);
	qhca_obj_table_fini(&iw->conn_table);
	qhca_obj_table_fini(&iw->lsn_table);
	free(iw->conn);
	free(iw);
	e->iw = NULL;
}
