// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * qhca-fabric switch core: QEMU stream framing (4-byte big-endian length, then the frame),
 * MAC learning and forwarding.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fabric.h"

void fabric_init(struct fabric *sw, int nports)
{
	int i;

	memset(sw, 0, sizeof(*sw));
	sw->nports = nports;
	for (i = 0; i < FABRIC_MAX_PORTS; i++) {
		sw->port[i].fd = -1;
		sw->port[i].listen_fd = -1;
	}
	for (i = 0; i < FABRIC_MAC_TABLE; i++)
		sw->macs[i].port = -1;
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

	fabric_log("port %d: disconnected (%s); rx %llu tx %llu dropped %llu", port + 1, why,
		   (unsigned long long)p->rx_frames, (unsigned long long)p->tx_frames,
		   (unsigned long long)p->drops);
	close(p->fd);
	p->fd = -1;
	p->have = 0;
	forget_port(sw, port);
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
	}
}

void fabric_attach(struct fabric *sw, int port, int fd)
{
	sw->port[port].fd = fd;
	sw->port[port].have = 0;
	fabric_log("port %d: connected", port + 1);
}

void fabric_accept(struct fabric *sw, int port)
{
	int fd = accept4(sw->port[port].listen_fd, NULL, NULL, SOCK_CLOEXEC);

	if (fd < 0) {
		if (errno != EAGAIN && errno != EINTR)
			fabric_log("port %d: accept: %s", port + 1, strerror(errno));
		return;
	}
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

/* Write one framed packet; a port that cannot take it whole is disconnected. */
static void send_frame(struct fabric *sw, int out, const uint8_t *frame, size_t len)
{
	struct fabric_port *p = &sw->port[out];
	uint8_t hdr[4] = { len >> 24, len >> 16, len >> 8, len };
	const uint8_t *parts[2] = { hdr, frame };
	size_t sizes[2] = { 4, len };
	int k;

	if (p->fd < 0)
		return;
	for (k = 0; k < 2; k++) {
		size_t off = 0;

		while (off < sizes[k]) {
			ssize_t n = send(p->fd, parts[k] + off, sizes[k] - off, MSG_NOSIGNAL);

			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0) {
				disconnect(sw, out, strerror(errno));
				return;
			}
			off += n;
		}
	}
	p->tx_frames++;
}

void fabric_forward(struct fabric *sw, int in, const uint8_t *frame, size_t len)
{
	int out, i;

	if (len < 14) {
		sw->port[in].drops++;
		return;
	}
	learn(sw, frame + 6, in);
	out = (frame[0] & 1) ? -1 : lookup(sw, frame);
	if (out == in) {
		sw->port[in].drops++;
		return;
	}
	if (out >= 0) {
		send_frame(sw, out, frame, len);
		return;
	}
	for (i = 0; i < sw->nports; i++)
		if (i != in)
			send_frame(sw, i, frame, len);
}

void fabric_read(struct fabric *sw, int port)
{
	struct fabric_port *p = &sw->port[port];
	ssize_t n;

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
	while (p->have >= 4) {
		size_t len = (size_t)p->buf[0] << 24 | p->buf[1] << 16 | p->buf[2] << 8 | p->buf[3];

		if (len > FABRIC_MAX_FRAME) {
			disconnect(sw, port, "oversized frame");
			return;
		}
		if (p->have < 4 + len)
			break;
		p->rx_frames++;
		fabric_forward(sw, port, p->buf + 4, len);
		if (p->fd < 0)
			return;
		memmove(p->buf, p->buf + 4 + len, p->have - 4 - len);
		p->have -= 4 + len;
	}
}
