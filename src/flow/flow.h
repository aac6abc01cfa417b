/* Call flow: pair entries with returns, per thread (per goroutine in Go),
 * into nested frames.
 *
 * Each thread has a stack of open frames; so has each goroutine of a Go
 * program, whose calls may end on another thread than they began
 * (flow_ctx_of says whose an event is). An entry pushes one; a return
 * pops up to and including the most recent frame with the same key (the
 * frames above it missed their returns), which gives its duration; a return
 * whose key is on no frame (its entry was not seen, e.g. tracing started
 * mid-call) is reported at depth 0 with no duration and leaves the stack as it
 * is. Recursion nests naturally. No printing here: the CLI formats. */
#ifndef USC_FLOW_FLOW_H
#define USC_FLOW_FLOW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "probe/event.h"
#include "resolve/resolve.h"

enum flow_kind {
	FLOW_ENTRY,	/* push a frame */
	FLOW_RETURN,	/* pop the most recent frame with the same key */
	FLOW_EVENT,	/* a one-off event: reported at the current depth */
};

struct flow_result {
	size_t depth;		/* entry: depth before the push; return: the popped
				 * frame's depth (0 if unmatched); event: current depth */
	int64_t duration_ns;	/* matched return: time since its entry; else -1 */
	int64_t self_ns;	/* matched return: duration_ns less the time of the
				 * calls it made that returned (uftrace's self
				 * time); else -1 */
	size_t dropped;		/* matched return: frames above it popped with it */
	void *data;		/* matched return: what its entry was fed with */
};

struct flow_state;

struct flow_state *flow_new(void);
void flow_free(struct flow_state *st);

/* Whose calls an event's entry or return pairs with (the ctx of
 * flow_feed): its goroutine's g, where its site fetched g (a Go function's,
 * RESOLVE_GO_PAIRS: a goroutine that blocks may go on on another thread);
 * else its thread's tid. A g is a heap address, never a tid; the top bit
 * keeps them apart all the same. */
uint64_t flow_ctx_of(const struct usc_event *ev);

/* Feed one event of the context ctx (a thread's tid, a goroutine's g:
 * flow_ctx_of). key/keylen name the frame (a function name,
 * a USDT probe's stem); the bytes are compared, not copied, so they must stay
 * valid while a frame holding them may be on a stack (until flow_free).
 * 0 or -ENOMEM (the state is unchanged then). */
int flow_feed(struct flow_state *st, uint64_t ctx, uint64_t time_ns, enum flow_kind kind,
	      const char *key, size_t keylen, struct flow_result *out);

/* The same, the frame an entry opens holding data (flow_result.data at its
 * return). */
int flow_feed_data(struct flow_state *st, uint64_t ctx, uint64_t time_ns, enum flow_kind kind,
		   const char *key, size_t keylen, void *data, struct flow_result *out);

/* What a site's events are to a flow, and their pairing key (bytes owned by
 * the site): a function's entry or return pairs by the function's name; a
 * USDT probe by its name's stem (NAME*entry or *start with *return, *done
 * or *end); a probe at an address or SYMBOL+OFFSET is an event, with
 * unpaired set. */
enum flow_kind flow_classify(const struct usc_site *site, const char **key, size_t *keylen,
			     bool *unpaired);

/* Open frames of ctx (0 for one never seen), and the contexts seen. */
size_t flow_depth(const struct flow_state *st, uint64_t ctx);
size_t flow_nthreads(const struct flow_state *st);

/* The contexts seen, one a call: *it starts at 0; true with *ctx, false
 * past the last. */
bool flow_next_ctx(const struct flow_state *st, size_t *it, uint64_t *ctx);

/* Frame i of ctx's stack: the open frames 0..depth-1, and right after a
 * matched return, the frames it popped too (its own at its depth, then the
 * dropped ones): the call path of a return is frames 0..depth. False past
 * them. */
bool flow_frame(const struct flow_state *st, uint64_t ctx, size_t i, const char **key,
		size_t *keylen, uint64_t *time_ns, void **data);

/* The functions of sites[0..n): one id per distinct pairing key of the
 * sites that pair (flow_classify, not unpaired), numbered in key order.
 * ids[i] is site i's, or UINT32_MAX; keys[id] and lens[id] its bytes (the
 * sites'). 0 or -ENOMEM; free ids and keys (lens is in the same block as
 * keys). */
int flow_functions(const struct usc_site *sites, size_t n, uint32_t **ids, const char ***keys,
		   size_t **lens, size_t *nfuncs);

#endif
