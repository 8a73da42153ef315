// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Fabric switch unit tests over socketpairs: QEMU stream framing, flooding, MAC learning,
 * split frames, runts and oversized frames.
 */
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fabric.h"
#include "unit.h"

void fabric_log(const char *fmt, ...)
{
	(void)fmt;
}

static struct fabric sw;
static int peer[4];	/* our ends of the socketpairs, per port */

static void setup(int nports)
{
	int i;

	fabric_init(&sw, nports);
	for (i = 0; i < nports; i++) {
		int sv[2];

		CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
		fcntl(sv[0], F_SETFL, O_NONBLOCK);
		peer[i] = sv[0];
		fabric_attach(&sw, i, sv[1]);
	}
}

static void teardown(void)
{
	int i;

	for (i = 0; i < sw.nports; i++)
		close(peer[i]);
	fabric_close(&sw);
}

static size_t make_frame(uint8_t *buf, const uint8_t *dst, const uint8_t *src, size_t len)
{
	size_t i;

	buf[0] = len >> 24;
	buf[1] = len >> 16;
	buf[2] = len >> 8;
	buf[3] = len;
	memcpy(buf + 4, dst, 6);
	memcpy(buf + 10, src, 6);
	for (i = 12; i < len; i++)
		buf[4 + i] = (uint8_t)i;
	return 4 + len;
}

/* Bytes waiting on port @i's peer end (drained). */
static ssize_t drain(int i, uint8_t *buf, size_t cap)
{
	ssize_t n = recv(peer[i], buf, cap, MSG_DONTWAIT);

	return n < 0 ? 0 : n;
}

static const uint8_t bcast[6] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff };
static const uint8_t mac_a[6] = { 0x52, 0x54, 0, 0, 0, 0xa };
static const uint8_t mac_b[6] = { 0x52, 0x54, 0, 0, 0, 0xb };
static const uint8_t mac_c[6] = { 0x52, 0x54, 0, 0, 0, 0xc };

static void test_broadcast_floods(void)
{
	uint8_t f[128], r[256];
	size_t n = make_frame(f, bcast, mac_a, 60);

	setup(3);
	CHECK_EQ(write(peer[0], f, n), n);
	fabric_read(&sw, 0);
	CHECK_EQ(drain(0, r, sizeof(r)), 0);
	CHECK_EQ(drain(1, r, sizeof(r)), n);
	CHECK(!memcmp(r, f, n));
	CHECK_EQ(drain(2, r, sizeof(r)), n);
	teardown();
}

static void test_learned_unicast(void)
{
	uint8_t f[128], r[256];
	size_t n;

	setup(3);
	/* a speaks on port 1 (learned), b on port 2. */
	n = make_frame(f, bcast, mac_a, 60);
	CHECK_EQ(write(peer[0], f, n), n);
	fabric_read(&sw, 0);
	n = make_frame(f, bcast, mac_b, 60);
	CHECK_EQ(write(peer[1], f, n), n);
	fabric_read(&sw, 1);
	drain(0, r, sizeof(r));
	drain(1, r, sizeof(r));
	drain(2, r, sizeof(r));
	/* b -> a goes to port 1 only. */
	n = make_frame(f, mac_a, mac_b, 100);
	CHECK_EQ(write(peer[1], f, n), n);
	fabric_read(&sw, 1);
	CHECK_EQ(drain(0, r, sizeof(r)), n);
	CHECK_EQ(drain(2, r, sizeof(r)), 0);
	/* Unknown c is flooded. */
	n = make_frame(f, mac_c, mac_b, 100);
	CHECK_EQ(write(peer[1], f, n), n);
	fabric_read(&sw, 1);
	CHECK_EQ(drain(0, r, sizeof(r)), n);
	CHECK_EQ(drain(2, r, sizeof(r)), n);
	CHECK_EQ(sw.port[1].rx_frames, 3);
	teardown();
}

static void test_split_frames_and_batches(void)
{
	uint8_t f[512], r[1024];
	size_t n = make_frame(f, bcast, mac_a, 200);

	setup(2);
	memcpy(f + n, f, n);	/* two frames back to back */
	CHECK_EQ(write(peer[0], f, 3), 3);	/* a partial length word */
	fabric_read(&sw, 0);
	CHECK_EQ(drain(1, r, sizeof(r)), 0);
	CHECK_EQ(write(peer[0], f + 3, 2 * n - 3), 2 * n - 3);
	fabric_read(&sw, 0);
	CHECK_EQ(drain(1, r, sizeof(r)), 2 * n);
	CHECK_EQ(sw.port[0].rx_frames, 2);
	teardown();
}

static void test_runt_and_oversized(void)
{
	uint8_t f[128], r[256];
	size_t n = make_frame(f, bcast, mac_a, 10);	/* shorter than a header */

	setup(2);
	CHECK_EQ(write(peer[0], f, n), n);
	fabric_read(&sw, 0);
	CHECK_EQ(drain(1, r, sizeof(r)), 0);
	CHECK_EQ(sw.port[0].drops, 1);
	/* A length past the largest frame disconnects the port. */
	f[0] = 0x7f;
	CHECK_EQ(write(peer[0], f, 4), 4);
	fabric_read(&sw, 0);
	CHECK_EQ(sw.port[0].fd, -1);
	/* The other port still works: it sends and nobody is listening, without error. */
	n = make_frame(f, bcast, mac_b, 60);
	CHECK_EQ(write(peer[1], f, n), n);
	fabric_read(&sw, 1);
	CHECK_EQ(sw.port[1].rx_frames, 1);
	teardown();
}

static void test_peer_close_forgets_macs(void)
{
	uint8_t f[128], r[256];
	size_t n = make_frame(f, bcast, mac_a, 60);

	setup(3);
	CHECK_EQ(write(peer[0], f, n), n);
	fabric_read(&sw, 0);
	close(peer[0]);
	fabric_read(&sw, 0);
	CHECK_EQ(sw.port[0].fd, -1);
	/* Frames to a are flooded again, not sent to the dead port. */
	n = make_frame(f, mac_a, mac_b, 60);
	drain(2, r, sizeof(r));
	CHECK_EQ(write(peer[1], f, n), n);
	fabric_read(&sw, 1);
	CHECK_EQ(drain(2, r, sizeof(r)), n);
	peer[0] = open("/dev/null", O_RDONLY);	/* so teardown closes something valid */
	teardown();
}

static const struct unit_test tests[] = {
	{ "broadcast_floods", test_broadcast_floods },
	{ "learned_unicast", test_learned_unicast },
	{ "split_frames_and_batches", test_split_frames_and_batches },
	{ "runt_and_oversized", test_runt_and_oversized },
	{ "peer_close_forgets_macs", test_peer_close_forgets_macs },
	{}
};

int main(int argc, char **argv)
{
	return unit_main(tests, argc, argv);
}
