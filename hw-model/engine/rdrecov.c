// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * qhca READ and ATOMIC recovery (IBA 9.7.5.1.2, 9.7.5.2): what a READ or ATOMIC in flight
 * knows of its answer (struct qhca_rd_recovery, a send WQE's rd), and from that which
 * responses are lost and which to ask for again. The completer (comp.c) tells it what
 * came; the requester (req.c) asks it what to send.
 */
#include "engine_internal.h"

/* ---------------------------------------------------------------- READ responses */
/*
 * A READ's responses are placed as they come, also out of order up to QHCA_READ_HORIZON
 * past the first one missing (reordering then costs nothing), and only the ones lost are
 * asked for again (tx_read in req.c: a duplicate READ may ask for any part of the
 * original, IBA 9.7.5.1.2; rxe and our responder answer it from its RETH). The responder
 * answers requests in order, each from its first PSN up, so the requester knows which
 * responses can still come: those of the requests in flight (rd.piece) from the last one
 * seen of each on, less a margin for reordering (three, as TCP's duplicate ACK
 * threshold). A response of a later request shows the earlier ones answered in full, and
 * an ACK or an answer past the READ shows its first request answered. What can no longer
 * come is asked for again at once; only a lost last request, or the last responses of
 * it, leave a READ to the timer. An ATOMIC has one answer: an ACK or answer past it
 * without it means it was lost, and it goes again once (rd.retry) until answered.
 */

/* Has READ @sw received its response @psn? */
static bool read_have(const struct qhca_send_wqe *sw, uint32_t psn)
{
	int32_t d = qhca_psn_diff(psn, sw->read_next);

	return d < 0 || (d > 0 && d <= QHCA_READ_HORIZON && ((sw->rd.map >> (d - 1)) & 1));
}

/* Is response @psn of READ @sw to be asked for again: not arrived, lost, and not in a
 * request still being answered? */
static bool read_want(const struct qhca_send_wqe *sw, uint32_t psn)
{
	unsigned j;

	if (read_have(sw, psn) || qhca_psn_diff(psn, sw->rd.lost_to) >= 0)
		return false;
	for (j = 0; j < sw->rd.npieces; j++)
		if (qhca_psn_diff(psn, sw->rd.piece[j].lo) >= 0 &&
		    qhca_psn_diff(psn, sw->rd.piece[j].hi) <= 0)
			return false;
	return true;
}

/* The @n oldest requests of READ @sw were answered: what they did not bring is lost. */
static void read_drop(struct qhca_send_wqe *sw, unsigned n)
{
	unsigned j;

	if (!n)
		return;
	for (j = 0; j < n; j++)
		if (qhca_psn_diff(sw->rd.piece[j].hi + 1, sw->rd.lost_to) > 0)
			sw->rd.lost_to = (sw->rd.piece[j].hi + 1) & 0xffffff;
	memmove(sw->rd.piece, sw->rd.piece + n, (sw->rd.npieces - n) * sizeof(sw->rd.piece[0]));
	sw->rd.npieces -= n;
	sw->rd.first = false;
}

/*
 * Response @psn of READ @sw came: what it shows of its requests in flight. Within one
 * request, a response that three later ones came after is lost (the third highest PSN
 * come so far is where the ones still to come start): a response that overtook many
 * others does not make them lost. The last response of a request ends it.
 */
static void read_seen(struct qhca_send_wqe *sw, uint32_t psn)
{
	uint32_t third;
	int j;

	for (j = sw->rd.npieces - 1; j >= 0; j--)
		if (qhca_psn_diff(psn, sw->rd.piece[j].lo) >= 0 &&
		    qhca_psn_diff(psn, sw->rd.piece[j].hi) <= 0)
			break;
	if (j < 0)
		return;		/* of a request answered already */
	read_drop(sw, (unsigned)j);
	if (psn == sw->rd.piece[0].hi) {
		read_drop(sw, 1);
		return;
	}
	if (qhca_psn_diff(psn, sw->rd.piece[0].h1) > 0) {
		third = sw->rd.piece[0].h2;
		sw->rd.piece[0].h2 = sw->rd.piece[0].h1;
		sw->rd.piece[0].h1 = psn;
	} else if (qhca_psn_diff(psn, sw->rd.piece[0].h2) > 0) {
		third = sw->rd.piece[0].h2;
		sw->rd.piece[0].h2 = psn;
	} else {
		third = psn;
	}
	if (qhca_psn_diff(third, sw->rd.piece[0].lo) > 0) {
		sw->rd.piece[0].lo = third;
		if (qhca_psn_diff(third, sw->rd.lost_to) > 0)
			sw->rd.lost_to = third;
	}
}

bool qhca_read_lost(const struct qhca_send_wqe *sw)
{
	uint32_t psn, end = sw->rd.lost_to;

	if (qhca_psn_diff(end, sw->read_next) > QHCA_READ_HORIZON + 1)
		end = (sw->read_next + QHCA_READ_HORIZON + 1) & 0xffffff;
	for (psn = sw->read_next; qhca_psn_diff(psn, end) < 0; psn = (psn + 1) & 0xffffff)
		if (read_want(sw, psn))
			return true;
	return false;
}

enum qhca_read_resp qhca_read_response(struct qhca_send_wqe *sw, uint32_t psn)
{
	int32_t d;

	sw->rd.seen = true;
	read_seen(sw, psn);
	d = qhca_psn_diff(psn, sw->read_next);
	if (d < 0 || read_have(sw, psn))
		return QHCA_READ_DUP;
	if (d > QHCA_READ_HORIZON)
		return QHCA_READ_FAR;
	return d ? QHCA_READ_AHEAD : QHCA_READ_NEXT;
}

bool qhca_read_placed(struct qhca_send_wqe *sw, uint32_t psn)
{
	int32_t d = qhca_psn_diff(psn, sw->read_next);

	if (d) {
		sw->rd.map |= 1ull << (d - 1);
	} else {
		/* It and the ones after it that came before it. */
		sw->read_next = (sw->read_next + 1) & 0xffffff;
		while (sw->rd.map & 1) {
			sw->rd.map >>= 1;
			sw->read_next = (sw->read_next + 1) & 0xffffff;
		}
		sw->rd.map >>= 1;
	}
	return qhca_psn_diff(sw->read_next, sw->last_psn) > 0;
}

static inline uint32_t min_u32(uint32_t a, uint32_t b)
{
	return a < b ? a : b;
}

/*
 * The lost responses a READ asks for again (tx_read in req.c): each run of them in a
 * request of its own, as far as the horizon of responses placed out of order allows, with
 * at most @cwnd responses asked for again in flight (not the first request's: lost
 * responses are what the window paces here) and at most QHCA_READ_PIECES requests.
 */
bool qhca_read_again(const struct qhca_send_wqe *sw, uint32_t cwnd, uint32_t *psn,
		     uint32_t *n)
{
	uint32_t s, m, end, j, room = cwnd;

	/* responses asked for again and still to come (not the first request's) */
	for (j = sw->rd.first; j < sw->rd.npieces; j++)
		room -= min_u32(room, (uint32_t)qhca_psn_diff(sw->rd.piece[j].hi,
							sw->rd.piece[j].lo) + 1);
	if (!room || sw->rd.npieces == QHCA_READ_PIECES)
		return false;		/* asks again when answers come */
	/* the first lost response not asked for again, and the ones after it */
	end = (sw->read_next + QHCA_READ_HORIZON + 1) & 0xffffff;
	if (qhca_psn_diff(sw->rd.lost_to, end) < 0)
		end = sw->rd.lost_to;
	if (qhca_psn_diff(end, sw->read_next) < 0)
		end = sw->read_next;
	for (s = sw->read_next; s != end && !read_want(sw, s); s = (s + 1) & 0xffffff)
		;
	if (s == end)
		return false;
	for (m = 1; m < room && ((s + m) & 0xffffff) != end &&
		    read_want(sw, (s + m) & 0xffffff); m++)
		;
	*psn = s;
	*n = m;
	return true;
}

void qhca_read_asked(struct qhca_send_wqe *sw, uint32_t psn, uint32_t n, bool whole)
{
	if (whole) {
		sw->rd.npieces = 0;
		sw->rd.first = true;
	}
	sw->rd.piece[sw->rd.npieces].lo = psn;
	sw->rd.piece[sw->rd.npieces].hi = (psn + n - 1) & 0xffffff;
	sw->rd.piece[sw->rd.npieces].h1 = (psn - 1) & 0xffffff;
	sw->rd.piece[sw->rd.npieces].h2 = (psn - 1) & 0xffffff;
	sw->rd.npieces++;
}

/* ---------------------------------------------------------------- READ and ATOMIC */
void qhca_rd_start(struct qhca_send_wqe *sw)
{
	memset(&sw->rd, 0, sizeof(sw->rd));
	sw->rd.lost_to = sw->first_psn;
}

void qhca_rd_reached(struct qhca_send_wqe *sw)
{
	sw->rd.seen = true;
}

void qhca_rd_wake(struct qhca_qp *qp, uint32_t idx)
{
	if ((int32_t)(idx - qp->tx_idx) < 0)
		qp->tx_idx = idx;
}

/* After a timeout every response missing (all of them, and the request, if none came),
 * after a NAK of its PSN or one before it the whole request (the responder does not have
 * it). */
void qhca_rd_rewind(struct qhca_qp *qp, uint32_t idx, bool nak)
{
	struct qhca_send_wqe *sw = qhca_sq_slot(qp, idx);

	if (nak)
		sw->rd.seen = false;
	sw->rd.npieces = 0;
	sw->rd.first = false;
	if (sw->hdr.opcode != QHCA_WR_RDMA_READ) {
		sw->tx_next = 0;
		sw->rd.retry = true;
	} else if (!sw->rd.seen) {
		sw->tx_next = 0;
		sw->rd.lost_to = sw->first_psn;
	} else {
		sw->rd.lost_to = (sw->last_psn + 1) & 0xffffff;
	}
	qhca_rd_wake(qp, idx);
}

/*
 * An answer that shows the responder has answered everything before @x (an ACK of @x - 1,
 * a NAK of @x, a READ response or an ATOMIC acknowledgement at @x): the READs before @x
 * had their first request answered in full, an ATOMIC before @x without its answer lost it.
 */
bool qhca_rd_answered(struct qhca_qp *qp, uint32_t x)
{
	bool lost = false;
	uint32_t i;

	if (!qp->rd_atomic_out)
		return false;
	for (i = qp->sq.ci; i != qp->sq_next; i++) {
		struct qhca_send_wqe *sw = qhca_sq_slot(qp, i);

		if (qhca_psn_diff(sw->first_psn, x) >= 0)
			break;
		if (sw->done || !qhca_wr_is_rd_atomic(sw->hdr.opcode))
			continue;
		sw->rd.seen = true;
		if (sw->hdr.opcode == QHCA_WR_RDMA_READ) {
			if (!sw->rd.first || qhca_psn_diff(x, sw->last_psn) <= 0)
				continue;
			read_drop(sw, 1);
			if (!qhca_read_lost(sw))
				continue;
		} else {
			if (sw->rd.retry || qhca_psn_diff(x, sw->read_next) <= 0)
				continue;
			qhca_rd_rewind(qp, i, false);
		}
		lost = true;
		qhca_rd_wake(qp, i);
	}
	return lost;
}
