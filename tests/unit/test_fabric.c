// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Fabric switch unit tests over socketpairs: QEMU stream framing, flooding, MAC learning,
 * split frames, runts and oversized frames; a port whose peer stops reading (flooded frames
 * to it dropped and counted, unicast senders paused instead, the others unaffected, the port
 * disconnected after stall_ms),
 * framing across partial writes, and socket paths longer than sun_path.
 */
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fabric.h"
#include "unit.h"

static char last_log[512];

void fabric_log(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(last_log, sizeof(last_log), fmt, ap);
	va_end(ap);
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
	CHECK_EQ(sw.port[1].tx_writes, 1);	/* the two frames of one read, in one write */
	teardown();
}

/* A burst read at once leaves for each destination in one write: one wake-up of its QEMU. */
static void test_burst_one_write_per_port(void)
{
	static uint8_t f[12 * 1100], r[sizeof(f)];
	size_t n = make_frame(f, bcast, mac_a, 1000), i;

	setup(3);
	for (i = 1; i < 12; i++)
		memcpy(f + i * n, f, n);
	CHECK_EQ(write(peer[0], f, 12 * n), 12 * n);
	fabric_read(&sw, 0);
	CHECK_EQ(sw.port[0].rx_frames, 12);
	for (i = 1; i < 3; i++) {
		CHECK_EQ(drain(i, r, sizeof(r)), 12 * n);
		CHECK_EQ(sw.port[i].tx_frames, 12);
		CHECK_EQ(sw.port[i].tx_writes, 1);
	}
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
	CHECK_EQ(sw.port[0].rx_drops, 1);
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

/* ---------------------------------------------------------------- ports that stop reading */

/* A hang is a failure, not a stuck test run: the switch must never block on one peer. */
static void on_alarm(int sig)
{
	static const char msg[] = "not ok - the switch blocked (alarm after 20 s)\n";

	(void)sig;
	(void)!write(1, msg, sizeof(msg) - 1);
	_exit(1);
}

static void arm_alarm(void)
{
	signal(SIGALRM, on_alarm);
	alarm(20);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Frame number @seq: its length and content follow from seq, so a reader can verify it. */
static size_t seq_len(uint32_t seq)
{
	return 60 + (seq * 977u) % 9000;
}

static size_t make_seq_frame(uint8_t *buf, const uint8_t *dst, const uint8_t *src, uint32_t seq)
{
	size_t len = seq_len(seq), i;

	make_frame(buf, dst, src, len);
	memcpy(buf + 4 + 14, &seq, 4);
	for (i = 18; i < len; i++)
		buf[4 + i] = (uint8_t)(seq + i);
	return 4 + len;
}

/* Parses the byte stream one peer receives, checking each frame against its seq. */
struct stream_check {
	uint8_t buf[2 * (4 + FABRIC_MAX_FRAME)];
	size_t have;
	uint32_t frames, bad;
	int64_t last_seq;
};

static void stream_feed(struct stream_check *c, const uint8_t *data, size_t n)
{
	while (n) {
		size_t take = sizeof(c->buf) - c->have < n ? sizeof(c->buf) - c->have : n;

		memcpy(c->buf + c->have, data, take);
		c->have += take;
		data += take;
		n -= take;
		while (c->have >= 4) {
			size_t len = (size_t)c->buf[0] << 24 | c->buf[1] << 16 | c->buf[2] << 8 |
				     c->buf[3], i;
			uint32_t seq;

			if (len < 18 || len > FABRIC_MAX_FRAME) {
				c->bad++;	/* framing lost: the rest is garbage */
				c->have = 0;
				return;
			}
			if (c->have < 4 + len)
				break;
			memcpy(&seq, c->buf + 4 + 14, 4);
			if (len != seq_len(seq) || (int64_t)seq <= c->last_seq)
				c->bad++;
			for (i = 18; i < len; i++)
				if (c->buf[4 + i] != (uint8_t)(seq + i)) {
					c->bad++;
					break;
				}
			c->last_seq = seq;
			c->frames++;
			memmove(c->buf, c->buf + 4 + len, c->have - 4 - len);
			c->have -= 4 + len;
		}
	}
}

/* Read everything waiting at port @i's peer end into @c. */
static void stream_drain(int i, struct stream_check *c)
{
	static uint8_t r[65536];
	ssize_t n;

	while ((n = recv(peer[i], r, sizeof(r), MSG_DONTWAIT)) > 0)
		stream_feed(c, r, n);
}

/* Ports 1 and 2 talk; port 3's peer never reads. Flooded frames reach port 2 whole and in
 * order, in bounded time, while those for port 3 are dropped and counted. */
static void test_stalled_port_does_not_block_others(void)
{
	static struct stream_check got2 = { .last_seq = -1 }, got3 = { .last_seq = -1 };
	static uint8_t f[4 + FABRIC_MAX_FRAME];
	const uint32_t frames = 3000;
	double t0 = now_s();
	uint32_t seq;

	arm_alarm();
	setup(3);
	sw.queue_max = 256 << 10;
	sw.stall_ms = 0;	/* dropping only, see test_stalled_port_disconnected */
	for (seq = 0; seq < frames; seq++) {
		size_t n = make_seq_frame(f, bcast, mac_a, seq);

		CHECK_EQ(write(peer[0], f, n), n);
		do {	/* through the event loop, as qhca-fabric runs */
			fabric_poll(&sw, 0);
			stream_drain(1, &got2);
		} while (sw.port[0].rx_frames < seq + 1 && now_s() - t0 < 15);
	}
	while (sw.port[1].out_len) {
		fabric_poll(&sw, 10);
		stream_drain(1, &got2);
	}
	stream_drain(1, &got2);
	alarm(0);
	CHECK(now_s() - t0 < 10);
	CHECK_EQ(got2.frames, frames);
	CHECK_EQ(got2.bad, 0);
	CHECK_EQ(sw.port[1].tx_drops, 0);
	CHECK_EQ(sw.port[1].tx_frames, frames);
	/* Port 3 took what fits in its socket and queue; the rest is counted as dropped. */
	CHECK(sw.port[2].fd >= 0);
	CHECK(sw.port[2].tx_drops > 0);
	CHECK_EQ(sw.port[2].tx_frames + sw.port[2].tx_drops, frames);
	CHECK(sw.port[2].out_len <= sw.queue_max);
	CHECK(strstr(last_log, "port 3: output queue full") != NULL);
	/* What port 3 was given arrives whole and in order once its peer reads again. */
	while (sw.port[2].out_len) {
		stream_drain(2, &got3);
		fabric_poll(&sw, 10);
	}
	stream_drain(2, &got3);
	CHECK_EQ(got3.frames, sw.port[2].tx_frames);
	CHECK_EQ(got3.bad, 0);
	teardown();
}

/* A peer that reads nothing while its queue stays full is disconnected after stall_ms; one
 * that reads again is not. */
static void test_stalled_port_disconnected(void)
{
	static uint8_t f[4 + FABRIC_MAX_FRAME];
	static struct stream_check got = { .last_seq = -1 };
	uint32_t seq;

	arm_alarm();
	setup(3);
	sw.queue_max = 64 << 10;
	sw.stall_ms = 150;
	for (seq = 0; !sw.port[2].tx_drops && seq < 10000; seq++) {
		size_t n = make_seq_frame(f, bcast, mac_a, seq);

		CHECK_EQ(write(peer[0], f, n), n);
		fabric_read(&sw, 0);
		stream_drain(1, &got);
	}
	CHECK(sw.port[2].tx_drops > 0);
	/* Port 3's peer reads: progress, so the stall clock starts over. */
	usleep(100 * 1000);
	CHECK(drain(2, f, sizeof(f)) > 0);
	while (drain(2, f, sizeof(f)) > 0)
		;
	fabric_poll(&sw, 0);
	CHECK_EQ(sw.port[2].full_since_ms, 0);
	usleep(100 * 1000);
	fabric_tick(&sw);
	CHECK(sw.port[2].fd >= 0);
	/* Now it fills up again and reads nothing: disconnected, port 2 is not. */
	for (; sw.port[2].full_since_ms == 0 && seq < 20000; seq++) {
		size_t n = make_seq_frame(f, bcast, mac_a, seq);

		CHECK_EQ(write(peer[0], f, n), n);
		fabric_read(&sw, 0);
		stream_drain(1, &got);
	}
	fabric_tick(&sw);
	CHECK(sw.port[2].fd >= 0);
	usleep(200 * 1000);
	fabric_poll(&sw, 0);
	CHECK_EQ(sw.port[2].fd, -1);
	CHECK(strstr(last_log, "port 3: disconnected (peer read nothing") != NULL);
	CHECK(sw.port[1].fd >= 0);
	CHECK_EQ(got.bad, 0);
	alarm(0);
	teardown();
}

/* Write what @peer_fd takes of the frames of @f (tracking the offset); non-blocking. */
struct writer {
	uint8_t f[4 + FABRIC_MAX_FRAME];
	size_t len, off;
	uint32_t seq;
};

static void writer_push(struct writer *w, int fd, const uint8_t *dst, const uint8_t *src,
			uint32_t limit)
{
	for (;;) {
		ssize_t n;

		if (w->off == w->len) {
			if (w->seq >= limit)
				return;
			w->len = make_seq_frame(w->f, dst, src, w->seq++);
			w->off = 0;
		}
		n = write(fd, w->f + w->off, w->len - w->off);
		if (n <= 0)
			return;
		w->off += n;
	}
}

/* Unicast is lossless: a sender whose destination's queue is full pauses (its input is not
 * read) instead of losing frames; its own output keeps flowing; nothing is dropped and
 * every frame arrives whole and in order once the destination reads. */
static void test_unicast_pauses_not_drops(void)
{
	static struct writer w;
	static struct stream_check got2 = { .last_seq = -1 }, got1 = { .last_seq = -1 };
	static uint8_t f[4 + FABRIC_MAX_FRAME];
	const uint32_t frames = 1500;
	bool paused = false, reached_a = false;
	double t0 = now_s();

	arm_alarm();
	setup(3);
	sw.queue_max = 64 << 10;
	sw.stall_ms = 0;
	/* Port 2 announces its MAC; the broadcast reaches ports 1 and 3. */
	CHECK_EQ(write(peer[1], f, make_frame(f, bcast, mac_b, 64)), 68);
	fabric_poll(&sw, 0);
	drain(0, f, sizeof(f));
	drain(2, f, sizeof(f));
	memset(&w, 0, sizeof(w));
	/* Port 1 sends to port 2, which does not read yet. */
	while (!paused && now_s() - t0 < 10) {
		writer_push(&w, peer[0], mac_b, mac_a, frames);
		fabric_poll(&sw, 1);
		paused = sw.port[0].wait_out == 1;
	}
	CHECK(paused);
	CHECK(sw.port[0].rx_paused > 0);
	CHECK_EQ(sw.port[1].tx_drops, 0);
	/* While port 1's input waits, port 3 still reaches port 1. */
	{
		uint8_t g[4 + FABRIC_MAX_FRAME];
		size_t n = make_seq_frame(g, mac_a, mac_c, 0);

		CHECK_EQ(write(peer[2], g, n), n);
		while (!reached_a && now_s() - t0 < 10) {
			fabric_poll(&sw, 1);
			stream_drain(0, &got1);
			reached_a = got1.frames == 1;
		}
		CHECK(reached_a);
		CHECK_EQ(got1.bad, 0);
	}
	/* Port 2 reads: port 1 goes on, and every frame arrives. */
	while (got2.frames < frames && now_s() - t0 < 15) {
		writer_push(&w, peer[0], mac_b, mac_a, frames);
		fabric_poll(&sw, 1);
		stream_drain(1, &got2);
	}
	alarm(0);
	CHECK(paused && w.seq == frames);
	CHECK_EQ(got2.frames, frames);
	CHECK_EQ(got2.bad, 0);
	CHECK_EQ(sw.port[1].tx_drops, 0);
	CHECK_EQ(sw.port[0].rx_drops, 0);
	teardown();
}

/* A sender that waits for a port whose peer never reads is released when that port is
 * disconnected after stall_ms. */
static void test_paused_sender_released_by_stall(void)
{
	static struct writer w;
	static uint8_t f[4 + FABRIC_MAX_FRAME];
	double t0 = now_s();

	arm_alarm();
	setup(3);
	sw.queue_max = 64 << 10;
	sw.stall_ms = 150;
	CHECK_EQ(write(peer[1], f, make_frame(f, bcast, mac_b, 64)), 68);
	fabric_poll(&sw, 0);
	memset(&w, 0, sizeof(w));
	while (sw.port[0].wait_out != 1 && now_s() - t0 < 10) {
		writer_push(&w, peer[0], mac_b, mac_a, UINT32_MAX);
		fabric_poll(&sw, 1);
		drain(2, f, sizeof(f));
	}
	CHECK_EQ(sw.port[0].wait_out, 1);
	while (sw.port[1].fd >= 0 && now_s() - t0 < 10)
		fabric_poll(&sw, 20);
	alarm(0);
	CHECK_EQ(sw.port[1].fd, -1);
	CHECK(strstr(last_log, "port 2: disconnected") != NULL);
	CHECK_EQ(sw.port[0].wait_out, -1);
	CHECK(sw.port[0].fd >= 0);
	teardown();
}

/* A socket that takes part of a frame: the rest goes out first, the framing stays intact. */
static void test_partial_writes_keep_framing(void)
{
	static uint8_t f[4 + FABRIC_MAX_FRAME];
	static struct stream_check got = { .last_seq = -1 };
	int small = 4096, polls;
	uint32_t seq, sent = 0;

	arm_alarm();
	setup(2);
	sw.queue_max = 48 << 10;
	CHECK_EQ(setsockopt(sw.port[1].fd, SOL_SOCKET, SO_SNDBUF, &small, sizeof(small)), 0);
	/* Bursts of frames into a socket of 8 KiB: frames that straddle its end are written in
	 * part; after each burst the peer reads everything and the queue drains. */
	for (seq = 0; seq < 600; seq++) {
		size_t n = make_seq_frame(f, bcast, mac_a, seq);

		CHECK_EQ(write(peer[0], f, n), n);
		fabric_read(&sw, 0);
		sent++;
		if (seq % 20 != 19)
			continue;
		for (polls = 0; sw.port[1].out_len && polls < 100000; polls++) {
			stream_drain(1, &got);
			fabric_poll(&sw, 1);
		}
		CHECK_EQ(sw.port[1].out_len, 0);
	}
	stream_drain(1, &got);
	alarm(0);
	CHECK(sw.port[1].tx_partial > 0);
	CHECK(sw.port[1].tx_drops > 0);
	CHECK_EQ(sw.port[1].tx_frames + sw.port[1].tx_drops, sent);
	CHECK_EQ(got.frames, sw.port[1].tx_frames);
	CHECK_EQ(got.bad, 0);
	CHECK_EQ(got.have, 0);
	CHECK(sw.port[1].fd >= 0);
	teardown();
}

/* A path that does not fit in sun_path is refused by name, never truncated. */
static void test_long_socket_path_refused(void)
{
	char base[] = "/tmp/qhca-fabric-test-XXXXXX", dir[256], path[300];
	const size_t limit = FABRIC_PATH_MAX - 1;	/* 107 bytes and the NUL */
	size_t fit = limit - strlen("/port1.sock");
	struct stat st;
	char want[64];

	CHECK(mkdtemp(base) != NULL);
	fabric_init(&sw, 1);
	/* Exactly at the limit: works. */
	snprintf(dir, sizeof(dir), "%s/", base);
	while (strlen(dir) < fit)
		strcat(dir, "d");
	CHECK_EQ(mkdir(dir, 0700), 0);
	CHECK_EQ(fabric_listen(&sw, 0, dir), 0);
	snprintf(path, sizeof(path), "%s/port1.sock", dir);
	CHECK_EQ(strlen(path), limit);
	CHECK(stat(path, &st) == 0 && S_ISSOCK(st.st_mode));
	CHECK(!strcmp(sw.port[0].path, path));
	fabric_close(&sw);
	unlink(path);
	rmdir(dir);
	/* One byte more: refused, the message names the path and the limit, nothing made. */
	strcat(dir, "e");
	CHECK_EQ(mkdir(dir, 0700), 0);
	fabric_init(&sw, 1);
	last_log[0] = 0;
	CHECK_EQ(fabric_listen(&sw, 0, dir), -1);
	CHECK_EQ(sw.port[0].listen_fd, -1);
	snprintf(path, sizeof(path), "%s/port1.sock", dir);
	CHECK(strstr(last_log, path) != NULL);
	snprintf(want, sizeof(want), "at most %zu bytes", limit);
	CHECK(strstr(last_log, want) != NULL);
	path[limit] = 0;	/* where a truncating implementation would have bound */
	CHECK(stat(path, &st) != 0);
	unlink(path);
	rmdir(dir);
	/* Far too long (longer than any buffer on the way): refused as well. */
	memset(dir, 'x', 255);
	dir[0] = '/';
	dir[255] = 0;
	CHECK_EQ(fabric_listen(&sw, 0, dir), -1);
	fabric_close(&sw);
	rmdir(base);
}

static const struct unit_test tests[] = {
	{ "broadcast_floods", test_broadcast_floods },
	{ "learned_unicast", test_learned_unicast },
	{ "split_frames_and_batches", test_split_frames_and_batches },
	{ "burst_one_write_per_port", test_burst_one_write_per_port },
	{ "runt_and_oversized", test_runt_and_oversized },
	{ "peer_close_forgets_macs", test_peer_close_forgets_macs },
	{ "stalled_port_does_not_block_others", test_stalled_port_does_not_block_others },
	{ "stalled_port_disconnected", test_stalled_port_disconnected },
	{ "unicast_pauses_not_drops", test_unicast_pauses_not_drops },
	{ "paused_sender_released_by_stall", test_paused_sender_released_by_stall },
	{ "partial_writes_keep_framing", test_partial_writes_keep_framing },
	{ "long_socket_path_refused", test_long_socket_path_refused },
	{}
};

int main(int argc, char **argv)
{
	return unit_main(tests, argc, argv);
}
