// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * qhca-fabric impairments: what happens to a frame on its way through the switch.
 *
 * A frame meets two sets of impairments: those of the direction "in" of the port it entered
 * by, then those of the direction "out" of each port it is delivered to. Each set can drop
 * it (loss), deliver it twice (dup), flip one bit of it past the Ethernet header (corrupt),
 * hold it back until the next frame to the same port has gone (reorder: the two swap; a
 * frame nothing follows goes alone after FABRIC_REORDER_HOLD_NS), delay it (delay, +-jitter)
 * and serialise it at a rate; a frame longer than the mtu is dropped, and a link that is
 * down drops everything. 'drop=N' loses the next N RDMA packets (ACKs aside) that meet the
 * set, for a loss at a known place: a lesson's, or a test's. Without jitter a port's frames keep their order through the delay
 * line; jitter reorders as netem's does.
 *
 * Every random choice comes from a stream of its own per port and direction, started from
 * the fabric's seed: the k-th frame through a direction meets the same choices in every run
 * with the same seed and the same settings, whatever the other ports do at the same time.
 *
 * Delayed frames wait in one delay line, a binary min-heap by due time and arrival (O(log n)
 * a frame in or out, jitter or not), counted in their destination's queue: a destination whose queue and delay line together hold queue_max bytes pauses its
 * unicast senders, as a full queue does (fabric.h), so a slow or long link limits a sender
 * instead of growing without bound; a flooded or multicast frame (or a duplicate) that does
 * not fit is dropped and counted as at a full queue. What the delay line holds for a port is
 * within queue_max (fabric_has_room), whoever sends.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fabric.h"

static uint64_t next_rand(uint64_t *s)	/* splitmix64 */
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static bool chance(uint64_t *s, uint32_t ppm)
{
	return ppm && next_rand(s) % FABRIC_PPM < ppm;
}

void fabric_seed(struct fabric *sw, uint64_t seed)
{
	int i, d;

	sw->seed = seed;
	for (i = 0; i < FABRIC_MAX_PORTS; i++)
		for (d = 0; d < 2; d++) {
			sw->port[i].rng[d] = seed ^ (0xd1342543de82ef95ull * (uint64_t)(2 * i + d + 1));
			next_rand(&sw->port[i].rng[d]);
		}
}

void fabric_impair_update(struct fabric *sw)
{
	static const struct fabric_impair none;
	int i, d;

	sw->impaired = 0;
	for (i = 0; i < sw->nports; i++) {
		if (sw->port[i].link_down)
			sw->impaired = 1;
		for (d = 0; d < 2; d++)
			if (memcmp(&sw->port[i].imp[d], &none, sizeof(none)))
				sw->impaired = 1;
	}
}

/* The frame's fate, written into the capture's comment for it. */
struct note {
	char text[512];
	size_t len;
	bool on;
};

static void note(struct note *n, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(struct note *n, const char *fmt, ...)
{
	va_list ap;
	int r;

	if (!n->on || n->len >= sizeof(n->text) - 1)
		return;
	if (n->len)
		n->text[n->len++] = ';', n->text[n->len] = 0;
	va_start(ap, fmt);
	r = vsnprintf(n->text + n->len, sizeof(n->text) - n->len, fmt, ap);
	va_end(ap);
	if (r > 0)
		n->len += (size_t)r;
	if (n->len >= sizeof(n->text))
		n->len = sizeof(n->text) - 1;
}

static uint64_t delay_ns(struct fabric_port *p, int dir)
{
	const struct fabric_impair *im = &p->imp[dir];
	int64_t d = (int64_t)im->delay_us * 1000;

	if (im->jitter_us) {
		uint64_t span = 2ull * im->jitter_us * 1000 + 1;

		d += (int64_t)(next_rand(&p->rng[dir]) % span) - (int64_t)im->jitter_us * 1000;
	}
	return d > 0 ? (uint64_t)d : 0;
}

/* The time the frame leaves a direction that serialises at its rate, starting at @t. */
static uint64_t serialise(struct fabric_port *p, int dir, uint64_t t, size_t len)
{
	uint32_t rate = p->imp[dir].rate_mbit;

	if (!rate)
		return t;
	if (t < p->busy_until_ns[dir])
		t = p->busy_until_ns[dir];
	p->busy_until_ns[dir] = t + (uint64_t)len * 8000 / rate;
	return t;
}

/* Flip one bit past the Ethernet header of @buf; returns its offset, or -1 if none. */
static long corrupt(struct fabric_port *p, int dir, uint8_t *buf, size_t len, int *bit)
{
	uint64_t r = next_rand(&p->rng[dir]);
	size_t off;

	if (len <= 14)
		return -1;
	off = 14 + r % (len - 14);
	*bit = (int)((r >> 32) & 7);
	buf[off] ^= (uint8_t)(1u << *bit);
	return (long)off;
}

static struct fabric_delayed *new_delayed(int out, const uint8_t *frame, size_t len,
					  uint64_t due)
{
	struct fabric_delayed *d = malloc(sizeof(*d) + len);

	if (!d)
		return NULL;
	d->seq = 0;
	d->due_ns = due;
	d->out = out;
	d->len = len;
	memcpy(d->frame, frame, len);
	return d;
}

/* The delay line is a binary min-heap of (due time, seq): the frame due first, of those due
 * at once the first that came, is at the top; insert and remove take O(log n) steps. */
static bool dl_before(const struct fabric_delayed *a, const struct fabric_delayed *b)
{
	return a->due_ns < b->due_ns || (a->due_ns == b->due_ns && a->seq < b->seq);
}

static void sift_up(struct fabric *sw, size_t i)
{
	struct fabric_delayed **h = sw->dl_heap, *d = h[i];

	while (i > 0 && dl_before(d, h[(i - 1) / 2])) {
		h[i] = h[(i - 1) / 2];
		i = (i - 1) / 2;
		sw->dl_steps++;
	}
	h[i] = d;
}

static void sift_down(struct fabric *sw, size_t i)
{
	struct fabric_delayed **h = sw->dl_heap, *d = h[i];
	size_t n = sw->dl_n, c;

	while ((c = 2 * i + 1) < n) {
		if (c + 1 < n && dl_before(h[c + 1], h[c]))
			c++;
		sw->dl_steps++;
		if (!dl_before(h[c], d))
			break;
		h[i] = h[c];
		i = c;
	}
	h[i] = d;
}

/* Into the delay line, after every frame due no later than it (a stable order). False:
 * out of memory for its slot. */
static bool line_insert(struct fabric *sw, struct fabric_delayed *d)
{
	if (sw->dl_n == sw->dl_cap) {
		size_t cap = sw->dl_cap ? 2 * sw->dl_cap : 256;
		struct fabric_delayed **h = realloc(sw->dl_heap, cap * sizeof(*h));

		if (!h)
			return false;
		sw->dl_heap = h;
		sw->dl_cap = cap;
	}
	d->seq = sw->dl_seq++;
	sw->dl_heap[sw->dl_n++] = d;
	sift_up(sw, sw->dl_n - 1);
	return true;
}

/* The slots of a line that shrank to a quarter go back, but for a few. */
static void line_shrink(struct fabric *sw)
{
	struct fabric_delayed **h;

	if (!sw->dl_n) {
		free(sw->dl_heap);
		sw->dl_heap = NULL;
		sw->dl_cap = 0;
	} else if (sw->dl_cap > 1024 && sw->dl_n < sw->dl_cap / 4 &&
		   (h = realloc(sw->dl_heap, sw->dl_cap / 2 * sizeof(*h)))) {
		sw->dl_heap = h;
		sw->dl_cap /= 2;
	}
}

/* Take the frame due first out of the delay line. */
static struct fabric_delayed *line_pop(struct fabric *sw)
{
	struct fabric_delayed *d = sw->dl_heap[0];

	sw->dl_heap[0] = sw->dl_heap[--sw->dl_n];
	if (sw->dl_n)
		sift_down(sw, 0);
	return d;
}

static void release_held(struct fabric *sw, int out)
{
	struct fabric_port *p = &sw->port[out];
	struct fabric_delayed *h = p->held;

	if (!h)
		return;
	p->held = NULL;
	sw->nheld--;
	p->delayed_bytes -= FABRIC_DELAYED_COST(h->len);
	fabric_send(sw, out, h->frame, h->len);
	free(h);
}

/* Deliver to @out now; a frame held back for reordering goes right after it. */
static void deliver(struct fabric *sw, int out, const uint8_t *frame, size_t len)
{
	fabric_send(sw, out, frame, len);
	release_held(sw, out);
}

/* One copy of a frame to @out, due at @due; @hold: held back to swap with the next one.
 * False if it was dropped: no room for it in the port's queue and delay line. */
static bool schedule(struct fabric *sw, int out, const uint8_t *frame, size_t len,
		     uint64_t due, uint64_t now, bool hold, uint64_t *reordered)
{
	struct fabric_port *p = &sw->port[out];
	size_t held = p->held ? FABRIC_DELAYED_COST(p->held->len) : 0;
	bool hold_it = hold && !p->held;
	bool now_out = !hold_it && due <= now && p->delayed_bytes == held;
	struct fabric_delayed *d;

	if (!now_out && !fabric_has_room(sw, out, len)) {
		fabric_queue_drop(sw, out);
		return false;
	}
	if (hold_it) {
		d = new_delayed(out, frame, len, (due > now ? due : now) + FABRIC_REORDER_HOLD_NS);
		if (d) {
			p->held = d;
			sw->nheld++;
			p->delayed_bytes += FABRIC_DELAYED_COST(len);
			(*reordered)++;
			return true;
		}
	}
	if (now_out) {
		deliver(sw, out, frame, len);	/* fabric_send drops it if the queue is full */
		return true;
	}
	d = new_delayed(out, frame, len, due);
	if (!d) {
		fabric_log("port %d: out of memory for a delayed frame; dropped", out + 1);
		p->tx_drops++;
		return false;
	}
	if (!line_insert(sw, d)) {
		free(d);
		fabric_log("port %d: out of memory for a delayed frame; dropped", out + 1);
		p->tx_drops++;
		return false;
	}
	p->delayed_bytes += FABRIC_DELAYED_COST(len);
	return true;
}

struct ingress {
	const uint8_t *frame;	/* after the in direction (maybe corrupted) */
	size_t len;
	int copies;
	bool hold;
	bool jitter;
	uint64_t due;
	uint64_t now;
};

static void to_port(struct fabric *sw, int in, int out, const struct ingress *g,
		    struct note *n)
{
	static uint8_t scratch[FABRIC_MAX_FRAME];
	struct fabric_port *p = &sw->port[out];
	struct fabric_impair *im = &p->imp[FABRIC_OUT];
	struct fabric_dir_stats *st = &p->st[FABRIC_OUT];
	const uint8_t *frame = g->frame;
	uint64_t due, *reordered;
	int copies = g->copies, c, bit;
	bool hold = g->hold;
	long off;

	if (p->fd < 0)
		return;
	if (p->link_down) {
		p->link_drops++;
		note(n, "dropped: port %d link down", out + 1);
		return;
	}
	if (im->mtu && g->len - 14 > im->mtu) {
		p->mtu_drops++;
		note(n, "dropped: longer than port %d out mtu %u", out + 1, im->mtu);
		return;
	}
	st->frames++;
	if (im->drop && fabric_rdma_packet(sw, frame, g->len)) {
		im->drop--;
		st->dropped++;
		note(n, "lost on the way out to port %d (drop: %u more to go)", out + 1, im->drop);
		return;
	}
	if (chance(&p->rng[FABRIC_OUT], im->loss)) {
		st->dropped++;
		note(n, "lost on the way out to port %d", out + 1);
		return;
	}
	if (chance(&p->rng[FABRIC_OUT], im->dup)) {
		copies++;
		st->duplicated++;
		note(n, "duplicated on the way out to port %d", out + 1);
	}
	if (chance(&p->rng[FABRIC_OUT], im->corrupt)) {
		memcpy(scratch, frame, g->len);
		off = corrupt(p, FABRIC_OUT, scratch, g->len, &bit);
		if (off >= 0) {
			frame = scratch;
			st->corrupted++;
			note(n, "corrupted on the way out to port %d: byte %ld bit %d", out + 1,
			     off, bit);
		}
	}
	reordered = &sw->port[in].st[FABRIC_IN].reordered;
	if (chance(&p->rng[FABRIC_OUT], im->reorder)) {
		hold = true;
		reordered = &st->reordered;
	}
	due = g->due + delay_ns(p, FABRIC_OUT);
	due = serialise(p, FABRIC_OUT, due, g->len);
	if (!g->jitter && !im->jitter_us && due < p->last_due_ns)
		due = p->last_due_ns;	/* keep the port's order through the delay line */
	if (due > p->last_due_ns)
		p->last_due_ns = due;
	if (due > g->now) {
		st->delayed++;
		note(n, "to port %d after %llu us", out + 1,
		     (unsigned long long)(due - g->now) / 1000);
	}
	if (hold && !p->held)
		note(n, "held back to be reordered on the way to port %d", out + 1);
	for (c = 0; c < copies; c++)
		if (!schedule(sw, out, frame, g->len, due, g->now, hold && !c, reordered))
			note(n, "dropped: port %d queue full", out + 1);
}

void fabric_forward_impaired(struct fabric *sw, int in, int out, const uint8_t *frame,
			     size_t len)
{
	uint64_t all = sw->nports >= 64 ? ~0ull : (1ull << sw->nports) - 1;

	fabric_forward_impaired_set(sw, in, out >= 0 ? 1ull << out : all & ~(1ull << in), frame,
				    len);
}

void fabric_forward_impaired_set(struct fabric *sw, int in, uint64_t outs,
				 const uint8_t *frame, size_t len)
{
	static uint8_t scratch[FABRIC_MAX_FRAME];
	struct fabric_port *p = &sw->port[in];
	struct fabric_impair *im = &p->imp[FABRIC_IN];
	struct fabric_dir_stats *st = &p->st[FABRIC_IN];
	struct ingress g = { .frame = frame, .len = len, .copies = 1 };
	struct note n = { .on = sw->cap != NULL };
	int i, bit;
	long off;

	g.now = fabric_now_ns();
	if (p->link_down) {
		p->link_drops++;
		note(&n, "dropped: port %d link down", in + 1);
		goto done;
	}
	if (im->mtu && len - 14 > im->mtu) {
		p->mtu_drops++;
		note(&n, "dropped: longer than port %d in mtu %u", in + 1, im->mtu);
		goto done;
	}
	st->frames++;
	if (im->drop && fabric_rdma_packet(sw, frame, len)) {
		im->drop--;
		st->dropped++;
		note(&n, "lost on the way in from port %d (drop: %u more to go)", in + 1, im->drop);
		goto done;
	}
	if (chance(&p->rng[FABRIC_IN], im->loss)) {
		st->dropped++;
		note(&n, "lost on the way in from port %d", in + 1);
		goto done;
	}
	if (chance(&p->rng[FABRIC_IN], im->dup)) {
		g.copies = 2;
		st->duplicated++;
		note(&n, "duplicated on the way in from port %d", in + 1);
	}
	if (chance(&p->rng[FABRIC_IN], im->corrupt)) {
		memcpy(scratch, frame, len);
		off = corrupt(p, FABRIC_IN, scratch, len, &bit);
		if (off >= 0) {
			g.frame = scratch;
			st->corrupted++;
			note(&n, "corrupted on the way in from port %d: byte %ld bit %d", in + 1,
			     off, bit);
		}
	}
	g.hold = chance(&p->rng[FABRIC_IN], im->reorder);
	g.jitter = im->jitter_us != 0;
	g.due = serialise(p, FABRIC_IN, g.now + delay_ns(p, FABRIC_IN), len);
	if (g.due > g.now)
		st->delayed++;
	for (i = 0; i < sw->nports; i++)
		if (outs >> i & 1)
			to_port(sw, in, i, &g, &n);
done:
	if (sw->cap)
		fabric_capture_frame(sw, in, g.now, frame, len, n.len ? n.text : NULL);
}

uint64_t fabric_release_due(struct fabric *sw, uint64_t now)
{
	uint64_t next = UINT64_MAX;
	struct fabric_delayed *d;
	int i;

	while (sw->dl_n && sw->dl_heap[0]->due_ns <= now) {
		d = line_pop(sw);
		sw->port[d->out].delayed_bytes -= FABRIC_DELAYED_COST(d->len);
		deliver(sw, d->out, d->frame, d->len);
		free(d);
	}
	line_shrink(sw);
	if (sw->dl_n)
		next = sw->dl_heap[0]->due_ns - now;
	for (i = 0; sw->nheld && i < sw->nports; i++) {
		struct fabric_delayed *h = sw->port[i].held;

		if (!h)
			continue;
		if (h->due_ns <= now)
			release_held(sw, i);	/* nothing came after it: it goes alone */
		else if (h->due_ns - now < next)
			next = h->due_ns - now;
	}
	return next;
}

void fabric_port_drop_delayed(struct fabric *sw, int port)
{
	struct fabric_port *p = &sw->port[port];
	size_t held = p->held ? FABRIC_DELAYED_COST(p->held->len) : 0, i, j;

	/* The port's frames out of the line (one pass), then the heap made again: O(n). */
	if (p->delayed_bytes > held) {
		for (i = j = 0; i < sw->dl_n; i++) {
			if (sw->dl_heap[i]->out == port)
				free(sw->dl_heap[i]);
			else
				sw->dl_heap[j++] = sw->dl_heap[i];
		}
		sw->dl_n = j;
		for (i = j / 2; i-- > 0;)
			sift_down(sw, i);
		sw->dl_steps += j;
		line_shrink(sw);
	}
	if (p->held) {
		free(p->held);
		p->held = NULL;
		sw->nheld--;
	}
	p->delayed_bytes = 0;
	p->last_due_ns = 0;
	p->busy_until_ns[0] = p->busy_until_ns[1] = 0;
}

void fabric_impair_close(struct fabric *sw)
{
	int i;

	for (i = 0; i < FABRIC_MAX_PORTS; i++)
		fabric_port_drop_delayed(sw, i);
	while (sw->dl_n)	/* none left: every frame is some port's */
		free(sw->dl_heap[--sw->dl_n]);
	line_shrink(sw);
}

int fabric_parse_scaled(const char *v, const struct fabric_unit *units, double max,
			double *out)
{
	char *end;
	double d;

	errno = 0;
	d = strtod(v, &end);
	if (end == v || errno || !(d >= 0))
		return -1;
	for (; units->suffix; units++)
		if (!strcasecmp(end, units->suffix))
			break;
	if (!units->suffix)
		return -1;
	d *= units->scale;
	if (d > max)
		return -1;
	*out = d;
	return 0;
}

/* "5", "5%", "0.5%": parts per million. */
static int parse_percent(const char *v, uint32_t *ppm)
{
	static const struct fabric_unit pct[] = { { "", 1 }, { "%", 1 }, {} };
	double d;

	if (fabric_parse_scaled(v, pct, 100, &d))
		return -1;
	*ppm = (uint32_t)llround(d * (FABRIC_PPM / 100));
	return 0;
}

/* "100" (us), "100us", "2ms", "1s", "1.5ms": microseconds, at most 10 s. */
static int parse_us(const char *v, uint32_t *us)
{
	static const struct fabric_unit t[] = { { "", 1 }, { "us", 1 }, { "ms", 1e3 },
						{ "s", 1e6 }, {} };
	double d;

	if (fabric_parse_scaled(v, t, 10e6, &d))
		return -1;
	*us = (uint32_t)llround(d);
	return 0;
}

/* "100" (Mbit/s), "100mbit", "1gbit": Mbit/s, at most 1 Tbit/s; 0 is unlimited. */
static int parse_rate(const char *v, uint32_t *mbit)
{
	static const struct fabric_unit r[] = { { "", 1 }, { "mbit", 1 }, { "gbit", 1e3 }, {} };
	double d;

	if (fabric_parse_scaled(v, r, 1e6, &d) || (d > 0 && d < 1))
		return -1;
	*mbit = (uint32_t)llround(d);
	return 0;
}

/* The control socket's 'set' copies a field by the offset returned: all are uint32_t. */
_Static_assert(sizeof(struct fabric_impair) == 9 * sizeof(uint32_t),
	       "struct fabric_impair: uint32_t fields only");

int fabric_impair_parse(struct fabric_impair *imp, const char *kv, char *err, size_t errlen)
{
	const char *eq = strchr(kv, '=');
	const char *v = eq ? eq + 1 : "";
	size_t klen = eq ? (size_t)(eq - kv) : strlen(kv);
	char key[16];
	char *end;
	unsigned long m;
	uint32_t *field;

	if (!eq || klen >= sizeof(key) || !*v) {
		snprintf(err, errlen, "'%s': expected KEY=VALUE (loss, reorder, dup, corrupt, "
			 "delay, jitter, rate, mtu, drop)", kv);
		return -1;
	}
	memcpy(key, kv, klen);
	key[klen] = 0;
	if (!strcmp(key, "loss") || !strcmp(key, "reorder") || !strcmp(key, "dup") ||
	    !strcmp(key, "corrupt")) {
		field = key[0] == 'l' ? &imp->loss : key[0] == 'r' ? &imp->reorder :
			key[0] == 'd' ? &imp->dup : &imp->corrupt;
		if (parse_percent(v, field)) {
			snprintf(err, errlen, "%s=%s: a percentage 0..100 (5, 5%%, 0.5%%)", key, v);
			return -1;
		}
	} else if (!strcmp(key, "delay") || !strcmp(key, "jitter")) {
		field = key[0] == 'd' ? &imp->delay_us : &imp->jitter_us;
		if (parse_us(v, field)) {
			snprintf(err, errlen, "%s=%s: a time up to 10 s (100, 100us, 2ms, 1s)",
				 key, v);
			return -1;
		}
	} else if (!strcmp(key, "rate")) {
		field = &imp->rate_mbit;
		if (parse_rate(v, field)) {
			snprintf(err, errlen, "rate=%s: Mbit/s, 0 (unlimited) or 1..1000000 "
				 "(100, 100mbit, 1gbit)", v);
			return -1;
		}
	} else if (!strcmp(key, "drop")) {
		errno = 0;
		m = strtoul(v, &end, 10);
		if (*end || errno || m > 1000000) {
			snprintf(err, errlen, "drop=%s: a count of RDMA packets, 0..1000000", v);
			return -1;
		}
		field = &imp->drop;
		*field = (uint32_t)m;
	} else if (!strcmp(key, "mtu")) {
		errno = 0;
		m = strtoul(v, &end, 10);
		if (*end || errno || (m && (m < 68 || m > FABRIC_MAX_FRAME - 18))) {
			snprintf(err, errlen, "mtu=%s: 0 (any) or 68..%d bytes of Ethernet payload",
				 v, FABRIC_MAX_FRAME - 18);
			return -1;
		}
		field = &imp->mtu;
		*field = (uint32_t)m;
	} else {
		snprintf(err, errlen, "unknown impairment '%s' (loss, reorder, dup, corrupt, "
			 "delay, jitter, rate, mtu, drop)", key);
		return -1;
	}
	return (int)((char *)field - (char *)imp);
}
