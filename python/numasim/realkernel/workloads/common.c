/* Shared helpers for numaw: arguments, output, time, topology, syscalls, /proc. */
#include "nsw.h"

#include <ctype.h>
#include <pthread.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

void args_parse(struct args *a, int argc, char **argv)
{
	memset(a, 0, sizeof(*a));
	for (int i = 0; i < argc; i++) {
		char *eq = strchr(argv[i], '=');
		if (!eq || eq == argv[i])
			die("argument %s: expected key=value", argv[i]);
		if (a->n == MAX_ARGS)
			die("too many arguments");
		*eq = 0;
		a->key[a->n] = argv[i];
		a->val[a->n] = eq + 1;
		a->n++;
	}
}

static int arg_find(struct args *a, const char *key)
{
	for (int i = 0; i < a->n; i++)
		if (!strcmp(a->key[i], key)) {
			a->used[i] = 1;
			return i;
		}
	return -1;
}

int arg_has(struct args *a, const char *key) { return arg_find(a, key) >= 0; }

const char *arg_str(struct args *a, const char *key, const char *def)
{
	int i = arg_find(a, key);
	return i < 0 ? def : a->val[i];
}

long arg_long(struct args *a, const char *key, long def)
{
	int i = arg_find(a, key);
	if (i < 0)
		return def;
	char *end;
	errno = 0;
	long v = strtol(a->val[i], &end, 10);
	if (errno || *end || end == a->val[i])
		die("%s=%s: not an integer", key, a->val[i]);
	return v;
}

double arg_double(struct args *a, const char *key, double def)
{
	int i = arg_find(a, key);
	if (i < 0)
		return def;
	char *end;
	double v = strtod(a->val[i], &end);
	if (*end || end == a->val[i])
		die("%s=%s: not a number", key, a->val[i]);
	return v;
}

void args_done(struct args *a, const char *kind)
{
	for (int i = 0; i < a->n; i++)
		if (!a->used[i])
			die("%s: unknown parameter %s", kind, a->key[i]);
	if (getenv("NSW_CHECK_ARGS")) { /* tests: the parameters are accepted, do nothing */
		emit("args ok kind=%s n=%d", kind, a->n);
		exit(0);
	}
}

static void vemit(const char *pre, const char *fmt, va_list ap)
{
	char buf[1 << 15];
	int n = snprintf(buf, sizeof(buf), "@nsw %s", pre);
	const char *w = getenv("NSW_W");
	if (w)
		n += snprintf(buf + n, sizeof(buf) - n, "w=%s ", w);
	n += vsnprintf(buf + n, sizeof(buf) - n, fmt, ap);
	if (n > (int)sizeof(buf) - 2)
		n = sizeof(buf) - 2;
	buf[n++] = '\n';
	ssize_t off = 0;
	while (off < n) {
		ssize_t r = write(1, buf + off, n - off);
		if (r <= 0) {
			if (r < 0 && errno == EINTR)
				continue;
			break;
		}
		off += r;
	}
}

void emit(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vemit("", fmt, ap);
	va_end(ap);
}

void die(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vemit("error ", fmt, ap);
	va_end(ap);
	exit(2);
}

double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double epoch = -1;

double run_time_s(void)
{
	if (epoch < 0) {
		const char *e = getenv("NSW_EPOCH");
		epoch = e ? atof(e) : now_s();
	}
	return now_s() - epoch;
}

void sleep_s(double s)
{
	if (s <= 0)
		return;
	struct timespec ts = {(time_t)s, (long)((s - (time_t)s) * 1e9)};
	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

void sleep_until_run_s(double t) { sleep_s(t - run_time_s()); }

int read_file(const char *path, char *buf, size_t cap)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	size_t n = 0;
	for (;;) {
		ssize_t r = read(fd, buf + n, cap - 1 - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		n += r;
		if (n == cap - 1)
			break;
	}
	close(fd);
	buf[n] = 0;
	return (int)n;
}

int nr_nodes(void)
{
	char buf[256];
	if (read_file("/sys/devices/system/node/possible", buf, sizeof(buf)) <= 0)
		return 1;
	/* "0" or "0-3" */
	char *dash = strchr(buf, '-');
	return dash ? atoi(dash + 1) + 1 : 1;
}

static void parse_cpulist(const char *s, cpu_set_t *set)
{
	CPU_ZERO(set);
	while (*s && *s != '\n') {
		char *end;
		long a = strtol(s, &end, 10), b = a;
		if (end == s)
			break;
		if (*end == '-')
			b = strtol(end + 1, &end, 10);
		for (long c = a; c <= b && c < MAX_CPUS; c++)
			CPU_SET(c, set);
		s = *end == ',' ? end + 1 : end;
	}
}

int node_cpus(int node, cpu_set_t *set)
{
	char path[128], buf[4096];
	snprintf(path, sizeof(path), "/sys/devices/system/node/node%d/cpulist", node);
	if (read_file(path, buf, sizeof(buf)) < 0)
		die("node %d does not exist (no %s)", node, path);
	parse_cpulist(buf, set);
	return CPU_COUNT(set);
}

int cpu_list(const cpu_set_t *set, int *out, int max)
{
	int n = 0;
	for (int c = 0; c < MAX_CPUS && n < max; c++)
		if (CPU_ISSET(c, set))
			out[n++] = c;
	return n;
}

void pin_self(const cpu_set_t *set)
{
	if (sched_setaffinity(0, sizeof(*set), set))
		die("sched_setaffinity: %s", strerror(errno));
}

void pin_self_cpu(int cpu)
{
	cpu_set_t s;
	CPU_ZERO(&s);
	CPU_SET(cpu, &s);
	pin_self(&s);
}

void pin_self_nodemask(unsigned long mask)
{
	cpu_set_t all, one;
	CPU_ZERO(&all);
	for (int n = 0; n < MAX_NODES && n < nr_nodes(); n++)
		if (mask & (1UL << n)) {
			node_cpus(n, &one);
			CPU_OR(&all, &all, &one);
		}
	pin_self(&all);
}

void pin_self_node(int node) { pin_self_nodemask(1UL << node); }

long sys_set_mempolicy(int mode, const unsigned long *mask, unsigned long maxnode)
{
	return syscall(SYS_set_mempolicy, mode, mask, maxnode);
}

long sys_mbind(void *addr, unsigned long len, int mode, const unsigned long *mask, unsigned long maxnode, unsigned flags)
{
	return syscall(SYS_mbind, addr, len, mode, mask, maxnode, flags);
}

long sys_migrate_pages(int pid, unsigned long maxnode, const unsigned long *from, const unsigned long *to)
{
	return syscall(SYS_migrate_pages, pid, maxnode, from, to);
}

long sys_move_pages(int pid, unsigned long count, void **pages, const int *nodes, int *status, int flags)
{
	return syscall(SYS_move_pages, pid, count, pages, nodes, status, flags);
}

#define ALIGN_2M (2UL << 20)

void *map_buffer(size_t bytes, const char *madvise_mode)
{
	size_t len = bytes + ALIGN_2M;
	char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		die("mmap %zu bytes: %s", bytes, strerror(errno));
	char *a = (char *)(((uintptr_t)p + ALIGN_2M - 1) & ~(ALIGN_2M - 1));
	if (a > p)
		munmap(p, a - p);
	char *end = a + bytes, *mend = p + len;
	if (mend > end)
		munmap(end, mend - end);
	if (madvise_mode && strcmp(madvise_mode, "none")) {
		int adv;
		if (!strcmp(madvise_mode, "hugepage"))
			adv = MADV_HUGEPAGE;
		else if (!strcmp(madvise_mode, "nohugepage"))
			adv = MADV_NOHUGEPAGE;
		else
			die("madvise=%s: expected none, hugepage or nohugepage", madvise_mode);
		if (madvise(a, bytes, adv))
			die("madvise(%s): %s", madvise_mode, strerror(errno));
	}
	return a;
}

/* a MAP_SHARED buffer: anonymous ("shared") or of a memfd ("shmem"); shmem in the kernel either way */
char *map_shared(size_t size, const char *mapping)
{
	int fd = -1;
	if (!strcmp(mapping, "shmem")) {
		fd = memfd_create("numaw-shmem", 0);
		if (fd < 0)
			die("memfd_create: %s", strerror(errno));
		if (ftruncate(fd, (off_t)size))
			die("ftruncate %zu bytes: %s", size, strerror(errno));
	}
	char *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | (fd < 0 ? MAP_ANONYMOUS : 0), fd, 0);
	if (p == MAP_FAILED)
		die("mmap MAP_SHARED %zu bytes: %s", size, strerror(errno));
	if (fd >= 0)
		close(fd); /* the mapping keeps the file */
	return p;
}

const pthread_attr_t *thread_attr(void)
{
	static pthread_attr_t attr;
	static int ready;
	if (!ready) {
		pthread_attr_init(&attr);
		pthread_attr_setstacksize(&attr, THREAD_STACK);
		ready = 1;
	}
	return &attr;
}

void write_pages(char *p, size_t bytes)
{
	memset(p, 0, bytes);
	__asm__ volatile("" ::"r"(p) : "memory");
}

long vmstat_get(const char *text, const char *name)
{
	size_t len = strlen(name);
	const char *s = text;
	while (s && *s) {
		if (!strncmp(s, name, len) && s[len] == ' ')
			return atol(s + len + 1);
		s = strchr(s, '\n');
		if (s)
			s++;
	}
	return -1;
}

long tlb_interrupts(long *per_cpu, int max, int *ncpu)
{
	return tlb_interrupts_file("/proc/interrupts", per_cpu, max, ncpu);
}

long tlb_interrupts_file(const char *path, long *per_cpu, int max, int *ncpu)
{
	static char buf[1 << 17];
	if (read_file(path, buf, sizeof(buf)) <= 0)
		return -1;
	char *line = buf;
	while (line && *line) {
		char *s = line;
		while (*s == ' ')
			s++; /* 7.x pads the name with a leading space */
		char *nl = strchr(line, '\n');
		if (!strncmp(s, "TLB:", 4)) {
			s += 4;
			long sum = 0;
			int n = 0;
			for (;;) {
				while (*s == ' ')
					s++;
				if (!isdigit((unsigned char)*s))
					break;
				long v = strtol(s, &s, 10);
				if (n < max && per_cpu)
					per_cpu[n] = v;
				n++;
				sum += v;
			}
			if (ncpu)
				*ncpu = n;
			return sum;
		}
		line = nl ? nl + 1 : NULL;
	}
	return -1;
}
