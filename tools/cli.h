/*
 * cli.h - helpers shared by the command-line tools: messages, number
 * parsing, and the exit codes of fsck(8) that every kvfs tool follows.
 */
#ifndef KVFS_CLI_H
#define KVFS_CLI_H

#include <stdint.h>

#define EXIT_OK 0
#define EXIT_CORRECTED 1
#define EXIT_UNCORRECTED 4
#define EXIT_OPERATIONAL 8
#define EXIT_USAGE 16

extern const char *cli_prog;

void cli_init(const char *argv0);
/* "PROG: message\n" on stderr. */
void cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Parse a size with an optional K, M, G or T suffix (powers of 1024).
 * Returns 0, or -1 on anything that is not a whole size. */
int cli_parse_size(const char *s, uint64_t *out);
/* Format a uuid as 8-4-4-4-12 hex digits into out (37 bytes). */
void cli_format_uuid(const uint8_t uuid[16], char out[37]);

#endif
