/* libFuzzer target for the probe-language parser.
 *
 * Feeds arbitrary text to usc_probe_parse and checks what it promises:
 * failures carry a real error code and a position inside the text;
 * successes hold well-formed fetch programs (bounded, END-terminated,
 * staged load -> derefs -> store -> modify) under NUL-terminated identifier
 * names, and parsing is deterministic. Any violation aborts. */
#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "probe/probe.h"

#define CHECK(cond)                                                             \
	do {                                                                    \
		if (!(cond)) {                                                  \
			fprintf(stderr, "fuzz_probe: invariant failed: %s (line %d)\n", \
				#cond, __LINE__);                               \
			abort();                                                \
		}                                                               \
	} while (0)

static struct usc_probe_spec spec, again;

static int is_identifier(const char *s, size_t max)
{
	size_t n = strnlen(s, max);

	if (n == 0 || n == max)		/* empty, or not NUL-terminated */
		return 0;
	if (!(isalpha((unsigned char)s[0]) || s[0] == '_'))
		return 0;
	for (size_t i = 1; i < n; i++)
		if (!(isalnum((unsigned char)s[i]) || s[i] == '_'))
			return 0;
	return 1;
}

static int is_load(uint8_t op)
{
	/* the parser never emits FOP_VADDR */
	return (op >= FOP_REG && op <= FOP_FOFFS) || op == FOP_ARG || op == FOP_VAR ||
	       op == FOP_PARAMS || op == FOP_PID || op == FOP_TID || op == FOP_CPU ||
	       op == FOP_GOID || op == FOP_USTACK || op == FOP_PYSTACK;
}

static int is_store(uint8_t op)
{
	return op == FOP_ST_RAW || op == FOP_ST_MEM || op == FOP_ST_STRING;
}

static void check_arg(const struct usc_fetcharg *a, size_t len)
{
	const struct fetch_insn *in = a->insn;
	unsigned n = a->ninsn, i = 0;

	CHECK(is_identifier(a->name, USC_NAME_MAX));
	CHECK(strncmp(a->name, "common_", 7) && strncmp(a->name, "__probe", 7));
	CHECK(a->type < USC_T_NR);
	CHECK((size_t)a->pos + a->len <= len);
	CHECK(a->len > 0);
	CHECK(n >= 2 && n <= USC_FETCH_MAX);
	CHECK(in[n - 1].op == FOP_END);
	for (unsigned k = 0; k + 1 < n; k++)
		CHECK(in[k].op != FOP_END);

	/* load */
	CHECK(is_load(in[i].op));
	if (in[i].op == FOP_REG)
		CHECK(in[i].reg < USC_REG_NR);
	if (in[i].op == FOP_STACK)
		CHECK(in[i].imm >= 0);
	if (in[i].op == FOP_COMM) {
		CHECK(a->type == USC_T_STRING);
		CHECK(n == 2);
		return;
	}
	if (in[i].op == FOP_USTACK) {	/* copied whole by the engine, N frames */
		CHECK(a->type == USC_T_STACK);
		CHECK(n == 2);
		CHECK(fetch_stack_frames(in[i].imm) == (uint32_t)in[i].imm);
		CHECK(in[i].imm >= 1 && in[i].imm <= USC_STACK_FRAMES_MAX);
		return;
	}
	if (in[i].op == FOP_PYSTACK) {	/* walked by the engine, N frames */
		CHECK(a->type == USC_T_STACK);
		CHECK(n == 2);
		CHECK(in[i].imm >= 1 && in[i].imm <= USC_PYSTACK_FRAMES_MAX);
		return;
	}
	CHECK(a->type != USC_T_STACK);
	if (in[i].op == FOP_PARAMS) {	/* expanded at the site */
		CHECK(n == 2 && !a->named);
		return;
	}
	if (in[i].op == FOP_VAR)	/* the expression lies inside the argument */
		CHECK((in[i].imm & 0xffffffff) >= a->pos &&
		      (in[i].imm & 0xffffffff) + (in[i].imm >> 32) <= (int64_t)a->pos + a->len);
	i++;
	/* dereferences */
	while (in[i].op == FOP_DEREF)
		i++;
	/* one store, of the type's size */
	CHECK(is_store(in[i].op));
	if (fetch_type_is_string(a->type)) {
		CHECK(in[i].op == FOP_ST_STRING);
	} else if (a->type == USC_T_BITFIELD) {
		CHECK(in[i].op != FOP_ST_STRING);
		CHECK(in[i].size == 1 || in[i].size == 2 || in[i].size == 4 || in[i].size == 8);
	} else {
		CHECK(in[i].op != FOP_ST_STRING);
		CHECK(in[i].size == fetch_type_size(a->type));
	}
	i++;
	/* the bitfield geometry fits its container */
	if (a->type == USC_T_BITFIELD) {
		CHECK(in[i].op == FOP_MOD_BF);
		CHECK(in[i].size == in[i - 1].size);
		CHECK(in[i].bf_width >= 1);
		CHECK((unsigned)in[i].bf_width + in[i].bf_offset <= in[i].size * 8u);
		i++;
	}
	CHECK(in[i].op == FOP_END && i + 1 == n);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = malloc(size + 1);
	struct usc_parse_error err = {.code = USC_PERR_NR, .pos = (size_t)-1};
	size_t len;
	int ret;

	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = 0;
	len = strlen(text);	/* the input may hold NULs: the parser sees up to the first */

	ret = usc_probe_parse(text, &spec, &err);
	CHECK(ret == 0 || ret == -EINVAL);
	if (ret) {
		CHECK(err.code > USC_PERR_OK && err.code < USC_PERR_NR);
		CHECK(err.pos <= len);
		CHECK(strcmp(usc_parse_strerror(err.code), "unknown error"));
	} else {
		CHECK(err.code == USC_PERR_OK);
		CHECK(len < USC_SPEC_MAX);
		CHECK(!strcmp(spec.text, text));
		CHECK(spec.nargs <= USC_MAX_ARGS);
		if (spec.event_given)
			CHECK(is_identifier(spec.event, USC_NAME_MAX));
		else
			CHECK(spec.event[0] == 0);
		CHECK(strnlen(spec.module, USC_MODULE_MAX) < USC_MODULE_MAX);
		CHECK(strnlen(spec.symbol, USC_SYM_MAX) < USC_SYM_MAX);
		CHECK(spec.loc_pos <= len);
		if (spec.loc_kind == USC_LOC_SYMBOL) {
			CHECK(spec.symbol[0] != 0);
			/* a glob has a wildcard; one inside a C++ parameter
			 * list ("f(char*)") is a pointer, not a wildcard; a
			 * plain name (no C++ lists or operators) is a glob
			 * exactly when it has one */
			CHECK(!spec.is_glob || strpbrk(spec.symbol, "*?[") != NULL);
			if (!strpbrk(spec.symbol, "(<") && !strstr(spec.symbol, "operator"))
				CHECK(spec.is_glob == (strpbrk(spec.symbol, "*?[") != NULL));
		} else if (spec.loc_kind == USC_LOC_USDT) {
			CHECK(spec.provider[0] != 0 && spec.symbol[0] != 0);
			CHECK(!spec.is_return && !spec.has_offset);
			CHECK(spec.is_glob == (strpbrk(spec.symbol, "*?[") != NULL ||
					       strpbrk(spec.provider, "*?[") != NULL));
		} else if (spec.loc_kind == USC_LOC_LINE) {
			CHECK(spec.symbol[0] != 0 && spec.line > 0 && !spec.is_return);
		} else if (spec.loc_kind == USC_LOC_PYTHON) {
			/* py:[MODULE:]QUALNAME: a module ("*": any) and a qualname;
			 * a glob has a wildcard in one of them */
			CHECK(spec.module[0] != 0 && spec.symbol[0] != 0 && !spec.has_offset);
			CHECK(!spec.is_glob || strpbrk(spec.symbol, "*?[") != NULL ||
			      strpbrk(spec.module, "*?[") != NULL);
			if (strpbrk(spec.symbol, "*?["))
				CHECK(spec.is_glob);
		} else {
			CHECK(spec.loc_kind == USC_LOC_ADDRESS);
			CHECK(spec.symbol[0] == 0 && !spec.has_offset);
		}
		for (unsigned i = 0; i < spec.nargs; i++) {
			char buf[1024];

			check_arg(&spec.args[i], len);
			for (unsigned k = 0; k < i; k++)
				CHECK(strcmp(spec.args[i].name, spec.args[k].name));
			CHECK(probe_fetcharg_format(&spec.args[i], buf, sizeof(buf)) > 0);
			/* a filter's hidden operands come after the shown arguments */
			if (i && spec.args[i - 1].hidden)
				CHECK(spec.args[i].hidden);
		}
		/* a filter: well-formed reverse Polish over names in its strings */
		CHECK(spec.filter.n <= USC_FILTER_MAX);
		if (spec.filter.n) {
			unsigned depth = 0;

			CHECK(spec.filter.pos + spec.filter.len <= len);
			for (uint32_t k = 0; k < spec.filter.n; k++) {
				const struct filter_insn *fi = &spec.filter.insn[k];

				if (fi->op == FIL_CMP || fi->op == FIL_STR || fi->op == FIL_NZ) {
					CHECK(fi->name < USC_FILTER_STRS);
					CHECK(memchr(spec.filter.strs + fi->name, 0,
						     USC_FILTER_STRS - fi->name) != NULL);
					depth++;
				} else if (fi->op == FIL_AND || fi->op == FIL_OR) {
					CHECK(depth >= 2);
					depth--;
				} else {
					CHECK(fi->op == FIL_NOT && depth >= 1);
				}
			}
			CHECK(depth == 1);
		}
	}

	/* deterministic, and the same with no error struct */
	CHECK(usc_probe_parse(text, &again, NULL) == ret);
	if (!ret)
		CHECK(!memcmp(&spec, &again, sizeof(spec)));

	free(text);
	return 0;
}
