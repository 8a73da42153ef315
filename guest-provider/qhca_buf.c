// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * qhca provider: the memory of the rings the device reads and writes (CQs, QPs, SRQs), from
 * this process or a parent domain's allocators, and the geometry of work queue rings.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "qhca.h"

/*
 * Rings of one page (the queues of a QP or CQ with few entries) come from chunks of
 * PAGE_CHUNK pages: posix_memalign() of one page costs glibc about a second one (the
 * alignment slack before it), which doubled the memory of a QP with small queues. Freed
 * pages wait on a free list for the next ring; the chunks stay for the process's life.
 */
#define PAGE_CHUNK	64

static pthread_mutex_t page_lock = PTHREAD_MUTEX_INITIALIZER;
static void *page_free_list;	/* linked through each free page's first word */

static void *page_get(void)
{
	void *p;
	int i;

	pthread_mutex_lock(&page_lock);
	p = page_free_list;
	if (p) {
		page_free_list = *(void **)p;
	} else if (!posix_memalign(&p, QHCA_PAGE_SIZE, (size_t)PAGE_CHUNK * QHCA_PAGE_SIZE)) {
		for (i = PAGE_CHUNK - 1; i > 0; i--) {
			void *q = (uint8_t *)p + (size_t)i * QHCA_PAGE_SIZE;

			*(void **)q = page_free_list;
			page_free_list = q;
		}
	} else {
		p = NULL;
	}
	pthread_mutex_unlock(&page_lock);
	return p;
}

static void page_put(void *p)
{
	pthread_mutex_lock(&page_lock);
	*(void **)p = page_free_list;
	page_free_list = p;
	pthread_mutex_unlock(&page_lock);
}

static size_t page_round(size_t size)
{
	return (size + QHCA_PAGE_SIZE - 1) & ~(size_t)(QHCA_PAGE_SIZE - 1);
}

static void *ring_alloc(size_t size)
{
	void *p;

	size = page_round(size);
	if (size == QHCA_PAGE_SIZE)
		p = page_get();
	else if (posix_memalign(&p, QHCA_PAGE_SIZE, size))
		p = NULL;
	if (!p) {
		errno = ENOMEM;
		return NULL;
	}
	memset(p, 0, size);
	return p;
}

/* Free what ring_alloc(@size) gave. */
static void ring_free(void *p, size_t size)
{
	if (!p)
		return;
	if (page_round(size) == QHCA_PAGE_SIZE)
		page_put(p);
	else
		free(p);
}

/* ---------------------------------------------------------------- parent domains */
/* @pd if it is a parent domain with allocators, else NULL. */
struct qhca_pd *qhca_parent_of(struct ibv_pd *pd)
{
	struct qhca_pd *p = pd ? to_qpd(pd) : NULL;

	return p && p->protection && p->alloc ? p : NULL;
}

/*
 * A buffer the device reads or writes: from the allocator of the parent domain @parent
 * unless it defers to the default (then *custom stays false and ring_alloc() gives it).
 * Page aligned and zeroed either way.
 */
void *qhca_buf_alloc(struct qhca_pd *parent, size_t size, uint64_t type, bool *custom)
{
	void *p;

	*custom = false;
	size = (size + QHCA_PAGE_SIZE - 1) & ~(size_t)(QHCA_PAGE_SIZE - 1);
	if (parent) {
		p = parent->alloc(&parent->ibv_pd, parent->pd_context, size, QHCA_PAGE_SIZE, type);
		if (p != IBV_ALLOCATOR_USE_DEFAULT) {
			if (p && ((uintptr_t)p & (QHCA_PAGE_SIZE - 1))) {
				parent->free(&parent->ibv_pd, parent->pd_context, p, type);
				p = NULL;	/* the device needs whole pages */
			}
			if (!p) {
				errno = ENOMEM;
				return NULL;
			}
			memset(p, 0, size);
			*custom = true;
			return p;
		}
	}
	return ring_alloc(size);
}

/* Free what qhca_buf_alloc(@parent, @size, @type, @custom) gave. */
void qhca_buf_free(struct qhca_pd *parent, bool custom, void *p, size_t size, uint64_t type)
{
	if (p && custom)
		parent->free(&parent->ibv_pd, parent->pd_context, p, type);
	else
		ring_free(p, size);
}

void *qhca_wq_buf_alloc(struct qhca_ring *r, struct qhca_pd *parent, uint64_t type)
{
	bool custom;

	r->buf = qhca_buf_alloc(parent, (size_t)1 << (r->log2 + r->stride_log2), type, &custom);
	r->parent = custom ? parent : NULL;
	return r->buf;
}

void qhca_wq_buf_free(struct qhca_ring *r, uint64_t type)
{
	qhca_buf_free(r->parent, r->parent != NULL, r->buf,
		      (size_t)1 << (r->log2 + r->stride_log2), type);
	r->buf = NULL;
}

/*
 * ibv_alloc_parent_domain: the PD it contains (the kernel knows only that one) and, if
 * given, allocators for the rings of QPs, SRQs and CQs created in it. No thread domains.
 */
struct ibv_pd *qhca_alloc_parent_domain(struct ibv_context *context,
					struct ibv_parent_domain_init_attr *attr)
{
	struct qhca_pd *pd;

	if (ibv_check_alloc_parent_domain(attr))
		return NULL;
	if (attr->td || (attr->comp_mask & ~(uint32_t)(IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS |
						      IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT)) ||
	    to_qpd(attr->pd)->protection) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	if ((attr->comp_mask & IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS) &&
	    (!attr->alloc || !attr->free)) {
		errno = EINVAL;
		return NULL;
	}
	pd = calloc(1, sizeof(*pd));
	if (!pd)
		return NULL;
	ibv_initialize_parent_domain(&pd->ibv_pd, attr->pd);
	pd->protection = to_qpd(attr->pd);
	pd->handle = pd->protection->handle;
	if (attr->comp_mask & IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS) {
		pd->alloc = attr->alloc;
		pd->free = attr->free;
	}
	if (attr->comp_mask & IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT)
		pd->pd_context = attr->pd_context;
	return &pd->ibv_pd;
}

/*
 * Capabilities are checked against the device's limits (struct qhca_context) before any
 * arithmetic; what passes is small enough that the sizes below cannot overflow. Failures
 * are EINVAL, as rdma-core providers report a capability beyond the device.
 */

/* log2 of a ring's entries for @want (0 counts as 1) of at most @max: 0 or EINVAL. */
int qhca_ring_entries_log2(uint32_t want, uint32_t max, uint32_t *log2)
{
	if (want > max)
		return EINVAL;
	*log2 = qhca_log2_ceil(want ? want : 1);
	/* Rings are powers of two: a device maximum that is not one caps the rounding too. */
	return ((uint64_t)1 << *log2) > max ? EINVAL : 0;
}

/* log2 of a WQE stride of @bytes: a WQE stays within one page. */
int qhca_stride_log2(uint64_t bytes, uint32_t *log2)
{
	*log2 = qhca_log2_ceil(bytes);
	return *log2 > QHCA_PAGE_SHIFT ? EINVAL : 0;
}

int qhca_rq_stride_log2(uint32_t max_sge, uint32_t *log2)
{
	return qhca_stride_log2(sizeof(struct qhca_rq_wqe) +
				(uint64_t)(max_sge ? max_sge : 1) * sizeof(struct qhca_sge), log2);
}
