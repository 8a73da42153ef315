/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * qhca engine, public interface: the device's behaviour in plain C. It includes no QEMU
 * header and reaches the outside world only through struct qhca_engine_ops, so unit tests
 * and fuzzers can link it alone with a fake guest memory. A platform (the QEMU adapter)
 * needs this header only; engine_internal.h is for the engine's own files, its unit tests
 * and fuzzers.
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
	/* Send one Ethernet frame on the port's netdev. The platform may call
	 * qhca_engine_tx_block() when its queue fills, then qhca_engine_tx_resume(). */
	void (*xmit)(void *opaque, const void *frame, size_t len);
	/* Monotonic time in nanoseconds, and the one engine timer: call
	 * qhca_engine_timer() at or after @deadline_ns (UINT64_MAX: cancel). */
	uint64_t (*now_ns)(void *opaque);
	void (*timer_arm)(void *opaque, uint64_t deadline_ns);
	/* Diagnostics; @log_enabled may be NULL (then everything is logged). */
	bool (*log_enabled)(void *opaque, enum qhca_log_level level);
	void (*log)(void *opaque, enum qhca_log_level level, const char *func, const char *msg);
	/* The teaching trace: one line a datapath step, "kind key=value ..." (trace.c lists
	 * them), while qhca_engine_set_tracing() has it on. May be NULL. */
	void (*step)(void *opaque, const char *line);
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
	uint8_t link;		/* the port's link layer: QHCA_LINK_ROCE, _IB or _IWARP */
	uint8_t mac[6];
	uint64_t key_secret;	/* mixed into MR keys (see mem.c); 0 in tests */
	uint64_t isn_secret[2];	/* iWARP: the SipHash key of TCP's ISNs (RFC 6528), apart
				 * from key_secret (rkeys show bits of it); not migrated */
	/* Host memory for everything a guest sizes (object records, their page lists, send
	 * windows), all objects together, in MiB: a create past it fails with NO_RESOURCES
	 * (mem.c, "host memory"). 0: QHCA_HOST_MEM_MB. */
	uint32_t host_mem_mb;
	/* Host bytes for the snapshots of send WQEs in flight, all QPs together; past it new
	 * QPs get smaller windows (qp.c). 0: QHCA_QP_WINDOW_BUDGET or half of host_mem_mb,
	 * whichever is less. Not a property. */
	uint64_t qp_window_budget;
};

/* Bounds for the configuration; qhca_engine_config_check() enforces them. */
#define QHCA_MAX_DB_PAGES	4096
#define QHCA_MAX_OBJECTS	(1u << 20)
#define QHCA_MAX_QP_WR		(1u << 15)
#define QHCA_MAX_CQE		(1u << 22)
#define QHCA_MAX_SGE		32
#define QHCA_MAX_INLINE		1024
#define QHCA_HOST_MEM_MB	1024		/* default of host_mem_mb */
#define QHCA_MAX_HOST_MEM_MB	(1u << 20)

/* Check a configuration; on failure return false and put the reason in @why. */
bool qhca_engine_config_check(const struct qhca_engine_config *cfg, char *why, size_t why_len);

struct qhca_engine;

/* Create the engine for a valid configuration; NULL if out of memory. */
struct qhca_engine *qhca_engine_new(const struct qhca_engine_config *cfg,
				    const struct qhca_engine_ops *ops, void *opaque);
void qhca_engine_free(struct qhca_engine *e);
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

/* The engine timer armed through ops->timer_arm expired. */
void qhca_engine_timer(struct qhca_engine *e);

/*
 * Back-pressure from the platform's transmit path: after tx_block the requesters send no
 * new packet (frames already due, such as ACKs and READ responses, still go to xmit);
 * tx_resume lets them continue where they stopped.
 */
void qhca_engine_tx_block(struct qhca_engine *e);
void qhca_engine_tx_resume(struct qhca_engine *e);
bool qhca_engine_tx_blocked(const struct qhca_engine *e);

/* The teaching trace on or off (off after qhca_engine_new; needs ops->step). */
void qhca_engine_set_tracing(struct qhca_engine *e, bool on);

/*
 * The device's view of its objects (port, QPs, CQs, SRQs, regions) as one JSON object in
 * @buf (NUL-terminated; an object with "error" if it does not fit); returns its length.
 */
size_t qhca_engine_describe(struct qhca_engine *e, char *buf, size_t cap);

/*
 * The device's whole state as one byte stream (live migration, snapshots; migrate.c).
 * qhca_engine_save: the state of @e in a malloc'd *@buf of *@len bytes; -1 if out of
 * memory. Call it with the platform quiet (the VM stopped): it changes nothing.
 * qhca_engine_load: a new engine for @cfg (the destination's properties, which must be the
 * source's) in the state of @buf; NULL with the reason in @why if the stream is malformed,
 * of another version or configuration, or past the host memory budget. The stream is
 * untrusted: it is checked as thoroughly as a guest's commands. The platform then frees
 * its old engine, and calls qhca_engine_resume() once it runs (its timer is not armed
 * before, and frames waiting to be sent go out then).
 * qhca_engine_state_max: no stream for @cfg is longer (a bound for the platform to read).
 */
int qhca_engine_save(struct qhca_engine *e, uint8_t **buf, size_t *len);
struct qhca_engine *qhca_engine_load(const struct qhca_engine_config *cfg,
				     const struct qhca_engine_ops *ops, void *opaque,
				     const uint8_t *buf, size_t len, char *why, size_t why_len);
void qhca_engine_resume(struct qhca_engine *e);
size_t qhca_engine_state_max(const struct qhca_engine_config *cfg);

#endif /* QHCA_ENGINE_H */
