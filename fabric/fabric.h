/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * qhca-fabric switch core: ports, framing, MAC learning, forwarding and the event loop.
 * Separate from main() so that unit tests can drive it over socketpairs.
 *
 * Every port is non-blocking. A port is read in batches of up to FABRIC_READ_BATCH bytes
 * (many frames a system call); the frames of one batch are queued for their destinations
 * and each destination gets them in one write when the batch is done, so a burst costs the
 * receiving QEMU one wake-up, not one a frame. What a socket does not take stays in the
 * port's bounded output queue; only whole frames (the 4-byte length and the frame) are
 * queued, so a partial write never splits the stream's framing. The fabric is lossless for unicast, as RoCE networks are with pause frames: a
 * frame that does not fit in its destination's queue waits in its source port, which is
 * not read until the destination drained (the sender's QEMU then sees a full socket and
 * its device holds back). Flooded frames (broadcast, unknown destination) that do not fit
 * are dropped and counted (tx_drops). A port whose queue has been full with nothing written
 * for stall_ms is disconnected (QEMU's stream netdev reconnects with reconnect-ms), which
 * also releases the ports that waited for it: one port that stops reading holds up only
 * the ports sending to it, and those at most stall_ms.
 */
#ifndef QHCA_FABRIC_H
#define QHCA_FABRIC_H

#include <stddef.h>
#include <stdint.h>
#include <sys/un.h>

#define FABRIC_MAX_PORTS	64
#define FABRIC_MAX_FRAME	(9216 + 18)	/* jumbo payload plus Ethernet header and FCS */
#define FABRIC_MAC_TABLE	256
#define FABRIC_READ_BATCH	(64u << 10)	/* bytes read from a port at once, at most */
#define FABRIC_PATH_MAX		sizeof(((struct sockaddr_un *)0)->sun_path)

#define FABRIC_QUEUE_DEFAULT	(4u << 20)	/* bytes queued per port at most */
#define FABRIC_QUEUE_MIN	(4 + FABRIC_MAX_FRAME)
#define FABRIC_STALL_DEFAULT_MS	10000		/* full and unread this long: disconnect */
#define FABRIC_DROP_LOG_MS	5000		/* one drop report per port per interval */

struct fabric_port {
	char path[FABRIC_PATH_MAX];
	int listen_fd;
	int fd;			/* connected QEMU, or -1 */
	uint8_t buf[FABRIC_READ_BATCH + 4 + FABRIC_MAX_FRAME];
	size_t have;		/* bytes received and not yet forwarded */
	int wait_out;		/* port whose full queue the frame in buf waits for, or -1 */
	/* Output queue: framed bytes not yet written, at out + out_head, out_len long. */
	uint8_t *out;
	size_t out_head, out_len, out_cap;
	uint64_t full_since_ms;	/* first drop since the last byte written; 0: none */
	uint64_t drop_log_ms;	/* when drops were last reported */
	uint64_t drops_unlogged;
	/* Counters: frames received and sent, frames refused on input (runts, reflections),
	 * frames dropped because the output queue was full, writes the socket took in part. */
	uint64_t rx_frames, tx_frames, rx_drops, tx_drops, tx_partial;
	uint64_t tx_writes;	/* system calls that wrote to the socket: frames / batch */
	uint64_t rx_paused;	/* times this port's input waited for a full destination */
};

struct fabric_mac {
	uint8_t mac[6];
	int port;		/* -1: free */
};

struct fabric {
	int nports;
	size_t queue_max;	/* output queue bytes per port (FABRIC_QUEUE_DEFAULT) */
	unsigned int stall_ms;	/* 0: never disconnect a port that stops reading */
	int corked;		/* forwarding a batch: frames are queued, written after it */
	struct fabric_port port[FABRIC_MAX_PORTS];
	struct fabric_mac macs[FABRIC_MAC_TABLE];
};

void fabric_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

void fabric_init(struct fabric *sw, int nports);
void fabric_close(struct fabric *sw);
/*
 * Create @dir/port<N>.sock for @port and listen on it. A path that does not fit in
 * sun_path is refused (logged with the path and the limit), never truncated. 0 or -1.
 */
int fabric_listen(struct fabric *sw, int port, const char *dir);
void fabric_accept(struct fabric *sw, int port);
/* Attach an already connected socket to @port (tests use socketpairs); made non-blocking. */
void fabric_attach(struct fabric *sw, int port, int fd);
/* Read what is available on @port and forward every complete frame. */
void fabric_read(struct fabric *sw, int port);
/* Forward one frame that arrived on @in. */
void fabric_forward(struct fabric *sw, int in, const uint8_t *frame, size_t len);
/* Write what @port's socket takes of its output queue. */
void fabric_flush(struct fabric *sw, int port);
/* Disconnect ports that stopped reading (see stall_ms). */
void fabric_tick(struct fabric *sw);
/* Wait up to @timeout_ms for events on every port and handle them. -1 on a poll error. */
int fabric_poll(struct fabric *sw, int timeout_ms);

#endif /* QHCA_FABRIC_H */
