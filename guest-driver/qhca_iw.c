// SPDX-License-Identifier: GPL-2.0
/*
 * qhca: an iWARP port (link=iwarp) as an iw_cm provider. The device terminates TCP and runs
 * MPA itself (docs/iwarp.md); this file turns iw_cm's calls into its QHCA_CMD_IW_*
 * commands and its QHCA_EVENT_IW_* events into iw_cm's upcalls, as cxgb4 and irdma do for
 * their RNICs. Addresses are iw_cm's mapped ones (m_local_addr, m_remote_addr): the port
 * mapper (iwpmd) reserves each port in the guest's own stack, which shares the address.
 *
 * An endpoint (struct qhca_iw_ep) is one device connection, by its handle in dev->iw_eps;
 * it holds a reference on its iw_cm_id from the moment iw_cm knows of it to the CLOSE
 * upcall. Events come on the async EQ (interrupt context) and are handled on an ordered
 * workqueue: they need admin commands (QUERY_CONN), and iw_cm's handlers may sleep.
 *
 * dev->iw_lock orders iw_cm's calls against the events: an endpoint and a listener are
 * looked up, changed and freed under it (iw_cm's upcalls only queue work, so they are made
 * under it too). A passive endpoint is also iw_cm's between the CONNECT_REQUEST upcall and
 * its accept or reject (iw_cm rejects for an application that destroys the ID first): it
 * is freed when neither the device (until CLOSED) nor iw_cm has it.
 */
#include <linux/inetdevice.h>
#include <net/addrconf.h>
#include <net/arp.h>
#include <net/ndisc.h>
#include <net/neighbour.h>
#include <rdma/iw_cm.h>

#include "qhca.h"

struct qhca_iw_ep {
	struct qhca_dev *dev;
	struct iw_cm_id *cm_id;		/* NULL until iw_cm gives one (passive: accept) */
	u32 conn;			/* the device's connection handle */
	u32 qpn;
	bool passive;
	bool connected;			/* RDMA mode: DISCONNECT and CLOSE are told */
	bool iw_cm_has;			/* passive: iw_cm holds it (accept or reject to come) */
	bool closed;			/* the device's CLOSED came: the handle is released */
};

struct qhca_iw_lep {			/* a listener */
	struct iw_cm_id *cm_id;
	u32 handle;
};

struct qhca_iw_work {
	struct work_struct work;
	struct qhca_dev *dev;
	u8 type;
	u32 handle;
	u64 data;
};

bool qhca_link_iwarp(const struct qhca_dev *dev)
{
	return dev->port.link_layer == QHCA_LINK_IWARP;
}

/* ---------------------------------------------------------------- addresses */
static int addr_from_sockaddr(const struct sockaddr_storage *ss, u8 addr[16], u16 *port)
{
	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *sin = (const struct sockaddr_in *)ss;

		ipv6_addr_set_v4mapped(sin->sin_addr.s_addr, (struct in6_addr *)addr);
		*port = ntohs(sin->sin_port);
		return 0;
	}
	if (ss->ss_family == AF_INET6) {
		const struct sockaddr_in6 *sin6 = (const struct sockaddr_in6 *)ss;

		memcpy(addr, &sin6->sin6_addr, 16);
		*port = ntohs(sin6->sin6_port);
		return 0;
	}
	return -EAFNOSUPPORT;
}

static void sockaddr_from_addr(struct sockaddr_storage *ss, const u8 addr[16], u16 port)
{
	const struct in6_addr *a = (const struct in6_addr *)addr;

	memset(ss, 0, sizeof(*ss));
	if (ipv6_addr_v4mapped(a)) {
		struct sockaddr_in *sin = (struct sockaddr_in *)ss;

		sin->sin_family = AF_INET;
		sin->sin_addr.s_addr = a->s6_addr32[3];
		sin->sin_port = htons(port);
	} else {
		struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)ss;

		sin6->sin6_family = AF_INET6;
		sin6->sin6_addr = *a;
		sin6->sin6_port = htons(port);
	}
}

/* Is @ss one of our netdev's own addresses? */
static bool addr_ours(struct net_device *nd, const struct sockaddr_storage *ss)
{
	struct net_device *owner;
	bool ours = false;

	if (ss->ss_family == AF_INET) {
		owner = ip_dev_find(dev_net(nd), ((const struct sockaddr_in *)ss)->sin_addr.s_addr);
		ours = owner == nd;
		if (owner)
			dev_put(owner);
	}
#if IS_ENABLED(CONFIG_IPV6)
	else if (ss->ss_family == AF_INET6)
		ours = ipv6_chk_addr(dev_net(nd), &((const struct sockaddr_in6 *)ss)->sin6_addr,
				     nd, 1);
#endif
	return ours;
}

/* The MAC of the next hop to @ss on our netdev: rdma_cm resolved it (its neighbour entry)
 * before it asked for the connection. To one of our own addresses it is our own MAC: the
 * card loops the connection back, as an RNIC does. */
static int next_hop_mac(struct qhca_dev *dev, const struct sockaddr_storage *ss, u8 mac[ETH_ALEN])
{
	struct neighbour *n = NULL;
	int err = -EHOSTUNREACH;

	if (!dev->netdev)
		return -ENODEV;
	if (addr_ours(dev->netdev, ss)) {
		ether_addr_copy(mac, dev->netdev->dev_addr);
		return 0;
	}
	if (ss->ss_family == AF_INET)
		n = neigh_lookup(&arp_tbl, &((const struct sockaddr_in *)ss)->sin_addr.s_addr,
				 dev->netdev);
#if IS_ENABLED(CONFIG_IPV6)
	else if (ss->ss_family == AF_INET6)
		n = neigh_lookup(&nd_tbl, &((const struct sockaddr_in6 *)ss)->sin6_addr,
				 dev->netdev);
#endif
	if (!n)
		return err;
	if (n->nud_state & NUD_VALID) {
		neigh_ha_snapshot(mac, n, dev->netdev);
		err = 0;
	}
	neigh_release(n);
	return err;
}

/* ---------------------------------------------------------------- endpoints */
static struct qhca_iw_ep *ep_new(struct qhca_dev *dev, u32 conn)
{
	struct qhca_iw_ep *ep = kzalloc(sizeof(*ep), GFP_KERNEL);

	if (!ep)
		return NULL;
	ep->dev = dev;
	ep->conn = conn;
	if (xa_insert(&dev->iw_eps, conn, ep, GFP_KERNEL)) {
		kfree(ep);
		return NULL;
	}
	return ep;
}

/* The device is done with @ep (CLOSED, or a connect that failed): out of the table, its
 * iw_cm_id reference dropped; freed unless iw_cm still holds it. Under dev->iw_lock. */
static void ep_close(struct qhca_iw_ep *ep)
{
	if (!ep->closed)
		xa_erase(&ep->dev->iw_eps, ep->conn);
	ep->closed = true;
	if (ep->cm_id)
		ep->cm_id->rem_ref(ep->cm_id);
	ep->cm_id = NULL;
	if (!ep->iw_cm_has)
		kfree(ep);
}

/* iw_cm is done with passive @ep (accept or reject): freed if the device is too. */
static void ep_put_iw_cm(struct qhca_iw_ep *ep)
{
	ep->iw_cm_has = false;
	if (ep->closed)
		kfree(ep);
}

static int conn_cmd(struct qhca_dev *dev, u8 opcode, u32 handle, struct qhca_iw_conn *c,
		    u32 *result0)
{
	return qhca_obj_cmd(dev, opcode, handle, c, sizeof(*c), NULL, 0, result0);
}

static void fill_conn(struct qhca_iw_conn *c, u32 qpn, u32 ird, u32 ord, const void *pd,
		      u16 pd_len)
{
	memset(c, 0, sizeof(*c));
	c->qpn = qpn;
	c->ird = min_t(u32, ird, QHCA_IW_MAX_RD);
	c->ord = min_t(u32, ord, QHCA_IW_MAX_RD);
	c->pd_len = min_t(u16, pd_len, QHCA_IW_PD_MAX);
	if (pd && c->pd_len)
		memcpy(c->private_data, pd, c->pd_len);
}

static int upcall(struct qhca_iw_ep *ep, struct iw_cm_event *ev)
{
	return ep->cm_id ? ep->cm_id->event_handler(ep->cm_id, ev) : -ENOENT;
}

/* ---------------------------------------------------------------- iw_cm's calls */
static int qhca_iw_connect(struct iw_cm_id *cm_id, struct iw_cm_conn_param *p)
{
	struct qhca_dev *dev = to_qdev(cm_id->device);
	struct qhca_iw_conn *c;
	struct qhca_iw_ep *ep;
	u32 handle;
	int err;

	if (p->private_data_len > QHCA_IW_PD_MAX)
		return -EINVAL;
	c = kzalloc(sizeof(*c), GFP_KERNEL);
	if (!c)
		return -ENOMEM;
	fill_conn(c, p->qpn, p->ird, p->ord, p->private_data, p->private_data_len);
	err = addr_from_sockaddr(&cm_id->m_local_addr, c->local_addr, &c->local_port) ?:
	      addr_from_sockaddr(&cm_id->m_remote_addr, c->remote_addr, &c->remote_port) ?:
	      next_hop_mac(dev, &cm_id->m_remote_addr, c->dmac);
	if (err) {
		kfree(c);
		return err;
	}
	/* under the lock until the endpoint is in the table: its CONNECT_REPLY (a fast RST)
	 * must find it */
	mutex_lock(&dev->iw_lock);
	err = conn_cmd(dev, QHCA_CMD_IW_CONNECT, p->qpn, c, &handle);
	kfree(c);
	if (err)
		goto out;
	ep = ep_new(dev, handle);
	if (!ep) {
		struct qhca_iw_conn abort = { .flags = QHCA_IW_ABORT };

		conn_cmd(dev, QHCA_CMD_IW_DISCONNECT, handle, &abort, NULL);
		err = -ENOMEM;
		goto out;
	}
	ep->qpn = p->qpn;
	ep->cm_id = cm_id;
	cm_id->add_ref(cm_id);
	cm_id->provider_data = ep;
out:
	mutex_unlock(&dev->iw_lock);
	return err;
}

static int qhca_iw_accept(struct iw_cm_id *cm_id, struct iw_cm_conn_param *p)
{
	struct qhca_dev *dev = to_qdev(cm_id->device);
	struct qhca_iw_ep *ep = cm_id->provider_data;
	struct iw_cm_event ev = { .event = IW_CM_EVENT_ESTABLISHED };
	struct qhca_iw_conn *c;
	int err;

	if (!ep)
		return -EINVAL;
	c = kzalloc(sizeof(*c), GFP_KERNEL);
	mutex_lock(&dev->iw_lock);
	if (!c || p->private_data_len > QHCA_IW_PD_MAX) {
		err = c ? -EINVAL : -ENOMEM;
	} else if (ep->closed) {
		err = -ECONNRESET;	/* the peer went before the application answered */
	} else {
		fill_conn(c, p->qpn, p->ird, p->ord, p->private_data, p->private_data_len);
		err = conn_cmd(dev, QHCA_CMD_IW_ACCEPT, ep->conn, c, NULL);
	}
	kfree(c);
	/* iw_cm is done with it either way: on success the connection holds it */
	if (err) {
		ep_put_iw_cm(ep);
		mutex_unlock(&dev->iw_lock);
		return err;
	}
	ep->iw_cm_has = false;
	ep->qpn = p->qpn;
	ep->cm_id = cm_id;
	cm_id->add_ref(cm_id);
	ep->connected = true;
	/* The reply is on its way: RDMA mode, as siw tells it at this point. */
	upcall(ep, &ev);
	mutex_unlock(&dev->iw_lock);
	return 0;
}

static int qhca_iw_reject(struct iw_cm_id *cm_id, const void *pdata, u8 pdata_len)
{
	struct qhca_dev *dev = to_qdev(cm_id->device);
	struct qhca_iw_ep *ep = cm_id->provider_data;
	struct qhca_iw_conn *c;
	int err = 0;

	if (!ep)
		return -EINVAL;
	c = kzalloc(sizeof(*c), GFP_KERNEL);
	mutex_lock(&dev->iw_lock);
	if (!c) {
		err = -ENOMEM;
	} else if (!ep->closed) {
		fill_conn(c, 0, 0, 0, pdata, pdata_len);
		err = conn_cmd(dev, QHCA_CMD_IW_REJECT, ep->conn, c, NULL);
	}
	kfree(c);
	ep_put_iw_cm(ep);
	mutex_unlock(&dev->iw_lock);
	return err;
}

static int qhca_iw_create_listen(struct iw_cm_id *cm_id, int backlog)
{
	struct qhca_dev *dev = to_qdev(cm_id->device);
	struct qhca_iw_listen l = {};
	struct qhca_iw_lep *lep;
	int err;

	err = addr_from_sockaddr(&cm_id->m_local_addr, l.addr, &l.port);
	if (err)
		return err;
	/* 0.0.0.0 stays ::ffff:0.0.0.0, every IPv4 address; :: is every address, or every
	 * IPv6 one where rdma_cm says afonly (nfsd listens on both, each afonly) */
	if (cm_id->afonly && !ipv6_addr_v4mapped((struct in6_addr *)l.addr))
		l.flags = QHCA_IW_V6ONLY;
	l.backlog = clamp(backlog, 1, QHCA_IW_MAX_BACKLOG);
	lep = kzalloc(sizeof(*lep), GFP_KERNEL);
	if (!lep)
		return -ENOMEM;
	err = qhca_obj_cmd(dev, QHCA_CMD_IW_LISTEN, 0, &l, sizeof(l), NULL, 0, &lep->handle);
	if (err) {
		kfree(lep);
		return err;
	}
	lep->cm_id = cm_id;
	mutex_lock(&dev->iw_lock);
	err = xa_insert(&dev->iw_leps, lep->handle, lep, GFP_KERNEL);
	mutex_unlock(&dev->iw_lock);
	if (err) {
		qhca_obj_cmd(dev, QHCA_CMD_IW_UNLISTEN, lep->handle, NULL, 0, NULL, 0, NULL);
		kfree(lep);
		return err;
	}
	cm_id->add_ref(cm_id);
	cm_id->provider_data = lep;
	return 0;
}

static int qhca_iw_destroy_listen(struct iw_cm_id *cm_id)
{
	struct qhca_dev *dev = to_qdev(cm_id->device);
	struct qhca_iw_lep *lep = cm_id->provider_data;

	if (!lep)
		return 0;
	/* out of the table first: a request queued after this finds no listener */
	mutex_lock(&dev->iw_lock);
	xa_erase(&dev->iw_leps, lep->handle);
	mutex_unlock(&dev->iw_lock);
	qhca_obj_cmd(dev, QHCA_CMD_IW_UNLISTEN, lep->handle, NULL, 0, NULL, 0, NULL);
	flush_workqueue(dev->iw_wq);	/* none of its requests is being handed over */
	cm_id->provider_data = NULL;
	cm_id->rem_ref(cm_id);
	kfree(lep);
	return 0;
}

static void qhca_iw_add_ref(struct ib_qp *ibqp)
{
	refcount_inc(&to_qqp(ibqp)->iw_refs);
}

static void qhca_iw_rem_ref(struct ib_qp *ibqp)
{
	struct qhca_qp *qp = to_qqp(ibqp);

	if (refcount_dec_and_test(&qp->iw_refs))
		complete(&qp->iw_free);
}

static struct ib_qp *qhca_iw_get_qp(struct ib_device *ibdev, int qpn)
{
	struct qhca_qp *qp = xa_load(&to_qdev(ibdev)->qps, qpn);

	return qp && READ_ONCE(qp->live) ? &qp->ibqp : NULL;
}

/* The QP is being closed by iw_cm (SQD: gracefully, ERROR: abruptly): so is its
 * connection. */
int qhca_iw_qp_close(struct qhca_dev *dev, u32 qpn, bool abort)
{
	struct qhca_iw_conn c = { .flags = abort ? QHCA_IW_ABORT : 0 };
	struct qhca_iw_ep *ep;
	unsigned long i;
	int err = 0;

	mutex_lock(&dev->iw_lock);
	xa_for_each(&dev->iw_eps, i, ep)
		if (ep->qpn == qpn && ep->connected) {
			err = conn_cmd(dev, QHCA_CMD_IW_DISCONNECT, ep->conn, &c, NULL);
			break;
		}
	mutex_unlock(&dev->iw_lock);
	return err;
}

/* ---------------------------------------------------------------- the device's events */
static int status_errno(u64 st)
{
	switch (st) {
	case QHCA_IW_ST_OK:
		return 0;
	case QHCA_IW_ST_REJECTED:
		return -ECONNREFUSED;
	case QHCA_IW_ST_REFUSED:
		return -ECONNREFUSED;
	case QHCA_IW_ST_TIMEOUT:
		return -ETIMEDOUT;
	default:
		return -ECONNRESET;
	}
}

/* What QUERY_CONN told of a connection, into an upcall: @c must outlive it (iw_cm copies
 * the private data before the upcall returns). */
static void ev_from_conn(struct iw_cm_event *ev, struct qhca_iw_conn *c)
{
	sockaddr_from_addr(&ev->local_addr, c->local_addr, c->local_port);
	sockaddr_from_addr(&ev->remote_addr, c->remote_addr, c->remote_port);
	ev->private_data = c->private_data;
	ev->private_data_len = (u8)min_t(u16, c->pd_len, U8_MAX);
	ev->ird = (u8)min_t(u32, c->ird, U8_MAX);
	ev->ord = (u8)min_t(u32, c->ord, U8_MAX);
}

static void connect_request(struct qhca_dev *dev, u32 conn, u32 listener)
{
	struct iw_cm_event ev = { .event = IW_CM_EVENT_CONNECT_REQUEST };
	struct qhca_iw_conn *c = kzalloc(sizeof(*c), GFP_KERNEL);
	struct qhca_iw_lep *lep = xa_load(&dev->iw_leps, listener);
	struct qhca_iw_ep *ep;

	if (!c || !lep ||
	    qhca_obj_cmd(dev, QHCA_CMD_IW_QUERY_CONN, conn, NULL, 0, c, sizeof(*c), NULL) ||
	    !(ep = ep_new(dev, conn))) {
		struct qhca_iw_conn no = {};

		conn_cmd(dev, QHCA_CMD_IW_REJECT, conn, &no, NULL);
		kfree(c);
		return;
	}
	ep->passive = true;
	ep->iw_cm_has = true;
	ev_from_conn(&ev, c);
	ev.provider_data = ep;
	if (lep->cm_id->event_handler(lep->cm_id, &ev)) {
		struct qhca_iw_conn no = {};

		ep->iw_cm_has = false;	/* iw_cm did not take it */
		conn_cmd(dev, QHCA_CMD_IW_REJECT, conn, &no, NULL);
	}
	kfree(c);
}

static void connect_reply(struct qhca_dev *dev, struct qhca_iw_ep *ep, u64 st)
{
	struct qhca_iw_conn abort = { .flags = QHCA_IW_ABORT };
	struct iw_cm_event ev = { .event = IW_CM_EVENT_CONNECT_REPLY, .status = status_errno(st) };
	struct qhca_iw_conn *c = kzalloc(sizeof(*c), GFP_KERNEL);

	if (c && !qhca_obj_cmd(dev, QHCA_CMD_IW_QUERY_CONN, ep->conn, NULL, 0, c, sizeof(*c),
			       NULL)) {
		ev_from_conn(&ev, c);
	} else if (!ev.status) {
		ev.status = -ECONNRESET;	/* and the device's connection goes too */
		conn_cmd(dev, QHCA_CMD_IW_DISCONNECT, ep->conn, &abort, NULL);
	}
	/* iw_cm stays in CONN_SENT if it could not take the event (no memory for the
	 * private data): a CLOSE then would be a BUG in it, so the connection goes */
	if (upcall(ep, &ev) && !ev.status)
		conn_cmd(dev, QHCA_CMD_IW_DISCONNECT, ep->conn, &abort, NULL);
	else
		ep->connected = !ev.status;
	kfree(c);
}

static void iw_work(struct work_struct *w)
{
	struct qhca_iw_work *iw = container_of(w, struct qhca_iw_work, work);
	struct qhca_dev *dev = iw->dev;
	struct qhca_iw_ep *ep;
	struct iw_cm_event ev = {};

	mutex_lock(&dev->iw_lock);
	ep = xa_load(&dev->iw_eps, iw->handle);
	switch (iw->type) {
	case QHCA_EVENT_IW_CONNECT_REQUEST:
		connect_request(dev, iw->handle, (u32)iw->data);
		break;
	case QHCA_EVENT_IW_CONNECT_REPLY:
		if (ep)
			connect_reply(dev, ep, iw->data);
		break;
	case QHCA_EVENT_IW_DISCONNECTED:
		if (ep && ep->connected) {
			ev.event = IW_CM_EVENT_DISCONNECT;
			upcall(ep, &ev);
		}
		break;
	case QHCA_EVENT_IW_CLOSED: {
		struct qhca_iw_conn release = {};

		/* the device keeps the handle until released: QUERY_CONN above still worked */
		conn_cmd(dev, QHCA_CMD_IW_DISCONNECT, iw->handle, &release, NULL);
		if (!ep)
			break;
		if (ep->connected) {
			ev.event = IW_CM_EVENT_CLOSE;
			ev.status = iw->data == QHCA_IW_ST_OK || iw->data == QHCA_IW_ST_LOCAL ? 0 :
				    status_errno(iw->data);
			if (ev.status)	/* a reset or a timeout: say which (the device says why) */
				dev_info_ratelimited(&dev->pdev->dev,
						     "iWARP connection %#x ended: %pe\n",
						     iw->handle, ERR_PTR(ev.status));
			upcall(ep, &ev);
		}
		ep_close(ep);
		break;
	}
	}
	mutex_unlock(&dev->iw_lock);
	kfree(iw);
}

/* From the async EQ (interrupt context): to the workqueue. */
void qhca_iw_event(struct qhca_dev *dev, u8 type, u32 handle, u64 data)
{
	struct qhca_iw_work *w;

	if (!dev->iw_wq)
		return;
	w = kzalloc(sizeof(*w), GFP_ATOMIC);
	if (!w) {
		dev_warn_ratelimited(&dev->pdev->dev, "iWARP event %u lost: no memory\n", type);
		return;
	}
	INIT_WORK(&w->work, iw_work);
	w->dev = dev;
	w->type = type;
	w->handle = handle;
	w->data = data;
	queue_work(dev->iw_wq, &w->work);
}

/* ---------------------------------------------------------------- set-up */
int qhca_iw_init(struct qhca_dev *dev)
{
	xa_init(&dev->iw_eps);
	xa_init(&dev->iw_leps);
	mutex_init(&dev->iw_lock);
	if (!qhca_link_iwarp(dev))
		return 0;
	/* NFS and NVMe-oF over iWARP connect from memory reclaim: a rescuer thread */
	dev->iw_wq = alloc_ordered_workqueue("qhca_iw", WQ_MEM_RECLAIM);
	if (!dev->iw_wq)
		return -ENOMEM;
	dev->ibdev.node_type = RDMA_NODE_RNIC;
	if (dev->netdev)
		strscpy(dev->ibdev.iw_ifname, netdev_name(dev->netdev),
			sizeof(dev->ibdev.iw_ifname));
	ib_set_device_ops(&dev->ibdev, &qhca_iw_dev_ops);
	return 0;
}

void qhca_iw_fini(struct qhca_dev *dev)
{
	struct qhca_iw_ep *ep;
	unsigned long i;

	if (!dev->iw_wq)
		return;
	destroy_workqueue(dev->iw_wq);
	dev->iw_wq = NULL;
	/* iw_cm has destroyed its IDs before the device goes (ib_unregister_device) */
	xa_for_each(&dev->iw_eps, i, ep) {
		ep->iw_cm_has = false;
		ep_close(ep);
	}
	xa_destroy(&dev->iw_eps);
	xa_destroy(&dev->iw_leps);
}

/* A GID of the MAC, as siw's: iWARP addresses by IP, the GID names the port. */
int qhca_iw_query_gid(struct qhca_dev *dev, int index, union ib_gid *gid)
{
	if (index)
		return -EINVAL;
	memset(gid, 0, sizeof(*gid));
	memcpy(gid->raw, dev->port.mac, ETH_ALEN);
	return 0;
}

const struct ib_device_ops qhca_iw_dev_ops = {
	.iw_accept = qhca_iw_accept,
	.iw_add_ref = qhca_iw_add_ref,
	.iw_connect = qhca_iw_connect,
	.iw_create_listen = qhca_iw_create_listen,
	.iw_destroy_listen = qhca_iw_destroy_listen,
	.iw_get_qp = qhca_iw_get_qp,
	.iw_reject = qhca_iw_reject,
	.iw_rem_ref = qhca_iw_rem_ref,
};
