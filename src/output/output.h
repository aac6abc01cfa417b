/* Formatting events: ftrace-shaped text, or one JSON object per line. Every
 * engine delivers struct usc_event, so every engine prints the same way.
 * The output module formats into its own buffer; the caller writes it. */
#ifndef USC_OUTPUT_OUTPUT_H
#define USC_OUTPUT_OUTPUT_H

#include <stdbool.h>
#include <stddef.h>

#include <sys/types.h>

#include "probe/event.h"
#include "resolve/resolve.h"

struct usc_cache;

/* The version of the shape of every --json output (doc/json.md,
 * doc/json/): each JSON object ends with "v":N. A field is only ever
 * added; renaming or removing one, or changing its type or meaning, makes
 * it N + 1. OUTPUT_JSON_END ends an object and its line. */
#define USC_JSON_VERSION 1
#define OUTPUT_JSON_STR_(n) #n
#define OUTPUT_JSON_STR(n) OUTPUT_JSON_STR_(n)
#define OUTPUT_JSON_END ",\"v\":" OUTPUT_JSON_STR(USC_JSON_VERSION) "}\n"

struct usc_output {
	bool json;
	char *buf;
	size_t len, cap;
	struct usc_cache *cache;	/* symbolizes :symbol values; NULL: shown in hex */
};

/* Append one event (with its trailing newline) to o->buf. 0 or -ENOMEM. */
/* What an event is called: its site's label, or a py: probe's Python
 * function ("module:qualname", "__return" after it for a return). Its
 * length, as snprintf. */
int output_event_label(struct usc_output *o, const struct usc_event *ev, char *buf, size_t len);
int output_event(struct usc_output *o, const struct usc_event *ev);
/* Append just the event's arguments, as output_event formats them: text
 * " name=value ..." (nothing when there are none), or in JSON mode the object
 * {"name":value,...}. No newline. 0 or -ENOMEM. */
int output_event_args(struct usc_output *o, const struct usc_event *ev);
/* Append argument i's value alone, as output_event_args writes it. 0 or
 * -ENOMEM. */
int output_arg_value(struct usc_output *o, const struct usc_event *ev, unsigned i);
/* Append the event's task as events show it: text "TID", JSON
 * ,"pid":N,"tid":N (the host's); a task in a PID namespace below ours (a
 * container, ns/ns.h: asked through o->cache) also has its ids inside,
 * "TID/NSTID" and ,"ns_pid":N,"ns_tid":N. 0 or -ENOMEM. */
int output_ids(struct usc_output *o, const struct usc_event *ev);
/* Append s as it is. 0 or -ENOMEM. */
int output_raw(struct usc_output *o, const char *s);
void output_reset(struct usc_output *o);
void output_free(struct usc_output *o);

/* One stack frame as text ("func+0xoff (module) file.c:line"). 0 or -ENOMEM. */
struct stack_sym;
int output_frame(struct usc_output *o, const struct stack_sym *f);

/* A stack: text, a line a frame (indented; the reason it ends, if it does
 * not reach its outermost frame); JSON, the array of frames. 0 or -ENOMEM. */
struct usc_stack;
int output_stack(struct usc_output *o, pid_t pid, const struct usc_stack *st);
/* A stack folded: the frames' names, outermost first, joined by ';'. */
int output_stack_folded(struct usc_output *o, pid_t pid, const struct usc_stack *st);

/* Escapers, exposed for tests. They append to o->buf. */
int output_c_string(struct usc_output *o, const char *s, size_t n);
int output_json_string(struct usc_output *o, const char *s, size_t n);

#endif
