/* libFuzzer target for the folded-stack parser and the flame graph's
 * layout and SVG (src/flame/flame.c).
 *
 * Feeds arbitrary text to usc_flame_parse and checks what it promises: a
 * failure is -EINVAL with a line number inside the text and a message, the
 * same when the lines are given one by one; a success lays out a tree whose
 * frames nest (each inside its parent, siblings apart, the root the whole
 * width) and writes an SVG that is well-formed where the input could break
 * it: valid UTF-8, no control character, every '&' an entity, no '<' in a
 * title or a label, one <g>, <title>, <rect> and <text> a frame; and the
 * same SVG both ways. Any violation aborts. */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flame/flame.h"

#define CHECK(cond)                                                             \
	do {                                                                    \
		if (!(cond)) {                                                  \
			fprintf(stderr, "fuzz_flame: invariant failed: %s (line %d)\n", \
				#cond, __LINE__);                               \
			abort();                                                \
		}                                                               \
	} while (0)

static size_t count_of(const char *s, size_t n, const char *what)
{
	size_t k = 0, wl = strlen(what);

	for (const char *p = s; (p = memmem(p, n - (size_t)(p - s), what, wl)); p += wl)
		k++;
	return k;
}

/* Strict UTF-8, and no control character but '\n' and '\t'. */
static void check_text(const unsigned char *s, size_t n)
{
	for (size_t i = 0; i < n;) {
		unsigned c = s[i];
		size_t len;
		uint32_t cp;

		if (c < 0x80) {
			CHECK(c >= 0x20 || c == '\n' || c == '\t');
			i++;
			continue;
		}
		CHECK(c >= 0xc2 && c <= 0xf4);
		len = c < 0xe0 ? 2 : c < 0xf0 ? 3 : 4;
		cp = c & (len == 2 ? 0x1f : len == 3 ? 0x0f : 0x07);
		CHECK(i + len <= n);
		for (size_t k = 1; k < len; k++) {
			CHECK((s[i + k] & 0xc0) == 0x80);
			cp = cp << 6 | (s[i + k] & 0x3f);
		}
		CHECK(len != 3 || cp >= 0x800);
		CHECK(len != 4 || (cp >= 0x10000 && cp <= 0x10ffff));
		CHECK(!(cp >= 0xd800 && cp <= 0xdfff) && cp != 0xfffe && cp != 0xffff);
		i += len;
	}
}

static void check_frames(const struct usc_flame *f, const struct usc_flame_frame *fr, size_t n,
			 double height)
{
	const struct usc_flame_frame **path;
	uint64_t *next;		/* per depth: where the next sibling may start */

	CHECK(n >= 1);
	CHECK(fr[0].depth == 0 && fr[0].count == usc_flame_total(f) && fr[0].start == 0);
	CHECK(fr[0].len == 3 && !memcmp(fr[0].name, "all", 3));
	CHECK(fr[0].x == USC_FLAME_XPAD);
	CHECK(fabs(fr[0].width - (USC_FLAME_WIDTH_DEFAULT - 2 * USC_FLAME_XPAD)) < 1e-6);
	path = calloc(n + 1, sizeof(*path));
	next = calloc(n + 1, sizeof(*next));
	CHECK(path && next);
	path[0] = &fr[0];
	for (size_t i = 1; i < n; i++) {
		const struct usc_flame_frame *e = &fr[i], *p;

		/* pre-order: a frame is its parent's child or a deeper one's sibling */
		CHECK(e->depth >= 1 && e->depth <= fr[i - 1].depth + 1);
		p = path[e->depth - 1];
		if (e->depth == fr[i - 1].depth + 1) {
			next[e->depth] = p->start;
		} else {
			/* after its previous sibling, in byte order of the names */
			const struct usc_flame_frame *q = path[e->depth];
			size_t m = q->len < e->len ? q->len : e->len;
			int c = memcmp(q->name, e->name, m);

			CHECK(c < 0 || (c == 0 && q->len < e->len));
		}
		CHECK(e->start >= next[e->depth]);
		CHECK(e->count >= 1 && e->count <= p->count);
		CHECK(e->start >= p->start && e->start - p->start <= p->count - e->count);
		CHECK(e->width >= USC_FLAME_MIN_WIDTH);
		CHECK(e->x >= USC_FLAME_XPAD - 1e-6 &&
		      e->x + e->width <= USC_FLAME_WIDTH_DEFAULT - USC_FLAME_XPAD + 1e-6);
		next[e->depth] = e->start + e->count;
		path[e->depth] = e;
	}
	for (size_t i = 0; i < n; i++)
		CHECK(fr[i].y == height - USC_FLAME_YPAD_BOTTOM -
				 (fr[i].depth + 1.0) * USC_FLAME_FRAME_HEIGHT + 1);
	free(path);
	free(next);
}

static void check_svg(const char *s, size_t n, size_t nframes)
{
	const char *frames = memmem(s, n, "<g id=\"frames\">", 15);

	check_text((const unsigned char *)s, n);
	CHECK(frames);
	/* the part the input reaches */
	n -= (size_t)(frames - s);
	s = frames;
	CHECK(count_of(s, n, "<g>") == nframes);
	CHECK(count_of(s, n, "</g>") == nframes + 1);
	CHECK(count_of(s, n, "<title>") == nframes);
	CHECK(count_of(s, n, "</title>") == nframes);
	CHECK(count_of(s, n, "<rect ") == nframes);
	CHECK(count_of(s, n, "<text ") == nframes);
	CHECK(count_of(s, n, "</text>") == nframes);
	for (size_t i = 0; i < n; i++) {
		if (s[i] == '&')
			CHECK(!strncmp(s + i, "&lt;", 4) || !strncmp(s + i, "&gt;", 4) ||
			      !strncmp(s + i, "&amp;", 5) || !strncmp(s + i, "&quot;", 6) ||
			      !strncmp(s + i, "&apos;", 6));
		/* a tag is one of ours */
		if (s[i] == '<')
			CHECK(!strncmp(s + i, "<g>", 3) || !strncmp(s + i, "</g>", 4) ||
			      !strncmp(s + i, "<g id=", 6) || !strncmp(s + i, "<title>", 7) ||
			      !strncmp(s + i, "</title>", 8) || !strncmp(s + i, "<rect ", 6) ||
			      !strncmp(s + i, "<text ", 6) || !strncmp(s + i, "</text>", 7) ||
			      !strncmp(s + i, "</svg>", 6));
		if (s[i] == '>')
			CHECK(i && (s[i - 1] == '"' || s[i - 1] == '/' || !strncmp(s + i - 2, "<g", 2) ||
				    !strncmp(s + i - 6, "<title", 6) ||
				    !strncmp(s + i - 7, "</title", 7) || !strncmp(s + i - 6, "</text", 6) ||
				    !strncmp(s + i - 3, "</g", 3) || !strncmp(s + i - 5, "</svg", 5)));
	}
}

static char *svg_of(const struct usc_flame *f, size_t *len)
{
	char *buf = NULL;
	FILE *fp = open_memstream(&buf, len);

	CHECK(fp);
	CHECK(usc_flame_write_svg(f, NULL, fp) == 0);
	CHECK(fclose(fp) == 0);
	return buf;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *text = (const char *)data;
	struct usc_flame *f, *g;
	struct usc_flame_error err = {0}, err2 = {0};
	size_t lines = 0, at = 0;
	int ret, ret2 = 0;

	for (size_t i = 0; i < size; i++)
		lines += data[i] == '\n';
	lines += size && data[size - 1] != '\n';
	if (usc_flame_new(&f))
		return 0;
	ret = usc_flame_parse(f, text, size, &err);
	CHECK(ret == 0 || ret == -EINVAL || ret == -ENOMEM);
	if (ret == -EINVAL) {
		CHECK(err.line >= 1 && err.line <= lines);
		CHECK(err.msg[0] && memchr(err.msg, 0, sizeof(err.msg)));
	}
	/* the same, a line at a time */
	if (usc_flame_new(&g)) {
		usc_flame_free(f);
		return 0;
	}
	while (at < size && !ret2) {
		const char *nl = memchr(text + at, '\n', size - at);
		size_t end = nl ? (size_t)(nl - text) : size;

		ret2 = usc_flame_add_line(g, text + at, end - at, &err2);
		at = end + 1;
	}
	if (ret != -ENOMEM && ret2 != -ENOMEM) {
		CHECK(ret2 == ret);
		CHECK(!ret || err2.line == err.line);
		CHECK(!ret || !strcmp(err2.msg, err.msg));
		CHECK(usc_flame_total(f) == usc_flame_total(g));
	}
	if (!ret && !ret2) {
		struct usc_flame_frame *fr;
		size_t n, l1, l2;
		double h;
		int lr = usc_flame_layout(f, NULL, &fr, &n, &h);

		CHECK(lr == 0 || lr == -ENOMEM || (lr == -ENODATA && !usc_flame_total(f)));
		if (!lr) {
			char *a, *b;

			check_frames(f, fr, n, h);
			a = svg_of(f, &l1);
			b = svg_of(g, &l2);
			check_svg(a, l1, n);
			CHECK(l1 == l2 && !memcmp(a, b, l1));
			free(a);
			free(b);
			free(fr);
		}
	}
	usc_flame_free(f);
	usc_flame_free(g);
	return 0;
}
