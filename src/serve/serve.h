/* Serving metrics over HTTP (--serve ADDR:PORT): the smallest server that
 * Prometheus, the OpenTelemetry Collector or curl can scrape. One thread
 * accepts connections and answers GET /metrics with the last snapshot a
 * sink published (sink/prom.c); nothing it does waits on the probes or the
 * session, and the session never waits on it: a snapshot is swapped in
 * under a lock held for the swap alone, and a reply takes a reference to
 * the snapshot it sends.
 *
 *   http.c     the request: its line and the headers that matter (Accept),
 *              and which exposition format the client asks for
 *   server.c   the socket, the thread and the snapshots
 *
 * Library code: it never prints; a bad address or a port in use is said
 * once through the log hook (core/log.h), before anything is attached. */
#ifndef USC_SERVE_SERVE_H
#define USC_SERVE_SERVE_H

#include <stdbool.h>
#include <stddef.h>

/* The exposition formats a snapshot holds. */
enum serve_format {
	SERVE_TEXT,		/* Prometheus text, version 0.0.4 */
	SERVE_OPENMETRICS,	/* OpenMetrics text, version 1.0.0 */
	SERVE_NFORMATS,
};

extern const char *const serve_content_type[SERVE_NFORMATS];

/* ---- http.c ---------------------------------------------------------------- */

#define HTTP_PATH_MAX 256

enum http_method { HTTP_GET, HTTP_HEAD, HTTP_OTHER };

struct http_request {
	enum http_method method;
	char path[HTTP_PATH_MAX];	/* without the query */
	enum serve_format format;	/* what Accept prefers (SERVE_TEXT without one) */
};

/* Parse a request's head, buf[0..len): its request line and headers, up to
 * the empty line. 1: complete (out filled, *used the bytes of the head);
 * 0: incomplete, read more; -EINVAL: not HTTP/1.x, or malformed. */
int http_parse_request(const char *buf, size_t len, struct http_request *out, size_t *used);

/* The format an Accept header's value prefers: OpenMetrics when it ranks
 * application/openmetrics-text (version 1.0.0, or none given) at least as
 * high as text/plain and any wildcard, with a q above 0; else text. */
enum serve_format http_accept_format(const char *v, size_t len);

/* ---- server.c -------------------------------------------------------------- */

struct serve;

/* Parse ADDR:PORT (an IPv4 address, [IPv6], or a host name that resolves to
 * one; PORT 0 picks a free one), bind to that address only, and listen.
 * 0 (*out set), or -errno with the reason logged as one line (a bad
 * address, a port in use). Nothing is served before serve_start. */
int serve_open(const char *addr, struct serve **out);
/* The address bound, as "ADDR:PORT" (the chosen port for 0). */
const char *serve_address(const struct serve *sv);
/* Start answering, on a thread of its own. 0 or -errno (logged). */
int serve_start(struct serve *sv);
/* A new snapshot: body[f] (len[f] bytes) for each format, owned by the
 * server from now on (freed with free()). Replies started before keep
 * the one they took. 0, or -ENOMEM (the bodies are freed). */
int serve_publish(struct serve *sv, char *body[SERVE_NFORMATS], const size_t len[SERVE_NFORMATS]);
/* Stop the thread, close the socket, free everything. */
void serve_close(struct serve *sv);

#endif
