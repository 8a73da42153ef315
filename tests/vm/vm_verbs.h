/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Helpers shared by the VM test programs: open a device by name, and take a connected
 * QP (RC or UC) from RESET to RTS over RoCE v2 with the peer's GID.
 */
#ifndef QHCA_VM_VERBS_H
#define QHCA_VM_VERBS_H

#include <string.h>

#include <stdio.h>

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

/* RESET -> INIT -> RTR -> RTS; PSNs start at 0, MTU 1024, one outstanding READ/atomic. */
static inline int vm_connect(struct ibv_qp *qp, unsigned access, uint32_t dest,
			     int gid_index, const union ibv_gid *gid)
{
	int rc = qp->qp_type == IBV_QPT_RC;
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1,
				 .qp_access_flags = access };

	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			  IBV_QP_ACCESS_FLAGS))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = dest;
	a.rq_psn = 0;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = *gid;
	a.ah_attr.grh.sgid_index = gid_index;
	a.ah_attr.grh.hop_limit = 64;
	a.ah_attr.port_num = 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			  IBV_QP_RQ_PSN | (rc ? IBV_QP_MAX_DEST_RD_ATOMIC |
					   IBV_QP_MIN_RNR_TIMER : 0)))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN |
			     (rc ? IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				   IBV_QP_MAX_QP_RD_ATOMIC : 0));
}

#endif
