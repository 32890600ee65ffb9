/*
 * test_dirent.c - kv/dirent.c: insert, lookup, remove and replace of names,
 * with real hashes and with forced collisions (kv_name_hash replaced); the
 * errors (-EEXIST, -ENOENT, -ENAMETOOLONG); and readdir by cookie
 * (kv_dir_next) that keeps its place while entries come and go mid-listing.
 */
#include <dirent.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kv_int.h"
#include "testutil.h"

#define DIR_A 1000
#define DIR_B 1001

/* ------------------------------------------------------------ hashes -- */

#define COLLIDING_HASH 0x2a5a5a5a5a5ULL

static uint64_t hash_const(const char *name, size_t len)
{
	(void)name;
	(void)len;
	return COLLIDING_HASH;
}

/* Four buckets: collision lists and several keys at once. */
static uint64_t hash_four(const char *name, size_t len)
{
	return kv_name_hash_xxh3(name, len) & 3;
}

static int collide_setup(void **state)
{
	kv_name_hash = hash_const;
	return tu_setup(state);
}

static int four_setup(void **state)
{
	kv_name_hash = hash_four;
	return tu_setup(state);
}

static int hash_teardown(void **state)
{
	kv_name_hash = kv_name_hash_xxh3;
	return tu_teardown(state);
}

/* --------------------------------------------------- ops as one write -- */

enum dop { D_ADD, D_REMOVE, D_REPLACE };

struct dirent_arg {
	enum dop op;
	uint64_t dir;
	const char *name;
	size_t len;
	uint64_t ino;
	uint8_t type;
};

static int dirent_apply(kv_txn *t, void *p)
{
	struct dirent_arg *a = p;

	switch (a->op) {
	case D_ADD:
		return kv_dirent_add(t, a->dir, a->name, a->len, a->ino, a->type);
	case D_REMOVE:
		return kv_dirent_remove(t, a->dir, a->name, a->len);
	case D_REPLACE:
		return kv_dirent_replace(t, a->dir, a->name, a->len, a->ino, a->type);
	}
	return -EINVAL;
}

static int d_op(kv_env *e, enum dop op, uint64_t dir, const char *name, size_t len, uint64_t ino,
                uint8_t type)
{
	struct dirent_arg a = {op, dir, name, len, ino, type};

	return kv_write(e, dirent_apply, &a, 0);
}

static int d_add(kv_env *e, uint64_t dir, const char *name, uint64_t ino)
{
	return d_op(e, D_ADD, dir, name, strlen(name), ino, DT_REG);
}

static int d_remove(kv_env *e, uint64_t dir, const char *name)
{
	return d_op(e, D_REMOVE, dir, name, strlen(name), 0, 0);
}

/* Look name up; 0 and its ino/type, or the error. Also checks the name
 * bytes handed back. */
static int d_lookup(kv_env *e, uint64_t dir, const char *name, size_t len, uint64_t *ino,
                    uint8_t *type)
{
	struct kv_dirent de;
	kv_txn *t;
	int rc;

	rc = kv_read_begin(e, &t);
	assert_int_equal(rc, 0);
	rc = kv_dirent_lookup(t, dir, name, len, &de);
	if (rc == 0) {
		assert_int_equal(de.namelen, len);
		assert_memory_equal(de.name, name, len);
		*ino = de.ino;
		*type = de.type;
	}
	kv_read_end(t);
	return rc;
}

static uint64_t d_ino(kv_env *e, uint64_t dir, const char *name)
{
	uint64_t ino = 0;
	uint8_t type;
	int rc = d_lookup(e, dir, name, strlen(name), &ino, &type);

	return rc ? 0 : ino;
}

/* ------------------------------------------------------------- tests -- */

static void add_lookup_remove(void **state)
{
	kv_env *e = ((struct tu_image *)*state)->env;
	uint64_t ino;
	uint8_t type;

	assert_int_equal(d_op(e, D_ADD, DIR_A, "file", 4, 500, DT_REG), 0);
	assert_int_equal(d_op(e, D_ADD, DIR_A, "sub", 3, 501, DT_DIR), 0);
	assert_int_equal(d_lookup(e, DIR_A, "file", 4, &ino, &type), 0);
	assert_true(ino == 500);
	assert_int_equal(type, DT_REG);
	assert_int_equal(d_lookup(e, DIR_A, "sub", 3, &ino, &type), 0);
	assert_true(ino == 501);
	assert_int_equal(type, DT_DIR);
	/* a prefix, a longer name and another directory are other names */
	assert_int_equal(d_lookup(e, DIR_A, "fil", 3, &ino, &type), -ENOENT);
	assert_int_equal(d_lookup(e, DIR_A, "files", 5, &ino, &type), -ENOENT);
	assert_int_equal(d_lookup(e, DIR_B, "file", 4, &ino, &type), -ENOENT);
	/* a name with a NUL and high bytes is just bytes */
	assert_int_equal(d_op(e, D_ADD, DIR_A, "a\0\xff", 3, 502, DT_LNK), 0);
	assert_int_equal(d_lookup(e, DIR_A, "a\0\xff", 3, &ino, &type), 0);
	assert_true(ino == 502);
	assert_int_equal(d_lookup(e, DIR_A, "a", 1, &ino, &type), -ENOENT);

	assert_int_equal(d_remove(e, DIR_A, "file"), 0);
	assert_int_equal(d_lookup(e, DIR_A, "file", 4, &ino, &type), -ENOENT);
	assert_int_equal(d_remove(e, DIR_A, "file"), -ENOENT);
	assert_true(d_ino(e, DIR_A, "sub") == 501);
	/* the name is free again */
	assert_int_equal(d_add(e, DIR_A, "file", 503), 0);
	assert_true(d_ino(e, DIR_A, "file") == 503);
}

static void errors(void **state)
{
	kv_env *e = ((struct tu_image *)*state)->env;
	char name[KV_NAME_MAX + 2];
	uint64_t ino;
	uint8_t type;

	assert_int_equal(d_add(e, DIR_A, "x", 10), 0);
	assert_int_equal(d_add(e, DIR_A, "x", 11), -EEXIST);
	assert_true(d_ino(e, DIR_A, "x") == 10); /* the failed add changed nothing */
	assert_int_equal(d_remove(e, DIR_A, "y"), -ENOENT);
	assert_int_equal(d_op(e, D_REPLACE, DIR_A, "y", 1, 12, DT_REG), -ENOENT);
	assert_int_equal(d_lookup(e, DIR_B, "x", 1, &ino, &type), -ENOENT);

	memset(name, 'n', sizeof(name));
	assert_int_equal(d_op(e, D_ADD, DIR_A, name, KV_NAME_MAX + 1, 13, DT_REG), -ENAMETOOLONG);
	assert_int_equal(d_lookup(e, DIR_A, name, KV_NAME_MAX + 1, &ino, &type), -ENAMETOOLONG);
	assert_int_equal(d_op(e, D_REMOVE, DIR_A, name, KV_NAME_MAX + 1, 0, 0), -ENAMETOOLONG);
	assert_int_equal(d_op(e, D_REPLACE, DIR_A, name, KV_NAME_MAX + 1, 13, 0), -ENAMETOOLONG);
	assert_int_equal(d_op(e, D_ADD, DIR_A, name, 1024, 13, DT_REG), -ENAMETOOLONG);
	/* 255 bytes is the longest name */
	assert_int_equal(d_op(e, D_ADD, DIR_A, name, KV_NAME_MAX, 14, DT_REG), 0);
	assert_int_equal(d_lookup(e, DIR_A, name, KV_NAME_MAX, &ino, &type), 0);
	assert_true(ino == 14);
	assert_int_equal(d_op(e, D_ADD, DIR_A, name, KV_NAME_MAX, 15, DT_REG), -EEXIST);
}

static void replace(void **state)
{
	kv_env *e = ((struct tu_image *)*state)->env;
	uint64_t ino;
	uint8_t type;

	assert_int_equal(d_add(e, DIR_A, "target", 20), 0);
	assert_int_equal(d_add(e, DIR_A, "other", 21), 0);
	assert_int_equal(d_op(e, D_REPLACE, DIR_A, "target", 6, 0x1234567890ULL, DT_DIR), 0);
	assert_int_equal(d_lookup(e, DIR_A, "target", 6, &ino, &type), 0);
	assert_true(ino == 0x1234567890ULL);
	assert_int_equal(type, DT_DIR);
	assert_true(d_ino(e, DIR_A, "other") == 21);
}

/* Names c00 .. c(n-1), all on one hash. */
static void collisions(void **state)
{
	kv_env *e = ((struct tu_image *)*state)->env;
	char name[16];
	uint64_t ino;
	uint8_t type;

	assert_true(kv_name_hash("a", 1) == kv_name_hash("b", 1));
	for (int i = 0; i < 20; i++) {
		snprintf(name, sizeof(name), "c%02d", i);
		assert_int_equal(d_add(e, DIR_A, name, 100 + (uint64_t)i), 0);
	}
	for (int i = 0; i < 20; i++) {
		snprintf(name, sizeof(name), "c%02d", i);
		assert_true(d_ino(e, DIR_A, name) == 100 + (uint64_t)i);
		assert_int_equal(d_add(e, DIR_A, name, 999), -EEXIST);
	}
	assert_int_equal(d_lookup(e, DIR_A, "c20", 3, &ino, &type), -ENOENT);
	assert_int_equal(d_remove(e, DIR_A, "c20"), -ENOENT);
	assert_int_equal(d_lookup(e, DIR_A, "c0", 2, &ino, &type), -ENOENT);
	/* same hash, other directory */
	assert_int_equal(d_lookup(e, DIR_B, "c00", 3, &ino, &type), -ENOENT);

	/* remove first, middle and last of the list */
	assert_int_equal(d_remove(e, DIR_A, "c00"), 0);
	assert_int_equal(d_remove(e, DIR_A, "c10"), 0);
	assert_int_equal(d_remove(e, DIR_A, "c19"), 0);
	assert_int_equal(d_remove(e, DIR_A, "c10"), -ENOENT);
	for (int i = 0; i < 20; i++) {
		snprintf(name, sizeof(name), "c%02d", i);
		int gone = i == 0 || i == 10 || i == 19;
		assert_int_equal(d_lookup(e, DIR_A, name, 3, &ino, &type), gone ? -ENOENT : 0);
		if (!gone)
			assert_true(ino == 100 + (uint64_t)i);
	}
	assert_int_equal(d_op(e, D_REPLACE, DIR_A, "c05", 3, 555, DT_FIFO), 0);
	assert_int_equal(d_lookup(e, DIR_A, "c05", 3, &ino, &type), 0);
	assert_true(ino == 555);
	assert_int_equal(type, DT_FIFO);
	assert_true(d_ino(e, DIR_A, "c04") == 104);
	assert_true(d_ino(e, DIR_A, "c06") == 106);
	assert_int_equal(d_add(e, DIR_A, "new", 600), 0);
	assert_true(d_ino(e, DIR_A, "new") == 600);
	/* removing every entry leaves nothing behind */
	for (int i = 1; i < 19; i++) {
		snprintf(name, sizeof(name), "c%02d", i);
		if (i != 10)
			assert_int_equal(d_remove(e, DIR_A, name), 0);
	}
	assert_int_equal(d_remove(e, DIR_A, "new"), 0);
	struct kv_usage u;
	assert_int_equal(kv_usage_get(e, &u), 0);
	assert_true(u.dirents == 0);
}

/* A full collision list: 256 slots, then -ENOSPC. */
static void collision_list_full(void **state)
{
	kv_env *e = ((struct tu_image *)*state)->env;
	char name[16];

	for (int i = 0; i < 256; i++) {
		snprintf(name, sizeof(name), "s%03d", i);
		assert_int_equal(d_add(e, DIR_A, name, 1 + (uint64_t)i), 0);
	}
	assert_int_equal(d_add(e, DIR_A, "s256", 999), -ENOSPC);
	assert_int_equal(d_add(e, DIR_A, "s000", 999), -EEXIST);
	assert_int_equal(d_remove(e, DIR_A, "s100"), 0);
	assert_int_equal(d_add(e, DIR_A, "s256", 999), 0);
	assert_true(d_ino(e, DIR_A, "s256") == 999);
	assert_true(d_ino(e, DIR_A, "s255") == 256);
}

/* ---------------------------------------------------------- readdir -- */

#define LS_MAX 600

/* What a listing saw, by entry number (names are "e%03d"). */
struct listing {
	int present[LS_MAX]; /* exists now */
	int removed[LS_MAX]; /* was removed at some point during the listing */
	int seen[LS_MAX];
	int next_new;       /* number of the next name to create */
	int live, max_live; /* entries present; at most this many */
};

static void ls_name(int i, char name[16])
{
	snprintf(name, 16, "e%03d", i);
}

static void ls_add(kv_env *e, struct listing *ls, int i)
{
	char name[16];

	ls_name(i, name);
	assert_int_equal(d_add(e, DIR_A, name, 10000 + (uint64_t)i), 0);
	ls->present[i] = 1;
	ls->live++;
}

/* One kv_dir_next in its own read transaction, as a readdir request does.
 * Returns the entry number, or -1 at the end. */
static int ls_step(kv_env *e, struct listing *ls, uint64_t *cookie)
{
	struct kv_dirent de;
	uint64_t prev = *cookie;
	char name[16];
	kv_txn *t;
	int rc, i;

	assert_int_equal(kv_read_begin(e, &t), 0);
	rc = kv_dir_next(t, DIR_A, cookie, &de);
	if (rc == -ENOENT) {
		kv_read_end(t);
		return -1;
	}
	assert_int_equal(rc, 0);
	assert_true(*cookie >= KV_COOKIE_FIRST);
	assert_true(*cookie > prev); /* cookies rise as the listing goes */
	assert_int_equal(de.namelen, 4);
	memcpy(name, de.name, 4); /* not NUL-terminated */
	name[4] = '\0';
	assert_int_equal(name[0], 'e');
	i = atoi(name + 1);
	assert_true(de.ino == 10000 + (uint64_t)i);
	assert_int_equal(de.type, DT_REG);
	kv_read_end(t);
	assert_in_range(i, 0, LS_MAX - 1);
	assert_true(ls->present[i]); /* only what exists is listed */
	return i;
}

/* List DIR_A while, after each entry, removing two entries and adding two
 * new ones (seeded; at most max_live present). Every entry present
 * throughout is seen exactly once, nothing is seen twice. */
static void listing_with_churn(kv_env *e, int initial, int max_live, uint64_t seed)
{
	struct listing *ls = calloc(1, sizeof(*ls));
	uint64_t cookie = 0, s = seed;
	int i, steps = 0;

	assert_non_null(ls);
	ls->max_live = max_live;
	for (i = 0; i < initial; i++)
		ls_add(e, ls, i);
	ls->next_new = initial;
	/* an entry of another directory is never listed */
	assert_int_equal(d_add(e, DIR_B, "e999", 1), 0);

	while ((i = ls_step(e, ls, &cookie)) >= 0) {
		assert_int_equal(ls->seen[i], 0);
		ls->seen[i] = 1;
		steps++;
		for (int k = 0; k < 2; k++) {
			int v = (int)(tu_rand(&s) % (uint64_t)ls->next_new);
			char name[16];
			if (!ls->present[v])
				continue;
			ls_name(v, name);
			assert_int_equal(d_remove(e, DIR_A, name), 0);
			ls->present[v] = 0;
			ls->removed[v] = 1;
			ls->live--;
		}
		for (int k = 0; k < 2 && ls->next_new < LS_MAX && ls->live < ls->max_live; k++)
			ls_add(e, ls, ls->next_new++);
	}
	assert_true(steps > initial / 2);
	for (i = 0; i < ls->next_new; i++)
		if (i < initial && !ls->removed[i])
			assert_int_equal(ls->seen[i], 1);
	/* a new listing now sees exactly what is present */
	memset(ls->seen, 0, sizeof(ls->seen));
	cookie = 0;
	while ((i = ls_step(e, ls, &cookie)) >= 0) {
		assert_int_equal(ls->seen[i], 0);
		ls->seen[i] = 1;
	}
	for (i = 0; i < LS_MAX; i++)
		assert_int_equal(ls->seen[i], ls->present[i]);
	free(ls);
}

static void readdir_empty(void **state)
{
	kv_env *e = ((struct tu_image *)*state)->env;
	struct kv_dirent de;
	uint64_t cookie = 0;
	kv_txn *t;

	assert_int_equal(d_add(e, DIR_B, "elsewhere", 1), 0);
	assert_int_equal(d_add(e, DIR_A - 1, "before", 1), 0);
	assert_int_equal(kv_read_begin(e, &t), 0);
	assert_int_equal(kv_dir_next(t, DIR_A, &cookie, &de), -ENOENT);
	kv_read_end(t);
}

/* Cookies below KV_COOKIE_FIRST are the caller's ("." and ".."): a listing
 * resumed from one starts at the beginning. */
static void readdir_low_cookies(void **state)
{
	kv_env *e = ((struct tu_image *)*state)->env;
	struct kv_dirent de;
	kv_txn *t;
	int n;

	for (int i = 0; i < 5; i++) {
		char name[16];
		ls_name(i, name);
		assert_int_equal(d_add(e, DIR_A, name, 10000 + (uint64_t)i), 0);
	}
	for (uint64_t start = 0; start < KV_COOKIE_FIRST; start += 5) {
		uint64_t cookie = start;
		assert_int_equal(kv_read_begin(e, &t), 0);
		for (n = 0; kv_dir_next(t, DIR_A, &cookie, &de) == 0; n++)
			assert_true(cookie >= KV_COOKIE_FIRST);
		kv_read_end(t);
		assert_int_equal(n, 5);
	}
}

static void readdir_churn(void **state)
{
	listing_with_churn(((struct tu_image *)*state)->env, 200, LS_MAX, 1);
}

/* All names on one hash: the cookie's slot part keeps the place. At most
 * 256 entries share a hash, so keep the directory smaller. */
static void readdir_churn_collide(void **state)
{
	listing_with_churn(((struct tu_image *)*state)->env, 60, 200, 2);
}

static void readdir_churn_four(void **state)
{
	listing_with_churn(((struct tu_image *)*state)->env, 150, LS_MAX, 3);
}

/* A listing resumed from the cookie of an entry removed meanwhile goes on
 * with the entries after it. */
static void readdir_resume_after_removed(void **state)
{
	kv_env *e = ((struct tu_image *)*state)->env;
	struct listing *ls = calloc(1, sizeof(*ls));
	uint64_t cookie = 0;
	char name[16];
	int i, first, n = 0;

	assert_non_null(ls);
	for (i = 0; i < 10; i++)
		ls_add(e, ls, i);
	first = ls_step(e, ls, &cookie);
	assert_true(first >= 0);
	ls_name(first, name);
	assert_int_equal(d_remove(e, DIR_A, name), 0);
	ls->present[first] = 0;
	while ((i = ls_step(e, ls, &cookie)) >= 0) {
		assert_true(i != first);
		n++;
	}
	assert_int_equal(n, 9);
	free(ls);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test_setup_teardown(add_lookup_remove, tu_setup, tu_teardown),
	        cmocka_unit_test_setup_teardown(errors, tu_setup, tu_teardown),
	        cmocka_unit_test_setup_teardown(replace, tu_setup, tu_teardown),
	        cmocka_unit_test_setup_teardown(collisions, collide_setup, hash_teardown),
	        cmocka_unit_test_setup_teardown(collision_list_full, collide_setup, hash_teardown),
	        cmocka_unit_test_setup_teardown(errors, collide_setup, hash_teardown),
	        cmocka_unit_test_setup_teardown(replace, collide_setup, hash_teardown),
	        cmocka_unit_test_setup_teardown(readdir_empty, tu_setup, tu_teardown),
	        cmocka_unit_test_setup_teardown(readdir_low_cookies, tu_setup, tu_teardown),
	        cmocka_unit_test_setup_teardown(readdir_low_cookies, collide_setup, hash_teardown),
	        cmocka_unit_test_setup_teardown(readdir_churn, tu_setup, tu_teardown),
	        cmocka_unit_test_setup_teardown(readdir_churn_collide, collide_setup,
	                                        hash_teardown),
	        cmocka_unit_test_setup_teardown(readdir_churn_four, four_setup, hash_teardown),
	        cmocka_unit_test_setup_teardown(readdir_resume_after_removed, tu_setup,
	                                        tu_teardown),
	        cmocka_unit_test_setup_teardown(readdir_resume_after_removed, collide_setup,
	                                        hash_teardown),
	};

	return cmocka_run_group_tests_name("dirent", tests, NULL, NULL);
}
