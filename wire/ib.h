/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The InfiniBand link layer (IBA Vol 1 ch. 7) and subnet management formats (ch. 13-14),
 * shared by the device's engine (its port in link=ib mode, its SMA and PMA) and by the
 * fabric switch (forwarding by DLID, its own SMA on port 0):
 *
 *   LRH (7.7) + [GRH (8.3)] + BTH and extended headers (roce.h) + payload + pad
 *   + ICRC (7.8.1) + VCRC (7.8.2)
 *
 * one packet per frame of the carrier (a QEMU netdev or a fabric socket: docs/infiniband.md).
 * Like roce.h, all byte swapping of header fields happens here and nowhere else.
 */
#ifndef QHCA_IB_H
#define QHCA_IB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "roce.h"

#define IB_LRH_LEN		8
#define IB_GRH_LEN		ROCE_GRH_LEN
#define IB_VCRC_LEN		2
/* LNH: what follows the LRH (7.7.7) */
#define IB_LNH_RAW		0
#define IB_LNH_IP		1
#define IB_LNH_LOCAL		2	/* BTH */
#define IB_LNH_GLOBAL		3	/* GRH, then BTH */

#define IB_LID_PERMISSIVE	0xffff
#define IB_LID_MCAST_MIN	0xc000	/* multicast LIDs: 0xc000-0xfffe */
#define IB_LID_UNICAST_MAX	0xbfff
#define IB_VL_SMP		15	/* subnet management packets, and only they */
#define IB_MAX_LMC		7

/* Largest header stack: LRH + GRH + BTH + XRCETH + RETH + ImmDt, or + AtomicETH. */
#define IB_MAX_HDR		(IB_LRH_LEN + IB_GRH_LEN + ROCE_BTH_LEN + 4 + 28 + 8)
/* A whole packet at most: headers, 4096 bytes of payload, pad, ICRC and VCRC. */
#define IB_MAX_PKT		(IB_MAX_HDR + 4096 + 3 + ROCE_ICRC_LEN + IB_VCRC_LEN)

static inline bool ib_lid_mcast(uint16_t lid)
{
	return lid >= IB_LID_MCAST_MIN && lid != IB_LID_PERMISSIVE;
}

/* An LRH as ib_lrh_read() finds it. */
struct ib_lrh {
	uint8_t vl, lver, sl, lnh;
	uint16_t dlid, slid;
	uint32_t len;		/* bytes of the packet: PktLen words and the VCRC */
};

/*
 * The LRH at the start of @f (@len bytes of carrier frame: a carrier may pad short frames,
 * so bytes after the packet are ignored). False if there is no whole packet of the length
 * PktLen gives, or the LRH is malformed (LVer not 0).
 */
bool ib_lrh_read(const uint8_t *f, size_t len, struct ib_lrh *l);

/* Bytes needed to build @p (p->ib): LRH, GRH if p->grh, transport, ICRC and VCRC. */
size_t ib_pkt_len(const struct roce_pkt *p);
/* Where the payload of a packet of @opcode starts (for gathering it in place). */
size_t ib_payload_offset(bool grh, uint8_t opcode);
/* Build @p into @buf; returns the packet length, or 0 if it cannot be built. */
size_t ib_build(const struct roce_pkt *p, uint8_t *buf, size_t cap);
/* Parse and check a packet (VCRC, lengths, LNH, opcode, ICRC); @p->payload points into @f.
 * Raw and IP packets (LNH 0, 1) are ROCE_NOT_ROCE. */
enum roce_parse_result ib_parse(const uint8_t *f, size_t len, struct roce_pkt *p);

/*
 * The VCRC (7.8.2): CRC-16 with polynomial 0x100B over every byte from the LRH through the
 * ICRC. ib_vcrc_ok() checks the one at the end of the @len-byte packet; ib_crc_update()
 * sets ICRC and VCRC of a packet in place (tests, fuzzers, a switch that rewrote a field).
 */
uint16_t ib_vcrc(const uint8_t *buf, size_t len);
uint16_t ib_vcrc_bytewise(const uint8_t *buf, size_t len);
bool ib_vcrc_ok(const uint8_t *pkt, size_t len);
void ib_vcrc_update(uint8_t *pkt, size_t len);
bool ib_crc_update(uint8_t *pkt, size_t len);

/* The BTH of the packet whose LRH is @l (NULL if it has none, or is too short for one and
 * its ICRC and VCRC); nothing after the LRH is checked. */
const uint8_t *ib_bth_find(const uint8_t *pkt, const struct ib_lrh *l);
/* BTH fields a switch and a capture look at: destination QP and opcode (false if the
 * packet has no BTH). */
bool ib_bth_peek(const uint8_t *pkt, const struct ib_lrh *l, uint8_t *opcode, uint32_t *dqpn);

/* ---------------------------------------------------------------- MADs (ch. 13, 14, 16) */
#define IB_MAD_LEN		256
#define IB_MAD_HDR_LEN		24
#define IB_QP1_QKEY		0x80010000u

/* Management classes */
#define IB_MCLASS_SMP_LID	0x01
#define IB_MCLASS_SMP_DR	0x81
#define IB_MCLASS_SA		0x03
#define IB_MCLASS_PERF		0x04

/* Methods */
#define IB_METHOD_GET		0x01
#define IB_METHOD_SET		0x02
#define IB_METHOD_SEND		0x03
#define IB_METHOD_TRAP		0x05
#define IB_METHOD_REPORT	0x06
#define IB_METHOD_TRAP_REPRESS	0x07
#define IB_METHOD_RESP		0x80	/* response bit: GetResp is 0x81 */
#define IB_METHOD_GET_RESP	0x81

/* MAD status (13.4.7): the class-independent "invalid field" codes */
#define IB_MAD_ST_BAD_VERSION	0x0004
#define IB_MAD_ST_BAD_METHOD	0x0008
#define IB_MAD_ST_BAD_ATTR	0x000c	/* method/attribute combination not supported */
#define IB_MAD_ST_BAD_VALUE	0x001c	/* invalid value in the attribute or modifier */
#define IB_SMP_DIRECTION	0x8000	/* DR SMPs: the D bit in the status word */

/* Offsets in a MAD */
#define IB_MAD_BASE_VERSION	0
#define IB_MAD_CLASS		1
#define IB_MAD_CLASS_VERSION	2
#define IB_MAD_METHOD		3
#define IB_MAD_STATUS		4	/* 16 bits */
#define IB_MAD_HOP_PTR		6	/* DR SMPs */
#define IB_MAD_HOP_CNT		7
#define IB_MAD_TID		8	/* 64 bits */
#define IB_MAD_ATTR_ID		16	/* 16 bits */
#define IB_MAD_ATTR_MOD		20	/* 32 bits */
/* SMPs (14.2.1) */
#define IB_SMP_MKEY		24
#define IB_SMP_DR_SLID		32
#define IB_SMP_DR_DLID		34
#define IB_SMP_DATA		64	/* 64 bytes of attribute */
#define IB_SMP_DATA_LEN		64
#define IB_SMP_INITIAL_PATH	128	/* DR: 64 port numbers */
#define IB_SMP_RETURN_PATH	192
#define IB_SMP_MAX_HOPS		63
/* PerfMgt (16.1): the attribute after 40 reserved bytes */
#define IB_PERF_DATA		64

/* SMP attributes (14.2.5) */
#define IB_ATTR_NOTICE		0x0002
#define IB_ATTR_NODE_DESC	0x0010
#define IB_ATTR_NODE_INFO	0x0011
#define IB_ATTR_SWITCH_INFO	0x0012
#define IB_ATTR_GUID_INFO	0x0014
#define IB_ATTR_PORT_INFO	0x0015
#define IB_ATTR_PKEY_TABLE	0x0016
#define IB_ATTR_SL2VL		0x0017
#define IB_ATTR_VL_ARB		0x0018
#define IB_ATTR_LFT		0x0019
#define IB_ATTR_MFT		0x001b
#define IB_ATTR_SM_INFO		0x0020
/* PerfMgt attributes (16.1.3) */
#define IB_ATTR_CLASS_PORT_INFO	0x0001
#define IB_ATTR_PORT_COUNTERS	0x0012
#define IB_ATTR_PORT_COUNTERS_EXT 0x001d

/* Node types (NodeInfo) */
#define IB_NODE_CA		1
#define IB_NODE_SWITCH		2

/* Port states (PortInfo.PortState) and physical states */
#define IB_PORT_NOP		0
#define IB_PORT_DOWN		1
#define IB_PORT_INIT		2
#define IB_PORT_ARMED		3
#define IB_PORT_ACTIVE		4
#define IB_PHYS_NOP		0
#define IB_PHYS_SLEEP		1
#define IB_PHYS_POLLING		2
#define IB_PHYS_DISABLED	3
#define IB_PHYS_LINK_UP		5

/* PortInfo.CapabilityMask bits (14.2.5.6) */
#define IB_PORT_CAP_SM			(1u << 1)
#define IB_PORT_CAP_NOTICE		(1u << 2)
#define IB_PORT_CAP_TRAP		(1u << 3)
#define IB_PORT_CAP_SYS_IMAGE_GUID	(1u << 11)
#define IB_PORT_CAP_PKEY_SW_EXT_TRAP	(1u << 12)
#define IB_PORT_CAP_CM			(1u << 16)
#define IB_PORT_CAP_VENDOR_CLASS	(1u << 19)
#define IB_PORT_CAP_CLIENT_REREG	(1u << 25)

/* Big-endian field access in MADs and headers. */
static inline uint16_t ib_get16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static inline uint32_t ib_get32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static inline uint64_t ib_get64(const uint8_t *p)
{
	return (uint64_t)ib_get32(p) << 32 | ib_get32(p + 4);
}

static inline void ib_put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static inline void ib_put32(uint8_t *p, uint32_t v)
{
	ib_put16(p, (uint16_t)(v >> 16));
	ib_put16(p + 2, (uint16_t)v);
}

static inline void ib_put64(uint8_t *p, uint64_t v)
{
	ib_put32(p, (uint32_t)(v >> 32));
	ib_put32(p + 4, (uint32_t)v);
}

/*
 * PortInfo (14.2.5.6), the fields qhca keeps, for a CA port and for a switch port alike
 * (a switch's external ports have no LID or M_Key of their own: port 0's are used).
 */
struct ib_port_info {
	uint64_t mkey, gid_prefix;
	uint16_t lid, sm_lid;
	uint32_t cap_mask;
	uint16_t mkey_lease;
	uint8_t local_port;
	uint8_t width_enabled, width_supported, width_active;
	uint8_t speed_supported, state, phys_state, link_down_default;
	uint8_t mkey_protect, lmc;
	uint8_t speed_active, speed_enabled;
	uint8_t neighbor_mtu, sm_sl;
	uint8_t vl_cap, vl_high_limit, vl_arb_high_cap, vl_arb_low_cap;
	uint8_t mtu_cap, vl_stall, hoq_life, op_vls;
	uint16_t mkey_violations, pkey_violations, qkey_violations;
	uint8_t guid_cap, client_rereg, subnet_timeout, resp_time;
	uint8_t init_type_reply;
	/* Not in the attribute: the SMA's M_Key lease timer (14.2.4), when it runs out on the
	 * SMA's clock (ns), 0 while it is stopped. */
	uint64_t mkey_lease_end;
};

void ib_port_info_pack(const struct ib_port_info *pi, uint8_t data[IB_SMP_DATA_LEN]);
void ib_port_info_unpack(const uint8_t data[IB_SMP_DATA_LEN], struct ib_port_info *pi);

/* NodeInfo (14.2.5.3) */
struct ib_node_info {
	uint8_t node_type, num_ports;
	uint64_t sys_image_guid, node_guid, port_guid;
	uint16_t partition_cap, device_id;
	uint32_t revision;
	uint8_t local_port;
	uint32_t vendor_id;	/* 24 bits */
};

void ib_node_info_pack(const struct ib_node_info *ni, uint8_t data[IB_SMP_DATA_LEN]);

/*
 * The common part of a Set(PortInfo) on a port, CA or switch (14.2.5.6, table 149 and
 * 14.2.5.6.1 for the state machine): takes @req's settable fields into @pi, moving the
 * logical state as the request asks when the transition is allowed. Returns the MAD status
 * (0, or IB_MAD_ST_BAD_VALUE with nothing changed) and says in @why what was wrong.
 */
uint16_t ib_port_info_set(struct ib_port_info *pi, const struct ib_port_info *req,
			  bool lid_settable, const char **why);

/*
 * The VL tables of a port, CA or switch, for an SMA: SLtoVLMappingTable (8 bytes, a nibble
 * an SL; a Set may map only to VLs below @op_vls or to VL15) and VLArbitrationTable (four
 * blocks of 64 bytes, the modifier's high half naming the block 1-4). Each answers the
 * Get or Set in @mad in place and returns the MAD status.
 */
uint16_t ib_sma_sl2vl(uint8_t table[8], uint8_t *mad, bool set, uint8_t op_vls);
uint16_t ib_sma_vl_arb(uint8_t tables[4][IB_SMP_DATA_LEN], uint8_t *mad, bool set);

/* Turn the request @mad (Get or Set) into its response in place: GetResp with @status, the
 * D bit for a directed-route SMP. */
void ib_mad_make_resp(uint8_t *mad, uint16_t status);

/*
 * The M_Key check of an SMA (IBA 14.2.4), one implementation for a CA port and a switch
 * (whose port 0 holds the switch's M_Key): @pi is the port's PortInfo, @mad the SubnGet,
 * SubnSet or SubnTrapRepress that came in (LID-routed or directed-route alike), @now_ns
 * the SMA's own clock. The check passes when the port's M_Key is 0 or the SMP carries it;
 * otherwise what the M_KeyProtectBits allow (14.2.4, the levels of protection):
 *
 *   0: Get: passes, PortInfo's M_Key readable.     Set, TrapRepress: fail.
 *   1: Get: passes, PortInfo's M_Key reads as 0.   Set, TrapRepress: fail.
 *   2, 3: everything fails.
 *
 * A failure counts in M_KeyViolations (saturating) and starts the lease timer unless it
 * runs already or M_KeyLeasePeriod is 0 (no lease: protection for ever); a Get, Set or
 * TrapRepress with the key stops it; once it runs out, the M_KeyProtectBits are 0
 * (the lease, 14.2.4), so an SM that lost the key recovers the port. A failed SMP must
 * change nothing and get no response: the caller drops it (and may send Trap 256).
 * Other methods (responses, traps) are not the SMA's and always pass.
 */
enum ib_mkey_result {
	IB_MKEY_PASS,		/* the key matched, or the port has none */
	IB_MKEY_PASS_HIDE,	/* a Get allowed without the key: PortInfo's M_Key reads 0 */
	IB_MKEY_FAIL,		/* drop it: no change, no response */
};

enum ib_mkey_result ib_mkey_check(struct ib_port_info *pi, const uint8_t *mad,
				  uint64_t now_ns);
/* The M_Key field of a PortInfo response in @mad, as @r says it reads. */
void ib_mkey_hide(uint8_t *mad, enum ib_mkey_result r);

/*
 * Trap 256, "Bad M_Key" (the Notice attribute, 14.2.5.1, and the trap's data details): a
 * LID-routed SubnTrap(Notice) into @trap (IB_MAD_LEN bytes) from the port at
 * @issuer_lid, of a node of @node_type (producer type: CA or switch), about the SMP @bad
 * that failed the check. @tid: the trap's transaction ID. The M_Key field of the trap
 * stays 0: the key is not sent on the wire for a trap.
 */
#define IB_TRAP_BAD_MKEY	256
#define IB_NOTICE_SECURITY	2	/* Notice type (IsGeneric set apart) */
void ib_trap_bad_mkey(uint8_t *trap, const uint8_t *bad, uint8_t node_type,
		      uint16_t issuer_lid, uint64_t tid);

#endif /* QHCA_IB_H */
