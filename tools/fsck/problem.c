/*
 * problem.c - the problem table (each problem's code, pass, message, repair
 * and whether -p may do it), the report of each problem found, the progress
 * display and the --json report.
 *
 * Which repairs -p makes (PF_PREEN), and why: -p makes a change only when
 * the right value is fixed by other records and nothing a user could read
 * is lost: link counts, directory sizes, block counts, parent fields and
 * dirent types (all derived from the entries and blocks present); the inode
 * counter; the orphan list; blocks and xattrs whose inode is gone; bytes
 * stored past a file's size (unreadable, and what truncate would have
 * dropped); an ACL where the kernel never looks (on a symlink, a default
 * ACL on a non-directory: it grants nothing and no one can remove it); the
 * records of shared blocks where the repair keeps every byte a read returns
 * (share.c: the half of a pair that is missing, an extent of a missing
 * inode, past its file's size or under the file's own blocks, the flags of
 * files that lend or borrow, the superblock's feature bit); the feature
 * bit of compressed blocks.
 * Everything that drops or moves a name, drops data a user could read,
 * changes who may do what, or clears an inode needs -y: dropping dirents,
 * moving inodes to /lost+found, dropping damaged blocks (a compressed one
 * whose frame does not decompress among them) and the borrowed blocks
 * whose home block is lost (or extents no read agrees on), clearing
 * damaged inodes, dropping malformed records and damaged ACLs (e2fsck
 * clears a damaged ACL too; without it the mode rules, whose group bits
 * were the mask, so the owning group may gain what its own entry did not
 * give).
 *
 * A warning (PF_WARN) is what no mode changes, as e2fsck's messages that ask
 * nothing: a record the daemon could have written and still serves, which
 * only looks wrong by today's rules (an xattr name an older kvfs stored, that
 * kvfs reads and removes but no longer sets). Dropping it would lose a
 * user's data to a repair, so it is reported in every mode and kept.
 *
 * Invariants:
 *  1. Every problem is reported exactly once, after its repair (if any) ran,
 *     in the order found; the text line and the JSON object say the same.
 *  2. Nothing read from the image reaches the output unescaped: names go
 *     through cli_put_escaped, and the JSON writer escapes what remains.
 *  3. A problem counts as an error (exit bit 4) unless it is fixed, a note
 *     (PF_NOTE: a normal state, like an orphan of a crashed mount) or a
 *     warning (PF_WARN).
 *  4. A warning is never repaired: no mode queues a change for it.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "fsck.h"

#define PF_PREEN 0x1 /* -p repairs it */
#define PF_NOTE 0x2  /* not an error: reported, repaired with -p or -y */
#define PF_WARN 0x4  /* not an error: reported, never repaired (invariant 4) */
#define PF_NOT_ERROR (PF_NOTE | PF_WARN)

/* Pending problem states */
enum { PS_LEFT, PS_QUEUED };

static const struct {
	const char *code;
	int pass;
	unsigned flags;
	const char *msg;
	const char *fix;
} problems[PR_COUNT] = {
	[PR_META_EXTRA] = {"meta_extra", 1, 0,
		"meta database holds an unknown record %N", "Drop it"},
	[PR_DEFAULTS_BAD] = {"defaults_bad", 1, 0,
		"mount defaults %N are wrong: %s (a mount would refuse them)", "Drop them"},
	[PR_UNWRITTEN_BAD] = {"unwritten_bad", 1, PF_PREEN,
		"the count of unwritten blocks is damaged (%n bytes)", "Count them again"},
	[PR_INODE_BAD_KEY] = {"inode_bad_key", 2, 0,
		"inode database: a record with a malformed key (%n bytes)", "Drop it"},
	[PR_INODE_BAD_RECORD] = {"inode_bad_record", 2, 0,
		"inode %i: malformed record (%n bytes)", "Clear the inode"},
	[PR_INODE_BAD_TYPE] = {"inode_bad_type", 2, 0,
		"inode %i: unknown file type (mode %o)", "Clear the inode"},
	[PR_INODE_FLAGS] = {"inode_flags", 2, PF_PREEN,
		"inode %i: reserved flags %x are set", "Clear them"},
	[PR_INODE_SHARE_FLAGS] = {"inode_share_flags", 2, PF_PREEN,
		"inode %i: flags %x of shared blocks on a %s", "Clear them"},
	[PR_INODE_INLINE] = {"inode_inline", 2, 0,
		"inode %i: %n bytes of inline data on a %s", "Drop them"},
	[PR_SYMLINK_SIZE] = {"symlink_size", 2, PF_PREEN,
		"inode %i: symlink size is %n, its target is %m bytes", "Fix"},
	[PR_SYMLINK_EMPTY] = {"symlink_empty", 2, 0,
		"inode %i: symlink without a target", "Clear the inode"},
	[PR_SPECIAL_SIZE] = {"special_size", 2, PF_PREEN,
		"inode %i: size of a %s is %n, should be 0", "Fix"},
	[PR_PARENT_NONDIR] = {"parent_nondir", 2, PF_PREEN,
		"inode %i: parent field is %n on a %s", "Clear it"},
	[PR_FILE_SIZE] = {"file_size", 2, 0,
		"inode %i: size %n is beyond the largest file size", "Set it to %m"},
	[PR_ROOT_MISSING] = {"root_missing", 2, 0,
		"root directory (inode 1) is missing", "Create it"},
	[PR_ROOT_NOT_DIR] = {"root_not_dir", 2, 0,
		"root inode 1 is not a directory (mode %o)", "Replace it with an empty directory"},
	[PR_DIRENT_BAD_KEY] = {"dirent_bad_key", 3, 0,
		"dirent database: a record with a malformed key (%n bytes)", "Drop it"},
	[PR_DIRENT_NO_DIR] = {"dirent_no_dir", 3, 0,
		"inode %d has entries but is %s", "Drop them"},
	[PR_DIRENT_BAD_LIST] = {"dirent_bad_list", 3, 0,
		"directory %d: entry list %x is damaged (%s); %m entries readable", "Rebuild it"},
	[PR_DIRENT_BAD_NAME] = {"dirent_bad_name", 3, 0,
		"directory %d: entry %N has an invalid name", "Drop it"},
	[PR_DIRENT_BAD_HASH] = {"dirent_bad_hash", 3, 0,
		"directory %d: entry %N is filed under the wrong hash", "Re-file it"},
	[PR_DIRENT_DUP_NAME] = {"dirent_dup_name", 3, 0,
		"directory %d: entry %N appears twice", "Drop the second"},
	[PR_DIRENT_MISSING] = {"dirent_missing", 3, 0,
		"directory %d: entry %N names missing inode %i", "Drop it"},
	[PR_DIRENT_ROOT] = {"dirent_root", 3, 0,
		"directory %d: entry %N names the root directory", "Drop it"},
	[PR_DIRENT_TYPE] = {"dirent_type", 3, PF_PREEN,
		"directory %d: entry %N has type %n, inode %i has type %m", "Fix"},
	[PR_DIR_MULTI] = {"dir_multi", 3, 0,
		"directory %i has a second name: %N in %d (it is also named in %j)",
		"Drop the name in %n"},
	[PR_DIR_UNREACHABLE] = {"dir_unreachable", 3, 0,
		"directory %i is not reachable from the root", "Move it to /lost+found"},
	[PR_DIR_CYCLE] = {"dir_cycle", 3, 0,
		"directory %i: its ancestors form a cycle not reachable from the root",
		"Move it to /lost+found"},
	[PR_INODE_UNREACHABLE] = {"inode_unreachable", 3, 0,
		"inode %i (%s) has no name and is not an orphan", "Move it to /lost+found"},
	[PR_DIR_SIZE] = {"dir_size", 3, PF_PREEN,
		"directory %i: size is %n, it has %m entries", "Fix"},
	[PR_DIR_PARENT] = {"dir_parent", 3, PF_PREEN,
		"directory %i: parent field is %n, but it is named in %m", "Fix"},
	[PR_NLINK] = {"nlink", 4, PF_PREEN,
		"inode %i: link count is %n, should be %m", "Fix"},
	[PR_BLOCK_BAD_KEY] = {"block_bad_key", 5, 0,
		"data database: a record with a malformed key (%n bytes)", "Drop it"},
	[PR_BLOCK_NO_OWNER] = {"block_no_owner", 5, PF_PREEN,
		"block %n of missing inode %i", "Drop it"},
	[PR_BLOCK_NOT_FILE] = {"block_not_file", 5, 0,
		"inode %i: block %n stored for a %s", "Drop it"},
	[PR_BLOCK_PAST_EOF] = {"block_past_eof", 5, PF_PREEN,
		"inode %i: block %n lies past the end of the file (size %m)", "Drop it"},
	[PR_BLOCK_TAIL] = {"block_tail", 5, PF_PREEN,
		"inode %i: block %n holds bytes past the end of the file (size %m)", "Trim it"},
	[PR_BLOCK_BAD_LEN] = {"block_bad_len", 5, 0,
		"inode %i: block %n at offset %m is damaged (bad length)",
		"Drop it, leaving a hole"},
	[PR_BLOCK_CSUM] = {"block_csum", 5, 0,
		"inode %i: block %n at offset %m fails its checksum", "Drop it, leaving a hole"},
	[PR_BLOCK_FRAME] = {"block_frame", 5, 0,
		"inode %i: block %n at offset %m is compressed and does not decompress (its "
		"checksum holds)", "Drop it, leaving a hole"},
	[PR_NBLOCKS] = {"nblocks", 5, PF_PREEN,
		"inode %i: block count is %n, %m blocks stored", "Fix"},
	[PR_EXTENT_BAD_KEY] = {"extent_bad_key", 5, 0,
		"extent database: a record with a malformed key (%n bytes)",
		"Drop it, leaving holes"},
	[PR_EXTENT_BAD] = {"extent_bad", 5, 0,
		"inode %i: the extent at block %n is malformed (a value of %m bytes)",
		"Drop it, leaving holes"},
	[PR_LEND_BAD_KEY] = {"lend_bad_key", 5, 0,
		"lend database: a record with a malformed key (%n bytes)", "Drop it"},
	[PR_LEND_BAD] = {"lend_bad", 5, PF_PREEN,
		"inode %i: the lend record of block %n to inode %j is malformed (a value of %m "
		"bytes)", "Drop it"},
	[PR_LEND_NO_EXTENT] = {"lend_no_extent", 5, PF_PREEN,
		"inode %i: blocks %n to %m are lent to inode %j, which has no such extent",
		"Drop the lend record"},
	[PR_EXTENT_NO_LEND] = {"extent_no_lend", 5, PF_PREEN,
		"inode %i: blocks %n to %m borrowed from inode %j have no lend record", "Add it"},
	[PR_EXTENT_NO_OWNER] = {"extent_no_owner", 5, PF_PREEN,
		"extent at block %n of missing inode %i (borrowing from inode %j)", "Drop it"},
	[PR_EXTENT_NOT_FILE] = {"extent_not_file", 5, 0,
		"inode %i: a %s borrows blocks %n to %m of inode %j (only files do)",
		"Drop them from it"},
	[PR_EXTENT_FLAG] = {"extent_flag", 5, PF_PREEN,
		"inode %i borrows blocks but is not flagged so", "Flag it"},
	[PR_EXTENT_PAST_EOF] = {"extent_past_eof", 5, PF_PREEN,
		"inode %i: borrowed blocks %n to %m lie past the end of the file (size %k)",
		"Drop them"},
	[PR_EXTENT_OVERLAP] = {"extent_overlap", 5, 0,
		"inode %i: its extents at blocks %m and %n both cover blocks %n to %k (a read "
		"may return either)", "Keep them in the first"},
	[PR_EXTENT_OWN] = {"extent_own", 5, PF_PREEN,
		"inode %i: blocks %n to %m are stored and also borrowed from inode %j",
		"Keep the stored ones, drop them from the extent"},
	[PR_HOME_FLAG] = {"home_flag", 5, PF_PREEN,
		"inode %i lends blocks but is not flagged so", "Flag it"},
	[PR_BORROW_LOST] = {"borrow_lost", 5, 0,
		"inode %i: borrowed blocks %n to %m (those of inode %j from block %k on) are %s",
		"Drop them from the extent, leaving holes (their data is lost)"},
	[PR_SHARED_FLAG] = {"shared_flag", 5, PF_PREEN,
		"%n extents stored, but the superblock does not say it holds any (kvfs would "
		"read their blocks as holes)", "Set its feature bit"},
	[PR_COMPRESSED_FLAG] = {"compressed_flag", 5, PF_PREEN,
		"%n compressed blocks stored, but the superblock does not say it holds any (a "
		"kvfs that does not know them would call them damaged)", "Set its feature bit"},
	[PR_XATTR_BAD_KEY] = {"xattr_bad_key", 6, 0,
		"xattr database: a record with a malformed key (%n bytes)", "Drop it"},
	[PR_XATTR_BAD_NAME] = {"xattr_bad_name", 6, 0,
		"inode %i: xattr %N has an invalid name", "Drop it"},
	[PR_XATTR_OLD_NAME] = {"xattr_old_name", 6, PF_WARN,
		"inode %i: xattr %N %s (kvfs sets no such name)",
		"Kept: getfattr reads it, setfattr -x removes it"},
	[PR_XATTR_TOO_BIG] = {"xattr_too_big", 6, 0,
		"inode %i: xattr %N has a value of %n bytes (at most %m)", "Drop it"},
	[PR_XATTR_NO_OWNER] = {"xattr_no_owner", 6, PF_PREEN,
		"xattr %N of missing inode %i", "Drop it"},
	[PR_XATTR_ACL_PLACE] = {"xattr_acl_place", 6, PF_PREEN,
		"inode %i: ACL %N on a %s (the kernel never sets one there)", "Drop it"},
	[PR_XATTR_ACL_BAD] = {"xattr_acl_bad", 6, 0,
		"inode %i: ACL %N is damaged (%s)", "Drop it"},
	[PR_ORPHAN_BAD_KEY] = {"orphan_bad_key", 7, 0,
		"orphan database: a record with a malformed key (%n bytes)", "Drop it"},
	[PR_ORPHAN_MISSING] = {"orphan_missing", 7, PF_PREEN,
		"orphan list names missing inode %i", "Take it off the list"},
	[PR_ORPHAN_LINKED] = {"orphan_linked", 7, PF_PREEN,
		"inode %i is on the orphan list but has %n links", "Take it off the list"},
	[PR_ORPHAN_FREE] = {"orphan_free", 7, PF_PREEN | PF_NOTE,
		"inode %i: orphan with no links (removed while in use; the next mount frees it)",
		"Free it"},
	[PR_COUNTER] = {"counter", 7, PF_PREEN,
		"inode counter is %n, not above inode %m", "Raise it to %j"},
	[PR_UNWRITTEN_COUNT] = {"unwritten_count", 7, PF_PREEN,
		"count of unwritten blocks is %n, %m stored", "Fix"},
	[PR_UNWRITTEN_FLAG] = {"unwritten_flag", 7, PF_PREEN,
		"%m unwritten blocks stored, but the superblock does not say it holds any",
		"Set its feature bit"},
};

double fsck_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Expand a table message into out (a memstream). */
static void expand(FILE *out, const char *fmt, const struct pctx *p)
{
	for (const char *s = fmt; *s; s++) {
		if (*s != '%' || !s[1]) {
			fputc(*s, out);
			continue;
		}
		switch (*++s) {
		case 'i': fprintf(out, "%llu", (unsigned long long)p->ino); break;
		case 'j': fprintf(out, "%llu", (unsigned long long)p->ino2); break;
		case 'd': fprintf(out, "%llu", (unsigned long long)p->dir); break;
		case 'n': fprintf(out, "%llu", (unsigned long long)p->num); break;
		case 'm': fprintf(out, "%llu", (unsigned long long)p->num2); break;
		case 'k': fprintf(out, "%llu", (unsigned long long)p->num3); break;
		case 'o': fprintf(out, "%llo", (unsigned long long)p->num); break;
		case 'x': fprintf(out, "%#llx", (unsigned long long)p->num); break;
		case 's': fputs(p->str ? p->str : "?", out); break;
		case 'N':
			fputc('\'', out);
			cli_put_escaped(out, p->name, p->namelen);
			fputc('\'', out);
			break;
		default: fputc(*s, out); break;
		}
	}
}

static char *expand_str(const char *fmt, const struct pctx *p)
{
	char *buf = NULL;
	size_t len;
	FILE *m = open_memstream(&buf, &len);

	if (!m)
		return NULL;
	expand(m, fmt, p);
	if (fclose(m) != 0) {
		free(buf);
		return NULL;
	}
	return buf;
}

int fsck_repairs(const struct fsck *f, enum fsck_pr code)
{
	unsigned flags = problems[code].flags;

	return !(flags & PF_WARN) &&
	       (f->mode == MODE_YES || (f->mode == MODE_PREEN && (flags & PF_PREEN)));
}

struct pend *fsck_problem(struct fsck *f, enum fsck_pr code, const struct pctx *p)
{
	unsigned flags = problems[code].flags;
	int fix = fsck_repairs(f, code);
	struct pend *pr;
	char *msg, *fixq;

	if (!(pr = array_reserve(f->pend, &f->cap_pend, f->npend + 1, sizeof(*pr), 64)))
		goto nomem;
	f->pend = pr;
	msg = expand_str(problems[code].msg, p);
	fixq = expand_str(problems[code].fix, p);
	if (!msg || !fixq) {
		free(msg);
		free(fixq);
		goto nomem;
	}
	/* one string: message, NUL, repair question */
	pr = &f->pend[f->npend++];
	pr->code = code;
	pr->ino = p->ino;
	pr->msg = malloc(strlen(msg) + strlen(fixq) + 2);
	if (!pr->msg) {
		f->npend--;
		free(msg);
		free(fixq);
		goto nomem;
	}
	strcpy(pr->msg, msg);
	strcpy(pr->msg + strlen(msg) + 1, fixq);
	free(msg);
	free(fixq);
	pr->fix = NO_FIX;
	pr->state = fix ? PS_QUEUED : PS_LEFT;
	return fix ? pr : NULL;

nomem:
	f->found++;
	if (!(flags & PF_NOT_ERROR)) {
		f->left++;
		f->exit_bits |= EXIT_UNCORRECTED;
	}
	return NULL;
}

/* ---------------------------------------------------------------- output -- */

static void json_str(FILE *out, const char *s)
{
	fputc('"', out);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\')
			fprintf(out, "\\%c", c);
		else if (c < 0x20)
			fprintf(out, "\\u%04x", c);
		else
			fputc(c, out);
	}
	fputc('"', out);
}

static const char *mode_name(enum fsck_mode m)
{
	return m == MODE_YES ? "yes" : m == MODE_PREEN ? "preen" : "check";
}

void fsck_progress_clear(struct fsck *f)
{
	progress_clear(&f->prog);
}

/* Report one settled problem: a line of text, or a JSON object. */
static void report(struct fsck *f, const struct pend *pr, int fixed, int rc)
{
	const char *msg = pr->msg, *fixq = pr->msg + strlen(pr->msg) + 1;
	unsigned flags = problems[pr->code].flags;
	int note = (flags & PF_NOT_ERROR) != 0;
	char why[160];

	f->found++;
	if (fixed)
		f->fixed++;
	else if (note)
		f->notes++;
	else
		f->left++;
	if (fixed)
		f->exit_bits |= EXIT_CORRECTED;
	else if (!note)
		f->exit_bits |= EXIT_UNCORRECTED;

	if (pr->state == PS_QUEUED && !fixed)
		snprintf(why, sizeof(why), "yes, but it failed: %s", strerror(-rc));
	else if (fixed)
		snprintf(why, sizeof(why), "yes");
	else if (f->mode == MODE_PREEN && !(flags & PF_PREEN))
		snprintf(why, sizeof(why), "no (needs -y)");
	else
		snprintf(why, sizeof(why), "no");

	if (f->json) {
		fputs(f->json_first ? "\n  " : ",\n  ", stdout);
		f->json_first = 0;
		printf("{\"pass\": %d, \"code\": \"%s\", \"inode\": ", problems[pr->code].pass,
		       problems[pr->code].code);
		if (pr->ino)
			printf("%llu", (unsigned long long)pr->ino);
		else
			fputs("null", stdout);
		fputs(", \"message\": ", stdout);
		json_str(stdout, msg);
		fputs(", \"repair\": ", stdout);
		json_str(stdout, fixq);
		printf(", \"error\": %s, \"fixed\": %s", note ? "false" : "true",
		       fixed ? "true" : "false");
		if (pr->state == PS_QUEUED && !fixed) {
			fputs(", \"repair_error\": ", stdout);
			json_str(stdout, strerror(-rc));
		}
		fputc('}', stdout);
		return;
	}
	fsck_progress_clear(f);
	if (flags & PF_WARN)
		printf("warning: %s.  %s.\n", msg, fixq); /* nothing asked */
	else
		printf("%s%s.  %s? %s\n", note ? "note: " : "", msg, fixq, why);
}

void fsck_settle(struct fsck *f)
{
	for (size_t i = 0; i < f->npend; i++) {
		struct pend *pr = &f->pend[i];
		int rc = 0;

		if (pr->state == PS_QUEUED)
			rc = pr->fix == NO_FIX ? -ENOMEM : f->fixes[pr->fix].rc;
		report(f, pr, pr->state == PS_QUEUED && rc == 0, rc);
		free(pr->msg);
	}
	f->npend = 0;
	fflush(stdout);
}

void fsck_out_begin(struct fsck *f)
{
	if (!f->json)
		return;
	fputs("{\"image\": ", stdout);
	json_str(stdout, f->image);
	printf(", \"mode\": \"%s\", \"problems\": [", mode_name(f->mode));
	f->json_first = 1;
	fflush(stdout);
}

void fsck_out_end(struct fsck *f, double secs, const char *error)
{
	unsigned ex = f->exit_bits;
	char bytes[32];

	fsck_progress_clear(f);
	if (f->json) {
		printf("%s],\n \"counts\": {\"inodes\": %llu, \"directories\": %llu, "
		       "\"files\": %llu, \"blocks\": %llu, \"bytes\": %llu, \"dirents\": %llu, "
		       "\"xattrs\": %llu, \"orphans\": %llu, \"shared_blocks\": %llu, "
		       "\"borrowed_blocks\": %llu, \"saved_bytes\": %llu, "
		       "\"compressed_blocks\": %llu, \"compressed_data_bytes\": %llu, "
		       "\"compressed_frame_bytes\": %llu},\n",
		       f->json_first ? "" : "\n", (unsigned long long)f->n_inodes,
		       (unsigned long long)f->n_dirs, (unsigned long long)f->n_files,
		       (unsigned long long)f->n_blocks, (unsigned long long)f->n_bytes,
		       (unsigned long long)f->n_dirents, (unsigned long long)f->n_xattrs,
		       (unsigned long long)f->n_orphans, (unsigned long long)f->n_shared,
		       (unsigned long long)f->n_borrowed,
		       (unsigned long long)(f->n_borrowed * f->bs),
		       (unsigned long long)f->n_zblocks, (unsigned long long)f->n_zdata,
		       (unsigned long long)f->n_zframes);
		printf(" \"found\": %llu, \"fixed\": %llu, \"left\": %llu, \"notes\": %llu, "
		       "\"seconds\": %.3f, ",
		       (unsigned long long)f->found, (unsigned long long)f->fixed,
		       (unsigned long long)f->left, (unsigned long long)f->notes, secs);
		if (error) {
			fputs("\"error\": ", stdout);
			json_str(stdout, error);
			fputs(", ", stdout);
		}
		printf("\"exit\": %u}\n", ex);
		fflush(stdout);
		return;
	}
	if (error)
		return; /* main printed it */
	cli_format_bytes(f->n_bytes, bytes, sizeof(bytes));
	printf("%s: %llu inodes, %llu directories, %llu blocks (%s) checked in %.2f s", f->image,
	       (unsigned long long)f->n_inodes, (unsigned long long)f->n_dirs,
	       (unsigned long long)f->n_blocks, bytes, secs);
	if (f->n_zblocks)
		printf("; %llu compressed (ratio %.2f)", (unsigned long long)f->n_zblocks,
		       f->n_zframes ? (double)f->n_zdata / (double)f->n_zframes : 0);
	if (f->n_borrowed) {
		cli_format_bytes(f->n_borrowed * f->bs, bytes, sizeof(bytes));
		printf("; %llu blocks borrowed from %llu shared (%s saved)",
		       (unsigned long long)f->n_borrowed, (unsigned long long)f->n_shared, bytes);
	}
	if (f->left)
		printf("; %llu problem%s left (%s)\n", (unsigned long long)f->left,
		       f->left == 1 ? "" : "s",
		       f->mode == MODE_YES ? "repairs failed" : "run fsck.kvfs -y to repair");
	else if (f->fixed)
		printf("; %llu problem%s fixed\n", (unsigned long long)f->fixed,
		       f->fixed == 1 ? "" : "s");
	else
		printf("; clean\n");
	fflush(stdout);
}

void fsck_info(struct fsck *f, const char *fmt, ...)
{
	va_list ap;

	if (!f->verbose || f->json)
		return;
	fsck_progress_clear(f);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	fputc('\n', stdout);
	fflush(stdout);
}

/* -------------------------------------------------------------- progress -- */

void fsck_pass_begin(struct fsck *f, int pass, const char *name, uint64_t total, double share)
{
	f->pass = pass;
	f->pass_name = name;
	f->prog_total = total;
	f->prog_done = 0;
	f->prog_share = share;
	if (!f->json) {
		fsck_progress_clear(f);
		printf("Pass %d: %s\n", pass, name);
		fflush(stdout);
	}
}

/* The fraction of the whole run done when this pass is at in_pass (0-1). */
static double overall(const struct fsck *f, double in_pass)
{
	return f->prog_base + (1 - f->prog_base) * f->prog_share * in_pass;
}

static void draw(struct fsck *f, double in_pass)
{
	progress_draw(&f->prog, overall(f, in_pass), "Pass %d: %s", f->pass, f->pass_name);
}

void fsck_tick(struct fsck *f, uint64_t n)
{
	f->prog_done += n;
	if (!f->prog.on || (f->prog_done & 255) >= n)
		return; /* look at the clock every 256 records at most */
	if (progress_due(&f->prog))
		draw(f, f->prog_done < f->prog_total
				? (double)f->prog_done / (double)f->prog_total : 1);
}

void fsck_pass_end(struct fsck *f)
{
	/* a pass shorter than a redraw still shows the bar reaching its end,
	 * and the last one shows 100% */
	draw(f, 1);
	f->prog_base = overall(f, 1);
	fsck_progress_clear(f);
}
