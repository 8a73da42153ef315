// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Unit tests of qhca-fabric as an InfiniBand switch (fabric/ibswitch.c), driven over
 * socketpairs the way a subnet manager and two HCAs would: directed-route SMPs answered
 * and forwarded by the hop pointer rules, SwitchInfo's PortStateChange, PortInfo state
 * transitions, forwarding by the LFT and the MFT that the "SM" programs, data refused
 * between ports that are not ACTIVE, and corrupted packets dropped by the VCRC; the
 * switch's M_Key (protection levels, violations, the lease, Trap 256).
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fabric.h"
#include "ib.h"
#include "unit.h"

static struct fabric sw;
static int peer[4];
static uint64_t smp_mkey;	/* the M_Key the test's SMPs carry */
static uint64_t fake_now = 1000;

/* The switch SMA's clock (fabric_ib_clock). */
static uint64_t test_clock(void)
{
	return fake_now;
}

void fabric_log(const char *fmt, ...)
{
	(void)fmt;
}

static void setup(int nports)
{
	int i;

	fabric_init(&sw, nports);
	CHECK_EQ(fabric_ib_enable(&sw, 0x1122334455667788ull), 0);
	fabric_ib_clock = test_clock;
	smp_mkey = 0;
	for (i = 0; i < nports; i++) {
		int sv[2];

		CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
		fcntl(sv[0], F_SETFL, O_NONBLOCK);
		peer[i] = sv[0];
		fabric_attach(&sw, i, sv[1]);
	}
}

static void teardown(void)
{
	int i;

	for (i = 0; i < sw.nports; i++)
		close(peer[i]);
	fabric_close(&sw);
}

/* Send an IB packet into fabric port @port (as its HCA would); @bad_len: with a PktLen that
 * claims more than the frame holds. */
static void send_pkt(int port, const struct roce_pkt *p, int bad_len)
{
	uint8_t buf[4 + IB_MAX_PKT];
	size_t n = ib_build(p, buf + 4, sizeof(buf) - 4);

	CHECK(n > 0);
	if (bad_len)
		buf[4 + 5] += 8;
	buf[0] = buf[1] = 0;
	buf[2] = (uint8_t)(n >> 8);
	buf[3] = (uint8_t)n;
	CHECK_EQ(write(peer[port], buf, 4 + n), 4 + n);
	fabric_read(&sw, port);
}

/* The next packet that left fabric port @port, parsed into @p (its payload in @store). */
static int recv_pkt(int port, struct roce_pkt *p, uint8_t *store, size_t cap)
{
	uint8_t len[4];
	ssize_t n = recv(peer[port], len, 4, MSG_DONTWAIT);
	size_t l;

	if (n != 4)
		return 0;
	l = (size_t)len[2] << 8 | len[3];
	if (l > cap || recv(peer[port], store, l, MSG_DONTWAIT) != (ssize_t)l)
		return 0;
	return ib_parse(store, l, p) == ROCE_OK;
}

static void smp_pkt(struct roce_pkt *p, uint8_t *mad, uint16_t dlid, uint16_t slid)
{
	memset(p, 0, sizeof(*p));
	p->ib = true;
	p->vl = IB_VL_SMP;
	p->dlid = dlid;
	p->slid = slid;
	p->opcode = ROCE_TS_UD | ROCE_OP_SEND_ONLY;
	p->pkey = 0xffff;
	p->payload = mad;
	p->payload_len = IB_MAD_LEN;
}

/* A directed-route SMP as the SM's HCA sends it: hop_ptr already 1 (IBA 14.2.2.1). */
static void dr_mad(uint8_t *mad, uint8_t method, uint16_t attr, uint32_t mod,
		   const uint8_t *path, int hops)
{
	int i;

	memset(mad, 0, IB_MAD_LEN);
	mad[IB_MAD_BASE_VERSION] = 1;
	mad[IB_MAD_CLASS] = IB_MCLASS_SMP_DR;
	mad[IB_MAD_CLASS_VERSION] = 1;
	mad[IB_MAD_METHOD] = method;
	mad[IB_MAD_HOP_PTR] = 1;
	mad[IB_MAD_HOP_CNT] = (uint8_t)hops;
	ib_put64(mad + IB_MAD_TID, 0x77);
	ib_put64(mad + IB_SMP_MKEY, smp_mkey);
	ib_put16(mad + IB_MAD_ATTR_ID, attr);
	ib_put32(mad + IB_MAD_ATTR_MOD, mod);
	ib_put16(mad + IB_SMP_DR_SLID, IB_LID_PERMISSIVE);
	ib_put16(mad + IB_SMP_DR_DLID, IB_LID_PERMISSIVE);
	for (i = 1; i <= hops; i++)
		mad[IB_SMP_INITIAL_PATH + i] = path[i - 1];
}

/* Traps the switch sent to the SM (behind fabric port 0), and the last one's MAD. */
static int traps;
static uint8_t last_trap[IB_MAD_LEN];

static int trap_seen(const struct roce_pkt *p)
{
	if (p->payload_len != IB_MAD_LEN || p->payload[IB_MAD_METHOD] != IB_METHOD_TRAP)
		return 0;
	traps++;
	memcpy(last_trap, p->payload, IB_MAD_LEN);
	return 1;
}

/* Get or Set on the switch itself from fabric port 0 (one hop); the response's MAD. */
static int sm_switch(uint8_t method, uint16_t attr, uint32_t mod, const uint8_t *data,
		     uint8_t *resp)
{
	static const uint8_t path[] = { 1 };
	uint8_t mad[IB_MAD_LEN], store[IB_MAX_PKT];
	struct roce_pkt p;

	dr_mad(mad, method, attr, mod, path, 1);
	if (data)
		memcpy(mad + IB_SMP_DATA, data, IB_SMP_DATA_LEN);
	smp_pkt(&p, mad, IB_LID_PERMISSIVE, IB_LID_PERMISSIVE);
	send_pkt(0, &p, 0);
	do {
		if (!recv_pkt(0, &p, store, sizeof(store)) || p.payload_len != IB_MAD_LEN)
			return -1;
	} while (trap_seen(&p));
	memcpy(resp, p.payload, IB_MAD_LEN);
	CHECK_EQ(p.vl, IB_VL_SMP);
	CHECK_EQ(resp[IB_MAD_METHOD], IB_METHOD_GET_RESP);
	CHECK(ib_get16(resp + IB_MAD_STATUS) & IB_SMP_DIRECTION);
	CHECK_EQ(resp[IB_MAD_HOP_PTR], 1);
	return ib_get16(resp + IB_MAD_STATUS) & 0x7fff;
}

static void set_port_state(int num, uint8_t state)
{
	uint8_t r[IB_MAD_LEN], d[IB_SMP_DATA_LEN];
	struct ib_port_info pi;

	CHECK_EQ(sm_switch(IB_METHOD_GET, IB_ATTR_PORT_INFO, (uint32_t)num, NULL, r), 0);
	ib_port_info_unpack(r + IB_SMP_DATA, &pi);
	pi.state = state;
	ib_port_info_pack(&pi, d);
	CHECK_EQ(sm_switch(IB_METHOD_SET, IB_ATTR_PORT_INFO, (uint32_t)num, d, r), 0);
}

static void test_dr_smps(void)
{
	static const uint8_t path2[] = { 1, 2 };
	uint8_t r[IB_MAD_LEN], mad[IB_MAD_LEN], store[IB_MAX_PKT], d[IB_SMP_DATA_LEN];
	struct ib_port_info pi;
	struct roce_pkt p;

	setup(3);
	/* NodeInfo of the switch, one hop from the SM */
	CHECK_EQ(sm_switch(IB_METHOD_GET, IB_ATTR_NODE_INFO, 0, NULL, r), 0);
	CHECK_EQ(r[IB_SMP_DATA + 2], IB_NODE_SWITCH);
	CHECK_EQ(r[IB_SMP_DATA + 3], 3);
	CHECK_EQ(r[IB_SMP_DATA + 36], 1);			/* LocalPortNum: in port */
	CHECK_EQ(ib_get64(r + IB_SMP_DATA + 12), 0x1122334455667788ull);
	CHECK_EQ(r[IB_SMP_RETURN_PATH + 1], 1);
	/* the ports came up: INIT, and PortStateChange is set until the SM clears it */
	CHECK_EQ(sm_switch(IB_METHOD_GET, IB_ATTR_SWITCH_INFO, 0, NULL, r), 0);
	CHECK(r[IB_SMP_DATA + 11] & 0x04);
	memcpy(d, r + IB_SMP_DATA, sizeof(d));
	CHECK_EQ(sm_switch(IB_METHOD_SET, IB_ATTR_SWITCH_INFO, 0, d, r), 0);
	CHECK(!(r[IB_SMP_DATA + 11] & 0x04));
	CHECK_EQ(sm_switch(IB_METHOD_GET, IB_ATTR_PORT_INFO, 2, NULL, r), 0);
	ib_port_info_unpack(r + IB_SMP_DATA, &pi);
	CHECK_EQ(pi.state, IB_PORT_INIT);
	CHECK_EQ(pi.phys_state, IB_PHYS_LINK_UP);
	CHECK_EQ(sm_switch(IB_METHOD_GET, IB_ATTR_PORT_INFO, 4, NULL, r), IB_MAD_ST_BAD_VALUE);
	CHECK_EQ(sm_switch(IB_METHOD_GET, IB_ATTR_SM_INFO, 0, NULL, r), IB_MAD_ST_BAD_ATTR);
	/* two hops: through switch port 2 to the HCA there, and its answer back */
	dr_mad(mad, IB_METHOD_GET, IB_ATTR_NODE_INFO, 0, path2, 2);
	smp_pkt(&p, mad, IB_LID_PERMISSIVE, IB_LID_PERMISSIVE);
	send_pkt(0, &p, 0);
	CHECK(recv_pkt(1, &p, store, sizeof(store)));
	CHECK_EQ(p.payload[IB_MAD_HOP_PTR], 2);
	CHECK_EQ(p.payload[IB_SMP_RETURN_PATH + 1], 1);
	memcpy(mad, p.payload, IB_MAD_LEN);
	/* the HCA answers (its smi.c returned the hop pointer to hop_cnt) */
	ib_mad_make_resp(mad, 0);
	mad[IB_MAD_HOP_PTR] = 2;
	smp_pkt(&p, mad, IB_LID_PERMISSIVE, IB_LID_PERMISSIVE);
	send_pkt(1, &p, 0);
	CHECK(recv_pkt(0, &p, store, sizeof(store)));
	CHECK_EQ(p.payload[IB_MAD_HOP_PTR], 1);
	CHECK_EQ(ib_get64(p.payload + IB_MAD_TID), 0x77);
	/* a path through a port that does not exist goes nowhere */
	dr_mad(mad, IB_METHOD_GET, IB_ATTR_NODE_INFO, 0, (const uint8_t[]){ 1, 9 }, 2);
	smp_pkt(&p, mad, IB_LID_PERMISSIVE, IB_LID_PERMISSIVE);
	send_pkt(0, &p, 0);
	CHECK(!recv_pkt(0, &p, store, sizeof(store)));
	CHECK(!recv_pkt(1, &p, store, sizeof(store)));
	/* a port whose link goes down is DOWN, and the change is flagged */
	sw.port[2].link_down = 1;
	CHECK_EQ(sm_switch(IB_METHOD_GET, IB_ATTR_PORT_INFO, 3, NULL, r), 0);
	ib_port_info_unpack(r + IB_SMP_DATA, &pi);
	CHECK_EQ(pi.state, IB_PORT_DOWN);
	CHECK_EQ(sm_switch(IB_METHOD_GET, IB_ATTR_SWITCH_INFO, 0, NULL, r), 0);
	CHECK(r[IB_SMP_DATA + 11] & 0x04);
	/* a flap too quick for any SMP to see the port down still leaves its mark */
	memcpy(d, r + IB_SMP_DATA, sizeof(d));
	CHECK_EQ(sm_switch(IB_METHOD_SET, IB_ATTR_SWITCH_INFO, 0, d, r), 0);
	CHECK(!(r[IB_SMP_DATA + 11] & 0x04));
	sw.port[1].link_down = 1;
	fabric_ib_links(&sw);
	sw.port[1].link_down = 0;
	fabric_ib_links(&sw);
	CHECK_EQ(sm_switch(IB_METHOD_GET, IB_ATTR_SWITCH_INFO, 0, NULL, r), 0);
	CHECK(r[IB_SMP_DATA + 11] & 0x04);
	/* skipping ARMED is refused */
	CHECK_EQ(sm_switch(IB_METHOD_GET, IB_ATTR_PORT_INFO, 1, NULL, r), 0);
	ib_port_info_unpack(r + IB_SMP_DATA, &pi);
	pi.state = IB_PORT_ACTIVE;
	ib_port_info_pack(&pi, d);
	CHECK_EQ(sm_switch(IB_METHOD_SET, IB_ATTR_PORT_INFO, 1, d, r), IB_MAD_ST_BAD_VALUE);
	teardown();
}

static void data_pkt(struct roce_pkt *p, uint16_t dlid, uint16_t slid, uint8_t *payload)
{
	memset(p, 0, sizeof(*p));
	p->ib = true;
	p->dlid = dlid;
	p->slid = slid;
	p->opcode = ROCE_TS_UD | ROCE_OP_SEND_ONLY;
	p->pkey = 0xffff;
	p->dqpn = 0x10;
	p->payload = payload;
	p->payload_len = 64;
}

static void test_forwarding(void)
{
	uint8_t r[IB_MAD_LEN], d[IB_SMP_DATA_LEN], store[IB_MAX_PKT], payload[64] = { 1, 2, 3 };
	struct roce_pkt p;
	int i;

	setup(3);
	/* LIDs 1, 2, 3 behind ports 1, 2, 3; multicast LID 0xc001 to ports 2 and 3 */
	memset(d, 0xff, sizeof(d));
	d[1] = 1;
	d[2] = 2;
	d[3] = 3;
	CHECK_EQ(sm_switch(IB_METHOD_SET, IB_ATTR_LFT, 0, d, r), 0);
	CHECK_EQ(r[IB_SMP_DATA + 2], 2);
	memset(d, 0, sizeof(d));
	ib_put16(d + 2, 1u << 2 | 1u << 3);
	CHECK_EQ(sm_switch(IB_METHOD_SET, IB_ATTR_MFT, 0, d, r), 0);
	CHECK_EQ(sm_switch(IB_METHOD_GET, IB_ATTR_LFT, 768, NULL, r), IB_MAD_ST_BAD_VALUE);
	/* MFT positions past the ports (and past the 64 a mask holds) are refused */
	CHECK_EQ(sm_switch(IB_METHOD_SET, IB_ATTR_MFT, 1u << 28, d, r), IB_MAD_ST_BAD_VALUE);
	CHECK_EQ(sm_switch(IB_METHOD_SET, IB_ATTR_MFT, 5u << 28, d, r), IB_MAD_ST_BAD_VALUE);
	CHECK_EQ(sm_switch(IB_METHOD_GET, IB_ATTR_MFT, 15u << 28, NULL, r), IB_MAD_ST_BAD_VALUE);
	CHECK_EQ(sm_switch(IB_METHOD_SET, IB_ATTR_MFT, 32, d, r), IB_MAD_ST_BAD_VALUE);
	/* not ACTIVE yet: data is refused */
	data_pkt(&p, 2, 1, payload);
	send_pkt(0, &p, 0);
	CHECK(!recv_pkt(1, &p, store, sizeof(store)));
	for (i = 1; i <= 2; i++) {
		set_port_state(i, IB_PORT_ARMED);
		set_port_state(i, IB_PORT_ACTIVE);
	}
	data_pkt(&p, 2, 1, payload);
	send_pkt(0, &p, 0);
	CHECK(recv_pkt(1, &p, store, sizeof(store)));
	CHECK(!memcmp(p.payload, payload, 64));
	CHECK(!recv_pkt(2, &p, store, sizeof(store)));
	/* to port 3 (not ACTIVE), to a LID without a route, a bad PktLen: all dropped */
	data_pkt(&p, 3, 1, payload);
	send_pkt(0, &p, 0);
	data_pkt(&p, 9, 1, payload);
	send_pkt(0, &p, 0);
	data_pkt(&p, 2, 1, payload);
	send_pkt(0, &p, 1);
	CHECK(!recv_pkt(1, &p, store, sizeof(store)));
	CHECK(!recv_pkt(2, &p, store, sizeof(store)));
	CHECK_EQ(sw.port[0].rx_drops, 1);
	/* multicast: to the ACTIVE ports of the group but the one it came in by */
	data_pkt(&p, 0xc001, 1, payload);
	p.grh = true;
	p.dqpn = 0xffffff;
	send_pkt(0, &p, 0);
	CHECK(recv_pkt(1, &p, store, sizeof(store)));
	CHECK_EQ(p.dlid, 0xc001);
	CHECK(!recv_pkt(2, &p, store, sizeof(store)));
	teardown();
}

/* ---------------------------------------------------------------- M_Key (IBA 14.2.4) */
#define MKEY	0x0123456789abcdefull
#define BADKEY	0x0123456789abcdeeull

static struct ib_port_info switch_port(int num)
{
	uint8_t r[IB_MAD_LEN];
	struct ib_port_info pi;

	memset(&pi, 0, sizeof(pi));
	CHECK_EQ(sm_switch(IB_METHOD_GET, IB_ATTR_PORT_INFO, (uint32_t)num, NULL, r), 0);
	ib_port_info_unpack(r + IB_SMP_DATA, &pi);
	return pi;
}

/* As the SM: port 0's LID 2, SM LID 1 (LID 1 behind fabric port 0), M_Key @nkey with
 * protection @level and lease @lease; sent with the key in smp_mkey. */
static int switch_set_mkey(uint64_t nkey, uint8_t level, uint16_t lease)
{
	uint8_t r[IB_MAD_LEN], d[IB_SMP_DATA_LEN];
	struct ib_port_info pi = switch_port(0);

	pi.lid = 2;
	pi.sm_lid = 1;
	pi.mkey = nkey;
	pi.mkey_protect = level;
	pi.mkey_lease = lease;
	pi.state = IB_PORT_NOP;
	ib_port_info_pack(&pi, d);
	return sm_switch(IB_METHOD_SET, IB_ATTR_PORT_INFO, 0, d, r);
}

static void test_mkey_levels(void)
{
	uint8_t r[IB_MAD_LEN], d[IB_SMP_DATA_LEN], lft[IB_SMP_DATA_LEN], mad[IB_MAD_LEN];
	uint8_t store[IB_MAX_PKT];
	struct ib_port_info pi;
	struct roce_pkt p;
	unsigned level;
	uint16_t viol = 0;

	setup(3);
	memset(lft, 0xff, sizeof(lft));
	lft[1] = 1;
	lft[2] = 0;
	lft[3] = 2;
	CHECK_EQ(sm_switch(IB_METHOD_SET, IB_ATTR_LFT, 0, lft, r), 0);
	memset(d, 0, sizeof(d));
	ib_put16(d + 2, 1u << 2);
	CHECK_EQ(sm_switch(IB_METHOD_SET, IB_ATTR_MFT, 0, d, r), 0);
	set_port_state(1, IB_PORT_ARMED);
	for (level = 0; level < 4; level++) {
		int get_ok = level < 2, t = traps;
		uint16_t v0 = viol;

		smp_mkey = level ? MKEY : 0;
		CHECK_EQ(switch_set_mkey(MKEY, (uint8_t)level, 0), 0);
		smp_mkey = MKEY;
		pi = switch_port(0);
		CHECK_EQ(pi.mkey, MKEY);
		CHECK_EQ(pi.mkey_protect, level);
		/* Get without the key: levels 0, 1 answer (1 hides the key), 2, 3 drop it */
		smp_mkey = BADKEY;
		CHECK_EQ(sm_switch(IB_METHOD_GET, IB_ATTR_PORT_INFO, 0, NULL, r), get_ok ? 0 : -1);
		if (get_ok) {
			ib_port_info_unpack(r + IB_SMP_DATA, &pi);
			CHECK_EQ(pi.mkey, level ? 0 : MKEY);
			CHECK_EQ(pi.lid, 2);
		}
		CHECK_EQ(sm_switch(IB_METHOD_GET, IB_ATTR_LFT, 0, NULL, r), get_ok ? 0 : -1);
		viol += get_ok ? 0 : 2;
		/* Sets without the key: nothing changes, no answer, at every level */
		memset(d, 0, sizeof(d));
		CHECK_EQ(sm_switch(IB_METHOD_SET, IB_ATTR_PKEY_TABLE, 0, d, r), -1);
		memset(d, 1, sizeof(d));		/* every LID to port 1 */
		CHECK_EQ(sm_switch(IB_METHOD_SET, IB_ATTR_LFT, 0, d, r), -1);
		memset(d, 0xff, sizeof(d));
		CHECK_EQ(sm_switch(IB_METHOD_SET, IB_ATTR_MFT, 0, d, r), -1);
		CHECK_EQ(sm_switch(IB_METHOD_SET, IB_ATTR_SWITCH_INFO, 0, d, r), -1);
		smp_mkey = MKEY;
		pi = switch_port(1);
		smp_mkey = BADKEY;
		pi.state = IB_PORT_DOWN;
		ib_port_info_pack(&pi, d);
		CHECK_EQ(sm_switch(IB_METHOD_SET, IB_ATTR_PORT_INFO, 1, d, r), -1);
		pi.lid = 9;
		pi.mkey = 0;
		pi.mkey_protect = 0;
		pi.state = IB_PORT_NOP;
		ib_port_info_pack(&pi, d);
		CHECK_EQ(sm_switch(IB_METHOD_SET, IB_ATTR_PORT_INFO, 0, d, r), -1);
		viol += 6;
		/* a LID-routed Set to the switch's LID without the key: dropped too */
		dr_mad(mad, IB_METHOD_SET, IB_ATTR_LFT, 0, (const uint8_t[]){ 1 }, 1);
		mad[IB_MAD_CLASS] = IB_MCLASS_SMP_LID;
		memset(mad + IB_SMP_DATA, 3, IB_SMP_DATA_LEN);
		smp_pkt(&p, mad, 2, 1);
		send_pkt(0, &p, 0);
		viol++;
		while (recv_pkt(0, &p, store, sizeof(store)))
			CHECK(trap_seen(&p));
		/* one Trap 256 to the SM for each violation */
		CHECK_EQ(traps - t, viol - v0);
		smp_mkey = MKEY;
		pi = switch_port(0);
		CHECK_EQ(pi.lid, 2);
		CHECK_EQ(pi.mkey, MKEY);
		CHECK_EQ(pi.mkey_protect, level);
		CHECK_EQ(pi.mkey_violations, viol);
		CHECK_EQ(switch_port(1).state, IB_PORT_ARMED);
		CHECK_EQ(sm_switch(IB_METHOD_GET, IB_ATTR_PKEY_TABLE, 0, NULL, r), 0);
		CHECK_EQ(ib_get16(r + IB_SMP_DATA), 0xffff);
		CHECK_EQ(sm_switch(IB_METHOD_GET, IB_ATTR_LFT, 0, NULL, r), 0);
		CHECK(!memcmp(r + IB_SMP_DATA, lft, sizeof(lft)));
		CHECK_EQ(sm_switch(IB_METHOD_GET, IB_ATTR_MFT, 0, NULL, r), 0);
		CHECK_EQ(ib_get16(r + IB_SMP_DATA), 0);
		CHECK_EQ(ib_get16(r + IB_SMP_DATA + 2), 1u << 2);
		/* with the key: a LID-routed Get is answered, back by the LFT to LID 1 */
		dr_mad(mad, IB_METHOD_GET, IB_ATTR_NODE_INFO, 0, (const uint8_t[]){ 1 }, 1);
		mad[IB_MAD_CLASS] = IB_MCLASS_SMP_LID;
		smp_pkt(&p, mad, 2, 1);
		send_pkt(0, &p, 0);
		CHECK(recv_pkt(0, &p, store, sizeof(store)));
		CHECK_EQ(p.dlid, 1);
		CHECK_EQ(p.payload[IB_MAD_METHOD], IB_METHOD_GET_RESP);
	}
	/* the trap: LID-routed from the switch's LID to the SM's, Notice 256 */
	CHECK(traps > 0);
	CHECK_EQ(last_trap[IB_MAD_CLASS], IB_MCLASS_SMP_LID);
	CHECK_EQ(ib_get16(last_trap + IB_MAD_ATTR_ID), IB_ATTR_NOTICE);
	CHECK_EQ(ib_get64(last_trap + IB_SMP_MKEY), 0);
	CHECK_EQ(last_trap[IB_SMP_DATA], 0x80 | IB_NOTICE_SECURITY);
	CHECK_EQ(last_trap[IB_SMP_DATA + 3], IB_NODE_SWITCH);
	CHECK_EQ(ib_get16(last_trap + IB_SMP_DATA + 4), 256);
	CHECK_EQ(ib_get16(last_trap + IB_SMP_DATA + 6), 2);
	CHECK_EQ(ib_get64(last_trap + IB_SMP_DATA + 22), BADKEY);
	/* a directed-route SMP on its way through the switch is not the switch's to check */
	smp_mkey = BADKEY;
	dr_mad(mad, IB_METHOD_SET, IB_ATTR_PKEY_TABLE, 0, (const uint8_t[]){ 1, 2 }, 2);
	smp_pkt(&p, mad, IB_LID_PERMISSIVE, IB_LID_PERMISSIVE);
	send_pkt(0, &p, 0);
	CHECK(recv_pkt(1, &p, store, sizeof(store)));
	CHECK_EQ(ib_get64(p.payload + IB_SMP_MKEY), BADKEY);
	teardown();
}

static void test_mkey_lease(void)
{
	const uint64_t s = 1000000000ull;
	uint8_t r[IB_MAD_LEN];
	struct ib_port_info pi;

	setup(2);
	CHECK_EQ(switch_set_mkey(MKEY, 2, 2), 0);
	smp_mkey = BADKEY;
	CHECK_EQ(sm_switch(IB_METHOD_GET, IB_ATTR_NODE_INFO, 0, NULL, r), -1);
	fake_now += 2 * s - 1;
	CHECK_EQ(sm_switch(IB_METHOD_GET, IB_ATTR_NODE_INFO, 0, NULL, r), -1);
	fake_now += 1;
	CHECK_EQ(sm_switch(IB_METHOD_GET, IB_ATTR_PORT_INFO, 0, NULL, r), 0);
	ib_port_info_unpack(r + IB_SMP_DATA, &pi);
	CHECK_EQ(pi.mkey_protect, 0);
	CHECK_EQ(pi.mkey, MKEY);
	CHECK_EQ(pi.mkey_violations, 2);
	/* the key still guards Sets */
	CHECK_EQ(switch_set_mkey(0, 0, 0), -1);
	/* the SM's key stops a running lease */
	smp_mkey = MKEY;
	CHECK_EQ(switch_set_mkey(MKEY, 3, 2), 0);
	smp_mkey = BADKEY;
	CHECK_EQ(sm_switch(IB_METHOD_GET, IB_ATTR_NODE_INFO, 0, NULL, r), -1);
	smp_mkey = MKEY;
	fake_now += s;
	CHECK_EQ(switch_port(0).mkey_protect, 3);
	fake_now += 5 * s;
	smp_mkey = BADKEY;
	CHECK_EQ(sm_switch(IB_METHOD_GET, IB_ATTR_NODE_INFO, 0, NULL, r), -1);
	teardown();
}

int main(int argc, char **argv)
{
	static const struct unit_test tests[] = {
		{ "dr_smps", test_dr_smps },
		{ "forwarding", test_forwarding },
		{ "mkey_levels", test_mkey_levels },
		{ "mkey_lease", test_mkey_lease },
		{ NULL, NULL },
	};

	return unit_main(tests, argc, argv);
}
