/* uscope list: the functions that can be probed. The library finds the
 * rows (src/list/); this file parses the options and prints them. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "list/list.h"

static const struct cli_opt list_opts[] = {
	{'p', 0, "-p, --pid PID",
	 "every function of the executable and the libraries\nloaded in PID, as MODULE:FUNCTION "
	 "(a process in a\ncontainer: its own files)"},
	{'R', 0, "    --root DIR",
	 "BINARY is found under DIR, as a process whose root\nit is would find it (a "
	 "container's: --root /proc/PID/root)"},
	{'v', 0, "-v, --verbose",
	 "add ADDRESS SIZE FILE_OFFSET before each name; IFUNCs\nare marked"},
	{'U', 0, "    --usdt",
	 "list USDT static probes as MODULE %PROVIDER:NAME\ninstead; PATTERN is a glob on "
	 "PROVIDER:NAME; -v adds\neach site's address, semaphore and argument specs"},
	{'L', 0, "    --lines FUNCTION",
	 "the source of FUNCTION, each line that can be probed\n(as FILE:LINE or FUNCTION:+N) "
	 "numbered (needs debug info)"},
	{'V', 0, "    --vars LOCATION",
	 "the parameters and locals visible at LOCATION (any\nprobe location), with their types "
	 "(needs debug info)"},
	{'P', 0, "    --patchable",
	 "whether the inject engine can probe each function's\nentry and returns: a summary with "
	 "the reasons it\ncannot; -v: one line each"},
	{0, 0, NULL, NULL},
};

static const struct cli_cmd list_cmd = {
	.name = "list",
	.head =
	"usage: uscope list [--usdt] [-v] [-p PID | [--root DIR] BINARY] [PATTERN]\n"
	"       uscope list --lines FUNCTION [-p PID | [--root DIR] BINARY]\n"
	"       uscope list --vars LOCATION [-p PID | [--root DIR] BINARY]\n"
	"       uscope list --patchable [-v] [--root DIR] BINARY [PATTERN]\n"
	"\n"
	"  BINARY    an executable or library: a path, a command on PATH, or a\n"
	"            library name the dynamic loader would find (libc)\n"
	"  PATTERN   a glob on function names (default: all); with -p,\n"
	"            MODULE:PATTERN lists one module's (libc:str*, 'libjemalloc:*'),\n"
	"            as a probe names them\n"
	"\n",
	.tail =
	"\n"
	"examples:\n"
	"  uscope list libc 'str*'\n"
	"  uscope list -p 1234 'libc:mem*'\n"
	"  uscope list --usdt -p 1234\n"
	"  uscope list --lines parse ./app\n",
	.table = list_opts,
};

static bool usdt_mode;
static bool patchable_mode;

/* How the rows print: -v, the MODULE of -p PID's rows, the file's path
 * (as a process in its root names it). */
struct print_ctx {
	bool verbose;
	const char *module;
	const char *path;
};

static const char *list_root;	/* --root DIR */

static void print_patch(const struct usc_list_patch *p, void *ctx)
{
	const struct print_ctx *lp = ctx;

	if (lp->verbose && p->ret_ok && p->nspring)
		printf("%s  entry: %s  return: ok (%zu of %zu by springboard)\n", p->name,
		       p->entry_why, p->nspring, p->nret);
	else if (lp->verbose)
		printf("%s  entry: %s  return: %s\n", p->name, p->entry_why, p->ret_why);
}

static void rules_print(const char *what, const struct usc_list_rule *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		printf("  %s refused: %6zu  %s\n", what, v[i].n, v[i].rule);
}

/* Whether the inject engine can patch each function: a summary, with -v a
 * line each. */
static int print_patchable(const char *path, const char *pattern, bool verbose)
{
	struct print_ctx lp = {.verbose = verbose};
	struct usc_list_patch_sum sum;
	int ret = usc_list_patchable(path, pattern, print_patch, &lp, &sum);

	if (ret)
		return ret;
	printf("%zu functions: entry ok %zu (%.1f%%), return ok %zu (%.1f%%)\n", sum.total,
	       sum.entry_ok, sum.total ? 100.0 * (double)sum.entry_ok / (double)sum.total : 0.0,
	       sum.ret_ok, sum.total ? 100.0 * (double)sum.ret_ok / (double)sum.total : 0.0);
	if (sum.spring_funcs)
		printf("  return ok by springboard: %zu functions (%zu return sites: a jmp rel8 to "
		       "a jmp rel32 in the function's trailing filler)\n", sum.spring_funcs,
		       sum.spring_sites);
	rules_print("entry", sum.entry_rules, sum.nentry_rules);
	rules_print("return", sum.ret_rules, sum.nret_rules);
	return 0;
}

/* MODULE %PROVIDER:NAME once per probe; with -v, one line per site. */
static void print_usdt(const struct usc_list_usdt *u, void *ctx)
{
	const struct print_ctx *lp = ctx;
	char full[512];

	snprintf(full, sizeof(full), "%s:%s", u->provider, u->name);
	if (lp->verbose)
		printf("%s %%%s\n  site 0x%llx semaphore 0x%llx args: %s\n", lp->path, full,
		       (unsigned long long)u->pc, (unsigned long long)u->sema,
		       u->args[0] ? u->args : "(none)");
	else
		printf("%s %%%s\n", lp->path, full);
}

static void print_func(const struct usc_list_func *f, void *ctx)
{
	const struct print_ctx *lp = ctx;
	const char *module = lp->module;
	char name[1024];

	/* C++ functions by their demangled names (-v adds the mangled one) */
	if (f->version)
		snprintf(name, sizeof(name), "%s@%s", f->name, f->version);
	else
		snprintf(name, sizeof(name), "%s", f->name);
	if (lp->verbose && f->mangled) {
		size_t l = strlen(name);

		snprintf(name + l, sizeof(name) - l, " [%s]", f->mangled);
	}
	if (lp->verbose)
		printf("0x%016llx 0x%-8llx 0x%-8llx %s%s%s%s\n", (unsigned long long)f->vaddr,
		       (unsigned long long)f->size, (unsigned long long)f->offset,
		       module ? module : "", module ? ":" : "", name, f->ifunc ? " [ifunc]" : "");
	else
		printf("%s%s%s\n", module ? module : "", module ? ":" : "", name);
}

static int print_file(const char *path, const char *module, const char *pattern, bool verbose)
{
	struct print_ctx lp = {.verbose = verbose, .module = module,
			       .path = usc_list_shown_path(list_root, path)};

	if (usdt_mode)
		return usc_list_usdt(path, pattern, verbose, print_usdt, &lp);
	if (patchable_mode)
		return print_patchable(path, pattern, verbose);
	return usc_list_functions(path, pattern, verbose, print_func, &lp);
}

/* -p PID: each module as print_file lists a file. */
struct print_pid {
	const char *pattern;
	bool verbose;
};

static void print_module(const char *path, const char *name, void *ctx)
{
	const struct print_pid *a = ctx;

	print_file(path, name, a->pattern, a->verbose);
}

static void print_site_vars(const char *label, uint64_t pc, const char *path, void *ctx)
{
	(void)ctx;
	printf("%s at 0x%llx (%s):\n", label, (unsigned long long)pc, path);
}

static void print_var(const char *name, const char *type, bool param, void *ctx)
{
	(void)ctx;
	printf("  %-28s %s%s\n", type, name, param ? "  (parameter)" : "");
}

static void print_no_vars(void *ctx)
{
	(void)ctx;
	printf("  (no variables known there)\n");
}

static void print_func_lines(const char *name, const char *file, void *ctx)
{
	(void)ctx;
	printf("%s (%s):\n", name, file);
}

static void print_line(unsigned line, const char *text, bool code, void *ctx)
{
	(void)ctx;
	if (code)
		printf("%7u  %s\n", line, text ? text : "");
	else
		printf("         %s\n", text);
}

/* --lines FUNCTION or --vars LOCATION, in process pid or in BINARY bin. */
static int print_location(const char *loc, bool lines, pid_t pid, const char *bin)
{
	static const struct usc_list_vars_ops vars_ops = {print_site_vars, print_var,
							   print_no_vars};
	static const struct usc_list_lines_ops lines_ops = {print_func_lines, print_line};
	char *argv1[1] = {(char *)loc};
	struct usc_probe_spec spec, *parsed;
	int ret;

	if (cli_parse_probes(argv1, 1, &parsed))
		return 1;
	spec = *parsed;
	free(parsed);
	ret = lines ? usc_list_lines(pid, list_root, bin, &spec, &lines_ops, NULL) :
		      usc_list_vars(pid, list_root, bin, &spec, &vars_ops, NULL);
	return ret ? 1 : 0;
}

int cmd_list(int argc, char **argv)
{
	struct cli_getopt_tab t;
	bool verbose = false;
	const char *lines_of = NULL, *vars_at = NULL;
	pid_t pid = 0;
	int c, ret;
	char *path = NULL;

	cli_getopt_table(&list_cmd, &t);
	optind = 1;
	while ((c = cli_getopt(&list_cmd, argc, argv, &t)) != -1) {
		char *end;

		switch (c) {
		case 'p':
			pid = (pid_t)strtol(optarg, &end, 10);
			if (*end || pid <= 0) {
				cli_usage_error("-p wants a process id, not '%s'", optarg);
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
		case 'R':
			list_root = optarg;
			break;
		case 'h':
			cli_usage(&list_cmd, stdout);
			return 0;
		default:
			return 2;
		}
	}
	if (pid && list_root) {
		cli_usage_error("--root finds a BINARY: -p %d lists the process's files in its own "
				"root", (int)pid);
		return 2;
	}
	if (lines_of || vars_at) {
		if ((!pid && optind + 1 != argc) || (pid && optind != argc)) {
			cli_usage_error("--%s takes %s", lines_of ? "lines" : "vars",
					pid ? "-p PID and nothing after it" : "one BINARY");
			return 2;
		}
		return print_location(lines_of ? lines_of : vars_at, lines_of != NULL, pid,
				     pid ? NULL : argv[optind]);
	}
	if (pid && patchable_mode) {
		cli_usage_error("--patchable takes a BINARY, not -p");
		return 2;
	}
	if (pid) {
		if (argc - optind > 1) {
			cli_usage_error("-p PID takes one PATTERN at most (MODULE:PATTERN for a "
					"module's), not '%s'", argv[optind + 1]);
			return 2;
		}
		struct print_pid a = {optind < argc ? argv[optind] : NULL, verbose};
		char *module = NULL;

		/* MODULE:PATTERN, as a probe names a module's functions ("ns::f" has
		 * no module; --usdt's PATTERN is PROVIDER:NAME) */
		if (a.pattern && !usdt_mode) {
			const char *colon = strchr(a.pattern, ':');

			if (colon && colon > a.pattern && colon[1] != ':') {
				module = strndup(a.pattern, (size_t)(colon - a.pattern));
				if (!module) {
					cli_error("out of memory");
					return 1;
				}
				a.pattern = colon[1] ? colon + 1 : NULL;
			}
		}
		ret = usc_list_modules(pid, module, print_module, &a) ? 1 : 0;
		free(module);
		return ret;
	}
	if (optind >= argc) {
		cli_usage_error("give a BINARY to list, or -p PID");
		return 2;
	}
	if (argc - optind > 2) {
		cli_usage_error("one BINARY and one PATTERN at most, not '%s'", argv[optind + 2]);
		return 2;
	}
	const char *bin = argv[optind];

	if (usc_list_find_binary(list_root, bin, &path))
		return 1;
	ret = print_file(path, NULL, optind + 1 < argc ? argv[optind + 1] : NULL, verbose);
	free(path);
	return ret ? 1 : 0;
}
