// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Fuzz target: an iWARP port's connections and datapath (iw_cm.c, iw_tx.c, iw_rx.c, tcp.c)
 * as a hostile peer drives them. The target plays the peer's TCP, on either side: the
 * device listens and the peer connects (passive), or the device connects out and the peer
 * answers (active).
 *
 * Input: the first byte chooses the run:
 *   bit 0     side: 0 the device listens on port 4000, 1 it connects to the peer's 5000
 *   bit 1     mode: 0 stream, 1 hostile
 *   bit 2     the driver: accepts a request as soon as it comes (as today's drivers), else
 *             only when an input op says so
 *   bit 3     hostile only: no automatic handshake (the ops open the connection, or not)
 *   bits 4-7  the peer's MSS: 64 + 64 * n bytes
 * then, in stream mode, the peer's byte stream (the MPA request or reply, then FPDUs: what
 * the input holds) as chunks of [1-byte length][bytes] cut into in-order segments whose
 * sequence numbers, acknowledgements and checksums are right, a length of 0xff a timer tick;
 * in hostile mode, ops of [op byte][arguments] (op_* below): in-order data, blind segments
 * of any flags with sequence and acknowledgement numbers anywhere (in and out of the
 * window), RSTs near and far from the expected sequence number, SYNs on the connection,
 * SYN-ACKs to nothing, SYN floods from other ports, a simultaneous open, MPA requests and
 * replies hand-built with any key, flags, revision and private data length (over the
 * 512-byte bound too, and truncated), well-formed FPDUs of any header (correct CRC, or
 * not), floods of 1-byte segments in and out of order, ACKs old and new with any window
 * (zero), FINs, timer ticks, and the driver's commands (accept, reject, disconnect,
 * abort, the QP to error, WQEs posted).
 * The last byte, as in every target, the limits and the trace (fz_input).
 *
 * Bounded per input: at most FZ_IW_SEGS segments from the peer and FZ_IW_TIME of
 * simulated time in ticks (the final drain adds 64 s, the liveness drain at most
 * FZ_IW_LIVENESS_ROUNDS of the port's deadlines in FZ_IW_LIVENESS_TIME); deterministic:
 * nothing but the input chooses. After every op the connections' bookkeeping must hold
 * (qhca_iw_check); at the end, the peer silent, everything must end (liveness()).
 */
#include "fuzz_common.h"
#include "iwarp.h"
#include "iw_conn.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FZ_IW_SEGS	2048			/* segments the peer sends, at most */
#define FZ_IW_TIME	(120 * 1000000000ull)	/* simulated time the ticks advance, at most */
/* The liveness drain: simulated time past every bound (the close's 10 s, MPA's 10 s, the
 * driver's answer 60 s, FIN_WAIT_2's 60 s, TCP's 8 retries or probes at up to 60 s each) */
#define FZ_IW_LIVENESS_TIME	(30 * 60 * 1000000000ull)
#define FZ_IW_LIVENESS_ROUNDS	65536u	/* the port's deadlines it runs, at most */
#define FZ_DEV_PORT	4000
#define FZ_PEER_PORT	5000

static const uint8_t peer_mac[6] = { 0x52, 0x54, 0, 0x51, 0x48, 2 };

/* The peer: its segments' template (addresses, ports, its next sequence number in t.seq),
 * and what it saw of the device on this 4-tuple. */
static struct {
	struct iw_tcp_seg t;
	bool dev_syn;		/* the device's SYN seen: dev_nxt holds */
	bool syn_sent;		/* the peer's own SYN went (t.seq is past it) */
	uint32_t listener;	/* passive: the device's listener */
	uint32_t dev_nxt;	/* the end of what the device sent (the ACK the peer gives) */
	uint32_t segs;		/* segments sent */
	uint64_t ticked;	/* simulated time the ticks advanced */
	uint32_t sq_pi;		/* WQEs posted on the device's QP */
	uint8_t last[2048];	/* the last segment the peer sent, for a replay */
	size_t last_len;
} pr;

static bool seq_after(uint32_t a, uint32_t b)
{
	return (int32_t)(a - b) > 0;
}

/* What the device sent to the peer's 4-tuple: its ISN, the end of its data. */
static void capture(const void *f, size_t l)
{
	struct iw_tcp_seg s;
	uint32_t end;

	if (iw_tcp_parse(f, l, &s) != IW_OK || s.sport != pr.t.dport || s.dport != pr.t.sport)
		return;
	if (s.flags & IW_TCP_RST)
		return;
	end = s.seq + s.payload_len + ((s.flags & IW_TCP_SYN) ? 1 : 0) +
	      ((s.flags & IW_TCP_FIN) ? 1 : 0);
	if ((s.flags & IW_TCP_SYN) && !pr.dev_syn) {
		pr.dev_syn = true;
		pr.dev_nxt = end;
	} else if (pr.dev_syn && seq_after(end, pr.dev_nxt)) {
		pr.dev_nxt = end;
	}
}

/* A segment of the peer: @t's addresses and ports, the rest as given. */
static void send_seg(struct fz_state *st, const struct iw_tcp_seg *t)
{
	size_t len;

	if (pr.segs >= FZ_IW_SEGS)
		return;
	pr.segs++;
	len = iw_tcp_build(t, pr.last, sizeof(pr.last));
	pr.last_len = len;
	if (len)
		qhca_engine_receive(&st->e, pr.last, len);
}

/* A segment at the peer's sequence number, acknowledging what the device sent; the peer's
 * sequence number moves past its data (and SYN or FIN). */
static void peer_seg(struct fz_state *st, uint8_t flags, const uint8_t *p, size_t n)
{
	struct iw_tcp_seg t = pr.t;

	t.flags = flags;
	if (pr.dev_syn && (flags & IW_TCP_ACK))
		t.ack = pr.dev_nxt;
	t.payload = p;
	t.payload_len = (uint32_t)n;
	send_seg(st, &t);
	pr.t.seq += (uint32_t)n + ((flags & IW_TCP_SYN) ? 1 : 0) + ((flags & IW_TCP_FIN) ? 1 : 0);
	if (flags & IW_TCP_SYN)
		pr.syn_sent = true;
	pr.t.mss = 0;			/* on SYNs only */
}

/* In-order data, cut into segments of the MSS. */
static void peer_data(struct fz_state *st, const uint8_t *p, size_t n, uint32_t mss)
{
	while (n && pr.segs < FZ_IW_SEGS) {
		size_t k = n < mss ? n : mss;

		peer_seg(st, IW_TCP_ACK | IW_TCP_PSH, p, k);
		p += k;
		n -= k;
	}
}

static void tick(struct fz_state *st, uint64_t ns)
{
	if (pr.ticked + ns > FZ_IW_TIME)
		return;
	pr.ticked += ns;
	fz_now += ns;
	qhca_engine_timer(&st->e);
}

/* The input as a cursor; reads past its end give zeros. */
struct cur {
	const uint8_t *p;
	size_t n;
};

static uint8_t get8(struct cur *c)
{
	if (!c->n)
		return 0;
	c->n--;
	return *c->p++;
}

static uint16_t get16(struct cur *c)
{
	uint16_t v = get8(c);

	return (uint16_t)(v << 8 | get8(c));
}

static uint32_t get32(struct cur *c)
{
	uint32_t v = get16(c);

	return v << 16 | get16(c);
}

/* Up to @n bytes of the input (fewer at its end). */
static const uint8_t *take(struct cur *c, size_t *n)
{
	const uint8_t *p = c->p;

	if (*n > c->n)
		*n = c->n;
	c->p += *n;
	c->n -= *n;
	return p;
}

/* ---------------------------------------------------------------- the driver */
/* The device's RC QP back to INIT, four receives of 4 KiB in the region posted. */
static void qp_to_init(struct fz_state *st)
{
	struct qhca_qp_attr a = { .mask = QHCA_QP_STATE, .state = QHCA_QPS_RESET };
	unsigned k;

	qhca_qp_modify(&st->e, st->qpn[0], &a);
	a.mask = QHCA_QP_STATE | QHCA_QP_ACCESS_FLAGS | QHCA_QP_PKEY_INDEX | QHCA_QP_PORT;
	a.state = QHCA_QPS_INIT;
	a.access_flags = QHCA_ACCESS_ALL;
	qhca_qp_modify(&st->e, st->qpn[0], &a);
	pr.sq_pi = 0;
	for (k = 0; k < 4; k++) {
		struct qhca_rq_wqe w = { .wr_id = k, .num_sge = 1 };
		struct qhca_sge sge = { .addr = 0x10000 + k * 0x1000ull, .length = 0x1000,
					.lkey = st->mr };
		uint64_t rq = FZ_RINGS + 0x3000 + k * 64ull;

		memcpy(fz_mem + (rq - FZ_BASE), &w, sizeof(w));
		memcpy(fz_mem + (rq - FZ_BASE) + sizeof(w), &sge, sizeof(sge));
	}
	qhca_engine_db_write(&st->e, QHCA_DB_RQ, fz_db(st->qpn[0], 4), 8);
}

/* Answer (accept, or reject if @reject) the CONNECT_REQUESTs on the async EQ not
 * answered yet. */
static bool answer_requests(struct fz_state *st, bool reject)
{
	struct qhca_iw_conn *c = qhca_iw_scratch(&st->e);
	bool any = false;
	unsigned k;

	for (k = 0; c && k < 16; k++) {
		struct qhca_eqe q;

		memcpy(&q, fz_mem + (FZ_EQ - FZ_BASE) + k * sizeof(q), sizeof(q));
		if (q.type != QHCA_EVENT_IW_CONNECT_REQUEST)
			continue;
		/* taken: a request is answered once (the driver's EQ entry read) */
		fz_mem[FZ_EQ - FZ_BASE + k * sizeof(q)] = 0;
		memset(c, 0, sizeof(*c));
		if (reject) {
			qhca_iw_reject(&st->e, q.handle, c);
		} else {
			qp_to_init(st);
			c->qpn = st->qpn[0];
			c->ird = c->ord = 4;
			if (qhca_iw_accept(&st->e, q.handle, c) != QHCA_ST_OK)
				continue;
		}
		any = true;
	}
	return any;
}

/* The connection's handle: the QP's, or the newest on the EQ. */
static uint32_t conn_handle(struct fz_state *st)
{
	struct qhca_qp *qp = qhca_qp_find(&st->e, st->qpn[0]);
	uint32_t h = qp ? qp->iw_conn : 0;
	unsigned k;

	for (k = 0; !h && k < 16; k++) {
		struct qhca_eqe q;

		memcpy(&q, fz_mem + (FZ_EQ - FZ_BASE) + k * sizeof(q), sizeof(q));
		if (q.type >= QHCA_EVENT_IW_CONNECT_REQUEST && q.type <= QHCA_EVENT_IW_CLOSED)
			h = q.handle;
	}
	return h;
}

/* A WQE on the device's QP: SEND, WRITE or READ of @len bytes of the region. */
static void post_wqe(struct fz_state *st, uint8_t sel, uint32_t len, uint32_t rkey, uint64_t raddr)
{
	static const uint8_t ops[4] = { QHCA_WR_SEND, QHCA_WR_RDMA_WRITE, QHCA_WR_RDMA_READ,
					QHCA_WR_SEND_WITH_INV };
	uint64_t w = FZ_RINGS + 0x2000 + (pr.sq_pi & 7) * 256ull;
	struct qhca_sq_wqe h = { .wr_id = pr.sq_pi, .opcode = ops[sel & 3],
				 .flags = QHCA_WQE_SIGNALED | ((sel & 4) ? QHCA_WQE_FENCE : 0),
				 .num_sge = 1, .remote_addr = raddr, .rkey = rkey,
				 .imm_inv = rkey };
	struct qhca_sge sge = { .addr = 0x10000 + (sel >> 4) * 0x100ull, .length = len % 0x7000,
				.lkey = st->mr };

	memcpy(fz_mem + (w - FZ_BASE), &h, sizeof(h));
	memcpy(fz_mem + (w - FZ_BASE) + sizeof(h), &sge, sizeof(sge));
	qhca_engine_db_write(&st->e, QHCA_DB_SQ, fz_db(st->qpn[0], ++pr.sq_pi), 8);
}

static void driver_op(struct fz_state *st, struct cur *in)
{
	struct qhca_iw_conn *c = qhca_iw_scratch(&st->e);
	uint8_t sel = get8(in);
	uint32_t h;

	switch (sel % 7) {
	case 0:
		answer_requests(st, false);
		break;
	case 1:
		answer_requests(st, true);
		break;
	case 2:			/* graceful or abortive close */
	case 3:
		h = conn_handle(st);
		memset(c, 0, sizeof(*c));
		c->flags = sel % 7 == 3 ? QHCA_IW_ABORT : 0;
		qhca_iw_disconnect(&st->e, h, c);
		break;
	case 4: {		/* the QP to error (a destroy's effect on the connection) */
		struct qhca_qp_attr a = { .mask = QHCA_QP_STATE, .state = QHCA_QPS_ERR };

		qhca_qp_modify(&st->e, st->qpn[0], &a);
		break;
	}
	case 5: {
		uint8_t op = get8(in);
		uint16_t len = get16(in);
		uint32_t rkey = get32(in);

		post_wqe(st, op, len, rkey, (uint64_t)get32(in) << 8);
		break;
	}
	default:		/* the listener goes (its connections not handed out with it) */
		qhca_iw_unlisten(&st->e, pr.listener);
		break;
	}
}

/* ---------------------------------------------------------------- the peer's tricks */
/* An MPA request or reply built by hand: any key, flags, revision, length. */
static void op_mpa(struct fz_state *st, struct cur *in, bool passive, uint32_t mss)
{
	static uint8_t f[IW_MPA_RR_HLEN + 4 + 1024];
	uint8_t keysel = get8(in), flags = get8(in), rev = get8(in);
	uint16_t pd_len = get16(in), ird = get16(in), ord = get16(in);
	size_t n = get16(in) % 1024, at = 0;
	const uint8_t *pd = take(in, &n);
	bool reply = passive ? (keysel & 1) : !(keysel & 1);	/* usually the right kind */

	memcpy(f, reply ? IW_MPA_KEY_REP : IW_MPA_KEY_REQ, IW_MPA_KEY_LEN);
	if (keysel & 2)
		f[keysel >> 4] ^= (uint8_t)(1u << ((keysel >> 2) & 3));	/* a bad key */
	at = IW_MPA_KEY_LEN;
	f[at++] = flags;
	f[at++] = rev;
	f[at++] = (uint8_t)(pd_len >> 8);	/* the length it claims: any */
	f[at++] = (uint8_t)pd_len;
	if (flags & IW_MPA_F_ENHANCED) {
		f[at++] = (uint8_t)(ird >> 8);
		f[at++] = (uint8_t)ird;
		f[at++] = (uint8_t)(ord >> 8);
		f[at++] = (uint8_t)ord;
	}
	memcpy(f + at, pd, n);		/* what it sends: more, less or as much */
	peer_data(st, f, at + n, mss);
}

/* A well-formed FPDU of any DDP/RDMAP header, its CRC right (or not). */
static void op_fpdu(struct fz_state *st, struct cur *in, uint32_t mss)
{
	static uint8_t f[8192];
	struct iw_pkt p;
	uint8_t sel = get8(in);
	size_t n, len;

	memset(&p, 0, sizeof(p));
	p.opcode = sel % IW_OP_COUNT;
	p.last = sel & 0x10;
	p.stag = get32(in);
	p.to = (uint64_t)get32(in) << (sel & 0x20 ? 32 : 0);
	p.msn = get16(in);
	p.mo = get16(in);
	p.inval_stag = p.stag;
	p.sink_stag = get32(in);
	p.sink_to = get32(in);
	p.read_size = get32(in);
	p.src_stag = p.stag;
	p.src_to = p.to;
	p.term_layer = get8(in) & 3;
	p.term_etype = get8(in) & 15;
	p.term_ecode = get8(in);
	n = get16(in) % 4096;
	p.payload = take(in, &n);
	p.payload_len = (uint32_t)n;
	if (p.opcode == IW_OP_READ_REQ || p.opcode == IW_OP_TERMINATE)
		p.payload_len = 0;
	len = iw_fpdu_build(&p, true, f, sizeof(f));
	if (!len)
		return;
	if (sel & 0x40)
		f[len - 1 - (sel >> 7)] ^= 0x5a;	/* a bad CRC (or pad) */
	peer_data(st, f, len, mss);
}

static void op_blind(struct fz_state *st, struct cur *in)
{
	static uint8_t pl[256];
	struct iw_tcp_seg t = pr.t;
	size_t n;

	t.flags = get8(in);
	t.seq = pr.t.seq + get32(in);
	t.ack = (pr.dev_syn ? pr.dev_nxt : 0) + get32(in);
	t.window = get16(in);
	n = get8(in);
	memcpy(pl, take(in, &n), n);
	t.payload = pl;
	t.payload_len = (uint32_t)n;
	if (t.flags & IW_TCP_SYN)
		t.mss = (uint16_t)(get16(in) | 1);
	send_seg(st, &t);
}

/* RST near the expected sequence number (exactly, in the window, beyond), with ACK or not. */
static void op_rst(struct fz_state *st, struct cur *in)
{
	struct iw_tcp_seg t = pr.t;
	uint8_t kind = get8(in);
	int32_t off = (int16_t)get16(in);

	t.flags = IW_TCP_RST | ((kind & 1) ? IW_TCP_ACK : 0);
	t.ack = pr.dev_syn ? pr.dev_nxt + ((kind & 2) ? (uint32_t)off : 0) : 0;
	switch ((kind >> 2) & 3) {
	case 0:
		t.seq = pr.t.seq;			/* exactly RCV.NXT: taken */
		break;
	case 1:
		t.seq = pr.t.seq + (uint32_t)off;	/* in the window: a challenge ACK */
		break;
	default:
		t.seq = pr.t.seq + ((uint32_t)off << 16);	/* far out: dropped */
		break;
	}
	send_seg(st, &t);
}

static void op_syn(struct fz_state *st, struct cur *in)
{
	struct iw_tcp_seg t = pr.t;
	uint8_t kind = get8(in);
	uint16_t arg = get16(in);
	unsigned i;

	t.mss = 1460;
	switch (kind % 5) {
	case 0:			/* a SYN on the connection (established: a challenge ACK) */
		t.flags = IW_TCP_SYN;
		t.seq = pr.t.seq + arg;
		send_seg(st, &t);
		break;
	case 1:			/* a SYN-ACK to nothing */
		t.sport = (uint16_t)(20000 + arg % 1000);
		t.flags = IW_TCP_SYN | IW_TCP_ACK;
		t.seq = arg * 7919u;
		t.ack = arg * 104729u;
		send_seg(st, &t);
		break;
	case 2:			/* a flood of SYNs from other ports */
		t.flags = IW_TCP_SYN;
		t.dport = FZ_DEV_PORT;
		for (i = 0; i < (arg & 0xff) % 160u; i++) {
			t.sport = (uint16_t)(6000 + ((arg >> 8) + i) % 512);
			t.seq = i * 65537u;
			send_seg(st, &t);
		}
		break;
	case 3:			/* the peer's SYN crossing the device's (simultaneous open) */
		if (!pr.syn_sent) {
			pr.t.mss = 1460;
			peer_seg(st, IW_TCP_SYN, NULL, 0);
			break;
		}
		t.flags = IW_TCP_SYN;
		t.seq = pr.t.seq - 1;
		t.ack = 0;
		send_seg(st, &t);
		break;
	default:		/* a SYN-ACK on the connection, acknowledging anything */
		t.flags = IW_TCP_SYN | IW_TCP_ACK;
		t.seq = pr.syn_sent ? pr.t.seq - 1 : pr.t.seq;
		t.ack = (pr.dev_syn ? pr.dev_nxt : 0) + (uint32_t)(int16_t)arg;
		send_seg(st, &t);
		if (!pr.syn_sent) {	/* the peer's SYN: its sequence number moves past it */
			pr.syn_sent = true;
			pr.t.seq++;
		}
		break;
	}
}

/* 1-byte segments: in order, or ranges out of order (holes between), or one again. */
static void op_tiny(struct fz_state *st, struct cur *in)
{
	uint8_t count = get8(in), stride = get8(in), b = get8(in);
	uint16_t base = get16(in);
	struct iw_tcp_seg t = pr.t;
	unsigned i;

	t.flags = IW_TCP_ACK | IW_TCP_PSH;
	if (pr.dev_syn)
		t.ack = pr.dev_nxt;
	t.payload = &b;
	t.payload_len = 1;
	if (!stride) {			/* in order: the stream moves a byte at a time */
		for (i = 0; i < count; i++)
			peer_seg(st, IW_TCP_ACK | IW_TCP_PSH, &b, 1);
		return;
	}
	for (i = 0; i < count; i++) {	/* ahead of RCV.NXT by base, every stride bytes */
		t.seq = pr.t.seq + base + i * stride;
		send_seg(st, &t);
	}
}

/* An ACK of the peer's: new or old, with any window (0: the device's persist timer). */
static void op_ack(struct fz_state *st, struct cur *in)
{
	struct iw_tcp_seg t = pr.t;
	uint16_t back = get16(in);

	t.flags = IW_TCP_ACK;
	t.ack = (pr.dev_syn ? pr.dev_nxt : 0) - back;
	t.window = get16(in);
	send_seg(st, &t);
}

/* The automatic handshake: the peer's SYN and ACK (the device listening), or its SYN-ACK
 * to the device's SYN (the device connecting). */
static void handshake(struct fz_state *st, bool passive, uint32_t mss)
{
	uint8_t syn = passive ? IW_TCP_SYN : IW_TCP_SYN | IW_TCP_ACK;

	if (!passive && !pr.dev_syn)
		return;			/* nothing to answer */
	pr.t.mss = (uint16_t)mss;
	if (!pr.syn_sent) {
		peer_seg(st, syn, NULL, 0);
	} else {			/* again: the same sequence number */
		struct iw_tcp_seg t = pr.t;

		t.flags = syn;
		t.seq = pr.t.seq - 1;
		t.ack = pr.dev_syn ? pr.dev_nxt : 0;
		send_seg(st, &t);
		pr.t.mss = 0;
	}
	if (passive && pr.dev_syn)
		peer_seg(st, IW_TCP_ACK, NULL, 0);
}

static void check(struct fz_state *st)
{
	const char *why = qhca_iw_check(&st->e);

	if (why) {
		fprintf(stderr, "iWARP bookkeeping: %s\n", why);
		abort();
	}
}

/*
 * Everything ends: with the peer silent from here on, the clock runs from one of the
 * port's deadlines to the next, past every bound (FZ_IW_LIVENESS_TIME). Left then are only
 * records CLOSED (the handle the driver's until it releases it) and connections in RDMA
 * mode, established and idle, with no deadline (a silent peer; no keepalive); none
 * half-open, nothing to reap, no deadline at all.
 */
static void liveness(struct fz_state *st)
{
	const struct qhca_iw *iw = st->e.iw;
	uint64_t end = fz_now + FZ_IW_LIVENESS_TIME, d = 0;
	uint32_t rounds, k, done = 0;

	for (rounds = 0; rounds < FZ_IW_LIVENESS_ROUNDS; rounds++) {
		d = qhca_iw_deadline(&st->e);
		if (d == UINT64_MAX || d > end)
			break;
		if (d > fz_now)
			fz_now = d;
		qhca_engine_timer(&st->e);
	}
	check(st);
	for (k = 0; k < iw->nlive; k++) {
		const struct iw_conn *c = &iw->conn[iw->live[k]];

		if (c->state == IWC_CLOSED ||
		    (c->state == IWC_RTS && c->tcp && c->tcp->state == QTCP_ESTABLISHED &&
		     !c->gone && c->close_deadline == UINT64_MAX && !c->heap_idx)) {
			done++;
			continue;
		}
		fprintf(stderr, "left: connection 0x%x state %d TCP %s active %d gone %d "
			"due %llu close_deadline %llu mpa_deadline %llu\n", c->handle, c->state,
			c->tcp ? qtcp_state_name(c->tcp->state) : "-", c->active, c->gone,
			(unsigned long long)c->due, (unsigned long long)c->close_deadline,
			(unsigned long long)c->mpa_deadline);
	}
	if (done != iw->nlive || iw->half_open || iw->reap_n || iw->heap_n ||
	    qhca_iw_deadline(&st->e) != UINT64_MAX) {
		fprintf(stderr, "liveness: after %u deadlines, %llu s: %u connections, %u ended "
			"or idle, half-open %u, heap %u, reap queue %u, next deadline %llu\n",
			rounds, (unsigned long long)(fz_now / 1000000000ull), iw->nlive, done,
			iw->half_open, iw->heap_n, iw->reap_n, (unsigned long long)d);
		abort();
	}
}

static void hostile(struct fz_state *st, struct cur *in, bool passive, bool auto_accept,
		    uint32_t mss)
{
	while (in->n && pr.segs < FZ_IW_SEGS) {
		uint8_t op = get8(in);
		size_t n;

		switch (op % 16) {
		case 1:
			op_blind(st, in);
			break;
		case 2:
			op_rst(st, in);
			break;
		case 3:
			op_syn(st, in);
			break;
		case 4:
			op_mpa(st, in, passive, mss);
			break;
		case 5:
			op_fpdu(st, in, mss);
			break;
		case 6:
			op_tiny(st, in);
			break;
		case 7:
			tick(st, (get8(in) + 1ull) * 10000000ull);	/* 10 ms .. 2.56 s */
			break;
		case 8:
			op_ack(st, in);
			break;
		case 9:
			peer_seg(st, IW_TCP_ACK | IW_TCP_FIN, NULL, 0);
			break;
		case 10:
			driver_op(st, in);
			break;
		case 11:		/* the last segment again */
			if (pr.last_len && pr.segs < FZ_IW_SEGS) {
				pr.segs++;
				qhca_engine_receive(&st->e, pr.last, pr.last_len);
			}
			break;
		case 12:		/* the handshake, late or again */
			handshake(st, passive, mss);
			break;
		default: {		/* in-order data */
			const uint8_t *p;

			n = get8(in);
			p = take(in, &n);
			peer_data(st, p, n, mss);
			break;
		}
		}
		if (auto_accept)
			answer_requests(st, false);
		check(st);
	}
}

static void stream(struct fz_state *st, struct cur *in, bool auto_accept, uint32_t mss)
{
	while (in->n && pr.segs < FZ_IW_SEGS) {
		size_t n = get8(in);
		const uint8_t *p;

		if (n == 0xff) {
			tick(st, 50000000);	/* 50 ms: retransmissions, TIME_WAIT */
			check(st);
			continue;
		}
		p = take(in, &n);
		peer_data(st, p, n, mss);
		if (auto_accept && answer_requests(st, false))
			auto_accept = false;
		check(st);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct fz_state st;
	struct qhca_iw_listen l = { .port = FZ_DEV_PORT, .backlog = 4 };
	bool passive, hostile_mode, auto_accept, raw;
	struct cur in;
	uint32_t lh = 0, mss;

	fz_input(data, size);
	if (size < 2)
		return 0;
	passive = !(data[0] & 1);
	hostile_mode = data[0] & 2;
	auto_accept = data[0] & 4;
	raw = hostile_mode && (data[0] & 8);
	mss = 64 + (data[0] >> 4) * 64u;	/* 64..1024 */
	in.p = data + 1;
	in.n = size - 2;			/* the last byte is fz_input's */

	fz_setup_link(&st, 1, QHCA_LINK_IWARP);
	memset(&pr, 0, sizeof(pr));
	fz_xmit_hook = capture;
	memcpy(pr.t.smac, peer_mac, 6);
	memcpy(pr.t.dmac, fz_cfg.mac, 6);
	pr.t.sgid[10] = pr.t.sgid[11] = pr.t.dgid[10] = pr.t.dgid[11] = 0xff;
	pr.t.sgid[15] = 2;
	pr.t.dgid[15] = 1;
	pr.t.sport = FZ_PEER_PORT;
	pr.t.dport = FZ_DEV_PORT;
	pr.t.seq = 0x10000;
	pr.t.window = 65535;
	pr.t.hop_limit = 64;
	if (passive) {
		qhca_iw_listen(&st.e, &l, &lh);
		pr.listener = lh;
	} else {
		struct qhca_iw_conn *c = qhca_iw_scratch(&st.e);
		uint32_t h;

		qp_to_init(&st);
		memset(c, 0, sizeof(*c));
		memcpy(c->local_addr, pr.t.dgid, 16);
		memcpy(c->remote_addr, pr.t.sgid, 16);
		c->local_port = FZ_DEV_PORT;
		c->remote_port = FZ_PEER_PORT;
		memcpy(c->dmac, peer_mac, 6);
		c->ird = c->ord = 4;
		c->pd_len = 2;
		memcpy(c->private_data, "hi", 2);
		qhca_iw_connect(&st.e, st.qpn[0], c, &h);	/* the device's SYN goes out */
	}
	if (!raw)
		handshake(&st, passive, mss);
	check(&st);
	if (hostile_mode)
		hostile(&st, &in, passive, auto_accept, mss);
	else
		stream(&st, &in, passive && auto_accept, mss);
	peer_seg(&st, IW_TCP_ACK | IW_TCP_FIN, NULL, 0);
	check(&st);
	fz_drain_timers(&st);
	check(&st);
	liveness(&st);
	fz_xmit_hook = NULL;
	qhca_engine_fini(&st.e);
	return 0;
}
