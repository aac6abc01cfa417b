/* The target's executable, and the module a probe names: the first step of
 * resolving a probe. */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/log.h"
#include "objfile/modules.h"
#include "resolve/resolve_int.h"

int resolve_target(struct usc_target *target, const char *command)
{
	char buf[PATH_MAX], link[64];
	ssize_t n;

	switch (target->kind) {
	case USC_TARGET_PID:
		if (kill(target->pid, 0) && errno == ESRCH) {
			log_error("no such process: %d", (int)target->pid);
			return -ESRCH;
		}
		snprintf(link, sizeof(link), "/proc/%d/exe", (int)target->pid);
		n = readlink(link, buf, sizeof(buf) - 1);
		if (n < 0) {
			int e = errno;

			if (e == ENOENT || e == ESRCH) {
				log_error("no such process: %d", (int)target->pid);
				return -ESRCH;
			}
			log_error("cannot read the executable of process %d: %s", (int)target->pid,
				  strerror(e));
			return -e;
		}
		buf[n] = 0;
		if (n > 10 && !strcmp(buf + n - 10, " (deleted)")) {
			log_error("the executable of process %d was deleted or replaced: %s",
				  (int)target->pid, buf);
			return -ENOENT;
		}
		target->exe = strdup(buf);
		return target->exe ? 0 : -ENOMEM;
	case USC_TARGET_COMMAND:
		if (module_which(command, &target->exe)) {
			log_error("command not found: %s", command);
			return -ENOENT;
		}
		return 0;
	default:
		target->exe = NULL;
		return 0;
	}
}

int resolve_find_module(const struct usc_target *t, const struct usc_probe_spec *spec,
			char **path)
{
	const char *m = spec->module;
	int ret;

	if (!m[0]) {
		if (!t->exe) {
			log_error("%s: system-wide tracing needs a MODULE: write PATH:%s or LIBRARY:%s",
				  spec->text, spec->symbol[0] ? spec->symbol : "ADDRESS",
				  spec->symbol[0] ? spec->symbol : "ADDRESS");
			return -EINVAL;
		}
		*path = strdup(t->exe);
		return *path ? 0 : -ENOMEM;
	}
	if (strchr(m, '/')) {
		/* a path, or a /proc link to a file that has none (a memfd) */
		ret = module_path_resolve(m, path);
		if (ret && ret != -ENOMEM)
			log_error("%s: no such file: %s", spec->text, m);
		return ret;
	}
	switch (t->kind) {
	case USC_TARGET_PID:
		ret = module_find_in_pid(t->pid, m, path);
		break;
	case USC_TARGET_COMMAND:
		ret = module_find_for_exe(t->exe, m, path);
		if (ret == -ENOENT && module_find_system(m, path) == 0) {
			/* not linked: perhaps dlopen'ed later; the probe is on the
			 * file, so it fires once the command maps it */
			log_info("%s: %s does not link '%s'; using %s", spec->text, t->exe, m,
				 *path);
			ret = 0;
		}
		break;
	default:
		ret = module_find_system(m, path);
		break;
	}
	if (ret == -ENOENT) {
		if (t->kind == USC_TARGET_PID)
			log_error("%s: process %d has no module '%s' loaded", spec->text,
				  (int)t->pid, m);
		else if (t->kind == USC_TARGET_COMMAND)
			log_error("%s: %s does not link a module '%s'", spec->text, t->exe, m);
		else
			log_error("%s: no library '%s' found where the dynamic loader looks",
				  spec->text, m);
	} else if (ret == -ESRCH) {
		log_error("no such process: %d", (int)t->pid);
	} else if ((ret == -EACCES || ret == -EPERM) && t->kind == USC_TARGET_PID) {
		log_error("%s: cannot read the modules of process %d: permission denied "
			  "(trace it as root or as its owner)", spec->text, (int)t->pid);
	} else if (ret) {
		log_error("%s: cannot resolve module '%s': %s", spec->text, m, strerror(-ret));
	}
	return ret;
}
