/* The target's executable, and the module a probe names: the first step of
 * resolving a probe. */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/log.h"
#include "ns/ns.h"
#include "objfile/modules.h"
#include "resolve/resolve_int.h"

/* The executable of process pid, under its root when it has another. */
static int target_pid_exe(struct usc_target *target)
{
	char buf[PATH_MAX];
	ssize_t n = procexe_read(target->pid, buf, sizeof(buf));

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
	if (n > 10 && !strcmp(buf + n - 10, " (deleted)")) {
		log_error("the executable of process %d was deleted or replaced: %s",
			  (int)target->pid, buf);
		return -ENOENT;
	}
	target->exe = strdup(buf);
	return target->exe ? 0 : -ENOMEM;
}

/* Process pid: its root when it is not ours (a container), and its
 * executable. */
static int target_pid(struct usc_target *target)
{
	pid_t pid = target->pid;
	int ret;

	if (target->root) {
		log_error("--root is for system-wide tracing: -p %d finds the files of the "
			  "process in its own root", (int)pid);
		return -EINVAL;
	}
	if (kill(pid, 0) && errno == ESRCH) {
		log_error("no such process: %d", (int)pid);
		return -ESRCH;
	}
	ret = ns_proc_root(pid, &target->root);
	if (ret == -ESRCH) {
		log_error("no such process: %d", (int)pid);
		return ret;
	}
	if (ret == -ENOMEM)
		return ret;
	if (ret)	/* no permission, a zombie: its executable says so, as for any process */
		return target_pid_exe(target);
	if (target->root)
		log_info("process %d sees another root (a container): its files are read "
			 "through %s", (int)pid, target->root);
	return target_pid_exe(target);
}

/* A --root given: checked, and made canonical (a process's root stays the
 * /proc link: the host's realpath of it is another place). */
static int target_root(struct usc_target *target)
{
	const char *given = target->root;
	size_t l = ns_magic_root_len(given);
	char *canon = NULL;
	struct stat st;
	int ret = ns_realpath(given, &canon);

	if (!ret && stat(canon, &st))
		ret = -errno;
	if (ret == -ENOENT && l) {
		char proc[64];

		snprintf(proc, sizeof(proc), "%.*s", (int)(l - 5), given);	/* /proc/N */
		if (access(proc, F_OK)) {
			log_error("--root %s: process %s has gone, and its mount namespace with it",
				  given, proc + 6);
			free(canon);
			return -ESRCH;
		}
	}
	if (ret == -EACCES || ret == -EPERM) {
		log_error("--root %s: permission denied (trace as root)", given);
		free(canon);
		return ret;
	}
	if (ret || !S_ISDIR(st.st_mode)) {
		log_error("--root %s: %s", given, ret ? strerror(-ret) : "not a directory");
		free(canon);
		return ret ? ret : -ENOTDIR;
	}
	free(target->root);
	target->root = NULL;
	if (!strcmp(canon, "/"))
		free(canon);	/* the host's own */
	else
		target->root = canon;
	return 0;
}

/* COMMAND a script: its probes resolve in the program the kernel runs for it
 * (the engines follow the execs). A script uscope cannot follow is left to
 * the probes' own "not an x86-64 ELF file". */
static int target_script(struct usc_target *target)
{
	char *prog;
	int ret = module_script_program(target->exe, &prog);

	if (ret == -ENOEXEC)
		return 0;
	if (ret == -ENOENT) {
		log_error("%s: a script whose interpreter is not found", target->exe);
		return ret;
	}
	if (ret == -ELOOP) {
		log_error("%s: a script run by scripts more than 5 deep (the kernel refuses it)",
			  target->exe);
		return ret;
	}
	if (ret)
		return ret;
	log_info("%s is a script: its probes resolve in %s, the program it runs", target->exe,
		 prog);
	target->script = target->exe;
	target->exe = prog;
	return 0;
}

int resolve_target(struct usc_target *target, const char *command)
{
	switch (target->kind) {
	case USC_TARGET_PID:
		return target_pid(target);
	case USC_TARGET_COMMAND:
		if (target->root) {
			log_error("--root is for system-wide tracing: COMMAND runs in this "
				  "system's root");
			return -EINVAL;
		}
		if (module_which(command, &target->exe)) {
			log_error("command not found: %s", command);
			return -ENOENT;
		}
		return target_script(target);
	default:
		target->exe = NULL;
		return target->root ? target_root(target) : 0;
	}
}

void resolve_target_release(struct usc_target *target)
{
	free(target->exe);
	free(target->script);
	free(target->root);
	free(target->python);
	target->exe = target->script = target->root = target->python = NULL;
}

/* MODULE given as a path, under the target's root: the root's file at
 * that path (the host's is never taken instead), or a path already under
 * the root, or a /proc link of the traced process itself. */
static int find_module_in_root(const struct usc_target *t, const struct usc_probe_spec *spec,
			       char **path)
{
	const char *m = spec->module;
	size_t rl = strlen(t->root);
	char self[32];
	int ret;

	snprintf(self, sizeof(self), "/proc/%d/", (int)t->pid);
	if (!strncmp(m, t->root, rl) && m[rl] == '/')
		ret = ns_root_resolve(t->root, m + rl, path);
	else if (t->kind == USC_TARGET_PID && !strncmp(m, self, strlen(self)))
		ret = module_path_resolve(m, path);
	else
		ret = ns_root_resolve(t->root, m, path);
	if (ret == -ENOMEM || !ret)
		return ret;
	if (t->kind == USC_TARGET_PID)
		log_error("%s: no file %s in the root of process %d (%s): %s", spec->text, m,
			  (int)t->pid, t->root, strerror(-ret));
	else
		log_error("%s: no file %s under --root %s: %s", spec->text, m, t->root,
			  strerror(-ret));
	return ret;
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
	if (strchr(m, '/') && t->root)
		return find_module_in_root(t, spec, path);
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
		ret = t->root ? module_find_in_root(t->root, m, path) : module_find_system(m, path);
		break;
	}
	if (ret == -ENOENT) {
		char near[256] = "";

		/* the closest names, as an unknown function gets */
		if (t->kind == USC_TARGET_PID)
			module_suggest_in_pid(t->pid, m, near, sizeof(near));
		else if (t->kind == USC_TARGET_COMMAND)
			module_suggest_for_exe(t->exe, m, near, sizeof(near));
		if (t->kind == USC_TARGET_PID)
			log_error("%s: process %d has no module '%s' loaded%s%s%s", spec->text,
				  (int)t->pid, m, near[0] ? "; did you mean: " : "", near,
				  near[0] ? "?" : "");
		else if (t->kind == USC_TARGET_COMMAND)
			log_error("%s: %s does not link a module '%s'%s%s%s", spec->text, t->exe, m,
				  near[0] ? "; did you mean: " : "", near, near[0] ? "?" : "");
		else if (t->root)
			log_error("%s: no library '%s' in the default library directories under "
				  "--root %s", spec->text, m, t->root);
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
