/*
 * progress.c - the progress line of the tools (progress.h): drawn on
 * standard error, in place, at most every PROGRESS_EVERY seconds.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "progress.h"

#define BAR_WIDTH 40

void progress_init(struct progress *p, int on)
{
	memset(p, 0, sizeof(*p));
	p->on = on;
}

double progress_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int progress_due(const struct progress *p)
{
	return p->on && progress_now() - p->last >= PROGRESS_EVERY;
}

void progress_draw(struct progress *p, double frac, const char *fmt, ...)
{
	char bar[BAR_WIDTH + 1];
	va_list ap;
	int n;

	if (!p->on)
		return;
	fputs("\r\033[K", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	if (frac >= 0) {
		if (frac > 1)
			frac = 1;
		n = (int)(frac * BAR_WIDTH);
		memset(bar, '=', (size_t)n);
		memset(bar + n, ' ', (size_t)(BAR_WIDTH - n));
		bar[BAR_WIDTH] = '\0';
		/* rounded down: 100.0% only when all is done */
		fprintf(stderr, " [%s] %5.1f%%", bar, (int)(frac * 1000) / 10.0);
	}
	fflush(stderr);
	p->shown = 1;
	p->last = progress_now();
}

void progress_clear(struct progress *p)
{
	if (!p->shown)
		return;
	fputs("\r\033[K", stderr);
	fflush(stderr);
	p->shown = 0;
}
