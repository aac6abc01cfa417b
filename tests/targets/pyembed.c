/* A C program that embeds CPython (tests/e2e/test_python_versions.py builds
 * it against each libpython3.X.so): runs the file argv[1] as __main__, with
 * argv[1..] as sys.argv. No Python.h: the three functions it calls are
 * declared here, so any CPython's library links it. */
#include <stdio.h>
#include <stdlib.h>

extern void Py_Initialize(void);
extern int Py_FinalizeEx(void);
extern int PyRun_SimpleString(const char *command);

int main(int argc, char **argv)
{
	char code[4096];
	int n, ret;

	if (argc < 2) {
		fprintf(stderr, "usage: pyembed SCRIPT [ARG...]\n");
		return 2;
	}
	Py_Initialize();
	n = snprintf(code, sizeof(code), "import sys\nsys.argv = %s", "[");
	for (int i = 1; i < argc && n < (int)sizeof(code) - 64; i++)
		n += snprintf(code + n, sizeof(code) - (size_t)n, "%s'%s'", i > 1 ? ", " : "", argv[i]);
	snprintf(code + n, sizeof(code) - (size_t)n,
		 "]\n__file__ = sys.argv[0]\n"
		 "exec(compile(open(__file__).read(), __file__, 'exec'))\n");
	ret = PyRun_SimpleString(code);
	if (Py_FinalizeEx() < 0)
		ret = 1;
	return ret ? 1 : 0;
}
