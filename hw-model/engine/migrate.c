// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * qhca engine: its whole state as one byte stream, and back (live migration, snapshots).
 * The QPs' sections are migrate_qp.c's; what both share, migrate.h.
 *
 * The stream is little-endian and versioned: "QHCASTAT", the format version, the ABI
 * version, the configuration (which must equal the destination's), then sections in a fixed
 * order, each opened by a tag: the device (registers, admin queue, EQs, Ethernet function,
 * port), the object tables (exact: the same handles, QPNs and keys come back, and the free
 * slots are reused in the same order), regions with their page lists by value (the driver
 * freed its copy after the command), CQs, SRQs, QPs (attributes, PSNs, the congestion
 * window, timers as time remaining, the send WQE snapshots in flight with their READ and
 * ATOMIC recovery state, the receive, WRITE and READ response in progress, the responder's
 * READ/ATOMIC history), multicast groups, frames waiting for loopback, counters.
 *
 * What is not saved is recomputed: references and users, the timer heap, list links, the
 * send queues that go on from the timer.
 *
 * A stream to load is untrusted (docs/security.md, "Migration"): it is parsed into a new
 * engine, every value checked as a guest's command would be, every object allocated within
 * the host memory budget; the first failure abandons the new engine and says why. The
 * running one is never touched.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "migrate.h"

/* ---------------------------------------------------------------- writer and reader */
void mig_put(struct mig_out *o, const void *p, size_t n)
{
	if (o->oom)
		return;
	if (n > o->cap - o->len) {
		size_t cap = o->cap ? o->cap : 65536;
		uint8_t *b;

		while (n > cap - o->len && cap < SIZE_MAX / 2)
			cap *= 2;
		b = n > cap - o->len ? NULL : realloc(o->buf, cap);
		if (!b) {
			o->oom = true;
			return;
		}
		o->buf = b;
		o->cap = cap;
	}
	memcpy(o->buf + o->len, p, n);
	o->len += n;
}

bool mig_fail(struct mig_in *in, const char *why)
{
	if (!in->why)
		in->why = why;
	return false;
}

bool mig_get(struct mig_in *in, void *p, size_t n)
{
	if (in->why || n > in->len - in->off) {
		memset(p, 0, n);
		return mig_fail(in, "truncated");
	}
	memcpy(p, in->p + in->off, n);
	in->off += n;
	return true;
}

/* ---------------------------------------------------------------- configuration */
static void config_put(struct mig_out *o, const struct qhca_engine_config *c)
{
	put32(o, c->db_pages);
	put32(o, c->msix_vectors);
	put32(o, c->max_pd);
	put32(o, c->max_qp);
	put32(o, c->max_qp_wr);
	put32(o, c->max_cq);
	put32(o, c->max_cqe);
	put32(o, c->max_mr);
	put32(o, c->max_mr_size_mb);
	put32(o, c->max_srq);
	put32(o, c->max_sge);
	put32(o, c->max_inline);
	put32(o, c->mtu);
	put8(o, c->link);
	mig_put(o, c->mac, 6);
	put32(o, c->host_mem_mb);
	put64(o, c->qp_window_budget);
	put64(o, c->key_secret);
}

/* The source's configuration must be the destination's (the same device properties), the
 * key secret aside: it comes with the stream, so that the keys the guest holds stay valid. */
static bool config_get(struct mig_in *in, struct qhca_engine_config *c)
{
	const struct qhca_engine_config *d = &in->e->cfg;
	uint8_t mac[6];

	CHECK(in, get32(in) == d->db_pages, "db-pages differs from the destination's");
	CHECK(in, get32(in) == d->msix_vectors, "msix-vectors differs from the destination's");
	CHECK(in, get32(in) == d->max_pd, "max-pd differs from the destination's");
	CHECK(in, get32(in) == d->max_qp, "max-qp differs from the destination's");
	CHECK(in, get32(in) == d->max_qp_wr, "max-qp-wr differs from the destination's");
	CHECK(in, get32(in) == d->max_cq, "max-cq differs from the destination's");
	CHECK(in, get32(in) == d->max_cqe, "max-cqe differs from the destination's");
	CHECK(in, get32(in) == d->max_mr, "max-mr differs from the destination's");
	CHECK(in, get32(in) == d->max_mr_size_mb, "max-mr-size-mb differs from the destination's");
	CHECK(in, get32(in) == d->max_srq, "max-srq differs from the destination's");
	CHECK(in, get32(in) == d->max_sge, "max-sge differs from the destination's");
	CHECK(in, get32(in) == d->max_inline, "max-inline differs from the destination's");
	CHECK(in, get32(in) == d->mtu, "mtu differs from the destination's");
	CHECK(in, get8(in) == d->link, "link differs from the destination's");
	mig_get(in, mac, 6);
	CHECK(in, !memcmp(mac, d->mac, 6), "mac differs from the destination's");
	CHECK(in, get32(in) == d->host_mem_mb, "host-mem-mb differs from the destination's");
	CHECK(in, get64(in) == d->qp_window_budget, "the QP window budget differs");
	*c = *d;
	c->key_secret = get64(in);
	return !in->why;
}

/* ---------------------------------------------------------------- object tables */
/*
 * A table exactly: the generation of every slot that has one, the owner of each used slot,
 * and the queue of free slots in its order (as runs of consecutive slots: short for a table
 * that is mostly untouched).
 */
static void table_put(struct mig_out *o, const struct qhca_obj_table *t)
{
	uint32_t i, n = 0, runs = 0, start, len;

	put32(o, t->capacity);
	put32(o, t->count);
	for (i = 0; i < t->capacity; i++)
		n += t->gen[i] != 0;
	put32(o, n);
	for (i = 0; i < t->capacity; i++) {
		if (!t->gen[i])
			continue;
		put32(o, i);
		put16(o, t->gen[i]);
		if (t->gen[i] & OBJ_USED)
			put32(o, t->owner[i]);
	}
	for (i = 0; i < t->capacity - t->count; i++)
		if (!i || t->free_q[(t->free_head + i) % t->capacity] !=
			  t->free_q[(t->free_head + i - 1) % t->capacity] + 1)
			runs++;
	put32(o, runs);
	for (i = 0; i < t->capacity - t->count; i += len) {
		start = t->free_q[(t->free_head + i) % t->capacity];
		for (len = 1; i + len < t->capacity - t->count &&
			      t->free_q[(t->free_head + i + len) % t->capacity] == start + len; len++)
			;
		put32(o, start);
		put32(o, len);
	}
}

static bool table_get(struct mig_in *in, struct qhca_obj_table *t)
{
	uint32_t cap = t->capacity, count, n, i, prev = 0, used = 0, runs, nfree = 0;
	uint8_t *seen;

	CHECK(in, get32(in) == cap, "an object table of another size");
	count = get32(in);
	n = get32(in);
	CHECK(in, count <= cap && n <= cap, "an object table with more objects than slots");
	for (i = 0; i < n && !in->why; i++) {
		uint32_t idx = get32(in);
		uint16_t gen = get16(in);

		CHECK(in, idx < cap && (i == 0 || idx > prev), "object table slots out of order");
		CHECK(in, gen && !(gen & ~(OBJ_USED | OBJ_GEN_MASK)), "a bad slot generation");
		prev = idx;
		t->gen[idx] = gen;
		if (gen & OBJ_USED) {
			t->owner[idx] = get32(in);
			used++;
		}
	}
	CHECK(in, !in->why && used == count, "an object table's count is not its used slots");
	t->count = count;
	t->free_head = 0;
	runs = get32(in);
	CHECK(in, runs <= cap - count, "more runs of free slots than free slots");
	seen = calloc(cap ? cap : 1, 1);
	if (!seen)
		return mig_fail(in, "out of memory");
	for (i = 0; i < runs && !in->why; i++) {
		uint32_t start = get32(in), len = get32(in), j;

		if (!len || start >= cap || len > cap - start || len > cap - count - nfree) {
			mig_fail(in, "a bad run of free slots");
			break;
		}
		for (j = start; j < start + len; j++) {
			if ((t->gen[j] & OBJ_USED) || seen[j]) {
				mig_fail(in, "a used or repeated slot in the free queue");
				break;
			}
			seen[j] = 1;
			t->free_q[nfree++] = j;
		}
	}
	free(seen);
	CHECK(in, !in->why && nfree == cap - count, "the free queue misses free slots");
	return true;
}

/* ---------------------------------------------------------------- page lists */
static void pages_put(struct mig_out *o, const uint64_t *pages, uint32_t n)
{
	put32(o, n);
	if (n)
		mig_put(o, pages, (size_t)n * sizeof(*pages));
}

/* @n pages (at most @max, and room for @room) into a list charged to the budget. */
static uint64_t *pages_get(struct mig_in *in, uint32_t *n, uint32_t min, uint32_t max,
			   uint32_t room, unsigned int shift)
{
	uint64_t *p;
	uint32_t i;

	*n = get32(in);
	if (in->why || *n < min || *n > max || *n > room) {
		mig_fail(in, "a page list of a bad length");
		return NULL;
	}
	if (!room)
		return NULL;
	if ((size_t)*n * sizeof(*p) > in->len - in->off) {
		mig_fail(in, "truncated");
		return NULL;
	}
	p = qhca_host_zalloc(in->e, room, sizeof(*p));
	if (!p) {
		mig_fail(in, "past the host memory budget");
		return NULL;
	}
	mig_get(in, p, (size_t)*n * sizeof(*p));
	for (i = 0; shift && i < *n; i++) {
		if (!p[i] || (p[i] & ((1ull << shift) - 1))) {
			mig_fail(in, "a bad page address");
			qhca_host_free(p);
			return NULL;
		}
	}
	return p;
}

void mig_wq_put(struct mig_out *o, const struct qhca_wq *wq)
{
	put32(o, wq->log2);
	put32(o, wq->stride_log2);
	put32(o, wq->pi);
	put32(o, wq->ci);
	pages_put(o, wq->pages, wq->npages);
}

/* A work queue as wq_load() would take it, and a producer index at most a ring ahead;
 * none (all zero) if @optional. */
bool mig_wq_get(struct mig_in *in, struct qhca_wq *wq, uint32_t min_stride_log2,
		   bool optional)
{
	uint64_t bytes;

	wq->log2 = get32(in);
	wq->stride_log2 = get32(in);
	wq->pi = get32(in);
	wq->ci = get32(in);
	if (optional && !wq->log2 && !wq->stride_log2 && !wq->pi && !wq->ci) {
		CHECK(in, get32(in) == 0, "a work queue of a bad geometry");
		return !in->why;
	}
	CHECK(in, wq->log2 <= 15 && wq->stride_log2 >= min_stride_log2 && wq->stride_log2 <= 12 &&
		  (1u << wq->log2) <= in->e->cfg.max_qp_wr, "a work queue of a bad geometry");
	CHECK(in, qhca_ring_pi_ok(wq->pi, wq->ci, 1u << wq->log2),
	      "a work queue with more WQEs than room");
	bytes = (uint64_t)1 << (wq->log2 + wq->stride_log2);
	wq->pages = pages_get(in, &wq->npages, (uint32_t)((bytes + QHCA_PAGE_SIZE - 1) >>
							  QHCA_PAGE_SHIFT),
			      (uint32_t)((bytes + QHCA_PAGE_SIZE - 1) >> QHCA_PAGE_SHIFT),
			      (uint32_t)((bytes + QHCA_PAGE_SIZE - 1) >> QHCA_PAGE_SHIFT),
			      QHCA_PAGE_SHIFT);
	return !in->why;
}

/* ---------------------------------------------------------------- device */
static void device_put(struct mig_out *o, struct qhca_engine *e, uint64_t now)
{
	uint8_t pi[IB_SMP_DATA_LEN];
	uint32_t i;

	put32(o, SEC_DEVICE);
	put32(o, e->ctrl);
	put32(o, e->status);
	put32(o, e->error);
	put32(o, e->intr_mask);
	put64(o, e->asq_base);
	put64(o, e->acq_base);
	put32(o, e->aq_depth_log2);
	put32(o, e->asq_head);
	put32(o, e->asq_tail);
	put32(o, e->acq_tail);
	put32(o, e->acq_head);
	put16(o, e->acq_phase);
	put8(o, e->admin_pending);
	put64(o, e->admin_cmds);
	put64(o, e->admin_errors);
	put64(o, e->qp_serial);
	put32(o, e->gsi_qpn);
	put32(o, e->smi_qpn);
	/* event queues, by slot of eq_table */
	put32(o, (uint32_t)e->async_eq);
	for (i = 0; i < QHCA_MAX_EQ; i++) {
		const struct qhca_eq *q = &e->eq[i];

		if (!(e->eq_table.gen[i] & OBJ_USED))
			continue;
		put32(o, q->handle);
		put64(o, q->ring);
		put32(o, q->log2);
		put32(o, q->pi);
		put32(o, q->ci);
		put16(o, q->vector);
		put8(o, q->overflowed);
	}
	/* the Ethernet function */
	put8(o, e->eth.started);
	put64(o, e->eth.tx_ring);
	put64(o, e->eth.rx_ring);
	put32(o, e->eth.tx_log2);
	put32(o, e->eth.rx_log2);
	put32(o, e->eth.tx_ci);
	put32(o, e->eth.tx_pi);
	put32(o, e->eth.rx_ci);
	put32(o, e->eth.rx_pi);
	put16(o, e->eth.vector);
	/* the port */
	put8(o, e->link_up);
	mig_put(o, e->mac, 6);
	ib_port_info_pack(&e->ib.pi, pi);
	mig_put(o, pi, sizeof(pi));
	put64(o, e->ib.pi.mkey_lease_end ? remaining(e->ib.pi.mkey_lease_end, now) + 1 : 0);
	mig_put(o, e->ib.pkeys, sizeof(e->ib.pkeys));
	mig_put(o, e->ib.guids, sizeof(e->ib.guids));
	mig_put(o, e->ib.sl2vl, sizeof(e->ib.sl2vl));
	mig_put(o, e->ib.vl_arb, sizeof(e->ib.vl_arb));
	mig_put(o, e->ib.node_desc, sizeof(e->ib.node_desc));
	put32(o, e->ib.cap_set);
	mig_put(o, e->ib.pma_base, sizeof(e->ib.pma_base));
}

/*
 * An Ethernet port's InfiniBand state (PortInfo as packed in @pi, the M_Key lease @lease, the
 * tables in e->ib) is what the device's reset made of it, with the link up or down then:
 * the SMA, the PMA and the commands that change it are InfiniBand's alone (ib_only(),
 * admin.c). e->ib and e->link_up come back as they were.
 */
static bool ib_port_as_reset(struct qhca_engine *e, const uint8_t pi[IB_SMP_DATA_LEN],
			     uint64_t lease)
{
	struct qhca_ib_port loaded = e->ib;
	uint8_t ref[IB_SMP_DATA_LEN];
	bool up = e->link_up, same = false;
	int k;

	for (k = 0; k < 2 && !same; k++) {
		e->link_up = k;
		qhca_ib_port_reset(e);	/* no event: it starts from a port that is down */
		ib_port_info_pack(&e->ib.pi, ref);
		same = !memcmp(ref, pi, sizeof(ref)) &&
		       !memcmp(e->ib.pkeys, loaded.pkeys, sizeof(loaded.pkeys)) &&
		       !memcmp(e->ib.guids, loaded.guids, sizeof(loaded.guids)) &&
		       !memcmp(e->ib.sl2vl, loaded.sl2vl, sizeof(loaded.sl2vl)) &&
		       !memcmp(e->ib.vl_arb, loaded.vl_arb, sizeof(loaded.vl_arb)) &&
		       !memcmp(e->ib.node_desc, loaded.node_desc, sizeof(loaded.node_desc)) &&
		       e->ib.cap_set == loaded.cap_set &&
		       !memcmp(e->ib.pma_base, loaded.pma_base, sizeof(loaded.pma_base));
	}
	e->ib = loaded;
	e->link_up = up;
	return same && !lease;
}

static bool ring_ok(uint64_t ring, uint32_t log2, uint32_t min, uint32_t max, size_t entry)
{
	return log2 >= min && log2 <= max && ring && ring % 4096 == 0 &&
	       ring + ((uint64_t)entry << log2) > ring;
}

static bool device_get(struct mig_in *in)
{
	struct qhca_engine *e = in->e;
	uint8_t pi[IB_SMP_DATA_LEN];
	uint64_t lease;
	int32_t async;
	uint32_t i;

	expect_section(in, SEC_DEVICE);
	e->ctrl = get32(in);
	e->status = get32(in);
	e->error = get32(in);
	e->intr_mask = get32(in);
	e->asq_base = get64(in);
	e->acq_base = get64(in);
	e->aq_depth_log2 = get32(in);
	e->asq_head = get32(in);
	e->asq_tail = get32(in);
	e->acq_tail = get32(in);
	e->acq_head = get32(in);
	e->acq_phase = get16(in);
	e->admin_pending = getbool(in);
	e->admin_cmds = get64(in);
	e->admin_errors = get64(in);
	e->qp_serial = get64(in);
	e->gsi_qpn = get32(in);
	e->smi_qpn = get32(in);
	CHECK(in, !(e->ctrl & ~QHCA_CTRL_ENABLE) &&
		  !(e->status & ~(QHCA_STATUS_READY | QHCA_STATUS_FATAL)) &&
		  (!(e->status & QHCA_STATUS_READY) || (e->ctrl & QHCA_CTRL_ENABLE)),
	      "bad control or status register");
	CHECK(in, e->acq_phase == 0 || e->acq_phase == QHCA_CQE_PHASE, "a bad admin phase");
	/* A running admin queue: what qhca_admin_enable() and the doorbells check. */
	if (e->status & QHCA_STATUS_READY) {
		uint32_t depth;

		CHECK(in, e->aq_depth_log2 >= QHCA_AQ_DEPTH_MIN_LOG2 &&
			  e->aq_depth_log2 <= QHCA_AQ_DEPTH_MAX_LOG2 && e->asq_base && e->acq_base &&
			  !((e->asq_base | e->acq_base) % QHCA_AQ_ALIGN), "a bad admin queue");
		depth = 1u << e->aq_depth_log2;
		CHECK(in, e->asq_head < depth && e->asq_tail < depth && e->acq_tail < depth &&
			  e->acq_head < depth, "admin queue indexes past the ring");
	}	/* else stopped (FATAL, an enable refused): it restarts from 0 at the next enable */
	if (!(e->ctrl & QHCA_CTRL_ENABLE)) {
		/* off: a reset left nothing (qhca_engine_reset) */
		CHECK(in, !e->asq_head && !e->asq_tail && !e->acq_tail &&
			  !e->acq_head && !e->uctx.count && !e->pd.count && !e->xrcd.count &&
			  !e->eq_table.count && !e->mr_table.count && !e->cq_table.count &&
			  !e->srq_table.count && !e->qp_table.count, "objects while the device is off");
	}
	async = (int32_t)get32(in);
	CHECK(in, async >= -1 && async < QHCA_MAX_EQ, "a bad async event queue");
	e->async_eq = async;
	for (i = 0; i < QHCA_MAX_EQ && !in->why; i++) {
		struct qhca_eq *q = &e->eq[i];

		if (!(e->eq_table.gen[i] & OBJ_USED)) {
			CHECK(in, async != (int32_t)i, "the async event queue is not an EQ");
			continue;
		}
		q->handle = get32(in);
		q->ring = get64(in);
		q->log2 = get32(in);
		q->pi = get32(in);
		q->ci = get32(in);
		q->vector = get16(in);
		q->overflowed = getbool(in);
		CHECK(in, mig_live(&e->eq_table, q->handle) == (int64_t)i, "an EQ out of its slot");
		CHECK(in, ring_ok(q->ring, q->log2, 1, QHCA_EQ_MAX_LOG2, sizeof(struct qhca_eqe)) &&
			  q->vector < e->cfg.msix_vectors &&
			  qhca_ring_pi_ok(q->pi, q->ci, 1u << q->log2), "a bad event queue");
	}
	e->eth.started = getbool(in);
	e->eth.tx_ring = get64(in);
	e->eth.rx_ring = get64(in);
	e->eth.tx_log2 = get32(in);
	e->eth.rx_log2 = get32(in);
	e->eth.tx_ci = get32(in);
	e->eth.tx_pi = get32(in);
	e->eth.rx_ci = get32(in);
	e->eth.rx_pi = get32(in);
	e->eth.vector = get16(in);
	CHECK(in, !e->eth.started || (e->ctrl & QHCA_CTRL_ENABLE), "Ethernet while off");
	if (e->eth.started) {
		const struct qhca_eth *t = &e->eth;

		CHECK(in, ring_ok(t->tx_ring, t->tx_log2, 1, QHCA_ETH_RING_MAX_LOG2,
				  sizeof(struct qhca_eth_desc)) &&
			  ring_ok(t->rx_ring, t->rx_log2, 1, QHCA_ETH_RING_MAX_LOG2,
				  sizeof(struct qhca_eth_desc)) &&
			  t->vector < e->cfg.msix_vectors &&
			  qhca_ring_pi_ok(t->tx_pi, t->tx_ci, 1u << t->tx_log2) &&
			  qhca_ring_pi_ok(t->rx_pi, t->rx_ci, 1u << t->rx_log2),
		      "a bad Ethernet function");
		e->eth.frame = malloc(QHCA_ETH_MAX_FRAME);
		CHECK(in, e->eth.frame, "out of memory");
	}
	e->link_up = getbool(in);
	mig_get(in, e->mac, 6);
	CHECK(in, !(e->mac[0] & 1), "a multicast port address");
	mig_get(in, pi, sizeof(pi));
	ib_port_info_unpack(pi, &e->ib.pi);
	lease = get64(in);
	e->ib.pi.mkey_lease_end = lease ? deadline_of(lease - 1, in->now) : 0;
	CHECK(in, e->ib.pi.state >= IB_PORT_DOWN && e->ib.pi.state <= IB_PORT_ACTIVE &&
		  e->ib.pi.op_vls <= 15, "a bad port state");
	mig_get(in, e->ib.pkeys, sizeof(e->ib.pkeys));
	mig_get(in, e->ib.guids, sizeof(e->ib.guids));
	mig_get(in, e->ib.sl2vl, sizeof(e->ib.sl2vl));
	mig_get(in, e->ib.vl_arb, sizeof(e->ib.vl_arb));
	mig_get(in, e->ib.node_desc, sizeof(e->ib.node_desc));
	e->ib.cap_set = get32(in);
	mig_get(in, e->ib.pma_base, sizeof(e->ib.pma_base));
	if (in->why)
		return false;
	/* The state of the port's link layer alone: InfiniBand's port is never changed on
	 * Ethernet, and ETH_START is refused on InfiniBand (cmd_eth_start). */
	if (e->cfg.link == QHCA_LINK_IB)
		CHECK(in, !e->eth.started && !e->eth.tx_ring && !e->eth.rx_ring &&
			  !e->eth.tx_log2 && !e->eth.rx_log2 && !e->eth.tx_ci && !e->eth.tx_pi &&
			  !e->eth.rx_ci && !e->eth.rx_pi && !e->eth.vector,
		      "an Ethernet function on an InfiniBand port");
	else
		CHECK(in, ib_port_as_reset(e, pi, lease),
		      "InfiniBand port state (LIDs, SM, M_Key, tables) on an Ethernet port");
	return true;
}

/* ---------------------------------------------------------------- regions */
/* A reference a message holds on a region (or window). */
void mig_ref_put(struct mig_out *o, struct qhca_engine *e, const struct qhca_mr *mr)
{
	if (!mr) {
		put8(o, REF_NONE);
		return;
	}
	put8(o, qhca_mr_find(e, mr->key) == mr ? REF_LIVE : REF_DEAD);
	put32(o, mr->key);
}

/*
 * A reference back: the region its key names, if it is one of @pd (0: any) that covers
 * @range (if given) with its access, or a dead stand-in, which every use refuses
 * (qhca_mr_usable). NULL with @in failed on a bad reference.
 */
struct qhca_mr *mig_ref_get(struct mig_in *in, bool *none, uint32_t pd, int kind_ok,
			       const struct mig_range *range)
{
	uint8_t kind = get8(in);
	uint32_t key = kind == REF_NONE ? 0 : get32(in);
	struct qhca_mr *mr;

	*none = kind == REF_NONE && !in->why;
	if (in->why || kind == REF_NONE)
		return NULL;
	if (kind == REF_DEAD) {
		mr = qhca_host_zalloc(in->e, 1, sizeof(*mr));
		if (!mr) {
			mig_fail(in, "past the host memory budget");
			return NULL;
		}
		mr->key = key;
		mr->dead = mr->invalid = true;
		mr->page_shift = QHCA_PAGE_SHIFT;
		mr->refs = 1;
		return mr;
	}
	mr = qhca_mr_find(in->e, key);
	if (kind != REF_LIVE || !mr || (kind_ok == REF_REGION && (mr->flags & QHCA_MR_WINDOW)) ||
	    (pd && mr->pd != pd)) {
		mig_fail(in, "a message holds a region that is not there");
		return NULL;
	}
	/* A valid region must still grant what the message was checked for (key_check()). */
	if (range && !mr->invalid &&
	    ((mr->access & range->access) != range->access || range->va < mr->iova ||
	     range->va + range->len < range->va || range->va - mr->iova > mr->length ||
	     range->len > mr->length - (range->va - mr->iova))) {
		mig_fail(in, "a message outside the region it holds");
		return NULL;
	}
	return qhca_mr_get(mr);
}

static void mr_put(struct mig_out *o, struct qhca_mr *mr)
{
	put32(o, mr->handle);
	put32(o, mr->key);
	put32(o, mr->pd);
	put32(o, mr->access);
	put32(o, mr->flags);
	put32(o, mr->page_offset);
	put8(o, mr->page_shift);
	put32(o, mr->max_pages);
	put64(o, mr->iova);
	put64(o, mr->length);
	put8(o, mr->invalid);
	put32(o, mr->qpn);
	put64(o, mr->qp_serial);
	pages_put(o, mr->pages, mr->npages);
}

/* The regions, then the windows (bound to regions, which must be there first). */
static void mrs_put(struct mig_out *o, struct qhca_engine *e)
{
	uint32_t i, pass;

	put32(o, SEC_MR);
	put32(o, e->mr_table.count);
	for (pass = 0; pass < 2; pass++) {
		for (i = 0; i < e->cfg.max_mr; i++) {
			struct qhca_mr *mr = e->mr[i];

			if (!mr || !(mr->flags & QHCA_MR_WINDOW) != !pass)
				continue;
			mr_put(o, mr);
			if (pass)
				mig_ref_put(o, e, mr->parent);
		}
	}
}

static bool mr_get(struct mig_in *in, bool window)
{
	struct qhca_engine *e = in->e;
	uint64_t max_size = (uint64_t)e->cfg.max_mr_size_mb << 20;
	struct qhca_mr *mr;
	int64_t slot, pd;
	uint32_t room;
	bool free_fr;

	mr = qhca_host_zalloc(e, 1, sizeof(*mr));
	CHECK(in, mr, "past the host memory budget");
	mr->handle = get32(in);
	mr->key = get32(in);
	mr->pd = get32(in);
	mr->access = get32(in);
	mr->flags = get32(in);
	mr->page_offset = get32(in);
	mr->page_shift = get8(in);
	mr->max_pages = get32(in);
	mr->iova = get64(in);
	mr->length = get64(in);
	mr->invalid = getbool(in);
	mr->qpn = get32(in);
	mr->qp_serial = get64(in);
	slot = mig_live(&e->mr_table, mr->handle);
	pd = mig_live(&e->pd, mr->pd);
	if (in->why || slot < 0 || e->mr[slot] ||
	    QHCA_FIELD_GET(QHCA_MR_KEY_INDEX_MASK, mr->key) != slot + 1 || pd < 0) {
		qhca_host_free(mr);
		return mig_fail(in, "a region out of its slot");
	}
	e->mr[slot] = mr;	/* freed with the engine from here on */
	qhca_obj_hold(&e->pd, mr->pd);
	CHECK(in, !(mr->flags & (mr->flags - 1)) && !(mr->access & ~QHCA_ACCESS_MR_ALL) &&
		  !(mr->flags & ~(QHCA_MR_PHYS | QHCA_MR_FAST_REG | QHCA_MR_WINDOW)) &&
		  !(mr->flags & QHCA_MR_WINDOW) == !window, "a region of a bad kind");
	CHECK(in, mr->qp_serial <= e->qp_serial, "a window bound by a QP of the future");
	room = 0;
	if (mr->flags & QHCA_MR_PHYS) {
		CHECK(in, e->pd.owner[pd] == QHCA_HANDLE_KERNEL && !mr->iova && !mr->page_offset &&
			  mr->length == UINT64_MAX && !mr->max_pages && !mr->invalid &&
			  mr->page_shift == QHCA_PAGE_SHIFT, "a bad physical region");
	} else if (mr->flags & QHCA_MR_FAST_REG) {
		CHECK(in, e->pd.owner[pd] == QHCA_HANDLE_KERNEL && mr->max_pages &&
			  mr->max_pages <= QHCA_MAX_FAST_REG_PAGES &&
			  mr->page_shift >= QHCA_FAST_REG_MIN_SHIFT &&
			  mr->page_shift <= QHCA_FAST_REG_MAX_SHIFT, "a bad fast-register region");
		room = mr->max_pages;
	} else if (!window) {
		CHECK(in, !mr->max_pages && !mr->invalid && mr->page_shift == QHCA_PAGE_SHIFT &&
			  mr->page_offset < QHCA_PAGE_SIZE, "a bad region");
		room = (uint32_t)((mr->page_offset + (mr->length < max_size ? mr->length : max_size) +
				   QHCA_PAGE_SIZE - 1) >> QHCA_PAGE_SHIFT);
	} else {
		CHECK(in, !mr->max_pages && mr->page_shift == QHCA_PAGE_SHIFT, "a bad window");
	}
	if (!(mr->flags & QHCA_MR_PHYS) && !mr->invalid) {
		/* What a registration (REG_MR, MR_CREATE or a bind) checks. */
		/* MR_CREATE needs bytes; a REG_MR or a bind may make a region of none */
		/* a window may span what its region does (a DMA region: all memory) */
		CHECK(in, (window || mr->length <= max_size) && mr->iova + mr->length >= mr->iova &&
			  (window || (mr->flags & QHCA_MR_FAST_REG) || mr->length),
		      "a region of a bad length");
		/* a window's remote rights rest on its region's local write (BIND_MW) */
		CHECK(in, window ||
			  !(mr->access & (QHCA_ACCESS_REMOTE_WRITE | QHCA_ACCESS_REMOTE_ATOMIC)) ||
			  (mr->access & QHCA_ACCESS_LOCAL_WRITE), "a region of bad access rights");
		CHECK(in, !(mr->page_offset >> mr->page_shift), "a bad page offset");
	}
	/* A free fast-register region's list is what its last REG_MR left, refused or not: it
	 * is never used before the next REG_MR writes it. */
	free_fr = (mr->flags & QHCA_MR_FAST_REG) && mr->invalid;
	mr->pages = pages_get(in, &mr->npages, window || (mr->flags & QHCA_MR_PHYS) || free_fr ?
			      0 : 1, room, room, free_fr ? 0 : mr->page_shift);
	if (in->why)
		return false;
	if (!window && !(mr->flags & QHCA_MR_PHYS) && !mr->invalid)
		CHECK(in, (uint64_t)mr->page_offset + mr->length <=
			  (uint64_t)mr->npages << mr->page_shift, "a region past its pages");
	if (window) {
		struct mig_range bound = { mr->iova, mr->length, QHCA_ACCESS_MW_BIND };
		struct qhca_mr *parent;
		bool none;

		parent = mig_ref_get(in, &none, mr->pd, REF_REGION, &bound);
		if (in->why)
			return false;
		/* held from here on: freed with the window if what follows fails */
		mr->parent = parent;
		if (parent)
			parent->windows++;
		CHECK(in, none == mr->invalid, "a window bound to nothing, or free but bound");
		CHECK(in, !parent || (!parent->dead && !parent->invalid &&
				      (parent->access & QHCA_ACCESS_MW_BIND)),
		      "a window bound to a region it cannot be");
	}
	return true;
}

static bool mrs_get(struct mig_in *in)
{
	uint32_t n, i;

	expect_section(in, SEC_MR);
	n = get32(in);
	CHECK(in, n == in->e->mr_table.count, "regions missing or more than the table has");
	for (i = 0; i < n && !in->why; i++) {
		bool window = false;
		uint32_t flags;

		/* Peek at the kind: flags are the fifth word of a record. */
		CHECK(in, in->len - in->off >= 20, "truncated");
		memcpy(&flags, in->p + in->off + 16, 4);
		window = flags & QHCA_MR_WINDOW;
		mr_get(in, window);
	}
	return !in->why;
}

/* ---------------------------------------------------------------- CQs and SRQs */
static void cqs_put(struct mig_out *o, struct qhca_engine *e)
{
	uint32_t i;

	put32(o, SEC_CQ);
	put32(o, e->cq_table.count);
	for (i = 0; i < e->cfg.max_cq; i++) {
		const struct qhca_cq *cq = e->cq[i];

		if (!cq)
			continue;
		put32(o, cq->handle);
		put32(o, cq->eq);
		put32(o, cq->log2);
		put32(o, cq->pi);
		put8(o, cq->armed);
		put8(o, cq->armed_solicited);
		put8(o, cq->overflowed);
		pages_put(o, cq->pages, cq->npages);
	}
}

static bool cqs_get(struct mig_in *in)
{
	struct qhca_engine *e = in->e;
	uint32_t n, i;

	expect_section(in, SEC_CQ);
	n = get32(in);
	CHECK(in, n == e->cq_table.count, "CQs missing or more than the table has");
	for (i = 0; i < n && !in->why; i++) {
		struct qhca_cq *cq = qhca_host_zalloc(e, 1, sizeof(*cq));
		uint64_t need;
		int64_t slot;

		CHECK(in, cq, "past the host memory budget");
		cq->handle = get32(in);
		slot = mig_live(&e->cq_table, cq->handle);
		if (slot < 0 || e->cq[slot]) {
			qhca_host_free(cq);
			return mig_fail(in, "a CQ out of its slot");
		}
		e->cq[slot] = cq;
		cq->uctx = e->cq_table.owner[slot];
		cq->eq = get32(in);
		cq->log2 = get32(in);
		cq->pi = get32(in);
		cq->armed = getbool(in);
		cq->armed_solicited = getbool(in);
		cq->overflowed = getbool(in);
		CHECK(in, !cq->uctx || mig_live(&e->uctx, cq->uctx) >= 0, "a CQ of no user context");
		qhca_obj_hold(&e->uctx, cq->uctx);
		/* what CREATE_CQ and RESIZE_CQ check (its EQ may be gone since: no events) */
		CHECK(in, cq->log2 >= 1 && cq->log2 <= 22 && (1u << cq->log2) <= e->cfg.max_cqe * 2u,
		      "a CQ of a bad size");
		need = ((uint64_t)sizeof(struct qhca_cqe) << cq->log2) +
		       sizeof(struct qhca_cq_dbrec);
		need = (need + QHCA_PAGE_SIZE - 1) >> QHCA_PAGE_SHIFT;
		cq->pages = pages_get(in, &cq->npages, (uint32_t)need, (uint32_t)need,
				      (uint32_t)need, QHCA_PAGE_SHIFT);
	}
	return !in->why;
}

static void srqs_put(struct mig_out *o, struct qhca_engine *e)
{
	uint32_t i;

	put32(o, SEC_SRQ);
	put32(o, e->srq_table.count);
	for (i = 0; i < e->cfg.max_srq; i++) {
		const struct qhca_srq *srq = e->srq[i];

		if (!srq)
			continue;
		put32(o, srq->handle);
		put32(o, srq->pd);
		put32(o, srq->limit);
		put32(o, srq->xrcd);
		put32(o, srq->cq ? srq->cq->handle : 0);
		mig_wq_put(o, &srq->wq);
	}
}

static bool srqs_get(struct mig_in *in)
{
	struct qhca_engine *e = in->e;
	uint32_t n, i;

	expect_section(in, SEC_SRQ);
	n = get32(in);
	CHECK(in, n == e->srq_table.count, "SRQs missing or more than the table has");
	for (i = 0; i < n && !in->why; i++) {
		struct qhca_srq *srq = qhca_host_zalloc(e, 1, sizeof(*srq));
		uint32_t cqn;
		int64_t slot;

		CHECK(in, srq, "past the host memory budget");
		qhca_list_init(&srq->xrc_msgs);
		srq->handle = get32(in);
		slot = mig_live(&e->srq_table, srq->handle);
		if (slot < 0 || e->srq[slot]) {
			qhca_host_free(srq);
			return mig_fail(in, "an SRQ out of its slot");
		}
		e->srq[slot] = srq;
		srq->uctx = e->srq_table.owner[slot];
		srq->pd = get32(in);
		srq->limit = get32(in);
		srq->xrcd = get32(in);
		cqn = get32(in);
		/* what CREATE_SRQ checks */
		CHECK(in, mig_live(&e->pd, srq->pd) >= 0 &&
			  (!srq->uctx || mig_live(&e->uctx, srq->uctx) >= 0) &&
			  (!srq->xrcd || mig_live(&e->xrcd, srq->xrcd) >= 0), "an SRQ of a bad owner");
		qhca_obj_hold(&e->pd, srq->pd);
		qhca_obj_hold(&e->uctx, srq->uctx);
		qhca_obj_hold(&e->xrcd, srq->xrcd);
		if (cqn) {
			srq->cq = qhca_cq_find(e, cqn);
			CHECK(in, srq->cq && srq->xrcd && srq->cq->uctx == srq->uctx,
			      "an SRQ with a bad CQ");
			srq->cq->refs++;
		}
		CHECK(in, !srq->xrcd || srq->cq, "an XRC SRQ without a CQ");
		if (!mig_wq_get(in, &srq->wq, 4, false))
			return false;
		CHECK(in, srq->limit <= (1u << srq->wq.log2), "an SRQ limit past its size");
	}
	return !in->why;
}

/* ---------------------------------------------------------------- the rest */
static void mcast_put(struct mig_out *o, struct qhca_engine *e)
{
	uint32_t i, n = 0;

	put32(o, SEC_MCAST);
	for (i = 0; i < e->nmcast; i++)
		n += e->mcast[i].nqps != 0;
	put32(o, n);
	for (i = 0; i < e->nmcast; i++) {
		const struct qhca_mcast_group *g = &e->mcast[i];

		if (!g->nqps)
			continue;
		mig_put(o, g->gid, 16);
		put16(o, g->mlid);
		put32(o, g->nqps);
		mig_put(o, g->qpn, g->nqps * sizeof(g->qpn[0]));
	}
}

static bool mcast_get(struct mig_in *in)
{
	struct qhca_engine *e = in->e;
	uint32_t n, i, j;

	expect_section(in, SEC_MCAST);
	n = get32(in);
	CHECK(in, n <= QHCA_MCAST_GROUPS, "too many multicast groups");
	if (!n)
		return !in->why;
	e->mcast = calloc(n, sizeof(*e->mcast));
	CHECK(in, e->mcast, "out of memory");
	e->nmcast = n;
	for (i = 0; i < n && !in->why; i++) {
		struct qhca_mcast_group *g = &e->mcast[i];
		uint32_t nqps;

		mig_get(in, g->gid, 16);
		g->mlid = get16(in);
		nqps = get32(in);
		/* what MCAST_ATTACH checks (sma.c) */
		CHECK(in, nqps && nqps <= QHCA_MCAST_QPS, "a multicast group of a bad size");
		CHECK(in, g->gid[0] == 0xff &&
			  (e->cfg.link != QHCA_LINK_IB || ib_lid_mcast(g->mlid)),
		      "a multicast group of a unicast address");
		for (j = 0; j < nqps; j++) {
			struct qhca_qp *qp;
			uint32_t k;

			g->qpn[j] = get32(in);
			qp = qhca_qp_find(e, g->qpn[j]);
			CHECK(in, !in->why && qp && qp->type == QHCA_QPT_UD, "a group of a gone QP");
			for (k = 0; k < j; k++)
				CHECK(in, g->qpn[k] != g->qpn[j], "a QP twice in a group");
		}
		g->nqps = nqps;
		for (j = 0; j < i; j++)
			CHECK(in, memcmp(e->mcast[j].gid, g->gid, 16), "a multicast group twice");
	}
	return !in->why;
}

static void loop_put(struct mig_out *o, struct qhca_engine *e)
{
	uint32_t i;

	put32(o, SEC_LOOP);
	put8(o, e->loop_deferred);
	put8(o, e->loop_blocked);
	put32(o, e->loop_count);
	for (i = 0; i < e->loop_count; i++) {
		uint32_t s = (e->loop_head + i) % LOOP_QUEUE;

		put32(o, (uint32_t)e->loop_len[s]);
		mig_put(o, e->loop_q[s], e->loop_len[s]);
	}
}

static bool loop_get(struct mig_in *in)
{
	struct qhca_engine *e = in->e;
	uint32_t i, n;

	expect_section(in, SEC_LOOP);
	e->loop_deferred = getbool(in);
	e->loop_blocked = getbool(in);
	n = get32(in);
	CHECK(in, n <= LOOP_QUEUE, "too many frames for loopback");
	/* an iWARP port's are its connections' segments, and those are not in the stream */
	CHECK(in, !n || e->cfg.link != QHCA_LINK_IWARP,
	      "frames for loopback on an iWARP port (its connections are not in the stream)");
	for (i = 0; i < n && !in->why; i++) {
		uint32_t len = get32(in);

		CHECK(in, len <= LOOP_FRAME, "a frame for loopback too long");
		mig_get(in, e->loop_q[i], len);
		e->loop_len[i] = len;
	}
	e->loop_head = 0;
	e->loop_count = n;
	return !in->why;
}

/* Counters are all 64-bit: their number goes first; a stream with fewer (of a version
 * before counters were added at the end) leaves the rest at 0. */
#define NCOUNTERS (sizeof(struct qhca_counters) / sizeof(uint64_t))

static void counters_put(struct mig_out *o, struct qhca_engine *e)
{
	put32(o, SEC_COUNTERS);
	put32(o, NCOUNTERS);
	mig_put(o, &e->cnt, sizeof(e->cnt));
}

static bool counters_get(struct mig_in *in)
{
	uint32_t n;

	expect_section(in, SEC_COUNTERS);
	n = get32(in);
	CHECK(in, n <= NCOUNTERS, "more counters than this version has");
	mig_get(in, &in->e->cnt, n * sizeof(uint64_t));
	/* counted by the InfiniBand port alone (ib_dispatch, qhca_mad_ifc) */
	CHECK(in, in->e->cfg.link == QHCA_LINK_IB ||
		  (!in->e->cnt.ib_rx_bad_lid && !in->e->cnt.smps),
	      "InfiniBand counters on an Ethernet port");
	return !in->why;
}

/* ---------------------------------------------------------------- public */
int qhca_engine_save(struct qhca_engine *e, uint8_t **buf, size_t *len)
{
	uint64_t now = e->ops->now_ns(e->opaque);
	struct mig_out o = { 0 };

	mig_put(&o, MIG_MAGIC, 8);
	put32(&o, MIG_VERSION);
	put32(&o, QHCA_ABI_VERSION);
	config_put(&o, &e->cfg);
	put32(&o, SEC_TABLES);
	table_put(&o, &e->uctx);
	table_put(&o, &e->pd);
	table_put(&o, &e->xrcd);
	table_put(&o, &e->eq_table);
	table_put(&o, &e->mr_table);
	table_put(&o, &e->cq_table);
	table_put(&o, &e->srq_table);
	table_put(&o, &e->qp_table);
	device_put(&o, e, now);
	mrs_put(&o, e);
	cqs_put(&o, e);
	srqs_put(&o, e);
	mig_qps_put(&o, e, now);
	mcast_put(&o, e);
	loop_put(&o, e);
	counters_put(&o, e);
	put32(&o, SEC_END);
	if (o.oom) {
		free(o.buf);
		return -1;
	}
	*buf = o.buf;
	*len = o.len;
	qhca_step(e, "migrate what=saved bytes=%zu qps=%u", o.len, e->qp_table.count);
	qhca_log(e, QHCA_LOG_EVENT, "state saved: %zu bytes, %u QPs", o.len, e->qp_table.count);
	return 0;
}

/*
 * The tables come before everything: an object's table slot gives its handle (and EQs
 * their place), and the tables of PDs and user contexts hold nothing else.
 */
static bool load_all(struct mig_in *in)
{
	struct qhca_engine *e = in->e;
	uint32_t i;
	char magic[8];

	mig_get(in, magic, 8);
	CHECK(in, !memcmp(magic, MIG_MAGIC, 8), "not a qhca device state");
	CHECK(in, get32(in) == MIG_VERSION, "a device state of another format version");
	CHECK(in, get32(in) == QHCA_ABI_VERSION, "a device state of another device interface");
	if (!config_get(in, &e->cfg))
		return false;
	expect_section(in, SEC_TABLES);
	if (!table_get(in, &e->uctx) || !table_get(in, &e->pd) || !table_get(in, &e->xrcd) ||
	    !table_get(in, &e->eq_table) || !table_get(in, &e->mr_table) ||
	    !table_get(in, &e->cq_table) || !table_get(in, &e->srq_table) ||
	    !table_get(in, &e->qp_table))
		return false;
	if (!device_get(in))
		return false;
	/* Owners: a PD's is a user context or the kernel; XRC domains, EQs and user contexts
	 * belong to the kernel. */
	for (i = 0; i < e->pd.capacity; i++)
		if ((e->pd.gen[i] & OBJ_USED) && e->pd.owner[i]) {
			CHECK(in, mig_live(&e->uctx, e->pd.owner[i]) >= 0, "a PD of no user context");
			qhca_obj_hold(&e->uctx, e->pd.owner[i]);
		}
	for (i = 0; i < e->uctx.capacity; i++)
		CHECK(in, !e->uctx.owner[i], "a user context with an owner");
	for (i = 0; i < e->xrcd.capacity; i++)
		CHECK(in, !e->xrcd.owner[i], "an XRC domain with an owner");
	for (i = 0; i < e->eq_table.capacity; i++)
		CHECK(in, !e->eq_table.owner[i], "an EQ with an owner");
	if (!mrs_get(in) || !cqs_get(in) || !srqs_get(in) || !mig_qps_get(in) || !mcast_get(in) ||
	    !loop_get(in) || !counters_get(in))
		return false;
	expect_section(in, SEC_END);
	CHECK(in, in->off == in->len, "bytes after the end");
	return !in->why;
}

int qhca_engine_load_into(struct qhca_engine *e, const uint8_t *buf, size_t len, char *why,
			  size_t why_len)
{
	struct mig_in in = { .p = buf, .len = len, .e = e };

	in.now = e->ops->now_ns(e->opaque);
	if (!load_all(&in)) {
		snprintf(why, why_len, "%s (at byte %zu of %zu)", in.why, in.off, len);
		qhca_log(e, QHCA_LOG_GUEST, "device state refused: %s", why);
		return -1;
	}
	e->timer_armed = UINT64_MAX;	/* the platform's timer is new: armed on resume */
	qhca_log(e, QHCA_LOG_EVENT, "state loaded: %zu bytes, %u QPs", len, e->qp_table.count);
	return 0;
}

struct qhca_engine *qhca_engine_load(const struct qhca_engine_config *cfg,
				     const struct qhca_engine_ops *ops, void *opaque,
				     const uint8_t *buf, size_t len, char *why, size_t why_len)
{
	struct qhca_engine *e = malloc(sizeof(*e));

	if (!e || qhca_engine_init(e, cfg, ops, opaque)) {
		free(e);
		snprintf(why, why_len, "out of memory");
		return NULL;
	}
	if (qhca_engine_load_into(e, buf, len, why, why_len)) {
		qhca_engine_free(e);
		return NULL;
	}
	return e;
}

void qhca_engine_resume(struct qhca_engine *e)
{
	qhca_step(e, "migrate what=resumed qps=%u timers=%u waiting=%u", e->qp_table.count,
		  e->timer_n, !qhca_list_empty(&e->tx_waiters));
	e->timer_armed = UINT64_MAX - 1;	/* differs from anything: arm it now */
	qhca_req_budget_begin(e);	/* the senders and the admin queue: one run */
	qhca_engine_tx_resume(e);
	qhca_admin_resume(e);
	qhca_req_budget_end(e);
	qhca_timer_update(e);
}

size_t qhca_engine_state_max(const struct qhca_engine_config *cfg)
{
	uint64_t budget = (uint64_t)(cfg->host_mem_mb ? cfg->host_mem_mb : QHCA_HOST_MEM_MB) << 20;
	uint64_t slots = (uint64_t)cfg->db_pages + 2ull * cfg->max_pd + QHCA_MAX_EQ +
			 cfg->max_mr + cfg->max_cq + cfg->max_srq + cfg->max_qp;
	uint64_t max = (1ull << 20) + slots * 32 + 2 * budget +
		       (uint64_t)LOOP_QUEUE * (LOOP_FRAME + 4) +
		       (uint64_t)QHCA_MCAST_GROUPS * (24 + 4 * QHCA_MCAST_QPS);

	return max > SIZE_MAX ? SIZE_MAX : (size_t)max;
}
