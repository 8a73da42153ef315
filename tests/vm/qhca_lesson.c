// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * qhca-lesson: one RDMA operation between two guests and nothing else, so that
 * 'qhca explain' tells a short story (docs/tutorial.md). Both sides open qhca_0, register
 * a buffer, create one RC QP and meet over TCP to swap QP numbers, PSNs, keys and
 * addresses; then the client posts exactly one work request, arms its CQ, sleeps until
 * the completion event and polls. The server checks what arrived.
 *
 *   qhca-lesson OP [-s SIZE] [-p PORT] [-t T]                the server (guest 2)
 *   qhca-lesson OP [-s SIZE] [-p PORT] [-t T] [-W FILE] SERVER_IP    the client (guest 1)
 *
 * -t T: the QPs' local ACK timeout, 4.096 us * 2^T (default 14: 67 ms), 7 retries; -W FILE:
 * the client posts only once FILE exists (docs/migration.md: a WRITE that spans a move).
 *
 * On an iWARP port (link=iwarp) a QP connects through rdma_cm, as iWARP wants (iw_cm sets
 * up the TCP connection and the MPA negotiation): the server listens on PORT + 1, the
 * client connects there, and the two then swap keys and addresses over TCP as on the other
 * wires. iWARP has write, send and read; no atomics, and no RNR (a SEND into no receive
 * ends the connection), so the other lessons are refused there.
 *
 * OP is write, send, read, atomic (fetch and add), cas (compare and swap), bad-rkey (a
 * WRITE with a forged rkey: the responder refuses it, the client's completion says
 * REMOTE_ACCESS_ERROR) or rnr (a SEND that arrives before the server posted its receive:
 * RNR NAKs until it does). Exit status 0 when the lesson went as it should, errors
 * included where it teaches one.
 */
#include <getopt.h>
#include <poll.h>

#include <rdma/rdma_cma.h>

#include "vm_verbs.h"

#define PROG "qhca-lesson"

struct info {			/* what each side tells the other, over TCP */
	uint32_t qpn, psn, rkey;
	uint16_t lid;
	uint16_t pad;
	uint64_t va;
	union ibv_gid gid;
};

enum op { OP_WRITE, OP_SEND, OP_READ, OP_ATOMIC, OP_CAS, OP_BAD_RKEY, OP_RNR };
static const char *const op_names[] = { "write", "send", "read", "atomic", "cas", "bad-rkey",
					"rnr" };

static int usage(void)
{
	fprintf(stderr, "usage: %s write|send|read|atomic|cas|bad-rkey|rnr [-s SIZE] [-p PORT] "
		"[-t TIMEOUT] [-W FILE] [-g GID_INDEX] [SERVER_IP]\n", PROG);
	return 2;
}

static int die(const char *what)
{
	fprintf(stderr, "%s: %s: %s\n", PROG, what, strerror(errno));
	return 1;
}

/* Sleep until the CQ's completion event (the CQ was armed before anything could complete),
 * then poll the one completion: every run takes the same steps, for the lesson's story. */
static int wait_completion(struct ibv_comp_channel *ch, struct ibv_cq *cq, struct ibv_wc *wc)
{
	struct ibv_cq *ev_cq;
	void *ev_ctx;
	int n;

	if (ibv_get_cq_event(ch, &ev_cq, &ev_ctx))
		return die("ibv_get_cq_event");
	ibv_ack_cq_events(ev_cq, 1);
	while ((n = ibv_poll_cq(cq, 1, wc)) == 0)
		;	/* the entry is written before its event: at once */
	return n < 0 ? die("ibv_poll_cq") : 0;
}

/* The next rdma_cm event, which must be @want; 0 if it is (the event's ID in *id). */
static int cm_event(struct rdma_event_channel *ech, enum rdma_cm_event_type want,
		    struct rdma_cm_id **id)
{
	struct rdma_cm_event *ev;
	int ok;

	if (rdma_get_cm_event(ech, &ev))
		return die("rdma_get_cm_event");
	ok = ev->event == want;
	if (!ok)
		fprintf(stderr, "%s: rdma_cm: %s, not %s (status %d)\n", PROG,
			rdma_event_str(ev->event), rdma_event_str(want), ev->status);
	else if (id)
		*id = ev->id;
	rdma_ack_cm_event(ev);
	return ok ? 0 : 1;
}

/*
 * iWARP: the server's rdma_cm ID listening on @port (@host NULL), or the client's ID, its
 * address and route resolved to @host. The client's ID has its device in ->verbs.
 */
static struct rdma_cm_id *cm_start(const char *host, uint16_t port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port) };
	struct rdma_event_channel *ech = rdma_create_event_channel();
	struct rdma_cm_id *id = NULL;

	if (!ech || rdma_create_id(ech, &id, NULL, RDMA_PS_TCP)) {
		die("rdma_create_id");
		return NULL;
	}
	if (!host) {
		if (rdma_bind_addr(id, (struct sockaddr *)&sa) || rdma_listen(id, 1)) {
			die("rdma_listen");
			return NULL;
		}
		return id;
	}
	if (inet_pton(AF_INET, host, &sa.sin_addr) != 1 ||
	    rdma_resolve_addr(id, NULL, (struct sockaddr *)&sa, 2000) ||
	    cm_event(ech, RDMA_CM_EVENT_ADDR_RESOLVED, NULL) ||
	    rdma_resolve_route(id, 2000) || cm_event(ech, RDMA_CM_EVENT_ROUTE_RESOLVED, NULL)) {
		fprintf(stderr, "%s: rdma_cm cannot resolve %s\n", PROG, host);
		return NULL;
	}
	return id;
}

/* iWARP: connect (client) or accept (server) @id's QP; 0 once the connection is up. */
static int cm_connect(int server, struct rdma_cm_id *id)
{
	struct rdma_conn_param cp = { .responder_resources = 1, .initiator_depth = 1 };

	if (server ? rdma_accept(id, &cp) : rdma_connect(id, &cp))
		return die(server ? "rdma_accept" : "rdma_connect");
	return cm_event(id->channel, RDMA_CM_EVENT_ESTABLISHED, NULL);
}

int main(int argc, char **argv)
{
	size_t size = 8192;
	uint16_t port = 18700;
	struct info me = { 0 }, peer;
	struct vm_conn_attr conn;
	struct ibv_port_attr pa;
	struct ibv_context *ctx;
	struct ibv_comp_channel *ch;
	struct ibv_qp_init_attr qa;
	struct ibv_sge sge;
	struct ibv_send_wr wr, *bad;
	struct ibv_recv_wr rwr, *rbad;
	struct ibv_wc wc;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	uint8_t *buf;
	enum op op;
	char done = 'd';
	const char *wait_file = NULL;
	int server, sock, c, i, ok = 1, timeout = 14;
	int gid_index = -1, iwarp;
	struct rdma_cm_id *id = NULL;

	if (argc < 2)
		return usage();
	for (i = 0; i < (int)(sizeof(op_names) / sizeof(op_names[0])); i++)
		if (!strcmp(argv[1], op_names[i]))
			break;
	if (i == (int)(sizeof(op_names) / sizeof(op_names[0])))
		return usage();
	op = (enum op)i;
	optind = 2;
	while ((c = getopt(argc, argv, "s:p:t:W:g:")) != -1) {
		if (c == 's')
			size = strtoul(optarg, NULL, 0);
		else if (c == 'p')
			port = (uint16_t)atoi(optarg);
		else if (c == 't')
			timeout = atoi(optarg);
		else if (c == 'W')
			wait_file = optarg;
		else if (c == 'g')
			gid_index = atoi(optarg);	/* e.g. a RoCE v1 GID */
		else
			return usage();
	}
	if (optind < argc - 1 || size < 1 || size > (1u << 30) || timeout < 1 || timeout > 31)
		return usage();
	server = optind == argc;
	if (op == OP_ATOMIC || op == OP_CAS)
		size = 8;

	ctx = vm_open("qhca_0");
	if (!ctx)
		return die("no device qhca_0");
	iwarp = ctx->device->transport_type == IBV_TRANSPORT_IWARP;
	if (iwarp && op != OP_WRITE && op != OP_SEND && op != OP_READ) {
		fprintf(stderr, "%s: %s is no iWARP lesson: iWARP has write, send and read (no "
			"atomics; a SEND into no receive ends the connection, no RNR)\n", PROG,
			op_names[op]);
		return 2;
	}
	if (iwarp) {
		/* rdma_cm's own context of the device: the QP must be made on it. The
		 * server listens before it takes the client's TCP connection, the client
		 * connects its QP only after that: it never finds nobody listening. */
		ibv_close_device(ctx);
		id = cm_start(server ? NULL : argv[argc - 1], (uint16_t)(port + 1));
		if (!id)
			return 1;
		vm_meet_host(PROG, server, server ? NULL : argv[argc - 1], port, 10, &sock);
		if (server && cm_event(id->channel, RDMA_CM_EVENT_CONNECT_REQUEST, &id))
			return 1;
		ctx = id->verbs;
	}
	if (ibv_query_port(ctx, 1, &pa))
		return die("ibv_query_port");
	pd = ibv_alloc_pd(ctx);
	buf = aligned_alloc(4096, (size + 4095) & ~(size_t)4095);
	if (!pd || !buf)
		return die("ibv_alloc_pd");
	vm_pattern(buf, size, server ? 2 : 1);
	if (op == OP_ATOMIC || op == OP_CAS)
		*(uint64_t *)buf = server ? 41 : 0;
	mr = ibv_reg_mr(pd, buf, size, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			IBV_ACCESS_REMOTE_READ | (iwarp ? 0 : IBV_ACCESS_REMOTE_ATOMIC));
	ch = ibv_create_comp_channel(ctx);
	cq = ch ? ibv_create_cq(ctx, 4, NULL, ch, 0) : NULL;
	if (!mr || !cq)
		return die("ibv_reg_mr or ibv_create_cq");
	memset(&qa, 0, sizeof(qa));
	qa.send_cq = qa.recv_cq = cq;
	qa.qp_type = IBV_QPT_RC;
	qa.cap.max_send_wr = qa.cap.max_recv_wr = 2;
	qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
	if (iwarp) {
		if (rdma_create_qp(id, pd, &qa))
			return die("rdma_create_qp");
		qp = id->qp;
		if (ibv_req_notify_cq(cq, 0))
			return die("ibv_req_notify_cq");
		if (cm_connect(server, id))
			return 1;
		me.qpn = qp->qp_num;
		me.rkey = mr->rkey;
		me.va = (uintptr_t)buf;
		vm_xfer(sock, &me, sizeof(me), 1);
		vm_xfer(sock, &peer, sizeof(peer), 0);
		goto connected;
	}
	qp = ibv_create_qp(pd, &qa);
	if (!qp)
		return die("ibv_create_qp");

	me.qpn = qp->qp_num;
	me.psn = (uint32_t)(getpid() * 2654435761u) & 0xffffff;
	me.rkey = mr->rkey;
	me.va = (uintptr_t)buf;
	me.lid = pa.lid;
	if (gid_index < 0)
		gid_index = vm_roce_gid(ctx);
	if (pa.link_layer != IBV_LINK_LAYER_INFINIBAND && ibv_query_gid(ctx, 1, gid_index, &me.gid))
		return die("ibv_query_gid");
	vm_meet_host(PROG, server, server ? NULL : argv[argc - 1], port, 10, &sock);
	vm_xfer(sock, &me, sizeof(me), 1);
	vm_xfer(sock, &peer, sizeof(peer), 0);

	vm_conn_defaults(&conn);
	conn.path_mtu = pa.active_mtu;
	conn.min_rnr_timer = 22;	/* RNR NAK: try again after 20.48 ms */
	conn.timeout = (uint8_t)timeout;
	if (pa.link_layer == IBV_LINK_LAYER_INFINIBAND)
		conn.dlid = peer.lid;
	/* Both directions start at the client's PSN. */
	conn.psn = server ? peer.psn : me.psn;
	if (vm_connect_attr(qp, IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
			    IBV_ACCESS_REMOTE_ATOMIC, peer.qpn, gid_index, &peer.gid, &conn))
		return die("ibv_modify_qp");
	if (ibv_req_notify_cq(cq, 0))
		return die("ibv_req_notify_cq");

connected:
	sge = (struct ibv_sge){ .addr = (uintptr_t)buf, .length = (uint32_t)size,
				.lkey = mr->lkey };
	if (server) {
		if (op == OP_SEND) {
			rwr = (struct ibv_recv_wr){ .wr_id = 0x5e, .sg_list = &sge, .num_sge = 1 };
			if (ibv_post_recv(qp, &rwr, &rbad))
				return die("ibv_post_recv");
		}
		vm_xfer(sock, &done, 1, 1);	/* ready */
		if (op == OP_RNR) {
			vm_xfer(sock, &done, 1, 0);	/* the client has sent */
			poll(NULL, 0, 50);
			rwr = (struct ibv_recv_wr){ .wr_id = 0x5e, .sg_list = &sge, .num_sge = 1 };
			if (ibv_post_recv(qp, &rwr, &rbad))
				return die("ibv_post_recv");
		}
		if (op == OP_SEND || op == OP_RNR) {
			if (wait_completion(ch, cq, &wc))
				return 1;
			printf("%s: receive completion: %s, %u B\n", PROG,
			       ibv_wc_status_str(wc.status), wc.byte_len);
			ok = wc.status == IBV_WC_SUCCESS && wc.byte_len == size;
		}
		vm_xfer(sock, &done, 1, 0);	/* the client's operation completed */
		if (op == OP_WRITE || op == OP_SEND || op == OP_RNR)
			ok = ok && vm_is_pattern(buf, size, 1);
		else if (op == OP_ATOMIC)
			ok = *(uint64_t *)buf == 42;
		else if (op == OP_CAS)
			ok = *(uint64_t *)buf == 1000;
		else if (op == OP_BAD_RKEY)
			ok = vm_is_pattern(buf, size, 2);	/* nothing written */
		printf("%s: the server's buffer %s\n", PROG, ok ? "is as the lesson expects" :
		       "is NOT as the lesson expects");
		vm_xfer(sock, &done, 1, 1);
		if (id)		/* iWARP: a graceful close (FIN), not a reset at exit */
			rdma_disconnect(id);
		return ok ? 0 : 1;
	}

	vm_xfer(sock, &done, 1, 0);	/* the server is ready */
	if (wait_file) {
		printf("%s: waiting for %s before posting\n", PROG, wait_file);
		fflush(stdout);
		while (access(wait_file, F_OK))
			poll(NULL, 0, 50);
	}
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = 0x1e55;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.rdma.remote_addr = peer.va;
	wr.wr.rdma.rkey = op == OP_BAD_RKEY ? peer.rkey ^ 0x5a00 : peer.rkey;
	switch (op) {
	case OP_WRITE:
	case OP_BAD_RKEY:
		wr.opcode = IBV_WR_RDMA_WRITE;
		break;
	case OP_SEND:
	case OP_RNR:
		wr.opcode = IBV_WR_SEND;
		break;
	case OP_READ:
		wr.opcode = IBV_WR_RDMA_READ;
		break;
	case OP_ATOMIC:		/* 41 + 1 */
	case OP_CAS:		/* 41 is what it holds: swapped for 1000 */
		wr.opcode = op == OP_ATOMIC ? IBV_WR_ATOMIC_FETCH_AND_ADD : IBV_WR_ATOMIC_CMP_AND_SWP;
		wr.wr.atomic.remote_addr = peer.va;
		wr.wr.atomic.rkey = peer.rkey;
		wr.wr.atomic.compare_add = op == OP_ATOMIC ? 1 : 41;
		wr.wr.atomic.swap = 1000;
		break;
	}
	if (ibv_post_send(qp, &wr, &bad))
		return die("ibv_post_send");
	if (op == OP_RNR)
		vm_xfer(sock, &done, 1, 1);
	if (wait_completion(ch, cq, &wc))
		return 1;
	printf("%s: %s of %zu B to QP 0x%x (rkey 0x%x, va 0x%llx): %s\n", PROG, op_names[op], size,
	       peer.qpn, op == OP_BAD_RKEY ? peer.rkey ^ 0x5a00 : peer.rkey,
	       (unsigned long long)peer.va,
	       ibv_wc_status_str(wc.status));
	if (op == OP_BAD_RKEY)
		ok = wc.status == IBV_WC_REM_ACCESS_ERR;
	else
		ok = wc.status == IBV_WC_SUCCESS;
	if (op == OP_READ)
		ok = ok && vm_is_pattern(buf, size, 2);
	if (op == OP_ATOMIC || op == OP_CAS) {
		printf("%s: the value before: %llu\n", PROG, (unsigned long long)*(uint64_t *)buf);
		ok = ok && *(uint64_t *)buf == 41;
	}
	vm_xfer(sock, &done, 1, 1);
	vm_xfer(sock, &done, 1, 0);
	printf("%s: %s\n", PROG, ok ? "as the lesson expects" : "NOT as the lesson expects");
	if (id)
		rdma_disconnect(id);
	return ok ? 0 : 1;
}
