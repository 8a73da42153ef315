// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Unit tests of the InfiniBand link layer (link=ib): LRH/GRH building and parsing, VCRC
 * and ICRC, the SMA and PMA through MAD_IFC, the M_Key check of the SMA (protection levels,
 * violations, the lease, Trap 256), and the transport between two engines whose
 * ports a test "subnet manager" brought to ACTIVE: RC by LID, UD with and without a GRH,
 * QP0 on VL15 before the port is active, multicast groups, and what a port drops.
 */
#include "transport_harness.h"

/* ---------------------------------------------------------------- wire */
static void test_vcrc_known_answer(void)
{
	static uint8_t buf[5000];
	size_t i, len;

	/* CRC-16/0x100B reflected, init and xorout 0xffff: its check value. */
	CHECK_EQ(ib_vcrc((const uint8_t *)"123456789", 9), 0x0a3d);
	CHECK_EQ(ib_vcrc_bytewise((const uint8_t *)"123456789", 9), 0x0a3d);
	/* eight bytes a step agree with a byte at a time, at every length and alignment */
	for (i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)(i * 131 + (i >> 7));
	for (len = 0; len < 70; len++)
		for (i = 0; i < 8; i++)
			CHECK_EQ(ib_vcrc(buf + i, len), ib_vcrc_bytewise(buf + i, len));
	CHECK_EQ(ib_vcrc(buf + 3, 4200), ib_vcrc_bytewise(buf + 3, 4200));
}

static struct roce_pkt sample(bool grh, uint8_t opcode, uint32_t len)
{
	static uint8_t payload[4096];
	struct roce_pkt p;
	unsigned i;

	for (i = 0; i < sizeof(payload); i++)
		payload[i] = (uint8_t)(i * 13 + 1);
	memset(&p, 0, sizeof(p));
	p.ib = true;
	p.grh = grh;
	p.vl = 0;
	p.sl = 3;
	p.dlid = 0x12;
	p.slid = 0x34;
	p.opcode = opcode;
	p.pkey = 0xffff;
	p.dqpn = 0x123456;
	p.psn = 0xabcdef;
	p.reth_va = 0x1122334455667788ull;
	p.reth_rkey = 0x99;
	p.reth_len = len;
	p.deth_qkey = 0x11111111;
	p.deth_sqpn = 0x42;
	p.payload = payload;
	p.payload_len = len;
	if (grh) {
		memset(p.sgid, 0xfe, 16);
		memset(p.dgid, 0xfd, 16);
		p.hop_limit = 1;
		p.tclass = 7;
		p.flow_label = 0x12345;
	}
	return p;
}

static void test_lrh_roundtrip(void)
{
	static const uint8_t opcodes[] = { ROCE_TS_RC | ROCE_OP_WRITE_FIRST, ROCE_TS_UD | ROCE_OP_SEND_ONLY,
				       ROCE_TS_RC | ROCE_OP_ACKNOWLEDGE };
	static const uint32_t lens[] = { 1, 3, 256, 4096 };
	uint8_t buf[IB_MAX_PKT + 64];
	unsigned g, o, l;

	for (g = 0; g < 2; g++) {
		for (o = 0; o < sizeof(opcodes); o++) {
			for (l = 0; l < 4; l++) {
				uint32_t len = roce_opcode_info(opcodes[o])->flags & ROCE_F_PAYLOAD ?
					       lens[l] : 0;
				struct roce_pkt p = sample(g, opcodes[o], len), q;
				size_t n = ib_build(&p, buf, sizeof(buf));
				struct ib_lrh lrh;

				CHECK_EQ(n, ib_pkt_len(&p));
				CHECK_EQ(n % 4, 2);	/* words and the VCRC */
				CHECK(ib_lrh_read(buf, n, &lrh));
				CHECK_EQ(lrh.len, n);
				CHECK_EQ(lrh.lnh, g ? IB_LNH_GLOBAL : IB_LNH_LOCAL);
				/* a carrier may pad: trailing bytes are not the packet's */
				memset(buf + n, 0xee, 10);
				CHECK_EQ(ib_parse(buf, n + 10, &q), ROCE_OK);
				CHECK(q.ib);
				CHECK_EQ(q.grh, g);
				CHECK_EQ(q.sl, 3);
				CHECK_EQ(q.dlid, 0x12);
				CHECK_EQ(q.slid, 0x34);
				CHECK_EQ(q.opcode, opcodes[o]);
				CHECK_EQ(q.dqpn, 0x123456);
				CHECK_EQ(q.psn, 0xabcdef);
				CHECK_EQ(q.payload_len, len);
				CHECK(!len || !memcmp(q.payload, p.payload, len));
				if (g) {
					CHECK(!memcmp(q.sgid, p.sgid, 16));
					CHECK(!memcmp(q.dgid, p.dgid, 16));
					CHECK_EQ(q.flow_label, 0x12345);
					CHECK_EQ(q.tclass, 7);
				}
				if (opcodes[o] == (ROCE_TS_UD | ROCE_OP_SEND_ONLY)) {
					CHECK_EQ(q.deth_qkey, 0x11111111);
					CHECK_EQ(q.deth_sqpn, 0x42);
				}
			}
		}
	}
}

/* Every byte is covered by the VCRC; the ICRC covers all but the variant fields. */
static void test_crc_coverage(void)
{
	uint8_t buf[IB_MAX_PKT], copy[IB_MAX_PKT];
	struct roce_pkt p, q;
	unsigned g;
	size_t n, i;

	for (g = 0; g < 2; g++) {
		p = sample(g, ROCE_TS_UD | ROCE_OP_SEND_ONLY, 64);
		n = ib_build(&p, buf, sizeof(buf));
		for (i = 0; i < n; i++) {
			memcpy(copy, buf, n);
			copy[i] ^= 0x10;
			CHECK(ib_parse(copy, n, &q) != ROCE_OK);
		}
		/* With the VCRC made good again (a switch rewrote the field): the ICRC
		 * decides. The VL is variant; so is all of the LRH of a packet with a GRH. */
		memcpy(copy, buf, n);
		copy[0] ^= 0x30;			/* VL */
		ib_vcrc_update(copy, n);
		CHECK_EQ(ib_parse(copy, n, &q), ROCE_OK);
		memcpy(copy, buf, n);
		copy[3] ^= 0x01;			/* DLID */
		ib_vcrc_update(copy, n);
		CHECK_EQ(ib_parse(copy, n, &q), g ? ROCE_OK : ROCE_BAD_ICRC);
		if (g) {
			memcpy(copy, buf, n);
			copy[IB_LRH_LEN + 7] ^= 0x01;	/* GRH hop limit: variant */
			ib_vcrc_update(copy, n);
			CHECK_EQ(ib_parse(copy, n, &q), ROCE_OK);
			memcpy(copy, buf, n);
			copy[IB_LRH_LEN + 20] ^= 0x01;	/* SGID: covered */
			ib_vcrc_update(copy, n);
			CHECK_EQ(ib_parse(copy, n, &q), ROCE_BAD_ICRC);
		}
		memcpy(copy, buf, n);
		copy[n - 10] ^= 0x01;			/* payload */
		CHECK(ib_crc_update(copy, n));
		CHECK_EQ(ib_parse(copy, n, &q), ROCE_OK);
	}
}

static void test_lrh_malformed(void)
{
	uint8_t buf[IB_MAX_PKT];
	struct roce_pkt p = sample(false, ROCE_TS_UD | ROCE_OP_SEND_ONLY, 16), q;
	size_t n = ib_build(&p, buf, sizeof(buf));

	CHECK_EQ(ib_parse(buf, n - 1, &q), ROCE_BAD_LENGTH);	/* shorter than PktLen */
	CHECK_EQ(ib_parse(buf, 4, &q), ROCE_BAD_LENGTH);
	buf[0] |= 0x01;						/* LVer 1 */
	CHECK_EQ(ib_parse(buf, n, &q), ROCE_BAD_LENGTH);
	buf[0] &= 0xf0;
	buf[1] = (uint8_t)((buf[1] & ~3) | IB_LNH_RAW);		/* a raw packet */
	ib_vcrc_update(buf, n);
	CHECK_EQ(ib_parse(buf, n, &q), ROCE_NOT_ROCE);
	buf[1] = (uint8_t)((buf[1] & ~3) | IB_LNH_GLOBAL);	/* says GRH, has none */
	ib_vcrc_update(buf, n);
	CHECK(ib_parse(buf, n, &q) != ROCE_OK);
	buf[4] = 0;						/* PktLen 0 */
	buf[5] = 1;
	CHECK_EQ(ib_parse(buf, n, &q), ROCE_BAD_LENGTH);
}

/* ---------------------------------------------------------------- SMA and PMA */
static void smp(uint8_t *mad, uint8_t cls, uint8_t method, uint16_t attr, uint32_t mod)
{
	memset(mad, 0, IB_MAD_LEN);
	mad[IB_MAD_BASE_VERSION] = 1;
	mad[IB_MAD_CLASS] = cls;
	mad[IB_MAD_CLASS_VERSION] = 1;
	mad[IB_MAD_METHOD] = method;
	ib_put64(mad + IB_MAD_TID, 0x1234);
	ib_put16(mad + IB_MAD_ATTR_ID, attr);
	ib_put32(mad + IB_MAD_ATTR_MOD, mod);
}

/* Set PortInfo on @n as an SM does: LID, SM LID and a new state; returns the status. */
static uint16_t sm_set_port(struct node *n, uint16_t lid, uint16_t sm_lid, uint8_t state)
{
	uint8_t in[IB_MAD_LEN], out[IB_MAD_LEN];
	struct ib_port_info pi;

	smp(in, IB_MCLASS_SMP_LID, IB_METHOD_GET, IB_ATTR_PORT_INFO, 1);
	CHECK_EQ(qhca_mad_ifc(&n->e, in, out, false), 1);
	ib_port_info_unpack(out + IB_SMP_DATA, &pi);
	pi.lid = lid;
	pi.sm_lid = sm_lid;
	pi.state = state;
	pi.phys_state = IB_PHYS_NOP;
	smp(in, IB_MCLASS_SMP_LID, IB_METHOD_SET, IB_ATTR_PORT_INFO, 1);
	ib_port_info_pack(&pi, in + IB_SMP_DATA);
	CHECK_EQ(qhca_mad_ifc(&n->e, in, out, false), 1);
	CHECK_EQ(out[IB_MAD_METHOD], IB_METHOD_GET_RESP);
	return ib_get16(out + IB_MAD_STATUS);
}

/* The subnet manager's work for the two nodes: LIDs 1 and 2, ARMED, then ACTIVE. */
static void sm_bring_up(void)
{
	int i;

	for (i = 0; i < 2; i++) {
		CHECK_EQ(sm_set_port(&nodes[i], (uint16_t)(i + 1), 1, IB_PORT_ARMED), 0);
		CHECK_EQ(sm_set_port(&nodes[i], (uint16_t)(i + 1), 1, IB_PORT_ACTIVE), 0);
		CHECK(qhca_ib_active(&nodes[i].e));
	}
}

static void ib_setup(void)
{
	int i;

	harness_link = QHCA_LINK_IB;
	setup();
	harness_link = QHCA_LINK_ROCE;
	for (i = 0; i < 2; i++) {
		struct qhca_cmd_create_eq c = { .ring_addr = galloc(&nodes[i], 4096),
						.log2_entries = 8, .flags = QHCA_EQ_ASYNC };
		uint32_t h;

		CHECK_EQ(qhca_eq_create(&nodes[i].e, &c, &h), QHCA_ST_OK);
	}
}

/* The async events on @n's EQ since the last call, as a bit mask of their types. */
static uint32_t async_events(struct node *n)
{
	struct qhca_eq *q = &n->e.eq[n->e.async_eq];
	static uint32_t seen[2];
	uint32_t mask = 0;

	if (seen[n->id] > q->pi)	/* a new test's queue */
		seen[n->id] = 0;
	while (seen[n->id] != q->pi) {
		const struct qhca_eqe *x = gptr(n, q->ring + (seen[n->id] & ((1u << q->log2) - 1)) *
						 sizeof(struct qhca_eqe));
		mask |= 1u << x->type;
		seen[n->id]++;
	}
	return mask;
}

static void test_sma(void)
{
	uint8_t in[IB_MAD_LEN], out[IB_MAD_LEN];
	struct ib_port_info pi;
	struct node *n = &nodes[0];

	ib_setup();
	CHECK_EQ(async_events(&nodes[0]), 0);
	/* NodeInfo: a CA of one port, its GUIDs */
	smp(in, IB_MCLASS_SMP_DR, IB_METHOD_GET, IB_ATTR_NODE_INFO, 0);
	CHECK_EQ(qhca_mad_ifc(&n->e, in, out, false), 1);
	CHECK_EQ(out[IB_MAD_METHOD], IB_METHOD_GET_RESP);
	CHECK_EQ(ib_get16(out + IB_MAD_STATUS), IB_SMP_DIRECTION);	/* DR: the D bit */
	CHECK_EQ(ib_get64(out + IB_MAD_TID), 0x1234);
	CHECK_EQ(out[IB_SMP_DATA + 2], IB_NODE_CA);
	CHECK_EQ(out[IB_SMP_DATA + 3], 1);
	CHECK_EQ(ib_get64(out + IB_SMP_DATA + 12), qhca_node_guid(&n->e));
	CHECK_EQ(ib_get64(out + IB_SMP_DATA + 20), qhca_port_guid(&n->e));
	/* PortInfo after the link came up: INIT, no LID yet */
	smp(in, IB_MCLASS_SMP_LID, IB_METHOD_GET, IB_ATTR_PORT_INFO, 0);
	CHECK_EQ(qhca_mad_ifc(&n->e, in, out, false), 1);
	ib_port_info_unpack(out + IB_SMP_DATA, &pi);
	CHECK_EQ(pi.state, IB_PORT_INIT);
	CHECK_EQ(pi.phys_state, IB_PHYS_LINK_UP);
	CHECK_EQ(pi.lid, 0);
	CHECK_EQ(pi.mtu_cap, 5);
	CHECK_EQ(pi.vl_cap, 1);
	CHECK(pi.cap_mask & IB_PORT_CAP_CLIENT_REREG);
	/* skipping ARMED is refused whole: the LID stays 0 */
	CHECK_EQ(sm_set_port(n, 7, 1, IB_PORT_ACTIVE), IB_MAD_ST_BAD_VALUE);
	CHECK_EQ(n->e.ib.pi.lid, 0);
	CHECK_EQ(async_events(n), 0);
	CHECK_EQ(sm_set_port(n, 7, 3, IB_PORT_ARMED), 0);
	CHECK_EQ(async_events(n), 1u << QHCA_EVENT_LID_CHANGE | 1u << QHCA_EVENT_SM_CHANGE);
	CHECK_EQ(sm_set_port(n, 7, 3, IB_PORT_ACTIVE), 0);
	CHECK_EQ(async_events(n), 1u << QHCA_EVENT_PORT_ACTIVE);
	CHECK_EQ(sm_set_port(n, 7, 3, IB_PORT_ACTIVE), IB_MAD_ST_BAD_VALUE);	/* again */
	CHECK(qhca_ib_lid_ours(&n->e, 7));
	CHECK(!qhca_ib_lid_ours(&n->e, 8));
	/* DOWN retrains the link: back to INIT, PORT_DOWN */
	CHECK_EQ(sm_set_port(n, 7, 3, IB_PORT_DOWN), 0);
	CHECK_EQ(n->e.ib.pi.state, IB_PORT_INIT);
	CHECK_EQ(async_events(n), 1u << QHCA_EVENT_PORT_DOWN);
	/* P_Key table */
	smp(in, IB_MCLASS_SMP_LID, IB_METHOD_SET, IB_ATTR_PKEY_TABLE, 0);
	ib_put16(in + IB_SMP_DATA, 0xffff);
	ib_put16(in + IB_SMP_DATA + 2, 0x8001);
	CHECK_EQ(qhca_mad_ifc(&n->e, in, out, false), 1);
	CHECK_EQ(ib_get16(out + IB_MAD_STATUS), 0);
	CHECK_EQ(ib_get16(out + IB_SMP_DATA + 2), 0x8001);
	CHECK_EQ(async_events(n), 1u << QHCA_EVENT_PKEY_CHANGE);
	CHECK(qhca_ib_pkey_ok(&n->e, 0x0001));
	CHECK(!qhca_ib_pkey_ok(&n->e, 0x0002));
	smp(in, IB_MCLASS_SMP_LID, IB_METHOD_GET, IB_ATTR_PKEY_TABLE, 1);	/* no block 1 */
	CHECK_EQ(qhca_mad_ifc(&n->e, in, out, false), 1);
	CHECK_EQ(ib_get16(out + IB_MAD_STATUS), IB_MAD_ST_BAD_VALUE);
	/* ClientReregister reads back as set, once, and raises its event */
	smp(in, IB_MCLASS_SMP_LID, IB_METHOD_GET, IB_ATTR_PORT_INFO, 1);
	qhca_mad_ifc(&n->e, in, out, false);
	out[IB_SMP_DATA + 51] |= 0x80;
	out[IB_SMP_DATA + 32] &= 0xf0;		/* state: NOP */
	memcpy(in + IB_SMP_DATA, out + IB_SMP_DATA, IB_SMP_DATA_LEN);
	in[IB_MAD_METHOD] = IB_METHOD_SET;
	CHECK_EQ(qhca_mad_ifc(&n->e, in, out, false), 1);
	CHECK(out[IB_SMP_DATA + 51] & 0x80);
	CHECK(async_events(n) & (1u << QHCA_EVENT_CLIENT_REREG));
	in[IB_MAD_METHOD] = IB_METHOD_GET;
	qhca_mad_ifc(&n->e, in, out, false);
	CHECK(!(out[IB_SMP_DATA + 51] & 0x80));
	/* what is not the SMA's: SMInfo, responses, traps; unknown attributes refused */
	smp(in, IB_MCLASS_SMP_LID, IB_METHOD_GET, IB_ATTR_SM_INFO, 0);
	CHECK_EQ(qhca_mad_ifc(&n->e, in, out, false), 0);
	smp(in, IB_MCLASS_SMP_LID, IB_METHOD_GET_RESP, IB_ATTR_NODE_INFO, 0);
	CHECK_EQ(qhca_mad_ifc(&n->e, in, out, false), 0);
	smp(in, IB_MCLASS_SMP_LID, IB_METHOD_GET, IB_ATTR_LFT, 0);
	CHECK_EQ(qhca_mad_ifc(&n->e, in, out, false), 1);
	CHECK_EQ(ib_get16(out + IB_MAD_STATUS), IB_MAD_ST_BAD_ATTR);
	smp(in, IB_MCLASS_SMP_LID, IB_METHOD_SET, IB_ATTR_NODE_INFO, 0);
	CHECK_EQ(qhca_mad_ifc(&n->e, in, out, false), 1);
	CHECK_EQ(ib_get16(out + IB_MAD_STATUS), IB_MAD_ST_BAD_ATTR);
	in[IB_MAD_CLASS_VERSION] = 2;
	CHECK_EQ(qhca_mad_ifc(&n->e, in, out, false), 1);
	CHECK_EQ(ib_get16(out + IB_MAD_STATUS), IB_MAD_ST_BAD_VERSION);
	smp(in, IB_MCLASS_SA, IB_METHOD_GET, 0x35, 0);			/* the SA's */
	CHECK_EQ(qhca_mad_ifc(&n->e, in, out, false), 0);
	teardown();
}

static void test_pma(void)
{
	uint8_t in[IB_MAD_LEN], out[IB_MAD_LEN];
	struct node *n = &nodes[0];

	ib_setup();
	n->e.cnt.roce_tx_bytes = 4000;
	n->e.cnt.roce_rx_pkts = 9;
	smp(in, IB_MCLASS_PERF, IB_METHOD_GET, IB_ATTR_CLASS_PORT_INFO, 0);
	CHECK_EQ(qhca_mad_ifc(&n->e, in, out, false), 1);
	CHECK(ib_get16(out + IB_PERF_DATA + 2) & (1u << 9));
	smp(in, IB_MCLASS_PERF, IB_METHOD_GET, IB_ATTR_PORT_COUNTERS, 0);
	in[IB_PERF_DATA + 1] = 1;
	CHECK_EQ(qhca_mad_ifc(&n->e, in, out, false), 1);
	CHECK_EQ(ib_get32(out + IB_PERF_DATA + 24), 1000);	/* 4-byte words */
	CHECK_EQ(ib_get32(out + IB_PERF_DATA + 36), 9);
	/* Set with CounterSelect clears them */
	in[IB_MAD_METHOD] = IB_METHOD_SET;
	ib_put16(in + IB_PERF_DATA + 2, 0xf000);
	CHECK_EQ(qhca_mad_ifc(&n->e, in, out, false), 1);
	CHECK_EQ(ib_get32(out + IB_PERF_DATA + 24), 0);
	n->e.cnt.roce_rx_pkts += 5;
	smp(in, IB_MCLASS_PERF, IB_METHOD_GET, IB_ATTR_PORT_COUNTERS_EXT, 0);
	in[IB_PERF_DATA + 1] = 1;
	CHECK_EQ(qhca_mad_ifc(&n->e, in, out, false), 1);
	CHECK_EQ(ib_get64(out + IB_PERF_DATA + 32), 5);
	teardown();
}

/* ---------------------------------------------------------------- M_Key (IBA 14.2.4) */
#define MKEY	0x1122334455667788ull
#define BADKEY	0x1122334455667789ull

/* An SMP with M_Key @key to @n's SMA: 1 with the response in @out, 0 if dropped. */
static int smp_key(struct node *n, uint8_t cls, uint8_t method, uint16_t attr, uint32_t mod,
		   uint64_t key, const uint8_t *data, uint8_t *out)
{
	uint8_t in[IB_MAD_LEN];

	smp(in, cls, method, attr, mod);
	ib_put64(in + IB_SMP_MKEY, key);
	if (data)
		memcpy(in + IB_SMP_DATA, data, IB_SMP_DATA_LEN);
	return qhca_mad_ifc(&n->e, in, out, false);
}

/* PortInfo read with the right key (the M_Key must be @key, or 0 if none is set). */
static struct ib_port_info port_info(struct node *n, uint64_t key)
{
	uint8_t out[IB_MAD_LEN];
	struct ib_port_info pi;

	memset(&pi, 0, sizeof(pi));
	CHECK_EQ(smp_key(n, IB_MCLASS_SMP_LID, IB_METHOD_GET, IB_ATTR_PORT_INFO, 1, key, NULL,
			 out), 1);
	CHECK_EQ(ib_get16(out + IB_MAD_STATUS), 0);
	ib_port_info_unpack(out + IB_SMP_DATA, &pi);
	return pi;
}

/* The SM sets M_Key @nkey, protection @level and lease @lease, sending @key. */
static int set_mkey(struct node *n, uint64_t key, uint64_t nkey, uint8_t level, uint16_t lease)
{
	uint8_t d[IB_SMP_DATA_LEN], out[IB_MAD_LEN];
	struct ib_port_info pi = port_info(n, key);

	pi.mkey = nkey;
	pi.mkey_protect = level;
	pi.mkey_lease = lease;
	pi.state = IB_PORT_NOP;
	pi.phys_state = IB_PHYS_NOP;
	ib_port_info_pack(&pi, d);
	return smp_key(n, IB_MCLASS_SMP_LID, IB_METHOD_SET, IB_ATTR_PORT_INFO, 1, key, d, out);
}

/* Set LID @lid and SM LID @sm_lid with M_Key @key (state NOP). */
static int sm_set_port_key(struct node *n, uint64_t key, uint16_t lid, uint16_t sm_lid)
{
	uint8_t d[IB_SMP_DATA_LEN], out[IB_MAD_LEN];
	struct ib_port_info pi = port_info(n, key);

	pi.lid = lid;
	pi.sm_lid = sm_lid;
	pi.state = IB_PORT_NOP;
	pi.phys_state = IB_PHYS_NOP;
	ib_port_info_pack(&pi, d);
	return smp_key(n, IB_MCLASS_SMP_LID, IB_METHOD_SET, IB_ATTR_PORT_INFO, 1, key, d, out);
}

static void test_mkey_levels(void)
{
	uint8_t out[IB_MAD_LEN], d[IB_SMP_DATA_LEN];
	struct node *n = &nodes[0];
	struct ib_port_info pi;
	uint16_t viol = 0;
	unsigned level;

	ib_setup();
	CHECK_EQ(sm_set_port(n, 7, 3, IB_PORT_ARMED), 0);
	CHECK_EQ(sm_set_port(n, 7, 3, IB_PORT_ACTIVE), 0);
	(void)async_events(n);
	for (level = 0; level < 4; level++) {
		bool get_ok = level < 2;

		CHECK_EQ(set_mkey(n, level ? MKEY : 0, MKEY, (uint8_t)level, 0), 1);
		pi = port_info(n, MKEY);
		CHECK_EQ(pi.mkey, MKEY);
		CHECK_EQ(pi.mkey_protect, level);
		/* Get without the key: levels 0, 1 answer (1 hides the key), 2, 3 drop it */
		CHECK_EQ(smp_key(n, IB_MCLASS_SMP_LID, IB_METHOD_GET, IB_ATTR_PORT_INFO, 1,
				 BADKEY, NULL, out), get_ok);
		if (get_ok) {
			ib_port_info_unpack(out + IB_SMP_DATA, &pi);
			CHECK_EQ(pi.mkey, level ? 0 : MKEY);
			CHECK_EQ(pi.lid, 7);
		} else {
			viol++;
		}
		CHECK_EQ(smp_key(n, IB_MCLASS_SMP_DR, IB_METHOD_GET, IB_ATTR_NODE_INFO, 0, 0, NULL,
				 out), get_ok);
		viol += !get_ok;
		/* Sets without the key change nothing at any level, and are not answered */
		memset(d, 0, sizeof(d));
		CHECK_EQ(smp_key(n, IB_MCLASS_SMP_LID, IB_METHOD_SET, IB_ATTR_PKEY_TABLE, 0,
				 BADKEY, d, out), 0);
		viol++;
		CHECK_EQ(n->e.ib.pkeys[0], 0xffff);
		pi = port_info(n, MKEY);
		pi.lid = 9;
		pi.sm_lid = 9;
		pi.mkey = 0;
		pi.mkey_protect = 0;
		pi.state = IB_PORT_DOWN;
		pi.phys_state = IB_PHYS_NOP;
		ib_port_info_pack(&pi, d);
		CHECK_EQ(smp_key(n, IB_MCLASS_SMP_DR, IB_METHOD_SET, IB_ATTR_PORT_INFO, 1, BADKEY,
				 d, out), 0);
		CHECK_EQ(smp_key(n, IB_MCLASS_SMP_LID, IB_METHOD_SET, IB_ATTR_PORT_INFO, 1, 0, d,
				 out), 0);
		viol += 2;
		CHECK_EQ(smp_key(n, IB_MCLASS_SMP_LID, IB_METHOD_SET, IB_ATTR_GUID_INFO, 0, BADKEY,
				 d, out), 0);
		viol++;
		CHECK_EQ(n->e.ib.guids[1], 0);
		pi = port_info(n, MKEY);
		CHECK_EQ(pi.lid, 7);
		CHECK_EQ(pi.sm_lid, 3);
		CHECK_EQ(pi.mkey, MKEY);
		CHECK_EQ(pi.mkey_protect, level);
		CHECK_EQ(pi.state, IB_PORT_ACTIVE);
		CHECK_EQ(pi.mkey_violations, viol);
		CHECK_EQ(async_events(n), 0);
		/* with the key, a Set works (a P_Key added, then the table as it was) */
		memset(d, 0, sizeof(d));
		ib_put16(d, 0xffff);
		ib_put16(d + 2, 0x8005);
		CHECK_EQ(smp_key(n, IB_MCLASS_SMP_LID, IB_METHOD_SET, IB_ATTR_PKEY_TABLE, 0, MKEY,
				 d, out), 1);
		CHECK_EQ(ib_get16(out + IB_MAD_STATUS), 0);
		CHECK(qhca_ib_pkey_ok(&n->e, 0x0005));
		ib_put16(d + 2, 0);
		CHECK_EQ(smp_key(n, IB_MCLASS_SMP_LID, IB_METHOD_SET, IB_ATTR_PKEY_TABLE, 0, MKEY,
				 d, out), 1);
		(void)async_events(n);
	}
	/* the SM may clear the counter (RW); it stops at 0xffff */
	pi = port_info(n, MKEY);
	pi.mkey_violations = 0xfffe;
	pi.state = IB_PORT_NOP;
	ib_port_info_pack(&pi, d);
	CHECK_EQ(smp_key(n, IB_MCLASS_SMP_LID, IB_METHOD_SET, IB_ATTR_PORT_INFO, 1, MKEY, d, out),
		 1);
	CHECK_EQ(smp_key(n, IB_MCLASS_SMP_LID, IB_METHOD_SET, IB_ATTR_PORT_INFO, 1, 0, d, out), 0);
	CHECK_EQ(smp_key(n, IB_MCLASS_SMP_LID, IB_METHOD_SET, IB_ATTR_PORT_INFO, 1, 0, d, out), 0);
	CHECK_EQ(port_info(n, MKEY).mkey_violations, 0xffff);
	/* M_Key 0: no check at all, whatever the protection bits say */
	CHECK_EQ(set_mkey(n, MKEY, 0, 3, 0), 1);
	CHECK_EQ(smp_key(n, IB_MCLASS_SMP_LID, IB_METHOD_GET, IB_ATTR_PORT_INFO, 1, BADKEY, NULL,
			 out), 1);
	CHECK_EQ(set_mkey(n, BADKEY, MKEY, 2, 0), 1);
	CHECK_EQ(port_info(n, MKEY).mkey, MKEY);
	teardown();
}

/* A failed check sends Trap 256 to a remote SM: LID-routed, VL15, to the SM LID. */
static void test_mkey_trap(void)
{
	uint8_t out[IB_MAD_LEN], d[IB_SMP_DATA_LEN] = { 0 };
	struct node *n = &nodes[0];
	const struct frame *f;
	struct roce_pkt p;

	ib_setup();
	CHECK_EQ(sm_set_port(n, 7, 3, IB_PORT_ARMED), 0);
	CHECK_EQ(set_mkey(n, 0, MKEY, 1, 0), 1);
	pump();
	CHECK_EQ(link_n, 0);
	CHECK_EQ(smp_key(n, IB_MCLASS_SMP_DR, IB_METHOD_SET, IB_ATTR_PKEY_TABLE, 0, BADKEY, d,
			 out), 0);
	CHECK_EQ(link_n, 1);
	if (link_n == 1) {
		f = link_at(0);
		CHECK_EQ(ib_parse(f->data, f->len, &p), ROCE_OK);
		CHECK_EQ(p.vl, IB_VL_SMP);
		CHECK_EQ(p.dlid, 3);
		CHECK_EQ(p.slid, 7);
		CHECK_EQ(p.dqpn, 0);
		CHECK_EQ(p.payload_len, IB_MAD_LEN);
		CHECK_EQ(p.payload[IB_MAD_CLASS], IB_MCLASS_SMP_LID);
		CHECK_EQ(p.payload[IB_MAD_METHOD], IB_METHOD_TRAP);
		CHECK_EQ(ib_get16(p.payload + IB_MAD_ATTR_ID), IB_ATTR_NOTICE);
		CHECK_EQ(ib_get64(p.payload + IB_SMP_MKEY), 0);		/* not the key */
		CHECK_EQ(p.payload[IB_SMP_DATA], 0x80 | IB_NOTICE_SECURITY);
		CHECK_EQ(p.payload[IB_SMP_DATA + 3], IB_NODE_CA);
		CHECK_EQ(ib_get16(p.payload + IB_SMP_DATA + 4), 256);
		CHECK_EQ(ib_get16(p.payload + IB_SMP_DATA + 6), 7);
		CHECK_EQ(p.payload[IB_SMP_DATA + 14], IB_METHOD_SET);
		CHECK_EQ(ib_get16(p.payload + IB_SMP_DATA + 16), IB_ATTR_PKEY_TABLE);
		CHECK_EQ(ib_get64(p.payload + IB_SMP_DATA + 22), BADKEY);
	}
	pump();
	/* a Get that level 1 allows is no violation: no trap */
	CHECK_EQ(smp_key(n, IB_MCLASS_SMP_LID, IB_METHOD_GET, IB_ATTR_PORT_INFO, 1, BADKEY, NULL,
			 out), 1);
	CHECK_EQ(link_n, 0);
	/* the SM on this very port: nothing on the wire */
	CHECK_EQ(sm_set_port_key(n, MKEY, 7, 7), 1);
	CHECK_EQ(smp_key(n, IB_MCLASS_SMP_LID, IB_METHOD_SET, IB_ATTR_PKEY_TABLE, 0, BADKEY, d,
			 out), 0);
	CHECK_EQ(link_n, 0);
	teardown();
}

/* The lease (14.2.4): a violation starts it, the key stops it, running out clears the
 * protection; a period of 0 never runs out. */
static void test_mkey_lease(void)
{
	uint8_t out[IB_MAD_LEN], d[IB_SMP_DATA_LEN] = { 0 };
	struct node *n = &nodes[0];
	const uint64_t s = 1000000000ull;
	struct ib_port_info pi;

	ib_setup();
	CHECK_EQ(set_mkey(n, 0, MKEY, 3, 5), 1);
	CHECK_EQ(smp_key(n, IB_MCLASS_SMP_LID, IB_METHOD_SET, IB_ATTR_PKEY_TABLE, 0, 0, d, out), 0);
	now += 5 * s - 1;
	CHECK_EQ(smp_key(n, IB_MCLASS_SMP_LID, IB_METHOD_GET, IB_ATTR_PORT_INFO, 1, 0, NULL, out),
		 0);
	now += 1;		/* five seconds after the first violation: protection gone */
	CHECK_EQ(smp_key(n, IB_MCLASS_SMP_LID, IB_METHOD_GET, IB_ATTR_PORT_INFO, 1, 0, NULL, out),
		 1);
	ib_port_info_unpack(out + IB_SMP_DATA, &pi);
	CHECK_EQ(pi.mkey_protect, 0);
	CHECK_EQ(pi.mkey, MKEY);			/* level 0: readable, as it is */
	CHECK_EQ(pi.mkey_violations, 2);
	/* the key still guards Sets (level 0) */
	CHECK_EQ(smp_key(n, IB_MCLASS_SMP_LID, IB_METHOD_SET, IB_ATTR_PKEY_TABLE, 0, 0, d, out), 0);
	CHECK_EQ(n->e.ib.pkeys[0], 0xffff);
	/* the SM comes back in time: its key stops the timer */
	CHECK_EQ(set_mkey(n, MKEY, MKEY, 3, 5), 1);
	CHECK_EQ(smp_key(n, IB_MCLASS_SMP_LID, IB_METHOD_SET, IB_ATTR_PKEY_TABLE, 0, 0, d, out), 0);
	now += 3 * s;
	(void)port_info(n, MKEY);
	now += 3 * s;
	CHECK_EQ(smp_key(n, IB_MCLASS_SMP_LID, IB_METHOD_GET, IB_ATTR_PORT_INFO, 1, 0, NULL, out),
		 0);
	now += 5 * s - 1;	/* that violation started it again */
	CHECK_EQ(smp_key(n, IB_MCLASS_SMP_LID, IB_METHOD_GET, IB_ATTR_PORT_INFO, 1, 0, NULL, out),
		 0);
	now += 1;
	CHECK_EQ(smp_key(n, IB_MCLASS_SMP_LID, IB_METHOD_GET, IB_ATTR_PORT_INFO, 1, 0, NULL, out),
		 1);
	/* no lease: protected for ever */
	CHECK_EQ(set_mkey(n, MKEY, MKEY, 2, 0), 1);
	CHECK_EQ(smp_key(n, IB_MCLASS_SMP_LID, IB_METHOD_GET, IB_ATTR_PORT_INFO, 1, 0, NULL, out),
		 0);
	now += 100000 * s;
	CHECK_EQ(smp_key(n, IB_MCLASS_SMP_LID, IB_METHOD_GET, IB_ATTR_PORT_INFO, 1, 0, NULL, out),
		 0);
	CHECK_EQ(port_info(n, MKEY).mkey_protect, 2);
	teardown();
}

/*
 * The driver's own Gets (its GID and P_Key caches) carry no key: MAD_IFC's "ignore M_Key"
 * answers them at every level, never with the key itself, and a Set with it still needs
 * the key.
 */
static void test_mkey_own_queries(void)
{
	uint8_t in[IB_MAD_LEN], out[IB_MAD_LEN], d[IB_SMP_DATA_LEN] = { 0 };
	struct node *n = &nodes[0];
	struct ib_port_info pi;

	ib_setup();
	CHECK_EQ(set_mkey(n, 0, MKEY, 3, 0), 1);
	smp(in, IB_MCLASS_SMP_LID, IB_METHOD_GET, IB_ATTR_PORT_INFO, 1);
	CHECK_EQ(qhca_mad_ifc(&n->e, in, out, false), 0);	/* from the fabric: dropped */
	CHECK_EQ(qhca_mad_ifc(&n->e, in, out, true), 1);
	CHECK_EQ(ib_get16(out + IB_MAD_STATUS), 0);
	ib_port_info_unpack(out + IB_SMP_DATA, &pi);
	CHECK_EQ(pi.mkey, 0);
	CHECK_EQ(pi.mkey_protect, 3);
	smp(in, IB_MCLASS_SMP_LID, IB_METHOD_GET, IB_ATTR_PKEY_TABLE, 0);
	CHECK_EQ(qhca_mad_ifc(&n->e, in, out, true), 1);
	CHECK_EQ(ib_get16(out + IB_SMP_DATA), 0xffff);
	smp(in, IB_MCLASS_SMP_LID, IB_METHOD_SET, IB_ATTR_PKEY_TABLE, 0);
	memcpy(in + IB_SMP_DATA, d, sizeof(d));
	CHECK_EQ(qhca_mad_ifc(&n->e, in, out, true), 0);
	CHECK_EQ(n->e.ib.pkeys[0], 0xffff);
	teardown();
}

/* MAD_IFC through @n's admin queue (command @i since set-up) with @handle: its status,
 * *@answered its result. */
static uint16_t mad_ifc_cmd(struct node *n, uint32_t i, uint32_t handle, const uint8_t *in,
			    uint8_t *out, uint32_t *answered)
{
	uint64_t buf = galloc(n, 2 * IB_MAD_LEN);
	struct qhca_cmd cmd = { .hdr = { .opcode = QHCA_CMD_MAD_IFC, .cmd_id = (uint16_t)i,
					 .len = sizeof(cmd.obj) } };
	struct qhca_cqe_admin *cqe = gptr(n, n->e.acq_base + (uint64_t)i * sizeof(*cqe));

	memcpy(gptr(n, buf), in, IB_MAD_LEN);
	cmd.obj = (struct qhca_cmd_obj){ .in_addr = buf, .in_len = IB_MAD_LEN, .handle = handle,
					 .out_addr = buf + IB_MAD_LEN, .out_len = IB_MAD_LEN };
	memcpy(gptr(n, n->e.asq_base + (uint64_t)i * QHCA_CMD_SIZE), &cmd, sizeof(cmd));
	qhca_engine_reg_write(&n->e, QHCA_REG_ASQ_TAIL, i + 1);
	CHECK_EQ(cqe->cmd_id, i);
	memcpy(out, gptr(n, buf + IB_MAD_LEN), IB_MAD_LEN);
	*answered = cqe->result0;
	return cqe->status;
}

/* The same through the admin command the driver uses, with and without the bit. */
static void test_mkey_own_queries_cmd(void)
{
	uint8_t in[IB_MAD_LEN], out[IB_MAD_LEN];
	struct node *n = &nodes[0];
	uint32_t answered = 7;

	ib_setup();
	CHECK_EQ(set_mkey(n, 0, MKEY, 3, 0), 1);
	smp(in, IB_MCLASS_SMP_LID, IB_METHOD_GET, IB_ATTR_GUID_INFO, 0);
	CHECK_EQ(mad_ifc_cmd(n, 0, 1, in, out, &answered), QHCA_ST_OK);
	CHECK_EQ(answered, 0);
	CHECK_EQ(mad_ifc_cmd(n, 1, 1 | QHCA_MAD_IFC_IGNORE_MKEY, in, out, &answered),
		 QHCA_ST_OK);
	CHECK_EQ(answered, 1);
	CHECK_EQ(ib_get64(out + IB_SMP_DATA), qhca_port_guid(&n->e));
	CHECK_EQ(mad_ifc_cmd(n, 2, 2 | QHCA_MAD_IFC_IGNORE_MKEY, in, out, &answered),
		 QHCA_ST_BAD_FIELD);	/* port 2: none */
	teardown();
}

/* ---------------------------------------------------------------- transport */
/* The last frame node @from put on the link (peeked before pump() delivers it). */
static const uint8_t *last_frame(void)
{
	return link_n ? link_at(link_n - 1)->data : NULL;
}

static void test_ib_rc(void)
{
	struct qp a, b;
	uint64_t lbuf, rbuf;
	uint32_t lkey, rkey;
	struct qhca_sq_wqe *w;
	const uint8_t *f;

	ib_setup();
	sm_bring_up();
	rc_pair(&a, &b, 65536, &lkey, &lbuf, &rkey, &rbuf, QHCA_ACCESS_ALL);
	fill(&nodes[0], lbuf, 65536, 3);
	w = sq_wqe(&a, QHCA_WR_RDMA_WRITE, 1, lbuf, 65536, lkey);
	w->remote_addr = rbuf;
	w->rkey = rkey;
	post_send(&a);
	f = last_frame();
	CHECK(f != NULL);
	if (f) {
		CHECK_EQ(f[0] >> 4, 0);			/* VL0 */
		CHECK_EQ(f[1] & 3, IB_LNH_LOCAL);
		CHECK_EQ(ib_get16(f + 2), 2);		/* DLID */
		CHECK_EQ(ib_get16(f + 6), 1);		/* SLID */
	}
	pump();
	expect_cqe(&nodes[0], &a.scq, 1, QHCA_WC_SUCCESS, QHCA_WC_RDMA_WRITE, UINT32_MAX);
	CHECK(same(&nodes[0], lbuf, &nodes[1], rbuf, 65536));
	CHECK_EQ(nodes[1].e.cnt.roce_rx_bad[ROCE_BAD_VCRC], 0);
	/* a port that is not ACTIVE sends nothing but SMPs: the WRITE is retried until the
	 * SM brings it back */
	CHECK_EQ(sm_set_port(&nodes[0], 1, 1, IB_PORT_DOWN), 0);
	w = sq_wqe(&a, QHCA_WR_RDMA_WRITE, 2, lbuf, 100, lkey);
	w->remote_addr = rbuf;
	w->rkey = rkey;
	post_send(&a);
	CHECK_EQ(link_n, 0);
	CHECK_EQ(sm_set_port(&nodes[0], 1, 1, IB_PORT_ARMED), 0);
	CHECK_EQ(sm_set_port(&nodes[0], 1, 1, IB_PORT_ACTIVE), 0);
	pump();
	expect_cqe(&nodes[0], &a.scq, 2, QHCA_WC_SUCCESS, QHCA_WC_RDMA_WRITE, UINT32_MAX);
	teardown();
}

static void ud_ready(struct qp *q, uint32_t qkey)
{
	struct qhca_qp_attr at;

	memset(&at, 0, sizeof(at));
	at.state = QHCA_QPS_INIT;
	at.qkey = qkey;
	CHECK_EQ(modify(q, QHCA_QP_STATE | QHCA_QP_QKEY, &at), QHCA_ST_OK);
	at.state = QHCA_QPS_RTR;
	CHECK_EQ(modify(q, QHCA_QP_STATE, &at), QHCA_ST_OK);
	at.state = QHCA_QPS_RTS;
	CHECK_EQ(modify(q, QHCA_QP_STATE | QHCA_QP_SQ_PSN, &at), QHCA_ST_OK);
}

/* A UD send of @len bytes to @dqpn at @dlid, with a GRH to @dgid if @dgid. */
static void ud_send(struct qp *q, uint64_t wr_id, uint64_t va, uint32_t len, uint32_t lkey,
		    uint16_t dlid, uint32_t dqpn, uint32_t qkey, const uint8_t *dgid)
{
	struct qhca_sq_wqe *w = sq_wqe(q, QHCA_WR_SEND, wr_id, va, len, lkey);
	struct qhca_ud_seg *ud;

	memmove((uint8_t *)w + 128, (uint8_t *)w + 64, 16);
	ud = (struct qhca_ud_seg *)((uint8_t *)w + 64);
	memset(ud, 0, sizeof(*ud));
	ud->av.dlid = dlid;
	ud->av.sl = 5;
	if (dgid) {
		ud->av.ib_flags = QHCA_AV_GRH;
		memcpy(ud->av.dgid, dgid, 16);
		memset(ud->av.sgid, 0xfe, 1);
		ud->av.hop_limit = 2;
	}
	ud->dqpn = dqpn;
	ud->qkey = qkey;
	post_send(q);
}

static void test_ib_ud(void)
{
	static const uint8_t mgid[16] = { 0xff, 0x12, 0x40, 0x1b, 0xff, 0xff, 0, 0, 0, 0, 0, 0,
					  0xff, 0xff, 0xff, 0xff };
	struct qhca_mcast m = { .mlid = 0xc001 };
	uint64_t lbuf, rbuf;
	uint32_t lkey, rkey;
	struct qhca_cqe c;
	struct qp a, b;
	int i;

	ib_setup();
	sm_bring_up();
	a = make_qp(&nodes[0], QHCA_QPT_UD, 0);
	b = make_qp(&nodes[1], QHCA_QPT_UD, 0);
	ud_ready(&a, 0x1111);
	ud_ready(&b, 0x1111);
	lkey = make_mr(&nodes[0], 8192, QHCA_ACCESS_LOCAL_WRITE, &lbuf);
	rkey = make_mr(&nodes[1], 8192, QHCA_ACCESS_LOCAL_WRITE, &rbuf);
	fill(&nodes[0], lbuf, 2000, 9);
	for (i = 0; i < 4; i++)
		post_recv(&b, 10 + i, rbuf + 2048 * i, 2048, rkey);
	/* without a GRH, then with one */
	ud_send(&a, 1, lbuf, 2000 - 40, lkey, 2, b.qpn, 0x1111, NULL);
	ud_send(&a, 2, lbuf, 100, lkey, 2, b.qpn, 0x1111, mgid);
	pump();
	expect_cqe(&nodes[0], &a.scq, 1, QHCA_WC_SUCCESS, QHCA_WC_SEND, UINT32_MAX);
	expect_cqe(&nodes[0], &a.scq, 2, QHCA_WC_SUCCESS, QHCA_WC_SEND, UINT32_MAX);
	CHECK(poll_cq(&nodes[1], &b.rcq, &c));
	CHECK_EQ(c.byte_len, 2000);
	CHECK_EQ(cqe_flags(&c) & (QHCA_CQE_FLAG_IB | QHCA_CQE_FLAG_GRH), QHCA_CQE_FLAG_IB);
	CHECK_EQ(c.ib.slid, 1);
	CHECK_EQ(c.ib.sl, 5);
	CHECK_EQ(QHCA_FIELD_GET(QHCA_CQE_SRC_QP_MASK, c.src_qp_flags), a.qpn);
	CHECK(same(&nodes[0], lbuf, &nodes[1], rbuf + 40, 2000 - 40));
	CHECK(poll_cq(&nodes[1], &b.rcq, &c));
	CHECK_EQ(cqe_flags(&c) & (QHCA_CQE_FLAG_IB | QHCA_CQE_FLAG_GRH),
		 QHCA_CQE_FLAG_IB | QHCA_CQE_FLAG_GRH);
	/* the GRH area holds the GRH: IPVer 6, NxtHdr 0x1b, the DGID */
	CHECK_EQ(*(uint8_t *)gptr(&nodes[1], va_to_gpa(rbuf + 2048)) >> 4, 6);
	CHECK_EQ(*(uint8_t *)gptr(&nodes[1], va_to_gpa(rbuf + 2048 + 6)), ROCE_GRH_NXTHDR);
	CHECK(!memcmp(gptr(&nodes[1], va_to_gpa(rbuf + 2048 + 24)), mgid, 16));
	/* to a LID that is not the peer's: dropped and counted */
	ud_send(&a, 3, lbuf, 10, lkey, 9, b.qpn, 0x1111, NULL);
	pump();
	expect_cqe(&nodes[0], &a.scq, 3, QHCA_WC_SUCCESS, QHCA_WC_SEND, UINT32_MAX);
	CHECK_EQ(nodes[1].e.cnt.ib_rx_bad_lid, 1);
	expect_empty(&nodes[1], &b.rcq);
	/* multicast: delivered to the attached QP, not after it detached */
	memcpy(m.gid, mgid, 16);
	CHECK_EQ(qhca_mcast_attach(&nodes[1].e, b.qpn, &m), QHCA_ST_OK);
	CHECK_EQ(qhca_mcast_attach(&nodes[1].e, b.qpn, &m), QHCA_ST_OK);	/* twice: ok */
	m.mlid = 0x12;
	CHECK_EQ(qhca_mcast_attach(&nodes[1].e, b.qpn, &m), QHCA_ST_BAD_FIELD);	/* unicast */
	m.mlid = 0xc001;
	ud_send(&a, 4, lbuf, 50, lkey, 0xc001, 0xffffff, 0x1111, mgid);
	pump();
	expect_cqe(&nodes[0], &a.scq, 4, QHCA_WC_SUCCESS, QHCA_WC_SEND, UINT32_MAX);
	CHECK(poll_cq(&nodes[1], &b.rcq, &c));
	CHECK_EQ(c.byte_len, 40 + 50);
	CHECK_EQ(c.ib.dlid_path_bits, 0);
	CHECK_EQ(qhca_mcast_detach(&nodes[1].e, b.qpn, &m), QHCA_ST_OK);
	CHECK_EQ(qhca_mcast_detach(&nodes[1].e, b.qpn, &m), QHCA_ST_BAD_FIELD);
	ud_send(&a, 5, lbuf, 50, lkey, 0xc001, 0xffffff, 0x1111, mgid);
	pump();
	expect_cqe(&nodes[0], &a.scq, 5, QHCA_WC_SUCCESS, QHCA_WC_SEND, UINT32_MAX);
	expect_empty(&nodes[1], &b.rcq);
	teardown();
}

/* QP0 sends on VL15 while the port is only INIT (no LID): the peer's QP0 takes it. */
static void test_ib_qp0(void)
{
	uint64_t lbuf, rbuf;
	uint32_t lkey, rkey;
	struct qhca_cqe c;
	struct qp a, b, u;
	const uint8_t *f;

	ib_setup();
	a = make_qp(&nodes[0], QHCA_QPT_SMI, 0);
	b = make_qp(&nodes[1], QHCA_QPT_SMI, 0);
	nodes[0].e.smi_qpn = a.qpn;	/* as the admin queue's CREATE_QP records it */
	nodes[1].e.smi_qpn = b.qpn;
	ud_ready(&a, 0);
	ud_ready(&b, 0);
	lkey = make_mr(&nodes[0], 4096, QHCA_ACCESS_LOCAL_WRITE, &lbuf);
	rkey = make_mr(&nodes[1], 4096, QHCA_ACCESS_LOCAL_WRITE, &rbuf);
	fill(&nodes[0], lbuf, 256, 1);
	post_recv(&b, 7, rbuf, 40 + 256, rkey);
	ud_send(&a, 1, lbuf, 256, lkey, IB_LID_PERMISSIVE, 0, 0x5555, NULL);
	f = last_frame();
	CHECK(f != NULL);
	if (f) {
		CHECK_EQ(f[0] >> 4, IB_VL_SMP);
		CHECK_EQ(ib_get16(f + 6), IB_LID_PERMISSIVE);	/* SLID */
	}
	pump();
	expect_cqe(&nodes[0], &a.scq, 1, QHCA_WC_SUCCESS, QHCA_WC_SEND, UINT32_MAX);
	CHECK(poll_cq(&nodes[1], &b.rcq, &c));
	CHECK_EQ(cqe_status(&c), QHCA_WC_SUCCESS);
	CHECK_EQ(c.byte_len, 40 + 256);
	CHECK_EQ(QHCA_FIELD_GET(QHCA_CQE_SRC_QP_MASK, c.src_qp_flags), 0);
	CHECK_EQ(c.ib.slid, IB_LID_PERMISSIVE);
	CHECK(same(&nodes[0], lbuf, &nodes[1], rbuf + 40, 256));
	/* an ordinary UD QP sends nothing while the port is not ACTIVE */
	u = make_qp(&nodes[0], QHCA_QPT_UD, 0);
	ud_ready(&u, 1);
	ud_send(&u, 2, lbuf, 8, lkey, 2, 0x10, 1, NULL);
	CHECK_EQ(link_n, 0);
	pump();
	teardown();
}

int main(int argc, char **argv)
{
	static const struct unit_test tests[] = {
		{ "vcrc_known_answer", test_vcrc_known_answer },
		{ "lrh_roundtrip", test_lrh_roundtrip },
		{ "crc_coverage", test_crc_coverage },
		{ "lrh_malformed", test_lrh_malformed },
		{ "sma", test_sma },
		{ "pma", test_pma },
		{ "mkey_levels", test_mkey_levels },
		{ "mkey_trap", test_mkey_trap },
		{ "mkey_lease", test_mkey_lease },
		{ "mkey_own_queries", test_mkey_own_queries },
		{ "mkey_own_queries_cmd", test_mkey_own_queries_cmd },
		{ "ib_rc", test_ib_rc },
		{ "ib_ud", test_ib_ud },
		{ "ib_qp0", test_ib_qp0 },
		{ NULL, NULL },
	};

	return harness_main(tests, argc, argv);
}
