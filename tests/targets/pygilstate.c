/* A C thread that takes a thread state of its own at each call into Python
 * and gives it back (PyGILState_Ensure, then PyGILState_Release: CPython
 * makes and deletes it each time), N times; each call's Python function
 * cycleI calls mark(I) back through ctypes. tests/e2e/test_python_versions.py
 * builds it against a libpython3.X.so and takes $pystack at mark: the
 * frames of the state the thread has at that call, never of one deleted.
 * With a second argument, a FIFO: it is read to its end before CPython is
 * finalised, so that the code objects stay alive until the test has seen
 * every event (on bpf, uscope names them after the event, from the live
 * process: doc/python.md). No Python.h: what it calls is declared here. */
#include <pthread.h>
#include <stdio.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

extern void Py_Initialize(void);
extern int Py_FinalizeEx(void);
extern int PyRun_SimpleString(const char *command);
extern void *PyEval_SaveThread(void);
extern void PyEval_RestoreThread(void *tstate);
extern int PyGILState_Ensure(void);
extern void PyGILState_Release(int state);

static int calls;

__attribute__((noinline, visibility("default"))) int mark(int i)
{
	volatile int x = i;

	for (int k = 0; k < 3; k++)
		x += k;
	return x - 3;
}

static void *worker(void *arg)
{
	char code[256];

	(void)arg;
	for (int i = 0; i < calls; i++) {
		int g = PyGILState_Ensure();

		snprintf(code, sizeof(code),
			 "import ctypes\ndef cycle%d():\n    ctypes.CDLL(None).mark(%d)\ncycle%d()\n",
			 i, i, i);
		PyRun_SimpleString(code);
		PyGILState_Release(g);
	}
	return 0;
}

int main(int argc, char **argv)
{
	pthread_t t;
	void *ts;

	calls = argc > 1 ? atoi(argv[1]) : 6;
	Py_Initialize();
	ts = PyEval_SaveThread();
	if (pthread_create(&t, 0, worker, 0))
		return 1;
	pthread_join(t, 0);
	if (argc > 2) {
		char b[64];
		int fd = open(argv[2], O_RDONLY);

		while (fd >= 0 && read(fd, b, sizeof(b)) > 0)
			;
		if (fd >= 0)
			close(fd);
	}
	PyEval_RestoreThread(ts);
	return Py_FinalizeEx() < 0;
}
