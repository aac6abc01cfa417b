/* A recording as a source of events (source.c). */
#ifndef USC_RECORD_SOURCE_H
#define USC_RECORD_SOURCE_H

#include "engine/engine.h"

struct rec_file;

extern const struct usc_engine_ops source_engine_ops;

/* The engine that reads path's events. 0 or -errno (reported). */
int source_open(const struct usc_engine_ctx *ctx, const char *path, struct usc_engine **out);
/* Its file. */
struct rec_file *source_file(struct usc_engine *e);

#endif
