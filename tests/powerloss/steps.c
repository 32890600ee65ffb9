/*
 * steps.c - the namespaces the power-loss workload's steps build, and the
 * check that a crash image holds one of them (steps.h).
 *
 * kvfs acknowledges each step as one change, and the workload runs them one
 * at a time, so a commit holds the first k steps for some k, whole: a cut
 * may lose acknowledged steps, but only the last ones, and only whole. The
 * image after a cut must therefore show the namespace after exactly k steps,
 * with k at least the last step a sync covered before the cut (nothing an
 * fsync made durable is lost) and at most the step under way then (the one
 * after the last recorded). A torn step (a file with part of a write, a
 * rename that left both names or neither) or steps out of order match no k.
 *
 * Invariants:
 *  1. A namespace is a node for each path some step names (ids in order of
 *     first mention): absent, a directory, or a regular file with its length
 *     and digest (wrec_hash). The root is no node; in a tree, any other type
 *     matches nothing, and a path no step names fails the tree at once.
 *  2. The floor state only moves forward: the state after `floor` steps is
 *     kept and brought up to each new floor; a candidate is a copy of it
 *     with the next steps applied one at a time.
 *  3. Steps are parsed once, from the log, and applied as the workload
 *     recorded them, whatever a tree holds: a tree is only ever compared.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "steps.h"
#include "wrec.h"

#define STEP_TEXT 1024 /* longest step record */
#define MAX_PATHS 256  /* distinct paths the steps name */

enum kind { K_NONE, K_FILE, K_DIR, K_OTHER };

/* What a namespace holds at one path (invariant 1). */
struct node {
	enum kind kind;
	uint64_t len, hash;
};

/* One effect of a step: path id at becomes what. */
struct effect {
	unsigned at;
	struct node what;
};

static struct {
	char *paths[MAX_PATHS]; /* by id */
	unsigned npaths;
	struct effect *fx; /* every step's effects, in order */
	size_t nfx, fx_cap;
	size_t *first;       /* step n's effects are fx[first[n-1] .. first[n]) */
	unsigned char *sync; /* step n was a sync: sync[n-1] */
	size_t n, cap;
	struct node floor_ns[MAX_PATHS], cand[MAX_PATHS], tree[MAX_PATHS];
	size_t floor;
	int tree_strange; /* the tree has a path no step names */
	char strange[160];
} s;

static const char *tree_root;
static size_t tree_root_len;

int steps_is_step(const char *text, size_t len)
{
	return len > 5 && memcmp(text, "step ", 5) == 0;
}

/* The id of path, made if new; -1 (printed) when there are too many. */
static int path_id(const char *path, int make)
{
	for (unsigned i = 0; i < s.npaths; i++)
		if (!strcmp(s.paths[i], path))
			return (int)i;
	if (!make)
		return -1;
	if (s.npaths == MAX_PATHS || !(s.paths[s.npaths] = strdup(path))) {
		fprintf(stderr, "replay: too many paths in the steps\n");
		return -1;
	}
	return (int)s.npaths++;
}

static int add_effect(const char *path, struct node what)
{
	int id = path_id(path, 1);

	if (id < 0)
		return -1;
	if (s.nfx == s.fx_cap) {
		size_t cap = s.fx_cap ? 2 * s.fx_cap : 4096;
		struct effect *fx = realloc(s.fx, cap * sizeof(*fx));
		if (!fx) {
			fprintf(stderr, "replay: no memory for the steps\n");
			return -1;
		}
		s.fx = fx;
		s.fx_cap = cap;
	}
	s.fx[s.nfx++] = (struct effect){.at = (unsigned)id, .what = what};
	return 0;
}

/* Parse the effects of a step record into s.fx; 0 or -1 (invariant 3). */
static int parse_effects(char *line, int *sync)
{
	char *save = NULL, *tok;
	int rc = 0;

	strtok_r(line, " \n", &save); /* "step" */
	strtok_r(NULL, " \n", &save); /* N */
	*sync = 0;
	while (rc == 0 && (tok = strtok_r(NULL, " \n", &save)) != NULL) {
		char *path = !strcmp(tok, "sync") ? NULL : strtok_r(NULL, " \n", &save);
		if (!strcmp(tok, "sync")) {
			*sync = 1;
		} else if (!path) {
			rc = -1;
		} else if (!strcmp(tok, "set")) {
			char *len = strtok_r(NULL, " \n", &save);
			char *hash = len ? strtok_r(NULL, " \n", &save) : NULL;
			struct node f = {K_FILE, len ? strtoull(len, NULL, 10) : 0,
					 hash ? strtoull(hash, NULL, 10) : 0};
			rc = hash ? add_effect(path, f) : -1;
		} else if (!strcmp(tok, "mkdir")) {
			rc = add_effect(path, (struct node){.kind = K_DIR});
		} else if (!strcmp(tok, "del") || !strcmp(tok, "rmdir")) {
			rc = add_effect(path, (struct node){.kind = K_NONE});
		} else {
			rc = -1;
		}
	}
	return rc;
}

int steps_add(const char *text, size_t len)
{
	char line[STEP_TEXT];
	unsigned long long n;
	int sync;

	if (len < STEP_TEXT) {
		memcpy(line, text, len);
		line[len] = '\0';
	}
	if (len >= STEP_TEXT || sscanf(line, "step %llu", &n) != 1 || n != s.n + 1) {
		fprintf(stderr, "replay: a step record out of order or too long: %.*s\n",
			(int)(len < 200 ? len : 200), text);
		return -1;
	}
	if (s.n == s.cap) {
		size_t cap = s.cap ? 2 * s.cap : 1024;
		size_t *first = realloc(s.first, (cap + 1) * sizeof(*first));
		unsigned char *y = first ? realloc(s.sync, cap) : NULL;
		if (first)
			s.first = first;
		if (!y) {
			fprintf(stderr, "replay: no memory for the steps\n");
			return -1;
		}
		s.sync = y;
		s.cap = cap;
	}
	s.first[s.n] = s.nfx;
	if (parse_effects(line, &sync) != 0) {
		fprintf(stderr, "replay: a step record I cannot read: %.*s\n", (int)len, text);
		return -1;
	}
	s.sync[s.n++] = (unsigned char)sync;
	s.first[s.n] = s.nfx;
	return 0;
}

size_t steps_count(void)
{
	return s.n;
}

int steps_is_sync(size_t n)
{
	return n >= 1 && n <= s.n && s.sync[n - 1];
}

/* Apply step n's effects to ns. */
static void step_apply(struct node *ns, size_t n)
{
	for (size_t i = s.first[n - 1]; i < s.first[n]; i++)
		ns[s.fx[i].at] = s.fx[i].what;
}

/* A file's length and digest, as an export holds it. */
static int digest(const char *path, uint64_t *len, uint64_t *hash)
{
	static unsigned char buf[65536];
	int fd = open(path, O_RDONLY);
	ssize_t n;

	*len = 0;
	*hash = WREC_HASH_INIT;
	if (fd < 0)
		return -1;
	while ((n = read(fd, buf, sizeof(buf))) > 0) {
		*hash = wrec_hash(*hash, buf, (uint64_t)n);
		*len += (uint64_t)n;
	}
	close(fd);
	return n < 0 ? -1 : 0;
}

static int tree_node(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	const char *rel = path + tree_root_len + 1;
	struct node nd = {.kind = K_OTHER};
	int id;

	(void)flag;
	if (ftw->level == 0)
		return 0; /* the root (invariant 1) */
	id = path_id(rel, 0);
	if (id < 0) { /* no step made it: no state has it */
		if (!s.tree_strange)
			snprintf(s.strange, sizeof(s.strange), "%s", rel);
		s.tree_strange = 1;
		return 0;
	}
	if (S_ISDIR(sb->st_mode)) {
		nd.kind = K_DIR;
	} else if (S_ISREG(sb->st_mode)) {
		nd.kind = K_FILE;
		if (digest(path, &nd.len, &nd.hash) != 0)
			nd.kind = K_OTHER; /* unreadable: matches nothing */
	}
	s.tree[id] = nd;
	return 0;
}

static int same(const struct node *a, const struct node *b)
{
	return a->kind == b->kind && a->len == b->len && a->hash == b->hash;
}

/* How many paths the tree has otherwise than ns; the first in *why. */
static size_t ns_diff(const struct node *ns, char *why, size_t whylen)
{
	static const char *const kinds[] = {"absent", "a file", "a directory",
					    "neither file nor directory"};
	size_t d = 0;

	for (unsigned i = 0; i < s.npaths; i++) {
		const struct node *t = &s.tree[i], *m = &ns[i];
		if (same(t, m) || d++)
			continue;
		if (t->kind == K_FILE && m->kind == K_FILE)
			snprintf(why, whylen,
				 "%s holds %" PRIu64 " bytes of digest %016" PRIx64
				 ", but held %" PRIu64 " of %016" PRIx64 " then",
				 s.paths[i], t->len, t->hash, m->len, m->hash);
		else
			snprintf(why, whylen, "%s is %s, but was %s then", s.paths[i],
				 kinds[t->kind], kinds[m->kind]);
	}
	return d;
}

const char *steps_match(const char *dir, size_t floor, size_t hi, size_t *k)
{
	static char why[768];
	char first[512] = "", best_why[512] = "";
	size_t best = (size_t)-1, best_k = floor;

	if (hi > s.n)
		hi = s.n;
	if (floor > hi)
		floor = hi;
	for (; s.floor < floor; s.floor++) /* invariant 2 */
		step_apply(s.floor_ns, s.floor + 1);
	memset(s.tree, 0, sizeof(s.tree));
	s.tree_strange = 0;
	tree_root = dir;
	tree_root_len = strlen(dir);
	if (nftw(dir, tree_node, 16, FTW_PHYS) != 0)
		return "the exported tree cannot be walked";
	if (s.tree_strange) {
		snprintf(why, sizeof(why), "%s is there, but no step made it", s.strange);
		return why;
	}
	memcpy(s.cand, s.floor_ns, sizeof(s.cand));
	for (*k = floor;; ++*k) {
		size_t d = ns_diff(s.cand, first, sizeof(first));
		if (d == 0)
			return NULL;
		if (d <= best) { /* the latest of the nearest */
			best = d;
			best_k = *k;
			memcpy(best_why, first, sizeof(best_why));
		}
		if (*k == hi)
			break;
		step_apply(s.cand, *k + 1);
	}
	snprintf(why, sizeof(why),
		 "the tree is the namespace after none of steps %zu (the last durable) to %zu "
		 "(under way): torn, out of order or lost; nearest, after step %zu, %zu "
		 "path(s) differ: %s",
		 floor, hi, best_k, best, best_why);
	return why;
}

void steps_release(void)
{
	for (unsigned i = 0; i < s.npaths; i++)
		free(s.paths[i]);
	free(s.fx);
	free(s.first);
	free(s.sync);
	memset(&s, 0, sizeof(s));
}
