/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * qhca engine: the device's behaviour in plain C. It includes no QEMU header and reaches the
 * outside world only through struct qhca_engine_ops, so unit tests and fuzzers can link it
 * alone with a fake guest memory.
 */
#ifndef QHCA_ENGINE_H
#define QHCA_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "qhca_abi.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "qhca engine: only little-endian hosts are supported for now"
#endif

enum qhca_log_level {
	QHCA_LOG_EVENT,		/* normal operation, for teaching and debugging */
	QHCA_LOG_ERR,		/* the device could not do what it should (host side) */
	QHCA_LOG_GUEST,		/* the guest broke a rule of the interface */
};

struct qhca_engine_ops {
	/* Guest memory. Return 0 on success, -1 if any byte could not be accessed. */
	int (*dma_read)(void *opaque, uint64_t addr, void *buf, size_t len);
	int (*dma_write)(void *opaque, uint64_t addr, const void *buf, size_t len);
	/* Signal MSI-X vector @vector. */
	void (*notify)(void *opaque, unsigned vector);
	/* Diagnostics; @log_enabled may be NULL (then everything is logged). */
	bool (*log_enabled)(void *opaque, enum qhca_log_level level);
	void (*log)(void *opaque, enum qhca_log_level level, const char *func, const char *msg);
};

/* Limits, fixed when the device is created (QEMU properties). */
struct qhca_engine_config {
	uint32_t db_pages;	/* doorbell pages; user contexts get pages 1..db_pages-1 */
	uint32_t msix_vectors;
	uint32_t max_pd;
	uint32_t max_qp;
	uint32_t max_qp_wr;
	uint32_t max_cq;
	uint32_t max_cqe;
	uint32_t max_mr;
	uint32_t max_mr_size_mb;
	uint32_t max_srq;
	uint32_t max_sge;
	uint32_t max_inline;
	uint32_t mtu;		/* largest path MTU in bytes: 256, 512, 1024, 2048 or 4096 */
	uint8_t mac[6];
};

/* Bounds for the configuration; qhca_engine_config_check() enforces them. */
#define QHCA_MAX_DB_PAGES	4096
#define QHCA_MAX_OBJECTS	(1u << 20)
#define QHCA_MAX_QP_WR		(1u << 15)
#define QHCA_MAX_CQE		(1u << 22)
#define QHCA_MAX_SGE		32
#define QHCA_MAX_INLINE		1024

/*
 * A table of objects addressed by handles. A handle is (generation << 20) | (index + 1): 0
 * is never valid, and a stale handle of a destroyed object is rejected because its
 * generation no longer matches.
 */
struct qhca_obj_table {
	uint32_t capacity;
	uint32_t count;
	uint16_t *gen;		/* generation of each slot; bit 15 marks a slot in use */
	uint32_t *owner;	/* parent handle (user context), kept per slot */
};

struct qhca_engine {
	const struct qhca_engine_ops *ops;
	void *opaque;
	struct qhca_engine_config cfg;

	/* registers */
	uint32_t ctrl;
	uint32_t status;
	uint32_t error;
	uint32_t intr_mask;
	uint64_t asq_base;
	uint64_t acq_base;
	uint32_t aq_depth_log2;

	/* admin queue state */
	uint32_t asq_head;	/* next command the device reads */
	uint32_t asq_tail;	/* producer index from the last doorbell */
	uint32_t acq_tail;	/* next completion slot the device writes */
	uint32_t acq_head;	/* consumer index from the last doorbell */
	uint16_t acq_phase;

	/* objects */
	struct qhca_obj_table uctx;
	struct qhca_obj_table pd;

	/* counters, for tests and statistics */
	uint64_t admin_cmds;
	uint64_t admin_errors;
};

/* Check a configuration; on failure return false and put the reason in @why. */
bool qhca_engine_config_check(const struct qhca_engine_config *cfg, char *why, size_t why_len);

/* Create the engine for a valid configuration; returns -1 if out of memory. */
int qhca_engine_init(struct qhca_engine *e, const struct qhca_engine_config *cfg,
		     const struct qhca_engine_ops *ops, void *opaque);
void qhca_engine_fini(struct qhca_engine *e);
void qhca_engine_reset(struct qhca_engine *e);

/* BAR0 access: aligned 32-bit register reads and writes. */
uint32_t qhca_engine_reg_read(struct qhca_engine *e, uint32_t offset);
void qhca_engine_reg_write(struct qhca_engine *e, uint32_t offset, uint32_t value);

/* Doorbell BAR access (page = offset / QHCA_DB_PAGE_SIZE). */
void qhca_engine_db_write(struct qhca_engine *e, uint64_t offset, uint64_t value, unsigned size);

/* --- internal to the engine ---------------------------------------------------------- */

void qhca_logf(struct qhca_engine *e, enum qhca_log_level level, const char *func,
	       const char *fmt, ...) __attribute__((format(printf, 4, 5)));
#define qhca_log(e, level, ...) qhca_logf((e), (level), __func__, __VA_ARGS__)
#define qhca_log_guest(e, ...) qhca_logf((e), QHCA_LOG_GUEST, __func__, __VA_ARGS__)

/* The one checked path into guest memory: rejects wrap, zero address, oversize. */
#define QHCA_DMA_MAX_LEN	(1u << 24)
int qhca_dma_read(struct qhca_engine *e, uint64_t addr, void *buf, size_t len);
int qhca_dma_write(struct qhca_engine *e, uint64_t addr, const void *buf, size_t len);

int qhca_obj_table_init(struct qhca_obj_table *t, uint32_t capacity);
void qhca_obj_table_fini(struct qhca_obj_table *t);
void qhca_obj_table_clear(struct qhca_obj_table *t);
/* Allocate a slot; returns its handle or 0 if the table is full. */
uint32_t qhca_obj_alloc(struct qhca_obj_table *t, uint32_t owner);
/* Slot index of a live handle, or -1. */
int64_t qhca_obj_lookup(const struct qhca_obj_table *t, uint32_t handle);
void qhca_obj_free(struct qhca_obj_table *t, uint32_t handle);
/* Is any live object of @t owned by @owner? */
bool qhca_obj_owned_by(const struct qhca_obj_table *t, uint32_t owner);

void qhca_admin_reset(struct qhca_engine *e);
bool qhca_admin_enable(struct qhca_engine *e);
void qhca_admin_sq_doorbell(struct qhca_engine *e, uint32_t tail);
void qhca_admin_cq_doorbell(struct qhca_engine *e, uint32_t head);

#endif /* QHCA_ENGINE_H */
