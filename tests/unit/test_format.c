/*
 * test_format.c - kv/codec.c, kv/hash.c and kv/err.c: superblock and inode
 * record encode/decode (byte positions from docs/FORMAT.md), the decoders'
 * refusals (newer version, bad magic, short or out-of-range records), the
 * big- and little-endian helpers of kv_int.h, the LMDB-to-errno mapping and
 * its log lines, the dirent type of a mode, the keys of every database
 * (kv_key_decode, kv_key_encode), the check of a block's value, the name
 * hash and the block checksum.
 */
#include <dirent.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "lmdb_int.h"
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
	assert_memory_equal(rec + 8, "\x02\x00\x00\x00", 4);  /* version LE */
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

/* The DT_* type of every file type, as readdir(3) reports it. */
static void dirent_types(void **state)
{
	static const struct {
		uint32_t mode;
		uint8_t dt;
	} types[] = {
	        {S_IFREG | 0644, DT_REG}, {S_IFDIR | 0755, DT_DIR},  {S_IFLNK | 0777, DT_LNK},
	        {S_IFCHR | 0600, DT_CHR}, {S_IFBLK | 0600, DT_BLK},  {S_IFIFO | 0600, DT_FIFO},
	        {S_IFSOCK | 0600, DT_SOCK}, {S_IFREG | 07777, DT_REG}, {0, DT_UNKNOWN},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
		assert_int_equal(kv_dirent_type(types[i].mode), types[i].dt);
}

/* Keys of every database taken apart and put together again, at the byte
 * positions of docs/FORMAT.md; keys of the wrong shape refused with the
 * parts they hold. */
static void key_codec(void **state)
{
	unsigned char k[KV_KEY_MAX], again[KV_KEY_MAX];
	struct kv_key key;

	(void)state;
	/* meta: any name; the superblock's is "super" */
	assert_int_equal(kv_key_decode(KV_DB_META, "super", 5, &key), 0);
	assert_true(key.super);
	assert_int_equal(key.namelen, 5);
	assert_int_equal(kv_key_encode(KV_DB_META, &(struct kv_key){.super = 1}, k), 5);
	assert_memory_equal(k, "super", 5);
	assert_int_equal(kv_key_decode(KV_DB_META, "superb", 6, &key), 0);
	assert_false(key.super);
	assert_memory_equal(key.name, "superb", 6);
	assert_int_equal(kv_key_decode(KV_DB_META, "supe", 4, &key), 0);
	assert_false(key.super);
	assert_int_equal(kv_key_encode(KV_DB_META, &key, k), 4);
	assert_memory_equal(k, "supe", 4);

	/* inode and orphan: the ino, big-endian */
	for (int i = 0; i < 2; i++) {
		enum kv_db db = i ? KV_DB_ORPHAN : KV_DB_INODE;

		assert_int_equal(kv_key_encode(db, &(struct kv_key){.ino = 0x0102030405060708ULL}, k),
				 8);
		assert_memory_equal(k, "\x01\x02\x03\x04\x05\x06\x07\x08", 8);
		assert_int_equal(kv_key_decode(db, k, 8, &key), 0);
		assert_true(key.ino == 0x0102030405060708ULL);
		assert_true(key.idx == 0 && key.hash == 0 && key.name == NULL);
		assert_int_equal(kv_key_decode(db, k, 9, &key), -EIO);
		assert_true(key.ino == 0x0102030405060708ULL); /* still told */
		assert_int_equal(kv_key_decode(db, k, 7, &key), -EIO);
		assert_true(key.ino == 0);
	}

	/* dirent: directory, then the name hash */
	memset(k, 0, sizeof(k));
	assert_int_equal(kv_key_encode(KV_DB_DIRENT,
				       &(struct kv_key){.ino = 5, .hash = kv_dirent_hash("a", 1)}, k),
			 16);
	assert_int_equal(k[7], 5);
	assert_int_equal(kv_key_decode(KV_DB_DIRENT, k, 16, &key), 0);
	assert_true(key.ino == 5 && key.hash == kv_dirent_hash("a", 1) && key.idx == 0);
	assert_true(key.hash == kv_get_be64(k + 8));
	assert_int_equal(kv_key_decode(KV_DB_DIRENT, k, 15, &key), -EIO);
	assert_true(key.ino == 5);
	assert_int_equal(kv_key_decode(KV_DB_DIRENT, k, 17, &key), -EIO);

	/* data: ino, then the block index */
	assert_int_equal(kv_key_encode(KV_DB_DATA, &(struct kv_key){.ino = 9, .idx = 258}, k), 16);
	assert_memory_equal(k, "\0\0\0\0\0\0\0\x09\0\0\0\0\0\0\x01\x02", 16);
	assert_int_equal(kv_key_decode(KV_DB_DATA, k, 16, &key), 0);
	assert_true(key.ino == 9 && key.idx == 258 && key.hash == 0);
	assert_int_equal(kv_key_decode(KV_DB_DATA, k, 11, &key), -EIO);
	assert_true(key.ino == 9 && key.idx == 0);

	/* xattr: ino, then the whole name */
	assert_int_equal(kv_key_encode(KV_DB_XATTR,
				       &(struct kv_key){.ino = 9, .name = "user.x", .namelen = 6}, k),
			 14);
	assert_memory_equal(k + 7, "\x09user.x", 7);
	assert_int_equal(kv_key_decode(KV_DB_XATTR, k, 14, &key), 0);
	assert_true(key.ino == 9);
	assert_int_equal(key.namelen, 6);
	assert_ptr_equal(key.name, (const char *)k + 8); /* into the key */
	assert_int_equal(kv_key_encode(KV_DB_XATTR, &key, again), 14);
	assert_memory_equal(again, k, 14);
	assert_int_equal(kv_key_decode(KV_DB_XATTR, k, 8, &key), -EIO); /* no name */
	assert_true(key.ino == 9);
	assert_int_equal(key.namelen, 0);

	assert_int_equal(kv_key_decode(KV_NDB, k, 8, &key), -EINVAL);

	/* the prefix of an inode's keys sorts before each of them */
	assert_int_equal(kv_key_prefix(9, again), 8);
	assert_memory_equal(again, k, 8);
}

/* A data block's value: bytes, then their checksum seeded by the key. On a
 * refusal the length still says what the value holds (dump prints it). */
static void block_values(void **state)
{
	kv_env e = {.super.block_size = 1024};
	unsigned char val[1024 + 8 + 1];
	size_t len = 12345;

	(void)state;
	tu_fill(val, 100, 5);
	kv_put_le64(val + 100, kv_block_csum(7, 3, val, 100));
	assert_int_equal(kv_check_block(&e, 7, 3, val, 108, &len), 0);
	assert_int_equal(len, 100);
	assert_int_equal(kv_check_block(&e, 7, 4, val, 108, &len), -EIO); /* another place */
	assert_int_equal(len, 100);
	val[0] ^= 1;
	assert_int_equal(kv_check_block(&e, 7, 3, val, 108, &len), -EIO);
	assert_int_equal(len, 100);
	len = 12345;
	assert_int_equal(kv_check_block(&e, 7, 3, val, 8, &len), -EIO); /* no data */
	assert_int_equal(len, 0);
	len = 12345;
	assert_int_equal(kv_check_block(&e, 7, 3, val, 3, &len), -EIO);
	assert_int_equal(len, 0);
	tu_fill(val, 1024, 6);
	kv_put_le64(val + 1024, kv_block_csum(7, 3, val, 1024));
	assert_int_equal(kv_check_block(&e, 7, 3, val, 1032, &len), 0);
	assert_int_equal(len, 1024);
	len = 12345;
	assert_int_equal(kv_check_block(&e, 7, 3, val, 1033, &len), -EIO); /* over the size */
	assert_int_equal(len, 1025);
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
	        cmocka_unit_test(dirent_types),     cmocka_unit_test(key_codec),
	        cmocka_unit_test(block_values),
	        cmocka_unit_test(name_hash_and_checksum),
	};

	return cmocka_run_group_tests_name("format", tests, NULL, NULL);
}
