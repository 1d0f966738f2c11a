/* The soak's load generator: a fixed set of ConfigMap names in one
 * namespace (labelled mirror=true, so the soak's controller copies them), each created, updated,
 * deleted and re-created (same name, new uid) by seeded choices, through a client that bypasses the
 * fault proxy.
 *
 * Every deleted incarnation is handed to the tracker as an expected delete.
 * So that "exactly one on_delete per incarnation" is exact and not a guess,
 * an object is only deleted once a sync point (soak_churn_synced: the
 * informer's cache equalled a fresh LIST) has shown it to the informer, and a
 * deleted name is only re-created after a sync point showed the delete:
 * otherwise a relist could legitimately fold create+delete into nothing, or
 * delete+re-create into an update. */
#ifndef KCR_SOAK_CHURN_H
#define KCR_SOAK_CHURN_H

#include <stdint.h>

#include "helpers/converge.h"
#include "kcr/kcr.h"

typedef struct soak_churn soak_churn;

typedef struct soak_churn_counts {
    uint64_t creates, recreates, updates, deletes, errors;
} soak_churn_counts;

/* `slots` names "obj-NNN" in ns, written with `c` (borrowed); deletes are
 * reported to t (borrowed). NULL on OOM. */
soak_churn *soak_churn_new(kcr_client *c, const char *ns, int slots, uint64_t seed, tracker *t);
void soak_churn_free(soak_churn *ch);

/* Creates every slot (before the informer starts). */
kcr_err soak_churn_populate(soak_churn *ch);

/* One seeded write. A failed write leaves the slot unknown until a GET
 * tells what the server holds (the request may have been applied). */
kcr_err soak_churn_step(soak_churn *ch);

/* The informer has seen everything written so far: recent creates become
 * deletable, recent deletes re-creatable. */
void soak_churn_synced(soak_churn *ch);

soak_churn_counts soak_churn_get_counts(const soak_churn *ch);

#endif
