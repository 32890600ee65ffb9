/*
 * lock.c - the exclusive lock of an image: one writer at a time (a
 * read-write open, mkfs -f replacing it), and a short wait for a holder on
 * its way out.
 *
 * umount(8) returns once the kernel has detached the mount, while the
 * daemon is still leaving (joining its threads, committing what is queued,
 * closing the store): a tool run right after it, or the next mount, would
 * find the lock held. So a held lock is refused at once only when the image
 * is mounted read-write (a mount whose source is the image's path in this
 * process's mount table) or held by this very process; any other holder, a daemon
 * unmounting, one still mounting, or a tool at work, is waited for a few
 * seconds, with a line on stderr after the first.
 *
 * The wait sleeps in poll(2) on an inotify watch of the image (every close
 * of the file, also by a process that dies, ends it) and on the mount table
 * (a mount appearing refuses at once): it ends when the lock can be had,
 * not on a timer's tick.
 *
 * Invariants:
 *  1. A lock this process holds is in the held list from the flock that
 *     took it until kv_image_unlock, so taking it again fails at once
 *     instead of waiting for itself.
 *  2. A mounted image is refused without waiting.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "kv_int.h"

#define LOCK_WAIT_MS 5000 /* the longest wait for a holder with no mount */
#define LOCK_NOTE_MS 1000 /* when the wait is said */

/* ---------------------------------------------------- the held list -- */

struct held {
	int fd;
	dev_t dev;
	ino_t ino;
	struct held *next;
};

static pthread_mutex_t held_lock = PTHREAD_MUTEX_INITIALIZER;
static struct held *held_list;

static int held_by_us(const struct stat *st)
{
	int found = 0;

	pthread_mutex_lock(&held_lock);
	for (struct held *h = held_list; h && !found; h = h->next)
		found = h->dev == st->st_dev && h->ino == st->st_ino;
	pthread_mutex_unlock(&held_lock);
	return found;
}

static int held_add(int fd, const struct stat *st)
{
	struct held *h = malloc(sizeof(*h));

	if (!h)
		return -ENOMEM;
	*h = (struct held){.fd = fd, .dev = st->st_dev, .ino = st->st_ino};
	pthread_mutex_lock(&held_lock);
	h->next = held_list;
	held_list = h;
	pthread_mutex_unlock(&held_lock);
	return 0;
}

void kv_image_unlock(int fd)
{
	struct held **p, *h = NULL;

	pthread_mutex_lock(&held_lock);
	for (p = &held_list; *p; p = &(*p)->next) {
		if ((*p)->fd == fd) {
			h = *p;
			*p = h->next;
			break;
		}
	}
	pthread_mutex_unlock(&held_lock);
	if (h) {
		flock(fd, LOCK_UN);
		free(h);
	}
}

/* ------------------------------------------------------- the mounts -- */

/* Undo the mount table's octal escapes (\040 for a space ...) in place. */
static void unescape(char *s)
{
	char *out = s;

	while (*s) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' &&
		    s[3] >= '0' && s[3] <= '7') {
			*out++ = (char)((s[1] - '0') << 6 | (s[2] - '0') << 3 | (s[3] - '0'));
			s += 4;
		} else {
			*out++ = *s++;
		}
	}
	*out = '\0';
}

/* Whether a read-write FUSE mount in f (the mount table, read from its
 * start) has the image at real path as its source; where, in at (atlen
 * bytes). A read-only mount holds no lock: a view beside a writer that is
 * leaving must not make its lock look taken for good. */
static int find_mount(FILE *f, const char *real, char *at, size_t atlen)
{
	char *line = NULL, *fields[6], *sep, *type, *src, *save;
	size_t cap = 0;
	int found = 0;

	rewind(f);
	while (!found && getline(&line, &cap, f) > 0) {
		/* ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS ... - TYPE SOURCE ... */
		sep = strstr(line, " - ");
		if (!sep)
			continue;
		*sep = '\0';
		fields[0] = strtok_r(line, " ", &save);
		for (int i = 1; i < 6 && fields[i - 1]; i++)
			fields[i] = strtok_r(NULL, " ", &save);
		type = strtok_r(sep + 3, " ", &save);
		src = type ? strtok_r(NULL, " ", &save) : NULL;
		if (!fields[0] || !fields[5] || !src || strncmp(type, "fuse", 4) != 0 ||
		    (strncmp(fields[5], "ro", 2) == 0 && (fields[5][2] == ',' || !fields[5][2])))
			continue;
		unescape(src);
		if (strcmp(src, real) == 0) {
			unescape(fields[4]);
			snprintf(at, atlen, "%s", fields[4]);
			found = 1;
		}
	}
	free(line);
	return found;
}

/* -------------------------------------------------------- the lock -- */

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Try the lock once: 0 taken, 1 held by another, -errno. */
static int try_lock(int fd)
{
	if (flock(fd, LOCK_EX | LOCK_NB) == 0)
		return 0;
	return errno == EWOULDBLOCK ? 1 : -errno;
}

int kv_image_lock(int fd, const char *path, char *err, size_t errlen)
{
	char real[PATH_MAX], at[PATH_MAX];
	struct pollfd pf[2] = {{.fd = -1, .events = POLLIN}, {.fd = -1, .events = POLLPRI}};
	FILE *mounts = NULL;
	struct stat st;
	long long now, give_up, note;
	int rc;

	if (fstat(fd, &st) != 0)
		return -errno;
	if (held_by_us(&st)) {
		kv_seterr(err, errlen, "'%s' is in use (this process has it open)", path);
		return -EBUSY;
	}
	rc = try_lock(fd);
	if (rc <= 0)
		goto out;
	if (!realpath(path, real))
		snprintf(real, sizeof(real), "%s", path);
	/* watched before the next try: a close in between is not missed */
	pf[0].fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (pf[0].fd >= 0 && inotify_add_watch(pf[0].fd, real, IN_CLOSE) < 0) {
		close(pf[0].fd);
		pf[0].fd = -1;
	}
	mounts = fopen("/proc/self/mountinfo", "re");
	if (mounts)
		pf[1].fd = fileno(mounts); /* POLLPRI: the mount table changed */
	note = now_ms() + LOCK_NOTE_MS;
	give_up = note - LOCK_NOTE_MS + LOCK_WAIT_MS;
	while ((rc = try_lock(fd)) == 1) {
		long long wake;

		if (mounts && find_mount(mounts, real, at, sizeof(at))) {
			kv_seterr(err, errlen, "'%s' is in use: it is mounted on %s", path, at);
			rc = -EBUSY;
			break;
		}
		now = now_ms();
		if (now >= give_up) {
			kv_seterr(
			        err, errlen,
			        "'%s' is in use by another process (waited %d s for it to let go)",
			        path, LOCK_WAIT_MS / 1000);
			rc = -EBUSY;
			break;
		}
		if (note && now >= note) {
			fprintf(stderr,
			        "%s: waiting for the process holding '%s' to let go of it\n",
			        program_invocation_short_name, path);
			note = 0;
		}
		wake = note ? note : give_up;
		if (pf[0].fd < 0 && wake > now + 20)
			wake = now + 20; /* no inotify: look again soon */
		if (poll(pf, 2, (int)(wake - now)) > 0 && (pf[0].revents & POLLIN)) {
			char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
			while (read(pf[0].fd, buf, sizeof(buf)) > 0) {
			}
		}
	}
	if (pf[0].fd >= 0)
		close(pf[0].fd);
	if (mounts)
		fclose(mounts);
out:
	if (rc == 0) {
		rc = held_add(fd, &st);
		if (rc)
			flock(fd, LOCK_UN);
	}
	return rc;
}
