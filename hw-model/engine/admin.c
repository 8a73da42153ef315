// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * qhca admin queue: a ring of 64-byte commands (ASQ) and a ring of 16-byte completions
 * (ACQ) with a phase bit, both in guest memory. Every command has a fixed body length that
 * is checked before its fields are read; every failure becomes a status in the completion.
 */
#include <string.h>

#include "engine_internal.h"

static const char *const cmd_names[QHCA_CMD_MAX] = {
	[QHCA_CMD_NOP] = "NOP",
	[QHCA_CMD_QUERY_DEVICE] = "QUERY_DEVICE",
	[QHCA_CMD_QUERY_PORT] = "QUERY_PORT",
	[QHCA_CMD_CREATE_UCTX] = "CREATE_UCTX",
	[QHCA_CMD_DESTROY_UCTX] = "DESTROY_UCTX",
	[QHCA_CMD_CREATE_PD] = "CREATE_PD",
	[QHCA_CMD_DESTROY_PD] = "DESTROY_PD",
	[QHCA_CMD_CREATE_XRCD] = "CREATE_XRCD",
	[QHCA_CMD_DESTROY_XRCD] = "DESTROY_XRCD",
	[QHCA_CMD_CREATE_EQ] = "CREATE_EQ",
	[QHCA_CMD_DESTROY_EQ] = "DESTROY_EQ",
	[QHCA_CMD_ETH_START] = "ETH_START",
	[QHCA_CMD_ETH_STOP] = "ETH_STOP",
	[QHCA_CMD_SET_MAC] = "SET_MAC",
	[QHCA_CMD_CREATE_CQ] = "CREATE_CQ",
	[QHCA_CMD_DESTROY_CQ] = "DESTROY_CQ",
	[QHCA_CMD_CREATE_MR] = "CREATE_MR",
	[QHCA_CMD_DESTROY_MR] = "DESTROY_MR",
	[QHCA_CMD_REREG_MR] = "REREG_MR",
	[QHCA_CMD_RESIZE_CQ] = "RESIZE_CQ",
	[QHCA_CMD_RESIZE_SRQ] = "RESIZE_SRQ",
	[QHCA_CMD_CREATE_QP] = "CREATE_QP",
	[QHCA_CMD_MODIFY_QP] = "MODIFY_QP",
	[QHCA_CMD_QUERY_QP] = "QUERY_QP",
	[QHCA_CMD_DESTROY_QP] = "DESTROY_QP",
	[QHCA_CMD_CREATE_SRQ] = "CREATE_SRQ",
	[QHCA_CMD_MODIFY_SRQ] = "MODIFY_SRQ",
	[QHCA_CMD_DESTROY_SRQ] = "DESTROY_SRQ",
	[QHCA_CMD_QUERY_COUNTERS] = "QUERY_COUNTERS",
	[QHCA_CMD_QUERY_SRQ] = "QUERY_SRQ",
	[QHCA_CMD_MAD_IFC] = "MAD_IFC",
	[QHCA_CMD_MODIFY_PORT] = "MODIFY_PORT",
	[QHCA_CMD_SET_NODE_DESC] = "SET_NODE_DESC",
	[QHCA_CMD_ATTACH_MCAST] = "ATTACH_MCAST",
	[QHCA_CMD_IW_LISTEN] = "IW_LISTEN",
	[QHCA_CMD_IW_UNLISTEN] = "IW_UNLISTEN",
	[QHCA_CMD_IW_CONNECT] = "IW_CONNECT",
	[QHCA_CMD_IW_ACCEPT] = "IW_ACCEPT",
	[QHCA_CMD_IW_REJECT] = "IW_REJECT",
	[QHCA_CMD_IW_QUERY_CONN] = "IW_QUERY_CONN",
	[QHCA_CMD_IW_DISCONNECT] = "IW_DISCONNECT",
	[QHCA_CMD_DETACH_MCAST] = "DETACH_MCAST",
};

static const char *cmd_name(uint8_t op)
{
	return op < QHCA_CMD_MAX && cmd_names[op] ? cmd_names[op] : "?";
}

struct admin_result {
	uint16_t status;
	uint32_t result0;
	uint32_t result1;
};

typedef uint16_t (*cmd_handler)(struct qhca_engine *e, const struct qhca_cmd *cmd,
				struct admin_result *res);

static uint32_t depth(const struct qhca_engine *e)
{
	return 1u << e->aq_depth_log2;
}

static bool body_is_zero(const uint8_t *p, size_t len)
{
	while (len--)
		if (*p++)
			return false;
	return true;
}

static uint16_t cmd_nop(struct qhca_engine *e, const struct qhca_cmd *cmd,
			struct admin_result *res)
{
	return QHCA_ST_OK;
}

static uint16_t cmd_query_device(struct qhca_engine *e, const struct qhca_cmd *cmd,
				 struct admin_result *res)
{
	const struct qhca_cmd_query *q = &cmd->query;
	const struct qhca_engine_config *c = &e->cfg;
	struct qhca_device_attr a;

	if (q->out_len != sizeof(a) || q->port != 0)
		return QHCA_ST_BAD_FIELD;
	memset(&a, 0, sizeof(a));
	a.fw_version = QHCA_FIELD_PREP(QHCA_FW_VERSION_MAJOR_MASK, QHCA_ABI_VERSION_MAJOR) |
		       QHCA_FIELD_PREP(QHCA_FW_VERSION_MINOR_MASK, QHCA_ABI_VERSION_MINOR);
	a.node_guid = qhca_node_guid(e);
	a.max_mr_size = (uint64_t)c->max_mr_size_mb << 20;
	a.page_size_cap = QHCA_FAST_REG_PAGE_SIZES;
	a.vendor_id = QHCA_PCI_VENDOR_ID;
	a.vendor_part_id = QHCA_PCI_DEVICE_ID;
	a.hw_version = QHCA_PCI_REVISION;
	a.dev_caps = QHCA_DEV_CAP_RC | QHCA_DEV_CAP_UC | QHCA_DEV_CAP_UD | QHCA_DEV_CAP_SRQ |
		     QHCA_DEV_CAP_ATOMIC | QHCA_DEV_CAP_FAST_REG | QHCA_DEV_CAP_MW |
		     QHCA_DEV_CAP_ATOMIC_WRITE | QHCA_DEV_CAP_XRC | QHCA_DEV_CAP_MCAST |
		     QHCA_DEV_CAP_QUERY_SRQ;
	a.max_uctx = e->uctx.capacity;
	a.max_pd = c->max_pd;
	a.max_qp = c->max_qp;
	a.max_qp_wr = c->max_qp_wr;
	a.max_send_sge = c->max_sge;
	a.max_recv_sge = c->max_sge;
	a.max_sge_rd = c->max_sge;
	a.max_cq = c->max_cq;
	a.max_cqe = c->max_cqe;
	a.max_mr = c->max_mr;
	a.max_srq = c->max_srq;
	a.max_srq_wr = c->max_qp_wr;
	a.max_srq_sge = c->max_sge;
	a.max_ah = c->max_qp;
	a.max_qp_rd_atom = QHCA_MAX_RD_ATOMIC;
	a.max_qp_init_rd_atom = QHCA_MAX_RD_ATOMIC;
	a.max_inline_data = c->max_inline;
	a.max_fast_reg_page_list_len = QHCA_MAX_FAST_REG_PAGES;
	a.num_comp_vectors = c->msix_vectors - 2;	/* 0: admin/async, 1: Ethernet */
	a.max_pkeys = c->link == QHCA_LINK_IB ? QHCA_IB_PKEYS : 1;
	a.local_ca_ack_delay = 15;
	if (c->link == QHCA_LINK_IWARP) {
		/* RFC 5040: RC alone, no atomics, a READ names one sink buffer (its STag). */
		a.dev_caps = QHCA_DEV_CAP_RC | QHCA_DEV_CAP_SRQ | QHCA_DEV_CAP_FAST_REG |
			     QHCA_DEV_CAP_MW | QHCA_DEV_CAP_QUERY_SRQ;
		a.max_sge_rd = 1;
		a.max_qp_rd_atom = a.max_qp_init_rd_atom = QHCA_IW_MAX_RD;
	}
	return qhca_dma_write(e, q->out_addr, &a, sizeof(a)) ? QHCA_ST_DMA_ERROR : QHCA_ST_OK;
}

static uint16_t cmd_query_port(struct qhca_engine *e, const struct qhca_cmd *cmd,
			       struct admin_result *res)
{
	const struct qhca_cmd_query *q = &cmd->query;
	struct qhca_port_attr a;

	if (q->out_len != sizeof(a) || q->port != 1)
		return QHCA_ST_BAD_FIELD;
	memset(&a, 0, sizeof(a));
	a.state = e->link_up ? 4 : 1;		/* ACTIVE or DOWN */
	a.phys_state = e->link_up ? 5 : 3;	/* LINK_UP or DISABLED */
	a.max_mtu = qhca_mtu_enum(e->cfg.mtu);
	a.active_mtu = a.max_mtu;
	a.active_width = 1;	/* 1X */
	a.active_speed = 1;	/* SDR */
	memcpy(a.mac, e->mac, sizeof(a.mac));
	a.gid_tbl_len = 32;	/* RoCE: a v1 and a v2 entry for each of 16 addresses */
	a.max_msg_sz = 0x80000000u;
	a.port_cap_flags = 0;
	a.pkey_tbl_len = 1;
	if (e->cfg.link == QHCA_LINK_IWARP) {
		a.link_layer = QHCA_LINK_IWARP;
		a.gid_tbl_len = 1;	/* a GID of the MAC: iWARP addresses by IP */
	}
	if (e->cfg.link == QHCA_LINK_IB) {
		const struct ib_port_info *pi = &e->ib.pi;

		a.link_layer = QHCA_LINK_IB;
		a.state = pi->state;
		a.phys_state = pi->phys_state;
		a.active_mtu = pi->neighbor_mtu < a.max_mtu ? pi->neighbor_mtu : a.max_mtu;
		a.active_width = pi->width_active;
		a.active_speed = pi->speed_active;
		a.gid_tbl_len = QHCA_IB_GUIDS;
		a.pkey_tbl_len = QHCA_IB_PKEYS;
		a.port_cap_flags = pi->cap_mask | e->ib.cap_set;
		a.lid = pi->lid;
		a.sm_lid = pi->sm_lid;
		a.lmc = pi->lmc;
		a.sm_sl = pi->sm_sl;
		a.subnet_timeout = pi->subnet_timeout;
		a.init_type_reply = pi->init_type_reply;
		a.max_vl_num = pi->vl_cap;
		a.gid_prefix = pi->gid_prefix;
		a.port_guid = qhca_port_guid(e);
	}
	return qhca_dma_write(e, q->out_addr, &a, sizeof(a)) ? QHCA_ST_DMA_ERROR : QHCA_ST_OK;
}

static uint16_t cmd_create_uctx(struct qhca_engine *e, const struct qhca_cmd *cmd,
				struct admin_result *res)
{
	uint32_t h = qhca_obj_alloc(&e->uctx, 0);

	if (!h)
		return QHCA_ST_NO_RESOURCES;
	res->result0 = h;
	/* Slot i of the table owns doorbell page i + 1; page 0 is the kernel's. */
	res->result1 = (uint32_t)qhca_obj_lookup(&e->uctx, h) + 1;
	return QHCA_ST_OK;
}

static uint16_t cmd_destroy_uctx(struct qhca_engine *e, const struct qhca_cmd *cmd,
				 struct admin_result *res)
{
	uint32_t h = cmd->handle.handle;

	if (qhca_obj_lookup(&e->uctx, h) < 0)
		return QHCA_ST_BAD_HANDLE;
	if (qhca_obj_users(&e->uctx, h))
		return QHCA_ST_BUSY;	/* PDs, CQs, QPs or SRQs still live in it */
	qhca_obj_free(&e->uctx, h);
	return QHCA_ST_OK;
}

static uint16_t cmd_create_pd(struct qhca_engine *e, const struct qhca_cmd *cmd,
			      struct admin_result *res)
{
	uint32_t uctx = cmd->handle.handle;
	uint32_t h;

	if (uctx != QHCA_HANDLE_KERNEL && qhca_obj_lookup(&e->uctx, uctx) < 0)
		return QHCA_ST_BAD_HANDLE;
	h = qhca_obj_alloc(&e->pd, uctx);
	if (!h)
		return QHCA_ST_NO_RESOURCES;
	qhca_obj_hold(&e->uctx, uctx);
	res->result0 = h;
	return QHCA_ST_OK;
}

static uint16_t cmd_destroy_pd(struct qhca_engine *e, const struct qhca_cmd *cmd,
			       struct admin_result *res)
{
	uint32_t h = cmd->handle.handle;
	int64_t idx = qhca_obj_lookup(&e->pd, h);

	if (idx < 0)
		return QHCA_ST_BAD_HANDLE;
	if (qhca_obj_users(&e->pd, h))
		return QHCA_ST_BUSY;	/* MRs, QPs or SRQs still use it */
	qhca_obj_unhold(&e->uctx, e->pd.owner[idx]);
	qhca_obj_free(&e->pd, h);
	return QHCA_ST_OK;
}

/* XRC domains belong to the kernel: a domain outlives the processes that share it. */
static uint16_t cmd_create_xrcd(struct qhca_engine *e, const struct qhca_cmd *cmd,
				struct admin_result *res)
{
	uint32_t h = qhca_obj_alloc(&e->xrcd, QHCA_HANDLE_KERNEL);

	if (!h)
		return QHCA_ST_NO_RESOURCES;
	res->result0 = h;
	return QHCA_ST_OK;
}

static uint16_t cmd_destroy_xrcd(struct qhca_engine *e, const struct qhca_cmd *cmd,
				 struct admin_result *res)
{
	uint32_t h = cmd->handle.handle;

	if (qhca_obj_lookup(&e->xrcd, h) < 0)
		return QHCA_ST_BAD_HANDLE;
	if (qhca_obj_users(&e->xrcd, h))
		return QHCA_ST_BUSY;	/* XRC SRQs or XRC_TGT QPs still use it */
	qhca_obj_free(&e->xrcd, h);
	return QHCA_ST_OK;
}

static uint16_t cmd_create_eq(struct qhca_engine *e, const struct qhca_cmd *cmd,
			      struct admin_result *res)
{
	return qhca_eq_create(e, &cmd->create_eq, &res->result0);
}

static uint16_t cmd_destroy_eq(struct qhca_engine *e, const struct qhca_cmd *cmd,
			       struct admin_result *res)
{
	return qhca_eq_destroy(e, cmd->handle.handle);
}

static uint16_t cmd_eth_start(struct qhca_engine *e, const struct qhca_cmd *cmd,
			      struct admin_result *res)
{
	if (e->cfg.link == QHCA_LINK_IB) {
		qhca_log_guest(e, "ETH_START: an InfiniBand port has no Ethernet function");
		return QHCA_ST_BAD_STATE;
	}
	return qhca_eth_start(e, &cmd->eth_start);
}

/* The netdev's address changed: RoCE sends from it and takes frames to it from now on. */
static uint16_t cmd_set_mac(struct qhca_engine *e, const struct qhca_cmd *cmd,
			    struct admin_result *res)
{
	const struct qhca_cmd_set_mac *m = &cmd->set_mac;
	static const uint8_t zero[6];

	if (m->rsvd || (m->mac[0] & 1) || !memcmp(m->mac, zero, 6))
		return QHCA_ST_BAD_FIELD;
	memcpy(e->mac, m->mac, 6);
	qhca_log(e, QHCA_LOG_EVENT, "MAC %02x:%02x:%02x:%02x:%02x:%02x", m->mac[0], m->mac[1],
		 m->mac[2], m->mac[3], m->mac[4], m->mac[5]);
	return QHCA_ST_OK;
}

/* The InfiniBand port's commands: BAD_STATE on a RoCE port. */
static uint16_t ib_only(struct qhca_engine *e, const struct qhca_cmd *cmd)
{
	if (e->cfg.link == QHCA_LINK_IB)
		return QHCA_ST_OK;
	qhca_log_guest(e, "admin %s: the port is not InfiniBand", cmd_name(cmd->hdr.opcode));
	return QHCA_ST_BAD_STATE;
}

static uint16_t cmd_modify_port(struct qhca_engine *e, const struct qhca_cmd *cmd,
				struct admin_result *res)
{
	const struct qhca_cmd_modify_port *m = &cmd->modify_port;
	uint16_t st = ib_only(e, cmd);

	if (st)
		return st;
	if ((m->set_cap | m->clr_cap) & ~QHCA_PORT_CAP_MODIFIABLE)
		return QHCA_ST_BAD_FIELD;
	e->ib.cap_set = (e->ib.cap_set | m->set_cap) & ~m->clr_cap;
	return QHCA_ST_OK;
}

static uint16_t cmd_eth_stop(struct qhca_engine *e, const struct qhca_cmd *cmd,
			     struct admin_result *res)
{
	qhca_eth_stop(e);
	return QHCA_ST_OK;
}

/* ---------------------------------------------------------------- verbs objects */
/* Check the object command's lengths and read its input structure. */
static uint16_t obj_args(struct qhca_engine *e, const struct qhca_cmd_obj *o, void *in,
			 uint32_t in_size, uint32_t out_size)
{
	if (o->in_len != in_size || o->out_len != out_size || o->rsvd)
		return QHCA_ST_BAD_FIELD;
	if (in_size && qhca_dma_read(e, o->in_addr, in, in_size))
		return QHCA_ST_DMA_ERROR;
	return QHCA_ST_OK;
}

#define OBJ_ARGS(in, in_size, out_size)					\
	do {								\
		uint16_t st_ = obj_args(e, &cmd->obj, (in), (in_size), (out_size)); \
		if (st_)						\
			return st_;				\
	} while (0)

static uint16_t cmd_create_cq(struct qhca_engine *e, const struct qhca_cmd *cmd,
			      struct admin_result *res)
{
	struct qhca_cq_create c;

	OBJ_ARGS(&c, sizeof(c), 0);
	return qhca_cq_create(e, &c, &res->result0);
}

static uint16_t cmd_destroy_cq(struct qhca_engine *e, const struct qhca_cmd *cmd,
			       struct admin_result *res)
{
	OBJ_ARGS(NULL, 0, 0);
	return qhca_cq_destroy(e, cmd->obj.handle);
}

static uint16_t cmd_create_mr(struct qhca_engine *e, const struct qhca_cmd *cmd,
			      struct admin_result *res)
{
	struct qhca_mr_create c;

	OBJ_ARGS(&c, sizeof(c), 0);
	return qhca_mr_create(e, &c, &res->result0);
}

static uint16_t cmd_destroy_mr(struct qhca_engine *e, const struct qhca_cmd *cmd,
			       struct admin_result *res)
{
	OBJ_ARGS(NULL, 0, 0);
	return qhca_mr_destroy(e, cmd->obj.handle);
}

static uint16_t cmd_resize_cq(struct qhca_engine *e, const struct qhca_cmd *cmd,
			      struct admin_result *res)
{
	struct qhca_cq_resize r;

	OBJ_ARGS(&r, sizeof(r), 0);
	return qhca_cq_resize(e, cmd->obj.handle, &r);
}

static uint16_t cmd_resize_srq(struct qhca_engine *e, const struct qhca_cmd *cmd,
			       struct admin_result *res)
{
	struct qhca_srq_resize r;

	OBJ_ARGS(&r, sizeof(r), 0);
	return qhca_srq_resize(e, cmd->obj.handle, &r);
}

static uint16_t cmd_rereg_mr(struct qhca_engine *e, const struct qhca_cmd *cmd,
			     struct admin_result *res)
{
	struct qhca_mr_create c;

	OBJ_ARGS(&c, sizeof(c), 0);
	return qhca_mr_rereg(e, cmd->obj.handle, &c);
}

static uint16_t cmd_create_qp(struct qhca_engine *e, const struct qhca_cmd *cmd,
			      struct admin_result *res)
{
	struct qhca_qp_create c;
	uint16_t st;

	OBJ_ARGS(&c, sizeof(c), 0);
	if ((c.type == QHCA_QPT_GSI && e->gsi_qpn) || (c.type == QHCA_QPT_SMI && e->smi_qpn))
		return QHCA_ST_BUSY;
	if (c.type == QHCA_QPT_SMI && (e->cfg.link != QHCA_LINK_IB || c.uctx))
		return QHCA_ST_BAD_FIELD;	/* QP0 exists on InfiniBand ports, for the kernel */
	st = qhca_qp_create(e, &c, &res->result0);
	if (st == QHCA_ST_OK && c.type == QHCA_QPT_GSI)
		e->gsi_qpn = res->result0;
	if (st == QHCA_ST_OK && c.type == QHCA_QPT_SMI)
		e->smi_qpn = res->result0;
	return st;
}

static uint16_t cmd_modify_qp(struct qhca_engine *e, const struct qhca_cmd *cmd,
			      struct admin_result *res)
{
	struct qhca_qp_attr a;

	OBJ_ARGS(&a, sizeof(a), 0);
	return qhca_qp_modify(e, cmd->obj.handle, &a);
}

/* A query's answer ST with its LEN bytes at A: written to the command's out buffer if OK. */
static uint16_t put_answer(struct qhca_engine *e, const struct qhca_cmd *cmd, uint16_t st,
			   const void *a, size_t len)
{
	if (st == QHCA_ST_OK && qhca_dma_write(e, cmd->obj.out_addr, a, len))
		st = QHCA_ST_DMA_ERROR;
	return st;
}

static uint16_t cmd_query_qp(struct qhca_engine *e, const struct qhca_cmd *cmd,
			     struct admin_result *res)
{
	struct qhca_qp_attr a;

	OBJ_ARGS(NULL, 0, sizeof(a));
	return put_answer(e, cmd, qhca_qp_query(e, cmd->obj.handle, &a), &a, sizeof(a));
}

static uint16_t cmd_destroy_qp(struct qhca_engine *e, const struct qhca_cmd *cmd,
			       struct admin_result *res)
{
	uint16_t st;

	OBJ_ARGS(NULL, 0, 0);
	st = qhca_qp_destroy(e, cmd->obj.handle);
	if (st != QHCA_ST_OK)
		return st;
	if (cmd->obj.handle == e->gsi_qpn)
		e->gsi_qpn = 0;
	if (cmd->obj.handle == e->smi_qpn)
		e->smi_qpn = 0;
	qhca_mcast_forget_qp(e, cmd->obj.handle);
	return st;
}

static uint16_t cmd_create_srq(struct qhca_engine *e, const struct qhca_cmd *cmd,
			       struct admin_result *res)
{
	struct qhca_srq_create c;

	/* The form of ABI minor 3 and before: an ordinary SRQ. */
	memset(&c, 0, sizeof(c));
	if (cmd->obj.in_len == QHCA_SRQ_CREATE_V3_SIZE)
		OBJ_ARGS(&c, QHCA_SRQ_CREATE_V3_SIZE, 0);
	else
		OBJ_ARGS(&c, sizeof(c), 0);
	return qhca_srq_create(e, &c, &res->result0);
}

static uint16_t cmd_modify_srq(struct qhca_engine *e, const struct qhca_cmd *cmd,
			       struct admin_result *res)
{
	struct qhca_srq_modify m;

	OBJ_ARGS(&m, sizeof(m), 0);
	return qhca_srq_modify(e, cmd->obj.handle, &m);
}

static uint16_t cmd_query_srq(struct qhca_engine *e, const struct qhca_cmd *cmd,
			      struct admin_result *res)
{
	struct qhca_srq_attr a;

	OBJ_ARGS(NULL, 0, sizeof(a));
	return put_answer(e, cmd, qhca_srq_query(e, cmd->obj.handle, &a), &a, sizeof(a));
}

static uint16_t cmd_destroy_srq(struct qhca_engine *e, const struct qhca_cmd *cmd,
				struct admin_result *res)
{
	OBJ_ARGS(NULL, 0, 0);
	return qhca_srq_destroy(e, cmd->obj.handle);
}

static uint16_t cmd_query_counters(struct qhca_engine *e, const struct qhca_cmd *cmd,
				   struct admin_result *res)
{
	const struct qhca_counters *c = &e->cnt;
	struct qhca_counters_block b;
	uint64_t tcp_retransmits, tcp_timeouts;

	OBJ_ARGS(NULL, 0, sizeof(b));
	memset(&b, 0, sizeof(b));
	qhca_iw_tcp_counts(e, &tcp_retransmits, &tcp_timeouts);	/* 0 but on iWARP */
	b.value[QHCA_CNT_TX_PKTS] = c->roce_tx_pkts;
	b.value[QHCA_CNT_TX_BYTES] = c->roce_tx_bytes;
	b.value[QHCA_CNT_RX_PKTS] = c->roce_rx_pkts;
	b.value[QHCA_CNT_RX_BYTES] = c->roce_rx_bytes;
	b.value[QHCA_CNT_RETRANSMITS] = c->retransmits + tcp_retransmits;
	b.value[QHCA_CNT_TIMEOUTS] = c->timeouts + tcp_timeouts;
	b.value[QHCA_CNT_NAKS_SENT] = c->naks_sent;
	b.value[QHCA_CNT_NAKS_RECEIVED] = c->naks_received;
	b.value[QHCA_CNT_RNR_NAKS_SENT] = c->rnr_naks_sent;
	b.value[QHCA_CNT_RNR_NAKS_RECEIVED] = c->rnr_naks_received;
	b.value[QHCA_CNT_DUPLICATES] = c->roce_rx_dup;
	b.value[QHCA_CNT_OUT_OF_SEQUENCE] = c->roce_rx_out_of_seq;
	b.value[QHCA_CNT_DROP_BAD_LENGTH] = c->roce_rx_bad[ROCE_BAD_LENGTH];
	b.value[QHCA_CNT_DROP_BAD_IP] = c->roce_rx_bad[ROCE_BAD_IP];
	b.value[QHCA_CNT_DROP_BAD_OPCODE] = c->roce_rx_bad[ROCE_BAD_OPCODE];
	b.value[QHCA_CNT_DROP_BAD_ICRC] = c->roce_rx_bad[ROCE_BAD_ICRC];
	b.value[QHCA_CNT_DROP_NO_QP] = c->roce_rx_no_qp;
	b.value[QHCA_CNT_DROP_BAD_STATE] = c->roce_rx_bad_state;
	b.value[QHCA_CNT_DROP_BAD_PKEY] = c->roce_rx_bad_pkey;
	b.value[QHCA_CNT_DROP_BAD_QKEY] = c->roce_rx_bad_qkey;
	b.value[QHCA_CNT_LOOPBACK_PKTS] = c->loopback_pkts;
	b.value[QHCA_CNT_CQ_OVERFLOWS] = c->cq_overflows;
	b.value[QHCA_CNT_ETH_TX_FRAMES] = c->eth_tx_frames;
	b.value[QHCA_CNT_ETH_RX_FRAMES] = c->eth_rx_frames;
	b.value[QHCA_CNT_DROP_NO_WQE] = c->roce_rx_no_wqe;
	b.value[QHCA_CNT_REMOTE_ACCESS_ERRORS] = c->remote_access_errors;
	b.value[QHCA_CNT_DROP_BUSY] = c->roce_rx_busy;
	b.value[QHCA_CNT_DROP_BAD_VCRC] = c->roce_rx_bad[ROCE_BAD_VCRC];
	b.value[QHCA_CNT_DROP_BAD_LID] = c->ib_rx_bad_lid;
	b.value[QHCA_CNT_SMPS] = c->smps;
	b.value[QHCA_CNT_ETH_RX_DROPS] = c->eth_rx_no_buffer + c->eth_rx_too_long +
					 c->eth_rx_stopped;
	return qhca_dma_write(e, cmd->obj.out_addr, &b, sizeof(b)) ? QHCA_ST_DMA_ERROR :
								     QHCA_ST_OK;
}

static uint16_t cmd_mad_ifc(struct qhca_engine *e, const struct qhca_cmd *cmd,
			   struct admin_result *res)
{
	uint8_t in[QHCA_MAD_SIZE], out[QHCA_MAD_SIZE];
	uint16_t st = ib_only(e, cmd);

	if (st)
		return st;
	OBJ_ARGS(in, sizeof(in), sizeof(out));
	if ((cmd->obj.handle & ~QHCA_MAD_IFC_IGNORE_MKEY) != 1)
		return QHCA_ST_BAD_FIELD;
	res->result0 = (uint32_t)qhca_mad_ifc(e, in, out,
					      cmd->obj.handle & QHCA_MAD_IFC_IGNORE_MKEY);
	if (res->result0 && qhca_dma_write(e, cmd->obj.out_addr, out, sizeof(out)))
		return QHCA_ST_DMA_ERROR;
	return QHCA_ST_OK;
}

static uint16_t cmd_set_node_desc(struct qhca_engine *e, const struct qhca_cmd *cmd,
				  struct admin_result *res)
{
	char d[QHCA_NODE_DESC_SIZE];
	uint16_t st = ib_only(e, cmd);

	if (st)
		return st;
	OBJ_ARGS(d, sizeof(d), 0);
	memcpy(e->ib.node_desc, d, sizeof(d));
	return QHCA_ST_OK;
}

static uint16_t cmd_attach_mcast(struct qhca_engine *e, const struct qhca_cmd *cmd,
				 struct admin_result *res)
{
	struct qhca_mcast m;

	OBJ_ARGS(&m, sizeof(m), 0);
	return qhca_mcast_attach(e, cmd->obj.handle, &m);
}

/* iWARP connections (iw_cm.c); BAD_STATE on a port of another link layer. */
static uint16_t cmd_iw_listen(struct qhca_engine *e, const struct qhca_cmd *cmd,
			      struct admin_result *res)
{
	struct qhca_iw_listen l;

	OBJ_ARGS(&l, sizeof(l), 0);
	return qhca_iw_listen(e, &l, &res->result0);
}

static uint16_t cmd_iw_unlisten(struct qhca_engine *e, const struct qhca_cmd *cmd,
				struct admin_result *res)
{
	OBJ_ARGS(NULL, 0, 0);
	return qhca_iw_unlisten(e, cmd->obj.handle);
}

/* The connection commands that take a struct qhca_iw_conn: its length checked, read into
 * the port's scratch record (592 bytes: not on the stack). */
static uint16_t iw_conn_args(struct qhca_engine *e, const struct qhca_cmd *cmd,
			     struct qhca_iw_conn **c)
{
	*c = qhca_iw_scratch(e);
	if (!*c)
		return QHCA_ST_BAD_STATE;
	return obj_args(e, &cmd->obj, *c, sizeof(**c), 0);
}

/* One of iw_cm.c's commands on a connection handle and its struct qhca_iw_conn. */
static uint16_t iw_conn_cmd(struct qhca_engine *e, const struct qhca_cmd *cmd,
			    uint16_t (*fn)(struct qhca_engine *, uint32_t,
					   const struct qhca_iw_conn *))
{
	struct qhca_iw_conn *c;
	uint16_t st = iw_conn_args(e, cmd, &c);

	return st ? st : fn(e, cmd->obj.handle, c);
}

static uint16_t cmd_iw_connect(struct qhca_engine *e, const struct qhca_cmd *cmd,
			       struct admin_result *res)
{
	struct qhca_iw_conn *c;
	uint16_t st = iw_conn_args(e, cmd, &c);

	return st ? st : qhca_iw_connect(e, cmd->obj.handle, c, &res->result0);
}

static uint16_t cmd_iw_accept(struct qhca_engine *e, const struct qhca_cmd *cmd,
			      struct admin_result *res)
{
	return iw_conn_cmd(e, cmd, qhca_iw_accept);
}

static uint16_t cmd_iw_reject(struct qhca_engine *e, const struct qhca_cmd *cmd,
			      struct admin_result *res)
{
	return iw_conn_cmd(e, cmd, qhca_iw_reject);
}

static uint16_t cmd_iw_disconnect(struct qhca_engine *e, const struct qhca_cmd *cmd,
				  struct admin_result *res)
{
	return iw_conn_cmd(e, cmd, qhca_iw_disconnect);
}

static uint16_t cmd_iw_query_conn(struct qhca_engine *e, const struct qhca_cmd *cmd,
				  struct admin_result *res)
{
	struct qhca_iw_conn *c = qhca_iw_scratch(e);

	if (!c)
		return QHCA_ST_BAD_STATE;
	OBJ_ARGS(NULL, 0, sizeof(*c));
	memset(c, 0, sizeof(*c));
	return put_answer(e, cmd, qhca_iw_query(e, cmd->obj.handle, c), c, sizeof(*c));
}

static uint16_t cmd_detach_mcast(struct qhca_engine *e, const struct qhca_cmd *cmd,
				 struct admin_result *res)
{
	struct qhca_mcast m;

	OBJ_ARGS(&m, sizeof(m), 0);
	return qhca_mcast_detach(e, cmd->obj.handle, &m);
}

/* Commands whose body is a struct qhca_cmd_handle, whose reserved word must be zero. */
#define HANDLE_BODY	sizeof(struct qhca_cmd_handle), true

static const struct {
	cmd_handler fn;
	uint16_t body_len;
	bool handle_body;
} cmd_table[QHCA_CMD_MAX] = {
	[QHCA_CMD_NOP] = { cmd_nop, 0 },
	[QHCA_CMD_QUERY_DEVICE] = { cmd_query_device, sizeof(struct qhca_cmd_query) },
	[QHCA_CMD_QUERY_PORT] = { cmd_query_port, sizeof(struct qhca_cmd_query) },
	[QHCA_CMD_CREATE_UCTX] = { cmd_create_uctx, 0 },
	[QHCA_CMD_DESTROY_UCTX] = { cmd_destroy_uctx, HANDLE_BODY },
	[QHCA_CMD_CREATE_PD] = { cmd_create_pd, HANDLE_BODY },
	[QHCA_CMD_DESTROY_PD] = { cmd_destroy_pd, HANDLE_BODY },
	[QHCA_CMD_CREATE_XRCD] = { cmd_create_xrcd, 0 },
	[QHCA_CMD_DESTROY_XRCD] = { cmd_destroy_xrcd, HANDLE_BODY },
	[QHCA_CMD_CREATE_EQ] = { cmd_create_eq, sizeof(struct qhca_cmd_create_eq) },
	[QHCA_CMD_DESTROY_EQ] = { cmd_destroy_eq, HANDLE_BODY },
	[QHCA_CMD_ETH_START] = { cmd_eth_start, sizeof(struct qhca_cmd_eth_start) },
	[QHCA_CMD_ETH_STOP] = { cmd_eth_stop, 0 },
	[QHCA_CMD_SET_MAC] = { cmd_set_mac, sizeof(struct qhca_cmd_set_mac) },
	[QHCA_CMD_CREATE_CQ] = { cmd_create_cq, sizeof(struct qhca_cmd_obj) },
	[QHCA_CMD_DESTROY_CQ] = { cmd_destroy_cq, sizeof(struct qhca_cmd_obj) },
	[QHCA_CMD_CREATE_MR] = { cmd_create_mr, sizeof(struct qhca_cmd_obj) },
	[QHCA_CMD_DESTROY_MR] = { cmd_destroy_mr, sizeof(struct qhca_cmd_obj) },
	[QHCA_CMD_CREATE_QP] = { cmd_create_qp, sizeof(struct qhca_cmd_obj) },
	[QHCA_CMD_MODIFY_QP] = { cmd_modify_qp, sizeof(struct qhca_cmd_obj) },
	[QHCA_CMD_QUERY_QP] = { cmd_query_qp, sizeof(struct qhca_cmd_obj) },
	[QHCA_CMD_DESTROY_QP] = { cmd_destroy_qp, sizeof(struct qhca_cmd_obj) },
	[QHCA_CMD_CREATE_SRQ] = { cmd_create_srq, sizeof(struct qhca_cmd_obj) },
	[QHCA_CMD_MODIFY_SRQ] = { cmd_modify_srq, sizeof(struct qhca_cmd_obj) },
	[QHCA_CMD_DESTROY_SRQ] = { cmd_destroy_srq, sizeof(struct qhca_cmd_obj) },
	[QHCA_CMD_REREG_MR] = { cmd_rereg_mr, sizeof(struct qhca_cmd_obj) },
	[QHCA_CMD_RESIZE_CQ] = { cmd_resize_cq, sizeof(struct qhca_cmd_obj) },
	[QHCA_CMD_RESIZE_SRQ] = { cmd_resize_srq, sizeof(struct qhca_cmd_obj) },
	[QHCA_CMD_QUERY_COUNTERS] = { cmd_query_counters, sizeof(struct qhca_cmd_obj) },
	[QHCA_CMD_QUERY_SRQ] = { cmd_query_srq, sizeof(struct qhca_cmd_obj) },
	[QHCA_CMD_MAD_IFC] = { cmd_mad_ifc, sizeof(struct qhca_cmd_obj) },
	[QHCA_CMD_MODIFY_PORT] = { cmd_modify_port, sizeof(struct qhca_cmd_modify_port) },
	[QHCA_CMD_SET_NODE_DESC] = { cmd_set_node_desc, sizeof(struct qhca_cmd_obj) },
	[QHCA_CMD_ATTACH_MCAST] = { cmd_attach_mcast, sizeof(struct qhca_cmd_obj) },
	[QHCA_CMD_DETACH_MCAST] = { cmd_detach_mcast, sizeof(struct qhca_cmd_obj) },
	[QHCA_CMD_IW_LISTEN] = { cmd_iw_listen, sizeof(struct qhca_cmd_obj) },
	[QHCA_CMD_IW_UNLISTEN] = { cmd_iw_unlisten, sizeof(struct qhca_cmd_obj) },
	[QHCA_CMD_IW_CONNECT] = { cmd_iw_connect, sizeof(struct qhca_cmd_obj) },
	[QHCA_CMD_IW_ACCEPT] = { cmd_iw_accept, sizeof(struct qhca_cmd_obj) },
	[QHCA_CMD_IW_REJECT] = { cmd_iw_reject, sizeof(struct qhca_cmd_obj) },
	[QHCA_CMD_IW_QUERY_CONN] = { cmd_iw_query_conn, sizeof(struct qhca_cmd_obj) },
	[QHCA_CMD_IW_DISCONNECT] = { cmd_iw_disconnect, sizeof(struct qhca_cmd_obj) },
};

static uint16_t execute(struct qhca_engine *e, const struct qhca_cmd *cmd,
			struct admin_result *res)
{
	const struct qhca_cmd_hdr *h = &cmd->hdr;
	uint16_t want;

	if (h->opcode >= QHCA_CMD_MAX || !cmd_table[h->opcode].fn) {
		qhca_log_guest(e, "admin cmd id=%u: unknown opcode 0x%x", h->cmd_id, h->opcode);
		return QHCA_ST_BAD_OPCODE;
	}
	want = cmd_table[h->opcode].body_len;
	if (h->len != want) {
		qhca_log_guest(e, "admin cmd id=%u %s: length %u, expected %u", h->cmd_id,
			       cmd_name(h->opcode), h->len, want);
		return QHCA_ST_BAD_LENGTH;
	}
	if (h->flags || h->rsvd || !body_is_zero(cmd->raw + want, QHCA_CMD_BODY_SIZE - want)) {
		qhca_log_guest(e, "admin cmd id=%u %s: reserved fields set", h->cmd_id,
			       cmd_name(h->opcode));
		return QHCA_ST_BAD_FIELD;
	}
	if (cmd_table[h->opcode].handle_body && cmd->handle.rsvd)
		return QHCA_ST_BAD_FIELD;
	return cmd_table[h->opcode].fn(e, cmd, res);
}

static void fatal(struct qhca_engine *e, enum qhca_fatal_error err)
{
	qhca_log_guest(e, "fatal device error %d; the driver must reset the device", err);
	e->status = (e->status & ~QHCA_STATUS_READY) | QHCA_STATUS_FATAL;
	e->error = err;
	if (e->cfg.msix_vectors && !(e->intr_mask & 1))
		e->ops->notify(e->opaque, 0);
}

static bool running(const struct qhca_engine *e)
{
	return (e->status & (QHCA_STATUS_READY | QHCA_STATUS_FATAL)) == QHCA_STATUS_READY;
}

/* Write one completion: the entry first with the stale phase, then the valid phase. */
static int post_completion(struct qhca_engine *e, const struct qhca_cqe_admin *cqe)
{
	uint64_t slot = e->acq_base + (uint64_t)e->acq_tail * sizeof(*cqe);
	struct qhca_cqe_admin tmp = *cqe;

	tmp.flags = e->acq_phase ^ QHCA_CQE_PHASE;
	if (qhca_dma_write(e, slot, &tmp, sizeof(tmp)) ||
	    qhca_dma_write(e, slot + offsetof(struct qhca_cqe_admin, flags), &cqe->flags,
			   sizeof(cqe->flags)))
		return -1;
	e->acq_tail = (e->acq_tail + 1) & (depth(e) - 1);
	if (e->acq_tail == 0)
		e->acq_phase ^= QHCA_CQE_PHASE;
	return 0;
}

/*
 * The work of one doorbell or timer callback: a guest can queue 4095 commands, and some
 * move many megabytes (a RESIZE_SRQ copies the WQEs posted, a CREATE_MR reads a page list
 * of up to 8 MiB). Past either budget the rest goes on from the engine's timer, armed at
 * once, so that QEMU's main loop (and the vCPUs that wait for its lock) has its turn.
 */
#define ADMIN_CMD_BUDGET	64
#define ADMIN_BYTE_BUDGET	(16u << 20)

/*
 * Run commands until the SQ is empty, the CQ is full or the budget is spent (then
 * admin_pending: the timer goes on); interrupt once at the end.
 */
static void process(struct qhca_engine *e)
{
	uint32_t mask = depth(e) - 1;
	uint64_t bytes = e->dma_bytes;
	unsigned cmds = 0;
	bool posted = false;

	e->admin_pending = false;
	while (running(e) && e->asq_head != e->asq_tail) {
		struct qhca_cmd cmd;
		struct qhca_cqe_admin cqe;
		struct admin_result res = { 0 };

		if (((e->acq_tail + 1) & mask) == e->acq_head)
			break;	/* completion ring full: wait for an ACQ_HEAD doorbell */
		if (cmds == ADMIN_CMD_BUDGET || e->dma_bytes - bytes >= ADMIN_BYTE_BUDGET) {
			e->admin_pending = true;
			break;
		}
		cmds++;
		if (qhca_dma_read(e, e->asq_base + (uint64_t)e->asq_head * QHCA_CMD_SIZE, &cmd,
				  sizeof(cmd))) {
			fatal(e, QHCA_ERR_DMA);
			return;
		}
		res.status = execute(e, &cmd, &res);
		e->admin_cmds++;
		if (res.status != QHCA_ST_OK) {
			e->admin_errors++;
			res.result0 = res.result1 = 0;
		}
		qhca_log(e, QHCA_LOG_EVENT, "admin cmd id=%u %s status=%u result=0x%x/0x%x",
			 cmd.hdr.cmd_id, cmd_name(cmd.hdr.opcode), res.status, res.result0,
			 res.result1);
		e->asq_head = (e->asq_head + 1) & mask;
		memset(&cqe, 0, sizeof(cqe));
		cqe.cmd_id = cmd.hdr.cmd_id;
		cqe.status = res.status;
		cqe.sq_head = (uint16_t)e->asq_head;
		cqe.flags = e->acq_phase;
		cqe.result0 = res.result0;
		cqe.result1 = res.result1;
		if (post_completion(e, &cqe)) {
			fatal(e, QHCA_ERR_DMA);
			return;
		}
		posted = true;
	}
	if (posted && !(e->intr_mask & 1))
		e->ops->notify(e->opaque, 0);
	if (e->admin_pending)
		qhca_timer_update(e);
}

void qhca_admin_resume(struct qhca_engine *e)
{
	if (e->admin_pending)
		process(e);
}

/* The rings start over; work a budget deferred is dropped (the caller updates the timer). */
void qhca_admin_reset(struct qhca_engine *e)
{
	e->admin_pending = false;
	e->asq_head = e->asq_tail = 0;
	e->acq_head = e->acq_tail = 0;
	e->acq_phase = QHCA_CQE_PHASE;
}

bool qhca_admin_enable(struct qhca_engine *e)
{
	qhca_admin_reset(e);
	if (e->aq_depth_log2 < QHCA_AQ_DEPTH_MIN_LOG2 || e->aq_depth_log2 > QHCA_AQ_DEPTH_MAX_LOG2 ||
	    !e->asq_base || !e->acq_base || (e->asq_base | e->acq_base) % QHCA_AQ_ALIGN) {
		qhca_log_guest(e, "enable with bad admin queue: asq=0x%llx acq=0x%llx depth=2^%u",
			       (unsigned long long)e->asq_base, (unsigned long long)e->acq_base,
			       e->aq_depth_log2);
		fatal(e, QHCA_ERR_AQ_CONFIG);
		return false;
	}
	qhca_log(e, QHCA_LOG_EVENT, "enabled: asq=0x%llx acq=0x%llx depth=%u",
		 (unsigned long long)e->asq_base, (unsigned long long)e->acq_base, depth(e));
	return true;
}

/* A ring index from a doorbell: ignored while not running, fatal when past the ring. */
static bool ring_index_ok(struct qhca_engine *e, uint32_t idx, const char *which,
			  enum qhca_fatal_error err)
{
	if (!running(e)) {
		qhca_log_guest(e, "admin %s doorbell %u while not ready ignored", which, idx);
		return false;
	}
	if (idx >= depth(e)) {
		qhca_log_guest(e, "admin %s index %u past ring of %u", which, idx, depth(e));
		fatal(e, err);
		return false;
	}
	return true;
}

void qhca_admin_sq_doorbell(struct qhca_engine *e, uint32_t tail)
{
	if (!ring_index_ok(e, tail, "SQ tail", QHCA_ERR_AQ_TAIL))
		return;
	e->asq_tail = tail;
	if (!e->admin_pending)	/* else the timer's run goes on, to this tail */
		process(e);
}

void qhca_admin_cq_doorbell(struct qhca_engine *e, uint32_t head)
{
	if (!ring_index_ok(e, head, "CQ head", QHCA_ERR_AQ_HEAD))
		return;
	e->acq_head = head;
	if (!e->admin_pending)
		process(e);
}
