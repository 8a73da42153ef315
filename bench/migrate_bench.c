// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * bench-migrate: the device's share of a migration, the engine alone. N connected RC QPs on
 * one device (the QEMU device's default limits), idle, then each with 8 RDMA WRITEs of 64 KiB
 * in flight (their packets unacknowledged: snapshots, timers); for each: the bytes of
 * device state (and per QP), the time to save it and to load it into a new engine. A figure,
 * not a test (make bench prints it; tests/unit/test-migrate checks the behaviour).
 *   bench-migrate [N...]   QP counts (default 1 100 1000 10000)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "transport_harness.h"

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Save node 0's engine, load it into a new one: bytes, seconds each. */
static void measure(const char *what, uint32_t n, size_t base)
{
	struct qhca_engine *e2;
	uint8_t *buf = NULL;
	size_t len = 0;
	double t0, t1, t2;
	char why[256];

	t0 = now_s();
	if (qhca_engine_save(&nodes[0].e, &buf, &len)) {
		fprintf(stderr, "save failed\n");
		exit(1);
	}
	t1 = now_s();
	e2 = qhca_engine_load(&nodes[0].e.cfg, &ops, &nodes[0], buf, len, why, sizeof(why));
	t2 = now_s();
	if (!e2) {
		fprintf(stderr, "load refused: %s\n", why);
		exit(1);
	}
	printf("%-6u QPs %-8s %10zu B  %7.0f B/QP  save %8.3f ms  load %8.3f ms\n", n, what, len,
	       n ? (double)(len - base) / n : 0.0, (t1 - t0) * 1e3, (t2 - t1) * 1e3);
	qhca_engine_free(e2);
	free(buf);
}

static void run(uint32_t n, size_t *base)
{
	struct qhca_cq_create cc = { .log2_entries = 8 };
	struct qhca_qp_create qc = { .type = QHCA_QPT_RC, .sq_log2 = 4, .rq_log2 = 4,
				     .sq_stride_log2 = 8, .rq_stride_log2 = 6 };
	struct qhca_qp_attr a;
	uint64_t ring_mem, buf;
	uint32_t cq, qpn, key, i, k;

	setup_limits(true);
	nodes[0].e.cfg.mtu = 4096;
	key = make_mr(&nodes[0], 64 << 10, QHCA_ACCESS_ALL, &buf);
	/* every QP's rings in the same guest pages (the device copies nothing from them until
	 * a doorbell), and one CQ for all */
	ring_mem = galloc(&nodes[0], 64 << 10);
	cc.eq = nodes[0].eq;
	cc.pbl = pbl_for(&nodes[0], ring_mem, (256 * 32 + 64 + 4095) & ~4095);
	CHECK_EQ(qhca_cq_create(&nodes[0].e, &cc, &cq), QHCA_ST_OK);
	qc.pd = nodes[0].pd;
	qc.send_cq = qc.recv_cq = cq;
	qc.sq_pbl = pbl_for(&nodes[0], ring_mem + (32 << 10), 4096);
	qc.rq_pbl = pbl_for(&nodes[0], ring_mem + (36 << 10), 1024);
	if (!*base) {
		measure("empty", 0, 0);
		{
			uint8_t *b = NULL;
			size_t l = 0;

			qhca_engine_save(&nodes[0].e, &b, &l);
			*base = l;
			free(b);
		}
	}
	for (i = 0; i < n; i++) {
		if (qhca_qp_create(&nodes[0].e, &qc, &qpn) != QHCA_ST_OK) {
			fprintf(stderr, "QP %u: refused\n", i);
			break;
		}
		memset(&a, 0, sizeof(a));
		a.mask = QHCA_QP_STATE | QHCA_QP_ACCESS_FLAGS;
		a.state = QHCA_QPS_INIT;
		a.access_flags = QHCA_ACCESS_ALL;
		qhca_qp_modify(&nodes[0].e, qpn, &a);
		memset(&a, 0, sizeof(a));
		a.mask = QHCA_QP_STATE | QHCA_QP_AV | QHCA_QP_PATH_MTU | QHCA_QP_DEST_QPN |
			 QHCA_QP_RQ_PSN | QHCA_QP_MAX_DEST_RD_ATOMIC;
		a.state = QHCA_QPS_RTR;
		a.path_mtu = 5;
		a.dest_qpn = 0x1000 + i;
		a.max_dest_rd_atomic = 16;
		memcpy(a.av.dgid, nodes[1].gid, 16);
		memcpy(a.av.sgid, nodes[0].gid, 16);
		memcpy(a.av.dmac, nodes[1].mac, 6);
		qhca_qp_modify(&nodes[0].e, qpn, &a);
		memset(&a, 0, sizeof(a));
		a.mask = QHCA_QP_STATE | QHCA_QP_SQ_PSN | QHCA_QP_TIMEOUT | QHCA_QP_RETRY_CNT |
			 QHCA_QP_MAX_QP_RD_ATOMIC;
		a.state = QHCA_QPS_RTS;
		a.timeout = 14;
		a.retry_cnt = 7;
		a.max_rd_atomic = 16;
		qhca_qp_modify(&nodes[0].e, qpn, &a);
	}
	measure("idle", i, *base);
	/* 8 WRITEs of 64 KiB in flight on each: the same WQEs in the shared SQ pages */
	for (k = 0; k < 8; k++) {
		uint64_t w = ring_mem + (32 << 10) + ((uint64_t)k << 8);
		struct qhca_sq_wqe *h = gptr(&nodes[0], w);
		struct qhca_sge *s = gptr(&nodes[0], w + sizeof(*h));

		memset(h, 0, 256);
		h->wr_id = k;
		h->opcode = QHCA_WR_RDMA_WRITE;
		h->num_sge = 1;
		h->remote_addr = 0x10000;
		h->rkey = 0x1234;
		s->addr = buf;
		s->length = 64 << 10;
		s->lkey = key;
	}
	for (qpn = 0, k = 0; k < nodes[0].e.cfg.max_qp && qpn < i; k++) {
		struct qhca_qp *qp = nodes[0].e.qp[k];

		if (!qp || qp->type != QHCA_QPT_RC)
			continue;
		ring(&nodes[0], QHCA_DB_SQ, qp->qpn, 8);
		link_n = 0;	/* the packets go nowhere: all unacknowledged */
		qpn++;
	}
	measure("busy", i, *base);
	link_n = 0;
	teardown();
}

int main(int argc, char **argv)
{
	static const uint32_t def[] = { 1, 100, 1000, 10000 };
	size_t base = 0;
	int i;

	printf("# the device's state, saved and loaded by the engine alone (migrate.c); "
	       "busy: 8 WRITEs of 64 KiB in flight a QP\n");
	if (argc > 1)
		for (i = 1; i < argc; i++)
			run((uint32_t)atoi(argv[i]), &base);
	else
		for (i = 0; i < 4; i++)
			run(def[i], &base);
	return unit_failures ? 1 : 0;
}
