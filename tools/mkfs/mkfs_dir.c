/*
 * mkfs_dir.c - mkfs.kvfs -d DIR: copy a directory tree into a new image.
 *
 * The walk reads the source and fills a batch: a list of items (an inode
 * record, a name, a hard link, a run of file bytes, an xattr) with their
 * bytes in one buffer. A full batch goes to the writer as one op, so a
 * commit carries thousands of files (or up to BATCH_BYTES of data), and
 * while it commits the walk fills the other of two batches:
 *
 *   walk fills A --submit A--> walk fills B --wait A, submit B--> fills A ...
 *
 * What is kept: contents, modes, owners, times to the nanosecond (btime
 * where the source reports it), symlinks, hard links (one kvfs inode with
 * the number of names found in the tree), xattrs (those the daemon would
 * take, kv_xattr_name_check; another system.* one, such as an NFSv4 ACL, is
 * left out with a message), POSIX ACLs (the source's getxattr gives them in
 * the encoding kvfs stores, and its mode is already the one they imply),
 * device nodes, FIFOs and sockets. Holes stay holes: only the source's data
 * regions (SEEK_DATA / SEEK_HOLE) are read, and runs of zeros inside them
 * are not stored.
 *
 * With a compress level (mkfs.kvfs -O compress), each run of file bytes is
 * checksummed and compressed by the walk as the daemon's write does it
 * (kv_data_sums, kv_data_compress: before the op, never in the writer),
 * and the batch carries the checksums and the frames that save room
 * behind the bytes; apply() stores them with kv_data_write_sums.
 *
 * Invariants:
 *  1. The new image is this process's alone (its exclusive lock), so the
 *     walk numbers inodes itself, upward from the superblock's counter, and
 *     each batch raises the counter past the numbers it uses: every inode
 *     in use is below the counter at every commit.
 *  2. Items are applied in the order the walk made them: a directory's
 *     record and name before its entries, its final record (entry count,
 *     link count, times) after them.
 *  3. apply() reads the batch and writes only the transaction and the
 *     batch's result fields, so the writer may replay it (map growth).
 *  4. A batch is not touched by the walk from its submission until its
 *     done() has run.
 */
#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "cli.h"
#include "inomap.h"
#include "kv.h"
#include "mkfs.h"
#include "progress.h"

#define BATCH_BYTES (16u << 20)
#define BATCH_ITEMS 16384
#define CHUNK (1u << 20)                       /* file bytes read at a time, at most */
#define BUF_CAP (BATCH_BYTES + CHUNK + (256u << 10)) /* room for one more of anything */

enum item_kind { IT_INODE, IT_DIRENT, IT_LINK, IT_DATA, IT_XATTR };

struct item {
	uint8_t kind;
	uint8_t type;       /* IT_DIRENT, IT_LINK: the DT_* of the inode */
	uint64_t ino;
	uint64_t dir;       /* IT_DIRENT, IT_LINK */
	uint64_t pos;       /* IT_DATA: file offset */
	size_t off, len;    /* bytes in buf: name, symlink target, data, or xattr name NUL value */
	size_t src;         /* the source path in buf, for messages */
	size_t zat;         /* IT_DATA with nsums: in buf, 8-aligned, nsums checksums (u64),
	                       nz frame offsets and nz lengths (u32), then the frames */
	uint32_t nsums, nz;
	struct kv_inode in; /* IT_INODE; inline data is (off, len) */
};

struct loader;

struct batch {
	struct loader *loader;
	struct item *items;
	size_t n;
	unsigned char *buf;
	size_t len;
	uint64_t next_ino; /* the counter this batch raises (invariant 1) */
	struct kv_op op;
	int busy;          /* submitted, done() not yet run */
	/* results */
	int rc;
	size_t failed;     /* the item that failed, or SIZE_MAX */
};

struct loader {
	kv_env *env;
	uint64_t bs;
	int level;            /* zstd level of the data blocks; 0: stored as they are */
	uint64_t next_ino;
	struct batch b[2];
	int cur;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct inomap links;  /* (dev, ino) of a source with several names -> kvfs ino */
	dev_t img_dev;        /* the image and its lock file, left out of the copy */
	ino_t img_ino, lock_ino;
	char *path;           /* the current source path */
	size_t pathlen, pathcap;
	size_t src;           /* path's copy in the current batch, or SIZE_MAX */
	int have_proc;
	struct progress prog;
	struct mkfs_fill_stats st;
};

/* ------------------------------------------------------------ messages -- */

static void fail(struct loader *L, const char *path, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void fail(struct loader *L, const char *path, const char *fmt, ...)
{
	va_list ap;

	progress_clear(&L->prog);
	va_start(ap, fmt);
	cli_verror_at(path, fmt, ap);
	va_end(ap);
}

static void show_progress(struct loader *L)
{
	char bytes[32];

	if (!progress_due(&L->prog))
		return;
	cli_format_bytes(L->st.bytes, bytes, sizeof(bytes));
	progress_draw(&L->prog, -1, "%s: %llu files, %s", cli_prog,
		      (unsigned long long)L->st.inodes, bytes);
}

/* ------------------------------------------------------------- batches -- */

/* A data item the walk checksummed and compressed (pack_item). */
static int write_packed(kv_txn *t, const struct batch *b, const struct item *it,
			struct kv_inode *cur)
{
	const uint64_t *sums = (const uint64_t *)(b->buf + it->zat);
	const uint32_t *zoff = (const uint32_t *)(sums + it->nsums);
	struct kv_zblocks z = {.zoff = zoff, .zlen = zoff + it->nz, .n = it->nz};

	z.data = (const unsigned char *)(z.zlen + it->nz);
	return kv_data_write_sums(t, cur, it->pos, b->buf + it->off, it->len, sums, it->nsums,
				  it->nz ? &z : NULL);
}

static int apply_item(kv_txn *t, struct batch *b, const struct item *it, struct kv_inode *cur)
{
	const char *p = (const char *)b->buf + it->off;
	struct kv_inode in;
	size_t nlen;
	int rc;

	switch (it->kind) {
	case IT_INODE:
		in = it->in;
		in.inline_data = it->len ? p : NULL;
		in.inline_len = (uint32_t)it->len;
		return kv_inode_put(t, &in);
	case IT_DIRENT:
		return kv_dirent_add(t, it->dir, p, it->len, it->ino, it->type);
	case IT_LINK:
		rc = kv_dirent_add(t, it->dir, p, it->len, it->ino, it->type);
		if (!rc)
			rc = kv_inode_get(t, it->ino, &in);
		if (rc)
			return rc;
		in.nlink++;
		return kv_inode_put(t, &in);
	case IT_DATA:
		if (cur->ino != it->ino && (rc = kv_inode_get(t, it->ino, cur)) != 0)
			return rc;
		if (it->nsums)
			return write_packed(t, b, it, cur);
		return kv_data_write(t, cur, it->pos, p, it->len);
	case IT_XATTR:
		nlen = strlen(p);
		return kv_xattr_set(t, it->ino, p, p + nlen + 1, it->len - nlen - 1, 0);
	}
	return -EINVAL;
}

static int apply_batch(kv_txn *t, void *arg)
{
	struct batch *b = arg;
	struct kv_inode cur = {.ino = 0}; /* the file IT_DATA items are filling */
	int rc;

	b->failed = SIZE_MAX;
	rc = kv_ino_counter_raise(t, b->next_ino);
	for (size_t i = 0; rc == 0 && i < b->n; i++) {
		const struct item *it = &b->items[i];

		if (cur.ino && (it->kind != IT_DATA || it->ino != cur.ino)) {
			rc = kv_inode_put(t, &cur);
			cur.ino = 0;
			if (rc) {
				b->failed = i - 1;
				break;
			}
		}
		rc = apply_item(t, b, it, &cur);
		if (rc)
			b->failed = i;
	}
	if (rc == 0 && cur.ino) {
		rc = kv_inode_put(t, &cur);
		if (rc)
			b->failed = b->n - 1;
	}
	return rc;
}

/* Wait until batch b is committed; report its failure. */
static int batch_wait(struct loader *L, struct batch *b)
{
	pthread_mutex_lock(&L->lock);
	while (b->busy)
		pthread_cond_wait(&L->cond, &L->lock);
	pthread_mutex_unlock(&L->lock);
	if (!b->rc)
		return 0;
	if (b->failed < b->n)
		fail(L, (const char *)b->buf + b->items[b->failed].src, "cannot store: %s",
		     strerror(-b->rc));
	else
		cli_error("cannot write the image: %s", strerror(-b->rc));
	b->rc = 0; /* reported */
	return -1;
}

static void on_done(void *arg, int rc)
{
	struct batch *b = arg;
	struct loader *L = b->loader;

	pthread_mutex_lock(&L->lock);
	b->rc = rc;
	b->busy = 0;
	pthread_cond_broadcast(&L->cond);
	pthread_mutex_unlock(&L->lock);
}

/* Submit the current batch and switch to the other, once it is committed. */
static int flush(struct loader *L)
{
	struct batch *b = &L->b[L->cur], *next = &L->b[!L->cur];
	int rc;

	if (b->n == 0) { /* bytes without items (a path): nothing to submit */
		b->len = 0;
		L->src = SIZE_MAX;
		return 0;
	}
	if (batch_wait(L, next))
		return -1;
	b->next_ino = L->next_ino;
	b->rc = 0;
	b->op = (struct kv_op){.apply = apply_batch, .done = on_done, .arg = b};
	b->busy = 1;
	rc = kv_submit(L->env, &b->op);
	if (rc) {
		b->busy = 0;
		fail(L, L->path, "cannot write the image: %s", strerror(-rc));
		return -1;
	}
	L->cur = !L->cur;
	next->n = 0;
	next->len = 0;
	L->src = SIZE_MAX;
	return 0;
}

/* Make room for items more items and bytes more bytes in the batch. */
static int reserve(struct loader *L, size_t items, size_t bytes)
{
	struct batch *b = &L->b[L->cur];

	if (bytes > BUF_CAP) {
		fail(L, L->path, "path too long to copy");
		return -1;
	}
	if (b->n + items > BATCH_ITEMS || b->len + bytes > BUF_CAP ||
	    (b->len >= BATCH_BYTES && bytes))
		return flush(L);
	return 0;
}

/* Copy len bytes into the batch; returns their offset. Room is reserved. */
static size_t put_bytes(struct loader *L, const void *p, size_t len)
{
	struct batch *b = &L->b[L->cur];
	size_t off = b->len;

	assert(len <= BUF_CAP - b->len); /* reserve() made room */
	if (len)
		memcpy(b->buf + off, p, len);
	b->len += len;
	return off;
}

static struct item *add_item(struct loader *L, enum item_kind kind, uint64_t ino)
{
	struct batch *b = &L->b[L->cur];
	struct item *it;

	assert(b->n < BATCH_ITEMS); /* reserve() made room */
	it = &b->items[b->n++];
	if (L->src == SIZE_MAX)
		L->src = put_bytes(L, L->path, L->pathlen + 1);
	memset(it, 0, sizeof(*it));
	it->kind = (uint8_t)kind;
	it->ino = ino;
	it->src = L->src;
	return it;
}

/* An item with payload bytes: reserve first (the path may go in too). */
static struct item *add_bytes_item(struct loader *L, enum item_kind kind, uint64_t ino,
				   const void *p, size_t len)
{
	struct item *it;

	if (reserve(L, 1, len + L->pathlen + 1))
		return NULL;
	it = add_item(L, kind, ino);
	it->off = put_bytes(L, p, len);
	it->len = len;
	return it;
}

/* ---------------------------------------------------------- the source -- */

static int64_t ns_of(const struct statx_timestamp *t)
{
	return (int64_t)t->tv_sec * 1000000000 + t->tv_nsec;
}

static void inode_of(const struct statx *sx, uint64_t ino, struct kv_inode *in)
{
	memset(in, 0, sizeof(*in));
	in->ino = ino;
	in->mode = sx->stx_mode;
	in->uid = sx->stx_uid;
	in->gid = sx->stx_gid;
	in->nlink = S_ISDIR(sx->stx_mode) ? 2 : 1;
	if (S_ISREG(sx->stx_mode))
		in->size = sx->stx_size;
	if (S_ISCHR(sx->stx_mode) || S_ISBLK(sx->stx_mode))
		in->rdev = makedev(sx->stx_rdev_major, sx->stx_rdev_minor);
	in->atime_ns = ns_of(&sx->stx_atime);
	in->mtime_ns = ns_of(&sx->stx_mtime);
	in->ctime_ns = ns_of(&sx->stx_ctime);
	in->btime_ns = (sx->stx_mask & STATX_BTIME) ? ns_of(&sx->stx_btime) : in->ctime_ns;
}

static int add_inode(struct loader *L, const struct kv_inode *in, const void *inl, size_t len)
{
	struct item *it = add_bytes_item(L, IT_INODE, in->ino, inl, len);

	if (!it)
		return -1;
	it->in = *in;
	return 0;
}

static int add_name(struct loader *L, enum item_kind kind, uint64_t dir, const char *name,
		    uint64_t ino, uint32_t mode)
{
	struct item *it = add_bytes_item(L, kind, ino, name, strlen(name));

	if (!it)
		return -1;
	it->dir = dir;
	it->type = kv_dirent_type(mode);
	return 0;
}

/* The xattrs of the source, through fd when it is open, else by lpath. */
static int load_xattrs(struct loader *L, uint64_t ino, int fd, const char *lpath)
{
	char *names = NULL, val[KV_XATTR_SIZE_MAX], nv[KV_XATTR_NAME_MAX + 1 + 1];
	ssize_t n, v;
	int rc = -1;

	n = fd >= 0 ? flistxattr(fd, NULL, 0) : llistxattr(lpath, NULL, 0);
	if (n <= 0) {
		if (n == 0 || errno == ENOTSUP)
			return 0;
		goto err;
	}
	names = malloc((size_t)n + 1);
	if (!names)
		goto err;
	n = fd >= 0 ? flistxattr(fd, names, (size_t)n) : llistxattr(lpath, names, (size_t)n);
	if (n < 0)
		goto err;
	for (char *p = names; p < names + n; p += strlen(p) + 1) {
		size_t nl = strlen(p);
		int refused = kv_xattr_name_check(p, nl), bad;
		struct item *it;

		if (refused && refused != -ERANGE) {
			/* the daemon would refuse it too (system.*, not a POSIX ACL) */
			fail(L, L->path, "xattr '%s' left out: %s (kvfs stores user., trusted. "
				 "and security. names and POSIX ACLs)", p, strerror(-refused));
			continue;
		}
		v = fd >= 0 ? fgetxattr(fd, p, val, sizeof(val)) : lgetxattr(lpath, p, val, sizeof(val));
		if (v < 0 && errno == ENODATA)
			continue; /* removed since the list */
		if (v < 0 || refused) {
			if (v >= 0)
				errno = ERANGE;
			fail(L, L->path, "cannot copy xattr '%s': %s", p, strerror(errno));
			goto out;
		}
		bad = kv_acl_name(p) ? kv_acl_check(val, (size_t)v) : 0;
		if (bad == -E2BIG) { /* tmpfs, XFS keep more; leaving it out can widen access */
			fail(L, L->path, "cannot copy ACL '%s': more than %d entries", p,
			     KV_ACL_ENTRIES_MAX);
			goto out;
		} else if (bad) {
			fail(L, L->path, "cannot copy ACL '%s': malformed", p);
			goto out;
		}
		if (reserve(L, 1, nl + 1 + (size_t)v + L->pathlen + 1))
			goto out;
		memcpy(nv, p, nl + 1);
		it = add_item(L, IT_XATTR, ino);
		it->off = put_bytes(L, nv, nl + 1);
		put_bytes(L, val, (size_t)v);
		it->len = nl + 1 + (size_t)v;
	}
	rc = 0;
	goto out;
err:
	fail(L, L->path, "cannot list xattrs: %s", strerror(errno));
out:
	free(names);
	return rc;
}

static int is_zero(const unsigned char *p, size_t n)
{
	return n == 0 || (p[0] == 0 && memcmp(p, p + 1, n - 1) == 0);
}

/* The checksums and frames of the blocks of data item it, which pack_item
 * puts behind the batch's bytes, for an item of len bytes: at most len
 * bytes of frames (a frame is kept only when smaller than its block), and
 * per block touched a checksum, a frame's offset and length and up to 7
 * bytes of alignment. */
static size_t pack_room(const struct loader *L, size_t len)
{
	return L->level ? len + (len / L->bs + 2) * 24 : 0;
}

/* Checksum and compress the bytes of data item it as the daemon's write
 * does, here in the walk, before the op; their checksums and the frames
 * that save room go into the batch behind them (pack_room reserved). */
static void pack_item(struct loader *L, struct batch *b, struct item *it)
{
	const unsigned char *src = b->buf + it->off;
	size_t at = (b->len + 7) & ~(size_t)7, used = 0, ns, nz = 0;
	uint64_t *sums = (uint64_t *)(b->buf + at);
	struct kv_zblocks z;
	uint32_t *zoff, *zlen;
	unsigned char *frames;

	ns = kv_data_sums(L->env, it->ino, it->pos, src, it->len, sums, it->len / L->bs + 2);
	if (ns)
		nz = kv_data_compress(L->env, it->ino, it->pos, src, it->len, L->level, sums, ns,
				      &z);
	zoff = (uint32_t *)(sums + ns);
	zlen = zoff + nz;
	frames = (unsigned char *)(zlen + nz);
	for (size_t i = 0; i < nz; i++) {
		zoff[i] = (uint32_t)used;
		zlen[i] = z.zlen[i];
		memcpy(frames + used, z.data + z.zoff[i], z.zlen[i]);
		used += z.zlen[i];
	}
	it->zat = at;
	it->nsums = (uint32_t)ns;
	it->nz = (uint32_t)nz;
	b->len = (size_t)(frames - b->buf) + used;
	assert(b->len <= BUF_CAP);
}

/* Read [from, to) of fd (inside one CHUNK-sized, block-aligned window)
 * into the batch and add its non-zero block pieces as data items. */
static int load_chunk(struct loader *L, int fd, uint64_t ino, uint64_t from, uint64_t to)
{
	struct batch *b;
	unsigned char *p;
	size_t len = (size_t)(to - from), got = 0, run = 0, at, n0;

	if (reserve(L, 1 + (len / L->bs + 2), len + pack_room(L, len) + L->pathlen + 1))
		return -1;
	if (L->src == SIZE_MAX)
		L->src = put_bytes(L, L->path, L->pathlen + 1);
	b = &L->b[L->cur];
	at = b->len;
	assert(len <= BUF_CAP - at);
	p = b->buf + at;
	while (got < len) {
		ssize_t n = pread(fd, p + got, len - got, (off_t)(from + got));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			fail(L, L->path, n ? "cannot read: %s" : "shrank while being read%s",
			     n ? strerror(errno) : "");
			return -1;
		}
		got += (size_t)n;
	}
	b->len += len;
	L->st.bytes += len;
	n0 = b->n;
	/* pieces split at block boundaries; all-zero pieces stay holes */
	for (size_t i = 0; i <= len;) {
		size_t piece = i < len ? (size_t)(L->bs - (from + i) % L->bs) : 0;
		if (piece > len - i)
			piece = len - i;
		if (i < len && !is_zero(p + i, piece)) {
			run += piece;
			i += piece;
			continue;
		}
		if (run) {
			struct item *it = add_item(L, IT_DATA, ino);
			it->off = at + i - run;
			it->len = run;
			it->pos = from + i - run;
			run = 0;
		}
		if (i == len)
			break;
		i += piece;
	}
	if (b->n == n0)
		b->len = at; /* all zeros: the bytes are not needed */
	for (size_t i = n0; L->level && i < b->n; i++)
		pack_item(L, b, &b->items[i]);
	return 0;
}

/* The data regions of a regular file, CHUNK bytes at a time. */
static int load_data(struct loader *L, int fd, uint64_t ino, uint64_t size)
{
	const uint64_t window = CHUNK / L->bs * L->bs;
	uint64_t pos = 0;

	while (pos < size) {
		off_t data = lseek(fd, (off_t)pos, SEEK_DATA), hole;

		if (data < 0 && errno == ENXIO)
			break; /* a hole to the end */
		if (data < 0) {
			data = (off_t)pos; /* no SEEK_DATA here: read it all */
			hole = (off_t)size;
		} else {
			hole = lseek(fd, data, SEEK_HOLE);
			if (hole < 0)
				hole = (off_t)size;
		}
		if ((uint64_t)hole > size)
			hole = (off_t)size;
		for (uint64_t a = (uint64_t)data; a < (uint64_t)hole;) {
			uint64_t b = (a / window + 1) * window;
			if (b > (uint64_t)hole)
				b = (uint64_t)hole;
			if (load_chunk(L, fd, ino, a, b))
				return -1;
			a = b;
			show_progress(L);
		}
		pos = (uint64_t)hole;
	}
	return 0;
}

/* ---------------------------------------------------------------- walk -- */

static int path_push(struct loader *L, const char *name)
{
	size_t len = strlen(name);
	char *p = array_reserve(L->path, &L->pathcap, L->pathlen + 1 + len + 1, 1, 256);

	if (!p) {
		fail(L, L->path, "out of memory");
		return -1;
	}
	L->path = p;
	L->path[L->pathlen++] = '/';
	memcpy(L->path + L->pathlen, name, len + 1);
	L->pathlen += len;
	L->src = SIZE_MAX;
	return 0;
}

static void path_pop(struct loader *L, size_t mark)
{
	L->pathlen = mark;
	L->path[mark] = '\0';
	L->src = SIZE_MAX;
}

/* A path for the l*xattr calls to an entry of directory dirfd. */
static const char *lpath(struct loader *L, int dirfd, const char *name, char *buf, size_t len)
{
	if (!L->have_proc)
		return L->path;
	snprintf(buf, len, "/proc/self/fd/%d/%s", dirfd, name);
	return buf;
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The names in directory fd, sorted (so a tree always gives one image). */
static int read_names(struct loader *L, int fd, char ***out, size_t *n)
{
	size_t cap = 0;
	char **v = NULL, **nv;
	struct dirent *de;
	DIR *d = fdopendir(dup(fd));

	*n = 0;
	if (!d) {
		fail(L, L->path, "cannot read: %s", strerror(errno));
		return -1;
	}
	while ((errno = 0, de = readdir(d)) != NULL) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (!(nv = array_reserve(v, &cap, *n + 1, sizeof(*v), 32)))
			break;
		v = nv;
		if (!(v[*n] = strdup(de->d_name)))
			break;
		(*n)++;
	}
	if (errno) {
		fail(L, L->path, "cannot read: %s", strerror(errno));
		closedir(d);
		while (*n)
			free(v[--*n]);
		free(v);
		return -1;
	}
	closedir(d);
	if (*n)
		qsort(v, *n, sizeof(*v), cmp_names);
	*out = v;
	return 0;
}

struct dir_counts {
	uint64_t entries, subdirs;
};

static int load_dir(struct loader *L, int fd, uint64_t ino, struct dir_counts *dc);

static int load_file(struct loader *L, int dirfd, const char *name, const struct statx *sx,
		     struct kv_inode *in)
{
	struct stat st;
	int fd, rc = -1;

	fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC | O_NOATIME);
	if (fd < 0 && errno == EPERM) /* O_NOATIME needs the owner */
		fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC);
	if (fd < 0) {
		fail(L, L->path, "cannot open: %s", strerror(errno));
		return -1;
	}
	if (fstat(fd, &st) != 0 || st.st_ino != sx->stx_ino || !S_ISREG(st.st_mode)) {
		fail(L, L->path, "changed while being read");
		goto close_fd;
	}
	if (add_inode(L, in, NULL, 0) == 0 && load_xattrs(L, in->ino, fd, NULL) == 0 &&
	    load_data(L, fd, in->ino, in->size) == 0)
		rc = 0;
close_fd:
	close(fd);
	return rc;
}

/* One entry of a directory: its inode, its name, and what is below it. */
static int load_entry(struct loader *L, int dirfd, uint64_t dir, const char *name,
		      struct dir_counts *dc)
{
	char target[KV_SYMLINK_MAX + 2], pbuf[64 + NAME_MAX];
	struct inomap_ent *m = NULL;
	struct statx sx;
	struct kv_inode in;
	ssize_t n;
	int fd, added, rc;

	if (statx(dirfd, name, AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT,
		  STATX_BASIC_STATS | STATX_BTIME, &sx) != 0) {
		fail(L, L->path, "cannot stat: %s", strerror(errno));
		return -1;
	}
	if (strlen(name) > KV_NAME_MAX) {
		fail(L, L->path, "name longer than %d bytes", KV_NAME_MAX);
		return -1;
	}
	if (makedev(sx.stx_dev_major, sx.stx_dev_minor) == L->img_dev &&
	    (sx.stx_ino == L->img_ino || sx.stx_ino == L->lock_ino)) {
		fail(L, L->path, "the image being made; left out");
		return 0;
	}
	dc->entries++;
	if (!S_ISDIR(sx.stx_mode) && sx.stx_nlink > 1) {
		if (inomap_put(&L->links, makedev(sx.stx_dev_major, sx.stx_dev_minor), sx.stx_ino,
			       &m, &added)) {
			fail(L, L->path, "out of memory");
			return -1;
		}
		if (!added) /* a further name of an inode copied already */
			return add_name(L, IT_LINK, dir, name, m->val, sx.stx_mode);
		m->val = L->next_ino;
	}
	inode_of(&sx, L->next_ino++, &in);
	L->st.inodes++;
	show_progress(L);
	if (S_ISDIR(sx.stx_mode)) {
		struct dir_counts sub = {0};

		in.parent = dir;
		dc->subdirs++;
		if (add_inode(L, &in, NULL, 0) || add_name(L, IT_DIRENT, dir, name, in.ino, in.mode))
			return -1;
		fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0) {
			fail(L, L->path, "cannot open: %s", strerror(errno));
			return -1;
		}
		rc = load_xattrs(L, in.ino, fd, NULL);
		if (!rc)
			rc = load_dir(L, fd, in.ino, &sub);
		close(fd);
		if (rc)
			return rc;
		in.size = sub.entries; /* the final record (invariant 2) */
		in.nlink = 2 + (uint32_t)sub.subdirs;
		return add_inode(L, &in, NULL, 0);
	}
	if (add_name(L, IT_DIRENT, dir, name, in.ino, in.mode))
		return -1;
	if (S_ISREG(sx.stx_mode))
		return load_file(L, dirfd, name, &sx, &in);
	if (S_ISLNK(sx.stx_mode)) {
		n = readlinkat(dirfd, name, target, sizeof(target));
		if (n < 0 || n > KV_SYMLINK_MAX) {
			fail(L, L->path, "cannot read the link: %s",
			     n < 0 ? strerror(errno) : "target too long");
			return -1;
		}
		in.size = (uint64_t)n;
		if (add_inode(L, &in, target, (size_t)n))
			return -1;
	} else if (add_inode(L, &in, NULL, 0)) {
		return -1;
	}
	return load_xattrs(L, in.ino, -1, lpath(L, dirfd, name, pbuf, sizeof(pbuf)));
}

/* The entries of source directory fd into kvfs directory ino. */
static int load_dir(struct loader *L, int fd, uint64_t ino, struct dir_counts *dc)
{
	size_t n, mark = L->pathlen;
	char **names;
	int rc = 0;

	if (read_names(L, fd, &names, &n))
		return -1;
	for (size_t i = 0; i < n; i++) {
		if (!rc && (rc = path_push(L, names[i])) == 0) {
			rc = load_entry(L, fd, ino, names[i], dc);
			path_pop(L, mark);
		}
		free(names[i]);
	}
	free(names);
	return rc;
}

/* The root: the source directory's attributes and xattrs go to inode 1. */
static int load_root(struct loader *L, const char *dir)
{
	struct dir_counts dc = {0};
	struct kv_inode in;
	struct statx sx;
	int fd, rc = -1;

	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		fail(L, dir, "cannot open: %s", strerror(errno));
		return -1;
	}
	if (statx(fd, "", AT_EMPTY_PATH, STATX_BASIC_STATS | STATX_BTIME, &sx) != 0) {
		fail(L, dir, "cannot stat: %s", strerror(errno));
		goto close_fd;
	}
	L->st.inodes++;
	inode_of(&sx, KV_ROOT_INO, &in);
	in.parent = KV_ROOT_INO;
	if (load_xattrs(L, KV_ROOT_INO, fd, NULL) || load_dir(L, fd, KV_ROOT_INO, &dc))
		goto close_fd;
	in.size = dc.entries;
	in.nlink = 2 + (uint32_t)dc.subdirs;
	rc = add_inode(L, &in, NULL, 0);
close_fd:
	close(fd);
	return rc;
}

static int loader_init(struct loader *L, const char *dir, int progress)
{
	memset(L, 0, sizeof(*L));
	progress_init(&L->prog, progress);
	L->have_proc = access("/proc/self/fd", X_OK) == 0;
	L->src = SIZE_MAX;
	pthread_mutex_init(&L->lock, NULL);
	pthread_cond_init(&L->cond, NULL);
	inomap_init(&L->links);
	L->pathcap = strlen(dir) + 256;
	L->path = malloc(L->pathcap);
	if (!L->path)
		return -1;
	strcpy(L->path, dir);
	L->pathlen = strlen(dir);
	while (L->pathlen > 1 && L->path[L->pathlen - 1] == '/')
		L->path[--L->pathlen] = '\0';
	for (int i = 0; i < 2; i++) {
		L->b[i].loader = L;
		L->b[i].items = malloc(BATCH_ITEMS * sizeof(struct item));
		L->b[i].buf = malloc(BUF_CAP);
		if (!L->b[i].items || !L->b[i].buf)
			return -1;
	}
	return 0;
}

static void loader_release(struct loader *L)
{
	for (int i = 0; i < 2; i++) {
		free(L->b[i].items);
		free(L->b[i].buf);
	}
	free(L->path);
	inomap_release(&L->links);
	pthread_cond_destroy(&L->cond);
	pthread_mutex_destroy(&L->lock);
}

int mkfs_fill(const char *image, const char *dir, int level, int progress,
	      struct mkfs_fill_stats *st)
{
	struct kv_open_opts o = {.durability = KV_DURABLE_NONE}; /* one sync at the end */
	struct kv_super s;
	struct loader L;
	struct stat sb;
	char err[512], *lock;
	int rc;

	if (loader_init(&L, dir, progress)) {
		fail(&L, dir, "out of memory");
		loader_release(&L);
		return -1;
	}
	rc = kv_open(image, &o, &L.env, err, sizeof(err));
	if (rc) {
		cli_error("%s", err);
		loader_release(&L);
		return -1;
	}
	/* the image and its lock file (there now) are not copied into themselves */
	if (stat(image, &sb) == 0) {
		L.img_dev = sb.st_dev;
		L.img_ino = sb.st_ino;
	}
	if (asprintf(&lock, "%s-lock", image) > 0) {
		if (stat(lock, &sb) == 0)
			L.lock_ino = sb.st_ino;
		free(lock);
	}
	kv_super_get(L.env, &s);
	L.bs = s.block_size;
	L.level = level;
	L.next_ino = s.next_ino;
	rc = load_root(&L, dir);
	if (!rc)
		rc = flush(&L);
	/* wait for both batches whatever happened: they point into L */
	if (batch_wait(&L, &L.b[0]))
		rc = -1;
	if (batch_wait(&L, &L.b[1]))
		rc = -1;
	if (!rc && (rc = kv_sync(L.env)) != 0)
		fail(&L, image, "cannot sync: %s", strerror(-rc));
	progress_clear(&L.prog);
	kv_close(L.env);
	*st = L.st;
	loader_release(&L);
	return rc ? -1 : 0;
}
