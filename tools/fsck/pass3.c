/*
 * pass3.c - pass 3: the directory tree.
 *
 * A. One walk of the dirent database in key order. Keys are (parent, name
 *    hash), so the parents come in ino order and are found by a merge with
 *    the index; each child is found by a binary search in memory. Per list:
 *    the key is well formed; the parent is a live directory; the list parses
 *    and its slots ascend. Per entry: a valid name (no '/' or NUL, not "."
 *    or ".."), not twice in the directory (in the list, or misfiled while
 *    also filed where it belongs), filed under its own hash, naming a live
 *    inode that is not the root, with the inode's type. Each valid entry
 *    counts: the parent's entries (and subdirs), the child's links. An
 *    invalid one (which -y drops) counts for nothing in any mode, so the
 *    sizes and link counts -p sets are the ones -y leaves, and a -y after a
 *    -p has only the invalid entries left to drop.
 *    A directory named twice keeps the name in the directory its parent
 *    field gives (else the first one met); the other name is invalid.
 * B. Reachability, in memory: each directory has at most one name, so its
 *    ancestors are a chain; following the chains (each directory once, with
 *    a stack) finds the directories not reachable from the root: chains that
 *    end in a directory with no name, and cycles. The top of each such chain
 *    (or one directory of each cycle) moves to /lost+found, which brings
 *    along everything below it; so do other inodes with no name at all.
 *    An orphan (on the orphan list, no name, a link count of 0, and if a
 *    directory empty) is not unreachable: it waits to be freed (pass 7).
 * C. Each directory's size against its entries, its parent field against
 *    the directory naming it.
 *
 * A list is repaired by rewriting it whole (FX_DIRENT_LIST): entries keep
 * their slots, so readdir cookies of the others stay valid.
 *
 * Invariants:
 *  1. After A, every directory but the root has named_by = the directory
 *     whose valid entry names it, or 0; entries, subdirs and links count the
 *     valid entries.
 *  2. Every unreachable chain is reported once, at its top.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fsck.h"

enum { A_KEEP, A_DROP, A_REFILE };

struct act {
	uint8_t act, type;
};

struct p3 {
	struct fsck *f;
	uint64_t skip_dir;  /* parent whose lists are skipped (reported missing) */
	int skipping;
	struct act *acts;   /* per entry of the current list */
	size_t cap_acts;
	size_t *prs;        /* pending problems the current list's rewrite fixes */
	size_t nprs, cap_prs;
};

static int note_pr(struct p3 *w, struct pend *pr)
{
	size_t *prs = array_reserve(w->prs, &w->cap_prs, w->nprs + 1, sizeof(*prs), 16);

	if (!prs)
		return -ENOMEM;
	w->prs = prs;
	w->prs[w->nprs++] = (size_t)(pr - w->f->pend);
	return 0;
}

/* A true orphan: listed, no link, no name, and if a directory, empty. One
 * with a link count but no name is unreachable: its data goes to
 * /lost+found, never to be freed. */
static int excused(const struct fsck *f, const struct fino *fi)
{
	return (fi->flags & F_ORPHAN) && fi->links == 0 && fi->nlink == 0 &&
	       (!S_ISDIR(fi->mode) || f->dirs[fi->dir].entries == 0);
}

static int bad_name(const struct kv_dirent *de)
{
	if ((de->namelen == 1 && de->name[0] == '.') ||
	    (de->namelen == 2 && de->name[0] == '.' && de->name[1] == '.'))
		return 1;
	return memchr(de->name, '/', de->namelen) || memchr(de->name, '\0', de->namelen);
}

/* Is de's name also an earlier entry's, in the list v (de starts at at)? */
static int dup_name(const void *v, size_t at, const struct kv_dirent *de)
{
	struct kv_dirent e;
	size_t off = 0;

	while (off < at && kv_decode_dirent(v, at, &off, &e, NULL) == 0)
		if (e.namelen == de->namelen && memcmp(e.name, de->name, e.namelen) == 0)
			return 1;
	return 0;
}

/* A misfiled entry whose name is also filed where it belongs: a stale copy
 * (a random lookup, on this rare path only). */
static int misfiled_dup(struct fsck *f, uint64_t dir, uint64_t hash, const struct kv_dirent *de)
{
	struct kv_dirent found;

	if (kv_dirent_hash(de->name, de->namelen) == hash)
		return 0;
	return kv_dirent_lookup(f->txn, dir, de->name, de->namelen, &found) == 0;
}

static void drop_dir_entry(struct fsck *f, struct fino *dir, int subdir)
{
	struct fdir *d = fino_dir(f, dir);

	/* mirrors dir_adjust in repair.c */
	d->entries--;
	if (dir->size)
		dir->size--;
	if (subdir) {
		d->subdirs--;
		if (dir->nlink)
			dir->nlink--;
	}
}

/* An entry of directory pfi names directory c (live, decoded). */
static int name_dir(struct p3 *w, struct fino *pfi, struct fino *c, struct pctx *p,
		    struct act *act)
{
	struct fsck *f = w->f;
	struct fdir *cd = fino_dir(f, c), *pd = fino_dir(f, pfi);
	uint64_t old = cd->named_by;
	struct pend *pr;
	struct fix *x;
	int keep_new;

	if (old) {
		keep_new = old != cd->parent && pfi->ino == cd->parent;
		p->ino2 = old;
		p->num = keep_new ? old : pfi->ino;
		pr = fsck_problem(f, PR_DIR_MULTI, p);
		if (!keep_new) {
			if (pr)
				act->act = A_DROP;
			return pr ? note_pr(w, pr) : 0; /* this name is the invalid one */
		}
		/* the earlier name is the invalid one: uncount it */
		long oi = fsck_find(f, old);
		struct fdir *od = oi >= 0 ? fino_dir(f, &f->ino[oi]) : NULL;
		if (!od)
			return -EIO;
		od->entries--;
		od->subdirs--;
		c->links--;
		cd->named_by = pfi->ino;
		if (pr) {
			x = fsck_fix(f, FX_DIRENT_UNLINK, c->ino, pr);
			if (!x)
				return -ENOMEM;
			x->u.link.dir = old;
			x->u.link.type = kv_dirent_type(S_IFDIR);
			/* the unlink also adjusts the stored size and link count */
			od->entries++;
			od->subdirs++;
			drop_dir_entry(f, &f->ino[oi], 1);
		}
	} else {
		cd->named_by = pfi->ino;
	}
	pd->entries++;
	pd->subdirs++;
	c->links++;
	if (pfi->ino == KV_ROOT_INO && p->namelen == 10 && memcmp(p->name, "lost+found", 10) == 0)
		f->lost_found = c->ino;
	return 0;
}

static int check_entry(struct p3 *w, struct fino *pfi, uint64_t hash, const void *v, size_t at,
		       const struct kv_dirent *de, struct act *act)
{
	struct fsck *f = w->f;
	struct fdir *pd = fino_dir(f, pfi);
	struct pctx p = {.dir = pfi->ino, .ino = de->ino, .name = de->name,
			 .namelen = de->namelen};
	int lf = pfi->ino == KV_ROOT_INO && de->namelen == 10 && !memcmp(de->name, "lost+found", 10);
	struct pend *pr;
	struct fino *c;
	long ci;

	act->act = A_KEEP;
	act->type = de->type;
	ci = fsck_find(f, de->ino);
	c = ci >= 0 && fino_live(&f->ino[ci]) ? &f->ino[ci] : NULL;
	if (bad_name(de))
		pr = fsck_problem(f, PR_DIRENT_BAD_NAME, &p);
	else if (dup_name(v, at, de) || misfiled_dup(f, pfi->ino, hash, de))
		pr = fsck_problem(f, PR_DIRENT_DUP_NAME, &p);
	else if (!c || de->ino == KV_ROOT_INO)
		pr = fsck_problem(f, c ? PR_DIRENT_ROOT : PR_DIRENT_MISSING, &p);
	else
		goto valid;
	/* invalid: counts for nothing; -y drops it */
	if (!pr) {
		f->lf_blocked |= lf; /* the name stays taken */
		return 0;
	}
	act->act = A_DROP;
	return note_pr(w, pr);

valid:
	if (kv_dirent_hash(de->name, de->namelen) != hash &&
	    (pr = fsck_problem(f, PR_DIRENT_BAD_HASH, &p)) != NULL) {
		act->act = A_REFILE;
		if (note_pr(w, pr))
			return -ENOMEM;
	}
	if (!(c->flags & F_BAD) && kv_dirent_type(c->mode) != de->type) {
		p.num = de->type;
		p.num2 = kv_dirent_type(c->mode);
		pr = fsck_problem(f, PR_DIRENT_TYPE, &p);
		if (pr) {
			act->type = kv_dirent_type(c->mode);
			if (note_pr(w, pr))
				return -ENOMEM;
		}
	}
	if (S_ISDIR(c->mode) && !(c->flags & F_BAD))
		return name_dir(w, pfi, c, &p, act);
	pd->entries++;
	c->links++;
	f->lf_blocked |= lf;
	return 0;
}

/* Queue the rewrite of list (dir, hash): the entries kept, in order. */
static int rewrite(struct p3 *w, uint64_t dir, uint64_t hash, const void *v, size_t vl,
		   size_t n, int renumber)
{
	struct fsck *f = w->f;
	unsigned char *out = malloc(vl ? vl : 1);
	struct fix_ent *ref = calloc(n ? n : 1, sizeof(*ref));
	unsigned nref = 0, next = 0;
	struct kv_dirent de;
	size_t off = 0, olen = 0;
	uint8_t slot;
	struct fix *x;

	if (!out || !ref)
		goto nomem;
	for (size_t i = 0; i < n && kv_decode_dirent(v, vl, &off, &de, &slot) == 0; i++) {
		if (w->acts[i].act == A_DROP)
			continue;
		de.type = w->acts[i].type;
		if (w->acts[i].act == A_REFILE || (renumber && next > 255)) {
			ref[nref].ino = de.ino;
			ref[nref].type = de.type;
			ref[nref].namelen = de.namelen;
			memcpy(ref[nref].name, de.name, de.namelen);
			nref++;
			continue;
		}
		olen += kv_encode_dirent(out + olen, renumber ? (uint8_t)next++ : slot, &de);
	}
	x = fsck_fix(f, FX_DIRENT_LIST, dir, NULL);
	if (!x)
		goto nomem;
	x->u.list.dir = dir;
	x->u.list.hash = hash;
	x->u.list.val = out;
	x->u.list.vlen = olen;
	x->u.list.refile = ref;
	x->u.list.nrefile = nref;
	for (size_t i = 0; i < w->nprs; i++)
		fsck_attach(f, &f->pend[w->prs[i]], x);
	return 0;

nomem:
	free(out);
	free(ref);
	return -ENOMEM;
}

static int check_list(struct p3 *w, struct fino *pfi, uint64_t hash, const void *v, size_t vl)
{
	struct fsck *f = w->f;
	int last = -1, cut = 0, order = 0, changed = 0, rc;
	struct kv_dirent de;
	struct act *acts;
	size_t off = 0, at, n = 0;
	uint8_t slot;

	w->nprs = 0;
	for (;;) {
		at = off;
		rc = kv_decode_dirent(v, vl, &off, &de, &slot);
		if (rc) {
			cut = rc < 0;
			break;
		}
		acts = array_reserve(w->acts, &w->cap_acts, n + 1, sizeof(*acts), 64);
		if (!acts)
			return -ENOMEM;
		w->acts = acts;
		f->n_dirents++;
		order |= (int)slot <= last;
		last = slot;
		rc = check_entry(w, pfi, hash, v, at, &de, &w->acts[n]);
		if (rc)
			return rc;
		changed |= w->acts[n].act != A_KEEP || w->acts[n].type != de.type;
		n++;
	}
	if (cut || order || n == 0) {
		struct pctx p = {.dir = pfi->ino, .num = hash, .num2 = n,
				 .str = cut ? "cut short" : n == 0 ? "empty" : "slots out of order"};
		struct pend *pr = fsck_problem(f, PR_DIRENT_BAD_LIST, &p);
		if (pr) {
			changed = 1;
			if (note_pr(w, pr))
				return -ENOMEM;
		} else {
			order = 0;
		}
	}
	return changed ? rewrite(w, pfi->ino, hash, v, vl, n, order) : 0;
}

/* Lists under a parent that is missing or no directory. */
static int no_dir(struct p3 *w, uint64_t dir, const struct fino *fi)
{
	struct fsck *f = w->f;
	struct pctx p = {.dir = dir};
	struct pend *pr;
	struct fix *x;

	p.str = !fi || !fino_live(fi) ? "missing" : (fi->flags & F_BAD) ? "damaged"
		: "not a directory";
	w->skipping = 1;
	w->skip_dir = dir;
	pr = fsck_problem(f, PR_DIRENT_NO_DIR, &p);
	if (!pr) {
		if (dir > f->max_key)
			f->max_key = dir;
		return 0;
	}
	x = fsck_fix(f, FX_DEL_PREFIX, dir, pr);
	if (!x)
		return -ENOMEM;
	x->u.del.db = KV_DB_DIRENT;
	return 0;
}

static int dirent_record(struct fsck_walk *fw, const struct fsck_rec *r)
{
	struct p3 *w = fw->arg;
	uint64_t dir = r->key.ino;
	struct fino *pfi;

	if (w->skipping && dir == w->skip_dir)
		return 0;
	w->skipping = 0;
	pfi = fsck_merge(fw, dir);
	if (!pfi || !fino_live(pfi) || (pfi->flags & F_BAD) || !S_ISDIR(pfi->mode))
		return no_dir(w, dir, pfi);
	return check_list(w, pfi, r->key.hash, r->v, r->vl);
}

/* ---------------------------------------------------------- reachability -- */

/* Move fi to /lost+found (unlinking it from its parent first when it closes
 * a cycle). 1 when queued. */
static int reconnect(struct fsck *f, size_t idx, int cycle)
{
	struct fino *fi = &f->ino[idx], *lfi;
	int isdir = S_ISDIR(fi->mode);
	struct pctx p = {.ino = fi->ino, .str = fsck_type_name(fi->mode)};
	struct pend *pr;
	struct fix *x;
	uint64_t lf = 0;
	long li;
	int rc;

	pr = fsck_problem(f, isdir ? (cycle ? PR_DIR_CYCLE : PR_DIR_UNREACHABLE)
				   : PR_INODE_UNREACHABLE, &p);
	if (!pr) {
		fi->flags |= F_UNREACH;
		return 0;
	}
	rc = fsck_lost_found(f, &lf); /* may append to f->ino (room reserved) */
	fi = &f->ino[idx];
	li = lf ? fsck_find(f, lf) : -1;
	x = fsck_fix(f, rc || li < 0 ? FX_NONE : FX_RECONNECT, fi->ino, pr);
	if (!x)
		return -ENOMEM;
	if (rc || li < 0) {
		x->rc = rc ? rc : -ENOENT;
		fi->flags |= F_UNREACH;
		return 0;
	}
	lfi = &f->ino[li];
	x->u.link.lf = lf;
	x->u.link.type = kv_dirent_type(fi->mode);
	if (cycle) {
		struct fdir *cd = fino_dir(f, fi);
		x->u.link.dir = cd->named_by;
		drop_dir_entry(f, &f->ino[fsck_find(f, cd->named_by)], 1);
		fi->links--;
	}
	fino_dir(f, lfi)->entries++;
	lfi->size++;
	if (isdir) {
		fino_dir(f, lfi)->subdirs++;
		lfi->nlink++;
		fino_dir(f, fi)->named_by = lf;
		fino_dir(f, fi)->parent = lf;
	}
	fi->links++;
	fi->flags |= F_LOST;
	return 1;
}

/* Follow d's chain of ancestors up to a directory of known state. */
static int chase(struct fsck *f, uint32_t d, uint32_t *stack)
{
	size_t sp = 0;
	uint32_t cur = d;
	int state, cycle = 0, rc = 0;
	long top = -1;

	for (;;) {
		struct fdir *cd = &f->dirs[cur];
		long pi;

		if (cd->state == R_REACHABLE || cd->state == R_UNREACHABLE) {
			state = cd->state;
			break;
		}
		state = R_UNREACHABLE;
		if (cd->state == R_VISITING) {
			top = cd->idx;
			cycle = 1;
			break;
		}
		cd->state = R_VISITING;
		stack[sp++] = cur;
		pi = cd->named_by ? fsck_find(f, cd->named_by) : -1;
		if (pi < 0 || f->ino[pi].dir == NO_DIR) {
			top = cd->idx;
			break;
		}
		cur = f->ino[pi].dir;
	}
	if (top >= 0 && (rc = reconnect(f, (size_t)top, cycle)) > 0)
		state = R_REACHABLE;
	while (sp)
		f->dirs[stack[--sp]].state = (uint8_t)state;
	return rc < 0 ? rc : 0;
}

static int reach(struct fsck *f)
{
	size_t ndirs = f->ndirs; /* /lost+found, if made now, is born reachable */
	uint32_t *stack = malloc((ndirs ? ndirs : 1) * sizeof(*stack));
	int rc = 0;

	if (!stack)
		return -ENOMEM;
	fino_dir(f, &f->ino[0])->state = R_REACHABLE;
	for (size_t d = 0; d < ndirs && !rc; d++) {
		struct fino *fi = &f->ino[f->dirs[d].idx];

		if (f->dirs[d].state != R_UNKNOWN)
			continue;
		if (!fino_live(fi) || excused(f, fi)) {
			f->dirs[d].state = R_UNREACHABLE; /* an orphan, or gone: no one's ancestor */
			continue;
		}
		rc = chase(f, (uint32_t)d, stack);
	}
	free(stack);
	for (size_t i = 0; i < f->nino && !rc; i++) {
		struct fino *fi = &f->ino[i];

		if (fino_live(fi) && !(fi->flags & F_BAD) && !S_ISDIR(fi->mode) && !fi->links &&
		    !excused(f, fi))
			rc = reconnect(f, i, 0) < 0 ? -ENOMEM : 0;
	}
	return rc;
}

/* ---------------------------------------------------------------- counts -- */

static int check_dirs(struct fsck *f)
{
	for (size_t d = 0; d < f->ndirs; d++) {
		struct fdir *fd = &f->dirs[d];
		struct fino *fi = &f->ino[fd->idx];
		uint64_t want = fi->ino == KV_ROOT_INO ? KV_ROOT_INO : fd->named_by;
		struct pctx p = {.ino = fi->ino};
		int rc;

		if (!fino_live(fi) || (fi->flags & F_BAD))
			continue;
		if (fi->size != fd->entries) {
			p.num = fi->size;
			p.num2 = fd->entries;
			if ((rc = fsck_fix_field(f, PR_DIR_SIZE, &p, fi, SET_SIZE, p.num2)) != 0)
				return rc;
		}
		if (want && fd->parent != want) {
			p.num = fd->parent;
			p.num2 = want;
			if ((rc = fsck_fix_field(f, PR_DIR_PARENT, &p, fi, SET_PARENT, want)) != 0)
				return rc;
		}
	}
	return 0;
}

int fsck_pass3(struct fsck *f)
{
	struct p3 w = {.f = f};
	struct fsck_walk fw = {.f = f, .arg = &w};
	int rc;

	if (!f->root_ok) {
		/* -y would make a new root that adopts the root's entries: checked
		 * without it, every count would come out wrong */
		fsck_info(f, "  no root directory: the tree is not checked");
		return 0;
	}
	rc = fsck_walk(&fw, KV_DB_DIRENT, PR_DIRENT_BAD_KEY, dirent_record);
	free(w.acts);
	free(w.prs);
	if (!rc)
		rc = fsck_flush(f); /* lists are rewritten before anything moves */
	if (!rc)
		rc = reach(f);
	if (!rc)
		rc = fsck_flush(f);
	if (!rc)
		rc = check_dirs(f);
	f->tree_checked = !rc;
	fsck_info(f, "  %llu entries", (unsigned long long)f->n_dirents);
	return rc;
}
