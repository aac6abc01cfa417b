/* The agent's flat binary (built from agent/agent.c by the Makefile),
 * embedded in uscope: no compiler is needed at run time. */
__asm__(".section .rodata\n"
	".balign 16\n"
	".globl inject_agent_blob\n"
	"inject_agent_blob:\n"
	".incbin \"build/inject/agent.bin\"\n"
	".globl inject_agent_blob_end\n"
	"inject_agent_blob_end:\n"
	".previous\n");
