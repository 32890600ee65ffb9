/*
 * backup.c - the hot backup: a compacted, consistent copy of an image taken
 * while it is mounted and in use (kvfs-dump backup).
 *
 * Invariants:
 *  1. The copy comes from one read transaction inside LMDB, so it holds one
 *     commit's state, whatever the writer does meanwhile.
 *  2. A failed backup leaves no file behind, and a backup never replaces a
 *     file that exists.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kv_int.h"

int kv_backup(kv_env *e, const char *dest, char *err, size_t errlen)
{
	struct stat st;
	int fd, mrc, rc;

	if (stat(dest, &st) == 0) {
		snprintf(err, errlen, "'%s' exists", dest);
		return -EEXIST;
	}
	fd = open(dest, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0) {
		rc = -errno;
		snprintf(err, errlen, "cannot create '%s': %s", dest, strerror(-rc));
		return rc;
	}
	/* one read transaction inside LMDB: a consistent snapshot, compacted */
	mrc = mdb_env_copyfd2(e->env, fd, MDB_CP_COMPACT);
	rc = kv_err(NULL, mrc, NULL);
	if (rc == 0 && fsync(fd) != 0)
		rc = -errno;
	close(fd);
	if (rc) {
		unlink(dest);
		snprintf(err, errlen, "backup to '%s': %s", dest,
			 mrc ? mdb_strerror(mrc) : strerror(-rc));
		return rc;
	}
	return 0;
}
