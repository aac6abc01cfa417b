/* uscope objtrace: follow objects through the calls that receive them, as
 * the kernel's objtrace trigger does. Each hit of the --from probe adds its
 * one fetch argument (an object's address) to a followed set, each hit of
 * the --until probe removes it, and every other probe records a call only
 * when one of its six argument registers holds a followed object.
 *
 * Where each piece lives:
 *
 *   src/objtrace/probes.c    (this header's calls) the probes objtrace runs,
 *                            made from the user's: --field's fetch expression,
 *                            the hidden arguments of a matched probe, the
 *                            checks and the verdict of --from and --until
 *   src/probe/probe.h        usc_probe_spec.obj_role (enum usc_obj_role), the
 *                            limits (USC_OBJ_MAX, USC_OBJ_DEFAULT) and the
 *                            verdict argument (USC_OBJ_VERDICT) every engine
 *                            writes
 *   src/session/session.h    usc_session_opts.objtrace: on, max_objects
 *   src/session/plan.c       place_objtrace: every site that follows objects
 *                            goes to the one engine that keeps the set
 *   src/session/objtrace.c   the set kept by the session for an engine that
 *                            keeps none where the probe runs (tracefs), and
 *                            the verdict its events get
 *   src/engine/engine.h      usc_engine_ops.objtrace: the engine keeps the
 *                            set where the probe runs
 *   src/engine/inject/objset.h, objset.c
 *                            the inject engine's set in the shared memory
 *                            (lock-free table and filter), the tracer's side
 *   src/engine/inject/agent/agent.c ("objtrace"), tramp.c
 *                            the agent adds, removes and tests objects in the
 *                            traced process; the trampoline tests the set's
 *                            filter inline
 *   src/engine/bpf/uscope.bpf.c (the objs map, "objtrace"), bpf.c
 *                            the bpf engine's set: a hash map sized by
 *                            --max-objects at load
 *   src/sink/objtrace.c      the output: a line (or JSON object) per call
 *                            that received a followed object, per object
 *                            followed and released
 *   cli/cmd_objtrace.c       the command: its options, then these calls
 */
#ifndef USC_OBJTRACE_OBJTRACE_H
#define USC_OBJTRACE_OBJTRACE_H

#include <stddef.h>

#include "probe/probe.h"

/* Why objtrace refuses --field or a probe: msg says it; for a probe, pos is
 * where in the probe's text (spec->text) it goes wrong. */
struct usc_objtrace_error {
	size_t pos;
	char msg[USC_SPEC_MAX];
};

/* --field OFFS[:TYPE] as the template of a fetch expression on a register,
 * "+OFFS(%REG):TYPE" (default TYPE x64) into tmpl[len]. 0, or -EINVAL with
 * *err. */
int usc_objtrace_field(const char *field, char *tmpl, size_t len,
		       struct usc_objtrace_error *err);

/* A probe whose calls are matched against the followed set: a function
 * entry with no fetch argument nor filter of its own. It gets hidden
 * arguments: the six argument registers, with tmpl (usc_objtrace_field, or
 * NULL) the field behind each, and the verdict; obj_role USC_OBJ_MATCH.
 * 0, or -EINVAL with *err. */
int usc_objtrace_match(struct usc_probe_spec *spec, const char *tmpl,
		       struct usc_objtrace_error *err);

/* The --from (role USC_OBJ_FROM) or --until (USC_OBJ_UNTIL) probe, opt in
 * messages: a function probe with one integer fetch argument, the object,
 * and no filter. It gets the verdict argument and its role. 0, or -EINVAL
 * with *err. */
int usc_objtrace_object(struct usc_probe_spec *spec, const char *opt, enum usc_obj_role role,
			struct usc_objtrace_error *err);

#endif
