/* The soak's fault schedule: a pure function of the seed and the number of
 * rounds, so the same seed gives the same faults in the same order with the
 * same parameters (printed at the start of every run). Each round is every
 * fault class once, in a seeded order, each after a seeded stretch of plain
 * churn. */
#ifndef KCR_SOAK_SCHEDULE_H
#define KCR_SOAK_SCHEDULE_H

#include <stdint.h>
#include <stdio.h>

typedef enum soak_fault {
    SOAK_CUT = 0,      /* close every proxied connection (FIN) */
    SOAK_CUT_RESET,    /* the same with TCP RST */
    SOAK_STALL,        /* no byte moves for longer than the informer's idle limit */
    SOAK_429,          /* a burst of 429 + Retry-After on the soak's requests, then a cut */
    SOAK_500,          /* a burst of 500 on the soak's requests, then a cut */
    SOAK_RESTART,      /* kube-apiserver SIGTERM, down a while, started again */
    SOAK_RESTART_KILL, /* the same with SIGKILL (a crash) */
    SOAK_COMPACTION,   /* disconnected until etcd compacts the informer's RV: a 410 */
    SOAK_FAULT_CLASSES
} soak_fault;

typedef struct soak_step {
    int64_t churn_ms; /* plain churn before the fault */
    soak_fault fault;
    int param; /* stall seconds, burst size, seconds down; 0 when unused */
} soak_step;

/* A deterministic generator (splitmix64). */
typedef struct soak_rng {
    uint64_t s;
} soak_rng;

uint64_t soak_rng_next(soak_rng *r);
/* Uniform in [lo, hi]. */
int64_t soak_rng_range(soak_rng *r, int64_t lo, int64_t hi);

/* Fills steps[0 .. rounds*SOAK_FAULT_CLASSES) for this seed; stall_s is the
 * minimum stall (longer than the idle limit). */
void soak_schedule(uint64_t seed, int rounds, int stall_s, soak_step *steps);

const char *soak_fault_name(soak_fault f);

/* One line per step: "#i +churn_ms fault param". */
void soak_schedule_print(FILE *f, const soak_step *steps, int n);

#endif
