#ifndef USC_CLI_CLI_H
#define USC_CLI_CLI_H

#include <stdbool.h>

#include "probe/probe.h"

extern bool cli_verbose;

int cmd_trace(int argc, char **argv);
int cmd_list(int argc, char **argv);
int cmd_count(int argc, char **argv);
int cmd_flow(int argc, char **argv);

/* Parse probe texts; on a mistake print the probe with a caret under it and
 * return -EINVAL. */
int cli_parse_probes(char **texts, int n, struct usc_probe_spec **specs);

/* One-line error to stderr, "uscope: ..." */
void cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
