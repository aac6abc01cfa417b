/* uscope list: the functions that can be probed. */
#include <errno.h>
#include <fnmatch.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "elf/elf.h"
#include "dwarf/dwarf.h"
#include "elf/modules.h"
#include "cache/cache.h"
#include "resolve/shape.h"
#include "resolve/resolve.h"
#include "usdt/usdt.h"

static const char list_usage[] =
	"usage: uscope list [--usdt] [-v] [-p PID | BINARY] [PATTERN]\n"
	"       uscope list --lines FUNCTION [-p PID | BINARY]\n"
	"       uscope list --vars LOCATION [-p PID | BINARY]\n"
	"       uscope list --patchable [-v] BINARY [PATTERN]\n"
	"\n"
	"  BINARY    an executable or library: a path, a command on PATH, or a\n"
	"            library name the dynamic loader would find (libc)\n"
	"  -p PID    every function of the executable and the libraries loaded in PID,\n"
	"            as MODULE:FUNCTION\n"
	"  PATTERN   a glob on function names (default: all)\n"
	"  -v        add ADDRESS SIZE FILE_OFFSET before each name; IFUNCs are marked\n"
	"  --usdt    list USDT static probes as MODULE %PROVIDER:NAME instead; PATTERN\n"
	"            is a glob on PROVIDER:NAME; -v adds each site's address,\n"
	"            semaphore and argument specs\n"
	"  --lines FUNCTION  the source of FUNCTION, each line that can be probed\n"
	"            (as FILE:LINE or FUNCTION:+N) numbered (needs debug info)\n"
	"  --vars LOCATION   the parameters and locals visible at LOCATION (any\n"
	"            probe location), with their types (needs debug info)\n"
	"  --patchable  whether the inject engine can probe each function's entry and\n"
	"            returns: a summary with the reasons it cannot; -v: one line each\n";

static bool usdt_mode;
static bool patchable_mode;

/* --patchable: one refusal rule and how many functions it refused */
struct rule_count {
	const char *rule;
	size_t n;
};

static void rule_add(struct rule_count *v, size_t *n, size_t max, const char *rule)
{
	for (size_t i = 0; i < *n; i++)
		if (!strcmp(v[i].rule, rule)) {
			v[i].n++;
			return;
		}
	if (*n < max)
		v[(*n)++] = (struct rule_count){rule, 1};
}

static int rule_cmp(const void *a, const void *b)
{
	const struct rule_count *x = a, *y = b;

	return x->n < y->n ? 1 : x->n > y->n ? -1 : strcmp(x->rule, y->rule);
}

static void rules_print(const char *what, struct rule_count *v, size_t n)
{
	qsort(v, n, sizeof(*v), rule_cmp);
	for (size_t i = 0; i < n; i++)
		printf("  %s refused: %6zu  %s\n", what, v[i].n, v[i].rule);
}

/* Whether the inject engine can patch each function (not its .cold parts,
 * which belong to another): a summary, with -v a line each. */
static int list_patchable(const char *path, const char *pattern, bool verbose)
{
	struct rule_count er[64], rr[64];
	size_t ner = 0, nrr = 0, total = 0, eok = 0, rok = 0, sfn = 0, ssites = 0;
	const struct elf_sym **fns = NULL;
	struct elf_file *ef;
	ssize_t n;
	int ret = elf_open(path, &ef);

	if (ret) {
		cli_error("cannot open %s: %s", path, ret == -ENOEXEC ? "not an x86-64 ELF file" :
			  strerror(-ret));
		return ret;
	}
	n = elf_func_match(ef, pattern ? pattern : "*", &fns);
	for (ssize_t i = 0; i < n; i++) {
		struct x86_patchability pa;

		if (!fns[i]->size || strstr(fns[i]->name, ".cold"))
			continue;
		ret = shape_patchable(ef, fns[i], &pa);
		if (ret == -ENOMEM) {
			cli_error("out of memory");
			break;
		}
		if (ret) {	/* its code is not in the file */
			pa.entry = pa.ret = ret;
			pa.entry_rule = pa.ret_rule = "cannot read its code";
			snprintf(pa.entry_why, sizeof(pa.entry_why), "cannot read its code: %s",
				 strerror(-ret));
			snprintf(pa.ret_why, sizeof(pa.ret_why), "%s", pa.entry_why);
			ret = 0;
		}
		total++;
		eok += !pa.entry;
		rok += !pa.ret;
		if (pa.entry)
			rule_add(er, &ner, 64, pa.entry_rule);
		if (pa.ret)
			rule_add(rr, &nrr, 64, pa.ret_rule);
		if (!pa.ret && pa.nspring) {
			sfn++;
			ssites += pa.nspring;
		}
		if (verbose && !pa.ret && pa.nspring)
			printf("%s  entry: %s  return: ok (%zu of %zu by springboard)\n", fns[i]->name,
			       pa.entry_why, pa.nspring, pa.nret);
		else if (verbose)
			printf("%s  entry: %s  return: %s\n", fns[i]->name, pa.entry_why, pa.ret_why);
	}
	free(fns);
	elf_close(ef);
	if (n < 0 || ret)
		return n < 0 ? (int)n : ret;
	printf("%zu functions: entry ok %zu (%.1f%%), return ok %zu (%.1f%%)\n", total, eok,
	       total ? 100.0 * (double)eok / (double)total : 0.0, rok,
	       total ? 100.0 * (double)rok / (double)total : 0.0);
	if (sfn)
		printf("  return ok by springboard: %zu functions (%zu return sites: a jmp rel8 to "
		       "a jmp rel32 in the function's trailing filler)\n", sfn, ssites);
	rules_print("entry", er, ner);
	rules_print("return", rr, nrr);
	return 0;
}

/* MODULE %PROVIDER:NAME once per probe; with -v, one line per site. */
static int list_usdt(const char *path, const char *pattern, bool verbose)
{
	struct elf_file *ef;
	struct usdt_note *notes = NULL;
	size_t n = 0;
	int ret = elf_open(path, &ef);

	if (ret) {
		cli_error("cannot open %s: %s", path, ret == -ENOEXEC ? "not an x86-64 ELF file" :
			  strerror(-ret));
		return ret;
	}
	ret = usdt_read(ef, &notes, &n);
	if (ret) {
		if (ret != -EINVAL)	/* a malformed note was reported already */
			cli_error("%s: cannot read its USDT notes: %s", path, strerror(-ret));
		elf_close(ef);
		return ret;
	}
	for (size_t i = 0; i < n; i++) {
		char full[512];
		bool dup = false;

		snprintf(full, sizeof(full), "%s:%s", notes[i].provider, notes[i].name);
		if (pattern && fnmatch(pattern, full, 0))
			continue;
		if (verbose) {
			printf("%s %%%s\n  site 0x%llx semaphore 0x%llx args: %s\n", path, full,
			       (unsigned long long)notes[i].pc, (unsigned long long)notes[i].sema,
			       notes[i].args[0] ? notes[i].args : "(none)");
			continue;
		}
		for (size_t k = 0; k < i; k++)
			dup |= !strcmp(notes[k].provider, notes[i].provider) &&
			       !strcmp(notes[k].name, notes[i].name);
		if (!dup)
			printf("%s %%%s\n", path, full);
	}
	usdt_notes_free(notes, n);
	elf_close(ef);
	return 0;
}

static void print_sym(const struct elf_file *ef, const struct elf_sym *s, const char *module,
		      bool verbose)
{
	char name[1024];

	/* C++ functions by their demangled names (-v adds the mangled one) */
	if (s->version && !(s->flags & ELF_SYM_DEFAULT_VER))
		snprintf(name, sizeof(name), "%s@%s", elf_sym_pretty(s), s->version);
	else
		snprintf(name, sizeof(name), "%s", elf_sym_pretty(s));
	if (verbose && s->demangled) {
		size_t l = strlen(name);

		snprintf(name + l, sizeof(name) - l, " [%s]", s->name);
	}
	if (verbose) {
		uint64_t off = 0;

		elf_vaddr_to_offset(ef, s->vaddr, &off);
		printf("0x%016llx 0x%-8llx 0x%-8llx %s%s%s%s\n", (unsigned long long)s->vaddr,
		       (unsigned long long)s->size, (unsigned long long)off,
		       module ? module : "", module ? ":" : "", name,
		       (s->flags & ELF_SYM_IFUNC) ? " [ifunc]" : "");
	} else {
		printf("%s%s%s\n", module ? module : "", module ? ":" : "", name);
	}
}

static int list_file(const char *path, const char *module, const char *pattern, bool verbose)
{
	struct elf_file *ef;
	int ret;
	const char *last = NULL;

	if (usdt_mode)
		return list_usdt(path, pattern, verbose);
	if (patchable_mode)
		return list_patchable(path, pattern, verbose);
	ret = elf_open(path, &ef);

	if (ret) {
		if (ret == -ENOEXEC)
			cli_error("%s is not an x86-64 ELF file", path);
		else
			cli_error("cannot open %s: %s", path, strerror(-ret));
		return ret;
	}
	for (size_t i = 0; i < ef->nsyms; i++) {
		const struct elf_sym *s = &ef->syms[i];

		if (pattern && fnmatch(pattern, s->name, 0) && !elf_sym_match_cxx(s, pattern))
			continue;
		/* one line per name, unless -v shows the different addresses */
		if (!verbose && last && !strcmp(last, elf_sym_pretty(s)) &&
		    !(s->version && !(s->flags & ELF_SYM_DEFAULT_VER)))
			continue;
		print_sym(ef, s, module, verbose);
		last = elf_sym_pretty(s);	/* C1/C2 constructors are one */
	}
	elf_close(ef);
	return 0;
}

static int list_pid(pid_t pid, const char *pattern, bool verbose)
{
	struct proc_map *maps;
	ssize_t n = procmaps_read(pid, &maps);
	char **seen = NULL;
	size_t nseen = 0;

	if (n < 0) {
		if (n == -ESRCH || n == -ENOENT)
			cli_error("no such process: %d", (int)pid);
		else
			cli_error("cannot read the mappings of process %d: %s", (int)pid,
				  strerror((int)-n));
		return (int)n;
	}
	for (ssize_t i = 0; i < n; i++) {
		char *p, *name;
		bool dup = false;

		if (!maps[i].path || maps[i].path[0] != '/' || maps[i].perms[2] != 'x')
			continue;
		/* a memfd (a run-time USDT provider) is opened through /proc */
		if (procmaps_module(pid, maps, (size_t)n, (size_t)i, &p, &name))
			break;
		for (size_t k = 0; k < nseen; k++)
			dup |= !strcmp(seen[k], p);
		char **v = dup ? NULL : realloc(seen, (nseen + 1) * sizeof(*v));

		if (!v) {
			free(p);
			free(name);
			if (dup)
				continue;
			break;
		}
		seen = v;
		seen[nseen++] = p;
		list_file(p, name, pattern, verbose);
		free(name);
	}
	for (size_t k = 0; k < nseen; k++)
		free(seen[k]);
	free(seen);
	procmaps_free(maps, (size_t)n);
	return 0;
}

/* BINARY as the user gave it: a path (or a /proc link to a memfd), a
 * command on PATH, or a library name the dynamic loader would find (libc).
 * 0 with *path malloc'd, or an error said. */
static int find_bin(const char *bin, char **path)
{
	if (strchr(bin, '/') || access(bin, F_OK) == 0) {
		if (module_path_resolve(bin, path)) {
			cli_error("no such file: %s", bin);
			return -ENOENT;
		}
	} else if (module_which(bin, path) && module_find_system(bin, path)) {
		cli_error("no such file, command or library: %s", bin);
		return -ENOENT;
	}
	return 0;
}

/* The sites of one LOCATION, resolved as trace would resolve them. */
static int location_sites(struct usc_cache *cache, const char *loc, pid_t pid, const char *bin,
			  struct usc_probe_spec *spec, struct usc_site **sites, size_t *nsites)
{
	struct usc_target t = {.kind = pid ? USC_TARGET_PID : USC_TARGET_COMMAND, .pid = pid};
	char *argv1[1] = {(char *)loc};
	struct usc_probe_spec *parsed;
	int ret;

	if (cli_parse_probes(argv1, 1, &parsed))
		return -EINVAL;
	*spec = *parsed;
	free(parsed);
	if (pid) {
		if (resolve_target(&t, NULL))
			return -ESRCH;
	} else if (find_bin(bin, &t.exe)) {
		return -ENOENT;
	}
	ret = resolve_probes(cache, &t, spec, 1, RESOLVE_NO_TAIL_FOLLOW, sites, nsites);
	free(t.exe);
	return ret;
}

static void print_var(const char *name, const char *type, bool param, void *ctx)
{
	(void)ctx;
	printf("  %-28s %s%s\n", type, name, param ? "  (parameter)" : "");
}

/* Is a parameter of the function at pc optimized out there? */
static bool params_lost(struct dwarf_module *dm, uint64_t pc)
{
	struct usc_fetcharg p[USC_MAX_ARGS];
	bool lost = false;
	int n;

	usc_log_quiet(true);
	n = dwarf_params(dm, pc, p, USC_MAX_ARGS);
	usc_log_quiet(false);
	for (int k = 0; k < n; k++)
		lost |= p[k].optimized_out;
	return lost;
}

static int list_vars(const char *loc, pid_t pid, const char *bin)
{
	struct usc_probe_spec spec;
	struct usc_site *sites = NULL;
	struct usc_cache *cache = cache_new();
	size_t n = 0;
	int ret = cache ? location_sites(cache, loc, pid, bin, &spec, &sites, &n) : -ENOMEM;

	for (size_t i = 0; i < n && !ret; i++) {
		struct dwarf_module *dm;
		uint64_t pc = sites[i].vaddr;

		ret = cache_dwarf(cache, sites[i].path, &dm);
		if (ret) {
			cli_error("%s has no debug info (DWARF)", sites[i].path);
			break;
		}
		/* at a function's entry, where trace puts a probe that names
		 * variables: after the prologue, or at the entry if a
		 * parameter is gone there and none is at the entry */
		if (pc == sites[i].func_vaddr && dwarf_after_prologue(dm, pc, &pc) == 0 &&
		    pc != sites[i].func_vaddr && params_lost(dm, pc) &&
		    !params_lost(dm, sites[i].func_vaddr))
			pc = sites[i].func_vaddr;
		printf("%s at 0x%llx (%s):\n", sites[i].label, (unsigned long long)pc, sites[i].path);
		if (dwarf_vars_at(dm, pc, print_var, NULL))
			printf("  (no variables known there)\n");
	}
	resolve_sites_free(sites, n);
	cache_free(cache);
	return ret ? 1 : 0;
}

static int list_lines(const char *func, pid_t pid, const char *bin)
{
	struct usc_probe_spec spec;
	struct usc_site *sites = NULL;
	struct usc_cache *cache = cache_new();
	size_t n = 0;
	int ret = cache ? location_sites(cache, func, pid, bin, &spec, &sites, &n) : -ENOMEM;

	for (size_t i = 0; i < n && !ret; i++) {
		struct dwarf_module *dm;
		struct elf_file *ef;
		const struct elf_sym *fn;
		const char *file;
		unsigned *lines = NULL, first = 0;
		ssize_t nl;
		FILE *src;
		char text[512];

		if (cache_dwarf(cache, sites[i].path, &dm) || cache_elf(cache, sites[i].path, &ef)) {
			cli_error("%s has no debug info (DWARF)", sites[i].path);
			ret = -ENODATA;
			break;
		}
		fn = elf_func_at(ef, sites[i].func_vaddr);
		nl = fn ? dwarf_func_lines(dm, fn->vaddr, fn->size, &file, &lines) : -ENOENT;
		if (nl <= 0 || dwarf_func_line(dm, fn->vaddr, &file, &first)) {
			cli_error("%s: no line information for %s", func, fn ? elf_sym_pretty(fn) : func);
			free(lines);
			ret = -ENOENT;
			break;
		}
		printf("%s (%s):\n", elf_sym_pretty(fn), file);
		src = fopen(file, "r");
		for (unsigned l = 1, k = 0; l <= lines[nl - 1]; l++) {
			bool code = k < (size_t)nl && lines[k] == l;
			bool have = src && fgets(text, sizeof(text), src);

			if (code)
				k++;
			if (l < first)
				continue;
			if (have)
				text[strcspn(text, "\n")] = 0;
			if (code)
				printf("%7u  %s\n", l, have ? text : "");
			else if (have)
				printf("         %s\n", text);
		}
		if (src)
			fclose(src);
		free(lines);
	}
	resolve_sites_free(sites, n);
	cache_free(cache);
	return ret ? 1 : 0;
}

int cmd_list(int argc, char **argv)
{
	static const struct option opts[] = {
		{"pid", required_argument, NULL, 'p'},
		{"verbose", no_argument, NULL, 'v'},
		{"usdt", no_argument, NULL, 'U'},
		{"lines", required_argument, NULL, 'L'},
		{"vars", required_argument, NULL, 'V'},
		{"patchable", no_argument, NULL, 'P'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	bool verbose = false;
	const char *lines_of = NULL, *vars_at = NULL;
	pid_t pid = 0;
	int c, ret;
	char *path = NULL;

	optind = 1;
	while ((c = getopt_long(argc, argv, "p:vh", opts, NULL)) != -1) {
		char *end;

		switch (c) {
		case 'p':
			pid = (pid_t)strtol(optarg, &end, 10);
			if (*end || pid <= 0) {
				cli_error("-p wants a process id, not '%s'", optarg);
				return 2;
			}
			break;
		case 'v':
			verbose = true;
			break;
		case 'U':
			usdt_mode = true;
			break;
		case 'P':
			patchable_mode = true;
			break;
		case 'L':
			lines_of = optarg;
			break;
		case 'V':
			vars_at = optarg;
			break;
		case 'h':
			fputs(list_usage, stdout);
			return 0;
		default:
			fputs(list_usage, stderr);
			return 2;
		}
	}
	if (lines_of || vars_at) {
		if ((!pid && optind + 1 != argc) || (pid && optind != argc)) {
			fputs(list_usage, stderr);
			return 2;
		}
		return lines_of ? list_lines(lines_of, pid, pid ? NULL : argv[optind]) :
				  list_vars(vars_at, pid, pid ? NULL : argv[optind]);
	}
	if (pid && patchable_mode) {
		cli_error("--patchable takes a BINARY, not -p");
		return 2;
	}
	if (pid) {
		if (argc - optind > 1) {
			fputs(list_usage, stderr);
			return 2;
		}
		return list_pid(pid, optind < argc ? argv[optind] : NULL, verbose) ? 1 : 0;
	}
	if (optind >= argc || argc - optind > 2) {
		fputs(list_usage, stderr);
		return 2;
	}
	const char *bin = argv[optind];

	if (find_bin(bin, &path))
		return 1;
	ret = list_file(path, NULL, optind + 1 < argc ? argv[optind + 1] : NULL, verbose);
	free(path);
	return ret ? 1 : 0;
}
