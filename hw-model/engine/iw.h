/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The iWARP port (iw_cm.c, iw_tx.c, iw_rx.c; what they share inside is iw_conn.h): TCP
 * the device terminates, MPA's set-up, the QHCA_CMD_IW_* commands and QHCA_EVENT_IW_*
 * events, the RDMAP/DDP datapath. Only on a port of link=iwarp.
 */
#ifndef QHCA_IW_H
#define QHCA_IW_H

#include <stdbool.h>
#include <stdint.h>

#include "qhca_abi.h"
#include "siphash.h"
#include "tcp.h"

#define QHCA_IW_MAX_CONN	1024	/* connections of a device, in every state */
#define QHCA_IW_MAX_LISTEN	64

struct qhca_engine;

int qhca_iw_init(struct qhca_engine *e);	/* nothing unless link=iwarp */
void qhca_iw_fini(struct qhca_engine *e);
void qhca_iw_reset(struct qhca_engine *e);
/* A frame for one of our connections or listeners: taken (true), else the netdev's. */
bool qhca_iw_receive(struct qhca_engine *e, const uint8_t *frame, size_t len);
/* A frame of ours looped back (xmit.c): to a connection or listener, or answered by a RST. */
void qhca_iw_loop_receive(struct qhca_engine *e, const uint8_t *frame, size_t len);
void qhca_iw_timer(struct qhca_engine *e, uint64_t now);
struct qhca_qp;
/* The QP's send queue on its connection (from qhca_req_run); its connection reset when it
 * goes (destroy, reset, error). */
void qhca_iw_req_run(struct qhca_engine *e, struct qhca_qp *qp);
void qhca_iw_qp_gone(struct qhca_engine *e, struct qhca_qp *qp);
uint64_t qhca_iw_deadline(const struct qhca_engine *e);
/* For the tests and fuzzers: NULL if the connections' bookkeeping (deadline heap, reap
 * queue, hash) is right, else what is wrong. O(connections). */
const char *qhca_iw_check(const struct qhca_engine *e);
/* TCP's segments sent again and its retransmission timeouts, every connection's since the
 * device began (an iWARP port's RETRANSMITS and TIMEOUTS counters). */
void qhca_iw_tcp_counts(const struct qhca_engine *e, uint64_t *retransmits, uint64_t *timeouts);

/* A record for a command's argument or answer (NULL unless link=iwarp). */
struct qhca_iw_conn *qhca_iw_scratch(struct qhca_engine *e);
uint16_t qhca_iw_listen(struct qhca_engine *e, const struct qhca_iw_listen *a, uint32_t *handle);
uint16_t qhca_iw_unlisten(struct qhca_engine *e, uint32_t handle);
uint16_t qhca_iw_connect(struct qhca_engine *e, uint32_t qpn, const struct qhca_iw_conn *a,
			 uint32_t *handle);
uint16_t qhca_iw_accept(struct qhca_engine *e, uint32_t handle, const struct qhca_iw_conn *a);
uint16_t qhca_iw_reject(struct qhca_engine *e, uint32_t handle, const struct qhca_iw_conn *a);
uint16_t qhca_iw_query(struct qhca_engine *e, uint32_t handle, struct qhca_iw_conn *out);
uint16_t qhca_iw_disconnect(struct qhca_engine *e, uint32_t handle,
			    const struct qhca_iw_conn *a);

#endif /* QHCA_IW_H */
