/* What a program writes around a run-time probe, compiled as a program
 * would be (-O2, no sanitizers: see the Makefile) and linked into
 * test_sdt, which decodes this machine code to check that a disabled probe
 * costs a load of the semaphore through the probe's pointer and a branch,
 * and runs it. Returns whether it fired. */
#include <uscope/sdt.h>

int sdt_fastpath_once(const struct usc_probe *p, long a, long b);

int sdt_fastpath_once(const struct usc_probe *p, long a, long b)
{
	if (usc_probe_enabled(p)) {
		usc_probe_fire(p, a, b);
		return 1;
	}
	return 0;
}
