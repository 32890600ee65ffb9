/*
 * err.c - the store's errors and its log: the one mapping from LMDB's return
 * codes to errno values (kv_err), the log lines (kv_log, kv_set_log) and the
 * one-line messages kv_mkfs, kv_open and kv_backup hand back (kv_seterr).
 *
 * Invariants:
 *  1. Every LMDB return code becomes an errno here and nowhere else. Code
 *     elsewhere in kv/ keeps an LMDB code in a variable of its own (mrc) and
 *     converts it at the call that got it (or tests it for one code, such as
 *     MDB_NOTFOUND, that means something there); a variable named rc holds 0
 *     or a negative errno, never an LMDB code.
 *  2. kv_err logs what a caller cannot tell from the errno alone (a reader
 *     table full, an LMDB failure that became -EIO), once, unless the caller
 *     reports the failure itself (what == NULL: a message into err).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>

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

int kv_err_map(kv_txn *txn, int mrc, const char *what)
{
	switch (mrc) {
	case 0:
		return 0;
	case MDB_NOTFOUND:
		return -ENOENT;
	case MDB_KEYEXIST:
		return -EEXIST;
	case MDB_MAP_FULL:
		if (txn)
			txn->map_full = 1;
		return -ENOSPC;
	case MDB_TXN_FULL:
		if (txn)
			txn->txn_full = 1;
		return -ENOSPC;
	case MDB_READERS_FULL:
		if (what)
			kv_log("%s: reader table full", what);
		return -EAGAIN;
	case MDB_INVALID: /* not an LMDB file: env open */
		return -EINVAL;
	case MDB_VERSION_MISMATCH: /* a file of another LMDB: env open */
		return -EPROTONOSUPPORT;
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
			kv_log("%s: %s", what, mdb_strerror(mrc));
		return -EIO;
	}
}
