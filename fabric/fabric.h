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
 * its device holds back). Flooded frames (broadcast, unknown destination, IB multicast)
 * that do not fit are dropped and counted (tx_drops). Frames in the delay line (impair.c)
 * count in their destination's queue with their bookkeeping (FABRIC_DELAYED_COST), so what
 * the fabric holds for a port, queued and delayed together, stays within queue_max (and
 * one frame more when it was empty). A port whose queue has been full with nothing written
 * for stall_ms is disconnected (QEMU's stream netdev reconnects with reconnect-ms), which
 * also releases the ports that waited for it: one port that stops reading holds up only
 * the ports sending to it, and those at most stall_ms.
 */
#ifndef QHCA_FABRIC_H
#define QHCA_FABRIC_H

#include <stddef.h>
#include <stdint.h>
#include <poll.h>
#include <stdbool.h>
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

/* Impairments of one direction of a port (FABRIC_IN: frames the port's peer sends into the
 * fabric; FABRIC_OUT: frames the fabric delivers to it). Probabilities in parts per million. */
enum { FABRIC_IN, FABRIC_OUT };
#define FABRIC_PPM		1000000u

struct fabric_impair {
	uint32_t loss, reorder, dup, corrupt;	/* ppm */
	uint32_t delay_us, jitter_us;		/* delay, and +- jitter around it */
	uint32_t rate_mbit;			/* serialisation rate; 0: unlimited */
	uint32_t mtu;				/* largest Ethernet payload passed; 0: any */
	uint32_t drop;				/* the next this many RDMA packets (ACKs
						 * aside) are lost; counts down */
};

struct fabric_dir_stats {
	uint64_t frames;	/* frames that met this direction's impairments */
	uint64_t dropped;	/* by loss */
	uint64_t reordered, duplicated, corrupted;
	uint64_t delayed;	/* held back by delay, jitter or rate */
};

/* A frame waiting in the delay line, or held back to be reordered. */
struct fabric_delayed {
	uint64_t due_ns;
	uint64_t seq;		/* order of arrival in the delay line: equal due times FIFO */
	int out;
	size_t len;
	uint8_t frame[];
};

#define FABRIC_REORDER_HOLD_NS	2000000ull	/* a held frame goes alone after this */
/* What a frame of @len bytes in the delay line counts in its destination's queue: the
 * frame, its bookkeeping and its slot in the heap. */
#define FABRIC_DELAYED_COST(len)	\
	(sizeof(struct fabric_delayed) + sizeof(struct fabric_delayed *) + (len))

struct fabric_port {
	char path[FABRIC_PATH_MAX];
	int listen_fd;
	int tcp_listen_fd;	/* the same port over TCP (--tcp), or -1 */
	char trunk[FABRIC_PATH_MAX];	/* connect out to this address (--trunk), or "" */
	uint64_t trunk_retry_ms;	/* next connect attempt of a trunk */
	unsigned int trunk_fails;	/* attempts that failed in a row (logged now and then) */
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
	/* The instrument: impairments and their counters per direction, the link state. */
	struct fabric_impair imp[2];
	struct fabric_dir_stats st[2];
	uint64_t rng[2];		/* random stream per direction (seeded) */
	uint64_t busy_until_ns[2];	/* rate: the direction serialises until then */
	uint64_t last_due_ns;		/* latest delivery scheduled to this port (order) */
	size_t delayed_bytes;		/* in the delay line for this port, held included
					 * (FABRIC_DELAYED_COST of each frame) */
	struct fabric_delayed *held;	/* a frame held back to be reordered */
	int link_down;
	uint64_t link_drops, mtu_drops;
};

struct fabric_mac {
	uint8_t mac[6];
	int port;		/* -1: free */
};

struct fabric_timed {		/* a command to run later (at, script) */
	struct fabric_timed *next;
	uint64_t due_ns;
	int depth;		/* the scripts it came from, nested (0: the control socket's) */
	char cmd[];
};

#define FABRIC_CTL_CLIENTS	8
#define FABRIC_CTL_LINE		4096
/* Bounds of timed events: a script may load scripts (script FILE as an event) this many
 * levels deep, the one given on the control socket included; one command may read this
 * many scripts, this many bytes of them, and check this many of their events, nested ones
 * included; at most FABRIC_TIMED_MAX events with FABRIC_TIMED_BYTES of commands are
 * pending. */
#define FABRIC_SCRIPT_DEPTH	4
#define FABRIC_SCRIPT_LOADS_MAX	4096
#define FABRIC_SCRIPT_READ_MAX	(4u << 20)
#define FABRIC_SCRIPT_CHECK_MAX	(2 * FABRIC_TIMED_MAX)
#define FABRIC_TIMED_MAX	16384
#define FABRIC_TIMED_BYTES	(8u << 20)

/*
 * A control client is never waited on: its commands are run a few at a time
 * (FABRIC_CTL_ROUND_CMDS, FABRIC_CTL_ROUND_NS) per poll round, the rest stay in its input
 * buffer; its replies go into an output buffer written when the socket takes them. While
 * FABRIC_CTL_OUT_PAUSE bytes of replies are unread its commands wait; past
 * FABRIC_CTL_OUT_MAX, or with replies unread and nothing taken for FABRIC_CTL_STALL_MS, it
 * is disconnected.
 */
#define FABRIC_CTL_ROUND_CMDS	16
#define FABRIC_CTL_ROUND_NS	1000000ull
#define FABRIC_CTL_OUT_PAUSE	(64u << 10)
#define FABRIC_CTL_OUT_MAX	(1u << 20)
#define FABRIC_CTL_STALL_MS	10000

struct fabric_ctl_client {
	int fd;			/* -1: free */
	bool eof;		/* it sent all it will: closed once its replies are out */
	size_t have;		/* input not yet run, at buf */
	char buf[FABRIC_CTL_LINE];
	char *out;		/* replies not yet written, out_len at out + out_head */
	size_t out_head, out_len, out_cap;
	uint64_t out_since_ns;	/* replies waiting and none taken since then */
};

struct fabric_capture;
struct fabric_ib;

struct fabric {
	int nports;
	size_t queue_max;	/* output queue bytes per port (FABRIC_QUEUE_DEFAULT) */
	unsigned int stall_ms;	/* 0: never disconnect a port that stops reading */
	int corked;		/* forwarding a batch: frames are queued, written after it */
	struct fabric_port port[FABRIC_MAX_PORTS];
	struct fabric_mac macs[FABRIC_MAC_TABLE];
	/* The instrument (impair.c, control.c, capture.c). */
	int impaired;		/* some impairment or link down is set: take the slow path */
	uint64_t seed;
	uint64_t start_ns;
	/* The delay line: a binary min-heap by (due_ns, seq), dl_n frames in dl_heap[]
	 * (dl_cap slots); a frame goes in and the first comes out in O(log n) steps. */
	struct fabric_delayed **dl_heap;
	size_t dl_n, dl_cap;
	uint64_t dl_seq;				/* the next frame's seq */
	uint64_t dl_steps;				/* its work: entries moved or compared */
	int nheld;					/* ports holding a frame back */
	struct fabric_timed *timed;			/* by due time */
	unsigned int ntimed;				/* pending events, */
	size_t timed_bytes;				/* their size in all */
	int cmd_depth;					/* of the command running */
	unsigned int cmd_scripts;			/* scripts it read so far, */
	size_t cmd_script_bytes;			/* their bytes, */
	unsigned int cmd_script_events;			/* events of them checked */
	int ctl_fd;					/* control socket, or -1 */
	char ctl_path[FABRIC_PATH_MAX];
	struct fabric_ctl_client ctl[FABRIC_CTL_CLIENTS];
	struct fabric_capture *cap;
	struct fabric_ib *ib;		/* an InfiniBand switch (--ib, ibswitch.c), or NULL */
};

void fabric_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* A string that grows as text is added (control.c): the control socket's replies. */
struct fabric_sbuf {
	char *p;
	size_t len, cap;
	bool failed;		/* out of memory: the text is incomplete */
};
void fabric_sb_printf(struct fabric_sbuf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

void fabric_init(struct fabric *sw, int nports);
void fabric_close(struct fabric *sw);
/*
 * Create @dir/port<N>.sock for @port and listen on it. A path that does not fit in
 * sun_path is refused (logged with the path and the limit), never truncated. 0 or -1.
 */
int fabric_listen(struct fabric *sw, int port, const char *dir);
void fabric_accept(struct fabric *sw, int port);
void fabric_accept_fd(struct fabric *sw, int port, int listen_fd);
/* Port @port also listens on TCP @host:@tcp_port (QEMU -netdev stream,addr.type=inet). */
int fabric_listen_tcp(struct fabric *sw, int port, const char *host, unsigned int tcp_port);
/* Port @port connects out to another switch's port: "unix:PATH" or "tcp:HOST:PORT". */
int fabric_set_trunk(struct fabric *sw, int port, const char *addr);
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
/* Send one frame to @out now (queued if the socket does not take it). */
void fabric_send(struct fabric *sw, int out, const uint8_t *frame, size_t len);
/* The bytes a port's queue and delay line may hold together (queue_max, at least a frame). */
size_t fabric_queue_limit(const struct fabric *sw);
/* Can @out take a frame of @len bytes, queued or delayed? An empty port takes any one. */
bool fabric_has_room(const struct fabric *sw, int out, size_t len);
/* A frame for @out dropped because its queue is full: counted (tx_drops) and logged. */
void fabric_queue_drop(struct fabric *sw, int out);
uint64_t fabric_now_ns(void);
/* Added to the monotonic clock of fabric_now_ns: 0, but a fuzzer lets time pass at once. */
extern uint64_t fabric_time_warp_ns;
/* The IB switch's clock for its M_Key lease (ibswitch.c): fabric_now_ns, a test's own. */
extern uint64_t (*fabric_ib_clock)(void);

/* impair.c: the impairments on the way of a frame from @in to @out (-1: flood), the delay
 * line and reordering. */
void fabric_seed(struct fabric *sw, uint64_t seed);
void fabric_impair_update(struct fabric *sw);	/* after a change: set sw->impaired */
void fabric_forward_impaired(struct fabric *sw, int in, int out, const uint8_t *frame,
			     size_t len);
/* The same to a set of ports (bit i: port i; IB multicast): the in direction's impairments
 * and the capture meet the frame once, each port's out direction once per port. */
void fabric_forward_impaired_set(struct fabric *sw, int in, uint64_t outs,
				 const uint8_t *frame, size_t len);
/* Deliver what is due; returns ns until the next due frame or held frame, or UINT64_MAX. */
uint64_t fabric_release_due(struct fabric *sw, uint64_t now);
void fabric_port_drop_delayed(struct fabric *sw, int port);	/* the port went away */
void fabric_impair_close(struct fabric *sw);
/* A number with a unit: "1.5ms" with { "ms", 1e3 } is 1500; the suffix "" is the default
 * unit. 0 and the scaled value in @out, or -1 if no unit fits or it is above @max. */
struct fabric_unit {
	const char *suffix;	/* NULL ends the list; compared without case */
	double scale;
};
int fabric_parse_scaled(const char *v, const struct fabric_unit *units, double max,
			double *out);
/* Parse "KEY=VALUE" into @imp (every field a uint32_t): the byte offset of the field it set,
 * or -1 with a message in @err. */
int fabric_impair_parse(struct fabric_impair *imp, const char *kv, char *err, size_t errlen);

/* control.c: the control socket, commands and timed events. */
int fabric_control_listen(struct fabric *sw, const char *path);
void fabric_control_close(struct fabric *sw);
/* Run one command line; the reply: one line of JSON without the newline, malloc'ed. */
char *fabric_command(struct fabric *sw, const char *line);
int fabric_schedule(struct fabric *sw, uint64_t delay_ns, const char *cmd);
/* Run due timed commands; ns until the next, or UINT64_MAX. */
uint64_t fabric_run_timed(struct fabric *sw, uint64_t now);
/* Poll set of the control socket: add its fds at @pfd (at most 1 + FABRIC_CTL_CLIENTS). */
int fabric_control_pollfds(struct fabric *sw, struct pollfd *pfd);
void fabric_control_handle(struct fabric *sw, const struct pollfd *pfd, int n);
/* Has a control client commands waiting to run (poll without waiting)? */
bool fabric_control_pending(const struct fabric *sw);

/* capture.c: pcapng of every frame entering the fabric, one interface per port. */
int fabric_capture_start(struct fabric *sw, const char *path, char *err, size_t errlen);
void fabric_capture_stop(struct fabric *sw);
const char *fabric_capture_path(const struct fabric *sw);
void fabric_capture_flush(struct fabric *sw);
/* Is this frame an RDMA request or response other than an ACK (RoCEv2, or InfiniBand on an
 * IB fabric)? The frames the capture knows retransmissions of, and 'drop' counts. */
bool fabric_rdma_packet(const struct fabric *sw, const uint8_t *frame, size_t len);
void fabric_capture_frame(struct fabric *sw, int port, uint64_t now_ns, const uint8_t *frame,
			  size_t len, const char *comment);

/* ibswitch.c: the fabric as an InfiniBand switch with its SMA on port 0. */
int fabric_ib_enable(struct fabric *sw, uint64_t guid);
void fabric_ib_close(struct fabric *sw);
void fabric_ib_forward(struct fabric *sw, int in, const uint8_t *frame, size_t len);
/* A port connected, disconnected, or its link was set up or down: its IB state follows. */
void fabric_ib_links(struct fabric *sw);
/* The fabric port a unicast packet from @in goes to, or -1 (multicast, SMPs, no route). */
int fabric_ib_route(struct fabric *sw, int in, const uint8_t *frame, size_t len);
/* The switch's state as a JSON member ("ib":{...}) added to @b, as long as it takes. */
void fabric_ib_show(struct fabric *sw, struct fabric_sbuf *b);

#endif /* QHCA_FABRIC_H */
