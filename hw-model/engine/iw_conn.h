/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The iWARP wing of the engine (link=iwarp): what its three files share. As Linux siw
 * splits it: iw_cm.c runs the connections (TCP's callbacks, MPA's set-up, the
 * QHCA_CMD_IW_* commands and QHCA_EVENT_IW_* events, the 4-tuple lookup, timers),
 * iw_tx.c the requester's FPDUs (SEND, WRITE, Read Request, Read Response, Terminate),
 * iw_rx.c the FPDUs that come in (placement by STag, SEND into its receive, Read Requests
 * queued). TCP itself is tcp.c; the wire formats are wire/iwarp.c.
 */
#ifndef QHCA_IW_CONN_H
#define QHCA_IW_CONN_H

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
	uint64_t due;		/* the earliest of its deadlines (iw_sched): TCP's timers, MPA's
				 * and the close's; its key in qhca_iw.heap */
	uint32_t heap_idx;	/* its place in qhca_iw.heap + 1, 0: not there (no deadline) */
	bool reap_queued;	/* its slot is in qhca_iw.reap_q (kept by the slot: a freed and
				 * reused slot's entry is looked at again when its turn comes) */
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
	uint64_t hash_key[2];		/* SipHash's key of the 4-tuple hash (tuple_hash) */
	struct qhca_obj_table lsn_table;
	struct iw_listener lsn[QHCA_IW_MAX_LISTEN];
	struct qtcp_config tcfg;
	uint32_t live[QHCA_IW_MAX_CONN];	/* the slots in use: a device reset, an unlisten
						 * and the counters walk these */
	uint32_t nlive;
	/* The connections with a deadline, a binary min-heap on iw_conn.due (as the QPs' in
	 * xmit.c): the earliest at heap[0], O(log n) to move one; slots. */
	uint32_t heap[QHCA_IW_MAX_CONN];
	uint32_t heap_n;
	/* The connections whose TCP reached CLOSED, to reap (the CLOSED event, the memory
	 * back): a ring of slots, each at most once (reap_queued). */
	uint32_t reap_q[QHCA_IW_MAX_CONN];
	uint32_t reap_head, reap_n;
	uint32_t half_open;		/* passive connections not yet accepted, all listeners */
	uint64_t steps;			/* connections looked at, all told: the work of
					 * finding, timing and reaping them, for the tests */
	uint64_t gone_retransmits;	/* TCP's of the connections already freed */
	uint64_t gone_timeouts;
	struct qhca_iw_conn scratch;	/* a command's argument or answer (admin.c) */
	uint8_t txbuf[IW_TXBUF];	/* one FPDU being built */
};


static inline uint64_t iw_now_ns(const struct qhca_engine *e)
{
	return e->ops->now_ns(e->opaque);
}

/* iw_cm.c */
struct iw_conn *iw_conn_find(struct qhca_engine *e, uint32_t handle);
/* The QP the connection is bound to, if it still is. */
struct qhca_qp *iw_qp_of(struct iw_conn *c);
/* Our side is closing: it ends in IW_CLOSE_TIMEOUT_NS at the latest. */
void iw_closing(struct iw_conn *c);
/* The end of the connection's TCP (QHCA_IW_ST_*): the driver is told, once. */
void iw_conn_gone(struct iw_conn *c, uint8_t status);
/* After anything that may have moved the connection's deadlines or closed its TCP (every
 * call into TCP, a change of state, MPA's or the close's deadline): its place in the heap,
 * and in the reap queue once its TCP is CLOSED. O(log n). */
void iw_sched(struct iw_conn *c);

/* iw_tx.c */
/* Hand @n bytes to TCP, all or nothing (false if it has no room). */
bool iw_tcp_queue(struct iw_conn *c, const uint8_t *buf, size_t n);
/* The QP's send queue and the Read Responses it owes, as far as TCP has room. */
void iw_req_run(struct iw_conn *c, struct qhca_qp *qp);
/* A Terminate (RFC 5040 4.8), the close, the QP to error with @event. */
void iw_terminate(struct iw_conn *c, uint8_t layer, uint8_t etype, uint8_t ecode,
		  uint8_t event, const char *why);
/* TCP's callback: @n more bytes acknowledged, room in its send buffer. */
void iw_tcp_acked(void *opaque, uint32_t n);
/* An FPDU in the teaching trace: built (dir=out) or taken whole with its CRC good (in). */
void iw_step_fpdu(struct iw_conn *c, const char *dir, const struct iw_pkt *p,
		  const uint8_t *fpdu, size_t len);

/* iw_rx.c */
/* In-order bytes of a connection in RDMA mode: FPDUs, placed as they come. */
size_t iw_rx_stream(struct iw_conn *c, const uint8_t *data, size_t n);

#endif /* QHCA_IW_CONN_H */
