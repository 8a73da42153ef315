// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * iWARP wire format tests: CRC32c against RFC 3720's vectors and a bitwise reference; TCP
 * segments and FPDUs of every opcode round-trip over IPv4 and IPv6; every corrupted byte
 * and every truncation is refused; hostile lengths are refused; the FPDU stream extractor
 * finds the same FPDUs however the stream is cut; MPA Request/Reply frames with and without
 * private data; and, where tshark is installed, a written exchange decodes cleanly.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "iwarp.h"
#include "unit.h"

static const uint8_t gid_a4[16] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 168, 77, 1 };
static const uint8_t gid_b4[16] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 168, 77, 2 };
static const uint8_t gid_a6[16] = { 0xfd, 0x51, 0x48, 0, 0, 0, 0, 0, 0x50, 0x54, 0, 0xff,
				    0xfe, 0x51, 0x48, 1 };
static const uint8_t gid_b6[16] = { 0xfd, 0x51, 0x48, 0, 0, 0, 0, 0, 0x50, 0x54, 0, 0xff,
				    0xfe, 0x51, 0x48, 2 };

static uint32_t rng_state = 1;

static uint32_t rng(void)
{
	rng_state = rng_state * 1103515245u + 12345u;
	return rng_state >> 8;
}

static void fill(uint8_t *p, size_t n, uint32_t seed)
{
	size_t i;

	for (i = 0; i < n; i++)
		p[i] = (uint8_t)(i * 31 + seed * 7 + (i >> 8));
}

/* Bit at a time, as RFC 3385 defines it: the reference the tables are held to. */
static uint32_t crc32c_bitwise(const uint8_t *p, size_t n)
{
	uint32_t c = 0xffffffffu;
	int k;

	while (n--) {
		c ^= *p++;
		for (k = 0; k < 8; k++)
			c = c & 1 ? (c >> 1) ^ 0x82f63b78u : c >> 1;
	}
	return ~c;
}

/* RFC 1071, written apart from iwarp.c's: 16 bits at a time, folded at the end. */
static uint16_t ref_csum(const uint8_t *p, size_t n, uint32_t sum)
{
	size_t i;

	for (i = 0; i + 1 < n; i += 2)
		sum += (uint32_t)(p[i] << 8 | p[i + 1]);
	if (n & 1)
		sum += (uint32_t)p[n - 1] << 8;
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)~sum;
}

static void base_seg(struct iw_tcp_seg *s, bool v6)
{
	memset(s, 0, sizeof(*s));
	memcpy(s->dmac, "\x52\x54\x00\x51\x48\x02", 6);
	memcpy(s->smac, "\x52\x54\x00\x51\x48\x01", 6);
	memcpy(s->sgid, v6 ? gid_a6 : gid_a4, 16);
	memcpy(s->dgid, v6 ? gid_b6 : gid_b4, 16);
	s->ipv6 = v6;
	s->hop_limit = 64;
	s->tclass = 0x28;
	s->flow_label = v6 ? 0xabcde : 0;
	s->ip_id = v6 ? 0 : 0x1234;
	s->sport = 40001;
	s->dport = 20049;
	s->seq = 0xfffffff0u;
	s->ack = 0x01020304;
	s->flags = IW_TCP_ACK | IW_TCP_PSH;
	s->window = 0xfaf0;
}

/* Every field an opcode carries, set to something recognisable. */
static void base_pkt(struct iw_pkt *p, uint8_t op)
{
	static const uint8_t ddp_copy[18] = { 0x41, 0x43, 0, 0, 0, 0, 0, 0, 0, 0,
					      0, 0, 0, 7, 0, 0, 0, 0 };
	static const uint8_t rreq_copy[28] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10 };

	memset(p, 0, sizeof(*p));
	p->opcode = op;
	p->last = true;
	p->stag = 0x12345678;
	p->to = 0xfedcba9876543210ull;
	p->msn = 0x80000001u;
	p->mo = 0x00010000;
	p->inval_stag = 0xcafe0001;
	p->sink_stag = 0x0badf00d;
	p->sink_to = 0x1122334455667788ull;
	p->read_size = 0x00100000;
	p->src_stag = 0x5a5a0101;
	p->src_to = 0x8000000000000000ull;
	if (op == IW_OP_TERMINATE) {
		p->term_layer = IW_TERM_LAYER_RDMAP;
		p->term_etype = 1;
		p->term_ecode = 2;
		p->term_m = p->term_d = p->term_r = true;
		p->term_ddp_seg_len = 0x1234;
		p->term_ddp_hdr = ddp_copy;
		p->term_ddp_hdr_len = sizeof(ddp_copy);
		p->term_rdma_hdr = rreq_copy;
		p->term_rdma_hdr_len = sizeof(rreq_copy);
	}
}

static void check_pkt_fields(const struct iw_pkt *p, const struct iw_pkt *q)
{
	const struct iw_opcode_info *oi = iw_opcode_info(p->opcode);

	CHECK_EQ(q->opcode, p->opcode);
	CHECK_EQ(q->last, p->last);
	if (oi->flags & IW_F_TAGGED) {
		CHECK_EQ(q->stag, p->stag);
		CHECK_EQ(q->to, p->to);
	} else {
		CHECK_EQ(q->qn, oi->qn);
		CHECK_EQ(q->msn, p->msn);
		CHECK_EQ(q->mo, p->mo);
		CHECK_EQ(q->inval_stag, oi->flags & IW_F_INVAL ? p->inval_stag : 0);
	}
	if (oi->flags & IW_F_READ_REQ) {
		CHECK_EQ(q->sink_stag, p->sink_stag);
		CHECK_EQ(q->sink_to, p->sink_to);
		CHECK_EQ(q->read_size, p->read_size);
		CHECK_EQ(q->src_stag, p->src_stag);
		CHECK_EQ(q->src_to, p->src_to);
	}
	if (oi->flags & IW_F_TERMINATE) {
		CHECK_EQ(q->term_layer, p->term_layer);
		CHECK_EQ(q->term_etype, p->term_etype);
		CHECK_EQ(q->term_ecode, p->term_ecode);
		CHECK(q->term_m == p->term_m && q->term_d == p->term_d && q->term_r == p->term_r);
		CHECK_EQ(q->term_ddp_seg_len, p->term_m ? p->term_ddp_seg_len : 0);
		CHECK_EQ(q->term_ddp_hdr_len, p->term_ddp_hdr_len);
		CHECK(!p->term_ddp_hdr_len ||
		      !memcmp(q->term_ddp_hdr, p->term_ddp_hdr, p->term_ddp_hdr_len));
		CHECK_EQ(q->term_rdma_hdr_len, p->term_rdma_hdr_len);
		CHECK(!p->term_rdma_hdr_len ||
		      !memcmp(q->term_rdma_hdr, p->term_rdma_hdr, p->term_rdma_hdr_len));
	} else {
		CHECK_EQ(q->payload_len, p->payload_len);
		CHECK(!p->payload_len || !memcmp(q->payload, p->payload, p->payload_len));
	}
}

/* ---------------------------------------------------------------- CRC32c */
static void test_crc32c_vectors(void)
{
	/* RFC 3720 B.4: the bytes as sent, least significant first, read as the CRC value */
	static const uint8_t scsi_read[48] = {
		0x01, 0xc0, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
		0x00, 0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0x00,
		0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00, 0x18, 0x28, 0x00, 0x00, 0x00,
		0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
	};
	uint8_t b[32];
	int i;

	memset(b, 0, sizeof(b));
	CHECK_EQ(iw_crc32c(0, b, 32), 0x8a9136aa);		/* aa 36 91 8a */
	memset(b, 0xff, sizeof(b));
	CHECK_EQ(iw_crc32c(0, b, 32), 0x62a8ab43);		/* 43 ab a8 62 */
	for (i = 0; i < 32; i++)
		b[i] = (uint8_t)i;
	CHECK_EQ(iw_crc32c(0, b, 32), 0x46dd794e);		/* 4e 79 dd 46 */
	for (i = 0; i < 32; i++)
		b[i] = (uint8_t)(31 - i);
	CHECK_EQ(iw_crc32c(0, b, 32), 0x113fdb5c);		/* 5c db 3f 11 */
	CHECK_EQ(iw_crc32c(0, scsi_read, 48), 0xd9963a56);	/* 56 3a 96 d9 */
	CHECK_EQ(iw_crc32c(0, "123456789", 9), 0xe3069283);	/* the catalogue's check */
	CHECK_EQ(iw_crc32c(0, "", 0), 0);
	CHECK_EQ(crc32c_bitwise(scsi_read, 48), 0xd9963a56);
	CHECK_EQ(iw_crc32c_table(0, scsi_read, 48), 0xd9963a56);
	CHECK_EQ(iw_crc32c_table(0, "123456789", 9), 0xe3069283);
}

/* The slice-by-8 tables and iw_crc32c() (ISA-L, where built with it) agree with the
 * bitwise definition at every length and alignment, and when the buffer comes in pieces. */
static void test_crc32c_slices(void)
{
	static uint8_t buf[70000];
	size_t len, off, cut;
	int bad = 0;

	printf("# CRC32c: %s\n", iw_crc32c_impl);
	fill(buf, sizeof(buf), 3);
	for (len = 0; len < 300; len++) {
		for (off = 0; off < 8; off++) {
			uint32_t want = crc32c_bitwise(buf + off, len);

			bad += iw_crc32c(0, buf + off, len) != want;
			bad += iw_crc32c_table(0, buf + off, len) != want;
		}
	}
	CHECK_EQ(bad, 0);
	CHECK_EQ(iw_crc32c(0, buf, sizeof(buf)), crc32c_bitwise(buf, sizeof(buf)));
	CHECK_EQ(iw_crc32c_table(0, buf, sizeof(buf)), crc32c_bitwise(buf, sizeof(buf)));
	for (cut = 0; cut < 40; cut++) {
		uint32_t want = crc32c_bitwise(buf + 1, 3000);

		bad += iw_crc32c(iw_crc32c(0, buf + 1, cut), buf + 1 + cut, 3000 - cut) != want;
		bad += iw_crc32c_table(iw_crc32c(0, buf + 1, cut), buf + 1 + cut, 3000 - cut) !=
		       want;
		bad += iw_crc32c(iw_crc32c_table(0, buf + 1, cut), buf + 1 + cut, 3000 - cut) !=
		       want;
	}
	CHECK_EQ(bad, 0);
}

/* ---------------------------------------------------------------- TCP */
static void test_tcp_round_trips(void)
{
	static uint8_t payload[70000], frame[70100];
	static const uint32_t lens[] = { 0, 1, 3, 1448, 9000, 65535 - 20 - 40 };
	unsigned v6, opt, li;

	fill(payload, sizeof(payload), 1);
	for (v6 = 0; v6 < 2; v6++) {
		for (opt = 0; opt < 32; opt++) {
			for (li = 0; li < sizeof(lens) / sizeof(lens[0]); li++) {
				struct iw_tcp_seg s, q;
				size_t len;

				base_seg(&s, v6);
				s.mss = opt & 1 ? 1460 : 0;
				s.has_wscale = opt & 2;
				s.wscale = 7;
				s.sack_perm = opt & 4;
				s.has_ts = opt & 8;
				s.ts_val = 0x11223344;
				s.ts_ecr = 0x55667788;
				s.flags = opt & 16 ? IW_TCP_SYN : IW_TCP_ACK | IW_TCP_FIN;
				s.urg_ptr = opt & 16 ? 0 : 0x77;
				s.payload = payload;
				s.payload_len = lens[li];
				len = iw_tcp_build(&s, frame, sizeof(frame));
				if (!v6 && lens[li] > 65535 - 20 - 20 - iw_tcp_opt_len(&s)) {
					CHECK_EQ(len, 0);	/* over an IPv4 packet's 64 KiB */
					continue;
				}
				CHECK_EQ(len, iw_tcp_frame_len(&s));
				CHECK_EQ(iw_tcp_opt_len(&s) % 4, 0);
				if (iw_tcp_parse(frame, len, &q) != IW_OK) {
					CHECK(!"round trip refused");
					continue;
				}
				CHECK(!memcmp(q.dmac, s.dmac, 6) && !memcmp(q.smac, s.smac, 6));
				CHECK(!memcmp(q.sgid, s.sgid, 16) && !memcmp(q.dgid, s.dgid, 16));
				CHECK_EQ(q.ipv6, v6);
				CHECK_EQ(q.hop_limit, 64);
				CHECK_EQ(q.tclass, 0x28);
				CHECK_EQ(q.flow_label, s.flow_label);
				CHECK_EQ(q.ip_id, s.ip_id);
				CHECK(q.sport == 40001 && q.dport == 20049);
				CHECK(q.seq == s.seq && q.ack == s.ack);
				CHECK_EQ(q.flags, s.flags);
				CHECK_EQ(q.window, 0xfaf0);
				CHECK_EQ(q.urg_ptr, s.urg_ptr);
				CHECK_EQ(q.mss, s.mss);
				CHECK_EQ(q.has_wscale, s.has_wscale);
				CHECK_EQ(q.wscale, s.has_wscale ? 7 : 0);
				CHECK_EQ(q.sack_perm, s.sack_perm);
				CHECK_EQ(q.has_ts, s.has_ts);
				CHECK_EQ(q.ts_val, s.has_ts ? s.ts_val : 0);
				CHECK_EQ(q.ts_ecr, s.has_ts ? s.ts_ecr : 0);
				CHECK_EQ(q.payload_len, s.payload_len);
				CHECK(!memcmp(q.payload, payload, s.payload_len));
				CHECK_EQ(q.payload - frame, iw_tcp_hdr_len(&s));
			}
		}
	}
}

/* The checksums iw_tcp_build() writes are the ones an independent RFC 1071 sum gives. */
static void test_tcp_checksums(void)
{
	static const uint8_t payload[77] = { 'q', 'h', 'c', 'a' };
	uint8_t frame[300], ph[40];
	struct iw_tcp_seg s;
	size_t len, tcp_len;
	unsigned v6;

	for (v6 = 0; v6 < 2; v6++) {
		const uint8_t *l3 = frame + 14, *tcp = l3 + (v6 ? 40 : 20);
		uint32_t sum = 0;
		size_t i;

		base_seg(&s, v6);
		s.mss = 1460;
		s.payload = payload;
		s.payload_len = sizeof(payload);
		len = iw_tcp_build(&s, frame, sizeof(frame));
		tcp_len = len - (size_t)(tcp - frame);
		if (!v6) {
			CHECK_EQ(ref_csum(l3, 20, 0), 0);
			memcpy(ph, l3 + 12, 8);
			ph[8] = 0;
			ph[9] = 6;
			ph[10] = (uint8_t)(tcp_len >> 8);
			ph[11] = (uint8_t)tcp_len;
			for (i = 0; i < 12; i += 2)
				sum += (uint32_t)(ph[i] << 8 | ph[i + 1]);
		} else {
			memcpy(ph, l3 + 8, 32);
			for (i = 0; i < 32; i += 2)
				sum += (uint32_t)(ph[i] << 8 | ph[i + 1]);
			sum += (uint32_t)tcp_len + 6;
		}
		CHECK_EQ(ref_csum(tcp, tcp_len, sum), 0);
	}
}

/*
 * Every single-bit error from the IP header to the end is refused, but in the fields no
 * checksum covers: IPv6 traffic class, flow label and hop limit. Every truncation is
 * refused; Ethernet padding is not an error.
 */
static void test_tcp_corruption(void)
{
	static const uint8_t payload[61] = { 9, 8, 7 };
	uint8_t frame[300], copy[300];
	struct iw_tcp_seg s, q;
	size_t len, i;
	unsigned v6, bit;
	int missed = 0;

	for (v6 = 0; v6 < 2; v6++) {
		base_seg(&s, v6);
		s.has_ts = true;
		s.payload = payload;
		s.payload_len = sizeof(payload);
		len = iw_tcp_build(&s, frame, sizeof(frame));
		for (i = 14; i < len; i++) {
			if (v6 && (i - 14 < 4 || i - 14 == 7))
				continue;
			for (bit = 0; bit < 8; bit++) {
				memcpy(copy, frame, len);
				copy[i] ^= (uint8_t)(1 << bit);
				missed += iw_tcp_parse(copy, len, &q) == IW_OK;
			}
		}
		for (i = 0; i < len; i++)
			missed += iw_tcp_parse(frame, i, &q) == IW_OK;
		memcpy(copy, frame, len);
		memset(copy + len, 0xee, 20);
		CHECK_EQ(iw_tcp_parse(copy, len + 20, &q), IW_OK);
		CHECK_EQ(q.payload_len, sizeof(payload));
	}
	CHECK_EQ(missed, 0);
}

/* Recompute the IPv4 header checksum of @frame after an edit. */
static void ip4_recsum(uint8_t *frame)
{
	uint16_t c;

	frame[14 + 10] = frame[14 + 11] = 0;
	c = ref_csum(frame + 14, 20, 0);
	frame[14 + 10] = (uint8_t)(c >> 8);
	frame[14 + 11] = (uint8_t)c;
}

static void test_tcp_malformed(void)
{
	uint8_t frame[300], copy[300];
	struct iw_tcp_seg s, q;
	size_t len;

	base_seg(&s, false);
	s.mss = 1460;
	len = iw_tcp_build(&s, frame, sizeof(frame));
	/* not TCP: ARP, UDP, an IPv6 extension header, too short for an IP header */
	memcpy(copy, frame, len);
	copy[13] = 0x06;
	CHECK_EQ(iw_tcp_parse(copy, len, &q), IW_NOT_TCP);
	memcpy(copy, frame, len);
	copy[14 + 9] = 17;
	CHECK_EQ(iw_tcp_parse(copy, len, &q), IW_NOT_TCP);
	CHECK_EQ(iw_tcp_parse(frame, 20, &q), IW_NOT_TCP);
	/* fragments (more fragments, an offset) and IP options are refused as roce.c refuses
	 * them, even behind a good header checksum; DF alone is fine */
	memcpy(copy, frame, len);
	copy[14 + 6] |= 0x20;
	ip4_recsum(copy);
	CHECK_EQ(iw_tcp_parse(copy, len, &q), IW_BAD_IP);
	memcpy(copy, frame, len);
	copy[14 + 7] = 1;
	ip4_recsum(copy);
	CHECK_EQ(iw_tcp_parse(copy, len, &q), IW_BAD_IP);
	memcpy(copy, frame, len);
	copy[14 + 6] = 0x10;
	ip4_recsum(copy);
	CHECK_EQ(iw_tcp_parse(copy, len, &q), IW_BAD_IP);
	memcpy(copy, frame, len);
	copy[14 + 6] = 0;
	ip4_recsum(copy);
	CHECK_EQ(iw_tcp_parse(copy, len, &q), IW_OK);
	memcpy(copy, frame, len);
	copy[14] = 0x46;
	ip4_recsum(copy);
	CHECK_EQ(iw_tcp_parse(copy, len, &q), IW_BAD_IP);
	/* an IPv4 total length past the frame, or shorter than its header */
	memcpy(copy, frame, len);
	copy[14 + 3] += 1;
	ip4_recsum(copy);
	CHECK_EQ(iw_tcp_parse(copy, len, &q), IW_BAD_LENGTH);
	memcpy(copy, frame, len);
	copy[14 + 2] = 0;
	copy[14 + 3] = 19;
	ip4_recsum(copy);
	CHECK_EQ(iw_tcp_parse(copy, len, &q), IW_BAD_LENGTH);
	/* a zero port */
	base_seg(&s, false);
	s.sport = 0;
	len = iw_tcp_build(&s, copy, sizeof(copy));
	CHECK_EQ(iw_tcp_parse(copy, len, &q), IW_BAD_TCP);
	base_seg(&s, false);
	s.mss = 1460;
	len = iw_tcp_build(&s, frame, sizeof(frame));
	/* a bad checksum is named as such */
	memcpy(copy, frame, len);
	copy[len - 1] ^= 1;
	CHECK_EQ(iw_tcp_parse(copy, len, &q), IW_BAD_CHECKSUM);
	/* cannot build: mixed address families, no room */
	memcpy(s.dgid, gid_b6, 16);
	CHECK_EQ(iw_tcp_build(&s, frame, sizeof(frame)), 0);
	base_seg(&s, true);
	memcpy(s.sgid, gid_a4, 16);
	CHECK_EQ(iw_tcp_build(&s, frame, sizeof(frame)), 0);
	base_seg(&s, true);
	CHECK_EQ(iw_tcp_build(&s, frame, 14 + 40 + 19), 0);
	CHECK_EQ(iw_tcp_build(&s, frame, 14 + 40 + 20), 14 + 40 + 20);
}

/* Rewrite the TCP options of a built 20-byte-option segment and fix its checksum. */
static size_t with_options(uint8_t *frame, const uint8_t opts[20], uint8_t doff)
{
	struct iw_tcp_seg s;
	uint8_t *tcp = frame + 14 + 20;
	uint32_t sum = 0;
	size_t i;

	base_seg(&s, false);
	s.mss = 1460;
	s.has_ts = true;
	s.has_wscale = true;
	iw_tcp_build(&s, frame, 200);
	memcpy(tcp + 20, opts, 20);
	tcp[12] = (uint8_t)(doff << 4);
	tcp[16] = tcp[17] = 0;
	for (i = 12; i < 20; i += 2)
		sum += (uint32_t)(frame[14 + i] << 8 | frame[14 + i + 1]);
	sum += 6 + 40;
	i = ref_csum(tcp, 40, sum);
	tcp[16] = (uint8_t)(i >> 8);
	tcp[17] = (uint8_t)i;
	return 14 + 20 + 40;
}

static void test_tcp_options(void)
{
	/* SACK blocks, an unknown option, a wrongly sized timestamp and MSS: skipped */
	static const uint8_t odd[20] = { 5, 10, 0, 0, 0, 1, 0, 0, 0, 2, 1, 99, 3, 7, 8, 4,
					 0, 0, 2, 2 };
	/* nothing is read after the end of the list */
	static const uint8_t eol[20] = { 1, 0, 2, 4, 5, 0xb4, 4, 2, 8, 10, 1, 2, 3, 4, 5, 6,
					 7, 8, 9, 10 };
	/* window scale 15 (read as 14), MSS, then NOPs and the end */
	static const uint8_t odd2[20] = { 3, 3, 15, 2, 4, 5, 0xb4, 1, 1, 1, 1, 1, 1, 1, 1, 1,
					  1, 1, 1, 0 };
	static const uint8_t past_end[20] = { 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
					      1, 1, 8, 10 };
	static const uint8_t len_one[20] = { 2, 1, 5, 0xb4 };
	static const uint8_t len_last[20] = { 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
					      1, 1, 1, 2 };
	uint8_t frame[200];
	struct iw_tcp_seg q;
	size_t len;

	len = with_options(frame, odd, 10);
	CHECK_EQ(iw_tcp_parse(frame, len, &q), IW_OK);
	CHECK(q.mss == 0 && !q.has_wscale && !q.sack_perm && !q.has_ts);
	len = with_options(frame, eol, 10);
	CHECK_EQ(iw_tcp_parse(frame, len, &q), IW_OK);
	CHECK(q.mss == 0 && !q.sack_perm && !q.has_ts);
	len = with_options(frame, odd2, 10);
	CHECK_EQ(iw_tcp_parse(frame, len, &q), IW_OK);
	CHECK(q.has_wscale && q.wscale == 14 && q.mss == 0x5b4 && !q.sack_perm);
	len = with_options(frame, past_end, 10);
	CHECK_EQ(iw_tcp_parse(frame, len, &q), IW_BAD_TCP);
	len = with_options(frame, len_one, 10);
	CHECK_EQ(iw_tcp_parse(frame, len, &q), IW_BAD_TCP);
	len = with_options(frame, len_last, 10);
	CHECK_EQ(iw_tcp_parse(frame, len, &q), IW_BAD_TCP);
	len = with_options(frame, odd, 4);		/* data offset below 5 */
	CHECK_EQ(iw_tcp_parse(frame, len, &q), IW_BAD_TCP);
	len = with_options(frame, odd, 15);		/* data offset past the segment */
	CHECK_EQ(iw_tcp_parse(frame, len, &q), IW_BAD_LENGTH);
}

/* ---------------------------------------------------------------- FPDUs */
static void test_fpdu_every_opcode(void)
{
	static uint8_t payload[66000], frame[70000];
	static const uint32_t lens[] = { 0, 1, 2, 3, 4, 5, 1000, 1001, 4096, 65535 - 18 };
	unsigned v6, op, li, crc, n = 0;

	fill(payload, sizeof(payload), 2);
	for (v6 = 0; v6 < 2; v6++) {
		for (op = 0; op < 16; op++) {
			const struct iw_opcode_info *oi = iw_opcode_info((uint8_t)op);

			for (li = 0; li < sizeof(lens) / sizeof(lens[0]); li++) {
				for (crc = 0; crc < 2; crc++) {
					struct iw_tcp_seg s, q;
					struct iw_pkt p, r;
					size_t len;

					base_seg(&s, v6);
					base_pkt(&p, (uint8_t)op);
					p.last = li & 1 || (oi->flags & IW_F_SINGLE);
					p.payload = payload;
					p.payload_len = lens[li];
					len = iw_frame_build(&s, &p, crc, frame, sizeof(frame));
					if (!oi->flags || (lens[li] && !(oi->flags & IW_F_PAYLOAD))) {
						CHECK_EQ(len, 0);
						CHECK_EQ(iw_fpdu_len(&p), 0);
						continue;
					}
					if (lens[li] == 65535 - 18) {
						/* the largest ULPDU: an FPDU of 65544 bytes, more
						 * than one IP packet holds */
						CHECK_EQ(len, 0);
						len = iw_fpdu_build(&p, crc, frame, sizeof(frame));
						CHECK_EQ(len, oi->flags & IW_F_TAGGED ? 65540 : 65544);
						if (iw_fpdu_parse(frame, len, crc, &r) == IW_OK)
							check_pkt_fields(&p, &r);
						else
							CHECK(!"largest FPDU refused");
						/* four more bytes are over 16 bits */
						p.payload_len += oi->flags & IW_F_TAGGED ? 5 : 1;
						CHECK_EQ(iw_fpdu_build(&p, crc, frame, sizeof(frame)),
							 0);
						continue;
					}
					CHECK(len > 0);
					CHECK_EQ(len, iw_tcp_hdr_len(&s) + iw_fpdu_len(&p));
					if (iw_tcp_parse(frame, len, &q) != IW_OK ||
					    iw_fpdu_parse(q.payload, q.payload_len, crc, &r) !=
					    IW_OK) {
						CHECK(!"round trip refused");
						continue;
					}
					CHECK_EQ(q.payload_len % 4, 0);
					check_pkt_fields(&p, &r);
					/* no CRC: zeros in its place */
					if (!crc)
						CHECK(!memcmp(q.payload + q.payload_len - 4,
							      "\0\0\0\0", 4));
					n++;
				}
			}
		}
	}
	CHECK(n > 200);
	CHECK_EQ(iw_opcode_info(IW_OP_WRITE)->hdr_len, 14);
	CHECK_EQ(iw_opcode_info(IW_OP_READ_REQ)->hdr_len, 18 + 28);
	CHECK_EQ(iw_opcode_info(IW_OP_TERMINATE)->hdr_len, 18 + 4);
	CHECK_EQ(iw_opcode_info(IW_OP_SEND_SE_INV)->qn, IW_QN_SEND);
	CHECK_EQ(iw_opcode_info(8)->flags, 0);	/* RFC 7306: not in siw, so not here */
}

/* The bytes on the wire, as Linux siw's iwarp.h lays them out, for one SEND. */
static void test_fpdu_layout(void)
{
	static const uint8_t payload[5] = { 'h', 'e', 'l', 'l', 'o' };
	uint8_t f[128];
	struct iw_pkt p;
	size_t len;
	uint32_t c;

	base_pkt(&p, IW_OP_SEND_INV);
	p.msn = 1;
	p.mo = 0;
	p.inval_stag = 0x01020304;
	p.payload = payload;
	p.payload_len = sizeof(payload);
	len = iw_fpdu_build(&p, true, f, sizeof(f));
	CHECK_EQ(len, 2 + 18 + 5 + 3 + 4);
	CHECK(!memcmp(f, "\x00\x17\x41\x44\x01\x02\x03\x04\0\0\0\0\0\0\0\x01\0\0\0\0hello\0\0\0",
		      28));
	c = crc32c_bitwise(f, 28);
	CHECK(f[28] == (uint8_t)c && f[29] == (uint8_t)(c >> 8) && f[30] == (uint8_t)(c >> 16) &&
	      f[31] == (uint8_t)(c >> 24));
	/* a zero-length RDMA WRITE (an RFC 6581 RTR message): 14 bytes of headers, no pad */
	base_pkt(&p, IW_OP_WRITE);
	p.stag = 0;
	p.to = 0;
	len = iw_fpdu_build(&p, true, f, sizeof(f));
	CHECK_EQ(len, 2 + 14 + 4);
	CHECK(!memcmp(f, "\x00\x0e\xc1\x40", 4));
	/* a Terminate as siw sends one for a bad RDMA Read Request: 2 + 22 + 48 + 4 */
	base_pkt(&p, IW_OP_TERMINATE);
	len = iw_fpdu_build(&p, true, f, sizeof(f));
	CHECK_EQ(len, 2 + 22 + 2 + 18 + 28 + 4);
	CHECK_EQ(f[2 + 18], 0x01);		/* layer 0, etype 1 */
	CHECK_EQ(f[2 + 18 + 2], 0xe0);		/* M, D, R */
	CHECK(f[2 + 22] == 0x12 && f[2 + 22 + 1] == 0x34);
	CHECK_EQ(iw_mulpdu(1448), 1448 - 4 - 2 - 0);
	CHECK_EQ(iw_mulpdu(1447), 1440 - 2);
	CHECK_EQ(iw_fpdu_len_for(iw_mulpdu(1447)), 1444);
	CHECK_EQ(iw_mulpdu(8), 2);
	CHECK_EQ(iw_mulpdu(7), 0);
	CHECK_EQ(iw_mulpdu(100000), 0xffff);
}

/* Every single-bit error in an FPDU is caught by its CRC; every truncation and every
 * appended byte is a length error. */
static void test_fpdu_corruption(void)
{
	static uint8_t payload[301], f[400], copy[400];
	unsigned op, bit;
	size_t len, i;
	int missed = 0, crc_named = 0;

	fill(payload, sizeof(payload), 5);
	for (op = 0; op < IW_OP_COUNT; op++) {
		struct iw_pkt p, r;

		base_pkt(&p, (uint8_t)op);
		if (iw_opcode_info((uint8_t)op)->flags & IW_F_PAYLOAD) {
			p.payload = payload;
			p.payload_len = sizeof(payload);
		}
		len = iw_fpdu_build(&p, true, f, sizeof(f));
		CHECK_EQ(iw_fpdu_parse(f, len, true, &r), IW_OK);
		for (i = 0; i < len; i++) {
			for (bit = 0; bit < 8; bit++) {
				enum iw_parse_result res;

				memcpy(copy, f, len);
				copy[i] ^= (uint8_t)(1 << bit);
				res = iw_fpdu_parse(copy, len, true, &r);
				missed += res == IW_OK;
				crc_named += res == IW_BAD_CRC;
			}
		}
		for (i = 0; i < len; i++)
			missed += iw_fpdu_parse(f, i, true, &r) == IW_OK;
		memcpy(copy, f, len);
		copy[len] = 0;
		CHECK_EQ(iw_fpdu_parse(copy, len + 1, true, &r), IW_BAD_LENGTH);
	}
	CHECK_EQ(missed, 0);
	CHECK(crc_named > 1000);
}

/* Headers that lie: each refused with its own result, even with a good CRC. */
static void test_fpdu_hostile(void)
{
	static uint8_t payload[64];
	uint8_t f[200], copy[200];
	struct iw_pkt p, r;
	size_t len;
	uint32_t c;

#define RECRC(buf, n)							\
	do {								\
		c = iw_crc32c(0, (buf), (n) - 4);			\
		(buf)[(n) - 4] = (uint8_t)c;				\
		(buf)[(n) - 3] = (uint8_t)(c >> 8);			\
		(buf)[(n) - 2] = (uint8_t)(c >> 16);			\
		(buf)[(n) - 1] = (uint8_t)(c >> 24);			\
	} while (0)

	base_pkt(&p, IW_OP_SEND);
	p.payload = payload;
	p.payload_len = sizeof(payload);
	len = iw_fpdu_build(&p, true, f, sizeof(f));
	/* ULPDU length larger than the FPDU handed over, and 0xffff */
	memcpy(copy, f, len);
	copy[1] += 4;
	CHECK_EQ(iw_fpdu_parse(copy, len, true, &r), IW_BAD_LENGTH);
	copy[0] = copy[1] = 0xff;
	CHECK_EQ(iw_fpdu_parse(copy, len, false, &r), IW_BAD_LENGTH);
	/* DDP version 2, 0; RDMAP version 0, 2 */
	memcpy(copy, f, len);
	copy[2] = (copy[2] & ~3) | 2;
	RECRC(copy, len);
	CHECK_EQ(iw_fpdu_parse(copy, len, true, &r), IW_BAD_VERSION);
	copy[2] &= ~3;
	RECRC(copy, len);
	CHECK_EQ(iw_fpdu_parse(copy, len, true, &r), IW_BAD_VERSION);
	memcpy(copy, f, len);
	copy[3] &= 0x3f;
	RECRC(copy, len);
	CHECK_EQ(iw_fpdu_parse(copy, len, true, &r), IW_BAD_VERSION);
	copy[3] |= 0x80;
	RECRC(copy, len);
	CHECK_EQ(iw_fpdu_parse(copy, len, true, &r), IW_BAD_VERSION);
	/* RFC 7306 opcodes and the reserved ones */
	for (c = 8; c < 16; c++) {
		memcpy(copy, f, len);
		copy[3] = (uint8_t)(0x40 | c);
		RECRC(copy, len);
		CHECK_EQ(iw_fpdu_parse(copy, len, true, &r), IW_BAD_OPCODE);
	}
	/* a SEND with the T bit; a SEND to the Read Request queue */
	memcpy(copy, f, len);
	copy[2] |= 0x80;
	RECRC(copy, len);
	CHECK_EQ(iw_fpdu_parse(copy, len, true, &r), IW_BAD_OPCODE);
	memcpy(copy, f, len);
	copy[2 + 9] = 1;
	RECRC(copy, len);
	CHECK_EQ(iw_fpdu_parse(copy, len, true, &r), IW_BAD_QN);
	/* reserved bits are not checked (RFC 5041/5040: ignored on receipt) */
	memcpy(copy, f, len);
	copy[2] |= 0x3c;
	copy[3] |= 0x30;
	RECRC(copy, len);
	CHECK_EQ(iw_fpdu_parse(copy, len, true, &r), IW_OK);
	/* an RDMA Read Request without L, or with payload */
	base_pkt(&p, IW_OP_READ_REQ);
	len = iw_fpdu_build(&p, true, f, sizeof(f));
	CHECK_EQ(iw_fpdu_parse(f, len, true, &r), IW_OK);
	memcpy(copy, f, len);
	copy[2] &= ~0x40;
	RECRC(copy, len);
	CHECK_EQ(iw_fpdu_parse(copy, len, true, &r), IW_BAD_OPCODE);
	memcpy(copy, f, len);
	copy[1] += 4;
	memset(copy + len - 4, 0, 8);
	RECRC(copy, len + 4);
	CHECK_EQ(iw_fpdu_parse(copy, len + 4, true, &r), IW_BAD_LENGTH);
	/* shorter than its opcode's headers */
	memcpy(copy, f, len);
	copy[1] = 18 + 2;
	RECRC(copy, 2 + 20 + 2 + 4);
	CHECK_EQ(iw_fpdu_parse(copy, 2 + 20 + 2 + 4, true, &r), IW_BAD_LENGTH);
	/* a Terminate whose D bit promises a copy that is not there */
	base_pkt(&p, IW_OP_TERMINATE);
	p.term_r = false;
	p.term_rdma_hdr_len = 0;
	len = iw_fpdu_build(&p, true, f, sizeof(f));
	CHECK_EQ(len, 2 + 22 + 20 + 4);
	CHECK_EQ(iw_fpdu_parse(f, len, true, &r), IW_OK);
	CHECK_EQ(r.term_ddp_hdr_len, 18);
	memcpy(copy, f, len);
	copy[1] = 22 + 2 + 10;		/* copies cut to 12 bytes: 36 + pad 2 */
	RECRC(copy, 2 + 34 + 0 + 4);
	CHECK_EQ(iw_fpdu_parse(copy, 2 + 34 + 4, true, &r), IW_BAD_LENGTH);
	/* builds that must fail: copies of the wrong size, R copy without R, payload on a
	 * Read Request or a Terminate, an opcode out of range */
	base_pkt(&p, IW_OP_TERMINATE);
	p.term_ddp_hdr_len = 16;
	CHECK_EQ(iw_fpdu_build(&p, true, f, sizeof(f)), 0);
	base_pkt(&p, IW_OP_TERMINATE);
	p.term_r = false;
	CHECK_EQ(iw_fpdu_build(&p, true, f, sizeof(f)), 0);
	base_pkt(&p, IW_OP_TERMINATE);
	p.term_ddp_hdr = NULL;
	CHECK_EQ(iw_fpdu_build(&p, true, f, sizeof(f)), 0);
	base_pkt(&p, IW_OP_TERMINATE);
	p.payload = payload;
	p.payload_len = 4;
	CHECK_EQ(iw_fpdu_build(&p, true, f, sizeof(f)), 0);
	base_pkt(&p, IW_OP_READ_REQ);
	p.payload = payload;
	p.payload_len = 4;
	CHECK_EQ(iw_fpdu_build(&p, true, f, sizeof(f)), 0);
	base_pkt(&p, 0x13);
	CHECK_EQ(iw_fpdu_build(&p, true, f, sizeof(f)), 0);
	base_pkt(&p, IW_OP_SEND);
	CHECK_EQ(iw_fpdu_build(&p, true, f, 2 + 18 + 3), 0);
	CHECK_EQ(iw_fpdu_build(&p, true, f, 2 + 18 + 4), 24);
	/* D without R: bytes after the DDP copy are not an RDMA header */
	base_pkt(&p, IW_OP_TERMINATE);
	p.term_r = false;
	p.term_rdma_hdr_len = 0;
	len = iw_fpdu_build(&p, true, f, sizeof(f));
	memcpy(copy, f, len);
	copy[1] += 28;
	memset(copy + len - 4, 0, 28 + 4);
	RECRC(copy, len + 28);
	CHECK_EQ(iw_fpdu_parse(copy, len + 28, true, &r), IW_OK);
	CHECK(r.term_ddp_hdr_len == 18 && r.term_rdma_hdr_len == 0 && r.payload_len == 20 + 28);
	/* R with a SEND's copy (siw): nothing after the DDP header */
	p.term_r = true;
	len = iw_fpdu_build(&p, true, f, sizeof(f));
	CHECK_EQ(iw_fpdu_parse(f, len, true, &r), IW_OK);
	CHECK(r.term_r && r.term_ddp_hdr_len == 18 && r.term_rdma_hdr_len == 0);
	/* a Terminate with no copies at all (a catastrophic error) */
	base_pkt(&p, IW_OP_TERMINATE);
	p.term_m = p.term_d = p.term_r = false;
	p.term_ddp_hdr_len = p.term_rdma_hdr_len = 0;
	len = iw_fpdu_build(&p, true, f, sizeof(f));
	CHECK_EQ(len, 2 + 22 + 4);
	CHECK_EQ(iw_fpdu_parse(f, len, true, &r), IW_OK);
	CHECK(r.term_ddp_hdr_len == 0 && r.payload_len == 0);
#undef RECRC
}

/* ---------------------------------------------------------------- FPDU stream */
#define STREAM_MAX	40000

struct stream {
	uint8_t bytes[STREAM_MAX];
	size_t len;
	size_t off[64], flen[64];	/* each FPDU */
	unsigned n;
	size_t largest;
};

static void make_stream(struct stream *st)
{
	static uint8_t payload[9100];
	static const uint32_t lens[] = { 0, 1, 2, 3, 4, 5, 6, 7, 300, 1447, 8999, 17 };
	unsigned i;

	fill(payload, sizeof(payload), 9);
	memset(st, 0, sizeof(*st));
	for (i = 0; i < 24; i++) {
		uint8_t op = (uint8_t)(i % IW_OP_COUNT);
		struct iw_pkt p;
		size_t n;

		base_pkt(&p, op);
		p.msn = i;
		if (iw_opcode_info(op)->flags & IW_F_PAYLOAD) {
			p.payload = payload + i;
			p.payload_len = lens[i % 12];
		}
		n = iw_fpdu_build(&p, true, st->bytes + st->len, STREAM_MAX - st->len);
		CHECK(n > 0);
		st->off[st->n] = st->len;
		st->flen[st->n++] = n;
		st->len += n;
		if (n > st->largest)
			st->largest = n;
	}
}

/* Feed @st in pieces whose sizes @cut gives; check every FPDU comes out whole and in
 * order. Returns the result that ended the stream. */
static enum iw_parse_result feed(const struct stream *st, uint32_t cap,
				 size_t (*cut)(size_t at, size_t left), unsigned *got)
{
	static uint8_t buf[IW_FPDU_MAX];
	struct iw_fpdu_rx rx;
	enum iw_parse_result r = IW_INCOMPLETE;
	size_t at = 0;

	*got = 0;
	iw_fpdu_rx_init(&rx, buf, cap, true);
	while (at < st->len) {
		size_t n = cut(at, st->len - at);
		const uint8_t *d = st->bytes + at;
		size_t left = n;

		at += n;
		for (;;) {
			const uint8_t *f;
			size_t flen;
			struct iw_pkt p;

			r = iw_fpdu_rx_next(&rx, &d, &left, &f, &flen);
			if (r != IW_OK)
				break;
			if (*got >= st->n || flen != st->flen[*got] ||
			    memcmp(f, st->bytes + st->off[*got], flen)) {
				CHECK(!"wrong FPDU");
				return IW_PARSE_MAX;
			}
			CHECK_EQ(iw_fpdu_parse(f, flen, false, &p), IW_OK);
			CHECK_EQ(p.opcode, *got % IW_OP_COUNT);
			(*got)++;
		}
		if (r != IW_INCOMPLETE)
			return r;
		CHECK_EQ(left, 0);
	}
	return r;
}

static size_t cut_whole(size_t at, size_t left)
{
	return left;
}

static size_t cut_one(size_t at, size_t left)
{
	return 1;
}

static size_t cut_random(size_t at, size_t left)
{
	size_t n = 1 + rng() % (rng() & 1 ? 9000 : 40);

	return n < left ? n : left;
}

static size_t cut_at;

static size_t cut_two(size_t at, size_t left)
{
	return at < cut_at ? cut_at - at : left;
}

static void test_stream_splits(void)
{
	static struct stream st;
	unsigned got, seed;
	size_t c;

	make_stream(&st);
	CHECK_EQ(feed(&st, IW_FPDU_MAX, cut_whole, &got), IW_INCOMPLETE);
	CHECK_EQ(got, st.n);
	CHECK_EQ(feed(&st, IW_FPDU_MAX, cut_one, &got), IW_INCOMPLETE);
	CHECK_EQ(got, st.n);
	for (seed = 1; seed <= 50; seed++) {
		rng_state = seed;
		CHECK_EQ(feed(&st, (uint32_t)st.largest, cut_random, &got), IW_INCOMPLETE);
		CHECK_EQ(got, st.n);
	}
	/* two pieces, cut at every byte of the first 3000 and near the end */
	for (c = 1; c < st.len; c += c < 3000 || c > st.len - 200 ? 1 : 97) {
		cut_at = c;
		CHECK_EQ(feed(&st, (uint32_t)st.largest, cut_two, &got), IW_INCOMPLETE);
		CHECK_EQ(got, st.n);
	}
}

/* A buffer one byte short of the largest FPDU ends the stream there, whatever the cut;
 * a bad CRC ends it at the bad FPDU; both errors stay. */
static void test_stream_errors(void)
{
	static struct stream st;
	static uint8_t buf[64];
	unsigned got, big = 0, i;
	struct iw_fpdu_rx rx;
	const uint8_t *d, *f;
	size_t left, flen;

	make_stream(&st);
	for (i = 0; i < st.n; i++)
		if (st.flen[i] == st.largest) {
			big = i;
			break;
		}
	CHECK_EQ(feed(&st, (uint32_t)st.largest - 1, cut_whole, &got), IW_TOO_BIG);
	CHECK_EQ(got, big);
	CHECK_EQ(feed(&st, (uint32_t)st.largest - 1, cut_one, &got), IW_TOO_BIG);
	CHECK_EQ(got, big);
	rng_state = 7;
	CHECK_EQ(feed(&st, (uint32_t)st.largest - 1, cut_random, &got), IW_TOO_BIG);
	CHECK_EQ(got, big);
	st.bytes[st.off[5] + 7] ^= 0x40;
	CHECK_EQ(feed(&st, IW_FPDU_MAX, cut_whole, &got), IW_BAD_CRC);
	CHECK_EQ(got, 5);
	CHECK_EQ(feed(&st, IW_FPDU_MAX, cut_one, &got), IW_BAD_CRC);
	CHECK_EQ(got, 5);
	/* a hostile length with a tiny buffer: refused once the two length bytes are in, and
	 * again on every later call */
	iw_fpdu_rx_init(&rx, buf, sizeof(buf), true);
	d = (const uint8_t *)"\xff";
	left = 1;
	CHECK_EQ(iw_fpdu_rx_next(&rx, &d, &left, &f, &flen), IW_INCOMPLETE);
	d = (const uint8_t *)"\xf0";
	left = 1;
	CHECK_EQ(iw_fpdu_rx_next(&rx, &d, &left, &f, &flen), IW_TOO_BIG);
	d = (const uint8_t *)"\0\0\0\0";
	left = 4;
	CHECK_EQ(iw_fpdu_rx_next(&rx, &d, &left, &f, &flen), IW_TOO_BIG);
	CHECK(f == NULL && flen == 0);
	/* nothing in, nothing out */
	iw_fpdu_rx_init(&rx, buf, sizeof(buf), true);
	left = 0;
	CHECK_EQ(iw_fpdu_rx_next(&rx, &d, &left, &f, &flen), IW_INCOMPLETE);
}

/* ---------------------------------------------------------------- MPA Request/Reply */
static void test_mpa_rr(void)
{
	static uint8_t pd[600];
	uint8_t b[700];
	struct iw_mpa_rr rr, q;
	size_t len, used, i;
	unsigned rev, enh, reply, pl, k;
	static const uint16_t pls[] = { 0, 1, 3, 252, 256, 508 };

	fill(pd, sizeof(pd), 4);
	/* revision 1 and 2, enhanced or not, Request and Reply, six private data lengths */
	for (k = 0; k < 2 * 2 * 2 * sizeof(pls) / sizeof(pls[0]); k++) {
		rev = 1 + k % 2;
		enh = k / 2 % 2;
		reply = k / 4 % 2;
		pl = k / 8;
		memset(&rr, 0, sizeof(rr));
		rr.reply = reply;
		rr.crc = true;
		rr.reject = reply && pl == 1;
		rr.rev = (uint8_t)rev;
		rr.enhanced = enh;
		rr.p2p = true;
		rr.rtr_write = true;
		rr.rtr_read = pl & 1;
		rr.rtr_send = pl == 2;
		rr.ird = 0x3fff;
		rr.ord = 16;
		rr.pdata = pd;
		rr.pdata_len = pls[pl];
		len = iw_mpa_rr_build(&rr, b, sizeof(b));
		if (enh && rev == 1) {
			CHECK_EQ(len, 0);
			continue;
		}
		CHECK_EQ(len, iw_mpa_rr_len(&rr));
		CHECK(!memcmp(b, reply ? "MPA ID Rep Frame" : "MPA ID Req Frame", 16));
		CHECK_EQ(b[17], rev);
		CHECK_EQ(b[18] << 8 | b[19], pls[pl] + (enh ? 4 : 0));
		/* FPDU bytes may follow in the same stream */
		memset(b + len, 0xab, 8);
		if (iw_mpa_rr_parse(b, len + 8, &q, &used) != IW_OK) {
			CHECK(!"round trip refused");
			continue;
		}
		CHECK_EQ(used, len);
		CHECK_EQ(q.reply, reply);
		CHECK(q.crc && !q.markers && q.reject == rr.reject);
		CHECK_EQ(q.rev, rev);
		CHECK_EQ(q.enhanced, enh);
		if (enh) {
			CHECK(q.p2p && q.rtr_write && q.rtr_read == rr.rtr_read &&
			      q.rtr_send == rr.rtr_send);
			CHECK(q.ird == 0x3fff && q.ord == 16);
		} else {
			CHECK(!q.p2p && !q.rtr_write && !q.ird && !q.ord);
		}
		CHECK_EQ(q.pdata_len, pls[pl]);
		CHECK(!pls[pl] || !memcmp(q.pdata, pd, pls[pl]));
		/* every prefix: waits for more, never more than it needs */
		for (i = 0; i < len; i++)
			CHECK_EQ(iw_mpa_rr_parse(b, i, &q, &used), IW_INCOMPLETE);
	}
	/* private data of exactly 512 in all, and over */
	memset(&rr, 0, sizeof(rr));
	rr.rev = 2;
	rr.enhanced = true;
	rr.pdata = pd;
	rr.pdata_len = 508;
	CHECK_EQ(iw_mpa_rr_build(&rr, b, sizeof(b)), 532);
	rr.pdata_len = 509;
	CHECK_EQ(iw_mpa_rr_build(&rr, b, sizeof(b)), 0);
	rr.pdata_len = 4;
	rr.ird = 0x4000;
	CHECK_EQ(iw_mpa_rr_build(&rr, b, sizeof(b)), 0);
	rr.ird = 0;
	rr.markers = true;		/* refused, as siw refuses markers */
	CHECK_EQ(iw_mpa_rr_build(&rr, b, sizeof(b)), 0);
	rr.markers = false;
	rr.rev = 3;
	CHECK_EQ(iw_mpa_rr_build(&rr, b, sizeof(b)), 0);
	rr.rev = 2;
	CHECK_EQ(iw_mpa_rr_build(&rr, b, 20 + 4 + 3), 0);
	/* in place: private data already where it goes */
	rr.enhanced = false;
	memcpy(b + 20, "pdata", 5);
	rr.pdata = b + 20;
	rr.pdata_len = 5;
	CHECK_EQ(iw_mpa_rr_build(&rr, b, sizeof(b)), 25);
	CHECK(!memcmp(b + 20, "pdata", 5));
}

static void test_mpa_rr_hostile(void)
{
	uint8_t b[700];
	struct iw_mpa_rr rr, q;
	size_t len, used;

	memset(&rr, 0, sizeof(rr));
	rr.rev = 1;
	rr.crc = true;
	len = iw_mpa_rr_build(&rr, b, sizeof(b));
	/* PD_Length 513 and 0xffff: refused as soon as the header is in */
	b[18] = 0x02;
	b[19] = 0x01;
	CHECK_EQ(iw_mpa_rr_parse(b, 20, &q, &used), IW_BAD_MPA);
	b[18] = b[19] = 0xff;
	CHECK_EQ(iw_mpa_rr_parse(b, 20, &q, &used), IW_BAD_MPA);
	b[18] = 0x02;
	b[19] = 0x00;
	CHECK_EQ(iw_mpa_rr_parse(b, 20, &q, &used), IW_INCOMPLETE);
	memset(b + 20, 0, 512);
	CHECK_EQ(iw_mpa_rr_parse(b, 532, &q, &used), IW_OK);
	CHECK_EQ(used, 532);
	/* a wrong key byte: refused from the byte it is in */
	len = iw_mpa_rr_build(&rr, b, sizeof(b));
	b[5] = 'x';
	CHECK_EQ(iw_mpa_rr_parse(b, 5, &q, &used), IW_INCOMPLETE);
	CHECK_EQ(iw_mpa_rr_parse(b, 6, &q, &used), IW_BAD_MPA);
	CHECK_EQ(iw_mpa_rr_parse((const uint8_t *)"GET / HTTP/1.1\r\n", 16, &q, &used),
		 IW_BAD_MPA);
	/* revision 0 and 3: named, the rest filled in for a reject */
	len = iw_mpa_rr_build(&rr, b, sizeof(b));
	b[17] = 0;
	CHECK_EQ(iw_mpa_rr_parse(b, len, &q, &used), IW_BAD_VERSION);
	b[17] = 3;
	CHECK_EQ(iw_mpa_rr_parse(b, len, &q, &used), IW_BAD_VERSION);
	CHECK(q.rev == 3 && q.crc && used == len);
	/* markers asked for: parsed and reported, for the caller to reject */
	b[17] = 1;
	b[16] |= IW_MPA_F_MARKERS;
	CHECK_EQ(iw_mpa_rr_parse(b, len, &q, &used), IW_OK);
	CHECK(q.markers);
	/* reserved bits (siw's experimental GSO bit 0x08) ignored; enhanced flag in rev 1
	 * ignored too */
	b[16] = IW_MPA_F_CRC | 0x0f | IW_MPA_F_ENHANCED;
	CHECK_EQ(iw_mpa_rr_parse(b, len, &q, &used), IW_OK);
	CHECK(q.crc && !q.enhanced && !q.reject && !q.markers);
	/* rev 2 and the enhanced flag with fewer than 4 bytes of private data */
	b[17] = 2;
	CHECK_EQ(iw_mpa_rr_parse(b, len, &q, &used), IW_BAD_MPA);
	b[19] = 3;
	memset(b + 20, 0, 3);
	CHECK_EQ(iw_mpa_rr_parse(b, len + 3, &q, &used), IW_BAD_MPA);
	b[19] = 4;
	b[23] = 0;
	CHECK_EQ(iw_mpa_rr_parse(b, len + 4, &q, &used), IW_OK);
	CHECK(q.enhanced && q.pdata_len == 0);
}

/* Random bytes in every parser: no crash (ASan/UBSan builds watch), and never an FPDU
 * with a good CRC. */
static void test_random_flood(void)
{
	static uint8_t b[2000], rxbuf[300];
	struct iw_tcp_seg s;
	struct iw_pkt p;
	struct iw_mpa_rr rr;
	struct iw_fpdu_rx rx;
	unsigned i, j, ok = 0;

	rng_state = 99;
	iw_fpdu_rx_init(&rx, rxbuf, sizeof(rxbuf), true);
	for (i = 0; i < 20000; i++) {
		size_t n = rng() % sizeof(b), used, flen;
		const uint8_t *d = b, *f;

		for (j = 0; j < n; j++)
			b[j] = (uint8_t)rng();
		if (n > 40 && (i & 1)) {
			b[12] = i & 2 ? 0x86 : 0x08;
			b[13] = i & 2 ? 0xdd : 0x00;
			b[14] = i & 2 ? 0x60 : 0x45;
			b[14 + 6] = i & 2 ? 6 : 0x40;
			b[14 + 7] = 0;
			b[14 + 9] = 6;
		}
		iw_tcp_parse(b, n, &s);
		if (i % 3 == 0) {
			/* random options and data offset behind good checksums */
			uint8_t opts[20];

			for (j = 0; j < 20; j++)
				opts[j] = (uint8_t)(rng() % 12);
			iw_tcp_parse(b, with_options(b, opts, (uint8_t)(rng() % 16)), &s);
		}
		ok += iw_fpdu_parse(b, n, true, &p) == IW_OK;
		if (n >= 2 && (i & 4)) {
			b[0] = (uint8_t)((n - 6) >> 8);	/* a plausible ULPDU length */
			b[1] = (uint8_t)(n - 6);
			iw_fpdu_parse(b, n, false, &p);
		}
		iw_mpa_rr_parse(b, n, &rr, &used);
		if (iw_fpdu_rx_next(&rx, &d, &n, &f, &flen) == IW_OK)
			ok++;
		if (rx.err != IW_OK)
			iw_fpdu_rx_init(&rx, rxbuf, sizeof(rxbuf), true);
	}
	CHECK_EQ(ok, 0);
	for (i = 0; i < IW_PARSE_MAX; i++)
		CHECK(strcmp(iw_parse_result_name((enum iw_parse_result)i), "?"));
	CHECK(!strcmp(iw_parse_result_name(IW_PARSE_MAX), "?"));
}

/* ---------------------------------------------------------------- tshark */
struct pcap {
	FILE *f;
	unsigned n;
};

static void pcap_put(struct pcap *pc, const uint8_t *frame, size_t len)
{
	uint32_t h[4] = { 1700000000u, pc->n * 1000u, (uint32_t)len, (uint32_t)len };

	fwrite(h, sizeof(h), 1, pc->f);
	fwrite(frame, len, 1, pc->f);
	pc->n++;
}

/* One TCP direction: addresses, ports, next sequence number. */
struct side {
	struct iw_tcp_seg s;
	uint32_t nxt;
};

static void side_send(struct pcap *pc, struct side *a, struct side *b, uint8_t flags,
		      const uint8_t *data, size_t n)
{
	static uint8_t frame[70000];
	size_t len;

	a->s.seq = a->nxt;
	a->s.ack = b->nxt;
	a->s.flags = flags;
	a->s.payload = data;
	a->s.payload_len = (uint32_t)n;
	len = iw_tcp_build(&a->s, frame, sizeof(frame));
	CHECK(len > 0);
	pcap_put(pc, frame, len);
	a->nxt += (uint32_t)n + (flags & (IW_TCP_SYN | IW_TCP_FIN) ? 1 : 0);
}

/* A connection: handshake, MPA Request and Reply (revision @rev), one FPDU of every
 * opcode each way, FIN. Returns the FPDUs written. */
static unsigned write_connection(struct pcap *pc, bool v6, uint8_t rev, uint16_t port)
{
	static uint8_t payload[1500], fpdu[2000];
	static const uint8_t pdata[] = "qhca private data";
	struct side a, b;
	struct iw_mpa_rr rr;
	uint8_t rrbuf[600];
	unsigned op, dir, n = 0;
	size_t len;

	fill(payload, sizeof(payload), 6);
	base_seg(&a.s, v6);
	base_seg(&b.s, v6);
	memcpy(b.s.smac, a.s.dmac, 6);
	memcpy(b.s.dmac, a.s.smac, 6);
	memcpy(b.s.sgid, a.s.dgid, 16);
	memcpy(b.s.dgid, a.s.sgid, 16);
	a.s.sport = b.s.dport = port;
	b.s.sport = a.s.dport = 20000;
	a.nxt = 0x10000000u;
	b.nxt = 0xfffff000u;		/* wraps during the exchange */
	a.s.mss = b.s.mss = 1460;
	a.s.sack_perm = b.s.sack_perm = true;
	a.s.has_wscale = b.s.has_wscale = true;
	a.s.wscale = b.s.wscale = 7;
	side_send(pc, &a, &b, IW_TCP_SYN, NULL, 0);
	side_send(pc, &b, &a, IW_TCP_SYN | IW_TCP_ACK, NULL, 0);
	a.s.mss = b.s.mss = 0;
	a.s.sack_perm = b.s.sack_perm = a.s.has_wscale = b.s.has_wscale = false;
	side_send(pc, &a, &b, IW_TCP_ACK, NULL, 0);

	memset(&rr, 0, sizeof(rr));
	rr.rev = rev;
	rr.crc = true;
	rr.enhanced = rev == 2;
	rr.ird = rr.ord = 8;
	rr.pdata = pdata;
	rr.pdata_len = sizeof(pdata);
	len = iw_mpa_rr_build(&rr, rrbuf, sizeof(rrbuf));
	side_send(pc, &a, &b, IW_TCP_ACK | IW_TCP_PSH, rrbuf, len);
	rr.reply = true;
	rr.pdata_len = 0;
	len = iw_mpa_rr_build(&rr, rrbuf, sizeof(rrbuf));
	side_send(pc, &b, &a, IW_TCP_ACK | IW_TCP_PSH, rrbuf, len);

	for (dir = 0; dir < 2; dir++) {
		for (op = 0; op < IW_OP_COUNT; op++) {
			struct iw_pkt p;

			base_pkt(&p, (uint8_t)op);
			p.msn = 1;
			p.mo = 0;
			if (op == IW_OP_TERMINATE) {
				/* a DDP untagged-buffer error with the DDP header copied, as
				 * siw and tshark both lay it out */
				p.term_layer = IW_TERM_LAYER_DDP;
				p.term_etype = 2;
				p.term_ecode = 1;
				p.term_r = false;
				p.term_rdma_hdr_len = 0;
			}
			if (iw_opcode_info((uint8_t)op)->flags & IW_F_PAYLOAD) {
				p.payload = payload;
				p.payload_len = 1 + op * 97;
			}
			len = iw_fpdu_build(&p, true, fpdu, sizeof(fpdu));
			CHECK(len > 0);
			if (dir)
				side_send(pc, &b, &a, IW_TCP_ACK | IW_TCP_PSH, fpdu, len);
			else
				side_send(pc, &a, &b, IW_TCP_ACK | IW_TCP_PSH, fpdu, len);
			n++;
		}
	}
	side_send(pc, &a, &b, IW_TCP_ACK | IW_TCP_FIN, NULL, 0);
	side_send(pc, &b, &a, IW_TCP_ACK | IW_TCP_FIN, NULL, 0);
	side_send(pc, &a, &b, IW_TCP_ACK, NULL, 0);
	return n;
}

/* Lines tshark prints for @filter on @path, or -1 if it could not be run. */
static long tshark_count(const char *path, const char *filter, const char *grep)
{
	char cmd[1024], line[4096];
	long n = 0;
	FILE *p;

	snprintf(cmd, sizeof(cmd),
		 "tshark -n -r '%s' -o tcp.check_checksum:TRUE -o ip.check_checksum:TRUE "
		 "%s%s%s %s 2>/dev/null", path, filter ? "-Y '" : "", filter ? filter : "",
		 filter ? "'" : "", grep ? "-V" : "");
	p = popen(cmd, "r");
	if (!p)
		return -1;
	while (fgets(line, sizeof(line), p))
		if (!grep || strstr(line, grep))
			n++;
	if (pclose(p) != 0)
		return -1;
	return n;
}

static void test_tshark_decodes(void)
{
	static const uint32_t ghdr[6] = { 0xa1b2c3d4u, 0x00040002u, 0, 0, 65535, 1 };
	char path[] = "/tmp/qhca-iwarp-XXXXXX";
	struct pcap pc = { NULL, 0 };
	unsigned fpdus = 0;
	int fd, before = unit_failures;

	if (system("command -v tshark >/dev/null 2>&1") != 0)
		SKIP("tshark not installed");
	fd = mkstemp(path);
	CHECK(fd >= 0);
	if (fd < 0)
		return;
	pc.f = fdopen(fd, "wb");
	fwrite(ghdr, sizeof(ghdr), 1, pc.f);
	fpdus += write_connection(&pc, false, 1, 40001);
	fpdus += write_connection(&pc, true, 1, 40002);
	fpdus += write_connection(&pc, false, 2, 40003);
	fclose(pc.f);

	printf("# tshark: %s, %u frames, %u FPDUs\n", path, pc.n, fpdus);
	CHECK_EQ(tshark_count(path, NULL, NULL), pc.n);
	CHECK_EQ(tshark_count(path, "_ws.malformed", NULL), 0);
	CHECK_EQ(tshark_count(path, "_ws.expert.severity == \"Error\"", NULL), 0);
	CHECK_EQ(tshark_count(path, "tcp.checksum.status == \"Good\"", NULL), pc.n);
	CHECK_EQ(tshark_count(path, "ip.checksum.status == \"Good\"", NULL), pc.n / 3 * 2);
	CHECK_EQ(tshark_count(path, "tcp.analysis.flags && !tcp.analysis.window_update",
			      NULL), 0);
	CHECK_EQ(tshark_count(path, "iwarp_mpa.req", NULL), 3);
	CHECK_EQ(tshark_count(path, "iwarp_mpa.rep", NULL), 3);
	CHECK_EQ(tshark_count(path, "iwarp_ddp_rdmap", NULL), fpdus);
	CHECK_EQ(tshark_count(path, "iwarp_mpa.fpdu", "(Good CRC32)"), fpdus);
	CHECK_EQ(tshark_count(path, "iwarp_mpa.fpdu", "Bad CRC32"), 0);
	CHECK_EQ(tshark_count(path, "iwarp_rdma.opcode == 7 && iwarp_rdma.term_ddp_h", NULL),
		 6);
	CHECK_EQ(tshark_count(path, "iwarp_rdma.rdmardsz == 1048576", NULL), 6);
	CHECK_EQ(tshark_count(path, "iwarp_ddp.qn == 0 && iwarp_rdma.opcode == 3", NULL), 6);
	if (unit_failures == before)
		unlink(path);
	else
		printf("# kept %s\n", path);
}

static const struct unit_test tests[] = {
	{ "crc32c_vectors", test_crc32c_vectors },
	{ "crc32c_slices", test_crc32c_slices },
	{ "tcp_round_trips", test_tcp_round_trips },
	{ "tcp_checksums", test_tcp_checksums },
	{ "tcp_corruption", test_tcp_corruption },
	{ "tcp_malformed", test_tcp_malformed },
	{ "tcp_options", test_tcp_options },
	{ "fpdu_every_opcode", test_fpdu_every_opcode },
	{ "fpdu_layout", test_fpdu_layout },
	{ "fpdu_corruption", test_fpdu_corruption },
	{ "fpdu_hostile", test_fpdu_hostile },
	{ "stream_splits", test_stream_splits },
	{ "stream_errors", test_stream_errors },
	{ "mpa_rr", test_mpa_rr },
	{ "mpa_rr_hostile", test_mpa_rr_hostile },
	{ "random_flood", test_random_flood },
	{ "tshark_decodes", test_tshark_decodes },
	{}
};

int main(int argc, char **argv)
{
	return unit_main(tests, argc, argv);
}
