/* uscope e2e target: a return the inject engine reaches through a
 * springboard. springy() is written in assembly so its bytes are known: its
 * second return's block (xor; pop; ret, a branch target) is 4 bytes, too
 * short for a 5-byte jump, and alignment filler follows the function.
 *
 *   springy N    calls springy(i) for i = 0..N-1 (returns 0 for 0, i + 1
 *                otherwise) and prints "springy done total=T". */
#include <stdio.h>
#include <stdlib.h>

long springy(long x);

__asm__(".text\n"
	".p2align 5\n"
	".globl springy\n"
	".type springy, @function\n"
	"springy:\n"
	"	push %rbx\n"
	"	mov %rdi, %rbx\n"
	"	test %rdi, %rdi\n"
	"	jz 1f\n"
	"	lea 1(%rbx), %rax\n"
	"	pop %rbx\n"
	"	ret\n"
	"1:	xor %eax, %eax\n"
	"	pop %rbx\n"
	"	ret\n"
	".size springy, .-springy\n"
	".p2align 5\n");

int main(int argc, char **argv)
{
	long n = argc > 1 ? strtol(argv[1], NULL, 0) : 4, total = 0;

	for (long i = 0; i < n; i++)
		total += springy(i);
	printf("springy done total=%ld\n", total);
	return 0;
}
