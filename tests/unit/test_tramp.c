/* Tests of src/engine/inject/tramp.c: the probe code is run, here, between
 * a call and a ret, with every general register set to a known value. It
 * must hand the agent the registers as they were (the stack pointer as the
 * callee sees it at entry), and give every one of them, and the flags where
 * asked, back unchanged. The count-only code must add one to the right
 * per-CPU counter. The fast path must give fast() the registers it names,
 * and make the full call exactly when fast() asks. A probe that calls no
 * agent must call it when the tracer has died, until it has let go. The
 * count in a restartable sequence (rseq) must count every call exactly
 * under preemption, migration and signals (its abort handler and
 * descriptor are the kernel's to check: a wrong one kills the process),
 * and leave another sequence's descriptor alone. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdbool.h>
#include <string.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/rseq.h>
#include <sys/time.h>
#include <unistd.h>
#include <cpuid.h>

#include "engine/inject/inject_shared.h"
#include "engine/inject/tramp.h"

/* written by fake_hit, which only the generated code calls: not static, so
 * the compiler cannot assume they keep their values across it */
uint64_t seen[USC_REG_NR], seen_site;
volatile int hits;
/* the owner word and the let-go state the probes test */
volatile uint32_t owner_word, letgo_word;

static void fake_hit(uint64_t *regs, uint64_t site)
{
	memcpy(seen, regs, sizeof(seen));
	seen_site = site;
	hits++;
	/* the caller-saved registers are the trampoline's to restore */
	__asm__ volatile("xor %%eax, %%eax; xor %%ecx, %%ecx; xor %%edx, %%edx; xor %%esi, %%esi;"
			 "xor %%edi, %%edi; xor %%r8d, %%r8d; xor %%r9d, %%r9d;"
			 "xor %%r10d, %%r10d; xor %%r11d, %%r11d; cmp %%eax, %%eax"
			 ::: "rax", "rcx", "rdx", "rsi", "rdi", "r8", "r9", "r10", "r11", "cc");
}

/* Build code = probe + ret at an executable page. */
static void *build(const struct tramp_spec *base)
{
	uint8_t *page = mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC,
			     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct tramp_spec ts = *base;
	ssize_t n;

	assert_true(page != MAP_FAILED);
	ts.at = ts.probe_at = (uint64_t)page;
	if (!ts.hit) {
		ts.hit = (uint64_t)fake_hit;
		ts.site = 0xdead;
	}
	ts.owner = (uint64_t)&owner_word;
	ts.letgo = (uint64_t)&letgo_word;
	n = tramp_encode_probe(&ts, page, 4000);
	assert_true(n > 0 && n < 4000);
	page[n] = 0xc3;	/* ret */
	return page;
}

/* Every register = its index * 0x1111..., except rsp; CF set. After the
 * call, each register compared: out[i] = 1 where one changed; out[16] the
 * carry flag after; out[17] rsp just before the call. */
uint64_t tr_after[16], tr_sp_before;
uint8_t tr_carry;

static void run(void *code, uint64_t out[18])
{

	__asm__ volatile(
		"lea -128(%%rsp), %%rsp\n\t"	/* this function's red zone */
		"push %%rbx; push %%rbp; push %%r12; push %%r13; push %%r14; push %%r15\n\t"
		"push %[code]\n\t"
		"movabs $0x1111111111111111, %%rax\n\t"
		"movabs $0x2222222222222222, %%rbx\n\t"
		"movabs $0x3333333333333333, %%rcx\n\t"
		"movabs $0x4444444444444444, %%rdx\n\t"
		"movabs $0x5555555555555555, %%rsi\n\t"
		"movabs $0x6666666666666666, %%rdi\n\t"
		"movabs $0x7777777777777777, %%rbp\n\t"
		"movabs $0x8888888888888888, %%r8\n\t"
		"movabs $0x9999999999999999, %%r9\n\t"
		"movabs $0xaaaaaaaaaaaaaaaa, %%r10\n\t"
		"movabs $0xbbbbbbbbbbbbbbbb, %%r11\n\t"
		"movabs $0xcccccccccccccccc, %%r12\n\t"
		"movabs $0xdddddddddddddddd, %%r13\n\t"
		"movabs $0xeeeeeeeeeeeeeeee, %%r14\n\t"
		"movabs $0xffffffffffffffff, %%r15\n\t"
		"mov %%rsp, tr_sp_before(%%rip)\n\t"
		"stc\n\t"
		"call *(%%rsp)\n\t"
		"setc tr_carry(%%rip)\n\t"
		"mov %%rax, tr_after+0(%%rip)\n\t"
		"mov %%rbx, tr_after+8(%%rip)\n\t"
		"mov %%rcx, tr_after+16(%%rip)\n\t"
		"mov %%rdx, tr_after+24(%%rip)\n\t"
		"mov %%rsi, tr_after+32(%%rip)\n\t"
		"mov %%rdi, tr_after+40(%%rip)\n\t"
		"mov %%rbp, tr_after+48(%%rip)\n\t"
		"mov %%rsp, tr_after+56(%%rip)\n\t"
		"mov %%r8, tr_after+64(%%rip)\n\t"
		"mov %%r9, tr_after+72(%%rip)\n\t"
		"mov %%r10, tr_after+80(%%rip)\n\t"
		"mov %%r11, tr_after+88(%%rip)\n\t"
		"mov %%r12, tr_after+96(%%rip)\n\t"
		"mov %%r13, tr_after+104(%%rip)\n\t"
		"mov %%r14, tr_after+112(%%rip)\n\t"
		"mov %%r15, tr_after+120(%%rip)\n\t"
		"pop %%rax\n\t"
		"pop %%r15; pop %%r14; pop %%r13; pop %%r12; pop %%rbp; pop %%rbx\n\t"
		"lea 128(%%rsp), %%rsp\n\t"
		:
		: [code] "r"(code)
		: "rax", "rcx", "rdx", "rsi", "rdi", "r8", "r9", "r10", "r11", "memory", "cc");
	for (int i = 0; i < 16; i++) {
		uint64_t want = (uint64_t)(i < 7 ? i + 1 : i) * 0x1111111111111111ULL;

		if (i == USC_REG_SP)
			want = tr_sp_before;
		out[i] = tr_after[i] != want;
	}
	out[16] = tr_carry;
	out[17] = tr_sp_before;
}

static uint64_t reg_value(int i)
{
	return (uint64_t)(i < 7 ? i + 1 : i) * 0x1111111111111111ULL;
}

static void test_agent_call_sees_and_restores_every_register(void **state)
{
	for (int flags = 0; flags < 2; flags++) {
		struct tramp_spec ts = {.save_flags = flags, .hit = (uint64_t)fake_hit,
					.site = 0x5eed};
		void *code = build(&ts);
		uint64_t out[18];

		(void)state;
		hits = 0;
		run(code, out);
		assert_int_equal(hits, 1);
		assert_int_equal(seen_site, 0x5eed);
		for (int i = 0; i < 16; i++) {
			if (i == USC_REG_SP)	/* as at a function's entry: at the return address */
				assert_int_equal(seen[i], out[17] - 8);
			else
				assert_int_equal(seen[i], reg_value(i));
			assert_int_equal(out[i], 0);	/* unchanged after */
		}
		if (flags)
			assert_int_equal(out[16], 1);	/* the carry survived the agent's cmp */
		munmap(code, 4096);
	}
}

/* The sum of the per-CPU counters of site 3 (each CPU's 8 words): every
 * other word must be 0. */
static uint64_t counted(uint64_t (*counters)[8])
{
	uint64_t total = 0;

	for (int cpu = 0; cpu < 64; cpu++)
		for (int s = 0; s < 8; s++) {
			if (s != 3)
				assert_int_equal(counters[cpu][s], 0);
			total += counters[cpu][s];
		}
	return total;
}

/* A count-only probe run 10 times with counters zeroed first: every
 * register kept, and the carry flag where saved; what it counted. */
static uint64_t count_ten(void *code, int flags, uint64_t (*counters)[8])
{
	uint64_t out[18];

	memset(counters, 0, 64 * sizeof(*counters));
	for (int k = 0; k < 10; k++)
		run(code, out);
	for (int i = 0; i < 16; i++)
		assert_int_equal(out[i], 0);
	if (flags)
		assert_int_equal(out[16], 1);
	return counted(counters);
}

static void test_count_only_adds_one_to_this_cpus_counter(void **state)
{
	static uint64_t counters[64][8] __attribute__((aligned(64)));
	unsigned a, b, c, d;
	bool rdpid = __get_cpuid_count(7, 0, &a, &b, &c, &d) && (c & (1u << 22));

	(void)state;
	for (int flags = 0; flags < 2; flags++) {
		struct tramp_spec ts = {.save_flags = flags, .counter = (uint64_t)&counters[0][3],
					.stride = sizeof(counters[0]), .have_rdpid = rdpid};
		void *code = build(&ts);

		assert_int_equal(count_ten(code, flags, counters), 10);
		munmap(code, 4096);
	}
}

/* The tracer has died: a count-only probe calls the agent (which lets
 * go), counting nothing, until the let-go state says done; then it passes
 * through. Every register and the flags kept throughout. */
static void test_count_only_calls_the_agent_when_the_tracer_died(void **state)
{
	static uint64_t counters[64][8] __attribute__((aligned(64)));
	static const uint32_t states[] = {INJ_LETGO_NONE, INJ_LETGO_BUSY, INJ_LETGO_AGENT,
					  INJ_LETGO_TRACER};

	(void)state;
	for (int flags = 0; flags < 2; flags++)
		for (size_t k = 0; k < sizeof(states) / sizeof(states[0]); k++) {
			struct tramp_spec ts = {.save_flags = flags,
						.counter = (uint64_t)&counters[0][3],
						.stride = sizeof(counters[0])};
			void *code = build(&ts);
			uint64_t out[18];
			bool calls = states[k] < INJ_LETGO_AGENT;

			memset(counters, 0, sizeof(counters));
			hits = 0;
			owner_word = INJ_OWNER_DIED | INJ_OWNER_WAITERS;
			letgo_word = states[k];
			run(code, out);
			owner_word = 0;
			letgo_word = 0;
			assert_int_equal(hits, calls);
			if (calls) {
				assert_int_equal(seen_site, 0xdead);
				for (int i = 0; i < 16; i++)
					if (i != USC_REG_SP)
						assert_int_equal(seen[i], reg_value(i));
			}
			for (int i = 0; i < 16; i++)
				assert_int_equal(out[i], 0);
			if (flags)
				assert_int_equal(out[16], 1);
			for (int cpu = 0; cpu < 64; cpu++)
				for (int s = 0; s < 8; s++)
					assert_int_equal(counters[cpu][s], 0);
			munmap(code, 4096);
		}
}

/* The fast path: fast(site, a, b) keeps every register but rax and the
 * flags (as agent_fast, no_caller_saved_registers); it says whether the
 * full call follows. */
uint64_t fast_site, fast_a, fast_b;
volatile int fast_calls, fast_answer;

__attribute__((no_caller_saved_registers, noinline, target("general-regs-only")))
static uint32_t fake_fast(uint64_t site, uint64_t a, uint64_t b)
{
	fast_site = site;
	fast_a = a;
	fast_b = b;
	fast_calls++;
	__asm__ volatile("cmp %%eax, %%eax" ::: "cc");	/* the flags are the trampoline's */
	return (uint32_t)fast_answer;
}

static void test_fast_path_then_the_full_call_when_asked(void **state)
{
	(void)state;
	for (int flags = 0; flags < 2; flags++)
		for (int answer = 0; answer < 2; answer++) {
			/* a = rdi (pushed: read from the stack), b = r9 (as it is) */
			struct tramp_spec ts = {.save_flags = flags, .hit = (uint64_t)fake_hit,
						.site = 0xfa57, .fast = (uint64_t)fake_fast,
						.fast_a = USC_REG_DI, .fast_b = USC_REG_R9};
			void *code = build(&ts);
			uint64_t out[18];

			hits = fast_calls = 0;
			fast_answer = answer;
			run(code, out);
			assert_int_equal(fast_calls, 1);
			assert_int_equal(fast_site, 0xfa57);
			assert_int_equal(fast_a, reg_value(USC_REG_DI));
			assert_int_equal(fast_b, reg_value(USC_REG_R9));
			assert_int_equal(hits, answer);
			if (answer) {
				assert_int_equal(seen_site, 0xfa57);
				for (int i = 0; i < 16; i++)
					if (i != USC_REG_SP)
						assert_int_equal(seen[i], reg_value(i));
			}
			for (int i = 0; i < 16; i++)
				assert_int_equal(out[i], 0);
			if (flags)
				assert_int_equal(out[16], 1);
			munmap(code, 4096);
		}
	/* the registers fast() is given, whichever they are */
	for (int r = 0; r < USC_REG_IP; r++) {
		struct tramp_spec ts = {.hit = (uint64_t)fake_hit, .site = 1,
					.fast = (uint64_t)fake_fast, .fast_a = (uint8_t)r,
					.fast_b = 0xff};
		void *code = build(&ts);
		uint64_t out[18];

		if (r == USC_REG_SP) {
			munmap(code, 4096);
			continue;	/* never a fast path's (the trampoline moved it) */
		}
		fast_answer = 0;
		run(code, out);
		assert_int_equal(fast_a, reg_value(r));
		assert_int_equal(fast_b, 0);
		munmap(code, 4096);
	}
}


/* ---- the count in a restartable sequence ---- */

static uint64_t rseq_counters[64][8] __attribute__((aligned(64)));
static void *rseq_code;
#define RSEQ_CALLS 1000000

static struct rseq *this_rseq(void)
{
	return (struct rseq *)((char *)__builtin_thread_pointer() + __rseq_offset);
}

static struct tramp_spec rseq_spec(void)
{
	return (struct tramp_spec){.counter = (uint64_t)&rseq_counters[0][3],
				   .stride = sizeof(rseq_counters[0]),
				   .rseq_cpu_off = (uint32_t)__rseq_offset + 4,
				   .rseq_sig = RSEQ_SIG};
}

static uint64_t rseq_total(void)
{
	return counted(rseq_counters);
}

static void *rseq_hammer(void *arg)
{
	(void)arg;
	for (int i = 0; i < RSEQ_CALLS; i++)
		__asm__ volatile("lea -128(%%rsp), %%rsp; call *%0; lea 128(%%rsp), %%rsp"
				 : : "r"(rseq_code) : "memory", "cc");
	return NULL;
}

static void on_prof(int sig)
{
	(void)sig;
}

static void test_count_in_a_restartable_sequence(void **state)
{
	pthread_t t[6];
	struct itimerval it = {{0, 50}, {0, 50}};

	(void)state;
	if (!__rseq_size || (int32_t)this_rseq()->cpu_id < 0) {
		skip();		/* glibc registered no rseq area (glibc.pthread.rseq=0) */
		return;
	}
	for (int flags = 0; flags < 2; flags++) {
		struct tramp_spec ts = rseq_spec();
		void *code;

		ts.save_flags = flags;
		code = build(&ts);
		assert_int_equal(count_ten(code, flags, rseq_counters), 10);
		assert_int_equal(this_rseq()->rseq_cs, 0);	/* cleared after the commit */
		munmap(code, 4096);
	}
	/* six threads on this machine's CPUs, a profiling signal every 50 us:
	 * preempted, migrated and signalled inside the sequence */
	{
		struct tramp_spec ts = rseq_spec();

		rseq_code = build(&ts);
	}
	memset(rseq_counters, 0, sizeof(rseq_counters));
	signal(SIGPROF, on_prof);
	setitimer(ITIMER_PROF, &it, NULL);
	for (int i = 0; i < 6; i++)
		assert_int_equal(pthread_create(&t[i], NULL, rseq_hammer, NULL), 0);
	for (int i = 0; i < 6; i++)
		pthread_join(t[i], NULL);
	memset(&it, 0, sizeof(it));
	setitimer(ITIMER_PROF, &it, NULL);
	signal(SIGPROF, SIG_DFL);
	assert_int_equal(rseq_total(), 6ULL * RSEQ_CALLS);
	munmap(rseq_code, 4096);
}

/* Another restartable sequence's descriptor is set (a process that uses
 * rseq itself): the probe counts with the locked increment and leaves it. */
static void test_count_leaves_another_sequence_alone(void **state)
{
	static struct rseq_cs other __attribute__((aligned(32)));
	struct tramp_spec ts;
	void *code;
	uint64_t out[18], was;

	(void)state;
	if (!__rseq_size || (int32_t)this_rseq()->cpu_id < 0) {
		skip();
		return;
	}
	ts = rseq_spec();
	code = build(&ts);
	memset(rseq_counters, 0, sizeof(rseq_counters));
	/* a sequence elsewhere (this test's own code: never inside it) */
	other.start_ip = (uint64_t)test_count_leaves_another_sequence_alone;
	other.post_commit_offset = 1;
	other.abort_ip = other.start_ip + 2;
	this_rseq()->rseq_cs = (uint64_t)&other;
	run(code, out);
	was = this_rseq()->rseq_cs;
	this_rseq()->rseq_cs = 0;
	/* the kernel clears it lazily where the thread was preempted outside */
	assert_true(was == (uint64_t)&other || was == 0);
	assert_int_equal(rseq_total(), 1);
	munmap(code, 4096);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_agent_call_sees_and_restores_every_register),
		cmocka_unit_test(test_count_only_adds_one_to_this_cpus_counter),
		cmocka_unit_test(test_count_only_calls_the_agent_when_the_tracer_died),
		cmocka_unit_test(test_fast_path_then_the_full_call_when_asked),
		cmocka_unit_test(test_count_in_a_restartable_sequence),
		cmocka_unit_test(test_count_leaves_another_sequence_alone),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
