/*
 * test_writer.c - kv/writer.c: batches. Ops queued together commit in one
 * transaction; one op's failure rolls back only that op (its partial
 * writes vanish, the others' effects stay, later ops of the batch never see
 * it; the batch is replayed with a child txn per op); done() follows the
 * commit and may free its op; a map that must grow mid-batch replays the
 * batch without losing or doubling anything; an op that cannot fit in a
 * capped map gets -ENOSPC alone; many threads submitting at once. kv_write() with the writer idle runs its op on the
 * caller's thread (the leader) with the same guarantees: a failure leaves
 * nothing, the map grows, a capped map says -ENOSPC; while another batch
 * holds the role it queues instead and runs after. A lazy op joins the
 * next batch, or runs on its own when none comes, or at close. Inline data
 * got in an op survives the op's changes to other records of its page.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <cmocka.h>
#include <dirent.h>

#include "lmdb_int.h"
#include "testutil.h"

/* ------------------------------------------------------------ batch -- */

/* A gate op holds the writer inside its own batch until opened, so that
 * everything submitted meanwhile is taken as the next batch. */
struct gate {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int entered, open;
	int ndone, nwant; /* done() calls seen, expected */
};

static int gate_apply(kv_txn *t, void *p)
{
	struct gate *g = p;

	(void)t;
	pthread_mutex_lock(&g->lock);
	g->entered = 1;
	pthread_cond_broadcast(&g->cond);
	while (!g->open)
		pthread_cond_wait(&g->cond, &g->lock);
	pthread_mutex_unlock(&g->lock);
	return 0;
}

static void gate_init(struct gate *g, int nwant)
{
	memset(g, 0, sizeof(*g));
	pthread_mutex_init(&g->lock, NULL);
	pthread_cond_init(&g->cond, NULL);
	g->nwant = nwant;
}

static void gate_close(kv_env *e, struct gate *g, struct kv_op *op)
{
	*op = (struct kv_op){.apply = gate_apply, .arg = g};
	assert_int_equal(kv_submit(e, op), 0);
	pthread_mutex_lock(&g->lock);
	while (!g->entered)
		pthread_cond_wait(&g->cond, &g->lock);
	pthread_mutex_unlock(&g->lock);
}

/* Open the gate and wait for nwant done() calls. */
static void gate_open_wait(struct gate *g)
{
	pthread_mutex_lock(&g->lock);
	g->open = 1;
	pthread_cond_broadcast(&g->cond);
	while (g->ndone < g->nwant)
		pthread_cond_wait(&g->cond, &g->lock);
	pthread_mutex_unlock(&g->lock);
	pthread_cond_destroy(&g->cond);
	pthread_mutex_destroy(&g->lock);
}

static void gate_done(struct gate *g)
{
	pthread_mutex_lock(&g->lock);
	g->ndone++;
	pthread_cond_broadcast(&g->cond);
	pthread_mutex_unlock(&g->lock);
}

/* ---------------------------------------------------- mixed batch ops -- */

#define NOPS 5

/* What each op of the batch saw; filled on the writer thread. */
struct result {
	int rc;                /* from done() */
	int order;             /* position among the done() calls */
	int applied;           /* apply() calls */
	size_t txnid;          /* of the transaction apply() ran in */
	uint64_t ino;          /* created */
	int visible_in_done;   /* its name could be looked up from done() */
	unsigned char seen[4]; /* block 0 of "a" as apply() read it */
};

struct bop {
	kv_env *env;
	struct kv_op op;
	int idx;
	struct gate *g;
	struct result *res; /* this op's result */
	int *ndone;
};

static int create(kv_txn *t, const char *name, uint64_t *ino)
{
	struct kv_inode in = {.mode = 0100644, .nlink = 1, .parent = KV_ROOT_INO};
	int rc;

	if ((rc = kv_ino_alloc(t, &in.ino)) || (rc = kv_inode_put(t, &in)) ||
	    (rc = kv_dirent_add(t, KV_ROOT_INO, name, strlen(name), in.ino, DT_REG)))
		return rc;
	*ino = in.ino;
	return 0;
}

static int write_block0(kv_txn *t, uint64_t ino, const char *bytes)
{
	struct kv_inode in;
	int rc;

	if ((rc = kv_inode_get(t, ino, &in)) || (rc = kv_data_write(t, &in, 0, bytes, 4)))
		return rc;
	return kv_inode_put(t, &in);
}

static int lookup(kv_txn *t, const char *name, uint64_t *ino)
{
	struct kv_dirent de;
	int rc = kv_dirent_lookup(t, KV_ROOT_INO, name, strlen(name), &de);

	if (!rc)
		*ino = de.ino;
	return rc;
}

static int read_block0(kv_txn *t, const char *name, unsigned char out[4])
{
	const void *data;
	uint64_t ino;
	size_t len;
	int rc;

	if ((rc = lookup(t, name, &ino)) || (rc = kv_block_get(t, ino, 0, &data, &len)))
		return rc;
	memcpy(out, data, len < 4 ? len : 4);
	return 0;
}

/* 0: create "a" = AAAA. 1: overwrite a with BBBB, create "b" with data and
 * an xattr, then fail on a name that exists. 2: read a, create "c".
 * 3: fail at once. 4: create "e". */
static int bop_apply(kv_txn *t, void *p)
{
	struct bop *b = p;
	struct result *r = b->res;
	uint64_t a;
	int rc;

	r->applied++;
	r->txnid = mdb_txn_id(kv_mtxn(t->txn));
	switch (b->idx) {
	case 0:
		rc = create(t, "a", &r->ino);
		return rc ? rc : write_block0(t, r->ino, "AAAA");
	case 1:
		if ((rc = read_block0(t, "a", r->seen)) || (rc = lookup(t, "a", &a)) ||
		    (rc = write_block0(t, a, "BBBB")) || (rc = create(t, "b", &r->ino)) ||
		    (rc = write_block0(t, r->ino, "bbbb")) ||
		    (rc = kv_xattr_set(t, r->ino, "user.x", "1", 1, 0)))
			return rc;
		return kv_dirent_add(t, KV_ROOT_INO, "a", 1, r->ino, DT_REG); /* -EEXIST */
	case 2:
		rc = read_block0(t, "a", r->seen);
		return rc ? rc : create(t, "c", &r->ino);
	case 3:
		return kv_dirent_add(t, KV_ROOT_INO, "c", 1, 99, DT_REG); /* -EEXIST */
	default:
		return create(t, "e", &r->ino);
	}
}

static const char *const bop_names[NOPS] = {"a", "b", "c", NULL, "e"};

static void bop_done(void *p, int rc)
{
	struct bop *b = p;
	struct result *r = b->res;
	struct gate *g = b->g;
	uint64_t ino;
	kv_txn *t;

	r->rc = rc;
	r->order = (*b->ndone)++;
	if (bop_names[b->idx] && kv_read_begin(b->env, &t) == 0) {
		r->visible_in_done = lookup(t, bop_names[b->idx], &ino) == 0;
		kv_read_end(t);
	}
	free(b); /* invariant 4: the writer no longer touches the op */
	gate_done(g);
}

static void batch_isolates_failure(void **state)
{
	kv_env *e = ((struct tu_image *)*state)->env;
	struct result res[NOPS] = {0};
	struct kv_op gop;
	struct gate g;
	struct kv_usage u;
	unsigned char got[4];
	uint64_t ino;
	int ndone = 0;

	gate_init(&g, NOPS);
	gate_close(e, &g, &gop);
	for (int i = 0; i < NOPS; i++) {
		struct bop *b = calloc(1, sizeof(*b));
		assert_non_null(b);
		*b = (struct bop){.env = e, .idx = i, .g = &g, .res = &res[i], .ndone = &ndone};
		b->op = (struct kv_op){.apply = bop_apply, .done = bop_done, .arg = b};
		assert_int_equal(kv_submit(e, &b->op), 0);
	}
	gate_open_wait(&g);

	for (int i = 0; i < NOPS; i++) {
		assert_int_equal(res[i].order, i); /* done() in submission order */
		/* the batch ran flat until op 1 failed, then again with a child
		 * txn per op */
		assert_int_equal(res[i].applied, i <= 1 ? 2 : 1);
		assert_true(res[i].txnid == res[0].txnid); /* one batch */
	}
	assert_int_equal(res[0].rc, 0);
	assert_int_equal(res[1].rc, -EEXIST);
	assert_int_equal(res[2].rc, 0);
	assert_int_equal(res[3].rc, -EEXIST);
	assert_int_equal(res[4].rc, 0);
	/* done() ran after the commit: the effects were visible to it */
	assert_true(res[0].visible_in_done && res[2].visible_in_done && res[4].visible_in_done);
	assert_false(res[1].visible_in_done);
	/* op 1 saw op 0's write; op 2 did not see op 1's rolled-back one */
	assert_memory_equal(res[1].seen, "AAAA", 4);
	assert_memory_equal(res[2].seen, "AAAA", 4);

	assert_int_equal(tu_pread(e, res[0].ino, 0, 4, got), 4);
	assert_memory_equal(got, "AAAA", 4);
	assert_int_equal(tu_getattr(e, res[1].ino, &(struct kv_inode){0}), -ENOENT);
	assert_int_equal(kv_usage_get(e, &u), 0);
	assert_true(u.inodes == 4 && u.dirents == 3 && u.blocks == 1 && u.xattrs == 0);
	assert_int_equal(tu_mkfile(e, KV_ROOT_INO, "b", 0100644, &ino), 0); /* "b" is free */
	assert_true(ino > res[4].ino);
}

static int return_arg(kv_txn *t, void *p)
{
	(void)t;
	return *(int *)p;
}

static void write_returns_apply_result(void **state)
{
	kv_env *e = ((struct tu_image *)*state)->env;
	int rc = -EXDEV;

	assert_int_equal(kv_write(e, return_arg, &rc, 0), -EXDEV);
	rc = 0;
	assert_int_equal(kv_write(e, return_arg, &rc, KV_OP_SYNC), 0);
}

/* A fresh image opened with o, as *state (tu_setup's, with options). */
static int setup_opts(void **state, const struct kv_open_opts *o)
{
	struct tu_image *im = calloc(1, sizeof(*im));

	*state = im;
	if (!im || tu_image_new(im, NULL))
		return -1;
	return tu_image_open(im, o);
}

static int normal_setup(void **state)
{
	return setup_opts(state, &(struct kv_open_opts){.durability = KV_DURABLE_NORMAL});
}

/* ---------------------------------------------------- big batches -- */

/* One op: create file name and write len bytes of pattern seed into it. */
struct fill_op {
	struct kv_op op;
	struct gate *g;
	char name[16];
	size_t len;
	uint64_t seed;
	unsigned char *data;
	int applied, rc;
	uint64_t ino;
};

static int fill_apply(kv_txn *t, void *p)
{
	struct fill_op *f = p;
	struct kv_inode in;
	int rc;

	f->applied++;
	if ((rc = create(t, f->name, &f->ino)) || (rc = kv_inode_get(t, f->ino, &in)) ||
	    (rc = kv_data_write(t, &in, 0, f->data, f->len)))
		return rc;
	return kv_inode_put(t, &in);
}

static void fill_done(void *p, int rc)
{
	struct fill_op *f = p;

	f->rc = rc;
	gate_done(f->g);
}

/* Submit n fill ops of the given sizes as one batch; wait for them. */
static struct fill_op *run_fills(kv_env *e, const size_t *lens, int n)
{
	struct fill_op *f = calloc((size_t)n, sizeof(*f));
	struct kv_op gop;
	struct gate g;

	assert_non_null(f);
	gate_init(&g, n);
	gate_close(e, &g, &gop);
	for (int i = 0; i < n; i++) {
		f[i].g = &g;
		f[i].len = lens[i];
		f[i].data = malloc(lens[i]);
		assert_non_null(f[i].data);
		tu_fill(f[i].data, lens[i], (uint64_t)i + 100);
		snprintf(f[i].name, sizeof(f[i].name), "fill%d", i);
		f[i].op = (struct kv_op){.apply = fill_apply, .done = fill_done, .arg = &f[i]};
		assert_int_equal(kv_submit(e, &f[i].op), 0);
	}
	gate_open_wait(&g);
	return f;
}

static void check_fill(kv_env *e, const struct fill_op *f, int present)
{
	unsigned char *got = malloc(f->len);
	struct kv_inode in;
	kv_txn *t;
	struct kv_dirent de;

	assert_non_null(got);
	assert_int_equal(kv_read_begin(e, &t), 0);
	assert_int_equal(kv_dirent_lookup(t, KV_ROOT_INO, f->name, strlen(f->name), &de),
	                 present ? 0 : -ENOENT);
	kv_read_end(t);
	if (present) {
		assert_true(de.ino == f->ino);
		assert_int_equal(tu_getattr(e, f->ino, &in), 0);
		assert_true(in.size == f->len);
		assert_int_equal(tu_pread(e, f->ino, 0, f->len, got), (ssize_t)f->len);
		assert_memory_equal(got, f->data, f->len);
	}
	free(got);
}

static void free_fills(struct fill_op *f, int n)
{
	for (int i = 0; i < n; i++)
		free(f[i].data);
	free(f);
}

/* 72 MiB in one batch overflows the initial 64 MiB map: the writer grows it
 * and replays; every op lands exactly once. */
#define NGROW 18

static void batch_grows_map(void **state)
{
	kv_env *e = ((struct tu_image *)*state)->env;
	size_t lens[NGROW];
	struct fill_op *f;
	struct kv_usage u;
	uint64_t blocks = 0, bs = kv_block_size(e);
	int applies = 0;

	assert_int_equal(kv_usage_get(e, &u), 0);
	assert_true(u.map_bytes < (uint64_t)NGROW * (4 << 20));
	for (int i = 0; i < NGROW; i++)
		lens[i] = (4 << 20) + (size_t)i;
	f = run_fills(e, lens, NGROW);
	for (int i = 0; i < NGROW; i++) {
		assert_int_equal(f[i].rc, 0);
		applies += f[i].applied;
		blocks += (lens[i] + bs - 1) / bs;
	}
	assert_true(applies > NGROW); /* the growth path ran */
	for (int i = 0; i < NGROW; i++)
		check_fill(e, &f[i], 1);
	assert_int_equal(kv_usage_get(e, &u), 0);
	assert_true(u.blocks == blocks);
	assert_true(u.inodes == NGROW + 1);
	assert_true(u.map_bytes > (uint64_t)NGROW * (4 << 20));
	free_fills(f, NGROW);
}

static int capped_setup(void **state)
{
	return setup_opts(state, &(struct kv_open_opts){.max_size = 1 << 20});
}

/* In a map capped at 1 MiB, the 2 MiB op fails alone with -ENOSPC. */
static void batch_map_full_fails_one(void **state)
{
	kv_env *e = ((struct tu_image *)*state)->env;
	size_t lens[4] = {5000, 2 << 20, 100, 9000};
	struct fill_op *f;

	f = run_fills(e, lens, 4);
	assert_int_equal(f[0].rc, 0);
	assert_int_equal(f[1].rc, -ENOSPC);
	assert_int_equal(f[2].rc, 0);
	assert_int_equal(f[3].rc, 0);
	check_fill(e, &f[0], 1);
	check_fill(e, &f[1], 0);
	check_fill(e, &f[2], 1);
	check_fill(e, &f[3], 1);
	free_fills(f, 4);
}

/* ------------------------------------------------------- submitters -- */

#define NTHREADS 4
#define PER_THREAD 150

struct submitter {
	kv_env *env;
	int id, rc;
	uint64_t inos[PER_THREAD];
};

static void *submitter_main(void *p)
{
	struct submitter *s = p;
	char name[32];

	for (int i = 0; i < PER_THREAD && !s->rc; i++) {
		snprintf(name, sizeof(name), "t%d-%d", s->id, i);
		s->rc = tu_mkfile(s->env, KV_ROOT_INO, name, 0100644, &s->inos[i]);
	}
	return NULL;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static void many_submitters(void **state)
{
	kv_env *e = ((struct tu_image *)*state)->env;
	struct submitter *s = calloc(NTHREADS, sizeof(*s));
	uint64_t *all = calloc(NTHREADS * PER_THREAD, sizeof(*all));
	pthread_t th[NTHREADS];
	struct kv_usage u;

	assert_non_null(s);
	assert_non_null(all);
	for (int i = 0; i < NTHREADS; i++) {
		s[i].env = e;
		s[i].id = i;
		assert_int_equal(pthread_create(&th[i], NULL, submitter_main, &s[i]), 0);
	}
	for (int i = 0; i < NTHREADS; i++) {
		assert_int_equal(pthread_join(th[i], NULL), 0);
		assert_int_equal(s[i].rc, 0);
		memcpy(all + i * PER_THREAD, s[i].inos, sizeof(s[i].inos));
	}
	qsort(all, NTHREADS * PER_THREAD, sizeof(*all), cmp_u64);
	for (int i = 1; i < NTHREADS * PER_THREAD; i++)
		assert_true(all[i] > all[i - 1]); /* every number given once */
	assert_int_equal(kv_usage_get(e, &u), 0);
	assert_true(u.inodes == NTHREADS * PER_THREAD + 1);
	assert_true(u.dirents == NTHREADS * PER_THREAD);
	free(s);
	free(all);
}


/* ----------------------------------------------------------- leader -- */

struct lone {
	pthread_t thread; /* where apply ran */
	int applied;
	int fail;         /* apply returns -EIO after creating "lone" */
	uint64_t ino;
};

static int lone_apply(kv_txn *t, void *p)
{
	struct lone *l = p;
	int rc;

	l->thread = pthread_self();
	l->applied++;
	rc = create(t, "lone", &l->ino);
	if (rc == 0 && l->fail)
		rc = write_block0(t, l->ino, "xyz") ?: -EIO;
	return rc;
}

/* With the writer idle the op runs on the calling thread; a failing lone op
 * leaves none of its partial writes and the next op is unaffected. */
static void lone_write_leads(void **state)
{
	kv_env *e = ((struct tu_image *)*state)->env;
	struct lone l = {.fail = 1};
	struct kv_usage u;
	uint64_t ino;
	kv_txn *t;

	assert_int_equal(kv_write(e, lone_apply, &l, 0), -EIO);
	assert_true(pthread_equal(l.thread, pthread_self()));
	assert_int_equal(l.applied, 1);
	assert_int_equal(kv_read_begin(e, &t), 0);
	assert_int_equal(lookup(t, "lone", &ino), -ENOENT);
	kv_read_end(t);
	assert_int_equal(kv_usage_get(e, &u), 0);
	assert_true(u.inodes == 1 && u.dirents == 0 && u.blocks == 0);

	l = (struct lone){0};
	assert_int_equal(kv_write(e, lone_apply, &l, KV_OP_SYNC), 0);
	assert_true(pthread_equal(l.thread, pthread_self()));
	assert_int_equal(kv_read_begin(e, &t), 0);
	assert_int_equal(lookup(t, "lone", &ino), 0);
	kv_read_end(t);
	assert_true(ino == l.ino);
	assert_int_equal(tu_mkfile(e, KV_ROOT_INO, "next", 0100644, &ino), 0);
	assert_true(ino > l.ino); /* the failed op's number is not given again */
}

/* A lone 5 MiB write grows the map on the caller's thread, or fails alone
 * with -ENOSPC in a capped map (the image keeps what it had). */
static void lone_write_grows_or_fails(void **state, int capped)
{
	kv_env *e = ((struct tu_image *)*state)->env;
	size_t len = 5 << 20;
	struct fill_op f = {.len = len};
	struct kv_usage u0, u;
	uint64_t ino;

	assert_int_equal(tu_mkfile(e, KV_ROOT_INO, "before", 0100644, &ino), 0);
	assert_int_equal(kv_usage_get(e, &u0), 0);
	snprintf(f.name, sizeof(f.name), "big");
	f.data = malloc(len);
	assert_non_null(f.data);
	tu_fill(f.data, len, 7);
	/* fill until the map is short, then one more */
	for (int i = 0; !capped && i * (uint64_t)len < u0.map_bytes; i++) {
		struct fill_op g = f;
		snprintf(g.name, sizeof(g.name), "pad%d", i);
		assert_int_equal(kv_write(e, fill_apply, &g, 0), 0);
	}
	assert_int_equal(kv_write(e, fill_apply, &f, 0), capped ? -ENOSPC : 0);
	check_fill(e, &f, !capped);
	assert_int_equal(kv_usage_get(e, &u), 0);
	if (capped)
		assert_true(u.inodes == u0.inodes && u.map_bytes == u0.map_bytes);
	else
		assert_true(u.map_bytes > u0.map_bytes);
	assert_int_equal(tu_getattr(e, ino, &(struct kv_inode){0}), 0);
	free(f.data);
}

static void lone_write_grows_map(void **state)
{
	lone_write_grows_or_fails(state, 0);
}

static void lone_write_capped(void **state)
{
	lone_write_grows_or_fails(state, 1);
}

struct queued {
	kv_env *env;
	struct lone l;
	int rc, returned;
};

static void *queued_main(void *p)
{
	struct queued *q = p;

	q->rc = kv_write(q->env, lone_apply, &q->l, 0);
	__atomic_store_n(&q->returned, 1, __ATOMIC_RELEASE);
	return NULL;
}

/* While a batch holds the role, kv_write() queues: its op runs after the
 * batch, on the writer thread, and the caller returns only then. */
static void write_queues_while_role_held(void **state)
{
	kv_env *e = ((struct tu_image *)*state)->env;
	struct queued q = {.env = e};
	struct kv_op gop;
	struct gate g;
	pthread_t th;

	gate_init(&g, 0);
	gate_close(e, &g, &gop);
	assert_int_equal(pthread_create(&th, NULL, queued_main, &q), 0);
	/* the op cannot have run: the writer is inside the gate */
	for (int i = 0; i < 50; i++) {
		pthread_mutex_lock(&e->w.q_lock);
		int queued = e->w.q_head != NULL;
		pthread_mutex_unlock(&e->w.q_lock);
		if (queued)
			break;
		struct timespec ts = {0, 10 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
	assert_int_equal(__atomic_load_n(&q.returned, __ATOMIC_ACQUIRE), 0);
	assert_int_equal(q.l.applied, 0);
	gate_open_wait(&g);
	assert_int_equal(pthread_join(th, NULL), 0);
	assert_int_equal(q.rc, 0);
	assert_int_equal(q.l.applied, 1);
	assert_false(pthread_equal(q.l.thread, th));
	kv_txn *t;
	uint64_t ino;
	assert_int_equal(kv_read_begin(e, &t), 0);
	assert_int_equal(lookup(t, "lone", &ino), 0);
	kv_read_end(t);
	assert_true(ino == q.l.ino);
}

static int interval_setup(void **state)
{
	return setup_opts(state, &(struct kv_open_opts){.durability = KV_DURABLE_NORMAL,
	                                                .sync_interval_ms = 20});
}

/* A leader's commit is made durable by the writer thread's idle sync. */
static void leader_commit_synced_when_idle(void **state)
{
	kv_env *e = ((struct tu_image *)*state)->env;
	uint64_t ino;
	int unsynced = 1;

	assert_int_equal(tu_mkfile(e, KV_ROOT_INO, "x", 0100644, &ino), 0);
	for (int i = 0; i < 500 && unsynced; i++) {
		struct timespec ts = {0, 10 * 1000 * 1000};
		nanosleep(&ts, NULL);
		pthread_mutex_lock(&e->w.q_lock);
		unsynced = e->w.busy || e->w.unsynced;
		pthread_mutex_unlock(&e->w.q_lock);
	}
	assert_int_equal(unsynced, 0);
}

struct lazy {
	struct kv_op op;
	size_t txnid;       /* of the txn apply() ran in */
	int applied, rc;
	int done;           /* set by done() */
	pthread_t thread;   /* where done() ran */
};

static int lazy_apply(kv_txn *t, void *p)
{
	struct lazy *z = p;
	uint64_t ino;

	z->applied++;
	z->txnid = mdb_txn_id(kv_mtxn(t->txn));
	return create(t, "lazy", &ino);
}

static void lazy_done(void *p, int rc)
{
	struct lazy *z = p;

	z->rc = rc;
	z->thread = pthread_self();
	__atomic_store_n(&z->done, 1, __ATOMIC_RELEASE);
}

struct txnid_arg {
	size_t txnid;
};

static int txnid_apply(kv_txn *t, void *p)
{
	((struct txnid_arg *)p)->txnid = mdb_txn_id(kv_mtxn(t->txn));
	return 0;
}

/* A lazy op rides along with the next kv_write(): same txn, done() before
 * kv_write() returns, on the caller's thread. */
static void lazy_joins_next_batch(void **state)
{
	kv_env *e = ((struct tu_image *)*state)->env;
	struct lazy z = {.op = {.apply = lazy_apply, .done = lazy_done, .arg = &z}};
	struct txnid_arg a;
	uint64_t ino;
	kv_txn *t;

	assert_int_equal(kv_submit_lazy(e, &z.op), 0);
	assert_int_equal(kv_write(e, txnid_apply, &a, 0), 0);
	/* KV_LAZY_MS is long against the few microseconds in between */
	assert_int_equal(__atomic_load_n(&z.done, __ATOMIC_ACQUIRE), 1);
	assert_int_equal(z.rc, 0);
	assert_true(z.txnid == a.txnid);
	assert_true(pthread_equal(z.thread, pthread_self()));
	assert_int_equal(kv_read_begin(e, &t), 0);
	assert_int_equal(lookup(t, "lazy", &ino), 0);
	kv_read_end(t);
}

/* With no batch to join, a lazy op runs on the writer thread after about
 * KV_LAZY_MS; at close, whatever is still lazy runs before the env ends. */
static void lazy_runs_alone(void **state)
{
	struct tu_image *im = *state;
	struct lazy z = {.op = {.apply = lazy_apply, .done = lazy_done, .arg = &z}};
	struct lazy z2 = z;
	struct timespec t0, t1;
	uint64_t ino;
	kv_txn *t;

	z2.op.arg = &z2;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	assert_int_equal(kv_submit_lazy(im->env, &z.op), 0);
	for (int i = 0; i < 1000 && !__atomic_load_n(&z.done, __ATOMIC_ACQUIRE); i++) {
		struct timespec ts = {0, 5 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	assert_int_equal(__atomic_load_n(&z.done, __ATOMIC_ACQUIRE), 1);
	assert_int_equal(z.rc, 0);
	assert_false(pthread_equal(z.thread, pthread_self()));
	/* it waited for a batch to join first (a lower bound: no machine load
	 * makes it early) */
	assert_true((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000 >=
	            KV_LAZY_MS - 1);

	/* the second one fails (the name exists) and is still reported */
	assert_int_equal(kv_submit_lazy(im->env, &z2.op), 0);
	tu_image_close(im);
	assert_int_equal(z2.done, 1);
	assert_int_equal(z2.rc, -EEXIST);
	assert_int_equal(tu_image_open(im, NULL), 0);
	assert_int_equal(kv_read_begin(im->env, &t), 0);
	assert_int_equal(lookup(t, "lazy", &ino), 0);
	kv_read_end(t);
}

/* ---------------------------------------------------- inline data -- */

struct inl_arg {
	uint64_t a, sym;
	char target[200];
	int same; /* the target as got still read right after the page moved */
};

static int inl_setup_apply(kv_txn *t, void *p)
{
	struct inl_arg *x = p;
	struct kv_inode a = {.mode = 0100644, .nlink = 1, .parent = KV_ROOT_INO};
	struct kv_inode s = {.mode = 0120777, .nlink = 1, .parent = KV_ROOT_INO,
	                     .inline_data = x->target, .inline_len = sizeof(x->target)};
	int rc;

	/* a first, then the symlink: the symlink's record lies below a's in
	 * their leaf page, so it moves when a's record changes size */
	if ((rc = kv_ino_alloc(t, &a.ino)) || (rc = kv_inode_put(t, &a)) ||
	    (rc = kv_ino_alloc(t, &s.ino)) || (rc = kv_inode_put(t, &s)))
		return rc;
	x->a = a.ino;
	x->sym = s.ino;
	return 0;
}

static int inl_apply(kv_txn *t, void *p)
{
	struct inl_arg *x = p;
	struct kv_inode a, s;
	int rc;

	/* dirty the page, get the symlink, then grow a's record */
	if ((rc = kv_inode_get(t, x->a, &a)) || (rc = kv_inode_put(t, &a)) ||
	    (rc = kv_inode_get(t, x->sym, &s)))
		return rc;
	a.inline_data = x->target;
	a.inline_len = 100;
	if ((rc = kv_inode_put(t, &a)))
		return rc;
	x->same = s.inline_len == sizeof(x->target) &&
	          memcmp(s.inline_data, x->target, sizeof(x->target)) == 0;
	s.ctime_ns++;
	return kv_inode_put(t, &s);
}

/* A symlink's target got in a write op stays right while the op changes
 * other records of its page; the record put back keeps it. */
static void inline_data_survives_page_changes(void **state)
{
	kv_env *e = ((struct tu_image *)*state)->env;
	struct inl_arg x;
	struct kv_inode s;
	kv_txn *t;

	for (size_t i = 0; i < sizeof(x.target); i++)
		x.target[i] = (char)('a' + i % 26);
	assert_int_equal(kv_write(e, inl_setup_apply, &x, 0), 0);
	assert_int_equal(kv_write(e, inl_apply, &x, 0), 0);
	assert_true(x.same);
	assert_int_equal(kv_read_begin(e, &t), 0);
	assert_int_equal(kv_inode_get(t, x.sym, &s), 0);
	assert_int_equal(s.inline_len, sizeof(x.target));
	assert_memory_equal(s.inline_data, x.target, sizeof(x.target));
	kv_read_end(t);
}

/* ------------------------------------------------ invariant checks -- */

#ifndef NDEBUG
static int apply_noop(kv_txn *t, void *arg)
{
	(void)t;
	(void)arg;
	return 0;
}

static void write_holding_read(kv_env *e)
{
	kv_txn *t;

	if (kv_read_begin(e, &t) == 0)
		kv_write(e, apply_noop, NULL, 0);
}

static int apply_write(kv_txn *t, void *arg)
{
	(void)arg;
	return kv_write(t->env, apply_noop, NULL, 0);
}

static void write_inside_apply(kv_env *e)
{
	kv_write(e, apply_write, NULL, 0);
}

static void alloc_off_role(kv_env *e)
{
	kv_txn t = {.env = e, .write = 1}; /* a write txn nobody's role holds */
	uint64_t ino;

	kv_ino_alloc(&t, &ino);
}

/* Debug and sanitizer builds check the writer's invariants with assert: a
 * kv_write from a thread holding a read txn (writer.c 6: it would wait for a
 * map growth that waits for it), from inside an apply() (it would wait for
 * the role its own thread holds: a deadlock), and a write-txn function used
 * off the writer's role (kv_int.h 2: a race for the inode counter) abort
 * there, naming the check. Release builds compile the checks out. */
static void invariants_checked(void **state)
{
	struct tu_image *im = *state;

	tu_image_close(im);
	assert_int_equal(tu_aborts(im, write_holding_read, "!kv_reading(e)"), 1);
	assert_int_equal(tu_aborts(im, write_inside_apply, "!kv_role_mine(e)"), 1);
	assert_int_equal(tu_aborts(im, alloc_off_role, "kv_role_mine(t->env)"), 1);
	assert_int_equal(tu_image_open(im, NULL), 0);
}
#else
static void invariants_checked(void **state)
{
	(void)state;
	skip(); /* NDEBUG: the checks are compiled out */
}
#endif

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test_setup_teardown(batch_isolates_failure, tu_setup, tu_teardown),
	        cmocka_unit_test_setup_teardown(batch_isolates_failure, normal_setup, tu_teardown),
	        cmocka_unit_test_setup_teardown(write_returns_apply_result, normal_setup,
	                                        tu_teardown),
	        cmocka_unit_test_setup_teardown(batch_grows_map, tu_setup, tu_teardown),
	        cmocka_unit_test_setup_teardown(batch_map_full_fails_one, capped_setup,
	                                        tu_teardown),
	        cmocka_unit_test_setup_teardown(many_submitters, tu_setup, tu_teardown),
	        cmocka_unit_test_setup_teardown(lone_write_leads, tu_setup, tu_teardown),
	        cmocka_unit_test_setup_teardown(lone_write_grows_map, tu_setup, tu_teardown),
	        cmocka_unit_test_setup_teardown(lone_write_capped, capped_setup, tu_teardown),
	        cmocka_unit_test_setup_teardown(write_queues_while_role_held, tu_setup,
	                                        tu_teardown),
	        cmocka_unit_test_setup_teardown(leader_commit_synced_when_idle, interval_setup,
	                                        tu_teardown),
	        cmocka_unit_test_setup_teardown(lazy_joins_next_batch, tu_setup, tu_teardown),
	        cmocka_unit_test_setup_teardown(lazy_runs_alone, tu_setup, tu_teardown),
	        cmocka_unit_test_setup_teardown(inline_data_survives_page_changes, tu_setup,
	                                        tu_teardown),
	        cmocka_unit_test_setup_teardown(invariants_checked, tu_setup, tu_teardown),
	};

	return cmocka_run_group_tests_name("writer", tests, NULL, NULL);
}
