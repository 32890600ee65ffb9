/*
 * testutil.c - the shared helpers of the kv/ unit tests (see testutil.h):
 * temporary images, a few file operations through the writer, file bytes,
 * ACL values.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <lmdb.h>

#include "lmdb_int.h"
#include "testutil.h"

/* ------------------------------------------------------------ images -- */

int tu_image_new(struct tu_image *im, const struct kv_mkfs_opts *o)
{
	static const struct kv_mkfs_opts defaults = {.root_mode = 0755};
	const char *tmp = getenv("TMPDIR");
	int rc;

	memset(im, 0, sizeof(*im));
	snprintf(im->dir, sizeof(im->dir), "%s/kvfs-test.XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(im->dir)) {
		rc = -errno;
		im->dir[0] = '\0';
		return rc;
	}
	tu_image_file(im, "image", im->path);
	rc = kv_mkfs(im->path, o ? o : &defaults, im->err, sizeof(im->err));
	if (rc)
		fprintf(stderr, "kv_mkfs: %s\n", im->err);
	return rc;
}

int tu_image_open(struct tu_image *im, const struct kv_open_opts *o)
{
	static const struct kv_open_opts defaults = {.durability = KV_DURABLE_NONE};

	im->err[0] = '\0';
	return kv_open(im->path, o ? o : &defaults, &im->env, im->err, sizeof(im->err));
}

void tu_image_close(struct tu_image *im)
{
	kv_close(im->env);
	im->env = NULL;
}

void tu_image_free(struct tu_image *im)
{
	char path[PATH_MAX];
	struct dirent *de;
	DIR *d;

	tu_image_close(im);
	if (!im->dir[0])
		return;
	d = opendir(im->dir);
	if (d) {
		while ((de = readdir(d)) != NULL)
			if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
				unlink(tu_image_file(im, de->d_name, path));
		closedir(d);
	}
	rmdir(im->dir);
	im->dir[0] = '\0';
}

char *tu_image_file(const struct tu_image *im, const char *name, char *buf)
{
	if (snprintf(buf, PATH_MAX, "%s/%s", im->dir, name) >= PATH_MAX)
		buf[0] = '\0'; /* too long: no such file */
	return buf;
}

int tu_aborts(struct tu_image *im, void (*fn)(kv_env *env), const char *expect)
{
	static const struct kv_open_opts o = {.durability = KV_DURABLE_NONE};
	char log[PATH_MAX], err[512];
	unsigned char *said;
	size_t len;
	int fd, status, found;
	pid_t pid;

	fd = open(tu_image_file(im, "abort.log", log), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
		  0600);
	if (fd < 0)
		return -errno;
	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		close(fd);
		return -errno;
	}
	if (pid == 0) {
		kv_env *e;

		signal(SIGABRT, SIG_DFL);
		alarm(20); /* a check missing may leave a deadlock instead */
		dup2(fd, STDERR_FILENO);
		/* an open of its own: no writer thread is inherited half-way */
		if (kv_open(im->path, &o, &e, err, sizeof(err)) != 0) {
			fprintf(stderr, "kv_open: %s\n", err);
			_exit(2);
		}
		fn(e);
		_exit(0);
	}
	close(fd);
	if (waitpid(pid, &status, 0) != pid)
		return -errno;
	said = tu_slurp(log, &len);
	found = said && memmem(said, len, expect, strlen(expect)) != NULL;
	if (!(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT && found) && said)
		fwrite(said, 1, len, stderr);
	free(said);
	return WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT && found;
}

int tu_setup(void **state)
{
	struct tu_image *im = calloc(1, sizeof(*im));

	if (!im)
		return -1;
	*state = im;
	if (tu_image_new(im, NULL) || tu_image_open(im, NULL)) {
		fprintf(stderr, "setup: %s\n", im->err);
		return -1;
	}
	return 0;
}

int tu_setup_closed(void **state)
{
	struct tu_image *im = calloc(1, sizeof(*im));

	*state = im;
	return im && tu_image_new(im, NULL) == 0 ? 0 : -1;
}

int tu_teardown(void **state)
{
	struct tu_image *im = *state;

	if (im)
		tu_image_free(im);
	free(im);
	*state = NULL;
	return 0;
}

/* ------------------------------------------------------------- files -- */

struct mkfile_arg {
	uint64_t dir;
	const char *name;
	uint32_t mode;
	uint64_t ino;
};

static int mkfile_apply(kv_txn *t, void *p)
{
	struct mkfile_arg *a = p;
	struct kv_inode in = {0};
	int rc;

	rc = kv_ino_alloc(t, &in.ino);
	if (rc)
		return rc;
	in.mode = a->mode;
	in.nlink = 1;
	in.parent = a->dir;
	in.mtime_ns = in.ctime_ns = in.atime_ns = in.btime_ns = 1;
	rc = kv_inode_put(t, &in);
	if (!rc)
		rc = kv_dirent_add(t, a->dir, a->name, strlen(a->name), in.ino,
		                   (uint8_t)((a->mode & S_IFMT) >> 12));
	if (!rc)
		a->ino = in.ino;
	return rc;
}

int tu_mkfile(kv_env *env, uint64_t dir, const char *name, uint32_t mode, uint64_t *ino)
{
	struct mkfile_arg a = {.dir = dir, .name = name, .mode = mode};
	int rc = kv_write(env, mkfile_apply, &a, 0);

	if (!rc)
		*ino = a.ino;
	return rc;
}

struct pwrite_arg {
	uint64_t ino, off;
	const void *buf;
	size_t len;
	const uint64_t *sums;
	size_t nsums;
	const struct kv_zblocks *z;
};

static int pwrite_apply(kv_txn *t, void *p)
{
	struct pwrite_arg *a = p;
	struct kv_inode in;
	int rc;

	rc = kv_inode_get(t, a->ino, &in);
	if (!rc)
		rc = kv_data_write_sums(t, &in, a->off, a->buf, a->len, a->sums, a->nsums, a->z);
	if (!rc)
		rc = kv_inode_put(t, &in);
	return rc;
}

int tu_pwrite(kv_env *env, uint64_t ino, uint64_t off, const void *buf, size_t len)
{
	struct pwrite_arg a = {.ino = ino, .off = off, .buf = buf, .len = len};

	return kv_write(env, pwrite_apply, &a, 0);
}

/* pwrite_apply past the room for ordinary changes as fs/file.c's
 * apply_write bounds it there: it may neither grow the file nor add a block
 * (a write over stored or unwritten blocks). */
static int owrite_apply(kv_txn *t, void *p)
{
	struct pwrite_arg *a = p;
	struct kv_inode in;
	uint64_t nblocks;
	int rc = kv_inode_get(t, a->ino, &in);

	if (rc)
		return rc;
	if (kv_txn_reserved(t) && a->off + a->len > in.size)
		return -ENOSPC;
	nblocks = in.nblocks;
	rc = kv_data_write(t, &in, a->off, a->buf, a->len);
	if (!rc && kv_txn_reserved(t) && in.nblocks != nblocks)
		return -ENOSPC;
	return rc ? rc : kv_inode_put(t, &in);
}

int tu_pwrite_daemon(kv_env *env, uint64_t ino, uint64_t off, const void *buf, size_t len)
{
	struct pwrite_arg a = {.ino = ino, .off = off, .buf = buf, .len = len};
	int rc = kv_write(env, owrite_apply, &a, 0);

	return rc == -ENOSPC ? kv_write(env, owrite_apply, &a, KV_OP_OVERWRITE) : rc;
}

int tu_pwrite_z(kv_env *env, uint64_t ino, uint64_t off, const void *buf, size_t len,
		int level)
{
	size_t max = len / kv_block_size(env) + 2;
	uint64_t *sums = malloc(max * sizeof(*sums));
	struct pwrite_arg a = {.ino = ino, .off = off, .buf = buf, .len = len, .sums = sums};
	struct kv_zblocks z;
	int rc;

	if (!sums)
		return -ENOMEM;
	a.nsums = kv_data_sums(env, ino, off, buf, len, sums, max);
	if (level && kv_data_compress(env, ino, off, buf, len, level, sums, a.nsums, &z))
		a.z = &z;
	rc = kv_write(env, pwrite_apply, &a, 0);
	free(sums);
	return rc;
}

int tu_pwrite_sums(kv_env *env, uint64_t ino, uint64_t off, const void *buf, size_t len)
{
	return tu_pwrite_z(env, ino, off, buf, len, 0);
}

struct share_arg {
	uint64_t dst, didx, src, sidx, n;
};

static int share_apply(kv_txn *t, void *p)
{
	struct share_arg *a = p;
	struct kv_inode d, s;
	int rc = kv_inode_get(t, a->dst, &d);

	if (!rc)
		rc = kv_inode_get(t, a->src, &s);
	if (!rc)
		rc = kv_data_share(t, &d, a->didx, &s, a->sidx, a->n);
	return rc ? rc : kv_inode_put(t, &d); /* s: stored by the share if it changed */
}

int tu_share(kv_env *env, uint64_t dst, uint64_t didx, uint64_t src, uint64_t sidx,
	     uint64_t n)
{
	struct share_arg a = {dst, didx, src, sidx, n};

	return kv_write(env, share_apply, &a, 0);
}

ssize_t tu_pread(kv_env *env, uint64_t ino, uint64_t off, size_t len, void *buf)
{
	/* at most a data and a zero segment per block, plus zero runs split
	 * at KV_BLOCK_SIZE_MAX */
	int iovmax = (int)(2 * (len / kv_block_size(env) + 2) + len / KV_BLOCK_SIZE_MAX + 2);
	struct iovec *iov = calloc((size_t)iovmax, sizeof(*iov));
	struct kv_inode in;
	unsigned char *dst = buf;
	kv_txn *t;
	ssize_t n;
	int cnt;

	if (!iov)
		return -ENOMEM;
	n = kv_read_begin(env, &t);
	if (n)
		goto free_iov;
	n = kv_inode_get(t, ino, &in);
	if (!n)
		n = kv_data_read(t, ino, in.size, off, len, iov, iovmax, &cnt);
	for (int i = 0; n > 0 && i < cnt; i++) {
		memcpy(dst, iov[i].iov_base, iov[i].iov_len);
		dst += iov[i].iov_len;
	}
	if (n > 0 && dst - (unsigned char *)buf != n)
		n = -EPROTO; /* the iovecs do not add up to the count */
	kv_read_end(t);
free_iov:
	free(iov);
	return n;
}

int tu_getattr(kv_env *env, uint64_t ino, struct kv_inode *out)
{
	kv_txn *t;
	int rc;

	rc = kv_read_begin(env, &t);
	if (rc)
		return rc;
	rc = kv_inode_get(t, ino, out);
	out->inline_data = NULL;
	kv_read_end(t);
	return rc;
}

/* --------------------------------------------------------- raw LMDB -- */

int tu_raw_edit(const char *path, const char *db, const void *key, size_t klen, tu_edit_fn fn,
                void *arg)
{
	MDB_env *env;
	MDB_txn *txn;
	MDB_dbi dbi;
	MDB_val k = {klen, (void *)key}, v;
	unsigned char *copy;
	int rc;

	rc = mdb_env_create(&env);
	if (rc)
		return -rc;
	rc = mdb_env_set_maxdbs(env, 8);
	if (!rc)
		rc = mdb_env_set_mapsize(env, 256 << 20);
	if (!rc)
		rc = mdb_env_open(env, path, MDB_NOSUBDIR, 0644);
	if (rc)
		goto env_close;
	rc = mdb_txn_begin(env, NULL, 0, &txn);
	if (rc)
		goto env_close;
	rc = mdb_dbi_open(txn, db, 0, &dbi);
	if (!rc)
		rc = mdb_get(txn, dbi, &k, &v);
	if (rc)
		goto txn_abort;
	copy = malloc(v.mv_size ? v.mv_size : 1);
	if (!copy) {
		rc = ENOMEM;
		goto txn_abort;
	}
	memcpy(copy, v.mv_data, v.mv_size);
	fn(copy, v.mv_size, arg);
	v.mv_data = copy;
	rc = mdb_put(txn, dbi, &k, &v, 0);
	free(copy);
	if (rc)
		goto txn_abort;
	rc = mdb_txn_commit(txn);
	goto env_close;

txn_abort:
	mdb_txn_abort(txn);
env_close:
	mdb_env_close(env);
	return rc > 0 ? -rc : rc;
}

/* ------------------------------------------------------------- bytes -- */

unsigned char *tu_slurp(const char *path, size_t *len)
{
	unsigned char *buf = NULL;
	struct stat st;
	ssize_t n;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	if (fstat(fd, &st) != 0)
		goto close_fd;
	buf = malloc((size_t)st.st_size + 1);
	if (!buf)
		goto close_fd;
	n = pread(fd, buf, (size_t)st.st_size + 1, 0);
	if (n != st.st_size) {
		free(buf);
		buf = NULL;
		goto close_fd;
	}
	*len = (size_t)n;
close_fd:
	close(fd);
	return buf;
}

int tu_spit(const char *path, const void *buf, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644), rc = 0;

	if (fd < 0)
		return -errno;
	if (len && write(fd, buf, len) != (ssize_t)len)
		rc = -EIO;
	if (close(fd) != 0 && !rc)
		rc = -EIO;
	return rc;
}

uint64_t tu_rand(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 0x2545F4914F6CDD1DULL;
}

void tu_fill(void *buf, size_t len, uint64_t seed)
{
	unsigned char *p = buf;
	uint64_t s = seed | 1;

	for (size_t i = 0; i < len; i++)
		p[i] = (unsigned char)(tu_rand(&s) >> 56);
}

/* -------------------------------------------------------------- ACLs -- */

size_t tu_acl_of(const char *text, unsigned char *buf)
{
	size_t len = 4;
	char *copy = strdup(text), *save = NULL;

	kv_put_le32(buf, 2);
	for (char *e = copy ? strtok_r(copy, ",", &save) : NULL; e;
	     e = strtok_r(NULL, ",", &save)) {
		char *id = strchr(e, ':') + 1, *perm = strchr(id, ':') + 1;
		unsigned tag = 0, p = 0;
		uint32_t n = *id == ':' ? KV_ACL_UNDEFINED_ID : (uint32_t)strtoul(id, NULL, 10);

		switch (e[0]) {
		case 'u': tag = n == KV_ACL_UNDEFINED_ID ? KV_ACL_USER_OBJ : KV_ACL_USER; break;
		case 'g': tag = n == KV_ACL_UNDEFINED_ID ? KV_ACL_GROUP_OBJ : KV_ACL_GROUP; break;
		case 'm': tag = KV_ACL_MASK; break;
		case 'o': tag = KV_ACL_OTHER; break;
		case 'x': tag = 0x40; break; /* no such tag */
		}
		for (; *perm; perm++)
			p |= *perm == 'r' ? 4 : *perm == 'w' ? 2 : *perm == 'x' ? 1 :
			     *perm == '8' ? 8 : 0;
		buf[len] = (unsigned char)tag;
		buf[len + 1] = 0;
		buf[len + 2] = (unsigned char)p;
		buf[len + 3] = 0;
		kv_put_le32(buf + len + 4, n);
		len += 8;
	}
	free(copy);
	return len;
}
