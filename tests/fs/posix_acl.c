/*
 * posix_acl.c - POSIX ACLs at the syscall level (the part of the posix_ops
 * suite that acl(5) asks of a filesystem): the two system.posix_acl_*
 * xattrs set and read as raw values (the kernel's encoding: a version,
 * then tag, perm and id per entry), what they do to the mode and what the
 * mode does to them, inheritance at create in place of the umask, and the
 * errnos. The tmpfs reference run holds it to what this kernel's local
 * filesystems give.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "posix_ops.h"

#define ACCESS "system.posix_acl_access"
#define DEFAULT "system.posix_acl_default"
#define U_OBJ 0x01u
#define U 0x02u
#define G_OBJ 0x04u
#define M 0x10u
#define O 0x20u
#define NONE 0xffffffffu

struct acl {
	unsigned char b[4 + 8 * 8];
	size_t len;
};

/* An ACL of the entries given as tag, perm, id triples (0-terminated). */
static struct acl acl_of(const unsigned *e)
{
	struct acl a = {.len = 4};

	a.b[0] = 2;
	for (; e[0]; e += 3, a.len += 8) {
		unsigned char *p = a.b + a.len;

		p[0] = (unsigned char)e[0];
		p[2] = (unsigned char)e[1];
		for (int i = 0; i < 4; i++)
			p[4 + i] = (unsigned char)(e[2] >> (8 * i));
	}
	return a;
}

static unsigned mode_of(const char *path)
{
	struct stat st;

	OK(lstat(path, &st));
	return st.st_mode & 07777;
}

/* The value of name on path is want's bytes exactly. */
static void check_acl(const char *path, const char *name, const struct acl *want)
{
	unsigned char buf[256];
	ssize_t n = OK(getxattr(path, name, buf, sizeof(buf)));

	assert_int_equal(n, want->len);
	assert_memory_equal(buf, want->b, want->len);
}

void test_acl_access(void **state)
{
	static const unsigned named[] = {U_OBJ, 6, NONE, U, 4, 1000, G_OBJ, 4, NONE, M, 6, NONE,
					 O, 0, NONE, 0},
		chmodded[] = {U_OBJ, 6, NONE, U, 4, 1000, G_OBJ, 4, NONE, M, 0, NONE, O, 4, NONE, 0},
		minimal[] = {U_OBJ, 7, NONE, G_OBJ, 5, NONE, O, 0, NONE, 0},
		no_mask[] = {U_OBJ, 6, NONE, U, 4, 1000, G_OBJ, 4, NONE, O, 0, NONE, 0};
	struct acl a = acl_of(named);
	char names[64];

	(void)state;
	px_enter("acl_access");
	px_put("f", "x", 1);
	OK(chmod("f", 04644));
	/* the mode follows: the group bits are the mask's; set-UID stays */
	OK(setxattr("f", ACCESS, a.b, a.len, 0));
	assert_int_equal(mode_of("f"), 04660);
	check_acl("f", ACCESS, &a);
	assert_int_equal(OK(listxattr("f", names, sizeof(names))), sizeof(ACCESS));
	assert_string_equal(names, ACCESS);
	/* chmod rewrites the owner, mask and other entries */
	OK(chmod("f", 0604));
	a = acl_of(chmodded);
	check_acl("f", ACCESS, &a);
	/* one the mode says all of sets the mode and is not kept */
	a = acl_of(minimal);
	OK(setxattr("f", ACCESS, a.b, a.len, 0));
	assert_int_equal(mode_of("f"), 0750);
	ERR(ENODATA, getxattr("f", ACCESS, names, sizeof(names)));
	assert_int_equal(OK(listxattr("f", names, sizeof(names))), 0);
	/* removing one leaves the mode; removing none is no error (ext4 and
	 * tmpfs alike, unlike other xattrs) */
	a = acl_of(named);
	OK(setxattr("f", ACCESS, a.b, a.len, 0));
	OK(removexattr("f", ACCESS));
	assert_int_equal(mode_of("f"), 0660);
	ERR(ENODATA, getxattr("f", ACCESS, names, sizeof(names)));
	OK(removexattr("f", ACCESS));
	OK(removexattr("f", DEFAULT));
	/* what the kernel refuses: named entries without a mask, no ACL at all,
	 * a default ACL on a file, any ACL on a symlink */
	a = acl_of(no_mask);
	ERR(EINVAL, setxattr("f", ACCESS, a.b, a.len, 0));
	ERR(EINVAL, setxattr("f", ACCESS, "\2\0\0\0\1", 5, 0)); /* a torn entry */
	ERR(EOPNOTSUPP, setxattr("f", ACCESS, "junk", 4, 0));        /* another version */
	a = acl_of(minimal);
	ERR(EACCES, setxattr("f", DEFAULT, a.b, a.len, 0));
	OK(symlink("f", "l"));
	ERR(EOPNOTSUPP, lsetxattr("l", ACCESS, a.b, a.len, 0));
	assert_int_equal(mode_of("f"), 0660);
}

void test_acl_default(void **state)
{
	static const unsigned def[] = {U_OBJ, 7, NONE, U, 7, 1000, G_OBJ, 4, NONE, M, 7, NONE,
				       O, 5, NONE, 0},
		file_acl[] = {U_OBJ, 6, NONE, U, 7, 1000, G_OBJ, 4, NONE, M, 4, NONE, O, 0, NONE, 0},
		plain[] = {U_OBJ, 7, NONE, G_OBJ, 0, NONE, O, 0, NONE, 0};
	struct acl d = acl_of(def), want = acl_of(file_acl), p = acl_of(plain);
	char buf[128];

	(void)state;
	px_enter("acl_default");
	OK(mkdir("d", 0755));
	umask(077); /* px_umask_restore puts it back */
	OK(setxattr("d", DEFAULT, d.b, d.len, 0));
	check_acl("d", DEFAULT, &d);
	assert_int_equal(mode_of("d"), 0755); /* a default ACL leaves the mode */
	/* no umask under a default ACL: the mode asked for masks it */
	OK(close(OK(open("d/f", O_CREAT | O_WRONLY, 0640))));
	assert_int_equal(mode_of("d/f"), 0640);
	check_acl("d/f", ACCESS, &want);
	ERR(ENODATA, getxattr("d/f", DEFAULT, buf, sizeof(buf)));
	OK(mkdir("d/sub", 0777));
	assert_int_equal(mode_of("d/sub"), 0775);
	check_acl("d/sub", DEFAULT, &d);
	OK(mknod("d/fifo", S_IFIFO | 0666, 0));
	assert_int_equal(mode_of("d/fifo"), 0664);
	OK(symlink("f", "d/l"));
	ERR(EOPNOTSUPP, lgetxattr("d/l", ACCESS, buf, sizeof(buf)));
	/* a default the mode says all of: the mode only */
	OK(setxattr("d/sub", DEFAULT, p.b, p.len, 0));
	OK(close(OK(open("d/sub/g", O_CREAT | O_WRONLY, 0666))));
	assert_int_equal(mode_of("d/sub/g"), 0600);
	ERR(ENODATA, getxattr("d/sub/g", ACCESS, buf, sizeof(buf)));
	/* without one, the umask */
	OK(removexattr("d", DEFAULT));
	umask(027);
	OK(close(OK(open("d/h", O_CREAT | O_WRONLY, 0666))));
	assert_int_equal(mode_of("d/h"), 0640);
	OK(mkdir("d/e", 0777));
	assert_int_equal(mode_of("d/e"), 0750);
	ERR(ENODATA, getxattr("d/e", DEFAULT, buf, sizeof(buf)));
}

static mode_t saved_umask;

int px_umask_save(void **state)
{
	(void)state;
	saved_umask = umask(022);
	umask(saved_umask);
	return 0;
}

int px_umask_restore(void **state)
{
	(void)state;
	umask(saved_umask);
	return 0;
}
