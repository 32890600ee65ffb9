/*
 * cli.h - helpers shared by the command-line tools: messages, the printing
 * of what an image holds, and the exit codes of fsck(8) that every kvfs
 * tool follows. What the daemon needs too (sizes, message lines, the crash
 * guard) is in common/common.h, below both.
 *
 * Errors in the tools: a function that has already printed its message
 * (through cli_error, or a tool's reporter: dump_error, export_error,
 * mkfs -d's fail) returns -1, as git's error() does, and its callers only
 * pass the failure up, printing nothing more. A function that prints
 * nothing returns 0 or a negative errno, and its caller says what failed.
 * One function never mixes the two. A command (cmd_mkfs, cmd_fsck,
 * cmd_dump and dump's views) returns an exit code, EXIT_* below.
 */
#ifndef KVFS_CLI_H
#define KVFS_CLI_H

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>

#include "common.h"
#include "kv.h"

#define EXIT_OK 0
#define EXIT_CORRECTED 1
#define EXIT_UNCORRECTED 4
#define EXIT_OPERATIONAL 8
#define EXIT_USAGE 16

extern const char *cli_prog;

/* Name the program (cli_prog) by the last part of argv[0], as its messages
 * and getopt(3)'s say it: "mkfs.kvfs: ...", however it was run. */
void cli_init(char **argv);
/* "PROG: message\n" on stderr (common.h's message line). */
void cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* "PROG: 'PATH': message\n" on stderr, the path quoted as cli_quote does;
 * path NULL: as cli_error. */
void cli_error_at(const char *path, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void cli_verror_at(const char *path, const char *fmt, va_list ap);
/* A name or value read from an image, escaped as cli_put_escaped does, in
 * single quotes, for a message: a malloc'd string, or NULL when out of
 * memory. */
char *cli_quote(const void *s, size_t len);
/* "PROG (kvfs) VERSION, image format N" on standard output (-V). */
void cli_print_version(void);
/* The one IMAGE argument a tool takes after its options (argv[optind]):
 * 0 when it is there alone, else EXIT_USAGE after saying what is wrong
 * and printing usage to stderr. */
int cli_one_image(int argc, int optind, void (*usage)(FILE *));
/* The end of every tool's getopt_long switch: c, what getopt_long returned
 * for an option the tool does not handle itself. -h prints usage on
 * standard output, -V the version: EXIT_OK. Anything else is a usage error
 * (an unknown option, a missing argument), which getopt has reported, or,
 * where the tool turned opterr off, "unknown option 'ARG'" here; then usage
 * on stderr: EXIT_USAGE. The tool returns the exit code at once. */
int cli_other_option(int c, char **argv, void (*usage)(FILE *));
/* The lock file LMDB makes beside an image ("IMAGE-lock") holds no state.
 * Whether it is there; remove it (a tool that made it, nobody else having
 * the image open). */
int cli_lock_exists(const char *image);
void cli_remove_lock(const char *image);
/* A label as the tools show it: 'LABEL' (escaped) or (none), and a
 * newline. */
void cli_print_label(FILE *f, const char *label);
/* Format a uuid as 8-4-4-4-12 hex digits into out (37 bytes). */
void cli_format_uuid(const uint8_t uuid[16], char out[37]);
/* Write len bytes of a name or value so that any byte sequence prints on one
 * line and reads back unambiguously: backslash, newline, tab and CR as \\,
 * \n, \t, \r; other control bytes, C1 controls and invalid UTF-8 as \xHH;
 * printable ASCII and valid UTF-8 as they are. */
void cli_put_escaped(FILE *f, const void *s, size_t len);
/* Nanoseconds since the epoch as "YYYY-MM-DD HH:MM:SS.NNNNNNNNN UTC". */
void cli_format_time(int64_t ns, char *out, size_t outlen);
/* A byte count for people: "512 bytes", "1.5 MiB". */
void cli_format_bytes(uint64_t n, char *out, size_t outlen);
/* mkfs.kvfs -O and kvfs-tune -O: "compress", "compress=zstd",
 * "compress=zstd:LEVEL" (into *level, 1 to COMPRESS_LEVEL_MAX; 3 unless
 * given) or "nocompress" (0). 0, or -1 after saying what is wrong. */
int cli_parse_compress(const char *arg, int *level);
/* Set the compress part of the mount defaults write txn t holds to level
 * (0: the compress options removed), keeping the other defaults: what
 * mkfs.kvfs -O and kvfs-tune -O store. kv_defaults_get's and
 * kv_defaults_set's errors; -E2BIG: the defaults would be longer than
 * KV_DEFAULTS_MAX bytes. */
int cli_defaults_compress(kv_txn *t, int level);
/* The data bytes of block value val (vlen bytes) under key (ino, idx): a
 * plain block's are in val, a compressed one's (docs/FORMAT.md) are
 * unpacked into buf, which has room for the image's block size; *data
 * points at them, *len counts them. Returns 0 for a plain block, 1 for a
 * compressed one; -EIO when the value fails its length or checksum check
 * (*len as kv_check_block leaves it), -EBADMSG when its checksum holds but
 * its frame does not decompress to its length, -ENOMEM. */
int cli_block_data(kv_env *env, uint64_t ino, uint64_t idx, const void *val, size_t vlen,
		   void *buf, const void **data, size_t *len);
/* From here on a crash (SIGSEGV, SIGBUS, SIGABRT ...) prints a message
 * naming image on stderr and exits EXIT_OPERATIONAL (common.h's crash
 * guard). For tools that read images: LMDB trusts its B-tree pages, and a
 * page damaged on disk can crash it inside any read. Not installed in a
 * sanitizer build, which reports the crash itself. */
void cli_crash_guard(const char *image);

#endif
