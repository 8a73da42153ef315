/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * iWARP wire format: Ethernet + IPv4/IPv6 + TCP segments, MPA (RFC 5044, with the enhanced
 * connection setup of RFC 6581), DDP (RFC 5041) and RDMAP (RFC 5040). Builders and
 * validating parsers only: no connection state (tcp.c keeps the TCP endpoint, the engine
 * the MPA/DDP/RDMAP state). All byte swapping of header fields happens in iwarp.c.
 *
 * THE API BELOW IS STABLE: struct iw_tcp_seg, iw_tcp_build(), iw_tcp_parse() and
 * enum iw_parse_result are used by tcp.c; extend them (new fields, new enum values before
 * IW_PARSE_MAX), do not change what existing fields and values mean.
 */
#ifndef QHCA_IWARP_H
#define QHCA_IWARP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "net.h"

/* ---------------------------------------------------------------- parse results */
enum iw_parse_result {
	IW_NOT_TCP = 0,		/* not TCP over IPv4/IPv6: an ordinary Ethernet frame */
	IW_OK,
	IW_BAD_LENGTH,		/* truncated, or lengths in the headers disagree */
	IW_BAD_IP,		/* bad IPv4 header checksum, IP options, a fragment */
	IW_BAD_TCP,		/* bad TCP data offset or options, a zero port */
	IW_BAD_CHECKSUM,	/* the TCP checksum is wrong */
	IW_BAD_MPA,		/* MPA Req/Rep: bad key, private data over 512, short enhanced */
	IW_BAD_CRC,		/* MPA: the FPDU's CRC32c is wrong */
	IW_BAD_VERSION,		/* DDP (DV) or RDMAP (RV) version not 1, MPA revision not 1/2 */
	IW_BAD_OPCODE,		/* reserved/unsupported RDMAP opcode, T or L bit not as it says */
	IW_BAD_QN,		/* untagged segment on a queue its opcode does not use */
	IW_INCOMPLETE,		/* stream extractor, MPA Req/Rep: needs more bytes (no error) */
	IW_TOO_BIG,		/* stream extractor: FPDU larger than the receive buffer */
	IW_PARSE_MAX
};

const char *iw_parse_result_name(enum iw_parse_result r);

/* ---------------------------------------------------------------- TCP segments */
#define IW_ETH_HLEN		NET_ETH_HLEN
#define IW_IPV4_HLEN		NET_IPV4_HLEN
#define IW_IPV6_HLEN		NET_IPV6_HLEN
#define IW_TCP_HLEN		20	/* without options */
#define IW_TCP_MAX_OPT		40
#define IW_ETHERTYPE_IPV4	NET_ETHERTYPE_IPV4
#define IW_ETHERTYPE_IPV6	NET_ETHERTYPE_IPV6
#define IW_IPPROTO_TCP		NET_IPPROTO_TCP
/* Largest header stack iw_tcp_build() writes: Eth + IPv6 + TCP + MSS, SACK-permitted,
 * timestamps and window scale (20 bytes of options). */
#define IW_TCP_MAX_HDR		(IW_ETH_HLEN + IW_IPV6_HLEN + IW_TCP_HLEN + 20)

/* TCP flags (RFC 9293 3.1, RFC 3168 for ECE and CWR) */
#define IW_TCP_FIN		0x01
#define IW_TCP_SYN		0x02
#define IW_TCP_RST		0x04
#define IW_TCP_PSH		0x08
#define IW_TCP_ACK		0x10
#define IW_TCP_URG		0x20
#define IW_TCP_ECE		0x40
#define IW_TCP_CWR		0x80

/*
 * One TCP segment in one Ethernet frame, as iw_tcp_build() takes it and iw_tcp_parse()
 * fills it in. Options: build writes those asked for (on any segment: the caller knows
 * which belong on a SYN); parse reports those present, whatever the flags, and skips
 * unknown options, SACK blocks and wrongly sized known options.
 */
struct iw_tcp_seg {
	uint8_t dmac[6], smac[6];
	uint8_t sgid[16], dgid[16];	/* IPv4 as ::ffff:a.b.c.d (roce_gid_is_v4()) */
	bool ipv6;
	uint8_t hop_limit;		/* TTL for IPv4 */
	uint8_t tclass;			/* IPv4 TOS, IPv6 traffic class */
	uint32_t flow_label;		/* IPv6 only, 20 bits */
	uint16_t ip_id;			/* IPv4 identification (DF is always set) */
	uint16_t sport, dport;
	uint32_t seq, ack;
	uint8_t flags;			/* IW_TCP_* */
	uint16_t window;		/* as on the wire: not scaled */
	uint16_t urg_ptr;
	/* options */
	uint16_t mss;			/* 0: no MSS option */
	bool has_wscale;
	uint8_t wscale;			/* parse: above 14 reads as 14 (RFC 7323 2.3) */
	bool sack_perm;
	bool has_ts;
	uint32_t ts_val, ts_ecr;
	/* the segment's data; build copies it (unless it already is where it goes) */
	const uint8_t *payload;
	uint32_t payload_len;
};

/* Bytes of TCP options iw_tcp_build() writes for @s (a multiple of 4). */
size_t iw_tcp_opt_len(const struct iw_tcp_seg *s);
/* Bytes from the frame's start to the TCP payload; the payload goes at buf + this. */
size_t iw_tcp_hdr_len(const struct iw_tcp_seg *s);
/* Bytes iw_tcp_build() writes for @s: headers and payload. */
size_t iw_tcp_frame_len(const struct iw_tcp_seg *s);

/* Build @s into @buf; returns the frame length, or 0 if it cannot be built (a GID not of
 * the address family, the frame larger than @cap or than an IP packet can be). The IPv4
 * header checksum and the TCP checksum are computed. */
size_t iw_tcp_build(const struct iw_tcp_seg *s, uint8_t *buf, size_t cap);

/* Parse and validate @frame (IP and TCP checksums included); @s->payload points into
 * @frame. IW_NOT_TCP for anything not TCP over IPv4 or IPv6 without extension headers;
 * Ethernet padding after the IP packet is ignored. */
enum iw_parse_result iw_tcp_parse(const uint8_t *frame, size_t len, struct iw_tcp_seg *s);

/* ---------------------------------------------------------------- CRC32c */
/* CRC32c (Castagnoli, reflected, RFC 3385; the MPA CRC of RFC 5044) continuing from @crc:
 * 0 to start, and the result as is to continue. ISA-L where the build found it, else the
 * slice-by-8 tables of iw_crc32c_table(). */
uint32_t iw_crc32c(uint32_t crc, const void *buf, size_t len);
uint32_t iw_crc32c_table(uint32_t crc, const void *buf, size_t len);
extern const char iw_crc32c_impl[];	/* which implementation iw_crc32c() is */

/* ---------------------------------------------------------------- MPA connection setup */
/*
 * MPA Request and Reply frames (RFC 5044 7.1), with the enhanced connection setup of
 * RFC 6581: in revision 2 with the enhanced flag, the private data starts with IRD and ORD
 * and the peer-to-peer ready-to-receive (RTR) choices, laid out as Linux siw, cxgb4 and
 * irdma do:
 *   bits 31..16: P2P (the "A" bit) | zero-length FPDU (SEND) RTR ("B") | IRD (14 bits)
 *   bits 15..0:  zero-length RDMA WRITE RTR | zero-length RDMA READ RTR | ORD (14 bits)
 * Revision 1 frames parse (no enhanced data; IRD/ORD are then the ULP's business) and can
 * be built; revision 0 and above 2 are IW_BAD_VERSION (the fields still filled in, so a
 * reject can be answered). Reserved flag bits (siw's experimental GSO bit among them) are
 * ignored on receipt and written as zero.
 */
#define IW_MPA_KEY_LEN		16
#define IW_MPA_KEY_REQ		"MPA ID Req Frame"
#define IW_MPA_KEY_REP		"MPA ID Rep Frame"
#define IW_MPA_RR_HLEN		20	/* key, flags, revision, PD_Length */
#define IW_MPA_PD_MAX		512	/* RFC 5044 7.1; irdma's limit too */
#define IW_MPA_PD_MAX_SIW	256	/* Linux siw refuses more (RDMA_MAX_PRIVATE_DATA) */
#define IW_MPA_ENH_LEN		4	/* RFC 6581 IRD/ORD word pair */
#define IW_MPA_RR_MAX		(IW_MPA_RR_HLEN + IW_MPA_PD_MAX)
#define IW_MPA_IRD_ORD_MAX	0x3fff	/* 14 bits; 0x3fff also reads as "no limit given" */

/* the flags byte */
#define IW_MPA_F_MARKERS	0x80
#define IW_MPA_F_CRC		0x40
#define IW_MPA_F_REJECT		0x20
#define IW_MPA_F_ENHANCED	0x10	/* RFC 6581: private data starts with IRD/ORD */

struct iw_mpa_rr {
	bool reply;		/* "MPA ID Rep Frame", else "MPA ID Req Frame" */
	bool markers;		/* parse only: the builder refuses markers (as siw does) */
	bool crc, reject;
	uint8_t rev;		/* 1 or 2 */
	bool enhanced;		/* rev 2 with IW_MPA_F_ENHANCED: the fields below are valid */
	bool p2p;		/* peer-to-peer: an RTR message follows the reply */
	bool rtr_send;		/* RTR as a zero-length SEND (FPDU) */
	bool rtr_write;		/* RTR as a zero-length RDMA WRITE */
	bool rtr_read;		/* RTR as a zero-length RDMA READ */
	uint16_t ird, ord;	/* 14 bits each */
	/* the ULP's private data, after the enhanced word pair if there is one */
	const uint8_t *pdata;
	uint16_t pdata_len;
};

/* Bytes iw_mpa_rr_build() writes for @rr. */
size_t iw_mpa_rr_len(const struct iw_mpa_rr *rr);
/* Build @rr into @buf (the TCP payload); returns its length, or 0 if it cannot be built
 * (markers asked for, revision not 1 or 2, enhanced without revision 2, IRD/ORD over 14
 * bits, private data over IW_MPA_PD_MAX in all, or @cap too small). */
size_t iw_mpa_rr_build(const struct iw_mpa_rr *rr, uint8_t *buf, size_t cap);
/*
 * Parse a Request or Reply at the start of @buf (in-order TCP payload as received so
 * far). IW_INCOMPLETE: not all of it is here yet (the key seen so far and the private
 * data length are already checked: at most IW_MPA_RR_MAX bytes are ever needed); IW_OK:
 * *@used bytes were the frame (FPDUs may follow them in the same stream); IW_BAD_MPA: bad
 * key, private data length over IW_MPA_PD_MAX, enhanced flag with less than 4 bytes of
 * private data. rr->pdata points into @buf.
 */
enum iw_parse_result iw_mpa_rr_parse(const uint8_t *buf, size_t len, struct iw_mpa_rr *rr,
				     size_t *used);

/* ---------------------------------------------------------------- DDP and RDMAP */
/*
 * RDMAP opcodes (RFC 5040 4.2). RFC 7306 adds 0x8 and 0x9 (Immediate Data, with SE) and
 * 0xa and 0xb (Atomic Request and Response); Linux siw implements none of them (it answers
 * them with a Terminate), so they are reserved here too: IW_BAD_OPCODE.
 */
enum iw_op {
	IW_OP_WRITE = 0x0,
	IW_OP_READ_REQ = 0x1,
	IW_OP_READ_RESP = 0x2,
	IW_OP_SEND = 0x3,
	IW_OP_SEND_INV = 0x4,
	IW_OP_SEND_SE = 0x5,
	IW_OP_SEND_SE_INV = 0x6,
	IW_OP_TERMINATE = 0x7,
	IW_OP_COUNT
};

/* Untagged queues RDMAP uses (RFC 5040 5.1). */
#define IW_QN_SEND		0
#define IW_QN_READ_REQ		1
#define IW_QN_TERMINATE		2

#define IW_MPA_HLEN		2	/* ULPDU length */
#define IW_MPA_CRC_LEN		4
#define IW_DDP_TAGGED_HLEN	14	/* control, RsvdULP/RDMAP control, STag, TO */
#define IW_DDP_UNTAGGED_HLEN	18	/* control, RsvdULP (5 bytes), QN, MSN, MO */
#define IW_READ_REQ_HLEN	28	/* sink STag, sink TO, size, source STag, source TO */
#define IW_TERM_HLEN		4	/* layer, etype, ecode, M/D/R */
#define IW_DDP_VERSION		1
#define IW_RDMAP_VERSION	1
/* Largest FPDU: a 16-bit ULPDU length, pad and CRC. */
#define IW_FPDU_MAX		(IW_MPA_HLEN + 0xffff + 3 + IW_MPA_CRC_LEN)

/* What an opcode is (iw_opcode_info().flags). */
#define IW_F_TAGGED		(1u << 0)	/* tagged buffer model: STag and TO */
#define IW_F_PAYLOAD		(1u << 1)	/* may carry payload */
#define IW_F_SEND		(1u << 2)
#define IW_F_INVAL		(1u << 3)	/* RsvdULP carries the STag to invalidate */
#define IW_F_SE			(1u << 4)	/* solicited event */
#define IW_F_WRITE		(1u << 5)
#define IW_F_READ_REQ		(1u << 6)	/* + the RDMA Read Request header */
#define IW_F_READ_RESP		(1u << 7)
#define IW_F_TERMINATE		(1u << 8)	/* + the Terminate header and copies */
#define IW_F_SINGLE		(1u << 9)	/* one DDP segment: L must be set */

struct iw_opcode_info {
	const char *name;
	uint32_t flags;		/* 0: not a valid opcode */
	uint8_t hdr_len;	/* DDP and RDMAP headers, after the ULPDU length */
	uint8_t qn;		/* untagged: the queue it goes to */
};

const struct iw_opcode_info *iw_opcode_info(uint8_t opcode);

/* Terminate layers and error types (RFC 5040 4.8), as siw names them. */
#define IW_TERM_LAYER_RDMAP	0
#define IW_TERM_LAYER_DDP	1
#define IW_TERM_LAYER_LLP	2	/* MPA */

/*
 * One FPDU's DDP segment and RDMAP message, as iw_fpdu_build() takes it and
 * iw_fpdu_parse() fills it in. The fields each opcode uses are those its flags say.
 */
struct iw_pkt {
	uint8_t opcode;		/* enum iw_op */
	bool last;		/* DDP L bit: the message's last segment */
	/* tagged: RDMA Write, Read Response */
	uint32_t stag;
	uint64_t to;
	/* untagged: Send*, Read Request, Terminate. qn is filled in by parse; build writes
	 * the opcode's queue whatever qn says. */
	uint32_t qn, msn, mo;
	uint32_t inval_stag;	/* Send with Invalidate (with or without SE) */
	/* RDMA Read Request (RFC 5040 4.4) */
	uint32_t sink_stag;
	uint64_t sink_to;
	uint32_t read_size;
	uint32_t src_stag;
	uint64_t src_to;
	/*
	 * Terminate (RFC 5040 4.8): layer, error type and code, and the header copies as
	 * siw sends them: with D, the 16-bit DDP segment length (valid if M) and the
	 * terminated DDP header (14 bytes tagged, 18 untagged, by its own T bit); with R and
	 * room left, the 28-byte RDMA Read Request header (siw sets R for a SEND too, with
	 * nothing after the DDP header).
	 */
	uint8_t term_layer, term_etype, term_ecode;
	bool term_m, term_d, term_r;
	uint16_t term_ddp_seg_len;
	const uint8_t *term_ddp_hdr;
	uint8_t term_ddp_hdr_len;	/* 0, 14 or 18 */
	const uint8_t *term_rdma_hdr;
	uint8_t term_rdma_hdr_len;	/* 0 or 28 */
	/* parse: the ULPDU (the DDP header onward) within the FPDU */
	const uint8_t *ulpdu;
	uint16_t ulpdu_len;
	/* the DDP payload (for a Terminate: the copies, as parsed above) */
	const uint8_t *payload;
	uint32_t payload_len;
};

/* FPDU length for a ULPDU of @ulpdu_len bytes: length field, ULPDU, pad, CRC. */
size_t iw_fpdu_len_for(size_t ulpdu_len);
/* The largest ULPDU whose FPDU fits in @mss bytes (RFC 5044 MULPDU), 0 if none. */
uint32_t iw_mulpdu(uint32_t mss);
/* Bytes iw_fpdu_build() writes for @p, 0 if it cannot be built. */
size_t iw_fpdu_len(const struct iw_pkt *p);
/*
 * Build @p as an FPDU: ULPDU length, DDP and RDMAP headers, payload, pad, and the CRC32c
 * if @crc (else zeros, RFC 5044 4.4). Returns its length, or 0 if it cannot be built
 * (invalid opcode, payload on an opcode without, Terminate copies of the wrong size, the
 * ULPDU over 65535 bytes, @cap too small). The payload may already be in place.
 */
size_t iw_fpdu_build(const struct iw_pkt *p, bool crc, uint8_t *buf, size_t cap);
/*
 * Parse and validate one whole FPDU of exactly @len bytes: the CRC if @crc (pass false
 * for FPDUs the stream extractor already checked), DDP and RDMAP versions, opcode, T bit,
 * queue number, lengths. @p's pointers point into @fpdu.
 */
enum iw_parse_result iw_fpdu_parse(const uint8_t *fpdu, size_t len, bool crc, struct iw_pkt *p);

/* One TCP segment (@s, its payload ignored) carrying the FPDU @p: iw_fpdu_build() in place
 * after the TCP headers, then iw_tcp_build(). Returns the frame length or 0. */
size_t iw_frame_build(const struct iw_tcp_seg *s, const struct iw_pkt *p, bool crc,
		      uint8_t *buf, size_t cap);

/* ---------------------------------------------------------------- FPDU stream */
/*
 * Finds FPDUs in the in-order TCP byte stream of one connection in full operation (after
 * the MPA Reply), whatever the segment boundaries. A whole FPDU found in the input is
 * handed out where it lies; one split across pieces is gathered in the caller's buffer of
 * @cap bytes (the largest FPDU accepted: IW_FPDU_MAX takes any). Errors are final, as MPA
 * without markers cannot find the next FPDU after a bad one: IW_BAD_CRC, IW_TOO_BIG.
 */
struct iw_fpdu_rx {
	uint8_t *buf;
	uint32_t cap;
	uint32_t have;		/* bytes of the FPDU being gathered */
	bool crc;		/* the CRC was negotiated: check it */
	enum iw_parse_result err;	/* IW_OK, or the error that ended the stream */
};

void iw_fpdu_rx_init(struct iw_fpdu_rx *rx, uint8_t *buf, uint32_t cap, bool crc);
/*
 * Take bytes from *@data (*@len of them), advancing both. IW_OK: *@fpdu and *@fpdu_len
 * are one whole FPDU with a good CRC (valid until the next call and while the input is);
 * call again with the rest. IW_INCOMPLETE: all input taken, a partial FPDU kept. Else the
 * stream's error, again on every later call.
 */
enum iw_parse_result iw_fpdu_rx_next(struct iw_fpdu_rx *rx, const uint8_t **data, size_t *len,
				     const uint8_t **fpdu, size_t *fpdu_len);

#endif /* QHCA_IWARP_H */
