/*
 * pass2.c - pass 2: inode records. One walk of the inode database in key
 * order (with the orphan database in step, to flag orphans), building the
 * sorted index every later pass uses.
 *
 * Checks, per record: a well-formed key; a record that decodes; a known file
 * type; reserved flags clear, and the flags of shared blocks (LENDS,
 * BORROWS) only on regular files; inline data only on symlinks; a symlink's
 * size equal to its target's length, and a target at all; devices, fifos
 * and sockets of size 0; a parent field only on directories; a regular
 * file's size within the largest file size; the root (inode 1) present and
 * a directory. Sizes against stored blocks (blocks below a file's size,
 * nblocks equal to the blocks stored) are checked in pass 5, which is the
 * one walk of the data database: blocks are only counted once the damaged
 * and stray ones are known.
 *
 * Invariants:
 *  1. Every inode record with a valid key gets an index entry, also a
 *     damaged one (F_BAD: its names must not be taken for dangling), so the
 *     index holds exactly the inodes that exist.
 *  2. f->max_key is at least every valid inode key seen.
 */
#include <errno.h>
#include <stdint.h>
#include <sys/stat.h>

#include "fsck.h"

#define FILE_SIZE_MAX ((uint64_t)INT64_MAX)

static int known_type(uint32_t mode)
{
	switch (mode & S_IFMT) {
	case S_IFREG: case S_IFDIR: case S_IFLNK: case S_IFCHR:
	case S_IFBLK: case S_IFIFO: case S_IFSOCK:
		return 1;
	}
	return 0;
}

/* The root is missing (fi NULL) or unusable: with the repair, the index
 * gets a fresh empty root directory in its place. 1 when repaired. */
static int root_repair(struct fsck *f, uint32_t mode, int missing)
{
	struct pctx p = {.ino = KV_ROOT_INO, .num = mode};
	struct pend *pr = fsck_problem(f, missing ? PR_ROOT_MISSING : PR_ROOT_NOT_DIR, &p);
	struct fino *fi;

	if (!pr)
		return 0;
	if (!fsck_fix(f, FX_ROOT, KV_ROOT_INO, pr))
		return -ENOMEM;
	fi = fsck_add_inode(f, KV_ROOT_INO, S_IFDIR | 0755, 1);
	if (!fi)
		return -ENOMEM;
	fi->nlink = 2;
	fino_dir(f, fi)->parent = KV_ROOT_INO;
	f->n_inodes++;
	f->n_dirs++;
	return 1;
}

/* A record that cannot be used: index it as damaged, clear it with -y. */
static int damaged(struct fsck *f, enum fsck_pr code, uint64_t ino, uint64_t num)
{
	struct fino *fi = fsck_add_inode(f, ino, 0, 0);
	struct pend *pr;

	if (!fi)
		return -ENOMEM;
	fi->flags |= F_BAD;
	f->n_inodes++;
	pr = fsck_problem(f, code, &(struct pctx){.ino = ino, .num = num});
	if (pr) {
		if (!fsck_fix(f, FX_INODE_CLEAR, ino, pr))
			return -ENOMEM;
		f->ino[f->nino - 1].flags |= F_GONE;
	}
	return 0;
}

/* Queue setting a field of the inode just added for problem code (if the
 * mode allows). */
static int set_field(struct fsck *f, enum fsck_pr code, const struct pctx *p, unsigned mask,
		     uint64_t val)
{
	return fsck_fix_field(f, code, p, &f->ino[f->nino - 1], mask, val);
}

static int check_fields(struct fsck *f, const struct kv_inode *in)
{
	uint32_t type = in->mode & S_IFMT;
	struct pctx p = {.ino = in->ino, .str = fsck_type_name(in->mode)};
	struct pend *pr;
	int rc = 0;

	if (type == S_IFLNK && in->inline_len == 0) {
		pr = fsck_problem(f, PR_SYMLINK_EMPTY, &p);
		if (!pr)
			return 0;
		if (!fsck_fix(f, FX_INODE_CLEAR, in->ino, pr))
			return -ENOMEM;
		f->ino[f->nino - 1].flags |= F_GONE;
		return 0; /* nothing else to mend on it */
	}
	if (in->flags & ~KV_INODE_FLAGS_KNOWN) {
		p.num = in->flags & ~KV_INODE_FLAGS_KNOWN;
		rc = set_field(f, PR_INODE_FLAGS, &p, SET_FLAGS, p.num);
	}
	if (!rc && type != S_IFREG && (in->flags & KV_INODE_FLAGS_KNOWN)) {
		/* only files share blocks (copy_file_range) */
		p.num = in->flags & KV_INODE_FLAGS_KNOWN;
		rc = set_field(f, PR_INODE_SHARE_FLAGS, &p, SET_FLAGS, p.num);
	}
	if (!rc && type != S_IFLNK && in->inline_len) {
		p.num = in->inline_len;
		rc = set_field(f, PR_INODE_INLINE, &p, SET_NOINLINE, 0);
	}
	if (!rc && type == S_IFLNK && in->size != in->inline_len) {
		p.num = in->size;
		p.num2 = in->inline_len;
		rc = set_field(f, PR_SYMLINK_SIZE, &p, SET_SIZE, in->inline_len);
	}
	if (!rc && (type == S_IFCHR || type == S_IFBLK || type == S_IFIFO || type == S_IFSOCK) &&
	    in->size) {
		p.num = in->size;
		rc = set_field(f, PR_SPECIAL_SIZE, &p, SET_SIZE, 0);
	}
	if (!rc && type != S_IFDIR && in->parent) {
		p.num = in->parent;
		rc = set_field(f, PR_PARENT_NONDIR, &p, SET_PARENT, 0);
	}
	if (!rc && type == S_IFREG && in->size > FILE_SIZE_MAX) {
		p.num = in->size;
		p.num2 = FILE_SIZE_MAX;
		rc = set_field(f, PR_FILE_SIZE, &p, SET_SIZE, FILE_SIZE_MAX);
	}
	return rc;
}

static int check_inode(struct fsck *f, uint64_t ino, const void *v, size_t vl, int orphan)
{
	struct kv_inode in;
	struct fino *fi;
	int rc = kv_decode_inode(ino, v, vl, &in);

	if (ino == KV_ROOT_INO && (rc || !S_ISDIR(in.mode))) {
		int fixed = root_repair(f, rc ? 0 : in.mode, 0);
		if (fixed)
			return fixed < 0 ? fixed : 0;
		if (rc || !known_type(in.mode)) { /* reported as the root's problem */
			fi = fsck_add_inode(f, ino, 0, 0);
			if (!fi)
				return -ENOMEM;
			fi->flags |= F_BAD;
			f->n_inodes++;
			return 0;
		}
	}
	if (rc)
		return damaged(f, PR_INODE_BAD_RECORD, ino, vl);
	if (!known_type(in.mode))
		return damaged(f, PR_INODE_BAD_TYPE, ino, in.mode);
	fi = fsck_add_inode(f, ino, in.mode, S_ISDIR(in.mode));
	if (!fi)
		return -ENOMEM;
	fi->nlink = in.nlink;
	fi->size = in.size;
	fi->nblocks = in.nblocks;
	fi->iflags = (uint8_t)(in.flags & KV_INODE_FLAGS_KNOWN);
	if (orphan)
		fi->flags |= F_ORPHAN;
	if (S_ISDIR(in.mode)) {
		fino_dir(f, fi)->parent = in.parent;
		f->n_dirs++;
	} else {
		f->n_files++;
	}
	f->n_inodes++;
	return check_fields(f, &in);
}

/* The next well-formed orphan key into *ino (UINT64_MAX at the end). */
static int next_orphan(kv_iter *it, uint64_t *ino)
{
	const void *k, *v;
	size_t kl, vl;
	struct kv_key key;
	int rc;

	while ((rc = kv_iter_next(it, &k, &kl, &v, &vl)) == 0)
		if (kv_key_decode(KV_DB_ORPHAN, k, kl, &key) == 0) {
			*ino = key.ino;
			return 0;
		}
	*ino = UINT64_MAX;
	return rc == -ENOENT ? 0 : rc;
}

struct p2 {
	kv_iter *oit;    /* the orphan database, walked in step */
	uint64_t orphan; /* the next orphan's ino (UINT64_MAX: no more) */
	int seen_root;
};

static int inode_record(struct fsck_walk *w, const struct fsck_rec *r)
{
	struct p2 *p = w->arg;
	struct fsck *f = w->f;
	uint64_t ino = r->key.ino;
	int rc;

	if (ino == 0)
		return fsck_bad_key(f, PR_INODE_BAD_KEY, KV_DB_INODE, r->k, r->kl);
	if (ino > f->max_key)
		f->max_key = ino;
	if (!p->seen_root && ino > KV_ROOT_INO && (rc = root_repair(f, 0, 1)) < 0)
		return rc;
	rc = 0;
	p->seen_root = 1;
	while (!rc && p->orphan < ino)
		rc = next_orphan(p->oit, &p->orphan);
	return rc ? rc : check_inode(f, ino, r->v, r->vl, p->orphan == ino);
}

static int walk(struct fsck *f, kv_iter *oit)
{
	struct p2 p = {.oit = oit};
	struct fsck_walk w = {.f = f, .arg = &p};
	int rc = next_orphan(oit, &p.orphan);

	if (!rc)
		rc = fsck_walk(&w, KV_DB_INODE, PR_INODE_BAD_KEY, inode_record);
	if (rc)
		return rc;
	if (!p.seen_root && (rc = root_repair(f, 0, 1)) < 0)
		return rc;
	return 0;
}

int fsck_pass2(struct fsck *f)
{
	kv_iter *oit = NULL;
	struct fino *root;
	int rc;

	rc = fsck_reserve(f, f->prog_total + 2, 1024);
	if (!rc)
		rc = kv_iter_open(f->txn, KV_DB_ORPHAN, &oit);
	if (!rc)
		rc = walk(f, oit);
	kv_iter_close(oit);
	if (!rc)
		rc = fsck_reserve(f, 2, 2);
	if (rc)
		return rc;
	root = f->nino ? &f->ino[0] : NULL;
	f->root_ok = root && root->ino == KV_ROOT_INO && fino_live(root) && S_ISDIR(root->mode);
	fsck_info(f, "  %llu inodes: %llu directories, %llu others", (unsigned long long)f->n_inodes,
		  (unsigned long long)f->n_dirs, (unsigned long long)f->n_files);
	return 0;
}
