// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * qhca-fabric as an InfiniBand switch (--ib): every frame of a port is one IB packet
 * (LRH ... ICRC VCRC, wire/ib.h). The switch forwards by DLID through the
 * linear forwarding table (IBA 18.2.4.3.1) and the multicast forwarding table, which the
 * subnet manager programs, and answers SMPs on its management port 0 like a base switch
 * port 0 (IBA 14.2): NodeInfo, NodeDescription, SwitchInfo, PortInfo of every port,
 * P_KeyTable, SLtoVL and VLArbitration tables, LinearForwardingTable and
 * MulticastForwardingTable. Directed-route SMPs are forwarded and answered by the rules of
 * IBA 14.2.2 (the hop pointer, the initial and return paths). Port 0's M_Key guards them
 * all (14.2.4, ib_mkey_check in ib.c, shared with the HCA's SMA).
 *
 * Fabric port i (0-based) is switch port i + 1. A port is physically up while a peer is
 * connected and its link is not taken down (fabric link N down); its logical state is the
 * SM's (DOWN, INIT, ARMED, ACTIVE). Data (VL0) passes only between ACTIVE ports; SMPs (VL15)
 * between ports whose link is up. A change of a port's physical state sets SwitchInfo's
 * PortStateChange, which the SM's light sweep notices.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fabric.h"
#include "ib.h"

#define LFT_CAP		0xc000		/* every unicast LID */
#define MFT_CAP		1024		/* multicast LIDs 0xc000 .. 0xc3ff */
#define LFT_DROP	0xff
#define MFT_POSITIONS	((FABRIC_MAX_PORTS + 1 + 15) / 16)

struct fabric_ib {
	uint64_t guid;
	char desc[IB_SMP_DATA_LEN];
	struct ib_port_info port[FABRIC_MAX_PORTS + 1];	/* 0: the management port */
	int up[FABRIC_MAX_PORTS];	/* the physical state last seen, per fabric port */
	uint16_t pkeys[32];
	uint8_t sl2vl[8];
	uint8_t vl_arb[4][IB_SMP_DATA_LEN];
	uint8_t lft[LFT_CAP];
	uint16_t lft_top;
	/* MFT: per MLID, position k's 16-bit mask of ports 16k..16k+15 (port 0 included) */
	uint16_t mft[MFT_CAP][MFT_POSITIONS];
	uint8_t life;			/* SwitchInfo LifeTimeValue */
	int port_state_change;
	/* counters */
	uint64_t smps, smp_errors, forwarded, dropped_state, dropped_route, dropped_crc;
	uint64_t mkey_drops, traps;	/* SMPs that failed the M_Key check, Trap 256 sent */
};

/* The SMA's clock for the M_Key lease (IBA 14.2.4); tests and the fuzzer set their own. */
uint64_t (*fabric_ib_clock)(void) = fabric_now_ns;

static int phys_up(const struct fabric *sw, int i)
{
	return sw->port[i].fd >= 0 && !sw->port[i].link_down;
}

static void port_defaults(struct ib_port_info *pi, int num)
{
	memset(pi, 0, sizeof(*pi));
	pi->gid_prefix = 0xfe80000000000000ull;
	pi->width_supported = 3;
	pi->width_enabled = 3;
	pi->width_active = 2;		/* 4X */
	pi->speed_supported = 7;
	pi->speed_enabled = 7;
	pi->speed_active = 4;		/* QDR */
	pi->link_down_default = IB_PHYS_POLLING;
	pi->mtu_cap = 5;		/* 4096 */
	pi->neighbor_mtu = 5;
	pi->vl_cap = 1;
	pi->op_vls = 1;
	pi->vl_arb_high_cap = 1;
	pi->vl_arb_low_cap = 1;
	pi->resp_time = 8;
	pi->subnet_timeout = 18;
	if (num == 0) {			/* base port 0: always up, ACTIVE */
		pi->state = IB_PORT_ACTIVE;
		pi->phys_state = IB_PHYS_LINK_UP;
	} else {
		pi->state = IB_PORT_DOWN;
		pi->phys_state = IB_PHYS_POLLING;
	}
}

int fabric_ib_enable(struct fabric *sw, uint64_t guid)
{
	struct fabric_ib *ib = calloc(1, sizeof(*ib));
	int i;

	if (!ib)
		return -1;
	ib->guid = guid;
	snprintf(ib->desc, sizeof(ib->desc), "qhca-fabric switch");
	for (i = 0; i <= FABRIC_MAX_PORTS; i++)
		port_defaults(&ib->port[i], i);
	memset(ib->lft, LFT_DROP, sizeof(ib->lft));
	ib->pkeys[0] = 0xffff;
	ib->life = 18;
	sw->ib = ib;
	fabric_log("InfiniBand switch: GUID 0x%016llx, %d ports", (unsigned long long)guid,
		   sw->nports);
	return 0;
}

void fabric_ib_close(struct fabric *sw)
{
	free(sw->ib);
	sw->ib = NULL;
}

/* Follow the ports' links: a port that came up is INIT, one that went down is DOWN; either
 * sets PortStateChange (IBA 14.2.5.4). Called on every change of a link, and before the
 * SMA answers. */
void fabric_ib_links(struct fabric *sw)
{
	struct fabric_ib *ib = sw->ib;
	int i;

	for (i = 0; i < sw->nports; i++) {
		int up = phys_up(sw, i);
		struct ib_port_info *pi = &ib->port[i + 1];

		if (up == ib->up[i])
			continue;
		ib->up[i] = up;
		pi->phys_state = up ? IB_PHYS_LINK_UP : IB_PHYS_POLLING;
		pi->state = up ? IB_PORT_INIT : IB_PORT_DOWN;
		ib->port_state_change = 1;
		fabric_log("IB port %d: link %s", i + 1, up ? "up (INIT)" : "down");
	}
}

/* ---------------------------------------------------------------- the SMA */
static uint16_t sma_switch_info(struct fabric *sw, uint8_t *d, int set)
{
	struct fabric_ib *ib = sw->ib;

	if (set) {
		uint16_t top = ib_get16(d + 6);

		if (top >= LFT_CAP)
			return IB_MAD_ST_BAD_VALUE;
		ib->lft_top = top;
		ib->life = d[11] >> 3;
		if (d[11] & 0x04)
			ib->port_state_change = 0;	/* written as 1: cleared */
	}
	memset(d, 0, IB_SMP_DATA_LEN);
	ib_put16(d + 0, LFT_CAP);
	ib_put16(d + 4, MFT_CAP);
	ib_put16(d + 6, ib->lft_top);
	d[8] = 0;			/* DefaultPort */
	d[9] = 0xff;			/* DefaultMulticastPrimaryPort: none */
	d[10] = 0xff;			/* DefaultMulticastNotPrimaryPort: none */
	d[11] = (uint8_t)(ib->life << 3 | (ib->port_state_change ? 0x04 : 0));
	return 0;
}

static uint16_t sma_port_info(struct fabric *sw, uint8_t *mad, int set, int inport)
{
	uint8_t *d = mad + IB_SMP_DATA;
	uint32_t num = ib_get32(mad + IB_MAD_ATTR_MOD) & 0xff;
	struct ib_port_info *pi;
	uint16_t st = 0;

	if (num > (uint32_t)sw->nports)
		return IB_MAD_ST_BAD_VALUE;
	pi = &sw->ib->port[num];
	if (set) {
		struct ib_port_info req;
		const char *why = NULL;

		ib_port_info_unpack(d, &req);
		if (num == 0) {
			/* base port 0: its LID is the switch's; its state stays ACTIVE */
			req.state = IB_PORT_NOP;
			st = ib_port_info_set(pi, &req, 1, &why);
		} else {
			st = ib_port_info_set(pi, &req, 0, &why);
			if (!st && pi->phys_state != IB_PHYS_LINK_UP)
				pi->state = IB_PORT_DOWN;
		}
		if (st)
			fabric_log("IB switch: Set(PortInfo) of port %u refused: %s", num, why);
		else if (req.state)
			fabric_log("IB port %u: state %u", num, pi->state);
	}
	ib_port_info_pack(pi, d);
	if (num) {		/* external ports carry port 0's LID fields as 0 */
		ib_put16(d + 16, 0);
		ib_put16(d + 18, 0);
	}
	d[28] = (uint8_t)inport;	/* LocalPortNum: the port the SMP came in by */
	pi->client_rereg = 0;
	return st;
}

static uint16_t sma_lft(struct fabric *sw, uint8_t *mad, int set)
{
	uint8_t *d = mad + IB_SMP_DATA;
	uint32_t block = ib_get32(mad + IB_MAD_ATTR_MOD);

	if (block >= LFT_CAP / 64)
		return IB_MAD_ST_BAD_VALUE;
	if (set)
		memcpy(sw->ib->lft + block * 64, d, 64);
	memcpy(d, sw->ib->lft + block * 64, 64);
	return 0;
}

static uint16_t sma_mft(struct fabric *sw, uint8_t *mad, int set)
{
	uint8_t *d = mad + IB_SMP_DATA;
	uint32_t mod = ib_get32(mad + IB_MAD_ATTR_MOD);
	uint32_t block = mod & 0x1ff, pos = mod >> 28, i;

	/* a position names 16 ports, from port 0 on; none past the switch's last port */
	if (block >= MFT_CAP / 32 || pos >= MFT_POSITIONS || pos * 16 > (uint32_t)sw->nports)
		return IB_MAD_ST_BAD_VALUE;
	for (i = 0; i < 32; i++) {
		uint16_t *m = &sw->ib->mft[block * 32 + i][pos];

		if (set)
			*m = ib_get16(d + 2 * i);
		ib_put16(d + 2 * i, *m);
	}
	return 0;
}

static void send_smp(struct fabric *sw, int out, const uint8_t *mad, uint16_t slid,
		     uint16_t dlid);
static int route_unicast(struct fabric *sw, uint16_t dlid);

/* An SMP failed the M_Key check: Trap 256 to the SM, LID-routed from port 0's LID
 * (14.2.4), when the switch knows where the SM is. */
static void bad_mkey_trap(struct fabric *sw, const uint8_t *mad)
{
	struct fabric_ib *ib = sw->ib;
	const struct ib_port_info *p0 = &ib->port[0];
	uint8_t trap[IB_MAD_LEN];

	ib->mkey_drops++;
	fabric_log("IB switch: %s of attribute 0x%04x with a bad M_Key dropped (protection %u, "
		   "%u violations)", mad[IB_MAD_METHOD] == IB_METHOD_SET ? "Set" : "Get",
		   ib_get16(mad + IB_MAD_ATTR_ID), p0->mkey_protect, p0->mkey_violations);
	if (!p0->lid || !p0->sm_lid || p0->sm_lid == p0->lid)
		return;
	ib_trap_bad_mkey(trap, mad, IB_NODE_SWITCH, p0->lid, 0x5357000000000000ull | ++ib->traps);
	send_smp(sw, route_unicast(sw, p0->sm_lid), trap, p0->lid, p0->sm_lid);
}

/* Answer the SMP @mad in place (Get or Set); -1 if it is not the SMA's to answer, or it
 * failed the M_Key check (dropped: no change, no response). */
static int sma_process(struct fabric *sw, uint8_t *mad, int inport)
{
	struct fabric_ib *ib = sw->ib;
	uint8_t method = mad[IB_MAD_METHOD], *d = mad + IB_SMP_DATA;
	uint16_t attr = ib_get16(mad + IB_MAD_ATTR_ID), st = 0;
	int set = method == IB_METHOD_SET;
	enum ib_mkey_result mk;

	if (method != IB_METHOD_GET && !set)
		return -1;	/* responses, traps: a switch has no SM */
	/* The M_Key check (14.2.4) first, against port 0's M_Key: the switch's one key
	 * guards every attribute of the switch, its external ports' PortInfo included. */
	mk = ib_mkey_check(&ib->port[0], mad, fabric_ib_clock());
	if (mk == IB_MKEY_FAIL) {
		bad_mkey_trap(sw, mad);
		return -1;
	}
	fabric_ib_links(sw);
	if (mad[IB_MAD_CLASS_VERSION] != 1) {
		st = IB_MAD_ST_BAD_VERSION;
		goto out;
	}
	switch (attr) {
	case IB_ATTR_NODE_DESC:
		if (set) {
			st = IB_MAD_ST_BAD_ATTR;
			break;
		}
		memset(d, 0, IB_SMP_DATA_LEN);
		memcpy(d, ib->desc, sizeof(ib->desc));
		break;
	case IB_ATTR_NODE_INFO: {
		struct ib_node_info ni = {
			.node_type = IB_NODE_SWITCH, .num_ports = (uint8_t)sw->nports,
			.sys_image_guid = ib->guid, .node_guid = ib->guid, .port_guid = ib->guid,
			.partition_cap = 32, .device_id = 0x10f1, .revision = 1,
			.local_port = (uint8_t)inport, .vendor_id = 0,
		};

		if (set)
			st = IB_MAD_ST_BAD_ATTR;
		else
			ib_node_info_pack(&ni, d);
		break;
	}
	case IB_ATTR_SWITCH_INFO:
		st = sma_switch_info(sw, d, set);
		break;
	case IB_ATTR_PORT_INFO:
		st = sma_port_info(sw, mad, set, inport);
		ib_mkey_hide(mad, mk);
		break;
	case IB_ATTR_PKEY_TABLE: {
		unsigned i;

		if ((ib_get32(mad + IB_MAD_ATTR_MOD) & 0xffff) != 0) {
			st = IB_MAD_ST_BAD_VALUE;
			break;
		}
		for (i = 0; i < 32; i++) {
			if (set)
				ib->pkeys[i] = ib_get16(d + 2 * i);
			ib_put16(d + 2 * i, ib->pkeys[i]);
		}
		break;
	}
	case IB_ATTR_SL2VL:
		st = ib_sma_sl2vl(ib->sl2vl, mad, set, 1);
		break;
	case IB_ATTR_VL_ARB:
		st = ib_sma_vl_arb(ib->vl_arb, mad, set);
		break;
	case IB_ATTR_LFT:
		st = sma_lft(sw, mad, set);
		break;
	case IB_ATTR_MFT:
		st = sma_mft(sw, mad, set);
		break;
	default:
		st = IB_MAD_ST_BAD_ATTR;
		break;
	}
out:
	ib->smps++;
	if (st)
		ib->smp_errors++;
	ib_mad_make_resp(mad, st);
	return 0;
}

/* ---------------------------------------------------------------- packets */
/* The capture sees every packet: those the switch takes or drops itself too, with why. */
static void capture(struct fabric *sw, int port, const uint8_t *f, size_t len, const char *why)
{
	if (sw->cap)
		fabric_capture_frame(sw, port, fabric_now_ns(), f, len, why);
}

/* Send the SMP @mad out of switch port @out (1..N) as a VL15 packet from @slid to @dlid. */
static void send_smp(struct fabric *sw, int out, const uint8_t *mad, uint16_t slid,
		     uint16_t dlid)
{
	uint8_t buf[IB_MAX_HDR + IB_MAD_LEN + ROCE_ICRC_LEN + IB_VCRC_LEN];
	struct roce_pkt p;
	size_t n;

	memset(&p, 0, sizeof(p));
	p.ib = 1;
	p.vl = IB_VL_SMP;
	p.dlid = dlid;
	p.slid = slid;
	p.opcode = ROCE_TS_UD | ROCE_OP_SEND_ONLY;
	p.pkey = 0xffff;
	p.dqpn = 0;
	p.deth_qkey = 0;
	p.deth_sqpn = 0;
	p.payload = mad;
	p.payload_len = IB_MAD_LEN;
	n = ib_build(&p, buf, sizeof(buf));
	if (n && out >= 1 && out <= sw->nports && phys_up(sw, out - 1)) {
		capture(sw, out - 1, buf, n, "sent by the switch (its SMA, or a directed-route "
			"SMP passed on)");
		fabric_send(sw, out - 1, buf, n);
	}
}

static int route_unicast(struct fabric *sw, uint16_t dlid)
{
	return dlid < LFT_CAP ? sw->ib->lft[dlid] : LFT_DROP;
}

/*
 * A directed-route SMP that arrived on switch port @inport (IBA 14.2.2.2 for the outgoing
 * direction, 14.2.2.4 for the returning one): forward it along its path, or give it to
 * the SMA at its end and send the answer back the way it came.
 */
static void dr_smp(struct fabric *sw, int inport, uint8_t *mad, uint16_t slid, uint16_t dlid)
{
	uint8_t hop_ptr = mad[IB_MAD_HOP_PTR], hop_cnt = mad[IB_MAD_HOP_CNT];
	int returning = ib_get16(mad + IB_MAD_STATUS) & IB_SMP_DIRECTION;
	int out;

	if (hop_cnt > IB_SMP_MAX_HOPS)
		return;
	if (!returning) {
		if (hop_ptr && hop_ptr < hop_cnt) {		/* an intermediate hop */
			mad[IB_SMP_RETURN_PATH + hop_ptr] = (uint8_t)inport;
			out = mad[IB_SMP_INITIAL_PATH + hop_ptr + 1];
			mad[IB_MAD_HOP_PTR] = (uint8_t)(hop_ptr + 1);
			send_smp(sw, out, mad, slid, dlid);
			return;
		}
		if (hop_ptr == hop_cnt) {			/* the end of the path */
			if (hop_cnt)
				mad[IB_SMP_RETURN_PATH + hop_cnt] = (uint8_t)inport;
			if (ib_get16(mad + IB_SMP_DR_DLID) != IB_LID_PERMISSIVE)
				return;		/* LID routing after the path: not supported */
			hop_ptr = (uint8_t)(hop_cnt + 1);
		}
		if (hop_ptr != hop_cnt + 1 || sma_process(sw, mad, inport))
			return;
		/* the answer goes back: the hop pointer to hop_cnt, out of the return path */
		mad[IB_MAD_HOP_PTR] = hop_cnt;
		out = hop_cnt ? mad[IB_SMP_RETURN_PATH + hop_cnt] : inport;
		send_smp(sw, out, mad, IB_LID_PERMISSIVE, IB_LID_PERMISSIVE);
		return;
	}
	if (hop_ptr >= 2 && hop_ptr <= hop_cnt) {		/* on its way back */
		mad[IB_MAD_HOP_PTR] = (uint8_t)(hop_ptr - 1);
		send_smp(sw, mad[IB_SMP_RETURN_PATH + hop_ptr - 1], mad, slid, dlid);
	}
}

/* An SMP to the switch itself (DLID permissive or its own LID, QP0). */
static void smp_in(struct fabric *sw, int in, const uint8_t *f, const struct ib_lrh *l)
{
	struct roce_pkt p;
	uint8_t mad[IB_MAD_LEN];

	if (ib_parse(f, l->len, &p) != ROCE_OK || p.payload_len != IB_MAD_LEN ||
	    p.opcode != (ROCE_TS_UD | ROCE_OP_SEND_ONLY)) {
		sw->ib->dropped_crc++;
		return;
	}
	memcpy(mad, p.payload, IB_MAD_LEN);
	if (mad[IB_MAD_CLASS] == IB_MCLASS_SMP_DR) {
		dr_smp(sw, in + 1, mad, l->slid, l->dlid);
		return;
	}
	if (mad[IB_MAD_CLASS] != IB_MCLASS_SMP_LID || sma_process(sw, mad, in + 1))
		return;
	/* LID routed: back to the sender's LID through the forwarding table */
	send_smp(sw, route_unicast(sw, l->slid), mad, sw->ib->port[0].lid, l->slid);
}

/* Does a data packet (not VL15) pass between switch ports @a and @b? Both must be
 * ACTIVE (IBA 7.2.x: ARMED takes only SMPs). */
static int data_ok(struct fabric *sw, int a, int b)
{
	return sw->ib->port[a].state == IB_PORT_ACTIVE && sw->ib->port[b].state == IB_PORT_ACTIVE;
}

static void out_to(struct fabric *sw, int in, int out, const uint8_t *f, size_t len)
{
	sw->ib->forwarded++;
	if (sw->impaired || sw->dl_n || sw->nheld || sw->cap)
		fabric_forward_impaired(sw, in, out, f, len);
	else
		fabric_send(sw, out, f, len);
}

/* A multicast packet to the ports in @outs (bit i: fabric port i): it meets the capture and
 * the impairments of its way in once, as a flooded Ethernet frame does. */
static void out_set(struct fabric *sw, int in, uint64_t outs, const uint8_t *f, size_t len)
{
	int i;

	sw->ib->forwarded += (uint64_t)__builtin_popcountll(outs);
	if (sw->impaired || sw->dl_n || sw->nheld || sw->cap) {
		fabric_forward_impaired_set(sw, in, outs, f, len);
		return;
	}
	for (i = 0; i < sw->nports; i++)
		if (outs >> i & 1)
			fabric_send(sw, i, f, len);
}

int fabric_ib_route(struct fabric *sw, int in, const uint8_t *f, size_t len)
{
	struct ib_lrh l;
	int out;

	if (!ib_lrh_read(f, len, &l) || ib_lid_mcast(l.dlid) || l.dlid == IB_LID_PERMISSIVE)
		return -1;
	out = route_unicast(sw, l.dlid);
	return out >= 1 && out <= sw->nports && out - 1 != in ? out - 1 : -1;
}

void fabric_ib_forward(struct fabric *sw, int in, const uint8_t *f, size_t len)
{
	struct fabric_ib *ib = sw->ib;
	uint8_t opcode;
	uint32_t dqpn;
	struct ib_lrh l;
	uint64_t outs = 0;
	int out, i;

	/*
	 * Only the LRH is read here: a port's socket does not corrupt what its QEMU wrote, the
	 * corruption the fabric injects comes after this point, and the receiving HCA checks
	 * the VCRC and ICRC of every packet (an SMP for the switch's SMA is checked whole in
	 * smp_in). Checking the VCRC here too would cost every byte a third CRC on its way.
	 */
	if (!ib_lrh_read(f, len, &l)) {
		ib->dropped_crc++;
		sw->port[in].rx_drops++;
		return;
	}
	len = l.len;		/* without a carrier's padding */
	if (l.vl == IB_VL_SMP) {
		if (!ib_bth_peek(f, &l, &opcode, &dqpn) || dqpn != 0) {
			ib->dropped_route++;
			capture(sw, in, f, len, "dropped by the switch: VL15 not to QP0");
			return;
		}
		if (l.dlid == IB_LID_PERMISSIVE || (ib->port[0].lid && l.dlid == ib->port[0].lid)) {
			capture(sw, in, f, len, "to the switch's SMA");
			smp_in(sw, in, f, &l);
			return;
		}
		out = route_unicast(sw, l.dlid);
		if (out >= 1 && out <= sw->nports && out - 1 != in && phys_up(sw, out - 1)) {
			out_to(sw, in, out - 1, f, len);
		} else {
			ib->dropped_route++;
			capture(sw, in, f, len, "dropped by the switch: no route for the DLID");
		}
		return;
	}
	if (ib_lid_mcast(l.dlid)) {
		uint32_t m = l.dlid - IB_LID_MCAST_MIN;

		if (m >= MFT_CAP || ib->port[in + 1].state != IB_PORT_ACTIVE) {
			ib->dropped_route++;
			capture(sw, in, f, len, "dropped by the switch: multicast from a port that "
				"is not ACTIVE");
			return;
		}
		for (i = 0; i < sw->nports; i++)
			if (i != in && (ib->mft[m][(i + 1) / 16] >> ((i + 1) % 16) & 1) &&
			    data_ok(sw, in + 1, i + 1))
				outs |= 1ull << i;
		out_set(sw, in, outs, f, len);
		return;
	}
	out = route_unicast(sw, l.dlid);
	if (out < 1 || out > sw->nports || out - 1 == in) {
		ib->dropped_route++;
		capture(sw, in, f, len, "dropped by the switch: no route for the DLID");
		return;
	}
	if (!data_ok(sw, in + 1, out)) {
		ib->dropped_state++;
		capture(sw, in, f, len, "dropped by the switch: a port on its way is not ACTIVE");
		return;
	}
	out_to(sw, in, out - 1, f, len);
}

/* The JSON member "ib":{...} of the control socket's "show": the switch's own state. Its
 * forwarding table can hold 49 151 routes: the text grows with it. */
void fabric_ib_show(struct fabric *sw, struct fabric_sbuf *b)
{
	struct fabric_ib *ib = sw->ib;
	const char *sep = "";
	int i;

	fabric_ib_links(sw);
	fabric_sb_printf(b, "\"ib\":{\"guid\":\"0x%016llx\",\"lid\":%u,\"smps\":%llu,"
			 "\"smp_errors\":%llu,\"forwarded\":%llu,\"dropped_state\":%llu,"
			 "\"dropped_route\":%llu,\"dropped_crc\":%llu,\"lft_top\":%u,"
			 "\"port_state\":[", (unsigned long long)ib->guid, ib->port[0].lid,
			 (unsigned long long)ib->smps, (unsigned long long)ib->smp_errors,
			 (unsigned long long)ib->forwarded, (unsigned long long)ib->dropped_state,
			 (unsigned long long)ib->dropped_route,
			 (unsigned long long)ib->dropped_crc, ib->lft_top);
	for (i = 1; i <= sw->nports; i++)
		fabric_sb_printf(b, "%s%u", i > 1 ? "," : "", ib->port[i].state);
	fabric_sb_printf(b, "],\"lft\":{");
	for (i = 1; i <= ib->lft_top && i < LFT_CAP; i++)
		if (ib->lft[i] != LFT_DROP) {
			fabric_sb_printf(b, "%s\"%d\":%u", sep, i, ib->lft[i]);
			sep = ",";
		}
	fabric_sb_printf(b, "}}");
}
