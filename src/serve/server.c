/* The metrics server: a listening socket bound at serve_open (so a bad
 * address or a port in use is refused before any probe is attached), and
 * a thread that answers one connection at a time with the last snapshot;
 * see serve.h.
 *
 * A connection gets SERVE_DEADLINE_MS to send its request and take the
 * reply, then is closed: a client that stalls delays the next scrape by
 * that much at most, and never the probes or the session. Each reply says
 * Connection: close (a scrape every few seconds does not need keep-alive). */
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/eventfd.h>
#include <sys/socket.h>

#include "core/log.h"
#include "serve/serve.h"

#define SERVE_DEADLINE_MS 5000
#define SERVE_HEAD_MAX 8192

struct snapshot {
	int refs;			/* under the server's lock */
	char *body[SERVE_NFORMATS];
	size_t len[SERVE_NFORMATS];
};

struct serve {
	int fd, wake;
	char addr[INET6_ADDRSTRLEN + 16];
	pthread_t thread;
	bool started;
	pthread_mutex_t lock;		/* held to swap cur, and to count references */
	struct snapshot *cur;
};

static void snapshot_free(struct snapshot *s)
{
	for (int f = 0; s && f < SERVE_NFORMATS; f++)
		free(s->body[f]);
	free(s);
}

static void snapshot_put(struct serve *sv, struct snapshot *s)
{
	bool last;

	if (!s)
		return;
	pthread_mutex_lock(&sv->lock);
	last = --s->refs == 0;
	pthread_mutex_unlock(&sv->lock);
	if (last)
		snapshot_free(s);
}

static struct snapshot *snapshot_get(struct serve *sv)
{
	struct snapshot *s;

	pthread_mutex_lock(&sv->lock);
	s = sv->cur;
	if (s)
		s->refs++;
	pthread_mutex_unlock(&sv->lock);
	return s;
}

int serve_publish(struct serve *sv, char *body[SERVE_NFORMATS], const size_t len[SERVE_NFORMATS])
{
	struct snapshot *s = calloc(1, sizeof(*s)), *old;

	if (!s) {
		for (int f = 0; f < SERVE_NFORMATS; f++)
			free(body[f]);
		return -ENOMEM;
	}
	s->refs = 1;	/* the server's */
	for (int f = 0; f < SERVE_NFORMATS; f++) {
		s->body[f] = body[f];
		s->len[f] = len[f];
	}
	pthread_mutex_lock(&sv->lock);
	old = sv->cur;
	sv->cur = s;
	pthread_mutex_unlock(&sv->lock);
	snapshot_put(sv, old);
	return 0;
}

/* ---- the address -------------------------------------------------------- */

/* Split ADDR:PORT into host and port; -EINVAL (logged) when it is not one. */
static int split_address(const char *addr, char *host, size_t hlen, char *port, size_t plen)
{
	const char *colon, *h = addr, *he;

	if (addr[0] == '[') {
		he = strchr(addr, ']');
		if (!he || he[1] != ':')
			goto bad;
		h = addr + 1;
		colon = he + 1;
	} else {
		colon = strrchr(addr, ':');
		if (!colon || memchr(addr, ':', (size_t)(colon - addr)))
			goto bad;	/* an IPv6 address wants [brackets] */
		he = colon;
	}
	if (he == h || (size_t)(he - h) >= hlen || !colon[1] || strlen(colon + 1) >= plen)
		goto bad;
	for (const char *p = colon + 1; *p; p++)
		if (*p < '0' || *p > '9')
			goto bad;
	if (strlen(colon + 1) > 5 || atoi(colon + 1) > 65535)
		goto bad;
	memcpy(host, h, (size_t)(he - h));
	host[he - h] = 0;
	strcpy(port, colon + 1);
	return 0;
bad:
	log_error("--serve wants ADDR:PORT (127.0.0.1:9464, [::1]:9464, 0.0.0.0:9464 for "
		  "every interface), not '%s'", addr);
	return -EINVAL;
}

static int bind_one(const struct addrinfo *ai, const char *addr)
{
	int one = 1, fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);

	if (fd < 0) {
		int err = errno;

		log_error("cannot serve on %s: %s", addr, strerror(err));
		return -err;
	}
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (ai->ai_family == AF_INET6)
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
	if (bind(fd, ai->ai_addr, ai->ai_addrlen) || listen(fd, 16)) {
		int err = errno;

		close(fd);
		if (err == EADDRINUSE)
			log_error("cannot serve on %s: the port is in use", addr);
		else if (err == EADDRNOTAVAIL)
			log_error("cannot serve on %s: no interface of this machine has that "
				  "address", addr);
		else
			log_error("cannot serve on %s: %s", addr, strerror(err));
		return -err;
	}
	return fd;
}

static void name_bound(struct serve *sv)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	char host[INET6_ADDRSTRLEN] = "?";
	unsigned port = 0;

	if (getsockname(sv->fd, (struct sockaddr *)&ss, &sl))
		return;
	if (ss.ss_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)&ss;

		inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
		port = ntohs(in->sin_port);
		snprintf(sv->addr, sizeof(sv->addr), "%s:%u", host, port);
	} else {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)&ss;

		inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
		port = ntohs(in6->sin6_port);
		snprintf(sv->addr, sizeof(sv->addr), "[%s]:%u", host, port);
	}
}

int serve_open(const char *addr, struct serve **out)
{
	struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
				 .ai_flags = AI_NUMERICSERV | AI_ADDRCONFIG}, *res = NULL;
	char host[256], port[8];
	struct serve *sv;
	int ret, fd = -1;

	*out = NULL;
	ret = split_address(addr, host, sizeof(host), port, sizeof(port));
	if (ret)
		return ret;
	ret = getaddrinfo(host, port, &hints, &res);
	if (ret == EAI_NONAME || ret == EAI_ADDRFAMILY) {
		hints.ai_flags &= ~AI_ADDRCONFIG;	/* loopback alone counts too */
		ret = getaddrinfo(host, port, &hints, &res);
	}
	if (ret) {
		log_error("cannot serve on %s: %s", addr,
			  ret == EAI_SYSTEM ? strerror(errno) : gai_strerror(ret));
		return -EINVAL;
	}
	fd = bind_one(res, addr);	/* the first address the name has */
	freeaddrinfo(res);
	if (fd < 0)
		return fd;
	sv = calloc(1, sizeof(*sv));
	if (!sv) {
		close(fd);
		log_error("out of memory");
		return -ENOMEM;
	}
	sv->fd = fd;
	sv->wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (sv->wake < 0) {
		ret = -errno;
		log_error("cannot serve on %s: %s", addr, strerror(-ret));
		close(fd);
		free(sv);
		return ret;
	}
	pthread_mutex_init(&sv->lock, NULL);
	name_bound(sv);
	*out = sv;
	return 0;
}

const char *serve_address(const struct serve *sv)
{
	return sv->addr;
}

/* ---- the thread ------------------------------------------------------------ */

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Wait until fd is ready for events, the deadline, or a stop. 1 ready, 0 not. */
static int wait_fd(struct serve *sv, int fd, short events, int64_t deadline)
{
	for (;;) {
		struct pollfd p[2] = {{.fd = fd, .events = events}, {.fd = sv->wake, .events = POLLIN}};
		int64_t left = deadline - now_ms();
		int n;

		if (left <= 0)
			return 0;
		n = poll(p, 2, (int)left);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0 || p[1].revents)
			return 0;
		return 1;
	}
}

static bool send_all(struct serve *sv, int fd, const char *b, size_t n, int64_t deadline)
{
	while (n) {
		ssize_t w;

		if (!wait_fd(sv, fd, POLLOUT, deadline))
			return false;
		w = send(fd, b, n, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (w <= 0)
			return false;
		b += w;
		n -= (size_t)w;
	}
	return true;
}

static void reply(struct serve *sv, int fd, int64_t deadline, const char *status,
		  const char *type, const char *extra, const char *body, size_t len, bool head)
{
	char hdr[512];
	int n = snprintf(hdr, sizeof(hdr),
			 "HTTP/1.1 %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n%s"
			 "Connection: close\r\n\r\n", status, type, len, extra);

	if (send_all(sv, fd, hdr, (size_t)n, deadline) && !head)
		send_all(sv, fd, body, len, deadline);
}

static void reply_text(struct serve *sv, int fd, int64_t deadline, const char *status,
		       const char *extra, const char *msg, bool head)
{
	reply(sv, fd, deadline, status, "text/plain; charset=utf-8", extra, msg, strlen(msg), head);
}

/* One connection: its request, then the reply. */
static void answer(struct serve *sv, int fd)
{
	char buf[SERVE_HEAD_MAX];
	size_t have = 0, used = 0;
	int64_t deadline = now_ms() + SERVE_DEADLINE_MS;
	struct http_request rq;
	struct snapshot *s;
	int ret = 0;

	while (have < sizeof(buf)) {
		ssize_t r;

		if (!wait_fd(sv, fd, POLLIN, deadline))
			return;
		r = recv(fd, buf + have, sizeof(buf) - have, MSG_DONTWAIT);
		if (r < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (r <= 0)
			return;
		have += (size_t)r;
		ret = http_parse_request(buf, have, &rq, &used);
		if (ret)
			break;
	}
	if (ret == 0) {
		reply_text(sv, fd, deadline, "431 Request Header Fields Too Large", "",
			   "the request's head is too large\n", false);
		return;
	}
	if (ret < 0) {
		reply_text(sv, fd, deadline, "400 Bad Request", "", "not an HTTP/1.x request\n",
			   false);
		return;
	}
	bool head = rq.method == HTTP_HEAD;

	if (rq.method == HTTP_OTHER) {
		reply_text(sv, fd, deadline, "405 Method Not Allowed", "Allow: GET, HEAD\r\n",
			   "uscope serves GET /metrics\n", false);
		return;
	}
	if (strcmp(rq.path, "/metrics")) {
		reply_text(sv, fd, deadline, "404 Not Found", "", "uscope serves /metrics\n", head);
		return;
	}
	s = snapshot_get(sv);
	if (!s) {
		reply_text(sv, fd, deadline, "503 Service Unavailable", "Retry-After: 1\r\n",
			   "uscope has no snapshot yet: the probes are being placed\n", head);
		return;
	}
	reply(sv, fd, deadline, "200 OK", serve_content_type[rq.format], "",
	      s->body[rq.format], s->len[rq.format], head);
	snapshot_put(sv, s);
}

static void *serve_thread(void *arg)
{
	struct serve *sv = arg;
	sigset_t all;

	/* signals are the session's (it reads them from a signalfd) */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	for (;;) {
		struct pollfd p[2] = {{.fd = sv->fd, .events = POLLIN},
				      {.fd = sv->wake, .events = POLLIN}};
		int fd;

		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			log_warn("the metrics server stopped: %s", strerror(errno));
			return NULL;
		}
		if (p[1].revents)
			return NULL;
		fd = accept4(sv->fd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0)
			continue;	/* the client gave up, or no descriptor left: next */
		answer(sv, fd);
		close(fd);
	}
}

int serve_start(struct serve *sv)
{
	int ret = pthread_create(&sv->thread, NULL, serve_thread, sv);

	if (ret) {
		log_error("cannot start the metrics server: %s", strerror(ret));
		return -ret;
	}
	sv->started = true;
	return 0;
}

void serve_close(struct serve *sv)
{
	uint64_t one = 1;

	if (!sv)
		return;
	if (sv->started) {
		if (write(sv->wake, &one, sizeof(one)) != sizeof(one))
			log_warn("cannot stop the metrics server: %s", strerror(errno));
		pthread_join(sv->thread, NULL);
	}
	close(sv->fd);
	close(sv->wake);
	snapshot_free(sv->cur);
	pthread_mutex_destroy(&sv->lock);
	free(sv);
}
