/* `numaw run SPEC [interval_ms=N] [mem_ms=M] [maps_ms=P] [place_ms=Q] [max_s=S]`: run a scenario's workloads and sample
 * the kernel.
 *
 * SPEC has one workload per line, `KIND key=value ...`, in [[workload]] order (# comments).
 * The runner starts each at its start_s, resolves `target=` (a workload index) into `pid=`,
 * every interval_ms prints /proc/vmstat and the /proc/interrupts TLB line, and every mem_ms
 * (default interval_ms) its threads' NUMA state, and every maps_ms (default mem_ms) the per-node
 * anonymous pages of every workload process (numa_maps). numa_maps walks every page table
 * entry: under TCG it costs 25-50 ms per 256 MiB, a CPU taken from the workload, so it is read
 * less often. Output lines (all "@nsw "):
 *   begin, settings, vmstat phase=begin|end (every counter), v (sampled counters), irq,
 *   nodefree (each node's MemFree), mem, place (where a process's buffers are, per address
 *   range and node, every place_ms, off by default: move_pages(2) of one page in 8), task (a
 *   thread's NUMA-balancing state from /proc/PID/task/TID/sched), start, exit (rusage),
 *   timeout, kprof (booted with profile=2: kprofile.c), end. */
#include "nsw.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_W 32
#define MAX_WARGS 48

static const char *sampled[] = {
	"numa_pte_updates", "numa_huge_pte_updates", "numa_hint_faults", "numa_hint_faults_local",
	"numa_pages_migrated", "pgmigrate_success", "pgmigrate_fail", "numa_hit", "numa_miss", "numa_local",
	"numa_other", "numa_foreign", "numa_interleave", "pgfault", "pgmajfault", "pgalloc_normal", "pgfree",
	"thp_fault_alloc", "thp_fault_fallback", "thp_migration_success", "thp_migration_fail",
	"thp_migration_split", "thp_split_page", "nr_tlb_remote_flush", "nr_tlb_remote_flush_received",
	"nr_tlb_local_flush_all", "nr_tlb_local_flush_one", "pgpromote_success", "pgpromote_candidate",
	"pgdemote_kswapd", "pgdemote_direct", "pgsteal_kswapd", "pgscan_kswapd", NULL};

struct wl {
	char *kind;
	int argc;
	char *argv[MAX_WARGS];
	double start_s;
	long target;
	pid_t pid;
	int started, exited, threads;
	double t_start, t_end;
};

static struct wl ws[MAX_W];
static int nw;
static char vmbuf[1 << 16];

static void parse_spec(const char *path)
{
	static char text[1 << 16];
	if (read_file(path, text, sizeof(text)) < 0)
		die("run: cannot read %s: %s", path, strerror(errno));
	for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
		while (*line == ' ' || *line == '\t')
			line++;
		if (!*line || *line == '#')
			continue;
		if (nw == MAX_W)
			die("run: more than %d workloads", MAX_W);
		struct wl *w = &ws[nw++];
		w->target = -1;
		char *save, *tok = strtok_r(line, " \t", &save);
		w->kind = strdup(tok);
		while ((tok = strtok_r(NULL, " \t", &save))) {
			if (!strncmp(tok, "start_s=", 8))
				w->start_s = atof(tok + 8);
			if (!strncmp(tok, "target=", 7))
				w->target = atol(tok + 7);
			if (w->argc == MAX_WARGS - 2)
				die("run: too many parameters for %s", w->kind);
			w->argv[w->argc++] = strdup(tok);
		}
	}
	for (int i = 0; i < nw; i++)
		if (ws[i].target >= nw || ws[i].target == i)
			die("run: workload %d: target=%ld is not another workload", i, ws[i].target);
}

static void emit_settings(void)
{
	static const char *files[][2] = {
		{"numa_balancing", "/proc/sys/kernel/numa_balancing"},
		{"scan_delay_ms", "/sys/kernel/debug/sched/numa_balancing/scan_delay_ms"},
		{"scan_period_min_ms", "/sys/kernel/debug/sched/numa_balancing/scan_period_min_ms"},
		{"scan_period_max_ms", "/sys/kernel/debug/sched/numa_balancing/scan_period_max_ms"},
		{"scan_size_mb", "/sys/kernel/debug/sched/numa_balancing/scan_size_mb"},
		{"promote_rate_limit_MBps", "/proc/sys/kernel/numa_balancing_promote_rate_limit_MBps"},
		{"hot_threshold_ms", "/sys/kernel/debug/sched/numa_balancing/hot_threshold_ms"},
		{"hot_threshold_ms", "/proc/sys/kernel/numa_balancing_hot_threshold_ms"},
		{"demotion_enabled", "/sys/kernel/mm/numa/demotion_enabled"},
		{"watermark_scale_factor", "/proc/sys/vm/watermark_scale_factor"},
		{"min_free_kbytes", "/proc/sys/vm/min_free_kbytes"},
		{"lru_gen", "/sys/kernel/mm/lru_gen/enabled"}, /* MGLRU: which LRU kswapd demotes from */
		{"thp_enabled", "/sys/kernel/mm/transparent_hugepage/enabled"},
		{"thp_defrag", "/sys/kernel/mm/transparent_hugepage/defrag"},
		{NULL, NULL}};
	char out[2048], v[512];
	int n = 0;
	for (int i = 0; files[i][0]; i++) {
		if (read_file(files[i][1], v, sizeof(v)) <= 0)
			continue;
		v[strcspn(v, "\n")] = 0;
		/* "always [madvise] never" -> "madvise" */
		char *l = strchr(v, '['), *r = l ? strchr(l, ']') : NULL;
		if (l && r) {
			*r = 0;
			memmove(v, l + 1, strlen(l + 1) + 1);
		}
		n += snprintf(out + n, sizeof(out) - n, " %s=%s", files[i][0], v);
	}
	emit("settings%s", out);
}

/* Every named row of /proc/interrupts (LOC, RES, CAL, TLB, ...) and /proc/softirqs (TIMER,
 * SCHED, RCU, ...), per CPU: "irqs phase=P name=N counts=C0,C1,..." (device lines, whose
 * names are numbers, are left out). What interrupts the busy CPUs took over the run. */
static void emit_irq_rows(const char *phase, const char *path)
{
	static char buf[1 << 16];
	if (read_file(path, buf, sizeof(buf)) <= 0)
		return;
	char *save, *line = strtok_r(buf, "\n", &save);
	for (line = line ? strtok_r(NULL, "\n", &save) : NULL; line; line = strtok_r(NULL, "\n", &save)) {
		char *colon = strchr(line, ':');
		if (!colon)
			continue;
		char name[32];
		int k = 0;
		for (char *c = line; c < colon && k < (int)sizeof(name) - 1; c++)
			if (*c != ' ')
				name[k++] = *c;
		name[k] = 0;
		if (!k || (name[0] >= '0' && name[0] <= '9'))
			continue;
		char counts[512];
		int n = 0;
		char *c = colon + 1;
		for (int cpu = 0; cpu < MAX_CPUS && n < (int)sizeof(counts) - 24; cpu++) {
			char *end;
			long v = strtol(c, &end, 10);
			if (end == c)
				break;
			n += snprintf(counts + n, sizeof(counts) - n, "%s%ld", n ? "," : "", v);
			c = end;
		}
		emit("irqs phase=%s name=%s counts=%s", phase, name, n ? counts : "0");
	}
}

static void emit_vmstat_all(const char *phase, double t)
{
	static char out[1 << 15];
	read_file("/proc/vmstat", vmbuf, sizeof(vmbuf));
	int n = 0;
	for (char *s = vmbuf; *s && n < (int)sizeof(out) - 128;) {
		char *nl = strchr(s, '\n');
		char *sp = strchr(s, ' ');
		if (!sp || (nl && sp > nl))
			break;
		n += snprintf(out + n, sizeof(out) - n, " %.*s=%ld", (int)(sp - s), s, atol(sp + 1));
		if (!nl)
			break;
		s = nl + 1;
	}
	emit("vmstat phase=%s t=%.3f%s", phase, t, out);
}

/* each node's free pages held on the per-CPU lists (kB: /proc/zoneinfo's pageset counts),
 * which MemFree does not count but an allocation takes first */
static void emit_node_pcp(double t)
{
	static char buf[1 << 17];
	long kb[MAX_NODES] = {0};
	if (read_file("/proc/zoneinfo", buf, sizeof(buf)) <= 0)
		return;
	int node = -1;
	for (char *s = buf; s && *s;) {
		char *nl = strchr(s, '\n');
		if (!strncmp(s, "Node ", 5))
			node = atoi(s + 5);
		else if (node >= 0 && node < MAX_NODES) {
			char *c = s;
			while (*c == ' ')
				c++;
			if (!strncmp(c, "count:", 6))
				kb[node] += atol(c + 6) * 4;
		}
		s = nl ? nl + 1 : NULL;
	}
	char out[1024];
	int n = 0;
	for (int k = 0; k < nr_nodes() && k < MAX_NODES; k++)
		n += snprintf(out + n, sizeof(out) - n, "%s%ld", k ? "," : "", kb[k]);
	emit("pcp t=%.3f kb=%s", t, out);
}

/* each node's free memory (kB, /sys/devices/system/node/nodeN/meminfo MemFree) */
static void emit_node_free(double t)
{
	char out[1024], path[64], buf[4096];
	int n = 0;
	for (int k = 0; k < nr_nodes() && k < MAX_NODES; k++) {
		snprintf(path, sizeof(path), "/sys/devices/system/node/node%d/meminfo", k);
		long kb = -1;
		char *p;
		if (read_file(path, buf, sizeof(buf)) > 0 && (p = strstr(buf, "MemFree:")))
			kb = atol(p + 8);
		n += snprintf(out + n, sizeof(out) - n, "%s%ld", k ? "," : "", kb);
	}
	emit("nodefree t=%.3f kb=%s", t, out);
	emit_node_pcp(t);
}

static void emit_sample(double t)
{
	char out[4096];
	int n = 0;
	read_file("/proc/vmstat", vmbuf, sizeof(vmbuf));
	for (int i = 0; sampled[i]; i++) {
		long v = vmstat_get(vmbuf, sampled[i]);
		if (v >= 0)
			n += snprintf(out + n, sizeof(out) - n, " %s=%ld", sampled[i], v);
	}
	emit("v t=%.3f%s", t, out);
	emit_node_free(t);
	long per[MAX_CPUS];
	int ncpu = 0;
	if (tlb_interrupts(per, MAX_CPUS, &ncpu) >= 0) {
		n = 0;
		for (int c = 0; c < ncpu && c < MAX_CPUS; c++)
			n += snprintf(out + n, sizeof(out) - n, "%s%ld", c ? "," : "", per[c]);
		emit("irq t=%.3f tlb=%s", t, out);
	}
}

/* shmem: a memfd, a MAP_SHARED|MAP_ANONYMOUS region (/dev/zero) or a SysV segment */
static int shmem_line(const char *line)
{
	return strstr(line, " file=/memfd:") || strstr(line, " file=/dev/zero") || strstr(line, " file=/SYSV");
}

/* anonymous and shmem resident pages per node of one process (its RSS, as the engine's
 * per-mm counts: a page two processes map counts in both), from numa_maps */
static void emit_mem(double t, int w, pid_t pid)
{
	static char buf[1 << 20];
	char path[64];
	long nodes[MAX_NODES] = {0};
	int maxn = -1;
	snprintf(path, sizeof(path), "/proc/%d/numa_maps", pid);
	if (read_file(path, buf, sizeof(buf)) <= 0)
		return;
	for (char *line = buf; line && *line;) {
		char *nl = strchr(line, '\n');
		if (nl)
			*nl = 0;
		if (strstr(line, " anon=") || shmem_line(line)) {
			for (char *p = strstr(line, " N"); p; p = strstr(p + 1, " N")) {
				int node;
				long pages;
				if (sscanf(p, " N%d=%ld", &node, &pages) == 2 && node >= 0 && node < MAX_NODES) {
					nodes[node] += pages;
					if (node > maxn)
						maxn = node;
				}
			}
		}
		line = nl ? nl + 1 : NULL;
	}
	char out[1024];
	int n = 0;
	for (int k = 0; k < nr_nodes() && k < MAX_NODES; k++)
		n += snprintf(out + n, sizeof(out) - n, " n%d=%ld", k, nodes[k]);
	emit("mem t=%.3f w=%d pid=%d%s", t, w, pid, out);
}

static int stat_fields(pid_t pid, pid_t *ppid, int *threads)
{
	char path[64], buf[1024];
	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	if (read_file(path, buf, sizeof(buf)) <= 0)
		return -1;
	char *r = strrchr(buf, ')');
	if (!r)
		return -1;
	/* after ") ": state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime
	 * cutime cstime priority nice num_threads */
	char state;
	long f[17];
	if (sscanf(r + 2, "%c %ld %ld %ld %ld %ld %ld %ld %ld %ld %ld %ld %ld %ld %ld %ld %ld %ld", &state, &f[0], &f[1], &f[2],
		   &f[3], &f[4], &f[5], &f[6], &f[7], &f[8], &f[9], &f[10], &f[11], &f[12], &f[13], &f[14], &f[15], &f[16]) < 18)
		return -1;
	*ppid = (pid_t)f[0];
	*threads = (int)f[16];
	return state == 'Z' ? -1 : 0;
}

/* One thread's NUMA-balancing state, from /proc/PID/task/TID/sched (CONFIG_SCHED_DEBUG) and
 * the CPU it last ran on (/proc/PID/task/TID/stat field 39). */
struct task_numa {
	int tid, cpu, node, pref, grp;
	long seq, migrated, faults, nr_migrations;
	double last_emit;
};

/* a /proc directory entry's number (a pid or tid), or -1 for any other name */
static long dir_number(const struct dirent *e)
{
	char *end;
	long n = strtol(e->d_name, &end, 10);
	return *end || n <= 0 ? -1 : n;
}

#define MAX_TASKS 512
static struct task_numa tasks_seen[MAX_TASKS];
static int ntasks_seen;

static long sched_field(const char *text, const char *name)
{
	const char *p = strstr(text, name);
	if (!p)
		return -1;
	p = strchr(p, ':');
	return p ? atol(p + 1) : -1;
}

/* The CPU thread `tid` last ran on, its state, and its user and system time (s). */
static int task_cpu_of(pid_t pid, int tid, char *state, double *ut, double *st)
{
	char path[96], buf[1024];
	snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", pid, tid);
	if (read_file(path, buf, sizeof(buf)) <= 0)
		return -1;
	char *r = strrchr(buf, ')');
	if (!r || !r[1] || !r[2])
		return -1;
	*state = r[2];
	/* after ") ": field 3 (state) ... 14 utime, 15 stime (clock ticks) ... 39 (processor) */
	char *save, *tok = strtok_r(r + 2, " ", &save);
	for (int i = 3; tok && i < 39; i++) {
		if (i == 14)
			*ut = atol(tok) / (double)sysconf(_SC_CLK_TCK);
		if (i == 15)
			*st = atol(tok) / (double)sysconf(_SC_CLK_TCK);
		tok = strtok_r(NULL, " ", &save);
	}
	return tok ? atoi(tok) : -1;
}

static struct task_numa *task_slot(int tid)
{
	for (int i = 0; i < ntasks_seen; i++)
		if (tasks_seen[i].tid == tid)
			return &tasks_seen[i];
	if (ntasks_seen == MAX_TASKS)
		return NULL;
	struct task_numa *s = &tasks_seen[ntasks_seen++];
	memset(s, 0, sizeof(*s));
	s->tid = tid;
	s->node = s->pref = s->grp = -2;
	s->seq = -2;
	s->last_emit = -1e9;
	return s;
}

/* Every thread of process `pid`: a "task" line when its node, preferred node, group or the
 * mm's scan sequence changed, and at least once a second. */
static void emit_tasks(double t, int w, pid_t pid)
{
	static char buf[1 << 14];
	char path[96];
	snprintf(path, sizeof(path), "/proc/%d/task", pid);
	DIR *d = opendir(path);
	if (!d)
		return;
	struct dirent *e;
	while ((e = readdir(d))) {
		long tid = dir_number(e);
		if (tid <= 0)
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task/%ld/sched", pid, tid);
		if (read_file(path, buf, sizeof(buf)) <= 0)
			continue;
		struct task_numa now = {.tid = (int)tid};
		now.seq = sched_field(buf, "mm->numa_scan_seq");
		now.pref = (int)sched_field(buf, "numa_preferred_nid");
		now.migrated = sched_field(buf, "numa_pages_migrated");
		now.faults = sched_field(buf, "total_numa_faults");
		now.nr_migrations = sched_field(buf, "se.nr_migrations");
		const char *cn = strstr(buf, "current_node=");
		now.node = cn ? atoi(cn + 13) : -1;
		const char *g = strstr(buf, "numa_group_id=");
		now.grp = g ? atoi(g + 14) : -1;
		char state = '?';
		double ut = -1, st = -1;
		now.cpu = task_cpu_of(pid, (int)tid, &state, &ut, &st);
		struct task_numa *s = task_slot((int)tid);
		if (!s)
			continue;
		if (now.node == s->node && now.pref == s->pref && now.grp == s->grp && now.seq == s->seq && t - s->last_emit < 1.0)
			continue;
		emit("task t=%.3f w=%d pid=%d tid=%ld state=%c cpu=%d node=%d pref=%d grp=%d seq=%ld migrated=%ld faults=%ld nr_migrations=%ld "
		     "user_s=%.2f sys_s=%.2f",
		     t, w, pid, tid, state, now.cpu, now.node, now.pref, now.grp, now.seq, now.migrated, now.faults, now.nr_migrations,
		     ut, st);
		now.last_emit = t;
		*s = now;
	}
	closedir(d);
}

/* The process's address space once, a second after it started: each VMA of /proc/PID/maps
 * (range, permissions, name) with its resident pages per node from numa_maps, so that the
 * simulator's process image can be compared with the real one. */
#define MAX_MAPPED 256
static pid_t mapped[MAX_MAPPED];
static int nmapped;

static void emit_maps(double t, int w, pid_t pid)
{
	for (int i = 0; i < nmapped; i++)
		if (mapped[i] == pid)
			return;
	if (nmapped == MAX_MAPPED)
		return;
	mapped[nmapped++] = pid;
	static char maps[1 << 16], nmaps[1 << 17];
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/maps", pid);
	if (read_file(path, maps, sizeof(maps)) <= 0)
		return;
	snprintf(path, sizeof(path), "/proc/%d/numa_maps", pid);
	if (read_file(path, nmaps, sizeof(nmaps)) <= 0)
		nmaps[0] = 0;
	char *nsave = NULL, *nline = strtok_r(nmaps, "\n", &nsave);
	char *save = NULL;
	for (char *line = strtok_r(maps, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		unsigned long a, b;
		char perm[8] = "", name[128] = "";
		if (sscanf(line, "%lx-%lx %7s %*s %*s %*s %127s", &a, &b, perm, name) < 3)
			continue;
		/* numa_maps has one line per VMA, in the same order, starting with the address */
		char nodes[256] = "";
		while (nline && strtoul(nline, NULL, 16) < a)
			nline = strtok_r(NULL, "\n", &nsave);
		if (nline && strtoul(nline, NULL, 16) == a) {
			int n = 0;
			for (char *q = strstr(nline, " N"); q; q = strstr(q + 1, " N")) {
				int node;
				long pages;
				if (sscanf(q, " N%d=%ld", &node, &pages) == 2 && n < (int)sizeof(nodes) - 32)
					n += snprintf(nodes + n, sizeof(nodes) - n, " n%d=%ld", node, pages);
			}
		}
		emit("vma t=%.3f w=%d pid=%d start=%lx kib=%lu perm=%s name=%s%s", t, w, pid, a, (b - a) >> 10, perm, name[0] ? name : "-", nodes);
	}
}

/* Where a process's buffers are: its anonymous read-write VMAs of 2 MiB and more (the
 * workload's buffers; not the heap, stacks or binary), in address order, cut into
 * PLACE_BUCKETS equal ranges, with the node of one page in PLACE_STRIDE (move_pages(2) without
 * nodes) per range, scaled, as the simulator's series.placement. One line: "place t w pid pages nN=c,c,...". */
#define PLACE_BUCKETS 64
#define PLACE_CHUNK 4096
#define PLACE_STRIDE 8 /* one page in 8 (the counts are scaled): move_pages(2) costs ~1.5 us a page under TCG */
static void emit_place(double t, int w, pid_t pid)
{
	static char maps[1 << 16];
	static void *pages[PLACE_CHUNK];
	static int status[PLACE_CHUNK];
	static long count[MAX_NODES][PLACE_BUCKETS];
	unsigned long va[64], vb[64];
	int nv = 0;
	long total = 0;
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/maps", pid);
	if (read_file(path, maps, sizeof(maps)) <= 0)
		return;
	char *save = NULL;
	for (char *line = strtok_r(maps, "\n", &save); line && nv < 64; line = strtok_r(NULL, "\n", &save)) {
		unsigned long a, b;
		char perm[8] = "", name[128] = "";
		if (sscanf(line, "%lx-%lx %7s %*s %*s %*s %127s", &a, &b, perm, name) < 3)
			continue;
		if (name[0] || strncmp(perm, "rw", 2) || b - a < (2UL << 20))
			continue;
		va[nv] = a;
		vb[nv++] = b;
		total += (b - a) >> 12;
	}
	if (!total)
		return;
	memset(count, 0, sizeof(count));
	long base = 0;
	for (int v = 0; v < nv; v++) {
		long np = (vb[v] - va[v]) >> 12;
		for (long i = 0; i < np; i += PLACE_CHUNK * PLACE_STRIDE) {
			long k = 0;
			for (long q = i; q < np && k < PLACE_CHUNK; q += PLACE_STRIDE)
				pages[k++] = (void *)(va[v] + (q << 12));
			if (sys_move_pages(pid, k, pages, NULL, status, 0) < 0)
				return; /* the process exited */
			for (long j = 0; j < k; j++) {
				int node = status[j];
				if (node < 0 || node >= MAX_NODES)
					continue; /* not present (-ENOENT) */
				long b = (base + i + j * PLACE_STRIDE) * PLACE_BUCKETS / total;
				count[node][b] += PLACE_STRIDE;
			}
		}
		base += np;
	}
	static char out[MAX_NODES * PLACE_BUCKETS * 8];
	int n = 0;
	for (int node = 0; node < nr_nodes() && node < MAX_NODES; node++) {
		n += snprintf(out + n, sizeof(out) - n, " n%d=", node);
		for (int b = 0; b < PLACE_BUCKETS; b++)
			n += snprintf(out + n, sizeof(out) - n, "%s%ld", b ? "," : "", count[node][b]);
	}
	emit("place t=%.3f w=%d pid=%d pages=%ld%s", t, w, pid, total, out);
}

/* wall time the runner spends reading numa_maps and the threads' sched files */
static double mem_wall, task_wall;

/* the running workload that `pid` is or descends from (a program's forks fork too), or -1 */
#define MAX_PIDS 8192
static pid_t pids[MAX_PIDS], ppids[MAX_PIDS];
static int pid_threads[MAX_PIDS], npids;

static int workload_of(pid_t pid)
{
	for (int depth = 0; depth < 64 && pid > 1; depth++) {
		for (int i = 0; i < nw; i++)
			if (ws[i].started && !ws[i].exited && ws[i].pid == pid)
				return i;
		int k = 0;
		while (k < npids && pids[k] != pid)
			k++;
		if (k == npids)
			return -1;
		pid = ppids[k];
	}
	return -1;
}

static void emit_all_mem(double t, int maps, int place)
{
	/* every workload process and its descendants (numa01 forks, pmbench processes, a program's) */
	DIR *d = opendir("/proc");
	if (!d)
		return;
	struct dirent *e;
	npids = 0;
	while ((e = readdir(d)) && npids < MAX_PIDS) {
		long pid = dir_number(e);
		if (pid <= 0)
			continue;
		if (stat_fields((pid_t)pid, &ppids[npids], &pid_threads[npids]))
			continue;
		pids[npids++] = (pid_t)pid;
	}
	closedir(d);
	for (int k = 0; k < npids; k++) {
		pid_t pid = pids[k];
		int i = workload_of(pid);
		if (i < 0)
			continue;
		if (ws[i].pid == pid && pid_threads[k] > ws[i].threads)
			ws[i].threads = pid_threads[k];
		double m0 = now_s();
		if (maps)
			emit_mem(t, i, pid);
		if (place)
			emit_place(t, i, pid);
		double m1 = now_s();
		emit_tasks(t, i, pid);
		mem_wall += m1 - m0;
		task_wall += now_s() - m1;
		if (t - ws[i].t_start >= 1.0)
			emit_maps(t, i, pid);
	}
}

static void launch(int i, double t)
{
	struct wl *w = &ws[i];
	char *argv[MAX_WARGS + 4];
	char pidarg[32];
	int k = 0;
	argv[k++] = "numaw";
	argv[k++] = w->kind;
	for (int j = 0; j < w->argc; j++)
		argv[k++] = w->argv[j];
	if (w->target >= 0) {
		snprintf(pidarg, sizeof(pidarg), "pid=%d", ws[w->target].pid);
		argv[k++] = pidarg;
	}
	argv[k] = NULL;
	pid_t pid = fork();
	if (pid < 0)
		die("run: fork: %s", strerror(errno));
	if (pid == 0) {
		char idx[16];
		setpgid(0, 0);
		snprintf(idx, sizeof(idx), "%d", i);
		setenv("NSW_W", idx, 1);
		execv("/proc/self/exe", argv);
		die("run: exec: %s", strerror(errno));
	}
	setpgid(pid, pid);
	w->pid = pid;
	w->started = 1;
	w->t_start = t;
	emit("start w=%d pid=%d kind=%s t=%.3f", i, pid, w->kind, t);
}

static void reap(double t)
{
	for (;;) {
		int st;
		struct rusage ru;
		pid_t pid = wait4(-1, &st, WNOHANG, &ru);
		if (pid <= 0)
			return;
		for (int i = 0; i < nw; i++) {
			if (ws[i].pid != pid || ws[i].exited)
				continue;
			ws[i].exited = 1;
			ws[i].t_end = t;
			emit("exit w=%d pid=%d t=%.3f status=%d signal=%d user_s=%.3f sys_s=%.3f minflt=%ld majflt=%ld threads=%d", i,
			     pid, t, WIFEXITED(st) ? WEXITSTATUS(st) : -1, WIFSIGNALED(st) ? WTERMSIG(st) : 0,
			     ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6, ru.ru_stime.tv_sec + ru.ru_stime.tv_usec * 1e-6,
			     ru.ru_minflt, ru.ru_majflt, ws[i].threads);
		}
	}
}

static void on_sigchld(int sig) { (void)sig; }

int main_run(int argc, char **argv)
{
	if (argc < 1)
		die("usage: numaw run SPEC [interval_ms=N] [max_s=S]");
	const char *spec = argv[0];
	struct args a;
	args_parse(&a, argc - 1, argv + 1);
	long interval_ms = arg_long(&a, "interval_ms", 100);
	long mem_ms = arg_long(&a, "mem_ms", interval_ms);
	long maps_ms = arg_long(&a, "maps_ms", mem_ms);
	long place_ms = arg_long(&a, "place_ms", 0); /* 0: no `place` lines */
	double max_s = arg_double(&a, "max_s", 600);
	args_done(&a, "run");
	unsetenv("NSW_W");
	struct sigaction sa = {.sa_handler = on_sigchld}; /* no SA_RESTART: interrupts nanosleep */
	sigaction(SIGCHLD, &sa, NULL);
	parse_spec(spec);
	if (!nw)
		die("run: %s has no workload", spec);

	struct utsname u;
	uname(&u);
	int cpus = 0;
	for (int n = 0; n < nr_nodes(); n++) {
		cpu_set_t s;
		cpus += node_cpus(n, &s);
	}
	double epoch = now_s();
	char eb[64];
	snprintf(eb, sizeof(eb), "%.9f", epoch);
	setenv("NSW_EPOCH", eb, 1);
	/* epoch: CLOCK_MONOTONIC at t=0, so that trace timestamps (trace_clock mono) line up */
	emit("begin release=%s nodes=%d cpus=%d workloads=%d interval_ms=%ld mem_ms=%ld maps_ms=%ld epoch=%.6f", u.release, nr_nodes(),
	     cpus, nw, interval_ms, mem_ms, maps_ms, epoch);
	emit_settings();
	emit_vmstat_all("begin", 0.0);
	emit_irq_rows("begin", "/proc/interrupts");
	emit_irq_rows("begin", "/proc/softirqs");
	kernel_profile_begin();
	emit_sample(0.0);

	double next = interval_ms / 1000.0, next_mem = mem_ms / 1000.0, next_maps = maps_ms / 1000.0;
	double next_place = place_ms > 0 ? place_ms / 1000.0 : 1e300;
	int timed_out = 0;
	long nsamples = 0;
	double sample_wall = 0;
	for (;;) {
		double t = now_s() - epoch;
		for (int i = 0; i < nw; i++)
			if (!ws[i].started && t >= ws[i].start_s && (ws[i].target < 0 || ws[ws[i].target].started))
				launch(i, t);
		reap(now_s() - epoch);
		int done = 1;
		for (int i = 0; i < nw; i++)
			done &= ws[i].exited;
		if (done)
			break;
		if (t > max_s) {
			emit("timeout t=%.3f max_s=%.1f", t, max_s);
			for (int i = 0; i < nw; i++)
				if (ws[i].started && !ws[i].exited)
					kill(-ws[i].pid, SIGKILL);
			timed_out = 1;
			for (int i = 0; i < nw; i++)
				if (!ws[i].started)
					ws[i].started = ws[i].exited = 1;
		}
		t = now_s() - epoch;
		if (t >= next) {
			double s0 = now_s();
			emit_sample(t);
			if (t >= next_mem) {
				int maps = t >= next_maps, place = t >= next_place;
				emit_all_mem(t, maps, place);
				while (place && next_place <= t)
					next_place += place_ms / 1000.0;
				while (next_mem <= t)
					next_mem += mem_ms / 1000.0;
				while (maps && next_maps <= t)
					next_maps += maps_ms / 1000.0;
			}
			sample_wall += now_s() - s0;
			nsamples++;
			while (next <= t)
				next += interval_ms / 1000.0;
		}
		double wake = next;
		for (int i = 0; i < nw; i++)
			if (!ws[i].started && ws[i].start_s < wake)
				wake = ws[i].start_s;
		/* Sleep to the next sample or start; a child's exit (SIGCHLD) ends the sleep early.
		 * Waking seldom matters: each wake-up preempts a workload thread on a busy machine,
		 * and the scheduler's reaction moves threads that the simulator never sees move. */
		double dt = wake - (now_s() - epoch);
		if (dt > 0) {
			struct timespec ts = {(time_t)dt, (long)((dt - (time_t)dt) * 1e9)};
			nanosleep(&ts, NULL);
		}
	}
	double t_end = 0;
	for (int i = 0; i < nw; i++)
		if (ws[i].t_end > t_end)
			t_end = ws[i].t_end;
	double t = now_s() - epoch;
	emit_sample(t);
	emit_vmstat_all("end", t);
	emit_irq_rows("end", "/proc/interrupts");
	emit_irq_rows("end", "/proc/softirqs");
	kernel_profile_end();
	/* the runner's own cost: its sampling preempts workload threads (docs/realkernel.md) */
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	emit("end t=%.3f elapsed_s=%.3f completed=%d samples=%ld sample_wall_s=%.3f mem_wall_s=%.3f task_wall_s=%.3f "
	     "runner_user_s=%.3f runner_sys_s=%.3f",
	     t, t_end, !timed_out, nsamples, sample_wall, mem_wall, task_wall, ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6,
	     ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6);
	return timed_out ? 3 : 0;
}
