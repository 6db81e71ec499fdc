/* numaw: dispatch on the workload kind (the simulator's [[workload]] kind names). */
#include "nsw.h"

#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>

static void usage(void)
{
	fprintf(stderr, "usage: numaw KIND key=value ...   (KIND: numa01[_THREAD_ALLOC], numa02[_SMT][_HARD_BIND|_INVERSE_BIND],\n"
			"                                   remote_toucher, pmbench, memory_eater, migratepages, move_pages)\n"
			"       numaw program buffers=SIZE_MIB[:MAPPING[:MADVISE]],... processes=ITEM/ITEM/...\n"
			"                     (ITEM: process|thread|store|load|rmw|set_mempolicy|affinity|sleep[:key=value]...)\n"
			"       numaw run SPEC [interval_ms=N] [max_s=S]\n"
			"       numaw calibrate [size_mib=32] [reps=3] [hint_s=4 (0: skip)] [flush_iters=2000]\n");
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage();
		return 2;
	}
	const char *kind = argv[1];
	prctl(PR_SET_NAME, kind, 0, 0, 0);
	if (!strcmp(kind, "run"))
		return main_run(argc - 2, argv + 2);
	if (!strcmp(kind, "calibrate"))
		return main_calibrate(argc - 2, argv + 2);
	if (!strncmp(kind, "numa01", 6) || !strncmp(kind, "numa02", 6))
		return main_autonuma(kind, argc - 2, argv + 2);
	if (!strcmp(kind, "remote_toucher"))
		return main_remote_toucher(argc - 2, argv + 2);
	if (!strcmp(kind, "program"))
		return main_program(argc - 2, argv + 2);
	if (!strcmp(kind, "pmbench"))
		return main_pmbench(argc - 2, argv + 2);
	if (!strcmp(kind, "memory_eater"))
		return main_memory_eater(argc - 2, argv + 2);
	if (!strcmp(kind, "migratepages"))
		return main_migratepages(argc - 2, argv + 2);
	if (!strcmp(kind, "move_pages"))
		return main_move_pages(argc - 2, argv + 2);
	if (!strcmp(kind, "tlb")) { /* numaw tlb FILE: the TLB line of an /proc/interrupts copy */
		long per[MAX_CPUS];
		int n = 0;
		long sum = tlb_interrupts_file(argc > 2 ? argv[2] : "/proc/interrupts", per, MAX_CPUS, &n);
		char out[8192];
		int k = 0;
		for (int c = 0; c < n && c < MAX_CPUS; c++)
			k += snprintf(out + k, sizeof(out) - k, "%s%ld", c ? "," : "", per[c]);
		emit("irq total=%ld tlb=%s", sum, n ? out : "-");
		return sum < 0;
	}
	if (!strcmp(kind, "-h") || !strcmp(kind, "--help")) {
		usage();
		return 0;
	}
	fprintf(stderr, "numaw: unknown workload kind %s\n", kind);
	usage();
	return 2;
}
