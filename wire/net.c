// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Ethernet, IPv4 and IPv6 headers and the Internet checksum, as net.h describes: the one
 * place the RoCE v2 and iWARP codecs build, check and read the layers under their headers.
 */
#include <string.h>

#include "net.h"
#include "wire_be.h"

static const uint8_t v4_prefix[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

bool net_gid_is_v4(const uint8_t gid[16])
{
	return !memcmp(gid, v4_prefix, sizeof(v4_prefix));
}

void net_gid_from_v4(uint8_t gid[16], const uint8_t *v4)
{
	memcpy(gid, v4_prefix, sizeof(v4_prefix));
	memcpy(gid + 12, v4, 4);
}

/* ---------------------------------------------------------------- Ethernet */
uint16_t net_ethertype(const uint8_t *f)
{
	return get16(f + 12);
}

void net_eth_put(uint8_t *f, const uint8_t dmac[6], const uint8_t smac[6], uint16_t ethertype)
{
	memcpy(f, dmac, 6);
	memcpy(f + 6, smac, 6);
	put16(f + 12, ethertype);
}

/* ---------------------------------------------------------------- checksum */
uint64_t net_csum_add(uint64_t sum, const uint8_t *p, size_t len)
{
	while (len >= 4) {
		sum += get32(p);
		p += 4;
		len -= 4;
	}
	if (len >= 2) {
		sum += get16(p);
		p += 2;
		len -= 2;
	}
	if (len)
		sum += (uint32_t)p[0] << 8;
	return sum;
}

uint16_t net_csum_fold(uint64_t sum)
{
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)~sum;
}

uint64_t net_pseudo_sum(const uint8_t *l3, bool ipv6, uint8_t proto, size_t l4_len)
{
	uint64_t sum;

	if (ipv6)
		sum = net_csum_add(0, l3 + 8, 32);	/* source and destination */
	else
		sum = net_csum_add(0, l3 + 12, 8);
	/* IPv6: a 32-bit length and the next header; IPv4: the same sum */
	return sum + (uint32_t)l4_len + proto;
}

/* ---------------------------------------------------------------- IP */
size_t net_ip_match(const uint8_t *f, size_t len, uint8_t proto)
{
	const uint8_t *l3 = f + NET_ETH_HLEN;

	if (len < NET_ETH_HLEN)
		return 0;
	switch (net_ethertype(f)) {
	case NET_ETHERTYPE_IPV4:
		if (len < NET_ETH_HLEN + NET_IPV4_HLEN || (l3[0] >> 4) != 4 || l3[9] != proto)
			return 0;
		return NET_IPV4_HLEN;
	case NET_ETHERTYPE_IPV6:
		if (len < NET_ETH_HLEN + NET_IPV6_HLEN || (l3[0] >> 4) != 6 || l3[6] != proto)
			return 0;
		return NET_IPV6_HLEN;
	default:
		return 0;
	}
}

enum net_ip_result net_ip_check(const uint8_t *f, size_t len, struct net_ip *ip,
				size_t *l4_len)
{
	const uint8_t *l3 = f + NET_ETH_HLEN;
	size_t avail;

	memset(ip, 0, sizeof(*ip));
	ip->ipv6 = net_ethertype(f) == NET_ETHERTYPE_IPV6;
	avail = len - NET_ETH_HLEN - (ip->ipv6 ? NET_IPV6_HLEN : NET_IPV4_HLEN);
	if (ip->ipv6) {
		uint32_t w = get32(l3);

		*l4_len = get16(l3 + 4);
		if (*l4_len > avail)
			return NET_IP_BAD_LENGTH;
		ip->tclass = (w >> 20) & 0xff;
		ip->flow_label = w & 0xfffff;
		ip->hop_limit = l3[7];
		memcpy(ip->sgid, l3 + 8, 16);
		memcpy(ip->dgid, l3 + 24, 16);
		return NET_IP_OK;
	}
	if ((l3[0] & 0x0f) != 5 || (get16(l3 + 6) & 0x3fff))
		return NET_IP_BAD_HEADER;	/* options or a fragment */
	if (get16(l3 + 2) < NET_IPV4_HLEN || (size_t)get16(l3 + 2) - NET_IPV4_HLEN > avail)
		return NET_IP_BAD_LENGTH;
	if (net_csum_fold(net_csum_add(0, l3, NET_IPV4_HLEN)) != 0)
		return NET_IP_BAD_HEADER;
	*l4_len = (size_t)get16(l3 + 2) - NET_IPV4_HLEN;
	ip->tclass = l3[1];
	ip->ip_id = get16(l3 + 4);
	ip->hop_limit = l3[8];
	net_gid_from_v4(ip->sgid, l3 + 12);
	net_gid_from_v4(ip->dgid, l3 + 16);
	return NET_IP_OK;
}

void net_ip_put(uint8_t *l3, const struct net_ip *ip, uint8_t proto, size_t l4_len)
{
	if (ip->ipv6) {
		put32(l3, 6u << 28 | (uint32_t)ip->tclass << 20 | (ip->flow_label & 0xfffff));
		put16(l3 + 4, (uint16_t)l4_len);
		l3[6] = proto;
		l3[7] = ip->hop_limit;
		memcpy(l3 + 8, ip->sgid, 16);
		memcpy(l3 + 24, ip->dgid, 16);
		return;
	}
	l3[0] = 0x45;
	l3[1] = ip->tclass;
	put16(l3 + 2, (uint16_t)(NET_IPV4_HLEN + l4_len));
	put16(l3 + 4, ip->ip_id);
	put16(l3 + 6, 0x4000);		/* don't fragment */
	l3[8] = ip->hop_limit;
	l3[9] = proto;
	put16(l3 + 10, 0);
	memcpy(l3 + 12, ip->sgid + 12, 4);
	memcpy(l3 + 16, ip->dgid + 12, 4);
	put16(l3 + 10, net_csum_fold(net_csum_add(0, l3, NET_IPV4_HLEN)));
}
