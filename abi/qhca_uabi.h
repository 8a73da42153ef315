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

#endif /* QHCA_UABI_H */
