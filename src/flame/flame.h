/* Flame graphs: folded stacks ("main;parse;lex 1234", the outermost frame
 * first, then a count) merged into a tree by common prefix, laid out as
 * flamegraph.pl lays them out, and written as one self-contained SVG (its
 * style and its click-to-zoom and search script inline, nothing fetched).
 *
 * The library part of `uscope flamegraph` and `export --format svg` (the
 * svg sink, src/sink/svg.c): it never prints; it returns negative errno,
 * and a bad line is described in a struct usc_flame_error with its line
 * number. */
#ifndef USC_FLAME_FLAME_H
#define USC_FLAME_FLAME_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct usc_flame;

/* What was wrong with the folded text, and on which line (1-based). */
struct usc_flame_error {
	size_t line;
	char msg[160];
};

/* The largest count a line may carry, and the largest sum of them all. */
#define USC_FLAME_COUNT_MAX ((uint64_t)INT64_MAX)

enum usc_flame_palette {
	USC_FLAME_HOT,		/* flamegraph.pl's default: reds to yellows */
	USC_FLAME_MEM,		/* greens to blues */
	USC_FLAME_IO,		/* blues */
	USC_FLAME_RED,
	USC_FLAME_GREEN,
	USC_FLAME_BLUE,
	USC_FLAME_AQUA,
	USC_FLAME_YELLOW,
	USC_FLAME_PURPLE,
	USC_FLAME_ORANGE,
	USC_FLAME_PALETTE_NR
};

struct usc_flame_opts {
	const char *title;		/* NULL: "Flame Graph" */
	const char *countname;		/* what a count is, in the tooltips; NULL: "samples" */
	unsigned width;			/* the image's width in px; 0: 1200 */
	enum usc_flame_palette palette;
};

#define USC_FLAME_WIDTH_DEFAULT 1200
#define USC_FLAME_WIDTH_MIN 200
#define USC_FLAME_WIDTH_MAX 100000

/* The geometry, as flamegraph.pl's: 16 px a frame (15 drawn), 10 px left
 * and right, a frame narrower than 0.1 px left out with its callees, 12 px
 * Verdana at 0.59 em a character. */
#define USC_FLAME_XPAD 10
#define USC_FLAME_FRAME_HEIGHT 16
#define USC_FLAME_YPAD_TOP 36		/* the title */
#define USC_FLAME_YPAD_BOTTOM 34	/* the details line */
#define USC_FLAME_MIN_WIDTH 0.1
#define USC_FLAME_CHAR_WIDTH (12 * 0.59)

/* An empty tree (its root, "all", has no samples yet). 0 or -ENOMEM. */
int usc_flame_new(struct usc_flame **out);
void usc_flame_free(struct usc_flame *f);

/* One folded line, without its newline ("\r" before it is ignored; an
 * empty or blank line is skipped). Lines are numbered from 1 by the calls.
 * 0; -EINVAL with *err filled for a bad line (no count, a count that is not
 * a number, negative or above USC_FLAME_COUNT_MAX, counts adding up to more
 * than that, an empty frame name); -ENOMEM. err may be NULL. */
int usc_flame_add_line(struct usc_flame *f, const char *line, size_t len,
		       struct usc_flame_error *err);
/* Every line of text[0..len) (the last one may lack its newline). The
 * same returns; the first bad line stops it. */
int usc_flame_parse(struct usc_flame *f, const char *text, size_t len,
		    struct usc_flame_error *err);

/* The sum of every line's count (the root's). */
uint64_t usc_flame_total(const struct usc_flame *f);

/* A frame as drawn: the root "all" first, then depth first, the children
 * of a frame in byte order of their names (flamegraph.pl sorts its input
 * lines), each right of its parent's own (self) samples. */
struct usc_flame_frame {
	const char *name;	/* not NUL-terminated; not escaped */
	size_t len;
	uint64_t count;		/* its samples and its callees' */
	uint64_t start;		/* the samples left of it */
	unsigned depth;		/* 0: the root */
	double x, y, width;	/* px; y is its top, the root lowest */
};

/* The frames of f drawn with o (NULL: the defaults), in *frames (the caller
 * frees it; its names point into f), *n of them; *height is the image's
 * height in px. 0, -ENODATA when f has no samples, -ENOMEM. */
int usc_flame_layout(const struct usc_flame *f, const struct usc_flame_opts *o,
		     struct usc_flame_frame **frames, size_t *n, double *height);

/* The SVG of f drawn with o (NULL: the defaults) to fp. 0, -ENODATA when f
 * has no samples, -ENOMEM, or -errno of a failed write. */
int usc_flame_write_svg(const struct usc_flame *f, const struct usc_flame_opts *o, FILE *fp);

/* The palette called name, or -EINVAL; the names, for messages. */
int usc_flame_palette_parse(const char *name);
const char *usc_flame_palette_name(enum usc_flame_palette p);
extern const char usc_flame_palette_list[];	/* "hot, mem, io, ..." */

#endif
