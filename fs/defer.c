/*
 * defer.c - the handoff thread: work a request must not do on the thread
 * that received it, done on a thread of its own, which then replies.
 *
 * Over io_uring, libfuse serves each ring queue on one thread, and a
 * request queued behind one whose handler waits waits with it. Most waits
 * only cost time, but one is a deadlock: a notification that drops a
 * file's pages (fs_notify_inval with a range) waits for every page a
 * buffered read in flight holds locked, and that read's READ may be queued
 * on the very ring thread that sent the notification. Such work comes here.
 *
 * The reply does not go from the thread that did the work but from a
 * second one, the replier. A thread that sends a reply into a ring entry
 * (with the entry's fetch of the next request) is the one the kernel has
 * deliver that next request, as task work: were it asleep in the kernel
 * uninterruptibly (as an invalidation waiting on a page lock is), the
 * request would wait for it, and if that request is the READ holding the
 * page, forever (seen: the handoff thread in folio_lock, a READ queued,
 * the ring threads idle). The replier sleeps only on its condition
 * variable, which the kernel's task work wakes.
 *
 * Invariants:
 *  1. A job is copied into a slot of a fixed ring of FS_JOBS at fs_defer
 *     or fs_defer_reply: no allocation on a request's path, and the
 *     caller's stack may go.
 *  2. Jobs run in the order given, one at a time, each queue's on its own
 *     thread. A work job (fs_defer) may wait in the kernel and never
 *     replies; a reply job (fs_defer_reply) replies and never waits but
 *     for its queue (libfuse 3.18 takes replies from any thread:
 *     contrib/libfuse's patch serialises the ring's submissions).
 *  3. A queue does not fill: FS_JOBS is more than the requests the kernel
 *     has in flight on every ring queue at once (queues x depth). Were it
 *     to, the caller would wait for a slot.
 *  4. fs_defer_stop runs the jobs queued before it, then joins the
 *     threads: the work thread first, whose jobs queue replies.
 */
#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "fs.h"

#define FS_JOBS 1024

struct job {
	fs_job_fn fn;
	unsigned char arg[FS_JOB_ARG];
};

struct jobq {
	pthread_mutex_t lock;
	pthread_cond_t more;  /* a job was queued, or stop */
	pthread_cond_t room;  /* a slot was freed */
	struct job ring[FS_JOBS];
	unsigned head, count; /* guarded by lock */
	int stop;
	int running;
	pthread_t tid;
};

#define JOBQ_INIT                                                                           \
	{                                                                                   \
		.lock = PTHREAD_MUTEX_INITIALIZER, .more = PTHREAD_COND_INITIALIZER,        \
		.room = PTHREAD_COND_INITIALIZER,                                           \
	}

static struct jobq work = JOBQ_INIT, replies = JOBQ_INIT;

static void *run_jobs(void *arg)
{
	struct jobq *q = arg;
	struct job j;

	pthread_mutex_lock(&q->lock);
	for (;;) {
		while (!q->count && !q->stop)
			pthread_cond_wait(&q->more, &q->lock);
		if (!q->count) /* invariant 4: stop, and nothing queued */
			break;
		j = q->ring[q->head];
		q->head = (q->head + 1) % FS_JOBS;
		q->count--;
		pthread_cond_signal(&q->room);
		pthread_mutex_unlock(&q->lock);
		j.fn(j.arg);
		pthread_mutex_lock(&q->lock);
	}
	pthread_mutex_unlock(&q->lock);
	return NULL;
}

static int start(struct jobq *q)
{
	q->stop = 0;
	if (pthread_create(&q->tid, NULL, run_jobs, q))
		return -EAGAIN;
	q->running = 1;
	return 0;
}

static void stop(struct jobq *q)
{
	if (!q->running)
		return;
	pthread_mutex_lock(&q->lock);
	q->stop = 1;
	pthread_cond_signal(&q->more);
	pthread_mutex_unlock(&q->lock);
	pthread_join(q->tid, NULL);
	q->running = 0;
}

static void queue(struct jobq *q, fs_job_fn fn, const void *arg, size_t len)
{
	struct job *j;

	assert(len <= FS_JOB_ARG);
	if (!q->running) { /* the unit tests' cores: no session, no thread */
		fn(arg);
		return;
	}
	pthread_mutex_lock(&q->lock);
	while (q->count == FS_JOBS) /* invariant 3 */
		pthread_cond_wait(&q->room, &q->lock);
	j = &q->ring[(q->head + q->count) % FS_JOBS];
	j->fn = fn;
	memcpy(j->arg, arg, len);
	q->count++;
	pthread_cond_signal(&q->more);
	pthread_mutex_unlock(&q->lock);
}

int fs_defer_start(void)
{
	if (start(&replies))
		return -EAGAIN;
	if (start(&work)) {
		stop(&replies);
		return -EAGAIN;
	}
	return 0;
}

void fs_defer_stop(void)
{
	stop(&work);
	stop(&replies);
}

void fs_defer(fs_job_fn fn, const void *arg, size_t len)
{
	queue(&work, fn, arg, len);
}

void fs_defer_reply(fs_job_fn fn, const void *arg, size_t len)
{
	queue(&replies, fn, arg, len);
}
