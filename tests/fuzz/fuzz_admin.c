// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Fuzz target: the admin command processor and the registers. The input is a series of
 * records: a register write, or a 64-byte command (and 192 bytes of argument memory) put
 * on the admin queue and rung.
 */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct fz_state s;
	uint32_t tail = 0;

	fz_input(data, size);

	fz_setup(&s, size & 1);
	while (size >= 1) {
		uint8_t kind = *data++;

		size--;
		if ((kind & 3) == 0 && size >= 8) {
			uint32_t off, val;

			memcpy(&off, data, 4);
			memcpy(&val, data + 4, 4);
			qhca_engine_reg_write(&s.e, off & 0xffc, val);
			qhca_engine_reg_read(&s.e, (off >> 12) & 0xffc);
			data += 8;
			size -= 8;
		} else if ((kind & 3) == 1 && size >= 8) {
			uint64_t v;

			memcpy(&v, data, 8);
			qhca_engine_db_write(&s.e, (uint64_t)(kind >> 2) << 3 |
					     (uint64_t)(kind & 0x80) << 5, v, 8);
			data += 8;
			size -= 8;
		} else if (size >= QHCA_CMD_SIZE) {
			size_t arg = size - QHCA_CMD_SIZE < 192 ? size - QHCA_CMD_SIZE : 192;

			memcpy(fz_mem + (FZ_ASQ - FZ_BASE) + (tail & 15) * QHCA_CMD_SIZE, data,
			       QHCA_CMD_SIZE);
			memcpy(fz_mem + (FZ_ARGS - FZ_BASE), data + QHCA_CMD_SIZE, arg);
			tail = (tail + 1) & 15;
			qhca_engine_reg_write(&s.e, QHCA_REG_ASQ_TAIL, tail);
			/* Consume completions so the ring never stays full. */
			qhca_engine_reg_write(&s.e, QHCA_REG_ACQ_HEAD, tail ? tail - 1 : 15);
			data += QHCA_CMD_SIZE + arg;
			size -= QHCA_CMD_SIZE + arg;
		} else {
			break;
		}
	}
	fz_drain_timers(&s);
	qhca_engine_fini(&s.e);
	return 0;
}
