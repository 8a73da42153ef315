/*
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * qhca: an emulated RDMA host channel adapter (RoCE v1 and v2, InfiniBand,
 * iWARP), QEMU adapter.
 *
 * This file is the thin QOM/PCI shell around the plain-C engine in engine/
 * (which builds its frames with the codecs in wire/): it owns the BARs, MSI-X,
 * the properties, the netdev, migration and the trace events, and hands every
 * register and doorbell access to the engine. README.md ("The device") of the
 * qhca tree lists every property and its default.
 */
#include "qemu/osdep.h"
#include "qemu/guest-random.h"
#include "qemu/log.h"
#include "qemu/main-loop.h"
#include "qemu/module.h"
#include "qemu/timer.h"
#include "qemu/units.h"
#include "qapi/error.h"
#include "hw/pci/pci_device.h"
#include "hw/pci/msix.h"
#include "hw/qdev-properties.h"
#include "migration/qemu-file-types.h"
#include "migration/vmstate.h"
#include "migration/blocker.h"
#include "net/net.h"
#include "system/dma.h"
#include "system/runstate.h"
#include "trace.h"

#include "qhca_engine.h"

#define TYPE_QHCA "qhca"

/*
 * Frames held back, in order, while the netdev layer holds one of ours (~36 MiB
 * at most).
 */
#define QHCA_TX_BACKLOG 4096
OBJECT_DECLARE_SIMPLE_TYPE(QhcaState, QHCA)

struct QhcaState {
    PCIDevice parent_obj;

    MemoryRegion regs;
    MemoryRegion doorbells;
    NICState *nic;
    NICConf conf;
    /* the engine's timer: retransmission and RNR deadlines */
    QEMUTimer *timer;
    /* ... and work due now (see qhca_ops_timer_arm) */
    QEMUBH *timer_bh;
    int64_t err_window_ns;      /* rate limit of host-side error reports */
    unsigned err_in_window, err_suppressed;

    /*
     * Transmit back-pressure: when the netdev cannot take a frame it queues it
     * and calls qhca_tx_sent later. Until then the engine's requesters are
     * blocked and other frames (ACKs, READ responses, Ethernet) wait here in
     * order; beyond the backlog they drop.
     */
    QEMUBH *tx_bh;
    unsigned tx_inflight;       /* frames of ours queued in the netdev layer */
    uint8_t *tx_frame[QHCA_TX_BACKLOG];
    size_t tx_len[QHCA_TX_BACKLOG];
    unsigned tx_head, tx_count;
    /* property tx-batch: cork the netdev around bursts */
    bool tx_batch;
    char *link;                 /* property link: roce (default), ib, iwarp */

    struct qhca_engine_config cfg;
    struct qhca_engine *engine;
    /* an engine loaded from a migration stream waits for the VM to run */
    VMChangeStateEntry *vm_state;
    bool resume_pending;
    /* link=iwarp: its TCP connections are not in the device's state (yet) */
    Error *migration_blocker;
};

/* --------------------------------------------------------------- engine ops */

/*
 * Before each call into the engine: the trace is on while the event qhca_step
 * is.
 */
static inline void qhca_trace_sync(QhcaState *s)
{
    qhca_engine_set_tracing(s->engine,
                            trace_event_get_state_backends(TRACE_QHCA_STEP));
}

/*
 * Is [addr, addr + len) clear of this device's own BARs? (No DMA into our own
 * MMIO.)
 */
static bool qhca_dma_target_ok(QhcaState *s, uint64_t addr, size_t len)
{
    static const int bars[] = { QHCA_BAR_REGS, QHCA_BAR_DOORBELL,
                                QHCA_BAR_MSIX };
    PCIDevice *pci = PCI_DEVICE(s);
    size_t i;

    for (i = 0; i < ARRAY_SIZE(bars); i++) {
        pcibus_t base = pci_get_bar_addr(pci, bars[i]);
        uint64_t size = pci->io_regions[bars[i]].size;

        if (base == PCI_BAR_UNMAPPED || !size) {
            continue;
        }
        if (addr < base + size && base < addr + len) {
            return false;
        }
    }
    return true;
}

static int qhca_ops_dma_read(void *opaque, uint64_t addr, void *buf, size_t len)
{
    QhcaState *s = opaque;

    if (!qhca_dma_target_ok(s, addr, len)) {
        memset(buf, 0, len);
        return -1;
    }
    return pci_dma_read(PCI_DEVICE(s), addr, buf, len) == MEMTX_OK ? 0 : -1;
}

static int qhca_ops_dma_write(void *opaque, uint64_t addr, const void *buf,
                              size_t len)
{
    QhcaState *s = opaque;

    if (!qhca_dma_target_ok(s, addr, len)) {
        return -1;
    }
    return pci_dma_write(PCI_DEVICE(s), addr, buf, len) == MEMTX_OK ? 0 : -1;
}

static void qhca_ops_notify(void *opaque, unsigned vector)
{
    PCIDevice *pci = PCI_DEVICE(opaque);

    trace_qhca_irq(vector);
    if (msix_enabled(pci)) {
        msix_notify(pci, vector);
    }
}

/*
 * The frames the engine sends in one go (a doorbell's WQEs, the READ responses
 * to one request, a retransmission) leave in one write of the netdev where it
 * can batch them (qemu-patches/0003: the stream netdev to the fabric), so a
 * burst wakes the fabric once, not once a frame. Netdevs without it send each
 * frame at once, as before.
 */
static void qhca_cork(QhcaState *s, bool on)
{
    NetClientState *peer = qemu_get_queue(s->nic)->peer;

    if (s->tx_batch && peer && peer->info->cork) {
        peer->info->cork(peer, on);
    }
}

static void qhca_tx_sent(NetClientState *nc, ssize_t ret)
{
    QhcaState *s = qemu_get_nic_opaque(nc);

    if (s->tx_inflight && !--s->tx_inflight) {
        qemu_bh_schedule(s->tx_bh);
    }
}

/* Hand a frame to the netdev; false if it queued it (qhca_tx_sent follows). */
static bool qhca_tx_send(QhcaState *s, const void *frame, size_t len)
{
    trace_qhca_tx(len);
    if (qemu_send_packet_async(qemu_get_queue(s->nic), frame, len,
                               qhca_tx_sent) == 0) {
        s->tx_inflight++;
        return false;
    }
    return true;
}

/*
 * The netdev took our frames: send the backlog, then let the requesters go on.
 */
static void qhca_tx_bh(void *opaque)
{
    QhcaState *s = opaque;

    qhca_cork(s, true);
    while (s->tx_count && !s->tx_inflight) {
        unsigned i = s->tx_head;

        s->tx_head = (i + 1) % QHCA_TX_BACKLOG;
        s->tx_count--;
        qhca_tx_send(s, s->tx_frame[i], s->tx_len[i]);
        g_free(s->tx_frame[i]);
        s->tx_frame[i] = NULL;
    }
    if (!s->tx_count && !s->tx_inflight && qhca_engine_tx_blocked(s->engine)) {
        trace_qhca_tx_resume();
        qhca_trace_sync(s);
        qhca_engine_tx_resume(s->engine);
    }
    qhca_cork(s, false);
}

static void qhca_tx_backlog_clear(QhcaState *s)
{
    while (s->tx_count) {
        g_free(s->tx_frame[s->tx_head]);
        s->tx_frame[s->tx_head] = NULL;
        s->tx_head = (s->tx_head + 1) % QHCA_TX_BACKLOG;
        s->tx_count--;
    }
}

static void qhca_ops_xmit(void *opaque, const void *frame, size_t len)
{
    QhcaState *s = opaque;
    unsigned i;

    if (!s->tx_inflight && !s->tx_count) {
        if (!qhca_tx_send(s, frame, len)) {
            trace_qhca_tx_block(len);
            qhca_engine_tx_block(s->engine);
        }
        return;
    }
    /*
     * A frame of ours waits in the netdev layer: keep the order, hold this one
     * back.
     */
    qhca_engine_tx_block(s->engine);
    if (s->tx_count == QHCA_TX_BACKLOG) {
        trace_qhca_tx_backlog_full(len);
        return;
    }
    i = (s->tx_head + s->tx_count++) % QHCA_TX_BACKLOG;
    s->tx_frame[i] = g_memdup2(frame, len);
    s->tx_len[i] = len;
}

/*
 * Device time is the guest's: QEMU_CLOCK_VIRTUAL stops while the VM is stopped,
 * so a paused or migrated guest's QPs do not time out, as with QEMU's NIC
 * models.
 */
static uint64_t qhca_ops_now_ns(void *opaque)
{
    return qemu_clock_get_ns(QEMU_CLOCK_VIRTUAL);
}

/*
 * The engine's one timer. Work due now (what a budget left: admin commands,
 * looped-back frames, QPs overdue) runs from a bottom half, after the main loop
 * has polled and let go of its lock once: an expired QEMUTimer would not do,
 * the timer list runs a timer armed in the past again in the same pass. While
 * the VM is stopped the guest's clock stands still, and so does the device: the
 * QEMUTimer fires when it runs again.
 */
static void qhca_ops_timer_arm(void *opaque, uint64_t deadline_ns)
{
    QhcaState *s = opaque;

    if (deadline_ns == UINT64_MAX) {
        timer_del(s->timer);
        qemu_bh_cancel(s->timer_bh);
    } else if (deadline_ns <= qemu_clock_get_ns(QEMU_CLOCK_VIRTUAL) &&
               runstate_is_running()) {
        timer_del(s->timer);
        qemu_bh_schedule(s->timer_bh);
    } else {
        qemu_bh_cancel(s->timer_bh);
        timer_mod_ns(s->timer, MIN(deadline_ns, (uint64_t)INT64_MAX));
    }
}

static void qhca_timer_cb(void *opaque)
{
    QhcaState *s = opaque;

    qhca_cork(s, true);
    qhca_trace_sync(s);
    qhca_engine_timer(s->engine);
    qhca_cork(s, false);
}

/*
 * Conditions the host should hear of, at most QHCA_ERR_REPORTS_PER_S a second
 * whatever the guest does; guest errors go to LOG_GUEST_ERROR and the _ub_
 * trace event only.
 */
#define QHCA_ERR_REPORTS_PER_S 5

static void qhca_report_err(QhcaState *s, const char *func, const char *msg)
{
    int64_t now = qemu_clock_get_ns(QEMU_CLOCK_REALTIME);

    if (now - s->err_window_ns >= NANOSECONDS_PER_SECOND) {
        if (s->err_suppressed) {
            warn_report("qhca: %u more errors in the last second not shown "
                        "(trace event qhca_engine_err shows them all)",
                        s->err_suppressed);
        }
        s->err_window_ns = now;
        s->err_in_window = s->err_suppressed = 0;
    }
    if (s->err_in_window++ < QHCA_ERR_REPORTS_PER_S) {
        error_report("qhca: %s: %s", func, msg);
    } else {
        s->err_suppressed++;
    }
}

static bool qhca_ops_log_enabled(void *opaque, enum qhca_log_level level)
{
    switch (level) {
    case QHCA_LOG_EVENT:
        return trace_event_get_state_backends(TRACE_QHCA_ENGINE);
    case QHCA_LOG_ERR:
        return true;
    case QHCA_LOG_GUEST:
    default:
        return true;
    }
}

static void qhca_ops_log(void *opaque, enum qhca_log_level level,
                         const char *func, const char *msg)
{
    switch (level) {
    case QHCA_LOG_EVENT:
        trace_qhca_engine(func, msg);
        break;
    case QHCA_LOG_ERR:
        trace_qhca_engine_err(func, msg);
        qhca_report_err(opaque, func, msg);
        break;
    case QHCA_LOG_GUEST:
        trace_qhca_engine_ub(func, msg);
        qemu_log_mask(LOG_GUEST_ERROR, "qhca: %s: %s\n", func, msg);
        break;
    }
}

/*
 * The teaching trace: each line with the host's wall clock in ns, the clock of
 * the fabric's capture, so that 'qhca explain' can merge the guests' steps and
 * the capture.
 */
static void qhca_ops_step(void *opaque, const char *line)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    trace_qhca_step((uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec, line);
}

static const struct qhca_engine_ops qhca_engine_ops = {
    .dma_read = qhca_ops_dma_read,
    .dma_write = qhca_ops_dma_write,
    .notify = qhca_ops_notify,
    .xmit = qhca_ops_xmit,
    .now_ns = qhca_ops_now_ns,
    .timer_arm = qhca_ops_timer_arm,
    .log_enabled = qhca_ops_log_enabled,
    .log = qhca_ops_log,
    .step = qhca_ops_step,
};

/* ---------------------------------------------------------------- BARs */

static uint64_t qhca_regs_read(void *opaque, hwaddr addr, unsigned size)
{
    QhcaState *s = opaque;
    uint32_t val = qhca_engine_reg_read(s->engine, addr);

    trace_qhca_reg_read(addr, val);
    return val;
}

static void qhca_regs_write(void *opaque, hwaddr addr, uint64_t val,
                            unsigned size)
{
    QhcaState *s = opaque;

    trace_qhca_reg_write(addr, val);
    qhca_trace_sync(s);
    qhca_engine_reg_write(s->engine, addr, val);
}

static const MemoryRegionOps qhca_regs_ops = {
    .read = qhca_regs_read,
    .write = qhca_regs_write,
    .endianness = DEVICE_LITTLE_ENDIAN,
    .valid = {
        .min_access_size = 4,
        .max_access_size = 4,
        .unaligned = false,
    },
    .impl = {
        .min_access_size = 4,
        .max_access_size = 4,
    },
};

static uint64_t qhca_db_read(void *opaque, hwaddr addr, unsigned size)
{
    qemu_log_mask(LOG_GUEST_ERROR,
                  "qhca: read of write-only doorbell 0x%" HWADDR_PRIx "\n",
                  addr);
    return 0;
}

static void qhca_db_write(void *opaque, hwaddr addr, uint64_t val,
                          unsigned size)
{
    QhcaState *s = opaque;

    trace_qhca_doorbell(addr / QHCA_DB_PAGE_SIZE, addr % QHCA_DB_PAGE_SIZE,
                        val);
    qhca_cork(s, true);
    qhca_trace_sync(s);
    qhca_engine_db_write(s->engine, addr, val, size);
    qhca_cork(s, false);
}

static const MemoryRegionOps qhca_db_ops = {
    .read = qhca_db_read,
    .write = qhca_db_write,
    .endianness = DEVICE_LITTLE_ENDIAN,
    .valid = {
        .min_access_size = 4,
        .max_access_size = 8,
    },
    .impl = {
        .min_access_size = 4,
        .max_access_size = 8,
    },
};

/* ---------------------------------------------------------------- network */

static ssize_t qhca_receive(NetClientState *nc, const uint8_t *buf, size_t size)
{
    QhcaState *s = qemu_get_nic_opaque(nc);

    trace_qhca_rx(size);
    /*
     * The engine takes every frame; what it cannot deliver it drops and counts.
     */
    qhca_cork(s, true);
    qhca_trace_sync(s);
    qhca_engine_receive(s->engine, buf, size);
    qhca_cork(s, false);
    return size;
}

/*
 * The link is up when the netdev has a peer and is not set down (set_link). A
 * source whose guest has moved away (postmigrate) leaves its engine alone: its
 * netdev going away as it exits is not the guest's port going down.
 */
static void qhca_update_link(QhcaState *s)
{
    NetClientState *nc = qemu_get_queue(s->nic);

    if (runstate_check(RUN_STATE_POSTMIGRATE)) {
        return;
    }

    qhca_engine_set_link(s->engine, nc->peer && !nc->link_down);
}

static void qhca_link_status_changed(NetClientState *nc)
{
    qhca_update_link(qemu_get_nic_opaque(nc));
}

static NetClientInfo qhca_net_info = {
    .type = NET_CLIENT_DRIVER_NIC,
    .size = sizeof(NICState),
    .receive = qhca_receive,
    .link_status_changed = qhca_link_status_changed,
};

/* ---------------------------------------------------------------- QOM */

static void qhca_vm_state_change(void *opaque, bool running, RunState state);

static void qhca_realize(PCIDevice *pci, Error **errp)
{
    QhcaState *s = QHCA(pci);
    char why[128];
    int i;

    qemu_macaddr_default_if_unset(&s->conf.macaddr);
    memcpy(s->cfg.mac, s->conf.macaddr.a, sizeof(s->cfg.mac));
    qemu_guest_getrandom_nofail(&s->cfg.key_secret, sizeof(s->cfg.key_secret));
    qemu_guest_getrandom_nofail(s->cfg.isn_secret, sizeof(s->cfg.isn_secret));
    if (!s->link || !strcmp(s->link, "roce")) {
        s->cfg.link = QHCA_LINK_ROCE;
    } else if (!strcmp(s->link, "ib")) {
        s->cfg.link = QHCA_LINK_IB;
    } else if (!strcmp(s->link, "iwarp")) {
        s->cfg.link = QHCA_LINK_IWARP;
    } else {
        error_setg(errp, "qhca: link must be roce, ib or iwarp, not '%s'",
                   s->link);
        return;
    }
    if (!qhca_engine_config_check(&s->cfg, why, sizeof(why))) {
        error_setg(errp, "qhca: %s", why);
        return;
    }
    if (s->cfg.link == QHCA_LINK_IWARP) {
        error_setg(&s->migration_blocker, "qhca: an iWARP port (link=iwarp) "
                   "cannot migrate yet: its TCP connections are not saved");
        if (migrate_add_blocker(&s->migration_blocker, errp) < 0) {
            return;
        }
    }
    s->timer = timer_new_ns(QEMU_CLOCK_VIRTUAL, qhca_timer_cb, s);
    s->timer_bh = qemu_bh_new_guarded(qhca_timer_cb, s,
                                      &DEVICE(s)->mem_reentrancy_guard);
    s->engine = qhca_engine_new(&s->cfg, &qhca_engine_ops, s);
    if (!s->engine) {
        qemu_bh_delete(s->timer_bh);
        timer_free(s->timer);
        migrate_del_blocker(&s->migration_blocker);
        error_setg(errp, "qhca: cannot allocate the object tables");
        return;
    }

    pci->config[PCI_INTERRUPT_PIN] = 1;
    memory_region_init_io(&s->regs, OBJECT(s), &qhca_regs_ops, s, "qhca-regs",
                          QHCA_REGS_SIZE);
    pci_register_bar(pci, QHCA_BAR_REGS, PCI_BASE_ADDRESS_SPACE_MEMORY,
                     &s->regs);
    memory_region_init_io(&s->doorbells, OBJECT(s), &qhca_db_ops, s,
                          "qhca-doorbells",
                          (uint64_t)s->cfg.db_pages * QHCA_DB_PAGE_SIZE);
    pci_register_bar(pci, QHCA_BAR_DOORBELL,
                     PCI_BASE_ADDRESS_SPACE_MEMORY |
                     PCI_BASE_ADDRESS_MEM_TYPE_64 |
                     PCI_BASE_ADDRESS_MEM_PREFETCH, &s->doorbells);
    if (msix_init_exclusive_bar(pci, s->cfg.msix_vectors, QHCA_BAR_MSIX,
                                errp)) {
        qhca_engine_free(s->engine);
        s->engine = NULL;
        qemu_bh_delete(s->timer_bh);
        timer_free(s->timer);
        migrate_del_blocker(&s->migration_blocker);
        return;
    }
    s->tx_bh = qemu_bh_new_guarded(qhca_tx_bh, s,
                                   &DEVICE(s)->mem_reentrancy_guard);
    for (i = 0; i < s->cfg.msix_vectors; i++) {
        msix_vector_use(pci, i);
    }

    s->nic = qemu_new_nic(&qhca_net_info, &s->conf,
                          object_get_typename(OBJECT(s)), DEVICE(s)->id,
                          &DEVICE(s)->mem_reentrancy_guard, s);
    qemu_format_nic_info_str(qemu_get_queue(s->nic), s->conf.macaddr.a);
    qhca_update_link(s);
    s->vm_state = qemu_add_vm_change_state_handler(qhca_vm_state_change, s);
    trace_qhca_realize(s->cfg.db_pages, s->cfg.msix_vectors, s->cfg.mtu);
}

static void qhca_exit(PCIDevice *pci)
{
    QhcaState *s = QHCA(pci);

    qemu_del_vm_change_state_handler(s->vm_state);
    migrate_del_blocker(&s->migration_blocker);
    qemu_del_nic(s->nic);
    qemu_bh_delete(s->tx_bh);
    qhca_tx_backlog_clear(s);
    msix_uninit_exclusive_bar(pci);
    qhca_engine_free(s->engine);
    s->engine = NULL;
    qemu_bh_delete(s->timer_bh);
    timer_free(s->timer);
}

static void qhca_reset_hold(Object *obj, ResetType type)
{
    QhcaState *s = QHCA(obj);

    qhca_tx_backlog_clear(s);
    qhca_engine_reset(s->engine);
}

/* ---------------------------------------------------------------- migration */

/*
 * The engine's whole state travels as one field: its length, then the bytes of
 * the engine's own versioned format (hw-model/engine/migrate.c). The incoming
 * stream is untrusted: its length is bounded by what a device of these
 * properties can hold, the buffer grows only as bytes arrive, and the engine
 * checks every value as it would a guest's and builds a new engine, which
 * replaces the old one only once the whole state is taken.
 */
static int qhca_state_put(QEMUFile *f, void *pv, size_t size,
                          const VMStateField *field, JSONWriter *vmdesc)
{
    QhcaState *s = container_of(pv, QhcaState, engine);
    int64_t t0 = get_clock();
    uint8_t *buf;
    size_t len;

    qhca_trace_sync(s);
    if (qhca_engine_save(s->engine, &buf, &len)) {
        error_report("qhca: out of memory saving the device state");
        return -ENOMEM;
    }
    trace_qhca_migrate_save(len, get_clock() - t0);
    qemu_put_be64(f, len);
    qemu_put_buffer(f, buf, len);
    free(buf);
    return 0;
}

static int qhca_state_get(QEMUFile *f, void *pv, size_t size,
                          const VMStateField *field)
{
    QhcaState *s = container_of(pv, QhcaState, engine);
    int64_t t0 = get_clock();
    uint64_t len = qemu_get_be64(f), got = 0;
    size_t cap = 0, max = qhca_engine_state_max(&s->cfg);
    struct qhca_engine *e;
    uint8_t *buf = NULL;
    char why[256];

    if (len > max) {
        error_report("qhca: incoming device state of %" PRIu64 " bytes, "
                     "more than a device of these properties holds (%zu)",
                     len, max);
        return -EINVAL;
    }
    while (got < len) {
        size_t chunk = MIN(len - got, 1 * MiB), n;

        if (got + chunk > cap) {
            uint8_t *nb;

            cap = MIN(MAX(cap * 2, got + chunk), len);
            nb = g_try_realloc(buf, cap);
            if (!nb) {
                g_free(buf);
                error_report("qhca: out of memory for the incoming state");
                return -ENOMEM;
            }
            buf = nb;
        }
        n = qemu_get_buffer(f, buf + got, chunk);
        if (n != chunk) {
            g_free(buf);
            error_report("qhca: incoming device state truncated");
            return -EINVAL;
        }
        got += n;
    }
    e = qhca_engine_load(&s->cfg, &qhca_engine_ops, s, buf, len, why,
                         sizeof(why));
    g_free(buf);
    if (!e) {
        error_report("qhca: incoming device state refused: %s", why);
        trace_qhca_migrate_refused(why);
        return -EINVAL;
    }
    trace_qhca_migrate_load(len, get_clock() - t0);
    /*
     * Nothing of the old engine's time reaches the new one (loadvm loads
     * into a device that ran): its timers, its backlog, and frames either
     * way still queued in QEMU's network layer (frames of an abandoned
     * timeline would meet QPs restored to the PSNs they had; a purge calls
     * our sent callback for ours, which keeps tx_inflight right). The new
     * engine sends when the VM runs.
     */
    timer_del(s->timer);
    qemu_bh_cancel(s->timer_bh);
    qhca_tx_backlog_clear(s);
    qemu_purge_queued_packets(qemu_get_queue(s->nic));
    if (qemu_get_queue(s->nic)->peer) {
        qemu_purge_queued_packets(qemu_get_queue(s->nic)->peer);
    }
    qemu_bh_cancel(s->tx_bh);
    qhca_engine_free(s->engine);
    s->engine = e;
    s->resume_pending = true;
    return 0;
}

static const VMStateInfo qhca_state_info = {
    .name = "qhca-engine",
    .get = qhca_state_get,
    .put = qhca_state_put,
};

/*
 * A loaded engine starts when the VM runs: its timers and the frames it has to
 * send. Its port keeps the link the source had: the stream netdev of a moved
 * guest reconnects behind the scenes, and a port event for that would make the
 * guest's RDMA consumers tear down what the move is meant to keep.
 */
static void qhca_vm_state_change(void *opaque, bool running, RunState state)
{
    QhcaState *s = opaque;

    if (!running || !s->resume_pending) {
        return;
    }
    s->resume_pending = false;
    qhca_cork(s, true);
    qhca_trace_sync(s);
    qhca_engine_resume(s->engine);
    qhca_cork(s, false);
}

static const VMStateDescription qhca_vmstate = {
    .name = "qhca",
    .version_id = 1,
    .minimum_version_id = 1,
    .fields = (const VMStateField[]) {
        VMSTATE_PCI_DEVICE(parent_obj, QhcaState),
        VMSTATE_MSIX(parent_obj, QhcaState),
        VMSTATE_SINGLE(engine, QhcaState, 0, qhca_state_info,
                       struct qhca_engine *),
        VMSTATE_END_OF_LIST()
    },
};

static const Property qhca_properties[] = {
    DEFINE_NIC_PROPERTIES(QhcaState, conf),
    DEFINE_PROP_UINT32("db-pages", QhcaState, cfg.db_pages, 256),
    DEFINE_PROP_UINT32("msix-vectors", QhcaState, cfg.msix_vectors, 5),
    DEFINE_PROP_UINT32("max-pd", QhcaState, cfg.max_pd, 1024),
    DEFINE_PROP_UINT32("max-qp", QhcaState, cfg.max_qp, 262144),
    DEFINE_PROP_UINT32("max-qp-wr", QhcaState, cfg.max_qp_wr, 32768),
    DEFINE_PROP_UINT32("max-cq", QhcaState, cfg.max_cq, 1024),
    DEFINE_PROP_UINT32("max-cqe", QhcaState, cfg.max_cqe, 4194303),
    DEFINE_PROP_UINT32("max-mr", QhcaState, cfg.max_mr, 4096),
    DEFINE_PROP_UINT32("max-mr-size-mb", QhcaState, cfg.max_mr_size_mb, 4096),
    DEFINE_PROP_UINT32("max-srq", QhcaState, cfg.max_srq, 256),
    DEFINE_PROP_UINT32("max-sge", QhcaState, cfg.max_sge, 30),
    DEFINE_PROP_UINT32("max-inline", QhcaState, cfg.max_inline, 256),
    DEFINE_PROP_UINT32("mtu", QhcaState, cfg.mtu, 4096),
    DEFINE_PROP_UINT32("host-mem-mb", QhcaState, cfg.host_mem_mb,
                       QHCA_HOST_MEM_MB),
    DEFINE_PROP_BOOL("tx-batch", QhcaState, tx_batch, true),
    DEFINE_PROP_STRING("link", QhcaState, link),
};

/*
 * The read-only property "objects": the device's own view of its port, QPs,
 * CQs, SRQs and regions as JSON (QMP: qom-get path=/machine/peripheral/ID
 * property=objects; the launcher's 'qhca device I'). Read in the main loop,
 * where the engine runs.
 */
static char *qhca_get_objects(Object *obj, Error **errp)
{
    QhcaState *s = QHCA(obj);
    size_t cap = 1 << 20;
    char *buf;

    if (!s->engine) {
        return g_strdup("{}");
    }
    buf = g_malloc(cap);
    qhca_engine_describe(s->engine, buf, cap);
    return buf;
}

/*
 * QEMU 10.1 made the class data const (TypeInfo.class_init, class_data): the
 * parameter takes its type from TypeInfo, so one definition builds on 10.0 and
 * on 10.1 and later.
 */
typedef __typeof__(((TypeInfo *)NULL)->class_data) QhcaClassData;

static void qhca_class_init(ObjectClass *klass, QhcaClassData data)
{
    DeviceClass *dc = DEVICE_CLASS(klass);
    PCIDeviceClass *pc = PCI_DEVICE_CLASS(klass);
    ResettableClass *rc = RESETTABLE_CLASS(klass);

    pc->realize = qhca_realize;
    pc->exit = qhca_exit;
    pc->vendor_id = QHCA_PCI_VENDOR_ID;
    pc->device_id = QHCA_PCI_DEVICE_ID;
    pc->revision = QHCA_PCI_REVISION;
    pc->class_id = QHCA_PCI_CLASS;
    pc->subsystem_vendor_id = QHCA_PCI_VENDOR_ID;
    pc->subsystem_id = QHCA_PCI_DEVICE_ID;
    rc->phases.hold = qhca_reset_hold;
    dc->desc = "qhca emulated RDMA HCA (RoCE v1/v2, InfiniBand or iWARP)";
    dc->vmsd = &qhca_vmstate;
    device_class_set_props(dc, qhca_properties);
    object_class_property_add_str(klass, "objects", qhca_get_objects, NULL);
    object_class_property_set_description(klass, "objects",
        "the device's view of its objects (QPs, CQs, SRQs, regions), as JSON");
    set_bit(DEVICE_CATEGORY_NETWORK, dc->categories);
}

static const TypeInfo qhca_info = {
    .name = TYPE_QHCA,
    .parent = TYPE_PCI_DEVICE,
    .instance_size = sizeof(QhcaState),
    .class_init = qhca_class_init,
    .interfaces = (InterfaceInfo[]) {
        { INTERFACE_PCIE_DEVICE },
        { INTERFACE_CONVENTIONAL_PCI_DEVICE },
        { }
    },
};

static void qhca_register_types(void)
{
    type_register_static(&qhca_info);
}

type_init(qhca_register_types)
