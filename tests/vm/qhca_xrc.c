// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * qhca-xrc: XRC (IBA 1.2 annex A14) between two guests, or two processes of one guest.
 * The server (the target) has an XRC domain with two XRC SRQs, each with its own CQ (one
 * polled with ibv_poll_cq, one with ibv_start_poll), an XRC_RECV QP in the domain, and an
 * XRC SRQ of a second domain; the client has an XRC_SEND QP and names an SRQ in each WQE:
 *   1. SEND and SEND_WITH_IMM to each SRQ, a 64 KiB SEND (64 packets at MTU 1024) and an
 *      RDMA WRITE_WITH_IMM: each lands in its SRQ's CQ with its wr_id, length and
 *      immediate, the XRC_RECV QP's number and no source QP; the data is checked;
 *   2. RDMA WRITE, RDMA READ, fetch-and-add and compare-and-swap through the target into
 *      a region of the SRQs' PD (ibv_post_send and ibv_wr_* with ibv_wr_set_xrc_srqn);
 *   3. a SEND naming the other domain's SRQ completes with a remote invalid request error
 *      and reaches no CQ (last: it breaks the connection);
 * then everything is destroyed in order (QPs, SRQs, CQs, domains) without error. Neither
 * XRC QP takes a post it has no queue for. The sides meet over TCP (port 18810).
 *   qhca-xrc -s           server (guest 2)
 *   qhca-xrc SERVER_IP    client (guest 1)
 * Exit 0 if every check held on this side.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "vm_verbs.h"

#define PORT		18810
#define GID_INDEX	1
#define BIG		65536
#define NRECV		3			/* receive WQEs per SRQ */
#define RDMA_OFF	(2 * NRECV * BIG)	/* the RDMA area after the receive buffers */
#define MR_SZ		(RDMA_OFF + 4 * 4096)
#define ALL_REMOTE	(IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC)

/* What the sides tell each other; every message is one of these. */
struct msg {
	uint32_t qpn, step;
	uint32_t srqn[3];	/* the domain's two SRQs, the other domain's one */
	uint32_t rkey;
	uint64_t addr;
	uint8_t gid[16];
};

static int sock;
static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_mr *mr;
static uint8_t *buf;

/* Send (@out) or receive the message @m whole over the test's TCP connection. */
static void xfer(struct msg *m, int out)
{
	vm_xfer(sock, m, sizeof(*m), out);
}

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

/*
 * The next completion of @cq (legacy) or @cqx (extended) within @secs seconds, in *wc:
 * 1, or 0 if none came.
 */
static int poll_wc(struct ibv_cq *cq, struct ibv_cq_ex *cqx, struct ibv_wc *wc, double secs)
{
	struct ibv_poll_cq_attr attr = {};
	double end = now() + secs;

	memset(wc, 0, sizeof(*wc));
	for (;;) {
		if (cq && ibv_poll_cq(cq, 1, wc) == 1)
			return 1;
		if (cqx && ibv_start_poll(cqx, &attr) == 0) {
			wc->wr_id = cqx->wr_id;
			wc->status = cqx->status;
			wc->opcode = ibv_wc_read_opcode(cqx);
			wc->byte_len = ibv_wc_read_byte_len(cqx);
			wc->qp_num = ibv_wc_read_qp_num(cqx);
			wc->src_qp = ibv_wc_read_src_qp(cqx);
			wc->wc_flags = ibv_wc_read_wc_flags(cqx);
			if (wc->wc_flags & IBV_WC_WITH_IMM)
				wc->imm_data = ibv_wc_read_imm_data(cqx);
			ibv_end_poll(cqx);
			return 1;
		}
		if (now() > end)
			return 0;
	}
}

/* Swap QP numbers, GIDs and what @m carries, and connect @qp. */
static void connect_qp(struct ibv_qp *qp, struct msg *m)
{
	union ibv_gid gid;

	EXPECT(ibv_query_gid(ctx, 1, GID_INDEX, &gid) == 0);
	m->qpn = qp->qp_num;
	memcpy(m->gid, gid.raw, 16);
	xfer(m, 1);
	xfer(m, 0);
	memcpy(gid.raw, m->gid, 16);
	/* The target takes remote access, the initiator none (IBA 1.2 A14). */
	EXPECT(vm_connect(qp, qp->qp_type == IBV_QPT_XRC_RECV ? ALL_REMOTE : 0, m->qpn,
			  GID_INDEX, &gid) == 0);
}

static void setup(void)
{
	ctx = vm_open("qhca_0");
	pd = ctx ? ibv_alloc_pd(ctx) : NULL;
	buf = aligned_alloc(4096, MR_SZ);
	mr = pd && buf ? ibv_reg_mr(pd, buf, MR_SZ, IBV_ACCESS_LOCAL_WRITE | ALL_REMOTE) : NULL;
	if (!mr) {
		fprintf(stderr, "FAIL: set-up (%s)\n", strerror(errno));
		exit(2);
	}
	memset(buf, 0, MR_SZ);
}

/* An XRC domain on a new temporary file (as processes sharing one would open it). */
static struct ibv_xrcd *open_xrcd(int *fd)
{
	char path[] = "/tmp/qhca-xrc-XXXXXX";
	struct ibv_xrcd_init_attr xa = {
		.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS,
		.oflags = O_CREAT,
	};

	*fd = mkstemp(path);
	if (*fd < 0)
		return NULL;
	unlink(path);
	xa.fd = *fd;
	return ibv_open_xrcd(ctx, &xa);
}

static struct ibv_srq *xrc_srq(struct ibv_xrcd *xrcd, struct ibv_cq *cq)
{
	struct ibv_srq_init_attr_ex sa = {
		.attr = { .max_wr = 8, .max_sge = 1 },
		.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_XRCD |
			     IBV_SRQ_INIT_ATTR_CQ,
		.srq_type = IBV_SRQT_XRC,
		.pd = pd, .xrcd = xrcd, .cq = cq,
	};

	return xrcd && cq ? ibv_create_srq_ex(ctx, &sa) : NULL;
}

/* Expect the next completion of one of the SRQs' CQs to be this receive. */
static void expect_recv(struct ibv_cq *cq, struct ibv_cq_ex *cqx, uint32_t tgt_qpn,
			uint64_t wr_id, enum ibv_wc_opcode op, uint32_t len, uint32_t imm)
{
	struct ibv_wc wc;

	EXPECT(poll_wc(cq, cqx, &wc, 10) == 1);
	if (wc.wr_id != wr_id || wc.status != IBV_WC_SUCCESS || wc.byte_len != len)
		fprintf(stderr, "receive wr_id %llu status %d len %u, wanted %llu len %u\n",
			(unsigned long long)wc.wr_id, wc.status, wc.byte_len,
			(unsigned long long)wr_id, len);
	EXPECT(wc.wr_id == wr_id && wc.status == IBV_WC_SUCCESS && wc.opcode == op);
	EXPECT(wc.byte_len == len);
	EXPECT(wc.qp_num == tgt_qpn && wc.src_qp == 0);
	EXPECT(imm ? (wc.wc_flags & IBV_WC_WITH_IMM) && ntohl(wc.imm_data) == imm :
		     !(wc.wc_flags & IBV_WC_WITH_IMM));
}

static void server(void)
{
	struct ibv_cq_init_attr_ex ca = { .cqe = 16, .wc_flags = IBV_WC_STANDARD_FLAGS };
	struct ibv_qp_init_attr_ex qa = { .qp_type = IBV_QPT_XRC_RECV,
					  .comp_mask = IBV_QP_INIT_ATTR_XRCD };
	struct ibv_sge sge = { .length = BIG, .lkey = mr->lkey };
	struct ibv_recv_wr rw = { .sg_list = &sge, .num_sge = 1 }, *bad_rw;
	struct ibv_send_wr sw = { .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND },
			   *bad_sw;
	struct ibv_qp_init_attr init;
	struct ibv_qp_attr attr;
	struct ibv_xrcd *xrcd, *xrcd2;
	struct ibv_srq *srq[3];
	struct ibv_cq_ex *cqx;
	struct ibv_cq *cq;
	struct ibv_qp *tgt;
	struct ibv_wc wc;
	struct msg m = {};
	uint64_t word = 100;
	int fd, fd2, i;

	xrcd = open_xrcd(&fd);
	xrcd2 = open_xrcd(&fd2);
	cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	cqx = ibv_create_cq_ex(ctx, &ca);
	srq[0] = xrc_srq(xrcd, cq);
	srq[1] = cqx ? xrc_srq(xrcd, ibv_cq_ex_to_cq(cqx)) : NULL;
	srq[2] = xrc_srq(xrcd2, cq);
	qa.xrcd = xrcd;
	tgt = xrcd ? ibv_create_qp_ex(ctx, &qa) : NULL;
	if (!xrcd || !xrcd2 || !srq[0] || !srq[1] || !srq[2] || !tgt) {
		fprintf(stderr, "FAIL: XRC set-up (%s)\n", strerror(errno));
		exit(2);
	}
	for (i = 0; i < 3; i++) {
		EXPECT(ibv_get_srq_num(srq[i], &m.srqn[i]) == 0);
		EXPECT(m.srqn[i] <= 0xffffff);
	}
	EXPECT(m.srqn[0] != m.srqn[1] && m.srqn[0] != m.srqn[2] && m.srqn[1] != m.srqn[2]);
	/* An XRC_RECV QP has no queue to post to. */
	EXPECT(ibv_post_send(tgt, &sw, &bad_sw) != 0);
	EXPECT(ibv_post_recv(tgt, &rw, &bad_rw) != 0);
	m.rkey = mr->rkey;
	m.addr = (uintptr_t)buf + RDMA_OFF;
	connect_qp(tgt, &m);
	EXPECT(ibv_query_qp(tgt, &attr, IBV_QP_STATE, &init) == 0 &&
	       attr.qp_state == IBV_QPS_RTS);

	/* 1. Receives: buffers 0-2 in SRQ 0, 3-5 in SRQ 1. */
	for (i = 0; i < 2 * NRECV; i++) {
		rw.wr_id = (i < NRECV ? 100 : 200 - NRECV) + i;
		sge.addr = (uintptr_t)buf + (size_t)i * BIG;
		EXPECT(ibv_post_srq_recv(srq[i / NRECV], &rw, &bad_rw) == 0);
	}
	xfer(&m, 1);	/* ready */
	xfer(&m, 0);	/* sent */
	expect_recv(cq, NULL, tgt->qp_num, 100, IBV_WC_RECV, 100, 0);
	expect_recv(cq, NULL, tgt->qp_num, 101, IBV_WC_RECV, 300, 0xabcd);
	expect_recv(cq, NULL, tgt->qp_num, 102, IBV_WC_RECV, BIG, 0);
	expect_recv(NULL, cqx, tgt->qp_num, 200, IBV_WC_RECV, 200, 0x1234);
	expect_recv(NULL, cqx, tgt->qp_num, 201, IBV_WC_RECV, 400, 0);
	expect_recv(NULL, cqx, tgt->qp_num, 202, IBV_WC_RECV_RDMA_WITH_IMM, 512, 0x5678);
	EXPECT(vm_is_pattern(buf, 100, 1) && vm_is_pattern(buf + BIG, 300, 3));
	EXPECT(vm_is_pattern(buf + 2 * BIG, BIG, 5));
	EXPECT(vm_is_pattern(buf + NRECV * BIG, 200, 2) && vm_is_pattern(buf + (NRECV + 1) * BIG, 400, 4));
	EXPECT(vm_is_pattern(buf + RDMA_OFF, 512, 6));
	EXPECT(poll_wc(cq, cqx, &wc, 0.2) == 0);	/* nothing more */

	/* 2. RDMA: WRITE at +12288, READ of +4096, atomics on the word at +8192. */
	vm_pattern(buf + RDMA_OFF + 4096, 4096, 9);
	memcpy(buf + RDMA_OFF + 8192, &word, 8);
	xfer(&m, 1);
	xfer(&m, 0);	/* done */
	EXPECT(vm_is_pattern(buf + RDMA_OFF + 12288, 4096, 10));
	memcpy(&word, buf + RDMA_OFF + 8192, 8);
	EXPECT(word == 0x77);
	EXPECT(poll_wc(cq, cqx, &wc, 0.2) == 0);	/* RDMA takes no receive */

	/* 3. The client names SRQ 2, of the other domain: refused, nothing received. */
	xfer(&m, 1);
	xfer(&m, 0);
	EXPECT(poll_wc(cq, cqx, &wc, 0.5) == 0);

	EXPECT(ibv_destroy_qp(tgt) == 0);
	for (i = 0; i < 3; i++)
		EXPECT(ibv_destroy_srq(srq[i]) == 0);
	EXPECT(ibv_destroy_cq(cq) == 0 && ibv_destroy_cq(ibv_cq_ex_to_cq(cqx)) == 0);
	EXPECT(ibv_close_xrcd(xrcd) == 0 && ibv_close_xrcd(xrcd2) == 0);
	close(fd);
	close(fd2);
}

/* Post one work request to @srqn and expect its completion. */
static void send_one(struct ibv_qp *qp, struct ibv_cq *cq, struct ibv_send_wr *wr,
		     uint32_t srqn, enum ibv_wc_status status)
{
	struct ibv_send_wr *bad;
	struct ibv_wc wc;

	wr->qp_type.xrc.remote_srqn = srqn;
	EXPECT(ibv_post_send(qp, wr, &bad) == 0);
	EXPECT(poll_wc(cq, NULL, &wc, 10) == 1);
	if (wc.wr_id != wr->wr_id || wc.status != status)
		fprintf(stderr, "send wr_id %llu status %d, wanted %llu status %d\n",
			(unsigned long long)wc.wr_id, wc.status,
			(unsigned long long)wr->wr_id, status);
	EXPECT(wc.wr_id == wr->wr_id && wc.status == status);
}

static void client(void)
{
	struct ibv_qp_init_attr_ex qa = {
		.qp_type = IBV_QPT_XRC_SEND,
		.sq_sig_all = 1,
		.cap = { .max_send_wr = 16, .max_send_sge = 1 },
		.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
		.send_ops_flags = IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD |
				  IBV_QP_EX_WITH_SEND,
	};
	struct ibv_sge sge = { .lkey = mr->lkey };
	struct ibv_send_wr wr = { .sg_list = &sge, .num_sge = 1 };
	struct ibv_recv_wr rw = { .sg_list = &sge, .num_sge = 1 }, *bad_rw;
	static const struct { enum ibv_wr_opcode op; int srq; uint32_t len, imm; } sends[] = {
		{ IBV_WR_SEND, 0, 100, 0 },
		{ IBV_WR_SEND_WITH_IMM, 1, 200, 0x1234 },
		{ IBV_WR_SEND_WITH_IMM, 0, 300, 0xabcd },
		{ IBV_WR_SEND, 1, 400, 0 },
		{ IBV_WR_SEND, 0, BIG, 0 },
		{ IBV_WR_RDMA_WRITE_WITH_IMM, 1, 512, 0x5678 },
	};
	struct ibv_qp_ex *qpx;
	struct ibv_cq *cq;
	struct ibv_qp *ini;
	struct ibv_wc wc;
	struct msg m = {}, step = {};	/* the server's QP, SRQs and region; steps */
	uint64_t word;
	size_t i;

	cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	qa.pd = pd;
	qa.send_cq = qa.recv_cq = cq;	/* the receive CQ is ignored: no receive queue */
	ini = cq ? ibv_create_qp_ex(ctx, &qa) : NULL;
	qpx = ini ? ibv_qp_to_qp_ex(ini) : NULL;
	if (!qpx) {
		fprintf(stderr, "FAIL: XRC_SEND QP (%s)\n", strerror(errno));
		exit(2);
	}
	EXPECT(ibv_post_recv(ini, &rw, &bad_rw) != 0);	/* no receive queue */
	connect_qp(ini, &m);

	/* 1. Sends to both SRQs, one 64 KiB, and a WRITE_WITH_IMM that takes a receive. */
	xfer(&step, 0);	/* the server's receives are posted */
	for (i = 0; i < sizeof(sends) / sizeof(sends[0]); i++) {
		uint8_t *p = buf + i * BIG;

		vm_pattern(p, sends[i].len, (uint8_t)(i + 1));
		sge.addr = (uintptr_t)p;
		sge.length = sends[i].len;
		wr.wr_id = i + 1;
		wr.opcode = sends[i].op;
		wr.imm_data = htonl(sends[i].imm);
		wr.wr.rdma.remote_addr = m.addr;
		wr.wr.rdma.rkey = m.rkey;
		send_one(ini, cq, &wr, m.srqn[sends[i].srq], IBV_WC_SUCCESS);
	}
	xfer(&step, 1);

	/* 2. RDMA through the target, in the PD of the SRQ each names. */
	xfer(&step, 0);
	vm_pattern(buf, 4096, 10);
	sge.addr = (uintptr_t)buf;
	sge.length = 4096;
	wr.wr_id = 20;
	wr.opcode = IBV_WR_RDMA_WRITE;
	wr.wr.rdma.remote_addr = m.addr + 12288;
	send_one(ini, cq, &wr, m.srqn[0], IBV_WC_SUCCESS);

	memset(buf + 4096, 0, 4096);
	ibv_wr_start(qpx);
	qpx->wr_id = 21;
	ibv_wr_rdma_read(qpx, m.rkey, m.addr + 4096);
	ibv_wr_set_xrc_srqn(qpx, m.srqn[1]);
	ibv_wr_set_sge(qpx, mr->lkey, (uintptr_t)buf + 4096, 4096);
	EXPECT(ibv_wr_complete(qpx) == 0);
	EXPECT(poll_wc(cq, NULL, &wc, 10) == 1 && wc.wr_id == 21 &&
	       wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RDMA_READ);
	EXPECT(vm_is_pattern(buf + 4096, 4096, 9));

	ibv_wr_start(qpx);
	qpx->wr_id = 22;
	ibv_wr_atomic_fetch_add(qpx, m.rkey, m.addr + 8192, 5);
	ibv_wr_set_xrc_srqn(qpx, m.srqn[0]);
	ibv_wr_set_sge(qpx, mr->lkey, (uintptr_t)buf + 8192, 8);
	EXPECT(ibv_wr_complete(qpx) == 0);
	EXPECT(poll_wc(cq, NULL, &wc, 10) == 1 && wc.wr_id == 22 &&
	       wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_FETCH_ADD);
	memcpy(&word, buf + 8192, 8);
	EXPECT(word == 100);

	sge.addr = (uintptr_t)buf + 8200;
	sge.length = 8;
	wr.wr_id = 23;
	wr.opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
	wr.wr.atomic.remote_addr = m.addr + 8192;
	wr.wr.atomic.rkey = m.rkey;
	wr.wr.atomic.compare_add = 105;
	wr.wr.atomic.swap = 0x77;
	send_one(ini, cq, &wr, m.srqn[1], IBV_WC_SUCCESS);
	memcpy(&word, buf + 8200, 8);
	EXPECT(word == 105);
	xfer(&step, 1);

	/* 3. An SRQ of another domain: a remote invalid request. */
	xfer(&step, 0);
	sge.addr = (uintptr_t)buf;
	sge.length = 64;
	wr.wr_id = 30;
	wr.opcode = IBV_WR_SEND;
	send_one(ini, cq, &wr, m.srqn[2], IBV_WC_REM_INV_REQ_ERR);
	xfer(&step, 1);

	EXPECT(ibv_destroy_qp(ini) == 0);
	EXPECT(ibv_destroy_cq(cq) == 0);
}

int main(int argc, char **argv)
{
	int is_server = vm_meet("qhca-xrc", argc, argv, PORT, &sock);

	setup();
	if (is_server)
		server();
	else
		client();
	EXPECT(ibv_dereg_mr(mr) == 0);
	EXPECT(ibv_dealloc_pd(pd) == 0);
	EXPECT(ibv_close_device(ctx) == 0);
	printf("qhca-xrc %s: %s\n", is_server ? "server" : "client", vm_fails ? "FAIL" : "PASS");
	return vm_fails ? 1 : 0;
}
