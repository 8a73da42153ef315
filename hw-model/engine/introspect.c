// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The device's own view of its objects, for people: the port, and the QPs (state, PSNs,
 * queue indices), CQs, SRQs and memory regions (keys, ranges, rights) as the device holds
 * them, as one JSON object. QEMU shows it through the device's read-only QOM property
 * "objects" (QMP qom-get; tools/qhca device I), so that a student can stop a guest and
 * compare the device's view with the guest's (rdma resource show).
 */
#include <stdarg.h>
#include <stdio.h>

#include "engine_internal.h"

struct out {
	char *buf;
	size_t cap, len;
	bool full;
};

static void put(struct out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(struct out *o, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (o->full)
		return;
	va_start(ap, fmt);
	n = vsnprintf(o->buf + o->len, o->cap - o->len, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= o->cap - o->len)
		o->full = true;
	else
		o->len += (size_t)n;
}

static const char *qp_type_name(uint8_t t)
{
	switch (t) {
	case QHCA_QPT_SMI: return "SMI";
	case QHCA_QPT_GSI: return "GSI";
	case QHCA_QPT_RC: return "RC";
	case QHCA_QPT_UC: return "UC";
	case QHCA_QPT_UD: return "UD";
	case QHCA_QPT_XRC_INI: return "XRC_INI";
	case QHCA_QPT_XRC_TGT: return "XRC_TGT";
	default: return "?";
	}
}

static void describe_qp(struct out *o, const struct qhca_qp *qp)
{
	put(o, "{\"qpn\":%u,\"type\":\"%s\",\"state\":\"%s\",\"pd\":%u,\"uctx\":%u,"
	    "\"send_cq\":%u,\"recv_cq\":%u,\"srq\":%u,",
	    qp->qpn, qp_type_name(qp->type), qhca_qp_state_name(qp->state), qp->pd, qp->uctx,
	    qp->send_cq ? qp->send_cq->handle : 0, qp->recv_cq ? qp->recv_cq->handle : 0,
	    qp->srq ? qp->srq->handle : 0);
	put(o, "\"sq\":{\"entries\":%u,\"producer\":%u,\"consumer\":%u},"
	    "\"rq\":{\"entries\":%u,\"producer\":%u,\"consumer\":%u},",
	    qp->sq.log2 || qp->sq.pages ? 1u << qp->sq.log2 : 0, qp->sq.pi, qp->sq.ci,
	    qp->rq.pages ? 1u << qp->rq.log2 : 0, qp->rq.pi, qp->rq.ci);
	put(o, "\"mtu\":%u,\"dest_qpn\":%u,\"next_psn\":%u,\"unacked_psn\":%u,"
	    "\"expected_psn\":%u,\"msn\":%u,\"retries\":%u,\"rnr_retries\":%u,"
	    "\"dlid\":%u,\"reads_out\":%u}",
	    qp->mtu, qp->dest_qpn, qp->psn, qp->una, qp->epsn, qp->msn, qp->retries,
	    qp->rnr_retries, qp->av.dlid, qp->rd_atomic_out);
}

static void describe_mr(struct out *o, const struct qhca_mr *mr)
{
	const char *kind = mr->flags & QHCA_MR_MW_TYPE1 ? "MW1" :
			   mr->flags & QHCA_MR_MW_TYPE2 ? "MW2" :
			   mr->flags & QHCA_MR_FAST_REG ? "FRMR" :
			   mr->flags & QHCA_MR_PHYS ? "DMA" : "MR";

	put(o, "{\"key\":\"0x%08x\",\"kind\":\"%s\",\"pd\":%u,\"iova\":\"0x%llx\","
	    "\"length\":%llu,\"access\":\"%s%s%s%s\",\"valid\":%s,\"in_flight\":%u}",
	    mr->key, kind, mr->pd, (unsigned long long)mr->iova,
	    (unsigned long long)mr->length,
	    mr->access & QHCA_ACCESS_LOCAL_WRITE ? "L" : "-",
	    mr->access & QHCA_ACCESS_REMOTE_READ ? "R" : "-",
	    mr->access & QHCA_ACCESS_REMOTE_WRITE ? "W" : "-",
	    mr->access & QHCA_ACCESS_REMOTE_ATOMIC ? "A" : "-",
	    mr->invalid ? "false" : "true", mr->refs);
}

/* At most this many objects of each kind are listed; the counts are always whole. */
#define DESCRIBE_MAX	256

size_t qhca_engine_describe(struct qhca_engine *e, char *buf, size_t cap)
{
	struct out o = { .buf = buf, .cap = cap };
	uint32_t i, n;

	if (!cap)
		return 0;
	buf[0] = 0;
	put(&o, "{\"link\":\"%s\",\"port\":{\"link_up\":%s,",
	    e->cfg.link == QHCA_LINK_IB ? "ib" : "roce", e->link_up ? "true" : "false");
	if (e->cfg.link == QHCA_LINK_IB)
		put(&o, "\"state\":%u,\"lid\":%u,\"sm_lid\":%u,\"lmc\":%u},", e->ib.pi.state,
		    e->ib.pi.lid, e->ib.pi.sm_lid, e->ib.pi.lmc);
	else
		put(&o, "\"mac\":\"%02x:%02x:%02x:%02x:%02x:%02x\"},", e->mac[0], e->mac[1],
		    e->mac[2], e->mac[3], e->mac[4], e->mac[5]);
	put(&o, "\"counts\":{\"qp\":%u,\"cq\":%u,\"srq\":%u,\"mr\":%u,\"pd\":%u,\"uctx\":%u},",
	    e->qp_table.count, e->cq_table.count, e->srq_table.count, e->mr_table.count,
	    e->pd.count, e->uctx.count);
	put(&o, "\"qps\":[");
	for (i = n = 0; i < e->cfg.max_qp && n < DESCRIBE_MAX && n < e->qp_table.count; i++) {
		if (!e->qp[i])
			continue;
		put(&o, n++ ? "," : "");
		describe_qp(&o, e->qp[i]);
	}
	put(&o, "],\"cqs\":[");
	for (i = n = 0; i < e->cfg.max_cq && n < DESCRIBE_MAX && n < e->cq_table.count; i++) {
		const struct qhca_cq *cq = e->cq[i];

		if (!cq)
			continue;
		put(&o, "%s{\"cqn\":%u,\"entries\":%u,\"producer\":%u,\"eq\":%u,\"armed\":%s,"
		    "\"overflowed\":%s}", n++ ? "," : "", cq->handle, 1u << cq->log2, cq->pi,
		    cq->eq, cq->armed ? (cq->armed_solicited ? "\"solicited\"" : "true") : "false",
		    cq->overflowed ? "true" : "false");
	}
	put(&o, "],\"srqs\":[");
	for (i = n = 0; i < e->cfg.max_srq && n < DESCRIBE_MAX && n < e->srq_table.count; i++) {
		const struct qhca_srq *srq = e->srq[i];

		if (!srq)
			continue;
		put(&o, "%s{\"srqn\":%u,\"entries\":%u,\"producer\":%u,\"consumer\":%u,"
		    "\"limit\":%u,\"xrcd\":%u}", n++ ? "," : "", srq->handle, 1u << srq->wq.log2,
		    srq->wq.pi, srq->wq.ci, srq->limit, srq->xrcd);
	}
	put(&o, "],\"mrs\":[");
	for (i = n = 0; i < e->cfg.max_mr && n < DESCRIBE_MAX && n < e->mr_table.count; i++) {
		if (!e->mr[i] || e->mr[i]->dead)
			continue;
		put(&o, n++ ? "," : "");
		describe_mr(&o, e->mr[i]);
	}
	put(&o, "]}");
	if (o.full) {
		/* Whatever did not fit: an object that says so, which is valid JSON. */
		o.full = false;
		o.len = 0;
		put(&o, "{\"error\":\"the description does not fit in %zu bytes\"}", cap);
		if (o.full) {
			buf[0] = 0;
			return 0;
		}
	}
	return o.len;
}
