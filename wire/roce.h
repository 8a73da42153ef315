/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * RoCE wire format (IBA Vol 1 ch. 9 transport headers, Annex A16 RoCE v1, Annex A17
 * RoCEv2): the opcode table, a parsed-packet description, and a builder and a validating
 * parser for Ethernet + IPv4/IPv6 + UDP(4791) + BTH + extended headers + payload + pad +
 * ICRC (RoCE v2), and Ethernet (Ethertype 0x8915) + GRH + BTH ... + ICRC (RoCE v1).
 * All byte swapping of header fields happens here and nowhere else.
 */
#ifndef QHCA_ROCE_H
#define QHCA_ROCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "net.h"

#define ROCE_UDP_PORT		4791
#define ROCE_ETH_HLEN	NET_ETH_HLEN
#define ROCE_IPV4_HLEN	NET_IPV4_HLEN
#define ROCE_IPV6_HLEN	NET_IPV6_HLEN
#define ROCE_UDP_HLEN		8
#define ROCE_BTH_LEN		12
#define ROCE_ICRC_LEN		4
#define ROCE_ETHERTYPE_IPV4	NET_ETHERTYPE_IPV4
#define ROCE_ETHERTYPE_IPV6	NET_ETHERTYPE_IPV6
#define ROCE_ETHERTYPE_V1	0x8915	/* RoCE v1: the GRH follows the Ethernet header */
#define ROCE_GRH_LEN		40	/* the GRH (IBA 8.3), the layout of an IPv6 header */
#define ROCE_GRH_NXTHDR		0x1b	/* the GRH's NxtHdr for an IBA transport header */
#define ROCE_DEFAULT_PKEY	0xffff
/* Largest header stack: Eth + IPv6 + UDP + BTH + XRCETH + RETH + ImmDt, or + AtomicETH. */
#define ROCE_MAX_HDR		(ROCE_ETH_HLEN + ROCE_IPV6_HLEN + ROCE_UDP_HLEN + ROCE_BTH_LEN + 4 + \
				 28 + 8)

/* Transport service in the opcode's top three bits (IBA 9.2.1). */
#define ROCE_TS_RC		0x00
#define ROCE_TS_UC		0x20
#define ROCE_TS_UD		0x60
#define ROCE_TS_XRC		0xa0	/* the RC operations, requests with an XRCETH */
#define ROCE_TS_MASK		0xe0

/* Operation in the opcode's low five bits (IBA table 38). */
enum roce_op {
	ROCE_OP_SEND_FIRST = 0x00,
	ROCE_OP_SEND_MIDDLE = 0x01,
	ROCE_OP_SEND_LAST = 0x02,
	ROCE_OP_SEND_LAST_IMM = 0x03,
	ROCE_OP_SEND_ONLY = 0x04,
	ROCE_OP_SEND_ONLY_IMM = 0x05,
	ROCE_OP_WRITE_FIRST = 0x06,
	ROCE_OP_WRITE_MIDDLE = 0x07,
	ROCE_OP_WRITE_LAST = 0x08,
	ROCE_OP_WRITE_LAST_IMM = 0x09,
	ROCE_OP_WRITE_ONLY = 0x0a,
	ROCE_OP_WRITE_ONLY_IMM = 0x0b,
	ROCE_OP_READ_REQUEST = 0x0c,
	ROCE_OP_READ_RESPONSE_FIRST = 0x0d,
	ROCE_OP_READ_RESPONSE_MIDDLE = 0x0e,
	ROCE_OP_READ_RESPONSE_LAST = 0x0f,
	ROCE_OP_READ_RESPONSE_ONLY = 0x10,
	ROCE_OP_ACKNOWLEDGE = 0x11,
	ROCE_OP_ATOMIC_ACKNOWLEDGE = 0x12,
	ROCE_OP_COMPARE_SWAP = 0x13,
	ROCE_OP_FETCH_ADD = 0x14,
	ROCE_OP_SEND_LAST_INV = 0x16,
	ROCE_OP_SEND_ONLY_INV = 0x17,
	ROCE_OP_ATOMIC_WRITE = 0x1d,	/* IBA 1.5: RETH and 8 bytes of payload */
};

/*
 * AETH syndrome (IBA 9.7.5.2.4, table 42): a 2-bit type above a 5-bit value, the credit
 * count of an ACK, the timer of an RNR NAK or the code of a NAK.
 */
#define ROCE_AETH_TYPE(syn)		((syn) >> 5)
#define ROCE_AETH_VALUE(syn)		((syn) & 0x1f)
#define ROCE_AETH_TYPE_ACK		0
#define ROCE_AETH_TYPE_RNR_NAK		1
#define ROCE_AETH_TYPE_NAK		3
#define ROCE_AETH_ACK			0x1f	/* ACK, end-to-end credits not used */
#define ROCE_AETH_RNR_NAK(timer)	(0x20 | ((timer) & 0x1f))
#define ROCE_AETH_NAK_PSN_SEQ		0x60	/* PSN sequence error */
#define ROCE_AETH_NAK_INV_REQ		0x61	/* invalid request */
#define ROCE_AETH_NAK_REM_ACCESS	0x62	/* remote access error */
#define ROCE_AETH_NAK_REM_OP		0x63	/* remote operational error */

/* The RNR NAK timer's value in microseconds (IBA table 45: 0 is 655.36 ms). */
extern const uint32_t roce_rnr_timer_us[32];

/* What an opcode carries (roce_opcode_info().flags). */
#define ROCE_F_RETH		(1u << 0)
#define ROCE_F_AETH		(1u << 1)
#define ROCE_F_ATOMICETH	(1u << 2)
#define ROCE_F_ATOMICACKETH	(1u << 3)
#define ROCE_F_IMMDT		(1u << 4)
#define ROCE_F_IETH		(1u << 5)
#define ROCE_F_DETH		(1u << 6)
#define ROCE_F_PAYLOAD		(1u << 7)	/* may carry payload */
#define ROCE_F_REQ		(1u << 8)	/* a request (requester to responder) */
#define ROCE_F_RESP		(1u << 9)	/* a response (responder to requester) */
#define ROCE_F_FIRST		(1u << 10)
#define ROCE_F_MIDDLE		(1u << 11)
#define ROCE_F_LAST		(1u << 12)
#define ROCE_F_SEND		(1u << 13)
#define ROCE_F_WRITE		(1u << 14)
#define ROCE_F_READ		(1u << 15)
#define ROCE_F_ATOMIC		(1u << 16)
#define ROCE_F_ATOMIC_WRITE	(1u << 17)	/* answered by a READ RESPONSE ONLY */
#define ROCE_F_XRCETH		(1u << 18)	/* XRC requests: the XRC SRQ number */

struct roce_opcode_info {
	const char *name;
	uint32_t flags;		/* 0: not a valid opcode */
	uint8_t hdr_len;	/* BTH and every extended header */
};

const struct roce_opcode_info *roce_opcode_info(uint8_t opcode);

/* One packet, RoCEv2 or native InfiniBand (ib.h), as the builders take it and the parsers
 * fill it in. */
struct roce_pkt {
	/* InfiniBand link layer (ib.h): LRH fields, and whether a GRH is present (it then
	 * holds sgid, dgid, tclass, flow_label and hop_limit, and l3 points at it). On
	 * Ethernet (!ib) a GRH means RoCE v1: Ethertype 0x8915, the GRH, the BTH; ipv6 is
	 * then true as well (the GRH has the IPv6 header's layout). */
	bool ib, grh;
	uint8_t vl, sl;
	uint16_t dlid, slid;
	/* L2/L3/L4 (RoCEv2) */
	uint8_t dmac[6], smac[6];
	uint8_t sgid[16], dgid[16];	/* IPv4 as ::ffff:a.b.c.d */
	bool ipv6;
	uint8_t hop_limit;		/* TTL for IPv4 */
	uint8_t tclass;
	uint32_t flow_label;
	uint16_t udp_sport;
	/* BTH */
	uint8_t opcode;
	bool se, migreq, ackreq, fecn, becn;
	uint16_t pkey;
	uint32_t dqpn;			/* 24 bits */
	uint32_t psn;			/* 24 bits */
	/* extended headers, valid as roce_opcode_info(opcode)->flags say */
	uint64_t reth_va;
	uint32_t reth_rkey, reth_len;
	uint8_t aeth_syndrome;
	uint32_t aeth_msn;		/* 24 bits */
	uint64_t atomic_va;
	uint32_t atomic_rkey;
	uint64_t atomic_swap_add, atomic_compare;
	uint64_t atomic_orig;
	uint32_t imm;			/* ImmDt as it is on the wire (big-endian value) */
	uint32_t ieth_rkey;
	uint32_t deth_qkey, deth_sqpn;
	uint32_t xrc_srqn;		/* 24 bits */
	const uint8_t *l3;		/* parse: the IP header or GRH, for a UD receive's GRH */
	/* payload (without pad) */
	const uint8_t *payload;
	uint32_t payload_len;
};

/* Is the IPv6-form GID an IPv4-mapped address (::ffff:a.b.c.d)? */
bool roce_gid_is_v4(const uint8_t gid[16]);

/* Bytes needed to build @p: headers, payload, pad and ICRC. */
size_t roce_frame_len(const struct roce_pkt *p);

/* Build @p into @buf (at least roce_frame_len() bytes); returns the frame length, or 0 if
 * the packet cannot be built (invalid opcode, address family mismatch). */
size_t roce_build(const struct roce_pkt *p, uint8_t *buf, size_t cap);

enum roce_parse_result {
	ROCE_NOT_ROCE = 0,	/* not a RoCE frame: an ordinary Ethernet frame */
	ROCE_OK,
	ROCE_BAD_LENGTH,	/* truncated, or lengths in the headers disagree */
	ROCE_BAD_IP,		/* bad IPv4 header checksum, options, fragments; a GRH
				 * of another version or next header */
	ROCE_BAD_OPCODE,	/* reserved or unsupported opcode, bad transport version */
	ROCE_BAD_ICRC,
	ROCE_BAD_VCRC,		/* InfiniBand: the link-level CRC (ib.h) */
	ROCE_PARSE_MAX
};

const char *roce_parse_result_name(enum roce_parse_result r);

/* Parse and validate @frame; @p->payload points into @frame. */
enum roce_parse_result roce_parse(const uint8_t *frame, size_t len, struct roce_pkt *p);
/*
 * Where the BTH of a RoCE v1 or v2 frame starts, found from the headers before it alone
 * (no length, checksum or ICRC checked: for a capture that looks at frames without taking
 * them); NULL if @f carries no RoCE, or less than a whole BTH.
 */
const uint8_t *roce_bth_find(const uint8_t *frame, size_t len);
/* BTH fields (9.2) of a BTH found so. */
uint8_t roce_bth_opcode(const uint8_t *bth);
uint32_t roce_bth_dqpn(const uint8_t *bth);
uint32_t roce_bth_psn(const uint8_t *bth);

/* The headers the ICRC covers before the BTH (roce_icrc() in roce.c). */
enum roce_net {
	ROCE_NET_IPV4,		/* RoCEv2: IPv4 and UDP */
	ROCE_NET_IPV6,		/* RoCEv2: IPv6 and UDP */
	ROCE_NET_GRH,		/* InfiniBand with a GRH, and RoCE v1 */
	ROCE_NET_LRH,		/* InfiniBand, local: the LRH, then the BTH */
};
uint32_t roce_icrc(const uint8_t *net, enum roce_net kind, const uint8_t *end);
void roce_icrc_put(uint8_t *at, uint32_t crc);
uint32_t roce_icrc_get(const uint8_t *at);

/* The transport part, shared by RoCEv2 and native InfiniBand: BTH, extended headers,
 * payload and pad built at @h (returns where the ICRC goes); checked and parsed between @h
 * and @end (the ICRC). */
uint8_t *roce_bth_build(const struct roce_pkt *p, uint8_t *h);
enum roce_parse_result roce_bth_check(const uint8_t *h, const uint8_t *end);
enum roce_parse_result roce_bth_parse(const uint8_t *h, const uint8_t *end, struct roce_pkt *p);
size_t roce_pad_len(uint32_t payload_len);

/* The GRH (IBA 8.3) of @p at @h, PayLen @paylen (the BTH through the ICRC); and read back
 * from @h with @avail bytes from it to the ICRC's end: ROCE_OK, ROCE_BAD_IP (version or
 * next header) or ROCE_BAD_LENGTH (PayLen disagrees). */
void roce_grh_put(const struct roce_pkt *p, uint8_t *h, uint16_t paylen);
enum roce_parse_result roce_grh_get(const uint8_t *h, size_t avail, struct roce_pkt *p);

/* Recompute the ICRC of a frame in place (tests and fuzzers); false if it cannot be. */
bool roce_icrc_update(uint8_t *frame, size_t len);

/* CRC-32 (IEEE 802.3, reflected, as zlib's crc32) continuing from @crc. */
uint32_t roce_crc32(uint32_t crc, const void *buf, size_t len);
uint32_t roce_crc32_table(uint32_t crc, const void *buf, size_t len);
extern const char roce_crc32_impl[];	/* which implementation roce_crc32() is */

#endif /* QHCA_ROCE_H */
