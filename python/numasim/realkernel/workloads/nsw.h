/* numaw: the real-kernel counterparts of numasim's workloads, and the runner that drives them.
 *
 * One static multi-call binary: `numaw KIND key=value ...` runs one workload with the same
 * parameters as the simulator's [[workload]] of that kind (docs/scenario.md); `numaw run FILE`
 * runs a scenario's workloads and prints counter snapshots. No libnuma: raw syscalls.
 * Every machine-readable line starts with "@nsw " (parsed by numasim.realkernel.console).
 */
#ifndef NSW_H
#define NSW_H

#define _GNU_SOURCE
#include <sched.h>
#include <stddef.h>
#include <stdint.h>

#define MAX_ARGS 64
#define MAX_NODES 64
#define MAX_CPUS 1024

struct args {
	int n;
	const char *key[MAX_ARGS];
	const char *val[MAX_ARGS];
	int used[MAX_ARGS];
};

/* key=value parsing; unknown keys are an error (checked by args_done) */
void args_parse(struct args *a, int argc, char **argv);
const char *arg_str(struct args *a, const char *key, const char *def);
long arg_long(struct args *a, const char *key, long def);
double arg_double(struct args *a, const char *key, double def);
int arg_has(struct args *a, const char *key);
void args_done(struct args *a, const char *kind);

/* output: one write() per line, prefixed "@nsw " (and "w=N " inside a runner) */
void emit(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/* time */
double now_s(void);             /* CLOCK_MONOTONIC, seconds */
double run_time_s(void);        /* seconds since the runner's epoch (NSW_EPOCH), else since start */
void sleep_s(double s);
void sleep_until_run_s(double t);

/* topology (sysfs) */
int nr_nodes(void);
int node_cpus(int node, cpu_set_t *set); /* returns the CPU count */
int cpu_list(const cpu_set_t *set, int *out, int max);
void pin_self(const cpu_set_t *set);     /* the calling thread */
void pin_self_cpu(int cpu);
void pin_self_node(int node);
void pin_self_nodemask(unsigned long mask);

/* memory policy and migration (raw syscalls) */
#define NSW_MPOL_DEFAULT 0
#define NSW_MPOL_PREFERRED 1
#define NSW_MPOL_BIND 2
#define NSW_MPOL_MF_MOVE (1 << 1)
long sys_set_mempolicy(int mode, const unsigned long *mask, unsigned long maxnode);
long sys_mbind(void *addr, unsigned long len, int mode, const unsigned long *mask, unsigned long maxnode, unsigned flags);
long sys_migrate_pages(int pid, unsigned long maxnode, const unsigned long *from, const unsigned long *to);
long sys_move_pages(int pid, unsigned long count, void **pages, const int *nodes, int *status, int flags);

/* a 2 MiB-aligned anonymous mapping (the simulator's VMAs are aligned), with madvise mode
 * "none" | "hugepage" | "nohugepage" */
void *map_buffer(size_t bytes, const char *madvise_mode);
void write_pages(char *p, size_t bytes); /* bzero-like: every byte */
/* a MAP_SHARED mapping, mapping "shared" (MAP_ANONYMOUS) or "shmem" (a memfd) */
char *map_shared(size_t size, const char *mapping);

/* Worker threads get 256 KiB stacks: glibc's 8 MiB default is THP-eligible, and a stack
 * backed by a huge page adds 512 pages to scan and migrate that the simulator's processes
 * (buffers only) do not have. */
#define THREAD_STACK (256 << 10)
#include <pthread.h>
const pthread_attr_t *thread_attr(void);

/* /proc readers */
int read_file(const char *path, char *buf, size_t cap); /* bytes read or -1 */
long vmstat_get(const char *text, const char *name);    /* -1 if absent */
long tlb_interrupts(long *per_cpu, int max, int *ncpu);  /* sum of the TLB: line, -1 if absent */
long tlb_interrupts_file(const char *path, long *per_cpu, int max, int *ncpu);
void kernel_profile_begin(void); /* kprofile.c: /proc/profile, when booted with profile= */
void kernel_profile_end(void);

/* workloads */
int main_autonuma(const char *kind, int argc, char **argv);
int main_remote_toucher(int argc, char **argv);
int main_program(int argc, char **argv);
int main_pmbench(int argc, char **argv);
int main_memory_eater(int argc, char **argv);
int main_migratepages(int argc, char **argv);
int main_move_pages(int argc, char **argv);
int main_run(int argc, char **argv);
int main_calibrate(int argc, char **argv);

#endif
