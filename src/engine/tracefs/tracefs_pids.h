/* The tracefs engine's process filter: set_event_pid. */
#ifndef USC_ENGINE_TRACEFS_PIDS_H
#define USC_ENGINE_TRACEFS_PIDS_H

#include <stdbool.h>
#include <sys/types.h>

struct tracefs_instance;

/* The instance's events filtered on process pid's tasks (and, follow: its
 * descendants'), event-fork on already: what they create from now on, the
 * kernel adds. learn(tid, ctx) for each task born while the filter was
 * made. 0, -ESRCH when pid has exited, -EIO, -ENOMEM. */
int tracefs_pids_filter(struct tracefs_instance *inst, pid_t pid, bool follow,
			void (*learn)(int tid, void *ctx), void *ctx);

#endif
