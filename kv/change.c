/*
 * change.c - what one mount of a shared store (engine.h: shared) tells the
 * others, so they drop what their kernels cache of it: the inodes whose
 * records a commit changed, and the names it added or removed.
 *
 * The writer's role notes each change of its open top-level transaction
 * (kv_change_ino from kv_win_mark, kv_change_name from the dirent calls);
 * just before that transaction commits, the notes go to the engine as
 * messages that the store delivers to the other mounts with the commit, or
 * not at all (PostgreSQL: NOTIFY inside the transaction). Each mount hands
 * the others' messages to the function kv_watch set.
 *
 * A message is text (NOTIFY carries text), at most KV_CHANGE_MSG_MAX
 * bytes: "kvfs1 MOUNT" then records, each " iINO" (an inode) or
 * " nDIR/NAME" (a name in directory DIR), numbers and names in lower-case
 * hex. MOUNT (16 hex digits, random per open) lets a mount skip its own.
 *
 * Invariants:
 *  1. Notes only ever add: a change rolled back (an op's child transaction
 *     aborted, a batch replayed) may still be told; telling too much costs
 *     the others a lookup, telling too little a stale cache until the
 *     kernel's timeout ends it (short on shared stores: fs/options.c).
 *  2. The notes are the role's (kv_int.h invariant 2), cleared as each
 *     top-level write transaction begins.
 */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "change.h"
#include "kv_int.h"

#define MSG_HEAD KV_CHANGE_HEAD

static const char hexd[] = "0123456789abcdef";

static int note(kv_env *e, const char *rec, size_t len)
{
	if (e->chg.len + len > e->chg.cap) {
		size_t cap = e->chg.cap ? e->chg.cap * 2 : 4096;
		char *p;

		while (cap < e->chg.len + len)
			cap *= 2;
		p = realloc(e->chg.buf, cap);
		if (!p)
			return -ENOMEM;
		e->chg.buf = p;
		e->chg.cap = cap;
	}
	memcpy(e->chg.buf + e->chg.len, rec, len);
	e->chg.len += len;
	return 0;
}

static size_t put_hex(char *p, uint64_t v)
{
	char tmp[16];
	size_t n = 0, i;

	do {
		tmp[n++] = hexd[v & 15];
		v >>= 4;
	} while (v);
	for (i = 0; i < n; i++)
		p[i] = tmp[n - 1 - i];
	return n;
}

void kv_change_begin(kv_env *e)
{
	e->chg.len = 0;
	memset(e->chg.seen, 0, sizeof(e->chg.seen));
}

void kv_change_ino(kv_env *e, uint64_t ino)
{
	size_t slot = (ino * 0x9e3779b97f4a7c15ULL) >> 56; /* 256 slots */
	char rec[20];

	if (e->chg.seen[slot] == ino)
		return; /* told already (a write's every block marks its inode) */
	e->chg.seen[slot] = ino;
	rec[0] = ' ';
	rec[1] = 'i';
	(void)note(e, rec, 2 + put_hex(rec + 2, ino)); /* lost to ENOMEM: invariant 1 */
}

void kv_change_name(kv_env *e, uint64_t dir, const char *name, size_t len)
{
	char rec[2 + 16 + 1 + 2 * KV_NAME_MAX];
	size_t n = 0;

	if (len > KV_NAME_MAX)
		return; /* refused by the call itself */
	rec[n++] = ' ';
	rec[n++] = 'n';
	n += put_hex(rec + n, dir);
	rec[n++] = '/';
	for (size_t i = 0; i < len; i++) {
		rec[n++] = hexd[(unsigned char)name[i] >> 4];
		rec[n++] = hexd[(unsigned char)name[i] & 15];
	}
	(void)note(e, rec, n);
}

size_t kv_change_head(const kv_env *e, char *buf)
{
	return (size_t)snprintf(buf, KV_CHANGE_HEAD + 1, "kvfs1 %016llx",
				(unsigned long long)e->chg.mount_id);
}

int kv_change_publish(kv_env *e, kv_etxn *x)
{
	char msg[KV_CHANGE_MSG_MAX + 1];
	size_t at = 0;
	int mrc;

	while (at < e->chg.len) {
		size_t n = kv_change_head(e, msg);

		/* whole records, as many as fit */
		while (at < e->chg.len) {
			size_t end = at + 1;

			while (end < e->chg.len && e->chg.buf[end] != ' ')
				end++;
			if (n + (end - at) > KV_CHANGE_MSG_MAX)
				break;
			memcpy(msg + n, e->chg.buf + at, end - at);
			n += end - at;
			at = end;
		}
		assert(n > MSG_HEAD);
		msg[n] = '\0';
		mrc = e->eng->publish(e, x, msg, n);
		if (mrc)
			return kv_err(NULL, mrc, "tell the other mounts");
	}
	return 0;
}

static int hexval(char c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* A number at *p up to a character not a hex digit; -1 when none. */
static int get_hex(const char **p, const char *end, uint64_t *v)
{
	const char *s = *p;
	int d, n = 0;

	*v = 0;
	while (s < end && (d = hexval(*s)) >= 0 && n < 16) {
		*v = *v << 4 | (uint64_t)d;
		s++;
		n++;
	}
	*p = s;
	return n ? 0 : -1;
}

int kv_change_deliver(kv_env *e, const char *msg, size_t len)
{
	const char *p = msg, *end = msg + len;
	char name[KV_NAME_MAX];
	uint64_t mount, ino;

	if (len < MSG_HEAD || memcmp(msg, "kvfs1 ", 6) != 0)
		return -EINVAL;
	p += 6;
	if (get_hex(&p, end, &mount) || p - msg != MSG_HEAD)
		return -EINVAL;
	if (mount == e->chg.mount_id || !e->chg.watch_fn)
		return 0; /* our own, or nobody asked */
	while (p < end) {
		char kind;
		size_t n = 0;

		if (*p++ != ' ' || p >= end)
			return -EINVAL;
		kind = *p++;
		if (get_hex(&p, end, &ino))
			return -EINVAL;
		kv_icache_forget(e, ino); /* before the kernel asks again */
		if (kind == 'i') {
			e->chg.watch_fn(e->chg.watch_arg, ino, NULL, 0);
			continue;
		}
		if (kind != 'n' || p >= end || *p++ != '/')
			return -EINVAL;
		while (p + 1 < end && *p != ' ' && n < KV_NAME_MAX) {
			int hi = hexval(p[0]), lo = hexval(p[1]);

			if (hi < 0 || lo < 0)
				return -EINVAL;
			name[n++] = (char)(hi << 4 | lo);
			p += 2;
		}
		if (n == 0 || (p < end && *p != ' '))
			return -EINVAL;
		e->chg.watch_fn(e->chg.watch_arg, ino, name, n);
	}
	return 0;
}

/* ------------------------------------------------------ lost changes -- */

static int ino_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

void kv_change_lost(kv_env *e)
{
	const char *p = e->chg.buf, *end = e->chg.buf + e->chg.len;
	size_t n;

	kv_icache_forget_all(e); /* a failover may have lost more */
	pthread_mutex_lock(&e->w.q_lock);
	n = e->lost.n;
	while (p + 2 < end) {
		uint64_t ino;

		p++; /* the record's ' ' */
		if (*p++ != 'i' || get_hex(&p, end, &ino)) {
			while (p < end && *p != ' ')
				p++; /* a name: its directory's inode has a record too */
			continue;
		}
		if (e->lost.n == e->lost.cap) {
			size_t cap = e->lost.cap ? 2 * e->lost.cap : 256;
			uint64_t *a = realloc(e->lost.ino, cap * sizeof(*a));

			if (!a)
				break; /* the fsyncs of files open now still say it */
			e->lost.ino = a;
			e->lost.cap = cap;
		}
		e->lost.ino[e->lost.n++] = ino;
	}
	if (e->lost.n > n)
		qsort(e->lost.ino, e->lost.n, sizeof(*e->lost.ino), ino_cmp);
	atomic_fetch_add_explicit(&e->lost.count, 1, memory_order_release);
	pthread_mutex_unlock(&e->w.q_lock);
}

uint64_t kv_lost_sample(kv_env *e, int writing)
{
	return atomic_load_explicit(&e->lost.count, memory_order_acquire) << 1 | (writing != 0);
}

int kv_lost_check(kv_env *e, uint64_t sample, uint64_t ino)
{
	uint64_t lost = atomic_load_explicit(&e->lost.count, memory_order_acquire);
	uint64_t *at;
	int rc;

	if (!lost)
		return 0;
	if (!ino) /* a close: of a file open for writing across a loss */
		return (sample & 1) && sample >> 1 != lost ? -EIO : 0;
	rc = sample >> 1 != lost ? -EIO : 0;
	pthread_mutex_lock(&e->w.q_lock);
	at = bsearch(&ino, e->lost.ino, e->lost.n, sizeof(ino), ino_cmp);
	if (at) { /* reported once: later fsyncs of it cover only later changes */
		memmove(at, at + 1, (size_t)(e->lost.ino + e->lost.n - at - 1) * sizeof(ino));
		e->lost.n--;
		rc = -EIO;
	}
	pthread_mutex_unlock(&e->w.q_lock);
	return rc;
}

int kv_is_shared(kv_env *e)
{
	return e->eng->shared;
}

int kv_is_alone(kv_env *e)
{
	return atomic_load(&e->win.alone);
}

int kv_watch(kv_env *e, kv_change_fn fn, void *arg)
{
	int rc;

	if (!e->eng->shared)
		return -EOPNOTSUPP;
	if (!fn) { /* the listener stopped first: no call of the old fn runs on */
		rc = e->chg.watch_fn ? kv_err(NULL, e->eng->listen(e, 0), "stop listening") : 0;
		e->chg.watch_fn = NULL;
		return rc;
	}
	e->chg.watch_fn = fn;
	e->chg.watch_arg = arg;
	return kv_err(NULL, e->eng->listen(e, 1), "listen to the other mounts");
}

void kv_change_init(kv_env *e)
{
	if (getrandom(&e->chg.mount_id, sizeof(e->chg.mount_id), 0) != sizeof(e->chg.mount_id))
		e->chg.mount_id = (uint64_t)(uintptr_t)e ^ (uint64_t)getpid() << 32;
}
