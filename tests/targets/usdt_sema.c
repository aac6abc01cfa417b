/* The semaphore-guarded probe of the usdt target: usdt_probes.h (from
 * `dtrace -h`) must come before any other <sys/sdt.h> so that the probe's
 * note names its semaphore, prov_sema_event_semaphore (from `dtrace -G`). */
#include "usdt_probes.h"

__attribute__((noinline)) int sema_probe(int i)
{
	if (PROV_SEMA_EVENT_ENABLED()) {
		PROV_SEMA_EVENT(i);
		return 1;
	}
	return 0;
}
