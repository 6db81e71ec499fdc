/* `numaw calibrate`: micro-benchmarks of the kernel paths numasim charges, on this machine
 * (a QEMU guest or a real host), one `@nsw cal NAME=VALUE` line each. numasim.realkernel.calibrate
 * turns them into the constants of a machine profile ([cost], every one `measured`):
 *
 *   stream_I_J    GiB/s of a lone thread on node I rewriting (memset) a buffer on node J
 *   touch_I_J     GiB/s of pages crossed by the same thread loading one byte of every cache line
 *                 and storing one byte per page: the loop of remote_toucher.c and of a program's
 *                 load and rmw ops (bandwidth-bound on a real CPU, as a memset; instruction-bound
 *                 under TCG, where it crosses pages many times faster than a memset)
 *   page_store_I_J  the same thread memsetting the buffer one 4 KiB page per call: a program's
 *                 store op (program.c), where stream_I_J is one memset of the whole buffer
 *                 (autonuma.c's bzero, which glibc may do with non-temporal stores)
 *   zero_fault    ns per page of reading untouched pages: a fault that maps the zero page
 *   first_touch   ns per page to fault in and write a new page (do_anonymous_page + the store)
 *   rep_stosb     ns to clear 4 KiB with `rep stosb` (clear_page_erms, arch/x86/lib/clear_page_64.S)
 *   rep_movsq     ns to copy 4 KiB with `rep movsq` (copy_page, arch/x86/lib/copy_page_64.S)
 *   mprotect_pte  ns per PTE of mprotect(): change_protection(), the loop change_prot_numa runs
 *   move_pages    ns per page of move_pages(2) in calls of 512 pages (migrate_pages() per folio)
 *   move_call     ns of a one-page move_pages(2) call
 *   hint_*        one thread rewriting a local buffer with NUMA balancing on and off: hint
 *                 faults, PTE updates and the extra ns, from which the hint-fault cost follows
 *   flush_ipi_K   ns of an mprotect() pair while K other threads of the mm spin on other CPUs,
 *   ipis_K        and the TLB-shootdown interrupts it caused (/proc/interrupts TLB)
 *   spin_loss     ns a spinning thread loses per mprotect() pair
 *   acct_sys_share  the system share getrusage reports for a loop of timed user and kernel
 *                 parts, against the timed share (timed_sys_share)
 *   clone         ns the creator spends in pthread_create of a numaw thread (its stack's mmap and
 *                 guard mprotect, clone: copy_process, wake_up_new_task), median of 41, each
 *                 on a fresh stack
 *   all_gibps     aggregate GiB/s of one writer per CPU, each on its own node's memory, and
 *   all_cpu_share the CPU time they were charged over their wall time
 *   clock_ns      ns of one clock_gettime(CLOCK_MONOTONIC), as the workloads read the clock,
 *   clock_sys_share and the share of it charged as system time (a system call without a vDSO
 *                 clock, as with HPET); a time-bound stream reads the clock once per 256 pages
 *   clock_busy_K_ns, clock_busy_K_sys_share  the same while K other CPUs spin
 *   clock_loop_K_ns, clock_loop_K_sys_ns  per clock read of a time-bound stream (remote_toucher.c's
 *                 loop, a read per 256 pages) with K other CPUs running the same: the CPU time
 *                 it adds and the system time the guest charges for it; clock_loop_K_page_ns
 *                 the loop's CPU ns per page without the reads
 *   spin_sys_share  the share of a busy CPU's time charged as system time while one thread
 *                 per CPU spins in registers with NUMA balancing off: no kernel work of their
 *                 own, so what the CPU's timer tick and the softirqs it raises take
 *   stream_sys_share  the same while each thread memsets its own mapped 16 MiB (no fault)
 *   stream_nb_sys_share  the same with NUMA balancing on, each buffer bound to its node (not
 *                 scanned): what balancing costs a busy thread whose memory it skips
 *   spin_half_sys_share  spin_sys_share with one thread per node: the other CPUs idle
 *   all_first_touch  ns per page (wall, the writers' mean) of their first pass, all at once:
 *                 first touch under the load of a workload that keeps every CPU busy
 *
 * Sysctls it changes (numa_balancing and the scan knobs) are set back before it returns. */
#include "nsw.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#define PAGE 4096UL

static size_t pages_of(size_t bytes) { return bytes / PAGE; }

static char *node_buffer(size_t bytes, int node)
{
	char *p = map_buffer(bytes, "nohugepage");
	unsigned long mask = 1UL << node;
	if (sys_mbind(p, bytes, NSW_MPOL_BIND, &mask, MAX_NODES, 0) != 0)
		die("calibrate: mbind to node %d: %s", node, strerror(errno));
	return p;
}

static void rep_stosb(void *dst, size_t n)
{
	__asm__ volatile("rep stosb" : "+D"(dst), "+c"(n) : "a"(0) : "memory");
}

static void rep_movsq(void *dst, const void *src, size_t n)
{
	size_t q = n / 8;
	__asm__ volatile("rep movsq" : "+D"(dst), "+S"(src), "+c"(q) : : "memory");
}

static int has_cpu(int node)
{
	cpu_set_t set;
	return node_cpus(node, &set) > 0;
}

static int first_cpu(int node)
{
	cpu_set_t set;
	int cpus[MAX_CPUS];
	if (node_cpus(node, &set) <= 0 || cpu_list(&set, cpus, MAX_CPUS) <= 0)
		die("calibrate: node %d has no CPU", node);
	return cpus[0];
}

/* stream_I_J and, on the way, first_touch (the first pass faults every page in) */
static double zero_fault_ns = 2000;

static void stream(int cpu_node, int mem_node, size_t bytes, int reps, int report_first)
{
	pin_self_cpu(first_cpu(cpu_node));
	char *p = node_buffer(bytes, mem_node);
	if (report_first) { /* read faults of untouched pages map the zero page: entry/exit alone */
		char *z = map_buffer(bytes, "nohugepage");
		double z0 = now_s();
		for (size_t off = 0; off < bytes; off += PAGE)
			(void)((volatile char *)z)[off];
		zero_fault_ns = (now_s() - z0) * 1e9 / pages_of(bytes);
		emit("cal zero_fault=%.1f", zero_fault_ns);
		munmap(z, bytes);
	}
	double t0 = now_s();
	write_pages(p, bytes);
	double t1 = now_s();
	for (int r = 0; r < reps; r++)
		write_pages(p, bytes);
	double t2 = now_s();
	double gibps = (double)bytes * reps / (t2 - t1) / (1UL << 30);
	emit("cal stream_%d_%d=%.4f", cpu_node, mem_node, gibps);
	/* remote_toucher.c's loop, as it is written there (a volatile buffer, one store per page) */
	volatile char *v = p;
	unsigned long sum = 0;
	double t3 = now_s();
	for (int r = 0; r < reps; r++)
		for (size_t pg = 0; pg < bytes; pg += PAGE) {
			for (size_t l = 0; l < PAGE; l += 64)
				sum += v[pg + l];
			v[pg] = (char)sum;
		}
	double t4 = now_s();
	emit("cal touch_%d_%d=%.4f", cpu_node, mem_node, (double)bytes * reps / (t4 - t3) / (1UL << 30));
	for (int r = 0; r < reps; r++)
		for (size_t pg = 0; pg < bytes; pg += PAGE) {
			memset(p + pg, r, PAGE);
			__asm__ volatile("" ::"r"(p + pg) : "memory");
		}
	double t5 = now_s();
	emit("cal page_store_%d_%d=%.4f", cpu_node, mem_node, (double)bytes * reps / (t5 - t4) / (1UL << 30));
	if (report_first)
		emit("cal first_touch=%.1f", (t1 - t0) * 1e9 / pages_of(bytes));
	munmap(p, bytes);
}

static void string_ops(size_t bytes)
{
	pin_self_cpu(first_cpu(0));
	char *a = node_buffer(bytes, 0), *b = node_buffer(bytes, 0);
	write_pages(a, bytes);
	write_pages(b, bytes);
	size_t n = pages_of(bytes);
	double t0 = now_s();
	for (size_t i = 0; i < n; i++)
		rep_stosb(a + i * PAGE, PAGE);
	double t1 = now_s();
	for (size_t i = 0; i < n; i++)
		rep_movsq(b + i * PAGE, a + i * PAGE, PAGE);
	double t2 = now_s();
	emit("cal rep_stosb=%.1f rep_movsq=%.1f", (t1 - t0) * 1e9 / n, (t2 - t1) * 1e9 / n);
	/* change_protection(): every PTE made read-only, then writable again */
	t0 = now_s();
	if (mprotect(a, bytes, PROT_READ) || mprotect(a, bytes, PROT_READ | PROT_WRITE))
		die("calibrate: mprotect: %s", strerror(errno));
	t1 = now_s();
	emit("cal mprotect_pte=%.2f", (t1 - t0) * 1e9 / (2.0 * n));
	munmap(a, bytes);
	munmap(b, bytes);
}

static double move_all(char *p, size_t n, int node, size_t batch)
{
	void **pages = malloc(n * sizeof(void *));
	int *nodes = malloc(n * sizeof(int)), *status = malloc(n * sizeof(int));
	if (!pages || !nodes || !status)
		die("calibrate: out of memory");
	for (size_t i = 0; i < n; i++) {
		pages[i] = p + i * PAGE;
		nodes[i] = node;
	}
	double t0 = now_s();
	for (size_t i = 0; i < n; i += batch) {
		size_t k = n - i < batch ? n - i : batch;
		if (sys_move_pages(0, k, pages + i, nodes + i, status + i, NSW_MPOL_MF_MOVE) < 0)
			die("calibrate: move_pages: %s", strerror(errno));
	}
	double dt = now_s() - t0;
	size_t failed = 0; /* e.g. -ENOENT for a page the kernel had isolated at that moment */
	for (size_t i = 0; i < n; i++)
		failed += status[i] != node;
	if (failed)
		emit("cal move_failed=%zu", failed);
	if (2 * failed > n)
		dt = -1;
	free(pages);
	free(nodes);
	free(status);
	return dt;
}

static void migration(size_t bytes)
{
	pin_self_cpu(first_cpu(0));
	char *p = map_buffer(bytes, "nohugepage");
	pin_self_cpu(first_cpu(0));
	write_pages(p, bytes); /* first touch: node 0 */
	size_t n = pages_of(bytes), few = n < 256 ? n : 256;
	double batched = move_all(p, n, 1, 512);
	double single = move_all(p, few, 0, 1);
	if (batched > 0)
		emit("cal move_pages=%.1f", batched * 1e9 / n);
	if (single > 0)
		emit("cal move_call=%.1f", single * 1e9 / few);
	munmap(p, bytes);
}

/* ---- NUMA hint faults ---- */

static const char *knob_dir(void)
{
	static char buf[8];
	return read_file("/sys/kernel/debug/sched/numa_balancing/scan_delay_ms", buf, sizeof(buf)) > 0
		       ? "/sys/kernel/debug/sched/numa_balancing/"
		       : "/proc/sys/kernel/numa_balancing_";
}

static int put(const char *path, const char *value, char *saved, size_t cap)
{
	if (saved && read_file(path, saved, cap) <= 0)
		return -1;
	FILE *f = fopen(path, "w");
	if (!f)
		return -1;
	int ok = fputs(value, f) >= 0;
	return fclose(f) == 0 && ok ? 0 : -1;
}

static long vm_counter(const char *name)
{
	static char text[1 << 16];
	if (read_file("/proc/vmstat", text, sizeof(text)) <= 0)
		return -1;
	return vmstat_get(text, name);
}

static double thread_sys_s(void)
{
	struct rusage ru;
	getrusage(RUSAGE_THREAD, &ru);
	return ru.ru_stime.tv_sec + ru.ru_stime.tv_usec * 1e-6;
}

/* rewrite `p` for `secs`; the bytes written and the thread's system time */
static double rewrite_for(char *p, size_t bytes, double secs, double *sys)
{
	double s0 = thread_sys_s(), t0 = now_s(), done = 0;
	while (now_s() - t0 < secs) {
		write_pages(p, bytes);
		done += bytes;
	}
	*sys = thread_sys_s() - s0;
	return done;
}

static int cmp_double(const void *x, const void *y)
{
	double a = *(const double *)x, b = *(const double *)y;
	return (a > b) - (a < b);
}

struct touches {
	double passes, median_ns; /* passes made; the median store (with its two clock reads) */
	double *slow;             /* stores slower than the threshold, ascending: a fault, or the host */
	size_t nslow;
};

/* store one byte in every page of `p` for `secs`, timing every store: those slower than
 * `thresh_ns` took a NUMA hint fault, or a timer interrupt, or the host preempted them. */
static struct touches touch_for(char *p, size_t bytes, double secs, double thresh_ns, long h0, long want)
{
	size_t cap = 1 << 20, nslow = 0, nall = 0, acap = 1 << 16;
	double *slow = malloc(cap * sizeof(double)), *all = malloc(acap * sizeof(double));
	if (!slow || !all)
		die("calibrate: out of memory");
	struct touches r = {0, 0, slow, 0};
	double t0 = now_s(), check = t0;
	while (now_s() - t0 < secs) {
		if (want && now_s() - check > 0.25) { /* enough hint faults: stop early */
			check = now_s();
			if (vm_counter("numa_hint_faults") - h0 >= want)
				break;
		}
		for (size_t off = 0; off < bytes; off += PAGE) {
			double a = now_s();
			((volatile char *)p)[off] = (char)r.passes;
			double d = (now_s() - a) * 1e9;
			if (nall < acap)
				all[nall++] = d;
			if (d > thresh_ns && nslow < cap)
				slow[nslow++] = d;
		}
		r.passes++;
	}
	qsort(all, nall, sizeof(double), cmp_double);
	r.median_ns = nall ? all[nall / 2] : 0;
	qsort(slow, nslow, sizeof(double), cmp_double);
	r.nslow = nslow;
	free(all);
	return r;
}

static int sleeper_pipe[2];

static void *sleeper(void *arg)
{
	char c;
	pin_self_cpu(first_cpu(0));
	while (read(sleeper_pipe[0], &c, 1) < 0 && errno == EINTR)
		;
	return NULL;
}

/* A second, sleeping thread: change_pte_range() leaves the PTEs of a single-threaded mm alone
 * when the page is on the node it runs on (mm/mprotect.c, target_node), so a lone thread on
 * its own memory would take no hint fault at all. */
static void hint_child(size_t bytes, double secs, double zero_fault_ns)
{
	pthread_t th;
	if (pipe(sleeper_pipe) || pthread_create(&th, thread_attr(), sleeper, NULL))
		die("calibrate: sleeper thread: %s", strerror(errno));
	pin_self_cpu(first_cpu(0));
	char *p = map_buffer(bytes, "nohugepage");
	write_pages(p, bytes); /* local first touch, default policy: the scanner may scan it */
	struct touches off = touch_for(p, bytes, secs / 4, 1e12, 0, 0);
	/* a hint fault costs at least a fault's entry and exit (the zero-page read fault) */
	double thresh = off.median_ns + 0.5 * zero_fault_ns;
	long h0 = vm_counter("numa_hint_faults"), u0 = vm_counter("numa_pte_updates");
	long m0 = vm_counter("numa_pages_migrated");
	put("/proc/sys/kernel/numa_balancing", "1", NULL, 0);
	/* until two passes' worth of faults, or three times `secs` */
	struct touches on = touch_for(p, bytes, 3 * secs, thresh, h0, 2 * (long)(bytes / PAGE));
	put("/proc/sys/kernel/numa_balancing", "0", NULL, 0);
	long h = vm_counter("numa_hint_faults") - h0, u = vm_counter("numa_pte_updates") - u0;
	long m = vm_counter("numa_pages_migrated") - m0;
	close(sleeper_pipe[1]);
	pthread_join(th, NULL);
	close(sleeper_pipe[0]);
	/* the slowest h stores are the h hint faults (a timer interrupt is cheaper). Their mean is
	 * what faults cost on average; a store the host preempted (beyond 10x their median) is the
	 * host's time, which machine.host_cores models, and is left out. */
	size_t k = h > 0 && (size_t)h < on.nslow ? (size_t)h : on.nslow;
	double *top = on.slow + (on.nslow - k);
	double fault_ns = k ? top[k / 2] : 0, sum = 0;
	size_t kept = 0;
	for (size_t i = 0; i < k; i++)
		if (top[i] <= 10 * fault_ns) {
			sum += top[i];
			kept++;
		}
	emit("cal hint_faults=%ld hint_pte_updates=%ld hint_migrated=%ld hint_store_ns=%.1f hint_slow=%zu "
	     "hint_slow_ns=%.1f hint_mean_ns=%.1f hint_kept=%zu hint_passes=%.0f",
	     h, u, m, off.median_ns, k, fault_ns, kept ? sum / kept : 0, kept, on.passes);
	free(on.slow);
	free(off.slow);
	munmap(p, bytes);
}

/* In a child forked after the scan knobs are set: its new mm starts scanning after
 * scan_delay_ms (0) at the period they give, as a process started then would. */
static void hint_faults(size_t bytes, double secs, double zero_fault_ns)
{
	const char *dir = knob_dir();
	char path[256], old_nb[32], old_min[32], old_delay[32];
	if (put("/proc/sys/kernel/numa_balancing", "0", old_nb, sizeof(old_nb))) {
		emit("cal hint_skipped=1");
		return;
	}
	snprintf(path, sizeof(path), "%sscan_period_min_ms", dir);
	put(path, "100", old_min, sizeof(old_min));
	snprintf(path, sizeof(path), "%sscan_delay_ms", dir);
	put(path, "0", old_delay, sizeof(old_delay));
	pid_t pid = fork();
	if (pid == 0) {
		hint_child(bytes, secs, zero_fault_ns);
		_exit(0);
	}
	int status = 0;
	if (pid < 0 || waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status))
		emit("warn calibrate_hint_child=failed");
	put("/proc/sys/kernel/numa_balancing", old_nb, NULL, 0);
	snprintf(path, sizeof(path), "%sscan_period_min_ms", dir);
	put(path, old_min, NULL, 0);
	snprintf(path, sizeof(path), "%sscan_delay_ms", dir);
	put(path, old_delay, NULL, 0);
}

/* ---- TLB-flush IPIs ---- */

static volatile int spin_stop;
static volatile long spin_count[MAX_CPUS];

struct spinner {
	int cpu, slot;
};

static void *spin(void *arg)
{
	struct spinner *s = arg;
	pin_self_cpu(s->cpu);
	long n = 0;
	while (!spin_stop)
		spin_count[s->slot] = ++n;
	return NULL;
}

/* ns per mprotect() pair of one page while `k` other threads of the mm run on other CPUs */
static long tlb_irqs(void)
{
	static long per[MAX_CPUS];
	int n = 0;
	return tlb_interrupts(per, MAX_CPUS, &n);
}

static double flush_round(char *page, int k, const int *cpus, long iters, double *lost_ns, double *ipis)
{
	pthread_t th[8];
	struct spinner sp[8];
	spin_stop = 0;
	for (int i = 0; i < k; i++) {
		sp[i] = (struct spinner){cpus[i], i};
		spin_count[i] = 0;
		pthread_create(&th[i], thread_attr(), spin, &sp[i]);
	}
	sleep_s(0.05);
	/* the spinner's own rate, then with flushes: what each IPI costs it */
	long c0 = spin_count[0];
	double q0 = now_s();
	sleep_s(0.2);
	double rate = k ? (spin_count[0] - c0) / (now_s() - q0) : 0;
	c0 = k ? spin_count[0] : 0;
	long irq0 = tlb_irqs();
	double t0 = now_s();
	for (long i = 0; i < iters; i++) {
		mprotect(page, PAGE, PROT_READ);
		mprotect(page, PAGE, PROT_READ | PROT_WRITE);
		page[0] = 1;
	}
	double dt = now_s() - t0;
	*ipis = (double)(tlb_irqs() - irq0) / iters;
	if (k && rate > 0) {
		double expect = rate * dt, got = spin_count[0] - c0;
		*lost_ns = (expect - got) / rate * 1e9 / iters;
	}
	spin_stop = 1;
	for (int i = 0; i < k; i++)
		pthread_join(th[i], NULL);
	return dt * 1e9 / iters;
}

static void flush_ipis(long iters)
{
	int n = 0, cpus[8];
	for (int node = 0; node < nr_nodes() && n < 8; node++) {
		cpu_set_t set;
		int list[MAX_CPUS], c = node_cpus(node, &set);
		c = cpu_list(&set, list, MAX_CPUS);
		for (int i = 0; i < c && n < 8; i++)
			if (list[i] != first_cpu(0))
				cpus[n++] = list[i];
	}
	pin_self_cpu(first_cpu(0));
	char *page = map_buffer(PAGE, "nohugepage");
	page[0] = 1;
	double lost = 0, lost2 = 0, i0 = 0, i1 = 0, i2 = 0;
	double r0 = flush_round(page, 0, cpus, iters, &lost, &i0);
	if (n < 1)
		return;
	double r1 = flush_round(page, 1, cpus, iters, &lost, &i1);
	double r2 = n >= 2 ? flush_round(page, 2, cpus, iters, &lost2, &i2) : r1;
	emit("cal flush_ipi_0=%.1f flush_ipi_1=%.1f flush_ipi_2=%.1f spin_loss=%.1f ipis_0=%.3f ipis_1=%.3f ipis_2=%.3f",
	     r0, r1, r2, lost, i0, i1, i2);
	munmap(page, PAGE);
}

/* ---- how the guest accounts system time ---- */

/* Alternate ~1 ms of user-space stores with ~1 ms of page faults (MADV_DONTNEED, then
 * first touches) for `secs`, timing each part: the share of time spent in the kernel as
 * timed, against the share getrusage(2) reports. The kernel samples user/system at ticks
 * (cputime_adjust); under TCG where a tick lands need not follow where the time went. */
static void sys_accounting(double secs)
{
	pin_self_cpu(first_cpu(0));
	size_t bytes = 64 * PAGE;
	char *p = map_buffer(bytes, "nohugepage"), *u = map_buffer(bytes, "nohugepage");
	write_pages(u, bytes);
	struct rusage r0, r1;
	getrusage(RUSAGE_THREAD, &r0);
	double t0 = now_s(), in_kernel = 0, in_user = 0;
	while (now_s() - t0 < secs) {
		double a = now_s();
		while (now_s() - a < 1e-3)
			write_pages(u, PAGE);
		double b = now_s();
		int n = 0;
		while (now_s() - b < 1e-3 && n++ < 1000) {
			madvise(p, bytes, MADV_DONTNEED);
			for (size_t off = 0; off < bytes; off += PAGE)
				p[off] = 1;
		}
		double c = now_s();
		in_user += b - a;
		in_kernel += c - b;
	}
	getrusage(RUSAGE_THREAD, &r1);
	double ut = (r1.ru_utime.tv_sec - r0.ru_utime.tv_sec) + (r1.ru_utime.tv_usec - r0.ru_utime.tv_usec) * 1e-6;
	double st = (r1.ru_stime.tv_sec - r0.ru_stime.tv_sec) + (r1.ru_stime.tv_usec - r0.ru_stime.tv_usec) * 1e-6;
	emit("cal acct_sys_share=%.4f timed_sys_share=%.4f acct_cpu_s=%.3f timed_s=%.3f",
	     ut + st > 0 ? st / (ut + st) : 0, in_kernel / (in_kernel + in_user), ut + st, in_kernel + in_user);
	munmap(p, bytes);
	munmap(u, bytes);
}

/* ---- all CPUs at once ---- */

struct writer {
	int cpu, node;
	size_t bytes;
	double secs, done, cpu_s, first_ns;
};

static double thread_cpu_s(void)
{
	struct rusage ru;
	getrusage(RUSAGE_THREAD, &ru);
	return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 + ru.ru_stime.tv_sec + ru.ru_stime.tv_usec * 1e-6;
}

static pthread_barrier_t all_start, all_ready;

static void *write_loop(void *arg)
{
	struct writer *w = arg;
	pin_self_cpu(w->cpu);
	char *p = node_buffer(w->bytes, w->node);
	pthread_barrier_wait(&all_start); /* the first touches start together */
	double f0 = now_s();
	write_pages(p, w->bytes);
	w->first_ns = (now_s() - f0) * 1e9 / pages_of(w->bytes);
	pthread_barrier_wait(&all_ready); /* every buffer faulted in: only rewrites are timed */
	double sys, c0 = thread_cpu_s();
	w->done = rewrite_for(p, w->bytes, w->secs, &sys);
	w->cpu_s = thread_cpu_s() - c0;
	munmap(p, w->bytes);
	return NULL;
}

/* Every CPU (at most `per_node` of each node) and its node, node by node; how many. */
static int every_cpu(int per_node, int *cpus, int *nodes)
{
	int n = 0;
	for (int node = 0; node < nr_nodes(); node++) {
		cpu_set_t set;
		int list[MAX_CPUS];
		node_cpus(node, &set);
		int c = cpu_list(&set, list, MAX_CPUS);
		for (int i = 0; i < c && i < per_node && n < MAX_CPUS; i++) {
			cpus[n] = list[i];
			nodes[n++] = node;
		}
	}
	return n;
}

static void aggregate(size_t bytes, double secs)
{
	pthread_t th[MAX_CPUS];
	static struct writer w[MAX_CPUS];
	int cpus[MAX_CPUS], nodes[MAX_CPUS];
	int n = every_cpu(MAX_CPUS, cpus, nodes);
	for (int i = 0; i < n; i++)
		w[i] = (struct writer){cpus[i], nodes[i], bytes, secs, 0, 0, 0};
	pthread_barrier_init(&all_start, NULL, n + 1);
	pthread_barrier_init(&all_ready, NULL, n + 1);
	for (int i = 0; i < n; i++)
		pthread_create(&th[i], thread_attr(), write_loop, &w[i]);
	pthread_barrier_wait(&all_start);
	pthread_barrier_wait(&all_ready);
	double t0 = now_s();
	double done = 0, cpu = 0, first = 0;
	for (int i = 0; i < n; i++) {
		pthread_join(th[i], NULL);
		done += w[i].done;
		cpu += w[i].cpu_s;
		first += w[i].first_ns / n;
	}
	double dt = now_s() - t0;
	pthread_barrier_destroy(&all_start);
	pthread_barrier_destroy(&all_ready);
	emit("cal all_first_touch=%.1f", first);
	/* all_cpu_share: the CPU time the writers were charged over their wall time; 1 where
	 * the guest counts the time the host ran other vCPUs as the tasks' runtime */
	emit("cal all_gibps=%.4f all_writers=%d all_s=%.3f all_cpu_share=%.4f", done / dt / (1UL << 30), n, dt,
	     cpu / (n * w[0].secs));
}

/* ---- a busy CPU's own kernel work ---- */

struct ticker {
	int cpu, node;
	size_t bytes; /* 0: spin in registers; else memset a buffer of this size, mapped first */
	int bound;    /* the buffer MPOL_BIND to the thread's node: task_numa_work skips it */
	double secs, user_s, sys_s;
};

static pthread_barrier_t tick_start;

static void *tick_loop(void *arg)
{
	struct ticker *s = arg;
	pin_self_cpu(s->cpu);
	char *p = !s->bytes ? NULL : s->bound ? node_buffer(s->bytes, s->node) : map_buffer(s->bytes, "nohugepage");
	if (p)
		write_pages(p, s->bytes); /* mapped before the timed part: no fault in it */
	pthread_barrier_wait(&tick_start);
	struct rusage r0, r1;
	getrusage(RUSAGE_THREAD, &r0);
	double t0 = now_s();
	volatile unsigned long x = 1;
	/* the clock every few million steps or a whole buffer: a clock read can be a system call
	 * (an HPET guest) */
	while (now_s() - t0 < s->secs) {
		if (p)
			write_pages(p, s->bytes);
		else
			for (int i = 0; i < 4000000; i++)
				x = x * 6364136223846793005UL + 1442695040888963407UL;
	}
	getrusage(RUSAGE_THREAD, &r1);
	if (p)
		munmap(p, s->bytes);
	s->user_s = (r1.ru_utime.tv_sec - r0.ru_utime.tv_sec) + (r1.ru_utime.tv_usec - r0.ru_utime.tv_usec) * 1e-6;
	s->sys_s = (r1.ru_stime.tv_sec - r0.ru_stime.tv_sec) + (r1.ru_stime.tv_usec - r0.ru_stime.tv_usec) * 1e-6;
	return NULL;
}

/* One thread per CPU (at most `per_node` of each node) spins for `secs` (or memsets its own
 * mapped `bytes`) with NUMA balancing off (no scan, no hint fault): the system share
 * getrusage(2) reports is the kernel work a busy CPU does on its own, its timer tick
 * (tick_sched_timer -> update_process_times) and the softirqs it raises; emitted as
 * `what`_sys_share. `balancing_on`: the same with kernel.numa_balancing 1 and each buffer
 * bound to its thread's node, which the scanner skips: what balancing costs a busy thread
 * whose memory it does not scan. */
static void tick_share(const char *what, double secs, size_t bytes, int balancing_on, int per_node)
{
	char old_nb[32];
	int restore = put("/proc/sys/kernel/numa_balancing", balancing_on ? "1" : "0", old_nb, sizeof(old_nb)) == 0;
	pthread_t th[MAX_CPUS];
	static struct ticker s[MAX_CPUS];
	int cpus[MAX_CPUS], nodes[MAX_CPUS];
	int n = every_cpu(per_node, cpus, nodes);
	for (int i = 0; i < n; i++)
		s[i] = (struct ticker){cpus[i], nodes[i], bytes, balancing_on, secs, 0, 0};
	pthread_barrier_init(&tick_start, NULL, n);
	for (int i = 0; i < n; i++)
		pthread_create(&th[i], thread_attr(), tick_loop, &s[i]);
	double user = 0, sys = 0;
	for (int i = 0; i < n; i++) {
		pthread_join(th[i], NULL);
		user += s[i].user_s;
		sys += s[i].sys_s;
	}
	pthread_barrier_destroy(&tick_start);
	if (restore)
		put("/proc/sys/kernel/numa_balancing", old_nb, NULL, 0);
	emit("cal %s_sys_share=%.4f %s_cpu_s=%.3f", what, user + sys > 0 ? sys / (user + sys) : 0, what, user + sys);
}

/* clock_gettime(CLOCK_MONOTONIC) as the workloads call it between pages (numaw's now_s()): its
 * wall time, and the share of it charged as system time (a system call where the vDSO cannot
 * read the clocksource, e.g. HPET), first on an otherwise idle machine (clock_ns), then with
 * K = 1, 2, ... other CPUs spinning (clock_busy_K_ns, clock_busy_K_sys_share): under QEMU an
 * HPET read is an emulated device access, which waits longer when the vCPUs outnumber the
 * host's cores. */
static double clock_calls(int calls, double *sys_share)
{
	struct rusage r0, r1;
	getrusage(RUSAGE_THREAD, &r0);
	double t0 = now_s();
	volatile double x = 0;
	for (int i = 0; i < calls; i++)
		x += now_s();
	double dt = now_s() - t0;
	getrusage(RUSAGE_THREAD, &r1);
	double ut = (r1.ru_utime.tv_sec - r0.ru_utime.tv_sec) + (r1.ru_utime.tv_usec - r0.ru_utime.tv_usec) * 1e-6;
	double st = (r1.ru_stime.tv_sec - r0.ru_stime.tv_sec) + (r1.ru_stime.tv_usec - r0.ru_stime.tv_usec) * 1e-6;
	*sys_share = ut + st > 0 ? st / (ut + st) : 0;
	return dt * 1e9 / (calls + 1);
}

static void clock_read(int calls)
{
	int cpus[MAX_CPUS], nodes[MAX_CPUS], others[MAX_CPUS], n = 0;
	int all = every_cpu(MAX_CPUS, cpus, nodes);
	for (int i = 0; i < all; i++)
		if (cpus[i] != first_cpu(0) && n < 8)
			others[n++] = cpus[i];
	pin_self_cpu(first_cpu(0));
	double share;
	double ns = clock_calls(calls, &share);
	emit("cal clock_ns=%.1f clock_sys_share=%.4f", ns, share);
	for (int k = 1; k <= n; k++) {
		pthread_t th[8];
		struct spinner sp[8];
		spin_stop = 0;
		for (int i = 0; i < k; i++) {
			sp[i] = (struct spinner){others[i], i};
			pthread_create(&th[i], thread_attr(), spin, &sp[i]);
		}
		sleep_s(0.05);
		ns = clock_calls(calls, &share);
		spin_stop = 1;
		for (int i = 0; i < k; i++)
			pthread_join(th[i], NULL);
		emit("cal clock_busy_%d_ns=%.1f clock_busy_%d_sys_share=%.4f", k, ns, k, share);
	}
}

/* A time-bound stream's clock reads as they cost and are accounted in a running workload: K+1
 * threads, one per CPU, each crossing its own 64 MiB with remote_toucher.c's loop, first reading
 * the clock once per MiB (256 pages) as the workloads do, then stopped by a flag instead; per read,
 * the CPU time it adds and the system time the guest charges for it (tick-based: a tick that
 * lands in the read's system call, which under QEMU waits for the emulated HPET). Emitted as
 * clock_loop_K_ns and clock_loop_K_sys_ns, K = 0 .. CPUs - 1 other threads. */
struct clocker {
	int cpu, node, clock;
	double secs, pages, user_s, sys_s;
};

static pthread_barrier_t clock_start;
static volatile int clock_stop;

static void *clock_stream(void *arg)
{
	struct clocker *c = arg;
	pin_self_cpu(c->cpu);
	const size_t bytes = 64UL << 20, block = 1UL << 20; /* as remote_toucher.c's default */
	volatile char *p = node_buffer(bytes, c->node);
	write_pages((char *)p, bytes);
	pthread_barrier_wait(&clock_start);
	struct rusage r0, r1;
	getrusage(RUSAGE_THREAD, &r0);
	double until = now_s() + c->secs;
	unsigned long sum = 0;
	long pages = 0;
	/* remote_toucher.c's loop: the clock once per MiB (256 pages), or the stop flag */
	for (size_t off = 0; c->clock ? now_s() < until : !clock_stop; off = (off + block) % bytes) {
		for (size_t pg = off; pg < off + block; pg += PAGE) {
			for (size_t l = 0; l < PAGE; l += 64)
				sum += p[pg + l];
			p[pg] = (char)sum;
		}
		pages += block / PAGE;
	}
	getrusage(RUSAGE_THREAD, &r1);
	c->pages = pages;
	c->user_s = (r1.ru_utime.tv_sec - r0.ru_utime.tv_sec) + (r1.ru_utime.tv_usec - r0.ru_utime.tv_usec) * 1e-6;
	c->sys_s = (r1.ru_stime.tv_sec - r0.ru_stime.tv_sec) + (r1.ru_stime.tv_usec - r0.ru_stime.tv_usec) * 1e-6;
	munmap((char *)p, bytes);
	return NULL;
}

/* CPU and system ns per page of `n` threads' loops, with or without the clock */
static void clock_round(const int *cpus, const int *nodes, int n, int clock, double secs, double *cpu_ns, double *sys_ns)
{
	pthread_t th[MAX_CPUS];
	struct clocker c[MAX_CPUS];
	clock_stop = 0;
	pthread_barrier_init(&clock_start, NULL, n + 1);
	for (int i = 0; i < n; i++) {
		c[i] = (struct clocker){cpus[i], nodes[i], clock, secs, 0, 0, 0};
		pthread_create(&th[i], thread_attr(), clock_stream, &c[i]);
	}
	pthread_barrier_wait(&clock_start);
	if (!clock) {
		sleep_s(secs);
		clock_stop = 1;
	}
	double pages = 0, cpu = 0, sys = 0;
	for (int i = 0; i < n; i++) {
		pthread_join(th[i], NULL);
		pages += c[i].pages;
		cpu += c[i].user_s + c[i].sys_s;
		sys += c[i].sys_s;
	}
	pthread_barrier_destroy(&clock_start);
	*cpu_ns = pages > 0 ? cpu * 1e9 / pages : 0;
	*sys_ns = pages > 0 ? sys * 1e9 / pages : 0;
}

static void clock_loop(double secs)
{
	int cpus[MAX_CPUS], nodes[MAX_CPUS];
	int n = every_cpu(MAX_CPUS, cpus, nodes);
	for (int k = 1; k <= n; k++) {
		double cpu_a, sys_a, cpu_b, sys_b;
		clock_round(cpus, nodes, k, 1, secs, &cpu_a, &sys_a);
		clock_round(cpus, nodes, k, 0, secs, &cpu_b, &sys_b);
		emit("cal clock_loop_%d_ns=%.1f clock_loop_%d_sys_ns=%.1f clock_loop_%d_page_ns=%.1f", k - 1,
		     (cpu_a - cpu_b) * 256, k - 1, (sys_a - sys_b) * 256, k - 1, cpu_b);
	}
}

static void *clone_returns(void *arg) { return arg; }

/* pthread_create as the workloads call it, each thread on a fresh stack (the threads are joined
 * only after the last create: a joined thread's stack would be reused from glibc's cache); the
 * creator's time until it returns, the median */
static void clone_create(void)
{
	enum { N = 41 };
	double ns[N];
	pthread_t th[N];
	for (int i = 0; i < N; i++) {
		double t = now_s();
		if (pthread_create(&th[i], thread_attr(), clone_returns, NULL))
			die("calibrate: pthread_create failed");
		ns[i] = (now_s() - t) * 1e9;
	}
	for (int i = 0; i < N; i++)
		pthread_join(th[i], NULL);
	qsort(ns, N, sizeof(ns[0]), cmp_double);
	emit("cal clone=%.1f", ns[N / 2]);
}

int main_calibrate(int argc, char **argv)
{
	struct args a;
	args_parse(&a, argc, argv);
	size_t bytes = (size_t)arg_long(&a, "size_mib", 32) << 20;
	int reps = (int)arg_long(&a, "reps", 3);
	double hint_s = arg_double(&a, "hint_s", 4.0);
	long iters = arg_long(&a, "flush_iters", 2000);
	args_done(&a, "calibrate");
	int nodes = nr_nodes();
	if (nodes < 1 || bytes < (1UL << 20) || reps < 1 || hint_s < 0 || iters < 1)
		die("calibrate: bad parameters (size_mib >= 1, reps >= 1, hint_s >= 0, flush_iters >= 1)");
	double t0 = now_s();
	emit("cal nodes=%d size_mib=%zu", nodes, bytes >> 20);
	/* from each of the first two nodes that has a CPU (a memory-only node, as a tiering
	 * scenario's, is only a target) */
	for (int i = 0; i < nodes && i < 2; i++)
		for (int j = 0; j < nodes && j < 2 && has_cpu(i); j++)
			stream(i, j, bytes, reps, i == 0 && j == 0);
	string_ops(bytes);
	if (nodes > 1)
		migration(bytes);
	if (hint_s > 0) /* it switches kernel.numa_balancing: 0 leaves a host's sysctls alone */
		hint_faults(bytes, hint_s, zero_fault_ns);
	else
		emit("cal hint_skipped=1");
	flush_ipis(iters);
	clone_create();
	sys_accounting(2.0);
	aggregate(bytes, 1.0);
	tick_share("spin", 2.0, 0, 0, MAX_CPUS);
	tick_share("spin_half", 2.0, 0, 0, 1);
	tick_share("stream", 2.0, 16UL << 20, 0, MAX_CPUS);
	tick_share("stream_nb", 2.0, 16UL << 20, 1, MAX_CPUS);
	clock_read(20000);
	clock_loop(2.0);
	emit("cal wall_s=%.3f", now_s() - t0);
	return 0;
}
