// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Single-thread host memcpy bandwidth for 1 MiB blocks over 512 MiB, so that the copies
 * go to memory and not the caches: the baseline of the throughput goal.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int main(void)
{
	size_t size = 1 << 20, span = 256, rounds = 2048, i;
	char *a = malloc(size * span), *b = malloc(size * span);
	struct timespec t0, t1;
	double s;

	memset(a, 1, size * span);
	memset(b, 2, size * span);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (i = 0; i < rounds; i++) {
		memcpy(b + (i % span) * size, a + ((i * 7) % span) * size, size);
		__asm__ volatile("" ::: "memory");
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	s = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
	printf("%.0f\n", (double)size * rounds / s / 1e6);
	return 0;
}
