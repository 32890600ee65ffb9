/*
 * pg_int.h - shared by the PostgreSQL engine's files: pg.c (the calls of
 * engine.h: transactions, records, create and open), pg_cursor.c (its
 * cursors), pg_stmt.c (its prepared statements), pg_conn.c (its
 * connections: connect, the pipeline and its results, errors, reset, the
 * pool of idle connections), pg_cache.c (what a transaction knows of its
 * records), pg_guess.c (what the mount knew of them at its last commit),
 * pg_listen.c (many mounts: the writers' lock, the listener) and
 * pg_lease.c (a mount alone). Nothing else includes it, and it alone
 * includes libpq-fe.h.
 */
#ifndef KVFS_PG_INT_H
#define KVFS_PG_INT_H

#include <libpq-fe.h>
#include <pthread.h>
#include <stdatomic.h>

#include "kv_int.h"

#define PG_MAX_DEPTH 16      /* transaction levels: the top one and its children */
#define PG_STMT_TIMEOUT "30s" /* statement_timeout where the server and URL set none */
#define PG_WAIT_SLACK_MS 5000 /* a call gives up this long after the statement timeout */

/* The statements of one map, prepared on a connection at first use. */
enum pg_stmt {
	S_GET, S_PUT, S_PUTNEW, S_DEL, S_COUNT, S_FIRST, S_LAST, S_GE, S_GT, S_LT,
	S_SAME, S_ABSENT, S_SWAP, S_INSERT, S_DELSAME, /* a guess's checks (pg_guess.c) */
	S_N
};
/* Slots of pg_conn.prepared past the maps' for the statements without a
 * map (pg.c: enum pg_cmd), S_N of them a slot. */
#define PG_CMD_SLOTS 6

/* A message sent whose results are not read yet (pg_conn.pend). */
struct pg_pend {
	unsigned id;         /* the transaction level that sent it (pg_conn.open); 0: none */
	short prep;          /* a prepare: 1 + db * S_N + statement; 0: not one */
	unsigned char sync;  /* a Sync, not a statement */
	unsigned char want;  /* its result goes to the caller of pg_drain */
	struct pg_centry *ent; /* a prefetch: its result goes to this cache entry */
};

/* What a connection's transaction knows of its records (pg_cache.c). */
struct pg_cache {
	struct pg_centry **tab;   /* hash chains: mask + 1 of them */
	size_t mask, n;
	struct pg_centry *lvl[PG_MAX_DEPTH]; /* each open level's entries */
	struct pg_chunk *arena;   /* entries and copied values, to the top level's end */
	size_t bytes;             /* taken from the arena since the top level began */
};

/* An entry: a record's value (PC_VAL), its absence (PC_NONE), or a get on
 * its way (PC_PEND); PC_DEAD once dropped, until the arena goes. */
enum pg_cstate { PC_DEAD, PC_VAL, PC_NONE, PC_PEND };

struct pg_centry {
	struct pg_centry *hnext;  /* hash chain */
	struct pg_centry *lnext, **lprevp; /* its level's list */
	int depth;                /* the level that learned or changed it last */
	unsigned char db, state;
	unsigned char owed;       /* PC_VAL or PC_NONE guessed, its check not sent (pg.c) */
	uint32_t hash;
	const void *val;          /* PC_VAL: vlen bytes, in a held result or the arena */
	size_t vlen, klen;
	unsigned char key[];
};

/* A put with KV_PUT_RESERVE whose bytes the caller is still writing: sent
 * before the next statement of its transaction (contract 7). */
struct pg_reserve {
	int on;
	int depth;           /* the level that made it */
	enum kv_db db;
	unsigned char *key, *buf;
	size_t klen, kcap, len, cap;
};

/* One connection and the transaction it runs (at most one at a time). */
struct pg_conn {
	PGconn *pq;
	struct pg_env *pe;
	struct pg_conn *next;     /* pe->pool */
	int writer;               /* the env's writer: synchronous_commit by durability */
	int guessing;             /* its top level may answer reads from guesses (pg_guess.c) */
	int broken;               /* lost: every call fails with EIO until a reset */
	int closing;              /* the server said FATAL (while idle: a notice): it
	                             ended the session, the end of the stream follows */
	unsigned wait_ms;         /* how long one call waits for the server */
	/* bit s of slot i: statement s of map i prepared; slots past KV_NDB:
	 * pg.c's commands (statement i * S_N + s less the maps') */
	uint16_t prepared[KV_NDB + PG_CMD_SLOTS];
	char last_err[256];       /* the server's last error, first line */

	struct pg_pend *pend;     /* sent, results unread: [pend_at, pend_n) */
	size_t pend_at, pend_n, pend_cap;
	int unsynced;             /* statements sent since the last Sync */

	/* the transaction (pg.c) */
	int begin_cmd;            /* its BEGIN (pg.c: enum pg_cmd), not sent yet: it goes
	                             with the first statement; 0: none */
	int begun;                /* BEGIN sent: ROLLBACK or COMMIT ends it */
	int quiet;                /* its top level sent nothing but its BEGIN yet: its
	                             first statement may go again (pg_stmt.c: pg_call) */
	int implicit;             /* a read without BEGIN: the server's implicit
	                             transaction, to the next Sync (pg.c) */
	int depth;                /* the innermost open level; -1: none */
	unsigned open[PG_MAX_DEPTH]; /* the open levels' ids */
	unsigned char deferred[PG_MAX_DEPTH]; /* a level sent a change without reading its result */
	unsigned serial;          /* the last id given */
	int fail_depth, fail_rc;  /* the outermost level a statement failed in (INT_MAX: none) */
	PGresult **held;          /* results whose bytes were handed out */
	size_t nheld, held_cap;
	struct kv_ecur *curs;     /* cursors open on it */
	struct pg_reserve rsv;
	struct pg_cache cache;
};

enum pg_kind { PG_WRITE, PG_READ, PG_RDONLY };

struct kv_etxn {
	struct pg_conn *c;
	int depth;                /* 0: top level; n: a child n deep */
	enum pg_kind kind;        /* PG_READ: read_begin's, recycled */
	unsigned gen;             /* PG_READ: pg_guess_gen at its begin */
	int active;
};

/* Statements without a map (invariant 5), each level's savepoint ones
 * apart: their names differ by depth, so a SAVEPOINT the server skipped
 * (after a failure) never lets a ROLLBACK TO reach the level above. */
enum pg_cmd {
	C_NONE,
	C_BEGIN,
	C_BEGIN_READ,
	C_COMMIT,
	C_ROLLBACK,
	C_LOCK,
	C_NOTIFY, /* one parameter: the message */
	C_SAVEPOINT, /* + depth */
	C_RELEASE = C_SAVEPOINT + PG_MAX_DEPTH,
	C_UNDO = C_RELEASE + PG_MAX_DEPTH, /* ROLLBACK TO SAVEPOINT */
	C_N = C_UNDO + PG_MAX_DEPTH
};
_Static_assert(C_N <= PG_CMD_SLOTS * S_N, "PG_CMD_SLOTS too small");
_Static_assert(S_N <= 16, "pg_conn.prepared has 16 bits a slot");

struct pg_env {
	kv_env *e;
	char disp[512];           /* the URL for messages, its password left out */
	struct pg_conn *w;        /* the writer's connection (read-write opens) */
	kv_etxn wtx;              /* the write transaction's top level */
	pthread_mutex_t lock;     /* pool, npool */
	struct pg_conn *pool;     /* idle connections */
	int npool;

	/* many mounts (pg_listen.c): the filesystem's writers' lock and the
	 * channel its changes go on (pg_names, at open) */
	char lock_sql[64];
	char chan[32];
	long long mount_key;      /* the lock a read-write open holds: shared by mounts,
	                             whole by the tools that repair or tune */
	int mount_held;           /* the writer's connection holds it */
	/* a mount alone (pg_lease.c): the lease every mount holds shared, the
	 * channel a mount that waits for it asks on */
	long long lease_key;
	char lease_chan[40];
	struct pg_conn *hold;     /* a read-only mount's: holds it shared */
	int hold_lost;            /* the listener's: hold's share went with its session */
	int64_t hold_asked;       /* and when the listener last asked for it */
	int leased;               /* the writer's role: the writer's connection holds
	                             it whole (pg_lease) */
	int64_t lease_at;         /* the writer's role: not tried before (ms) */
	struct pg_listener *listener;
	/* another mount was there (its lock seen, or a notice of its heard):
	 * commits NOTIFY from then on (pg_listen.c invariant 3) */
	atomic_int others;
	struct pg_guess *guess;   /* read-write opens: pg_guess.c */
};

/* pg_guess.c: the time (CLOCK_MONOTONIC_COARSE, ns) of the last message of
 * another mount heard; whether one came within PG_GUESS_QUIET_NS. */
void pg_guess_heard(struct pg_env *pe);
int pg_guess_quiet(struct pg_env *pe);

/* pg_cache.c (invariants there). A key's hash (pg_guess.c's too). */
uint32_t pg_key_hash(enum kv_db db, const void *k, size_t klen);
/* The entry of key k of db, live, or NULL. */
struct pg_centry *pg_cache_find(struct pg_conn *c, enum kv_db db, const void *k, size_t klen);
/* Level depth learned or changed key k of db: state (PC_VAL with vlen
 * bytes at v, copied into the arena when copy, else kept where they are;
 * PC_NONE; PC_PEND). The entry, or NULL when there was no room (the key's
 * entry is then dropped: nothing known of it). */
struct pg_centry *pg_cache_set(struct pg_conn *c, int depth, enum kv_db db, const void *k,
			       size_t klen, enum pg_cstate state, const void *v, size_t vlen,
			       int copy);
/* Forget what is known of key k of db. */
void pg_cache_drop(struct pg_conn *c, enum kv_db db, const void *k, size_t klen);
/* Child level depth committed: its entries are its parent's; aborted: they
 * are dropped. */
void pg_cache_commit(struct pg_conn *c, int depth);
void pg_cache_abort(struct pg_conn *c, int depth);
/* The top level ended: every entry goes (the arena's first chunk stays). */
void pg_cache_end(struct pg_conn *c);
void pg_cache_free(struct pg_conn *c);
/* pg.c, for pg_drain: the result r of prefetch p (NULL: it failed), handed
 * over. */
void pg_prefetched(struct pg_conn *c, const struct pg_pend *p, PGresult *r);

/* pg_guess.c (invariants there). Kept for db: the small records. */
int pg_guess_db(enum kv_db db);
int pg_guess_init(struct pg_env *pe); /* ENOMEM */
void pg_guess_free(struct pg_env *pe);
/* What is known of key k of db: PC_VAL (its value copied to val, at least
 * pg_guess.c's PG_GUESS_VMAX bytes of room, *vlen set), PC_NONE (no
 * record), or PC_DEAD (nothing known). */
int pg_guess_find(struct pg_env *pe, enum kv_db db, const void *k, size_t klen, void *val,
		  size_t *vlen);
#define PG_GUESS_VBUF 464
/* The writer's commits learned so far (a reader's begin). */
unsigned pg_guess_gen(struct pg_env *pe);
/* A reader that began at gen found key k of db holding v (found), or no
 * record. */
void pg_guess_read(struct pg_env *pe, unsigned gen, enum kv_db db, const void *k, size_t klen,
		   const void *v, size_t vlen, int found);
void pg_guess_forget(struct pg_env *pe, enum kv_db db, const void *k, size_t klen);
/* c's write transaction committed: what its top level knows is learned. */
void pg_guess_commit(struct pg_env *pe, struct pg_conn *c);
void pg_guess_clear(struct pg_env *pe);

/* pg_listen.c: the names of the filesystem's lock and channel, from the
 * schema that holds its tables. */
void pg_names(struct pg_env *pe, const char *schema);
/* engine.h's listen and publish. */
int pg_listen(kv_env *e, int on);
/* Take the mount lock on c (the writer's connection) as e asks: shared for
 * a mount, whole for any other read-write open, trying for a few seconds (a
 * daemon just unmounted lets go as its connection closes). 0, EBUSY with
 * a message in err, EIO. */
int pg_mount_lock(struct pg_conn *c, char *err, size_t errlen);
/* pg_lease.c: a mount's share of the lease taken on c, waiting (bounded)
 * for a mount that holds it whole to give it up; 0, EBUSY or EIO with a
 * message. The engine's lease (engine.h). */
int pg_lease_join(struct pg_conn *c, char *err, size_t errlen);
/* One try at a share of the lease on c, without waiting: 0 held, EAGAIN
 * while a mount elsewhere holds it whole (asked to give it up, at most each
 * LEASE_ASK_MS since *asked, which it updates), or EIO. */
int pg_lease_share(struct pg_conn *c, int64_t *asked);
int pg_lease(kv_env *e, int take);
void pg_listen_free(struct pg_env *pe);

/* pg_conn.c. Return 0, a positive errno value or a KV_E* code (engine.h
 * contract 2). */
void pg_display(const char *url, char *out, size_t n);
/* A new connection to pe's URL in pipeline mode; a message in err when it
 * fails (EIO). */
int pg_connect(struct pg_env *pe, int writer, struct pg_conn **out, char *err, size_t errlen);
void pg_conn_free(struct pg_conn *c);
/* A plain libpq connection to pe's URL with the same defaults (the
 * listener's); NULL only without memory (check PQstatus). */
PGconn *pg_pq_connect(struct pg_env *pe);
/* Before a transaction begins: a connection the server closed meanwhile is
 * noticed, and a lost one reset once. 0 or EIO. */
int pg_alive(struct pg_conn *c);
/* The connection is lost (why: libpq's or our words): logged once, EIO. */
int pg_lost(struct pg_conn *c, const char *why);
int pg_lost_pq(struct pg_conn *c);
/* Record a message sent (pend); ENOMEM. */
int pg_push(struct pg_conn *c, unsigned id, int prep, int sync, int want);
/* Send a statement of text (no parameters, text results) as level id. */
int pg_send_text(struct pg_conn *c, unsigned id, const char *sql, int want);
/* Send a Sync when statements were sent since the last one. */
int pg_sync(struct pg_conn *c);
/* Send what is buffered without waiting for the server. */
void pg_flush_now(struct pg_conn *c);
/* Sync, then read every pending result. The code of the statement sent
 * with want (its result in *res when res and it succeeded); a failure of
 * another is charged to the level that sent it (pg_conn.fail_depth). */
int pg_drain(struct pg_conn *c, PGresult **res);
/* sql, a SELECT of one boolean, on c between transactions: 0 with *yes
 * (when yes is not NULL). */
int pg_ask_bool(struct pg_conn *c, const char *sql, int *yes);
/* An idle connection of the pool, or a new one. */
int pg_pool_get(struct pg_env *pe, struct pg_conn **out, char *err, size_t errlen);
void pg_pool_put(struct pg_env *pe, struct pg_conn *c);
/* Begin a transaction on c and make the tables in it (not committed yet):
 * EEXIST when they are there unless force (and nothing begun); *page the
 * server's page size. A message in err on failure. */
int pg_store_make(struct pg_conn *c, int force, uint32_t *page, char *err, size_t errlen);
/* The tables there and of this version: 0 (*page set), KV_EINVAL,
 * KV_EVERSION or EIO with a message in err. */
int pg_store_check(struct pg_conn *c, uint32_t *page, char *err, size_t errlen);
/* Every commit so far made durable (on a pool connection). */
int pg_store_sync(struct pg_env *pe);
/* The bytes the tables take on the server. */
int pg_store_bytes(struct pg_env *pe, uint64_t *bytes);

/* pg.c: helpers of the engine's files. */
int pg_keep(PGresult ***arr, size_t *n, size_t *cap, PGresult *r); /* append; ENOMEM */
void pg_clear_all(PGresult **arr, size_t *n);
void pg_val(const PGresult *r, int row, int col, kv_val *v);
int pg_key_cmp(const void *a, size_t alen, const void *b, size_t blen); /* contract 1 */

/* pg_stmt.c. Send statement s of map db at level depth (want: its result is
 * waited for), or one without a map (enum pg_cmd), after what the level
 * owes the server (pg_prelude); pg_call sends and waits; pg_hold keeps r
 * to the end of the top level (pg.c invariant 2). */
int pg_send_stmt(struct pg_conn *c, int depth, enum kv_db db, enum pg_stmt s, const kv_val *k,
		 const kv_val *v, int limit, int want);
/* pg_send_stmt with the value a change replaces (S_SWAP's). */
int pg_send_old(struct pg_conn *c, int depth, enum kv_db db, enum pg_stmt s, const kv_val *k,
		const kv_val *v, const kv_val *old, int limit, int want);
int pg_call(struct pg_conn *c, int depth, enum kv_db db, enum pg_stmt s, const kv_val *k,
	    const kv_val *v, int limit, PGresult **r);
int pg_send_cmd(struct pg_conn *c, unsigned id, int cmd, const char *param, int want);
int pg_prelude(struct pg_conn *c, int depth);
int pg_hold(struct pg_conn *c, PGresult *r);

/* pg_guess.c: a guess of key k of db made what c's top level knows, its
 * check owed (sent with the key's first change, or by pg_owed_all); NULL:
 * none. */
struct pg_centry *pg_guessed(struct pg_conn *c, int depth, enum kv_db db, const kv_val *k);
/* Before a change of key k of db that does not check a guess itself, the
 * check the key owes, sent as level depth. */
int pg_owed_key(struct pg_conn *c, int depth, enum kv_db db, const void *k, size_t klen);
/* Every check still owed, sent as level depth; whether one is owed. */
int pg_owed_all(struct pg_conn *c, int depth);
int pg_owes(struct pg_conn *c);

/* pg_cursor.c: the engine's cursor calls; pg_touch, a change of key k of db
 * in c's transaction (pg.c invariant 4); pg_cursors_end, the top level
 * ended. */
int pg_cur_open(kv_env *e, kv_etxn *x, enum kv_db db, kv_ecur **out);
int pg_cur_renew(kv_env *e, kv_etxn *x, kv_ecur *cur);
void pg_cur_close(kv_env *e, kv_ecur *cur);
void pg_cur_forget(kv_env *e, kv_ecur *cur);
int pg_cur_get(kv_env *e, kv_ecur *cur, kv_val *k, kv_val *v, enum kv_cop op);
int pg_cur_del(kv_env *e, kv_ecur *cur);
void pg_touch(struct pg_conn *c, enum kv_db db, const void *k, size_t klen);
void pg_cursors_end(struct pg_conn *c);

#endif
