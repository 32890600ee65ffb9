/*
 * fsck_break.c - break a closed kvfs image on purpose through raw LMDB (for
 * the fsck tests), and look at one afterwards.
 *
 *   fsck_break IMAGE CMD ARGS...
 *
 * A target T is a path from the root ("/dir/file", resolved through the
 * dirent lists) or "#INO". Commands that change the image:
 *   set T FIELD VALUE      inode field: mode nlink size nblocks parent flags
 *                          (VALUE in C syntax: 0x.., 0..)
 *   inline T TEXT          replace the inline data
 *   trunc T LEN            cut the inode record to LEN bytes
 *   del-inode T            remove the inode record only
 *   unname DIR NAME        remove an entry (its list rewritten or deleted)
 *   add-entry DIR NAME INO TYPE [HASH]   add an entry (under HASH if given:
 *                          a misfiled one)
 *   entry DIR NAME FIELD VALUE           set an entry's ino, type or slot
 *   dup-entry DIR NAME     append a copy of the entry to its list
 *   cut-list DIR NAME      cut the list holding NAME short by 3 bytes
 *   block T IDX LEN        store a block of LEN bytes with a valid checksum
 *   block-raw T IDX LEN    store LEN raw bytes as a block (no valid checksum)
 *   flip T IDX             flip a bit of a block's data
 *   zcut T IDX             cut a compressed block's frame 3 bytes short and
 *                          checksum it anew (kv_block_zcsum): it verifies,
 *                          but does not decompress
 *   xattr T NAME LEN       store an xattr of LEN bytes (NAME may hold \xHH)
 *   acl T NAME TEXT        store an xattr whose value is the ACL in short
 *                          text ("u::rw,u:5:r,g::r,m::r,o::-", tu_acl_of)
 *   orphan T               add T to the orphan list
 *   counter N              set the superblock's next inode number
 *   version N              set the superblock's format version
 *   incompat N             set the superblock's incompatible features
 *   put DB HEXKEY [HEXVAL] store a raw record
 *   drop-db DB             delete a whole database (as version 1 lacked one)
 * Shared blocks (T borrows COUNT blocks from FIRST on, of HOME from HFIRST):
 *   extent T FIRST HOME HFIRST COUNT     store an extent record alone
 *   lend T FIRST HOME HFIRST COUNT       store a lend record alone
 *   del-extent T FIRST     remove the extent record of T at FIRST
 *   del-lend T FIRST       remove the lend record of that extent
 *   del-block T IDX        remove a data record
 * Commands that look:
 *   hash NAME              print the dirent hash of NAME
 *   ino T                  print the ino
 *   stat T                 print "mode nlink size nblocks parent" (mode octal)
 *   ls T                   print the names of a directory, one per line
 *   cat T                  print a file's bytes (through the kv API)
 *   extents T              print T's extents: "first home hfirst count" 
 * Exit 0, or 1 with a message.
 */
#include <errno.h>
#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lmdb_int.h"
#include "testutil.h"

static MDB_env *env;
static MDB_txn *txn;
static MDB_dbi dbi[KV_NDB];

static void die(const char *fmt, const char *arg)
{
	fprintf(stderr, "fsck_break: ");
	fprintf(stderr, fmt, arg);
	fputc('\n', stderr);
	exit(1);
}

static void check(int rc, const char *what)
{
	if (rc)
		die("%s failed", what);
}

static uint64_t num(const char *s)
{
	char *end;
	unsigned long long v = strtoull(s, &end, 0);

	if (*end)
		die("bad number '%s'", s);
	return v;
}

static size_t unhex(const char *s, unsigned char *out, size_t max)
{
	size_t n = 0;

	for (; s[0] && s[1] && n < max; s += 2) {
		unsigned v;
		if (sscanf(s, "%2x", &v) != 1)
			die("bad hex '%s'", s);
		out[n++] = (unsigned char)v;
	}
	return n;
}

/* A name with \xHH escapes decoded. */
static size_t unescape(const char *s, char *out, size_t max)
{
	size_t n = 0;
	unsigned v;

	while (*s && n < max) {
		if (s[0] == '\\' && s[1] == 'x' && sscanf(s + 2, "%2x", &v) == 1) {
			out[n++] = (char)v;
			s += 4;
		} else {
			out[n++] = *s++;
		}
	}
	return n;
}

static int get(enum kv_db db, const void *key, size_t klen, MDB_val *v)
{
	MDB_val k = {klen, (void *)key};
	return mdb_get(txn, dbi[db], &k, v);
}

static void put(enum kv_db db, const void *key, size_t klen, const void *val, size_t vlen)
{
	MDB_val k = {klen, (void *)key}, v = {vlen, (void *)val};
	check(mdb_put(txn, dbi[db], &k, &v, 0), "put");
}

static void del(enum kv_db db, const void *key, size_t klen)
{
	MDB_val k = {klen, (void *)key};
	check(mdb_del(txn, dbi[db], &k, NULL), "delete");
}

/* The entry named name in dir: its list's key and the entry's offset. */
static int find_entry(uint64_t dir, const char *name, size_t len, unsigned char key[16],
		      MDB_val *v, size_t *at)
{
	size_t off = 0;
	struct kv_dirent de;

	kv_put_be64(key, dir);
	kv_put_be64(key + 8, kv_name_hash_xxh3(name, len));
	if (get(KV_DB_DIRENT, key, 16, v))
		return -ENOENT;
	for (;;) {
		*at = off;
		if (kv_decode_dirent(v->mv_data, v->mv_size, &off, &de, NULL) != 0)
			return -ENOENT;
		if (de.namelen == len && memcmp(de.name, name, len) == 0)
			return 0;
	}
}

static uint64_t resolve(const char *path)
{
	uint64_t ino = KV_ROOT_INO;
	char buf[4096], *save, *c;

	if (path[0] == '#')
		return num(path + 1);
	snprintf(buf, sizeof(buf), "%s", path);
	for (c = strtok_r(buf, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
		unsigned char key[16];
		MDB_val v;
		size_t at;
		if (find_entry(ino, c, strlen(c), key, &v, &at))
			die("no such path '%s'", path);
		ino = kv_get_le64((unsigned char *)v.mv_data + at + 3);
	}
	return ino;
}

static void inode_rec(uint64_t ino, unsigned char *kb, MDB_val *v)
{
	kv_put_be64(kb, ino);
	if (get(KV_DB_INODE, kb, 8, v))
		die("no inode record for '%s'", "target");
}

static void cmd_set(uint64_t ino, const char *field, uint64_t val)
{
	static const struct { const char *name; int off, size; } fields[] = {
		{"mode", 0, 4}, {"nlink", 12, 4}, {"size", 16, 8}, {"flags", 32, 8},
		{"nblocks", 40, 8}, {"parent", 80, 8},
	};
	unsigned char kb[8], rec[KV_INODE_LEN + KV_SYMLINK_MAX];
	MDB_val v;

	inode_rec(ino, kb, &v);
	memcpy(rec, v.mv_data, v.mv_size);
	for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
		if (strcmp(field, fields[i].name))
			continue;
		if (fields[i].size == 4)
			kv_put_le32(rec + fields[i].off, (uint32_t)val);
		else
			kv_put_le64(rec + fields[i].off, val);
		put(KV_DB_INODE, kb, 8, rec, v.mv_size);
		return;
	}
	die("unknown field '%s'", field);
}

static void cmd_inline(uint64_t ino, const char *text, long trunc)
{
	unsigned char kb[8], rec[KV_INODE_LEN + KV_SYMLINK_MAX];
	size_t len;
	MDB_val v;

	inode_rec(ino, kb, &v);
	memcpy(rec, v.mv_data, KV_INODE_LEN);
	if (trunc >= 0) {
		memcpy(rec, v.mv_data, v.mv_size);
		len = (size_t)trunc < v.mv_size ? (size_t)trunc : v.mv_size;
	} else {
		memcpy(rec + KV_INODE_LEN, text, strlen(text));
		len = KV_INODE_LEN + strlen(text);
	}
	put(KV_DB_INODE, kb, 8, rec, len);
}

/* Rewrite the list of (dir, name) with the entry changed by fn. */
static void edit_entry(uint64_t dir, const char *name, const char *field, uint64_t val, int op)
{
	unsigned char key[16], buf[65536];
	size_t at, len = strlen(name), n;
	MDB_val v;

	if (find_entry(dir, name, len, key, &v, &at))
		die("no entry '%s'", name);
	n = v.mv_size;
	memcpy(buf, v.mv_data, n);
	if (op == 'u') { /* unname */
		size_t elen = KV_DIRENT_HDR + len;
		memmove(buf + at, buf + at + elen, n - at - elen);
		n -= elen;
		if (n == 0) {
			del(KV_DB_DIRENT, key, 16);
			return;
		}
	} else if (op == 'd') { /* duplicate, next slot */
		memcpy(buf + n, buf + at, KV_DIRENT_HDR + len);
		buf[n] = (uint8_t)(buf[n] + 1);
		n += KV_DIRENT_HDR + len;
	} else if (op == 'c') { /* cut short */
		n -= 3;
	} else if (!strcmp(field, "ino")) {
		kv_put_le64(buf + at + 3, val);
	} else if (!strcmp(field, "type")) {
		buf[at + 1] = (uint8_t)val;
	} else if (!strcmp(field, "slot")) {
		buf[at] = (uint8_t)val;
	} else {
		die("unknown entry field '%s'", field);
	}
	put(KV_DB_DIRENT, key, 16, buf, n);
}

static void cmd_add_entry(uint64_t dir, const char *name, uint64_t ino, uint8_t type,
			  const char *hash)
{
	unsigned char key[16], buf[65536];
	struct kv_dirent de = {.ino = ino, .type = type, .namelen = (uint8_t)strlen(name),
			       .name = name};
	size_t n = 0, off = 0;
	uint8_t slot = 0, s;
	struct kv_dirent e;
	MDB_val v;

	kv_put_be64(key, dir);
	kv_put_be64(key + 8, hash ? num(hash) : kv_name_hash_xxh3(name, strlen(name)));
	if (get(KV_DB_DIRENT, key, 16, &v) == 0) {
		memcpy(buf, v.mv_data, v.mv_size);
		n = v.mv_size;
		while (kv_decode_dirent(buf, n, &off, &e, &s) == 0)
			slot = (uint8_t)(s + 1);
	}
	n += kv_encode_dirent(buf + n, slot, &de);
	put(KV_DB_DIRENT, key, 16, buf, n);
}

static void cmd_block(uint64_t ino, uint64_t idx, size_t len, int valid, int flip)
{
	unsigned char key[16], buf[KV_BLOCK_SIZE_MAX + KV_CSUM_LEN];
	MDB_val v;

	kv_put_be64(key, ino);
	kv_put_be64(key + 8, idx);
	if (flip) {
		if (get(KV_DB_DATA, key, 16, &v))
			die("no such block of '%s'", "target");
		memcpy(buf, v.mv_data, v.mv_size);
		buf[0] ^= 1;
		put(KV_DB_DATA, key, 16, buf, v.mv_size);
		return;
	}
	for (size_t i = 0; i < len; i++)
		buf[i] = (unsigned char)('A' + i % 26);
	if (valid) {
		kv_put_le64(buf + len, kv_block_csum(ino, idx, buf, len));
		len += KV_CSUM_LEN;
	}
	put(KV_DB_DATA, key, 16, buf, len);
}

/* The first bytes of a zstd frame (zstd.h's ZSTD_MAGICNUMBER, little-endian). */
#define ZSTD_MAGIC 0xFD2FB528U

static void cmd_zcut(uint64_t ino, uint64_t idx)
{
	unsigned char key[16], buf[KV_BLOCK_SIZE_MAX + KV_CSUM_LEN];
	size_t len;
	MDB_val v;

	kv_put_be64(key, ino);
	kv_put_be64(key + 8, idx);
	if (get(KV_DB_DATA, key, 16, &v))
		die("no such block of '%s'", "target");
	len = v.mv_size > KV_CSUM_LEN ? v.mv_size - KV_CSUM_LEN : 0;
	if (len < 16 || kv_get_le32(v.mv_data) != ZSTD_MAGIC ||
	    kv_block_zcsum(ino, idx, v.mv_data, len) !=
		    kv_get_le64((unsigned char *)v.mv_data + len))
		die("block is not stored compressed%s", "");
	len -= 3;
	memcpy(buf, v.mv_data, len);
	kv_put_le64(buf + len, kv_block_zcsum(ino, idx, buf, len));
	put(KV_DB_DATA, key, 16, buf, len + KV_CSUM_LEN);
}

static void cmd_xattr(uint64_t ino, const char *name, const void *val, size_t len)
{
	unsigned char key[8 + 1024];
	size_t n = unescape(name, (char *)key + 8, 1024);

	kv_put_be64(key, ino);
	put(KV_DB_XATTR, key, 8 + n, val, len);
}

static void cmd_super(int off, int size, uint64_t val)
{
	unsigned char sb[KV_SUPER_LEN];
	MDB_val v;

	if (get(KV_DB_META, KV_SUPER_KEY, strlen(KV_SUPER_KEY), &v) || v.mv_size < KV_SUPER_LEN)
		die("no superblock%s", "");
	memcpy(sb, v.mv_data, KV_SUPER_LEN);
	if (size == 4)
		kv_put_le32(sb + off, (uint32_t)val);
	else
		kv_put_le64(sb + off, val);
	put(KV_DB_META, KV_SUPER_KEY, strlen(KV_SUPER_KEY), sb, KV_SUPER_LEN);
}

static void cmd_put(const char *db, const char *hk, const char *hv)
{
	static unsigned char k[512], v[65536];
	size_t kl = unhex(hk, k, sizeof(k)), vl = hv ? unhex(hv, v, sizeof(v)) : 0;
	enum kv_db d;

	if (kv_db_lookup(db, &d))
		die("no database '%s'", db);
	put(d, k, kl, v, vl);
}

/* The extent (ino, first) and its lend record: both keys. */
static void cmd_extent(int argc, char **argv, int which)
{
	struct kv_extent x = {.ino = resolve(argv[0]), .first = num(argv[1])};
	unsigned char k[32], v[KV_EXTENT_VLEN];
	size_t kl, vl;
	MDB_val got;

	if (argc >= 5) {
		x.home = resolve(argv[2]);
		x.hfirst = num(argv[3]);
		x.count = num(argv[4]);
		kv_encode_extent(which, &x, k, &kl, v, &vl);
		put(which, k, kl, v, vl);
		return;
	}
	kv_encode_extent(KV_DB_EXTENT, &x, k, &kl, v, &vl);
	if (get(KV_DB_EXTENT, k, kl, &got) ||
	    kv_decode_extent(KV_DB_EXTENT, k, kl, got.mv_data, got.mv_size, &x))
		die("no such extent of '%s'", argv[0]);
	kv_encode_extent(which, &x, k, &kl, v, &vl);
	del(which, k, kl);
}

static void cmd_drop_db(const char *name)
{
	enum kv_db d;

	if (kv_db_lookup(name, &d))
		die("no database '%s'", name);
	check(mdb_drop(txn, dbi[d], 1), "drop");
}

/* ------------------------------------------------------------ looking -- */

static void cmd_extents(uint64_t ino)
{
	unsigned char key[16];
	MDB_cursor *c;
	MDB_val k, v;
	int rc;

	kv_put_be64(key, ino);
	k = (MDB_val){8, key};
	check(mdb_cursor_open(txn, dbi[KV_DB_EXTENT], &c), "cursor");
	for (rc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE); rc == 0;
	     rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		struct kv_extent x;

		if (k.mv_size < 8 || kv_get_be64(k.mv_data) != ino)
			break;
		if (kv_decode_extent(KV_DB_EXTENT, k.mv_data, k.mv_size, v.mv_data, v.mv_size, &x))
			printf("malformed\n");
		else
			printf("%llu %llu %llu %llu\n", (unsigned long long)x.first,
			       (unsigned long long)x.home, (unsigned long long)x.hfirst,
			       (unsigned long long)x.count);
	}
	mdb_cursor_close(c);
}

static void cmd_stat(uint64_t ino)
{
	unsigned char kb[8];
	struct kv_inode in;
	MDB_val v;

	inode_rec(ino, kb, &v);
	if (kv_inode_decode(ino, v.mv_data, v.mv_size, &in))
		die("damaged inode %s", "");
	printf("%o %u %llu %llu %llu\n", in.mode, in.nlink, (unsigned long long)in.size,
	       (unsigned long long)in.nblocks, (unsigned long long)in.parent);
}

static void cmd_ls(uint64_t dir)
{
	unsigned char key[8];
	MDB_cursor *c;
	MDB_val k, v;
	int rc;

	kv_put_be64(key, dir);
	k = (MDB_val){8, key};
	check(mdb_cursor_open(txn, dbi[KV_DB_DIRENT], &c), "cursor");
	for (rc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE); rc == 0;
	     rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		struct kv_dirent de;
		size_t off = 0;
		if (k.mv_size != 16 || kv_get_be64(k.mv_data) != dir)
			break;
		while (kv_decode_dirent(v.mv_data, v.mv_size, &off, &de, NULL) == 0)
			printf("%.*s\n", de.namelen, de.name);
	}
	mdb_cursor_close(c);
}

static int cmd_cat(const char *path, uint64_t ino)
{
	struct iovec iov[64];
	struct kv_inode in;
	kv_env *e;
	kv_txn *t;
	char err[256];
	int n, rc;
	ssize_t got;

	rc = kv_open(path, &(struct kv_open_opts){.readonly = 1}, &e, err, sizeof(err));
	if (rc)
		die("%s", err);
	rc = kv_read_begin(e, &t);
	if (!rc)
		rc = kv_inode_get(t, ino, &in);
	for (uint64_t off = 0; !rc && off < in.size; off += (uint64_t)got) {
		got = kv_data_read(t, ino, in.size, off, 65536, iov, 64, &n);
		if (got <= 0) {
			rc = got < 0 ? (int)got : -EIO;
			break;
		}
		for (int i = 0; i < n; i++)
			fwrite(iov[i].iov_base, 1, iov[i].iov_len, stdout);
	}
	if (t)
		kv_read_end(t);
	kv_close(e);
	if (rc)
		fprintf(stderr, "fsck_break: cat: %s\n", strerror(-rc));
	return rc ? 1 : 0;
}

static void open_image(const char *path, int write)
{
	check(mdb_env_create(&env), "env");
	check(mdb_env_set_maxdbs(env, KV_NDB), "maxdbs");
	check(mdb_env_set_mapsize(env, 1ULL << 32), "mapsize");
	if (mdb_env_open(env, path, MDB_NOSUBDIR | MDB_NOLOCK | (write ? 0 : MDB_RDONLY), 0644))
		die("cannot open '%s'", path);
	check(mdb_txn_begin(env, NULL, write ? 0 : MDB_RDONLY, &txn), "txn");
	for (int i = 0; i < KV_NDB; i++)
		if (mdb_dbi_open(txn, kv_db_names[i], 0, &dbi[i])) {
			if (i < KV_DB_EXTENT)
				die("no database '%s'", kv_db_names[i]);
			dbi[i] = (MDB_dbi)-1; /* version 1 had none: LMDB refuses its use */
		}
}

#define NEED(n)                                                                                    \
	do {                                                                                       \
		if (argc < (n))                                                                    \
			die("%s: missing arguments", cmd);                                         \
	} while (0)

/* The commands that change the image (inside the open write txn). */
static void change(const char *cmd, int argc, char **argv)
{
	unsigned char kb[8];

	if (!strcmp(cmd, "set")) {
		NEED(3);
		cmd_set(resolve(argv[0]), argv[1], num(argv[2]));
	} else if (!strcmp(cmd, "inline")) {
		NEED(2);
		cmd_inline(resolve(argv[0]), argv[1], -1);
	} else if (!strcmp(cmd, "trunc")) {
		NEED(2);
		cmd_inline(resolve(argv[0]), NULL, (long)num(argv[1]));
	} else if (!strcmp(cmd, "del-inode")) {
		NEED(1);
		kv_put_be64(kb, resolve(argv[0]));
		del(KV_DB_INODE, kb, 8);
	} else if (!strcmp(cmd, "unname")) {
		NEED(2);
		edit_entry(resolve(argv[0]), argv[1], NULL, 0, 'u');
	} else if (!strcmp(cmd, "add-entry")) {
		NEED(4);
		cmd_add_entry(resolve(argv[0]), argv[1], num(argv[2]), (uint8_t)num(argv[3]),
			      argc > 4 ? argv[4] : NULL);
	} else if (!strcmp(cmd, "entry")) {
		NEED(4);
		edit_entry(resolve(argv[0]), argv[1], argv[2], num(argv[3]), 'e');
	} else if (!strcmp(cmd, "dup-entry") || !strcmp(cmd, "cut-list")) {
		NEED(2);
		edit_entry(resolve(argv[0]), argv[1], NULL, 0, cmd[0] == 'd' ? 'd' : 'c');
	} else if (!strcmp(cmd, "block") || !strcmp(cmd, "block-raw")) {
		NEED(3);
		cmd_block(resolve(argv[0]), num(argv[1]), (size_t)num(argv[2]),
			  !strcmp(cmd, "block"), 0);
	} else if (!strcmp(cmd, "flip")) {
		NEED(2);
		cmd_block(resolve(argv[0]), num(argv[1]), 0, 0, 1);
	} else if (!strcmp(cmd, "zcut")) {
		NEED(2);
		cmd_zcut(resolve(argv[0]), num(argv[1]));
	} else if (!strcmp(cmd, "xattr")) {
		size_t len;
		unsigned char *val;

		NEED(3);
		len = (size_t)num(argv[2]);
		val = calloc(len ? len : 1, 1);
		cmd_xattr(resolve(argv[0]), argv[1], val, len);
		free(val);
	} else if (!strcmp(cmd, "acl")) {
		unsigned char *val;

		NEED(3);
		/* an entry takes a character and a comma at least */
		val = malloc(4 + 8 * (strlen(argv[2]) / 2 + 1));
		if (!val)
			die("out of memory%s", "");
		cmd_xattr(resolve(argv[0]), argv[1], val, tu_acl_of(argv[2], val));
		free(val);
	} else if (!strcmp(cmd, "orphan")) {
		NEED(1);
		kv_put_be64(kb, resolve(argv[0]));
		put(KV_DB_ORPHAN, kb, 8, "", 0);
	} else if (!strcmp(cmd, "counter") || !strcmp(cmd, "version")) {
		NEED(1);
		if (cmd[0] == 'c')
			cmd_super(56, 8, num(argv[0]));
		else
			cmd_super(8, 4, num(argv[0]));
	} else if (!strcmp(cmd, "incompat")) {
		NEED(1);
		cmd_super(32, 8, num(argv[0]));
	} else if (!strcmp(cmd, "put")) {
		NEED(2);
		cmd_put(argv[0], argv[1], argc > 2 ? argv[2] : NULL);
	} else if (!strcmp(cmd, "drop-db")) {
		NEED(1);
		cmd_drop_db(argv[0]);
	} else if (!strcmp(cmd, "extent") || !strcmp(cmd, "lend")) {
		NEED(5);
		cmd_extent(argc, argv, cmd[0] == 'e' ? KV_DB_EXTENT : KV_DB_LEND);
	} else if (!strcmp(cmd, "del-extent") || !strcmp(cmd, "del-lend")) {
		NEED(2);
		cmd_extent(2, argv, cmd[4] == 'e' ? KV_DB_EXTENT : KV_DB_LEND);
	} else if (!strcmp(cmd, "del-block")) {
		unsigned char key[16];

		NEED(2);
		kv_put_be64(key, resolve(argv[0]));
		kv_put_be64(key + 8, num(argv[1]));
		del(KV_DB_DATA, key, 16);
	} else {
		die("unknown command '%s'", cmd);
	}
}

int main(int argc, char **argv)
{
	const char *img, *cmd;
	uint64_t ino;
	int looking;

	if (argc < 3)
		die("usage: fsck_break IMAGE CMD ARGS...%s", "");
	img = argv[1];
	cmd = argv[2];
	argv += 3;
	argc -= 3;
	if (!strcmp(cmd, "hash")) {
		NEED(1);
		printf("%llu\n", (unsigned long long)kv_name_hash_xxh3(argv[0], strlen(argv[0])));
		return 0;
	}
	looking = !strcmp(cmd, "ino") || !strcmp(cmd, "stat") || !strcmp(cmd, "ls") ||
		  !strcmp(cmd, "cat") || !strcmp(cmd, "extents");
	open_image(img, !looking);
	if (!looking) {
		change(cmd, argc, argv);
		check(mdb_txn_commit(txn), "commit");
		mdb_env_close(env);
		return 0;
	}
	NEED(1);
	ino = resolve(argv[0]);
	if (!strcmp(cmd, "ino"))
		printf("%llu\n", (unsigned long long)ino);
	else if (!strcmp(cmd, "stat"))
		cmd_stat(ino);
	else if (!strcmp(cmd, "ls"))
		cmd_ls(ino);
	else if (!strcmp(cmd, "extents"))
		cmd_extents(ino);
	mdb_txn_abort(txn);
	mdb_env_close(env);
	return !strcmp(cmd, "cat") ? cmd_cat(img, ino) : 0;
}
