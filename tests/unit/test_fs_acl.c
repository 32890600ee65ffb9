/*
 * test_fs_acl.c - what the daemon's cores do with POSIX ACLs, without a
 * mount (fs.acl checks the same against tmpfs with the kernel): a create
 * takes the directory's default ACL in place of the umask, setfacl's
 * access ACL sets the mode (and is not stored when the mode says it all),
 * chmod rewrites a stored one, the set-group-ID bit goes when a caller
 * outside the file's group sets one, dropping a stored one works on a
 * full image, and -o noacl refuses the names.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "fsfix.h"
#include "kv_int.h"
#include "testutil.h"

#define ROOT KV_ROOT_INO

/* The flags of the last change handed to the writer (kv_write is wrapped:
 * CMakeLists.txt). */
static unsigned write_flags;

int __real_kv_write(kv_env *env, kv_apply_fn apply, void *arg, unsigned flags);

int __wrap_kv_write(kv_env *env, kv_apply_fn apply, void *arg, unsigned flags)
{
	write_flags = flags;
	return __real_kv_write(env, apply, arg, flags);
}

/* An ACL (posix_acl_xattr encoding) of n entries given as tag, perm, id. */
static size_t acl(unsigned char *buf, int n, ...)
{
	va_list ap;

	va_start(ap, n);
	kv_put_le32(buf, 2);
	for (int i = 0; i < n; i++) {
		unsigned char *e = buf + 4 + 8 * i;
		unsigned tag = va_arg(ap, unsigned), perm = va_arg(ap, unsigned);

		e[0] = (unsigned char)tag;
		e[1] = 0;
		e[2] = (unsigned char)perm;
		e[3] = 0;
		kv_put_le32(e + 4, va_arg(ap, uint32_t));
	}
	va_end(ap);
	return 4 + 8 * (size_t)n;
}

#define U_OBJ 0x01u
#define U 0x02u
#define G_OBJ 0x04u
#define G 0x08u
#define M 0x10u
#define O 0x20u
#define NONE 0xffffffffu

/* The stored value of name on ino into buf: its length, or the error. */
static ssize_t stored(uint64_t ino, const char *name, unsigned char *buf)
{
	const void *val;
	size_t len;
	kv_txn *t;
	int rc;

	assert_int_equal(kv_read_begin(fs.env, &t), 0);
	rc = kv_xattr_get(t, ino, name, &val, &len);
	if (rc == 0)
		memcpy(buf, val, len);
	kv_read_end(t);
	return rc ? rc : (ssize_t)len;
}

static uint32_t mode_of(uint64_t ino)
{
	struct stat st;

	assert_int_equal(fs_do_getattr(ino, 0, &st), 0);
	return st.st_mode;
}

static void umask_without_default(void **state)
{
	const struct fs_cred c = {.umask = 027};
	struct stat f, d, l;

	(void)state;
	assert_int_equal(fs_do_create(ROOT, "f", 0666, &c, &f), 0);
	assert_int_equal(fs_do_mkdir(ROOT, "d", 0777, &c, &d), 0);
	assert_int_equal(fs_do_symlink("f", ROOT, "l", &c, &l), 0);
	assert_int_equal(f.st_mode, S_IFREG | 0640);
	assert_int_equal(d.st_mode, S_IFDIR | 0750);
	assert_int_equal(l.st_mode, S_IFLNK | 0777); /* symlinks: never */
	fs_do_forget(f.st_ino, 1);
	fs_do_forget(d.st_ino, 1);
	fs_do_forget(l.st_ino, 1);
}

static void create_inherits(void **state)
{
	const struct fs_cred c = {.umask = 077};
	unsigned char def[128], got[128], want[128];
	size_t dlen = acl(def, 5, U_OBJ, 7u, NONE, U, 7u, 999u, G_OBJ, 4u, NONE, M, 7u, NONE,
			  O, 5u, NONE);
	struct stat d, f, sub, l;

	(void)state;
	assert_int_equal(fs_do_mkdir(ROOT, "d", 0755, &c, &d), 0);
	assert_int_equal(fs_do_setxattr(d.st_ino, KV_ACL_DEFAULT, def, dlen, 0, &c), 0);
	/* a regular file: the default masked by 0666, no umask */
	assert_int_equal(fs_do_create(d.st_ino, "f", 0666, &c, &f), 0);
	assert_int_equal(f.st_mode, S_IFREG | 0664);
	assert_int_equal(stored(f.st_ino, KV_ACL_ACCESS, got), (ssize_t)dlen);
	acl(want, 5, U_OBJ, 6u, NONE, U, 7u, 999u, G_OBJ, 4u, NONE, M, 6u, NONE, O, 4u, NONE);
	assert_memory_equal(got, want, dlen);
	assert_int_equal(stored(f.st_ino, KV_ACL_DEFAULT, got), -ENODATA);
	/* a directory takes it as its default too */
	assert_int_equal(fs_do_mkdir(d.st_ino, "sub", 0777, &c, &sub), 0);
	assert_int_equal(sub.st_mode, S_IFDIR | 0775);
	assert_int_equal(stored(sub.st_ino, KV_ACL_DEFAULT, got), (ssize_t)dlen);
	assert_memory_equal(got, def, dlen);
	/* a symlink takes nothing */
	assert_int_equal(fs_do_symlink("f", d.st_ino, "l", &c, &l), 0);
	assert_int_equal(stored(l.st_ino, KV_ACL_ACCESS, got), -ENODATA);
	/* with -o noacl the default is not looked at: the umask is */
	fs.cfg.acl = 0;
	fs_do_forget(f.st_ino, 1);
	assert_int_equal(fs_do_create(d.st_ino, "g", 0666, &c, &f), 0);
	assert_int_equal(f.st_mode, S_IFREG | 0600);
	assert_int_equal(stored(f.st_ino, KV_ACL_ACCESS, got), -ENODATA);
	fs_do_forget(f.st_ino, 1);
	fs_do_forget(d.st_ino, 1);
	fs_do_forget(sub.st_ino, 1);
	fs_do_forget(l.st_ino, 1);
}

static void setfacl_sets_mode(void **state)
{
	const struct fs_cred root = {0}, member = {.uid = 1000, .gid = 50},
			     outsider = {.uid = 1000, .gid = 60};
	unsigned char a[128], got[128];
	size_t len = acl(a, 5, U_OBJ, 6u, NONE, U, 4u, 999u, G_OBJ, 4u, NONE, M, 4u, NONE, O,
			 0u, NONE);
	struct stat f, st;
	uint64_t ino;

	(void)state;
	assert_int_equal(fs_do_create(ROOT, "f", 02777, &root, &f), 0);
	ino = f.st_ino;
	st.st_gid = 50;
	assert_int_equal(fs_do_setattr(ino, &st, FUSE_SET_ATTR_GID, 0, &st), 0);
	/* stored, and the mode follows it; a member of the group keeps S_ISGID */
	assert_int_equal(fs_do_setxattr(ino, KV_ACL_ACCESS, a, len, 0, &member), 0);
	assert_int_equal(mode_of(ino), S_IFREG | 02640);
	assert_int_equal(stored(ino, KV_ACL_ACCESS, got), (ssize_t)len);
	/* chmod rewrites the owner, mask and other entries */
	st.st_mode = 02751;
	assert_int_equal(fs_do_setattr(ino, &st, FUSE_SET_ATTR_MODE, 0, &st), 0);
	assert_int_equal(stored(ino, KV_ACL_ACCESS, got), (ssize_t)len);
	acl(a, 5, U_OBJ, 7u, NONE, U, 4u, 999u, G_OBJ, 4u, NONE, M, 5u, NONE, O, 1u, NONE);
	assert_memory_equal(got, a, len);
	/* one the mode says all of: the mode only, the stored one goes; a
	 * caller outside the group loses S_ISGID */
	len = acl(a, 3, U_OBJ, 6u, NONE, G_OBJ, 0u, NONE, O, 4u, NONE);
	assert_int_equal(fs_do_setxattr(ino, KV_ACL_ACCESS, a, len, 0, &outsider), 0);
	assert_int_equal(mode_of(ino), S_IFREG | 0604);
	assert_int_equal(stored(ino, KV_ACL_ACCESS, got), -ENODATA);
	/* dropping the stored one is a delete: it may use the reserve a full
	 * image keeps, as removexattr does; setting one may not */
	assert_int_equal(write_flags & KV_OP_RESERVE, KV_OP_RESERVE);
	len = acl(a, 5, U_OBJ, 6u, NONE, U, 4u, 999u, G_OBJ, 4u, NONE, M, 4u, NONE, O, 0u, NONE);
	assert_int_equal(fs_do_setxattr(ino, KV_ACL_ACCESS, a, len, 0, &root), 0);
	assert_int_equal(write_flags & KV_OP_RESERVE, 0);
	len = acl(a, 3, U_OBJ, 6u, NONE, G_OBJ, 0u, NONE, O, 4u, NONE);
	assert_int_equal(fs_do_setxattr(ino, KV_ACL_ACCESS, a, len, 0, &root), 0);
	/* not an ACL; a default one on a file */
	assert_int_equal(fs_do_setxattr(ino, KV_ACL_ACCESS, "v", 1, 0, &root), -EINVAL);
	assert_int_equal(fs_do_setxattr(ino, KV_ACL_DEFAULT, a, len, 0, &root), -EACCES);
	assert_int_equal(mode_of(ino), S_IFREG | 0604);
	/* -o noacl: the names are not kvfs's */
	fs.cfg.acl = 0;
	assert_int_equal(fs_do_setxattr(ino, KV_ACL_ACCESS, a, len, 0, &root), -EOPNOTSUPP);
	fs_do_forget(ino, 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(umask_without_default, fsfix_setup, fsfix_teardown),
		cmocka_unit_test_setup_teardown(create_inherits, fsfix_setup, fsfix_teardown),
		cmocka_unit_test_setup_teardown(setfacl_sets_mode, fsfix_setup, fsfix_teardown),
	};

	if (fs_itable_init())
		return 1;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
