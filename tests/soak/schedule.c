/* The soak's seeded fault schedule (schedule.h). */
#include "soak/schedule.h"

uint64_t soak_rng_next(soak_rng *r)
{
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

int64_t soak_rng_range(soak_rng *r, int64_t lo, int64_t hi)
{
    return lo + (int64_t)(soak_rng_next(r) % (uint64_t)(hi - lo + 1));
}

static int param_for(soak_rng *r, soak_fault f, int stall_s)
{
    switch (f) {
    case SOAK_STALL:
        return stall_s + (int)soak_rng_range(r, 0, 3);
    case SOAK_429:
    case SOAK_500:
        return (int)soak_rng_range(r, 2, 6);
    case SOAK_RESTART:
    case SOAK_RESTART_KILL:
        return (int)soak_rng_range(r, 2, 4);
    default:
        return 0;
    }
}

void soak_schedule(uint64_t seed, int rounds, int stall_s, soak_step *steps)
{
    soak_rng r = {seed};
    for (int round = 0; round < rounds; round++) {
        soak_fault order[SOAK_FAULT_CLASSES];
        for (int i = 0; i < SOAK_FAULT_CLASSES; i++)
            order[i] = (soak_fault)i;
        for (int i = SOAK_FAULT_CLASSES - 1; i > 0; i--) { /* Fisher-Yates */
            int j = (int)soak_rng_range(&r, 0, i);
            soak_fault tmp = order[i];
            order[i] = order[j];
            order[j] = tmp;
        }
        for (int i = 0; i < SOAK_FAULT_CLASSES; i++) {
            soak_step *s = &steps[round * SOAK_FAULT_CLASSES + i];
            s->churn_ms = soak_rng_range(&r, 1500, 4000);
            s->fault = order[i];
            s->param = param_for(&r, order[i], stall_s);
        }
    }
}

const char *soak_fault_name(soak_fault f)
{
    static const char *const names[SOAK_FAULT_CLASSES] = {
        "cut", "cut-reset", "stall", "429", "500", "restart", "restart-kill", "compaction"};
    return (unsigned)f < SOAK_FAULT_CLASSES ? names[f] : "?";
}

void soak_schedule_print(FILE *f, const soak_step *steps, int n)
{
    for (int i = 0; i < n; i++)
        fprintf(f, "soak: schedule #%d +%lldms %s %d\n", i, (long long)steps[i].churn_ms,
                soak_fault_name(steps[i].fault), steps[i].param);
}
