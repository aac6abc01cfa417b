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
#ifndef USC_CORE_TSC_H
#define USC_CORE_TSC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TSC_SAMPLES 4096	/* a live tracer's: the older half goes when full */

struct tsc_pair {
	uint64_t tsc, ns;
};

struct tsc_clock {
	struct tsc_pair *s;	/* in time order */
	size_t n, cap;
	bool unbounded;		/* a reader's: every sample kept */
};

/* Take a sample now, unless the last one is less than 10 ms old (force:
 * take it anyway). */
void tsc_sample(struct tsc_clock *c, int force);
/* Add a sample (a recording's); one not after the last is ignored. */
void tsc_add(struct tsc_clock *c, uint64_t tsc, uint64_t ns);
/* A tsc as CLOCK_MONOTONIC ns. */
uint64_t tsc_ns(const struct tsc_clock *c, uint64_t tsc);
/* The newest sample, or NULL. */
const struct tsc_pair *tsc_last(const struct tsc_clock *c);
void tsc_free(struct tsc_clock *c);

#endif
