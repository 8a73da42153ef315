// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * qhca-fabric capture: every frame that enters the fabric, once, in pcapng (the format of
 * Wireshark and tshark). Each port is an interface of its own ("port1", "port2", ...), so a
 * frame is recorded with the port it entered by (frame.interface_name); timestamps are the
 * host's wall clock in nanoseconds; what the fabric did to a frame (lost, corrupted, held
 * back, duplicated, delayed, dropped at a link that is down) is the frame's comment
 * (frame.comment, and tshark's expert info shows it). A frame lost on its way is in the
 * capture once, with that comment, and never reaches the receiving port; a RoCE request or
 * response that comes again (same port, destination QP, opcode and PSN) is commented as a
 * retransmission with the frame it repeats.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>

#include "fabric.h"
#include "ib.h"
#include "roce.h"

/* RoCE requests and responses recently captured, by port, destination QP, opcode and PSN:
 * one seen again is a retransmission (a slot is overwritten by another key, so only recent
 * ones are recognised, which is what a capture reader wants). */
#define SEEN_SLOTS	(1u << 16)

struct seen {
	uint64_t key;		/* 0: free */
	uint64_t frame;		/* its frame number in the capture (tshark's, from 1) */
};

struct fabric_capture {
	FILE *f;
	char path[4096];
	int64_t wall_minus_mono;	/* ns: wall clock = monotonic + this */
	uint64_t frames;
	struct seen *seen;
};

/* The key of a RoCE frame (v1 or v2, the codecs of wire/ find its BTH) or an InfiniBand
 * packet other than an SMP (VL15) or an ACK (an RC ACK repeats its PSN by design: never a
 * resend), or 0. */
static uint64_t roce_key(int port, const uint8_t *f, size_t len, int ib)
{
	const uint8_t *bth;
	struct ib_lrh l;

	if (ib)
		bth = ib_lrh_read(f, len, &l) && l.vl != IB_VL_SMP ? ib_bth_find(f, &l) : NULL;
	else
		bth = roce_bth_find(f, len);
	if (!bth || roce_bth_opcode(bth) == (ROCE_TS_RC | ROCE_OP_ACKNOWLEDGE))
		return 0;
	return (uint64_t)(port + 1) << 56 | (uint64_t)roce_bth_dqpn(bth) << 32 |
	       (uint64_t)roce_bth_opcode(bth) << 24 | roce_bth_psn(bth);
}

static void put32(uint8_t *p, uint32_t v)
{
	memcpy(p, &v, 4);	/* pcapng is written in the host's byte order (the SHB says) */
}

static void put16(uint8_t *p, uint16_t v)
{
	memcpy(p, &v, 2);
}

/* An option: code, length, value padded to 4 bytes; returns bytes written at @p. */
static size_t opt(uint8_t *p, uint16_t code, const void *val, size_t len)
{
	size_t pad = (4 - len % 4) % 4;

	put16(p, code);
	put16(p + 2, (uint16_t)len);
	if (len)
		memcpy(p + 4, val, len);
	memset(p + 4 + len, 0, pad);
	return 4 + len + pad;
}

static int write_block(struct fabric_capture *c, uint32_t type, const uint8_t *body,
		       size_t len)
{
	uint8_t hdr[8], tail[4];
	uint32_t total = (uint32_t)(12 + len);

	put32(hdr, type);
	put32(hdr + 4, total);
	put32(tail, total);
	return fwrite(hdr, 1, 8, c->f) == 8 && fwrite(body, 1, len, c->f) == len &&
	       fwrite(tail, 1, 4, c->f) == 4 ? 0 : -1;
}

int fabric_capture_start(struct fabric *sw, const char *path, char *err, size_t errlen)
{
	static const char app[] = "qhca-fabric";
	struct fabric_capture *c;
	struct timespec wall, mono;
	struct stat st, old;
	uint8_t b[256];
	size_t n;
	int i, fd;

	if (strlen(path) >= sizeof(c->path)) {
		snprintf(err, errlen, "capture path too long");
		return -1;
	}
	/* A capture that runs goes on if the new one cannot start, unless it is the same file. */
	if (sw->cap && !stat(path, &st) && !fstat(fileno(sw->cap->f), &old) &&
	    st.st_dev == old.st_dev && st.st_ino == old.st_ino)
		fabric_capture_stop(sw);
	c = calloc(1, sizeof(*c));
	if (!c) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	/* A regular file: a FIFO or a device could make the switch wait for ever. */
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NONBLOCK | O_CLOEXEC | O_NOCTTY, 0666);
	if (fd >= 0 && (fstat(fd, &st) || !S_ISREG(st.st_mode))) {
		close(fd);
		snprintf(err, errlen, "capture %s: not a regular file", path);
		free(c);
		return -1;
	}
	c->f = fd >= 0 ? fdopen(fd, "w") : NULL;
	if (!c->f) {
		snprintf(err, errlen, "capture %s: %s", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		free(c);
		return -1;
	}
	c->seen = calloc(SEEN_SLOTS, sizeof(*c->seen));
	if (!c->seen) {
		snprintf(err, errlen, "out of memory");
		fclose(c->f);
		free(c);
		return -1;
	}
	setvbuf(c->f, NULL, _IOFBF, 256 << 10);
	strcpy(c->path, path);
	clock_gettime(CLOCK_REALTIME, &wall);
	clock_gettime(CLOCK_MONOTONIC, &mono);
	c->wall_minus_mono = ((int64_t)wall.tv_sec - mono.tv_sec) * 1000000000 +
			     (wall.tv_nsec - mono.tv_nsec);

	/* Section header: byte-order magic, version 1.0, section length unknown. */
	put32(b, 0x1a2b3c4d);
	put16(b + 4, 1);
	put16(b + 6, 0);
	memset(b + 8, 0xff, 8);
	n = 16 + opt(b + 16, 4, app, sizeof(app) - 1);	/* shb_userappl */
	n += opt(b + n, 0, NULL, 0);
	if (write_block(c, 0x0a0d0d0a, b, n))
		goto fail;
	/* One interface per port: Ethernet, no snap length, nanosecond timestamps. */
	for (i = 0; i < sw->nports; i++) {
		char name[16];
		uint8_t tsresol = 9;

		put16(b, sw->ib ? 197 : 1);	/* LINKTYPE_ERF (InfiniBand) or _ETHERNET */
		put16(b + 2, 0);
		put32(b + 4, 0);
		n = 8 + opt(b + 8, 2, name, (size_t)snprintf(name, sizeof(name), "port%d", i + 1));
		n += opt(b + n, 9, &tsresol, 1);	/* if_tsresol */
		n += opt(b + n, 0, NULL, 0);
		if (write_block(c, 1, b, n))
			goto fail;
	}
	fabric_capture_stop(sw);
	sw->cap = c;
	fabric_log("capture: started %s", path);
	return 0;
fail:
	snprintf(err, errlen, "capture %s: %s", path, strerror(errno));
	fclose(c->f);
	free(c->seen);
	free(c);
	return -1;
}

bool fabric_rdma_packet(const struct fabric *sw, const uint8_t *frame, size_t len)
{
	return roce_key(0, frame, len, sw->ib != NULL) != 0;
}

void fabric_capture_frame(struct fabric *sw, int port, uint64_t now_ns, const uint8_t *frame,
			  size_t len, const char *comment)
{
	static uint8_t b[28 + 16 + FABRIC_MAX_FRAME + 4 + 8 + 4 + 520 + 4];
	struct fabric_capture *c = sw->cap;
	uint64_t ts = now_ns + (uint64_t)c->wall_minus_mono;
	uint64_t key = roce_key(port, frame, len, sw->ib != NULL);
	uint32_t flags = 1;	/* direction: inbound (the frame entered the fabric) */
	char text[640];
	size_t n, clen;

	if (key) {
		struct seen *e = &c->seen[(key * 0x9e3779b97f4a7c15ull) >> 48];

		if (e->key == key) {
			snprintf(text, sizeof(text), "retransmission: PSN %u to QP 0x%06x as in "
				 "frame %llu%s%s", (unsigned)(key & 0xffffff),
				 (unsigned)(key >> 32 & 0xffffff), (unsigned long long)e->frame,
				 comment ? "; " : "", comment ? comment : "");
			comment = text;
		}
		e->key = key;
		e->frame = c->frames + 1;
	}

	put32(b, (uint32_t)port);
	put32(b + 4, (uint32_t)(ts >> 32));
	put32(b + 8, (uint32_t)ts);
	n = 20;
	if (sw->ib) {
		/*
		 * InfiniBand: an ERF record of type InfiniBand (21) around the packet, which
		 * tshark decodes (it does not read the pcap link type 247 for InfiniBand):
		 * timestamp (little-endian 32.32 seconds), type, flags (varying length),
		 * record length and wire length (big-endian), loss counter.
		 */
		uint64_t erf_ts = (ts / 1000000000ull) << 32 |
				  ((ts % 1000000000ull) << 32) / 1000000000ull;

		memcpy(b + n, &erf_ts, 8);
		b[n + 8] = 21;
		b[n + 9] = 0x04;
		b[n + 10] = (uint8_t)((16 + len) >> 8);
		b[n + 11] = (uint8_t)(16 + len);
		b[n + 12] = b[n + 13] = 0;
		b[n + 14] = (uint8_t)(len >> 8);
		b[n + 15] = (uint8_t)len;
		n += 16;
	}
	put32(b + 12, (uint32_t)(n - 20 + len));
	put32(b + 16, (uint32_t)(n - 20 + len));
	memcpy(b + n, frame, len);
	n += len;
	memset(b + n, 0, (4 - n % 4) % 4);
	n += (4 - n % 4) % 4;
	if (comment) {
		clen = strnlen(comment, 512);
		n += opt(b + n, 1, comment, clen);	/* opt_comment */
	}
	n += opt(b + n, 2, &flags, 4);	/* epb_flags */
	n += opt(b + n, 0, NULL, 0);
	if (write_block(c, 6, b, n)) {
		char err[64];

		snprintf(err, sizeof(err), "%s", strerror(errno));
		fabric_log("capture: cannot write %s: %s; stopped", c->path, err);
		fabric_capture_stop(sw);
		return;
	}
	c->frames++;
}

void fabric_capture_flush(struct fabric *sw)
{
	if (sw->cap)
		fflush(sw->cap->f);
}

const char *fabric_capture_path(const struct fabric *sw)
{
	return sw->cap ? sw->cap->path : NULL;
}

void fabric_capture_stop(struct fabric *sw)
{
	struct fabric_capture *c = sw->cap;

	if (!c)
		return;
	sw->cap = NULL;
	if (fclose(c->f))
		fabric_log("capture: closing %s: %s", c->path, strerror(errno));
	fabric_log("capture: stopped %s (%llu frames)", c->path, (unsigned long long)c->frames);
	free(c->seen);
	free(c);
}
