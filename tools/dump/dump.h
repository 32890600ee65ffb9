/*
 * dump.h - what the files of kvfs-dump share: the state of one run, the
 * commands of the table in dump.c, and small helpers.
 *
 * Invariants:
 *  1. Every command reads one snapshot: it runs inside a single read
 *     transaction (d->t), so what it prints or exports is the image as of
 *     one commit, even while a daemon writes to it.
 *  2. Nothing read from the image is trusted: names, lengths and links are
 *     checked before use, and damage is reported (d->errors) and skipped,
 *     never a crash.
 *  3. Nothing read from the image reaches the terminal unescaped
 *     (cli_put_escaped).
 */
#ifndef KVFS_DUMP_H
#define KVFS_DUMP_H

#include <stdarg.h>
#include <stdint.h>

#include "kv.h"
#include "progress.h"

struct dump {
	const char *image;
	kv_env *env;
	kv_txn *t; /* the command's read transaction, when it has one */
	void *zbuf; /* a block's bytes, a compressed one's unpacked (dump_block) */
	unsigned errors;
	struct progress prog; /* export and backup draw it; erased before messages */
};

/* The arguments of a command, checked before the image is opened. */
struct dump_args {
	const char *path;  /* tree, inode: a path ("/..."); NULL: none given */
	uint64_t ino;      /* inode: a number, when path is NULL */
	enum kv_db db;     /* keys */
	int hex;           /* keys --hex */
	const char *dest;  /* export, backup */
	int export_kind;   /* export: what DEST is (enum export_kind) */
};

/* Commands: each returns an exit code (EXIT_OK or EXIT_OPERATIONAL). */
int dump_summary(struct dump *d, const struct dump_args *a);
int dump_tree(struct dump *d, const struct dump_args *a);
int dump_inode(struct dump *d, const struct dump_args *a);
int dump_keys(struct dump *d, const struct dump_args *a);
int dump_export(struct dump *d, const struct dump_args *a);

/* Report damage or a failure (d->errors counts them): "PROG: message",
 * after the progress line is erased and standard output flushed. */
void dump_error(struct dump *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The same about path (NULL: none): "PROG: 'PATH': message". */
void dump_verror_at(struct dump *d, const char *path, const char *fmt, va_list ap);
/* The inode a path ("/", "/a/b") names. -ENOENT, -ENOTDIR, or an error. */
int dump_resolve(struct dump *d, const char *path, uint64_t *ino);
/* Call fn for each entry of directory dir, in key order, read from its raw
 * dirent records: a malformed record is reported and skipped, so damage
 * hides only the names it holds. fn returns nonzero to stop. Returns 0,
 * fn's value, or an error reading the image. */
typedef int (*dump_dirent_fn)(void *arg, const struct kv_dirent *de);
int dump_dir_each(struct dump *d, uint64_t dir, dump_dirent_fn fn, void *arg);
/* The entries of one directory, copied (a walk's values do not outlive its
 * next step on an engine that reads them from a server: engine.h,
 * cur_forget) and sorted by name bytes, as strcmp orders them. */
struct dump_listing {
	char *names; /* back to back */
	size_t nlen, ncap;
	struct dump_lent {
		size_t off; /* into names */
		size_t len;
		uint64_t ino;
	} *ents;
	size_t n, cap;
};
/* Fill l (zeroed by the caller) with dir's entries, those for which skip
 * (when not NULL) returns nonzero left out; sorted. 0, or the error that
 * ended the read (-ENOMEM, or dump_dir_each's), l holding the entries read
 * before it, sorted too. dump_listing_free frees it either way. */
int dump_list_dir(struct dump *d, uint64_t dir, struct dump_listing *l,
		  int (*skip)(void *arg, const struct kv_dirent *de), void *arg);
void dump_listing_free(struct dump_listing *l);
/* "dir", "file", "symlink", "fifo", "chr", "blk", "sock" or "?". */
const char *dump_type_name(uint32_t mode);
/* The blocks of lend record b no record before it named, of one home's lend
 * records walked in key order (by first block lent): *end is the end of
 * the blocks they named so far (0 before the home's first record). */
uint64_t dump_lent_blocks(uint64_t *end, const struct kv_extent *b);
/* The data bytes of block value v (vl bytes) of (ino, idx), as
 * cli_block_data gives them (a compressed block's unpacked into d->zbuf,
 * valid until the next call): 0 plain, 1 compressed, -EIO (bad length or
 * checksum), -EBADMSG (a frame that does not decompress), -ENOMEM. */
int dump_block(struct dump *d, uint64_t ino, uint64_t idx, const void *v, size_t vl,
	       const void **data, size_t *len);
/* A name that can be created in a directory: 1-255 bytes, no '/' or NUL,
 * not "." or "..". */
int dump_name_ok(const char *name, size_t len);

#endif
