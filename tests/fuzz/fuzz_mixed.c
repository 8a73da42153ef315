// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Fuzz target: everything at once, in the order the input chooses. Object life cycles
 * (create, modify, destroy, reset) interleave with doorbells, guest memory changes,
 * received frames, transmit back-pressure and timers, so the fuzzer can destroy a region,
 * a QP or a CQ between two packets of a message, which the single-purpose targets never do.
 * Frames the device transmits are kept and can be delivered back to it later, readdressed
 * to it, in any order and any number of times.
 *
 * The input is a series of operations: one byte selects the operation (low 4 bits) and its
 * object (high 4 bits); the bytes after it are its arguments.
 */
#include "fuzz_common.h"
#include "roce.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

enum fz_op {
	OP_DOORBELL,	/* reg, pi: SQ/RQ/SRQ/CQ arm doorbell of object (hi) */
	OP_MEM,		/* off16, len8, bytes: write guest memory (rings, buffers, args) */
	OP_FRAME,	/* len16, bytes: a frame to us (ICRC fixed when its first byte is odd) */
	OP_REPLAY,	/* index: deliver a frame the device sent earlier, readdressed to it */
	OP_TIMER,	/* step8: advance time by step * 64 us and run the timer */
	OP_TX,		/* flag: block (odd) or resume the transmit path */
	OP_MR_DESTROY,	/* destroy region (hi) */
	OP_MR_CREATE,	/* access8, page8, npages8, off16: a region over the data buffer
			 * (access bit 7: a free fast-register region of npages; else bit 6:
			 * a memory window, of type 2 with bit 5) */
	OP_QP_DESTROY,	/* destroy QP (hi) */
	OP_QP_MODIFY,	/* state8, mask32: modify QP (hi) with fuzzed attributes */
	OP_QP_CREATE,	/* type8, log2 8: a QP in slot (hi) on the CQs */
	OP_CQ_DESTROY,	/* destroy CQ (hi) */
	OP_SRQ,		/* create (even) or destroy an SRQ */
	OP_ADMIN,	/* 64 bytes: a raw admin command through the admin queue */
	OP_RESET,	/* reset the device and set it up again */
	OP_MAX
};

#define KEEP_FRAMES	32
#define MAX_MRS		4

static struct fz_state s;
static uint8_t kept[KEEP_FRAMES][ROCE_MAX_HDR + 4096 + 8];
static size_t kept_len[KEEP_FRAMES];
static unsigned kept_next;
static uint32_t mrs[MAX_MRS];
static uint32_t asq_tail;

static void keep_frame(const void *f, size_t l)
{
	unsigned i = kept_next++ % KEEP_FRAMES;

	if (l > sizeof(kept[0]))
		return;
	memcpy(kept[i], f, l);
	kept_len[i] = l;
}

/* Take @n argument bytes; zeros past the end of the input. */
static void args(const uint8_t **data, size_t *size, void *out, size_t n)
{
	size_t take = n < *size ? n : *size;

	memset(out, 0, n);
	memcpy(out, *data, take);
	*data += take;
	*size -= take;
}

static void setup(void)
{
	fz_setup(&s, 1);
	memset(mrs, 0, sizeof(mrs));
	mrs[0] = s.mr;
	asq_tail = 0;
}

static void op_qp_modify(unsigned obj, uint8_t state, uint32_t mask)
{
	struct qhca_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.mask = mask;
	a.state = state & 7;
	a.path_mtu = (state >> 3) & 7;
	a.timeout = state >> 3;
	a.retry_cnt = 1;
	a.rnr_retry = 1;
	a.max_rd_atomic = 2;
	a.max_dest_rd_atomic = 2;
	a.access_flags = QHCA_ACCESS_ALL;
	a.dest_qpn = s.qpn[(obj + 1) & 3];
	a.av.sgid[10] = a.av.sgid[11] = a.av.dgid[10] = a.av.dgid[11] = 0xff;
	a.av.sgid[15] = a.av.dgid[15] = 1;
	memcpy(a.av.dmac, fz_cfg.mac, 6);
	if (state & 0x80)
		a.av.dmac[5] ^= 2;	/* to "another host": frames are kept for replay */
	if (obj & 4)
		a.av.ib_flags = QHCA_AV_ROCE_V1;	/* RoCE v1 frames */
	qhca_qp_modify(&s.e, s.qpn[obj & 3], &a);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t frame[ROCE_MAX_HDR + 4096 + 8];
	unsigned steps = 0;

	fz_input(data, size);

	/* Nothing may carry over from the last input: a finding must replay on its own. */
	fz_xmit_hook = keep_frame;
	kept_next = 0;
	memset(kept_len, 0, sizeof(kept_len));
	setup();
	while (size && steps++ < 256) {
		uint8_t op = data[0] & 15, obj = data[0] >> 4;
		uint8_t b[8];

		data++;
		size--;
		switch (op % OP_MAX) {
		case OP_DOORBELL: {
			static const uint32_t regs[4] = { QHCA_DB_SQ, QHCA_DB_RQ, QHCA_DB_CQ_ARM,
							  QHCA_DB_SRQ };
			uint32_t num;

			args(&data, &size, b, 2);
			num = (b[0] & 3) == 2 ? s.cq[obj & 1] : (b[0] & 3) == 3 ? s.srq :
			      s.qpn[obj & 3];
			qhca_engine_db_write(&s.e, regs[b[0] & 3], fz_db(num, b[1]), 8);
			break;
		}
		case OP_MEM: {
			uint32_t off, len;

			args(&data, &size, b, 3);
			off = (b[0] | b[1] << 8) * 16u;
			len = b[2] < size ? b[2] : (uint32_t)size;
			if (off + len <= FZ_SIZE && off >= FZ_ARGS - FZ_BASE)
				memcpy(fz_mem + off, data, len);
			data += len;
			size -= len;
			break;
		}
		case OP_FRAME: {
			size_t len;

			args(&data, &size, b, 2);
			len = (b[0] | b[1] << 8) % sizeof(frame);
			if (len > size)
				len = size;
			memcpy(frame, data, len);
			data += len;
			size -= len;
			if (len > 14) {
				memcpy(frame, s.e.mac, 6);
				if (frame[6] & 1)
					roce_icrc_update(frame, len);
			}
			qhca_engine_receive(&s.e, frame, len);
			break;
		}
		case OP_REPLAY: {
			unsigned i;

			args(&data, &size, b, 1);
			i = b[0] % KEEP_FRAMES;
			if (kept_len[i]) {
				memcpy(frame, kept[i], kept_len[i]);
				memcpy(frame, s.e.mac, 6);
				qhca_engine_receive(&s.e, frame, kept_len[i]);
			}
			break;
		}
		case OP_TIMER:
			args(&data, &size, b, 1);
			fz_now += (uint64_t)b[0] * 64000;
			qhca_engine_timer(&s.e);
			break;
		case OP_TX:
			if (obj & 1)
				qhca_engine_tx_block(&s.e);
			else
				qhca_engine_tx_resume(&s.e);
			break;
		case OP_MR_DESTROY:
			qhca_mr_destroy(&s.e, mrs[obj % MAX_MRS]);
			break;
		case OP_MR_CREATE: {
			struct qhca_mr_create m = { .pd = s.pd };
			uint32_t npages, page;

			args(&data, &size, b, 5);
			page = b[1] % 8;
			npages = 1 + b[2] % (8 - page);
			m.access = b[0] & QHCA_ACCESS_MR_ALL;
			m.iova = 0x10000 + (uint64_t)(b[3] | b[4] << 8) * 8;
			m.page_offset = b[3] & 0xff;
			m.length = npages * 4096ull - m.page_offset - (b[4] & 0x7f);
			m.pbl = fz_pbl(12 + obj % MAX_MRS, FZ_BUF + page * 4096ull, npages);
			if (b[0] & 0x80) {
				m = (struct qhca_mr_create){ .pd = s.pd, .flags = QHCA_MR_FAST_REG,
							     .pbl.npages = npages };
			} else if (b[0] & 0x40) {
				m = (struct qhca_mr_create){ .pd = s.pd,
							     .flags = (b[0] & 0x20) ?
							     QHCA_MR_MW_TYPE2 : QHCA_MR_MW_TYPE1 };
			}
			qhca_mr_create(&s.e, &m, &mrs[obj % MAX_MRS]);
			break;
		}
		case OP_QP_DESTROY:
			qhca_qp_destroy(&s.e, s.qpn[obj & 3]);
			break;
		case OP_QP_MODIFY: {
			uint32_t mask;

			args(&data, &size, b, 5);
			memcpy(&mask, b + 1, 4);
			op_qp_modify(obj, b[0], mask);
			break;
		}
		case OP_QP_CREATE: {
			struct qhca_qp_create q = { .pd = s.pd, .send_cq = s.cq[0], .recv_cq = s.cq[1],
						    .sq_stride_log2 = 8, .rq_stride_log2 = 6,
						    .max_inline = 64 };
			uint64_t sq = FZ_RINGS + 0x2000 + (obj & 3) * 0x2000ull;

			args(&data, &size, b, 2);
			q.type = b[0] % 3;	/* RC, UC, UD */
			q.sq_log2 = b[1] & 3;
			q.rq_log2 = b[1] >> 6;
			q.srq = (b[1] & 0x10) ? s.srq : 0;
			q.sq_pbl = fz_pbl(3 + 2 * (obj & 3), sq, 1);
			q.rq_pbl = fz_pbl(4 + 2 * (obj & 3), sq + 0x1000, 1);
			qhca_qp_create(&s.e, &q, &s.qpn[obj & 3]);
			break;
		}
		case OP_CQ_DESTROY:
			qhca_cq_destroy(&s.e, s.cq[obj & 1]);
			break;
		case OP_SRQ:
			if (obj & 1) {
				qhca_srq_destroy(&s.e, s.srq);
			} else {
				struct qhca_srq_create c = { .pd = s.pd, .log2 = 3, .stride_log2 = 6,
							     .limit = obj };

				c.pbl = fz_pbl(20, FZ_RINGS + 0xe000, 1);
				qhca_srq_create(&s.e, &c, &s.srq);
			}
			break;
		case OP_ADMIN: {
			uint8_t cmd[QHCA_CMD_SIZE];

			args(&data, &size, cmd, sizeof(cmd));
			memcpy(fz_mem + (FZ_ASQ - FZ_BASE) + asq_tail * QHCA_CMD_SIZE, cmd, sizeof(cmd));
			asq_tail = (asq_tail + 1) & 15;
			qhca_engine_reg_write(&s.e, QHCA_REG_ASQ_TAIL, asq_tail);
			/* Consume the completion so the queue never fills. */
			qhca_engine_reg_write(&s.e, QHCA_REG_ACQ_HEAD, asq_tail);
			break;
		}
		case OP_RESET:
			qhca_engine_reg_write(&s.e, QHCA_REG_CTRL, QHCA_CTRL_RESET);
			qhca_engine_fini(&s.e);
			setup();
			break;
		}
	}
	qhca_engine_tx_resume(&s.e);
	fz_drain_timers(&s);
	qhca_engine_fini(&s.e);
	return 0;
}
