/* uscope e2e target: a library whose constructor holds the program before
 * its entry point (LD_PRELOAD it): when USCOPE_TEST_HOLD is set, it prints
 * "held" and waits for a line on stdin. The dynamic linker runs it after it
 * has loaded the libraries, before it jumps to the entry point: where a
 * tracer that follows an exec waits to patch the new program. */
#include <stdlib.h>
#include <unistd.h>

__attribute__((constructor)) static void hold(void)
{
	char c;

	if (!getenv("USCOPE_TEST_HOLD"))
		return;
	if (write(1, "held\n", 5) != 5)
		_exit(1);
	while (read(0, &c, 1) == 1 && c != '\n')
		;
}
