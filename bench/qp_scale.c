// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * qhca-qp-scale: how many RC QPs one device takes, and what each costs. A guest program
 * (built into the image by scripts/build-image.sh; bench/qp-scale.sh runs it and reads the
 * host's side). It creates RC QPs with the smallest queues (one send and one receive WQE
 * of one SGE, no inline data; two CQs shared by all, so CQs are not the limit) until the
 * device refuses one or -n is reached, connects them in pairs (QP 2i with QP 2i+1, over
 * the device's loopback to its own RoCE v2 GID), moves one checked 8-byte SEND each way
 * over every pair (so every QP sends and receives one message), destroys them all, and
 * prints: the QPs created and what stopped it (errno), the time per create (mean; the
 * first and the last 1000 to show it does not grow), per modify (RESET to RTS), per
 * message and per destroy, and the guest's memory per QP. The last line is the same as
 * one JSON object.
 *
 *   qhca-qp-scale [-d DEV] [-n N] [-g GID_INDEX] [-m MIB] [-p PATH]
 *     -n N     create at most N QPs (default: until the device or the guest refuses)
 *     -m MIB   stop creating when the guest's MemAvailable falls below MIB (default 64):
 *              ring pages are pinned, and the OOM killer would end the run instead
 *     -p PATH  with every QP connected and used, create PATH.ready and wait for PATH.go
 *              before destroying (bench/qp-scale.sh reads QEMU's memory meanwhile)
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "../tests/vm/vm_verbs.h"

#define CQ_ENTRIES	16
#define OP_TIMEOUT_S	10.0
#define TAIL		1000	/* the first and last creates compared */

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void die(const char *what)
{
	fprintf(stderr, "qhca-qp-scale: %s: %s\n", what, strerror(errno));
	exit(1);
}

/* A field of /proc/meminfo or /proc/self/status in KiB, or -1. */
static long proc_kib(const char *file, const char *field)
{
	size_t flen = strlen(field);
	char line[256];
	long v = -1;
	FILE *f = fopen(file, "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, field, flen) && line[flen] == ':') {
			v = strtol(line + flen + 1, NULL, 10);
			break;
		}
	fclose(f);
	return v;
}

struct mem {
	long avail, slab, rss, pin;	/* KiB */
};

static struct mem mem_now(void)
{
	struct mem m = {
		.avail = proc_kib("/proc/meminfo", "MemAvailable"),
		.slab = proc_kib("/proc/meminfo", "Slab"),
		.rss = proc_kib("/proc/self/status", "VmRSS"),
		.pin = proc_kib("/proc/self/status", "VmPin"),
	};

	return m;
}

/* The RoCE v2 GID of an IPv4 address on port 1, or -1. */
static int find_gid(struct ibv_context *ctx, int tbl_len)
{
	static const uint8_t v4[12] = { [10] = 0xff, [11] = 0xff };
	struct ibv_gid_entry e;
	int i;

	for (i = 0; i < tbl_len; i++)
		if (!ibv_query_gid_ex(ctx, 1, i, &e, 0) && e.gid_type == IBV_GID_TYPE_ROCE_V2 &&
		    !memcmp(e.gid.raw, v4, sizeof(v4)))
			return i;
	return -1;
}

/* RESET -> INIT -> RTR -> RTS towards @dest on our own GID; each step's time added to t[]. */
static int connect_qp(struct ibv_qp *qp, uint32_t dest, int gid_index, const union ibv_gid *gid,
		      double t[3])
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1,
				 .qp_access_flags = IBV_ACCESS_LOCAL_WRITE };
	double t0 = now(), t1;

	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			  IBV_QP_ACCESS_FLAGS))
		return -1;
	t1 = now();
	t[0] += t1 - t0;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = dest;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = *gid;
	a.ah_attr.grh.sgid_index = gid_index;
	a.ah_attr.grh.hop_limit = 64;
	a.ah_attr.port_num = 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			  IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		return -1;
	t0 = now();
	t[1] += t0 - t1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT |
			  IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC))
		return -1;
	t[2] += now() - t0;
	return 0;
}

/* Poll @cq for @n completions of @opcode; each must be a success of 8 bytes. */
static int poll_n(struct ibv_cq *cq, int n, enum ibv_wc_opcode opcode)
{
	double deadline = now() + OP_TIMEOUT_S;
	struct ibv_wc wc[2];
	int got = 0, k, i;

	while (got < n) {
		k = ibv_poll_cq(cq, n - got, wc);
		if (k < 0)
			return -1;
		for (i = 0; i < k; i++)
			if (wc[i].status != IBV_WC_SUCCESS || wc[i].opcode != opcode ||
			    (opcode == IBV_WC_RECV && wc[i].byte_len != 8)) {
				fprintf(stderr, "qhca-qp-scale: QP 0x%x wr_id %" PRIu64
					": %s, opcode %d, %u bytes\n", wc[i].qp_num, wc[i].wr_id,
					ibv_wc_status_str(wc[i].status), wc[i].opcode,
					wc[i].byte_len);
				return -1;
			}
		got += k;
		if (!k && now() > deadline) {
			fprintf(stderr, "qhca-qp-scale: no completion in %.0f s\n", OP_TIMEOUT_S);
			return -1;
		}
	}
	return 0;
}

static double mean_us(const double *t, size_t from, size_t to)
{
	double s = 0;
	size_t i;

	for (i = from; i < to; i++)
		s += t[i];
	return to > from ? s * 1e6 / (double)(to - from) : 0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* The median of t[from..to) in us (sorts a copy). */
static double median_us(const double *t, size_t from, size_t to)
{
	double *c, m;

	if (to <= from || !(c = malloc((to - from) * sizeof(*c))))
		return 0;
	memcpy(c, t + from, (to - from) * sizeof(*c));
	qsort(c, to - from, sizeof(*c), cmp_double);
	m = c[(to - from) / 2] * 1e6;
	free(c);
	return m;
}

static double max_us(const double *t, size_t n)
{
	double m = 0;
	size_t i;

	for (i = 0; i < n; i++)
		if (t[i] > m)
			m = t[i];
	return m * 1e6;
}

static void wait_go(const char *path)
{
	char name[4096];
	FILE *f;

	snprintf(name, sizeof(name), "%s.ready", path);
	f = fopen(name, "w");
	if (!f)
		die(name);
	fclose(f);
	snprintf(name, sizeof(name), "%s.go", path);
	while (access(name, F_OK))
		usleep(100000);
}

int main(int argc, char **argv)
{
	const char *dev = "qhca_0", *pause_path = NULL;
	double *t_create, *t_destroy, t_mod[3] = { 0 }, t0, t_ops, t_all = now();
	struct ibv_qp_init_attr init = {
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1,
			 .max_recv_sge = 1 },
	};
	struct mem m0, m1, m2;
	size_t cap, n = 0, npairs, i, limit = 0, head, tail;
	int gid_index = -1, stop_errno = 0, opt;
	long reserve_kib = 64 * 1024, avail;
	struct ibv_device_attr attr;
	struct ibv_port_attr port;
	struct ibv_context *ctx;
	struct ibv_qp **qp;
	struct rlimit ml;
	union ibv_gid gid;
	uint64_t *buf;
	struct ibv_mr *mr;
	struct ibv_pd *pd;
	char stopped[160];

	while ((opt = getopt(argc, argv, "d:n:g:m:p:")) != -1) {
		switch (opt) {
		case 'd':
			dev = optarg;
			break;
		case 'n':
			limit = strtoul(optarg, NULL, 0);
			break;
		case 'g':
			gid_index = atoi(optarg);
			break;
		case 'm':
			reserve_kib = atol(optarg) * 1024;
			break;
		case 'p':
			pause_path = optarg;
			break;
		default:
			fprintf(stderr, "usage: %s [-d DEV] [-n N] [-g GID_INDEX] [-m MIB] "
				"[-p PATH]\n", argv[0]);
			return 2;
		}
	}
	ctx = vm_open(dev);
	if (!ctx)
		die(dev);
	if (ibv_query_device(ctx, &attr) || ibv_query_port(ctx, 1, &port))
		die("query");
	if (gid_index < 0)
		gid_index = find_gid(ctx, port.gid_tbl_len);
	if (gid_index < 0 || ibv_query_gid(ctx, 1, gid_index, &gid)) {
		errno = ENODEV;
		die("no RoCE v2 IPv4 GID on port 1");
	}
	getrlimit(RLIMIT_MEMLOCK, &ml);
	printf("device %s: max_qp %d, max_cq %d, max_mr %d; GID index %d; memlock limit ", dev,
	       attr.max_qp, attr.max_cq, attr.max_mr, gid_index);
	if (ml.rlim_cur == RLIM_INFINITY)
		printf("unlimited\n");
	else	/* root pins beyond it (CAP_IPC_LOCK) */
		printf("%llu KiB%s\n", (unsigned long long)ml.rlim_cur / 1024,
		       getuid() ? "" : " (root: not enforced)");

	/* Room for every QP the device offers (or -n of them). */
	cap = limit ? limit : (size_t)attr.max_qp;
	qp = calloc(cap, sizeof(*qp));
	t_create = calloc(cap, sizeof(*t_create));
	t_destroy = calloc(cap, sizeof(*t_destroy));
	buf = calloc(2 * cap, sizeof(*buf));	/* per QP: what it sends, what it receives */
	pd = ibv_alloc_pd(ctx);
	if (!qp || !t_create || !t_destroy || !buf || !pd)
		die("setup");
	mr = ibv_reg_mr(pd, buf, 2 * cap * sizeof(*buf), IBV_ACCESS_LOCAL_WRITE);
	init.send_cq = ibv_create_cq(ctx, CQ_ENTRIES, NULL, NULL, 0);
	init.recv_cq = ibv_create_cq(ctx, CQ_ENTRIES, NULL, NULL, 0);
	if (!mr || !init.send_cq || !init.recv_cq)
		die("setup (MR, CQs)");
	m0 = mem_now();

	/* Create until refused. */
	snprintf(stopped, sizeof(stopped), "the -n limit");
	while (n < cap) {
		if (!(n % 256) && (avail = proc_kib("/proc/meminfo", "MemAvailable")) >= 0 &&
		    avail < reserve_kib) {
			snprintf(stopped, sizeof(stopped), "the guest's memory (MemAvailable %ld "
				 "MiB, below -m %ld)", avail / 1024, reserve_kib / 1024);
			break;
		}
		t0 = now();
		qp[n] = ibv_create_qp(pd, &init);
		if (!qp[n]) {
			stop_errno = errno;
			/* The kernel's GSI QP (QP1) holds one of the device's QPs. */
			snprintf(stopped, sizeof(stopped), "ibv_create_qp failed: errno %d (%s)%s",
				 stop_errno, strerror(stop_errno),
				 n + 1 >= (size_t)attr.max_qp ? ", the device's max_qp reached" :
				 "");
			break;
		}
		t_create[n] = now() - t0;
		n++;
		if (!(n % 4096))
			fprintf(stderr, "qhca-qp-scale: %zu QPs created\n", n);
	}
	if (!limit && n == cap)
		snprintf(stopped, sizeof(stopped), "the device's max_qp");
	printf("created %zu QPs; stopped by %s\n", n, stopped);
	if (n < 2) {
		fprintf(stderr, "qhca-qp-scale: fewer than 2 QPs\n");
		return 1;
	}
	npairs = n / 2;
	if (n & 1)
		printf("QP %zu stays unconnected (an odd count); it is destroyed with the rest\n",
		       n - 1);

	/* Connect every pair. */
	for (i = 0; i < 2 * npairs; i++)
		if (connect_qp(qp[i], qp[i ^ 1]->qp_num, gid_index, &gid, t_mod))
			die("ibv_modify_qp");

	/* One 8-byte SEND each way over every pair: every QP sends and receives once. */
	for (i = 0; i < 2 * npairs; i++)
		buf[2 * i] = 0x5150000000000000ull | i;
	t0 = now();
	for (i = 0; i < npairs; i++) {
		size_t a = 2 * i, b = a + 1, k;

		for (k = a; k <= b; k++) {
			struct ibv_sge rs = { .addr = (uintptr_t)&buf[2 * k + 1], .length = 8,
					      .lkey = mr->lkey };
			struct ibv_recv_wr rw = { .wr_id = k, .sg_list = &rs, .num_sge = 1 }, *rbad;

			if (ibv_post_recv(qp[k], &rw, &rbad))
				die("ibv_post_recv");
		}
		for (k = a; k <= b; k++) {
			struct ibv_sge ss = { .addr = (uintptr_t)&buf[2 * k], .length = 8,
					      .lkey = mr->lkey };
			struct ibv_send_wr sw = { .wr_id = k, .sg_list = &ss, .num_sge = 1,
						  .opcode = IBV_WR_SEND,
						  .send_flags = IBV_SEND_SIGNALED }, *sbad;

			if (ibv_post_send(qp[k], &sw, &sbad))
				die("ibv_post_send");
		}
		if (poll_n(init.send_cq, 2, IBV_WC_SEND) || poll_n(init.recv_cq, 2, IBV_WC_RECV))
			return 1;
		if (buf[2 * a + 1] != buf[2 * b] || buf[2 * b + 1] != buf[2 * a]) {
			fprintf(stderr, "qhca-qp-scale: pair %zu: wrong data\n", i);
			return 1;
		}
	}
	t_ops = now() - t0;
	m1 = mem_now();
	if (pause_path)
		wait_go(pause_path);

	for (i = 0; i < n; i++) {
		t0 = now();
		if (ibv_destroy_qp(qp[i]))
			die("ibv_destroy_qp");
		t_destroy[i] = now() - t0;
	}
	m2 = mem_now();
	if (ibv_destroy_cq(init.send_cq) || ibv_destroy_cq(init.recv_cq) || ibv_dereg_mr(mr) ||
	    ibv_dealloc_pd(pd))
		die("teardown");
	ibv_close_device(ctx);

	head = n < 2 * TAIL ? n / 2 : TAIL;
	tail = n - head;
	printf("create: %.0f us mean (median %.0f), first %zu %.0f us (median %.0f), last %zu "
	       "%.0f us (median %.0f), max %.0f us\n", mean_us(t_create, 0, n),
	       median_us(t_create, 0, n), head, mean_us(t_create, 0, head),
	       median_us(t_create, 0, head), head, mean_us(t_create, tail, n),
	       median_us(t_create, tail, n), max_us(t_create, n));
	printf("modify RESET->RTS: %.0f us per QP (INIT %.0f, RTR %.0f, RTS %.0f)\n",
	       (t_mod[0] + t_mod[1] + t_mod[2]) * 1e6 / (double)(2 * npairs),
	       t_mod[0] * 1e6 / (double)(2 * npairs), t_mod[1] * 1e6 / (double)(2 * npairs),
	       t_mod[2] * 1e6 / (double)(2 * npairs));
	printf("first message: %.0f us per QP (%zu pairs, an 8-byte SEND each way, checked)\n",
	       t_ops * 1e6 / (double)(2 * npairs), npairs);
	printf("destroy: %.0f us mean, max %.0f us\n", mean_us(t_destroy, 0, n),
	       max_us(t_destroy, n));
	printf("guest memory per QP: %.0f bytes of MemAvailable (slab %.0f, process RSS %.0f, "
	       "pinned %.0f); after destroy %.0f bytes per QP not yet back\n",
	       (m0.avail - m1.avail) * 1024.0 / (double)n, (m1.slab - m0.slab) * 1024.0 / (double)n,
	       (m1.rss - m0.rss) * 1024.0 / (double)n, (m1.pin - m0.pin) * 1024.0 / (double)n,
	       (m0.avail - m2.avail) * 1024.0 / (double)n);
	printf("total %.1f s\n", now() - t_all);
	printf("{\"test\":\"qp_scale\",\"qps\":%zu,\"stopped_by\":\"%s\",\"errno\":%d,"
	       "\"create_us\":%.0f,\"create_first_us\":%.0f,\"create_last_us\":%.0f,"
	       "\"create_first_median_us\":%.0f,\"create_last_median_us\":%.0f,"
	       "\"modify_to_rts_us\":%.0f,\"first_op_us\":%.0f,\"destroy_us\":%.0f,"
	       "\"guest_bytes_per_qp\":%.0f,\"guest_slab_bytes_per_qp\":%.0f,"
	       "\"guest_pinned_bytes_per_qp\":%.0f}\n",
	       n, stopped, stop_errno, mean_us(t_create, 0, n), mean_us(t_create, 0, head),
	       mean_us(t_create, tail, n), median_us(t_create, 0, head),
	       median_us(t_create, tail, n),
	       (t_mod[0] + t_mod[1] + t_mod[2]) * 1e6 / (double)(2 * npairs),
	       t_ops * 1e6 / (double)(2 * npairs), mean_us(t_destroy, 0, n),
	       (m0.avail - m1.avail) * 1024.0 / (double)n, (m1.slab - m0.slab) * 1024.0 / (double)n,
	       (m1.pin - m0.pin) * 1024.0 / (double)n);
	return 0;
}
