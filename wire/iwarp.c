// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * iWARP wire format: TCP segments over IPv4/IPv6 (RFC 9293, RFC 791, RFC 8200), MPA
 * (RFC 5044, RFC 6581), DDP (RFC 5041) and RDMAP (RFC 5040), as iwarp.h describes.
 */
#include <string.h>

#include "iwarp.h"
#include "net.h"
#include "wire_be.h"

const char *iw_parse_result_name(enum iw_parse_result r)
{
	static const char *const names[IW_PARSE_MAX] = {
		[IW_NOT_TCP] = "not TCP",
		[IW_OK] = "ok",
		[IW_BAD_LENGTH] = "bad length",
		[IW_BAD_IP] = "bad IP header",
		[IW_BAD_TCP] = "bad TCP header",
		[IW_BAD_CHECKSUM] = "bad TCP checksum",
		[IW_BAD_MPA] = "bad MPA frame",
		[IW_BAD_CRC] = "bad MPA CRC",
		[IW_BAD_VERSION] = "bad DDP/RDMAP version",
		[IW_BAD_OPCODE] = "bad RDMAP opcode",
		[IW_BAD_QN] = "bad DDP queue number",
		[IW_INCOMPLETE] = "incomplete",
		[IW_TOO_BIG] = "FPDU too big",
	};

	return r < IW_PARSE_MAX ? names[r] : "?";
}

/* ---------------------------------------------------------------- CRC32c */
/*
 * CRC32c, the Castagnoli polynomial 0x1edc6f41 (reflected: 0x82f63b78), initial value
 * and final xor all ones, as iSCSI (RFC 3385, RFC 3720 B.4) and MPA (RFC 5044 4.4) use it.
 * Slice-by-8: table[k][b] is the CRC of byte b followed by k zero bytes, so eight bytes
 * are folded in per step with eight lookups (about 1.5 GB/s). iw_crc32c() is ISA-L's
 * crc32_iscsi (SSE4.2/PCLMUL, some 20 GB/s) where the build found ISA-L, as roce.c's
 * CRC-32 is; the tables are then the reference the unit test holds it to.
 */
static uint32_t crc32c_table[8][256];

static void crc32c_init(void)
{
	uint32_t i, j, k;

	for (i = 0; i < 256; i++) {
		uint32_t c = i;

		for (j = 0; j < 8; j++)
			c = c & 1 ? 0x82f63b78u ^ (c >> 1) : c >> 1;
		crc32c_table[0][i] = c;
	}
	for (i = 0; i < 256; i++)
		for (k = 1; k < 8; k++)
			crc32c_table[k][i] = crc32c_table[0][crc32c_table[k - 1][i] & 0xff] ^
					     crc32c_table[k - 1][i] >> 8;
}

uint32_t iw_crc32c_table(uint32_t crc, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	if (!crc32c_table[0][1])
		crc32c_init();
	crc = ~crc;
	while (len && ((uintptr_t)p & 7)) {
		crc = crc32c_table[0][(crc ^ *p++) & 0xff] ^ crc >> 8;
		len--;
	}
	while (len >= 8) {
		/* little-endian assembly by bytes: no alignment or host order assumed */
		uint32_t lo = crc ^ (uint32_t)(p[0] | p[1] << 8 | p[2] << 16 |
					       (uint32_t)p[3] << 24);
		uint32_t hi = (uint32_t)(p[4] | p[5] << 8 | p[6] << 16 | (uint32_t)p[7] << 24);

		crc = crc32c_table[7][lo & 0xff] ^ crc32c_table[6][(lo >> 8) & 0xff] ^
		      crc32c_table[5][(lo >> 16) & 0xff] ^ crc32c_table[4][lo >> 24] ^
		      crc32c_table[3][hi & 0xff] ^ crc32c_table[2][(hi >> 8) & 0xff] ^
		      crc32c_table[1][(hi >> 16) & 0xff] ^ crc32c_table[0][hi >> 24];
		p += 8;
		len -= 8;
	}
	while (len--)
		crc = crc32c_table[0][(crc ^ *p++) & 0xff] ^ crc >> 8;
	return ~crc;
}

#if defined(QHCA_CRC_ISAL)
#include <isa-l/crc.h>

const char iw_crc32c_impl[] = "ISA-L crc32_iscsi";

/* ISA-L's crc32_iscsi() takes and returns the CRC register uninverted, and counts in int. */
uint32_t iw_crc32c(uint32_t crc, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	crc = ~crc;
	while (len) {
		int n = len > 0x40000000u ? 0x40000000 : (int)len;

		crc = crc32_iscsi((unsigned char *)p, n, crc);
		p += n;
		len -= (size_t)n;
	}
	return ~crc;
}
#else
const char iw_crc32c_impl[] = "slice-by-8 tables (no ISA-L at build time)";

uint32_t iw_crc32c(uint32_t crc, const void *buf, size_t len)
{
	return iw_crc32c_table(crc, buf, len);
}
#endif

/* ---------------------------------------------------------------- TCP checksum */
/* The TCP checksum (RFC 9293 3.1; RFC 8200 8.1 for IPv6) of the @tcp_len bytes at @tcp,
 * the checksum field included as it is: 0 when a received segment is intact. */
static uint16_t tcp_checksum(const uint8_t *l3, bool ipv6, const uint8_t *tcp, size_t tcp_len)
{
	return net_csum_fold(net_csum_add(net_pseudo_sum(l3, ipv6, NET_IPPROTO_TCP, tcp_len),
					  tcp, tcp_len));
}

/* ---------------------------------------------------------------- TCP build */
#define TCPOPT_EOL		0
#define TCPOPT_NOP		1
#define TCPOPT_MSS		2	/* RFC 9293 3.2 */
#define TCPOPT_WSCALE		3	/* RFC 7323 2 */
#define TCPOPT_SACK_PERM	4	/* RFC 2018 */
#define TCPOPT_SACK		5
#define TCPOPT_TS		8	/* RFC 7323 3 */

size_t iw_tcp_opt_len(const struct iw_tcp_seg *s)
{
	size_t n = 0;

	if (s->mss)
		n += 4;
	if (s->has_ts)
		n += 12;			/* SACK-permitted rides in its two NOPs */
	else if (s->sack_perm)
		n += 4;
	if (s->has_wscale)
		n += 4;
	return n;
}

size_t iw_tcp_hdr_len(const struct iw_tcp_seg *s)
{
	return IW_ETH_HLEN + (s->ipv6 ? IW_IPV6_HLEN : IW_IPV4_HLEN) + IW_TCP_HLEN +
	       iw_tcp_opt_len(s);
}

size_t iw_tcp_frame_len(const struct iw_tcp_seg *s)
{
	return iw_tcp_hdr_len(s) + s->payload_len;
}

/* The options in the order Linux puts them on a SYN: MSS, SACK-permitted and timestamps,
 * window scale; NOPs keep each one 4-byte aligned. Returns the end. */
static uint8_t *tcp_opt_build(const struct iw_tcp_seg *s, uint8_t *o)
{
	if (s->mss) {
		o[0] = TCPOPT_MSS;
		o[1] = 4;
		put16(o + 2, s->mss);
		o += 4;
	}
	if (s->has_ts) {
		if (s->sack_perm) {
			o[0] = TCPOPT_SACK_PERM;
			o[1] = 2;
		} else {
			o[0] = o[1] = TCPOPT_NOP;
		}
		o[2] = TCPOPT_TS;
		o[3] = 10;
		put32(o + 4, s->ts_val);
		put32(o + 8, s->ts_ecr);
		o += 12;
	} else if (s->sack_perm) {
		o[0] = o[1] = TCPOPT_NOP;
		o[2] = TCPOPT_SACK_PERM;
		o[3] = 2;
		o += 4;
	}
	if (s->has_wscale) {
		o[0] = TCPOPT_NOP;
		o[1] = TCPOPT_WSCALE;
		o[2] = 3;
		o[3] = s->wscale;
		o += 4;
	}
	return o;
}

size_t iw_tcp_build(const struct iw_tcp_seg *s, uint8_t *buf, size_t cap)
{
	size_t iplen = s->ipv6 ? IW_IPV6_HLEN : IW_IPV4_HLEN;
	size_t hdr = iw_tcp_hdr_len(s), len, tcp_len;
	uint8_t *l3 = buf + IW_ETH_HLEN, *tcp = l3 + iplen;
	struct net_ip ip;

	if (s->payload_len > 0xffff || net_gid_is_v4(s->sgid) == s->ipv6 ||
	    net_gid_is_v4(s->dgid) == s->ipv6)
		return 0;
	len = hdr + s->payload_len;
	tcp_len = len - IW_ETH_HLEN - iplen;
	/* IPv4 total length and IPv6 payload length are 16 bits */
	if (len > cap || (s->ipv6 ? tcp_len : tcp_len + iplen) > 0xffff)
		return 0;

	if (s->payload_len && s->payload != buf + hdr)	/* else gathered in place */
		memmove(buf + hdr, s->payload, s->payload_len);
	net_eth_put(buf, s->dmac, s->smac, s->ipv6 ? IW_ETHERTYPE_IPV6 : IW_ETHERTYPE_IPV4);
	ip.ipv6 = s->ipv6;
	ip.tclass = s->tclass;
	ip.hop_limit = s->hop_limit;
	ip.flow_label = s->flow_label;
	ip.ip_id = s->ip_id;
	memcpy(ip.sgid, s->sgid, 16);
	memcpy(ip.dgid, s->dgid, 16);
	net_ip_put(l3, &ip, IW_IPPROTO_TCP, tcp_len);
	put16(tcp, s->sport);
	put16(tcp + 2, s->dport);
	put32(tcp + 4, s->seq);
	put32(tcp + 8, s->ack);
	tcp[12] = (uint8_t)((IW_TCP_HLEN + iw_tcp_opt_len(s)) / 4 << 4);
	tcp[13] = s->flags;
	put16(tcp + 14, s->window);
	put16(tcp + 16, 0);
	put16(tcp + 18, s->urg_ptr);
	tcp_opt_build(s, tcp + IW_TCP_HLEN);
	put16(tcp + 16, tcp_checksum(l3, s->ipv6, tcp, tcp_len));
	return len;
}

/* ---------------------------------------------------------------- TCP parse */
/* The options between @o and @end: known ones recorded, unknown ones and known ones of the
 * wrong size skipped; an option running past the header is an error. */
static enum iw_parse_result tcp_opt_parse(const uint8_t *o, const uint8_t *end,
					  struct iw_tcp_seg *s)
{
	while (o < end) {
		size_t n;

		if (o[0] == TCPOPT_EOL)
			break;
		if (o[0] == TCPOPT_NOP) {
			o++;
			continue;
		}
		if (end - o < 2)
			return IW_BAD_TCP;
		n = o[1];
		if (n < 2 || n > (size_t)(end - o))
			return IW_BAD_TCP;
		switch (o[0]) {
		case TCPOPT_MSS:
			if (n == 4)
				s->mss = get16(o + 2);
			break;
		case TCPOPT_WSCALE:
			if (n == 3) {
				s->has_wscale = true;
				s->wscale = o[2] > 14 ? 14 : o[2];
			}
			break;
		case TCPOPT_SACK_PERM:
			if (n == 2)
				s->sack_perm = true;
			break;
		case TCPOPT_TS:
			if (n == 10) {
				s->has_ts = true;
				s->ts_val = get32(o + 2);
				s->ts_ecr = get32(o + 6);
			}
			break;
		default:		/* SACK blocks and anything else: not used */
			break;
		}
		o += n;
	}
	return IW_OK;
}

enum iw_parse_result iw_tcp_parse(const uint8_t *f, size_t len, struct iw_tcp_seg *s)
{
	const uint8_t *l3 = f + IW_ETH_HLEN, *tcp;
	size_t iplen, tcp_len, doff;
	struct net_ip ip;

	memset(s, 0, sizeof(*s));
	iplen = net_ip_match(f, len, IW_IPPROTO_TCP);
	if (!iplen)
		return IW_NOT_TCP;

	/* From here on it claims to be TCP: every inconsistency is an error. */
	switch (net_ip_check(f, len, &ip, &tcp_len)) {
	case NET_IP_OK:
		break;
	case NET_IP_BAD_LENGTH:
		return IW_BAD_LENGTH;
	default:
		return IW_BAD_IP;
	}
	s->ipv6 = ip.ipv6;
	tcp = l3 + iplen;
	if (tcp_len < IW_TCP_HLEN)
		return IW_BAD_LENGTH;
	doff = (size_t)(tcp[12] >> 4) * 4;
	if (doff < IW_TCP_HLEN)
		return IW_BAD_TCP;
	if (doff > tcp_len)
		return IW_BAD_LENGTH;
	if (tcp_checksum(l3, s->ipv6, tcp, tcp_len) != 0)
		return IW_BAD_CHECKSUM;
	s->sport = get16(tcp);
	s->dport = get16(tcp + 2);
	if (!s->sport || !s->dport)
		return IW_BAD_TCP;
	if (tcp_opt_parse(tcp + IW_TCP_HLEN, tcp + doff, s) != IW_OK)
		return IW_BAD_TCP;

	memcpy(s->dmac, f, 6);
	memcpy(s->smac, f + 6, 6);
	s->tclass = ip.tclass;
	s->flow_label = ip.flow_label;
	s->ip_id = ip.ip_id;
	s->hop_limit = ip.hop_limit;
	memcpy(s->sgid, ip.sgid, 16);
	memcpy(s->dgid, ip.dgid, 16);
	s->seq = get32(tcp + 4);
	s->ack = get32(tcp + 8);
	s->flags = tcp[13];
	s->window = get16(tcp + 14);
	s->urg_ptr = get16(tcp + 18);
	s->payload = tcp + doff;
	s->payload_len = (uint32_t)(tcp_len - doff);
	return IW_OK;
}

/* ---------------------------------------------------------------- MPA Request/Reply */
size_t iw_mpa_rr_len(const struct iw_mpa_rr *rr)
{
	return IW_MPA_RR_HLEN + (rr->enhanced ? IW_MPA_ENH_LEN : 0) + rr->pdata_len;
}

size_t iw_mpa_rr_build(const struct iw_mpa_rr *rr, uint8_t *buf, size_t cap)
{
	size_t len = iw_mpa_rr_len(rr), pd_len = len - IW_MPA_RR_HLEN;
	uint8_t *pd = buf + IW_MPA_RR_HLEN;

	if (rr->markers || (rr->rev != 1 && rr->rev != 2) || (rr->enhanced && rr->rev != 2) ||
	    rr->ird > IW_MPA_IRD_ORD_MAX || rr->ord > IW_MPA_IRD_ORD_MAX ||
	    pd_len > IW_MPA_PD_MAX || len > cap)
		return 0;
	if (rr->pdata_len && rr->pdata != pd + pd_len - rr->pdata_len)	/* else in place */
		memmove(pd + pd_len - rr->pdata_len, rr->pdata, rr->pdata_len);
	memcpy(buf, rr->reply ? IW_MPA_KEY_REP : IW_MPA_KEY_REQ, IW_MPA_KEY_LEN);
	buf[16] = (uint8_t)((rr->crc ? IW_MPA_F_CRC : 0) | (rr->reject ? IW_MPA_F_REJECT : 0) |
			    (rr->enhanced ? IW_MPA_F_ENHANCED : 0));
	buf[17] = rr->rev;
	put16(buf + 18, (uint16_t)pd_len);
	if (rr->enhanced) {
		put16(pd, (uint16_t)((rr->p2p ? 0x8000 : 0) | (rr->rtr_send ? 0x4000 : 0) |
				     rr->ird));
		put16(pd + 2, (uint16_t)((rr->rtr_write ? 0x8000 : 0) |
					 (rr->rtr_read ? 0x4000 : 0) | rr->ord));
	}
	return len;
}

enum iw_parse_result iw_mpa_rr_parse(const uint8_t *buf, size_t len, struct iw_mpa_rr *rr,
				     size_t *used)
{
	size_t n = len < IW_MPA_KEY_LEN ? len : IW_MPA_KEY_LEN, pd_len;
	const uint8_t *pd = buf + IW_MPA_RR_HLEN;

	memset(rr, 0, sizeof(*rr));
	*used = 0;
	if (!len)
		return IW_INCOMPLETE;
	/* the key as far as it has come: garbage is refused at once, not waited for */
	if (memcmp(buf, IW_MPA_KEY_REQ, n) && memcmp(buf, IW_MPA_KEY_REP, n))
		return IW_BAD_MPA;
	if (len < IW_MPA_RR_HLEN)
		return IW_INCOMPLETE;
	rr->reply = !memcmp(buf, IW_MPA_KEY_REP, IW_MPA_KEY_LEN);
	pd_len = get16(buf + 18);
	if (pd_len > IW_MPA_PD_MAX)
		return IW_BAD_MPA;
	if (len - IW_MPA_RR_HLEN < pd_len)
		return IW_INCOMPLETE;
	rr->markers = buf[16] & IW_MPA_F_MARKERS;
	rr->crc = buf[16] & IW_MPA_F_CRC;
	rr->reject = buf[16] & IW_MPA_F_REJECT;
	rr->rev = buf[17];
	rr->pdata = pd;
	rr->pdata_len = (uint16_t)pd_len;
	*used = IW_MPA_RR_HLEN + pd_len;
	if (rr->rev != 1 && rr->rev != 2)
		return IW_BAD_VERSION;
	if (rr->rev == 2 && (buf[16] & IW_MPA_F_ENHANCED)) {
		uint16_t ird, ord;

		if (pd_len < IW_MPA_ENH_LEN)
			return IW_BAD_MPA;
		ird = get16(pd);
		ord = get16(pd + 2);
		rr->enhanced = true;
		rr->p2p = ird & 0x8000;
		rr->rtr_send = ird & 0x4000;
		rr->ird = ird & IW_MPA_IRD_ORD_MAX;
		rr->rtr_write = ord & 0x8000;
		rr->rtr_read = ord & 0x4000;
		rr->ord = ord & IW_MPA_IRD_ORD_MAX;
		rr->pdata = pd + IW_MPA_ENH_LEN;
		rr->pdata_len = (uint16_t)(pd_len - IW_MPA_ENH_LEN);
	}
	return IW_OK;
}

/* ---------------------------------------------------------------- RDMAP opcodes */
#define UNTAGGED_SEND	(IW_F_SEND | IW_F_PAYLOAD)

static const struct iw_opcode_info opcode_table[16] = {
	[IW_OP_WRITE] = { "RDMA Write", IW_F_TAGGED | IW_F_PAYLOAD | IW_F_WRITE,
			  IW_DDP_TAGGED_HLEN, 0 },
	[IW_OP_READ_REQ] = { "RDMA Read Request", IW_F_READ_REQ | IW_F_SINGLE,
			     IW_DDP_UNTAGGED_HLEN + IW_READ_REQ_HLEN, IW_QN_READ_REQ },
	[IW_OP_READ_RESP] = { "RDMA Read Response", IW_F_TAGGED | IW_F_PAYLOAD | IW_F_READ_RESP,
			      IW_DDP_TAGGED_HLEN, 0 },
	[IW_OP_SEND] = { "Send", UNTAGGED_SEND, IW_DDP_UNTAGGED_HLEN, IW_QN_SEND },
	[IW_OP_SEND_INV] = { "Send with Invalidate", UNTAGGED_SEND | IW_F_INVAL,
			     IW_DDP_UNTAGGED_HLEN, IW_QN_SEND },
	[IW_OP_SEND_SE] = { "Send with Solicited Event", UNTAGGED_SEND | IW_F_SE,
			    IW_DDP_UNTAGGED_HLEN, IW_QN_SEND },
	[IW_OP_SEND_SE_INV] = { "Send with Solicited Event and Invalidate",
				UNTAGGED_SEND | IW_F_SE | IW_F_INVAL, IW_DDP_UNTAGGED_HLEN,
				IW_QN_SEND },
	[IW_OP_TERMINATE] = { "Terminate", IW_F_TERMINATE | IW_F_SINGLE,
			      IW_DDP_UNTAGGED_HLEN + IW_TERM_HLEN, IW_QN_TERMINATE },
};

const struct iw_opcode_info *iw_opcode_info(uint8_t opcode)
{
	return &opcode_table[opcode & 0x0f];
}

/* ---------------------------------------------------------------- FPDU build */
size_t iw_fpdu_len_for(size_t ulpdu_len)
{
	return ((IW_MPA_HLEN + ulpdu_len + 3) & ~(size_t)3) + IW_MPA_CRC_LEN;
}

uint32_t iw_mulpdu(uint32_t mss)
{
	uint32_t n;

	/* ULPDU length field, ULPDU and pad a multiple of 4, then the CRC */
	if (mss < 8)		/* the smallest FPDU */
		return 0;
	n = ((mss - IW_MPA_CRC_LEN) & ~3u) - IW_MPA_HLEN;
	return n > 0xffff ? 0xffff : n;
}

/* The Terminate's copies (after its 4-byte header), or -1 if they are malformed. */
static long term_copies_len(const struct iw_pkt *p)
{
	if (p->term_d ? p->term_ddp_hdr_len != IW_DDP_TAGGED_HLEN &&
			p->term_ddp_hdr_len != IW_DDP_UNTAGGED_HLEN : p->term_ddp_hdr_len != 0)
		return -1;
	if (p->term_rdma_hdr_len != 0 &&
	    (p->term_rdma_hdr_len != IW_READ_REQ_HLEN || !p->term_r))
		return -1;
	if ((p->term_ddp_hdr_len && !p->term_ddp_hdr) ||
	    (p->term_rdma_hdr_len && !p->term_rdma_hdr))
		return -1;
	return (p->term_d ? 2 + p->term_ddp_hdr_len : 0) + p->term_rdma_hdr_len;
}

/* The ULPDU length of @p, or -1 if it cannot be built. */
static long ulpdu_len(const struct iw_pkt *p)
{
	const struct iw_opcode_info *oi = iw_opcode_info(p->opcode);
	long n;

	if (p->opcode >= IW_OP_COUNT || !oi->flags ||
	    (p->payload_len && !(oi->flags & IW_F_PAYLOAD)))
		return -1;
	n = oi->hdr_len;
	if (oi->flags & IW_F_TERMINATE) {
		long c = term_copies_len(p);

		if (c < 0)
			return -1;
		n += c;
	}
	n += p->payload_len;
	return n > 0xffff || p->payload_len > 0xffff ? -1 : n;
}

size_t iw_fpdu_len(const struct iw_pkt *p)
{
	long n = ulpdu_len(p);

	return n < 0 ? 0 : iw_fpdu_len_for((size_t)n);
}

size_t iw_fpdu_build(const struct iw_pkt *p, bool crc, uint8_t *buf, size_t cap)
{
	const struct iw_opcode_info *oi = iw_opcode_info(p->opcode);
	long ulen = ulpdu_len(p);
	size_t len, end;
	uint8_t *h = buf + IW_MPA_HLEN;

	if (ulen < 0)
		return 0;
	len = iw_fpdu_len_for((size_t)ulen);
	if (len > cap)
		return 0;
	end = IW_MPA_HLEN + (size_t)ulen;
	/* the payload first: it may be in place already, or overlap the headers' room */
	if (p->payload_len && p->payload != buf + end - p->payload_len)
		memmove(buf + end - p->payload_len, p->payload, p->payload_len);

	put16(buf, (uint16_t)ulen);
	h[0] = (uint8_t)((oi->flags & IW_F_TAGGED ? 0x80 : 0) | (p->last ? 0x40 : 0) |
			 IW_DDP_VERSION);
	h[1] = (uint8_t)(IW_RDMAP_VERSION << 6 | p->opcode);
	if (oi->flags & IW_F_TAGGED) {
		put32(h + 2, p->stag);
		put64(h + 6, p->to);
		h += IW_DDP_TAGGED_HLEN;
	} else {
		put32(h + 2, oi->flags & IW_F_INVAL ? p->inval_stag : 0);
		put32(h + 6, oi->qn);
		put32(h + 10, p->msn);
		put32(h + 14, p->mo);
		h += IW_DDP_UNTAGGED_HLEN;
	}
	if (oi->flags & IW_F_READ_REQ) {
		put32(h, p->sink_stag);
		put64(h + 4, p->sink_to);
		put32(h + 12, p->read_size);
		put32(h + 16, p->src_stag);
		put64(h + 20, p->src_to);
		h += IW_READ_REQ_HLEN;
	}
	if (oi->flags & IW_F_TERMINATE) {
		h[0] = (uint8_t)((p->term_layer & 0x0f) << 4 | (p->term_etype & 0x0f));
		h[1] = p->term_ecode;
		h[2] = (uint8_t)((p->term_m ? 0x80 : 0) | (p->term_d ? 0x40 : 0) |
				 (p->term_r ? 0x20 : 0));
		h[3] = 0;
		h += IW_TERM_HLEN;
		if (p->term_d) {
			put16(h, p->term_m ? p->term_ddp_seg_len : 0);
			memmove(h + 2, p->term_ddp_hdr, p->term_ddp_hdr_len);
			h += 2 + p->term_ddp_hdr_len;
		}
		if (p->term_rdma_hdr_len) {
			memmove(h, p->term_rdma_hdr, p->term_rdma_hdr_len);
			h += p->term_rdma_hdr_len;
		}
	}
	memset(buf + end, 0, len - IW_MPA_CRC_LEN - end);	/* pad */
	if (crc) {
		uint32_t c = iw_crc32c(0, buf, len - IW_MPA_CRC_LEN);

		/* least significant byte first, as Linux siw (the crypto API's crc32c) */
		buf[len - 4] = (uint8_t)c;
		buf[len - 3] = (uint8_t)(c >> 8);
		buf[len - 2] = (uint8_t)(c >> 16);
		buf[len - 1] = (uint8_t)(c >> 24);
	} else {
		memset(buf + len - IW_MPA_CRC_LEN, 0, IW_MPA_CRC_LEN);
	}
	return len;
}

size_t iw_frame_build(const struct iw_tcp_seg *s, const struct iw_pkt *p, bool crc,
		      uint8_t *buf, size_t cap)
{
	struct iw_tcp_seg seg = *s;
	size_t hdr = iw_tcp_hdr_len(s), n;

	if (hdr >= cap)
		return 0;
	n = iw_fpdu_build(p, crc, buf + hdr, cap - hdr);
	if (!n)
		return 0;
	seg.payload = buf + hdr;
	seg.payload_len = (uint32_t)n;
	return iw_tcp_build(&seg, buf, cap);
}

/* ---------------------------------------------------------------- FPDU parse */
static bool fpdu_crc_ok(const uint8_t *fpdu, size_t len)
{
	const uint8_t *c = fpdu + len - IW_MPA_CRC_LEN;
	uint32_t got = (uint32_t)(c[0] | c[1] << 8 | c[2] << 16 | (uint32_t)c[3] << 24);

	return got == iw_crc32c(0, fpdu, len - IW_MPA_CRC_LEN);
}

/* The Terminate header and copies at @h, @n bytes. */
static enum iw_parse_result term_parse(const uint8_t *h, size_t n, struct iw_pkt *p)
{
	p->term_layer = h[0] >> 4;
	p->term_etype = h[0] & 0x0f;
	p->term_ecode = h[1];
	p->term_m = h[2] & 0x80;
	p->term_d = h[2] & 0x40;
	p->term_r = h[2] & 0x20;
	h += IW_TERM_HLEN;
	n -= IW_TERM_HLEN;
	p->payload = h;
	p->payload_len = (uint32_t)n;
	if (p->term_d) {
		uint8_t dlen;

		if (n < 2 + 1)
			return IW_BAD_LENGTH;
		dlen = h[2] & 0x80 ? IW_DDP_TAGGED_HLEN : IW_DDP_UNTAGGED_HLEN;
		if (n < 2u + dlen)
			return IW_BAD_LENGTH;
		p->term_ddp_seg_len = get16(h);
		p->term_ddp_hdr = h + 2;
		p->term_ddp_hdr_len = dlen;
		h += 2 + dlen;
		n -= 2u + dlen;
	}
	if (p->term_r && n >= IW_READ_REQ_HLEN) {
		p->term_rdma_hdr = h;
		p->term_rdma_hdr_len = IW_READ_REQ_HLEN;
	}
	return IW_OK;
}

enum iw_parse_result iw_fpdu_parse(const uint8_t *f, size_t len, bool crc, struct iw_pkt *p)
{
	const struct iw_opcode_info *oi;
	const uint8_t *h = f + IW_MPA_HLEN;
	size_t ulen;

	memset(p, 0, sizeof(*p));
	if (len < IW_MPA_HLEN)
		return IW_BAD_LENGTH;
	ulen = get16(f);
	if (iw_fpdu_len_for(ulen) != len)
		return IW_BAD_LENGTH;
	if (crc && !fpdu_crc_ok(f, len))
		return IW_BAD_CRC;
	if (ulen < 2)
		return IW_BAD_LENGTH;
	if ((h[0] & 0x03) != IW_DDP_VERSION || h[1] >> 6 != IW_RDMAP_VERSION)
		return IW_BAD_VERSION;
	p->opcode = h[1] & 0x0f;
	p->last = h[0] & 0x40;
	oi = iw_opcode_info(p->opcode);
	if (!oi->flags || !!(h[0] & 0x80) != !!(oi->flags & IW_F_TAGGED) ||
	    ((oi->flags & IW_F_SINGLE) && !p->last))
		return IW_BAD_OPCODE;
	if (ulen < oi->hdr_len)
		return IW_BAD_LENGTH;
	p->ulpdu = h;
	p->ulpdu_len = (uint16_t)ulen;
	if (oi->flags & IW_F_TAGGED) {
		p->stag = get32(h + 2);
		p->to = get64(h + 6);
	} else {
		if (oi->flags & IW_F_INVAL)
			p->inval_stag = get32(h + 2);
		p->qn = get32(h + 6);
		p->msn = get32(h + 10);
		p->mo = get32(h + 14);
		if (p->qn != oi->qn)
			return IW_BAD_QN;
	}
	if (oi->flags & IW_F_READ_REQ) {
		const uint8_t *r = h + IW_DDP_UNTAGGED_HLEN;

		p->sink_stag = get32(r);
		p->sink_to = get64(r + 4);
		p->read_size = get32(r + 12);
		p->src_stag = get32(r + 16);
		p->src_to = get64(r + 20);
		if (ulen != oi->hdr_len)
			return IW_BAD_LENGTH;	/* a Read Request carries nothing more */
	}
	if (oi->flags & IW_F_TERMINATE)
		return term_parse(h + IW_DDP_UNTAGGED_HLEN, ulen - IW_DDP_UNTAGGED_HLEN, p);
	p->payload = h + oi->hdr_len;
	p->payload_len = (uint32_t)(ulen - oi->hdr_len);
	return IW_OK;
}

/* ---------------------------------------------------------------- FPDU stream */
void iw_fpdu_rx_init(struct iw_fpdu_rx *rx, uint8_t *buf, uint32_t cap, bool crc)
{
	memset(rx, 0, sizeof(*rx));
	rx->buf = buf;
	rx->cap = cap;
	rx->crc = crc;
	rx->err = IW_OK;
}

/* The whole FPDU at @f of @n bytes, checked. */
static enum iw_parse_result rx_deliver(struct iw_fpdu_rx *rx, const uint8_t *f, size_t n,
				       const uint8_t **fpdu, size_t *fpdu_len)
{
	if (rx->crc && !fpdu_crc_ok(f, n)) {
		rx->err = IW_BAD_CRC;
		return rx->err;
	}
	*fpdu = f;
	*fpdu_len = n;
	return IW_OK;
}

enum iw_parse_result iw_fpdu_rx_next(struct iw_fpdu_rx *rx, const uint8_t **data, size_t *len,
				     const uint8_t **fpdu, size_t *fpdu_len)
{
	size_t need, take;

	*fpdu = NULL;
	*fpdu_len = 0;
	if (rx->err != IW_OK)
		return rx->err;
	/* A whole FPDU at the start of the input, nothing held: hand it out in place. */
	if (!rx->have && *len >= IW_MPA_HLEN) {
		need = iw_fpdu_len_for(get16(*data));
		if (need > rx->cap) {
			rx->err = IW_TOO_BIG;
			return rx->err;
		}
		if (*len >= need) {
			const uint8_t *f = *data;

			*data += need;
			*len -= need;
			return rx_deliver(rx, f, need, fpdu, fpdu_len);
		}
	}
	/* Gather: first the length field, then the rest of the FPDU it gives. */
	while (*len) {
		if (rx->have < IW_MPA_HLEN) {
			if (rx->cap < IW_MPA_HLEN) {
				rx->err = IW_TOO_BIG;
				return rx->err;
			}
			rx->buf[rx->have++] = **data;
			(*data)++;
			(*len)--;
			continue;
		}
		need = iw_fpdu_len_for(get16(rx->buf));
		if (need > rx->cap) {
			rx->err = IW_TOO_BIG;
			return rx->err;
		}
		take = need - rx->have < *len ? need - rx->have : *len;
		memcpy(rx->buf + rx->have, *data, take);
		rx->have += (uint32_t)take;
		*data += take;
		*len -= take;
		if (rx->have == need) {
			rx->have = 0;	/* the buffer stays as it is until the next call */
			return rx_deliver(rx, rx->buf, need, fpdu, fpdu_len);
		}
	}
	/* the length field may have just completed */
	if (rx->have >= IW_MPA_HLEN && iw_fpdu_len_for(get16(rx->buf)) > rx->cap) {
		rx->err = IW_TOO_BIG;
		return rx->err;
	}
	return IW_INCOMPLETE;
}
