/*
 * share.c - pass 5's shared blocks: the extent and lend records (kv/share.c)
 * checked against each other, against the files that borrow and the files
 * that lend, and the model of them by which pass 5's walk of the data
 * blocks keeps or drops a block (fsck.h, 5).
 *
 * Before the walk (fsck_share_begin):
 *  a. Every extent and lend record decodes. A malformed extent is dropped
 *     by -y (its blocks then read as holes); a malformed lend record by -p
 *     (it only indexes an extent, and b rebuilds it from one).
 *  b. Pairs: a lend record with no extent of the same parts is dropped; an
 *     extent with no lend record gets it (-p: reads use the extent, the
 *     lend record tells a home's writes whom to copy its blocks to).
 *  c. Borrowers, in key order, in step with the index: the inode exists
 *     (else its extents go, -p), is a regular file (else -y), is flagged
 *     BORROWS (-p flags it); its extents lie below its size (-p trims
 *     them; a borrowed block the size ends inside becomes the file's own,
 *     cut there, as truncate makes it), and overlap neither each other (-y
 *     keeps the blocks in the earlier one: trim_group says why) nor the
 *     file's own blocks (-p cuts those out of the extent: a read finds the
 *     own block first). The own blocks inside an extent are found by one
 *     seek per extent.
 *  d. Homes: a live regular file that lends is flagged LENDS (-p).
 * The model then holds every extent as it will be, sorted by borrower, and
 * an index of them sorted by home for the walk.
 *
 * During the walk (fsck_share_block), at each data record: an extent that
 * names a home block the walk passed without a record (missing), or one
 * that is not sound (unwritten, damaged), cannot serve its borrower there
 * (a short one can: zeros read after its bytes, which must end within the
 * borrower's size, or the borrower gets a copy cut at it): -y drops those blocks from the extent, leaving holes (the
 * problem says their data is lost); -p leaves them. A record some extent
 * of the model names is kept even when its inode is gone: a ghost home's
 * block (kv/share.c invariant 4).
 *
 * After the walk (fsck_share_end): the home blocks the walk never met;
 * each borrower's block count (its own blocks and the borrowed ones); the
 * superblock's SHARED feature bit, without which kvfs reads no extent.
 *
 * Invariants:
 *  1. The repairs of one extent are queued in the order they apply, each
 *     replacing the extent as the one before left it (FX_EXT_SET, by key):
 *     the model's extent is what the image will hold.
 *  2. Only repairs that change what a read returns need -y (holes, and
 *     the blocks two extents claim); every other repair here keeps every
 *     byte a read returns.
 *  3. Every ino a record of the model names, borrower or home, raises the
 *     counter's floor (f->max_key): a new inode must not inherit blocks.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "fsck.h"

#define NO_BOR UINT32_MAX

/* What makes home blocks unusable to their borrower (PR_BORROW_LOST). */
enum { WHY_NONE, WHY_MISSING, WHY_UNWRITTEN, WHY_DAMAGED };
static const char *const why_text[] = {
	[WHY_MISSING] = "missing",
	[WHY_UNWRITTEN] = "unwritten (they hold no bytes)",
	[WHY_DAMAGED] = "damaged",
};

struct fext {
	struct kv_extent x;    /* as it will be; x.count 0: dropped */
	uint64_t hstart;       /* x.hfirst when the walk began: the home order */
	uint64_t seen;         /* the walk met the home blocks below this one */
	uint64_t bad_a, bad_b; /* unusable home blocks not reported yet */
	uint32_t bor;          /* its borrower in s->bor, or NO_BOR */
	uint8_t why;           /* WHY_* of bad_a .. bad_b */
	uint8_t lend_only;     /* a lend record left without its extent (-n) */
	uint8_t paired;        /* b: its lend record is there */
	uint8_t tail;          /* it covers the block the borrower's size ends inside */
	uint8_t done;          /* the walk is past it */
	uint32_t moved;        /* c: cut at its head by the problem f->pend[moved - 1] */
};

struct fbor {
	uint64_t ino;
	size_t fi;         /* index in f->ino */
	uint64_t borrowed; /* blocks its extents in the model cover */
	uint64_t own;      /* its own blocks pass 5 keeps */
	uint64_t gained;   /* borrowed blocks a repair makes its own */
};

struct fshare {
	struct fext *ext; /* by borrower (ino, first) */
	size_t next, cap_ext;
	uint32_t *byhome; /* indices into ext by (home, hstart, ino, first) */
	size_t lo;        /* the walk: byhome entries below lo are done */
	struct fbor *bor; /* by ino */
	size_t nbor, cap_bor, bi;
	struct kv_extent *lend; /* a and b only: the lend records */
	size_t nlend, cap_lend;
	uint64_t nkept;   /* extents in the model */
};

static void raise_floor(struct fsck *f, uint64_t ino)
{
	if (ino > f->max_key)
		f->max_key = ino;
}

static struct fext *ext_add(struct fext **a, size_t *n, size_t *cap, const struct kv_extent *x)
{
	struct fext *e = array_reserve(*a, cap, *n + 1, sizeof(**a), 256);

	if (!e)
		return NULL;
	*a = e;
	e = &e[(*n)++];
	memset(e, 0, sizeof(*e));
	e->x = *x;
	e->bor = NO_BOR;
	return e;
}

/* Queue FX_EXT_SET: old (NULL: none) replaced by a and b (NULL or count 0:
 * none), settling pr. */
static int ext_set(struct fsck *f, struct pend *pr, const struct kv_extent *old,
		   const struct kv_extent *a, const struct kv_extent *b)
{
	struct kv_extent *x = calloc(3, sizeof(*x));
	struct fix *fx;

	if (!x)
		return -ENOMEM;
	fx = fsck_fix(f, FX_EXT_SET, old ? old->ino : a->ino, pr);
	if (!fx) {
		free(x);
		return -ENOMEM;
	}
	if (old)
		x[0] = *old;
	if (a)
		x[1] = *a;
	if (b)
		x[2] = *b;
	fx->u.ext = x;
	return 0;
}

/* ------------------------------------------------------- a: the records -- */

static int ext_record(struct fsck_walk *w, const struct fsck_rec *r)
{
	struct fsck *f = w->f;
	struct fshare *s = f->share;
	struct kv_extent x;
	struct pctx p = {.ino = r->key.ino, .num = r->key.idx, .num2 = r->vl};
	struct pend *pr;

	if (kv_decode_extent(KV_DB_EXTENT, r->k, r->kl, r->v, r->vl, &x) == 0)
		return ext_add(&s->ext, &s->next, &s->cap_ext, &x) ? 0 : -ENOMEM;
	pr = fsck_problem(f, PR_EXTENT_BAD, &p);
	if (pr)
		return fsck_fix_del(f, KV_DB_EXTENT, r->k, r->kl, p.ino, pr);
	raise_floor(f, p.ino);
	return 0;
}

static int lend_record(struct fsck_walk *w, const struct fsck_rec *r)
{
	struct fsck *f = w->f;
	struct fshare *s = f->share;
	struct kv_extent x, *l;
	struct pctx p = {.ino = r->key.ino, .num = r->key.idx, .ino2 = r->key.ino2,
			 .num2 = r->vl};
	struct pend *pr;

	if (kv_decode_extent(KV_DB_LEND, r->k, r->kl, r->v, r->vl, &x) == 0) {
		l = array_reserve(s->lend, &s->cap_lend, s->nlend + 1, sizeof(*l), 256);
		if (!l)
			return -ENOMEM;
		s->lend = l;
		s->lend[s->nlend++] = x;
		return 0;
	}
	pr = fsck_problem(f, PR_LEND_BAD, &p);
	if (pr)
		return fsck_fix_del(f, KV_DB_LEND, r->k, r->kl, p.ino, pr);
	raise_floor(f, p.ino);
	raise_floor(f, p.ino2);
	return 0;
}

/* ---------------------------------------------------------- b: pairs -- */

/* Order extents by their borrower's side first (the extent key's), or by
 * their home's (the lend key's). */
static int cmp_parts(const struct kv_extent *a, const struct kv_extent *b, int by_home)
{
	const uint64_t ka[2][4] = {{a->ino, a->first, a->home, a->hfirst},
				   {a->home, a->hfirst, a->ino, a->first}};
	const uint64_t kb[2][4] = {{b->ino, b->first, b->home, b->hfirst},
				   {b->home, b->hfirst, b->ino, b->first}};

	for (int i = 0; i < 4; i++)
		if (ka[by_home][i] != kb[by_home][i])
			return ka[by_home][i] < kb[by_home][i] ? -1 : 1;
	return 0;
}

static int cmp_borrower(const void *a, const void *b)
{
	return cmp_parts(a, b, 0);
}

/* The extent of ino at block first, or NULL. */
static struct fext *ext_find(struct fshare *s, uint64_t ino, uint64_t first)
{
	size_t lo = 0, hi = s->next;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const struct kv_extent *x = &s->ext[mid].x;

		if (x->ino < ino || (x->ino == ino && x->first < first))
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < s->next && s->ext[lo].x.ino == ino && s->ext[lo].x.first == first)
		return &s->ext[lo];
	return NULL;
}

/* A lend record whose extent is not there: dropped (-p), or kept in the
 * model as it is, naming its home's blocks (-n). */
static int lend_alone(struct fsck *f, const struct kv_extent *l, struct fext **alone,
		      size_t *nalone, size_t *cap)
{
	struct pctx p = {.ino = l->home, .num = l->hfirst, .num2 = l->hfirst + l->count - 1,
			 .ino2 = l->ino};
	unsigned char k[32], v[KV_EXTENT_VLEN];
	struct pend *pr = fsck_problem(f, PR_LEND_NO_EXTENT, &p);
	struct fext *e;
	size_t kl, vl;

	if (pr) {
		kv_encode_extent(KV_DB_LEND, l, k, &kl, v, &vl);
		return fsck_fix_del(f, KV_DB_LEND, k, kl, l->home, pr);
	}
	e = ext_add(alone, nalone, cap, l);
	if (!e)
		return -ENOMEM;
	e->lend_only = 1;
	return 0;
}

static int pair(struct fsck *f, struct fext **alone, size_t *nalone, size_t *cap)
{
	struct fshare *s = f->share;
	int rc = 0;

	if (s->nlend) /* qsort takes no NULL, even for nothing */
		qsort(s->lend, s->nlend, sizeof(*s->lend), cmp_borrower);
	/* every drop first: a lend record of the right key but a wrong count
	 * is dropped, then stored again from its extent */
	for (size_t i = 0; !rc && i < s->nlend; i++) {
		const struct kv_extent *l = &s->lend[i];
		struct fext *e = ext_find(s, l->ino, l->first);

		if (e && !e->paired && e->x.home == l->home && e->x.hfirst == l->hfirst &&
		    e->x.count == l->count)
			e->paired = 1;
		else
			rc = lend_alone(f, l, alone, nalone, cap);
	}
	for (size_t i = 0; !rc && i < s->next; i++) {
		const struct kv_extent *x = &s->ext[i].x;
		struct pctx p = {.ino = x->ino, .num = x->first, .num2 = x->first + x->count - 1,
				 .ino2 = x->home};
		struct pend *pr;

		if (s->ext[i].paired)
			continue;
		pr = fsck_problem(f, PR_EXTENT_NO_LEND, &p);
		if (pr)
			rc = ext_set(f, pr, NULL, x, NULL);
	}
	free(s->lend);
	s->lend = NULL;
	s->nlend = s->cap_lend = 0;
	return rc;
}

/* ------------------------------------------------------ c: borrowers -- */

/* The extents of a borrower that is missing, or no regular file: each is
 * dropped if the mode allows (code), else kept as it is. */
static int drop_all(struct fsck *f, enum fsck_pr code, const struct fino *fi, struct fext *e,
		    size_t n)
{
	for (size_t i = 0; i < n; i++) {
		struct kv_extent *x = &e[i].x;
		struct pctx p = {.ino = x->ino, .num = x->first, .num2 = x->first + x->count - 1,
				 .ino2 = x->home, .str = fi ? fsck_type_name(fi->mode) : NULL};
		struct pend *pr = fsck_problem(f, code, &p);
		int rc;

		if (!pr)
			continue;
		rc = ext_set(f, pr, x, NULL, NULL);
		if (rc)
			return rc;
		x->count = 0;
	}
	return 0;
}

/* Extents of regular file fi past its size, or overlapping one before:
 * trimmed (in e, and queued). Of two that overlap, the earlier keeps the
 * blocks (a read goes on with the extent it found, kv_data_read, so a read
 * from the file's start sees the earlier one there; one from within the
 * later sees the later: no repair keeps both, hence -y). A later one cut
 * at its head gets a new key, which may be the old key of one after it:
 * the extents cut so are dropped first, in this loop, and stored after it. */
static int trim_group(struct fsck *f, struct fino *fi, struct fext *e, size_t n)
{
	uint64_t nb = fi->size / f->bs + (fi->size % f->bs != 0); /* blocks below the size */
	const struct kv_extent *prev = NULL; /* the kept one that ends last */
	uint64_t prev_key = 0;               /* its first block as found */
	struct kv_extent t;
	struct pend *pr;
	int rc;

	for (size_t i = 0; i < n; i++) {
		struct kv_extent *x = &e[i].x;
		uint64_t end = x->first + x->count, key = x->first;

		if (end > nb) {
			uint64_t a = x->first > nb ? x->first : nb;
			struct pctx p = {.ino = x->ino, .num = a, .num2 = end - 1, .num3 = fi->size};

			pr = fsck_problem(f, PR_EXTENT_PAST_EOF, &p);
			if (pr) {
				t = *x;
				t.count = a - x->first;
				if ((rc = ext_set(f, pr, x, &t, NULL)) != 0)
					return rc;
				x->count = t.count;
				end = a;
			}
		}
		if (x->count && prev && prev->first + prev->count > x->first) {
			uint64_t pend = prev->first + prev->count;
			struct pctx p = {.ino = x->ino, .num = x->first, .num2 = prev_key,
					 .num3 = (pend < end ? pend : end) - 1};

			pr = fsck_problem(f, PR_EXTENT_OVERLAP, &p);
			if (pr) {
				if ((rc = ext_set(f, pr, x, NULL, NULL)) != 0)
					return rc;
				e[i].moved = (uint32_t)(pr - f->pend) + 1;
				t = *x;
				x->first = pend < end ? pend : end;
				x->hfirst += x->first - t.first;
				x->count = end - x->first;
			}
		}
		if (x->count && (!prev || x->first + x->count > prev->first + prev->count)) {
			prev = x;
			prev_key = key;
		}
	}
	for (size_t i = 0; i < n; i++) {
		if (!e[i].moved || !e[i].x.count)
			continue;
		/* the repair that completes the problem's: it is told its result */
		if ((rc = ext_set(f, &f->pend[e[i].moved - 1], NULL, &e[i].x, NULL)) != 0)
			return rc;
	}
	return 0;
}

/* Cut [a, b) out of *cur for problem pr, appending the piece before it to
 * out; *cur becomes the piece after it. */
static int cut(struct fsck *f, struct pend *pr, struct kv_extent *cur, uint64_t a, uint64_t b,
	       struct fext **out, size_t *nout, size_t *cap)
{
	struct kv_extent left = *cur, right = *cur;
	int rc;

	left.count = a - cur->first;
	right.first = b;
	right.hfirst = cur->hfirst + (b - cur->first);
	right.count = cur->first + cur->count - b;
	rc = ext_set(f, pr, cur, &left, &right);
	if (!rc && left.count && !ext_add(out, nout, cap, &left))
		rc = -ENOMEM;
	*cur = right;
	return rc;
}

/* Extent *x of a file: the file's own blocks within it are cut out of it
 * (-p); the pieces that stay go to out. */
static int own_blocks(struct fsck *f, kv_iter *it, const struct kv_extent *x, struct fext **out,
		      size_t *nout, size_t *cap)
{
	unsigned char key[KV_KEY_MAX];
	struct kv_key k = {.ino = x->ino, .idx = x->first};
	struct kv_extent cur = *x;
	uint64_t end = x->first + x->count, a = 0, b = 0;
	const void *kp, *vp;
	size_t kl, vl;
	int rc = kv_iter_seek(it, key, kv_key_encode(KV_DB_DATA, &k, key)), more;

	if (rc && rc != -ENOENT)
		return rc;
	for (more = rc == 0; more;) {
		rc = kv_iter_next(it, &kp, &kl, &vp, &vl);
		more = rc == 0 && kv_key_decode(KV_DB_DATA, kp, kl, &k) == 0 && k.ino == x->ino &&
		       k.idx < end;
		if (rc && rc != -ENOENT)
			return rc;
		if (more && b && k.idx == b) {
			b++;
			continue;
		}
		if (b) { /* the run [a, b) of own blocks ends */
			struct pctx p = {.ino = x->ino, .num = a, .num2 = b - 1, .ino2 = x->home};
			struct pend *pr = fsck_problem(f, PR_EXTENT_OWN, &p);

			if (pr && (rc = cut(f, pr, &cur, a, b, out, nout, cap)) != 0)
				return rc;
		}
		a = k.idx;
		b = k.idx + 1;
	}
	if (cur.count && !ext_add(out, nout, cap, &cur))
		return -ENOMEM;
	return 0;
}

static struct fbor *bor_add(struct fshare *s, const struct fsck *f, const struct fino *fi)
{
	struct fbor *b = array_reserve(s->bor, &s->cap_bor, s->nbor + 1, sizeof(*b), 64);

	if (!b)
		return NULL;
	s->bor = b;
	b = &b[s->nbor++];
	memset(b, 0, sizeof(*b));
	b->ino = fi->ino;
	b->fi = (size_t)(fi - f->ino);
	return b;
}

/* The n extents of one borrower (e, in order of first): checked, then what
 * stays appended to out. */
static int borrower(struct fsck *f, struct fino *fi, kv_iter *it, struct fext *e, size_t n,
		    struct fext **out, size_t *nout, size_t *cap)
{
	struct pctx p = {.ino = e[0].x.ino};
	size_t from = *nout;
	struct fbor *b;
	int rc = 0;

	if (!fi || !fino_live(fi))
		rc = drop_all(f, PR_EXTENT_NO_OWNER, NULL, e, n);
	else if (!(fi->flags & F_BAD) && !S_ISREG(fi->mode))
		rc = drop_all(f, PR_EXTENT_NOT_FILE, fi, e, n);
	else if (!(fi->flags & F_BAD)) {
		if (!(fi->iflags & KV_INODE_BORROWS))
			rc = fsck_fix_field(f, PR_EXTENT_FLAG, &p, fi, SET_FLAGS_ADD,
					    KV_INODE_BORROWS);
		if (!rc)
			rc = trim_group(f, fi, e, n);
		for (size_t i = 0; !rc && i < n; i++)
			if (e[i].x.count)
				rc = own_blocks(f, it, &e[i].x, out, nout, cap);
		n = 0; /* own_blocks put the pieces */
	}
	for (size_t i = 0; !rc && i < n; i++)
		if (e[i].x.count && !ext_add(out, nout, cap, &e[i].x))
			rc = -ENOMEM;
	if (rc || !fi || !fino_live(fi) || (fi->flags & F_BAD) || *nout == from)
		return rc;
	if (!(b = bor_add(f->share, f, fi)))
		return -ENOMEM;
	for (size_t i = from; i < *nout; i++) {
		struct kv_extent *x = &(*out)[i].x;

		(*out)[i].bor = (uint32_t)(b - f->share->bor);
		b->borrowed += x->count;
		/* a borrowed block the size ends inside: trimmed once its home
		 * block is known to be sound (fsck_share_block) */
		if (S_ISREG(fi->mode) && fi->size % f->bs && fi->size / f->bs >= x->first &&
		    fi->size / f->bs - x->first < x->count)
			(*out)[i].tail = 1;
	}
	return 0;
}

static int borrowers(struct fsck *f, struct fext **out, size_t *nout, size_t *cap)
{
	struct fshare *s = f->share;
	struct fsck_walk w = {.f = f};
	kv_iter *it;
	int rc = kv_iter_open(f->txn, KV_DB_DATA, &it);

	for (size_t i = 0, j; !rc && i < s->next; i = j) {
		for (j = i; j < s->next && s->ext[j].x.ino == s->ext[i].x.ino; j++)
			;
		rc = borrower(f, fsck_merge(&w, s->ext[i].x.ino), it, &s->ext[i], j - i, out,
			      nout, cap);
	}
	if (it)
		kv_iter_close(it);
	return rc;
}

/* ----------------------------------------------------------- d: homes -- */

static const struct fshare *sort_share; /* qsort has no argument */

static int cmp_home(const void *a, const void *b)
{
	return cmp_parts(&sort_share->ext[*(const uint32_t *)a].x,
			 &sort_share->ext[*(const uint32_t *)b].x, 1);
}

static int homes(struct fsck *f)
{
	struct fshare *s = f->share;
	int rc = 0;

	if (s->next > UINT32_MAX)
		return -ENOMEM;
	s->byhome = malloc((s->next ? s->next : 1) * sizeof(*s->byhome));
	if (!s->byhome)
		return -ENOMEM;
	for (size_t i = 0; i < s->next; i++) {
		struct fext *e = &s->ext[i];

		s->byhome[i] = (uint32_t)i;
		e->hstart = e->seen = e->x.hfirst;
		raise_floor(f, e->x.ino);
		raise_floor(f, e->x.home);
		if (!e->lend_only) {
			s->nkept++;
			f->n_borrowed += e->x.count;
		}
	}
	sort_share = s;
	qsort(s->byhome, s->next, sizeof(*s->byhome), cmp_home);
	sort_share = NULL;
	for (size_t i = 0; !rc && i < s->next; i++) {
		const struct fext *e = &s->ext[s->byhome[i]];
		long hi;
		struct fino *h;

		if (e->lend_only || (i && s->ext[s->byhome[i - 1]].x.home == e->x.home))
			continue; /* one look per home */
		hi = fsck_find(f, e->x.home);
		h = hi < 0 ? NULL : &f->ino[hi];
		if (h && fino_live(h) && !(h->flags & F_BAD) && S_ISREG(h->mode) &&
		    !(h->iflags & KV_INODE_LENDS))
			rc = fsck_fix_field(f, PR_HOME_FLAG, &(struct pctx){.ino = h->ino}, h,
					    SET_FLAGS_ADD, KV_INODE_LENDS);
	}
	return rc;
}

int fsck_share_begin(struct fsck *f)
{
	struct fsck_walk w = {.f = f};
	struct fext *alone = NULL, *out = NULL;
	size_t nalone = 0, cap_alone = 0, nout = 0, cap_out = 0;
	int rc;

	f->share = calloc(1, sizeof(*f->share));
	if (!f->share)
		return -ENOMEM;
	rc = fsck_walk(&w, KV_DB_EXTENT, PR_EXTENT_BAD_KEY, ext_record);
	if (!rc)
		rc = fsck_walk(&w, KV_DB_LEND, PR_LEND_BAD_KEY, lend_record);
	if (!rc)
		rc = pair(f, &alone, &nalone, &cap_alone);
	if (!rc)
		rc = borrowers(f, &out, &nout, &cap_out);
	for (size_t i = 0; !rc && i < nalone; i++) /* they name home blocks too */
		if (!ext_add(&out, &nout, &cap_out, &alone[i].x))
			rc = -ENOMEM;
		else
			out[nout - 1].lend_only = 1;
	free(alone);
	free(f->share->ext);
	f->share->ext = out;
	f->share->next = nout;
	f->share->cap_ext = cap_out;
	return rc ? rc : homes(f);
}

/* ------------------------------------------------------------ the walk -- */

/* Report and (-y) cut the home blocks of e found unusable so far. */
static int flush_bad(struct fsck *f, struct fext *e)
{
	struct fshare *s = f->share;
	struct kv_extent *x = &e->x;
	uint64_t a = e->bad_a, b = e->bad_b;
	struct pctx p = {.ino = x->ino, .num = x->first + (a - x->hfirst),
			 .num2 = x->first + (b - 1 - x->hfirst), .num3 = a, .ino2 = x->home,
			 .str = why_text[e->why]};
	struct fext *nowhere = NULL;
	size_t none = 0, cap = 0;
	struct pend *pr;
	int rc;

	if (a == b)
		return 0;
	e->bad_a = e->bad_b = 0;
	pr = fsck_problem(f, PR_BORROW_LOST, &p);
	if (!pr)
		return 0;
	/* the piece before the cut is past the walk: it needs no place */
	rc = cut(f, pr, x, p.num, p.num2 + 1, &nowhere, &none, &cap);
	free(nowhere);
	if (e->bor != NO_BOR)
		s->bor[e->bor].borrowed -= b - a;
	f->n_borrowed -= b - a;
	return rc;
}

/* Home blocks [a, b) of e cannot serve its borrower. */
static int bad(struct fsck *f, struct fext *e, uint64_t a, uint64_t b, int why)
{
	int rc = 0;

	if (e->why == why && e->bad_b == a && e->bad_a != e->bad_b) {
		e->bad_b = b;
		return 0;
	}
	rc = flush_bad(f, e);
	e->bad_a = a;
	e->bad_b = b;
	e->why = (uint8_t)why;
	return rc;
}

/* The walk is past every block e names. */
static int finish(struct fsck *f, struct fext *e)
{
	uint64_t hend = e->x.hfirst + e->x.count;
	int rc = 0;

	if (e->done)
		return 0;
	e->done = 1;
	if (!e->lend_only && e->x.count && e->seen < hend)
		rc = bad(f, e, e->seen > e->x.hfirst ? e->seen : e->x.hfirst, hend, WHY_MISSING);
	return rc ? rc : flush_bad(f, e);
}

/* Borrowed block idx of e's borrower straddles its size: now that its home
 * block is known sound, the borrower gets a copy of its own cut at the size
 * (as truncate makes it). The repair comes after the one that trims the
 * extent at the size (trim_group): it is then the extent's last block. */
static int trim_tail(struct fsck *f, struct fext *e, uint64_t idx)
{
	struct fshare *s = f->share;
	struct fbor *b = &s->bor[e->bor];
	struct fino *fi = &f->ino[b->fi];
	struct pctx p = {.ino = fi->ino, .num = idx, .num2 = fi->size};
	int rc = flush_bad(f, e); /* its cut goes first: it still names the block */
	struct pend *pr;
	struct fix *x;

	if (rc)
		return rc;
	pr = fsck_problem(f, PR_BLOCK_TAIL, &p);
	if (!pr)
		return 0;
	x = fsck_fix(f, FX_BLOCK_TRIM, fi->ino, pr);
	if (!x)
		return -ENOMEM;
	x->u.trim.size = fi->size;
	x->u.trim.end = (idx + 1) * f->bs;
	x->u.trim.flags = KV_INODE_BORROWS;
	e->x.count--; /* the block leaves the extent: the file's own now */
	b->borrowed--;
	b->gained++;
	f->n_borrowed--;
	return 0;
}

/* The extents of homes below ino are past (all of them when last). */
static int advance(struct fsck *f, uint64_t ino, int last)
{
	struct fshare *s = f->share;
	int rc;

	for (; s->lo < s->next; s->lo++) {
		struct fext *e = &s->ext[s->byhome[s->lo]];

		if (!last && e->x.home >= ino && !e->done)
			break;
		if ((rc = finish(f, e)) != 0)
			return rc;
	}
	return 0;
}

int fsck_share_block(struct fsck *f, uint64_t ino, uint64_t idx, enum fsck_bstate st,
		     size_t len)
{
	static const uint8_t why_of[] = {[BS_UNWRITTEN] = WHY_UNWRITTEN,
					 [BS_BAD_LEN] = WHY_DAMAGED, [BS_CSUM] = WHY_DAMAGED,
					 [BS_FRAME] = WHY_DAMAGED};
	struct fshare *s = f->share;
	int usable = st == BS_GOOD || st == BS_SHORT, rc, n = 0, lent = 0;
	int lose = !usable && fsck_repairs(f, PR_BORROW_LOST);

	if ((rc = advance(f, ino, 0)) != 0)
		return rc;
	for (size_t i = s->lo; i < s->next; i++) {
		struct fext *e = &s->ext[s->byhome[i]];

		if (e->x.home != ino || e->hstart > idx)
			break;
		if (e->done || idx < e->x.hfirst)
			continue;
		if (idx - e->x.hfirst >= e->x.count) {
			if ((rc = finish(f, e)) != 0)
				return rc;
			continue;
		}
		if (e->lend_only) {
			n++; /* a lend record alone still keeps a ghost's block */
			continue;
		}
		uint64_t b = e->x.first + (idx - e->x.hfirst), size;

		if (e->seen < idx)
			rc = bad(f, e, e->seen, idx, WHY_MISSING);
		e->seen = idx + 1;
		/* a short block serves as well: its bytes end within the block
		 * (kv/share.c invariant 2), zeros read after them */
		if (!rc && !usable)
			rc = bad(f, e, idx, idx + 1, why_of[st]);
		else if (!rc && e->tail && (size = f->ino[s->bor[e->bor].fi].size) / f->bs == b &&
			 b * f->bs + len > size)
			rc = trim_tail(f, e, b); /* bytes past the borrower's size */
		if (rc)
			return rc;
		if (!lose) {
			n++;
			lent = 1;
		}
	}
	if (lent && usable)
		f->n_shared++;
	return n;
}

int fsck_share_own(struct fsck *f, const struct fino *fi, uint64_t own)
{
	struct fshare *s = f->share;

	while (s->bi < s->nbor && s->bor[s->bi].ino < fi->ino)
		s->bi++;
	if (s->bi == s->nbor || s->bor[s->bi].ino != fi->ino)
		return 0;
	s->bor[s->bi].own = own;
	return 1;
}

/* The superblock must say it holds extents, or kvfs reads none of them. */
static int check_feature(struct fsck *f)
{
	return fsck_fix_feature(f, PR_SHARED_FLAG, f->share->nkept, KV_FEATURE_INCOMPAT_SHARED);
}

int fsck_share_end(struct fsck *f)
{
	struct fshare *s = f->share;
	char saved[32];
	int rc = advance(f, 0, 1);

	for (size_t i = 0; !rc && i < s->nbor; i++) {
		struct fbor *b = &s->bor[i];
		struct fino *fi = &f->ino[b->fi];
		uint64_t counted = b->own + b->borrowed + b->gained;
		struct pctx p = {.ino = fi->ino, .num = fi->nblocks, .num2 = counted};

		if (fino_live(fi) && !(fi->flags & F_BAD) && fi->nblocks != counted)
			rc = fsck_fix_field(f, PR_NBLOCKS, &p, fi, SET_NBLOCKS, counted);
	}
	if (!rc)
		rc = check_feature(f);
	cli_format_bytes(f->n_borrowed * f->bs, saved, sizeof(saved));
	fsck_info(f, "  %llu extents: %llu blocks borrowed from %llu shared (%s saved)",
		  (unsigned long long)s->nkept, (unsigned long long)f->n_borrowed,
		  (unsigned long long)f->n_shared, saved);
	fsck_share_free(f);
	return rc;
}

void fsck_share_free(struct fsck *f)
{
	if (!f->share)
		return;
	free(f->share->ext);
	free(f->share->byhome);
	free(f->share->bor);
	free(f->share->lend);
	free(f->share);
	f->share = NULL;
}
