// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * qhca-limits: every capability an application passes is checked against the device's
 * limits before the provider computes with it. For ibv_create_cq, ibv_create_cq_ex,
 * ibv_create_qp, ibv_create_qp_ex (RC and UD), ibv_create_srq, ibv_create_srq_ex and
 * ibv_modify_srq, each out-of-range value (0xffffffff, 0x80000000, the device maximum + 1,
 * SGE counts whose WQE size wraps 32 bits, a huge max_inline_data) must fail at once with
 * EINVAL, and the largest legal values must work. Inline data and SGE lists whose total
 * length wraps are refused by ibv_post_send and ibv_wr_*. Each call runs under alarm(), so a
 * hang fails the test instead of hanging it. Exit 0 if all hold.
 *
 *   qhca-limits [DEVICE]      (default qhca_0)
 */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "vm_verbs.h"

#define CALL_SECONDS	20	/* one verb, even the largest CQ under TCG, takes far less */

static int fails, passes;
static const char *current = "start";

static void on_alarm(int sig)
{
	char msg[256];
	int n;

	(void)sig;
	n = snprintf(msg, sizeof(msg), "FAIL %s: no answer within %d s (hang)\n", current,
		     CALL_SECONDS);
	(void)!write(2, msg, n > 0 ? (size_t)n : 0);
	_exit(2);
}

static void begin(const char *what)
{
	current = what;
	alarm(CALL_SECONDS);
}

static void result(int ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void result(int ok, const char *fmt, ...)
{
	va_list ap;

	alarm(0);
	va_start(ap, fmt);
	fputs(ok ? "ok   " : "FAIL ", ok ? stdout : stderr);
	vfprintf(ok ? stdout : stderr, fmt, ap);
	fputc('\n', ok ? stdout : stderr);
	va_end(ap);
	if (ok)
		passes++;
	else
		fails++;
}

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_cq *cq;
static struct ibv_srq *srq;
static struct ibv_device_attr dev;
static uint32_t max_inline;

/* Out-of-range values for a capability of device maximum @max. */
static int bad_values(uint32_t max, uint32_t *v)
{
	int n = 0;

	v[n++] = 0xffffffffu;
	v[n++] = 0x80000000u;
	v[n++] = max + 1;
	return n;
}

/* ------------------------------------------------------------------ CQ */
static void cq_cases(void)
{
	uint32_t v[8];
	int i, n = bad_values(dev.max_cqe, v);
	int ints[] = { 0, -1, INT32_MIN, INT32_MAX, dev.max_cqe + 1 };
	struct ibv_cq_ex *cx;
	struct ibv_cq *c;

	for (i = 0; i < (int)(sizeof(ints) / sizeof(ints[0])); i++) {
		begin("ibv_create_cq");
		errno = 0;
		c = ibv_create_cq(ctx, ints[i], NULL, NULL, 0);
		result(!c && errno == EINVAL, "ibv_create_cq(cqe %d) refused with EINVAL (errno %d)",
		       ints[i], errno);
		if (c)
			ibv_destroy_cq(c);
	}
	for (i = 0; i < n; i++) {
		struct ibv_cq_init_attr_ex a = { .cqe = v[i], .wc_flags = IBV_WC_STANDARD_FLAGS };

		begin("ibv_create_cq_ex");
		errno = 0;
		cx = ibv_create_cq_ex(ctx, &a);
		result(!cx && errno == EINVAL,
		       "ibv_create_cq_ex(cqe 0x%x) refused with EINVAL (errno %d)", v[i], errno);
		if (cx)
			ibv_destroy_cq(ibv_cq_ex_to_cq(cx));
	}
	begin("ibv_create_cq max");
	c = ibv_create_cq(ctx, dev.max_cqe, NULL, NULL, 0);
	result(c && c->cqe >= dev.max_cqe, "ibv_create_cq(cqe max_cqe %d) works (errno %d)",
	       dev.max_cqe, c ? 0 : errno);
	if (c)
		ibv_destroy_cq(c);
	{
		struct ibv_cq_init_attr_ex a = { .cqe = dev.max_cqe,
						 .wc_flags = IBV_WC_STANDARD_FLAGS };

		begin("ibv_create_cq_ex max");
		cx = ibv_create_cq_ex(ctx, &a);
		result(cx != NULL, "ibv_create_cq_ex(cqe max_cqe %d) works (errno %d)",
		       dev.max_cqe, cx ? 0 : errno);
		if (cx)
			ibv_destroy_cq(ibv_cq_ex_to_cq(cx));
	}
}

/* ------------------------------------------------------------------ QP */
enum cap_field { SEND_WR, RECV_WR, SEND_SGE, RECV_SGE, INLINE, NFIELDS };
static const char *const field_name[] = { "max_send_wr", "max_recv_wr", "max_send_sge",
					  "max_recv_sge", "max_inline_data" };

static struct ibv_qp_cap sane_cap(void)
{
	struct ibv_qp_cap c = { .max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 1,
				.max_recv_sge = 1, .max_inline_data = 0 };
	return c;
}

static void set_field(struct ibv_qp_cap *c, enum cap_field f, uint32_t v)
{
	switch (f) {
	case SEND_WR: c->max_send_wr = v; break;
	case RECV_WR: c->max_recv_wr = v; break;
	case SEND_SGE: c->max_send_sge = v; break;
	case RECV_SGE: c->max_recv_sge = v; break;
	default: c->max_inline_data = v; break;
	}
}

/* Create a QP with @cap through ibv_create_qp (@ex 0) or ibv_create_qp_ex (@ex 1); @cap
 * gets the capabilities the QP has. */
static struct ibv_qp *make_qp(enum ibv_qp_type type, struct ibv_qp_cap *cap, int ex,
			      struct ibv_srq *with_srq)
{
	struct ibv_qp *qp;

	if (ex) {
		struct ibv_qp_init_attr_ex a = {
			.qp_type = type, .send_cq = cq, .recv_cq = cq, .srq = with_srq,
			.cap = *cap, .pd = pd,
			.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
			.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_RDMA_WRITE,
		};

		qp = ibv_create_qp_ex(ctx, &a);
		*cap = a.cap;
	} else {
		struct ibv_qp_init_attr a = { .qp_type = type, .send_cq = cq, .recv_cq = cq,
					      .srq = with_srq, .cap = *cap };

		qp = ibv_create_qp(pd, &a);
		*cap = a.cap;
	}
	return qp;
}

/* The largest max_inline_data a QP accepts (the device's limit is not in ibv_query_device). */
static uint32_t find_max_inline(void)
{
	uint32_t lo = 0, hi = 1u << 20;	/* lo works, hi does not */
	struct ibv_qp_cap c = sane_cap();
	struct ibv_qp *qp;

	while (hi - lo > 1) {
		uint32_t mid = lo + (hi - lo) / 2;

		c.max_inline_data = mid;
		begin("probe max_inline_data");
		qp = make_qp(IBV_QPT_RC, &c, 0, NULL);
		alarm(0);
		if (qp) {
			ibv_destroy_qp(qp);
			lo = mid;
		} else {
			hi = mid;
		}
	}
	return lo;
}

static void qp_cases(void)
{
	static const enum ibv_qp_type types[] = { IBV_QPT_RC, IBV_QPT_UD };
	uint32_t max[NFIELDS] = { dev.max_qp_wr, dev.max_qp_wr, dev.max_sge, dev.max_sge,
				  max_inline };
	char what[160];
	int t, ex, f, i;

	for (t = 0; t < 2; t++)
		for (ex = 0; ex < 2; ex++) {
			const char *fn = ex ? "ibv_create_qp_ex" : "ibv_create_qp";
			const char *tn = types[t] == IBV_QPT_RC ? "RC" : "UD";
			struct ibv_qp_cap c;
			struct ibv_qp *qp;

			for (f = 0; f < NFIELDS; f++) {
				uint32_t v[8];
				int n = bad_values(max[f], v);

				if (f == SEND_SGE || f == RECV_SGE) {
					v[n++] = 0x10000000u;	/* 16 * n wraps to 0 */
					v[n++] = 0x10000001u;	/* ... to 16 */
					v[n++] = 0x0fffffffu;	/* 16 + 16 * n wraps */
				}
				if (f == INLINE)
					v[n++] = 0xffffff00u;	/* + header wraps */
				for (i = 0; i < n; i++) {
					c = sane_cap();
					set_field(&c, f, v[i]);
					snprintf(what, sizeof(what), "%s %s %s 0x%x", fn, tn,
						 field_name[f], v[i]);
					begin(what);
					errno = 0;
					qp = make_qp(types[t], &c, ex, NULL);
					result(!qp && errno == EINVAL,
					       "%s refused with EINVAL (errno %d)", what, errno);
					if (qp)
						ibv_destroy_qp(qp);
				}
			}
			/* Everything at the device's maximum at once. */
			c.max_send_wr = c.max_recv_wr = dev.max_qp_wr;
			c.max_send_sge = c.max_recv_sge = dev.max_sge;
			c.max_inline_data = max_inline;
			snprintf(what, sizeof(what), "%s %s at every maximum (wr %d, sge %d, inline %u)",
				 fn, tn, dev.max_qp_wr, dev.max_sge, max_inline);
			begin(what);
			qp = make_qp(types[t], &c, ex, NULL);
			result(qp && c.max_send_wr >= (uint32_t)dev.max_qp_wr &&
			       c.max_recv_wr >= (uint32_t)dev.max_qp_wr, "%s works (errno %d)", what,
			       qp ? 0 : errno);
			if (qp)
				ibv_destroy_qp(qp);
		}
	/* With an SRQ the receive capabilities are ignored, whatever they are. */
	if (srq) {
		struct ibv_qp_cap c = sane_cap();
		struct ibv_qp *qp;

		c.max_recv_wr = c.max_recv_sge = 0xffffffffu;
		begin("ibv_create_qp with SRQ");
		qp = make_qp(IBV_QPT_RC, &c, 0, srq);
		result(qp != NULL, "ibv_create_qp with an SRQ ignores max_recv_wr/sge 0xffffffff "
		       "(errno %d)", qp ? 0 : errno);
		if (qp)
			ibv_destroy_qp(qp);
	}
}

/* ------------------------------------------------------------------ SRQ */
static struct ibv_srq *make_srq(uint32_t max_wr, uint32_t max_sge, uint32_t limit, int ex)
{
	if (ex) {
		struct ibv_srq_init_attr_ex a = {
			.attr = { .max_wr = max_wr, .max_sge = max_sge, .srq_limit = limit },
			.comp_mask = IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_TYPE,
			.srq_type = IBV_SRQT_BASIC, .pd = pd,
		};

		return ibv_create_srq_ex(ctx, &a);
	} else {
		struct ibv_srq_init_attr a = {
			.attr = { .max_wr = max_wr, .max_sge = max_sge, .srq_limit = limit },
		};

		return ibv_create_srq(pd, &a);
	}
}

static void srq_cases(void)
{
	char what[160];
	uint32_t v[8];
	int ex, i, n, ret;
	struct ibv_srq *s;

	for (ex = 0; ex < 2; ex++) {
		const char *fn = ex ? "ibv_create_srq_ex" : "ibv_create_srq";

		n = bad_values(dev.max_srq_wr, v);
		for (i = 0; i < n; i++) {
			snprintf(what, sizeof(what), "%s max_wr 0x%x", fn, v[i]);
			begin(what);
			errno = 0;
			s = make_srq(v[i], 1, 0, ex);
			result(!s && errno == EINVAL, "%s refused with EINVAL (errno %d)", what, errno);
			if (s)
				ibv_destroy_srq(s);
		}
		n = bad_values(dev.max_srq_sge, v);
		v[n++] = 0x10000000u;
		v[n++] = 0x0fffffffu;
		for (i = 0; i < n; i++) {
			snprintf(what, sizeof(what), "%s max_sge 0x%x", fn, v[i]);
			begin(what);
			errno = 0;
			s = make_srq(16, v[i], 0, ex);
			result(!s && errno == EINVAL, "%s refused with EINVAL (errno %d)", what, errno);
			if (s)
				ibv_destroy_srq(s);
		}
		snprintf(what, sizeof(what), "%s srq_limit 0xffffffff", fn);
		begin(what);
		errno = 0;
		s = make_srq(16, 1, 0xffffffffu, ex);
		result(!s && errno == EINVAL, "%s refused with EINVAL (errno %d)", what, errno);
		if (s)
			ibv_destroy_srq(s);
		snprintf(what, sizeof(what), "%s at its maximum (wr %d, sge %d)", fn,
			 dev.max_srq_wr, dev.max_srq_sge);
		begin(what);
		s = make_srq(dev.max_srq_wr, dev.max_srq_sge, 0, ex);
		result(s != NULL, "%s works (errno %d)", what, s ? 0 : errno);
		if (s)
			ibv_destroy_srq(s);
	}

	/* ibv_modify_srq on a small SRQ: sizes beyond the device and limits beyond the SRQ. */
	begin("ibv_create_srq for modify");
	srq = make_srq(64, 1, 0, 0);
	result(srq != NULL, "ibv_create_srq(64) for the modify cases (errno %d)",
	       srq ? 0 : errno);
	if (!srq)
		return;
	n = bad_values(dev.max_srq_wr, v);
	for (i = 0; i < n; i++) {
		struct ibv_srq_attr a = { .max_wr = v[i] };

		snprintf(what, sizeof(what), "ibv_modify_srq IBV_SRQ_MAX_WR 0x%x", v[i]);
		begin(what);
		ret = ibv_modify_srq(srq, &a, IBV_SRQ_MAX_WR);
		result(ret == EINVAL, "%s refused with EINVAL (%d)", what, ret);
	}
	{
		struct ibv_srq_attr a = { .srq_limit = 0xffffffffu };

		begin("ibv_modify_srq IBV_SRQ_LIMIT 0xffffffff");
		ret = ibv_modify_srq(srq, &a, IBV_SRQ_LIMIT);
		result(ret == EINVAL, "ibv_modify_srq IBV_SRQ_LIMIT 0xffffffff refused with EINVAL "
		       "(%d)", ret);
		a.srq_limit = 8;
		begin("ibv_modify_srq IBV_SRQ_LIMIT 8");
		ret = ibv_modify_srq(srq, &a, IBV_SRQ_LIMIT);
		result(ret == 0, "ibv_modify_srq IBV_SRQ_LIMIT 8 works (%d)", ret);
	}
}

/* ------------------------------------------------------------------ lengths on post */
static void post_cases(void)
{
	struct ibv_qp_cap c = sane_cap();
	static char buf[64];
	struct ibv_qp *qp;
	struct ibv_qp_ex *qx;
	int ret;

	c.max_send_sge = 2;
	c.max_inline_data = max_inline < 64 ? max_inline : 64;
	begin("ibv_create_qp_ex for post");
	qp = make_qp(IBV_QPT_RC, &c, 1, NULL);
	result(qp != NULL, "RC QP for the post cases (errno %d)", qp ? 0 : errno);
	if (!qp)
		return;
	{
		/* 8 + 0xfffffffc wraps to 4 in 32 bits. */
		struct ibv_sge sg[2] = { { .addr = (uintptr_t)buf, .length = 8 },
					 { .addr = (uintptr_t)buf, .length = 0xfffffffcu } };
		struct ibv_send_wr wr = { .sg_list = sg, .num_sge = 2, .opcode = IBV_WR_SEND,
					  .send_flags = IBV_SEND_INLINE }, *bad = NULL;

		begin("ibv_post_send inline wrap");
		ret = ibv_post_send(qp, &wr, &bad);
		result(ret == EINVAL && bad == &wr, "ibv_post_send with inline lengths that wrap "
		       "refused with EINVAL (%d)", ret);
	}
	qx = ibv_qp_to_qp_ex(qp);
	{
		struct ibv_data_buf b[2] = { { buf, 8 }, { buf, SIZE_MAX - 3 } };

		begin("ibv_wr_set_inline_data_list wrap");
		ibv_wr_start(qx);
		ibv_wr_send(qx);
		ibv_wr_set_inline_data_list(qx, 2, b);
		ret = ibv_wr_complete(qx);
		result(ret != 0, "ibv_wr_set_inline_data_list with lengths that wrap fails (%d)",
		       ret);
	}
	{
		struct ibv_sge sg = { .addr = (uintptr_t)buf, .length = 8 };

		begin("ibv_wr_set_sge_list wrap");
		ibv_wr_start(qx);
		ibv_wr_send(qx);
		/* n * sizeof(struct ibv_sge-like 16 bytes) wraps to 16 */
		ibv_wr_set_sge_list(qx, (SIZE_MAX >> 4) + 2, &sg);
		ret = ibv_wr_complete(qx);
		result(ret == EINVAL, "ibv_wr_set_sge_list with a count that wraps fails with "
		       "EINVAL (%d)", ret);
	}
	ibv_destroy_qp(qp);
}

int main(int argc, char **argv)
{
	const char *name = argc > 1 ? argv[1] : "qhca_0";

	setvbuf(stdout, NULL, _IOLBF, 0);	/* every line out before a hang ends us */
	signal(SIGALRM, on_alarm);
	begin("open");
	ctx = vm_open(name);
	if (!ctx) {
		fprintf(stderr, "FAIL cannot open %s\n", name);
		return 1;
	}
	pd = ibv_alloc_pd(ctx);
	cq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	if (!pd || !cq || ibv_query_device(ctx, &dev)) {
		fprintf(stderr, "FAIL pd, cq or query_device\n");
		return 1;
	}
	alarm(0);
	max_inline = find_max_inline();
	printf("device: max_qp_wr %d max_sge %d max_cqe %d max_srq_wr %d max_srq_sge %d; "
	       "max_inline_data %u\n", dev.max_qp_wr, dev.max_sge, dev.max_cqe, dev.max_srq_wr,
	       dev.max_srq_sge, max_inline);
	result(max_inline > 0 && max_inline < 1u << 20, "max_inline_data has a limit (%u)",
	       max_inline);

	cq_cases();
	srq_cases();
	qp_cases();
	post_cases();

	if (srq)
		ibv_destroy_srq(srq);
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	printf("%d passed, %d failed\n", passes, fails);
	return fails ? 1 : 0;
}
