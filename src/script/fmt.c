/* printf's format, as bpftrace takes it: text and C conversions
 * (%[flags][width][.precision][length]d i u x X o c s p, and bpftrace's %r
 * for a buffer), split at compile time and checked against the arguments'
 * types; the tracer formats each conversion with its value (print.c). */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "script/fmt.h"

static bool int_conv(char c)
{
	return strchr("diuxXocp", c) != NULL;
}

int script_fmt_split(struct usc_script *s, const char *text, size_t n, struct script_fmt *f,
		     uint32_t pos, uint32_t len, struct script_diag *d)
{
	unsigned cap = 0;

	memset(f, 0, sizeof(*f));
	f->text = text;
	f->ntext = (uint32_t)n;
	f->map = -1;
	for (size_t i = 0; i < n; i++) {
		struct script_conv *c;
		size_t start = i, o = 0;

		if (text[i] != '%')
			continue;
		if (i + 1 < n && text[i + 1] == '%') {
			i++;
			continue;
		}
		if (f->nconv >= cap) {
			struct script_conv *nc;

			cap = cap ? 2 * cap : 8;
			nc = arena_alloc(s->arena, cap * sizeof(*nc));
			if (!nc)
				return script_fail(d, pos, len, "out of memory"), -ENOMEM;
			if (f->nconv)
				memcpy(nc, f->conv, f->nconv * sizeof(*nc));
			f->conv = nc;
		}
		c = &f->conv[f->nconv];
		memset(c, 0, sizeof(*c));
		c->spec[o++] = '%';
		i++;
		while (i < n && strchr("-+ #0", text[i]) && o < 8)
			c->spec[o++] = text[i++];
		while (i < n && isdigit((unsigned char)text[i]) && o < 16)
			c->spec[o++] = text[i++];
		if (i < n && text[i] == '.') {
			c->spec[o++] = text[i++];
			while (i < n && isdigit((unsigned char)text[i]) && o < 24)
				c->spec[o++] = text[i++];
		}
		while (i < n && strchr("hlzjtqL", text[i]))
			i++;	/* every integer is 64 bits: the length is ours */
		if (i >= n || !strchr("diuxXocspr", text[i]))
			return script_fail(d, pos, len, "printf: the conversion at '%.*s' is not one of "
					   "%%d %%i %%u %%x %%X %%o %%c %%s %%p %%r", (int)(i - start + 1 > n - start ? n - start : i - start + 1),
					   text + start);
		c->conv = text[i];
		if (c->conv == 'r' && i + 1 < n && (text[i + 1] == 'x' || text[i + 1] == 'h'))
			i++;	/* %rx, %rh: bpftrace's hex forms of a buffer */
		c->spec[o] = 0;
		f->nconv++;
	}
	return 0;
}

int script_fmt_check(struct usc_script *s, struct script_fmt *f, const char *what,
		     struct ast *args, uint32_t pos, uint32_t len, struct script_diag *d)
{
	unsigned k = 0;
	uint32_t off = 0;

	for (struct ast *a = args; a; a = a->next, k++) {
		struct script_conv *c;
		char tn[64];

		if (k >= f->nconv)
			return script_fail(d, a->pos, a->len, "%s: too many arguments for the format "
					   "(%u conversions)", what, f->nconv);
		c = &f->conv[k];
		ty_name(&a->ty, tn, sizeof(tn));
		if (a->ty.kind == TY_AGG || a->ty.kind == TY_VOID || a->ty.kind == TY_NONE ||
		    a->ty.kind == TY_STACKMODE)
			return script_fail(d, a->pos, a->len, "%s: a value of type %s cannot be "
					   "printed", what, tn);
		if (int_conv(c->conv) && a->ty.kind != TY_INT)
			return script_fail(d, a->pos, a->len, "%s: %%%c specifier expects a value of "
					   "type integer (%s supplied)", what, c->conv, tn);
		if (c->conv == 'r' && a->ty.kind != TY_BUF && a->ty.kind != TY_STR)
			return script_fail(d, a->pos, a->len, "%s: %%r specifier expects a value of "
					   "type buffer (%s supplied)", what, tn);
		c->arg.ty = a->ty;
		c->arg.off = off;
		c->arg.size = ty_size(s, &a->ty);
		off += c->arg.size;
		if (off > SCRIPT_OUT_MAX)
			return script_fail(d, a->pos, a->len, "%s: its values take more than %d bytes",
					   what, SCRIPT_OUT_MAX);
	}
	if (k < f->nconv)
		return script_fail(d, pos, len, "%s: the format has %u conversions, and %u argument%s "
				   "given", what, f->nconv, k, k == 1 ? " is" : "s are");
	f->size = off;
	return 0;
}
