/*
 * posix_xattr.c - extended attributes at the syscall level (the posix_ops
 * suite): set, get, list and remove on a file and a directory, through a
 * descriptor (f*) too, and user.* refused on a symlink (EPERM);
 * XATTR_CREATE and XATTR_REPLACE; values up to the kernel's 64 KiB and
 * buffers too small (ERANGE); the namespaces a filesystem takes and the
 * errnos of the names it refuses, as ext4 and tmpfs answer; the ctime each
 * change moves.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "posix_ops.h"

/* The NUL-separated list of path's names must be exactly want (sorted
 * here, since the order is the filesystem's). */
static void check_list(const char *path, const char *const *want, int n)
{
	char buf[1024], *p;
	ssize_t len, need = 0;
	int found = 0;

	for (int i = 0; i < n; i++)
		need += (ssize_t)strlen(want[i]) + 1;
	len = (ssize_t)OK(listxattr(path, NULL, 0));
	assert_int_equal(len, need);
	assert_int_equal(OK(listxattr(path, buf, sizeof(buf))), need);
	for (p = buf; p < buf + len; p += strlen(p) + 1) {
		int hit = 0;
		for (int i = 0; i < n; i++)
			hit += strcmp(p, want[i]) == 0;
		if (hit != 1)
			fail_msg("listxattr of %s: unexpected name '%s'", path, p);
		found++;
	}
	assert_int_equal(found, n);
}

static void xattr_calls(const char *path)
{
	const char *ab[] = {"user.a", "user.b", "trusted.t"};
	char buf[64];

	check_list(path, NULL, 0);
	OK(setxattr(path, "user.a", "v1", 2, 0));
	assert_int_equal(OK(getxattr(path, "user.a", NULL, 0)), 2);
	assert_int_equal(OK(getxattr(path, "user.a", buf, sizeof(buf))), 2);
	assert_memory_equal(buf, "v1", 2);
	ERR(ERANGE, getxattr(path, "user.a", buf, 1));
	ERR(EEXIST, setxattr(path, "user.a", "v2", 2, XATTR_CREATE));
	ERR(ENODATA, setxattr(path, "user.b", "v2", 2, XATTR_REPLACE));
	ERR(ENODATA, getxattr(path, "user.b", buf, sizeof(buf)));
	ERR(ENODATA, getxattr(path, "user.b", NULL, 0));
	OK(setxattr(path, "user.a", "value-two", 9, XATTR_REPLACE));
	assert_int_equal(OK(getxattr(path, "user.a", buf, sizeof(buf))), 9);
	assert_memory_equal(buf, "value-two", 9);
	OK(setxattr(path, "user.b", "", 0, XATTR_CREATE));
	assert_int_equal(OK(getxattr(path, "user.b", buf, sizeof(buf))), 0);
	OK(setxattr(path, "trusted.t", "root", 4, 0));
	check_list(path, ab, 3);
	ERR(ERANGE, listxattr(path, buf, 3));

	OK(removexattr(path, "user.a"));
	ERR(ENODATA, removexattr(path, "user.a"));
	ERR(ENODATA, getxattr(path, "user.a", buf, sizeof(buf)));
	check_list(path, ab + 1, 2);
	OK(removexattr(path, "trusted.t"));
	check_list(path, ab + 1, 1);
}

void test_xattr(void **state)
{
	struct stat before, st;
	char buf[16];
	int fd;

	(void)state;
	px_enter("xattr");
	px_put("f", "data", 4);
	xattr_calls("f");
	OK(mkdir("d", 0755));
	xattr_calls("d");

	fd = (int)OK(open("f", O_RDONLY));
	OK(fsetxattr(fd, "user.fd", "12345", 5, 0));
	assert_int_equal(OK(fgetxattr(fd, "user.fd", buf, sizeof(buf))), 5);
	assert_memory_equal(buf, "12345", 5);
	assert_int_equal(OK(flistxattr(fd, NULL, 0)), strlen("user.b") + strlen("user.fd") + 2);
	OK(fremovexattr(fd, "user.fd"));
	OK(close(fd));

	OK(stat("f", &before)); /* an xattr change is an inode change */
	px_wait_past(&before.st_ctim);
	OK(setxattr("f", "user.c", "1", 1, 0));
	OK(stat("f", &st));
	assert_true(px_tscmp(&st.st_ctim, &before.st_ctim) > 0);

	OK(symlink("f", "link")); /* user.* is for files and directories */
	ERR(EPERM, lsetxattr("link", "user.x", "1", 1, 0));
	ERR(ENODATA, lgetxattr("link", "user.x", buf, sizeof(buf)));
	ERR(ENOENT, setxattr("missing", "user.x", "1", 1, 0));
}

void test_xattr_large(void **state)
{
	enum { MAX = 65536 }; /* XATTR_SIZE_MAX */
	static unsigned char val[MAX + 1], got[MAX];
	char small[8];

	(void)state;
	px_enter("xattr_large");
	px_put("f", "", 0);
	px_fill(val, sizeof(val), 6);
	OK(setxattr("f", "user.big", val, MAX, 0));
	assert_int_equal(OK(getxattr("f", "user.big", NULL, 0)), MAX);
	assert_int_equal(OK(getxattr("f", "user.big", got, MAX)), MAX);
	assert_memory_equal(got, val, MAX);
	ERR(ERANGE, getxattr("f", "user.big", got, MAX - 1));
	ERR(E2BIG, setxattr("f", "user.big", val, MAX + 1, 0));
	OK(setxattr("f", "user.big", "tiny", 4, XATTR_REPLACE));
	assert_int_equal(OK(getxattr("f", "user.big", small, sizeof(small))), 4);
	assert_memory_equal(small, "tiny", 4);
}

/* The call must fail with want; the message names the call, path and name
 * (ERR would show only the expression). */
static void xattr_refused(int want, long long r, const char *call, const char *path,
			  const char *name)
{
	int e = errno;

	if (r != -1 || e != want)
		fail_msg("%s(\"%s\", \"%s\"): %s, expected %s", call, path, name,
			 r == -1 ? strerrorname_np(e) : "succeeded", strerrorname_np(want));
}

/* Which names there are, as ext4 and tmpfs answer. The kernel refuses an
 * empty name and one over 255 bytes itself (ERANGE) and passes every other
 * name to a FUSE filesystem; ext4 and tmpfs refuse a name in no namespace
 * they implement (EOPNOTSUPP: "foo.bar", "x", any "system.*" but the ACLs)
 * and a namespace prefix with nothing after it (EINVAL: "user."), for set,
 * get and remove alike. */
void test_xattr_names(void **state)
{
	static const struct {
		const char *name;
		int err;
	} refused[] = {
		{"foo.bar", EOPNOTSUPP}, {"x", EOPNOTSUPP},       {"user", EOPNOTSUPP},
		{"USER.a", EOPNOTSUPP},  {".user.a", EOPNOTSUPP}, {"system.", EOPNOTSUPP},
		{"system.a", EOPNOTSUPP}, {"user.", EINVAL},      {"trusted.", EINVAL},
		{"security.", EINVAL},
	};
	static const char *const paths[] = {"f", "d"};
	const char *ok[] = {"user.a", "trusted.a", "security.a", NULL};
	char n255[256], n256[257], buf[16];

	(void)state;
	px_enter("xattr_names");
	px_put("f", "", 0);
	OK(mkdir("d", 0755));
	memset(n255, 'n', sizeof(n255) - 1);
	memcpy(n255, "user.", 5);
	n255[255] = '\0';
	memset(n256, 'n', sizeof(n256) - 1);
	memcpy(n256, "user.", 5);
	n256[256] = '\0';
	ok[3] = n255;
	for (size_t p = 0; p < sizeof(paths) / sizeof(paths[0]); p++) {
		const char *path = paths[p];

		for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
			const char *n = refused[i].name;
			int err = refused[i].err;

			xattr_refused(err, setxattr(path, n, "v", 1, 0), "setxattr", path, n);
			xattr_refused(err, setxattr(path, n, "v", 1, XATTR_CREATE), "setxattr CREATE",
				      path, n);
			xattr_refused(err, setxattr(path, n, "v", 1, XATTR_REPLACE),
				      "setxattr REPLACE", path, n);
			xattr_refused(err, getxattr(path, n, buf, sizeof(buf)), "getxattr", path, n);
			xattr_refused(err, getxattr(path, n, NULL, 0), "getxattr size", path, n);
			xattr_refused(err, removexattr(path, n), "removexattr", path, n);
		}
		check_list(path, NULL, 0);
		ERR(ERANGE, setxattr(path, "", "v", 1, 0));
		ERR(ERANGE, getxattr(path, "", buf, sizeof(buf)));
		ERR(ERANGE, removexattr(path, ""));
		ERR(ERANGE, setxattr(path, n256, "v", 1, 0));
		ERR(ERANGE, getxattr(path, n256, buf, sizeof(buf)));
		ERR(ERANGE, removexattr(path, n256));
		for (int i = 0; i < 4; i++)
			OK(setxattr(path, ok[i], "v", 1, XATTR_CREATE));
		check_list(path, ok, 4);
		for (int i = 0; i < 4; i++) {
			assert_int_equal(OK(getxattr(path, ok[i], buf, sizeof(buf))), 1);
			OK(removexattr(path, ok[i]));
		}
		check_list(path, NULL, 0);
	}
}
