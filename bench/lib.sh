# Shared by the bench/<group>/run scripts (sourced, not run).
# KCR_BENCH_REPS: how many times each side of a comparison runs (default 5);
# the runs alternate between kcr and client-go and the median is reported.
bench_reps=${KCR_BENCH_REPS:-5}

# median: the median of the numbers on standard input, one per line (the
# mean of the middle two for an even count; 0 for none).
median() {
    sort -g | awk '{ v[NR] = $1 }
        END { if (NR == 0) print 0; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# slim_deps: the prefix of the libcurl and libmicrohttpd every benchmark build
# links (cmake/slim-deps builds them on first use), for -DKCR_DEPS_PREFIX.
slim_deps() {
    "$(dirname "${BASH_SOURCE[0]}")/../cmake/slim-deps"
}
