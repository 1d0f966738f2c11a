/* The sample controller's own value flags (webhooks, --reconcile-log,
 * sharding), taken out of argv before kcr_main_run parses the rest. */
#ifndef SAMPLE_FLAGS_H
#define SAMPLE_FLAGS_H

#include <stddef.h>

/* A value flag: "--name V" or "--name=V" stores V (borrowed from argv) in
 * *value; a flag given twice keeps the last value. */
typedef struct sample_flag {
    const char *name; /* with its dashes: "--reconcile-log" */
    const char **value;
} sample_flag;

/* Removes the n flags (and their values) from argv, shifting the rest down
 * and lowering *argc, so the remaining arguments go to kcr_main_run.
 * Returns 0, or 2 after printing which flag has no value. Not thread-safe
 * (it edits argv). */
int sample_take_flags(int *argc, char **argv, const sample_flag *flags, size_t n);

#endif
