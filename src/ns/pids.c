/* PIDs: a task's ids in its own PID namespace, read from /proc (see ns.h).
 * The session keeps what it learnt per task in its cache
 * (src/cache/nsids.c): one /proc read per task. */
#include "ns/ns.h"

#include "core/proc.h"

int ns_task_ids(pid_t tid, pid_t *ns_pid, pid_t *ns_tid)
{
	struct proc_status st;
	int ret = proc_status_read(tid, &st);

	if (ret)
		return ret;
	if (!st.ns_known) {	/* a kernel without NSpid: one namespace */
		*ns_pid = st.tgid;
		*ns_tid = tid;
		return 0;
	}
	*ns_pid = st.ns_nested ? st.ns_tgid : st.tgid;
	*ns_tid = st.ns_nested ? st.ns_tid : tid;
	return st.ns_nested;
}

pid_t ns_inner_tid(pid_t tid)
{
	pid_t p = 0, t = 0;

	return ns_task_ids(tid, &p, &t) > 0 ? t : tid;
}
