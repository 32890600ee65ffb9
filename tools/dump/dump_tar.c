/*
 * dump_tar.c - the tar sink of kvfs-dump export: the tree as a pax archive
 * written with libarchive. pax carries what ustar cannot: long names and
 * link targets, nanosecond times, extended attributes (SCHILY.xattr, which
 * GNU tar --xattrs reads), POSIX ACLs (SCHILY.acl.access and .default, the
 * text GNU tar --acls and bsdtar read, from libarchive's ACL entries: not as
 * system.posix_acl_* xattrs, which neither sets), and sparse files (GNU
 * sparse format 1.0). Only keywords GNU tar knows are written (path,
 * linkpath, size, uid, gid, atime, mtime, ctime, SCHILY.xattr.*,
 * SCHILY.acl.*, GNU.sparse.*), so it lists and extracts the archive without
 * a warning; no LIBARCHIVE.* keyword.
 *
 * libarchive keeps an access ACL's owner, owning-group and other entries in
 * the entry's mode, so with an ACL the header's group bits are the owning
 * group's entry, not the mask (as bsdtar writes them): a reader that sets
 * the ACL gets the mode back from it, one that drops ACLs gives the owning
 * group all its entry holds, more than the ACL did where the mask held less
 * (GNU tar writes the mask; libarchive cannot keep both). ACLs go in with
 * numeric ids, as owners do: the image's ids, not names this host would
 * give them.
 *
 * Entries are named as tar -C DIR -c . names them: "./" for the root,
 * "./PATH", "./PATH/" for a directory; owners numerically. Names
 * are taken as UTF-8 (the C.UTF-8 locale), pax's own charset; a name that
 * is not valid UTF-8 goes in as raw bytes under hdrcharset=BINARY, which GNU
 * tar extracts with a warning. A
 * further name of an inode becomes a hard link entry. Sockets have no tar
 * form: they are reported and left out.
 *
 * Invariants:
 *  1. DEST is created new (O_EXCL): an existing file is never overwritten.
 *     "-" writes to standard output instead (dump.c refuses a terminal).
 *  2. A file's data is walked twice in the same transaction (its map of
 *     stored regions for the header, then its bytes), so both walks see the
 *     same blocks and the entry's length is what the header promised.
 *  3. A write error of the archive is fatal: the export stops and the
 *     partial archive is removed (a partial stream on standard output is
 *     the reader's to drop: the exit code says it is incomplete).
 *  4. Holes cost no archive space but libarchive is handed their zeros, a
 *     call per HOLE_CHUNK: a file over TAR_FILE_MAX (a sparse 1 PiB, or a
 *     damaged size) is reported and left out rather than fed for hours.
 */
#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <locale.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "cli.h"
#include "dump_export.h"

#define ZEROS_SIZE (1 << 16)
#define HOLE_CHUNK (1ULL << 30)  /* zeros handed to libarchive at a time */
#define TAR_FILE_MAX (1ULL << 50) /* 1 PiB: hole bytes fed at HOLE_CHUNK a call */

struct region {
	uint64_t off, len;
};

struct tarsink {
	struct archive *a;
	struct archive_entry *ent;
	int fd;
	char *name; /* "./PATH" */
	size_t namecap;
	struct region *reg; /* the stored regions of the current file */
	size_t nreg, capreg;
	uint64_t pos;       /* bytes of the current file written */
	const unsigned char *zeros; /* zchunk bytes of zeros */
	size_t zchunk;
	uint64_t size;      /* the current file's size */
};

static const unsigned char zeros[ZEROS_SIZE];

/* The archives export writes, by the end of DEST's name (any case). */
static const struct {
	const char *suffix;
	int filter; /* ARCHIVE_FILTER_* */
} tar_names[] = {
	{".tar", ARCHIVE_FILTER_NONE},
	{".tar.gz", ARCHIVE_FILTER_GZIP},   {".tgz", ARCHIVE_FILTER_GZIP},
	{".tar.bz2", ARCHIVE_FILTER_BZIP2}, {".tbz2", ARCHIVE_FILTER_BZIP2},
	{".tbz", ARCHIVE_FILTER_BZIP2},     {".tar.xz", ARCHIVE_FILTER_XZ},
	{".txz", ARCHIVE_FILTER_XZ},        {".tar.zst", ARCHIVE_FILTER_ZSTD},
	{".tzst", ARCHIVE_FILTER_ZSTD},
};
#define NTAR_NAMES (sizeof(tar_names) / sizeof(tar_names[0]))

/* Ends of names of archives and compressed files export does not write: a
 * directory of that name is surely not what was asked for. */
static const char *const other_archives[] = {
	".zip", ".7z", ".rar", ".cpio", ".iso", ".gz", ".bz2", ".xz", ".zst", ".zstd", ".lz",
	".lz4", ".lzma", ".lzo", ".z", ".tlz", ".taz", ".tz2", ".tb2", ".tzo",
};

const char export_tar_suffixes[] = ".tar, .tar.gz or .tgz, .tar.bz2 or .tbz2, .tar.xz or .txz, "
				   ".tar.zst or .tzst";

static int ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);
	return n > m && strcasecmp(s + n - m, suffix) == 0;
}

/* The index in tar_names of DEST's suffix, or -1. */
static int tar_name(const char *dest)
{
	for (size_t i = 0; i < NTAR_NAMES; i++)
		if (ends_with(dest, tar_names[i].suffix))
			return (int)i;
	return -1;
}

enum export_kind export_kind_of(const char *dest)
{
	struct stat st;

	if (strcmp(dest, "-") == 0)
		return EXPORT_STDOUT;
	if (stat(dest, &st) == 0 && S_ISDIR(st.st_mode))
		return EXPORT_DIR;
	if (tar_name(dest) >= 0)
		return EXPORT_TAR;
	for (size_t i = 0; i < sizeof(other_archives) / sizeof(other_archives[0]); i++)
		if (ends_with(dest, other_archives[i]))
			return EXPORT_UNKNOWN;
	return EXPORT_DIR;
}

static int tar_fail(struct export *x, const struct xent *e)
{
	struct tarsink *s = x->priv;

	export_error(x, e, "cannot write the archive: %s", archive_error_string(s->a));
	x->fatal = 1;
	return -1;
}

static int tar_open(struct export *x)
{
	struct tarsink *s = calloc(1, sizeof(*s));
	int filter = ARCHIVE_FILTER_NONE, i;

	if (!s) {
		export_error(x, NULL, "out of memory");
		return -1;
	}
	if (x->to_stdout) {
		s->fd = STDOUT_FILENO;
	} else {
		i = tar_name(x->dest);
		if (i >= 0)
			filter = tar_names[i].filter;
		/* the archive holds every file's contents, root's 0600 ones
		 * too: 0600 whatever the umask, as a backup */
		s->fd = open(x->dest, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		if (s->fd < 0) {
			export_error(x, NULL, "%s", errno == EEXIST ? "exists" : strerror(errno));
			goto free_sink;
		}
		if (fchmod(s->fd, 0600) != 0) {
			export_error(x, NULL, "%s", strerror(errno));
			goto unlink_dest;
		}
	}
	/* libarchive converts names from the locale's charset to UTF-8: make
	 * that the identity (whatever the caller's locale) */
	setlocale(LC_CTYPE, "C.UTF-8");
	s->a = archive_write_new();
	s->ent = archive_entry_new();
	if (!s->a || !s->ent) {
		export_error(x, NULL, "out of memory");
		goto unlink_dest;
	}
	/* SCHILY.xattr only: GNU tar warns about LIBARCHIVE.xattr records. A
	 * filter libarchive runs as an outside program is a warning, not an
	 * error. */
	if (archive_write_set_format_pax(s->a) != ARCHIVE_OK ||
	    archive_write_set_format_option(s->a, "pax", "xattrheader", "SCHILY") < ARCHIVE_WARN ||
	    archive_write_add_filter(s->a, filter) < ARCHIVE_WARN ||
	    archive_write_open_fd(s->a, s->fd) != ARCHIVE_OK) {
		export_error(x, NULL, "%s", archive_error_string(s->a));
		goto unlink_dest;
	}
	/* zero pages cost nothing until written, and these never are */
	s->zeros = mmap(NULL, HOLE_CHUNK, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
			-1, 0);
	s->zchunk = HOLE_CHUNK;
	if (s->zeros == MAP_FAILED) {
		s->zeros = zeros;
		s->zchunk = ZEROS_SIZE;
	}
	x->priv = s;
	return 0;

unlink_dest:
	if (s->a)
		archive_write_free(s->a);
	if (s->ent)
		archive_entry_free(s->ent);
	if (!x->to_stdout) {
		close(s->fd);
		unlink(x->dest);
	}
free_sink:
	free(s);
	return -1;
}

static int set_name(struct tarsink *s, const char *path, char **out)
{
	char *p = array_reserve(s->name, &s->namecap, strlen(path) + 3, 1, 256);

	if (!p)
		return -ENOMEM;
	s->name = p;
	strcpy(s->name, "./");
	if (strcmp(path, ".") != 0)
		strcat(s->name, path);
	*out = s->name;
	return 0;
}

/* Regions are widened to 512-byte tar blocks (clipped to the size): GNU tar
 * reads each region but the last from a fresh block of the archive. */
static int add_region(void *arg, uint64_t off, const void *data, size_t len)
{
	struct tarsink *s = arg;
	uint64_t end = (off + len + 511) / 512 * 512;
	struct region *r;

	(void)data;
	off = off / 512 * 512;
	if (end > s->size)
		end = s->size;
	if (s->nreg && s->reg[s->nreg - 1].off + s->reg[s->nreg - 1].len >= off) {
		s->reg[s->nreg - 1].len = end - s->reg[s->nreg - 1].off;
		return 0;
	}
	len = (size_t)(end - off);
	r = array_reserve(s->reg, &s->capreg, s->nreg + 1, sizeof(*r), 64);
	if (!r)
		return -ENOMEM;
	s->reg = r;
	s->reg[s->nreg++] = (struct region){off, len};
	return 0;
}

/* Write n zero bytes: inside a hole of a sparse entry libarchive skips them
 * (but is handed them all the same, so they come from a large mapping). */
static int put_zeros(struct tarsink *s, uint64_t n)
{
	while (n) {
		size_t k = n < s->zchunk ? (size_t)n : s->zchunk;
		if (archive_write_data(s->a, s->zeros, k) != (la_ssize_t)k)
			return -EIO;
		n -= k;
		s->pos += k;
	}
	return 0;
}

static int put_data(void *arg, uint64_t off, const void *data, size_t len)
{
	struct tarsink *s = arg;
	int rc = put_zeros(s, off - s->pos);

	if (rc)
		return rc;
	if (archive_write_data(s->a, data, len) != (la_ssize_t)len)
		return -EIO;
	s->pos += len;
	return 0;
}

struct tar_xattrs {
	struct export *x;
	const struct xent *e;
	struct archive_entry *ent;
};

/* libarchive's tag for an ACL entry's (kv_acl_check let only these pass). */
static int archive_tag(unsigned tag)
{
	switch (tag) {
	case KV_ACL_USER_OBJ: return ARCHIVE_ENTRY_ACL_USER_OBJ;
	case KV_ACL_USER: return ARCHIVE_ENTRY_ACL_USER;
	case KV_ACL_GROUP_OBJ: return ARCHIVE_ENTRY_ACL_GROUP_OBJ;
	case KV_ACL_GROUP: return ARCHIVE_ENTRY_ACL_GROUP;
	case KV_ACL_MASK: return ARCHIVE_ENTRY_ACL_MASK;
	default: return ARCHIVE_ENTRY_ACL_OTHER;
	}
}

/* The ACL at val (type KV_ACL_TYPE_*) as libarchive's entries of t->ent. */
static void add_acl(struct tar_xattrs *t, const char *name, int type, const void *val, size_t len)
{
	uint32_t mode = t->e->in->mode;
	struct kv_acl_entry a;
	int rc = kv_acl_check(val, len);

	if (rc || S_ISLNK(mode) || (type == KV_ACL_TYPE_DEFAULT && !S_ISDIR(mode))) {
		export_error(t->x, t->e, "ACL '%s' %s; left out (fsck.kvfs repairs it)", name,
			     rc ? "is damaged" : "where the kernel never sets one");
		return;
	}
	type = type == KV_ACL_TYPE_ACCESS ? ARCHIVE_ENTRY_ACL_TYPE_ACCESS
					  : ARCHIVE_ENTRY_ACL_TYPE_DEFAULT;
	for (size_t i = 0; kv_acl_entry(val, len, i, &a) == 0; i++) {
		int perm = (a.perm & 4 ? ARCHIVE_ENTRY_ACL_READ : 0) |
			   (a.perm & 2 ? ARCHIVE_ENTRY_ACL_WRITE : 0) |
			   (a.perm & 1 ? ARCHIVE_ENTRY_ACL_EXECUTE : 0);

		archive_entry_acl_add_entry(t->ent, type, perm, archive_tag(a.tag),
					    a.id == KV_ACL_UNDEFINED_ID ? -1 : (int)a.id, NULL);
	}
}

static int add_xattr(void *arg, const char *name, const void *val, size_t len)
{
	struct tar_xattrs *t = arg;
	int type = kv_acl_name(name);

	if (type)
		add_acl(t, name, type, val, len);
	else
		archive_entry_xattr_add_entry(t->ent, name, val, len);
	return 0;
}

/* Fill the entry's header fields from the inode. */
static int fill_entry(struct export *x, const struct xent *e, char *name)
{
	struct tarsink *s = x->priv;
	const struct kv_inode *in = e->in;
	struct archive_entry *ent = s->ent;
	char target[KV_SYMLINK_MAX + 1];
	struct tar_xattrs xa = {.x = x, .e = e, .ent = ent};
	int64_t t[3] = {in->atime_ns, in->mtime_ns, in->ctime_ns};
	int64_t sec[3], nsec[3];

	for (int i = 0; i < 3; i++) {
		sec[i] = t[i] / 1000000000;
		nsec[i] = t[i] % 1000000000;
		/* libarchive 3.6 writes a time as "SEC.NSEC", which for a
		 * negative SEC reads back (as pax says) as SEC - 0.NSEC: hand it
		 * the digits of the true value, toward zero. Between -1 and 0
		 * s the sign cannot be written; that time goes in as -1 s. */
		if (nsec[i] < 0 && sec[i] < 0)
			nsec[i] = -nsec[i];
		else if (nsec[i] < 0)
			sec[i] = -1, nsec[i] = 0;
	}
	archive_entry_clear(ent);
	archive_entry_copy_pathname(ent, name);
	archive_entry_set_mode(ent, in->mode);
	archive_entry_set_uid(ent, in->uid);
	archive_entry_set_gid(ent, in->gid);
	archive_entry_set_nlink(ent, in->nlink);
	archive_entry_set_atime(ent, sec[0], nsec[0]);
	archive_entry_set_mtime(ent, sec[1], nsec[1]);
	archive_entry_set_ctime(ent, sec[2], nsec[2]);
	/* no birth time: libarchive writes it as LIBARCHIVE.creationtime,
	 * which GNU tar warns about at every entry and cannot restore */
	archive_entry_set_size(ent, 0);
	if (S_ISREG(in->mode))
		archive_entry_set_size(ent, (la_int64_t)in->size);
	if (S_ISCHR(in->mode) || S_ISBLK(in->mode)) {
		archive_entry_set_rdevmajor(ent, major((dev_t)in->rdev));
		archive_entry_set_rdevminor(ent, minor((dev_t)in->rdev));
	}
	if (S_ISLNK(in->mode)) {
		if (in->inline_len == 0 || memchr(in->inline_data, 0, in->inline_len)) {
			export_error(x, e, "symlink target is empty or holds a NUL byte; skipped");
			return -1;
		}
		memcpy(target, in->inline_data, in->inline_len);
		target[in->inline_len] = '\0';
		archive_entry_copy_symlink(ent, target);
	}
	return export_xattrs(x, e, add_xattr, &xa) ? -1 : 0; /* the ACLs set the mode's rwx */
}

static int tar_file_data(struct export *x, const struct xent *e)
{
	struct tarsink *s = x->priv;
	uint64_t stored = 0;
	int rc;

	if (e->in->size > TAR_FILE_MAX) {
		export_error(x, e, "larger than 1 PiB (%llu bytes): too large for a tar export; "
			     "left out", (unsigned long long)e->in->size);
		return -1;
	}
	s->nreg = 0;
	s->size = e->in->size;
	rc = export_data(x, e, XDATA_REPORT, add_region, s);
	if (rc) {
		export_error(x, e, "cannot read: %s", strerror(-rc));
		x->fatal = 1; /* the header is not written yet, but the walk is broken */
		return -1;
	}
	for (size_t i = 0; i < s->nreg; i++)
		stored += s->reg[i].len;
	if (stored < e->in->size) { /* holes: a sparse entry */
		for (size_t i = 0; i < s->nreg; i++)
			archive_entry_sparse_add_entry(s->ent, (la_int64_t)s->reg[i].off,
						       (la_int64_t)s->reg[i].len);
		/* a file ending in a hole ends its map with (size, 0), as GNU
		 * tar does; a file of holes only has just that */
		if (!s->nreg || s->reg[s->nreg - 1].off + s->reg[s->nreg - 1].len < e->in->size)
			archive_entry_sparse_add_entry(s->ent, (la_int64_t)e->in->size, 0);
	}
	if (archive_write_header(s->a, s->ent) < ARCHIVE_WARN)
		return tar_fail(x, e);
	s->pos = 0;
	rc = export_data(x, e, XDATA_COUNT, put_data, s);
	if (rc == 0)
		rc = put_zeros(s, e->in->size - s->pos);
	if (rc)
		return tar_fail(x, e);
	return 0;
}

static int tar_entry(struct export *x, const struct xent *e)
{
	struct tarsink *s = x->priv;
	char *name, *link;
	int rc;

	if (S_ISSOCK(e->in->mode)) {
		cli_error_at(e->path, "a socket has no tar form; left out");
		return -1;
	}
	if (set_name(s, e->path, &name))
		goto nomem;
	rc = fill_entry(x, e, name);
	if (rc)
		return -1;
	if (e->link_to) {
		archive_entry_set_size(s->ent, 0);
		link = malloc(strlen(e->link_to) + 3);
		if (!link)
			goto nomem;
		strcpy(link, "./");
		strcat(link, e->link_to);
		archive_entry_copy_hardlink(s->ent, link);
		free(link);
	}
	if (S_ISREG(e->in->mode) && !e->link_to)
		rc = tar_file_data(x, e);
	else if (archive_write_header(s->a, s->ent) < ARCHIVE_WARN)
		rc = tar_fail(x, e);
	if (rc == 0 && archive_write_finish_entry(s->a) < ARCHIVE_WARN)
		rc = tar_fail(x, e);
	return rc;
nomem:
	export_error(x, e, "out of memory");
	x->fatal = 1;
	return -1;
}

static void tar_dir_done(struct export *x, const struct xent *e)
{
	(void)x;
	(void)e; /* a tar directory entry carries its times already */
}

static int tar_close(struct export *x)
{
	struct tarsink *s = x->priv;
	int rc = 0;

	if (!s)
		return -1;
	if (!x->fatal && archive_write_close(s->a) != ARCHIVE_OK)
		rc = tar_fail(x, NULL);
	archive_write_free(s->a);
	archive_entry_free(s->ent);
	if (!x->to_stdout) {
		if (close(s->fd) != 0 && rc == 0) {
			export_error(x, NULL, "cannot write: %s", strerror(errno));
			x->fatal = 1;
			rc = -1;
		}
		if (x->fatal)
			unlink(x->dest); /* invariant 3 */
	}
	if (s->zeros != zeros)
		munmap((void *)s->zeros, HOLE_CHUNK);
	free(s->name);
	free(s->reg);
	free(s);
	x->priv = NULL;
	return rc;
}

const struct xsink export_tar_sink = {
	.open = tar_open, .entry = tar_entry, .dir_done = tar_dir_done, .close = tar_close,
};
