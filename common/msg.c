/*
 * msg.c - the one formatter of message lines (common.h): the daemon's log
 * (stderr or syslog) and the tools' messages on stderr.
 *
 *   PROG: SUBJECT: TEXT      on a stream
 *   SUBJECT: TEXT            for syslog(3), which adds its own ident
 *
 * Invariants:
 *  1. A line is written with one stdio call, so lines from threads do not
 *     interleave (stdio locks the stream per call).
 *  2. The subject is named once: left out when the text begins with it
 *     ("SUBJECT: ...").
 */
#include <stdlib.h>
#include <string.h>

#include "common.h"

#define LINE_MAX_STACK 1024

/* The subject to print before text: "" when none or when text begins with
 * it as a subject does ("SUBJECT:" or the whole text). */
static const char *subject_for(const char *subject, const char *text, const char **sep)
{
	size_t n = subject ? strlen(subject) : 0;

	*sep = "";
	if (!n || (strncmp(text, subject, n) == 0 && (text[n] == ':' || text[n] == '\0')))
		return "";
	*sep = ": ";
	return subject;
}

void msg_vformat(char *buf, size_t len, const char *subject, const char *fmt, va_list ap)
{
	const char *subj, *sep;
	size_t head, tlen;

	if (!len)
		return;
	if (vsnprintf(buf, len, fmt, ap) < 0)
		buf[0] = '\0';
	subj = subject_for(subject, buf, &sep);
	head = strlen(subj) + strlen(sep);
	if (!head)
		return;
	if (head >= len) { /* no room for the text at all */
		snprintf(buf, len, "%s", subj);
		return;
	}
	/* move the text right (cut to fit), then put the subject before it */
	tlen = strlen(buf);
	if (head + tlen >= len)
		tlen = len - 1 - head;
	memmove(buf + head, buf, tlen);
	buf[head + tlen] = '\0';
	memcpy(buf, subj, strlen(subj));
	memcpy(buf + strlen(subj), sep, strlen(sep));
}

void msg_vprint(FILE *f, const char *prog, const char *subject, const char *fmt, va_list ap)
{
	char stack[LINE_MAX_STACK], *text = stack;
	const char *subj, *sep;
	va_list again;
	int n;

	va_copy(again, ap);
	n = vsnprintf(stack, sizeof(stack), fmt, ap);
	if (n >= (int)sizeof(stack) && (text = malloc((size_t)n + 1)) != NULL)
		vsnprintf(text, (size_t)n + 1, fmt, again);
	else if (!text) /* out of memory: the line goes cut */
		text = stack;
	va_end(again);
	if (n < 0)
		stack[0] = '\0';
	subj = subject_for(subject, text, &sep);
	fprintf(f, "%s: %s%s%s\n", prog, subj, sep, text);
	if (text != stack)
		free(text);
}

void msg_print(FILE *f, const char *prog, const char *subject, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	msg_vprint(f, prog, subject, fmt, ap);
	va_end(ap);
}
