/*
 * clone.c - kvfs-clone: a copy of a tree made in one change, every file's
 * blocks shared with the original's (kv_data_share), asked for with an
 * ioctl (KVFS_IOC_CLONE, common/kvfs_ioctl.h) on an open directory or file
 * of the mount, which FUSE forwards with its argument.
 *
 * Invariants:
 *  1. One writer op: the copy appears whole or not at all, and SRC's tree
 *     is read in the op's transaction: the tree of one moment.
 *  2. What cp -a keeps is kept: modes, owners (another caller than root
 *     owns what it copies, its group kept where the caller is in it, and
 *     the set-ID bits cleared when either changes, as cp -a does), atimes
 *     and mtimes, symlink targets, device numbers, xattrs (a caller other
 *     than root's: user.* and the ACLs, what cp -a may set), and hard links
 *     within the tree (one inode with as many names). ctime and btime are
 *     the copy's own.
 *  3. The caller must be allowed, by the modes and the access ACLs, to read
 *     every regular file and to list and search every directory of SRC,
 *     to write and search DST's parent, and to search every directory
 *     above it (the ioctl names the parent by number: no path was
 *     checked); root always is, as for cp.
 *     Else nothing is made (-EACCES). Devices need root (-EPERM), as mknod.
 *  4. DST may not lie within SRC (-EINVAL): the walk would meet its own
 *     copy.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>

#include "common.h"
#include "fs.h"
#include "kvfs_ioctl.h"

#define MAY_READ 4
#define MAY_WRITE 2
#define MAY_EXEC 1
#define NLINK_MAX 0xfffffffeU
#define XLIST_MAX 65536 /* the kernel's XATTR_LIST_MAX */

struct pair {
	uint64_t src, dst;
};

struct clone_args {
	uint64_t src, dst_parent;
	const char *name;
	size_t len;
	const struct fs_cred *cred;
	int64_t now;
	struct pair *queue;     /* directories to copy: source, copy */
	size_t qhead, qlen, qcap;
	struct pair *links;     /* hard-linked inodes copied: an open hash */
	size_t nlinks, lcap;    /* lcap: a power of two, or 0 */
	char *names;            /* XLIST_MAX: an inode's xattr names */
	unsigned char *value;   /* KV_XATTR_SIZE_MAX */
	struct kvfs_clone_arg *out;
};

/* Whether c may access in for mask (MAY_*), by the mode and the access
 * ACL, as the kernel's generic permission check decides (invariant 3). */
static int permits(kv_txn *t, const struct fs_cred *c, const struct kv_inode *in,
		   unsigned mask)
{
	unsigned char acl[KV_ACL_SIZE_MAX];
	unsigned acl_mask = 7, matched = 0;
	struct kv_acl_entry e;
	size_t len;
	int rc;

	if (c->uid == 0)
		return 1;
	if (c->uid == in->uid)
		return ((in->mode >> 6) & mask) == mask;
	rc = fs_acl_get(t, in->ino, KV_ACL_ACCESS, acl, &len);
	if (rc == -ENODATA) {
		unsigned perm = fs_cred_in_group(c, in->gid) ? in->mode >> 3 : in->mode;

		return (perm & mask) == mask;
	}
	if (rc)
		return 0; /* a damaged ACL grants nothing */
	for (size_t i = 0; kv_acl_entry(acl, len, i, &e) == 0; i++)
		if (e.tag == KV_ACL_MASK)
			acl_mask = e.perm;
	for (size_t i = 0; kv_acl_entry(acl, len, i, &e) == 0; i++) {
		if (e.tag == KV_ACL_USER && e.id == c->uid)
			return (e.perm & acl_mask & mask) == mask;
		if ((e.tag == KV_ACL_GROUP_OBJ && fs_cred_in_group(c, in->gid)) ||
		    (e.tag == KV_ACL_GROUP && fs_cred_in_group(c, e.id))) {
			if ((e.perm & acl_mask & mask) == mask)
				return 1;
			matched = 1;
		}
	}
	return !matched && (in->mode & mask) == mask;
}

/* The copy of hard-linked source inode src: its slot (dst 0: none yet). */
static struct pair *link_slot(struct clone_args *a, uint64_t src)
{
	size_t i;

	if (a->nlinks * 2 >= a->lcap) { /* grow: rehash into twice the room */
		size_t cap = a->lcap ? a->lcap * 2 : 256;
		struct pair *old = a->links, *n = calloc(cap, sizeof(*n));

		if (!n)
			return NULL;
		a->links = n;
		for (size_t j = 0; j < a->lcap; j++) {
			if (!old[j].src)
				continue;
			for (i = old[j].src * 0x9E3779B97F4A7C15ULL & (cap - 1); n[i].src;
			     i = (i + 1) & (cap - 1))
				;
			n[i] = old[j];
		}
		free(old);
		a->lcap = cap;
	}
	for (i = src * 0x9E3779B97F4A7C15ULL & (a->lcap - 1); a->links[i].src;
	     i = (i + 1) & (a->lcap - 1))
		if (a->links[i].src == src)
			return &a->links[i];
	return &a->links[i];
}

/* Whether xattr name goes with a copy the caller makes (invariant 2). */
static int xattr_kept(const struct clone_args *a, const char *name)
{
	return a->cred->uid == 0 || strncmp(name, "user.", 5) == 0 || kv_acl_name(name);
}

static int copy_xattrs(kv_txn *t, struct clone_args *a, uint64_t from, uint64_t to)
{
	ssize_t n = kv_xattr_list(t, from, a->names, XLIST_MAX);
	const void *val;
	size_t len;
	int rc;

	if (n < 0)
		return (int)n;
	for (ssize_t off = 0; off < n; off += (ssize_t)strlen(a->names + off) + 1) {
		const char *name = a->names + off;

		if (!xattr_kept(a, name))
			continue;
		rc = kv_xattr_get(t, from, name, &val, &len);
		if (rc)
			return rc;
		memcpy(a->value, val, len); /* out of the map before the put */
		rc = kv_xattr_set(t, to, name, a->value, len, 0);
		if (rc)
			return rc;
	}
	return 0;
}

/* The new inode's owner and mode: cp -a's (invariant 2). */
static void owner_of(const struct clone_args *a, const struct kv_inode *src, struct kv_inode *in)
{
	const struct fs_cred *c = a->cred;

	if (c->uid == 0)
		return;
	in->uid = c->uid;
	in->gid = fs_cred_in_group(c, src->gid) ? src->gid : c->gid;
	if (in->uid != src->uid || in->gid != src->gid)
		in->mode &= ~(uint32_t)(S_ISUID | S_ISGID);
}

/* The regular file src's data: its blocks shared, a short last one too. */
static int share_data(kv_txn *t, struct clone_args *a, struct kv_inode *src, struct kv_inode *in)
{
	uint64_t bs = fs.block_size;
	int rc;

	in->size = 0;
	rc = kv_data_share(t, in, 0, src, 0, (src->size + bs - 1) / bs);
	if (rc)
		return rc;
	in->size = src->size; /* the share counts whole blocks */
	a->out->bytes += src->size;
	return 0;
}

/* Copy src under the name in directory dir (its record stored by the
 * caller): a new inode, or one more name of a hard link copied before. */
static int clone_node(kv_txn *t, struct clone_args *a, struct kv_inode *src,
		      struct kv_inode *dir, const char *name, size_t len)
{
	struct pair *slot = NULL;
	struct kv_inode in;
	int rc;

	if (S_ISDIR(src->mode) ? !permits(t, a->cred, src, MAY_READ | MAY_EXEC)
			       : S_ISREG(src->mode) && !permits(t, a->cred, src, MAY_READ))
		return -EACCES;
	if ((S_ISCHR(src->mode) || S_ISBLK(src->mode)) && a->cred->uid != 0)
		return -EPERM;
	if (S_ISDIR(src->mode) && dir->nlink >= NLINK_MAX)
		return -EMLINK;
	if (!S_ISDIR(src->mode) && src->nlink > 1) {
		slot = link_slot(a, src->ino);
		if (!slot)
			return -ENOMEM;
	}
	if (slot && slot->src) { /* another name of a copy made */
		rc = kv_inode_get(t, slot->dst, &in);
		if (rc)
			return rc;
		in.nlink++;
		rc = kv_inode_put(t, &in);
	} else {
		in = *src;
		in.flags = 0;
		in.nblocks = 0;
		in.nlink = S_ISDIR(src->mode) ? 2 : 1;
		in.ctime_ns = in.btime_ns = a->now;
		owner_of(a, src, &in);
		rc = kv_ino_alloc(t, &in.ino);
		if (!rc && S_ISDIR(in.mode)) {
			in.size = 0; /* the entries, counted as they come */
			in.parent = dir->ino;
		}
		if (!rc && S_ISREG(in.mode) && src->size)
			rc = share_data(t, a, src, &in);
		if (!rc)
			rc = copy_xattrs(t, a, src->ino, in.ino);
		if (!rc)
			rc = kv_inode_put(t, &in);
		if (!rc && slot) {
			slot->src = src->ino;
			slot->dst = in.ino;
			a->nlinks++;
		}
		if (!rc && S_ISDIR(in.mode)) {
			struct pair *q = array_reserve(a->queue, &a->qcap, a->qlen + 1,
						       sizeof(*q), 64);

			if (!q)
				return -ENOMEM;
			a->queue = q;
			a->queue[a->qlen++] = (struct pair){src->ino, in.ino};
			a->out->dirs++;
			dir->nlink++;
		} else if (!rc) {
			a->out->files++;
		}
	}
	if (!rc)
		rc = kv_dirent_add(t, dir->ino, name, len, in.ino, kv_dirent_type(in.mode));
	if (!rc)
		dir->size++;
	return rc;
}

/* The entries of source directory p.src into its copy p.dst. p is a copy:
 * clone_node may move the queue it came from. Only kv_dir_next's -ENOENT
 * ends the listing; another (a name whose inode is gone) fails the copy. */
static int clone_dir(kv_txn *t, struct clone_args *a, struct pair p)
{
	struct kv_inode dir, child;
	struct kv_dirent de;
	char name[KV_NAME_MAX + 1];
	uint64_t cookie = 0;
	int rc;

	rc = kv_inode_get(t, p.dst, &dir);
	while (!rc) {
		size_t len;

		rc = kv_dir_next(t, p.src, &cookie, &de);
		if (rc == -ENOENT)
			return kv_inode_put(t, &dir);
		if (rc)
			break;
		len = de.namelen;
		memcpy(name, de.name, len); /* out of the map before any put */
		name[len] = '\0';
		rc = kv_inode_get(t, de.ino, &child);
		if (!rc)
			rc = clone_node(t, a, &child, &dir, name, len);
	}
	return rc;
}

/* The path to DST's parent dir, walked up by parent pointers to the root:
 * the caller must be able to search every directory above it (the ioctl
 * names the parent by number, so the kernel checked no path to it; a
 * directory reached only through a bind mount is refused), and when SRC is
 * a directory none of them, dir included, may be SRC (invariants 3, 4). */
static int path_ok(kv_txn *t, const struct clone_args *a, const struct kv_inode *dir,
		   int src_dir)
{
	struct kv_inode in = *dir;
	int rc;

	for (unsigned depth = 0; depth < 65536; depth++) {
		if (src_dir && in.ino == a->src)
			return -EINVAL;
		if (in.ino == KV_ROOT_INO)
			return 0;
		rc = kv_inode_get(t, in.parent, &in);
		if (rc)
			return rc;
		if (!permits(t, a->cred, &in, MAY_EXEC))
			return -EACCES;
	}
	return -ELOOP; /* a cycle of parents: damage fsck repairs */
}

static int apply_clone(kv_txn *t, void *arg)
{
	struct clone_args *a = arg;
	struct kv_inode parent, src;
	struct kv_dirent de;
	int rc;

	/* the op may run again after a rollback: start over */
	a->qhead = a->qlen = a->nlinks = 0;
	if (a->lcap)
		memset(a->links, 0, a->lcap * sizeof(*a->links));
	a->out->files = a->out->dirs = a->out->bytes = 0;
	rc = kv_inode_get(t, a->dst_parent, &parent);
	if (rc)
		return rc;
	if (!S_ISDIR(parent.mode))
		return -ENOTDIR;
	if (parent.nlink == 0)
		return -ENOENT;
	if (!permits(t, a->cred, &parent, MAY_WRITE | MAY_EXEC))
		return -EACCES;
	rc = kv_dirent_lookup(t, a->dst_parent, a->name, a->len, &de);
	if (rc != -ENOENT)
		return rc ? rc : -EEXIST;
	rc = kv_inode_get(t, a->src, &src);
	if (!rc)
		rc = path_ok(t, a, &parent, S_ISDIR(src.mode));
	if (!rc)
		rc = clone_node(t, a, &src, &parent, a->name, a->len);
	while (!rc && a->qhead < a->qlen)
		rc = clone_dir(t, a, a->queue[a->qhead++]);
	if (rc)
		return rc;
	parent.mtime_ns = parent.ctime_ns = a->now;
	return kv_inode_put(t, &parent);
}

/* KVFS_IOC_CLONE: SRC is ino; the argument names DST. */
static int do_clone(fuse_req_t req, uint64_t ino, struct kvfs_clone_arg *arg)
{
	gid_t groups[NGROUPS_KEEP];
	struct fs_cred c;
	struct clone_args a = {.src = ino, .dst_parent = arg->dst_parent, .name = arg->name,
			       .cred = &c, .out = arg};
	int rc;

	if (!memchr(arg->name, '\0', sizeof(arg->name)))
		return -ENAMETOOLONG; /* not cut short: that would name another file */
	a.len = strlen(arg->name);
	if (a.len == 0 || strchr(arg->name, '/') || !strcmp(arg->name, ".") ||
	    !strcmp(arg->name, ".."))
		return -EINVAL;
	fs_caller(req, 1, &c, groups);
	a.now = fs_now_ns();
	a.names = malloc(XLIST_MAX);
	a.value = malloc(KV_XATTR_SIZE_MAX);
	rc = a.names && a.value ? fs_write(apply_clone, &a, 0) : -ENOMEM;
	free(a.names);
	free(a.value);
	free(a.queue);
	free(a.links);
	if (rc == 0) { /* the kernel may hold DST's absence and the parent's times */
		fs_notify_inval_entry(arg->dst_parent, arg->name, a.len);
		fs_notify_inval(arg->dst_parent, -1, 0);
	}
	return rc;
}

/* Over io_uring the clone runs on the handoff thread and is answered by the
 * replier (defer.c): it ends by dropping DST's name from the kernel's
 * cache, which waits for the parent's lock, and a LOOKUP holding that lock
 * may be queued on this request's own ring thread. */
struct clone_job {
	fuse_req_t req;
	uint64_t ino;
	struct kvfs_clone_arg *c; /* the reply's copy, freed with it */
	int rc;
};

static void clone_reply(const void *arg)
{
	const struct clone_job *j = arg;

	if (j->rc)
		fuse_reply_err(j->req, -j->rc);
	else
		fuse_reply_ioctl(j->req, 0, j->c, sizeof(*j->c));
	free(j->c);
}

static void clone_run(const void *arg)
{
	struct clone_job j = *(const struct clone_job *)arg;

	j.rc = do_clone(j.req, j.ino, j.c);
	fs_defer_reply(clone_reply, &j, sizeof(j));
}

static void clone_deferred(fuse_req_t req, uint64_t ino, const struct kvfs_clone_arg *c)
{
	struct clone_job j = {.req = req, .ino = ino, .c = malloc(sizeof(*c))};

	if (!j.c) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	*j.c = *c;
	fs_defer(clone_run, &j, sizeof(j));
}

void fs_op_ioctl(fuse_req_t req, fuse_ino_t ino, unsigned int cmd, void *arg,
		 struct fuse_file_info *fi, unsigned flags, const void *in_buf, size_t in_bufsz,
		 size_t out_bufsz)
{
	struct kvfs_clone_arg c;
	int rc;

	(void)arg;
	(void)fi;
	if (cmd != KVFS_IOC_CLONE || (flags & FUSE_IOCTL_COMPAT)) {
		fuse_reply_err(req, ENOTTY);
		return;
	}
	if (in_bufsz != sizeof(c) || out_bufsz != sizeof(c)) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	memcpy(&c, in_buf, sizeof(c));
	if (fs_req_uring(req)) {
		clone_deferred(req, ino, &c);
		return;
	}
	rc = do_clone(req, ino, &c);
	if (rc)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_ioctl(req, 0, &c, sizeof(c));
}
