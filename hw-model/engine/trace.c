/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * qhca engine: logging (qhca_logf, through ops->log) and the teaching trace. While the platform has tracing on
 * (qhca_engine_set_tracing), each step of the datapath becomes one line through
 * ops->step: a kind, then key=value fields (a value with spaces is in double quotes).
 *
 *   db     a doorbell: queue (sq, rq, srq), qp or srq, pi old->new, page
 *   arm    a CQ armed: cq, ci, pi, solicited, page (doorbell page 0 is the kernel's)
 *   wqe    a send WQE fetched: qp, slot, gpa, size, op, wr_id, sges, flags, inline, rkey, raddr
 *   wqe_bad  the WQE is unusable: qp, slot, status (its completion's)
 *   rwqe   a receive WQE taken: qp, srq, slot, gpa, wr_id, len, status
 *   key    an lkey or rkey checked: kind, key, pd, va, len, need, result (ok or why not)
 *   dma    payload moved: dir (to-guest, from-guest), key, va, len, gpa
 *   tx/rx  a packet sent or received: qp, dqp, op, psn, len (payload), size (frame), the
 *          headers' fields (va, rkey, dmalen, aeth, msn, cmp, swap_add, imm, dlid, slid)
 *          iWARP (wire=tcp): qp, conn, sport, dport, seq, ack, flags (SYN,ACK,...), win,
 *          len (payload), size (frame)
 *   fpdu   iWARP: an FPDU built and queued into TCP (dir=out) or taken whole, its CRC good
 *          (dir=in): qp, conn, op, ulpdu (MPA's length), len (payload), last, stag and to
 *          (tagged) or qn, msn, mo (untagged; a Read Request adds sink_stag, sink_to, size,
 *          src_stag, src_to), crc (the MPA CRC32c), fpdu (its bytes)
 *   mpa    iWARP: an MPA request, reply or reject sent or taken: dir, qp, conn, what, rev,
 *          ird, ord, pdata (private data bytes)
 *   acked  iWARP: the peer's TCP ACK freed bytes of TCP's send buffer: qp, conn, bytes
 *   drop   a received packet dropped: why, and the packet's fields
 *   nak    a NAK or RNR NAK taken by the requester: qp, psn, aeth
 *   retx   the requester sends again: qp, psn, why (timeout, nak, rnr)
 *   dup    the head of a resend goes twice: qp, psn
 *   rnr    the responder has no receive WQE for a SEND: qp, psn, timer (min_rnr_timer)
 *   seq    a request not at the expected PSN: qp, psn, expected, what (duplicate, gap,
 *          gap-naked: NAKed already, gap-uc, busy: still sending READ responses)
 *   cqe    a completion written: cq, slot, status, op, wr_id, qp, len, event
 *   eqe    an event queue entry written: eq, slot, type, handle
 *   irq    an interrupt: vector, raised (1) or masked (0)
 *   qp     a QP changed state: qp, from, to, and what the change set
 *   mr     a region registered: key, pd, va, len, access
 *   migrate  the device's state: what (saved: bytes, qps; resumed in the new process: qps,
 *          timers running, waiting (QPs waiting to send))
 *
 * Off, a step costs the one predictable branch in qhca_step(); nothing is formatted.
 */
#include <stdarg.h>
#include <stdio.h>

#include "engine_internal.h"

/* A log message at @level, formatted only if the platform wants that level. */
void qhca_logf(struct qhca_engine *e, enum qhca_log_level level, const char *func,
	       const char *fmt, ...)
{
	char msg[256];
	va_list ap;

	if (!e->ops->log || (e->ops->log_enabled && !e->ops->log_enabled(e->opaque, level)))
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	e->ops->log(e->opaque, level, func, msg);
}

void qhca_engine_set_tracing(struct qhca_engine *e, bool on)
{
	e->tracing = on && e->ops->step;
}

void qhca_stepf(struct qhca_engine *e, const char *fmt, ...)
{
	char line[512];
	va_list ap;

	if (!e->ops->step)
		return;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	e->ops->step(e->opaque, line);
}

const char *qhca_wr_name(uint8_t op)
{
	switch (op) {
	case QHCA_WR_RDMA_WRITE:		return "RDMA_WRITE";
	case QHCA_WR_RDMA_WRITE_WITH_IMM:	return "RDMA_WRITE_WITH_IMM";
	case QHCA_WR_SEND:			return "SEND";
	case QHCA_WR_SEND_WITH_IMM:		return "SEND_WITH_IMM";
	case QHCA_WR_RDMA_READ:			return "RDMA_READ";
	case QHCA_WR_ATOMIC_CMP_AND_SWP:	return "ATOMIC_CMP_AND_SWP";
	case QHCA_WR_ATOMIC_FETCH_AND_ADD:	return "ATOMIC_FETCH_AND_ADD";
	case QHCA_WR_LOCAL_INV:			return "LOCAL_INV";
	case QHCA_WR_BIND_MW:			return "BIND_MW";
	case QHCA_WR_SEND_WITH_INV:		return "SEND_WITH_INV";
	case QHCA_WR_ATOMIC_WRITE:		return "ATOMIC_WRITE";
	case QHCA_WR_REG_MR:			return "REG_MR";
	}
	return "UNKNOWN";
}

const char *qhca_wc_status_name(uint8_t status)
{
	switch (status) {
	case QHCA_WC_SUCCESS:		return "SUCCESS";
	case QHCA_WC_LOC_LEN_ERR:	return "LOC_LEN_ERR";
	case QHCA_WC_LOC_QP_OP_ERR:	return "LOC_QP_OP_ERR";
	case QHCA_WC_LOC_PROT_ERR:	return "LOC_PROT_ERR";
	case QHCA_WC_WR_FLUSH_ERR:	return "WR_FLUSH_ERR";
	case QHCA_WC_MW_BIND_ERR:	return "MW_BIND_ERR";
	case QHCA_WC_BAD_RESP_ERR:	return "BAD_RESP_ERR";
	case QHCA_WC_LOC_ACCESS_ERR:	return "LOC_ACCESS_ERR";
	case QHCA_WC_REM_INV_REQ_ERR:	return "REM_INV_REQ_ERR";
	case QHCA_WC_REM_ACCESS_ERR:	return "REM_ACCESS_ERR";
	case QHCA_WC_REM_OP_ERR:	return "REM_OP_ERR";
	case QHCA_WC_RETRY_EXC_ERR:	return "RETRY_EXC_ERR";
	case QHCA_WC_RNR_RETRY_EXC_ERR:	return "RNR_RETRY_EXC_ERR";
	case QHCA_WC_FATAL_ERR:		return "FATAL_ERR";
	case QHCA_WC_GENERAL_ERR:	return "GENERAL_ERR";
	}
	return "UNKNOWN";
}

static const char *wc_op_name(uint8_t op)
{
	switch (op) {
	case QHCA_WC_SEND:			return "SEND";
	case QHCA_WC_RDMA_WRITE:		return "RDMA_WRITE";
	case QHCA_WC_RDMA_READ:			return "RDMA_READ";
	case QHCA_WC_COMP_SWAP:			return "COMP_SWAP";
	case QHCA_WC_FETCH_ADD:			return "FETCH_ADD";
	case QHCA_WC_BIND_MW:			return "BIND_MW";
	case QHCA_WC_LOCAL_INV:			return "LOCAL_INV";
	case QHCA_WC_ATOMIC_WRITE:		return "ATOMIC_WRITE";
	case QHCA_WC_REG_MR:			return "REG_MR";
	case QHCA_WC_RECV:			return "RECV";
	case QHCA_WC_RECV_RDMA_WITH_IMM:	return "RECV_RDMA_WITH_IMM";
	}
	return "UNKNOWN";
}

/* An AETH syndrome (IBA 9.7.5.1.4): ACK, RNR_NAK, or NAK and its code. */
const char *qhca_aeth_name(uint8_t syndrome)
{
	static const char *const nak[] = { "NAK_PSN_SEQ", "NAK_INV_REQ", "NAK_REM_ACCESS",
					   "NAK_REM_OP", "NAK_INV_RD_REQ" };

	switch (syndrome >> 5) {
	case 0:
		return "ACK";
	case 1:
		return "RNR_NAK";
	case 3:
		return (syndrome & 0x1f) < 5 ? nak[syndrome & 0x1f] : "NAK_RESERVED";
	}
	return "RESERVED";
}

void qhca_step_pkt(struct qhca_engine *e, const char *kind, uint32_t qpn,
		   const struct roce_pkt *p, size_t size, const char *why)
{
	const struct roce_opcode_info *oi = roce_opcode_info(p->opcode);
	uint32_t f = oi->flags;
	char ext[256];
	int n = 0;

	ext[0] = 0;
#define EXT(...) (n += snprintf(ext + n, n < (int)sizeof(ext) ? sizeof(ext) - n : 0, __VA_ARGS__))
	if (f & ROCE_F_RETH)
		EXT(" va=0x%llx rkey=0x%x dmalen=%u", (unsigned long long)p->reth_va, p->reth_rkey,
		    p->reth_len);
	if (f & ROCE_F_AETH)
		EXT(" aeth=%s msn=%u", qhca_aeth_name(p->aeth_syndrome), p->aeth_msn);
	if ((f & ROCE_F_ATOMIC) && (f & ROCE_F_REQ))
		EXT(" va=0x%llx rkey=0x%x cmp=0x%llx swap_add=0x%llx",
		    (unsigned long long)p->atomic_va, p->atomic_rkey,
		    (unsigned long long)p->atomic_compare,
		    (unsigned long long)p->atomic_swap_add);
	if (f & ROCE_F_ATOMICACKETH)
		EXT(" orig=0x%llx", (unsigned long long)p->atomic_orig);
	if (f & ROCE_F_IMMDT)
		EXT(" imm=0x%x", p->imm);
	if (f & ROCE_F_DETH)
		EXT(" qkey=0x%x sqp=0x%x", p->deth_qkey, p->deth_sqpn);
	if (p->ib)
		EXT(" dlid=0x%x slid=0x%x vl=%u", p->dlid, p->slid, p->vl);
	else if (p->grh)
		EXT(" wire=rocev1");
	if (why)
		EXT(" why=\"%s\"", why);
#undef EXT
	qhca_stepf(e, "%s qp=0x%x dqp=0x%x op=%s psn=0x%x len=%u size=%zu ackreq=%d se=%d%s", kind,
		   qpn, p->dqpn, oi->flags ? oi->name : "UNKNOWN", p->psn, p->payload_len, size,
		   p->ackreq, p->se, ext);
}

void qhca_step_cqe(struct qhca_engine *e, uint32_t cqn, uint32_t slot, const struct qhca_cqe *c,
		   bool event)
{
	qhca_stepf(e, "cqe cq=0x%x slot=%u status=%s op=%s wr_id=0x%llx qp=0x%x len=%u event=%d",
		   cqn, slot,
		   qhca_wc_status_name(QHCA_FIELD_GET(QHCA_CQE_STATUS_MASK, c->qpn_status)),
		   wc_op_name(c->opcode), (unsigned long long)c->wr_id,
		   QHCA_FIELD_GET(QHCA_CQE_QPN_MASK, c->qpn_status), c->byte_len, event);
}
