// SPDX-License-Identifier: GPL-2.0
/*
 * qhca PCI driver: probe, BARs, MSI-X, admin queue bring-up and ib_device registration.
 */
#include <linux/debugfs.h>
#include <linux/interrupt.h>
#include <linux/module.h>
#include <linux/pci.h>

#include "qhca.h"

static const struct pci_device_id qhca_pci_table[] = {
	{ PCI_DEVICE(QHCA_PCI_VENDOR_ID, QHCA_PCI_DEVICE_ID) },
	{}
};
MODULE_DEVICE_TABLE(pci, qhca_pci_table);

static int qhca_check_version(struct qhca_dev *dev)
{
	u32 ver = readl(dev->regs + QHCA_REG_VERSION);

	if (FIELD_GET(QHCA_VERSION_MAJOR_MASK, ver) != QHCA_ABI_VERSION_MAJOR) {
		dev_err(&dev->pdev->dev, "device interface %u.%u, driver speaks %u.x\n",
			FIELD_GET(QHCA_VERSION_MAJOR_MASK, ver),
			FIELD_GET(QHCA_VERSION_MINOR_MASK, ver), QHCA_ABI_VERSION_MAJOR);
		return -ENODEV;
	}
	dev->abi_minor = FIELD_GET(QHCA_VERSION_MINOR_MASK, ver);
	return 0;
}

static struct dentry *qhca_debugfs_root;

/*
 * debugfs <root>/qhca/<pci name>/ (tests/vm/test-hardening.sh):
 *  - admin_state (enum qhca_aq_state);
 *  - admin_timeout_inject: write 1 and the next admin command goes into the ring without
 *    its doorbell, so it times out as if the device had hung;
 *  - cq_event_delay_ms: nonzero holds each CQ_ERR until its CQ's destroy has begun, then
 *    runs its handler that late (qhca_cq_event());
 *  - cq_events: CQ_ERR events handed to a CQ's handler; cq_events_late: those whose handler
 *    was still running when the CQ's destroy returned (a use after free): must stay 0.
 */
static void qhca_debugfs_init(struct qhca_dev *dev)
{
	dev->debugfs = debugfs_create_dir(pci_name(dev->pdev), qhca_debugfs_root);
	debugfs_create_u32("admin_state", 0400, dev->debugfs, &dev->aq.state);
	debugfs_create_bool("admin_timeout_inject", 0600, dev->debugfs, &dev->aq.inject_timeout);
	debugfs_create_u32("cq_event_delay_ms", 0600, dev->debugfs, &dev->cq_event_delay_ms);
	debugfs_create_atomic_t("cq_events", 0400, dev->debugfs, &dev->cq_events);
	debugfs_create_atomic_t("cq_events_late", 0400, dev->debugfs, &dev->cq_events_late);
}

static int qhca_probe(struct pci_dev *pdev, const struct pci_device_id *id)
{
	struct qhca_dev *dev;
	int err;

	dev = ib_alloc_device(qhca_dev, ibdev);
	if (!dev)
		return -ENOMEM;
	dev->pdev = pdev;
	xa_init_flags(&dev->cqs, XA_FLAGS_LOCK_IRQ);	/* locked by the async EQ too */
	xa_init(&dev->qps);
	xa_init(&dev->srqs);
	pci_set_drvdata(pdev, dev);

	err = pci_enable_device_mem(pdev);
	if (err)
		goto err_free;
	err = pci_request_regions(pdev, QHCA_DRV_NAME);
	if (err)
		goto err_disable;
	pci_set_master(pdev);
	err = dma_set_mask_and_coherent(&pdev->dev, DMA_BIT_MASK(64));
	if (err)
		goto err_regions;
	dev->regs = pci_iomap(pdev, QHCA_BAR_REGS, QHCA_REGS_SIZE);
	if (!dev->regs) {
		err = -ENOMEM;
		goto err_regions;
	}
	err = qhca_check_version(dev);
	if (err)
		goto err_unmap;
	dev->db_bar_start = pci_resource_start(pdev, QHCA_BAR_DOORBELL);
	dev->db_pages = readl(dev->regs + QHCA_REG_DB_PAGES);
	dev->caps = readl(dev->regs + QHCA_REG_CAPS);
	if (dev->db_pages < 2 ||
	    (u64)dev->db_pages * QHCA_DB_PAGE_SIZE > pci_resource_len(pdev, QHCA_BAR_DOORBELL)) {
		dev_err(&pdev->dev, "doorbell BAR too small for %u pages\n", dev->db_pages);
		err = -ENODEV;
		goto err_unmap;
	}

	dev->db0 = pci_iomap_range(pdev, QHCA_BAR_DOORBELL, 0, QHCA_DB_PAGE_SIZE);
	if (!dev->db0) {
		err = -ENOMEM;
		goto err_unmap;
	}
	dev->nvecs = pci_alloc_irq_vectors(pdev, QHCA_VEC_COMP0 + 1,
					   readl(dev->regs + QHCA_REG_MSIX_VECTORS), PCI_IRQ_MSIX);
	if (dev->nvecs < 0) {
		err = dev->nvecs;
		goto err_unmap;
	}
	err = request_irq(pci_irq_vector(pdev, 0), qhca_admin_irq, 0, "qhca-admin", dev);
	if (err)
		goto err_vectors;

	err = qhca_admin_init(dev);
	if (err)
		goto err_irq;
	err = qhca_admin_query(dev, QHCA_CMD_QUERY_DEVICE, 0, &dev->attr, sizeof(dev->attr));
	if (!err)
		err = qhca_admin_query(dev, QHCA_CMD_QUERY_PORT, 1, &dev->port, sizeof(dev->port));
	if (err) {
		dev_err(&pdev->dev, "QUERY_DEVICE/QUERY_PORT failed: %d\n", err);
		goto err_admin;
	}
	err = qhca_async_eq_init(dev);
	if (err) {
		dev_err(&pdev->dev, "async event queue: %d\n", err);
		goto err_admin;
	}
	err = qhca_comp_eqs_init(dev);
	if (err) {
		dev_err(&pdev->dev, "completion event queues: %d\n", err);
		goto err_eq;
	}
	/* An InfiniBand port has no Ethernet function: IPoIB is its netdev. */
	err = qhca_link_ib(dev) ? 0 : qhca_eth_init(dev);
	if (err) {
		dev_err(&pdev->dev, "netdev registration failed: %d\n", err);
		goto err_comp;
	}

	dev->ibdev.dev.parent = &pdev->dev;
	dev->ibdev.node_type = RDMA_NODE_IB_CA;
	dev->ibdev.phys_port_cnt = 1;
	dev->ibdev.num_comp_vectors = dev->nvecs - QHCA_VEC_COMP0;
	dev->ibdev.node_guid = cpu_to_be64(dev->attr.node_guid);
	strscpy(dev->ibdev.node_desc, "qhca emulated RDMA HCA", sizeof(dev->ibdev.node_desc));
	ib_set_device_ops(&dev->ibdev, &qhca_dev_ops);
	err = qhca_iw_init(dev);	/* an iWARP port: an RNIC, iw_cm's provider */
	if (err)
		goto err_eth;
	err = dev->netdev ? ib_device_set_netdev(&dev->ibdev, dev->netdev, 1) : 0;
	if (err)
		goto err_eth;
	err = ib_register_device(&dev->ibdev, "qhca_%d", &pdev->dev);
	if (err) {
		dev_err(&pdev->dev, "ib_register_device failed: %d\n", err);
		goto err_eth;
	}
	qhca_debugfs_init(dev);
	dev_info(&pdev->dev, "%s: %s, %u doorbell pages, %d MSI-X vectors\n",
		 dev_name(&dev->ibdev.dev), dev->netdev ? netdev_name(dev->netdev) :
		 "InfiniBand port", dev->db_pages, dev->nvecs);
	return 0;

err_eth:
	if (dev->netdev)
		ib_device_set_netdev(&dev->ibdev, NULL, 1);
	qhca_iw_fini(dev);
	qhca_eth_fini(dev);
err_comp:
	qhca_comp_eqs_fini(dev);
err_eq:
	qhca_async_eq_fini(dev);
err_admin:
	qhca_admin_fini(dev);
err_irq:
	free_irq(pci_irq_vector(pdev, 0), dev);
err_vectors:
	pci_free_irq_vectors(pdev);
err_unmap:
	if (dev->db0)
		pci_iounmap(pdev, dev->db0);
	pci_iounmap(pdev, dev->regs);
err_regions:
	pci_release_regions(pdev);
err_disable:
	pci_disable_device(pdev);
err_free:
	ib_dealloc_device(&dev->ibdev);
	return err;
}

static void qhca_remove(struct pci_dev *pdev)
{
	struct qhca_dev *dev = pci_get_drvdata(pdev);

	debugfs_remove_recursive(dev->debugfs);
	/* After an admin timeout: reset the device first, so that teardown may free. */
	qhca_admin_reset_dead(dev);
	ib_unregister_device(&dev->ibdev);
	qhca_async_eq_fini(dev);
	qhca_iw_fini(dev);	/* after the events stopped */
	qhca_eth_fini(dev);
	qhca_comp_eqs_fini(dev);
	qhca_admin_fini(dev);
	free_irq(pci_irq_vector(pdev, 0), dev);
	pci_free_irq_vectors(pdev);
	pci_iounmap(pdev, dev->db0);
	pci_iounmap(pdev, dev->regs);
	pci_release_regions(pdev);
	pci_disable_device(pdev);
	ib_dealloc_device(&dev->ibdev);
}

static struct pci_driver qhca_pci_driver = {
	.name = QHCA_DRV_NAME,
	.id_table = qhca_pci_table,
	.probe = qhca_probe,
	.remove = qhca_remove,
};

static int __init qhca_init(void)
{
	int err;

	qhca_debugfs_root = debugfs_create_dir(QHCA_DRV_NAME, NULL);
	err = pci_register_driver(&qhca_pci_driver);
	if (err)
		debugfs_remove_recursive(qhca_debugfs_root);
	return err;
}

static void __exit qhca_exit(void)
{
	pci_unregister_driver(&qhca_pci_driver);
	debugfs_remove_recursive(qhca_debugfs_root);
}

module_init(qhca_init);
module_exit(qhca_exit);

MODULE_DESCRIPTION("qhca emulated RDMA HCA (RoCEv2) driver");
MODULE_LICENSE("GPL");
