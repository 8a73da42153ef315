/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * qhca-fabric switch core: ports, framing, MAC learning and forwarding. Separate from
 * main() so that unit tests can drive it over socketpairs.
 */
#ifndef QHCA_FABRIC_H
#define QHCA_FABRIC_H

#include <stddef.h>
#include <stdint.h>

#define FABRIC_MAX_PORTS	64
#define FABRIC_MAX_FRAME	(9216 + 18)	/* jumbo payload plus Ethernet header and FCS */
#define FABRIC_MAC_TABLE	256

struct fabric_port {
	char path[108];
	int listen_fd;
	int fd;			/* connected QEMU, or -1 */
	uint8_t buf[4 + FABRIC_MAX_FRAME];
	size_t have;		/* bytes of the current length+frame received */
	uint64_t rx_frames, tx_frames, drops;
};

struct fabric_mac {
	uint8_t mac[6];
	int port;		/* -1: free */
};

struct fabric {
	int nports;
	struct fabric_port port[FABRIC_MAX_PORTS];
	struct fabric_mac macs[FABRIC_MAC_TABLE];
};

void fabric_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

void fabric_init(struct fabric *sw, int nports);
void fabric_close(struct fabric *sw);
void fabric_accept(struct fabric *sw, int port);
/* Attach an already connected socket to @port (tests use socketpairs). */
void fabric_attach(struct fabric *sw, int port, int fd);
/* Read what is available on @port and forward every complete frame. */
void fabric_read(struct fabric *sw, int port);
/* Forward one frame that arrived on @in. */
void fabric_forward(struct fabric *sw, int in, const uint8_t *frame, size_t len);

#endif /* QHCA_FABRIC_H */
