// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Fuzz target: the fabric's control command processor and its scripts, with frames and
 * time passing in between, on a switch of 2..4 ports over socketpairs (Ethernet or
 * InfiniBand).
 *
 * The input is a flags byte, then records separated by "\n@": the first record is control
 * lines; a later one starts with its kind:
 *   'c'        control lines, one a line, each run as a client's command
 *   'A'..'D'   a script file of that name in the fuzzer's directory ('script A' loads it)
 *   'f' P F    a frame into port P; F bit 0: fix its CRCs (IB) or addresses (Ethernet
 *              broadcast), bit 1: leave it for the poll to read, bits 2-7: sent that many
 *              times more (a flood in a few bytes)
 *   't' T      T's low bits: time passes (2^(T & 31) us) and the switch polls once; bit 7:
 *              the peers read what waits for them
 * Flags: bit 0 InfiniBand switch, bits 1-2 ports - 1 (at least 2), bit 3 the smallest
 * queues, bit 4 small socket buffers.
 *
 * Everything a command names is relative to a directory of the fuzzer's own ('/' becomes
 * '_'), so captures and scripts never reach outside it: an input runs in that directory,
 * libFuzzer's corpus and crash files go where it was started. Beyond the sanitizers, every reply
 * must be one line of valid JSON, and the bounds of docs/security.md must hold after every
 * step: the pending events, and per port the queue and delay line together.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fabric.h"
#include "ib.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct fabric sw;
static int peer[4];
static char workdir[64];
static int home_fd = -1;	/* the directory libFuzzer was started in */

void fabric_log(const char *fmt, ...)
{
	static char line[8192];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);	/* every format runs (UBSan sees it) */
	va_end(ap);
}

/* The checks are no code under test: their branches are not coverage for libFuzzer. */
#define CHECKER __attribute__((no_sanitize("coverage")))
#define JSON_CHECKER CHECKER
#include "json_check.h"

/* ---- the bounds that must hold whatever came in */
CHECKER static void check_bounds(void)
{
	const struct fabric_timed *t;
	const struct fabric_delayed *d;
	size_t delayed[FABRIC_MAX_PORTS] = { 0 }, bytes = 0;
	unsigned int n = 0;
	int i, held = 0;

	for (t = sw.timed; t; t = t->next) {
		n++;
		bytes += sizeof(*t) + strlen(t->cmd) + 1;
		if (t->next && t->next->due_ns < t->due_ns)
			abort();	/* out of order */
		if (t->depth < 0 || t->depth > FABRIC_SCRIPT_DEPTH)
			abort();
	}
	if (n != sw.ntimed || bytes != sw.timed_bytes || n > FABRIC_TIMED_MAX ||
	    bytes > FABRIC_TIMED_BYTES)
		abort();
	if (sw.dl_n > sw.dl_cap || (sw.dl_cap && !sw.dl_heap))
		abort();
	for (size_t k = 0; k < sw.dl_n; k++) {
		d = sw.dl_heap[k];
		/* a heap by (due, seq): no frame before its parent */
		if (d->out < 0 || d->out >= sw.nports || d->seq >= sw.dl_seq ||
		    (k && (d->due_ns < sw.dl_heap[(k - 1) / 2]->due_ns ||
			   (d->due_ns == sw.dl_heap[(k - 1) / 2]->due_ns &&
			    d->seq < sw.dl_heap[(k - 1) / 2]->seq))))
			abort();
		delayed[d->out] += FABRIC_DELAYED_COST(d->len);
	}
	for (i = 0; i < sw.nports; i++) {
		const struct fabric_port *p = &sw.port[i];

		if (p->held) {
			held++;
			delayed[i] += FABRIC_DELAYED_COST(p->held->len);
		}
		if (delayed[i] != p->delayed_bytes)
			abort();
		/* queue_max, and one frame more when the port was empty */
		if (p->out_len + p->delayed_bytes >
		    fabric_queue_limit(&sw) + FABRIC_DELAYED_COST(FABRIC_MAX_FRAME))
			abort();
	}
	if (held != sw.nheld)
		abort();
}

static void command(const char *line)
{
	char *r = fabric_command(&sw, line);
	const char *end;

	if (!r)
		abort();
	if (getenv("FUZZ_FABRIC_VERBOSE"))	/* to see what a seed or a reproducer does */
		fprintf(stderr, "%s\n  -> %s\n", line, r);
	end = js_value(r, 0);
	if (!end || *js_ws(end) || strncmp(r, "{\"ok\":", 6) || strchr(r, '\n'))
		abort();
	free(r);
	check_bounds();
}

/* The bytes a command or a script may hold here: no '/', so no path leaves the directory. */
static char *sanitized(const uint8_t *p, size_t n, bool nul_to_space)
{
	char *s = malloc(n + 1);
	size_t i;

	if (!s)
		abort();
	for (i = 0; i < n; i++) {
		s[i] = p[i] == '/' ? '_' : (char)p[i];
		if (nul_to_space && !p[i])
			s[i] = ' ';
	}
	s[n] = 0;
	return s;
}

static void control_lines(const uint8_t *p, size_t n)
{
	while (n) {
		const uint8_t *nl = memchr(p, '\n', n);
		size_t len = nl ? (size_t)(nl - p) : n;

		if (len < FABRIC_CTL_LINE) {	/* longer lines the socket refuses */
			char *line = sanitized(p, len, true);

			command(line);
			free(line);
		}
		p += len + (nl != NULL);
		n -= len + (nl != NULL);
	}
}

static void write_script(char name, const uint8_t *p, size_t n)
{
	char path[2] = { name, 0 }, *text;
	FILE *f;

	if (n && p[0] == '\n') {
		p++;
		n--;
	}
	text = sanitized(p, n, false);
	f = fopen(path, "w");
	if (f) {
		fwrite(text, 1, n, f);
		fclose(f);
	}
	free(text);
}

static void frame_in(const uint8_t *p, size_t n)
{
	static uint8_t buf[4 + FABRIC_MAX_FRAME];
	int port, tries, copy;
	uint8_t fl;
	size_t len, done = 0;
	ssize_t w;

	if (n < 2)
		return;
	port = p[0] % sw.nports;
	fl = p[1];
	len = n - 2 < FABRIC_MAX_FRAME ? n - 2 : FABRIC_MAX_FRAME;
	memcpy(buf + 4, p + 2, len);
	if (fl & 1) {
		if (sw.ib)
			ib_crc_update(buf + 4, len);
		else if (len >= 14)
			memset(buf + 4, 0xff, 6);	/* broadcast: every port */
	}
	buf[0] = (uint8_t)(len >> 24);
	buf[1] = (uint8_t)(len >> 16);
	buf[2] = (uint8_t)(len >> 8);
	buf[3] = (uint8_t)len;
	for (copy = 0; copy <= fl >> 2; copy++) {
		for (tries = 0, done = 0; tries < 3 && done < 4 + len; tries++) {
			w = write(peer[port], buf + done, 4 + len - done);
			if (w > 0)
				done += (size_t)w;
			if (sw.port[port].fd >= 0 && (done < 4 + len || !(fl & 2)))
				fabric_read(&sw, port);
		}
		check_bounds();
	}
}

static void drain_peers(void)
{
	static uint8_t r[1 << 16];
	int i, k;

	for (i = 0; i < sw.nports; i++)
		for (k = 0; k < 64 && recv(peer[i], r, sizeof(r), MSG_DONTWAIT) > 0; k++)
			;
}

static void time_passes(uint8_t t)
{
	fabric_time_warp_ns += 1000ull << (t & 31);
	if (t & 0x80)
		drain_peers();
	fabric_poll(&sw, 0);
	check_bounds();
}

static void clear_dir(void)
{
	DIR *d = opendir(".");
	struct dirent *e;

	if (!d)
		abort();
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			unlink(e->d_name);
	closedir(d);
}

static void leave_dir(void)
{
	if (chdir(workdir) == 0) {
		clear_dir();
		if (chdir("/") == 0)
			rmdir(workdir);
	}
}

/* Crash files go to the directory libFuzzer was started in (the input runs elsewhere). */
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	static char prefix[4200];
	static char **args;
	char cwd[4096];
	int i;

	/* As qhca-fabric's main: a peer that went away is EPIPE, not the end of the process
	 * (the switch may close a port's socket while a record still writes to its peer). */
	signal(SIGPIPE, SIG_IGN);
	for (i = 1; i < *argc; i++)
		if (!strncmp((*argv)[i], "-artifact_prefix=", 17) ||
		    !strncmp((*argv)[i], "-exact_artifact_path=", 21))
			return 0;
	if (!getcwd(cwd, sizeof(cwd)))
		return 0;
	snprintf(prefix, sizeof(prefix), "-artifact_prefix=%s/", cwd);
	args = calloc((size_t)*argc + 2, sizeof(*args));
	if (!args)
		abort();
	args[0] = (*argv)[0];
	args[1] = prefix;
	for (i = 1; i < *argc; i++)
		args[i + 1] = (*argv)[i];
	*argc += 1;
	*argv = args;
	return 0;
}

static void setup(uint8_t flags)
{
	int i, n = 1 + ((flags >> 1) & 3), small = 4096;

	if (n < 2)
		n = 2;
	if (!workdir[0]) {
		strcpy(workdir, "/tmp/qhca-fuzz-fabric-XXXXXX");
		home_fd = open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (home_fd < 0 || !mkdtemp(workdir))
			abort();
		atexit(leave_dir);
	}
	if (chdir(workdir))
		abort();
	clear_dir();
	fabric_init(&sw, n);
	if (flags & 8)
		sw.queue_max = FABRIC_QUEUE_MIN;
	else
		sw.queue_max = 64 << 10;
	sw.stall_ms = 50;
	for (i = 0; i < n; i++) {
		int sv[2];

		if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
			abort();
		fcntl(sv[0], F_SETFL, O_NONBLOCK);
		if (flags & 16) {
			setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof(small));
			setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &small, sizeof(small));
		}
		peer[i] = sv[0];
		fabric_attach(&sw, i, sv[1]);
	}
	if ((flags & 1) && fabric_ib_enable(&sw, 0x0011223344556677ull))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *end = data + size, *rec, *next;
	int i;

	if (!size)
		return 0;
	setup(data[0]);
	for (rec = data + 1; rec < end; rec = next) {
		const uint8_t *sep = memmem(rec, (size_t)(end - rec), "\n@", 2);
		size_t len = sep ? (size_t)(sep - rec) : (size_t)(end - rec);

		next = sep ? sep + 2 : end;
		if (rec == data + 1) {
			control_lines(rec, len);
			continue;
		}
		if (!len)
			continue;
		switch (rec[0]) {
		case 'c':
			control_lines(rec + 1, len - 1);
			break;
		case 'A': case 'B': case 'C': case 'D':
			write_script((char)rec[0], rec + 1, len - 1);
			break;
		case 'f':
			frame_in(rec + 1, len - 1);
			break;
		case 't':
			time_passes(len > 1 ? rec[1] : 10);
			break;
		default:
			break;
		}
	}
	command("show");
	fabric_close(&sw);
	for (i = 0; i < sw.nports; i++)
		close(peer[i]);
	fabric_time_warp_ns = 0;
	clear_dir();
	if (fchdir(home_fd))
		abort();
	return 0;
}
