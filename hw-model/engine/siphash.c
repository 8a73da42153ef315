// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * SipHash-2-4 (Aumasson and Bernstein, 2012): the engine's keyed PRF, for the initial
 * sequence numbers of RFC 6528 and the hash of iWARP's connection table.
 */
#include "siphash.h"

static uint64_t rotl64(uint64_t x, int b)
{
	return x << b | x >> (64 - b);
}

uint64_t qhca_siphash24(uint64_t k0, uint64_t k1, const uint8_t *m, size_t len)
{
	uint64_t v[4] = { k0 ^ 0x736f6d6570736575ull, k1 ^ 0x646f72616e646f6dull,
			  k0 ^ 0x6c7967656e657261ull, k1 ^ 0x7465646279746573ull };
	uint64_t b = (uint64_t)len << 56, w;
	size_t i, r, k;

#define SIPROUND do {							\
	v[0] += v[1]; v[1] = rotl64(v[1], 13); v[1] ^= v[0]; v[0] = rotl64(v[0], 32); \
	v[2] += v[3]; v[3] = rotl64(v[3], 16); v[3] ^= v[2];			\
	v[0] += v[3]; v[3] = rotl64(v[3], 21); v[3] ^= v[0];			\
	v[2] += v[1]; v[1] = rotl64(v[1], 17); v[1] ^= v[2]; v[2] = rotl64(v[2], 32); \
} while (0)
	for (i = 0; i + 8 <= len; i += 8) {
		for (w = 0, k = 0; k < 8; k++)
			w |= (uint64_t)m[i + k] << (8 * k);
		v[3] ^= w;
		for (r = 0; r < 2; r++)
			SIPROUND;
		v[0] ^= w;
	}
	for (k = 0; i + k < len; k++)
		b |= (uint64_t)m[i + k] << (8 * k);
	v[3] ^= b;
	for (r = 0; r < 2; r++)
		SIPROUND;
	v[0] ^= b;
	v[2] ^= 0xff;
	for (r = 0; r < 4; r++)
		SIPROUND;
#undef SIPROUND
	return v[0] ^ v[1] ^ v[2] ^ v[3];
}
