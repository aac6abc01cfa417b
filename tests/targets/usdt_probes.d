/* The semaphore-guarded provider of the usdt target: bin/usdt_probes.h is
 * generated with `dtrace -h`, bin/usdt_probes.o (the semaphore) with
 * `dtrace -G` (see the Makefile). */
provider prov {
	probe sema_event(int);
};
