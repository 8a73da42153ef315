// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Fuzz target: send and receive WQE parsing on post. The input fills the send and receive
 * rings of QPs of every type (connected to themselves, so requests loop back to the
 * responder) and chooses the doorbells rung; bytes 0xfe and 0xff among them block and
 * resume the transmit path, so messages go out in pieces.
 */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct fz_state s;
	size_t ring_bytes = 8 * 0x1000;	/* four QPs: an SQ page and an RQ page each */
	unsigned i;

	fz_input(data, size);

	if (size < 8)
		return 0;
	fz_setup(&s, 1);
	/* The rings of the four QPs, then the data buffer. */
	memcpy(fz_mem + (FZ_RINGS + 0x2000 - FZ_BASE), data + 8,
	       size - 8 < ring_bytes ? size - 8 : ring_bytes);
	if (size > 8 + ring_bytes)
		memcpy(fz_mem + (FZ_BUF - FZ_BASE), data + 8 + ring_bytes,
		       size - 8 - ring_bytes < 0x8000 ? size - 8 - ring_bytes : 0x8000);
	for (i = 0; i < 8; i++) {
		unsigned q = data[i] & 3, pi = (data[i] >> 2) & 15;
		uint32_t reg = (data[i] & 0x40) ? QHCA_DB_RQ : QHCA_DB_SQ;

		if (data[i] >= 0xfe) {
			if (data[i] == 0xfe)
				qhca_engine_tx_block(&s.e);
			else
				qhca_engine_tx_resume(&s.e);
			continue;
		}
		if (data[i] & 0x80)
			reg = QHCA_DB_CQ_ARM;
		qhca_engine_db_write(&s.e, reg,
				     fz_db(reg == QHCA_DB_CQ_ARM ? s.cq[q & 1] : s.qpn[q], pi), 8);
	}
	fz_drain_timers(&s);
	qhca_engine_tx_resume(&s.e);
	fz_drain_timers(&s);
	qhca_engine_fini(&s.e);
	return 0;
}
