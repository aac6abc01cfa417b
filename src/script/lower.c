/* From a script's probes to uscope's own: each uprobe, uretprobe, usdt
 * and py: attach point becomes a probe spec (probe/probe.h) that the
 * session resolves into sites as any other (globs, return sites that Go
 * survives, USDT notes, inlined copies, py: functions).
 *
 * What a probe reads where it fires is its inputs, fetched at the hit by
 * the engine as the spec's fetch arguments: arg0 ($arg1), retval, sargN,
 * reg("x"), args.NAME (the debug info's), and loads through them:
 * *(uint32 *)(arg0 + 8), str(arg1), str(*(uint64 *)arg2). So a string
 * is read at the hit on every engine, also by the kernel on tracefs.
 * Anything else (an address from a map: str(@name[tid])) is read by the
 * executor when it runs (vm.h's SOP_READ, SOP_STR): where the probe runs
 * on inject and bpf, and from the process's memory when uscope runs the
 * event on tracefs. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "probe/probe.h"
#include "script/lex.h"
#include "script/script_int.h"

struct lower {
	struct usc_script *s;
	struct script_probeinfo *pr;
	struct script_diag *d;
	bool usdt;		/* every attach point a USDT probe */
	bool py;
};

/* An address as a fetch program's text, and what is still to add to it. */
struct chain {
	char text[200];
	int64_t off;
	int depth;
};

/* A fetch type for an integer of size bytes. */
static const char *int_type(unsigned size, bool sign)
{
	switch (size) {
	case 1: return sign ? "s8" : "u8";
	case 2: return sign ? "s16" : "u16";
	case 4: return sign ? "s32" : "u32";
	default: return sign ? "s64" : "u64";
	}
}

/* bpftrace's reg() names (the kernel's pt_regs): the 64-bit register's
 * assembler name, or NULL. */
const char *script_reg_name(const char *r)
{
	static const char *const names[][2] = {
		{"ip", "rip"}, {"sp", "rsp"}, {"bp", "rbp"}, {"ax", "rax"}, {"bx", "rbx"},
		{"cx", "rcx"}, {"dx", "rdx"}, {"si", "rsi"}, {"di", "rdi"}, {"r8", "r8"},
		{"r9", "r9"}, {"r10", "r10"}, {"r11", "r11"}, {"r12", "r12"}, {"r13", "r13"},
		{"r14", "r14"}, {"r15", "r15"},
	};

	for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++)
		if (!strcmp(r, names[k][0]))
			return names[k][1];
	return NULL;
}

/* A value the site can fetch as it is (no load through it): "$arg1". */
static bool base(struct lower *lw, const struct ast *n, char *buf, size_t len)
{
	if (n->kind == N_BUILTIN && !strncmp(n->name, "arg", 3) && n->name[3] >= '0' &&
	    n->name[3] <= '9') {
		if (lw->usdt || n->ival < 6)
			snprintf(buf, len, "$arg%lld", (long long)n->ival + 1);
		else	/* past the six registers: on the stack, above the return address */
			snprintf(buf, len, "$stack%lld", (long long)n->ival - 5);
		return true;
	}
	if (n->kind == N_BUILTIN && !strncmp(n->name, "sarg", 4)) {
		snprintf(buf, len, "$stack%lld", (long long)n->ival + 1);
		return true;
	}
	if (n->kind == N_BUILTIN && !strcmp(n->name, "retval")) {
		snprintf(buf, len, "$retval");
		return true;
	}
	if (n->kind == N_CALL && !strcmp(n->name, "reg") && n->a && n->a->kind == N_STR &&
	    script_reg_name(n->a->str)) {
		snprintf(buf, len, "%%%s", script_reg_name(n->a->str));
		return true;
	}
	if (n->kind == N_FIELD && n->a->kind == N_BUILTIN && !strcmp(n->a->name, "args")) {
		snprintf(buf, len, "%s", n->name);
		return true;
	}
	if (n->kind == N_FIELD && n->a->kind == N_FIELD) {
		/* a member chain of a parameter: r->next->id, s.x */
		size_t at;

		if (!base(lw, n->a, buf, len))
			return false;
		at = strlen(buf);
		return (size_t)snprintf(buf + at, len - at, "%s%s", n->arrow ? "->" : ".",
					n->name) < len - at;
	}
	return false;
}

/* The pointee's size of a pointer type. */
static unsigned pointee(const struct ty *t)
{
	return t->ptr >= 2 ? 8 : t->size ? t->size : 1;
}

static bool chain(struct lower *lw, const struct ast *n, struct chain *c);

/* *(T *)ADDR, ADDR[i]: a load of size bytes at an address chain. */
static bool load(struct lower *lw, const struct ast *n, struct chain *c, unsigned *size)
{
	const struct ast *addr;
	int64_t extra = 0;

	if (n->kind == N_UNOP && n->op == T_MUL) {
		addr = n->a;
	} else if (n->kind == N_INDEX && n->b->kind == N_INT) {
		addr = n->a;
		extra = n->b->ival * (int64_t)pointee(&n->a->ty);
	} else {
		return false;
	}
	*size = addr->ty.ptr ? pointee(&addr->ty) : 8;
	if (!chain(lw, addr, c))
		return false;
	c->off += extra;
	return true;
}

static bool chain(struct lower *lw, const struct ast *n, struct chain *c)
{
	unsigned size;

	if (base(lw, n, c->text, sizeof(c->text))) {
		c->off = 0;
		c->depth = 0;
		return true;
	}
	if (n->kind == N_CAST && (n->ty.ptr || n->ty.size == 8))
		return chain(lw, n->a, c);
	if (n->kind == N_BINOP && (n->op == T_PLUS || n->op == T_MINUS) &&
	    (n->b->kind == N_INT || (n->a->kind == N_INT && n->op == T_PLUS))) {
		const struct ast *p = n->b->kind == N_INT ? n->a : n->b;
		const struct ast *k = n->b->kind == N_INT ? n->b : n->a;
		int64_t scale = p->ty.ptr ? pointee(&p->ty) : 1;

		if (!chain(lw, p, c))
			return false;
		c->off += (n->op == T_PLUS ? 1 : -1) * k->ival * scale;
		return true;
	}
	if (load(lw, n, c, &size)) {
		char t[sizeof(c->text) + 64];

		if (size != 8 || c->depth >= 8)
			return false;	/* an address is a whole word */
		snprintf(t, sizeof(t), "+%lld(%s)", (long long)c->off, c->text);
		if (strlen(t) >= sizeof(c->text) - 32)
			return false;
		memcpy(c->text, t, sizeof(c->text));
		c->off = 0;
		c->depth++;
		return true;
	}
	return false;
}

static int add_input(struct lower *lw, struct ast *n, const char *text, bool is_str)
{
	struct script_probeinfo *pr = lw->pr;

	for (unsigned k = 0; k < pr->ninputs; k++)
		if (pr->inputs[k].is_str == is_str && !strcmp(pr->inputs[k].text, text)) {
			n->input = (int)k;
			return 0;
		}
	if (pr->ninputs >= SCRIPT_INPUTS_MAX)
		return 0;	/* read by the executor instead */
	snprintf(pr->inputs[pr->ninputs].text, sizeof(pr->inputs[0].text), "%s", text);
	pr->inputs[pr->ninputs].is_str = is_str;
	n->input = (int)pr->ninputs++;
	return 0;
}

static int walk(struct lower *lw, struct ast *n);

static int walk_list(struct lower *lw, struct ast *n)
{
	for (; n; n = n->next)
		if (walk(lw, n))
			return -EINVAL;
	return 0;
}

/* An expression: the largest parts the site can fetch become inputs. */
static int walk(struct lower *lw, struct ast *n)
{
	char text[256];
	struct chain c;
	unsigned size;

	if (!n)
		return 0;
	if (n->kind == N_BUILTIN && (!strcmp(n->name, "ustack"))) {
		return add_input(lw, n, "$ustack:127", false);
	}
	if (n->kind == N_CALL && !strcmp(n->name, "ustack")) {
		snprintf(text, sizeof(text), "$ustack:%u", n->ty.fmt ? n->ty.fmt : 127);
		return add_input(lw, n, text, false);
	}
	if (n->ty.kind == TY_INT && base(lw, n, text, sizeof(text)))
		return add_input(lw, n, text, false);
	if (n->ty.kind == TY_INT && !n->ty.ptr && load(lw, n, &c, &size)) {
		snprintf(text, sizeof(text), "+%lld(%s):%s", (long long)c.off, c.text,
			 int_type(size, n->ty.sign));
		return add_input(lw, n, text, false);
	}
	if (n->ty.kind == TY_INT && n->ty.ptr && load(lw, n, &c, &size) && size == 8) {
		snprintf(text, sizeof(text), "+%lld(%s):u64", (long long)c.off, c.text);
		return add_input(lw, n, text, false);
	}
	if (n->kind == N_CALL && !strcmp(n->name, "str") && n->a->ty.kind == TY_INT &&
	    chain(lw, n->a, &c)) {
		if (!c.off && !c.depth && n->a->kind == N_FIELD)
			snprintf(text, sizeof(text), "%s:string", c.text);
		else
			snprintf(text, sizeof(text), "+%lld(%s):string", (long long)c.off, c.text);
		if (add_input(lw, n, text, true))
			return -EINVAL;
		return walk(lw, n->a->next);	/* the length, if any */
	}
	switch (n->kind) {
	case N_MAP:
	case N_CALL:
	case N_TUPLE:
		return walk_list(lw, n->a);
	case N_FIELD:
		return 0;
	default:
		break;
	}
	return walk(lw, n->a) || walk(lw, n->b) || walk(lw, n->c) ? -EINVAL : 0;
}

/* A store into a map whose addresses str() reads: the string too, as an
 * input, for the shadow (script_mapinfo.shadow). */
static int shadow_input(struct lower *lw, struct ast *n)
{
	const struct script_mapinfo *m = &lw->s->maps[n->a->sym];
	char text[256];
	struct chain c;

	if (n->op || !m->shadow || n->b->ty.kind != TY_INT || !chain(lw, n->b, &c))
		return 0;
	snprintf(text, sizeof(text), "+%lld(%s):string", (long long)c.off, c.text);
	if (lw->pr->ninputs >= SCRIPT_INPUTS_MAX)
		return 0;
	for (unsigned k = 0; k < lw->pr->ninputs; k++)
		if (lw->pr->inputs[k].is_str && !strcmp(lw->pr->inputs[k].text, text)) {
			n->ival = k + 1;
			return 0;
		}
	snprintf(lw->pr->inputs[lw->pr->ninputs].text, sizeof(lw->pr->inputs[0].text), "%s", text);
	lw->pr->inputs[lw->pr->ninputs].is_str = true;
	n->ival = ++lw->pr->ninputs;
	return 0;
}

static int walk_stmts(struct lower *lw, struct ast *n)
{
	for (; n; n = n->next) {
		switch (n->kind) {
		case N_IF:
			if (walk(lw, n->a) || walk_stmts(lw, n->b))
				return -EINVAL;
			if (n->c && (n->c->kind == N_IF ? walk_stmts(lw, n->c) : walk_stmts(lw, n->c)))
				return -EINVAL;
			break;
		case N_WHILE:
		case N_UNROLL:
			if (walk(lw, n->a) || walk_stmts(lw, n->b))
				return -EINVAL;
			break;
		case N_ASSIGN:
			if (walk(lw, n->b))
				return -EINVAL;
			if (n->a->kind == N_MAP && (walk_list(lw, n->a->a) || shadow_input(lw, n)))
				return -EINVAL;
			break;
		case N_EXPRSTMT:
			if (walk(lw, n->a))
				return -EINVAL;
			break;
		default:
			break;
		}
	}
	return 0;
}

/* glibc 2.34 moved libpthread's, libdl's, librt's functions into libc:
 * what bpftrace's tools name there is libc's. */
static const char *const merged_libs[] = {"libpthread", "libdl", "librt", "libutil", "libanl"};

/* The module as the probe language names it: a program on PATH by its
 * path (bpftrace finds uprobe:bash:readline so), a merged library libc. */
static void module_name(const char *m, const char *func, char *out, size_t len)
{
	snprintf(out, len, "%s", m);
	if (!m[0] || strchr(m, '/'))
		return;
	for (size_t k = 0; k < sizeof(merged_libs) / sizeof(merged_libs[0]); k++) {
		size_t n = strlen(merged_libs[k]);

		if (!strncmp(m, merged_libs[k], n) && (!m[n] || m[n] == '.')) {
			/* the library may still hold the function (glibc < 2.34) */
			char path[PATH_MAX];
			static const char *const dirs[] = {"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu",
							   "/lib64", "/usr/lib64", "/lib", "/usr/lib"};
			bool stub = false;

			for (size_t d = 0; d < sizeof(dirs) / sizeof(dirs[0]) && !stub; d++) {
				struct stat st;

				snprintf(path, sizeof(path), "%s/%s.so.0", dirs[d], merged_libs[k]);
				if (!stat(path, &st))
					stub = st.st_size < 32768;	/* glibc 2.34+'s is a stub */
			}
			(void)func;
			if (stub)
				snprintf(out, len, "libc");
			return;
		}
	}
	if (strncmp(m, "lib", 3)) {
		/* a program: its path on PATH */
		const char *path = getenv("PATH");
		char buf[PATH_MAX];

		if (!path)
			path = "/usr/local/bin:/usr/bin:/bin";
		while (*path) {
			size_t n = strcspn(path, ":");

			if (n + strlen(m) + 2 > sizeof(buf)) {
				path += n + (path[n] == ':');
				continue;
			}
			memcpy(buf, path, n);
			buf[n] = '/';
			memcpy(buf + n + 1, m, strlen(m) + 1);
			if (n && !access(buf, X_OK)) {
				char real[PATH_MAX];

				snprintf(out, len, "%s", realpath(buf, real) ? real : buf);
				return;
			}
			path += n + (path[n] == ':');
		}
	}
}

static int make_spec(struct usc_script *s, const struct script_attach *a,
		     const struct script_probeinfo *pr, struct usc_probe_spec *spec,
		     struct script_diag *d)
{
	char text[USC_SPEC_MAX], mod[USC_MODULE_MAX], loc[USC_MODULE_MAX + USC_SYM_MAX + 64];
	struct usc_parse_error pe;
	size_t o = 0;

	module_name(a->module, a->func, mod, sizeof(mod));
	if (strlen(mod) + strlen(a->func) + 64 >= sizeof(text))
		return script_fail(d, a->pos, a->len, "the probe's names are too long");
	if (strpbrk(mod, " \t\n") || strpbrk(a->func, " \t\n"))
		return script_fail(d, a->pos, a->len, "a path or a name with blanks in it: not yet "
				   "in uscope's probes");
	switch (a->kind) {
	case SP_UPROBE:
	case SP_URETPROBE:
		if (a->is_address)
			snprintf(loc, sizeof(loc), "%s%s0x%llx", mod, mod[0] ? ":" : "",
				 (unsigned long long)a->address);
		else if (a->has_offset)
			snprintf(loc, sizeof(loc), "%s%s%s+%llu", mod, mod[0] ? ":" : "", a->func,
				 (unsigned long long)a->offset);
		else
			snprintf(loc, sizeof(loc), "%s%s%s", mod, mod[0] ? ":" : "", a->func);
		o = (size_t)snprintf(text, sizeof(text), "%s %.*s", a->kind == SP_URETPROBE ? "r" : "p",
				     (int)(sizeof(text) - 8), loc);
		break;
	case SP_USDT:
		o = (size_t)snprintf(text, sizeof(text), "%s:%%%s:%s", mod,
				     a->provider[0] ? a->provider : "*", a->func);
		break;
	case SP_PY:
		o = (size_t)snprintf(text, sizeof(text), "py:%s%s%s", a->module,
				     a->module[0] ? ":" : "", a->func);
		break;
	default:
		return 0;
	}
	for (unsigned k = 0; k < pr->ninputs && o < sizeof(text); k++)
		o += (size_t)snprintf(text + o, sizeof(text) - o, " i%u=%s", k, pr->inputs[k].text);
	if (o >= sizeof(text))
		return script_fail(d, a->pos, a->len, "the probe reads too much");
	if (usc_probe_parse(text, spec, &pe))
		return script_fail(d, a->pos, a->len, "%s (in uscope's probe: %s)",
				   usc_parse_strerror(pe.code), text);
	(void)s;
	return 0;
}

/* Maps of addresses that str() reads: str(@m[k]). */
static void find_str_maps(struct usc_script *s, struct ast *n)
{
	for (; n; n = n->next) {
		if (n->kind == N_CALL && !strcmp(n->name, "str") && n->a && n->a->kind == N_MAP &&
		    n->a->sym >= 0 && s->maps[n->a->sym].val.kind == TY_INT)
			s->maps[n->a->sym].shadow = -1;	/* wanted */
		find_str_maps(s, n->a);
		find_str_maps(s, n->b);
		find_str_maps(s, n->c);
	}
}

/* The shadows of the maps find_str_maps marked. */
static int make_shadows(struct usc_script *s, struct script_diag *d)
{
	size_t n = s->nmaps;

	for (size_t i = 0; i < n; i++) {
		struct script_mapinfo *m, *sh;

		if (s->maps[i].shadow != -1)
			continue;
		if (s->nmaps == s->capmaps) {
			struct script_mapinfo *nm = realloc(s->maps, 2 * s->capmaps * sizeof(*nm));

			if (!nm)
				return script_fail(d, 0, 0, "out of memory"), -ENOMEM;
			s->maps = nm;
			s->capmaps *= 2;
		}
		if (s->nmaps >= SCRIPT_MAPS_MAX)
			return script_fail(d, s->maps[i].pos, s->maps[i].len, "more than %d maps",
					   SCRIPT_MAPS_MAX);
		m = &s->maps[i];
		sh = &s->maps[s->nmaps];
		*sh = *m;
		sh->shadow = 0;
		sh->hidden = true;
		sh->val = (struct ty){.kind = TY_STR};
		if (script_map_layout(s, sh, d))
			return -EINVAL;
		m->shadow = (int)s->nmaps++;
	}
	return 0;
}

int script_lower(struct usc_script *s, struct script_diag *d)
{
	size_t nsites = 0, k = 0;

	for (struct ast_probe *p = s->prog.probes; p; p = p->next) {
		find_str_maps(s, p->pred);
		find_str_maps(s, p->body);
	}
	if (make_shadows(s, d))
		return -EINVAL;

	for (size_t i = 0; i < s->prog.nprobes; i++) {
		struct script_probeinfo *pr = &s->probes[i];
		struct lower lw = {.s = s, .pr = pr, .d = d, .usdt = true, .py = true};

		if (!pr->on_sites)
			continue;
		for (unsigned a = 0; a < pr->nattach; a++) {
			lw.usdt &= s->attach[pr->first_attach + a].kind == SP_USDT;
			lw.py &= s->attach[pr->first_attach + a].kind == SP_PY;
		}
		if ((pr->ast->pred && walk(&lw, pr->ast->pred)) || walk_stmts(&lw, pr->ast->body))
			return -EINVAL;
		nsites += pr->nattach;
	}
	s->specs = calloc(nsites ? nsites : 1, sizeof(*s->specs));
	s->spec_probe = calloc(nsites ? nsites : 1, sizeof(*s->spec_probe));
	s->spec_attach = calloc(nsites ? nsites : 1, sizeof(*s->spec_attach));
	if (!s->specs || !s->spec_probe || !s->spec_attach)
		return script_fail(d, 0, 0, "out of memory"), -ENOMEM;
	for (size_t i = 0; i < s->nattach; i++) {
		const struct script_attach *a = &s->attach[i];

		if (a->kind < SP_UPROBE)
			continue;
		if (make_spec(s, a, &s->probes[a->probe], &s->specs[k], d))
			return -EINVAL;
		s->spec_probe[k] = a->probe;
		s->spec_attach[k] = (unsigned)i;
		k++;
	}
	s->nspecs = k;
	return 0;
}
