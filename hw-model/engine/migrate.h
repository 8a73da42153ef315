/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * qhca engine: what migrate.c (the stream, the device, regions, CQs, SRQs) and
 * migrate_qp.c (QPs and their messages in flight) share: the stream's writer and reader,
 * its sections, and the checks every loaded value goes through.
 */
#ifndef QHCA_MIGRATE_H
#define QHCA_MIGRATE_H

#include "engine_internal.h"

#define MIG_MAGIC	"QHCASTAT"
#define MIG_VERSION	2u	/* 2: a RoCE address vector's ib_flags may say RoCE v1 */

enum mig_section {
	SEC_DEVICE = 0x51480001,
	SEC_TABLES,
	SEC_MR,
	SEC_CQ,
	SEC_SRQ,
	SEC_QP,
	SEC_MCAST,
	SEC_LOOP,
	SEC_COUNTERS,
	SEC_END,
};

/* An MR reference: none, the region its key names now, or a region deregistered or
 * replaced while the message held it (unusable: a message through it fails). */
enum { REF_NONE, REF_LIVE, REF_DEAD };

/* ---------------------------------------------------------------- writer */
struct mig_out {
	uint8_t *buf;
	size_t len, cap;
	bool oom;
};

/* Append @n bytes (the buffer grows; out of memory is sticky: o->oom). */
void mig_put(struct mig_out *o, const void *p, size_t n);

/* The host is little-endian (qhca_engine.h): integers go as they are in memory. */
#define PUT(o, type, v) do { type v_ = (type)(v); mig_put((o), &v_, sizeof(v_)); } while (0)
#define put8(o, v)	PUT(o, uint8_t, v)
#define put16(o, v)	PUT(o, uint16_t, v)
#define put32(o, v)	PUT(o, uint32_t, v)
#define put64(o, v)	PUT(o, uint64_t, v)

/* ---------------------------------------------------------------- reader */
struct mig_in {
	const uint8_t *p;
	size_t len, off;
	const char *why;	/* the first failure; sticky */
	struct qhca_engine *e;	/* the engine being built */
	uint64_t now;
};

/* Note the first failure (@why) and return false. */
bool mig_fail(struct mig_in *in, const char *why);
/* Take @n bytes (zeros, and "truncated", past the end or after a failure). */
bool mig_get(struct mig_in *in, void *p, size_t n);

#define GET(name, type)							\
	static inline type name(struct mig_in *in)				\
	{								\
		type v;							\
		mig_get(in, &v, sizeof(v));				\
		return v;						\
	}
GET(get8, uint8_t)
GET(get16, uint16_t)
GET(get32, uint32_t)
GET(get64, uint64_t)

static inline bool getbool(struct mig_in *in)
{
	uint8_t v = get8(in);

	if (v > 1)
		mig_fail(in, "a flag that is neither 0 nor 1");
	return v;
}

/* Fail with @why unless @cond holds. */
#define CHECK(in, cond, why) do { if (!(cond)) return mig_fail((in), (why)); } while (0)

static inline bool expect_section(struct mig_in *in, uint32_t tag)
{
	CHECK(in, get32(in) == tag, "sections out of order");
	return !in->why;
}

/* Time remaining until @deadline (UINT64_MAX: none), and back on the loading side. */
static inline uint64_t remaining(uint64_t deadline, uint64_t now)
{
	return deadline == UINT64_MAX ? UINT64_MAX : deadline > now ? deadline - now : 0;
}

static inline uint64_t deadline_of(uint64_t rem, uint64_t now)
{
	return rem == UINT64_MAX ? UINT64_MAX : rem > UINT64_MAX - 1 - now ? UINT64_MAX - 1 :
	       now + rem;
}

static inline bool is_pow2(uint32_t v)
{
	return v && !(v & (v - 1));
}

/* A path MTU a QP or message may have: a connected QP starts with 1024 whatever the
 * port's (qp.c), and the engine's packet buffers take 4096. */
static inline bool mtu_ok(uint32_t mtu)
{
	return mtu >= 256 && mtu <= 4096 && is_pow2(mtu);
}

/* What a reference must be: a region (an lkey), a window's region, or an rkey's target. */
enum { REF_REGION, REF_ANY };

/* What a message moves bytes through: [va, va + len) with the access rights it needs. */
struct mig_range {
	uint64_t va, len;
	uint32_t access;
};

/* The slot of live handle @h of @t, or -1. */
static inline int64_t mig_live(const struct qhca_obj_table *t, uint32_t h)
{
	return qhca_obj_lookup(t, h);
}

/* migrate_qp.c */
/* Every QP of the engine, and back (a section of its own). */
void mig_qps_put(struct mig_out *o, struct qhca_engine *e, uint64_t now);
bool mig_qps_get(struct mig_in *in);
/* migrate.c */
/* A work queue's geometry and pages; a reference to a region (REF_*). */
void mig_wq_put(struct mig_out *o, const struct qhca_wq *wq);
bool mig_wq_get(struct mig_in *in, struct qhca_wq *wq, uint32_t min_stride_log2,
		   bool optional);
void mig_ref_put(struct mig_out *o, struct qhca_engine *e, const struct qhca_mr *mr);
struct qhca_mr *mig_ref_get(struct mig_in *in, bool *none, uint32_t pd, int kind_ok,
			       const struct mig_range *range);

#endif /* QHCA_MIGRATE_H */
