/*
 * tune.c - what kvfs-tune changes in an image: its label, its uuid and the
 * mount defaults it holds (meta record KV_DEFAULTS_KEY, docs/FORMAT.md).
 *
 * Invariants:
 *  1. The superblock record and env->super change together, in the op's
 *     transaction: a later store of the superblock by the writer (the
 *     inode counter) copies env->super and must not bring the old label
 *     back. Only the role writes env->super.
 *  2. The defaults record holds 1 to KV_DEFAULTS_MAX printable ASCII bytes
 *     (no NUL); no record means none. What they say is checked by the
 *     callers (common/defaults.c), which read them back the same way.
 */
#include <assert.h>
#include <errno.h>
#include <string.h>

#include "kv_int.h"

int kv_super_relabel(kv_txn *t, const char *label, const uint8_t uuid[16])
{
	kv_env *e = t->env;
	struct kv_super s;
	int rc;

	if (!t->write)
		return -EROFS;
	assert(kv_role_mine(e)); /* invariant 1 */
	if (label && strlen(label) > KV_LABEL_MAX)
		return -EINVAL;
	s = e->super;
	s.next_ino = e->w.next_ino;
	if (label) {
		memset(s.label, 0, sizeof(s.label));
		memcpy(s.label, label, strlen(label));
	}
	if (uuid)
		memcpy(s.uuid, uuid, sizeof(s.uuid));
	rc = kv_super_store(t, &s);
	if (rc == 0) {
		/* a rolled-back op leaves env->super ahead of the record: the
		 * tool that called this closes the image on any failure */
		memcpy(e->super.label, s.label, sizeof(s.label));
		memcpy(e->super.uuid, s.uuid, sizeof(s.uuid));
	}
	return rc;
}

static int defaults_valid(const char *s, size_t len)
{
	if (len == 0 || len > KV_DEFAULTS_MAX)
		return 0;
	for (size_t i = 0; i < len; i++)
		if (s[i] < 0x20 || s[i] > 0x7e)
			return 0;
	return 1;
}

int kv_defaults_get(kv_txn *t, char *buf, size_t size)
{
	kv_val k = {strlen(KV_DEFAULTS_KEY), KV_DEFAULTS_KEY}, v;
	int mrc;

	if (size < KV_DEFAULTS_MAX + 1)
		return -ERANGE;
	buf[0] = '\0';
	mrc = kv_eget(t, KV_DB_META, &k, &v);
	if (mrc == KV_ENOTFOUND)
		return 0;
	if (mrc)
		return kv_err(t, mrc, "get mount defaults");
	if (!defaults_valid(v.data, v.size))
		return -EIO;
	memcpy(buf, v.data, v.size);
	buf[v.size] = '\0';
	return 0;
}

int kv_defaults_set(kv_txn *t, const char *opts)
{
	kv_val k = {strlen(KV_DEFAULTS_KEY), KV_DEFAULTS_KEY}, v = {strlen(opts), (void *)opts};
	int mrc;

	if (!t->write)
		return -EROFS;
	if (opts[0] == '\0') {
		mrc = kv_edel(t, KV_DB_META, &k);
		return mrc == KV_ENOTFOUND ? 0 : kv_err(t, mrc, "delete mount defaults");
	}
	if (!defaults_valid(opts, v.size))
		return -EINVAL;
	return kv_err(t, kv_eput(t, KV_DB_META, &k, &v, 0),
		      "put mount defaults");
}

int kv_defaults_peek(const char *path, char *buf, size_t size)
{
	char err[256];
	kv_env *e;
	kv_txn *t;
	int rc;

	if (size < KV_DEFAULTS_MAX + 1)
		return -ERANGE;
	buf[0] = '\0';
	rc = kv_open(path, &(struct kv_open_opts){.readonly = 1}, &e, err, sizeof(err));
	if (rc)
		return rc;
	rc = kv_read_begin(e, &t);
	if (rc == 0) {
		rc = kv_defaults_get(t, buf, size);
		kv_read_end(t);
	}
	kv_close(e);
	return rc;
}
