/*
 * progress.h - the progress line the tools draw on a terminal: fsck.kvfs's
 * passes, mkfs.kvfs -d's copy, kvfs-dump's export and backup.
 *
 * One line on standard error, redrawn in place ("\r", then erase to the end
 * of the line) at most every PROGRESS_EVERY seconds:
 *
 *   TEXT                                  (no fraction known)
 *   TEXT [=================               ]  42.5%
 *
 * Invariants:
 *  1. Nothing is drawn unless the tool asked for it (on): the tools ask when
 *     standard error is a terminal, so logs and pipes never see the line.
 *  2. A tool erases the line (progress_clear) before it prints anything
 *     else to the terminal, so no message starts in the middle of a bar.
 *  3. The percentage is the caller's fraction clipped to [0, 1]: a caller
 *     that never lowers its fraction gets a bar that never goes back.
 */
#ifndef KVFS_PROGRESS_H
#define KVFS_PROGRESS_H

#define PROGRESS_EVERY 0.1 /* seconds between redraws */

struct progress {
	int on;      /* draw at all */
	int shown;   /* a line is on the screen */
	double last; /* when it was last drawn (progress_now), 0: never */
};

/* Start with nothing shown; on: whether to draw at all. */
void progress_init(struct progress *p, int on);
/* Seconds on a monotonic clock. */
double progress_now(void);
/* 1 when on and PROGRESS_EVERY has passed since the last draw. */
int progress_due(const struct progress *p);
/* Draw the line now (when on): the text of fmt, then, when frac >= 0, the
 * bar and the percentage of frac. */
void progress_draw(struct progress *p, double frac, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Erase the line if one is shown. */
void progress_clear(struct progress *p);

#endif
