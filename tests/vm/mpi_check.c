// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * qhca-mpi-check: MPI across the guests with every result checked. Built twice, against
 * Debian's Open MPI (qhca-mpi-check.openmpi) and MPICH (qhca-mpi-check.mpich):
 *
 *   mpirun -np 4 --host vm1,vm2,vm3,vm4 qhca-mpi-check.openmpi
 *
 * Collectives (broadcast of 1 MiB, allreduce, alltoall, allgather), a ping-pong of 1 MiB
 * between the first and the last rank with the data checked each way (then its bandwidth,
 * timed without the checking),
 * an 8-byte ping-pong (its latency), and one-sided communication: put into the next
 * rank's window, get from the previous one's, accumulate into rank 0's, each after a
 * fence and checked. Rank 0 prints one line per part and the figures; the exit status is 0
 * only if every check held on every rank.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BIG		(1 << 20)
#define PINGS		20
#define LAT_PINGS	200

static int rank, size, bad;

static uint8_t pat(size_t i, int seed)
{
	return (uint8_t)(seed * 31 + i * 7 + (i >> 10));
}

static void fill(uint8_t *p, size_t n, int seed)
{
	size_t i;

	for (i = 0; i < n; i++)
		p[i] = pat(i, seed);
}

static int same(const uint8_t *p, size_t n, int seed)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (p[i] != pat(i, seed))
			return 0;
	return 1;
}

/* Every rank's verdict on one part; rank 0 prints it. */
static void part(const char *what, int ok, const char *extra)
{
	int all;

	MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
	if (!all)
		bad++;
	if (rank == 0)
		printf("qhca-mpi-check: %-34s %s%s%s\n", what, all ? "ok" : "FAILED",
		       extra ? "  " : "", extra ? extra : "");
	fflush(stdout);
}

static void collectives(uint8_t *buf)
{
	long mine = rank + 1, sum = 0;
	int *to = malloc(sizeof(int) * (size_t)size), *from = malloc(sizeof(int) * (size_t)size);
	int *names = malloc(sizeof(int) * (size_t)size);
	int i, ok;

	if (rank == 0)
		fill(buf, BIG, 5);
	else
		memset(buf, 0, BIG);
	MPI_Bcast(buf, BIG, MPI_BYTE, 0, MPI_COMM_WORLD);
	part("broadcast of 1 MiB", same(buf, BIG, 5), NULL);

	MPI_Allreduce(&mine, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
	part("allreduce (sum)", sum == (long)size * (size + 1) / 2, NULL);

	for (i = 0; i < size; i++)
		to[i] = rank * 1000 + i;
	MPI_Alltoall(to, 1, MPI_INT, from, 1, MPI_INT, MPI_COMM_WORLD);
	for (ok = 1, i = 0; i < size; i++)
		ok = ok && from[i] == i * 1000 + rank;
	part("alltoall", ok, NULL);

	MPI_Allgather(&rank, 1, MPI_INT, names, 1, MPI_INT, MPI_COMM_WORLD);
	for (ok = 1, i = 0; i < size; i++)
		ok = ok && names[i] == i;
	part("allgather", ok, NULL);
	free(to);
	free(from);
	free(names);
}

static void pingpong(uint8_t *buf)
{
	int peer = size - 1, i, ok = 1;
	double t0, t;
	char fig[96] = "";

	if (rank == 0 || rank == peer) {
		for (i = 0; i < PINGS; i++) {
			if (rank == 0) {
				fill(buf, BIG, i);
				MPI_Send(buf, BIG, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
				MPI_Recv(buf, BIG, MPI_BYTE, peer, 2, MPI_COMM_WORLD,
					 MPI_STATUS_IGNORE);
				ok = ok && same(buf, BIG, i + 100);
			} else {
				MPI_Recv(buf, BIG, MPI_BYTE, 0, 1, MPI_COMM_WORLD,
					 MPI_STATUS_IGNORE);
				ok = ok && same(buf, BIG, i);
				fill(buf, BIG, i + 100);
				MPI_Send(buf, BIG, MPI_BYTE, 0, 2, MPI_COMM_WORLD);
			}
		}
		/* the bandwidth without the checking (filling and comparing 1 MiB costs time) */
		t0 = MPI_Wtime();
		for (i = 0; i < PINGS; i++) {
			if (rank == 0) {
				MPI_Send(buf, BIG, MPI_BYTE, peer, 5, MPI_COMM_WORLD);
				MPI_Recv(buf, BIG, MPI_BYTE, peer, 6, MPI_COMM_WORLD,
					 MPI_STATUS_IGNORE);
			} else {
				MPI_Recv(buf, BIG, MPI_BYTE, 0, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
				MPI_Send(buf, BIG, MPI_BYTE, 0, 6, MPI_COMM_WORLD);
			}
		}
		t = MPI_Wtime() - t0;
		snprintf(fig, sizeof(fig), "%.1f MB/s", 2.0 * PINGS * BIG / t / 1e6);
	}
	part("ping-pong of 1 MiB, data checked", ok, rank == 0 ? fig : NULL);

	if (rank == 0 || rank == peer) {
		uint64_t v = 0;

		t0 = MPI_Wtime();
		for (i = 0; i < LAT_PINGS; i++) {
			if (rank == 0) {
				v = (uint64_t)i;
				MPI_Send(&v, 8, MPI_BYTE, peer, 3, MPI_COMM_WORLD);
				MPI_Recv(&v, 8, MPI_BYTE, peer, 4, MPI_COMM_WORLD,
					 MPI_STATUS_IGNORE);
				ok = ok && v == (uint64_t)i + 1;
			} else {
				MPI_Recv(&v, 8, MPI_BYTE, 0, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
				v++;
				MPI_Send(&v, 8, MPI_BYTE, 0, 4, MPI_COMM_WORLD);
			}
		}
		t = MPI_Wtime() - t0;
		snprintf(fig, sizeof(fig), "%.1f us one way", t / LAT_PINGS / 2 * 1e6);
	}
	part("ping-pong of 8 B", ok, rank == 0 ? fig : NULL);
}

static void one_sided(void)
{
	int next = (rank + 1) % size, prev = (rank + size - 1) % size, ok;
	uint8_t *win_buf, *src = malloc(BIG), *dst = malloc(BIG);
	long *acc;
	MPI_Win win, acc_win;

	MPI_Alloc_mem(BIG, MPI_INFO_NULL, &win_buf);
	memset(win_buf, 0, BIG);
	MPI_Win_create(win_buf, BIG, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &win);
	fill(src, BIG, 50 + rank);
	MPI_Win_fence(0, win);
	MPI_Put(src, BIG, MPI_BYTE, next, 0, BIG, MPI_BYTE, win);
	MPI_Win_fence(0, win);
	part("put of 1 MiB into the next rank", same(win_buf, BIG, 50 + prev), NULL);

	MPI_Win_fence(0, win);
	MPI_Get(dst, BIG, MPI_BYTE, prev, 0, BIG, MPI_BYTE, win);
	MPI_Win_fence(0, win);
	/* prev's window holds what prev's own previous rank put there */
	part("get of 1 MiB from the previous rank", same(dst, BIG, 50 + (prev + size - 1) % size),
	     NULL);
	MPI_Win_free(&win);

	MPI_Alloc_mem(sizeof(long) * 16, MPI_INFO_NULL, &acc);
	memset(acc, 0, sizeof(long) * 16);
	MPI_Win_create(acc, sizeof(long) * 16, sizeof(long), MPI_INFO_NULL, MPI_COMM_WORLD,
		       &acc_win);
	{
		long add[16];
		int i;

		for (i = 0; i < 16; i++)
			add[i] = (rank + 1) * (i + 1);
		MPI_Win_fence(0, acc_win);
		MPI_Accumulate(add, 16, MPI_LONG, 0, 0, 16, MPI_LONG, MPI_SUM, acc_win);
		MPI_Win_fence(0, acc_win);
		ok = 1;
		if (rank == 0)
			for (i = 0; i < 16; i++)
				ok = ok && acc[i] == (long)size * (size + 1) / 2 * (i + 1);
	}
	part("accumulate (sum) into rank 0", ok, NULL);
	MPI_Win_free(&acc_win);
	MPI_Free_mem(acc);
	MPI_Free_mem(win_buf);
	free(src);
	free(dst);
}

int main(int argc, char **argv)
{
	char host[64], *hosts;
	uint8_t *buf;
	int i;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	gethostname(host, sizeof(host));
	host[sizeof(host) - 1] = 0;
	hosts = malloc(64 * (size_t)size);
	MPI_Gather(host, 64, MPI_CHAR, hosts, 64, MPI_CHAR, 0, MPI_COMM_WORLD);
	if (rank == 0) {
		printf("qhca-mpi-check: %d ranks on", size);
		for (i = 0; i < size; i++)
			printf("%s%s", i ? "," : " ", hosts + 64 * i);
		printf("\n");
	}
	buf = malloc(BIG);
	collectives(buf);
	if (size > 1)
		pingpong(buf);
	one_sided();
	if (rank == 0)
		printf("qhca-mpi-check: %s\n", bad ? "FAILED" : "all checks passed");
	free(buf);
	free(hosts);
	MPI_Finalize();
	return bad ? 1 : 0;
}
