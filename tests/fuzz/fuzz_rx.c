// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Fuzz target: the receive path for RoCE (v2 and v1) and Ethernet frames. The input is a
 * series of frames (2-byte length, then the frame) delivered to a device with QPs of every
 * type in RTS (odd QPNs in RoCE v1), receive WQEs posted and the Ethernet function started.
 * To get past the ICRC, a
 * frame whose first byte is odd gets its ICRC recomputed before delivery. Lengths 0xfffe
 * and 0xffff block and resume the transmit path (READ responses then wait). An input that
 * starts with 0xff is for an InfiniBand port (link=ib, ACTIVE with LID 1): its frames are
 * IB packets, and those whose length has bit 15 set get their ICRC and VCRC recomputed.
 */
#include "fuzz_common.h"
#include "ib.h"
#include "roce.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct fz_state s;
	static uint8_t frame[9300];
	bool ib = size && data[0] == 0xff;
	struct qhca_cmd_eth_start eth = { .tx_ring = FZ_RINGS + 0xc000, .rx_ring = FZ_RINGS + 0xd000,
					  .tx_log2 = 2, .rx_log2 = 2, .vector = 1 };
	unsigned i;

	fz_input(data, size);

	if (ib) {
		data++;
		size--;
	}
	fz_setup_link(&s, 1, ib ? QHCA_LINK_IB : QHCA_LINK_ROCE);
	qhca_eth_start(&s.e, &eth);	/* refused on an InfiniBand port */
	for (i = 0; i < 4; i++) {
		struct qhca_eth_desc d = { .addr = FZ_BUF + 0x4000 + i * 0x800ull, .len = 0x800 };
		struct qhca_rq_wqe w = { .wr_id = i, .num_sge = 1 };
		struct qhca_sge sge = { .addr = 0x10000 + i * 0x1000ull, .length = 0x1000,
					.lkey = s.mr };
		unsigned q;

		memcpy(fz_mem + (eth.rx_ring - FZ_BASE) + i * 16, &d, sizeof(d));
		for (q = 0; q < 4; q++) {
			uint64_t rq = FZ_RINGS + 0x3000 + q * 0x2000ull + i * 64ull;

			memcpy(fz_mem + (rq - FZ_BASE), &w, sizeof(w));
			memcpy(fz_mem + (rq - FZ_BASE) + sizeof(w), &sge, sizeof(sge));
		}
	}
	qhca_engine_db_write(&s.e, QHCA_DB_ETH_RX, 4, 4);
	for (i = 0; i < 4; i++)
		qhca_engine_db_write(&s.e, QHCA_DB_RQ, fz_db(s.qpn[i], 4), 8);
	while (size >= 2) {
		unsigned raw = data[0] | data[1] << 8;
		size_t len = (ib ? raw & 0x7fff : raw) % sizeof(frame);

		data += 2;
		size -= 2;
		if (raw >= 0xfffe) {
			if (raw == 0xfffe)
				qhca_engine_tx_block(&s.e);
			else
				qhca_engine_tx_resume(&s.e);
			continue;
		}
		if (len > size)
			len = size;
		memcpy(frame, data, len);
		if (ib) {
			if (raw & 0x8000)
				ib_crc_update(frame, len);
		} else if (len > 14) {
			memcpy(frame, fz_cfg.mac, 6);	/* addressed to us */
			if (data[0] & 1)
				roce_icrc_update(frame, len);
		}
		qhca_engine_receive(&s.e, frame, len);
		data += len;
		size -= len;
	}
	qhca_engine_tx_resume(&s.e);
	fz_drain_timers(&s);
	qhca_engine_fini(&s.e);
	return 0;
}
