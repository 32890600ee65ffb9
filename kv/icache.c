/*
 * icache.c - on a shared store, the inode records this mount's writer
 * committed lately, so that a getattr of one (the kernel asks for a
 * directory's attributes again after each create in it) costs no round
 * trip to the server.
 *
 *   kv_inode_put (an op in the writer's role) --> the op's list
 *   the op's child committed --> the transaction's list
 *   the transaction committed --> the table, by inode number
 *   a put of the inode, another mount's note of it, a lost commit --> gone
 *
 * Invariants:
 *  1. A slot holds a record as a commit of this mount left it, and no
 *     change of this mount to that inode has been put since: the put
 *     empties the slot before its op is told, so a reader that follows the
 *     op never finds the older record.
 *  2. A record another mount changed stays at most until its note arrives
 *     (change.c) and never longer than the caller's max_age: the kernel
 *     caches attributes as long (fs/options.c: timeout), so a reader sees
 *     nothing staler than its kernel could have kept.
 *  3. Only what commits is kept: an op's records reach the transaction's
 *     list when its child commits, and the table when the transaction does;
 *     a failure anywhere drops them (a miss costs a read, never a wrong
 *     answer). The lists are the role's (kv_int.h invariant 2).
 *  4. Readers take the table's lock (env->ic.lock, icache.h) for one
 *     copy; nothing on the read path allocates.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "icache.h"
#include "kv_int.h"

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static struct kv_icache_slot *slot_of(kv_env *e, uint64_t ino)
{
	uint64_t h = ino * 0x9e3779b97f4a7c15ULL;

	return &e->ic.slots[h >> (64 - KV_ICACHE_BITS)];
}

int kv_icache_init(kv_env *e)
{
	if (!e->eng->shared || e->readonly)
		return 0;
	e->ic.slots = calloc(1u << KV_ICACHE_BITS, sizeof(*e->ic.slots));
	e->ic.top = calloc(KV_ICACHE_TOP, sizeof(*e->ic.top));
	if (!e->ic.slots || !e->ic.top) {
		free(e->ic.slots);
		free(e->ic.top);
		e->ic.slots = NULL;
		e->ic.top = NULL;
		return -ENOMEM;
	}
	pthread_mutex_init(&e->ic.lock, NULL);
	return 0;
}

void kv_icache_free(kv_env *e)
{
	if (!e->ic.slots)
		return;
	pthread_mutex_destroy(&e->ic.lock);
	free(e->ic.slots);
	free(e->ic.top);
	e->ic.slots = NULL;
	e->ic.top = NULL;
}

static void forget_locked(kv_env *e, uint64_t ino)
{
	struct kv_icache_slot *s = slot_of(e, ino);

	if (s->in.ino == ino)
		s->in.ino = 0;
}

void kv_icache_forget(kv_env *e, uint64_t ino)
{
	if (!e->ic.slots)
		return;
	pthread_mutex_lock(&e->ic.lock);
	forget_locked(e, ino);
	pthread_mutex_unlock(&e->ic.lock);
}

void kv_icache_forget_all(kv_env *e)
{
	if (!e->ic.slots)
		return;
	pthread_mutex_lock(&e->ic.lock);
	for (size_t i = 0; i < 1u << KV_ICACHE_BITS; i++)
		e->ic.slots[i].in.ino = 0;
	pthread_mutex_unlock(&e->ic.lock);
}

void kv_icache_put(kv_env *e, const struct kv_inode *in)
{
	kv_icache_forget(e, in->ino); /* invariant 1 */
	if (!e->ic.slots)
		return;
	if (e->ic.op_n == KV_ICACHE_OP) {
		/* not kept, and what the transaction kept of it before would
		 * be older: its commit keeps nothing (invariant 3) */
		e->ic.op_lost = 1;
		return;
	}
	e->ic.op[e->ic.op_n] = *in;
	e->ic.op[e->ic.op_n].inline_data = NULL; /* into the transaction's pages */
	e->ic.op_n++;
}

void kv_icache_del(kv_env *e, uint64_t ino)
{
	kv_icache_forget(e, ino);
	if (!e->ic.slots)
		return;
	if (e->ic.op_n == KV_ICACHE_OP) {
		e->ic.op_lost = 1; /* as in kv_icache_put */
		return;
	}
	/* a mark (mode 0): at the commit, whatever the transaction put of it
	 * before goes */
	memset(&e->ic.op[e->ic.op_n], 0, sizeof(e->ic.op[0]));
	e->ic.op[e->ic.op_n++].ino = ino;
}

void kv_icache_op_begin(kv_env *e)
{
	e->ic.op_n = 0;
	e->ic.op_lost = 0;
}

void kv_icache_op_done(kv_env *e)
{
	if (!e->ic.slots)
		return;
	if (e->ic.op_lost)
		e->ic.top_full = 1;
	for (unsigned i = 0; i < e->ic.op_n && !e->ic.top_full; i++) {
		if (e->ic.top_n == KV_ICACHE_TOP) {
			e->ic.top_full = 1; /* the commit keeps none (a mark may be lost) */
			break;
		}
		e->ic.top[e->ic.top_n++] = e->ic.op[i];
	}
	e->ic.op_n = 0;
}

void kv_icache_top_begin(kv_env *e)
{
	e->ic.top_n = 0;
	e->ic.top_full = 0;
	e->ic.op_n = 0;
	e->ic.op_lost = 0;
}

void kv_icache_top_done(kv_env *e)
{
	int64_t now;

	if (!e->ic.slots || !e->ic.top_n || e->ic.top_full) {
		e->ic.top_n = 0;
		return;
	}
	now = now_ns();
	pthread_mutex_lock(&e->ic.lock);
	for (unsigned i = 0; i < e->ic.top_n; i++) { /* in order: the last put wins */
		struct kv_icache_slot *s = slot_of(e, e->ic.top[i].ino);

		if (e->ic.top[i].mode == 0) { /* deleted */
			forget_locked(e, e->ic.top[i].ino);
			continue;
		}
		s->in = e->ic.top[i];
		s->at_ns = now;
	}
	pthread_mutex_unlock(&e->ic.lock);
	e->ic.top_n = 0;
}

int kv_inode_recent(kv_env *e, uint64_t ino, int64_t max_age_ns, struct kv_inode *out)
{
	struct kv_icache_slot *s;
	int rc = -ENOENT;

	if (!e->ic.slots || !ino)
		return -ENOENT;
	s = slot_of(e, ino);
	pthread_mutex_lock(&e->ic.lock);
	if (s->in.ino == ino && now_ns() - s->at_ns < max_age_ns) {
		*out = s->in;
		rc = 0;
	}
	pthread_mutex_unlock(&e->ic.lock);
	return rc;
}
