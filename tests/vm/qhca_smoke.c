// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * qhca-smoke: a user program that opens the qhca device through libibverbs and the qhca
 * provider, checks what the device reports, allocates and frees a PD, and checks that the
 * provider mapped the context's doorbell page. Exit status 0 only if all of it worked.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/verbs.h>

static int fail(const char *what)
{
	fprintf(stderr, "qhca-smoke: FAIL: %s\n", what);
	return 1;
}

/* Does this process map the uverbs device (the doorbell page)? */
static int doorbell_mapped(void)
{
	char line[512];
	FILE *f = fopen("/proc/self/maps", "r");
	int found = 0;

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (strstr(line, "/dev/infiniband/uverbs"))
			found = 1;
	fclose(f);
	return found;
}

int main(int argc, char **argv)
{
	const char *want = argc > 1 ? argv[1] : "qhca_0";
	struct ibv_device **list, *dev = NULL;
	struct ibv_device_attr attr;
	struct ibv_port_attr port;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	int i, n;

	list = ibv_get_device_list(&n);
	if (!list)
		return fail("ibv_get_device_list");
	for (i = 0; i < n; i++)
		if (!strcmp(ibv_get_device_name(list[i]), want))
			dev = list[i];
	if (!dev)
		return fail("device not found");
	ctx = ibv_open_device(dev);
	if (!ctx)
		return fail("ibv_open_device (is the qhca provider installed?)");
	if (ibv_query_device(ctx, &attr))
		return fail("ibv_query_device");
	printf("device %s vendor 0x%x part 0x%x fw %s max_qp %d max_pd %d\n", want,
	       attr.vendor_id, attr.vendor_part_id, attr.fw_ver, attr.max_qp, attr.max_pd);
	if (attr.vendor_id != 0x1af4 || attr.vendor_part_id != 0x10f0)
		return fail("unexpected vendor or part id");
	if (ibv_query_port(ctx, 1, &port))
		return fail("ibv_query_port");
	printf("port 1 state %s link_layer %s active_mtu %d\n", ibv_port_state_str(port.state),
	       port.link_layer == IBV_LINK_LAYER_ETHERNET ? "Ethernet" : "other",
	       128 << port.active_mtu);
	if (port.state != IBV_PORT_ACTIVE || port.link_layer != IBV_LINK_LAYER_ETHERNET)
		return fail("port is not ACTIVE/Ethernet");
	if (!doorbell_mapped())
		return fail("doorbell page not mapped");
	pd = ibv_alloc_pd(ctx);
	if (!pd)
		return fail("ibv_alloc_pd");
	printf("pd allocated (handle %u)\n", pd->handle);
	if (ibv_dealloc_pd(pd))
		return fail("ibv_dealloc_pd");
	if (ibv_close_device(ctx))
		return fail("ibv_close_device");
	ibv_free_device_list(list);
	printf("qhca-smoke: PASS\n");
	return 0;
}
