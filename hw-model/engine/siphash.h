/* SPDX-License-Identifier: GPL-2.0-or-later */
/* SipHash-2-4 (siphash.c): a keyed PRF of short inputs. */
#ifndef QHCA_SIPHASH_H
#define QHCA_SIPHASH_H

#include <stddef.h>
#include <stdint.h>

/* SipHash-2-4 of @len bytes at @m with the key (@k0, @k1). */
uint64_t qhca_siphash24(uint64_t k0, uint64_t k1, const uint8_t *m, size_t len);

#endif /* QHCA_SIPHASH_H */
