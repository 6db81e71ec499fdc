/* The simulator's `migratepages` (migrate_pages(2) of another process, back and forth) and
 * `move_pages` (move_pages(2) of a range of its first VMA) drivers. The runner resolves
 * `target` (a workload index) into pid=. Each call prints its return value, its duration and
 * the deltas of the TLB-shootdown interrupts and of the migration counters around it. */
#include "nsw.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char vm_a[1 << 16], vm_b[1 << 16];
static const char *deltas[] = {"pgmigrate_success", "pgmigrate_fail", "thp_migration_success",
			       "nr_tlb_remote_flush", "nr_tlb_remote_flush_received", "nr_tlb_local_flush_one",
			       "nr_tlb_local_flush_all", NULL};

static void report(const char *what, long call, long from, long to, long ret, int err, double dt, long tlb)
{
	char buf[2048];
	int n = 0;
	for (int i = 0; deltas[i]; i++) {
		long a = vmstat_get(vm_a, deltas[i]), b = vmstat_get(vm_b, deltas[i]);
		if (a >= 0 && b >= 0)
			n += snprintf(buf + n, sizeof(buf) - n, " %s=%ld", deltas[i], b - a);
	}
	emit("call %s n=%ld from=%ld to=%ld ret=%ld errno=%d t=%.3f dt=%.4f tlb_irq=%ld%s", what, call, from, to, ret, err,
	     run_time_s(), dt, tlb, buf);
}

static void target_pid(struct args *a, long *pid)
{
	if (!arg_has(a, "pid"))
		die("give pid= (the runner resolves target= into it)");
	*pid = arg_long(a, "pid", 0);
	arg_long(a, "target", 0);
}

static long one_call(long pid, long from, long to, long n)
{
	unsigned long f = 1UL << from, t = 1UL << to;
	long tlb0 = tlb_interrupts(NULL, 0, NULL);
	read_file("/proc/vmstat", vm_a, sizeof(vm_a));
	double t0 = now_s();
	long r = sys_migrate_pages((int)pid, MAX_NODES + 1, &f, &t);
	int err = r < 0 ? errno : 0;
	double dt = now_s() - t0;
	read_file("/proc/vmstat", vm_b, sizeof(vm_b));
	long tlb1 = tlb_interrupts(NULL, 0, NULL);
	report("migrate_pages", n, from, to, r, err, dt, tlb1 - tlb0);
	return r;
}

int main_migratepages(int argc, char **argv)
{
	struct args a;
	long pid;
	args_parse(&a, argc, argv);
	target_pid(&a, &pid);
	long from = arg_long(&a, "from", 0), to = arg_long(&a, "to", 1);
	long loops = arg_long(&a, "loops", 1);
	double interval = arg_double(&a, "interval_s", 0);
	arg_double(&a, "start_s", 0);
	args_done(&a, "migratepages");
	if (from == to || from < 0 || to < 0 || from >= nr_nodes() || to >= nr_nodes())
		die("migratepages: from=%ld to=%ld: two different existing nodes", from, to);
	long n = 0;
	for (long i = 0; i < loops; i++) {
		one_call(pid, from, to, n++);
		sleep_s(interval);
		one_call(pid, to, from, n++);
		sleep_s(interval);
	}
	return 0;
}

/* the target's first VMA: its largest private anonymous read-write mapping (the buffer) */
static int find_vma(long pid, unsigned long *start, unsigned long *end)
{
	char path[64];
	static char buf[1 << 20];
	snprintf(path, sizeof(path), "/proc/%ld/maps", pid);
	if (read_file(path, buf, sizeof(buf)) <= 0)
		return -1;
	unsigned long best = 0;
	for (char *line = buf; line && *line;) {
		unsigned long s, e;
		char perms[8] = "", rest[256] = "";
		char *nl = strchr(line, '\n');
		if (nl)
			*nl = 0;
		if (sscanf(line, "%lx-%lx %7s %*s %*s %*s %255[^\n]", &s, &e, perms, rest) >= 3 && !strncmp(perms, "rw-p", 4) &&
		    rest[0] == 0 && e - s > best) {
			best = e - s;
			*start = s;
			*end = e;
		}
		line = nl ? nl + 1 : NULL;
	}
	return best ? 0 : -1;
}

int main_move_pages(int argc, char **argv)
{
	struct args a;
	long pid;
	args_parse(&a, argc, argv);
	target_pid(&a, &pid);
	if (!arg_has(&a, "node"))
		die("move_pages: node is required");
	long node = arg_long(&a, "node", 0);
	long first_mib = arg_long(&a, "first_mib", 0);
	long size_mib = arg_long(&a, "size_mib", 0);
	long loops = arg_long(&a, "loops", 1);
	double interval = arg_double(&a, "interval_s", 0);
	arg_double(&a, "start_s", 0);
	args_done(&a, "move_pages");
	unsigned long s, e;
	if (find_vma(pid, &s, &e))
		die("move_pages: no anonymous mapping in process %ld", pid);
	s += (unsigned long)first_mib << 20;
	if (size_mib > 0 && s + ((unsigned long)size_mib << 20) < e)
		e = s + ((unsigned long)size_mib << 20);
	if (s >= e)
		die("move_pages: first_mib beyond the end of the mapping");
	unsigned long count = (e - s) / 4096;
	void **pages = malloc(count * sizeof(*pages));
	int *nodes = malloc(count * sizeof(int)), *status = malloc(count * sizeof(int));
	for (unsigned long i = 0; i < count; i++) {
		pages[i] = (void *)(s + i * 4096);
		nodes[i] = (int)node;
	}
	for (long i = 0; i < loops; i++) {
		long tlb0 = tlb_interrupts(NULL, 0, NULL);
		read_file("/proc/vmstat", vm_a, sizeof(vm_a));
		double t0 = now_s();
		long r = sys_move_pages((int)pid, count, pages, nodes, status, NSW_MPOL_MF_MOVE);
		int err = r < 0 ? errno : 0;
		double dt = now_s() - t0;
		read_file("/proc/vmstat", vm_b, sizeof(vm_b));
		report("move_pages", i, -1, node, r, err, dt, tlb_interrupts(NULL, 0, NULL) - tlb0);
		sleep_s(interval);
	}
	return 0;
}
