/*
 * main.c - fsck.kvfs: options, opening the image, the passes in order, the
 * in-memory inode index they share, and the exit code of fsck(8).
 *
 * Exit code: a bitmask as fsck(8): 0 clean, 1 problems corrected, 4
 * problems left uncorrected (1|4 when some of each), 8 operational error
 * (the image cannot be opened or read, is not a kvfs image, or is in use
 * by a mount when a repair was asked for), 16 usage error.
 *
 * Invariants:
 *  1. -n opens the image read-only: no lock, no writer, nothing written, so
 *     it may run on a mounted image (on one snapshot, fsck.h 3).
 *  2. -p and -y open it read-write, which takes the exclusive lock the daemon
 *     holds while mounted: a mounted image is never repaired.
 *  3. A fault while reading the map (a damaged LMDB page) ends the run with
 *     a message and exit 8, never a core dump (except in a sanitizer build,
 *     where the sanitizer's report is wanted).
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "fsck.h"

static void usage(FILE *out)
{
	fprintf(out,
		"usage: %s [-n | -p | -y] [-f] [-v] [--json] IMAGE\n"
		"Check a kvfs image and optionally repair it.\n"
		"\n"
		"  -n, --no          check only: open the image read-only and change nothing\n"
		"                    (the default; works on a mounted image, on a snapshot)\n"
		"  -p, -a, --preen   repair what is safe without asking: link counts, directory\n"
		"                    sizes, block counts, parent fields, dirent types, the\n"
		"                    inode counter, the orphan list (orphans are freed),\n"
		"                    blocks and xattrs of missing inodes or past a file's end,\n"
		"                    ACLs where the kernel never looks, and the records of\n"
		"                    shared blocks that lose no byte to the repair\n"
		"  -y, --yes         repair everything, also: drop dirents of missing inodes,\n"
		"                    move unreachable inodes to /lost+found, drop damaged\n"
		"                    blocks (leaving holes), drop borrowed blocks whose home\n"
		"                    block is lost (holes too), clear damaged inodes, drop\n"
		"                    malformed records and damaged ACLs\n"
		"  -f, --force       check even if clean (kvfs keeps no clean flag: every run\n"
		"                    is a full check; accepted for fsck(8))\n"
		"  -v, --verbose     say more about each pass\n"
		"      --json        print a machine-readable report on stdout instead\n"
		"  -h, --help        show this help and exit\n"
		"  -V, --version     show the version and exit\n"
		"\n"
		"Repairs need the image unmounted. Exit status (a bitmask, as fsck(8)): 0 no\n"
		"problems, 1 problems corrected, 4 problems left uncorrected, 8 operational\n"
		"error, 16 usage error.\n",
		cli_prog);
}

/* ----------------------------------------------------------------- index -- */

long fsck_find(const struct fsck *f, uint64_t ino)
{
	size_t lo = 0, hi = f->nino;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (f->ino[mid].ino < ino)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < f->nino && f->ino[lo].ino == ino ? (long)lo : -1;
}

struct fino *fsck_add_inode(struct fsck *f, uint64_t ino, uint32_t mode, int dir)
{
	struct fino *fi;

	if (fsck_reserve(f, 1, dir ? 1 : 0))
		return NULL;
	fi = &f->ino[f->nino];
	memset(fi, 0, sizeof(*fi));
	fi->ino = ino;
	fi->mode = mode;
	fi->dir = NO_DIR;
	if (dir) {
		struct fdir *fd = &f->dirs[f->ndirs];
		memset(fd, 0, sizeof(*fd));
		fd->idx = (uint32_t)f->nino;
		fi->dir = (uint32_t)f->ndirs++;
	}
	f->nino++;
	return fi;
}

int fsck_reserve(struct fsck *f, size_t inodes, size_t dirs)
{
	struct fino *ino = array_reserve(f->ino, &f->cap_ino, f->nino + inodes, sizeof(*ino), 1024);
	struct fdir *fd;

	if (!ino)
		return -ENOMEM;
	f->ino = ino;
	fd = array_reserve(f->dirs, &f->cap_dirs, f->ndirs + dirs, sizeof(*fd), 1024);
	if (!fd)
		return -ENOMEM;
	f->dirs = fd;
	return 0;
}

const char *fsck_type_name(uint32_t mode)
{
	switch (mode & S_IFMT) {
	case S_IFREG: return "regular file";
	case S_IFDIR: return "directory";
	case S_IFLNK: return "symlink";
	case S_IFCHR: return "character device";
	case S_IFBLK: return "block device";
	case S_IFIFO: return "fifo";
	case S_IFSOCK: return "socket";
	default: return "damaged inode";
	}
}

/* ------------------------------------------------------------------ run -- */

/* weight: the relative cost of one record, so the bar moves evenly through
 * the whole run. Measured on a 300,000-inode image (warm cache, per record):
 * inodes 0.12 us, dirents 0.19 us, link counts (in memory) 0.003 us, data
 * blocks 0.15 us (short) to 0.4 us (4 KiB) and 2.8 us from a cold cache. */
static const struct {
	const char *name;
	int (*run)(struct fsck *f);
	int db; /* walked database, for the progress total; -1: the index */
	double weight;
} passes[] = {
	{"superblock and format", fsck_pass1, KV_DB_META, 1},
	{"inode records", fsck_pass2, KV_DB_INODE, 1},
	{"directory tree", fsck_pass3, KV_DB_DIRENT, 1},
	{"link counts", fsck_pass4, -1, 0.05},
	{"data blocks", fsck_pass5, KV_DB_DATA, 2},
	{"extended attributes", fsck_pass6, KV_DB_XATTR, 1},
	{"orphans and the inode counter", fsck_pass7, KV_DB_ORPHAN, 1},
};
#define NPASSES (sizeof(passes) / sizeof(passes[0]))

/* The records pass i walks, as of the current snapshot (the index is
 * counted by pass 2; until then its size is the inode records'). */
static int pass_total(struct fsck *f, size_t i, uint64_t *total)
{
	if (passes[i].db < 0 && f->nino) {
		*total = f->nino;
		return 0;
	}
	return kv_db_count(f->txn, passes[i].db < 0 ? KV_DB_INODE : (enum kv_db)passes[i].db,
			   total);
}

/* The part of the rest of the run that pass i takes, given its total. */
static double pass_share(struct fsck *f, size_t i, uint64_t total)
{
	double mine = passes[i].weight * (double)total, left = mine;
	uint64_t n;

	for (size_t j = i + 1; j < NPASSES; j++)
		if (pass_total(f, j, &n) == 0)
			left += passes[j].weight * (double)n;
	return left > 0 ? mine / left : 1.0 / (double)(NPASSES - i);
}

static int run_passes(struct fsck *f, char *err, size_t errlen)
{
	for (size_t i = 0; i < NPASSES; i++) {
		uint64_t total = 0;
		double t0 = fsck_now();
		int rc = fsck_snapshot(f);

		if (!rc)
			rc = pass_total(f, i, &total);
		if (!rc) {
			fsck_pass_begin(f, (int)i + 1, passes[i].name, total,
					pass_share(f, i, total));
			rc = passes[i].run(f);
		}
		if (!rc)
			rc = fsck_flush(f);
		if (rc) {
			snprintf(err, errlen, "pass %zu (%s): %s", i + 1, passes[i].name,
				 strerror(-rc));
			return rc;
		}
		fsck_pass_end(f);
		fsck_info(f, "  pass %zu took %.3f s", i + 1, fsck_now() - t0);
	}
	return 0;
}

static int verbose_log;

static void log_line(const char *line)
{
	if (verbose_log)
		msg_print(stderr, cli_prog, "kv", "%s", line);
}

static int open_image(struct fsck *f, char *err, size_t errlen)
{
	struct kv_open_opts o = {.readonly = f->mode == MODE_CHECK,
				 .durability = KV_DURABLE_NORMAL};
	char why[400];
	int rc = kv_open(f->image, &o, &f->env, why, sizeof(why));

	if (rc == -EBUSY)
		snprintf(err, errlen, "%s; a repair needs it to itself: unmount it, or check it "
			 "read-only with -n", why);
	else if (rc)
		snprintf(err, errlen, "%s", why[0] ? why : strerror(-rc));
	return rc;
}

static int parse_args(struct fsck *f, int argc, char **argv)
{
	static const struct option longopts[] = {
		{"no", no_argument, NULL, 'n'},       {"preen", no_argument, NULL, 'p'},
		{"yes", no_argument, NULL, 'y'},      {"force", no_argument, NULL, 'f'},
		{"verbose", no_argument, NULL, 'v'},  {"json", no_argument, NULL, 'J'},
		{"help", no_argument, NULL, 'h'},     {"version", no_argument, NULL, 'V'},
		{NULL, 0, NULL, 0},
	};
	int c, modes = 0;

	while ((c = getopt_long(argc, argv, "npayfvhV", longopts, NULL)) != -1) {
		switch (c) {
		case 'n': f->mode = MODE_CHECK; modes |= 1; break;
		case 'p':
		case 'a': f->mode = MODE_PREEN; modes |= 2; break;
		case 'y': f->mode = MODE_YES; modes |= 4; break;
		case 'f': f->force = 1; break;
		case 'v': f->verbose = 1; break;
		case 'J': f->json = 1; break;
		default: /* -h, -V, and the usage errors: exit with its code (+100) */
			return cli_other_option(c, argv, usage) + 100;
		}
	}
	if (modes & (modes - 1)) {
		cli_error("only one of -n, -p and -y may be given");
		return EXIT_USAGE;
	}
	if (cli_one_image(argc, optind, usage))
		return EXIT_USAGE;
	f->image = argv[optind];
	return 0;
}

static void fsck_release(struct fsck *f)
{
	fsck_snapshot_end(f, 1);
	fsck_share_free(f);
	if (f->env)
		kv_close(f->env);
	for (size_t i = 0; i < f->npend; i++)
		free(f->pend[i].msg);
	free(f->pend);
	free(f->fixes);
	free(f->ino);
	free(f->dirs);
}

int cmd_fsck(int argc, char **argv)
{
	struct fsck f = {.mode = MODE_CHECK};
	char err[600] = "";
	double t0 = fsck_now();
	int rc;

	rc = parse_args(&f, argc, argv);
	if (rc)
		return rc >= 100 ? rc - 100 : rc;
	verbose_log = f.verbose;
	kv_set_log(log_line);
	/* liblmdb trusts its pages: a damaged one can fault or trip one of its
	 * assertions (abort) inside any read; say so and exit 8 */
	cli_crash_guard(f.image);
	progress_init(&f.prog, isatty(STDERR_FILENO));
	f.t_start = t0;
	fsck_out_begin(&f);
	rc = open_image(&f, err, sizeof(err));
	if (!rc)
		rc = run_passes(&f, err, sizeof(err));
	fsck_snapshot_end(&f, 1);
	if (!rc && f.mode != MODE_CHECK && f.fixed && (rc = kv_sync(f.env)) != 0)
		snprintf(err, sizeof(err), "cannot make the repairs durable: %s", strerror(-rc));
	if (rc) {
		fsck_progress_clear(&f);
		if (!f.json)
			cli_error("%s", err);
		f.exit_bits = EXIT_OPERATIONAL;
	}
	fsck_out_end(&f, fsck_now() - t0, rc ? err : NULL);
	fsck_release(&f);
	return (int)f.exit_bits;
}

int main(int argc, char **argv)
{
	cli_init(argv);
	return cmd_fsck(argc, argv);
}
