/*
 * file.c - file contents: open, read, write, fsync, fallocate, lseek.
 *
 * Invariants:
 *  1. read replies straight from the store's values (an image's memory
 *     map; a database's results, kept by its connection): the iovecs that
 *     kv_data_read gives are written to /dev/fuse behind a reply header
 *     while the read transaction still pins them, then the transaction is
 *     reset. No copy, no allocation (a read of more segments than writev
 *     takes falls back to one copy into a per-thread buffer). Over
 *     io_uring they are copied once into the ring entry's buffer.
 *  2. write replies once the store told it (kv_write returned): without a
 *     window (durability=full, window=0, an image near full, a shared
 *     store's mount that is not alone) after the commit that holds the
 *     data; with one, once the data is applied in it (kv/window.c), and the
 *     window commits within window ms and before any fsync returns.
 *  3. With the writeback cache the kernel holds data kvfs has not seen yet:
 *     SEEK_DATA/SEEK_HOLE are left to the kernel, and a change of a file's
 *     block count drops the attributes the kernel caches.
 *  4. With the writeback cache, a file's size never runs ahead of its data:
 *     once the kernel's write back of its cache (a WRITE with
 *     FUSE_WRITE_CACHE; an O_DIRECT write(2) is answered to its caller)
 *     failed for want of room (the file is marked short,
 *     itable.c), what was stored past it since the last fsync is cut off
 *     (write_back_short), and a write past its stored end is refused, until
 *     fsync, a truncate or the kernel forgetting it; its next write(2)
 *     fails with ENOSPC, and every one while the image has no room
 *     (fs_op_getattr).
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/fuse.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "fs.h"

#define READ_IOV_MAX 4096
#define WRITEV_MAX 1024 /* IOV_MAX */

void fs_reply_open(fuse_req_t req, struct fuse_file_info *fi, int cache, int dir)
{
	/* on a shared store a directory's fsync needs its open's sample as a
	 * file's does (fs_op_fsync); files are opened there anyway (no
	 * keep_cache), and an OPENDIR costs no round trip to the server */
	if (fs.cfg.skip_open && cache && !(dir && kv_is_shared(fs.env))) {
		/* no OPEN/RELEASE (OPENDIR/RELEASEDIR) round trips from now on;
		 * the kernel then keeps the page cache (listings) as with
		 * keep_cache (cache_readdir) */
		fuse_reply_err(req, ENOSYS);
		return;
	}
	fi->fh = kv_lost_sample(fs.env, (fi->flags & O_ACCMODE) != O_RDONLY);
	fi->keep_cache = cache;
	if (dir)
		fi->cache_readdir = cache;
	fuse_reply_open(req, fi);
}

void fs_op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	fs_reply_open(req, fi, fs.cfg.keep_cache, 0);
}

void fs_op_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	int rc;

	(void)ino;
	if (kv_is_shared(fs.env) && fs.cfg.window_ms && kv_is_alone(fs.env)) {
		/* no other mount can open the store before the window is
		 * committed (kv/window.c invariant 7): only the loss to report */
		fuse_reply_err(req, -kv_lost_check(fs.env, fi->fh, 0));
		return;
	}
	if (kv_is_shared(fs.env) && fs.cfg.window_ms) {
		/* close-to-open across mounts, as NFS: when close(2) returns,
		 * what was written is committed and the other mounts told (the
		 * window commits now; its times too); and, as NFS's close, it
		 * fails when the store lost changes acknowledged while the file
		 * was open (its server went away: kv_lost_check). Without a
		 * window (a shared store's default) nothing waits for a close:
		 * each change, times through an open file too
		 * (setattr_lazily), was committed before it was answered, and
		 * only a window's commit can lose what was acknowledged. */
		fs_pending_settle(0);
		rc = fs_settle();
		fuse_reply_err(req, -(rc ? rc : kv_lost_check(fs.env, fi->fh, 0)));
		return;
	}
	/* Nothing to do: every write was committed before it was answered (or
	 * applied in the window, which commits by itself; on a shared store a
	 * window of a mount alone, alone_window_ms), and the kernel
	 * (since Linux 5.14) writes back its dirty pages and their times, and
	 * reports their errors, on close before it would send FLUSH. ENOSYS
	 * makes it stop sending FLUSH: one round trip less per close (bench:
	 * small-file create and read; on a shared store, bench/pg_two.sh). */
	fuse_reply_err(req, ENOSYS);
}

/* Also RELEASEDIR: nothing to free per open file or directory (fh is a
 * number, kv_lost_sample's). */
void fs_op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	(void)fi;
	fuse_reply_err(req, 0);
}

/* Also FSYNCDIR: both make everything before them durable. */
void fs_op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	int rc;

	(void)datasync;
	/* the kernel has written back what it had: a failure is reported now */
	fs_itable_settled(ino);
	/* every write before this was committed, or applied in the window
	 * that fs_sync commits first; the times the kernel wrote back (of any
	 * file) may still be queued */
	fs_pending_settle(0);
	rc = fs_sync();
	/* a shared store that lost acknowledged changes of this file, or
	 * while it was open: they are not durable, whatever this sync did */
	fuse_reply_err(req, -(rc ? rc : kv_lost_check(fs.env, fi->fh, ino)));
}

/* Reply with the iovecs as they are; cnt + 1 <= WRITEV_MAX. */
static void reply_iov(fuse_req_t req, struct iovec *iov, int cnt, size_t len)
{
	struct fuse_out_header oh = {
		.len = (uint32_t)(sizeof(oh) + len),
		.error = 0,
		.unique = fs_req_unique(),
	};

	assert(oh.unique != 0); /* the worker's request (session.c, 2) */
	iov[0].iov_base = &oh;
	iov[0].iov_len = sizeof(oh);
	/* a failure means the request was interrupted and is gone */
	if (writev(fuse_session_fd(fs.se), iov, cnt + 1) < 0 && errno != ENOENT)
		fs_log("read reply: %s", strerror(errno));
	fuse_reply_none(req);
}

/* The cnt segments at iov, one after another into buf. */
static void iov_gather(void *buf, const struct iovec *iov, int cnt)
{
	size_t pos = 0;

	for (int i = 0; i < cnt; i++) {
		memcpy((char *)buf + pos, iov[i].iov_base, iov[i].iov_len);
		pos += iov[i].iov_len;
	}
}

/* Too many segments for one writev: gather into a per-thread buffer. */
static void reply_copy(fuse_req_t req, const struct iovec *iov, int cnt, size_t len)
{
	static __thread char *buf;
	static __thread size_t cap;

	if (cap < len) {
		free(buf);
		buf = malloc(len);
		cap = buf ? len : 0;
		if (!buf) {
			fuse_reply_err(req, ENOMEM);
			return;
		}
	}
	iov_gather(buf, iov, cnt);
	fuse_reply_buf(req, buf, len);
}

#if FUSE_VERSION >= FUSE_MAKE_VERSION(3, 18)
/* Over io_uring a reply is not written to /dev/fuse: it goes into the ring
 * entry's buffer, which the kernel copies from as it would from a writev.
 * The segments are gathered there (the one copy either transport makes)
 * and the reply names that buffer, which libfuse then sends as it is; the
 * kernel asks no more than the buffer holds (max_read). 0 when req came
 * through /dev/fuse. */
static int reply_ring(fuse_req_t req, const struct iovec *iov, int cnt, size_t len)
{
	char *payload;
	size_t cap;

	if (!fuse_req_is_uring(req))
		return 0;
	/* never the /dev/fuse path: no worker's unique is this request's */
	if (fuse_req_get_payload(req, &payload, &cap, NULL) || len > cap) {
		fuse_reply_err(req, EIO);
		return 1;
	}
	iov_gather(payload, iov, cnt);
	fuse_reply_buf(req, payload, len);
	return 1;
}
#else
static int reply_ring(fuse_req_t req, const struct iovec *iov, int cnt, size_t len)
{
	(void)req;
	(void)iov;
	(void)cnt;
	(void)len;
	return 0;
}
#endif

/* Whether a READ is an access that updates atime. The kernel sends the flags
 * of the file it reads through: O_NOATIME asks for no update, and a read
 * through a write-only file is the kernel filling a page for a partial write
 * (writeback cache), not a read by anyone. */
static int user_read(const struct fuse_file_info *fi)
{
	return !(fi->flags & O_NOATIME) && (fi->flags & O_ACCMODE) != O_WRONLY;
}

/* No core: the reply leaves while the read transaction still pins the
 * iovecs into the map (invariant 1), so the work and the reply are one. */
void fs_op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		struct fuse_file_info *fi)
{
	static __thread struct iovec iov[READ_IOV_MAX + 1];
	const int64_t began = fs_now_ns();
	struct kv_inode in;
	ssize_t n = 0;
	kv_txn *t;
	int rc, cnt = 0;

	if (off < 0) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	if (fs_read_inode_for(req, ino, &t, &in))
		return;
	rc = S_ISDIR(in.mode) ? -EISDIR : S_ISREG(in.mode) ? 0 : -EINVAL;
	if (rc == 0)
		n = kv_data_read(t, ino, in.size, (uint64_t)off, size, iov + 1, READ_IOV_MAX, &cnt);
	if (n < 0)
		rc = (int)n;
	/* queued before the reply, so a utimensat the caller makes once the
	 * read returned is applied after this update, never overwritten by it */
	if (rc == 0 && user_read(fi))
		fs_maybe_touch_atime(&in, began);
	if (rc)
		fuse_reply_err(req, -rc);
	else if (reply_ring(req, iov + 1, cnt, (size_t)n))
		;
	else if (cnt + 1 <= WRITEV_MAX)
		reply_iov(req, iov, cnt, (size_t)n);
	else
		reply_copy(req, iov + 1, cnt, (size_t)n);
	fs_read_end(t);
}

/* Checksums computed before a write takes the writer's role: a write of
 * max_write (1 MiB at most) in blocks of the default 4072 bytes. */
#define WRITE_SUMS ((1u << 20) / 4072 + 2)

struct write_args {
	uint64_t ino;
	const char *buf;
	size_t size;
	uint64_t off;
	const uint64_t *sums;
	size_t nsums;
	const struct kv_zblocks *z; /* compressed blocks, or NULL */
	int write_back;         /* the kernel's write back of its cache, not a write(2) */
	int blocks_changed;     /* result */
	uint64_t appended_from; /* result: the size it grew from, or NO_APPEND */
};

#define NO_APPEND UINT64_MAX

/* The kernel refreshes st_blocks after a write only without the writeback
 * cache: with it, the attributes it caches would keep the block count of the
 * file's creation (du says 0) until they expire. Attributes only, so this
 * never waits on anything and is safe from inside a request. */
static void notify_blocks(uint64_t ino)
{
	if (fs.cfg.writeback)
		fs_notify_inval(ino, -1, 0);
}

/* Inode ino in txn when it is a regular file: -EISDIR for a directory,
 * not_reg for anything else. */
static int get_file(kv_txn *t, uint64_t ino, struct kv_inode *in, int not_reg)
{
	int rc = kv_inode_get(t, ino, in);

	if (rc)
		return rc;
	if (S_ISDIR(in->mode))
		return -EISDIR;
	return S_ISREG(in->mode) ? 0 : not_reg;
}

static int apply_write(kv_txn *t, void *arg)
{
	struct write_args *a = arg;
	struct kv_inode in;
	uint64_t nblocks;
	int rc;

	kv_inode_prefetch(t, a->ino); /* with its blocks: one wait on a server */
	kv_data_prefetch(t, a->ino, a->off, a->size);
	rc = get_file(t, a->ino, &in, -EINVAL);
	if (rc)
		return rc;
	/* past the end of a file whose write back failed for want of room: the
	 * kernel dropped the pages it could not write back, and storing this
	 * would leave a stretch of zeros where they belonged */
	if (a->off > in.size && a->write_back && fs_itable_short(a->ino))
		return -ENOSPC;
	a->blocks_changed = 0;
	a->appended_from = a->off + a->size > in.size ? in.size : NO_APPEND;
	nblocks = in.nblocks;
	/* past the room for ordinary changes only a write over stored blocks
	 * (fallocate's), which frees what it replaces: one that adds data
	 * fails, as the image is full */
	if (kv_txn_reserved(t) && a->off + a->size > in.size)
		return -ENOSPC;
	rc = kv_data_write_sums(t, &in, a->off, a->buf, a->size, a->sums, a->nsums, a->z);
	if (rc)
		return rc;
	if (kv_txn_reserved(t) && in.nblocks != nblocks)
		return -ENOSPC;
	a->blocks_changed = in.nblocks != nblocks;
	/* with the writeback cache the kernel owns the times, shows its own
	 * to stat(2), and sends them when they change (at close, fsync, the
	 * inode's write-back): a time of kvfs's here would replace the one
	 * users saw once the kernel forgets the inode or at the next mount */
	if (!fs.cfg.writeback)
		in.mtime_ns = in.ctime_ns = fs_now_ns();
	return kv_inode_put(t, &in);
}

struct cut_args {
	uint64_t ino, at;
	int cut; /* result */
};

static int apply_cut(kv_txn *t, void *arg)
{
	struct cut_args *a = arg;
	struct kv_inode in;
	int rc = kv_inode_get(t, a->ino, &in);

	a->cut = 0;
	if (rc || in.size <= a->at)
		return rc == -ENOENT ? 0 : rc;
	rc = kv_data_truncate(t, &in, a->at);
	if (!rc)
		rc = kv_inode_put(t, &in);
	a->cut = rc == 0;
	return rc;
}

/* The kernel wrote back data at off that could not be stored: it had taken
 * it from a write(2) that succeeded, and drops it now. Mark the file short
 * (invariant 4) so that its next write(2) asks for its attributes and is
 * told. The kernel sends a file's write back as several requests at once,
 * taken in any order, so later data may have been stored already: the file
 * would read zeros where this belonged. When off lies in what the file grew
 * by since its last fsync (or since the kernel looked it up, or a
 * truncate), everything past off was written then: cut the file back to
 * off, as an fsync would report losing it. */
static void write_back_short(uint64_t ino, uint64_t off)
{
	struct cut_args c = {.ino = ino, .at = off};
	uint64_t from;

	fs_itable_set_short(ino);
	if (fs_itable_appended(ino, &from) && off >= from &&
	    fs_write(apply_cut, &c, KV_OP_RESERVE) == 0 && c.cut)
		fs_log("inode %llu: no room for data written back at %llu: the file ends there",
		       (unsigned long long)ino, (unsigned long long)off);
	fs_notify_inval(ino, -1, 0);
}

static int stored_size(uint64_t ino, uint64_t *size)
{
	struct kv_inode in;
	kv_txn *t;
	int rc = fs_read_inode(ino, &t, &in);

	if (rc == 0) {
		*size = in.size;
		fs_read_end(t);
	}
	return rc;
}

/* An O_DIRECT write applied: its range's pages dropped, then the reply
 * (fs_op_write; on the handoff thread over io_uring). */
struct direct_done {
	fuse_req_t req;
	uint64_t ino, off;
	size_t size;
};

static void direct_reply(const void *arg)
{
	const struct direct_done *dd = arg;

	fuse_reply_write(dd->req, dd->size);
}

static void direct_written(const void *arg)
{
	const struct direct_done *dd = arg;

	fs_notify_inval(dd->ino, (int64_t)dd->off, (int64_t)dd->size);
	if (fs_req_uring(dd->req)) /* not from this thread: defer.c */
		fs_defer_reply(direct_reply, dd, sizeof(*dd));
	else
		direct_reply(dd);
}

/* A write over stored blocks on a full image, such as into the room
 * fallocate took: it frees the blocks it replaces, but only two commits
 * later, so a whole write request at once needs as much room again. In
 * pieces of WRITE_PIECE blocks, each past the room for ordinary changes if
 * need be (KV_OP_OVERWRITE: apply_write refuses a piece there that would
 * add blocks), the writer's touch between them lets each piece reuse what
 * the one before freed. Returns the bytes
 * written (a short count when a piece fails), or -ENOSPC for none. */
#define WRITE_PIECE 16

static ssize_t write_in_pieces(struct write_args *whole)
{
	const uint64_t piece = (uint64_t)WRITE_PIECE * fs.block_size;
	struct write_args a = *whole;
	uint64_t end = whole->off + whole->size, size;
	int rc = 0;

	if (stored_size(whole->ino, &size) || end > size)
		return -ENOSPC; /* it adds data: the image is full */
	a.nsums = 0;
	a.z = NULL;
	for (a.off = whole->off; a.off < end; a.off += a.size) {
		uint64_t to = (a.off / piece + 1) * piece; /* pieces end on block bounds */

		a.buf = whole->buf + (a.off - whole->off);
		a.size = (to < end ? to : end) - a.off;
		rc = fs_write(apply_write, &a, KV_OP_OVERWRITE);
		if (rc)
			break;
		whole->blocks_changed |= a.blocks_changed;
	}
	return a.off > whole->off ? (ssize_t)(a.off - whole->off) : rc;
}

void fs_op_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
		 struct fuse_file_info *fi)
{
	uint64_t sums[WRITE_SUMS]; /* filled, not zeroed: outside the initializer */
	struct kv_zblocks zb;
	struct write_args a = {.ino = ino, .buf = buf, .size = size, .off = (uint64_t)off,
			       .sums = sums, .write_back = fi && fi->writepage};
	int rc;

	if (off < 0) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	a.nsums = kv_data_sums(fs.env, ino, a.off, buf, size, sums, WRITE_SUMS);
	if (fs.cfg.compress && kv_data_compress(fs.env, ino, a.off, buf, size, fs.cfg.compress,
						sums, a.nsums, &zb))
		a.z = &zb; /* here, in the request's thread, not in the writer */
	rc = fs_write(apply_write, &a, 0);
	if (rc == -ENOSPC) {
		ssize_t n = write_in_pieces(&a);

		/* a short count only without the writeback cache: its write
		 * back takes all or nothing, and it turns a short O_DIRECT
		 * write into EIO */
		if (n == (ssize_t)size || (n > 0 && !fs.cfg.writeback)) {
			size = (size_t)n;
			rc = 0;
		}
	}
	if (rc == -ENOSPC && a.write_back)
		write_back_short(ino, a.off);
	else if (rc == 0 && a.appended_from != NO_APPEND && a.write_back)
		fs_itable_note_append(ino, a.appended_from);
	else if (rc == 0 && !a.write_back && fs.cfg.writeback)
		fs_itable_drop_appends(ino);
	if (rc) {
		fuse_reply_err(req, -rc);
		return;
	}
	/* An O_DIRECT write(2) bypassed the page cache, which keep_cache lets
	 * outlive every open. The kernel drops the range's pages around a
	 * synchronous one but not after an asynchronous one, and a buffered
	 * read in flight meanwhile fills them with what it read before this
	 * write was applied (xfstests generic/451): drop them here, before the
	 * reply. The kernel waits for the pages a read in flight holds
	 * locked, so no page filled before this write outlives it; over
	 * io_uring that read may wait in this thread's own ring queue, so the
	 * handoff thread drops them and the replier replies (defer.c). */
	if (!a.write_back && fi && (fi->flags & O_DIRECT)) {
		struct direct_done dd = {req, ino, a.off, size};

		if (fs_req_uring(req))
			fs_defer(direct_written, &dd, sizeof(dd));
		else
			direct_written(&dd);
		return;
	}
	if (a.blocks_changed) /* before the reply: an fsync waiting on it sees it */
		notify_blocks(ino);
	fuse_reply_write(req, size);
}

/* copy_file_range(2) within the mount: the kernel sends COPY_FILE_RANGE
 * (after writing back both ranges' dirty pages) and kvfs copies in the
 * store, never through the kernel. Where the two offsets lie alike within
 * a block, the whole blocks are shared (kv_data_share: the copy borrows
 * the source's blocks, SHARE_CHUNK blocks an op, and a block is copied on
 * its first change); the partial blocks at either end, and any range whose
 * offsets differ within a block, are copied as a read and a write would,
 * COPY_CHUNK bytes an op (holes in the source become zeros there, as on
 * ext4; shared, they stay holes). Either way a large copy is several
 * commits that each stay a modest transaction. */
#define COPY_CHUNK (1u << 20)
#define SHARE_CHUNK 65536

struct copy_args {
	uint64_t in, out, off_in, off_out;
	size_t len;             /* what is left to copy */
	unsigned char *buf;     /* COPY_CHUNK bytes */
	struct iovec *iov;      /* READ_IOV_MAX */
	const struct fs_cred *cred; /* the caller, whose copy may take set-ID bits */
	size_t copied;          /* result: 0 at the source's end */
	int blocks_changed;     /* result */
	int killed;             /* result: set-ID bits went */
};

/* Copy len bytes of the op's range from done on through a->buf, as a read
 * and a write would. */
static int copy_bytes(kv_txn *t, struct copy_args *a, const struct kv_inode *src,
		      struct kv_inode *dst, uint64_t done, uint64_t len)
{
	ssize_t n;
	int cnt, rc;

	/* the bytes leave the map before the write changes any page */
	n = kv_data_read(t, a->in, src->size, a->off_in + done, (size_t)len, a->iov, READ_IOV_MAX,
			 &cnt);
	if (n <= 0)
		return (int)n;
	iov_gather(a->buf, a->iov, cnt);
	if (kv_txn_reserved(t) && a->off_out + done + (uint64_t)n > dst->size)
		return -ENOSPC; /* it adds data: the image is full */
	rc = kv_data_write(t, dst, a->off_out + done, a->buf, (size_t)n);
	if (!rc)
		a->copied += (size_t)n;
	return rc;
}

/* Where the two offsets lie alike within a block: the partial block at the
 * start copied, then up to SHARE_CHUNK whole blocks shared, then a partial
 * block at the end shared where it is the source's last and ends the
 * destination too (cp of a file), else copied if that ends the range: a
 * copy of a file up to SHARE_CHUNK blocks is one change, as a cp of it
 * looks to a crash. */
static int share_copy(kv_txn *t, struct copy_args *a, struct kv_inode *src,
		      struct kv_inode *dst, uint64_t n)
{
	const uint64_t bs = fs.block_size;
	uint64_t head = (bs - a->off_out % bs) % bs, blocks, last;
	int rc = 0;

	if (head > n)
		head = n;
	if (head)
		rc = copy_bytes(t, a, src, dst, 0, head);
	blocks = (n - head) / bs < SHARE_CHUNK ? (n - head) / bs : SHARE_CHUNK;
	/* the source's last block, short, is shared too where the copy ends
	 * the destination there (no byte of it then lies past its size) */
	last = (n - head) % bs && blocks < SHARE_CHUNK && a->off_in + n == src->size &&
	       dst->size <= a->off_out + n;
	if (rc || !(blocks + last))
		goto tail;
	if (kv_txn_reserved(t) && a->off_out + head + blocks * bs > dst->size)
		return -ENOSPC; /* it adds records: the image is full */
	rc = kv_data_share(t, dst, (a->off_out + head) / bs, src, (a->off_in + head) / bs,
			   blocks + last);
	if (rc)
		return rc;
	if (last) {
		dst->size = a->off_out + n; /* the share counted the block whole */
		a->copied = (size_t)n;
	} else {
		a->copied += (size_t)(blocks * bs);
	}
tail:
	if (!rc && n - a->copied > 0 && n - a->copied < bs)
		rc = copy_bytes(t, a, src, dst, a->copied, n - a->copied);
	return rc;
}

static int apply_copy(kv_txn *t, void *arg)
{
	struct copy_args *a = arg;
	struct kv_inode src, dst;
	uint64_t nblocks, n;
	int rc;

	a->copied = 0;
	a->blocks_changed = 0;
	rc = get_file(t, a->in, &src, -EINVAL);
	if (!rc)
		rc = get_file(t, a->out, &dst, -EINVAL);
	if (rc || a->off_in >= src.size)
		return rc;
	nblocks = dst.nblocks;
	n = src.size - a->off_in < a->len ? src.size - a->off_in : a->len;
	if (a->in != a->out && a->off_in % fs.block_size == a->off_out % fs.block_size)
		rc = share_copy(t, a, &src, &dst, n);
	else
		rc = copy_bytes(t, a, &src, &dst, 0, n < COPY_CHUNK ? n : COPY_CHUNK);
	if (rc || !a->copied)
		return rc;
	a->blocks_changed = dst.nblocks != nblocks;
	a->killed = fs_kill_suidgid(a->cred, &dst);
	if (!fs.cfg.writeback) /* as apply_write: the kernel owns them with it */
		dst.mtime_ns = dst.ctime_ns = fs_now_ns();
	return kv_inode_put(t, &dst);
}

int fs_do_copy_range(uint64_t in, uint64_t off_in, uint64_t out, uint64_t off_out, size_t len,
		     const struct fs_cred *c, size_t *copied)
{
	struct copy_args a = {.in = in, .out = out, .cred = c};
	int rc = 0, changed = 0, killed = 0;

	*copied = 0;
	if (off_in > INT64_MAX || off_out > INT64_MAX || len > INT64_MAX - off_out)
		return -EINVAL;
	a.buf = malloc(COPY_CHUNK);
	a.iov = malloc(READ_IOV_MAX * sizeof(*a.iov));
	if (!a.buf || !a.iov) {
		rc = -ENOMEM;
		goto free_bufs;
	}
	while (*copied < len) {
		a.off_in = off_in + *copied;
		a.off_out = off_out + *copied;
		a.len = len - *copied;
		rc = fs_write(apply_copy, &a, 0);
		if (rc || a.copied == 0)
			break;
		changed |= a.blocks_changed;
		killed |= a.killed;
		*copied += a.copied;
	}
	if (killed)
		fs_notify_inval(out, -1, 0); /* the mode the kernel caches */
	else if (changed)
		notify_blocks(out);
	if (*copied && fs.cfg.writeback)
		fs_itable_drop_appends(out); /* as a write(2) of the same bytes */
	if (*copied) /* a short count, as write(2) gives, for what was copied */
		rc = 0;
free_bufs:
	free(a.iov);
	free(a.buf);
	return rc;
}

void fs_op_copy_file_range(fuse_req_t req, fuse_ino_t ino_in, off_t off_in,
			   struct fuse_file_info *fi_in, fuse_ino_t ino_out, off_t off_out,
			   struct fuse_file_info *fi_out, size_t len, int flags)
{
	gid_t groups[NGROUPS_KEEP];
	struct fs_cred c;
	size_t copied;
	int rc;

	(void)fi_in;
	(void)fi_out;
	fs_caller(req, 1, &c, groups);
	if (flags || off_in < 0 || off_out < 0)
		rc = -EINVAL;
	else
		rc = fs_do_copy_range(ino_in, (uint64_t)off_in, ino_out, (uint64_t)off_out, len,
				      &c, &copied);
	if (rc)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_write(req, copied);
}

/* Zeros stored by one allocating op: 16 MiB of default blocks, so a large
 * fallocate is several commits that each stay a modest transaction. */
#define ALLOC_CHUNK 4096

struct falloc_args {
	uint64_t ino;
	int mode;
	const struct fs_cred *cred; /* the caller, whose fallocate may take set-ID bits */
	int killed;                 /* result: set-ID bits went */
	uint64_t off, len;
	uint64_t from;      /* allocate: where this op starts */
	uint64_t next;      /* result: where the next op starts */
	uint64_t stop;      /* result: where allocation ends (the range within the size) */
	int blocks_changed; /* result */
};

static int apply_fallocate(kv_txn *t, void *arg)
{
	struct falloc_args *a = arg;
	struct kv_inode in;
	uint64_t nblocks;
	int rc;

	a->blocks_changed = 0;
	rc = get_file(t, a->ino, &in, -ENODEV);
	if (rc)
		return rc;
	nblocks = in.nblocks;
	if (a->mode & FALLOC_FL_PUNCH_HOLE) {
		rc = kv_data_punch(t, &in, a->off, a->len);
	} else if (a->mode & FALLOC_FL_ZERO_RANGE) {
		uint64_t chunk = (a->from / fs.block_size + ALLOC_CHUNK) * fs.block_size;

		if (!(a->mode & FALLOC_FL_KEEP_SIZE) && a->off + a->len > in.size)
			in.size = a->off + a->len;
		a->stop = a->off + a->len < in.size ? a->off + a->len : in.size;
		a->next = chunk < a->stop ? chunk : a->stop;
		/* zeros, and the room taken as for an allocation: unwritten
		 * blocks where the range covers them whole, as on ext4 */
		rc = a->from < a->next ? kv_data_zero(t, &in, a->from, a->next) : 0;
	} else {
		if (!(a->mode & FALLOC_FL_KEEP_SIZE) && a->off + a->len > in.size)
			in.size = a->off + a->len;
		/* the room is taken now: unwritten blocks in the holes, whose
		 * first writes the store keeps room for (kv_data_allocate) */
		a->stop = a->off + a->len < in.size ? a->off + a->len : in.size;
		rc = kv_data_allocate(t, &in, a->from, a->stop, ALLOC_CHUNK, &a->next);
	}
	if (rc)
		return rc;
	a->blocks_changed = in.nblocks != nblocks;
	/* and file_modified() takes set-ID bits, which FUSE's fallocate
	 * leaves to the filesystem (xfstests generic/683-685) */
	a->killed |= fs_kill_suidgid(a->cred, &in);
	/* any fallocate that succeeds changes the times, even one that had
	 * nothing to do, as file_modified() makes local filesystems do; with
	 * the writeback cache the kernel's fallocate calls it itself (Linux
	 * 6.1 on) and sends the times, as after a write */
	if (!fs.cfg.writeback)
		in.mtime_ns = in.ctime_ns = fs_now_ns();
	return kv_inode_put(t, &in);
}

/* posix_fallocate(3) promises that writing the range later cannot fail for
 * want of room: ENOSPC now when the holes of the range (and, with
 * FALLOC_FL_KEEP_SIZE, what lies past the end, which no block may hold)
 * take more than is free, nothing changed. */
static int room_for(uint64_t ino, int mode, uint64_t off, uint64_t len)
{
	const uint64_t per_block = kv_room_per_block(fs.env);
	uint64_t holes = 0, size, end = off + len, past = 0, need;
	struct kv_inode in;
	struct kv_usage u;
	kv_txn *t;
	int rc = fs_read_inode(ino, &t, &in);

	if (rc)
		return rc;
	size = in.size;
	if (!(mode & FALLOC_FL_KEEP_SIZE) && end > size)
		size = end;
	rc = kv_data_holes(t, ino, off, end < size ? end : size, &holes);
	fs_read_end(t);
	if (rc)
		return rc;
	if (end > size)
		past = (end - (off > size ? off : size) + fs.block_size - 1) / fs.block_size;
	need = (holes + past) * per_block;
	if (need <= kv_room_avail(fs.env))
		return 0;
	/* kv_room_avail is a lower bound far from full: ask exactly */
	if (kv_usage_get(fs.env, &u) == 0 && need <= u.avail_bytes)
		return 0;
	return -ENOSPC;
}

void fs_op_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t offset, off_t length,
		     struct fuse_file_info *fi)
{
	gid_t groups[NGROUPS_KEEP];
	struct fs_cred c;
	struct falloc_args a = {.ino = ino, .mode = mode, .cred = &c, .off = (uint64_t)offset,
				.len = (uint64_t)length, .from = (uint64_t)offset};
	int rc, changed = 0;

	(void)fi;
	fs_caller(req, 1, &c, groups);
	/* the kernel sends no other mode (collapse and insert range never
	 * reach a FUSE filesystem) and checks the mixes first; checked again
	 * here all the same */
	if (mode & ~(FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE))
		rc = -EOPNOTSUPP;
	else if ((mode & FALLOC_FL_PUNCH_HOLE) &&
		 (!(mode & FALLOC_FL_KEEP_SIZE) || (mode & FALLOC_FL_ZERO_RANGE)))
		rc = -EOPNOTSUPP;
	else if (offset < 0 || length <= 0)
		rc = -EINVAL;
	else if ((uint64_t)offset + (uint64_t)length > (uint64_t)INT64_MAX)
		rc = -EFBIG;
	else if (mode & FALLOC_FL_PUNCH_HOLE)
		rc = fs_write(apply_fallocate, &a, KV_OP_RESERVE);
	else if ((rc = room_for(ino, mode, a.off, a.len)) == 0) {
		/* op by op until the range is allocated; another writer taking
		 * the room meanwhile leaves it partly allocated, as ext4 does */
		do {
			rc = fs_write(apply_fallocate, &a, 0);
			changed |= a.blocks_changed;
			a.from = a.next;
		} while (rc == 0 && a.next < a.stop);
		a.blocks_changed = changed;
	}
	if (a.killed)
		fs_notify_inval(ino, -1, 0); /* the mode the kernel caches */
	else if (a.blocks_changed)
		notify_blocks(ino);
	fuse_reply_err(req, -rc);
}

void fs_op_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence,
		 struct fuse_file_info *fi)
{
	struct kv_inode in;
	uint64_t pos = 0;
	kv_txn *t;
	int rc;

	(void)fi;
	if (fs.cfg.writeback) {
		/* written data may still sit in the kernel's dirty pages, which
		 * it does not flush before asking: an answer from the store
		 * could call data a hole. ENOSYS makes the kernel answer from
		 * its own size (all data up to EOF) from now on. */
		fuse_reply_err(req, ENOSYS);
		return;
	}
	if (whence != SEEK_DATA && whence != SEEK_HOLE) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	if (off < 0) {
		fuse_reply_err(req, ENXIO);
		return;
	}
	rc = fs_read_inode(ino, &t, &in);
	if (rc == 0) {
		rc = kv_data_seek(t, ino, in.size, (uint64_t)off, whence, &pos);
		fs_read_end(t);
	}
	if (rc)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_lseek(req, (off_t)pos);
}
