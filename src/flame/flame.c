/* Folded stacks -> a merged tree -> a flame graph in SVG (flame.h).
 *
 * The tree is an array of nodes, each (parent, name) found through an
 * open-addressing table keyed by a hash of both, so a line costs one lookup
 * a frame and memory grows with the distinct paths, not the lines; a line's
 * count is added to every node from its leaf up to the root. The layout
 * sorts the nodes once by (parent, name), which puts every node's children
 * next to each other in name order, and walks the tree depth first with an
 * explicit stack (a stack of any depth is fine). Nothing recurses. */
#include "core/grow.h"
#include "flame/flame.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

struct fnode {
	uint64_t total;		/* its samples and its callees' */
	uint64_t hash;		/* of (parent, name) */
	size_t name, len;	/* in names */
	uint32_t parent;	/* index + 1; 0: the root */
};

struct usc_flame {
	struct fnode *nodes;	/* [0]: the root, "all" */
	size_t n, cap;
	uint32_t *slots;	/* node index + 1; 0: empty */
	size_t nslots;
	char *names;
	size_t nlen, ncap;
	size_t lineno;
};

static const char root_name[] = "all";

static const char *const palettes[USC_FLAME_PALETTE_NR] = {
	"hot", "mem", "io", "red", "green", "blue", "aqua", "yellow", "purple", "orange",
};
const char usc_flame_palette_list[] =
	"hot, mem, io, red, green, blue, aqua, yellow, purple, orange";

int usc_flame_palette_parse(const char *name)
{
	for (int i = 0; i < USC_FLAME_PALETTE_NR; i++)
		if (!strcmp(name, palettes[i]))
			return i;
	return -EINVAL;
}

const char *usc_flame_palette_name(enum usc_flame_palette p)
{
	return (unsigned)p < USC_FLAME_PALETTE_NR ? palettes[p] : "?";
}

static uint64_t fnv1a(const char *s, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ULL;

	for (size_t i = 0; i < n; i++) {
		h ^= (unsigned char)s[i];
		h *= 0x100000001b3ULL;
	}
	return h;
}

static uint64_t key_hash(uint32_t parent, const char *name, size_t len)
{
	uint64_t h = fnv1a(name, len) ^ ((uint64_t)parent * 0x9e3779b97f4a7c15ULL);

	return h ^ (h >> 29);
}

static int names_add(struct usc_flame *f, const char *s, size_t len, size_t *off)
{
	if (len > SIZE_MAX / 2 - f->nlen)
		return -ENOMEM;
	if (core_reserve(f->names, f->ncap, f->nlen + len, 4096))
		return -ENOMEM;
	memcpy(f->names + f->nlen, s, len);
	*off = f->nlen;
	f->nlen += len;
	return 0;
}

static int slots_grow(struct usc_flame *f)
{
	size_t ns = f->nslots ? f->nslots * 2 : 1024;
	uint32_t *slots;

	if (ns > SIZE_MAX / sizeof(*slots))
		return -ENOMEM;
	slots = calloc(ns, sizeof(*slots));
	if (!slots)
		return -ENOMEM;
	for (size_t i = 1; i < f->n; i++) {
		size_t j = (size_t)f->nodes[i].hash & (ns - 1);

		while (slots[j])
			j = (j + 1) & (ns - 1);
		slots[j] = (uint32_t)i + 1;
	}
	free(f->slots);
	f->slots = slots;
	f->nslots = ns;
	return 0;
}

/* The node of name under parent (index + 1), made when new: its index + 1
 * in *out. 0 or -ENOMEM. */
static int node_get(struct usc_flame *f, uint32_t parent, const char *name, size_t len,
		    uint32_t *out)
{
	uint64_t h = key_hash(parent, name, len);
	size_t j;
	int ret;

	if ((f->n + 1) * 4 > f->nslots * 3 && (ret = slots_grow(f)))
		return ret;
	for (j = (size_t)h & (f->nslots - 1); f->slots[j]; j = (j + 1) & (f->nslots - 1)) {
		const struct fnode *p = &f->nodes[f->slots[j] - 1];

		if (p->hash == h && p->parent == parent && p->len == len &&
		    !memcmp(f->names + p->name, name, len)) {
			*out = f->slots[j];
			return 0;
		}
	}
	if (f->n >= UINT32_MAX - 1)
		return -ENOMEM;
	if (core_reserve(f->nodes, f->cap, f->n + 1, 64))
		return -ENOMEM;
	f->nodes[f->n] = (struct fnode){.hash = h, .len = len, .parent = parent};
	if ((ret = names_add(f, name, len, &f->nodes[f->n].name)))
		return ret;
	f->slots[j] = (uint32_t)++f->n;
	*out = f->slots[j];
	return 0;
}

int usc_flame_new(struct usc_flame **out)
{
	struct usc_flame *f = calloc(1, sizeof(*f));

	*out = NULL;
	if (!f || !(f->nodes = malloc(64 * sizeof(*f->nodes)))) {
		free(f);
		return -ENOMEM;
	}
	f->cap = 64;
	f->n = 1;
	f->nodes[0] = (struct fnode){.len = sizeof(root_name) - 1};
	if (names_add(f, root_name, sizeof(root_name) - 1, &f->nodes[0].name) || slots_grow(f)) {
		usc_flame_free(f);
		return -ENOMEM;
	}
	*out = f;
	return 0;
}

void usc_flame_free(struct usc_flame *f)
{
	if (!f)
		return;
	free(f->nodes);
	free(f->slots);
	free(f->names);
	free(f);
}

uint64_t usc_flame_total(const struct usc_flame *f)
{
	return f->nodes[0].total;
}

/* ---- parsing ---------------------------------------------------------- */

static bool is_blank(char c)
{
	return c == ' ' || c == '\t';
}

static int bad_line(struct usc_flame_error *err, size_t line, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int bad_line(struct usc_flame_error *err, size_t line, const char *fmt, ...)
{
	va_list ap;

	if (err) {
		err->line = line;
		va_start(ap, fmt);
		vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
		va_end(ap);
	}
	return -EINVAL;
}

/* s[0..n) for a message: at most 40 bytes, a byte that is not printable
 * ASCII as '?'. */
static const char *shown(char *buf, size_t cap, const char *s, size_t n)
{
	size_t k = 0, max = cap - 4 < 40 ? cap - 4 : 40;

	for (size_t i = 0; i < n && k < max; i++)
		buf[k++] = s[i] >= 0x20 && s[i] < 0x7f ? s[i] : '?';
	if (n > max)
		buf[k++] = '.', buf[k++] = '.', buf[k++] = '.';
	buf[k] = 0;
	return buf;
}

int usc_flame_add_line(struct usc_flame *f, const char *line, size_t len,
		       struct usc_flame_error *err)
{
	size_t lineno = ++f->lineno, end = len, i, stack_end;
	uint64_t count = 0;
	uint32_t cur = 1;
	char show[48];
	bool digits = true;

	if (end && line[end - 1] == '\r')
		end--;
	while (end && is_blank(line[end - 1]))
		end--;
	if (!end)
		return 0;	/* a blank line */
	for (i = end; i && !is_blank(line[i - 1]); i--)
		;
	for (size_t k = i; k < end; k++)
		digits = digits && line[k] >= '0' && line[k] <= '9';
	for (stack_end = i; stack_end && is_blank(line[stack_end - 1]); stack_end--)
		;
	if (!stack_end)
		return bad_line(err, lineno, digits ? "no stack before the count %s" :
				"no count: a folded line is 'FRAME;FRAME;... COUNT', not '%s'",
				shown(show, sizeof(show), line + i, end - i));
	if (line[i] == '-' && end - i > 1) {
		bool num = true;

		for (size_t k = i + 1; k < end; k++)
			num = num && line[k] >= '0' && line[k] <= '9';
		if (num)
			return bad_line(err, lineno, "a negative count, %s",
					shown(show, sizeof(show), line + i, end - i));
	}
	if (!digits)
		return bad_line(err, lineno, "no count at the end of the line: '%s' is not a "
				"number of samples", shown(show, sizeof(show), line + i, end - i));
	for (size_t k = i; k < end; k++) {
		unsigned d = (unsigned)(line[k] - '0');

		if (count > (USC_FLAME_COUNT_MAX - d) / 10)
			return bad_line(err, lineno, "the count %s is too large (at most %" PRId64 ")",
					shown(show, sizeof(show), line + i, end - i),
					(int64_t)USC_FLAME_COUNT_MAX);
		count = count * 10 + d;
	}
	/* every frame has a name */
	for (size_t k = 0, start = 0; k <= stack_end; k++) {
		if (k < stack_end && line[k] != ';')
			continue;
		if (k == start)
			return bad_line(err, lineno, "an empty frame name at column %zu (';' at "
					"an end of the stack, or two in a row)", k + 1);
		start = k + 1;
	}
	if (count > USC_FLAME_COUNT_MAX - f->nodes[0].total)
		return bad_line(err, lineno, "the counts add up to more than %" PRId64,
				(int64_t)USC_FLAME_COUNT_MAX);
	if (!count)
		return 0;
	for (size_t k = 0, start = 0; k <= stack_end; k++) {
		int ret;

		if (k < stack_end && line[k] != ';')
			continue;
		if ((ret = node_get(f, cur, line + start, k - start, &cur))) {
			if (err) {
				err->line = lineno;
				snprintf(err->msg, sizeof(err->msg), "%s", strerror(-ret));
			}
			return ret;
		}
		start = k + 1;
	}
	for (uint32_t at = cur; at; at = f->nodes[at - 1].parent)
		f->nodes[at - 1].total += count;
	return 0;
}

int usc_flame_parse(struct usc_flame *f, const char *text, size_t len,
		    struct usc_flame_error *err)
{
	size_t at = 0;

	while (at < len) {
		const char *nl = memchr(text + at, '\n', len - at);
		size_t end = nl ? (size_t)(nl - text) : len;
		int ret = usc_flame_add_line(f, text + at, end - at, err);

		if (ret)
			return ret;
		at = end + 1;
	}
	return 0;
}

/* ---- layout ----------------------------------------------------------- */

static int by_parent_name(const void *a, const void *b, void *ctx)
{
	const struct usc_flame *f = ctx;
	const struct fnode *x = &f->nodes[*(const uint32_t *)a];
	const struct fnode *y = &f->nodes[*(const uint32_t *)b];
	size_t n = x->len < y->len ? x->len : y->len;
	int c;

	if (x->parent != y->parent)
		return x->parent < y->parent ? -1 : 1;
	c = memcmp(f->names + x->name, f->names + y->name, n);
	if (c)
		return c;
	return x->len < y->len ? -1 : x->len > y->len;
}

static unsigned opt_width(const struct usc_flame_opts *o)
{
	unsigned w = o && o->width ? o->width : USC_FLAME_WIDTH_DEFAULT;

	return w < USC_FLAME_WIDTH_MIN ? USC_FLAME_WIDTH_MIN :
	       w > USC_FLAME_WIDTH_MAX ? USC_FLAME_WIDTH_MAX : w;
}

int usc_flame_layout(const struct usc_flame *f, const struct usc_flame_opts *o,
		     struct usc_flame_frame **frames, size_t *nframes, double *height)
{
	struct todo {
		uint32_t node;		/* index */
		unsigned depth;
		uint64_t start;
	} *stack = NULL;
	uint32_t *order = NULL, *first = NULL, *nkids = NULL;
	struct usc_flame_frame *out = NULL;
	const uint64_t total = f->nodes[0].total;
	double scale;
	size_t n = 0, sp = 0;
	unsigned maxdepth = 0;
	int ret = -ENOMEM;

	*frames = NULL;
	*nframes = 0;
	*height = 0;
	if (!total)
		return -ENODATA;
	scale = (opt_width(o) - 2.0 * USC_FLAME_XPAD) / (double)total;
	order = malloc(f->n * sizeof(*order));
	first = calloc(f->n, sizeof(*first));
	nkids = calloc(f->n, sizeof(*nkids));
	stack = malloc(f->n * sizeof(*stack));
	out = malloc(f->n * sizeof(*out));
	if (!order || !first || !nkids || !stack || !out)
		goto done;
	/* every node's children next to each other, in name order */
	for (size_t i = 1; i < f->n; i++)
		order[i - 1] = (uint32_t)i;
	qsort_r(order, f->n - 1, sizeof(*order), by_parent_name, (void *)f);
	for (size_t k = f->n - 1; k-- > 0;) {
		uint32_t p = f->nodes[order[k]].parent - 1;

		first[p] = (uint32_t)k;
		nkids[p]++;
	}
	stack[sp++] = (struct todo){0, 0, 0};
	while (sp) {
		struct todo t = stack[--sp];
		const struct fnode *nd = &f->nodes[t.node];
		uint64_t at;

		out[n++] = (struct usc_flame_frame){
			.name = f->names + nd->name, .len = nd->len, .count = nd->total,
			.start = t.start, .depth = t.depth,
			.x = USC_FLAME_XPAD + (double)t.start * scale,
			.width = (double)nd->total * scale,
		};
		if (t.depth > maxdepth)
			maxdepth = t.depth;
		/* its own samples first, then its callees', the last pushed first */
		at = t.start + nd->total;
		for (uint32_t k = nkids[t.node]; k-- > 0;) {
			uint32_t c = order[first[t.node] + k];

			at -= f->nodes[c].total;
			if ((double)f->nodes[c].total * scale < USC_FLAME_MIN_WIDTH)
				continue;
			stack[sp++] = (struct todo){c, t.depth + 1, at};
		}
	}
	*height = (maxdepth + 1.0) * USC_FLAME_FRAME_HEIGHT + USC_FLAME_YPAD_TOP +
		  USC_FLAME_YPAD_BOTTOM;
	for (size_t i = 0; i < n; i++)
		out[i].y = *height - USC_FLAME_YPAD_BOTTOM -
			   (out[i].depth + 1.0) * USC_FLAME_FRAME_HEIGHT + 1;
	*frames = out;
	*nframes = n;
	out = NULL;
	ret = 0;
done:
	free(order);
	free(first);
	free(nkids);
	free(stack);
	free(out);
	return ret;
}

/* ---- SVG -------------------------------------------------------------- */

/* The script: a click zooms into a frame (its callers stay, faded), Reset
 * Zoom (or Esc) goes back, Search (or Ctrl-F) highlights the frames whose
 * names match a regular expression and says what share of the samples they
 * hold. It reads each frame's name from its <title>, its place from its
 * <rect>, and refits the <text> labels as this file does (fit_chars). */
static const char script[] =
	"var EPS = 0.02, HIT = \"rgb(230,0,230)\";\n"
	"var graph = [], byg = new Map(), root = null, fullw = 0, searching = null;\n"
	"var details, unzoombtn, searchbtn, matchedtxt;\n"
	"\n"
	"function init(evt) {\n"
	"\tvar fg = document.getElementById(\"frames\"), gs = fg.children;\n"
	"\tfullw = parseFloat(document.documentElement.getAttribute(\"width\")) - 2 * XPAD;\n"
	"\tdetails = document.getElementById(\"details\").firstChild;\n"
	"\tunzoombtn = document.getElementById(\"unzoom\");\n"
	"\tsearchbtn = document.getElementById(\"search\");\n"
	"\tmatchedtxt = document.getElementById(\"matched\").firstChild;\n"
	"\tfor (var i = 0; i < gs.length; i++) {\n"
	"\t\tvar g = gs[i], r = g.getElementsByTagName(\"rect\")[0];\n"
	"\t\tvar title = g.getElementsByTagName(\"title\")[0].textContent;\n"
	"\t\tvar f = {g: g, r: r, t: g.getElementsByTagName(\"text\")[0], title: title,\n"
	"\t\t\tname: title.substring(0, title.lastIndexOf(\" (\")),\n"
	"\t\t\tx: parseFloat(r.getAttribute(\"x\")), w: parseFloat(r.getAttribute(\"width\")),\n"
	"\t\t\ty: parseFloat(r.getAttribute(\"y\")), fill: r.getAttribute(\"fill\")};\n"
	"\t\tgraph.push(f);\n"
	"\t\tbyg.set(g, f);\n"
	"\t\tif (!root || f.w > root.w)\n"
	"\t\t\troot = f;\n"
	"\t}\n"
	"\tfg.addEventListener(\"click\", function (e) {\n"
	"\t\tvar f = frame_of(e.target);\n"
	"\t\tif (f)\n"
	"\t\t\tzoom(f);\n"
	"\t});\n"
	"\tfg.addEventListener(\"mouseover\", function (e) {\n"
	"\t\tvar f = frame_of(e.target);\n"
	"\t\tif (f)\n"
	"\t\t\tdetails.nodeValue = \"Function: \" + f.title;\n"
	"\t});\n"
	"\tfg.addEventListener(\"mouseout\", function () { details.nodeValue = \" \"; });\n"
	"\tunzoombtn.addEventListener(\"click\", unzoom);\n"
	"\tsearchbtn.addEventListener(\"click\", search_prompt);\n"
	"\twindow.addEventListener(\"keydown\", function (e) {\n"
	"\t\tif (e.keyCode === 114 || ((e.ctrlKey || e.metaKey) && e.keyCode === 70)) {\n"
	"\t\t\te.preventDefault();\n"
	"\t\t\tsearch_prompt();\n"
	"\t\t} else if (e.keyCode === 27) {\n"
	"\t\t\treset_search();\n"
	"\t\t\tunzoom();\n"
	"\t\t}\n"
	"\t});\n"
	"}\n"
	"\n"
	"/* the frame an element is part of */\n"
	"function frame_of(el) {\n"
	"\tfor (; el && el.nodeType === 1; el = el.parentNode) {\n"
	"\t\tvar f = byg.get(el);\n"
	"\t\tif (f)\n"
	"\t\t\treturn f;\n"
	"\t}\n"
	"\treturn null;\n"
	"}\n"
	"\n"
	"/* the name as it fits in w px: whole, cut with \"..\", or nothing */\n"
	"function fit(name, w) {\n"
	"\tvar chars = Math.floor(w / CHARW);\n"
	"\tif (chars < 3)\n"
	"\t\treturn \"\";\n"
	"\treturn name.length <= chars ? name : name.substring(0, chars - 2) + \"..\";\n"
	"}\n"
	"\n"
	"function place(f, x, w) {\n"
	"\tf.g.classList.remove(\"hide\");\n"
	"\tf.r.setAttribute(\"x\", x.toFixed(2));\n"
	"\tf.r.setAttribute(\"width\", w.toFixed(2));\n"
	"\tf.t.setAttribute(\"x\", (x + 3).toFixed(2));\n"
	"\tf.t.textContent = fit(f.name, w);\n"
	"}\n"
	"\n"
	"/* z spans the width; its callees scale with it, its callers stay full\n"
	" * width (faded), every other frame hides */\n"
	"function zoom(z) {\n"
	"\tvar ratio = fullw / z.w;\n"
	"\tunzoombtn.classList.remove(\"hide\");\n"
	"\tfor (var i = 0; i < graph.length; i++) {\n"
	"\t\tvar f = graph[i];\n"
	"\t\tf.g.classList.remove(\"parent\");\n"
	"\t\tif (f.y > z.y) {\n"
	"\t\t\tif (f.x <= z.x + EPS && f.x + f.w >= z.x + z.w - EPS) {\n"
	"\t\t\t\tplace(f, XPAD, fullw);\n"
	"\t\t\t\tf.g.classList.add(\"parent\");\n"
	"\t\t\t} else {\n"
	"\t\t\t\tf.g.classList.add(\"hide\");\n"
	"\t\t\t}\n"
	"\t\t} else if (f.x + f.w <= z.x + EPS || f.x >= z.x + z.w - EPS) {\n"
	"\t\t\tf.g.classList.add(\"hide\");\n"
	"\t\t} else {\n"
	"\t\t\tplace(f, XPAD + (f.x - z.x) * ratio, f.w * ratio);\n"
	"\t\t}\n"
	"\t}\n"
	"}\n"
	"\n"
	"function unzoom() {\n"
	"\tunzoombtn.classList.add(\"hide\");\n"
	"\tfor (var i = 0; i < graph.length; i++) {\n"
	"\t\tgraph[i].g.classList.remove(\"parent\");\n"
	"\t\tplace(graph[i], graph[i].x, graph[i].w);\n"
	"\t}\n"
	"}\n"
	"\n"
	"function search_prompt() {\n"
	"\tif (searching !== null) {\n"
	"\t\treset_search();\n"
	"\t\treturn;\n"
	"\t}\n"
	"\tvar term = prompt(\"Search for functions (a regular expression, e.g. ^main)\", \"\");\n"
	"\tif (term)\n"
	"\t\tsearch(term);\n"
	"}\n"
	"\n"
	"function reset_search() {\n"
	"\tsearching = null;\n"
	"\tfor (var i = 0; i < graph.length; i++)\n"
	"\t\tgraph[i].r.setAttribute(\"fill\", graph[i].fill);\n"
	"\tsearchbtn.classList.remove(\"show\");\n"
	"\tsearchbtn.firstChild.nodeValue = \"Search\";\n"
	"\tmatchedtxt.nodeValue = \" \";\n"
	"}\n"
	"\n"
	"/* the matching frames highlighted; the share of the samples they hold\n"
	" * (a match inside a match counted once) */\n"
	"function search(term) {\n"
	"\tvar re, hits = [], sum = 0, end = -Infinity;\n"
	"\ttry {\n"
	"\t\tre = new RegExp(term);\n"
	"\t} catch (err) {\n"
	"\t\talert(\"not a regular expression: \" + term);\n"
	"\t\treturn;\n"
	"\t}\n"
	"\tsearching = term;\n"
	"\tfor (var i = 0; i < graph.length; i++) {\n"
	"\t\tvar f = graph[i];\n"
	"\t\tif (re.test(f.name)) {\n"
	"\t\t\tf.r.setAttribute(\"fill\", HIT);\n"
	"\t\t\thits.push(f);\n"
	"\t\t} else {\n"
	"\t\t\tf.r.setAttribute(\"fill\", f.fill);\n"
	"\t\t}\n"
	"\t}\n"
	"\thits.sort(function (a, b) { return a.x - b.x || b.w - a.w; });\n"
	"\tfor (var k = 0; k < hits.length; k++) {\n"
	"\t\tif (hits[k].x >= end - EPS) {\n"
	"\t\t\tsum += hits[k].w;\n"
	"\t\t\tend = hits[k].x + hits[k].w;\n"
	"\t\t}\n"
	"\t}\n"
	"\tsearchbtn.classList.add(\"show\");\n"
	"\tsearchbtn.firstChild.nodeValue = \"Reset Search\";\n"
	"\tmatchedtxt.nodeValue = \"Matched: \" + (100 * sum / root.w).toFixed(1) + \"%\";\n"
	"}\n";

static const char style[] =
	"text { font-family: Verdana, sans-serif; font-size: 12px; fill: rgb(0,0,0); }\n"
	"#title { text-anchor: middle; font-size: 17px; }\n"
	"#search, #unzoom { cursor: pointer; }\n"
	"#search { opacity: 0.1; }\n"
	"#search:hover, #search.show { opacity: 1; }\n"
	"#matched { text-anchor: end; }\n"
	"#frames > g { cursor: pointer; }\n"
	"#frames > g:hover > rect { stroke: black; stroke-width: 0.5; }\n"
	"#frames text { pointer-events: none; }\n"
	".hide { display: none; }\n"
	".parent { opacity: 0.5; }\n";

/* The length of the character at s[0..n) (1 to 4) when XML takes it as it
 * is; 0 when it is written as '?': a control character, a byte that does
 * not start well-formed UTF-8 (overlong, a surrogate, beyond U+10FFFF), or
 * U+FFFE/U+FFFF. */
static size_t char_len(const unsigned char *s, size_t n)
{
	unsigned c = s[0];
	size_t len;
	uint32_t cp;

	if (c < 0x80)
		return c >= 0x20 || c == '\t' ? 1 : 0;
	if (c >= 0xc2 && c <= 0xdf)
		len = 2, cp = c & 0x1f;
	else if (c >= 0xe0 && c <= 0xef)
		len = 3, cp = c & 0x0f;
	else if (c >= 0xf0 && c <= 0xf4)
		len = 4, cp = c & 0x07;
	else
		return 0;
	if (n < len)
		return 0;
	for (size_t k = 1; k < len; k++) {
		if ((s[k] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[k] & 0x3f);
	}
	if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
	    (cp >= 0xd800 && cp <= 0xdfff) || cp == 0xfffe || cp == 0xffff)
		return 0;
	return len;
}

/* The characters of s[0..n) as written (a '?' counts one). */
static size_t text_chars(const char *s, size_t n)
{
	size_t k = 0;

	for (size_t i = 0; i < n; k++) {
		size_t l = char_len((const unsigned char *)s + i, n - i);

		i += l ? l : 1;
	}
	return k;
}

/* The first max characters of s[0..n), escaped for XML text. */
static void put_text(FILE *fp, const char *s, size_t n, size_t max)
{
	for (size_t i = 0, k = 0; i < n && k < max; k++) {
		size_t l = char_len((const unsigned char *)s + i, n - i);

		if (!l) {
			fputc('?', fp);
			i++;
			continue;
		}
		switch (s[i]) {
		case '<': fputs("&lt;", fp); break;
		case '>': fputs("&gt;", fp); break;
		case '&': fputs("&amp;", fp); break;
		case '"': fputs("&quot;", fp); break;
		case '\'': fputs("&apos;", fp); break;
		default: fwrite(s + i, 1, l, fp); break;
		}
		i += l;
	}
}

/* A frame's label: as many characters of its name as fit in width px at
 * 12 px Verdana, the last two of a cut name "..", none when fewer than 3
 * fit (flamegraph.pl's rule; the script's fit() is the same). */
static void put_label(FILE *fp, const char *s, size_t n, double width)
{
	double fit = width / USC_FLAME_CHAR_WIDTH;
	size_t chars = fit < 3 ? 0 : fit > 1e9 ? (size_t)1e9 : (size_t)fit;

	if (chars < 3)
		return;
	if (text_chars(s, n) <= chars) {
		put_text(fp, s, n, SIZE_MAX);
		return;
	}
	put_text(fp, s, n, chars - 2);
	fputs("..", fp);
}

/* v with thousands separators: 1,234,567 */
static void put_count(FILE *fp, uint64_t v)
{
	char d[24];
	int n = snprintf(d, sizeof(d), "%" PRIu64, v);

	for (int i = 0; i < n; i++) {
		if (i && (n - i) % 3 == 0)
			fputc(',', fp);
		fputc(d[i], fp);
	}
}

/* A name's color: a hash of the name (so a function has the same color in
 * every graph) into the palette's ranges, flamegraph.pl's. */
static void name_color(enum usc_flame_palette p, const char *s, size_t n, int rgb[3])
{
	uint64_t h = fnv1a(s, n);
	double v1 = (double)(h & 0xffff) / 65535.0, v2 = (double)(h >> 16 & 0xffff) / 65535.0,
	       v3 = (double)(h >> 32 & 0xffff) / 65535.0;
	int r, g, b;

	switch (p) {
	case USC_FLAME_MEM:
		r = 0, g = 190 + (int)(50 * v2), b = (int)(210 * v1);
		break;
	case USC_FLAME_IO:
		r = 80 + (int)(60 * v1), g = r, b = 190 + (int)(55 * v2);
		break;
	case USC_FLAME_RED:
		r = 200 + (int)(55 * v1), g = 50 + (int)(80 * v1), b = g;
		break;
	case USC_FLAME_GREEN:
		g = 200 + (int)(55 * v1), r = 50 + (int)(60 * v1), b = r;
		break;
	case USC_FLAME_BLUE:
		b = 205 + (int)(50 * v1), r = 80 + (int)(60 * v1), g = r;
		break;
	case USC_FLAME_AQUA:
		r = 50 + (int)(60 * v1), g = 165 + (int)(55 * v1), b = g;
		break;
	case USC_FLAME_YELLOW:
		r = 175 + (int)(55 * v1), g = r, b = 50 + (int)(20 * v1);
		break;
	case USC_FLAME_PURPLE:
		r = 190 + (int)(65 * v1), g = 80 + (int)(60 * v1), b = r;
		break;
	case USC_FLAME_ORANGE:
		r = 190 + (int)(65 * v1), g = 90 + (int)(65 * v1), b = 0;
		break;
	default:	/* hot */
		r = 205 + (int)(50 * v3), g = (int)(230 * v1), b = (int)(55 * v2);
		break;
	}
	rgb[0] = r, rgb[1] = g, rgb[2] = b;
}

int usc_flame_write_svg(const struct usc_flame *f, const struct usc_flame_opts *o, FILE *fp)
{
	static const char *const bg[][2] = {
		[USC_FLAME_HOT] = {"#eeeeee", "#eeeeb0"},
		[USC_FLAME_MEM] = {"#eeeeee", "#e0e0ff"},
	};
	const char *title = o && o->title ? o->title : "Flame Graph";
	const char *countname = o && o->countname ? o->countname : "samples";
	enum usc_flame_palette pal = o && (unsigned)o->palette < USC_FLAME_PALETTE_NR ?
				     o->palette : USC_FLAME_HOT;
	const char *bg0 = pal <= USC_FLAME_MEM ? bg[pal][0] : "#f8f8f8";
	const char *bg1 = pal <= USC_FLAME_MEM ? bg[pal][1] : "#e8e8e8";
	const unsigned width = opt_width(o);
	const uint64_t total = usc_flame_total(f);
	struct usc_flame_frame *fr;
	size_t n;
	double height;
	int ret = usc_flame_layout(f, o, &fr, &n, &height);

	if (ret)
		return ret;
	fprintf(fp, "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"yes\"?>\n"
		"<svg version=\"1.1\" width=\"%u\" height=\"%.0f\" viewBox=\"0 0 %u %.0f\" "
		"onload=\"init(evt)\" xmlns=\"http://www.w3.org/2000/svg\">\n"
		"<!-- A flame graph of folded stacks, written by uscope flamegraph: a frame's "
		"width is its share of the samples. Click a frame to zoom; Search (Ctrl-F) "
		"highlights functions. -->\n"
		"<defs><linearGradient id=\"background\" x1=\"0\" y1=\"0\" x2=\"0\" y2=\"1\">"
		"<stop stop-color=\"%s\" offset=\"5%%\"/><stop stop-color=\"%s\" offset=\"95%%\"/>"
		"</linearGradient></defs>\n"
		"<style type=\"text/css\"><![CDATA[\n%s]]></style>\n"
		"<script type=\"text/ecmascript\"><![CDATA[\n\"use strict\";\n"
		"var XPAD = %d, CHARW = %.2f;\n",
		width, height, width, height, bg0, bg1, style, USC_FLAME_XPAD,
		USC_FLAME_CHAR_WIDTH);
	fputs(script, fp);
	fprintf(fp, "]]></script>\n"
		"<rect x=\"0\" y=\"0\" width=\"%u\" height=\"%.0f\" fill=\"url(#background)\"/>\n"
		"<text id=\"title\" x=\"%.1f\" y=\"24\">",
		width, height, width / 2.0);
	put_text(fp, title, strlen(title), SIZE_MAX);
	fprintf(fp, "</text>\n"
		"<text id=\"details\" x=\"%d\" y=\"%.0f\"> </text>\n"
		"<text id=\"unzoom\" class=\"hide\" x=\"%d\" y=\"24\">Reset Zoom</text>\n"
		"<text id=\"search\" x=\"%u\" y=\"24\">Search</text>\n"
		"<text id=\"matched\" x=\"%u\" y=\"%.0f\"> </text>\n"
		"<g id=\"frames\">\n",
		USC_FLAME_XPAD, height - 17, USC_FLAME_XPAD, width - 110,
		width - USC_FLAME_XPAD, height - 17);
	for (size_t i = 0; i < n; i++) {
		const struct usc_flame_frame *e = &fr[i];
		int rgb[3];

		name_color(pal, e->name, e->len, rgb);
		fputs("<g><title>", fp);
		put_text(fp, e->name, e->len, SIZE_MAX);
		fputs(" (", fp);
		put_count(fp, e->count);
		fputc(' ', fp);
		put_text(fp, countname, strlen(countname), SIZE_MAX);
		fprintf(fp, ", %.2f%%)</title><rect x=\"%.2f\" y=\"%.0f\" width=\"%.2f\" "
			"height=\"%d\" rx=\"2\" ry=\"2\" fill=\"rgb(%d,%d,%d)\"/>"
			"<text x=\"%.2f\" y=\"%.1f\">",
			100.0 * (double)e->count / (double)total, e->x, e->y, e->width,
			USC_FLAME_FRAME_HEIGHT - 1, rgb[0], rgb[1], rgb[2], e->x + 3,
			e->y + (USC_FLAME_FRAME_HEIGHT - 1) / 2.0 + 3);
		put_label(fp, e->name, e->len, e->width);
		fputs("</text></g>\n", fp);
	}
	fputs("</g>\n</svg>\n", fp);
	free(fr);
	if (fflush(fp) || ferror(fp))
		return errno ? -errno : -EIO;
	return 0;
}
