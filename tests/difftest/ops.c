/*
 * ops.c - the operations of the differential tester: the names they use,
 * their execution on one side, and a readable line for each (gen.c makes
 * them from a seed; compare.c compares what the two sides gave).
 *
 * The namespace is small on purpose (difftest.h invariant 1): 18 paths of up
 * to three levels over the names a, b, c, d0, d1, plus ".", a 255-byte name
 * and a 256-byte one, so creates, renames and removals collide all the time
 * and every errno of the namespace calls comes up. Any name may be made a
 * file, a directory, a symlink or a FIFO. POSIX ACLs and the umask of
 * creates are acl_ops.c's; other system.* names are generated here: both
 * refuse them.
 *
 * Not generated, and why:
 *  - SEEK_DATA/SEEK_HOLE, unless --seek: under the writeback cache the
 *    kernel answers them from its own size (all data), and tmpfs answers at
 *    page granularity where kvfs answers at its block size; test_difftest.sh
 *    runs seeds with --seek on an image of 4096-byte blocks without the
 *    writeback cache, where the answers must agree.
 *  - device nodes (opening one reaches a real driver), O_DIRECT, O_TMPFILE.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "difftest.h"

#define READ_MAX (4 << 20)

static char long255[256], long256[257];
static const char *paths[NPATHS] = { /* difftest.h: P_L255, P_L256 */
	"a", "b", "c", "d0", "d1",
	"d0/a", "d0/b", "d0/d0", "d0/d1", "d1/a", "d1/b", "d1/d0", "d1/d1",
	"d0/d0/a", "d0/d0/b", "d0/d1/a", "d1/d0/a", "d1/d1/b",
	".", long255, long256,
};

/* Symlink targets: relative ones never climb out of the run directory (a
 * create through a dangling link makes a name inside it), one longer than a
 * name, the longest target Linux allows and one byte more. */
static char target300[301], target4095[4096], target4096[4097];
static const char *targets[] = {
	"a", "b", "d0", "d0/a", "d1/d0/a", "d0/../c", "x", "nothere/x", "",
	target300, target4095, target4096,
};
_Static_assert(sizeof(targets) / sizeof(targets[0]) == NTARGETS, "NTARGETS: difftest.h");

/* The first three are the common ones; then the long names, and names the
 * kernel passes to FUSE that ext4 and tmpfs refuse: in no namespace they
 * implement (EOPNOTSUPP), a namespace prefix alone (EINVAL). */
static char xname200[210], xname256[270];
static const char *xnames[] = {"user.a",   "user.b",   "user.c",    xname200, "trusted.t",
			       xname256,   "foo.bar",  "x",         "user.",  "trusted.",
			       "security.", "system.a"};
_Static_assert(sizeof(xnames) / sizeof(xnames[0]) == NXNAMES, "NXNAMES: difftest.h");

static const char *const kind_names[OP_NKINDS] = {
	"open", "close", "write", "pwrite", "read", "pread", "lseek", "ftruncate",
	"truncate", "fallocate", "fsync", "fstat", "stat", "mkdir", "rmdir", "unlink",
	"rename", "link", "symlink", "readlink", "mkfifo", "setxattr", "fsetxattr",
	"removexattr", "getxattr", "listxattr", "chmod", "fchmod", "chown", "utimensat",
	"futimens", "readdir", "readfile", "mmap", "copy_file_range", "setacl", "removeacl",
};

void ops_init(void)
{
	memset(long255, 'n', 255);
	memset(long256, 'n', 256);
	for (int i = 0; i < 300; i += 2)
		memcpy(target300 + i, i < 298 ? "t/" : "tt", 2);
	memset(target4095, 'm', 4095);
	memset(target4096, 'm', 4096);
	snprintf(xname200, sizeof(xname200), "user.%0195d", 7);
	snprintf(xname256, sizeof(xname256), "user.%0251d", 7);
}

/* ----------------------------------------------------------------- run -- */

/* The bytes of a write: random, or (a seed divisible by 3) a few random
 * bytes repeated with changes, which compress (kvfs -o compress stores
 * such blocks compressed). */
static void fill(unsigned char *buf, size_t len, uint32_t seed)
{
	uint64_t s = seed, x = 0;

	if (seed % 3 == 0) {
		for (size_t i = 0; i < len; i++) {
			if (i % 64 == 0)
				x = rnd(&s);
			buf[i] = (unsigned char)("kvfs compresses" [i % 15] ^ (i % 64 < 4 ? x : 0));
		}
		return;
	}
	for (size_t i = 0; i < len; i++) {
		if (i % 8 == 0)
			x = rnd(&s);
		buf[i] = (unsigned char)(x >> (i % 8 * 8));
	}
}

static unsigned char *reserve(struct res *r, size_t n)
{
	if (r->cap < n) {
		unsigned char *p = realloc(r->buf, n);
		if (!p) {
			fprintf(stderr, "difftest: out of memory\n");
			exit(2);
		}
		r->buf = p;
		r->cap = n;
	}
	return r->buf;
}

void append(struct res *r, const void *p, size_t n)
{
	reserve(r, r->len + n + 1);
	memcpy(r->buf + r->len, p, n);
	r->len += n;
	r->buf[r->len] = '\0';
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sort the NUL- or newline-separated items of r->buf; one per line. */
static void sort_items(struct res *r, char sep)
{
	char **v, *copy, *p;
	size_t n = 0, len = r->len;

	if (!len)
		return;
	copy = malloc(len + 1);
	v = malloc((len + 1) * sizeof(*v));
	if (!copy || !v)
		exit(2);
	memcpy(copy, r->buf, len);
	copy[len] = '\0';
	for (p = copy; p < copy + len; p += strlen(p) + 1) {
		char *e = memchr(p, sep, (size_t)(copy + len - p));
		if (e)
			*e = '\0';
		v[n++] = p;
	}
	qsort(v, n, sizeof(*v), cmp_str);
	r->len = 0;
	for (size_t i = 0; i < n; i++) {
		append(r, v[i], strlen(v[i]));
		append(r, "\n", 1);
	}
	free(v);
	free(copy);
}

/* On the tmpfs side, after op: note where a time may differ, or no longer. */
static void track_times(const struct op *op, struct side *s, const struct res *r)
{
	int fd = s->fds[op->fd];
	struct stat st;

	if (strcmp(s->name, "tmpfs") || r->ret < 0)
		return;
	/* with the writeback cache the kernel reads the page a partial write
	 * lands in, through the writer's fd: kvfs cannot tell that READ from a
	 * user's when the fd is open for reading too (a copy's: copy_ops.c) */
	if ((op->kind == OP_WRITE || op->kind == OP_PWRITE || op->kind == OP_MMAP) &&
	    r->ret > 0 && (fcntl(fd, F_GETFL) & O_ACCMODE) == O_RDWR && fstat(fd, &st) == 0)
		loose_set(st.st_ino, LOOSE_ATIME, 1);
	if (op->kind == OP_FUTIMENS && fstat(fd, &st) == 0)
		loose_set(st.st_ino, (op->at[0][1] != UTIME_OMIT ? LOOSE_ATIME : 0) |
					     (op->at[1][1] != UTIME_OMIT ? LOOSE_MTIME : 0), 0);
	if (op->kind == OP_UTIMENS && fstatat(s->dfd, paths[op->p1], &st, (int)op->flags) == 0)
		loose_set(st.st_ino, (op->at[0][1] != UTIME_OMIT ? LOOSE_ATIME : 0) |
					     (op->at[1][1] != UTIME_OMIT ? LOOSE_MTIME : 0), 0);
}

void set_ret(struct res *r, long long ret)
{
	r->err = ret < 0 ? errno : 0;
	r->ret = ret < 0 ? -1 : ret;
}

/* Whether [from, to) of fd reads as zeros, looking at no more than 1 MiB
 * at each end of it. */
static int zeros(int fd, uint64_t from, uint64_t to)
{
	static unsigned char buf[1 << 20];
	uint64_t ends[2][2] = {{from, to - from > sizeof(buf) ? from + sizeof(buf) : to},
			       {to - from > sizeof(buf) ? to - sizeof(buf) : from, to}};

	if (to <= from)
		return 1;
	for (int e = 0; e < 2; e++) {
		ssize_t n = pread(fd, buf, ends[e][1] - ends[e][0], (off_t)ends[e][0]);
		for (ssize_t i = 0; i < n; i++)
			if (buf[i])
				return 0;
	}
	return 1;
}

/* ZERO_RANGE, which tmpfs lacks, by ext4's rule on the reference side: the
 * bytes of the range read as zeros (a punched hole), and without KEEP_SIZE a
 * range past the end grows the file to its end. */
static void run_zero_range_rule(int fd, const struct op *op, struct res *r)
{
	struct stat st;
	off_t end = (off_t)(op->off + op->len);

	if (fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)op->off,
		      (off_t)op->len) != 0) {
		set_ret(r, -1);
		return;
	}
	if (!(op->flags & FALLOC_FL_KEEP_SIZE) && fstat(fd, &st) == 0 && end > st.st_size &&
	    ftruncate(fd, end) != 0) {
		set_ret(r, -1);
		return;
	}
	set_ret(r, 0);
}

/* SEEK_DATA and SEEK_HOLE: the answer, and whether what it calls a hole
 * reads as zeros (compare.c lets kvfs find holes tmpfs does not, never call
 * bytes a hole). The file offset is put back: the two sides may answer
 * differently, and the ops after must start from the same place. */
static void run_seek_hole(int fd, const struct op *op, struct res *r)
{
	off_t pos = lseek(fd, 0, SEEK_CUR), got;
	struct stat st;
	uint64_t size;

	errno = 0;
	got = lseek(fd, (off_t)op->off, (int)op->flags);
	set_ret(r, got);
	if (fstat(fd, &st) != 0)
		return;
	size = (uint64_t)st.st_size;
	if (got >= 0 && op->flags == SEEK_HOLE && (uint64_t)got < size) {
		/* a hole from got to the next data, by the same side's word */
		off_t next = lseek(fd, got, SEEK_DATA);
		r->seek_bad = !zeros(fd, (uint64_t)got, next >= 0 ? (uint64_t)next : size);
	} else if (got >= 0 && op->flags == SEEK_DATA) /* a hole before got */
		r->seek_bad = !zeros(fd, op->off, (uint64_t)got);
	else if (r->err == ENXIO && op->flags == SEEK_DATA) /* a hole to the end */
		r->seek_bad = !zeros(fd, op->off, size);
	if (pos >= 0)
		lseek(fd, pos, SEEK_SET);
}

static void run_stat(struct res *r, int rc, const struct stat *st)
{
	set_ret(r, rc);
	if (rc == 0) {
		r->has_attrs = 1;
		attrs_of(st, &r->a);
	}
}

static void run_readdir(const struct op *op, struct side *s, struct res *r)
{
	struct dirent *de;
	char line[300];
	int fd = openat(s->dfd, paths[op->p1], O_RDONLY | O_DIRECTORY);
	DIR *d;

	if (fd < 0) {
		set_ret(r, -1);
		return;
	}
	d = fdopendir(fd);
	if (!d) {
		set_ret(r, -1);
		close(fd);
		return;
	}
	errno = 0;
	while ((de = readdir(d)) != NULL) {
		int n = snprintf(line, sizeof(line), "%s %d", de->d_name, de->d_type);
		append(r, line, (size_t)n + 1);
	}
	set_ret(r, errno ? -1 : 0);
	closedir(d);
	sort_items(r, '\0');
}

static void run_readfile(const struct op *op, struct side *s, struct res *r)
{
	int fd = openat(s->dfd, paths[op->p1], O_RDONLY | O_NONBLOCK);
	ssize_t n = 0;

	if (fd < 0) {
		set_ret(r, -1);
		return;
	}
	reserve(r, READ_MAX);
	while (r->len < READ_MAX && (n = read(fd, r->buf + r->len, READ_MAX - r->len)) > 0)
		r->len += (size_t)n;
	set_ret(r, n < 0 ? -1 : (long long)r->len);
	close(fd);
}

static void run_xattr(const struct op *op, struct side *s, struct res *r)
{
	char path[8192];
	int nofollow = op->flags & AT_SYMLINK_NOFOLLOW;
	size_t size = op->len == 0 ? 0 : op->len == 1 ? 65536 : 4;
	ssize_t n;

	snprintf(path, sizeof(path), "%s/%s", s->dir, paths[op->p1]);
	reserve(r, 65536 + 1);
	switch (op->kind) {
	case OP_REMOVEXATTR:
		set_ret(r, nofollow ? lremovexattr(path, xnames[op->name])
				    : removexattr(path, xnames[op->name]));
		break;
	case OP_GETXATTR:
		n = nofollow ? lgetxattr(path, xnames[op->name], r->buf, size)
			     : getxattr(path, xnames[op->name], r->buf, size);
		set_ret(r, n);
		r->len = n > 0 && size ? (size_t)n : 0;
		break;
	case OP_LISTXATTR:
		n = nofollow ? llistxattr(path, (char *)r->buf, size)
			     : listxattr(path, (char *)r->buf, size);
		set_ret(r, n);
		r->len = n > 0 && size ? (size_t)n : 0;
		sort_items(r, '\0'); /* the order of names is unspecified */
		break;
	default: {
		unsigned char *v = reserve(r, op->len + 1);
		int rc;
		fill(v, op->len, op->dseed);
		if (op->kind == OP_FSETXATTR)
			rc = fsetxattr(s->fds[op->fd], xnames[op->name], v, op->len, (int)op->flags);
		else
			rc = setxattr(path, xnames[op->name], v, op->len, (int)op->flags);
		set_ret(r, rc);
		break;
	}
	}
}

static void run_open(const struct op *op, struct side *s, struct res *r)
{
	int fd = openat(s->dfd, paths[op->p1], (int)op->flags, op->mode);

	set_ret(r, fd < 0 ? -1 : 0); /* fd numbers may differ */
	if (fd < 0)
		return; /* the slot keeps what it held */
	if (s->fds[op->fd] >= 0)
		close(s->fds[op->fd]);
	s->fds[op->fd] = fd;
}

static void run_times(const struct op *op, struct side *s, struct res *r)
{
	struct timespec ts[2];

	for (int i = 0; i < 2; i++) {
		ts[i].tv_sec = op->at[i][0];
		ts[i].tv_nsec = op->at[i][1];
	}
	if (op->kind == OP_FUTIMENS)
		set_ret(r, futimens(s->fds[op->fd], ts));
	else
		set_ret(r, utimensat(s->dfd, paths[op->p1], ts, (int)op->flags));
}

/* Read or write [off, off + len) of a file through a shared mapping, up to
 * its size (a page past EOF would be SIGBUS). A write is synced before the
 * unmap: without the writeback cache its WRITE reaches kvfs only when the
 * page is written back, and a utimensat made in between would lose to the
 * mtime that WRITE sets, where tmpfs set it at the fault. */
static void run_mmap(const struct op *op, struct side *s, struct res *r)
{
	int fd = s->fds[op->fd], wr = op->flags & 1;
	uint64_t end, pg = op->off & ~(uint64_t)4095;
	struct stat st;
	unsigned char *p;

	if (fstat(fd, &st) != 0) {
		set_ret(r, -1);
		return;
	}
	end = op->off + op->len < (uint64_t)st.st_size ? op->off + op->len : (uint64_t)st.st_size;
	if (!S_ISREG(st.st_mode)) /* the error mmap gives; a directory's size differs */
		end = op->off + 1;
	if (end <= op->off)
		return; /* nothing to map: ret 0 */
	p = mmap(NULL, end - pg, wr ? PROT_READ | PROT_WRITE : PROT_READ, MAP_SHARED, fd,
		 (off_t)pg);
	if (p == MAP_FAILED) {
		set_ret(r, -1);
		return;
	}
	if (wr) {
		fill(p + (op->off - pg), end - op->off, op->dseed);
		set_ret(r, msync(p, end - pg, MS_SYNC) ? -1 : (long long)(end - op->off));
	} else {
		append(r, p + (op->off - pg), end - op->off);
		r->ret = (long long)(end - op->off);
	}
	munmap(p, end - pg);
}

void op_run(const struct op *op, struct side *s, struct res *r)
{
	const char *p1 = paths[op->p1], *p2 = paths[op->p2];
	int fd = s->fds[op->fd];
	struct stat st;
	ssize_t n;

	r->ret = 0;
	r->err = 0;
	r->seek_bad = 0;
	r->has_attrs = 0;
	r->len = 0;
	reserve(r, 1); /* never NULL, even with nothing in it */
	if (op->umask)
		umask(op->umask);
	errno = 0;
	switch (op->kind) {
	case OP_OPEN:
		run_open(op, s, r);
		break;
	case OP_CLOSE:
		set_ret(r, close(fd));
		s->fds[op->fd] = -1;
		break;
	case OP_WRITE: case OP_PWRITE:
		fill(reserve(r, op->len + 1), op->len, op->dseed);
		n = op->kind == OP_WRITE ? write(fd, r->buf, op->len)
					 : pwrite(fd, r->buf, op->len, (off_t)op->off);
		set_ret(r, n);
		break;
	case OP_READ: case OP_PREAD:
		reserve(r, op->len + 1);
		n = op->kind == OP_READ ? read(fd, r->buf, op->len)
					: pread(fd, r->buf, op->len, (off_t)op->off);
		set_ret(r, n);
		r->len = n > 0 ? (size_t)n : 0;
		break;
	case OP_LSEEK:
		/* a directory's offsets are the filesystem's own cookies (tmpfs
		 * refuses SEEK_END, FUSE takes it): not compared */
		if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode))
			break;
		if (op->flags == SEEK_DATA || op->flags == SEEK_HOLE)
			run_seek_hole(fd, op, r);
		else
			set_ret(r, lseek(fd, (off_t)op->off, (int)op->flags));
		break;
	case OP_FTRUNCATE:
		set_ret(r, ftruncate(fd, (off_t)op->off));
		break;
	case OP_TRUNCATE: {
		char path[8192];
		/* truncate(2) to the size a file has: POSIX marks the times for
		 * update; tmpfs does only when the file holds pages, kvfs always
		 * without the writeback cache and never with it (the kernel's
		 * times count then): the mtime is not compared until set again */
		int same = !strcmp(s->name, "tmpfs") && fstatat(s->dfd, p1, &st, 0) == 0 &&
			   st.st_size == (off_t)op->off;
		snprintf(path, sizeof(path), "%s/%s", s->dir, p1);
		set_ret(r, truncate(path, (off_t)op->off));
		if (same && r->ret == 0)
			loose_set(st.st_ino, LOOSE_MTIME, 1);
		break;
	}
	case OP_FALLOCATE:
		if ((op->flags & FALLOC_FL_ZERO_RANGE) && strcmp(s->name, "tmpfs") == 0)
			run_zero_range_rule(fd, op, r);
		else
			set_ret(r, fallocate(fd, (int)op->flags, (off_t)op->off, (off_t)op->len));
		break;
	case OP_FSYNC:
		set_ret(r, fsync(fd));
		break;
	case OP_FSTAT:
		run_stat(r, fstat(fd, &st), &st);
		break;
	case OP_STAT:
		run_stat(r, fstatat(s->dfd, p1, &st, (int)op->flags), &st);
		break;
	case OP_MKDIR:
		set_ret(r, mkdirat(s->dfd, p1, op->mode));
		break;
	case OP_RMDIR:
		set_ret(r, unlinkat(s->dfd, p1, AT_REMOVEDIR));
		break;
	case OP_UNLINK:
		set_ret(r, unlinkat(s->dfd, p1, 0));
		break;
	case OP_RENAME:
		set_ret(r, renameat2(s->dfd, p1, s->dfd, p2, op->flags));
		break;
	case OP_LINK:
		set_ret(r, linkat(s->dfd, p1, s->dfd, p2, (int)op->flags));
		break;
	case OP_SYMLINK:
		set_ret(r, symlinkat(targets[op->name], s->dfd, p1));
		break;
	case OP_READLINK:
		reserve(r, 8192);
		n = readlinkat(s->dfd, p1, (char *)r->buf, 8192);
		set_ret(r, n);
		r->len = n > 0 ? (size_t)n : 0;
		break;
	case OP_MKFIFO:
		set_ret(r, mkfifoat(s->dfd, p1, op->mode));
		break;
	case OP_SETXATTR: case OP_FSETXATTR: case OP_REMOVEXATTR: case OP_GETXATTR:
	case OP_LISTXATTR:
		run_xattr(op, s, r);
		break;
	case OP_CHMOD:
		set_ret(r, fchmodat(s->dfd, p1, op->mode, 0));
		break;
	case OP_FCHMOD:
		set_ret(r, fchmod(fd, op->mode));
		break;
	case OP_CHOWN:
		set_ret(r, fchownat(s->dfd, p1, (uid_t)op->uid, (gid_t)op->gid, (int)op->flags));
		break;
	case OP_UTIMENS: case OP_FUTIMENS:
		run_times(op, s, r);
		break;
	case OP_READDIR:
		run_readdir(op, s, r);
		break;
	case OP_READFILE:
		run_readfile(op, s, r);
		break;
	case OP_MMAP:
		run_mmap(op, s, r);
		break;
	case OP_COPY:
		copy_run(op, s, r);
		break;
	case OP_SETACL: case OP_REMOVEACL:
		acl_run(op, s, p1, r);
		break;
	}
	if (op->umask)
		umask(0); /* acl_ops.c invariant 3 */
	if (r->ret >= 0 && (op_creates(op) || op->kind == OP_CHMOD))
		acl_state(s, op->kind == OP_SYMLINK ? ACL_BY_LPATH : ACL_BY_PATH, p1, -1,
			  op->kind == OP_CHMOD ? ACL_ACCESS_BIT : 0, r);
	else if (r->ret >= 0 && op->kind == OP_FCHMOD)
		acl_state(s, ACL_BY_FD, NULL, fd, ACL_ACCESS_BIT, r);
	track_times(op, s, r);
	/* a write's buffer is input, not output */
	if (op->kind == OP_WRITE || op->kind == OP_PWRITE || op->kind == OP_SETXATTR ||
	    op->kind == OP_FSETXATTR)
		r->len = 0;
}

void res_free(struct res *r)
{
	free(r->buf);
	r->buf = NULL;
	r->len = r->cap = 0;
}

/* -------------------------------------------------------------- format -- */

const char *op_path(int i)
{
	return paths[i];
}

const char *op_path_name(int i)
{
	return i == P_L255 ? "<255 x n>" : i == P_L256 ? "<256 x n>" : paths[i];
}

static const char *target_name(int i)
{
	static char buf[64];

	if (targets[i] == target300)
		return "t/t/.../tt (300 bytes)";
	if (targets[i] == target4095 || targets[i] == target4096) {
		snprintf(buf, sizeof(buf), "<%zu x m>", strlen(targets[i]));
		return buf;
	}
	return targets[i];
}

static const char *xattr_name(int i)
{
	return xnames[i] == xname200 ? "user.000..07 (200 bytes)"
	       : xnames[i] == xname256 ? "user.000..07 (256 bytes)" : xnames[i];
}

static void flag_names(uint32_t f, char *buf, size_t len)
{
	static const struct { uint32_t bit; const char *name; } names[] = {
		{O_CREAT, "O_CREAT"}, {O_EXCL, "O_EXCL"}, {O_TRUNC, "O_TRUNC"},
		{O_APPEND, "O_APPEND"}, {O_NOFOLLOW, "O_NOFOLLOW"}, {O_DIRECTORY, "O_DIRECTORY"},
	};
	size_t o = (size_t)snprintf(buf, len, "%s", (f & O_ACCMODE) == O_RDONLY ? "O_RDONLY"
					       : (f & O_ACCMODE) == O_WRONLY ? "O_WRONLY" : "O_RDWR");

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]) && o < len; i++)
		if (f & names[i].bit)
			o += (size_t)snprintf(buf + o, len - o, "|%s", names[i].name);
}

static void time_name(const int64_t t[2], char *buf, size_t len)
{
	if (t[1] == UTIME_NOW)
		snprintf(buf, len, "NOW");
	else if (t[1] == UTIME_OMIT)
		snprintf(buf, len, "OMIT");
	else
		snprintf(buf, len, "%lld.%09lld", (long long)t[0], (long long)t[1]);
}

void op_format(const struct op *op, char *buf, size_t len)
{
	const char *k = kind_names[op->kind], *p1 = op_path_name(op->p1);
	const char *p2 = op_path_name(op->p2);
	const char *nof = op->flags & AT_SYMLINK_NOFOLLOW ? " nofollow" : "";
	static const char *const whence[] = {"SEEK_SET", "SEEK_CUR", "SEEK_END", "SEEK_DATA",
					     "SEEK_HOLE"};
	static const char *const xflags[] = {"", " XATTR_CREATE", " XATTR_REPLACE"};
	static const char *const bufs[] = {"size query", "65536-byte buffer", "4-byte buffer"};
	char f[128], t0[40], t1[40];

	switch (op->kind) {
	case OP_OPEN:
		flag_names(op->flags, f, sizeof(f));
		snprintf(buf, len, "open fd%d \"%s\" %s 0%o", op->fd, p1, f, op->mode);
		break;
	case OP_CLOSE: case OP_FSYNC: case OP_FSTAT:
		snprintf(buf, len, "%s fd%d", k, op->fd);
		break;
	case OP_WRITE:
		snprintf(buf, len, "write fd%d len=%llu (bytes #%u)", op->fd,
			 (unsigned long long)op->len, op->dseed);
		break;
	case OP_PWRITE:
		snprintf(buf, len, "pwrite fd%d off=%llu len=%llu (bytes #%u)", op->fd,
			 (unsigned long long)op->off, (unsigned long long)op->len, op->dseed);
		break;
	case OP_READ:
		snprintf(buf, len, "read fd%d len=%llu", op->fd, (unsigned long long)op->len);
		break;
	case OP_PREAD:
		snprintf(buf, len, "pread fd%d off=%llu len=%llu", op->fd,
			 (unsigned long long)op->off, (unsigned long long)op->len);
		break;
	case OP_LSEEK:
		snprintf(buf, len, "lseek fd%d %lld %s", op->fd, (long long)op->off,
			 whence[op->flags]);
		break;
	case OP_FTRUNCATE:
		snprintf(buf, len, "ftruncate fd%d %llu", op->fd, (unsigned long long)op->off);
		break;
	case OP_TRUNCATE:
		snprintf(buf, len, "truncate \"%s\" %llu", p1, (unsigned long long)op->off);
		break;
	case OP_FALLOCATE:
		snprintf(buf, len, "fallocate fd%d %s off=%llu len=%llu", op->fd,
			 op->flags & FALLOC_FL_PUNCH_HOLE ? "PUNCH_HOLE|KEEP_SIZE"
			 : op->flags == FALLOC_FL_ZERO_RANGE ? "ZERO_RANGE"
			 : op->flags & FALLOC_FL_ZERO_RANGE ? "ZERO_RANGE|KEEP_SIZE"
			 : op->flags ? "KEEP_SIZE" : "0",
			 (unsigned long long)op->off, (unsigned long long)op->len);
		break;
	case OP_STAT:
		snprintf(buf, len, "stat \"%s\"%s", p1, nof);
		break;
	case OP_MKDIR: case OP_MKFIFO:
		snprintf(buf, len, "%s \"%s\" 0%o", k, p1, op->mode);
		break;
	case OP_RMDIR: case OP_UNLINK: case OP_READLINK: case OP_READDIR: case OP_READFILE:
		snprintf(buf, len, "%s \"%s\"", k, p1);
		break;
	case OP_RENAME:
		snprintf(buf, len, "rename \"%s\" -> \"%s\"%s", p1, p2,
			 op->flags == RENAME_NOREPLACE ? " RENAME_NOREPLACE"
			 : op->flags == RENAME_EXCHANGE ? " RENAME_EXCHANGE" : "");
		break;
	case OP_LINK:
		snprintf(buf, len, "link \"%s\" -> \"%s\"%s", p1, p2,
			 op->flags ? " AT_SYMLINK_FOLLOW" : "");
		break;
	case OP_SYMLINK:
		snprintf(buf, len, "symlink \"%s\" (to \"%s\")", p1, target_name(op->name));
		break;
	case OP_SETXATTR:
		snprintf(buf, len, "setxattr \"%s\" %s len=%llu%s (bytes #%u)", p1,
			 xattr_name(op->name), (unsigned long long)op->len, xflags[op->flags],
			 op->dseed);
		break;
	case OP_FSETXATTR:
		snprintf(buf, len, "fsetxattr fd%d %s len=%llu%s (bytes #%u)", op->fd,
			 xattr_name(op->name), (unsigned long long)op->len, xflags[op->flags],
			 op->dseed);
		break;
	case OP_REMOVEXATTR:
		snprintf(buf, len, "removexattr \"%s\" %s%s", p1, xattr_name(op->name), nof);
		break;
	case OP_GETXATTR:
		snprintf(buf, len, "getxattr \"%s\" %s, %s%s", p1, xattr_name(op->name),
			 bufs[op->len], nof);
		break;
	case OP_LISTXATTR:
		snprintf(buf, len, "listxattr \"%s\", %s%s", p1, bufs[op->len], nof);
		break;
	case OP_CHMOD:
		snprintf(buf, len, "chmod \"%s\" 0%o", p1, op->mode);
		break;
	case OP_FCHMOD:
		snprintf(buf, len, "fchmod fd%d 0%o", op->fd, op->mode);
		break;
	case OP_CHOWN:
		snprintf(buf, len, "chown \"%s\" %d:%d%s", p1, op->uid, op->gid, nof);
		break;
	case OP_MMAP:
		snprintf(buf, len, "mmap fd%d off=%llu len=%llu %s", op->fd,
			 (unsigned long long)op->off, (unsigned long long)op->len,
			 op->flags ? "write (bytes #N), msync" : "read");
		if (op->flags)
			snprintf(strstr(buf, "#N"), 20, "#%u), msync", op->dseed);
		break;
	case OP_COPY:
		copy_format(op, buf, len);
		break;
	case OP_SETACL: case OP_REMOVEACL:
		acl_format(op, p1, buf, len);
		break;
	case OP_UTIMENS: case OP_FUTIMENS:
		time_name(op->at[0], t0, sizeof(t0));
		time_name(op->at[1], t1, sizeof(t1));
		if (op->kind == OP_UTIMENS)
			snprintf(buf, len, "utimensat \"%s\" atime=%s mtime=%s%s", p1, t0, t1, nof);
		else
			snprintf(buf, len, "futimens fd%d atime=%s mtime=%s", op->fd, t0, t1);
		break;
	}
	if (op->umask && strlen(buf) + 12 < len)
		snprintf(buf + strlen(buf), len - strlen(buf), " umask 0%o", op->umask);
}
