// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * qhca-exverbs: the extended verbs interfaces on two RC QPs of one port (loopback):
 * ibv_create_cq_ex with ibv_start_poll/next_poll/end_poll, and ibv_create_qp_ex with the
 * ibv_wr_* API for SEND, SEND with immediate, RDMA WRITE, RDMA READ and FETCH_AND_ADD,
 * including an aborted batch. Checks every completion and every byte. Then queue depth:
 * a full SQ or RQ refuses posts (ibv_post_send, ibv_post_recv, ibv_wr_complete) with
 * ENOMEM until completions are polled, signaled or not. Posting in a state that does not
 * allow it vm_fails with EINVAL: sends in RESET, INIT and RTR, receives in RESET (IBA
 * o11-2.1.1). ibv_create_qp_ex makes RC, UC and UD QPs with an empty CREATE_FLAGS mask.
 * ibv_modify_srq(IBV_SRQ_MAX_WR) resizes an SRQ with receives posted: none lost, order
 * kept, too small refused with EINVAL. A UD receive over RoCE v2 and IPv4 reports its network
 * header type in wc.sl as ConnectX does (0xa), through ibv_poll_cq and ibv_wc_read_sl.
 * Exit 0 if all hold.
 */
#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "vm_verbs.h"

#define SZ 8192
#define ALL_REMOTE (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC)

static struct ibv_context *ctx;
static struct ibv_pd *pd;

static struct ibv_qp *make_qp(struct ibv_cq_ex *cq, uint32_t depth)
{
	struct ibv_qp_init_attr_ex a = {
		.qp_type = IBV_QPT_RC,
		.send_cq = ibv_cq_ex_to_cq(cq),
		.recv_cq = ibv_cq_ex_to_cq(cq),
		.cap = { .max_send_wr = depth, .max_recv_wr = depth, .max_send_sge = 2,
			 .max_recv_sge = 2, .max_inline_data = 64 },
		.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
		.pd = pd,
		.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM |
				  IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_READ |
				  IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD,
	};

	return ibv_create_qp_ex(ctx, &a);
}

/* Poll @n completions from @cq with the extended API; records wr_id, status, opcode. */
static int poll_ex(struct ibv_cq_ex *cq, int n, uint64_t *ids, int *st, int *op, uint32_t *len)
{
	struct ibv_poll_cq_attr attr = {};
	int got = 0, tries = 0, ret;

	while (got < n && tries++ < 2000000) {
		ret = ibv_start_poll(cq, &attr);
		if (ret == ENOENT)
			continue;
		if (ret)
			return -1;
		do {
			ids[got] = cq->wr_id;
			st[got] = cq->status;
			op[got] = ibv_wc_read_opcode(cq);
			len[got] = ibv_wc_read_byte_len(cq);
			got++;
		} while (got < n && ibv_next_poll(cq) == 0);
		ibv_end_poll(cq);
	}
	return got;
}

/* Post @n RDMA WRITEs of 8 bytes to @qp, signaled every @signal_every-th; the post's result. */
static int post_writes(struct ibv_qp *qp, struct ibv_mr *mr, char *buf, int n, int signal_every)
{
	struct ibv_send_wr w[8], *bad = NULL;
	struct ibv_sge s = { (uintptr_t)buf, 8, mr->lkey };
	int i;

	for (i = 0; i < n; i++) {
		w[i] = (struct ibv_send_wr){
			.wr_id = 1000 + i, .sg_list = &s, .num_sge = 1,
			.opcode = IBV_WR_RDMA_WRITE,
			.send_flags = (i + 1) % signal_every ? 0 : IBV_SEND_SIGNALED,
			.next = i + 1 < n ? &w[i + 1] : NULL,
		};
		w[i].wr.rdma.remote_addr = (uintptr_t)buf + 64;
		w[i].wr.rdma.rkey = mr->rkey;
	}
	i = ibv_post_send(qp, w, &bad);
	if (i == ENOMEM && bad != &w[n - 1])
		return -1;	/* only the last one may be refused here */
	return i;
}

static void queue_depth(struct ibv_cq_ex *cq, struct ibv_mr *mr, char *buf, int gid_index,
			union ibv_gid *gid)
{
	struct ibv_sge s = { (uintptr_t)buf, 8, mr->lkey };
	struct ibv_recv_wr r[5], *rbad;
	struct ibv_qp *a = make_qp(cq, 4), *b = make_qp(cq, 4);
	struct ibv_qp_ex *ax;
	uint64_t ids[8];
	int st[8], op[8], i;
	uint32_t len[8];

	EXPECT(a && b);
	if (!a || !b)
		return;
	EXPECT(vm_connect(a, ALL_REMOTE, b->qp_num, gid_index, gid) == 0);
	EXPECT(vm_connect(b, ALL_REMOTE, a->qp_num, gid_index, gid) == 0);
	/* Four fit, the fifth is refused; completions make room again. */
	EXPECT(post_writes(a, mr, buf, 5, 1) == ENOMEM);
	EXPECT(poll_ex(cq, 4, ids, st, op, len) == 4);
	EXPECT(ids[0] == 1000 && ids[3] == 1003 && st[3] == IBV_WC_SUCCESS);
	/* An unsignaled WQE's slot is free once a later signaled one is polled. */
	EXPECT(post_writes(a, mr, buf, 5, 4) == ENOMEM);
	EXPECT(post_writes(a, mr, buf, 1, 1) == ENOMEM);
	EXPECT(poll_ex(cq, 1, ids, st, op, len) == 1);
	EXPECT(ids[0] == 1003);
	EXPECT(post_writes(a, mr, buf, 4, 4) == 0);
	/* ibv_wr_*: a batch that does not fit posts nothing. */
	ax = ibv_qp_to_qp_ex(a);
	ibv_wr_start(ax);
	ax->wr_id = 7;
	ax->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_rdma_write(ax, mr->rkey, (uintptr_t)buf + 64);
	ibv_wr_set_sge(ax, mr->lkey, (uintptr_t)buf, 8);
	EXPECT(ibv_wr_complete(ax) == ENOMEM);
	EXPECT(poll_ex(cq, 1, ids, st, op, len) == 1);
	EXPECT(ids[0] == 1003);
	ibv_wr_start(ax);
	ax->wr_id = 7;
	ax->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_rdma_write(ax, mr->rkey, (uintptr_t)buf + 64);
	ibv_wr_set_sge(ax, mr->lkey, (uintptr_t)buf, 8);
	EXPECT(ibv_wr_complete(ax) == 0);
	EXPECT(poll_ex(cq, 1, ids, st, op, len) == 1);
	EXPECT(ids[0] == 7 && st[0] == IBV_WC_SUCCESS);
	/* Receive queue: four fit, the fifth is refused. */
	for (i = 0; i < 5; i++)
		r[i] = (struct ibv_recv_wr){ .wr_id = 2000 + i, .sg_list = &s, .num_sge = 1,
					     .next = i < 4 ? &r[i + 1] : NULL };
	EXPECT(ibv_post_recv(b, r, &rbad) == ENOMEM && rbad == &r[4]);
	/* Through RESET both QPs start over with empty rings, and work again. */
	{
		struct ibv_qp_attr at = { .qp_state = IBV_QPS_RESET };

		EXPECT(ibv_modify_qp(a, &at, IBV_QP_STATE) == 0);
		EXPECT(ibv_modify_qp(b, &at, IBV_QP_STATE) == 0);
		EXPECT(vm_connect(a, ALL_REMOTE, b->qp_num, gid_index, gid) == 0);
		EXPECT(vm_connect(b, ALL_REMOTE, a->qp_num, gid_index, gid) == 0);
		EXPECT(ibv_post_recv(b, r, &rbad) == ENOMEM && rbad == &r[4]);
		EXPECT(post_writes(a, mr, buf, 4, 1) == 0);
		EXPECT(poll_ex(cq, 4, ids, st, op, len) == 4);
		EXPECT(ids[3] == 1003 && st[3] == IBV_WC_SUCCESS);
	}
	ibv_destroy_qp(a);
	ibv_destroy_qp(b);
}

/* ibv_create_qp_ex for every type, with the CREATE_FLAGS mask set and no flag (as pyverbs
 * does); a flag the device does not have is refused with EOPNOTSUPP. */
static void create_ex_types(struct ibv_cq_ex *cq)
{
	static const enum ibv_qp_type types[] = { IBV_QPT_RC, IBV_QPT_UC, IBV_QPT_UD };
	unsigned i;

	for (i = 0; i < 3; i++) {
		struct ibv_qp_init_attr_ex a = {
			.qp_type = types[i],
			.send_cq = ibv_cq_ex_to_cq(cq),
			.recv_cq = ibv_cq_ex_to_cq(cq),
			.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1,
				 .max_recv_sge = 1 },
			.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_CREATE_FLAGS,
			.pd = pd,
		};
		struct ibv_qp *qp = ibv_create_qp_ex(ctx, &a);

		EXPECT(qp != NULL);
		if (qp)
			ibv_destroy_qp(qp);
		a.create_flags = IBV_QP_CREATE_SCATTER_FCS;
		qp = ibv_create_qp_ex(ctx, &a);
		EXPECT(!qp && errno == EOPNOTSUPP);
		if (qp)
			ibv_destroy_qp(qp);
	}
}

/* An SRQ of 4 with 3 receives posted grows to 64 (and refuses 1), takes 20 more, and a
 * QP attached to it receives 23 SENDs in order. */
static void srq_resize(struct ibv_cq_ex *cq, struct ibv_mr *mr, char *buf, int gid_index,
		       union ibv_gid *gid)
{
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 4, .max_sge = 1 } };
	struct ibv_srq_attr ra = { .max_wr = 64 };
	struct ibv_srq *srq = ibv_create_srq(pd, &sa);
	struct ibv_qp_init_attr qa = {
		.send_cq = ibv_cq_ex_to_cq(cq), .recv_cq = ibv_cq_ex_to_cq(cq),
		.qp_type = IBV_QPT_RC, .srq = srq,
		.cap = { .max_send_wr = 32, .max_send_sge = 1, .max_inline_data = 16 },
	};
	struct ibv_qp *a, *b;
	uint64_t ids[4];
	int st[4], op[4], i, k, recvs = 0, sends = 0;
	uint32_t len[4];

	EXPECT(srq != NULL);
	if (!srq)
		return;
	a = ibv_create_qp(pd, &qa);
	b = ibv_create_qp(pd, &qa);
	EXPECT(a && b);
	if (!a || !b)
		return;
	EXPECT(vm_connect(a, ALL_REMOTE, b->qp_num, gid_index, gid) == 0);
	EXPECT(vm_connect(b, ALL_REMOTE, a->qp_num, gid_index, gid) == 0);
	for (i = 0; i < 23; i++) {
		struct ibv_sge s = { (uintptr_t)(buf + SZ + 64 * i), 64, mr->lkey };
		struct ibv_recv_wr r = { .wr_id = 1000 + i, .sg_list = &s, .num_sge = 1 }, *bad;

		if (i == 3) {
			ra.max_wr = 1;
			EXPECT(ibv_modify_srq(srq, &ra, IBV_SRQ_MAX_WR) == EINVAL);
			ra.max_wr = 64;
			EXPECT(ibv_modify_srq(srq, &ra, IBV_SRQ_MAX_WR) == 0);
		}
		EXPECT(ibv_post_srq_recv(srq, &r, &bad) == 0);
	}
	for (i = 0; i < 23; i++) {
		struct ibv_send_wr w = { .wr_id = 2000 + i, .opcode = IBV_WR_SEND,
					 .send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE,
					 .sg_list = &(struct ibv_sge){ (uintptr_t)&i, 4, 0 },
					 .num_sge = 1 }, *bad;

		EXPECT(ibv_post_send(a, &w, &bad) == 0);
		for (k = 0; k < 2; k++) {	/* its send and its receive completion */
			EXPECT(poll_ex(cq, 1, ids, st, op, len) == 1 && st[0] == IBV_WC_SUCCESS);
			if (op[0] == IBV_WC_RECV) {
				EXPECT(ids[0] == 1000u + recvs);
				EXPECT(*(int *)(buf + SZ + 64 * recvs) == recvs);
				recvs++;
			} else {
				sends++;
			}
		}
	}
	EXPECT(recvs == 23 && sends == 23);
	ibv_destroy_qp(a);
	ibv_destroy_qp(b);
	EXPECT(ibv_destroy_srq(srq) == 0);
}

/*
 * A UD datagram from the RoCE v1 GID of the same address: its receive says RoCE v1 (SL 0: no
 * UDP, a GRH), and the GRH area holds the GRH as it came (IPVer 6, NxtHdr 0x1b), not an IPv4
 * header.
 */
static void ud_sl_v1(struct ibv_qp *qp, struct ibv_cq_ex *cq, struct ibv_mr *mr, char *buf,
		     union ibv_gid *gid)
{
	struct ibv_ah_attr aa = { .is_global = 1, .port_num = 1,
				  .grh = { .dgid = *gid, .hop_limit = 1 } };
	struct ibv_sge rs = { (uintptr_t)(buf + SZ + 512), 256, mr->lkey };
	struct ibv_sge ss = { (uintptr_t)buf, 16, mr->lkey };
	struct ibv_recv_wr r = { .wr_id = 3200, .sg_list = &rs, .num_sge = 1 }, *rbad;
	struct ibv_send_wr w = { .wr_id = 3201, .sg_list = &ss, .num_sge = 1,
				 .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED }, *sbad;
	const uint8_t *grh = (const uint8_t *)buf + SZ + 512;
	struct ibv_gid_entry g;
	struct ibv_ah *ah;
	struct ibv_wc wc;
	int i, k, got = 0, v1 = -1;

	for (i = 0; i < 64 && v1 < 0; i++)
		if (!ibv_query_gid_ex(ctx, 1, i, &g, 0) && g.gid_type == IBV_GID_TYPE_ROCE_V1 &&
		    !memcmp(g.gid.raw, gid->raw, 16))
			v1 = i;
	EXPECT(v1 >= 0);
	if (v1 < 0)
		return;
	aa.grh.sgid_index = (uint8_t)v1;
	ah = ibv_create_ah(pd, &aa);
	EXPECT(ah != NULL);
	if (!ah)
		return;
	w.wr.ud.ah = ah;
	w.wr.ud.remote_qpn = qp->qp_num;
	w.wr.ud.remote_qkey = 0x1111;
	EXPECT(ibv_post_recv(qp, &r, &rbad) == 0);
	EXPECT(ibv_post_send(qp, &w, &sbad) == 0);
	for (k = 0; k < 2000000 && got < 2; k++) {
		if (ibv_poll_cq(ibv_cq_ex_to_cq(cq), 1, &wc) != 1)
			continue;
		got++;
		EXPECT(wc.status == IBV_WC_SUCCESS);
		if (wc.opcode == IBV_WC_RECV)
			EXPECT(wc.sl == 0 && (wc.wc_flags & IBV_WC_GRH) && wc.byte_len == 40 + 16 &&
			       grh[0] >> 4 == 6 && grh[6] == 0x1b && !memcmp(grh + 8, gid->raw, 16));
	}
	EXPECT(got == 2);
	ibv_destroy_ah(ah);
}

/* Two UD datagrams to our own QP: each receive says RoCE v2 over IPv4 in its SL. */
static void ud_sl(struct ibv_cq_ex *cq, struct ibv_mr *mr, char *buf, int gid_index,
		  union ibv_gid *gid)
{
	struct ibv_qp_init_attr qa = {
		.send_cq = ibv_cq_ex_to_cq(cq), .recv_cq = ibv_cq_ex_to_cq(cq),
		.qp_type = IBV_QPT_UD,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_ah_attr aa = { .is_global = 1, .port_num = 1,
				  .grh = { .dgid = *gid, .sgid_index = gid_index, .hop_limit = 1 } };
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1, .qkey = 0x1111 };
	struct ibv_qp *qp = ibv_create_qp(pd, &qa);
	struct ibv_ah *ah = ibv_create_ah(pd, &aa);
	struct ibv_poll_cq_attr pa = {};
	int i, k, got = 0;

	EXPECT(qp && ah);
	if (!qp || !ah)
		return;
	EXPECT(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			     IBV_QP_QKEY) == 0);
	a.qp_state = IBV_QPS_RTR;
	EXPECT(ibv_modify_qp(qp, &a, IBV_QP_STATE) == 0);
	a.qp_state = IBV_QPS_RTS;
	EXPECT(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN) == 0);
	for (i = 0; i < 2; i++) {
		struct ibv_sge rs = { (uintptr_t)(buf + SZ + 256 * i), 256, mr->lkey };
		struct ibv_sge ss = { (uintptr_t)buf, 16, mr->lkey };
		struct ibv_recv_wr r = { .wr_id = 3000 + i, .sg_list = &rs, .num_sge = 1 }, *rbad;
		struct ibv_send_wr w = { .wr_id = 3100 + i, .sg_list = &ss, .num_sge = 1,
					 .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED,
					 .wr.ud = { .ah = ah, .remote_qpn = qp->qp_num,
						    .remote_qkey = 0x1111 } }, *sbad;

		EXPECT(ibv_post_recv(qp, &r, &rbad) == 0);
		EXPECT(ibv_post_send(qp, &w, &sbad) == 0);
		for (k = 0; k < 2000000 && got < 2 * (i + 1); k++) {
			if (i == 0) {
				struct ibv_wc wc;

				if (ibv_poll_cq(ibv_cq_ex_to_cq(cq), 1, &wc) != 1)
					continue;
				got++;
				EXPECT(wc.status == IBV_WC_SUCCESS);
				if (wc.opcode == IBV_WC_RECV)
					EXPECT(wc.sl == 0xa && (wc.wc_flags & IBV_WC_GRH));
			} else {
				if (ibv_start_poll(cq, &pa))
					continue;
				got++;
				EXPECT(cq->status == IBV_WC_SUCCESS);
				if (ibv_wc_read_opcode(cq) == IBV_WC_RECV)
					EXPECT(ibv_wc_read_sl(cq) == 0xa);
				ibv_end_poll(cq);
			}
		}
	}
	EXPECT(got == 4);
	ud_sl_v1(qp, cq, mr, buf, gid);
	ibv_destroy_qp(qp);
	ibv_destroy_ah(ah);
}

/* Which states accept posts: a new QP walked from RESET to RTS, then back to RESET. */
static void post_states(struct ibv_cq_ex *cq, struct ibv_mr *mr, char *buf, int gid_index,
			union ibv_gid *gid)
{
	struct ibv_sge s = { (uintptr_t)buf, 16, mr->lkey };
	struct ibv_recv_wr r = { .wr_id = 7, .sg_list = &s, .num_sge = 1 }, *rbad;
	struct ibv_send_wr w = { .wr_id = 8, .sg_list = &s, .num_sge = 1,
				 .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED }, *sbad;
	uint64_t ids[2];
	int st[2], op[2];
	uint32_t len[2];
	struct ibv_qp_attr reset = { .qp_state = IBV_QPS_RESET };
	struct ibv_qp *qp = make_qp(cq, 8);
	struct ibv_qp_ex *x = qp ? ibv_qp_to_qp_ex(qp) : NULL;

	EXPECT(qp && x);
	if (!qp || !x)
		return;
	EXPECT(ibv_post_recv(qp, &r, &rbad) == EINVAL && rbad == &r);
	EXPECT(ibv_post_send(qp, &w, &sbad) == EINVAL && sbad == &w);
	ibv_wr_start(x);
	ibv_wr_send(x);
	ibv_wr_set_sge(x, mr->lkey, (uintptr_t)buf, 16);
	EXPECT(ibv_wr_complete(x) == EINVAL);
	/* Connected to itself: INIT and RTR take receives, not sends. */
	EXPECT(vm_connect(qp, ALL_REMOTE, qp->qp_num, gid_index, gid) == 0);
	EXPECT(ibv_post_recv(qp, &r, &rbad) == 0);	/* RTS: both */
	EXPECT(ibv_post_send(qp, &w, &sbad) == 0);
	EXPECT(poll_ex(cq, 2, ids, st, op, len) == 2 && st[0] == IBV_WC_SUCCESS &&
	       st[1] == IBV_WC_SUCCESS);
	EXPECT(ibv_modify_qp(qp, &reset, IBV_QP_STATE) == 0);
	EXPECT(ibv_post_recv(qp, &r, &rbad) == EINVAL);
	EXPECT(ibv_post_send(qp, &w, &sbad) == EINVAL);
	{
		struct ibv_qp_attr init = { .qp_state = IBV_QPS_INIT, .port_num = 1,
					    .qp_access_flags = ALL_REMOTE };

		EXPECT(ibv_modify_qp(qp, &init, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				     IBV_QP_ACCESS_FLAGS) == 0);
		EXPECT(ibv_post_recv(qp, &r, &rbad) == 0);
		EXPECT(ibv_post_send(qp, &w, &sbad) == EINVAL);
	}
	ibv_destroy_qp(qp);
}

int main(int argc, char **argv)
{
	struct ibv_cq_init_attr_ex cqa = { .cqe = 64, .wc_flags = IBV_WC_STANDARD_FLAGS };
	int gid_index = argc > 1 ? atoi(argv[1]) : -1;
	struct ibv_cq_ex *cq;
	struct ibv_qp *a, *b;
	struct ibv_qp_ex *ax;
	struct ibv_mr *mr;
	union ibv_gid gid;
	uint64_t ids[8];
	int st[8], op[8], i;
	uint32_t len[8];
	char *buf;

	ctx = vm_open("qhca_0");
	if (ctx && gid_index < 0)
		gid_index = vm_roce_gid(ctx);
	if (!ctx || ibv_query_gid(ctx, 1, gid_index, &gid))
		return 2;
	pd = ibv_alloc_pd(ctx);
	buf = aligned_alloc(4096, 4 * SZ);
	memset(buf, 0, 4 * SZ);
	mr = ibv_reg_mr(pd, buf, 4 * SZ, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC);
	cq = ibv_create_cq_ex(ctx, &cqa);
	EXPECT(pd && mr && cq);
	if (!pd || !mr || !cq)
		return 1;
	a = make_qp(cq, 16);
	b = make_qp(cq, 16);
	EXPECT(a && b);
	if (!a || !b)
		return 1;
	EXPECT(vm_connect(a, ALL_REMOTE, b->qp_num, gid_index, &gid) == 0);
	EXPECT(vm_connect(b, ALL_REMOTE, a->qp_num, gid_index, &gid) == 0);
	ax = ibv_qp_to_qp_ex(a);
	EXPECT(ax != NULL);

	/* b receives one SEND into buf[SZ..]. */
	{
		struct ibv_sge s = { (uintptr_t)(buf + SZ), SZ, mr->lkey };
		struct ibv_recv_wr r = { .wr_id = 100, .sg_list = &s, .num_sge = 1 }, *bad;

		EXPECT(ibv_post_recv(b, &r, &bad) == 0);
	}
	for (i = 0; i < SZ; i++)
		buf[i] = (char)(i * 7 + 3);
	*(uint64_t *)(buf + 3 * SZ) = 40;

	/* An aborted batch posts nothing. */
	ibv_wr_start(ax);
	ax->wr_id = 99;
	ax->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send(ax);
	ibv_wr_set_sge(ax, mr->lkey, (uintptr_t)buf, 16);
	ibv_wr_abort(ax);

	ibv_wr_start(ax);
	ax->wr_id = 1;
	ax->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send_imm(ax, htobe32(0x1234));
	ibv_wr_set_sge(ax, mr->lkey, (uintptr_t)buf, 3000);
	ax->wr_id = 2;
	ibv_wr_rdma_write(ax, mr->rkey, (uintptr_t)(buf + 2 * SZ));
	ibv_wr_set_sge(ax, mr->lkey, (uintptr_t)buf, 5000);
	ax->wr_id = 3;
	ibv_wr_rdma_read(ax, mr->rkey, (uintptr_t)(buf + 2 * SZ));
	ibv_wr_set_sge(ax, mr->lkey, (uintptr_t)(buf + 2 * SZ + 5000), 1000);
	ax->wr_id = 4;
	ibv_wr_atomic_fetch_add(ax, mr->rkey, (uintptr_t)(buf + 3 * SZ), 2);
	ibv_wr_set_sge(ax, mr->lkey, (uintptr_t)(buf + 3 * SZ + 8), 8);
	ax->wr_id = 5;
	ibv_wr_send(ax);
	ibv_wr_set_inline_data(ax, "inline!", 8);
	EXPECT(ibv_wr_complete(ax) == 0);

	/* Five send completions and one receive (the inline SEND has no receive: RNR). */
	EXPECT(poll_ex(cq, 5, ids, st, op, len) == 5);
	for (i = 0; i < 5; i++)
		printf("completion wr_id %llu status %d opcode %d len %u\n",
		       (unsigned long long)ids[i], st[i], op[i], len[i]);
	EXPECT(ids[0] == 100 && st[0] == IBV_WC_SUCCESS && op[0] == IBV_WC_RECV && len[0] == 3000);
	EXPECT(ids[1] == 1 && st[1] == IBV_WC_SUCCESS && op[1] == IBV_WC_SEND);
	EXPECT(ids[2] == 2 && st[2] == IBV_WC_SUCCESS && op[2] == IBV_WC_RDMA_WRITE);
	EXPECT(ids[3] == 3 && st[3] == IBV_WC_SUCCESS && op[3] == IBV_WC_RDMA_READ);
	EXPECT(ids[4] == 4 && st[4] == IBV_WC_SUCCESS && op[4] == IBV_WC_FETCH_ADD);
	EXPECT(!memcmp(buf, buf + SZ, 3000));
	EXPECT(!memcmp(buf, buf + 2 * SZ, 5000));
	EXPECT(!memcmp(buf, buf + 2 * SZ + 5000, 1000));
	EXPECT(*(uint64_t *)(buf + 3 * SZ) == 42);
	EXPECT(*(uint64_t *)(buf + 3 * SZ + 8) == 40);

	/* The inline SEND completes once b posts a receive. */
	{
		struct ibv_sge s = { (uintptr_t)(buf + SZ), 64, mr->lkey };
		struct ibv_recv_wr r = { .wr_id = 101, .sg_list = &s, .num_sge = 1 }, *bad;

		EXPECT(ibv_post_recv(b, &r, &bad) == 0);
		EXPECT(poll_ex(cq, 2, ids, st, op, len) == 2);
		EXPECT(st[0] == IBV_WC_SUCCESS && st[1] == IBV_WC_SUCCESS);
		EXPECT(!strcmp(buf + SZ, "inline!"));
	}
	ibv_destroy_qp(a);
	ibv_destroy_qp(b);
	queue_depth(cq, mr, buf, gid_index, &gid);
	post_states(cq, mr, buf, gid_index, &gid);
	create_ex_types(cq);
	srq_resize(cq, mr, buf, gid_index, &gid);
	ud_sl(cq, mr, buf, gid_index, &gid);
	ibv_destroy_cq(ibv_cq_ex_to_cq(cq));
	ibv_dereg_mr(mr);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	printf("qhca-exverbs: %s\n", vm_fails ? "FAIL" : "PASS");
	return vm_fails ? 1 : 0;
}
