// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * qhca-fabric control: a unix socket that takes one command a line and answers each with
 * one line of JSON, the commands themselves, and timed events (at, script). The protocol is
 * in docs/fabric.md; tools/qhca fabric is one client of it, socat another.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "fabric.h"

#define MAX_TOKENS	64
#define SCRIPT_MAX	(256u << 10)

struct sbuf {
	char *p;
	size_t len, cap;
};

static void sb_printf(struct sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(struct sbuf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	for (;;) {
		va_start(ap, fmt);
		n = vsnprintf(b->p ? b->p + b->len : NULL, b->p ? b->cap - b->len : 0, fmt, ap);
		va_end(ap);
		if (n < 0)
			return;
		if (b->p && b->len + (size_t)n < b->cap) {
			b->len += (size_t)n;
			return;
		}
		size_t cap = b->cap ? b->cap * 2 : 1024;
		char *p;

		while (cap < b->len + (size_t)n + 1)
			cap *= 2;
		p = realloc(b->p, cap);
		if (!p)
			return;
		b->p = p;
		b->cap = cap;
	}
}

static void sb_json_str(struct sbuf *b, const char *s)
{
	sb_printf(b, "\"");
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			sb_printf(b, "\\%c", c);
		else if (c < 0x20)
			sb_printf(b, "\\u%04x", c);
		else
			sb_printf(b, "%c", c);
	}
	sb_printf(b, "\"");
}

/* "all", "N", "N-M", "N,M,...": a set of ports (bit i: port i + 1). */
static int parse_ports(struct fabric *sw, const char *spec, uint64_t *set, char *err,
		       size_t errlen)
{
	const char *s = spec;
	char *end;
	long a, b;

	*set = 0;
	if (!strcmp(spec, "all")) {
		*set = sw->nports == 64 ? ~0ull : (1ull << sw->nports) - 1;
		return 0;
	}
	for (;;) {
		errno = 0;
		a = strtol(s, &end, 10);
		b = a;
		if (end != s && *end == '-') {
			s = end + 1;
			b = strtol(s, &end, 10);
		}
		if (end == s || errno || a < 1 || b < a || b > sw->nports ||
		    (*end && *end != ',')) {
			snprintf(err, errlen, "'%s': ports are all, N, N-M or N,M with N in 1..%d",
				 spec, sw->nports);
			return -1;
		}
		for (; a <= b; a++)
			*set |= 1ull << (a - 1);
		if (!*end)
			return 0;
		s = end + 1;
	}
}

/* "2s", "500ms", "100us", "1.5s", plain number: milliseconds; at most a day. */
static int parse_time_ns(const char *v, uint64_t *ns)
{
	static const struct fabric_unit t[] = { { "", 1e6 }, { "ms", 1e6 }, { "us", 1e3 },
						{ "s", 1e9 }, {} };
	double d;

	if (fabric_parse_scaled(v, t, 86400e9, &d))
		return -1;
	*ns = (uint64_t)d;
	return 0;
}

static void json_impair(struct sbuf *b, const struct fabric_impair *im)
{
	sb_printf(b, "{\"loss\":%.4g,\"reorder\":%.4g,\"dup\":%.4g,\"corrupt\":%.4g,"
		     "\"delay_us\":%u,\"jitter_us\":%u,\"rate_mbit\":%u,\"mtu\":%u,\"drop\":%u}",
		  im->loss / 1e4, im->reorder / 1e4, im->dup / 1e4, im->corrupt / 1e4,
		  im->delay_us, im->jitter_us, im->rate_mbit, im->mtu, im->drop);
}

static void json_stats(struct sbuf *b, const struct fabric_dir_stats *st)
{
	sb_printf(b, "{\"frames\":%llu,\"dropped\":%llu,\"reordered\":%llu,\"duplicated\":%llu,"
		     "\"corrupted\":%llu,\"delayed\":%llu}",
		  (unsigned long long)st->frames, (unsigned long long)st->dropped,
		  (unsigned long long)st->reordered, (unsigned long long)st->duplicated,
		  (unsigned long long)st->corrupted, (unsigned long long)st->delayed);
}

static void show(struct fabric *sw, struct sbuf *b)
{
	const struct fabric_timed *t;
	const struct fabric_delayed *d;
	unsigned long pending = 0, delayed = 0;
	int i;

	for (t = sw->timed; t; t = t->next)
		pending++;
	for (d = sw->dl_head; d; d = d->next)
		delayed++;
	sb_printf(b, ",\"seed\":%llu,\"uptime_ms\":%llu,\"capture\":",
		  (unsigned long long)sw->seed,
		  (unsigned long long)((fabric_now_ns() - sw->start_ns) / 1000000));
	if (sw->cap)
		sb_json_str(b, fabric_capture_path(sw));
	else
		sb_printf(b, "null");
	sb_printf(b, ",\"pending_events\":%lu,\"delayed_frames\":%lu,\"held_frames\":%d,"
		     "\"ports\":[", pending, delayed, sw->nheld);
	for (i = 0; i < sw->nports; i++) {
		const struct fabric_port *p = &sw->port[i];

		sb_printf(b, "%s{\"port\":%d,\"connected\":%s,\"link\":\"%s\",", i ? "," : "",
			  i + 1, p->fd >= 0 ? "true" : "false", p->link_down ? "down" : "up");
		if (p->trunk[0]) {
			sb_printf(b, "\"trunk\":");
			sb_json_str(b, p->trunk);
			sb_printf(b, ",");
		}
		sb_printf(b, "\"in\":");
		json_impair(b, &p->imp[FABRIC_IN]);
		sb_printf(b, ",\"out\":");
		json_impair(b, &p->imp[FABRIC_OUT]);
		sb_printf(b, ",\"counters\":{\"in\":");
		json_stats(b, &p->st[FABRIC_IN]);
		sb_printf(b, ",\"out\":");
		json_stats(b, &p->st[FABRIC_OUT]);
		sb_printf(b, ",\"link_drops\":%llu,\"mtu_drops\":%llu,\"queue_drops\":%llu,"
			     "\"rx_frames\":%llu,\"tx_frames\":%llu,\"rx_drops\":%llu}}",
			  (unsigned long long)p->link_drops, (unsigned long long)p->mtu_drops,
			  (unsigned long long)p->tx_drops, (unsigned long long)p->rx_frames,
			  (unsigned long long)p->tx_frames, (unsigned long long)p->rx_drops);
	}
	sb_printf(b, "]");
	if (sw->ib) {
		char *j = malloc(65536);

		if (j) {
			fabric_ib_show(sw, j, 65536);
			sb_printf(b, ",%s", j);
			free(j);
		}
	}
}

static int exec_cmd(struct fabric *sw, char **tok, int n, bool dry, struct sbuf *reply,
		    char *err, size_t errlen);

/* Read a script: events "at TIME COMMAND", one a line or separated by ';', '#' comments. */
static int load_script(struct fabric *sw, const char *path, bool dry, struct sbuf *reply,
		       char *err, size_t errlen)
{
	FILE *f = fopen(path, "r");
	char *text, *ev, *save = NULL, *line, *lsave = NULL;
	uint64_t now = fabric_now_ns();
	size_t len;
	int pass, events = 0;

	if (!f) {
		snprintf(err, errlen, "script %s: %s", path, strerror(errno));
		return -1;
	}
	text = calloc(1, SCRIPT_MAX + 1);
	len = text ? fread(text, 1, SCRIPT_MAX + 1, f) : 0;
	fclose(f);
	if (!text || len > SCRIPT_MAX) {
		snprintf(err, errlen, "script %s: %s", path, text ? "longer than 256 KiB" :
			 "out of memory");
		free(text);
		return -1;
	}
	/* Pass 0 checks every event, pass 1 schedules them: a bad script changes nothing. */
	for (pass = 0; pass < 2; pass++) {
		char *copy = strdup(text);
		int lineno = 0;

		if (!copy) {
			snprintf(err, errlen, "out of memory");
			free(text);
			return -1;
		}
		for (line = strtok_r(copy, "\n", &lsave); line; line = strtok_r(NULL, "\n", &lsave)) {
			char *hash = strchr(line, '#');

			lineno++;
			if (hash)
				*hash = 0;
			for (ev = strtok_r(line, ";", &save); ev; ev = strtok_r(NULL, ";", &save)) {
				char *tok[MAX_TOKENS], *s2 = NULL, *t;
				uint64_t at;
				int nt = 0;

				for (t = strtok_r(ev, " \t\r", &s2); t && nt < MAX_TOKENS;
				     t = strtok_r(NULL, " \t\r", &s2))
					tok[nt++] = t;
				if (!nt)
					continue;
				if (nt < 3 || strcmp(tok[0], "at") || parse_time_ns(tok[1], &at)) {
					snprintf(err, errlen, "script %s line %d: expected 'at TIME "
						 "COMMAND' (TIME: 2s, 500ms, 100us)", path, lineno);
					goto bad;
				}
				if (pass == 0) {
					char e2[256];

					if (exec_cmd(sw, tok + 2, nt - 2, true, NULL, e2, sizeof(e2))) {
						snprintf(err, errlen, "script %s line %d: %s", path,
							 lineno, e2);
						goto bad;
					}
				} else {
					struct sbuf cmd = { 0 };
					int k;

					for (k = 2; k < nt; k++)
						sb_printf(&cmd, "%s%s", k > 2 ? " " : "", tok[k]);
					uint64_t cur = fabric_now_ns();

					/* Times count from when the script was given. */
					if (!cmd.p || fabric_schedule(sw, now + at > cur ?
								      now + at - cur : 0, cmd.p)) {
						free(cmd.p);
						snprintf(err, errlen, "out of memory");
						goto bad;
					}
					free(cmd.p);
					events++;
				}
			}
		}
		free(copy);
		if (dry)
			break;
		continue;
bad:
		free(copy);
		free(text);
		return -1;
	}
	free(text);
	if (reply)
		sb_printf(reply, ",\"events\":%d", events);
	return 0;
}

static int cmd_set(struct fabric *sw, char **tok, int n, bool dry, char *err, size_t errlen)
{
	struct fabric_impair next[FABRIC_MAX_PORTS][2];
	int dmin = 0, dmax = 1, i, d, k = 1;
	uint64_t set;

	if (n < 2 || parse_ports(sw, tok[0], &set, err, errlen))
		return n < 2 ? (snprintf(err, errlen, "usage: set PORTS [in|out] KEY=VALUE..."), -1)
			     : -1;
	if (!strcmp(tok[1], "in") || !strcmp(tok[1], "out")) {
		dmin = dmax = tok[1][0] == 'i' ? FABRIC_IN : FABRIC_OUT;
		k = 2;
	}
	if (k >= n) {
		snprintf(err, errlen, "usage: set PORTS [in|out] KEY=VALUE...");
		return -1;
	}
	for (i = 0; i < sw->nports; i++)
		for (d = 0; d < 2; d++)
			next[i][d] = sw->port[i].imp[d];
	for (; k < n; k++)
		for (i = 0; i < sw->nports; i++)
			for (d = dmin; (set >> i & 1) && d <= dmax; d++)
				if (fabric_impair_parse(&next[i][d], tok[k], err, errlen))
					return -1;
	if (dry)
		return 0;
	for (i = 0; i < sw->nports; i++)
		for (d = 0; d < 2; d++)
			sw->port[i].imp[d] = next[i][d];
	fabric_impair_update(sw);
	return 0;
}

static int cmd_link(struct fabric *sw, const char *ports, const char *state, bool dry,
		    char *err, size_t errlen)
{
	uint64_t set;
	int i;

	if (parse_ports(sw, ports, &set, err, errlen))
		return -1;
	if (strcmp(state, "up") && strcmp(state, "down")) {
		snprintf(err, errlen, "link state '%s': up or down", state);
		return -1;
	}
	if (dry)
		return 0;
	for (i = 0; i < sw->nports; i++)
		if (set >> i & 1)
			sw->port[i].link_down = state[0] == 'd';
	fabric_impair_update(sw);
	if (sw->ib)
		fabric_ib_links(sw);	/* the SM sees every flap: PortStateChange */
	return 0;
}

static int exec_cmd(struct fabric *sw, char **tok, int n, bool dry, struct sbuf *reply,
		    char *err, size_t errlen)
{
	const char *c = n ? tok[0] : "";
	uint64_t set, v;
	char *end;
	int i;

	if (!strcmp(c, "set"))
		return cmd_set(sw, tok + 1, n - 1, dry, err, errlen);
	if (!strcmp(c, "port")) {	/* the script's form: port P up|down, port P [in|out] k=v */
		if (n == 3 && (!strcmp(tok[2], "up") || !strcmp(tok[2], "down")))
			return cmd_link(sw, tok[1], tok[2], dry, err, errlen);
		return cmd_set(sw, tok + 1, n - 1, dry, err, errlen);
	}
	if (!strcmp(c, "link")) {
		if (n != 3) {
			snprintf(err, errlen, "usage: link PORTS up|down");
			return -1;
		}
		return cmd_link(sw, tok[1], tok[2], dry, err, errlen);
	}
	if (!strcmp(c, "clear")) {
		if (n > 2 || parse_ports(sw, n == 2 ? tok[1] : "all", &set, err, errlen))
			return n > 2 ? (snprintf(err, errlen, "usage: clear [PORTS]"), -1) : -1;
		if (dry)
			return 0;
		for (i = 0; i < sw->nports; i++)
			if (set >> i & 1)
				memset(sw->port[i].imp, 0, sizeof(sw->port[i].imp));
		fabric_impair_update(sw);
		return 0;
	}
	if (!strcmp(c, "show") && n == 1) {
		if (!dry)
			show(sw, reply);
		return 0;
	}
	if (!strcmp(c, "zero") && n == 1) {
		for (i = 0; !dry && i < sw->nports; i++) {
			struct fabric_port *p = &sw->port[i];

			memset(p->st, 0, sizeof(p->st));
			p->link_drops = p->mtu_drops = p->tx_drops = 0;
			p->rx_frames = p->tx_frames = p->rx_drops = 0;
		}
		return 0;
	}
	if (!strcmp(c, "seed")) {
		errno = 0;
		v = n == 2 ? strtoull(tok[1], &end, 0) : 0;
		if (n != 2 || errno || *end || end == tok[1]) {
			snprintf(err, errlen, "usage: seed N");
			return -1;
		}
		if (!dry)
			fabric_seed(sw, v);
		return 0;
	}
	if (!strcmp(c, "capture")) {
		if (n == 3 && !strcmp(tok[1], "start")) {
			if (dry)
				return 0;
			return fabric_capture_start(sw, tok[2], err, errlen);
		}
		if (n == 2 && !strcmp(tok[1], "stop")) {
			if (!dry)
				fabric_capture_stop(sw);
			return 0;
		}
		snprintf(err, errlen, "usage: capture start PATH | capture stop");
		return -1;
	}
	if (!strcmp(c, "at")) {
		struct sbuf cmd = { 0 };
		int k, r;

		if (n < 3 || parse_time_ns(tok[1], &v)) {
			snprintf(err, errlen, "usage: at TIME COMMAND (TIME: 2s, 500ms, 100us)");
			return -1;
		}
		if (exec_cmd(sw, tok + 2, n - 2, true, NULL, err, errlen))
			return -1;
		if (dry)
			return 0;
		for (k = 2; k < n; k++)
			sb_printf(&cmd, "%s%s", k > 2 ? " " : "", tok[k]);
		r = cmd.p ? fabric_schedule(sw, v, cmd.p) : -1;
		free(cmd.p);
		if (r)
			snprintf(err, errlen, "out of memory");
		return r;
	}
	if (!strcmp(c, "script")) {
		if (n != 2) {
			snprintf(err, errlen, "usage: script PATH");
			return -1;
		}
		return load_script(sw, tok[1], dry, reply, err, errlen);
	}
	if (!strcmp(c, "help") && n == 1) {
		if (reply)
			sb_printf(reply, ",\"commands\":[\"set PORTS [in|out] KEY=VALUE...\","
				  "\"clear [PORTS]\",\"link PORTS up|down\",\"show\",\"zero\","
				  "\"capture start PATH\",\"capture stop\",\"seed N\","
				  "\"at TIME COMMAND\",\"script PATH\"]");
		return 0;
	}
	snprintf(err, errlen, "unknown command '%s' (help lists them)", c);
	return -1;
}

char *fabric_command(struct fabric *sw, const char *line)
{
	char *copy = strdup(line), *tok[MAX_TOKENS], *save = NULL, *t;
	struct sbuf reply = { 0 }, out = { 0 };
	char err[512] = "";
	int n = 0, r;

	if (!copy)
		return NULL;
	for (t = strtok_r(copy, " \t\r\n", &save); t; t = strtok_r(NULL, " \t\r\n", &save)) {
		if (n == MAX_TOKENS) {
			snprintf(err, sizeof(err), "more than %d words", MAX_TOKENS);
			break;
		}
		tok[n++] = t;
	}
	r = err[0] ? -1 : exec_cmd(sw, tok, n, false, &reply, err, sizeof(err));
	if (r) {
		sb_printf(&out, "{\"ok\":false,\"error\":");
		sb_json_str(&out, err[0] ? err : "failed");
		sb_printf(&out, "}");
	} else {
		sb_printf(&out, "{\"ok\":true%s}", reply.p ? reply.p : "");
	}
	if (n && strcmp(tok[0], "show"))
		fabric_log("control: %s: %s", line, r ? err : "ok");
	free(reply.p);
	free(copy);
	return out.p;
}

int fabric_schedule(struct fabric *sw, uint64_t delay_ns, const char *cmd)
{
	size_t len = strlen(cmd);
	struct fabric_timed *t = malloc(sizeof(*t) + len + 1), **pp;

	if (!t)
		return -1;
	t->due_ns = fabric_now_ns() + delay_ns;
	memcpy(t->cmd, cmd, len + 1);
	for (pp = &sw->timed; *pp && (*pp)->due_ns <= t->due_ns; pp = &(*pp)->next)
		;
	t->next = *pp;
	*pp = t;
	return 0;
}

uint64_t fabric_run_timed(struct fabric *sw, uint64_t now)
{
	struct fabric_timed *t;

	while ((t = sw->timed) && t->due_ns <= now) {
		sw->timed = t->next;
		free(fabric_command(sw, t->cmd));	/* logged with its result */
		free(t);
	}
	return sw->timed ? sw->timed->due_ns - now : UINT64_MAX;
}

int fabric_control_listen(struct fabric *sw, const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd;

	if (strlen(path) >= sizeof(sa.sun_path) || strlen(path) >= sizeof(sw->ctl_path)) {
		fabric_log("control socket path %s is longer than a unix socket path can be "
			   "(%zu bytes)", path, sizeof(sa.sun_path) - 1);
		return -1;
	}
	strcpy(sa.sun_path, path);
	unlink(path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) || listen(fd, 4)) {
		fabric_log("cannot listen on %s: %s", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	sw->ctl_fd = fd;
	strcpy(sw->ctl_path, path);
	return 0;
}

static void client_close(struct fabric_ctl_client *c)
{
	close(c->fd);
	c->fd = -1;
	c->have = 0;
}

void fabric_control_close(struct fabric *sw)
{
	struct fabric_timed *t;
	int i;

	for (i = 0; i < FABRIC_CTL_CLIENTS; i++)
		if (sw->ctl[i].fd >= 0)
			client_close(&sw->ctl[i]);
	if (sw->ctl_fd >= 0) {
		close(sw->ctl_fd);
		unlink(sw->ctl_path);
		sw->ctl_fd = -1;
	}
	while ((t = sw->timed)) {
		sw->timed = t->next;
		free(t);
	}
}

int fabric_control_pollfds(struct fabric *sw, struct pollfd *pfd)
{
	int i;

	if (sw->ctl_fd < 0)
		return 0;
	pfd[0] = (struct pollfd){ .fd = sw->ctl_fd, .events = POLLIN };
	for (i = 0; i < FABRIC_CTL_CLIENTS; i++)
		pfd[1 + i] = (struct pollfd){ .fd = sw->ctl[i].fd, .events = POLLIN };
	return 1 + FABRIC_CTL_CLIENTS;
}

static int reply_line(struct fabric_ctl_client *c, char *json)
{
	size_t len = json ? strlen(json) : 0, done = 0;
	ssize_t r;

	if (!json)
		return -1;
	json[len++] = '\n';	/* the terminating NUL's place: fabric_command allocated it */
	while (done < len) {
		r = send(c->fd, json + done, len - done, MSG_NOSIGNAL);
		if (r <= 0 && errno != EINTR)
			return -1;
		if (r > 0)
			done += (size_t)r;
	}
	return 0;
}

static void client_read(struct fabric *sw, struct fabric_ctl_client *c)
{
	ssize_t n = recv(c->fd, c->buf + c->have, sizeof(c->buf) - c->have, MSG_DONTWAIT);
	char *nl;

	if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
		client_close(c);
		return;
	}
	if (n < 0)
		return;
	c->have += (size_t)n;
	while (c->fd >= 0 && (nl = memchr(c->buf, '\n', c->have))) {
		size_t used = (size_t)(nl - c->buf) + 1;
		char *json;

		*nl = 0;
		json = fabric_command(sw, c->buf);
		if (reply_line(c, json))
			client_close(c);
		free(json);
		if (c->fd < 0)
			return;
		memmove(c->buf, c->buf + used, c->have - used);
		c->have -= used;
	}
	if (c->have == sizeof(c->buf)) {
		char msg[] = "{\"ok\":false,\"error\":\"line longer than 4096 bytes\"}\n";

		if (send(c->fd, msg, sizeof(msg) - 1, MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
			fabric_log("control: %s", strerror(errno));
		client_close(c);
	}
}

void fabric_control_handle(struct fabric *sw, const struct pollfd *pfd, int n)
{
	int i, fd;

	if (!n)
		return;
	for (i = 0; i < FABRIC_CTL_CLIENTS; i++)
		if (pfd[1 + i].revents && sw->ctl[i].fd == pfd[1 + i].fd && sw->ctl[i].fd >= 0)
			client_read(sw, &sw->ctl[i]);
	if (!pfd[0].revents)
		return;
	fd = accept4(sw->ctl_fd, NULL, NULL, SOCK_CLOEXEC);
	if (fd < 0)
		return;
	for (i = 0; i < FABRIC_CTL_CLIENTS; i++)
		if (sw->ctl[i].fd < 0) {
			struct timeval tv = { .tv_sec = 2 };

			/* Replies are written whole; a client that does not read is dropped. */
			setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
			sw->ctl[i].fd = fd;
			sw->ctl[i].have = 0;
			return;
		}
	fabric_log("control: more than %d clients; refused one", FABRIC_CTL_CLIENTS);
	close(fd);
}
