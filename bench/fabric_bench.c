// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * bench-fabric: the fabric switch's forwarding rate alone, free of QEMU and the guests.
 * Two ports over socketpairs: a sender thread writes frames into port 1 as fast as the
 * switch takes them, a receiver thread reads them from port 2, and the switch runs its
 * event loop (fabric_poll) in the main thread, as qhca-fabric does. For frames of 64 B,
 * 1 KiB and 4154 B (a RoCE v2 packet with 4 KiB of payload) it prints frames/s, MB/s, the
 * switch thread's CPU time a frame and the writes it made a frame (batching); then the time
 * a 64-byte frame takes through the switch, from a ping-pong (half a round trip: two
 * wake-ups and four system calls of the switch and its peers, on an otherwise idle host).
 *   bench-fabric [SECONDS_PER_SIZE]     (default 1)
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "fabric.h"

static struct fabric sw;
static int tx_fd, rx_fd;		/* the bench's ends of ports 1 and 2 */
static size_t frame_len;
static volatile int stop;
static uint64_t rx_bytes;

static const uint8_t tx_mac[6] = { 0x52, 0x54, 0, 0x51, 0x48, 1 };
static const uint8_t rx_mac[6] = { 0x52, 0x54, 0, 0x51, 0x48, 2 };

void fabric_log(const char *fmt, ...)
{
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double now(clockid_t clock)
{
	struct timespec t;

	clock_gettime(clock, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

/* @n framed frames of frame_len bytes from @src to @dst at @buf; their bytes. */
static size_t frames(uint8_t *buf, size_t n, const uint8_t *dst, const uint8_t *src)
{
	size_t i, k = 4 + frame_len;

	for (i = 0; i < n; i++) {
		uint8_t *f = buf + i * k;

		f[0] = (uint8_t)(frame_len >> 24);
		f[1] = (uint8_t)(frame_len >> 16);
		f[2] = (uint8_t)(frame_len >> 8);
		f[3] = (uint8_t)frame_len;
		memcpy(f + 4, dst, 6);
		memcpy(f + 10, src, 6);
		f[16] = 0x88;	/* a local experimental EtherType */
		f[17] = 0xb5;
		memset(f + 18, (int)i, frame_len - 14);
	}
	return n * k;
}

/* A switch of two ports, each over a socketpair whose other end is tx_fd and rx_fd. */
static void open_ports(void)
{
	int a[2], b[2];

	fabric_init(&sw, 2);
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, a) || socketpair(AF_UNIX, SOCK_STREAM, 0, b)) {
		perror("socketpair");
		exit(1);
	}
	fabric_attach(&sw, 0, a[0]);
	fabric_attach(&sw, 1, b[0]);
	tx_fd = a[1];
	rx_fd = b[1];
}

static void close_ports(void)
{
	fabric_close(&sw);
	close(tx_fd);
	close(rx_fd);
}

static void *sender(void *arg)
{
	static uint8_t buf[1 << 16];
	size_t len = frames(buf, sizeof(buf) / (4 + frame_len), rx_mac, tx_mac), off;
	ssize_t n;

	while (!stop) {
		for (off = 0; off < len && !stop; off += (size_t)n) {
			n = write(tx_fd, buf + off, len - off);
			if (n <= 0)
				return NULL;
		}
	}
	return NULL;
}

static void *receiver(void *arg)
{
	static uint8_t buf[1 << 17];
	ssize_t n;

	while ((n = read(rx_fd, buf, sizeof(buf))) > 0)
		__atomic_add_fetch(&rx_bytes, (uint64_t)n, __ATOMIC_RELAXED);
	return NULL;
}

/* The echo side of the ping-pong: every frame from port 1 goes back. */
static void *echo(void *arg)
{
	uint8_t f[4 + 64];
	size_t got;
	ssize_t n;

	for (;;) {
		for (got = 0; got < sizeof(f); got += (size_t)n) {
			n = read(rx_fd, f + got, sizeof(f) - got);
			if (n <= 0)
				return NULL;
		}
		memcpy(f + 4, tx_mac, 6);
		memcpy(f + 10, rx_mac, 6);
		if (write(rx_fd, f, sizeof(f)) != (ssize_t)sizeof(f))
			return NULL;
	}
}

static void *switch_loop(void *arg)
{
	while (!stop)
		fabric_poll(&sw, 10);
	return NULL;
}

/* Half the round trip of a 64-byte frame through the switch, typical and 99th percentile. */
static void latency(int rounds)
{
	static double us[10000];
	uint8_t f[4 + 64];
	pthread_t te, tl;
	int i;
	size_t got;
	ssize_t n;

	if (rounds > 10000)
		rounds = 10000;
	stop = 0;
	open_ports();
	frame_len = 64;
	pthread_create(&tl, NULL, switch_loop, NULL);
	pthread_create(&te, NULL, echo, NULL);
	for (i = -100; i < rounds; i++) {	/* the first ones teach the switch the MACs */
		double t0 = now(CLOCK_MONOTONIC);

		frames(f, 1, rx_mac, tx_mac);
		if (write(tx_fd, f, sizeof(f)) != (ssize_t)sizeof(f))
			break;
		for (got = 0; got < sizeof(f); got += (size_t)n) {
			n = read(tx_fd, f + got, sizeof(f) - got);
			if (n <= 0) {
				fprintf(stderr, "bench-fabric: the echo stopped\n");
				exit(1);
			}
		}
		if (i >= 0)
			us[i] = (now(CLOCK_MONOTONIC) - t0) * 1e6 / 2;
	}
	stop = 1;
	shutdown(tx_fd, SHUT_RDWR);
	shutdown(rx_fd, SHUT_RDWR);
	pthread_join(te, NULL);
	pthread_join(tl, NULL);
	close_ports();
	qsort(us, (size_t)rounds, sizeof(us[0]), cmp_double);
	printf("# a 64-byte frame through the switch (half a ping-pong): %.1f us typical, "
	       "%.1f us 99th percentile\n", us[rounds / 2], us[rounds * 99 / 100]);
}

static void run(size_t len, double secs)
{
	uint64_t b0, b1, writes = 0;
	pthread_t ts, tr;
	int i;
	double t0, c0, t1, c1, fps;
	uint8_t hello[4 + 64];

	frame_len = len;
	stop = 0;
	rx_bytes = 0;
	open_ports();
	/* The receiver says hello, so that the switch learns where its MAC is. */
	frame_len = 64;
	if (write(rx_fd, hello, frames(hello, 1, tx_mac, rx_mac)) != sizeof(hello)) {
		perror("write");
		exit(1);
	}
	frame_len = len;
	for (i = 0; i < 10; i++)
		fabric_poll(&sw, 10);
	if (read(tx_fd, hello, sizeof(hello)) != sizeof(hello)) {
		fprintf(stderr, "bench-fabric: the hello frame did not arrive\n");
		exit(1);
	}
	pthread_create(&tr, NULL, receiver, NULL);
	pthread_create(&ts, NULL, sender, NULL);
	t0 = now(CLOCK_MONOTONIC) + 0.2;	/* a warm-up first */
	while (now(CLOCK_MONOTONIC) < t0)
		fabric_poll(&sw, 10);
	b0 = __atomic_load_n(&rx_bytes, __ATOMIC_RELAXED);
	c0 = now(CLOCK_THREAD_CPUTIME_ID);
	for (i = 0; i < 2; i++)
		writes -= sw.port[i].tx_writes;
	while (now(CLOCK_MONOTONIC) < t0 + secs)
		fabric_poll(&sw, 10);
	t1 = now(CLOCK_MONOTONIC);
	c1 = now(CLOCK_THREAD_CPUTIME_ID);
	b1 = __atomic_load_n(&rx_bytes, __ATOMIC_RELAXED);
	for (i = 0; i < 2; i++)
		writes += sw.port[i].tx_writes;
	stop = 1;
	shutdown(tx_fd, SHUT_RDWR);
	shutdown(rx_fd, SHUT_RDWR);
	pthread_join(ts, NULL);
	pthread_join(tr, NULL);
	close_ports();
	fps = (double)(b1 - b0) / (4 + len) / (t1 - t0);
	printf("%8zu B %12.0f %10.1f %14.0f %14.3f\n", len, fps, fps * len / 1e6,
	       (c1 - c0) * 1e9 / (fps * (t1 - t0)), writes / (fps * (t1 - t0)));
}

int main(int argc, char **argv)
{
	static const size_t sizes[] = { 64, 1024, 4154 };
	double secs = argc > 1 ? atof(argv[1]) : 1.0;
	size_t i;

	if (secs <= 0) {
		fprintf(stderr, "usage: bench-fabric [SECONDS_PER_SIZE]\n");
		return 2;
	}
	printf("# the fabric switch alone: frames through one port pair, %.1f s a size\n", secs);
	printf("%10s %12s %10s %14s %14s\n", "frame", "frames/s", "MB/s", "switch ns/frm",
	       "writes/frame");
	for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
		run(sizes[i], secs);
	latency(2000);
	return 0;
}
