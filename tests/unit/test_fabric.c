// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Fabric switch unit tests over socketpairs: QEMU stream framing, flooding, MAC learning,
 * split frames, runts and oversized frames; a port whose peer stops reading (flooded frames
 * to it dropped and counted, unicast senders paused instead, the others unaffected, the port
 * disconnected after stall_ms),
 * framing across partial writes, and socket paths longer than sun_path.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fabric.h"
#include "ib.h"
#include "json_check.h"
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

/* ---- the instrument: impairments, control commands, capture, TCP ports and trunks ---- */

/* Run a control command; its reply must start as @want ("{\"ok\":true" or false). */
static char *ctl(const char *line, bool ok)
{
	char *r = fabric_command(&sw, line);

	CHECK(r != NULL);
	if (r && strncmp(r, ok ? "{\"ok\":true" : "{\"ok\":false", ok ? 10 : 11)) {
		fprintf(stderr, "  '%s' -> %s\n", line, r);
		CHECK(!"unexpected reply");
	}
	return r;
}

static void ctl_ok(const char *line)
{
	free(ctl(line, true));
}

/* A command that must be refused for the reason @why (a part of its error). */
static void ctl_refused(const char *line, const char *why)
{
	char *r = ctl(line, false);

	if (r && !strstr(r, why)) {
		fprintf(stderr, "  '%s' -> %s, not '%s'\n", line, r, why);
		CHECK(!"refused for another reason");
	}
	free(r);
}

/* Port 1 has learned mac_a and port 2 mac_b; their peers' sockets are drained. */
static void setup_learned(int nports)
{
	uint8_t f[128], r[4096];
	size_t n;
	int i;

	setup(nports);
	n = make_frame(f, bcast, mac_a, 60);
	CHECK_EQ(write(peer[0], f, n), n);
	fabric_read(&sw, 0);
	n = make_frame(f, bcast, mac_b, 60);
	CHECK_EQ(write(peer[1], f, n), n);
	fabric_read(&sw, 1);
	for (i = 0; i < nports; i++)
		while (drain(i, r, sizeof(r)) > 0)
			;
	ctl_ok("zero");
}

/* Send frames @first..@first+@count-1 from a (port 1) to b, each numbered in bytes 14..17. */
static void send_numbered(uint32_t first, int count, size_t len)
{
	uint8_t f[FABRIC_MAX_FRAME + 4];
	int k;

	for (k = 0; k < count; k++) {
		size_t n = make_frame(f, mac_b, mac_a, len);
		uint32_t seq = first + (uint32_t)k;

		memcpy(f + 4 + 14, &seq, 4);
		CHECK_EQ(write(peer[0], f, n), n);
		fabric_read(&sw, 0);
	}
}

/* Let the switch run for @ms (delay line, timed events). */
static void pump(int ms)
{
	uint64_t end = fabric_now_ns() + (uint64_t)ms * 1000000;

	while (fabric_now_ns() < end)
		fabric_poll(&sw, 1);
}

/* The numbers of the frames waiting at port @i's peer, in order; also counts frames whose
 * bytes past the number differ from make_frame's (corrupted) in *@bad. */
static int received(int i, uint32_t *seqs, int max, int *bad)
{
	static uint8_t r[1 << 20];
	size_t have = 0, off = 0;
	ssize_t n;
	int k = 0;

	while ((n = drain(i, r + have, sizeof(r) - have)) > 0)
		have += (size_t)n;
	if (bad)
		*bad = 0;
	while (have - off >= 4 && k < max) {
		size_t len = (size_t)r[off] << 24 | r[off + 1] << 16 | r[off + 2] << 8 | r[off + 3];
		size_t j;

		CHECK(off + 4 + len <= have);
		memcpy(&seqs[k++], r + off + 4 + 14, 4);
		for (j = 18; bad && j < len; j++)
			if (r[off + 4 + j] != (uint8_t)j) {
				(*bad)++;
				break;
			}
		if (bad && memcmp(r + off + 4, mac_b, 6))
			(*bad)++;
		off += 4 + len;
	}
	return k;
}

static void test_loss_counted_and_seeded(void)
{
	static uint32_t got[2][400];
	int n[2], run, k;

	for (run = 0; run < 2; run++) {
		setup_learned(3);
		ctl_ok("seed 42");
		ctl_ok("set 2 out loss=30%");
		for (k = 0, n[run] = 0; k < 4; k++) {	/* in parts: a socket holds ~270 */
			send_numbered(100 * k, 100, 100);
			n[run] += received(1, got[run] + n[run], 400 - n[run], NULL);
		}
		/* About 30 % lost, every loss counted where it happened, order kept. */
		CHECK(n[run] > 220 && n[run] < 340);
		CHECK_EQ(sw.port[1].st[FABRIC_OUT].frames, 400);
		CHECK_EQ(sw.port[1].st[FABRIC_OUT].dropped, 400 - n[run]);
		CHECK_EQ(sw.port[0].st[FABRIC_IN].dropped, 0);
		for (k = 1; k < n[run]; k++)
			CHECK(got[run][k] > got[run][k - 1]);
		CHECK_EQ(received(2, got[run], 400, NULL), 0);	/* unicast: not flooded */
		teardown();
	}
	/* The same seed loses the same frames. */
	CHECK_EQ(n[0], n[1]);
	CHECK(!memcmp(got[0], got[1], sizeof(got[0][0]) * (size_t)n[0]));
	/* Another seed loses others. */
	setup_learned(2);
	ctl_ok("seed 43");
	ctl_ok("set 2 out loss=30%");
	for (k = 0, n[1] = 0; k < 4; k++) {
		send_numbered(100 * k, 100, 100);
		n[1] += received(1, got[1] + n[1], 400 - n[1], NULL);
	}
	CHECK(n[1] != n[0] || memcmp(got[0], got[1], sizeof(got[0][0]) * (size_t)n[0]));
	/* In the other direction (in): the sender's port counts. Clear: everything passes. */
	ctl_ok("clear");
	ctl_ok("set 1 in loss=100");
	send_numbered(0, 10, 100);
	CHECK_EQ(received(1, got[1], 400, NULL), 0);
	CHECK_EQ(sw.port[0].st[FABRIC_IN].dropped, 10);
	ctl_ok("clear 1");
	CHECK_EQ(sw.impaired, 0);
	send_numbered(0, 10, 100);
	CHECK_EQ(received(1, got[1], 400, NULL), 10);
	teardown();
}

static void test_dup_corrupt_reorder(void)
{
	uint32_t got[64];
	int bad, k;

	setup_learned(2);
	ctl_ok("set 2 out dup=100%");
	send_numbered(0, 5, 200);
	CHECK_EQ(received(1, got, 64, &bad), 10);
	CHECK_EQ(bad, 0);
	for (k = 0; k < 10; k++)
		CHECK_EQ(got[k], k / 2);
	CHECK_EQ(sw.port[1].st[FABRIC_OUT].duplicated, 5);
	/* Corruption flips one bit past the Ethernet header: every frame arrives, damaged. */
	ctl_ok("clear");
	ctl_ok("set 1 in corrupt=100%");
	send_numbered(100, 20, 200);
	CHECK_EQ(received(1, got, 64, &bad), 20);
	/* A flipped bit in the number itself shows as a wrong number, else as a bad byte. */
	for (k = 0; k < 20; k++)
		if (got[k] != 100u + (uint32_t)k)
			bad++;
	CHECK_EQ(bad, 20);
	CHECK_EQ(sw.port[0].st[FABRIC_IN].corrupted, 20);
	/* Reorder: each frame held back swaps with the next one to the same port. */
	ctl_ok("clear");
	ctl_ok("set 2 out reorder=100%");
	send_numbered(0, 6, 200);
	CHECK_EQ(received(1, got, 64, NULL), 6);
	for (k = 0; k < 6; k++)
		CHECK_EQ(got[k], k ^ 1);
	CHECK_EQ(sw.port[1].st[FABRIC_OUT].reordered, 3);
	/* A held frame that nothing follows goes alone, a little later. */
	send_numbered(50, 1, 200);
	CHECK_EQ(received(1, got, 64, NULL), 0);
	CHECK_EQ(sw.nheld, 1);
	pump(5);
	CHECK_EQ(received(1, got, 64, NULL), 1);
	CHECK_EQ(got[0], 50);
	CHECK_EQ(sw.nheld, 0);
	teardown();
}

static void test_delay_rate_mtu_link(void)
{
	uint32_t got[64];
	uint64_t t0;
	char *r;
	int k;

	setup_learned(2);
	ctl_ok("set 2 delay=20ms");
	send_numbered(0, 5, 200);
	CHECK_EQ(received(1, got, 64, NULL), 0);	/* still on the way */
	CHECK_EQ(sw.port[1].delayed_bytes, 5 * FABRIC_DELAYED_COST(200));
	pump(40);
	CHECK_EQ(received(1, got, 64, NULL), 5);
	for (k = 0; k < 5; k++)
		CHECK_EQ(got[k], k);
	CHECK_EQ(sw.port[1].st[FABRIC_OUT].delayed, 5);
	/* Taking the delay away keeps the order: later frames wait behind earlier ones. */
	send_numbered(10, 2, 200);
	ctl_ok("clear");
	send_numbered(12, 2, 200);
	CHECK_EQ(received(1, got, 64, NULL), 0);
	pump(40);
	CHECK_EQ(received(1, got, 64, NULL), 4);
	for (k = 0; k < 4; k++)
		CHECK_EQ(got[k], 10 + k);
	/* Rate: 10 frames of 1000 B at 8 Mbit/s take 9 ms or more after the first. */
	ctl_ok("set 2 out rate=8");
	t0 = fabric_now_ns();
	send_numbered(20, 10, 1000);
	k = 0;
	while (k < 10 && fabric_now_ns() - t0 < 1000000000ull) {
		fabric_poll(&sw, 1);
		k += received(1, got + k, 64 - k, NULL);
	}
	CHECK_EQ(k, 10);
	CHECK(fabric_now_ns() - t0 >= 9000000);
	/* MTU: a frame whose payload is longer is dropped and counted. */
	ctl_ok("clear");
	ctl_ok("set 2 mtu=1000");
	send_numbered(30, 1, 1014);	/* payload 1000: passes */
	send_numbered(31, 1, 1015);
	CHECK_EQ(received(1, got, 64, NULL), 1);
	CHECK_EQ(sw.port[1].mtu_drops, 1);
	/* A link that is down drops both ways; up again, frames pass. */
	ctl_ok("clear");
	ctl_ok("link 2 down");
	send_numbered(40, 3, 100);
	CHECK_EQ(received(1, got, 64, NULL), 0);
	CHECK_EQ(sw.port[1].link_drops, 3);
	r = ctl("show", true);
	CHECK(strstr(r, "\"port\":2,\"connected\":true,\"link\":\"down\"") != NULL);
	CHECK(strstr(r, "\"link_drops\":3") != NULL);
	free(r);
	ctl_ok("link 2 up");
	send_numbered(43, 3, 100);
	CHECK_EQ(received(1, got, 64, NULL), 3);
	teardown();
}

static void test_control_commands_and_timed_events(void)
{
	char path[] = "/tmp/qhca-fabric-script-XXXXXX", line[128];
	uint32_t got[16];
	char *r;
	FILE *f;
	int fd;

	setup_learned(3);
	/* Bad commands change nothing and say why. */
	free(ctl("set 4 loss=1", false));
	free(ctl("set 1 loss=101", false));
	free(ctl("set 1 loss=5 speed=3", false));
	free(ctl("set 1 in", false));
	free(ctl("link 1 sideways", false));
	free(ctl("at soon link 1 down", false));
	free(ctl("at 1s frobnicate", false));
	free(ctl("nonsense", false));
	CHECK_EQ(sw.impaired, 0);
	CHECK(sw.timed == NULL);
	ctl_ok("set 1,3 in loss=2.5% delay=1.5ms jitter=100us rate=1gbit mtu=1500");
	CHECK_EQ(sw.port[0].imp[FABRIC_IN].loss, 25000);
	CHECK_EQ(sw.port[0].imp[FABRIC_IN].delay_us, 1500);
	CHECK_EQ(sw.port[0].imp[FABRIC_IN].rate_mbit, 1000);
	CHECK_EQ(sw.port[2].imp[FABRIC_IN].mtu, 1500);
	CHECK_EQ(sw.port[1].imp[FABRIC_IN].loss, 0);
	CHECK_EQ(sw.port[0].imp[FABRIC_OUT].loss, 0);
	r = ctl("show", true);
	CHECK(strstr(r, "\"loss\":2.5,") != NULL);
	free(r);
	ctl_ok("clear");
	/* A script: checked whole first (a bad line schedules nothing), then timed. */
	fd = mkstemp(path);
	CHECK(fd >= 0);
	f = fdopen(fd, "w");
	fprintf(f, "# outage\nat 10ms port 2 down; at 30ms port 2 up\nat 20ms bogus\n");
	fclose(f);
	snprintf(line, sizeof(line), "script %s", path);
	r = ctl(line, false);
	CHECK(strstr(r, "line 3") != NULL);
	free(r);
	CHECK(sw.timed == NULL);
	f = fopen(path, "w");
	/* (margins of 100 ms: a loaded machine may not run the test for a while) */
	fprintf(f, "# outage\nat 100ms port 2 down; at 300ms port 2 up\n"
		"at 50ms port 2 out dup=100\n");
	fclose(f);
	r = ctl(line, true);
	CHECK(strstr(r, "\"events\":3") != NULL);
	free(r);
	unlink(path);
	pump(200);
	CHECK_EQ(sw.port[1].link_down, 1);
	CHECK_EQ(sw.port[1].imp[FABRIC_OUT].dup, FABRIC_PPM);
	send_numbered(0, 2, 100);
	pump(200);
	CHECK_EQ(sw.port[1].link_down, 0);
	send_numbered(2, 1, 100);
	CHECK_EQ(received(1, got, 16, NULL), 2);	/* two lost while down, one doubled */
	CHECK_EQ(got[0], 2);
	ctl_ok("at 1ms clear");
	pump(5);
	CHECK_EQ(sw.impaired, 0);
	teardown();
}

static uint32_t rd32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return v;
}

/* A RoCE v2 packet (IPv4, UDP 4791, BTH with @opcode, QP @qpn, PSN @psn) from a to b, in
 * by port 1. */
static void send_roce(uint8_t opcode, uint32_t qpn, uint16_t psn)
{
	uint8_t q[4 + 14 + 20 + 8 + 12 + 4];
	size_t l = make_frame(q, mac_b, mac_a, sizeof(q) - 4);

	memset(q + 4 + 12, 0, sizeof(q) - 16);
	q[4 + 12] = 0x08;			/* IPv4 */
	q[4 + 14] = 0x45;
	q[4 + 14 + 9] = 17;			/* UDP */
	q[4 + 34 + 2] = 4791 >> 8;
	q[4 + 34 + 3] = 4791 & 0xff;
	q[4 + 42] = opcode;
	q[4 + 42 + 7] = (uint8_t)qpn;		/* destination QP */
	q[4 + 42 + 10] = psn >> 8;
	q[4 + 42 + 11] = psn & 0xff;
	CHECK_EQ(write(peer[0], q, l), l);
	fabric_read(&sw, 0);
}

/* A RoCE v1 packet (Ethertype 0x8915, GRH, BTH with @opcode, QP @qpn, PSN @psn) from a to
 * b, in by port 1. */
static void send_roce_v1(uint8_t opcode, uint32_t qpn, uint16_t psn)
{
	uint8_t q[4 + 14 + 40 + 12 + 4];
	size_t l = make_frame(q, mac_b, mac_a, sizeof(q) - 4);

	memset(q + 4 + 12, 0, sizeof(q) - 16);
	q[4 + 12] = 0x89;			/* RoCE v1 */
	q[4 + 13] = 0x15;
	q[4 + 14] = 0x60;			/* GRH: IPVer 6 */
	q[4 + 14 + 5] = 16;			/* PayLen */
	q[4 + 14 + 6] = 0x1b;			/* NxtHdr: the BTH */
	q[4 + 54] = opcode;
	q[4 + 54 + 7] = (uint8_t)qpn;
	q[4 + 54 + 10] = psn >> 8;
	q[4 + 54 + 11] = psn & 0xff;
	CHECK_EQ(write(peer[0], q, l), l);
	fabric_read(&sw, 0);
}

/* drop=N loses the next N RDMA packets and nothing else: not ACKs, not other frames; RoCE
 * v1 packets count as v2 ones do. */
static void test_drop_next_rdma(void)
{
	uint8_t r[4096];
	char *reply;
	ssize_t n;

	setup_learned(2);
	ctl_ok("set 1 in drop=3");
	free(ctl("set 1 in drop=x", false));
	reply = ctl("show", true);
	CHECK(strstr(reply, "\"drop\":3") != NULL);
	free(reply);
	send_numbered(0, 3, 100);		/* not RDMA: all pass */
	send_roce(0x11, 0x11, 1);		/* an ACK: passes */
	send_roce_v1(0x11, 0x11, 1);		/* a RoCE v1 ACK: passes */
	send_roce(0x04, 0x11, 2);		/* lost */
	send_roce_v1(0x04, 0x11, 3);		/* lost */
	send_roce(0x04, 0x11, 4);		/* lost */
	send_roce(0x04, 0x11, 5);		/* passes: drop is used up */
	n = drain(1, r, sizeof(r));
	/* three numbered frames of 100 B, the ACK and PSN 5 (58 B) and the v1 ACK (70 B),
	 * each after its length */
	CHECK_EQ(n, 3 * 104 + 2 * 62 + 74);
	CHECK_EQ(r[n - 62 + 4 + 42 + 11], 5);
	CHECK_EQ(sw.port[0].st[FABRIC_IN].dropped, 3);
	CHECK_EQ(sw.port[0].imp[FABRIC_IN].drop, 0);
	teardown();
}

static void test_capture_pcapng(void)
{
	char path[] = "/tmp/qhca-fabric-cap-XXXXXX", line[128];
	static uint8_t buf[1 << 16];
	int fd, blocks[8] = { 0 }, epb = 0, comments = 0, on_port1 = 0, resent = 0, k;
	size_t len, off = 0;
	char *r;

	fd = mkstemp(path);
	CHECK(fd >= 0);
	close(fd);
	setup_learned(2);
	snprintf(line, sizeof(line), "capture start %s", path);
	ctl_ok(line);
	r = ctl("show", true);
	CHECK(strstr(r, path) != NULL);
	free(r);
	send_numbered(0, 3, 200);	/* three frames in by port 1 */
	ctl_ok("set 2 out loss=100");
	send_numbered(3, 1, 200);	/* one more, lost: in the capture with a comment */
	ctl_ok("clear");
	/* A RoCE v2 request (IPv4, UDP 4791, BTH: SEND_ONLY to QP 0x11, PSN 1234) twice, and an
	 * ACK of the same PSN twice: the second request is a retransmission, an ACK never. */
	for (k = 0; k < 4; k++)
		send_roce(k < 2 ? 0x04 : 0x11, 0x11, 1234);	/* SEND_ONLY, then ACK */
	ctl_ok("capture stop");
	fd = open(path, O_RDONLY);
	len = (size_t)read(fd, buf, sizeof(buf));
	close(fd);
	unlink(path);
	/* A section header, one interface per port, one packet block per frame that entered. */
	while (off + 12 <= len) {
		uint32_t type = rd32(buf + off), blen = rd32(buf + off + 4);

		CHECK(blen >= 12 && blen % 4 == 0 && off + blen <= len);
		CHECK_EQ(rd32(buf + off + blen - 4), blen);
		if (blen < 12 || off + blen > len)
			break;
		if (type == 0x0a0d0d0a)
			blocks[0]++;
		else if (type == 1)
			blocks[1]++;
		if (type == 6) {
			epb++;
			on_port1 += rd32(buf + off + 8) == 0;
			if (epb <= 4)
				CHECK_EQ(rd32(buf + off + 20), 200);	/* captured length */
			if (memmem(buf + off, blen, "lost on the way out to port 2", 29))
				comments++;
			if (memmem(buf + off, blen, "retransmission: PSN 1234 to QP 0x000011 as in "
				   "frame 5", 52)) {
				CHECK_EQ(epb, 6);
				resent++;
			}
		}
		off += blen;
	}
	CHECK_EQ(off, len);
	CHECK_EQ(blocks[0], 1);
	CHECK_EQ(blocks[1], 2);
	CHECK_EQ(epb, 8);
	CHECK_EQ(on_port1, 8);
	CHECK_EQ(comments, 1);
	CHECK_EQ(resent, 1);
	teardown();
}

/* A port reached over TCP, and two switches joined by a trunk (unix and TCP). */
static void test_tcp_port_and_trunk(void)
{
	static struct fabric sw2;
	char dir[] = "/tmp/qhca-fabric-trunk-XXXXXX", addr[160];
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t sl = sizeof(sa);
	uint8_t f[256], r[1024];
	int cfd, p2, sv[2], k;
	ssize_t n = 0;
	size_t len;

	CHECK(mkdtemp(dir) != NULL);
	/* Switch 1 (sw): port 1 a socketpair, port 2 a trunk to switch 2's port 1. */
	setup(2);
	close(peer[1]);
	fabric_init(&sw2, 2);
	CHECK_EQ(fabric_listen(&sw2, 0, dir), 0);
	close(sw.port[1].fd);
	sw.port[1].fd = -1;
	snprintf(addr, sizeof(addr), "unix:%s/port1.sock", dir);
	CHECK_EQ(fabric_set_trunk(&sw, 1, addr), 0);
	/* Switch 2's port 2 over TCP on loopback, an ephemeral port. */
	CHECK_EQ(fabric_listen_tcp(&sw2, 1, "127.0.0.1", 0), 0);
	CHECK_EQ(getsockname(sw2.port[1].tcp_listen_fd, (struct sockaddr *)&sa, &sl), 0);
	cfd = socket(AF_INET, SOCK_STREAM, 0);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	CHECK_EQ(connect(cfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	for (k = 0; k < 20 && (sw.port[1].fd < 0 || sw2.port[0].fd < 0 || sw2.port[1].fd < 0); k++) {
		fabric_poll(&sw, 1);
		fabric_poll(&sw2, 1);
	}
	CHECK(sw.port[1].fd >= 0 && sw2.port[0].fd >= 0 && sw2.port[1].fd >= 0);
	/* A broadcast from switch 1's port 1 reaches the TCP peer on switch 2. */
	len = make_frame(f, bcast, mac_a, 100);
	CHECK_EQ(write(peer[0], f, len), len);
	for (k = 0; k < 50 && n <= 0; k++) {
		fabric_poll(&sw, 1);
		fabric_poll(&sw2, 1);
		n = recv(cfd, r, sizeof(r), MSG_DONTWAIT);
	}
	CHECK_EQ(n, len);
	CHECK(!memcmp(r, f, len));
	/* And the answer comes back by the learned way. */
	len = make_frame(f, mac_a, mac_b, 100);
	CHECK_EQ(write(cfd, f, len), len);
	for (k = 0, n = 0; k < 50 && n <= 0; k++) {
		fabric_poll(&sw2, 1);
		fabric_poll(&sw, 1);
		n = drain(0, r, sizeof(r));
	}
	CHECK_EQ(n, len);
	close(cfd);
	(void)sv;
	(void)p2;
	fabric_close(&sw2);
	unlink(sw2.port[0].path);
	rmdir(dir);
	peer[1] = open("/dev/null", O_RDONLY);	/* teardown closes it */
	teardown();
}


/* ---- hardening: bounded delay line, script nesting, replies always JSON, IB multicast ---- */


/* Is every port's queue and delay line within queue_max (an empty port takes one frame)? */
static bool queues_bounded(size_t frame_len)
{
	int i;

	for (i = 0; i < sw.nports; i++) {
		const struct fabric_port *p = &sw.port[i];

		if (p->out_len + p->delayed_bytes > sw.queue_max + 256 + frame_len)
			return false;
	}
	return true;
}

/* Broadcast towards ports with a delay or a rate, whose peers do not read: the delay line
 * holds at most queue_max bytes per port, the rest is dropped and counted. */
static void test_flood_delay_line_bounded(void)
{
	static uint8_t f[4 + 1000];
	size_t n = make_frame(f, bcast, mac_a, 1000);
	bool bounded = true;
	int k;

	setup(4);
	sw.queue_max = 64 << 10;
	ctl_ok("set 2 out delay=1s");
	ctl_ok("set 3 out rate=1");
	ctl_ok("set 1 in delay=500ms jitter=100ms");	/* on the way in: to every port */
	for (k = 0; k < 2000; k++) {
		CHECK_EQ(write(peer[0], f, n), n);
		fabric_read(&sw, 0);
		bounded = bounded && queues_bounded(1000);
	}
	CHECK(bounded);
	for (k = 1; k < 4; k++) {
		CHECK(sw.port[k].delayed_bytes <= sw.queue_max);
		CHECK(sw.port[k].tx_drops > 1000);	/* counted where they were dropped */
	}
	CHECK_EQ(sw.port[0].rx_frames, 2000);
	/* Unicast with a delay still pauses instead of dropping (lossless), bounded as well. */
	teardown();
	setup_learned(2);
	sw.queue_max = 64 << 10;
	ctl_ok("set 2 out delay=1s");
	n = make_frame(f, mac_b, mac_a, 1000);
	for (k = 0; k < 200; k++) {
		if (write(peer[0], f, n) != (ssize_t)n)
			break;
		fabric_read(&sw, 0);
		bounded = bounded && queues_bounded(1000);
	}
	CHECK(bounded);
	CHECK_EQ(sw.port[1].tx_drops, 0);
	CHECK(sw.port[0].wait_out == 1);	/* the sender waits for the delay line */
	teardown();
}

/* A port whose delay line alone is full (its peer reads all it is sent) is not stalled:
 * the line empties by itself. Neither dropped floods nor paused unicast senders start its
 * stall clock, and it is not disconnected after stall_ms. */
static void test_full_delay_line_not_stalled(void)
{
	static uint8_t f[4 + 1000], r[1 << 16];
	size_t n;
	double t0;
	int k;

	setup_learned(2);
	sw.queue_max = 16 << 10;
	sw.stall_ms = 30;
	ctl_ok("set 2 out delay=5s");
	n = make_frame(f, bcast, mac_a, 1000);	/* floods: the line fills, the rest dropped */
	for (k = 0; k < 40; k++) {
		CHECK_EQ(write(peer[0], f, n), n);
		fabric_read(&sw, 0);
	}
	CHECK(sw.port[1].tx_drops > 0);
	CHECK_EQ(sw.port[1].out_len, 0);
	CHECK_EQ(sw.port[1].full_since_ms, 0);
	n = make_frame(f, mac_b, mac_a, 1000);	/* unicast: the sender waits */
	CHECK_EQ(write(peer[0], f, n), n);
	fabric_read(&sw, 0);
	CHECK_EQ(sw.port[0].wait_out, 1);
	CHECK_EQ(sw.port[1].full_since_ms, 0);
	for (t0 = now_s(); now_s() - t0 < 0.1;) {
		usleep(5000);
		fabric_tick(&sw);
		drain(1, r, sizeof(r));
	}
	CHECK(sw.port[1].fd >= 0);	/* not disconnected */
	CHECK_EQ(sw.port[0].wait_out, 1);
	teardown();
}

/* With jitter, the delay line takes a frame and gives it back in O(log n) steps: a guest
 * flooding small broadcasts does not cost the switch the length of the line per frame. The
 * frames still come out by due time, equal ones in the order they went in. */
static void test_jitter_delay_line_log_cost(void)
{
	static uint8_t f[1000 * (4 + 60)];
	const int batch = 1000, rounds = 30, nf = batch * rounds;
	uint64_t steps, bound = 0;
	size_t n = 0;
	int k;

	for (k = 0; k < batch; k++)
		n += make_frame(f + n, bcast, mac_a, 60);
	setup(3);
	ctl_ok("set 2,3 out delay=1s jitter=1s");
	for (k = 0; k < rounds; k++) {
		CHECK_EQ(write(peer[0], f, n), n);
		fabric_read(&sw, 0);
	}
	CHECK_EQ(sw.port[0].rx_frames, nf);
	CHECK(sw.port[1].delayed_bytes > 0 && sw.port[1].tx_drops == 0);
	for (k = 1; k < 2 * nf; k *= 2)
		bound += 2 * nf;	/* 2 n log2(2 n): inserts and removes */
	steps = sw.dl_steps;
	printf("  %d frames into the delay line: %llu steps (bound %llu)\n", 2 * nf,
	       (unsigned long long)steps, (unsigned long long)bound);
	CHECK(steps <= bound);
	/* Everything comes out. */
	CHECK(fabric_release_due(&sw, fabric_now_ns() + 3000000000ull) == UINT64_MAX);
	CHECK_EQ(sw.port[1].delayed_bytes, 0);
	CHECK_EQ(sw.port[2].delayed_bytes, 0);
	CHECK_EQ(sw.port[1].tx_frames, nf);
	CHECK_EQ(sw.port[2].tx_frames, nf);
	CHECK(sw.dl_steps - steps <= bound);
	teardown();
}

/* A script that loads itself, or two that load each other, are refused: nothing is
 * scheduled, the fabric lives. Scripts nest a few levels; pending events are bounded. */
static void test_script_nesting_and_event_bound(void)
{
	char dir[] = "/tmp/qhca-fabric-scripts-XXXXXX", a[128], b[128], c[160], line[200];
	char *r;
	FILE *f;
	int k, depth;

	CHECK(mkdtemp(dir) != NULL);
	snprintf(a, sizeof(a), "%s/a.fab", dir);
	snprintf(b, sizeof(b), "%s/b.fab", dir);
	setup_learned(2);
	/* itself */
	f = fopen(a, "w");
	fprintf(f, "at 0 script %s\n", a);
	fclose(f);
	snprintf(line, sizeof(line), "script %s", a);
	r = ctl(line, false);
	CHECK(json_valid(r));
	CHECK(strstr(r, "levels deep") != NULL);
	free(r);
	CHECK(sw.timed == NULL);
	/* through 'at', and each other */
	f = fopen(a, "w");
	fprintf(f, "at 10ms link 2 down\nat 0 at 1s script %s\n", b);
	fclose(f);
	f = fopen(b, "w");
	fprintf(f, "at 0 script %s\n", a);
	fclose(f);
	ctl_refused(line, "levels deep");
	CHECK(sw.timed == NULL);
	snprintf(c, sizeof(c), "at 1s script %s", a);
	ctl_refused(c, "levels deep");
	CHECK(sw.timed == NULL);
	/* A chain as deep as allowed works; one level more is refused whole. */
	for (depth = 1; depth <= FABRIC_SCRIPT_DEPTH + 1; depth++) {
		for (k = depth; k >= 1; k--) {
			snprintf(c, sizeof(c), "%s/s%d.fab", dir, k);
			f = fopen(c, "w");
			if (k == depth)
				fprintf(f, "at 1ms port 2 out dup=100\n");
			else
				fprintf(f, "at 1ms script %s/s%d.fab\n", dir, k + 1);
			fclose(f);
		}
		snprintf(line, sizeof(line), "script %s/s1.fab", dir);
		if (depth <= FABRIC_SCRIPT_DEPTH)
			ctl_ok(line);
		else
			ctl_refused(line, "levels deep");
		CHECK_EQ(sw.timed != NULL, depth <= FABRIC_SCRIPT_DEPTH);
		for (k = 0; k < 2000 && sw.timed; k++)	/* the chain runs, 1 ms a level */
			pump(1);
		CHECK_EQ(sw.port[1].imp[FABRIC_OUT].dup,
			 depth <= FABRIC_SCRIPT_DEPTH ? FABRIC_PPM : 0);
		CHECK(sw.timed == NULL);
		ctl_ok("clear");
	}
	/* One command reads a bounded number of scripts, however they nest. */
	f = fopen(b, "w");
	fprintf(f, "at 0 zero\n");
	fclose(f);
	f = fopen(a, "w");
	for (k = 0; k < FABRIC_SCRIPT_LOADS_MAX; k++)
		fprintf(f, "at %ds script %s\n", k, b);
	fclose(f);
	snprintf(line, sizeof(line), "script %s", a);
	snprintf(c, sizeof(c), "reads at most %d scripts", FABRIC_SCRIPT_LOADS_MAX);
	ctl_refused(line, c);
	CHECK(sw.timed == NULL);
	/* Pending events: a script past the bound is refused whole, one within it passes, a
	 * second that would pass the bound is refused and leaves the first alone. */
	f = fopen(a, "w");
	for (k = 0; k <= FABRIC_TIMED_MAX; k++)
		fprintf(f, "at 3600s zero\n");
	fclose(f);
	snprintf(line, sizeof(line), "script %s", a);
	snprintf(c, sizeof(c), "0 pending, %d more would pass the limit", FABRIC_TIMED_MAX + 1);
	ctl_refused(line, c);
	CHECK(sw.timed == NULL);
	f = fopen(a, "w");
	for (k = 0; k < FABRIC_TIMED_MAX / 2 + 1; k++)
		fprintf(f, "at %dms zero\n", 3600000 - k);	/* in reverse: each goes first */
	fclose(f);
	r = ctl(line, true);
	snprintf(c, sizeof(c), "\"events\":%d", FABRIC_TIMED_MAX / 2 + 1);
	CHECK(strstr(r, c) != NULL);
	free(r);
	snprintf(c, sizeof(c), "%d pending, %d more would pass the limit",
		 FABRIC_TIMED_MAX / 2 + 1, FABRIC_TIMED_MAX / 2 + 1);
	ctl_refused(line, c);
	r = ctl("show", true);
	snprintf(c, sizeof(c), "\"pending_events\":%d,", FABRIC_TIMED_MAX / 2 + 1);
	CHECK(strstr(r, c) != NULL);
	free(r);
	for (k = 0; k < FABRIC_TIMED_MAX; k++) {	/* 'at' is bounded too */
		r = fabric_command(&sw, "at 3600s zero");
		if (strncmp(r, "{\"ok\":true", 10)) {
			CHECK(strstr(r, "too many timed events") != NULL);
			free(r);
			break;
		}
		free(r);
	}
	CHECK_EQ(k, FABRIC_TIMED_MAX - (FABRIC_TIMED_MAX / 2 + 1));
	teardown();
	unlink(a);
	unlink(b);
	for (k = 1; k <= FABRIC_SCRIPT_DEPTH + 1; k++) {
		snprintf(c, sizeof(c), "%s/s%d.fab", dir, k);
		unlink(c);
	}
	rmdir(dir);
}

/* Every reply is one line of valid JSON, also for words with bytes that are not text. */
static void test_replies_are_json(void)
{
	static const char *const lines[] = {
		"set 1 loss=\xff\xfe", "frob\x01nicate \"x\\", "link 1 \x7f", "script \xc3(",
		"at 1s \x80\x81", "set 1 \t in", "", "show", "help", "zero",
	};
	unsigned k;
	char *r;

	setup(2);
	for (k = 0; k < sizeof(lines) / sizeof(lines[0]); k++) {
		r = fabric_command(&sw, lines[k]);
		if (!json_valid(r))
			fprintf(stderr, "  '%s' -> %s\n", lines[k], r ? r : "(none)");
		CHECK(json_valid(r));
		free(r);
	}
	teardown();
}

/* A script or a capture named by a FIFO is refused at once (opening one would wait for a
 * peer for ever); a capture that cannot start leaves the one that runs alone. */
static void test_fifo_refused_capture_kept(void)
{
	char dir[] = "/tmp/qhca-fabric-fifo-XXXXXX", fifo[128], cap[128], line[300];
	char *r;

	arm_alarm();
	CHECK(mkdtemp(dir) != NULL);
	snprintf(fifo, sizeof(fifo), "%s/fifo", dir);
	snprintf(cap, sizeof(cap), "%s/cap.pcapng", dir);
	CHECK_EQ(mkfifo(fifo, 0600), 0);
	setup(2);
	snprintf(line, sizeof(line), "script %s", fifo);
	r = ctl(line, false);
	CHECK(strstr(r, "not a regular file") != NULL);
	free(r);
	snprintf(line, sizeof(line), "script %s", dir);
	free(ctl(line, false));
	snprintf(line, sizeof(line), "capture start %s", cap);
	ctl_ok(line);
	snprintf(line, sizeof(line), "capture start %s", fifo);
	free(ctl(line, false));
	snprintf(line, sizeof(line), "capture start %s/no/such/dir/x", dir);
	free(ctl(line, false));
	CHECK(fabric_capture_path(&sw) && !strcmp(fabric_capture_path(&sw), cap));
	/* the same file again: restarted, not written twice */
	snprintf(line, sizeof(line), "capture start %s", cap);
	ctl_ok(line);
	ctl_ok("capture stop");
	teardown();
	alarm(0);
	unlink(cap);
	unlink(fifo);
	rmdir(dir);
}

/*
 * The review's attack on the control socket: 8 clients, each sending a 4 KiB line of
 * "show" commands, reading the replies 1 KiB every 50 ms and reconnecting when dropped.
 * Meanwhile frames from port 1 must reach port 2 within a bound: the switch never waits on
 * a control client.
 */
static void test_slow_control_client_bounded(void)
{
	char dir[] = "/tmp/qhca-fabric-ctl-XXXXXX", path[128], cmds[4095];
	uint8_t f[128], r[4096];
	double worst = 0, t0;
	pid_t pid[FABRIC_CTL_CLIENTS];
	int k, i, sent = 0, served = 0, status;
	size_t n = make_frame(f, bcast, mac_a, 60);

	arm_alarm();
	CHECK(mkdtemp(dir) != NULL);
	snprintf(path, sizeof(path), "%s/control.sock", dir);
	setup(2);
	CHECK_EQ(fabric_control_listen(&sw, path), 0);
	for (k = 0; k + 5 <= (int)sizeof(cmds); k += 5)
		memcpy(cmds + k, "show\n", 5);
	for (i = 0; i < FABRIC_CTL_CLIENTS; i++) {
		pid[i] = fork();
		if (pid[i] == 0) {
			struct sockaddr_un sa = { .sun_family = AF_UNIX };
			char rb[1024];
			int fd;

			strcpy(sa.sun_path, path);
			usleep(20000 * i);
			for (t0 = now_s(); now_s() - t0 < 30;) {
				fd = socket(AF_UNIX, SOCK_STREAM, 0);
				if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) ||
				    write(fd, cmds, (size_t)k) != k) {
					close(fd);
					usleep(10000);
					continue;
				}
				while (now_s() - t0 < 30 && read(fd, rb, sizeof(rb)) > 0)
					usleep(50000);
				close(fd);
			}
			_exit(0);
		}
		CHECK(pid[i] > 0);
	}
	/* Let every client connect and queue its commands, then send a frame each 50 ms. */
	for (t0 = now_s(); now_s() - t0 < 0.5;)
		fabric_poll(&sw, 10);
	for (t0 = now_s(); now_s() - t0 < 6; sent++) {
		double ts = now_s(), lat;
		ssize_t got = 0;

		CHECK_EQ(write(peer[0], f, n), n);
		while ((got = drain(1, r, sizeof(r))) == 0 && now_s() - ts < 5)
			fabric_poll(&sw, 10);
		CHECK_EQ(got, n);
		lat = now_s() - ts;
		if (lat > worst)
			worst = lat;
		for (i = 0; i < FABRIC_CTL_CLIENTS; i++)
			served += sw.ctl[i].fd >= 0;
		for (ts = now_s(); now_s() - ts < 0.05;)
			fabric_poll(&sw, 10);
	}
	printf("  %d frames, the slowest took %.3f s; control clients seen %d times\n", sent,
	       worst, served);
	CHECK(served > 0);	/* the attack ran */
	CHECK(worst < 0.25);
	for (i = 0; i < FABRIC_CTL_CLIENTS; i++)
		kill(pid[i], SIGKILL);
	for (i = 0; i < FABRIC_CTL_CLIENTS; i++)
		waitpid(pid[i], &status, 0);
	teardown();
	alarm(0);
	unlink(path);
	rmdir(dir);
}

/* A client that sends its commands and shuts its side (socat, echo | ...) gets every reply,
 * written as its socket takes them, then is closed; a line longer than the buffer gets
 * its error. */
static void test_control_replies_after_eof(void)
{
	char dir[] = "/tmp/qhca-fabric-ctl-XXXXXX", path[128], got[1 << 16], big[5000];
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	size_t have = 0;
	double t0;
	ssize_t r;
	int fd, lines = 0, pass;

	CHECK(mkdtemp(dir) != NULL);
	snprintf(path, sizeof(path), "%s/control.sock", dir);
	strcpy(sa.sun_path, path);
	setup(2);
	CHECK_EQ(fabric_control_listen(&sw, path), 0);
	for (pass = 0; pass < 2; pass++) {
		fd = socket(AF_UNIX, SOCK_STREAM, 0);
		CHECK_EQ(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
		if (pass == 0) {
			CHECK_EQ(write(fd, "seed 7\nshow\nnonsense\n", 21), 21);
		} else {
			memset(big, 'x', sizeof(big));
			CHECK_EQ(write(fd, big, sizeof(big)), (ssize_t)sizeof(big));
		}
		shutdown(fd, SHUT_WR);
		fcntl(fd, F_SETFL, O_NONBLOCK);
		have = 0;
		for (t0 = now_s(); now_s() - t0 < 3;) {
			fabric_poll(&sw, 10);
			r = recv(fd, got + have, sizeof(got) - 1 - have, 0);
			if (r == 0)
				break;	/* closed by the switch, every reply out */
			if (r > 0)
				have += (size_t)r;
		}
		got[have] = 0;
		for (lines = 0, r = 0; r < (ssize_t)have; r++)
			lines += got[r] == '\n';
		if (pass == 0) {
			CHECK_EQ(lines, 3);
			CHECK(!strncmp(got, "{\"ok\":true", 10));
			CHECK(strstr(got, "\"seed\":7") != NULL);
			CHECK(strstr(got, "{\"ok\":false") != NULL);
		} else {
			CHECK_EQ(lines, 1);
			CHECK(strstr(got, "line longer than 4096 bytes") != NULL);
		}
		close(fd);
	}
	for (pass = 0; pass < FABRIC_CTL_CLIENTS; pass++)
		CHECK_EQ(sw.ctl[pass].fd, -1);
	teardown();
	unlink(path);
	rmdir(dir);
}

/* ---- the InfiniBand switch: its SMA programmed by SMPs, as a subnet manager would ---- */

/* An IB packet into fabric port @port, as its HCA would send it. */
static void ib_send(int port, const struct roce_pkt *p)
{
	uint8_t buf[4 + IB_MAX_PKT];
	size_t n = ib_build(p, buf + 4, sizeof(buf) - 4);

	CHECK(n > 0);
	buf[0] = buf[1] = 0;
	buf[2] = (uint8_t)(n >> 8);
	buf[3] = (uint8_t)n;
	CHECK_EQ(write(peer[port], buf, 4 + n), 4 + n);
	fabric_read(&sw, port);
}

/* A directed-route Get or Set to the switch from fabric port 1, one hop; its status. */
static int ib_smp(uint8_t method, uint16_t attr, uint32_t mod, const uint8_t *data,
		  uint8_t *resp)
{
	uint8_t mad[IB_MAD_LEN], len[4], store[IB_MAX_PKT];
	struct roce_pkt p;
	size_t l;

	memset(mad, 0, sizeof(mad));
	mad[IB_MAD_BASE_VERSION] = 1;
	mad[IB_MAD_CLASS] = IB_MCLASS_SMP_DR;
	mad[IB_MAD_CLASS_VERSION] = 1;
	mad[IB_MAD_METHOD] = method;
	mad[IB_MAD_HOP_PTR] = 1;
	mad[IB_MAD_HOP_CNT] = 1;
	ib_put16(mad + IB_MAD_ATTR_ID, attr);
	ib_put32(mad + IB_MAD_ATTR_MOD, mod);
	ib_put16(mad + IB_SMP_DR_SLID, IB_LID_PERMISSIVE);
	ib_put16(mad + IB_SMP_DR_DLID, IB_LID_PERMISSIVE);
	mad[IB_SMP_INITIAL_PATH + 1] = 1;
	if (data)
		memcpy(mad + IB_SMP_DATA, data, IB_SMP_DATA_LEN);
	memset(&p, 0, sizeof(p));
	p.ib = true;
	p.vl = IB_VL_SMP;
	p.dlid = p.slid = IB_LID_PERMISSIVE;
	p.opcode = ROCE_TS_UD | ROCE_OP_SEND_ONLY;
	p.pkey = 0xffff;
	p.payload = mad;
	p.payload_len = IB_MAD_LEN;
	ib_send(0, &p);
	if (recv(peer[0], len, 4, MSG_DONTWAIT) != 4)
		return -1;
	l = (size_t)len[2] << 8 | len[3];
	if (l > sizeof(store) || recv(peer[0], store, l, MSG_DONTWAIT) != (ssize_t)l ||
	    ib_parse(store, l, &p) != ROCE_OK || p.payload_len != IB_MAD_LEN)
		return -1;
	if (resp)
		memcpy(resp, p.payload, IB_MAD_LEN);
	return ib_get16(p.payload + IB_MAD_STATUS) & 0x7fff;
}

static void ib_setup(int nports)
{
	uint8_t r[IB_MAD_LEN], d[IB_SMP_DATA_LEN];
	struct ib_port_info pi;
	int i, s;

	setup(nports);
	CHECK_EQ(fabric_ib_enable(&sw, 0x0011223344556677ull), 0);
	fabric_ib_links(&sw);
	for (i = 1; i <= nports; i++)
		for (s = IB_PORT_ARMED; s <= IB_PORT_ACTIVE; s++) {
			CHECK_EQ(ib_smp(IB_METHOD_GET, IB_ATTR_PORT_INFO, (uint32_t)i, NULL, r), 0);
			ib_port_info_unpack(r + IB_SMP_DATA, &pi);
			pi.state = (uint8_t)s;
			ib_port_info_pack(&pi, d);
			CHECK_EQ(ib_smp(IB_METHOD_SET, IB_ATTR_PORT_INFO, (uint32_t)i, d, r), 0);
		}
}

/* A UD packet to multicast LID 0xc001 from fabric port 1. */
static void ib_mcast(void)
{
	uint8_t payload[256] = { 1, 2, 3 };
	struct roce_pkt p;

	memset(&p, 0, sizeof(p));
	p.ib = true;
	p.grh = true;
	p.dlid = 0xc001;
	p.slid = 1;
	p.opcode = ROCE_TS_UD | ROCE_OP_SEND_ONLY;
	p.pkey = 0xffff;
	p.dqpn = 0xffffff;
	p.payload = payload;
	p.payload_len = sizeof(payload);
	ib_send(0, &p);
}

/* A forwarding table as large as the switch has (LinearFDBTop 0xbfff, every entry a
 * port): 'show' grows with it and stays valid JSON. */
static void test_ib_show_full_lft_is_json(void)
{
	uint8_t r[IB_MAD_LEN], d[IB_SMP_DATA_LEN];
	uint32_t block;
	char *reply;

	ib_setup(2);
	CHECK_EQ(ib_smp(IB_METHOD_GET, IB_ATTR_SWITCH_INFO, 0, NULL, r), 0);
	memcpy(d, r + IB_SMP_DATA, sizeof(d));
	ib_put16(d + 6, 0xbfff);
	CHECK_EQ(ib_smp(IB_METHOD_SET, IB_ATTR_SWITCH_INFO, 0, d, r), 0);
	memset(d, 2, sizeof(d));
	for (block = 0; block < 0xc000 / 64; block++)
		CHECK_EQ(ib_smp(IB_METHOD_SET, IB_ATTR_LFT, block, d, r), 0);
	reply = ctl("show", true);
	CHECK(json_valid(reply));
	CHECK(strstr(reply, "\"lft_top\":49151") != NULL);
	CHECK(strstr(reply, "\"49151\":2}") != NULL);	/* the last entry, and the end */
	free(reply);
	teardown();
}

/* An IB multicast packet enters the capture once, however many ports it goes to; towards
 * ports that do not read behind a delay it is bounded like a flooded Ethernet frame. */
static void test_ib_multicast_captured_once_and_bounded(void)
{
	char path[] = "/tmp/qhca-fabric-ibcap-XXXXXX", line[128];
	static uint8_t buf[1 << 16];
	uint8_t r[IB_MAD_LEN], d[IB_SMP_DATA_LEN];
	int fd, epb = 0, k;
	bool bounded = true;
	size_t len, off;

	ib_setup(4);
	memset(d, 0, sizeof(d));
	ib_put16(d + 2, 1u << 2 | 1u << 3 | 1u << 4);	/* MLID 0xc001: switch ports 2..4 */
	CHECK_EQ(ib_smp(IB_METHOD_SET, IB_ATTR_MFT, 0, d, r), 0);
	fd = mkstemp(path);
	CHECK(fd >= 0);
	close(fd);
	snprintf(line, sizeof(line), "capture start %s", path);
	ctl_ok(line);
	ib_mcast();
	ctl_ok("capture stop");
	for (k = 1; k < 4; k++)
		CHECK_EQ(sw.port[k].tx_frames, 1);
	fd = open(path, O_RDONLY);
	len = (size_t)read(fd, buf, sizeof(buf));
	close(fd);
	unlink(path);
	for (off = 0; off + 12 <= len && rd32(buf + off + 4) >= 12; off += rd32(buf + off + 4))
		epb += rd32(buf + off) == 6;
	CHECK_EQ(epb, 1);
	/* Behind a delay, to peers that do not read. */
	sw.queue_max = 64 << 10;
	ctl_ok("set 2-4 out delay=1s");
	for (k = 0; k < 1000; k++) {
		ib_mcast();
		bounded = bounded && queues_bounded(400);
	}
	CHECK(bounded);
	for (k = 1; k < 4; k++)
		CHECK(sw.port[k].tx_drops > 500);
	teardown();
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
	{ "loss_counted_and_seeded", test_loss_counted_and_seeded },
	{ "dup_corrupt_reorder", test_dup_corrupt_reorder },
	{ "delay_rate_mtu_link", test_delay_rate_mtu_link },
	{ "control_commands_and_timed_events", test_control_commands_and_timed_events },
	{ "capture_pcapng", test_capture_pcapng },
	{ "drop_next_rdma", test_drop_next_rdma },
	{ "tcp_port_and_trunk", test_tcp_port_and_trunk },
	{ "flood_delay_line_bounded", test_flood_delay_line_bounded },
	{ "script_nesting_and_event_bound", test_script_nesting_and_event_bound },
	{ "replies_are_json", test_replies_are_json },
	{ "fifo_refused_capture_kept", test_fifo_refused_capture_kept },
	{ "slow_control_client_bounded", test_slow_control_client_bounded },
	{ "jitter_delay_line_log_cost", test_jitter_delay_line_log_cost },
	{ "full_delay_line_not_stalled", test_full_delay_line_not_stalled },
	{ "control_replies_after_eof", test_control_replies_after_eof },
	{ "ib_show_full_lft_is_json", test_ib_show_full_lft_is_json },
	{ "ib_multicast_captured_once_and_bounded", test_ib_multicast_captured_once_and_bounded },
	{}
};

int main(int argc, char **argv)
{
	return unit_main(tests, argc, argv);
}
