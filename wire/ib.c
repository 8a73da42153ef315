// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The InfiniBand link layer: LRH (IBA 7.7), GRH (8.3), ICRC (7.8.1) and VCRC (7.8.2)
 * around the transport headers of roce.c; PortInfo and NodeInfo (14.2.5) in and out of
 * their 64-byte SMP form; the PortInfo rules, the M_Key check and Trap 256 that a CA's and
 * a switch's SMA share.
 */
#include <string.h>

#include "ib.h"

/* ---------------------------------------------------------------- VCRC */
/*
 * CRC-16, polynomial x^16 + x^12 + x^3 + x + 1 (0x100B), seeded with all ones and
 * inverted at the end, taken least significant bit first like the ICRC, and like it on
 * the wire least significant byte first (the byte order is our reading: the sources at
 * hand do not settle it, and no receiver but qhca's own checks it).
 */
static uint16_t vcrc_table[8][256];	/* [0]: one byte; [k]: a byte k places further */

static void vcrc_init(void)
{
	unsigned i, k;

	for (i = 0; i < 256; i++) {
		uint16_t c = (uint16_t)i;

		for (k = 0; k < 8; k++)
			c = c & 1 ? (uint16_t)((c >> 1) ^ 0xd008) : (uint16_t)(c >> 1);
		vcrc_table[0][i] = c;
	}
	for (i = 0; i < 256; i++)
		for (k = 1; k < 8; k++)
			vcrc_table[k][i] = (uint16_t)((vcrc_table[k - 1][i] >> 8) ^
						      vcrc_table[0][vcrc_table[k - 1][i] & 0xff]);
}

/* The reference: a byte at a time (the unit test holds ib_vcrc to it). */
uint16_t ib_vcrc_bytewise(const uint8_t *buf, size_t len)
{
	uint16_t c = 0xffff;
	size_t i;

	if (!vcrc_table[0][1])
		vcrc_init();
	for (i = 0; i < len; i++)
		c = (uint16_t)((c >> 8) ^ vcrc_table[0][(c ^ buf[i]) & 0xff]);
	return (uint16_t)~c;
}

/* Eight bytes a step ("slicing by 8"): every data byte crosses the wire once per hop and
 * is checked at the switch and the receiver, so this is on the hot path. */
uint16_t ib_vcrc(const uint8_t *buf, size_t len)
{
	uint32_t c = 0xffff;
	size_t i = 0;

	if (!vcrc_table[0][1])
		vcrc_init();
	for (; i + 8 <= len; i += 8) {
		uint32_t lo = ((uint32_t)buf[i] | (uint32_t)buf[i + 1] << 8) ^ c;

		c = vcrc_table[7][lo & 0xff] ^ vcrc_table[6][lo >> 8] ^
		    vcrc_table[5][buf[i + 2]] ^ vcrc_table[4][buf[i + 3]] ^
		    vcrc_table[3][buf[i + 4]] ^ vcrc_table[2][buf[i + 5]] ^
		    vcrc_table[1][buf[i + 6]] ^ vcrc_table[0][buf[i + 7]];
	}
	for (; i < len; i++)
		c = (c >> 8) ^ vcrc_table[0][(c ^ buf[i]) & 0xff];
	return (uint16_t)~c;
}

bool ib_vcrc_ok(const uint8_t *pkt, size_t len)
{
	return len >= IB_VCRC_LEN &&
	       (pkt[len - 2] | pkt[len - 1] << 8) == ib_vcrc(pkt, len - IB_VCRC_LEN);
}

void ib_vcrc_update(uint8_t *pkt, size_t len)
{
	uint16_t c = ib_vcrc(pkt, len - IB_VCRC_LEN);

	pkt[len - 2] = (uint8_t)c;
	pkt[len - 1] = (uint8_t)(c >> 8);
}

/* ---------------------------------------------------------------- LRH, GRH */
bool ib_lrh_read(const uint8_t *f, size_t len, struct ib_lrh *l)
{
	uint32_t words;

	if (len < IB_LRH_LEN)
		return false;
	l->vl = f[0] >> 4;
	l->lver = f[0] & 0x0f;
	l->sl = f[1] >> 4;
	l->lnh = f[1] & 3;
	l->dlid = ib_get16(f + 2);
	words = ib_get16(f + 4) & 0x7ff;
	l->slid = ib_get16(f + 6);
	l->len = words * 4 + IB_VCRC_LEN;
	return l->lver == 0 && words * 4 >= IB_LRH_LEN && l->len <= len;
}

const uint8_t *ib_bth_find(const uint8_t *pkt, const struct ib_lrh *l)
{
	size_t off = IB_LRH_LEN + (l->lnh == IB_LNH_GLOBAL ? IB_GRH_LEN : 0);

	if ((l->lnh != IB_LNH_LOCAL && l->lnh != IB_LNH_GLOBAL) ||
	    l->len < off + ROCE_BTH_LEN + ROCE_ICRC_LEN + IB_VCRC_LEN)
		return NULL;
	return pkt + off;
}

bool ib_bth_peek(const uint8_t *pkt, const struct ib_lrh *l, uint8_t *opcode, uint32_t *dqpn)
{
	const uint8_t *bth = ib_bth_find(pkt, l);

	if (!bth)
		return false;
	*opcode = roce_bth_opcode(bth);
	*dqpn = roce_bth_dqpn(bth);
	return true;
}

size_t ib_payload_offset(bool grh, uint8_t opcode)
{
	return IB_LRH_LEN + (grh ? IB_GRH_LEN : 0) + roce_opcode_info(opcode)->hdr_len;
}

size_t ib_pkt_len(const struct roce_pkt *p)
{
	return ib_payload_offset(p->grh, p->opcode) + p->payload_len +
	       roce_pad_len(p->payload_len) + ROCE_ICRC_LEN + IB_VCRC_LEN;
}

size_t ib_build(const struct roce_pkt *p, uint8_t *buf, size_t cap)
{
	const struct roce_opcode_info *oi = roce_opcode_info(p->opcode);
	size_t len = ib_pkt_len(p);
	uint8_t *h = buf + IB_LRH_LEN, *icrc_at;

	if (!oi->flags || len > cap || (p->payload_len && !(oi->flags & ROCE_F_PAYLOAD)) ||
	    (len - IB_VCRC_LEN) / 4 > 0x7ff)
		return 0;
	buf[0] = (uint8_t)(p->vl << 4);				/* LVer 0 */
	buf[1] = (uint8_t)((p->sl & 0x0f) << 4 | (p->grh ? IB_LNH_GLOBAL : IB_LNH_LOCAL));
	ib_put16(buf + 2, p->dlid);
	ib_put16(buf + 4, (uint16_t)((len - IB_VCRC_LEN) / 4));
	ib_put16(buf + 6, p->slid);
	if (p->grh) {
		/* PayLen: from the BTH through the ICRC */
		roce_grh_put(p, h, (uint16_t)(len - IB_LRH_LEN - IB_GRH_LEN - IB_VCRC_LEN));
		h += IB_GRH_LEN;
	}
	icrc_at = roce_bth_build(p, h);
	roce_icrc_put(icrc_at, roce_icrc(p->grh ? buf + IB_LRH_LEN : buf,
					 p->grh ? ROCE_NET_GRH : ROCE_NET_LRH, icrc_at));
	ib_vcrc_update(buf, len);
	return len;
}

bool ib_crc_update(uint8_t *pkt, size_t len)
{
	struct ib_lrh l;
	const uint8_t *net;
	uint8_t *end;

	if (!ib_lrh_read(pkt, len, &l) || (l.lnh != IB_LNH_LOCAL && l.lnh != IB_LNH_GLOBAL))
		return false;
	net = l.lnh == IB_LNH_GLOBAL ? pkt + IB_LRH_LEN : pkt;
	if (l.len < IB_LRH_LEN + (l.lnh == IB_LNH_GLOBAL ? IB_GRH_LEN : 0) + ROCE_BTH_LEN +
		    ROCE_ICRC_LEN + IB_VCRC_LEN)
		return false;
	end = pkt + l.len - IB_VCRC_LEN - ROCE_ICRC_LEN;
	roce_icrc_put(end, roce_icrc(net, l.lnh == IB_LNH_GLOBAL ? ROCE_NET_GRH : ROCE_NET_LRH,
				     end));
	ib_vcrc_update(pkt, l.len);
	return true;
}

enum roce_parse_result ib_parse(const uint8_t *f, size_t len, struct roce_pkt *p)
{
	const uint8_t *h = f + IB_LRH_LEN, *end;
	enum roce_parse_result r;
	struct ib_lrh l;

	memset(p, 0, sizeof(*p));
	p->ib = true;
	if (!ib_lrh_read(f, len, &l))
		return ROCE_BAD_LENGTH;
	if (!ib_vcrc_ok(f, l.len))
		return ROCE_BAD_VCRC;
	if (l.lnh != IB_LNH_LOCAL && l.lnh != IB_LNH_GLOBAL)
		return ROCE_NOT_ROCE;
	p->vl = l.vl;
	p->sl = l.sl;
	p->dlid = l.dlid;
	p->slid = l.slid;
	end = f + l.len - IB_VCRC_LEN - ROCE_ICRC_LEN;
	if (l.lnh == IB_LNH_GLOBAL) {
		if (end < h)
			return ROCE_BAD_LENGTH;
		r = roce_grh_get(h, (size_t)(end - h) + ROCE_ICRC_LEN, p);
		if (r != ROCE_OK)
			return r;
		h += IB_GRH_LEN;
	}
	r = roce_bth_check(h, end);
	if (r != ROCE_OK)
		return r;
	if (roce_icrc_get(end) != roce_icrc(p->grh ? f + IB_LRH_LEN : f,
					    p->grh ? ROCE_NET_GRH : ROCE_NET_LRH, end))
		return ROCE_BAD_ICRC;
	return roce_bth_parse(h, end, p);
}

/* ---------------------------------------------------------------- PortInfo, NodeInfo */
void ib_port_info_pack(const struct ib_port_info *pi, uint8_t d[IB_SMP_DATA_LEN])
{
	memset(d, 0, IB_SMP_DATA_LEN);
	ib_put64(d + 0, pi->mkey);
	ib_put64(d + 8, pi->gid_prefix);
	ib_put16(d + 16, pi->lid);
	ib_put16(d + 18, pi->sm_lid);
	ib_put32(d + 20, pi->cap_mask);
	ib_put16(d + 26, pi->mkey_lease);
	d[28] = pi->local_port;
	d[29] = pi->width_enabled;
	d[30] = pi->width_supported;
	d[31] = pi->width_active;
	d[32] = (uint8_t)(pi->speed_supported << 4 | (pi->state & 0x0f));
	d[33] = (uint8_t)(pi->phys_state << 4 | (pi->link_down_default & 0x0f));
	d[34] = (uint8_t)(pi->mkey_protect << 6 | (pi->lmc & 7));
	d[35] = (uint8_t)(pi->speed_active << 4 | (pi->speed_enabled & 0x0f));
	d[36] = (uint8_t)(pi->neighbor_mtu << 4 | (pi->sm_sl & 0x0f));
	d[37] = (uint8_t)(pi->vl_cap << 4);			/* InitType 0 */
	d[38] = pi->vl_high_limit;
	d[39] = pi->vl_arb_high_cap;
	d[40] = pi->vl_arb_low_cap;
	d[41] = (uint8_t)(pi->init_type_reply << 4 | (pi->mtu_cap & 0x0f));
	d[42] = (uint8_t)(pi->vl_stall << 5 | (pi->hoq_life & 0x1f));
	d[43] = (uint8_t)(pi->op_vls << 4);			/* no partition enforcement */
	ib_put16(d + 44, pi->mkey_violations);
	ib_put16(d + 46, pi->pkey_violations);
	ib_put16(d + 48, pi->qkey_violations);
	d[50] = pi->guid_cap;
	d[51] = (uint8_t)((pi->client_rereg ? 0x80 : 0) | (pi->subnet_timeout & 0x1f));
	d[52] = pi->resp_time & 0x1f;
}

void ib_port_info_unpack(const uint8_t d[IB_SMP_DATA_LEN], struct ib_port_info *pi)
{
	memset(pi, 0, sizeof(*pi));
	pi->mkey = ib_get64(d + 0);
	pi->gid_prefix = ib_get64(d + 8);
	pi->lid = ib_get16(d + 16);
	pi->sm_lid = ib_get16(d + 18);
	pi->cap_mask = ib_get32(d + 20);
	pi->mkey_lease = ib_get16(d + 26);
	pi->local_port = d[28];
	pi->width_enabled = d[29];
	pi->width_supported = d[30];
	pi->width_active = d[31];
	pi->speed_supported = d[32] >> 4;
	pi->state = d[32] & 0x0f;
	pi->phys_state = d[33] >> 4;
	pi->link_down_default = d[33] & 0x0f;
	pi->mkey_protect = d[34] >> 6;
	pi->lmc = d[34] & 7;
	pi->speed_active = d[35] >> 4;
	pi->speed_enabled = d[35] & 0x0f;
	pi->neighbor_mtu = d[36] >> 4;
	pi->sm_sl = d[36] & 0x0f;
	pi->vl_cap = d[37] >> 4;
	pi->vl_high_limit = d[38];
	pi->vl_arb_high_cap = d[39];
	pi->vl_arb_low_cap = d[40];
	pi->init_type_reply = d[41] >> 4;
	pi->mtu_cap = d[41] & 0x0f;
	pi->vl_stall = d[42] >> 5;
	pi->hoq_life = d[42] & 0x1f;
	pi->op_vls = d[43] >> 4;
	pi->mkey_violations = ib_get16(d + 44);
	pi->pkey_violations = ib_get16(d + 46);
	pi->qkey_violations = ib_get16(d + 48);
	pi->guid_cap = d[50];
	pi->client_rereg = d[51] >> 7;
	pi->subnet_timeout = d[51] & 0x1f;
	pi->resp_time = d[52] & 0x1f;
}

void ib_node_info_pack(const struct ib_node_info *ni, uint8_t d[IB_SMP_DATA_LEN])
{
	memset(d, 0, IB_SMP_DATA_LEN);
	d[0] = 1;			/* BaseVersion */
	d[1] = 1;			/* ClassVersion */
	d[2] = ni->node_type;
	d[3] = ni->num_ports;
	ib_put64(d + 4, ni->sys_image_guid);
	ib_put64(d + 12, ni->node_guid);
	ib_put64(d + 20, ni->port_guid);
	ib_put16(d + 28, ni->partition_cap);
	ib_put16(d + 30, ni->device_id);
	ib_put32(d + 32, ni->revision);
	d[36] = ni->local_port;
	d[37] = (uint8_t)(ni->vendor_id >> 16);
	d[38] = (uint8_t)(ni->vendor_id >> 8);
	d[39] = (uint8_t)ni->vendor_id;
}

/*
 * The logical state machine of a port (14.2.5.6.1, figure 146 of 7.2): the SM may move a
 * port from INIT to ARMED, from ARMED to ACTIVE, and down from any state; NOP keeps it;
 * any other request (a skipped step, the state it is in) is refused whole.
 * Setting DOWN (while the link is up) retrains the link, which comes back in INIT.
 */
static bool state_ok(uint8_t now, uint8_t want)
{
	switch (want) {
	case IB_PORT_NOP:
	case IB_PORT_DOWN:
		return true;
	case IB_PORT_ARMED:
		return now == IB_PORT_INIT;
	case IB_PORT_ACTIVE:
		return now == IB_PORT_ARMED;
	default:
		return false;
	}
}

uint16_t ib_port_info_set(struct ib_port_info *pi, const struct ib_port_info *req,
			  bool lid_settable, const char **why)
{
	if (!state_ok(pi->state, req->state)) {
		*why = "port state transition not allowed";
		return IB_MAD_ST_BAD_VALUE;
	}
	/* PortPhysicalState: SMs write back what they read (LinkUp) or NOP; qhca's links
	 * are not disabled or put to sleep by an SMP, so the field is not acted on. */
	if (req->neighbor_mtu && (req->neighbor_mtu > pi->mtu_cap)) {
		*why = "NeighborMTU above MTUCap";
		return IB_MAD_ST_BAD_VALUE;
	}
	if (req->op_vls > pi->vl_cap) {
		*why = "OperationalVLs above VLCap";
		return IB_MAD_ST_BAD_VALUE;
	}
	if (lid_settable && (req->lid > IB_LID_UNICAST_MAX ||
			     req->sm_lid > IB_LID_UNICAST_MAX)) {
		*why = "LID or SM LID not a unicast LID";
		return IB_MAD_ST_BAD_VALUE;
	}
	if (lid_settable) {
		pi->mkey = req->mkey;
		pi->gid_prefix = req->gid_prefix;
		pi->lid = req->lid;
		pi->sm_lid = req->sm_lid;
		pi->mkey_lease = req->mkey_lease;
		pi->mkey_protect = req->mkey_protect;
		pi->lmc = req->lmc;
		pi->sm_sl = req->sm_sl;
		pi->subnet_timeout = req->subnet_timeout;
		pi->client_rereg = req->client_rereg;
		pi->mkey_violations = req->mkey_violations;	/* RW: the SM may clear it */
	}
	/* Enabled fields: 0 keeps them, all ones (0xff, 15) means "what is supported". */
	if (req->width_enabled)
		pi->width_enabled = req->width_enabled == 0xff ? pi->width_supported :
				    req->width_enabled & pi->width_supported;
	if (req->speed_enabled)
		pi->speed_enabled = req->speed_enabled == 15 ? pi->speed_supported :
				    req->speed_enabled & pi->speed_supported;
	if (req->neighbor_mtu)
		pi->neighbor_mtu = req->neighbor_mtu;
	if (req->op_vls)
		pi->op_vls = req->op_vls;
	pi->vl_high_limit = req->vl_high_limit;
	pi->hoq_life = req->hoq_life;
	pi->vl_stall = req->vl_stall;
	if (req->state == IB_PORT_DOWN)
		pi->state = pi->phys_state == IB_PHYS_LINK_UP ? IB_PORT_INIT : IB_PORT_DOWN;
	else if (req->state != IB_PORT_NOP)
		pi->state = req->state;
	return 0;
}

uint16_t ib_sma_sl2vl(uint8_t table[8], uint8_t *mad, bool set, uint8_t op_vls)
{
	uint8_t *d = mad + IB_SMP_DATA;
	unsigned i;

	if (set) {
		for (i = 0; i < 16; i++) {
			uint8_t vl = i & 1 ? d[i / 2] & 0x0f : d[i / 2] >> 4;

			if (vl >= op_vls && vl != IB_VL_SMP)
				return IB_MAD_ST_BAD_VALUE;
		}
		memcpy(table, d, 8);
	}
	memset(d, 0, IB_SMP_DATA_LEN);
	memcpy(d, table, 8);
	return 0;
}

uint16_t ib_sma_vl_arb(uint8_t tables[4][IB_SMP_DATA_LEN], uint8_t *mad, bool set)
{
	uint8_t *d = mad + IB_SMP_DATA;
	uint32_t part = ib_get32(mad + IB_MAD_ATTR_MOD) >> 16;

	if (part < 1 || part > 4)
		return IB_MAD_ST_BAD_VALUE;
	if (set)
		memcpy(tables[part - 1], d, IB_SMP_DATA_LEN);
	memcpy(d, tables[part - 1], IB_SMP_DATA_LEN);
	return 0;
}

void ib_mad_make_resp(uint8_t *mad, uint16_t status)
{
	mad[IB_MAD_METHOD] = IB_METHOD_GET_RESP;
	if (mad[IB_MAD_CLASS] == IB_MCLASS_SMP_DR)
		status |= IB_SMP_DIRECTION;
	ib_put16(mad + IB_MAD_STATUS, status);
}

/* ---------------------------------------------------------------- M_Key (14.2.4) */
enum ib_mkey_result ib_mkey_check(struct ib_port_info *pi, const uint8_t *mad,
				  uint64_t now_ns)
{
	uint8_t method = mad[IB_MAD_METHOD];
	bool match;

	if (method != IB_METHOD_GET && method != IB_METHOD_SET &&
	    method != IB_METHOD_TRAP_REPRESS)
		return IB_MKEY_PASS;
	/* 14.2.4, the lease: one that ran out takes the protection away (the key stays). */
	if (pi->mkey_lease_end && now_ns >= pi->mkey_lease_end) {
		pi->mkey_lease_end = 0;
		pi->mkey_protect = 0;
	}
	match = !pi->mkey || ib_get64(mad + IB_SMP_MKEY) == pi->mkey;
	if (match) {
		pi->mkey_lease_end = 0;		/* the SM is there: the lease holds */
		return IB_MKEY_PASS;
	}
	/* 14.2.4, the protection levels: without the key only a Get at levels 0, 1 passes */
	if (method == IB_METHOD_GET && pi->mkey_protect < 2)
		return pi->mkey_protect ? IB_MKEY_PASS_HIDE : IB_MKEY_PASS;
	if (pi->mkey_violations != 0xffff)
		pi->mkey_violations++;
	if (!pi->mkey_lease_end && pi->mkey_lease) {
		uint64_t period = (uint64_t)pi->mkey_lease * 1000000000ull;

		pi->mkey_lease_end = now_ns > UINT64_MAX - period ? UINT64_MAX : now_ns + period;
	}
	return IB_MKEY_FAIL;
}

void ib_mkey_hide(uint8_t *mad, enum ib_mkey_result r)
{
	if (r != IB_MKEY_PASS)
		memset(mad + IB_SMP_DATA, 0, 8);	/* PortInfo's first field: M_Key */
}

/*
 * The Notice of Trap 256 (14.2.5.1): IsGeneric, type Security, the producer's node type,
 * the trap number, the issuer's LID; its data details: the LID where the violation
 * happened, the directed-route SLID, method, attribute and modifier of the SMP and the
 * M_Key it carried; for a directed-route SMP also the DRNotice bit and its hop count (the
 * return path is left out: DRPathTruncated set, as 30 bytes cannot hold 63 hops).
 */
void ib_trap_bad_mkey(uint8_t *trap, const uint8_t *bad, uint8_t node_type,
		      uint16_t issuer_lid, uint64_t tid)
{
	uint8_t *n = trap + IB_SMP_DATA;

	memset(trap, 0, IB_MAD_LEN);
	trap[IB_MAD_BASE_VERSION] = 1;
	trap[IB_MAD_CLASS] = IB_MCLASS_SMP_LID;
	trap[IB_MAD_CLASS_VERSION] = 1;
	trap[IB_MAD_METHOD] = IB_METHOD_TRAP;
	ib_put64(trap + IB_MAD_TID, tid);
	ib_put16(trap + IB_MAD_ATTR_ID, IB_ATTR_NOTICE);
	n[0] = 0x80 | IB_NOTICE_SECURITY;		/* IsGeneric, Type */
	n[3] = node_type;				/* ProducerType (24 bits) */
	ib_put16(n + 4, IB_TRAP_BAD_MKEY);
	ib_put16(n + 6, issuer_lid);
	/* data details */
	ib_put16(n + 10, issuer_lid);
	n[14] = bad[IB_MAD_METHOD];
	memcpy(n + 16, bad + IB_MAD_ATTR_ID, 2);
	memcpy(n + 18, bad + IB_MAD_ATTR_MOD, 4);
	memcpy(n + 22, bad + IB_SMP_MKEY, 8);
	if (bad[IB_MAD_CLASS] == IB_MCLASS_SMP_DR) {
		memcpy(n + 12, bad + IB_SMP_DR_SLID, 2);
		n[30] = (uint8_t)(0x80 | 0x40 | (bad[IB_MAD_HOP_CNT] & 0x3f));
	}
}
