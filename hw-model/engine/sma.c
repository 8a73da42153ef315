// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The InfiniBand port (link=ib): its PortInfo, P_Key table, GUIDs and VL tables, the
 * subnet management agent that reads and writes them (IBA 14.2, answering the SMPs the
 * driver hands over with MAD_IFC, as a real HCA's firmware does), the performance
 * management agent's port counters (16.1), LID addressing for the transmit and receive
 * paths, and the multicast groups UD QPs attach to (RoCE uses these too).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_internal.h"

/* ---------------------------------------------------------------- the port */
/* The capabilities the port always has; MODIFY_PORT adds IsSM and the like. */
#define BASE_CAP	(IB_PORT_CAP_SYS_IMAGE_GUID | IB_PORT_CAP_CLIENT_REREG)

uint8_t qhca_mtu_enum(uint32_t mtu)
{
	uint8_t v = 1;

	while (mtu > 256) {
		mtu >>= 1;
		v++;
	}
	return v;	/* IB_MTU_256 = 1 ... IB_MTU_4096 = 5 */
}

uint64_t qhca_node_guid(const struct qhca_engine *e)
{
	const uint8_t *m = e->cfg.mac;

	/* EUI-64 from the MAC: flip the U/L bit and insert ff:fe. */
	return (uint64_t)(m[0] ^ 2) << 56 | (uint64_t)m[1] << 48 | (uint64_t)m[2] << 40 |
	       0xfffeull << 24 | (uint64_t)m[3] << 16 | (uint64_t)m[4] << 8 | m[5];
}

/* The port's GUID, its own as on most HCAs (NodeInfo has both): the node GUID with ff:ff
 * in place of the EUI-64's ff:fe, so that devices whose MACs differ by one still have
 * GUIDs that are all different. */
uint64_t qhca_port_guid(const struct qhca_engine *e)
{
	return qhca_node_guid(e) | 0x01000000ull;
}

void qhca_ib_port_reset(struct qhca_engine *e)
{
	struct qhca_ib_port *ip = &e->ib;
	struct ib_port_info *pi = &ip->pi;

	memset(ip, 0, sizeof(*ip));
	pi->gid_prefix = 0xfe80000000000000ull;
	pi->cap_mask = BASE_CAP;
	pi->local_port = 1;
	pi->width_supported = 3;	/* 1X and 4X */
	pi->width_enabled = 3;
	pi->width_active = 2;		/* 4X */
	pi->speed_supported = 7;	/* SDR, DDR, QDR */
	pi->speed_enabled = 7;
	pi->speed_active = 4;		/* QDR: 4X QDR, 40 Gb/s */
	pi->link_down_default = IB_PHYS_POLLING;
	pi->mtu_cap = qhca_mtu_enum(e->cfg.mtu);
	pi->neighbor_mtu = pi->mtu_cap;
	pi->vl_cap = 1;			/* VL0 for data (and VL15) */
	pi->op_vls = 1;
	pi->vl_arb_high_cap = 1;
	pi->vl_arb_low_cap = 1;
	pi->guid_cap = QHCA_IB_GUIDS;
	pi->resp_time = 8;		/* 2.048 us * 2^8: about half a millisecond */
	pi->subnet_timeout = 18;
	ip->pkeys[0] = 0xffff;		/* the default partition, full member */
	ip->guids[0] = qhca_port_guid(e);
	snprintf(ip->node_desc, sizeof(ip->node_desc), "qhca %016llx",
		 (unsigned long long)qhca_node_guid(e));
	qhca_ib_port_link(e, e->link_up);
}

/* The port's link went up (INIT, waiting for the SM) or down (DOWN). */
void qhca_ib_port_link(struct qhca_engine *e, bool up)
{
	struct ib_port_info *pi = &e->ib.pi;
	bool was_active = pi->state == IB_PORT_ACTIVE;

	pi->phys_state = up ? IB_PHYS_LINK_UP : IB_PHYS_POLLING;
	pi->state = up ? IB_PORT_INIT : IB_PORT_DOWN;
	if (was_active)
		qhca_event_async(e, QHCA_EVENT_PORT_DOWN, 1, 0);
}

bool qhca_ib_active(const struct qhca_engine *e)
{
	return e->ib.pi.state == IB_PORT_ACTIVE;
}

/* Is @dlid one of our port's LIDs (base LID and the 2^LMC paths)? */
bool qhca_ib_lid_ours(const struct qhca_engine *e, uint16_t dlid)
{
	const struct ib_port_info *pi = &e->ib.pi;

	return pi->lid && dlid >= pi->lid && (unsigned)(dlid - pi->lid) < (1u << pi->lmc);
}

/* The SLID of a packet: the base LID with the path bits the address asks for; a port the
 * SM has not given a LID yet, and every packet to the permissive LID, use the permissive
 * LID (what directed-route SMPs need). */
uint16_t qhca_ib_slid(const struct qhca_engine *e, uint8_t path_bits, uint16_t dlid)
{
	const struct ib_port_info *pi = &e->ib.pi;

	if (!pi->lid || dlid == IB_LID_PERMISSIVE)
		return IB_LID_PERMISSIVE;
	return (uint16_t)(pi->lid | (path_bits & ((1u << pi->lmc) - 1)));
}

/* Is @pkey (from a BTH) in the port's P_Key table? The low 15 bits name the partition. */
bool qhca_ib_pkey_ok(const struct qhca_engine *e, uint16_t pkey)
{
	unsigned i;

	for (i = 0; i < QHCA_IB_PKEYS; i++)
		if ((e->ib.pkeys[i] & 0x7fff) && (e->ib.pkeys[i] & 0x7fff) == (pkey & 0x7fff))
			return true;
	return false;
}

/* ---------------------------------------------------------------- SMA */
static void port_events(struct qhca_engine *e, const struct ib_port_info *old)
{
	const struct ib_port_info *pi = &e->ib.pi;

	if (pi->lid != old->lid || pi->lmc != old->lmc)
		qhca_event_async(e, QHCA_EVENT_LID_CHANGE, 1, 0);
	if (pi->gid_prefix != old->gid_prefix)
		qhca_event_async(e, QHCA_EVENT_GID_CHANGE, 1, 0);
	if (pi->sm_lid != old->sm_lid || pi->sm_sl != old->sm_sl)
		qhca_event_async(e, QHCA_EVENT_SM_CHANGE, 1, 0);
	if (pi->state == IB_PORT_ACTIVE && old->state != IB_PORT_ACTIVE)
		qhca_event_async(e, QHCA_EVENT_PORT_ACTIVE, 1, 0);
	else if (pi->state != IB_PORT_ACTIVE && old->state == IB_PORT_ACTIVE)
		qhca_event_async(e, QHCA_EVENT_PORT_DOWN, 1, 0);
	if (pi->client_rereg)
		qhca_event_async(e, QHCA_EVENT_CLIENT_REREG, 1, 0);
}

/* PortInfo, Get and Set; the modifier names the port: 0 (the one the SMP came in on) or 1. */
static uint16_t sma_port_info(struct qhca_engine *e, uint8_t *mad, bool set)
{
	uint8_t *d = mad + IB_SMP_DATA;
	struct ib_port_info *pi = &e->ib.pi;
	/* Bit 31: the SM supports extended speeds (ignored). */
	uint32_t mod = ib_get32(mad + IB_MAD_ATTR_MOD) & 0x7fffffffu;
	uint16_t st = 0;

	if (mod > 1)
		return IB_MAD_ST_BAD_VALUE;
	if (set) {
		struct ib_port_info req, old = *pi;
		const char *why = NULL;

		ib_port_info_unpack(d, &req);
		st = ib_port_info_set(pi, &req, true, &why);
		if (st) {
			qhca_log_guest(e, "Set(PortInfo) refused: %s", why);
		} else {
			qhca_log(e, QHCA_LOG_EVENT,
				 "Set(PortInfo): LID 0x%x LMC %u SM LID 0x%x state %u -> %u",
				 pi->lid, pi->lmc, pi->sm_lid, old.state, pi->state);
			port_events(e, &old);
		}
	}
	pi->cap_mask = BASE_CAP | e->ib.cap_set;
	ib_port_info_pack(pi, d);
	/* ClientReregister is a request: it reads back as it was set (o14-12.2.1), once. */
	pi->client_rereg = 0;
	return st;
}

/* P_KeyTable: one block of 32 entries; a Set replaces the block. */
static uint16_t sma_pkey_table(struct qhca_engine *e, uint8_t *mad, bool set)
{
	uint8_t *d = mad + IB_SMP_DATA;
	uint32_t block = ib_get32(mad + IB_MAD_ATTR_MOD) & 0xffff;
	unsigned i;

	if (block != 0)
		return IB_MAD_ST_BAD_VALUE;
	if (set) {
		bool changed = false;

		for (i = 0; i < QHCA_IB_PKEYS; i++) {
			uint16_t k = ib_get16(d + 2 * i);

			changed |= k != e->ib.pkeys[i];
			e->ib.pkeys[i] = k;
		}
		if (changed)
			qhca_event_async(e, QHCA_EVENT_PKEY_CHANGE, 1, 0);
	}
	for (i = 0; i < QHCA_IB_PKEYS; i++)
		ib_put16(d + 2 * i, e->ib.pkeys[i]);
	return 0;
}

/* GUIDInfo: one block of 8; entry 0 is the port GUID and cannot be changed. */
static uint16_t sma_guid_info(struct qhca_engine *e, uint8_t *mad, bool set)
{
	uint8_t *d = mad + IB_SMP_DATA;
	unsigned i;

	if (ib_get32(mad + IB_MAD_ATTR_MOD) != 0)
		return IB_MAD_ST_BAD_VALUE;
	if (set) {
		for (i = 1; i < QHCA_IB_GUIDS; i++)
			e->ib.guids[i] = ib_get64(d + 8 * i);
		qhca_event_async(e, QHCA_EVENT_GID_CHANGE, 1, 0);
	}
	for (i = 0; i < QHCA_IB_GUIDS; i++)
		ib_put64(d + 8 * i, e->ib.guids[i]);
	return 0;
}

static uint16_t sma_node_info(struct qhca_engine *e, uint8_t *mad)
{
	struct ib_node_info ni = {
		.node_type = IB_NODE_CA,
		.num_ports = 1,
		.sys_image_guid = qhca_node_guid(e),
		.node_guid = qhca_node_guid(e),
		.port_guid = qhca_port_guid(e),
		.partition_cap = QHCA_IB_PKEYS,
		.device_id = QHCA_PCI_DEVICE_ID,
		.revision = QHCA_PCI_REVISION,
		.local_port = 1,
		.vendor_id = 0,	/* no OUI of our own: QEMU's PCI vendor is not an OUI */
	};

	ib_node_info_pack(&ni, mad + IB_SMP_DATA);
	return 0;
}

/*
 * An SMP failed the M_Key check: Trap 256 to the SM (14.2.4 asks for it when the port
 * knows where the SM is). The device sends it on the wire itself, from QP0 on VL15, when
 * the SM is on another port; a trap for an SM on this port would have to go up this
 * port's own QP0, which the SMA cannot reach from here: not sent (the SM sees
 * M_KeyViolations in its sweep).
 */
static void sma_bad_mkey(struct qhca_engine *e, const uint8_t *mad)
{
	const struct ib_port_info *pi = &e->ib.pi;
	uint8_t trap[IB_MAD_LEN], buf[IB_MAX_HDR + IB_MAD_LEN + ROCE_ICRC_LEN + IB_VCRC_LEN];
	struct roce_pkt p;
	size_t n;

	qhca_log(e, QHCA_LOG_EVENT, "SMA: %s of attribute 0x%04x with a bad M_Key dropped "
		 "(protection %u, %u violations)", mad[IB_MAD_METHOD] == IB_METHOD_SET ? "Set" :
		 "Get", ib_get16(mad + IB_MAD_ATTR_ID), pi->mkey_protect, pi->mkey_violations);
	if (!pi->lid || !pi->sm_lid || qhca_ib_lid_ours(e, pi->sm_lid) || !e->link_up ||
	    qhca_tx_stopped(e))
		return;
	ib_trap_bad_mkey(trap, mad, IB_NODE_CA, pi->lid,
			 0x5148434100000000ull | pi->mkey_violations);
	memset(&p, 0, sizeof(p));
	p.ib = true;
	p.vl = IB_VL_SMP;
	p.dlid = pi->sm_lid;
	p.slid = pi->lid;
	p.sl = pi->sm_sl;
	p.opcode = ROCE_TS_UD | ROCE_OP_SEND_ONLY;
	p.pkey = 0xffff;
	p.payload = trap;
	p.payload_len = IB_MAD_LEN;
	n = ib_build(&p, buf, sizeof(buf));
	if (!n)
		return;
	e->cnt.roce_tx_pkts++;
	e->cnt.roce_tx_bytes += n;
	e->ops->xmit(e->opaque, buf, n);
}

/* An SMP for the SMA: answered in @mad (true), or not the SMA's to answer (false). */
static bool sma_process(struct qhca_engine *e, uint8_t *mad, bool own)
{
	uint8_t method = mad[IB_MAD_METHOD];
	uint16_t attr = ib_get16(mad + IB_MAD_ATTR_ID), st;
	bool set = method == IB_METHOD_SET;
	enum ib_mkey_result mk;

	/* Responses, traps and SMInfo belong to the subnet manager's agents. */
	if ((method != IB_METHOD_GET && !set) || attr == IB_ATTR_SM_INFO ||
	    (attr & 0xff00) == 0xff00)
		return false;
	/*
	 * The M_Key check (14.2.4) before anything else, for SMPs from the wire and from this
	 * port's own stack alike: every MAD reaches the SMA through MAD_IFC, and the device
	 * cannot tell the guest kernel's own queries from SMPs it received on QP0 (a real
	 * HCA's firmware checks local MADs too unless the driver says "ignore M_Key", as ours
	 * does for the Gets of its own caches: @own, which never show the key itself, since
	 * an SM may give every port the same). One that fails is dropped: no
	 * change, no response; the driver then gives it to the guest's agents, which answer
	 * a Get or Set nobody serves with "unsupported", as for a MAD that mthca's or mlx4's
	 * firmware refused.
	 */
	mk = own && !set ? IB_MKEY_PASS_HIDE : ib_mkey_check(&e->ib.pi, mad,
							       e->ops->now_ns(e->opaque));
	if (mk == IB_MKEY_FAIL) {
		sma_bad_mkey(e, mad);
		return false;
	}
	if (mad[IB_MAD_CLASS_VERSION] != 1) {
		ib_mad_make_resp(mad, IB_MAD_ST_BAD_VERSION);
		return true;
	}
	switch (attr) {
	case IB_ATTR_NODE_DESC:
		st = set ? IB_MAD_ST_BAD_ATTR : 0;
		if (!set) {
			memset(mad + IB_SMP_DATA, 0, IB_SMP_DATA_LEN);
			memcpy(mad + IB_SMP_DATA, e->ib.node_desc, sizeof(e->ib.node_desc));
		}
		break;
	case IB_ATTR_NODE_INFO:
		st = set ? IB_MAD_ST_BAD_ATTR : sma_node_info(e, mad);
		break;
	case IB_ATTR_PORT_INFO:
		st = sma_port_info(e, mad, set);
		ib_mkey_hide(mad, mk);
		break;
	case IB_ATTR_PKEY_TABLE:
		st = sma_pkey_table(e, mad, set);
		break;
	case IB_ATTR_GUID_INFO:
		st = sma_guid_info(e, mad, set);
		break;
	case IB_ATTR_SL2VL:	/* with one data VL every SL maps to VL0 */
		st = ib_sma_sl2vl(e->ib.sl2vl, mad, set, e->ib.pi.op_vls);
		break;
	case IB_ATTR_VL_ARB:
		st = ib_sma_vl_arb(e->ib.vl_arb, mad, set);
		break;
	default:
		st = IB_MAD_ST_BAD_ATTR;
		break;
	}
	if (st)
		qhca_log(e, QHCA_LOG_EVENT, "SMA: %s of attribute 0x%04x: status 0x%x",
			 set ? "Set" : "Get", attr, st);
	ib_mad_make_resp(mad, st);
	return true;
}

/* ---------------------------------------------------------------- PMA */
/* PortCounters (16.1.3.5): 32-bit data and packet counters that stop at their maximum. */
static uint32_t sat32(uint64_t v)
{
	return v > 0xffffffffull ? 0xffffffffu : (uint32_t)v;
}

static void pma_totals(const struct qhca_engine *e, uint64_t v[4])
{
	const struct qhca_counters *c = &e->cnt;

	v[0] = c->roce_tx_bytes - e->ib.pma_base[0];
	v[1] = c->roce_rx_bytes - e->ib.pma_base[1];
	v[2] = c->roce_tx_pkts - e->ib.pma_base[2];
	v[3] = c->roce_rx_pkts - e->ib.pma_base[3];
}

static bool pma_process(struct qhca_engine *e, uint8_t *mad)
{
	uint8_t method = mad[IB_MAD_METHOD], *d = mad + IB_PERF_DATA;
	uint16_t attr = ib_get16(mad + IB_MAD_ATTR_ID), st = 0;
	bool set = method == IB_METHOD_SET;
	uint64_t v[4];

	if (method != IB_METHOD_GET && !set)
		return false;
	pma_totals(e, v);
	switch (attr) {
	case IB_ATTR_CLASS_PORT_INFO:
		if (set) {
			st = IB_MAD_ST_BAD_ATTR;
			break;
		}
		memset(d, 0, IB_MAD_LEN - IB_PERF_DATA);
		d[0] = 1;			/* BaseVersion */
		d[1] = 1;			/* ClassVersion */
		ib_put16(d + 2, 1u << 9);	/* CapabilityMask: PortCountersExtended */
		d[7] = 18;			/* RespTimeValue */
		break;
	case IB_ATTR_PORT_COUNTERS:
		if (d[1] != 1 && d[1] != 0xff && d[1] != 0) {
			st = IB_MAD_ST_BAD_VALUE;
			break;
		}
		if (set && (ib_get16(d + 2) & (0xf << 12))) {	/* CounterSelect: the data ones */
			memcpy(e->ib.pma_base, (uint64_t[4]){ e->cnt.roce_tx_bytes,
				e->cnt.roce_rx_bytes, e->cnt.roce_tx_pkts, e->cnt.roce_rx_pkts },
			       sizeof(e->ib.pma_base));
			pma_totals(e, v);
		}
		memset(d + 4, 0, IB_MAD_LEN - IB_PERF_DATA - 4);
		ib_put16(d + 8, (uint16_t)(e->cnt.roce_rx_bad[ROCE_BAD_ICRC] +
					   e->cnt.roce_rx_bad[ROCE_BAD_VCRC] > 0xffff ? 0xffff :
					   e->cnt.roce_rx_bad[ROCE_BAD_ICRC] +
					   e->cnt.roce_rx_bad[ROCE_BAD_VCRC]));	/* PortRcvErrors */
		ib_put32(d + 24, sat32(v[0] / 4));	/* data in 4-byte words */
		ib_put32(d + 28, sat32(v[1] / 4));
		ib_put32(d + 32, sat32(v[2]));
		ib_put32(d + 36, sat32(v[3]));
		break;
	case IB_ATTR_PORT_COUNTERS_EXT:
		if (set) {
			st = IB_MAD_ST_BAD_ATTR;
			break;
		}
		memset(d + 4, 0, IB_MAD_LEN - IB_PERF_DATA - 4);
		ib_put64(d + 8, v[0] / 4);
		ib_put64(d + 16, v[1] / 4);
		ib_put64(d + 24, v[2]);
		ib_put64(d + 32, v[3]);
		break;
	default:
		st = IB_MAD_ST_BAD_ATTR;
		break;
	}
	ib_mad_make_resp(mad, st);
	return true;
}

/*
 * MAD_IFC: a MAD for the port's agents, from the wire (QP0, QP1) or from the port's own
 * stack. Returns 1 with the response in @out, or 0 if no agent of the device's answers it
 * (the driver then gives it to the agents in the guest: the SM, the SA client).
 */
int qhca_mad_ifc(struct qhca_engine *e, const uint8_t *in, uint8_t *out, bool own)
{
	bool answered = false;

	memcpy(out, in, IB_MAD_LEN);
	if (in[IB_MAD_BASE_VERSION] != 1)
		return 0;
	switch (in[IB_MAD_CLASS]) {
	case IB_MCLASS_SMP_LID:
	case IB_MCLASS_SMP_DR:
		answered = sma_process(e, out, own);
		break;
	case IB_MCLASS_PERF:
		answered = pma_process(e, out);
		break;
	}
	if (answered)
		e->cnt.smps++;
	return answered;
}

/* ---------------------------------------------------------------- multicast groups */
static struct qhca_mcast_group *mcast_find(struct qhca_engine *e, const uint8_t gid[16])
{
	uint32_t i;

	for (i = 0; i < e->nmcast; i++)
		if (e->mcast[i].nqps && !memcmp(e->mcast[i].gid, gid, 16))
			return &e->mcast[i];
	return NULL;
}

uint16_t qhca_mcast_attach(struct qhca_engine *e, uint32_t qpn, const struct qhca_mcast *m)
{
	struct qhca_qp *qp = qhca_qp_find(e, qpn);
	struct qhca_mcast_group *g;
	uint32_t i;

	if (!qp)
		return QHCA_ST_BAD_HANDLE;
	if (qp->type != QHCA_QPT_UD || m->rsvd0 || m->rsvd1 || m->gid[0] != 0xff ||
	    (e->cfg.link == QHCA_LINK_IB && !ib_lid_mcast(m->mlid)))
		return QHCA_ST_BAD_FIELD;
	g = mcast_find(e, m->gid);
	if (!g) {
		for (i = 0; i < e->nmcast && e->mcast[i].nqps; i++)
			;
		if (i == e->nmcast) {
			struct qhca_mcast_group *n;

			if (e->nmcast == QHCA_MCAST_GROUPS)
				return QHCA_ST_NO_RESOURCES;
			n = realloc(e->mcast, (e->nmcast + 1) * sizeof(*n));
			if (!n)
				return QHCA_ST_NO_RESOURCES;
			e->mcast = n;
			e->nmcast++;
		}
		g = &e->mcast[i];
		memset(g, 0, sizeof(*g));
		memcpy(g->gid, m->gid, 16);
	}
	for (i = 0; i < g->nqps; i++)
		if (g->qpn[i] == qpn)
			return QHCA_ST_OK;	/* attached already, as verbs allow */
	if (g->nqps == QHCA_MCAST_QPS)
		return QHCA_ST_NO_RESOURCES;
	g->mlid = m->mlid;
	g->qpn[g->nqps++] = qpn;
	return QHCA_ST_OK;
}

uint16_t qhca_mcast_detach(struct qhca_engine *e, uint32_t qpn, const struct qhca_mcast *m)
{
	struct qhca_mcast_group *g = mcast_find(e, m->gid);
	uint32_t i;

	if (!g)
		return QHCA_ST_BAD_FIELD;
	for (i = 0; i < g->nqps; i++) {
		if (g->qpn[i] == qpn) {
			g->qpn[i] = g->qpn[--g->nqps];
			return QHCA_ST_OK;
		}
	}
	return QHCA_ST_BAD_FIELD;
}

/* A destroyed QP leaves every group. */
void qhca_mcast_forget_qp(struct qhca_engine *e, uint32_t qpn)
{
	uint32_t i, j;

	for (i = 0; i < e->nmcast; i++)
		for (j = 0; j < e->mcast[i].nqps; j++)
			if (e->mcast[i].qpn[j] == qpn)
				e->mcast[i].qpn[j--] = e->mcast[i].qpn[--e->mcast[i].nqps];
}

void qhca_mcast_reset(struct qhca_engine *e)
{
	free(e->mcast);
	e->mcast = NULL;
	e->nmcast = 0;
}

/*
 * Deliver a multicast datagram to the QPs attached to its group (the DGID of its GRH, or
 * for RoCE its destination IP as a GID) except @except (the sender's own QP). Each
 * receiver gets it as if sent to it alone.
 */
void qhca_mcast_deliver(struct qhca_engine *e, const struct roce_pkt *p, uint32_t except)
{
	struct qhca_mcast_group *g = mcast_find(e, p->dgid);
	uint32_t qpn[QHCA_MCAST_QPS], n, i;

	if (!g || (p->ib && g->mlid != p->dlid)) {
		e->cnt.roce_rx_no_qp++;
		return;
	}
	/* A receive may detach QPs (an error): work on a copy of the list. */
	n = g->nqps;
	memcpy(qpn, g->qpn, n * sizeof(qpn[0]));
	for (i = 0; i < n; i++) {
		struct qhca_qp *qp = qhca_qp_find(e, qpn[i]);

		if (qp && qpn[i] != except)
			qhca_resp_request(e, qp, p);
	}
}
