/*
 * gen.c - the differential tester's operations made from a seed: a kind
 * picked by weight, then its paths (the small namespace of ops.c, where
 * names collide), flags, offsets, lengths, modes, owners, times and xattr
 * names; acl_ops.c and copy_ops.c make their own kinds' with the same
 * random numbers. One seed gives one sequence, on every machine.
 */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>

#include "difftest.h"

static const uint8_t dir_paths[] = {3, 4, 7, 8, 11, 12};
static const uint8_t file_paths[] = {0, 1, 2, 5, 6, 9, 10, 13, 14, 15, 16, 17};

static const uint32_t file_modes[] = {0644, 0600, 0755, 0444, 0000, 04755, 02755, 06755,
				      02645, 01777, 0640};
static const uint32_t dir_modes[] = {0755, 0700, 0777, 0555, 02755, 01777, 0711};
static const int32_t ids[] = {0, 1000, 65534, -1};

int ops_seek_holes;

/* Relative frequency of each kind. */
static const uint8_t weights[OP_NKINDS] = {
	[OP_OPEN] = 12, [OP_CLOSE] = 2, [OP_WRITE] = 5, [OP_PWRITE] = 10, [OP_READ] = 2,
	[OP_PREAD] = 7, [OP_LSEEK] = 2, [OP_FTRUNCATE] = 3, [OP_TRUNCATE] = 3,
	[OP_FALLOCATE] = 3, [OP_FSYNC] = 1, [OP_FSTAT] = 3, [OP_STAT] = 3, [OP_MKDIR] = 6,
	[OP_RMDIR] = 4, [OP_UNLINK] = 5, [OP_RENAME] = 7, [OP_LINK] = 3, [OP_SYMLINK] = 3,
	[OP_READLINK] = 2, [OP_MKFIFO] = 1, [OP_SETXATTR] = 3, [OP_FSETXATTR] = 1,
	[OP_REMOVEXATTR] = 2, [OP_GETXATTR] = 2, [OP_LISTXATTR] = 1, [OP_CHMOD] = 2,
	[OP_FCHMOD] = 1, [OP_CHOWN] = 1, [OP_UTIMENS] = 2, [OP_FUTIMENS] = 1,
	[OP_READDIR] = 3, [OP_READFILE] = 3, [OP_MMAP] = 3, [OP_COPY] = 5, [OP_SETACL] = 5,
	[OP_REMOVEACL] = 2,
};

uint64_t rnd(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

uint64_t below(uint64_t *s, uint64_t n)
{
	return rnd(s) % n;
}

int chance(uint64_t *s, unsigned pct)
{
	return below(s, 100) < pct;
}

uint8_t pick_path(uint64_t *s, int want)
{
	unsigned r = (unsigned)below(s, 100);

	if (r < 2)
		return P_DOT;
	if (r < 4)
		return P_L255;
	if (r < 5)
		return P_L256;
	if (want == DIR_NAME && chance(s, 85))
		return dir_paths[below(s, sizeof(dir_paths))];
	if (want == FILE_NAME && chance(s, 85))
		return file_paths[below(s, sizeof(file_paths))];
	r = (unsigned)below(s, 100);
	if (r < 40)
		return (uint8_t)below(s, 5);
	if (r < 75)
		return (uint8_t)(5 + below(s, 8));
	return (uint8_t)(13 + below(s, 5));
}

/* Offsets: mostly inside the first blocks, often on either side of a block
 * boundary of kvfs (4072) or of a page (4096), sometimes far (sparse). */
uint64_t gen_off(uint64_t *s)
{
	unsigned r = (unsigned)below(s, 100);
	uint64_t k = below(s, 20), d = below(s, 7);

	if (r < 45)
		return below(s, 8192);
	if (r < 75)
		return below(s, 65536);
	if (r < 85)
		return k * 4072 + d >= 3 ? k * 4072 + d - 3 : 0;
	if (r < 95)
		return k * 4096 + d >= 3 ? k * 4096 + d - 3 : 0;
	return below(s, 1 << 20);
}

/* Offsets and sizes far past any file, now and then: the limits of 32-bit
 * counters, the largest file size Linux allows (MAX_LFS_FILESIZE, 2^63 - 1)
 * and just under it, and "negative" values (as off_t). They reach kvfs as
 * huge WRITE, READ, SETATTR size and FALLOCATE requests (or are refused by
 * the kernel alike on both sides). */
uint64_t far_off(uint64_t *s, uint64_t near)
{
	static const uint64_t far[] = {
		(1ULL << 31) - 1, 1ULL << 31, (1ULL << 32) + 5, 1ULL << 40, (1ULL << 44) - 3,
		1ULL << 62, (1ULL << 63) - 1 - 4096, (1ULL << 63) - 1, 1ULL << 63,
		(uint64_t)-4096, (uint64_t)-1,
	};

	if (!chance(s, 4))
		return near;
	return far[below(s, sizeof(far) / sizeof(far[0]))] - below(s, 3);
}

uint64_t gen_len(uint64_t *s)
{
	unsigned r = (unsigned)below(s, 100);

	if (r < 5)
		return 0;
	if (r < 40)
		return 1 + below(s, 100);
	if (r < 80)
		return 100 + below(s, 4900);
	return 5000 + below(s, 15000);
}

static uint64_t gen_size(uint64_t *s)
{
	unsigned r = (unsigned)below(s, 100);

	if (r < 15)
		return 0;
	if (r < 55)
		return below(s, 8192);
	if (r < 90)
		return below(s, 65536);
	return below(s, 1200000);
}

static uint32_t gen_open_flags(uint64_t *s)
{
	unsigned r = (unsigned)below(s, 100);
	uint32_t f = r < 20 ? O_RDONLY : r < 35 ? O_WRONLY : O_RDWR;

	if (chance(s, 70)) {
		f |= O_CREAT;
		if (chance(s, 20))
			f |= O_EXCL;
	}
	if (chance(s, 10))
		f |= O_TRUNC;
	if (chance(s, 10))
		f |= O_APPEND;
	if (chance(s, 5))
		f |= O_NOFOLLOW;
	if (chance(s, 5))
		f |= O_DIRECTORY;
	return f | O_NONBLOCK; /* a FIFO opens without waiting for its other end */
}

static void gen_time(uint64_t *s, int64_t t[2])
{
	unsigned r = (unsigned)below(s, 100);

	if (r < 60) {
		t[0] = 1000000000 + (int64_t)below(s, 200000000); /* 2001-2007 */
		t[1] = (int64_t)below(s, 1000000000);
	} else {
		t[0] = 0;
		t[1] = r < 80 ? UTIME_NOW : UTIME_OMIT;
	}
}

static void gen_xattr(uint64_t *s, struct op *op)
{
	unsigned r = (unsigned)below(s, 100);

	op->name = (uint8_t)(chance(s, 90) ? below(s, 3) : 3 + below(s, NXNAMES - 3));
	op->len = r < 10 ? 0 : r < 70 ? 1 + below(s, 64) : r < 95 ? 64 + below(s, 2000)
		: r < 98 ? below(s, 65537) : 65536 + below(s, 2);
	r = (unsigned)below(s, 100);
	op->flags = r < 60 ? 0 : r < 80 ? XATTR_CREATE : XATTR_REPLACE;
	op->dseed = (uint32_t)rnd(s);
}

/* The weight of kind k in this run: with --seek more lseeks, and no mmap,
 * whose read faults make tmpfs allocate the pages of a hole (then data to
 * SEEK_DATA) where kvfs keeps the hole. */
static unsigned weight(int k)
{
	if (ops_seek_holes && k == OP_MMAP)
		return 0;
	return ops_seek_holes && k == OP_LSEEK ? 8 : weights[k];
}

static enum op_kind pick_kind(uint64_t *s)
{
	static unsigned total;
	unsigned r;
	int k;

	if (!total)
		for (k = 0; k < OP_NKINDS; k++)
			total += weight(k);
	r = (unsigned)below(s, total);
	for (k = 0; r >= weight(k); k++)
		r -= weight(k);
	return (enum op_kind)k;
}

int op_creates(const struct op *op)
{
	return op->kind == OP_MKDIR || op->kind == OP_MKFIFO || op->kind == OP_SYMLINK ||
	       (op->kind == OP_OPEN && (op->flags & O_CREAT));
}

static void gen_one(uint64_t *s, struct op *op)
{
	memset(op, 0, sizeof(*op));
	op->kind = (uint8_t)pick_kind(s);
	op->fd = (uint8_t)below(s, NFDS);
	op->p1 = pick_path(s, chance(s, 60) ? FILE_NAME : ANY);
	op->p2 = pick_path(s, chance(s, 60) ? FILE_NAME : ANY);
	switch (op->kind) {
	case OP_OPEN:
		op->flags = gen_open_flags(s);
		op->mode = file_modes[below(s, sizeof(file_modes) / sizeof(file_modes[0]))];
		op->p1 = pick_path(s, (op->flags & O_DIRECTORY) || chance(s, 10) ? DIR_NAME
										: FILE_NAME);
		break;
	case OP_WRITE: case OP_PWRITE:
		op->off = far_off(s, gen_off(s));
		op->len = gen_len(s);
		op->dseed = (uint32_t)rnd(s);
		break;
	case OP_READ: case OP_PREAD:
		op->off = far_off(s, gen_off(s));
		op->len = chance(s, 10) ? 1 << 20 : gen_len(s);
		break;
	case OP_MMAP:
		op->flags = chance(s, 60); /* 1: write through the map */
		op->off = gen_off(s);
		op->len = gen_len(s);
		op->dseed = (uint32_t)rnd(s);
		break;
	case OP_COPY:
		copy_generate(s, op);
		break;
	case OP_LSEEK:
		/* SEEK_SET, SEEK_CUR, SEEK_END; with --seek SEEK_DATA, SEEK_HOLE */
		op->flags = (uint32_t)below(s, ops_seek_holes ? 5 : 3);
		op->off = below(s, 10000);
		if (op->flags != SEEK_SET && chance(s, 30))
			op->off = (uint64_t)-(int64_t)below(s, 5000);
		break;
	case OP_FTRUNCATE: case OP_TRUNCATE:
		op->off = far_off(s, gen_size(s));
		break;
	case OP_FALLOCATE: {
		unsigned r = (unsigned)below(s, 100);
		op->flags = r < 70 ? FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE
			: r < 80 ? 0 : r < 88 ? FALLOC_FL_KEEP_SIZE
			: r < 94 ? FALLOC_FL_ZERO_RANGE
			: FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE;
		op->off = far_off(s, gen_off(s));
		/* a far length only for holes: tmpfs allocates what the others ask */
		op->len = r < 70 ? far_off(s, gen_len(s)) : gen_len(s);
		break;
	}
	case OP_STAT: case OP_CHOWN: case OP_UTIMENS:
		op->flags = chance(s, 40) ? AT_SYMLINK_NOFOLLOW : 0;
		op->uid = ids[below(s, 4)];
		op->gid = ids[below(s, 4)];
		gen_time(s, op->at[0]);
		gen_time(s, op->at[1]);
		break;
	case OP_FUTIMENS:
		gen_time(s, op->at[0]);
		gen_time(s, op->at[1]);
		break;
	case OP_MKDIR:
		op->p1 = pick_path(s, chance(s, 90) ? DIR_NAME : ANY);
		op->mode = dir_modes[below(s, sizeof(dir_modes) / sizeof(dir_modes[0]))];
		break;
	case OP_RMDIR: case OP_READDIR:
		op->p1 = pick_path(s, chance(s, 80) ? DIR_NAME : ANY);
		break;
	case OP_RENAME: {
		unsigned r = (unsigned)below(s, 100);
		op->flags = r < 60 ? 0 : r < 80 ? RENAME_NOREPLACE : RENAME_EXCHANGE;
		if (chance(s, 30))
			op->p1 = pick_path(s, DIR_NAME);
		break;
	}
	case OP_LINK:
		op->flags = chance(s, 20) ? AT_SYMLINK_FOLLOW : 0;
		break;
	case OP_SYMLINK:
		op->name = (uint8_t)(chance(s, 85) ? below(s, 8) : 8 + below(s, NTARGETS - 8));
		break;
	case OP_MKFIFO:
		op->mode = file_modes[below(s, 4)];
		break;
	case OP_SETXATTR: case OP_FSETXATTR:
		gen_xattr(s, op);
		break;
	case OP_REMOVEXATTR: case OP_GETXATTR: case OP_LISTXATTR:
		gen_xattr(s, op);
		op->flags = chance(s, 30) ? AT_SYMLINK_NOFOLLOW : 0;
		op->len = below(s, 3); /* buffer: 0 (ask the size), large, 4 bytes */
		break;
	case OP_CHMOD: case OP_FCHMOD:
		op->mode = chance(s, 50) ? file_modes[below(s, sizeof(file_modes) / 4)]
					 : dir_modes[below(s, sizeof(dir_modes) / 4)];
		break;
	case OP_SETACL: case OP_REMOVEACL:
		acl_generate(s, op);
		break;
	default:
		break;
	}
	if (op_creates(op))
		op->umask = acl_gen_umask(s);
}

void ops_generate(uint64_t seed, struct op *ops, size_t n)
{
	uint64_t s = seed * 0x2545f4914f6cdd1dULL + 1;

	for (size_t i = 0; i < n; i++)
		gen_one(&s, &ops[i]);
}
