// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * qhca Ethernet function: a transmit ring and a receive ring of 16-byte descriptors in
 * guest memory, so that the guest's netdev carries IP, ARP and TCP over the same port as
 * RoCE. Descriptors are handed back with QHCA_ETH_DESC_DONE and one interrupt per batch.
 */
#include <stdlib.h>
#include <string.h>

#include "engine_internal.h"

static uint64_t desc_addr(uint64_t ring, uint32_t log2, uint32_t idx)
{
	return ring + (uint64_t)(idx & ((1u << log2) - 1)) * sizeof(struct qhca_eth_desc);
}

static bool ring_ok(uint64_t ring, uint32_t log2)
{
	return log2 >= 1 && log2 <= QHCA_ETH_RING_MAX_LOG2 && ring && ring % 4096 == 0 &&
	       ring + ((uint64_t)sizeof(struct qhca_eth_desc) << log2) > ring;
}

uint16_t qhca_eth_start(struct qhca_engine *e, const struct qhca_cmd_eth_start *c)
{
	struct qhca_eth *eth = &e->eth;

	if (!ring_ok(c->tx_ring, c->tx_log2) || !ring_ok(c->rx_ring, c->rx_log2) ||
	    c->vector >= e->cfg.msix_vectors || c->rsvd0 || c->rsvd1)
		return QHCA_ST_BAD_FIELD;
	if (eth->started)
		return QHCA_ST_BAD_STATE;
	if (!eth->frame) {
		eth->frame = malloc(QHCA_ETH_MAX_FRAME);
		if (!eth->frame)
			return QHCA_ST_NO_RESOURCES;
	}
	eth->tx_ring = c->tx_ring;
	eth->rx_ring = c->rx_ring;
	eth->tx_log2 = c->tx_log2;
	eth->rx_log2 = c->rx_log2;
	eth->vector = c->vector;
	eth->tx_ci = eth->tx_pi = eth->rx_ci = eth->rx_pi = 0;
	eth->started = true;
	qhca_log(e, QHCA_LOG_EVENT, "ethernet started: tx 2^%u rx 2^%u vector %u",
		 c->tx_log2, c->rx_log2, c->vector);
	return QHCA_ST_OK;
}

void qhca_eth_stop(struct qhca_engine *e)
{
	e->eth.started = false;
}

static void eth_notify(struct qhca_engine *e)
{
	uint16_t v = e->eth.vector;

	if (v >= 32 || !(e->intr_mask & (1u << v)))
		e->ops->notify(e->opaque, v);
}

/* Hand a descriptor back: its length (RX) and flags, after the data. */
static int writeback(struct qhca_engine *e, uint64_t addr, uint16_t len, uint16_t flags)
{
	struct {
		uint16_t len;
		uint16_t flags;
	} wb = { len, flags };

	return qhca_dma_write(e, addr + offsetof(struct qhca_eth_desc, len), &wb, sizeof(wb));
}

void qhca_eth_tx_doorbell(struct qhca_engine *e, uint32_t pi)
{
	struct qhca_eth *eth = &e->eth;
	bool done = false;

	if (!eth->started) {
		qhca_log_guest(e, "ethernet TX doorbell while stopped");
		return;
	}
	if (!qhca_ring_pi_ok(pi, eth->tx_ci, 1u << eth->tx_log2)) {
		qhca_log_guest(e, "ethernet TX producer %u too far ahead of %u", pi, eth->tx_ci);
		return;
	}
	eth->tx_pi = pi;
	while (eth->tx_ci != eth->tx_pi) {
		uint64_t da = desc_addr(eth->tx_ring, eth->tx_log2, eth->tx_ci);
		struct qhca_eth_desc d;
		uint16_t flags = QHCA_ETH_DESC_DONE;

		if (qhca_dma_read(e, da, &d, sizeof(d)))
			break;
		if (d.len < QHCA_ETH_MIN_FRAME || d.len > QHCA_ETH_MAX_FRAME ||
		    qhca_dma_read(e, d.addr, eth->frame, d.len)) {
			qhca_log_guest(e, "ethernet TX descriptor %u: bad frame addr 0x%llx len %u",
				       eth->tx_ci, (unsigned long long)d.addr, d.len);
			e->cnt.eth_tx_errors++;
			flags |= QHCA_ETH_DESC_ERROR;
		} else if (!e->link_up) {
			e->cnt.eth_tx_link_down++;
		} else {
			e->ops->xmit(e->opaque, eth->frame, d.len);
			e->cnt.eth_tx_frames++;
			e->cnt.eth_tx_bytes += d.len;
		}
		if (writeback(e, da, d.len, flags))
			break;
		eth->tx_ci++;
		done = true;
	}
	if (done)
		eth_notify(e);
}

void qhca_eth_rx_doorbell(struct qhca_engine *e, uint32_t pi)
{
	struct qhca_eth *eth = &e->eth;

	if (!eth->started) {
		qhca_log_guest(e, "ethernet RX doorbell while stopped");
		return;
	}
	if (!qhca_ring_pi_ok(pi, eth->rx_ci, 1u << eth->rx_log2)) {
		qhca_log_guest(e, "ethernet RX producer %u too far ahead of %u", pi, eth->rx_ci);
		return;
	}
	eth->rx_pi = pi;
}

void qhca_eth_receive(struct qhca_engine *e, const uint8_t *frame, size_t len)
{
	struct qhca_eth *eth = &e->eth;
	struct qhca_eth_desc d;
	uint64_t da;

	if (!eth->started) {
		e->cnt.eth_rx_stopped++;
		return;
	}
	if (eth->rx_ci == eth->rx_pi) {
		e->cnt.eth_rx_no_buffer++;
		return;
	}
	da = desc_addr(eth->rx_ring, eth->rx_log2, eth->rx_ci);
	if (qhca_dma_read(e, da, &d, sizeof(d)))
		return;
	if (len > d.len || len > QHCA_ETH_MAX_FRAME) {
		e->cnt.eth_rx_too_long++;	/* the buffer stays posted for the next frame */
		return;
	}
	if (qhca_dma_write(e, d.addr, frame, len)) {
		/* A bad buffer address: hand the descriptor back marked as an error. */
		writeback(e, da, 0, QHCA_ETH_DESC_DONE | QHCA_ETH_DESC_ERROR);
	} else if (writeback(e, da, (uint16_t)len, QHCA_ETH_DESC_DONE)) {
		return;
	} else {
		e->cnt.eth_rx_frames++;
		e->cnt.eth_rx_bytes += len;
	}
	eth->rx_ci++;
	eth_notify(e);
}
