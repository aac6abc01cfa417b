/* libFuzzer target for the USDT argument-spec parser.
 *
 * Feeds arbitrary text (up to its first NUL) to usdt_parse_args with no ELF
 * file and checks what it promises: failures carry a message and a position
 * inside the text and report no arguments; successes give at most `max`
 * arguments named arg1..argN, one per space-separated token, each a bounded,
 * END-terminated program in the USDT shape (load [ADD_REG] store END) whose
 * store size matches its u/s type. Parsing is deterministic. Any violation
 * aborts. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "usdt/usdt.h"

#define CHECK(cond)                                                             \
	do {                                                                    \
		if (!(cond)) {                                                  \
			fprintf(stderr, "fuzz_usdt_args: invariant failed: %s (line %d)\n", \
				#cond, __LINE__);                               \
			abort();                                                \
		}                                                               \
	} while (0)

#define CAP (USDT_MAX_ARGS + 4)

static struct usc_fetcharg args[CAP], again[CAP];

static unsigned count_tokens(const char *s)
{
	unsigned n = 0;

	for (size_t i = 0; s[i]; i++)
		if (s[i] != ' ' && (i == 0 || s[i - 1] == ' '))
			n++;
	return n;
}

static void check_arg(const struct usc_fetcharg *a, unsigned idx, const char *text, size_t len)
{
	const struct fetch_insn *in = a->insn;
	unsigned n = a->ninsn, i = 0, size;
	char name[16];

	snprintf(name, sizeof(name), "arg%u", idx + 1);
	CHECK(!strcmp(a->name, name));
	CHECK(!a->named && !a->type_given);
	CHECK((a->type >= USC_T_U8 && a->type <= USC_T_U64) ||
	      (a->type >= USC_T_S8 && a->type <= USC_T_S64));
	size = fetch_type_size(a->type);
	CHECK((size_t)a->pos + a->len <= len && a->len >= 3);
	CHECK(a->pos == 0 || text[a->pos - 1] == ' ');
	CHECK(text[a->pos] != ' ' && (text[a->pos + a->len] == 0 || text[a->pos + a->len] == ' '));
	CHECK(memchr(text + a->pos, ' ', a->len) == NULL);
	CHECK((text[a->pos] == '-') == fetch_type_is_signed(a->type));

	CHECK(n >= 3 && n <= 4 && n <= USC_FETCH_MAX);
	CHECK(in[n - 1].op == FOP_END);
	for (unsigned k = 0; k + 1 < n; k++)
		CHECK(in[k].op != FOP_END);
	/* load: no ELF file, so never FOP_VADDR */
	CHECK(in[i].op == FOP_REG || in[i].op == FOP_IMM);
	if (in[i].op == FOP_REG)
		CHECK(in[i].reg < USC_REG_IP);
	i++;
	if (in[i].op == FOP_ADD_REG) {
		CHECK(in[i].reg < USC_REG_IP && in[i].reg != USC_REG_SP);
		CHECK(in[i].size == 1 || in[i].size == 2 || in[i].size == 4 || in[i].size == 8);
		i++;
	}
	CHECK(in[i].op == FOP_ST_RAW || in[i].op == FOP_ST_MEM);
	CHECK(in[i].size == size);
	if (in[i].op == FOP_ST_RAW)
		CHECK(i == 1);		/* a register or an immediate */
	if (in[0].op == FOP_IMM && in[i].op == FOP_ST_MEM)
		CHECK(in[0].imm == 0 && in[1].op == FOP_ADD_REG);	/* (,%idx,s) */
	i++;
	CHECK(in[i].op == FOP_END && i + 1 == n);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = malloc(size + 1);
	struct usdt_arg_error err = {.pos = (size_t)-1, .msg = NULL};
	unsigned n = 999, m = 999, max;
	size_t len;
	int ret;

	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = 0;
	len = strlen(text);
	/* a small max now and then, to exercise the limit */
	max = size && (data[size - 1] & 0x80) ? data[size - 1] % 4 : USDT_MAX_ARGS;

	ret = usdt_parse_args(text, NULL, args, max, &n, &err);
	CHECK(ret == 0 || ret == -EINVAL);
	if (ret) {
		CHECK(n == 0);
		CHECK(err.msg != NULL && err.msg[0] != 0);
		CHECK(err.pos <= len);
	} else {
		CHECK(n <= max && n == count_tokens(text));
		for (unsigned i = 0; i < n; i++) {
			check_arg(&args[i], i, text, len);
			if (i)
				CHECK(args[i].pos > args[i - 1].pos + args[i - 1].len);
		}
	}

	/* deterministic, and the same with no error struct */
	CHECK(usdt_parse_args(text, NULL, again, max, &m, NULL) == ret);
	CHECK(m == n);
	if (!ret)
		for (unsigned i = 0; i < n; i++)
			CHECK(!memcmp(&args[i], &again[i], sizeof(args[i])));

	free(text);
	return 0;
}
