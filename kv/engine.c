/*
 * engine.c - which engine serves an image name (engine.h): a postgresql://
 * or postgres:// URL names a database (pg.c), anything else an LMDB image
 * file (lmdb.c).
 */
#include <string.h>

#include "engine.h"

int kv_image_is_url(const char *image)
{
	return strncmp(image, "postgresql://", 13) == 0 || strncmp(image, "postgres://", 11) == 0;
}

const struct kv_engine *kv_engine_for(const char *where)
{
	return kv_image_is_url(where) ? &kv_engine_pg : &kv_engine_lmdb;
}
