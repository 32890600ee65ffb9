/*
 * tree.c - whole-tree comparison at checkpoints, and removal of a tree.
 *
 * Two trees agree when the same names hold objects of the same type with the
 * same attributes (attrs_compare), symlink targets, extended attributes and,
 * for regular files, the same bytes (of a file over 16 MiB, made sparse by
 * far writes or truncates, the first and the last MiB). A file's bytes are
 * read twice on the kvfs side: as a user sees them, and again after fsync
 * and dropping the file's page cache, so what reaches the store is compared
 * too and not only what the kernel holds.
 *
 * Reads use O_NOATIME where allowed, so a checkpoint leaves the atimes the
 * sequence made.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "difftest.h"

#define CHUNK (1 << 16)

struct names {
	char **v;
	size_t n;
};

static int cmp_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void names_free(struct names *nm)
{
	for (size_t i = 0; i < nm->n; i++)
		free(nm->v[i]);
	free(nm->v);
	nm->v = NULL;
	nm->n = 0;
}

/* The sorted names of directory path, without "." and "..". */
static int list_names(const char *path, struct names *nm)
{
	DIR *d = opendir(path);
	struct dirent *de;
	size_t cap = 0;

	nm->v = NULL;
	nm->n = 0;
	if (!d)
		return -errno;
	while ((de = readdir(d)) != NULL) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (nm->n == cap) {
			cap = cap ? cap * 2 : 32;
			nm->v = realloc(nm->v, cap * sizeof(*nm->v));
			if (!nm->v)
				exit(2);
		}
		nm->v[nm->n++] = strdup(de->d_name);
	}
	closedir(d);
	if (nm->n)
		qsort(nm->v, nm->n, sizeof(*nm->v), cmp_name);
	return 0;
}

static int open_noatime(const char *path)
{
	int fd = open(path, O_RDONLY | O_NOATIME | O_NONBLOCK);

	if (fd < 0 && errno == EPERM)
		fd = open(path, O_RDONLY | O_NONBLOCK);
	return fd;
}

/* Files larger than this (sparse, made by writes and truncates far out) are
 * compared by their first and last SPAN bytes; the sizes are compared with
 * the attributes. */
#define WHOLE_MAX (16 << 20)
#define SPAN (1 << 20)

/* Read all of fd into *buf (grown as needed), or for a file over WHOLE_MAX
 * its first and last SPAN bytes; returns the length read or -errno. */
static long long slurp(int fd, unsigned char **buf, size_t *cap)
{
	size_t len = 0;
	ssize_t n;
	struct stat st;

	if (fstat(fd, &st) == 0 && st.st_size > WHOLE_MAX) {
		if (*cap < 2 * SPAN) {
			*cap = 2 * SPAN;
			*buf = realloc(*buf, *cap);
			if (!*buf)
				exit(2);
		}
		for (int i = 0; i < 2; i++) {
			off_t at = i ? st.st_size - SPAN : 0;
			for (size_t got = 0; got < SPAN; got += (size_t)n) {
				n = pread(fd, *buf + len + got, SPAN - got, at + (off_t)got);
				if (n < 0)
					return -errno;
				if (n == 0)
					return -ENODATA; /* shorter than its size */
			}
			len += SPAN;
		}
		return (long long)len;
	}
	for (;;) {
		if (*cap < len + CHUNK) {
			*cap = (len + CHUNK) * 2;
			*buf = realloc(*buf, *cap);
			if (!*buf)
				exit(2);
		}
		n = pread(fd, *buf + len, CHUNK, (off_t)len);
		if (n < 0)
			return -errno;
		if (n == 0)
			return (long long)len;
		len += (size_t)n;
	}
}

static int diff_bytes(const unsigned char *a, long long alen, const unsigned char *b,
		      long long blen, const char *what, const char *rel, char *why, size_t wlen)
{
	long long i;

	if (alen < 0 || blen < 0) {
		snprintf(why, wlen, "\"%s\": reading %s: kvfs %s, tmpfs %s", rel, what,
			 alen < 0 ? strerror((int)-alen) : "ok",
			 blen < 0 ? strerror((int)-blen) : "ok");
		return 1;
	}
	for (i = 0; i < alen && i < blen && a[i] == b[i]; i++)
		;
	if (i == alen && i == blen)
		return 0;
	snprintf(why, wlen, "\"%s\": %s differ at byte %lld (lengths kvfs %lld, tmpfs %lld): "
		 "kvfs 0x%02x, tmpfs 0x%02x", rel, what, i, alen, blen, i < alen ? a[i] : 0,
		 i < blen ? b[i] : 0);
	return 1;
}

static int compare_contents(const char *kpath, const char *tpath, const char *rel, char *why,
			    size_t wlen)
{
	static unsigned char *kb, *tb, *kb2;
	static size_t kcap, tcap, k2cap;
	long long kl, tl, k2l;
	int kfd, tfd, rc = 1;

	kfd = open_noatime(kpath);
	tfd = open_noatime(tpath);
	if (kfd < 0 || tfd < 0) {
		snprintf(why, wlen, "\"%s\": open: kvfs %s, tmpfs %s", rel,
			 kfd < 0 ? "failed" : "ok", tfd < 0 ? "failed" : "ok");
		goto close;
	}
	kl = slurp(kfd, &kb, &kcap);
	tl = slurp(tfd, &tb, &tcap);
	if (diff_bytes(kb, kl, tb, tl, "contents", rel, why, wlen))
		goto close;
	/* again from the store: flush what the kernel holds, drop its pages */
	if (fsync(kfd) != 0) {
		snprintf(why, wlen, "\"%s\": fsync on kvfs: %s", rel, strerror(errno));
		goto close;
	}
	posix_fadvise(kfd, 0, 0, POSIX_FADV_DONTNEED);
	k2l = slurp(kfd, &kb2, &k2cap);
	rc = diff_bytes(kb2, k2l, tb, tl, "contents read back from the store", rel, why, wlen);
close:
	if (kfd >= 0)
		close(kfd);
	if (tfd >= 0)
		close(tfd);
	return rc;
}

/* name=value lines, sorted; -errno when listing fails. */
static int xattr_dump(const char *path, char **out)
{
	static char list[65536], val[65537];
	struct names nm = {0};
	size_t cap = 0, len = 0;
	ssize_t n = llistxattr(path, list, sizeof(list));
	char *p;

	*out = NULL;
	if (n < 0)
		return -errno;
	for (p = list; p < list + n; p += strlen(p) + 1) {
		nm.v = realloc(nm.v, (nm.n + 1) * sizeof(*nm.v));
		if (!nm.v)
			exit(2);
		nm.v[nm.n++] = strdup(p);
	}
	if (nm.n)
		qsort(nm.v, nm.n, sizeof(*nm.v), cmp_name);
	for (size_t i = 0; i < nm.n; i++) {
		ssize_t vl = lgetxattr(path, nm.v[i], val, sizeof(val));
		size_t need = strlen(nm.v[i]) + 2 * (vl > 0 ? (size_t)vl : 0) + 32;
		if (len + need >= cap) {
			cap = (len + need) * 2;
			*out = realloc(*out, cap);
			if (!*out)
				exit(2);
		}
		len += (size_t)snprintf(*out + len, cap - len, "%s=", nm.v[i]);
		if (vl < 0)
			len += (size_t)snprintf(*out + len, cap - len, "<%s>", strerrorname_np(errno));
		for (ssize_t j = 0; j < vl; j++)
			len += (size_t)snprintf(*out + len, cap - len, "%02x",
						(unsigned char)val[j]);
		len += (size_t)snprintf(*out + len, cap - len, "\n");
	}
	names_free(&nm);
	if (!*out)
		*out = strdup("");
	return 0;
}

static int compare_xattrs(const char *kpath, const char *tpath, const char *rel, char *why,
			  size_t wlen)
{
	char *k, *t;
	int kr = xattr_dump(kpath, &k), tr = xattr_dump(tpath, &t), rc = 0;

	if (kr != tr) {
		snprintf(why, wlen, "\"%s\": listxattr: kvfs %s, tmpfs %s", rel,
			 kr ? strerrorname_np(-kr) : "ok", tr ? strerrorname_np(-tr) : "ok");
		rc = 1;
	} else if (kr == 0 && strcmp(k, t)) {
		snprintf(why, wlen, "\"%s\": xattrs differ: kvfs {%.300s}, tmpfs {%.300s}", rel, k, t);
		rc = 1;
	}
	free(k);
	free(t);
	return rc;
}

static int compare_node(const char *kpath, const char *tpath, const char *rel, char *why,
			size_t wlen);

static int compare_dir(const char *kpath, const char *tpath, const char *rel, char *why,
		       size_t wlen)
{
	struct names kn = {0}, tn = {0};
	size_t i = 0, j = 0;
	int rc = 0;

	if (list_names(kpath, &kn) || list_names(tpath, &tn)) {
		snprintf(why, wlen, "\"%s\": cannot list: %s", rel, strerror(errno));
		rc = 1;
	}
	while (!rc && (i < kn.n || j < tn.n)) {
		int c = i == kn.n ? 1 : j == tn.n ? -1 : strcmp(kn.v[i], tn.v[j]);
		char kp[8192], tp[8192], rp[8192];

		if (c != 0) {
			const char *only = c < 0 ? kn.v[i] : tn.v[j];
			snprintf(why, wlen, "\"%s%s%.40s\": only on %s", rel, *rel ? "/" : "", only,
				 c < 0 ? "kvfs" : "tmpfs");
			rc = 1;
			break;
		}
		snprintf(kp, sizeof(kp), "%s/%s", kpath, kn.v[i]);
		snprintf(tp, sizeof(tp), "%s/%s", tpath, tn.v[j]);
		snprintf(rp, sizeof(rp), "%s%s%s", rel, *rel ? "/" : "", kn.v[i]);
		rc = compare_node(kp, tp, rp, why, wlen);
		i++;
		j++;
	}
	names_free(&kn);
	names_free(&tn);
	return rc;
}

static int compare_node(const char *kpath, const char *tpath, const char *rel, char *why,
			size_t wlen)
{
	struct stat ks, ts;
	struct attrs ka, ta;
	char w[1024];

	if (lstat(kpath, &ks) || lstat(tpath, &ts)) {
		snprintf(why, wlen, "\"%s\": lstat: %s", rel, strerror(errno));
		return 1;
	}
	attrs_of(&ks, &ka);
	attrs_of(&ts, &ta);
	if (attrs_compare(&ka, &ta, w, sizeof(w))) {
		snprintf(why, wlen, "\"%s\": %s", *rel ? rel : ".", w);
		return 1;
	}
	if (compare_xattrs(kpath, tpath, *rel ? rel : ".", why, wlen))
		return 1;
	if (S_ISLNK(ts.st_mode)) {
		static char kt[8192], tt[8192];
		ssize_t kl = readlink(kpath, kt, sizeof(kt)), tl = readlink(tpath, tt, sizeof(tt));
		if (kl != tl || (kl > 0 && memcmp(kt, tt, (size_t)kl))) {
			snprintf(why, wlen, "\"%s\": symlink targets differ: kvfs \"%.*s\", "
				 "tmpfs \"%.*s\"", rel, (int)(kl > 100 ? 100 : kl), kt,
				 (int)(tl > 100 ? 100 : tl), tt);
			return 1;
		}
	} else if (S_ISREG(ts.st_mode)) {
		return compare_contents(kpath, tpath, rel, why, wlen);
	} else if (S_ISDIR(ts.st_mode)) {
		return compare_dir(kpath, tpath, rel, why, wlen);
	}
	return 0;
}

int tree_compare(const char *kdir, const char *tdir, char *why, size_t wlen)
{
	return compare_node(kdir, tdir, "", why, wlen);
}

/* ------------------------------------------------------------- remove -- */

static int remove_at(int dfd, const char *name)
{
	struct stat st;
	struct dirent *de;
	DIR *d;
	int fd, rc = 0;

	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW))
		return -errno;
	if (!S_ISDIR(st.st_mode))
		return unlinkat(dfd, name, 0) ? -errno : 0;
	/* a 0555 directory of a non-root run; if this fails, openat says why */
	if (fchmodat(dfd, name, 0700, 0) != 0 && errno == ENOENT)
		return -ENOENT;
	fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
	if (fd < 0)
		return -errno;
	d = fdopendir(fd);
	if (!d) {
		close(fd);
		return -ENOMEM;
	}
	while ((de = readdir(d)) != NULL) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		int r = remove_at(dirfd(d), de->d_name);
		if (r && !rc)
			rc = r;
	}
	closedir(d);
	if (unlinkat(dfd, name, AT_REMOVEDIR) && !rc)
		rc = -errno;
	return rc;
}

int tree_remove(const char *dir)
{
	return remove_at(AT_FDCWD, dir);
}
