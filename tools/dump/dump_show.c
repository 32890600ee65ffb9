/*
 * dump_show.c - kvfs-dump's views of an image: tree (the directory tree),
 * inode (one inode in full) and keys (the raw records of one database).
 *
 * Output formats (one record per line; names escaped, dump.h invariant 3):
 *   tree:  INO TYPE SIZE  NAME, NAME indented two spaces per level, "/" after
 *          directories, " -> TARGET" after symlinks, " [links N]" after other
 *          inodes with several names; SIZE is MAJOR:MINOR for devices and
 *          the number of entries for directories. Entries sorted by name.
 *   inode: "FIELD: VALUE" lines (flags by name too), then "name:",
 *          "block:" (IDX length DATA ok, then ", compressed N bytes" for a
 *          block stored as a zstd frame of N bytes, which is unpacked to
 *          check it), "extent:" (blocks a-b from inode H blocks c-d:
 *          borrowed), "lent:" (blocks c-d to inode N, its blocks a-b) and
 *          "xattr:" lines and their counts. A deleted inode that still
 *          stores blocks it lent (kv/share.c invariant 4) shows its blocks
 *          and lend records by number. An xattr's value is quoted (its
 *          first 256 bytes, escaped); a POSIX ACL's is its short text form
 *          instead, unquoted ("user::rw-,user:1000:r--,group::r--,
 *          mask::r--,other::r--", ids as numbers: the image's, not this
 *          host's).
 *   keys:  decoded, one line per record (per entry for dirent lists), the
 *          key's fields first (extent: INO FIRST home HOME HFIRST count N;
 *          lend: HOME HFIRST borrower INO FIRST count N; data: INO IDX
 *          length DATA ok, and "compressed N" for a frame of N bytes); with
 *          --hex "KEYHEX VALUEHEX" ("-": empty).
 *
 * Invariants:
 *  1. The tree walk never follows a directory already on the current path,
 *     so a damaged image whose directories loop still ends.
 *  2. Damage (a missing inode, a malformed record, a bad checksum) is
 *     reported and the walk goes on; the exit code says so.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "cli.h"
#include "dump.h"
#include "inomap.h"
#include "walk.h"

#define DEPTH_MAX 4096

/* ---------------------------------------------------------------- tree -- */

static void tree_line(const struct kv_inode *in, int depth, const char *name, size_t len)
{
	char size[32];

	if (S_ISCHR(in->mode) || S_ISBLK(in->mode))
		snprintf(size, sizeof(size), "%u:%u", major((dev_t)in->rdev),
			 minor((dev_t)in->rdev));
	else
		snprintf(size, sizeof(size), "%llu",
			 (unsigned long long)(S_ISLNK(in->mode) ? in->inline_len : in->size));
	printf("%10llu %-7s %12s  %*s", (unsigned long long)in->ino, dump_type_name(in->mode),
	       size, depth * 2, "");
	cli_put_escaped(stdout, name, len);
	if (S_ISDIR(in->mode) && !(len == 1 && name[0] == '/'))
		putchar('/');
	if (S_ISLNK(in->mode)) {
		fputs(" -> ", stdout);
		cli_put_escaped(stdout, in->inline_data, in->inline_len);
	}
	if (!S_ISDIR(in->mode) && in->nlink > 1)
		printf(" [links %u]", in->nlink);
	putchar('\n');
}

static void tree_dir(struct dump *d, struct inomap *onpath, uint64_t ino, int depth)
{
	struct dump_listing l = {0};
	struct inomap_ent *e;
	int added, rc;

	if (depth >= DEPTH_MAX) {
		dump_error(d, "directory %llu: deeper than %d levels, not listed",
			   (unsigned long long)ino, DEPTH_MAX);
		return;
	}
	if (inomap_put(onpath, ino, 0, &e, &added)) {
		dump_error(d, "out of memory");
		return;
	}
	if (!added && e->val) {
		dump_error(d, "directory %llu: contains itself (a loop), not listed again",
			   (unsigned long long)ino);
		return;
	}
	e->val = 1;
	rc = dump_list_dir(d, ino, &l, NULL, NULL);
	if (rc)
		dump_error(d, "directory %llu: cannot list: %s", (unsigned long long)ino,
			   strerror(-rc));
	for (size_t i = 0; i < l.n; i++) {
		const struct dump_lent *v = &l.ents[i];
		const char *vname = l.names + v->off;
		struct kv_inode in;

		rc = kv_inode_get(d->t, v->ino, &in);
		if (rc) {
			char *name = cli_quote(vname, v->len);

			dump_error(d, "directory %llu: entry %s: inode %llu: %s",
				   (unsigned long long)ino, name ? name : "'?'",
				   (unsigned long long)v->ino,
				   rc == -ENOENT ? "missing" : strerror(-rc));
			free(name);
			continue;
		}
		tree_line(&in, depth + 1, vname, v->len);
		if (S_ISDIR(in.mode))
			tree_dir(d, onpath, in.ino, depth + 1);
	}
	dump_listing_free(&l);
	/* the map may have grown: look the entry up again */
	e = inomap_get(onpath, ino, 0);
	if (e)
		e->val = 0;
}

int dump_tree(struct dump *d, const struct dump_args *a)
{
	struct inomap onpath;
	struct kv_inode in;
	uint64_t ino;
	int rc;

	rc = dump_resolve(d, a->path, &ino);
	if (!rc)
		rc = kv_inode_get(d->t, ino, &in);
	if (rc) {
		dump_error(d, "'%s': %s", a->path, strerror(-rc));
		return EXIT_OPERATIONAL;
	}
	tree_line(&in, 0, a->path, strlen(a->path));
	if (S_ISDIR(in.mode)) {
		inomap_init(&onpath);
		tree_dir(d, &onpath, ino, 0);
		inomap_release(&onpath);
	}
	return d->errors ? EXIT_OPERATIONAL : EXIT_OK;
}

/* --------------------------------------------------------------- inode -- */

struct name_of {
	uint64_t ino;
	int found;
	uint8_t len;
	char name[UINT8_MAX]; /* copied: the walk's values end with it */
};

static int find_name(void *arg, const struct kv_dirent *de)
{
	struct name_of *f = arg;

	if (de->ino != f->ino)
		return 0;
	f->found = 1;
	f->len = de->namelen;
	memcpy(f->name, de->name, de->namelen);
	return 1;
}

/* Print the path of directory dir from the root, by its parent links and
 * the names its parents hold for it; "?INO" stands for a part that cannot
 * be followed (damage, a loop, or more than PATH_LEVELS levels). */
#define PATH_LEVELS 256
static void put_dir_path(struct dump *d, uint64_t dir)
{
	uint64_t chain[PATH_LEVELS], parent[PATH_LEVELS];
	struct kv_inode in;
	int n = 0;

	while (dir != KV_ROOT_INO) {
		if (n == PATH_LEVELS || kv_inode_get(d->t, dir, &in) || !in.parent ||
		    in.parent == dir) {
			printf("?%llu", (unsigned long long)dir);
			break;
		}
		chain[n] = dir;
		parent[n++] = in.parent;
		dir = in.parent;
	}
	while (n-- > 0) {
		struct name_of f = {.ino = chain[n]};

		dump_dir_each(d, parent[n], find_name, &f);
		putchar('/');
		if (f.found)
			cli_put_escaped(stdout, f.name, f.len);
		else
			printf("?%llu", (unsigned long long)chain[n]);
	}
}

struct inode_walk {
	struct dump *d;
	const struct kv_inode *in;
	uint64_t count, bad;
	uint64_t blocks, end; /* extents, lends: blocks named (distinct), the last end */
};

/* One dirent list: its entries naming the inode. */
static int name_record(void *arg, const void *k, size_t kl, const void *v, size_t vl)
{
	struct inode_walk *w = arg;
	struct kv_dirent de;
	struct kv_key key;
	size_t off = 0;
	uint8_t slot;

	if (kv_key_decode(KV_DB_DIRENT, k, kl, &key))
		return 0; /* keys reports it */
	while (kv_decode_dirent(v, vl, &off, &de, &slot) == 0) {
		if (de.ino != w->in->ino)
			continue;
		w->count++;
		printf("name:           ");
		if (key.ino != KV_ROOT_INO)
			put_dir_path(w->d, key.ino);
		putchar('/');
		cli_put_escaped(stdout, de.name, de.namelen);
		printf(" (directory %llu, slot %u)\n", (unsigned long long)key.ino, slot);
	}
	return 0;
}

static int block_record(void *arg, const void *k, size_t kl, const void *v, size_t vl)
{
	struct inode_walk *w = arg;
	uint64_t ino = w->in->ino, bs = kv_block_size(w->d->env);
	struct kv_key key;
	int malformed = kv_key_decode(KV_DB_DATA, k, kl, &key);
	uint64_t idx = malformed ? UINT64_MAX : key.idx;
	const void *data;
	size_t len;
	int rc;

	w->count++;
	rc = dump_block(w->d, ino, idx, v, vl, &data, &len);
	if (rc < 0 || malformed) {
		w->bad++;
		printf("block:          %llu length %zu BAD\n", (unsigned long long)idx, len);
		dump_error(w->d, "inode %llu block %llu: %s", (unsigned long long)ino,
			   (unsigned long long)idx, rc == -EBADMSG
			   ? "its compressed bytes do not decompress" : "bad length or checksum");
		return 0;
	}
	printf("block:          %llu length %zu ok", (unsigned long long)idx, len);
	if (rc == 1) /* the data's length above, the frame's here */
		printf(", compressed %zu bytes", kv_block_len(vl));
	printf("%s\n", len == 0 ? " (unwritten: fallocate's, reads as zeros)"
	       : idx * bs + len > w->in->size ? " (past the end of the file)" : "");
	return 0;
}

static const char *acl_tag_name(unsigned tag)
{
	switch (tag) {
	case KV_ACL_USER_OBJ:
	case KV_ACL_USER: return "user";
	case KV_ACL_GROUP_OBJ:
	case KV_ACL_GROUP: return "group";
	case KV_ACL_MASK: return "mask";
	default: return "other";
	}
}

/* The value of the xattr of key k and its newline: an ACL as text, else
 * quoted. An ACL kv_acl_check refuses is shown quoted and reported. */
static void put_xattr_value(struct dump *d, const struct kv_key *k, const void *v, size_t vl)
{
	int acl = kv_acl_type(k->name, k->namelen);
	struct kv_acl_entry a;

	if (acl && kv_acl_check(v, vl) == 0) {
		for (size_t i = 0; kv_acl_entry(v, vl, i, &a) == 0; i++) {
			printf("%s%s:", i ? "," : "", acl_tag_name(a.tag));
			if (a.id != KV_ACL_UNDEFINED_ID)
				printf("%lu", (unsigned long)a.id);
			printf(":%c%c%c", a.perm & 4 ? 'r' : '-', a.perm & 2 ? 'w' : '-',
			       a.perm & 1 ? 'x' : '-');
		}
		putchar('\n');
		return;
	}
	putchar('"');
	cli_put_escaped(stdout, v, vl > 256 ? 256 : vl);
	printf(vl > 256 ? "\"...%s\n" : "\"%s\n", acl ? " (damaged ACL)" : "");
	if (acl)
		dump_error(d, "inode %llu: ACL '%s' is damaged", (unsigned long long)k->ino,
			   acl == KV_ACL_TYPE_ACCESS ? KV_ACL_ACCESS : KV_ACL_DEFAULT);
}

static int xattr_record(void *arg, const void *k, size_t kl, const void *v, size_t vl)
{
	struct inode_walk *w = arg;
	struct kv_key key;

	kv_key_decode(KV_DB_XATTR, k, kl, &key); /* a name or none: shown */
	w->count++;
	printf("xattr:          ");
	cli_put_escaped(stdout, key.name, key.namelen);
	printf(" (%zu bytes) ", vl);
	put_xattr_value(w->d, &key, v, vl);
	return 0;
}

/* Decode one of the inode's extent or lend records into b; a malformed one
 * is shown (as FIELD) and reported, and nonzero returned. */
static int share_decode(struct inode_walk *w, enum kv_db db, const char *field, const void *k,
			size_t kl, const void *v, size_t vl, struct kv_extent *b)
{
	if (kv_decode_extent(db, k, kl, v, vl, b) == 0) {
		w->count++;
		return 0;
	}
	w->bad++;
	printf("%-16smalformed\n", field);
	dump_error(w->d, "inode %llu: a malformed %s record", (unsigned long long)w->in->ino,
		   kv_db_name(db));
	return -1;
}

/* One extent of the inode: the blocks it borrows and where they are. */
static int extent_record(void *arg, const void *k, size_t kl, const void *v, size_t vl)
{
	struct inode_walk *w = arg;
	struct kv_inode home;
	struct kv_extent b;
	int rc;

	if (share_decode(w, KV_DB_EXTENT, "extent:", k, kl, v, vl, &b))
		return 0;
	w->blocks += b.count;
	rc = kv_inode_get(w->d->t, b.home, &home);
	if (rc && rc != -ENOENT)
		return rc;
	printf("extent:         blocks %llu-%llu from inode %llu%s blocks %llu-%llu\n",
	       (unsigned long long)b.first, (unsigned long long)(b.first + b.count - 1),
	       (unsigned long long)b.home, rc ? " (deleted)" : "",
	       (unsigned long long)b.hfirst, (unsigned long long)(b.hfirst + b.count - 1));
	return 0;
}

/* One lend record of the inode: its blocks another file reads. */
static int lend_record(void *arg, const void *k, size_t kl, const void *v, size_t vl)
{
	struct inode_walk *w = arg;
	struct kv_extent b;

	if (share_decode(w, KV_DB_LEND, "lent:", k, kl, v, vl, &b))
		return 0;
	w->blocks += dump_lent_blocks(&w->end, &b);
	printf("lent:           blocks %llu-%llu to inode %llu (its blocks %llu-%llu)\n",
	       (unsigned long long)b.hfirst, (unsigned long long)(b.hfirst + b.count - 1),
	       (unsigned long long)b.ino, (unsigned long long)b.first,
	       (unsigned long long)(b.first + b.count - 1));
	return 0;
}

/* The extents of the inode (blocks it borrows) and its lend records
 * (blocks others borrow from it), each with its count. */
static int share_records(struct dump *d, const struct kv_inode *in)
{
	struct inode_walk extents = {.d = d, .in = in}, lends = extents;
	int rc;

	rc = walk_inode(d->t, KV_DB_EXTENT, in->ino, extent_record, &extents);
	printf("extents:        %llu (%llu blocks borrowed)\n", (unsigned long long)extents.count,
	       (unsigned long long)extents.blocks);
	if (rc)
		return rc;
	rc = walk_inode(d->t, KV_DB_LEND, in->ino, lend_record, &lends);
	printf("lends:          %llu (%llu blocks lent)\n", (unsigned long long)lends.count,
	       (unsigned long long)lends.blocks);
	return rc;
}

/* The names, blocks, extents, lends and xattrs of the inode, each with its
 * count. */
static int inode_records(struct dump *d, const struct kv_inode *in)
{
	struct inode_walk names = {.d = d, .in = in}, blocks = names, xattrs = names;
	int rc;

	rc = walk_records(d->t, KV_DB_DIRENT, NULL, 0, name_record, &names);
	printf("names:          %llu\n", (unsigned long long)names.count);
	if (rc)
		return rc;
	rc = walk_inode(d->t, KV_DB_DATA, in->ino, block_record, &blocks);
	printf("blocks:         %llu (%llu bad)\n", (unsigned long long)blocks.count,
	       (unsigned long long)blocks.bad);
	if (!rc)
		rc = share_records(d, in);
	if (rc)
		return rc;
	rc = walk_inode(d->t, KV_DB_XATTR, in->ino, xattr_record, &xattrs);
	printf("xattrs:         %llu\n", (unsigned long long)xattrs.count);
	return rc;
}

/* Inode ino has no record: a deleted home still stores the blocks it lent
 * (share.c invariant 4), under its number. Shows them; -ENOENT when it
 * stores none. */
static int deleted_home(struct dump *d, uint64_t ino)
{
	unsigned char pfx[KV_KEY_MAX];
	size_t plen = kv_key_prefix(ino, pfx);
	struct kv_inode in = {.ino = ino, .size = UINT64_MAX}; /* no end to be past */
	struct inode_walk blocks = {.d = d, .in = &in};
	const void *k, *v;
	size_t kl, vl;
	kv_iter *it = NULL;
	int rc;

	rc = kv_iter_open(d->t, KV_DB_LEND, &it);
	if (!rc)
		rc = kv_iter_seek(it, pfx, plen);
	if (!rc)
		rc = kv_iter_next(it, &k, &kl, &v, &vl);
	if (!rc && (kl < plen || memcmp(k, pfx, plen) != 0))
		rc = -ENOENT;
	kv_iter_close(it);
	if (rc)
		return rc;
	printf("inode:          %llu (deleted: it keeps the blocks it lent until their "
	       "borrowers let go)\n", (unsigned long long)ino);
	rc = walk_inode(d->t, KV_DB_DATA, ino, block_record, &blocks);
	printf("blocks:         %llu (%llu bad)\n", (unsigned long long)blocks.count,
	       (unsigned long long)blocks.bad);
	return rc ? rc : share_records(d, &in);
}

static void print_time(const char *field, int64_t ns)
{
	char buf[64];
	int64_t s = ns / 1000000000, f = ns % 1000000000;

	if (f < 0)
		f += 1000000000, s--;
	cli_format_time(ns, buf, sizeof(buf));
	printf("%-16s%s (%lld.%09lld)\n", field, buf, (long long)s, (long long)f);
}

static void print_inode(const struct kv_inode *in)
{
	printf("inode:          %llu\n", (unsigned long long)in->ino);
	printf("type:           %s\n", dump_type_name(in->mode));
	printf("mode:           %06o\n", in->mode);
	printf("uid:            %u\n", in->uid);
	printf("gid:            %u\n", in->gid);
	printf("nlink:          %u\n", in->nlink);
	printf("size:           %llu\n", (unsigned long long)in->size);
	printf("rdev:           %llu (%u:%u)\n", (unsigned long long)in->rdev,
	       major((dev_t)in->rdev), minor((dev_t)in->rdev));
	printf("flags:          %#llx", (unsigned long long)in->flags);
	if (in->flags) {
		const char *sep = " (";

		if (in->flags & KV_INODE_LENDS)
			printf("%slends", sep), sep = ", ";
		if (in->flags & KV_INODE_BORROWS)
			printf("%sborrows", sep), sep = ", ";
		if (in->flags & ~KV_INODE_FLAGS_KNOWN)
			printf("%sunknown %#llx", sep,
			       (unsigned long long)(in->flags & ~KV_INODE_FLAGS_KNOWN));
		putchar(')');
	}
	putchar('\n');
	printf("nblocks:        %llu\n", (unsigned long long)in->nblocks);
	print_time("atime:", in->atime_ns);
	print_time("mtime:", in->mtime_ns);
	print_time("ctime:", in->ctime_ns);
	print_time("btime:", in->btime_ns);
	printf("parent:         %llu\n", (unsigned long long)in->parent);
	if (in->inline_len) {
		printf("%-16s'", S_ISLNK(in->mode) ? "target:" : "inline:");
		cli_put_escaped(stdout, in->inline_data, in->inline_len);
		printf("' (%u bytes)\n", in->inline_len);
	}
}

int dump_inode(struct dump *d, const struct dump_args *a)
{
	struct kv_inode in;
	uint64_t ino = a->ino;
	int rc = 0;

	if (a->path)
		rc = dump_resolve(d, a->path, &ino);
	if (rc) {
		dump_error(d, "'%s': %s", a->path, strerror(-rc));
		return EXIT_OPERATIONAL;
	}
	rc = kv_inode_get(d->t, ino, &in);
	if (rc == -ENOENT && !a->path && (rc = deleted_home(d, ino)) != -ENOENT) {
		if (rc)
			dump_error(d, "inode %llu: %s", (unsigned long long)ino, strerror(-rc));
		return d->errors ? EXIT_OPERATIONAL : EXIT_OK;
	}
	if (rc) {
		dump_error(d, "inode %llu: %s", (unsigned long long)ino,
			   rc == -ENOENT ? "no such inode" : strerror(-rc));
		return EXIT_OPERATIONAL;
	}
	print_inode(&in);
	rc = inode_records(d, &in);
	if (rc)
		dump_error(d, "inode %llu: %s", (unsigned long long)ino, strerror(-rc));
	return d->errors ? EXIT_OPERATIONAL : EXIT_OK;
}

/* ---------------------------------------------------------------- keys -- */

static void put_hex(const void *p, size_t n)
{
	const unsigned char *b = p;

	if (!n)
		putchar('-');
	for (size_t i = 0; i < n; i++)
		printf("%02x", b[i]);
}

static void malformed(struct dump *d, enum kv_db db, const void *k, size_t kl, size_t vl)
{
	put_hex(k, kl);
	printf(" malformed (value of %zu bytes)\n", vl);
	dump_error(d, "%s: malformed record (key of %zu bytes, value of %zu)", kv_db_name(db), kl,
		   vl);
}

static void key_meta(struct dump *d, const void *k, size_t kl, const void *v, size_t vl)
{
	struct kv_super s;
	struct kv_key key;
	char uuid[37];

	kv_key_decode(KV_DB_META, k, kl, &key); /* every name is a meta key */
	if (key.super && kv_decode_super(v, vl, &s) == 0) {
		cli_format_uuid(s.uuid, uuid);
		printf("super version %u block_size %u compat %#llx ro_compat %#llx incompat "
		       "%#llx uuid %s next_ino %llu created %lld label '",
		       s.version, s.block_size, (unsigned long long)s.feature_compat,
		       (unsigned long long)s.feature_ro_compat,
		       (unsigned long long)s.feature_incompat, uuid,
		       (unsigned long long)s.next_ino, (long long)s.created_ns);
		cli_put_escaped(stdout, s.label, strlen(s.label));
		printf("' (%zu bytes)\n", vl);
		return;
	}
	if (key.super) {
		malformed(d, KV_DB_META, k, kl, vl);
		return;
	}
	cli_put_escaped(stdout, k, kl); /* a later version's record */
	putchar(' ');
	put_hex(v, vl);
	putchar('\n');
}

static void key_inode(struct dump *d, const void *k, size_t kl, const void *v, size_t vl)
{
	struct kv_inode in;
	struct kv_key key;

	if (kv_key_decode(KV_DB_INODE, k, kl, &key) || kv_decode_inode(key.ino, v, vl, &in)) {
		malformed(d, KV_DB_INODE, k, kl, vl);
		return;
	}
	printf("%llu mode %06o uid %u gid %u nlink %u size %llu rdev %llu flags %#llx "
	       "nblocks %llu atime %lld mtime %lld ctime %lld btime %lld parent %llu inline %u",
	       (unsigned long long)in.ino, in.mode, in.uid, in.gid, in.nlink,
	       (unsigned long long)in.size, (unsigned long long)in.rdev,
	       (unsigned long long)in.flags, (unsigned long long)in.nblocks,
	       (long long)in.atime_ns, (long long)in.mtime_ns, (long long)in.ctime_ns,
	       (long long)in.btime_ns, (unsigned long long)in.parent, in.inline_len);
	if (in.inline_len) {
		fputs(" '", stdout);
		cli_put_escaped(stdout, in.inline_data, in.inline_len);
		putchar('\'');
	}
	putchar('\n');
}

static void key_dirent(struct dump *d, const void *k, size_t kl, const void *v, size_t vl)
{
	struct kv_dirent de;
	struct kv_key key;
	size_t off = 0;
	uint8_t slot;
	int rc;

	if (kv_key_decode(KV_DB_DIRENT, k, kl, &key)) {
		malformed(d, KV_DB_DIRENT, k, kl, vl);
		return;
	}
	while ((rc = kv_decode_dirent(v, vl, &off, &de, &slot)) == 0) {
		printf("%llu %#llx slot %u type %u ino %llu name '", (unsigned long long)key.ino,
		       (unsigned long long)key.hash, slot, de.type, (unsigned long long)de.ino);
		cli_put_escaped(stdout, de.name, de.namelen);
		printf("'%s\n", kv_dirent_hash(de.name, de.namelen) == key.hash ? "" : " BAD hash");
	}
	if (rc < 0 || off == 0)
		malformed(d, KV_DB_DIRENT, k, kl, vl);
}

static void key_data(struct dump *d, const void *k, size_t kl, const void *v, size_t vl)
{
	unsigned long long ino, idx;
	const void *data;
	struct kv_key key;
	size_t len = 0;
	int rc = kv_key_decode(KV_DB_DATA, k, kl, &key);

	if (rc == 0)
		rc = dump_block(d, key.ino, key.idx, v, vl, &data, &len);
	if (rc < 0 && len == 0) { /* a key, or a value too short for its checksum */
		malformed(d, KV_DB_DATA, k, kl, vl);
		return;
	}
	ino = key.ino;
	idx = key.idx;
	if (rc >= 0) {
		printf("%llu %llu length %zu ok", ino, idx, len);
		if (rc == 1)
			printf(" compressed %zu", kv_block_len(vl));
		putchar('\n');
		return;
	}
	printf("%llu %llu length %zu BAD\n", ino, idx, len);
	dump_error(d, "inode %llu block %llu: %s", ino, idx, rc == -EBADMSG
		   ? "its compressed bytes do not decompress" : "bad length or checksum");
}

static void key_xattr(struct dump *d, const void *k, size_t kl, const void *v, size_t vl)
{
	struct kv_key key;

	if (kv_key_decode(KV_DB_XATTR, k, kl, &key)) {
		malformed(d, KV_DB_XATTR, k, kl, vl);
		return;
	}
	printf("%llu ", (unsigned long long)key.ino);
	cli_put_escaped(stdout, key.name, key.namelen);
	printf(" length %zu ", vl);
	put_xattr_value(d, &key, v, vl);
}

static void key_orphan(struct dump *d, const void *k, size_t kl, const void *v, size_t vl)
{
	struct kv_key key;

	(void)v;
	if (kv_key_decode(KV_DB_ORPHAN, k, kl, &key) || vl != 0) {
		malformed(d, KV_DB_ORPHAN, k, kl, vl);
		return;
	}
	printf("%llu\n", (unsigned long long)key.ino);
}

/* An extent or a lend record: the same parts, keyed by the borrower's side
 * or the home's. */
static void key_share(struct dump *d, enum kv_db db, const void *k, size_t kl, const void *v,
		      size_t vl)
{
	const int ext = db == KV_DB_EXTENT;
	struct kv_extent b;

	if (kv_decode_extent(db, k, kl, v, vl, &b)) {
		malformed(d, db, k, kl, vl);
		return;
	}
	printf("%llu %llu %s %llu %llu count %llu\n", (unsigned long long)(ext ? b.ino : b.home),
	       (unsigned long long)(ext ? b.first : b.hfirst), ext ? "home" : "borrower",
	       (unsigned long long)(ext ? b.home : b.ino),
	       (unsigned long long)(ext ? b.hfirst : b.first), (unsigned long long)b.count);
}

static void key_extent(struct dump *d, const void *k, size_t kl, const void *v, size_t vl)
{
	key_share(d, KV_DB_EXTENT, k, kl, v, vl);
}

static void key_lend(struct dump *d, const void *k, size_t kl, const void *v, size_t vl)
{
	key_share(d, KV_DB_LEND, k, kl, v, vl);
}

int dump_keys(struct dump *d, const struct dump_args *a)
{
	static void (*const decode[KV_NDB])(struct dump *, const void *, size_t, const void *,
					     size_t) = {
		[KV_DB_META] = key_meta,     [KV_DB_INODE] = key_inode, [KV_DB_DIRENT] = key_dirent,
		[KV_DB_DATA] = key_data,     [KV_DB_XATTR] = key_xattr, [KV_DB_ORPHAN] = key_orphan,
		[KV_DB_EXTENT] = key_extent, [KV_DB_LEND] = key_lend,
	};
	const void *k, *v;
	size_t kl, vl;
	kv_iter *it;
	int rc;

	rc = kv_iter_open(d->t, a->db, &it);
	while (rc == 0 && (rc = kv_iter_next(it, &k, &kl, &v, &vl)) == 0) {
		if (a->hex) {
			put_hex(k, kl);
			putchar(' ');
			put_hex(v, vl);
			putchar('\n');
		} else {
			decode[a->db](d, k, kl, v, vl);
		}
	}
	kv_iter_close(it);
	if (rc != -ENOENT) {
		dump_error(d, "%s: cannot read: %s", kv_db_name(a->db), strerror(-rc));
		return EXIT_OPERATIONAL;
	}
	return d->errors ? EXIT_OPERATIONAL : EXIT_OK;
}
