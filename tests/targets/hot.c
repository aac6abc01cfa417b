/* uscope e2e target: hot loops over functions of two instructions, written
 * in assembly so that their bytes and alignment are known (what a tracer
 * that died leaves, and how it is taken out, depends on them):
 *   work        lea 1(%rdi), %rax; ret, at a 32-byte boundary: a 5-byte
 *               patch inside an aligned 8 bytes
 *   work_mid    the same, 4 bytes past a 16-byte boundary (as after an
 *               endbr64): inside an aligned 16 bytes, not 8
 *   work_cross  the same, 13 bytes past one: across a 16-byte boundary
 *   work_spring x + 1 for an odd x, else 0 through a 3-byte return block
 *               between two branch targets: its return probe is a jmp rel8
 *               to a springboard in the filler after the function
 *
 *   hot N [EVERY [BURSTS [M]]]
 * calls each of them with i for i = 0..N-1, printing "hot progress I" every
 * EVERY calls (0: never), then "hot done total=T"; then BURSTS times, it
 * waits for SIGUSR1 and calls each M times more, printing "hot burst
 * total=T" (T of that burst). Exits 0. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

long work(long x);
long work_mid(long x);
long work_cross(long x);
long work_spring(long x);

#define FN(name, skip, body)						\
	".p2align 5\n"							\
	skip								\
	".globl " #name "\n"						\
	".type " #name ", @function\n"					\
	#name ":\n"							\
	".cfi_startproc\n"						\
	body								\
	"	ret\n"							\
	".cfi_endproc\n"						\
	".size " #name ", .-" #name "\n"

__asm__(".text\n"
	FN(work, "", "	lea 1(%rdi), %rax\n")
	FN(work_mid, ".skip 4, 0xcc\n", "	lea 1(%rdi), %rax\n")
	FN(work_cross, ".skip 13, 0xcc\n", "	lea 1(%rdi), %rax\n")
	FN(work_spring, "",
	   "	test $1, %dil\n"
	   "	jz 1f\n"
	   "	jmp 2f\n"
	   "1:	xor %eax, %eax\n"
	   "	ret\n"
	   "2:	lea 1(%rdi), %rax\n"
	   "	nop\n")	/* its end off a 16-byte boundary: filler follows */
	".p2align 5\n");

static long run(long n, long every)
{
	long total = 0;

	for (long i = 0; i < n; i++) {
		total += work(i) + work_mid(i) + work_cross(i) + work_spring(i);
		if (every && (i + 1) % every == 0) {
			printf("hot progress %ld\n", i + 1);
			fflush(stdout);
		}
	}
	return total;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? strtol(argv[1], NULL, 0) : 1000;
	long every = argc > 2 ? strtol(argv[2], NULL, 0) : 0;
	long bursts = argc > 3 ? strtol(argv[3], NULL, 0) : 0;
	long m = argc > 4 ? strtol(argv[4], NULL, 0) : n;
	sigset_t usr1;
	int sig;

	/* a SIGUSR1 sent early waits for its sigwait */
	sigemptyset(&usr1);
	sigaddset(&usr1, SIGUSR1);
	sigprocmask(SIG_BLOCK, &usr1, NULL);
	printf("hot done total=%ld\n", run(n, every));
	fflush(stdout);
	for (long b = 0; b < bursts; b++) {
		if (sigwait(&usr1, &sig))
			return 1;
		printf("hot burst total=%ld\n", run(m, 0));
		fflush(stdout);
	}
	return 0;
}
