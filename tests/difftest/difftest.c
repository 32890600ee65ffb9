/*
 * difftest.c - the differential tester's command line, the run of a sequence
 * on both sides, and the reduction of a failing sequence.
 *
 *   difftest [options] --seeds A-B KVFSDIR REFDIR    each seed in A..B (CI)
 *   difftest [options] --minutes M KVFSDIR REFDIR    random seeds for M minutes
 *   difftest [options] --seed S KVFSDIR REFDIR       one seed (replay)
 *   difftest --compare KDIR TDIR                     compare two trees once
 *
 * KVFSDIR is a directory on a kvfs mount, REFDIR one on tmpfs; each run works
 * in a new subdirectory of both ("s<seed>", "s<seed>-r<n>" while reducing).
 * Options: --ops N (ops per seed, default 2000), --check-every N (compare the
 * trees every N ops, default 250), --only I,J,... (run only these ops of the
 * seed), --keep (leave the run directories), --no-reduce, --stop (at the
 * first failing seed), --print (list the ops of --seed and exit), -v,
 * --remount CMD (after each run that agreed, close everything, run the shell
 * command CMD, which must unmount and mount the kvfs of KVFSDIR again, and
 * compare the trees once more: what kvfs stored, not what the kernel
 * cached), --any-fs (KVFSDIR need not be FUSE, nor REFDIR tmpfs).
 *
 * A failing sequence is cut after the op where the sides first disagree and
 * reduced by delta debugging: chunks of ever smaller size are dropped while
 * the rest still fails on fresh directories, then single ops until none can
 * go. The result is printed op by op, with the command that replays it.
 *
 * Exit status: 0 every seed agrees, 1 a seed disagrees, 2 usage or set-up.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#include "difftest.h"

#define REDUCE_MAX_RUNS 4000
#define REDUCE_MAX_SECONDS 600

struct cfg {
	const char *kroot, *troot;
	const char *remount; /* a shell command that remounts KVFSDIR's kvfs */
	size_t nops;
	unsigned check_every;
	int keep, reduce, stop, verbose;
};

struct outcome {
	int failed;
	size_t at;      /* position in the run list of the op after which it failed */
	int checkpoint; /* found by a tree comparison, not by the op itself */
	char why[2048];
};

static struct cfg cfg = {.nops = 2000, .check_every = 250, .reduce = 1};
static uint64_t ops_run, kind_runs[OP_NKINDS], kind_oks[OP_NKINDS];

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* ---------------------------------------------------------------- runs -- */

static int side_open(struct side *s, const char *name, const char *root, const char *tag)
{
	s->name = name;
	snprintf(s->dir, sizeof(s->dir), "%s/%s", root, tag);
	for (int i = 0; i < NFDS; i++)
		s->fds[i] = -1;
	s->dfd = -1;
	if (tree_remove(s->dir) && errno != ENOENT) {
	}
	if (mkdir(s->dir, 0755) != 0 || (s->dfd = open(s->dir, O_RDONLY | O_DIRECTORY)) < 0) {
		fprintf(stderr, "difftest: cannot make '%s': %s\n", s->dir, strerror(errno));
		return -1;
	}
	return 0;
}

static void side_close(struct side *s)
{
	for (int i = 0; i < NFDS; i++)
		if (s->fds[i] >= 0)
			close(s->fds[i]);
	if (s->dfd >= 0)
		close(s->dfd);
}

/* Run ops[list[0..n)] on fresh directories named tag; compare after each op,
 * every check_every ops and at the end. Returns 0, or -1 on a set-up error. */
static int run_list(const struct op *ops, const size_t *list, size_t n, const char *tag,
		    unsigned check_every, int keep, struct outcome *o)
{
	static struct res rk, rt;
	struct side k, t;
	char line[512], w[1536];
	size_t i;

	o->failed = o->checkpoint = 0;
	loose_reset();
	if (side_open(&k, "kvfs", cfg.kroot, tag) || side_open(&t, "tmpfs", cfg.troot, tag))
		return -1;
	for (i = 0; i < n; i++) {
		const struct op *op = &ops[list[i]];

		op_run(op, &k, &rk);
		op_run(op, &t, &rt);
		ops_run++;
		kind_runs[op->kind]++;
		kind_oks[op->kind] += rt.ret >= 0;
		if (cfg.verbose > 1) {
			op_format(op, line, sizeof(line));
			printf("  #%-5zu %-60s -> %lld%s%s\n", list[i], line, rt.ret,
			       rt.err ? " " : "", rt.err ? strerrorname_np(rt.err) : "");
		}
		if (res_compare(op, &rk, &rt, w, sizeof(w))) {
			snprintf(o->why, sizeof(o->why), "%s", w);
			break;
		}
		if ((check_every && (i + 1) % check_every == 0) || i + 1 == n) {
			if (tree_compare(k.dir, t.dir, w, sizeof(w))) {
				snprintf(o->why, sizeof(o->why), "trees differ: %s", w);
				o->checkpoint = 1;
				break;
			}
		}
	}
	if (n == 0 && tree_compare(k.dir, t.dir, w, sizeof(w))) {
		snprintf(o->why, sizeof(o->why), "trees differ: %s", w);
		o->checkpoint = 1;
		i = 0;
	}
	o->failed = i < n || (n == 0 && o->checkpoint);
	if (o->failed)
		o->at = i;
	side_close(&k);
	side_close(&t);
	if (!o->failed && cfg.remount) {
		/* what the kernel no longer holds must read back the same */
		if (system(cfg.remount) != 0) {
			fprintf(stderr, "difftest: the remount command failed: %s\n", cfg.remount);
			return -1;
		}
		if (tree_compare(k.dir, t.dir, w, sizeof(w))) {
			snprintf(o->why, sizeof(o->why), "after a remount, trees differ: %s", w);
			o->failed = o->checkpoint = 1;
			o->at = n ? n - 1 : 0;
		}
	}
	if (!keep && (tree_remove(k.dir) || tree_remove(t.dir)))
		fprintf(stderr, "difftest: cannot remove the run directories '%s'\n", tag);
	return 0;
}

/* ------------------------------------------------------------- reduce -- */

struct reducer {
	const struct op *ops;
	uint64_t seed;
	unsigned runs;
	double deadline;
	struct outcome last;
};

/* 1 when ops[cand[0..*m)] still fail; *m is cut to the failing prefix. */
static int still_fails(struct reducer *r, size_t *cand, size_t *m)
{
	struct outcome o = {0};
	char tag[64];

	snprintf(tag, sizeof(tag), "s%" PRIu64 "-r%u", r->seed, r->runs++);
	if (run_list(r->ops, cand, *m, tag, 0, 0, &o) || !o.failed)
		return 0;
	*m = o.at + 1 < *m ? o.at + 1 : *m;
	r->last = o;
	return 1;
}

static int over_budget(const struct reducer *r)
{
	return r->runs >= REDUCE_MAX_RUNS || now_s() > r->deadline;
}

/* Delta debugging on the complements (ddmin), then single ops until the list
 * is 1-minimal. Returns the new length of list. */
static size_t reduce(struct reducer *r, size_t *list, size_t n)
{
	size_t *cand = malloc((n + 1) * sizeof(*cand)), gran = 2, m;
	int changed;

	if (!cand)
		exit(2);
	while (n >= 2 && !over_budget(r)) {
		size_t chunk = (n + gran - 1) / gran;
		int reduced = 0;

		for (size_t lo = 0; lo < n && !over_budget(r); lo += chunk) {
			size_t hi = lo + chunk < n ? lo + chunk : n;
			m = 0;
			for (size_t i = 0; i < n; i++)
				if (i < lo || i >= hi)
					cand[m++] = list[i];
			if (m && still_fails(r, cand, &m)) {
				memcpy(list, cand, m * sizeof(*list));
				n = m;
				gran = gran > 2 ? gran - 1 : 2;
				reduced = 1;
				break;
			}
		}
		if (!reduced) {
			if (gran >= n)
				break;
			gran = gran * 2 < n ? gran * 2 : n;
		}
	}
	do {
		changed = 0;
		for (size_t i = n; i-- > 0 && n > 1 && !over_budget(r);) {
			m = 0;
			for (size_t j = 0; j < n; j++)
				if (j != i)
					cand[m++] = list[j];
			if (still_fails(r, cand, &m)) {
				memcpy(list, cand, m * sizeof(*list));
				n = m;
				changed = 1;
				if (i > n)
					i = n;
			}
		}
	} while (changed && !over_budget(r));
	free(cand);
	return n;
}

static void print_ops(const struct op *ops, const size_t *list, size_t n)
{
	char line[512];

	for (size_t i = 0; i < n; i++) {
		op_format(&ops[list[i]], line, sizeof(line));
		printf("    #%-5zu %s\n", list[i], line);
	}
}

static void print_replay(uint64_t seed, size_t nops, const size_t *list, size_t n)
{
	printf("  replay: difftest --seed %" PRIu64 " --ops %zu", seed, nops);
	if (list) {
		printf(" --only ");
		for (size_t i = 0; i < n; i++)
			printf("%s%zu", i ? "," : "", list[i]);
	}
	printf(" %s %s\n", cfg.kroot, cfg.troot);
}

/* How often each kind ran, and succeeded (on tmpfs). */
static void print_kinds(void)
{
	char line[512];
	struct op op = {0};

	for (int k = 0; k < OP_NKINDS; k++) {
		op.kind = (uint8_t)k;
		op_format(&op, line, sizeof(line));
		*strchrnul(line, ' ') = '\0';
		printf("  %-16s %9" PRIu64 " runs, %3.0f%% succeed\n", line, kind_runs[k],
		       kind_runs[k] ? 100.0 * (double)kind_oks[k] / (double)kind_runs[k] : 0.0);
	}
}

/* ---------------------------------------------------------------- seeds -- */

/* Run one seed (ops only[] if given); 0 agree, 1 disagree, 2 set-up error. */
static int run_seed(uint64_t seed, const size_t *only, size_t nonly, int reduce_it)
{
	struct op *ops = calloc(cfg.nops, sizeof(*ops));
	size_t *list = calloc(cfg.nops + 1, sizeof(*list)), n = 0;
	struct outcome o = {0};
	char tag[64], line[512];
	int rc = 0;

	if (!ops || !list)
		exit(2);
	ops_generate(seed, ops, cfg.nops);
	if (only) {
		for (size_t i = 0; i < nonly; i++)
			if (only[i] < cfg.nops)
				list[n++] = only[i];
	} else {
		for (n = 0; n < cfg.nops; n++)
			list[n] = n;
	}
	snprintf(tag, sizeof(tag), "s%" PRIu64, seed);
	if (run_list(ops, list, n, tag, cfg.check_every, 1, &o)) {
		rc = 2;
		goto out;
	}
	if (!o.failed) {
		if (!cfg.keep) {
			char d[8192];
			snprintf(d, sizeof(d), "%s/%s", cfg.kroot, tag);
			tree_remove(d);
			snprintf(d, sizeof(d), "%s/%s", cfg.troot, tag);
			tree_remove(d);
		}
		if (cfg.verbose)
			printf("difftest: seed %" PRIu64 ": %zu ops agree\n", seed, n);
		goto out;
	}
	rc = 1;
	op_format(&ops[list[o.at]], line, sizeof(line));
	printf("difftest: seed %" PRIu64 ": FAIL %s op #%zu (%s): %s\n", seed,
	       o.checkpoint ? "at the checkpoint after" : "at", list[o.at], line, o.why);
	printf("  the run directories are kept: %s/%s and %s/%s\n", cfg.kroot, tag, cfg.troot,
	       tag);
	n = o.at + 1;
	if (!only)
		print_replay(seed, list[o.at] + 1, NULL, 0);
	if (!reduce_it) {
		if (only)
			print_ops(ops, list, n);
		goto out;
	}
	struct reducer r = {.ops = ops, .seed = seed, .deadline = now_s() + REDUCE_MAX_SECONDS};
	size_t m = n;
	if (!still_fails(&r, list, &m)) {
		printf("  the sequence agrees when run again: a timing-dependent failure; its %zu "
		       "ops are not reduced\n", n);
		goto out;
	}
	printf("  reducing %zu ops...\n", m);
	fflush(stdout);
	n = reduce(&r, list, m);
	printf("difftest: seed %" PRIu64 ": reduced to %zu op%s in %u runs%s:\n", seed, n,
	       n == 1 ? "" : "s", r.runs, over_budget(&r) ? " (budget spent: may not be minimal)"
							  : "");
	print_ops(ops, list, n);
	printf("  %s: %s\n", r.last.checkpoint ? "then the trees differ" : "the last op differs",
	       r.last.why);
	print_replay(seed, list[n - 1] + 1, list, n);
out:
	fflush(stdout);
	free(list);
	free(ops);
	return rc;
}

static int parse_u64(const char *s, uint64_t *v)
{
	char *end;

	errno = 0;
	*v = strtoull(s, &end, 10);
	return errno || end == s || *end ? -1 : 0;
}

static size_t *parse_list(const char *s, size_t *n)
{
	size_t *v = NULL, cap = 0;
	char *copy = strdup(s), *tok, *save;
	uint64_t x;

	*n = 0;
	for (tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (parse_u64(tok, &x)) {
			fprintf(stderr, "difftest: bad op number '%s'\n", tok);
			exit(2);
		}
		if (*n == cap) {
			cap = cap ? cap * 2 : 16;
			v = realloc(v, cap * sizeof(*v));
			if (!v)
				exit(2);
		}
		v[(*n)++] = (size_t)x;
	}
	free(copy);
	return v;
}

/* The sides must be what they claim: a test run on the directory under an
 * unmounted mountpoint would compare the wrong filesystem. */
static int check_roots(void)
{
	struct statfs k, t;

	if (statfs(cfg.kroot, &k) || statfs(cfg.troot, &t)) {
		fprintf(stderr, "difftest: cannot statfs '%s' or '%s': %s\n", cfg.kroot, cfg.troot,
			strerror(errno));
		return -1;
	}
	if (k.f_type != 0x65735546 /* FUSE_SUPER_MAGIC */) {
		fprintf(stderr, "difftest: '%s' is not on a FUSE mount (--any-fs to go on)\n",
			cfg.kroot);
		return -1;
	}
	if (t.f_type != 0x01021994 /* TMPFS_MAGIC */) {
		fprintf(stderr, "difftest: '%s' is not on tmpfs (--any-fs to go on)\n", cfg.troot);
		return -1;
	}
	return 0;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: difftest [options] --seeds A-B | --minutes M | --seed S KVFSDIR REFDIR\n"
		   "       difftest --compare KDIR TDIR\n"
		   "options: --ops N, --check-every N, --only I,J,..., --keep, --no-reduce,\n"
		   "         --stop, --print, --remount CMD, --any-fs, --seek (SEEK_DATA and\n"
		   "         SEEK_HOLE too), -v (twice: every op)\n");
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"seeds", 1, 0, 'S'}, {"seed", 1, 0, 's'}, {"minutes", 1, 0, 'm'},
		{"ops", 1, 0, 'n'}, {"check-every", 1, 0, 'c'}, {"only", 1, 0, 'o'},
		{"keep", 0, 0, 'k'}, {"no-reduce", 0, 0, 'R'}, {"stop", 0, 0, 'x'},
		{"print", 0, 0, 'p'}, {"remount", 1, 0, 'M'}, {"compare", 0, 0, 'C'},
		{"any-fs", 0, 0, 'A'}, {"seek", 0, 0, 'D'}, {"help", 0, 0, 'h'}, {0, 0, 0, 0},
	};
	uint64_t first = 0, last = 0, seed = 0, minutes = 0, v;
	size_t *only = NULL, nonly = 0;
	int mode = 0, print = 0, any_fs = 0, opt, fails = 0, rc;
	unsigned long seeds = 0;
	double start = now_s();

	while ((opt = getopt_long(argc, argv, "vh", longopts, NULL)) != -1) {
		switch (opt) {
		case 'S':
			if (sscanf(optarg, "%" SCNu64 "-%" SCNu64, &first, &last) != 2 || last < first)
				return usage(stderr), 2;
			mode = 'S';
			break;
		case 's':
			if (parse_u64(optarg, &seed))
				return usage(stderr), 2;
			mode = 's';
			break;
		case 'm':
			if (parse_u64(optarg, &minutes))
				return usage(stderr), 2;
			mode = 'm';
			break;
		case 'n':
			if (parse_u64(optarg, &v) || v == 0 || v > 10000000)
				return usage(stderr), 2;
			cfg.nops = (size_t)v;
			break;
		case 'c':
			if (parse_u64(optarg, &v))
				return usage(stderr), 2;
			cfg.check_every = (unsigned)v;
			break;
		case 'o': only = parse_list(optarg, &nonly); break;
		case 'k': cfg.keep = 1; break;
		case 'R': cfg.reduce = 0; break;
		case 'x': cfg.stop = 1; break;
		case 'p': print = 1; break;
		case 'M': cfg.remount = optarg; break;
		case 'A': any_fs = 1; break;
		case 'D': ops_seek_holes = 1; break;
		case 'C': mode = 'C'; break;
		case 'v': cfg.verbose++; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (!mode || argc - optind != 2 || (only && mode != 's')) {
		usage(stderr);
		return 2;
	}
	cfg.kroot = argv[optind];
	cfg.troot = argv[optind + 1];
	umask(0);
	signal(SIGPIPE, SIG_IGN); /* a write to a FIFO nobody reads: EPIPE on both sides */
	ops_init();
	setvbuf(stdout, NULL, _IOLBF, 0);

	if (mode == 'C') {
		char why[2048];
		if (tree_compare(cfg.kroot, cfg.troot, why, sizeof(why))) {
			printf("difftest: FAIL: %s\n", why);
			return 1;
		}
		return 0;
	}
	if (!print && !any_fs && check_roots())
		return 2;
	if (mode == 's' && print) {
		struct op *ops = calloc(cfg.nops, sizeof(*ops));
		size_t *list = calloc(cfg.nops, sizeof(*list));
		if (!ops || !list)
			return 2;
		ops_generate(seed, ops, cfg.nops);
		for (size_t i = 0; i < cfg.nops; i++)
			list[i] = i;
		print_ops(ops, only ? only : list, only ? nonly : cfg.nops);
		return 0;
	}
	if (mode == 's') {
		rc = run_seed(seed, only, nonly, cfg.reduce);
		if (rc == 0)
			printf("difftest: seed %" PRIu64 ": %zu ops agree\n", seed,
			       only ? nonly : cfg.nops);
		return rc;
	}
	for (uint64_t s = first;; s++) {
		double t = now_s();
		if (mode == 'S' && s > last)
			break;
		if (mode == 'm') {
			static double report = 0;
			uint32_t r;
			if (t - start >= (double)minutes * 60)
				break;
			if (t - report >= 60) {
				if (report)
					printf("difftest: %.0f min: %lu seeds, %" PRIu64 " ops, %d "
					       "failing\n", (t - start) / 60, seeds, ops_run, fails);
				report = t;
			}
			if (getrandom(&r, sizeof(r), 0) != sizeof(r))
				return 2;
			s = r;
		}
		rc = run_seed(s, NULL, 0, cfg.reduce && fails == 0);
		seeds++;
		if (rc == 2)
			return 2;
		fails += rc;
		if (rc && cfg.stop)
			break;
	}
	printf("difftest: %lu seeds, %" PRIu64 " ops in %.1f s: %s\n", seeds, ops_run,
	       now_s() - start, fails ? "FAIL" : "all agree");
	if (fails)
		printf("difftest: %d seed%s disagree\n", fails, fails == 1 ? "" : "s");
	if (cfg.verbose)
		print_kinds();
	return fails ? 1 : 0;
}
