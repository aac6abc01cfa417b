/* The janitor's second life: uscope's own executable, run again by the
 * janitor after uscope died (janitor.c, jan_inject), for the processes an
 * inject session had patched. A fresh process, so it may run the library:
 * for each process, the agent there has a moment to let go by itself, then
 * what it left (a jump no atomic store covers, a springboard; or all of it,
 * when no probe was hit since) is taken out with every thread stopped, as a
 * later uscope would (engine/inject/undo.c, inj_janitor_undo). Its
 * standard files are /dev/null, as the janitor's were. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>

#include "session/session.h"

int usc_janitor_main(int argc, char **argv)
{
	int failed = 0;

	prctl(PR_SET_NAME, "uscope-janitor", 0, 0, 0);
	if (argc < 1 || strcmp(argv[0], USC_JANITOR_ARG))
		return 2;
	for (int i = 1; i + 1 < argc; i += 2) {
		unsigned long long dev, ino;
		char *end;
		long pid;
		int n = 0;

		if (strcmp(argv[i], "-p"))
			return 2;
		/* a memfd: every process that maps it (engine.h, USC_UNDO_INJECT) */
		if (sscanf(argv[i + 1], "mem:%llu:%llu%n", &dev, &ino, &n) == 2 &&
		    !argv[i + 1][n]) {
			failed |= inj_janitor_undo_memfd(dev, ino) != 0;
			continue;
		}
		errno = 0;
		pid = strtol(argv[i + 1], &end, 10);
		if (errno || *end || pid <= 0)
			return 2;
		failed |= inj_janitor_undo((pid_t)pid) != 0;
	}
	return failed;
}
