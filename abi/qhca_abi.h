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

/*
 * Packed fields: every field that shares a word with others is named by a contiguous mask
 * (QHCA_*_MASK) and read and written only through these two helpers, the kernel's
 * FIELD_GET/FIELD_PREP (<linux/bitfield.h>) with the same masks. No field has a shift of
 * its own: the shift is the mask's lowest set bit. @mask must be a nonzero constant.
 *   QHCA_FIELD_GET(mask, word)	the field's value, in the mask's type
 *   QHCA_FIELD_PREP(mask, value)	@value placed in the field (bits past it dropped)
 */
#define QHCA_FIELD_SHIFT(mask)		__builtin_ctzll(mask)
#define QHCA_FIELD_GET(mask, word) \
	((__typeof__(mask))(((word) & (mask)) >> QHCA_FIELD_SHIFT(mask)))
#define QHCA_FIELD_PREP(mask, value) \
	((((__typeof__(mask))(value)) << QHCA_FIELD_SHIFT(mask)) & (mask))
/* Two masks that split one word between them, asserted like the sizes. */
#define QHCA_ABI_ASSERT_SPLIT(lo, hi, word) \
	_Static_assert(((lo) & (hi)) == 0 && ((lo) | (hi)) == (word), \
		       "abi: " #lo " and " #hi " do not split " #word)

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
#define QHCA_ABI_VERSION_MINOR		5	/* 1: send CQEs carry their WQE index;
						 * 2: SET_MAC; 3: fast-register regions,
						 * memory windows; 4: XRC; 5: the
						 * InfiniBand link layer (link=ib) */
#define QHCA_VERSION_MAJOR_MASK		0xffff0000u	/* QHCA_REG_VERSION: bits 16-31 */
#define QHCA_VERSION_MINOR_MASK		0x0000ffffu	/* bits 0-15 */
#define QHCA_ABI_VERSION		(QHCA_FIELD_PREP(QHCA_VERSION_MAJOR_MASK,		\
							 QHCA_ABI_VERSION_MAJOR) |		\
					 QHCA_FIELD_PREP(QHCA_VERSION_MINOR_MASK,		\
							 QHCA_ABI_VERSION_MINOR))
QHCA_ABI_ASSERT_SPLIT(QHCA_VERSION_MINOR_MASK, QHCA_VERSION_MAJOR_MASK, 0xffffffffu);

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
#define QHCA_CAP_ROCE_V2		(1u << 1)	/* an Ethernet port speaks RoCE v2 */
#define QHCA_CAP_ROCE_V1		(1u << 2)	/* ... and RoCE v1 (QHCA_AV_ROCE_V1) */
#define QHCA_CAP_IWARP			(1u << 3)	/* an iWARP port (QHCA_CMD_IW_*) */

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
 * user space. A doorbell is one aligned 64-bit store of two fields: the object it names
 * (QHCA_DB_NUM_MASK) and an index (QHCA_DB_INDEX_MASK), as each doorbell below says.
 */
#define QHCA_DB_NUM_MASK		0x00000000ffffffffull	/* qpn, srqn, cqn, eq handle */
#define QHCA_DB_INDEX_MASK		0xffffffff00000000ull	/* producer/consumer index */
QHCA_ABI_ASSERT_SPLIT(QHCA_DB_NUM_MASK, QHCA_DB_INDEX_MASK, ~0ull);
#define QHCA_DB_SQ			0x000
#define QHCA_DB_RQ			0x008
#define QHCA_DB_SRQ			0x010
#define QHCA_DB_CQ_ARM			0x018	/* arm for the next completion */
#define QHCA_DB_CQ_ARM_SE		0x020	/* arm for the next solicited completion */
/* Page 0 only (the kernel driver's): */
#define QHCA_DB_EQ			0x040	/* eq handle (NUM), consumer index (INDEX) */
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
	QHCA_CMD_CREATE_XRCD = 0x14,	/* result0: XRC domain handle (owned by the kernel) */
	QHCA_CMD_DESTROY_XRCD = 0x15,	/* BUSY while XRC SRQs or XRC_TGT QPs use it */
	QHCA_CMD_CREATE_EQ = 0x20,	/* result0: eq handle */
	QHCA_CMD_DESTROY_EQ = 0x21,
	QHCA_CMD_ETH_START = 0x30,	/* start the Ethernet function's rings */
	QHCA_CMD_ETH_STOP = 0x31,
	QHCA_CMD_SET_MAC = 0x32,	/* in: qhca_cmd_set_mac; the port's MAC from now on */
	/* InfiniBand link layer (link=ib); BAD_STATE on a RoCE port. */
	QHCA_CMD_MAD_IFC = 0x33,	/* body qhca_cmd_obj, handle: port, with
					 * QHCA_MAD_IFC_IGNORE_MKEY for the driver's own
					 * queries; in, out: 256-byte MADs; result0: 1 if out
					 * holds the SMA's or PMA's response, 0 if the MAD is
					 * not for them */
	QHCA_CMD_MODIFY_PORT = 0x34,	/* in: qhca_cmd_modify_port */
	QHCA_CMD_SET_NODE_DESC = 0x35,	/* body qhca_cmd_obj: in: 64 bytes of NodeDescription */
	/* Verbs objects: body struct qhca_cmd_obj, arguments in guest memory at in_addr. */
	QHCA_CMD_CREATE_CQ = 0x40,	/* in: qhca_cq_create; result0: cqn */
	QHCA_CMD_DESTROY_CQ = 0x41,	/* handle: cqn */
	QHCA_CMD_CREATE_MR = 0x42,	/* in: qhca_mr_create; result0: lkey = rkey */
	QHCA_CMD_DESTROY_MR = 0x43,	/* handle: lkey */
	QHCA_CMD_CREATE_QP = 0x44,	/* in: qhca_qp_create; result0: qpn */
	QHCA_CMD_MODIFY_QP = 0x45,	/* handle: qpn; in: qhca_qp_attr */
	QHCA_CMD_QUERY_QP = 0x46,	/* handle: qpn; out: qhca_qp_attr */
	QHCA_CMD_DESTROY_QP = 0x47,	/* handle: qpn */
	QHCA_CMD_CREATE_SRQ = 0x48,	/* in: qhca_srq_create; result0: srqn */
	QHCA_CMD_MODIFY_SRQ = 0x49,	/* handle: srqn; in: qhca_srq_modify */
	QHCA_CMD_DESTROY_SRQ = 0x4a,	/* handle: srqn */
	QHCA_CMD_REREG_MR = 0x4b,	/* handle: key of an ordinary region; in: qhca_mr_create:
					 * new translation, PD and access, same key */
	QHCA_CMD_RESIZE_CQ = 0x4c,	/* handle: cqn; in: qhca_cq_resize */
	QHCA_CMD_RESIZE_SRQ = 0x4d,	/* handle: srqn; in: qhca_srq_resize */
	QHCA_CMD_ATTACH_MCAST = 0x4e,	/* handle: qpn (UD); in: qhca_mcast */
	QHCA_CMD_DETACH_MCAST = 0x4f,	/* handle: qpn; in: qhca_mcast */
	QHCA_CMD_QUERY_COUNTERS = 0x50,	/* out: qhca_counters_block */
	QHCA_CMD_QUERY_SRQ = 0x51,	/* handle: srqn; out: qhca_srq_attr (QHCA_DEV_CAP_QUERY_SRQ) */
	/* iWARP ports (link=iwarp; BAD_STATE on another): TCP connections the device terminates,
	 * body qhca_cmd_obj (docs/iwarp.md). */
	QHCA_CMD_IW_LISTEN = 0x60,	/* in: qhca_iw_listen; result0: listener handle */
	QHCA_CMD_IW_UNLISTEN = 0x61,	/* handle: listener; connections it has not handed
					 * out are reset */
	QHCA_CMD_IW_CONNECT = 0x62,	/* handle: qpn (RC, INIT); in: qhca_iw_conn; result0:
					 * connection handle */
	QHCA_CMD_IW_ACCEPT = 0x63,	/* handle: connection; in: qhca_iw_conn (qpn, ird, ord,
					 * private data); the QP goes to RTS on it */
	QHCA_CMD_IW_REJECT = 0x64,	/* handle: connection; in: qhca_iw_conn (private data) */
	QHCA_CMD_IW_QUERY_CONN = 0x65,	/* handle: connection; out: qhca_iw_conn */
	QHCA_CMD_IW_DISCONNECT = 0x66,	/* handle: connection; in: qhca_iw_conn (flags:
					 * QHCA_IW_ABORT for a reset, else FIN); after
					 * its CLOSED event: releases the handle */
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

/* CREATE_UCTX, CREATE_XRCD: no arguments. DESTROY_UCTX, CREATE_PD, DESTROY_PD,
 * DESTROY_XRCD: one handle. */
struct qhca_cmd_handle {
	uint32_t handle;	/* uctx for CREATE_PD and DESTROY_UCTX, pd for DESTROY_PD,
				 * xrcd for DESTROY_XRCD */
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

/*
 * SET_MAC: the port's unicast MAC address for RoCE and the Ethernet function from now on
 * (the netdev's address changed). A reset restores the MAC of the device's property.
 */
struct qhca_cmd_set_mac {
	uint8_t mac[6];
	uint16_t rsvd;
};
QHCA_ABI_ASSERT_SIZE(struct qhca_cmd_set_mac, 8);

/*
 * MODIFY_PORT: PortInfo.CapabilityMask bits (IBA 14.2.5.6) to set and to clear, as
 * ib_modify_port() asks (IsSM while a subnet manager runs on the port). Only the bits of
 * QHCA_PORT_CAP_MODIFIABLE; a reset clears them.
 */
#define QHCA_PORT_CAP_MODIFIABLE	((1u << 1) | (1u << 19) | (1u << 16) | (1u << 10))
struct qhca_cmd_modify_port {
	uint32_t set_cap;
	uint32_t clr_cap;
};
QHCA_ABI_ASSERT_SIZE(struct qhca_cmd_modify_port, 8);

#define QHCA_MAD_SIZE			256
#define QHCA_NODE_DESC_SIZE		64

/* Commands on verbs objects take their arguments from guest memory. in_len and out_len
 * must equal the size of the opcode's structure (0 where it has none). */
struct qhca_cmd_obj {
	uint64_t in_addr;
	uint32_t in_len;
	uint32_t handle;
	uint64_t out_addr;
	uint32_t out_len;
	uint32_t rsvd;
};
QHCA_ABI_ASSERT_SIZE(struct qhca_cmd_obj, 32);

#define QHCA_CMD_SIZE			64

/*
 * MAD_IFC's handle: the port, and this bit for a Get of the driver's own (its GID and
 * P_Key caches), which the SMA answers without the M_Key, as mlx4's MAD_IFC_IGNORE_MKEY;
 * PortInfo's M_Key reads 0 in its answer (an SM may give every port the same key), and
 * a Set still needs the key. SMPs from the fabric go without the bit.
 */
#define QHCA_MAD_IFC_IGNORE_MKEY	(1u << 31)
#define QHCA_CMD_BODY_SIZE		(QHCA_CMD_SIZE - sizeof(struct qhca_cmd_hdr))

struct qhca_cmd {
	struct qhca_cmd_hdr hdr;
	union {
		struct qhca_cmd_query query;
		struct qhca_cmd_handle handle;
		struct qhca_cmd_create_eq create_eq;
		struct qhca_cmd_eth_start eth_start;
		struct qhca_cmd_set_mac set_mac;
		struct qhca_cmd_modify_port modify_port;
		struct qhca_cmd_obj obj;
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
	QHCA_EVENT_QP_FATAL = 5,	/* handle: qpn; the QP went to the error state */
	QHCA_EVENT_QP_REQ_ERR = 6,	/* handle: qpn; invalid request from the peer */
	QHCA_EVENT_QP_ACCESS_ERR = 7,	/* handle: qpn; access violation by the peer */
	QHCA_EVENT_CQ_ERR = 8,		/* handle: cqn; the CQ overflowed */
	QHCA_EVENT_SRQ_LIMIT = 9,	/* handle: srqn; fewer WQEs than the armed limit */
	QHCA_EVENT_SQ_DRAINED = 10,	/* handle: qpn */
	/* InfiniBand ports, when the subnet manager changes what PortInfo says (handle: port) */
	QHCA_EVENT_LID_CHANGE = 11,
	QHCA_EVENT_PKEY_CHANGE = 12,
	QHCA_EVENT_SM_CHANGE = 13,
	QHCA_EVENT_CLIENT_REREG = 14,
	QHCA_EVENT_GID_CHANGE = 15,
	/* iWARP ports: handle the connection (QHCA_CMD_IW_*), data as each says */
	QHCA_EVENT_IW_CONNECT_REQUEST = 16,	/* an MPA request came in; data: the listener */
	QHCA_EVENT_IW_CONNECT_REPLY = 17,	/* the MPA reply (or not); data: QHCA_IW_ST_* */
	QHCA_EVENT_IW_ESTABLISHED = 18,		/* passive side: the peer's first FPDU came */
	QHCA_EVENT_IW_DISCONNECTED = 19,	/* the peer closed (FIN) */
	QHCA_EVENT_IW_CLOSED = 20,		/* TCP is done; data: QHCA_IW_ST_*. The handle
						 * stays (QUERY_CONN works) until the driver
						 * releases it with IW_DISCONNECT */
};

/* How an iWARP connection ended or was answered (the data of its events). */
enum qhca_iw_status {
	QHCA_IW_ST_OK = 0,
	QHCA_IW_ST_REJECTED = 1,	/* the peer's MPA reply had the Reject bit */
	QHCA_IW_ST_REFUSED = 2,		/* a RST to the SYN: nobody listens */
	QHCA_IW_ST_TIMEOUT = 3,		/* TCP gave up (SYN or data not acknowledged) */
	QHCA_IW_ST_RESET = 4,		/* the peer reset the connection */
	QHCA_IW_ST_PROTOCOL = 5,	/* a bad MPA frame, a CRC error, a Terminate */
	QHCA_IW_ST_LOCAL = 6,		/* closed by the driver (DISCONNECT, a destroyed QP) */
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

/* ---------------------------------------------------------------- verbs objects */
/*
 * A page list: the guest pages behind a queue or a memory region, 4 KiB each. With one
 * level, addr points at npages 64-bit page addresses in contiguous memory; with two, at
 * ceil(npages / 512) addresses of pages that each hold 512 page addresses.
 */
#define QHCA_PAGE_SHIFT			12
#define QHCA_PAGE_SIZE			(1u << QHCA_PAGE_SHIFT)
#define QHCA_PBL_PER_PAGE		(QHCA_PAGE_SIZE / 8)
struct qhca_pbl {
	uint64_t addr;
	uint32_t npages;
	uint8_t levels;			/* 1 or 2 */
	uint8_t rsvd[3];
};
QHCA_ABI_ASSERT_SIZE(struct qhca_pbl, 16);

/*
 * Completion queue: 2^log2_entries CQEs of 32 bytes, followed by struct qhca_cq_dbrec
 * in the same pages. The consumer keeps its free-running consumer index in the record;
 * the device reads it to see free slots. A CQE is valid when its phase bit equals
 * !((index >> log2_entries) & 1) for its free-running index.
 */
struct qhca_cq_create {
	struct qhca_pbl pbl;
	uint32_t log2_entries;		/* 1..22 */
	uint32_t eq;			/* event queue for completion events */
	uint32_t uctx;			/* owner: user context handle, 0 for the kernel */
	uint32_t rsvd;
};
QHCA_ABI_ASSERT_SIZE(struct qhca_cq_create, 32);

/*
 * RESIZE_CQ: the CQ moves to a new ring of 2^log2_entries CQEs (and its record after them,
 * which must hold 0). The CQEs the consumer has not polled (from the index in the old
 * record to the producer's) move to the start of the new ring, and both indices start
 * over at 0. BAD_FIELD if they do not fit in 2^log2_entries - 1 entries.
 */
struct qhca_cq_resize {
	struct qhca_pbl pbl;
	uint32_t log2_entries;		/* 1..22 */
	uint32_t rsvd;
};
QHCA_ABI_ASSERT_SIZE(struct qhca_cq_resize, 24);

struct qhca_cq_dbrec {
	uint32_t ci;			/* consumer index, free running */
	uint32_t rsvd[15];
};
QHCA_ABI_ASSERT_SIZE(struct qhca_cq_dbrec, 64);

/* Work completion status: the values of enum ib_wc_status. */
enum qhca_wc_status {
	QHCA_WC_SUCCESS = 0,
	QHCA_WC_LOC_LEN_ERR = 1,
	QHCA_WC_LOC_QP_OP_ERR = 2,
	QHCA_WC_LOC_PROT_ERR = 4,
	QHCA_WC_WR_FLUSH_ERR = 5,
	QHCA_WC_MW_BIND_ERR = 6,
	QHCA_WC_BAD_RESP_ERR = 7,
	QHCA_WC_LOC_ACCESS_ERR = 8,
	QHCA_WC_REM_INV_REQ_ERR = 9,
	QHCA_WC_REM_ACCESS_ERR = 10,
	QHCA_WC_REM_OP_ERR = 11,
	QHCA_WC_RETRY_EXC_ERR = 12,
	QHCA_WC_RNR_RETRY_EXC_ERR = 13,
	QHCA_WC_FATAL_ERR = 19,
	QHCA_WC_GENERAL_ERR = 21,
};

/* Work completion opcode: the values of enum ib_wc_opcode. */
enum qhca_wc_opcode {
	QHCA_WC_SEND = 0,
	QHCA_WC_RDMA_WRITE = 1,
	QHCA_WC_RDMA_READ = 2,
	QHCA_WC_COMP_SWAP = 3,
	QHCA_WC_FETCH_ADD = 4,
	QHCA_WC_BIND_MW = 5,
	QHCA_WC_LOCAL_INV = 6,
	QHCA_WC_ATOMIC_WRITE = 9,
	QHCA_WC_REG_MR = 10,
	QHCA_WC_RECV = 128,
	QHCA_WC_RECV_RDMA_WITH_IMM = 129,
};

#define QHCA_CQE_FLAG_IMM		(1u << 0)	/* imm holds immediate data */
#define QHCA_CQE_FLAG_INV		(1u << 1)	/* imm holds the invalidated rkey */
#define QHCA_CQE_FLAG_GRH		(1u << 2)	/* UD: a 40-byte GRH precedes the data */
#define QHCA_CQE_FLAG_IPV4		(1u << 3)	/* UD: the packet was RoCEv2 over IPv4 */
#define QHCA_CQE_FLAG_XRC		(1u << 4)	/* a receive from an XRC SRQ: the source
							 * QP field holds its XRC SRQ number */
#define QHCA_CQE_FLAG_IB		(1u << 5)	/* UD on an InfiniBand port: ib holds
							 * what the LRH said, not smac */
#define QHCA_CQE_FLAG_ROCE_V1		(1u << 6)	/* UD: the packet was RoCE v1, the GRH
							 * area holds its GRH */

/*
 * The service level a UD receive over RoCE reports, as ConnectX does (its PRM; RoCE annex
 * A17.4.5.1 wants the CQE to say whether the frame was IPv4, IPv6 or RoCE v1): bit 3 the
 * frame had a UDP header (RoCE v2), bits 0-2 the network header, 1 IPv6, 2 IPv4 (0 and no
 * bit 3: RoCE v1, a GRH). UCX 1.11 to 1.17 read the GRH area of a UD receive by it
 * (docs/compatibility.md).
 */
#define QHCA_WC_SL_ROCE_V2		0x8
#define QHCA_WC_SL_IPV6			0x1
#define QHCA_WC_SL_IPV4			0x2
#define QHCA_WC_SL_OF_FLAGS(f)		((f) & QHCA_CQE_FLAG_ROCE_V1 ? 0 :			\
					 (f) & QHCA_CQE_FLAG_GRH ? QHCA_WC_SL_ROCE_V2 |		\
					 ((f) & QHCA_CQE_FLAG_IPV4 ? QHCA_WC_SL_IPV4 :		\
					  QHCA_WC_SL_IPV6) : 0)
#define QHCA_CQE_OWNER_PHASE		(1u << 0)
/*
 * Never written by the device (no enum qhca_wc_opcode has it): the driver and the provider
 * put it in the opcode of CQEs they drop (of a QP reset or destroyed); polling skips them.
 */
#define QHCA_CQE_OPCODE_STALE		0xff

#define QHCA_CQE_QPN_MASK		0x00ffffffu	/* qpn_status: bits 0-23 */
#define QHCA_CQE_STATUS_MASK		0xff000000u	/* qpn_status: bits 24-31 */
#define QHCA_CQE_SRC_QP_MASK		0x00ffffffu	/* src_qp_flags: bits 0-23 */
#define QHCA_CQE_WQE_INDEX_MASK		0x00ffffffu	/* the same bits in send completions */
#define QHCA_CQE_FLAGS_MASK		0xff000000u	/* src_qp_flags: bits 24-31 */
QHCA_ABI_ASSERT_SPLIT(QHCA_CQE_QPN_MASK, QHCA_CQE_STATUS_MASK, 0xffffffffu);
QHCA_ABI_ASSERT_SPLIT(QHCA_CQE_SRC_QP_MASK, QHCA_CQE_FLAGS_MASK, 0xffffffffu);

struct qhca_cqe {
	uint64_t wr_id;
	uint32_t byte_len;
	uint32_t imm;			/* immediate data (as on the wire) or invalidated rkey */
	uint32_t qpn_status;		/* qpn, enum qhca_wc_status */
	uint32_t src_qp_flags;		/* source QP (UD receives) or, in send completions,
					 * the WQE's SQ index (free running, mod 2^24); and
					 * QHCA_CQE_FLAG_* */
	union {
		uint8_t smac[6];	/* UD over RoCE */
		struct {		/* UD on an InfiniBand port (QHCA_CQE_FLAG_IB) */
			uint16_t slid;
			uint8_t sl;
			uint8_t dlid_path_bits;
			uint16_t rsvd;
		} ib;
	};
	uint8_t opcode;			/* enum qhca_wc_opcode */
	uint8_t owner;			/* bit 0: phase, written last */
};
QHCA_ABI_ASSERT_SIZE(struct qhca_cqe, 32);

/*
 * Doorbells of a user context's page (or page 0 for the kernel's objects), one 64-bit
 * store each of QHCA_DB_NUM_MASK and QHCA_DB_INDEX_MASK: SQ, RQ: qpn, producer index (free
 * running); SRQ: srqn, producer index; CQ_ARM, CQ_ARM_SE: cqn, the consumer's index
 * (the next completion written fires the event; those already in the CQ do not).
 */

/* Access rights: the values of enum ib_access_flags. */
#define QHCA_ACCESS_LOCAL_WRITE		(1u << 0)
#define QHCA_ACCESS_REMOTE_WRITE	(1u << 1)
#define QHCA_ACCESS_REMOTE_READ		(1u << 2)
#define QHCA_ACCESS_REMOTE_ATOMIC	(1u << 3)
#define QHCA_ACCESS_ALL			0xfu
#define QHCA_ACCESS_MW_BIND		(1u << 4)	/* regions: windows may be bound to it */
#define QHCA_ACCESS_MR_ALL		(QHCA_ACCESS_ALL | QHCA_ACCESS_MW_BIND)

#define QHCA_MR_PHYS			(1u << 0)	/* iova is the guest physical address */
#define QHCA_MR_FAST_REG		(1u << 1)	/* registered by REG_MR WQEs (below) */
#define QHCA_MR_MW_TYPE1		(1u << 2)	/* a memory window of type 1 (BIND_MW) */
#define QHCA_MR_MW_TYPE2		(1u << 3)	/* a memory window of type 2B */

/*
 * Memory region: [iova, iova + length) maps to the pages of @pbl, the first byte at
 * page_offset in the first page. A PHYS region (kernel PDs only) has no page list.
 * A FAST_REG region (kernel PDs only) is created free, with room for pbl.npages pages
 * (at most max_fast_reg_page_list_len) and access, iova, length, page_offset, pbl.addr
 * and pbl.levels all 0; REG_MR WQEs make it valid, LOCAL_INV and SEND_WITH_INV free it.
 * lkey = rkey: the region's index + 1 (QHCA_MR_KEY_INDEX_MASK) and a per-index tag byte
 * (QHCA_MR_KEY_TAG_MASK: the key's variant byte, as in IB keys).
 */
#define QHCA_MR_KEY_INDEX_MASK		0xffffff00u	/* index + 1; 0 is never a key */
#define QHCA_MR_KEY_TAG_MASK		0x000000ffu
QHCA_ABI_ASSERT_SPLIT(QHCA_MR_KEY_TAG_MASK, QHCA_MR_KEY_INDEX_MASK, 0xffffffffu);
struct qhca_mr_create {
	uint32_t pd;
	uint32_t access;		/* QHCA_ACCESS_* */
	uint64_t iova;
	uint64_t length;
	uint32_t page_offset;		/* < QHCA_PAGE_SIZE */
	uint32_t flags;			/* QHCA_MR_* */
	struct qhca_pbl pbl;
};
QHCA_ABI_ASSERT_SIZE(struct qhca_mr_create, 48);

/* QP types: the values of enum ib_qp_type. */
enum qhca_qp_type {
	QHCA_QPT_SMI = 0,		/* QP0 of an InfiniBand port: subnet management, VL15 */
	QHCA_QPT_GSI = 1,
	QHCA_QPT_RC = 2,
	QHCA_QPT_UC = 3,
	QHCA_QPT_UD = 4,
	QHCA_QPT_XRC_INI = 9,		/* XRC send side: an RC requester, no receive queue */
	QHCA_QPT_XRC_TGT = 10,		/* XRC receive side: no queues of its own */
};

/*
 * XRC (IBA 1.2 annex A14): an XRC_INI QP sends to an XRC_TGT QP, each request naming an XRC
 * SRQ of the target's XRC domain (XRCETH); the SRQ gives the receive WQE, the completion
 * queue and, for RDMA and atomics, the protection domain. The XRC SRQ number is the SRQ
 * handle's low 24 bits.
 */
#define QHCA_XRC_SRQN_MASK		0x00ffffffu

/* QP states: the values of enum ib_qp_state. */
enum qhca_qp_state {
	QHCA_QPS_RESET = 0,
	QHCA_QPS_INIT = 1,
	QHCA_QPS_RTR = 2,
	QHCA_QPS_RTS = 3,
	QHCA_QPS_SQD = 4,
	QHCA_QPS_SQE = 5,
	QHCA_QPS_ERR = 6,
};

/*
 * Queue pair: a send queue of 2^sq_log2 WQEs of 2^sq_stride_log2 bytes and a receive
 * queue (absent with an SRQ) likewise, each in its own pages. XRC_INI: no receive queue
 * (recv_cq, srq, rq_* 0). XRC_TGT: only xrcd and the kernel as owner (uctx 0; it outlives
 * the process that made it), every other field 0. xrcd is 0 for every other type.
 */
struct qhca_qp_create {
	uint32_t pd;
	uint32_t send_cq;
	uint32_t recv_cq;
	uint32_t srq;			/* 0: none */
	uint32_t uctx;
	uint8_t type;			/* enum qhca_qp_type */
	uint8_t sq_sig_all;
	uint8_t sq_log2;		/* 0..15 */
	uint8_t rq_log2;
	uint8_t sq_stride_log2;		/* 6..12 */
	uint8_t rq_stride_log2;		/* 4..12 */
	uint16_t max_inline;
	uint32_t xrcd;			/* XRC_TGT: its XRC domain */
	struct qhca_pbl sq_pbl;
	struct qhca_pbl rq_pbl;
};
QHCA_ABI_ASSERT_SIZE(struct qhca_qp_create, 64);

/*
 * Address vector: where a QP's (or a UD WQE's) packets go. RoCE uses the GIDs, dmac, the
 * IP (v2) or GRH (v1) fields and ib_flags' QHCA_AV_ROCE_V1; an InfiniBand port uses dlid, sl
 * and the path bits of ib_flags, and the GIDs and IP fields (as GRH fields) only with
 * QHCA_AV_GRH.
 */
#define QHCA_AV_GRH			0x80u	/* ib_flags: the packets carry a GRH */
/* ib_flags on an Ethernet port: RoCE v1, the GRH right after the Ethernet header
 * (Ethertype 0x8915), for a source GID of type RoCE v1; without it RoCEv2 (UDP/IP). */
#define QHCA_AV_ROCE_V1			QHCA_AV_GRH
#define QHCA_AV_PATH_BITS_MASK		0x7fu	/* ib_flags: source path bits (LMC) */
struct qhca_av {
	uint8_t dgid[16];
	uint8_t sgid[16];		/* the source GID, IPv4-mapped for RoCEv2 over IPv4 */
	uint8_t dmac[6];
	uint8_t hop_limit;
	uint8_t tclass;
	uint32_t flow_label;
	uint16_t dlid;			/* InfiniBand */
	uint8_t sl;
	uint8_t ib_flags;		/* QHCA_AV_* */
};
QHCA_ABI_ASSERT_SIZE(struct qhca_av, 48);

/* MODIFY_QP attribute mask: the values of enum ib_qp_attr_mask. */
#define QHCA_QP_STATE			(1u << 0)
#define QHCA_QP_CUR_STATE		(1u << 1)
#define QHCA_QP_EN_SQD_ASYNC_NOTIFY	(1u << 2)
#define QHCA_QP_ACCESS_FLAGS		(1u << 3)
#define QHCA_QP_PKEY_INDEX		(1u << 4)
#define QHCA_QP_PORT			(1u << 5)
#define QHCA_QP_QKEY			(1u << 6)
#define QHCA_QP_AV			(1u << 7)
#define QHCA_QP_PATH_MTU		(1u << 8)
#define QHCA_QP_TIMEOUT			(1u << 9)
#define QHCA_QP_RETRY_CNT		(1u << 10)
#define QHCA_QP_RNR_RETRY		(1u << 11)
#define QHCA_QP_RQ_PSN			(1u << 12)
#define QHCA_QP_MAX_QP_RD_ATOMIC	(1u << 13)
#define QHCA_QP_ALT_PATH		(1u << 14)
#define QHCA_QP_MIN_RNR_TIMER		(1u << 15)
#define QHCA_QP_SQ_PSN			(1u << 16)
#define QHCA_QP_MAX_DEST_RD_ATOMIC	(1u << 17)
#define QHCA_QP_PATH_MIG_STATE		(1u << 18)
#define QHCA_QP_CAP			(1u << 19)
#define QHCA_QP_DEST_QPN		(1u << 20)

struct qhca_qp_attr {
	uint32_t mask;			/* QHCA_QP_* (MODIFY_QP) */
	uint8_t state;			/* enum qhca_qp_state */
	uint8_t cur_state;
	uint8_t path_mtu;		/* IB_MTU_256 = 1 ... IB_MTU_4096 = 5 */
	uint8_t timeout;		/* 4.096 us * 2^timeout, 0: infinite */
	uint8_t retry_cnt;		/* 0..7 */
	uint8_t rnr_retry;		/* 0..7, 7: infinite */
	uint8_t min_rnr_timer;		/* IBA table 45 encoding */
	uint8_t max_rd_atomic;
	uint8_t max_dest_rd_atomic;
	uint8_t sq_draining;		/* QUERY_QP */
	uint16_t pkey_index;
	uint32_t qkey;
	uint32_t rq_psn;
	uint32_t sq_psn;
	uint32_t dest_qpn;
	uint32_t access_flags;		/* QHCA_ACCESS_REMOTE_* */
	uint32_t rsvd;
	struct qhca_av av;
};
QHCA_ABI_ASSERT_SIZE(struct qhca_qp_attr, 88);

/* Send WQE opcodes: the values of enum ib_wr_opcode. */
enum qhca_wr_opcode {
	QHCA_WR_RDMA_WRITE = 0,
	QHCA_WR_RDMA_WRITE_WITH_IMM = 1,
	QHCA_WR_SEND = 2,
	QHCA_WR_SEND_WITH_IMM = 3,
	QHCA_WR_RDMA_READ = 4,
	QHCA_WR_ATOMIC_CMP_AND_SWP = 5,
	QHCA_WR_ATOMIC_FETCH_AND_ADD = 6,
	QHCA_WR_LOCAL_INV = 7,		/* imm_inv: the key to invalidate */
	QHCA_WR_BIND_MW = 8,		/* a struct qhca_bind_mw_seg follows the header */
	QHCA_WR_ATOMIC_WRITE = 15,	/* RC: the 8 bytes in compare_add, as they are in memory,
					 * to remote_addr (8-byte aligned); no SGE */
	QHCA_WR_SEND_WITH_INV = 9,
	QHCA_WR_REG_MR = 0x20,		/* a struct qhca_reg_mr_seg follows the header */
};

#define QHCA_WQE_SIGNALED		(1u << 0)
#define QHCA_WQE_SOLICITED		(1u << 1)
#define QHCA_WQE_FENCE			(1u << 2)
#define QHCA_WQE_INLINE			(1u << 3)
/* An RDMA_READ of one SGE that invalidates the key of that SGE, its sink, locally once it
 * completes: the verbs' RDMA_READ_WITH_INV, which the kernel's rdma_rw posts on iWARP (RFC
 * 5040's Read with Local Invalidate). As in siw, the sink's key is the one invalidated:
 * rdma_rw gives the region a new key after it set ex.invalidate_rkey, so that one is stale.
 * The READ's completion says RDMA_READ. */
#define QHCA_WQE_READ_INV		(1u << 4)

struct qhca_sge {
	uint64_t addr;
	uint32_t length;
	uint32_t lkey;
};
QHCA_ABI_ASSERT_SIZE(struct qhca_sge, 16);

/*
 * Send WQE: this 64-byte header; for UD QPs a struct qhca_av-carrying segment of 64
 * bytes follows; then num_sge SGEs, or inline_len bytes of inline data.
 */
struct qhca_sq_wqe {
	uint64_t wr_id;
	uint8_t opcode;			/* enum qhca_wr_opcode */
	uint8_t flags;			/* QHCA_WQE_* */
	uint8_t num_sge;
	uint8_t rsvd0;
	uint32_t imm_inv;		/* immediate data (as on the wire) or rkey to invalidate */
	uint32_t inline_len;
	uint32_t xrc_srqn;		/* XRC_INI: the XRC SRQ number at the target (24 bits) */
	uint64_t remote_addr;		/* RDMA and atomics */
	uint32_t rkey;
	uint32_t rsvd2;
	uint64_t compare_add;		/* atomics */
	uint64_t swap;
	uint64_t rsvd3;
};
QHCA_ABI_ASSERT_SIZE(struct qhca_sq_wqe, 64);

struct qhca_ud_seg {
	struct qhca_av av;
	uint32_t dqpn;
	uint32_t qkey;
	uint64_t rsvd;
};
QHCA_ABI_ASSERT_SIZE(struct qhca_ud_seg, 64);

/*
 * REG_MR (RC and UC QPs): executed in send queue order, it makes the free FAST_REG region
 * of @key's index valid under @key (its low byte is the consumer's variant, checked on
 * every use): [iova, iova + length) maps to the npages pages of 2^page_shift bytes whose
 * addresses (each a multiple of the page size) are at pbl_addr, the first byte at
 * page_offset in the first page. Registering over a valid key fails the WQE.
 */
#define QHCA_FAST_REG_MIN_SHIFT		12
#define QHCA_FAST_REG_MAX_SHIFT		31
#define QHCA_FAST_REG_PAGE_SIZES	0xfffff000ull	/* page_size_cap: 4 KiB to 2 GiB */
struct qhca_reg_mr_seg {
	uint64_t iova;
	uint64_t length;
	uint64_t pbl_addr;		/* npages 64-bit addresses, 8-byte aligned */
	uint32_t key;
	uint32_t access;		/* QHCA_ACCESS_* */
	uint32_t npages;
	uint32_t page_offset;		/* < 2^page_shift */
	uint8_t page_shift;		/* QHCA_FAST_REG_MIN_SHIFT to QHCA_FAST_REG_MAX_SHIFT */
	uint8_t rsvd0[7];
	uint64_t rsvd1[2];
};
QHCA_ABI_ASSERT_SIZE(struct qhca_reg_mr_seg, 64);

/*
 * BIND_MW (RC and UC QPs): binds the window of @mw_key's index, under @mw_key (a new variant),
 * to [addr, addr + length) of the region @mr_lkey (which has MW_BIND access) with the
 * remote rights in @access (LOCAL_WRITE is ignored; remote write or atomic needs a region
 * with local write). Length 0 unbinds. A type 2 window must be free and is then reachable
 * only through the QP that bound it; a type 1 window may be bound again at any time.
 */
struct qhca_bind_mw_seg {
	uint64_t addr;
	uint64_t length;
	uint32_t mw_key;
	uint32_t mr_lkey;
	uint32_t access;		/* QHCA_ACCESS_* */
	uint32_t rsvd0;
	uint64_t rsvd1[4];
};
QHCA_ABI_ASSERT_SIZE(struct qhca_bind_mw_seg, 64);

/* Receive WQE: this header and num_sge SGEs. */
struct qhca_rq_wqe {
	uint64_t wr_id;
	uint32_t num_sge;
	uint32_t rsvd;
};
QHCA_ABI_ASSERT_SIZE(struct qhca_rq_wqe, 16);

/*
 * Shared receive queue: 2^log2 WQEs of 2^stride_log2 bytes, like an RQ. An XRC SRQ (xrcd
 * not 0) belongs to an XRC domain and has its own completion queue @cq (of the same owner);
 * an ordinary one has xrcd and cq 0. The device also takes the 32-byte form of ABI minor
 * 3 and before (QHCA_SRQ_CREATE_V3_SIZE): an ordinary SRQ.
 */
struct qhca_srq_create {
	uint32_t pd;
	uint32_t uctx;
	uint8_t log2;
	uint8_t stride_log2;
	uint16_t rsvd0;
	uint32_t limit;			/* 0: not armed */
	struct qhca_pbl pbl;
	uint32_t xrcd;
	uint32_t cq;
	uint64_t rsvd1;
};
QHCA_ABI_ASSERT_SIZE(struct qhca_srq_create, 48);
#define QHCA_SRQ_CREATE_V3_SIZE		32

/* ATTACH_MCAST, DETACH_MCAST: a UD QP joins or leaves the multicast group @gid (MLID
 * @mlid on an InfiniBand port; RoCE finds groups by the GID alone). */
#define QHCA_MCAST_GROUPS		1024	/* groups per device */
#define QHCA_MCAST_QPS			64	/* QPs per group */
struct qhca_mcast {
	uint8_t gid[16];
	uint16_t mlid;
	uint16_t rsvd0;
	uint32_t rsvd1;
};
QHCA_ABI_ASSERT_SIZE(struct qhca_mcast, 24);

/*
 * iWARP connections (QHCA_CMD_IW_*). Addresses are IPv6 or IPv4-mapped (::ffff:a.b.c.d),
 * ports in host order; all-zero as a listener's address: every address of the port. The
 * device sends MPA revision 2 with CRC and without markers, RFC 6581's IRD/ORD and
 * peer-to-peer mode; it answers revision 1 and 2 requests, never markers.
 */
#define QHCA_IW_PD_MAX			512	/* MPA private data (RFC 5044 7.1) */
#define QHCA_IW_MAX_RD			16	/* IRD and ORD at most */
#define QHCA_IW_MAX_BACKLOG		1024
#define QHCA_IW_ABORT			(1u << 0)	/* DISCONNECT: a RST, not a FIN */
#define QHCA_IW_P2P			(1u << 1)	/* peer-to-peer: the active side sends
							 * first, a zero-length RDMA WRITE
							 * (CONNECT; out: the peer asked) */
/*
 * A listener's address, as a TCP socket's: one address (IPv4 as ::ffff:a.b.c.d), every IPv4
 * address (::ffff:0.0.0.0), or every address (::), IPv6 ones only with QHCA_IW_V6ONLY (an
 * AF_INET6 socket's IPV6_V6ONLY; rdma_cm's afonly; on one IPv6 address it changes nothing,
 * on an IPv4 one it is refused). Two listeners on one port may not cover
 * a common address.
 */
#define QHCA_IW_V6ONLY		(1u << 0)

struct qhca_iw_listen {
	uint8_t addr[16];
	uint16_t port;
	uint16_t backlog;		/* connections not yet accepted, 1..1024 */
	uint32_t flags;			/* QHCA_IW_V6ONLY */
};
QHCA_ABI_ASSERT_SIZE(struct qhca_iw_listen, 24);

struct qhca_iw_conn {
	uint8_t local_addr[16];
	uint8_t remote_addr[16];
	uint16_t local_port;
	uint16_t remote_port;
	uint32_t qpn;			/* CONNECT: the handle's; ACCEPT: the QP to bind */
	uint32_t listener;		/* QUERY_CONN of a passive one: its listener */
	uint16_t ird;			/* READs the QP answers at once (RFC 6581) */
	uint16_t ord;			/* READs it sends at once */
	uint8_t dmac[6];		/* CONNECT: the next hop's MAC (the driver resolves it);
					 * QUERY_CONN: the peer's */
	uint16_t pd_len;		/* 0..QHCA_IW_PD_MAX */
	uint8_t flags;			/* QHCA_IW_* */
	uint8_t mpa_rev;		/* QUERY_CONN: the peer's MPA revision */
	uint8_t rsvd[22];
	uint8_t private_data[QHCA_IW_PD_MAX];
};
QHCA_ABI_ASSERT_SIZE(struct qhca_iw_conn, 592);

struct qhca_srq_modify {
	uint32_t limit;			/* arm: event when fewer WQEs remain */
	uint32_t rsvd;
};
QHCA_ABI_ASSERT_SIZE(struct qhca_srq_modify, 8);

/*
 * QUERY_SRQ: the SRQ as the device has it. limit is the armed limit, 0 once the limit event
 * fired (IBA 10.2.9.3: ibv_query_srq reads it back, as rdma-core's tests do).
 */
struct qhca_srq_attr {
	uint32_t limit;
	uint8_t log2;			/* 2^log2 WQEs */
	uint8_t stride_log2;
	uint8_t rsvd[2];
	uint32_t pi;			/* the producer index the last doorbell gave */
	uint32_t ci;			/* WQEs taken */
};
QHCA_ABI_ASSERT_SIZE(struct qhca_srq_attr, 16);

/*
 * RESIZE_SRQ: the SRQ moves to a new ring of 2^log2 WQEs of the same stride. The WQEs
 * posted and not yet taken keep their free-running indices (each at index mod the new
 * size); BAD_FIELD if they do not fit. A limit beyond the new size is disarmed.
 */
struct qhca_srq_resize {
	uint8_t log2;
	uint8_t stride_log2;		/* the SRQ's */
	uint16_t rsvd0;
	uint32_t rsvd1;
	struct qhca_pbl pbl;
};
QHCA_ABI_ASSERT_SIZE(struct qhca_srq_resize, 24);

/* ---------------------------------------------------------------- counters */
/* Port counters in the order of struct qhca_counters_block (QUERY_COUNTERS). */
enum qhca_counter {
	QHCA_CNT_TX_PKTS,		/* RoCEv2 packets sent */
	QHCA_CNT_TX_BYTES,
	QHCA_CNT_RX_PKTS,		/* RoCEv2 packets received and accepted by the parser */
	QHCA_CNT_RX_BYTES,
	QHCA_CNT_RETRANSMITS,		/* packets sent again */
	QHCA_CNT_TIMEOUTS,		/* retransmission timer expirations */
	QHCA_CNT_NAKS_SENT,
	QHCA_CNT_NAKS_RECEIVED,
	QHCA_CNT_RNR_NAKS_SENT,
	QHCA_CNT_RNR_NAKS_RECEIVED,
	QHCA_CNT_DUPLICATES,		/* duplicate requests or stale responses */
	QHCA_CNT_OUT_OF_SEQUENCE,
	QHCA_CNT_DROP_BAD_LENGTH,	/* drops by the parser, by reason */
	QHCA_CNT_DROP_BAD_IP,
	QHCA_CNT_DROP_BAD_OPCODE,
	QHCA_CNT_DROP_BAD_ICRC,
	QHCA_CNT_DROP_NO_QP,
	QHCA_CNT_DROP_BAD_STATE,	/* QP state, type or peer did not match */
	QHCA_CNT_DROP_BAD_PKEY,
	QHCA_CNT_DROP_BAD_QKEY,
	QHCA_CNT_LOOPBACK_PKTS,
	QHCA_CNT_CQ_OVERFLOWS,
	QHCA_CNT_ETH_TX_FRAMES,
	QHCA_CNT_ETH_RX_FRAMES,
	QHCA_CNT_ETH_RX_DROPS,		/* no buffer, too long, or stopped */
	QHCA_CNT_DROP_NO_WQE,		/* UD datagrams without a posted receive */
	QHCA_CNT_REMOTE_ACCESS_ERRORS,	/* requests refused for key, PD, range or rights */
	QHCA_CNT_DROP_BUSY,		/* requests dropped while READ responses waited */
	QHCA_CNT_DROP_BAD_VCRC,		/* InfiniBand: a bad VCRC (link corruption) */
	QHCA_CNT_DROP_BAD_LID,		/* InfiniBand: not our LID, or a VL or port state that
					 * does not allow the packet */
	QHCA_CNT_SMPS,			/* InfiniBand: MADs the SMA and PMA answered */
	QHCA_CNT_MAX
};

struct qhca_counters_block {
	uint64_t value[32];		/* indexed by enum qhca_counter; the rest 0 */
};
QHCA_ABI_ASSERT_SIZE(struct qhca_counters_block, 256);

/* ---------------------------------------------------------------- attribute blocks */
#define QHCA_DEV_CAP_RC			(1u << 0)
#define QHCA_DEV_CAP_UC			(1u << 1)
#define QHCA_DEV_CAP_UD			(1u << 2)
#define QHCA_DEV_CAP_SRQ		(1u << 3)
#define QHCA_DEV_CAP_ATOMIC		(1u << 4)
#define QHCA_DEV_CAP_FAST_REG		(1u << 5)	/* FAST_REG regions, REG_MR, LOCAL_INV */
#define QHCA_DEV_CAP_MW			(1u << 6)	/* memory windows of type 1 and 2B */
#define QHCA_DEV_CAP_ATOMIC_WRITE	(1u << 7)	/* ATOMIC_WRITE (IBA 1.5) */
#define QHCA_DEV_CAP_XRC		(1u << 8)	/* XRC domains, SRQs and QPs */
#define QHCA_DEV_CAP_MCAST		(1u << 9)	/* ATTACH_MCAST, DETACH_MCAST */
#define QHCA_DEV_CAP_QUERY_SRQ		(1u << 10)	/* QUERY_SRQ */

#define QHCA_FW_VERSION_MAJOR_MASK	0x0000ffff00000000ull	/* fw_version: bits 32-47 */
#define QHCA_FW_VERSION_MINOR_MASK	0x00000000ffff0000ull	/* bits 16-31 */
#define QHCA_FW_VERSION_PATCH_MASK	0x000000000000ffffull	/* bits 0-15 */

struct qhca_device_attr {
	uint64_t fw_version;		/* QHCA_FW_VERSION_*_MASK; bits 48-63 are 0 */
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
#define QHCA_LINK_ROCE			0	/* link_layer: Ethernet, RoCEv2 */
#define QHCA_LINK_IB			1	/* InfiniBand: LIDs and a subnet manager */
#define QHCA_LINK_IWARP			2	/* Ethernet, iWARP: RDMAP/DDP/MPA over TCP */
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
	/* InfiniBand (link_layer QHCA_LINK_IB): what the subnet manager set in PortInfo */
	uint8_t link_layer;		/* QHCA_LINK_* */
	uint8_t lmc;
	uint8_t sm_sl;
	uint8_t subnet_timeout;
	uint16_t lid;
	uint16_t sm_lid;
	uint8_t init_type_reply;
	uint8_t max_vl_num;
	uint16_t rsvd1;
	uint64_t gid_prefix;		/* with the port GUID, GID index 0 */
	uint64_t port_guid;
	uint8_t rsvd[8];
};
QHCA_ABI_ASSERT_SIZE(struct qhca_port_attr, 64);

#endif /* QHCA_ABI_H */
