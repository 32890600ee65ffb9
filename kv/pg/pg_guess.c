/*
 * pg_guess.c - what this mount last knew of the small records (the
 * superblock, inodes, dirent buckets, xattrs), so that a batch of the
 * writer can answer its reads without waiting for the server, and send
 * each as a check that goes with its changes: a create is then one round
 * trip (BEGIN, the writers' lock, the checks, the changes, COMMIT), not
 * two (its reads, then its changes and COMMIT). pg.c asks it where a
 * transaction that may guess (KV_TXN_GUESS) knows nothing of a key.
 *
 * Invariants:
 *  1. A guess is never trusted: each read answered from here sends its
 *     check (S_SAME, S_ABSENT) before any change of the transaction can
 *     reach that key, after the writers' lock in the same pipeline; a check
 *     that finds the row otherwise fails the transaction (division by
 *     zero, 22012: KV_EGUESS), which the writer runs again without guesses.
 *     A wrong guess costs a round trip, never a wrong result.
 *  2. Learned from the writer's commits (what each transaction knew of its
 *     keys at its end: pg_cache.c's top level), replacing what was known;
 *     and from readers' gets of keys not known here, when no commit of the
 *     writer came since the reader began (gen), so a reader's older
 *     snapshot does not undo a commit (nor does it replace what is known
 *     of that key; another key in the slot it pushes out). A key a write
 *     transaction changed without keeping what it wrote (a reserved put, a
 *     child's abort) is forgotten then; a reader may learn it again before
 *     the commit, as it was: a guess wrong once, then forgotten (3).
 *  3. A failed check forgets everything, and so does another mount's
 *     message; for a second after one, nothing is guessed (the other
 *     mount is writing: PG_GUESS_QUIET_NS).
 *  4. Slots are taken at open: nothing is allocated after it (a reader's
 *     get learns with one mutex and a copy). A slot holds one key; a key
 *     or value too large for one is not kept.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pg_int.h"

#define PG_GUESS_SLOTS 4096 /* a power of two */
/* Another mount heard this recently: its commits would make most guesses
 * wrong (the superblock's inode counter, a directory both write in), and
 * each wrong one costs a round trip more than reading. */
#define PG_GUESS_QUIET_NS 1000000000LL
#define PG_GUESS_KMAX 48
#define PG_GUESS_VMAX PG_GUESS_VBUF

struct pg_gslot {
	uint32_t hash;
	unsigned char db, state; /* PC_DEAD: empty; PC_VAL or PC_NONE */
	uint16_t klen, vlen;
	unsigned char key[PG_GUESS_KMAX];
	unsigned char val[PG_GUESS_VMAX];
};

struct pg_guess {
	atomic_llong heard; /* pg_guess_heard's time */
	pthread_mutex_t lock;
	atomic_uint gen; /* the writer's commits learned (changed under lock) */
	struct pg_gslot slot[PG_GUESS_SLOTS];
};

int pg_guess_db(enum kv_db db)
{
	return db == KV_DB_META || db == KV_DB_INODE || db == KV_DB_DIRENT || db == KV_DB_XATTR;
}

int pg_guess_init(struct pg_env *pe)
{
	struct pg_guess *g = calloc(1, sizeof(*g));

	if (!g)
		return ENOMEM;
	pthread_mutex_init(&g->lock, NULL);
	pe->guess = g;
	return 0;
}

void pg_guess_free(struct pg_env *pe)
{
	if (!pe->guess)
		return;
	pthread_mutex_destroy(&pe->guess->lock);
	free(pe->guess);
	pe->guess = NULL;
}

/* The slot of key k of db when it holds that key, else NULL; *sp the slot
 * it would take. */
static struct pg_gslot *gfind(struct pg_guess *g, enum kv_db db, const void *k, size_t klen,
			      uint32_t h, struct pg_gslot **sp)
{
	struct pg_gslot *s = &g->slot[h & (PG_GUESS_SLOTS - 1)];

	*sp = s;
	if (s->state == PC_DEAD || s->hash != h || s->db != db || s->klen != klen ||
	    memcmp(s->key, k, klen))
		return NULL;
	return s;
}

int pg_guess_find(struct pg_env *pe, enum kv_db db, const void *k, size_t klen, void *val,
		  size_t *vlen)
{
	struct pg_guess *g = pe->guess;
	struct pg_gslot *s, *at;
	int state = PC_DEAD;

	if (!g || !pg_guess_db(db) || klen > PG_GUESS_KMAX)
		return PC_DEAD;
	pthread_mutex_lock(&g->lock);
	s = gfind(g, db, k, klen, pg_key_hash(db, k, klen), &at);
	if (s) {
		state = s->state;
		*vlen = s->vlen;
		if (s->vlen)
			memcpy(val, s->val, s->vlen);
	}
	pthread_mutex_unlock(&g->lock);
	return state;
}

unsigned pg_guess_gen(struct pg_env *pe)
{
	return pe->guess ? atomic_load(&pe->guess->gen) : 0;
}

/* Key k of db holds v (PC_VAL) or nothing (PC_NONE); g->lock held. */
static void gset(struct pg_guess *g, enum kv_db db, const void *k, size_t klen, int state,
		 const void *v, size_t vlen, int replace)
{
	uint32_t h = pg_key_hash(db, k, klen);
	struct pg_gslot *at, *s = gfind(g, db, k, klen, h, &at);

	if (s && !replace)
		return; /* a reader's answer never replaces what is known of its key */
	if (klen > PG_GUESS_KMAX || (state == PC_VAL && vlen > PG_GUESS_VMAX)) {
		if (s)
			s->state = PC_DEAD;
		return;
	}
	at->hash = h;
	at->db = (unsigned char)db;
	at->klen = (uint16_t)klen;
	memcpy(at->key, k, klen);
	at->vlen = state == PC_VAL ? (uint16_t)vlen : 0;
	if (at->vlen)
		memcpy(at->val, v, vlen);
	at->state = (unsigned char)state;
}

void pg_guess_read(struct pg_env *pe, unsigned gen, enum kv_db db, const void *k, size_t klen,
		   const void *v, size_t vlen, int found)
{
	struct pg_guess *g = pe->guess;

	if (!g || !pg_guess_db(db))
		return;
	pthread_mutex_lock(&g->lock);
	if (g->gen == gen)
		gset(g, db, k, klen, found ? PC_VAL : PC_NONE, v, vlen, 0);
	pthread_mutex_unlock(&g->lock);
}

void pg_guess_forget(struct pg_env *pe, enum kv_db db, const void *k, size_t klen)
{
	struct pg_guess *g = pe->guess;
	struct pg_gslot *s, *at;

	if (!g || !pg_guess_db(db) || klen > PG_GUESS_KMAX)
		return;
	pthread_mutex_lock(&g->lock);
	s = gfind(g, db, k, klen, pg_key_hash(db, k, klen), &at);
	if (s)
		s->state = PC_DEAD;
	pthread_mutex_unlock(&g->lock);
}

void pg_guess_commit(struct pg_env *pe, struct pg_conn *c)
{
	struct pg_guess *g = pe->guess;

	if (!g)
		return;
	pthread_mutex_lock(&g->lock);
	g->gen++;
	for (struct pg_centry *ce = c->cache.lvl[0]; ce; ce = ce->lnext) {
		if (!pg_guess_db(ce->db))
			continue;
		if (ce->state == PC_VAL || ce->state == PC_NONE)
			gset(g, ce->db, ce->key, ce->klen, ce->state, ce->val, ce->vlen, 1);
	}
	pthread_mutex_unlock(&g->lock);
}

static long long now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

void pg_guess_heard(struct pg_env *pe)
{
	if (pe->guess)
		atomic_store(&pe->guess->heard, now_ns());
	pg_guess_clear(pe);
}

int pg_guess_quiet(struct pg_env *pe)
{
	long long t;

	if (!pe->guess)
		return 0;
	t = atomic_load(&pe->guess->heard);
	return !t || now_ns() - t > PG_GUESS_QUIET_NS;
}

void pg_guess_clear(struct pg_env *pe)
{
	struct pg_guess *g = pe->guess;

	if (!g)
		return;
	pthread_mutex_lock(&g->lock);
	g->gen++;
	for (size_t i = 0; i < PG_GUESS_SLOTS; i++)
		g->slot[i].state = PC_DEAD;
	pthread_mutex_unlock(&g->lock);
}

/* -------------------------------------------- a transaction's guesses -- */

/* A guess of key k of db (pg_guess.c), made what the top level knows, its
 * check owed: it goes with the key's first change (S_SWAP, S_INSERT,
 * S_DELSAME), or alone before the commit or a child's SAVEPOINT (a child's
 * abort would undo the check with the change; children guess nothing);
 * NULL when there is none. */
struct pg_centry *pg_guessed(struct pg_conn *c, int depth, enum kv_db db,
				    const kv_val *k)
{
	unsigned char buf[PG_GUESS_VBUF];
	size_t len = 0;
	struct pg_centry *ce;
	int st = pg_guess_find(c->pe, db, k->data, k->size, buf, &len);

	if (st == PC_DEAD)
		return NULL;
	ce = pg_cache_set(c, depth, db, k->data, k->size, st, buf, len, 1);
	if (ce)
		ce->owed = 1;
	return ce; /* NULL: no room to keep it, the server is asked */
}

/* Send the check entry ce owes, as level depth. */
static int pg_owed_send(struct pg_conn *c, int depth, struct pg_centry *ce)
{
	kv_val k = {ce->klen, ce->key}, v = {ce->vlen, (void *)ce->val};

	ce->owed = 0;
	return pg_send_stmt(c, depth, ce->db, ce->state == PC_VAL ? S_SAME : S_ABSENT, &k, &v, 0,
			    0);
}

int pg_owed_key(struct pg_conn *c, int depth, enum kv_db db, const void *k, size_t klen)
{
	struct pg_centry *ce = c->guessing ? pg_cache_find(c, db, k, klen) : NULL;

	return ce && ce->owed ? pg_owed_send(c, depth, ce) : 0;
}

/* Every check still owed, sent as level depth (before its commit, or a
 * child's SAVEPOINT). Gathered first: a send may read results (a full
 * pipeline), and a prefetch's result may drop entries from the lists. */
int pg_owed_all(struct pg_conn *c, int depth)
{
	struct pg_centry **owed;
	size_t n = 0, i = 0;
	int rc = 0;

	if (!c->guessing)
		return 0;
	for (int d = 0; d <= depth; d++)
		for (struct pg_centry *ce = c->cache.lvl[d]; ce; ce = ce->lnext)
			n += ce->owed;
	if (!n)
		return 0;
	owed = malloc(n * sizeof(*owed));
	if (!owed)
		return ENOMEM;
	for (int d = 0; d <= depth; d++)
		for (struct pg_centry *ce = c->cache.lvl[d]; ce; ce = ce->lnext)
			if (ce->owed)
				owed[i++] = ce;
	for (i = 0; i < n && !rc; i++) /* entries stay in the arena (pg_cache.c) */
		if (owed[i]->owed)
			rc = pg_owed_send(c, depth, owed[i]);
	free(owed);
	return rc;
}

/* Whether a guess's check is still owed (the top level's). */
int pg_owes(struct pg_conn *c)
{
	if (c->guessing)
		for (struct pg_centry *ce = c->cache.lvl[0]; ce; ce = ce->lnext)
			if (ce->owed)
				return 1;
	return 0;
}
