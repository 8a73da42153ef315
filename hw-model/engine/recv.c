// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * qhca engine: where a frame enters (as Linux rxe's rxe_recv.c). qhca_engine_receive()
 * takes a frame from the wire, qhca_roce_receive() one of ours looped back; each link
 * layer has its receive policy (recv_roce, recv_ib, recv_iwarp): which frames are the
 * transport's, which the netdev's, which are dropped and counted. A packet the parser
 * (wire/) accepted goes to its QP's requester (responses, comp.c) or responder (requests,
 * resp.c) after the link's checks: P_Key, QP0/QP1, LIDs and VL15 on InfiniBand.
 */
#include <string.h>

#include "engine_internal.h"

/* A frame the parser refused (@r), counted as @as, in the trace and the log at @level (a
 * frame from the wire is a guest's error, one of our own looped back an event). */
static void drop_bad(struct qhca_engine *e, size_t len, enum roce_parse_result r,
		     enum roce_parse_result as, enum qhca_log_level level, const char *what)
{
	e->cnt.roce_rx_bad[as]++;
	qhca_step(e, "drop size=%zu why=\"%s\"", len, roce_parse_result_name(r));
	qhca_logf(e, level, __func__, "%s of %zu bytes dropped: %s", what, len,
		  roce_parse_result_name(r));
}

static void step_drop(struct qhca_engine *e, const struct roce_pkt *p, const char *why)
{
	if (qhca_tracing(e))
		qhca_step_pkt(e, "drop", p->dqpn, p, 0, why);
}

/* A parsed packet for us: to the requester (responses) or the responder of its QP. */
static void dispatch_to_qp(struct qhca_engine *e, const struct roce_pkt *p)
{
	const struct roce_opcode_info *oi = roce_opcode_info(p->opcode);
	struct qhca_qp *qp;

	qp = qhca_qp_find(e, p->dqpn == 0 ? e->smi_qpn : p->dqpn == 1 ? e->gsi_qpn : p->dqpn);
	if (!qp) {
		e->cnt.roce_rx_no_qp++;
		step_drop(e, p, "no such QP");
		return;
	}
	if (oi->flags & ROCE_F_RESP)
		qhca_comp_response(e, qp, p);
	else
		qhca_resp_request(e, qp, p);
}

static void roce_dispatch(struct qhca_engine *e, const struct roce_pkt *p)
{
	if ((p->pkey & 0x7fff) != (ROCE_DEFAULT_PKEY & 0x7fff)) {
		e->cnt.roce_rx_bad_pkey++;
		step_drop(e, p, "P_Key not ours");
		return;
	}
	if (p->dqpn == 0) {
		e->cnt.roce_rx_no_qp++;	/* RoCE has no QP0 */
		step_drop(e, p, "RoCE has no QP0");
		return;
	}
	dispatch_to_qp(e, p);
}

/*
 * A packet on the InfiniBand port (IBA 7.9, 10.2.4): QP0 takes VL15 and VL15 only; the
 * DLID must be one of ours, a multicast LID, or (for SMPs) the permissive LID; a port
 * that is not ACTIVE takes only SMPs; the P_Key must be in the table (not checked for
 * SMPs, 10.9.1). Multicast goes to the QPs attached to the group.
 */
static void ib_dispatch(struct qhca_engine *e, const struct roce_pkt *p)
{
	bool smp = p->vl == IB_VL_SMP;
	bool to_us = p->dlid == IB_LID_PERMISSIVE ? smp :
		     qhca_ib_lid_ours(e, p->dlid) || ib_lid_mcast(p->dlid);

	if (smp != (p->dqpn == 0) || !to_us || (!smp && !qhca_ib_active(e))) {
		const char *why = !to_us ? "not our LID" : smp != (p->dqpn == 0) ?
				  "VL15 is for QP0 alone" : "port not active";

		e->cnt.ib_rx_bad_lid++;
		step_drop(e, p, why);
		qhca_log(e, QHCA_LOG_EVENT, "IB packet to LID 0x%x VL %u QP 0x%x dropped: %s",
			 p->dlid, p->vl, p->dqpn, why);
		return;
	}
	if (!smp && !qhca_ib_pkey_ok(e, p->pkey)) {
		e->cnt.roce_rx_bad_pkey++;
		step_drop(e, p, "P_Key not in the table");
		return;
	}
	if (ib_lid_mcast(p->dlid)) {
		if (p->dqpn != 0xffffff || !p->grh) {
			e->cnt.ib_rx_bad_lid++;
			return;
		}
		qhca_mcast_deliver(e, p, 0);
		return;
	}
	dispatch_to_qp(e, p);
}

static enum roce_parse_result parse(struct qhca_engine *e, const uint8_t *frame, size_t len,
				    struct roce_pkt *p)
{
	return e->cfg.link == QHCA_LINK_IB ? ib_parse(frame, len, p) : roce_parse(frame, len, p);
}

static void dispatch(struct qhca_engine *e, const struct roce_pkt *p, size_t len)
{
	if (qhca_tracing(e))
		qhca_step_pkt(e, "rx", p->dqpn, p, len, NULL);
	if (p->ib)
		ib_dispatch(e, p);
	else
		roce_dispatch(e, p);
}

void qhca_roce_receive(struct qhca_engine *e, const uint8_t *frame, size_t len)
{
	struct roce_pkt p;
	enum roce_parse_result r = parse(e, frame, len, &p);

	if (r != ROCE_OK) {
		drop_bad(e, len, r, r, QHCA_LOG_EVENT, "RoCE frame");
		return;
	}
	e->cnt.roce_rx_pkts++;
	e->cnt.roce_rx_bytes += len;
	dispatch(e, &p, len);
}

/* A packet from the wire that the parser accepted: counted, to its QP, then the loopback. */
static void accept_pkt(struct qhca_engine *e, const struct roce_pkt *p, size_t len)
{
	e->cnt.roce_rx_pkts++;
	e->cnt.roce_rx_bytes += len;
	dispatch(e, p, len);
	qhca_loopback_drain(e);
}

/* RoCE (v1 and v2): ordinary frames go to the netdev; RoCE to our own MAC goes to the
 * transport; RoCE flooded to us by the switch is not ours. */
static void recv_roce(struct qhca_engine *e, const uint8_t *frame, size_t len)
{
	struct roce_pkt p;
	enum roce_parse_result r = roce_parse(frame, len, &p);

	if (r == ROCE_NOT_ROCE) {
		qhca_eth_receive(e, frame, len);
		return;
	}
	if (memcmp(frame, e->mac, 6))
		return;		/* flooded by the switch, not for us */
	if (r != ROCE_OK) {
		drop_bad(e, len, r, r, QHCA_LOG_GUEST, "RoCE frame");
		return;
	}
	accept_pkt(e, &p, len);
}

/* InfiniBand: every packet is the transport's (there is no netdev on the link); raw and
 * IP packets (LNH 0, 1) are not for a CA of ours either. */
static void recv_ib(struct qhca_engine *e, const uint8_t *frame, size_t len)
{
	struct roce_pkt p;
	enum roce_parse_result r = ib_parse(frame, len, &p);

	if (r != ROCE_OK) {
		drop_bad(e, len, r, r == ROCE_NOT_ROCE ? ROCE_BAD_OPCODE : r, QHCA_LOG_GUEST,
			 "IB packet");
		return;
	}
	accept_pkt(e, &p, len);
}

/* iWARP: our connections' segments to TCP, the rest (RoCE too) to the netdev. */
static void recv_iwarp(struct qhca_engine *e, const uint8_t *frame, size_t len)
{
	/* Our own MAC as the source: what we send ourselves loops back inside
	 * (qhca_xmit_frame), so from the wire it is forged, or the network loops. Never a
	 * segment of our connections (taken, it would make one of them loop back to us);
	 * the netdev sees it, as a plain NIC's stack would (a bridge's loop detection among
	 * them). */
	if (len >= 12 && !memcmp(frame + 6, e->mac, 6)) {
		qhca_step(e, "iw rx size=%zu: our own MAC as the source, to the netdev", len);
		qhca_eth_receive(e, frame, len);
	} else if (!qhca_iw_receive(e, frame, len)) {
		qhca_eth_receive(e, frame, len);
	}
	qhca_loopback_drain(e);
}

void qhca_engine_receive(struct qhca_engine *e, const uint8_t *frame, size_t len)
{
	/* One run of the requester's budget (req.c) for all a frame moves: the QP it opens
	 * the window of, and the loopback drain after it. */
	qhca_req_budget_begin(e);
	switch (e->cfg.link) {
	case QHCA_LINK_IB:
		recv_ib(e, frame, len);
		break;
	case QHCA_LINK_IWARP:
		recv_iwarp(e, frame, len);
		break;
	default:
		recv_roce(e, frame, len);
		break;
	}
	qhca_req_budget_end(e);
}
