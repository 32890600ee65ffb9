/*
 * acl.c - POSIX ACLs (acl(5)) as kvfs keeps them: the values of the xattrs
 * system.posix_acl_access and system.posix_acl_default, stored in the
 * encoding the kernel sends and reads back (posix_acl_xattr, little
 * endian; docs/FORMAT.md):
 *
 *   u32 version (2), then per entry: u16 tag, u16 perm (rwx: 4 2 1),
 *   u32 id (a uid for USER, a gid for GROUP, else 0xffffffff)
 *
 * The kernel enforces them (FUSE_CAP_POSIX_ACL) but leaves the rest to the
 * filesystem, which is here, for the daemon and the tools alike:
 *  - the mode an access ACL implies (setfacl changes the mode: owner,
 *    group class (the mask entry, or the owning group without one) and
 *    other), and whether the ACL says more than the mode can;
 *  - chmod rewriting those three entries of a stored access ACL;
 *  - a new inode in a directory with a default ACL taking it, masked by
 *    the mode asked for (and a new directory taking it as its own
 *    default), in place of the umask.
 * The rules are those of the kernel's fs/posix_acl.c, which ext4 and tmpfs
 * follow; kvfs's answers are checked against tmpfs's (fs.acl, difftest).
 *
 * Invariants:
 *  1. kv_acl_check accepts what the kernel's posix_acl_valid() accepts
 *     (one USER_OBJ, USER entries, one GROUP_OBJ, GROUP entries, a MASK
 *     when there are named entries, one OTHER, in that order; perms within
 *     rwx; no named entry with the undefined id), and at most
 *     KV_ACL_ENTRIES_MAX entries (the kernel reads one back into a page).
 *  2. Every function here works on a value kv_acl_check accepted, and the
 *     values they make pass it.
 */
#include <errno.h>
#include <string.h>

#include "kv_int.h"

#define ACL_VERSION 2

static unsigned tag_of(const unsigned char *e)
{
	return (unsigned)e[0] | (unsigned)e[1] << 8;
}

static unsigned perm_of(const unsigned char *e)
{
	return (unsigned)e[2] | (unsigned)e[3] << 8;
}

static void perm_set(unsigned char *e, unsigned perm)
{
	e[2] = (unsigned char)perm;
	e[3] = 0;
}

int kv_acl_type(const char *name, size_t len)
{
	if (len == strlen(KV_ACL_ACCESS) && memcmp(name, KV_ACL_ACCESS, len) == 0)
		return KV_ACL_TYPE_ACCESS;
	if (len == strlen(KV_ACL_DEFAULT) && memcmp(name, KV_ACL_DEFAULT, len) == 0)
		return KV_ACL_TYPE_DEFAULT;
	return 0;
}

int kv_acl_name(const char *name)
{
	return kv_acl_type(name, strlen(name));
}

int kv_acl_check(const void *val, size_t len)
{
	const unsigned char *p = val;
	enum { S_USER_OBJ, S_USER, S_GROUP, S_OTHER, S_DONE } state = S_USER_OBJ;
	int needs_mask = 0;
	size_t n;

	if (len < 4 || (len - 4) % 8 || kv_get_le32(p) != ACL_VERSION)
		return -EINVAL;
	n = (len - 4) / 8;
	if (n > KV_ACL_ENTRIES_MAX)
		return -E2BIG;
	for (size_t i = 0; i < n; i++) {
		const unsigned char *e = p + 4 + 8 * i;
		uint32_t id = kv_get_le32(e + 4);

		if (perm_of(e) & ~7u || state == S_DONE)
			return -EINVAL;
		switch (tag_of(e)) {
		case KV_ACL_USER_OBJ:
			if (state != S_USER_OBJ)
				return -EINVAL;
			state = S_USER;
			break;
		case KV_ACL_USER:
		case KV_ACL_GROUP:
			if (state != (tag_of(e) == KV_ACL_USER ? S_USER : S_GROUP) ||
			    id == KV_ACL_UNDEFINED_ID)
				return -EINVAL;
			needs_mask = 1;
			break;
		case KV_ACL_GROUP_OBJ:
			if (state != S_USER)
				return -EINVAL;
			state = S_GROUP;
			break;
		case KV_ACL_MASK:
			if (state != S_GROUP)
				return -EINVAL;
			state = S_OTHER;
			break;
		case KV_ACL_OTHER:
			if (state != S_OTHER && (state != S_GROUP || needs_mask))
				return -EINVAL;
			state = S_DONE;
			break;
		default:
			return -EINVAL;
		}
	}
	return state == S_DONE ? 0 : -EINVAL;
}

/* The three entries of a checked ACL (invariant 2) that the mode's classes
 * stand for: the owner's, the group class's (the mask entry, or the owning
 * group's without one) and other's. Returns 1 when the ACL has a mask or
 * named entries: it says more than a mode can. */
static int classes(unsigned char *p, size_t len, unsigned char **owner, unsigned char **group,
		   unsigned char **other)
{
	unsigned char *mask = NULL;
	int named = 0;

	*owner = *group = *other = NULL; /* each found: the ACL was checked */
	for (size_t i = 0; i < (len - 4) / 8; i++) {
		unsigned char *e = p + 4 + 8 * i;

		switch (tag_of(e)) {
		case KV_ACL_USER_OBJ:
			*owner = e;
			break;
		case KV_ACL_GROUP_OBJ:
			*group = e;
			break;
		case KV_ACL_MASK:
			mask = e;
			named = 1;
			break;
		case KV_ACL_OTHER:
			*other = e;
			break;
		default:
			named = 1;
			break;
		}
	}
	if (mask)
		*group = mask;
	return named;
}

int kv_acl_mode(const void *val, size_t len, uint32_t *mode)
{
	unsigned char *owner, *group, *other;
	int rc = kv_acl_check(val, len);

	if (rc)
		return rc;
	/* classes() reads through p here: nothing is written */
	rc = classes((unsigned char *)val, len, &owner, &group, &other);
	*mode = (*mode & ~(uint32_t)0777) | perm_of(owner) << 6 | perm_of(group) << 3 |
		perm_of(other);
	return rc;
}

int kv_acl_chmod(void *val, size_t len, uint32_t mode)
{
	unsigned char *owner, *group, *other;
	int rc = kv_acl_check(val, len);

	if (rc)
		return rc;
	classes(val, len, &owner, &group, &other);
	perm_set(owner, (mode >> 6) & 7);
	perm_set(group, (mode >> 3) & 7);
	perm_set(other, mode & 7);
	return 0;
}

int kv_acl_create(void *acl, size_t len, uint32_t *mode)
{
	unsigned char *owner, *group, *other;
	int named, rc = kv_acl_check(acl, len);

	if (rc)
		return rc;
	named = classes(acl, len, &owner, &group, &other);
	/* each class keeps what both the ACL and the mode asked for give it */
	perm_set(owner, perm_of(owner) & (*mode >> 6));
	perm_set(group, perm_of(group) & (*mode >> 3));
	perm_set(other, perm_of(other) & *mode);
	*mode = (*mode & ~(uint32_t)0777) | perm_of(owner) << 6 | perm_of(group) << 3 |
		perm_of(other);
	return named;
}

int kv_acl_entry(const void *val, size_t len, size_t i, struct kv_acl_entry *e)
{
	const unsigned char *p = (const unsigned char *)val + 4 + 8 * i;

	if (len < 4 || i >= (len - 4) / 8)
		return -ENOENT;
	e->tag = tag_of(p);
	e->perm = perm_of(p);
	e->id = kv_get_le32(p + 4);
	return 0;
}
