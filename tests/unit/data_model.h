/*
 * data_model.h - a model of one file as kv/data.c should keep it, and the
 * helpers test_data.c drives the store and the model with (data_model.c).
 */
#ifndef KVFS_DATA_MODEL_H
#define KVFS_DATA_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "kv.h"

#define NB 10 /* blocks a model file may span */

/* A file as kv/data.c should keep it: its bytes, its size and the stored
 * length of each block (0: a hole, or an unwritten block when unw). */
struct model {
	uint64_t bs, size;
	size_t blen[NB];
	unsigned char unw[NB]; /* fallocate's: stored, no bytes */
	unsigned char *buf;    /* NB * bs bytes, zero past size */
};

/* The model's operations, as the store's: m_zero drops or trims what lies
 * in a range (truncate's and punch's common part), m_allocate is
 * fallocate's allocation; m_seek answers SEEK_DATA and SEEK_HOLE. */
void m_init(struct model *m, uint64_t bs);
uint64_t m_nblocks(const struct model *m);
uint64_t m_unwritten(const struct model *m);
void m_write(struct model *m, uint64_t off, const void *src, size_t len);
void m_zero(struct model *m, uint64_t off, uint64_t end);
void m_truncate(struct model *m, uint64_t size);
void m_punch(struct model *m, uint64_t off, uint64_t len);
void m_allocate(struct model *m, uint64_t off, uint64_t end);
int m_seek(const struct model *m, uint64_t off, int whence, uint64_t *out);

/* The store's side: each op in a kv_write of its own. */
int f_truncate(kv_env *e, uint64_t ino, uint64_t size);
int f_punch(kv_env *e, uint64_t ino, uint64_t off, uint64_t len);
int f_seek(kv_env *e, uint64_t ino, uint64_t off, int whence, uint64_t *out);
uint64_t f_new(kv_env *e, const char *name);

/* Both sides compared (cmocka assertions): the whole file, a range, the
 * seeks from one offset and from every block boundary; mw writes through
 * both, then compares everything. */
void check_model(kv_env *e, uint64_t ino, const struct model *m);
void check_range(kv_env *e, uint64_t ino, const struct model *m, uint64_t off, uint64_t len);
void check_seek(kv_env *e, uint64_t ino, const struct model *m, uint64_t off);
void check_seeks(kv_env *e, uint64_t ino, const struct model *m);
void mw(kv_env *e, uint64_t ino, struct model *m, uint64_t off, size_t len, uint64_t seed);

/* kv_write ops of fallocate: allocation (kv_data_allocate; size, when
 * larger, set first) and ZERO_RANGE (kv_data_zero; grow: the size set to
 * the range's end first). */
struct alloc_arg {
	uint64_t ino, off, end, max, next, size;
};
int alloc_apply(kv_txn *t, void *p);

struct zero_arg {
	uint64_t ino, off, end;
	int grow;
};
int zero_apply(kv_txn *t, void *p);

#endif
