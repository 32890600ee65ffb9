/*
 * writer.h - the writer of a read-write env: its thread, and the role a
 * kv_write caller may take instead (writer.c).
 */
#ifndef KVFS_KV_WRITER_H
#define KVFS_KV_WRITER_H

#include "kv_int.h"

int kv_writer_start(kv_env *env);
/* Run every queued op, then end the thread. */
void kv_writer_stop(kv_env *env);
/* LMDB reports a short write (the disk filled up mid-commit) as EIO: true
 * when the image's filesystem has no room left, so the caller can say
 * ENOSPC (env.c). */
int kv_disk_full(kv_env *env);
/* Grow the map one step; -ENOSPC at the maximum (env.c). */
int kv_map_grow(kv_env *env);

#endif
