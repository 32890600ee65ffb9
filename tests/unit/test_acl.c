/*
 * test_acl.c - kv/acl.c: which ACL values are well formed (the kernel's
 * rule), the mode an access ACL gives, chmod's rewrite of one, and what a
 * new inode takes from a default ACL; the entries as the tools read them;
 * kv_xattr_set refusing a malformed ACL. The expected results are what
 * tmpfs gives for the same setfacl, chmod and create on Linux 6.18 (and
 * fs.acl compares the two mounted).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kv_int.h"
#include "testutil.h"

static void check_rule(void **state)
{
	static const struct {
		const char *text;
		int rc;
	} cases[] = {
		{"u::rw,g::r,o::r", 0},
		{"u::rwx,u:999:r,u:1000:rw,g::r,g:50:x,m::rwx,o::-", 0},
		{"u::rw,g::r,m::r,o::r", 0},        /* a mask without named entries */
		{"u::rw,u:999:r,g::r,o::r", -EINVAL}, /* named entries need a mask */
		{"u::rw,g::r", -EINVAL},            /* no other */
		{"g::r,u::rw,o::r", -EINVAL},       /* out of order */
		{"u::rw,u::rw,g::r,o::r", -EINVAL}, /* two owners */
		{"u::rw,g::r,o::r,o::r", -EINVAL},  /* two others */
		{"u::rw,g::r,g:5:r,u:6:r,m::r,o::r", -EINVAL}, /* user after group */
		{"u::rw,m::r,g::r,o::r", -EINVAL},  /* mask before the group */
		{"u::r8,g::r,o::r", -EINVAL},       /* a perm bit past rwx */
		{"u::rw,g::r,x::r,o::r", -EINVAL},  /* an unknown tag */
		{"u::rw,u:4294967295:r,g::r,m::r,o::r", -EINVAL}, /* the undefined id */
	};
	unsigned char buf[KV_ACL_SIZE_MAX + 16];
	size_t len;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		len = tu_acl_of(cases[i].text, buf);
		if (kv_acl_check(buf, len) != cases[i].rc)
			fail_msg("'%s': %d, expected %d", cases[i].text, kv_acl_check(buf, len),
				 cases[i].rc);
	}
	len = tu_acl_of("u::rw,g::r,o::r", buf);
	assert_int_equal(kv_acl_check(buf, 4), -EINVAL);       /* no entries */
	assert_int_equal(kv_acl_check(buf, 3), -EINVAL);       /* no header */
	assert_int_equal(kv_acl_check(buf, len - 1), -EINVAL); /* a torn entry */
	kv_put_le32(buf, 1);
	assert_int_equal(kv_acl_check(buf, len), -EINVAL);     /* another version */

}

/* The most entries the kernel can read back, and one more. */
static void check_size(void **state)
{
	unsigned char buf[KV_ACL_SIZE_MAX + 8], tail[32];
	size_t len = tu_acl_of("u::rw", buf), tlen = tu_acl_of("g::r,m::r,o::r", tail) - 4;

	(void)state;
	while (len + 8 + tlen <= KV_ACL_SIZE_MAX) {
		buf[len] = 0x02;
		buf[len + 1] = 0;
		buf[len + 2] = 4;
		buf[len + 3] = 0;
		kv_put_le32(buf + len + 4, (uint32_t)len);
		len += 8;
	}
	memcpy(buf + len, tail + 4, tlen);
	assert_int_equal(len + tlen, KV_ACL_SIZE_MAX);
	assert_int_equal(kv_acl_check(buf, len + tlen), 0);
	memmove(buf + len + 8, buf + len, tlen); /* one named user more */
	buf[len] = 0x02;
	kv_put_le32(buf + len + 4, 1u << 30);
	assert_int_equal(kv_acl_check(buf, len + 8 + tlen), -E2BIG);
}

static void mode_of_acl(void **state)
{
	unsigned char buf[256];
	uint32_t mode;
	size_t len;

	(void)state;
	/* setfacl -m u:999:r on a 0644 file */
	len = tu_acl_of("u::rw,u:999:r,g::r,m::r,o::r", buf);
	mode = 0100755 | 04000;
	assert_int_equal(kv_acl_mode(buf, len, &mode), 1);
	assert_int_equal(mode, 0100644 | 04000); /* type and set-ID bits kept */
	/* the group class is the mask's, not the owning group's */
	len = tu_acl_of("u::rwx,g::r,g:50:rwx,m::rwx,o::-", buf);
	mode = 0100000;
	assert_int_equal(kv_acl_mode(buf, len, &mode), 1);
	assert_int_equal(mode, 0100770);
	len = tu_acl_of("u::rw,g::r,m::rw,o::-", buf); /* a mask alone says more */
	assert_int_equal(kv_acl_mode(buf, len, &mode), 1);
	assert_int_equal(mode, 0100660);
	/* the mode says it all: not to be stored */
	len = tu_acl_of("u::rw,g::r,o::-", buf);
	assert_int_equal(kv_acl_mode(buf, len, &mode), 0);
	assert_int_equal(mode, 0100640);
	len = tu_acl_of("u::rw,g::r", buf);
	assert_int_equal(kv_acl_mode(buf, len, &mode), -EINVAL);
	assert_int_equal(mode, 0100640);
}

static void chmod_rewrites(void **state)
{
	unsigned char buf[256], want[256];
	size_t len;

	(void)state;
	/* chmod 640 after setfacl -m u:999:r (tmpfs: mask r, other -) */
	len = tu_acl_of("u::rw,u:999:r,g::r,m::r,o::r", buf);
	assert_int_equal(kv_acl_chmod(buf, len, 0100640), 0);
	assert_int_equal(tu_acl_of("u::rw,u:999:r,g::r,m::r,o::-", want), len);
	assert_memory_equal(buf, want, len);
	/* chmod 600: the mask goes to nothing, named entries stay */
	assert_int_equal(kv_acl_chmod(buf, len, 0600), 0);
	tu_acl_of("u::rw,u:999:r,g::r,m::-,o::-", want);
	assert_memory_equal(buf, want, len);
	/* without a mask the owning group's entry follows */
	len = tu_acl_of("u::rw,g::r,o::r", buf);
	assert_int_equal(kv_acl_chmod(buf, len, 0751), 0);
	tu_acl_of("u::rwx,g::rx,o::x", want);
	assert_memory_equal(buf, want, len);
	buf[0] = 3;
	assert_int_equal(kv_acl_chmod(buf, len, 0751), -EINVAL);
}

static void create_takes_default(void **state)
{
	unsigned char buf[256], want[256];
	uint32_t mode;
	size_t len;

	(void)state;
	/* setfacl -d -m u:999:rwx,g::r on a 0755 directory, then touch and
	 * mkdir in it under umask 077 (no umask applies): tmpfs gives 664 and
	 * 775 with these entries */
	len = tu_acl_of("u::rwx,u:999:rwx,g::r,m::rwx,o::rx", buf);
	mode = 0100666;
	assert_int_equal(kv_acl_create(buf, len, &mode), 1);
	assert_int_equal(mode, 0100664);
	tu_acl_of("u::rw,u:999:rwx,g::r,m::rw,o::r", want);
	assert_memory_equal(buf, want, len);

	len = tu_acl_of("u::rwx,u:999:rwx,g::r,m::rwx,o::rx", buf);
	mode = 040777 | 02000;
	assert_int_equal(kv_acl_create(buf, len, &mode), 1);
	assert_int_equal(mode, 040775 | 02000);

	/* a default the mode says all of: no access ACL to store */
	len = tu_acl_of("u::rwx,g::rx,o::-", buf);
	mode = 0100666;
	assert_int_equal(kv_acl_create(buf, len, &mode), 0);
	assert_int_equal(mode, 0100640);
	tu_acl_of("u::rw,g::r,o::-", want);
	assert_memory_equal(buf, want, len);
}

/* The entries as the tools read them: tag, perm and id, in order. */
static void entries(void **state)
{
	unsigned char buf[64];
	size_t len = tu_acl_of("u::rw,u:999:r,g::x,m::rwx,o::-", buf);
	static const struct kv_acl_entry want[] = {
		{KV_ACL_USER_OBJ, 6, KV_ACL_UNDEFINED_ID}, {KV_ACL_USER, 4, 999},
		{KV_ACL_GROUP_OBJ, 1, KV_ACL_UNDEFINED_ID}, {KV_ACL_MASK, 7, KV_ACL_UNDEFINED_ID},
		{KV_ACL_OTHER, 0, KV_ACL_UNDEFINED_ID},
	};
	struct kv_acl_entry e;
	size_t i = 0;

	(void)state;
	for (; kv_acl_entry(buf, len, i, &e) == 0; i++) {
		assert_true(i < 5);
		assert_int_equal(e.tag, want[i].tag);
		assert_int_equal(e.perm, want[i].perm);
		assert_int_equal(e.id, want[i].id);
	}
	assert_int_equal(i, 5);
	assert_int_equal(kv_acl_entry(buf, 3, 0, &e), -ENOENT);
	assert_int_equal(kv_acl_entry(buf, 4, 0, &e), -ENOENT);
}

/* kv_xattr_set stores an ACL name only with an ACL for its value. */
struct set_arg {
	const char *name;
	const void *val;
	size_t len;
};

static int set_apply(kv_txn *t, void *p)
{
	struct set_arg *a = p;

	return kv_xattr_set(t, 40, a->name, a->val, a->len, 0);
}

static void xattr_values(void **state)
{
	kv_env *e = ((struct tu_image *)*state)->env;
	unsigned char buf[256];
	struct set_arg a = {KV_ACL_ACCESS, "v", 1};
	const void *val;
	size_t len;
	kv_txn *t;

	assert_int_equal(kv_acl_name(KV_ACL_ACCESS), KV_ACL_TYPE_ACCESS);
	assert_int_equal(kv_acl_name(KV_ACL_DEFAULT), KV_ACL_TYPE_DEFAULT);
	assert_int_equal(kv_acl_name("user.posix_acl_access"), 0);
	assert_int_equal(kv_acl_type(KV_ACL_DEFAULT "x", strlen(KV_ACL_DEFAULT)),
			 KV_ACL_TYPE_DEFAULT); /* a raw key's name: no NUL */
	assert_int_equal(kv_acl_type(KV_ACL_ACCESS, strlen(KV_ACL_ACCESS) - 1), 0);
	assert_int_equal(kv_write(e, set_apply, &a, 0), -EINVAL);
	a.name = KV_ACL_DEFAULT;
	a.len = tu_acl_of("u::rw,u:5:r,g::r,o::r", buf);
	a.val = buf;
	assert_int_equal(kv_write(e, set_apply, &a, 0), -EINVAL);
	a.len = tu_acl_of("u::rw,u:5:r,g::r,m::r,o::r", buf);
	assert_int_equal(kv_write(e, set_apply, &a, 0), 0);
	assert_int_equal(kv_read_begin(e, &t), 0);
	assert_int_equal(kv_xattr_get(t, 40, KV_ACL_DEFAULT, &val, &len), 0);
	assert_int_equal(len, a.len);
	assert_memory_equal(val, buf, len);
	assert_int_equal(kv_xattr_get(t, 40, KV_ACL_ACCESS, &val, &len), -ENODATA);
	kv_read_end(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(check_rule),
		cmocka_unit_test(check_size),
		cmocka_unit_test(mode_of_acl),
		cmocka_unit_test(chmod_rewrites),
		cmocka_unit_test(create_takes_default),
		cmocka_unit_test(entries),
		cmocka_unit_test_setup_teardown(xattr_values, tu_setup, tu_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
