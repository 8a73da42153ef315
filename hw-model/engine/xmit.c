// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * qhca transmit path: packets to the platform's netdev or, addressed to our own MAC, to
 * the loopback queue that delivers them after the current work; back-pressure (the QPs
 * waiting to send, resumed in FIFO order); the QPs with a deadline and the engine's one
 * timer. Work here is proportional to the QPs that need attention, never to max_qp: the
 * deadlines are a heap, O(log n) to change one, whatever the QPs that are not due.
 */
#include <stdlib.h>
#include <string.h>

#include "engine_internal.h"

/* ---------------------------------------------------------------- transmit */
static const uint8_t *own_mac(struct qhca_engine *e)
{
	return e->mac;
}

static void loopback_enqueue(struct qhca_engine *e, const uint8_t *frame, size_t len);

/*
 * Where the payload of a packet of @opcode to @av goes in the frame being built: payload
 * gathered there from guest memory is not copied again (roce_build leaves it in place).
 */
uint8_t *qhca_tx_payload(struct qhca_engine *e, const struct qhca_av *av, uint8_t opcode)
{
	if (e->cfg.link == QHCA_LINK_IB)
		return e->pkt + ib_payload_offset(av->ib_flags & QHCA_AV_GRH, opcode);
	if (av->ib_flags & QHCA_AV_ROCE_V1)
		return e->pkt + ROCE_ETH_HLEN + ROCE_GRH_LEN + roce_opcode_info(opcode)->hdr_len;
	return e->pkt + ROCE_ETH_HLEN + (roce_gid_is_v4(av->dgid) ? ROCE_IPV4_HLEN : ROCE_IPV6_HLEN) +
	       ROCE_UDP_HLEN + roce_opcode_info(opcode)->hdr_len;
}

/* Count a packet that was built (len > 0); log one that could not be. */
static bool built(struct qhca_engine *e, const struct qhca_qp *qp, const struct roce_pkt *p,
		  size_t len)
{
	if (!len) {
		qhca_log(e, QHCA_LOG_ERR, "QP 0x%x: cannot build opcode 0x%x", qp->qpn, p->opcode);
		return false;
	}
	e->cnt.roce_tx_pkts++;
	e->cnt.roce_tx_bytes += len;
	if (qhca_tracing(e))
		qhca_step_pkt(e, "tx", qp->qpn, p, len, NULL);
	return true;
}

/*
 * An InfiniBand packet (IBA 7.7): the LRH from the address vector, VL15 for QP0 and VL0
 * (the one data VL) for the rest, a GRH if the address asks for one. A port that is not
 * ACTIVE sends only SMPs. To one of our own LIDs it loops back; multicast also goes to the
 * port's own attached QPs.
 */
static void ib_xmit(struct qhca_engine *e, struct qhca_qp *qp, struct roce_pkt *p)
{
	const struct qhca_av *av = &qp->av;
	bool smp = qp->type == QHCA_QPT_SMI;
	size_t len;

	if (!smp && !qhca_ib_active(e)) {
		qhca_log(e, QHCA_LOG_EVENT, "QP 0x%x: packet not sent, the port is not active",
			 qp->qpn);
		return;
	}
	p->ib = true;
	p->grh = av->ib_flags & QHCA_AV_GRH;
	if (p->grh) {
		memcpy(p->sgid, av->sgid, 16);
		memcpy(p->dgid, av->dgid, 16);
		p->hop_limit = av->hop_limit;
		p->tclass = av->tclass;
		p->flow_label = av->flow_label;
	}
	p->dlid = av->dlid;
	p->sl = av->sl & 0x0f;
	p->vl = smp ? IB_VL_SMP : 0;
	p->slid = qhca_ib_slid(e, av->ib_flags & QHCA_AV_PATH_BITS_MASK, av->dlid);
	len = ib_build(p, e->pkt, ROCE_MAX_HDR + 4096 + 8);
	if (!built(e, qp, p, len))
		return;
	if (qhca_ib_lid_ours(e, p->dlid) || ib_lid_mcast(p->dlid)) {
		e->cnt.loopback_pkts++;
		loopback_enqueue(e, e->pkt, len);
		if (!ib_lid_mcast(p->dlid))
			return;
	}
	if (e->link_up)
		e->ops->xmit(e->opaque, e->pkt, len);
}

void qhca_xmit_pkt(struct qhca_engine *e, struct qhca_qp *qp, struct roce_pkt *p)
{
	const struct qhca_av *av = &qp->av;
	size_t len;

	if (e->cfg.link == QHCA_LINK_IB) {
		ib_xmit(e, qp, p);
		return;
	}

	memcpy(p->dmac, av->dmac, 6);
	memcpy(p->smac, own_mac(e), 6);
	memcpy(p->sgid, av->sgid, 16);
	memcpy(p->dgid, av->dgid, 16);
	/* RoCE v1 (the GRH after the Ethernet header) or v2 (IPv4 or IPv6, and UDP), as the
	 * type of the GID the driver chose says. */
	p->grh = av->ib_flags & QHCA_AV_ROCE_V1;
	p->ipv6 = p->grh || !roce_gid_is_v4(av->dgid);
	p->hop_limit = av->hop_limit ? av->hop_limit : 64;
	p->tclass = av->tclass;
	p->flow_label = av->flow_label;
	/* The source port spreads flows over ECMP paths (A17.5.1.1): derive it from the QPs. */
	p->udp_sport = 0xc000 | ((qp->qpn * 0x9e37u) ^ p->dqpn) % 0x4000;
	len = roce_build(p, e->pkt, ROCE_MAX_HDR + 4096 + 8);
	if (!built(e, qp, p, len))
		return;
	if (!memcmp(av->dmac, own_mac(e), 6)) {
		e->cnt.loopback_pkts++;
		loopback_enqueue(e, e->pkt, len);
	} else if (e->link_up) {
		e->ops->xmit(e->opaque, e->pkt, len);
	}
}

/* A whole Ethernet frame of the port (an iWARP TCP segment): to our own MAC it loops back
 * (a connection within the guest), else to the wire. A frame to its own source MAC loops
 * back too: a connection within the guest made before the port's MAC changed (SET_MAC)
 * keeps the old one in its headers, and its frames must not reach whoever has it now. */
void qhca_xmit_frame(struct qhca_engine *e, const uint8_t *frame, size_t len)
{
	if (len < 14 || len > LOOP_FRAME) {
		qhca_log(e, QHCA_LOG_ERR, "a frame of %zu bytes not sent", len);
		return;
	}
	if (!memcmp(frame, own_mac(e), 6) || !memcmp(frame, frame + 6, 6)) {
		e->cnt.loopback_pkts++;
		loopback_enqueue(e, frame, len);
	} else if (e->link_up) {
		e->ops->xmit(e->opaque, frame, len);
	}
}

/* ---------------------------------------------------------------- loopback */

static void loopback_enqueue(struct qhca_engine *e, const uint8_t *frame, size_t len)
{
	unsigned slot_i;

	/* While a frame is delivered (in_loop) its slot is no longer counted but still read:
	 * a frame sent meanwhile must not overwrite it. */
	if (e->loop_count >= LOOP_QUEUE - (e->in_loop ? 1u : 0u)) {
		qhca_log(e, QHCA_LOG_EVENT, "loopback queue full: frame dropped");
		return;		/* like a full link: the transport recovers */
	}
	slot_i = (e->loop_head + e->loop_count++) % LOOP_QUEUE;
	memcpy(e->loop_q[slot_i], frame, len);
	e->loop_len[slot_i] = len;
	if (e->loop_count >= LOOP_QUEUE / 2)
		e->loop_blocked = true;
}

static void run_requesters(struct qhca_engine *e);

/* Frames one drain delivers at most: two QPs of one device that answer each other for
 * ever (a guest can make them) must not keep the device's thread here; the rest goes on
 * from the timer, after the platform has had its turn. */
#define LOOP_BUDGET	(4 * LOOP_QUEUE)

/* Deliver looped-back frames; called when the outermost piece of work is done. */
void qhca_loopback_drain(struct qhca_engine *e)
{
	unsigned budget = LOOP_BUDGET;

	if (e->in_loop)
		return;
	e->in_loop = true;
	e->loop_deferred = false;
	qhca_req_budget_begin(e);	/* the QPs its frames move on share one */
	do {
		while (e->loop_count) {
			if (!budget--) {
				e->loop_deferred = true;
				e->in_loop = false;
				qhca_req_budget_end(e);
				qhca_timer_update(e);	/* fires at once: see there */
				return;
			}
			unsigned i = e->loop_head;

			e->loop_head = (e->loop_head + 1) % LOOP_QUEUE;
			e->loop_count--;
			if (e->cfg.link == QHCA_LINK_IWARP)
				qhca_iw_loop_receive(e, e->loop_q[i], e->loop_len[i]);
			else
				qhca_roce_receive(e, e->loop_q[i], e->loop_len[i]);
		}
		if (e->loop_blocked) {
			/* Drained: the requesters that stopped for the queue go on. */
			e->loop_blocked = false;
			run_requesters(e);
		}
	} while (e->loop_count);
	e->in_loop = false;
	qhca_req_budget_end(e);
}

/* The queue's frames live in one block: one allocation, however many slots. */
int qhca_loopback_init(struct qhca_engine *e)
{
	unsigned i;

	e->loop_q = calloc(LOOP_QUEUE, sizeof(*e->loop_q));
	e->loop_len = calloc(LOOP_QUEUE, sizeof(*e->loop_len));
	e->loop_mem = malloc((size_t)LOOP_QUEUE * LOOP_FRAME);
	if (!e->loop_q || !e->loop_len || !e->loop_mem)
		return -1;
	for (i = 0; i < LOOP_QUEUE; i++)
		e->loop_q[i] = e->loop_mem + (size_t)i * LOOP_FRAME;
	return 0;
}

void qhca_loopback_fini(struct qhca_engine *e)
{
	free(e->loop_mem);
	free(e->loop_q);
	free(e->loop_len);
	e->loop_mem = NULL;
	e->loop_q = NULL;
	e->loop_len = NULL;
}

/* ---------------------------------------------------------------- the engine's timer */
/*
 * The QPs with a deadline form a binary min-heap on it: timer_heap[0] is due first, the
 * children of entry i are 2i + 1 and 2i + 2, and a QP knows its place (timer_idx, + 1).
 * Setting, moving or cancelling a deadline takes O(log n) steps and finding the earliest
 * one, so the QPs that wait on long timeouts cost nothing while others come and go. The
 * heap has room for every QP the device can have (max_qp), allocated with the engine.
 */
int qhca_timer_init(struct qhca_engine *e)
{
	e->timer_heap = calloc(e->cfg.max_qp, sizeof(*e->timer_heap));
	e->timer_n = 0;
	e->timer_armed = UINT64_MAX;
	/* and the send queues a budget left to the timer (req.c) */
	e->sq_defer_q = calloc(e->cfg.max_qp, sizeof(*e->sq_defer_q));
	e->sq_defer_qpn = calloc(e->cfg.max_qp, sizeof(*e->sq_defer_qpn));
	e->sq_defer_head = e->sq_defer_n = 0;
	return e->timer_heap && e->sq_defer_q && e->sq_defer_qpn ? 0 : -1;
}

void qhca_timer_fini(struct qhca_engine *e)
{
	free(e->timer_heap);
	free(e->sq_defer_q);
	free(e->sq_defer_qpn);
	e->timer_heap = NULL;
	e->sq_defer_q = e->sq_defer_qpn = NULL;
	e->timer_n = e->sq_defer_n = 0;
}

static void heap_put(struct qhca_engine *e, uint32_t i, struct qhca_qp *qp)
{
	e->timer_heap[i] = qp;
	qp->timer_idx = i + 1;
}

/* Move @qp, at @i, towards the root while it is due before its parent. */
static void heap_up(struct qhca_engine *e, uint32_t i, struct qhca_qp *qp)
{
	while (i) {
		uint32_t parent = (i - 1) / 2;

		e->timer_steps++;
		if (e->timer_heap[parent]->deadline <= qp->deadline)
			break;
		heap_put(e, i, e->timer_heap[parent]);
		i = parent;
	}
	heap_put(e, i, qp);
}

/* Move @qp, at @i, towards the leaves while a child is due before it. */
static void heap_down(struct qhca_engine *e, uint32_t i, struct qhca_qp *qp)
{
	for (;;) {
		uint32_t c = 2 * i + 1;

		if (c >= e->timer_n)
			break;
		e->timer_steps++;
		if (c + 1 < e->timer_n &&
		    e->timer_heap[c + 1]->deadline < e->timer_heap[c]->deadline)
			c++;
		if (qp->deadline <= e->timer_heap[c]->deadline)
			break;
		heap_put(e, i, e->timer_heap[c]);
		i = c;
	}
	heap_put(e, i, qp);
}

/* @qp at @i has a new deadline: up or down to its place. */
static void heap_fix(struct qhca_engine *e, uint32_t i, struct qhca_qp *qp)
{
	if (i && e->timer_heap[(i - 1) / 2]->deadline > qp->deadline)
		heap_up(e, i, qp);
	else
		heap_down(e, i, qp);
}

static void heap_remove(struct qhca_engine *e, struct qhca_qp *qp)
{
	uint32_t i = qp->timer_idx - 1;
	struct qhca_qp *last = e->timer_heap[--e->timer_n];

	e->timer_heap[e->timer_n] = NULL;
	qp->timer_idx = 0;
	if (last != qp)
		heap_fix(e, i, last);	/* the last entry fills the hole */
}

/* Set @qp's deadline (UINT64_MAX: none); the caller then calls qhca_timer_update. */
void qhca_qp_set_deadline(struct qhca_engine *e, struct qhca_qp *qp, uint64_t deadline)
{
	qp->deadline = deadline;
	if (deadline == UINT64_MAX) {
		if (qp->timer_idx)
			heap_remove(e, qp);
	} else if (qp->timer_idx) {
		heap_fix(e, qp->timer_idx - 1, qp);
	} else if (e->timer_n < e->cfg.max_qp) {
		heap_up(e, e->timer_n++, qp);
	} else {
		/* Not reached: there are at most max_qp QPs. */
		qhca_log(e, QHCA_LOG_ERR, "QP 0x%x: no room for its timer", qp->qpn);
		qp->deadline = UINT64_MAX;
	}
}

void qhca_qp_unlink(struct qhca_engine *e, struct qhca_qp *qp)
{
	qhca_qp_set_deadline(e, qp, UINT64_MAX);
	qhca_list_del(&qp->tx_link);
	if (qp->iw_conn)
		qhca_iw_qp_gone(e, qp);	/* its iWARP connection is reset */
}

/* When the engine wants its timer: the earliest deadline, or at once for work that a
 * budget deferred (the loopback drain, the admin queue, send queues). */
static uint64_t timer_next(const struct qhca_engine *e)
{
	uint64_t qp, iw;

	if (e->loop_deferred || e->admin_pending || e->sq_defer_n)
		return 0;
	qp = e->timer_n ? e->timer_heap[0]->deadline : UINT64_MAX;
	iw = qhca_iw_deadline(e);
	return qp < iw ? qp : iw;
}

static void timer_arm(struct qhca_engine *e, uint64_t next)
{
	e->timer_armed = next;
	if (e->ops->timer_arm)
		e->ops->timer_arm(e->opaque, next);
}

/* Arm the platform's timer for what the engine wants, if that changed. */
void qhca_timer_update(struct qhca_engine *e)
{
	uint64_t next = timer_next(e);

	if (next != e->timer_armed)
		timer_arm(e, next);
}

void qhca_engine_tx_block(struct qhca_engine *e)
{
	e->tx_blocked = true;
}

/* @qp has packets to send once the platform takes frames again. */
void qhca_tx_wait(struct qhca_engine *e, struct qhca_qp *qp)
{
	if (qhca_list_empty(&qp->tx_link))
		qhca_list_add_tail(&e->tx_waiters, &qp->tx_link);
}

/*
 * Let the QPs that were pushed back send, oldest first; one that is pushed back again
 * goes to the end of the line, so one busy QP cannot starve the others.
 */
static void run_requesters(struct qhca_engine *e)
{
	qhca_req_budget_begin(e);	/* one for them all: the rest goes on from the timer */
	while (!qhca_tx_stopped(e) && !qhca_list_empty(&e->tx_waiters)) {
		struct qhca_qp *qp = qhca_container_of(e->tx_waiters.next, struct qhca_qp,
						       tx_link);

		qhca_list_del(&qp->tx_link);
		if (qhca_resp_pump(e, qp))
			qhca_req_run(e, qp);
	}
	qhca_req_budget_end(e);
}

void qhca_engine_tx_resume(struct qhca_engine *e)
{
	e->tx_blocked = false;
	qhca_req_budget_begin(e);	/* the senders and the drain after them: one run */
	run_requesters(e);
	qhca_loopback_drain(e);
	qhca_req_budget_end(e);
}

/* QPs one timer callback expires at most; the rest go on at once from the next. */
#define TIMER_BUDGET	1024

/*
 * The platform's timer fired: go on with the send queues a budget stopped, run the QPs'
 * timers that expired, earliest first (a QP's handler may move any deadline; each handled
 * QP leaves with a deadline in the future or none), then the admin commands and the
 * looped-back frames that a budget deferred, and arm the timer for what is left. All of
 * it is one run of the requester's budget (req.c): a QP it stops waits for the next.
 */
void qhca_engine_timer(struct qhca_engine *e)
{
	uint64_t now = e->ops->now_ns(e->opaque);
	unsigned budget = TIMER_BUDGET;

	qhca_req_budget_begin(e);
	qhca_req_resume(e);
	while (e->timer_n && e->timer_heap[0]->deadline <= now && budget) {
		qhca_comp_timer(e, e->timer_heap[0], now);
		budget--;
	}
	qhca_iw_timer(e, now);
	qhca_admin_resume(e);
	qhca_loopback_drain(e);
	qhca_req_budget_end(e);
	timer_arm(e, timer_next(e));	/* it fired (or was called early): tell it always */
}
