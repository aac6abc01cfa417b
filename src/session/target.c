/* How the traced process ends, and what the signals sent to uscope do.
 *
 * SIGINT, SIGTERM and SIGHUP end a run. With a COMMAND running, who sent
 * the signal decides what becomes of it:
 *  - the terminal (si_code SI_KERNEL: Ctrl-C, a hangup) sent it to the
 *    whole foreground process group, COMMAND included: uscope waits for
 *    COMMAND to end (its end is the run's); a second one ends the run at
 *    once, COMMAND running on untraced;
 *  - a process sent it to uscope alone (kill(1), a service manager: SI_USER,
 *    SI_QUEUE, SI_TKILL): the run ends at once whatever COMMAND is doing;
 *    uscope removes its probes, passes the same signal on to COMMAND (as
 *    timeout(1) does) and exits 128+N without waiting for it.
 * Without a COMMAND (-p, system-wide), any of them ends the run.
 *
 * -p may name a thread: the process it is a thread of is traced (its end is
 * the run's; a pidfd is a process's).
 *
 * A traced process that dies by a signal is said on stderr, for COMMAND
 * (its wait status) and for -p: the kernel keeps a process's exit status
 * for its pidfd once its parent has reaped it (PIDFD_GET_INFO with
 * PIDFD_INFO_EXIT, Linux 6.15); before that, the zombie's /proc/PID/stat
 * has it. Where neither says, only that it ended. */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/log.h"
#include "core/proc.h"
#include "session/session_int.h"

/* linux/pidfd.h of Linux 6.15; Debian 12's headers predate it */
struct pidfd_info_v0 {
	uint64_t mask;
	uint64_t cgroupid;
	uint32_t pid, tgid, ppid, ruid, rgid, euid, egid, suid, sgid, fsuid, fsgid;
	int32_t exit_code;
};
#define USC_PIDFD_GET_INFO _IOWR(0xFF, 11, struct pidfd_info_v0)
#define USC_PIDFD_INFO_EXIT (1ULL << 3)

enum session_sig_act session_signal_act(const struct signalfd_siginfo *si, bool command,
					int *tty_stops)
{
	int sig = (int)si->ssi_signo;

	if (sig != SIGINT && sig != SIGTERM && sig != SIGHUP)
		return SESSION_SIG_NONE;
	if (!command)
		return SESSION_SIG_STOP;
	if (si->ssi_code == SI_KERNEL)
		return ++*tty_stops < 2 ? SESSION_SIG_NONE : SESSION_SIG_STOP;
	return SESSION_SIG_FORWARD;
}

/* The exit code of a zombie, from its /proc/PID/stat (field 52). */
static int zombie_status(pid_t pid, int *status)
{
	char path[64], buf[2048], *p;
	size_t n;
	FILE *f;
	int field = 3;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return -ESRCH;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	p = strrchr(buf, ')');
	if (!p || p[1] != ' ' || p[2] != 'Z')
		return -ENODATA;	/* not (or no longer) a zombie */
	for (p += 2; *p && field < 52; p++)
		if (*p == ' ')
			field++;
	if (field != 52)
		return -ENODATA;
	*status = atoi(p);
	return 0;
}

static int pidfd_status(int pfd, int *status)
{
	struct pidfd_info_v0 info = {.mask = USC_PIDFD_INFO_EXIT};

	if (pfd < 0 || ioctl(pfd, USC_PIDFD_GET_INFO, &info) || !(info.mask & USC_PIDFD_INFO_EXIT))
		return -ENODATA;
	*status = info.exit_code;
	return 0;
}

pid_t session_process_of(pid_t pid)
{
	struct proc_status st;
	pid_t tgid;

	if (proc_status_read(pid, &st))
		return pid;	/* (gone, or not ours to see: said at start) */
	tgid = st.tgid;
	if (tgid != pid) {
		log_info("-p %d is a thread of process %d: tracing the process", (int)pid,
			 (int)tgid);
		return tgid;
	}
	return pid;
}

int session_exit_status(int pfd, pid_t pid, int *status)
{
	if (!pidfd_status(pfd, status))
		return 0;	/* reaped already */
	if (!zombie_status(pid, status))
		return 0;
	return pidfd_status(pfd, status);	/* reaped meanwhile */
}

void session_report_end(pid_t pid, int status, bool known)
{
	const char *name;

	if (!known) {
		log_warn("process %d ended (how is not known: the kernel keeps a process's exit "
			 "status for a tracer since Linux 6.15)", (int)pid);
		return;
	}
	if (WIFEXITED(status)) {
		log_info("process %d exited with status %d", (int)pid, WEXITSTATUS(status));
		return;
	}
	if (!WIFSIGNALED(status))
		return;
	name = sigabbrev_np(WTERMSIG(status));
	if (name)
		log_error("process %d killed by SIG%s%s", (int)pid, name,
			  WCOREDUMP(status) ? " (core dumped)" : "");
	else
		log_error("process %d killed by signal %d%s", (int)pid, WTERMSIG(status),
			  WCOREDUMP(status) ? " (core dumped)" : "");
}
