/* The agent stamps records with the TSC (rdtsc costs a few nanoseconds; a
 * clock_gettime, through the vDSO, several times that); the tracer turns
 * them into CLOCK_MONOTONIC, the clock the kernel engines stamp with, so
 * that events of several engines merge in the right order.
 *
 * A sample is a (tsc, ns) pair taken with a tight bracket (rdtsc, then
 * clock_gettime, then rdtsc; the narrowest of a few). Samples are taken as
 * the tracer polls, and a tsc converts by linear interpolation between the
 * samples around it (past the last, along the last two), so the kernel's
 * own slow adjustments of its clock are followed: the error stays within
 * tens of nanoseconds, not the microseconds one rate fitted at the start
 * drifts by. A recording keeps the samples (REC_CLOCK), and its reader
 * converts the same way. */
#ifndef USC_ENGINE_INJECT_CLOCK_H
#define USC_ENGINE_INJECT_CLOCK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CLOCK_SAMPLES 4096	/* a live tracer's: the older half goes when full */

struct clock_pair {
	uint64_t tsc, ns;
};

struct inj_clock {
	struct clock_pair *s;	/* in time order */
	size_t n, cap;
	bool unbounded;		/* a reader's: every sample kept */
};

/* Take a sample now, unless the last one is less than 10 ms old (force:
 * take it anyway). */
void clock_sample(struct inj_clock *c, int force);
/* Add a sample (a recording's); one not after the last is ignored. */
void clock_add(struct inj_clock *c, uint64_t tsc, uint64_t ns);
/* A tsc as CLOCK_MONOTONIC ns. */
uint64_t clock_ns(const struct inj_clock *c, uint64_t tsc);
/* The newest sample, or NULL. */
const struct clock_pair *clock_last(const struct inj_clock *c);
void clock_free(struct inj_clock *c);

#endif
