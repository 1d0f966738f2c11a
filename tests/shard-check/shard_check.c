/* shard-check: reads the reconcile logs of a controller's replicas (the
 * sample controller's --reconcile-log: lines "<identity> <key> <start_ns>
 * <end_ns>") and reports, per key, reconcile intervals that overlap (the
 * exclusivity a shard ring promises: no key reconciled by two callbacks at
 * once, on one replica or across replicas) and the keys of --keys that no
 * replica ever reconciled (liveness).
 *
 *   shard-check [--keys FILE] [--max-report N] LOG...
 *
 * Prints "OVERLAP <key> <id> <start> <end> <id> <start> <end>" and
 * "UNRECONCILED <key>" lines (at most N of each, default 20; all are
 * counted), a "REPLICA <id> reconciles=<n> keys=<k>" line per identity, and
 * last "summary: lines=<l> keys=<k> replicas=<r> overlaps=<o>
 * unreconciled=<u>". Exit status: 0 when nothing overlaps and every key of
 * --keys was reconciled, 1 when something does or was not, 2 for bad
 * usage or a malformed log (its file and line named). */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One reconcile interval; key and id point into their own allocations. */
typedef struct interval {
    char *key;
    char *id;
    int64_t start, end;
} interval;

/* A growable array of intervals. */
typedef struct intervals {
    interval *v;
    size_t n, cap;
} intervals;

/* The latest-ending interval of one identity among a key's earlier ones. */
typedef struct latest {
    const char *id;
    const interval *iv;
} latest;

static void *xrealloc(void *p, size_t n)
{
    p = realloc(p, n);
    if (!p) {
        fprintf(stderr, "shard-check: out of memory\n");
        exit(2);
    }
    return p;
}

static char *xstrdup(const char *s)
{
    size_t n = strlen(s) + 1;
    return memcpy(xrealloc(NULL, n), s, n);
}

/* Appends every line of path to *all; false after printing the first bad
 * line (file:line and why). */
static bool read_log(const char *path, intervals *all)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "shard-check: %s: %s\n", path, strerror(errno));
        return false;
    }
    char line[2048];
    for (long no = 1; fgets(line, sizeof line, f); no++) {
        char id[512], key[1024], extra[2];
        long long start, end;
        size_t len = strlen(line);
        if (len == 0 || line[len - 1] != '\n' ||
            sscanf(line, "%511s %1023s %lld %lld %1s", id, key, &start, &end, extra) != 4 ||
            start > end) {
            fprintf(stderr, "shard-check: %s:%ld: not \"<identity> <key> <start_ns> <end_ns>\" "
                            "with start <= end: %s%s", path, no, line,
                    len && line[len - 1] == '\n' ? "" : "\n");
            fclose(f);
            return false;
        }
        if (all->n == all->cap) {
            all->cap = all->cap ? 2 * all->cap : 1024;
            all->v = xrealloc(all->v, all->cap * sizeof *all->v);
        }
        all->v[all->n++] = (interval){xstrdup(key), xstrdup(id), start, end};
    }
    fclose(f);
    return true;
}

static void intervals_free(intervals *all)
{
    for (size_t i = 0; i < all->n; i++) {
        free(all->v[i].key);
        free(all->v[i].id);
    }
    free(all->v);
}

/* By key, then start. */
static int by_key_start(const void *a, const void *b)
{
    const interval *x = a, *y = b;
    int c = strcmp(x->key, y->key);
    if (c)
        return c;
    return (x->start > y->start) - (x->start < y->start);
}

static int by_string(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The distinct identities, sorted, with their reconcile and key counts. */
typedef struct replica {
    const char *id;
    size_t reconciles, keys;
} replica;

static replica *find_replica(replica *r, size_t n, const char *id)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = strcmp(r[mid].id, id);
        if (c == 0)
            return &r[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

int main(int argc, char **argv)
{
    const char *keys_path = NULL;
    long max_report = 20;
    intervals all = {0};
    int logs = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--keys") && i + 1 < argc) {
            keys_path = argv[++i];
        } else if (!strcmp(argv[i], "--max-report") && i + 1 < argc) {
            char *end;
            max_report = strtol(argv[++i], &end, 10);
            if (*end || max_report < 0) {
                fprintf(stderr, "shard-check: --max-report wants a count, not '%s'\n", argv[i]);
                intervals_free(&all);
                return 2;
            }
        } else if (argv[i][0] == '-') {
            fprintf(stderr, "usage: shard-check [--keys FILE] [--max-report N] LOG...\n");
            intervals_free(&all);
            return 2;
        } else {
            if (!read_log(argv[i], &all)) {
                intervals_free(&all);
                return 2;
            }
            logs++;
        }
    }
    if (!logs) {
        fprintf(stderr, "usage: shard-check [--keys FILE] [--max-report N] LOG...\n");
        return 2;
    }
    qsort(all.v, all.n, sizeof *all.v, by_key_start);

    /* The identities. */
    char **ids = xrealloc(NULL, (all.n + 1) * sizeof *ids);
    for (size_t i = 0; i < all.n; i++)
        ids[i] = all.v[i].id;
    qsort(ids, all.n, sizeof *ids, by_string);
    replica *reps = xrealloc(NULL, (all.n + 1) * sizeof *reps);
    size_t nrep = 0;
    for (size_t i = 0; i < all.n; i++)
        if (!nrep || strcmp(reps[nrep - 1].id, ids[i]))
            reps[nrep++] = (replica){ids[i], 0, 0};
    latest *last = xrealloc(NULL, (nrep + 1) * sizeof *last);

    /* Per key, in start order: an interval overlaps an earlier one exactly
     * when it starts before the latest end among them; keeping the latest
     * end per identity names each overlapping replica once. */
    size_t keys = 0, overlaps = 0;
    for (size_t i = 0; i < all.n;) {
        size_t j = i, nlast = 0;
        keys++;
        for (; j < all.n && !strcmp(all.v[j].key, all.v[i].key); j++) {
            const interval *iv = &all.v[j];
            replica *r = find_replica(reps, nrep, iv->id);
            r->reconciles++;
            size_t mine = nlast;
            for (size_t k = 0; k < nlast; k++) {
                if (last[k].iv->end > iv->start) {
                    if (overlaps++ < (size_t)max_report)
                        printf("OVERLAP %s %s %" PRId64 " %" PRId64 " %s %" PRId64 " %" PRId64 "\n",
                               iv->key, last[k].id, last[k].iv->start, last[k].iv->end, iv->id,
                               iv->start, iv->end);
                }
                if (!strcmp(last[k].id, iv->id))
                    mine = k;
            }
            if (mine == nlast) {
                last[nlast++] = (latest){iv->id, iv};
                r->keys++;
            } else if (iv->end > last[mine].iv->end) {
                last[mine].iv = iv;
            }
        }
        i = j;
    }

    /* Liveness: every expected key has an interval. */
    size_t unreconciled = 0;
    if (keys_path) {
        FILE *f = fopen(keys_path, "r");
        if (!f) {
            fprintf(stderr, "shard-check: %s: %s\n", keys_path, strerror(errno));
            intervals_free(&all);
            free(ids);
            free(reps);
            free(last);
            return 2;
        }
        char key[1024];
        while (fscanf(f, "%1023s", key) == 1) {
            size_t lo = 0, hi = all.n;
            while (lo < hi) { /* the first interval whose key is >= key */
                size_t mid = (lo + hi) / 2;
                if (strcmp(all.v[mid].key, key) < 0)
                    lo = mid + 1;
                else
                    hi = mid;
            }
            if (lo == all.n || strcmp(all.v[lo].key, key)) {
                if (unreconciled++ < (size_t)max_report)
                    printf("UNRECONCILED %s\n", key);
            }
        }
        fclose(f);
    }
    for (size_t r = 0; r < nrep; r++)
        printf("REPLICA %s reconciles=%zu keys=%zu\n", reps[r].id, reps[r].reconciles,
               reps[r].keys);
    printf("summary: lines=%zu keys=%zu replicas=%zu overlaps=%zu unreconciled=%zu\n", all.n,
           keys, nrep, overlaps, unreconciled);
    intervals_free(&all);
    free(ids);
    free(reps);
    free(last);
    return overlaps || unreconciled ? 1 : 0;
}
