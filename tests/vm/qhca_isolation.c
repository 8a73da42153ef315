// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * qhca-isolation: remote isolation between two guests. The server (guest 2) registers
 * regions of 5000 bytes that start 100 bytes into a page, with guard bytes around each:
 *
 *   RW     remote write, read and atomic        RO    remote read only
 *   NONE   local access only                    PD2   full remote access, another PD
 *   STALE  registered and deregistered before its key is handed out
 *
 * The client (guest 1) then tries, each on its own RC QP (an access error ends a QP),
 * operations the server did not grant: forged, stale and unknown keys, ranges one byte
 * past either end or wrapping, writes to read-only regions, reads and atomics without the
 * right, keys of another PD and a QP without remote write; plus UC writes with a bad key
 * (silently dropped; the QP keeps working). Valid WRITE, READ and FETCH_ADD are the
 * controls. The client checks every completion status and that a refused READ delivered
 * nothing; the server checks every byte of its buffer against what the granted operations
 * should have left, and the state of each of its QPs.
 *
 *   qhca-isolation server [PORT]         qhca-isolation client SERVER_IP [PORT]
 */
#include <arpa/inet.h>
#include <endian.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "vm_verbs.h"

#define PAGE		4096
#define MR_OFF		100		/* regions start this far into their first page */
#define MR_LEN		5000		/* so they end inside their second page */
#define STRIDE		(3 * PAGE)	/* region, then guard bytes up to the next one */
#define ALL_REMOTE	(IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | \
			 IBV_ACCESS_REMOTE_ATOMIC)

enum { RW, RO, NONE, PD2, STALE, NMR };

enum op { WRITE, READ, FADD };

enum { AS_IS, KEY_BYTE, NO_KEY };	/* what the client does to the rkey */

static const struct iso_case {
	const char *name;
	enum op op;
	int mr;
	long long off;			/* from the region's start */
	unsigned len;
	int key;
	int qp_no_write;		/* the server's QP grants no remote write */
	int status;			/* expected completion status */
} cases[] = {
	{ "valid WRITE of the whole region (control)", WRITE, RW, 0, MR_LEN, AS_IS, 0,
	  IBV_WC_SUCCESS },
	{ "valid READ of the whole region (control)", READ, RW, 0, MR_LEN, AS_IS, 0,
	  IBV_WC_SUCCESS },
	{ "valid FETCH_ADD (control)", FADD, RW, 4, 8, AS_IS, 0, IBV_WC_SUCCESS },
	{ "WRITE with a forged key byte", WRITE, RW, 0, 64, KEY_BYTE, 0, IBV_WC_REM_ACCESS_ERR },
	{ "WRITE with a key of no region", WRITE, RW, 0, 64, NO_KEY, 0, IBV_WC_REM_ACCESS_ERR },
	{ "WRITE with the key of a deregistered region", WRITE, STALE, 0, 64, AS_IS, 0,
	  IBV_WC_REM_ACCESS_ERR },
	{ "WRITE one byte past the end", WRITE, RW, 1, MR_LEN, AS_IS, 0, IBV_WC_REM_ACCESS_ERR },
	{ "WRITE starting one byte before the start", WRITE, RW, -1, 2, AS_IS, 0,
	  IBV_WC_REM_ACCESS_ERR },
	{ "WRITE whose range wraps around 2^64", WRITE, RW, -1, 64, AS_IS, 0,
	  IBV_WC_REM_ACCESS_ERR },	/* address replaced below */
	{ "WRITE to a read-only region", WRITE, RO, 0, 64, AS_IS, 0, IBV_WC_REM_ACCESS_ERR },
	{ "WRITE to a region without remote access", WRITE, NONE, 0, 64, AS_IS, 0,
	  IBV_WC_REM_ACCESS_ERR },
	{ "WRITE with another PD's key", WRITE, PD2, 0, 64, AS_IS, 0, IBV_WC_REM_ACCESS_ERR },
	{ "WRITE through a QP without remote write", WRITE, RW, 0, 64, AS_IS, 1,
	  IBV_WC_REM_ACCESS_ERR },
	{ "READ from a region without remote access", READ, NONE, 0, 64, AS_IS, 0,
	  IBV_WC_REM_ACCESS_ERR },
	{ "READ one byte past the end", READ, RW, 500, MR_LEN - 499, AS_IS, 0,
	  IBV_WC_REM_ACCESS_ERR },
	{ "READ with another PD's key", READ, PD2, 0, 64, AS_IS, 0, IBV_WC_REM_ACCESS_ERR },
	{ "READ with a forged key byte", READ, RO, 0, 64, KEY_BYTE, 0, IBV_WC_REM_ACCESS_ERR },
	{ "FETCH_ADD on a read-only region", FADD, RO, 4, 8, AS_IS, 0, IBV_WC_REM_ACCESS_ERR },
	{ "FETCH_ADD past the end", FADD, RW, MR_LEN - 4, 8, AS_IS, 0, IBV_WC_REM_ACCESS_ERR },
};

#define NCASE		(int)(sizeof(cases) / sizeof(cases[0]))
#define WRAP_CASE	8
#define UC_QP		NCASE		/* one more QP, UC */
#define NQP		(NCASE + 1)
#define FADD_BY		5
#define UC_LEN		16
#define UC_OFF		64		/* where the UC WRITE lands in RW */

struct info {
	union ibv_gid gid;
	uint32_t qpn[NQP];
	uint64_t addr[NMR];
	uint32_t rkey[NMR];
};

static int fails;

static void expect(int ok, const char *what)
{
	printf("%s - %s\n", ok ? "ok" : "not ok", what);
	fails += !ok;
}

static void die(const char *what)
{
	fprintf(stderr, "qhca-isolation: %s\n", what);
	exit(2);
}

static void xfer(int fd, void *p, size_t n, int out)
{
	while (n) {
		ssize_t r = out ? write(fd, p, n) : read(fd, p, n);

		if (r <= 0)
			die("connection to the peer lost");
		p = (char *)p + r;
		n -= (size_t)r;
	}
}

static uint8_t pattern(size_t i)
{
	return (uint8_t)(i * 131 + 17);
}

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_cq *cq;
static struct ibv_qp *qp[NQP];

static void setup(struct info *me)
{
	int i;

	ctx = vm_open("qhca_0");
	if (!ctx || ibv_query_gid(ctx, 1, vm_roce_gid(ctx), &me->gid))
		die("cannot open qhca_0 or read its GID");
	pd = ibv_alloc_pd(ctx);
	cq = ibv_create_cq(ctx, 4 * NQP, NULL, NULL, 0);
	if (!pd || !cq)
		die("cannot allocate a PD or CQ");
	for (i = 0; i < NQP; i++) {
		struct ibv_qp_init_attr a = {
			.send_cq = cq, .recv_cq = cq,
			.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1,
				 .max_recv_sge = 1 },
			.qp_type = i == UC_QP ? IBV_QPT_UC : IBV_QPT_RC,
		};

		qp[i] = ibv_create_qp(pd, &a);
		if (!qp[i])
			die("cannot create a QP");
		me->qpn[i] = qp[i]->qp_num;
	}
}

static void connect_all(const struct info *peer, int server)
{
	int i;

	for (i = 0; i < NQP; i++) {
		unsigned access = server && i < NCASE && cases[i].qp_no_write ?
				  IBV_ACCESS_REMOTE_READ : ALL_REMOTE;

		if (vm_connect(qp[i], access, peer->qpn[i], vm_roce_gid(ctx), &peer->gid))
			die("cannot bring a QP to RTS");
	}
}

static int wait_cq(struct ibv_wc *wc)
{
	struct timespec t0, t;
	int n;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		n = ibv_poll_cq(cq, 1, wc);
		if (n)
			return n;
		clock_gettime(CLOCK_MONOTONIC, &t);
	} while (t.tv_sec - t0.tv_sec < 20);
	return 0;
}

/* ---------------------------------------------------------------- server */
static int server(int port)
{
	size_t size = (size_t)NMR * STRIDE + PAGE, i;
	uint8_t *buf = aligned_alloc(PAGE, size), *want = malloc(size);
	static const unsigned acc[NMR] = {
		[RW] = IBV_ACCESS_LOCAL_WRITE | ALL_REMOTE, [RO] = IBV_ACCESS_REMOTE_READ,
		[NONE] = IBV_ACCESS_LOCAL_WRITE, [PD2] = IBV_ACCESS_LOCAL_WRITE | ALL_REMOTE,
		[STALE] = IBV_ACCESS_LOCAL_WRITE | ALL_REMOTE,
	};
	struct ibv_mr *mr[NMR];
	struct ibv_pd *pd2;
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port) };
	struct info me = {}, peer;
	struct timespec t0, t;
	int ls, fd, m, one = 1;
	uint64_t v;
	char done;

	if (!buf || !want)
		die("out of memory");
	for (i = 0; i < size; i++)
		buf[i] = want[i] = pattern(i);
	setup(&me);
	pd2 = ibv_alloc_pd(ctx);
	if (!pd2)
		die("cannot allocate a second PD");
	/* The stale region first, so that a later region may get its slot back. */
	for (m = NMR - 1; m >= 0; m--) {
		mr[m] = ibv_reg_mr(m == PD2 ? pd2 : pd, buf + (size_t)m * STRIDE + PAGE + MR_OFF,
				   MR_LEN, (int)acc[m]);
		if (!mr[m])
			die("cannot register a region");
		me.addr[m] = (uintptr_t)mr[m]->addr;
		me.rkey[m] = mr[m]->rkey;
		if (m == STALE && ibv_dereg_mr(mr[m]))
			die("cannot deregister");
	}
	for (m = 0; m < NMR; m++)
		printf("# region %d at %p rkey 0x%x\n", m, (void *)(uintptr_t)me.addr[m], me.rkey[m]);

	ls = socket(AF_INET, SOCK_STREAM, 0);
	setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (ls < 0 || bind(ls, (struct sockaddr *)&sa, sizeof(sa)) || listen(ls, 1))
		die("cannot listen");
	fd = accept(ls, NULL, NULL);
	if (fd < 0)
		die("accept failed");
	xfer(fd, &peer, sizeof(peer), 0);
	xfer(fd, &me, sizeof(me), 1);
	connect_all(&peer, 1);
	xfer(fd, &done, 1, 1);		/* ready */
	xfer(fd, &done, 1, 0);		/* the client finished */

	/* What the granted operations leave: the control WRITE, FETCH_ADD and UC WRITE. */
	memset(want + PAGE + MR_OFF, 0xc1, MR_LEN);
	memcpy(&v, want + PAGE + MR_OFF + 4, 8);
	v += FADD_BY;
	memcpy(want + PAGE + MR_OFF + 4, &v, 8);
	memset(want + PAGE + MR_OFF + UC_OFF, 0xd2, UC_LEN);
	/* UC has no acknowledgement: give its last WRITE a moment to land. */
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		if (!memcmp(buf, want, size))
			break;
		usleep(10000);
		clock_gettime(CLOCK_MONOTONIC, &t);
	} while (t.tv_sec - t0.tv_sec < 3);
	for (i = 0; i < size && buf[i] == want[i]; i++)
		;
	if (i < size)
		printf("# first difference at offset %zu (region %zu, %+lld): 0x%02x, want 0x%02x\n",
		       i, i / STRIDE, (long long)(i % STRIDE) - PAGE - MR_OFF, buf[i], want[i]);
	expect(i == size, "server: every byte is what the granted operations left");
	for (m = 0; m < NQP; m++) {
		struct ibv_qp_attr a;
		struct ibv_qp_init_attr ia;
		int want_state = m < NCASE && cases[m].status != IBV_WC_SUCCESS ? IBV_QPS_ERR :
				 IBV_QPS_RTS;
		char what[160];

		snprintf(what, sizeof(what), "server: QP of \"%s\" is %s",
			 m < NCASE ? cases[m].name : "UC WRITEs",
			 want_state == IBV_QPS_ERR ? "in the error state" : "still in RTS");
		expect(!ibv_query_qp(qp[m], &a, IBV_QP_STATE, &ia) && (int)a.qp_state == want_state,
		       what);
	}
	xfer(fd, &done, 1, 1);
	printf("qhca-isolation server: %s\n", fails ? "FAIL" : "PASS");
	return fails ? 1 : 0;
}

/* ---------------------------------------------------------------- client */
static int post(int i, enum op op, struct ibv_mr *lmr, void *laddr, uint64_t raddr,
		uint32_t rkey, unsigned len)
{
	struct ibv_sge s = { (uintptr_t)laddr, len, lmr->lkey };
	struct ibv_send_wr w = { .wr_id = (uint64_t)i, .sg_list = &s, .num_sge = 1,
				 .send_flags = IBV_SEND_SIGNALED }, *bad;

	if (op == FADD) {
		w.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
		w.wr.atomic.remote_addr = raddr;
		w.wr.atomic.rkey = rkey;
		w.wr.atomic.compare_add = FADD_BY;
	} else {
		w.opcode = op == WRITE ? IBV_WR_RDMA_WRITE : IBV_WR_RDMA_READ;
		w.wr.rdma.remote_addr = raddr;
		w.wr.rdma.rkey = rkey;
	}
	return ibv_post_send(qp[i], &w, &bad);
}

static int client(const char *host, int port)
{
	uint8_t *src = aligned_alloc(PAGE, 2 * PAGE), *dst = aligned_alloc(PAGE, 2 * PAGE);
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port) };
	struct ibv_mr *smr, *dmr;
	struct info me = {}, peer;
	struct ibv_wc wc;
	char done = 1, what[200];
	int fd, i;
	size_t k;

	if (!src || !dst || inet_pton(AF_INET, host, &sa.sin_addr) != 1)
		die("bad address or out of memory");
	memset(src, 0xc1, 2 * PAGE);
	setup(&me);
	smr = ibv_reg_mr(pd, src, 2 * PAGE, IBV_ACCESS_LOCAL_WRITE);
	dmr = ibv_reg_mr(pd, dst, 2 * PAGE, IBV_ACCESS_LOCAL_WRITE);
	if (!smr || !dmr)
		die("cannot register local buffers");
	fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)))
		die("cannot connect to the server");
	xfer(fd, &me, sizeof(me), 1);
	xfer(fd, &peer, sizeof(peer), 0);
	connect_all(&peer, 0);
	xfer(fd, &done, 1, 0);

	for (i = 0; i < NCASE; i++) {
		const struct iso_case *c = &cases[i];
		uint64_t raddr = peer.addr[c->mr] + (uint64_t)c->off;
		uint32_t rkey = peer.rkey[c->mr];

		if (i == WRAP_CASE)
			raddr = 0xffffffffffffffe0ull;	/* 64 bytes from here wrap */
		if (c->key == KEY_BYTE)
			rkey ^= 0x5a;
		else if (c->key == NO_KEY)
			rkey = 0xfffff0a5;
		memset(dst, 0xee, 2 * PAGE);
		if (post(i, c->op, c->op == READ || c->op == FADD ? dmr : smr,
			 c->op == WRITE ? (void *)src : (void *)dst, raddr, rkey, c->len)) {
			snprintf(what, sizeof(what), "client: %s: post failed", c->name);
			expect(0, what);
			continue;
		}
		if (!wait_cq(&wc)) {
			snprintf(what, sizeof(what), "client: %s: no completion in 20 s", c->name);
			expect(0, what);
			continue;
		}
		snprintf(what, sizeof(what), "client: %s: %s", c->name,
			 ibv_wc_status_str(wc.status));
		expect(wc.wr_id == (uint64_t)i && (int)wc.status == c->status, what);
		if (c->op == READ || c->op == FADD) {
			/* A control READ brings the region; a refused one brings nothing. */
			for (k = 0; k < 2 * PAGE; k++) {
				uint8_t w = 0xee;

				if (c->status == IBV_WC_SUCCESS && k < c->len)
					w = 0xc1;
				if (dst[k] != w)
					break;
			}
			snprintf(what, sizeof(what), "client: %s: %s", c->name,
				 c->status == IBV_WC_SUCCESS ? "data as written" :
				 "no byte delivered");
			expect(k == 2 * PAGE, what);
		}
	}

	/* UC: a WRITE with a forged key is dropped, the QP stays usable. */
	memset(src, 0xd2, UC_LEN);
	expect(!post(UC_QP, WRITE, smr, src, peer.addr[RW] + UC_OFF, peer.rkey[RW] ^ 0x5a,
		     UC_LEN) &&
	       wait_cq(&wc) && wc.status == IBV_WC_SUCCESS,
	       "client: UC WRITE with a forged key completes locally");
	expect(!post(UC_QP, WRITE, smr, src, peer.addr[RO], peer.rkey[RO], UC_LEN) &&
	       wait_cq(&wc) && wc.status == IBV_WC_SUCCESS,
	       "client: UC WRITE to a read-only region completes locally");
	expect(!post(UC_QP, WRITE, smr, src, peer.addr[RW] + UC_OFF, peer.rkey[RW], UC_LEN) &&
	       wait_cq(&wc) && wc.status == IBV_WC_SUCCESS,
	       "client: UC WRITE with the right key completes");
	xfer(fd, &done, 1, 1);
	xfer(fd, &done, 1, 0);		/* the server has checked */
	printf("qhca-isolation client: %s\n", fails ? "FAIL" : "PASS");
	return fails ? 1 : 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc >= 2 && !strcmp(argv[1], "server"))
		return server(argc > 2 ? atoi(argv[2]) : 18600);
	if (argc >= 3 && !strcmp(argv[1], "client"))
		return client(argv[2], argc > 3 ? atoi(argv[3]) : 18600);
	fprintf(stderr, "usage: qhca-isolation server [PORT] | client SERVER_IP [PORT]\n");
	return 2;
}
