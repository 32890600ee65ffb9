/*
 * cli.h - helpers shared by the command-line tools: messages, number
 * parsing, and the exit codes of fsck(8) that every kvfs tool follows.
 */
#ifndef KVFS_CLI_H
#define KVFS_CLI_H

#include <stdint.h>
#include <stdio.h>

#define EXIT_OK 0
#define EXIT_CORRECTED 1
#define EXIT_UNCORRECTED 4
#define EXIT_OPERATIONAL 8
#define EXIT_USAGE 16

extern const char *cli_prog;

/* Name the program (cli_prog) by the last part of argv[0], as its messages
 * and getopt(3)'s say it: "mkfs.kvfs: ...", however it was run. */
void cli_init(char **argv);
/* "PROG: message\n" on stderr. */
void cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Parse a size with an optional K, M, G or T suffix (powers of 1024).
 * Returns 0, or -1 on anything that is not a whole size. */
int cli_parse_size(const char *s, uint64_t *out);
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
/* From here on a crash (SIGSEGV, SIGBUS, SIGABRT ...) prints a message
 * naming image and exits EXIT_OPERATIONAL. For tools that read images:
 * LMDB trusts its B-tree pages, and a page damaged on disk can crash it
 * inside any read. Not installed in a sanitizer build, which reports the
 * crash itself. */
void cli_crash_guard(const char *image);

#endif
