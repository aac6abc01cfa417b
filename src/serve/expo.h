/* Writing metrics in the Prometheus text exposition format (version 0.0.4)
 * or in OpenMetrics (1.0.0): metric families with their HELP, TYPE (and
 * UNIT), samples with labels escaped as both formats say (\\, \" and \n;
 * bytes that are not UTF-8 as the four characters \xNN, so a scrape never
 * fails on them), numbers as OpenMetrics' canonical form, and the # EOF
 * that ends an OpenMetrics exposition.
 *
 * The names: a label name is [a-zA-Z_][a-zA-Z0-9_]*, and those beginning
 * with "__" are Prometheus' own. */
#ifndef USC_SERVE_EXPO_H
#define USC_SERVE_EXPO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "serve/serve.h"

struct expo {
	enum serve_format fmt;
	char *buf;
	size_t len, cap;
	int err;		/* -ENOMEM once a write failed: the rest is dropped */
};

struct expo_label {
	const char *name;
	const char *value;
	size_t len;		/* of value */
};

enum expo_type { EXPO_COUNTER, EXPO_GAUGE, EXPO_HISTOGRAM };

/* A family's metadata: name is the family's (a counter's without _total),
 * unit NULL or its unit (the name ends in _UNIT). */
void expo_family(struct expo *e, const char *name, enum expo_type type, const char *unit,
		 const char *help);
/* A sample: name and suffix ("_total", "_bucket", "" ...), the labels (a
 * label with a NULL value is left out), then le when not NULL, and the
 * value already written as a number. */
void expo_sample(struct expo *e, const char *name, const char *suffix,
		 const struct expo_label *labels, size_t n, const char *le, const char *value);
/* An OpenMetrics exposition's end ("# EOF"); nothing for text. */
void expo_end(struct expo *e);
/* Append s as it is. */
void expo_raw(struct expo *e, const char *s, size_t n);
/* Append s as a label value's text escapes it (without the quotes). */
void expo_escape(struct expo *e, const char *s, size_t n);

/* A number as OpenMetrics wants le values, and as every value is written
 * here: the shortest text that reads back as v, "%g"-shaped (1e-05,
 * 0.0001, 100000.0, 1e+06), with ".0" when it has neither '.' nor an
 * exponent; "+Inf", "-Inf", "NaN". buf of 32 bytes. */
void expo_number(double v, char buf[32]);

/* Make name a label name: bytes outside [a-zA-Z0-9_] become '_', a leading
 * digit gets a '_' before it, a leading "__" gets "key" before it. */
void expo_label_name(const char *name, char *out, size_t len);
/* Is name one --label may give: the grammar, not "__...", and none of
 * uscope's own (probe, pid, comm, binary, le)? */
bool expo_label_name_ok(const char *name);
/* Is name one of the labels uscope sets itself? */
bool expo_label_reserved(const char *name);

#endif
