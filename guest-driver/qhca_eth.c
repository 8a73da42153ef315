// SPDX-License-Identifier: GPL-2.0
/*
 * qhca Ethernet netdev: the device's Ethernet function, so that IP, ARP and TCP run over
 * the same port as RoCE and ib_core fills the RoCE GID table from the netdev's addresses.
 * One TX and one RX ring of 16-byte descriptors, completions on MSI-X vector 1, NAPI.
 */
#include <linux/dma-mapping.h>
#include <linux/etherdevice.h>
#include <linux/if_vlan.h>
#include <linux/interrupt.h>
#include <linux/io.h>
#include <linux/netdevice.h>

#include "qhca.h"

#define QHCA_ETH_RING_SIZE	(1u << QHCA_ETH_RING_LOG2)
#define QHCA_ETH_RX_BUF		(QHCA_ETH_MAX_FRAME + NET_IP_ALIGN)
#define QHCA_ETH_NAPI_WEIGHT	64

struct qhca_eth_slot {
	struct sk_buff *skb;
	dma_addr_t dma;
	u32 len;
};

struct qhca_eth_ring {
	struct qhca_eth_desc *desc;
	dma_addr_t dma;
	struct qhca_eth_slot slot[QHCA_ETH_RING_SIZE];
	u32 pi;		/* next descriptor the driver fills (free running) */
	u32 ci;		/* next descriptor the driver expects back */
};

struct qhca_netdev {
	struct qhca_dev *dev;
	struct net_device *netdev;
	struct napi_struct napi;
	struct qhca_eth_ring tx;
	struct qhca_eth_ring rx;
	spinlock_t tx_lock;	/* xmit against NAPI's TX reclaim */
};

static struct device *qhca_dma_dev(struct qhca_netdev *qn)
{
	return &qn->dev->pdev->dev;
}

static int qhca_eth_ring_alloc(struct qhca_netdev *qn, struct qhca_eth_ring *r)
{
	memset(r->slot, 0, sizeof(r->slot));
	r->pi = r->ci = 0;
	r->desc = dma_alloc_coherent(qhca_dma_dev(qn), QHCA_ETH_RING_SIZE * sizeof(*r->desc),
				     &r->dma, GFP_KERNEL);
	return r->desc ? 0 : -ENOMEM;
}

/*
 * Free a ring and its buffers. With @keep (the device may still use the ring: ETH_STOP
 * failed on a dead admin queue) the descriptors go to the admin queue until the device is
 * reset, and the buffers the descriptors point at stay mapped and allocated: leaked on
 * purpose.
 */
static void qhca_eth_ring_free(struct qhca_netdev *qn, struct qhca_eth_ring *r,
			       enum dma_data_direction dir, bool keep)
{
	u32 i;

	if (keep) {
		qhca_admin_put_coherent(qn->dev, true, QHCA_ETH_RING_SIZE * sizeof(*r->desc),
					r->desc, r->dma);
		memset(r->slot, 0, sizeof(r->slot));
		r->desc = NULL;
		return;
	}
	for (i = 0; i < QHCA_ETH_RING_SIZE; i++) {
		struct qhca_eth_slot *s = &r->slot[i];

		if (!s->skb)
			continue;
		dma_unmap_single(qhca_dma_dev(qn), s->dma, s->len, dir);
		dev_kfree_skb_any(s->skb);
		s->skb = NULL;
	}
	if (r->desc)
		dma_free_coherent(qhca_dma_dev(qn), QHCA_ETH_RING_SIZE * sizeof(*r->desc),
				  r->desc, r->dma);
	r->desc = NULL;
}

/* Post one RX buffer at rx.pi; the caller rings the doorbell. */
static int qhca_eth_post_rx(struct qhca_netdev *qn)
{
	struct qhca_eth_ring *r = &qn->rx;
	u32 idx = r->pi & (QHCA_ETH_RING_SIZE - 1);
	struct qhca_eth_slot *s = &r->slot[idx];
	struct sk_buff *skb;

	skb = netdev_alloc_skb_ip_align(qn->netdev, QHCA_ETH_MAX_FRAME);
	if (!skb)
		return -ENOMEM;
	s->dma = dma_map_single(qhca_dma_dev(qn), skb->data, QHCA_ETH_MAX_FRAME,
				DMA_FROM_DEVICE);
	if (dma_mapping_error(qhca_dma_dev(qn), s->dma)) {
		dev_kfree_skb_any(skb);
		return -ENOMEM;
	}
	s->skb = skb;
	s->len = QHCA_ETH_MAX_FRAME;
	r->desc[idx].addr = s->dma;
	r->desc[idx].len = QHCA_ETH_MAX_FRAME;
	r->desc[idx].flags = 0;
	r->pi++;
	return 0;
}

static void qhca_eth_rx_doorbell(struct qhca_netdev *qn)
{
	dma_wmb();	/* descriptors before the doorbell */
	writel(qn->rx.pi, qn->dev->db0 + QHCA_DB_ETH_RX);
}

static int qhca_eth_reclaim_tx(struct qhca_netdev *qn, int budget)
{
	struct qhca_eth_ring *r = &qn->tx;
	int done = 0;

	spin_lock(&qn->tx_lock);
	while (r->ci != r->pi) {
		u32 idx = r->ci & (QHCA_ETH_RING_SIZE - 1);
		struct qhca_eth_slot *s = &r->slot[idx];
		u16 flags = READ_ONCE(r->desc[idx].flags);

		if (!(flags & QHCA_ETH_DESC_DONE))
			break;
		dma_rmb();
		dma_unmap_single(qhca_dma_dev(qn), s->dma, s->len, DMA_TO_DEVICE);
		if (flags & QHCA_ETH_DESC_ERROR) {
			qn->netdev->stats.tx_errors++;
		} else {
			qn->netdev->stats.tx_packets++;
			qn->netdev->stats.tx_bytes += s->len;
		}
		napi_consume_skb(s->skb, budget);
		s->skb = NULL;
		r->ci++;
		done++;
	}
	if (done && netif_queue_stopped(qn->netdev) &&
	    r->pi - r->ci < QHCA_ETH_RING_SIZE / 2)
		netif_wake_queue(qn->netdev);
	spin_unlock(&qn->tx_lock);
	return done;
}

static int qhca_eth_receive(struct qhca_netdev *qn, int budget)
{
	struct qhca_eth_ring *r = &qn->rx;
	int done = 0;

	while (done < budget && r->ci != r->pi) {
		u32 idx = r->ci & (QHCA_ETH_RING_SIZE - 1);
		struct qhca_eth_slot *s = &r->slot[idx];
		struct sk_buff *skb = s->skb;
		u16 flags = READ_ONCE(r->desc[idx].flags);
		u16 len;

		if (!(flags & QHCA_ETH_DESC_DONE))
			break;
		dma_rmb();
		len = r->desc[idx].len;
		dma_unmap_single(qhca_dma_dev(qn), s->dma, s->len, DMA_FROM_DEVICE);
		s->skb = NULL;
		r->ci++;
		done++;
		if ((flags & QHCA_ETH_DESC_ERROR) || len < ETH_HLEN || len > s->len) {
			qn->netdev->stats.rx_errors++;
			dev_kfree_skb_any(skb);
		} else {
			skb_put(skb, len);
			skb->protocol = eth_type_trans(skb, qn->netdev);
			qn->netdev->stats.rx_packets++;
			qn->netdev->stats.rx_bytes += len;
			napi_gro_receive(&qn->napi, skb);
		}
		if (qhca_eth_post_rx(qn))
			qn->netdev->stats.rx_dropped++;
	}
	if (done)
		qhca_eth_rx_doorbell(qn);
	return done;
}

static int qhca_eth_poll(struct napi_struct *napi, int budget)
{
	struct qhca_netdev *qn = container_of(napi, struct qhca_netdev, napi);
	int done;

	qhca_eth_reclaim_tx(qn, budget);
	done = qhca_eth_receive(qn, budget);
	if (done < budget)
		napi_complete_done(napi, done);
	return done;
}

static irqreturn_t qhca_eth_irq(int irq, void *data)
{
	struct qhca_netdev *qn = data;

	napi_schedule(&qn->napi);
	return IRQ_HANDLED;
}

static int qhca_eth_open(struct net_device *netdev)
{
	struct qhca_netdev *qn = netdev_priv(netdev);
	struct qhca_dev *dev = qn->dev;
	struct qhca_cmd cmd = {};
	bool keep = false;
	u32 i;
	int err;

	err = qhca_eth_ring_alloc(qn, &qn->tx);
	if (err)
		return err;
	err = qhca_eth_ring_alloc(qn, &qn->rx);
	if (err)
		goto err_tx;
	cmd.hdr.opcode = QHCA_CMD_ETH_START;
	cmd.hdr.len = sizeof(cmd.eth_start);
	cmd.eth_start.tx_ring = qn->tx.dma;
	cmd.eth_start.rx_ring = qn->rx.dma;
	cmd.eth_start.tx_log2 = QHCA_ETH_RING_LOG2;
	cmd.eth_start.rx_log2 = QHCA_ETH_RING_LOG2;
	cmd.eth_start.vector = QHCA_VEC_ETH;
	err = qhca_admin_exec(dev, &cmd, NULL, NULL);
	keep = qhca_admin_cmd_keep(dev, err);
	if (err)
		goto err_rx;
	err = request_irq(pci_irq_vector(dev->pdev, QHCA_VEC_ETH), qhca_eth_irq, 0,
			  "qhca-eth", qn);
	if (err)
		goto err_stop;
	napi_enable(&qn->napi);
	for (i = 0; i < QHCA_ETH_RING_SIZE; i++)
		if (qhca_eth_post_rx(qn))
			break;
	qhca_eth_rx_doorbell(qn);
	netif_start_queue(netdev);
	return 0;

err_stop:
	memset(&cmd, 0, sizeof(cmd));
	cmd.hdr.opcode = QHCA_CMD_ETH_STOP;
	keep = qhca_admin_obj_keep(dev, qhca_admin_exec(dev, &cmd, NULL, NULL));
err_rx:
	qhca_eth_ring_free(qn, &qn->rx, DMA_FROM_DEVICE, keep);
err_tx:
	qhca_eth_ring_free(qn, &qn->tx, DMA_TO_DEVICE, keep);
	return err;
}

static int qhca_eth_stop(struct net_device *netdev)
{
	struct qhca_netdev *qn = netdev_priv(netdev);
	struct qhca_cmd cmd = {};
	bool keep;
	int err;

	netif_stop_queue(netdev);
	cmd.hdr.opcode = QHCA_CMD_ETH_STOP;
	err = qhca_admin_exec(qn->dev, &cmd, NULL, NULL);
	keep = qhca_admin_obj_keep(qn->dev, err);
	if (keep)
		netdev_warn(netdev, "ETH_STOP failed (%d): rings kept until the device is reset\n",
			    err);
	napi_disable(&qn->napi);
	free_irq(pci_irq_vector(qn->dev->pdev, QHCA_VEC_ETH), qn);
	qhca_eth_ring_free(qn, &qn->rx, DMA_FROM_DEVICE, keep);
	qhca_eth_ring_free(qn, &qn->tx, DMA_TO_DEVICE, keep);
	return 0;
}

static netdev_tx_t qhca_eth_xmit(struct sk_buff *skb, struct net_device *netdev)
{
	struct qhca_netdev *qn = netdev_priv(netdev);
	struct qhca_eth_ring *r = &qn->tx;
	struct qhca_eth_slot *s;
	u32 idx;

	if (skb_linearize(skb) || skb->len > QHCA_ETH_MAX_FRAME) {
		netdev->stats.tx_dropped++;
		dev_kfree_skb_any(skb);
		return NETDEV_TX_OK;
	}
	if (eth_skb_pad(skb)) {	/* frees the skb on failure */
		netdev->stats.tx_dropped++;
		return NETDEV_TX_OK;
	}
	spin_lock_bh(&qn->tx_lock);
	if (r->pi - r->ci >= QHCA_ETH_RING_SIZE) {
		netif_stop_queue(netdev);
		spin_unlock_bh(&qn->tx_lock);
		return NETDEV_TX_BUSY;
	}
	idx = r->pi & (QHCA_ETH_RING_SIZE - 1);
	s = &r->slot[idx];
	s->dma = dma_map_single(qhca_dma_dev(qn), skb->data, skb->len, DMA_TO_DEVICE);
	if (dma_mapping_error(qhca_dma_dev(qn), s->dma)) {
		spin_unlock_bh(&qn->tx_lock);
		netdev->stats.tx_dropped++;
		dev_kfree_skb_any(skb);
		return NETDEV_TX_OK;
	}
	s->skb = skb;
	s->len = skb->len;
	r->desc[idx].addr = s->dma;
	r->desc[idx].len = skb->len;
	r->desc[idx].flags = 0;
	r->pi++;
	if (r->pi - r->ci >= QHCA_ETH_RING_SIZE)
		netif_stop_queue(netdev);
	dma_wmb();	/* the descriptor before the doorbell */
	writel(r->pi, qn->dev->db0 + QHCA_DB_ETH_TX);
	spin_unlock_bh(&qn->tx_lock);
	return NETDEV_TX_OK;
}

/*
 * The port has one MAC for Ethernet and RoCE: the device must take the new address
 * (SET_MAC) before the netdev shows it, or RoCE packets would carry and expect the old one.
 * Called under RTNL, also while running (IFF_LIVE_ADDR_CHANGE).
 */
static int qhca_eth_set_mac_address(struct net_device *netdev, void *p)
{
	struct qhca_netdev *qn = netdev_priv(netdev);
	struct qhca_dev *dev = qn->dev;
	const struct sockaddr *sa = p;
	struct qhca_cmd cmd = {};
	int err;

	if (!is_valid_ether_addr(sa->sa_data))
		return -EADDRNOTAVAIL;
	if (dev->abi_minor < QHCA_ABI_MINOR_SET_MAC)
		return -EOPNOTSUPP;
	cmd.hdr.opcode = QHCA_CMD_SET_MAC;
	cmd.hdr.len = sizeof(cmd.set_mac);
	memcpy(cmd.set_mac.mac, sa->sa_data, ETH_ALEN);
	err = qhca_admin_exec(dev, &cmd, NULL, NULL);
	if (err) {
		netdev_err(netdev, "the device did not take MAC address %pM: %d\n", sa->sa_data,
			   err);
		return err;
	}
	eth_hw_addr_set(netdev, sa->sa_data);
	memcpy(dev->port.mac, sa->sa_data, ETH_ALEN);
	return 0;
}

static const struct net_device_ops qhca_netdev_ops = {
	.ndo_open = qhca_eth_open,
	.ndo_set_mac_address = qhca_eth_set_mac_address,
	.ndo_start_xmit = qhca_eth_xmit,
	.ndo_stop = qhca_eth_stop,
	.ndo_validate_addr = eth_validate_addr,
};

void qhca_eth_link_change(struct qhca_dev *dev, bool up)
{
	if (!dev->netdev)
		return;
	if (up)
		netif_carrier_on(dev->netdev);
	else
		netif_carrier_off(dev->netdev);
}

int qhca_eth_init(struct qhca_dev *dev)
{
	struct qhca_netdev *qn;
	struct net_device *netdev;
	int err;

	netdev = alloc_etherdev(sizeof(*qn));
	if (!netdev)
		return -ENOMEM;
	qn = netdev_priv(netdev);
	qn->dev = dev;
	qn->netdev = netdev;
	spin_lock_init(&qn->tx_lock);
	SET_NETDEV_DEV(netdev, &dev->pdev->dev);
	netdev->netdev_ops = &qhca_netdev_ops;
	netdev->priv_flags |= IFF_LIVE_ADDR_CHANGE;
	netdev->min_mtu = ETH_MIN_MTU;
	netdev->max_mtu = QHCA_ETH_MAX_FRAME - ETH_HLEN - VLAN_HLEN;
	eth_hw_addr_set(netdev, dev->port.mac);
	netif_napi_add_weight(netdev, &qn->napi, qhca_eth_poll, QHCA_ETH_NAPI_WEIGHT);
	netif_carrier_off(netdev);
	err = register_netdev(netdev);
	if (err) {
		netif_napi_del(&qn->napi);
		free_netdev(netdev);
		return err;
	}
	dev->netdev = netdev;
	if (dev->port.state == IB_PORT_ACTIVE)
		netif_carrier_on(netdev);
	return 0;
}

void qhca_eth_fini(struct qhca_dev *dev)
{
	struct net_device *netdev = dev->netdev;
	struct qhca_netdev *qn;

	if (!netdev)
		return;
	qn = netdev_priv(netdev);
	unregister_netdev(netdev);
	dev->netdev = NULL;
	netif_napi_del(&qn->napi);
	free_netdev(netdev);
}
