// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * qhca-ucx-check: UCX's UCP API between two guests with every result checked, over the
 * transports that UCX_TLS names (the distribution's UCX, default settings otherwise):
 *
 *   UCX_TLS=rc qhca-ucx-check                  the server (guest 2)
 *   UCX_TLS=rc qhca-ucx-check 192.168.77.2     the client (guest 1)
 *
 * The two meet over TCP (port 18720) to swap worker addresses, then the client does: a tag
 * send of 1 MiB and the tag reply back, a stream send of 256 KiB, a put of 1 MiB into the
 * server's mapped buffer, a get of 1 MiB from it, ten 64-bit fetch-and-adds and a
 * compare-and-swap on a word of it. Each side checks what it should see and prints it;
 * the exit status is 0 only if every check held.
 */
#include <stdint.h>

#include <ucp/api/ucp.h>

#include "vm_verbs.h"	/* vm_meet_host, vm_xfer: no verbs call */

#define PROG	"qhca-ucx-check"
#define BIG	(1u << 20)
#define STREAM	(256u << 10)
#define PORT	18720

static ucp_worker_h worker;
static int sock, fails;

static void check(int ok, const char *what)
{
	ok = ok != 0;
	printf("%s: %-44s %s\n", PROG, what, ok ? "ok" : "FAILED");
	fflush(stdout);
	fails += !ok;
}

static void die(const char *what, ucs_status_t st)
{
	fprintf(stderr, "%s: %s: %s\n", PROG, what, ucs_status_string(st));
	exit(1);
}

/* A blob of bytes with its length, over the TCP connection. */
static void *swap_blob(const void *mine, size_t len, size_t *peer_len)
{
	uint64_t n = len, m;
	void *p;

	vm_xfer(sock, &n, sizeof(n), 1);
	vm_xfer(sock, (void *)mine, len, 1);
	vm_xfer(sock, &m, sizeof(m), 0);
	p = malloc(m);
	vm_xfer(sock, p, m, 0);
	if (peer_len)
		*peer_len = m;
	return p;
}

/* A byte to or from the peer; waiting for one keeps the worker going, since transports
 * without remote memory access in hardware (ud_verbs, tcp) emulate put, get and atomics
 * with messages that the target must progress. */
static void sync_byte(int out)
{
	char c = 's';
	ssize_t r;

	if (out) {
		vm_xfer(sock, &c, 1, 1);
		return;
	}
	for (;;) {
		r = recv(sock, &c, 1, MSG_DONTWAIT);
		if (r == 1)
			return;
		if (r == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
			fprintf(stderr, "%s: the peer went away\n", PROG);
			exit(2);
		}
		ucp_worker_progress(worker);
	}
}

static ucs_status_t wait_req(void *req)
{
	ucs_status_t st;

	if (req == NULL)
		return UCS_OK;
	if (UCS_PTR_IS_ERR(req))
		return UCS_PTR_STATUS(req);
	do {
		ucp_worker_progress(worker);
		st = ucp_request_check_status(req);
	} while (st == UCS_INPROGRESS);
	ucp_request_free(req);
	return st;
}

static void fill(uint8_t *p, size_t n, int seed)
{
	size_t i;

	for (i = 0; i < n; i++)
		p[i] = (uint8_t)(seed * 29 + i * 11 + (i >> 12));
}

static int same(const uint8_t *p, size_t n, int seed)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (p[i] != (uint8_t)(seed * 29 + i * 11 + (i >> 12)))
			return 0;
	return 1;
}

int main(int argc, char **argv)
{
	ucp_params_t params = { .field_mask = UCP_PARAM_FIELD_FEATURES,
				.features = UCP_FEATURE_TAG | UCP_FEATURE_STREAM |
					    UCP_FEATURE_RMA | UCP_FEATURE_AMO64 };
	ucp_worker_params_t wp = { .field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
				   .thread_mode = UCS_THREAD_MODE_SINGLE };
	ucp_request_param_t rp = { .op_attr_mask = 0 };
	ucp_mem_map_params_t mp;
	ucp_ep_params_t ep_params;
	ucp_context_h ctx;
	ucp_config_t *config;
	ucp_address_t *addr;
	ucp_mem_h memh;
	ucp_rkey_h rkey;
	ucp_ep_h ep;
	size_t addr_len, rkey_len, got;
	void *peer_addr, *rkey_buf, *peer_rkey;
	uint64_t peer_va, va;
	uint8_t *buf, *local;
	int server = argc == 1;
	ucs_status_t st;
	char what[96];
	int i;

	if (argc > 2) {
		fprintf(stderr, "usage: %s [SERVER_IP]   (UCX_TLS names the transports)\n", PROG);
		return 2;
	}
	if ((st = ucp_config_read(NULL, NULL, &config)) != UCS_OK)
		die("ucp_config_read", st);
	if ((st = ucp_init(&params, config, &ctx)) != UCS_OK)
		die("ucp_init", st);
	ucp_config_release(config);
	if ((st = ucp_worker_create(ctx, &wp, &worker)) != UCS_OK)
		die("ucp_worker_create", st);
	if ((st = ucp_worker_get_address(worker, &addr, &addr_len)) != UCS_OK)
		die("ucp_worker_get_address", st);

	buf = aligned_alloc(4096, BIG);
	local = aligned_alloc(4096, BIG);
	memset(buf, 0, BIG);
	mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
	mp.address = buf;
	mp.length = BIG;
	if ((st = ucp_mem_map(ctx, &mp, &memh)) != UCS_OK)
		die("ucp_mem_map", st);
	if ((st = ucp_rkey_pack(ctx, memh, &rkey_buf, &rkey_len)) != UCS_OK)
		die("ucp_rkey_pack", st);

	vm_meet_host(PROG, server, server ? NULL : argv[1], PORT, 10, &sock);
	peer_addr = swap_blob(addr, addr_len, NULL);
	peer_rkey = swap_blob(rkey_buf, rkey_len, NULL);
	va = (uintptr_t)buf;
	vm_xfer(sock, &va, sizeof(va), 1);
	vm_xfer(sock, &peer_va, sizeof(peer_va), 0);
	memset(&ep_params, 0, sizeof(ep_params));
	ep_params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
	ep_params.address = peer_addr;
	if ((st = ucp_ep_create(worker, &ep_params, &ep)) != UCS_OK)
		die("ucp_ep_create", st);
	if ((st = ucp_ep_rkey_unpack(ep, peer_rkey, &rkey)) != UCS_OK)
		die("ucp_ep_rkey_unpack", st);
	printf("%s: %s, transports UCX_TLS=%s\n", PROG, server ? "server" : "client",
	       getenv("UCX_TLS") ? getenv("UCX_TLS") : "(default)");

	/* tag: 1 MiB there, 1 MiB back */
	if (server) {
		st = wait_req(ucp_tag_recv_nbx(worker, local, BIG, 1, ~0ull, &rp));
		check(st == UCS_OK && same(local, BIG, 1), "tag receive of 1 MiB");
		fill(local, BIG, 2);
		st = wait_req(ucp_tag_send_nbx(ep, local, BIG, 2, &rp));
		check(st == UCS_OK, "tag send of 1 MiB back");
	} else {
		fill(local, BIG, 1);
		st = wait_req(ucp_tag_send_nbx(ep, local, BIG, 1, &rp));
		check(st == UCS_OK, "tag send of 1 MiB");
		memset(local, 0, BIG);
		st = wait_req(ucp_tag_recv_nbx(worker, local, BIG, 2, ~0ull, &rp));
		check(st == UCS_OK && same(local, BIG, 2), "tag receive of 1 MiB back");
	}

	/* stream: 256 KiB, received whole */
	if (server) {
		ucp_request_param_t sp = { .op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS,
					   .flags = UCP_STREAM_RECV_FLAG_WAITALL };

		memset(local, 0, STREAM);
		got = 0;
		st = wait_req(ucp_stream_recv_nbx(ep, local, STREAM, &got, &sp));
		check(st == UCS_OK && same(local, STREAM, 3), "stream receive of 256 KiB");
	} else {
		fill(local, STREAM, 3);
		st = wait_req(ucp_stream_send_nbx(ep, local, STREAM, &rp));
		check(st == UCS_OK, "stream send of 256 KiB");
	}

	/* put: the client writes the server's buffer; flushed, then the server looks */
	if (server) {
		sync_byte(0);
		check(same(buf, BIG, 4), "1 MiB put by the client arrived");
	} else {
		fill(local, BIG, 4);
		st = wait_req(ucp_put_nbx(ep, local, BIG, peer_va, rkey, &rp));
		if (st == UCS_OK)
			st = wait_req(ucp_ep_flush_nbx(ep, &rp));
		check(st == UCS_OK, "put of 1 MiB, flushed");
		sync_byte(1);
	}

	/* get: the server fills its buffer, the client reads it */
	if (server) {
		fill(buf, BIG, 6);
		sync_byte(1);
		sync_byte(0);	/* the client has read it */
	} else {
		sync_byte(0);
		memset(local, 0, BIG);
		st = wait_req(ucp_get_nbx(ep, local, BIG, peer_va, rkey, &rp));
		check(st == UCS_OK && same(local, BIG, 6), "get of 1 MiB");
		sync_byte(1);
	}

	/* atomics on the server's first word: 41, ten fetch-and-adds, then 51 swapped */
	if (server) {
		*(volatile uint64_t *)buf = 41;
		sync_byte(1);
		sync_byte(0);
		snprintf(what, sizeof(what), "the word is 1000 after the atomics (%llu)",
			 (unsigned long long)*(volatile uint64_t *)buf);
		check(*(volatile uint64_t *)buf == 1000, what);
	} else {
		ucp_request_param_t ap = { .op_attr_mask = UCP_OP_ATTR_FIELD_DATATYPE |
							   UCP_OP_ATTR_FIELD_REPLY_BUFFER,
					   .datatype = ucp_dt_make_contig(8) };
		uint64_t one = 1, old = 0, cmp = 51, swap = 1000, ok = 1;

		sync_byte(0);
		for (i = 0; i < 10; i++) {
			ap.reply_buffer = &old;
			st = wait_req(ucp_atomic_op_nbx(ep, UCP_ATOMIC_OP_ADD, &one, 1, peer_va,
							 rkey, &ap));
			ok = ok && st == UCS_OK && old == 41 + (uint64_t)i;
		}
		check(ok, "ten 64-bit fetch-and-adds");
		/* CSWAP: the compare value in the buffer; the swap value in the reply buffer,
		 * which then holds the old value */
		old = swap;
		ap.reply_buffer = &old;
		st = wait_req(ucp_atomic_op_nbx(ep, UCP_ATOMIC_OP_CSWAP, &cmp, 1, peer_va, rkey,
						&ap));
		snprintf(what, sizeof(what), "compare-and-swap 51 -> 1000");
		check(st == UCS_OK && old == 51, what);
		st = wait_req(ucp_ep_flush_nbx(ep, &rp));
		sync_byte(1);
	}

	sync_byte(server);
	sync_byte(!server);
	ucp_rkey_destroy(rkey);
	{
		ucp_request_param_t cp = { .op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS,
					   .flags = UCP_EP_CLOSE_FLAG_FORCE };

		wait_req(ucp_ep_close_nbx(ep, &cp));
	}
	ucp_rkey_buffer_release(rkey_buf);
	ucp_mem_unmap(ctx, memh);
	ucp_worker_release_address(worker, addr);
	ucp_worker_destroy(worker);
	ucp_cleanup(ctx);
	printf("%s: %s\n", PROG, fails ? "FAILED" : "all checks passed");
	return fails ? 1 : 0;
}
