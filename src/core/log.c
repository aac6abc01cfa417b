#include "core/log.h"

#include <stdarg.h>
#include <stdio.h>

static usc_log_fn log_fn;
static void *log_ctx;
static int log_quiet;

void usc_set_log(usc_log_fn fn, void *ctx)
{
	log_fn = fn;
	log_ctx = ctx;
}

void usc_log_quiet(bool on)
{
	log_quiet += on ? 1 : -1;
}

void log_msg(enum usc_log_level level, const char *fmt, ...)
{
	char buf[1024];
	va_list ap;

	if (!log_fn || log_quiet > 0)
		return;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	log_fn(level, buf, log_ctx);
}
