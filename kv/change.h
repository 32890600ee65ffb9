/*
 * change.h - what a shared store's mounts tell each other (change.c): the
 * notes of the open transaction, the mount's name in its messages, and
 * the watcher the other mounts' messages go to; the windows a shared
 * store lost.
 */
#ifndef KVFS_KV_CHANGE_H
#define KVFS_KV_CHANGE_H

#include <stddef.h>
#include <stdint.h>

#include "engine.h"
#include "kv.h"

/* env->chg. No lock of its own: the notes (buf, len, cap, seen) are the
 * writer's role's (kv_int.h invariant 2; change.c invariant 2); mount_id
 * is set at open, before any thread reads it; watch_fn and watch_arg are
 * kv_watch's, set before the engine's listener starts and cleared after it
 * stopped, so the listener's deliveries only read them. */
struct kv_change {
	uint64_t mount_id;        /* random, set at open */
	char *buf;                /* the notes of the open transaction */
	size_t len, cap;
	uint64_t seen[256];       /* inodes noted lately */
	kv_change_fn watch_fn;    /* kv_watch's */
	void *watch_arg;
};

/* env->lost: windows of told changes a shared store lost (window.c
 * invariant 5), for kv_lost_check. ino, n and cap are guarded by the
 * writer's q_lock (env->w.q_lock); count is atomic, added to (release) with
 * q_lock held after ino took the loss's inodes, read (acquire) without it. */
struct kv_lost {
	_Atomic uint64_t count;   /* the windows lost */
	uint64_t *ino;            /* inodes they changed, sorted, each until an
	                             fsync of it reports it */
	size_t n, cap;
};

/* change.c. The largest message (a NOTIFY payload is under 8000 bytes). */
#define KV_CHANGE_MSG_MAX 7800
/* A message's head, "kvfs1 " and the mount's 16 hex digits: written at buf
 * (KV_CHANGE_HEAD + 1 bytes, NUL included); its length. A message of the
 * head alone tells nothing (a mount's hello). */
#define KV_CHANGE_HEAD 22
size_t kv_change_head(const kv_env *e, char *buf);
void kv_change_init(kv_env *e);
/* A top-level write transaction begins: no notes yet. */
void kv_change_begin(kv_env *e);
/* Note a changed inode, a name added or removed in dir (the role). */
void kv_change_ino(kv_env *e, uint64_t ino);
void kv_change_name(kv_env *e, uint64_t dir, const char *name, size_t len);
/* The open transaction's changes were told, and its commit failed (the
 * role; window.c invariant 5): count the loss, and keep the inodes it
 * changed for kv_lost_check. */
void kv_change_lost(kv_env *e);
/* Hand the notes to the engine just before x commits. -errno. */
int kv_change_publish(kv_env *e, kv_etxn *x);
/* A message from the engine's listener: to the watcher, unless our own.
 * -EINVAL for a message that is not one. */
int kv_change_deliver(kv_env *e, const char *msg, size_t len);

#endif
