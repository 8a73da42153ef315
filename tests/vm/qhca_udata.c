// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * qhca-udata: the driver's checks of the driver-specific udata of abi/qhca_uabi.h, which
 * user space writes and the provider normally fills in. It sends alloc_ucontext (on fresh
 * uverbs fds), create_cq, create_qp and create_srq through the uverbs write interface with
 * hostile udata. Refused with EINVAL: ring geometry with log2 entry counts and WQE strides
 * of 16 to 0xffffffff (a shift by them is undefined), values below what the core
 * attributes need, reserved fields set, udata too short; and a region whose iova range
 * wraps. Refused with EOPNOTSUPP (the rules for growth): a comp_mask bit the driver does
 * not know, and nonzero bytes past the structure the driver knows. Each group has a
 * well-formed control that must succeed (and is destroyed), so that a failure means the
 * driver refused the udata, not that the command was malformed.
 *
 *   qhca-udata [DEVICE]        prints "ok"/"not ok" lines, exits 0 when all pass
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rdma/ib_user_verbs.h>

#include "vm_verbs.h"
#include "../../abi/qhca_uabi.h"

#define RING_BYTES	(1u << 20)

static int failures;

static void report(int ok, const char *what, int err)
{
	printf("%s - %s%s%s\n", ok ? "ok" : "not ok", what, err ? ": " : "",
	       err ? strerror(err) : "");
	if (!ok)
		failures++;
}

/*
 * One legacy uverbs command: header, core request (starting with its response pointer),
 * then @drv_len bytes of driver udata; the response is @resp_len bytes, the driver's part
 * included. Returns 0 or the errno of write().
 */
static int uverbs_write(int fd, uint32_t command, void *core, size_t core_len,
			const void *drv, size_t drv_len, void *resp, size_t resp_len)
{
	unsigned char buf[512];
	struct ib_uverbs_cmd_hdr hdr = {
		.command = command,
		.in_words = (sizeof(hdr) + core_len + drv_len) / 4,
		.out_words = resp_len / 4,
	};
	uint64_t response = (uintptr_t)resp;
	size_t len = sizeof(hdr) + core_len + drv_len;

	memcpy(core, &response, sizeof(response));	/* every request starts with it */
	memcpy(buf, &hdr, sizeof(hdr));
	memcpy(buf + sizeof(hdr), core, core_len);
	if (drv_len)
		memcpy(buf + sizeof(hdr) + core_len, drv, drv_len);
	memset(resp, 0, resp_len);
	return write(fd, buf, len) == (ssize_t)len ? 0 : errno;
}

/* The comp_mask bits no driver of this ABI knows (none is defined yet), low and high. */
static const uint32_t unknown_comp_mask[] = { 1u << 0, 1u << 31 };

/* ---------------------------------------------------------------- user context */
struct uctx_resp {
	struct ib_uverbs_get_context_resp core;
	struct qhca_alloc_ucontext_resp drv;
};

/*
 * alloc_ucontext on a fresh fd of the device (a context per fd), closed again with what
 * it made. @drv_len bytes of @drv are the driver udata.
 */
static int alloc_ucontext(const char *uverbs, const void *drv, size_t drv_len)
{
	struct ib_uverbs_get_context core = {};
	struct uctx_resp resp;
	int fd, err;

	fd = open(uverbs, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return errno;
	err = uverbs_write(fd, IB_USER_VERBS_CMD_GET_CONTEXT, &core, sizeof(core), drv, drv_len,
			   &resp, sizeof(resp));
	if (!err && resp.drv.db_page_size != 4096)
		err = EPROTO;	/* the response is not where this ABI puts it */
	if (!err || err == EPROTO)
		close(resp.core.async_fd);
	close(fd);
	return err;
}

static void uctx_tests(const char *uverbs)
{
	struct qhca_alloc_ucontext_cmd good = {}, c;
	struct {
		struct qhca_alloc_ucontext_cmd cmd;
		uint64_t next;		/* a field of a later ABI */
	} longer = {};
	char what[128];
	unsigned i;
	int err;

	err = alloc_ucontext(uverbs, &good, sizeof(good));
	report(!err, "alloc_ucontext: well-formed udata (control)", err);
	for (i = 0; i < sizeof(unknown_comp_mask) / sizeof(unknown_comp_mask[0]); i++) {
		c = good;
		c.comp_mask = unknown_comp_mask[i];
		err = alloc_ucontext(uverbs, &c, sizeof(c));
		snprintf(what, sizeof(what),
			 "alloc_ucontext: unknown comp_mask 0x%x refused with EOPNOTSUPP",
			 unknown_comp_mask[i]);
		report(err == EOPNOTSUPP, what, err);
	}
	c = good;
	c.rsvd = 1;
	err = alloc_ucontext(uverbs, &c, sizeof(c));
	report(err == EINVAL, "alloc_ucontext: rsvd set refused with EINVAL", err);
	err = alloc_ucontext(uverbs, &good, 4);
	report(err == EINVAL,
	       "alloc_ucontext: udata shorter than qhca_alloc_ucontext_cmd refused with EINVAL",
	       err);
	err = alloc_ucontext(uverbs, NULL, 0);
	report(err == EINVAL, "alloc_ucontext: no udata refused with EINVAL", err);
	err = alloc_ucontext(uverbs, &longer, sizeof(longer));
	report(!err, "alloc_ucontext: longer udata, zero past the structure (control)", err);
	longer.next = 1;
	err = alloc_ucontext(uverbs, &longer, sizeof(longer));
	report(err == EOPNOTSUPP,
	       "alloc_ucontext: nonzero udata past the structure refused with EOPNOTSUPP", err);
}

/* ---------------------------------------------------------------- CQ */
struct cq_resp {
	struct ib_uverbs_create_cq_resp core;
	struct qhca_create_cq_resp drv;
};

static int create_cq(int fd, const void *drv, size_t drv_len, uint32_t *handle)
{
	struct ib_uverbs_create_cq core = { .cqe = 1, .comp_channel = -1 };
	struct cq_resp resp;
	int err;

	err = uverbs_write(fd, IB_USER_VERBS_CMD_CREATE_CQ, &core, sizeof(core), drv, drv_len,
			   &resp, sizeof(resp));
	*handle = resp.core.cq_handle;
	return err;
}

static int destroy_cq(int fd, uint32_t handle)
{
	struct ib_uverbs_destroy_cq core = { .cq_handle = handle };
	struct ib_uverbs_destroy_cq_resp resp;

	return uverbs_write(fd, IB_USER_VERBS_CMD_DESTROY_CQ, &core, sizeof(core), NULL, 0,
			    &resp, sizeof(resp));
}

static void cq_tests(int fd, void *ring)
{
	static const uint32_t bad_log2[] = { 0, 23, 31, 32, 33, 64, 255, 0x80000000u,
					     0xffffffffu };
	struct qhca_create_cq_cmd good = { .buf_addr = (uintptr_t)ring, .log2_entries = 1 };
	struct qhca_create_cq_cmd c;
	struct {
		struct qhca_create_cq_cmd cmd;
		uint64_t next;		/* a field of a later ABI */
	} longer = { .cmd = good };
	char what[128];
	uint32_t h;
	unsigned i;
	int err;

	err = create_cq(fd, &good, sizeof(good), &h);
	report(!err, "create_cq: well-formed udata (control)", err);
	if (!err) {
		err = destroy_cq(fd, h);
		report(!err, "destroy_cq (control)", err);
	}
	for (i = 0; i < sizeof(bad_log2) / sizeof(bad_log2[0]); i++) {
		c = good;
		c.log2_entries = bad_log2[i];
		err = create_cq(fd, &c, sizeof(c), &h);
		snprintf(what, sizeof(what), "create_cq: log2_entries %u refused with EINVAL",
			 bad_log2[i]);
		report(err == EINVAL, what, err);
	}
	for (i = 0; i < sizeof(unknown_comp_mask) / sizeof(unknown_comp_mask[0]); i++) {
		c = good;
		c.comp_mask = unknown_comp_mask[i];
		err = create_cq(fd, &c, sizeof(c), &h);
		snprintf(what, sizeof(what),
			 "create_cq: unknown comp_mask 0x%x refused with EOPNOTSUPP",
			 unknown_comp_mask[i]);
		report(err == EOPNOTSUPP, what, err);
	}
	err = create_cq(fd, &longer, sizeof(longer), &h);
	report(!err, "create_cq: longer udata, zero past the structure (control)", err);
	if (!err)
		destroy_cq(fd, h);
	longer.next = 1;
	err = create_cq(fd, &longer, sizeof(longer), &h);
	report(err == EOPNOTSUPP,
	       "create_cq: nonzero udata past the structure refused with EOPNOTSUPP", err);
	err = create_cq(fd, &good, 8, &h);
	report(err == EINVAL, "create_cq: udata shorter than qhca_create_cq_cmd refused with EINVAL",
	       err);
}

/* ---------------------------------------------------------------- QP */
struct qp_resp {
	struct ib_uverbs_create_qp_resp core;
	struct qhca_create_qp_resp drv;
};

static int create_qp(int fd, uint32_t pd, uint32_t cq, uint32_t srq,
		     const struct qhca_create_qp_cmd *drv, uint32_t *handle)
{
	struct ib_uverbs_create_qp core = {
		.pd_handle = pd, .send_cq_handle = cq, .recv_cq_handle = cq,
		.srq_handle = srq, .is_srq = srq != 0,
		.max_send_wr = 2, .max_recv_wr = srq ? 0 : 2,
		.max_send_sge = 1, .max_recv_sge = srq ? 0 : 1,
		.qp_type = IBV_QPT_RC,
	};
	struct qp_resp resp;
	int err;

	err = uverbs_write(fd, IB_USER_VERBS_CMD_CREATE_QP, &core, sizeof(core), drv,
			   sizeof(*drv), &resp, sizeof(resp));
	*handle = resp.core.qp_handle;
	return err;
}

static int destroy_qp(int fd, uint32_t handle)
{
	struct ib_uverbs_destroy_qp core = { .qp_handle = handle };
	struct ib_uverbs_destroy_qp_resp resp;

	return uverbs_write(fd, IB_USER_VERBS_CMD_DESTROY_QP, &core, sizeof(core), NULL, 0,
			    &resp, sizeof(resp));
}

enum qp_field { SQ_LOG2, RQ_LOG2, SQ_STRIDE, RQ_STRIDE };

static void qp_set(struct qhca_create_qp_cmd *c, enum qp_field f, uint8_t v)
{
	switch (f) {
	case SQ_LOG2:
		c->sq_log2 = v;
		break;
	case RQ_LOG2:
		c->rq_log2 = v;
		break;
	case SQ_STRIDE:
		c->sq_stride_log2 = v;
		break;
	case RQ_STRIDE:
		c->rq_stride_log2 = v;
		break;
	}
}

static void qp_tests(int fd, uint32_t pd, uint32_t cq, uint32_t srq, unsigned char *ring)
{
	static const char *const names[] = { "sq_log2", "rq_log2", "sq_stride_log2",
					     "rq_stride_log2" };
	static const uint8_t bad[] = { 16, 31, 32, 33, 64, 200, 255 };
	static const uint8_t bad_stride[] = { 13, 31, 32, 64, 255 };
	/* 2 WRs of 1 SGE each: 2^1 entries; strides 2^7 (64 + 16) and 2^5 (16 + 16). */
	struct qhca_create_qp_cmd good = {
		.sq_addr = (uintptr_t)ring, .rq_addr = (uintptr_t)(ring + RING_BYTES / 2),
		.sq_log2 = 1, .rq_log2 = 1, .sq_stride_log2 = 7, .rq_stride_log2 = 5,
	};
	struct qhca_create_qp_cmd c, with_srq = good;
	char what[128];
	enum qp_field f;
	uint32_t h;
	unsigned i;
	int err;

	err = create_qp(fd, pd, cq, 0, &good, &h);
	report(!err, "create_qp: well-formed udata (control)", err);
	if (!err) {
		err = destroy_qp(fd, h);
		report(!err, "destroy_qp (control)", err);
	}
	for (f = SQ_LOG2; f <= RQ_STRIDE; f++) {
		int stride = f == SQ_STRIDE || f == RQ_STRIDE;
		const uint8_t *v = stride ? bad_stride : bad;
		unsigned n = stride ? sizeof(bad_stride) : sizeof(bad);

		for (i = 0; i < n; i++) {
			c = good;
			qp_set(&c, f, v[i]);
			err = create_qp(fd, pd, cq, 0, &c, &h);
			snprintf(what, sizeof(what), "create_qp: %s %u refused with EINVAL",
				 names[f], v[i]);
			report(err == EINVAL, what, err);
		}
		/* below what the core attributes need */
		c = good;
		qp_set(&c, f, stride ? (f == SQ_STRIDE ? 6 : 4) : 0);
		err = create_qp(fd, pd, cq, 0, &c, &h);
		snprintf(what, sizeof(what), "create_qp: %s below the attributes' need refused with EINVAL",
			 names[f]);
		report(err == EINVAL, what, err);
	}
	for (i = 0; i < sizeof(unknown_comp_mask) / sizeof(unknown_comp_mask[0]); i++) {
		c = good;
		c.comp_mask = unknown_comp_mask[i];
		err = create_qp(fd, pd, cq, 0, &c, &h);
		snprintf(what, sizeof(what),
			 "create_qp: unknown comp_mask 0x%x refused with EOPNOTSUPP",
			 unknown_comp_mask[i]);
		report(err == EOPNOTSUPP, what, err);
	}

	/* With an SRQ the QP has no receive ring: its fields must be 0. */
	with_srq.rq_addr = 0;
	with_srq.rq_log2 = 0;
	with_srq.rq_stride_log2 = 0;
	err = create_qp(fd, pd, cq, srq, &with_srq, &h);
	report(!err, "create_qp with an SRQ: well-formed udata (control)", err);
	if (!err) {
		err = destroy_qp(fd, h);
		report(!err, "destroy_qp with an SRQ (control)", err);
	}
	for (f = RQ_LOG2; f <= RQ_STRIDE; f += RQ_STRIDE - RQ_LOG2) {
		c = with_srq;
		qp_set(&c, f, 255);
		err = create_qp(fd, pd, cq, srq, &c, &h);
		snprintf(what, sizeof(what), "create_qp with an SRQ: %s 255 refused with EINVAL",
			 names[f]);
		report(err == EINVAL, what, err);
	}
}

/* ---------------------------------------------------------------- SRQ */
struct srq_resp {
	struct ib_uverbs_create_srq_resp core;
	struct qhca_create_srq_resp drv;
};

static int create_srq(int fd, uint32_t pd, const struct qhca_create_srq_cmd *drv,
		      uint32_t *handle)
{
	struct ib_uverbs_create_srq core = { .pd_handle = pd, .max_wr = 2, .max_sge = 1 };
	struct srq_resp resp;
	int err;

	err = uverbs_write(fd, IB_USER_VERBS_CMD_CREATE_SRQ, &core, sizeof(core), drv,
			   sizeof(*drv), &resp, sizeof(resp));
	*handle = resp.core.srq_handle;
	return err;
}

static int destroy_srq(int fd, uint32_t handle)
{
	struct ib_uverbs_destroy_srq core = { .srq_handle = handle };
	struct ib_uverbs_destroy_srq_resp resp;

	return uverbs_write(fd, IB_USER_VERBS_CMD_DESTROY_SRQ, &core, sizeof(core), NULL, 0,
			    &resp, sizeof(resp));
}

static void srq_tests(int fd, uint32_t pd, void *ring)
{
	static const uint8_t bad_log2[] = { 0, 16, 31, 32, 33, 64, 255 };
	static const uint8_t bad_stride[] = { 4, 13, 31, 32, 64, 255 };
	struct qhca_create_srq_cmd good = { .buf_addr = (uintptr_t)ring, .log2 = 1,
					    .stride_log2 = 5 };
	struct qhca_create_srq_cmd c;
	char what[128];
	uint32_t h;
	unsigned i;
	int err;

	err = create_srq(fd, pd, &good, &h);
	report(!err, "create_srq: well-formed udata (control)", err);
	if (!err) {
		err = destroy_srq(fd, h);
		report(!err, "destroy_srq (control)", err);
	}
	for (i = 0; i < sizeof(bad_log2); i++) {
		c = good;
		c.log2 = bad_log2[i];
		err = create_srq(fd, pd, &c, &h);
		snprintf(what, sizeof(what), "create_srq: log2 %u refused with EINVAL", bad_log2[i]);
		report(err == EINVAL, what, err);
	}
	for (i = 0; i < sizeof(bad_stride); i++) {
		c = good;
		c.stride_log2 = bad_stride[i];
		err = create_srq(fd, pd, &c, &h);
		snprintf(what, sizeof(what), "create_srq: stride_log2 %u refused with EINVAL",
			 bad_stride[i]);
		report(err == EINVAL, what, err);
	}
	c = good;
	c.rsvd = 1;
	err = create_srq(fd, pd, &c, &h);
	report(err == EINVAL, "create_srq: rsvd set refused with EINVAL", err);
	for (i = 0; i < sizeof(unknown_comp_mask) / sizeof(unknown_comp_mask[0]); i++) {
		c = good;
		c.comp_mask = unknown_comp_mask[i];
		err = create_srq(fd, pd, &c, &h);
		snprintf(what, sizeof(what),
			 "create_srq: unknown comp_mask 0x%x refused with EOPNOTSUPP",
			 unknown_comp_mask[i]);
		report(err == EOPNOTSUPP, what, err);
	}
}

int main(int argc, char **argv)
{
	const char *name = argc > 1 ? argv[1] : "qhca_0";
	struct ibv_srq_init_attr sattr = { .attr = { .max_wr = 4, .max_sge = 1 } };
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_srq *srq;
	struct ibv_mr *mr;
	unsigned char *ring;
	char uverbs[128];

	ctx = vm_open(name);
	if (!ctx) {
		fprintf(stderr, "qhca-udata: cannot open %s\n", name);
		return 2;
	}
	pd = ibv_alloc_pd(ctx);
	cq = pd ? ibv_create_cq(ctx, 16, NULL, NULL, 0) : NULL;
	srq = cq ? ibv_create_srq(pd, &sattr) : NULL;
	ring = aligned_alloc(4096, RING_BYTES);
	if (!srq || !ring) {
		fprintf(stderr, "qhca-udata: setup failed: %s\n", strerror(errno));
		return 2;
	}
	memset(ring, 0, RING_BYTES);

	snprintf(uverbs, sizeof(uverbs), "/dev/infiniband/%s", ctx->device->dev_name);
	uctx_tests(uverbs);
	cq_tests(ctx->cmd_fd, ring);
	qp_tests(ctx->cmd_fd, pd->handle, cq->handle, srq->handle, ring);
	srq_tests(ctx->cmd_fd, pd->handle, ring);

	/* An iova range that wraps past 2^64. */
	mr = ibv_reg_mr_iova(pd, ring, 2 * 4096, UINT64_MAX & ~4095ull, IBV_ACCESS_LOCAL_WRITE);
	report(!mr && errno == EINVAL, "reg_mr: iova range wrapping past 2^64 refused with EINVAL",
	       mr ? 0 : errno);
	if (mr)
		ibv_dereg_mr(mr);
	/* The device still works after all that. */
	mr = ibv_reg_mr(pd, ring, RING_BYTES, IBV_ACCESS_LOCAL_WRITE);
	report(mr != NULL, "reg_mr: a valid region afterwards (control)", mr ? 0 : errno);
	if (mr)
		ibv_dereg_mr(mr);

	ibv_destroy_srq(srq);
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	free(ring);
	printf("%s\n", failures ? "qhca-udata: FAILED" : "qhca-udata: all passed");
	return failures ? 1 : 0;
}
