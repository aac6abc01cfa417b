/* py: probes (src/python): a site a probe, at no address, which the inject
 * agent's profile function fires for every Python call (or return) of the
 * functions its globs match; its arguments are Python's. And, once a
 * runtime file, the hidden sites where a thread takes the GIL, where the
 * agent gives the thread its profile function: the returns of
 * PyEval_RestoreThread and PyEval_AcquireThread in the file that has the
 * runtime. System-wide, a site for each CPython the system (or --root DIR)
 * has. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache/cache.h"
#include "core/log.h"
#include "objfile/modules.h"
#include "objfile/objfile.h"
#include "python/detect.h"
#include "resolve/resolve_int.h"

/* The file with the target's runtime: 0 with *path, or -errno (said
 * unless quiet). */
static int runtime_file(const struct usc_target *t, const struct usc_probe_spec *spec,
			char **path, bool quiet)
{
	struct python_runtime rt = {0};
	int ret = -ENOENT;

	if (t->kind == USC_TARGET_SYSTEM)
		return -ENOENT;	/* (system_wide: several; not one file to wait for) */
	if (t->kind == USC_TARGET_PID) {
		ret = quiet ? python_find_pid(t->pid, &rt) : python_detect_pid(t->pid, &rt);
	} else if (t->exe) {
		ret = python_find_linked(t->exe, &rt, quiet);
		if (ret == -ENOENT && t->python)	/* a launcher's */
			ret = python_find_linked(t->python, &rt, quiet);
		if (ret == -ENOENT && !quiet)
			log_error("%s: %s runs no CPython of its own: py: probes need COMMAND to be "
				  "CPython, or launch one uscope can name beforehand (python3 app.py, "
				  "env python3, a pyenv shim, a script run by #!/usr/bin/python3 or "
				  "ending in exec python3)", spec->text, t->exe);
	}
	if (ret)
		return ret;
	*path = rt.path;
	rt.path = NULL;
	python_runtime_free(&rt);
	return 0;
}

/* A py: probe's argument from what the probe says: a name is the Python
 * argument of that name, $params all of them, $retval the value returned;
 * $pystack, $pid, $tid, $cpu and $comm are what they are everywhere. */
static int bind_arg(const struct usc_probe_spec *spec, const struct usc_fetcharg *in,
		    struct usc_fetcharg *out)
{
	const struct fetch_insn *f = &in->insn[0];
	size_t pos = (size_t)(f->imm & 0xffffffff), len = (size_t)((uint64_t)f->imm >> 32);

	*out = *in;
	switch (f->op) {
	case FOP_VAR:
		for (size_t i = pos; i < pos + len && i < sizeof(spec->text); i++) {
			unsigned char c = (unsigned char)spec->text[i];

			if (!(c == '_' || (c >= '0' && c <= '9') || ((c | 32) >= 'a' && (c | 32) <= 'z') ||
			      c >= 0x80))
				goto bad;
		}
		out->insn[0].op = FOP_PYARG;
		break;
	case FOP_PARAMS:
		out->insn[0].op = FOP_PYARGS;
		snprintf(out->name, sizeof(out->name), "args");
		break;
	case FOP_RETVAL:
		out->insn[0] = (struct fetch_insn){.op = FOP_PYRETVAL};
		out->insn[1] = (struct fetch_insn){.op = FOP_END};
		out->ninsn = 2;
		if (!out->named)
			snprintf(out->name, sizeof(out->name), "retval");
		break;
	case FOP_PYSTACK:
	case FOP_PID:
	case FOP_TID:
	case FOP_CPU:
	case FOP_COMM:
		return 0;
	default:
		goto bad;
	}
	if (!out->type_given)
		out->type = USC_T_STRING;
	out->show = USC_SHOW_PYVAL;
	return 0;
bad:
	log_error("%s: %.*s: a py: probe takes Python arguments by name, $params, $retval, "
		  "$pystack, $pid, $tid, $cpu and $comm", spec->text, (int)in->len,
		  spec->text + in->pos);
	return -EINVAL;
}

static void implicit(struct usc_fetcharg *a, const char *name, enum fetch_op op,
		     enum usc_type type, uint8_t show)
{
	memset(a, 0, sizeof(*a));
	snprintf(a->name, sizeof(a->name), "%s", name);
	a->type = type;
	a->show = show;
	a->insn[0] = (struct fetch_insn){.op = op};
	a->insn[1] = (struct fetch_insn){.op = FOP_END};
	a->ninsn = 2;
}

/* The site's arguments: the function (a code object, which names the
 * event), then the probe's; without any, all of the function's (or the
 * value it returns) unless aggregations key on what the probe names. */
static int bind_site(struct usc_site *s, const struct usc_probe_spec *spec, unsigned flags)
{
	unsigned n = 0, shown = probe_shown_args(spec->args, spec->nargs);
	bool dflt = !shown && !(flags & RESOLVE_NO_DEFAULT_ARGS);
	const char *bad = NULL;
	int ret;

	s->args = calloc(spec->nargs + 2, sizeof(*s->args));
	if (!s->args)
		return -ENOMEM;
	implicit(&s->args[n++], "function", FOP_PYFUNC, USC_T_X64, USC_SHOW_PYFUNC);
	if (dflt && spec->is_return)
		implicit(&s->args[n++], "retval", FOP_PYRETVAL, USC_T_STRING, USC_SHOW_PYVAL);
	else if (dflt)
		implicit(&s->args[n++], "args", FOP_PYARGS, USC_T_STRING, USC_SHOW_PYVAL);
	for (unsigned i = 0; i < spec->nargs; i++)
		if ((ret = bind_arg(spec, &spec->args[i], &s->args[n++])))
			return ret;
	s->nargs = n;
	if (!spec->filter.n)
		return 0;
	ret = probe_bind_filter(&spec->filter, s->args, s->nargs, &s->filter, &bad);
	if (ret)
		log_error("%s: if: '%s'%s", spec->text, bad ? bad : "?",
			  ret == -EINVAL ? " has another type (a Python value is its repr, a "
					   "string: name it NAME:s64 to compare it as a number)" :
					   " is no argument of the probe");
	return ret;
}

/* The entry of PyEval_EvalCode: a script's module (python FILE, -m, -c,
 * an embedding's PyRun_*) and each import's run there, the GIL held, once
 * CPython is initialized: where sys.monitoring is set before the script's
 * first line (3.12 and later); hidden, marked py_hook. */
static int add_eval_hook(struct site_vec *sv, unsigned idx, const char *path, struct objfile *ef)
{
	static struct usc_probe_spec hook = {
		.text = "(py: probes: where CPython runs a module)",
		.loc_kind = USC_LOC_SYMBOL,
	};
	const struct objfile_sym *fn = NULL, **cands = NULL;
	size_t ncands = 0, first = sv->n;
	int ret = 0;

	if (objfile_func_lookup(ef, "PyEval_EvalCode", &fn, &cands, &ncands))
		fn = NULL;
	free(cands);
	if (fn)
		ret = resolve_add_site(sv, &hook, idx, path, ef, fn, fn->vaddr, 0);
	for (size_t i = first; i < sv->n; i++) {
		sv->v[i].hidden = true;
		sv->v[i].py_hook = true;
	}
	return ret;
}

/* 3.11: the returns of PyEval_RestoreThread and PyEval_AcquireThread in
 * path (a thread takes the GIL: its profile function); 3.12 and later:
 * PyEval_EvalCode's entry. Hidden, marked py_hook. */
static int add_hooks(struct site_vec *sv, unsigned idx, const char *path, unsigned flags)
{
	static struct usc_probe_spec hook = {
		.text = "(py: probes: where a thread takes the GIL)",
		.is_return = true,
		.loc_kind = USC_LOC_SYMBOL,
	};
	static const char *const fns[] = {"PyEval_RestoreThread", "PyEval_AcquireThread"};
	struct python_runtime rt;
	struct objfile *ef;
	int ret = cache_elf(sv->c, path, &ef);
	bool monitoring = false;

	if (!python_find_file(path, &rt)) {
		monitoring = (rt.version >> 16) >= 0x030c;
		python_runtime_free(&rt);
	}
	/* 3.12 and later: sys.monitoring is per interpreter, set once where
	 * the thread's own state is current (PyEval_RestoreThread's "return"
	 * is a tail call that makes it so: too early) */
	if (!ret && monitoring)
		return add_eval_hook(sv, idx, path, ef);

	for (size_t k = 0; k < sizeof(fns) / sizeof(fns[0]) && !ret; k++) {
		const struct objfile_sym *fn = NULL, **cands = NULL;
		size_t first = sv->n, ncands = 0;

		if (objfile_func_lookup(ef, fns[k], &fn, &cands, &ncands))
			fn = NULL;
		free(cands);
		if (!fn) {
			log_error("python: %s has no %s: py: probes cannot follow its threads", path,
				  fns[k]);
			return -ENOENT;
		}
		ret = resolve_return_sites(sv, &hook, idx, path, ef, fn,
					   (flags & ~RESOLVE_URETPROBE) | RESOLVE_NO_TAIL_FOLLOW);
		for (size_t i = first; i < sv->n; i++) {
			sv->v[i].hidden = true;
			sv->v[i].py_hook = true;
		}
	}
	return ret;
}

static int one_site(const struct usc_target *t, const struct usc_probe_spec *spec,
		    unsigned idx, unsigned flags, struct site_vec *sv, char *path);

/* Are the hidden GIL sites of path in already (one set a runtime file)? */
static bool hooked(const struct site_vec *sv, const char *path)
{
	for (size_t i = 0; i < sv->n; i++)
		if (sv->v[i].py_hook && sv->v[i].path && !strcmp(sv->v[i].path, path))
			return true;
	return false;
}

/* System-wide: a site for each CPython under the root (--root DIR, else
 * the host's), each with its hidden sites; the inject engine attaches the
 * processes that map one, and a process's probes are its own file's
 * (engine/inject/python.c). */
static int system_wide(const struct usc_target *t, const struct usc_probe_spec *spec,
		       unsigned idx, unsigned flags, struct site_vec *sv)
{
	char **paths = NULL;
	ssize_t n = python_runtimes_under(t->root, &paths);
	int ret = 0;

	if (n == 0)
		log_error("%s: no CPython uscope reads %s%s (python3.X in /usr/local/bin, /usr/bin "
			  "or /bin, libpython3.X.so in the library directories): py: probes "
			  "system-wide run in the processes of those files", spec->text,
			  t->root ? "under --root " : "on this system", t->root ? t->root : "");
	if (n <= 0)
		return n ? (int)n : -ENOENT;
	for (ssize_t i = 0; i < n && !ret; i++) {
		ret = one_site(t, spec, idx, flags, sv, paths[i]);
		paths[i] = NULL;	/* (taken) */
	}
	python_runtimes_free(paths, (size_t)n);
	return ret;
}

int resolve_python(const struct usc_target *t, const struct usc_probe_spec *spec, unsigned idx,
		   unsigned flags, struct site_vec *sv)
{
	char *path = NULL;
	int ret;

	if (t->kind == USC_TARGET_SYSTEM)
		return system_wide(t, spec, idx, flags, sv);
	if ((ret = runtime_file(t, spec, &path, false)))
		return ret;
	return one_site(t, spec, idx, flags, sv, path);
}

/* The site of spec in the runtime file path (taken), its hidden sites
 * the first time. */
static int one_site(const struct usc_target *t, const struct usc_probe_spec *spec,
		    unsigned idx, unsigned flags, struct site_vec *sv, char *path)
{
	char where[USC_MODULE_MAX + USC_SYM_MAX + 8];
	struct usc_site *s;
	int ret = 0;

	(void)t;
	if (!hooked(sv, path)) {
		ret = add_hooks(sv, idx, path, flags);
		sv->py_hooks = !ret;
	}
	s = ret ? NULL : resolve_site_push(sv);
	if (!ret && !s)
		ret = -ENOMEM;
	if (ret) {
		free(path);
		return ret;
	}
	s->spec = spec;
	s->probe = idx;
	s->path = path;
	s->python = true;
	s->is_return = spec->is_return;
	/* what pairs its entries with its returns, and its label */
	if (strcmp(spec->module, "*"))
		snprintf(where, sizeof(where), "py:%s:%s", spec->module, spec->symbol);
	else
		snprintf(where, sizeof(where), "py:%s", spec->symbol);
	s->symbol = strdup(where);
	if (!s->symbol)
		return -ENOMEM;
	if (!spec->event_given)
		snprintf(s->label, sizeof(s->label), "%.*s%s", (int)(sizeof(s->label) - 9), where,
			 spec->is_return ? "__return" : "");
	return bind_site(s, spec, flags);
}

int resolve_python_final(const struct usc_target *t, const struct usc_probe_spec *spec,
			 unsigned idx, struct site_vec *sv)
{
	static struct usc_probe_spec fin = {
		.text = "($pystack: where CPython finalizes)",
		.loc_kind = USC_LOC_SYMBOL,
	};
	const struct objfile_sym *fn = NULL, **cands = NULL;
	struct objfile *ef;
	size_t ncands = 0, first = sv->n;
	char *path = NULL;
	int ret;

	if (runtime_file(t, spec, &path, true))
		return 0;	/* no CPython here: nothing to wait for */
	ret = cache_elf(sv->c, path, &ef);
	if (!ret && objfile_func_lookup(ef, "Py_FinalizeEx", &fn, &cands, &ncands))
		fn = NULL;
	free(cands);
	if (!ret && fn)
		ret = resolve_add_site(sv, &fin, idx, path, ef, fn, fn->vaddr, 0);
	for (size_t i = first; i < sv->n; i++) {
		sv->v[i].hidden = true;
		sv->v[i].py_final = true;
		snprintf(sv->v[i].event, sizeof(sv->v[i].event), "usc_py_finalize");
		snprintf(sv->v[i].label, sizeof(sv->v[i].label), "Py_FinalizeEx");
	}
	free(path);
	return ret;
}
