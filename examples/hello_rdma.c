// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * hello_rdma: the smallest RDMA program worth running between the two guests. The server
 * waits for one connection, receives a message and answers it; the client connects, sends
 * its greeting and prints the answer. Reliable connected QP, SEND/RECV, connection set up
 * by rdma_cm, on qhca_0 (whatever device owns the address given).
 *
 *   gcc -O2 -o hello_rdma hello_rdma.c -lrdmacm -libverbs
 *   guest 2:  hello_rdma -s 192.168.77.2          (server, listens on port 7471)
 *   guest 1:  hello_rdma 192.168.77.2             (client)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#define PORT "7471"
#define MSG 64

static int fail(const char *what)
{
	perror(what);
	return 1;
}

int main(int argc, char **argv)
{
	int server = argc == 3 && !strcmp(argv[1], "-s");
	const char *addr = argv[argc - 1];
	struct rdma_addrinfo hints = { .ai_port_space = RDMA_PS_TCP }, *ai;
	struct ibv_qp_init_attr qpa = {
		.cap = { .max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1,
			 .max_recv_sge = 1 },
		.qp_type = IBV_QPT_RC,
	};
	struct rdma_cm_id *listen_id, *id;
	char sendbuf[MSG], recvbuf[MSG], host[32] = "";
	struct ibv_mr *smr, *rmr;
	struct ibv_wc wc;

	if (argc < 2 || (argc == 3 && !server) || argc > 3) {
		fprintf(stderr, "usage: %s [-s] ADDRESS\n", argv[0]);
		return 2;
	}
	gethostname(host, sizeof(host) - 1);
	if (server)
		hints.ai_flags = RAI_PASSIVE;
	if (rdma_getaddrinfo(addr, PORT, &hints, &ai))
		return fail("rdma_getaddrinfo");
	if (rdma_create_ep(server ? &listen_id : &id, ai, NULL, &qpa))
		return fail("rdma_create_ep");
	rdma_freeaddrinfo(ai);
	if (server) {
		if (rdma_listen(listen_id, 1) || rdma_get_request(listen_id, &id))
			return fail("rdma_listen/rdma_get_request");
	}
	rmr = rdma_reg_msgs(id, recvbuf, sizeof(recvbuf));
	smr = rdma_reg_msgs(id, sendbuf, sizeof(sendbuf));
	if (!rmr || !smr)
		return fail("rdma_reg_msgs");
	/* A receive is posted before the connection exists, so the peer's SEND finds it. */
	if (rdma_post_recv(id, NULL, recvbuf, sizeof(recvbuf), rmr))
		return fail("rdma_post_recv");
	if (server ? rdma_accept(id, NULL) : rdma_connect(id, NULL))
		return fail(server ? "rdma_accept" : "rdma_connect");
	if (!server) {
		snprintf(sendbuf, sizeof(sendbuf), "hello from %.31s", host);
		if (rdma_post_send(id, NULL, sendbuf, sizeof(sendbuf), smr, IBV_SEND_SIGNALED) ||
		    rdma_get_send_comp(id, &wc) <= 0 || wc.status != IBV_WC_SUCCESS)
			return fail("send");
	}
	if (rdma_get_recv_comp(id, &wc) <= 0 || wc.status != IBV_WC_SUCCESS)
		return fail("receive");
	recvbuf[MSG - 1] = 0;
	printf("%s received: %s\n", host, recvbuf);
	if (server) {
		snprintf(sendbuf, sizeof(sendbuf), "%.16s answers: %.36s", host, recvbuf);
		if (rdma_post_send(id, NULL, sendbuf, sizeof(sendbuf), smr, IBV_SEND_SIGNALED) ||
		    rdma_get_send_comp(id, &wc) <= 0 || wc.status != IBV_WC_SUCCESS)
			return fail("send");
	}
	rdma_disconnect(id);
	rdma_dereg_mr(smr);
	rdma_dereg_mr(rmr);
	rdma_destroy_ep(id);
	if (server)
		rdma_destroy_ep(listen_id);
	return 0;
}
