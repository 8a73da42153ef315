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
	/* Send one Ethernet frame on the port's netdev. */
	void (*xmit)(void *opaque, const void *frame, size_t len);
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

#define QHCA_MAX_EQ		64

struct qhca_eq {
	uint64_t ring;
	uint32_t log2;
	uint32_t pi;		/* device producer index, free running */
	uint32_t ci;		/* consumer index from the last doorbell, free running */
	uint16_t vector;
	bool overflowed;	/* events were dropped; report it when there is room */
};

struct qhca_eth {
	bool started;
	uint64_t tx_ring, rx_ring;
	uint32_t tx_log2, rx_log2;
	uint32_t tx_ci, tx_pi;	/* free running */
	uint32_t rx_ci, rx_pi;
	uint16_t vector;
	uint8_t *frame;		/* one frame of QHCA_ETH_MAX_FRAME bytes */
};

/* Device statistics; names as in docs/device-interface.md. */
struct qhca_counters {
	uint64_t eth_tx_frames, eth_tx_bytes, eth_tx_errors, eth_tx_link_down;
	uint64_t eth_rx_frames, eth_rx_bytes, eth_rx_no_buffer, eth_rx_too_long, eth_rx_stopped;
	uint64_t eq_overflows;
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
	struct qhca_obj_table eq_table;
	struct qhca_eq eq[QHCA_MAX_EQ];
	int async_eq;		/* index of the async event queue, or -1 */

	/* port and Ethernet function */
	bool link_up;
	struct qhca_eth eth;
	struct qhca_counters cnt;

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

/* A frame from the wire. The engine always takes it (it may drop and count it). */
void qhca_engine_receive(struct qhca_engine *e, const uint8_t *frame, size_t len);

/* The port's link went up or down (netdev carrier); raises a port event. */
void qhca_engine_set_link(struct qhca_engine *e, bool up);

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

/* eq.c */
uint16_t qhca_eq_create(struct qhca_engine *e, const struct qhca_cmd_create_eq *c,
			uint32_t *handle);
uint16_t qhca_eq_destroy(struct qhca_engine *e, uint32_t handle);
void qhca_eq_reset(struct qhca_engine *e);
void qhca_eq_doorbell(struct qhca_engine *e, uint64_t value);
/* Post an event to EQ @idx; returns -1 if it was dropped (queue full or DMA error). */
int qhca_eq_post(struct qhca_engine *e, int idx, uint8_t type, uint32_t handle, uint64_t data);
void qhca_event_async(struct qhca_engine *e, uint8_t type, uint32_t handle, uint64_t data);

/* eth.c */
uint16_t qhca_eth_start(struct qhca_engine *e, const struct qhca_cmd_eth_start *c);
void qhca_eth_stop(struct qhca_engine *e);
void qhca_eth_tx_doorbell(struct qhca_engine *e, uint32_t pi);
void qhca_eth_rx_doorbell(struct qhca_engine *e, uint32_t pi);
void qhca_eth_receive(struct qhca_engine *e, const uint8_t *frame, size_t len);

/* A free-running producer index from the guest is sane if it is at most @size ahead of
 * the consumer index. */
static inline bool qhca_ring_pi_ok(uint32_t pi, uint32_t ci, uint32_t size)
{
	return pi - ci <= size;
}

void qhca_admin_reset(struct qhca_engine *e);
bool qhca_admin_enable(struct qhca_engine *e);
void qhca_admin_sq_doorbell(struct qhca_engine *e, uint32_t tail);
void qhca_admin_cq_doorbell(struct qhca_engine *e, uint32_t head);

#endif /* QHCA_ENGINE_H */
