/*
 * dump.c - kvfs-dump: look inside a kvfs image. The command table, argument
 * checks (export's DEST among them), opening the image, and the commands
 * that need no walk of the tree: summary, and backup with the thread that
 * draws its progress. tree, inode and keys are in dump_show.c; export
 * in dump_export.c (directories) and dump_tar.c (tar archives).
 *
 *   kvfs-dump [-h|-V] IMAGE COMMAND [ARGS]
 *
 * Exit codes (fsck(8)'s): 0 done, 8 operational error (the image cannot be
 * opened, is damaged where the command looked, or DEST cannot be written),
 * 16 usage.
 *
 * summary prints "FIELD: VALUE" lines (the field padded to 16 columns):
 * the superblock, record counts (inodes by type, dirent names and keys,
 * data blocks, xattrs, orphans), the shared blocks (kv/share.c: extent
 * records and the blocks they borrow, the distinct blocks lent and the
 * files that lend them, deleted homes and the blocks they keep, and the
 * bytes sharing saves: borrowed blocks x block size, which no file stores
 * twice), the compressed blocks (how many, the data bytes they hold, the
 * bytes of their frames and the ratio of the two), the image's size and
 * the map's pages in use, the data stored (file block bytes, a shared
 * block once, a compressed block as the data it holds + symlink targets +
 * xattr names and values) and the amplification, image size / data stored
 * (and, where blocks are shared, image size / (data stored + sharing
 * saves): against the bytes the files would take unshared; where blocks
 * are compressed, image size / the data as stored, compressed blocks as
 * their frames: the overhead of the store alone).
 *
 * Invariants:
 *  1. Arguments are checked before the image is opened: a usage error is
 *     exit 16 whatever IMAGE holds.
 *  2. The image is opened read-only: no command writes to it, and every
 *     command may run while the image is mounted (read transactions do not
 *     block the daemon's writer).
 */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "dump.h"
#include "dump_export.h"
#include "walk.h"

static int dump_backup(struct dump *d, const struct dump_args *a);

static int parse_none(struct dump_args *a, int argc, char **argv);
static int parse_path(struct dump_args *a, int argc, char **argv);
static int parse_inode(struct dump_args *a, int argc, char **argv);
static int parse_keys(struct dump_args *a, int argc, char **argv);
static int parse_dest(struct dump_args *a, int argc, char **argv);
static int parse_export(struct dump_args *a, int argc, char **argv);

/* One read transaction around run() (dump.h invariant 1); commands without
 * it manage their own. */
#define CMD_TXN 1

static const struct dump_cmd {
	const char *name, *args, *help;
	int (*parse)(struct dump_args *a, int argc, char **argv);
	int (*run)(struct dump *d, const struct dump_args *a);
	unsigned flags;
} commands[] = {
	{"summary", "", "superblock, counts, space used against data stored", parse_none,
	 dump_summary, 0},
	{"tree", "[PATH]", "the directory tree with inode numbers, types and sizes", parse_path,
	 dump_tree, CMD_TXN},
	{"inode", "N|PATH", "one inode: attributes, names, blocks, shares, xattrs",
	 parse_inode, dump_inode, CMD_TXN},
	{"keys", "DB [--hex]", "raw records of database DB, decoded (see below)", parse_keys,
	 dump_keys, CMD_TXN},
	{"export", "DEST|-", "the tree into directory DEST, or a tar archive (see below)",
	 parse_export, dump_export, 0},
	{"backup", "DEST", "a compacted, consistent copy of IMAGE in new file DEST",
	 parse_dest, dump_backup, 0},
};
#define NCOMMANDS (sizeof(commands) / sizeof(commands[0]))

static void usage(FILE *f)
{
	fprintf(f,
		"usage: %s [-h|-V] IMAGE COMMAND [ARGS]\n"
		"Show what a kvfs image holds, export its tree, or back it up. IMAGE is\n"
		"opened read-only and may be mounted.\n"
		"\n"
		"Commands:\n",
		cli_prog);
	for (size_t i = 0; i < NCOMMANDS; i++)
		fprintf(f, "  %-8s %-11s %s\n", commands[i].name, commands[i].args,
			commands[i].help);
	fprintf(f, "\n"
		"  -h, --help     show this help and exit\n"
		"  -V, --version  show the version and exit\n"
		"\n"
		"Every command reads one snapshot, so all of them, export and backup too,\n"
		"may run while IMAGE is mounted and in use. export writes a pax tar archive\n"
		"when DEST ends in .tar, compressed for .tar.gz or .tgz, .tar.bz2 or .tbz2,\n"
		".tar.xz or .txz, .tar.zst or .tzst; to standard output for - (never to a\n"
		"terminal); into DEST when it is a directory; else into a new directory\n"
		"DEST (refused when DEST ends like another archive, .zip or .gz ...).\n"
		"The databases keys reads: meta, inode, dirent, data, xattr, orphan, extent\n"
		"(blocks a file borrows from another: copy_file_range's shared blocks) and\n"
		"lend (the same records, by the file that stores the blocks).\n"
		"Names are printed with control characters, backslashes and invalid UTF-8\n"
		"escaped (\\n, \\\\, \\xHH).\n"
		"\n"
		"Exit status: 0 done, 8 error (IMAGE unreadable or damaged where the\n"
		"command looked, DEST not writable), 16 usage.\n");
}

/* ------------------------------------------------------------- parsing -- */

static int parse_none(struct dump_args *a, int argc, char **argv)
{
	(void)a;
	(void)argv;
	if (argc > 0) {
		cli_error("too many arguments");
		return -1;
	}
	return 0;
}

static int parse_path(struct dump_args *a, int argc, char **argv)
{
	if (argc > 1) {
		cli_error("too many arguments");
		return -1;
	}
	a->path = argc ? argv[0] : "/";
	if (a->path[0] != '/') {
		cli_error("path '%s' must start with '/'", a->path);
		return -1;
	}
	return 0;
}

static int parse_inode(struct dump_args *a, int argc, char **argv)
{
	char *end;

	if (argc != 1) {
		cli_error(argc ? "too many arguments" : "no inode given (a number or a /path)");
		return -1;
	}
	if (argv[0][0] == '/') {
		a->path = argv[0];
		return 0;
	}
	errno = 0;
	a->ino = strtoull(argv[0], &end, 10);
	if (errno || end == argv[0] || *end || argv[0][0] == '-' || a->ino == 0) {
		cli_error("invalid inode '%s' (a number from 1, or a path from /)", argv[0]);
		return -1;
	}
	return 0;
}

static int parse_keys(struct dump_args *a, int argc, char **argv)
{
	const char *db = NULL;

	for (int i = 0; i < argc; i++) {
		if (strcmp(argv[i], "--hex") == 0 || strcmp(argv[i], "-x") == 0) {
			a->hex = 1;
		} else if (argv[i][0] == '-' && argv[i][1]) {
			cli_error("unknown option '%s'", argv[i]);
			return -1;
		} else if (db) {
			cli_error("too many arguments");
			return -1;
		} else {
			db = argv[i];
		}
	}
	if (!db) {
		cli_error("no database given");
		return -1;
	}
	if (kv_db_lookup(db, &a->db)) {
		cli_error("no database '%s' (meta, inode, dirent, data, xattr, orphan, extent, "
			  "lend)", db);
		return -1;
	}
	return 0;
}

static int parse_dest(struct dump_args *a, int argc, char **argv)
{
	if (argc != 1 || !argv[0][0]) {
		cli_error(argc > 1 ? "too many arguments" : "no destination given");
		return -1;
	}
	a->dest = argv[0];
	return 0;
}

static int parse_export(struct dump_args *a, int argc, char **argv)
{
	if (parse_dest(a, argc, argv))
		return -1;
	a->export_kind = export_kind_of(a->dest);
	if (a->export_kind == EXPORT_STDOUT && isatty(STDOUT_FILENO)) {
		cli_error("refusing to write a tar archive to a terminal: redirect standard "
			  "output, or name a file or directory");
		return -1;
	}
	if (a->export_kind == EXPORT_UNKNOWN) {
		cli_error("'%s': export writes no archive of that kind; it writes %s, '-' for a "
			  "tar on standard output, or a directory of any other name", a->dest,
			  export_tar_suffixes);
		return -1;
	}
	return 0;
}

/* ------------------------------------------------------------- helpers -- */

void dump_verror_at(struct dump *d, const char *path, const char *fmt, va_list ap)
{
	d->errors++;
	fflush(stdout);
	progress_clear(&d->prog);
	cli_verror_at(path, fmt, ap);
}

void dump_error(struct dump *d, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	dump_verror_at(d, NULL, fmt, ap);
	va_end(ap);
}

const char *dump_type_name(uint32_t mode)
{
	switch (mode & S_IFMT) {
	case S_IFDIR: return "dir";
	case S_IFREG: return "file";
	case S_IFLNK: return "symlink";
	case S_IFIFO: return "fifo";
	case S_IFCHR: return "chr";
	case S_IFBLK: return "blk";
	case S_IFSOCK: return "sock";
	default: return "?";
	}
}

int dump_block(struct dump *d, uint64_t ino, uint64_t idx, const void *v, size_t vl,
	       const void **data, size_t *len)
{
	return cli_block_data(d->env, ino, idx, v, vl, d->zbuf, data, len);
}

uint64_t dump_lent_blocks(uint64_t *end, const struct kv_extent *b)
{
	uint64_t from = b->hfirst > *end ? b->hfirst : *end;

	if (b->hfirst + b->count <= from)
		return 0;
	*end = b->hfirst + b->count;
	return *end - from;
}

int dump_name_ok(const char *name, size_t len)
{
	if (len == 0 || len > KV_NAME_MAX || memchr(name, '/', len) || memchr(name, '\0', len))
		return 0;
	return !(len == 1 && name[0] == '.') && !(len == 2 && name[0] == '.' && name[1] == '.');
}

struct dir_walk {
	struct dump *d;
	uint64_t dir;
	dump_dirent_fn fn;
	void *arg;
};

/* One dirent record of the directory: each entry of its list to fn. */
static int dir_record(void *arg, const void *k, size_t kl, const void *v, size_t vl)
{
	struct dir_walk *w = arg;
	struct kv_dirent de;
	struct kv_key key;
	size_t off = 0;
	int drc, rc = 0;

	if (kv_key_decode(KV_DB_DIRENT, k, kl, &key)) {
		dump_error(w->d, "directory %llu: malformed dirent key; skipped",
			   (unsigned long long)w->dir);
		return 0;
	}
	while ((drc = kv_decode_dirent(v, vl, &off, &de, NULL)) == 0 &&
	       (rc = w->fn(w->arg, &de)) == 0)
		;
	if (rc)
		return rc;
	if (drc < 0 || off == 0)
		dump_error(w->d, "directory %llu: malformed dirent list (hash %#llx); skipped",
			   (unsigned long long)w->dir, (unsigned long long)key.hash);
	return 0;
}

int dump_dir_each(struct dump *d, uint64_t dir, dump_dirent_fn fn, void *arg)
{
	struct dir_walk w = {.d = d, .dir = dir, .fn = fn, .arg = arg};

	return walk_inode(d->t, KV_DB_DIRENT, dir, dir_record, &w);
}

struct list_walk {
	struct dump_listing *l;
	int (*skip)(void *arg, const struct kv_dirent *de);
	void *arg;
};

static int list_add(void *arg, const struct kv_dirent *de)
{
	struct list_walk *w = arg;
	struct dump_listing *l = w->l;
	struct dump_lent *ents;
	char *names;

	if (w->skip && w->skip(w->arg, de))
		return 0;
	names = array_reserve(l->names, &l->ncap, l->nlen + de->namelen, 1, 4096);
	if (!names)
		return -ENOMEM;
	l->names = names;
	ents = array_reserve(l->ents, &l->cap, l->n + 1, sizeof(*ents), 64);
	if (!ents)
		return -ENOMEM;
	l->ents = ents;
	memcpy(l->names + l->nlen, de->name, de->namelen);
	l->ents[l->n++] = (struct dump_lent){l->nlen, de->namelen, de->ino};
	l->nlen += de->namelen;
	return 0;
}

static int by_name(const void *a, const void *b, void *names)
{
	const struct dump_lent *p = a, *q = b;
	const char *base = names;
	int c = memcmp(base + p->off, base + q->off, p->len < q->len ? p->len : q->len);

	return c ? c : (p->len > q->len) - (p->len < q->len);
}

int dump_list_dir(struct dump *d, uint64_t dir, struct dump_listing *l,
		  int (*skip)(void *arg, const struct kv_dirent *de), void *arg)
{
	struct list_walk w = {.l = l, .skip = skip, .arg = arg};
	int rc = dump_dir_each(d, dir, list_add, &w);

	if (l->n)
		qsort_r(l->ents, l->n, sizeof(*l->ents), by_name, l->names);
	return rc;
}

void dump_listing_free(struct dump_listing *l)
{
	free(l->names);
	free(l->ents);
}

int dump_resolve(struct dump *d, const char *path, uint64_t *ino)
{
	uint64_t cur = KV_ROOT_INO;
	struct kv_inode in;
	struct kv_dirent de;
	const char *p = path;
	int rc;

	while (*p) {
		const char *end;
		size_t len;

		while (*p == '/')
			p++;
		end = strchrnul(p, '/');
		len = (size_t)(end - p);
		if (len == 0)
			break;
		rc = kv_inode_get(d->t, cur, &in);
		if (rc)
			return rc;
		if (!S_ISDIR(in.mode))
			return -ENOTDIR;
		if (len == 1 && p[0] == '.')
			rc = 0;
		else if (len == 2 && p[0] == '.' && p[1] == '.')
			cur = in.parent ? in.parent : KV_ROOT_INO;
		else if ((rc = kv_dirent_lookup(d->t, cur, p, len, &de)) == 0)
			cur = de.ino;
		if (rc)
			return rc;
		p = end;
	}
	*ino = cur;
	return 0;
}

/* ------------------------------------------------------------- summary -- */

struct counts {
	uint64_t by_type[16]; /* by kv_dirent_type: DT_DIR, DT_REG, ... */
	uint64_t inodes, names, dirent_keys, blocks, unwritten, xattrs, orphans;
	uint64_t block_bytes, inline_bytes, xattr_bytes; /* block_bytes: the data they hold */
	uint64_t zblocks, zdata, zframes; /* compressed blocks, their data and frame bytes */
	/* shared blocks (kv/share.c) */
	uint64_t extents, borrowed; /* extent records, the blocks they cover */
	uint64_t homes, lent;       /* files lending, distinct blocks of theirs lent */
	uint64_t dead_homes, kept;  /* of them deleted, and the blocks they store */
	uint64_t home, home_end;    /* the lend walk: its home, the end of what it lends */
	char defaults[KV_DEFAULTS_MAX + 1]; /* kvfs-tune -o */
};

typedef void count_fn(struct dump *d, struct counts *c, const unsigned char *k, size_t kl,
		      const void *v, size_t vl);

struct count_walk {
	struct dump *d;
	struct counts *c;
	count_fn *fn;
};

static int count_record(void *arg, const void *k, size_t kl, const void *v, size_t vl)
{
	struct count_walk *w = arg;

	w->fn(w->d, w->c, k, kl, v, vl);
	return 0;
}

/* Walk one database, calling fn for each record; -EIO-style damage inside a
 * record is fn's to report. */
static int walk_db(struct dump *d, enum kv_db db, struct counts *c, count_fn *fn)
{
	struct count_walk w = {.d = d, .c = c, .fn = fn};

	return walk_records(d->t, db, NULL, 0, count_record, &w);
}

static void count_inode(struct dump *d, struct counts *c, const unsigned char *k, size_t kl,
			const void *v, size_t vl)
{
	struct kv_inode in;
	struct kv_key key;

	if (kv_key_decode(KV_DB_INODE, k, kl, &key) || kv_decode_inode(key.ino, v, vl, &in)) {
		dump_error(d, "malformed inode record (key of %zu bytes, value of %zu)", kl, vl);
		return;
	}
	c->inodes++;
	c->by_type[kv_dirent_type(in.mode)]++;
	c->inline_bytes += in.inline_len;
}

static void count_dirent(struct dump *d, struct counts *c, const unsigned char *k, size_t kl,
			 const void *v, size_t vl)
{
	struct kv_dirent de;
	struct kv_key key;
	size_t off = 0;
	int rc;

	c->dirent_keys++;
	while ((rc = kv_decode_dirent(v, vl, &off, &de, NULL)) == 0)
		c->names++;
	if (kv_key_decode(KV_DB_DIRENT, k, kl, &key) || rc < 0) /* key.ino: 0 if none */
		dump_error(d, "malformed dirent record in directory %llu",
			   (unsigned long long)key.ino);
}

/* A compressed block counts the data it holds (its frame's content size,
 * its checksum checked, nothing decompressed); a damaged value counts its
 * bytes, as a plain block's. */
static void count_block(struct dump *d, struct counts *c, const unsigned char *k, size_t kl,
			const void *v, size_t vl)
{
	size_t len = kv_block_len(vl), data;
	struct kv_key key;

	c->blocks++;
	c->unwritten += vl == KV_BLOCK_UNWRITTEN_LEN;
	if (kv_key_decode(KV_DB_DATA, k, kl, &key) == 0 &&
	    kv_check_block(d->env, key.ino, key.idx, v, vl, &data) == 1) {
		c->zblocks++;
		c->zdata += data;
		c->zframes += len;
		len = data;
	}
	c->block_bytes += len;
}

static void count_xattr(struct dump *d, struct counts *c, const unsigned char *k, size_t kl,
			const void *v, size_t vl)
{
	struct kv_key key;

	(void)d;
	(void)v;
	kv_key_decode(KV_DB_XATTR, k, kl, &key); /* a malformed key counts what name it has */
	c->xattrs++;
	c->xattr_bytes += key.namelen + vl;
}

static void count_extent(struct dump *d, struct counts *c, const unsigned char *k, size_t kl,
			 const void *v, size_t vl)
{
	struct kv_extent b;

	if (kv_decode_extent(KV_DB_EXTENT, k, kl, v, vl, &b)) {
		dump_error(d, "malformed extent record (key of %zu bytes, value of %zu)", kl, vl);
		return;
	}
	c->extents++;
	c->borrowed += b.count;
}

static int count_one(void *arg, const void *k, size_t kl, const void *v, size_t vl)
{
	(void)k;
	(void)kl;
	(void)v;
	(void)vl;
	++*(uint64_t *)arg;
	return 0;
}

/* A home with no inode record
 * is a deleted file that keeps what it lent (share.c invariant 4): its data
 * records are what it keeps. */
static void count_lend(struct dump *d, struct counts *c, const unsigned char *k, size_t kl,
		       const void *v, size_t vl)
{
	struct kv_inode in;
	struct kv_extent b;

	if (kv_decode_extent(KV_DB_LEND, k, kl, v, vl, &b)) {
		dump_error(d, "malformed lend record (key of %zu bytes, value of %zu)", kl, vl);
		return;
	}
	if (c->homes == 0 || b.home != c->home) {
		c->homes++;
		c->home = b.home;
		c->home_end = 0;
		if (kv_inode_get(d->t, b.home, &in) == -ENOENT) {
			c->dead_homes++;
			if (walk_inode(d->t, KV_DB_DATA, b.home, count_one, &c->kept))
				dump_error(d, "inode %llu (deleted): cannot count its blocks",
					   (unsigned long long)b.home);
		}
	}
	c->lent += dump_lent_blocks(&c->home_end, &b);
}

static void print_field(const char *name, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void print_field(const char *name, const char *fmt, ...)
{
	va_list ap;

	printf("%-16s", name);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
}

/* The names of the incompatible features set, after their bits: " (unwritten
 * blocks, compressed blocks)", or "" for none. */
static void feature_names(uint64_t incompat, char *out, size_t len)
{
	static const struct {
		uint64_t bit;
		const char *name;
	} names[] = {
		{KV_FEATURE_INCOMPAT_UNWRITTEN, "unwritten blocks"},
		{KV_FEATURE_INCOMPAT_SHARED, "shared blocks"},
		{KV_FEATURE_INCOMPAT_COMPRESSED, "compressed blocks"},
	};
	size_t n = 0;

	out[0] = '\0';
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (incompat & names[i].bit)
			n += (size_t)snprintf(out + n, len - n, "%s%s", n ? ", " : " (",
					      names[i].name);
	if (incompat & ~KV_FEATURE_INCOMPAT_KNOWN)
		n += (size_t)snprintf(out + n, len - n, "%sunknown %#llx", n ? ", " : " (",
				      (unsigned long long)(incompat & ~KV_FEATURE_INCOMPAT_KNOWN));
	if (n)
		snprintf(out + n, len - n, ")");
}

/* The blocks stored compressed: their data against their frames. */
static void print_compressed(const struct counts *c)
{
	char b1[64], b2[64];

	if (!c->zblocks) {
		print_field("compressed:", "0 blocks");
		return;
	}
	cli_format_bytes(c->zdata, b1, sizeof(b1));
	cli_format_bytes(c->zframes, b2, sizeof(b2));
	print_field("compressed:", "%llu blocks: %llu bytes of data (%s) in frames of %llu (%s), "
		    "ratio %.2f", (unsigned long long)c->zblocks, (unsigned long long)c->zdata, b1,
		    (unsigned long long)c->zframes, b2,
		    c->zframes ? (double)c->zdata / (double)c->zframes : 0);
}

/* The data stored, and the ratios of the image to it. */
static void print_stored(const struct kv_usage *u, const struct counts *c, uint64_t saved)
{
	uint64_t stored = c->block_bytes + c->inline_bytes + c->xattr_bytes;
	uint64_t framed = stored - c->zdata + c->zframes; /* as the values hold it */
	double image = (double)u->file_bytes;
	char b1[64], b2[64];

	cli_format_bytes(stored, b2, sizeof(b2));
	print_field("data stored:", "%llu bytes (%s: file blocks %llu, inline %llu, xattrs %llu%s)",
		    (unsigned long long)stored, b2, (unsigned long long)c->block_bytes,
		    (unsigned long long)c->inline_bytes, (unsigned long long)c->xattr_bytes,
		    c->zblocks ? "; a compressed block counts the data it holds" : "");
	if (c->zblocks) {
		cli_format_bytes(framed, b2, sizeof(b2));
		print_field("as stored:", "%llu bytes (%s: data stored, a compressed block "
			    "counting its frame instead)", (unsigned long long)framed, b2);
	}
	if (!stored) {
		print_field("amplification:", "- (no data stored)");
		return;
	}
	snprintf(b1, sizeof(b1), "; %.2f / data stored + sharing saves",
		 image / ((double)stored + (double)saved));
	snprintf(b2, sizeof(b2), "; %.2f / as stored", framed ? image / (double)framed : 0);
	print_field("amplification:", "%.2f (image size / data stored%s%s)", image / (double)stored,
		    saved ? b1 : "", c->zblocks ? b2 : "");
}

static void print_summary(struct dump *d, const struct kv_usage *u, const struct counts *c)
{
	const uint64_t *t = c->by_type;
	uint64_t saved;
	struct kv_super s;
	char buf[64], names[128];

	kv_super_get(d->env, &s);
	/* a borrowed block is whole (share.c invariant 2): a copy would store
	 * block-size bytes again */
	saved = c->borrowed * s.block_size;
	print_field("image:", "%s", d->image);
	print_field("format version:", "%u", s.version);
	cli_format_uuid(s.uuid, buf);
	print_field("uuid:", "%s", buf);
	printf("%-16s", "label:");
	cli_print_label(stdout, s.label);
	print_field("block size:", "%u", s.block_size);
	cli_format_time(s.created_ns, buf, sizeof(buf));
	print_field("created:", "%s", buf);
	print_field("inode counter:", "%llu", (unsigned long long)s.next_ino);
	feature_names(s.feature_incompat, names, sizeof(names));
	print_field("features:", "compat %#llx, ro_compat %#llx, incompat %#llx%s",
		    (unsigned long long)s.feature_compat, (unsigned long long)s.feature_ro_compat,
		    (unsigned long long)s.feature_incompat, names);
	print_field("mount defaults:", "%s", c->defaults[0] ? c->defaults : "(none)");
	print_field("inodes:", "%llu (dir %llu, file %llu, symlink %llu, fifo %llu, chr %llu, "
		    "blk %llu, sock %llu)", (unsigned long long)c->inodes,
		    (unsigned long long)t[DT_DIR], (unsigned long long)t[DT_REG],
		    (unsigned long long)t[DT_LNK], (unsigned long long)t[DT_FIFO],
		    (unsigned long long)t[DT_CHR], (unsigned long long)t[DT_BLK],
		    (unsigned long long)t[DT_SOCK]);
	print_field("dirents:", "%llu names in %llu keys", (unsigned long long)c->names,
		    (unsigned long long)c->dirent_keys);
	print_field("data blocks:", "%llu (%llu unwritten: fallocate's, read as zeros)",
		    (unsigned long long)c->blocks, (unsigned long long)c->unwritten);
	print_compressed(c);
	print_field("extents:", "%llu (%llu blocks borrowed)", (unsigned long long)c->extents,
		    (unsigned long long)c->borrowed);
	print_field("blocks lent:", "%llu (distinct home blocks; homes: %llu)",
		    (unsigned long long)c->lent, (unsigned long long)c->homes);
	print_field("deleted homes:", "%llu (keeping %llu blocks for their borrowers)",
		    (unsigned long long)c->dead_homes, (unsigned long long)c->kept);
	cli_format_bytes(saved, buf, sizeof(buf));
	if (saved)
		print_field("sharing saves:", "%llu bytes (%s: %llu borrowed blocks of %u, "
			    "stored once)", (unsigned long long)saved, buf,
			    (unsigned long long)c->borrowed, s.block_size);
	else
		print_field("sharing saves:", "0 bytes (no file borrows blocks)");
	print_field("xattrs:", "%llu", (unsigned long long)c->xattrs);
	print_field("orphans:", "%llu", (unsigned long long)c->orphans);
	cli_format_bytes(u->file_bytes, buf, sizeof(buf));
	print_field("image size:", "%llu bytes (%s)", (unsigned long long)u->file_bytes, buf);
	cli_format_bytes(u->used_bytes, buf, sizeof(buf));
	print_field("map used:", "%llu bytes (%s, pages of %u bytes)",
		    (unsigned long long)u->used_bytes, buf, u->page_size);
	print_stored(u, c, saved);
}

int dump_summary(struct dump *d, const struct dump_args *a)
{
	struct counts c = {0};
	struct kv_usage u;
	int rc;

	(void)a;
	/* its own read transaction: taken before ours, a moment earlier */
	rc = kv_usage_get(d->env, &u);
	if (rc) {
		dump_error(d, "'%s': cannot read usage: %s", d->image, strerror(-rc));
		return EXIT_OPERATIONAL;
	}
	rc = kv_read_begin(d->env, &d->t);
	if (rc) {
		dump_error(d, "'%s': %s", d->image, strerror(-rc));
		return EXIT_OPERATIONAL;
	}
	rc = walk_db(d, KV_DB_INODE, &c, count_inode);
	if (!rc)
		rc = walk_db(d, KV_DB_DIRENT, &c, count_dirent);
	if (!rc)
		rc = walk_db(d, KV_DB_DATA, &c, count_block);
	if (!rc)
		rc = walk_db(d, KV_DB_EXTENT, &c, count_extent);
	if (!rc)
		rc = walk_db(d, KV_DB_LEND, &c, count_lend);
	if (!rc)
		rc = walk_db(d, KV_DB_XATTR, &c, count_xattr);
	if (!rc)
		rc = kv_db_count(d->t, KV_DB_ORPHAN, &c.orphans);
	if (!rc && kv_defaults_get(d->t, c.defaults, sizeof(c.defaults)) != 0)
		strcpy(c.defaults, "(damaged)");
	kv_read_end(d->t);
	d->t = NULL;
	if (rc) {
		dump_error(d, "'%s': cannot read: %s", d->image, strerror(-rc));
		return EXIT_OPERATIONAL;
	}
	print_summary(d, &u, &c);
	return d->errors ? EXIT_OPERATIONAL : EXIT_OK;
}

/* -------------------------------------------------------------- backup -- */

/* The backup's progress: LMDB copies the image in one call, so a thread
 * watches the copy grow against the pages in use (what a compacted copy
 * holds, about), and draws the line until told to stop. */
struct watch {
	struct dump *d;
	const char *dest;
	uint64_t total;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int done;
};

static void watch_draw(struct watch *w, double frac, uint64_t bytes)
{
	char b1[32], b2[32];

	cli_format_bytes(bytes, b1, sizeof(b1));
	cli_format_bytes(w->total, b2, sizeof(b2));
	progress_draw(&w->d->prog, frac, "%s: backup: %s of about %s", cli_prog, b1, b2);
}

static void *watch_run(void *arg)
{
	struct watch *w = arg;
	struct timespec until;
	struct stat st;

	pthread_mutex_lock(&w->lock);
	while (!w->done) {
		uint64_t n = stat(w->dest, &st) == 0 ? (uint64_t)st.st_size : 0;
		double frac = w->total ? (double)n / (double)w->total : 0;

		/* the estimate may fall short: never 100% before the end */
		watch_draw(w, frac < 0.999 ? frac : 0.999, n);
		clock_gettime(CLOCK_MONOTONIC, &until);
		until.tv_nsec += (long)(PROGRESS_EVERY * 1e9);
		if (until.tv_nsec >= 1000000000L) {
			until.tv_nsec -= 1000000000L;
			until.tv_sec++;
		}
		while (!w->done && pthread_cond_timedwait(&w->cond, &w->lock, &until) == 0)
			;
	}
	pthread_mutex_unlock(&w->lock);
	return NULL;
}

/* Start the watcher when the line is on; 0 when it runs. */
static int watch_start(struct watch *w, struct dump *d, const char *dest, pthread_t *thread)
{
	struct kv_usage u;
	pthread_condattr_t ca;

	memset(w, 0, sizeof(*w));
	w->d = d;
	w->dest = dest;
	if (!d->prog.on || kv_usage_get(d->env, &u) != 0)
		return -1;
	w->total = u.used_bytes;
	pthread_mutex_init(&w->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&w->cond, &ca);
	pthread_condattr_destroy(&ca);
	if (pthread_create(thread, NULL, watch_run, w) == 0)
		return 0;
	pthread_cond_destroy(&w->cond);
	pthread_mutex_destroy(&w->lock);
	return -1;
}

static void watch_stop(struct watch *w, pthread_t thread, int ok)
{
	struct stat st;

	pthread_mutex_lock(&w->lock);
	w->done = 1;
	pthread_cond_signal(&w->cond);
	pthread_mutex_unlock(&w->lock);
	pthread_join(thread, NULL);
	pthread_cond_destroy(&w->cond);
	pthread_mutex_destroy(&w->lock);
	if (ok && stat(w->dest, &st) == 0)
		watch_draw(w, 1, (uint64_t)st.st_size);
	progress_clear(&w->d->prog);
}

static int dump_backup(struct dump *d, const struct dump_args *a)
{
	struct kv_open_opts ro = {.readonly = 1};
	kv_env *copy;
	struct watch w;
	pthread_t thread;
	struct stat st;
	char err[512], size[32];
	int rc, watching;

	watching = watch_start(&w, d, a->dest, &thread) == 0;
	rc = kv_backup(d->env, a->dest, err, sizeof(err));
	if (watching)
		watch_stop(&w, thread, rc == 0);
	if (rc) {
		dump_error(d, "%s", err);
		return EXIT_OPERATIONAL;
	}
	/* a copy that does not open is no backup */
	rc = kv_open(a->dest, &ro, &copy, err, sizeof(err));
	if (rc) {
		dump_error(d, "the backup does not open: %s", err);
		return EXIT_OPERATIONAL;
	}
	kv_close(copy);
	if (stat(a->dest, &st) != 0)
		st.st_size = 0;
	cli_format_bytes((uint64_t)st.st_size, size, sizeof(size));
	printf("backed up '%s' to '%s' (%s)\n", d->image, a->dest, size);
	return EXIT_OK;
}

/* ---------------------------------------------------------------- main -- */

static int run(const struct dump_cmd *cmd, const char *image, const struct dump_args *a)
{
	struct kv_open_opts ro = {.readonly = 1};
	struct dump d = {.image = image};
	char err[512];
	int rc, code;

	progress_init(&d.prog, isatty(STDERR_FILENO));
	cli_crash_guard(image);
	rc = kv_open(image, &ro, &d.env, err, sizeof(err));
	if (rc) {
		cli_error("%s", err);
		return EXIT_OPERATIONAL;
	}
	d.zbuf = malloc(kv_block_size(d.env));
	if (!d.zbuf) {
		cli_error("out of memory");
		code = EXIT_OPERATIONAL;
		goto env_close;
	}
	if (cmd->flags & CMD_TXN) {
		rc = kv_read_begin(d.env, &d.t);
		if (rc) {
			cli_error("'%s': %s", image, strerror(-rc));
			code = EXIT_OPERATIONAL;
			goto env_close;
		}
	}
	code = cmd->run(&d, a);
	if (d.t)
		kv_read_end(d.t);
env_close:
	free(d.zbuf);
	kv_close(d.env);
	if (fflush(stdout) != 0 || ferror(stdout)) {
		cli_error("cannot write the output: %s", strerror(errno));
		code = EXIT_OPERATIONAL;
	}
	return code;
}

int cmd_dump(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"help", no_argument, NULL, 'h'},
		{"version", no_argument, NULL, 'V'},
		{NULL, 0, NULL, 0},
	};
	struct dump_args a = {0};
	const struct dump_cmd *cmd = NULL;
	int c;

	/* '+': options end at IMAGE; the rest belong to the command */
	opterr = 0;
	while ((c = getopt_long(argc, argv, "+hV", longopts, NULL)) != -1) {
		/* -h, -V, and the usage errors */
		return cli_other_option(c, argv, usage);
	}
	if (argc - optind < 2) {
		cli_error(optind == argc ? "no image given" : "no command given");
		usage(stderr);
		return EXIT_USAGE;
	}
	for (size_t i = 0; i < NCOMMANDS; i++)
		if (strcmp(argv[optind + 1], commands[i].name) == 0)
			cmd = &commands[i];
	if (!cmd) {
		cli_error("unknown command '%s'", argv[optind + 1]);
		usage(stderr);
		return EXIT_USAGE;
	}
	if (cmd->parse(&a, argc - optind - 2, argv + optind + 2)) {
		fprintf(stderr, "usage: %s IMAGE %s %s\n", cli_prog, cmd->name, cmd->args);
		return EXIT_USAGE;
	}
	return run(cmd, argv[optind], &a);
}

int main(int argc, char **argv)
{
	cli_init(argv);
	return cmd_dump(argc, argv);
}
