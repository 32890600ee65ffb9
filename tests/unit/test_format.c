/*
 * test_format.c - kv/codec.c, kv/hash.c and kv/err.c: superblock and inode
 * record encode/decode (byte positions from docs/FORMAT.md), the decoders'
 * refusals (newer version, bad magic, short or out-of-range records), the
 * big- and little-endian helpers of kv_int.h, the LMDB-to-errno mapping,
 * the name hash and the block checksum.
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

static struct kv_super sample_super(void)
{
	struct kv_super s = {
	        .version = KV_FORMAT_VERSION,
	        .block_size = 8168,
	        .feature_compat = 0x0102030405060708ULL,
	        .feature_ro_compat = 0x1112131415161718ULL,
	        .feature_incompat = 0x2122232425262728ULL,
	        .next_ino = 0x123456789aULL,
	        .created_ns = -5, /* before the epoch: the sign survives */
	};

	for (int i = 0; i < 16; i++)
		s.uuid[i] = (uint8_t)(0xa0 + i);
	/* the longest label: no NUL inside the record */
	memset(s.label, 'L', KV_LABEL_MAX);
	s.label[0] = 'x';
	s.label[KV_LABEL_MAX] = '\0';
	return s;
}

static void super_round_trip(void **state)
{
	struct kv_super s = sample_super(), d;
	unsigned char rec[KV_SUPER_LEN];

	(void)state;
	kv_super_encode(&s, rec);
	assert_memory_equal(rec, "KVFSIMG\0", 8);
	assert_memory_equal(rec + 8, "\x01\x00\x00\x00", 4);  /* version LE */
	assert_memory_equal(rec + 12, "\xe8\x1f\x00\x00", 4); /* 8168 LE */
	assert_memory_equal(rec + 16, "\x08\x07\x06\x05\x04\x03\x02\x01", 8);
	assert_int_equal(rec[40], 0xa0);
	assert_int_equal(rec[55], 0xaf);
	assert_memory_equal(rec + 56, "\x9a\x78\x56\x34\x12\x00\x00\x00", 8);
	assert_memory_equal(rec + 64, "\xfb\xff\xff\xff\xff\xff\xff\xff", 8);
	assert_int_equal(rec[72], 'x');
	assert_int_equal(rec[72 + KV_LABEL_MAX - 1], 'L');

	assert_int_equal(kv_super_decode(rec, sizeof(rec), &d), 0);
	assert_int_equal(d.version, s.version);
	assert_int_equal(d.block_size, s.block_size);
	assert_true(d.feature_compat == s.feature_compat);
	assert_true(d.feature_ro_compat == s.feature_ro_compat);
	assert_true(d.feature_incompat == s.feature_incompat);
	assert_memory_equal(d.uuid, s.uuid, 16);
	assert_true(d.next_ino == s.next_ino);
	assert_true(d.created_ns == -5);
	assert_string_equal(d.label, s.label);
}

static void super_short_label(void **state)
{
	struct kv_super s = sample_super(), d;
	unsigned char rec[KV_SUPER_LEN];

	(void)state;
	memset(s.label, 0, sizeof(s.label));
	strcpy(s.label, "data");
	kv_super_encode(&s, rec);
	for (int i = 72 + 4; i < KV_SUPER_LEN; i++)
		assert_int_equal(rec[i], 0); /* the rest of the record is zero */
	assert_int_equal(kv_super_decode(rec, sizeof(rec), &d), 0);
	assert_string_equal(d.label, "data");
}

static void super_refusals(void **state)
{
	struct kv_super s = sample_super(), d;
	unsigned char rec[KV_SUPER_LEN], bad[KV_SUPER_LEN];

	(void)state;
	kv_super_encode(&s, rec);

	memcpy(bad, rec, sizeof(bad));
	kv_put_le32(bad + 8, KV_FORMAT_VERSION + 1);
	assert_int_equal(kv_super_decode(bad, sizeof(bad), &d), -EPROTONOSUPPORT);
	assert_int_equal(d.version, KV_FORMAT_VERSION + 1); /* for the message */
	/* a newer version may have a longer or shorter record */
	assert_int_equal(kv_super_decode(bad, 12, &d), -EPROTONOSUPPORT);

	memcpy(bad, rec, sizeof(bad));
	bad[3] ^= 0x20;
	assert_int_equal(kv_super_decode(bad, sizeof(bad), &d), -EINVAL);
	assert_int_equal(kv_super_decode(rec, 7, &d), -EINVAL);
	assert_int_equal(kv_super_decode(rec, 0, &d), -EINVAL);

	assert_int_equal(kv_super_decode(rec, KV_SUPER_LEN - 1, &d), -EIO);
	assert_int_equal(kv_super_decode(rec, 12, &d), -EIO);

	memcpy(bad, rec, sizeof(bad));
	kv_put_le32(bad + 8, 0);
	assert_int_equal(kv_super_decode(bad, sizeof(bad), &d), -EIO);

	memcpy(bad, rec, sizeof(bad));
	kv_put_le32(bad + 12, KV_BLOCK_SIZE_MIN - 1);
	assert_int_equal(kv_super_decode(bad, sizeof(bad), &d), -EIO);
	kv_put_le32(bad + 12, KV_BLOCK_SIZE_MAX + 1);
	assert_int_equal(kv_super_decode(bad, sizeof(bad), &d), -EIO);

	memcpy(bad, rec, sizeof(bad));
	kv_put_le64(bad + 56, KV_ROOT_INO);
	assert_int_equal(kv_super_decode(bad, sizeof(bad), &d), -EIO);
}

static struct kv_inode sample_inode(void)
{
	return (struct kv_inode){
	        .ino = 77,
	        .mode = 0100644,
	        .uid = 1000,
	        .gid = 0xfffffffe,
	        .nlink = 3,
	        .size = 0x1122334455667788ULL,
	        .rdev = 0x0803,
	        .flags = 0,
	        .nblocks = 12345,
	        .atime_ns = 1700000000123456789LL,
	        .mtime_ns = -1,
	        .ctime_ns = 42,
	        .btime_ns = INT64_MIN,
	        .parent = 9,
	};
}

static void inode_round_trip(void **state)
{
	struct kv_inode in = sample_inode(), out;
	unsigned char rec[KV_INODE_LEN + 5];

	(void)state;
	kv_inode_encode(&in, rec);
	memcpy(rec + KV_INODE_LEN, "/tmp/", 5);
	assert_memory_equal(rec, "\xa4\x81\x00\x00", 4); /* 0100644 LE */
	assert_memory_equal(rec + 16, "\x88\x77\x66\x55\x44\x33\x22\x11", 8);
	assert_memory_equal(rec + 80, "\x09\0\0\0\0\0\0\0", 8);

	memset(&out, 0xff, sizeof(out));
	assert_int_equal(kv_inode_decode(77, rec, sizeof(rec), &out), 0);
	assert_true(out.ino == 77);
	assert_int_equal(out.mode, in.mode);
	assert_int_equal(out.uid, in.uid);
	assert_int_equal(out.gid, in.gid);
	assert_int_equal(out.nlink, in.nlink);
	assert_true(out.size == in.size);
	assert_true(out.rdev == in.rdev);
	assert_true(out.flags == 0);
	assert_true(out.nblocks == in.nblocks);
	assert_true(out.atime_ns == in.atime_ns);
	assert_true(out.mtime_ns == -1);
	assert_true(out.ctime_ns == 42);
	assert_true(out.btime_ns == INT64_MIN);
	assert_true(out.parent == 9);
	assert_int_equal(out.inline_len, 5);
	assert_ptr_equal(out.inline_data, rec + KV_INODE_LEN);

	assert_int_equal(kv_inode_decode(77, rec, KV_INODE_LEN, &out), 0);
	assert_int_equal(out.inline_len, 0);
	assert_null(out.inline_data);
}

static void inode_refusals(void **state)
{
	static unsigned char rec[KV_INODE_LEN + KV_SYMLINK_MAX + 1];
	struct kv_inode in = sample_inode(), out;

	(void)state;
	kv_inode_encode(&in, rec);
	assert_int_equal(kv_inode_decode(77, rec, KV_INODE_LEN - 1, &out), -EIO);
	assert_int_equal(kv_inode_decode(77, rec, 0, &out), -EIO);
	assert_int_equal(kv_inode_decode(77, rec, sizeof(rec), &out), -EIO);
	assert_int_equal(kv_inode_decode(77, rec, sizeof(rec) - 1, &out), 0);
	assert_int_equal(out.inline_len, KV_SYMLINK_MAX);
}

static void endian_helpers(void **state)
{
	unsigned char b[8], a8[8], b8[8];
	uint64_t s = 12345;

	(void)state;
	kv_put_be64(b, 0x0102030405060708ULL);
	assert_memory_equal(b, "\x01\x02\x03\x04\x05\x06\x07\x08", 8);
	assert_true(kv_get_be64(b) == 0x0102030405060708ULL);
	kv_put_le64(b, 0x0102030405060708ULL);
	assert_memory_equal(b, "\x08\x07\x06\x05\x04\x03\x02\x01", 8);
	assert_true(kv_get_le64(b) == 0x0102030405060708ULL);
	kv_put_le32(b, 0xdeadbeef);
	assert_memory_equal(b, "\xef\xbe\xad\xde", 4);
	assert_true(kv_get_le32(b) == 0xdeadbeef);
	kv_put_be64(b, UINT64_MAX);
	assert_true(kv_get_be64(b) == UINT64_MAX);

	/* big-endian keys sort as their numbers: what the cursors rely on */
	for (int i = 0; i < 10000; i++) {
		uint64_t x = tu_rand(&s) >> (tu_rand(&s) % 64);
		uint64_t y = tu_rand(&s) >> (tu_rand(&s) % 64);
		int c;

		kv_put_be64(a8, x);
		kv_put_be64(b8, y);
		c = memcmp(a8, b8, 8);
		assert_true(x < y ? c < 0 : x > y ? c > 0 : c == 0);
		assert_true(kv_get_be64(a8) == x);
		kv_put_le64(a8, x);
		assert_true(kv_get_le64(a8) == x);
	}
}

static void error_mapping(void **state)
{
	kv_txn t = {0};

	(void)state;
	assert_int_equal(kv_err(&t, 0, "t"), 0);
	assert_int_equal(kv_err(&t, MDB_NOTFOUND, "t"), -ENOENT);
	assert_int_equal(kv_err(&t, MDB_KEYEXIST, "t"), -EEXIST);
	assert_int_equal(t.map_full, 0);
	assert_int_equal(kv_err(&t, MDB_MAP_FULL, "t"), -ENOSPC);
	assert_int_equal(t.map_full, 1);
	assert_int_equal(t.txn_full, 0);
	assert_int_equal(kv_err(&t, MDB_TXN_FULL, "t"), -ENOSPC);
	assert_int_equal(t.txn_full, 1);
	assert_int_equal(kv_err(NULL, MDB_MAP_FULL, "t"), -ENOSPC);
	assert_int_equal(kv_err(NULL, MDB_READERS_FULL, "t"), -EAGAIN);
	assert_int_equal(kv_err(NULL, MDB_CORRUPTED, "t"), -EIO);
	assert_int_equal(kv_err(NULL, MDB_PAGE_NOTFOUND, "t"), -EIO);
	assert_int_equal(kv_err(NULL, ENOMEM, "t"), -ENOMEM);
	assert_int_equal(kv_err(NULL, ENOSPC, "t"), -ENOSPC);
	assert_int_equal(kv_err(NULL, EACCES, "t"), -EACCES);
	assert_int_equal(kv_err(NULL, EINVAL, "t"), -EIO);
	/* what kv_open says of a file LMDB refuses: the one mapping holds it */
	assert_int_equal(kv_err(NULL, MDB_INVALID, "t"), -EINVAL);
	assert_int_equal(kv_err(NULL, MDB_VERSION_MISMATCH, "t"), -EPROTONOSUPPORT);
}

static char logged[4][256];
static int nlogged;

static void log_to_array(const char *line)
{
	if (nlogged < 4)
		snprintf(logged[nlogged], sizeof(logged[0]), "%s", line);
	nlogged++;
}

/* kv_err logs what the errno hides, once, as "what: reason"; a caller that
 * reports the failure itself (what NULL: kv_open, kv_mkfs, kv_backup put it
 * in their message) gets no log line. */
static void error_logging(void **state)
{
	(void)state;
	nlogged = 0;
	kv_set_log(log_to_array);
	assert_int_equal(kv_err(NULL, MDB_NOTFOUND, "get"), -ENOENT);
	assert_int_equal(kv_err(NULL, MDB_MAP_FULL, "put"), -ENOSPC);
	assert_int_equal(nlogged, 0); /* the errno says it all */
	assert_int_equal(kv_err(NULL, MDB_CORRUPTED, "get inode"), -EIO);
	assert_int_equal(nlogged, 1);
	assert_string_equal(logged[0], "get inode: MDB_CORRUPTED: Located page was wrong type");
	assert_int_equal(kv_err(NULL, MDB_READERS_FULL, "begin read"), -EAGAIN);
	assert_int_equal(nlogged, 2);
	assert_string_equal(logged[1], "begin read: reader table full");
	assert_int_equal(kv_err(NULL, MDB_CORRUPTED, NULL), -EIO);
	assert_int_equal(kv_err(NULL, MDB_READERS_FULL, NULL), -EAGAIN);
	assert_int_equal(nlogged, 2);
	kv_set_log(NULL);
}

static void name_hash_and_checksum(void **state)
{
	unsigned char blk[100];
	uint64_t h;

	(void)state;
	assert_ptr_equal(kv_name_hash, kv_name_hash_xxh3);
	h = kv_name_hash("hello", 5);
	assert_true(h == kv_name_hash("hello", 5));
	assert_true(h < (1ULL << KV_HASH_BITS));
	assert_true(h != kv_name_hash("hellp", 5));
	assert_true(h != kv_name_hash("hello", 4));

	tu_fill(blk, sizeof(blk), 3);
	h = kv_block_csum(5, 0, blk, sizeof(blk));
	assert_true(h == kv_block_csum(5, 0, blk, sizeof(blk)));
	/* seeded by the key: the same bytes elsewhere do not match */
	assert_true(h != kv_block_csum(5, 1, blk, sizeof(blk)));
	assert_true(h != kv_block_csum(6, 0, blk, sizeof(blk)));
	assert_true(h != kv_block_csum(5, 0, blk, sizeof(blk) - 1));
	blk[50] ^= 1;
	assert_true(h != kv_block_csum(5, 0, blk, sizeof(blk)));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(super_round_trip), cmocka_unit_test(super_short_label),
	        cmocka_unit_test(super_refusals),   cmocka_unit_test(inode_round_trip),
	        cmocka_unit_test(inode_refusals),   cmocka_unit_test(endian_helpers),
	        cmocka_unit_test(error_mapping),    cmocka_unit_test(error_logging),
	        cmocka_unit_test(name_hash_and_checksum),
	};

	return cmocka_run_group_tests_name("format", tests, NULL, NULL);
}
