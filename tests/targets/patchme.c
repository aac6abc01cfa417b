/* Target of `uscope list --patchable` (tests/e2e/test_list.py): functions the
 * inject engine can and cannot patch. The refused ones are in assembly, so
 * that no compiler changes their shape. */

/* a dense switch with a different computation per case: at -O2, GCC and
 * Clang make it a jump table (lea T(%rip); movslq (T,i,4); add; jmp *) */
__attribute__((noinline)) int pm_switch(int x, int a, int b)
{
	switch (x) {
	case 0: return a + b;
	case 1: return a - b;
	case 2: return a * b;
	case 3: return a / (b | 1);
	case 4: return a % (b | 1);
	case 5: return a << (b & 7);
	case 6: return a >> (b & 7);
	case 7: return a ^ b;
	default: return -1;
	}
}

int pm_plain(int x);
int pm_into_prologue(int n);
int pm_shared_ret(int x);
int pm_tiny(void);
int pm_unknown_table(long i);

__asm__(
	".text\n"
	".p2align 4\n"
	/* push rbp; mov rbp,rsp; mov eax,edi; pop rbp; ret: both patchable */
	".globl pm_plain\n.type pm_plain,@function\n"
	"pm_plain:\n push %rbp\n mov %rsp,%rbp\n mov %edi,%eax\n pop %rbp\n ret\n"
	".size pm_plain,.-pm_plain\n"
	/* a loop back to its second instruction, inside the entry patch */
	".p2align 4\n"
	".globl pm_into_prologue\n.type pm_into_prologue,@function\n"
	"pm_into_prologue:\n xor %eax,%eax\n1: add $1,%eax\n dec %edi\n jnz 1b\n ret\n"
	".size pm_into_prologue,.-pm_into_prologue\n"
	/* its ret is a branch target, and the next function follows at once */
	".p2align 4\n"
	".globl pm_shared_ret\n.type pm_shared_ret,@function\n"
	"pm_shared_ret:\n mov $5,%eax\n test %edi,%edi\n je 1f\n add %edi,%eax\n1: ret\n"
	".size pm_shared_ret,.-pm_shared_ret\n"
	/* 3 bytes */
	".globl pm_tiny\n.type pm_tiny,@function\n"
	"pm_tiny:\n xor %eax,%eax\n ret\n"
	".size pm_tiny,.-pm_tiny\n"
	/* a jump through a table of absolute pointers: not a known shape */
	".p2align 4\n"
	".globl pm_unknown_table\n.type pm_unknown_table,@function\n"
	"pm_unknown_table:\n lea pm_ptrs(%rip),%rdx\n mov (%rdx,%rdi,8),%rax\n jmp *%rax\n"
	"2: mov $1,%eax\n ret\n"
	"3: mov $2,%eax\n ret\n"
	".size pm_unknown_table,.-pm_unknown_table\n"
	".section .data.rel.ro,\"aw\"\n"
	".p2align 3\n"
	"pm_ptrs: .quad 2b, 3b\n"
	".text\n");

int main(int argc, char **argv)
{
	(void)argv;
	return (pm_switch(argc, 3, 4) + pm_plain(argc) + pm_into_prologue(argc) +
		pm_shared_ret(argc) + pm_tiny() + pm_unknown_table(argc & 1)) & 0x7f;
}
