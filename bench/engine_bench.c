// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The device alone: two engines linked back to back in one process, each with fake guest
 * memory (the transport harness of the unit tests), RC WRITE, READ and SEND of 64 B, 4 KiB,
 * 64 KiB and 1 MiB at path MTU 4096. Prints GB/s, packets per second and nanoseconds of
 * engine time per packet (both engines, every packet built, checked, ICRC'd and placed),
 * beside a memcpy of the same sizes in the same run: the part of the datapath that belongs
 * to qhca, free of TCG, QEMU and the host's other load. make bench runs it; so can you:
 *   $(bash scripts/build-host.sh plain)/bench-engine [MIB_PER_CASE]
 * QHCA_BENCH_TRACE=1 runs it with the teaching trace on (each step formatted, then
 * dropped): what 'qhca explain' costs; off, as in QEMU until something turns it on.
 */
#include <stdio.h>
#include <time.h>

#include "transport_harness.h"

#define WINDOW	8	/* messages posted before the link is pumped */

static bool tracing;	/* QHCA_BENCH_TRACE: the teaching trace on */

static double seconds(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* Move @total bytes as messages of @size with @op; prints one line. */
static void run(uint8_t op, const char *name, uint32_t size, uint64_t total)
{
	uint32_t lkey, rkey, posted = 0, done = 0, n, i;
	uint64_t lbuf, rbuf, frames;
	struct qhca_sq_wqe *w;
	struct qhca_cqe c;
	double t0, t;
	struct qp a, b;

	n = (uint32_t)(total / size);
	if (n < 64)
		n = 64;
	if (n > 200000)
		n = 200000;
	setup();
	harness_path_mtu = 5;	/* 4096 */
	rc_pair(&a, &b, size, &lkey, &lbuf, &rkey, &rbuf, QHCA_ACCESS_ALL);
	qhca_engine_set_tracing(&nodes[0].e, tracing);
	qhca_engine_set_tracing(&nodes[1].e, tracing);
	frames = frames_sent;
	t0 = seconds();
	while (done < n) {
		for (i = 0; i < WINDOW && posted < n; i++, posted++) {
			if (op == QHCA_WR_SEND)
				post_recv(&b, posted, rbuf, size, rkey);
			w = sq_wqe(&a, op, posted, lbuf, size, lkey);
			w->remote_addr = rbuf;
			w->rkey = rkey;
			post_send(&a);
		}
		pump();
		step_len = 0;	/* the steps are formatted, and dropped here */
		while (poll_cq(&nodes[0], &a.scq, &c)) {
			CHECK_EQ(QHCA_FIELD_GET(QHCA_CQE_STATUS_MASK, c.qpn_status), QHCA_WC_SUCCESS);
			done++;
		}
		while (op == QHCA_WR_SEND && poll_cq(&nodes[1], &b.rcq, &c))
			;
		if (unit_failures)
			break;
	}
	t = seconds() - t0;
	frames = frames_sent - frames;
	printf("%-6s %8u %7u %9.3f %12.0f %10.0f\n", name, size, n,
	       (double)n * size / t / 1e9, (double)frames / t, t * 1e9 / (double)frames);
	teardown();
}

static void run_memcpy(uint32_t size, uint64_t total)
{
	uint8_t *s = malloc(size), *d = malloc(size);
	uint64_t n = total / size < 64 ? 64 : total / size, i;
	double t0, t;

	memset(s, 1, size);
	memset(d, 2, size);
	t0 = seconds();
	for (i = 0; i < n; i++) {
		memcpy(d, s, size);
		__asm__ volatile("" : : "r"(d), "r"(s) : "memory");	/* every copy happens */
	}
	t = seconds() - t0;
	printf("%-6s %8u %7llu %9.3f\n", "memcpy", size, (unsigned long long)n,
	       (double)n * size / t / 1e9);
	free(s);
	free(d);
}

int main(int argc, char **argv)
{
	static const uint32_t sizes[] = { 64, 4096, 65536, 1 << 20 };
	uint64_t total = (uint64_t)(argc > 1 ? atoi(argv[1]) : 256) << 20;
	unsigned i;

	tracing = getenv("QHCA_BENCH_TRACE") && atoi(getenv("QHCA_BENCH_TRACE"));
	printf("# the engine alone: two engines back to back, one thread, path MTU 4096, CRC-32: %s%s\n",
	       roce_crc32_impl, tracing ? "; the teaching trace ON" : "");
	printf("%-6s %8s %7s %9s %12s %10s\n", "op", "bytes", "msgs", "GB/s", "packets/s",
	       "ns/packet");
	for (i = 0; i < 4; i++)
		run(QHCA_WR_RDMA_WRITE, "WRITE", sizes[i], total);
	for (i = 0; i < 4; i++)
		run(QHCA_WR_RDMA_READ, "READ", sizes[i], total);
	for (i = 0; i < 4; i++)
		run(QHCA_WR_SEND, "SEND", sizes[i], total);
	for (i = 0; i < 4; i++)
		run_memcpy(sizes[i], total * 4);
	return unit_failures ? 1 : 0;
}
