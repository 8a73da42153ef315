// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * RoCE packet building and parsing (IBA Vol 1 9.2-9.5 for the transport headers, 8.3 for
 * the GRH, Annex A16 for RoCE v1's Ethertype, Annex A17.4 for RoCEv2's UDP/IP encapsulation
 * and A17.3.3 for the ICRC).
 */
#include <string.h>

#include "net.h"
#include "roce.h"
#include "wire_be.h"

/* ---------------------------------------------------------------- opcodes (IBA table 38) */
#define RETH_LEN	16
#define AETH_LEN	4
#define ATOMICETH_LEN	28
#define ATOMICACK_LEN	8
#define IMMDT_LEN	4
#define IETH_LEN	4
#define DETH_LEN	8
#define XRCETH_LEN	4

#define REQ_SEND	(ROCE_F_REQ | ROCE_F_SEND | ROCE_F_PAYLOAD)
#define REQ_WRITE	(ROCE_F_REQ | ROCE_F_WRITE | ROCE_F_PAYLOAD)
#define RESP_READ	(ROCE_F_RESP | ROCE_F_READ | ROCE_F_PAYLOAD)
#define ONLY		(ROCE_F_FIRST | ROCE_F_LAST)

/* BTH and the extended headers an opcode's flags call for: a constant expression. */
#define HDR_LEN(f)							\
	(ROCE_BTH_LEN + ((f) & ROCE_F_RETH ? RETH_LEN : 0) +		\
	 ((f) & ROCE_F_AETH ? AETH_LEN : 0) +				\
	 ((f) & ROCE_F_ATOMICETH ? ATOMICETH_LEN : 0) +			\
	 ((f) & ROCE_F_ATOMICACKETH ? ATOMICACK_LEN : 0) +		\
	 ((f) & ROCE_F_IMMDT ? IMMDT_LEN : 0) + ((f) & ROCE_F_IETH ? IETH_LEN : 0) + \
	 ((f) & ROCE_F_DETH ? DETH_LEN : 0) + ((f) & ROCE_F_XRCETH ? XRCETH_LEN : 0))

#define OPC(ts, op, name, f) [(ts) | ROCE_OP_##op] = { name, (f), HDR_LEN(f) },
/* XRC (IBA annex A14): the RC opcodes; every request carries an XRCETH after the BTH. */
#define XRC_FLAGS(f)	((f) | ((f) & ROCE_F_REQ ? ROCE_F_XRCETH : 0))
#define OPC_XRC(ts, op, name, f) OPC(ts, op, name, XRC_FLAGS(f))

/* SEND and RDMA WRITE: RC and UC (IBA 9.8.3 lists what UC carries). */
#define SEND_WRITE_OPS(X, ts)							\
	X(ts, SEND_FIRST, "SEND_FIRST", REQ_SEND | ROCE_F_FIRST)		\
	X(ts, SEND_MIDDLE, "SEND_MIDDLE", REQ_SEND | ROCE_F_MIDDLE)		\
	X(ts, SEND_LAST, "SEND_LAST", REQ_SEND | ROCE_F_LAST)			\
	X(ts, SEND_LAST_IMM, "SEND_LAST_WITH_IMMEDIATE", REQ_SEND | ROCE_F_LAST | ROCE_F_IMMDT) \
	X(ts, SEND_ONLY, "SEND_ONLY", REQ_SEND | ONLY)				\
	X(ts, SEND_ONLY_IMM, "SEND_ONLY_WITH_IMMEDIATE", REQ_SEND | ONLY | ROCE_F_IMMDT) \
	X(ts, WRITE_FIRST, "RDMA_WRITE_FIRST", REQ_WRITE | ROCE_F_FIRST | ROCE_F_RETH) \
	X(ts, WRITE_MIDDLE, "RDMA_WRITE_MIDDLE", REQ_WRITE | ROCE_F_MIDDLE)	\
	X(ts, WRITE_LAST, "RDMA_WRITE_LAST", REQ_WRITE | ROCE_F_LAST)		\
	X(ts, WRITE_LAST_IMM, "RDMA_WRITE_LAST_WITH_IMMEDIATE",			\
	  REQ_WRITE | ROCE_F_LAST | ROCE_F_IMMDT)				\
	X(ts, WRITE_ONLY, "RDMA_WRITE_ONLY", REQ_WRITE | ONLY | ROCE_F_RETH)	\
	X(ts, WRITE_ONLY_IMM, "RDMA_WRITE_ONLY_WITH_IMMEDIATE",			\
	  REQ_WRITE | ONLY | ROCE_F_RETH | ROCE_F_IMMDT)

/* READ, ATOMIC, their responses, ACK and SEND with invalidate: RC only. */
#define RC_ONLY_OPS(X, ts)							\
	X(ts, READ_REQUEST, "RDMA_READ_REQUEST", ROCE_F_REQ | ROCE_F_READ | ROCE_F_RETH | ONLY) \
	X(ts, READ_RESPONSE_FIRST, "RDMA_READ_RESPONSE_FIRST",			\
	  RESP_READ | ROCE_F_FIRST | ROCE_F_AETH)				\
	X(ts, READ_RESPONSE_MIDDLE, "RDMA_READ_RESPONSE_MIDDLE", RESP_READ | ROCE_F_MIDDLE) \
	X(ts, READ_RESPONSE_LAST, "RDMA_READ_RESPONSE_LAST",			\
	  RESP_READ | ROCE_F_LAST | ROCE_F_AETH)				\
	X(ts, READ_RESPONSE_ONLY, "RDMA_READ_RESPONSE_ONLY", RESP_READ | ONLY | ROCE_F_AETH) \
	X(ts, ACKNOWLEDGE, "ACKNOWLEDGE", ROCE_F_RESP | ROCE_F_AETH | ONLY)	\
	X(ts, ATOMIC_ACKNOWLEDGE, "ATOMIC_ACKNOWLEDGE", ROCE_F_RESP | ROCE_F_ATOMIC |	\
	  ROCE_F_AETH | ROCE_F_ATOMICACKETH | ONLY)				\
	X(ts, COMPARE_SWAP, "COMPARE_SWAP", ROCE_F_REQ | ROCE_F_ATOMIC | ROCE_F_ATOMICETH | ONLY) \
	X(ts, FETCH_ADD, "FETCH_ADD", ROCE_F_REQ | ROCE_F_ATOMIC | ROCE_F_ATOMICETH | ONLY) \
	X(ts, SEND_LAST_INV, "SEND_LAST_WITH_INVALIDATE", REQ_SEND | ROCE_F_LAST | ROCE_F_IETH) \
	X(ts, SEND_ONLY_INV, "SEND_ONLY_WITH_INVALIDATE", REQ_SEND | ONLY | ROCE_F_IETH) \
	X(ts, ATOMIC_WRITE, "ATOMIC_WRITE",					\
	  ROCE_F_REQ | ROCE_F_ATOMIC_WRITE | ROCE_F_RETH | ROCE_F_PAYLOAD | ONLY)

/* Every opcode of IBA table 38 that RoCEv2 carries; flags 0: not a valid opcode. */
static const struct roce_opcode_info opcode_table[256] = {
	SEND_WRITE_OPS(OPC, ROCE_TS_RC)
	RC_ONLY_OPS(OPC, ROCE_TS_RC)
	SEND_WRITE_OPS(OPC, ROCE_TS_UC)
	SEND_WRITE_OPS(OPC_XRC, ROCE_TS_XRC)
	RC_ONLY_OPS(OPC_XRC, ROCE_TS_XRC)
	OPC(ROCE_TS_UD, SEND_ONLY, "SEND_ONLY", REQ_SEND | ONLY | ROCE_F_DETH)
	OPC(ROCE_TS_UD, SEND_ONLY_IMM, "SEND_ONLY_WITH_IMMEDIATE",
	    REQ_SEND | ONLY | ROCE_F_IMMDT | ROCE_F_DETH)
};

const struct roce_opcode_info *roce_opcode_info(uint8_t opcode)
{
	return &opcode_table[opcode];
}

const uint32_t roce_rnr_timer_us[32] = {
	655360, 10, 20, 30, 40, 60, 80, 120, 160, 240, 320, 480, 640, 960, 1280, 1920, 2560,
	3840, 5120, 7680, 10240, 15360, 20480, 30720, 40960, 61440, 81920, 122880, 163840,
	245760, 327680, 491520,
};

/* ---------------------------------------------------------------- CRC-32 and ICRC */
/*
 * The reflected CRC-32 of Ethernet, gzip and the ICRC. roce_crc32() is ISA-L's
 * crc32_gzip_refl where the build found ISA-L, else zlib's crc32 (chosen by meson); this
 * byte-at-a-time table loop is ten to a hundred times slower and stays as the reference
 * that the unit test holds the library to.
 */
static uint32_t crc_table[256];

uint32_t roce_crc32_table(uint32_t crc, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	if (!crc_table[1]) {
		uint32_t i, j;

		for (i = 0; i < 256; i++) {
			uint32_t c = i;

			for (j = 0; j < 8; j++)
				c = c & 1 ? 0xedb88320u ^ (c >> 1) : c >> 1;
			crc_table[i] = c;
		}
	}
	crc = ~crc;
	while (len--)
		crc = crc_table[(crc ^ *p++) & 0xff] ^ (crc >> 8);
	return ~crc;
}

#if defined(QHCA_CRC_ISAL)
#include <isa-l/crc.h>

const char roce_crc32_impl[] = "ISA-L crc32_gzip_refl";

uint32_t roce_crc32(uint32_t crc, const void *buf, size_t len)
{
	return crc32_gzip_refl(crc, buf, len);
}
#elif defined(QHCA_CRC_ZLIB)
#include <zlib.h>

const char roce_crc32_impl[] = "zlib crc32";

uint32_t roce_crc32(uint32_t crc, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	while (len) {	/* zlib counts in uInt */
		uInt n = len > 0x40000000u ? 0x40000000u : (uInt)len;

		crc = (uint32_t)crc32(crc, p, n);
		p += n;
		len -= n;
	}
	return crc;
}
#else
const char roce_crc32_impl[] = "table (no ISA-L or zlib at build time)";

uint32_t roce_crc32(uint32_t crc, const void *buf, size_t len)
{
	return roce_crc32_table(crc, buf, len);
}
#endif

/*
 * The ICRC (IBA 7.8.1, A17.3.3): CRC-32 over 64 bits of ones standing for the LRH of a
 * packet with a GRH or IP header (a router may rewrite the LRH, so all of it is variant),
 * then that header with its variant fields set to ones (IPv4 TOS, TTL, checksum; IPv6 or
 * GRH traffic class, flow label, hop limit), for RoCEv2 the UDP header with its checksum
 * set to ones; or, for a local InfiniBand packet, its LRH with only the VL set to ones.
 * Then the BTH with its reserved byte (resv8a, where FECN/BECN live) set to ones, and the
 * rest of the packet up to the ICRC. @net points at the IP header, GRH or LRH; @end at
 * the ICRC.
 */
uint32_t roce_icrc(const uint8_t *net, enum roce_net kind, const uint8_t *end)
{
	static const uint8_t ones[8] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff };
	uint8_t hdr[ROCE_IPV6_HLEN + ROCE_UDP_HLEN + ROCE_BTH_LEN];
	size_t iplen = kind == ROCE_NET_IPV4 ? ROCE_IPV4_HLEN :
		       kind == ROCE_NET_LRH ? 8 : ROCE_IPV6_HLEN;
	size_t udplen = kind == ROCE_NET_IPV4 || kind == ROCE_NET_IPV6 ? ROCE_UDP_HLEN : 0;
	size_t n = iplen + udplen + ROCE_BTH_LEN;
	uint32_t crc;

	memcpy(hdr, net, n);
	if (kind == ROCE_NET_IPV6 || kind == ROCE_NET_GRH) {
		hdr[0] |= 0x0f;			/* traffic class, high nibble */
		hdr[1] = hdr[2] = hdr[3] = 0xff;	/* traffic class low nibble, flow label */
		hdr[7] = 0xff;			/* hop limit */
	} else if (kind == ROCE_NET_LRH) {
		hdr[0] |= 0xf0;			/* VL */
	} else if (kind == ROCE_NET_IPV4) {
		hdr[1] = 0xff;			/* TOS */
		hdr[8] = 0xff;			/* TTL */
		hdr[10] = hdr[11] = 0xff;	/* header checksum */
	}
	if (udplen)
		hdr[iplen + 6] = hdr[iplen + 7] = 0xff;	/* UDP checksum */
	hdr[iplen + udplen + 4] = 0xff;			/* BTH resv8a */
	crc = kind == ROCE_NET_LRH ? 0 : roce_crc32(0, ones, sizeof(ones));
	crc = roce_crc32(crc, hdr, n);
	return roce_crc32(crc, net + n, (size_t)(end - (net + n)));
}

static uint32_t icrc(const uint8_t *l3, bool ipv6, const uint8_t *end)
{
	return roce_icrc(l3, ipv6 ? ROCE_NET_IPV6 : ROCE_NET_IPV4, end);
}

void roce_icrc_put(uint8_t *at, uint32_t crc)
{
	/* The ICRC goes on the wire least significant byte first, like an Ethernet FCS. */
	at[0] = (uint8_t)crc;
	at[1] = (uint8_t)(crc >> 8);
	at[2] = (uint8_t)(crc >> 16);
	at[3] = (uint8_t)(crc >> 24);
}

uint32_t roce_icrc_get(const uint8_t *at)
{
	return (uint32_t)(at[0] | at[1] << 8 | at[2] << 16 | (uint32_t)at[3] << 24);
}

/* ---------------------------------------------------------------- helpers */
bool roce_gid_is_v4(const uint8_t gid[16])
{
	return net_gid_is_v4(gid);
}

/* The UDP checksum over the IPv6 pseudo-header (RFC 8200 8.1) and the datagram: never 0
 * on IPv6 (0 would say "none"). */
static uint16_t udp6_checksum(const uint8_t *ip6, const uint8_t *udp, size_t udp_len)
{
	uint16_t c = net_csum_fold(net_csum_add(net_pseudo_sum(ip6, true, NET_IPPROTO_UDP,
							       udp_len), udp, udp_len));

	return c ? c : 0xffff;
}

const char *roce_parse_result_name(enum roce_parse_result r)
{
	static const char *const names[ROCE_PARSE_MAX] = {
		[ROCE_NOT_ROCE] = "not RoCEv2",
		[ROCE_OK] = "ok",
		[ROCE_BAD_LENGTH] = "bad length",
		[ROCE_BAD_IP] = "bad IP header",
		[ROCE_BAD_OPCODE] = "bad opcode",
		[ROCE_BAD_ICRC] = "bad ICRC",
		[ROCE_BAD_VCRC] = "bad VCRC",
	};

	return r < ROCE_PARSE_MAX ? names[r] : "?";
}

/* ---------------------------------------------------------------- build */
size_t roce_pad_len(uint32_t payload_len)
{
	return (4 - (payload_len & 3)) & 3;
}

size_t roce_frame_len(const struct roce_pkt *p)
{
	const struct roce_opcode_info *oi = roce_opcode_info(p->opcode);
	size_t net = p->grh ? ROCE_GRH_LEN :
		     (p->ipv6 ? ROCE_IPV6_HLEN : ROCE_IPV4_HLEN) + ROCE_UDP_HLEN;

	return ROCE_ETH_HLEN + net + oi->hdr_len + p->payload_len + roce_pad_len(p->payload_len) +
	       ROCE_ICRC_LEN;
}

void roce_grh_put(const struct roce_pkt *p, uint8_t *h, uint16_t paylen)
{
	put32(h, 6u << 28 | (uint32_t)p->tclass << 20 | (p->flow_label & 0xfffff));
	put16(h + 4, paylen);
	h[6] = ROCE_GRH_NXTHDR;
	h[7] = p->hop_limit;
	memcpy(h + 8, p->sgid, 16);
	memcpy(h + 24, p->dgid, 16);
}

enum roce_parse_result roce_grh_get(const uint8_t *h, size_t avail, struct roce_pkt *p)
{
	uint32_t w;

	if (avail < ROCE_GRH_LEN + ROCE_BTH_LEN + ROCE_ICRC_LEN)
		return ROCE_BAD_LENGTH;
	w = get32(h);
	if (w >> 28 != 6 || h[6] != ROCE_GRH_NXTHDR)
		return ROCE_BAD_IP;
	if (get16(h + 4) != avail - ROCE_GRH_LEN)
		return ROCE_BAD_LENGTH;
	p->grh = p->ipv6 = true;
	p->tclass = (w >> 20) & 0xff;
	p->flow_label = w & 0xfffff;
	p->hop_limit = h[7];
	memcpy(p->sgid, h + 8, 16);
	memcpy(p->dgid, h + 24, 16);
	p->l3 = h;
	return ROCE_OK;
}

/*
 * The BTH (9.2), the extended headers the opcode calls for (in the order of IBA 9.3), the
 * payload and the pad, at @h; returns where the ICRC goes.
 */
uint8_t *roce_bth_build(const struct roce_pkt *p, uint8_t *h)
{
	const struct roce_opcode_info *oi = roce_opcode_info(p->opcode);
	size_t pad = roce_pad_len(p->payload_len);

	h[0] = p->opcode;
	h[1] = (uint8_t)((p->se ? 0x80 : 0) | (p->migreq ? 0x40 : 0) | pad << 4);	/* TVer 0 */
	put16(h + 2, p->pkey);
	h[4] = (uint8_t)((p->fecn ? 0x80 : 0) | (p->becn ? 0x40 : 0));
	put24(h + 5, p->dqpn & 0xffffff);
	h[8] = p->ackreq ? 0x80 : 0;
	put24(h + 9, p->psn & 0xffffff);
	h += ROCE_BTH_LEN;
	/* extended headers, in the order IBA 9.3 gives them */
	if (oi->flags & ROCE_F_DETH) {
		put32(h, p->deth_qkey);
		h[4] = 0;
		put24(h + 5, p->deth_sqpn & 0xffffff);
		h += DETH_LEN;
	}
	if (oi->flags & ROCE_F_XRCETH) {
		h[0] = 0;
		put24(h + 1, p->xrc_srqn & 0xffffff);
		h += XRCETH_LEN;
	}
	if (oi->flags & ROCE_F_RETH) {
		put64(h, p->reth_va);
		put32(h + 8, p->reth_rkey);
		put32(h + 12, p->reth_len);
		h += RETH_LEN;
	}
	if (oi->flags & ROCE_F_ATOMICETH) {
		put64(h, p->atomic_va);
		put32(h + 8, p->atomic_rkey);
		put64(h + 12, p->atomic_swap_add);
		put64(h + 20, p->atomic_compare);
		h += ATOMICETH_LEN;
	}
	if (oi->flags & ROCE_F_AETH) {
		h[0] = p->aeth_syndrome;
		put24(h + 1, p->aeth_msn & 0xffffff);
		h += AETH_LEN;
	}
	if (oi->flags & ROCE_F_ATOMICACKETH) {
		put64(h, p->atomic_orig);
		h += ATOMICACK_LEN;
	}
	if (oi->flags & ROCE_F_IMMDT) {
		put32(h, p->imm);
		h += IMMDT_LEN;
	}
	if (oi->flags & ROCE_F_IETH) {
		put32(h, p->ieth_rkey);
		h += IETH_LEN;
	}
	if (p->payload_len && p->payload != h)	/* else gathered in place */
		memcpy(h, p->payload, p->payload_len);
	h += p->payload_len;
	memset(h, 0, pad);
	return h + pad;
}

size_t roce_build(const struct roce_pkt *p, uint8_t *buf, size_t cap)
{
	const struct roce_opcode_info *oi = roce_opcode_info(p->opcode);
	size_t len = roce_frame_len(p), iplen = p->ipv6 ? ROCE_IPV6_HLEN : ROCE_IPV4_HLEN;
	size_t udp_len = len - ROCE_ETH_HLEN - iplen;
	uint8_t *l3 = buf + ROCE_ETH_HLEN, *udp = l3 + iplen, *h = udp + ROCE_UDP_HLEN;
	struct net_ip ip;

	if (!oi->flags || len > cap || len > 0xffff ||
	    (p->payload_len && !(oi->flags & ROCE_F_PAYLOAD)))
		return 0;
	if (p->grh) {		/* RoCE v1: any GIDs, IPv4-mapped ones too */
		net_eth_put(buf, p->dmac, p->smac, ROCE_ETHERTYPE_V1);
		roce_grh_put(p, l3, (uint16_t)(len - ROCE_ETH_HLEN - ROCE_GRH_LEN));
		h = roce_bth_build(p, l3 + ROCE_GRH_LEN);
		roce_icrc_put(h, roce_icrc(l3, ROCE_NET_GRH, h));
		return len;
	}
	if (roce_gid_is_v4(p->sgid) == p->ipv6 || roce_gid_is_v4(p->dgid) == p->ipv6)
		return 0;
	net_eth_put(buf, p->dmac, p->smac, p->ipv6 ? ROCE_ETHERTYPE_IPV6 : ROCE_ETHERTYPE_IPV4);
	ip.ipv6 = p->ipv6;
	ip.tclass = p->tclass;
	ip.hop_limit = p->hop_limit;
	ip.flow_label = p->flow_label;
	ip.ip_id = 0;
	memcpy(ip.sgid, p->sgid, 16);
	memcpy(ip.dgid, p->dgid, 16);
	net_ip_put(l3, &ip, NET_IPPROTO_UDP, udp_len);
	put16(udp, p->udp_sport);
	put16(udp + 2, ROCE_UDP_PORT);
	put16(udp + 4, (uint16_t)udp_len);
	put16(udp + 6, 0);

	h = roce_bth_build(p, h);
	if (p->ipv6)
		put16(udp + 6, udp6_checksum(l3, udp, udp_len - ROCE_ICRC_LEN));
	roce_icrc_put(h, icrc(l3, p->ipv6, h));
	return len;
}

bool roce_icrc_update(uint8_t *f, size_t len)
{
	size_t iplen, udp_len;
	bool ipv6;
	uint8_t *l3 = f + ROCE_ETH_HLEN, *end;

	if (len < ROCE_ETH_HLEN + ROCE_IPV4_HLEN)
		return false;
	if (get16(f + 12) == ROCE_ETHERTYPE_V1) {
		if (len < ROCE_ETH_HLEN + ROCE_GRH_LEN + ROCE_BTH_LEN + ROCE_ICRC_LEN ||
		    get16(l3 + 4) < ROCE_BTH_LEN + ROCE_ICRC_LEN ||
		    get16(l3 + 4) > len - ROCE_ETH_HLEN - ROCE_GRH_LEN)
			return false;
		end = l3 + ROCE_GRH_LEN + get16(l3 + 4) - ROCE_ICRC_LEN;
		roce_icrc_put(end, roce_icrc(l3, ROCE_NET_GRH, end));
		return true;
	}
	ipv6 = get16(f + 12) == ROCE_ETHERTYPE_IPV6;
	iplen = ipv6 ? ROCE_IPV6_HLEN : ROCE_IPV4_HLEN;
	if (len < ROCE_ETH_HLEN + iplen + ROCE_UDP_HLEN + ROCE_BTH_LEN + ROCE_ICRC_LEN)
		return false;
	udp_len = get16(l3 + iplen + 4);
	if (udp_len < ROCE_UDP_HLEN + ROCE_BTH_LEN + ROCE_ICRC_LEN ||
	    udp_len > len - ROCE_ETH_HLEN - iplen)
		return false;
	end = l3 + iplen + udp_len - ROCE_ICRC_LEN;
	roce_icrc_put(end, icrc(l3, ipv6, end));
	return true;
}

/* ---------------------------------------------------------------- parse */
/* Is there a valid BTH with the opcode's headers and its pad between @h and @end (the
 * ICRC)? */
enum roce_parse_result roce_bth_check(const uint8_t *h, const uint8_t *end)
{
	const struct roce_opcode_info *oi;

	if (end - h < ROCE_BTH_LEN)
		return ROCE_BAD_LENGTH;
	oi = roce_opcode_info(h[0]);
	if (!oi->flags || (h[1] & 0x0f) != 0)
		return ROCE_BAD_OPCODE;		/* unknown opcode or transport version */
	if ((size_t)(end - h) < (size_t)oi->hdr_len + ((h[1] >> 4) & 3))
		return ROCE_BAD_LENGTH;
	return ROCE_OK;
}

/* The transport headers and payload of a packet roce_bth_check() accepted. */
enum roce_parse_result roce_bth_parse(const uint8_t *h, const uint8_t *end, struct roce_pkt *p)
{
	const struct roce_opcode_info *oi = roce_opcode_info(h[0]);
	size_t pad = (h[1] >> 4) & 3;

	p->opcode = h[0];
	p->se = h[1] & 0x80;
	p->migreq = h[1] & 0x40;
	p->pkey = get16(h + 2);
	p->fecn = h[4] & 0x80;
	p->becn = h[4] & 0x40;
	p->dqpn = get24(h + 5);
	p->ackreq = h[8] & 0x80;
	p->psn = get24(h + 9);
	h += ROCE_BTH_LEN;
	if (oi->flags & ROCE_F_DETH) {
		p->deth_qkey = get32(h);
		p->deth_sqpn = get24(h + 5);
		h += DETH_LEN;
	}
	if (oi->flags & ROCE_F_XRCETH) {
		p->xrc_srqn = get24(h + 1);
		h += XRCETH_LEN;
	}
	if (oi->flags & ROCE_F_RETH) {
		p->reth_va = get64(h);
		p->reth_rkey = get32(h + 8);
		p->reth_len = get32(h + 12);
		h += RETH_LEN;
	}
	if (oi->flags & ROCE_F_ATOMICETH) {
		p->atomic_va = get64(h);
		p->atomic_rkey = get32(h + 8);
		p->atomic_swap_add = get64(h + 12);
		p->atomic_compare = get64(h + 20);
		h += ATOMICETH_LEN;
	}
	if (oi->flags & ROCE_F_AETH) {
		p->aeth_syndrome = h[0];
		p->aeth_msn = get24(h + 1);
		h += AETH_LEN;
	}
	if (oi->flags & ROCE_F_ATOMICACKETH) {
		p->atomic_orig = get64(h);
		h += ATOMICACK_LEN;
	}
	if (oi->flags & ROCE_F_IMMDT) {
		p->imm = get32(h);
		h += IMMDT_LEN;
	}
	if (oi->flags & ROCE_F_IETH) {
		p->ieth_rkey = get32(h);
		h += IETH_LEN;
	}
	p->payload = h;
	p->payload_len = (uint32_t)(end - h - pad);
	if (p->payload_len && !(oi->flags & ROCE_F_PAYLOAD))
		return ROCE_BAD_LENGTH;
	return ROCE_OK;
}

/* RoCE v1 (Annex A16): the GRH after the Ethernet header, as on an InfiniBand link. */
static enum roce_parse_result parse_v1(const uint8_t *f, size_t len, struct roce_pkt *p)
{
	const uint8_t *l3 = f + ROCE_ETH_HLEN, *h = l3 + ROCE_GRH_LEN, *end;
	enum roce_parse_result r;
	size_t avail;

	if (len < ROCE_ETH_HLEN + ROCE_GRH_LEN)
		return ROCE_BAD_LENGTH;
	/* Ethernet pads short frames: the GRH's PayLen says where the packet ends. */
	avail = ROCE_GRH_LEN + (size_t)get16(l3 + 4);
	if (avail > len - ROCE_ETH_HLEN)
		return ROCE_BAD_LENGTH;
	r = roce_grh_get(l3, avail, p);
	if (r != ROCE_OK)
		return r;
	end = l3 + avail - ROCE_ICRC_LEN;
	r = roce_bth_check(h, end);
	if (r != ROCE_OK)
		return r;
	if (roce_icrc_get(end) != roce_icrc(l3, ROCE_NET_GRH, end))
		return ROCE_BAD_ICRC;
	memcpy(p->dmac, f, 6);
	memcpy(p->smac, f + 6, 6);
	return roce_bth_parse(h, end, p);
}

enum roce_parse_result roce_parse(const uint8_t *f, size_t len, struct roce_pkt *p)
{
	const uint8_t *l3 = f + ROCE_ETH_HLEN, *udp, *h, *end;
	enum roce_parse_result r;
	size_t iplen, udp_len, l4_len;
	struct net_ip ip;

	memset(p, 0, sizeof(*p));
	if (len < ROCE_ETH_HLEN)
		return ROCE_NOT_ROCE;
	if (net_ethertype(f) == ROCE_ETHERTYPE_V1)
		return parse_v1(f, len, p);
	iplen = net_ip_match(f, len, NET_IPPROTO_UDP);
	if (!iplen)
		return ROCE_NOT_ROCE;
	udp = l3 + iplen;
	if (len < ROCE_ETH_HLEN + iplen + ROCE_UDP_HLEN || get16(udp + 2) != ROCE_UDP_PORT)
		return ROCE_NOT_ROCE;

	/* From here on it claims to be RoCEv2: every inconsistency is an error. */
	switch (net_ip_check(f, len, &ip, &l4_len)) {
	case NET_IP_OK:
		break;
	case NET_IP_BAD_LENGTH:
		return ROCE_BAD_LENGTH;
	default:
		return ROCE_BAD_IP;
	}
	p->ipv6 = ip.ipv6;
	udp_len = get16(udp + 4);
	if (udp_len != l4_len || udp_len < ROCE_UDP_HLEN + ROCE_BTH_LEN + ROCE_ICRC_LEN)
		return ROCE_BAD_LENGTH;
	h = udp + ROCE_UDP_HLEN;
	end = udp + udp_len - ROCE_ICRC_LEN;
	r = roce_bth_check(h, end);
	if (r != ROCE_OK)
		return r;
	if (roce_icrc_get(end) != icrc(l3, p->ipv6, end))
		return ROCE_BAD_ICRC;

	memcpy(p->dmac, f, 6);
	memcpy(p->smac, f + 6, 6);
	p->tclass = ip.tclass;
	p->flow_label = ip.flow_label;
	p->hop_limit = ip.hop_limit;
	memcpy(p->sgid, ip.sgid, 16);
	memcpy(p->dgid, ip.dgid, 16);
	p->l3 = l3;
	p->udp_sport = get16(udp);
	return roce_bth_parse(h, end, p);
}

const uint8_t *roce_bth_find(const uint8_t *f, size_t len)
{
	size_t iplen, bth;

	if (len < ROCE_ETH_HLEN)
		return NULL;
	if (net_ethertype(f) == ROCE_ETHERTYPE_V1) {
		bth = ROCE_ETH_HLEN + ROCE_GRH_LEN;
	} else {
		iplen = net_ip_match(f, len, NET_IPPROTO_UDP);
		bth = ROCE_ETH_HLEN + iplen + ROCE_UDP_HLEN;
		if (!iplen || len < bth || get16(f + bth - ROCE_UDP_HLEN + 2) != ROCE_UDP_PORT)
			return NULL;
	}
	return len >= bth + ROCE_BTH_LEN ? f + bth : NULL;
}

uint8_t roce_bth_opcode(const uint8_t *bth)
{
	return bth[0];
}

uint32_t roce_bth_dqpn(const uint8_t *bth)
{
	return get24(bth + 5);
}

uint32_t roce_bth_psn(const uint8_t *bth)
{
	return get24(bth + 9);
}
