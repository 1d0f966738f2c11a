/* core/trace.h: each test runs the trace in a forked child (the file is
 * written at the child's exit), then reads what it wrote: one line per
 * change with every stage stamped in order, stamps for unknown keys
 * ignored, a hand-off's receiver stamping first (POP before FIFO, GOT
 * before ENQUEUED) giving the sender's stage its time, a full table counted
 * as dropped,
 * nothing written when KCR_TRACE is unset. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/trace.h"

static char path[64];

/* Runs fn in a child with KCR_TRACE=path (when `on`) and KCR_TRACE_EVENTS=events. */
static void in_child(void (*fn)(void), bool on, const char *events)
{
    snprintf(path, sizeof path, "/tmp/kcr-trace-%d", (int)getpid());
    unlink(path);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        if (on)
            setenv("KCR_TRACE", path, 1);
        if (events)
            setenv("KCR_TRACE_EVENTS", events, 1);
        fn();
        exit(0); /* runs the dump */
    }
    int status;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* The file's lines (header first), at most 8, each at most 511 bytes. */
static int read_lines(char lines[8][512])
{
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f, "the trace file %s was not written", path);
    int n = 0;
    while (n < 8 && fgets(lines[n], 512, f))
        n++;
    fclose(f);
    unlink(path);
    return n;
}

static void one_change(void)
{
    cr_assert(kcr__trace_on());
    kcr__trace_recv(kcr__now_ns());
    kcr__trace_begin("ns/a");
    kcr__trace_stamp(KCR__TR_FIFO, "ns/a");
    kcr__trace_stamp(KCR__TR_POP, "ns/a");
    kcr__trace_stamp(KCR__TR_POP, "ns/a"); /* the first stamp wins */
    kcr__trace_stamp(KCR__TR_HANDLER, "ns/a");
    kcr__trace_stamp(KCR__TR_HANDLER, "ns/unknown");
    kcr__trace_stamp(KCR__TR_GOT, "ns/a");
    kcr__trace_end("ns/a");
    kcr__trace_stamp(KCR__TR_ENQUEUED, "ns/a"); /* late: GOT came first */
    kcr__trace_stamp(KCR__TR_HANDLER, "ns/a");  /* a stale stage: ignored */
}

/* Reads the record line `line` into key and at[8]. */
static void parse_record(const char *line, char key[64], long long at[8])
{
    cr_assert_eq(sscanf(line, "%63s %lld %lld %lld %lld %lld %lld %lld %lld", key, &at[0], &at[1],
                        &at[2], &at[3], &at[4], &at[5], &at[6], &at[7]),
                 9, "%s", line);
}

Test(trace, one_change_every_stage)
{
    in_child(one_change, true, NULL);
    char l[8][512];
    int n = read_lines(l);
    cr_assert_eq(n, 2, "a header and one record");
    cr_assert(strstr(l[0], "dropped=0"), "%s", l[0]);
    char key[64];
    long long at[8];
    parse_record(l[1], key, at);
    cr_assert_str_eq(key, "ns/a");
    int64_t now = kcr__wall_ns();
    for (int s = 0; s < 8; s++) {
        cr_assert_gt(at[s], now - 60 * KCR_NS_PER_S, "stage %d: %lld", s, at[s]);
        cr_assert_leq(at[s], now, "stage %d", s);
    }
    /* in stage order; ENQUEUED, stamped after the end, took GOT's time */
    for (int s = 1; s < 8; s++)
        cr_assert_leq(at[s - 1], at[s], "stage %d before stage %d", s - 1, s);
    cr_assert_eq(at[KCR__TR_ENQUEUED], at[KCR__TR_GOT]);
}

static void pop_before_fifo(void)
{
    kcr__trace_recv(kcr__now_ns());
    kcr__trace_begin("ns/b");
    kcr__trace_stamp(KCR__TR_POP, "ns/b");
    kcr__trace_stamp(KCR__TR_FIFO, "ns/b"); /* the push returned after the pop */
}

Test(trace, a_receiver_stamping_first_keeps_the_stages_in_order)
{
    in_child(pop_before_fifo, true, NULL);
    char l[8][512];
    cr_assert_eq(read_lines(l), 2, "a header and one record");
    char key[64];
    long long at[8];
    parse_record(l[1], key, at);
    cr_assert_str_eq(key, "ns/b");
    cr_assert_gt(at[KCR__TR_POP], 0);
    cr_assert_eq(at[KCR__TR_FIFO], at[KCR__TR_POP], "FIFO takes POP's time, not the later stamp");
    cr_assert_leq(at[KCR__TR_DECODED], at[KCR__TR_FIFO]);
    cr_assert_eq(at[KCR__TR_HANDLER], 0, "stages not reached stay 0");
}

static void three_changes(void)
{
    kcr__trace_begin("ns/a");
    kcr__trace_begin("ns/b");
    kcr__trace_begin("ns/c"); /* over KCR_TRACE_EVENTS=2 */
    kcr__trace_end("ns/c");
}

Test(trace, a_full_table_counts_drops)
{
    in_child(three_changes, true, "2");
    char l[8][512];
    int n = read_lines(l);
    cr_assert_eq(n, 3);
    cr_assert(strstr(l[0], "dropped=1"), "%s", l[0]);
    cr_assert(strncmp(l[1], "ns/a ", 5) == 0 && strncmp(l[2], "ns/b ", 5) == 0);
    cr_assert(strstr(l[2], " 0 0 0 0 0 0\n"), "b was never stamped after decoding: %s", l[2]);
}

static void off_then_check(void)
{
    cr_assert_not(kcr__trace_on());
    kcr__trace_begin("ns/a");
    kcr__trace_end("ns/a");
}

Test(trace, off_without_the_variable)
{
    in_child(off_then_check, false, NULL);
    cr_assert_neq(access(path, F_OK), 0, "no file without KCR_TRACE");
}
