/* The arena the syntax tree lives in: blocks of 64 KiB, freed at once. */
#include <stdlib.h>
#include <string.h>

#include "script/ast.h"

#define ARENA_BLOCK 65536

struct arena_block {
	struct arena_block *next;
	size_t used, size;
	char data[];
};

struct arena {
	struct arena_block *head;
};

struct arena *arena_new(void)
{
	return calloc(1, sizeof(struct arena));
}

void *arena_alloc(struct arena *a, size_t n)
{
	struct arena_block *b = a->head;

	n = (n + 15) & ~(size_t)15;
	if (!b || b->size - b->used < n) {
		size_t size = n > ARENA_BLOCK ? n : ARENA_BLOCK;

		b = malloc(sizeof(*b) + size);
		if (!b)
			return NULL;
		b->size = size;
		b->used = 0;
		b->next = a->head;
		a->head = b;
	}
	void *p = b->data + b->used;

	b->used += n;
	memset(p, 0, n);
	return p;
}

char *arena_strndup(struct arena *a, const char *s, size_t n)
{
	char *p = arena_alloc(a, n + 1);

	if (p) {
		memcpy(p, s, n);
		p[n] = 0;
	}
	return p;
}

void arena_free(struct arena *a)
{
	if (!a)
		return;
	for (struct arena_block *b = a->head, *next; b; b = next) {
		next = b->next;
		free(b);
	}
	free(a);
}
