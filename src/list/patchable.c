/* `uscope list --patchable`: whether the inject engine can patch each
 * function's entry and returns (resolve/shape.c decides), and how many
 * functions each rule refused. */
#include "list/list.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "objfile/objfile.h"
#include "resolve/shape.h"

/* One more function refused by rule. */
static void list_rule_add(struct usc_list_rule *v, size_t *n, size_t max, const char *rule)
{
	for (size_t i = 0; i < *n; i++)
		if (!strcmp(v[i].rule, rule)) {
			v[i].n++;
			return;
		}
	if (*n < max)
		v[(*n)++] = (struct usc_list_rule){rule, 1};
}

static int list_rule_cmp(const void *a, const void *b)
{
	const struct usc_list_rule *x = a, *y = b;

	return x->n < y->n ? 1 : x->n > y->n ? -1 : strcmp(x->rule, y->rule);
}

/* Whether fn can be patched, in *pa; a function whose code cannot be read
 * is refused for it. 0 or -ENOMEM. */
static int list_patchable_fn(const struct objfile *ef, const struct objfile_sym *fn,
			     struct x86_patchability *pa)
{
	int ret = shape_patchable(ef, fn, pa);

	if (ret == -ENOMEM)
		return ret;
	if (ret) {	/* its code is not in the file */
		pa->entry = pa->ret = ret;
		pa->entry_rule = pa->ret_rule = "cannot read its code";
		snprintf(pa->entry_why, sizeof(pa->entry_why), "cannot read its code: %s",
			 strerror(-ret));
		snprintf(pa->ret_why, sizeof(pa->ret_why), "%s", pa->entry_why);
	}
	return 0;
}

static void list_patchable_count(struct usc_list_patch_sum *sum,
				 const struct x86_patchability *pa)
{
	sum->total++;
	sum->entry_ok += !pa->entry;
	sum->ret_ok += !pa->ret;
	if (pa->entry)
		list_rule_add(sum->entry_rules, &sum->nentry_rules, USC_LIST_RULES_MAX,
			      pa->entry_rule);
	if (pa->ret)
		list_rule_add(sum->ret_rules, &sum->nret_rules, USC_LIST_RULES_MAX, pa->ret_rule);
	if (!pa->ret && pa->nspring) {
		sum->spring_funcs++;
		sum->spring_sites += pa->nspring;
	}
}

/* Each function (not its .cold parts, which belong to another). */
int usc_list_patchable(const char *path, const char *pattern,
		       void (*fn)(const struct usc_list_patch *p, void *ctx), void *ctx,
		       struct usc_list_patch_sum *sum)
{
	const struct objfile_sym **fns = NULL;
	struct objfile *ef;
	ssize_t n;
	int ret = objfile_open(path, &ef);

	memset(sum, 0, sizeof(*sum));
	if (ret) {
		log_error("cannot open %s: %s", path, ret == -ENOEXEC ? "not an x86-64 ELF file" :
			  strerror(-ret));
		return ret;
	}
	n = objfile_func_match(ef, pattern ? pattern : "*", &fns);
	for (ssize_t i = 0; i < n; i++) {
		struct x86_patchability pa;

		if (!fns[i]->size || strstr(fns[i]->name, ".cold"))
			continue;
		ret = list_patchable_fn(ef, fns[i], &pa);
		if (ret) {
			log_error("out of memory");
			break;
		}
		list_patchable_count(sum, &pa);
		fn(&(struct usc_list_patch){.name = fns[i]->name, .entry_ok = !pa.entry,
					    .ret_ok = !pa.ret, .entry_why = pa.entry_why,
					    .ret_why = pa.ret_why, .nret = pa.nret,
					    .nspring = pa.nspring}, ctx);
	}
	free(fns);
	objfile_close(ef);
	if (n < 0 || ret)
		return n < 0 ? (int)n : ret;
	qsort(sum->entry_rules, sum->nentry_rules, sizeof(sum->entry_rules[0]), list_rule_cmp);
	qsort(sum->ret_rules, sum->nret_rules, sizeof(sum->ret_rules[0]), list_rule_cmp);
	return 0;
}
