// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * qhca-fabric: the simulated Ethernet switch that qhca VMs attach to.
 *
 * Each port is a unix stream socket that one QEMU "-netdev stream" connects to. Frames on
 * such a socket carry a 4-byte big-endian length before each Ethernet frame. The switch
 * learns source MAC addresses and forwards by destination MAC; broadcast, multicast and
 * unknown destinations go to every other connected port.
 *
 *   qhca-fabric --dir DIR --ports N [--log FILE]
 *
 * creates DIR/port1.sock ... DIR/portN.sock and runs until SIGINT or SIGTERM, then closes
 * every socket and removes the socket files.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
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

static int listen_unix(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd;

	if (strlen(path) >= sizeof(sa.sun_path)) {
		fabric_log("socket path too long: %s", path);
		return -1;
	}
	strcpy(sa.sun_path, path);
	unlink(path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) || listen(fd, 1)) {
		fabric_log("cannot listen on %s: %s", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: qhca-fabric --dir DIR --ports N [--log FILE]\n"
		   "  Creates DIR/port1.sock..DIR/portN.sock for QEMU -netdev stream\n"
		   "  and switches Ethernet frames between them until SIGINT/SIGTERM.\n");
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "dir", required_argument, NULL, 'd' },
		{ "ports", required_argument, NULL, 'n' },
		{ "log", required_argument, NULL, 'l' },
		{ "help", no_argument, NULL, 'h' },
		{}
	};
	const char *dir = NULL, *log_path = NULL;
	struct fabric sw;
	long nports = 0;
	int c, i;

	logf_ = stderr;
	while ((c = getopt_long(argc, argv, "d:n:l:h", opts, NULL)) != -1) {
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
	for (i = 0; i < sw.nports; i++) {
		snprintf(sw.port[i].path, sizeof(sw.port[i].path), "%s/port%d.sock", dir, i + 1);
		sw.port[i].listen_fd = listen_unix(sw.port[i].path);
		if (sw.port[i].listen_fd < 0) {
			fabric_close(&sw);
			return 1;
		}
	}

	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	signal(SIGPIPE, SIG_IGN);
	fabric_log("up: %d ports in %s", sw.nports, dir);

	while (!stop_requested) {
		struct pollfd pfd[FABRIC_MAX_PORTS];

		for (i = 0; i < sw.nports; i++) {
			struct fabric_port *p = &sw.port[i];

			pfd[i].fd = p->fd >= 0 ? p->fd : p->listen_fd;
			pfd[i].events = POLLIN;
			pfd[i].revents = 0;
		}
		if (poll(pfd, sw.nports, 500) < 0) {
			if (errno == EINTR)
				continue;
			fabric_log("poll: %s", strerror(errno));
			break;
		}
		for (i = 0; i < sw.nports; i++) {
			if (!pfd[i].revents)
				continue;
			if (sw.port[i].fd < 0)
				fabric_accept(&sw, i);
			else
				fabric_read(&sw, i);
		}
	}
	fabric_log("shutting down");
	fabric_close(&sw);
	for (i = 0; i < sw.nports; i++)
		unlink(sw.port[i].path);
	fabric_log("down");
	return 0;
}
