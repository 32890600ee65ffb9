/*
 * dump_export.c - kvfs-dump export: the walk of the whole tree in one read
 * transaction (a consistent snapshot, safe while the image is mounted), and
 * the sink that recreates it in a directory. dump_tar.c holds the tar sink.
 *
 * The directory sink recreates contents, modes, owners (when run as root),
 * times to the nanosecond, symlinks, hard links, extended attributes, device
 * nodes, FIFOs and sockets. Files are written sparse: stored blocks are
 * written, and within them whole 4 KiB pages of zeros are skipped, so holes
 * stay holes. Shared blocks (copy_file_range's, kv/share.c) are written into
 * each file that borrows them: DEST holds whole copies. Attributes are set
 * in the order that keeps them: contents, owner (which clears set-ID bits),
 * xattrs, mode, and times last; a directory's times after its entries are
 * made.
 *
 * POSIX ACLs are xattrs here: kvfs stores them in the encoding setxattr
 * takes. Setting an access ACL sets the mode's permission bits, and the
 * chmod after it rewrites the ACL's owner, mask and other entries to the
 * same bits (kvfs keeps the two in step), so both come out as stored. A
 * directory's default ACL is set once its entries are made, so they do not
 * inherit it; what an entry inherits from DEST's own parents (a default
 * ACL there) is removed where the image has no ACL of that kind, as GNU
 * tar --acls does.
 *
 * On a mounted image the snapshot's pages stay pinned until the export
 * ends, so the image grows by what the daemon rewrites meanwhile; the
 * daemon's writer never waits for the export.
 *
 * Invariants:
 *  1. Names from the image are checked before use (dump_name_ok): nothing is
 *     created outside DEST, whatever the image holds.
 *  2. Every file is made with O_EXCL and O_NOFOLLOW relative to its parent
 *     directory's descriptor: an export never writes through a link.
 *  3. A directory is exported at most once (a second name or a loop in a
 *     damaged image is reported, not followed), so the walk ends.
 *  4. A failure at one entry is reported and the export goes on; the exit
 *     code says whether any happened.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "cli.h"
#include "dump_export.h"
#include "inomap.h"
#include "progress.h"
#include "walk.h"

#define DEPTH_MAX 4096
#define PAGE 4096
#define WBUF_SIZE (1 << 20)

/* ------------------------------------------------------------- helpers -- */

void export_error(struct export *x, const struct xent *e, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	dump_verror_at(x->d, e ? e->path : x->dest, fmt, ap);
	va_end(ap);
}

static void progress_line(struct export *x, double frac)
{
	char size[32];

	cli_format_bytes(x->bytes, size, sizeof(size));
	progress_draw(&x->d->prog, frac, "%s: export: %llu of %llu inodes, %s", cli_prog,
		      (unsigned long long)x->inodes, (unsigned long long)x->inodes_total, size);
}

/* The fraction is of the inode and block records in the snapshot; what the
 * walk does not reach (orphans, unreachable inodes) is not exported, so the
 * line is drawn full once the walk is done. */
void export_progress(struct export *x)
{
	if (progress_due(&x->d->prog))
		progress_line(x, x->total ? (double)(x->inodes + x->blocks) / (double)x->total : 0);
}

struct data_walk {
	struct export *x;
	const struct xent *e;
	unsigned flags;
	export_data_fn fn;
	void *arg;
	struct kv_extent next; /* the file's next extent to send (count 0: none left) */
};

/* One block of the file, stored under (home, hidx): its own key, or its
 * extent's home (v NULL: not there). To fn, clipped to the size, a
 * compressed block's bytes unpacked; WALK_DONE at a block wholly past it. */
static int data_block(struct data_walk *w, uint64_t idx, uint64_t home, uint64_t hidx,
		      const void *v, size_t vl)
{
	struct export *x = w->x;
	const uint64_t bs = kv_block_size(x->d->env), size = w->e->in->size;
	const void *data = v;
	uint64_t off;
	size_t len = 0;
	int rc;

	if (idx >= size / bs + 1 || idx * bs >= size)
		return WALK_DONE; /* no stored byte lies past the size (FORMAT.md) */
	if ((w->flags & XDATA_COUNT) && (++x->blocks & 63) == 0)
		export_progress(x);
	rc = v ? dump_block(x->d, home, hidx, v, vl, &data, &len) : -ENOENT;
	if (rc == -ENOMEM)
		return rc;
	if (rc < 0 || (len == 0 && home != w->e->in->ino)) {
		const char *why = rc == -ENOENT    ? "is missing"
				  : rc == -EBADMSG ? "does not decompress"
				  : rc             ? "fails its checksum"
						   : "is unwritten";

		if (!(w->flags & XDATA_REPORT))
			return 0;
		if (home == w->e->in->ino)
			export_error(x, w->e, "block %llu %s; exported as zeros",
				     (unsigned long long)idx, why);
		else /* a borrowed block (share.c invariant 2: its home's, whole) */
			export_error(x, w->e, "block %llu: its home, inode %llu block %llu, %s; "
				     "exported as zeros", (unsigned long long)idx,
				     (unsigned long long)home, (unsigned long long)hidx, why);
		return 0;
	}
	if (len == 0)
		return 0; /* unwritten (fallocate's): a hole to the archive */
	off = idx * bs;
	if (len > size - off)
		len = (size_t)(size - off);
	return w->fn(w->arg, off, data, len);
}

/* The file's next extent into w->next (count 0: no more). A malformed
 * record is reported and passed over: its blocks read as holes. */
static int next_extent(struct data_walk *w)
{
	const uint64_t ino = w->e->in->ino;
	const void *k, *v;
	size_t kl, vl;
	struct kv_key key;
	int rc;

	for (;;) {
		w->next.count = 0;
		rc = kv_iter_next(w->x->ext_it, &k, &kl, &v, &vl);
		if (rc)
			return rc == -ENOENT ? 0 : rc;
		kv_key_decode(KV_DB_EXTENT, k, kl, &key); /* key.ino: set from 8 bytes on */
		if (kl < 8 || key.ino != ino)
			return 0; /* past the file's extents */
		if (kv_decode_extent(KV_DB_EXTENT, k, kl, v, vl, &w->next) == 0)
			return 0;
		if (w->flags & XDATA_REPORT)
			export_error(w->x, w->e, "a malformed extent record; its blocks exported "
				     "as zeros");
	}
}

/* The borrowed blocks before block below (share.c invariant 3: an extent
 * starting below a stored block ends at it), each read from its home. */
static int borrowed_blocks(struct data_walk *w, uint64_t below)
{
	struct export *x = w->x;
	const void *k, *v;
	unsigned char kb[KV_KEY_MAX];
	size_t kl, klen, vl;
	int rc;

	while (w->next.count && w->next.first < below) {
		const struct kv_extent b = w->next;

		for (uint64_t i = 0; i < b.count; i++) {
			struct kv_key key = {.ino = b.home, .idx = b.hfirst + i};

			klen = kv_key_encode(KV_DB_DATA, &key, kb);
			rc = kv_iter_seek(x->home_it, kb, klen);
			if (rc == 0)
				rc = kv_iter_next(x->home_it, &k, &kl, &v, &vl);
			if (rc == 0 && (kl != klen || memcmp(k, kb, klen) != 0))
				rc = -ENOENT;
			if (rc && rc != -ENOENT)
				return rc;
			rc = data_block(w, b.first + i, b.home, b.hfirst + i, rc ? NULL : v,
					rc ? 0 : vl);
			if (rc)
				return rc;
		}
		rc = next_extent(w);
		if (rc)
			return rc;
	}
	return 0;
}

/* One data record of the file, after the borrowed blocks before it. */
static int data_record(void *arg, const void *k, size_t kl, const void *v, size_t vl)
{
	struct data_walk *w = arg;
	struct kv_key key;
	int malformed = kv_key_decode(KV_DB_DATA, k, kl, &key);
	uint64_t idx = malformed ? UINT64_MAX : key.idx; /* past any size: the end */
	int rc = borrowed_blocks(w, idx);

	return rc ? rc : data_block(w, idx, w->e->in->ino, idx, v, vl);
}

int export_data(struct export *x, const struct xent *e, unsigned flags, export_data_fn fn,
		void *arg)
{
	struct data_walk w = {.x = x, .e = e, .flags = flags, .fn = fn, .arg = arg};
	unsigned char pfx[KV_KEY_MAX];
	size_t plen = kv_key_prefix(e->in->ino, pfx);
	int rc = 0;

	/* the file's extents, merged into its data records in block order:
	 * looked up whatever the inode's flags say, as the daemon reads them */
	if (!x->ext_it)
		rc = kv_iter_open(x->d->t, KV_DB_EXTENT, &x->ext_it);
	if (!rc && !x->home_it)
		rc = kv_iter_open(x->d->t, KV_DB_DATA, &x->home_it);
	if (!rc) {
		rc = kv_iter_seek(x->ext_it, pfx, plen);
		rc = rc == -ENOENT ? 0 : rc ? rc : next_extent(&w);
	}
	if (!rc)
		rc = walk_inode(x->d->t, KV_DB_DATA, e->in->ino, data_record, &w);
	if (!rc)
		rc = borrowed_blocks(&w, UINT64_MAX);
	return rc == WALK_DONE ? 0 : rc;
}

struct xattr_walk {
	struct export *x;
	const struct xent *e;
	export_xattr_fn fn;
	void *arg;
};

static int xattr_record(void *arg, const void *k, size_t kl, const void *v, size_t vl)
{
	struct xattr_walk *w = arg;
	char name[KV_XATTR_NAME_MAX + 1];
	struct kv_key key;

	if (kv_key_decode(KV_DB_XATTR, k, kl, &key) ||
	    kv_xattr_name_check(key.name, key.namelen) == -ERANGE) {
		export_error(w->x, w->e, "malformed xattr name; skipped");
		return 0;
	}
	memcpy(name, key.name, key.namelen);
	name[key.namelen] = '\0';
	return w->fn(w->arg, name, v, vl);
}

int export_xattrs(struct export *x, const struct xent *e, export_xattr_fn fn, void *arg)
{
	struct xattr_walk w = {.x = x, .e = e, .fn = fn, .arg = arg};

	return walk_inode(x->d->t, KV_DB_XATTR, e->in->ino, xattr_record, &w);
}

/* ---------------------------------------------------------------- walk -- */

struct walk {
	struct export *x;
	struct inomap dirs;  /* directories exported */
	struct inomap links; /* inodes with several names: the path of the first */
};

static int path_push(struct export *x, const char *name, size_t len)
{
	char *p = array_reserve(x->path, &x->pathcap, x->pathlen + 1 + len + 1, 1, 256);

	if (!p)
		return -ENOMEM;
	x->path = p;
	if (x->pathlen)
		x->path[x->pathlen++] = '/';
	memcpy(x->path + x->pathlen, name, len);
	x->pathlen += len;
	x->path[x->pathlen] = '\0';
	return 0;
}

static void walk_dir(struct walk *w, const struct kv_inode *dir, int depth);

static void walk_one(struct walk *w, const struct xent *e, int depth)
{
	struct export *x = w->x;
	const struct kv_inode *in = e->in;
	struct inomap_ent *m;
	int added;

	if (S_ISDIR(in->mode)) {
		if (inomap_put(&w->dirs, in->ino, 0, &m, &added)) {
			export_error(x, e, "out of memory");
			x->fatal = 1;
			return;
		}
		if (!added) {
			export_error(x, e, "directory %llu has another name (or loops); not "
				     "exported again", (unsigned long long)in->ino);
			return;
		}
		if (depth >= DEPTH_MAX) {
			export_error(x, e, "deeper than %d levels; not exported", DEPTH_MAX);
			return;
		}
		if (x->sink->entry(x, e) != 0)
			return;
		x->inodes++;
		export_progress(x);
		walk_dir(w, in, depth + 1);
		{
			/* the walk below may have moved the path buffer */
			struct xent done = *e;
			done.path = x->pathlen ? x->path : ".";
			x->sink->dir_done(x, &done);
		}
		return;
	}
	if (in->nlink > 1) {
		if (inomap_put(&w->links, in->ino, 0, &m, &added)) {
			export_error(x, e, "out of memory");
			x->fatal = 1;
			return;
		}
		if (m->str) {
			struct xent l = *e;
			l.link_to = m->str;
			x->sink->entry(x, &l);
			return;
		}
	}
	if (x->sink->entry(x, e) != 0)
		return;
	x->inodes++;
	if (S_ISREG(in->mode))
		x->bytes += in->size;
	export_progress(x);
	/* later names link to this one (no memory: they become copies) */
	if (in->nlink > 1 && (m = inomap_get(&w->links, in->ino, 0)) != NULL)
		m->str = strdup(e->path);
}

/* An entry export cannot make: reported, left out of the listing. */
static int impossible(void *arg, const struct kv_dirent *de)
{
	struct export *x = arg;
	struct xent p = {.path = x->pathlen ? x->path : "."};
	char *name;

	if (dump_name_ok(de->name, de->namelen))
		return 0;
	name = cli_quote(de->name, de->namelen);
	export_error(x, &p, "an entry with an impossible name (%s); skipped",
		     name ? name : "'?'");
	free(name);
	return 1;
}

static void walk_entry(struct walk *w, const struct dump_listing *l, const struct dump_lent *le,
		       int depth)
{
	struct export *x = w->x;
	char name[KV_NAME_MAX + 1];
	struct xent e = {.name = name};
	struct kv_inode in;
	size_t mark = x->pathlen;
	int rc;

	memcpy(name, l->names + le->off, le->len);
	name[le->len] = '\0';
	if (path_push(x, name, le->len)) {
		x->fatal = 1;
		return;
	}
	e.path = x->path;
	rc = kv_inode_get(x->d->t, le->ino, &in);
	if (rc) {
		export_error(x, &e, "inode %llu: %s; skipped", (unsigned long long)le->ino,
			     rc == -ENOENT ? "missing" : strerror(-rc));
	} else {
		e.in = &in;
		walk_one(w, &e, depth);
	}
	x->pathlen = mark;
	x->path[mark] = '\0';
}

/* A directory's entries in name order: gathered first (the listing is
 * this level's, freed before returning), then visited. */
static void walk_dir(struct walk *w, const struct kv_inode *dir, int depth)
{
	struct export *x = w->x;
	struct dump_listing l = {0};
	int rc = dump_list_dir(x->d, dir->ino, &l, impossible, x);

	if (rc < 0) {
		struct xent p = {.path = x->pathlen ? x->path : "."};
		export_error(x, &p, "cannot list: %s", strerror(-rc));
		if (rc == -ENOMEM)
			x->fatal = 1;
	}
	for (size_t i = 0; i < l.n && !x->fatal; i++)
		walk_entry(w, &l, &l.ents[i], depth);
	dump_listing_free(&l);
}

/* Borrowed blocks count toward the progress as the blocks they read as. */
static int add_borrowed(void *arg, const void *k, size_t kl, const void *v, size_t vl)
{
	struct kv_extent b;

	if (kv_decode_extent(KV_DB_EXTENT, k, kl, v, vl, &b) == 0)
		*(uint64_t *)arg += b.count;
	return 0;
}

int dump_export(struct dump *d, const struct dump_args *a)
{
	struct export x = {.d = d, .dest = a->dest, .as_root = geteuid() == 0};
	struct walk w = {.x = &x};
	struct kv_inode root;
	struct xent e = {.path = ".", .name = ".", .in = &root};
	uint64_t blocks;
	char size[32];
	int rc;

	x.to_stdout = a->export_kind == EXPORT_STDOUT;
	if (x.to_stdout)
		x.dest = "standard output";
	x.sink = a->export_kind == EXPORT_DIR ? &export_dir_sink : &export_tar_sink;
	inomap_init(&w.dirs);
	inomap_init(&w.links);
	/* one read transaction for the whole walk: one snapshot */
	rc = kv_read_begin(d->env, &d->t);
	if (!rc)
		rc = kv_inode_get(d->t, KV_ROOT_INO, &root);
	if (rc) {
		dump_error(d, "'%s': cannot read the root directory: %s", d->image, strerror(-rc));
		goto out;
	}
	if (!S_ISDIR(root.mode)) {
		dump_error(d, "'%s': the root inode is not a directory", d->image);
		goto out;
	}
	if (kv_db_count(d->t, KV_DB_INODE, &x.inodes_total) == 0 &&
	    kv_db_count(d->t, KV_DB_DATA, &blocks) == 0 &&
	    walk_records(d->t, KV_DB_EXTENT, NULL, 0, add_borrowed, &blocks) == 0)
		x.total = x.inodes_total + blocks; /* else no fraction: the bar stays empty */
	if (x.sink->open(&x) != 0)
		goto out;
	walk_one(&w, &e, 0);
	rc = x.sink->close(&x);
	if (rc == 0 && !x.fatal && d->prog.on)
		progress_line(&x, 1);
	progress_clear(&d->prog);
	if (rc == 0 && !x.fatal) {
		/* standard output holds the archive: the report goes to stderr */
		FILE *out = x.to_stdout ? stderr : stdout;
		const char *q = x.to_stdout ? "" : "'";

		cli_format_bytes(x.bytes, size, sizeof(size));
		fprintf(out, "exported %llu inodes (%s of file data) to %s%s%s%s\n",
			(unsigned long long)x.inodes, size, q, x.dest, q,
			d->errors ? ", with errors" : "");
	}
out:
	kv_iter_close(x.ext_it);
	kv_iter_close(x.home_it);
	inomap_release(&w.dirs);
	inomap_release(&w.links);
	free(x.path);
	return d->errors || x.fatal ? EXIT_OPERATIONAL : EXIT_OK;
}

/* ------------------------------------------------------ directory sink -- */

struct dirsink {
	int *fds;          /* open directories from DEST down to the current one */
	size_t nfds, capfds;
	int have_proc;     /* /proc/self/fd reaches entries that cannot be opened */
	unsigned char *buf; /* file data waiting to be written */
	uint64_t buf_off;
	size_t buf_len;
	int fd;            /* the file being written */
};

static int dir_open(struct export *x)
{
	struct dirsink *s = calloc(1, sizeof(*s));
	struct dirent *de;
	DIR *dir;
	int fd = -1, empty = 1;

	if (!s || !(s->buf = malloc(WBUF_SIZE)) ||
	    !(s->fds = array_reserve(NULL, &s->capfds, 1, sizeof(int), 16))) {
		export_error(x, NULL, "out of memory");
		goto free_sink;
	}
	s->have_proc = access("/proc/self/fd", X_OK) == 0;
	if (mkdir(x->dest, 0700) != 0 && errno != EEXIST) {
		export_error(x, NULL, "cannot create: %s", strerror(errno));
		goto free_sink;
	}
	fd = open(x->dest, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		export_error(x, NULL, "%s", errno == ENOTDIR ? "exists and is not a directory"
							  : strerror(errno));
		goto free_sink;
	}
	dir = fdopendir(dup(fd));
	if (!dir) {
		export_error(x, NULL, "cannot read: %s", strerror(errno));
		goto close_fd;
	}
	while ((de = readdir(dir)) != NULL)
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			empty = 0;
	closedir(dir);
	if (!empty) {
		export_error(x, NULL, "exists and is not empty");
		goto close_fd;
	}
	s->fds[s->nfds++] = fd;
	x->priv = s;
	return 0;

close_fd:
	close(fd);
free_sink:
	if (s) {
		free(s->fds);
		free(s->buf);
	}
	free(s);
	return -1;
}

/* A path that reaches entry name of directory fd without following a
 * final symlink: for the l*xattr calls, which take no descriptor. */
static const char *entry_path(struct export *x, int dirfd, const char *name, char *buf,
			      size_t len)
{
	struct dirsink *s = x->priv;

	if (s->have_proc) {
		snprintf(buf, len, "/proc/self/fd/%d/%s", dirfd, name);
		return buf;
	}
	snprintf(buf, len, "%s/%s", x->dest, x->path);
	return buf;
}

struct xattr_target {
	struct export *x;
	const struct xent *e;
	int fd;           /* >= 0: fsetxattr */
	const char *path; /* else lsetxattr */
	unsigned acls;    /* 1 << KV_ACL_TYPE_* of the ACLs the image holds */
};

static int set_one_xattr(void *arg, const char *name, const void *val, size_t len)
{
	struct xattr_target *t = arg;
	int rc = t->fd >= 0 ? fsetxattr(t->fd, name, val, len, 0)
			    : lsetxattr(t->path, name, val, len, 0);

	t->acls |= 1u << kv_acl_name(name);
	if (rc != 0)
		export_error(t->x, t->e, "cannot set xattr '%s': %s", name, strerror(errno));
	return 0;
}

/* Remove the ACLs the entry inherited (from a default ACL above DEST) that
 * the image does not hold. A symlink has none; only a directory a default. */
static void drop_inherited_acls(struct xattr_target *t)
{
	uint32_t mode = t->e->in->mode;

	for (int type = KV_ACL_TYPE_ACCESS; type <= KV_ACL_TYPE_DEFAULT; type++) {
		const char *name = type == KV_ACL_TYPE_ACCESS ? KV_ACL_ACCESS : KV_ACL_DEFAULT;
		int rc;

		if ((t->acls & 1u << type) || S_ISLNK(mode) ||
		    (type == KV_ACL_TYPE_DEFAULT && !S_ISDIR(mode)))
			continue;
		rc = t->fd >= 0 ? fremovexattr(t->fd, name) : lremovexattr(t->path, name);
		if (rc != 0 && errno != ENODATA && errno != EOPNOTSUPP)
			export_error(t->x, t->e, "cannot remove the inherited ACL '%s': %s", name,
				     strerror(errno));
	}
}

/* Owner, xattrs, mode and times of an entry made already: through fd when
 * it is open (regular files, directories), else by name in dirfd. */
static void set_attrs(struct export *x, const struct xent *e, int fd, int dirfd)
{
	const struct kv_inode *in = e->in;
	struct timespec ts[2] = {{in->atime_ns / 1000000000, in->atime_ns % 1000000000},
				 {in->mtime_ns / 1000000000, in->mtime_ns % 1000000000}};
	struct xattr_target t = {.x = x, .e = e, .fd = fd};
	char pbuf[PATH_MAX + 64];
	int rc;

	for (int i = 0; i < 2; i++)
		if (ts[i].tv_nsec < 0)
			ts[i].tv_nsec += 1000000000, ts[i].tv_sec--;
	if (x->as_root) {
		rc = fd >= 0 ? fchown(fd, in->uid, in->gid)
			     : fchownat(dirfd, e->name, in->uid, in->gid, AT_SYMLINK_NOFOLLOW);
		if (rc)
			export_error(x, e, "cannot set the owner: %s", strerror(errno));
	}
	if (fd < 0)
		t.path = entry_path(x, dirfd, e->name, pbuf, sizeof(pbuf));
	rc = export_xattrs(x, e, set_one_xattr, &t);
	if (rc)
		export_error(x, e, "cannot read xattrs: %s", strerror(-rc));
	else
		drop_inherited_acls(&t);
	if (!S_ISLNK(in->mode)) {
		rc = fd >= 0 ? fchmod(fd, in->mode & 07777)
			     : fchmodat(dirfd, e->name, in->mode & 07777, 0);
		if (rc)
			export_error(x, e, "cannot set the mode: %s", strerror(errno));
	}
	rc = fd >= 0 ? futimens(fd, ts) : utimensat(dirfd, e->name, ts, AT_SYMLINK_NOFOLLOW);
	if (rc)
		export_error(x, e, "cannot set the times: %s", strerror(errno));
}

static int is_zero(const unsigned char *p, size_t n)
{
	return n == 0 || (p[0] == 0 && memcmp(p, p + 1, n - 1) == 0);
}

/* Write the buffered bytes, leaving out whole file pages of zeros. */
static int buf_flush(struct dirsink *s)
{
	size_t i = 0;

	while (i < s->buf_len) {
		uint64_t off = s->buf_off + i;
		size_t page = PAGE - (size_t)(off % PAGE), run = 0;

		if (page > s->buf_len - i)
			page = s->buf_len - i;
		if (is_zero(s->buf + i, page)) {
			i += page;
			continue;
		}
		/* a run of pages holding data */
		while (i + run < s->buf_len) {
			size_t p = PAGE - (size_t)((off + run) % PAGE);
			if (p > s->buf_len - i - run)
				p = s->buf_len - i - run;
			if (run && is_zero(s->buf + i + run, p))
				break;
			run += p;
		}
		for (size_t done = 0; done < run;) {
			ssize_t n = pwrite(s->fd, s->buf + i + done, run - done,
					   (off_t)(off + done));
			if (n < 0)
				return -errno;
			done += (size_t)n;
		}
		i += run;
	}
	s->buf_len = 0;
	return 0;
}

static int buf_add(void *arg, uint64_t off, const void *data, size_t len)
{
	struct dirsink *s = arg;
	int rc;

	if (s->buf_len && (off != s->buf_off + s->buf_len || s->buf_len + len > WBUF_SIZE)) {
		rc = buf_flush(s);
		if (rc)
			return rc;
	}
	if (!s->buf_len)
		s->buf_off = off;
	memcpy(s->buf + s->buf_len, data, len);
	s->buf_len += len;
	return 0;
}

static int dir_file(struct export *x, const struct xent *e, int dirfd)
{
	struct dirsink *s = x->priv;
	int rc;

	s->fd = openat(dirfd, e->name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (s->fd < 0) {
		export_error(x, e, "cannot create: %s", strerror(errno));
		return -1;
	}
	s->buf_len = 0;
	rc = export_data(x, e, XDATA_REPORT | XDATA_COUNT, buf_add, s);
	if (rc == 0)
		rc = buf_flush(s);
	if (rc == 0 && ftruncate(s->fd, (off_t)e->in->size) != 0)
		rc = -errno;
	if (rc) {
		export_error(x, e, "cannot write: %s", strerror(-rc));
		if (rc == -ENOSPC || rc == -EDQUOT || rc == -EROFS)
			x->fatal = 1;
	}
	set_attrs(x, e, s->fd, dirfd);
	if (close(s->fd) != 0 && !rc) {
		export_error(x, e, "cannot write: %s", strerror(errno));
		rc = -1;
	}
	return rc ? -1 : 0;
}

static int dir_push(struct export *x, const struct xent *e, int dirfd)
{
	struct dirsink *s = x->priv;
	int fd, *fds;

	if (mkdirat(dirfd, e->name, 0700) != 0) {
		export_error(x, e, "cannot create: %s", strerror(errno));
		return -1;
	}
	fd = openat(dirfd, e->name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		export_error(x, e, "cannot open: %s", strerror(errno));
		return -1;
	}
	fds = array_reserve(s->fds, &s->capfds, s->nfds + 1, sizeof(*fds), 16);
	if (!fds) {
		close(fd);
		x->fatal = 1;
		return -1;
	}
	s->fds = fds;
	s->fds[s->nfds++] = fd;
	return 0;
}

static int dir_entry(struct export *x, const struct xent *e)
{
	struct dirsink *s = x->priv;
	const struct kv_inode *in = e->in;
	int dirfd = s->fds[s->nfds - 1];
	char target[KV_SYMLINK_MAX + 1];

	if (e->link_to) {
		if (linkat(s->fds[0], e->link_to, dirfd, e->name, 0) == 0)
			return 0;
		export_error(x, e, "cannot link to '%s': %s", e->link_to, strerror(errno));
		return -1;
	}
	if (in->ino == KV_ROOT_INO && strcmp(e->path, ".") == 0)
		return 0; /* DEST itself: its attributes are set when it is done */
	switch (in->mode & S_IFMT) {
	case S_IFDIR:
		return dir_push(x, e, dirfd);
	case S_IFREG:
		return dir_file(x, e, dirfd);
	case S_IFLNK:
		if (in->inline_len == 0 || memchr(in->inline_data, 0, in->inline_len)) {
			export_error(x, e, "symlink target is empty or holds a NUL byte; skipped");
			return -1;
		}
		memcpy(target, in->inline_data, in->inline_len);
		target[in->inline_len] = '\0';
		if (symlinkat(target, dirfd, e->name) != 0) {
			export_error(x, e, "cannot create: %s", strerror(errno));
			return -1;
		}
		break;
	case S_IFIFO:
	case S_IFCHR:
	case S_IFBLK:
	case S_IFSOCK:
		if (mknodat(dirfd, e->name, (in->mode & S_IFMT) | 0600, (dev_t)in->rdev) != 0) {
			export_error(x, e, "cannot create: %s", strerror(errno));
			return -1;
		}
		break;
	default:
		export_error(x, e, "unknown file type %#o; skipped", in->mode & S_IFMT);
		return -1;
	}
	set_attrs(x, e, -1, dirfd);
	return 0;
}

static void dir_done(struct export *x, const struct xent *e)
{
	struct dirsink *s = x->priv;
	int fd = s->fds[s->nfds - 1];

	set_attrs(x, e, fd, -1);
	if (s->nfds > 1) {
		close(fd);
		s->nfds--;
	}
}

static int dir_close(struct export *x)
{
	struct dirsink *s = x->priv;

	for (size_t i = 0; i < s->nfds; i++)
		close(s->fds[i]);
	free(s->fds);
	free(s->buf);
	free(s);
	x->priv = NULL;
	return 0;
}

const struct xsink export_dir_sink = {
	.open = dir_open, .entry = dir_entry, .dir_done = dir_done, .close = dir_close,
};
