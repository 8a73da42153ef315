/* SPDX-License-Identifier: (GPL-2.0 OR BSD-2-Clause) */
/*
 * qhca device interface: PCI identity, BAR0 registers, doorbell page layout, admin queue
 * command and completion formats, and the attribute blocks commands return.
 *
 * This is the one definition shared by the QEMU device model (hw-model/), the Linux driver
 * (guest-driver/) and the rdma-core provider (guest-provider/). Every structure is
 * little-endian with fixed-width fields and has its size asserted below. See
 * docs/device-interface.md for the prose version.
 */
#ifndef QHCA_ABI_H
#define QHCA_ABI_H

#ifdef __KERNEL__
#include <linux/types.h>
#else
#include <stdint.h>
#endif

#define QHCA_ABI_ASSERT_SIZE(type, size) \
	_Static_assert(sizeof(type) == (size), "abi: sizeof(" #type ") != " #size)

/* ---------------------------------------------------------------- PCI identity */
#define QHCA_PCI_VENDOR_ID		0x1af4	/* QEMU experimental range 1af4:10f0-10ff */
#define QHCA_PCI_DEVICE_ID		0x10f0
#define QHCA_PCI_REVISION		0x01
#define QHCA_PCI_CLASS			0x0207	/* network controller, InfiniBand */

#define QHCA_BAR_REGS			0	/* 4 KiB of registers */
#define QHCA_BAR_DOORBELL		2	/* QHCA_DB_PAGE_SIZE per page, 64-bit */
#define QHCA_BAR_MSIX			4	/* MSI-X table and PBA */

#define QHCA_REGS_SIZE			0x1000
#define QHCA_DB_PAGE_SIZE		0x1000

/* Interface version: major changes are incompatible, minor ones add features. */
#define QHCA_ABI_VERSION_MAJOR		1
#define QHCA_ABI_VERSION_MINOR		0
#define QHCA_ABI_VERSION		((QHCA_ABI_VERSION_MAJOR << 16) | QHCA_ABI_VERSION_MINOR)

/* ---------------------------------------------------------------- BAR0 registers */
/* All registers are 32 bits wide, accessed with aligned 32-bit loads and stores. */
#define QHCA_REG_VERSION		0x000	/* RO: QHCA_ABI_VERSION */
#define QHCA_REG_CAPS			0x004	/* RO: QHCA_CAP_* */
#define QHCA_REG_DB_PAGES		0x008	/* RO: doorbell pages in BAR2 */
#define QHCA_REG_MSIX_VECTORS		0x00c	/* RO: MSI-X vectors (vector 0: admin/async) */
#define QHCA_REG_CTRL			0x010	/* RW: QHCA_CTRL_* */
#define QHCA_REG_STATUS			0x014	/* RO: QHCA_STATUS_* */
#define QHCA_REG_ASQ_BASE_LO		0x018	/* RW while disabled: admin SQ address */
#define QHCA_REG_ASQ_BASE_HI		0x01c
#define QHCA_REG_ACQ_BASE_LO		0x020	/* RW while disabled: admin CQ address */
#define QHCA_REG_ACQ_BASE_HI		0x024
#define QHCA_REG_AQ_DEPTH		0x028	/* RW while disabled: log2 entries, both queues */
#define QHCA_REG_ASQ_TAIL		0x02c	/* WO: admin SQ doorbell, new producer index */
#define QHCA_REG_ACQ_HEAD		0x030	/* WO: admin CQ consumer index */
#define QHCA_REG_ERROR			0x034	/* RO: QHCA_ERR_* of the last fatal error */
#define QHCA_REG_INTR_MASK		0x038	/* RW: bit n masks MSI-X vector n (n < 32) */

#define QHCA_CAP_ADMIN_PHASE		(1u << 0)	/* admin CQ uses a phase bit */
#define QHCA_CAP_ROCE_V2		(1u << 1)

#define QHCA_CTRL_ENABLE		(1u << 0)	/* 1: start the admin queue */
#define QHCA_CTRL_RESET			(1u << 1)	/* write 1: full reset; reads 0 */

#define QHCA_STATUS_READY		(1u << 0)	/* admin queue running */
#define QHCA_STATUS_FATAL		(1u << 1)	/* stopped; see QHCA_REG_ERROR; reset */

#define QHCA_AQ_DEPTH_MIN_LOG2		1
#define QHCA_AQ_DEPTH_MAX_LOG2		12
#define QHCA_AQ_ALIGN			4096

enum qhca_fatal_error {
	QHCA_ERR_NONE = 0,
	QHCA_ERR_AQ_CONFIG = 1,		/* enable with a bad base or depth */
	QHCA_ERR_AQ_TAIL = 2,		/* ASQ tail doorbell past the ring */
	QHCA_ERR_AQ_HEAD = 3,		/* ACQ head doorbell past the ring */
	QHCA_ERR_DMA = 4,		/* admin queue DMA failed */
};

/* ---------------------------------------------------------------- doorbell pages */
/*
 * BAR2 holds QHCA_REG_DB_PAGES pages. Page 0 belongs to the kernel driver; page n >= 1 is
 * given to the user context created with it (QHCA_CMD_CREATE_UCTX) and may be mapped into
 * user space. A doorbell is one aligned 64-bit store; the datapath defines its fields.
 */
#define QHCA_DB_SQ			0x000
#define QHCA_DB_RQ			0x008
#define QHCA_DB_SRQ			0x010
#define QHCA_DB_CQ_ARM			0x018
#define QHCA_DB_CQ_CI			0x020
/* Page 0 only (the kernel driver's): */
#define QHCA_DB_EQ			0x040	/* eq handle (bits 0-31), consumer index (32-63) */
#define QHCA_DB_ETH_TX			0x048	/* Ethernet TX producer index (free running) */
#define QHCA_DB_ETH_RX			0x050	/* Ethernet RX producer index (free running) */

/* ---------------------------------------------------------------- admin queue */
enum qhca_cmd_opcode {
	QHCA_CMD_NOP = 0x00,
	QHCA_CMD_QUERY_DEVICE = 0x01,	/* out: struct qhca_device_attr */
	QHCA_CMD_QUERY_PORT = 0x02,	/* out: struct qhca_port_attr */
	QHCA_CMD_CREATE_UCTX = 0x10,	/* result0: uctx handle, result1: doorbell page */
	QHCA_CMD_DESTROY_UCTX = 0x11,
	QHCA_CMD_CREATE_PD = 0x12,	/* result0: pd handle */
	QHCA_CMD_DESTROY_PD = 0x13,
	QHCA_CMD_CREATE_EQ = 0x20,	/* result0: eq handle */
	QHCA_CMD_DESTROY_EQ = 0x21,
	QHCA_CMD_ETH_START = 0x30,	/* start the Ethernet function's rings */
	QHCA_CMD_ETH_STOP = 0x31,
	QHCA_CMD_MAX
};

enum qhca_cmd_status {
	QHCA_ST_OK = 0,
	QHCA_ST_BAD_OPCODE = 1,		/* unknown opcode */
	QHCA_ST_BAD_LENGTH = 2,		/* header length differs from the opcode's */
	QHCA_ST_BAD_FIELD = 3,		/* reserved bits set, or a field out of range */
	QHCA_ST_BAD_HANDLE = 4,		/* no such object, or wrong owner */
	QHCA_ST_NO_RESOURCES = 5,	/* a device limit is reached */
	QHCA_ST_BUSY = 6,		/* object still referenced */
	QHCA_ST_DMA_ERROR = 7,		/* reading or writing guest memory failed */
	QHCA_ST_BAD_STATE = 8,		/* not allowed in the object's state */
	QHCA_ST_MAX
};

/*
 * An admin command is 64 bytes: a header and an opcode-specific body. len is the length of
 * the used body in bytes and must equal the opcode's fixed body length; reserved bytes
 * must be zero.
 */
struct qhca_cmd_hdr {
	uint8_t opcode;
	uint8_t flags;		/* reserved, 0 */
	uint16_t cmd_id;	/* echoed in the completion */
	uint16_t len;		/* body length */
	uint16_t rsvd;
};
QHCA_ABI_ASSERT_SIZE(struct qhca_cmd_hdr, 8);

/* QUERY_DEVICE, QUERY_PORT: the device writes out_len bytes of attributes to out_addr. */
struct qhca_cmd_query {
	uint64_t out_addr;
	uint32_t out_len;	/* must equal the attribute block's size */
	uint32_t port;		/* QUERY_PORT: 1; QUERY_DEVICE: 0 */
};
QHCA_ABI_ASSERT_SIZE(struct qhca_cmd_query, 16);

/* CREATE_UCTX: no arguments. DESTROY_UCTX, CREATE_PD, DESTROY_PD: one handle. */
struct qhca_cmd_handle {
	uint32_t handle;	/* uctx for CREATE_PD and DESTROY_UCTX, pd for DESTROY_PD */
	uint32_t rsvd;
};
QHCA_ABI_ASSERT_SIZE(struct qhca_cmd_handle, 8);

/*
 * CREATE_EQ: an event queue of 2^log2_entries struct qhca_eqe in one physically
 * contiguous, 4 KiB aligned buffer. Events raise MSI-X @vector. With QHCA_EQ_ASYNC the
 * queue also receives the device's asynchronous events (at most one such queue).
 */
#define QHCA_EQ_ASYNC			(1u << 0)
#define QHCA_EQ_MAX_LOG2		12
struct qhca_cmd_create_eq {
	uint64_t ring_addr;
	uint32_t log2_entries;		/* 1..QHCA_EQ_MAX_LOG2 */
	uint16_t vector;
	uint16_t flags;			/* QHCA_EQ_* */
};
QHCA_ABI_ASSERT_SIZE(struct qhca_cmd_create_eq, 16);

/*
 * ETH_START: the Ethernet function's transmit and receive rings, each 2^log2 struct
 * qhca_eth_desc in one physically contiguous, 4 KiB aligned buffer. Completions raise
 * MSI-X @vector. Frames that are not RoCEv2 go to the receive ring.
 */
#define QHCA_ETH_RING_MAX_LOG2		12
struct qhca_cmd_eth_start {
	uint64_t tx_ring;
	uint64_t rx_ring;
	uint32_t tx_log2;		/* 1..QHCA_ETH_RING_MAX_LOG2 */
	uint32_t rx_log2;
	uint16_t vector;
	uint16_t rsvd0;
	uint32_t rsvd1;
};
QHCA_ABI_ASSERT_SIZE(struct qhca_cmd_eth_start, 32);

#define QHCA_CMD_SIZE			64
#define QHCA_CMD_BODY_SIZE		(QHCA_CMD_SIZE - sizeof(struct qhca_cmd_hdr))

struct qhca_cmd {
	struct qhca_cmd_hdr hdr;
	union {
		struct qhca_cmd_query query;
		struct qhca_cmd_handle handle;
		struct qhca_cmd_create_eq create_eq;
		struct qhca_cmd_eth_start eth_start;
		uint8_t raw[QHCA_CMD_BODY_SIZE];
	};
};
QHCA_ABI_ASSERT_SIZE(struct qhca_cmd, QHCA_CMD_SIZE);

/* Handle 0 is never valid; CREATE_PD with uctx 0 makes a kernel PD. */
#define QHCA_HANDLE_KERNEL		0

#define QHCA_CQE_PHASE			(1u << 0)

struct qhca_cqe_admin {
	uint16_t cmd_id;
	uint16_t status;	/* enum qhca_cmd_status */
	uint16_t sq_head;	/* admin SQ consumer index after this command */
	uint16_t flags;		/* bit 0: phase */
	uint32_t result0;
	uint32_t result1;
};
QHCA_ABI_ASSERT_SIZE(struct qhca_cqe_admin, 16);

/* ---------------------------------------------------------------- event queues */
enum qhca_event_type {
	QHCA_EVENT_COMP = 1,		/* handle: the completion queue with new entries */
	QHCA_EVENT_PORT_ACTIVE = 2,	/* handle: port number */
	QHCA_EVENT_PORT_DOWN = 3,	/* handle: port number */
	QHCA_EVENT_EQ_OVERFLOW = 4,	/* handle: this EQ; events were lost */
};

#define QHCA_EQE_PHASE			(1u << 0)

/* Valid when (flags & QHCA_EQE_PHASE) equals the consumer's phase, as for admin CQEs. */
struct qhca_eqe {
	uint8_t type;			/* enum qhca_event_type */
	uint8_t flags;
	uint16_t rsvd;
	uint32_t handle;
	uint64_t data;
};
QHCA_ABI_ASSERT_SIZE(struct qhca_eqe, 16);

/* ---------------------------------------------------------------- Ethernet function */
#define QHCA_ETH_MIN_FRAME		14		/* an Ethernet header */
#define QHCA_ETH_MAX_FRAME		(9000 + 18)	/* MTU 9000, header and a VLAN tag */
#define QHCA_ETH_DESC_DONE		(1u << 0)	/* set by the device when it is done */
#define QHCA_ETH_DESC_ERROR		(1u << 1)	/* with DONE: the descriptor was bad */

/*
 * TX: the driver writes addr/len, clears DONE and advances the producer index through
 * QHCA_DB_ETH_TX. RX: the driver posts a buffer (len = its size) the same way through
 * QHCA_DB_ETH_RX; the device writes the frame, sets len to the frame length and DONE.
 */
struct qhca_eth_desc {
	uint64_t addr;
	uint16_t len;
	uint16_t flags;
	uint32_t rsvd;
};
QHCA_ABI_ASSERT_SIZE(struct qhca_eth_desc, 16);

/* ---------------------------------------------------------------- attribute blocks */
#define QHCA_DEV_CAP_RC			(1u << 0)
#define QHCA_DEV_CAP_UC			(1u << 1)
#define QHCA_DEV_CAP_UD			(1u << 2)
#define QHCA_DEV_CAP_SRQ		(1u << 3)
#define QHCA_DEV_CAP_ATOMIC		(1u << 4)

struct qhca_device_attr {
	uint64_t fw_version;		/* major << 32 | minor << 16 | patch */
	uint64_t node_guid;		/* EUI-64 from the MAC address */
	uint64_t max_mr_size;
	uint64_t page_size_cap;
	uint32_t vendor_id;
	uint32_t vendor_part_id;
	uint32_t hw_version;
	uint32_t dev_caps;		/* QHCA_DEV_CAP_* */
	uint32_t max_uctx;
	uint32_t max_pd;
	uint32_t max_qp;
	uint32_t max_qp_wr;
	uint32_t max_send_sge;
	uint32_t max_recv_sge;
	uint32_t max_sge_rd;
	uint32_t max_cq;
	uint32_t max_cqe;
	uint32_t max_mr;
	uint32_t max_srq;
	uint32_t max_srq_wr;
	uint32_t max_srq_sge;
	uint32_t max_ah;
	uint32_t max_qp_rd_atom;
	uint32_t max_qp_init_rd_atom;
	uint32_t max_inline_data;
	uint32_t max_fast_reg_page_list_len;
	uint32_t num_comp_vectors;
	uint16_t max_pkeys;
	uint8_t local_ca_ack_delay;
	uint8_t rsvd0;
	uint8_t rsvd[16];
};
QHCA_ABI_ASSERT_SIZE(struct qhca_device_attr, 144);

/* Values follow the IBA encodings (enum ib_port_state, ib_mtu, ib_port_phys_state). */
struct qhca_port_attr {
	uint8_t state;			/* 1 DOWN, 2 INIT, 3 ARMED, 4 ACTIVE */
	uint8_t phys_state;		/* 3 DISABLED, 5 LINK_UP */
	uint8_t max_mtu;		/* 1: 256 ... 5: 4096 */
	uint8_t active_mtu;
	uint8_t active_width;		/* IB_WIDTH_* */
	uint8_t active_speed;		/* IB_SPEED_* */
	uint8_t mac[6];
	uint32_t gid_tbl_len;
	uint32_t max_msg_sz;
	uint32_t port_cap_flags;
	uint16_t pkey_tbl_len;
	uint16_t rsvd0;
	uint8_t rsvd[36];
};
QHCA_ABI_ASSERT_SIZE(struct qhca_port_attr, 64);

#endif /* QHCA_ABI_H */
