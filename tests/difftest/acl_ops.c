/*
 * acl_ops.c - the POSIX ACL operations of the differential tester (acl(5)):
 * setting and removing system.posix_acl_access and system.posix_acl_default,
 * and the umask of creates. tmpfs keeps ACLs by the kernel's rules
 * (fs/posix_acl.c); kvfs keeps them itself (kv/acl.c): the mode an access
 * ACL sets, one the mode says all of not stored, chmod rewriting a stored
 * one, a directory's default ACL taken by what is made in it in place of
 * the umask. These ops make the two meet those rules at random.
 *
 * A value is in the kernel's xattr encoding: le32 version 2, then per
 * entry le16 tag, le16 perm, le32 id (a uid or gid for the named USER and
 * GROUP entries, 0xffffffff for the others), entries in the order USER_OBJ,
 * USER..., GROUP_OBJ, GROUP..., MASK (needed with a named entry), OTHER.
 * The shapes: three entries only (the mode says it all), named entries with
 * increasing ids, odd but valid ones (ids in any order or repeated, ids on
 * the entries that take none: the kernel re-encodes them), empty (0 bytes,
 * or the version alone: the kernel removes the ACL), and malformed ones
 * (the kernel refuses them on both sides, with the same errno).
 *
 * Not generated: an ACL of more than 511 entries, which tmpfs keeps and
 * FUSE refuses (E2BIG: the kernel sends one in a page).
 *
 * Invariants:
 *  1. A value is a pure function of the op (its shape in op->mode, the rest
 *     from op->dseed): the run and the printed line build the same bytes.
 *  2. After an ACL op, and after a chmod or a create that succeeded, the
 *     op's result holds what the object then is (acl_state): its mode and
 *     both ACLs as getxattr gives them (the kernel's encoding, so equal
 *     bytes on both sides), or their errno. A difference shows at the op,
 *     not only at the next tree comparison (which compares every xattr,
 *     ACLs too: tree.c).
 *  3. The umask is set only around a create (ops.c, op_run); between ops
 *     it is 0.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>
#include <linux/posix_acl.h>
#include <linux/posix_acl_xattr.h>

#include "difftest.h"

#define ACL_ACCESS "system.posix_acl_access"
#define ACL_DEFAULT "system.posix_acl_default"
#define ID_NONE ((uint32_t)ACL_UNDEFINED_ID)
#define ENTRIES_MAX 511 /* FUSE sends an ACL in a page: 4 + 8 * 511 bytes */

/* op->mode of an OP_SETACL */
enum { SH_MINIMAL, SH_NAMED, SH_ODD, SH_EMPTY, SH_BAD };
/* how a malformed value breaks the rules */
enum { B_VERSION, B_CUT, B_SHORT, B_NO_USER_OBJ, B_NO_OTHER, B_TWO_USER_OBJ, B_ORDER,
       B_NO_MASK, B_PERM, B_TAG, B_ID, B_NKINDS };
static const char *const bad_names[B_NKINDS] = {
	"version", "cut short", "shorter than a header", "no USER_OBJ", "no OTHER",
	"two USER_OBJ", "GROUP_OBJ out of order", "named entries, no MASK", "perm past rwx",
	"unknown tag", "named entry of id -1",
};

static const uint32_t named_ids[] = {0, 1, 2, 100, 1000, 1001, 65534, 4294967294u};
#define NNAMED (sizeof(named_ids) / sizeof(named_ids[0]))
static const uint16_t umasks[] = {022, 077, 027, 002, 007, 0777, 0137, 0700};

struct ent {
	uint16_t tag, perm;
	uint32_t id;
};

struct acl_value {
	unsigned char b[4 + 8 * (ENTRIES_MAX + 1)];
	size_t len;
	int bad; /* B_*, or -1 */
};

/* ------------------------------------------------------------ generate -- */

void acl_generate(uint64_t *s, struct op *op)
{
	unsigned r = (unsigned)below(s, 100);

	op->name = chance(s, 60) ? 0 : 1; /* access, default */
	if (op->name && chance(s, 10))
		op->p1 = P_DOT; /* the run directory: most creates are made in it */
	else
		op->p1 = pick_path(s, op->name && chance(s, 85) ? DIR_NAME : ANY);
	op->len = r < 75 ? 0 : r < 90 ? 1 : 2;
	op->fd = (uint8_t)below(s, NFDS);
	r = (unsigned)below(s, 100);
	op->mode = r < 20 ? SH_MINIMAL : r < 70 ? SH_NAMED : r < 75 ? SH_ODD : r < 80 ? SH_EMPTY
									      : SH_BAD;
	r = (unsigned)below(s, 100);
	op->flags = op->kind == OP_REMOVEACL || r < 80 ? 0 : r < 90 ? XATTR_CREATE : XATTR_REPLACE;
	op->dseed = (uint32_t)rnd(s);
}

uint16_t acl_gen_umask(uint64_t *s)
{
	return chance(s, 50) ? 0 : umasks[below(s, sizeof(umasks) / sizeof(umasks[0]))];
}

/* Named entries of tag after e[0..n): a few of named_ids in increasing
 * order, or (odd) in any order with repeats, or (big) very many. */
static size_t add_named(uint64_t *s, struct ent *e, size_t n, uint16_t tag, int odd, int big)
{
	size_t k = odd ? below(s, 5) : big ? 50 + below(s, 190) : 0;

	if (!odd && !big) {
		for (size_t i = 0; i < NNAMED; i++)
			if (chance(s, 30))
				e[n++] = (struct ent){tag, (uint16_t)below(s, 8), named_ids[i]};
		return n;
	}
	for (size_t i = 0; i < k; i++)
		e[n++] = (struct ent){tag, (uint16_t)below(s, 8),
				      odd ? named_ids[below(s, NNAMED)] : 5000 + 3 * (uint32_t)i};
	return n;
}

/* The entries of a valid ACL of shape sh (SH_BAD: one with a named entry,
 * to be broken); *g and *m: where GROUP_OBJ and MASK are (m: -1, none). */
static size_t build_entries(uint64_t *s, int sh, struct ent *e, size_t *g, long *m)
{
	int odd = sh == SH_ODD, big = sh == SH_NAMED && chance(s, 3);
	size_t n = 0, named;

	e[n++] = (struct ent){ACL_USER_OBJ, (uint16_t)below(s, 8), ID_NONE};
	if (sh != SH_MINIMAL)
		n = add_named(s, e, n, ACL_USER, odd, big);
	*g = n;
	e[n++] = (struct ent){ACL_GROUP_OBJ, (uint16_t)below(s, 8), ID_NONE};
	if (sh != SH_MINIMAL)
		n = add_named(s, e, n, ACL_GROUP, odd, big);
	named = n - 2;
	if (sh == SH_BAD && !named) {
		e[n++] = (struct ent){ACL_GROUP, (uint16_t)below(s, 8), 1000};
		named = 1;
	}
	*m = -1;
	if (named || (sh == SH_NAMED && chance(s, 20))) {
		*m = (long)n;
		e[n++] = (struct ent){ACL_MASK, (uint16_t)below(s, 8), ID_NONE};
	}
	e[n++] = (struct ent){ACL_OTHER, (uint16_t)below(s, 8), ID_NONE};
	if (odd)
		for (size_t i = 0; i < n; i++)
			if (e[i].tag != ACL_USER && e[i].tag != ACL_GROUP && chance(s, 50))
				e[i].id = (uint32_t)below(s, 70000);
	return n;
}

static void drop(struct ent *e, size_t *n, size_t at)
{
	memmove(e + at, e + at + 1, (*n - at - 1) * sizeof(*e));
	(*n)--;
}

/* Break a valid ACL of n entries with a named one (GROUP_OBJ at g, MASK at
 * m) as kind says: the entries changed in place, *version what the header
 * is to say. Returns how many bytes of the encoding (len) to keep. */
static size_t break_entries(uint64_t *s, int kind, struct ent *e, size_t *n, size_t g, long m,
			    uint32_t *version, size_t len)
{
	struct ent t;

	switch (kind) {
	case B_VERSION:
		*version = (uint32_t[]){0, 1, 3, 0x10002}[below(s, 4)];
		break;
	case B_CUT:
		return len - 1 - below(s, 7);
	case B_SHORT:
		return 1 + below(s, 3);
	case B_NO_USER_OBJ:
		drop(e, n, 0);
		break;
	case B_NO_OTHER:
		drop(e, n, *n - 1);
		break;
	case B_TWO_USER_OBJ:
		memmove(e + 1, e, *n * sizeof(*e));
		(*n)++;
		break;
	case B_ORDER: /* before USER_OBJ, or a USER entry */
		t = e[g];
		e[g] = e[g - 1];
		e[g - 1] = t;
		break;
	case B_NO_MASK:
		drop(e, n, (size_t)m);
		break;
	case B_PERM:
		e[below(s, *n)].perm |= (uint16_t)(8u << below(s, 6));
		break;
	case B_TAG:
		e[below(s, *n)].tag = (uint16_t[]){0, 0x03, 0x40, 0x8000}[below(s, 4)];
		break;
	case B_ID:
		e[g > 1 ? 1 : g + 1].id = ID_NONE; /* a USER entry, else a GROUP one */
		break;
	}
	return 4 + 8 * *n;
}

static void put_le(unsigned char *p, uint32_t v, int bytes)
{
	for (int i = 0; i < bytes; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static uint32_t get_le(const unsigned char *p, int bytes)
{
	uint32_t v = 0;

	for (int i = bytes; i-- > 0;)
		v = v << 8 | p[i];
	return v;
}

/* The value an OP_SETACL sets (invariant 1). */
static void acl_build(const struct op *op, struct acl_value *v)
{
	struct ent e[ENTRIES_MAX + 1];
	uint64_t s = (uint64_t)op->dseed * 0x9e3779b97f4a7c15ULL + op->mode;
	uint32_t version = POSIX_ACL_XATTR_VERSION;
	size_t n, g, keep;
	long m;

	v->bad = -1;
	if (op->mode == SH_EMPTY) {
		v->len = chance(&s, 50) ? 0 : 4;
		put_le(v->b, POSIX_ACL_XATTR_VERSION, 4);
		return;
	}
	n = build_entries(&s, op->mode, e, &g, &m);
	keep = 4 + 8 * n;
	if (op->mode == SH_BAD) {
		v->bad = (int)below(&s, B_NKINDS);
		keep = break_entries(&s, v->bad, e, &n, g, m, &version, keep);
	}
	put_le(v->b, version, 4);
	for (size_t i = 0; i < n; i++) {
		put_le(v->b + 4 + 8 * i, e[i].tag, 2);
		put_le(v->b + 6 + 8 * i, e[i].perm, 2);
		put_le(v->b + 8 + 8 * i, e[i].id, 4);
	}
	v->len = keep < 4 + 8 * n ? keep : 4 + 8 * n;
}

/* ----------------------------------------------------------------- run -- */

/* The entries of the len bytes at p as getfacl writes them ("u::rw-"): a
 * named entry's id, an id on an entry that takes none after '#'. Every
 * entry, unless blen is short; bytes past the last entry are counted. */
static void render(const unsigned char *p, size_t len, char *buf, size_t blen)
{
	static const char *const perms[] = {"---", "--x", "-w-", "-wx", "r--", "r-x", "rw-",
					    "rwx"};
	size_t o = 0, i, n = len >= 4 ? (len - 4) / 8 : 0, rest = len >= 4 ? (len - 4) % 8 : len;
	uint32_t version = len >= 4 ? get_le(p, 4) : POSIX_ACL_XATTR_VERSION;

	buf[0] = '\0';
	if (version != POSIX_ACL_XATTR_VERSION)
		o += (size_t)snprintf(buf + o, blen - o, "v%u ", version);
	for (i = 0; i < n && o + 64 < blen; i++) { /* an entry, and the tail, fit */
		const unsigned char *e = p + 4 + 8 * i;
		unsigned tag = get_le(e, 2), perm = get_le(e + 2, 2);
		uint32_t id = get_le(e + 4, 4);
		const char *t = tag == ACL_USER_OBJ || tag == ACL_USER ? "u"
				: tag == ACL_GROUP_OBJ || tag == ACL_GROUP ? "g"
				: tag == ACL_MASK ? "m" : tag == ACL_OTHER ? "o" : NULL;
		char ids[16] = "";

		if (tag == ACL_USER || tag == ACL_GROUP)
			snprintf(ids, sizeof(ids), "%u", id);
		else if (id != ID_NONE)
			snprintf(ids, sizeof(ids), "#%u", id);
		o += (size_t)snprintf(buf + o, blen - o, "%s", i ? "," : "");
		if (t)
			o += (size_t)snprintf(buf + o, blen - o, "%s:%s:", t, ids);
		else
			o += (size_t)snprintf(buf + o, blen - o, "tag%#x:%s:", tag, ids);
		if (perm < 8)
			o += (size_t)snprintf(buf + o, blen - o, "%s", perms[perm]);
		else
			o += (size_t)snprintf(buf + o, blen - o, "%#x", perm);
	}
	if (i < n)
		o += (size_t)snprintf(buf + o, blen - o, ",... (%zu entries)", n);
	if (rest)
		snprintf(buf + o, blen - o, "%s+%zu bytes", o ? " " : "", rest);
	else if (!o)
		snprintf(buf, blen, len ? "(the version alone)" : "(0 bytes)");
}

static void fmt_errno(char *buf, size_t len, const char *what, int err)
{
	snprintf(buf, len, "%s %s", what, strerrorname_np(err));
}

void acl_state(struct side *s, int how, const char *path, int fd, int acls, struct res *r)
{
	static const char *const names[] = {ACL_ACCESS, ACL_DEFAULT};
	static unsigned char val[65536];
	static char text[48 * (ENTRIES_MAX + 1)]; /* never cut short (render) */
	char full[8192], line[80];
	struct stat st;
	ssize_t n;
	int rc;

	snprintf(full, sizeof(full), "%s/%s", s->dir, path ? path : "");
	rc = how == ACL_BY_FD ? fstat(fd, &st) : how == ACL_BY_LPATH ? lstat(full, &st)
								   : stat(full, &st);
	if (rc) {
		fmt_errno(line, sizeof(line), " then: stat", errno);
		append(r, line, strlen(line));
		return;
	}
	snprintf(line, sizeof(line), " then: mode 0%o", st.st_mode);
	append(r, line, strlen(line));
	for (int i = 0; i < 2; i++) {
		if (!(acls & (1 << i)))
			continue;
		n = how == ACL_BY_FD ? fgetxattr(fd, names[i], val, sizeof(val))
		    : how == ACL_BY_LPATH ? lgetxattr(full, names[i], val, sizeof(val))
					  : getxattr(full, names[i], val, sizeof(val));
		if (n < 0) {
			fmt_errno(line, sizeof(line), i ? ", default" : ", access", errno);
			append(r, line, strlen(line));
			continue;
		}
		render(val, (size_t)n, text, sizeof(text));
		snprintf(line, sizeof(line), ", %s ", i ? "default" : "access");
		append(r, line, strlen(line));
		append(r, text, strlen(text));
	}
}

void acl_run(const struct op *op, struct side *s, const char *path, struct res *r)
{
	const char *name = op->name ? ACL_DEFAULT : ACL_ACCESS;
	int how = (int)op->len, fd = s->fds[op->fd], flags = (int)op->flags;
	char full[8192];
	struct acl_value v;

	snprintf(full, sizeof(full), "%s/%s", s->dir, path);
	if (op->kind == OP_SETACL) {
		acl_build(op, &v);
		set_ret(r, how == ACL_BY_FD ? fsetxattr(fd, name, v.b, v.len, flags)
			   : how == ACL_BY_LPATH ? lsetxattr(full, name, v.b, v.len, flags)
						 : setxattr(full, name, v.b, v.len, flags));
	} else {
		set_ret(r, how == ACL_BY_FD ? fremovexattr(fd, name)
			   : how == ACL_BY_LPATH ? lremovexattr(full, name)
						 : removexattr(full, name));
	}
	acl_state(s, how, path, fd, op->name ? ACL_DEFAULT_BIT : ACL_ACCESS_BIT, r);
}

/* -------------------------------------------------------------- format -- */

void acl_format(const struct op *op, const char *path, char *buf, size_t len)
{
	static const char *const xflags[] = {"", " XATTR_CREATE", " XATTR_REPLACE"};
	const char *k = op->kind == OP_SETACL ? "setacl" : "removeacl";
	const char *name = op->name ? "default" : "access";
	char on[300], v[320] = "";
	struct acl_value val = {.bad = -1};

	if (op->len == ACL_BY_FD)
		snprintf(on, sizeof(on), "fd%d", op->fd);
	else
		snprintf(on, sizeof(on), "\"%s\"%s", path,
			 op->len == ACL_BY_LPATH ? " nofollow" : "");
	if (op->kind == OP_SETACL) {
		acl_build(op, &val);
		render(val.b, val.len, v, sizeof(v));
	}
	snprintf(buf, len, "%s %s %s%s%s%s%s%s", k, on, name, *v ? " " : "", v,
		 xflags[op->flags % 3], val.bad >= 0 ? " (malformed: " : "",
		 val.bad >= 0 ? bad_names[val.bad] : "");
	if (val.bad >= 0 && strlen(buf) + 2 < len)
		strcat(buf, ")");
}
