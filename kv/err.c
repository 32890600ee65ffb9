/*
 * err.c - the store's errors and its log: the one mapping from the engine's
 * return codes (engine.h) to errno values (kv_err), their one table of words
 * (kv_strerror), the log lines (kv_log, kv_set_log) and the one-line
 * messages kv_mkfs, kv_open and kv_backup hand back (kv_seterr).
 *
 * Invariants:
 *  1. Every engine return code becomes an errno here and nowhere else. Code
 *     elsewhere in kv/ keeps an engine code in a variable of its own (mrc) and
 *     converts it at the call that got it (or tests it for one code, such as
 *     KV_ENOTFOUND, that means something there); a variable named rc holds 0
 *     or a negative errno, never an engine code.
 *  2. kv_err logs what a caller cannot tell from the errno alone (a reader
 *     table full, an engine failure that became -EIO), once, unless the caller
 *     reports the failure itself (what == NULL: a message into err).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "kv_int.h"

static kv_log_fn log_fn;

void kv_set_log(kv_log_fn fn)
{
	log_fn = fn;
}

void kv_seterr(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (!err || !errlen)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

void kv_log(const char *fmt, ...)
{
	char line[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (log_fn)
		log_fn(line);
	else
		fprintf(stderr, "kvfs: %s\n", line);
}

/* The one table of the engine codes' words, whatever the engine (kv_int.h):
 * a code's words say what happened in kvfs's terms, true for every engine
 * that returns it. */
const char *kv_strerror(int mrc)
{
	switch (mrc) {
	case KV_ENOTFOUND:
		return "no such key";
	case KV_EKEYEXIST:
		return "the key exists";
	case KV_EMAP_FULL:
		return "the store is full";
	case KV_ETXN_FULL: /* LMDB: too many pages changed; PostgreSQL: too many savepoints */
		return "the transaction is too large or nested too deep";
	case KV_EREADERS_FULL:
		return "no room for another reader";
	case KV_EINVAL:
		return "not a kvfs filesystem";
	case KV_EVERSION:
		return "a kvfs filesystem of another kvfs or engine version";
	case KV_EMAP_RESIZED:
		return "the map was resized";
	case KV_EGUESS:
		return "a guessed read was wrong";
	default: /* an errno value, or a code of LMDB's own (engine.h contract 2) */
		return mrc > 0 ? strerror(mrc) : kv_engine_lmdb.strerror(mrc);
	}
}

int kv_err_map(kv_txn *txn, int mrc, const char *what)
{
	switch (mrc) {
	case 0:
		return 0;
	case KV_ENOTFOUND:
		return -ENOENT;
	case KV_EKEYEXIST:
		return -EEXIST;
	case KV_EMAP_FULL:
		if (txn)
			txn->map_full = 1;
		return -ENOSPC;
	case KV_ETXN_FULL:
		if (txn)
			txn->txn_full = 1;
		return -ENOSPC;
	case KV_EREADERS_FULL:
		if (what)
			kv_log("%s: reader table full", what);
		return -EAGAIN;
	case KV_EINVAL: /* not an LMDB file: env open */
		return -EINVAL;
	case KV_EVERSION: /* a file of another LMDB: env open */
		return -EPROTONOSUPPORT;
	case KV_EGUESS: /* the writer runs it again without guessing (writer.c) */
		return -ESTALE;
	case ENOMEM:
		return -ENOMEM;
	case ENOSPC:
		return -ENOSPC;
	case EACCES:
	case EROFS:
	case EPERM:
		return -mrc;
	default:
		if (what)
			kv_log("%s: %s", what, kv_strerror(mrc));
		return -EIO;
	}
}
