/* What a script prints (print.c), in bpftrace's text and JSON: printf's
 * formats with their values, values by type (a usym as its symbol, a
 * ustack as its frames, func and probe by their site), and maps at the end
 * (@name[key]: value, hist and lhist bars, stats), sorted as bpftrace
 * sorts them. */
#ifndef USC_SCRIPT_PRINT_H
#define USC_SCRIPT_PRINT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "script/script_int.h"

struct usc_cache;
struct usc_site;

/* A growing string. */
struct sbuf {
	char *p;
	size_t n, cap;
	bool oom;
};
void sbuf_add(struct sbuf *b, const char *s, size_t n);
void sbuf_printf(struct sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void sbuf_free(struct sbuf *b);

/* Where output goes and what names its values. */
struct script_printer {
	FILE *fp;
	bool json;
	const struct usc_script *s;
	struct usc_cache *cache;
	const struct usc_site *sites;	/* the session's (func, probe) */
	size_t nsites;
	bool failed;			/* a write failed (said once) */
};

/* A value of type t (bytes: its field's, ty_size of them) as text;
 * indent: a stack's frames' (4 in a key, 8 in a value). */
void script_value_str(struct script_printer *p, const struct ty *t, const uint8_t *bytes,
		      pid_t pid, int indent, struct sbuf *out);
/* An output record's values formatted by its format f (printf, cat's path):
 * the text. */
void script_format(struct script_printer *p, const struct script_fmt *f, const uint8_t *vals,
		   uint32_t len, pid_t pid, struct sbuf *out);
/* Write text as bpftrace's output of kind ("printf", "time", "value"):
 * as it is, or a JSON line. */
int script_emit_text(struct script_printer *p, const char *kind, const char *text, size_t n);

/* A map's rows, to print. */
struct script_row {
	const uint8_t *key;
	const uint8_t *val;	/* a plain value, or the combined aggregation */
};
/* Print map m's rows (sorted here), the top ones when top, values divided
 * by div when div (print(@m, top, div)). */
int script_print_map(struct script_printer *p, int m, struct script_row *rows, size_t n,
		     uint32_t top, uint32_t div);

#endif
