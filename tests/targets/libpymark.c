/* libpymark.so: the native function the Python workload (pystack.py) calls
 * through ctypes at known points, for tests to stop or probe it there.
 *
 * int pymark(int tag) returns tag + 1. Its first instruction is a one-byte
 * nop: a tracer may put an int3 there and resume the thread without
 * stepping (the int3 stands for the nop), so a breakpoint that stays in
 * place sees every thread's every call. Its CFI lets $ustack unwind through
 * it to the Python that called it. */
__asm__(".text\n"
	".globl pymark\n"
	".type pymark, @function\n"
	"pymark:\n"
	"\t.cfi_startproc\n"
	"\tnop\n"
	"\tleal 1(%rdi), %eax\n"
	"\tret\n"
	"\t.cfi_endproc\n"
	".size pymark, .-pymark\n");
