/* SPDX-License-Identifier: (GPL-2.0 OR BSD-2-Clause) */
/*
 * qhca user verbs ABI: the driver-specific udata that the rdma-core provider and the Linux
 * driver exchange through uverbs. Included by guest-driver/ and guest-provider/ and written
 * as rdma-core's kernel-headers/rdma/<provider>-abi.h are: fixed-width types from
 * <linux/types.h>, 64-bit fields __aligned_u64, every structure a multiple of 8 bytes.
 * rdma-core's buildlib/make_abi_structs.py reads this file line by line to make the
 * _STRUCT_ macros of the provider's DECLARE_DRV_CMD (guest-provider/CMakeLists.txt): keep
 * "struct name {" on a line of its own and every comment inside a structure on one line.
 *
 * Growth: every command and response starts with comp_mask. A command's bits say which
 * later fields or features the provider uses; the driver refuses a command with a bit it
 * does not know (EOPNOTSUPP), a reserved field that is not zero (EINVAL), and bytes past
 * the structure it knows that are not zero (EOPNOTSUPP). A response's bits say which of
 * its optional fields the driver filled in; the provider ignores bits it does not know.
 * No bit is defined yet in any of them.
 */
#ifndef QHCA_UABI_H
#define QHCA_UABI_H

#include <linux/types.h>

#include "qhca_abi.h"

/*
 * uverbs ABI version of the qhca provider/driver pair (ib_device_ops.uverbs_abi_ver).
 * 2: comp_mask in every structure, __aligned_u64, alloc_ucontext takes a command.
 */
#define QHCA_UVERBS_ABI_VERSION		2

/* alloc_ucontext (after struct ib_uverbs_get_context). */
struct qhca_alloc_ucontext_cmd {
	__u32 comp_mask;
	__u32 rsvd;
};
QHCA_ABI_ASSERT_SIZE(struct qhca_alloc_ucontext_cmd, 8);

/* Response to alloc_ucontext (after struct ib_uverbs_get_context_resp). */
struct qhca_alloc_ucontext_resp {
	__u32 comp_mask;
	__u32 db_page;		/* index of the context's page in the doorbell BAR */
	__aligned_u64 db_mmap_offset;	/* mmap() offset of that page */
	__u32 db_page_size;	/* QHCA_DB_PAGE_SIZE */
	__u32 max_inline_data;
	__u32 abi_minor;	/* QHCA_ABI_VERSION_MINOR of the driver */
	__u32 rsvd;
};
QHCA_ABI_ASSERT_SIZE(struct qhca_alloc_ucontext_resp, 32);

/* Response to alloc_pd (after struct ib_uverbs_alloc_pd_resp). */
struct qhca_alloc_pd_resp {
	__u32 comp_mask;
	__u32 pd_handle;	/* the device's handle of the PD */
};
QHCA_ABI_ASSERT_SIZE(struct qhca_alloc_pd_resp, 8);

/* create_cq: the provider's ring (entries CQEs and a struct qhca_cq_dbrec after them). */
struct qhca_create_cq_cmd {
	__u32 comp_mask;
	__u32 log2_entries;
	__aligned_u64 buf_addr;	/* user virtual address, page aligned */
};
QHCA_ABI_ASSERT_SIZE(struct qhca_create_cq_cmd, 16);

struct qhca_create_cq_resp {
	__u32 comp_mask;
	__u32 cqn;
	__u32 log2_entries;
	__u32 rsvd;
};
QHCA_ABI_ASSERT_SIZE(struct qhca_create_cq_resp, 16);

/* modify_srq with IB_SRQ_MAX_WR: the provider's new ring (RESIZE_SRQ keeps WQE indices). */
struct qhca_modify_srq_cmd {
	__u32 comp_mask;
	__u32 log2;
	__aligned_u64 buf_addr;	/* user virtual address, page aligned */
};
QHCA_ABI_ASSERT_SIZE(struct qhca_modify_srq_cmd, 16);

/* resize_cq: the provider's new ring; the unpolled CQEs move to its start (RESIZE_CQ). */
struct qhca_resize_cq_cmd {
	__u32 comp_mask;
	__u32 log2_entries;
	__aligned_u64 buf_addr;	/* user virtual address, page aligned */
};
QHCA_ABI_ASSERT_SIZE(struct qhca_resize_cq_cmd, 16);

/* create_qp: the provider's send and receive rings, each page aligned. */
struct qhca_create_qp_cmd {
	__u32 comp_mask;
	__u8 sq_log2;
	__u8 rq_log2;
	__u8 sq_stride_log2;
	__u8 rq_stride_log2;
	__aligned_u64 sq_addr;
	__aligned_u64 rq_addr;	/* 0 with an SRQ, as the rq_ fields */
};
QHCA_ABI_ASSERT_SIZE(struct qhca_create_qp_cmd, 24);

struct qhca_create_qp_resp {
	__u32 comp_mask;
	__u32 qpn;
	__u32 max_inline;
	__u32 rsvd;
};
QHCA_ABI_ASSERT_SIZE(struct qhca_create_qp_resp, 16);

/* create_srq: the provider's ring. */
struct qhca_create_srq_cmd {
	__u32 comp_mask;
	__u8 log2;
	__u8 stride_log2;
	__u16 rsvd;
	__aligned_u64 buf_addr;
};
QHCA_ABI_ASSERT_SIZE(struct qhca_create_srq_cmd, 16);

struct qhca_create_srq_resp {
	__u32 comp_mask;
	__u32 srqn;
};
QHCA_ABI_ASSERT_SIZE(struct qhca_create_srq_resp, 8);

/* create_ah: what a UD WQE needs that user space cannot see (the resolved MAC). */
struct qhca_create_ah_resp {
	__u32 comp_mask;
	__u8 dmac[6];
	__u16 rsvd0;
	__u32 rsvd1;
};
QHCA_ABI_ASSERT_SIZE(struct qhca_create_ah_resp, 16);

/*
 * Ring geometry: the stride of a send WQE is the next power of two of 64 (header) + 64 for
 * UD/GSI (struct qhca_ud_seg) + max(16 * max_send_sge, max_inline_data), at least 64; of
 * a receive WQE of 16 + 16 * max_recv_sge, at least 16. Entries are powers of two. The
 * provider chooses them, the driver checks them against the device's limits.
 */

#endif /* QHCA_UABI_H */
