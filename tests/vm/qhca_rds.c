// SPDX-License-Identifier: GPL-2.0
/*
 * qhca-rds: RDS (Reliable Datagram Sockets) over RDMA between two guests, every byte checked.
 *
 *   qhca-rds server LOCAL_IP PORT [-w SECONDS]
 *   qhca-rds client LOCAL_IP SERVER_IP PORT [-r ROUNDS] [-t SECONDS] [-w SECONDS]
 *
 * Both sides bind an AF_RDS socket to their own address with the RDS transport forced to
 * RDMA (SO_RDS_TRANSPORT = RDS_TRANS_IB: rds_rdma, never rds_tcp). Each round the client
 * sends one message of each size (1 B, 100 B, 4 KiB, 64 KiB and 1 MiB, the largest RDS
 * message); the server checks it and answers with a message of the same size, which the
 * client checks. Byte j of message number seq is a function of the direction, seq and the
 * size, so a lost, duplicated, reordered, truncated or corrupted message is caught. The
 * client runs ROUNDS rounds (default 3) and at least SECONDS seconds (default 0), then sends
 * "END", which the server answers and exits on.
 *
 * Exit status: 0 every byte right, 1 a wrong message, 2 a timeout (-w SECONDS per message,
 * default 30), 3 a setup or socket error. Messages say which.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/rds.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#ifndef AF_RDS
#define AF_RDS 21
#endif
#ifndef SOL_RDS
#define SOL_RDS 276
#endif

#define MAX_MSG (1u << 20)	/* RDS_MAX_MSG_SIZE: larger sends fail with EMSGSIZE */
#define END_LEN 3

static const size_t sizes[] = { 1, 100, 4096, 65536, MAX_MSG };
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

static const char *role = "qhca-rds";
static int wait_s = 30;

static void fill(unsigned char *b, size_t n, unsigned long seq, int from_server)
{
	uint32_t x = 2166136261u ^ (uint32_t)(seq * 2654435761u) ^ (uint32_t)(n * 40503u) ^
		     (from_server ? 0x5bd1e995u : 0);
	size_t j;

	x |= 1;
	for (j = 0; j < n; j++) {
		x ^= x << 13;
		x ^= x >> 17;
		x ^= x << 5;
		b[j] = x >> 24;
	}
}

static int open_rds(const char *ip, int port)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(port) };
	int fd, trans = RDS_TRANS_IB, buf = 4 * MAX_MSG;
	struct timeval tv = { .tv_sec = wait_s };

	if (inet_pton(AF_INET, ip, &sin.sin_addr) != 1) {
		fprintf(stderr, "%s: '%s' is not an IPv4 address\n", role, ip);
		exit(3);
	}
	fd = socket(AF_RDS, SOCK_SEQPACKET, 0);
	if (fd < 0) {
		fprintf(stderr, "%s: socket(AF_RDS): %s (is the rds_rdma module loaded?)\n", role,
			strerror(errno));
		exit(3);
	}
	/* Room for 1 MiB messages: RDS refuses a message larger than half the send buffer. */
	if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &buf, sizeof(buf)) ||
	    setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &buf, sizeof(buf)) ||
	    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv))) {
		fprintf(stderr, "%s: setsockopt(SO_SNDBUFFORCE/SO_RCVBUFFORCE/SO_SNDTIMEO): %s\n",
			role, strerror(errno));
		exit(3);
	}
	if (setsockopt(fd, SOL_RDS, SO_RDS_TRANSPORT, &trans, sizeof(trans))) {
		fprintf(stderr, "%s: setsockopt(SO_RDS_TRANSPORT, RDS_TRANS_IB): %s\n", role,
			strerror(errno));
		exit(3);
	}
	if (bind(fd, (struct sockaddr *)&sin, sizeof(sin))) {
		fprintf(stderr, "%s: bind to %s:%d over RDS/RDMA: %s (no RDMA device with this "
			"address?)\n", role, ip, port, strerror(errno));
		exit(3);
	}
	return fd;
}

static void send_msg(int fd, const struct sockaddr_in *to, const void *b, size_t n,
		     unsigned long seq)
{
	struct iovec iov = { .iov_base = (void *)b, .iov_len = n };
	struct msghdr m = { .msg_name = (void *)to, .msg_namelen = sizeof(*to),
			    .msg_iov = &iov, .msg_iovlen = 1 };
	ssize_t r;

	do
		r = sendmsg(fd, &m, 0);
	while (r < 0 && errno == EINTR);
	if (r < 0) {
		fprintf(stderr, "%s: sendmsg of message %lu (%zu bytes): %s\n", role, seq, n,
			strerror(errno));
		exit(errno == EAGAIN || errno == ETIMEDOUT ? 2 : 3);
	}
	if ((size_t)r != n) {
		fprintf(stderr, "%s: sendmsg of message %lu sent %zd of %zu bytes\n", role, seq, r,
			n);
		exit(1);
	}
}

/* Receive one message into b (capacity cap); its length, or exit on timeout or error. */
static size_t recv_msg(int fd, unsigned char *b, size_t cap, struct sockaddr_in *from,
		       unsigned long seq)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	struct iovec iov = { .iov_base = b, .iov_len = cap };
	struct msghdr m = { .msg_name = from, .msg_namelen = sizeof(*from),
			    .msg_iov = &iov, .msg_iovlen = 1 };
	ssize_t r;
	int k;

	for (;;) {
		k = poll(&p, 1, wait_s * 1000);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0) {
			fprintf(stderr, "%s: poll: %s\n", role, strerror(errno));
			exit(3);
		}
		if (k == 0) {
			fprintf(stderr, "%s: timeout: no message %lu within %d s\n", role, seq,
				wait_s);
			exit(2);
		}
		m.msg_namelen = sizeof(*from);
		r = recvmsg(fd, &m, MSG_DONTWAIT);
		if (r < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (r < 0) {
			fprintf(stderr, "%s: recvmsg: %s\n", role, strerror(errno));
			exit(3);
		}
		if (m.msg_flags & MSG_TRUNC) {
			fprintf(stderr, "%s: message %lu larger than %zu bytes\n", role, seq, cap);
			exit(1);
		}
		return r;
	}
}

static void check_msg(const unsigned char *got, size_t len, unsigned char *want, size_t n,
		      unsigned long seq, int from_server)
{
	size_t j;

	if (len != n) {
		fprintf(stderr, "%s: message %lu has %zu bytes, expected %zu (lost or reordered "
			"message?)\n", role, seq, len, n);
		exit(1);
	}
	fill(want, n, seq, from_server);
	if (memcmp(got, want, n) == 0)
		return;
	for (j = 0; j < n && got[j] == want[j]; j++)
		;
	fprintf(stderr, "%s: message %lu (%zu bytes): byte %zu is 0x%02x, expected 0x%02x\n",
		role, seq, n, j, got[j], want[j]);
	exit(1);
}

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

static void usage(void)
{
	fprintf(stderr, "usage: qhca-rds server LOCAL_IP PORT [-w SECONDS]\n"
			"       qhca-rds client LOCAL_IP SERVER_IP PORT [-r ROUNDS] [-t SECONDS] "
			"[-w SECONDS]\n");
	exit(3);
}

int main(int argc, char **argv)
{
	unsigned char *buf = malloc(MAX_MSG + 1), *want = malloc(MAX_MSG);
	int server, fd, port, rounds = 3, i, argi;
	double min_s = 0, t0;
	unsigned long seq = 0, bytes = 0;
	struct sockaddr_in peer = { .sin_family = AF_INET };

	if (!buf || !want || argc < 4)
		usage();
	server = strcmp(argv[1], "server") == 0;
	if (!server && strcmp(argv[1], "client") != 0)
		usage();
	if (!server && argc < 5)
		usage();
	argi = server ? 4 : 5;
	for (i = argi; i < argc; i++) {
		if (i + 1 >= argc)
			usage();
		if (strcmp(argv[i], "-r") == 0)
			rounds = atoi(argv[++i]);
		else if (strcmp(argv[i], "-t") == 0)
			min_s = atof(argv[++i]);
		else if (strcmp(argv[i], "-w") == 0)
			wait_s = atoi(argv[++i]);
		else
			usage();
	}
	role = server ? "qhca-rds server" : "qhca-rds client";
	port = atoi(argv[server ? 3 : 4]);
	fd = open_rds(argv[2], port);

	if (server) {
		printf("qhca-rds server: bound to %s:%d over RDS/RDMA\n", argv[2], port);
		fflush(stdout);
		for (;; seq++) {
			size_t n = sizes[seq % NSIZES];
			size_t len = recv_msg(fd, buf, MAX_MSG + 1, &peer, seq);

			if (len == END_LEN && memcmp(buf, "END", END_LEN) == 0) {
				send_msg(fd, &peer, "END", END_LEN, seq);
				printf("qhca-rds server: %lu messages each way, %lu bytes, all "
				       "checked\n", seq, bytes);
				return 0;
			}
			check_msg(buf, len, want, n, seq, 0);
			fill(buf, n, seq, 1);
			send_msg(fd, &peer, buf, n, seq);
			bytes += n;
		}
	}

	peer.sin_port = htons(port);
	if (inet_pton(AF_INET, argv[3], &peer.sin_addr) != 1)
		usage();
	t0 = now();
	for (i = 0; i < rounds || now() - t0 < min_s; i++) {
		size_t k;

		for (k = 0; k < NSIZES; k++, seq++) {
			struct sockaddr_in from;
			size_t n = sizes[k], len;

			fill(buf, n, seq, 0);
			send_msg(fd, &peer, buf, n, seq);
			len = recv_msg(fd, buf, MAX_MSG + 1, &from, seq);
			check_msg(buf, len, want, n, seq, 1);
			bytes += n;
		}
	}
	send_msg(fd, &peer, "END", END_LEN, seq);
	{
		struct sockaddr_in from;
		size_t len = recv_msg(fd, buf, MAX_MSG + 1, &from, seq);

		if (len != END_LEN || memcmp(buf, "END", END_LEN) != 0) {
			fprintf(stderr, "qhca-rds client: the server did not answer END\n");
			return 1;
		}
	}
	printf("qhca-rds client: %d rounds, %lu messages each way (1 B to 1 MiB), %lu bytes, all "
	       "checked, %.1f s\n", i, seq, bytes, now() - t0);
	return 0;
}
