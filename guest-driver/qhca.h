/* SPDX-License-Identifier: GPL-2.0 */
/*
 * qhca: Linux driver for the qhca emulated RDMA HCA (RoCEv2).
 */
#ifndef QHCA_H
#define QHCA_H

#include <linux/bitfield.h>
#include <linux/completion.h>
#include <linux/refcount.h>
#include <linux/mutex.h>
#include <linux/netdevice.h>
#include <linux/pci.h>
#include <linux/xarray.h>
#include <rdma/ib_verbs.h>

#include "qhca_abi.h"
#include "qhca_compat.h"
#include "qhca_uabi.h"

#define QHCA_DRV_NAME		"qhca"
#define QHCA_AQ_DEPTH_LOG2	6		/* 64 admin commands in flight at most */
#define QHCA_AQ_TIMEOUT_MS	5000
#define QHCA_ASYNC_EQ_LOG2	6
#define QHCA_COMP_EQ_LOG2	10
#define QHCA_ETH_RING_LOG2	8

/* Ring geometry ranges of abi/qhca_abi.h (struct qhca_qp_create, qhca_cq_create). */
#define QHCA_WQ_MAX_LOG2	15	/* SQ and RQ entries */
#define QHCA_WQE_MAX_STRIDE_LOG2 12	/* SQ, RQ and SRQ WQE stride */
#define QHCA_CQ_MAX_LOG2	22

/* REG_VERSION minor from which QHCA_CMD_SET_MAC exists. */
#define QHCA_ABI_MINOR_SET_MAC	2

/* comp_mask bits of the commands of abi/qhca_uabi.h that this driver knows: none yet. */
#define QHCA_ALLOC_UCONTEXT_CMD_COMP_MASK	0u
#define QHCA_CREATE_CQ_CMD_COMP_MASK		0u
#define QHCA_RESIZE_CQ_CMD_COMP_MASK		0u
#define QHCA_CREATE_QP_CMD_COMP_MASK		0u
#define QHCA_CREATE_SRQ_CMD_COMP_MASK		0u
#define QHCA_MODIFY_SRQ_CMD_COMP_MASK		0u

/* MSI-X vectors: admin and async events, Ethernet, then the completion vectors. */
#define QHCA_VEC_ADMIN		0
#define QHCA_VEC_ETH		1
#define QHCA_VEC_COMP0		2

/*
 * The admin queue's life: LIVE until a command times out (or its completion does not
 * match), then DEAD: every command is refused and memory the device may still touch is
 * kept (qhca_admin_keep_*) until RESET, when the device has been reset and the kept
 * memory freed. Nothing leaves DEAD but a reset at remove.
 */
enum qhca_aq_state {
	QHCA_AQ_LIVE,
	QHCA_AQ_DEAD,
	QHCA_AQ_RESET,
};

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
	u32 state;			/* enum qhca_aq_state: to DEAD under lock, RESET keep_lock */
	struct mutex keep_lock;		/* kept, and state changes to RESET */
	struct list_head kept;		/* struct qhca_kept: memory the device may touch */
	bool inject_timeout;		/* debugfs: withhold the next command's doorbell */
};

struct qhca_dev;

struct qhca_eq {
	struct qhca_dev *dev;
	struct qhca_eqe *ring;
	dma_addr_t dma;
	u32 log2;
	u32 ci;
	u32 handle;
	u16 vector;
};

struct qhca_dev {
	struct ib_device ibdev;
	struct pci_dev *pdev;
	void __iomem *regs;
	resource_size_t db_bar_start;
	u32 db_pages;
	u32 caps;			/* QHCA_REG_CAPS */
	int nvecs;
	void __iomem *db0;		/* the kernel's doorbell page */
	struct qhca_admin aq;
	struct qhca_eq async_eq;
	struct qhca_eq *comp_eq;	/* one per completion vector */
	int ncomp;
	/*
	 * cqn -> qhca_cq, for completion and CQ_ERR events. Its lock (taken with interrupts
	 * off) is held by the async EQ around finding a CQ and running its event handler, and
	 * by destroy around removing it: see qhca_cq_event().
	 */
	struct xarray cqs;
	struct xarray qps;		/* qpn -> qhca_qp */
	struct xarray srqs;		/* srqn -> qhca_srq */
	struct net_device *netdev;
	/* iWARP (qhca_iw.c): connection handle -> endpoint, listener handle -> listener */
	struct xarray iw_eps, iw_leps;
	struct mutex iw_lock;		/* iWARP endpoints and listeners (qhca_iw.c) */
	struct workqueue_struct *iw_wq;	/* the device's iWARP events, in order */
	struct qhca_device_attr attr;	/* from QUERY_DEVICE at probe */
	struct qhca_port_attr port;	/* from QUERY_PORT at probe; mac follows SET_MAC */
	u16 abi_minor;			/* REG_VERSION minor */
	struct dentry *debugfs;
	/* debugfs: the CQ_ERR test hook and counters of qhca_cq_event() */
	u32 cq_event_delay_ms;
	struct qhca_cq *cq_event_cq;	/* the CQ whose event handler is being run */
	atomic_t cq_events;		/* CQ_ERR events handed to a handler */
	atomic_t cq_events_late;	/* ... still being handed when the CQ's destroy returned */
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

/* An XRC domain: the kernel owns it on the device, whichever processes share it. */
struct qhca_xrcd {
	struct ib_xrcd ibxrcd;
	u32 handle;
};

/* A page list being handed to the device (freed once the create command completes). */
struct qhca_pbl_buf {
	struct qhca_pbl desc;
	u32 npages, nlists;
	u64 **lists;
	dma_addr_t *list_dma;
	u64 *dir;
	dma_addr_t dma_dir;
	size_t dir_size;
};

struct qhca_cq {
	struct ib_cq ibcq;
	u32 cqn;
	u32 log2;
	u32 ci;				/* kernel CQs: consumer index */
	spinlock_t lock;		/* kernel CQs: poll */
	struct ib_umem *umem;		/* user CQs */
	void *buf;			/* kernel CQs */
	dma_addr_t dma;
	size_t size;
	struct qhca_cq_dbrec *dbrec;
	struct xarray qps;		/* kernel CQs: qpn -> the QPs completing here */
	bool destroying;		/* DESTROY_CQ sent (debugfs cq_event_delay_ms) */
	/* A resize from the command to the swap of rings: uverbs lets two run at once. */
	struct mutex resize_lock;
};

/* A work queue ring (SQ, RQ, SRQ). */
struct qhca_ring {
	u32 log2, stride_log2;
	u32 pi;				/* kernel: producer index */
	atomic_t ci;			/* kernel: slots before it are free (polling) */
	struct ib_umem *umem;		/* user rings */
	void *buf;			/* kernel rings */
	dma_addr_t dma;
	size_t size;
};

/* Do 2^log2 entries fit in @max? Safe for any log2: no shift by an unchecked amount. */
static inline bool qhca_log2_fits(u32 log2, u32 max)
{
	return log2 < 32 && (1ull << log2) <= max;
}

/* Room for one more WQE? */
static inline bool qhca_ring_full(const struct qhca_ring *r)
{
	return r->pi - (u32)atomic_read(&r->ci) >= 1u << r->log2;
}

/* A doorbell of the kernel's page: the object it names and its producer/consumer index. */
static inline void qhca_ring_doorbell(struct qhca_dev *dev, u32 off, u32 num, u32 idx)
{
	writeq(FIELD_PREP(QHCA_DB_INDEX_MASK, idx) | FIELD_PREP(QHCA_DB_NUM_MASK, num),
	       dev->db0 + off);
}

/*
 * A QP's rings: kernel QPs in DMA memory, user QPs in the provider's. No RQ with an SRQ or
 * for XRC_INI; XRC_TGT has no rings, PD or CQs at all (its XRC SRQs receive).
 */
struct qhca_qp {
	struct ib_qp ibqp;
	u32 qpn;
	enum ib_qp_type type;
	enum ib_qp_state state;
	struct qhca_ring sq, rq;
	spinlock_t sq_lock, rq_lock;
	u32 max_inline;
	struct rdma_ah_attr ah_attr;
	/* iWARP: iw_cm holds the QP (iw_add_ref) until its connection is done; destroy
	 * waits for it, as siw and irdma do (ib_core frees the QP when destroy returns) */
	refcount_t iw_refs;
	struct completion iw_free;
	bool live;		/* created and not being destroyed: iw_cm may take it */
};

struct qhca_srq {
	struct ib_srq ibsrq;
	u32 srqn;
	struct qhca_ring rq;
	spinlock_t lock;
	/* A resize from the command to the swap of rings: uverbs lets two run at once. */
	struct mutex resize_lock;
};

struct qhca_mr {
	struct ib_mr ibmr;
	u32 key;
	struct ib_umem *umem;
	int access;		/* user regions: as registered, for rereg */
	/* fast-register regions: the page list REG_MR WQEs point the device at */
	__le64 *pages;
	dma_addr_t pages_dma;
	u32 max_pages, npages;
	u32 page_offset;	/* of the first byte in the first page, from map_mr_sg */
};

struct qhca_mw {
	struct ib_mw ibmw;
	u32 key;	/* as created; any variant names it to the device */
};

struct qhca_ah {
	struct ib_ah ibah;
	struct qhca_av av;
	u8 ah_flags;		/* for query_ah: what the AH was created with */
	u8 sgid_index;
	u8 port_num;
	enum rdma_ah_attr_type type;
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

static inline struct qhca_xrcd *to_qxrcd(struct ib_xrcd *xrcd)
{
	return container_of(xrcd, struct qhca_xrcd, ibxrcd);
}

static inline struct qhca_cq *to_qcq(struct ib_cq *cq)
{
	return container_of(cq, struct qhca_cq, ibcq);
}

static inline struct qhca_qp *to_qqp(struct ib_qp *qp)
{
	return container_of(qp, struct qhca_qp, ibqp);
}

static inline struct qhca_srq *to_qsrq(struct ib_srq *srq)
{
	return container_of(srq, struct qhca_srq, ibsrq);
}

static inline struct qhca_mr *to_qmr(struct ib_mr *mr)
{
	return container_of(mr, struct qhca_mr, ibmr);
}

static inline struct qhca_mw *to_qmw(struct ib_mw *mw)
{
	return container_of(mw, struct qhca_mw, ibmw);
}

static inline struct qhca_ah *to_qah(struct ib_ah *ah)
{
	return container_of(ah, struct qhca_ah, ibah);
}

/* qhca_admin.c */
int qhca_admin_init(struct qhca_dev *dev);
void qhca_admin_fini(struct qhca_dev *dev);
irqreturn_t qhca_admin_irq(int irq, void *data);
int qhca_admin_exec(struct qhca_dev *dev, struct qhca_cmd *cmd, u32 *result0, u32 *result1);
int qhca_admin_query(struct qhca_dev *dev, u8 opcode, u32 port, void *out, u32 len);
int qhca_admin_handle_cmd(struct qhca_dev *dev, u8 opcode, u32 handle, u32 *result0);
bool qhca_admin_dead(struct qhca_dev *dev);
bool qhca_admin_cmd_keep(struct qhca_dev *dev, int err);
bool qhca_admin_obj_keep(struct qhca_dev *dev, int destroy_err);
void qhca_admin_put_coherent(struct qhca_dev *dev, bool keep, size_t size, void *cpu,
			     dma_addr_t dma);
void qhca_admin_put_umem(struct qhca_dev *dev, bool keep, struct ib_umem *umem);
void qhca_admin_reset_dead(struct qhca_dev *dev);

/* qhca_eq.c */
int qhca_eq_create(struct qhca_dev *dev, struct qhca_eq *eq, u32 log2, u16 vector, u16 flags);
void qhca_eq_destroy(struct qhca_dev *dev, struct qhca_eq *eq);
int qhca_async_eq_init(struct qhca_dev *dev);
void qhca_async_eq_fini(struct qhca_dev *dev);
void qhca_async_eq_poll(struct qhca_dev *dev);

/* qhca_eth.c */
int qhca_eth_init(struct qhca_dev *dev);
void qhca_eth_fini(struct qhca_dev *dev);
void qhca_eth_link_change(struct qhca_dev *dev, bool up);

/* qhca_iw.c: an iWARP port */
bool qhca_link_iwarp(const struct qhca_dev *dev);
int qhca_iw_init(struct qhca_dev *dev);
void qhca_iw_fini(struct qhca_dev *dev);
void qhca_iw_event(struct qhca_dev *dev, u8 type, u32 handle, u64 data);
int qhca_iw_qp_close(struct qhca_dev *dev, u32 qpn, bool abort);
int qhca_iw_query_gid(struct qhca_dev *dev, int index, union ib_gid *gid);
extern const struct ib_device_ops qhca_iw_dev_ops;

/* qhca_ib.c: an InfiniBand port */
bool qhca_link_ib(const struct qhca_dev *dev);
int qhca_process_mad(struct ib_device *ibdev, int mad_flags, u32 port,
		     const struct ib_wc *in_wc, const struct ib_grh *in_grh,
		     const struct ib_mad *in, struct ib_mad *out, size_t *out_mad_size,
		     u16 *out_mad_pkey_index);
int qhca_query_gid(struct ib_device *ibdev, u32 port, int index, union ib_gid *gid);
int qhca_query_pkey_ib(struct qhca_dev *dev, u16 index, u16 *pkey);
int qhca_modify_port(struct ib_device *ibdev, u32 port, int mask, struct ib_port_modify *pm);
int qhca_modify_device(struct ib_device *ibdev, int mask, struct ib_device_modify *dm);
int qhca_attach_mcast(struct ib_qp *ibqp, union ib_gid *gid, u16 lid);
int qhca_detach_mcast(struct ib_qp *ibqp, union ib_gid *gid, u16 lid);
int qhca_av_from_ib_ah_attr(struct qhca_av *av, const struct rdma_ah_attr *ah);
int qhca_query_ah(struct ib_ah *ibah, struct rdma_ah_attr *attr);

/* qhca_mem.c */
int qhca_pbl_from_umem(struct qhca_dev *dev, struct ib_umem *umem, struct qhca_pbl_buf *pb);
int qhca_umem_pbl_get(struct qhca_dev *dev, u64 addr, size_t size, int access,
		      struct ib_umem **umem, struct qhca_pbl_buf *pb);
int qhca_pbl_from_contig(struct qhca_dev *dev, dma_addr_t dma, size_t size,
			 struct qhca_pbl_buf *pb);
void qhca_pbl_free(struct qhca_dev *dev, struct qhca_pbl_buf *pb, bool keep);
int qhca_obj_cmd(struct qhca_dev *dev, u8 opcode, u32 handle, const void *in, u32 in_len,
		 void *out, u32 out_len, u32 *result0);
struct ib_mr *qhca_get_dma_mr(struct ib_pd *ibpd, int access);
struct ib_mr *qhca_reg_user_mr(struct ib_pd *ibpd, u64 start, u64 length, u64 virt,
			       int access, QHCA_REG_MR_DMAH_PARAM struct ib_udata *udata);
int qhca_dereg_mr(struct ib_mr *ibmr, struct ib_udata *udata);
struct ib_mr *qhca_rereg_user_mr(struct ib_mr *ibmr, int flags, u64 start, u64 length,
				 u64 virt, int access, struct ib_pd *pd, struct ib_udata *udata);
int qhca_alloc_mw(struct ib_mw *ibmw, struct ib_udata *udata);
int qhca_dealloc_mw(struct ib_mw *ibmw);
struct ib_mr *qhca_alloc_mr(struct ib_pd *ibpd, enum ib_mr_type type, u32 max_num_sg);
int qhca_map_mr_sg(struct ib_mr *ibmr, struct scatterlist *sg, int sg_nents,
		   unsigned int *sg_offset);

/* qhca_cq.c */
int qhca_comp_eqs_init(struct qhca_dev *dev);
void qhca_comp_eqs_fini(struct qhca_dev *dev);
int qhca_create_cq(struct ib_cq *ibcq, const struct ib_cq_init_attr *attr,
		   qhca_create_cq_attrs *attrs);
int qhca_destroy_cq(struct ib_cq *ibcq, struct ib_udata *udata);
int qhca_resize_cq(struct ib_cq *ibcq, qhca_resize_cqe cqe, struct ib_udata *udata);
int qhca_poll_cq(struct ib_cq *ibcq, int num_entries, struct ib_wc *wc);
int qhca_req_notify_cq(struct ib_cq *ibcq, enum ib_cq_notify_flags flags);
int qhca_cq_attach_qp(struct qhca_cq *cq, struct qhca_qp *qp);
void qhca_cq_detach_qp(struct qhca_cq *cq, struct qhca_qp *qp);
void qhca_cq_clean(struct qhca_cq *cq, struct qhca_qp *qp);

/* qhca_qp.c */
int qhca_create_qp(struct ib_qp *ibqp, struct ib_qp_init_attr *init, struct ib_udata *udata);
int qhca_destroy_qp(struct ib_qp *ibqp, struct ib_udata *udata);
int qhca_modify_qp(struct ib_qp *ibqp, struct ib_qp_attr *attr, int mask,
		   struct ib_udata *udata);
int qhca_query_qp(struct ib_qp *ibqp, struct ib_qp_attr *attr, int mask,
		  struct ib_qp_init_attr *init);
int qhca_post_send(struct ib_qp *ibqp, const struct ib_send_wr *wr,
		   const struct ib_send_wr **bad_wr);
int qhca_post_recv(struct ib_qp *ibqp, const struct ib_recv_wr *wr,
		   const struct ib_recv_wr **bad_wr);
int qhca_create_srq(struct ib_srq *ibsrq, struct ib_srq_init_attr *init,
		    struct ib_udata *udata);
int qhca_modify_srq(struct ib_srq *ibsrq, struct ib_srq_attr *attr,
		    enum ib_srq_attr_mask mask, struct ib_udata *udata);
int qhca_query_srq(struct ib_srq *ibsrq, struct ib_srq_attr *attr);
int qhca_destroy_srq(struct ib_srq *ibsrq, struct ib_udata *udata);
int qhca_post_srq_recv(struct ib_srq *ibsrq, const struct ib_recv_wr *wr,
		       const struct ib_recv_wr **bad_wr);
int qhca_create_ah(struct ib_ah *ibah, struct rdma_ah_init_attr *init, struct ib_udata *udata);
int qhca_destroy_ah(struct ib_ah *ibah, u32 flags);

/* qhca_verbs.c */
extern const struct ib_device_ops qhca_dev_ops;
int qhca_ucmd_get(struct ib_udata *udata, void *cmd, size_t len, const u32 *comp_mask,
		  u32 known);

#endif /* QHCA_H */
