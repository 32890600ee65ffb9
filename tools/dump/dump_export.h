/*
 * dump_export.h - the export walk (dump_export.c) and its two sinks: a
 * directory (dump_export.c) and a pax tar archive, plain or compressed, in a
 * file or on standard output (dump_tar.c).
 *
 * The walk visits every inode reachable from the root once, in one read
 * transaction, in the order tar -C DIR --sort=name -c . writes: a directory
 * before its entries (entry) and again after them (dir_done), the entries of
 * a directory by name bytes (strcmp's order). A further name of an inode
 * already exported arrives with link_to set to the path it was exported at
 * (the first name in that order carries the data).
 */
#ifndef KVFS_DUMP_EXPORT_H
#define KVFS_DUMP_EXPORT_H

#include <stddef.h>
#include <stdint.h>

#include "dump.h"

struct export;

struct xent {
	const char *path;          /* from the export root: "." for the root, else "a/b" */
	const char *name;          /* the last component, NUL-terminated ("." for the root) */
	const struct kv_inode *in;
	const char *link_to;       /* a further name of the inode exported at this path */
};

struct xsink {
	/* Create DEST; -1 when it cannot be (reported). */
	int (*open)(struct export *x);
	/* Export one entry; for a directory, before its entries. Nonzero: not
	 * exported (reported); a directory's entries are then skipped. */
	int (*entry)(struct export *x, const struct xent *e);
	/* A directory's entries are done (its times can be set now). */
	void (*dir_done)(struct export *x, const struct xent *e);
	/* Finish DEST; -1 on failure (reported). */
	int (*close)(struct export *x);
};

/* What export makes of DEST (dump.c decides before opening the image). */
enum export_kind {
	EXPORT_DIR,     /* a directory: an existing one, or a name not below */
	EXPORT_TAR,     /* a tar archive, compressed as the name's suffix says */
	EXPORT_STDOUT,  /* "-": a tar archive on standard output */
	EXPORT_UNKNOWN, /* the name of an archive or compressed file export does not write */
};
enum export_kind export_kind_of(const char *dest);
/* The suffixes of the tar archives export writes, for messages. */
extern const char export_tar_suffixes[];

struct export {
	struct dump *d;
	const char *dest; /* for messages: the name given, or "standard output" */
	int to_stdout;
	const struct xsink *sink;
	void *priv;       /* the sink's */
	int fatal;        /* DEST cannot be written any more: stop */
	int as_root;      /* may set owners and make device nodes */
	uint64_t inodes;  /* exported inodes */
	uint64_t bytes;   /* file bytes exported */
	uint64_t blocks;  /* data blocks exported */
	uint64_t inodes_total; /* inode records in the image */
	uint64_t total;   /* inode and block records in the image: the progress's 100% */
	char *path;       /* the current entry's path */
	size_t pathlen, pathcap;
	kv_iter *ext_it;  /* export_data's: extent records, and the blocks they name */
	kv_iter *home_it;
};

extern const struct xsink export_dir_sink, export_tar_sink;

/* Report a failure at entry e: "PROG: 'PATH': message" (the path escaped). */
void export_error(struct export *x, const struct xent *e, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

typedef int (*export_data_fn)(void *arg, uint64_t off, const void *data, size_t len);
/* What export_data does besides calling fn: report a block failing its
 * checksum (XDATA_REPORT), count the blocks toward the progress line
 * (XDATA_COUNT). A sink that walks a file twice asks for each on one walk:
 * the count on the walk that writes. */
#define XDATA_REPORT 1u
#define XDATA_COUNT 2u
/* Call fn for each block of a regular file that holds bytes, in order,
 * clipped to the file's size: its own stored blocks and the blocks it
 * borrows (extent records), read from their homes as the daemon reads them,
 * a compressed block's bytes unpacked (valid until fn returns). A block
 * failing its checksum or whose frame does not decompress, or a borrowed
 * one whose home block is missing, is skipped: it reads as zeros. Returns
 * 0, fn's nonzero result, or an error reading the image. */
int export_data(struct export *x, const struct xent *e, unsigned flags, export_data_fn fn,
		void *arg);
/* Redraw the progress line if it is due. */
void export_progress(struct export *x);

typedef int (*export_xattr_fn)(void *arg, const char *name, const void *val, size_t len);
/* Call fn for each extended attribute of e (name NUL-terminated). A name
 * that cannot be set (empty, too long, with a NUL) is reported and skipped. */
int export_xattrs(struct export *x, const struct xent *e, export_xattr_fn fn, void *arg);

#endif
