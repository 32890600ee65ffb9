/*
 * itable.c - the kernel's lookup count of each inode it references.
 *
 * Every entry reply (lookup, create, mknod, mkdir, symlink, link and each
 * readdirplus entry) adds one; FORGET takes them away. An inode whose last
 * name is removed while the kernel still references it becomes an orphan,
 * and is purged when its count reaches 0 (see the diagram in fs.h).
 *
 * Invariants:
 *  1. An entry exists exactly while its count is above 0, so the table holds
 *     what the kernel references and nothing else.
 *  2. Entries come from a per-stripe free list refilled in chunks: a lookup
 *     of an inode already known allocates nothing, a new one allocates only
 *     when the free list is empty (amortized over ITABLE_CHUNK lookups).
 *  3. Each stripe has its own mutex; no call holds two.
 *  4. A mark an entry carries (orphan, short) goes with it: the kernel has
 *     forgotten the inode, and nothing it still holds refers to the mark.
 */
#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "fs.h"

#define STRIPES 64
#define ITABLE_CHUNK 256

struct ient {
	uint64_t ino;
	uint64_t nlookup;
	int orphan;
	int short_; /* a write back of its data failed for want of room */
	int tell;   /* ... and no write(2) has been told yet */
	uint64_t append_from; /* the size it grew from since it settled, + 1 (0: none) */
	unsigned xgen;        /* its xattrs' changes so far */
	int nocap;            /* known to have no security.capability (at xgen) */
	struct ient *next;
};

struct stripe {
	pthread_mutex_t lock;
	struct ient **buckets;
	size_t nbuckets; /* power of two */
	size_t count;
	struct ient *free;
};

static struct stripe stripes[STRIPES];
static atomic_uint nshort; /* entries marked short: 0 keeps the checks to a load */

#ifndef NDEBUG
static __thread int stripe_held; /* invariant 3 */
#endif

static void stripe_lock(struct stripe *s)
{
#ifndef NDEBUG
	assert(!stripe_held);
	stripe_held = 1;
#endif
	pthread_mutex_lock(&s->lock);
}

static void stripe_unlock(struct stripe *s)
{
#ifndef NDEBUG
	assert(stripe_held);
	stripe_held = 0;
#endif
	pthread_mutex_unlock(&s->lock);
}

static inline uint64_t mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	return x;
}

int fs_itable_init(void)
{
	for (int i = 0; i < STRIPES; i++) {
		struct stripe *s = &stripes[i];
		pthread_mutex_init(&s->lock, NULL);
		s->nbuckets = 64;
		s->buckets = calloc(s->nbuckets, sizeof(*s->buckets));
		if (!s->buckets)
			return -ENOMEM;
	}
	return 0;
}

static struct stripe *stripe_of(uint64_t ino, uint64_t *h)
{
	*h = mix(ino);
	return &stripes[*h % STRIPES];
}

static struct ient **slot(struct stripe *s, uint64_t h, uint64_t ino)
{
	struct ient **pp = &s->buckets[(h / STRIPES) & (s->nbuckets - 1)];

	while (*pp && (*pp)->ino != ino)
		pp = &(*pp)->next;
	return pp;
}

static void grow(struct stripe *s)
{
	size_t n = s->nbuckets * 2;
	struct ient **b = calloc(n, sizeof(*b));

	if (!b)
		return; /* longer chains, still correct */
	for (size_t i = 0; i < s->nbuckets; i++) {
		struct ient *e = s->buckets[i], *next;
		for (; e; e = next) {
			size_t j = (mix(e->ino) / STRIPES) & (n - 1);
			next = e->next;
			e->next = b[j];
			b[j] = e;
		}
	}
	free(s->buckets);
	s->buckets = b;
	s->nbuckets = n;
}

static struct ient *ent_alloc(struct stripe *s)
{
	struct ient *e;

	if (!s->free) {
		struct ient *chunk = calloc(ITABLE_CHUNK, sizeof(*chunk));
		if (!chunk)
			return NULL;
		for (int i = 0; i < ITABLE_CHUNK; i++) {
			chunk[i].next = s->free;
			s->free = &chunk[i];
		}
	}
	e = s->free;
	s->free = e->next;
	return e;
}

/* made: ino was just made (fs_itable_ref_made). An xattr of it can change
 * only through a name the kernel got from a reply that counted it, or from
 * another mount once made is committed: with no entry yet, none did. */
static void ref(uint64_t ino, int made)
{
	uint64_t h;
	struct stripe *s = stripe_of(ino, &h);
	struct ient **pp, *e;

	stripe_lock(s);
	pp = slot(s, h, ino);
	if (*pp) {
		assert((*pp)->nlookup > 0); /* invariant 1 */
		(*pp)->nlookup++;
	} else if ((e = ent_alloc(s)) != NULL) {
		*e = (struct ient){.ino = ino, .nlookup = 1, .nocap = made, .next = NULL};
		*pp = e;
		if (++s->count > s->nbuckets * 2)
			grow(s);
	}
	/* out of memory: the inode is not counted, so an unlink purges it at
	 * once, and a reader of it gets ENOENT or EIO, never a crash */
	stripe_unlock(s);
}

void fs_itable_ref(uint64_t ino)
{
	ref(ino, 0);
}

void fs_itable_ref_made(uint64_t ino)
{
	ref(ino, 1);
}

int fs_itable_mark_orphan(uint64_t ino)
{
	uint64_t h;
	struct stripe *s = stripe_of(ino, &h);
	struct ient **pp;
	int referenced;

	stripe_lock(s);
	pp = slot(s, h, ino);
	referenced = *pp != NULL;
	if (referenced)
		(*pp)->orphan = 1;
	stripe_unlock(s);
	return referenced;
}

int fs_itable_forget(uint64_t ino, uint64_t n)
{
	uint64_t h;
	struct stripe *s = stripe_of(ino, &h);
	struct ient **pp, *e;
	int purge = 0;

	stripe_lock(s);
	pp = slot(s, h, ino);
	e = *pp;
	if (e) {
		assert(e->nlookup > 0); /* invariant 1 */
		/* never below 0: the kernel forgets more than was counted only
		 * when fs_itable_ref could not allocate an entry */
		e->nlookup = n >= e->nlookup ? 0 : e->nlookup - n;
		if (e->nlookup == 0) {
			purge = e->orphan;
			if (e->short_) {
				assert(atomic_load(&nshort) > 0);
				atomic_fetch_sub(&nshort, 1);
			}
			assert(s->count > 0);
			*pp = e->next;
			e->next = s->free;
			s->free = e;
			s->count--;
		}
	}
	stripe_unlock(s);
	return purge;
}

/* The entry of ino with its stripe locked, or NULL (stripe unlocked). */
static struct ient *locked(uint64_t ino, struct stripe **sp)
{
	uint64_t h;
	struct stripe *s = stripe_of(ino, &h);
	struct ient *e;

	stripe_lock(s);
	e = *slot(s, h, ino);
	if (!e)
		stripe_unlock(s);
	*sp = s;
	return e;
}

static void set_short(struct ient *e, int on)
{
	if (e->short_ == on)
		return;
	e->short_ = on;
	if (on) {
		atomic_fetch_add(&nshort, 1);
	} else {
		assert(atomic_load(&nshort) > 0);
		atomic_fetch_sub(&nshort, 1);
	}
}

enum mark { MARK_SHORT, MARK_SETTLED, MARK_APPEND, MARK_NO_APPENDS };

/* Change the write-back marks of ino, if the kernel references it. */
static void mark(uint64_t ino, enum mark what, uint64_t from)
{
	struct stripe *s;
	struct ient *e = locked(ino, &s);

	if (!e)
		return;
	switch (what) {
	case MARK_SHORT:
		set_short(e, 1);
		e->tell = 1;
		break;
	case MARK_SETTLED:
		set_short(e, 0);
		e->tell = 0;
		e->append_from = 0;
		break;
	case MARK_APPEND: /* the least size it grew from, + 1 */
		if (!e->append_from || from + 1 < e->append_from)
			e->append_from = from + 1;
		break;
	case MARK_NO_APPENDS:
		e->append_from = 0;
		break;
	}
	stripe_unlock(s);
}

void fs_itable_set_short(uint64_t ino)
{
	mark(ino, MARK_SHORT, 0);
}

void fs_itable_settled(uint64_t ino)
{
	mark(ino, MARK_SETTLED, 0);
}

void fs_itable_note_append(uint64_t ino, uint64_t from)
{
	mark(ino, MARK_APPEND, from);
}

void fs_itable_drop_appends(uint64_t ino)
{
	mark(ino, MARK_NO_APPENDS, 0);
}

/* The short mark of ino, or (take) its tell mark, which it then clears. */
static int short_mark(uint64_t ino, int take)
{
	struct stripe *s;
	struct ient *e;
	int on;

	if (atomic_load(&nshort) == 0)
		return 0;
	e = locked(ino, &s);
	if (!e)
		return 0;
	on = take ? e->tell : e->short_;
	if (take)
		e->tell = 0;
	stripe_unlock(s);
	return on;
}

int fs_itable_short(uint64_t ino)
{
	return short_mark(ino, 0);
}

int fs_itable_take_tell(uint64_t ino)
{
	return short_mark(ino, 1);
}

int fs_itable_nocap(uint64_t ino, unsigned *xgen)
{
	struct stripe *s;
	struct ient *e = locked(ino, &s);
	int no;

	if (!e) {
		*xgen = 0;
		return 0;
	}
	no = e->nocap;
	*xgen = e->xgen;
	stripe_unlock(s);
	return no;
}

void fs_itable_set_nocap(uint64_t ino, unsigned xgen)
{
	struct stripe *s;
	struct ient *e = locked(ino, &s);

	if (!e)
		return;
	if (e->xgen == xgen) /* no change came since the read that found none */
		e->nocap = 1;
	stripe_unlock(s);
}

void fs_itable_xattr_changing(uint64_t ino)
{
	struct stripe *s;
	struct ient *e = locked(ino, &s);

	if (!e)
		return;
	e->xgen++;
	e->nocap = 0;
	stripe_unlock(s);
}

int fs_itable_appended(uint64_t ino, uint64_t *from)
{
	struct stripe *s;
	struct ient *e = locked(ino, &s);
	int set;

	if (!e)
		return 0;
	set = e->append_from != 0;
	if (set)
		*from = e->append_from - 1;
	stripe_unlock(s);
	return set;
}

uint64_t fs_itable_count(void)
{
	uint64_t n = 0;

	for (int i = 0; i < STRIPES; i++) {
		stripe_lock(&stripes[i]);
		n += stripes[i].count;
		stripe_unlock(&stripes[i]);
	}
	return n;
}
