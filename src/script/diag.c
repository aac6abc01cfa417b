/* A script's mistake as the user sees it: FILE:LINE:COL, the message, the
 * line and a caret under the place, as bpftrace and compilers show them. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "script/script.h"

int script_fail(struct script_diag *d, uint32_t pos, uint32_t len, const char *fmt, ...)
{
	va_list ap;

	if (!d || d->set)
		return -EINVAL;
	va_start(ap, fmt);
	vsnprintf(d->msg, sizeof(d->msg), fmt, ap);
	va_end(ap);
	d->pos = pos;
	d->len = len;
	d->set = true;
	return -EINVAL;
}

void script_diag_format(const char *src, size_t n, const char *name, const struct script_diag *d,
			char *buf, size_t len)
{
	size_t pos = d->pos > n ? n : d->pos, start = pos, end, col = 0, line = 1, off;
	int w;

	for (size_t i = 0; i < pos; i++)
		line += src[i] == '\n';
	while (start > 0 && src[start - 1] != '\n')
		start--;
	end = pos;
	while (end < n && src[end] != '\n')
		end++;
	/* columns count characters, a tab as one, as bpftrace's do */
	for (size_t i = start; i < pos; i++)
		col += ((unsigned char)src[i] & 0xc0) != 0x80;
	w = snprintf(buf, len, "%s:%zu:%zu: %s\n", name ? name : "PROGRAM", line, col + 1, d->msg);
	off = w < 0 ? 0 : (size_t)w;
	if (off >= len || start >= n)
		return;
	w = snprintf(buf + off, len - off, "  %.*s\n  ", (int)(end - start), src + start);
	off += w < 0 ? 0 : (size_t)w;
	/* the caret under the place: the line's tabs kept, so it lines up */
	for (size_t i = start; i < pos && off + 2 < len; i++)
		if (((unsigned char)src[i] & 0xc0) != 0x80)
			buf[off++] = src[i] == '\t' ? '\t' : ' ';
	if (off + 2 < len)
		buf[off++] = '^';
	for (size_t i = 1; i < d->len && pos + i < end && off + 2 < len; i++)
		if (((unsigned char)src[pos + i] & 0xc0) != 0x80)
			buf[off++] = '~';
	if (off + 1 < len)
		buf[off++] = '\n';
	buf[off < len ? off : len - 1] = 0;
}
