/* The library's one logging hook. The library never prints and never exits:
 * it returns negative errno and describes failures through this hook. */
#ifndef USC_CORE_LOG_H
#define USC_CORE_LOG_H

#include <stdbool.h>

enum usc_log_level { USC_LOG_ERROR, USC_LOG_WARN, USC_LOG_INFO, USC_LOG_DEBUG };

typedef void (*usc_log_fn)(enum usc_log_level level, const char *msg, void *ctx);

/* Install the hook (NULL restores the default, which discards everything). */
void usc_set_log(usc_log_fn fn, void *ctx);

/* Drop every message while quiet (nested: as many offs as ons): for a
 * lookup whose failure is an answer, not an error. */
void usc_log_quiet(bool on);

void log_msg(enum usc_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#define log_error(...) log_msg(USC_LOG_ERROR, __VA_ARGS__)
#define log_warn(...) log_msg(USC_LOG_WARN, __VA_ARGS__)
#define log_info(...) log_msg(USC_LOG_INFO, __VA_ARGS__)
#define log_debug(...) log_msg(USC_LOG_DEBUG, __VA_ARGS__)

#endif
