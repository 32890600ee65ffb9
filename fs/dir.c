/*
 * dir.c - names: lookup, the calls that make and remove names (mknod, mkdir,
 * symlink, link, create's first half, unlink, rmdir, rename), readlink and
 * directory listings.
 *
 * Invariants:
 *  1. Every change to the tree is one writer op: all its records (dirents,
 *     the child, both parents) change together or none do (writer.c rolls a
 *     failed op back alone).
 *  2. A directory's size is its number of entries and its nlink is 2 plus
 *     its subdirectories; every op here keeps both exact.
 *  3. Each entry reply adds one lookup reference (itable.c) before it is
 *     sent; "." and ".." of readdirplus add none (the kernel takes none).
 *  4. lookup and readdir read through the thread's recycled read
 *     transaction; lookup allocates nothing.
 *
 * Each operation's work is a core (fs_do_*, fs.h) that the handler (fs_op_*,
 * at the end of each section) calls between decoding and the reply.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fs.h"

#define NLINK_MAX 0xfffffffeU

static int get_dir(kv_txn *t, uint64_t ino, struct kv_inode *dir)
{
	int rc = kv_inode_get(t, ino, dir);

	if (rc)
		return rc;
	if (!S_ISDIR(dir->mode))
		return -ENOTDIR;
	if (dir->nlink == 0)
		return -ENOENT; /* removed while open */
	return 0;
}

static void touch_dir(struct kv_inode *dir, int64_t now)
{
	dir->mtime_ns = dir->ctime_ns = now;
}

/* --------------------------------------------------------------- lookup -- */

struct name {
	uint64_t parent;
	const char *name;
	size_t len;
};

static int find_name(kv_txn *t, const void *arg, struct kv_inode *in)
{
	const struct name *n = arg;
	struct kv_dirent de;
	int rc;

	/* read together, one wait on a server (kv_inode_prefetch) */
	kv_inode_prefetch(t, n->parent);
	kv_dirent_prefetch(t, n->parent, n->name, n->len);
	rc = kv_inode_get(t, n->parent, in);
	if (rc == 0 && !S_ISDIR(in->mode))
		rc = -ENOTDIR;
	if (rc == 0)
		rc = kv_dirent_lookup(t, n->parent, n->name, n->len, &de);
	if (rc == 0)
		rc = kv_inode_get(t, de.ino, in);
	return rc;
}

int fs_do_lookup(uint64_t parent, const char *name, struct stat *out)
{
	struct name n = {.parent = parent, .name = name, .len = strlen(name)};
	struct kv_inode in;
	int rc;

	if (n.len > KV_NAME_MAX)
		return -ENAMETOOLONG;
	/* the kernel forgot the inode and takes its times from here */
	rc = fs_attr_read(parent, find_name, &n, &in);
	if (rc)
		return rc;
	fs_attr_fill(&in, out);
	fs_itable_ref(in.ino);
	return 0;
}

void fs_op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fuse_entry_param e;
	struct stat st;
	int rc = fs_do_lookup(parent, name, &st);

	if (rc == 0) {
		fs_fill_entry(&st, &e);
		fuse_reply_entry(req, &e);
	} else if (rc == -ENOENT) {
		/* a negative entry: the kernel may cache the absence */
		memset(&e, 0, sizeof(e));
		e.entry_timeout = fs.cfg.timeout;
		fuse_reply_entry(req, &e);
	} else {
		fuse_reply_err(req, -rc);
	}
}

/* ----------------------------------------------------- making names -- */

struct mk_args {
	uint64_t parent;
	const char *name;
	size_t len;
	uint32_t mode;
	uint64_t rdev;
	const char *target; /* symlink */
	size_t target_len;
	uint64_t link_ino;  /* link: the existing inode */
	const struct fs_cred *cred;
	struct kv_inode out;
};

/* acl(5) at create: the directory's default ACL passes on to what is made
 * in it, masked by the mode asked for, in place of the umask; a directory
 * takes it as its own default too. Symlinks take neither. */
static int create_acl(kv_txn *t, const struct mk_args *a, struct kv_inode *in)
{
	unsigned char acl[KV_ACL_SIZE_MAX];
	size_t len;
	int rc;

	if (S_ISLNK(in->mode))
		return 0;
	rc = fs_acl_get(t, a->parent, KV_ACL_DEFAULT, acl, &len);
	if (rc == -ENODATA) {
		in->mode &= ~(a->cred->umask & 0777);
		return 0;
	}
	if (rc)
		return rc;
	if (S_ISDIR(in->mode)) {
		rc = kv_xattr_set(t, in->ino, KV_ACL_DEFAULT, acl, len, 0);
		if (rc)
			return rc;
	}
	rc = kv_acl_create(acl, len, &in->mode);
	if (rc > 0)
		rc = kv_xattr_set(t, in->ino, KV_ACL_ACCESS, acl, len, 0);
	return rc;
}

static int apply_mknod(kv_txn *t, void *arg)
{
	struct mk_args *a = arg;
	struct kv_inode dir, in = {0};
	struct kv_dirent de;
	int64_t now = fs_now_ns();
	int rc;

	kv_inode_prefetch(t, a->parent);
	kv_dirent_prefetch(t, a->parent, a->name, a->len);
	if (fs.cfg.acl && !S_ISLNK(a->mode)) /* create_acl's */
		kv_xattr_prefetch(t, a->parent, KV_ACL_DEFAULT);
	rc = get_dir(t, a->parent, &dir);
	if (rc)
		return rc;
	rc = kv_dirent_lookup(t, a->parent, a->name, a->len, &de);
	if (rc != -ENOENT)
		return rc ? rc : -EEXIST;
	if (S_ISDIR(a->mode) && dir.nlink >= NLINK_MAX)
		return -EMLINK;
	rc = kv_ino_alloc(t, &in.ino);
	if (rc)
		return rc;
	in.mode = a->mode;
	in.uid = a->cred->uid;
	in.gid = a->cred->gid;
	if (dir.mode & S_ISGID) { /* setgid directory: its group passes on */
		in.gid = dir.gid;
		if (S_ISDIR(in.mode))
			in.mode |= S_ISGID;
	}
	if (!S_ISDIR(in.mode) && (in.mode & S_ISGID) && in.uid != 0 &&
	    !fs_cred_in_group(a->cred, in.gid))
		in.mode &= ~(uint32_t)S_ISGID;
	rc = create_acl(t, a, &in);
	if (rc)
		return rc;
	in.nlink = S_ISDIR(in.mode) ? 2 : 1;
	in.rdev = a->rdev;
	in.atime_ns = in.mtime_ns = in.ctime_ns = in.btime_ns = now;
	if (S_ISDIR(in.mode))
		in.parent = a->parent;
	if (S_ISLNK(in.mode)) {
		in.inline_data = a->target;
		in.inline_len = (uint32_t)a->target_len;
		in.size = a->target_len; /* a symlink's size is its target's length */
	}
	rc = kv_inode_put(t, &in);
	if (!rc)
		rc = kv_dirent_add(t, a->parent, a->name, a->len, in.ino, kv_dirent_type(in.mode));
	if (rc)
		return rc;
	dir.size++;
	if (S_ISDIR(in.mode))
		dir.nlink++;
	touch_dir(&dir, now);
	rc = kv_inode_put(t, &dir);
	in.inline_data = NULL;
	a->out = in;
	return rc;
}

/* Make the name a describes: its attributes into *out. */
static int make(struct mk_args *a, struct stat *out)
{
	int rc;

	a->len = strlen(a->name);
	if (a->len > KV_NAME_MAX)
		return -ENAMETOOLONG;
	rc = fs_write(apply_mknod, a, 0);
	if (rc)
		return rc;
	fs_attr_fill(&a->out, out);
	fs_itable_ref_made(a->out.ino); /* no xattr but the ACLs it took */
	return 0;
}

int fs_do_mknod(uint64_t parent, const char *name, uint32_t mode, uint64_t rdev,
		const struct fs_cred *c, struct stat *out)
{
	struct mk_args a = {.parent = parent, .name = name, .mode = mode, .rdev = rdev, .cred = c};

	switch (mode & S_IFMT) {
	case S_IFREG: case S_IFCHR: case S_IFBLK: case S_IFIFO: case S_IFSOCK:
		break;
	case 0:
		a.mode |= S_IFREG;
		break;
	default:
		return -EINVAL;
	}
	return make(&a, out);
}

int fs_do_mkdir(uint64_t parent, const char *name, uint32_t mode, const struct fs_cred *c,
		struct stat *out)
{
	struct mk_args a = {.parent = parent, .name = name, .mode = S_IFDIR | (mode & 07777),
			    .cred = c};

	return make(&a, out);
}

int fs_do_symlink(const char *target, uint64_t parent, const char *name,
		  const struct fs_cred *c, struct stat *out)
{
	struct mk_args a = {.parent = parent, .name = name, .mode = S_IFLNK | 0777,
			    .target = target, .target_len = strlen(target), .cred = c};

	if (a.target_len > KV_SYMLINK_MAX)
		return -ENAMETOOLONG;
	return make(&a, out);
}

int fs_do_create(uint64_t parent, const char *name, uint32_t mode, const struct fs_cred *c,
		 struct stat *out)
{
	return fs_do_mknod(parent, name, S_IFREG | (mode & 07777), 0, c, out);
}

static int apply_link(kv_txn *t, void *arg)
{
	struct mk_args *a = arg;
	struct kv_inode dir, *in = &a->out;
	int64_t now = fs_now_ns();
	int rc;

	kv_inode_prefetch(t, a->link_ino);
	kv_inode_prefetch(t, a->parent);
	kv_dirent_prefetch(t, a->parent, a->name, a->len);
	rc = kv_inode_get(t, a->link_ino, in);
	if (rc)
		return rc;
	if (S_ISDIR(in->mode))
		return -EPERM;
	if (in->nlink == 0)
		return -ENOENT;
	if (in->nlink >= NLINK_MAX)
		return -EMLINK;
	rc = get_dir(t, a->parent, &dir);
	if (!rc)
		rc = kv_dirent_add(t, a->parent, a->name, a->len, in->ino, kv_dirent_type(in->mode));
	if (rc)
		return rc;
	in->nlink++;
	in->ctime_ns = now;
	dir.size++;
	touch_dir(&dir, now);
	rc = kv_inode_put(t, in);
	if (!rc)
		rc = kv_inode_put(t, &dir);
	in->inline_data = NULL;
	return rc;
}

int fs_do_link(uint64_t ino, uint64_t newparent, const char *newname, struct stat *out)
{
	struct mk_args a = {.parent = newparent, .name = newname, .link_ino = ino};
	int rc;

	a.len = strlen(newname);
	if (a.len > KV_NAME_MAX)
		return -ENAMETOOLONG;
	rc = fs_write(apply_link, &a, 0);
	if (rc)
		return rc;
	fs_attr_fill(&a.out, out);
	fs_itable_ref(a.out.ino);
	return 0;
}

/* The entry (or create) reply of a core's result. */
static void reply_entry(fuse_req_t req, int rc, const struct stat *st, struct fuse_file_info *fi)
{
	struct fuse_entry_param e;

	if (rc) {
		fuse_reply_err(req, -rc);
		return;
	}
	fs_fill_entry(st, &e);
	if (fi) {
		/* as an open's (fs_reply_open) */
		fi->fh = kv_lost_sample(fs.env, (fi->flags & O_ACCMODE) != O_RDONLY);
		fi->keep_cache = fs.cfg.keep_cache;
		fuse_reply_create(req, &e, fi);
	} else {
		fuse_reply_entry(req, &e);
	}
}

void fs_op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev)
{
	gid_t groups[NGROUPS_KEEP];
	struct fs_cred c;
	struct stat st;

	fs_caller(req, (mode & S_ISGID) && !S_ISDIR(mode), &c, groups);
	reply_entry(req, fs_do_mknod(parent, name, mode, rdev, &c, &st), &st, NULL);
}

void fs_op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	struct fs_cred c;
	struct stat st;

	fs_caller(req, 0, &c, NULL);
	reply_entry(req, fs_do_mkdir(parent, name, mode, &c, &st), &st, NULL);
}

void fs_op_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name)
{
	struct fs_cred c;
	struct stat st;

	fs_caller(req, 0, &c, NULL);
	reply_entry(req, fs_do_symlink(link, parent, name, &c, &st), &st, NULL);
}

void fs_op_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		  struct fuse_file_info *fi)
{
	gid_t groups[NGROUPS_KEEP];
	struct fs_cred c;
	struct stat st;

	fs_caller(req, mode & S_ISGID, &c, groups);
	reply_entry(req, fs_do_create(parent, name, mode, &c, &st), &st, fi);
}

void fs_op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname)
{
	struct stat st;

	reply_entry(req, fs_do_link(ino, newparent, newname, &st), &st, NULL);
}

/* ---------------------------------------------------- removing names -- */

struct rm_args {
	uint64_t parent;
	const char *name;
	size_t len;
	int dir; /* rmdir */
};

static int apply_remove(kv_txn *t, void *arg)
{
	struct rm_args *a = arg;
	struct kv_inode dir, child;
	struct kv_dirent de;
	int rc;

	kv_inode_prefetch(t, a->parent);
	kv_dirent_prefetch(t, a->parent, a->name, a->len);
	rc = get_dir(t, a->parent, &dir);
	if (!rc)
		rc = kv_dirent_lookup(t, a->parent, a->name, a->len, &de);
	if (!rc)
		rc = kv_inode_get(t, de.ino, &child);
	if (rc)
		return rc;
	if (a->dir) {
		if (!S_ISDIR(child.mode))
			return -ENOTDIR;
		if (child.size > 0)
			return -ENOTEMPTY;
		dir.nlink--;
		child.nlink = 1; /* its own "." goes with its name */
	} else if (S_ISDIR(child.mode)) {
		return -EISDIR;
	}
	rc = kv_dirent_remove(t, a->parent, a->name, a->len);
	if (rc)
		return rc;
	dir.size--;
	touch_dir(&dir, fs_now_ns());
	rc = kv_inode_put(t, &dir);
	return rc ? rc : fs_drop_link(t, &child);
}

static int remove_name(uint64_t parent, const char *name, int isdir)
{
	struct rm_args a = {.parent = parent, .name = name, .len = strlen(name), .dir = isdir};

	if (a.len > KV_NAME_MAX)
		return -ENAMETOOLONG;
	return fs_write(apply_remove, &a, KV_OP_RESERVE); /* works when full */
}

int fs_do_unlink(uint64_t parent, const char *name)
{
	return remove_name(parent, name, 0);
}

int fs_do_rmdir(uint64_t parent, const char *name)
{
	return remove_name(parent, name, 1);
}

void fs_op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	fuse_reply_err(req, -fs_do_unlink(parent, name));
}

void fs_op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	fuse_reply_err(req, -fs_do_rmdir(parent, name));
}

/* -------------------------------------------------------------- rename -- */

struct rename_args {
	uint64_t parent, newparent;
	const char *name, *newname;
	size_t len, newlen;
	unsigned flags;
	uint64_t moved[2]; /* result: directories that changed parents */
};

/* 1 if anc is dir or one of its ancestors, 0 if not. */
static int is_ancestor(kv_txn *t, uint64_t anc, uint64_t dir)
{
	struct kv_inode in;
	uint64_t cur = dir;

	for (int depth = 0; depth < 1 << 20; depth++) {
		if (cur == anc)
			return 1;
		if (cur == KV_ROOT_INO)
			return 0;
		int rc = kv_inode_get(t, cur, &in);
		if (rc)
			return rc == -ENOENT ? -EIO : rc;
		cur = in.parent;
	}
	fs_log("directory %llu: parent chain loops", (unsigned long long)dir);
	return -EIO;
}

static int rename_exchange(kv_txn *t, struct rename_args *a, struct kv_inode *p,
			   struct kv_inode *np, struct kv_inode *s, struct kv_inode *d)
{
	int rc;

	if (S_ISDIR(d->mode) && a->parent != a->newparent) {
		rc = is_ancestor(t, d->ino, a->parent);
		if (rc)
			return rc < 0 ? rc : -EINVAL;
	}
	rc = kv_dirent_replace(t, a->parent, a->name, a->len, d->ino, kv_dirent_type(d->mode));
	if (!rc)
		rc = kv_dirent_replace(t, a->newparent, a->newname, a->newlen, s->ino,
				       kv_dirent_type(s->mode));
	if (rc)
		return rc;
	if (a->parent != a->newparent) {
		if (S_ISDIR(s->mode)) {
			s->parent = a->newparent;
			a->moved[0] = s->ino;
			p->nlink--;
			np->nlink++;
		}
		if (S_ISDIR(d->mode)) {
			d->parent = a->parent;
			a->moved[1] = d->ino;
			np->nlink--;
			p->nlink++;
		}
	}
	d->ctime_ns = s->ctime_ns;
	return kv_inode_put(t, d);
}

static int rename_replace(kv_txn *t, struct rename_args *a, struct kv_inode *np,
			  struct kv_inode *s, struct kv_inode *d)
{
	int rc;

	if (S_ISDIR(s->mode) && !S_ISDIR(d->mode))
		return -ENOTDIR;
	if (!S_ISDIR(s->mode) && S_ISDIR(d->mode))
		return -EISDIR;
	if (S_ISDIR(d->mode) && d->size > 0)
		return -ENOTEMPTY;
	rc = kv_dirent_replace(t, a->newparent, a->newname, a->newlen, s->ino, kv_dirent_type(s->mode));
	if (rc)
		return rc;
	if (S_ISDIR(d->mode)) {
		np->nlink--;
		d->nlink = 1;
	}
	return fs_drop_link(t, d);
}

static int apply_rename(kv_txn *t, void *arg)
{
	struct rename_args *a = arg;
	struct kv_inode pbuf, npbuf, s, d, *p = &pbuf, *np = &npbuf;
	struct kv_dirent sde, dde;
	int64_t now = fs_now_ns();
	int rc, exists;

	a->moved[0] = a->moved[1] = 0;
	kv_inode_prefetch(t, a->parent);
	kv_inode_prefetch(t, a->newparent);
	kv_dirent_prefetch(t, a->parent, a->name, a->len);
	kv_dirent_prefetch(t, a->newparent, a->newname, a->newlen);
	rc = get_dir(t, a->parent, p);
	if (rc)
		return rc;
	if (a->newparent == a->parent)
		np = p;
	else if ((rc = get_dir(t, a->newparent, np)) != 0)
		return rc;
	rc = kv_dirent_lookup(t, a->parent, a->name, a->len, &sde);
	if (!rc)
		rc = kv_inode_get(t, sde.ino, &s);
	if (rc)
		return rc;
	rc = kv_dirent_lookup(t, a->newparent, a->newname, a->newlen, &dde);
	if (rc && rc != -ENOENT)
		return rc;
	exists = rc == 0;
	if (exists && dde.ino == sde.ino)
		return 0; /* the same file: nothing to do */
	if (exists && (a->flags & RENAME_NOREPLACE))
		return -EEXIST;
	if (!exists && (a->flags & RENAME_EXCHANGE))
		return -ENOENT;
	if (S_ISDIR(s.mode) && a->parent != a->newparent) {
		rc = is_ancestor(t, s.ino, a->newparent);
		if (rc)
			return rc < 0 ? rc : -EINVAL;
	}
	if (exists && (rc = kv_inode_get(t, dde.ino, &d)) != 0)
		return rc;
	s.ctime_ns = now;
	if (a->flags & RENAME_EXCHANGE) {
		rc = rename_exchange(t, a, p, np, &s, &d);
	} else {
		if (exists)
			rc = rename_replace(t, a, np, &s, &d);
		else if ((rc = kv_dirent_add(t, a->newparent, a->newname, a->newlen, s.ino,
					     kv_dirent_type(s.mode))) == 0)
			np->size++;
		if (!rc)
			rc = kv_dirent_remove(t, a->parent, a->name, a->len);
		if (rc)
			return rc;
		p->size--;
		if (S_ISDIR(s.mode) && a->parent != a->newparent) {
			if (np->nlink >= NLINK_MAX)
				return -EMLINK;
			s.parent = a->newparent;
			a->moved[0] = s.ino;
			p->nlink--;
			np->nlink++;
		}
	}
	if (rc)
		return rc;
	touch_dir(p, now);
	touch_dir(np, now);
	rc = kv_inode_put(t, &s);
	if (!rc)
		rc = kv_inode_put(t, p);
	if (!rc && np != p)
		rc = kv_inode_put(t, np);
	return rc;
}

int fs_do_rename(uint64_t parent, const char *name, uint64_t newparent, const char *newname,
		 unsigned flags)
{
	struct rename_args a = {.parent = parent, .newparent = newparent, .name = name,
				.newname = newname, .len = strlen(name), .newlen = strlen(newname),
				.flags = flags};
	int rc;

	if (flags & ~(unsigned)(RENAME_NOREPLACE | RENAME_EXCHANGE) ||
	    (flags & RENAME_NOREPLACE && flags & RENAME_EXCHANGE))
		return -EINVAL;
	if (a.len > KV_NAME_MAX || a.newlen > KV_NAME_MAX)
		return -ENAMETOOLONG;
	/* may free a target: works when full, as a delete (it grows the image
	 * by a name at most) */
	rc = fs_write(apply_rename, &a, KV_OP_RESERVE);
	/* a cached listing of a moved directory has the old "..": drop it
	 * before the caller can list the directory again (a directory has no
	 * dirty pages, so this never blocks) */
	for (int i = 0; i < 2 && rc == 0 && fs.cfg.cache_dir; i++)
		if (a.moved[i])
			fs_notify_inval(a.moved[i], 0, 0);
	return rc;
}

void fs_op_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
		  const char *newname, unsigned int flags)
{
	fuse_reply_err(req, -fs_do_rename(parent, name, newparent, newname, flags));
}

/* ------------------------------------------------------------ reading -- */

int fs_do_readlink(uint64_t ino, char *buf, size_t size)
{
	struct kv_inode in;
	kv_txn *t;
	int rc;

	rc = fs_read_inode(ino, &t, &in);
	if (rc)
		return rc;
	/* copied out: the reply needs a NUL the map does not hold */
	if (!S_ISLNK(in.mode))
		rc = -EINVAL;
	else if (in.inline_len >= size)
		rc = -ERANGE;
	else {
		memcpy(buf, in.inline_data, in.inline_len);
		buf[in.inline_len] = '\0';
	}
	fs_read_end(t);
	return rc;
}

void fs_op_readlink(fuse_req_t req, fuse_ino_t ino)
{
	char target[KV_SYMLINK_MAX + 1];
	int rc = fs_do_readlink(ino, target, sizeof(target));

	if (rc)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_readlink(req, target);
}

void fs_op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	fs_reply_open(req, fi, fs.cfg.cache_dir, 1);
}

/* "." and ".." of a listing from off: 1 when emit had no room. */
static int list_dots(uint64_t ino, const struct kv_inode *dir, uint64_t off, fs_dirent_fn emit,
		     void *arg)
{
	struct fs_dirent dot = {.name = ".", .ino = ino, .type = S_IFDIR, .next = 1};
	struct fs_dirent dotdot = {.name = "..", .ino = dir->parent, .type = S_IFDIR, .next = 2};

	if (off == 0 && emit(arg, &dot))
		return 1;
	if (off <= 1 && emit(arg, &dotdot))
		return 1;
	return 0;
}

/* A listing with attributes on a store on a server reads this many entries
 * ahead and asks for their inodes together (kv_inode_prefetch): one wait
 * for them all, not one an entry. */
#define AHEAD 32

struct ahead {
	int n, i, rc; /* entries held, the next to give; the read's end or failure */
	struct {
		struct kv_dirent de;
		uint64_t at;
		char name[KV_NAME_MAX];
	} e[AHEAD];
};

/* kv_dir_next through a's entries read ahead (a NULL: none). */
static int next_entry(kv_txn *t, uint64_t ino, uint64_t *at, struct kv_dirent *de,
		      struct ahead *a)
{
	if (!a)
		return kv_dir_next(t, ino, at, de);
	if (a->i == a->n) {
		if (a->rc)
			return a->rc;
		a->i = a->n = 0;
		while (a->n < AHEAD && (a->rc = kv_dir_next(t, ino, at, de)) == 0) {
			memcpy(a->e[a->n].name, de->name, de->namelen);
			a->e[a->n].de = *de;
			a->e[a->n].de.name = a->e[a->n].name;
			a->e[a->n].at = *at;
			kv_inode_prefetch(t, de->ino);
			a->n++;
		}
		if (!a->n)
			return a->rc;
	}
	*de = a->e[a->i].de;
	*at = a->e[a->i++].at;
	return 0;
}

int fs_do_readdir(uint64_t ino, uint64_t off, int plus, fs_dirent_fn emit, void *arg)
{
	char name[KV_NAME_MAX + 1];
	struct kv_inode dir, child;
	struct kv_dirent de;
	struct stat st;
	struct fs_dirent d = {.name = name, .attr = plus ? &st : NULL};
	uint64_t cookie, at; /* the last entry listed; the one read */
	const int64_t began = fs_now_ns();
	struct ahead ahead, *a = plus && kv_is_shared(fs.env) ? &ahead : NULL;
	kv_txn *t;
	int rc;

	/* the entries' times are the kernel's from here */
	rc = plus ? fs_attr_read_begin(ino, &t) : fs_read_begin(ino, &t);
	if (rc)
		return rc;
	rc = kv_inode_get(t, ino, &dir);
	if (rc == 0 && !S_ISDIR(dir.mode))
		rc = -ENOTDIR;
	if (rc || list_dots(ino, &dir, off, emit, arg))
		goto read_end;
	cookie = at = off >= KV_COOKIE_FIRST ? off : 0;
	if (a)
		a->n = a->i = a->rc = 0;
	while ((rc = next_entry(t, ino, &at, &de, a)) == 0) {
		if (plus && kv_read_changed(t, de.ino)) {
			/* an entry changed in the open window: the rest of the
			 * listing from there is read in the window */
			fs_read_end(t);
			rc = fs_read_begin_window(&t);
			if (rc)
				return rc;
			at = cookie;
			if (a)
				a->n = a->i = a->rc = 0;
			continue;
		}
		cookie = at;
		memcpy(name, de.name, de.namelen);
		name[de.namelen] = '\0';
		if (plus) {
			rc = kv_inode_get(t, de.ino, &child);
			if (rc) {
				fs_log("directory %llu: entry '%s' names missing inode %llu",
				       (unsigned long long)ino, name, (unsigned long long)de.ino);
				rc = -EIO;
				break;
			}
			fs_attr_fill(&child, &st);
		}
		d.ino = de.ino;
		d.type = (uint32_t)de.type << 12;
		d.next = cookie;
		if (emit(arg, &d))
			break;
		if (plus)
			fs_itable_ref(de.ino);
	}
	if (rc == -ENOENT)
		rc = 0;
read_end:
	fs_read_end(t);
	if (rc == 0)
		fs_maybe_touch_atime(&dir, began);
	return rc;
}

#define DIRBUF 65536

/* A listing's reply being packed. */
struct dirbuf {
	fuse_req_t req;
	char *buf;
	size_t size, pos;
	int plus;
};

/* An fs_dirent_fn: add d to the reply. */
static int pack(void *arg, const struct fs_dirent *d)
{
	struct dirbuf *b = arg;
	size_t room = b->size - b->pos, n;

	if (b->plus) {
		struct fuse_entry_param e;
		if (d->attr) {
			fs_fill_entry(d->attr, &e);
		} else {
			memset(&e, 0, sizeof(e));
			e.attr.st_ino = d->ino;
			e.attr.st_mode = d->type;
		}
		n = fuse_add_direntry_plus(b->req, b->buf + b->pos, room, d->name, &e,
					   (off_t)d->next);
	} else {
		struct stat st = {.st_ino = d->ino, .st_mode = d->type};
		n = fuse_add_direntry(b->req, b->buf + b->pos, room, d->name, &st, (off_t)d->next);
	}
	if (n > room)
		return 1;
	b->pos += n;
	return 0;
}

static void list_dir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, int plus)
{
	static __thread char buf[DIRBUF];
	struct dirbuf b = {.req = req, .buf = buf, .size = size, .plus = plus};
	int rc;

	if (b.size > sizeof(buf))
		b.size = sizeof(buf);
	rc = fs_do_readdir(ino, (uint64_t)off, plus, pack, &b);
	if (rc == 0 || b.pos > 0)
		fuse_reply_buf(req, buf, b.pos);
	else
		fuse_reply_err(req, -rc);
}

void fs_op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		   struct fuse_file_info *fi)
{
	(void)fi;
	list_dir(req, ino, size, off, 0);
}

void fs_op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	(void)fi;
	list_dir(req, ino, size, off, 1);
}
