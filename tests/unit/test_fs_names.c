/*
 * test_fs_names.c - the daemon's cores that change and list a directory's
 * names (link, unlink, rmdir, rename, readdir and readdirplus) on a
 * temporary image, without a mount (fsfix.h): errno, link counts, orphans,
 * what a listing gives and where it resumes, also with every name in four
 * hash buckets (collision lists walked). Every test leaves the kernel's
 * lookup references balanced.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "fsfix.h"
#include "kv_int.h"
#include "testutil.h"

#define ROOT KV_ROOT_INO

/* -------------------------------------------------------------- link -- */

static void link_counts_and_errors(void **state)
{
	struct stat st, before;
	uint64_t f, d;

	(void)state;
	f = fsfix_mk(ROOT, "f", S_IFREG | 0644);
	d = fsfix_mk(ROOT, "d", S_IFDIR | 0755);
	before = fsfix_attr(f);
	assert_int_equal(fs_do_link(f, d, "g", &st), 0);
	fs_do_forget(f, 1);
	assert_int_equal(st.st_ino, f);
	assert_int_equal(st.st_nlink, 2);
	assert_true(fsfix_ns(st.st_ctim) > fsfix_ns(before.st_ctim));
	assert_int_equal(fsfix_ns(st.st_mtim), fsfix_ns(before.st_mtim));
	assert_int_equal(fsfix_attr(d).st_size, 1);
	assert_int_equal(fsfix_ns(fsfix_attr(d).st_mtim), fsfix_ns(st.st_ctim));
	assert_int_equal(fsfix_lookup(d, "g"), (int64_t)f);
	assert_int_equal(fs_do_link(d, ROOT, "dl", &st), -EPERM);
	assert_int_equal(fs_do_link(f, ROOT, "d", &st), -EEXIST);
	assert_int_equal(fs_do_link(f, f, "x", &st), -ENOTDIR);
	assert_int_equal(fs_do_link(999999, ROOT, "x", &st), -ENOENT);
	/* the last name gone while the kernel holds it: no new name */
	assert_int_equal(fs_do_lookup(ROOT, "f", &st), 0);
	assert_int_equal(fs_do_unlink(ROOT, "f"), 0);
	assert_int_equal(fs_do_unlink(d, "g"), 0);
	assert_int_equal(fs_do_link(f, ROOT, "back", &st), -ENOENT);
	fs_do_forget(f, 1);
	assert_false(fsfix_stored(f));
}

/* ---------------------------------------------------- unlink, rmdir -- */

static void unlink_removes_and_purges(void **state)
{
	struct stat st;
	uint64_t f, d;

	(void)state;
	f = fsfix_mk(ROOT, "f", S_IFREG | 0644);
	d = fsfix_mk(ROOT, "d", S_IFDIR | 0755);
	assert_int_equal(fs_do_link(f, ROOT, "g", &st), 0);
	fs_do_forget(f, 1);
	assert_int_equal(fs_do_unlink(ROOT, "f"), 0);
	assert_int_equal(fsfix_lookup(ROOT, "f"), -ENOENT);
	assert_int_equal(fsfix_attr(f).st_nlink, 1);
	assert_int_equal(fsfix_attr(ROOT).st_size, 2);
	assert_int_equal(fs_do_unlink(ROOT, "g"), 0);
	assert_false(fsfix_stored(f));
	assert_int_equal(fs_do_unlink(ROOT, "g"), -ENOENT);
	assert_int_equal(fs_do_unlink(ROOT, "d"), -EISDIR);
	assert_int_equal(fs_do_unlink(d, "x"), -ENOENT);
	assert_int_equal(fs_do_unlink(f, "x"), -ENOENT); /* f is gone */
	assert_int_equal(fsfix_attr(ROOT).st_size, 1);
}

/* Unlinked while the kernel holds it: an orphan that reads on, freed by the
 * last forget. */
static void unlink_referenced_leaves_orphan(void **state)
{
	struct stat st;
	uint64_t f, orphan;
	kv_txn *t;

	(void)state;
	fsfix_mk(ROOT, "f", S_IFREG | 0644);
	assert_int_equal(fs_do_lookup(ROOT, "f", &st), 0);
	f = st.st_ino;
	assert_int_equal(fs_do_lookup(ROOT, "f", &st), 0); /* two references */
	assert_int_equal(fs_do_unlink(ROOT, "f"), 0);
	assert_true(fsfix_stored(f));
	assert_int_equal(fsfix_attr(f).st_nlink, 0);
	assert_int_equal(kv_read_begin(fs.env, &t), 0);
	assert_int_equal(kv_orphan_next(t, 0, &orphan), 0);
	kv_read_end(t);
	assert_int_equal(orphan, f);
	fs_do_forget(f, 1);
	assert_true(fsfix_stored(f));
	fs_do_forget(f, 1);
	assert_false(fsfix_stored(f));
	assert_int_equal(fs_purge_orphans(), 0);
}

static void rmdir_rules(void **state)
{
	char name[KV_NAME_MAX + 2];
	uint64_t d, e;

	(void)state;
	d = fsfix_mk(ROOT, "d", S_IFDIR | 0755);
	e = fsfix_mk(d, "e", S_IFDIR | 0755);
	fsfix_mk(ROOT, "f", S_IFREG | 0644);
	assert_int_equal(fsfix_attr(ROOT).st_nlink, 3);
	assert_int_equal(fs_do_rmdir(ROOT, "d"), -ENOTEMPTY);
	assert_int_equal(fs_do_rmdir(ROOT, "f"), -ENOTDIR);
	assert_int_equal(fs_do_rmdir(ROOT, "none"), -ENOENT);
	assert_int_equal(fs_do_rmdir(ROOT, fsfix_long_name(name, KV_NAME_MAX + 1)), -ENAMETOOLONG);
	assert_int_equal(fs_do_rmdir(d, "e"), 0);
	assert_false(fsfix_stored(e));
	assert_int_equal(fsfix_attr(d).st_nlink, 2);
	assert_int_equal(fsfix_attr(d).st_size, 0);
	assert_int_equal(fs_do_rmdir(ROOT, "d"), 0);
	assert_false(fsfix_stored(d));
	assert_int_equal(fsfix_attr(ROOT).st_nlink, 2);
	assert_int_equal(fsfix_attr(ROOT).st_size, 1);
}

/* ------------------------------------------------------------ rename -- */

/* The ".." a listing of dir gives. */
static int dotdot_of(void *arg, const struct fs_dirent *d)
{
	if (strcmp(d->name, "..") == 0)
		*(uint64_t *)arg = d->ino;
	return 0;
}

static uint64_t dotdot(uint64_t dir)
{
	uint64_t ino = 0;

	assert_int_equal(fs_do_readdir(dir, 0, 0, dotdot_of, &ino), 0);
	return ino;
}

static void rename_moves_names(void **state)
{
	struct stat before, st;
	uint64_t a, b, f, s;

	(void)state;
	a = fsfix_mk(ROOT, "a", S_IFDIR | 0755);
	b = fsfix_mk(ROOT, "b", S_IFDIR | 0755);
	f = fsfix_mk(a, "f", S_IFREG | 0644);
	s = fsfix_mk(a, "s", S_IFDIR | 0755);
	before = fsfix_attr(f);
	assert_int_equal(fs_do_rename(a, "f", a, "g", 0), 0);
	assert_int_equal(fsfix_lookup(a, "f"), -ENOENT);
	assert_int_equal(fsfix_lookup(a, "g"), (int64_t)f);
	assert_int_equal(fsfix_attr(a).st_size, 2);
	assert_true(fsfix_ns(fsfix_attr(f).st_ctim) > fsfix_ns(before.st_ctim));
	assert_int_equal(fs_do_rename(a, "g", b, "f", 0), 0);
	assert_int_equal(fsfix_attr(a).st_size, 1);
	assert_int_equal(fsfix_attr(b).st_size, 1);
	assert_int_equal(fsfix_ns(fsfix_attr(a).st_mtim), fsfix_ns(fsfix_attr(f).st_ctim));
	assert_int_equal(fsfix_ns(fsfix_attr(b).st_mtim), fsfix_ns(fsfix_attr(f).st_ctim));
	/* a directory changes parents: the link counts and its ".." follow */
	assert_int_equal(fsfix_attr(a).st_nlink, 3);
	assert_int_equal(dotdot(s), a);
	assert_int_equal(fs_do_rename(a, "s", b, "s", 0), 0);
	assert_int_equal(fsfix_attr(a).st_nlink, 2);
	assert_int_equal(fsfix_attr(b).st_nlink, 3);
	assert_int_equal(dotdot(s), b);
	assert_int_equal(fs_do_rename(a, "none", b, "x", 0), -ENOENT);
	assert_int_equal(fs_do_rename(999999, "x", b, "x", 0), -ENOENT);
	assert_int_equal(fs_do_rename(f, "x", b, "x", 0), -ENOTDIR);
	st = fsfix_attr(b);
	assert_int_equal(st.st_size, 2);
}

static void rename_over_targets(void **state)
{
	struct stat st;
	uint64_t f, g, d, e, full;

	(void)state;
	f = fsfix_mk(ROOT, "f", S_IFREG | 0644);
	g = fsfix_mk(ROOT, "g", S_IFREG | 0644);
	d = fsfix_mk(ROOT, "d", S_IFDIR | 0755);
	e = fsfix_mk(ROOT, "e", S_IFDIR | 0755);
	full = fsfix_mk(ROOT, "full", S_IFDIR | 0755);
	fsfix_mk(full, "x", S_IFREG | 0644);
	assert_int_equal(fs_do_rename(ROOT, "f", ROOT, "d", 0), -EISDIR);
	assert_int_equal(fs_do_rename(ROOT, "d", ROOT, "f", 0), -ENOTDIR);
	assert_int_equal(fs_do_rename(ROOT, "d", ROOT, "full", 0), -ENOTEMPTY);
	/* over a file: the target's inode goes with its last name */
	assert_int_equal(fs_do_rename(ROOT, "f", ROOT, "g", 0), 0);
	assert_int_equal(fsfix_lookup(ROOT, "g"), (int64_t)f);
	assert_false(fsfix_stored(g));
	/* over an empty directory */
	assert_int_equal(fsfix_attr(ROOT).st_nlink, 5);
	assert_int_equal(fs_do_rename(ROOT, "d", ROOT, "e", 0), 0);
	assert_false(fsfix_stored(e));
	assert_int_equal(fsfix_lookup(ROOT, "e"), (int64_t)d);
	st = fsfix_attr(ROOT);
	assert_int_equal(st.st_nlink, 4);
	assert_int_equal(st.st_size, 3); /* g, e, full */
	/* the same inode under both names: nothing to do */
	assert_int_equal(fs_do_link(f, ROOT, "h", &st), 0);
	fs_do_forget(f, 1);
	assert_int_equal(fs_do_rename(ROOT, "g", ROOT, "h", 0), 0);
	assert_int_equal(fsfix_lookup(ROOT, "g"), (int64_t)f);
	assert_int_equal(fsfix_attr(f).st_nlink, 2);
}

static void rename_into_itself(void **state)
{
	uint64_t a, b;

	(void)state;
	a = fsfix_mk(ROOT, "a", S_IFDIR | 0755);
	b = fsfix_mk(a, "b", S_IFDIR | 0755);
	fsfix_mk(b, "c", S_IFDIR | 0755);
	assert_int_equal(fs_do_rename(ROOT, "a", b, "a", 0), -EINVAL);
	assert_int_equal(fs_do_rename(ROOT, "a", a, "x", 0), -EINVAL);
	assert_int_equal(fs_do_rename(a, "b", b, "x", 0), -EINVAL);
	assert_int_equal(fs_do_rename(ROOT, "a", b, "c", RENAME_EXCHANGE), -EINVAL);
	assert_int_equal(fs_do_rename(b, "c", ROOT, "a", RENAME_EXCHANGE), -EINVAL);
	assert_int_equal(fsfix_lookup(ROOT, "a"), (int64_t)a);
	assert_int_equal(dotdot(b), a);
}

static void rename_flags(void **state)
{
	char name[KV_NAME_MAX + 2];
	uint64_t f, g, d, e;

	(void)state;
	f = fsfix_mk(ROOT, "f", S_IFREG | 0644);
	g = fsfix_mk(ROOT, "g", S_IFREG | 0644);
	d = fsfix_mk(ROOT, "d", S_IFDIR | 0755);
	e = fsfix_mk(d, "e", S_IFDIR | 0755);
	assert_int_equal(fs_do_rename(ROOT, "f", ROOT, "g", RENAME_NOREPLACE), -EEXIST);
	assert_int_equal(fs_do_rename(ROOT, "f", ROOT, "h", RENAME_NOREPLACE), 0);
	assert_int_equal(fs_do_rename(ROOT, "h", ROOT, "x", RENAME_EXCHANGE), -ENOENT);
	assert_int_equal(fs_do_rename(ROOT, "h", ROOT, "g", RENAME_NOREPLACE | RENAME_EXCHANGE),
			 -EINVAL);
	assert_int_equal(fs_do_rename(ROOT, "h", ROOT, "g", 1u << 7), -EINVAL);
	assert_int_equal(fs_do_rename(ROOT, fsfix_long_name(name, KV_NAME_MAX + 1), ROOT, "g", 0),
			 -ENAMETOOLONG);
	assert_int_equal(fs_do_rename(ROOT, "h", ROOT, fsfix_long_name(name, KV_NAME_MAX + 1), 0),
			 -ENAMETOOLONG);
	/* exchange a file and a directory across parents: both stay, swapped */
	assert_int_equal(fs_do_rename(ROOT, "h", d, "e", RENAME_EXCHANGE), 0);
	assert_int_equal(fsfix_lookup(ROOT, "h"), (int64_t)e);
	assert_int_equal(fsfix_lookup(d, "e"), (int64_t)f);
	assert_int_equal(dotdot(e), ROOT);
	assert_int_equal(fsfix_attr(ROOT).st_nlink, 4); /* d and e */
	assert_int_equal(fsfix_attr(d).st_nlink, 2);
	assert_int_equal(fsfix_attr(ROOT).st_size, 3);
	assert_int_equal(fsfix_attr(d).st_size, 1);
	assert_int_equal(fsfix_ns(fsfix_attr(e).st_ctim), fsfix_ns(fsfix_attr(f).st_ctim));
	assert_true(fsfix_stored(g));
}

/* ----------------------------------------------------------- readdir -- */

#define LIST_MAX 512

/* Entries of a listing, with a room limit per call. */
struct listing {
	int room; /* entries the next call takes; < 0: no limit */
	int n;
	char name[LIST_MAX][KV_NAME_MAX + 1];
	uint64_t ino[LIST_MAX];
	uint32_t type[LIST_MAX];
	struct stat attr[LIST_MAX];
	int has_attr[LIST_MAX];
	uint64_t nexts[LIST_MAX];
	uint64_t next; /* the last taken entry's */
};

static int take(void *arg, const struct fs_dirent *d)
{
	struct listing *l = arg;

	if (l->room == 0 || l->n == LIST_MAX)
		return 1;
	if (l->room > 0)
		l->room--;
	strcpy(l->name[l->n], d->name);
	l->ino[l->n] = d->ino;
	l->type[l->n] = d->type;
	l->has_attr[l->n] = d->attr != NULL;
	if (d->attr)
		l->attr[l->n] = *d->attr;
	l->nexts[l->n] = d->next;
	l->n++;
	l->next = d->next;
	return 0;
}

static int find(const struct listing *l, const char *name)
{
	for (int i = 0; i < l->n; i++)
		if (strcmp(l->name[i], name) == 0)
			return i;
	return -1;
}

static void readdir_lists_names_and_types(void **state)
{
	struct listing *l = calloc(1, sizeof(*l));
	uint64_t d, f;
	int i;

	(void)state;
	d = fsfix_mk(ROOT, "d", S_IFDIR | 0755);
	f = fsfix_mk(d, "f", S_IFREG | 0644);
	fsfix_mk(d, "sub", S_IFDIR | 0755);
	fsfix_mk(d, "p", S_IFIFO | 0644);
	l->room = -1;
	assert_int_equal(fs_do_readdir(d, 0, 0, take, l), 0);
	assert_int_equal(l->n, 5);
	assert_string_equal(l->name[0], ".");
	assert_int_equal(l->ino[0], d);
	assert_string_equal(l->name[1], "..");
	assert_int_equal(l->ino[1], ROOT);
	i = find(l, "f");
	assert_true(i >= 2);
	assert_int_equal(l->ino[i], f);
	assert_int_equal(l->type[i], S_IFREG);
	assert_false(l->has_attr[i]);
	assert_int_equal(l->type[find(l, "sub")], S_IFDIR);
	assert_int_equal(l->type[find(l, "p")], S_IFIFO);
	/* resumed after each entry, one entry a call: the same listing */
	for (int k = 0; k < l->n; k++) {
		struct listing *one = calloc(1, sizeof(*one));

		one->room = 1;
		assert_int_equal(fs_do_readdir(d, k ? l->nexts[k - 1] : 0, 0, take, one), 0);
		assert_int_equal(one->n, 1);
		assert_string_equal(one->name[0], l->name[k]);
		free(one);
	}
	/* from past the end: nothing more */
	l->n = 0;
	assert_int_equal(fs_do_readdir(d, l->next, 0, take, l), 0);
	assert_int_equal(l->n, 0);
	assert_int_equal(fs_do_readdir(f, 0, 0, take, l), -ENOTDIR);
	assert_int_equal(fs_do_readdir(999999, 0, 0, take, l), -ENOENT);
	free(l);
}

static void readdirplus_gives_attributes_and_references(void **state)
{
	struct listing *l = calloc(1, sizeof(*l));
	struct stat st;
	uint64_t d;

	(void)state;
	d = fsfix_mk(ROOT, "d", S_IFDIR | 0755);
	fsfix_mk(d, "f", S_IFREG | 0600);
	fsfix_mk(d, "e", S_IFDIR | 0700);
	l->room = -1;
	assert_int_equal(fs_do_readdir(d, 0, 1, take, l), 0);
	assert_int_equal(l->n, 4);
	assert_false(l->has_attr[0]); /* "." and ".." take no reference */
	assert_false(l->has_attr[1]);
	assert_int_equal(fs_itable_count(), 2);
	for (int i = 2; i < 4; i++) {
		assert_true(l->has_attr[i]);
		st = fsfix_attr(l->ino[i]);
		assert_int_equal(l->attr[i].st_ino, l->ino[i]);
		assert_int_equal(l->attr[i].st_mode, st.st_mode);
		assert_int_equal(l->attr[i].st_nlink, st.st_nlink);
		assert_int_equal(fsfix_ns(l->attr[i].st_mtim), fsfix_ns(st.st_mtim));
		fs_do_forget(l->ino[i], 1);
	}
	/* a reply with room for one entry: one reference */
	memset(l, 0, sizeof(*l));
	l->room = 1;
	assert_int_equal(fs_do_readdir(d, 2, 1, take, l), 0);
	assert_int_equal(l->n, 1);
	assert_int_equal(fs_itable_count(), 1);
	fs_do_forget(l->ino[0], 1);
	free(l);
}

/* Listed a few entries per call while names come and go: every name present
 * throughout is listed exactly once, and a listing resumes from any cookie
 * it gave. */
static void readdir_cookies_survive_changes(void **state)
{
	struct listing *l = calloc(1, sizeof(*l));
	char name[32];
	uint64_t d, off = 0;
	int added = 0, rounds = 0;

	(void)state;
	d = fsfix_mk(ROOT, "d", S_IFDIR | 0755);
	for (int i = 0; i < 60; i++) {
		snprintf(name, sizeof(name), "old%d", i);
		fsfix_mk(d, name, S_IFREG | 0644);
	}
	for (;;) {
		int before = l->n;

		l->room = 7;
		assert_int_equal(fs_do_readdir(d, off, 0, take, l), 0);
		if (l->n == before)
			break;
		off = l->next;
		/* names added, and old ones removed, between two calls */
		for (int k = 0; k < 5; k++) {
			snprintf(name, sizeof(name), "new%d", added++);
			fsfix_mk(d, name, S_IFREG | 0644);
		}
		snprintf(name, sizeof(name), "old%d", 59 - rounds);
		if (find(l, name) < 0)
			assert_int_equal(fs_do_unlink(d, name), 0);
		rounds++;
	}
	for (int i = 0; i < 60; i++) {
		snprintf(name, sizeof(name), "old%d", i);
		if (fsfix_lookup(d, name) > 0)
			assert_true(find(l, name) >= 0);
	}
	for (int i = 0; i < l->n; i++)
		for (int j = i + 1; j < l->n; j++)
			assert_string_not_equal(l->name[i], l->name[j]);
	assert_true(rounds >= 9); /* 62 entries, 7 a call, and more coming */
	free(l);
}

static void readdir_no_room(void **state)
{
	struct listing *l = calloc(1, sizeof(*l));

	(void)state;
	fsfix_mk(ROOT, "f", S_IFREG | 0644);
	l->room = 0;
	assert_int_equal(fs_do_readdir(ROOT, 0, 1, take, l), 0);
	assert_int_equal(l->n, 0);
	assert_int_equal(fs_itable_count(), 0);
	free(l);
}
int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(f) cmocka_unit_test_setup_teardown(f, fsfix_setup_cached, fsfix_teardown)
		T(link_counts_and_errors),
		T(unlink_removes_and_purges),
		T(unlink_referenced_leaves_orphan),
		T(rmdir_rules),
		T(rename_moves_names),
		T(rename_over_targets),
		T(rename_into_itself),
		T(rename_flags),
		T(readdir_lists_names_and_types),
		cmocka_unit_test_setup_teardown(readdir_lists_names_and_types, fsfix_setup_collide,
						fsfix_teardown),
		T(readdirplus_gives_attributes_and_references),
		T(readdir_cookies_survive_changes),
		cmocka_unit_test_setup_teardown(readdir_cookies_survive_changes, fsfix_setup_collide,
						fsfix_teardown),
		T(readdir_no_room),
	};

	if (fs_itable_init())
		return 1;
	return cmocka_run_group_tests_name("fs_names", tests, NULL, NULL);
}
