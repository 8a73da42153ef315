// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * qhca-rcstress: RC loses nothing. One RC QP between two guests (or two processes of one
 * guest) moves a given amount of data with every operation checked byte for byte and
 * completion by completion, so that a fabric that drops, reorders, duplicates or corrupts
 * frames, or a link that goes down for a while, shows whether the transport delivers
 * exactly. The default mode ("all") runs a deterministic schedule, drawn from the seed, that
 * both sides compute: the client issues
 *   write+read   an RDMA WRITE of patterned data into a slot of the server's region, then an
 *                RDMA READ of the slot back (the client compares every byte);
 *   write_imm    an RDMA WRITE_WITH_IMM into a slot (the server checks the slot, the length
 *                and the immediate of its receive completion);
 *   write+send   an RDMA WRITE into a slot, then a small SEND (the server checks both);
 *   send         SENDs of 0 bytes to several MTUs, some inline (the server checks them);
 *   send_imm     SEND_WITH_IMM (the immediate too);
 *   read         RDMA READs of the server's patterned region at any offset;
 *   fetch_add    FETCH_AND_ADD on a counter: the old values form the exact sequence;
 *   cmp_swap     COMPARE_AND_SWAP chains on another counter, some meant to miss;
 * with message sizes of 0 or 1 byte, around and at multiples of the MTU, up to the largest
 * (-l), gathered from or scattered to 1 to 3 SGEs. Every message that takes a receive of the
 * server is answered by a SEND (or SEND_WITH_IMM) of a size and pattern of the schedule,
 * which the client checks; that answer also returns the receive credit and frees the slot.
 * Every completion must have status SUCCESS, the right opcode, wr_id, QP and (where verbs
 * define it) byte_len, in posting order; buffers that data lands in are poisoned before and
 * must not be written past their end. PSNs start just below the 24-bit wrap (-P). At the end
 * the client READs both counters, the two sides swap their totals and compare them, and each
 * prints a summary (and the device's counters that moved: retransmits, NAKs, drops).
 * The default timeout (-t 12, 16.8 ms) recovers a lost tail or READ response quickly and
 * still lets a peer's emulator stall for (retry_cnt + 1) * 16.8 ms = 134 ms; a run across a
 * link that goes down for D seconds needs 4.096 us * 2^t * (retry_cnt + 1) > D (-t 16: 2 s).
 *
 * --expect-retry-exceeded: the client connects, prints "ready", waits for the file of
 * --wait-file (the script takes the link down first), posts -q operations and wants the
 * first to complete with RETRY_EXC_ERR after (retry_cnt + 1) timeouts, the rest with
 * WR_FLUSH_ERR in order, its receives flushed, the QP in ERR and a later post flushed.
 *
 * --rnr: the client SENDs while the server has no receive posted. With --rnr-retry 7 (the
 * default) the server posts its receives after --rnr-delay ms and every SEND succeeds (not
 * before then, with data checked); with --rnr-retry below 7 it never posts one and the first
 * SEND completes with RNR_RETRY_EXC_ERR, the rest flushed. Either way the requester must
 * wait the RNR timer (--min-rnr-timer) between tries: no more RNR NAKs than the time allows,
 * no RNR_RETRY_EXC_ERR before rnr_retry timers ran out.
 *
 *   qhca-rcstress -s [-p PORT] [-T SECS]        server (guest 2)
 *   qhca-rcstress [options] SERVER_IP           client (guest 1): see usage()
 * The client sends its options to the server, so both run with the same. Exit 0 only if
 * every check held, on this side and on the peer's; 1 for a failed check, 2 for a usage or
 * connection error, 3 when the time limit (-T) ran out. A failure names the operation, the
 * offset, the expected and the found bytes, and then what else the device reported.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <time.h>

#include "vm_verbs.h"

#define PORT		18830
#define VERSION		1
#define MAGIC		(0x52435300u + VERSION)	/* "RCS" and the version */
#define GUARD		16		/* bytes after a landing buffer that must stay */
#define GUARD_BYTE	0xa5
#define MAX_FAILS	10		/* data mismatches reported before giving up */
#define INLINE_MAX	64		/* inline SENDs up to this size, if the QP takes them */
#define RNR_SENDS	8
#define MAX_MEM		(256ull << 20)	/* for the server's buffers (a guest has 1 GiB) */
#define TAG_SEND	((uint64_t)0x5e << 56)	/* wr_id of the client's send queue */
#define TAG_RECV	((uint64_t)0x7e << 56)	/* wr_id of a receive */
#define TAG_REPLY	((uint64_t)0x4e << 56)	/* wr_id of the server's answers */
#define ALL_REMOTE	(IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | \
			 IBV_ACCESS_REMOTE_ATOMIC)

enum mode { MODE_ALL, MODE_RETRY_EXC, MODE_RNR };
static const char *const mode_names[] = { "all", "expect-retry-exceeded", "rnr" };

/* What both sides run with: the client's options, sent to the server. */
struct params {
	uint32_t mode, mtu, timeout, retry_cnt, rnr_retry, min_rnr_timer, depth, maxlen;
	int32_t rnr_delay_ms;
	uint32_t psn, limit;
	uint32_t pad;
	uint64_t bytes, seed;
};

enum kind { K_WRITE_READ, K_WRITE_IMM, K_WRITE_SEND, K_SEND, K_SEND_IMM, K_READ, K_FADD,
	    K_CSWAP, K_NKINDS };
static const char *const kind_names[K_NKINDS] = {
	"write+read", "write_imm", "write+send", "send", "send_imm", "read", "fetch_add",
	"cmp_swap",
};
static const unsigned kind_weight[K_NKINDS] = { 18, 10, 10, 18, 10, 20, 7, 7 };	/* % */

static bool consumes(enum kind k)	/* takes a receive of the server */
{
	return k == K_WRITE_IMM || k == K_WRITE_SEND || k == K_SEND || k == K_SEND_IMM;
}

struct totals {
	uint64_t ops[K_NKINDS];
	uint64_t bytes;			/* payload of the client's operations */
	uint64_t recvs, recv_bytes;	/* messages taking a server receive, and bytes checked */
	uint64_t replies, reply_bytes;	/* the server's answers */
	uint64_t fadd, cas;		/* the counters: expected (client), in memory (server) */
	uint64_t fails;
};

/* Every message over TCP is one of these. */
enum { T_PARAMS = 1, T_INFO, T_SYNC, T_TOTALS, T_ABORT, T_DONE };
struct tmsg {
	uint32_t magic, type;
	struct params p;
	uint32_t qpn, rkey;
	uint64_t addr;
	uint8_t gid[16];
	struct totals t;
	char text[160];
};

/* ---------------------------------------------------------------- state */
static struct params P;
static const char *prog = "qhca-rcstress";
static const char *dev_name = "qhca_0";
static const char *wait_file;
static int gid_index = -1, verbose, is_server, sock = -1;
static double t_begin, t_end, t_start;
static uint32_t sqd, nrecv, nw, rmax, rsz, wstride, lstride, rstride, inline_ok;
static uint64_t r_off, c_off, rseed, fadd0, cas0;

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_mr *rmr, *lmr;	/* the remote region (server) and local buffers */
static uint8_t *rbase, *lbase;
static struct tmsg peer_totals;
static bool have_peer_totals, connected;

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

static void status_line(FILE *f);
static void diagnose(void);

/* The last resort against a hang outside the loops (accept, a blocking read). */
static void on_alarm(int sig)
{
	static const char msg[] = "qhca-rcstress: FAIL: time limit exceeded (blocked)\n";

	(void)sig;
	if (write(2, msg, sizeof(msg) - 1) < 0) {
		/* nothing more to do */
	}
	_exit(3);
}

/* Tell the peer why we stop (best effort) and exit with @rc. */
static void __attribute__((noreturn)) bail(int rc, const char *why)
{
	struct tmsg m = { .magic = MAGIC, .type = T_ABORT };

	if (sock >= 0) {
		snprintf(m.text, sizeof(m.text), "%s", why);
		if (write(sock, &m, sizeof(m)) < 0) {
			/* the peer may be gone already */
		}
	}
	exit(rc);
}

static void __attribute__((noreturn, format(printf, 1, 2))) fatal(const char *fmt, ...)
{
	char buf[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	fprintf(stderr, "%s %s: FAIL: %s\n", prog, is_server ? "server" : "client", buf);
	status_line(stderr);
	diagnose();
	bail(1, buf);
}

/* A failed check: printed and counted; too many end the run. */
static void __attribute__((format(printf, 1, 2))) fail(const char *fmt, ...)
{
	char buf[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	fprintf(stderr, "%s %s: FAIL: %s\n", prog, is_server ? "server" : "client", buf);
	if (++vm_fails >= MAX_FAILS)
		fatal("%d failed checks, giving up", vm_fails);
}

static void xfer(struct tmsg *m, int out)
{
	vm_xfer(sock, m, sizeof(*m), out);
	if (!out && m->magic != MAGIC)
		fatal("bad message from the peer (magic 0x%x): not qhca-rcstress %d?", m->magic,
		      VERSION);
}

static void send_msg(uint32_t type, struct tmsg *m)
{
	m->magic = MAGIC;
	m->type = type;
	xfer(m, 1);
}

/* A message of @type from the peer; an abort ends the run. */
static void recv_msg(uint32_t type, struct tmsg *m)
{
	xfer(m, 0);
	if (m->type == T_ABORT) {
		fprintf(stderr, "%s %s: FAIL: the peer gave up: %s\n", prog,
			is_server ? "server" : "client", m->text);
		exit(1);
	}
	if (m->type != type)
		fatal("message %u from the peer, wanted %u", m->type, type);
}

/* Between steps of every wait: the time limit, an abort of the peer, progress. */
static void tick(const char *what)
{
	static double next_sock, next_progress;
	double t = now();

	if (t > t_end) {
		char why[200];

		snprintf(why, sizeof(why), "time limit (%.0f s) exceeded while %s",
			 t_end - t_begin, what);
		fprintf(stderr, "%s %s: FAIL: %s\n", prog, is_server ? "server" : "client", why);
		status_line(stderr);
		diagnose();
		bail(3, why);
	}
	if (t >= next_sock && sock >= 0) {
		struct pollfd pfd = { .fd = sock, .events = POLLIN };
		struct tmsg m;

		next_sock = t + 0.05;
		if (!have_peer_totals && poll(&pfd, 1, 0) == 1) {
			xfer(&m, 0);
			if (m.type == T_ABORT) {
				fprintf(stderr, "%s %s: FAIL: the peer gave up: %s\n", prog,
					is_server ? "server" : "client", m.text);
				status_line(stderr);
				exit(1);
			}
			if (m.type != T_TOTALS && m.type != T_DONE)
				fatal("unexpected message %u from the peer while %s", m.type, what);
			peer_totals = m;
			have_peer_totals = true;
		}
	}
	if (verbose && t >= next_progress) {
		if (next_progress)
			status_line(stdout);
		next_progress = t + 10;
	}
}

/* Wait for the peer's totals (or, in --expect-retry-exceeded, its end). */
static void wait_peer(const char *what)
{
	while (!have_peer_totals) {
		tick(what);
		usleep(2000);
	}
}

/* ---------------------------------------------------------------- patterns */
static inline uint64_t mix64(uint64_t z)
{
	z += 0x9e3779b97f4a7c15ull;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Byte @o of pattern @seed is byte o % 8 of word o / 8: any range of it can be checked. */
static inline uint64_t pat_word(uint64_t seed, uint64_t w)
{
	return mix64(seed ^ (w * 0xd1342543de82ef95ull));
}

static inline uint8_t pat_byte(uint64_t seed, uint64_t o)
{
	return (uint8_t)(pat_word(seed, o >> 3) >> (8 * (o & 7)));
}

/* @len bytes of pattern @seed from its offset @base. */
static void pat_fill(uint8_t *p, size_t len, uint64_t seed, uint64_t base)
{
	size_t i = 0;

	while (i < len) {
		uint64_t o = base + i, w = pat_word(seed, o >> 3);
		unsigned b;

		for (b = o & 7; b < 8 && i < len; b++, i++)
			p[i] = (uint8_t)(w >> (8 * b));
	}
}

/* The first byte of @p that is not the pattern, or -1. */
static int64_t pat_find(const uint8_t *p, size_t len, uint64_t seed, uint64_t base)
{
	size_t i = 0;

	while (i < len) {
		uint64_t o = base + i, w = pat_word(seed, o >> 3);
		unsigned b;

		for (b = o & 7; b < 8 && i < len; b++, i++)
			if (p[i] != (uint8_t)(w >> (8 * b)))
				return (int64_t)i;
	}
	return -1;
}

/* Check that @p holds @len bytes of the pattern; a mismatch is reported in full. */
static bool check_data(const char *what, uint64_t opidx, const uint8_t *p, size_t len,
		       uint64_t seed, uint64_t base)
{
	int64_t bad = pat_find(p, len, seed, base);
	size_t i, n = 0, last = 0;
	char exp[16 * 3 + 1] = "", got[16 * 3 + 1] = "";
	char from[40] = "";

	if (bad < 0)
		return true;
	for (i = (size_t)bad; i < len; i++)
		if (p[i] != pat_byte(seed, base + i)) {
			n++;
			last = i;
		}
	for (i = (size_t)bad; i < len && i < (size_t)bad + 16; i++) {
		sprintf(exp + 3 * (i - (size_t)bad), " %02x", pat_byte(seed, base + i));
		sprintf(got + 3 * (i - (size_t)bad), " %02x", p[i]);
	}
	if (base)
		snprintf(from, sizeof(from), " from offset %" PRIu64, base);
	fail("%s (operation %" PRIu64 ", %zu bytes%s): data at offset %" PRId64
	     ": expected 0x%02x, got 0x%02x; %zu bytes differ, the last at offset %zu\n"
	     "  expected from there:%s\n  got from there:     %s", what, opidx, len, from, bad,
	     pat_byte(seed, base + (uint64_t)bad), p[bad], n, last, exp, got);
	return false;
}

/* Bytes after a landing buffer must keep GUARD_BYTE: nothing is written past the end. */
static void guard_set(uint8_t *p)
{
	memset(p, GUARD_BYTE, GUARD);
}

static void guard_check(const char *what, uint64_t opidx, const uint8_t *p, size_t len)
{
	size_t i;

	for (i = 0; i < GUARD; i++)
		if (p[len + i] != GUARD_BYTE) {
			fail("%s (operation %" PRIu64 ", %zu bytes): byte %zu after the end was "
			     "overwritten (0x%02x)", what, opidx, len, i, p[len + i]);
			return;
		}
}

/* ---------------------------------------------------------------- the schedule */
struct op {
	uint64_t idx;
	enum kind kind;
	uint32_t len;		/* of the WRITE, SEND or READ */
	uint32_t slen;		/* write+send: of the SEND */
	uint32_t wslot;		/* writes: the slot of the server's region */
	uint32_t nsge;
	uint64_t roff;		/* read: offset in the server's patterned region */
	uint32_t imm;
	bool inl;
	uint64_t seed, sseed;	/* patterns of the data and (write+send) of the SEND */
	uint64_t add, cmp, swap, expect;
	uint64_t recv_idx;	/* messages taking a receive: their number among them */
};

struct sched {
	uint64_t rng, idx, bytes, writes, recvs;
	uint64_t fadd, cas;	/* the counters after the operations so far */
};

static uint64_t rnd(struct sched *s)
{
	s->rng = s->rng * 6364136223846793005ull + 1442695040888963407ull;
	return mix64(s->rng);
}

static void sched_init(struct sched *s, uint64_t salt)
{
	memset(s, 0, sizeof(*s));
	s->rng = mix64(P.seed ^ salt);
	s->fadd = fadd0;
	s->cas = cas0;
}

/* A message size: 0 or tiny, around a multiple of the MTU, anything, or the largest. */
static uint32_t pick_len(struct sched *s, uint32_t max, bool zero_ok)
{
	uint32_t r = rnd(s) % 100, a = (uint32_t)rnd(s), b = (uint32_t)rnd(s), v;

	if (r < 2 && zero_ok)
		return 0;
	if (r < 25)
		v = 1 + a % 64;
	else if (r < 50)
		v = (1 + a % 4) * P.mtu + b % 3 - 1;	/* MTU - 1, MTU, MTU + 1, ... */
	else if (r < 92)
		v = 1 + a % max;
	else
		v = max;
	return v > max ? max : v ? v : 1;
}

/* The next operation of the schedule in *o; false once the bytes are moved. */
static bool sched_next(struct sched *s, struct op *o)
{
	uint32_t r;
	unsigned k;

	if (s->bytes >= P.bytes)
		return false;
	memset(o, 0, sizeof(*o));
	o->idx = s->idx++;
	r = rnd(s) % 100;
	for (k = 0; r >= kind_weight[k]; k++)
		r -= kind_weight[k];
	o->kind = k;
	/* Draws that do not depend on the kind: both sides draw the same numbers. */
	o->seed = rnd(s);
	o->sseed = rnd(s);
	o->imm = (uint32_t)rnd(s);
	o->nsge = 1 + rnd(s) % 3;
	o->inl = rnd(s) & 1;
	switch (o->kind) {
	case K_WRITE_READ:
	case K_WRITE_IMM:
	case K_WRITE_SEND:
		o->len = pick_len(s, P.maxlen, o->kind == K_WRITE_IMM);
		o->wslot = s->writes++ % nw;
		if (o->kind == K_WRITE_SEND)
			o->slen = pick_len(s, 64, true);
		s->bytes += o->kind == K_WRITE_READ ? 2ull * o->len : (uint64_t)o->len + o->slen;
		break;
	case K_SEND:
	case K_SEND_IMM:
		o->len = pick_len(s, P.maxlen, true);
		s->bytes += o->len;
		break;
	case K_READ:
		o->len = pick_len(s, P.maxlen, false);
		o->roff = rnd(s) % (rsz - o->len + 1);
		s->bytes += o->len;
		break;
	case K_FADD:
		o->add = rnd(s) % 4 ? rnd(s) % 1000 + 1 : rnd(s);	/* small, or wrapping */
		o->expect = s->fadd;
		s->fadd += o->add;
		break;
	case K_CSWAP:
		o->swap = rnd(s);
		r = (uint32_t)rnd(s);
		o->cmp = r % 4 ? s->cas : s->cas ^ (1ull << (r >> 8) % 64);	/* 1 in 4 misses */
		o->expect = s->cas;
		if (o->cmp == s->cas)
			s->cas = o->swap;
		break;
	default:
		break;
	}
	o->inl = o->inl && (o->kind == K_SEND || o->kind == K_SEND_IMM) && o->len <= INLINE_MAX;
	if (consumes(o->kind))
		o->recv_idx = s->recvs++;
	return true;
}

/* The server's answer to the message that took receive @n. */
struct reply {
	uint32_t len, imm;
	bool with_imm;
	uint64_t seed;
};

static void reply_desc(uint64_t n, struct reply *r)
{
	struct sched s;

	sched_init(&s, 0x7e91ull ^ (n * 0x9e3779b97f4a7c15ull));
	r->seed = rnd(&s);
	r->imm = (uint32_t)rnd(&s);
	r->with_imm = rnd(&s) & 1;
	r->len = pick_len(&s, rmax, true);
}

/* ---------------------------------------------------------------- device counters */
#define NCNT 64
struct counters {
	int n;
	char name[NCNT][40];
	uint64_t v[NCNT];
};

static void counters_read(struct counters *c)
{
	char path[300];
	struct dirent *d;
	unsigned ms = 10;
	DIR *dir;
	FILE *f;

	/* ib_core keeps the values it read for "lifespan" ms: wait that long for new ones. */
	snprintf(path, sizeof(path), "/sys/class/infiniband/%s/ports/1/hw_counters/lifespan",
		 dev_name);
	f = fopen(path, "r");
	if (f) {
		if (fscanf(f, "%u", &ms) != 1 || ms > 1000)
			ms = 10;
		fclose(f);
	}
	usleep((ms + 2) * 1000);
	c->n = 0;
	snprintf(path, sizeof(path), "/sys/class/infiniband/%s/ports/1/hw_counters", dev_name);
	dir = opendir(path);
	if (!dir)
		return;
	while ((d = readdir(dir)) && c->n < NCNT) {
		unsigned long long v;

		if (d->d_name[0] == '.' || !strcmp(d->d_name, "lifespan") ||
		    strlen(d->d_name) >= sizeof(c->name[0]))
			continue;
		snprintf(path, sizeof(path), "/sys/class/infiniband/%s/ports/1/hw_counters/%s",
			 dev_name, d->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		if (fscanf(f, "%llu", &v) == 1) {
			strcpy(c->name[c->n], d->d_name);
			c->v[c->n++] = v;
		}
		fclose(f);
	}
	closedir(dir);
}

/* How much counter @name grew from @a to @b; -1 if the device has none of that name. */
static int64_t counter_delta(const struct counters *a, const struct counters *b, const char *name)
{
	int i, j;

	for (i = 0; i < b->n; i++)
		if (!strcmp(b->name[i], name))
			for (j = 0; j < a->n; j++)
				if (!strcmp(a->name[j], name))
					return (int64_t)(b->v[i] - a->v[j]);
	return -1;
}

static void counters_print(const struct counters *a, const struct counters *b)
{
	static const char *const skip[] = { "tx_pkts", "tx_bytes", "rx_pkts", "rx_bytes",
					     "eth_tx_frames", "eth_rx_frames" };
	bool any = false;
	int i;
	size_t k;

	if (!b->n)
		return;
	printf("%s %s: device counters (this port, every user):", prog,
	       is_server ? "server" : "client");
	for (i = 0; i < b->n; i++) {
		int64_t d = counter_delta(a, b, b->name[i]);

		for (k = 0; k < sizeof(skip) / sizeof(skip[0]); k++)
			if (!strcmp(skip[k], b->name[i]))
				break;
		if (d > 0 && (k == sizeof(skip) / sizeof(skip[0]) || verbose)) {
			printf(" %s=%" PRId64, b->name[i], d);
			any = true;
		}
	}
	printf("%s\n", any ? "" : " no retransmission, NAK or drop");
}

static struct counters cnt0;	/* at the start of the run */
static struct ibv_cq *scq, *rcq;
static struct ibv_qp *qp;
static int qp_state(void);

/* After a fatal error: what else the device says (the first error may be a consequence). */
static void diagnose(void)
{
	struct ibv_cq *cqs[2] = { scq, rcq };
	struct ibv_async_event ev;
	struct counters c1;
	struct ibv_wc wc;
	double end = now() + 0.3;
	unsigned flushed = 0, shown = 0;
	int i, fl;

	if (!connected)
		return;
	connected = false;	/* once */
	fl = fcntl(qp->context->async_fd, F_GETFL);
	if (fl >= 0 && !fcntl(qp->context->async_fd, F_SETFL, fl | O_NONBLOCK))
		while (!ibv_get_async_event(qp->context, &ev)) {
			fprintf(stderr, "  async event: %s\n", ibv_event_type_str(ev.event_type));
			ibv_ack_async_event(&ev);
		}
	while (now() < end)
		for (i = 0; i < 2; i++)
			while (ibv_poll_cq(cqs[i], 1, &wc) == 1) {
				if (wc.status == IBV_WC_WR_FLUSH_ERR) {
					flushed++;
				} else if (shown++ < 20) {
					fprintf(stderr, "  later %s completion: wr_id 0x%" PRIx64
						" %s, opcode %d, byte_len %u\n",
						i ? "receive" : "send", wc.wr_id,
						ibv_wc_status_str(wc.status), wc.opcode,
						wc.byte_len);
				}
			}
	fprintf(stderr, "  QP state %d (ERR is %d), %u completions flushed after it\n", qp_state(),
		IBV_QPS_ERR, flushed);
	counters_read(&c1);
	counters_print(&cnt0, &c1);
}

/* ---------------------------------------------------------------- verbs set-up */
static const char *wc_status(enum ibv_wc_status s)
{
	return ibv_wc_status_str(s);
}

static enum ibv_mtu mtu_enum(uint32_t mtu)
{
	return mtu == 256 ? IBV_MTU_256 : mtu == 512 ? IBV_MTU_512 : mtu == 1024 ? IBV_MTU_1024 :
	       mtu == 2048 ? IBV_MTU_2048 : IBV_MTU_4096;
}

static double timeout_secs(void)
{
	return P.timeout ? 4.096e-6 * (double)(1ull << P.timeout) : 0;
}

/* Sizes both sides derive from the parameters; false if the server's memory is too much. */
static bool derive(void)
{
	sqd = P.depth < 2 ? 2 : P.depth;	/* a write+read or write+send is 2 WRs */
	nrecv = 2 * P.depth;
	nw = P.depth + nrecv;
	rmax = P.maxlen < 3 * P.mtu ? P.maxlen : 3 * P.mtu;
	rsz = P.maxlen * 2 > (1u << 20) ? (P.maxlen * 2 + 63) & ~63u : 1u << 20;
	wstride = (P.maxlen + 63) & ~63u;
	lstride = (P.maxlen + GUARD + 63) & ~63u;
	rstride = (rmax + GUARD + 63) & ~63u;
	r_off = (uint64_t)nw * wstride;
	c_off = r_off + rsz;
	rseed = mix64(P.seed ^ 0x52ull);
	fadd0 = mix64(P.seed ^ 0xfaddull);
	cas0 = mix64(P.seed ^ 0xca5ull);
	return r_off + rsz + (uint64_t)nrecv * (lstride + rstride) <= MAX_MEM;
}

static void *alloc_region(size_t len)
{
	void *p = aligned_alloc(4096, (len + 4095) & ~(size_t)4095);

	if (!p)
		fatal("out of memory for %zu bytes", len);
	memset(p, 0, len);
	return p;
}

static void setup(void)
{
	struct ibv_qp_init_attr qa = {};
	struct ibv_device_attr da;
	struct ibv_port_attr pa;
	size_t rlen, llen;
	uint32_t sq = is_server ? nrecv : sqd;

	ctx = vm_open(dev_name);
	if (!ctx)
		fatal("no RDMA device %s", dev_name);
	if (ibv_query_device(ctx, &da) || ibv_query_port(ctx, 1, &pa))
		fatal("query device/port: %s", strerror(errno));
	if (pa.state != IBV_PORT_ACTIVE)
		fatal("port 1 of %s is %s, not ACTIVE", dev_name, ibv_port_state_str(pa.state));
	if (mtu_enum(P.mtu) > pa.active_mtu)
		fatal("path MTU %u is above the port's active MTU %d", P.mtu,
		      128 << pa.active_mtu);
	if (sq > (uint32_t)da.max_qp_wr || nrecv > (uint32_t)da.max_qp_wr)
		fatal("depth %u: %u receives are more than the device's %d work requests a queue",
		      P.depth, nrecv, da.max_qp_wr);
	pd = ibv_alloc_pd(ctx);
	scq = pd ? ibv_create_cq(ctx, (int)sq + 1, NULL, NULL, 0) : NULL;
	rcq = scq ? ibv_create_cq(ctx, (int)nrecv + 1, NULL, NULL, 0) : NULL;
	if (!rcq)
		fatal("PD/CQ: %s", strerror(errno));
	if (is_server) {
		rlen = c_off + 64;
		rbase = alloc_region(rlen);
		rmr = ibv_reg_mr(pd, rbase, rlen, IBV_ACCESS_LOCAL_WRITE | ALL_REMOTE);
		llen = (size_t)nrecv * lstride + (size_t)nrecv * rstride;
	} else {
		llen = (size_t)sqd * lstride + (size_t)nrecv * rstride;
	}
	lbase = alloc_region(llen);
	lmr = ibv_reg_mr(pd, lbase, llen, IBV_ACCESS_LOCAL_WRITE);
	if (!lmr || (is_server && !rmr))
		fatal("register memory (%zu bytes): %s", llen, strerror(errno));
	qa.send_cq = scq;
	qa.recv_cq = rcq;
	qa.qp_type = IBV_QPT_RC;
	qa.cap.max_send_wr = sq;
	qa.cap.max_recv_wr = nrecv;
	qa.cap.max_send_sge = 3;
	qa.cap.max_recv_sge = 1;
	qa.cap.max_inline_data = INLINE_MAX;
	qp = ibv_create_qp(pd, &qa);
	if (!qp) {
		qa.cap.max_inline_data = 0;
		qp = ibv_create_qp(pd, &qa);
	}
	if (!qp)
		fatal("create QP (%u send, %u receive WRs): %s", sq, nrecv, strerror(errno));
	inline_ok = qa.cap.max_inline_data >= INLINE_MAX;
	if (is_server) {
		pat_fill(rbase + r_off, rsz, rseed, 0);
		memcpy(rbase + c_off, &fadd0, 8);
		memcpy(rbase + c_off + 8, &cas0, 8);
	}
}

static void teardown(void)
{
	EXPECT(ibv_destroy_qp(qp) == 0);
	EXPECT(ibv_destroy_cq(scq) == 0);
	EXPECT(ibv_destroy_cq(rcq) == 0);
	EXPECT(ibv_dereg_mr(lmr) == 0);
	if (rmr)
		EXPECT(ibv_dereg_mr(rmr) == 0);
	EXPECT(ibv_dealloc_pd(pd) == 0);
	EXPECT(ibv_close_device(ctx) == 0);
}

/* Swap QP numbers, GIDs and the region, and take the QP to RTS. */
static void connect_qp(struct tmsg *peer)
{
	struct vm_conn_attr c;
	struct ibv_device_attr da;
	union ibv_gid gid;
	struct tmsg m = {};

	if (gid_index < 0)
		gid_index = vm_roce_gid(ctx);
	if (ibv_query_gid(ctx, 1, gid_index, &gid))
		fatal("GID %d: %s", gid_index, strerror(errno));
	m.qpn = qp->qp_num;
	memcpy(m.gid, gid.raw, 16);
	if (rmr) {
		m.rkey = rmr->rkey;
		m.addr = (uintptr_t)rbase;
	}
	if (is_server) {
		send_msg(T_INFO, &m);
		recv_msg(T_INFO, peer);
	} else {
		recv_msg(T_INFO, peer);
		send_msg(T_INFO, &m);
	}
	memcpy(gid.raw, peer->gid, 16);
	EXPECT(ibv_query_device(ctx, &da) == 0);
	vm_conn_defaults(&c);
	c.path_mtu = mtu_enum(P.mtu);
	c.psn = P.psn;
	c.timeout = (uint8_t)P.timeout;
	c.retry_cnt = (uint8_t)P.retry_cnt;
	c.rnr_retry = (uint8_t)P.rnr_retry;
	c.min_rnr_timer = (uint8_t)P.min_rnr_timer;
	c.max_rd_atomic = (uint8_t)(da.max_qp_init_rd_atom < 16 ? da.max_qp_init_rd_atom : 16);
	c.max_dest_rd_atomic = (uint8_t)(da.max_qp_rd_atom < 16 ? da.max_qp_rd_atom : 16);
	if (!c.max_rd_atomic)
		c.max_rd_atomic = 1;
	if (!c.max_dest_rd_atomic)
		c.max_dest_rd_atomic = 1;
	if (vm_connect_attr(qp, is_server ? ALL_REMOTE : 0, peer->qpn, gid_index, &gid, &c))
		fatal("connect the QP: %s", strerror(errno));
	connected = true;
}

/* Both QPs are RTS and the server's receives are posted: the client may send. */
static void sync_peers(void)
{
	struct tmsg m = {};

	if (is_server)
		send_msg(T_SYNC, &m);
	else
		recv_msg(T_SYNC, &m);
}

static int qp_state(void)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;

	if (ibv_query_qp(qp, &a, IBV_QP_STATE, &ia))
		return -1;
	return a.qp_state;
}

/* ---------------------------------------------------------------- the client */
/* A work request of the client in flight, and what its completion must be. */
struct pend {
	uint64_t wr_id, opidx;
	enum ibv_wc_opcode opcode;
	enum kind kind;
	uint32_t len;
	uint8_t *buf;			/* where READ data or an atomic's value lands */
	uint64_t seed, base, expect;
	int64_t free_wslot;		/* a write+read's READ frees the slot */
	bool is_read, is_atomic;
	const char *what;
};

/* A message that took a receive of the server, waiting for the answer. */
struct cons {
	uint64_t opidx;
	int64_t free_wslot;
};

static struct pend *pend;
static struct cons *cons;
static uint8_t *wbusy;
static uint64_t posted, completed, cons_posted, cons_done, ops_done;
static struct totals ct;
static struct tmsg server_info;

static void status_line(FILE *f)
{
	fprintf(f, "%s %s: %.1f s: ", prog, is_server ? "server" : "client", now() - t_start);
	if (is_server)
		fprintf(f, "receives %" PRIu64 ", answers %" PRIu64 " of %" PRIu64 " done\n",
			ct.recvs, ct.replies, cons_posted);
	else
		fprintf(f, "operations %" PRIu64 ", WRs posted %" PRIu64 ", completed %" PRIu64
			", messages answered %" PRIu64 " of %" PRIu64 ", %" PRIu64 " bytes\n",
			ops_done, posted, completed, cons_done, cons_posted, ct.bytes);
	fflush(f);
}

static uint8_t *slot_buf(uint64_t n)
{
	return lbase + (n % sqd) * lstride;
}

static uint8_t *crecv_buf(uint64_t n)
{
	return lbase + (size_t)sqd * lstride + (n % nrecv) * rstride;
}

/* SGEs for @len bytes at @p: @nsge contiguous pieces (fewer for a short message). */
static int make_sges(struct ibv_sge *sg, uint8_t *p, uint32_t len, uint32_t nsge, uint32_t lkey)
{
	uint32_t i, at = 0;

	if (!len)
		return 0;
	if (nsge > len)
		nsge = len;
	for (i = 0; i < nsge; i++) {
		uint32_t end = (uint32_t)((uint64_t)len * (i + 1) / nsge);

		sg[i].addr = (uintptr_t)(p + at);
		sg[i].length = end - at;
		sg[i].lkey = lkey;
		at = end;
	}
	return (int)nsge;
}

/* Fill in the next pend slot and its WR; returns the slot. */
static struct pend *next_wr(const struct op *o, struct ibv_send_wr *wr, enum ibv_wc_opcode wc,
			    const char *what)
{
	struct pend *p = &pend[posted % sqd];

	memset(p, 0, sizeof(*p));
	p->wr_id = TAG_SEND | posted;
	p->opidx = o->idx;
	p->opcode = wc;
	p->kind = o->kind;
	p->free_wslot = -1;
	p->what = what;
	p->buf = slot_buf(posted);
	memset(wr, 0, sizeof(*wr));
	wr->wr_id = p->wr_id;
	wr->send_flags = IBV_SEND_SIGNALED;
	posted++;
	return p;
}

static void post_op(const struct op *o)
{
	struct ibv_send_wr wr[2], *bad = NULL;
	struct ibv_sge sg[2][3];
	uint64_t raddr = server_info.addr;
	uint32_t rkey = server_info.rkey;
	struct pend *p;
	int n = 1, rc;

	switch (o->kind) {
	case K_WRITE_READ:
	case K_WRITE_IMM:
	case K_WRITE_SEND:
		wbusy[o->wslot] = 1;
		p = next_wr(o, &wr[0], IBV_WC_RDMA_WRITE,
			    o->kind == K_WRITE_IMM ? "RDMA WRITE_WITH_IMM" : "RDMA WRITE");
		pat_fill(p->buf, o->len, o->seed, 0);
		wr[0].opcode = o->kind == K_WRITE_IMM ? IBV_WR_RDMA_WRITE_WITH_IMM :
			       IBV_WR_RDMA_WRITE;
		wr[0].imm_data = htonl(o->imm);
		wr[0].sg_list = sg[0];
		wr[0].num_sge = make_sges(sg[0], p->buf, o->len, o->nsge, lmr->lkey);
		wr[0].wr.rdma.remote_addr = raddr + (uint64_t)o->wslot * wstride;
		wr[0].wr.rdma.rkey = rkey;
		if (o->kind == K_WRITE_IMM)
			break;
		n = 2;
		wr[0].next = &wr[1];
		if (o->kind == K_WRITE_READ) {
			p = next_wr(o, &wr[1], IBV_WC_RDMA_READ, "RDMA READ back of a WRITE");
			p->is_read = true;
			p->len = o->len;
			p->seed = o->seed;
			p->free_wslot = o->wslot;
			memset(p->buf, ~pat_byte(o->seed, 0), o->len);
			guard_set(p->buf + o->len);
			wr[1].opcode = IBV_WR_RDMA_READ;
			wr[1].sg_list = sg[1];
			wr[1].num_sge = make_sges(sg[1], p->buf, o->len, 4 - o->nsge, lmr->lkey);
			wr[1].wr.rdma.remote_addr = wr[0].wr.rdma.remote_addr;
			wr[1].wr.rdma.rkey = rkey;
		} else {
			p = next_wr(o, &wr[1], IBV_WC_SEND, "SEND after a WRITE");
			pat_fill(p->buf, o->slen, o->sseed, 0);
			wr[1].opcode = IBV_WR_SEND;
			wr[1].sg_list = sg[1];
			wr[1].num_sge = make_sges(sg[1], p->buf, o->slen, 1, lmr->lkey);
		}
		break;
	case K_SEND:
	case K_SEND_IMM:
		p = next_wr(o, &wr[0], IBV_WC_SEND, o->kind == K_SEND ? "SEND" : "SEND_WITH_IMM");
		pat_fill(p->buf, o->len, o->seed, 0);
		wr[0].opcode = o->kind == K_SEND ? IBV_WR_SEND : IBV_WR_SEND_WITH_IMM;
		wr[0].imm_data = htonl(o->imm);
		wr[0].sg_list = sg[0];
		wr[0].num_sge = make_sges(sg[0], p->buf, o->len, o->nsge, lmr->lkey);
		if (o->inl && inline_ok)
			wr[0].send_flags |= IBV_SEND_INLINE;
		break;
	case K_READ:
		p = next_wr(o, &wr[0], IBV_WC_RDMA_READ, "RDMA READ");
		p->is_read = true;
		p->len = o->len;
		p->seed = rseed;
		p->base = o->roff;
		memset(p->buf, ~pat_byte(rseed, o->roff), o->len);
		guard_set(p->buf + o->len);
		wr[0].opcode = IBV_WR_RDMA_READ;
		wr[0].sg_list = sg[0];
		wr[0].num_sge = make_sges(sg[0], p->buf, o->len, o->nsge, lmr->lkey);
		wr[0].wr.rdma.remote_addr = raddr + r_off + o->roff;
		wr[0].wr.rdma.rkey = rkey;
		break;
	case K_FADD:
	case K_CSWAP:
		p = next_wr(o, &wr[0], o->kind == K_FADD ? IBV_WC_FETCH_ADD : IBV_WC_COMP_SWAP,
			    o->kind == K_FADD ? "FETCH_AND_ADD" : "CMP_AND_SWAP");
		p->is_atomic = true;
		p->len = 8;
		p->expect = o->expect;
		memset(p->buf, ~(uint8_t)o->expect, 8);
		guard_set(p->buf + 8);
		sg[0][0].addr = (uintptr_t)p->buf;
		sg[0][0].length = 8;
		sg[0][0].lkey = lmr->lkey;
		wr[0].sg_list = sg[0];
		wr[0].num_sge = 1;
		wr[0].wr.atomic.rkey = rkey;
		if (o->kind == K_FADD) {
			wr[0].opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
			wr[0].wr.atomic.remote_addr = raddr + c_off;
			wr[0].wr.atomic.compare_add = o->add;
		} else {
			wr[0].opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
			wr[0].wr.atomic.remote_addr = raddr + c_off + 8;
			wr[0].wr.atomic.compare_add = o->cmp;
			wr[0].wr.atomic.swap = o->swap;
		}
		break;
	default:
		return;
	}
	if (consumes(o->kind)) {
		struct cons *c = &cons[cons_posted++ % nrecv];

		c->opidx = o->idx;
		c->free_wslot = o->kind == K_SEND || o->kind == K_SEND_IMM ? -1 : (int64_t)o->wslot;
	}
	rc = ibv_post_send(qp, wr, &bad);
	if (rc)
		fatal("ibv_post_send of operation %" PRIu64 " (%s, %d WRs): %s", o->idx,
		      kind_names[o->kind], n, strerror(rc));
	ct.ops[o->kind]++;
	ops_done++;
	ct.bytes += o->kind == K_WRITE_READ ? 2ull * o->len : (uint64_t)o->len + o->slen;
}

/* Whether the send queue, the server's receives and the slot allow @o now. */
static bool can_post(const struct op *o)
{
	unsigned need = o->kind == K_WRITE_READ || o->kind == K_WRITE_SEND ? 2 : 1;

	if (posted - completed + need > (need > P.depth ? need : P.depth))
		return false;
	if (consumes(o->kind) && cons_posted - cons_done >= nrecv)
		return false;
	if ((o->kind == K_WRITE_READ || o->kind == K_WRITE_IMM || o->kind == K_WRITE_SEND) &&
	    wbusy[o->wslot])
		return false;
	return true;
}

/* One completion of the client's send queue: the oldest WR in flight, as it must be. */
static void send_completion(const struct ibv_wc *wc)
{
	struct pend *p = &pend[completed % sqd];
	uint64_t got;

	if (completed == posted)
		fatal("a send completion (wr_id 0x%" PRIx64 ", %s) with no WR in flight", wc->wr_id,
		      wc_status(wc->status));
	if (wc->wr_id != p->wr_id)
		fatal("send completion wr_id 0x%" PRIx64 " (%s), wanted 0x%" PRIx64
		      " (operation %" PRIu64 ", %s): out of order or unknown", wc->wr_id,
		      wc_status(wc->status), p->wr_id, p->opidx, p->what);
	if (wc->status != IBV_WC_SUCCESS)
		fatal("%s (operation %" PRIu64 ", wr_id 0x%" PRIx64 ") completed with %s "
		      "(vendor error 0x%x)", p->what, p->opidx, wc->wr_id, wc_status(wc->status),
		      wc->vendor_err);
	if (wc->opcode != p->opcode)
		fail("%s (operation %" PRIu64 "): completion opcode %d, wanted %d", p->what,
		     p->opidx, wc->opcode, p->opcode);
	if (wc->qp_num != qp->qp_num)
		fail("%s (operation %" PRIu64 "): completion of QP 0x%x, wanted 0x%x", p->what,
		     p->opidx, wc->qp_num, qp->qp_num);
	if ((p->is_read || p->is_atomic) && wc->byte_len != p->len)
		fail("%s (operation %" PRIu64 "): byte_len %u, wanted %u", p->what, p->opidx,
		     wc->byte_len, p->len);
	if (p->is_read) {
		check_data(p->what, p->opidx, p->buf, p->len, p->seed, p->base);
		guard_check(p->what, p->opidx, p->buf, p->len);
	}
	if (p->is_atomic) {
		memcpy(&got, p->buf, 8);
		if (got != p->expect)
			fail("%s (operation %" PRIu64 "): original value 0x%016" PRIx64 ", wanted "
			     "0x%016" PRIx64, p->what, p->opidx, got, p->expect);
		guard_check(p->what, p->opidx, p->buf, 8);
	}
	if (p->free_wslot >= 0)
		wbusy[p->free_wslot] = 0;
	completed++;
}

static void post_crecv(uint64_t n)
{
	struct ibv_recv_wr wr = {}, *bad;
	struct ibv_sge sg;
	struct reply r;
	int rc;

	reply_desc(n, &r);
	guard_set(crecv_buf(n) + r.len);
	sg.addr = (uintptr_t)crecv_buf(n);
	sg.length = rmax;
	sg.lkey = lmr->lkey;
	wr.wr_id = TAG_RECV | n;
	wr.sg_list = &sg;
	wr.num_sge = 1;
	rc = ibv_post_recv(qp, &wr, &bad);
	if (rc)
		fatal("ibv_post_recv: %s", strerror(rc));
}

/* The server's answer to the oldest message: checked, and its receive and slot freed. */
static void reply_completion(const struct ibv_wc *wc)
{
	struct cons *c = &cons[cons_done % nrecv];
	uint64_t n = cons_done;
	struct reply r;
	char what[80];

	if (cons_done == cons_posted)
		fatal("a receive completion (wr_id 0x%" PRIx64 ", %s, %u bytes) with no message "
		      "of ours waiting for an answer", wc->wr_id, wc_status(wc->status),
		      wc->byte_len);
	reply_desc(n, &r);
	snprintf(what, sizeof(what), "answer %" PRIu64 " of the server", n);
	if (wc->wr_id != (TAG_RECV | n))
		fatal("%s: receive wr_id 0x%" PRIx64 ", wanted 0x%" PRIx64 " (%s)", what, wc->wr_id,
		      TAG_RECV | n, wc_status(wc->status));
	if (wc->status != IBV_WC_SUCCESS)
		fatal("%s (to operation %" PRIu64 "): receive completed with %s", what, c->opidx,
		      wc_status(wc->status));
	if (wc->opcode != IBV_WC_RECV)
		fail("%s: opcode %d, wanted IBV_WC_RECV", what, wc->opcode);
	if (!!(wc->wc_flags & IBV_WC_WITH_IMM) != r.with_imm)
		fail("%s: %s immediate, wanted %s", what,
		     wc->wc_flags & IBV_WC_WITH_IMM ? "with" : "without",
		     r.with_imm ? "one" : "none");
	else if (r.with_imm && ntohl(wc->imm_data) != r.imm)
		fail("%s: immediate 0x%08x, wanted 0x%08x", what, ntohl(wc->imm_data), r.imm);
	if (wc->byte_len != r.len)
		fail("%s: byte_len %u, wanted %u", what, wc->byte_len, r.len);
	else
		check_data(what, c->opidx, crecv_buf(n), r.len, r.seed, 0);
	guard_check(what, c->opidx, crecv_buf(n), r.len);
	if (wc->qp_num != qp->qp_num)
		fail("%s: QP 0x%x, wanted 0x%x", what, wc->qp_num, qp->qp_num);
	if (c->free_wslot >= 0)
		wbusy[c->free_wslot] = 0;
	ct.replies++;
	ct.reply_bytes += r.len;
	cons_done++;
	post_crecv(n + nrecv);
}

static int poll_client(void)
{
	struct ibv_wc wc[16];
	int n, i, got = 0;

	n = ibv_poll_cq(scq, 16, wc);
	if (n < 0)
		fatal("ibv_poll_cq (send): %d", n);
	for (i = 0; i < n; i++)
		send_completion(&wc[i]);
	got += n;
	n = ibv_poll_cq(rcq, 16, wc);
	if (n < 0)
		fatal("ibv_poll_cq (receive): %d", n);
	for (i = 0; i < n; i++)
		reply_completion(&wc[i]);
	return got + n;
}

/* The final values of both counters, READ back. */
static void read_counters(uint64_t *fadd, uint64_t *cas)
{
	struct op o = { .idx = UINT64_MAX, .kind = K_READ, .len = 16, .nsge = 1 };
	struct ibv_send_wr wr, *bad;
	struct ibv_sge sg;
	struct ibv_wc wc;
	struct pend *p = next_wr(&o, &wr, IBV_WC_RDMA_READ, "RDMA READ of the counters");
	int rc;

	p->len = 16;
	sg.addr = (uintptr_t)p->buf;
	sg.length = 16;
	sg.lkey = lmr->lkey;
	wr.opcode = IBV_WR_RDMA_READ;
	wr.sg_list = &sg;
	wr.num_sge = 1;
	wr.wr.rdma.remote_addr = server_info.addr + c_off;
	wr.wr.rdma.rkey = server_info.rkey;
	rc = ibv_post_send(qp, &wr, &bad);
	if (rc)
		fatal("ibv_post_send: %s", strerror(rc));
	while (ibv_poll_cq(scq, 1, &wc) != 1)
		tick("reading the counters");
	if (wc.wr_id != p->wr_id || wc.status != IBV_WC_SUCCESS || wc.byte_len != 16)
		fatal("READ of the counters: wr_id 0x%" PRIx64 ", %s, %u bytes", wc.wr_id,
		      wc_status(wc.status), wc.byte_len);
	completed++;
	memcpy(fadd, p->buf, 8);
	memcpy(cas, p->buf + 8, 8);
}

static void print_totals(const struct totals *t, double secs, const char *who)
{
	unsigned k;

	printf("%s %s: %s: %" PRIu64 " bytes in %.2f s, %.1f MB/s; operations:", prog, who,
	       vm_fails ? "FAIL" : "PASS", t->bytes, secs, secs > 0 ? t->bytes / secs / 1e6 : 0);
	for (k = 0; k < K_NKINDS; k++)
		printf(" %s %" PRIu64, kind_names[k], t->ops[k]);
	printf("; answers %" PRIu64 " (%" PRIu64 " bytes)\n", t->replies, t->reply_bytes);
}


/* The client's bookkeeping, the QP connected, every receive posted, both sides ready. */
static void client_start(void)
{
	uint64_t n;

	pend = calloc(sqd, sizeof(*pend));
	cons = calloc(nrecv, sizeof(*cons));
	wbusy = calloc(nw, 1);
	if (!pend || !cons || !wbusy)
		fatal("out of memory");
	connect_qp(&server_info);
	for (n = 0; n < nrecv; n++)
		post_crecv(n);
	sync_peers();
}

static int client_all(void)
{
	struct counters c1;
	struct sched s;
	struct op o;
	struct tmsg m = {};
	uint64_t fadd, cas;
	bool have;
	double secs;

	client_start();
	counters_read(&cnt0);
	t_start = now();
	sched_init(&s, 0);
	have = sched_next(&s, &o);
	while (have || completed < posted || cons_done < cons_posted) {
		while (have && can_post(&o)) {
			post_op(&o);
			have = sched_next(&s, &o);
		}
		tick("moving data");
		if (!poll_client())
			sched_yield();	/* the other side may be in this guest */
	}
	secs = now() - t_start;
	read_counters(&fadd, &cas);
	if (fadd != s.fadd)
		fail("the FETCH_AND_ADD counter ends at 0x%016" PRIx64 ", wanted 0x%016" PRIx64,
		     fadd, s.fadd);
	if (cas != s.cas)
		fail("the CMP_AND_SWAP counter ends at 0x%016" PRIx64 ", wanted 0x%016" PRIx64,
		     cas, s.cas);
	counters_read(&c1);
	ct.recvs = cons_posted;
	ct.fadd = s.fadd;
	ct.cas = s.cas;
	ct.fails = vm_fails;
	m.t = ct;
	send_msg(T_TOTALS, &m);
	recv_msg(T_TOTALS, &m);
	if (m.t.fails)
		fail("the server failed %" PRIu64 " checks (see its output)", m.t.fails);
	if (m.t.recvs != ct.recvs)
		fail("the server took %" PRIu64 " messages, we sent %" PRIu64, m.t.recvs, ct.recvs);
	if (m.t.replies != ct.replies || m.t.reply_bytes != ct.reply_bytes)
		fail("the server sent %" PRIu64 " answers of %" PRIu64 " bytes, we took %" PRIu64
		     " of %" PRIu64, m.t.replies, m.t.reply_bytes, ct.replies, ct.reply_bytes);
	if (m.t.fadd != s.fadd || m.t.cas != s.cas)
		fail("the server's counters are 0x%016" PRIx64 " and 0x%016" PRIx64 ", wanted "
		     "0x%016" PRIx64 " and 0x%016" PRIx64, m.t.fadd, m.t.cas, s.fadd, s.cas);
	print_totals(&ct, secs, "client");
	printf("%s client: the server checked %" PRIu64 " messages (%" PRIu64 " bytes)\n", prog,
	       m.t.recvs, m.t.recv_bytes);
	counters_print(&cnt0, &c1);
	teardown();
	return vm_fails ? 1 : 0;
}

/* The error modes wait at most @secs (or the time limit, if that comes first). */
static void limit_wait(double secs)
{
	if (now() + secs < t_end) {
		t_begin = now();
		t_end = t_begin + secs;
	}
}

/* Wait for @want send completions; the first's status and the time it came in *first_at. */
static void wait_errors(int want, enum ibv_wc_status first, const char *why, double *first_at)
{
	struct ibv_wc wc;
	int i;

	for (i = 0; i < want; i++) {
		struct pend *p = &pend[completed % sqd];
		enum ibv_wc_status st = i ? IBV_WC_WR_FLUSH_ERR : first;

		while (ibv_poll_cq(scq, 1, &wc) != 1) {
			tick(why);
			sched_yield();
		}
		if (!i)
			*first_at = now();
		if (wc.wr_id != p->wr_id)
			fail("completion %d: wr_id 0x%" PRIx64 ", wanted 0x%" PRIx64
			     " (%s): out of order", i, wc.wr_id, p->wr_id, p->what);
		if (wc.status != st && !i)	/* the rest would tell nothing */
			fatal("the first completion (%s, wr_id 0x%" PRIx64 ") is %s, wanted %s%s",
			      p->what, wc.wr_id, wc_status(wc.status), wc_status(st),
			      P.mode == MODE_RETRY_EXC ? " (was the link down?)" : "");
		if (wc.status != st)
			fail("completion %d (%s, wr_id 0x%" PRIx64 "): %s, wanted %s", i, p->what,
			     wc.wr_id, wc_status(wc.status), wc_status(st));
		if (wc.qp_num != qp->qp_num)
			fail("completion %d: QP 0x%x, wanted 0x%x", i, wc.qp_num, qp->qp_num);
		completed++;
	}
}

/* After an error: the QP is in ERR, receives are flushed, a new post is flushed. */
static void check_error_state(uint32_t recvs)
{
	struct ibv_send_wr wr, *bad;
	struct ibv_wc wc;
	struct op o = { .idx = UINT64_MAX, .kind = K_SEND, .len = 0 };
	double dummy;
	int state = qp_state(), rc;
	uint64_t n;

	if (state != IBV_QPS_ERR)
		fail("QP state %d after the error, wanted ERR (%d)", state, IBV_QPS_ERR);
	for (n = 0; n < recvs; n++) {
		while (ibv_poll_cq(rcq, 1, &wc) != 1) {
			tick("waiting for the receives to be flushed");
			sched_yield();
		}
		if (wc.status != IBV_WC_WR_FLUSH_ERR || wc.wr_id != (TAG_RECV | n))
			fail("receive %" PRIu64 ": wr_id 0x%" PRIx64 " %s, wanted 0x%" PRIx64
			     " flushed", n, wc.wr_id, wc_status(wc.status), TAG_RECV | n);
	}
	next_wr(&o, &wr, IBV_WC_SEND, "SEND posted in ERR");
	wr.opcode = IBV_WR_SEND;
	rc = ibv_post_send(qp, &wr, &bad);
	if (rc)
		fail("ibv_post_send in ERR: %s (verbs flush it instead)", strerror(rc));
	else
		wait_errors(1, IBV_WC_WR_FLUSH_ERR, "waiting for the flush of a post in ERR",
			    &dummy);
}

/* Post -q operations of every kind (one WR each) into a dead link. */
static int client_retry_exceeded(void)
{
	static const enum kind kinds[] = { K_WRITE_IMM, K_READ, K_SEND, K_FADD, K_SEND_IMM,
					   K_CSWAP, K_READ };
	struct counters c1;
	struct sched s;
	struct tmsg m = {};
	double t0, t_fail, tmo = timeout_secs();
	uint32_t i;

	client_start();
	printf("%s client: ready%s%s\n", prog, wait_file ? ": waiting for " : "",
	       wait_file ? wait_file : "");
	fflush(stdout);
	if (wait_file) {
		struct stat st;

		while (stat(wait_file, &st)) {
			tick("waiting for the wait file");
			usleep(10000);
		}
	}
	counters_read(&cnt0);
	sched_init(&s, 0);
	t0 = t_start = now();
	limit_wait(10 + 4 * (P.retry_cnt + 1) * tmo);
	for (i = 0; i < P.depth; i++) {
		struct op o;

		sched_next(&s, &o);
		o.kind = kinds[i % (sizeof(kinds) / sizeof(kinds[0]))];
		o.wslot = i % nw;
		o.len = o.len ? o.len : 1 + i;
		if (o.kind == K_READ)
			o.roff = 0;
		post_op(&o);
	}
	wait_errors((int)P.depth, IBV_WC_RETRY_EXC_ERR, "waiting for retry exceeded", &t_fail);
	printf("%s client: retry exceeded after %.3f s (timeout %.4f s, retry_cnt %u: %.3f s "
	       "expected)\n", prog, t_fail - t0, tmo, P.retry_cnt, tmo * (P.retry_cnt + 1));
	if (t_fail - t0 < tmo * (P.retry_cnt + 1) * 0.9)
		fail("the first WR failed after %.3f s, before retry_cnt + 1 = %u timeouts of "
		     "%.4f s", t_fail - t0, P.retry_cnt + 1, tmo);
	check_error_state(nrecv);
	counters_read(&c1);
	if (counter_delta(&cnt0, &c1, "timeouts") >= 0 &&
	    counter_delta(&cnt0, &c1, "timeouts") < P.retry_cnt + 1)
		fail("the device counted %" PRId64 " timeouts, wanted at least %u",
		     counter_delta(&cnt0, &c1, "timeouts"), P.retry_cnt + 1);
	counters_print(&cnt0, &c1);
	m.t.fails = vm_fails;
	send_msg(T_DONE, &m);
	printf("%s client: %s: the first of %u WRs completed with retry exceeded, the rest "
	       "flushed, QP in ERR\n", prog, vm_fails ? "FAIL" : "PASS", P.depth);
	teardown();
	return vm_fails ? 1 : 0;
}

/* The sizes and patterns of the --rnr SENDs (both sides). */
static void rnr_sends(struct op *o, uint32_t n)
{
	struct sched s;
	uint32_t i, max = P.maxlen < 4 * P.mtu ? P.maxlen : 4 * P.mtu;

	sched_init(&s, 0x3e3e);
	for (i = 0; i < n; i++) {
		memset(&o[i], 0, sizeof(o[i]));
		o[i].idx = i;
		o[i].kind = K_SEND;
		o[i].len = pick_len(&s, max, false);
		o[i].seed = rnd(&s);
		o[i].nsge = 1;
	}
}

/* The RNR NAK timer of @code in seconds (IBA table 45). */
static double rnr_timer_secs(uint32_t code)
{
	static const uint32_t us[32] = {
		655360, 10, 20, 30, 40, 60, 80, 120, 160, 240, 320, 480, 640, 960, 1280, 1920,
		2560, 3840, 5120, 7680, 10240, 15360, 20480, 30720, 40960, 61440, 81920, 122880,
		163840, 245760, 327680, 491520,
	};

	return us[code & 31] / 1e6;
}

static uint32_t rnr_count(void)
{
	return P.depth < RNR_SENDS ? P.depth : RNR_SENDS;
}

static int client_rnr(void)
{
	struct op o[RNR_SENDS];
	struct counters c1;
	struct tmsg m = {};
	bool infinite = P.rnr_retry == 7;
	double t0, t_first, timer = rnr_timer_secs(P.min_rnr_timer);
	uint32_t i, n = rnr_count();
	int64_t naks;

	pend = calloc(sqd, sizeof(*pend));
	cons = calloc(nrecv, sizeof(*cons));
	wbusy = calloc(nw, 1);
	if (!pend || !cons || !wbusy)
		fatal("out of memory");
	connect_qp(&server_info);
	sync_peers();
	counters_read(&cnt0);
	rnr_sends(o, n);
	t0 = t_start = now();
	limit_wait(infinite ? 30 + P.rnr_delay_ms / 1000.0 : 10 + 4 * (P.rnr_retry + 1) * timer);
	for (i = 0; i < n; i++)
		post_op(&o[i]);
	if (infinite) {
		wait_errors(1, IBV_WC_SUCCESS, "waiting for the SENDs (receiver not ready)",
			    &t_first);
		while (completed < posted)
			if (!poll_client())
				tick("waiting for the SENDs");
	} else {
		wait_errors((int)n, IBV_WC_RNR_RETRY_EXC_ERR,
			    "waiting for the RNR retry exceeded error", &t_first);
	}
	printf("%s client: the first SEND completed after %.4f s (RNR timer %.3f ms)\n", prog,
	       t_first - t0, timer * 1e3);
	counters_read(&c1);
	naks = counter_delta(&cnt0, &c1, "rnr_naks_received");
	if (naks == 0)
		fail("the device received no RNR NAK");
	if (infinite && P.rnr_delay_ms > 0 && t_first - t0 < P.rnr_delay_ms / 2000.0)
		fail("the first SEND completed after %.3f s, before the server posted a receive "
		     "(%d ms)", t_first - t0, P.rnr_delay_ms);
	/* The requester waits the RNR timer after each RNR NAK: so many NAKs, at most. */
	if (infinite && naks > (t_first - t0) / timer * 1.5 + 8)
		fail("%" PRId64 " RNR NAKs in %.3f s: the requester sent again before the RNR "
		     "timer of %.3f ms ran out (at most %.0f expected)", naks, t_first - t0,
		     timer * 1e3, (t_first - t0) / timer * 1.5 + 8);
	if (!infinite && t_first - t0 < P.rnr_retry * timer * 0.9)
		fail("RNR retry exceeded after %.4f s, before rnr_retry %u RNR timers of %.3f ms",
		     t_first - t0, P.rnr_retry, timer * 1e3);
	if (!infinite) {
		if (naks >= 0 && naks < P.rnr_retry + 1)
			fail("%" PRId64 " RNR NAKs received, wanted rnr_retry + 1 = %u", naks,
			     P.rnr_retry + 1);
		check_error_state(0);
	}
	counters_print(&cnt0, &c1);
	ct.recvs = infinite ? n : 0;
	ct.fails = vm_fails;
	m.t = ct;
	send_msg(T_TOTALS, &m);
	recv_msg(T_TOTALS, &m);
	if (m.t.fails)
		fail("the server failed %" PRIu64 " checks (see its output)", m.t.fails);
	if (m.t.recvs != ct.recvs)
		fail("the server took %" PRIu64 " SENDs, wanted %" PRIu64, m.t.recvs, ct.recvs);
	printf("%s client: %s: %u SENDs with rnr_retry %u %s\n", prog, vm_fails ? "FAIL" : "PASS",
	       n, P.rnr_retry, infinite ? "completed once the server posted its receives" :
	       "ended in RNR retry exceeded, the rest flushed, QP in ERR");
	teardown();
	return vm_fails ? 1 : 0;
}

/* ---------------------------------------------------------------- the server */
static uint8_t *srecv_buf(uint64_t n)
{
	return lbase + (n % nrecv) * lstride;
}

static uint8_t *sreply_buf(uint64_t n)
{
	return lbase + (size_t)nrecv * lstride + (n % nrecv) * rstride;
}

static void post_srecv(uint64_t n)
{
	struct ibv_recv_wr wr = {}, *bad;
	struct ibv_sge sg;
	int rc;

	sg.addr = (uintptr_t)srecv_buf(n);
	sg.length = P.maxlen;
	sg.lkey = lmr->lkey;
	wr.wr_id = TAG_RECV | n;
	wr.sg_list = &sg;
	wr.num_sge = 1;
	rc = ibv_post_recv(qp, &wr, &bad);
	if (rc)
		fatal("ibv_post_recv: %s", strerror(rc));
}

static void post_reply(uint64_t n)
{
	struct ibv_send_wr wr = {}, *bad;
	struct ibv_sge sg;
	struct reply r;
	int rc;

	reply_desc(n, &r);
	pat_fill(sreply_buf(n), r.len, r.seed, 0);
	sg.addr = (uintptr_t)sreply_buf(n);
	sg.length = r.len;
	sg.lkey = lmr->lkey;
	wr.wr_id = TAG_REPLY | n;
	wr.sg_list = &sg;
	wr.num_sge = r.len ? 1 : 0;
	wr.opcode = r.with_imm ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND;
	wr.imm_data = htonl(r.imm);
	wr.send_flags = IBV_SEND_SIGNALED;
	rc = ibv_post_send(qp, &wr, &bad);
	if (rc)
		fatal("ibv_post_send of answer %" PRIu64 ": %s", n, strerror(rc));
	ct.replies++;
	ct.reply_bytes += r.len;
}

/* Receive @n, taken by message @o: its completion and data as the schedule has them. */
static void check_receive(uint64_t n, const struct op *o, const struct ibv_wc *wc)
{
	bool imm = o->kind == K_WRITE_IMM || o->kind == K_SEND_IMM;
	enum ibv_wc_opcode opc = o->kind == K_WRITE_IMM ? IBV_WC_RECV_RDMA_WITH_IMM : IBV_WC_RECV;
	uint32_t len = o->kind == K_WRITE_SEND ? o->slen : o->len;
	char what[96];

	snprintf(what, sizeof(what), "%s, receive %" PRIu64, kind_names[o->kind], n);
	if (wc->wr_id != (TAG_RECV | n))
		fatal("%s (operation %" PRIu64 "): wr_id 0x%" PRIx64 ", wanted 0x%" PRIx64 " (%s)",
		      what, o->idx, wc->wr_id, TAG_RECV | n, wc_status(wc->status));
	if (wc->status != IBV_WC_SUCCESS)
		fatal("%s (operation %" PRIu64 "): completed with %s", what, o->idx,
		      wc_status(wc->status));
	if (wc->opcode != opc)
		fail("%s (operation %" PRIu64 "): opcode %d, wanted %d", what, o->idx, wc->opcode,
		     opc);
	if (!!(wc->wc_flags & IBV_WC_WITH_IMM) != imm)
		fail("%s (operation %" PRIu64 "): %s immediate", what, o->idx,
		     imm ? "no" : "an unexpected");
	else if (imm && ntohl(wc->imm_data) != o->imm)
		fail("%s (operation %" PRIu64 "): immediate 0x%08x, wanted 0x%08x", what, o->idx,
		     ntohl(wc->imm_data), o->imm);
	if (wc->qp_num != qp->qp_num)
		fail("%s (operation %" PRIu64 "): QP 0x%x, wanted 0x%x", what, o->idx, wc->qp_num,
		     qp->qp_num);
	if (wc->byte_len != len) {
		fail("%s (operation %" PRIu64 "): byte_len %u, wanted %u", what, o->idx,
		     wc->byte_len, len);
	} else if (o->kind != K_WRITE_IMM) {
		check_data(what, o->idx, srecv_buf(n), len,
			   o->kind == K_WRITE_SEND ? o->sseed : o->seed, 0);
		ct.recv_bytes += len;
	}
	if (o->kind == K_WRITE_IMM || o->kind == K_WRITE_SEND) {
		snprintf(what, sizeof(what), "%s, slot %u", kind_names[o->kind], o->wslot);
		check_data(what, o->idx, rbase + (uint64_t)o->wslot * wstride, o->len, o->seed, 0);
		ct.recv_bytes += o->len;
	}
	ct.ops[o->kind]++;
	ct.recvs++;
}

/* The next message of the schedule that takes a receive. */
static bool next_consuming(struct sched *s, struct op *o)
{
	while (sched_next(s, o))
		if (consumes(o->kind))
			return true;
	return false;
}

static void server_send_completion(const struct ibv_wc *wc)
{
	uint64_t n = cons_done;		/* the oldest answer in flight */

	if (cons_done == cons_posted)
		fatal("a send completion (wr_id 0x%" PRIx64 ", %s) with no answer in flight",
		      wc->wr_id, wc_status(wc->status));
	if (wc->wr_id != (TAG_REPLY | n))
		fatal("answer completion wr_id 0x%" PRIx64 " (%s), wanted 0x%" PRIx64, wc->wr_id,
		      wc_status(wc->status), TAG_REPLY | n);
	if (wc->status != IBV_WC_SUCCESS)
		fatal("answer %" PRIu64 " completed with %s (vendor error 0x%x)", n,
		      wc_status(wc->status), wc->vendor_err);
	if (wc->opcode != IBV_WC_SEND)
		fail("answer %" PRIu64 ": opcode %d, wanted IBV_WC_SEND", n, wc->opcode);
	cons_done++;
}

static int server_all(void)
{
	struct counters c1;
	struct ibv_wc wc[16];
	struct sched s;
	struct op o;
	struct tmsg m = {};
	uint64_t n, fadd, cas;
	bool more;
	int i, got;
	double secs;

	connect_qp(&m);
	for (n = 0; n < nrecv; n++)
		post_srecv(n);
	sync_peers();
	counters_read(&cnt0);
	t_start = now();
	sched_init(&s, 0);
	more = next_consuming(&s, &o);
	while (more || cons_done < cons_posted) {
		got = ibv_poll_cq(rcq, 16, wc);
		if (got < 0)
			fatal("ibv_poll_cq (receive): %d", got);
		for (i = 0; i < got; i++) {
			n = ct.recvs;
			if (!more)
				fatal("receive completion %" PRIu64 " (wr_id 0x%" PRIx64 ", %s, %u "
				      "bytes) beyond the end of the schedule", n, wc[i].wr_id,
				      wc_status(wc[i].status), wc[i].byte_len);
			check_receive(n, &o, &wc[i]);
			post_srecv(n + nrecv);
			while (cons_posted - cons_done >= nrecv) {	/* cannot happen: credits */
				struct ibv_wc w;

				if (ibv_poll_cq(scq, 1, &w) == 1)
					server_send_completion(&w);
				else
					tick("waiting for room to answer");
			}
			post_reply(n);
			cons_posted++;
			more = next_consuming(&s, &o);
		}
		i = ibv_poll_cq(scq, 16, wc);
		if (i < 0)
			fatal("ibv_poll_cq (send): %d", i);
		for (int j = 0; j < i; j++)
			server_send_completion(&wc[j]);
		tick("receiving");
		if (!got && !i)
			sched_yield();
	}
	secs = now() - t_start;
	wait_peer("waiting for the client's totals");
	m = peer_totals;
	if (m.type != T_TOTALS)
		fatal("message %u from the client, wanted its totals", m.type);
	counters_read(&c1);
	memcpy(&fadd, rbase + c_off, 8);
	memcpy(&cas, rbase + c_off + 8, 8);
	if (m.t.recvs != ct.recvs)
		fail("the client sent %" PRIu64 " messages, we took %" PRIu64, m.t.recvs, ct.recvs);
	if (fadd != m.t.fadd || cas != m.t.cas || fadd != s.fadd || cas != s.cas)
		fail("the counters are 0x%016" PRIx64 " and 0x%016" PRIx64 ", wanted 0x%016" PRIx64
		     " and 0x%016" PRIx64, fadd, cas, s.fadd, s.cas);
	if (m.t.fails)
		fprintf(stderr, "%s server: the client failed %" PRIu64 " checks\n", prog,
			m.t.fails);
	ct.fadd = fadd;
	ct.cas = cas;
	ct.fails = vm_fails;
	ct.bytes = m.t.bytes;
	memset(&m, 0, sizeof(m));
	m.t = ct;
	send_msg(T_TOTALS, &m);
	printf("%s server: %s: checked %" PRIu64 " messages (%" PRIu64 " bytes), sent %" PRIu64
	       " answers (%" PRIu64 " bytes); the client moved %" PRIu64 " bytes in %.2f s, "
	       "%.1f MB/s\n", prog, vm_fails || peer_totals.t.fails ? "FAIL" : "PASS", ct.recvs,
	       ct.recv_bytes, ct.replies, ct.reply_bytes, ct.bytes, secs,
	       secs > 0 ? ct.bytes / secs / 1e6 : 0);
	counters_print(&cnt0, &c1);
	teardown();
	return vm_fails || peer_totals.t.fails ? 1 : 0;
}

static int server_rnr(void)
{
	struct op o[RNR_SENDS];
	struct ibv_wc wc;
	struct tmsg m = {};
	uint32_t i, n = rnr_count();
	bool post = P.rnr_retry == 7 && P.rnr_delay_ms >= 0;

	rnr_sends(o, n);
	connect_qp(&m);
	sync_peers();
	t_start = now();
	if (post) {
		while (now() < t_start + P.rnr_delay_ms / 1000.0) {
			tick("waiting to post the receives");
			usleep(1000);
		}
		for (i = 0; i < n; i++)
			post_srecv(i);
		for (i = 0; i < n; i++) {
			while (ibv_poll_cq(rcq, 1, &wc) != 1) {
				tick("receiving the SENDs");
				sched_yield();
			}
			check_receive(i, &o[i], &wc);
		}
	}
	wait_peer("waiting for the client's totals");
	if (peer_totals.type != T_TOTALS)
		fatal("message %u from the client, wanted its totals", peer_totals.type);
	if (ibv_poll_cq(rcq, 1, &wc) == 1)
		fail("a receive completion (wr_id 0x%" PRIx64 ", %s) more than the client sent",
		     wc.wr_id, wc_status(wc.status));
	ct.fails = vm_fails;
	m.t = ct;
	send_msg(T_TOTALS, &m);
	printf("%s server: %s: %" PRIu64 " SENDs taken%s%s\n", prog,
	       vm_fails || peer_totals.t.fails ? "FAIL" : "PASS", ct.recvs,
	       post ? " after the delay" : " (no receive posted)",
	       peer_totals.t.fails ? "; the client failed" : "");
	teardown();
	return vm_fails || peer_totals.t.fails ? 1 : 0;
}

static int server_retry_exceeded(void)
{
	struct tmsg m = {};
	uint64_t n;

	connect_qp(&m);
	for (n = 0; n < nrecv; n++)	/* with the link up, the client's SENDs would succeed */
		post_srecv(n);
	sync_peers();
	t_start = now();
	wait_peer("waiting for the client to finish");
	printf("%s server: the client is done (%s)\n", prog,
	       peer_totals.t.fails ? "it failed" : "it passed");
	teardown();
	return peer_totals.t.fails ? 1 : 0;
}

/* ---------------------------------------------------------------- options */
static void __attribute__((noreturn)) usage(int rc)
{
	fprintf(rc ? stderr : stdout,
		"usage: %s -s [-p PORT] [-d DEV] [-g GID_INDEX] [-T SECS]\n"
		"       %s [options] SERVER_IP\n"
		"RC delivers exactly: every operation checked, also across loss and link down.\n"
		"  -b BYTES     payload to move (K, M, G suffixes; default 16M)\n"
		"  -m MTU       path MTU 256..4096 (default 4096)\n"
		"  -t TIMEOUT   local ACK timeout exponent, 4.096 us * 2^T (default 12: 16.8 ms)\n"
		"  -r RETRY     retry_cnt 0..7 (default 7)\n"
		"  -q DEPTH     work requests in flight (default 16)\n"
		"  -l MAXLEN    largest message (default 64K)\n"
		"  -S SEED      seed of the schedule and the data patterns (default 1)\n"
		"  -P PSN       first PSN of both directions (default 0xffff00: wraps early)\n"
		"  -T SECS      time limit of the whole run (default 600)\n"
		"  -p PORT      TCP port of the exchange (default %d)\n"
		"  -d DEV       RDMA device (default qhca_0); -g GID_INDEX (default: the RoCE v2\n"
		"               GID of the IPv4 address)\n"
		"  -v           progress every 10 s, all device counters\n"
		"  --expect-retry-exceeded   post into a link that is down: the first WR must end\n"
		"               in RETRY_EXC_ERR, the rest flushed; --wait-file PATH: print\n"
		"               \"ready\" and post once PATH exists\n"
		"  --rnr        SENDs before the server posts receives: with --rnr-retry 7\n"
		"               (default) it posts them after --rnr-delay MS (default 1000) and\n"
		"               all succeed; with --rnr-retry 0..6 it posts none and the first\n"
		"               ends in RNR_RETRY_EXC_ERR; --min-rnr-timer N: the server's RNR\n"
		"               NAK timer (default 20: 10.24 ms with --rnr, else 12: 0.64 ms)\n"
		"Exit 0 only if every check passed (the client also needs the server's).\n",
		prog, prog, PORT);
	exit(rc);
}

static uint64_t parse_num(const char *s, const char *what, uint64_t min, uint64_t max)
{
	char *end;
	uint64_t v;

	errno = 0;
	v = strtoull(s, &end, 0);
	switch (*end) {
	case 'k': case 'K':
		v <<= 10, end++;
		break;
	case 'm': case 'M':
		v <<= 20, end++;
		break;
	case 'g': case 'G':
		v <<= 30, end++;
		break;
	default:
		break;
	}
	if (errno || end == s || *end || v < min || v > max) {
		fprintf(stderr, "%s: bad %s '%s' (%" PRIu64 "..%" PRIu64 ")\n", prog, what, s, min,
			max);
		exit(2);
	}
	return v;
}

int main(int argc, char **argv)
{
	enum { O_RETRY_EXC = 256, O_WAIT_FILE, O_RNR, O_RNR_RETRY, O_RNR_DELAY, O_MIN_RNR };
	static const struct option lo[] = {
		{ "expect-retry-exceeded", no_argument, NULL, O_RETRY_EXC },
		{ "wait-file", required_argument, NULL, O_WAIT_FILE },
		{ "rnr", no_argument, NULL, O_RNR },
		{ "rnr-retry", required_argument, NULL, O_RNR_RETRY },
		{ "rnr-delay", required_argument, NULL, O_RNR_DELAY },
		{ "min-rnr-timer", required_argument, NULL, O_MIN_RNR },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct tmsg m = {};
	uint16_t port = PORT;
	bool min_rnr_given = false;
	int c, rc;

	signal(SIGPIPE, SIG_IGN);
	setvbuf(stdout, NULL, _IOLBF, 0);
	P = (struct params){ .mode = MODE_ALL, .mtu = 4096, .timeout = 12, .retry_cnt = 7,
			     .rnr_retry = 7, .min_rnr_timer = 12, .depth = 16, .maxlen = 65536,
			     .rnr_delay_ms = 1000, .psn = 0xffff00, .limit = 600,
			     .bytes = 16 << 20, .seed = 1 };
	while ((c = getopt_long(argc, argv, "sb:m:t:r:q:l:S:P:T:p:d:g:vh", lo, NULL)) != -1) {
		switch (c) {
		case 's':
			is_server = 1;
			break;
		case 'b':
			P.bytes = parse_num(optarg, "byte count", 1, 1ull << 40);
			break;
		case 'm':
			P.mtu = (uint32_t)parse_num(optarg, "MTU", 256, 4096);
			if (P.mtu & (P.mtu - 1)) {
				fprintf(stderr, "%s: the MTU is 256, 512, 1024, 2048 or 4096\n",
					prog);
				exit(2);
			}
			break;
		case 't':
			P.timeout = (uint32_t)parse_num(optarg, "timeout", 0, 31);
			break;
		case 'r':
			P.retry_cnt = (uint32_t)parse_num(optarg, "retry count", 0, 7);
			break;
		case 'q':
			P.depth = (uint32_t)parse_num(optarg, "depth", 1, 1024);
			break;
		case 'l':
			P.maxlen = (uint32_t)parse_num(optarg, "message size", 1, 16 << 20);
			break;
		case 'S':
			P.seed = parse_num(optarg, "seed", 0, UINT64_MAX);
			break;
		case 'P':
			P.psn = (uint32_t)parse_num(optarg, "PSN", 0, 0xffffff);
			break;
		case 'T':
			P.limit = (uint32_t)parse_num(optarg, "time limit", 1, 1u << 30);
			break;
		case 'p':
			port = (uint16_t)parse_num(optarg, "port", 1, 65535);
			break;
		case 'd':
			dev_name = optarg;
			break;
		case 'g':
			gid_index = (int)parse_num(optarg, "GID index", 0, 255);
			break;
		case 'v':
			verbose = 1;
			break;
		case O_RETRY_EXC:
			P.mode = MODE_RETRY_EXC;
			break;
		case O_WAIT_FILE:
			wait_file = optarg;
			break;
		case O_RNR:
			P.mode = MODE_RNR;
			break;
		case O_RNR_RETRY:
			P.rnr_retry = (uint32_t)parse_num(optarg, "RNR retry count", 0, 7);
			break;
		case O_RNR_DELAY:
			P.rnr_delay_ms = (int32_t)parse_num(optarg, "RNR delay", 0, 1u << 30);
			break;
		case O_MIN_RNR:
			P.min_rnr_timer = (uint32_t)parse_num(optarg, "RNR timer", 0, 31);
			min_rnr_given = true;
			break;
		case 'h':
			usage(0);
		default:
			usage(2);
		}
	}
	if (is_server ? optind != argc : optind != argc - 1)
		usage(2);
	if (P.mode == MODE_RNR && !min_rnr_given)
		P.min_rnr_timer = 20;	/* 10.24 ms: an early retry shows */
	if (!derive()) {
		fprintf(stderr, "%s: -q %u with -l %u needs more than %llu MiB of buffers on the "
			"server\n", prog, P.depth, P.maxlen, MAX_MEM >> 20);
		exit(2);
	}
	if (P.mode == MODE_RETRY_EXC && !P.timeout) {
		fprintf(stderr, "%s: --expect-retry-exceeded needs a timeout (-t 1..31)\n", prog);
		exit(2);
	}
	t_begin = now();
	t_end = t_begin + P.limit;
	signal(SIGALRM, on_alarm);
	alarm(P.limit + 10);
	vm_meet_host(prog, is_server, is_server ? NULL : argv[optind], port, is_server ? 0 : 10,
		     &sock);
	if (is_server) {
		uint32_t limit = P.limit;

		recv_msg(T_PARAMS, &m);
		P = m.p;
		if (P.limit > limit)	/* the server keeps its own limit if that is shorter */
			P.limit = limit;
		t_begin = now();
		t_end = t_begin + P.limit;
		alarm(P.limit + 10);
	} else {
		m.p = P;
		send_msg(T_PARAMS, &m);
	}
	if (!derive())
		fatal("-q %u with -l %u needs more than %llu MiB of buffers", P.depth, P.maxlen,
		      MAX_MEM >> 20);
	printf("%s %s: mode %s, %" PRIu64 " bytes, MTU %u, timeout %u (%.1f ms), retry_cnt %u, "
	       "rnr_retry %u, depth %u, largest message %u, seed %" PRIu64 ", first PSN 0x%06x\n",
	       prog, is_server ? "server" : "client", mode_names[P.mode], P.bytes, P.mtu,
	       P.timeout, timeout_secs() * 1e3, P.retry_cnt, P.rnr_retry, P.depth, P.maxlen,
	       P.seed, P.psn);
	setup();
	if (is_server)
		rc = P.mode == MODE_ALL ? server_all() : P.mode == MODE_RNR ? server_rnr() :
		     server_retry_exceeded();
	else
		rc = P.mode == MODE_ALL ? client_all() : P.mode == MODE_RNR ? client_rnr() :
		     client_retry_exceeded();
	close(sock);
	return rc;
}
