// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * RoCE codec tests: every opcode round-trips over RoCEv2 IPv4 and IPv6 and over RoCE v1,
 * the ICRC matches an independently computed value and covers exactly what A17.3.3 says
 * (and for RoCE v1 what an InfiniBand packet with a GRH has), corrupted and truncated
 * frames are rejected, and ordinary Ethernet frames are left alone.
 */
#include <stdlib.h>
#include <string.h>

#include "ib.h"
#include "roce.h"
#include "unit.h"

static const uint8_t gid_a4[16] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 168, 77, 1 };
static const uint8_t gid_b4[16] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 168, 77, 2 };
static const uint8_t gid_a6[16] = { 0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x50, 0x54, 0, 0xff, 0xfe, 0x51, 0x48, 1 };
static const uint8_t gid_b6[16] = { 0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x50, 0x54, 0, 0xff, 0xfe, 0x51, 0x48, 2 };

static void base_pkt(struct roce_pkt *p, bool v6, uint8_t opcode)
{
	memset(p, 0, sizeof(*p));
	memcpy(p->dmac, "\x52\x54\x00\x51\x48\x02", 6);
	memcpy(p->smac, "\x52\x54\x00\x51\x48\x01", 6);
	memcpy(p->sgid, v6 ? gid_a6 : gid_a4, 16);
	memcpy(p->dgid, v6 ? gid_b6 : gid_b4, 16);
	p->ipv6 = v6;
	p->hop_limit = 64;
	p->tclass = 0x68;
	p->flow_label = v6 ? 0x12345 : 0;
	p->udp_sport = 0xc123;
	p->opcode = opcode;
	p->pkey = ROCE_DEFAULT_PKEY;
	p->dqpn = 0x000abc;
	p->psn = 0xfffffe;
}

static void test_every_opcode_round_trips(void)
{
	static uint8_t payload[5000], frame[6000];
	unsigned op, n = 0;
	int kind;

	for (op = 0; op < sizeof(payload); op++)
		payload[op] = (uint8_t)(op * 13 + 1);
	/* RoCEv2 over IPv4, over IPv6; RoCE v1 with IPv4-mapped GIDs, with IPv6 ones. */
	for (kind = 0; kind < 4; kind++) {
		bool v6 = kind & 1, v1 = kind >= 2;

		for (op = 0; op < 256; op++) {
			const struct roce_opcode_info *oi = roce_opcode_info((uint8_t)op);
			struct roce_pkt p, q;
			size_t len;
			uint32_t plen;

			if (!oi->flags)
				continue;
			for (plen = 0; plen <= 4097; plen += (oi->flags & ROCE_F_PAYLOAD) ? 1025 : 5000) {
				base_pkt(&p, v6, (uint8_t)op);
				p.grh = v1;
				p.se = op & 1;
				p.ackreq = true;
				p.reth_va = 0x1122334455667788ull;
				p.reth_rkey = 0xdeadbeef;
				p.reth_len = 0x10000;
				p.aeth_syndrome = 0x1f;
				p.aeth_msn = 0x123456;
				p.atomic_va = 0x8000000000000008ull;
				p.atomic_rkey = 0x42;
				p.atomic_swap_add = 7;
				p.atomic_compare = 9;
				p.atomic_orig = 0xfedcba9876543210ull;
				p.imm = 0xcafef00d;
				p.ieth_rkey = 0x77;
				p.deth_qkey = 0x11111111;
				p.deth_sqpn = 0x1234;
				p.xrc_srqn = 0xa5b6c7;
				p.payload = payload;
				p.payload_len = plen;
				len = roce_build(&p, frame, sizeof(frame));
				CHECK_EQ(len, roce_frame_len(&p));
				CHECK_EQ(len % 2, 0);
				CHECK_EQ(roce_parse(frame, len, &q), ROCE_OK);
				CHECK_EQ(q.opcode, op);
				CHECK_EQ(q.ipv6, v6 || v1);
				CHECK_EQ(q.grh, v1);
				CHECK_EQ(frame[12] << 8 | frame[13], v1 ? ROCE_ETHERTYPE_V1 :
					 v6 ? ROCE_ETHERTYPE_IPV6 : ROCE_ETHERTYPE_IPV4);
				CHECK_EQ(q.flow_label, p.flow_label);
				CHECK_EQ(q.psn, 0xfffffe);
				CHECK_EQ(q.dqpn, 0xabc);
				CHECK_EQ(q.se, op & 1);
				CHECK(q.ackreq);
				CHECK_EQ(q.hop_limit, 64);
				CHECK_EQ(q.tclass, 0x68);
				CHECK_EQ(q.payload_len, plen);
				CHECK(!memcmp(q.payload, payload, plen));
				CHECK(!memcmp(q.sgid, p.sgid, 16) && !memcmp(q.dgid, p.dgid, 16));
				if (oi->flags & ROCE_F_RETH)
					CHECK(q.reth_va == p.reth_va && q.reth_rkey == p.reth_rkey &&
					      q.reth_len == p.reth_len);
				if (oi->flags & ROCE_F_AETH)
					CHECK(q.aeth_syndrome == 0x1f && q.aeth_msn == 0x123456);
				if (oi->flags & ROCE_F_ATOMICETH)
					CHECK(q.atomic_va == p.atomic_va && q.atomic_swap_add == 7 &&
					      q.atomic_compare == 9 && q.atomic_rkey == 0x42);
				if (oi->flags & ROCE_F_ATOMICACKETH)
					CHECK(q.atomic_orig == p.atomic_orig);
				if (oi->flags & ROCE_F_IMMDT)
					CHECK_EQ(q.imm, 0xcafef00d);
				if (oi->flags & ROCE_F_IETH)
					CHECK_EQ(q.ieth_rkey, 0x77);
				if (oi->flags & ROCE_F_DETH)
					CHECK(q.deth_qkey == 0x11111111 && q.deth_sqpn == 0x1234);
				/* Every XRC request and no other packet carries an XRCETH. */
				CHECK_EQ(!!(oi->flags & ROCE_F_XRCETH),
					 (op & ROCE_TS_MASK) == ROCE_TS_XRC && (oi->flags & ROCE_F_REQ));
				if (oi->flags & ROCE_F_XRCETH)
					CHECK_EQ(q.xrc_srqn, 0xa5b6c7);
				n++;
			}
		}
	}
	/* 24 RC + 12 UC + 2 UD + 24 XRC opcodes, with and without payload, four times. */
	CHECK(n > 300);
	CHECK_EQ(roce_opcode_info(0x15)->flags, 0);	/* reserved */
	CHECK_EQ(roce_opcode_info(0x2c)->flags, 0);	/* UC has no RDMA READ */
	CHECK_EQ(roce_opcode_info(0x64)->hdr_len, 12 + 8);	/* UD SEND_ONLY: BTH + DETH */
	CHECK_EQ(roce_opcode_info(0x13)->hdr_len, 12 + 28);	/* COMPARE_SWAP */
	CHECK_EQ(roce_opcode_info(0x12)->hdr_len, 12 + 4 + 8);	/* ATOMIC_ACKNOWLEDGE */
	CHECK_EQ(roce_opcode_info(0xb3)->hdr_len, 12 + 4 + 28);	/* XRC COMPARE_SWAP */
	CHECK_EQ(roce_opcode_info(0xab)->hdr_len, 12 + 4 + 16 + 4);	/* XRC WRITE_ONLY_IMM */
	CHECK_EQ(roce_opcode_info(0xb1)->hdr_len, 12 + 4);	/* XRC ACKNOWLEDGE */
}

/*
 * A RoCEv2 RC SEND_ONLY, IPv4, 4-byte payload. The expected ICRC was computed with zlib's
 * crc32 in Python over 8 x 0xff + the IPv4 header (TOS, TTL, checksum = ones) + the UDP
 * header (checksum = ones) + the BTH (resv8a = ones) + payload: an implementation that
 * shares no code with this one.
 */
static void test_icrc_known_value(void)
{
	static const uint8_t payload[4] = { 'q', 'h', 'c', 'a' };
	uint8_t frame[128];
	struct roce_pkt p;
	size_t len;

	base_pkt(&p, false, ROCE_TS_RC | ROCE_OP_SEND_ONLY);
	p.psn = 0x10;
	p.payload = payload;
	p.payload_len = 4;
	len = roce_build(&p, frame, sizeof(frame));
	CHECK_EQ(len, 14 + 20 + 8 + 12 + 4 + 4);
	CHECK_EQ(frame[len - 4] | frame[len - 3] << 8 | frame[len - 2] << 16 |
		 (uint32_t)frame[len - 1] << 24, 0x67b9b6d6);
	/* The CRC itself: zlib's check value for "123456789". */
	CHECK_EQ(roce_crc32(0, "123456789", 9), 0xcbf43926);
	CHECK_EQ(roce_crc32_table(0, "123456789", 9), 0xcbf43926);
}

/*
 * The library's CRC (ISA-L or zlib, whichever the build found) agrees with the reference
 * table loop at every length and alignment, and when a buffer is fed in pieces.
 */
static void test_crc_library(void)
{
	static uint8_t buf[70000];
	uint32_t seed = 12345, len, off, ok = 1;

	printf("# CRC-32: %s\n", roce_crc32_impl);
	for (off = 0; off < sizeof(buf); off++) {
		seed = seed * 1103515245u + 12345u;
		buf[off] = (uint8_t)(seed >> 16);
	}
	for (len = 0; len < 300 && ok; len++)
		for (off = 0; off < 8 && ok; off++)
			ok = roce_crc32(0, buf + off, len) == roce_crc32_table(0, buf + off, len);
	CHECK(ok);
	CHECK_EQ(roce_crc32(0, buf, sizeof(buf)), roce_crc32_table(0, buf, sizeof(buf)));
	CHECK_EQ(roce_crc32(roce_crc32(0, buf, 1000), buf + 1000, sizeof(buf) - 1000),
		 roce_crc32_table(0, buf, sizeof(buf)));
	CHECK_EQ(roce_crc32(0xdeadbeef, buf, 4096), roce_crc32_table(0xdeadbeef, buf, 4096));
}

static void test_icrc_coverage(void)
{
	static const uint8_t payload[100] = { 1, 2, 3 };
	uint8_t frame[256], copy[256];
	struct roce_pkt p, q;
	size_t len, i;
	int v6;

	for (v6 = 0; v6 < 2; v6++) {
		base_pkt(&p, v6, ROCE_TS_RC | ROCE_OP_WRITE_ONLY);
		p.payload = payload;
		p.payload_len = sizeof(payload);
		len = roce_build(&p, frame, sizeof(frame));
		/* Any flipped bit from the UDP payload on is caught, but in the BTH's resv8a
		 * byte (FECN/BECN), which the ICRC leaves out. */
		for (i = 14 + (v6 ? 40 : 20) + 8; i < len; i++) {
			memcpy(copy, frame, len);
			copy[i] ^= 0x10;
			if (i == 14 + (v6 ? 40u : 20u) + 8 + 4)
				CHECK_EQ(roce_parse(copy, len, &q), ROCE_OK);
			else
				CHECK(roce_parse(copy, len, &q) != ROCE_OK);
		}
		/* The variant fields are outside the ICRC: a router may change them. */
		memcpy(copy, frame, len);
		if (v6) {
			copy[14 + 7] = 3;		/* hop limit */
			copy[14 + 1] ^= 0x0f;		/* flow label */
		} else {
			copy[14 + 8] = 3;		/* TTL */
			copy[14 + 1] = 0;		/* TOS */
			copy[14 + 10] = copy[14 + 11] = 0;
			/* recompute the IPv4 header checksum */
			{
				uint32_t sum = 0;
				uint16_t c;

				for (i = 0; i < 20; i += 2)
					sum += (uint32_t)copy[14 + i] << 8 | copy[14 + i + 1];
				while (sum >> 16)
					sum = (sum & 0xffff) + (sum >> 16);
				c = (uint16_t)~sum;
				copy[14 + 10] = c >> 8;
				copy[14 + 11] = (uint8_t)c;
			}
		}
		CHECK_EQ(roce_parse(copy, len, &q), ROCE_OK);
		/* A damaged IPv4 header checksum is an IP error. */
		if (!v6) {
			memcpy(copy, frame, len);
			copy[14 + 11] ^= 1;
			CHECK_EQ(roce_parse(copy, len, &q), ROCE_BAD_IP);
		}
	}
}

static void test_truncated_and_malformed(void)
{
	static const uint8_t payload[64];
	uint8_t frame[256], copy[256];
	struct roce_pkt p, q;
	size_t len, i;

	base_pkt(&p, false, ROCE_TS_RC | ROCE_OP_SEND_ONLY);
	p.payload = payload;
	p.payload_len = sizeof(payload);
	len = roce_build(&p, frame, sizeof(frame));
	for (i = 0; i < len; i++)
		CHECK(roce_parse(frame, i, &q) != ROCE_OK);
	/* Trailing bytes after the IP packet (Ethernet padding) are fine. */
	memcpy(copy, frame, len);
	memset(copy + len, 0, 10);
	CHECK_EQ(roce_parse(copy, len + 10, &q), ROCE_OK);
	/* Reserved opcode, transport version, fragments, options. */
	memcpy(copy, frame, len);
	copy[14 + 20 + 8] = 0x15;
	CHECK_EQ(roce_parse(copy, len, &q), ROCE_BAD_OPCODE);
	memcpy(copy, frame, len);
	copy[14 + 20 + 8 + 1] |= 1;
	CHECK_EQ(roce_parse(copy, len, &q), ROCE_BAD_OPCODE);
	memcpy(copy, frame, len);
	copy[14 + 6] |= 0x20;	/* more fragments */
	CHECK_EQ(roce_parse(copy, len, &q), ROCE_BAD_IP);
	memcpy(copy, frame, len);
	copy[14 + 4 + 0] = 0xff;	/* UDP length past the frame (udp len at 14+20+4) */
	copy[14 + 20 + 4] = 0xff;
	CHECK(roce_parse(copy, len, &q) != ROCE_OK);
	/* A payload on an ACKNOWLEDGE cannot be built. */
	base_pkt(&p, false, ROCE_TS_RC | ROCE_OP_ACKNOWLEDGE);
	p.payload = payload;
	p.payload_len = 8;
	CHECK_EQ(roce_build(&p, frame, sizeof(frame)), 0);
	/* Nor an IPv4 GID in an IPv6 packet, nor a too small buffer. */
	base_pkt(&p, true, ROCE_TS_RC | ROCE_OP_SEND_ONLY);
	memcpy(p.dgid, gid_b4, 16);
	CHECK_EQ(roce_build(&p, frame, sizeof(frame)), 0);
	base_pkt(&p, false, ROCE_TS_RC | ROCE_OP_SEND_ONLY);
	CHECK_EQ(roce_build(&p, frame, 20), 0);
}

/*
 * RoCE v1 (Annex A16): Ethertype 0x8915, a GRH, the BTH; its ICRC is the one an InfiniBand
 * packet with the same GRH and transport carries (the LRH counted as eight bytes of ones).
 */
static void test_rocev1(void)
{
	static const uint8_t payload[100] = { 1, 2, 3 };
	uint8_t frame[512], copy[512], ibpkt[512];
	struct roce_pkt p, q;
	size_t len, iblen, i;

	base_pkt(&p, true, ROCE_TS_UD | ROCE_OP_SEND_ONLY);
	p.grh = true;
	p.payload = payload;
	p.payload_len = sizeof(payload);
	p.deth_qkey = 0x11111111;
	len = roce_build(&p, frame, sizeof(frame));
	CHECK_EQ(len, 14 + 40 + 12 + 8 + 100 + 4);
	CHECK_EQ(frame[14] >> 4, 6);				/* IPVer 6 */
	CHECK_EQ(frame[14 + 6], ROCE_GRH_NXTHDR);
	CHECK_EQ(frame[14 + 4] << 8 | frame[14 + 5], len - 14 - 40);	/* PayLen */
	/* Computed with zlib's crc32 in Python over eight bytes of ones, the GRH with traffic
	 * class, flow label and hop limit as ones, the BTH with resv8a as ones and the rest:
	 * an implementation that shares no code with this one. */
	CHECK_EQ(roce_icrc_get(frame + len - 4), 0x995ab16b);
	p.ib = true;
	iblen = ib_build(&p, ibpkt, sizeof(ibpkt));
	CHECK_EQ(iblen, 8 + len - 14 + 2);
	/* The same GRH, transport headers, payload and ICRC as on an InfiniBand link. */
	CHECK(iblen > 10 && !memcmp(ibpkt + 8, frame + 14, len - 14));

	/* Ethernet's padding after the packet is fine; a short frame is not. */
	memcpy(copy, frame, len);
	memset(copy + len, 0, 20);
	CHECK_EQ(roce_parse(copy, len + 20, &q), ROCE_OK);
	CHECK(q.grh && q.ipv6 && q.payload_len == 100 && !memcmp(q.payload, payload, 100));
	CHECK(q.l3 == copy + 14);
	for (i = 14; i < len; i++)
		CHECK(roce_parse(frame, i, &q) != ROCE_OK);
	/*
	 * Every bit the ICRC covers is checked: all but the GRH's traffic class, flow label
	 * and hop limit and the BTH's resv8a, which it masks (and which may change in
	 * flight), and the Ethernet header, which the FCS covers.
	 */
	for (i = 14; i < len; i++) {
		bool masked = i - 14 < 4 || i - 14 == 7 || i - 14 == 40 + 4;

		memcpy(copy, frame, len);
		copy[i] ^= 0x01;	/* in byte 0: the traffic class, not the version */
		CHECK_EQ(roce_parse(copy, len, &q) == ROCE_OK, masked);
	}
	memcpy(copy, frame, len);
	copy[14 + 6] = 17;			/* not an IBA transport header */
	CHECK_EQ(roce_parse(copy, len, &q), ROCE_BAD_IP);
	memcpy(copy, frame, len);
	copy[14] = 0x40;			/* IPVer 4 */
	CHECK_EQ(roce_parse(copy, len, &q), ROCE_BAD_IP);
	memcpy(copy, frame, len);
	copy[14 + 4] = 0xff;			/* PayLen past the frame */
	CHECK_EQ(roce_parse(copy, len, &q), ROCE_BAD_LENGTH);
	memcpy(copy, frame, len);
	copy[14 + 4] = 0;
	copy[14 + 5] = 12;			/* too short for a BTH and an ICRC */
	CHECK_EQ(roce_parse(copy, len, &q), ROCE_BAD_LENGTH);
	/* roce_icrc_update mends a v1 frame as it does a v2 one. */
	memcpy(copy, frame, len);
	copy[len - 5] ^= 0xff;
	CHECK_EQ(roce_parse(copy, len, &q), ROCE_BAD_ICRC);
	CHECK(roce_icrc_update(copy, len));
	CHECK_EQ(roce_parse(copy, len, &q), ROCE_OK);
	CHECK(!roce_icrc_update(copy, 14 + 40));
}

static void test_not_roce(void)
{
	uint8_t f[128];
	struct roce_pkt q;

	memset(f, 0, sizeof(f));
	f[12] = 0x08;
	f[13] = 0x06;			/* ARP */
	CHECK_EQ(roce_parse(f, 60, &q), ROCE_NOT_ROCE);
	f[13] = 0x00;			/* IPv4 ... */
	f[14] = 0x45;
	f[14 + 9] = 6;			/* TCP */
	CHECK_EQ(roce_parse(f, 60, &q), ROCE_NOT_ROCE);
	f[14 + 9] = 17;			/* UDP to another port */
	f[14 + 20 + 2] = 0x00;
	f[14 + 20 + 3] = 53;
	CHECK_EQ(roce_parse(f, 60, &q), ROCE_NOT_ROCE);
	CHECK_EQ(roce_parse(f, 10, &q), ROCE_NOT_ROCE);
	/* A random flood never crashes and is never a valid packet. */
	{
		unsigned i, j;

		srand(1);
		for (i = 0; i < 20000; i++) {
			for (j = 0; j < sizeof(f); j++)
				f[j] = (uint8_t)rand();
			f[12] = 0x08;
			f[13] = 0;
			f[14] = 0x45;
			f[14 + 9] = 17;
			f[14 + 20 + 2] = 0x12;
			f[14 + 20 + 3] = 0xb7;	/* 4791 */
			CHECK(roce_parse(f, 14 + rand() % 114, &q) != ROCE_OK);
		}
	}
}

static const struct unit_test tests[] = {
	{ "every_opcode_round_trips", test_every_opcode_round_trips },
	{ "icrc_known_value", test_icrc_known_value },
	{ "crc_library", test_crc_library },
	{ "icrc_coverage", test_icrc_coverage },
	{ "truncated_and_malformed", test_truncated_and_malformed },
	{ "rocev1", test_rocev1 },
	{ "not_roce", test_not_roce },
	{}
};

int main(int argc, char **argv)
{
	return unit_main(tests, argc, argv);
}
