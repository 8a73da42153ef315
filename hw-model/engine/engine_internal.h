/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * qhca engine, internal: the device's objects and state, and the functions its files share.
 * Included by the engine's own files, its unit tests and fuzzers; never by a platform.
 */
#ifndef QHCA_ENGINE_INTERNAL_H
#define QHCA_ENGINE_INTERNAL_H

#include <string.h>

#include "qhca_engine.h"
#include "ib.h"
#include "roce.h"
#include "iw.h"

/*
 * A table of objects addressed by handles. A handle is the slot's generation (bits 20-30)
 * and its index + 1 (bits 0-19; OBJ_HANDLE_*_MASK in objtable.c): 0 is never valid, and a
 * stale handle of a destroyed object is rejected because its generation no longer matches.
 */
#define OBJ_HANDLE_INDEX_MASK	0x000fffffu	/* index + 1 */
#define OBJ_HANDLE_GEN_MASK	0x7ff00000u	/* the slot's generation; bit 31 is 0 */
#define OBJ_GEN_MASK		QHCA_FIELD_GET(OBJ_HANDLE_GEN_MASK, 0xffffffffu)
#define OBJ_USED		0x8000u

struct qhca_obj_table {
	uint32_t capacity;
	uint32_t count;
	uint16_t *gen;		/* generation of each slot; bit 15 marks a slot in use */
	uint32_t *owner;	/* parent handle (user context), kept per slot */
	uint32_t *users;	/* objects that hold this one (qhca_obj_hold) */
	uint32_t *free_q;	/* free slots, oldest first: capacity - count from free_head */
	uint32_t free_head;
};

#define QHCA_MAX_EQ		64
#define QHCA_SQ_WINDOW		64	/* send WQEs in flight per QP at most (fewer with a
					 * smaller SQ: qhca_qp.win_size) */
/* Default of qhca_engine_config.qp_window_budget: 8000 QPs or so with full windows. */
#define QHCA_QP_WINDOW_BUDGET	(512ull << 20)
#define QHCA_MAX_RD_ATOMIC	16	/* READ/ATOMIC requests in flight per QP */
/* RC window of packets in flight (unacknowledged PSN span), see comp.c: "the window" */
#define QHCA_CWND_MIN		8
#define QHCA_CWND_MAX		1024
#define QHCA_READ_HORIZON	64	/* READ responses placed this far past a missing one */
#define QHCA_READ_PIECES	3	/* requests for the lost responses of a READ in flight */
#define QHCA_MAX_FAST_REG_PAGES	512	/* max_fast_reg_page_list_len */
/*
 * The requester's work in one run (req.c, "the budget"): an SQ holds up to max-qp-wr
 * (32768) WQEs and a REG_MR reads a page list of 4 KiB, so one doorbell could move 128 MiB
 * of guest memory under QEMU's lock, and a UC or UD queue 32768 messages of 2 GiB. A run
 * starts at most 256 WQEs (four windows of QHCA_SQ_WINDOW: a doorbell of one window's
 * worth, the common case, never waits) and sends no packet once 16 MiB were moved (the
 * admin queue's byte budget, admin.c); the rest goes on from the engine's timer, armed at
 * once, as the admin queue's does.
 */
#define QHCA_SQ_WQE_BUDGET	256
#define QHCA_SQ_BYTE_BUDGET	(16u << 20)
/* A QPN is its table slot + 2 (QPNs 0 and 1 are special) with 3 bits of the slot's
 * generation above (qp.c) */
#define QPN_SLOT_MASK	0x001fffffu
#define QPN_GEN_MASK	0x00e00000u
/* Frames to our own port wait in a queue of LOOP_QUEUE frames of LOOP_FRAME bytes (xmit.c);
 * requesters stop at half: the rest is room for ACKs and READ responses. */
#define LOOP_QUEUE	1024
#define LOOP_FRAME	(ROCE_MAX_HDR + 4096 + 8)

struct qhca_mr {
	uint32_t handle;
	uint32_t key;		/* lkey = rkey */
	uint32_t pd;
	uint32_t access;
	uint32_t flags;
	uint32_t page_offset;
	uint32_t npages;
	uint8_t page_shift;	/* of the pages: 12, or what a REG_MR chose */
	uint32_t max_pages;	/* FAST_REG: the room of pages[] */
	uint64_t iova, length;
	uint64_t *pages;
	bool invalid;		/* FAST_REG, windows: free (not registered or bound) */
	bool dead;		/* deregistered; freed with its last reference */
	uint32_t refs;		/* messages in flight moving bytes through it (mem.c) */
	/* memory windows: the region bound to (with a reference), the QP of a type 2B one */
	struct qhca_mr *parent;
	uint32_t qpn;		/* for the trace and the device's view */
	uint64_t qp_serial;	/* the binding QP's qhca_qp.serial: never a later QP's */
	uint32_t windows;	/* regions: windows bound to it (DESTROY_MR is BUSY) */
};

#define QHCA_MR_WINDOW		(QHCA_MR_MW_TYPE1 | QHCA_MR_MW_TYPE2)

/* May a message in flight still move bytes through @mr (a window: and its region)? */
static inline bool qhca_mr_usable(const struct qhca_mr *mr)
{
	return !mr->dead && !mr->invalid &&
	       (!mr->parent || (!mr->parent->dead && !mr->parent->invalid));
}

/* The SGEs of a WQE, each with a reference on its region (qhca_sgl_load). */
struct qhca_sgl {
	uint32_t num;
	uint64_t length;	/* sum of the SGE lengths */
	struct qhca_sge sge[QHCA_MAX_SGE];
	struct qhca_mr *mr[QHCA_MAX_SGE];	/* NULL for an SGE of no bytes */
};

struct qhca_cq {
	uint32_t handle;
	uint32_t uctx;
	uint32_t eq;		/* event queue handle */
	uint32_t log2;
	uint32_t npages;
	uint64_t *pages;
	uint32_t pi;		/* producer index, free running */
	bool armed, armed_solicited, overflowed;
	uint32_t refs;		/* queue pairs using it */
};

/* An intrusive doubly linked list (a head links to itself when empty). */
struct qhca_list {
	struct qhca_list *prev, *next;
};

static inline void qhca_list_init(struct qhca_list *l)
{
	l->prev = l->next = l;
}

static inline bool qhca_list_empty(const struct qhca_list *l)
{
	return l->next == l;
}

static inline void qhca_list_add_tail(struct qhca_list *head, struct qhca_list *l)
{
	l->prev = head->prev;
	l->next = head;
	head->prev->next = l;
	head->prev = l;
}

static inline void qhca_list_del(struct qhca_list *l)
{
	l->prev->next = l->next;
	l->next->prev = l->prev;
	qhca_list_init(l);
}

#define qhca_container_of(ptr, type, member) \
	((type *)((char *)(ptr) - offsetof(type, member)))

/* A work queue in guest pages (SQ, RQ or SRQ). */
struct qhca_wq {
	uint64_t *pages;
	uint32_t npages;
	uint32_t log2, stride_log2;
	uint32_t pi;		/* producer index from the last doorbell, free running */
	uint32_t ci;		/* the device's consumer index */
};

struct qhca_srq {
	uint32_t handle;
	uint32_t pd;
	uint32_t uctx;
	uint32_t limit;
	struct qhca_wq wq;
	uint32_t refs;		/* QPs created with it */
	/* XRC SRQs: the domain, the CQ (with a reference), and the XRC_TGT QPs whose message
	 * in progress holds one of its WQEs (linked by their xrc_link) */
	uint32_t xrcd;
	struct qhca_cq *cq;
	struct qhca_list xrc_msgs;
};

/*
 * What a READ or ATOMIC in flight knows of its answer (rdrecov.c, "READ responses"). The
 * responder has the request (seen); an ATOMIC was sent again, its answer not come yet
 * (retry). A READ: the responses after its read_next that arrived (map, bit i: read_next
 * + 1 + i); every response before lost_to that did not arrive and is not asked for again
 * is lost; the requests whose responses may still come, oldest first (first: the first is
 * the one for the whole READ that went out first).
 */
struct qhca_rd_recovery {
	uint64_t map;
	uint32_t lost_to;
	bool seen, retry, first;
	uint8_t npieces;
	struct {
		uint32_t lo, hi;	/* responses still to come */
		uint32_t h1, h2;	/* the two highest that came */
	} piece[QHCA_READ_PIECES];
};

/* A send WQE the requester has started: a snapshot, so the guest cannot change it. */
struct qhca_send_wqe {
	struct qhca_sq_wqe hdr;
	union {
		struct qhca_ud_seg ud;		/* UD and GSI QPs */
		struct qhca_reg_mr_seg reg;	/* REG_MR */
		struct qhca_bind_mw_seg bind;	/* BIND_MW */
	};
	struct qhca_rd_recovery rd;	/* READ and ATOMIC (rdrecov.c) */
	struct qhca_sgl sgl;	/* held from start to completion */
	uint8_t *inline_data;	/* max_inline bytes, for INLINE WQEs */
	uint64_t length;	/* message length */
	uint32_t mtu;		/* the path MTU when it started: its packets' geometry */
	uint32_t first_psn;	/* 24-bit PSNs of its first and last packet */
	uint32_t last_psn;
	uint32_t npkts;
	uint32_t read_next;	/* READ: first response PSN not arrived; ATOMIC: its PSN */
	uint32_t tx_next;	/* next packet to send (READ, ATOMIC: 0 until the request
				 * went out) */
	bool done;		/* acknowledged or answered; completes in order */
	uint8_t status;		/* enum qhca_wc_status when done */
};

/* A READ or ATOMIC request the responder has executed, kept to answer duplicates. */
struct qhca_rd_atomic {
	bool valid;
	uint8_t opcode;
	uint32_t psn, last_psn;
	uint64_t va;
	uint32_t rkey;
	uint32_t len;
	uint64_t orig;		/* ATOMIC: the value before the operation */
};

/* The receive WQE a multi-packet SEND is landing in. */
struct qhca_recv_ctx {
	bool active;
	uint64_t wr_id;
	struct qhca_sgl sgl;	/* held until the receive completes */
	uint64_t offset;
	struct qhca_srq *srq;	/* the SRQ it came from, or NULL */
};

struct qhca_qp {
	uint32_t handle;
	uint32_t qpn;
	uint64_t serial;	/* unique for the engine's life (QPNs come back) */
	uint8_t type;		/* enum qhca_qp_type */
	uint8_t state;		/* enum qhca_qp_state */
	bool sig_all;
	uint32_t pd, uctx;
	struct qhca_cq *send_cq, *recv_cq;
	struct qhca_srq *srq;
	struct qhca_wq sq, rq;
	uint16_t max_inline;
	/* XRC_TGT: its domain; the SRQ the request being handled names (XRCETH); and its
	 * link on that SRQ's xrc_msgs while a SEND holds one of its WQEs (recv.srq) */
	uint32_t xrcd;
	struct qhca_srq *xrc_srq;
	struct qhca_list xrc_link;
	/* attributes */
	uint32_t mtu;		/* path MTU in bytes */
	uint8_t timeout, retry_cnt, rnr_retry, min_rnr_timer;
	uint8_t max_rd_atomic, max_dest_rd_atomic;
	uint32_t qkey, dest_qpn, access;
	uint32_t iw_conn;	/* iWARP: the connection it is bound to (iw_cm.c), or 0 */
	struct qhca_av av;
	/* requester */
	struct qhca_send_wqe *win;	/* win_size snapshots, by SQ index */
	uint8_t *inline_mem;		/* their inline data, max_inline bytes each */
	uint32_t win_size;	/* QHCA_SQ_WINDOW or the SQ's entries if fewer (or fewer still
				 * past the device's budget): a power of two */
	uint64_t win_bytes;	/* what win and inline_mem take, in e->qp_window_bytes */
	uint32_t sq_next;	/* next SQ index to start */
	uint32_t tx_idx;	/* first started WQE that may still owe packets */
	uint32_t psn;		/* next PSN to send */
	uint32_t retries, rnr_retries;
	/* RC window (comp.c, "the window"); PSNs are 24 bits, compared by qhca_psn_diff */
	uint32_t una;		/* oldest PSN not acknowledged or answered: the window's start */
	uint32_t ack_psn;	/* every request before it reached the responder */
	uint32_t snd_max;	/* one past the highest PSN sent (a READ: responses asked) */
	uint32_t rewind_psn;	/* where the last go-back started (rewound: it is valid) */
	uint32_t cwnd, ssthresh;	/* packets; cwnd 0: not set up yet */
	uint32_t cwnd_acc;	/* packets acknowledged toward the next additive step */
	uint32_t clean;		/* packets acknowledged since the last loss */
	bool rewound;
	bool probe;		/* after a timeout: ask for an ACK on the next packet */
	bool dup;		/* send the packet at dup_psn twice (the head of a resend) */
	uint32_t dup_psn;
	uint64_t deadline;	/* retransmission or RNR timer; UINT64_MAX: none */
	uint32_t timer_idx;	/* its place in e->timer_heap + 1; 0: no deadline (xmit.c) */
	struct qhca_list tx_link;	/* on e->tx_waiters while blocked by the platform */
	bool rnr_wait;
	uint32_t rd_atomic_out;	/* READ/ATOMIC requests in flight */
	/* responder */
	uint32_t epsn;		/* expected PSN */
	uint32_t msn;
	bool nak_sent;
	struct qhca_recv_ctx recv;
	struct qhca_mr *write_mr;	/* the RDMA WRITE in progress, with a reference */
	uint64_t write_va, write_left, write_total;
	bool write_active;
	bool drop_msg;			/* UC: dropping the rest of a broken message */
	struct qhca_rd_atomic rd[QHCA_MAX_RD_ATOMIC];
	uint32_t rd_next;
	/* READ responses still to send when the transmit path pushed back. Until they are
	 * out, requests to this QP are dropped; a sequence NAK then asks for them again. */
	struct {
		bool active, dropped;
		uint32_t len, psn, k, n;
		uint32_t mtu;		/* the path MTU when the READ came: its geometry */
		uint64_t va;
		struct qhca_mr *mr;	/* with a reference while active; NULL for 0 bytes */
	} rr;
};

/* UD, GSI (QP1) and SMI (QP0): datagrams with an address vector in each send WQE. */
static inline bool qhca_qp_datagram(const struct qhca_qp *qp)
{
	return qp->type == QHCA_QPT_UD || qp->type == QHCA_QPT_GSI || qp->type == QHCA_QPT_SMI;
}

/* RC and XRC: the reliable connected service (ACKs, retransmission, READ, atomics). */
static inline bool qhca_qp_reliable(const struct qhca_qp *qp)
{
	return qp->type == QHCA_QPT_RC || qp->type == QHCA_QPT_XRC_INI ||
	       qp->type == QHCA_QPT_XRC_TGT;
}

static inline bool qhca_qp_xrc(const struct qhca_qp *qp)
{
	return qp->type == QHCA_QPT_XRC_INI || qp->type == QHCA_QPT_XRC_TGT;
}

/* Does @p come from the connected QP's peer: its GID, or on an InfiniBand port without a
 * GRH its LID (the path bits of an LMC aside)? On Ethernet also in the QP's RoCE version: a
 * v1 frame for a v2 QP, or the reverse, is not its peer's. */
static inline bool qhca_from_peer(const struct qhca_qp *qp, const struct roce_pkt *p)
{
	if (p->ib && !p->grh)
		return p->slid == qp->av.dlid;
	if (!p->ib && p->grh != !!(qp->av.ib_flags & QHCA_AV_ROCE_V1))
		return false;
	return !memcmp(p->sgid, qp->av.dgid, 16);
}

/* Are an address vector's ib_flags ones a port of link layer @link knows: on an Ethernet
 * port only QHCA_AV_ROCE_V1 (the other bits are InfiniBand's path bits)? */
static inline bool qhca_av_flags_ok(uint8_t link, const struct qhca_av *av)
{
	return link == QHCA_LINK_IB || !(av->ib_flags & ~QHCA_AV_ROCE_V1);
}

/* The transport service of the QP's packets (the opcode's top bits). */
static inline uint8_t qhca_qp_ts(const struct qhca_qp *qp)
{
	return qp->type == QHCA_QPT_RC ? ROCE_TS_RC : qp->type == QHCA_QPT_UC ? ROCE_TS_UC :
	       qhca_qp_xrc(qp) ? ROCE_TS_XRC : ROCE_TS_UD;
}

/* The protection domain of the QP's memory accesses: an XRC_TGT QP's is the one of the XRC
 * SRQ the request names. */
static inline uint32_t qhca_qp_pd(const struct qhca_qp *qp)
{
	if (qp->type == QHCA_QPT_XRC_TGT)
		return qp->xrc_srq ? qp->xrc_srq->pd : 0;
	return qp->pd;
}

struct qhca_eq {
	uint64_t ring;
	uint32_t log2;
	uint32_t pi;		/* device producer index, free running */
	uint32_t ci;		/* consumer index from the last doorbell, free running */
	uint16_t vector;
	uint32_t handle;
	bool overflowed;	/* events were dropped; report it when there is room */
};

struct qhca_eth {
	bool started;
	uint64_t tx_ring, rx_ring;
	uint32_t tx_log2, rx_log2;
	uint32_t tx_ci, tx_pi;	/* free running */
	uint32_t rx_ci, rx_pi;
	uint16_t vector;
	uint8_t *frame;		/* one frame of QHCA_ETH_MAX_FRAME bytes */
};

/* The InfiniBand port (link=ib, sma.c): what the subnet manager sets through the SMA. */
#define QHCA_IB_PKEYS		32	/* one P_KeyTable block */
#define QHCA_IB_GUIDS		8	/* one GUIDInfo block: the GID table */
struct qhca_ib_port {
	struct ib_port_info pi;
	uint16_t pkeys[QHCA_IB_PKEYS];
	uint64_t guids[QHCA_IB_GUIDS];
	uint8_t sl2vl[8];
	uint8_t vl_arb[4][IB_SMP_DATA_LEN];
	char node_desc[QHCA_NODE_DESC_SIZE];
	uint32_t cap_set;		/* MODIFY_PORT's capability bits */
	uint64_t pma_base[4];		/* PMA counters at their last clear */
};

/* A multicast group and the UD QPs attached to it (sma.c). nqps 0: a free slot. */
struct qhca_mcast_group {
	uint8_t gid[16];
	uint16_t mlid;
	uint32_t nqps;
	uint32_t qpn[QHCA_MCAST_QPS];
};

/* Device statistics; names as in docs/device-interface.md. */
struct qhca_counters {
	uint64_t eth_tx_frames, eth_tx_bytes, eth_tx_errors, eth_tx_link_down;
	uint64_t eth_rx_frames, eth_rx_bytes, eth_rx_no_buffer, eth_rx_too_long, eth_rx_stopped;
	uint64_t eq_overflows;
	uint64_t roce_tx_pkts, roce_tx_bytes, roce_rx_pkts, roce_rx_bytes;
	uint64_t roce_rx_bad[ROCE_PARSE_MAX];	/* dropped by the parser, by reason */
	uint64_t roce_rx_no_qp, roce_rx_bad_state, roce_rx_bad_pkey, roce_rx_bad_qkey;
	uint64_t roce_rx_out_of_seq, roce_rx_dup, roce_rx_no_wqe, remote_access_errors;
	uint64_t roce_rx_busy;	/* requests dropped while READ responses waited */
	uint64_t retransmits, timeouts, naks_sent, naks_received, rnr_naks_sent;
	uint64_t rnr_naks_received, cq_overflows, loopback_pkts;
	uint64_t ib_rx_bad_lid, smps;	/* InfiniBand */
};

struct qhca_engine {
	const struct qhca_engine_ops *ops;
	void *opaque;
	struct qhca_engine_config cfg;
	bool tracing;		/* the teaching trace is on (trace.c) */

	/* registers */
	uint32_t ctrl;
	uint32_t status;
	uint32_t error;
	uint32_t intr_mask;
	uint64_t asq_base;
	uint64_t acq_base;
	uint32_t aq_depth_log2;

	/* admin queue state */
	uint32_t asq_head;	/* next command the device reads */
	uint32_t asq_tail;	/* producer index from the last doorbell */
	uint32_t acq_tail;	/* next completion slot the device writes */
	uint32_t acq_head;	/* consumer index from the last doorbell */
	uint16_t acq_phase;

	/* objects */
	struct qhca_obj_table uctx;
	struct qhca_obj_table pd;
	struct qhca_obj_table xrcd;	/* XRC domains, owned by the kernel */
	struct qhca_obj_table eq_table;
	struct qhca_eq eq[QHCA_MAX_EQ];
	int async_eq;		/* index of the async event queue, or -1 */

	/* verbs objects */
	struct qhca_obj_table mr_table, cq_table, srq_table, qp_table;
	struct qhca_mr **mr;	/* by key index */
	struct qhca_cq **cq;	/* by table slot */
	struct qhca_srq **srq;
	struct qhca_qp **qp;	/* by qpn - 2 */
	uint8_t *pkt;		/* one frame being built */
	uint8_t *payload;	/* one MTU of payload being gathered */
	/* frames to our own port, delivered after the current work (no recursion) */
	uint8_t **loop_q;
	uint8_t *loop_mem;	/* the frames of loop_q */
	size_t *loop_len;
	unsigned loop_head, loop_count;
	bool in_loop;
	bool tx_blocked;	/* the platform's transmit queue is full */
	bool loop_blocked;	/* the loopback queue is half full */
	bool loop_deferred;	/* the drain stopped at its budget: the timer goes on with it */
	bool admin_pending;	/* the admin queue stopped at its budget: the timer goes on */
	/* Send queues a requester budget stopped, going on from the timer (req.c): a FIFO of
	 * QP slots (room for max_qp), each standing for the QPN in sq_defer_qpn[slot] (0: the
	 * slot is not in it); the QP is found again by that number. */
	uint32_t *sq_defer_q, *sq_defer_qpn;
	uint32_t sq_defer_head, sq_defer_n;
	unsigned sq_run_depth;	/* runs nested in a run share its budget */
	uint32_t sq_run_wqes;	/* WQEs the run started */
	uint64_t sq_run_bytes;	/* dma_bytes when it began */
	uint64_t dma_bytes;	/* guest memory moved, all told: the admin queue's budget */
	uint64_t dma_calls;	/* and the accesses that moved it (for the tests) */
	uint64_t qp_window_bytes;	/* the QPs' win_bytes together */
	uint64_t qp_serial;	/* the last qhca_qp.serial given */
	uint64_t host_bytes;	/* host memory guests sized, within host_budget (mem.c) */
	uint64_t host_budget;
	/* Work that is proportional to the QPs that need attention, never to max_qp: */
	struct qhca_qp **timer_heap;	/* QPs with a deadline, a min-heap of max_qp (xmit.c) */
	uint32_t timer_n;
	uint64_t timer_armed;	/* what the platform's timer holds; UINT64_MAX: nothing */
	uint64_t timer_steps;	/* heap steps, all told: the timers' cost, for the tests */
	struct qhca_list tx_waiters;	/* QPs with packets to send when tx resumes, FIFO */
	uint32_t gsi_qpn;	/* our QP that answers to QP1, or 0 */
	uint32_t smi_qpn;	/* our QP that answers to QP0 (InfiniBand), or 0 */
	struct qhca_mcast_group *mcast;	/* multicast groups, nmcast slots */
	uint32_t nmcast;

	/* port and Ethernet function */
	bool link_up;
	uint8_t mac[6];		/* the port's address now: cfg.mac until SET_MAC */
	struct qhca_eth eth;
	struct qhca_ib_port ib;	/* link=ib */
	struct qhca_iw *iw;	/* link=iwarp: its connections (iw_cm.c) */
	struct qhca_counters cnt;

	/* counters, for tests and statistics */
	uint64_t admin_cmds;
	uint64_t admin_errors;
};

/* Set up an engine in memory the caller provides (unit tests, fuzzers, qhca_engine_new). */
int qhca_engine_init(struct qhca_engine *e, const struct qhca_engine_config *cfg,
		     const struct qhca_engine_ops *ops, void *opaque);
void qhca_engine_fini(struct qhca_engine *e);
/* migrate.c: qhca_engine_load() into @e, fresh from qhca_engine_init(); on failure (-1) @e
 * holds part of the state, which qhca_engine_fini() frees. */
int qhca_engine_load_into(struct qhca_engine *e, const uint8_t *buf, size_t len, char *why,
			  size_t why_len);

/* trace.c: logging, and the teaching trace */
void qhca_logf(struct qhca_engine *e, enum qhca_log_level level, const char *func,
	       const char *fmt, ...) __attribute__((format(printf, 4, 5)));
#define qhca_log(e, level, ...) qhca_logf((e), (level), __func__, __VA_ARGS__)
#define qhca_log_guest(e, ...) qhca_logf((e), QHCA_LOG_GUEST, __func__, __VA_ARGS__)

/*
 * The teaching trace (trace.c): one line a datapath step, "kind key=value ...", while the
 * platform has tracing on. Off, a step is one predictable branch and formats nothing.
 */
#define qhca_tracing(e)	__builtin_expect((e)->tracing, 0)
#define qhca_step(e, ...)						\
	do {								\
		if (qhca_tracing(e))					\
			qhca_stepf((e), __VA_ARGS__);			\
	} while (0)
void qhca_stepf(struct qhca_engine *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A packet: @kind tx, rx or drop (with @why), on our QP @qpn, @size bytes on the wire. */
void qhca_step_pkt(struct qhca_engine *e, const char *kind, uint32_t qpn,
		   const struct roce_pkt *p, size_t size, const char *why);
void qhca_step_cqe(struct qhca_engine *e, uint32_t cqn, uint32_t slot, const struct qhca_cqe *c,
		   bool event);
const char *qhca_wr_name(uint8_t op);
const char *qhca_aeth_name(uint8_t syndrome);
const char *qhca_wc_status_name(uint8_t status);

/* dma.c: the one checked path into guest memory: rejects wrap, zero address, oversize. */
#define QHCA_DMA_MAX_LEN	(1u << 24)
int qhca_dma_read(struct qhca_engine *e, uint64_t addr, void *buf, size_t len);
int qhca_dma_write(struct qhca_engine *e, uint64_t addr, const void *buf, size_t len);

/* objtable.c */
int qhca_obj_table_init(struct qhca_obj_table *t, uint32_t capacity);
void qhca_obj_table_fini(struct qhca_obj_table *t);
void qhca_obj_table_clear(struct qhca_obj_table *t);
/* Allocate a slot; returns its handle or 0 if the table is full. */
uint32_t qhca_obj_alloc(struct qhca_obj_table *t, uint32_t owner);
/* Slot index of a live handle, or -1. */
int64_t qhca_obj_lookup(const struct qhca_obj_table *t, uint32_t handle);
void qhca_obj_free(struct qhca_obj_table *t, uint32_t handle);
int64_t qhca_obj_lookup_masked(const struct qhca_obj_table *t, uint32_t key, uint32_t mask);
uint32_t qhca_obj_generation(uint32_t handle);
/* Objects that name another (a QP its PD, a PD its user context) hold it while they live:
 * the held one cannot be destroyed (QHCA_ST_BUSY). Handle 0 (the kernel) is never held. */
void qhca_obj_hold(struct qhca_obj_table *t, uint32_t handle);
void qhca_obj_unhold(struct qhca_obj_table *t, uint32_t handle);
uint32_t qhca_obj_users(const struct qhca_obj_table *t, uint32_t handle);

/* mem.c */
/*
 * Host memory whose size a guest chooses (object records, page lists, send windows): zeroed,
 * counted in e->host_bytes, and refused (NULL) past e->host_budget. Free with
 * qhca_host_free, which needs no engine.
 */
void *qhca_host_zalloc(struct qhca_engine *e, size_t n, size_t size);
void qhca_host_free(void *p);
uint16_t qhca_pbl_load(struct qhca_engine *e, const struct qhca_pbl *pbl, uint32_t max_pages,
		       uint64_t **pages);
int qhca_pages_xfer(struct qhca_engine *e, const uint64_t *pages, uint32_t npages, uint64_t off,
		    void *buf, size_t len, bool to_guest);
struct qhca_mr *qhca_mr_find(struct qhca_engine *e, uint32_t key);
uint16_t qhca_mr_create(struct qhca_engine *e, const struct qhca_mr_create *c, uint32_t *key);
uint16_t qhca_mr_destroy(struct qhca_engine *e, uint32_t key);
uint16_t qhca_mr_rereg(struct qhca_engine *e, uint32_t key, const struct qhca_mr_create *c);
uint8_t qhca_mr_fast_reg(struct qhca_engine *e, uint32_t pd, const struct qhca_reg_mr_seg *r);
uint8_t qhca_mr_invalidate(struct qhca_engine *e, const struct qhca_qp *qp, uint32_t key,
			   bool remote, const char **why);
uint8_t qhca_mw_bind(struct qhca_engine *e, const struct qhca_qp *qp,
		     const struct qhca_bind_mw_seg *b);
struct qhca_mr *qhca_rkey_check(struct qhca_engine *e, const struct qhca_qp *qp, uint32_t key,
				uint64_t va, uint64_t len, uint32_t access, const char **why);
void qhca_mr_reset(struct qhca_engine *e);
struct qhca_mr *qhca_mr_check(struct qhca_engine *e, uint32_t key, uint32_t pd, uint64_t va,
			      uint64_t len, uint32_t access, const char **why);
int qhca_mr_xfer(struct qhca_engine *e, const struct qhca_mr *mr, uint64_t va, void *buf,
		 size_t len, bool to_guest);
struct qhca_mr *qhca_mr_get(struct qhca_mr *mr);
void qhca_mr_put(struct qhca_mr *mr);
int qhca_sgl_load(struct qhca_engine *e, struct qhca_sgl *sgl, uint32_t pd, uint32_t access,
		  uint32_t *bad, const char **why);
void qhca_sgl_release(struct qhca_sgl *sgl);
int qhca_sgl_xfer(struct qhca_engine *e, const struct qhca_sgl *sgl, uint64_t off, uint8_t *buf,
		  uint32_t len, bool to_guest);

/* cq.c */
uint16_t qhca_cq_create(struct qhca_engine *e, const struct qhca_cq_create *c, uint32_t *cqn);
uint16_t qhca_cq_destroy(struct qhca_engine *e, uint32_t cqn);
uint16_t qhca_cq_resize(struct qhca_engine *e, uint32_t cqn, const struct qhca_cq_resize *r);
struct qhca_cq *qhca_cq_find(struct qhca_engine *e, uint32_t cqn);
void qhca_cq_reset(struct qhca_engine *e);
void qhca_cq_arm_doorbell(struct qhca_engine *e, uint32_t page, uint64_t value, bool solicited);
/* Does doorbell page @page belong to user context @uctx (page 0: the kernel, uctx 0)? */
bool qhca_page_owns(struct qhca_engine *e, uint32_t page, uint32_t uctx);
/* Write a CQE; returns -1 if the CQ overflowed (the CQE is lost). */
int qhca_cq_post(struct qhca_engine *e, struct qhca_cq *cq, struct qhca_cqe *cqe,
		 bool solicited);

/* qp.c */
uint16_t qhca_qp_create(struct qhca_engine *e, const struct qhca_qp_create *c, uint32_t *qpn);
uint16_t qhca_qp_modify(struct qhca_engine *e, uint32_t qpn, const struct qhca_qp_attr *a);
uint16_t qhca_qp_query(struct qhca_engine *e, uint32_t qpn, struct qhca_qp_attr *a);
bool qhca_qp_attr_ok(const struct qhca_engine *e, const struct qhca_qp_attr *a);
uint16_t qhca_qp_destroy(struct qhca_engine *e, uint32_t qpn);
struct qhca_qp *qhca_qp_find(struct qhca_engine *e, uint32_t qpn);
const char *qhca_qp_state_name(uint8_t state);
void qhca_qp_reset_all(struct qhca_engine *e);
void qhca_qp_error(struct qhca_engine *e, struct qhca_qp *qp, uint8_t event);
void qhca_qp_flush(struct qhca_engine *e, struct qhca_qp *qp);
void qhca_wq_doorbell(struct qhca_engine *e, uint32_t page, uint32_t reg, uint64_t value);
uint16_t qhca_srq_create(struct qhca_engine *e, const struct qhca_srq_create *c, uint32_t *srqn);
uint16_t qhca_srq_modify(struct qhca_engine *e, uint32_t srqn, const struct qhca_srq_modify *m);
uint16_t qhca_srq_query(struct qhca_engine *e, uint32_t srqn, struct qhca_srq_attr *a);
uint16_t qhca_srq_destroy(struct qhca_engine *e, uint32_t srqn);
uint16_t qhca_srq_resize(struct qhca_engine *e, uint32_t srqn, const struct qhca_srq_resize *r);
struct qhca_srq *qhca_srq_find(struct qhca_engine *e, uint32_t srqn);
/* The XRC SRQ of XRC SRQ number @n (24 bits, from the wire), or NULL. */
struct qhca_srq *qhca_xrc_srq_find(struct qhca_engine *e, uint32_t n);
void qhca_srq_reset(struct qhca_engine *e);
/* Take the next receive WQE of @qp (its RQ or SRQ) into @rc; -1 if none is posted. */
int qhca_recv_take(struct qhca_engine *e, struct qhca_qp *qp, struct qhca_recv_ctx *rc);
void qhca_recv_drop(struct qhca_qp *qp);
uint64_t qhca_wq_gpa(const struct qhca_wq *wq, uint32_t idx);
int qhca_wq_read(struct qhca_engine *e, const struct qhca_wq *wq, uint32_t idx, uint32_t off,
		 void *buf, size_t len);
void qhca_recv_complete(struct qhca_engine *e, struct qhca_qp *qp, struct qhca_recv_ctx *rc,
			uint8_t status, uint8_t opcode, uint32_t byte_len, uint32_t imm,
			uint8_t flags, const struct roce_pkt *p, bool solicited);

/* The send WQE snapshot of SQ index @idx. */
static inline struct qhca_send_wqe *qhca_sq_slot(struct qhca_qp *qp, uint32_t idx)
{
	return &qp->win[idx & (qp->win_size - 1)];
}

static inline bool qhca_wr_is_rd_atomic(uint8_t op)
{
	return op == QHCA_WR_RDMA_READ || op == QHCA_WR_ATOMIC_CMP_AND_SWP ||
	       op == QHCA_WR_ATOMIC_FETCH_AND_ADD || op == QHCA_WR_ATOMIC_WRITE;
}

/* A send WQE's flags: known ones only; READ_INV only on a READ of one SGE, not inline
 * (qhca_wqe_load, and a loaded stream's snapshots). */
static inline bool qhca_wqe_flags_ok(const struct qhca_sq_wqe *h)
{
	if (h->flags & ~(QHCA_WQE_SIGNALED | QHCA_WQE_SOLICITED | QHCA_WQE_FENCE |
			 QHCA_WQE_INLINE | QHCA_WQE_READ_INV))
		return false;
	return !(h->flags & QHCA_WQE_READ_INV) ||
	       (h->opcode == QHCA_WR_RDMA_READ && h->num_sge == 1 &&
		!(h->flags & QHCA_WQE_INLINE));
}

/* Memory operations the device executes itself, sending nothing. */
static inline bool qhca_wr_is_local(uint8_t op)
{
	return op == QHCA_WR_REG_MR || op == QHCA_WR_LOCAL_INV || op == QHCA_WR_BIND_MW;
}

/* req.c: requester */
/* May a QP of @type post work request @op? */
bool qhca_wr_allowed(uint8_t type, uint8_t op);
void qhca_req_run(struct qhca_engine *e, struct qhca_qp *qp);
/* A run of requester work begins or ends: the outermost one starts a budget, the ones
 * within it share it; each entry from the platform (a doorbell, the admin queue's too, a
 * frame received, a timer callback, tx_resume, resume) is one (req.c, "the budget"). */
void qhca_req_budget_begin(struct qhca_engine *e);
void qhca_req_budget_end(struct qhca_engine *e);
/* @qp goes on from the timer (the caller updates the timer); from the engine's timer:
 * go on with the send queues a budget stopped. */
void qhca_req_defer(struct qhca_engine *e, const struct qhca_qp *qp);
void qhca_req_resume(struct qhca_engine *e);
/* Is @qp waiting there for its turn? */
bool qhca_req_deferred(const struct qhca_engine *e, const struct qhca_qp *qp);
/* Read and check send WQE @idx into @sw; a work completion status. */
uint8_t qhca_wqe_load(struct qhca_engine *e, struct qhca_qp *qp, uint32_t idx,
		      struct qhca_send_wqe *sw);
/* REG_MR, BIND_MW or LOCAL_INV @sw, executed now; a work completion status. */
uint8_t qhca_wqe_local_op(struct qhca_engine *e, struct qhca_qp *qp, struct qhca_send_wqe *sw);
/* Go back to @psn (@nak: a PSN-sequence NAK of it, else the timer). */
void qhca_req_retransmit(struct qhca_engine *e, struct qhca_qp *qp, uint32_t psn, bool nak);
void qhca_req_release(struct qhca_qp *qp);
/* Move message bytes [off, off + len) of @sw between its buffers and @buf. */
int qhca_wqe_xfer(struct qhca_engine *e, struct qhca_send_wqe *sw, uint64_t off, uint8_t *buf,
		  uint32_t len, bool to_guest);

/* comp.c: completer */
void qhca_comp_response(struct qhca_engine *e, struct qhca_qp *qp, const struct roce_pkt *p);
void qhca_comp_timer(struct qhca_engine *e, struct qhca_qp *qp, uint64_t now);
void qhca_comp_flush(struct qhca_engine *e, struct qhca_qp *qp);
void qhca_comp_ready(struct qhca_engine *e, struct qhca_qp *qp);
void qhca_comp_arm_timer(struct qhca_engine *e, struct qhca_qp *qp);

/* rdrecov.c: READ and ATOMIC recovery (struct qhca_rd_recovery, "READ responses") */
/* READ or ATOMIC @sw starts (its PSNs set): nothing asked, nothing come. */
void qhca_rd_start(struct qhca_send_wqe *sw);
/* An ACK or NAK past READ or ATOMIC @sw: the responder has its request. */
void qhca_rd_reached(struct qhca_send_wqe *sw);
/* The requester goes back to SQ slot @idx to ask for what it lost. */
void qhca_rd_wake(struct qhca_qp *qp, uint32_t idx);
/* The READ or ATOMIC in SQ slot @idx asks again for what it still waits for (@nak: the
 * responder does not have its request). */
void qhca_rd_rewind(struct qhca_qp *qp, uint32_t idx, bool nak);
/* The responder answered everything before @x: true if a READ or ATOMIC before it found
 * answers lost (it asks again: qhca_rd_wake). */
bool qhca_rd_answered(struct qhca_qp *qp, uint32_t x);
/* Does READ @sw have responses to ask for again? */
bool qhca_read_lost(const struct qhca_send_wqe *sw);
/* What a response to a READ is, to the READ */
enum qhca_read_resp {
	QHCA_READ_DUP,		/* arrived before, or before read_next */
	QHCA_READ_FAR,		/* past the horizon: too far ahead to keep, asked for again */
	QHCA_READ_NEXT,		/* at read_next: to place */
	QHCA_READ_AHEAD,	/* after read_next, within the horizon: to place */
};
/* Response @psn of READ @sw came: note what it shows of its requests in flight. */
enum qhca_read_resp qhca_read_response(struct qhca_send_wqe *sw, uint32_t psn);
/* Response @psn (NEXT or AHEAD) was placed in @sw's buffers: true if all have come. */
bool qhca_read_placed(struct qhca_send_wqe *sw, uint32_t psn);
/* The next run of lost responses READ @sw may ask for again, within a window of @cwnd
 * responses: the first in *@psn, how many in *@n; false if none now. */
bool qhca_read_again(const struct qhca_send_wqe *sw, uint32_t cwnd, uint32_t *psn,
		     uint32_t *n);
/* READ @sw asked for @n responses from @psn (@whole: the first request, for all of them). */
void qhca_read_asked(struct qhca_send_wqe *sw, uint32_t psn, uint32_t n, bool whole);

/* xmit.c: transmit path, loopback, back-pressure and timers */
static inline bool qhca_tx_stopped(const struct qhca_engine *e)
{
	return e->tx_blocked || e->loop_blocked;
}
/* Send @p built from the QP's address vector; loops back frames to our own MAC. */
uint8_t *qhca_tx_payload(struct qhca_engine *e, const struct qhca_av *av, uint8_t opcode);
void qhca_xmit_pkt(struct qhca_engine *e, struct qhca_qp *qp, struct roce_pkt *p);
void qhca_xmit_frame(struct qhca_engine *e, const uint8_t *frame, size_t len);
void qhca_timer_update(struct qhca_engine *e);
int qhca_timer_init(struct qhca_engine *e);
void qhca_timer_fini(struct qhca_engine *e);
void qhca_tx_wait(struct qhca_engine *e, struct qhca_qp *qp);
void qhca_qp_set_deadline(struct qhca_engine *e, struct qhca_qp *qp, uint64_t deadline);
/* Take @qp off the engine's lists (reset or destroy). */
void qhca_qp_unlink(struct qhca_engine *e, struct qhca_qp *qp);
int qhca_loopback_init(struct qhca_engine *e);
void qhca_loopback_fini(struct qhca_engine *e);
void qhca_loopback_drain(struct qhca_engine *e);

/* recv.c: a RoCE or InfiniBand frame looped back to its QP (qhca_engine_receive: from the
 * wire) */
void qhca_roce_receive(struct qhca_engine *e, const uint8_t *frame, size_t len);

/* resp.c: responder */
void qhca_resp_request(struct qhca_engine *e, struct qhca_qp *qp, const struct roce_pkt *p);
void qhca_resp_reset(struct qhca_engine *e, struct qhca_qp *qp);
bool qhca_resp_pump(struct qhca_engine *e, struct qhca_qp *qp);

/*
 * Payload bytes of packet @k of a message of @len bytes cut into @mtu-byte packets; 0 past
 * its end. A message keeps the MTU it started with (qhca_send_wqe.mtu, rr.mtu): a path MTU
 * changed meanwhile never moves its packets' offsets past its bytes.
 */
static inline uint32_t qhca_pkt_len(uint64_t len, uint32_t mtu, uint32_t k)
{
	uint64_t off = (uint64_t)k * mtu;

	return off >= len ? 0 : len - off < mtu ? (uint32_t)(len - off) : mtu;
}

/* 24-bit PSN arithmetic: a - b as a signed distance. */
static inline int32_t qhca_psn_diff(uint32_t a, uint32_t b)
{
	return (int32_t)((a - b) << 8) >> 8;
}

/* sma.c: the InfiniBand port, its SMA and PMA, multicast groups */
uint8_t qhca_mtu_enum(uint32_t mtu);
uint64_t qhca_node_guid(const struct qhca_engine *e);
uint64_t qhca_port_guid(const struct qhca_engine *e);
void qhca_ib_port_reset(struct qhca_engine *e);
void qhca_ib_port_link(struct qhca_engine *e, bool up);
bool qhca_ib_active(const struct qhca_engine *e);
bool qhca_ib_lid_ours(const struct qhca_engine *e, uint16_t dlid);
uint16_t qhca_ib_slid(const struct qhca_engine *e, uint8_t path_bits, uint16_t dlid);
bool qhca_ib_pkey_ok(const struct qhca_engine *e, uint16_t pkey);
/* A MAD for the port's SMA or PMA: 1 with the response in @out; @own: the driver's own
 * query, answered without the M_Key (QHCA_MAD_IFC_IGNORE_MKEY). */
int qhca_mad_ifc(struct qhca_engine *e, const uint8_t *in, uint8_t *out, bool own);
uint16_t qhca_mcast_attach(struct qhca_engine *e, uint32_t qpn, const struct qhca_mcast *m);
uint16_t qhca_mcast_detach(struct qhca_engine *e, uint32_t qpn, const struct qhca_mcast *m);
void qhca_mcast_forget_qp(struct qhca_engine *e, uint32_t qpn);
void qhca_mcast_reset(struct qhca_engine *e);
void qhca_mcast_deliver(struct qhca_engine *e, const struct roce_pkt *p, uint32_t except);

/* eq.c */
uint16_t qhca_eq_create(struct qhca_engine *e, const struct qhca_cmd_create_eq *c,
			uint32_t *handle);
uint16_t qhca_eq_destroy(struct qhca_engine *e, uint32_t handle);
void qhca_eq_reset(struct qhca_engine *e);
void qhca_eq_doorbell(struct qhca_engine *e, uint64_t value);
/* Post an event to EQ @idx; returns -1 if it was dropped (queue full or DMA error). */
int qhca_eq_post(struct qhca_engine *e, int idx, uint8_t type, uint32_t handle, uint64_t data);
void qhca_event_async(struct qhca_engine *e, uint8_t type, uint32_t handle, uint64_t data);

/* eth.c */
uint16_t qhca_eth_start(struct qhca_engine *e, const struct qhca_cmd_eth_start *c);
void qhca_eth_stop(struct qhca_engine *e);
void qhca_eth_tx_doorbell(struct qhca_engine *e, uint32_t pi);
void qhca_eth_rx_doorbell(struct qhca_engine *e, uint32_t pi);
void qhca_eth_receive(struct qhca_engine *e, const uint8_t *frame, size_t len);

/* A free-running producer index from the guest is sane if it is at most @size ahead of
 * the consumer index. */
static inline bool qhca_ring_pi_ok(uint32_t pi, uint32_t ci, uint32_t size)
{
	return pi - ci <= size;
}

void qhca_admin_reset(struct qhca_engine *e);
bool qhca_admin_enable(struct qhca_engine *e);
void qhca_admin_sq_doorbell(struct qhca_engine *e, uint32_t tail);
void qhca_admin_cq_doorbell(struct qhca_engine *e, uint32_t head);
/* Go on with the commands a doorbell left (admin_pending), from the engine's timer. */
void qhca_admin_resume(struct qhca_engine *e);

#endif /* QHCA_ENGINE_INTERNAL_H */
