/* libuscope-sdt: USDT probes defined at run time.
 *
 * A program (or a language binding: Python's uscope_sdt) creates a provider,
 * adds probes with up to 6 typed arguments, and loads it. Loading builds a
 * small ELF shared object in memory (a memfd, never a file on disk) whose
 * .note.stapsdt describes each probe exactly as <sys/sdt.h> would, and
 * dlopens it. USDT consumers (uscope, bpftrace through BCC) then find the
 * probes in /proc/PID/maps as /memfd:PROVIDER and attach to them.
 *
 *	struct usc_provider *prov;
 *	struct usc_probe *req;
 *
 *	usc_provider_new("myapp", &prov);
 *	usc_provider_add_probe(prov, &req, "request", USC_ARG_STRING,
 *			       USC_ARG_INT32, USC_ARG_END);
 *	usc_provider_load(prov);
 *	...
 *	if (usc_probe_enabled(req))
 *		usc_probe_fire(req, path, status);
 *	...
 *	usc_provider_free(prov);
 *
 * A probe is enabled while its semaphore is non-zero: a tracer raises it
 * (the kernel does it for uprobes registered with the semaphore's offset,
 * uscope's inject engine writes it in the process). Checking reads the
 * semaphore through the probe's pointer to it and branches; firing is a
 * call through the probe's pointer to its stub (`nop5; ret`), on which
 * the tracer's probe sits, with the arguments in the SysV argument
 * registers.
 *
 * Every function returns 0 or a negative errno; usc_sdt_error() describes
 * the last failure of the calling thread. The library never prints and
 * never exits.
 *
 * Threads: configure a provider (new, add, load, unload, free) from one
 * thread at a time; usc_probe_enabled and usc_probe_fire may run in any
 * number of threads, but not while the provider is being unloaded or freed. */
#ifndef USCOPE_SDT_H
#define USCOPE_SDT_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define USC_SDT_API __attribute__((visibility("default")))
#else
#define USC_SDT_API
#endif

/* Arguments per probe: the six SysV integer argument registers. */
#define USC_PROBE_MAX_ARGS 6
/* Longest provider or probe name (a C identifier). */
#define USC_SDT_NAME_MAX 64

/* An argument's type. The number is the size the note gives it, negative
 * when signed (as in a spec: -4@%esi is a signed 32-bit value). A string is
 * passed as its address (8@%rdi): ask the tracer to read it as a string. */
enum usc_arg_type {
	USC_ARG_END = 0,	/* ends usc_provider_add_probe's list */
	USC_ARG_UINT8 = 1,
	USC_ARG_INT8 = -1,
	USC_ARG_UINT16 = 2,
	USC_ARG_INT16 = -2,
	USC_ARG_UINT32 = 4,
	USC_ARG_INT32 = -4,
	USC_ARG_UINT64 = 8,
	USC_ARG_INT64 = -8,
	USC_ARG_STRING = 16,	/* const char * */
};

struct usc_provider;

/* A probe. Owned by its provider; valid until usc_provider_free. The two
 * fields are public only for usc_probe_enabled and usc_probe_fire to be
 * inline: read them, never write them. Before the provider is loaded (and
 * after it is unloaded) they point to a zero and to a function that does
 * nothing, so both calls are always safe. */
struct usc_probe {
	const volatile uint16_t *semaphore;
	void (*fire)(uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t);
};

/* The message of the calling thread's last failure ("" if none). */
USC_SDT_API const char *usc_sdt_error(void);

/* A provider named name ([A-Za-z_][A-Za-z0-9_]*, at most USC_SDT_NAME_MAX
 * characters). -EINVAL, -ENOMEM. */
USC_SDT_API int usc_provider_new(const char *name, struct usc_provider **out);

/* Add a probe with its argument types, ended by USC_ARG_END (at most
 * USC_PROBE_MAX_ARGS of them). *out (may be NULL) is the probe.
 * -EINVAL (bad name or type), -E2BIG (too many arguments), -EEXIST (a probe
 * of that name, or a clash of the symbols it defines), -EBUSY (the provider
 * is loaded), -ENOMEM. */
USC_SDT_API int usc_provider_add_probe(struct usc_provider *p, struct usc_probe **out,
				       const char *name, ...);
/* The same with an array of n types (language bindings). */
USC_SDT_API int usc_provider_add_probev(struct usc_provider *p, struct usc_probe **out,
					const char *name, const int *types, unsigned n);

/* Build the provider's shared object in a memfd and dlopen it: from here on
 * tracers see its probes. -EALREADY (loaded), -ENOENT (no probes), -ENOMEM,
 * -EIO (libelf or the dynamic loader failed: see usc_sdt_error), or the
 * errno of memfd_create. */
USC_SDT_API int usc_provider_load(struct usc_provider *p);

/* dlclose the object and close the memfd: its probes and semaphores are
 * gone (the probes of this provider become disabled no-ops). The provider
 * can be loaded again. -EINVAL if it is not loaded. */
USC_SDT_API int usc_provider_unload(struct usc_provider *p);

/* Unload if loaded, and free the provider and its probes. NULL is a no-op. */
USC_SDT_API void usc_provider_free(struct usc_provider *p);

/* The memfd of the loaded object (/proc/PID/fd/N names it for a tracer), or
 * -1 when not loaded. It stays the provider's: do not close it. */
USC_SDT_API int usc_provider_fd(const struct usc_provider *p);

/* Is a tracer attached to the probe? The semaphore, read through the
 * pointer the probe holds (so two dependent loads unless that pointer is
 * already in a register), compared with 0, and a branch: check it before
 * computing costly arguments. */
static inline int usc_probe_enabled(const struct usc_probe *probe)
{
	return __builtin_expect(*probe->semaphore != 0, 0);
}

/* Fire the probe with its arguments (integers of the declared types, or
 * const char * for strings): a call to its stub, whatever the semaphore
 * says. Up to 6 arguments; each is passed as a 64-bit register value,
 * which the note's spec reads with the declared size and sign. */
#define usc_probe_fire(...)						\
	((void)sizeof(char[USC__NARGS(__VA_ARGS__) <= 1 + USC_PROBE_MAX_ARGS ? 1 : -1]), \
	 USC__FIRE(__VA_ARGS__, 0, 0, 0, 0, 0, 0, 0))

/* ---- implementation of the macro above --------------------------------- */
#define USC__NARGS(...) USC__NARGS_(__VA_ARGS__, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0)
#define USC__NARGS_(a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, n, ...) n
#define USC__U64(x) ((uint64_t)(uintptr_t)(x))
#define USC__FIRE(p, a, b, c, d, e, f, ...)					\
	((p)->fire(USC__U64(a), USC__U64(b), USC__U64(c), USC__U64(d), USC__U64(e), USC__U64(f)))

#ifdef __cplusplus
}
#endif

#endif
