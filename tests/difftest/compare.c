/*
 * compare.c - what counts as the same on kvfs and on tmpfs: the results of
 * one op, and the attributes of one object (used by tree.c too).
 *
 * Invariants:
 *  1. Return value and errno always count; bytes read, listings (sorted where
 *     their order is unspecified), targets and values count; attributes
 *     count as difftest.h invariant 3 says.
 *  2. The set of "loose" inodes (a time that may differ by nature, see
 *     track_times in ops.c) holds tmpfs inode numbers, which stay stable
 *     for a run.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "difftest.h"

/* tmpfs inodes where a time may legitimately differ (difftest.h invariant 3) */
#define LOOSE_MAX 1024
static struct { uint64_t ino; unsigned what; } loose[LOOSE_MAX];
static size_t nloose;

void loose_reset(void)
{
	nloose = 0;
}

unsigned loose_of(uint64_t ino)
{
	for (size_t i = 0; i < nloose; i++)
		if (loose[i].ino == ino)
			return loose[i].what;
	return 0;
}

void loose_set(uint64_t ino, unsigned what, int on)
{
	size_t i;

	for (i = 0; i < nloose && loose[i].ino != ino; i++)
		;
	if (i == nloose) {
		if (!on || nloose == LOOSE_MAX)
			return;
		loose[nloose++].ino = ino;
		loose[i].what = 0;
	}
	loose[i].what = on ? loose[i].what | what : loose[i].what & ~what;
	if (!loose[i].what)
		loose[i] = loose[--nloose];
}

void attrs_of(const struct stat *st, struct attrs *a)
{
	a->ino = st->st_ino;
	a->mode = st->st_mode;
	a->nlink = (uint32_t)st->st_nlink;
	a->uid = st->st_uid;
	a->gid = st->st_gid;
	a->size = (uint64_t)st->st_size;
	a->atime[0] = st->st_atim.tv_sec;
	a->atime[1] = st->st_atim.tv_nsec;
	a->mtime[0] = st->st_mtim.tv_sec;
	a->mtime[1] = st->st_mtim.tv_nsec;
}

static int explicit_time(const int64_t t[2])
{
	return t[0] < EXPLICIT_MAX;
}

int attrs_compare(const struct attrs *k, const struct attrs *t, char *why, size_t wlen)
{
	if (k->mode != t->mode)
		snprintf(why, wlen, "mode: kvfs 0%o, tmpfs 0%o", k->mode, t->mode);
	else if (k->nlink != t->nlink)
		snprintf(why, wlen, "nlink: kvfs %u, tmpfs %u", k->nlink, t->nlink);
	else if (k->uid != t->uid || k->gid != t->gid)
		snprintf(why, wlen, "owner: kvfs %u:%u, tmpfs %u:%u", k->uid, k->gid, t->uid,
			 t->gid);
	else if (!S_ISDIR(t->mode) && k->size != t->size)
		snprintf(why, wlen, "size: kvfs %llu, tmpfs %llu", (unsigned long long)k->size,
			 (unsigned long long)t->size);
	/* a FIFO's reads and writes stay in the kernel's pipe code, which
	 * updates the times of a tmpfs inode but of no FUSE one (S_NOCMTIME,
	 * S_NOATIME): kvfs is never told. Its times are not compared. */
	else if (S_ISFIFO(t->mode))
		return 0;
	/* an explicit mtime must be kept exactly, and replaced when tmpfs
	 * replaces it */
	else if ((explicit_time(k->mtime) || explicit_time(t->mtime)) &&
		 !(loose_of(t->ino) & LOOSE_MTIME) &&
		 (k->mtime[0] != t->mtime[0] || k->mtime[1] != t->mtime[1]))
		snprintf(why, wlen, "mtime: kvfs %lld.%09lld, tmpfs %lld.%09lld",
			 (long long)k->mtime[0], (long long)k->mtime[1], (long long)t->mtime[0],
			 (long long)t->mtime[1]);
	/* reads served from the kernel's cache never reach kvfs, so kvfs may
	 * keep an explicit atime that tmpfs replaced; never the reverse */
	else if (explicit_time(t->atime) && !(loose_of(t->ino) & LOOSE_ATIME) &&
		 (k->atime[0] != t->atime[0] || k->atime[1] != t->atime[1]))
		snprintf(why, wlen, "atime: kvfs %lld.%09lld, tmpfs %lld.%09lld",
			 (long long)k->atime[0], (long long)k->atime[1], (long long)t->atime[0],
			 (long long)t->atime[1]);
	else
		return 0;
	return 1;
}

/* A short printable rendering of bytes: text as is, else hex. */
static void show(const unsigned char *p, size_t n, char *out, size_t olen)
{
	size_t i, o = 0;
	int text = 1;

	for (i = 0; i < n && i < 200; i++)
		if ((p[i] < 32 && p[i] != '\n') || p[i] > 126)
			text = 0;
	for (i = 0; i < n && o + 4 < olen && i < (text ? 200u : 32u); i++) {
		if (text)
			o += (size_t)snprintf(out + o, olen - o, "%c", p[i] == '\n' ? '|' : p[i]);
		else
			o += (size_t)snprintf(out + o, olen - o, "%02x", p[i]);
	}
	if (i < n && o + 4 < olen)
		snprintf(out + o, olen - o, "...");
	else if (o < olen)
		out[o] = '\0';
}

/* SEEK_DATA and SEEK_HOLE: a hole is where nothing is stored, so the two
 * may differ where bytes are zero: kvfs drops a block whose stored bytes a
 * punch or truncate zeroed all of, where tmpfs keeps a page that was not
 * covered whole. What kvfs calls a hole must read as zeros, and it must
 * find every hole tmpfs finds: for SEEK_HOLE an answer no later than
 * tmpfs's, for SEEK_DATA no earlier (ENXIO: no data to the end). */
static int seek_compare(const struct op *op, const struct res *k, const struct res *t,
			char *why, size_t wlen)
{
	long long kd = k->err == ENXIO ? LLONG_MAX : k->ret;
	long long td = t->err == ENXIO ? LLONG_MAX : t->ret;
	int kerr = k->err == ENXIO ? 0 : k->err, terr = t->err == ENXIO ? 0 : t->err;

	if (k->seek_bad)
		return snprintf(why, wlen, "kvfs returned %lld%s: bytes that are not zero called "
				"a hole", k->ret, k->err ? " ENXIO" : ""), 1;
	if (t->seek_bad && !kerr)
		/* tmpfs called bytes that are not zero a hole: its SEEK_DATA misses
		 * a page that ends at 2^63 (the end overflows loff_t; Linux 6.18),
		 * where a write or copy near the largest size puts data. kvfs's
		 * answer stands on its own bytes (checked above) */
		return 0;
	if (kerr != terr || (op->flags == SEEK_HOLE ? kd > td : kd < td))
		return snprintf(why, wlen, "kvfs returned %lld%s%s, tmpfs %lld%s%s", k->ret,
				k->err ? " " : "", k->err ? strerrorname_np(k->err) : "", t->ret,
				t->err ? " " : "", t->err ? strerrorname_np(t->err) : ""), 1;
	return 0;
}

static int in_word(unsigned char c)
{
	return c > ' ' && c < 127 && c != ',';
}

int res_compare(const struct op *op, const struct res *k, const struct res *t, char *why,
		size_t wlen)
{
	char a[512], b[512];
	size_t i, j;

	if (op->kind == OP_LSEEK && (op->flags == SEEK_DATA || op->flags == SEEK_HOLE))
		return seek_compare(op, k, t, why, wlen);
	if (k->ret != t->ret || k->err != t->err) {
		snprintf(why, wlen, "kvfs returned %lld%s%s, tmpfs %lld%s%s", k->ret,
			 k->err ? " " : "", k->err ? strerrorname_np(k->err) : "", t->ret,
			 t->err ? " " : "", t->err ? strerrorname_np(t->err) : "");
		return 1;
	}
	if (k->has_attrs != t->has_attrs)
		return snprintf(why, wlen, "attributes on one side only"), 1;
	if (k->has_attrs && attrs_compare(&k->a, &t->a, why, wlen))
		return 1;
	if (k->len == t->len && (k->len == 0 || memcmp(k->buf, t->buf, k->len) == 0))
		return 0;
	for (i = 0; i < k->len && i < t->len && k->buf[i] == t->buf[i]; i++)
		;
	/* text from the start of the word that differs ("mode 0100644",
	 * "g::r-x"), bytes from the first that differs (or a few before) */
	for (j = i; j > 0 && i - j < 24 && in_word(k->buf[j - 1]); j--)
		;
	show(k->buf + j, k->len - j, a, sizeof(a));
	show(t->buf + j, t->len - j, b, sizeof(b));
	snprintf(why, wlen, "output differs at byte %zu of %zu/%zu: kvfs \"%s\", tmpfs \"%s\"", i,
		 k->len, t->len, a, b);
	return 1;
}
