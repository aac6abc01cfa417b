/* uscope e2e target for USDT probes defined at run time (libuscope-sdt):
 * provider "sdtapp", loaded at start, with
 *
 *   ints  (int8, uint8, int16, uint16, int32, uint32)
 *   wide  (int64, uint64, string, int32)
 *   str   (string)
 *   noargs ()
 *
 * Round i (0-based) fires, in this order:
 *   ints   -(i+1), 250+i, -30000-i, 65000+i, -2000000000-i, 4000000000+i
 *   wide   -9000000000000000000-i, 18000000000000000000+i, MSGS[i % 3], i
 *   str    PATHS[i % 3]
 *   noargs
 * (tests/e2e/test_sdt.py has the same tables).
 *
 *   sdt wait         print "ready PID FD" (FD: the provider's memfd), then
 *                    one round per line read from stdin, each followed by
 *                    "round K enabled=E" where E is how many of the four
 *                    probes were enabled when it fired (K counts from 1);
 *                    at EOF print "sdt done" and exit 0
 *   sdt traced N [PROBE...]
 *                    wait (up to 20 s) until each PROBE (default: ints) is
 *                    enabled (a tracer is attached), then N rounds, print
 *                    "sdt done n=N enabled=E" (E: enabled probes at the last
 *                    round), exit 0; exit 3 if they were not all enabled */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <uscope/sdt.h>

static const char *const MSGS[3] = {"hello", "with space", "quote \" and \\ backslash"};
static const char *const PATHS[3] = {"/etc/hosts", "/tmp/a b", "/var/log/x.log"};

static struct usc_probe *p_ints, *p_wide, *p_str, *p_noargs;

static struct usc_probe *by_name(const char *name)
{
	return !strcmp(name, "ints") ? p_ints : !strcmp(name, "wide") ? p_wide :
	       !strcmp(name, "str") ? p_str : !strcmp(name, "noargs") ? p_noargs : NULL;
}

/* Are all the probes argv[0..n) (default: ints) enabled? */
static int all_enabled(char **names, int n)
{
	if (n == 0)
		return usc_probe_enabled(p_ints);
	for (int i = 0; i < n; i++) {
		struct usc_probe *p = by_name(names[i]);

		if (!p || !usc_probe_enabled(p))
			return 0;
	}
	return 1;
}

static int enabled_count(void)
{
	return usc_probe_enabled(p_ints) + usc_probe_enabled(p_wide) + usc_probe_enabled(p_str) +
	       usc_probe_enabled(p_noargs);
}

static int round_(int i)
{
	int e = enabled_count();

	usc_probe_fire(p_ints, (int8_t)-(i + 1), (uint8_t)(250 + i), (int16_t)(-30000 - i),
		       (uint16_t)(65000 + i), (int32_t)(-2000000000 - i), (uint32_t)(4000000000u + i));
	usc_probe_fire(p_wide, (int64_t)(-9000000000000000000LL - i),
		       (uint64_t)(18000000000000000000ULL + (uint64_t)i), MSGS[i % 3], (int32_t)i);
	usc_probe_fire(p_str, PATHS[i % 3]);
	usc_probe_fire(p_noargs);
	return e;
}

static void die(const char *what, int err)
{
	fprintf(stderr, "sdt: %s: %d %s\n", what, err, usc_sdt_error());
	exit(2);
}

int main(int argc, char **argv)
{
	struct usc_provider *prov;
	int err;

	if ((err = usc_provider_new("sdtapp", &prov)))
		die("usc_provider_new", err);
	if ((err = usc_provider_add_probe(prov, &p_ints, "ints", USC_ARG_INT8, USC_ARG_UINT8,
					  USC_ARG_INT16, USC_ARG_UINT16, USC_ARG_INT32,
					  USC_ARG_UINT32, USC_ARG_END)) ||
	    (err = usc_provider_add_probe(prov, &p_wide, "wide", USC_ARG_INT64, USC_ARG_UINT64,
					  USC_ARG_STRING, USC_ARG_INT32, USC_ARG_END)) ||
	    (err = usc_provider_add_probe(prov, &p_str, "str", USC_ARG_STRING, USC_ARG_END)) ||
	    (err = usc_provider_add_probe(prov, &p_noargs, "noargs", USC_ARG_END)))
		die("usc_provider_add_probe", err);
	if ((err = usc_provider_load(prov)))
		die("usc_provider_load", err);

	if (argc > 1 && !strcmp(argv[1], "wait")) {
		char buf[64];
		int k = 0;

		printf("ready %d %d\n", (int)getpid(), usc_provider_fd(prov));
		fflush(stdout);
		while (fgets(buf, sizeof(buf), stdin)) {
			int e = round_(k);

			printf("round %d enabled=%d\n", ++k, e);
			fflush(stdout);
		}
		printf("sdt done\n");
	} else if (argc > 2 && !strcmp(argv[1], "traced")) {
		int n = atoi(argv[2]), e = 0;
		struct timespec ms = {0, 1000000};

		for (int t = 0; !all_enabled(argv + 3, argc - 3); t++) {
			if (t == 20000) {
				printf("sdt: not all enabled\n");
				return 3;
			}
			nanosleep(&ms, NULL);
		}
		for (int i = 0; i < n; i++)
			e = round_(i);
		printf("sdt done n=%d enabled=%d\n", n, e);
	} else {
		fprintf(stderr, "usage: sdt wait | sdt traced N\n");
		return 2;
	}
	usc_provider_free(prov);
	return 0;
}
