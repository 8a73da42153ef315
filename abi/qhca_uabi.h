/* SPDX-License-Identifier: (GPL-2.0 OR BSD-2-Clause) */
/*
 * qhca user verbs ABI: the driver-specific udata that the rdma-core provider and the Linux
 * driver exchange through uverbs. Included by guest-driver/ and guest-provider/.
 */
#ifndef QHCA_UABI_H
#define QHCA_UABI_H

#include "qhca_abi.h"

/* uverbs ABI version of the qhca provider/driver pair (ib_device_ops.uverbs_abi_ver). */
#define QHCA_UVERBS_ABI_VERSION		1

/* Response to alloc_ucontext (after struct ib_uverbs_get_context_resp). */
struct qhca_alloc_ucontext_resp {
	uint64_t db_mmap_offset;	/* mmap() offset of this context's doorbell page */
	uint32_t db_page;		/* index of the page in the doorbell BAR */
	uint32_t db_page_size;		/* QHCA_DB_PAGE_SIZE */
	uint32_t max_inline_data;
	uint32_t abi_minor;		/* QHCA_ABI_VERSION_MINOR of the driver */
};
QHCA_ABI_ASSERT_SIZE(struct qhca_alloc_ucontext_resp, 24);

/* Response to alloc_pd (after struct ib_uverbs_alloc_pd_resp). */
struct qhca_alloc_pd_resp {
	uint32_t pd_handle;		/* the device's handle of the PD */
	uint32_t rsvd;
};
QHCA_ABI_ASSERT_SIZE(struct qhca_alloc_pd_resp, 8);

/* create_cq: the provider's ring (entries CQEs and a struct qhca_cq_dbrec after them). */
struct qhca_create_cq_cmd {
	uint64_t buf_addr;		/* user virtual address, page aligned */
	uint32_t log2_entries;
	uint32_t rsvd;
};
QHCA_ABI_ASSERT_SIZE(struct qhca_create_cq_cmd, 16);

struct qhca_create_cq_resp {
	uint32_t cqn;
	uint32_t log2_entries;
};
QHCA_ABI_ASSERT_SIZE(struct qhca_create_cq_resp, 8);

/* create_qp: the provider's send and receive rings, each page aligned. */
struct qhca_create_qp_cmd {
	uint64_t sq_addr;
	uint64_t rq_addr;		/* 0 with an SRQ */
	uint8_t sq_log2;
	uint8_t rq_log2;
	uint8_t sq_stride_log2;
	uint8_t rq_stride_log2;
	uint32_t rsvd;
};
QHCA_ABI_ASSERT_SIZE(struct qhca_create_qp_cmd, 24);

struct qhca_create_qp_resp {
	uint32_t qpn;
	uint32_t max_inline;
};
QHCA_ABI_ASSERT_SIZE(struct qhca_create_qp_resp, 8);

/* create_srq: the provider's ring. */
struct qhca_create_srq_cmd {
	uint64_t buf_addr;
	uint8_t log2;
	uint8_t stride_log2;
	uint16_t rsvd0;
	uint32_t rsvd1;
};
QHCA_ABI_ASSERT_SIZE(struct qhca_create_srq_cmd, 16);

struct qhca_create_srq_resp {
	uint32_t srqn;
	uint32_t rsvd;
};
QHCA_ABI_ASSERT_SIZE(struct qhca_create_srq_resp, 8);

/* create_ah: what a UD WQE needs that user space cannot see (the resolved MAC). */
struct qhca_create_ah_resp {
	uint8_t dmac[6];
	uint16_t rsvd;
};
QHCA_ABI_ASSERT_SIZE(struct qhca_create_ah_resp, 8);

/*
 * Ring geometry: the stride of a send WQE is the next power of two of 64 (header) + 64 for
 * UD/GSI (struct qhca_ud_seg) + max(16 * max_send_sge, max_inline_data), at least 64; of
 * a receive WQE of 16 + 16 * max_recv_sge, at least 16. Entries are powers of two. The
 * provider chooses them, the driver checks them against the device's limits.
 */

#endif /* QHCA_UABI_H */
