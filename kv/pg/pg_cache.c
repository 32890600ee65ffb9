/*
 * pg_cache.c - what a PostgreSQL connection's transaction knows of its
 * records, so that a key read again costs no round trip: the values and
 * absences its gets found, what its puts and dels made of them, and the
 * gets it sent ahead of need (engine prefetch) whose results are on their
 * way. An op reads its parent directory's inode, the superblock and a
 * dirent bucket more than once (a create looks its name up, then adds it:
 * two reads of one bucket); each read was a round trip to the server.
 *
 * pg.c asks it before a get, a NOOVERWRITE put and a del, and tells it of
 * every change; entries live in an arena of the top level.
 *
 * Invariants:
 *  1. A live entry says what its connection's transaction holds now at
 *     its innermost level: a value (PC_VAL), no record (PC_NONE), or a get
 *     on its way whose result says it (PC_PEND). No entry says nothing.
 *     Every change of a key in the transaction updates or drops its entry
 *     before the next call (a reserved put's bytes when they go, pg.c).
 *  2. An entry is on the list of the level that learned or changed it
 *     last (depth): a child's commit hands its list to the parent; its
 *     abort drops its entries, as what the child saw or wrote need not hold
 *     for the parent (its changes undone). An entry a child only read is
 *     dropped too: that costs a get again, never a wrong answer.
 *  3. Entries and copied values stay in the arena until the top level
 *     ends: values handed out stay valid (contract 5), and a prefetch's
 *     result finds its entry dead, never freed. At the top level's end the
 *     prefetches still unread lose their entry (pg.c: pg_txn_end).
 *  4. The arena takes at most PC_BYTES_MAX a top level (a window that
 *     writes 64 MiB must not copy it): past it nothing new is kept, and a
 *     change drops its key's entry.
 */
#include <stdlib.h>
#include <string.h>

#include "pg_int.h"

#define PC_BYTES_MAX (8u << 20) /* invariant 4 */
#define PC_CHUNK (64u << 10)    /* the arena grows by chunks of this (or one value) */
#define PC_TAB_MIN 256          /* hash chains at first */

struct pg_chunk {
	struct pg_chunk *next;
	size_t used, cap;
	unsigned char buf[];
};

uint32_t pg_key_hash(enum kv_db db, const void *k, size_t klen)
{
	const unsigned char *p = k;
	uint32_t h = 2166136261u ^ (uint32_t)db; /* FNV-1a */

	for (size_t i = 0; i < klen; i++)
		h = (h ^ p[i]) * 16777619u;
	return h;
}

/* n bytes of the arena, aligned for an entry; NULL past invariant 4. */
static void *arena_take(struct pg_cache *pc, size_t n)
{
	struct pg_chunk *ch = pc->arena;

	n = (n + 15) & ~(size_t)15;
	if (pc->bytes + n > PC_BYTES_MAX)
		return NULL;
	if (!ch || ch->cap - ch->used < n) {
		size_t cap = n > PC_CHUNK ? n : PC_CHUNK;

		ch = malloc(sizeof(*ch) + cap);
		if (!ch)
			return NULL;
		ch->cap = cap;
		ch->used = 0;
		ch->next = pc->arena;
		pc->arena = ch;
	}
	pc->bytes += n;
	ch->used += n;
	return ch->buf + ch->used - n;
}

static int tab_grow(struct pg_cache *pc)
{
	size_t size = pc->tab ? 2 * (pc->mask + 1) : PC_TAB_MIN;
	struct pg_centry **tab = calloc(size, sizeof(*tab));

	if (!tab)
		return -1;
	for (size_t i = 0; pc->tab && i <= pc->mask; i++) {
		struct pg_centry *e = pc->tab[i], *next;

		for (; e; e = next) {
			next = e->hnext;
			e->hnext = tab[e->hash & (size - 1)];
			tab[e->hash & (size - 1)] = e;
		}
	}
	free(pc->tab);
	pc->tab = tab;
	pc->mask = size - 1;
	return 0;
}

static struct pg_centry **find_slot(struct pg_cache *pc, enum kv_db db, const void *k,
				    size_t klen, uint32_t h)
{
	struct pg_centry **pp = &pc->tab[h & pc->mask];

	for (; *pp; pp = &(*pp)->hnext) {
		struct pg_centry *e = *pp;

		if (e->hash == h && e->db == db && e->klen == klen && !memcmp(e->key, k, klen))
			break;
	}
	return pp;
}

struct pg_centry *pg_cache_find(struct pg_conn *c, enum kv_db db, const void *k, size_t klen)
{
	struct pg_cache *pc = &c->cache;

	if (!pc->n)
		return NULL;
	return *find_slot(pc, db, k, klen, pg_key_hash(db, k, klen));
}

static void lvl_unlink(struct pg_centry *e)
{
	*e->lprevp = e->lnext;
	if (e->lnext)
		e->lnext->lprevp = e->lprevp;
}

static void lvl_link(struct pg_cache *pc, struct pg_centry *e, int depth)
{
	e->depth = depth;
	e->lnext = pc->lvl[depth];
	if (e->lnext)
		e->lnext->lprevp = &e->lnext;
	e->lprevp = &pc->lvl[depth];
	pc->lvl[depth] = e;
}

/* Unhash and unlist *pp's entry: dead (invariant 3). */
static void kill(struct pg_cache *pc, struct pg_centry **pp)
{
	struct pg_centry *e = *pp;

	*pp = e->hnext;
	lvl_unlink(e);
	e->state = PC_DEAD;
	pc->n--;
}

void pg_cache_drop(struct pg_conn *c, enum kv_db db, const void *k, size_t klen)
{
	struct pg_cache *pc = &c->cache;
	struct pg_centry **pp;

	if (c->writer) /* what its transaction makes of the key is not kept */
		pg_guess_forget(c->pe, db, k, klen);
	if (!pc->n)
		return;
	pp = find_slot(pc, db, k, klen, pg_key_hash(db, k, klen));
	if (*pp)
		kill(pc, pp);
}

static struct pg_centry *cache_set(struct pg_conn *c, int depth, enum kv_db db, const void *k,
				   size_t klen, enum pg_cstate state, const void *v, size_t vlen,
				   int copy)
{
	struct pg_cache *pc = &c->cache;
	uint32_t h = pg_key_hash(db, k, klen);
	struct pg_centry **pp, *e;

	if ((!pc->tab || pc->n > pc->mask) && tab_grow(pc) && !pc->tab)
		return NULL; /* nothing kept, nothing to drop */
	pp = find_slot(pc, db, k, klen, h);
	e = *pp;
	if (state == PC_VAL && copy && vlen) {
		void *dst = arena_take(pc, vlen);

		if (!dst) {
			if (e)
				kill(pc, pp);
			return NULL;
		}
		memcpy(dst, v, vlen);
		v = dst;
	}
	if (!e) {
		e = arena_take(pc, sizeof(*e) + klen);
		if (!e)
			return NULL;
		*e = (struct pg_centry){.hnext = *pp, .db = (unsigned char)db, .hash = h,
					.klen = klen};
		if (klen)
			memcpy(e->key, k, klen);
		*pp = e;
		pc->n++;
		lvl_link(pc, e, depth);
	} else if (e->depth != depth) {
		lvl_unlink(e);
		lvl_link(pc, e, depth);
	}
	e->state = (unsigned char)state;
	e->owed = 0;
	e->val = state == PC_VAL ? (vlen ? v : "") : NULL;
	e->vlen = state == PC_VAL ? vlen : 0;
	return e;
}

struct pg_centry *pg_cache_set(struct pg_conn *c, int depth, enum kv_db db, const void *k,
			       size_t klen, enum pg_cstate state, const void *v, size_t vlen,
			       int copy)
{
	struct pg_centry *e = cache_set(c, depth, db, k, klen, state, v, vlen, copy);

	if (!e && c->writer) /* not kept: nor what the commit would teach */
		pg_guess_forget(c->pe, db, k, klen);
	return e;
}

void pg_cache_commit(struct pg_conn *c, int depth)
{
	struct pg_cache *pc = &c->cache;

	while (pc->lvl[depth]) {
		struct pg_centry *e = pc->lvl[depth];

		lvl_unlink(e);
		lvl_link(pc, e, depth - 1);
	}
}

void pg_cache_abort(struct pg_conn *c, int depth)
{
	struct pg_cache *pc = &c->cache;

	while (pc->lvl[depth]) {
		struct pg_centry *e = pc->lvl[depth];

		if (c->writer) /* what the parent holds of it is not known here */
			pg_guess_forget(c->pe, e->db, e->key, e->klen);
		kill(pc, find_slot(pc, e->db, e->key, e->klen, e->hash));
	}
}

void pg_cache_end(struct pg_conn *c)
{
	struct pg_cache *pc = &c->cache;
	struct pg_chunk *ch = pc->arena;

	if (pc->n)
		memset(pc->tab, 0, (pc->mask + 1) * sizeof(*pc->tab));
	memset(pc->lvl, 0, sizeof(pc->lvl));
	pc->n = 0;
	pc->bytes = 0;
	if (!ch)
		return;
	while (ch->next) { /* the oldest, last, is kept */
		struct pg_chunk *next = ch->next;

		free(ch);
		ch = next;
	}
	ch->used = 0;
	pc->arena = ch->cap == PC_CHUNK ? ch : NULL;
	if (!pc->arena)
		free(ch);
}

void pg_cache_free(struct pg_conn *c)
{
	pg_cache_end(c);
	free(c->cache.arena);
	free(c->cache.tab);
	c->cache = (struct pg_cache){0};
}
