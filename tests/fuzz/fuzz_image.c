/*
 * fuzz_image.c - libFuzzer target: mutated images through open, fsck and
 * kvfs-dump.
 *
 * Each input is a list of raw record edits applied, through LMDB, to a copy
 * of a small valid image (a directory tree with files, a symlink, a hard
 * link, xattrs, a sparse file, a file that borrows another's blocks):
 *
 *     [op u8][klen u8][vlen u16 LE][key: klen bytes][value: vlen bytes] ...
 *
 * op % 8 picks the database (meta, inode, dirent, data, xattr, orphan,
 * extent, lend);
 * op & 0x80 deletes the key instead of putting it; an empty key (klen 0)
 * means "the key of the n-th existing record", n taken from the value's
 * first byte, so mutations reach real records. The mutated image is then
 * opened, checked with fsck.kvfs -n and -y, and walked with every kvfs-dump
 * view. The oracle is the sanitizers: no crash, no hang, no report.
 *
 * Out of scope: damage inside LMDB's own B-tree pages, which liblmdb trusts
 * (the edits here keep LMDB's structure valid and break kvfs's records).
 */
#include <errno.h>
#include <fcntl.h>
#include <lmdb.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kv.h"

int cmd_fsck(int argc, char **argv);
int cmd_dump(int argc, char **argv);
extern int optind;

static char seed_path[64], img_path[64];
static unsigned char *seed;
static size_t seed_len;

/* /a, three whole blocks (of the default size), and /b, which borrows
 * them (copy_file_range's extent and lend records). */
static int share_seed(kv_txn *t, struct kv_inode *root)
{
	static char blocks[3 * KV_BLOCK_SIZE_DEFAULT];
	struct kv_inode a = {.mode = 0100644, .nlink = 1}, b = {.mode = 0100644, .nlink = 1};
	int rc;

	memset(blocks, 'z', sizeof(blocks));
	if ((rc = kv_ino_alloc(t, &a.ino)) || (rc = kv_ino_alloc(t, &b.ino)) ||
	    (rc = kv_data_write(t, &a, 0, blocks, sizeof(blocks))) ||
	    (rc = kv_data_share(t, &b, 0, &a, 0, 3)) || (rc = kv_inode_put(t, &a)) ||
	    (rc = kv_inode_put(t, &b)) || (rc = kv_dirent_add(t, 1, "a", 1, a.ino, 8)) ||
	    (rc = kv_dirent_add(t, 1, "b", 1, b.ino, 8)))
		return rc;
	root->size += 2;
	return kv_inode_put(t, root);
}

static int apply_seed(kv_txn *t, void *arg)
{
	static const char big[5000] = "sparse";
	struct kv_inode dir = {0}, f = {0}, l = {0};
	uint64_t ino;
	int rc;

	(void)arg;
	rc = kv_inode_get(t, KV_ROOT_INO, &dir);
	if (rc)
		return rc;
	/* /d (dir), /d/f (file, 2 links: /d/f and /g), /s -> d/f, xattrs */
	if ((rc = kv_ino_alloc(t, &ino)))
		return rc;
	struct kv_inode d = {.ino = ino, .mode = 040755, .nlink = 2, .parent = 1, .size = 1};
	if ((rc = kv_ino_alloc(t, &f.ino)) || (rc = kv_ino_alloc(t, &l.ino)))
		return rc;
	f.mode = 0100644;
	f.nlink = 2;
	if ((rc = kv_data_write(t, &f, 0, "hello, world\n", 13)) ||
	    (rc = kv_data_write(t, &f, 40000, big, sizeof(big))))
		return rc;
	l.mode = 0120777;
	l.nlink = 1;
	l.inline_data = "d/f";
	l.inline_len = 3;
	l.size = 3;
	dir.nlink = 3;
	dir.size = 3;
	if ((rc = kv_inode_put(t, &d)) || (rc = kv_inode_put(t, &f)) || (rc = kv_inode_put(t, &l)) ||
	    (rc = kv_inode_put(t, &dir)) || (rc = kv_dirent_add(t, 1, "d", 1, d.ino, 4)) ||
	    (rc = kv_dirent_add(t, d.ino, "f", 1, f.ino, 8)) ||
	    (rc = kv_dirent_add(t, 1, "g", 1, f.ino, 8)) ||
	    (rc = kv_dirent_add(t, 1, "s", 1, l.ino, 10)) ||
	    (rc = kv_xattr_set(t, f.ino, "user.a", "1", 1, 0)) ||
	    (rc = kv_xattr_set(t, d.ino, "user.b", "", 0, 0)))
		return rc;
	return share_seed(t, &dir);
}

static void make_seed(void)
{
	struct kv_mkfs_opts o = {.root_mode = 0755};
	char err[256];
	kv_env *env;
	FILE *fp;

	snprintf(seed_path, sizeof(seed_path), "/dev/shm/kvfs-fuzz-seed.%d", (int)getpid());
	snprintf(img_path, sizeof(img_path), "/dev/shm/kvfs-fuzz.%d", (int)getpid());
	o.force = 1;
	if (kv_mkfs(seed_path, &o, err, sizeof(err)) ||
	    kv_open(seed_path, &(struct kv_open_opts){.durability = KV_DURABLE_NONE}, &env, err,
		    sizeof(err)) ||
	    kv_write(env, apply_seed, NULL, 0)) {
		fprintf(stderr, "fuzz: cannot make the seed image: %s\n", err);
		abort();
	}
	kv_close(env);
	fp = fopen(seed_path, "rb");
	fseek(fp, 0, SEEK_END);
	seed_len = (size_t)ftell(fp);
	rewind(fp);
	seed = malloc(seed_len);
	if (fread(seed, 1, seed_len, fp) != seed_len)
		abort();
	fclose(fp);
	unlink(seed_path);
}

static const char *const dbs[8] = {"meta",  "inode",  "dirent", "data",
				   "xattr", "orphan", "extent", "lend"};

/* Apply the edits; malformed input just ends the list. */
static void mutate(const uint8_t *p, size_t n)
{
	MDB_env *env;
	MDB_txn *txn;
	MDB_dbi dbi[8];

	if (mdb_env_create(&env) || mdb_env_set_maxdbs(env, 8) ||
	    mdb_env_set_mapsize(env, 64 << 20) ||
	    mdb_env_open(env, img_path, MDB_NOSUBDIR | MDB_NOSYNC | MDB_NOLOCK, 0644))
		abort();
	if (mdb_txn_begin(env, NULL, 0, &txn))
		abort();
	for (int i = 0; i < 8; i++)
		if (mdb_dbi_open(txn, dbs[i], 0, &dbi[i]))
			abort();
	while (n >= 4) {
		unsigned op = p[0], klen = p[1], vlen = p[2] | (unsigned)p[3] << 8;
		MDB_val k = {klen, (void *)(p + 4)}, v;
		MDB_dbi db = dbi[op % 8];
		if (n < 4 + (size_t)klen + vlen)
			break;
		v = (MDB_val){vlen, (void *)(p + 4 + klen)};
		if (klen == 0) { /* the key of an existing record */
			MDB_cursor *c;
			unsigned nth = vlen ? ((const uint8_t *)v.mv_data)[0] : 0;
			MDB_val ck, cv;
			if (mdb_cursor_open(txn, db, &c))
				abort();
			int rc = mdb_cursor_get(c, &ck, &cv, MDB_FIRST);
			while (rc == 0 && nth--)
				rc = mdb_cursor_get(c, &ck, &cv, MDB_NEXT);
			if (rc == 0) {
				static unsigned char kb[512];
				memcpy(kb, ck.mv_data, ck.mv_size);
				k = (MDB_val){ck.mv_size, kb};
				if (vlen) { /* the rest of the value replaces the record's */
					v.mv_data = (char *)v.mv_data + 1;
					v.mv_size--;
				}
			}
			mdb_cursor_close(c);
		}
		if (k.mv_size > 0 && k.mv_size <= 511) {
			if (op & 0x80)
				mdb_del(txn, db, &k, NULL);
			else
				mdb_put(txn, db, &k, &v, 0);
		}
		p += 4 + klen + vlen;
		n -= 4 + (size_t)klen + vlen;
	}
	if (mdb_txn_commit(txn))
		abort();
	mdb_env_close(env);
}

static int run(int (*cmd)(int, char **), int argc, const char **argv)
{
	optind = 0; /* getopt starts over */
	return cmd(argc, (char **)argv);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const views[][3] = {
		{"summary"}, {"tree"}, {"inode", "1"}, {"inode", "2"}, {"inode", "3"},
		{"keys", "meta"}, {"keys", "inode"}, {"keys", "dirent"}, {"keys", "data"},
		{"keys", "xattr"}, {"keys", "orphan"},
	};
	FILE *fp;

	if (!seed)
		make_seed(); /* run with -close_fd_mask=3: the tools print a lot */
	fp = fopen(img_path, "wb");
	if (!fp || fwrite(seed, 1, seed_len, fp) != seed_len || fclose(fp))
		abort();
	mutate(data, size);
	run(cmd_fsck, 3, (const char *[]){"fsck.kvfs", "-n", img_path, NULL});
	for (size_t i = 0; i < sizeof(views) / sizeof(views[0]); i++) {
		const char *argv[6] = {"kvfs-dump", img_path, views[i][0], views[i][1], NULL};
		run(cmd_dump, views[i][1] ? 4 : 3, argv);
	}
	run(cmd_fsck, 3, (const char *[]){"fsck.kvfs", "-y", img_path, NULL});
	run(cmd_fsck, 3, (const char *[]){"fsck.kvfs", "-n", img_path, NULL});
	unlink(img_path);
	return 0;
}
