/* Function lookups in an ELF file's symbols: by exact name (versions, the
 * dynamic linker's preferences, C++ demangled names), by glob, by address,
 * "did you mean" suggestions; and the address of a symbol of any kind. */
#include <ctype.h>
#include <errno.h>
#include <fnmatch.h>
#include <gelf.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "objfile/demangle.h"
#include "objfile/objfile_int.h"

/* ---- lookups -------------------------------------------------------- */

/* First index whose name's first len bytes are >= key: since the names
 * are sorted, an exact match is the first of the names with that prefix. */
static size_t syms_lower_bound(const struct objfile *ef, const char *key, size_t len)
{
	size_t lo = 0, hi = ef->nsyms;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const char *n = ef->syms[mid].name;
		if (strncmp(n, key, len) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static bool name_eq(const char *n, const char *key, size_t len)
{
	return !strncmp(n, key, len) && n[len] == 0;
}

/* Preference among aliases at one address. */
static int sym_pref(const struct objfile_sym *s)
{
	if (s->flags & OBJFILE_SYM_DEFAULT_VER)
		return 0;
	if (!s->version)
		return 1;
	return 2;
}

/* Of the candidates sel[0..nsel) (in address order), the hidden versions
 * are gone already: strong beats weak, aliases are one. */
static int pick_cands(const struct objfile *ef, const char *name, const struct objfile_sym **sel,
		      size_t nsel, bool any_strong, const struct objfile_sym **out,
		      const struct objfile_sym ***cands, size_t *ncands)
{
	const struct objfile_sym **grp = sel;
	size_t naddr = 0;

	for (size_t i = 0; i < nsel; i++) {
		const struct objfile_sym *s = sel[i];
		if (any_strong && (s->flags & OBJFILE_SYM_WEAK))
			continue;
		if (naddr && grp[naddr - 1]->vaddr == s->vaddr) {
			if (sym_pref(s) < sym_pref(grp[naddr - 1]))
				grp[naddr - 1] = s;
			continue;
		}
		grp[naddr++] = s;
	}
	if (naddr == 0) {
		free(sel);
		return -ENOENT;
	}
	if (naddr == 1) {
		if (out)
			*out = grp[0];
		free(sel);
		return 0;
	}
	log_debug("%s: %zu functions named %s", ef->path, naddr, name);
	if (cands && ncands) {
		*cands = grp;
		*ncands = naddr;
	} else {
		free(sel);
	}
	return -EEXIST;
}

/* The C++ functions whose demangled name is name: with its parameters if
 * name has a '(', else without. */
static int lookup_demangled(const struct objfile *ef, const char *name,
			    const struct objfile_sym **out,
			    const struct objfile_sym ***cands, size_t *ncands)
{
	bool params = strchr(name, '(') != NULL, any_strong = false, any_visible = false;
	const struct objfile_sym **sel;
	size_t nsel = 0;

	sel = malloc((ef->nsyms ? ef->nsyms : 1) * sizeof(*sel));
	if (!sel)
		return -ENOMEM;
	for (size_t i = 0; i < ef->nsyms; i++) {
		const struct objfile_sym *s = &ef->syms[i];

		if (s->demangled && demangle_same(name, params ? s->demangled : s->qualname)) {
			sel[nsel++] = s;
			if (!(s->flags & OBJFILE_SYM_HIDDEN_VER))
				any_visible = true;
		}
	}
	size_t w = 0;

	for (size_t i = 0; i < nsel; i++) {
		if (any_visible && (sel[i]->flags & OBJFILE_SYM_HIDDEN_VER))
			continue;
		if (!(sel[i]->flags & (OBJFILE_SYM_WEAK | OBJFILE_SYM_LOCAL)))
			any_strong = true;
		sel[w++] = sel[i];
	}
	qsort(sel, w, sizeof(*sel), objfile_cmp_symp_addr);
	return pick_cands(ef, name, sel, w, any_strong, out, cands, ncands);
}

int objfile_func_lookup(const struct objfile *ef, const char *name,
		    const struct objfile_sym **out,
		    const struct objfile_sym ***cands, size_t *ncands)
{
	const char *at = strchr(name, '@'), *qver = NULL;
	bool qdefault = false, any_strong = false, any_visible = false;
	size_t len = at ? (size_t)(at - name) : strlen(name);
	size_t lo, hi, nsel = 0;
	const struct objfile_sym **sel;

	if (out)
		*out = NULL;
	if (cands)
		*cands = NULL;
	if (ncands)
		*ncands = 0;
	if (at) {
		qdefault = at[1] == '@';
		qver = at + (qdefault ? 2 : 1);
		if (!*qver)
			qver = NULL;
	}
	lo = syms_lower_bound(ef, name, len);
	hi = lo;
	while (hi < ef->nsyms && name_eq(ef->syms[hi].name, name, len))
		hi++;
	if (hi == lo)
		return at ? -ENOENT : lookup_demangled(ef, name, out, cands, ncands);

	sel = malloc((hi - lo) * sizeof(*sel));
	if (!sel)
		return -ENOMEM;
	for (size_t i = lo; i < hi; i++)
		if (!(ef->syms[i].flags & OBJFILE_SYM_HIDDEN_VER))
			any_visible = true;
	for (size_t i = lo; i < hi; i++) {
		const struct objfile_sym *s = &ef->syms[i];
		if (qver) {
			if (!s->version || strcmp(s->version, qver))
				continue;
			if (qdefault && !(s->flags & OBJFILE_SYM_DEFAULT_VER))
				continue;
		} else if (any_visible && (s->flags & OBJFILE_SYM_HIDDEN_VER)) {
			continue;
		}
		sel[nsel++] = s;
		if (!(s->flags & (OBJFILE_SYM_WEAK | OBJFILE_SYM_LOCAL)))
			any_strong = true;
	}
	/* grouped by address (sel is in address order) */
	return pick_cands(ef, name, sel, nsel, any_strong, out, cands, ncands);
}

struct match_ent {
	uint64_t vaddr;
	size_t idx;
};

static int cmp_match_ent(const void *pa, const void *pb)
{
	const struct match_ent *a = pa, *b = pb;

	if (a->vaddr != b->vaddr)
		return a->vaddr < b->vaddr ? -1 : 1;
	return (a->idx > b->idx) - (a->idx < b->idx);
}

bool objfile_sym_match_cxx(const struct objfile_sym *s, const char *glob)
{
	const char *dn;
	char *fg, *fs;
	size_t need;
	bool ok;

	if (!s->demangled)
		return false;
	dn = strchr(glob, '(') ? s->demangled : s->qualname;
	need = strlen(dn) + strlen(glob) + 2;
	fg = malloc(need);
	fs = malloc(need);
	if (fg && fs) {
		demangle_fold(glob, fg, need);
		demangle_fold(dn, fs, need);
	}
	ok = fg && fs && fnmatch(fg, fs, 0) == 0;
	free(fg);
	free(fs);
	return ok;
}

ssize_t objfile_func_match(const struct objfile *ef, const char *glob,
		       const struct objfile_sym ***out)
{
	bool versioned = strchr(glob, '@') != NULL;
	struct match_ent *m;
	const struct objfile_sym **res;
	size_t nm = 0, nres = 0;
	bool *keep;
	char *buf = NULL;
	size_t bufsz = 0;

	*out = NULL;
	if (!ef->nsyms)
		return 0;
	m = malloc(ef->nsyms * sizeof(*m));
	keep = calloc(ef->nsyms, sizeof(*keep));
	if (!m || !keep) {
		free(m);
		free(keep);
		return -ENOMEM;
	}
	for (size_t i = 0; i < ef->nsyms; i++) {
		const struct objfile_sym *s = &ef->syms[i];
		const char *subject = s->name;
		int r;

		if (versioned) {
			size_t need = strlen(s->name) + (s->version ? strlen(s->version) : 0) + 3;
			if (need > bufsz) {
				char *nb = realloc(buf, need);
				if (!nb) {
					free(buf);
					free(m);
					free(keep);
					return -ENOMEM;
				}
				buf = nb;
				bufsz = need;
			}
			snprintf(buf, bufsz, "%s%s%s", s->name,
				 !s->version ? "" :
				 (s->flags & OBJFILE_SYM_DEFAULT_VER) ? "@@" : "@",
				 s->version ? s->version : "");
			subject = buf;
		}
		r = fnmatch(glob, subject, 0);
		if (r == FNM_NOMATCH && !versioned && objfile_sym_match_cxx(s, glob))
			r = 0;
		if (r == 0) {
			m[nm].vaddr = s->vaddr;
			m[nm].idx = i;
			nm++;
		} else if (r != FNM_NOMATCH) {
			log_error("bad pattern '%s'", glob);
			free(buf);
			free(m);
			free(keep);
			return -EINVAL;
		}
	}
	free(buf);
	qsort(m, nm, sizeof(*m), cmp_match_ent);
	for (size_t i = 0; i < nm; i++)
		if (i == 0 || m[i].vaddr != m[i - 1].vaddr) {
			keep[m[i].idx] = true;
			nres++;
		}
	free(m);
	if (!nres) {
		free(keep);
		return 0;
	}
	res = malloc(nres * sizeof(*res));
	if (!res) {
		free(keep);
		return -ENOMEM;
	}
	nres = 0;
	for (size_t i = 0; i < ef->nsyms; i++)
		if (keep[i])
			res[nres++] = &ef->syms[i];
	free(keep);
	*out = res;
	return (ssize_t)nres;
}

const struct objfile_sym *objfile_func_at(const struct objfile *ef, uint64_t vaddr)
{
	const struct objfile_priv *p = ef->priv;
	const struct objfile_sym *best = NULL;
	size_t lo = 0, hi = ef->nsyms;

	if (!ef->nsyms)
		return NULL;
	/* first entry with start > vaddr */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (p->byaddr[mid]->vaddr <= vaddr)
			lo = mid + 1;
		else
			hi = mid;
	}
	/* walk back: the innermost (highest start) containing function wins,
	 * among aliases the first in name order */
	for (size_t i = lo; i-- > 0;) {
		const struct objfile_sym *s = p->byaddr[i];
		bool in;

		if (best && s->vaddr != best->vaddr)
			break;
		if (vaddr - s->vaddr > p->maxsize && !best)
			break;
		in = s->size ? vaddr - s->vaddr < s->size : vaddr == s->vaddr;
		if (in)
			best = s;
	}
	return best;
}

/* Optimal string alignment distance (Damerau-Levenshtein with adjacent
 * transpositions), case-insensitive. */
static size_t edit_distance(const char *a, size_t la, const char *b, size_t lb,
			    size_t *rows)
{
	size_t *r0 = rows, *r1 = rows + lb + 1, *r2 = rows + 2 * (lb + 1);

	for (size_t j = 0; j <= lb; j++)
		r1[j] = j;
	for (size_t i = 1; i <= la; i++) {
		size_t *t;
		r2[0] = i;
		for (size_t j = 1; j <= lb; j++) {
			int ca = tolower((unsigned char)a[i - 1]);
			int cb = tolower((unsigned char)b[j - 1]);
			size_t cost = ca != cb;
			size_t v = r1[j] + 1;
			if (r2[j - 1] + 1 < v)
				v = r2[j - 1] + 1;
			if (r1[j - 1] + cost < v)
				v = r1[j - 1] + cost;
			if (i > 1 && j > 1 &&
			    ca == tolower((unsigned char)b[j - 2]) &&
			    tolower((unsigned char)a[i - 2]) == cb &&
			    r0[j - 2] + 1 < v)
				v = r0[j - 2] + 1;
			r2[j] = v;
		}
		t = r0; r0 = r1; r1 = r2; r2 = t;
	}
	return r1[lb];
}

struct suggest_ent {
	size_t score, dist;
	const char *name;
};

static int cmp_suggest(const void *pa, const void *pb)
{
	const struct suggest_ent *a = pa, *b = pb;

	if (a->score != b->score)
		return a->score < b->score ? -1 : 1;
	if (a->dist != b->dist)
		return a->dist < b->dist ? -1 : 1;
	return strcmp(a->name, b->name);
}

#define SUGGEST_MAXLEN 256

/* Candidates: names within max(2, len/3) edits, or containing the query
 * (case-insensitive; their distance counts half). Ranked by that score, then
 * distance, then name. Each name is suggested once. */
size_t objfile_func_suggest(const struct objfile *ef, const char *name,
			const char **out, size_t max)
{
	size_t qlen = strlen(name), thr, n = 0, nout = 0;
	bool params = strchr(name, '(') != NULL, mangled = !strncmp(name, "_Z", 2);
	struct suggest_ent *e;
	size_t *rows;

	if (!max || !ef->nsyms || !qlen)
		return 0;
	if (qlen > SUGGEST_MAXLEN)
		qlen = SUGGEST_MAXLEN;
	thr = qlen / 3 > 2 ? qlen / 3 : 2;
	e = malloc(ef->nsyms * sizeof(*e));
	rows = malloc(3 * (SUGGEST_MAXLEN + 1) * sizeof(*rows));
	if (!e || !rows) {
		free(e);
		free(rows);
		return 0;
	}
	for (size_t i = 0; i < ef->nsyms; i++) {
		const struct objfile_sym *s = &ef->syms[i];
		/* a C++ function by its demangled name, unless asked by the
		 * mangled one */
		const char *nm = s->demangled && !mangled ? (params ? s->demangled : s->qualname) :
				 s->name;
		size_t ln = strlen(nm), d;
		bool sub;

		if (i > 0 && !strcmp(s->name, ef->syms[i - 1].name))
			continue;
		if (ln > SUGGEST_MAXLEN)
			ln = SUGGEST_MAXLEN;
		sub = strcasestr(nm, name) != NULL;
		if (!sub && (ln > qlen ? ln - qlen : qlen - ln) > thr)
			continue;
		d = edit_distance(nm, ln, name, qlen, rows);
		if (!sub && d > thr)
			continue;
		e[n].dist = d;
		e[n].score = sub ? d / 2 : d;
		e[n].name = mangled ? s->name : objfile_sym_pretty(s);
		n++;
	}
	qsort(e, n, sizeof(*e), cmp_suggest);
	for (size_t i = 0; i < n && nout < max; i++) {
		bool dup = false;

		for (size_t k = 0; k < nout; k++)
			dup |= !strcmp(out[k], e[i].name);
		if (!dup)
			out[nout++] = e[i].name;
	}
	free(e);
	free(rows);
	return nout;
}

/* Binding preference for objfile_symbol_vaddr: lower wins. */
static int bind_rank(int bind)
{
	switch (bind) {
	case STB_GLOBAL:
	case STB_GNU_UNIQUE:
		return 0;
	case STB_WEAK:
		return 1;
	case STB_LOCAL:
		return 2;
	default:
		return 3;
	}
}

int objfile_symbol_vaddr(const struct objfile *ef, const char *name, uint64_t *vaddr)
{
	Elf *elf = ((const struct objfile_priv *)ef->priv)->elf;
	Elf_Scn *scn = NULL;
	uint64_t best = 0;
	int best_rank = 4;

	if (!*name)
		return -ENOENT;
	while (elf && (scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		Elf_Data *d;

		if (!gelf_getshdr(scn, &sh) || (sh.sh_type != SHT_SYMTAB && sh.sh_type != SHT_DYNSYM) ||
		    !sh.sh_entsize || !(d = elf_getdata(scn, NULL)))
			continue;
		for (size_t k = 1; k < sh.sh_size / sh.sh_entsize; k++) {
			GElf_Sym sym;
			const char *nm;
			int type, rank;

			if (!gelf_getsym(d, (int)k, &sym))
				break;
			type = GELF_ST_TYPE(sym.st_info);
			if (sym.st_shndx == SHN_UNDEF || sym.st_shndx == SHN_COMMON ||
			    type == STT_SECTION || type == STT_FILE || type == STT_TLS)
				continue;
			nm = elf_strptr(elf, sh.sh_link, sym.st_name);
			if (!nm || strcmp(nm, name))
				continue;
			rank = bind_rank(GELF_ST_BIND(sym.st_info));
			if (rank < best_rank) {
				best_rank = rank;
				best = sym.st_value;
			}
		}
	}
	if (best_rank == 4) {
		/* no section headers: the functions read through DT_SYMTAB */
		const struct objfile_sym *s;

		if (objfile_func_lookup(ef, name, &s, NULL, NULL))
			return -ENOENT;
		best = s->vaddr;
	}
	*vaddr = best;
	return 0;
}
