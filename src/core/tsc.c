/* TSC to CLOCK_MONOTONIC: see tsc.h. */
#include "core/grow.h"
#include "core/tsc.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <x86intrin.h>

static uint64_t mono(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

void tsc_add(struct tsc_clock *c, uint64_t tsc, uint64_t ns)
{
	if (c->n && tsc <= c->s[c->n - 1].tsc)
		return;
	if (!c->unbounded && c->n == TSC_SAMPLES) {
		/* the older half goes: what is converted now is recent */
		memmove(c->s, c->s + TSC_SAMPLES / 2, (TSC_SAMPLES / 2) * sizeof(*c->s));
		c->n = TSC_SAMPLES / 2;
	}
	if (core_reserve(c->s, c->cap, c->n + 1, 256))
		return;	/* the samples so far serve */
	c->s[c->n++] = (struct tsc_pair){tsc, ns};
}

void tsc_sample(struct tsc_clock *c, int force)
{
	uint64_t best = UINT64_MAX, tsc = 0, ns = 0;

	for (int k = 0; k < 5; k++) {
		uint64_t a = __rdtsc(), t = mono(), b = __rdtsc();

		if (b > a && b - a < best) {
			best = b - a;
			tsc = a + (b - a) / 2;
			ns = t;
		}
	}
	if (!tsc || (c->n && !force && ns < c->s[c->n - 1].ns + 10000000ULL))
		return;
	tsc_add(c, tsc, ns);
}

const struct tsc_pair *tsc_last(const struct tsc_clock *c)
{
	return c->n ? &c->s[c->n - 1] : NULL;
}

void tsc_free(struct tsc_clock *c)
{
	if (!c)
		return;
	free(c->s);
	free(c);
}

/* ns of tsc along the line through samples i and j; a time before 0 or
 * past 2^64 (samples from a damaged recording) is held at the end of the
 * range: converting it would be undefined */
static uint64_t along(const struct tsc_clock *c, size_t i, size_t j, uint64_t tsc)
{
	double slope = (double)(c->s[j].ns - c->s[i].ns) / (double)(c->s[j].tsc - c->s[i].tsc);
	double ns = (double)c->s[i].ns + ((double)(int64_t)(tsc - c->s[i].tsc)) * slope;

	if (!(ns > 0))
		return 0;	/* NaN too */
	return ns < 18446744073709551616.0 ? (uint64_t)ns : UINT64_MAX;
}

uint64_t tsc_ns(const struct tsc_clock *c, uint64_t tsc)
{
	size_t lo = 0, hi;

	if (c->n == 0)
		return mono();
	if (c->n == 1)
		return c->s[0].ns;	/* no rate yet: as the only sample */
	/* the last sample at or before tsc */
	hi = c->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (c->s[mid].tsc <= tsc)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0)
		return along(c, 0, 1, tsc);
	if (lo >= c->n)
		return along(c, c->n - 2, c->n - 1, tsc);
	return along(c, lo - 1, lo, tsc);
}
