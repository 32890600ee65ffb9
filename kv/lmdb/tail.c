/*
 * tail.c - an image whose file ends before the last page LMDB's meta page
 * names: sound when every missing page is free, cut when one is in use.
 *
 * A commit writes only the dirty pages it keeps. Pages it took past the
 * file's end and freed again in the same transaction (loose pages, overflow
 * pages given back) go on the free list unwritten, yet the meta page counts
 * them: the file then ends short of its last page until a later commit
 * writes past it, and a kill -9 or a power loss in between keeps it so. A
 * window of many ops (window.c) makes this common: data written and dropped
 * again within one window. LMDB never reads a free page (one it reuses is
 * built in memory and written whole; its own mdb_env_copy copies only up to
 * the file's size), so such an image is sound. A page in use past the end
 * means the file was cut, and reading that page would fault.
 *
 * Invariants:
 *  1. A short image is accepted only when every page from the first the file
 *     does not hold whole to the last the meta names is on the free list
 *     (database 0, records of page numbers, count first, as mdb_stat -f
 *     reads them).
 *  2. The free list is read with the missing part of LMDB's map (found in
 *     /proc/self/maps: LMDB does not say where its map is) backed by zeros,
 *     so that a free list lying there reads as damaged instead of faulting;
 *     the file's own mapping is put back before anything else reads the
 *     map, or the open fails.
 *  3. A read-write open then extends the file to the pages the meta names
 *     (a hole, no space taken), as the commit would have; a read-only open
 *     changes nothing.
 *  4. A read-only open of a mounted image may find the file short and the
 *     writer extending it while the free list is read under zeros: the check
 *     is made again while the file keeps growing between two looks.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "lmdb_int.h"

/* Missing pages checked at most (a bit each): 1 TiB of 4 KiB pages. */
#define TAIL_MAX_PAGES (1ULL << 28)

long kv_freelist_record(const kv_val *v, const unsigned char **ids)
{
	size_t cnt;

	if (v->size < sizeof(cnt))
		return -1;
	memcpy(&cnt, v->data, sizeof(cnt)); /* unaligned in the page */
	if (cnt > v->size / sizeof(cnt) - 1)
		return -1;
	*ids = (const unsigned char *)v->data + sizeof(cnt);
	return (long)cnt;
}

/* Count the pages of [first, first + n) that the free list names into
 * *found (bits in seen); 0, or -EIO when the free list cannot be read. */
static int count_free(kv_env *e, uint64_t first, uint64_t n, unsigned char *seen,
		      uint64_t *found)
{
	MDB_txn *txn;
	MDB_cursor *cur;
	MDB_val k, v;
	int mrc;

	*found = 0;
	if (mdb_txn_begin(kv_lmdb(e)->env, NULL, MDB_RDONLY, &txn))
		return -EIO;
	mrc = mdb_cursor_open(txn, 0, &cur); /* database 0: the free list */
	if (mrc)
		goto txn_abort;
	while (!(mrc = mdb_cursor_get(cur, &k, &v, MDB_NEXT))) {
		const unsigned char *ids;
		long cnt = kv_freelist_record((kv_val *)&v, &ids);

		if (cnt < 0)
			break;
		for (long i = 0; i < cnt; i++) {
			uint64_t b;
			size_t id;

			memcpy(&id, ids + i * sizeof(id), sizeof(id));
			if (id < first || id - first >= n)
				continue;
			b = id - first;
			if (!((seen[b / 8] >> b % 8) & 1))
				++*found;
			seen[b / 8] |= (unsigned char)(1 << b % 8);
		}
	}
	mdb_cursor_close(cur); /* a read-only transaction's are not closed by its end */
txn_abort:
	mdb_txn_abort(txn);
	return mrc == MDB_NOTFOUND ? 0 : -EIO;
}

/* Where LMDB mapped the file st describes, and how long the map is: the one
 * shared mapping of the file from offset 0 in /proc/self/maps (LMDB maps an
 * environment once, and kvfs opens an image once per process). NULL when
 * there is not exactly one. */
static unsigned char *map_of(const struct stat *st, uint64_t *len)
{
	unsigned long long lo, hi, off, ino;
	unsigned int maj, mnt;
	unsigned char *at = NULL;
	char line[4352], perms[8];
	int n = 0;
	FILE *f = fopen("/proc/self/maps", "re");

	if (!f)
		return NULL;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%llx-%llx %7s %llx %x:%x %llu", &lo, &hi, perms, &off, &maj, &mnt,
			   &ino) != 7)
			continue;
		if (ino != (unsigned long long)st->st_ino || maj != major(st->st_dev) ||
		    mnt != minor(st->st_dev) || off != 0 || perms[3] != 's')
			continue;
		at = (unsigned char *)(uintptr_t)lo;
		*len = hi - lo;
		n++;
	}
	fclose(f);
	return n == 1 ? at : NULL;
}

/* Whether pages [first, last] are all free (invariant 1), with LMDB's map
 * from the file's size (bytes) to need backed by zeros while the free list
 * is read (invariant 2): 1, 0, -ENOMEM, or -EIO when the file's mapping
 * could not be put back (the map is then not to be used). */
static int tail_free(kv_env *e, int fd, uint64_t size, uint64_t first, uint64_t last,
		     uint64_t need)
{
	uint64_t sys = (uint64_t)sysconf(_SC_PAGESIZE), n = last - first + 1, found;
	uint64_t from = (size + sys - 1) / sys * sys, to = (need + sys - 1) / sys * sys;
	unsigned char *seen, *at;
	uint64_t map_len = 0;
	struct stat st;
	int yes;

	if (n > TAIL_MAX_PAGES || fstat(fd, &st) || !(at = map_of(&st, &map_len)) || map_len < to)
		return 0;
	seen = calloc((size_t)(n + 7) / 8, 1);
	if (!seen)
		return -ENOMEM;
	at += from;
	if (to > from && mmap(at, to - from, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED,
			      -1, 0) == MAP_FAILED) {
		free(seen);
		return -EIO; /* the range may be gone from the map already */
	}
	yes = count_free(e, first, n, seen, &found) == 0 && found == n;
	free(seen);
	if (to > from &&
	    mmap(at, to - from, PROT_READ, MAP_SHARED | MAP_FIXED, fd, (off_t)from) == MAP_FAILED)
		return -EIO;
	return yes;
}

int kv_tail_check(kv_env *e, int fd, char *err, size_t errlen)
{
	MDB_envinfo info;
	MDB_stat ms;
	struct stat st;
	uint64_t need = 0;
	off_t size = -1;
	int rc = 0;

	/* a read-only open may race the writer of a live image: a file that
	 * grew during a refused check is looked at again (invariant 4) */
	for (int tries = 0; tries < 3; tries++) {
		if (mdb_env_info(kv_lmdb(e)->env, &info) || mdb_env_stat(kv_lmdb(e)->env, &ms) || fstat(fd, &st))
			return -EIO;
		e->page_size = ms.ms_psize;
		need = ((uint64_t)info.me_last_pgno + 1) * ms.ms_psize;
		if ((uint64_t)st.st_size >= need)
			return 0;
		if (st.st_size == size)
			break;
		size = st.st_size;
		rc = tail_free(e, fd, (uint64_t)size, (uint64_t)size / ms.ms_psize,
			       info.me_last_pgno, need);
		if (rc)
			break;
	}
	if (rc == 1) {
		/* invariant 3; a failure only leaves the file as LMDB did */
		if (!e->readonly)
			(void)!ftruncate(fd, (off_t)need);
		return 0;
	}
	if (rc == -ENOMEM) {
		kv_seterr(err, errlen, "'%s': %s", e->path, strerror(ENOMEM));
		return rc;
	}
	kv_seterr(err, errlen, "'%s' is truncated: %lld bytes, the image needs %llu", e->path,
		  (long long)st.st_size, (unsigned long long)need);
	return -EIO;
}
