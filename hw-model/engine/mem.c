// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * qhca memory: page lists, memory regions and their keys, and the one path by which the
 * datapath moves bytes between guest memory and the device: through a memory region,
 * after its key, protection domain, access rights and bounds were checked.
 */
#include <stdlib.h>
#include <string.h>

#include "engine_internal.h"

/* ---------------------------------------------------------------- host memory */
/*
 * Every size a guest chooses costs host memory: a QP's record and send window, the page
 * lists of its rings, a region's list of up to a million pages. Hardware keeps such tables
 * in memory the driver gives it (ConnectX's ICM); here they live in QEMU's heap under one
 * budget for the whole device (host-mem-mb), and a create that would pass it fails with
 * NO_RESOURCES, as it would on a device out of its memory. An allocation carries a header
 * that names its size and the counter it is charged to, so that a record freed with its
 * last reference (a region, mem.c) needs no engine.
 */
struct host_hdr {
	uint64_t *charged;	/* e->host_bytes */
	uint64_t bytes;		/* header included */
};

void *qhca_host_zalloc(struct qhca_engine *e, size_t n, size_t size)
{
	struct host_hdr *h;
	uint64_t bytes;

	if (size && n > (SIZE_MAX - sizeof(*h)) / size)
		return NULL;
	bytes = sizeof(*h) + n * size;
	if (bytes > e->host_budget - e->host_bytes) {
		qhca_log_guest(e, "host memory budget: %llu bytes more would pass %llu (in use %llu)",
			       (unsigned long long)bytes, (unsigned long long)e->host_budget,
			       (unsigned long long)e->host_bytes);
		return NULL;
	}
	h = calloc(1, bytes);
	if (!h)
		return NULL;
	h->charged = &e->host_bytes;
	h->bytes = bytes;
	e->host_bytes += bytes;
	return h + 1;
}

void qhca_host_free(void *p)
{
	struct host_hdr *h;

	if (!p)
		return;
	h = (struct host_hdr *)p - 1;
	*h->charged -= h->bytes;
	free(h);
}

/* ---------------------------------------------------------------- page lists */
static int read_page_addrs(struct qhca_engine *e, uint64_t addr, uint64_t *out, uint32_t n)
{
	uint32_t i;

	if (qhca_dma_read(e, addr, out, (size_t)n * sizeof(uint64_t)))
		return -1;
	for (i = 0; i < n; i++) {
		if (!out[i] || out[i] % QHCA_PAGE_SIZE) {
			qhca_log_guest(e, "page list entry %u: bad page address 0x%llx", i,
				       (unsigned long long)out[i]);
			return -1;
		}
	}
	return 0;
}

/* Copy the page list @pbl (at most @max_pages) into the device: OK, BAD_FIELD for a malformed
 * or unreadable list, NO_RESOURCES past the host memory budget. */
uint16_t qhca_pbl_load(struct qhca_engine *e, const struct qhca_pbl *pbl, uint32_t max_pages,
		       uint64_t **pages)
{
	uint64_t *p, *dir = NULL;
	uint32_t i, n = pbl->npages;

	*pages = NULL;
	if (!n || n > max_pages || (pbl->levels != 1 && pbl->levels != 2) ||
	    pbl->rsvd[0] || pbl->rsvd[1] || pbl->rsvd[2]) {
		qhca_log_guest(e, "bad page list: %u pages (max %u), %u levels", n, max_pages,
			       pbl->levels);
		return QHCA_ST_BAD_FIELD;
	}
	p = qhca_host_zalloc(e, n, sizeof(*p));
	if (!p)
		return QHCA_ST_NO_RESOURCES;
	if (pbl->levels == 1) {
		if (read_page_addrs(e, pbl->addr, p, n))
			goto err;
	} else {
		/* A passing copy of 1/512 of the list, which the budget already holds. */
		uint32_t ndir = (n + QHCA_PBL_PER_PAGE - 1) / QHCA_PBL_PER_PAGE;

		dir = calloc(ndir, sizeof(*dir));
		if (!dir || read_page_addrs(e, pbl->addr, dir, ndir))
			goto err;
		for (i = 0; i < ndir; i++) {
			uint32_t cnt = n - i * QHCA_PBL_PER_PAGE;

			if (cnt > QHCA_PBL_PER_PAGE)
				cnt = QHCA_PBL_PER_PAGE;
			if (read_page_addrs(e, dir[i], p + (size_t)i * QHCA_PBL_PER_PAGE, cnt))
				goto err;
		}
		free(dir);
	}
	*pages = p;
	return QHCA_ST_OK;
err:
	free(dir);
	qhca_host_free(p);
	return QHCA_ST_BAD_FIELD;
}

/* Copy @len bytes at byte offset @off of a buffer of pages of 2^@shift bytes. */
static int pages_xfer(struct qhca_engine *e, const uint64_t *pages, uint32_t npages,
		      unsigned int shift, uint64_t off, void *buf, size_t len, bool to_guest)
{
	uint64_t mask = (1ull << shift) - 1;
	uint8_t *b = buf;

	if (off + len < off || off + len > (uint64_t)npages << shift)
		return -1;
	while (len) {
		uint64_t addr = pages[off >> shift] + (off & mask);
		size_t chunk = (size_t)(mask + 1 - (off & mask));
		int rc;

		if (chunk > len)
			chunk = len;
		rc = to_guest ? qhca_dma_write(e, addr, b, chunk) : qhca_dma_read(e, addr, b, chunk);
		if (rc)
			return -1;
		b += chunk;
		off += chunk;
		len -= chunk;
	}
	return 0;
}

/* Copy @len bytes at byte offset @off of a buffer of 4 KiB pages; to the guest when @to_guest. */
int qhca_pages_xfer(struct qhca_engine *e, const uint64_t *pages, uint32_t npages, uint64_t off,
		    void *buf, size_t len, bool to_guest)
{
	return pages_xfer(e, pages, npages, QHCA_PAGE_SHIFT, off, buf, len, to_guest);
}

/* ---------------------------------------------------------------- memory regions */
/* The region in @key's index, whatever its variant byte. */
static struct qhca_mr *mr_slot(struct qhca_engine *e, uint32_t key)
{
	uint32_t slot = QHCA_FIELD_GET(QHCA_MR_KEY_INDEX_MASK, key);	/* index + 1 */

	return slot == 0 || slot > e->cfg.max_mr ? NULL : e->mr[slot - 1];
}

struct qhca_mr *qhca_mr_find(struct qhca_engine *e, uint32_t key)
{
	struct qhca_mr *mr = mr_slot(e, key);

	return mr && mr->key == key ? mr : NULL;
}

/*
 * A key is the region's slot + 1 (QHCA_MR_KEY_INDEX_MASK) and a tag (QHCA_MR_KEY_TAG_MASK):
 * the slot's generation plus an offset derived from the device's secret, so a reused slot
 * never takes the key it had last, and a peer cannot derive the keys of regions from their
 * slot numbers alone.
 */
static uint8_t mr_key_tag(const struct qhca_engine *e, uint64_t idx, uint32_t generation)
{
	return (uint8_t)((e->cfg.key_secret * (2 * idx + 1)) >> 56) + (uint8_t)generation;
}

/* Remote write or atomic access needs local write too (IBA 10.6.3.1). */
static bool access_ok(uint32_t access)
{
	return !(access & (QHCA_ACCESS_REMOTE_WRITE | QHCA_ACCESS_REMOTE_ATOMIC)) ||
	       (access & QHCA_ACCESS_LOCAL_WRITE);
}

static void mr_free(struct qhca_mr *mr)
{
	qhca_host_free(mr->pages);
	qhca_host_free(mr);
}

/* Check @c and build the record of a new region, not yet in the key table. */
static uint16_t mr_build(struct qhca_engine *e, const struct qhca_mr_create *c,
			 struct qhca_mr **out)
{
	int64_t pd = qhca_obj_lookup(&e->pd, c->pd);
	uint64_t max_size = (uint64_t)e->cfg.max_mr_size_mb << 20;
	struct qhca_mr *mr;

	if (pd < 0)
		return QHCA_ST_BAD_HANDLE;
	/* At most one kind: PHYS, FAST_REG or a window of either type. */
	if ((c->access & ~QHCA_ACCESS_MR_ALL) || (c->flags & (c->flags - 1)) ||
	    (c->flags & ~(QHCA_MR_PHYS | QHCA_MR_FAST_REG | QHCA_MR_WINDOW)) ||
	    c->page_offset >= QHCA_PAGE_SIZE || !access_ok(c->access))
		return QHCA_ST_BAD_FIELD;
	if (c->flags & QHCA_MR_WINDOW) {
		/* Only the PD: a bind gives the rest. */
		if (c->iova || c->length || c->page_offset || c->access || c->pbl.addr ||
		    c->pbl.npages || c->pbl.levels)
			return QHCA_ST_BAD_FIELD;
	} else if (c->flags & QHCA_MR_PHYS) {
		/* Guest-physical regions only for the kernel's PDs. */
		if (e->pd.owner[pd] != QHCA_HANDLE_KERNEL || c->iova || c->page_offset)
			return QHCA_ST_BAD_FIELD;
	} else if (c->flags & QHCA_MR_FAST_REG) {
		/* Room for the pages REG_MR WQEs will bring; the rest comes with them. */
		if (e->pd.owner[pd] != QHCA_HANDLE_KERNEL || c->iova || c->length ||
		    c->page_offset || c->access || c->pbl.addr || c->pbl.levels ||
		    !c->pbl.npages || c->pbl.npages > QHCA_MAX_FAST_REG_PAGES)
			return QHCA_ST_BAD_FIELD;
	} else {
		uint64_t span = c->page_offset + c->length;

		if (!c->length || c->length > max_size || c->iova + c->length < c->iova ||
		    span > (uint64_t)c->pbl.npages << QHCA_PAGE_SHIFT ||
		    c->pbl.npages > ((span + QHCA_PAGE_SIZE - 1) >> QHCA_PAGE_SHIFT))
			return QHCA_ST_BAD_FIELD;
	}
	mr = qhca_host_zalloc(e, 1, sizeof(*mr));
	if (!mr)
		return QHCA_ST_NO_RESOURCES;
	if (c->flags & QHCA_MR_FAST_REG) {
		mr->pages = qhca_host_zalloc(e, c->pbl.npages, sizeof(*mr->pages));
		if (!mr->pages) {
			qhca_host_free(mr);
			return QHCA_ST_NO_RESOURCES;
		}
		mr->max_pages = c->pbl.npages;
		mr->invalid = true;	/* free until a REG_MR */
	} else if (c->flags & QHCA_MR_WINDOW) {
		mr->invalid = true;	/* free until a bind */
	} else if (!(c->flags & QHCA_MR_PHYS)) {
		uint16_t st = qhca_pbl_load(e, &c->pbl, (uint32_t)(max_size >> QHCA_PAGE_SHIFT) + 1,
					    &mr->pages);

		if (st != QHCA_ST_OK) {
			qhca_host_free(mr);
			return st;
		}
	}
	mr->pd = c->pd;
	mr->access = c->access;
	mr->flags = c->flags;
	mr->iova = c->iova;
	mr->length = (c->flags & QHCA_MR_PHYS) ? UINT64_MAX : c->length;
	mr->page_offset = c->page_offset;
	mr->npages = (c->flags & (QHCA_MR_FAST_REG | QHCA_MR_WINDOW)) ? 0 : c->pbl.npages;
	mr->page_shift = QHCA_PAGE_SHIFT;
	*out = mr;
	return QHCA_ST_OK;
}

static void mr_log(struct qhca_engine *e, const char *what, const struct qhca_mr *mr)
{
	qhca_step(e, "mr what=%s key=0x%x pd=0x%x va=0x%llx len=%llu access=0x%x", what, mr->key,
		  mr->pd, (unsigned long long)mr->iova, (unsigned long long)mr->length,
		  mr->access);
	qhca_log(e, QHCA_LOG_EVENT, "%s key 0x%x pd 0x%x iova 0x%llx len %llu access 0x%x", what,
		 mr->key, mr->pd, (unsigned long long)mr->iova, (unsigned long long)mr->length,
		 mr->access);
}

uint16_t qhca_mr_create(struct qhca_engine *e, const struct qhca_mr_create *c, uint32_t *key)
{
	struct qhca_mr *mr;
	uint16_t st;
	uint32_t h;
	int64_t idx;

	st = mr_build(e, c, &mr);
	if (st != QHCA_ST_OK)
		return st;
	h = qhca_obj_alloc(&e->mr_table, c->pd);
	if (!h) {
		mr_free(mr);
		return QHCA_ST_NO_RESOURCES;
	}
	idx = qhca_obj_lookup(&e->mr_table, h);
	qhca_obj_hold(&e->pd, c->pd);
	mr->handle = h;
	mr->key = QHCA_FIELD_PREP(QHCA_MR_KEY_INDEX_MASK, idx + 1) |
		  QHCA_FIELD_PREP(QHCA_MR_KEY_TAG_MASK,
				  mr_key_tag(e, (uint64_t)idx, qhca_obj_generation(h)));
	e->mr[idx] = mr;
	*key = mr->key;
	mr_log(e, "MR", mr);
	return QHCA_ST_OK;
}

/*
 * REREG_MR: an ordinary region takes a new translation, PD and access under the same key
 * (ibv_rereg_mr). The new record replaces the old at once; messages in flight through the
 * old one fail at their next packet (it is dead) and never reach the new pages.
 */
uint16_t qhca_mr_rereg(struct qhca_engine *e, uint32_t key, const struct qhca_mr_create *c)
{
	struct qhca_mr *old = qhca_mr_find(e, key), *mr;
	uint16_t st;

	if (!old)
		return QHCA_ST_BAD_HANDLE;
	if (old->flags || c->flags)
		return QHCA_ST_BAD_FIELD;	/* ordinary regions only */
	if (old->windows)
		return QHCA_ST_BUSY;
	st = mr_build(e, c, &mr);
	if (st != QHCA_ST_OK)
		return st;
	mr->handle = old->handle;
	mr->key = old->key;
	qhca_obj_hold(&e->pd, mr->pd);
	qhca_obj_unhold(&e->pd, old->pd);
	e->mr[QHCA_FIELD_GET(QHCA_MR_KEY_INDEX_MASK, key) - 1] = mr;
	if (old->refs)
		old->dead = true;
	else
		mr_free(old);
	mr_log(e, "MR re-registered:", mr);
	return QHCA_ST_OK;
}

/* Take the region out of the key table; free it now or with its last reference. */
/* A window lets go of its region and is free. */
static void mw_unbind(struct qhca_mr *mw)
{
	if (mw->parent) {
		mw->parent->windows--;
		qhca_mr_put(mw->parent);
		mw->parent = NULL;
	}
	mw->invalid = true;
}

static void mr_unlink(struct qhca_engine *e, struct qhca_mr *mr)
{
	if (mr->flags & QHCA_MR_WINDOW)
		mw_unbind(mr);
	e->mr[QHCA_FIELD_GET(QHCA_MR_KEY_INDEX_MASK, mr->key) - 1] = NULL;
	qhca_obj_free(&e->mr_table, mr->handle);
	qhca_obj_unhold(&e->pd, mr->pd);
	if (mr->refs) {
		mr->dead = true;	/* messages in flight fail on their next use of it */
		return;
	}
	mr_free(mr);
}

/*
 * Lifetimes: a message in flight (a started send WQE, a receive WQE being filled, an RDMA
 * WRITE or READ response in progress) holds a reference on each region it moves bytes
 * through. Deregistration unlinks the key at once; the memory of the region's record
 * lives until the last reference is dropped, and every use checks qhca_mr_usable().
 */
struct qhca_mr *qhca_mr_get(struct qhca_mr *mr)
{
	mr->refs++;
	return mr;
}

void qhca_mr_put(struct qhca_mr *mr)
{
	if (--mr->refs == 0 && mr->dead)
		mr_free(mr);
}

uint16_t qhca_mr_destroy(struct qhca_engine *e, uint32_t key)
{
	struct qhca_mr *mr = mr_slot(e, key);

	/* A fast-register region or a window is named by any variant of its key: the
	 * driver may not know whether its last REG_MR or bind executed. */
	if (!mr || (mr->key != key && !(mr->flags & (QHCA_MR_FAST_REG | QHCA_MR_WINDOW))))
		return QHCA_ST_BAD_HANDLE;
	if (mr->windows)
		return QHCA_ST_BUSY;	/* windows are bound to it (IBA 10.6.7.1) */
	mr_unlink(e, mr);
	return QHCA_ST_OK;
}

/* ---------------------------------------------------------------- fast registration */
/*
 * A fast-register region is free or valid (IBA 10.6.1.2). Messages in flight that hold
 * references on it fail once it is invalidated (qhca_mr_usable); a REG_MR while such
 * references remain gives the region a new record, so that they can never reach the pages
 * of the new registration: the old record is freed with its last reference.
 */
static struct qhca_mr *mr_renew(struct qhca_engine *e, struct qhca_mr *old)
{
	struct qhca_mr *mr = qhca_host_zalloc(e, 1, sizeof(*mr));
	uint64_t *pages = old->max_pages ? qhca_host_zalloc(e, old->max_pages, sizeof(*pages)) :
			  NULL;

	if (!mr || (old->max_pages && !pages)) {
		qhca_host_free(mr);
		qhca_host_free(pages);
		return NULL;
	}
	*mr = *old;
	mr->pages = pages;
	mr->refs = 0;
	old->dead = true;
	old->parent = NULL;	/* a window's binding moves to the new record */
	e->mr[QHCA_FIELD_GET(QHCA_MR_KEY_INDEX_MASK, old->key) - 1] = mr;
	return mr;
}

/* Execute a REG_MR WQE of a QP of @pd; returns a work completion status. */
uint8_t qhca_mr_fast_reg(struct qhca_engine *e, uint32_t pd, const struct qhca_reg_mr_seg *r)
{
	struct qhca_mr *mr = mr_slot(e, r->key);
	uint64_t span, max_size = (uint64_t)e->cfg.max_mr_size_mb << 20;
	const char *why;
	uint32_t i;

	if (!mr || !(mr->flags & QHCA_MR_FAST_REG)) {
		why = "not a fast-register region";
		goto err;
	}
	if (mr->pd != pd) {
		qhca_log_guest(e, "REG_MR key 0x%x: region of another protection domain", r->key);
		return QHCA_WC_LOC_PROT_ERR;
	}
	span = (uint64_t)r->page_offset + r->length;
	why = "bad fields";
	if (!mr->invalid) {
		why = "the region is valid (invalidate it first)";
	} else if (r->page_shift < QHCA_FAST_REG_MIN_SHIFT ||
		   r->page_shift > QHCA_FAST_REG_MAX_SHIFT || r->page_offset >> r->page_shift ||
		   !r->npages || r->npages > mr->max_pages || r->pbl_addr % 8) {
		why = "bad page list";
	} else if ((r->access & ~QHCA_ACCESS_ALL) || !access_ok(r->access)) {
		why = "bad access rights";
	} else if (r->length > max_size || r->iova + r->length < r->iova ||
		   span > (uint64_t)r->npages << r->page_shift) {
		why = "length outside the pages";
	} else if (r->rsvd0[0] || r->rsvd0[1] || r->rsvd0[2] || r->rsvd0[3] || r->rsvd0[4] ||
		   r->rsvd0[5] || r->rsvd0[6] || r->rsvd1[0] || r->rsvd1[1]) {
		why = "reserved bytes set";
	} else if (mr->refs && !(mr = mr_renew(e, mr))) {
		why = "out of memory";
	} else if (qhca_dma_read(e, r->pbl_addr, mr->pages, (size_t)r->npages * 8)) {
		why = "page list unreadable";
	} else {
		for (i = 0; i < r->npages; i++)
			if (!mr->pages[i] || mr->pages[i] & ((1ull << r->page_shift) - 1))
				break;
		if (i == r->npages) {
			mr->key = r->key;
			mr->access = r->access;
			mr->iova = r->iova;
			mr->length = r->length;
			mr->page_offset = r->page_offset;
			mr->page_shift = r->page_shift;
			mr->npages = r->npages;
			mr->invalid = false;
			qhca_log(e, QHCA_LOG_EVENT, "REG_MR key 0x%x iova 0x%llx len %llu, %u pages of %u KiB",
				 mr->key, (unsigned long long)mr->iova, (unsigned long long)mr->length,
				 mr->npages, 1u << (mr->page_shift - 10));
			return QHCA_WC_SUCCESS;
		}
		why = "page address not aligned to the page size";
	}
err:
	qhca_log_guest(e, "REG_MR key 0x%x: %s", r->key, why);
	return QHCA_WC_LOC_QP_OP_ERR;
}

/*
 * Invalidate @key for @qp (LOCAL_INV, or with @remote a SEND_WITH_INV that arrived): a
 * fast-register region or a type 2 window of the QP's PD, under its current key (a window
 * remotely only through the QP it is bound to); invalidating a free one is allowed.
 */
uint8_t qhca_mr_invalidate(struct qhca_engine *e, const struct qhca_qp *qp, uint32_t key,
			   bool remote, const char **why)
{
	struct qhca_mr *mr = qhca_mr_find(e, key);

	if (!mr || !(mr->flags & (QHCA_MR_FAST_REG | QHCA_MR_MW_TYPE2))) {
		*why = !mr ? "no such key" : (mr->flags & QHCA_MR_MW_TYPE1) ?
		       "a type 1 window is unbound, not invalidated" :
		       "not a fast-register region or type 2 window";
		return QHCA_WC_LOC_QP_OP_ERR;
	}
	if (mr->pd != qhca_qp_pd(qp) ||
	    (remote && (mr->flags & QHCA_MR_MW_TYPE2) && !mr->invalid &&
	     mr->qp_serial != qp->serial)) {
		*why = mr->pd != qhca_qp_pd(qp) ? "key of another protection domain" :
		       "window bound to another QP";
		return QHCA_WC_LOC_PROT_ERR;
	}
	if (mr->flags & QHCA_MR_WINDOW)
		mw_unbind(mr);
	else
		mr->invalid = true;
	return QHCA_WC_SUCCESS;
}

/* ---------------------------------------------------------------- memory windows */
/* Execute a BIND_MW WQE of @qp (IBA 10.6.7.2); returns a work completion status. */
uint8_t qhca_mw_bind(struct qhca_engine *e, const struct qhca_qp *qp,
		     const struct qhca_bind_mw_seg *b)
{
	const uint32_t remote = QHCA_ACCESS_REMOTE_READ | QHCA_ACCESS_REMOTE_WRITE |
				QHCA_ACCESS_REMOTE_ATOMIC;
	struct qhca_mr *mw = mr_slot(e, b->mw_key), *mr = NULL;
	const char *why = NULL;

	if (!mw || !(mw->flags & QHCA_MR_WINDOW))
		why = "not a memory window";
	else if (mw->pd != qhca_qp_pd(qp))
		why = "window of another protection domain";
	else if ((mw->flags & QHCA_MR_MW_TYPE2) && !mw->invalid)
		why = "type 2 window already bound (invalidate it first)";
	else if (b->rsvd0 || b->rsvd1[0] || b->rsvd1[1] || b->rsvd1[2] || b->rsvd1[3] ||
		 (b->access & ~QHCA_ACCESS_ALL))
		why = "reserved bits set";
	if (!why && b->length) {
		mr = qhca_mr_find(e, b->mr_lkey);
		if (!mr || (mr->flags & QHCA_MR_WINDOW) || !qhca_mr_usable(mr))
			why = "no such region";
		else if (mr->pd != qhca_qp_pd(qp))
			why = "region of another protection domain";
		else if (!(mr->access & QHCA_ACCESS_MW_BIND))
			why = "region without MW_BIND access";
		else if ((b->access & (QHCA_ACCESS_REMOTE_WRITE | QHCA_ACCESS_REMOTE_ATOMIC)) &&
			 !(mr->access & QHCA_ACCESS_LOCAL_WRITE))
			why = "remote write or atomic on a region without local write";
		else if (b->addr < mr->iova || b->addr + b->length < b->addr ||
			 b->addr - mr->iova > mr->length ||
			 b->length > mr->length - (b->addr - mr->iova))
			why = "outside the region";
	}
	if (!why && mw->refs && !(mw = mr_renew(e, mw)))
		why = "out of memory";
	if (why) {
		qhca_log_guest(e, "QP 0x%x BIND_MW 0x%x to 0x%x: %s", qp->qpn, b->mw_key,
			       b->mr_lkey, why);
		return QHCA_WC_MW_BIND_ERR;
	}
	mw_unbind(mw);	/* a type 1 window's last binding; length 0 ends here */
	mw->key = b->mw_key;
	if (!b->length)
		return QHCA_WC_SUCCESS;
	mw->parent = qhca_mr_get(mr);
	mr->windows++;
	mw->iova = b->addr;
	mw->length = b->length;
	mw->access = b->access & remote;
	mw->qpn = qp->qpn;
	mw->qp_serial = qp->serial;
	mw->invalid = false;
	return QHCA_WC_SUCCESS;
}

void qhca_mr_reset(struct qhca_engine *e)
{
	uint32_t i;

	for (i = 0; i < e->cfg.max_mr; i++)
		if (e->mr[i])
			mr_unlink(e, e->mr[i]);
	qhca_obj_table_clear(&e->mr_table);
}

/*
 * Check that @key names a region of @pd that grants @access over [va, va + len); returns
 * the region or NULL with the reason in *why.
 */
static struct qhca_mr *key_check(struct qhca_engine *e, uint32_t key, uint32_t pd, uint64_t va,
				  uint64_t len, uint32_t access, const char **why)
{
	struct qhca_mr *mr = qhca_mr_find(e, key);

	if (!mr) {
		*why = "no such key";
		return NULL;
	}
	if (mr->invalid) {
		*why = "key not registered (free or invalidated)";
		return NULL;
	}
	if (mr->pd != pd) {
		*why = "key of another protection domain";
		return NULL;
	}
	if ((mr->access & access) != access) {
		*why = "access not granted";
		return NULL;
	}
	if (va < mr->iova || va + len < va || va - mr->iova > mr->length ||
	    len > mr->length - (va - mr->iova)) {
		*why = "outside the region";
		return NULL;
	}
	return mr;
}

static void step_key(struct qhca_engine *e, const char *kind, uint32_t key, uint32_t pd,
		     uint64_t va, uint64_t len, uint32_t access, const char *why)
{
	qhca_stepf(e, "key kind=%s key=0x%x pd=0x%x va=0x%llx len=%llu need=0x%x result=\"%s\"",
		   kind, key, pd, (unsigned long long)va, (unsigned long long)len, access,
		   why ? why : "ok");
}

/* An lkey: a region, never a window (IBA 10.6.7). */
struct qhca_mr *qhca_mr_check(struct qhca_engine *e, uint32_t key, uint32_t pd, uint64_t va,
			      uint64_t len, uint32_t access, const char **why)
{
	struct qhca_mr *mr = key_check(e, key, pd, va, len, access, why);

	if (mr && (mr->flags & QHCA_MR_WINDOW)) {
		*why = "a memory window is not an lkey";
		mr = NULL;
	}
	if (qhca_tracing(e))
		step_key(e, "lkey", key, pd, va, len, access, mr ? NULL : *why);
	return mr;
}

/* An rkey that arrived on @qp: a region or a window of its PD (a type 2 window: bound by
 * this very QP), granting @access over [va, va + len). */
struct qhca_mr *qhca_rkey_check(struct qhca_engine *e, const struct qhca_qp *qp, uint32_t key,
				uint64_t va, uint64_t len, uint32_t access, const char **why)
{
	struct qhca_mr *mr = key_check(e, key, qhca_qp_pd(qp), va, len, access, why);

	if (mr && (mr->flags & QHCA_MR_MW_TYPE2) && mr->qp_serial != qp->serial) {
		*why = "type 2 window bound to another QP";
		mr = NULL;
	}
	if (mr && !qhca_mr_usable(mr)) {
		*why = "the window's region was invalidated";
		mr = NULL;
	}
	if (qhca_tracing(e))
		step_key(e, "rkey", key, qhca_qp_pd(qp), va, len, access, mr ? NULL : *why);
	return mr;
}

static void step_dma(struct qhca_engine *e, const struct qhca_mr *mr, uint32_t key, uint64_t va,
		     size_t len, bool to_guest)
{
	uint64_t gpa = va, off = va - mr->iova + mr->page_offset;

	if (!(mr->flags & QHCA_MR_PHYS))
		gpa = off >> mr->page_shift < mr->npages ?
		      mr->pages[off >> mr->page_shift] + (off & ((1ull << mr->page_shift) - 1)) : 0;
	qhca_stepf(e, "dma dir=%s key=0x%x va=0x%llx len=%zu gpa=0x%llx",
		   to_guest ? "to-guest" : "from-guest", key, (unsigned long long)va, len,
		   (unsigned long long)gpa);
}

/* Move @len bytes between @buf and the region (or the window's region) at @va, checked. */
int qhca_mr_xfer(struct qhca_engine *e, const struct qhca_mr *mr, uint64_t va, void *buf,
		 size_t len, bool to_guest)
{
	const struct qhca_mr *named = mr;	/* the key the access came by, for the trace */

	if (!len)
		return 0;
	if (mr->flags & QHCA_MR_WINDOW) {
		if (!mr->parent)
			return -1;
		mr = mr->parent;	/* windows address the region's virtual addresses */
	}
	if (qhca_tracing(e))
		step_dma(e, mr, named->key, va, len, to_guest);
	if (mr->flags & QHCA_MR_PHYS)
		return to_guest ? qhca_dma_write(e, va, buf, len) : qhca_dma_read(e, va, buf, len);
	return pages_xfer(e, mr->pages, mr->npages, mr->page_shift, va - mr->iova + mr->page_offset,
			  buf, len, to_guest);
}

/* ---------------------------------------------------------------- SGE lists */
/*
 * Check the SGEs of a WQE against @pd and @access and take a reference on the region of
 * each; on failure nothing is held and *bad names the SGE. Later packets of the message
 * move bytes through these references only: no key is looked up again, so a key that
 * was deregistered and reused meanwhile can never redirect the message.
 */
int qhca_sgl_load(struct qhca_engine *e, struct qhca_sgl *sgl, uint32_t pd, uint32_t access,
		  uint32_t *bad, const char **why)
{
	uint32_t i;

	sgl->length = 0;
	for (i = 0; i < sgl->num; i++) {
		const struct qhca_sge *s = &sgl->sge[i];
		struct qhca_mr *mr = NULL;

		if (s->length) {
			mr = qhca_mr_check(e, s->lkey, pd, s->addr, s->length, access, why);
			if (!mr) {
				sgl->num = i;
				qhca_sgl_release(sgl);
				*bad = i;
				return -1;
			}
			qhca_mr_get(mr);
		}
		sgl->mr[i] = mr;
		sgl->length += s->length;
	}
	return 0;
}

void qhca_sgl_release(struct qhca_sgl *sgl)
{
	uint32_t i;

	for (i = 0; i < sgl->num; i++) {
		if (sgl->mr[i])
			qhca_mr_put(sgl->mr[i]);
		sgl->mr[i] = NULL;
	}
	sgl->num = 0;
	sgl->length = 0;
}

/*
 * Move message bytes [off, off + len) between @buf and the buffers of a loaded SGE list.
 * Returns -2 if the list is too short for the range, -1 if a region was deregistered or
 * invalidated since the list was loaded, or guest memory failed.
 */
int qhca_sgl_xfer(struct qhca_engine *e, const struct qhca_sgl *sgl, uint64_t off, uint8_t *buf,
		  uint32_t len, bool to_guest)
{
	uint32_t i;

	for (i = 0; i < sgl->num && len; i++) {
		const struct qhca_sge *s = &sgl->sge[i];
		const struct qhca_mr *mr = sgl->mr[i];
		uint32_t n;

		if (off >= s->length) {
			off -= s->length;
			continue;
		}
		n = s->length - (uint32_t)off < len ? s->length - (uint32_t)off : len;
		if (!qhca_mr_usable(mr)) {
			qhca_log_guest(e, "lkey 0x%x went away while a message used it", s->lkey);
			return -1;
		}
		if (qhca_mr_xfer(e, mr, s->addr + off, buf, n, to_guest))
			return -1;
		buf += n;
		len -= n;
		off = 0;
	}
	return len ? -2 : 0;
}
