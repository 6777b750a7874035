/* op.c: see op.h. */
#include "op.h"

#include <stdlib.h>
#include <string.h>

size_t storage_op_records(const struct storage_op *op)
{
	if (op->type != STORAGE_OP_BATCH)
		return 1;
	size_t n = op->n_iters + op->n_phases + op->n_kernels + op->n_raw_kernels;
	return n ? n : 1;
}

struct op_arena {
	size_t cap, used;
	_Alignas(16) unsigned char mem[];
};

struct storage_op_full {
	struct storage_op op;
	struct op_arena *arena;
};

struct storage_op *storage_op_new(enum storage_op_type type, size_t arena_bytes)
{
	size_t head = (sizeof(struct storage_op_full) + 15) & ~(size_t)15;
	unsigned char *m = malloc(head + sizeof(struct op_arena) + arena_bytes);
	if (!m)
		return NULL;
	struct storage_op_full *f = (struct storage_op_full *)m;
	memset(f, 0, sizeof *f);
	f->op.type = type;
	f->arena = (struct op_arena *)(m + head);
	f->arena->cap = arena_bytes;
	f->arena->used = 0;
	return &f->op;
}

void *storage_op_alloc(struct storage_op *op, size_t bytes)
{
	struct op_arena *a = ((struct storage_op_full *)op)->arena;
	size_t off = (a->used + 15) & ~(size_t)15;
	if (off > a->cap || a->cap - off < bytes)
		return NULL;
	a->used = off + bytes;
	return a->mem + off;
}

char *storage_op_strdup(struct storage_op *op, const char *s)
{
	size_t n = strlen(s) + 1;
	char *d = storage_op_alloc(op, n);
	if (d)
		memcpy(d, s, n);
	return d;
}

void storage_op_free(struct storage_op *op) { free(op); }
