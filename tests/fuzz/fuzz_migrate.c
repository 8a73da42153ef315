// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Fuzz target: the loader of saved device states (migrate.c), the one way an incoming
 * migration stream reaches the engine. A real stream is saved once from the deep set-up of
 * fuzz_common.h (regions, windows, a fast-register region, CQs, QPs of every type, an SRQ,
 * XRC); the input then edits it: records of an operation byte and its arguments
 *   0: off32 n8 bytes   XOR n bytes at off (modulo the length)
 *   1: off32 val32      set the 32-bit word at off (counts, handles, indexes)
 *   2: off32            cut the stream at off
 *   3: off32 n8 bytes   insert n bytes at off
 * A stream that loads is then used: resumed, described, its timers run and the device reset.
 */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_STREAM	(1u << 20)

static uint8_t *base;
static size_t base_len;
static struct qhca_engine_config base_cfg;	/* the destination's: the source's */

static void make_base(void)
{
	static struct fz_state s;

	fz_input((const uint8_t *)"", 0);
	fz_setup(&s, 1);
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
		int i;

		qhca_engine_resume(e);
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
