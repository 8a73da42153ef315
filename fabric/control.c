// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * qhca-fabric control: a unix socket that takes one command a line and answers each with
 * one line of JSON, the commands themselves, and timed events (at, script). The protocol is
 * in docs/fabric.md; tools/qhca fabric is one client of it, socat another.
 *
 * Every word of a command is the client's, and a script's every byte: each is checked
 * before use, a command that is refused changes nothing, and a reply is valid JSON (ASCII,
 * whatever bytes the command held) however long it gets. Scripts that load scripts nest at
 * most FABRIC_SCRIPT_DEPTH deep, and the work and memory of timed events are bounded
 * (fabric.h).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "fabric.h"

#define MAX_TOKENS	64
#define SCRIPT_MAX	(256u << 10)

#define sb_printf fabric_sb_printf

void fabric_sb_printf(struct fabric_sbuf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	while (!b->failed) {
		va_start(ap, fmt);
		n = vsnprintf(b->p ? b->p + b->len : NULL, b->p ? b->cap - b->len : 0, fmt, ap);
		va_end(ap);
		if (n < 0)
			break;
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
			break;
		b->p = p;
		b->cap = cap;
	}
	b->failed = true;
}

/* A JSON string of any bytes: what is not printable ASCII as \u00XX (bytes as Latin-1). */
static void sb_json_str(struct fabric_sbuf *b, const char *s)
{
	sb_printf(b, "\"");
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			sb_printf(b, "\\%c", c);
		else if (c < 0x20 || c >= 0x7f)
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

static void json_impair(struct fabric_sbuf *b, const struct fabric_impair *im)
{
	sb_printf(b, "{\"loss\":%.4g,\"reorder\":%.4g,\"dup\":%.4g,\"corrupt\":%.4g,"
		     "\"delay_us\":%u,\"jitter_us\":%u,\"rate_mbit\":%u,\"mtu\":%u,\"drop\":%u}",
		  im->loss / 1e4, im->reorder / 1e4, im->dup / 1e4, im->corrupt / 1e4,
		  im->delay_us, im->jitter_us, im->rate_mbit, im->mtu, im->drop);
}

static void json_stats(struct fabric_sbuf *b, const struct fabric_dir_stats *st)
{
	sb_printf(b, "{\"frames\":%llu,\"dropped\":%llu,\"reordered\":%llu,\"duplicated\":%llu,"
		     "\"corrupted\":%llu,\"delayed\":%llu}",
		  (unsigned long long)st->frames, (unsigned long long)st->dropped,
		  (unsigned long long)st->reordered, (unsigned long long)st->duplicated,
		  (unsigned long long)st->corrupted, (unsigned long long)st->delayed);
}

static void show(struct fabric *sw, struct fabric_sbuf *b)
{
	const struct fabric_timed *t;
	unsigned long pending = 0, delayed = sw->dl_n;
	int i;

	for (t = sw->timed; t; t = t->next)
		pending++;
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
		sb_printf(b, ",");
		fabric_ib_show(sw, b);
	}
}

/* ---------------------------------------------------------------- timed events */

static size_t timed_size(size_t cmd_len)
{
	return sizeof(struct fabric_timed) + cmd_len + 1;
}

/* A timed event: @cmd at @due_ns, from scripts nested @depth deep. */
static struct fabric_timed *timed_new(const char *cmd, uint64_t due_ns, int depth)
{
	size_t len = strlen(cmd);
	struct fabric_timed *t = malloc(timed_size(len));

	if (!t)
		return NULL;
	t->next = NULL;
	t->due_ns = due_ns;
	t->depth = depth;
	memcpy(t->cmd, cmd, len + 1);
	return t;
}

/* Into the list at @head by due time, after every event due no later (a stable order). */
static void timed_insert(struct fabric_timed **head, struct fabric_timed *t)
{
	struct fabric_timed **pp = head;

	while (*pp && (*pp)->due_ns <= t->due_ns)
		pp = &(*pp)->next;
	t->next = *pp;
	*pp = t;
}

/* Two sorted lists into one, @a's first among those due at the same time. */
static struct fabric_timed *timed_join(struct fabric_timed *a, struct fabric_timed *b)
{
	struct fabric_timed *head = NULL, **pp = &head;

	while (a && b) {
		struct fabric_timed **from = b->due_ns < a->due_ns ? &b : &a;

		*pp = *from;
		pp = &(*from)->next;
		*from = (*from)->next;
	}
	*pp = a ? a : b;
	return head;
}

/* Sort @list by due time, keeping the order of events due at the same time: a script's
 * events in any order cost n log n, not n squared. */
static struct fabric_timed *timed_sort(struct fabric_timed *list)
{
	struct fabric_timed *slow = list, *fast, *second;

	if (!list || !list->next)
		return list;
	for (fast = list->next; fast && fast->next; fast = fast->next->next)
		slow = slow->next;
	second = slow->next;
	slow->next = NULL;
	return timed_join(timed_sort(list), timed_sort(second));
}

/* May @n more events of @bytes in all be pending? 0, or -1 with the reason in @err. */
static int timed_room(const struct fabric *sw, size_t n, size_t bytes, char *err,
		      size_t errlen)
{
	if (n <= FABRIC_TIMED_MAX - sw->ntimed && bytes <= FABRIC_TIMED_BYTES - sw->timed_bytes)
		return 0;
	snprintf(err, errlen, "too many timed events: %u pending, %zu more would pass the limit "
		 "of %u events or %u MiB", sw->ntimed, n, FABRIC_TIMED_MAX,
		 FABRIC_TIMED_BYTES >> 20);
	return -1;
}

/* The events of @list join the pending ones, after those due at the same time. */
static void timed_merge(struct fabric *sw, struct fabric_timed *list)
{
	struct fabric_timed *t;

	for (t = list; t; t = t->next) {
		sw->ntimed++;
		sw->timed_bytes += timed_size(strlen(t->cmd));
	}
	sw->timed = timed_join(sw->timed, timed_sort(list));
}

static void timed_free(struct fabric_timed *list)
{
	struct fabric_timed *t;

	while ((t = list)) {
		list = t->next;
		free(t);
	}
}

static int exec_cmd(struct fabric *sw, char **tok, int n, bool dry, struct fabric_sbuf *reply,
		    char *err, size_t errlen);

/* One event of a script, "at TIME COMMAND" in @tok: pass 0 checks it and adds its size to
 * *@bytes, pass 1 makes it and appends it at **@tail. 0, or -1 with the reason in @err. */
static int script_event(struct fabric *sw, const char *path, int lineno, char **tok, int nt,
			int pass, uint64_t now, size_t *bytes, struct fabric_timed ***tail,
			char *err, size_t errlen)
{
	struct fabric_sbuf cmd = { 0 };
	struct fabric_timed *t;
	uint64_t at;
	int k;

	if (nt > MAX_TOKENS) {
		snprintf(err, errlen, "script %s line %d: more than %d words", path, lineno,
			 MAX_TOKENS);
		return -1;
	}
	if (nt < 3 || strcmp(tok[0], "at") || parse_time_ns(tok[1], &at)) {
		snprintf(err, errlen, "script %s line %d: expected 'at TIME COMMAND' (TIME: 2s, "
			 "500ms, 100us)", path, lineno);
		return -1;
	}
	if (pass == 0) {
		if (++sw->cmd_script_events > FABRIC_SCRIPT_CHECK_MAX) {
			snprintf(err, errlen, "script %s line %d: the scripts of one command hold "
				 "more than %d events", path, lineno, FABRIC_SCRIPT_CHECK_MAX);
			return -1;
		}
		/* The reason follows where the event is. */
		k = snprintf(err, errlen, "script %s line %d: ", path, lineno);
		if (k < 0 || (size_t)k >= errlen)
			k = (int)errlen - 1;
		if (exec_cmd(sw, tok + 2, nt - 2, true, NULL, err + k, errlen - (size_t)k))
			return -1;
		for (k = 2; k < nt; k++)
			*bytes += strlen(tok[k]) + (k > 2);
		*bytes += timed_size(0);
		return 0;
	}
	for (k = 2; k < nt; k++)
		sb_printf(&cmd, "%s%s", k > 2 ? " " : "", tok[k]);
	/* Times count from when the script was given. */
	t = cmd.failed ? NULL : timed_new(cmd.p, now + at, sw->cmd_depth);
	free(cmd.p);
	if (!t) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	**tail = t;	/* in the script's order, sorted at the end */
	*tail = &t->next;
	return 0;
}

/* The events of a script's @text (see load_script); @dry: only checked. */
static int script_events(struct fabric *sw, const char *path, const char *text, bool dry,
			 struct fabric_sbuf *reply, char *err, size_t errlen)
{
	struct fabric_timed *list = NULL, **tail = &list;
	uint64_t now = fabric_now_ns();
	char *copy = NULL, *line, *next, *ev, *save = NULL;
	size_t bytes = 0;
	int pass, events = 0;

	/* Pass 0 checks every event, pass 1 schedules them: a bad script changes nothing. */
	for (pass = 0; pass < (dry ? 1 : 2); pass++) {
		int lineno = 0;

		copy = strdup(text);
		if (!copy) {
			snprintf(err, errlen, "out of memory");
			goto bad;
		}
		events = 0;
		for (line = copy; line; line = next) {
			char *hash;

			next = strchr(line, '\n');
			if (next)
				*next++ = 0;
			lineno++;
			hash = strchr(line, '#');
			if (hash)
				*hash = 0;
			for (ev = strtok_r(line, ";", &save); ev; ev = strtok_r(NULL, ";", &save)) {
				char *tok[MAX_TOKENS + 1], *s2 = NULL, *w;
				int nt = 0;

				for (w = strtok_r(ev, " \t\r", &s2); w && nt <= MAX_TOKENS;
				     w = strtok_r(NULL, " \t\r", &s2))
					tok[nt++] = w;
				if (!nt)
					continue;
				if (script_event(sw, path, lineno, tok, nt, pass, now, &bytes,
						 &tail, err, errlen))
					goto bad;
				events++;
			}
		}
		free(copy);
		copy = NULL;
		if (!dry && pass == 0 && timed_room(sw, (size_t)events, bytes, err, errlen)) {
			char why[512];

			snprintf(why, sizeof(why), "%s", err);
			snprintf(err, errlen, "script %s: %s", path, why);
			goto bad;
		}
	}
	if (!dry)
		timed_merge(sw, list);
	if (reply)
		sb_printf(reply, ",\"events\":%d", events);
	return 0;
bad:
	free(copy);
	timed_free(list);
	return -1;
}

/* Read a script: events "at TIME COMMAND", one a line or separated by ';', '#' comments.
 * Scripts it loads are read and checked too, FABRIC_SCRIPT_DEPTH deep at most. */
static int load_script(struct fabric *sw, const char *path, bool dry, struct fabric_sbuf *reply,
		       char *err, size_t errlen)
{
	struct stat st;
	char *text;
	ssize_t n;
	size_t len = 0, cap;
	int fd, r;

	if (sw->cmd_depth >= FABRIC_SCRIPT_DEPTH) {
		snprintf(err, errlen, "script %s: scripts load scripts at most %d levels deep (one "
			 "that loads itself never ends)", path, FABRIC_SCRIPT_DEPTH);
		return -1;
	}
	if (++sw->cmd_scripts > FABRIC_SCRIPT_LOADS_MAX) {
		snprintf(err, errlen, "script %s: one command reads at most %d scripts, nested "
			 "ones included", path, FABRIC_SCRIPT_LOADS_MAX);
		return -1;
	}
	/* Not a FIFO or a device: opening or reading one could wait for ever. */
	fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	if (fd < 0 || fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		snprintf(err, errlen, "script %s: %s", path, fd < 0 ? strerror(errno) :
			 "not a regular file");
		if (fd >= 0)
			close(fd);
		return -1;
	}
	/* Room for the file and a byte more: one that grew while read is noticed. */
	cap = st.st_size < SCRIPT_MAX ? (size_t)st.st_size + 1 : SCRIPT_MAX + 1;
	text = malloc(cap + 1);
	n = 0;
	while (text && len < cap) {
		n = read(fd, text + len, cap - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	r = n < 0 ? errno : 0;
	close(fd);
	if (!text || r || len == cap || len > FABRIC_SCRIPT_READ_MAX - sw->cmd_script_bytes) {
		snprintf(err, errlen, "script %s: %s", path, !text ? "out of memory" :
			 r ? strerror(r) : len > SCRIPT_MAX ? "longer than 256 KiB" :
			 len == cap ? "changed while it was read" :
			 "the scripts of one command hold more than 4 MiB");
		free(text);
		return -1;
	}
	text[len] = 0;
	sw->cmd_script_bytes += len;
	sw->cmd_depth++;
	r = script_events(sw, path, text, dry, reply, err, errlen);
	sw->cmd_depth--;
	free(text);
	return r;
}

/* Each KEY=VALUE is parsed once, then the fields it names are set on every port: the work
 * is the words plus the ports, not their product. */
static int cmd_set(struct fabric *sw, char **tok, int n, bool dry, char *err, size_t errlen)
{
	struct fabric_impair given = { 0 };
	bool named[sizeof(given) / sizeof(uint32_t)] = { false };
	int dmin = 0, dmax = 1, i, d, f, k = 1, off;
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
	for (; k < n; k++) {
		off = fabric_impair_parse(&given, tok[k], err, errlen);
		if (off < 0)
			return -1;
		named[(size_t)off / sizeof(uint32_t)] = true;
	}
	if (dry)
		return 0;
	for (i = 0; i < sw->nports; i++)
		for (d = dmin; (set >> i & 1) && d <= dmax; d++)
			for (f = 0; f < (int)(sizeof(named) / sizeof(named[0])); f++)
				if (named[f])
					memcpy((char *)&sw->port[i].imp[d] + f * sizeof(uint32_t),
					       (char *)&given + f * sizeof(uint32_t),
					       sizeof(uint32_t));
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

static int exec_cmd(struct fabric *sw, char **tok, int n, bool dry, struct fabric_sbuf *reply,
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
		struct fabric_sbuf cmd = { 0 };
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
		if (cmd.failed) {
			free(cmd.p);
			snprintf(err, errlen, "out of memory");
			return -1;
		}
		r = timed_room(sw, 1, timed_size(strlen(cmd.p)), err, errlen);
		if (!r && fabric_schedule(sw, v, cmd.p)) {
			snprintf(err, errlen, "out of memory");
			r = -1;
		}
		free(cmd.p);
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

/* Run one command, as if from scripts nested @depth deep (0: the control socket). */
static char *run_command(struct fabric *sw, const char *line, int depth)
{
	char *copy = strdup(line), *tok[MAX_TOKENS], *save = NULL, *t;
	struct fabric_sbuf reply = { 0 }, out = { 0 };
	char err[1024] = "";
	int n = 0, r;

	if (!copy)
		return NULL;
	sw->cmd_depth = depth;
	sw->cmd_scripts = 0;
	sw->cmd_script_bytes = 0;
	sw->cmd_script_events = 0;
	for (t = strtok_r(copy, " \t\r\n", &save); t; t = strtok_r(NULL, " \t\r\n", &save)) {
		if (n == MAX_TOKENS) {
			snprintf(err, sizeof(err), "more than %d words", MAX_TOKENS);
			break;
		}
		tok[n++] = t;
	}
	r = err[0] ? -1 : exec_cmd(sw, tok, n, false, &reply, err, sizeof(err));
	if (!r && reply.failed) {
		r = -1;
		snprintf(err, sizeof(err), "out of memory");
	}
	if (r) {
		sb_printf(&out, "{\"ok\":false,\"error\":");
		sb_json_str(&out, err[0] ? err : "failed");
		sb_printf(&out, "}");
	} else {
		sb_printf(&out, "{\"ok\":true%s}", reply.p ? reply.p : "");
	}
	if (n && strcmp(tok[0], "show"))
		fabric_log("control: %s: %s", line, r ? err : "ok");
	sw->cmd_depth = 0;
	free(reply.p);
	free(copy);
	if (out.failed) {
		free(out.p);
		return strdup("{\"ok\":false,\"error\":\"out of memory\"}");
	}
	return out.p;
}

char *fabric_command(struct fabric *sw, const char *line)
{
	return run_command(sw, line, 0);
}

int fabric_schedule(struct fabric *sw, uint64_t delay_ns, const char *cmd)
{
	size_t size = timed_size(strlen(cmd));
	uint64_t now = fabric_now_ns();
	struct fabric_timed *t;

	if (sw->ntimed >= FABRIC_TIMED_MAX || size > FABRIC_TIMED_BYTES - sw->timed_bytes)
		return -1;
	t = timed_new(cmd, delay_ns < UINT64_MAX - now ? now + delay_ns : UINT64_MAX,
		      sw->cmd_depth);
	if (!t)
		return -1;
	timed_insert(&sw->timed, t);
	sw->ntimed++;
	sw->timed_bytes += size;
	return 0;
}

/* Due events run for this long at most, then the switch forwards again before the rest. */
#define TIMED_RUN_NS	10000000ull

uint64_t fabric_run_timed(struct fabric *sw, uint64_t now)
{
	uint64_t start = fabric_now_ns();
	struct fabric_timed *t;

	while ((t = sw->timed) && t->due_ns <= now) {
		sw->timed = t->next;
		sw->ntimed--;
		sw->timed_bytes -= timed_size(strlen(t->cmd));
		/* An event runs as deep in scripts as the script it came from: what it loads is
		 * a level deeper. Logged with its result. */
		free(run_command(sw, t->cmd, t->depth));
		free(t);
		if (sw->timed && sw->timed->due_ns <= now && fabric_now_ns() - start > TIMED_RUN_NS)
			return 0;
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
	c->eof = false;
	free(c->out);
	c->out = NULL;
	c->out_head = c->out_len = c->out_cap = 0;
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
	sw->ntimed = 0;
	sw->timed_bytes = 0;
}

static bool client_has_line(const struct fabric_ctl_client *c)
{
	return memchr(c->buf, '\n', c->have) != NULL;
}

/* Commands to run now: a whole line, and not too many replies unread. */
static bool client_ready(const struct fabric_ctl_client *c)
{
	return c->fd >= 0 && c->out_len < FABRIC_CTL_OUT_PAUSE && client_has_line(c);
}

bool fabric_control_pending(const struct fabric *sw)
{
	int i;

	for (i = 0; sw->ctl_fd >= 0 && i < FABRIC_CTL_CLIENTS; i++)
		if (client_ready(&sw->ctl[i]))
			return true;
	return false;
}

int fabric_control_pollfds(struct fabric *sw, struct pollfd *pfd)
{
	int i;

	if (sw->ctl_fd < 0)
		return 0;
	pfd[0] = (struct pollfd){ .fd = sw->ctl_fd, .events = POLLIN };
	for (i = 0; i < FABRIC_CTL_CLIENTS; i++) {
		const struct fabric_ctl_client *c = &sw->ctl[i];

		pfd[1 + i] = (struct pollfd){ .fd = c->fd };
		if (c->fd >= 0 && !c->eof && c->have < sizeof(c->buf))
			pfd[1 + i].events |= POLLIN;
		if (c->fd >= 0 && c->out_len)
			pfd[1 + i].events |= POLLOUT;
	}
	return 1 + FABRIC_CTL_CLIENTS;
}

/* Write what the client's socket takes of its replies, without waiting. -1: closed. */
static int client_flush(struct fabric_ctl_client *c)
{
	while (c->out_len) {
		ssize_t r = send(c->fd, c->out + c->out_head, c->out_len,
				 MSG_NOSIGNAL | MSG_DONTWAIT);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return 0;
		if (r <= 0) {
			client_close(c);
			return -1;
		}
		c->out_head += (size_t)r;
		c->out_len -= (size_t)r;
		c->out_since_ns = fabric_now_ns();
	}
	c->out_head = 0;
	if (c->out_cap > FABRIC_CTL_OUT_PAUSE) {	/* a big reply went: its memory too */
		free(c->out);
		c->out = NULL;
		c->out_cap = 0;
	}
	return 0;
}

/* A reply line after the others; -1: past FABRIC_CTL_OUT_MAX or out of memory, closed. */
static int client_queue(struct fabric_ctl_client *c, const char *s, size_t len)
{
	if (c->out_len + len > FABRIC_CTL_OUT_MAX) {
		fabric_log("control: a client left more than %u bytes of replies unread; "
			   "disconnected", FABRIC_CTL_OUT_MAX);
		client_close(c);
		return -1;
	}
	if (c->out_head + c->out_len + len > c->out_cap) {
		if (c->out_len)
			memmove(c->out, c->out + c->out_head, c->out_len);
		c->out_head = 0;
	}
	if (c->out_len + len > c->out_cap) {
		size_t cap = c->out_cap ? c->out_cap : 4096;
		char *p;

		while (cap < c->out_len + len)
			cap *= 2;
		p = realloc(c->out, cap);
		if (!p) {
			fabric_log("control: out of memory for a reply; client disconnected");
			client_close(c);
			return -1;
		}
		c->out = p;
		c->out_cap = cap;
	}
	if (!c->out_len)
		c->out_since_ns = fabric_now_ns();
	memcpy(c->out + c->out_head + c->out_len, s, len);
	c->out_len += len;
	return 0;
}

static void client_read(struct fabric_ctl_client *c)
{
	static const char too_long[] = "{\"ok\":false,\"error\":\"line longer than 4096 bytes\"}\n";
	ssize_t n;

	if (c->eof || c->have == sizeof(c->buf))
		return;
	n = recv(c->fd, c->buf + c->have, sizeof(c->buf) - c->have, MSG_DONTWAIT);
	if (n == 0) {
		c->eof = true;	/* what it sent is still run and answered */
		return;
	}
	if (n < 0) {
		if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
			client_close(c);
		return;
	}
	c->have += (size_t)n;
	if (c->have == sizeof(c->buf) && !client_has_line(c)) {
		c->have = 0;
		c->eof = true;	/* answered, then closed */
		client_queue(c, too_long, sizeof(too_long) - 1);
	}
}

/* Run the client's waiting commands, FABRIC_CTL_ROUND_CMDS or FABRIC_CTL_ROUND_NS at most;
 * the others wait for the next round, and so do they while its replies are unread. */
static void client_run(struct fabric *sw, struct fabric_ctl_client *c)
{
	uint64_t start = fabric_now_ns();
	int k;

	for (k = 0; k < FABRIC_CTL_ROUND_CMDS && client_ready(c); k++) {
		char *nl = memchr(c->buf, '\n', c->have), *json;
		size_t used = (size_t)(nl - c->buf) + 1, len;
		int r;

		if (k && fabric_now_ns() - start > FABRIC_CTL_ROUND_NS)
			break;
		*nl = 0;
		json = fabric_command(sw, c->buf);
		memmove(c->buf, c->buf + used, c->have - used);
		c->have -= used;
		if (!json) {
			client_close(c);
			return;
		}
		len = strlen(json);
		json[len++] = '\n';	/* the terminating NUL's place: fabric_command allocated it */
		r = client_queue(c, json, len);
		free(json);
		if (r)
			return;
	}
	client_flush(c);
}

void fabric_control_handle(struct fabric *sw, const struct pollfd *pfd, int n)
{
	uint64_t now = fabric_now_ns();
	int i, fd;

	if (!n)
		return;
	for (i = 0; i < FABRIC_CTL_CLIENTS; i++) {
		struct fabric_ctl_client *c = &sw->ctl[i];
		short ev = pfd[1 + i].revents;

		if (c->fd < 0 || c->fd != pfd[1 + i].fd)
			continue;
		if ((ev & (POLLOUT | POLLHUP | POLLERR)) && client_flush(c))
			continue;
		if (ev & (POLLIN | POLLHUP | POLLERR))
			client_read(c);
		if (c->fd >= 0)
			client_run(sw, c);
		if (c->fd < 0)
			continue;
		if (c->eof && !c->out_len && !client_has_line(c)) {
			client_close(c);
		} else if (c->out_len && now > c->out_since_ns &&
			   now - c->out_since_ns > FABRIC_CTL_STALL_MS * 1000000ull) {
			fabric_log("control: a client read none of its replies for %d ms; "
				   "disconnected", FABRIC_CTL_STALL_MS);
			client_close(c);
		} else if ((ev & (POLLHUP | POLLERR)) && !c->out_len && !client_ready(c)) {
			client_close(c);	/* gone, and nothing it could still be sent */
		}
	}
	if (!pfd[0].revents)
		return;
	fd = accept4(sw->ctl_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
	if (fd < 0)
		return;
	for (i = 0; i < FABRIC_CTL_CLIENTS; i++)
		if (sw->ctl[i].fd < 0) {
			sw->ctl[i].fd = fd;
			sw->ctl[i].have = 0;
			sw->ctl[i].eof = false;
			sw->ctl[i].out_head = sw->ctl[i].out_len = 0;
			return;
		}
	fabric_log("control: more than %d clients; refused one", FABRIC_CTL_CLIENTS);
	close(fd);
}
