/*
 * array.c - room in a growing array (common.h): the doubling that the
 * tools' lists of entries, fixes, names and paths share.
 *
 * Invariants:
 *  1. On failure nothing changes: the caller still owns its array and its
 *     capacity still describes it.
 *  2. The capacity grows at least twofold (short of overflow), so appending
 *     n elements one by one costs O(n) copying in all.
 */
#include <assert.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "common.h"

void *array_reserve(void *v, size_t *cap, size_t need, size_t size, size_t first)
{
	size_t n = *cap;

	assert(size > 0);
	if (need <= n && v) /* a NULL array gets its first capacity, even for none */
		return v;
	if (need > SIZE_MAX / size) {
		errno = ENOMEM;
		return NULL;
	}
	n = n > SIZE_MAX / 2 ? SIZE_MAX : n * 2;
	if (n < first)
		n = first;
	if (n < need || n > SIZE_MAX / size)
		n = need;
	v = realloc(v, n * size);
	if (v)
		*cap = n;
	return v;
}
