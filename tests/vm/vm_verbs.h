/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Helpers shared by the VM test programs: open a device by name, meet the other side over
 * TCP, and take a connected QP (RC, UC or XRC) from RESET to RTS over RoCE v2 with the
 * peer's GID.
 */
#ifndef QHCA_VM_VERBS_H
#define QHCA_VM_VERBS_H

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <infiniband/verbs.h>

/* A check of a test program: a failure is printed and counted; main returns non-zero. */
static int vm_fails __attribute__((unused));

#define EXPECT(c)							\
	do {								\
		if (!(c)) {						\
			fprintf(stderr, "FAIL line %d: %s\n", __LINE__, #c);	\
			vm_fails++;					\
		}							\
	} while (0)

static inline struct ibv_context *vm_open(const char *name)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *ctx = NULL;
	int i;

	for (i = 0; list && list[i]; i++)
		if (!strcmp(ibv_get_device_name(list[i]), name))
			ctx = ibv_open_device(list[i]);
	if (list)
		ibv_free_device_list(list);
	return ctx;
}

/*
 * The GID index the test programs use by default: the RoCE v2 GID of the port's IPv4
 * address (3 on qhca, whose ports have a RoCE v1 and a v2 entry of each address after the
 * two default ones, as a ConnectX's; 1 on rxe); 0 on an InfiniBand port; -1 (which no GID
 * query takes, so the program fails) on a RoCE port without one.
 */
static inline int vm_roce_gid(struct ibv_context *ctx)
{
	static const uint8_t v4[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
	struct ibv_port_attr pa;
	struct ibv_gid_entry g;
	int i;

	if (ibv_query_port(ctx, 1, &pa) || pa.link_layer == IBV_LINK_LAYER_INFINIBAND)
		return 0;
	for (i = 0; i < pa.gid_tbl_len; i++)
		if (!ibv_query_gid_ex(ctx, 1, i, &g, 0) && g.gid_type == IBV_GID_TYPE_ROCE_V2 &&
		    !memcmp(g.gid.raw, v4, sizeof(v4)))
			return i;
	return -1;
}

/* Send (@out) or receive @len bytes at @m over the TCP connection @sock; exit 2 if it ends. */
static inline void vm_xfer(int sock, void *m, size_t len, int out)
{
	size_t done = 0;
	ssize_t n;

	while (done < len) {
		n = out ? write(sock, (char *)m + done, len - done) :
			  read(sock, (char *)m + done, len - done);
		if (n <= 0) {
			fprintf(stderr, "FAIL: the peer went away (%s)\n", strerror(errno));
			exit(2);
		}
		done += (size_t)n;
	}
}

/* Test data: byte i of a buffer of pattern @seed, and a check of it. */
static inline void vm_pattern(uint8_t *p, size_t len, uint8_t seed)
{
	size_t i;

	for (i = 0; i < len; i++)
		p[i] = (uint8_t)(seed + i * 13 + (i >> 9));
}

static inline int vm_is_pattern(const uint8_t *p, size_t len, uint8_t seed)
{
	size_t i;

	for (i = 0; i < len; i++)
		if (p[i] != (uint8_t)(seed + i * 13 + (i >> 9)))
			return 0;
	return 1;
}

/*
 * The two sides of a test program over TCP: the server (@server) listens on @port, the
 * client connects to @host, trying again for up to @retry_secs seconds while nobody listens
 * there yet. The connection in *sock; exits with 2 on a connection error.
 */
static inline void vm_meet_host(const char *prog, int server, const char *host, uint16_t port,
				int retry_secs, int *sock)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port) };
	int one = 1, l, tries = retry_secs * 10;

	l = socket(AF_INET, SOCK_STREAM, 0);
	if (server) {
		setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(l, (struct sockaddr *)&sa, sizeof(sa)) || listen(l, 1) ||
		    (*sock = accept(l, NULL, NULL)) < 0) {
			fprintf(stderr, "%s: listen: %s\n", prog, strerror(errno));
			exit(2);
		}
		close(l);
		return;
	}
	if (inet_pton(AF_INET, host, &sa.sin_addr) != 1) {
		fprintf(stderr, "%s: connect: %s is no IPv4 address\n", prog, host);
		exit(2);
	}
	while (connect(l, (struct sockaddr *)&sa, sizeof(sa))) {
		if (errno != ECONNREFUSED || tries-- <= 0) {
			fprintf(stderr, "%s: connect: %s\n", prog, strerror(errno));
			exit(2);
		}
		close(l);
		usleep(100000);
		l = socket(AF_INET, SOCK_STREAM, 0);
	}
	*sock = l;
}

/*
 * The two sides of a test program over TCP: "PROG -s" listens on @port, "PROG SERVER_IP"
 * connects to it. Returns 1 on the server, 0 on the client, the connection in *sock; exits
 * with 2 on a usage or connection error.
 */
static inline int vm_meet(const char *prog, int argc, char **argv, uint16_t port, int *sock)
{
	int server = argc == 2 && !strcmp(argv[1], "-s");

	if (argc != 2) {
		fprintf(stderr, "usage: %s -s | %s SERVER_IP\n", prog, prog);
		exit(2);
	}
	vm_meet_host(prog, server, argv[1], port, 0, sock);
	return server;
}

/* The connection attributes vm_connect_attr sets; vm_conn_defaults gives vm_connect's. */
struct vm_conn_attr {
	enum ibv_mtu path_mtu;
	uint32_t psn;			/* the first PSN of both directions */
	uint8_t timeout;		/* local ACK timeout: 4.096 us * 2^timeout, 0 none */
	uint8_t retry_cnt;
	uint8_t rnr_retry;		/* 7: without end */
	uint8_t min_rnr_timer;		/* the RNR NAK timer this responder asks for */
	uint8_t max_rd_atomic;		/* READs/atomics this requester has in flight */
	uint8_t max_dest_rd_atomic;	/* ... that this responder takes */
	uint16_t dlid;			/* InfiniBand: the peer's LID, no GRH (0: RoCE) */
};

static inline void vm_conn_defaults(struct vm_conn_attr *c)
{
	memset(c, 0, sizeof(*c));
	c->path_mtu = IBV_MTU_1024;
	c->psn = 0;
	c->timeout = 14;
	c->retry_cnt = 7;
	c->rnr_retry = 7;
	c->min_rnr_timer = 12;
	c->max_rd_atomic = 1;
	c->max_dest_rd_atomic = 1;
}

/*
 * RESET -> INIT -> RTR -> RTS with the attributes of @c (NULL: vm_conn_defaults). Each type
 * gets the attributes of its sides (IBA table 91, annex A14): a responder's for RC and
 * XRC_RECV, a requester's for RC and XRC_SEND.
 */
static inline int vm_connect_attr(struct ibv_qp *qp, unsigned access, uint32_t dest,
				  int gid_index, const union ibv_gid *gid,
				  const struct vm_conn_attr *c)
{
	int resp = qp->qp_type == IBV_QPT_RC || qp->qp_type == IBV_QPT_XRC_RECV;
	int req = qp->qp_type == IBV_QPT_RC || qp->qp_type == IBV_QPT_XRC_SEND;
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1,
				 .qp_access_flags = access };
	struct vm_conn_attr defaults;

	if (!c) {
		vm_conn_defaults(&defaults);
		c = &defaults;
	}
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			  IBV_QP_ACCESS_FLAGS))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = c->path_mtu;
	a.dest_qp_num = dest;
	a.rq_psn = c->psn;
	a.max_dest_rd_atomic = c->max_dest_rd_atomic;
	a.min_rnr_timer = c->min_rnr_timer;
	a.ah_attr.is_global = !c->dlid;
	a.ah_attr.dlid = c->dlid;
	if (!c->dlid) {
		a.ah_attr.grh.dgid = *gid;
		a.ah_attr.grh.sgid_index = gid_index;
		a.ah_attr.grh.hop_limit = 64;
	}
	a.ah_attr.port_num = 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			  IBV_QP_RQ_PSN | (resp ? IBV_QP_MAX_DEST_RD_ATOMIC |
					     IBV_QP_MIN_RNR_TIMER : 0)))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = c->psn;
	a.timeout = c->timeout;
	a.retry_cnt = c->retry_cnt;
	a.rnr_retry = c->rnr_retry;
	a.max_rd_atomic = c->max_rd_atomic;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN |
			     (req ? IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				    IBV_QP_MAX_QP_RD_ATOMIC :
			      qp->qp_type == IBV_QPT_XRC_RECV ? IBV_QP_TIMEOUT : 0));
}

/* RESET -> INIT -> RTR -> RTS; PSNs start at 0, MTU 1024, one outstanding READ/atomic. */
static inline int vm_connect(struct ibv_qp *qp, unsigned access, uint32_t dest,
			     int gid_index, const union ibv_gid *gid)
{
	return vm_connect_attr(qp, access, dest, gid_index, gid, NULL);
}

#endif
