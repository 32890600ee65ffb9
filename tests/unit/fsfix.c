/*
 * fsfix.c - the cores' fixture (fsfix.h).
 */
#include <string.h>

#include "fsfix.h"
#include "testutil.h"

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

int fsfix_teardown(void **state)
{
	uint64_t refs = fs_itable_count();

	tu_teardown(state);
	memset(&fs, 0, sizeof(fs));
	return refs ? -1 : 0;
}
