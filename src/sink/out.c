/* The event-printing sinks' shared part: see sink_int.h. */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/log.h"
#include "sink/sink.h"
#include "sink/sink_int.h"

void usc_sink_free(struct usc_sink *k)
{
	if (k)
		k->ops->destroy(k);
}

/* All of buf[0..len) to fd: again after a signal, after a short write (the
 * rest), and once fd can take more when it is non-blocking. 0 or errno. */
static int write_all(int fd, const char *buf, size_t len)
{
	while (len) {
		ssize_t n = write(fd, buf, len);

		if (n > 0) {
			buf += n;
			len -= (size_t)n;
		} else if (n < 0 && errno == EINTR) {
			continue;
		} else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			struct pollfd p = {.fd = fd, .events = POLLOUT};

			if (poll(&p, 1, -1) < 0 && errno != EINTR)
				return errno;
		} else {
			return n < 0 ? errno : EIO;
		}
	}
	return 0;
}

/* How much of buf[0..len) one write(2) takes: everything, or where fd is a
 * pipe or a socket, the whole lines within PIPE_BUF bytes (what the kernel
 * writes in one piece there, never mixed with another writer's; a longer
 * line alone). */
static size_t batch_len(const char *buf, size_t len, bool piped)
{
	const char *nl;

	if (!piped || len <= PIPE_BUF)
		return len;
	nl = memrchr(buf, '\n', PIPE_BUF);
	if (!nl)
		nl = memchr(buf + PIPE_BUF, '\n', len - PIPE_BUF);
	return nl ? (size_t)(nl - buf) + 1 : len;
}

/* COMMAND shares the terminal, pipe or file uscope writes to: what goes out
 * goes in whole lines. One write(2) for the whole batch where the kernel
 * keeps a write in one piece (a file: its offset is locked for the write; a
 * terminal), batches of whole lines of at most PIPE_BUF bytes to a pipe or a
 * socket; nothing of it stays in the FILE's buffer, where stdio would flush
 * it at any byte. */
static int write_lines(FILE *fp, const char *buf, size_t len)
{
	int fd = fileno(fp);
	struct stat sb;
	bool piped;

	if (fflush(fp))		/* what was printed through fp before, first */
		return errno ? errno : EIO;
	if (fd < 0) {		/* a stream in memory (svg.c): no file to share */
		if (len && fwrite(buf, 1, len, fp) != len)
			return errno ? errno : EIO;
		return fflush(fp) ? (errno ? errno : EIO) : 0;
	}
	piped = !fstat(fd, &sb) && (S_ISFIFO(sb.st_mode) || S_ISSOCK(sb.st_mode));
	while (len) {
		size_t n = batch_len(buf, len, piped);
		int err = write_all(fd, buf, n);

		if (err)
			return err;
		buf += n;
		len -= n;
	}
	return 0;
}

int sink_write(FILE *fp, const char *buf, size_t len, int *error)
{
	if (*error)
		return *error;
	errno = 0;
	*error = write_lines(fp, buf, len);
	if (*error && *error != EPIPE)
		log_error("cannot write events: %s", strerror(*error));
	return *error;
}

#define FLUSH_AT 65536	/* bytes formatted before they are written */

struct usc_sink *sink_out_new(const struct usc_sink_ops *ops, FILE *fp, bool json)
{
	struct sink_out *o = calloc(1, sizeof(*o));

	if (!o)
		return NULL;
	o->base.ops = ops;
	o->fp = fp;
	o->out.json = json;
	return &o->base;
}

int sink_out_begin(struct usc_sink *k, const struct usc_sink_ctx *s)
{
	struct sink_out *o = container_of(k, struct sink_out, base);

	o->out.cache = s->cache;
	return 0;
}

int sink_out_event(struct usc_sink *k, const struct usc_event *ev)
{
	struct sink_out *o = container_of(k, struct sink_out, base);

	if (output_event(&o->out, ev)) {
		log_error("out of memory");
		return -ENOMEM;
	}
	if (o->out.len < FLUSH_AT)
		return 0;
	sink_write(o->fp, o->out.buf, o->out.len, &o->write_error);
	output_reset(&o->out);
	return o->write_error;
}

int sink_out_flush(struct usc_sink *k)
{
	struct sink_out *o = container_of(k, struct sink_out, base);

	sink_write(o->fp, o->out.buf, o->out.len, &o->write_error);
	output_reset(&o->out);
	return o->write_error;
}

void sink_out_destroy(struct usc_sink *k)
{
	struct sink_out *o = container_of(k, struct sink_out, base);

	output_free(&o->out);
	free(o);
}
