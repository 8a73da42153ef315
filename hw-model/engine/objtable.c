// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * qhca engine: the object tables. Every object the guest creates (PD, MR, CQ, QP, SRQ, AH,
 * user context, iWARP connection) is a slot of a table of fixed capacity; its handle is
 * the slot with a generation, so a stale handle names nothing; objects that name another
 * hold it (a reference count) while they live.
 */
#include <stdlib.h>
#include <string.h>

#include "engine_internal.h"

/*
 * Free slots wait in a FIFO, so a freed slot is reused as late as possible: together with
 * the generation this keeps stale handles and keys from naming a new object for long.
 * Allocation and freeing take constant time whatever the table's size.
 */
static void free_q_reset(struct qhca_obj_table *t)
{
	uint32_t i;

	t->free_head = 0;
	for (i = 0; i < t->capacity; i++)
		t->free_q[i] = i;
}

int qhca_obj_table_init(struct qhca_obj_table *t, uint32_t capacity)
{
	size_t n = capacity ? capacity : 1;

	memset(t, 0, sizeof(*t));
	if (capacity > QHCA_MAX_OBJECTS)
		return -1;
	t->gen = calloc(n, sizeof(*t->gen));
	t->owner = calloc(n, sizeof(*t->owner));
	t->users = calloc(n, sizeof(*t->users));
	t->free_q = calloc(n, sizeof(*t->free_q));
	if (!t->gen || !t->owner || !t->users || !t->free_q) {
		qhca_obj_table_fini(t);
		return -1;
	}
	t->capacity = capacity;
	free_q_reset(t);
	return 0;
}

void qhca_obj_table_fini(struct qhca_obj_table *t)
{
	free(t->gen);
	free(t->owner);
	free(t->users);
	free(t->free_q);
	memset(t, 0, sizeof(*t));
}

void qhca_obj_table_clear(struct qhca_obj_table *t)
{
	uint32_t i;

	/* Keep generations so that handles from before the reset stay invalid. */
	for (i = 0; i < t->capacity; i++) {
		if (t->gen[i] & OBJ_USED)
			t->gen[i] = ((t->gen[i] + 1) & OBJ_GEN_MASK);
		t->owner[i] = 0;
		t->users[i] = 0;
	}
	t->count = 0;
	free_q_reset(t);
}

uint32_t qhca_obj_alloc(struct qhca_obj_table *t, uint32_t owner)
{
	uint32_t i;

	if (t->count >= t->capacity)
		return 0;
	i = t->free_q[t->free_head];
	t->free_head = (t->free_head + 1) % t->capacity;
	t->gen[i] |= OBJ_USED;
	t->owner[i] = owner;
	t->users[i] = 0;
	t->count++;
	return QHCA_FIELD_PREP(OBJ_HANDLE_GEN_MASK, t->gen[i]) |
	       QHCA_FIELD_PREP(OBJ_HANDLE_INDEX_MASK, i + 1);
}

int64_t qhca_obj_lookup(const struct qhca_obj_table *t, uint32_t handle)
{
	uint32_t idx = QHCA_FIELD_GET(OBJ_HANDLE_INDEX_MASK, handle);
	uint32_t gen = QHCA_FIELD_GET(OBJ_HANDLE_GEN_MASK, handle);

	if (idx == 0 || idx > t->capacity ||
	    (handle & ~(OBJ_HANDLE_GEN_MASK | OBJ_HANDLE_INDEX_MASK)))
		return -1;
	idx--;
	if (t->gen[idx] != (OBJ_USED | gen))
		return -1;
	return idx;
}

/* Slot of the live object whose handle has the bits @key in @mask (a mask that covers the
 * index bits), or -1: for numbers narrower than a handle (XRC SRQ numbers). */
int64_t qhca_obj_lookup_masked(const struct qhca_obj_table *t, uint32_t key, uint32_t mask)
{
	uint32_t idx = QHCA_FIELD_GET(OBJ_HANDLE_INDEX_MASK, key), h;

	if (idx == 0 || idx > t->capacity || (key & ~mask) || !(t->gen[idx - 1] & OBJ_USED))
		return -1;
	h = QHCA_FIELD_PREP(OBJ_HANDLE_GEN_MASK, t->gen[idx - 1] & OBJ_GEN_MASK) |
	    QHCA_FIELD_PREP(OBJ_HANDLE_INDEX_MASK, idx);
	return (h & mask) == key ? (int64_t)idx - 1 : -1;
}

uint32_t qhca_obj_generation(uint32_t handle)
{
	return QHCA_FIELD_GET(OBJ_HANDLE_GEN_MASK, handle);
}

void qhca_obj_hold(struct qhca_obj_table *t, uint32_t handle)
{
	int64_t idx = qhca_obj_lookup(t, handle);

	if (idx >= 0)
		t->users[idx]++;
}

void qhca_obj_unhold(struct qhca_obj_table *t, uint32_t handle)
{
	int64_t idx = qhca_obj_lookup(t, handle);

	if (idx >= 0 && t->users[idx])
		t->users[idx]--;
}

uint32_t qhca_obj_users(const struct qhca_obj_table *t, uint32_t handle)
{
	int64_t idx = qhca_obj_lookup(t, handle);

	return idx < 0 ? 0 : t->users[idx];
}

void qhca_obj_free(struct qhca_obj_table *t, uint32_t handle)
{
	int64_t idx = qhca_obj_lookup(t, handle);

	if (idx < 0)
		return;
	t->gen[idx] = (t->gen[idx] + 1) & OBJ_GEN_MASK;
	t->owner[idx] = 0;
	t->users[idx] = 0;
	t->free_q[(t->free_head + t->capacity - t->count) % t->capacity] = (uint32_t)idx;
	t->count--;
}

