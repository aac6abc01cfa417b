/* Unit tests for the probe-language parser (src/probe/parse.c).
 *
 * Table-driven: every valid case states the whole parse (location fields,
 * every argument's name, type and exact fetch program); every invalid case
 * states the error code and the byte offset the caret would point at. Each
 * table row runs as its own cmocka test named after its input. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <errno.h>
#include <string.h>

#include <cmocka.h>

#include "probe/probe.h"

/* Specs are ~20 KiB; failed cmocka assertions longjmp out of a test, so
 * they live in static storage rather than on the heap. */
static struct usc_probe_spec spec_a, spec_b;

/* ---- expected fetch programs ------------------------------------------- */

struct xi {
	uint8_t op, size, reg, bf_width, bf_offset;
	int64_t imm;
};

#define I_REG(r)	{FOP_REG, 0, USC_REG_##r, 0, 0, 0}
#define I_STACK(n)	{FOP_STACK, 0, 0, 0, 0, (n)}
#define I_STACKP	{FOP_STACKP, 0, 0, 0, 0, 0}
#define I_RETVAL	{FOP_RETVAL, 0, 0, 0, 0, 0}
#define I_COMM		{FOP_COMM, 0, 0, 0, 0, 0}
#define I_MEM(a)	{FOP_MEM, 0, 0, 0, 0, (a)}
#define I_FOFFS(a)	{FOP_FOFFS, 0, 0, 0, 0, (a)}
#define I_DEREF(o)	{FOP_DEREF, 0, 0, 0, 0, (o)}
#define I_RAW(s)	{FOP_ST_RAW, (s), 0, 0, 0, 0}
#define I_STMEM(s, o)	{FOP_ST_MEM, (s), 0, 0, 0, (o)}
#define I_STR(o)	{FOP_ST_STRING, 0, 0, 0, 0, (o)}
#define I_BF(s, w, o)	{FOP_MOD_BF, (s), 0, (w), (o), 0}
#define I_END		{FOP_END, 0, 0, 0, 0, 0}

struct xarg {
	const char *name;
	bool named;
	enum usc_type type;
	bool type_given;
	struct xi in[USC_FETCH_MAX];	/* up to and including I_END */
};

struct vcase {
	const char *text;
	bool is_return;
	const char *event;		/* NULL: no event given */
	const char *module;		/* NULL: "" */
	int module_pos;
	enum usc_loc_kind kind;
	int loc_pos;
	const char *symbol;		/* NULL: "" */
	bool is_glob;
	bool has_offset;
	uint64_t offset;
	uint64_t address;
	unsigned nargs;
	struct xarg a[8];
};

#define SYM(pos, s)	.kind = USC_LOC_SYMBOL, .loc_pos = (pos), .symbol = (s)
#define ADDR(pos, v)	.kind = USC_LOC_ADDRESS, .loc_pos = (pos), .address = (v)

static const struct vcase valid_cases[] = {
	/* ---- the probe head ---- */
	{"main", SYM(0, "main")},
	{"p main", SYM(2, "main")},
	{"r main", .is_return = true, SYM(2, "main")},
	{"p:ev main", .event = "ev", SYM(5, "main")},
	{"r:ev main", .is_return = true, .event = "ev", SYM(5, "main")},
	{"p:foo", SYM(2, "foo")},
	{"p:ev\tmain\t%rdi", .event = "ev", SYM(5, "main"), .nargs = 1,
	 .a = {{"arg1", false, USC_T_X64, false, {I_REG(DI), I_RAW(8), I_END}}}},
	{"  main  ", SYM(2, "main")},
	{"r:libc:malloc ptr=$retval", .is_return = true, .module = "libc", .module_pos = 2,
	 SYM(7, "malloc"), .nargs = 1,
	 .a = {{"ptr", true, USC_T_X64, false, {I_RETVAL, I_RAW(8), I_END}}}},
	{"libc:getaddrinfo host=+0($arg1):string", .module = "libc", .module_pos = 0,
	 SYM(5, "getaddrinfo"), .nargs = 1,
	 .a = {{"host", true, USC_T_STRING, true, {I_REG(DI), I_STR(0), I_END}}}},
	{"handle size=+40($arg1):s64 path=+4($arg1):string", SYM(0, "handle"), .nargs = 2,
	 .a = {{"size", true, USC_T_S64, true, {I_REG(DI), I_STMEM(8, 40), I_END}},
	       {"path", true, USC_T_STRING, true, {I_REG(DI), I_STR(4), I_END}}}},
	{"p:mid app:parse+0x1f %rax:s32", .event = "mid", .module = "app", .module_pos = 6,
	 SYM(10, "parse"), .has_offset = true, .offset = 0x1f, .nargs = 1,
	 .a = {{"arg1", false, USC_T_S32, true, {I_REG(AX), I_RAW(4), I_END}}}},
	{"p:mid app:ns::f", .event = "mid", .module = "app", .module_pos = 6, SYM(10, "ns::f")},

	/* ---- locations ---- */
	{"/usr/lib/x.so:foo", .module = "/usr/lib/x.so", .module_pos = 0, SYM(14, "foo")},
	{"p:/usr/lib/x.so:foo+4", .module = "/usr/lib/x.so", .module_pos = 2, SYM(16, "foo"),
	 .has_offset = true, .offset = 4},
	{"app:0x1139", .module = "app", .module_pos = 0, ADDR(4, 0x1139)},
	{"0x401000", ADDR(0, 0x401000)},
	{"4198400", ADDR(0, 4198400)},
	{"r 0x401000", .is_return = true, ADDR(2, 0x401000)},
	{"foo+010", SYM(0, "foo"), .has_offset = true, .offset = 8},
	{"foo+31", SYM(0, "foo"), .has_offset = true, .offset = 31},
	{"foo+0", SYM(0, "foo"), .has_offset = true, .offset = 0},
	{"foo+0X1F", SYM(0, "foo"), .has_offset = true, .offset = 31},
	{"str*", SYM(0, "str*"), .is_glob = true},
	{"*_handler", SYM(0, "*_handler"), .is_glob = true},
	{"handle_[ab]?", SYM(0, "handle_[ab]?"), .is_glob = true},
	{"libc:mem*", .module = "libc", .module_pos = 0, SYM(5, "mem*"), .is_glob = true},
	{"memcpy@GLIBC_2.14", SYM(0, "memcpy@GLIBC_2.14")},
	{"memcpy@@GLIBC_2.14+4", SYM(0, "memcpy@@GLIBC_2.14"), .has_offset = true, .offset = 4},
	{"_start", SYM(0, "_start")},
	{".L_local", SYM(0, ".L_local")},
	/* C++ scope is not a module separator */
	{"ns::Class::method", SYM(0, "ns::Class::method")},
	{"p:ev ns::Class::method x=%rdi", .event = "ev", SYM(5, "ns::Class::method"), .nargs = 1,
	 .a = {{"x", true, USC_T_X64, false, {I_REG(DI), I_RAW(8), I_END}}}},
	{"r:ns::Class::method", .is_return = true, SYM(2, "ns::Class::method")},
	{"app:ns::Class::method", .module = "app", .module_pos = 0, SYM(4, "ns::Class::method")},
	{"std::vector<int>::push_back", SYM(0, "std::vector<int>::push_back")},
	/* a namespace called p or r is still C++ scope, not the p:/r: prefix */
	{"p::run", SYM(0, "p::run")},
	/* C++ signatures: spaces, commas and '*' inside the parameter list are
	 * the name's; glob characters count before it */
	{"ns::Class::method(int)", SYM(0, "ns::Class::method(int)")},
	{"ns::f(char const*, int) x=%rdi", SYM(0, "ns::f(char const*, int)"), .nargs = 1,
	 .a = {{"x", true, USC_T_X64, false, {I_REG(DI), I_RAW(8), I_END}}}},
	{"p:ev ns::f(int, long) %rsi", .event = "ev", SYM(5, "ns::f(int, long)"), .nargs = 1,
	 .a = {{"arg1", false, USC_T_X64, false, {I_REG(SI), I_RAW(8), I_END}}}},
	{"r ns::f(int,  long)", .is_return = true, SYM(2, "ns::f(int,  long)")},
	{"r:ns::f(int, long)", .is_return = true, SYM(2, "ns::f(int, long)")},
	{"app:ns::f(int, long)", .module = "app", .module_pos = 0, SYM(4, "ns::f(int, long)")},
	{"ns::Class::method*", SYM(0, "ns::Class::method*"), .is_glob = true},
	{"ns::*(int)", SYM(0, "ns::*(int)"), .is_glob = true},
	{"std::vector<int, std::allocator<int> >::push_back(int const&)",
	 SYM(0, "std::vector<int, std::allocator<int> >::push_back(int const&)")},
	{"ns::operator+(ns::X const&, ns::X const&)+4",
	 SYM(0, "ns::operator+(ns::X const&, ns::X const&)"), .has_offset = true, .offset = 4},
	{"ns::operator<<(std::ostream&, ns::X const&)",
	 SYM(0, "ns::operator<<(std::ostream&, ns::X const&)")},
	{"ns::X::operator()(int)", SYM(0, "ns::X::operator()(int)")},
	{"ns::X::operator*()", SYM(0, "ns::X::operator*()")},
	{"ns::X::operator new[](unsigned long)", SYM(0, "ns::X::operator new[](unsigned long)")},
	{"(anonymous namespace)::helper(int) %rdi",
	 SYM(0, "(anonymous namespace)::helper(int)"), .nargs = 1,
	 .a = {{"arg1", false, USC_T_X64, false, {I_REG(DI), I_RAW(8), I_END}}}},
	{"ns::X::~X()", SYM(0, "ns::X::~X()")},
	/* Go: package paths, methods on pointer receivers (the '*' is inside
	 * parentheses: not a glob) */
	{"go/parser.ParseFile", SYM(0, "go/parser.ParseFile")},
	{"main.(*Controller).syncDeployment", SYM(0, "main.(*Controller).syncDeployment")},
	{"/usr/bin/gofmt:go/printer.(*Config).Fprint+4", .module = "/usr/bin/gofmt", .module_pos = 0,
	 SYM(15, "go/printer.(*Config).Fprint"), .has_offset = true, .offset = 4},
	{"net/http.*", SYM(0, "net/http.*"), .is_glob = true},
	/* a receiver is no C++ parameter list: a glob after it is a glob */
	{"main.(*Controller).sync*", SYM(0, "main.(*Controller).sync*"), .is_glob = true},

	/* ---- registers and their aliases ---- */
	{"main %rax %eax %ax %al %r8d %sil %rip %rsp", SYM(0, "main"), .nargs = 8,
	 .a = {{"arg1", false, USC_T_X64, false, {I_REG(AX), I_RAW(8), I_END}},
	       {"arg2", false, USC_T_X32, false, {I_REG(AX), I_RAW(4), I_END}},
	       {"arg3", false, USC_T_X16, false, {I_REG(AX), I_RAW(2), I_END}},
	       {"arg4", false, USC_T_X8, false, {I_REG(AX), I_RAW(1), I_END}},
	       {"arg5", false, USC_T_X32, false, {I_REG(R8), I_RAW(4), I_END}},
	       {"arg6", false, USC_T_X8, false, {I_REG(SI), I_RAW(1), I_END}},
	       {"arg7", false, USC_T_X64, false, {I_REG(IP), I_RAW(8), I_END}},
	       {"arg8", false, USC_T_X64, false, {I_REG(SP), I_RAW(8), I_END}}}},
	{"main %r15 %r15d %r15w %r15b %rbp %bpl %dil %r9", SYM(0, "main"), .nargs = 8,
	 .a = {{"arg1", false, USC_T_X64, false, {I_REG(R15), I_RAW(8), I_END}},
	       {"arg2", false, USC_T_X32, false, {I_REG(R15), I_RAW(4), I_END}},
	       {"arg3", false, USC_T_X16, false, {I_REG(R15), I_RAW(2), I_END}},
	       {"arg4", false, USC_T_X8, false, {I_REG(R15), I_RAW(1), I_END}},
	       {"arg5", false, USC_T_X64, false, {I_REG(BP), I_RAW(8), I_END}},
	       {"arg6", false, USC_T_X8, false, {I_REG(BP), I_RAW(1), I_END}},
	       {"arg7", false, USC_T_X8, false, {I_REG(DI), I_RAW(1), I_END}},
	       {"arg8", false, USC_T_X64, false, {I_REG(R9), I_RAW(8), I_END}}}},
	{"main %eax:u64 %al:s32 %rdi:u8", SYM(0, "main"), .nargs = 3,
	 .a = {{"arg1", false, USC_T_U64, true, {I_REG(AX), I_RAW(8), I_END}},
	       {"arg2", false, USC_T_S32, true, {I_REG(AX), I_RAW(4), I_END}},
	       {"arg3", false, USC_T_U8, true, {I_REG(DI), I_RAW(1), I_END}}}},

	/* ---- $-variables ---- */
	{"main $arg1 $arg2 $arg3 $arg4 $arg5 $arg6", SYM(0, "main"), .nargs = 6,
	 .a = {{"arg1", false, USC_T_X64, false, {I_REG(DI), I_RAW(8), I_END}},
	       {"arg2", false, USC_T_X64, false, {I_REG(SI), I_RAW(8), I_END}},
	       {"arg3", false, USC_T_X64, false, {I_REG(DX), I_RAW(8), I_END}},
	       {"arg4", false, USC_T_X64, false, {I_REG(CX), I_RAW(8), I_END}},
	       {"arg5", false, USC_T_X64, false, {I_REG(R8), I_RAW(8), I_END}},
	       {"arg6", false, USC_T_X64, false, {I_REG(R9), I_RAW(8), I_END}}}},
	{"main $stack $stack3 $comm $stack0 $stack1024", SYM(0, "main"), .nargs = 5,
	 .a = {{"arg1", false, USC_T_X64, false, {I_STACKP, I_RAW(8), I_END}},
	       {"arg2", false, USC_T_X64, false, {I_STACK(3), I_RAW(8), I_END}},
	       {"arg3", false, USC_T_STRING, false, {I_COMM, I_END}},
	       {"arg4", false, USC_T_X64, false, {I_STACK(0), I_RAW(8), I_END}},
	       {"arg5", false, USC_T_X64, false, {I_STACK(1024), I_RAW(8), I_END}}}},
	{"main c=$comm:string", SYM(0, "main"), .nargs = 1,
	 .a = {{"c", true, USC_T_STRING, true, {I_COMM, I_END}}}},
	{"r main $retval $retval:s32 $retval:string", .is_return = true, SYM(2, "main"), .nargs = 3,
	 .a = {{"arg1", false, USC_T_X64, false, {I_RETVAL, I_RAW(8), I_END}},
	       {"arg2", false, USC_T_S32, true, {I_RETVAL, I_RAW(4), I_END}},
	       {"arg3", false, USC_T_STRING, true, {I_RETVAL, I_STR(0), I_END}}}},
	{"r main $arg1 $stack2", .is_return = true, SYM(2, "main"), .nargs = 2,
	 .a = {{"arg1", false, USC_T_X64, false, {I_REG(DI), I_RAW(8), I_END}},
	       {"arg2", false, USC_T_X64, false, {I_STACK(2), I_RAW(8), I_END}}}},

	/* ---- memory ---- */
	{"main @0x1000 @+0x2000 @4096:u32 @+0:s16", SYM(0, "main"), .nargs = 4,
	 .a = {{"arg1", false, USC_T_X64, false, {I_MEM(0x1000), I_STMEM(8, 0), I_END}},
	       {"arg2", false, USC_T_X64, false, {I_FOFFS(0x2000), I_STMEM(8, 0), I_END}},
	       {"arg3", false, USC_T_U32, true, {I_MEM(4096), I_STMEM(4, 0), I_END}},
	       {"arg4", false, USC_T_S16, true, {I_FOFFS(0), I_STMEM(2, 0), I_END}}}},
	{"main @0x1000:string", SYM(0, "main"), .nargs = 1,
	 .a = {{"arg1", false, USC_T_STRING, true, {I_MEM(0x1000), I_STR(0), I_END}}}},
	{"main +4(@0x1000):u8 -8(@+0x10)", SYM(0, "main"), .nargs = 2,
	 .a = {{"arg1", false, USC_T_U8, true, {I_MEM(0x1000), I_DEREF(0), I_STMEM(1, 4), I_END}},
	       {"arg2", false, USC_T_X64, false, {I_FOFFS(0x10), I_DEREF(0), I_STMEM(8, -8), I_END}}}},
	{"main +8(+16(-4(%rdi)))", SYM(0, "main"), .nargs = 1,
	 .a = {{"arg1", false, USC_T_X64, false,
		{I_REG(DI), I_DEREF(-4), I_DEREF(16), I_STMEM(8, 8), I_END}}}},
	{"main -8(%rbp):u16 +0x7fffffff(%rsp) -2147483647(%rsp)", SYM(0, "main"), .nargs = 3,
	 .a = {{"arg1", false, USC_T_U16, true, {I_REG(BP), I_STMEM(2, -8), I_END}},
	       {"arg2", false, USC_T_X64, false, {I_REG(SP), I_STMEM(8, 0x7fffffff), I_END}},
	       {"arg3", false, USC_T_X64, false, {I_REG(SP), I_STMEM(8, -2147483647), I_END}}}},
	{"main +010($stack):s8 +0($stack2)", SYM(0, "main"), .nargs = 2,
	 .a = {{"arg1", false, USC_T_S8, true, {I_STACKP, I_STMEM(1, 8), I_END}},
	       {"arg2", false, USC_T_X64, false, {I_STACK(2), I_STMEM(8, 0), I_END}}}},

	/* ---- strings ---- */
	{"main $arg1:string %rsi:ustring +0(+8($arg1)):string", SYM(0, "main"), .nargs = 3,
	 .a = {{"arg1", false, USC_T_STRING, true, {I_REG(DI), I_STR(0), I_END}},
	       {"arg2", false, USC_T_USTRING, true, {I_REG(SI), I_STR(0), I_END}},
	       {"arg3", false, USC_T_STRING, true, {I_REG(DI), I_DEREF(8), I_STR(0), I_END}}}},

	/* ---- types ---- */
	{"main %rdi:u8 %rdi:u16 %rdi:u32 %rdi:u64 %rdi:s8 %rdi:s16 %rdi:x8 %rdi:x16", SYM(0, "main"),
	 .nargs = 8,
	 .a = {{"arg1", false, USC_T_U8, true, {I_REG(DI), I_RAW(1), I_END}},
	       {"arg2", false, USC_T_U16, true, {I_REG(DI), I_RAW(2), I_END}},
	       {"arg3", false, USC_T_U32, true, {I_REG(DI), I_RAW(4), I_END}},
	       {"arg4", false, USC_T_U64, true, {I_REG(DI), I_RAW(8), I_END}},
	       {"arg5", false, USC_T_S8, true, {I_REG(DI), I_RAW(1), I_END}},
	       {"arg6", false, USC_T_S16, true, {I_REG(DI), I_RAW(2), I_END}},
	       {"arg7", false, USC_T_X8, true, {I_REG(DI), I_RAW(1), I_END}},
	       {"arg8", false, USC_T_X16, true, {I_REG(DI), I_RAW(2), I_END}}}},
	{"main %rdi:x32 %rdi:x64 %rdi:s64 %di:symbol +8(%rdi):symbol", SYM(0, "main"), .nargs = 5,
	 .a = {{"arg1", false, USC_T_X32, true, {I_REG(DI), I_RAW(4), I_END}},
	       {"arg2", false, USC_T_X64, true, {I_REG(DI), I_RAW(8), I_END}},
	       {"arg3", false, USC_T_S64, true, {I_REG(DI), I_RAW(8), I_END}},
	       {"arg4", false, USC_T_SYMBOL, true, {I_REG(DI), I_RAW(8), I_END}},
	       {"arg5", false, USC_T_SYMBOL, true, {I_REG(DI), I_STMEM(8, 8), I_END}}}},
	/* bitfields: the store reads the container, MOD_BF carries the geometry */
	{"main %di:b4@2/32 %edi:b8@8/32 +2($arg2):b8@0/16 $arg1:b1@63/64 $arg1:b8@0/8", SYM(0, "main"),
	 .nargs = 5,
	 .a = {{"arg1", false, USC_T_BITFIELD, true, {I_REG(DI), I_RAW(4), I_BF(4, 4, 2), I_END}},
	       {"arg2", false, USC_T_BITFIELD, true, {I_REG(DI), I_RAW(4), I_BF(4, 8, 8), I_END}},
	       {"arg3", false, USC_T_BITFIELD, true, {I_REG(SI), I_STMEM(2, 2), I_BF(2, 8, 0), I_END}},
	       {"arg4", false, USC_T_BITFIELD, true, {I_REG(DI), I_RAW(8), I_BF(8, 1, 63), I_END}},
	       {"arg5", false, USC_T_BITFIELD, true, {I_REG(DI), I_RAW(1), I_BF(1, 8, 0), I_END}}}},

	/* ---- names ---- */
	{"main %rdi x=%rsi %rdx", SYM(0, "main"), .nargs = 3,
	 .a = {{"arg1", false, USC_T_X64, false, {I_REG(DI), I_RAW(8), I_END}},
	       {"x", true, USC_T_X64, false, {I_REG(SI), I_RAW(8), I_END}},
	       {"arg3", false, USC_T_X64, false, {I_REG(DX), I_RAW(8), I_END}}}},
	{"main _=%rdi A_9=%rsi arg9=%rdx", SYM(0, "main"), .nargs = 3,
	 .a = {{"_", true, USC_T_X64, false, {I_REG(DI), I_RAW(8), I_END}},
	       {"A_9", true, USC_T_X64, false, {I_REG(SI), I_RAW(8), I_END}},
	       {"arg9", true, USC_T_X64, false, {I_REG(DX), I_RAW(8), I_END}}}},
	{"main common=%rdi probe=%rsi", SYM(0, "main"), .nargs = 2,
	 .a = {{"common", true, USC_T_X64, false, {I_REG(DI), I_RAW(8), I_END}},
	       {"probe", true, USC_T_X64, false, {I_REG(SI), I_RAW(8), I_END}}}},
};

static void check_valid(void **state)
{
	const struct vcase *c = *state;
	struct usc_probe_spec *spec = &spec_a;
	struct usc_parse_error err = {.code = USC_PERR_NR, .pos = 12345};
	int ret;

	ret = usc_probe_parse(c->text, spec, &err);
	if (ret)
		fail_msg("\"%s\": unexpected error %d (%s) at %zu", c->text, err.code,
			 usc_parse_strerror(err.code), err.pos);
	assert_int_equal(err.code, USC_PERR_OK);

	assert_string_equal(spec->text, c->text);
	assert_int_equal(spec->is_return, c->is_return);
	assert_int_equal(spec->event_given, c->event != NULL);
	assert_string_equal(spec->event, c->event ? c->event : "");
	assert_string_equal(spec->module, c->module ? c->module : "");
	if (c->module)
		assert_int_equal(spec->module_pos, c->module_pos);
	assert_int_equal(spec->loc_kind, c->kind);
	assert_int_equal(spec->loc_pos, c->loc_pos);
	assert_string_equal(spec->symbol, c->symbol ? c->symbol : "");
	assert_int_equal(spec->is_glob, c->is_glob);
	assert_int_equal(spec->has_offset, c->has_offset);
	assert_int_equal(spec->offset, c->offset);
	assert_int_equal(spec->address, c->address);
	assert_int_equal(spec->nargs, c->nargs);

	for (unsigned i = 0; i < c->nargs; i++) {
		const struct xarg *x = &c->a[i];
		struct usc_fetcharg bound;
		const struct usc_fetcharg *a = &spec->args[i];
		unsigned n = 0;

		/* $argN parses to FOP_ARG; on a function it binds to a SysV register */
		if (spec->loc_kind != USC_LOC_USDT) {
			assert_int_equal(probe_bind_arg(a, NULL, 0, &bound), 0);
			a = &bound;
		}

		while (n < USC_FETCH_MAX && x->in[n].op != FOP_END)
			n++;
		n++;	/* the FOP_END */
		if (strcmp(a->name, x->name))
			fail_msg("arg %u: name \"%s\", expected \"%s\"", i, a->name, x->name);
		if (a->named != x->named || a->type != x->type || a->type_given != x->type_given)
			fail_msg("arg %u (%s): named/type/type_given %d/%s/%d, expected %d/%s/%d", i,
				 a->name, a->named, fetch_type_name(a->type), a->type_given,
				 x->named, fetch_type_name(x->type), x->type_given);
		if (a->ninsn != n)
			fail_msg("arg %u (%s): %u insns, expected %u", i, a->name, a->ninsn, n);
		for (unsigned k = 0; k < n; k++) {
			const struct fetch_insn *g = &a->insn[k];
			const struct xi *e = &x->in[k];

			if (g->op != e->op || g->size != e->size || g->reg != e->reg ||
			    g->bf_width != e->bf_width || g->bf_offset != e->bf_offset ||
			    g->imm != e->imm)
				fail_msg("arg %u (%s) insn %u: {op %u size %u reg %u bf %u@%u imm %lld}, "
					 "expected {op %u size %u reg %u bf %u@%u imm %lld}",
					 i, a->name, k, g->op, g->size, g->reg, g->bf_width, g->bf_offset,
					 (long long)g->imm, e->op, e->size, e->reg, e->bf_width,
					 e->bf_offset, (long long)e->imm);
		}
	}
}

/* ---- invalid probes ------------------------------------------------------ */

struct icase {
	const char *text;
	enum usc_parse_err code;
	size_t pos;
};

static const struct icase invalid_cases[] = {
	{"", USC_PERR_EMPTY, 0},
	{" \t ", USC_PERR_EMPTY, 0},
	{"p:", USC_PERR_NO_LOCATION, 2},
	{"p", USC_PERR_NO_LOCATION, 1},
	{"r  ", USC_PERR_NO_LOCATION, 3},
	{"p:1ev main", USC_PERR_BAD_EVENT, 2},
	{"p:e-v main", USC_PERR_BAD_EVENT, 2},
	{"p:e0123456789012345678901234567890123456789012345678901234567890123 main",
	 USC_PERR_BAD_EVENT, 2},
	{"+8(%di)", USC_PERR_NO_LOCATION, 0},
	{"x=%di", USC_PERR_NO_LOCATION, 0},
	{"p %rdi", USC_PERR_BAD_SYMBOL, 2},
	{"fo#o", USC_PERR_BAD_SYMBOL, 2},
	/* an unclosed parameter list takes the rest: the caret on the mistake */
	{"ns::f(int x=%rdi", USC_PERR_BAD_SYMBOL, 11},
	{"ns::f(int)+x", USC_PERR_BAD_OFFSET, 11},
	{"lib:", USC_PERR_NO_LOCATION, 4},
	{":foo", USC_PERR_BAD_MODULE, 0},
	/* types */
	{"main %di:u33", USC_PERR_BAD_TYPE, 9},
	{"main %di:", USC_PERR_BAD_TYPE, 9},
	{"main x=%di:int", USC_PERR_BAD_TYPE, 11},
	{"main %di:b4@2/32x", USC_PERR_BAD_BITFIELD, 9},
	{"main %di:b0@0/32", USC_PERR_BAD_BITFIELD, 9},
	{"main %di:b8@30/32", USC_PERR_BAD_BITFIELD, 9},
	{"main %di:b4@0/24", USC_PERR_BAD_BITFIELD, 9},
	{"main %di:b65@0/64", USC_PERR_BAD_BITFIELD, 9},
	{"main %di:b@0/32", USC_PERR_BAD_BITFIELD, 9},
	/* sscanf's %u takes a sign and wraps: these must not slip through */
	{"main %di:b4@-1/32", USC_PERR_BAD_BITFIELD, 9},
	{"main %di:b4294967295@1/32", USC_PERR_BAD_BITFIELD, 9},
	{"main %di:b4@4294967298/32", USC_PERR_BAD_BITFIELD, 9},
	/* $-variables */
	{"main $arg0", USC_PERR_BAD_ARG_INDEX, 5},
	{"main $arg10", USC_PERR_BAD_ARG_INDEX, 5},
	{"r:main $retval10", USC_PERR_BAD_ARG_INDEX, 7},
	{"r:main $retval0", USC_PERR_BAD_ARG_INDEX, 7},
	{"main $retval2", USC_PERR_RETVAL_ON_ENTRY, 5},
	{"main $goidx", USC_PERR_BAD_VAR, 5},
	{"main $arg1x", USC_PERR_BAD_ARG_INDEX, 5},
	{"main $retval", USC_PERR_RETVAL_ON_ENTRY, 5},
	{"p main x=$retval", USC_PERR_RETVAL_ON_ENTRY, 9},
	{"main $foo", USC_PERR_BAD_VAR, 5},
	{"main $", USC_PERR_BAD_VAR, 5},
	{"main $stack1025", USC_PERR_BAD_NUMBER, 11},
	{"main $comm:u32", USC_PERR_COMM_TYPE, 5},
	{"main $comm:ustring", USC_PERR_COMM_TYPE, 5},
	{"main +0($comm)", USC_PERR_COMM_TYPE, 5},
	/* registers */
	{"main %xyz", USC_PERR_BAD_REG, 5},
	{"main %", USC_PERR_BAD_REG, 5},
	{"main %RAX", USC_PERR_BAD_REG, 5},
	{"main %rax)", USC_PERR_BAD_SPACE, 9},
	/* dereferences and memory */
	{"main +8($arg1", USC_PERR_NO_CLOSE_PAREN, 13},
	{"main +8$arg1", USC_PERR_BAD_DEREF, 7},
	{"main +8()", USC_PERR_BAD_FETCHARG, 8},
	{"main +(%di)", USC_PERR_BAD_NUMBER, 6},
	{"main +2147483648(%di)", USC_PERR_BAD_NUMBER, 6},
	{"main @", USC_PERR_BAD_NUMBER, 6},
	{"main @0xZZ", USC_PERR_BAD_NUMBER, 6},
	{"main @+x", USC_PERR_BAD_NUMBER, 7},
	/* offsets and addresses */
	{"foo+", USC_PERR_BAD_OFFSET, 4},
	{"foo+0xZZ", USC_PERR_BAD_OFFSET, 4},
	{"foo+08", USC_PERR_BAD_OFFSET, 4},
	{"foo+8x", USC_PERR_BAD_OFFSET, 4},
	{"foo+0x1f+1", USC_PERR_TRAILING, 8},
	{"0x12zz", USC_PERR_BAD_NUMBER, 0},
	{"app:0x12zz", USC_PERR_BAD_NUMBER, 4},
	{"0x1000+4", USC_PERR_TRAILING, 6},
	{"08", USC_PERR_BAD_NUMBER, 0},
	{"18446744073709551616", USC_PERR_BAD_NUMBER, 0},
	/* fetchargs */
	{"foo #bar", USC_PERR_BAD_FETCHARG, 4},
	{"main r->", USC_PERR_BAD_VAR_EXPR, 6},
	{"main r-x", USC_PERR_BAD_VAR_EXPR, 6},
	{"main a[", USC_PERR_BAD_VAR_EXPR, 6},
	{"main *9", USC_PERR_BAD_VAR_EXPR, 6},
	{"main $params:u32", USC_PERR_PARAMS_ALONE, 12},
	{"main x=$params", USC_PERR_PARAMS_ALONE, 5},
	{"main +8($params)", USC_PERR_PARAMS_ALONE, 8},
	{"main a=%di a=%si", USC_PERR_DUP_ARG_NAME, 11},
	{"main arg2=%di %si", USC_PERR_DUP_ARG_NAME, 14},
	{"main %di arg1=%si", USC_PERR_DUP_ARG_NAME, 9},
	{"main common_pid=%di", USC_PERR_BAD_ARG_NAME, 5},
	{"main __probe_ip=%di", USC_PERR_BAD_ARG_NAME, 5},
	{"main 1x=%di", USC_PERR_BAD_ARG_NAME, 5},
	{"main =%di", USC_PERR_BAD_ARG_NAME, 5},
	{"main a234567890123456789012345678901234567890123456789012345678901234=%di",
	 USC_PERR_BAD_ARG_NAME, 5},
};

static void check_invalid(void **state)
{
	const struct icase *c = *state;
	struct usc_probe_spec *spec = &spec_a;
	struct usc_parse_error err = {.code = USC_PERR_OK, .pos = 12345};
	int ret;

	ret = usc_probe_parse(c->text, spec, &err);
	if (ret == 0)
		fail_msg("\"%s\": accepted, expected %s at %zu", c->text, usc_parse_strerror(c->code),
			 c->pos);
	assert_int_equal(ret, -22 /* -EINVAL */);
	if (err.code != c->code || err.pos != c->pos)
		fail_msg("\"%s\": error %d (%s) at %zu, expected %d (%s) at %zu", c->text, err.code,
			 usc_parse_strerror(err.code), err.pos, c->code, usc_parse_strerror(c->code),
			 c->pos);
	/* and no error struct is fine too */
	assert_int_equal(usc_probe_parse(c->text, spec, NULL), -22);
}

/* ---- generated inputs ---------------------------------------------------- */

/* generated probe texts (static, like the specs) */
static char gen[8192];

static char *repeat_args(const char *head, const char *arg, unsigned n)
{
	size_t len = strlen(head) + n * (strlen(arg) + 1) + 1;
	char *s = gen;

	assert_true(len <= sizeof(gen));
	strcpy(s, head);
	for (unsigned i = 0; i < n; i++) {
		strcat(s, " ");
		strcat(s, arg);
	}
	return s;
}

static void expect_error(const char *text, enum usc_parse_err code, size_t pos)
{
	struct usc_probe_spec *spec = &spec_b;
	struct usc_parse_error err = {0};

	if (usc_probe_parse(text, spec, &err) == 0)
		fail_msg("\"%.60s...\": accepted, expected error %d at %zu", text, code, pos);
	if (err.code != code || err.pos != pos)
		fail_msg("\"%.60s...\": error %d (%s) at %zu, expected %d (%s) at %zu", text, err.code,
			 usc_parse_strerror(err.code), err.pos, code, usc_parse_strerror(code), pos);
}

static struct usc_probe_spec *expect_ok(const char *text)
{
	struct usc_probe_spec *spec = &spec_a;
	struct usc_parse_error err = {0};

	if (usc_probe_parse(text, spec, &err))
		fail_msg("\"%.60s...\": error %d (%s) at %zu", text, err.code,
			 usc_parse_strerror(err.code), err.pos);
	return spec;
}

/* After p: or r:, a word that cannot be an event but is a location's (a Go
 * name, a glob, a path) is the location: r:main.process id is a return
 * probe on main.process with the argument id, not EVENT LOCATION. */
static void test_location_after_p_colon(void **state)
{
	(void)state;
	static const struct {
		const char *text, *symbol;
	} cases[] = {
		{"r:main.process id", "main.process"},
		{"p:ngx_http_* r", "ngx_http_*"},
		{"p:net/http.(*conn).serve c", "net/http.(*conn).serve"},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct usc_probe_spec *spec = expect_ok(cases[i].text);

		assert_false(spec->event_given);
		assert_string_equal(spec->symbol, cases[i].symbol);
		assert_int_equal(spec->is_return, cases[i].text[0] == 'r');
		assert_int_equal(spec->nargs, 1);
		assert_int_equal(spec->args[0].insn[0].op, FOP_VAR);
	}
}

static void test_max_args(void **state)
{
	(void)state;
	const char *heads[] = {"main", "p main", "p:ev main", "r:ev libc:malloc"};

	for (unsigned h = 0; h < 4; h++) {
		char *s = repeat_args(heads[h], "%rdi", USC_MAX_ARGS);
		struct usc_probe_spec *spec = expect_ok(s);

		assert_int_equal(spec->nargs, USC_MAX_ARGS);
		assert_string_equal(spec->args[0].name, "arg1");
		assert_string_equal(spec->args[USC_MAX_ARGS - 1].name, "arg32");
			}
}

/* The error points at the first argument beyond the limit: the 33rd, at
 * strlen(head) + 1 + 32 * strlen(" %di"), however many more follow. */
static void test_too_many_args(void **state)
{
	(void)state;
	const char *heads[] = {"main", "p main", "p:ev main"};
	const unsigned counts[] = {33, 34, 35, 40, 100};
	static char bad[2048];
	size_t nbad = 0;

	for (unsigned h = 0; h < 3; h++) {
		for (unsigned k = 0; k < 5; k++) {
			char *s = repeat_args(heads[h], "%di", counts[k]);
			size_t want = strlen(heads[h]) + 1 + 32 * 4;
			struct usc_parse_error err = {0};

			if (usc_probe_parse(s, &spec_b, &err) == 0 ||
			    err.code != USC_PERR_TOO_MANY_ARGS || err.pos != want)
				nbad += (size_t)snprintf(bad + nbad, sizeof(bad) - nbad,
					"\n  \"%s\" + %u x \" %%di\": error %d at %zu, expected %d at %zu",
					heads[h], counts[k], err.code, err.pos,
					USC_PERR_TOO_MANY_ARGS, want);
			assert_true(nbad < sizeof(bad));
		}
	}
	/* the tokenizer's limit must not hide an earlier mistake */
	{
		static const struct icase earlier[] = {
			{"p:1ev main", USC_PERR_BAD_EVENT, 2},
			{"main $foo", USC_PERR_BAD_VAR, 5},
			{"fo#o", USC_PERR_BAD_SYMBOL, 2},
		};

		for (unsigned i = 0; i < 3; i++) {
			char *s = repeat_args(earlier[i].text, "%di", 40);
			struct usc_parse_error err = {0};

			if (usc_probe_parse(s, &spec_b, &err) == 0 || err.code != earlier[i].code ||
			    err.pos != earlier[i].pos)
				nbad += (size_t)snprintf(bad + nbad, sizeof(bad) - nbad,
					"\n  \"%s\" + 40 x \" %%di\": error %d at %zu, expected %d at %zu",
					earlier[i].text, err.code, err.pos, earlier[i].code,
					earlier[i].pos);
			assert_true(nbad < sizeof(bad));
		}
	}
	if (nbad)
		fail_msg("too many arguments:%s", bad);
}

static char *nested(const char *prefix, unsigned depth, const char *core, const char *suffix)
{
	size_t len = strlen(prefix) + depth * 4 + strlen(core) + strlen(suffix) + 1;
	char *s = gen;

	assert_true(len <= sizeof(gen));
	strcpy(s, prefix);
	for (unsigned i = 0; i < depth; i++)
		strcat(s, "+0(");
	strcat(s, core);
	for (unsigned i = 0; i < depth; i++)
		strcat(s, ")");
	strcat(s, suffix);
	return s;
}

static void test_deref_depth(void **state)
{
	(void)state;
	char *s;
	struct usc_probe_spec *spec;

	/* 12 levels fit: load, 11 DEREFs, the fused store, MOD_BF, END */
	s = nested("main ", 12, "%rdi", ":b4@0/32");
	spec = expect_ok(s);
	assert_int_equal(spec->args[0].ninsn, 15);
	assert_int_equal(spec->args[0].insn[0].op, FOP_REG);
	for (unsigned i = 1; i <= 11; i++)
		assert_int_equal(spec->args[0].insn[i].op, FOP_DEREF);
	assert_int_equal(spec->args[0].insn[12].op, FOP_ST_MEM);
	assert_int_equal(spec->args[0].insn[12].size, 4);
	assert_int_equal(spec->args[0].insn[13].op, FOP_MOD_BF);
	assert_int_equal(spec->args[0].insn[14].op, FOP_END);

	/* @ADDR is a dereference of its own: 11 more fit around it */
	s = nested("main ", 11, "@0x1000", "");
	spec = expect_ok(s);
	assert_int_equal(spec->args[0].ninsn, 14);
	assert_int_equal(spec->args[0].insn[0].op, FOP_MEM);
	assert_int_equal(spec->args[0].insn[12].op, FOP_ST_MEM);
	assert_int_equal(spec->args[0].insn[13].op, FOP_END);

	/* the 13th level is refused where it starts: 5 + 12 * 3 */
	s = nested("main ", 13, "%rdi", "");
	expect_error(s, USC_PERR_DEREF_TOO_DEEP, 41);
	s = nested("main ", 20, "%rdi", "");
	expect_error(s, USC_PERR_DEREF_TOO_DEEP, 41);
	s = nested("main ", 12, "@0x1000", "");
	expect_error(s, USC_PERR_DEREF_TOO_DEEP, 5);
}

static void test_too_long(void **state)
{
	(void)state;
	char *s = gen;

	/* 4095 characters are accepted ... */
	memset(s, ' ', 4095);
	memcpy(s, "main", 4);
	s[4095] = 0;
	expect_ok(s);
	/* ... 4096 and more are not */
	memset(s, ' ', 4096);
	memcpy(s, "main", 4);
	s[4096] = 0;
	expect_error(s, USC_PERR_TOO_LONG, USC_SPEC_MAX - 1);
	memset(s, 'a', 5000);
	s[5000] = 0;
	expect_error(s, USC_PERR_TOO_LONG, USC_SPEC_MAX - 1);
}

/* $ustack and $ustack:N: one load the engines copy the stack at, its
 * frames in imm; named ustack unless named; alone, once a probe. */
static void test_ustack(void **state)
{
	struct usc_probe_spec sp;
	struct usc_parse_error err;
	char buf[128];

	(void)state;
	assert_int_equal(usc_probe_parse("f $ustack st=$ustack:5x", &sp, &err), -EINVAL);
	assert_int_equal(usc_probe_parse("f n=$arg1 $ustack:12", &sp, &err), 0);
	assert_int_equal(sp.nargs, 2);
	assert_string_equal(sp.args[1].name, "ustack");
	assert_int_equal(sp.args[1].type, USC_T_STACK);
	assert_int_equal(sp.args[1].insn[0].op, FOP_USTACK);
	assert_int_equal(fetch_stack_frames(sp.args[1].insn[0].imm), 12);
	assert_int_equal(fetch_stack_bytes(sp.args[1].insn[0].imm), USC_STACK_BYTES);
	assert_int_equal(sp.args[1].insn[1].op, FOP_END);
	assert_true(probe_fetcharg_format(&sp.args[1], buf, sizeof(buf)) > 0);
	assert_string_equal(buf, "ustack=$ustack:12");
	assert_int_equal(usc_probe_parse("f st=$ustack", &sp, &err), 0);
	assert_string_equal(sp.args[0].name, "st");
	assert_int_equal(fetch_stack_frames(sp.args[0].insn[0].imm), USC_STACK_FRAMES);
	/* the kernel's uprobe_events have no stack argument */
	assert_int_equal(fetch_render(&sp.args[0], &fetch_syntax_kernel, buf, sizeof(buf)),
			 -ENOTSUP);
	expect_error("f $ustack:0", USC_PERR_STACK_FRAMES, 10);
	expect_error("f $ustack:257", USC_PERR_STACK_FRAMES, 10);
	expect_error("f $ustack:u64", USC_PERR_STACK_FRAMES, 10);
	expect_error("f +8($ustack)", USC_PERR_STACK_ALONE, 5);
	expect_error("f a=$ustack b=$ustack:3", USC_PERR_STACK_TWICE, 12);
}

/* $pystack and $pystack:N: the thread's Python frames, up to 128; py:
 * locations: a qualname, a module and a qualname, globs, returns. */
static void test_pystack_and_py(void **state)
{
	struct usc_probe_spec sp;
	struct usc_parse_error err;
	char buf[128];

	(void)state;
	assert_int_equal(usc_probe_parse("libc:malloc $pystack:8 $ustack n=$arg1", &sp, &err), 0);
	assert_int_equal(sp.nargs, 3);
	assert_string_equal(sp.args[0].name, "pystack");
	assert_int_equal(sp.args[0].type, USC_T_STACK);
	assert_int_equal(sp.args[0].insn[0].op, FOP_PYSTACK);
	assert_int_equal(sp.args[0].insn[0].imm, 8);
	assert_true(probe_fetcharg_format(&sp.args[0], buf, sizeof(buf)) > 0);
	assert_string_equal(buf, "pystack=$pystack:8");
	assert_int_equal(fetch_render(&sp.args[0], &fetch_syntax_kernel, buf, sizeof(buf)),
			 -ENOTSUP);
	assert_int_equal(usc_probe_parse("f p=$pystack", &sp, &err), 0);
	assert_string_equal(sp.args[0].name, "p");
	assert_int_equal(sp.args[0].insn[0].imm, USC_PYSTACK_FRAMES);
	expect_error("f $pystack:0", USC_PERR_PYSTACK_FRAMES, 11);
	expect_error("f $pystack:129", USC_PERR_PYSTACK_FRAMES, 11);
	expect_error("f +8($pystack)", USC_PERR_PYSTACK_ALONE, 5);
	expect_error("f a=$pystack b=$pystack:3", USC_PERR_PYSTACK_TWICE, 13);

	assert_int_equal(usc_probe_parse("py:fib n", &sp, &err), 0);
	assert_int_equal(sp.loc_kind, USC_LOC_PYTHON);
	assert_string_equal(sp.module, "*");
	assert_string_equal(sp.symbol, "fib");
	assert_false(sp.is_glob || sp.is_return);
	assert_int_equal(sp.nargs, 1);
	assert_int_equal(sp.args[0].insn[0].op, FOP_VAR);	/* the name, bound later */
	assert_int_equal(usc_probe_parse("r:py:http.server:SimpleHTTPRequestHandler.*", &sp, &err),
			 0);
	assert_true(sp.is_return && sp.is_glob);
	assert_string_equal(sp.module, "http.server");
	assert_string_equal(sp.symbol, "SimpleHTTPRequestHandler.*");
	assert_int_equal(usc_probe_parse("py:__main__:f.<locals>.<lambda> $params", &sp, &err), 0);
	assert_string_equal(sp.module, "__main__");
	assert_string_equal(sp.symbol, "f.<locals>.<lambda>");
	assert_int_equal(usc_probe_parse("py:*", &sp, &err), 0);
	assert_true(sp.is_glob);
	assert_int_equal(usc_probe_parse("p:get py:Handler.do_GET", &sp, &err), 0);
	assert_string_equal(sp.event, "get");
	assert_string_equal(sp.symbol, "Handler.do_GET");
	expect_error("py:", USC_PERR_BAD_PYTHON, 3);
	expect_error("py:a:b:c", USC_PERR_BAD_PYTHON, 6);
	expect_error("py::f", USC_PERR_BAD_PYTHON, 3);
	expect_error("py:m:", USC_PERR_BAD_PYTHON, 5);
	expect_error("py:f(x)", USC_PERR_BAD_PYTHON, 4);
}

static void test_long_names(void **state)
{
	(void)state;
	char name[USC_NAME_MAX + 1], text[256];
	struct usc_probe_spec *spec;

	memset(name, 'n', USC_NAME_MAX - 1);
	name[USC_NAME_MAX - 1] = 0;
	snprintf(text, sizeof(text), "p:%s main %s=%%rdi", name, name);
	spec = expect_ok(text);
	assert_string_equal(spec->event, name);
	assert_string_equal(spec->args[0].name, name);

	memset(name, 'n', USC_NAME_MAX);
	name[USC_NAME_MAX] = 0;
	snprintf(text, sizeof(text), "p:%s main", name);
	expect_error(text, USC_PERR_BAD_EVENT, 2);
	snprintf(text, sizeof(text), "main %s=%%rdi", name);
	expect_error(text, USC_PERR_BAD_ARG_NAME, 5);
}

static void test_long_symbol(void **state)
{
	(void)state;
	char text[USC_SYM_MAX + 8];
	struct usc_probe_spec *spec;

	memset(text, 's', USC_SYM_MAX - 1);
	text[USC_SYM_MAX - 1] = 0;
	spec = expect_ok(text);
	assert_int_equal(strlen(spec->symbol), USC_SYM_MAX - 1);
	memset(text, 's', USC_SYM_MAX);
	text[USC_SYM_MAX] = 0;
	expect_error(text, USC_PERR_BAD_SYMBOL, 0);
}

/* pos/len of each argument point back into the text */
static void test_arg_positions(void **state)
{
	(void)state;
	const char *text = "main  x=%di   $arg2:u8\t+8(%rsp)";
	struct usc_probe_spec *spec = expect_ok(text);

	assert_int_equal(spec->nargs, 3);
	assert_int_equal(spec->args[0].pos, 6);
	assert_int_equal(spec->args[0].len, 5);
	assert_int_equal(spec->args[1].pos, 14);
	assert_int_equal(spec->args[1].len, 8);
	assert_int_equal(spec->args[2].pos, 23);
	assert_int_equal(spec->args[2].len, 8);
}

/* the parser never writes into its input; a later parse forgets an earlier one */
static void test_input_untouched(void **state)
{
	(void)state;
	const char text[] = "p:ev libc:malloc+4 a=+8(+16(%rdi)):string b=%di:b4@2/32";
	char copy[sizeof(text)];
	struct usc_probe_spec *spec;

	memcpy(copy, text, sizeof(text));
	spec = expect_ok(copy);
	assert_memory_equal(copy, text, sizeof(text));
	assert_int_equal(spec->nargs, 2);
	spec = expect_ok("main");
	assert_int_equal(spec->nargs, 0);
	assert_string_equal(spec->module, "");
	assert_string_equal(spec->event, "");
	assert_false(spec->has_offset);
	assert_string_equal(spec->text, "main");
}

/* ---- probe_parse_fetcharg on its own ---------------------------------------- */

/* C expressions on debug-info variables parse to a FOP_VAR placeholder that
 * keeps where the expression stands; binding lowers it at the site. */
static void test_var_exprs(void **state)
{
	(void)state;
	static const struct {
		const char *probe, *name;
		size_t pos, len;
		enum usc_type type;
	} cases[] = {
		{"handle r->path:string", "r_path", 7, 7, USC_T_STRING},
		{"handle r->next->id", "r_next_id", 7, 11, USC_T_X64},
		{"main *p", "p", 5, 2, USC_T_X64},
		{"main a.b[3]:s32", "a_b_3", 5, 6, USC_T_S32},
		{"main g_counter", "g_counter", 5, 9, USC_T_X64},
		{"main n=r->size:u16", "n", 7, 7, USC_T_U16},
	};
	struct usc_probe_spec spec;
	struct usc_parse_error err;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct usc_fetcharg *a = &spec.args[0];

		if (usc_probe_parse(cases[i].probe, &spec, &err))
			fail_msg("\"%s\": %s at %zu", cases[i].probe, usc_parse_strerror(err.code),
				 err.pos);
		assert_int_equal(spec.nargs, 1);
		assert_string_equal(a->name, cases[i].name);
		assert_int_equal(a->insn[0].op, FOP_VAR);
		assert_int_equal(a->insn[0].imm & 0xffffffff, cases[i].pos);
		assert_int_equal(a->insn[0].imm >> 32, cases[i].len);
		assert_int_equal(a->type, cases[i].type);
	}
	/* source lines */
	assert_int_equal(usc_probe_parse("dwarfapp.c:27 v", &spec, &err), 0);
	assert_int_equal(spec.loc_kind, USC_LOC_LINE);
	assert_string_equal(spec.symbol, "dwarfapp.c");
	assert_int_equal(spec.line, 27);
	assert_false(spec.line_rel);
	assert_string_equal(spec.module, "");
	assert_int_equal(usc_probe_parse("app:src/x.cc:+", &spec, &err), -EINVAL);
	assert_int_equal(err.code, USC_PERR_BAD_LINE);
	assert_int_equal(usc_probe_parse(":+4", &spec, &err), -EINVAL);
	assert_int_equal(usc_probe_parse("app:src/x.cc:12", &spec, &err), 0);
	assert_string_equal(spec.module, "app");
	assert_string_equal(spec.symbol, "src/x.cc");
	assert_int_equal(spec.line, 12);
	assert_int_equal(usc_probe_parse("handle:+3", &spec, &err), 0);
	assert_int_equal(spec.loc_kind, USC_LOC_LINE);
	assert_string_equal(spec.symbol, "handle");
	assert_true(spec.line_rel);
	assert_int_equal(spec.line, 3);
	assert_int_equal(usc_probe_parse("libc:malloc+8", &spec, &err), 0);
	assert_int_equal(spec.loc_kind, USC_LOC_SYMBOL);
	assert_int_equal(usc_probe_parse("handle:+0", &spec, &err), -EINVAL);
	assert_int_equal(err.code, USC_PERR_BAD_LINE);
	/* $params stands alone and expands at the site */
	assert_int_equal(usc_probe_parse("handle $params", &spec, &err), 0);
	assert_int_equal(spec.nargs, 1);
	assert_int_equal(spec.args[0].insn[0].op, FOP_PARAMS);
	/* p:EVENT LOCATION still reads a pointer chain as an argument */
	assert_int_equal(usc_probe_parse("p:handle r->id", &spec, &err), 0);
	assert_false(spec.event_given);
	assert_string_equal(spec.symbol, "handle");
	assert_int_equal(spec.nargs, 1);
}

static void test_parse_fetcharg_direct(void **state)
{
	(void)state;
	struct usc_fetcharg a;
	struct usc_parse_error err = {0};
	const char *t = "x=%di:u8 #unk";

	assert_int_equal(probe_parse_fetcharg(t, 0, 8, false, &a, &err), 0);
	assert_string_equal(a.name, "x");
	assert_true(a.named);
	assert_int_equal(a.type, USC_T_U8);
	assert_int_equal(a.pos, 0);
	assert_int_equal(a.len, 8);
	assert_int_equal(a.ninsn, 3);
	assert_int_equal(a.insn[0].op, FOP_REG);
	assert_int_equal(a.insn[0].reg, USC_REG_DI);
	assert_int_equal(a.insn[1].op, FOP_ST_RAW);
	assert_int_equal(a.insn[1].size, 1);

	/* unnamed: the name is left to the caller */
	assert_int_equal(probe_parse_fetcharg(t, 9, 13, false, &a, &err), -22);
	assert_int_equal(err.code, USC_PERR_BAD_FETCHARG);
	assert_int_equal(err.pos, 9);
	assert_int_equal(probe_parse_fetcharg("$retval", 0, 7, true, &a, &err), 0);
	assert_string_equal(a.name, "");
	assert_false(a.named);
	assert_int_equal(probe_parse_fetcharg("$retval", 0, 7, false, &a, &err), -22);
	assert_int_equal(err.code, USC_PERR_RETVAL_ON_ENTRY);
	assert_int_equal(err.pos, 0);
}

/* ---- probe_parse_number --------------------------------------------------- */

struct ncase {
	const char *s;
	size_t used;		/* 0: an error */
	uint64_t v;
};

static const struct ncase number_cases[] = {
	{"0", 1, 0},
	{"00", 2, 0},
	{"0x0", 3, 0},
	{"010", 3, 8},
	{"0777", 4, 0777},
	{"7", 1, 7},
	{"42 rest", 2, 42},
	{"7)", 1, 7},
	{"1+2", 1, 1},
	{"0x1F", 4, 0x1f},
	{"0X1f", 4, 0x1f},
	{"0xdeadBEEF", 10, 0xdeadbeef},
	{"18446744073709551615", 20, UINT64_MAX},
	{"0xffffffffffffffff", 18, UINT64_MAX},
	{"01777777777777777777777", 23, UINT64_MAX},
	{"18446744073709551616", 0, 0},
	{"99999999999999999999", 0, 0},
	{"0x10000000000000000", 0, 0},
	{"02000000000000000000000", 0, 0},
	{"0x", 0, 0},
	{"0x ", 0, 0},
	{"0xg", 0, 0},
	{"0x1g", 0, 0},
	{"12abc", 0, 0},
	{"1_", 0, 0},
	{"08", 0, 0},
	{"019", 0, 0},
	{"", 0, 0},
	{"x1", 0, 0},
	{"-1", 0, 0},
	{"+1", 0, 0},
	{" 1", 0, 0},
};

static void test_parse_number(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(number_cases) / sizeof(number_cases[0]); i++) {
		const struct ncase *c = &number_cases[i];
		uint64_t v = 0xa5a5a5a5a5a5a5a5ull;
		size_t used = probe_parse_number(c->s, &v);

		if (used != c->used)
			fail_msg("probe_parse_number(\"%s\") consumed %zu, expected %zu", c->s, used,
				 c->used);
		if (c->used && v != c->v)
			fail_msg("probe_parse_number(\"%s\") = %llu, expected %llu", c->s,
				 (unsigned long long)v, (unsigned long long)c->v);
	}
}

/* ---- probe_fetcharg_format --------------------------------------------- */

static void test_format(void **state)
{
	(void)state;
	static const struct {
		const char *probe, *want;
	} cases[] = {
		{"main %rdi:u32", "arg1=%rdi:u32"},
		{"main %eax", "arg1=%rax:x32"},
		{"main x=+8(+16(%rdi)):u32", "x=+8(+16(%rdi)):u32"},
		{"main -8(%rbp):s16", "arg1=-8(%rbp):s16"},
		{"main $arg2:string", "arg1=+0($arg2):string"},
		{"main $comm", "arg1=$comm:string"},
		{"main $stack $stack3", "arg1=$stack:x64"},
		{"r main $retval:s64", "arg1=$retval:s64"},
	};
	char buf[256];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct usc_probe_spec *spec = expect_ok(cases[i].probe);

		assert_true(probe_fetcharg_format(&spec->args[0], buf, sizeof(buf)) > 0);
		if (strcmp(buf, cases[i].want))
			fail_msg("format(\"%s\") = \"%s\", expected \"%s\"", cases[i].probe, buf,
				 cases[i].want);
		}
}

/* probe_fetcharg_format promises probe-language text: parsing what it prints
 * must give back the same program and type. */
static void test_format_roundtrip(void **state)
{
	(void)state;
	static const char *const args[] = {
		"%rdi", "%eax:s32", "+8(+16(-4(%rdi))):u16", "$arg1:string", "$stack2", "$comm",
		"@0x1000:u32", "@+0x2000:s16", "+4(@0x1000):u8", "%di:b4@2/32", "+2(%rsi):b8@0/16",
		"%rdi:symbol", "r:$retval:s8",
	};
	static char text[600], out[512], bad[2048];
	static struct usc_fetcharg want;
	size_t nbad = 0;

	for (size_t i = 0; i < sizeof(args) / sizeof(args[0]); i++) {
		struct usc_parse_error err = {0};
		bool ret = !strncmp(args[i], "r:", 2);
		const char *arg = ret ? args[i] + 2 : args[i];

		snprintf(text, sizeof(text), "%s %s", ret ? "r main" : "main", arg);
		want = expect_ok(text)->args[0];
		probe_fetcharg_format(&want, out, sizeof(out));
		snprintf(text, sizeof(text), "%s %s", ret ? "r main" : "main", out);
		if (usc_probe_parse(text, &spec_b, &err))
			nbad += (size_t)snprintf(bad + nbad, sizeof(bad) - nbad,
						 "\n  \"%s\" -> \"%s\": does not parse (%s at %zu)",
						 arg, out, usc_parse_strerror(err.code), err.pos);
		else if (want.type != spec_b.args[0].type || want.ninsn != spec_b.args[0].ninsn ||
			 memcmp(want.insn, spec_b.args[0].insn, want.ninsn * sizeof(want.insn[0])))
			nbad += (size_t)snprintf(bad + nbad, sizeof(bad) - nbad,
						 "\n  \"%s\" -> \"%s\": parses to another program",
						 arg, out);
		assert_true(nbad < sizeof(bad));
	}
	if (nbad)
		fail_msg("probe_fetcharg_format output is not probe language:%s", bad);
}

static void test_strerror(void **state)
{
	(void)state;
	for (int c = 0; c < USC_PERR_NR; c++) {
		const char *m = usc_parse_strerror(c);

		assert_non_null(m);
		assert_true(strlen(m) > 0);
		assert_string_not_equal(m, "unknown error");
	}
	assert_string_equal(usc_parse_strerror(USC_PERR_NR), "unknown error");
	assert_string_equal(usc_parse_strerror((enum usc_parse_err)-1), "unknown error");
	assert_string_equal(usc_parse_strerror(USC_PERR_OK), "no error");
}

int main(void)
{
	const size_t nv = sizeof(valid_cases) / sizeof(valid_cases[0]);
	const size_t ni = sizeof(invalid_cases) / sizeof(invalid_cases[0]);
	struct CMUnitTest *vt = calloc(nv, sizeof(*vt)), *it = calloc(ni, sizeof(*it));
	int fails = 0;

	if (!vt || !it)
		return 1;
	for (size_t i = 0; i < nv; i++)
		vt[i] = (struct CMUnitTest){valid_cases[i].text, check_valid, NULL, NULL,
					    (void *)&valid_cases[i]};
	for (size_t i = 0; i < ni; i++)
		it[i] = (struct CMUnitTest){invalid_cases[i].text, check_invalid, NULL, NULL,
					    (void *)&invalid_cases[i]};

	const struct CMUnitTest others[] = {
		cmocka_unit_test(test_location_after_p_colon),
		cmocka_unit_test(test_max_args),
		cmocka_unit_test(test_too_many_args),
		cmocka_unit_test(test_deref_depth),
		cmocka_unit_test(test_too_long),
		cmocka_unit_test(test_long_names),
		cmocka_unit_test(test_ustack),
		cmocka_unit_test(test_pystack_and_py),
		cmocka_unit_test(test_long_symbol),
		cmocka_unit_test(test_arg_positions),
		cmocka_unit_test(test_input_untouched),
		cmocka_unit_test(test_parse_fetcharg_direct),
		cmocka_unit_test(test_var_exprs),
		cmocka_unit_test(test_parse_number),
		cmocka_unit_test(test_format),
		cmocka_unit_test(test_format_roundtrip),
		cmocka_unit_test(test_strerror),
	};

	fails += _cmocka_run_group_tests("probe_valid", vt, nv, NULL, NULL);
	fails += _cmocka_run_group_tests("probe_invalid", it, ni, NULL, NULL);
	fails += cmocka_run_group_tests_name("probe_misc", others, NULL, NULL);
	free(vt);
	free(it);
	return fails ? 1 : 0;
}
