/* Starting COMMAND: forked, held before its exec until every probe is in
 * place (and, for an engine that patches it, until the engine holds it). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "session/session_int.h"

int spawn_held(const char *exe, char *const *argv, const sigset_t *oldmask, struct spawned *sp)
{
	int go[2], err[2];
	pid_t pid;

	sp->pid = -1;
	sp->go_w = sp->err_r = -1;
	if (pipe2(go, O_CLOEXEC))
		return -errno;
	if (pipe2(err, O_CLOEXEC)) {
		int e = errno;

		close(go[0]);
		close(go[1]);
		return -e;
	}
	pid = fork();
	if (pid < 0) {
		int e = errno;

		close(go[0]);
		close(go[1]);
		close(err[0]);
		close(err[1]);
		return -e;
	}
	if (pid == 0) {
		char c;
		int e;

		close(go[1]);
		close(err[0]);
		sigprocmask(SIG_SETMASK, oldmask, NULL);
		if (read(go[0], &c, 1) != 1)
			_exit(127);	/* the tracer gave up */
		execv(exe, argv);
		e = errno;
		if (write(err[1], &e, sizeof(e)) < 0)
			_exit(127);
		_exit(e == ENOENT ? 127 : 126);
	}
	close(go[0]);
	close(err[1]);
	sp->pid = pid;
	sp->go_w = go[1];
	sp->err_r = err[0];
	return 0;
}

int spawn_go(struct spawned *sp)
{
	int err = 0;
	ssize_t n;

	if (write(sp->go_w, "g", 1) != 1)
		return -errno;
	close(sp->go_w);
	sp->go_w = -1;
	/* EOF: the exec closed the pipe; else its errno */
	do
		n = read(sp->err_r, &err, sizeof(err));
	while (n < 0 && errno == EINTR);
	close(sp->err_r);
	sp->err_r = -1;
	if (n == (ssize_t)sizeof(err)) {
		waitpid(sp->pid, NULL, __WALL);
		sp->pid = -1;
		return err ? err : EIO;
	}
	return 0;
}

void spawn_close(struct spawned *sp)
{
	if (sp->go_w >= 0)
		close(sp->go_w);
	if (sp->err_r >= 0)
		close(sp->err_r);
	sp->go_w = sp->err_r = -1;
}
