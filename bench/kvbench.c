/*
 * kvbench.c - the store alone, in the spirit of LevelDB's db_bench: one line
 * per benchmark with micros/op, ops/s, MB/s and heap allocations per op.
 *
 *   kvbench [--db=PATH] [--num=N] [--reads=N] [--quick]
 *
 * Records are what getattr reads: inode records (8-byte key, 88-byte value)
 * through kv_inode_put / kv_inode_get, and 4 KiB data blocks through
 * kv_data_write / kv_block_get (checksum verified). The baseline rows
 * ("raw ...") run the same access pattern on the same image through LMDB
 * directly (mdb_txn_renew, mdb_get, mdb_txn_reset), each right after its kv
 * twin, through a second read-only env without a lock file (raw_open).
 * kvbench is the only bench file that includes lmdb.h, for that baseline.
 *
 * Invariants of the measurement:
 *  1. Writes go through the writer as the daemon's do: "batch B" means B
 *     ops (one kv_inode_put each) committed together. B = 1 is kv_write,
 *     which with the writer idle runs the op on the calling thread (the
 *     leader), as a serial workload's changes do in the daemon. For B > 1 a
 *     gate op holds the writer thread until all B ops are queued, so the
 *     batch is exactly B ops (the gate's empty commit costs ~nothing).
 *  2. Reads group T ops per read transaction (kv_read_begin .. kv_read_end),
 *     so the per-transaction cost shows at T = 1.
 *  3. Every allocation of the process (kv, LMDB, libc) is counted: malloc,
 *     calloc and realloc are defined here and forward to glibc's
 *     __libc_* functions, counting per thread (read rows: the reading
 *     threads' own) and for the whole process (write rows: the writer
 *     thread's allocations, with the caller's few per batch).
 *  4. Write rows use durability none unless the name says otherwise.
 */
#include <errno.h>
#include <getopt.h>
#include <lmdb.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "kv.h"

/* ------------------------------------------------ allocation counting -- */

static __thread unsigned long n_allocs;  /* this thread's */
static _Atomic unsigned long all_allocs; /* every thread's: the writer's too */

#ifndef KVBENCH_NO_ALLOC_COUNT /* sanitizer builds: ASan owns malloc */
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);

void *malloc(size_t n)
{
	n_allocs++;
	all_allocs++;
	return __libc_malloc(n);
}

void *calloc(size_t n, size_t m)
{
	n_allocs++;
	all_allocs++;
	return __libc_calloc(n, m);
}

void *realloc(void *p, size_t n)
{
	n_allocs++;
	all_allocs++;
	return __libc_realloc(p, n);
}
#endif

/* -------------------------------------------------------------- setup -- */

#define VALUE_LEN 88 /* an inode record without inline data */
#define KEY_LEN 8
#define BLOCK_LEN 4072
#define FIRST_INO 1000 /* clear of the root and anything mkfs makes */

static const char *db_path = "/tmp/kvbench.img";
static long num = 200000;    /* records */
static long reads = 1000000; /* read ops per read benchmark and thread */
static long nblocks = 20000; /* 4 KiB blocks for the block rows */

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void die(const char *what, int rc)
{
	fprintf(stderr, "kvbench: %s: %s\n", what, strerror(rc < 0 ? -rc : rc));
	exit(1);
}

/* xorshift64*: the same key sequence for every run and every row */
static uint64_t rnd_next(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 2685821657736338717ULL;
}

static void print_row(const char *name, long ops, int threads, double secs, size_t bytes_per_op,
		      unsigned long allocs)
{
	double us = secs * 1e6 * threads / (double)ops;
	double ops_s = (double)ops / secs;

	printf("%-40s : %9.3f micros/op; %11.0f ops/s; %8.1f MB/s; %6.3f allocs/op\n", name, us,
	       ops_s, ops_s * (double)bytes_per_op / 1e6, (double)allocs / (double)ops);
	fflush(stdout);
}

static kv_env *env_open(enum kv_durability d)
{
	struct kv_open_opts o = {.durability = d};
	char err[256];
	kv_env *e;
	int rc = kv_open(db_path, &o, &e, err, sizeof(err));

	if (rc) {
		fprintf(stderr, "kvbench: %s\n", err);
		exit(1);
	}
	return e;
}

static void inode_of(uint64_t ino, struct kv_inode *in)
{
	memset(in, 0, sizeof(*in));
	in->ino = ino;
	in->mode = 0100644;
	in->nlink = 1;
	in->size = ino;
	in->mtime_ns = in->ctime_ns = (int64_t)ino;
}

/* ------------------------------------------------------------- writes -- */

struct put_op {
	struct kv_op op;
	uint64_t ino;
	long puts; /* kv_inode_put calls in this op (1, or B for one big op) */
};

static int apply_put(kv_txn *t, void *arg)
{
	struct put_op *p = arg;
	struct kv_inode in;
	int rc = 0;

	for (long i = 0; i < p->puts && rc == 0; i++) {
		inode_of(p->ino + (uint64_t)i, &in);
		rc = kv_inode_put(t, &in);
	}
	return rc;
}

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cond = PTHREAD_COND_INITIALIZER;
static int gate_entered, gate_open;
static long ops_done;

static int apply_gate(kv_txn *t, void *arg)
{
	(void)t;
	(void)arg;
	pthread_mutex_lock(&g_lock);
	gate_entered = 1;
	pthread_cond_broadcast(&g_cond);
	while (!gate_open)
		pthread_cond_wait(&g_cond, &g_lock);
	pthread_mutex_unlock(&g_lock);
	return 0;
}

static void put_done(void *arg, int rc)
{
	(void)arg;
	if (rc)
		die("put", rc);
	pthread_mutex_lock(&g_lock);
	ops_done++;
	pthread_cond_broadcast(&g_cond);
	pthread_mutex_unlock(&g_lock);
}

/* Write count records, key order from keys(i), batch ops per commit. */
static void write_keys(kv_env *e, const char *name, const uint64_t *keys, long count, long batch,
		       long puts_per_op)
{
	struct put_op *ops = calloc((size_t)batch, sizeof(*ops));
	unsigned long a0 = all_allocs;
	double t0 = now_s();
	int rc;

	if (!ops)
		die("calloc", ENOMEM);
	for (long i = 0; i < count; i += batch * puts_per_op) {
		long n = batch;
		if (batch == 1) {
			struct put_op p = {.ino = keys[i], .puts = puts_per_op};
			rc = kv_write(e, apply_put, &p, 0);
			if (rc)
				die("kv_write", rc);
			continue;
		}
		if (n > (count - i))
			n = count - i;
		struct kv_op gate = {.apply = apply_gate};
		gate_entered = gate_open = 0;
		ops_done = 0;
		kv_submit(e, &gate);
		pthread_mutex_lock(&g_lock);
		while (!gate_entered)
			pthread_cond_wait(&g_cond, &g_lock);
		pthread_mutex_unlock(&g_lock);
		for (long j = 0; j < n; j++) {
			ops[j] = (struct put_op){.ino = keys[i + j], .puts = 1};
			ops[j].op = (struct kv_op){.apply = apply_put, .done = put_done,
						   .arg = &ops[j]};
			kv_submit(e, &ops[j].op);
		}
		pthread_mutex_lock(&g_lock);
		gate_open = 1;
		pthread_cond_broadcast(&g_cond);
		while (ops_done < n)
			pthread_cond_wait(&g_cond, &g_lock);
		pthread_mutex_unlock(&g_lock);
	}
	print_row(name, count, 1, now_s() - t0, KEY_LEN + VALUE_LEN, all_allocs - a0);
	free(ops);
}

struct block_args {
	uint64_t ino;
	long from, to;
	const unsigned char *buf;
};

static int apply_blocks(kv_txn *t, void *arg)
{
	struct block_args *a = arg;
	struct kv_inode in;
	int rc;

	inode_of(a->ino, &in);
	in.size = 0;
	if (a->from > 0 && (rc = kv_inode_get(t, a->ino, &in)) != 0)
		return rc;
	for (long i = a->from; i < a->to; i++) {
		rc = kv_data_write(t, &in, (uint64_t)i * BLOCK_LEN, a->buf, BLOCK_LEN);
		if (rc)
			return rc;
	}
	return kv_inode_put(t, &in);
}

/* -------------------------------------------------------------- reads -- */

struct read_job {
	kv_env *env;        /* kv rows */
	MDB_env *menv;      /* raw rows */
	MDB_dbi dbi;
	int blocks;         /* read data blocks instead of inode records */
	int seq;            /* readseq */
	long ops, per_txn;
	uint64_t seed;
	unsigned long allocs; /* result */
	uint64_t sum;         /* result: keeps the reads from being optimized out */
};

static uint64_t pick(struct read_job *j, uint64_t *s)
{
	long n = j->blocks ? nblocks : num;
	return (uint64_t)(rnd_next(s) % (uint64_t)n);
}

static void *kv_reader(void *arg)
{
	struct read_job *j = arg;
	uint64_t s = j->seed, sum = 0;
	unsigned long a0 = n_allocs;
	kv_txn *t;
	int rc;

	for (long i = 0; i < j->ops;) {
		rc = kv_read_begin(j->env, &t);
		if (rc)
			die("kv_read_begin", rc);
		if (j->seq) {
			kv_iter *it;
			unsigned char key[KV_KEY_MAX];
			const void *k, *v;
			size_t kl, vl;
			rc = kv_iter_open(t, KV_DB_INODE, &it);
			if (!rc)
				rc = kv_iter_seek(it, key,
						  kv_key_prefix(FIRST_INO + (uint64_t)(i % num), key));
			for (long n = 0; rc == 0 && n < j->per_txn && i < j->ops; n++, i++) {
				rc = kv_iter_next(it, &k, &kl, &v, &vl);
				if (rc == 0) {
					struct kv_inode in;
					struct kv_key kk;
					rc = kv_key_decode(KV_DB_INODE, k, kl, &kk);
					if (rc == 0)
						rc = kv_decode_inode(kk.ino, v, vl, &in);
					sum += in.size;
				} else if (rc == -ENOENT) { /* wrap around */
					rc = kv_iter_seek(it, key, kv_key_prefix(FIRST_INO, key));
				}
			}
			kv_iter_close(it);
		} else {
			for (long n = 0; n < j->per_txn && i < j->ops; n++, i++) {
				uint64_t r = pick(j, &s);
				if (j->blocks) {
					const void *d;
					size_t len;
					rc = kv_block_get(t, FIRST_INO, r, &d, &len);
					sum += len + ((const unsigned char *)d)[0];
				} else {
					struct kv_inode in;
					rc = kv_inode_get(t, FIRST_INO + r, &in);
					sum += in.size;
				}
				if (rc)
					break;
			}
		}
		kv_read_end(t);
		if (rc)
			die("read", rc);
	}
	j->allocs = n_allocs - a0;
	j->sum = sum;
	return NULL;
}

static void *raw_reader(void *arg)
{
	struct read_job *j = arg;
	uint64_t s = j->seed, sum = 0;
	unsigned long a0;
	MDB_txn *txn;
	MDB_cursor *c = NULL;
	unsigned char key[KV_KEY_MAX];
	MDB_val k, v;
	int rc;

	rc = mdb_txn_begin(j->menv, NULL, MDB_RDONLY, &txn);
	if (!rc && j->seq)
		rc = mdb_cursor_open(txn, j->dbi, &c);
	if (rc)
		die("mdb_txn_begin", rc);
	mdb_txn_reset(txn);
	a0 = n_allocs;
	for (long i = 0; i < j->ops;) {
		rc = mdb_txn_renew(txn);
		if (!rc && c)
			rc = mdb_cursor_renew(txn, c);
		if (rc)
			die("mdb_txn_renew", rc);
		if (j->seq) {
			k = (MDB_val){kv_key_prefix(FIRST_INO + (uint64_t)(i % num), key), key};
			rc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
			for (long n = 0; n < j->per_txn && i < j->ops; n++, i++) {
				if (rc == MDB_NOTFOUND) {
					rc = mdb_cursor_get(c, &k, &v, MDB_FIRST);
					continue;
				}
				if (rc)
					break;
				sum += v.mv_size + ((const unsigned char *)v.mv_data)[20];
				rc = mdb_cursor_get(c, &k, &v, MDB_NEXT);
			}
			if (rc == MDB_NOTFOUND)
				rc = 0;
		} else {
			for (long n = 0; n < j->per_txn && i < j->ops; n++, i++) {
				uint64_t r = pick(j, &s);
				struct kv_key kk = {.ino = FIRST_INO, .idx = r};
				if (!j->blocks)
					kk.ino += r;
				k = (MDB_val){kv_key_encode(j->blocks ? KV_DB_DATA : KV_DB_INODE,
							    &kk, key), key};
				rc = mdb_get(txn, j->dbi, &k, &v);
				if (rc)
					break;
				sum += v.mv_size + ((const unsigned char *)v.mv_data)[20];
			}
		}
		mdb_txn_reset(txn);
		if (rc)
			die("mdb_get", rc);
	}
	j->allocs = n_allocs - a0;
	j->sum = sum;
	if (c)
		mdb_cursor_close(c);
	mdb_txn_abort(txn);
	return NULL;
}

static void run_reads(const char *name, struct read_job *proto, int threads)
{
	struct read_job jobs[2];
	pthread_t tid[2];
	unsigned long allocs = 0;
	double t0;

	for (int i = 0; i < threads; i++) {
		jobs[i] = *proto;
		jobs[i].seed = 0x9e3779b97f4a7c15ULL * (uint64_t)(i + 1);
	}
	t0 = now_s();
	for (int i = 0; i < threads; i++)
		pthread_create(&tid[i], NULL, proto->menv ? raw_reader : kv_reader, &jobs[i]);
	for (int i = 0; i < threads; i++) {
		pthread_join(tid[i], NULL);
		allocs += jobs[i].allocs;
	}
	print_row(name, proto->ops * threads, threads, now_s() - t0,
		  proto->blocks ? 16 + BLOCK_LEN : KEY_LEN + VALUE_LEN, allocs);
}

static const long per_txn_set[] = {1, 100, 1000};

/* The raw baseline's own env on the same image: read-only and without
 * LMDB's lock file (MDB_NOLOCK), so it can be open beside the kv env (whose
 * lock it would otherwise disturb). Safe here because nothing writes while
 * the read rows run. */
static MDB_env *raw_open(MDB_dbi *inode_dbi, MDB_dbi *data_dbi)
{
	MDB_env *menv;
	MDB_txn *txn;
	struct stat st;
	int rc;

	if (stat(db_path, &st) != 0)
		die("stat", errno);
	rc = mdb_env_create(&menv);
	if (!rc)
		rc = mdb_env_set_maxdbs(menv, 8);
	if (!rc)
		rc = mdb_env_set_mapsize(menv, (size_t)st.st_size * 2);
	if (!rc)
		rc = mdb_env_open(menv, db_path,
				  MDB_NOSUBDIR | MDB_RDONLY | MDB_NOTLS | MDB_NOLOCK, 0644);
	if (!rc)
		rc = mdb_txn_begin(menv, NULL, MDB_RDONLY, &txn);
	if (!rc)
		rc = mdb_dbi_open(txn, "inode", 0, inode_dbi);
	if (!rc)
		rc = mdb_dbi_open(txn, "data", 0, data_dbi);
	if (!rc)
		rc = mdb_txn_commit(txn);
	if (rc)
		die("raw open", rc);
	return menv;
}

/* Each kv row is followed at once by its raw twin, so the machine's drift
 * hits both alike. */
static void read_rows(kv_env *e)
{
	MDB_dbi inode_dbi, data_dbi;
	MDB_env *menv = raw_open(&inode_dbi, &data_dbi);
	char name[96];

	for (int threads = 1; threads <= 2; threads++) {
		for (size_t p = 0; p < 3; p++) {
			struct read_job j = {.env = e, .ops = reads, .per_txn = per_txn_set[p]};
			snprintf(name, sizeof(name), "readrandom %ld/txn %dT", per_txn_set[p], threads);
			run_reads(name, &j, threads);
			j = (struct read_job){.menv = menv, .dbi = inode_dbi, .ops = reads,
					      .per_txn = per_txn_set[p]};
			snprintf(name, sizeof(name), "raw mdb_get %ld/txn %dT", per_txn_set[p],
				 threads);
			run_reads(name, &j, threads);
		}
	}
	for (size_t p = 0; p < 3; p++) {
		struct read_job j = {.env = e, .ops = reads, .per_txn = per_txn_set[p], .seq = 1};
		snprintf(name, sizeof(name), "readseq %ld/txn 1T", per_txn_set[p]);
		run_reads(name, &j, 1);
		j = (struct read_job){.menv = menv, .dbi = inode_dbi, .ops = reads,
				      .per_txn = per_txn_set[p], .seq = 1};
		snprintf(name, sizeof(name), "raw cursor readseq %ld/txn 1T", per_txn_set[p]);
		run_reads(name, &j, 1);
	}
	for (size_t p = 0; p < 3; p += 2) {
		struct read_job j = {.env = e, .ops = reads / 4, .per_txn = per_txn_set[p],
				     .blocks = 1};
		snprintf(name, sizeof(name), "readrandom 4K block %ld/txn 1T", per_txn_set[p]);
		run_reads(name, &j, 1);
		j = (struct read_job){.menv = menv, .dbi = data_dbi, .ops = reads / 4,
				      .per_txn = per_txn_set[p], .blocks = 1};
		snprintf(name, sizeof(name), "raw mdb_get 4K block %ld/txn 1T", per_txn_set[p]);
		run_reads(name, &j, 1);
	}
	mdb_env_close(menv);
}

/* --------------------------------------------------------------- main -- */

static void make_image(void)
{
	struct kv_mkfs_opts o = {.root_mode = 0755, .force = 1};
	char err[256];

	if (kv_mkfs(db_path, &o, err, sizeof(err))) {
		fprintf(stderr, "kvbench: %s\n", err);
		exit(1);
	}
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{"db", required_argument, NULL, 'd'}, {"num", required_argument, NULL, 'n'},
		{"reads", required_argument, NULL, 'r'}, {"quick", no_argument, NULL, 'q'},
		{"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
	uint64_t *seq, *perm, s = 42;
	unsigned char *block;
	kv_env *e;
	char name[96];
	int c;

	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (c) {
		case 'd': db_path = optarg; break;
		case 'n': num = atol(optarg); break;
		case 'r': reads = atol(optarg); break;
		case 'q': num = 20000; reads = 50000; nblocks = 2000; break;
		default:
			printf("usage: kvbench [--db=PATH] [--num=N] [--reads=N] [--quick]\n");
			return c == 'h' ? 0 : 2;
		}
	}
	if (num < 1000 || reads < 1000) {
		fprintf(stderr, "kvbench: --num and --reads must be at least 1000\n");
		return 2;
	}
	seq = malloc((size_t)num * sizeof(*seq));
	perm = malloc((size_t)num * sizeof(*perm));
	block = malloc(BLOCK_LEN);
	if (!seq || !perm || !block)
		die("malloc", ENOMEM);
	for (long i = 0; i < num; i++)
		seq[i] = perm[i] = FIRST_INO + (uint64_t)i;
	for (long i = num - 1; i > 0; i--) {
		long j = (long)(rnd_next(&s) % (uint64_t)(i + 1));
		uint64_t x = perm[i];
		perm[i] = perm[j];
		perm[j] = x;
	}
	memset(block, 0xa5, BLOCK_LEN);

	printf("kvbench: %ld records of %d+%d bytes, %ld reads per row and thread, "
	       "%ld blocks of %d bytes; image %s\n", num, KEY_LEN, VALUE_LEN, reads, nblocks,
	       BLOCK_LEN, db_path);
	printf("%-40s : %9s micros/op; %11s ops/s; %8s MB/s; %6s allocs/op\n", "benchmark", "", "",
	       "", "");

	/* writes, durability none */
	make_image();
	e = env_open(KV_DURABLE_NONE);
	write_keys(e, "fillseq batch=1000", seq, num, 1000, 1);
	kv_close(e);
	make_image();
	e = env_open(KV_DURABLE_NONE);
	write_keys(e, "fillrandom batch=1000", perm, num, 1000, 1);
	for (long b = 1; b <= 1000; b *= 10) {
		long count = b == 1 ? num / 10 : num;
		snprintf(name, sizeof(name), "overwrite batch=%ld", b);
		write_keys(e, name, perm, count, b, 1);
	}
	write_keys(e, "overwrite 1 op of 1000 puts", seq, num, 1, 1000);
	{
		struct block_args a = {.ino = FIRST_INO, .buf = block};
		int rc = 0;
		for (long i = 0; i < nblocks && rc == 0; i += 1000) {
			a.from = i;
			a.to = i + 1000 < nblocks ? i + 1000 : nblocks;
			rc = kv_write(e, apply_blocks, &a, 0);
		}
		if (rc)
			die("fill blocks", rc);
	}
	kv_close(e);

	/* durable writes: a sync per commit, so few ops */
	e = env_open(KV_DURABLE_NORMAL);
	write_keys(e, "overwrite batch=1 durability=fsync", perm, 500, 1, 1);
	write_keys(e, "overwrite batch=100 durability=fsync", perm, 10000, 100, 1);
	kv_close(e);
	e = env_open(KV_DURABLE_FULL);
	write_keys(e, "overwrite batch=1 durability=full", perm, 500, 1, 1);
	kv_close(e);

	/* reads: each kv row beside its raw LMDB twin on the same image */
	e = env_open(KV_DURABLE_NONE);
	read_rows(e);
	kv_close(e);
	free(seq);
	free(perm);
	free(block);
	return 0;
}
