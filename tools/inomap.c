/*
 * inomap.c - open addressing with linear probing; grows at 1/2 load so a
 * probe always ends at an empty slot.
 */
#include <errno.h>
#include <stdlib.h>

#include "inomap.h"

static size_t slot_of(const struct inomap *m, uint64_t a, uint64_t b)
{
	uint64_t h = (a * 0x9E3779B97F4A7C15ULL) ^ (b + 0xC2B2AE3D27D4EB4FULL);

	h ^= h >> 31;
	h *= 0xBF58476D1CE4E5B9ULL;
	h ^= h >> 29;
	return (size_t)h & (m->cap - 1);
}

void inomap_init(struct inomap *m)
{
	m->tab = NULL;
	m->cap = m->n = 0;
}

struct inomap_ent *inomap_get(struct inomap *m, uint64_t a, uint64_t b)
{
	if (!m->cap)
		return NULL;
	for (size_t i = slot_of(m, a, b);; i = (i + 1) & (m->cap - 1)) {
		struct inomap_ent *e = &m->tab[i];
		if (!e->used)
			return NULL;
		if (e->a == a && e->b == b)
			return e;
	}
}

static int grow(struct inomap *m)
{
	size_t cap = m->cap ? m->cap * 2 : 256;
	struct inomap_ent *old = m->tab, *tab = calloc(cap, sizeof(*tab));
	size_t ocap = m->cap;

	if (!tab)
		return -ENOMEM;
	m->tab = tab;
	m->cap = cap;
	for (size_t i = 0; i < ocap; i++) {
		if (!old[i].used)
			continue;
		size_t j = slot_of(m, old[i].a, old[i].b);
		while (tab[j].used)
			j = (j + 1) & (cap - 1);
		tab[j] = old[i];
	}
	free(old);
	return 0;
}

int inomap_put(struct inomap *m, uint64_t a, uint64_t b, struct inomap_ent **out, int *added)
{
	struct inomap_ent *e = inomap_get(m, a, b);
	size_t i;

	*added = 0;
	if (e) {
		*out = e;
		return 0;
	}
	if ((m->n + 1) * 2 > m->cap && grow(m))
		return -ENOMEM;
	for (i = slot_of(m, a, b); m->tab[i].used; i = (i + 1) & (m->cap - 1))
		;
	e = &m->tab[i];
	*e = (struct inomap_ent){.a = a, .b = b, .used = 1};
	m->n++;
	*added = 1;
	*out = e;
	return 0;
}

void inomap_release(struct inomap *m)
{
	for (size_t i = 0; i < m->cap; i++)
		if (m->tab[i].used)
			free(m->tab[i].str);
	free(m->tab);
	inomap_init(m);
}
