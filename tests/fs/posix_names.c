/*
 * posix_names.c - the posix_ops tests of names: mkdir, rmdir, unlink, link,
 * symlink and readlink, mknod of each special type, name length limits,
 * rename in all its forms (replacing, renameat2 flags, moves between parents
 * with their link counts), directory listings (large, changing while being
 * read, telldir/seekdir) and files and directories removed while open.
 *
 * Each test asserts what ext4 gives; see posix_ops.c for the helpers.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "posix_ops.h"

static nlink_t nlink_of(const char *path)
{
	struct stat st;

	OK(lstat(path, &st));
	return st.st_nlink;
}

static void make_file(const char *path)
{
	OK(close((int)OK(open(path, O_CREAT | O_EXCL | O_WRONLY, 0644))));
}

/* Compare a file's whole contents with a string. */
static void check_content(const char *path, const char *want)
{
	int fd = (int)OK(open(path, O_RDONLY));
	struct stat st;

	OK(fstat(fd, &st));
	assert_int_equal(st.st_size, strlen(want));
	CHECK_BYTES(fd, 0, want, strlen(want));
	OK(close(fd));
}

static void put_str(const char *path, const char *s)
{
	px_put(path, s, strlen(s));
}

/* -------------------------------------------------------- making names -- */

void test_mkdir_rmdir(void **state)
{
	struct stat st;

	(void)state;
	px_enter("mkdir_rmdir");
	OK(mkdir("d", 0750));
	OK(stat("d", &st));
	assert_int_equal(st.st_mode, S_IFDIR | 0750);
	assert_int_equal(st.st_nlink, 2);
	assert_int_equal(st.st_uid, geteuid());
	ERR(EEXIST, mkdir("d", 0755));
	make_file("f");
	ERR(EEXIST, mkdir("f", 0755));
	ERR(ENOENT, mkdir("missing/x", 0755));
	OK(mkdir("d/sub", 0755));
	ERR(ENOTEMPTY, rmdir("d"));
	ERR(ENOTDIR, rmdir("f"));
	ERR(ENOENT, rmdir("missing"));
	ERR(EINVAL, rmdir("."));
	ERR(ENOTEMPTY, rmdir("d/sub/.."));
	OK(rmdir("d/sub"));
	OK(rmdir("d"));
	ERR(ENOENT, stat("d", &st));
	OK(mkdir("d", 0755)); /* the name is free again */
	OK(rmdir("d"));
}

void test_unlink(void **state)
{
	struct stat st;

	(void)state;
	px_enter("unlink");
	OK(mkdir("d", 0755));
	ERR(EISDIR, unlink("d"));
	ERR(ENOENT, unlink("missing"));
	ERR(ENOENT, unlink("missing/f"));
	make_file("f");
	ERR(ENOTDIR, unlink("f/x"));
	OK(unlink("f"));
	ERR(ENOENT, stat("f", &st));
	ERR(ENOENT, unlink("f"));
	put_str("f", "new"); /* the name is free again */
	check_content("f", "new");
	OK(symlink("d", "link")); /* unlink takes the link, not its target */
	OK(unlink("link"));
	OK(stat("d", &st));
	assert_true(S_ISDIR(st.st_mode));
}

void test_nlink(void **state)
{
	struct stat a, b;

	(void)state;
	px_enter("nlink");
	OK(mkdir("d", 0755));
	assert_int_equal(nlink_of("d"), 2);
	OK(mkdir("d/a", 0755));
	OK(mkdir("d/b", 0755));
	OK(mkdir("d/c", 0755));
	assert_int_equal(nlink_of("d"), 5);
	make_file("d/f");
	OK(symlink("a", "d/s"));
	assert_int_equal(nlink_of("d"), 5); /* only subdirectories count */
	OK(rmdir("d/b"));
	assert_int_equal(nlink_of("d"), 4);
	assert_int_equal(nlink_of("d/a"), 2);

	make_file("f");
	assert_int_equal(nlink_of("f"), 1);
	OK(link("f", "g"));
	OK(link("f", "d/h"));
	OK(lstat("f", &a));
	OK(lstat("d/h", &b));
	assert_int_equal(a.st_nlink, 3);
	assert_int_equal(b.st_nlink, 3);
	assert_int_equal(a.st_ino, b.st_ino);
	OK(unlink("g"));
	assert_int_equal(nlink_of("f"), 2);
	OK(unlink("f"));
	assert_int_equal(nlink_of("d/h"), 1);
}

void test_link(void **state)
{
	struct stat st;

	(void)state;
	px_enter("link");
	put_str("f", "shared");
	OK(mkdir("d", 0755));
	OK(link("f", "g"));
	check_content("g", "shared");
	put_str("g", "changed"); /* one inode: both names see the change */
	check_content("f", "changed");
	ERR(EEXIST, link("f", "g"));
	ERR(EEXIST, link("f", "d"));
	ERR(EPERM, link("d", "dlink"));
	ERR(ENOENT, link("missing", "x"));
	ERR(ENOENT, link("f", "missing/x"));
	ERR(ENOTDIR, link("f", "g/x"));
	OK(symlink("f", "s")); /* link(2) links the symlink itself */
	OK(link("s", "s2"));
	OK(lstat("s2", &st));
	assert_true(S_ISLNK(st.st_mode));
	assert_int_equal(st.st_nlink, 2);
	assert_int_equal(nlink_of("f"), 2);
}

void test_symlink(void **state)
{
	static char target[4097], got[4097];
	struct stat st;
	int fd;

	(void)state;
	px_enter("symlink");
	OK(symlink("no/such/target", "dangling"));
	OK(lstat("dangling", &st));
	assert_true(S_ISLNK(st.st_mode));
	assert_int_equal(st.st_size, 14);
	assert_int_equal(OK(readlink("dangling", got, sizeof(got))), 14);
	assert_memory_equal(got, "no/such/target", 14);
	assert_int_equal(OK(readlink("dangling", got, 5)), 5); /* truncated, no NUL */
	assert_memory_equal(got, "no/su", 5);
	ERR(ENOENT, stat("dangling", &st));
	OK(symlink("made", "tocreate")); /* O_CREAT through a dangling link */
	OK(close((int)OK(open("tocreate", O_CREAT | O_WRONLY, 0644))));
	OK(lstat("made", &st));
	assert_true(S_ISREG(st.st_mode));

	put_str("f", "hello");
	OK(symlink("f", "sf"));
	OK(stat("sf", &st));
	assert_true(S_ISREG(st.st_mode));
	assert_int_equal(st.st_size, 5);
	OK(lstat("sf", &st));
	assert_true(S_ISLNK(st.st_mode));
	assert_int_equal(st.st_size, 1);
	check_content("sf", "hello");
	ERR(ELOOP, open("sf", O_RDONLY | O_NOFOLLOW));
	ERR(EEXIST, symlink("x", "f"));
	ERR(EINVAL, readlink("f", got, sizeof(got)));
	OK(mkdir("d", 0755));
	OK(symlink("../f", "d/up"));
	check_content("d/up", "hello");

	memset(target, 'a', 4095);
	for (int i = 100; i < 4095; i += 100)
		target[i] = '/';
	OK(symlink(target, "long"));
	OK(lstat("long", &st));
	assert_int_equal(st.st_size, 4095);
	assert_int_equal(OK(readlink("long", got, sizeof(got))), 4095);
	assert_memory_equal(got, target, 4095);
	target[4095] = 'b';
	ERR(ENAMETOOLONG, symlink(target, "toolong"));
	fd = (int)OK(open(".", O_RDONLY | O_DIRECTORY));
	assert_int_equal(OK(readlinkat(fd, "long", got, sizeof(got))), 4095);
	OK(close(fd));
}

static void check_node(const char *path, mode_t type, dev_t rdev)
{
	struct stat st;

	OK(lstat(path, &st));
	assert_int_equal(st.st_mode & S_IFMT, type);
	assert_int_equal(st.st_mode & 07777, 0640);
	if (type == S_IFCHR || type == S_IFBLK) {
		assert_int_equal(st.st_rdev, rdev);
		assert_int_equal(major(st.st_rdev), major(rdev));
		assert_int_equal(minor(st.st_rdev), minor(rdev));
	}
	assert_int_equal(st.st_size, 0);
	assert_int_equal(st.st_nlink, 1);
}

void test_mknod(void **state)
{
	const dev_t chr = makedev(200, 300000), blk = makedev(8, 17);

	(void)state;
	px_enter("mknod");
	OK(mknod("fifo", S_IFIFO | 0640, 0));
	OK(mknod("sock", S_IFSOCK | 0640, 0));
	OK(mknod("chr", S_IFCHR | 0640, chr));
	OK(mknod("blk", S_IFBLK | 0640, blk));
	OK(mknod("reg", S_IFREG | 0640, 0));
	OK(mkfifo("fifo2", 0640));
	check_node("fifo", S_IFIFO, 0);
	check_node("sock", S_IFSOCK, 0);
	check_node("chr", S_IFCHR, chr);
	check_node("blk", S_IFBLK, blk);
	check_node("reg", S_IFREG, 0);
	check_node("fifo2", S_IFIFO, 0);
	ERR(EEXIST, mknod("fifo", S_IFIFO | 0640, 0));
	ERR(EEXIST, mkfifo("chr", 0640));
	ERR(ENOENT, mknod("missing/x", S_IFIFO | 0640, 0));
	OK(unlink("chr"));
	OK(unlink("fifo"));
	check_node("blk", S_IFBLK, blk);
}

void test_name_limits(void **state)
{
	char n255[256], n256[257], path[600];
	struct stat st;

	(void)state;
	px_enter("name_limits");
	memset(n255, 'n', 255);
	n255[255] = '\0';
	memset(n256, 'm', 256);
	n256[256] = '\0';
	make_file(n255);
	OK(stat(n255, &st));
	n255[0] = 'd';
	OK(mkdir(n255, 0755));
	snprintf(path, sizeof(path), "%s/%s", n255, n255);
	make_file(path);
	OK(stat(path, &st));
	n255[0] = 'r';
	OK(rename(path, n255));
	OK(stat(n255, &st));

	ERR(ENAMETOOLONG, open(n256, O_CREAT | O_WRONLY, 0644));
	ERR(ENAMETOOLONG, open(n256, O_RDONLY));
	ERR(ENAMETOOLONG, mkdir(n256, 0755));
	ERR(ENAMETOOLONG, stat(n256, &st));
	ERR(ENAMETOOLONG, symlink("x", n256));
	ERR(ENAMETOOLONG, mknod(n256, S_IFIFO | 0644, 0));
	ERR(ENAMETOOLONG, link(n255, n256));
	ERR(ENAMETOOLONG, rename(n255, n256));
	ERR(ENAMETOOLONG, unlink(n256));

	make_file("f"); /* a path component that is a file */
	ERR(ENOTDIR, open("f/x", O_RDONLY));
	ERR(ENOTDIR, open("f/x", O_CREAT | O_WRONLY, 0644));
	ERR(ENOTDIR, mkdir("f/x", 0755));
	ERR(ENOTDIR, stat("f/x", &st));
	ERR(ENOTDIR, stat("f/", &st));
	ERR(ENOTDIR, rename("f/x", "y"));
}

/* -------------------------------------------------------------- rename -- */

void test_rename_replace(void **state)
{
	ino_t a, d1;
	nlink_t n;

	(void)state;
	px_enter("rename_replace");
	put_str("a", "AAA");
	put_str("b", "BB");
	a = px_ino("a");
	OK(rename("a", "b")); /* file over file */
	ERR(ENOENT, access("a", F_OK));
	assert_int_equal(px_ino("b"), a);
	check_content("b", "AAA");
	OK(rename("b", "c")); /* to a new name */
	check_content("c", "AAA");
	OK(rename("c", "c")); /* onto itself */
	check_content("c", "AAA");

	OK(mkdir("d1", 0755));
	OK(mkdir("d2", 0755));
	make_file("d1/inside");
	n = nlink_of(".");
	d1 = px_ino("d1");
	OK(rename("d1", "d2")); /* directory over an empty directory */
	ERR(ENOENT, access("d1", F_OK));
	assert_int_equal(px_ino("d2"), d1);
	OK(access("d2/inside", F_OK));
	assert_int_equal(nlink_of("."), n - 1);
	assert_int_equal(nlink_of("d2"), 2);

	/* over a name of an inode with two: the other name stays, one link */
	put_str("v1", "victim");
	OK(link("v1", "v2"));
	put_str("w", "winner");
	OK(rename("w", "v1"));
	check_content("v1", "winner");
	check_content("v2", "victim");
	assert_int_equal(nlink_of("v2"), 1);
	assert_int_equal(nlink_of("v1"), 1);

	/* a name onto a hard link of the same inode: nothing happens */
	put_str("h1", "same");
	OK(link("h1", "h2"));
	OK(rename("h1", "h2"));
	check_content("h1", "same");
	check_content("h2", "same");
	assert_int_equal(nlink_of("h1"), 2);

	/* a symlink over a symlink, right after an rmdir (whose orphan's purge
	 * shares the rename's commit): the target survives (the differential
	 * tester found it lost) */
	char target[4096], got[4096];
	memset(target, 'm', sizeof(target) - 1);
	target[sizeof(target) - 1] = '\0';
	OK(mkdir("sl", 01777));
	OK(symlink(target, "sl/a"));
	OK(mkdir("gone", 0711));
	OK(symlink("a", "sl/b"));
	OK(rmdir("gone"));
	OK(rename("sl/b", "sl/a"));
	assert_int_equal(readlink("sl/a", got, sizeof(got)), 1);
	assert_memory_equal(got, "a", 1);
	ERR(ELOOP, access("sl/a", F_OK));
}

void test_rename_errors(void **state)
{
	(void)state;
	px_enter("rename_errors");
	OK(mkdir("full", 0755));
	make_file("full/x");
	OK(mkdir("empty", 0755));
	OK(mkdir("src", 0755));
	put_str("f", "file");
	ERR(ENOTEMPTY, rename("src", "full"));
	ERR(EISDIR, rename("f", "empty"));
	ERR(ENOTDIR, rename("src", "f"));
	ERR(EINVAL, rename("src", "src/sub"));
	OK(mkdir("src/a", 0755));
	OK(mkdir("src/a/b", 0755));
	ERR(EINVAL, rename("src", "src/a/b/c"));
	ERR(EINVAL, rename("src/a", "src/a/b/a"));
	ERR(ENOENT, rename("missing", "x"));
	ERR(ENOENT, rename("f", "missing/x"));
	ERR(ENOTDIR, rename("f", "f/x"));
	ERR(EBUSY, rename(".", "x"));
	ERR(EBUSY, rename("src", "."));
	/* nothing moved */
	check_content("f", "file");
	OK(access("full/x", F_OK));
	OK(access("src/a/b", F_OK));
	OK(access("empty", F_OK));
}

/* The inode number that the ".." entry of dir's listing carries. */
static ino_t dotdot_of(const char *dir)
{
	DIR *dp = opendir(dir);
	struct dirent *de;
	ino_t ino = 0;

	assert_non_null(dp);
	while ((de = readdir(dp)) != NULL)
		if (strcmp(de->d_name, "..") == 0)
			ino = de->d_ino;
	closedir(dp);
	assert_true(ino != 0);
	return ino;
}

/* A rename changes both parents' mtime and ctime and the moved inode's
 * ctime, and leaves the moved inode's mtime. */
static void check_rename_times(void)
{
	struct stat p1, p2, m, st;

	OK(stat("p1", &p1));
	OK(stat("p2", &p2));
	OK(stat("p2/m/inner", &m));
	px_wait_past(px_tscmp(&p1.st_ctim, &p2.st_ctim) > 0 ? &p1.st_ctim : &p2.st_ctim);
	px_wait_past(&m.st_ctim);
	OK(rename("p2/m/inner", "p1/inner"));
	OK(stat("p1", &st));
	assert_true(px_tscmp(&st.st_mtim, &p1.st_mtim) > 0);
	assert_true(px_tscmp(&st.st_ctim, &p1.st_ctim) > 0);
	OK(stat("p2/m", &st));
	assert_true(px_tscmp(&st.st_mtim, &p2.st_mtim) > 0);
	OK(stat("p1/inner", &st));
	assert_true(px_tscmp(&st.st_ctim, &m.st_ctim) > 0);
	assert_int_equal(px_tscmp(&st.st_mtim, &m.st_mtim), 0);
	OK(rename("p1/inner", "p2/m/inner"));
}

void test_rename_parents(void **state)
{
	struct stat st;

	(void)state;
	px_enter("rename_parents");
	OK(mkdir("p1", 0755));
	OK(mkdir("p2", 0755));
	OK(mkdir("p1/m", 0755));
	OK(mkdir("p1/m/inner", 0755));
	make_file("p1/file");
	assert_int_equal(nlink_of("p1"), 3);
	assert_int_equal(nlink_of("p2"), 2);
	OK(rename("p1/m", "p2/m")); /* a directory changes parents */
	assert_int_equal(nlink_of("p1"), 2);
	assert_int_equal(nlink_of("p2"), 3);
	assert_int_equal(nlink_of("p2/m"), 3);
	assert_int_equal(dotdot_of("p2/m"), px_ino("p2"));
	OK(stat("p2/m/..", &st));
	assert_int_equal(st.st_ino, px_ino("p2"));
	check_rename_times();
	OK(rename("p1/file", "p2/file")); /* a file moves: no link count changes */
	assert_int_equal(nlink_of("p1"), 2);
	assert_int_equal(nlink_of("p2"), 3);
	OK(rename("p2/m", "p2/m2")); /* within one parent */
	assert_int_equal(nlink_of("p2"), 3);

	OK(mkdir("p1/empty", 0755)); /* over an empty directory in another parent */
	assert_int_equal(nlink_of("p1"), 3);
	OK(rename("p2/m2", "p1/empty"));
	assert_int_equal(nlink_of("p1"), 3);
	assert_int_equal(nlink_of("p2"), 2);
	assert_int_equal(dotdot_of("p1/empty"), px_ino("p1"));
	OK(access("p1/empty/inner", F_OK));
}

void test_rename_noreplace(void **state)
{
	(void)state;
	px_enter("rename_noreplace");
	put_str("a", "aaa");
	put_str("b", "bbb");
	OK(mkdir("d", 0755));
	ERR(EEXIST, renameat2(AT_FDCWD, "a", AT_FDCWD, "b", RENAME_NOREPLACE));
	ERR(EEXIST, renameat2(AT_FDCWD, "a", AT_FDCWD, "d", RENAME_NOREPLACE));
	check_content("a", "aaa");
	check_content("b", "bbb");
	OK(renameat2(AT_FDCWD, "a", AT_FDCWD, "c", RENAME_NOREPLACE));
	ERR(ENOENT, access("a", F_OK));
	check_content("c", "aaa");
	ERR(EINVAL, renameat2(AT_FDCWD, "b", AT_FDCWD, "c", RENAME_NOREPLACE | RENAME_EXCHANGE));
}

void test_rename_exchange(void **state)
{
	ino_t x, y;

	(void)state;
	px_enter("rename_exchange");
	put_str("x", "xx");
	put_str("y", "yyy");
	x = px_ino("x");
	y = px_ino("y");
	OK(renameat2(AT_FDCWD, "x", AT_FDCWD, "y", RENAME_EXCHANGE));
	check_content("x", "yyy");
	check_content("y", "xx");
	assert_int_equal(px_ino("x"), y);
	assert_int_equal(px_ino("y"), x);

	OK(mkdir("dx", 0755));
	OK(mkdir("dy", 0755));
	make_file("dx/in1");
	make_file("dy/in2");
	OK(renameat2(AT_FDCWD, "dx", AT_FDCWD, "dy", RENAME_EXCHANGE));
	OK(access("dx/in2", F_OK));
	OK(access("dy/in1", F_OK));

	/* across directories, a file for a directory: link counts follow */
	OK(mkdir("p1", 0755));
	OK(mkdir("p2", 0755));
	put_str("p1/f", "file");
	OK(mkdir("p2/sub", 0755));
	make_file("p2/sub/marker");
	OK(renameat2(AT_FDCWD, "p1/f", AT_FDCWD, "p2/sub", RENAME_EXCHANGE));
	OK(access("p1/f/marker", F_OK));
	check_content("p2/sub", "file");
	assert_int_equal(nlink_of("p1"), 3);
	assert_int_equal(nlink_of("p2"), 2);
	assert_int_equal(dotdot_of("p1/f"), px_ino("p1"));
	OK(renameat2(AT_FDCWD, "p1/f", AT_FDCWD, "p2/sub", RENAME_EXCHANGE)); /* and back */
	assert_int_equal(nlink_of("p1"), 2);
	assert_int_equal(nlink_of("p2"), 3);
	assert_int_equal(dotdot_of("p2/sub"), px_ino("p2"));

	ERR(ENOENT, renameat2(AT_FDCWD, "x", AT_FDCWD, "missing", RENAME_EXCHANGE));
	ERR(ENOENT, renameat2(AT_FDCWD, "missing", AT_FDCWD, "x", RENAME_EXCHANGE));
	ERR(EINVAL, renameat2(AT_FDCWD, "dx", AT_FDCWD, "dx/in2", RENAME_EXCHANGE));
	check_content("x", "yyy");
}

/* ------------------------------------------------------------ listings -- */

struct entry {
	char name[256];
	unsigned char type;
	ino_t ino;
};

struct listing {
	struct entry *e;
	size_t n, cap;
};

/* Append up to max entries (0: all) read from dp. */
static void read_entries(DIR *dp, struct listing *l, size_t max)
{
	struct dirent *de;

	for (size_t i = 0; max == 0 || i < max; i++) {
		errno = 0;
		de = readdir(dp);
		if (!de) {
			if (errno)
				fail_msg("readdir: %s", strerror(errno));
			return;
		}
		if (l->n == l->cap) {
			l->cap = l->cap ? l->cap * 2 : 256;
			l->e = realloc(l->e, l->cap * sizeof(*l->e));
			assert_non_null(l->e);
		}
		snprintf(l->e[l->n].name, sizeof(l->e[0].name), "%s", de->d_name);
		l->e[l->n].type = de->d_type;
		l->e[l->n].ino = de->d_ino;
		l->n++;
	}
}

static int by_name(const void *a, const void *b)
{
	return strcmp(((const struct entry *)a)->name, ((const struct entry *)b)->name);
}

/* Sort l and fail on any name listed twice. */
static void sort_unique(struct listing *l)
{
	qsort(l->e, l->n, sizeof(*l->e), by_name);
	for (size_t i = 1; i < l->n; i++)
		if (strcmp(l->e[i - 1].name, l->e[i].name) == 0)
			fail_msg("'%s' listed twice", l->e[i].name);
}

static const struct entry *find(const struct listing *l, const char *name)
{
	struct entry key;

	snprintf(key.name, sizeof(key.name), "%s", name);
	return bsearch(&key, l->e, l->n, sizeof(*l->e), by_name);
}

static void make_files(const char *fmt, int n)
{
	char name[64];

	for (int i = 0; i < n; i++) {
		snprintf(name, sizeof(name), fmt, i);
		make_file(name);
	}
}

static void check_entry(const struct listing *l, const char *name, unsigned char type)
{
	const struct entry *e = find(l, name);

	if (!e)
		fail_msg("'%s' not listed", name);
	assert_int_equal(e->type, type);
	assert_int_equal(e->ino, px_ino(name));
}

void test_readdir_large(void **state)
{
	const int n = 3000;
	struct listing l = {0};
	char name[64];
	DIR *dp;

	(void)state;
	px_enter("readdir_large");
	make_files("file-%05d", n);
	OK(mkdir("dir", 0755));
	OK(symlink("file-00000", "lnk"));
	OK(mkfifo("fifo", 0644));
	OK(mknod("sock", S_IFSOCK | 0644, 0));
	OK(mknod("chr", S_IFCHR | 0644, makedev(1, 3)));
	OK(mknod("blk", S_IFBLK | 0644, makedev(7, 0)));
	dp = opendir(".");
	assert_non_null(dp);
	read_entries(dp, &l, 0);
	closedir(dp);
	sort_unique(&l);
	assert_int_equal(l.n, n + 6 + 2);
	for (int i = 0; i < n; i++) {
		snprintf(name, sizeof(name), "file-%05d", i);
		if (!find(&l, name))
			fail_msg("'%s' not listed", name);
	}
	check_entry(&l, "file-01234", DT_REG);
	check_entry(&l, "dir", DT_DIR);
	check_entry(&l, "lnk", DT_LNK);
	check_entry(&l, "fifo", DT_FIFO);
	check_entry(&l, "sock", DT_SOCK);
	check_entry(&l, "chr", DT_CHR);
	check_entry(&l, "blk", DT_BLK);
	check_entry(&l, ".", DT_DIR);
	assert_non_null(find(&l, ".."));
	assert_int_equal(find(&l, "..")->type, DT_DIR);
	assert_int_equal(find(&l, "..")->ino, px_ino(".."));
	free(l.e);
}

/* Entries that exist throughout a listing are seen exactly once, however
 * many others come and go while it runs. */
void test_readdir_mutation(void **state)
{
	struct listing l = {0};
	char name[64];
	DIR *dp;

	(void)state;
	px_enter("readdir_mutation");
	make_files("keep-%04d", 2000);
	make_files("gone-%04d", 500);
	dp = opendir(".");
	assert_non_null(dp);
	read_entries(dp, &l, 300);
	assert_int_equal(l.n, 300);
	for (int i = 0; i < 500; i++) {
		snprintf(name, sizeof(name), "gone-%04d", i);
		OK(unlink(name));
	}
	make_files("new-%04d", 500);
	read_entries(dp, &l, 0);
	closedir(dp);
	sort_unique(&l);
	for (int i = 0; i < 2000; i++) {
		snprintf(name, sizeof(name), "keep-%04d", i);
		if (!find(&l, name))
			fail_msg("'%s' missed by a listing changed midway", name);
	}
	assert_non_null(find(&l, "."));
	assert_non_null(find(&l, ".."));

	free(l.e); /* a fresh listing sees the new state exactly */
	l = (struct listing){0};
	dp = opendir(".");
	assert_non_null(dp);
	read_entries(dp, &l, 0);
	closedir(dp);
	sort_unique(&l);
	assert_int_equal(l.n, 2000 + 500 + 2);
	assert_null(find(&l, "gone-0000"));
	assert_non_null(find(&l, "new-0499"));
	free(l.e);
}

void test_readdir_seek(void **state)
{
	struct listing first = {0}, again = {0}, all = {0};
	long pos;
	DIR *dp;

	(void)state;
	px_enter("readdir_seek");
	make_files("f%03d", 200);
	dp = opendir(".");
	assert_non_null(dp);
	read_entries(dp, &first, 50);
	pos = telldir(dp);
	assert_true(pos >= 0);
	first.n = 0;
	read_entries(dp, &first, 30);
	assert_int_equal(first.n, 30);
	seekdir(dp, pos);
	read_entries(dp, &again, 30);
	assert_int_equal(again.n, 30);
	for (size_t i = 0; i < 30; i++)
		assert_string_equal(first.e[i].name, again.e[i].name);
	rewinddir(dp);
	read_entries(dp, &all, 0);
	assert_int_equal(all.n, 202);
	closedir(dp);
	sort_unique(&all);
	free(first.e);
	free(again.e);
	free(all.e);
}

/* ------------------------------------------------- removed while open -- */

void test_unlink_open_file(void **state)
{
	unsigned char buf[8192];
	struct stat st;
	int fd, fd2;

	(void)state;
	px_enter("unlink_open_file");
	px_fill(buf, sizeof(buf), 11);
	px_put("f", buf, sizeof(buf));
	fd = (int)OK(open("f", O_RDWR));
	fd2 = (int)OK(open("f", O_RDONLY));
	OK(unlink("f"));
	ERR(ENOENT, stat("f", &st));
	OK(fstat(fd, &st));
	assert_int_equal(st.st_nlink, 0);
	assert_int_equal(st.st_size, sizeof(buf));
	CHECK_BYTES(fd, 0, buf, sizeof(buf));
	assert_int_equal(OK(pwrite(fd, "more", 4, 8192)), 4);
	OK(fsync(fd));
	CHECK_BYTES(fd2, 8192, "more", 4);
	OK(fstat(fd2, &st));
	assert_int_equal(st.st_size, 8196);
	OK(ftruncate(fd, 100));
	CHECK_BYTES(fd2, 0, buf, 100);
	ERR(ENOENT, linkat(fd, "", AT_FDCWD, "relinked", AT_EMPTY_PATH));
	OK(close(fd));
	CHECK_BYTES(fd2, 0, buf, 100); /* the last descriptor still reads */
	OK(close(fd2));
	make_file("f"); /* a new file under the old name */
	OK(stat("f", &st));
	assert_int_equal(st.st_size, 0);

	px_put("h1", "linked", 6); /* one name of two goes */
	OK(link("h1", "h2"));
	fd = (int)OK(open("h1", O_RDONLY));
	OK(unlink("h1"));
	OK(fstat(fd, &st));
	assert_int_equal(st.st_nlink, 1);
	OK(close(fd));
}

void test_rmdir_open_dir(void **state)
{
	struct stat st;
	DIR *dp;
	int dfd;

	(void)state;
	px_enter("rmdir_open_dir");
	OK(mkdir("d", 0755));
	OK(mkdir("keep", 0755));
	dfd = (int)OK(open("d", O_RDONLY | O_DIRECTORY));
	dp = opendir("d");
	assert_non_null(dp);
	OK(rmdir("d"));
	ERR(ENOENT, stat("d", &st));
	OK(fstat(dfd, &st));
	assert_true(S_ISDIR(st.st_mode));
	assert_int_equal(st.st_nlink, 0);
	assert_int_equal(nlink_of("."), 3); /* "d" no longer counts */
	errno = 0;
	assert_null(readdir(dp)); /* the end, not an error (glibc hides ENOENT) */
	assert_int_equal(errno, 0);
	ERR(ENOENT, openat(dfd, "x", O_CREAT | O_WRONLY, 0644));
	ERR(ENOENT, mkdirat(dfd, "y", 0755));
	ERR(ENOENT, symlinkat("t", dfd, "z"));
	OK(fsync(dfd));
	closedir(dp);
	OK(close(dfd));
	OK(mkdir("d", 0755)); /* the name is free again */
	assert_int_equal(nlink_of("d"), 2);
}
