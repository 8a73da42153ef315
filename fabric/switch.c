// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * qhca-fabric switch core: QEMU stream framing (4-byte big-endian length, then the frame),
 * MAC learning and forwarding, non-blocking ports with bounded output queues, and the
 * event loop.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "fabric.h"

#define QUEUE_FIRST	(256u << 10)	/* an output queue starts this big and doubles */

uint64_t fabric_time_warp_ns;

uint64_t fabric_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000 + ts.tv_nsec + fabric_time_warp_ns;
}

static uint64_t now_ms(void)
{
	return fabric_now_ns() / 1000000;
}

void fabric_init(struct fabric *sw, int nports)
{
	int i;

	memset(sw, 0, sizeof(*sw));
	sw->nports = nports;
	sw->queue_max = FABRIC_QUEUE_DEFAULT;
	sw->stall_ms = FABRIC_STALL_DEFAULT_MS;
	for (i = 0; i < FABRIC_MAX_PORTS; i++) {
		sw->port[i].fd = -1;
		sw->port[i].listen_fd = -1;
		sw->port[i].tcp_listen_fd = -1;
		sw->port[i].wait_out = -1;
	}
	for (i = 0; i < FABRIC_MAC_TABLE; i++)
		sw->macs[i].port = -1;
	sw->ctl_fd = -1;
	for (i = 0; i < FABRIC_CTL_CLIENTS; i++)
		sw->ctl[i].fd = -1;
	sw->start_ns = fabric_now_ns();
	fabric_seed(sw, 1);
}

static void forget_port(struct fabric *sw, int port)
{
	int i;

	for (i = 0; i < FABRIC_MAC_TABLE; i++)
		if (sw->macs[i].port == port)
			sw->macs[i].port = -1;
}

static void disconnect(struct fabric *sw, int port, const char *why)
{
	struct fabric_port *p = &sw->port[port];

	fabric_log("port %d: disconnected (%s); rx %llu tx %llu, dropped in %llu out %llu",
		   port + 1, why, (unsigned long long)p->rx_frames,
		   (unsigned long long)p->tx_frames, (unsigned long long)p->rx_drops,
		   (unsigned long long)p->tx_drops);
	close(p->fd);
	p->fd = -1;
	p->have = 0;
	p->wait_out = -1;
	free(p->out);
	p->out = NULL;
	p->out_head = p->out_len = p->out_cap = 0;
	p->full_since_ms = 0;
	p->drops_unlogged = 0;
	forget_port(sw, port);
	fabric_port_drop_delayed(sw, port);
	if (sw->ib)
		fabric_ib_links(sw);
}

void fabric_close(struct fabric *sw)
{
	int i;

	for (i = 0; i < sw->nports; i++) {
		if (sw->port[i].fd >= 0)
			disconnect(sw, i, "shutdown");
		if (sw->port[i].listen_fd >= 0)
			close(sw->port[i].listen_fd);
		sw->port[i].listen_fd = -1;
		if (sw->port[i].tcp_listen_fd >= 0)
			close(sw->port[i].tcp_listen_fd);
		sw->port[i].tcp_listen_fd = -1;
	}
	fabric_impair_close(sw);
	fabric_control_close(sw);
	fabric_capture_stop(sw);
	fabric_ib_close(sw);
}

int fabric_listen(struct fabric *sw, int port, const char *dir)
{
	struct fabric_port *p = &sw->port[port];
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	char path[4096];
	int n, fd;

	n = snprintf(path, sizeof(path), "%s/port%d.sock", dir, port + 1);
	if (n < 0 || (size_t)n >= sizeof(sa.sun_path) || (size_t)n >= sizeof(p->path)) {
		fabric_log("socket path %s%s is %d bytes long; a unix socket path holds at most "
			   "%zu bytes (sun_path): use a shorter --dir",
			   n >= (int)sizeof(path) ? "(truncated) " : "", path, n,
			   sizeof(sa.sun_path) - 1);
		return -1;
	}
	memcpy(sa.sun_path, path, n + 1);
	memcpy(p->path, path, n + 1);
	unlink(path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) || listen(fd, 1)) {
		fabric_log("cannot listen on %s: %s", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		p->path[0] = 0;
		return -1;
	}
	p->listen_fd = fd;
	return 0;
}

void fabric_attach(struct fabric *sw, int port, int fd)
{
	struct fabric_port *p = &sw->port[port];
	int fl = fcntl(fd, F_GETFL);

	/* Never block on one peer: every write is non-blocking, what is left is queued. */
	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) {
		fabric_log("port %d: cannot make the socket non-blocking: %s", port + 1,
			   strerror(errno));
		close(fd);
		return;
	}
	p->fd = fd;
	p->have = 0;
	p->wait_out = -1;
	p->out_head = p->out_len = 0;
	p->full_since_ms = 0;
	p->drops_unlogged = 0;
	fabric_log("port %d: connected", port + 1);
	if (sw->ib)
		fabric_ib_links(sw);
}

void fabric_accept(struct fabric *sw, int port)
{
	fabric_accept_fd(sw, port, sw->port[port].listen_fd);
}

void fabric_accept_fd(struct fabric *sw, int port, int listen_fd)
{
	int fd = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK), one = 1;

	if (fd < 0) {
		if (errno != EAGAIN && errno != EINTR)
			fabric_log("port %d: accept: %s", port + 1, strerror(errno));
		return;
	}
	if (listen_fd == sw->port[port].tcp_listen_fd)
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	fabric_attach(sw, port, fd);
}

/* "HOST:PORT" into a socket address; 0, or -1 with the reason logged. */
static int inet_addr_of(const char *hostport, int passive, struct addrinfo **res)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM,
				  .ai_flags = passive ? AI_PASSIVE : 0 };
	char host[256];
	const char *colon = strrchr(hostport, ':');
	size_t hl = colon ? (size_t)(colon - hostport) : 0;
	int r;

	if (!colon || !hl || hl >= sizeof(host) || !colon[1]) {
		fabric_log("'%s': expected HOST:PORT", hostport);
		return -1;
	}
	memcpy(host, hostport, hl);
	host[hl] = 0;
	if (host[0] == '[' && host[hl - 1] == ']') {	/* [v6 address] */
		memmove(host, host + 1, hl - 2);
		host[hl - 2] = 0;
	}
	r = getaddrinfo(host, colon + 1, &hints, res);
	if (r) {
		fabric_log("'%s': %s", hostport, gai_strerror(r));
		return -1;
	}
	return 0;
}

int fabric_listen_tcp(struct fabric *sw, int port, const char *host, unsigned int tcp_port)
{
	char hp[300];
	struct addrinfo *ai;
	int fd, one = 1;

	snprintf(hp, sizeof(hp), "%s:%u", host, tcp_port);
	if (inet_addr_of(hp, 1, &ai))
		return -1;
	fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd >= 0)
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (fd < 0 || bind(fd, ai->ai_addr, ai->ai_addrlen) || listen(fd, 1)) {
		fabric_log("port %d: cannot listen on TCP %s: %s", port + 1, hp, strerror(errno));
		if (fd >= 0)
			close(fd);
		freeaddrinfo(ai);
		return -1;
	}
	freeaddrinfo(ai);
	sw->port[port].tcp_listen_fd = fd;
	return 0;
}

int fabric_set_trunk(struct fabric *sw, int port, const char *addr)
{
	struct fabric_port *p = &sw->port[port];
	struct addrinfo *ai;

	if (strlen(addr) >= sizeof(p->trunk)) {
		fabric_log("trunk address %s is too long", addr);
		return -1;
	}
	if (!strncmp(addr, "tcp:", 4)) {
		if (inet_addr_of(addr + 4, 0, &ai))
			return -1;
		freeaddrinfo(ai);
	} else if (strncmp(addr, "unix:", 5) || !addr[5] ||
		   strlen(addr + 5) >= sizeof(((struct sockaddr_un *)0)->sun_path)) {
		fabric_log("trunk address '%s': expected unix:PATH or tcp:HOST:PORT", addr);
		return -1;
	}
	strcpy(p->trunk, addr);
	return 0;
}

/* A trunk port connects out to the other switch, again a second after it went away. */
static void trunk_connect(struct fabric *sw, int port)
{
	struct fabric_port *p = &sw->port[port];
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct addrinfo *ai = NULL;
	int fd, one = 1, ok;

	p->trunk_retry_ms = now_ms() + 1000;
	if (!strncmp(p->trunk, "tcp:", 4)) {
		if (inet_addr_of(p->trunk + 4, 0, &ai))
			return;
		fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
		ok = fd >= 0 && !connect(fd, ai->ai_addr, ai->ai_addrlen);
		if (ok)
			setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		freeaddrinfo(ai);
	} else {
		strcpy(sa.sun_path, p->trunk + 5);
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		ok = fd >= 0 && !connect(fd, (struct sockaddr *)&sa, sizeof(sa));
	}
	if (!ok) {
		if (p->trunk_fails++ % 30 == 0)
			fabric_log("port %d: trunk to %s: %s (retrying)", port + 1, p->trunk,
				   strerror(errno));
		if (fd >= 0)
			close(fd);
		return;
	}
	p->trunk_fails = 0;
	fabric_log("port %d: trunk to %s", port + 1, p->trunk);
	fabric_attach(sw, port, fd);
}

static void learn(struct fabric *sw, const uint8_t *mac, int port)
{
	int i, free_slot = -1;

	if (mac[0] & 1)
		return;		/* never learn a group address */
	for (i = 0; i < FABRIC_MAC_TABLE; i++) {
		if (sw->macs[i].port >= 0 && !memcmp(sw->macs[i].mac, mac, 6)) {
			sw->macs[i].port = port;
			return;
		}
		if (sw->macs[i].port < 0 && free_slot < 0)
			free_slot = i;
	}
	if (free_slot < 0)
		free_slot = mac[5] % FABRIC_MAC_TABLE;	/* table full: evict one */
	memcpy(sw->macs[free_slot].mac, mac, 6);
	sw->macs[free_slot].port = port;
}

static int lookup(const struct fabric *sw, const uint8_t *mac)
{
	int i;

	for (i = 0; i < FABRIC_MAC_TABLE; i++)
		if (sw->macs[i].port >= 0 && !memcmp(sw->macs[i].mac, mac, 6))
			return sw->macs[i].port;
	return -1;
}

/* Bytes written to @p's socket, 0 if it takes none now, -1 (errno) if the peer is gone. */
static ssize_t write_some(struct fabric_port *p, const struct iovec *iov, int n)
{
	struct msghdr msg = { .msg_iov = (struct iovec *)iov, .msg_iovlen = n };
	ssize_t r;

	do {
		r = sendmsg(p->fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
	} while (r < 0 && errno == EINTR);
	if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
		return 0;
	if (r > 0)
		p->tx_writes++;
	return r;
}

size_t fabric_queue_limit(const struct fabric *sw)
{
	return sw->queue_max < FABRIC_QUEUE_MIN ? FABRIC_QUEUE_MIN : sw->queue_max;
}

/* Queued and delayed bytes count together; a delayed frame with its bookkeeping, which is
 * also the most a frame can cost (the queue takes 4 + len). */
bool fabric_has_room(const struct fabric *sw, int out, size_t len)
{
	const struct fabric_port *o = &sw->port[out];

	return (!o->out_len && !o->delayed_bytes) ||
	       o->out_len + o->delayed_bytes + FABRIC_DELAYED_COST(len) <= fabric_queue_limit(sw);
}

/* Make room for @need more bytes at the queue's tail, growing it up to queue_max. */
static bool queue_room(struct fabric *sw, struct fabric_port *p, size_t need)
{
	size_t max = fabric_queue_limit(sw);
	size_t cap;
	uint8_t *n;

	if (p->out_len + need > max)
		return false;
	if (p->out_head + p->out_len + need <= p->out_cap)
		return true;
	if (p->out_len + need <= p->out_cap) {
		memmove(p->out, p->out + p->out_head, p->out_len);
		p->out_head = 0;
		return true;
	}
	cap = p->out_cap ? p->out_cap : QUEUE_FIRST;
	while (cap < p->out_len + need)
		cap *= 2;
	if (cap > max)
		cap = max;
	n = malloc(cap);
	if (!n)
		return false;
	if (p->out_len)
		memcpy(n, p->out + p->out_head, p->out_len);
	free(p->out);
	p->out = n;
	p->out_cap = cap;
	p->out_head = 0;
	return true;
}

void fabric_queue_drop(struct fabric *sw, int out)
{
	struct fabric_port *p = &sw->port[out];
	uint64_t now = now_ms();

	p->tx_drops++;
	p->drops_unlogged++;
	/* The stall clock runs while the peer leaves bytes unread, not while the delay line
	 * alone is full: that empties by itself. */
	if (!p->full_since_ms && p->out_len)
		p->full_since_ms = now;
	if (!p->drop_log_ms || now - p->drop_log_ms >= FABRIC_DROP_LOG_MS) {
		fabric_log("port %d: output queue full (%zu bytes queued, %zu delayed): dropped "
			   "%llu frames (%llu in all)", out + 1, p->out_len, p->delayed_bytes,
			   (unsigned long long)p->drops_unlogged, (unsigned long long)p->tx_drops);
		p->drop_log_ms = now;
		p->drops_unlogged = 0;
	}
}

/* Send one frame to @out: straight to the socket if its queue is empty and no batch is
 * being forwarded, else queued. */
void fabric_send(struct fabric *sw, int out, const uint8_t *frame, size_t len)
{
	struct fabric_port *p = &sw->port[out];
	uint8_t hdr[4] = { len >> 24, len >> 16, len >> 8, len };
	struct iovec iov[2] = { { hdr, 4 }, { (void *)frame, len } };
	size_t done = 0;
	ssize_t n;

	if (p->fd < 0)
		return;
	if (!p->out_len && !sw->corked) {
		n = write_some(p, iov, 2);
		if (n < 0) {
			disconnect(sw, out, strerror(errno));
			return;
		}
		done = n;
		if (done)
			p->full_since_ms = 0;
		if (done == 4 + len) {
			p->tx_frames++;
			return;
		}
		if (done)
			p->tx_partial++;
	}
	/* Queue the rest of the frame; a frame is queued whole or not at all. */
	if (!queue_room(sw, p, 4 + len - done)) {
		if (done)	/* cannot happen: an empty queue holds one frame */
			disconnect(sw, out, "output queue");
		else
			fabric_queue_drop(sw, out);
		return;
	}
	if (done < 4) {
		memcpy(p->out + p->out_head + p->out_len, hdr + done, 4 - done);
		p->out_len += 4 - done;
		done = 4;
	}
	memcpy(p->out + p->out_head + p->out_len, frame + (done - 4), len - (done - 4));
	p->out_len += len - (done - 4);
	p->tx_frames++;		/* counted when accepted: the queue delivers it whole */
}

void fabric_flush(struct fabric *sw, int port)
{
	struct fabric_port *p = &sw->port[port];
	struct iovec iov;
	ssize_t n;

	while (p->fd >= 0 && p->out_len) {
		iov.iov_base = p->out + p->out_head;
		iov.iov_len = p->out_len;
		n = write_some(p, &iov, 1);
		if (n < 0) {
			disconnect(sw, port, strerror(errno));
			return;
		}
		if (!n)
			return;
		if ((size_t)n < p->out_len)
			p->tx_partial++;
		p->out_head += n;
		p->out_len -= n;
		p->full_since_ms = 0;	/* the peer reads */
	}
	p->out_head = 0;
}

void fabric_tick(struct fabric *sw)
{
	uint64_t now = now_ms();
	char why[96];
	int i;

	for (i = 0; i < sw->nports; i++) {
		struct fabric_port *p = &sw->port[i];

		if (p->fd < 0 && p->trunk[0] && now >= p->trunk_retry_ms)
			trunk_connect(sw, i);
		if (p->fd < 0 || !p->full_since_ms || !sw->stall_ms ||
		    now - p->full_since_ms < sw->stall_ms)
			continue;
		snprintf(why, sizeof(why), "peer read nothing for %u ms with its queue full",
			 sw->stall_ms);
		disconnect(sw, i, why);
	}
}

void fabric_forward(struct fabric *sw, int in, const uint8_t *frame, size_t len)
{
	int out, i;

	if (sw->ib) {
		fabric_ib_forward(sw, in, frame, len);
		return;
	}
	if (len < 14) {
		sw->port[in].rx_drops++;
		return;
	}
	learn(sw, frame + 6, in);
	out = (frame[0] & 1) ? -1 : lookup(sw, frame);
	if (out == in) {
		sw->port[in].rx_drops++;
		return;
	}
	if (sw->impaired || sw->dl_n || sw->nheld || sw->cap) {
		fabric_forward_impaired(sw, in, out, frame, len);
		return;
	}
	if (out >= 0) {
		fabric_send(sw, out, frame, len);
		return;
	}
	for (i = 0; i < sw->nports; i++)
		if (i != in)
			fabric_send(sw, i, frame, len);
}

/*
 * Must the unicast frame from @in wait for its destination's queue? Then the source port
 * pauses: its frame stays in its buffer and it is not read until the queue has room.
 */
static bool must_wait(struct fabric *sw, int in, const uint8_t *frame, size_t len)
{
	struct fabric_port *o;
	int out;

	if (sw->ib)
		out = fabric_ib_route(sw, in, frame, len);
	else if (len < 14 || (frame[0] & 1))
		return false;
	else
		out = lookup(sw, frame);
	if (out < 0 || out == in || sw->port[out].fd < 0 || sw->port[out].link_down)
		return false;
	o = &sw->port[out];
	/* Frames in the delay line count: a slow or long link pauses its senders. The frame
	 * that passes here finds room on its way (impair.c asks the same; a duplicate the
	 * impairments make of it may not). */
	if (fabric_has_room(sw, out, len))
		return false;
	if (sw->port[in].wait_out != out)
		sw->port[in].rx_paused++;
	sw->port[in].wait_out = out;
	if (!o->full_since_ms && o->out_len)
		o->full_since_ms = now_ms();	/* the stall clock of the destination runs */
	return true;
}

/* Forward the complete frames in @port's buffer until one must wait; the bytes used. */
static size_t forward_batch(struct fabric *sw, int port)
{
	struct fabric_port *p = &sw->port[port];
	size_t off = 0;

	p->wait_out = -1;
	while (p->have - off >= 4) {
		const uint8_t *b = p->buf + off;
		size_t len = (size_t)b[0] << 24 | b[1] << 16 | b[2] << 8 | b[3];

		if (len > FABRIC_MAX_FRAME) {
			disconnect(sw, port, "oversized frame");
			return 0;
		}
		if (p->have - off < 4 + len)
			break;
		if (must_wait(sw, port, b + 4, len))
			break;
		p->rx_frames++;
		fabric_forward(sw, port, b + 4, len);
		if (p->fd < 0)
			return 0;	/* disconnected: nothing is left */
		off += 4 + len;
	}
	return off;
}

/* Write what the batch queued, to every port that has something. */
static void flush_all(struct fabric *sw)
{
	int i;

	for (i = 0; i < sw->nports; i++)
		if (sw->port[i].fd >= 0 && sw->port[i].out_len)
			fabric_flush(sw, i);
}

/* Forward the complete frames in @port's buffer, until one must wait; then write them. */
static void process_input(struct fabric *sw, int port)
{
	struct fabric_port *p = &sw->port[port];
	size_t off;

	sw->corked++;
	off = forward_batch(sw, port);
	sw->corked--;
	if (p->fd >= 0) {
		memmove(p->buf, p->buf + off, p->have - off);
		p->have -= off;
	}
	if (!sw->corked)
		flush_all(sw);
}

void fabric_read(struct fabric *sw, int port)
{
	struct fabric_port *p = &sw->port[port];
	ssize_t n;

	if (p->wait_out >= 0)
		return;		/* paused: the buffered frame goes first */
	n = recv(p->fd, p->buf + p->have, sizeof(p->buf) - p->have, MSG_DONTWAIT);
	if (n == 0) {
		disconnect(sw, port, "peer closed");
		return;
	}
	if (n < 0) {
		if (errno != EAGAIN && errno != EINTR)
			disconnect(sw, port, strerror(errno));
		return;
	}
	p->have += n;
	process_input(sw, port);
}

/* Let paused ports go on whose destination has room again or went away. */
static void resume_waiting(struct fabric *sw)
{
	int i;

	for (i = 0; i < sw->nports; i++) {
		struct fabric_port *p = &sw->port[i];

		if (p->fd >= 0 && p->wait_out >= 0)
			process_input(sw, i);
	}
}

/* Deliver delayed frames and run timed commands that are due; ns until the next of them. */
static uint64_t run_due(struct fabric *sw)
{
	uint64_t now, a = UINT64_MAX, b;

	if (!sw->dl_n && !sw->nheld && !sw->timed)
		return UINT64_MAX;
	now = fabric_now_ns();
	b = fabric_run_timed(sw, now);
	if (sw->dl_n || sw->nheld) {
		sw->corked++;
		a = fabric_release_due(sw, now);
		sw->corked--;
		flush_all(sw);
	}
	return a < b ? a : b;
}

int fabric_poll(struct fabric *sw, int timeout_ms)
{
	struct pollfd pfd[2 * FABRIC_MAX_PORTS + 1 + FABRIC_CTL_CLIENTS];
	uint64_t next = run_due(sw), wait_ns = (uint64_t)timeout_ms * 1000000;
	struct timespec ts;
	int i, n = sw->nports, nctl;

	for (i = 0; i < sw->nports; i++) {
		struct fabric_port *p = &sw->port[i];

		pfd[i].fd = p->fd >= 0 ? p->fd : p->listen_fd;
		pfd[i].events = (p->fd >= 0 && p->wait_out >= 0 ? 0 : POLLIN) |
				(p->fd >= 0 && p->out_len ? POLLOUT : 0);
		pfd[i].revents = 0;
		/* The same port over TCP, while nobody is connected. */
		pfd[n + i].fd = p->fd < 0 ? p->tcp_listen_fd : -1;
		pfd[n + i].events = POLLIN;
		pfd[n + i].revents = 0;
	}
	nctl = fabric_control_pollfds(sw, pfd + 2 * n);
	if (timeout_ms < 0 || next < wait_ns)
		wait_ns = next;
	if (fabric_control_pending(sw))
		wait_ns = 0;	/* a control client's commands wait for their turn */
	ts.tv_sec = (time_t)(wait_ns / 1000000000);
	ts.tv_nsec = (long)(wait_ns % 1000000000);
	if (ppoll(pfd, 2 * n + nctl, wait_ns == UINT64_MAX ? NULL : &ts, NULL) < 0) {
		if (errno == EINTR)
			return 0;
		fabric_log("poll: %s", strerror(errno));
		return -1;
	}
	for (i = 0; i < sw->nports; i++) {
		short ev = pfd[i].revents;

		if (pfd[n + i].revents && sw->port[i].fd < 0)
			fabric_accept_fd(sw, i, pfd[n + i].fd);
		if (!ev)
			continue;
		if (sw->port[i].fd < 0) {
			if (pfd[i].fd >= 0)
				fabric_accept(sw, i);
			continue;
		}
		/* An fd that another port's forwarding disconnected is skipped. */
		if (pfd[i].fd != sw->port[i].fd)
			continue;
		/* A paused port is not read, but a peer that went away ends it now. */
		if (sw->port[i].wait_out >= 0 && (ev & (POLLHUP | POLLERR))) {
			disconnect(sw, i, "peer closed");
			continue;
		}
		if (ev & POLLOUT)
			fabric_flush(sw, i);
		if (sw->port[i].fd >= 0 && (ev & (POLLIN | POLLHUP | POLLERR)))
			fabric_read(sw, i);
	}
	fabric_control_handle(sw, pfd + 2 * n, nctl);
	fabric_tick(sw);
	resume_waiting(sw);
	run_due(sw);
	fabric_capture_flush(sw);
	return 0;
}
