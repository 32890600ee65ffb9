/*
 * replay.c - the power-loss harness's replayer: from a base image and the
 * write log of a run (wrec.h), build the images a disk could hold after a
 * power cut at chosen points of the run, and check each one.
 *
 *   replay [-a] [-s SEED] [-n POINTS] [-r RANDOM] [-F FSCK] [-D DUMP]
 *          [-w WORKDIR] [-k KEEPDIR] [-f FINAL] [-p POINT -v VARIANT] LOG BASE
 *
 * A crash point c is a count of log records: the cut came after the first c
 * calls the log describes had returned. The image for c is built as:
 *
 *   1. durable: BASE with every write the log put before the SYNC_BEGIN of a
 *      sync whose SYNC_END (success) is before c, in log order;
 *   2. pending: the later writes before c, in 4 KiB blocks of the file. For
 *      each block, the disk holds its durable state or the state after the
 *      first k pending writes to it, k chosen per block: the page cache writes
 *      a page back whole, at any moment, and each write-back overwrites the
 *      last, in any order across blocks. A write through an O_DSYNC
 *      descriptor sets the least k of its blocks to include it.
 *   3. the file's size is the durable size, grown by the kept writes; a
 *      random variant may also find it grown to the furthest pending write
 *      with zeros where nothing was kept (as XFS can leave a file).
 *
 * -n POINTS crash points are picked from the seed: half of them just before
 * a SYNC_BEGIN (the most writes pending), a sixth just before a workload's
 * step record (its step acknowledged, the most steps pending in a window),
 * the rest anywhere, plus the end of the log (-n 0: every sync, and as many
 * more). -r RANDOM images are built per point besides two fixed ones:
 *
 * Variant 0 keeps no pending write, 1 keeps them all, 2... choose each k at
 * random from the seed, the point and the variant alone, so -p/-v rebuild one
 * image exactly. An image passes when fsck.kvfs -n exits 0, kvfs-dump exports
 * it (every block read, its checksum checked), every claim of the
 * workload standing at c holds (a "have" file has its length and digest, a
 * "gone" path does not exist), and the exported tree is the namespace after
 * k of the workload's steps (steps.c), k from the last step a sync covered
 * before c (-a, durability=full: the last step recorded before c, each
 * durable once acknowledged) to the step under way at c.
 *
 * Images are built in WORKDIR (crash.img, tree/, tool.out); up to 5 failing
 * ones are copied to KEEPDIR. -f FINAL first checks the recorder: every
 * logged write applied to BASE must give FINAL, the image the run left, byte
 * for byte (a write the shim missed would show there). Exit 0: every image
 * passed; 1: some failed; 2: bad usage or log.
 *
 * Not modelled: a disk that acknowledges a flush it did not do, and a write
 * torn inside a 4 KiB block (a sector-atomic disk could tear a page write).
 *
 * Invariants:
 *  1. The durable state only moves forward as the points are visited in
 *     order; the bytes past its size are zero, as are the working image's.
 *  2. Only the log and BASE decide an image: no clock, no state of a run.
 *  3. Between images, WORKDIR/crash.img holds what `work` does (with zeros
 *     past work_size): fsck.kvfs -n and kvfs-dump only read it, so the next
 *     image is written as the blocks that differ.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <getopt.h>
#include <inttypes.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "steps.h"
#include "wrec.h"

#define BLK 4096
#define MAX_KEPT 5 /* failing images kept for inspection */

struct rec {
	const struct wrec *h;      /* &hdr */
	struct wrec hdr;           /* copied out: records are packed, not aligned */
	const unsigned char *data; /* payload */
};

enum claim_state { CLAIM_NONE, CLAIM_HAVE, CLAIM_GONE };

struct claim {
	char path[128];
	enum claim_state state;
	uint64_t len, hash;
};

static struct {
	const char *fsck, *dump, *work, *keep, *log, *base;
	uint64_t seed;
	unsigned long points, randoms;
	int acked_durable; /* -a */
} opt = {.fsck = "fsck.kvfs", .dump = "kvfs-dump", .work = ".", .points = 100, .randoms = 2};

static struct rec *recs;
static size_t nrec;
static unsigned char *log_bytes;
static uint64_t cap; /* bytes: the largest the file ever was, in blocks */

/* The durable state at the point reached (invariant 1). */
static struct {
	size_t next;        /* records consumed */
	unsigned char *dur; /* durable bytes */
	uint64_t dur_size;
	size_t *pend, npend, head; /* WRITE and TRUNC records not yet durable */
	struct {
		uint64_t id;
		size_t at;
	} syncs[64];
	int nsyncs;
	struct claim *claims;
	size_t nclaims;
	size_t acked, floor; /* steps recorded, steps a sync covered */
} st;

/* The working image and its per-block choice; what work/crash.img holds. */
static unsigned char *img, *work;
static uint64_t img_size, work_size;
static int work_valid;
static uint32_t *blk_n, *blk_min, *blk_keep, *blk_seen;
static uint64_t *touched;
static size_t ntouched;

static unsigned long n_images, n_failed, n_kept;

/* How the images' trees stood against the steps (steps.c): images checked,
 * those that lost acknowledged steps (and the most at once), that held the
 * step under way, that held steps past the last one a sync covered (a
 * window's own commit); acknowledged steps no sync covered at the cut. */
static struct {
	unsigned long checked, vanished, under_way, past_sync;
	size_t most_vanished, most_pending, pending_sum;
} sst;

/* Whether a USER payload of len bytes is a step record (wrec.h). */
static int is_step(const unsigned char *payload, uint64_t len)
{
	return steps_is_step((const char *)payload, len);
}

static int rec_is_step(const struct rec *r)
{
	return r->h->type == WREC_USER && is_step(r->data, r->h->len);
}

static void fatal(const char *fmt, const char *arg)
{
	fprintf(stderr, "replay: ");
	fprintf(stderr, fmt, arg);
	fputc('\n', stderr);
	exit(2);
}

static uint64_t splitmix(uint64_t *s)
{
	uint64_t z = (*s += 0x9E3779B97F4A7C15ULL);

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
	return z ^ (z >> 31);
}

static unsigned char *read_file(const char *path, uint64_t *size)
{
	struct stat sb;
	unsigned char *p;
	uint64_t got = 0;
	int fd = open(path, O_RDONLY);

	if (fd < 0 || fstat(fd, &sb) != 0)
		fatal("cannot open '%s'", path);
	p = malloc((size_t)sb.st_size + 1);
	if (!p)
		fatal("no memory for '%s'", path);
	while (got < (uint64_t)sb.st_size) {
		ssize_t n = read(fd, p + got, (size_t)sb.st_size - got);
		if (n <= 0)
			fatal("cannot read '%s'", path);
		got += (uint64_t)n;
	}
	close(fd);
	*size = got;
	return p;
}

static uint64_t blocks_up(uint64_t n)
{
	return (n + BLK - 1) / BLK * BLK;
}

/* Split the log into records and size the image buffers. */
static void load_log(uint64_t base_size)
{
	uint64_t size, pos = 0, end;
	unsigned char *log = log_bytes = read_file(opt.log, &size);
	size_t alloc = 0;

	cap = base_size;
	while (pos < size) {
		struct wrec h;
		if (size - pos < sizeof(h))
			fatal("'%s': a damaged record", opt.log);
		memcpy(&h, log + pos, sizeof(h));
		if (h.magic != WREC_MAGIC || wrec_payload(&h) > size - pos - sizeof(h))
			fatal("'%s': a damaged record", opt.log);
		if (h.type == WREC_USER && is_step(log + pos + sizeof(h), h.len) &&
		    steps_add((const char *)log + pos + sizeof(h), h.len) != 0)
			exit(2);
		if (h.type == WREC_UNSUPPORTED) {
			fprintf(stderr, "replay: the run cannot be replayed: %.*s\n", (int)h.len,
				(const char *)log + pos + sizeof(h));
			exit(2);
		}
		if (nrec == alloc) {
			alloc = alloc ? 2 * alloc : 4096;
			recs = realloc(recs, alloc * sizeof(*recs));
			if (!recs)
				fatal("no memory for %s", "the records");
		}
		recs[nrec++] = (struct rec){.hdr = h, .data = log + pos + sizeof(h)};
		end = h.type == WREC_WRITE ? h.off + h.len : h.type == WREC_TRUNC ? h.off : 0;
		if (end > cap)
			cap = end;
		pos += sizeof(h) + wrec_payload(&h);
	}
	for (size_t i = 0; i < nrec; i++) /* recs moved while it grew */
		recs[i].h = &recs[i].hdr;
	cap = blocks_up(cap);
	st.dur = calloc(1, cap);
	img = calloc(1, cap);
	work = calloc(1, cap);
	st.pend = calloc(nrec + 1, sizeof(*st.pend));
	blk_n = calloc(cap / BLK, sizeof(*blk_n));
	blk_min = calloc(cap / BLK, sizeof(*blk_min));
	blk_keep = calloc(cap / BLK, sizeof(*blk_keep));
	blk_seen = calloc(cap / BLK, sizeof(*blk_seen));
	touched = calloc(cap / BLK, sizeof(*touched));
	if (!st.dur || !img || !work || !st.pend || !blk_n || !blk_min || !blk_keep || !blk_seen || !touched)
		fatal("no memory for %s", "the image");
}

/* Write bytes [from, to) of record r into buf, growing *size. */
static void put_range(unsigned char *buf, uint64_t *size, const struct rec *r, uint64_t from,
		      uint64_t to)
{
	memcpy(buf + from, r->data + (from - r->h->off), to - from);
	if (to > *size)
		*size = to;
}

static void truncate_to(unsigned char *buf, uint64_t *size, uint64_t len)
{
	if (len < *size)
		memset(buf + len, 0, *size - len); /* invariant 1: zero past the size */
	*size = len;
}

static void apply_all(unsigned char *buf, uint64_t *size, const struct rec *r)
{
	if (r->h->type == WREC_WRITE)
		put_range(buf, size, r, r->h->off, r->h->off + r->h->len);
	else
		truncate_to(buf, size, r->h->off);
}

static struct claim *claim_of(const char *path)
{
	for (size_t i = 0; i < st.nclaims; i++)
		if (!strcmp(st.claims[i].path, path))
			return &st.claims[i];
	st.claims = realloc(st.claims, (st.nclaims + 1) * sizeof(*st.claims));
	if (!st.claims)
		fatal("no memory for %s", "claims");
	struct claim *c = &st.claims[st.nclaims++];
	memset(c, 0, sizeof(*c));
	snprintf(c->path, sizeof(c->path), "%s", path);
	return c;
}

/* A step recorded: acknowledged, and durable if a sync (or with -a). */
static void step_record(void)
{
	st.acked++;
	if (opt.acked_durable || steps_is_sync(st.acked))
		st.floor = st.acked;
}

static void user_record(const struct rec *r)
{
	char line[256], verb[8], path[128];
	unsigned long long len = 0, hash = 0;
	size_t n = r->h->len < sizeof(line) - 1 ? r->h->len : sizeof(line) - 1;
	struct claim *c;

	if (rec_is_step(r)) {
		step_record();
		return;
	}
	memcpy(line, r->data, n);
	line[n] = '\0';
	if (sscanf(line, "%7s %127s %llu %llu", verb, path, &len, &hash) < 2)
		fatal("a USER record I cannot read: %s", line);
	c = claim_of(path);
	if (!strcmp(verb, "have")) {
		*c = (struct claim){.state = CLAIM_HAVE, .len = len, .hash = hash};
		snprintf(c->path, sizeof(c->path), "%s", path);
	} else if (!strcmp(verb, "gone")) {
		c->state = CLAIM_GONE;
	} else if (!strcmp(verb, "drop")) {
		c->state = CLAIM_NONE;
	} else {
		fatal("a USER record I cannot read: %s", line);
	}
}

/* A sync whose SYNC_BEGIN was record `at` succeeded: what came before is durable. */
static void sync_done(size_t at)
{
	while (st.head < st.npend && st.pend[st.head] < at)
		apply_all(st.dur, &st.dur_size, &recs[st.pend[st.head++]]);
}

static void sync_end(const struct wrec *h)
{
	for (int i = 0; i < st.nsyncs; i++) {
		if (st.syncs[i].id != h->off)
			continue;
		if (h->flags & WREC_OK)
			sync_done(st.syncs[i].at);
		st.syncs[i] = st.syncs[--st.nsyncs];
		return;
	}
	fatal("'%s': a SYNC_END without its BEGIN", opt.log);
}

/* Consume records up to crash point c. */
static void advance(size_t c)
{
	for (; st.next < c; st.next++) {
		const struct wrec *h = recs[st.next].h;
		switch (h->type) {
		case WREC_WRITE:
		case WREC_TRUNC:
			st.pend[st.npend++] = st.next;
			break;
		case WREC_SYNC_BEGIN:
			if (st.nsyncs == 64)
				fatal("'%s': too many syncs at once", opt.log);
			st.syncs[st.nsyncs].id = h->off;
			st.syncs[st.nsyncs++].at = st.next;
			break;
		case WREC_SYNC_END:
			sync_end(h);
			break;
		case WREC_USER:
			user_record(&recs[st.next]);
			break;
		default:
			break;
		}
	}
}

/* Count the pending writes of each block, and the least a DSYNC write keeps.
 * Returns how many choices an image of this point has: blocks with more than
 * one state, and truncates. */
static size_t count_pending(void)
{
	size_t choices = 0;

	ntouched = 0;
	for (size_t i = st.head; i < st.npend; i++) {
		const struct wrec *h = recs[st.pend[i]].h;
		if (h->type == WREC_TRUNC)
			choices++;
		if (h->type != WREC_WRITE || h->len == 0)
			continue;
		for (uint64_t b = h->off / BLK; b <= (h->off + h->len - 1) / BLK; b++) {
			if (blk_n[b] == 0)
				touched[ntouched++] = b;
			blk_n[b]++;
			if (h->flags & WREC_DSYNC)
				blk_min[b] = blk_n[b];
		}
	}
	for (size_t i = 0; i < ntouched; i++)
		choices += blk_n[touched[i]] > blk_min[touched[i]];
	return choices;
}

static void reset_counts(void)
{
	for (size_t i = 0; i < ntouched; i++) {
		uint64_t b = touched[i];
		blk_n[b] = blk_min[b] = blk_keep[b] = blk_seen[b] = 0;
	}
	ntouched = 0;
}

static void choose(unsigned long variant, uint64_t *rng)
{
	for (size_t i = 0; i < ntouched; i++) {
		uint64_t b = touched[i];
		uint32_t span = blk_n[b] - blk_min[b];
		if (variant == 0)
			blk_keep[b] = blk_min[b];
		else if (variant == 1)
			blk_keep[b] = blk_n[b];
		else
			blk_keep[b] = blk_min[b] + (uint32_t)(splitmix(rng) % (span + 1));
	}
}

/* The image of the current point for one variant, in img/img_size. */
static void build(size_t point, unsigned long variant)
{
	uint64_t rng = opt.seed ^ (point * 0xD1B54A32D192ED03ULL) ^ (variant << 48), far = 0;

	memcpy(img, st.dur, cap);
	img_size = st.dur_size;
	count_pending();
	choose(variant, &rng);
	for (size_t i = st.head; i < st.npend; i++) {
		const struct rec *r = &recs[st.pend[i]];
		const struct wrec *h = r->h;
		if (h->type == WREC_TRUNC) {
			if (variant == 1 || (variant > 1 && splitmix(&rng) % 2))
				truncate_to(img, &img_size, h->off);
			continue;
		}
		if (h->off + h->len > far)
			far = h->off + h->len;
		for (uint64_t b = h->off / BLK; h->len && b <= (h->off + h->len - 1) / BLK; b++) {
			uint64_t from = b * BLK > h->off ? b * BLK : h->off;
			uint64_t end = h->off + h->len;
			uint64_t to = (b + 1) * BLK < end ? (b + 1) * BLK : end;
			if (blk_seen[b]++ < blk_keep[b])
				put_range(img, &img_size, r, from, to);
		}
	}
	if (variant > 1 && far > img_size && splitmix(&rng) % 2)
		img_size = far; /* bytes past the old size are zero (invariant 1) */
	reset_counts();
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static void path_in(char *out, size_t len, const char *name)
{
	snprintf(out, len, "%s/%s", opt.work, name);
}

/* Run a tool with its output to work/tool.out; its exit status, or
 * 128+signal (127: it could not be run). posix_spawn, not fork: the
 * replayer's buffers are large, and a fork would copy their page tables
 * and fault on every page written afterwards, once per image. */
static int run(const char *tool, const char *a1, const char *a2, const char *a3)
{
	char out[4096];
	char *argv[] = {(char *)tool, (char *)a1, (char *)a2, (char *)a3, NULL};
	posix_spawn_file_actions_t fa;
	int status, rc;
	pid_t pid;

	path_in(out, sizeof(out), "tool.out");
	if (posix_spawn_file_actions_init(&fa) != 0 ||
	    posix_spawn_file_actions_addopen(&fa, 1, out, O_WRONLY | O_CREAT | O_TRUNC, 0644) ||
	    posix_spawn_file_actions_adddup2(&fa, 1, 2))
		fatal("cannot prepare to run %s", tool);
	rc = posix_spawnp(&pid, tool, &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	if (rc == ENOENT || rc == EACCES)
		return 127;
	if (rc != 0)
		fatal("cannot run a tool: %s", strerror(rc));
	if (waitpid(pid, &status, 0) < 0)
		fatal("waitpid: %s", strerror(errno));
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* Write all of the image to path, a new file. */
static void write_image(const char *path)
{
	char lock[4200];
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	uint64_t done = 0;

	snprintf(lock, sizeof(lock), "%s-lock", path);
	unlink(lock); /* LMDB's reader table of the last image */
	if (fd < 0)
		fatal("cannot create '%s'", path);
	while (done < img_size) {
		ssize_t n = write(fd, img + done, img_size - done);
		if (n <= 0)
			fatal("cannot write '%s'", path);
		done += (uint64_t)n;
	}
	close(fd);
}

/* Write the image to the working file, which holds the last one written
 * there (invariant 3): only the runs of blocks that differ from it. */
static void write_work_image(const char *path)
{
	char lock[4200];
	uint64_t b, end;
	int fd;

	if (!work_valid) {
		write_image(path);
		goto written;
	}
	snprintf(lock, sizeof(lock), "%s-lock", path);
	unlink(lock);
	fd = open(path, O_WRONLY);
	if (fd < 0 || (img_size != work_size && ftruncate(fd, (off_t)img_size) != 0))
		fatal("cannot write '%s'", path);
	for (b = 0; b < img_size; b = end) {
		for (; b < img_size && !memcmp(img + b, work + b, BLK); b += BLK) {
		}
		for (end = b; end < img_size && memcmp(img + end, work + end, BLK); end += BLK) {
		}
		if (end > img_size)
			end = img_size;
		for (uint64_t at = b; at < end;) {
			ssize_t n = pwrite(fd, img + at, end - at, (off_t)at);
			if (n <= 0)
				fatal("cannot write '%s'", path);
			at += (uint64_t)n;
		}
	}
	close(fd);
written:
	memcpy(work, img, cap); /* zeros past img_size (invariant 1) */
	work_size = img_size;
	work_valid = 1;
}

/* The claim holds in the exported tree? Returns a reason it does not, or NULL. */
static const char *claim_fails(const struct claim *c, const char *tree)
{
	static unsigned char buf[65536];
	char path[4096 + 160];
	uint64_t hash = WREC_HASH_INIT, len = 0;
	struct stat sb;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "%s/%s", tree, c->path);
	if (c->state == CLAIM_GONE)
		return lstat(path, &sb) ? NULL : "unlinked and its directory fsync'd, but there";
	fd = open(path, O_RDONLY);
	if (fd < 0)
		return "fsync'd, but missing";
	while ((n = read(fd, buf, sizeof(buf))) > 0) {
		hash = wrec_hash(hash, buf, (uint64_t)n);
		len += (uint64_t)n;
	}
	close(fd);
	if (n < 0)
		return "fsync'd, but unreadable in the export";
	if (len != c->len)
		return "fsync'd, but of another length";
	return hash != c->hash ? "fsync'd, but other bytes" : NULL;
}

static void keep_failure(size_t point, unsigned long variant)
{
	char dest[4096];

	if (!opt.keep || n_kept == MAX_KEPT)
		return;
	snprintf(dest, sizeof(dest), "%s/crash-%zu-%lu.img", opt.keep, point, variant);
	write_image(dest);
	n_kept++;
	printf("  image kept: %s\n", dest);
}

/* The last lines a tool printed, indented under the failure. */
static void print_tail(const char *out)
{
	uint64_t size, from;
	unsigned char *text = read_file(out, &size);
	int lines = 0;

	for (from = size; from > 0 && lines <= 15; from--)
		lines += text[from - 1] == '\n';
	if (lines > 15)
		from++; /* past the newline that ends the line before the tail */
	for (uint64_t i = from; i < size; i++) {
		if (i == from || text[i - 1] == '\n')
			fputs("  | ", stdout);
		putchar(text[i]);
	}
	free(text);
}

/* The exported tree is the state after some steps (steps.c); else why. */
static void check_steps(const char *tree, char *why, size_t len)
{
	size_t k, pending = st.acked - st.floor;
	const char *r = steps_match(tree, st.floor, st.acked + 1, &k);

	if (r) {
		snprintf(why, len, "%s", r);
		return;
	}
	sst.checked++;
	sst.pending_sum += pending;
	if (pending > sst.most_pending)
		sst.most_pending = pending;
	if (k < st.acked) {
		sst.vanished++;
		if (st.acked - k > sst.most_vanished)
			sst.most_vanished = st.acked - k;
	}
	sst.under_way += k > st.acked;
	sst.past_sync += k > st.floor && k <= st.acked;
}

/* fsck, export, claims, steps: the image passes or says why not. */
static void check(size_t point, unsigned long variant, size_t pending)
{
	char image[4096], tree[4096], out[4096], why[1024] = "";
	int rc;

	path_in(image, sizeof(image), "crash.img");
	path_in(tree, sizeof(tree), "tree");
	path_in(out, sizeof(out), "tool.out");
	write_work_image(image);
	n_images++;
	nftw(tree, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	rc = run(opt.fsck, "-n", image, NULL);
	if (rc != 0)
		snprintf(why, sizeof(why), "fsck.kvfs -n exit %d", rc);
	else if ((rc = run(opt.dump, image, "export", tree)) != 0)
		snprintf(why, sizeof(why), "kvfs-dump export exit %d", rc);
	for (size_t i = 0; !why[0] && i < st.nclaims; i++) {
		const char *r = st.claims[i].state ? claim_fails(&st.claims[i], tree) : NULL;
		if (r)
			snprintf(why, sizeof(why), "%s: %s", st.claims[i].path, r);
	}
	if (!why[0] && steps_count())
		check_steps(tree, why, sizeof(why));
	if (!why[0])
		return;
	n_failed++;
	printf("FAIL: seed %" PRIu64 " point %zu of %zu variant %lu (%zu pending writes): %s\n",
	       opt.seed, point, nrec, variant, pending, why);
	if (rc != 0)
		print_tail(out);
	keep_failure(point, variant);
}

/* Build and check every variant of point c (or only one). */
static void visit(size_t c, unsigned long only_variant)
{
	size_t choices, pending;
	unsigned long nvar;

	advance(c);
	choices = count_pending();
	reset_counts();
	pending = st.npend - st.head;
	/* with nothing to choose, every variant is the same image */
	nvar = choices ? 2 + opt.randoms : 1;
	for (unsigned long v = 0; v < nvar; v++) {
		if (only_variant != (unsigned long)-1 && v != only_variant)
			continue;
		build(c, v);
		check(c, v, pending);
	}
}

static int cmp_size(const void *a, const void *b)
{
	size_t x = *(const size_t *)a, y = *(const size_t *)b;

	return x < y ? -1 : x > y;
}

/* Up to want of the n candidates in c, shuffled from rng, appended to pts. */
static size_t pick_some(size_t *c, size_t n, size_t want, uint64_t *rng, size_t *pts)
{
	size_t i;

	for (i = 0; i < n && i < want; i++) {
		size_t j = i + (size_t)(splitmix(rng) % (n - i)), t = c[i];
		c[i] = c[j];
		c[j] = t;
		pts[i] = c[i];
	}
	return i;
}

/* Half the points at syncs (just before a SYNC_BEGIN, the most writes
 * pending; in a window mode, each a commit of the window), a sixth at steps
 * (just before a step record, the most steps pending), the rest anywhere,
 * and the end of the log; sorted, without repeats. With -n 0: every sync,
 * and as many more. */
static size_t pick_points(size_t **out)
{
	uint64_t rng = opt.seed;
	size_t nsync = 0, nstep = 0, n = 0, want = opt.points;
	size_t *syncs = calloc(nrec + 1, sizeof(*syncs)), *steps = calloc(nrec + 1, sizeof(*steps));
	size_t *pts;

	if (!syncs || !steps)
		fatal("no memory for %s", "points");
	for (size_t i = 0; i < nrec; i++) {
		if (recs[i].h->type == WREC_SYNC_BEGIN)
			syncs[nsync++] = i;
		else if (rec_is_step(&recs[i]))
			steps[nstep++] = i;
	}
	if (want == 0)
		want = 2 * nsync;
	pts = calloc(want + 2, sizeof(*pts));
	if (!pts)
		fatal("no memory for %s", "points");
	n += pick_some(syncs, nsync, want / 2, &rng, pts + n);
	n += pick_some(steps, nstep, want / 6, &rng, pts + n);
	while (n < want)
		pts[n++] = (size_t)(splitmix(&rng) % (nrec + 1));
	pts[n++] = nrec;
	qsort(pts, n, sizeof(*pts), cmp_size);
	size_t u = 0;
	for (size_t i = 0; i < n; i++)
		if (!u || pts[u - 1] != pts[i])
			pts[u++] = pts[i];
	free(syncs);
	free(steps);
	*out = pts;
	return u;
}

/* The recorder saw every write: all of them on BASE give FINAL exactly. */
static int check_final(const char *final, const unsigned char *base, uint64_t base_size)
{
	uint64_t size, all = base_size;
	unsigned char *want = read_file(final, &size);

	memcpy(img, base, base_size);
	memset(img + base_size, 0, cap - base_size);
	for (size_t i = 0; i < nrec; i++)
		if (recs[i].h->type == WREC_WRITE || recs[i].h->type == WREC_TRUNC)
			apply_all(img, &all, &recs[i]);
	if (all != size || memcmp(img, want, size) != 0) {
		printf("FAIL: every logged write on the base copy does not give '%s' "
		       "(%" PRIu64 " bytes against %" PRIu64 "): the recorder missed a write\n",
		       final, all, size);
		free(want);
		return 1;
	}
	printf("ok - the log replayed whole gives the final image byte for byte\n");
	free(want);
	return 0;
}

static void release(void)
{
	free(log_bytes);
	free(recs);
	free(st.dur);
	free(st.pend);
	free(st.claims);
	free(img);
	free(work);
	free(blk_n);
	free(blk_min);
	free(blk_keep);
	free(blk_seen);
	free(touched);
	steps_release();
}

static void usage(void)
{
	fprintf(stderr, "usage: replay [-a] [-s SEED] [-n POINTS] [-r RANDOM] [-F FSCK] [-D DUMP] "
			"[-w WORKDIR] [-k KEEPDIR] [-f FINAL] [-p POINT -v VARIANT] LOG BASE\n");
	exit(2);
}

static void summary(size_t npoints, size_t at_syncs, size_t at_steps)
{
	unsigned long writes = 0, dsync = 0, syncs = 0, claims = 0;

	for (size_t i = 0; i < nrec; i++) {
		const struct wrec *h = recs[i].h;
		writes += h->type == WREC_WRITE;
		dsync += h->type == WREC_WRITE && (h->flags & WREC_DSYNC);
		syncs += h->type == WREC_SYNC_BEGIN;
		claims += h->type == WREC_USER && memcmp(recs[i].data, "drop", 4);
	}
	printf("replay: seed %" PRIu64 ": %zu records (%lu writes, %lu O_DSYNC, %lu syncs, "
	       "%lu claims, %zu steps); %zu crash points (%zu at syncs, %zu at steps), %lu images, "
	       "%lu failed\n",
	       opt.seed, nrec, writes, dsync, syncs, claims - steps_count(), steps_count(), npoints,
	       at_syncs, at_steps, n_images, n_failed);
	if (sst.checked)
		printf("replay: steps: %lu images checked; acknowledged steps no sync covered at "
		       "the cut: %.1f on average, %zu at most; %lu images lost some, whole (up to "
		       "%zu at once); %lu held some past the last sync (a window committed by "
		       "itself), %lu the step under way\n",
		       sst.checked, (double)sst.pending_sum / (double)sst.checked, sst.most_pending,
		       sst.vanished, sst.most_vanished, sst.past_sync, sst.under_way);
}

int main(int argc, char **argv)
{
	const char *final = NULL;
	unsigned long only_point = (unsigned long)-1, only_variant = (unsigned long)-1;
	unsigned char *base;
	uint64_t base_size;
	size_t *pts, npts, at_syncs = 0, at_steps = 0;
	int c, rc = 0;

	while ((c = getopt(argc, argv, "as:n:r:F:D:w:k:f:p:v:")) != -1) {
		switch (c) {
		case 'a':
			opt.acked_durable = 1;
			break;
		case 's':
			opt.seed = strtoull(optarg, NULL, 0);
			break;
		case 'n':
			opt.points = strtoul(optarg, NULL, 0);
			break;
		case 'r':
			opt.randoms = strtoul(optarg, NULL, 0);
			break;
		case 'F':
			opt.fsck = optarg;
			break;
		case 'D':
			opt.dump = optarg;
			break;
		case 'w':
			opt.work = optarg;
			break;
		case 'k':
			opt.keep = optarg;
			break;
		case 'f':
			final = optarg;
			break;
		case 'p':
			only_point = strtoul(optarg, NULL, 0);
			break;
		case 'v':
			only_variant = strtoul(optarg, NULL, 0);
			break;
		default:
			usage();
		}
	}
	if (argc - optind != 2 ||
	    (only_point == (unsigned long)-1) != (only_variant == (unsigned long)-1))
		usage();
	opt.log = argv[optind];
	opt.base = argv[optind + 1];
	base = read_file(opt.base, &base_size);
	load_log(base_size);
	memcpy(st.dur, base, base_size);
	st.dur_size = base_size;
	if (final)
		rc |= check_final(final, base, base_size);
	free(base);
	if (only_point != (unsigned long)-1) {
		if (only_point > nrec)
			fatal("the log has fewer records than %s", "that point");
		visit(only_point, only_variant);
		summary(1, 0, 0);
	} else {
		npts = pick_points(&pts);
		for (size_t i = 0; i < npts; i++) {
			at_syncs += pts[i] < nrec && recs[pts[i]].h->type == WREC_SYNC_BEGIN;
			at_steps += pts[i] < nrec && rec_is_step(&recs[pts[i]]);
			visit(pts[i], (unsigned long)-1);
		}
		summary(npts, at_syncs, at_steps);
		free(pts);
	}
	release();
	return rc || n_failed ? 1 : 0;
}
