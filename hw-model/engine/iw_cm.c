// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The iWARP port's connections (link=iwarp, iw_conn.h): TCP that the device terminates (tcp.c), MPA's
 * connection set-up (RFC 5044 with RFC 6581, iwarp.c), and the admin commands and events
 * by which the driver runs them for iw_cm (QHCA_CMD_IW_*, QHCA_EVENT_IW_*).
 *
 * A connection is a slot of a table of QHCA_IW_MAX_CONN, its handle the table's (with the
 * slot's generation), found from a received segment by its 4-tuple through a keyed hash of
 * chains; those with a deadline are a heap, those whose TCP ended a queue to reap, so no
 * segment, doorbell or tick walks them all. Listeners are a small table of their own. Every frame that is not a TCP segment
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

#include "iw_conn.h"

static const uint8_t zero_addr[16];

static void reap(struct qhca_engine *e);
static bool rdma_mode(struct iw_conn *c, struct qhca_qp *qp);

/* ---------------------------------------------------------------- lookup */
/*
 * The chain of a 4-tuple: SipHash-2-4 of it under a key of the device's (hash_key), so a
 * peer that chooses its ports (or addresses) cannot aim them at one chain: without the key
 * it cannot tell which 4-tuples share one, and the chains stay about as long as the
 * connections over IW_HASH, whatever it sends. (An unkeyed mix let a peer put 1024
 * connections in one chain: test-iw-cm conn_hash_chains; a key of constants, or the
 * ISNs' own, conn_hash_keyed_by_secret and isn_tells_no_chain.)
 */
static uint32_t tuple_hash(const struct qhca_iw *iw, const uint8_t *laddr, uint16_t lport,
			   const uint8_t *raddr, uint16_t rport)
{
	uint8_t m[36];

	memcpy(m, laddr, 16);
	memcpy(m + 16, raddr, 16);
	m[32] = (uint8_t)(lport >> 8);
	m[33] = (uint8_t)lport;
	m[34] = (uint8_t)(rport >> 8);
	m[35] = (uint8_t)rport;
	return (uint32_t)qhca_siphash24(iw->hash_key[0], iw->hash_key[1], m, sizeof(m)) &
	       (IW_HASH - 1);
}

/*
 * The hash's key, from the device's ISN secret (the only secret it has for iWARP) through
 * SipHash of two constants, so that the key of the ISNs (RFC 6528) and the hash's differ:
 * what timing could tell a peer of one says nothing of the other.
 */
static void hash_key_init(struct qhca_iw *iw, const uint64_t secret[2])
{
	static const uint8_t k0[] = "qhca iWARP 4-tuple hash key 0";
	static const uint8_t k1[] = "qhca iWARP 4-tuple hash key 1";

	iw->hash_key[0] = qhca_siphash24(secret[0], secret[1], k0, sizeof(k0) - 1);
	iw->hash_key[1] = qhca_siphash24(secret[0], secret[1], k1, sizeof(k1) - 1);
}

/* The connection's addresses: TCP's, or the copy kept after its TCP went at CLOSED. */
static const struct iw_tcp_seg *conn_tmpl(const struct iw_conn *c)
{
	return c->tcp ? &c->tcp->tmpl : &c->tmpl;
}

static uint32_t conn_hash(const struct qhca_iw *iw, const struct iw_conn *c)
{
	const struct iw_tcp_seg *t = conn_tmpl(c);

	return tuple_hash(iw, t->sgid, t->sport, t->dgid, t->dport);
}

static void hash_add(struct qhca_iw *iw, struct iw_conn *c)
{
	uint32_t b = conn_hash(iw, c);

	c->hnext = iw->hash[b];
	iw->hash[b] = (uint32_t)(c - iw->conn) + 1;
}

static void hash_del(struct qhca_iw *iw, struct iw_conn *c)
{
	uint32_t *at = &iw->hash[conn_hash(iw, c)], me = (uint32_t)(c - iw->conn) + 1;

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
	uint32_t i = iw->hash[tuple_hash(iw, s->dgid, s->dport, s->sgid, s->sport)];

	while (i) {
		struct iw_conn *c = &iw->conn[i - 1];
		const struct iw_tcp_seg *t = &c->tcp->tmpl;

		iw->steps++;
		if (t->sport == s->dport && t->dport == s->sport && !memcmp(t->sgid, s->dgid, 16) &&
		    !memcmp(t->dgid, s->sgid, 16) && c->looped == looped)
			return c;
		i = c->hnext;
	}
	return NULL;
}

struct iw_conn *iw_conn_find(struct qhca_engine *e, uint32_t handle)
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
void iw_closing(struct iw_conn *c)
{
	if (c->close_deadline == UINT64_MAX)
		c->close_deadline = iw_now_ns(c->e) + IW_CLOSE_TIMEOUT_NS;
}

/* The end of the connection's TCP: tell the driver, once. */
void iw_conn_gone(struct iw_conn *c, uint8_t status)
{
	struct qhca_iw *iw = c->e->iw;

	if (c->state == IWC_FREE || c->gone)
		return;			/* the first end's status is the one told */
	unpend(c);
	iw_closing(c);
	if (c->state == IWC_RTS && status != QHCA_IW_ST_OK && status != QHCA_IW_ST_LOCAL) {
		/* reset, timed out or broken under RDMA: the QP to error, as an RNIC's */
		struct qhca_qp *qp = iw_qp_of(c);

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
	if (!n || !iw_tcp_queue(c, buf, n)) {
		qhca_log(c->e, QHCA_LOG_EVENT, "iWARP connection 0x%x: MPA %s not sent",
			 c->handle, reply ? "reply" : "request");
		qtcp_abort(c->tcp, iw_now_ns(c->e));
		iw_conn_gone(c, QHCA_IW_ST_PROTOCOL);
	}
}

static void tcp_connected(void *opaque)
{
	struct iw_conn *c = opaque;

	c->state = IWC_MPA_WAIT;
	c->mpa_deadline = iw_now_ns(c->e) + IW_MPA_TIMEOUT_NS;
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
			/* our FIN may wait behind the request for a window the peer never
			 * opens: the close's deadline ends it (test-iw-cm
			 * rejected_connect_bounded) */
			iw_closing(c);
			qtcp_close(c->tcp, iw_now_ns(c->e));
			return;
		}
		c->mpa_deadline = UINT64_MAX;
		qp = qhca_qp_find(c->e, c->qpn);
		if (!qp || qp->iw_conn != c->handle || qp->state != QHCA_QPS_INIT ||
		    !rdma_mode(c, qp)) {
			qtcp_abort(c->tcp, iw_now_ns(c->e));
			iw_conn_gone(c, QHCA_IW_ST_LOCAL);
			return;
		}
		conn_event(c, QHCA_EVENT_IW_CONNECT_REPLY, QHCA_IW_ST_OK);
		iw_req_run(c, qp);		/* WQEs posted before the reply go now */
		return;
	}
	c->state = IWC_REQ_PENDING;
	c->mpa_deadline = iw_now_ns(c->e) + IW_ANSWER_TIMEOUT_NS;
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
		return iw_rx_stream(c, p, n);
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
		qtcp_abort(c->tcp, iw_now_ns(c->e));
		iw_conn_gone(c, QHCA_IW_ST_PROTOCOL);
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
		iw_closing(c);
		qtcp_close(c->tcp, iw_now_ns(c->e));
		return;
	}
	/* Before RDMA mode a FIN ends the set-up: a RST, so the slot and its TCP go at once
	 * (a FIN of ours would leave them in LAST_ACK for a peer that never acknowledges it,
	 * uncounted by the half-open bound) */
	if (c->gone) {		/* ours went first (a REJECT, a refused request): done */
		qtcp_close(c->tcp, iw_now_ns(c->e));
		return;
	}
	iw_conn_gone(c, QHCA_IW_ST_RESET);
	qtcp_abort(c->tcp, iw_now_ns(c->e));
}

static void tcp_closed(void *opaque)
{
	qhca_step(((struct iw_conn *)opaque)->e, "iw conn=0x%x TCP closed",
		  ((struct iw_conn *)opaque)->handle);
	iw_conn_gone(opaque, QHCA_IW_ST_OK);
}

static void tcp_reset(void *opaque)
{
	struct iw_conn *c = opaque;

	qhca_step(c->e, "iw conn=0x%x TCP reset in state %u", c->handle, c->state);
	if (c->state != IWC_TCP)	/* a refused connect is no news */
		qhca_log_guest(c->e, "iWARP connection 0x%x: reset by the peer", c->handle);
	iw_conn_gone(c, c->state == IWC_TCP ? QHCA_IW_ST_REFUSED : QHCA_IW_ST_RESET);
}

static void tcp_error(void *opaque, enum qtcp_error err)
{
	struct iw_conn *c = opaque;

	qhca_step(c->e, "iw conn=0x%x TCP error \"%s\"", c->handle, qtcp_error_name(err));
	qhca_log_guest(c->e, "iWARP connection 0x%x: TCP gave up: %s", c->handle,
		       qtcp_error_name(err));
	iw_conn_gone(c, QHCA_IW_ST_TIMEOUT);
}

static const struct qtcp_ops tcp_ops = {
	.xmit = tcp_xmit,
	.deliver = tcp_deliver,
	.connected = tcp_connected,
	.acked = iw_tcp_acked,
	.peer_closed = tcp_peer_closed,
	.closed = tcp_closed,
	.reset = tcp_reset,
	.error = tcp_error,
};

/* ---------------------------------------------------------------- the QP's binding */
struct qhca_qp *iw_qp_of(struct iw_conn *c)
{
	struct qhca_qp *qp = c->qpn ? qhca_qp_find(c->e, c->qpn) : NULL;

	return qp && qp->iw_conn == c->handle ? qp : NULL;
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

void qhca_iw_qp_gone(struct qhca_engine *e, struct qhca_qp *qp)
{
	struct iw_conn *c = e->iw && qp->iw_conn ? iw_conn_find(e, qp->iw_conn) : NULL;

	qp->iw_conn = 0;
	if (!c || c->qpn != qp->qpn)
		return;
	qhca_step(e, "iw conn=0x%x QP 0x%x gone in state %u", c->handle, qp->qpn, c->state);
	c->qpn = 0;
	/* A Terminate already on its way closes the connection after it; else a RST. It
	 * may be inside one of TCP's callbacks: the slot is freed later (the reap queue,
	 * from the timer). */
	if (!c->terminated && c->state != IWC_CLOSING) {
		qtcp_abort(c->tcp, iw_now_ns(e));
		iw_conn_gone(c, QHCA_IW_ST_LOCAL);
	}
	iw_sched(c);		/* reaped from the timer, at once, if its TCP is CLOSED */
	qhca_timer_update(e);
}

/* ---------------------------------------------------------------- deadlines */
/*
 * The connections with a deadline are a binary min-heap on their due time (iw_conn.due), as
 * the QPs' are (xmit.c): the earliest at heap[0], the children of entry i at 2i + 1 and
 * 2i + 2, each connection knowing its place (heap_idx, + 1). A segment, a doorbell or a
 * command moves one connection's deadline in O(log n) steps; the engine's next deadline is
 * at hand. Room for every connection (QHCA_IW_MAX_CONN), in the iWARP state.
 */
static void heap_put(struct qhca_iw *iw, uint32_t i, uint32_t slot)
{
	iw->heap[i] = slot;
	iw->conn[slot].heap_idx = i + 1;
}

static void heap_up(struct qhca_iw *iw, uint32_t i, uint32_t slot)
{
	uint64_t due = iw->conn[slot].due;

	while (i) {
		uint32_t parent = (i - 1) / 2;

		iw->steps++;
		if (iw->conn[iw->heap[parent]].due <= due)
			break;
		heap_put(iw, i, iw->heap[parent]);
		i = parent;
	}
	heap_put(iw, i, slot);
}

static void heap_down(struct qhca_iw *iw, uint32_t i, uint32_t slot)
{
	uint64_t due = iw->conn[slot].due;

	for (;;) {
		uint32_t k = 2 * i + 1;

		if (k >= iw->heap_n)
			break;
		iw->steps++;
		if (k + 1 < iw->heap_n && iw->conn[iw->heap[k + 1]].due < iw->conn[iw->heap[k]].due)
			k++;
		if (due <= iw->conn[iw->heap[k]].due)
			break;
		heap_put(iw, i, iw->heap[k]);
		i = k;
	}
	heap_put(iw, i, slot);
}

static void heap_fix(struct qhca_iw *iw, uint32_t i, uint32_t slot)
{
	if (i && iw->conn[iw->heap[(i - 1) / 2]].due > iw->conn[slot].due)
		heap_up(iw, i, slot);
	else
		heap_down(iw, i, slot);
}

/* @c's deadline is @due now (UINT64_MAX: none): into the heap, moved in it, or out. */
static void conn_set_due(struct qhca_iw *iw, struct iw_conn *c, uint64_t due)
{
	uint32_t slot = (uint32_t)(c - iw->conn);

	if (due == c->due && (c->heap_idx != 0) == (due != UINT64_MAX))
		return;
	c->due = due;
	if (due == UINT64_MAX) {
		if (c->heap_idx) {
			uint32_t i = c->heap_idx - 1, last = iw->heap[--iw->heap_n];

			c->heap_idx = 0;
			if (last != slot)
				heap_fix(iw, i, last);	/* the last entry fills the hole */
		}
	} else if (c->heap_idx) {
		heap_fix(iw, c->heap_idx - 1, slot);
	} else if (iw->heap_n < QHCA_IW_MAX_CONN) {
		heap_up(iw, iw->heap_n++, slot);
	}
}

/* The earliest of the connection's deadlines: TCP's timers; MPA's while the peer's frame
 * or the driver's answer is awaited, or a responder holds its FPDUs; the close's until
 * TCP is in TIME_WAIT (bounded by TCP itself). None once TCP is CLOSED: reaped then.
 * Counted in qhca_iw.steps: a walk of the connections' deadlines (the scan the heap
 * replaced) shows in test-iw-cm conn_work_scale whatever loop makes it. */
static uint64_t conn_due(const struct iw_conn *c)
{
	uint64_t d;

	c->e->iw->steps++;
	if (c->state == IWC_FREE || c->state == IWC_CLOSED || !c->tcp ||
	    c->tcp->state == QTCP_CLOSED)
		return UINT64_MAX;
	d = qtcp_next_deadline(c->tcp);
	if ((c->state == IWC_MPA_WAIT || c->state == IWC_REQ_PENDING ||
	     (c->state == IWC_RTS && c->tx_hold)) && c->mpa_deadline < d)
		d = c->mpa_deadline;
	if (c->close_deadline < d && c->tcp->state != QTCP_TIME_WAIT)
		d = c->close_deadline;
	return d;
}

void iw_sched(struct iw_conn *c)
{
	struct qhca_iw *iw = c->e->iw;

	if (c->state != IWC_FREE && c->state != IWC_CLOSED && c->tcp &&
	    c->tcp->state == QTCP_CLOSED && !c->reap_queued &&
	    iw->reap_n < QHCA_IW_MAX_CONN) {
		c->reap_queued = true;
		iw->reap_q[(iw->reap_head + iw->reap_n++) % QHCA_IW_MAX_CONN] =
			(uint32_t)(c - iw->conn);
	}
	conn_set_due(iw, c, conn_due(c));
}

/* ---------------------------------------------------------------- connections */
/* RFC 6528: a 4-microsecond clock plus a keyed PRF of the 4-tuple, in @t's order: as we
 * send it (the active side's template), or as the peer's SYN came, its source first (the
 * passive side). Either names the 4-tuple; its active and passive uses get different
 * offsets. */
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
	       (uint32_t)(iw_now_ns(e) / 4000);
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
	c->due = UINT64_MAX;		/* not in the heap: a freed slot leaves it */
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
	conn_set_due(e->iw, c, UINT64_MAX);	/* no TCP, no timers */
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
	struct qhca_qp *qp = iw_qp_of(c);
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

/* The connections whose TCP is done (queued by iw_sched), and only those: the CLOSED
 * event, and the slot free. Never inside one of TCP's callbacks (it frees the TCP): the
 * entry points call it last, and the timer for what is queued elsewhere. */
static void reap(struct qhca_engine *e)
{
	struct qhca_iw *iw = e->iw;

	while (iw->reap_n) {
		struct iw_conn *c = &iw->conn[iw->reap_q[iw->reap_head]];
		struct qhca_qp *qp;

		iw->reap_head = (iw->reap_head + 1) % QHCA_IW_MAX_CONN;
		iw->reap_n--;
		c->reap_queued = false;
		iw->steps++;
		/* the slot may have been freed, or freed and taken again, since it was queued */
		if (c->state == IWC_FREE || c->state == IWC_CLOSED || !c->tcp ||
		    c->tcp->state != QTCP_CLOSED)
			continue;
		iw_conn_gone(c, QHCA_IW_ST_RESET);
		/* The LLP is closed: a QP still bound goes to error, its WQEs flushed, as
		 * iw_cm's CLOSE expects of the provider (rdma_disconnect on iWARP asks only for
		 * SQD; a receive left posted completes flushed). No async event: not a fault. */
		qp = iw_qp_of(c);
		if (qp)
			qhca_qp_error(e, qp, 0);
		if (!c->announced) {
			conn_free(e, c);
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
		qtcp_input(c->tcp, &s, iw_now_ns(e));
		iw_sched(c);
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
	if (qtcp_accept(c->tcp, &s, isn_of(e, &s), iw_now_ns(e))) {
		conn_free(e, c);
		return true;
	}
	c->pending = true;
	l->pending++;
	iw->half_open++;
	hash_add(iw, c);
	iw_sched(c);
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

/* A connection's deadlines that passed at @now: TCP's timers, MPA's, the close's. */
static void conn_timer(struct iw_conn *c, uint64_t now)
{
	struct qhca_engine *e = c->e;

	if (qtcp_next_deadline(c->tcp) <= now)
		qtcp_timer(c->tcp, now);
	if (c->state == IWC_RTS && c->tx_hold && c->mpa_deadline <= now) {
		struct qhca_qp *qp = iw_qp_of(c);

		c->tx_hold = false;	/* no FPDU came: the responder speaks first */
		if (qp)
			iw_req_run(c, qp);
	}
	if ((c->state == IWC_MPA_WAIT || c->state == IWC_REQ_PENDING) &&
	    c->mpa_deadline <= now) {
		qhca_log_guest(e, "iWARP connection 0x%x: no %s in time", c->handle,
			       c->state == IWC_REQ_PENDING ? "answer from the driver" :
			       c->active ? "MPA reply" : "MPA request");
		qtcp_abort(c->tcp, now);
		iw_conn_gone(c, QHCA_IW_ST_TIMEOUT);
	}
	if (c->close_deadline <= now && c->tcp->state != QTCP_CLOSED &&
	    c->tcp->state != QTCP_TIME_WAIT) {
		qhca_log_guest(e, "iWARP connection 0x%x: not closed in time: reset",
			       c->handle);
		qtcp_abort(c->tcp, now);
		iw_conn_gone(c, QHCA_IW_ST_TIMEOUT);
	}
}

/*
 * The connections whose deadline passed, earliest first, from the heap (those not due cost
 * nothing); each leaves with its next deadline in the future (TCP sets its timers after
 * now, MPA's and the close's end their state), or none. The budget only guards against a
 * connection that would not: at most one pass over the connections a tick.
 */
void qhca_iw_timer(struct qhca_engine *e, uint64_t now)
{
	struct qhca_iw *iw = e->iw;
	unsigned budget = QHCA_IW_MAX_CONN;

	if (!iw)
		return;
	while (iw->heap_n && budget--) {
		struct iw_conn *c = &iw->conn[iw->heap[0]];

		if (c->due > now)
			break;
		iw->steps++;
		conn_timer(c, now);
		iw_sched(c);
	}
	reap(e);
}

/* When the iWARP port wants the timer: at once for connections to reap, else the heap's
 * earliest. O(1). */
uint64_t qhca_iw_deadline(const struct qhca_engine *e)
{
	const struct qhca_iw *iw = e->iw;

	if (!iw)
		return UINT64_MAX;
	if (iw->reap_n)
		return 0;
	return iw->heap_n ? iw->conn[iw->heap[0]].due : UINT64_MAX;
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
			qtcp_abort(c->tcp, iw_now_ns(e));
			conn_free(e, c);	/* the last live one moves to i */
			continue;
		}
		if (c->state == IWC_REQ_PENDING) {
			qtcp_abort(c->tcp, iw_now_ns(e));
			iw_conn_gone(c, QHCA_IW_ST_LOCAL);
			iw_sched(c);
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
	if (qtcp_connect(c->tcp, &t, isn_of(e, &t), iw_now_ns(e))) {
		conn_free(e, c);
		return QHCA_ST_BAD_FIELD;
	}
	hash_add(e->iw, c);
	c->announced = true;
	qp->iw_conn = c->handle;	/* bound from now: the QP's second connect is BUSY */
	iw_sched(c);
	qhca_timer_update(e);
	*handle = c->handle;
	return QHCA_ST_OK;
}

uint16_t qhca_iw_accept(struct qhca_engine *e, uint32_t handle, const struct qhca_iw_conn *a)
{
	struct iw_conn *c = e->iw ? iw_conn_find(e, handle) : NULL;
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
	c->mpa_deadline = iw_now_ns(e) + IW_RESPONDER_HOLD_NS;
	mpa_send(c, true, false, a->private_data, a->pd_len);
	if (c->state == IWC_RTS)
		iw_req_run(c, qp);		/* WQEs posted before the accept go now */
	qtcp_rx_resume(c->tcp, iw_now_ns(e));
	iw_sched(c);
	reap(e);
	qhca_timer_update(e);
	return QHCA_ST_OK;
}

uint16_t qhca_iw_reject(struct qhca_engine *e, uint32_t handle, const struct qhca_iw_conn *a)
{
	struct iw_conn *c = e->iw ? iw_conn_find(e, handle) : NULL;

	if (!c)
		return QHCA_ST_BAD_HANDLE;
	if (c->state != IWC_REQ_PENDING)
		return QHCA_ST_BAD_STATE;
	if (!conn_args_ok(a))
		return QHCA_ST_BAD_FIELD;
	mpa_send(c, true, true, a->private_data, a->pd_len);
	iw_conn_gone(c, QHCA_IW_ST_REJECTED);
	qtcp_close(c->tcp, iw_now_ns(e));
	iw_sched(c);
	reap(e);
	qhca_timer_update(e);
	return QHCA_ST_OK;
}

uint16_t qhca_iw_query(struct qhca_engine *e, uint32_t handle, struct qhca_iw_conn *out)
{
	struct iw_conn *c = e->iw ? iw_conn_find(e, handle) : NULL;
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
	struct iw_conn *c = e->iw ? iw_conn_find(e, handle) : NULL;

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
		qtcp_abort(c->tcp, iw_now_ns(e));
	} else {
		struct qhca_qp *qp = c->state == IWC_RTS ? iw_qp_of(c) : NULL;

		/* what a responder held for the initiator's first FPDU goes before the FIN */
		if (qp && c->tx_hold) {
			c->tx_hold = false;
			iw_req_run(c, qp);
		}
		qtcp_close(c->tcp, iw_now_ns(e));
	}
	if (c->state != IWC_CLOSING)
		iw_conn_gone(c, QHCA_IW_ST_LOCAL);
	iw_sched(c);
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
	iw->tcfg.mtu = 1500;
	hash_key_init(iw, e->cfg.isn_secret);	/* Ethernet's, as the peers' (siw on a virtio-net NIC) */
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

/*
 * For the tests and the fuzzers: is the bookkeeping of the connections right? Every live
 * connection's due time as conn_due computes it, in the heap exactly when it has one and
 * at the place it notes, the heap ordered; the reap queue holding each slot at most once,
 * exactly the slots flagged as queued (a flag left set keeps a reused slot out for ever);
 * every connection whose TCP is CLOSED queued for reaping; the hash's chains holding
 * exactly the connections not yet CLOSED. NULL if so, else what is wrong.
 * O(connections): never called by the device itself (its conn_due calls count in
 * qhca_iw.steps, which the tests read across the device's own calls only).
 */
const char *qhca_iw_check(const struct qhca_engine *e)
{
	const struct qhca_iw *iw = e->iw;
	uint32_t i, hashed = 0, in_hash = 0, flagged = 0;
	uint8_t queued[QHCA_IW_MAX_CONN / 8];

	if (!iw)
		return NULL;
	if (iw->heap_n > QHCA_IW_MAX_CONN || iw->reap_n > QHCA_IW_MAX_CONN ||
	    iw->nlive > QHCA_IW_MAX_CONN)
		return "a count past QHCA_IW_MAX_CONN";
	for (i = 0; i < iw->heap_n; i++) {
		const struct iw_conn *c = &iw->conn[iw->heap[i]];

		if (c->heap_idx != i + 1 || c->state == IWC_FREE)
			return "a heap entry that is not its connection's place";
		if (i && iw->conn[iw->heap[(i - 1) / 2]].due > c->due)
			return "the heap out of order";
	}
	/* the reap queue: each slot at most once, and exactly the slots flagged as in it */
	memset(queued, 0, sizeof(queued));
	for (i = 0; i < iw->reap_n; i++) {
		uint32_t s = iw->reap_q[(iw->reap_head + i) % QHCA_IW_MAX_CONN];

		if (s >= QHCA_IW_MAX_CONN || (queued[s / 8] & (1u << s % 8)) ||
		    !iw->conn[s].reap_queued)
			return "a reap queue entry twice, or without its flag";
		queued[s / 8] |= (uint8_t)(1u << s % 8);
	}
	for (i = 0; i < QHCA_IW_MAX_CONN; i++)
		flagged += iw->conn[i].reap_queued;
	if (flagged != iw->reap_n)
		return "a slot flagged as queued for reaping that is not in the queue";
	for (i = 0; i < iw->nlive; i++) {
		const struct iw_conn *c = &iw->conn[iw->live[i]];
		uint64_t d = conn_due(c);

		if (c->due != d || (c->heap_idx != 0) != (d != UINT64_MAX) ||
		    (c->heap_idx && (c->heap_idx > iw->heap_n ||
				     iw->heap[c->heap_idx - 1] != iw->live[i])))
			return "a connection's deadline not in the heap as it is";
		if (c->tcp && c->tcp->state == QTCP_CLOSED && c->state != IWC_CLOSED &&
		    !c->reap_queued)
			return "a connection whose TCP is CLOSED not queued for reaping";
		if (c->state != IWC_CLOSED)
			hashed++;
	}
	for (i = 0; i < IW_HASH; i++) {
		uint32_t k;

		for (k = iw->hash[i]; k; k = iw->conn[k - 1].hnext)
			if (k > QHCA_IW_MAX_CONN || ++in_hash > QHCA_IW_MAX_CONN)
				return "a hash chain that does not end";
	}
	if (in_hash != hashed)
		return "the hash's chains do not hold the connections";
	return NULL;
}

/* Every connection reset, every listener gone (device reset). */
void qhca_iw_reset(struct qhca_engine *e)
{
	struct qhca_iw *iw = e->iw;
	uint32_t i;

	if (!iw)
		return;
	while (iw->nlive)
		conn_free(e, &iw->conn[iw->live[0]]);
	for (i = 0; i < QHCA_IW_MAX_CONN; i++)
		iw->conn[i].reap_queued = false;
	iw->reap_head = iw->reap_n = 0;	/* the heap is empty: every slot left it */
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
