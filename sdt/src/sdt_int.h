/* libuscope-sdt internals: the shared object builder (elfgen.c) and the
 * error message (sdt.c). */
#ifndef USC_SDT_INT_H
#define USC_SDT_INT_H

#include <stddef.h>
#include <stdint.h>

#include "uscope/sdt.h"

#define SDT_HIDDEN __attribute__((visibility("hidden")))

/* What the object holds for one probe. */
struct sdt_gen_probe {
	const char *name;	/* the probe's, and its stub function's symbol */
	const char *args;	/* the note's argument specs ("" for none) */
	char sema_sym[2 * USC_SDT_NAME_MAX + 16];	/* PROVIDER_NAME_semaphore */
	/* out: link-time addresses in the object */
	uint64_t stub_vaddr;
	uint64_t sema_vaddr;
};

/* Write the shared object for provider's probes into fd (empty, open for
 * writing) with libelf. 0, or -ENOMEM / -EIO with sdt_set_error called. */
SDT_HIDDEN int sdt_gen_object(int fd, const char *provider, struct sdt_gen_probe *probes,
			      size_t n);

/* Set the calling thread's message (printf format); returns err. */
SDT_HIDDEN int sdt_set_error(int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
