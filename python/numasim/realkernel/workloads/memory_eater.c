/* memory_eater (`numactl --membind=N memhog SIZE`, killed at free_at_s): MPOL_BIND to `node`,
 * fill size_gib, hold it until run time free_at_s, exit (freeing it). */
#include "nsw.h"

#include <errno.h>
#include <string.h>

int main_memory_eater(int argc, char **argv)
{
	struct args a;
	args_parse(&a, argc, argv);
	if (!arg_has(&a, "size_gib") || !arg_has(&a, "free_at_s"))
		die("memory_eater: size_gib and free_at_s are required");
	double size_gib = arg_double(&a, "size_gib", 0);
	long node = arg_long(&a, "node", 0);
	double free_at = arg_double(&a, "free_at_s", 0);
	arg_double(&a, "start_s", 0);
	args_done(&a, "memory_eater");
	unsigned long mask = 1UL << node;
	if (node < 0 || node >= nr_nodes())
		die("memory_eater: node %ld does not exist", node);
	if (sys_set_mempolicy(NSW_MPOL_BIND, &mask, MAX_NODES + 1))
		die("set_mempolicy: %s", strerror(errno));
	size_t bytes = (size_t)(size_gib * (1UL << 30)) & ~4095UL;
	char *p = map_buffer(bytes, "none");
	write_pages(p, bytes);
	emit("memory_eater filled_mib=%zu t=%.3f", bytes >> 20, run_time_s());
	sleep_until_run_s(free_at);
	return 0;
}
