/*
 * hash.c - the two hashes of the format (docs/FORMAT.md): the name hash a
 * dirent key carries and the checksum every data block ends with, both
 * XXH3-64 from libxxhash.
 *
 * Invariants:
 *  1. Both are part of the format: a change to either makes every image
 *     unreadable, so they change only with KV_FORMAT_VERSION.
 *  2. The name hash fits in KV_HASH_BITS bits, which leaves room in a readdir
 *     cookie for the slot (dirent.c).
 */
#include <xxhash.h>

#include "kv_int.h"

uint64_t kv_name_hash_xxh3(const char *name, size_t len)
{
	return XXH3_64bits(name, len) >> (64 - KV_HASH_BITS);
}

uint64_t (*kv_name_hash)(const char *name, size_t len) = kv_name_hash_xxh3;

uint64_t kv_dirent_hash(const char *name, size_t len)
{
	return kv_name_hash(name, len);
}

uint64_t kv_block_csum(uint64_t ino, uint64_t idx, const void *data, size_t len)
{
	return XXH3_64bits_withSeed(data, len, ino * 0x9E3779B97F4A7C15ULL + idx);
}

uint64_t kv_block_zcsum(uint64_t ino, uint64_t idx, const void *frame, size_t len)
{
	return XXH3_64bits_withSeed(frame, len, (ino * 0x9E3779B97F4A7C15ULL + idx) ^
						    0xC0DEC0DEC0DEC0DEULL);
}
