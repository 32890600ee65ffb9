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

/* fsfix_setup_cached with the kernel's writeback cache on. */
static int wb_setup(void **state)
{
	if (fsfix_setup_cached(state))
		return -1;
	fs.cfg.writeback = 1;
	return 0;
}

/* ------------------------------------------------------------ lookup -- */

static void lookup_gives_entry_and_reference(void **state)
{
	struct stat st;
	uint64_t ino;

	(void)state;
	ino = fsfix_mk(ROOT, "a", S_IFREG | 0640);
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
	file = fsfix_mk(ROOT, "f", S_IFREG | 0644);
	assert_int_equal(fsfix_lookup(ROOT, "nothing"), -ENOENT);
	assert_int_equal(fsfix_lookup(ROOT, fsfix_long_name(name, KV_NAME_MAX)), -ENOENT);
	assert_int_equal(fsfix_lookup(ROOT, fsfix_long_name(name, KV_NAME_MAX + 1)), -ENAMETOOLONG);
	assert_int_equal(fsfix_lookup(file, "x"), -ENOTDIR);
	assert_int_equal(fsfix_lookup(999999, "x"), -ENOENT);
}

/* The project's rule: no heap allocation on lookup and getattr. */
static void read_paths_allocate_nothing(void **state)
{
	struct stat st;
	uint64_t ino;
	long before;

	(void)state;
	ino = fsfix_mk(ROOT, "a", S_IFREG | 0644);
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
	st = fsfix_attr(ROOT);
	assert_true(S_ISDIR(st.st_mode));
	assert_int_equal(st.st_nlink, 2);
	assert_int_equal(st.st_size, 0);
	fsfix_mk(ROOT, "d", S_IFDIR | 0755);
	fsfix_mk(ROOT, "f", S_IFREG | 0644);
	st = fsfix_attr(ROOT);
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
	ino = fsfix_mk(ROOT, "f", S_IFREG | 0644);
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
	ino = fsfix_mk(ROOT, "f", S_IFREG | 0644);
	in.st_mode = S_IFDIR | 04711; /* the type bits are not the caller's to change */
	in.st_uid = 7;
	in.st_gid = 8;
	assert_int_equal(fs_do_setattr(ino, &in, FUSE_SET_ATTR_MODE | FUSE_SET_ATTR_UID |
						 FUSE_SET_ATTR_GID, 0, &st), 0);
	assert_int_equal(st.st_mode, S_IFREG | 04711);
	assert_int_equal(st.st_uid, 7);
	assert_int_equal(st.st_gid, 8);
	st = fsfix_attr(ino);
	assert_int_equal(st.st_mode, S_IFREG | 04711);
	assert_int_equal(st.st_uid, 7);
	assert_int_equal(fs_do_setattr(999999, &in, FUSE_SET_ATTR_MODE, 0, &st), -ENOENT);
}

static void setattr_size(void **state)
{
	struct stat in = {.st_size = 10000}, st, before;
	uint64_t file, dir, link;

	(void)state;
	file = fsfix_mk(ROOT, "f", S_IFREG | 0644);
	dir = fsfix_mk(ROOT, "d", S_IFDIR | 0755);
	assert_int_equal(fs_do_symlink("target", ROOT, "l", &root, &st), 0);
	link = st.st_ino;
	fs_do_forget(link, 1);
	assert_int_equal(fs_do_setattr(file, &in, FUSE_SET_ATTR_SIZE, 0, &st), 0);
	assert_int_equal(st.st_size, 10000);
	assert_int_equal(fsfix_attr(file).st_size, 10000);
	assert_int_equal(fs_do_setattr(dir, &in, FUSE_SET_ATTR_SIZE, 0, &st), -EISDIR);
	assert_int_equal(fs_do_setattr(link, &in, FUSE_SET_ATTR_SIZE, 0, &st), -EINVAL);
	in.st_size = -1;
	assert_int_equal(fs_do_setattr(file, &in, FUSE_SET_ATTR_SIZE, 0, &st), -EINVAL);
	/* without the writeback cache a truncate to the same size moves the
	 * times, as truncate(2) does */
	before = fsfix_attr(file);
	in.st_size = 10000;
	assert_int_equal(fs_do_setattr(file, &in, FUSE_SET_ATTR_SIZE, 0, &st), 0);
	assert_true(fsfix_ns(st.st_mtim) > fsfix_ns(before.st_mtim));
	assert_true(fsfix_ns(st.st_ctim) > fsfix_ns(before.st_ctim));
}

/* With the writeback cache the kernel owns the times: a truncate that sends
 * none changes only ctime. */
static void setattr_size_writeback_keeps_mtime(void **state)
{
	struct stat in = {.st_size = 5}, st, before;
	uint64_t file;

	(void)state;
	file = fsfix_mk(ROOT, "f", S_IFREG | 0644);
	before = fsfix_attr(file);
	assert_int_equal(fs_do_setattr(file, &in, FUSE_SET_ATTR_SIZE, 0, &st), 0);
	assert_int_equal(st.st_size, 5);
	assert_int_equal(fsfix_ns(st.st_mtim), fsfix_ns(before.st_mtim));
	assert_true(fsfix_ns(st.st_ctim) > fsfix_ns(before.st_ctim));
}

static void setattr_times(void **state)
{
	struct stat in = {0}, st, before;
	struct timespec t0, t1;
	uint64_t file;

	(void)state;
	file = fsfix_mk(ROOT, "f", S_IFREG | 0644);
	in.st_atim = (struct timespec){.tv_sec = 1000, .tv_nsec = 123456789};
	in.st_mtim = (struct timespec){.tv_sec = 2000, .tv_nsec = 1};
	assert_int_equal(fs_do_setattr(file, &in, FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME, 0, &st),
			 0);
	st = fsfix_attr(file);
	assert_int_equal(fsfix_ns(st.st_atim), 1000123456789LL);
	assert_int_equal(fsfix_ns(st.st_mtim), 2000000000001LL);
	/* ctime is now unless given */
	before = st;
	clock_gettime(CLOCK_REALTIME, &t0);
	assert_int_equal(fs_do_setattr(file, &in, FUSE_SET_ATTR_MTIME_NOW, 0, &st), 0);
	clock_gettime(CLOCK_REALTIME, &t1);
	assert_int_equal(fsfix_ns(st.st_atim), fsfix_ns(before.st_atim));
	assert_in_range(fsfix_ns(st.st_mtim), fsfix_ns(t0), fsfix_ns(t1));
	assert_int_equal(fsfix_ns(st.st_ctim), fsfix_ns(st.st_mtim));
	in.st_ctim = (struct timespec){.tv_sec = 3000};
	assert_int_equal(fs_do_setattr(file, &in, FUSE_SET_ATTR_CTIME, 0, &st), 0);
	assert_int_equal(fsfix_ns(fsfix_attr(file).st_ctim), 3000000000000LL);
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
	file = fsfix_mk(ROOT, "f", S_IFREG | 0644);
	in.st_mtim = (struct timespec){.tv_sec = 4000, .tv_nsec = 4};
	in.st_ctim = (struct timespec){.tv_sec = 5000, .tv_nsec = 5};

	/* getattr */
	assert_int_equal(fs_do_setattr(file, &in, to_set, 1, &st), 0);
	assert_int_equal(fsfix_ns(st.st_mtim), 4000000000004LL);
	assert_int_equal(fsfix_ns(fsfix_attr(file).st_mtim), 4000000000004LL);
	assert_int_equal(fsfix_ns(fsfix_attr(file).st_ctim), 5000000000005LL);
	assert_false(fs_pending_has(file));
	assert_int_equal(tu_getattr(fs.env, file, &raw), 0);
	assert_int_equal(raw.mtime_ns, 4000000000004LL);

	/* lookup */
	in.st_mtim.tv_sec = 4100;
	assert_int_equal(fs_do_setattr(file, &in, to_set, 1, &st), 0);
	assert_int_equal(fs_do_lookup(ROOT, "f", &st), 0);
	fs_do_forget(file, 1);
	assert_int_equal(fsfix_ns(st.st_mtim), 4100000000004LL);

	/* a SETATTR of ctime alone keeps the mtime queued before it */
	in.st_mtim.tv_sec = 4200;
	assert_int_equal(fs_do_setattr(file, &in, to_set, 1, &st), 0);
	in.st_ctim.tv_sec = 5200;
	assert_int_equal(fs_do_setattr(file, &in, FUSE_SET_ATTR_CTIME, 1, &st), 0);
	assert_int_equal(fsfix_ns(st.st_mtim), 4200000000004LL);
	assert_int_equal(fsfix_ns(fsfix_attr(file).st_mtim), 4200000000004LL);
	assert_int_equal(fsfix_ns(fsfix_attr(file).st_ctim), 5200000000005LL);
}

static int readdir_mtime_of(void *arg, const struct fs_dirent *d)
{
	if (d->attr && strcmp(d->name, "f") == 0)
		*(int64_t *)arg = fsfix_ns(d->attr->st_mtim);
	return 0;
}

static void setattr_lazy_times_settled_before_readdirplus(void **state)
{
	struct stat in = {0}, st;
	int64_t mtime = 0;
	uint64_t file;

	(void)state;
	file = fsfix_mk(ROOT, "f", S_IFREG | 0644);
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
	file = fsfix_mk(ROOT, "f", S_IFREG | 0644);
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
	ino = fsfix_mk(ROOT, "f", S_IFREG | 0644);
	assert_int_equal(fs_do_statfs(&b), 0);
	assert_int_equal(b.f_files - b.f_ffree, 2);
	assert_int_equal(fs_do_unlink(ROOT, "f"), 0);
	assert_int_equal(fs_do_statfs(&b), 0); /* counts the purge just queued */
	assert_int_equal(b.f_files - b.f_ffree, 1);
	assert_false(fsfix_stored(ino));
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
	dir = fsfix_attr(ROOT);
	assert_int_equal(dir.st_size, 3);
	assert_int_equal(dir.st_nlink, 2);
	assert_int_equal(fsfix_ns(dir.st_mtim), fsfix_ns(fsfix_attr(ino).st_ctim));
	assert_int_equal(fsfix_ns(dir.st_ctim), fsfix_ns(dir.st_mtim));
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
	assert_int_equal(fsfix_attr(ROOT).st_nlink, 3);
	f = fsfix_mk(d, "f", S_IFREG | 0644);
	assert_int_equal(fs_do_mkdir(ROOT, "d", 0755, &root, &st), -EEXIST);
	assert_int_equal(fs_do_mknod(ROOT, "d", S_IFREG | 0644, 0, &root, &st), -EEXIST);
	assert_int_equal(fs_do_mkdir(f, "x", 0755, &root, &st), -ENOTDIR);
	assert_int_equal(fs_do_mkdir(999999, "x", 0755, &root, &st), -ENOENT);
	assert_int_equal(fs_do_mkdir(ROOT, fsfix_long_name(name, KV_NAME_MAX + 1), 0755, &root, &st),
			 -ENAMETOOLONG);
	assert_int_equal(fs_do_mkdir(ROOT, fsfix_long_name(name, KV_NAME_MAX), 0755, &root, &st), 0);
	fs_do_forget(st.st_ino, 1);
	assert_int_equal(fsfix_attr(ROOT).st_nlink, 4);
	assert_int_equal(fsfix_attr(ROOT).st_size, 2);
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
	assert_false(fsfix_stored(d));
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
	assert_int_equal(fsfix_attr(l).st_size, 13);
	assert_int_equal(fs_do_readlink(l, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "../some/where");
	assert_int_equal(fs_do_readlink(l, buf, 13), -ERANGE);
	f = fsfix_mk(ROOT, "f", S_IFREG | 0644);
	assert_int_equal(fs_do_readlink(f, buf, sizeof(buf)), -EINVAL);
	assert_int_equal(fs_do_readlink(999999, buf, sizeof(buf)), -ENOENT);
	assert_int_equal(fs_do_symlink(fsfix_long_name(target, KV_SYMLINK_MAX + 1), ROOT, "m", &root,
				       &st), -ENAMETOOLONG);
	assert_int_equal(fs_do_symlink(fsfix_long_name(target, KV_SYMLINK_MAX), ROOT, "m", &root, &st),
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
	assert_int_equal(fsfix_ns(st.st_atim), fsfix_ns(st.st_mtim));
	assert_int_equal(fsfix_lookup(ROOT, "f"), (int64_t)st.st_ino);
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
	d = fsfix_mk(ROOT, "d", S_IFDIR | 0755);
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
int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(f) cmocka_unit_test_setup_teardown(f, fsfix_setup_cached, fsfix_teardown)
#define T_WB(f) cmocka_unit_test_setup_teardown(f, wb_setup, fsfix_teardown)
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
	};

	if (fs_itable_init())
		return 1;
	return cmocka_run_group_tests_name("fs", tests, NULL, NULL);
}
