/*
 * defaults.c - the mount options an image may hold as its defaults
 * (kvfs-tune -o), checked alike by kvfs-tune before it stores them and by
 * the daemon before it uses them.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

static int one_of(const char *v, const char *const *words)
{
	for (; *words; words++)
		if (strcmp(v, *words) == 0)
			return 1;
	return 0;
}

int compress_parse(const char *v, int *level, char *err, size_t errlen)
{
	char *end;
	long n;

	*level = COMPRESS_LEVEL_DEFAULT;
	if (!v || !*v || strcmp(v, "zstd") == 0)
		return 0;
	if (strncmp(v, "zstd:", 5) == 0) {
		n = strtol(v + 5, &end, 10);
		if (end != v + 5 && !*end && n >= 1 && n <= COMPRESS_LEVEL_MAX) {
			*level = (int)n;
			return 0;
		}
	}
	snprintf(err, errlen, "compress must be zstd or zstd:LEVEL (1 to %d), not '%s'",
		 COMPRESS_LEVEL_MAX, v);
	return -EINVAL;
}

/* Whether the len bytes at d are a compress option. */
static int is_compress(const char *d, size_t len)
{
	return (len == 8 && strncmp(d, "compress", 8) == 0) ||
	       (len > 8 && strncmp(d, "compress=", 9) == 0) ||
	       (len == 10 && strncmp(d, "nocompress", 10) == 0);
}

/* Append the len bytes at s to out (used bytes so far), a comma first
 * unless out is empty; -E2BIG when they do not fit. */
static int append(char *out, size_t outlen, size_t *used, const char *s, size_t len)
{
	size_t need = *used + (*used != 0) + len;

	if (need > MOUNT_DEFAULTS_MAX || need >= outlen)
		return -E2BIG;
	if (*used)
		out[(*used)++] = ',';
	memcpy(out + *used, s, len);
	*used += len;
	out[*used] = '\0';
	return 0;
}

int mount_defaults_compress(const char *opts, const char *opt, char *out, size_t outlen)
{
	size_t used = 0;
	int rc = 0;

	if (outlen == 0)
		return -E2BIG;
	out[0] = '\0';
	for (const char *d = opts; *d && rc == 0;) {
		size_t n = strcspn(d, ",");

		if (!is_compress(d, n))
			rc = append(out, outlen, &used, d, n);
		d += n + (d[n] == ',');
	}
	if (rc == 0 && opt)
		rc = append(out, outlen, &used, opt, strlen(opt));
	return rc;
}

int mount_defaults_level(const char *opts)
{
	char v[MOUNT_DEFAULTS_MAX + 1], err[160];
	int level = 0, l;

	for (const char *d = opts; *d;) {
		size_t n = strcspn(d, ",");

		if (is_compress(d, n) && n <= MOUNT_DEFAULTS_MAX) {
			const char *value = n > 8 ? v + 9 : NULL; /* after "compress=" */

			l = 0; /* nocompress */
			memcpy(v, d, n);
			v[n] = '\0';
			if (v[0] == 'c' && compress_parse(value, &l, err, sizeof(err)))
				return -EINVAL;
			level = l;
		}
		d += n + (d[n] == ',');
	}
	return level;
}

/* Check one option (len bytes at opt); 0, or -EINVAL with err set. */
static int check_one(const char *opt, size_t len, char *err, size_t errlen)
{
	static const char *const flags[] = {"noatime", "relatime", "strictatime", "acl", "noacl",
					    "compress", "nocompress", NULL};
	static const char *const modes[] = {"full", "fsync", "none", NULL};
	char item[MOUNT_DEFAULTS_MAX + 1], *v;
	uint64_t n;

	if (len == 0) {
		snprintf(err, errlen, "an empty option");
		return -EINVAL;
	}
	memcpy(item, opt, len);
	item[len] = '\0';
	if (one_of(item, flags))
		return 0;
	v = strchr(item, '=');
	if (v)
		*v++ = '\0';
	if (v && strcmp(item, "durability") == 0) {
		if (one_of(v, modes))
			return 0;
		snprintf(err, errlen, "durability must be full, fsync or none, not '%s'", v);
	} else if (v && strcmp(item, "max_size") == 0) {
		if (size_parse(v, &n) == 0 && n >= (1 << 20))
			return 0;
		snprintf(err, errlen, "max_size '%s' is not a size of 1M or more", v);
	} else if (v && strcmp(item, "commit") == 0) {
		if (size_parse(v, &n) == 0)
			return 0;
		snprintf(err, errlen, "commit '%s' is not a number of seconds", v);
	} else if (v && strcmp(item, "compress") == 0) {
		int level;

		return compress_parse(v, &level, err, errlen);
	} else if (v && strcmp(item, "window") == 0) {
		if (size_parse(v, &n) == 0 && n <= MOUNT_WINDOW_MS_MAX)
			return 0;
		snprintf(err, errlen, "window must be 0 to %d milliseconds, not '%s'",
			 MOUNT_WINDOW_MS_MAX, v);
	} else {
		snprintf(err, errlen, "'%.*s' cannot be a default (durability=, max_size=, "
			 "commit=, window=, noatime, relatime, strictatime, acl, noacl, compress[=], "
			 "nocompress can)", (int)len, opt);
	}
	return -EINVAL;
}

int mount_defaults_check(const char *opts, char *err, size_t errlen)
{
	size_t len = strlen(opts);

	if (len > MOUNT_DEFAULTS_MAX) {
		snprintf(err, errlen, "%zu bytes of options, at most %d", len, MOUNT_DEFAULTS_MAX);
		return -EINVAL;
	}
	if (len == 0)
		return 0; /* none */
	for (const char *p = opts;;) {
		const char *comma = strchr(p, ',');
		size_t n = comma ? (size_t)(comma - p) : strlen(p);
		int rc = check_one(p, n, err, errlen);

		if (rc)
			return rc;
		if (!comma)
			return 0;
		p = comma + 1;
	}
}
