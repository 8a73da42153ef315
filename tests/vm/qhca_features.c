// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * qhca-features: the verbs beyond SEND, WRITE, READ and the classic atomics, between two
 * guests over RC, each step checked byte for byte and completion by completion:
 *   1. ibv_rereg_mr moves the server's region to other memory under the same keys; the
 *      client's RDMA WRITE lands in the new memory and not in the old;
 *   2. a type 2 window (ibv_wr_bind_mw) and a type 1 window (ibv_bind_mw, read only) over
 *      parts of that region: the client writes and reads through them, and an ATOMIC WRITE
 *      (ibv_wr_atomic_write) places 8 bytes through the type 2 window;
 *   3. ibv_resize_cq with completions pending: none lost, order kept, up and down;
 *   4. SEND_WITH_INV of the type 2 window: the server's receive completion names the key,
 *      and the client's next WRITE through the window vm_fails with a remote access error.
 * The two sides meet over TCP (port 18800) to swap QP numbers, GIDs, keys and addresses.
 *   qhca-features -s           server (guest 2)
 *   qhca-features SERVER_IP    client (guest 1)
 * Exit 0 if every check held on this side.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "vm_verbs.h"

#define PORT		18800
#define SZ		16384
#define ALL_REMOTE	(IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC)

static int sock;

/* What the sides tell each other; every message is one of these. */
struct msg {
	uint32_t qpn, step, ok;
	uint32_t mr_rkey, mw2_rkey, mw1_rkey;
	uint64_t addr;
	uint8_t gid[16];
};

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_cq_ex *cq;
static struct ibv_qp *qp;
static struct ibv_qp_ex *qpx;

/* Send (@out) or receive the message @m whole over the test's TCP connection. */
static void xfer(struct msg *m, int out)
{
	vm_xfer(sock, m, sizeof(*m), out);
}

/* One completion (of @want_id); returns its status, and its flags and key in *wc. */
static int poll_one(uint64_t want_id, struct ibv_wc *wc)
{
	struct ibv_poll_cq_attr attr = {};
	long tries = 0;

	while (ibv_start_poll(cq, &attr) == ENOENT)
		if (++tries > 200000000L) {
			fprintf(stderr, "FAIL: no completion for wr_id %llu\n",
				(unsigned long long)want_id);
			exit(2);
		}
	memset(wc, 0, sizeof(*wc));
	wc->wr_id = cq->wr_id;
	wc->status = cq->status;
	wc->opcode = ibv_wc_read_opcode(cq);
	wc->wc_flags = ibv_wc_read_wc_flags(cq);
	if (wc->wc_flags & IBV_WC_WITH_INV)
		wc->invalidated_rkey = ibv_wc_read_invalidated_rkey(cq);
	ibv_end_poll(cq);
	if (wc->wr_id != want_id)
		fprintf(stderr, "completion wr_id %llu, wanted %llu\n",
			(unsigned long long)wc->wr_id, (unsigned long long)want_id);
	EXPECT(wc->wr_id == want_id);
	return wc->status;
}

static void setup(void)
{
	struct ibv_cq_init_attr_ex ca = { .cqe = 16, .wc_flags = IBV_WC_STANDARD_FLAGS };
	struct ibv_qp_init_attr_ex qa = {
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 32, .max_recv_wr = 8, .max_send_sge = 1, .max_recv_sge = 1 },
		.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
		.send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_READ |
				  IBV_QP_EX_WITH_SEND_WITH_INV | IBV_QP_EX_WITH_ATOMIC_WRITE |
				  IBV_QP_EX_WITH_BIND_MW | IBV_QP_EX_WITH_SEND,
	};

	ctx = vm_open("qhca_0");
	if (!ctx) {
		fprintf(stderr, "FAIL: no qhca_0\n");
		exit(2);
	}
	pd = ibv_alloc_pd(ctx);
	cq = ibv_create_cq_ex(ctx, &ca);
	qa.pd = pd;
	qa.send_cq = qa.recv_cq = cq ? ibv_cq_ex_to_cq(cq) : NULL;
	qp = cq ? ibv_create_qp_ex(ctx, &qa) : NULL;
	qpx = qp ? ibv_qp_to_qp_ex(qp) : NULL;
	if (!pd || !cq || !qpx) {
		fprintf(stderr, "FAIL: set-up (%s)\n", strerror(errno));
		exit(2);
	}
}

/* Swap QP numbers and GIDs and connect. */
static void connect_qp(void)
{
	struct msg m = { .qpn = qp->qp_num };
	union ibv_gid gid;

	EXPECT(ibv_query_gid(ctx, 1, vm_roce_gid(ctx), &gid) == 0);
	memcpy(m.gid, gid.raw, 16);
	xfer(&m, 1);
	xfer(&m, 0);
	memcpy(gid.raw, m.gid, 16);
	EXPECT(vm_connect(qp, ALL_REMOTE, m.qpn, vm_roce_gid(ctx), &gid) == 0);
}

static void server(void)
{
	uint8_t *a = aligned_alloc(4096, SZ), *b = aligned_alloc(4096, SZ);
	struct ibv_mw_bind mb = { .wr_id = 2, .send_flags = IBV_SEND_SIGNALED };
	struct ibv_mw *mw2, *mw1;
	struct ibv_mr *mr;
	struct msg m = {};
	struct ibv_wc wc;
	uint32_t key2, rkey, lkey;
	uint64_t v;

	memset(a, 0, SZ);
	memset(b, 0, SZ);
	mr = ibv_reg_mr(pd, a, SZ, IBV_ACCESS_LOCAL_WRITE | ALL_REMOTE | IBV_ACCESS_MW_BIND);
	EXPECT(mr != NULL);
	connect_qp();
	/* 1. The region moves to b under the same keys. */
	rkey = mr->rkey;
	lkey = mr->lkey;
	EXPECT(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL, b, SZ, 0) == 0);
	EXPECT(mr->rkey == rkey && mr->lkey == lkey);
	m.addr = (uintptr_t)b;
	m.mr_rkey = mr->rkey;
	xfer(&m, 1);
	xfer(&m, 0);	/* the client wrote 4096 bytes at b */
	EXPECT(vm_is_pattern(b, 4096, 1));
	for (v = 0; v < SZ && !a[v]; v++)
		;
	EXPECT(v == SZ);	/* nothing in the old memory */

	/* 2. Windows: type 2 over b[4096, 12288), type 1 read only over b[12288, 16384). */
	mw2 = ibv_alloc_mw(pd, IBV_MW_TYPE_2);
	mw1 = ibv_alloc_mw(pd, IBV_MW_TYPE_1);
	EXPECT(mw2 && mw1);
	if (!mw2 || !mw1)
		exit(1);
	key2 = ibv_inc_rkey(mw2->rkey);
	ibv_wr_start(qpx);
	qpx->wr_id = 1;
	qpx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_bind_mw(qpx, mw2, key2, &(struct ibv_mw_bind_info){
		.mr = mr, .addr = (uintptr_t)b + 4096, .length = 8192,
		.mw_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ });
	EXPECT(ibv_wr_complete(qpx) == 0);
	EXPECT(poll_one(1, &wc) == IBV_WC_SUCCESS && wc.opcode == IBV_WC_BIND_MW);
	vm_pattern(b + 12288, 4096, 7);
	mb.bind_info = (struct ibv_mw_bind_info){ .mr = mr, .addr = (uintptr_t)b + 12288,
						   .length = 4096,
						   .mw_access_flags = IBV_ACCESS_REMOTE_READ };
	EXPECT(ibv_bind_mw(qp, mw1, &mb) == 0);
	EXPECT(poll_one(2, &wc) == IBV_WC_SUCCESS && wc.opcode == IBV_WC_BIND_MW);
	m.mw2_rkey = key2;
	m.mw1_rkey = mw1->rkey;
	xfer(&m, 1);
	xfer(&m, 0);	/* the client wrote, read and atomically wrote through them */
	memcpy(&v, b + 4096 + 8, 8);
	EXPECT(v == 0x0123456789abcdefull);
	{
		uint8_t p[16];

		vm_pattern(p, 16, 2);
		memcpy(b + 4096 + 8, p + 8, 8);	/* what the WRITE had put there */
	}
	EXPECT(vm_is_pattern(b + 4096, 8192, 2));
	/* The region itself is busy while windows are bound to it. */
	EXPECT(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL, a, SZ, 0) != 0);
	xfer(&m, 1);	/* checked: the client goes on */

	/* 4. The client invalidates the type 2 window with SEND_WITH_INV. */
	{
		struct ibv_sge s = { (uintptr_t)a, 64, 0 };
		struct ibv_recv_wr r = { .wr_id = 3, .sg_list = &s, .num_sge = 1 }, *bad;
		struct ibv_mr *rmr = ibv_reg_mr(pd, a, SZ, IBV_ACCESS_LOCAL_WRITE);

		EXPECT(rmr != NULL);
		s.lkey = rmr ? rmr->lkey : 0;
		EXPECT(ibv_post_recv(qp, &r, &bad) == 0);
		m.step = 4;
		xfer(&m, 1);
		EXPECT(poll_one(3, &wc) == IBV_WC_SUCCESS);
		EXPECT((wc.wc_flags & IBV_WC_WITH_INV) && wc.invalidated_rkey == key2);
		m.ok = !vm_fails;
		xfer(&m, 1);
		xfer(&m, 0);	/* the client's WRITE through it failed */
		if (rmr)
			ibv_dereg_mr(rmr);
	}
	EXPECT(ibv_dealloc_mw(mw1) == 0 && ibv_dealloc_mw(mw2) == 0);
	EXPECT(ibv_dereg_mr(mr) == 0);
}

static void post_write(uint64_t id, void *buf, uint32_t len, uint32_t lkey, uint32_t rkey,
		       uint64_t addr)
{
	ibv_wr_start(qpx);
	qpx->wr_id = id;
	qpx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_rdma_write(qpx, rkey, addr);
	ibv_wr_set_sge(qpx, lkey, (uintptr_t)buf, len);
	EXPECT(ibv_wr_complete(qpx) == 0);
}

static void client(void)
{
	uint8_t *buf = aligned_alloc(4096, SZ);
	const uint64_t v = 0x0123456789abcdefull;
	struct ibv_mr *mr;
	struct msg m = {};
	struct ibv_wc wc;
	uint64_t id;
	int i;

	mr = ibv_reg_mr(pd, buf, SZ, IBV_ACCESS_LOCAL_WRITE);
	EXPECT(mr != NULL);
	if (!mr)
		exit(1);
	connect_qp();
	/* 1. WRITE into the re-registered region. */
	xfer(&m, 0);
	vm_pattern(buf, 4096, 1);
	post_write(10, buf, 4096, mr->lkey, m.mr_rkey, m.addr);
	EXPECT(poll_one(10, &wc) == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RDMA_WRITE);
	xfer(&m, 1);

	/* 2. Through the windows: WRITE and ATOMIC WRITE (type 2), READ (type 1). */
	xfer(&m, 0);
	vm_pattern(buf, 8192, 2);
	post_write(11, buf, 8192, mr->lkey, m.mw2_rkey, m.addr + 4096);
	EXPECT(poll_one(11, &wc) == IBV_WC_SUCCESS);
	ibv_wr_start(qpx);
	qpx->wr_id = 12;
	qpx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_atomic_write(qpx, m.mw2_rkey, m.addr + 4096 + 8, &v);
	EXPECT(ibv_wr_complete(qpx) == 0);
	EXPECT(poll_one(12, &wc) == IBV_WC_SUCCESS && wc.opcode == IBV_WC_ATOMIC_WRITE);
	memset(buf + 8192, 0, 4096);
	ibv_wr_start(qpx);
	qpx->wr_id = 13;
	qpx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_rdma_read(qpx, m.mw1_rkey, m.addr + 12288);
	ibv_wr_set_sge(qpx, mr->lkey, (uintptr_t)buf + 8192, 4096);
	EXPECT(ibv_wr_complete(qpx) == 0);
	EXPECT(poll_one(13, &wc) == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RDMA_READ);
	EXPECT(vm_is_pattern(buf + 8192, 4096, 7));
	xfer(&m, 1);
	xfer(&m, 0);	/* the server checked its memory */

	/* 3. Six completions pending while the CQ grows, then three while it shrinks. */
	for (id = 20; id < 26; id++)
		post_write(id, buf, 64, mr->lkey, m.mw2_rkey, m.addr + 4096);
	usleep(500000);
	EXPECT(ibv_resize_cq(ibv_cq_ex_to_cq(cq), 60) == 0);
	EXPECT(ibv_cq_ex_to_cq(cq)->cqe >= 60);
	for (id = 20; id < 26; id++)
		EXPECT(poll_one(id, &wc) == IBV_WC_SUCCESS);
	for (id = 30; id < 33; id++)
		post_write(id, buf, 64, mr->lkey, m.mw2_rkey, m.addr + 4096);
	usleep(500000);
	EXPECT(ibv_resize_cq(ibv_cq_ex_to_cq(cq), 1) == EINVAL);	/* three do not fit */
	EXPECT(ibv_resize_cq(ibv_cq_ex_to_cq(cq), 6) == 0);
	for (id = 30; id < 33; id++)
		EXPECT(poll_one(id, &wc) == IBV_WC_SUCCESS);
	for (i = 0; i < 20; i++) {	/* laps of the smaller ring */
		post_write(40 + i, buf, 64, mr->lkey, m.mw2_rkey, m.addr + 4096);
		EXPECT(poll_one(40 + i, &wc) == IBV_WC_SUCCESS);
	}

	/* 4. SEND_WITH_INV of the type 2 window, then a WRITE through it vm_fails. */
	xfer(&m, 0);
	ibv_wr_start(qpx);
	qpx->wr_id = 70;
	qpx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send_inv(qpx, m.mw2_rkey);
	ibv_wr_set_sge(qpx, mr->lkey, (uintptr_t)buf, 16);
	EXPECT(ibv_wr_complete(qpx) == 0);
	EXPECT(poll_one(70, &wc) == IBV_WC_SUCCESS);
	xfer(&m, 0);
	EXPECT(m.ok);
	post_write(71, buf, 64, mr->lkey, m.mw2_rkey, m.addr + 4096);
	EXPECT(poll_one(71, &wc) == IBV_WC_REM_ACCESS_ERR);
	xfer(&m, 1);
	ibv_dereg_mr(mr);
}

int main(int argc, char **argv)
{
	int is_server = vm_meet("qhca-features", argc, argv, PORT, &sock);

	setup();
	if (is_server)
		server();
	else
		client();
	printf("qhca-features %s: %s\n", is_server ? "server" : "client", vm_fails ? "FAIL" : "PASS");
	return vm_fails ? 1 : 0;
}
