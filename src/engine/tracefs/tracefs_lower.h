/* Lowering the fetch program to uprobe_events fetchargs. */
#ifndef USC_ENGINE_TRACEFS_LOWER_H
#define USC_ENGINE_TRACEFS_LOWER_H

#include <stddef.h>

#include "probe/probe.h"

/* One fetcharg: "NAME=EXPR:TYPE". 0, or -ENOSPC. */
int tracefs_lower_arg(const struct usc_fetcharg *arg, char *buf, size_t len);
/* All of a probe's fetchargs, space-separated ("" when none). */
int tracefs_lower_args(const struct usc_probe_spec *spec, char *buf, size_t len);

#endif
