// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Fuzz target: an iWARP port's connections and datapath (iw_cm.c, iw_tx.c, iw_rx.c, tcp.c) as a hostile peer drives
 * them. The target plays the peer's TCP: it opens a connection to a listener of the
 * device, completes the handshake, and then sends the input as the peer's byte stream
 * (the MPA request, then FPDUs: whatever the input holds), cut into segments whose
 * sequence numbers and checksums are right, so that the bytes reach MPA and the datapath.
 * Input: the first byte chooses whether the device accepts once a request came (and the
 * segment size); then chunks of [1-byte length][bytes]; a length of 0xff is a timer tick;
 * the last byte, as in every target, the limits and the trace (fz_input).
 */
#include "fuzz_common.h"
#include "iwarp.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct {
	bool have;
	struct iw_tcp_seg s;		/* the last segment the device sent (payload dropped) */
} dev_out;

static void capture(const void *f, size_t l)
{
	struct iw_tcp_seg s;

	if (iw_tcp_parse(f, l, &s) == IW_OK) {
		dev_out.s = s;
		dev_out.s.payload = NULL;
		dev_out.have = true;
	}
}

static const uint8_t peer_mac[6] = { 0x52, 0x54, 0, 0x51, 0x48, 2 };

static void peer_seg(struct fz_state *st, struct iw_tcp_seg *t, uint8_t flags,
		     const uint8_t *p, size_t n)
{
	static uint8_t frame[2048];
	size_t len;

	t->flags = flags;
	t->payload = p;
	t->payload_len = (uint16_t)n;
	len = iw_tcp_build(t, frame, sizeof(frame));
	if (len)
		qhca_engine_receive(&st->e, frame, len);
	t->seq += (uint32_t)n + ((flags & IW_TCP_SYN) ? 1 : 0);
}

/* A CONNECT_REQUEST event on the async EQ: accepted on the RC QP, taken back to INIT. */
static bool accept_request(struct fz_state *st)
{
	struct qhca_qp_attr a = { .mask = QHCA_QP_STATE, .state = QHCA_QPS_RESET };
	struct qhca_iw_conn *c = qhca_iw_scratch(&st->e);
	unsigned k;

	for (k = 0; c && k < 16; k++) {
		struct qhca_eqe q;

		memcpy(&q, fz_mem + (FZ_EQ - FZ_BASE) + k * sizeof(q), sizeof(q));
		if (q.type != QHCA_EVENT_IW_CONNECT_REQUEST)
			continue;
		qhca_qp_modify(&st->e, st->qpn[0], &a);
		a.mask = QHCA_QP_STATE | QHCA_QP_ACCESS_FLAGS | QHCA_QP_PKEY_INDEX | QHCA_QP_PORT;
		a.state = QHCA_QPS_INIT;
		a.access_flags = QHCA_ACCESS_ALL;
		qhca_qp_modify(&st->e, st->qpn[0], &a);
		/* four receives of 4 KiB in the region, for the peer's SENDs */
		for (k = 0; k < 4; k++) {
			struct qhca_rq_wqe w = { .wr_id = k, .num_sge = 1 };
			struct qhca_sge sge = { .addr = 0x10000 + k * 0x1000ull, .length = 0x1000,
						.lkey = st->mr };
			uint64_t rq = FZ_RINGS + 0x3000 + k * 64ull;

			memcpy(fz_mem + (rq - FZ_BASE), &w, sizeof(w));
			memcpy(fz_mem + (rq - FZ_BASE) + sizeof(w), &sge, sizeof(sge));
		}
		qhca_engine_db_write(&st->e, QHCA_DB_RQ, fz_db(st->qpn[0], 4), 8);
		memset(c, 0, sizeof(*c));
		c->qpn = st->qpn[0];
		c->ird = c->ord = 4;
		qhca_iw_accept(&st->e, q.handle, c);
		return true;
	}
	return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct fz_state st;
	struct qhca_iw_listen l = { .port = 4000, .backlog = 4 };
	struct iw_tcp_seg t;
	uint32_t lh = 0, mss;
	bool accept;
	size_t i;

	fz_input(data, size);
	if (size < 2)
		return 0;
	accept = data[0] & 1;
	mss = 64 + (data[0] >> 1) * 8;		/* segments of 64..1080 bytes */
	data++;
	size -= 2;				/* the last byte is fz_input's */
	fz_setup_link(&st, 1, QHCA_LINK_IWARP);
	fz_xmit_hook = capture;
	dev_out.have = false;
	qhca_iw_listen(&st.e, &l, &lh);

	memset(&t, 0, sizeof(t));
	memcpy(t.smac, peer_mac, 6);
	memcpy(t.dmac, fz_cfg.mac, 6);
	t.sgid[10] = t.sgid[11] = t.dgid[10] = t.dgid[11] = 0xff;
	t.sgid[15] = 2;
	t.dgid[15] = 1;
	t.sport = 5000;
	t.dport = 4000;
	t.seq = 0x10000;
	t.window = 65535;
	t.mss = (uint16_t)mss;
	t.hop_limit = 64;
	peer_seg(&st, &t, IW_TCP_SYN, NULL, 0);	/* the device answers with a SYN-ACK */
	if (!dev_out.have || !(dev_out.s.flags & IW_TCP_SYN))
		goto out;
	t.ack = dev_out.s.seq + 1;
	t.mss = 0;
	peer_seg(&st, &t, IW_TCP_ACK, NULL, 0);

	for (i = 0; i < size;) {
		size_t n = data[i++];

		if (n == 0xff) {
			fz_now += 50000000;	/* 50 ms: retransmissions, TIME_WAIT */
			qhca_engine_timer(&st.e);
			continue;
		}
		if (n > size - i)
			n = size - i;
		while (n) {
			size_t k = n < mss ? n : mss;

			if (dev_out.have)
				t.ack = dev_out.s.seq + dev_out.s.payload_len +
					((dev_out.s.flags & IW_TCP_FIN) ? 1 : 0);
			peer_seg(&st, &t, IW_TCP_ACK | IW_TCP_PSH, data + i, k);
			i += k;
			n -= k;
		}
		if (accept && accept_request(&st))
			accept = false;
	}
	peer_seg(&st, &t, IW_TCP_ACK | IW_TCP_FIN, NULL, 0);
	fz_drain_timers(&st);
out:
	fz_xmit_hook = NULL;
	qhca_engine_fini(&st.e);
	return 0;
}
