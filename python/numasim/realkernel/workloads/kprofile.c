/* Where the CPUs' kernel-mode ticks landed, for a guest booted with `profile=2`
 * (kernel/profile.c: profile_tick -> profile_hit). At every tick that does not interrupt user
 * mode the kernel counts the interrupted PC in /proc/profile, one counter per 4-byte bucket of
 * kernel text; these are the ticks that tick-based accounting (account_process_tick) charges as
 * system time, so the histogram says what the system time of a run was spent on. The runner
 * resets it when the run begins and prints, at the end, the functions with the most hits,
 * resolved with /proc/kallsyms: "kprof sym=NAME hits=N" and "kprof_total hits=N step=S". */
#include "nsw.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define KPROF_TOP 60

struct ksym {
	unsigned long addr;
	const char *name;
	long hits;
};

static char *slurp(const char *path, size_t *len)
{
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		return NULL;
	size_t cap = 1 << 20, n = 0;
	char *buf = malloc(cap + 1);
	for (;;) {
		if (!buf)
			break;
		if (n == cap) {
			char *b = realloc(buf, 2 * cap + 1);
			if (!b) {
				free(buf);
				buf = NULL;
				break;
			}
			buf = b;
			cap *= 2;
		}
		ssize_t r = read(fd, buf + n, cap - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			free(buf);
			buf = NULL;
			break;
		}
		if (r == 0)
			break;
		n += (size_t)r;
	}
	close(fd);
	if (buf)
		buf[n] = 0;
	*len = n;
	return buf;
}

void kernel_profile_begin(void)
{
	int fd = open("/proc/profile", O_WRONLY);
	if (fd < 0)
		return; /* not booted with profile= */
	/* any write that is not one int long clears the counters (kernel/profile.c: write_profile) */
	if (write(fd, "0", 1) != 1)
		emit("warn kprof_reset_errno=%d", errno);
	close(fd);
	/* kallsyms shows addresses to root only while kptr_restrict < 2 */
	fd = open("/proc/sys/kernel/kptr_restrict", O_WRONLY);
	if (fd >= 0) {
		if (write(fd, "0", 1) != 1)
			emit("warn kptr_restrict_errno=%d", errno);
		close(fd);
	}
}

static int by_addr(const void *a, const void *b)
{
	const struct ksym *x = a, *y = b;
	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

static int by_hits(const void *a, const void *b)
{
	const struct ksym *x = a, *y = b;
	return x->hits > y->hits ? -1 : x->hits < y->hits;
}

/* Text symbols of /proc/kallsyms (types t, T, w, W), sorted by address; *stext set. */
static struct ksym *text_symbols(char *ks, size_t *count, unsigned long *stext)
{
	size_t cap = 1 << 16, n = 0;
	struct ksym *syms = malloc(cap * sizeof(*syms));
	*stext = 0;
	for (char *line = ks; syms && line && *line;) {
		char *nl = strchr(line, '\n');
		if (nl)
			*nl = 0;
		char *end, *type, *name;
		unsigned long addr = strtoul(line, &end, 16);
		type = end + (*end == ' ');
		name = type + 2;
		if (end != line && *type && type[1] == ' ' && strchr("tTwW", *type)) {
			char *sp = strpbrk(name, " \t");
			if (sp)
				*sp = 0;
			if (!strcmp(name, "_stext"))
				*stext = addr;
			if (n == cap) {
				struct ksym *s = realloc(syms, 2 * cap * sizeof(*syms));
				if (!s) {
					free(syms);
					return NULL;
				}
				syms = s;
				cap *= 2;
			}
			syms[n++] = (struct ksym){addr, name, 0};
		}
		line = nl ? nl + 1 : NULL;
	}
	if (syms)
		qsort(syms, n, sizeof(*syms), by_addr);
	*count = n;
	return syms;
}

void kernel_profile_end(void)
{
	size_t plen, klen, nsyms;
	char *prof = slurp("/proc/profile", &plen);
	if (!prof)
		return;
	char *ks = slurp("/proc/kallsyms", &klen);
	unsigned long stext;
	struct ksym *syms = ks ? text_symbols(ks, &nsyms, &stext) : NULL;
	if (!syms || !stext || plen < 8) {
		emit("warn kprof_unresolved=1 profile_bytes=%zu kallsyms_bytes=%zu", plen, ks ? klen : 0);
		free(syms);
		free(ks);
		free(prof);
		return;
	}
	unsigned int step, hit;
	memcpy(&step, prof, sizeof(step));
	size_t buckets = (plen - sizeof(step)) / sizeof(hit);
	long total = 0, unknown = 0;
	for (size_t i = 0; i < buckets; i++) {
		memcpy(&hit, prof + sizeof(step) + i * sizeof(hit), sizeof(hit));
		if (!hit)
			continue;
		total += hit;
		unsigned long pc = stext + (unsigned long)i * step;
		size_t lo = 0, hi = nsyms; /* the last symbol at or below pc */
		while (hi - lo > 1) {
			size_t mid = (lo + hi) / 2;
			if (syms[mid].addr <= pc)
				lo = mid;
			else
				hi = mid;
		}
		if (nsyms && syms[lo].addr <= pc)
			syms[lo].hits += hit;
		else
			unknown += hit;
	}
	qsort(syms, nsyms, sizeof(*syms), by_hits);
	for (size_t i = 0; i < nsyms && i < KPROF_TOP && syms[i].hits > 0; i++)
		emit("kprof sym=%s hits=%ld", syms[i].name, syms[i].hits);
	emit("kprof_total hits=%ld unresolved=%ld step=%u buckets=%zu", total, unknown, step, buckets);
	free(syms);
	free(ks);
	free(prof);
}
