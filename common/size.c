/*
 * size.c - the one parser of sizes on a command line or in a mount option
 * (common.h): mkfs.kvfs -b, the daemon's max_size= and max_write=.
 *
 * Invariants:
 *  1. One grammar for every program: digits, then an optional unit K, M, G
 *     or T (either case, powers of 1024), optionally followed by "i", then
 *     by "B" or "b". A string is taken whole or refused whole.
 *  2. Nothing that does not fit 64 bits is accepted, before or after the
 *     unit is applied.
 */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>

#include "common.h"

/* The shift of unit letter c, or 0 for none. */
static unsigned unit_shift(char c)
{
	switch (c) {
	case 'k': case 'K': return 10;
	case 'm': case 'M': return 20;
	case 'g': case 'G': return 30;
	case 't': case 'T': return 40;
	default: return 0;
	}
}

int size_parse(const char *s, uint64_t *out)
{
	unsigned long long v;
	unsigned shift;
	char *end;

	/* strtoull would skip spaces and take a sign */
	if (!s || !isdigit((unsigned char)*s))
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno == ERANGE)
		return -ERANGE;
	shift = unit_shift(*end);
	if (shift) {
		end++;
		if (*end == 'i') /* KiB, MiB ... */
			end++;
		if (*end == 'B' || *end == 'b')
			end++;
	}
	if (*end != '\0')
		return -EINVAL;
	if (v > (UINT64_MAX >> shift))
		return -ERANGE;
	*out = (uint64_t)v << shift;
	return 0;
}
