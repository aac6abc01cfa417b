/* COMMAND mode, MODULEs that only exist once COMMAND runs: neither linked by
 * COMMAND nor found where the dynamic loader looks. A library it will
 * dlopen from elsewhere, or a USDT provider it defines at run time
 * (libuscope-sdt's, a memfd named after the provider). Their probes can be
 * placed only once COMMAND has mapped them: the session starts COMMAND,
 * waits for them, then traces it as with -p (hits before are not seen). */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/log.h"
#include "objfile/modules.h"
#include "session/session.h"
#include "session/session_int.h"

size_t session_pending_modules(struct usc_session *s)
{
	size_t n = 0;

	if (!s->opts.cmd)
		return 0;
	usc_log_quiet(true);	/* not finding them is the answer */
	for (size_t i = 0; i < s->nspecs && n < SESSION_MAX_PENDING; i++) {
		const char *m = s->specs[i].module;
		char *path = NULL;
		bool seen = false;

		/* (a py: probe's MODULE is a Python module's) */
		if (!m[0] || strchr(m, '/') || s->specs[i].loc_kind == USC_LOC_PYTHON)
			continue;
		for (size_t k = 0; k < n; k++)
			seen |= !strcmp(s->pending[k], m);
		if (!seen && module_find_for_exe(s->target.exe, m, &path) == -ENOENT &&
		    module_find_system(m, &path) == -ENOENT)
			s->pending[n++] = m;
		free(path);
	}
	usc_log_quiet(false);
	s->npending = n;
	return n;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int session_wait_modules(struct usc_session *s, pid_t child, int sfd, int *sigints, int *status,
			 int *forward)
{
	double deadline = s->opts.duration > 0 ? now_s() + s->opts.duration : 0;
	/* said at once with -v; otherwise once the wait has lasted a second,
	 * so that a COMMAND that never loads it gets one line, the error */
	double warn_at = now_s() + 1.0;

	log_info("%s does not link %s%s: waiting for it to load %s", s->opts.cmd[0], s->pending[0],
		 s->npending > 1 ? " and more" : "", s->npending > 1 ? "them" : "it");
	for (;;) {
		if (warn_at > 0 && now_s() >= warn_at) {
			/* a warning: its hits until then are not seen */
			log_warn("%s does not link %s%s: waiting for it to load %s", s->opts.cmd[0],
				 s->pending[0], s->npending > 1 ? " and more" : "",
				 s->npending > 1 ? "them" : "it");
			warn_at = 0;
		}
		struct signalfd_siginfo si;
		struct pollfd p = {.fd = sfd, .events = POLLIN};
		size_t found = 0;

		usc_log_quiet(true);
		for (size_t i = 0; i < s->npending; i++) {
			char *path = NULL;

			found += module_find_in_pid(child, s->pending[i], &path) == 0;
			free(path);
		}
		usc_log_quiet(false);
		if (found == s->npending)
			return 0;
		if (waitpid(child, status, WNOHANG) == child) {
			char near[256] = "", *exe = NULL;

			/* the closest names among what it links */
			if (!module_which(s->opts.cmd[0], &exe))
				module_suggest_for_exe(exe, s->pending[0], near, sizeof(near));
			free(exe);
			if (near[0])
				log_error("%s exited before it loaded a module named '%s'; did you mean: "
					  "%s?", s->opts.cmd[0], s->pending[0], near);
			else
				log_error("%s exited before it loaded a module named '%s' (uscope list "
					  "-p PID names a running process's modules)", s->opts.cmd[0],
					  s->pending[0]);
			return -ECHILD;
		}
		while (sfd >= 0 && read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
			enum session_sig_act act = session_signal_act(&si, true, sigints);

			if (act == SESSION_SIG_FORWARD) {
				kill(child, (int)si.ssi_signo);	/* nothing placed yet */
				*forward = (int)si.ssi_signo;
			}
			if (act != SESSION_SIG_NONE)
				deadline = -1;
		}
		if (deadline < 0 || (deadline && now_s() >= deadline)) {
			log_error("stopped before %s loaded a module named '%s'", s->opts.cmd[0],
				  s->pending[0]);
			return -EINTR;
		}
		poll(&p, 1, 10);
	}
}
