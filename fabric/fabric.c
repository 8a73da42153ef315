// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * qhca-fabric: the simulated Ethernet switch that qhca VMs attach to.
 *
 * Each port is a unix stream socket that one QEMU "-netdev stream" connects to. Frames on
 * such a socket carry a 4-byte big-endian length before each Ethernet frame. The switch
 * learns source MAC addresses and forwards by destination MAC; broadcast, multicast and
 * unknown destinations go to every other connected port.
 *
 *   qhca-fabric --dir DIR --ports N [--log FILE] [--queue-kib K] [--stall-ms MS]
 *               [--control PATH] [--seed N] [--script FILE] [--capture FILE]
 *               [--tcp HOST:PORT] [--trunk N=unix:PATH|tcp:HOST:PORT]...
 *
 * creates DIR/port1.sock ... DIR/portN.sock and runs until SIGINT or SIGTERM, then closes
 * every socket and removes the socket files. Once K KiB wait for a port whose peer does not
 * read, unicast senders to it pause and flooded frames to it are dropped; it is
 * disconnected when nothing has been read for MS milliseconds (fabric.h). The control
 * socket (DIR/control.sock unless --control) takes the commands of docs/fabric.md:
 * impairments, link state, capture, timed events.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fabric.h"

static volatile sig_atomic_t stop_requested;
static FILE *logf_;

static void on_signal(int sig)
{
	(void)sig;
	stop_requested = 1;
}

void fabric_log(const char *fmt, ...)
{
	struct timespec ts;
	va_list ap;

	clock_gettime(CLOCK_REALTIME, &ts);
	fprintf(logf_, "%ld.%03ld qhca-fabric: ", (long)ts.tv_sec, ts.tv_nsec / 1000000);
	va_start(ap, fmt);
	vfprintf(logf_, fmt, ap);
	va_end(ap);
	fputc('\n', logf_);
	fflush(logf_);
}

/* A control command given on the command line (--capture, --script); 0 if it went well. */
static int start_command(struct fabric *sw, const char *cmd, const char *arg)
{
	char line[FABRIC_PATH_MAX + 4200], *reply;
	int bad;

	snprintf(line, sizeof(line), "%s %s", cmd, arg);
	reply = fabric_command(sw, line);
	bad = !reply || strncmp(reply, "{\"ok\":true", 10);
	if (bad)
		fprintf(stderr, "qhca-fabric: %s: %s\n", line, reply ? reply : "out of memory");
	free(reply);
	return bad;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: qhca-fabric --dir DIR --ports N [--log FILE] [--queue-kib K] [--stall-ms MS]\n"
		   "  Creates DIR/port1.sock..DIR/portN.sock for QEMU -netdev stream\n"
		   "  and switches Ethernet frames between them until SIGINT/SIGTERM.\n"
		   "  --queue-kib K   frames waiting for a port that does not read, at most\n"
		   "                  (default %u); then unicast senders to it pause and\n"
		   "                  flooded frames to it are dropped and counted\n"
		   "  --stall-ms MS   disconnect a port whose full queue went unread this long\n"
		   "                  (default %u; 0: never)\n"
		   "  --control PATH  the control socket (default DIR/control.sock)\n"
		   "  --seed N        seed of the impairments' random choices (default: from\n"
		   "                  the clock; logged, and in 'show')\n"
		   "  --script FILE   timed events from the start ('at 2s port 2 loss=5%%')\n"
		   "  --capture FILE  pcapng of every frame that enters the fabric\n"
		   "  --tcp HOST:P    port N also listens on TCP HOST:P+N-1\n"
		   "  --trunk N=ADDR  port N connects to another switch: unix:PATH or\n"
		   "                  tcp:HOST:PORT (reconnects); may be repeated\n"
		   "  --ib            an InfiniBand switch: frames are IB packets, forwarded by\n"
		   "                  the forwarding tables a subnet manager programs through\n"
		   "                  the switch's SMA (docs/infiniband.md)\n",
		FABRIC_QUEUE_DEFAULT >> 10, FABRIC_STALL_DEFAULT_MS);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "dir", required_argument, NULL, 'd' },
		{ "ports", required_argument, NULL, 'n' },
		{ "log", required_argument, NULL, 'l' },
		{ "queue-kib", required_argument, NULL, 'q' },
		{ "stall-ms", required_argument, NULL, 's' },
		{ "control", required_argument, NULL, 'c' },
		{ "seed", required_argument, NULL, 'S' },
		{ "script", required_argument, NULL, 'x' },
		{ "capture", required_argument, NULL, 'C' },
		{ "tcp", required_argument, NULL, 't' },
		{ "trunk", required_argument, NULL, 'T' },
		{ "ib", no_argument, NULL, 'I' },
		{ "help", no_argument, NULL, 'h' },
		{}
	};
	const char *dir = NULL, *log_path = NULL, *ctl_path = NULL, *script = NULL;
	const char *capture = NULL, *tcp = NULL;
	const char *trunks[FABRIC_MAX_PORTS];
	int ntrunks = 0, have_seed = 0, ib = 0;
	unsigned long long seed = 0;
	char ctl_default[FABRIC_PATH_MAX + 64];
	static struct fabric sw;	/* 64 ports' buffers: too big for the stack */
	long nports = 0, queue_kib = FABRIC_QUEUE_DEFAULT >> 10;
	long stall_ms = FABRIC_STALL_DEFAULT_MS;
	char *end;
	int c, i;

	logf_ = stderr;
	while ((c = getopt_long(argc, argv, "d:n:l:q:s:c:S:x:C:t:T:Ih", opts, NULL)) != -1) {
		switch (c) {
		case 'd':
			dir = optarg;
			break;
		case 'n':
			nports = strtol(optarg, NULL, 10);
			break;
		case 'l':
			log_path = optarg;
			break;
		case 'q':
			queue_kib = strtol(optarg, &end, 10);
			if (*end || queue_kib < (long)(FABRIC_QUEUE_MIN + 1023) / 1024 ||
			    queue_kib > 1L << 20) {
				fprintf(stderr, "qhca-fabric: --queue-kib %s: not %ld..%ld\n",
					optarg, (long)(FABRIC_QUEUE_MIN + 1023) / 1024, 1L << 20);
				return 2;
			}
			break;
		case 's':
			stall_ms = strtol(optarg, &end, 10);
			if (*end || stall_ms < 0 || stall_ms > 3600000) {
				fprintf(stderr, "qhca-fabric: --stall-ms %s: not 0..3600000\n",
					optarg);
				return 2;
			}
			break;
		case 'c':
			ctl_path = optarg;
			break;
		case 'S':
			errno = 0;
			seed = strtoull(optarg, &end, 0);
			if (errno || *end || end == optarg) {
				fprintf(stderr, "qhca-fabric: --seed %s: not a number\n", optarg);
				return 2;
			}
			have_seed = 1;
			break;
		case 'x':
			script = optarg;
			break;
		case 'C':
			capture = optarg;
			break;
		case 't':
			tcp = optarg;
			break;
		case 'T':
			if (ntrunks == FABRIC_MAX_PORTS) {
				fprintf(stderr, "qhca-fabric: too many --trunk\n");
				return 2;
			}
			trunks[ntrunks++] = optarg;
			break;
		case 'I':
			ib = 1;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (!dir || nports < 1 || nports > FABRIC_MAX_PORTS) {
		fprintf(stderr, "qhca-fabric: --dir and --ports 1..%d are required\n",
			FABRIC_MAX_PORTS);
		usage(stderr);
		return 2;
	}
	if (log_path) {
		logf_ = fopen(log_path, "a");
		if (!logf_) {
			fprintf(stderr, "qhca-fabric: cannot open %s: %s\n", log_path,
				strerror(errno));
			return 1;
		}
	}

	fabric_init(&sw, (int)nports);
	sw.queue_max = (size_t)queue_kib << 10;
	sw.stall_ms = (unsigned int)stall_ms;
	if (!have_seed) {
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		seed = (unsigned long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
	}
	fabric_seed(&sw, seed);
	/* The switch's GUID: an EUI-64 under QEMU's locally administered 52:54:00 prefix. */
	if (ib && fabric_ib_enable(&sw, 0x525400fffefab001ull)) {
		fprintf(stderr, "qhca-fabric: out of memory\n");
		return 1;
	}
	for (c = 0; c < ntrunks; c++) {
		long p = strtol(trunks[c], &end, 10);

		if (*end != '=' || p < 1 || p > nports || fabric_set_trunk(&sw, p - 1, end + 1)) {
			fprintf(stderr, "qhca-fabric: --trunk %s: expected N=unix:PATH or "
				"N=tcp:HOST:PORT with N in 1..%ld\n", trunks[c], nports);
			return 2;
		}
	}
	for (i = 0; i < sw.nports; i++) {
		if (!sw.port[i].trunk[0] && fabric_listen(&sw, i, dir)) {
			if (logf_ != stderr)
				fprintf(stderr, "qhca-fabric: cannot create port %d in %s (see %s)\n",
					i + 1, dir, log_path);
			goto fail;
		}
	}
	if (tcp) {
		const char *colon = strrchr(tcp, ':');
		char host[256];
		long base = colon ? strtol(colon + 1, &end, 10) : 0;

		if (!colon || *end || base < 1 || base + nports - 1 > 65535 ||
		    (size_t)(colon - tcp) >= sizeof(host)) {
			fprintf(stderr, "qhca-fabric: --tcp %s: expected HOST:PORT\n", tcp);
			goto fail;
		}
		memcpy(host, tcp, (size_t)(colon - tcp));
		host[colon - tcp] = 0;
		for (i = 0; i < sw.nports; i++)
			if (!sw.port[i].trunk[0] &&
			    fabric_listen_tcp(&sw, i, host, (unsigned int)(base + i))) {
				fprintf(stderr, "qhca-fabric: cannot listen on TCP %s:%ld\n", host,
					base + i);
				goto fail;
			}
	}
	if (!ctl_path) {
		snprintf(ctl_default, sizeof(ctl_default), "%s/control.sock", dir);
		ctl_path = ctl_default;
	}
	if (fabric_control_listen(&sw, ctl_path)) {
		fprintf(stderr, "qhca-fabric: cannot create the control socket %s\n", ctl_path);
		goto fail;
	}
	if ((capture && start_command(&sw, "capture start", capture)) ||
	    (script && start_command(&sw, "script", script)))
		goto fail;

	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	signal(SIGPIPE, SIG_IGN);
	fabric_log("up: %d ports in %s, control %s, seed %llu", sw.nports, dir, ctl_path, seed);

	while (!stop_requested)
		if (fabric_poll(&sw, 500))
			break;
	fabric_log("shutting down");
	fabric_close(&sw);
	for (i = 0; i < sw.nports; i++)
		unlink(sw.port[i].path);
	fabric_log("down");
	return 0;
fail:
	fabric_close(&sw);
	for (c = 0; c < sw.nports; c++)
		if (sw.port[c].path[0])
			unlink(sw.port[c].path);
	return 1;
}
