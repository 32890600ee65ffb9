/*
 * test_fs.c - the daemon's cores (fs_do_*, fs/fs.h) on a temporary image,
 * without a mount: the global struct fs is set up over the image's env with
 * no FUSE session, and each core is called as its handler would call it.
 * What is asserted is what a user would see through the syscall: errno,
 * sizes, link counts, times, modes, the names a listing gives.
 *
 * Every test leaves the kernel's lookup references balanced (a core that
 * gives an entry takes one; the test forgets it as the kernel would): the
 * teardown fails when one is left. The read paths (lookup, getattr) are
 * checked to allocate nothing: malloc, calloc and realloc are wrapped
 * (-Wl,--wrap) and counted per thread.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysmacros.h>
#include <time.h>

#include <cmocka.h>

#include "fsfix.h"
#include "kv_int.h"
#include "testutil.h"

/* ------------------------------------------------------- allocations -- */

static __thread long allocs; /* by this thread, through the wrapped calls */

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t m);
void *__real_realloc(void *p, size_t n);

void *__wrap_malloc(size_t n)
{
	allocs++;
	return __real_malloc(n);
}

void *__wrap_calloc(size_t n, size_t m)
{
	allocs++;
	return __real_calloc(n, m);
}

void *__wrap_realloc(void *p, size_t n)
{
	allocs++;
	return __real_realloc(p, n);
}

/* ------------------------------------------------------------ set-up -- */

static const struct fs_cred root = {.uid = 0, .gid = 0};
static const struct fs_cred user = {.uid = 1000, .gid = 1000};

#define ROOT KV_ROOT_INO

/* An image, and the daemon's state over it as main.c would make it, with
 * no session. */
static int fs_setup(void **state)
{
	if (fsfix_setup(state))
		return -1;
	fs.cfg.cache_dir = 1;
	fs.cfg.readdirplus = 1;
	return 0;
}

/* The same with the kernel's writeback cache on. */
static int wb_setup(void **state)
{
	if (fs_setup(state))
		return -1;
	fs.cfg.writeback = 1;
	return 0;
}

/* Names in four hash buckets: listings walk collision lists. */
static uint64_t hash_four(const char *name, size_t len)
{
	return kv_name_hash_xxh3(name, len) & 3;
}

static int collide_setup(void **state)
{
	kv_name_hash = hash_four;
	return fs_setup(state);
}

static int fs_teardown(void **state)
{
	uint64_t refs = fs_itable_count();

	tu_teardown(state);
	kv_name_hash = kv_name_hash_xxh3;
	memset(&fs, 0, sizeof(fs));
	if (refs) {
		fprintf(stderr, "teardown: %llu inodes still referenced\n",
			(unsigned long long)refs);
		return -1;
	}
	return 0;
}

/* ----------------------------------------------------------- helpers -- */

/* Make a name as root (a directory for S_IFDIR, else mknod) and forget its
 * reference, as the kernel does once it drops the entry. */
static uint64_t mk(uint64_t dir, const char *name, uint32_t mode)
{
	struct stat st;
	int rc = S_ISDIR(mode) ? fs_do_mkdir(dir, name, mode & 07777, &root, &st)
			       : fs_do_mknod(dir, name, mode, 0, &root, &st);

	assert_int_equal(rc, 0);
	fs_do_forget(st.st_ino, 1);
	return st.st_ino;
}

static struct stat attr(uint64_t ino)
{
	struct stat st;

	assert_int_equal(fs_do_getattr(ino, 0, &st), 0);
	return st;
}

/* The inode a name leads to, or the lookup's error. */
static int64_t lookup(uint64_t dir, const char *name)
{
	struct stat st;
	int rc = fs_do_lookup(dir, name, &st);

	if (rc)
		return rc;
	fs_do_forget(st.st_ino, 1);
	return (int64_t)st.st_ino;
}

/* Whether the store still has inode ino (purged ones are gone). */
static int stored(uint64_t ino)
{
	struct kv_inode in;

	kv_settle(fs.env); /* a purge rides in the next batch */
	return tu_getattr(fs.env, ino, &in) == 0;
}

static int64_t ns(struct timespec ts)
{
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static char *long_name(char *buf, size_t len)
{
	memset(buf, 'n', len);
	buf[len] = '\0';
	return buf;
}

/* ------------------------------------------------------------ lookup -- */

static void lookup_gives_entry_and_reference(void **state)
{
	struct stat st;
	uint64_t ino;

	(void)state;
	ino = mk(ROOT, "a", S_IFREG | 0640);
	assert_int_equal(fs_do_lookup(ROOT, "a", &st), 0);
	assert_int_equal(st.st_ino, ino);
	assert_int_equal(st.st_mode, S_IFREG | 0640);
	assert_int_equal(st.st_nlink, 1);
	assert_int_equal(fs_itable_count(), 1);
	fs_do_forget(ino, 1);
	assert_int_equal(fs_itable_count(), 0);
}

static void lookup_errors(void **state)
{
	char name[KV_NAME_MAX + 2];
	uint64_t file;

	(void)state;
	file = mk(ROOT, "f", S_IFREG | 0644);
	assert_int_equal(lookup(ROOT, "nothing"), -ENOENT);
	assert_int_equal(lookup(ROOT, long_name(name, KV_NAME_MAX)), -ENOENT);
	assert_int_equal(lookup(ROOT, long_name(name, KV_NAME_MAX + 1)), -ENAMETOOLONG);
	assert_int_equal(lookup(file, "x"), -ENOTDIR);
	assert_int_equal(lookup(999999, "x"), -ENOENT);
}

/* The project's rule: no heap allocation on lookup and getattr. */
static void read_paths_allocate_nothing(void **state)
{
	struct stat st;
	uint64_t ino;
	long before;

	(void)state;
	ino = mk(ROOT, "a", S_IFREG | 0644);
	assert_int_equal(fs_do_lookup(ROOT, "a", &st), 0); /* this thread's reader, once */
	assert_int_equal(fs_do_getattr(ino, 1, &st), 0);
	before = allocs;
	assert_int_equal(fs_do_lookup(ROOT, "a", &st), 0);
	assert_int_equal(fs_do_getattr(ino, 0, &st), 0);
	assert_int_equal(fs_do_getattr(ino, 1, &st), 0);
	assert_int_equal(fs_do_lookup(ROOT, "none", &st), -ENOENT);
	before = allocs - before;
	fs_do_forget(ino, 2);
	assert_int_equal(before, 0);
}

/* ----------------------------------------------------------- getattr -- */

static void getattr_counts_entries_and_subdirs(void **state)
{
	struct stat st;

	(void)state;
	st = attr(ROOT);
	assert_true(S_ISDIR(st.st_mode));
	assert_int_equal(st.st_nlink, 2);
	assert_int_equal(st.st_size, 0);
	mk(ROOT, "d", S_IFDIR | 0755);
	mk(ROOT, "f", S_IFREG | 0644);
	st = attr(ROOT);
	assert_int_equal(st.st_nlink, 3);
	assert_int_equal(st.st_size, 2);
	assert_int_equal(st.st_blksize, 4096);
	assert_int_equal(fs_do_getattr(999999, 0, &st), -ENOENT);
}

/* A file whose write back failed for want of room: the next write(2) asks
 * through the open file and is told once; a stat(2) is never refused. */
static void getattr_tells_short_file_once(void **state)
{
	struct stat st;
	uint64_t ino;
	int rc;

	(void)state;
	ino = mk(ROOT, "f", S_IFREG | 0644);
	assert_int_equal(fs_do_lookup(ROOT, "f", &st), 0);
	fs_itable_set_short(ino);
	assert_int_equal(fs_do_getattr(ino, 0, &st), 0);
	assert_int_equal(fs_do_getattr(ino, 1, &st), -ENOSPC);
	assert_int_equal(fs_do_getattr(ino, 1, &st), 0); /* told; the image has room */
	/* a truncate starts the file's data anew: nothing left to tell */
	fs_itable_set_short(ino);
	assert_int_equal(fs_do_setattr(ino, &(struct stat){.st_size = 0}, FUSE_SET_ATTR_SIZE, 1,
				       &st), 0);
	rc = fs_do_getattr(ino, 1, &st);
	fs_itable_settled(ino);
	fs_do_forget(ino, 1);
	assert_int_equal(rc, 0);
}

/* ----------------------------------------------------------- setattr -- */

static void setattr_mode_owner(void **state)
{
	struct stat in = {0}, st;
	uint64_t ino;

	(void)state;
	ino = mk(ROOT, "f", S_IFREG | 0644);
	in.st_mode = S_IFDIR | 04711; /* the type bits are not the caller's to change */
	in.st_uid = 7;
	in.st_gid = 8;
	assert_int_equal(fs_do_setattr(ino, &in, FUSE_SET_ATTR_MODE | FUSE_SET_ATTR_UID |
						 FUSE_SET_ATTR_GID, 0, &st), 0);
	assert_int_equal(st.st_mode, S_IFREG | 04711);
	assert_int_equal(st.st_uid, 7);
	assert_int_equal(st.st_gid, 8);
	st = attr(ino);
	assert_int_equal(st.st_mode, S_IFREG | 04711);
	assert_int_equal(st.st_uid, 7);
	assert_int_equal(fs_do_setattr(999999, &in, FUSE_SET_ATTR_MODE, 0, &st), -ENOENT);
}

static void setattr_size(void **state)
{
	struct stat in = {.st_size = 10000}, st, before;
	uint64_t file, dir, link;

	(void)state;
	file = mk(ROOT, "f", S_IFREG | 0644);
	dir = mk(ROOT, "d", S_IFDIR | 0755);
	assert_int_equal(fs_do_symlink("target", ROOT, "l", &root, &st), 0);
	link = st.st_ino;
	fs_do_forget(link, 1);
	assert_int_equal(fs_do_setattr(file, &in, FUSE_SET_ATTR_SIZE, 0, &st), 0);
	assert_int_equal(st.st_size, 10000);
	assert_int_equal(attr(file).st_size, 10000);
	assert_int_equal(fs_do_setattr(dir, &in, FUSE_SET_ATTR_SIZE, 0, &st), -EISDIR);
	assert_int_equal(fs_do_setattr(link, &in, FUSE_SET_ATTR_SIZE, 0, &st), -EINVAL);
	in.st_size = -1;
	assert_int_equal(fs_do_setattr(file, &in, FUSE_SET_ATTR_SIZE, 0, &st), -EINVAL);
	/* without the writeback cache a truncate to the same size moves the
	 * times, as truncate(2) does */
	before = attr(file);
	in.st_size = 10000;
	assert_int_equal(fs_do_setattr(file, &in, FUSE_SET_ATTR_SIZE, 0, &st), 0);
	assert_true(ns(st.st_mtim) > ns(before.st_mtim));
	assert_true(ns(st.st_ctim) > ns(before.st_ctim));
}

/* With the writeback cache the kernel owns the times: a truncate that sends
 * none changes only ctime. */
static void setattr_size_writeback_keeps_mtime(void **state)
{
	struct stat in = {.st_size = 5}, st, before;
	uint64_t file;

	(void)state;
	file = mk(ROOT, "f", S_IFREG | 0644);
	before = attr(file);
	assert_int_equal(fs_do_setattr(file, &in, FUSE_SET_ATTR_SIZE, 0, &st), 0);
	assert_int_equal(st.st_size, 5);
	assert_int_equal(ns(st.st_mtim), ns(before.st_mtim));
	assert_true(ns(st.st_ctim) > ns(before.st_ctim));
}

static void setattr_times(void **state)
{
	struct stat in = {0}, st, before;
	struct timespec t0, t1;
	uint64_t file;

	(void)state;
	file = mk(ROOT, "f", S_IFREG | 0644);
	in.st_atim = (struct timespec){.tv_sec = 1000, .tv_nsec = 123456789};
	in.st_mtim = (struct timespec){.tv_sec = 2000, .tv_nsec = 1};
	assert_int_equal(fs_do_setattr(file, &in, FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME, 0, &st),
			 0);
	st = attr(file);
	assert_int_equal(ns(st.st_atim), 1000123456789LL);
	assert_int_equal(ns(st.st_mtim), 2000000000001LL);
	/* ctime is now unless given */
	before = st;
	clock_gettime(CLOCK_REALTIME, &t0);
	assert_int_equal(fs_do_setattr(file, &in, FUSE_SET_ATTR_MTIME_NOW, 0, &st), 0);
	clock_gettime(CLOCK_REALTIME, &t1);
	assert_int_equal(ns(st.st_atim), ns(before.st_atim));
	assert_in_range(ns(st.st_mtim), ns(t0), ns(t1));
	assert_int_equal(ns(st.st_ctim), ns(st.st_mtim));
	in.st_ctim = (struct timespec){.tv_sec = 3000};
	assert_int_equal(fs_do_setattr(file, &in, FUSE_SET_ATTR_CTIME, 0, &st), 0);
	assert_int_equal(ns(attr(file).st_ctim), 3000000000000LL);
}

/* The lazy-times rule: with the writeback cache, a SETATTR of mtime and
 * ctime through an open file is answered before its commit; every reply
 * that gives the file's attributes afterwards still gives them. */
static void setattr_lazy_times_are_settled_before_replies(void **state)
{
	struct stat in = {0}, st;
	struct kv_inode raw;
	uint64_t file;
	int to_set = FUSE_SET_ATTR_MTIME | FUSE_SET_ATTR_CTIME;

	(void)state;
	file = mk(ROOT, "f", S_IFREG | 0644);
	in.st_mtim = (struct timespec){.tv_sec = 4000, .tv_nsec = 4};
	in.st_ctim = (struct timespec){.tv_sec = 5000, .tv_nsec = 5};

	/* getattr */
	assert_int_equal(fs_do_setattr(file, &in, to_set, 1, &st), 0);
	assert_int_equal(ns(st.st_mtim), 4000000000004LL);
	assert_int_equal(ns(attr(file).st_mtim), 4000000000004LL);
	assert_int_equal(ns(attr(file).st_ctim), 5000000000005LL);
	assert_false(fs_pending_has(file));
	assert_int_equal(tu_getattr(fs.env, file, &raw), 0);
	assert_int_equal(raw.mtime_ns, 4000000000004LL);

	/* lookup */
	in.st_mtim.tv_sec = 4100;
	assert_int_equal(fs_do_setattr(file, &in, to_set, 1, &st), 0);
	assert_int_equal(fs_do_lookup(ROOT, "f", &st), 0);
	fs_do_forget(file, 1);
	assert_int_equal(ns(st.st_mtim), 4100000000004LL);

	/* a SETATTR of ctime alone keeps the mtime queued before it */
	in.st_mtim.tv_sec = 4200;
	assert_int_equal(fs_do_setattr(file, &in, to_set, 1, &st), 0);
	in.st_ctim.tv_sec = 5200;
	assert_int_equal(fs_do_setattr(file, &in, FUSE_SET_ATTR_CTIME, 1, &st), 0);
	assert_int_equal(ns(st.st_mtim), 4200000000004LL);
	assert_int_equal(ns(attr(file).st_mtim), 4200000000004LL);
	assert_int_equal(ns(attr(file).st_ctim), 5200000000005LL);
}

static int readdir_mtime_of(void *arg, const struct fs_dirent *d)
{
	if (d->attr && strcmp(d->name, "f") == 0)
		*(int64_t *)arg = ns(d->attr->st_mtim);
	return 0;
}

static void setattr_lazy_times_settled_before_readdirplus(void **state)
{
	struct stat in = {0}, st;
	int64_t mtime = 0;
	uint64_t file;

	(void)state;
	file = mk(ROOT, "f", S_IFREG | 0644);
	in.st_mtim = (struct timespec){.tv_sec = 4300};
	assert_int_equal(fs_do_setattr(file, &in, FUSE_SET_ATTR_MTIME | FUSE_SET_ATTR_CTIME, 1,
				       &st), 0);
	assert_int_equal(fs_do_readdir(ROOT, 0, 1, readdir_mtime_of, &mtime), 0);
	fs_do_forget(file, 1);
	assert_int_equal(mtime, 4300000000000LL);
}

/* Without the writeback cache, and for a utimensat(2) (no open file), the
 * times are stored before the reply. */
static void setattr_times_not_lazy_without_writeback(void **state)
{
	struct stat in = {.st_mtim = {.tv_sec = 4400}}, st;
	struct kv_inode raw;
	uint64_t file;

	(void)state;
	file = mk(ROOT, "f", S_IFREG | 0644);
	assert_int_equal(fs_do_setattr(file, &in, FUSE_SET_ATTR_MTIME | FUSE_SET_ATTR_CTIME, 1,
				       &st), 0);
	assert_false(fs_pending_has(file));
	assert_int_equal(tu_getattr(fs.env, file, &raw), 0);
	assert_int_equal(raw.mtime_ns, 4400000000000LL);
}

/* ------------------------------------------------------------ statfs -- */

static void statfs_fields(void **state)
{
	struct statvfs a, b;
	uint64_t ino;

	(void)state;
	assert_int_equal(fs_do_statfs(&a), 0);
	assert_int_equal(a.f_bsize, 4096);
	assert_int_equal(a.f_frsize, 4096);
	assert_int_equal(a.f_namemax, KV_NAME_MAX);
	assert_true(a.f_blocks >= a.f_bfree && a.f_bfree > a.f_bavail && a.f_bavail > 0);
	assert_int_equal(a.f_files - a.f_ffree, 1); /* the root */
	assert_int_equal(a.f_favail, a.f_ffree);
	ino = mk(ROOT, "f", S_IFREG | 0644);
	assert_int_equal(fs_do_statfs(&b), 0);
	assert_int_equal(b.f_files - b.f_ffree, 2);
	assert_int_equal(fs_do_unlink(ROOT, "f"), 0);
	assert_int_equal(fs_do_statfs(&b), 0); /* counts the purge just queued */
	assert_int_equal(b.f_files - b.f_ffree, 1);
	assert_false(stored(ino));
}

/* ----------------------------------------------------------- creates -- */

static void mknod_types(void **state)
{
	struct stat st, dir;
	uint64_t ino;

	(void)state;
	assert_int_equal(fs_do_mknod(ROOT, "fifo", S_IFIFO | 0600, 0, &user, &st), 0);
	fs_do_forget(st.st_ino, 1);
	assert_int_equal(st.st_mode, S_IFIFO | 0600);
	assert_int_equal(st.st_uid, 1000);
	assert_int_equal(st.st_gid, 1000);
	assert_int_equal(fs_do_mknod(ROOT, "chr", S_IFCHR | 0600, makedev(1, 3), &root, &st), 0);
	fs_do_forget(st.st_ino, 1);
	assert_int_equal(st.st_rdev, makedev(1, 3));
	assert_int_equal(fs_do_mknod(ROOT, "plain", 0644, 0, &root, &st), 0); /* no type */
	fs_do_forget(st.st_ino, 1);
	assert_int_equal(st.st_mode, S_IFREG | 0644);
	ino = st.st_ino;
	assert_int_equal(fs_do_mknod(ROOT, "d", S_IFDIR | 0755, 0, &root, &st), -EINVAL);
	assert_int_equal(fs_do_mknod(ROOT, "l", S_IFLNK | 0777, 0, &root, &st), -EINVAL);
	/* the parent counts its entries and takes the child's time */
	dir = attr(ROOT);
	assert_int_equal(dir.st_size, 3);
	assert_int_equal(dir.st_nlink, 2);
	assert_int_equal(ns(dir.st_mtim), ns(attr(ino).st_ctim));
	assert_int_equal(ns(dir.st_ctim), ns(dir.st_mtim));
}

static void mkdir_links_and_errors(void **state)
{
	char name[KV_NAME_MAX + 2];
	struct stat st;
	uint64_t d, f;

	(void)state;
	assert_int_equal(fs_do_mkdir(ROOT, "d", S_IFDIR | 01777, &user, &st), 0);
	fs_do_forget(st.st_ino, 1);
	d = st.st_ino;
	assert_int_equal(st.st_mode, S_IFDIR | 01777);
	assert_int_equal(st.st_nlink, 2);
	assert_int_equal(st.st_size, 0);
	assert_int_equal(attr(ROOT).st_nlink, 3);
	f = mk(d, "f", S_IFREG | 0644);
	assert_int_equal(fs_do_mkdir(ROOT, "d", 0755, &root, &st), -EEXIST);
	assert_int_equal(fs_do_mknod(ROOT, "d", S_IFREG | 0644, 0, &root, &st), -EEXIST);
	assert_int_equal(fs_do_mkdir(f, "x", 0755, &root, &st), -ENOTDIR);
	assert_int_equal(fs_do_mkdir(999999, "x", 0755, &root, &st), -ENOENT);
	assert_int_equal(fs_do_mkdir(ROOT, long_name(name, KV_NAME_MAX + 1), 0755, &root, &st),
			 -ENAMETOOLONG);
	assert_int_equal(fs_do_mkdir(ROOT, long_name(name, KV_NAME_MAX), 0755, &root, &st), 0);
	fs_do_forget(st.st_ino, 1);
	assert_int_equal(attr(ROOT).st_nlink, 4);
	assert_int_equal(attr(ROOT).st_size, 2);
}

/* A directory removed while the kernel still holds it takes no new names. */
static void create_in_removed_directory(void **state)
{
	struct stat st;
	uint64_t d;

	(void)state;
	assert_int_equal(fs_do_mkdir(ROOT, "d", 0755, &root, &st), 0);
	d = st.st_ino;
	assert_int_equal(fs_do_rmdir(ROOT, "d"), 0);
	assert_int_equal(fs_do_create(d, "f", 0644, &root, &st), -ENOENT);
	assert_int_equal(fs_do_getattr(d, 0, &st), 0);
	assert_int_equal(st.st_nlink, 0);
	fs_do_forget(d, 1);
	assert_false(stored(d));
}

static void symlink_and_readlink(void **state)
{
	char target[KV_SYMLINK_MAX + 2], buf[KV_SYMLINK_MAX + 1];
	struct stat st;
	uint64_t l, f;

	(void)state;
	assert_int_equal(fs_do_symlink("../some/where", ROOT, "l", &user, &st), 0);
	fs_do_forget(st.st_ino, 1);
	l = st.st_ino;
	assert_int_equal(st.st_mode, S_IFLNK | 0777);
	assert_int_equal(st.st_size, 13);
	assert_int_equal(attr(l).st_size, 13);
	assert_int_equal(fs_do_readlink(l, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "../some/where");
	assert_int_equal(fs_do_readlink(l, buf, 13), -ERANGE);
	f = mk(ROOT, "f", S_IFREG | 0644);
	assert_int_equal(fs_do_readlink(f, buf, sizeof(buf)), -EINVAL);
	assert_int_equal(fs_do_readlink(999999, buf, sizeof(buf)), -ENOENT);
	assert_int_equal(fs_do_symlink(long_name(target, KV_SYMLINK_MAX + 1), ROOT, "m", &root,
				       &st), -ENAMETOOLONG);
	assert_int_equal(fs_do_symlink(long_name(target, KV_SYMLINK_MAX), ROOT, "m", &root, &st),
			 0);
	fs_do_forget(st.st_ino, 1);
	assert_int_equal(fs_do_readlink(st.st_ino, buf, sizeof(buf)), 0);
	assert_int_equal(strlen(buf), KV_SYMLINK_MAX);
	assert_int_equal(fs_do_symlink("t", ROOT, "l", &root, &st), -EEXIST);
}

static void create_takes_caller_and_mode(void **state)
{
	struct stat st;

	(void)state;
	assert_int_equal(fs_do_create(ROOT, "f", S_IFREG | 0640, &user, &st), 0);
	fs_do_forget(st.st_ino, 1);
	assert_int_equal(st.st_mode, S_IFREG | 0640);
	assert_int_equal(st.st_uid, 1000);
	assert_int_equal(st.st_gid, 1000);
	assert_int_equal(st.st_nlink, 1);
	assert_int_equal(st.st_size, 0);
	assert_int_equal(ns(st.st_atim), ns(st.st_mtim));
	assert_int_equal(lookup(ROOT, "f"), (int64_t)st.st_ino);
	assert_int_equal(fs_do_create(ROOT, "f", 0644, &user, &st), -EEXIST);
}

/* A set-group-ID directory passes its group on, and the bit to
 * subdirectories; a set-group-ID file made by a caller outside its group
 * loses the bit (as the kernel's inode_init_owner does). */
static void setgid_directory_rules(void **state)
{
	const gid_t in50[] = {20, 50};
	const struct fs_cred member = {.uid = 1000, .gid = 1000, .ngroups = 2, .groups = in50};
	struct stat in = {.st_mode = 02775, .st_gid = 50}, st;
	uint64_t d;

	(void)state;
	d = mk(ROOT, "d", S_IFDIR | 0755);
	assert_int_equal(fs_do_setattr(d, &in, FUSE_SET_ATTR_MODE | FUSE_SET_ATTR_GID, 0, &st), 0);
	assert_int_equal(fs_do_create(d, "f", 0644, &user, &st), 0);
	fs_do_forget(st.st_ino, 1);
	assert_int_equal(st.st_gid, 50);
	assert_int_equal(st.st_uid, 1000);
	assert_int_equal(fs_do_mkdir(d, "sub", 0755, &user, &st), 0);
	fs_do_forget(st.st_ino, 1);
	assert_int_equal(st.st_gid, 50);
	assert_int_equal(st.st_mode, S_IFDIR | 02755);
	assert_int_equal(fs_do_create(d, "g1", 02755, &user, &st), 0); /* not in group 50 */
	fs_do_forget(st.st_ino, 1);
	assert_int_equal(st.st_mode, S_IFREG | 0755);
	assert_int_equal(fs_do_create(d, "g2", 02755, &member, &st), 0);
	fs_do_forget(st.st_ino, 1);
	assert_int_equal(st.st_mode, S_IFREG | 02755);
	assert_int_equal(fs_do_create(d, "g3", 02755, &root, &st), 0);
	fs_do_forget(st.st_ino, 1);
	assert_int_equal(st.st_mode, S_IFREG | 02755);
	/* outside such a directory the file keeps the caller's group */
	assert_int_equal(fs_do_create(ROOT, "g4", 02755, &user, &st), 0);
	fs_do_forget(st.st_ino, 1);
	assert_int_equal(st.st_gid, 1000);
	assert_int_equal(st.st_mode, S_IFREG | 02755);
}

/* -------------------------------------------------------------- link -- */

static void link_counts_and_errors(void **state)
{
	struct stat st, before;
	uint64_t f, d;

	(void)state;
	f = mk(ROOT, "f", S_IFREG | 0644);
	d = mk(ROOT, "d", S_IFDIR | 0755);
	before = attr(f);
	assert_int_equal(fs_do_link(f, d, "g", &st), 0);
	fs_do_forget(f, 1);
	assert_int_equal(st.st_ino, f);
	assert_int_equal(st.st_nlink, 2);
	assert_true(ns(st.st_ctim) > ns(before.st_ctim));
	assert_int_equal(ns(st.st_mtim), ns(before.st_mtim));
	assert_int_equal(attr(d).st_size, 1);
	assert_int_equal(ns(attr(d).st_mtim), ns(st.st_ctim));
	assert_int_equal(lookup(d, "g"), (int64_t)f);
	assert_int_equal(fs_do_link(d, ROOT, "dl", &st), -EPERM);
	assert_int_equal(fs_do_link(f, ROOT, "d", &st), -EEXIST);
	assert_int_equal(fs_do_link(f, f, "x", &st), -ENOTDIR);
	assert_int_equal(fs_do_link(999999, ROOT, "x", &st), -ENOENT);
	/* the last name gone while the kernel holds it: no new name */
	assert_int_equal(fs_do_lookup(ROOT, "f", &st), 0);
	assert_int_equal(fs_do_unlink(ROOT, "f"), 0);
	assert_int_equal(fs_do_unlink(d, "g"), 0);
	assert_int_equal(fs_do_link(f, ROOT, "back", &st), -ENOENT);
	fs_do_forget(f, 1);
	assert_false(stored(f));
}

/* ---------------------------------------------------- unlink, rmdir -- */

static void unlink_removes_and_purges(void **state)
{
	struct stat st;
	uint64_t f, d;

	(void)state;
	f = mk(ROOT, "f", S_IFREG | 0644);
	d = mk(ROOT, "d", S_IFDIR | 0755);
	assert_int_equal(fs_do_link(f, ROOT, "g", &st), 0);
	fs_do_forget(f, 1);
	assert_int_equal(fs_do_unlink(ROOT, "f"), 0);
	assert_int_equal(lookup(ROOT, "f"), -ENOENT);
	assert_int_equal(attr(f).st_nlink, 1);
	assert_int_equal(attr(ROOT).st_size, 2);
	assert_int_equal(fs_do_unlink(ROOT, "g"), 0);
	assert_false(stored(f));
	assert_int_equal(fs_do_unlink(ROOT, "g"), -ENOENT);
	assert_int_equal(fs_do_unlink(ROOT, "d"), -EISDIR);
	assert_int_equal(fs_do_unlink(d, "x"), -ENOENT);
	assert_int_equal(fs_do_unlink(f, "x"), -ENOENT); /* f is gone */
	assert_int_equal(attr(ROOT).st_size, 1);
}

/* Unlinked while the kernel holds it: an orphan that reads on, freed by the
 * last forget. */
static void unlink_referenced_leaves_orphan(void **state)
{
	struct stat st;
	uint64_t f, orphan;
	kv_txn *t;

	(void)state;
	mk(ROOT, "f", S_IFREG | 0644);
	assert_int_equal(fs_do_lookup(ROOT, "f", &st), 0);
	f = st.st_ino;
	assert_int_equal(fs_do_lookup(ROOT, "f", &st), 0); /* two references */
	assert_int_equal(fs_do_unlink(ROOT, "f"), 0);
	assert_true(stored(f));
	assert_int_equal(attr(f).st_nlink, 0);
	assert_int_equal(kv_read_begin(fs.env, &t), 0);
	assert_int_equal(kv_orphan_next(t, 0, &orphan), 0);
	kv_read_end(t);
	assert_int_equal(orphan, f);
	fs_do_forget(f, 1);
	assert_true(stored(f));
	fs_do_forget(f, 1);
	assert_false(stored(f));
	assert_int_equal(fs_purge_orphans(), 0);
}

static void rmdir_rules(void **state)
{
	char name[KV_NAME_MAX + 2];
	uint64_t d, e;

	(void)state;
	d = mk(ROOT, "d", S_IFDIR | 0755);
	e = mk(d, "e", S_IFDIR | 0755);
	mk(ROOT, "f", S_IFREG | 0644);
	assert_int_equal(attr(ROOT).st_nlink, 3);
	assert_int_equal(fs_do_rmdir(ROOT, "d"), -ENOTEMPTY);
	assert_int_equal(fs_do_rmdir(ROOT, "f"), -ENOTDIR);
	assert_int_equal(fs_do_rmdir(ROOT, "none"), -ENOENT);
	assert_int_equal(fs_do_rmdir(ROOT, long_name(name, KV_NAME_MAX + 1)), -ENAMETOOLONG);
	assert_int_equal(fs_do_rmdir(d, "e"), 0);
	assert_false(stored(e));
	assert_int_equal(attr(d).st_nlink, 2);
	assert_int_equal(attr(d).st_size, 0);
	assert_int_equal(fs_do_rmdir(ROOT, "d"), 0);
	assert_false(stored(d));
	assert_int_equal(attr(ROOT).st_nlink, 2);
	assert_int_equal(attr(ROOT).st_size, 1);
}

/* ------------------------------------------------------------ rename -- */

/* The ".." a listing of dir gives. */
static int dotdot_of(void *arg, const struct fs_dirent *d)
{
	if (strcmp(d->name, "..") == 0)
		*(uint64_t *)arg = d->ino;
	return 0;
}

static uint64_t dotdot(uint64_t dir)
{
	uint64_t ino = 0;

	assert_int_equal(fs_do_readdir(dir, 0, 0, dotdot_of, &ino), 0);
	return ino;
}

static void rename_moves_names(void **state)
{
	struct stat before, st;
	uint64_t a, b, f, s;

	(void)state;
	a = mk(ROOT, "a", S_IFDIR | 0755);
	b = mk(ROOT, "b", S_IFDIR | 0755);
	f = mk(a, "f", S_IFREG | 0644);
	s = mk(a, "s", S_IFDIR | 0755);
	before = attr(f);
	assert_int_equal(fs_do_rename(a, "f", a, "g", 0), 0);
	assert_int_equal(lookup(a, "f"), -ENOENT);
	assert_int_equal(lookup(a, "g"), (int64_t)f);
	assert_int_equal(attr(a).st_size, 2);
	assert_true(ns(attr(f).st_ctim) > ns(before.st_ctim));
	assert_int_equal(fs_do_rename(a, "g", b, "f", 0), 0);
	assert_int_equal(attr(a).st_size, 1);
	assert_int_equal(attr(b).st_size, 1);
	assert_int_equal(ns(attr(a).st_mtim), ns(attr(f).st_ctim));
	assert_int_equal(ns(attr(b).st_mtim), ns(attr(f).st_ctim));
	/* a directory changes parents: the link counts and its ".." follow */
	assert_int_equal(attr(a).st_nlink, 3);
	assert_int_equal(dotdot(s), a);
	assert_int_equal(fs_do_rename(a, "s", b, "s", 0), 0);
	assert_int_equal(attr(a).st_nlink, 2);
	assert_int_equal(attr(b).st_nlink, 3);
	assert_int_equal(dotdot(s), b);
	assert_int_equal(fs_do_rename(a, "none", b, "x", 0), -ENOENT);
	assert_int_equal(fs_do_rename(999999, "x", b, "x", 0), -ENOENT);
	assert_int_equal(fs_do_rename(f, "x", b, "x", 0), -ENOTDIR);
	st = attr(b);
	assert_int_equal(st.st_size, 2);
}

static void rename_over_targets(void **state)
{
	struct stat st;
	uint64_t f, g, d, e, full;

	(void)state;
	f = mk(ROOT, "f", S_IFREG | 0644);
	g = mk(ROOT, "g", S_IFREG | 0644);
	d = mk(ROOT, "d", S_IFDIR | 0755);
	e = mk(ROOT, "e", S_IFDIR | 0755);
	full = mk(ROOT, "full", S_IFDIR | 0755);
	mk(full, "x", S_IFREG | 0644);
	assert_int_equal(fs_do_rename(ROOT, "f", ROOT, "d", 0), -EISDIR);
	assert_int_equal(fs_do_rename(ROOT, "d", ROOT, "f", 0), -ENOTDIR);
	assert_int_equal(fs_do_rename(ROOT, "d", ROOT, "full", 0), -ENOTEMPTY);
	/* over a file: the target's inode goes with its last name */
	assert_int_equal(fs_do_rename(ROOT, "f", ROOT, "g", 0), 0);
	assert_int_equal(lookup(ROOT, "g"), (int64_t)f);
	assert_false(stored(g));
	/* over an empty directory */
	assert_int_equal(attr(ROOT).st_nlink, 5);
	assert_int_equal(fs_do_rename(ROOT, "d", ROOT, "e", 0), 0);
	assert_false(stored(e));
	assert_int_equal(lookup(ROOT, "e"), (int64_t)d);
	st = attr(ROOT);
	assert_int_equal(st.st_nlink, 4);
	assert_int_equal(st.st_size, 3); /* g, e, full */
	/* the same inode under both names: nothing to do */
	assert_int_equal(fs_do_link(f, ROOT, "h", &st), 0);
	fs_do_forget(f, 1);
	assert_int_equal(fs_do_rename(ROOT, "g", ROOT, "h", 0), 0);
	assert_int_equal(lookup(ROOT, "g"), (int64_t)f);
	assert_int_equal(attr(f).st_nlink, 2);
}

static void rename_into_itself(void **state)
{
	uint64_t a, b;

	(void)state;
	a = mk(ROOT, "a", S_IFDIR | 0755);
	b = mk(a, "b", S_IFDIR | 0755);
	mk(b, "c", S_IFDIR | 0755);
	assert_int_equal(fs_do_rename(ROOT, "a", b, "a", 0), -EINVAL);
	assert_int_equal(fs_do_rename(ROOT, "a", a, "x", 0), -EINVAL);
	assert_int_equal(fs_do_rename(a, "b", b, "x", 0), -EINVAL);
	assert_int_equal(fs_do_rename(ROOT, "a", b, "c", RENAME_EXCHANGE), -EINVAL);
	assert_int_equal(fs_do_rename(b, "c", ROOT, "a", RENAME_EXCHANGE), -EINVAL);
	assert_int_equal(lookup(ROOT, "a"), (int64_t)a);
	assert_int_equal(dotdot(b), a);
}

static void rename_flags(void **state)
{
	char name[KV_NAME_MAX + 2];
	uint64_t f, g, d, e;

	(void)state;
	f = mk(ROOT, "f", S_IFREG | 0644);
	g = mk(ROOT, "g", S_IFREG | 0644);
	d = mk(ROOT, "d", S_IFDIR | 0755);
	e = mk(d, "e", S_IFDIR | 0755);
	assert_int_equal(fs_do_rename(ROOT, "f", ROOT, "g", RENAME_NOREPLACE), -EEXIST);
	assert_int_equal(fs_do_rename(ROOT, "f", ROOT, "h", RENAME_NOREPLACE), 0);
	assert_int_equal(fs_do_rename(ROOT, "h", ROOT, "x", RENAME_EXCHANGE), -ENOENT);
	assert_int_equal(fs_do_rename(ROOT, "h", ROOT, "g", RENAME_NOREPLACE | RENAME_EXCHANGE),
			 -EINVAL);
	assert_int_equal(fs_do_rename(ROOT, "h", ROOT, "g", 1u << 7), -EINVAL);
	assert_int_equal(fs_do_rename(ROOT, long_name(name, KV_NAME_MAX + 1), ROOT, "g", 0),
			 -ENAMETOOLONG);
	assert_int_equal(fs_do_rename(ROOT, "h", ROOT, long_name(name, KV_NAME_MAX + 1), 0),
			 -ENAMETOOLONG);
	/* exchange a file and a directory across parents: both stay, swapped */
	assert_int_equal(fs_do_rename(ROOT, "h", d, "e", RENAME_EXCHANGE), 0);
	assert_int_equal(lookup(ROOT, "h"), (int64_t)e);
	assert_int_equal(lookup(d, "e"), (int64_t)f);
	assert_int_equal(dotdot(e), ROOT);
	assert_int_equal(attr(ROOT).st_nlink, 4); /* d and e */
	assert_int_equal(attr(d).st_nlink, 2);
	assert_int_equal(attr(ROOT).st_size, 3);
	assert_int_equal(attr(d).st_size, 1);
	assert_int_equal(ns(attr(e).st_ctim), ns(attr(f).st_ctim));
	assert_true(stored(g));
}

/* ----------------------------------------------------------- readdir -- */

#define LIST_MAX 512

/* Entries of a listing, with a room limit per call. */
struct listing {
	int room; /* entries the next call takes; < 0: no limit */
	int n;
	char name[LIST_MAX][KV_NAME_MAX + 1];
	uint64_t ino[LIST_MAX];
	uint32_t type[LIST_MAX];
	struct stat attr[LIST_MAX];
	int has_attr[LIST_MAX];
	uint64_t nexts[LIST_MAX];
	uint64_t next; /* the last taken entry's */
};

static int take(void *arg, const struct fs_dirent *d)
{
	struct listing *l = arg;

	if (l->room == 0 || l->n == LIST_MAX)
		return 1;
	if (l->room > 0)
		l->room--;
	strcpy(l->name[l->n], d->name);
	l->ino[l->n] = d->ino;
	l->type[l->n] = d->type;
	l->has_attr[l->n] = d->attr != NULL;
	if (d->attr)
		l->attr[l->n] = *d->attr;
	l->nexts[l->n] = d->next;
	l->n++;
	l->next = d->next;
	return 0;
}

static int find(const struct listing *l, const char *name)
{
	for (int i = 0; i < l->n; i++)
		if (strcmp(l->name[i], name) == 0)
			return i;
	return -1;
}

static void readdir_lists_names_and_types(void **state)
{
	struct listing *l = calloc(1, sizeof(*l));
	uint64_t d, f;
	int i;

	(void)state;
	d = mk(ROOT, "d", S_IFDIR | 0755);
	f = mk(d, "f", S_IFREG | 0644);
	mk(d, "sub", S_IFDIR | 0755);
	mk(d, "p", S_IFIFO | 0644);
	l->room = -1;
	assert_int_equal(fs_do_readdir(d, 0, 0, take, l), 0);
	assert_int_equal(l->n, 5);
	assert_string_equal(l->name[0], ".");
	assert_int_equal(l->ino[0], d);
	assert_string_equal(l->name[1], "..");
	assert_int_equal(l->ino[1], ROOT);
	i = find(l, "f");
	assert_true(i >= 2);
	assert_int_equal(l->ino[i], f);
	assert_int_equal(l->type[i], S_IFREG);
	assert_false(l->has_attr[i]);
	assert_int_equal(l->type[find(l, "sub")], S_IFDIR);
	assert_int_equal(l->type[find(l, "p")], S_IFIFO);
	/* resumed after each entry, one entry a call: the same listing */
	for (int k = 0; k < l->n; k++) {
		struct listing *one = calloc(1, sizeof(*one));

		one->room = 1;
		assert_int_equal(fs_do_readdir(d, k ? l->nexts[k - 1] : 0, 0, take, one), 0);
		assert_int_equal(one->n, 1);
		assert_string_equal(one->name[0], l->name[k]);
		free(one);
	}
	/* from past the end: nothing more */
	l->n = 0;
	assert_int_equal(fs_do_readdir(d, l->next, 0, take, l), 0);
	assert_int_equal(l->n, 0);
	assert_int_equal(fs_do_readdir(f, 0, 0, take, l), -ENOTDIR);
	assert_int_equal(fs_do_readdir(999999, 0, 0, take, l), -ENOENT);
	free(l);
}

static void readdirplus_gives_attributes_and_references(void **state)
{
	struct listing *l = calloc(1, sizeof(*l));
	struct stat st;
	uint64_t d;

	(void)state;
	d = mk(ROOT, "d", S_IFDIR | 0755);
	mk(d, "f", S_IFREG | 0600);
	mk(d, "e", S_IFDIR | 0700);
	l->room = -1;
	assert_int_equal(fs_do_readdir(d, 0, 1, take, l), 0);
	assert_int_equal(l->n, 4);
	assert_false(l->has_attr[0]); /* "." and ".." take no reference */
	assert_false(l->has_attr[1]);
	assert_int_equal(fs_itable_count(), 2);
	for (int i = 2; i < 4; i++) {
		assert_true(l->has_attr[i]);
		st = attr(l->ino[i]);
		assert_int_equal(l->attr[i].st_ino, l->ino[i]);
		assert_int_equal(l->attr[i].st_mode, st.st_mode);
		assert_int_equal(l->attr[i].st_nlink, st.st_nlink);
		assert_int_equal(ns(l->attr[i].st_mtim), ns(st.st_mtim));
		fs_do_forget(l->ino[i], 1);
	}
	/* a reply with room for one entry: one reference */
	memset(l, 0, sizeof(*l));
	l->room = 1;
	assert_int_equal(fs_do_readdir(d, 2, 1, take, l), 0);
	assert_int_equal(l->n, 1);
	assert_int_equal(fs_itable_count(), 1);
	fs_do_forget(l->ino[0], 1);
	free(l);
}

/* Listed a few entries per call while names come and go: every name present
 * throughout is listed exactly once, and a listing resumes from any cookie
 * it gave. */
static void readdir_cookies_survive_changes(void **state)
{
	struct listing *l = calloc(1, sizeof(*l));
	char name[32];
	uint64_t d, off = 0;
	int added = 0, rounds = 0;

	(void)state;
	d = mk(ROOT, "d", S_IFDIR | 0755);
	for (int i = 0; i < 60; i++) {
		snprintf(name, sizeof(name), "old%d", i);
		mk(d, name, S_IFREG | 0644);
	}
	for (;;) {
		int before = l->n;

		l->room = 7;
		assert_int_equal(fs_do_readdir(d, off, 0, take, l), 0);
		if (l->n == before)
			break;
		off = l->next;
		/* names added, and old ones removed, between two calls */
		for (int k = 0; k < 5; k++) {
			snprintf(name, sizeof(name), "new%d", added++);
			mk(d, name, S_IFREG | 0644);
		}
		snprintf(name, sizeof(name), "old%d", 59 - rounds);
		if (find(l, name) < 0)
			assert_int_equal(fs_do_unlink(d, name), 0);
		rounds++;
	}
	for (int i = 0; i < 60; i++) {
		snprintf(name, sizeof(name), "old%d", i);
		if (lookup(d, name) > 0)
			assert_true(find(l, name) >= 0);
	}
	for (int i = 0; i < l->n; i++)
		for (int j = i + 1; j < l->n; j++)
			assert_string_not_equal(l->name[i], l->name[j]);
	assert_true(rounds >= 9); /* 62 entries, 7 a call, and more coming */
	free(l);
}

static void readdir_no_room(void **state)
{
	struct listing *l = calloc(1, sizeof(*l));

	(void)state;
	mk(ROOT, "f", S_IFREG | 0644);
	l->room = 0;
	assert_int_equal(fs_do_readdir(ROOT, 0, 1, take, l), 0);
	assert_int_equal(l->n, 0);
	assert_int_equal(fs_itable_count(), 0);
	free(l);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(f) cmocka_unit_test_setup_teardown(f, fs_setup, fs_teardown)
#define T_WB(f) cmocka_unit_test_setup_teardown(f, wb_setup, fs_teardown)
		T(lookup_gives_entry_and_reference),
		T(lookup_errors),
		T(read_paths_allocate_nothing),
		T(getattr_counts_entries_and_subdirs),
		T(getattr_tells_short_file_once),
		T(setattr_mode_owner),
		T(setattr_size),
		T_WB(setattr_size_writeback_keeps_mtime),
		T(setattr_times),
		T_WB(setattr_lazy_times_are_settled_before_replies),
		T_WB(setattr_lazy_times_settled_before_readdirplus),
		T(setattr_times_not_lazy_without_writeback),
		T(statfs_fields),
		T(mknod_types),
		T(mkdir_links_and_errors),
		T(create_in_removed_directory),
		T(symlink_and_readlink),
		T(create_takes_caller_and_mode),
		T(setgid_directory_rules),
		T(link_counts_and_errors),
		T(unlink_removes_and_purges),
		T(unlink_referenced_leaves_orphan),
		T(rmdir_rules),
		T(rename_moves_names),
		T(rename_over_targets),
		T(rename_into_itself),
		T(rename_flags),
		T(readdir_lists_names_and_types),
		cmocka_unit_test_setup_teardown(readdir_lists_names_and_types, collide_setup,
						fs_teardown),
		T(readdirplus_gives_attributes_and_references),
		T(readdir_cookies_survive_changes),
		cmocka_unit_test_setup_teardown(readdir_cookies_survive_changes, collide_setup,
						fs_teardown),
		T(readdir_no_room),
	};

	if (fs_itable_init())
		return 1;
	return cmocka_run_group_tests_name("fs", tests, NULL, NULL);
}
