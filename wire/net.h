/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The layers under every RoCE v2 and iWARP frame: the Ethernet header, IPv4 (RFC 791) and
 * IPv6 (RFC 8200) headers, and the Internet checksum (RFC 1071) with the pseudo-headers of
 * UDP and TCP. Used by roce.c and iwarp.c (and whoever else decodes a frame), so that an
 * IP header is built, checked and read in one place. Like the other codecs of wire/, all
 * byte swapping of header fields happens here and nowhere else.
 */
#ifndef QHCA_NET_H
#define QHCA_NET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NET_ETH_HLEN		14
#define NET_IPV4_HLEN		20	/* without options (which no codec of ours takes) */
#define NET_IPV6_HLEN		40	/* without extension headers */
#define NET_ETHERTYPE_IPV4	0x0800
#define NET_ETHERTYPE_IPV6	0x86dd
#define NET_IPPROTO_TCP		6
#define NET_IPPROTO_UDP		17

/* What an IP header says (or is to say) about its packet. Addresses are GIDs: IPv4 as the
 * IPv4-mapped ::ffff:a.b.c.d (net_gid_is_v4()). */
struct net_ip {
	bool ipv6;
	uint8_t tclass;			/* IPv4 TOS, IPv6 traffic class */
	uint8_t hop_limit;		/* TTL for IPv4 */
	uint32_t flow_label;		/* IPv6 only, 20 bits */
	uint16_t ip_id;			/* IPv4 identification (DF is always set) */
	uint8_t sgid[16], dgid[16];
};

enum net_ip_result {
	NET_IP_OK,
	NET_IP_BAD_LENGTH,		/* the lengths in the header and the frame disagree */
	NET_IP_BAD_HEADER,		/* IPv4 options, a fragment, a bad header checksum */
};

/* The EtherType of frame @f (at least NET_ETH_HLEN bytes). */
uint16_t net_ethertype(const uint8_t *f);
void net_eth_put(uint8_t *f, const uint8_t dmac[6], const uint8_t smac[6], uint16_t ethertype);

/*
 * Does the @len-byte Ethernet frame @f carry IPv4 or IPv6 with upper-layer protocol @proto,
 * the fixed IP header complete? Returns the IP header's length (NET_IPV4_HLEN or
 * NET_IPV6_HLEN), 0 if not. Nothing else of the header is checked yet.
 */
size_t net_ip_match(const uint8_t *f, size_t len, uint8_t proto);
/*
 * Check the IP header of a frame net_ip_match() took (length @len): no options or
 * fragments, a correct IPv4 header checksum, a length that fits the frame (Ethernet pads
 * short frames: the header says where the packet ends). On NET_IP_OK, @ip holds the
 * header's fields and *@l4_len the upper-layer packet's length.
 */
enum net_ip_result net_ip_check(const uint8_t *f, size_t len, struct net_ip *ip,
				size_t *l4_len);
/* Write the IPv4 or IPv6 header of @ip at @l3, for @l4_len bytes of protocol @proto. The
 * caller has made sure the lengths fit 16 bits. */
void net_ip_put(uint8_t *l3, const struct net_ip *ip, uint8_t proto, size_t l4_len);

/* The ones' complement sum (RFC 1071) of @len bytes at @p added to @sum, not folded. */
uint64_t net_csum_add(uint64_t sum, const uint8_t *p, size_t len);
/* The folded, complemented checksum of @sum. */
uint16_t net_csum_fold(uint64_t sum);
/* The sum of the pseudo-header (RFC 9293 3.1, RFC 768; RFC 8200 8.1 for IPv6) of the
 * @l4_len-byte packet of protocol @proto under IP header @l3. */
uint64_t net_pseudo_sum(const uint8_t *l3, bool ipv6, uint8_t proto, size_t l4_len);

/* Is @gid an IPv4-mapped address (::ffff:a.b.c.d)? */
bool net_gid_is_v4(const uint8_t gid[16]);
/* @gid = the IPv4-mapped form of the 4 bytes at @v4. */
void net_gid_from_v4(uint8_t gid[16], const uint8_t *v4);

#endif /* QHCA_NET_H */
