/*
 * copy_ops.c - copy_file_range(2) in the differential tester's mix: its
 * generation, its run on one side, and its line.
 *
 * Whether kvfs answers FUSE's COPY_FILE_RANGE itself or the kernel falls
 * back to a copy through read and write, what a user sees must be what
 * tmpfs gives: the count (short at the source's end, 0 at or past it), the
 * errno, the offsets after the call, the bytes copied and the sizes. So a
 * copy takes its source and its destination from the fd slots the mix
 * holds open (any kind of object, any open mode: O_APPEND and read-only
 * destinations give EBADF, directories EISDIR, FIFOs EINVAL) or opens a
 * path for the op alone, with an open mode of its own; it copies between
 * two files or within one (to a range before or after the source's, or one
 * that overlaps it: EINVAL), at explicit offsets or at the fds' own
 * (NULL offset pointers), mostly where the mix writes, punches holes and
 * fallocates (gen_off), sometimes far, half the time at offsets alike
 * within a block (so kvfs shares the blocks between: later writes, punches,
 * truncates and unlinks of either file then test copy on write); lengths of 0, of a few blocks, of
 * 1 MiB + 5 and 3 MiB + 17, huge ones (short counts, EOVERFLOW), and now
 * and then flags that are not 0 (EINVAL).
 *
 * Invariants:
 *  1. The fields come from the seed alone (difftest.h invariant 1); the run
 *     looks at the state only to bound the copy (2), alike on both sides.
 *  2. No copy moves more than COPY_MAX bytes: a huge length whose copy
 *     would (the source a sparse file of terabytes) is cut to COPY_MAX,
 *     unless the offsets plus the length wrap (EOVERFLOW is kept).
 *  3. An fd opened here for a path is closed before the op returns; the
 *     slots keep what they held.
 *  4. The result holds, after a copy that moved bytes, the offsets the call
 *     left and the bytes the destination reads back in the copied range
 *     (opened again with O_NOATIME: the read leaves the atimes alone).
 *
 * Field use: fd, p1 the source (slot or path), fd2, p2 the destination;
 * off, off2, len; flags the call's flags; mode the CP_* bits; name the open
 * modes of a source path (low 4 bits) and of a destination path (high 4).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "difftest.h"

#define COPY_MAX (4ULL << 20)

#define CP_IN_PATH 1  /* the source is p1, opened for the op */
#define CP_OUT_PATH 2 /* the destination is p2, opened for the op */
#define CP_IN_POS 4   /* off_in NULL: the source fd's offset, advanced */
#define CP_OUT_POS 8  /* off_out NULL */
#define CP_NEXT 16    /* a slot end is the first open slot from the one given
			 (the same on both sides: opens are compared), so
			 that more copies find open fds */

static const struct {
	int flags;
	const char *name;
} modes[] = {
	{O_RDONLY, "O_RDONLY"}, {O_RDWR, "O_RDWR"}, {O_WRONLY, "O_WRONLY"},
	{O_WRONLY | O_APPEND, "O_WRONLY|O_APPEND"}, {O_RDWR | O_TRUNC, "O_RDWR|O_TRUNC"},
	{O_WRONLY | O_CREAT, "O_WRONLY|O_CREAT"}, {O_RDWR | O_CREAT, "O_RDWR|O_CREAT"},
};
#define M_RDONLY 0
#define M_RDWR 1
#define M_WRONLY 2
#define M_APPEND 3
#define M_TRUNC 4
#define M_WRONLY_CREAT 5
#define M_RDWR_CREAT 6

static const uint32_t bad_flags[] = {1, 2, 4, 0x80000000u, 0xffffffffu};

static uint64_t gen_copy_len(uint64_t *s)
{
	static const uint64_t huge[] = {
		1ULL << 31, (1ULL << 32) + 5, (1ULL << 63) - 1, (uint64_t)-1, (uint64_t)-4096,
	};
	unsigned r = (unsigned)below(s, 100);

	if (r < 88)
		return gen_len(s);
	if (r < 94)
		return 20000 + below(s, 300000);
	if (r < 96)
		return r < 95 ? (1 << 20) + 5 : (3 << 20) + 17;
	return huge[below(s, sizeof(huge) / sizeof(huge[0]))] - below(s, 3);
}

/* Within one file: a range right after the source's, right before it, or
 * one that overlaps it. */
static uint64_t gen_same_off(uint64_t *s, uint64_t off, uint64_t len)
{
	unsigned r = (unsigned)below(s, 100);
	uint64_t d = chance(s, 50) ? below(s, 2) : below(s, 8192);

	if (len > (1ULL << 40))
		return gen_off(s);
	if (r < 40)
		return off + len + d;
	if (r < 75)
		return off >= len + d ? off - len - d : off + len + d;
	d = len ? below(s, len) : 0;
	return chance(s, 50) || off < d ? off + d : off - d;
}

void copy_generate(uint64_t *s, struct op *op)
{
	unsigned r = (unsigned)below(s, 100);
	unsigned in_mode = r < 75 ? M_RDONLY : r < 92 ? M_RDWR : M_WRONLY, out_mode;

	r = (unsigned)below(s, 100);
	out_mode = r < 30   ? M_WRONLY_CREAT
		   : r < 50 ? M_RDWR_CREAT
		   : r < 65 ? M_WRONLY
		   : r < 80 ? M_RDWR
		   : r < 88 ? M_APPEND
		   : r < 95 ? M_RDONLY
			    : M_TRUNC;
	op->name = (uint8_t)(in_mode | out_mode << 4);
	op->fd2 = (uint8_t)below(s, NFDS);
	op->p1 = pick_path(s, chance(s, 90) ? FILE_NAME : ANY);
	op->p2 = pick_path(s, chance(s, 90) ? FILE_NAME : ANY);
	op->mode = (chance(s, 35) ? CP_IN_PATH : 0) | (chance(s, 40) ? CP_OUT_PATH : 0) |
		   (chance(s, 10) ? CP_IN_POS : 0) | (chance(s, 10) ? CP_OUT_POS : 0) |
		   (chance(s, 60) ? CP_NEXT : 0);
	op->off = far_off(s, gen_off(s));
	op->len = gen_copy_len(s);
	if (chance(s, 30)) { /* within one file, through one fd or two */
		op->fd2 = op->fd;
		op->p2 = op->p1;
		op->mode = (op->mode & ~CP_OUT_PATH) | (op->mode & CP_IN_PATH ? CP_OUT_PATH : 0);
		op->off2 = gen_same_off(s, op->off, op->len);
	} else {
		op->off2 = far_off(s, gen_off(s));
		if (chance(s, 50) && op->off < (1ULL << 40) && op->off2 < (1ULL << 40)) {
			/* alike within a 4072-byte block (kvfs's default): kvfs
			 * shares the whole blocks between, of a range that
			 * holds some */
			op->off2 = op->off2 - op->off2 % 4072 + op->off % 4072;
			if (chance(s, 70))
				op->len = (1 + below(s, 12)) * 4072 + below(s, 8192);
		}
	}
	op->flags = chance(s, 3) ? bad_flags[below(s, sizeof(bad_flags) / sizeof(bad_flags[0]))]
				 : 0;
}

/* fd's offset, or the offset given, as text after the copy. */
static void note_off(struct res *r, const char *what, int fd, int pos, loff_t off)
{
	char line[64];
	int n;

	if (pos)
		off = lseek(fd, 0, SEEK_CUR);
	n = snprintf(line, sizeof(line), "%s=%lld ", what, (long long)off);
	append(r, line, (size_t)n);
}

/* The copied range [from, from + n) of the destination, read back. */
static void read_back(struct res *r, int out, uint64_t from, uint64_t n)
{
	static unsigned char buf[1 << 16];
	char proc[64];
	int fd;

	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", out);
	fd = open(proc, O_RDONLY | O_NOATIME);
	if (fd < 0) {
		append(r, "no read-back", 12);
		return;
	}
	while (n) {
		ssize_t got = pread(fd, buf, n < sizeof(buf) ? n : sizeof(buf), (off_t)from);
		if (got <= 0) {
			append(r, "short read-back", 15);
			break;
		}
		append(r, buf, (size_t)got);
		from += (uint64_t)got;
		n -= (uint64_t)got;
	}
	close(fd);
}

/* The length to ask for: op->len, cut to COPY_MAX where the source holds
 * more than that past in (invariant 2). */
static size_t bounded_len(const struct op *op, int in, uint64_t pos_in, uint64_t pos_out)
{
	struct stat st;
	uint64_t len = op->len;

	if (len <= COPY_MAX || pos_in + len < pos_in || pos_out + len < pos_out)
		return (size_t)len;
	if (fstat(in, &st) == 0 && S_ISREG(st.st_mode) && (uint64_t)st.st_size > pos_in &&
	    (uint64_t)st.st_size - pos_in > COPY_MAX)
		return COPY_MAX;
	return (size_t)len;
}

/* On tmpfs: as for a write (ops.c, track_times), the atime of a destination
 * open for reading too may differ. */
static void track_atime(const struct side *s, int out)
{
	struct stat st;

	if (!strcmp(s->name, "tmpfs") && (fcntl(out, F_GETFL) & O_ACCMODE) == O_RDWR &&
	    fstat(out, &st) == 0)
		loose_set(st.st_ino, LOOSE_ATIME, 1);
}

static void copy_fds(const struct op *op, struct side *s, int in, int out, struct res *r)
{
	loff_t off_in = (loff_t)op->off, off_out = (loff_t)op->off2;
	int in_pos = op->mode & CP_IN_POS, out_pos = op->mode & CP_OUT_POS;
	uint64_t from = out_pos ? (uint64_t)lseek(out, 0, SEEK_CUR) : op->off2;
	uint64_t pos_in = in_pos ? (uint64_t)lseek(in, 0, SEEK_CUR) : op->off;
	ssize_t n;

	errno = 0;
	n = copy_file_range(in, in_pos ? NULL : &off_in, out, out_pos ? NULL : &off_out,
			    bounded_len(op, in, pos_in, from), op->flags);
	set_ret(r, n);
	if (n <= 0)
		return;
	note_off(r, "in", in, in_pos, off_in);
	note_off(r, "out", out, out_pos, off_out);
	read_back(r, out, from, (uint64_t)n);
	track_atime(s, out);
}

/* The fd of slot i, or with CP_NEXT of the first open slot from i on. */
static int slot_fd(const struct op *op, const struct side *s, int i)
{
	for (int k = 0; op->mode & CP_NEXT && k < NFDS; k++)
		if (s->fds[(i + k) % NFDS] >= 0)
			return s->fds[(i + k) % NFDS];
	return s->fds[i];
}

void copy_run(const struct op *op, struct side *s, struct res *r)
{
	int in = slot_fd(op, s, op->fd), out = slot_fd(op, s, op->fd2), in_own = -1, out_own = -1;

	if (op->mode & CP_IN_PATH) {
		in = in_own = openat(s->dfd, op_path(op->p1),
				     modes[op->name & 15].flags | O_NONBLOCK, 0644);
		if (in < 0) {
			set_ret(r, -1);
			append(r, "open in", 7);
			return;
		}
	}
	if (op->mode & CP_OUT_PATH) {
		/* O_CREAT takes its mode from here: without one it was
		 * whatever the register held, not the same on both sides */
		out = out_own = openat(s->dfd, op_path(op->p2),
				       modes[op->name >> 4].flags | O_NONBLOCK, 0644);
		if (out < 0) {
			set_ret(r, -1);
			append(r, "open out", 8);
			goto close_in;
		}
	}
	copy_fds(op, s, in, out, r);
	if (out_own >= 0)
		close(out_own);
close_in:
	if (in_own >= 0)
		close(in_own);
}

/* One end of a copy: a slot ("fd2+": the first open one from 2) or a path
 * (opened how), an offset or the fd's. */
static void end_name(int path, uint8_t p, int slot, int next, int pos, uint64_t off,
		     unsigned mode, char *buf, size_t len)
{
	int o;

	if (path)
		o = snprintf(buf, len, "\"%s\" %s", op_path_name(p), modes[mode].name);
	else
		o = snprintf(buf, len, "fd%d%s", slot, next ? "+" : "");
	if (pos)
		snprintf(buf + o, len - (size_t)o, " at its offset");
	else
		snprintf(buf + o, len - (size_t)o, " off=%" PRIu64, off);
}

void copy_format(const struct op *op, char *buf, size_t len)
{
	char in[400], out[400], flags[24] = "";
	int next = op->mode & CP_NEXT;

	end_name(op->mode & CP_IN_PATH, op->p1, op->fd, next, op->mode & CP_IN_POS, op->off,
		 op->name & 15, in, sizeof(in));
	end_name(op->mode & CP_OUT_PATH, op->p2, op->fd2, next, op->mode & CP_OUT_POS,
		 op->off2, op->name >> 4, out, sizeof(out));
	if (op->flags)
		snprintf(flags, sizeof(flags), " flags=0x%x", op->flags);
	snprintf(buf, len, "copy_file_range %s -> %s len=%" PRIu64 "%s", in, out, op->len,
		 flags);
}
