/* pmbench-like random single accesses (the simulator's `pmbench` kind; workloads.md §4):
 * processes x threads, a map of map_mib of which set_mib is touched, pattern uniform |
 * normal | normal_ih | pareto | linear, read_ratio % reads, affinity to `nodes`, a warm-up
 * then a timed loop of duration_s. Prints throughput_aps (accesses per second, summed). */
#include "nsw.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

enum pattern { UNIFORM, NORMAL, NORMAL_IH, PARETO, LINEAR };

struct pw {
	pthread_t tid;
	volatile char *buf;
	size_t npages;
	enum pattern pat;
	double shape;
	int read_ratio;
	double duration;
	unsigned long nodes;
	uint64_t rng;
	long accesses;
	double secs;
};

static uint64_t xs(uint64_t *s)
{
	uint64_t x = *s;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *s = x;
}

static double unit(uint64_t *s) { return (xs(s) >> 11) * (1.0 / 9007199254740992.0); }

static size_t next_page(struct pw *w, size_t *lin)
{
	size_t n = w->npages;
	double mean = n / 2.0, sd;
	switch (w->pat) {
	case UNIFORM:
		return xs(&w->rng) % n;
	case LINEAR:
		return (*lin)++ % n;
	case NORMAL:
	case NORMAL_IH: {
		sd = w->pat == NORMAL ? w->shape : n / 12.0;
		double u1 = unit(&w->rng), u2 = unit(&w->rng);
		double z = sqrt(-2.0 * log(u1 + 1e-300)) * cos(2 * M_PI * u2);
		long p = (long)(mean + z * sd);
		if (p < 0)
			p = 0;
		if (p >= (long)n)
			p = n - 1;
		return p;
	}
	case PARETO: {
		double u = unit(&w->rng);
		double x = pow(1.0 - u, -1.0 / w->shape) - 1.0; /* Lomax, scale 1 page */
		return x >= n ? n - 1 : (size_t)x;
	}
	}
	return 0;
}

static void *pthread_main(void *arg)
{
	struct pw *w = arg;
	if (w->nodes)
		pin_self_nodemask(w->nodes);
	size_t lin = 0;
	unsigned long sum = 0;
	size_t warm = w->npages * (w->pat == UNIFORM ? 4 : 1);
	/* stores: a page's first touch is one write fault, as the simulator takes it (a load first
	 * would map the zero page, and the store's copy-on-write then flushes the TLB of every CPU
	 * running the process: IPIs that wait for a vCPU the host is not running) */
	for (size_t i = 0; i < warm; i++)
		w->buf[next_page(w, &lin) * 4096] = (char)i;
	double t0 = now_s(), end = t0 + w->duration;
	long n = 0;
	while (1) {
		for (int k = 0; k < 256; k++) {
			size_t p = next_page(w, &lin) * 4096 + (xs(&w->rng) & 4095 & ~7UL);
			if ((int)(xs(&w->rng) % 100) < w->read_ratio)
				sum += w->buf[p];
			else
				w->buf[p] = (char)sum;
		}
		n += 256;
		if (now_s() >= end)
			break;
	}
	w->secs = now_s() - t0;
	w->accesses = n + (long)(sum & 0);
	return NULL;
}

static unsigned long parse_nodes(const char *s)
{
	unsigned long m = 0;
	while (s && *s) {
		char *end;
		long n = strtol(s, &end, 10);
		if (end == s || n < 0 || n >= MAX_NODES)
			die("nodes=%s: expected a comma-separated list of node numbers", s);
		m |= 1UL << n;
		s = *end == ',' ? end + 1 : end;
		if (*end && *end != ',')
			die("nodes: bad list");
	}
	return m;
}

int main_pmbench(int argc, char **argv)
{
	struct args a;
	args_parse(&a, argc, argv);
	long processes = arg_long(&a, "processes", 1);
	long threads = arg_long(&a, "threads", 1);
	long set_mib = arg_long(&a, "set_mib", 128);
	long map_mib = arg_long(&a, "map_mib", set_mib > 256 ? set_mib : 256);
	const char *pattern = arg_str(&a, "pattern", "uniform");
	double shape = arg_double(&a, "shape", 1.00001);
	long read_ratio = arg_long(&a, "read_ratio", 50);
	const char *nodes = arg_str(&a, "nodes", NULL);
	if (!arg_has(&a, "duration_s"))
		die("pmbench: duration_s is required");
	double duration = arg_double(&a, "duration_s", 0);
	arg_double(&a, "overhead_ns", 30); /* a simulator cost, nothing to do here */
	arg_double(&a, "start_s", 0);
	args_done(&a, "pmbench");
	enum pattern pat;
	if (!strcmp(pattern, "uniform"))
		pat = UNIFORM;
	else if (!strcmp(pattern, "normal"))
		pat = NORMAL;
	else if (!strcmp(pattern, "normal_ih"))
		pat = NORMAL_IH;
	else if (!strcmp(pattern, "pareto"))
		pat = PARETO;
	else if (!strcmp(pattern, "linear"))
		pat = LINEAR;
	else
		die("pattern=%s: expected uniform, normal, normal_ih, pareto or linear", pattern);
	if (set_mib < 1 || map_mib < set_mib || threads < 1 || processes < 1)
		die("pmbench: need 1 <= set_mib <= map_mib, threads >= 1, processes >= 1");
	unsigned long mask = parse_nodes(nodes);

	int pipefd[2];
	if (pipe(pipefd))
		die("pipe: %s", strerror(errno));
	for (long p = 0; p < processes; p++) {
		pid_t pid = fork();
		if (pid < 0)
			die("fork: %s", strerror(errno));
		if (pid)
			continue;
		char *buf = map_buffer((size_t)map_mib << 20, "none");
		struct pw *ws = calloc(threads, sizeof(*ws));
		for (long t = 0; t < threads; t++) {
			ws[t] = (struct pw){.buf = buf, .npages = (size_t)set_mib * 256, .pat = pat, .shape = shape,
					    .read_ratio = (int)read_ratio, .duration = duration, .nodes = mask,
					    .rng = 0x9E3779B97F4A7C15ULL * (p * 1000 + t + 1)};
			if (pthread_create(&ws[t].tid, thread_attr(), pthread_main, &ws[t]))
				die("pthread_create: %s", strerror(errno));
		}
		double aps = 0;
		for (long t = 0; t < threads; t++) {
			pthread_join(ws[t].tid, NULL);
			aps += ws[t].accesses / (ws[t].secs > 0 ? ws[t].secs : 1);
		}
		emit("pmbench process=%ld pid=%d throughput_aps=%.0f", p, getpid(), aps);
		_exit(0);
	}
	close(pipefd[0]);
	close(pipefd[1]);
	int st, bad = 0;
	while (wait(&st) > 0)
		bad |= !WIFEXITED(st) || WEXITSTATUS(st);
	return bad;
}
