/*
 * wrec.h - the write log of the power-loss harness: what the recorder shim
 * (wrec.c) saw the daemon do to the image file, and what the workload
 * (pl_worker.c) knew to be durable, in one append-only file read by the
 * replayer (replay.c).
 *
 * A record is a struct wrec header, followed by len payload bytes for WRITE,
 * USER and UNSUPPORTED records (wrec_payload); in the others off and len
 * carry values. Every record is appended by one write(2) or writev(2)
 * on an O_APPEND descriptor, so records from the daemon's threads and from
 * the workload never interleave, and their order in the file is the order in
 * which the calls they describe completed.
 *
 * Invariants the replayer relies on:
 *  1. A WRITE is logged after the real call returned, with the bytes it
 *     reported written (a short write logs the short count).
 *  2. SYNC_BEGIN is logged before the real fsync/fdatasync is called and
 *     SYNC_END (same id) after it returned: only writes logged before the
 *     BEGIN are known durable once the END says it succeeded. A write racing
 *     the sync from another thread lands after the BEGIN and is not counted.
 *  3. A WRITE with WREC_DSYNC went through an O_DSYNC/O_SYNC descriptor: it
 *     was durable when it returned (it is no barrier for other writes).
 *  4. A USER record is one line of text. Claims: "have PATH LEN HASH",
 *     "gone PATH" or "drop PATH" (PATH relative to the mount), appended by
 *     the workload after the call that made its claim true returned (fsync(2)
 *     of the file for "have", of its directory after an unlink for "gone"),
 *     or before it starts to change a path it claimed ("drop"). Steps:
 *     "step N EFFECT...", appended after the N-th call that kvfs acknowledged
 *     as one change returned (N counts from 1, one step under way at a
 *     time), each EFFECT what it did to the namespace: "set PATH LEN HASH"
 *     (a file that now holds LEN bytes of digest HASH), "del PATH", "mkdir
 *     PATH", "rmdir PATH", or "sync" (an fsync, fdatasync or fsync of a
 *     directory: every step up to N is durable).
 */
#ifndef WREC_H
#define WREC_H

#include <stdint.h>

#define WREC_MAGIC 0x43455257u /* "WREC" little-endian */

enum wrec_type {
	WREC_OPEN = 1,       /* off: fd, len: open flags; no payload */
	WREC_WRITE = 2,      /* off: file offset, len: bytes (payload) */
	WREC_SYNC_BEGIN = 3, /* off: sync id */
	WREC_SYNC_END = 4,   /* off: sync id; flags: WREC_OK if the call succeeded */
	WREC_TRUNC = 5,      /* off: new size */
	WREC_USER = 6,       /* payload: one line of text from the workload */
	WREC_UNSUPPORTED = 7 /* payload: text; the log cannot be replayed honestly */
};

#define WREC_DSYNC 1u /* WRITE: through an O_DSYNC or O_SYNC descriptor */
#define WREC_OK 2u    /* SYNC_END: the sync call returned 0 */

struct wrec {
	uint32_t magic;
	uint16_t type;
	uint16_t flags;
	uint64_t off;
	uint64_t len;
};

/* The payload bytes that follow the header h. */
static inline uint64_t wrec_payload(const struct wrec *h)
{
	if (h->type == WREC_WRITE || h->type == WREC_USER || h->type == WREC_UNSUPPORTED)
		return h->len;
	return 0;
}

/* The digest a USER "have" record gives of a file's bytes (FNV-1a, 64 bits):
 * it only has to tell the bytes written from others, not resist anyone. */
static inline uint64_t wrec_hash(uint64_t h, const unsigned char *p, uint64_t n)
{
	while (n--)
		h = (h ^ *p++) * 1099511628211ULL;
	return h;
}

#define WREC_HASH_INIT 14695981039346656037ULL

#endif
