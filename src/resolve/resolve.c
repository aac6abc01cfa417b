#include "resolve/resolve.h"

#include <ctype.h>
#include <errno.h>
#include <fnmatch.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/log.h"
#include "resolve/cache.h"
#include "go/goabi.h"
#include "resolve/shape.h"
#include "elf/elf.h"
#include "dwarf/dwarf.h"
#include "dwarf/inline.h"
#include "elf/modules.h"
#include "usdt/usdt.h"
#include "x86/insn.h"

static bool spec_needs_dwarf(const struct usc_probe_spec *spec)
{
	for (unsigned i = 0; i < spec->nargs; i++)
		if (spec->args[i].insn[0].op == FOP_VAR || spec->args[i].insn[0].op == FOP_PARAMS)
			return true;
	return false;
}

/* ---- the target ---------------------------------------------------------- */

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

/* ---- event names ---------------------------------------------------------- */

static void sanitize_name(const char *in, char *out, size_t max)
{
	size_t n = 0;

	if (!isalpha((unsigned char)in[0]) && in[0] != '_' && n + 1 < max)
		out[n++] = '_';
	for (const char *p = in; *p && n + 1 < max; p++) {
		if (*p == '@')
			break;		/* drop the symbol version */
		if (isalnum((unsigned char)*p) || *p == '_')
			out[n++] = *p;
		else if (n && out[n - 1] != '_')
			out[n++] = '_';
	}
	while (n > 1 && out[n - 1] == '_')
		n--;
	out[n] = 0;
}

static void name_site(struct usc_site *site, struct usc_site *all, size_t nall,
		      bool several)
{
	const struct usc_probe_spec *spec = site->spec;
	char base[USC_NAME_MAX], tmp[USC_NAME_MAX * 2];
	const char *suffix = site->is_return ? "__return" : "";
	size_t room = USC_NAME_MAX - 1 - strlen(suffix) - 4; /* keep space for _NN */

	if (spec->event_given && !several) {
		snprintf(site->event, sizeof(site->event), "%s", spec->event);
		snprintf(site->label, sizeof(site->label), "%s", spec->event);
		return;
	}
	if (spec->loc_kind == USC_LOC_USDT)
		snprintf(tmp, sizeof(tmp), "%s", site->symbol);	/* provider_name */
	else if (spec->loc_kind == USC_LOC_ADDRESS)
		snprintf(tmp, sizeof(tmp), "addr_0x%llx", (unsigned long long)site->vaddr);
	else if (spec->has_offset)
		snprintf(tmp, sizeof(tmp), "%s_0x%llx", site->symbol,
			 (unsigned long long)spec->offset);
	else
		snprintf(tmp, sizeof(tmp), "%s%s%s", spec->event_given ? spec->event : "",
			 spec->event_given ? "_" : "", site->symbol);
	sanitize_name(tmp, base, room < sizeof(base) ? room : sizeof(base));
	snprintf(tmp, sizeof(tmp), "%s%s", base, suffix);
	for (unsigned k = 2;; k++) {
		bool clash = false;

		for (size_t i = 0; i < nall; i++)
			if (&all[i] != site && all[i].event[0] && !strcmp(all[i].event, tmp))
				clash = true;
		if (!clash)
			break;
		snprintf(tmp, sizeof(tmp), "%s_%u%s", base, k, suffix);
	}
	tmp[USC_NAME_MAX - 1] = 0;	/* base was sized to leave room */
	memcpy(site->event, tmp, USC_NAME_MAX);
	/* Every site of one USDT probe shows as PROVIDER:NAME (or EVENT). */
	if (site->label[0] == 0)
		snprintf(site->label, sizeof(site->label), "%s", site->event);
}

/* ---- modules ------------------------------------------------------------- */

static int find_module(const struct usc_target *t, const struct usc_probe_spec *spec,
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

/* ---- sites ----------------------------------------------------------------- */

static int check_boundary(const struct elf_file *ef, const struct elf_sym *fn, uint64_t off,
			  const struct usc_probe_spec *spec)
{
	uint8_t *code;
	uint64_t prev = 0, next = 0;
	int ret;

	if (!fn->size)
		return 0;
	code = malloc(fn->size);
	if (!code)
		return -ENOMEM;
	ret = elf_read(ef, fn->vaddr, code, fn->size);
	if (!ret)
		ret = x86_check_boundary(code, fn->size, fn->vaddr, off, &prev, &next);
	free(code);
	if (ret == -EINVAL)
		log_error("%s: offset 0x%llx is inside an instruction of %s; the nearest "
			  "instruction boundaries are +0x%llx and +0x%llx",
			  spec->text, (unsigned long long)off, elf_sym_pretty(fn),
			  (unsigned long long)prev, (unsigned long long)next);
	else if (ret == -ENOEXEC)
		log_error("%s: cannot decode %s up to offset 0x%llx to check the instruction "
			  "boundary", spec->text, elf_sym_pretty(fn), (unsigned long long)off);
	else if (ret)
		log_error("%s: cannot read the code of %s: %s", spec->text, elf_sym_pretty(fn),
			  strerror(-ret));
	return ret;
}

struct site_vec;
static int bind_site(struct usc_site *site, const struct usc_fetcharg *usdt, unsigned nusdt,
		     struct dwarf_module *dm, struct site_vec *sv);

struct site_vec {
	struct usc_site *v;
	size_t n, cap;
	struct cache *c;	/* the session's files */
	unsigned flags;		/* enum resolve_flags */
};

static struct usc_site *site_push(struct site_vec *sv)
{
	if (sv->n == sv->cap) {
		size_t cap = sv->cap ? sv->cap * 2 : 16;
		struct usc_site *v = realloc(sv->v, cap * sizeof(*v));

		if (!v)
			return NULL;
		sv->v = v;
		sv->cap = cap;
	}
	memset(&sv->v[sv->n], 0, sizeof(sv->v[0]));
	sv->v[sv->n].agg_func = -1;
	return &sv->v[sv->n++];
}

/* Whether every variable the probe names by itself or through $params has
 * a location at pc (a member or a pointer it goes through may still fault
 * when read: that is for the run). Quiet: this is a question. */
static bool vars_readable(struct dwarf_module *dm, const struct usc_probe_spec *spec,
			  uint64_t pc)
{
	struct usc_fetcharg mem[USC_MAX_ARGS];
	bool ok = true;

	usc_log_quiet(true);
	for (unsigned i = 0; i < spec->nargs && ok; i++) {
		const struct usc_fetcharg *in = &spec->args[i];
		size_t vp = (size_t)(in->insn[0].imm & 0xffffffff);
		size_t vl = (size_t)(in->insn[0].imm >> 32);
		int n;

		if (in->insn[0].op == FOP_VAR) {
			ok = dwarf_lower_var(dm, pc, spec->text + vp, vl, in->name, mem,
					     USC_MAX_ARGS, NULL) != -ENODATA;
		} else if (in->insn[0].op == FOP_PARAMS) {
			n = dwarf_params(dm, pc, mem, USC_MAX_ARGS);
			for (int k = 0; k < n && ok; k++)
				ok = !mem[k].optimized_out;
		}
	}
	usc_log_quiet(false);
	return ok;
}

#define SITE_RET 1	/* on a ret */
#define SITE_TAIL 2	/* on a tail-call jmp */

static int add_site(struct site_vec *sv, const struct usc_probe_spec *spec, unsigned idx,
		    const char *path, const struct elf_file *ef, const struct elf_sym *fn,
		    uint64_t vaddr, unsigned site_flags)
{
	struct dwarf_module *dm = NULL;
	struct usc_site *s;
	uint64_t off;

	if (!elf_vaddr_is_exec(ef, vaddr)) {
		log_error("%s: address 0x%llx is not in an executable segment of %s", spec->text,
			  (unsigned long long)vaddr, path);
		return -EINVAL;
	}
	if (elf_vaddr_to_offset(ef, vaddr, &off)) {
		log_error("%s: address 0x%llx has no file offset in %s", spec->text,
			  (unsigned long long)vaddr, path);
		return -EINVAL;
	}
	if (spec_needs_dwarf(spec)) {
		int err;

		if (spec->is_return || site_flags) {
			log_error("%s: variables by name are not readable at a return; use $retval",
				  spec->text);
			return -EINVAL;
		}
		err = cache_dwarf(sv->c, path, &dm);
		if (err == -ENODATA) {
			log_error("%s: %s has no debug info (DWARF) to find variables by name in: "
				  "build it with -g, or install its separate debug file", spec->text,
				  path);
			return err;
		}
		if (err) {
			log_error("%s: cannot read the debug info of %s: %s", spec->text, path,
				  strerror(-err));
			return err;
		}
		/* at a function's entry its parameters are not home yet: probe
		 * after the prologue, as perf probe does; but optimized code
		 * may have reused their registers by then, while they are all
		 * at the entry (a leaf at -O2): probe the entry then. Neither:
		 * the probe stays after the prologue, and check_optimized_out
		 * names the variable. */
		if (fn && vaddr == fn->vaddr && dwarf_after_prologue(dm, fn->vaddr, &vaddr) == 0 &&
		    vaddr != fn->vaddr && !vars_readable(dm, spec, vaddr) &&
		    vars_readable(dm, spec, fn->vaddr))
			vaddr = fn->vaddr;
		if (elf_vaddr_to_offset(ef, vaddr, &off))
			return -EINVAL;
	}
	if (fn && (fn->flags & ELF_SYM_IFUNC) && !spec->is_glob)
		log_warn("%s: %s is an IFUNC: the probe is on its resolver, which runs when the "
			 "symbol is bound, not on the implementation it selects", spec->text,
			 elf_sym_pretty(fn));
	s = site_push(sv);
	if (!s)
		return -ENOMEM;
	s->spec = spec;
	s->probe = idx;
	s->path = strdup(path);
	s->symbol = fn ? strdup(elf_sym_pretty(fn)) : NULL;
	s->vaddr = vaddr;
	s->func_vaddr = fn ? fn->vaddr : 0;
	s->offset = off;
	s->is_return = spec->is_return;
	s->ret_site = site_flags != 0;
	s->tail_call = site_flags & SITE_TAIL;
	if (!s->path || (fn && !s->symbol))
		return -ENOMEM;
	if (s->ret_site)	/* every return site of one function shows as one */
		snprintf(s->label, sizeof(s->label), "%s%s",
			 spec->event_given ? spec->event : elf_sym_pretty(fn),
			 spec->event_given ? "" : "__return");
	else if (fn && (fn->demangled || ef->is_go) && !spec->event_given && spec->has_offset)
		snprintf(s->label, sizeof(s->label), "%s+0x%llx", elf_sym_pretty(fn),
			 (unsigned long long)spec->offset);
	else if (fn && (fn->demangled || ef->is_go) && !spec->event_given)
		/* C++: the demangled name; Go: its own (main.(*T).m), which
		 * the kernel's event name cannot spell */
		snprintf(s->label, sizeof(s->label), "%s%s", elf_sym_pretty(fn),
			 s->is_return ? "__return" : "");
	return bind_site(s, NULL, 0, dm, sv);
}

/* Bind the probe's arguments to a site: $argN becomes a register (a
 * function) or the USDT argument's program. A USDT probe with no FETCHARG
 * records all of its arguments. */
static int bind_args(struct usc_site *site, const struct usc_fetcharg *usdt, unsigned nusdt,
		     bool defaults, struct dwarf_module *dm, struct cache *c)
{
	const struct usc_probe_spec *spec = site->spec;
	unsigned shown = probe_shown_args(spec->args, spec->nargs), out = 0;

	site->args = calloc(USC_MAX_ARGS, sizeof(*site->args));
	if (!site->args)
		return -ENOMEM;
	if (!shown && defaults && usdt) {
		/* every argument of the USDT probe, then the filter's own */
		out = nusdt < USC_MAX_ARGS ? nusdt : USC_MAX_ARGS;
		memcpy(site->args, usdt, out * sizeof(*usdt));
	}
	for (unsigned i = 0; i < spec->nargs; i++) {
		const struct usc_fetcharg *in = &spec->args[i];
		struct usc_fetcharg low = {0}, copy;
		int ret;

		if (out >= USC_MAX_ARGS) {
			log_error("%s: more than %d arguments", spec->text, USC_MAX_ARGS);
			return -E2BIG;
		}
		if (!usdt && goabi_wants(in)) {
			/* a Go function: Go's register ABI ($argN, $retvalN, $goid) */
			struct dwarf_module *gdm = dm;

			if (!gdm && in->insn[0].op == FOP_GOID && cache_dwarf(c, site->path, &gdm))
				gdm = NULL;
			ret = goabi_bind(c, site, gdm, in, &site->args[out]);
			if (ret < 0)
				return ret;
			if (ret == 0) {
				out++;
				continue;
			}
		}
		if ((in->insn[0].op == FOP_PARAMS || in->insn[0].op == FOP_VAR) && !dm) {
			log_error("%s: %.*s: variables by name work on function and address "
				  "probes, not here", spec->text, (int)in->len, spec->text + in->pos);
			return -EINVAL;
		}
		if (in->insn[0].op == FOP_PARAMS) {
			/* every parameter, named after it */
			ret = dwarf_params(dm, site->vaddr, &site->args[out], USC_MAX_ARGS - out);
			if (ret < 0) {
				log_error("%s: $params: %s", spec->text,
					  ret == -ENOSPC ? "too many parameters" :
					  "no function with debug info at the probe");
				return ret;
			}
			out += (unsigned)ret;
			continue;
		}
		if (in->insn[0].op == FOP_VAR) {
			/* the C expression, lowered from the debug info at the
			 * site, then the user's :TYPE as on a USDT argument */
			struct dwarf_error derr = {0};
			size_t vp = (size_t)(in->insn[0].imm & 0xffffffff);
			size_t vl = (size_t)(in->insn[0].imm >> 32);
			struct usc_fetcharg mem[USC_MAX_ARGS];

			memset(&mem[0], 0, sizeof(mem[0]));

			ret = dwarf_lower_var(dm, site->vaddr, spec->text + vp, vl, in->name, mem,
					      USC_MAX_ARGS - out, &derr);
			if (ret == -ENODATA) {
				/* <optimized out> here; an error if it is so at
				 * every site of the probe (check_optimized_out) */
				site->args[out] = *in;
				memcpy(site->args[out].insn, mem[0].insn, sizeof(mem[0].insn));
				site->args[out].ninsn = mem[0].ninsn;
				site->args[out].type = mem[0].type;
				site->args[out].optimized_out = true;
				out++;
				continue;
			}
			if (ret < 0) {
				log_error("%s: %.*s: %s", spec->text, (int)vl, spec->text + vp,
					  derr.msg[0] ? derr.msg : strerror(-ret));
				return ret;
			}
			if (mem[0].group_len || ret > 1) {
				/* a struct shown whole: one argument per member; a Go
				 * string, slice or interface: one per word */
				if (in->type_given) {
					log_error("%s: %.*s: a %s takes no :TYPE; pick a member",
						  spec->text, (int)in->len, spec->text + in->pos,
						  mem[0].group_len ? "struct" : "Go value in several words");
					return -EINVAL;
				}
				for (int k = 0; k < ret; k++) {
					mem[k].pos = in->pos;
					mem[k].len = in->len;
					site->args[out++] = mem[k];
				}
				continue;
			}
			low = mem[0];
			copy = *in;
			copy.insn[0] = (struct fetch_insn){.op = FOP_ARG, .imm = 1};
			ret = probe_bind_arg(&copy, &low, 1, &site->args[out]);
			site->args[out].unavailable = low.unavailable;
			if (!in->type_given) {	/* :TYPE overrides how it shows */
				site->args[out].show = low.show;
				site->args[out].enums = low.enums;
			}
		} else if (site->is_return && site->func_vaddr && in->insn[0].op == FOP_RETVAL &&
			   in->insn[0].imm < 2 && !in->type_given && in->ninsn == 3 && in->insn[1].op == FOP_ST_RAW &&
			   (dm || cache_dwarf(c, site->path, &dm) == 0) &&
			   dwarf_func_rettype(dm, site->func_vaddr, &low) == 0) {
			/* a bare $retval takes the function's return type */
			site->args[out] = *in;
			memcpy(site->args[out].insn, low.insn, sizeof(low.insn));
			site->args[out].ninsn = low.ninsn;
			site->args[out].type = low.type;
			site->args[out].show = low.show;
			site->args[out].enums = low.enums;
			ret = 0;
		} else {
			ret = probe_bind_arg(in, usdt, nusdt, &site->args[out]);
		}
		if (ret == -ERANGE) {
			log_error("%s: %.*s: %s has %u argument%s", spec->text, (int)in->len,
				  spec->text + in->pos, site->label[0] ? site->label : "the probe", nusdt,
				  nusdt == 1 ? "" : "s");
			return ret;
		}
		if (ret) {
			log_error("%s: %.*s: the argument's program is too long", spec->text,
				  (int)in->len, spec->text + in->pos);
			return ret;
		}
		/* At a return site $retval stays FOP_RETVAL: %rax, read by every
		 * engine. At a tail call the callee has not computed it yet: it
		 * is read at the callee's return where the engine follows the
		 * call, and is unavailable where it does not (the session marks
		 * it). */
		out++;
	}
	/* names must stay unique once $params has added its own */
	for (unsigned i = 0; i < out; i++)
		for (unsigned k = 0; k < i; k++)
			if (!strcmp(site->args[i].name, site->args[k].name)) {
				log_error("%s: two arguments are named '%s'", spec->text,
					  site->args[i].name);
				return -EINVAL;
			}
	site->nargs = out;
	return 0;
}

/* The arguments, then the filter over them, by their names. */
static int bind_site(struct usc_site *site, const struct usc_fetcharg *usdt, unsigned nusdt,
		     struct dwarf_module *dm, struct site_vec *sv)
{
	const struct usc_probe_spec *spec = site->spec;
	const char *bad = NULL;
	int ret;

	bool defaults = !(sv->flags & RESOLVE_NO_DEFAULT_ARGS);

	site->agg_func = -1;
	ret = bind_args(site, usdt, nusdt, defaults, dm, sv->c);
	if (ret || !spec->filter.n)
		return ret;
	ret = probe_bind_filter(&spec->filter, site->args, site->nargs, &site->filter, &bad);
	if (ret == -ENOENT)
		log_error("%s: if %.*s: %s has no argument named '%s'", spec->text,
			  (int)spec->filter.len, spec->text + spec->filter.pos,
			  site->symbol ? site->symbol : site->label, bad);
	else if (ret) {
		bool str = false;

		for (unsigned i = 0; i < site->nargs; i++)
			if (!strcmp(site->args[i].name, bad))
				str = fetch_type_is_string(site->args[i].type);
		log_error("%s: if %.*s: '%s' is %s, and is compared with %s", spec->text,
			  (int)spec->filter.len, spec->text + spec->filter.pos, bad,
			  str ? "a string" : "a number", str ? "a number" : "a string");
	}
	return ret;
}

static int resolve_usdt(const struct usc_probe_spec *spec, unsigned idx, const char *path,
			const struct elf_file *ef, struct site_vec *sv)
{
	struct usdt_note *notes = NULL;
	size_t nnotes = 0, matched = 0;
	int ret = usdt_read(ef, &notes, &nnotes);

	if (ret) {
		if (ret != -EINVAL)	/* a malformed note was reported already */
			log_error("%s: cannot read the USDT notes of %s: %s", spec->text, path,
				  strerror(-ret));
		return ret;
	}
	for (size_t i = 0; i < nnotes && !ret; i++) {
		const struct usdt_note *nt = &notes[i];
		struct usc_fetcharg uargs[USDT_MAX_ARGS];
		struct usdt_arg_error aerr = {0};
		unsigned nu = 0;
		struct usc_site *s;
		uint64_t off, ref = 0;

		if (fnmatch(spec->provider, nt->provider, 0) || fnmatch(spec->symbol, nt->name, 0))
			continue;
		matched++;
		if (usdt_parse_args(nt->args, ef, uargs, USDT_MAX_ARGS, &nu, &aerr)) {
			log_error("%s: %s:%s in %s has an argument spec uscope cannot read at "
				  "byte %zu (%s): \"%s\"", spec->text, nt->provider, nt->name, path,
				  aerr.pos, aerr.msg ? aerr.msg : "?", nt->args);
			ret = -EINVAL;
			break;
		}
		if (elf_vaddr_to_offset(ef, nt->pc, &off)) {
			log_error("%s: %s:%s has a site at 0x%llx outside the file's segments",
				  spec->text, nt->provider, nt->name, (unsigned long long)nt->pc);
			ret = -EINVAL;
			break;
		}
		if (nt->sema && elf_vaddr_to_offset(ef, nt->sema, &ref)) {
			log_error("%s: %s:%s has its semaphore at 0x%llx, which has no file offset",
				  spec->text, nt->provider, nt->name, (unsigned long long)nt->sema);
			ret = -EINVAL;
			break;
		}
		s = site_push(sv);
		if (!s) {
			ret = -ENOMEM;
			break;
		}
		s->spec = spec;
		s->probe = idx;
		s->path = strdup(path);
		if (asprintf(&s->symbol, "%s_%s", nt->provider, nt->name) < 0)
			s->symbol = NULL;
		s->vaddr = nt->pc;
		s->offset = off;
		s->ref_ctr_offset = ref;
		if (spec->event_given)
			snprintf(s->label, sizeof(s->label), "%s", spec->event);
		else
			snprintf(s->label, sizeof(s->label), "%s:%s", nt->provider, nt->name);
		if (!s->path || !s->symbol) {
			ret = -ENOMEM;
			break;
		}
		ret = bind_site(s, uargs, nu, NULL, sv);
	}
	if (!ret && matched == 0) {
		char list[512] = "";
		size_t used = 0;

		for (size_t i = 0; i < nnotes && used < sizeof(list) - 1; i++) {
			bool dup = false;

			for (size_t k = 0; k < i; k++)
				dup |= !strcmp(notes[k].provider, notes[i].provider) &&
				       !strcmp(notes[k].name, notes[i].name);
			if (!dup)
				used += (size_t)snprintf(list + used, sizeof(list) - used, "%s%%%s:%s",
							 used ? ", " : "", notes[i].provider,
							 notes[i].name);
		}
		if (nnotes)
			log_error("%s: no USDT probe %%%s:%s in %s; it has: %s", spec->text,
				  spec->provider, spec->symbol, path, list);
		else
			log_error("%s: %s has no USDT probes", spec->text, path);
		ret = -ENOENT;
	}
	usdt_notes_free(notes, nnotes);
	return ret;
}

static void log_unknown(const struct usc_probe_spec *spec, const struct elf_file *ef,
			const char *path)
{
	const char *sugg[3];
	char list[512] = "";
	size_t n = elf_func_suggest(ef, spec->symbol, sugg, 3), used = 0;

	for (size_t i = 0; i < n && used < sizeof(list); i++)
		used += (size_t)snprintf(list + used, sizeof(list) - used, "%s%s", i ? ", " : "",
					 sugg[i]);
	if (n)
		log_error("%s: no function '%s' in %s; did you mean: %s?", spec->text,
			  spec->symbol, path, list);
	else
		log_error("%s: no function '%s' in %s", spec->text, spec->symbol, path);
}

/* The hidden sites that follow a tail call to target (see usc_site): the
 * rets of the callee, and of every function it reaches by tail calls in
 * turn, at most 8 functions. None when a callee cannot be known (a jmp
 * through a pointer or the PLT, a callee whose returns cannot all be
 * found): the tail call's event then comes at its jmp. */
#define TAIL_FOLLOW_MAX 8

static int add_tail_follow(struct site_vec *sv, const struct usc_probe_spec *spec, unsigned idx,
			   const char *path, const struct elf_file *ef, size_t tail,
			   uint64_t target)
{
	uint64_t fns[TAIL_FOLLOW_MAX], *rets = NULL;
	const char *names[TAIL_FOLLOW_MAX] = {0};
	size_t nfns = 0, nrets = 0, *ret_fn = NULL;
	const char *why = NULL;
	char reason[256] = "";
	int ret = 0;

	if (!target)
		snprintf(reason, sizeof(reason), "a tail call through a pointer");
	else
		fns[nfns++] = target;
	for (size_t f = 0; f < nfns && !reason[0]; f++) {
		struct x86_ret_site *rs = NULL;
		struct shape sh;
		ssize_t n;

		if (shape_at(ef, fns[f], &sh) || sh.entry != fns[f]) {
			if (sh.n)
				shape_free(&sh);
			snprintf(reason, sizeof(reason), "no function starts at 0x%llx (the PLT?)",
				 (unsigned long long)fns[f]);
			break;
		}
		names[f] = sh.sym ? elf_sym_pretty(sh.sym) : NULL;
		n = shape_returns(ef, &sh, &rs, &why);
		shape_free(&sh);
		if (n < 0) {
			snprintf(reason, sizeof(reason), "the returns of the callee at 0x%llx: %s",
				 (unsigned long long)fns[f], why ? why : strerror((int)-n));
			break;
		}
		for (ssize_t i = 0; i < n && !reason[0]; i++) {
			bool seen = false;

			if (rs[i].kind == X86_RET) {
				uint64_t *v = realloc(rets, (nrets + 1) * sizeof(*v));
				size_t *w = v ? realloc(ret_fn, (nrets + 1) * sizeof(*w)) : NULL;

				if (v)
					rets = v;
				if (!v || !w) {
					ret = -ENOMEM;
					break;
				}
				ret_fn = w;
				ret_fn[nrets] = f;
				rets[nrets++] = rs[i].addr;
				continue;
			}
			if (!rs[i].target) {
				snprintf(reason, sizeof(reason), "the callee at 0x%llx tail-calls "
					 "through a pointer", (unsigned long long)fns[f]);
				break;
			}
			for (size_t k = 0; k < nfns; k++)
				seen |= fns[k] == rs[i].target;
			if (seen)
				continue;
			if (nfns == TAIL_FOLLOW_MAX) {
				snprintf(reason, sizeof(reason), "more than %d functions in a chain of "
					 "tail calls", TAIL_FOLLOW_MAX);
				break;
			}
			fns[nfns++] = rs[i].target;
		}
		free(rs);
	}
	if (ret || reason[0]) {
		if (reason[0])
			log_info("%s: the return of %s at its tail call 0x%llx cannot be followed: %s; "
				 "its $retval is unavailable", spec->text, sv->v[tail].symbol,
				 (unsigned long long)sv->v[tail].vaddr, reason);
		free(rets);
		free(ret_fn);
		return ret;
	}
	for (size_t i = 0; i < nrets && !ret; i++) {
		struct usc_site *h = site_push(sv);
		uint64_t off = 0;

		if (!h) {
			ret = -ENOMEM;
			break;
		}
		h->spec = spec;
		h->probe = idx;
		h->path = strdup(path);
		/* the callee the ret returns from, for messages */
		h->symbol = names[ret_fn[i]] ? strdup(names[ret_fn[i]]) : NULL;
		h->vaddr = rets[i];
		h->func_vaddr = sv->v[tail].func_vaddr;
		h->is_return = true;
		h->ret_site = true;
		h->hidden = true;
		h->cont = true;
		h->group = (int32_t)tail;
		h->args = calloc(1, sizeof(*h->args));
		if (!h->path || !h->args)
			ret = -ENOMEM;
		else if (elf_vaddr_to_offset(ef, rets[i], &off))
			ret = -EINVAL;
		h->offset = off;
	}
	sv->v[tail].group = (int32_t)tail;
	free(rets);
	free(ret_fn);
	return ret;
}

/* A return probe on fn: one entry-style probe on each of its return sites
 * (seed 001's "kretinsn"), so the stack is never touched, unless the caller
 * asked for the kernel's uretprobe. When the sites cannot all be known,
 * say what is missing: an error for a named function, a warning (and the
 * function skipped) within a glob. */
static int add_return_sites(struct site_vec *sv, const struct usc_probe_spec *spec,
			    unsigned idx, const char *path, const struct elf_file *ef,
			    const struct elf_sym *fn, unsigned flags)
{
	struct x86_ret_site *rs = NULL;
	const char *why = NULL;
	struct shape sh;
	ssize_t n;
	int ret = 0;

	if (flags & RESOLVE_URETPROBE)
		return add_site(sv, spec, idx, path, ef, fn, fn->vaddr, 0);
	n = shape_of(ef, fn, &sh);
	if (n == -EINVAL) {
		why = "its size is unknown";
		n = -ENOTSUP;
	} else if (n) {
		log_error("%s: cannot read the code of %s: %s", spec->text, elf_sym_pretty(fn),
			  strerror((int)-n));
		return (int)n;
	} else {
		n = shape_returns(ef, &sh, &rs, &why);
		shape_free(&sh);
		if (n == -ENOMEM)
			return (int)n;
	}
	if (n <= 0) {
		if (spec->is_glob) {
			log_warn("%s: skipping %s: cannot find all its return sites: %s "
				 "(--uretprobe probes it by swapping the return address)",
				 spec->text, elf_sym_pretty(fn), why ? why : "?");
			return 0;
		}
		log_error("%s: cannot find all the return sites of %s: %s; --uretprobe probes it "
			  "by swapping the return address instead, which programs that walk their "
			  "stacks (Go) do not survive", spec->text, elf_sym_pretty(fn), why ? why : "?");
		return n == -ENOENT ? -ENOENT : -ENOTSUP;
	}
	for (ssize_t i = 0; i < n && !ret; i++) {
		size_t at = sv->n;

		ret = add_site(sv, spec, idx, path, ef, fn, rs[i].addr,
			       rs[i].kind == X86_TAIL_JMP ? SITE_TAIL : SITE_RET);
		if (!ret && rs[i].kind == X86_TAIL_JMP && !(flags & RESOLVE_NO_TAIL_FOLLOW))
			ret = add_tail_follow(sv, spec, idx, path, ef, at, rs[i].target);
	}
	free(rs);
	return ret;
}

/* The label every site of one function's probe shows: the event, or the
 * function's name (demangled). */
static void label_sites(struct site_vec *sv, size_t first, const struct usc_probe_spec *spec,
			const char *name)
{
	for (size_t i = first; i < sv->n; i++)
		snprintf(sv->v[i].label, sizeof(sv->v[i].label), "%s%s",
			 spec->event_given ? spec->event : name,
			 sv->v[i].is_return && !spec->event_given ? "__return" : "");
}

/* Can every variable the probe names be read at the inlined copy? The
 * compiler often folds an inlined copy's parameters into constants or
 * computes them: such a copy is skipped with a warning, the others stay. */
static bool inline_vars_ok(struct dwarf_module *dm, const struct usc_probe_spec *spec,
			   const char *name, const struct dwarf_inline_site *is)
{
	for (unsigned i = 0; i < spec->nargs; i++) {
		const struct usc_fetcharg *in = &spec->args[i];
		struct usc_fetcharg low = {0};
		struct dwarf_error derr = {0};
		size_t vp = (size_t)(in->insn[0].imm & 0xffffffff);
		size_t vl = (size_t)(in->insn[0].imm >> 32);
		int ret;

		if (in->insn[0].op != FOP_VAR)
			continue;
		ret = dwarf_lower_expr(dm, is->pc, spec->text + vp, vl, &low, &derr);
		if (ret) {
			log_warn("%s: skipping the copy of %s inlined at %s:%u (0x%llx): %.*s: %s",
				 spec->text, name,
				 !is->call_file ? "?" : strrchr(is->call_file, '/') ?
				 strrchr(is->call_file, '/') + 1 : is->call_file,
				 is->call_line, (unsigned long long)is->pc, (int)vl, spec->text + vp,
				 derr.msg[0] ? derr.msg : strerror(-ret));
			return false;
		}
	}
	return true;
}

/* An entry probe on a function also goes on every copy of it the compiler
 * inlined (as perf probe does), with the same label. fn is the out-of-line
 * function, or NULL for a function that only exists inlined (name). A
 * return probe cannot: an inlined copy has no return; say so. Without
 * debug info there is nothing to add. Returns the number of copies added,
 * or -errno. */
static int add_inline_sites(struct site_vec *sv, const struct usc_probe_spec *spec,
			    unsigned idx, const char *path, const struct elf_file *ef,
			    const struct elf_sym *fn, const char *name, unsigned flags)
{
	struct dwarf_module *dm;
	struct dwarf_inline_site *is = NULL;
	ssize_t n;
	int ret = 0, added = 0;

	if ((flags & RESOLVE_NO_INLINES) || spec->has_offset || cache_dwarf(sv->c, path, &dm))
		return 0;
	n = dwarf_inline_sites(dm, fn ? fn->vaddr : 0, name, &is);
	if (n == -ENOENT)
		return 0;
	if (n < 0)
		return (int)n;
	if (n && spec->is_return && !fn) {
		log_error("%s: %s has no out-of-line copy, and its %zd inlined cop%s no "
			  "return to probe", spec->text, name, n, n == 1 ? "y has" : "ies have");
		free(is);
		return -ENOTSUP;
	}
	if (n && spec->is_return) {
		log_warn("%s: %s is also inlined at %zd place%s, which %s no return to probe: "
			 "only its out-of-line copy is probed", spec->text, name, n,
			 n == 1 ? "" : "s", n == 1 ? "has" : "have");
		n = 0;
	}
	for (ssize_t i = 0; i < n && !ret; i++) {
		struct usc_site *s;

		if (!inline_vars_ok(dm, spec, name, &is[i]))
			continue;
		ret = add_site(sv, spec, idx, path, ef, NULL, is[i].pc, 0);
		if (ret)
			break;
		s = &sv->v[sv->n - 1];
		s->symbol = strdup(name);
		s->func_vaddr = fn ? fn->vaddr : 0;
		s->inlined = true;
		if (!s->symbol)
			ret = -ENOMEM;
		log_debug("%s: inlined copy of %s at 0x%llx (%s:%u)", spec->text, name,
			  (unsigned long long)is[i].pc, is[i].call_file ? is[i].call_file : "?",
			  is[i].call_line);
		added++;
	}
	free(is);
	if (!ret && n > 0 && !added && !fn) {
		log_error("%s: %s exists only inlined, and none of its %zd copies can be probed",
			  spec->text, name, n);
		return -ENOENT;
	}
	return ret ? ret : added;
}

/* FILE:LINE or FUNCTION:+N: a probe on every statement of that line (a
 * line can have several: loops, inlined copies, split conditions). */
static int resolve_line(const struct usc_probe_spec *spec, unsigned idx, const char *path,
			const struct elf_file *ef, struct site_vec *sv)
{
	struct dwarf_module *dm;
	const char *file = spec->symbol;
	unsigned line = spec->line, nearest = 0;
	uint64_t *addrs = NULL;
	char label[USC_NAME_MAX * 2];
	ssize_t n;
	size_t first = sv->n;
	int ret = cache_dwarf(sv->c, path, &dm);

	if (ret) {
		log_error("%s: %s has no debug info (DWARF) to find source lines in%s", spec->text,
			  path, ret == -ENODATA ? ": build it with -g, or install its separate debug "
			  "file" : "");
		return ret;
	}
	if (spec->line_rel) {
		const struct elf_sym *fn = NULL;
		unsigned l0;

		ret = elf_func_lookup(ef, spec->symbol, &fn, NULL, NULL);
		if (ret) {
			log_unknown(spec, ef, path);
			return ret;
		}
		if (dwarf_func_line(dm, fn->vaddr, &file, &l0)) {
			log_error("%s: the debug info of %s does not say where %s starts", spec->text,
				  path, elf_sym_pretty(fn));
			return -ENOENT;
		}
		line = l0 + spec->line;
	}
	n = dwarf_line_addrs(dm, file, line, sv->flags & RESOLVE_ALL_LINE_SITES, &addrs, &nearest);
	if (n < 0)
		return (int)n;
	if (n == 0) {
		if (nearest)
			log_error("%s: no code at %s:%u; the next line with code is %u", spec->text,
				  file, line, nearest);
		else
			log_error("%s: no code at %s:%u in %s", spec->text, file, line, path);
		return -ENOENT;
	}
	snprintf(label, sizeof(label), "%s:%u", strrchr(file, '/') ? strrchr(file, '/') + 1 : file,
		 line);
	for (ssize_t i = 0; i < n && !ret; i++) {
		const struct elf_sym *fn = elf_func_at(ef, addrs[i]);

		ret = add_site(sv, spec, idx, path, ef, fn, addrs[i], 0);
	}
	free(addrs);
	for (size_t i = first; i < sv->n && !ret; i++) {
		struct usc_site *st = &sv->v[i];

		if (!spec->event_given)
			snprintf(st->label, sizeof(st->label), "%s", label);
		free(st->symbol);
		/* the kernel's event name: the label's characters that may be in one */
		st->symbol = strdup(label);
		if (!st->symbol)
			ret = -ENOMEM;
	}
	return ret;
}

static int resolve_one(const struct usc_target *t, const struct usc_probe_spec *spec,
		       unsigned idx, unsigned flags, struct site_vec *sv)
{
	char *path = NULL;
	struct elf_file *ef;
	int ret = find_module(t, spec, &path);

	if (ret)
		return ret;
	ret = cache_elf(sv->c, path, &ef);
	if (ret) {
		if (ret == -ENOEXEC)
			log_error("%s: %s is not an x86-64 ELF file", spec->text, path);
		else
			log_error("%s: cannot open %s: %s", spec->text, path, strerror(-ret));
		goto out;
	}

	if (spec->loc_kind == USC_LOC_USDT) {
		ret = resolve_usdt(spec, idx, path, ef, sv);
		goto out;
	}
	if (spec->loc_kind == USC_LOC_LINE) {
		ret = resolve_line(spec, idx, path, ef, sv);
		goto out;
	}
	if (spec->loc_kind == USC_LOC_ADDRESS) {
		const struct elf_sym *fn = elf_func_at(ef, spec->address);

		if (spec->is_return && fn && fn->vaddr != spec->address) {
			log_error("%s: a return probe needs a function's entry address; 0x%llx is "
				  "inside %s", spec->text, (unsigned long long)spec->address, elf_sym_pretty(fn));
			ret = -EINVAL;
			goto out;
		}
		if (spec->is_return && !fn)
			log_warn("%s: no symbol covers 0x%llx; the return probe is only right if "
				 "it is a function's entry", spec->text,
				 (unsigned long long)spec->address);
		if (fn && fn->vaddr != spec->address) {
			ret = check_boundary(ef, fn, spec->address - fn->vaddr, spec);
			if (ret)
				goto out;
		}
		if (spec->is_return && fn)
			ret = add_return_sites(sv, spec, idx, path, ef, fn, flags);
		else
			ret = add_site(sv, spec, idx, path, ef, fn, spec->address,
				       0);
		goto out;
	}

	if (spec->is_glob) {
		const struct elf_sym **m = NULL;
		ssize_t n = elf_func_match(ef, spec->symbol, &m);

		if (n < 0) {
			ret = (int)n;
			goto out;
		}
		if (n == 0) {
			log_error("%s: no function matches '%s' in %s", spec->text, spec->symbol,
				  path);
			ret = -ENOENT;
		}
		/* one line for every IFUNC the glob matched */
		char ifuncs[256] = "";
		size_t nif = 0, used = 0;

		for (ssize_t i = 0; i < n; i++) {
			if (!(m[i]->flags & ELF_SYM_IFUNC))
				continue;
			if (nif++ < 6 && used < sizeof(ifuncs))
				used += (size_t)snprintf(ifuncs + used, sizeof(ifuncs) - used, "%s%s",
							 nif > 1 ? ", " : "", elf_sym_pretty(m[i]));
		}
		if (nif)
			log_warn("%s: %zu of the matches are IFUNCs (%s%s): their probes are on the "
				 "resolvers, which run when the symbols are bound", spec->text, nif,
				 ifuncs, nif > 6 ? ", ..." : "");
		for (ssize_t i = 0; i < n && !ret; i++) {
			size_t first = sv->n;
			int k;

			if (spec->has_offset && spec->offset >= m[i]->size)
				continue;	/* too short for the offset */
			if (shape_is_part(m[i]) && strncmp(spec->symbol, m[i]->name,
							   strlen(m[i]->name)))
				continue;	/* NAME.cold is NAME's, unless named */
			if (spec->is_return)
				ret = add_return_sites(sv, spec, idx, path, ef, m[i], flags);
			else
				ret = add_site(sv, spec, idx, path, ef, m[i],
					       m[i]->vaddr + spec->offset, 0);
			k = ret ? 0 : add_inline_sites(sv, spec, idx, path, ef, m[i],
						       elf_sym_pretty(m[i]), flags);
			if (k < 0)
				ret = k;
			else if (k > 0 && !spec->event_given)	/* one label a function */
				label_sites(sv, first, spec, elf_sym_pretty(m[i]));
		}
		free(m);
		goto out;
	}

	const struct elf_sym *fn = NULL, **cands = NULL;
	size_t ncands = 0;

	ret = elf_func_lookup(ef, spec->symbol, &fn, &cands, &ncands);
	if (ret == -ENOENT) {
		/* perhaps a function that only exists inlined */
		size_t first = sv->n;
		int k = spec->has_offset ? 0 :
			add_inline_sites(sv, spec, idx, path, ef, NULL, spec->symbol, flags);

		if (k > 0) {
			label_sites(sv, first, spec, spec->symbol);
			ret = 0;
		} else if (k < 0) {
			ret = k;
		} else {
			log_unknown(spec, ef, path);
		}
		goto out;
	}
	if (ret == -EEXIST) {
		char list[1024] = "";
		size_t used = 0;

		for (size_t i = 0; i < ncands && used < sizeof(list); i++)
			used += (size_t)snprintf(list + used, sizeof(list) - used,
						 "%s%s%s%s at 0x%llx", i ? ", " : "",
						 elf_sym_pretty(cands[i]), cands[i]->version ? "@" : "",
						 cands[i]->version ? cands[i]->version : "",
						 (unsigned long long)cands[i]->vaddr);
		if (cands[0]->demangled && strcmp(cands[0]->name, spec->symbol) &&
		    !strchr(spec->symbol, '('))
			log_error("%s: '%s' is overloaded in %s: %s; name one with its parameters "
				  "('%s'), or every one with a glob ('%s*')", spec->text,
				  spec->symbol, path, list, cands[0]->demangled, spec->symbol);
		else
			log_error("%s: %zu functions are named '%s' in %s (%s); probe one by "
				  "ADDRESS", spec->text, ncands, spec->symbol, path, list);
		free(cands);
		goto out;
	}
	free(cands);
	if (ret)
		goto out;
	if (spec->has_offset) {
		if (spec->is_return) {
			log_error("%s: a return probe goes on a function, not at an offset in it",
				  spec->text);
			ret = -EINVAL;
			goto out;
		}
		if (fn->size && spec->offset >= fn->size) {
			log_error("%s: offset 0x%llx is outside %s (size 0x%llx)", spec->text,
				  (unsigned long long)spec->offset, elf_sym_pretty(fn),
				  (unsigned long long)fn->size);
			ret = -EINVAL;
			goto out;
		}
		ret = check_boundary(ef, fn, spec->offset, spec);
		if (ret)
			goto out;
	}
	size_t first = sv->n;
	int k;

	if (spec->is_return)
		ret = add_return_sites(sv, spec, idx, path, ef, fn, flags);
	else
		ret = add_site(sv, spec, idx, path, ef, fn, fn->vaddr + spec->offset, 0);
	k = ret ? 0 : add_inline_sites(sv, spec, idx, path, ef, fn, elf_sym_pretty(fn), flags);
	if (k < 0)
		ret = k;
	else if (k > 0)		/* the copies show as the function */
		label_sites(sv, first, spec, elf_sym_pretty(fn));
out:
	free(path);
	return ret;
}

/* A variable optimized out at some sites of a probe shows <optimized out>
 * there; at all of them it is an error, naming it and where. */
static int check_optimized_out(struct cache *c, const struct usc_probe_spec *spec,
			       const struct usc_site *v, size_t n)
{
	for (unsigned i = 0; i < spec->nargs && n; i++) {
		const struct usc_fetcharg *in = &spec->args[i];
		struct dwarf_module *dm;
		struct dwarf_error derr = {0};
		struct usc_fetcharg tmp[1];
		size_t vp = (size_t)(in->insn[0].imm & 0xffffffff);
		size_t vl = (size_t)(in->insn[0].imm >> 32);
		bool seen = false, somewhere = false;

		if (in->insn[0].op != FOP_VAR)
			continue;
		for (size_t k = 0; k < n && !somewhere; k++)
			for (unsigned a = 0; a < v[k].nargs; a++)
				if (v[k].args[a].pos == in->pos) {
					seen = true;
					somewhere |= !v[k].args[a].optimized_out;
				}
		if (!seen || somewhere)
			continue;
		/* the reason, as the debug info gives it at the first site */
		if (cache_dwarf(c, v[0].path, &dm) == 0)
			dwarf_lower_var(dm, v[0].vaddr, spec->text + vp, vl, in->name, tmp, 1, &derr);
		log_error("%s: %.*s: %s%s%s%s", spec->text, (int)vl, spec->text + vp,
			  derr.msg[0] ? derr.msg : "optimized out",
			  v[0].symbol ? " in " : "", v[0].symbol ? v[0].symbol : "",
			  n > 1 ? ", and at every other site of the probe" : "");
		return -ENODATA;
	}
	return 0;
}

int resolve_probes(struct cache *c, const struct usc_target *target,
		   const struct usc_probe_spec *specs, size_t nspecs, unsigned flags,
		   struct usc_site **sites, size_t *nsites)
{
	struct site_vec sv = {.c = c, .flags = flags};
	int ret = 0;

	for (size_t i = 0; i < nspecs && !ret; i++) {
		size_t first = sv.n;

		ret = resolve_one(target, &specs[i], (unsigned)i, flags, &sv);
		if (!ret)
			ret = check_optimized_out(c, &specs[i], sv.v + first, sv.n - first);
		for (size_t k = first; !ret && k < sv.n; k++)
			name_site(&sv.v[k], sv.v, sv.n, sv.n - first > 1);
	}
	if (ret) {
		resolve_sites_free(sv.v, sv.n);
		return ret;
	}
	*sites = sv.v;
	*nsites = sv.n;
	return 0;
}

void resolve_sites_free(struct usc_site *sites, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(sites[i].path);
		free(sites[i].symbol);
		free(sites[i].args);
	}
	free(sites);
}
