// uscope e2e target: C++ operator new and delete in a threaded process.
// `newloop N` starts a second thread (pthread_create: no allocation of
// its own through operator new), which waits until the end, then does N
// times `new Box(i)` and `delete`: N calls of operator new(unsigned long)
// and N of operator delete(void*, unsigned long). It prints "newloop n=N
// sum=S" after the loop.
#include <cstdio>
#include <cstdlib>
#include <pthread.h>
#include <semaphore.h>

struct Box {
	explicit Box(long v) : v(v) {}
	long v;
	long pad[3];
};

static sem_t done;

static void *holder(void *arg)
{
	while (sem_wait(&done))
		;
	return arg;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 3;
	long sum = 0;
	pthread_t th;

	if (sem_init(&done, 0, 0) || pthread_create(&th, nullptr, holder, nullptr))
		return 1;
	for (int i = 0; i < n; i++) {
		Box *volatile b = new Box(i);

		sum += b->v;
		delete b;
	}
	sem_post(&done);
	pthread_join(th, nullptr);
	printf("newloop n=%d sum=%ld\n", n, sum);
	return 0;
}
