/*
 * test_engine_cursor.c - the engine contract's cursors (kv/engine.h,
 * contract 6), run by test_engine.c on each engine: walks both ways over
 * keys that are prefixes of others, seeks, deletes as a walk goes, moves
 * on after writes ahead of it, long walks against the model, and a read
 * transaction's cursor kept across its reset.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "engine_test.h"

/* ------------------------------------------------------------- cursors -- */

/* Keys that are prefixes of others, and bytes past 0x7f. */
static const kv_val ckeys[] = {K("\x01"), K("\x01\x00"), K("\x01\x00\x00"), K("\x01\x01"),
			       K("\x02"), K("\x80"), K("\xff"), K("\xff\xff")};
#define NCKEYS (sizeof(ckeys) / sizeof(ckeys[0]))

static void put_ckeys(kv_env *e)
{
	kv_etxn *x = wbegin(e, NULL);

	for (size_t i = 0; i < NCKEYS; i++)
		put_ok(e, x, KV_DB_DIRENT, ckeys[i], i % 2 ? K("") : K("value"));
	commit_ok(e, x);
}

/* Both ways, turning back, seeking, past either end. */
void cursor_moves(void **state)
{
	struct fix *f = *state;
	kv_env *e = f->e;
	kv_val seek;
	kv_etxn *x;
	kv_ecur *c;

	put_ckeys(e);
	x = wbegin(e, NULL);
	assert_int_equal(ENG->cur_open(e, x, KV_DB_DIRENT, &c), 0);
	cur_is(e, c, KV_NEXT, NULL, &ckeys[0]); /* NEXT unpositioned: FIRST */
	for (size_t i = 1; i < NCKEYS; i++)
		cur_is(e, c, KV_NEXT, NULL, &ckeys[i]);
	cur_is(e, c, KV_NEXT, NULL, NULL);
	if (the->ends_unposition) {
		cur_is(e, c, KV_NEXT, NULL, &ckeys[0]); /* unpositioned again: FIRST */
		cur_is(e, c, KV_NEXT, NULL, &ckeys[1]);
	} else {
		cur_is(e, c, KV_FIRST, NULL, &ckeys[0]);
		cur_is(e, c, KV_NEXT, NULL, &ckeys[1]);
	}
	cur_is(e, c, KV_PREV, NULL, &ckeys[0]); /* turning back */
	cur_is(e, c, KV_PREV, NULL, NULL);
	cur_is(e, c, KV_LAST, NULL, &ckeys[NCKEYS - 1]);
	for (size_t i = NCKEYS - 1; i-- > 0;)
		cur_is(e, c, KV_PREV, NULL, &ckeys[i]);
	cur_is(e, c, KV_PREV, NULL, NULL);
	cur_is(e, c, KV_LAST, NULL, &ckeys[NCKEYS - 1]);
	cur_is(e, c, KV_PREV, NULL, &ckeys[NCKEYS - 2]);
	cur_is(e, c, KV_NEXT, NULL, &ckeys[NCKEYS - 1]);
	cur_is(e, c, KV_NEXT, NULL, NULL);

	seek = K("\x01\x00");
	cur_is(e, c, KV_SET_KEY, &seek, &ckeys[1]);
	cur_is(e, c, KV_NEXT, NULL, &ckeys[2]);
	seek = K("\x01\x00\x00\x00");
	cur_is(e, c, KV_SET_KEY, &seek, NULL);
	cur_is(e, c, KV_SET_RANGE, &seek, &ckeys[3]); /* a longer key sorts after its prefix */
	cur_is(e, c, KV_PREV, NULL, &ckeys[2]);
	seek = K("\x7f\xff");
	cur_is(e, c, KV_SET_RANGE, &seek, &ckeys[5]);
	seek = K("\xff\xff\x00");
	cur_is(e, c, KV_SET_RANGE, &seek, NULL);
	seek = K("\x00");
	cur_is(e, c, KV_SET_RANGE, &seek, &ckeys[0]);
	ENG->cur_close(e, c);
	wabort(e, x);
}

/* A cursor sees its txn's writes made after it was positioned (contract
 * 6), ahead of it and behind, in the txn and in its children. */
void cursor_sees_writes(void **state)
{
	struct fix *f = *state;
	kv_env *e = f->e;
	kv_etxn *x, *child;
	kv_ecur *c;
	kv_val k, v;

	put_ckeys(e);
	x = wbegin(e, NULL);
	assert_int_equal(ENG->cur_open(e, x, KV_DB_DIRENT, &c), 0);
	cur_is(e, c, KV_FIRST, NULL, &ckeys[0]);
	put_ok(e, x, KV_DB_DIRENT, K("\x01\x00\x00\x80"), K("new")); /* just ahead */
	put_ok(e, x, KV_DB_DIRENT, K("\xff\xff\xff"), K("last"));   /* past the end */
	k = K("\x01\x01");
	assert_int_equal(ENG->del(e, x, KV_DB_DIRENT, &k), 0);      /* one ahead goes */
	cur_is(e, c, KV_NEXT, NULL, &ckeys[1]);
	cur_is(e, c, KV_NEXT, NULL, &ckeys[2]);
	k = K("\x01\x00\x00\x80");
	cur_is(e, c, KV_NEXT, NULL, &k);
	cur_is(e, c, KV_NEXT, NULL, &ckeys[4]);
	put_ok(e, x, KV_DB_DIRENT, K("\x01\x00\x00\x90"), K("behind"));
	k = K("\x01\x00\x00\x90");
	cur_is(e, c, KV_PREV, NULL, &k);
	/* the current value overwritten: GET_CURRENT shows the new one */
	put_ok(e, x, KV_DB_DIRENT, k, K("again"));
	assert_int_equal(ENG->cur_get(e, c, &k, &v, KV_GET_CURRENT), 0);
	assert_int_equal(v.size, 5);
	assert_memory_equal(v.data, "again", 5);
	/* a child's writes: gone with its abort, kept by its commit */
	child = wbegin(e, x);
	put_ok(e, child, KV_DB_DIRENT, K("\x01\x00\x00\x95"), K("child"));
	wabort(e, child);
	cur_is(e, c, KV_NEXT, NULL, &ckeys[4]);
	child = wbegin(e, x);
	put_ok(e, child, KV_DB_DIRENT, K("\x02\x00"), K("child"));
	commit_ok(e, child);
	k = K("\x02\x00");
	cur_is(e, c, KV_NEXT, NULL, &k);
	/* near either end, all rows there read: a key put past the end, or
	 * before the first, shows too */
	k = K("\xff\xff");
	cur_is(e, c, KV_SET_RANGE, &k, &k);
	put_ok(e, x, KV_DB_DIRENT, K("\xff\xff\xff\xff"), K("end"));
	cur_is(e, c, KV_NEXT, NULL, &K("\xff\xff\xff"));
	cur_is(e, c, KV_NEXT, NULL, &K("\xff\xff\xff\xff"));
	cur_is(e, c, KV_NEXT, NULL, NULL);
	cur_is(e, c, KV_LAST, NULL, &K("\xff\xff\xff\xff"));
	for (int i = 0; i < 11; i++) /* to the first of 12, reading rows backwards */
		assert_int_equal(ENG->cur_get(e, c, &k, &v, KV_PREV), 0);
	cur_is(e, c, KV_PREV, NULL, NULL);
	k = ckeys[2];
	cur_is(e, c, KV_SET_KEY, &k, &ckeys[2]);
	cur_is(e, c, KV_PREV, NULL, &ckeys[1]); /* the rows back to the first read */
	put_ok(e, x, KV_DB_DIRENT, K("\x00\x01"), K("start"));
	cur_is(e, c, KV_PREV, NULL, &ckeys[0]);
	cur_is(e, c, KV_PREV, NULL, &K("\x00\x01"));
	cur_is(e, c, KV_PREV, NULL, NULL);
	cur_is(e, c, KV_FIRST, NULL, &K("\x00\x01"));
	cur_is(e, c, KV_NEXT, NULL, &ckeys[0]);
	cur_is(e, c, KV_PREV, NULL, &K("\x00\x01"));
	put_ok(e, x, KV_DB_DIRENT, K("\x00"), K("start"));
	cur_is(e, c, KV_PREV, NULL, &K("\x00"));
	ENG->cur_close(e, c);
	commit_ok(e, x);
}

/* Seeks among the rows a cursor read (pg.c answers them from those rows
 * while they tell): a key put or deleted in their span since, or put while
 * the cursor stood nowhere, shows. */
void cursor_seeks(void **state)
{
	struct fix *f = *state;
	kv_env *e = f->e;
	kv_etxn *x;
	kv_ecur *c;
	kv_val k;

	put_ckeys(e);
	x = wbegin(e, NULL);
	assert_int_equal(ENG->cur_open(e, x, KV_DB_DIRENT, &c), 0);
	k = ckeys[0];
	cur_is(e, c, KV_SET_RANGE, &k, &ckeys[0]);
	k = ckeys[2];
	cur_is(e, c, KV_SET_KEY, &k, &ckeys[2]);
	k = K("\x01\x00\x00\x01"); /* between two keys */
	cur_is(e, c, KV_SET_RANGE, &k, &ckeys[3]);
	cur_is(e, c, KV_SET_KEY, &k, NULL);
	put_ok(e, x, KV_DB_DIRENT, K("\x01\x00\x00\x02"), K("new")); /* standing nowhere */
	cur_is(e, c, KV_SET_RANGE, &k, &K("\x01\x00\x00\x02"));
	put_ok(e, x, KV_DB_DIRENT, K("\x01\x00\x00\x03"), K("newer")); /* among its rows */
	k = K("\x01\x00\x00\x03");
	cur_is(e, c, KV_SET_KEY, &k, &k);
	k = ckeys[1];
	assert_int_equal(ENG->del(e, x, KV_DB_DIRENT, &k), 0);
	cur_is(e, c, KV_SET_KEY, &k, NULL);
	k = ckeys[0];
	cur_is(e, c, KV_SET_RANGE, &k, &ckeys[0]);
	cur_is(e, c, KV_NEXT, NULL, &ckeys[2]);
	ENG->cur_close(e, c);
	commit_ok(e, x);
}

/* After cur_del, NEXT gives the key after the one deleted, also at the
 * end; deleting a whole map as a walk. */
void cursor_del(void **state)
{
	struct fix *f = *state;
	kv_env *e = f->e;
	kv_etxn *x;
	kv_ecur *c;
	kv_val k, v;
	uint64_t n;

	put_ckeys(e);
	x = wbegin(e, NULL);
	k = ckeys[1];
	assert_int_equal(ENG->get(e, x, KV_DB_DIRENT, &k, &v), 0); /* known before it goes */
	assert_int_equal(ENG->cur_open(e, x, KV_DB_DIRENT, &c), 0);
	k = ckeys[1];
	cur_is(e, c, KV_SET_KEY, &k, &ckeys[1]);
	assert_int_equal(ENG->cur_del(e, c), 0);
	cur_is(e, c, KV_NEXT, NULL, &ckeys[2]);
	assert_int_equal(ENG->cur_del(e, c), 0);
	cur_is(e, c, KV_NEXT, NULL, &ckeys[3]);
	cur_is(e, c, KV_PREV, NULL, &ckeys[0]);
	cur_is(e, c, KV_LAST, NULL, &ckeys[NCKEYS - 1]);
	assert_int_equal(ENG->cur_del(e, c), 0);
	cur_is(e, c, KV_NEXT, NULL, NULL);
	k = ckeys[1];
	assert_int_equal(ENG->get(e, x, KV_DB_DIRENT, &k, &v), KV_ENOTFOUND);
	assert_int_equal(ENG->count(e, x, KV_DB_DIRENT, &n), 0);
	assert_int_equal(n, NCKEYS - 3);
	/* a walk that deletes all */
	for (int rc = ENG->cur_get(e, c, &k, &v, KV_FIRST); rc == 0;
	     rc = ENG->cur_get(e, c, &k, &v, KV_NEXT))
		assert_int_equal(ENG->cur_del(e, c), 0);
	assert_int_equal(ENG->count(e, x, KV_DB_DIRENT, &n), 0);
	assert_int_equal(n, 0);
	cur_is(e, c, KV_FIRST, NULL, NULL);
	ENG->cur_close(e, c);
	commit_ok(e, x);
}

/* A walk over many keys, with values kept while it goes on: every value
 * handed out stays as it was until cur_forget (contract 5). */
void cursor_long_walk(void **state)
{
	struct fix *f = *state;
	kv_env *e = f->e;
	struct model m = {0};
	kv_val k, v, first_v;
	unsigned char key[8], first[64];
	kv_etxn *x;
	kv_ecur *c;

	x = wbegin(e, NULL);
	for (unsigned i = 0; i < 3000; i++) {
		char val[32];
		int n = snprintf(val, sizeof(val), "value %u", i);

		kv_put_be64(key, (uint64_t)i * 7919 % 3001);
		put_ok(e, x, KV_DB_INODE, (kv_val){8, key}, (kv_val){(size_t)n, val});
		m_put(&m, key, 8, val, (size_t)n);
	}
	commit_ok(e, x);
	x = NULL;
	assert_int_equal(ENG->read_begin(e, &x), 0);
	walk_is(e, x, KV_DB_INODE, &m);
	assert_int_equal(ENG->cur_open(e, x, KV_DB_INODE, &c), 0);
	assert_int_equal(ENG->cur_get(e, c, &k, &first_v, KV_FIRST), 0);
	memcpy(first, first_v.data, first_v.size);
	for (size_t i = 1; i < m.n; i++) {
		assert_int_equal(ENG->cur_get(e, c, &k, &v, KV_NEXT), 0);
		ent_is(&m.a[i], &k, &v);
	}
	assert_memory_equal(first_v.data, first, first_v.size);
	ENG->cur_close(e, c);
	assert_memory_equal(first_v.data, first, first_v.size); /* to the txn's end */
	ENG->read_free(e, x);
	m_free(&m);
}

/* A read transaction's cursor kept while it is reset, renewed. */
void cursor_renew(void **state)
{
	struct fix *f = *state;
	kv_env *e = f->e;
	kv_etxn *rx = NULL, *x;
	kv_ecur *c;

	put_ckeys(e);
	assert_int_equal(ENG->read_begin(e, &rx), 0);
	assert_int_equal(ENG->cur_open(e, rx, KV_DB_DIRENT, &c), 0);
	cur_is(e, c, KV_LAST, NULL, &ckeys[NCKEYS - 1]);
	ENG->read_end(e, rx);
	x = wbegin(e, NULL);
	put_ok(e, x, KV_DB_DIRENT, K("\xff\xff\xff"), K("v"));
	commit_ok(e, x);
	assert_int_equal(ENG->read_begin(e, &rx), 0);
	assert_int_equal(ENG->cur_renew(e, rx, c), 0);
	cur_is(e, c, KV_NEXT, NULL, &ckeys[0]); /* not positioned after renew */
	{
		kv_val last = K("\xff\xff\xff");

		cur_is(e, c, KV_LAST, NULL, &last);
	}
	ENG->cur_close(e, c);
	ENG->read_free(e, rx);
}
