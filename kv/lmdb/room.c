/*
 * room.c - how far an image may grow, and the reserve that lets a full
 * image delete.
 *
 * LMDB copies on write: freeing pages takes new pages first (the B-tree
 * pages on the way to what is deleted, and the record of the freed pages),
 * and freed pages serve again only from the second commit after the one
 * that freed them. So an image that ordinary writes filled to its limit
 * could not even unlink. As btrfs's global reserve and ext4's reserved
 * blocks do, a reserve is kept that only changes flagged KV_OP_RESERVE
 * (unlink, rmdir, truncate, punch, an orphan's purge) may use:
 *
 *   0                      limit - reserve          limit
 *   |== pages in use ===........|------ reserve -------|
 *
 *   extent  the bytes up to the image's last page (free pages inside count
 *           as room: LMDB reuses them first)
 *   promised  the pages the first writes of the unwritten blocks take
 *           (fallocate's, data.c), kept free for them: ordinary changes
 *           stop short of them as if they were in use
 *   limit   max_size, or what the image file can reach on its host: its
 *           blocks (with those allocated past its end) plus the host's
 *           free space, whichever is less; but never less than the extent
 *           the image had when it opened ("no growth" for a max_size
 *           below that: its free pages are used, the reserve is kept)
 *   use_max limit - reserve - promised: the pages in use ordinary changes
 *           may reach
 *   cap     use_max, never below the extent: ordinary changes grow
 *           the map up to here (kv_map_grow)
 *   hard    limit, or the extent plus a quarter of the reserve when that is
 *           more: the map for a change that may use the reserve
 *
 * A delete on a full image takes pages past limit - reserve, and once it
 * freed its pages those lie below the extent, where any change could take
 * them; so while the extent is past limit - reserve ("tight"), an ordinary
 * change is refused once the pages in use reach limit - reserve
 * (kv_room_over), and the reserve stays whole across any number of fills
 * and deletes. The writer (writer.c) runs an op the map at the cap cannot
 * hold alone in the reserve when it is flagged, and fails it with -ENOSPC
 * otherwise. A write over stored blocks (KV_OP_OVERWRITE) may go past both
 * limits, adding nothing there (kv_txn_reserved): it frees what it
 * replaces, or takes what was promised to the unwritten block it fills, so
 * writing into what fallocate took works on a full image.
 *
 * The record layer reaches this file only through the LMDB engine's hooks
 * (engine.h contract 9), so it serves an image file alone: a store without
 * a map of its own has no hooks, and never comes here.
 *
 * Invariants:
 *  1. The reserve is reserve_of() bytes: 1/64 of the image (of max_size
 *     when set), 256 KiB to 1 GiB, at most 1/8 of max_size. Freeing n
 *     pages needs about n/512 pages for their record, so it covers the
 *     delete of any file the image can hold, eight times over.
 *  2. The reserve exists on the host, not only in the accounts: while the
 *     image is open read-write the blocks past its extent are kept
 *     allocated up to extent + reserve (fallocate, FALLOC_FL_KEEP_SIZE;
 *     topped up to twice that), and kv_room_close keeps them when the image
 *     closes, so a host filesystem that filled up meanwhile (by kvfs or by
 *     anyone) still holds the room a delete needs, also at the next mount.
 *  3. The room's state (struct kv_room_state, in the engine's) is written
 *     by the writer's role only, between transactions; statfs and kv_usage_get compute their own from the same
 *     measures (kv_room_measure), which reads LMDB's meta pages with the map
 *     lock held shared, as a reader does, since the role resizes the map.
 *  4. The map is never larger than cap outside the reserve (kv_room_update
 *     shrinks it back: LMDB keeps it at least as large as the extent).
 */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "lmdb_int.h"

#define RESERVE_MIN (256ULL << 10)
#define RESERVE_MAX (1ULL << 30)
#define RESERVE_SHARE 64
/* the writer looks again once the extent grew by a quarter of the reserve,
 * and at least this much */
#define CHECK_MIN (64ULL << 10)
/* kv_room_avail is exact (counts pages in use) within this of the cap,
 * a lower bound past it */
#define AVAIL_EXACT (64ULL << 20)
uint64_t kv_room_promised(const kv_env *e)
{
	return atomic_load(&e->unwritten.count) * kv_room_per_block(e);
}

static uint64_t reserve_of(const kv_env *e, uint64_t extent)
{
	uint64_t base = e->max_size ? e->max_size : extent;
	uint64_t r = base / RESERVE_SHARE;

	if (r < RESERVE_MIN)
		r = RESERVE_MIN;
	if (r > RESERVE_MAX)
		r = RESERVE_MAX;
	if (e->max_size && r > e->max_size / 8)
		r = e->max_size / 8;
	return (r + e->page_size - 1) / e->page_size * e->page_size;
}

void kv_room_measure(kv_env *e, struct kv_room *r)
{
	struct kv_room_state *rs = &kv_lmdb(e)->room;
	MDB_envinfo info;
	struct statvfs sv;
	struct stat st;
	uint64_t limit;

	/* the meta pages lie in the map, which the role may be moving: any
	 * thread reads them as a reader would (never with a read txn held) */
	pthread_rwlock_rdlock(&e->map_lock);
	mdb_env_info(kv_lmdb(e)->env, &info);
	pthread_rwlock_unlock(&e->map_lock);
	r->extent = ((uint64_t)info.me_last_pgno + 1) * e->page_size;
	r->alloc_end = r->extent;
	if (fstat(e->lock_fd, &st) == 0) {
		r->alloc_end = (uint64_t)st.st_size + kv_bytes_past_end(&st);
		if (r->alloc_end < r->extent)
			r->alloc_end = r->extent;
	}
	r->host_avail = 0;
	if (fstatvfs(e->lock_fd, &sv) == 0)
		r->host_avail = (uint64_t)sv.f_bavail * sv.f_frsize;
	r->reserve = reserve_of(e, r->extent);
	limit = r->alloc_end + r->host_avail;
	if (e->max_size && e->max_size < limit)
		limit = e->max_size;
	limit &= ~((uint64_t)e->page_size - 1);
	/* an image larger than its limit when it opened keeps its size */
	if (limit < rs->anchor)
		limit = rs->anchor;
	r->promised = kv_room_promised(e);
	r->use_max = limit > r->reserve + r->promised ? limit - r->reserve - r->promised : 0;
	r->cap = r->use_max > r->extent ? r->use_max : r->extent;
	r->hard = r->extent + r->reserve / 4 > limit ? r->extent + r->reserve / 4 : limit;
}

/* The pages the transaction's trees hold, the freelist's and the two meta
 * pages with them: what is in use, up to the pages it freed itself. */
static uint64_t in_use(kv_env *e, kv_etxn *txn)
{
	uint64_t pages = 2;
	MDB_stat ms;

	for (int i = 0; i < KV_NDB + 2; i++) {
		MDB_dbi dbi = i < 2 ? (MDB_dbi)i : kv_lmdb(e)->dbi[i - 2]; /* FREE_DBI, MAIN_DBI, ours */
		if (mdb_stat(kv_mtxn(txn), dbi, &ms) == 0)
			pages += ms.ms_branch_pages + ms.ms_leaf_pages + ms.ms_overflow_pages;
	}
	return pages * e->page_size;
}

uint64_t kv_room_avail_in(kv_env *e, kv_etxn *txn)
{
	struct kv_room_state *rs = &kv_lmdb(e)->room;
	MDB_envinfo info;
	uint64_t extent, used;

	assert(kv_role_mine(e) && (txn == e->w.txn || txn == e->win.txn)); /* invariant 3 */
	mdb_env_info(kv_lmdb(e)->env, &info);
	extent = ((uint64_t)info.me_last_pgno + 1) * e->page_size;
	/* far from full: what lies past the extent is room enough to tell */
	if (rs->use_max > extent + AVAIL_EXACT)
		return rs->use_max - extent;
	used = in_use(e, txn);
	return rs->use_max > used ? rs->use_max - used : 0;
}

int kv_room_over(kv_env *e, kv_etxn *txn)
{
	struct kv_room_state *rs = &kv_lmdb(e)->room;

	assert(kv_role_mine(e) && (txn == e->w.txn || txn == e->win.txn));
	return rs->tight && in_use(e, txn) >= rs->use_max;
}

int kv_room_promise_check(kv_env *e, kv_etxn *txn)
{
	struct kv_room_state *rs = &kv_lmdb(e)->room;
	uint64_t published = atomic_load(&e->unwritten.count), count, need, used;
	MDB_envinfo info;

	assert(kv_role_mine(e));
	if (kv_unwritten_read(e, txn, &count) != 0 || count <= published)
		return 0;
	/* use_max leaves out what was published: the rest is new */
	need = (count - published) * kv_room_per_block(e);
	mdb_env_info(kv_lmdb(e)->env, &info);
	used = ((uint64_t)info.me_last_pgno + 1) * e->page_size; /* the extent */
	if (rs->use_max > used + AVAIL_EXACT && rs->use_max - used >= need)
		return 0; /* far from full */
	used = in_use(e, txn);
	return rs->use_max >= used && rs->use_max - used >= need ? 0 : -ENOSPC;
}

/* Keep [extent, extent + reserve) allocated on the host (invariant 2):
 * when less is, allocate up to twice that, or what the host has left. */
static void allocate_reserve(kv_env *e, const struct kv_room *r)
{
	struct kv_room_state *rs = &kv_lmdb(e)->room;
	uint64_t want = r->extent + 2 * r->reserve, len;

	if (rs->no_alloc || r->alloc_end >= r->extent + r->reserve)
		return;
	if (e->max_size && want > e->max_size && e->max_size > r->extent + r->reserve)
		want = e->max_size;
	len = want - r->alloc_end;
	if (fallocate(e->lock_fd, FALLOC_FL_KEEP_SIZE, (off_t)r->alloc_end, (off_t)len) == 0)
		return;
	if (errno == EOPNOTSUPP || errno == ENOSYS) {
		rs->no_alloc = 1; /* the host cannot hold blocks ahead */
		return;
	}
	/* some hosts take back a failed allocation whole: take what is left */
	len = r->host_avail & ~((uint64_t)e->page_size - 1);
	if (errno == ENOSPC && len)
		(void)!fallocate(e->lock_fd, FALLOC_FL_KEEP_SIZE, (off_t)r->alloc_end, (off_t)len);
}

int kv_room_update(kv_env *e)
{
	struct kv_room_state *rs = &kv_lmdb(e)->room;
	struct kv_room r;
	MDB_envinfo info;
	uint64_t step;
	int shrunk = 0;

	assert(kv_role_mine(e) && !e->w.txn && !e->win.txn); /* invariant 3: between transactions */
	if (!rs->anchor) { /* the first, as the writer starts */
		mdb_env_info(kv_lmdb(e)->env, &info);
		rs->anchor = ((uint64_t)info.me_last_pgno + 1) * e->page_size;
	}
	kv_room_measure(e, &r);
	if (r.alloc_end < r.extent + r.reserve && !rs->no_alloc) {
		allocate_reserve(e, &r);
		kv_room_measure(e, &r);
	}
	atomic_store(&rs->cap, r.cap);
	atomic_store(&rs->hard, r.hard);
	rs->use_max = r.use_max;
	rs->tight = r.extent > r.use_max;
	if (r.use_max > r.extent + AVAIL_EXACT || atomic_load(&e->room_avail) == 0)
		atomic_store(&e->room_avail, r.use_max > r.extent ? r.use_max - r.extent : 0);
	step = r.reserve / 4 > CHECK_MIN ? r.reserve / 4 : CHECK_MIN;
	rs->next = r.extent + step;
	mdb_env_info(kv_lmdb(e)->env, &info);
	if (!e->w.in_reserve && info.me_mapsize > r.cap) {
		if (kv_map_resize(e, r.cap) == 0)
			shrunk = 1;
	}
	return shrunk;
}

void kv_room_check(kv_env *e)
{
	struct kv_room_state *rs = &kv_lmdb(e)->room;
	MDB_envinfo info;

	assert(kv_role_mine(e) && !e->w.txn && !e->win.txn);
	mdb_env_info(kv_lmdb(e)->env, &info);
	if (((uint64_t)info.me_last_pgno + 1) * e->page_size >= rs->next)
		kv_room_update(e);
}

int kv_map_grow(kv_env *e)
{
	struct kv_room_state *rs = &kv_lmdb(e)->room;
	uint64_t limit = atomic_load(e->w.in_reserve ? &rs->hard : &rs->cap), next;
	MDB_envinfo info;

	assert(kv_role_mine(e) && !e->w.txn && !e->win.txn);
	mdb_env_info(kv_lmdb(e)->env, &info);
	if (info.me_mapsize >= limit)
		return -ENOSPC;
	next = (uint64_t)info.me_mapsize * 2;
	if (next > limit || e->w.in_reserve)
		next = limit;
	return kv_map_resize(e, next);
}

void kv_room_close(kv_env *e)
{
	struct kv_room_state *rs = &kv_lmdb(e)->room;
	struct kv_room r;
	struct stat st;

	if (fstat(e->lock_fd, &st) != 0)
		return;
	kv_room_measure(e, &r);
	if (r.alloc_end <= r.extent + r.reserve)
		return;
	/* give back what was allocated ahead past the reserve: a truncate to
	 * the file's own size frees every block past it (also those of an
	 * allocation that failed half way, or of a killed daemon), then the
	 * reserve is taken again (invariant 2). Not on a host nearly full:
	 * between the two, another program could take the reserve's blocks
	 * (and ext4 punches no hole past a file's end), so the image keeps
	 * them all */
	if (r.host_avail < 2 * r.reserve + (r.alloc_end - r.extent))
		return;
	if (ftruncate(e->lock_fd, st.st_size) != 0)
		return;
	if (!rs->no_alloc && r.extent + r.reserve > (uint64_t)st.st_size)
		(void)!fallocate(e->lock_fd, FALLOC_FL_KEEP_SIZE, st.st_size,
				 (off_t)(r.extent + r.reserve - (uint64_t)st.st_size));
}

uint64_t kv_room_window(kv_env *e, uint64_t want)
{
	MDB_envinfo info;
	struct kv_room r;
	uint64_t room;

	kv_room_measure(e, &r);
	mdb_env_info(kv_lmdb(e)->env, &info);
	while (info.me_mapsize < r.extent + want && info.me_mapsize < r.cap && kv_map_grow(e) == 0)
		mdb_env_info(kv_lmdb(e)->env, &info);
	/* half of what the map, the file's room past its end and the host
	 * leave, so that the freed pages' record and LMDB's own pages fit
	 * too (window.c invariant 5) */
	room = info.me_mapsize > r.extent ? info.me_mapsize - r.extent : 0;
	if (room > r.alloc_end - r.extent + r.host_avail / 2)
		room = r.alloc_end - r.extent + r.host_avail / 2;
	return r.extent > r.use_max ? 0 : room;
}
