/*
 * data_model.c - the model test_data.c checks kv/data.c against: a file as
 * its bytes, size and the stored length of each block, changed by the same
 * operations as the store; and the helpers that run those operations on
 * the store and compare the two (data_model.h).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "data_model.h"
#include "kv_int.h"
#include "testutil.h"

/* ------------------------------------------------------------ model -- */

void m_init(struct model *m, uint64_t bs)
{
	memset(m, 0, sizeof(*m));
	m->bs = bs;
	m->buf = calloc(NB, bs);
	assert_non_null(m->buf);
}

uint64_t m_nblocks(const struct model *m)
{
	uint64_t n = 0;

	for (int i = 0; i < NB; i++)
		n += m->blen[i] > 0 || m->unw[i];
	return n;
}

uint64_t m_unwritten(const struct model *m)
{
	uint64_t n = 0;

	for (int i = 0; i < NB; i++)
		n += m->unw[i];
	return n;
}

void m_write(struct model *m, uint64_t off, const void *src, size_t len)
{
	uint64_t end = off + len;

	assert_true(end <= NB * m->bs);
	memcpy(m->buf + off, src, len);
	for (uint64_t idx = off / m->bs; idx * m->bs < end; idx++) {
		uint64_t to = end - idx * m->bs < m->bs ? end - idx * m->bs : m->bs;
		if (m->blen[idx] < to)
			m->blen[idx] = to;
		m->unw[idx] = 0; /* written: a block of bytes */
	}
	if (end > m->size)
		m->size = end;
}

/* Drop or trim what lies in [off, end): whole blocks go, a block keeps the
 * bytes before off, a range inside a block becomes zeros. */
void m_zero(struct model *m, uint64_t off, uint64_t end)
{
	memset(m->buf + off, 0, end - off);
	for (uint64_t idx = off / m->bs; idx * m->bs < end; idx++) {
		uint64_t at = idx * m->bs;
		uint64_t from = off > at ? off - at : 0;
		uint64_t to = end - at < m->bs ? end - at : m->bs;
		if (m->unw[idx]) /* dropped only when all of it goes */
			m->unw[idx] = !(from == 0 && (to >= m->bs || at + to >= m->size));
		else if (from == 0 && to >= m->blen[idx])
			m->blen[idx] = 0;
		else if (from < m->blen[idx] && to >= m->blen[idx])
			m->blen[idx] = from;
	}
}

void m_truncate(struct model *m, uint64_t size)
{
	if (size < m->size)
		m_zero(m, size, NB * m->bs);
	m->size = size;
}

void m_punch(struct model *m, uint64_t off, uint64_t len)
{
	if (off >= m->size || len == 0)
		return;
	m_zero(m, off, len > m->size - off ? m->size : off + len);
}

/* fallocate's allocation: every block of [off, end) within the size is
 * stored: an unwritten block where it was a hole, a short one filled out
 * with zeros to the size. */
void m_allocate(struct model *m, uint64_t off, uint64_t end)
{
	if (end > m->size)
		end = m->size;
	for (uint64_t idx = off / m->bs; off < end && idx <= (end - 1) / m->bs; idx++) {
		uint64_t want = m->size - idx * m->bs < m->bs ? m->size - idx * m->bs : m->bs;
		if (m->blen[idx] == 0)
			m->unw[idx] = 1;
		else if (m->blen[idx] < want)
			m->blen[idx] = want;
	}
}

/* Data is every stored block of bytes, whole (to the size), as a page is to
 * tmpfs and a block to ext4; holes, and unwritten blocks (fallocate's,
 * holes to ext4 and tmpfs alike), are the rest up to size. */
int m_seek(const struct model *m, uint64_t off, int whence, uint64_t *out)
{
	uint64_t p = off;

	if (off >= m->size)
		return -ENXIO;
	while (p < m->size) {
		uint64_t at = p / m->bs * m->bs;
		uint64_t data_end = at + (m->blen[p / m->bs] ? m->bs : 0);
		if (p < data_end) {
			if (whence == SEEK_DATA)
				break;
			p = data_end;
		} else {
			if (whence == SEEK_HOLE)
				break;
			p = at + m->bs;
		}
	}
	if (p >= m->size) {
		if (whence == SEEK_DATA)
			return -ENXIO;
		p = m->size;
	}
	*out = p;
	return 0;
}

/* ----------------------------------------------------- file helpers -- */

struct range_arg {
	uint64_t ino, off, len;
	int punch;
};

static int range_apply(kv_txn *t, void *p)
{
	struct range_arg *a = p;
	struct kv_inode in;
	int rc;

	rc = kv_inode_get(t, a->ino, &in);
	if (rc)
		return rc;
	rc = a->punch ? kv_data_punch(t, &in, a->off, a->len) : kv_data_truncate(t, &in, a->off);
	if (!rc)
		rc = kv_inode_put(t, &in);
	return rc;
}

int f_truncate(kv_env *e, uint64_t ino, uint64_t size)
{
	struct range_arg a = {.ino = ino, .off = size};

	return kv_write(e, range_apply, &a, 0);
}

int f_punch(kv_env *e, uint64_t ino, uint64_t off, uint64_t len)
{
	struct range_arg a = {.ino = ino, .off = off, .len = len, .punch = 1};

	return kv_write(e, range_apply, &a, 0);
}

int f_seek(kv_env *e, uint64_t ino, uint64_t off, int whence, uint64_t *out)
{
	struct kv_inode in;
	kv_txn *t;
	int rc;

	assert_int_equal(kv_read_begin(e, &t), 0);
	rc = kv_inode_get(t, ino, &in);
	if (!rc)
		rc = kv_data_seek(t, ino, in.size, off, whence, out);
	kv_read_end(t);
	return rc;
}

uint64_t f_new(kv_env *e, const char *name)
{
	uint64_t ino;

	assert_int_equal(tu_mkfile(e, KV_ROOT_INO, name, S_IFREG | 0644, &ino), 0);
	return ino;
}

/* The whole file, its size and nblocks against the model; the image's count
 * of unwritten blocks too (the model's file is the only one with any). */
void check_model(kv_env *e, uint64_t ino, const struct model *m)
{
	unsigned char *got = malloc(NB * m->bs + 1);
	struct kv_inode in;
	struct kv_usage u;

	assert_non_null(got);
	assert_int_equal(tu_getattr(e, ino, &in), 0);
	assert_true(in.size == m->size);
	assert_true(in.nblocks == m_nblocks(m));
	assert_int_equal(kv_usage_get(e, &u), 0);
	if (u.unwritten != m_unwritten(m))
		fail_msg("%llu unwritten blocks, expected %llu", (unsigned long long)u.unwritten,
			 (unsigned long long)m_unwritten(m));
	/* what room.c keeps for them, as of the last commit */
	assert_true(u.promised_bytes == m_unwritten(m) * 4096);
	/* ask for more than there is: the count stops at the size */
	assert_int_equal(tu_pread(e, ino, 0, NB * m->bs + 1, got), (ssize_t)m->size);
	if (m->size)
		assert_memory_equal(got, m->buf, m->size);
	free(got);
}

void check_range(kv_env *e, uint64_t ino, const struct model *m, uint64_t off, uint64_t len)
{
	unsigned char *got = malloc(len + 1);
	ssize_t want = off >= m->size ? 0 : (ssize_t)(len < m->size - off ? len : m->size - off);

	assert_non_null(got);
	assert_int_equal(tu_pread(e, ino, off, len, got), want);
	if (want)
		assert_memory_equal(got, m->buf + off, (size_t)want);
	free(got);
}

void check_seek(kv_env *e, uint64_t ino, const struct model *m, uint64_t off)
{
	static const int whences[] = {SEEK_DATA, SEEK_HOLE};

	for (int i = 0; i < 2; i++) {
		uint64_t got = 0, want = 0;
		int rc = m_seek(m, off, whences[i], &want);
		assert_int_equal(f_seek(e, ino, off, whences[i], &got), rc);
		if (rc == 0 && got != want)
			fail_msg("seek %s from %llu: %llu, expected %llu",
			         whences[i] == SEEK_DATA ? "data" : "hole", (unsigned long long)off,
			         (unsigned long long)got, (unsigned long long)want);
	}
}

/* Seek from every block boundary, a byte either side, and each block's
 * stored end. */
void check_seeks(kv_env *e, uint64_t ino, const struct model *m)
{
	for (uint64_t idx = 0; idx < NB; idx++) {
		uint64_t at = idx * m->bs;
		check_seek(e, ino, m, at);
		check_seek(e, ino, m, at + 1);
		if (at)
			check_seek(e, ino, m, at - 1);
		check_seek(e, ino, m, at + m->blen[idx]);
	}
}

/* Write through the store and the model, then compare everything. */
void mw(kv_env *e, uint64_t ino, struct model *m, uint64_t off, size_t len, uint64_t seed)
{
	unsigned char *src = malloc(len);

	assert_non_null(src);
	tu_fill(src, len, seed);
	/* half the writes with their checksums computed first, as the daemon
	 * writes: a sum used for the wrong bytes would read back as -EIO */
	if (seed & 1)
		assert_int_equal(tu_pwrite_sums(e, ino, off, src, len), 0);
	else
		assert_int_equal(tu_pwrite(e, ino, off, src, len), 0);
	m_write(m, off, src, len);
	free(src);
	check_model(e, ino, m);
}

/* ------------------------------------------------- fallocate ops -- */

int alloc_apply(kv_txn *t, void *p)
{
	struct alloc_arg *a = p;
	struct kv_inode in;
	int rc = kv_inode_get(t, a->ino, &in);

	if (!rc && a->size > in.size)
		in.size = a->size;
	if (!rc)
		rc = kv_data_allocate(t, &in, a->off, a->end, a->max, &a->next);
	if (!rc)
		rc = kv_inode_put(t, &in);
	return rc;
}

int zero_apply(kv_txn *t, void *p)
{
	struct zero_arg *a = p;
	struct kv_inode in;
	int rc = kv_inode_get(t, a->ino, &in);

	if (!rc && a->grow && a->end > in.size)
		in.size = a->end;
	if (!rc)
		rc = kv_data_zero(t, &in, a->off, a->end);
	if (!rc)
		rc = kv_inode_put(t, &in);
	return rc;
}
