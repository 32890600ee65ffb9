/*
 * test_fs_copy.c - fs_do_copy_range, the core of copy_file_range(2), on an
 * image without a mount: the bytes at unaligned offsets and across several
 * ops (more than one COPY_CHUNK), a source's holes as zeros, the short
 * count at the source's end, the destination growing and keeping what lies
 * outside the range, set-ID bits taken as a write by that caller would, and
 * the errnos. fs.posix and the difftest hold the
 * mounted op to tmpfs's results.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fsfix.h"
#include "kv_int.h"
#include "testutil.h"

#define ROOT KV_ROOT_INO
#define BIG (3 * 1024 * 1024 + 17)

static const struct fs_cred root = {0};

static uint64_t file(const char *name)
{
	const struct fs_cred c = {0};
	struct stat st;

	assert_int_equal(fs_do_create(ROOT, name, 0644, &c, &st), 0);
	fs_do_forget(st.st_ino, 1);
	return st.st_ino;
}

static uint64_t size_of(uint64_t ino)
{
	struct stat st;

	assert_int_equal(fs_do_getattr(ino, 0, &st), 0);
	return (uint64_t)st.st_size;
}

static void copies_bytes(void **state)
{
	unsigned char *src = malloc(BIG), *got = malloc(BIG + 8192), *old = malloc(8192);
	uint64_t a = file("a"), b = file("b");
	size_t n;

	(void)state;
	tu_fill(src, BIG, 1);
	tu_fill(old, 8192, 2);
	assert_int_equal(tu_pwrite(fs.env, a, 0, src, BIG), 0);
	assert_int_equal(tu_pwrite(fs.env, b, 0, old, 8192), 0);
	/* unaligned on both sides, over three ops, past b's end */
	assert_int_equal(fs_do_copy_range(a, 4071, b, 5, BIG - 4071 - 10, &root, &n), 0);
	assert_int_equal(n, BIG - 4071 - 10);
	assert_int_equal(size_of(b), 5 + n);
	assert_int_equal(tu_pread(fs.env, b, 0, 5 + n, got), 5 + n);
	assert_memory_equal(got, old, 5); /* before the range: kept */
	assert_memory_equal(got + 5, src + 4071, n);
	/* into the middle of a file: what lies beyond the range is kept */
	assert_int_equal(fs_do_copy_range(a, 0, b, 100, 1000, &root, &n), 0);
	assert_int_equal(n, 1000);
	assert_int_equal(tu_pread(fs.env, b, 0, 2000, got), 2000);
	assert_memory_equal(got + 100, src, 1000);
	assert_memory_equal(got + 1100, src + 4071 + 1095, 900);
	/* past the source's end: the short count; at its end: 0 */
	assert_int_equal(fs_do_copy_range(a, BIG - 7, b, 0, 4096, &root, &n), 0);
	assert_int_equal(n, 7);
	assert_int_equal(fs_do_copy_range(a, BIG, b, 0, 4096, &root, &n), 0);
	assert_int_equal(n, 0);
	assert_int_equal(fs_do_copy_range(a, BIG + 5000, b, 0, 4096, &root, &n), 0);
	assert_int_equal(n, 0);
	free(src);
	free(got);
	free(old);
}

static void holes_become_zeros(void **state)
{
	unsigned char data[100], got[300000];
	uint64_t a = file("a"), b = file("b");
	size_t n;

	(void)state;
	tu_fill(data, sizeof(data), 3);
	assert_int_equal(tu_pwrite(fs.env, a, 0, data, sizeof(data)), 0);
	assert_int_equal(tu_pwrite(fs.env, a, 200000, data, sizeof(data)), 0);
	tu_fill(got, sizeof(got), 4);
	assert_int_equal(tu_pwrite(fs.env, b, 0, got, sizeof(got)), 0);
	assert_int_equal(fs_do_copy_range(a, 0, b, 0, 200100, &root, &n), 0);
	assert_int_equal(n, 200100);
	assert_int_equal(tu_pread(fs.env, b, 0, 200100, got), 200100);
	assert_memory_equal(got, data, 100);
	for (size_t i = 100; i < 200000; i++)
		if (got[i])
			fail_msg("byte %zu of the hole copied: %u", i, got[i]);
	assert_memory_equal(got + 200000, data, 100);
	assert_int_equal(size_of(b), sizeof(got)); /* it did not grow */
}

static void refused(void **state)
{
	const struct fs_cred c = {0};
	uint64_t a = file("a");
	struct stat d, l;
	size_t n;

	(void)state;
	assert_int_equal(fs_do_mkdir(ROOT, "d", 0755, &c, &d), 0);
	assert_int_equal(fs_do_symlink("a", ROOT, "l", &c, &l), 0);
	assert_int_equal(fs_do_copy_range(d.st_ino, 0, a, 0, 10, &root, &n), -EISDIR);
	assert_int_equal(fs_do_copy_range(a, 0, d.st_ino, 0, 10, &root, &n), -EISDIR);
	assert_int_equal(fs_do_copy_range(l.st_ino, 0, a, 0, 10, &root, &n), -EINVAL);
	assert_int_equal(fs_do_copy_range(a, 0, a, (uint64_t)INT64_MAX, 10, &root, &n), -EINVAL);
	assert_int_equal(fs_do_copy_range(a, 0, 999999, 0, 10, &root, &n), -ENOENT);
	assert_int_equal(n, 0);
	fs_do_forget(d.st_ino, 1);
	fs_do_forget(l.st_ino, 1);
}

static uint32_t mode_of(uint64_t ino)
{
	struct stat st;

	assert_int_equal(fs_do_getattr(ino, 0, &st), 0);
	return st.st_mode & 07777;
}

static void chmod_to(uint64_t ino, uint32_t mode)
{
	struct stat want = {.st_mode = mode}, st;

	assert_int_equal(fs_do_setattr(ino, &want, FUSE_SET_ATTR_MODE, 0, &st), 0);
}

/* As on ext4: root keeps set-ID bits, another caller takes set-user-ID, and
 * set-group-ID where the group executes or the caller is outside it. */
static void takes_set_id_bits(void **state)
{
	const gid_t in_group[] = {0};
	const struct fs_cred user = {.uid = 1000, .gid = 1000};
	const struct fs_cred member = {.uid = 1000, .gid = 1000, .ngroups = 1,
				       .groups = in_group};
	uint64_t a = file("a"), b = file("b");
	size_t n;

	(void)state;
	assert_int_equal(tu_pwrite(fs.env, a, 0, "data", 4), 0);
	chmod_to(b, 06755);
	assert_int_equal(fs_do_copy_range(a, 0, b, 0, 4, &root, &n), 0);
	assert_int_equal(mode_of(b), 06755);
	assert_int_equal(fs_do_copy_range(a, 0, b, 0, 4, &user, &n), 0);
	assert_int_equal(mode_of(b), 0755);
	/* without group execute: kept by a member of the file's group (0) */
	chmod_to(b, 02644);
	assert_int_equal(fs_do_copy_range(a, 0, b, 0, 4, &member, &n), 0);
	assert_int_equal(mode_of(b), 02644);
	assert_int_equal(fs_do_copy_range(a, 0, b, 0, 4, &user, &n), 0);
	assert_int_equal(mode_of(b), 0644);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(copies_bytes, fsfix_setup, fsfix_teardown),
		cmocka_unit_test_setup_teardown(holes_become_zeros, fsfix_setup, fsfix_teardown),
		cmocka_unit_test_setup_teardown(refused, fsfix_setup, fsfix_teardown),
		cmocka_unit_test_setup_teardown(takes_set_id_bits, fsfix_setup, fsfix_teardown),
	};

	if (fs_itable_init())
		return 1;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
