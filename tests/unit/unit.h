/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * A minimal unit test harness: TEST() functions registered in a table, CHECK() that
 * records failures with file and line, and a summary line "N passed, N failed".
 */
#ifndef QHCA_UNIT_H
#define QHCA_UNIT_H

#include <stdio.h>
#include <string.h>

static int unit_failures;
static const char *unit_skip_reason;	/* set by SKIP(): the test did not run */

/* Leave the running test as skipped: TAP's "ok - NAME # SKIP REASON", which check.sh counts
 * as skipped, never as passed. */
#define SKIP(reason)                                                                  \
	do {                                                                          \
		unit_skip_reason = (reason);                                          \
		return;                                                               \
	} while (0)

#define CHECK(cond)                                                                   \
	do {                                                                          \
		if (!(cond)) {                                                        \
			fprintf(stderr, "  %s:%d: CHECK(%s) failed\n", __FILE__,      \
				__LINE__, #cond);                                     \
			unit_failures++;                                              \
		}                                                                     \
	} while (0)

#define CHECK_EQ(a, b)                                                                \
	do {                                                                          \
		unsigned long long _a = (unsigned long long)(a);                      \
		unsigned long long _b = (unsigned long long)(b);                      \
		if (_a != _b) {                                                       \
			fprintf(stderr, "  %s:%d: %s == %s failed: 0x%llx != 0x%llx\n", \
				__FILE__, __LINE__, #a, #b, _a, _b);                  \
			unit_failures++;                                              \
		}                                                                     \
	} while (0)

struct unit_test {
	const char *name;
	void (*fn)(void);
};

/* Run every test in @tests (NULL-terminated) whose name contains argv[1], if given. */
static inline int unit_main(const struct unit_test *tests, int argc, char **argv)
{
	int passed = 0, failed = 0, skipped = 0;

	for (; tests->name; tests++) {
		int before = unit_failures;

		if (argc > 1 && !strstr(tests->name, argv[1]))
			continue;
		unit_skip_reason = NULL;
		tests->fn();
		if (unit_failures == before && unit_skip_reason) {
			printf("ok - %s # SKIP %s\n", tests->name, unit_skip_reason);
			skipped++;
		} else if (unit_failures == before) {
			printf("ok - %s\n", tests->name);
			passed++;
		} else {
			printf("not ok - %s\n", tests->name);
			failed++;
		}
	}
	if (skipped)
		printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
	else
		printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}

#endif /* QHCA_UNIT_H */
