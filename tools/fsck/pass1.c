/*
 * pass1.c - pass 1: the superblock and the format.
 *
 * kv_open already refused what cannot be checked at all (not an LMDB file,
 * no kvfs databases, bad magic, a later version, unknown incompatible
 * features, a truncated file): those end the run with exit 8 before any
 * pass. This pass reads the superblock again from the snapshot the other
 * passes walk (a mounted image's counter moves), so pass 7 compares the
 * counter with the inodes of the same commit, and checks that the meta
 * database holds nothing but the superblock, the count of unwritten
 * blocks (format version 1), which pass 7 checks, and mount defaults a
 * mount takes (kvfs-tune's).
 *
 * Invariants:
 *  1. f->sb and f->bs describe the snapshot every later pass reads (with -n,
 *     the only one).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "fsck.h"

int fsck_pass1(struct fsck *f)
{
	const void *k, *v;
	size_t kl, vl;
	int rc, have = 0;
	kv_iter *it;

	rc = kv_iter_open(f->txn, KV_DB_META, &it);
	if (rc)
		return rc;
	while ((rc = kv_iter_next(it, &k, &kl, &v, &vl)) == 0) {
		struct kv_key key;
		struct pctx p;
		struct pend *pr;

		fsck_tick(f, 1);
		if (kv_key_decode(KV_DB_META, k, kl, &key) == 0 && key.super) {
			rc = kv_decode_super(v, vl, &f->sb);
			if (rc)
				break; /* kv_open read it fine: the image changed under us */
			have = 1;
			continue;
		}
		if (kl == strlen(KV_DEFAULTS_KEY) && memcmp(k, KV_DEFAULTS_KEY, kl) == 0) {
			/* kvfs-tune's: what a mount would refuse is dropped */
			char opts[KV_DEFAULTS_MAX + 1], why[256] = "not printable text";

			if (vl >= 1 && vl <= KV_DEFAULTS_MAX) {
				memcpy(opts, v, vl);
				opts[vl] = '\0';
				if (strlen(opts) == vl &&
				    mount_defaults_check(opts, why, sizeof(why)) == 0)
					continue;
			} else {
				snprintf(why, sizeof(why), "%zu bytes", vl);
			}
			p = (struct pctx){.name = v, .str = why,
					  .namelen = vl < KV_DEFAULTS_MAX ? vl : KV_DEFAULTS_MAX};
			pr = fsck_problem(f, PR_DEFAULTS_BAD, &p);
			if (pr && (rc = fsck_fix_del(f, KV_DB_META, k, kl, 0, pr)) != 0)
				break;
			continue;
		}
		if (kl == strlen(KV_UNWRITTEN_KEY) && memcmp(k, KV_UNWRITTEN_KEY, kl) == 0) {
			/* pass 5 reads it again, with the blocks it counts */
			if (vl == 8)
				continue;
			p = (struct pctx){.num = vl};
			pr = fsck_problem(f, PR_UNWRITTEN_BAD, &p);
			if (pr && !fsck_fix(f, FX_UNWRITTEN, 0, pr)) {
				rc = -ENOMEM;
				break;
			}
			continue;
		}
		p = (struct pctx){.name = k, .namelen = kl};
		pr = fsck_problem(f, PR_META_EXTRA, &p);
		if (pr && (rc = fsck_fix_del(f, KV_DB_META, k, kl, 0, pr)) != 0)
			break;
	}
	kv_iter_close(it);
	if (rc != -ENOENT)
		return rc ? rc : -EIO;
	if (!have)
		return -EIO;
	f->bs = f->sb.block_size;
	if (f->verbose) {
		char uuid[37], *label = NULL;
		size_t len;
		FILE *m = open_memstream(&label, &len);

		if (m) {
			cli_put_escaped(m, f->sb.label, strlen(f->sb.label));
			fclose(m);
		}
		cli_format_uuid(f->sb.uuid, uuid);
		fsck_info(f, "  format %u, block size %u, uuid %s, label '%s', next inode %llu",
			  f->sb.version, f->sb.block_size, uuid, label ? label : "?",
			  (unsigned long long)f->sb.next_ino);
		free(label);
		if (f->sb.feature_compat || f->sb.feature_ro_compat)
			fsck_info(f, "  features: compat %#llx, ro_compat %#llx (not checked)",
				  (unsigned long long)f->sb.feature_compat,
				  (unsigned long long)f->sb.feature_ro_compat);
	}
	return 0;
}
