// SPDX-License-Identifier: GPL-2.0
/*
 * qhca page lists and memory regions: the pages behind user memory (ib_umem) or a kernel
 * buffer described to the device as a one- or two-level page list, which the device copies
 * when the object is created; memory regions of user memory and the kernel's DMA region.
 */
#include <linux/dma-mapping.h>
#include <linux/slab.h>
#include <rdma/ib_umem.h>
#include <rdma/iter.h>

#include "qhca.h"

/*
 * Free a page list once the command that named it is done; with @keep (the command's fate
 * is unknown, see qhca_admin.c) its pages go to the admin queue until the device is reset.
 */
void qhca_pbl_free(struct qhca_dev *dev, struct qhca_pbl_buf *pb, bool keep)
{
	u32 i;

	for (i = 0; i < pb->nlists; i++)
		qhca_admin_put_coherent(dev, keep, PAGE_SIZE, pb->lists[i], pb->list_dma[i]);
	qhca_admin_put_coherent(dev, keep, pb->dir_size, pb->dir, pb->dma_dir);
	kfree(pb->lists);
	kfree(pb->list_dma);
	memset(pb, 0, sizeof(*pb));
}

static int qhca_pbl_alloc(struct qhca_dev *dev, struct qhca_pbl_buf *pb, u32 npages)
{
	struct device *d = &dev->pdev->dev;
	u32 i;

	memset(pb, 0, sizeof(*pb));
	pb->npages = npages;
	pb->nlists = DIV_ROUND_UP(npages, QHCA_PBL_PER_PAGE);
	pb->lists = kcalloc(pb->nlists, sizeof(*pb->lists), GFP_KERNEL);
	pb->list_dma = kcalloc(pb->nlists, sizeof(*pb->list_dma), GFP_KERNEL);
	if (!pb->lists || !pb->list_dma)
		goto err;
	for (i = 0; i < pb->nlists; i++) {
		pb->lists[i] = dma_alloc_coherent(d, PAGE_SIZE, &pb->list_dma[i], GFP_KERNEL);
		if (!pb->lists[i])
			goto err;
	}
	pb->desc.npages = npages;
	if (pb->nlists == 1) {
		pb->desc.levels = 1;
		pb->desc.addr = pb->list_dma[0];
		return 0;
	}
	pb->desc.levels = 2;
	pb->dir_size = ALIGN(pb->nlists * sizeof(u64), PAGE_SIZE);
	pb->dir = dma_alloc_coherent(d, pb->dir_size, &pb->dma_dir, GFP_KERNEL);
	if (!pb->dir)
		goto err;
	pb->desc.addr = pb->dma_dir;
	for (i = 0; i < pb->nlists; i++)
		pb->dir[i] = pb->list_dma[i];
	return 0;
err:
	qhca_pbl_free(dev, pb, false);
	return -ENOMEM;
}

static void qhca_pbl_set(struct qhca_pbl_buf *pb, u32 i, u64 addr)
{
	pb->lists[i / QHCA_PBL_PER_PAGE][i % QHCA_PBL_PER_PAGE] = addr;
}

/*
 * Pin [addr, addr + size) of user memory with @access and make the device's page list of it;
 * on failure nothing stays pinned and *umem is NULL.
 */
int qhca_umem_pbl_get(struct qhca_dev *dev, u64 addr, size_t size, int access,
		      struct ib_umem **umem, struct qhca_pbl_buf *pb)
{
	int err;

	*umem = ib_umem_get_va(&dev->ibdev, addr, size, access);
	if (IS_ERR(*umem)) {
		err = PTR_ERR(*umem);
		*umem = NULL;
		return err;
	}
	err = qhca_pbl_from_umem(dev, *umem, pb);
	if (err) {
		ib_umem_release(*umem);
		*umem = NULL;
	}
	return err;
}

int qhca_pbl_from_umem(struct qhca_dev *dev, struct ib_umem *umem, struct qhca_pbl_buf *pb)
{
	size_t npages = ib_umem_num_dma_blocks(umem, PAGE_SIZE);
	struct ib_block_iter biter;
	u32 i = 0;
	int err;

	if (!npages || npages > U32_MAX)	/* struct qhca_pbl counts pages in 32 bits */
		return -EINVAL;
	err = qhca_pbl_alloc(dev, pb, npages);
	if (err)
		return err;
	rdma_for_each_block(umem->sgt_append.sgt.sgl, &biter, umem->sgt_append.sgt.nents,
			    PAGE_SIZE)
		qhca_pbl_set(pb, i++, rdma_block_iter_dma_address(&biter));
	return 0;
}

int qhca_pbl_from_contig(struct qhca_dev *dev, dma_addr_t dma, size_t size,
			 struct qhca_pbl_buf *pb)
{
	u32 i, n = DIV_ROUND_UP(size, PAGE_SIZE);
	int err;

	err = qhca_pbl_alloc(dev, pb, n);
	if (err)
		return err;
	for (i = 0; i < n; i++)
		qhca_pbl_set(pb, i, dma + (u64)i * PAGE_SIZE);
	return 0;
}

/*
 * Run an object command whose input structure is @in and output @out, through a DMA buffer
 * that the admin queue keeps if the command's fate is unknown.
 */
int qhca_obj_cmd(struct qhca_dev *dev, u8 opcode, u32 handle, const void *in, u32 in_len,
		 void *out, u32 out_len, u32 *result0)
{
	struct device *d = &dev->pdev->dev;
	struct qhca_cmd cmd = {};
	size_t size = max_t(size_t, in_len, out_len);
	dma_addr_t dma = 0;
	void *buf = NULL;
	int err;

	if (size) {
		buf = dma_alloc_coherent(d, size, &dma, GFP_KERNEL);
		if (!buf)
			return -ENOMEM;
		if (in_len)
			memcpy(buf, in, in_len);
	}
	cmd.hdr.opcode = opcode;
	cmd.hdr.len = sizeof(cmd.obj);
	cmd.obj.handle = handle;
	if (in_len) {
		cmd.obj.in_addr = dma;
		cmd.obj.in_len = in_len;
	}
	if (out_len) {
		cmd.obj.out_addr = dma;
		cmd.obj.out_len = out_len;
	}
	err = qhca_admin_exec(dev, &cmd, result0, NULL);
	if (!err && out_len)
		memcpy(out, buf, out_len);
	qhca_admin_put_coherent(dev, qhca_admin_cmd_keep(dev, err), size, buf, dma);
	return err;
}

/* ---------------------------------------------------------------- memory regions */
static u32 qhca_access(int ib_access)
{
	BUILD_BUG_ON(QHCA_ACCESS_MW_BIND != IB_ACCESS_MW_BIND);
	return ib_access & (IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_WRITE |
			    IB_ACCESS_REMOTE_READ | IB_ACCESS_REMOTE_ATOMIC | IB_ACCESS_MW_BIND);
}

struct ib_mr *qhca_get_dma_mr(struct ib_pd *ibpd, int access)
{
	struct qhca_dev *dev = to_qdev(ibpd->device);
	struct qhca_mr_create c = {};
	struct qhca_mr *mr;
	int err;

	mr = kzalloc(sizeof(*mr), GFP_KERNEL);
	if (!mr)
		return ERR_PTR(-ENOMEM);
	c.pd = to_qpd(ibpd)->handle;
	c.access = qhca_access(access) | QHCA_ACCESS_LOCAL_WRITE;
	c.flags = QHCA_MR_PHYS;
	err = qhca_obj_cmd(dev, QHCA_CMD_CREATE_MR, 0, &c, sizeof(c), NULL, 0, &mr->key);
	if (err) {
		kfree(mr);
		return ERR_PTR(err);
	}
	mr->ibmr.lkey = mr->ibmr.rkey = mr->key;
	return &mr->ibmr;
}

/*
 * Pin [start, start + length) and have the device map it at @virt: CREATE_MR (@key gets
 * the new key), or with @opcode REREG_MR the region of *@key. On failure nothing is
 * pinned (or the admin queue keeps what it may still use).
 */
static int qhca_mr_register(struct qhca_dev *dev, struct ib_pd *ibpd, u8 opcode, u64 start,
			    u64 length, u64 virt, int access, struct ib_umem **umem, u32 *key)
{
	struct qhca_mr_create c = {};
	struct qhca_pbl_buf pb;
	bool keep;
	int err;

	if (!length || length > dev->attr.max_mr_size || virt + length < virt)
		return -EINVAL;
	err = qhca_umem_pbl_get(dev, start, length, access, umem, &pb);
	if (err)
		return err;
	c.pd = to_qpd(ibpd)->handle;
	c.access = qhca_access(access);
	c.iova = virt;
	c.length = length;
	c.page_offset = ib_umem_offset(*umem);
	c.pbl = pb.desc;
	err = qhca_obj_cmd(dev, opcode, opcode == QHCA_CMD_REREG_MR ? *key : 0, &c, sizeof(c),
			   NULL, 0, opcode == QHCA_CMD_CREATE_MR ? key : NULL);
	keep = qhca_admin_cmd_keep(dev, err);
	qhca_pbl_free(dev, &pb, keep);
	if (err)
		qhca_admin_put_umem(dev, keep, *umem);
	return err;
}

struct ib_mr *qhca_reg_user_mr(struct ib_pd *ibpd, u64 start, u64 length, u64 virt,
			       int access, QHCA_REG_MR_DMAH_PARAM struct ib_udata *udata)
{
	struct qhca_dev *dev = to_qdev(ibpd->device);
	struct qhca_mr *mr;
	int err;

	if (qhca_reg_mr_dmah_given())
		return ERR_PTR(-EOPNOTSUPP);
	mr = kzalloc(sizeof(*mr), GFP_KERNEL);
	if (!mr)
		return ERR_PTR(-ENOMEM);
	err = qhca_mr_register(dev, ibpd, QHCA_CMD_CREATE_MR, start, length, virt, access,
			       &mr->umem, &mr->key);
	if (err) {
		kfree(mr);
		return ERR_PTR(err);
	}
	mr->ibmr.lkey = mr->ibmr.rkey = mr->key;
	mr->access = access;
	return &mr->ibmr;
}

/*
 * ibv_rereg_mr, in place: the region keeps its keys (applications go on using them) and
 * takes what changes; the rest stays as registered. The pages are pinned anew (the access
 * may now need write), then the old ones are let go. On failure nothing changes.
 */
struct ib_mr *qhca_rereg_user_mr(struct ib_mr *ibmr, int flags, u64 start, u64 length,
				 u64 virt, int access, struct ib_pd *pd, struct ib_udata *udata)
{
	struct qhca_dev *dev = to_qdev(ibmr->device);
	struct qhca_mr *mr = to_qmr(ibmr);
	struct ib_umem *umem;
	u32 key = mr->key;
	int err;

	if (!mr->umem)
		return ERR_PTR(-EOPNOTSUPP);
	if (!(flags & IB_MR_REREG_TRANS)) {
		start = mr->umem->address;
		length = ibmr->length;
		virt = ibmr->iova;
	}
	if (!(flags & IB_MR_REREG_ACCESS))
		access = mr->access;
	err = qhca_mr_register(dev, (flags & IB_MR_REREG_PD) ? pd : ibmr->pd, QHCA_CMD_REREG_MR,
			       start, length, virt, access, &umem, &key);
	if (err)
		return ERR_PTR(err);
	ib_umem_release(mr->umem);
	mr->umem = umem;
	mr->access = access;
	return NULL;	/* ib_core moves the PD, iova and length */
}

/* Memory windows (user space binds them with BIND_MW WQEs through the provider). */
int qhca_alloc_mw(struct ib_mw *ibmw, struct ib_udata *udata)
{
	struct qhca_dev *dev = to_qdev(ibmw->device);
	struct qhca_mw *mw = to_qmw(ibmw);
	struct qhca_mr_create c = {};
	int err;

	if (udata && (udata->inlen || udata->outlen))
		return -EINVAL;
	if (!(dev->attr.dev_caps & QHCA_DEV_CAP_MW))
		return -EOPNOTSUPP;
	if (ibmw->type != IB_MW_TYPE_1 && ibmw->type != IB_MW_TYPE_2)
		return -EINVAL;
	c.pd = to_qpd(ibmw->pd)->handle;
	c.flags = ibmw->type == IB_MW_TYPE_1 ? QHCA_MR_MW_TYPE1 : QHCA_MR_MW_TYPE2;
	err = qhca_obj_cmd(dev, QHCA_CMD_CREATE_MR, 0, &c, sizeof(c), NULL, 0, &mw->key);
	if (err)
		return err;
	ibmw->rkey = mw->key;
	return 0;
}

int qhca_dealloc_mw(struct ib_mw *ibmw)
{
	struct qhca_dev *dev = to_qdev(ibmw->device);
	int err;

	err = qhca_obj_cmd(dev, QHCA_CMD_DESTROY_MR, to_qmw(ibmw)->key, NULL, 0, NULL, 0, NULL);
	return err && !qhca_admin_dead(dev) ? err : 0;
}

/*
 * Fast-register regions (kernel ULPs): ib_alloc_mr reserves the key and room for
 * @max_num_sg pages; ib_map_mr_sg fills the page list; an IB_WR_REG_MR WQE makes the
 * device read the list and validate the key (qhca_qp.c builds it).
 */
struct ib_mr *qhca_alloc_mr(struct ib_pd *ibpd, enum ib_mr_type type, u32 max_num_sg)
{
	struct qhca_dev *dev = to_qdev(ibpd->device);
	struct qhca_mr_create c = {};
	struct qhca_mr *mr;
	bool keep;
	int err;

	if (type != IB_MR_TYPE_MEM_REG || !max_num_sg ||
	    max_num_sg > dev->attr.max_fast_reg_page_list_len)
		return ERR_PTR(-EINVAL);
	mr = kzalloc(sizeof(*mr), GFP_KERNEL);
	if (!mr)
		return ERR_PTR(-ENOMEM);
	mr->max_pages = max_num_sg;
	mr->pages = dma_alloc_coherent(&dev->pdev->dev, (size_t)max_num_sg * sizeof(u64),
				       &mr->pages_dma, GFP_KERNEL);
	if (!mr->pages) {
		kfree(mr);
		return ERR_PTR(-ENOMEM);
	}
	c.pd = to_qpd(ibpd)->handle;
	c.flags = QHCA_MR_FAST_REG;
	c.pbl.npages = max_num_sg;
	err = qhca_obj_cmd(dev, QHCA_CMD_CREATE_MR, 0, &c, sizeof(c), NULL, 0, &mr->key);
	if (err) {
		keep = qhca_admin_cmd_keep(dev, err);
		qhca_admin_put_coherent(dev, keep, (size_t)max_num_sg * sizeof(u64), mr->pages,
					mr->pages_dma);
		kfree(mr);
		return ERR_PTR(err);
	}
	mr->ibmr.lkey = mr->ibmr.rkey = mr->key;
	return &mr->ibmr;
}

static int qhca_set_page(struct ib_mr *ibmr, u64 addr)
{
	struct qhca_mr *mr = to_qmr(ibmr);

	if (mr->npages == mr->max_pages)
		return -ENOMEM;
	mr->pages[mr->npages++] = cpu_to_le64(addr);
	return 0;
}

int qhca_map_mr_sg(struct ib_mr *ibmr, struct scatterlist *sg, int sg_nents,
		   unsigned int *sg_offset)
{
	struct qhca_dev *dev = to_qdev(ibmr->device);
	struct qhca_mr *mr = to_qmr(ibmr);
	int n;

	/* ib_map_mr_sg() checked page_size against page_size_cap. */
	if (!is_power_of_2(ibmr->page_size) || !(ibmr->page_size & dev->attr.page_size_cap))
		return -EINVAL;
	mr->npages = 0;
	n = ib_sg_to_pages(ibmr, sg, sg_nents, sg_offset, qhca_set_page);
	/* The first byte's offset in the first page: the ULP may move iova later. */
	mr->page_offset = ibmr->iova & (ibmr->page_size - 1);
	return n;
}

int qhca_dereg_mr(struct ib_mr *ibmr, struct ib_udata *udata)
{
	struct qhca_dev *dev = to_qdev(ibmr->device);
	struct qhca_mr *mr = to_qmr(ibmr);
	bool keep;
	int err;

	err = qhca_obj_cmd(dev, QHCA_CMD_DESTROY_MR, mr->key, NULL, 0, NULL, 0, NULL);
	if (err && !qhca_admin_dead(dev))
		return err;
	/* A dead queue: the region is gone for the OS, its pages stay pinned until reset. */
	keep = qhca_admin_obj_keep(dev, err);
	qhca_admin_put_umem(dev, keep, mr->umem);
	qhca_admin_put_coherent(dev, keep, (size_t)mr->max_pages * sizeof(u64), mr->pages,
				mr->pages_dma);
	kfree(mr);
	return 0;
}
