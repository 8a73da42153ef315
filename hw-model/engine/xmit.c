// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * qhca transmit path: packets to the platform's netdev or, addressed to our own MAC, to
 * the loopback queue that delivers them after the current work; back-pressure (the QPs
 * waiting to send, resumed in FIFO order); the QPs with a deadline and the engine's one
 * timer. Work here is proportional to the QPs that need attention, never to max_qp.
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
	p->ipv6 = !roce_gid_is_v4(av->dgid);
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

/* ---------------------------------------------------------------- loopback */
/* Requesters stop at half: the rest is room for ACKs and READ responses. */
#define LOOP_QUEUE	1024
#define LOOP_FRAME	(ROCE_MAX_HDR + 4096 + 8)

static void loopback_enqueue(struct qhca_engine *e, const uint8_t *frame, size_t len)
{
	unsigned slot_i;

	if (e->loop_count == LOOP_QUEUE) {
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
	do {
		while (e->loop_count) {
			if (!budget--) {
				e->loop_deferred = true;
				e->in_loop = false;
				qhca_timer_update(e);	/* fires at once: see there */
				return;
			}
			unsigned i = e->loop_head;

			e->loop_head = (e->loop_head + 1) % LOOP_QUEUE;
			e->loop_count--;
			qhca_roce_receive(e, e->loop_q[i], e->loop_len[i]);
		}
		if (e->loop_blocked) {
			/* Drained: the requesters that stopped for the queue go on. */
			e->loop_blocked = false;
			run_requesters(e);
		}
	} while (e->loop_count);
	e->in_loop = false;
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
void qhca_qp_set_deadline(struct qhca_engine *e, struct qhca_qp *qp, uint64_t deadline)
{
	qp->deadline = deadline;
	if (deadline == UINT64_MAX)
		qhca_list_del(&qp->timer_link);
	else if (qhca_list_empty(&qp->timer_link))
		qhca_list_add_tail(&e->timed_qps, &qp->timer_link);
}

void qhca_qp_unlink(struct qhca_engine *e, struct qhca_qp *qp)
{
	qp->deadline = UINT64_MAX;
	qhca_list_del(&qp->timer_link);
	qhca_list_del(&qp->tx_link);
}

/* Arm the platform's timer for the earliest deadline of the QPs that have one. */
void qhca_timer_update(struct qhca_engine *e)
{
	uint64_t next = e->loop_deferred ? 0 : UINT64_MAX;	/* a deferred loopback drain */
	struct qhca_list *l;

	for (l = e->timed_qps.next; l != &e->timed_qps; l = l->next) {
		struct qhca_qp *qp = qhca_container_of(l, struct qhca_qp, timer_link);

		if (qp->deadline < next)
			next = qp->deadline;
	}
	if (e->ops->timer_arm)
		e->ops->timer_arm(e->opaque, next);
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
	while (!qhca_tx_stopped(e) && !qhca_list_empty(&e->tx_waiters)) {
		struct qhca_qp *qp = qhca_container_of(e->tx_waiters.next, struct qhca_qp,
						       tx_link);

		qhca_list_del(&qp->tx_link);
		if (qhca_resp_pump(e, qp))
			qhca_req_run(e, qp);
	}
}

void qhca_engine_tx_resume(struct qhca_engine *e)
{
	e->tx_blocked = false;
	run_requesters(e);
	qhca_loopback_drain(e);
}

/* Run the timers that expired. A QP's handler may change any QP's deadline, so the scan
 * starts over after each; every handled QP leaves with a deadline in the future or none. */
void qhca_engine_timer(struct qhca_engine *e)
{
	uint64_t now = e->ops->now_ns(e->opaque);
	struct qhca_list *l;

again:
	for (l = e->timed_qps.next; l != &e->timed_qps; l = l->next) {
		struct qhca_qp *qp = qhca_container_of(l, struct qhca_qp, timer_link);

		if (qp->deadline <= now) {
			qhca_req_timer(e, qp, now);
			goto again;
		}
	}
	qhca_timer_update(e);
	qhca_loopback_drain(e);
}
