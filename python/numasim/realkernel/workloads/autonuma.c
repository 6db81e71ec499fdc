/* autonuma-benchmark's numa01 / numa01_THREAD_ALLOC / numa02 / numa02_SMT and their
 * _HARD_BIND / _INVERSE_BIND variants (workloads.md §1; numa01.c, numa02.c), with the
 * simulator's parameters: threads, size_mib, passes (start_s is the runner's).
 * Buffers are 2 MiB aligned, as the simulator's VMAs. */
#include "nsw.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum test { NUMA01, NUMA01_THREAD_ALLOC, NUMA02, NUMA02_SMT };
enum bind { BIND_NONE, BIND_HARD, BIND_INVERSE };

struct worker {
	pthread_t tid;
	char *buf;
	size_t size, first, len;
	long passes;
	unsigned long cpu_mask, mem_mask; /* node masks; 0 = unbound */
	unsigned long first_touch_mask;   /* numa01: MPOL_BIND for the first bzero */
	int first_touch;
};

static unsigned long range_mask(int a, int b)
{
	unsigned long m = 0;
	for (int n = a; n < b; n++)
		m |= 1UL << n;
	return m;
}

static void *worker(void *arg)
{
	struct worker *w = arg;
	if (w->cpu_mask)
		pin_self_nodemask(w->cpu_mask);
	if (w->mem_mask && sys_set_mempolicy(NSW_MPOL_BIND, &w->mem_mask, MAX_NODES + 1))
		die("set_mempolicy: %s", strerror(errno));
	if (w->first_touch) {
		if (w->first_touch_mask && sys_set_mempolicy(NSW_MPOL_BIND, &w->first_touch_mask, MAX_NODES + 1))
			die("set_mempolicy: %s", strerror(errno));
		write_pages(w->buf, w->size);
		if (w->first_touch_mask)
			sys_set_mempolicy(NSW_MPOL_DEFAULT, NULL, 0);
	}
	for (long i = 0; i < w->passes; i++)
		write_pages(w->buf + w->first, w->len);
	return NULL;
}

static void run_threads(struct worker *ws, int n)
{
	for (int i = 0; i < n; i++)
		if (pthread_create(&ws[i].tid, thread_attr(), worker, &ws[i]))
			die("pthread_create: %s", strerror(errno));
	for (int i = 0; i < n; i++)
		pthread_join(ws[i].tid, NULL);
}

int main_autonuma(const char *kind, int argc, char **argv)
{
	enum test test;
	enum bind bind = BIND_NONE;
	char base[64];
	snprintf(base, sizeof(base), "%s", kind);
	char *suffix;
	if ((suffix = strstr(base, "_HARD_BIND")) && !suffix[10]) {
		bind = BIND_HARD;
		*suffix = 0;
	} else if ((suffix = strstr(base, "_INVERSE_BIND")) && !suffix[13]) {
		bind = BIND_INVERSE;
		*suffix = 0;
	}
	if (!strcmp(base, "numa01"))
		test = NUMA01;
	else if (!strcmp(base, "numa01_THREAD_ALLOC"))
		test = NUMA01_THREAD_ALLOC;
	else if (!strcmp(base, "numa02"))
		test = NUMA02;
	else if (!strcmp(base, "numa02_SMT"))
		test = NUMA02_SMT;
	else
		die("unknown workload kind %s", kind);

	int nodes = nr_nodes();
	int cpus = 0;
	for (int n = 0; n < nodes; n++) {
		cpu_set_t s;
		cpus += node_cpus(n, &s);
	}
	struct args a;
	args_parse(&a, argc, argv);
	long def_threads = test == NUMA01 || test == NUMA01_THREAD_ALLOC ? cpus / 2 : test == NUMA02 ? cpus : cpus / 2;
	long def_size = test == NUMA02 || test == NUMA02_SMT ? 1024 : 3072;
	long def_passes = test == NUMA01 ? 50 : test == NUMA01_THREAD_ALLOC ? 1000 : 800;
	long threads = arg_long(&a, "threads", def_threads > 0 ? def_threads : 1);
	long size_mib = arg_long(&a, "size_mib", def_size);
	long passes = arg_long(&a, "passes", def_passes);
	arg_double(&a, "start_s", 0);
	args_done(&a, kind);
	if (nodes < 2)
		die("%s needs at least 2 nodes", kind);
	if (threads < 1 || size_mib < 1 || passes < 1)
		die("threads, size_mib and passes must be >= 1");

	size_t size = (size_t)size_mib << 20;
	size_t pages = size / 4096;
	struct worker *ws = calloc(threads, sizeof(*ws));
	double t0 = now_s();

	if (test == NUMA01 || test == NUMA01_THREAD_ALLOC) {
		unsigned long global = 1UL << (time(NULL) & 1); /* nodemask_global, shared */
		unsigned long first_half = range_mask(0, nodes / 2), second_half = range_mask(nodes / 2, nodes);
		pid_t child = fork();
		int proc = child == 0 ? 1 : 0;
		char *buf = map_buffer(size, "none");
		unsigned long cpu_mask = 0, mem_mask = 0;
		if (bind == BIND_HARD) {
			cpu_mask = mem_mask = proc == 1 ? first_half : second_half;
		} else if (bind == BIND_INVERSE) {
			cpu_mask = proc == 1 ? first_half : second_half;
			mem_mask = second_half;
		}
		if (cpu_mask)
			pin_self_nodemask(cpu_mask);
		for (long i = 0; i < threads; i++) {
			struct worker *w = &ws[i];
			w->buf = buf;
			w->size = size;
			w->passes = passes;
			w->cpu_mask = cpu_mask;
			w->mem_mask = mem_mask;
			w->first_touch = 1;
			w->first_touch_mask = bind == BIND_NONE ? global : 0;
			if (test == NUMA01_THREAD_ALLOC) {
				size_t slice = pages / threads * 4096;
				w->first = i * slice;
				w->len = slice;
			} else {
				w->first = 0;
				w->len = size;
			}
		}
		run_threads(ws, threads);
		if (child == 0)
			_exit(0);
		int st;
		waitpid(child, &st, 0);
		emit("done kind=%s processes=2 threads=%ld elapsed_s=%.3f", kind, threads, now_s() - t0);
		return 0;
	}

	/* numa02, numa02_SMT */
	char *buf = map_buffer(size, "none");
	size_t chunk = pages / nodes * 4096;
	if (bind == BIND_NONE) {
		write_pages(buf, size); /* BINDMAP's bind() is a no-op: main zeroes it all */
	} else {
		for (int n = 0; n < nodes; n++) {
			size_t len = n == nodes - 1 ? size - chunk * n : chunk;
			unsigned long m = 1UL << n;
			pin_self_node(n);
			if (sys_set_mempolicy(NSW_MPOL_BIND, &m, MAX_NODES + 1))
				die("set_mempolicy: %s", strerror(errno));
			write_pages(buf + chunk * n, len);
		}
		sys_set_mempolicy(NSW_MPOL_DEFAULT, NULL, 0);
	}
	size_t slice = pages / threads * 4096;
	long per_node = threads / nodes > 0 ? threads / nodes : 1;
	for (long i = 0; i < threads; i++) {
		struct worker *w = &ws[i];
		w->buf = buf;
		w->size = size;
		w->first = i * slice;
		w->len = slice;
		w->passes = passes;
		long node = -1;
		if (bind == BIND_HARD)
			node = i / per_node;
		else if (bind == BIND_INVERSE)
			node = (threads - 1 - i) / per_node;
		if (node >= nodes)
			node = nodes - 1;
		if (node >= 0)
			w->cpu_mask = w->mem_mask = 1UL << node;
	}
	run_threads(ws, threads);
	emit("done kind=%s processes=1 threads=%ld elapsed_s=%.3f", kind, threads, now_s() - t0);
	return 0;
}
