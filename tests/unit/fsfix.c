/*
 * fsfix.c - the cores' fixture and shared helpers (fsfix.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "fsfix.h"
#include "kv_int.h"
#include "testutil.h"

static const struct fs_cred root = {.uid = 0, .gid = 0};

int fsfix_setup(void **state)
{
	struct tu_image *im;

	if (tu_setup(state))
		return -1;
	im = *state;
	memset(&fs, 0, sizeof(fs));
	fs.env = im->env;
	fs.block_size = kv_block_size(im->env);
	fs.cfg.durability = KV_DURABLE_NONE;
	fs.cfg.atime = FS_ATIME_NOATIME;
	fs.cfg.timeout = 1;
	fs.cfg.max_write = 1 << 20;
	fs.cfg.threads = 1;
	fs.cfg.acl = 1;
	return 0;
}

int fsfix_setup_cached(void **state)
{
	if (fsfix_setup(state))
		return -1;
	fs.cfg.cache_dir = 1;
	fs.cfg.readdirplus = 1;
	return 0;
}

static uint64_t hash_four(const char *name, size_t len)
{
	return kv_name_hash_xxh3(name, len) & 3;
}

int fsfix_setup_collide(void **state)
{
	kv_name_hash = hash_four;
	return fsfix_setup_cached(state);
}

int fsfix_teardown(void **state)
{
	uint64_t refs = fs_itable_count();

	tu_teardown(state);
	kv_name_hash = kv_name_hash_xxh3;
	memset(&fs, 0, sizeof(fs));
	if (refs) {
		fprintf(stderr, "teardown: %llu inodes still referenced\n",
			(unsigned long long)refs);
		return -1;
	}
	return 0;
}

uint64_t fsfix_mk(uint64_t dir, const char *name, uint32_t mode)
{
	struct stat st;
	int rc = S_ISDIR(mode) ? fs_do_mkdir(dir, name, mode & 07777, &root, &st)
			       : fs_do_mknod(dir, name, mode, 0, &root, &st);

	assert_int_equal(rc, 0);
	fs_do_forget(st.st_ino, 1);
	return st.st_ino;
}

struct stat fsfix_attr(uint64_t ino)
{
	struct stat st;

	assert_int_equal(fs_do_getattr(ino, 0, &st), 0);
	return st;
}

int64_t fsfix_lookup(uint64_t dir, const char *name)
{
	struct stat st;
	int rc = fs_do_lookup(dir, name, &st);

	if (rc)
		return rc;
	fs_do_forget(st.st_ino, 1);
	return (int64_t)st.st_ino;
}

int fsfix_stored(uint64_t ino)
{
	struct kv_inode in;

	kv_settle(fs.env); /* a purge rides in the next batch */
	return tu_getattr(fs.env, ino, &in) == 0;
}

int64_t fsfix_ns(struct timespec ts)
{
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

char *fsfix_long_name(char *buf, size_t len)
{
	memset(buf, 'n', len);
	buf[len] = '\0';
	return buf;
}
