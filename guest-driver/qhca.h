/* SPDX-License-Identifier: GPL-2.0 */
/*
 * qhca: Linux driver for the qhca emulated RDMA HCA (RoCEv2).
 */
#ifndef QHCA_H
#define QHCA_H

#include <linux/completion.h>
#include <linux/mutex.h>
#include <linux/netdevice.h>
#include <linux/pci.h>
#include <rdma/ib_verbs.h>

#include "qhca_abi.h"
#include "qhca_uabi.h"

#define QHCA_DRV_NAME		"qhca"
#define QHCA_AQ_DEPTH_LOG2	6		/* 64 admin commands in flight at most */
#define QHCA_AQ_TIMEOUT_MS	5000
#define QHCA_ASYNC_EQ_LOG2	6
#define QHCA_ETH_RING_LOG2	8

/* MSI-X vectors: admin and async events, Ethernet, then the completion vectors. */
#define QHCA_VEC_ADMIN		0
#define QHCA_VEC_ETH		1
#define QHCA_VEC_COMP0		2

struct qhca_admin {
	struct qhca_cmd *sq;
	struct qhca_cqe_admin *cq;
	dma_addr_t sq_dma;
	dma_addr_t cq_dma;
	u32 depth;
	u32 sq_tail;
	u32 cq_head;
	u16 phase;
	u16 next_id;
	struct mutex lock;		/* one command at a time */
	struct completion done;		/* signalled by the admin interrupt */
};

struct qhca_eq {
	struct qhca_eqe *ring;
	dma_addr_t dma;
	u32 log2;
	u32 ci;
	u32 handle;
};

struct qhca_dev {
	struct ib_device ibdev;
	struct pci_dev *pdev;
	void __iomem *regs;
	resource_size_t db_bar_start;
	u32 db_pages;
	int nvecs;
	void __iomem *db0;		/* the kernel's doorbell page */
	struct qhca_admin aq;
	struct qhca_eq async_eq;
	struct net_device *netdev;
	struct qhca_device_attr attr;	/* from QUERY_DEVICE at probe */
	struct qhca_port_attr port;	/* from QUERY_PORT at probe */
};

struct qhca_ucontext {
	struct ib_ucontext ibucontext;
	u32 handle;
	u32 db_page;
	struct rdma_user_mmap_entry *db_entry;
};

struct qhca_user_mmap_entry {
	struct rdma_user_mmap_entry rdma_entry;
	u64 address;			/* bus address of the page */
};

struct qhca_pd {
	struct ib_pd ibpd;
	u32 handle;
};

/* Placeholders sized for ib_core; their verbs arrive with the datapath. */
struct qhca_cq {
	struct ib_cq ibcq;
};

struct qhca_qp {
	struct ib_qp ibqp;
};

static inline struct qhca_dev *to_qdev(struct ib_device *ibdev)
{
	return container_of(ibdev, struct qhca_dev, ibdev);
}

static inline struct qhca_ucontext *to_quctx(struct ib_ucontext *uctx)
{
	return container_of(uctx, struct qhca_ucontext, ibucontext);
}

static inline struct qhca_pd *to_qpd(struct ib_pd *pd)
{
	return container_of(pd, struct qhca_pd, ibpd);
}

/* qhca_admin.c */
int qhca_admin_init(struct qhca_dev *dev);
void qhca_admin_fini(struct qhca_dev *dev);
irqreturn_t qhca_admin_irq(int irq, void *data);
int qhca_admin_exec(struct qhca_dev *dev, struct qhca_cmd *cmd, u32 *result0, u32 *result1);
int qhca_admin_query(struct qhca_dev *dev, u8 opcode, u32 port, void *out, u32 len);
int qhca_admin_handle_cmd(struct qhca_dev *dev, u8 opcode, u32 handle, u32 *result0);

/* qhca_eq.c */
int qhca_async_eq_init(struct qhca_dev *dev);
void qhca_async_eq_fini(struct qhca_dev *dev);
void qhca_async_eq_poll(struct qhca_dev *dev);

/* qhca_eth.c */
int qhca_eth_init(struct qhca_dev *dev);
void qhca_eth_fini(struct qhca_dev *dev);
void qhca_eth_link_change(struct qhca_dev *dev, bool up);

/* qhca_verbs.c */
extern const struct ib_device_ops qhca_dev_ops;

#endif /* QHCA_H */
