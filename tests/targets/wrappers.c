/* uscope e2e target: libc's syscall wrappers in a threaded process, each
 * called a known number of times. `wrappers N [FILE]` starts a second thread
 * (glibc's wrappers then take their cancellable path), which waits on a
 * semaphore until the end, then calls, N times each and nothing else of
 * them: openat (FILE, default wrappers.tmp), write, fsync, pread, read,
 * close (that file), send, recv and poll. Its setup (a socketpair) and teardown (unlink, sem_post,
 * join) call none of those nine, and it prints nothing: exit 0 says that
 * every call did what it should. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

static sem_t done;

static void *holder(void *arg)
{
	while (sem_wait(&done))
		;
	return arg;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 3, sv[2];
	const char *path = argc > 2 ? argv[2] : "wrappers.tmp";
	char buf[4];
	pthread_t th;

	if (sem_init(&done, 0, 0) || socketpair(AF_UNIX, SOCK_STREAM, 0, sv) ||
	    pthread_create(&th, NULL, holder, NULL))
		return 1;
	for (int i = 0; i < n; i++) {
		int fd = openat(AT_FDCWD, path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		struct pollfd p = {.fd = sv[1], .events = POLLIN};

		if (fd < 0 || write(fd, "abc", 3) != 3 || fsync(fd) ||
		    pread(fd, buf, 3, 0) != 3 || read(fd, buf, 1) != 0 || close(fd))
			return 2;
		if (send(sv[0], "x", 1, 0) != 1 || poll(&p, 1, -1) != 1 ||
		    recv(sv[1], buf, 1, 0) != 1)
			return 3;
	}
	unlink(path);
	sem_post(&done);
	pthread_join(th, NULL);
	return 0;
}
