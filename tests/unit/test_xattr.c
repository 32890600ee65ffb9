/*
 * test_xattr.c - kv/xattr.c: set, get, list and remove of extended
 * attributes; XATTR_CREATE / XATTR_REPLACE errors; name and value limits;
 * the name rule, and names stored before it; -ERANGE on a short list
 * buffer; attributes of one inode never show on another.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>

#include <cmocka.h>

#include "kv_int.h"
#include "testutil.h"

#define INO 40

struct xattr_arg {
	int remove;
	uint64_t ino;
	const char *name;
	const void *val;
	size_t len;
	int flags;
};

static int xattr_apply(kv_txn *t, void *p)
{
	struct xattr_arg *a = p;

	if (a->remove)
		return kv_xattr_remove(t, a->ino, a->name);
	return kv_xattr_set(t, a->ino, a->name, a->val, a->len, a->flags);
}

static int x_set(kv_env *e, uint64_t ino, const char *name, const void *val, size_t len, int flags)
{
	struct xattr_arg a = {0, ino, name, val, len, flags};

	return kv_write(e, xattr_apply, &a, 0);
}

static int x_remove(kv_env *e, uint64_t ino, const char *name)
{
	struct xattr_arg a = {.remove = 1, .ino = ino, .name = name};

	return kv_write(e, xattr_apply, &a, 0);
}

/* The value into buf (size bytes at most); its length or the error. */
static ssize_t x_get(kv_env *e, uint64_t ino, const char *name, void *buf, size_t size)
{
	const void *val;
	size_t len;
	kv_txn *t;
	int rc;

	assert_int_equal(kv_read_begin(e, &t), 0);
	rc = kv_xattr_get(t, ino, name, &val, &len);
	if (rc == 0) {
		assert_true(len <= size);
		memcpy(buf, val, len);
	}
	kv_read_end(t);
	return rc ? rc : (ssize_t)len;
}

static ssize_t x_list(kv_env *e, uint64_t ino, char *buf, size_t size)
{
	kv_txn *t;
	ssize_t n;

	assert_int_equal(kv_read_begin(e, &t), 0);
	n = kv_xattr_list(t, ino, buf, size);
	kv_read_end(t);
	return n;
}

static kv_env *env_of(void **state)
{
	return ((struct tu_image *)*state)->env;
}

static void set_get_remove(void **state)
{
	kv_env *e = env_of(state);
	char buf[64];

	assert_int_equal(x_get(e, INO, "user.a", buf, sizeof(buf)), -ENODATA);
	assert_int_equal(x_set(e, INO, "user.a", "value", 5, 0), 0);
	assert_int_equal(x_get(e, INO, "user.a", buf, sizeof(buf)), 5);
	assert_memory_equal(buf, "value", 5);
	/* replace with a longer, then a shorter, then an empty value */
	assert_int_equal(x_set(e, INO, "user.a", "a longer value", 14, 0), 0);
	assert_int_equal(x_get(e, INO, "user.a", buf, sizeof(buf)), 14);
	assert_memory_equal(buf, "a longer value", 14);
	assert_int_equal(x_set(e, INO, "user.a", "v", 1, 0), 0);
	assert_int_equal(x_get(e, INO, "user.a", buf, sizeof(buf)), 1);
	assert_int_equal(buf[0], 'v');
	assert_int_equal(x_set(e, INO, "user.a", "", 0, 0), 0);
	assert_int_equal(x_get(e, INO, "user.a", buf, sizeof(buf)), 0);
	/* binary values keep every byte */
	assert_int_equal(x_set(e, INO, "user.b", "\0\1\0\xff", 4, 0), 0);
	assert_int_equal(x_get(e, INO, "user.b", buf, sizeof(buf)), 4);
	assert_memory_equal(buf, "\0\1\0\xff", 4);
	/* other inodes, and a name that is a prefix, are separate */
	assert_int_equal(x_get(e, INO + 1, "user.a", buf, sizeof(buf)), -ENODATA);
	assert_int_equal(x_get(e, INO - 1, "user.a", buf, sizeof(buf)), -ENODATA);
	assert_int_equal(x_get(e, INO, "user.", buf, sizeof(buf)), -ENODATA);
	assert_int_equal(x_get(e, INO, "user.aa", buf, sizeof(buf)), -ENODATA);

	assert_int_equal(x_remove(e, INO, "user.a"), 0);
	assert_int_equal(x_get(e, INO, "user.a", buf, sizeof(buf)), -ENODATA);
	assert_int_equal(x_remove(e, INO, "user.a"), -ENODATA);
	assert_int_equal(x_get(e, INO, "user.b", buf, sizeof(buf)), 4);
}

static void create_replace_flags(void **state)
{
	kv_env *e = env_of(state);
	char buf[16];

	assert_int_equal(x_set(e, INO, "user.x", "1", 1, XATTR_REPLACE), -ENODATA);
	assert_int_equal(x_get(e, INO, "user.x", buf, sizeof(buf)), -ENODATA);
	assert_int_equal(x_set(e, INO, "user.x", "2", 1, XATTR_CREATE), 0);
	assert_int_equal(x_set(e, INO, "user.x", "3", 1, XATTR_CREATE), -EEXIST);
	assert_int_equal(x_get(e, INO, "user.x", buf, sizeof(buf)), 1);
	assert_int_equal(buf[0], '2');
	assert_int_equal(x_set(e, INO, "user.x", "4", 1, XATTR_REPLACE), 0);
	assert_int_equal(x_get(e, INO, "user.x", buf, sizeof(buf)), 1);
	assert_int_equal(buf[0], '4');
	/* the same name on another inode is not there yet */
	assert_int_equal(x_set(e, INO + 1, "user.x", "5", 1, XATTR_REPLACE), -ENODATA);
	assert_int_equal(x_set(e, INO, "user.x", "6", 1, 0x100), -EINVAL);
	assert_int_equal(x_get(e, INO, "user.x", buf, sizeof(buf)), 1);
	assert_int_equal(buf[0], '4');
}

static void limits(void **state)
{
	kv_env *e = env_of(state);
	char name[KV_XATTR_NAME_MAX + 2];
	unsigned char *big = malloc(KV_XATTR_SIZE_MAX + 1), *got = malloc(KV_XATTR_SIZE_MAX);

	assert_non_null(big);
	assert_non_null(got);
	memset(name, 'n', sizeof(name));
	memcpy(name, "user.", 5);
	name[KV_XATTR_NAME_MAX + 1] = '\0'; /* 256 bytes */
	assert_int_equal(x_set(e, INO, name, "v", 1, 0), -ERANGE);
	assert_int_equal(x_get(e, INO, name, got, 16), -ERANGE);
	assert_int_equal(x_remove(e, INO, name), -ERANGE);
	assert_int_equal(x_set(e, INO, "", "v", 1, 0), -ERANGE);
	name[KV_XATTR_NAME_MAX] = '\0'; /* 255 bytes */
	assert_int_equal(x_set(e, INO, name, "v", 1, 0), 0);
	assert_int_equal(x_get(e, INO, name, got, 16), 1);

	tu_fill(big, KV_XATTR_SIZE_MAX + 1, 7);
	assert_int_equal(x_set(e, INO, "user.big", big, KV_XATTR_SIZE_MAX + 1, 0), -E2BIG);
	assert_int_equal(x_get(e, INO, "user.big", got, KV_XATTR_SIZE_MAX), -ENODATA);
	assert_int_equal(x_set(e, INO, "user.big", big, KV_XATTR_SIZE_MAX, 0), 0);
	assert_int_equal(x_get(e, INO, "user.big", got, KV_XATTR_SIZE_MAX), KV_XATTR_SIZE_MAX);
	assert_memory_equal(got, big, KV_XATTR_SIZE_MAX);
	free(big);
	free(got);
}

/* Linux's rule: the three namespaces kvfs implements, with a name after
 * the prefix; everything else refused with the errno ext4 and tmpfs give
 * (the two ACL names, whose values must be ACLs: test_acl.c). */
static void name_rule(void **state)
{
	static const struct {
		const char *name;
		int rc;
	} cases[] = {
		{"user.a", 0},         {"trusted.t", 0},         {"security.selinux", 0},
		{"user.user.", 0},     {"user", -EOPNOTSUPP},    {"foo.bar", -EOPNOTSUPP},
		{"x", -EOPNOTSUPP},    {"USER.a", -EOPNOTSUPP},  {" user.a", -EOPNOTSUPP},
		{"system.", -EOPNOTSUPP}, {"system.posix_acl_accessx", -EOPNOTSUPP},
		{"system.posix_acl", -EOPNOTSUPP}, {"system.posix_acl_default.", -EOPNOTSUPP},
		{"user.", -EINVAL},    {"trusted.", -EINVAL},    {"security.", -EINVAL},
		{"", -ERANGE},
	};
	kv_env *e = env_of(state);
	char name[KV_XATTR_NAME_MAX + 1], buf[8];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *n = cases[i].name;

		if (kv_xattr_name_check(n, strlen(n)) != cases[i].rc)
			fail_msg("'%s': %d, expected %d", n, kv_xattr_name_check(n, strlen(n)),
				 cases[i].rc);
		/* kv_xattr_set holds every writer to it */
		assert_int_equal(x_set(e, INO, n, "v", 1, 0), cases[i].rc);
		assert_int_equal(x_get(e, INO, n, buf, sizeof(buf)),
				 cases[i].rc == 0 ? 1 : cases[i].rc == -ERANGE ? -ERANGE : -ENODATA);
	}
	assert_int_equal(kv_xattr_name_check("user.a\0b", 8), -ERANGE);
	assert_int_equal(kv_xattr_name_check("user.ab", 6), 0); /* len counts, not the NUL */
	memset(name, 'n', sizeof(name));
	memcpy(name, "user.", 5);
	assert_int_equal(kv_xattr_name_check(name, KV_XATTR_NAME_MAX), 0);
	assert_int_equal(kv_xattr_name_check(name, KV_XATTR_NAME_MAX + 1), -ERANGE);
}

/* A name the rule refuses that an image already holds (kvfs once stored
 * any name) is still read, listed and removed; it is never set again. */
static int put_foo_bar(kv_txn *t, void *arg)
{
	const struct kv_key k = {.ino = *(uint64_t *)arg, .name = "foo.bar", .namelen = 7};
	unsigned char key[KV_KEY_MAX];

	return kv_raw_put(t, KV_DB_XATTR, key, kv_key_encode(KV_DB_XATTR, &k, key), "old", 3);
}

static void legacy_names(void **state)
{
	kv_env *e = env_of(state);
	uint64_t ino = INO;
	char buf[32];

	assert_int_equal(kv_write(e, put_foo_bar, &ino, 0), 0);

	assert_int_equal(x_get(e, INO, "foo.bar", buf, sizeof(buf)), 3);
	assert_memory_equal(buf, "old", 3);
	assert_int_equal(x_list(e, INO, buf, sizeof(buf)), 8);
	assert_memory_equal(buf, "foo.bar", 8);
	assert_int_equal(x_set(e, INO, "foo.bar", "new", 3, XATTR_REPLACE), -EOPNOTSUPP);
	assert_int_equal(x_get(e, INO, "foo.bar", buf, sizeof(buf)), 3);
	assert_memory_equal(buf, "old", 3);
	assert_int_equal(x_remove(e, INO, "foo.bar"), 0);
	assert_int_equal(x_get(e, INO, "foo.bar", buf, sizeof(buf)), -ENODATA);
	assert_int_equal(x_list(e, INO, buf, sizeof(buf)), 0);
}

static void list(void **state)
{
	static const char want[] = "security.selinux\0trusted.t\0user.a\0user.b\0user.zz";
	kv_env *e = env_of(state);
	char buf[128];

	assert_int_equal(x_list(e, INO, buf, sizeof(buf)), 0);
	assert_int_equal(x_list(e, INO, NULL, 0), 0);
	/* set out of order: listed in name order */
	assert_int_equal(x_set(e, INO, "user.zz", "1", 1, 0), 0);
	assert_int_equal(x_set(e, INO, "user.b", "1", 1, 0), 0);
	assert_int_equal(x_set(e, INO, "trusted.t", "", 0, 0), 0);
	assert_int_equal(x_set(e, INO, "user.a", "1", 1, 0), 0);
	assert_int_equal(x_set(e, INO, "security.selinux", "1", 1, 0), 0);
	assert_int_equal(x_set(e, INO - 1, "user.before", "1", 1, 0), 0);
	assert_int_equal(x_set(e, INO + 1, "user.after", "1", 1, 0), 0);

	assert_int_equal(x_list(e, INO, NULL, 0), sizeof(want));
	memset(buf, 'X', sizeof(buf));
	assert_int_equal(x_list(e, INO, buf, sizeof(buf)), sizeof(want));
	assert_memory_equal(buf, want, sizeof(want));
	assert_int_equal(x_list(e, INO, buf, sizeof(want)), sizeof(want)); /* exact fit */
	assert_memory_equal(buf, want, sizeof(want));
	assert_int_equal(x_list(e, INO, buf, sizeof(want) - 1), -ERANGE);
	assert_int_equal(x_list(e, INO, buf, 1), -ERANGE);

	assert_int_equal(x_remove(e, INO, "user.b"), 0);
	assert_int_equal(x_list(e, INO, buf, sizeof(buf)), sizeof(want) - 7);
	assert_memory_equal(buf, "security.selinux\0trusted.t\0user.a\0user.zz", sizeof(want) - 7);
	assert_int_equal(x_list(e, INO + 1, buf, sizeof(buf)), 11);
	assert_memory_equal(buf, "user.after", 11);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test_setup_teardown(set_get_remove, tu_setup, tu_teardown),
	        cmocka_unit_test_setup_teardown(create_replace_flags, tu_setup, tu_teardown),
	        cmocka_unit_test_setup_teardown(limits, tu_setup, tu_teardown),
	        cmocka_unit_test_setup_teardown(name_rule, tu_setup, tu_teardown),
	        cmocka_unit_test_setup_teardown(legacy_names, tu_setup, tu_teardown),
	        cmocka_unit_test_setup_teardown(list, tu_setup, tu_teardown),
	};

	return cmocka_run_group_tests_name("xattr", tests, NULL, NULL);
}
