/* The engines' records as they write them, turned into events: what a
 * live engine does as it polls, and what a recording's reader does with the
 * records the engine wrote to the file unformatted (src/record/). */
#ifndef USC_ENGINE_RAW_H
#define USC_ENGINE_RAW_H

#include <stddef.h>
#include <stdint.h>

#include "engine/engine.h"

/* How an inject engine hands a thread's ring bytes to usc_raw_out.inject:
 * which image (a process's address space, as usc_raw_out.image described
 * it), which thread slot, the thread, and the bytes (whole records). */
struct usc_raw_inject {
	uint32_t image;
	uint32_t slot;
	int32_t pid, tid;
	uint32_t nbytes;
};

/* One inject record (struct inj_rec, avail bytes readable at r): its
 * site is site, whose runtime address in the image was ip; stamped at
 * time_ns, of thread tid of process pid. vals: INJ_MAX_ARGS of room. 0, or
 * -EINVAL for a record the agent does not write. */
int inject_raw_event(const void *r, size_t avail, const struct usc_site *site, uint64_t ip,
		     uint64_t time_ns, int32_t pid, int32_t tid, const char *comm,
		     struct usc_value *vals, struct usc_event *ev);
/* Its site's index and TSC stamp, to sort before decoding. */
int inject_raw_peek(const void *r, size_t avail, uint32_t *site, uint64_t *tsc, uint32_t *len);

/* The $pystack values of one inject record (as inject_raw_event reads
 * them): fn(ctx, bytes, len) each (python/frame.h's layout). 0, or fn's
 * non-zero. */
int inject_raw_pystacks(const void *r, size_t avail,
			int (*fn)(void *ctx, const void *bytes, uint32_t len), void *ctx);

/* One bpf record (struct bpfeng_rec, len bytes): sites are the session's, in
 * the engine's order. comm: 17 bytes of room; vals: BPFENG_MAX_ARGS. */
int bpf_raw_event(const void *rec, size_t len, const struct usc_site *const *sites,
		  size_t nsites, char *comm, struct usc_value *vals, struct usc_event *ev);
int bpf_raw_peek(const void *rec, size_t len, uint32_t *site, uint64_t *time_ns);

#endif
