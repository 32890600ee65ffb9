/*
 * inomap.h - a hash map keyed by a pair of u64 (an inode number, or a device
 * and inode number), for the tools' hard-link and loop detection.
 *
 * Entries never move while the map does not grow; a pointer from
 * inomap_put() or inomap_get() is valid until the next inomap_put().
 */
#ifndef KVFS_INOMAP_H
#define KVFS_INOMAP_H

#include <stddef.h>
#include <stdint.h>

struct inomap_ent {
	uint64_t a, b;
	uint64_t val; /* the caller's */
	char *str;    /* the caller's; freed by inomap_release() */
	int used;
};

struct inomap {
	struct inomap_ent *tab;
	size_t cap, n; /* cap is 0 or a power of two */
};

void inomap_init(struct inomap *m);
/* The entry of (a, b), or NULL. */
struct inomap_ent *inomap_get(struct inomap *m, uint64_t a, uint64_t b);
/* The entry of (a, b), added (zeroed but for the key) if absent; *added says
 * which. -ENOMEM. */
int inomap_put(struct inomap *m, uint64_t a, uint64_t b, struct inomap_ent **out, int *added);
/* Free the table and every entry's str. */
void inomap_release(struct inomap *m);

#endif
