/*
 * steps.h - the namespaces the power-loss workload's steps build (wrec.h,
 * USER "step" records), and the check that a crash image's exported tree is
 * one of them: the state after some number of steps, at least every step a
 * sync covered, at most the step under way at the cut.
 *
 * Functions that fail print a message and return -1 (the replayer's tools
 * rule); steps_match's answer is a sentence in a static buffer.
 */
#ifndef STEPS_H
#define STEPS_H

#include <stddef.h>

/* Whether the USER record text (len bytes) is a step record. */
int steps_is_step(const char *text, size_t len);

/* Add the next step record, in log order: 0, or -1 when it is not the
 * next step (numbered from 1) or cannot be read. */
int steps_add(const char *text, size_t len);

/* How many steps were added; whether step n (1 ...) was a sync. */
size_t steps_count(void);
int steps_is_sync(size_t n);

/* The tree exported to dir is the namespace after k steps, for one k in
 * [floor, hi] (floor never less than at the last call)? NULL and *k, or why
 * not: the nearest state and how the tree differs from it. */
const char *steps_match(const char *dir, size_t floor, size_t hi, size_t *k);

void steps_release(void);

#endif
