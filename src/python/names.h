/* Python by name in uscope: per traced process, its code objects (read
 * from its memory while it lives, with symbolize.h's cache, or told: by a
 * recording, by the inject agent's copies of a py: probe's functions), and
 * Python frames as interned locations (qualname, file, line), which a
 * struct usc_stack carries as its Python frames (probe/event.h). The state
 * hangs off the session's cache (CACHE_EXT_PYTHON), as the stack module's
 * does.
 *
 * A code object read from a live process is checked against reuse as
 * symbolize.h says; what was told of one stands until something else is
 * told at its address (a recording is read back with no process at all).
 * The process's memory comes first while it can be read: a told copy is
 * what remains of a process that has gone. */
#ifndef USC_PYTHON_NAMES_H
#define USC_PYTHON_NAMES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "probe/event.h"
#include "python/detect.h"
#include "python/frame.h"

struct usc_cache;

/* A code object, by name: what a recording keeps of it. */
struct python_code_info {
	uint64_t addr;
	const char *module;		/* its module's __name__; NULL: not known */
	const char *qualname, *filename;
	int firstlineno;
	int firsttraceable;		/* code units before the first traceable one */
	const uint8_t *linetable;	/* co_linetable (NULL: not known) */
	size_t linetable_len;
};

/* Process pid runs rt: its code objects are read from its memory (a pid
 * not told so is looked for when first needed, unless the cache is
 * frozen: a recording). 0 or -ENOMEM. */
int python_names_runtime(struct usc_cache *c, pid_t pid, const struct python_runtime *rt);

/* What is known of a code object of pid without its memory. 0 or -ENOMEM. */
int python_names_tell(struct usc_cache *c, pid_t pid, const struct python_code_info *ci);

/* The code object at addr in pid: from its memory, else from what was
 * told. The strings stay valid until the next call for pid. 0, or -ENOENT
 * (neither: not a code object, or gone untold). */
int python_names_code(struct usc_cache *c, pid_t pid, uint64_t addr,
		      struct python_code_info *out);

/* A Python location (python_names_loc's), and its id. */
struct python_loc {
	const char *qualname, *filename;
	int line;		/* -1: none */
};

/* The id of (qualname, filename, line), the same for the same three; 0:
 * out of memory. */
uint64_t python_names_intern(struct usc_cache *c, const char *qualname, const char *filename,
			     int line);
/* The location of an id; NULL for none. */
const struct python_loc *python_names_loc(struct usc_cache *c, uint64_t id);

/* A py: probe's function, by its code object: qualname "module:qualname"
 * (or the qualname alone when its module is not known), filename, line
 * its first line; interned (stable until the cache is freed). A code
 * object not known in pid is looked for in every process told of one.
 * NULL: out of memory. */
const struct python_loc *python_names_func(struct usc_cache *c, pid_t pid, uint64_t code);

/* $pystack as an engine stored it (python_stack_hdr and frames, len bytes)
 * into st (room for max frames): one Python frame a frame CPython shows,
 * innermost first, ending as the walk did. 0, -EINVAL (not a $pystack),
 * -ENOMEM. */
int python_names_stack(struct usc_cache *c, pid_t pid, const void *bytes, uint32_t len,
		       struct usc_stack *st, uint32_t max);

/* One walked frame as a location id, and whether CPython hides it
 * (incomplete: not shown, its PYFRAME_ENTRY still counts); a code object
 * that cannot be read gets a location of its own ("<unknown>"). 0: out
 * of memory. */
uint64_t python_names_frame(struct usc_cache *c, pid_t pid, const struct python_frame *f,
			    bool *hidden);

/* Every code object of pid that was read or told since the last call,
 * each once: fn(ctx, pid, info) (a recording writes them). Stops at fn's
 * first non-zero return, which it returns. */
int python_names_new_codes(struct usc_cache *c, pid_t pid,
			   int (*fn)(void *ctx, pid_t pid, const struct python_code_info *ci),
			   void *ctx);

#endif
