// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Fuzz target: qhca-fabric as an InfiniBand switch (fabric/ibswitch.c), in process: its
 * SMA on port 0 (LID-routed and directed-route SMPs, the M_Key check and its lease) and
 * its forwarding by LFT and MFT, over socketpairs as in tests/unit/test_ibswitch.c.
 *
 * The input's first byte sets the subnet up:
 *   bits 0-1  ports: 2, 4, 8 or 64 (FABRIC_MAX_PORTS), every one connected and ACTIVE
 *   bit 2     tables at their maximum (all 49151 unicast LIDs routed, LinearFDBTop at the
 *             top, every MLID to every port) instead of a small subnet (a LID per port,
 *             two groups)
 *   bit 3     the switch has an M_Key (FZ_MKEY), bits 4-5 its protection level, bit 6 a
 *             lease of one second
 * then records: ctl, port, a 2-byte length (little endian), that many bytes.
 *   ctl bit 7 clear: a packet into fabric port (port % ports):
 *     bit 1  the bytes are a MAD (zero padded to 256 bytes), built into a VL15 packet to
 *            QP0 with good CRCs, to the switch's LID if bit 2 is set, else to the
 *            permissive LID; bit 3 puts the right M_Key in it
 *     bit 1 clear: the bytes are the packet; bit 0 recomputes its ICRC and VCRC (so half
 *            of what the fuzzer makes gets past the parsers)
 *   ctl bit 7 set: bits 0-1 = 0: the SMA's clock advances by length x 10 ms; 1: the
 *     port's link goes down or back up; 2: every port's output is read (drained).
 *
 * The oracle beyond the sanitizers: while the switch has an M_Key, a packet that does not
 * hold the key anywhere in its bytes changes no table and no port (IBA 14.2.4: a SubnSet
 * with a wrong key changes nothing), whatever the protection level or the lease.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* The switch's own source: the fuzzer sets its tables up directly and checks them. */
#include "../../fabric/ibswitch.c"

#define FZ_MKEY		0x5a17c0de5eed0001ull
#define FZ_CONFIGS	8	/* 4 port counts x 2 table sizes */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

void fabric_log(const char *fmt, ...)
{
	(void)fmt;
}

static uint64_t fz_now;

static uint64_t fz_clock(void)
{
	return fz_now;
}

static const int fz_ports[4] = { 2, 4, 8, FABRIC_MAX_PORTS };
static struct fabric *fz_sw[4];
static int fz_peer[4][FABRIC_MAX_PORTS];
static struct fabric_ib *fz_tmpl[FZ_CONFIGS];
static struct fabric_ib fz_fresh[4];	/* each switch as fabric_attach left it */

/* A switch with @n ports, each connected to a socketpair whose other end the fuzzer
 * reads: made once, reused by every input (its IB state is reset from a template). */
static struct fabric *fz_switch(int pc)
{
	struct fabric *sw = fz_sw[pc];
	int i, n = fz_ports[pc];

	if (sw)
		return sw;
	sw = calloc(1, sizeof(*sw));
	if (!sw)
		abort();
	fabric_init(sw, n);
	sw->stall_ms = 0;			/* never disconnect a port */
	sw->queue_max = 256 << 10;
	if (fabric_ib_enable(sw, 0x525400fffefab001ull))
		abort();
	for (i = 0; i < n; i++) {
		int sv[2];

		if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
			abort();
		fcntl(sv[0], F_SETFL, O_NONBLOCK);
		fz_peer[pc][i] = sv[0];
		fabric_attach(sw, i, sv[1]);
	}
	fz_fresh[pc] = *sw->ib;
	fz_sw[pc] = sw;
	return sw;
}

/* The switch's state as an SM would have left it: every port ACTIVE, LIDs routed, groups
 * joined; at realistic or at maximum table sizes. */
static struct fabric_ib *fz_template(int pc, int max)
{
	struct fabric_ib **t = &fz_tmpl[pc * 2 + max], *ib;
	int i, n = fz_ports[pc];
	uint32_t l, m;

	if (*t)
		return *t;
	ib = malloc(sizeof(*ib));
	if (!ib)
		abort();
	memcpy(ib, &fz_fresh[pc], sizeof(*ib));	/* links up: fabric_attach saw to that */
	for (i = 1; i <= n; i++) {
		ib->port[i].state = IB_PORT_ACTIVE;
		ib->port[i].phys_state = IB_PHYS_LINK_UP;
	}
	ib->port[0].lid = (uint16_t)(n + 1);
	ib->port[0].sm_lid = 1;
	ib->port_state_change = 0;
	if (max) {
		for (l = 1; l < LFT_CAP; l++)
			ib->lft[l] = (uint8_t)(l % (uint32_t)(n + 1));
		ib->lft_top = LFT_CAP - 1;
		for (m = 0; m < MFT_CAP; m++)
			memset(ib->mft[m], 0xff, sizeof(ib->mft[m]));
	} else {
		for (l = 1; l <= (uint32_t)n; l++)
			ib->lft[l] = (uint8_t)l;
		ib->lft[n + 1] = 0;
		ib->lft_top = (uint16_t)(n + 1);
		ib->mft[0][0] = 0xfffe;			/* 0xc000: ports 1-15 */
		ib->mft[1][0] = 1u << 1 | 1u << 2;	/* 0xc001: ports 1 and 2 */
	}
	*t = ib;
	return ib;
}

/* Read everything the switch sent to its ports (and what it still had queued). */
static void fz_drain(struct fabric *sw, int pc)
{
	static uint8_t buf[1 << 16];
	int i, round;

	for (round = 0; round < 4; round++) {
		for (i = 0; i < sw->nports; i++)
			while (read(fz_peer[pc][i], buf, sizeof(buf)) > 0)
				;
		for (i = 0; i < sw->nports; i++)
			if (sw->port[i].out_len)
				fabric_flush(sw, i);
	}
}

/* What a packet without the M_Key must leave as it was. */
struct fz_snap {
	uint8_t lft[LFT_CAP];
	uint16_t mft[MFT_CAP][MFT_POSITIONS];
	uint16_t pkeys[32];
	uint8_t sl2vl[8], vl_arb[4][IB_SMP_DATA_LEN];
	uint16_t lft_top;
	uint8_t life;
	struct ib_port_info port[FABRIC_MAX_PORTS + 1];
};

static void fz_port_norm(struct ib_port_info *pi)
{
	/* what an SMP without the key may change: the violation count, the lease timer,
	 * ClientReregister read back by a Get; the protection bits are compared (their one
	 * legitimate change, to 0 when the lease ran out, is allowed where they are) */
	pi->mkey_violations = 0;
	pi->mkey_lease_end = 0;
	pi->client_rereg = 0;
}

static void fz_snap(const struct fabric *sw, struct fz_snap *s)
{
	const struct fabric_ib *ib = sw->ib;
	int i;

	memcpy(s->lft, ib->lft, sizeof(s->lft));
	memcpy(s->mft, ib->mft, sizeof(s->mft));
	memcpy(s->pkeys, ib->pkeys, sizeof(s->pkeys));
	memcpy(s->sl2vl, ib->sl2vl, sizeof(s->sl2vl));
	memcpy(s->vl_arb, ib->vl_arb, sizeof(s->vl_arb));
	s->lft_top = ib->lft_top;
	s->life = ib->life;
	memset(s->port, 0, sizeof(s->port));
	for (i = 0; i <= sw->nports; i++) {
		s->port[i] = ib->port[i];
		fz_port_norm(&s->port[i]);
	}
}

/* Does the packet hold @key (the switch's M_Key now: a Set with the key may change it)? */
static int has_key(const uint8_t *p, size_t len, uint64_t key)
{
	uint8_t k[8];
	size_t i;

	ib_put64(k, key);
	for (i = 0; i + 8 <= len; i++)
		if (!memcmp(p + i, k, 8))
			return 1;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t pkt[IB_MAX_PKT + 64];
	static struct fz_snap before, after;
	struct fabric *sw;
	struct ib_port_info *p0;
	uint8_t cfg;
	int pc, max, i;

	if (!size)
		return 0;
	cfg = data[0];
	data++;
	size--;
	pc = cfg & 3;
	max = !!(cfg & 4);
	fabric_ib_clock = fz_clock;
	fz_now = 1000000000ull;
	sw = fz_switch(pc);
	memcpy(sw->ib, fz_template(pc, max), sizeof(*sw->ib));
	for (i = 0; i < sw->nports; i++)
		sw->port[i].link_down = 0;
	p0 = &sw->ib->port[0];
	if (cfg & 8) {
		p0->mkey = FZ_MKEY;
		p0->mkey_protect = (cfg >> 4) & 3;
		p0->mkey_lease = cfg & 0x40 ? 1 : 0;
	}
	while (size >= 4) {
		uint8_t ctl = data[0];
		int port = data[1] % sw->nports;
		size_t len = (size_t)(data[2] | data[3] << 8), n;
		int oracle, expired;

		data += 4;
		size -= 4;
		if (len > size)
			len = size;
		if (ctl & 0x80) {
			switch (ctl & 3) {
			case 0:
				fz_now += len * 10000000ull;
				break;
			case 1:
				sw->port[port].link_down = !sw->port[port].link_down;
				fabric_ib_links(sw);
				break;
			default:
				fz_drain(sw, pc);
				break;
			}
			data += len;
			size -= len;
			continue;
		}
		if (ctl & 2) {
			uint8_t mad[IB_MAD_LEN] = { 0 };
			struct roce_pkt p;

			memcpy(mad, data, len < IB_MAD_LEN ? len : IB_MAD_LEN);
			if (ctl & 8)
				ib_put64(mad + IB_SMP_MKEY, FZ_MKEY);
			memset(&p, 0, sizeof(p));
			p.ib = true;
			p.vl = IB_VL_SMP;
			p.dlid = ctl & 4 ? p0->lid : IB_LID_PERMISSIVE;
			p.slid = ctl & 4 ? (uint16_t)(1 + port) : IB_LID_PERMISSIVE;
			p.opcode = ROCE_TS_UD | ROCE_OP_SEND_ONLY;
			p.pkey = 0xffff;
			p.payload = mad;
			p.payload_len = IB_MAD_LEN;
			n = ib_build(&p, pkt, sizeof(pkt));
		} else {
			n = len < sizeof(pkt) ? len : sizeof(pkt);
			memcpy(pkt, data, n);
			if (ctl & 1)
				ib_crc_update(pkt, n);
		}
		data += len;
		size -= len;
		oracle = p0->mkey && !has_key(pkt, n, p0->mkey);
		expired = p0->mkey_lease_end && fz_now >= p0->mkey_lease_end;
		if (oracle)
			fz_snap(sw, &before);
		fabric_forward(sw, port, pkt, n);
		if (oracle) {
			fz_snap(sw, &after);
			/* 14.2.4: a lease that ran out takes the protection away, and only that */
			if (expired && !after.port[0].mkey_protect)
				before.port[0].mkey_protect = 0;
			if (memcmp(&before, &after, sizeof(before))) {
				fprintf(stderr, "a packet without the M_Key changed the switch\n");
				abort();
			}
		}
	}
	fz_drain(sw, pc);
	return 0;
}
