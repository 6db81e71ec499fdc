/* program: a workload written out (the simulator's `program` kind, docs/scenario.md): buffers,
 * processes and thread groups, each with a list of operations.
 *
 *   numaw program buffers=B,B,... processes=ITEM/ITEM/... [start_s=S]
 *
 * B is SIZE_MIB[:MAPPING[:MADVISE]] (private|shared|shmem, none|hugepage|nohugepage). ITEM is
 * NAME[:key=value]...: `process` (parent, node, cpus) starts the next process, `thread` (count,
 * node, cpus) a thread group of the last process; the ops that follow an item are its main
 * thread's (after `process`) or each thread's of the group (after `thread`): store, load, rmw
 * (buffer, offset_mib, size_mib, stride, passes | duration_s), set_mempolicy (mode, nodes),
 * affinity (node | cpus), sleep (duration_s). Lists are comma-separated.
 *
 * Process 0 creates the shared and shmem buffers, which forks inherit. Each process pins its
 * main thread, maps its private buffers, runs its main ops, forks its children (in order), drops
 * the shared buffers that it does not use itself, runs its threads and waits for its children.
 * A private buffer is each process's own: a process maps the ones it uses after it was forked,
 * MADV_DONTFORK when it forks, so that its children map their own (no copy-on-write). A
 * process prints "program phase=main" after its main ops and "program phase=done" when its
 * threads have joined (passes: stream passes begun, a pass cut by a deadline included). */
#include "nsw.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_BUFFERS 16
#define MAX_PROCS 64
#define MAX_THREADS 4096
#define MAX_KEYS 16

enum { OP_STORE, OP_LOAD, OP_RMW, OP_MEMPOLICY, OP_AFFINITY, OP_SLEEP };
static const char *op_names[] = {"store", "load", "rmw", "set_mempolicy", "affinity", "sleep", NULL};

/* a node's CPUs, listed CPUs, or none (node -1, ncpus 0) */
struct aff {
	int node;
	int ncpus;
	int *cpus;
	cpu_set_t set; /* resolved */
	char what[96];
};

struct op {
	int kind;
	int buffer;
	long first, npages, stride; /* pages */
	long passes;                /* 0: until duration */
	double duration;
	int mode;
	unsigned long nodes;
	struct aff aff;
};

struct ops {
	int n;
	struct op *v;
};

struct group {
	long count;
	struct aff aff;
	struct ops ops;
};

struct proc {
	int parent;
	struct aff aff;
	struct ops main;
	int ngroups;
	struct group *groups;
	unsigned uses, subtree; /* buffers named by its ops; by its or its descendants' */
	int children;
};

struct buffer {
	long mib;
	const char *mapping, *madvise;
	int shared;
	char *p;
};

static struct buffer bufs[MAX_BUFFERS];
static int nbufs;
static struct proc procs[MAX_PROCS];
static int nprocs;
static char ctx[96]; /* the item being parsed, for errors */
static volatile unsigned long sink;

/* ---- parsing */

struct kv {
	int n;
	char *key[MAX_KEYS], *val[MAX_KEYS];
	int used[MAX_KEYS];
};

static void kv_parse(struct kv *a, char *item)
{
	char *f;
	a->n = 0;
	while ((f = strsep(&item, ":"))) {
		char *eq = strchr(f, '=');
		if (!eq || eq == f)
			die("program: %s: %s: expected key=value", ctx, f);
		*eq = 0;
		for (int i = 0; i < a->n; i++)
			if (!strcmp(a->key[i], f))
				die("program: %s: %s given twice", ctx, f);
		if (a->n == MAX_KEYS)
			die("program: %s: too many keys", ctx);
		a->key[a->n] = f;
		a->val[a->n] = eq + 1;
		a->used[a->n++] = 0;
	}
}

static char *kv_get(struct kv *a, const char *key)
{
	for (int i = 0; i < a->n; i++)
		if (!strcmp(a->key[i], key)) {
			a->used[i] = 1;
			return a->val[i];
		}
	return NULL;
}

static long to_long(const char *key, const char *v)
{
	char *end;
	errno = 0;
	long x = strtol(v, &end, 10);
	if (errno || end == v || *end)
		die("program: %s: %s=%s: not an integer", ctx, key, v);
	return x;
}

static long kv_long(struct kv *a, const char *key, long def)
{
	char *v = kv_get(a, key);
	return v ? to_long(key, v) : def;
}

static double kv_double(struct kv *a, const char *key, double def)
{
	char *v = kv_get(a, key), *end;
	if (!v)
		return def;
	double x = strtod(v, &end);
	if (end == v || *end || x != x)
		die("program: %s: %s=%s: not a number", ctx, key, v);
	return x;
}

/* a comma-separated list of integers in [0, max): its length (0 if absent) */
static int kv_list(struct kv *a, const char *key, int **out, int max)
{
	char *v = kv_get(a, key), *s;
	if (!v)
		return 0;
	if (!*v)
		die("program: %s: %s is empty", ctx, key);
	int n = 1;
	for (char *c = v; *c; c++)
		n += *c == ',';
	int *l = malloc(n * sizeof(*l));
	n = 0;
	while ((s = strsep(&v, ","))) {
		l[n] = (int)to_long(key, s);
		if (l[n] < 0 || l[n] >= max)
			die("program: %s: %s: %d is out of range (0..%d)", ctx, key, l[n], max - 1);
		n++;
	}
	*out = l;
	return n;
}

static void kv_done(struct kv *a)
{
	for (int i = 0; i < a->n; i++)
		if (!a->used[i])
			die("program: %s: unknown key %s", ctx, a->key[i]);
}

static void parse_aff(struct kv *a, struct aff *f)
{
	char *node = kv_get(a, "node");
	f->node = node ? (int)to_long("node", node) : -1;
	if (node && (f->node < 0 || f->node >= MAX_NODES))
		die("program: %s: node=%s is out of range", ctx, node);
	f->ncpus = kv_list(a, "cpus", &f->cpus, MAX_CPUS);
	if (node && f->ncpus)
		die("program: %s: node and cpus are both given", ctx);
	snprintf(f->what, sizeof(f->what), "%s", ctx);
}

static void parse_buffers(char *s)
{
	char *item;
	while ((item = strsep(&s, ","))) {
		if (nbufs == MAX_BUFFERS)
			die("program: more than %d buffers", MAX_BUFFERS);
		struct buffer *b = &bufs[nbufs];
		snprintf(ctx, sizeof(ctx), "buffer %d", nbufs);
		char *size = strsep(&item, ":"), *mapping = strsep(&item, ":"), *adv = strsep(&item, ":");
		if (item)
			die("program: %s: expected SIZE_MIB[:MAPPING[:MADVISE]], got more fields", ctx);
		b->mib = to_long("size_mib", size);
		b->mapping = mapping ? mapping : "private";
		b->madvise = adv ? adv : "none";
		if (b->mib < 1)
			die("program: %s: size_mib=%ld: must be >= 1", ctx, b->mib);
		b->shared = strcmp(b->mapping, "private") != 0;
		if (b->shared && strcmp(b->mapping, "shared") && strcmp(b->mapping, "shmem"))
			die("program: %s: mapping=%s: expected private, shared or shmem", ctx, b->mapping);
		if (strcmp(b->madvise, "none") && strcmp(b->madvise, "hugepage") && strcmp(b->madvise, "nohugepage"))
			die("program: %s: madvise=%s: expected none, hugepage or nohugepage", ctx, b->madvise);
		if (b->shared && strcmp(b->madvise, "none"))
			die("program: %s: madvise=%s needs mapping=private", ctx, b->madvise);
		nbufs++;
	}
}

static struct op *push_op(struct ops *ops)
{
	ops->v = realloc(ops->v, (ops->n + 1) * sizeof(*ops->v));
	struct op *o = &ops->v[ops->n++];
	memset(o, 0, sizeof(*o));
	o->aff.node = -1;
	return o;
}

static void parse_op(struct kv *a, struct op *o, struct proc *p)
{
	switch (o->kind) {
	case OP_STORE:
	case OP_LOAD:
	case OP_RMW: {
		o->buffer = (int)kv_long(a, "buffer", 0);
		if (o->buffer < 0 || o->buffer >= nbufs)
			die("program: %s: buffer=%d: there are %d buffers", ctx, o->buffer, nbufs);
		long size = bufs[o->buffer].mib;
		long off = kv_long(a, "offset_mib", 0);
		long mib = kv_long(a, "size_mib", size - off);
		if (off < 0 || mib < 1 || off + mib > size)
			die("program: %s: offset_mib=%ld size_mib=%ld is outside buffer %d (%ld MiB)", ctx, off, mib, o->buffer,
			    size);
		o->first = off << 8;
		o->npages = mib << 8;
		o->stride = kv_long(a, "stride", 1);
		if (o->stride < 1)
			die("program: %s: stride=%ld: must be >= 1", ctx, o->stride);
		int timed = kv_get(a, "duration_s") != NULL;
		if (timed && kv_get(a, "passes"))
			die("program: %s: passes and duration_s are both given", ctx);
		o->passes = timed ? 0 : kv_long(a, "passes", 1);
		o->duration = kv_double(a, "duration_s", 0);
		if (timed ? !(o->duration > 0) : o->passes < 1)
			die("program: %s: passes must be >= 1 and duration_s > 0", ctx);
		p->uses |= 1u << o->buffer;
		break;
	}
	case OP_MEMPOLICY: {
		const char *mode = kv_get(a, "mode");
		int *nodes = NULL;
		int n = kv_list(a, "nodes", &nodes, MAX_NODES);
		if (!mode)
			die("program: %s: mode is required (default, bind or preferred)", ctx);
		for (int i = 0; i < n; i++)
			o->nodes |= 1UL << nodes[i];
		free(nodes);
		if (!strcmp(mode, "default") && !n)
			o->mode = NSW_MPOL_DEFAULT;
		else if (!strcmp(mode, "bind") && n)
			o->mode = NSW_MPOL_BIND;
		else if (!strcmp(mode, "preferred") && n == 1)
			o->mode = NSW_MPOL_PREFERRED;
		else
			die("program: %s: mode=%s with %d nodes: expected default (no nodes), bind (nodes) or preferred "
			    "(one node)", ctx, mode, n);
		break;
	}
	case OP_AFFINITY:
		parse_aff(a, &o->aff);
		if (o->aff.node < 0 && !o->aff.ncpus)
			die("program: %s: affinity needs node or cpus", ctx);
		break;
	case OP_SLEEP:
		if (!kv_get(a, "duration_s"))
			die("program: %s: sleep needs duration_s", ctx);
		o->duration = kv_double(a, "duration_s", 0);
		if (o->duration < 0)
			die("program: %s: duration_s must be >= 0", ctx);
		break;
	}
}

static void parse_processes(char *s)
{
	struct proc *p = NULL;
	struct ops *ops = NULL;
	long threads = 0;
	char *item;
	struct kv a;
	while ((item = strsep(&s, "/"))) {
		char *name = strsep(&item, ":");
		if (!strcmp(name, "process")) {
			if (nprocs == MAX_PROCS)
				die("program: more than %d processes", MAX_PROCS);
			snprintf(ctx, sizeof(ctx), "process %d", nprocs);
			p = &procs[nprocs];
			ops = &p->main;
			kv_parse(&a, item);
			char *parent = kv_get(&a, "parent");
			p->parent = parent ? (int)to_long("parent", parent) : nprocs ? 0 : -1;
			if (nprocs == 0 && parent)
				die("program: process 0 has no parent (it is the one started)");
			if (nprocs && (p->parent < 0 || p->parent >= nprocs))
				die("program: %s: parent=%d: must be an earlier process", ctx, p->parent);
			parse_aff(&a, &p->aff);
			kv_done(&a);
			nprocs++;
			continue;
		}
		if (!p)
			die("program: processes= must start with a process item, not %s", name);
		if (!strcmp(name, "thread")) {
			p->groups = realloc(p->groups, (p->ngroups + 1) * sizeof(*p->groups));
			struct group *g = &p->groups[p->ngroups];
			memset(g, 0, sizeof(*g));
			snprintf(ctx, sizeof(ctx), "process %d, thread %d", nprocs - 1, p->ngroups);
			p->ngroups++;
			ops = &g->ops;
			kv_parse(&a, item);
			g->count = kv_long(&a, "count", 1);
			if (g->count < 1 || (threads += g->count) > MAX_THREADS)
				die("program: %s: count=%ld: at least 1, at most %d threads in all", ctx, g->count, MAX_THREADS);
			parse_aff(&a, &g->aff);
			kv_done(&a);
			continue;
		}
		int kind = 0;
		while (op_names[kind] && strcmp(op_names[kind], name))
			kind++;
		if (!op_names[kind])
			die("program: process %d: unknown item %s (expected process, thread, store, load, rmw, set_mempolicy, "
			    "affinity or sleep)", nprocs - 1, name);
		struct op *o = push_op(ops);
		o->kind = kind;
		if (ops == &p->main)
			snprintf(ctx, sizeof(ctx), "process %d, main op %d (%s)", nprocs - 1, ops->n - 1, name);
		else
			snprintf(ctx, sizeof(ctx), "process %d, thread %d, op %d (%s)", nprocs - 1, p->ngroups - 1, ops->n - 1, name);
		snprintf(o->aff.what, sizeof(o->aff.what), "%s", ctx);
		kv_parse(&a, item);
		parse_op(&a, o, p);
		kv_done(&a);
	}
	if (!nprocs)
		die("program: no process");
	for (int k = nprocs - 1; k >= 0; k--) {
		procs[k].subtree |= procs[k].uses;
		if (k) {
			procs[procs[k].parent].subtree |= procs[k].subtree;
			procs[procs[k].parent].children++;
		}
	}
}

/* ---- topology: each affinity's CPU set */

static int node_exists(int node)
{
	char path[96];
	snprintf(path, sizeof(path), "/sys/devices/system/node/node%d", node);
	return !access(path, F_OK);
}

static void resolve_aff(struct aff *f, const cpu_set_t *online)
{
	if (f->node >= 0) {
		if (!node_exists(f->node))
			die("program: %s: node %d does not exist", f->what, f->node);
		if (node_cpus(f->node, &f->set) < 1)
			die("program: %s: node %d has no CPUs", f->what, f->node);
	} else if (f->ncpus) {
		CPU_ZERO(&f->set);
		for (int i = 0; i < f->ncpus; i++) {
			if (!CPU_ISSET(f->cpus[i], online))
				die("program: %s: cpu %d is not on any node", f->what, f->cpus[i]);
			CPU_SET(f->cpus[i], &f->set);
		}
	}
}

static void resolve_ops(struct ops *ops, const cpu_set_t *online)
{
	for (int i = 0; i < ops->n; i++) {
		struct op *o = &ops->v[i];
		if (o->kind == OP_AFFINITY)
			resolve_aff(&o->aff, online);
		for (int n = 0; o->kind == OP_MEMPOLICY && n < MAX_NODES; n++)
			if (o->nodes & 1UL << n && !node_exists(n))
				die("program: %s: set_mempolicy: node %d does not exist", o->aff.what, n);
	}
}

static void resolve(void)
{
	cpu_set_t online, one;
	CPU_ZERO(&online);
	for (int n = 0; n < nr_nodes() && n < MAX_NODES; n++)
		if (node_exists(n)) {
			node_cpus(n, &one);
			CPU_OR(&online, &online, &one);
		}
	for (int k = 0; k < nprocs; k++) {
		struct proc *p = &procs[k];
		resolve_aff(&p->aff, &online);
		resolve_ops(&p->main, &online);
		for (int g = 0; g < p->ngroups; g++) {
			resolve_aff(&p->groups[g].aff, &online);
			resolve_ops(&p->groups[g].ops, &online);
		}
	}
}

/* ---- running */

/* one stream op: the passes begun; the clock is read once per MiB of pages reached */
static long stream(const struct op *o, unsigned long *sum, long *pages)
{
	volatile char *base = bufs[o->buffer].p + (o->first << 12);
	double until = o->passes ? 0 : now_s() + o->duration;
	long passes = 0, since = 0;
	unsigned long s = *sum;
	while (o->passes ? passes < o->passes : now_s() < until) {
		passes++;
		for (long i = 0; i < o->npages; i += o->stride) {
			if (!o->passes && ++since == 256) {
				since = 0;
				if (now_s() >= until)
					break;
			}
			volatile char *pg = base + (i << 12);
			if (o->kind == OP_STORE) {
				memset((char *)pg, (int)passes, 4096);
				__asm__ volatile("" ::"r"(pg) : "memory");
			} else {
				for (int l = 0; l < 4096; l += 64)
					s += pg[l];
				if (o->kind == OP_RMW)
					pg[0] = (char)s;
			}
			(*pages)++;
		}
	}
	*sum = s;
	return passes;
}

static void run_ops(const struct ops *ops, long *passes, long *pages, unsigned long *sum)
{
	for (int i = 0; i < ops->n; i++) {
		const struct op *o = &ops->v[i];
		switch (o->kind) {
		case OP_STORE:
		case OP_LOAD:
		case OP_RMW:
			*passes += stream(o, sum, pages);
			break;
		case OP_MEMPOLICY:
			if (o->mode == NSW_MPOL_DEFAULT ? sys_set_mempolicy(NSW_MPOL_DEFAULT, NULL, 0)
							: sys_set_mempolicy(o->mode, &o->nodes, MAX_NODES + 1))
				die("program: set_mempolicy(mode %d, nodes 0x%lx): %s", o->mode, o->nodes, strerror(errno));
			break;
		case OP_AFFINITY:
			pin_self(&o->aff.set);
			break;
		case OP_SLEEP:
			sleep_s(o->duration);
			break;
		}
	}
}

struct tw {
	pthread_t tid;
	const struct group *g;
	long i;
	long passes, pages;
	unsigned long sum;
};

static void *thread_main(void *arg)
{
	struct tw *w = arg;
	const struct aff *f = &w->g->aff;
	if (f->ncpus)
		pin_self_cpu(f->cpus[w->i % f->ncpus]);
	else if (f->node >= 0)
		pin_self(&f->set);
	run_ops(&w->g->ops, &w->passes, &w->pages, &w->sum);
	return NULL;
}

/* unmap the shared buffers not in `keep` */
static void drop_shared(unsigned keep)
{
	for (int b = 0; b < nbufs; b++)
		if (bufs[b].shared && bufs[b].p && !(keep & 1u << b)) {
			munmap(bufs[b].p, (size_t)bufs[b].mib << 20);
			bufs[b].p = NULL;
		}
}

static int run_process(int k)
{
	struct proc *p = &procs[k];
	double t0 = now_s();
	if (p->aff.node >= 0 || p->aff.ncpus)
		pin_self(&p->aff.set);
	drop_shared(p->subtree);
	for (int b = 0; b < nbufs; b++) {
		if (bufs[b].shared || !(p->uses & 1u << b))
			continue;
		size_t size = (size_t)bufs[b].mib << 20;
		bufs[b].p = map_buffer(size, bufs[b].madvise);
		if (p->children && madvise(bufs[b].p, size, MADV_DONTFORK))
			die("program: madvise(MADV_DONTFORK): %s", strerror(errno));
	}
	long passes = 0, pages = 0;
	unsigned long sum = 0;
	run_ops(&p->main, &passes, &pages, &sum);
	emit("program phase=main t=%.3f dt=%.3f process=%d pid=%d", run_time_s(), now_s() - t0, k, (int)getpid());

	pid_t kids[MAX_PROCS];
	int kidx[MAX_PROCS], nk = 0;
	for (int j = k + 1; j < nprocs; j++) {
		if (procs[j].parent != k)
			continue;
		pid_t c = fork(); /* single-threaded here: the threads come after */
		if (c < 0)
			die("fork: %s", strerror(errno));
		if (c == 0) {
			prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
			for (int b = 0; b < nbufs; b++)
				if (!bufs[b].shared)
					bufs[b].p = NULL; /* not inherited (MADV_DONTFORK) */
			exit(run_process(j));
		}
		kids[nk] = c;
		kidx[nk++] = j;
	}
	drop_shared(p->uses);

	long n = 0;
	for (int g = 0; g < p->ngroups; g++)
		n += p->groups[g].count;
	struct tw *tws = calloc(n ? n : 1, sizeof(*tws));
	long t = 0;
	for (int g = 0; g < p->ngroups; g++)
		for (long i = 0; i < p->groups[g].count; i++, t++) {
			tws[t].g = &p->groups[g];
			tws[t].i = i;
			if (pthread_create(&tws[t].tid, thread_attr(), thread_main, &tws[t]))
				die("pthread_create: %s", strerror(errno));
		}
	for (t = 0; t < n; t++) {
		pthread_join(tws[t].tid, NULL);
		passes += tws[t].passes;
		pages += tws[t].pages;
		sum += tws[t].sum;
	}
	sink += sum;
	emit("program phase=done t=%.3f dt=%.3f process=%d pid=%d threads=%ld passes=%ld pages=%ld", run_time_s(),
	     now_s() - t0, k, (int)getpid(), n, passes, pages);
	for (int i = 0; i < nk; i++) {
		int st;
		while (waitpid(kids[i], &st, 0) < 0)
			if (errno != EINTR)
				die("waitpid: %s", strerror(errno));
		if (!WIFEXITED(st) || WEXITSTATUS(st))
			die("program: process %d (pid %d) exited with status %d, signal %d", kidx[i], (int)kids[i],
			    WIFEXITED(st) ? WEXITSTATUS(st) : -1, WIFSIGNALED(st) ? WTERMSIG(st) : 0);
	}
	return 0;
}

int main_program(int argc, char **argv)
{
	struct args a;
	args_parse(&a, argc, argv);
	const char *b = arg_str(&a, "buffers", NULL);
	const char *ps = arg_str(&a, "processes", NULL);
	arg_double(&a, "start_s", 0);
	if (!b || !ps)
		die("program: buffers= and processes= are required");
	parse_buffers(strdup(b));
	parse_processes(strdup(ps));
	args_done(&a, "program");
	resolve();
	for (int i = 0; i < nbufs; i++)
		if (bufs[i].shared && procs[0].subtree & 1u << i) /* created once, inherited */
			bufs[i].p = map_shared((size_t)bufs[i].mib << 20, bufs[i].mapping);
	return run_process(0);
}
