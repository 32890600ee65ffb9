/*
 * flusher.c - keeps the host filesystem ahead of the writer: a thread the
 * writer's role kicks after every KV_FLUSH_KICK bytes of file data it
 * commits (writer.c). On a kick it
 *
 *  - starts write-back of what the image grew by since the last kick,
 *    without waiting for it (sync_file_range), when commits do not sync
 *    (durability=none): an fsync(2), the idle sync or the host's own
 *    write-back later finds little left to write, instead of the whole of
 *    a large write at once. Only the new tail: pages further back are
 *    rewritten by later commits (LMDB reuses freed pages), so writing them
 *    back early is work done twice (2-thread small-file creates ran 11%
 *    slower with the whole file written back at each kick);
 *  - keeps the space past the image's end allocated (fallocate with
 *    FALLOC_FL_KEEP_SIZE: 1/8 of the image, 8 to 64 MiB, never past
 *    max_size), so the pages LMDB appends land in allocated blocks rather
 *    than in the host filesystem's delayed allocation, which costs the
 *    committing thread per page.
 *
 * Both calls work on the image's file and change none of its bytes or its
 * size, so they need neither the writer's role nor the map lock. At close
 * kv_room_close gives back the allocation past the end, but for the
 * reserve room.c keeps there. The thread runs with every writer of an
 * image file: the writer starts, kicks and stops it through the engine's
 * hooks (engine.h contract 9); a store without a file of its own
 * (PostgreSQL) has no such hooks and no flusher.
 *
 * Invariants:
 *  1. The image's size and contents are changed only by LMDB and by
 *     kv_room_close's trim to the size it already has.
 *  2. A failed call costs speed, never data: an fallocate the host refuses
 *     (EOPNOTSUPP) is not tried again, any other failure waits for the next
 *     kick; LMDB's own writes still report a full disk.
 */
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lmdb_int.h"
#include "writer.h"

#define ALLOC_MIN (8ULL << 20)
#define ALLOC_MAX (64ULL << 20)

/* Keep [size, size + ahead) allocated, topping it up when half is used. */
static void allocate_ahead(kv_env *e, uint64_t size)
{
	struct kv_flusher *f = &kv_lmdb(e)->flush;
	uint64_t ahead = size / 8;

	if (f->no_alloc)
		return;
	if (ahead < ALLOC_MIN)
		ahead = ALLOC_MIN;
	if (ahead > ALLOC_MAX)
		ahead = ALLOC_MAX;
	if (e->max_size && size + ahead > e->max_size) /* max_size bounds the blocks too */
		ahead = e->max_size > size ? e->max_size - size : 0;
	if (ahead == 0 || f->alloc_end >= size + ahead / 2)
		return;
	if (fallocate(e->lock_fd, FALLOC_FL_KEEP_SIZE, (off_t)size, (off_t)ahead) == 0)
		f->alloc_end = size + ahead;
	else if (errno == EOPNOTSUPP || errno == ENOSYS)
		f->no_alloc = 1;
}

static void *flusher_main(void *arg)
{
	kv_env *e = arg;
	struct kv_flusher *f = &kv_lmdb(e)->flush;
	struct stat st;

	pthread_mutex_lock(&f->lock);
	for (;;) {
		unsigned kicks;

		while (!f->kick && !f->stop)
			pthread_cond_wait(&f->cond, &f->lock);
		if (f->stop)
			break;
		/* kicks that came while it was busy are served by one pass */
		kicks = f->kick;
		f->kick = 0;
		pthread_mutex_unlock(&f->lock);
		if (fstat(e->lock_fd, &st) == 0) {
			/* only what was appended since the last kick: pages
			 * further back are rewritten by later commits (LMDB
			 * reuses freed pages), and written back then */
			if (e->durability == KV_DURABLE_NONE && f->wb_from < (uint64_t)st.st_size)
				sync_file_range(e->lock_fd, (off_t)f->wb_from, 0,
						SYNC_FILE_RANGE_WRITE);
			f->wb_from = (uint64_t)st.st_size;
			allocate_ahead(e, (uint64_t)st.st_size);
		}
		pthread_mutex_lock(&f->lock);
		f->done += kicks;
	}
	pthread_mutex_unlock(&f->lock);
	return NULL;
}

int kv_flusher_start(kv_env *e)
{
	struct kv_flusher *f = &kv_lmdb(e)->flush;
	struct stat st;

	/* what the image held at open is written already */
	if (fstat(e->lock_fd, &st) == 0)
		f->wb_from = (uint64_t)st.st_size;
	return kv_thread_start(&f->thread, &f->lock, &f->cond, flusher_main, e);
}

/* Wake the flusher for a kick, or to stop. */
static void flusher_tell(kv_env *e, int stop)
{
	struct kv_flusher *f = &kv_lmdb(e)->flush;

	pthread_mutex_lock(&f->lock);
	if (stop)
		f->stop = 1;
	else
		f->kick++;
	pthread_cond_signal(&f->cond);
	pthread_mutex_unlock(&f->lock);
}

void kv_flusher_kick(kv_env *e)
{
	flusher_tell(e, 0);
}

void kv_flusher_stop(kv_env *e)
{
	struct kv_flusher *f = &kv_lmdb(e)->flush;

	flusher_tell(e, 1);
	pthread_join(f->thread, NULL);
	pthread_cond_destroy(&f->cond);
	pthread_mutex_destroy(&f->lock);
	/* kv_room_close gives back the room past the image's end */
}
