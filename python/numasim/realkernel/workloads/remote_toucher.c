/* remote_toucher: first touch on one node, then stream from another (the simulator's
 * `remote_toucher` kind). The main thread, bound to touch_node's CPUs, memsets the buffer
 * (first touch); then `threads` workers bound one per CPU of run_node, and `local_threads`
 * bound one per CPU of touch_node, stream over the whole buffer for duration_s: each pass
 * reads every 64-byte line and writes one byte per 4 KiB page.
 *
 * mapping: "private" (map_buffer), "shared" (MAP_SHARED|MAP_ANONYMOUS) or "shmem" (a memfd,
 * i.e. a tmpfs file, mapped MAP_SHARED); the kernel backs both shared kinds with shmem.
 * processes=2: after the first touch the main process fork()s; the child runs the run_node
 * workers, the parent the touch_node ones, then waitpid()s the child. Each process prints its
 * own "phase=stream" line (process=0 the parent, 1 the child): the passes add up. A private
 * mapping is the parent's, which the child inherits copy-on-write. madvise on a shared mapping
 * is refused. */
#include "nsw.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

struct tw {
	pthread_t tid;
	int cpu;
	volatile char *buf;
	size_t size;
	double until;
	long passes;
	unsigned long sum;
};

static void *stream(void *arg)
{
	struct tw *w = arg;
	pin_self_cpu(w->cpu);
	unsigned long sum = 0;
	const size_t block = 1 << 20; /* check the clock once per MiB */
	while (now_s() < w->until) {
		for (size_t off = 0; off < w->size && now_s() < w->until; off += block) {
			size_t end = off + block < w->size ? off + block : w->size;
			for (size_t p = off; p < end; p += 4096) {
				for (size_t l = 0; l < 4096; l += 64)
					sum += w->buf[p + l];
				w->buf[p] = (char)sum;
			}
		}
		w->passes++;
	}
	w->sum = sum;
	return NULL;
}

int main_remote_toucher(int argc, char **argv)
{
	struct args a;
	args_parse(&a, argc, argv);
	long size_mib = arg_long(&a, "size_mib", 64);
	long touch_node = arg_long(&a, "touch_node", 0);
	long run_node = arg_long(&a, "run_node", 1);
	long threads = arg_long(&a, "threads", -1);
	long local_threads = arg_long(&a, "local_threads", 0);
	if (!arg_has(&a, "duration_s"))
		die("remote_toucher: duration_s is required");
	double duration = arg_double(&a, "duration_s", 0);
	const char *adv = arg_str(&a, "madvise", "none");
	long processes = arg_long(&a, "processes", 1);
	const char *mapping = arg_str(&a, "mapping", "private");
	arg_double(&a, "start_s", 0);
	args_done(&a, "remote_toucher");
	cpu_set_t run_set;
	int nrun = node_cpus(run_node, &run_set);
	if (threads == -1)
		threads = nrun; /* default: every CPU of run_node */
	if (size_mib < 1 || threads < 1 || nrun < 1)
		die("remote_toucher: size_mib, threads and run_node's CPUs must be >= 1");
	if (local_threads < 0)
		die("remote_toucher: local_threads must be >= 0");
	int shared = strcmp(mapping, "private") != 0;
	if (shared && strcmp(mapping, "shared") && strcmp(mapping, "shmem"))
		die("remote_toucher: mapping=%s: expected private, shared or shmem", mapping);
	if (processes != 1 && processes != 2)
		die("remote_toucher: processes=%ld: expected 1 or 2", processes);
	if (shared && strcmp(adv, "none"))
		die("remote_toucher: madvise=%s needs mapping=private (madvise on a shared mapping is not modelled)", adv);

	size_t size = (size_t)size_mib << 20;
	pin_self_node(touch_node);
	char *buf = shared ? map_shared(size, mapping) : map_buffer(size, adv);
	double t0 = now_s();
	write_pages(buf, size);
	double t1 = now_s();
	emit("toucher phase=first_touch t=%.3f dt=%.3f", run_time_s(), t1 - t0);

	int cpus[MAX_CPUS], local[MAX_CPUS];
	cpu_list(&run_set, cpus, MAX_CPUS);
	cpu_set_t touch_set;
	int nlocal = node_cpus(touch_node, &touch_set);
	cpu_list(&touch_set, local, MAX_CPUS);
	long all = threads + local_threads;
	/* workers [first, last): all of them, or the child's run_node ones and the parent's
	 * touch_node ones */
	long first = 0, last = all;
	pid_t child = -1;
	if (processes == 2) {
		child = fork(); /* single-threaded here: the workers come after */
		if (child < 0)
			die("fork: %s", strerror(errno));
		if (child == 0)
			last = threads;
		else
			first = threads;
	}
	struct tw *ws = calloc(all, sizeof(*ws));
	double until = now_s() + duration;
	for (long i = first; i < last; i++) {
		ws[i].cpu = i < threads ? cpus[i % nrun] : local[(i - threads) % nlocal];
		ws[i].buf = buf;
		ws[i].size = size;
		ws[i].until = until;
		if (pthread_create(&ws[i].tid, thread_attr(), stream, &ws[i]))
			die("pthread_create: %s", strerror(errno));
	}
	long passes = 0;
	for (long i = first; i < last; i++) {
		pthread_join(ws[i].tid, NULL);
		passes += ws[i].passes;
	}
	if (processes == 1) {
		emit("toucher phase=stream t=%.3f dt=%.3f passes=%ld", run_time_s(), now_s() - t1, passes);
		return 0;
	}
	emit("toucher phase=stream t=%.3f dt=%.3f passes=%ld process=%d pid=%d", run_time_s(), now_s() - t1, passes,
	     child == 0, (int)getpid());
	if (child == 0)
		return 0;
	int st;
	while (waitpid(child, &st, 0) < 0)
		if (errno != EINTR)
			die("waitpid: %s", strerror(errno));
	if (!WIFEXITED(st) || WEXITSTATUS(st))
		die("remote_toucher: the child process (pid %d) exited with status %d, signal %d", (int)child,
		    WIFEXITED(st) ? WEXITSTATUS(st) : -1, WIFSIGNALED(st) ? WTERMSIG(st) : 0);
	return 0;
}
