// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * qhca-cqevent: destroy a CQ against its CQ_ERR event (issue 25). Each round makes a CQ of
 * one entry and an RC QP connected to itself on it, posts four signaled RDMA WRITEs so that
 * the CQ overflows (the device raises CQ_ERR on the async EQ), waits a little, and then
 * destroys the QP and the CQ at once, without reading the event. With the driver's debugfs
 * cq_event_delay_ms set, the driver handles the CQ_ERR only in the interrupt that completes
 * DESTROY_CQ and slowly: the destroy must not return before the handler is done (the
 * driver's debugfs cq_events_late counts those that did; tests/vm/test-hardening.sh).
 *
 * With -a each round instead waits for IBV_EVENT_CQ_ERR on the CQ through the async event
 * queue and acknowledges it before destroying: the event reaches user space.
 *
 *   qhca-cqevent [-a] [-d DEVICE] [-g GID_INDEX] [-n ROUNDS]
 *
 * Exit 0 if every verb succeeded (and with -a every event came).
 */
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "vm_verbs.h"

#define ROUND_SECONDS	20	/* a round takes milliseconds; a hang fails the test */
#define WRITES		4	/* into a CQ of 2 slots: the third overflows it */

static void on_alarm(int sig)
{
	static const char msg[] = "FAIL: a round did not finish (hang)\n";

	(void)sig;
	(void)!write(2, msg, sizeof(msg) - 1);
	_exit(2);
}

/* Wait up to 5 s for IBV_EVENT_CQ_ERR on @cq, acknowledging every event read. */
static int await_cq_err(struct ibv_context *ctx, struct ibv_cq *cq)
{
	struct pollfd pfd = { .fd = ctx->async_fd, .events = POLLIN };
	struct ibv_async_event ev;
	int found = 0;

	while (!found && poll(&pfd, 1, 5000) == 1) {
		if (ibv_get_async_event(ctx, &ev))
			return -1;
		found = ev.event_type == IBV_EVENT_CQ_ERR && ev.element.cq == cq;
		ibv_ack_async_event(&ev);
	}
	return found ? 0 : -1;
}

static int one_round(struct ibv_context *ctx, struct ibv_pd *pd, struct ibv_mr *mr,
		     int gid_index, const union ibv_gid *gid, int await)
{
	struct ibv_qp_init_attr qa = {
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 8, .max_recv_wr = 1, .max_send_sge = 1,
			 .max_recv_sge = 1 },
	};
	struct ibv_sge sge = { .addr = (uintptr_t)mr->addr, .length = 8, .lkey = mr->lkey };
	struct ibv_send_wr wr = {
		.sg_list = &sge,
		.num_sge = 1,
		.opcode = IBV_WR_RDMA_WRITE,
		.send_flags = IBV_SEND_SIGNALED,
		.wr.rdma = { .remote_addr = (uintptr_t)mr->addr + 64, .rkey = mr->rkey },
	}, *bad;
	struct ibv_qp *qp;
	struct ibv_cq *cq;
	int i, ret = -1;

	cq = ibv_create_cq(ctx, 1, NULL, NULL, 0);
	if (!cq) {
		perror("FAIL ibv_create_cq");
		return -1;
	}
	qa.send_cq = cq;
	qa.recv_cq = cq;
	qp = ibv_create_qp(pd, &qa);
	if (!qp) {
		perror("FAIL ibv_create_qp");
		goto out_cq;
	}
	if (vm_connect(qp, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, qp->qp_num,
		       gid_index, gid)) {
		perror("FAIL connecting the QP to itself");
		goto out_qp;
	}
	for (i = 0; i < WRITES; i++) {
		wr.wr_id = i;
		if (ibv_post_send(qp, &wr, &bad)) {
			perror("FAIL ibv_post_send");
			goto out_qp;
		}
	}
	if (await) {
		if (await_cq_err(ctx, cq)) {
			fprintf(stderr, "FAIL no IBV_EVENT_CQ_ERR for the overflowed CQ\n");
			goto out_qp;
		}
	} else {
		usleep(20000);	/* the writes done and the CQ overflowed */
	}
	ret = 0;
out_qp:
	if (ibv_destroy_qp(qp)) {
		perror("FAIL ibv_destroy_qp");
		ret = -1;
	}
out_cq:
	if (ibv_destroy_cq(cq)) {
		perror("FAIL ibv_destroy_cq");
		ret = -1;
	}
	return ret;
}

int main(int argc, char **argv)
{
	const char *name = "qhca_0";
	int rounds = 50, gid_index = -1, await = 0;
	struct ibv_context *ctx;
	union ibv_gid gid;
	struct ibv_mr *mr;
	struct ibv_pd *pd;
	void *buf;
	int opt, i;

	while ((opt = getopt(argc, argv, "ad:g:n:")) != -1) {
		switch (opt) {
		case 'a':
			await = 1;
			break;
		case 'd':
			name = optarg;
			break;
		case 'g':
			gid_index = atoi(optarg);
			break;
		case 'n':
			rounds = atoi(optarg);
			break;
		default:
			fprintf(stderr, "usage: %s [-a] [-d DEVICE] [-g GID_INDEX] [-n ROUNDS]\n",
				argv[0]);
			return 1;
		}
	}
	signal(SIGALRM, on_alarm);
	alarm(ROUND_SECONDS);
	ctx = vm_open(name);
	if (!ctx) {
		fprintf(stderr, "FAIL cannot open %s\n", name);
		return 1;
	}
	if (gid_index < 0)
		gid_index = vm_roce_gid(ctx);
	buf = calloc(1, 4096);
	pd = ibv_alloc_pd(ctx);
	mr = pd && buf ? ibv_reg_mr(pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE |
				    IBV_ACCESS_REMOTE_WRITE) : NULL;
	if (!mr || ibv_query_gid(ctx, 1, gid_index, &gid)) {
		fprintf(stderr, "FAIL pd, mr or gid %d\n", gid_index);
		return 1;
	}
	for (i = 0; i < rounds; i++) {
		alarm(ROUND_SECONDS);
		if (one_round(ctx, pd, mr, gid_index, &gid, await)) {
			fprintf(stderr, "FAIL in round %d\n", i);
			return 1;
		}
	}
	alarm(0);
	ibv_dereg_mr(mr);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	free(buf);
	printf("ok - %d rounds of CQ overflow and destroy%s\n", rounds,
	       await ? ", each CQ_ERR received" : "");
	return 0;
}
