// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Fuzz target: the loader of saved device states (migrate.c), the one way an incoming
 * migration stream reaches the engine. A real stream is saved once from the deep set-up of
 * fuzz_common.h (regions, windows, a fast-register region, CQs, QPs of every type, an SRQ,
 * XRC) with work in flight: the RC QP, pointed at a peer that never answers, has WRITEs,
 * a READ, a SEND and an atomic out with its timer running, more waiting behind a blocked
 * transmit path, and a UD QP is in a multicast group. The input then edits the stream:
 * records of an operation byte and its arguments
 *   0: off32 n8 bytes   XOR n bytes at off (modulo the length)
 *   1: off32 val32      set the 32-bit word at off (counts, handles, indexes)
 *   2: off32            cut the stream at off
 *   3: off32 n8 bytes   insert n bytes at off
 * A stream that loads is then worked: resumed (the waiting QPs send), the frames the source
 * sent received (twice), the SQ doorbell rung, its timers run (retransmissions, retry
 * errors, flushes), described and reset.
 */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_STREAM	(1u << 20)

static uint8_t *base;
static size_t base_len;
static struct qhca_engine_config base_cfg;	/* the destination's: the source's */

#define KEEP		16
static uint8_t kept[KEEP][2048];
static size_t kept_len[KEEP];
static unsigned nkept;
static uint32_t base_qpn;

static void keep_frame(const void *f, size_t l)
{
	if (nkept < KEEP && l <= sizeof(kept[0])) {
		memcpy(kept[nkept], f, l);
		kept_len[nkept++] = l;
	}
}

/* WQE @idx of the RC QP (fz_setup: QP 0, its SQ of 8 WQEs of 256 bytes). */
static void post(uint32_t idx, uint8_t op, uint32_t len, uint32_t mr)
{
	uint64_t slot = FZ_RINGS + 0x2000 + (uint64_t)(idx & 7) * 256;
	struct qhca_sq_wqe w = { .wr_id = idx, .opcode = op, .flags = QHCA_WQE_SIGNALED,
				 .num_sge = 1, .remote_addr = 0x14000, .rkey = mr,
				 .compare_add = 1 };
	struct qhca_sge g = { .addr = 0x10000 + idx * 0x400, .length = len, .lkey = mr };

	memcpy(fz_mem + (slot - FZ_BASE), &w, sizeof(w));
	memcpy(fz_mem + (slot - FZ_BASE) + sizeof(w), &g, sizeof(g));
}

static void make_base(void)
{
	static struct fz_state s;
	struct qhca_qp_attr a = { .mask = QHCA_QP_AV };
	struct qhca_mcast m = { .gid = { 0xff, 0x0e }, .mlid = 0xc001 };

	fz_input((const uint8_t *)"", 0);
	fz_setup(&s, 1);
	/* the RC QP's peer: another MAC and GID, which never answers */
	qhca_qp_query(&s.e, s.qpn[0], &a);
	a.mask = QHCA_QP_AV;
	a.av.dmac[5] ^= 0x40;
	a.av.dgid[15] ^= 0x40;
	qhca_qp_modify(&s.e, s.qpn[0], &a);
	post(0, QHCA_WR_RDMA_WRITE, 3000, s.mr);
	post(1, QHCA_WR_RDMA_READ, 2048, s.mr);
	post(2, QHCA_WR_SEND, 100, s.mr);
	post(3, QHCA_WR_ATOMIC_FETCH_AND_ADD, 8, s.mr);
	fz_xmit_hook = keep_frame;
	qhca_engine_db_write(&s.e, QHCA_DB_SQ, fz_db(s.qpn[0], 4), 8);
	qhca_engine_tx_block(&s.e);
	post(4, QHCA_WR_RDMA_WRITE, 5000, s.mr);
	qhca_engine_db_write(&s.e, QHCA_DB_SQ, fz_db(s.qpn[0], 5), 8);
	fz_xmit_hook = NULL;
	qhca_mcast_attach(&s.e, s.qpn[2], &m);
	base_qpn = s.qpn[0];
	/* what the base must have for the loader to meet it: a timer, a QP waiting to send */
	if (!s.e.timer_n || qhca_list_empty(&s.e.tx_waiters) || !nkept)
		abort();
	if (qhca_engine_save(&s.e, &base, &base_len))
		abort();
	base_cfg = s.e.cfg;
	qhca_engine_fini(&s.e);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t buf[MAX_STREAM];
	struct qhca_engine *e;
	size_t len, off;
	char why[256];

	if (!base)
		make_base();
	if (base_len > MAX_STREAM)
		abort();
	memcpy(buf, base, base_len);
	len = base_len;
	while (size >= 5 && len) {
		uint8_t op = data[0] & 3, n;
		uint32_t w;

		memcpy(&w, data + 1, 4);
		off = w % len;
		data += 5;
		size -= 5;
		if (op == 0 || op == 3) {
			if (!size)
				break;
			n = data[0];
			data++;
			size--;
			if (n > size)
				n = (uint8_t)size;
			if (op == 0) {
				size_t i;

				for (i = 0; i < n && off + i < len; i++)
					buf[off + i] ^= data[i];
			} else if (len + n <= MAX_STREAM) {
				memmove(buf + off + n, buf + off, len - off);
				memcpy(buf + off, data, n);
				len += n;
			}
			data += n;
			size -= n;
		} else if (op == 1) {
			if (size < 4)
				break;
			if (off + 4 <= len)
				memcpy(buf + off, data, 4);
			data += 4;
			size -= 4;
		} else {
			len = off;
		}
	}
	e = qhca_engine_load(&base_cfg, &fz_ops, NULL, buf, len, why, sizeof(why));
	if (e) {
		static char desc[1 << 16];
		unsigned i, k;

		qhca_engine_resume(e);
		for (k = 0; k < 2; k++)
			for (i = 0; i < nkept; i++)
				qhca_engine_receive(e, kept[i], kept_len[i]);
		qhca_engine_db_write(e, QHCA_DB_SQ, fz_db(base_qpn, 5), 8);
		qhca_engine_describe(e, desc, sizeof(desc));
		for (i = 0; i < 16; i++) {
			fz_now += 100000000ull;
			qhca_engine_timer(e);
		}
		qhca_engine_reset(e);
		qhca_engine_free(e);
	}
	return 0;
}
