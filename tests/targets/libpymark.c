/* libpymark.so: the native function the Python workload (pystack.py) calls
 * through ctypes at known points, for tests to stop or probe it there.
 *
 * int pymark(int tag) returns tag + 1. Its first instruction is a one-byte
 * nop: a tracer may put an int3 there and resume the thread without
 * stepping (the int3 stands for the nop), so a breakpoint that stays in
 * place sees every thread's every call. */
__asm__(".text\n"
	".globl pymark\n"
	".type pymark, @function\n"
	"pymark:\n"
	"\tnop\n"
	"\tleal 1(%rdi), %eax\n"
	"\tret\n"
	".size pymark, .-pymark\n");
