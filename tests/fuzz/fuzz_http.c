/* libFuzzer target for the metrics server's request parser and Accept
 * negotiation (src/serve/http.c): what any client on the network may send.
 *
 * Checks what they promise: http_parse_request answers 1 (complete), 0
 * (read more) or -EINVAL; a complete head's length is within the input and
 * reading just that head gives the same request; the path is a C string of
 * printable bytes, shorter than HTTP_PATH_MAX; a prefix of a complete head
 * is never malformed where the whole is not; and http_accept_format picks
 * one of the formats. Any violation aborts. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve/serve.h"

#define CHECK(cond)                                                                  \
	do {                                                                         \
		if (!(cond)) {                                                       \
			fprintf(stderr, "fuzz_http: invariant failed: %s (line %d)\n", \
				#cond, __LINE__);                                    \
			abort();                                                     \
		}                                                                    \
	} while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct http_request rq, again;
	size_t used = 0, used2 = 0;
	const char *s = (const char *)data;
	int ret = http_parse_request(s, size, &rq, &used);
	enum serve_format f = http_accept_format(s, size);

	CHECK(f == SERVE_TEXT || f == SERVE_OPENMETRICS);
	CHECK(ret == 1 || ret == 0 || ret == -EINVAL);
	if (ret != 1)
		return 0;
	CHECK(used > 0 && used <= size);
	CHECK(rq.method == HTTP_GET || rq.method == HTTP_HEAD || rq.method == HTTP_OTHER);
	CHECK(rq.format == SERVE_TEXT || rq.format == SERVE_OPENMETRICS);
	CHECK(strlen(rq.path) < HTTP_PATH_MAX);
	for (const char *p = rq.path; *p; p++)
		CHECK((unsigned char)*p > ' ' && *p != 0x7f);
	CHECK(http_parse_request(s, used, &again, &used2) == 1);
	CHECK(used2 == used && again.method == rq.method && again.format == rq.format &&
	      !strcmp(again.path, rq.path));
	/* a prefix: incomplete, or already wrong in itself, never "complete" */
	for (size_t n = used > 64 ? used - 64 : 0; n < used; n++) {
		int r = http_parse_request(s, n, &again, &used2);

		CHECK(r == 0 || r == 1);
		CHECK(r == 0 || used2 <= n);
	}
	return 0;
}
