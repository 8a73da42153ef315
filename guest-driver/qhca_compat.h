/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What differs between the kernels qhca.ko is built for (Debian's 6.1, 6.12 and 7.x), in
 * one place: the driver's files use the names below and never test a kernel version
 * themselves. Each entry says which kernel changed what; drop it when the oldest kernel
 * supported has the change.
 */
#ifndef QHCA_COMPAT_H
#define QHCA_COMPAT_H

#include <linux/version.h>
#include <rdma/ib_verbs.h>

/*
 * 6.2 added RDMA ATOMIC WRITE (IB_WR/IB_WC_ATOMIC_WRITE, IB_DEVICE_ATOMIC_WRITE). Before it,
 * the device's capability is not reported, so no consumer posts one; a completion of one (a
 * user QP's, polled by the provider, never reaches the kernel) would read as an RDMA WRITE.
 */
#if LINUX_VERSION_CODE < KERNEL_VERSION(6, 2, 0)
#define QHCA_IB_DEVICE_ATOMIC_WRITE	0
#define QHCA_IB_WC_ATOMIC_WRITE		IB_WC_RDMA_WRITE
#else
#define QHCA_IB_DEVICE_ATOMIC_WRITE	IB_DEVICE_ATOMIC_WRITE
#define QHCA_IB_WC_ATOMIC_WRITE		IB_WC_ATOMIC_WRITE
#endif

/*
 * 6.11 passes create_cq the whole uverbs attribute bundle instead of the driver's udata
 * (commit "RDMA: Pass entire uverbs attr bundle to create cq function").
 */
#if LINUX_VERSION_CODE < KERNEL_VERSION(6, 11, 0)
typedef struct ib_udata qhca_create_cq_attrs;
static inline struct ib_udata *qhca_create_cq_udata(qhca_create_cq_attrs *attrs)
{
	return attrs;
}
#else
#include <rdma/uverbs_ioctl.h>
typedef struct uverbs_attr_bundle qhca_create_cq_attrs;
static inline struct ib_udata *qhca_create_cq_udata(qhca_create_cq_attrs *attrs)
{
	return &attrs->driver_udata;
}
#endif

/*
 * 7.x renamed ib_umem_get() to ib_umem_get_va(), when umems could also come from buffer
 * descriptor attributes ("RDMA/umem: Route ib_umem_get_va() through
 * ib_umem_get_attr_or_va()"). Kbuild finds which name the headers have.
 */
#ifndef QHCA_HAVE_IB_UMEM_GET_VA
#define ib_umem_get_va ib_umem_get
#endif

/*
 * 7.x resizes only user CQs, through resize_user_cq() with an unsigned size (qhca resizes
 * user CQs only in any case).
 */
#ifdef QHCA_HAVE_RESIZE_USER_CQ
#define QHCA_OP_RESIZE_CQ	resize_user_cq
typedef unsigned int qhca_resize_cqe;
#else
#define QHCA_OP_RESIZE_CQ	resize_cq
typedef int qhca_resize_cqe;
#endif

/*
 * 6.17 added DMA handles (struct ib_dmah: TLP processing hints for a region's memory),
 * passed to reg_user_mr(). qhca has no TPH: a handle given is refused.
 */
#ifdef QHCA_HAVE_DMAH
#define QHCA_REG_MR_DMAH_PARAM	struct ib_dmah *dmah,
#define qhca_reg_mr_dmah_given()	(dmah != NULL)
#else
#define QHCA_REG_MR_DMAH_PARAM
#define qhca_reg_mr_dmah_given()	false
#endif

#endif /* QHCA_COMPAT_H */
