/* The soak's load generator (churn.h). */
#include "soak/churn.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "e2e/e2e_lib.h"
#include "soak/schedule.h"

typedef enum slot_state {
    SLOT_ABSENT,      /* known deleted (or never created) and shown to the informer */
    SLOT_GONE_NEW,    /* deleted since the last sync point: not re-created yet */
    SLOT_PRESENT,     /* exists and was shown to the informer: may be deleted */
    SLOT_PRESENT_NEW, /* created since the last sync point: updates only */
    SLOT_UNKNOWN      /* a write failed: GET before anything else */
} slot_state;

typedef struct slot {
    slot_state state;
    bool existed; /* created at least once (a create is then a re-create) */
    char uid[64]; /* of the current incarnation, when present */
    unsigned version;
} slot;

struct soak_churn {
    kcr_client *c;
    char ns[64];
    tracker *t;
    soak_rng rng;
    int n;
    slot *slots;
    soak_churn_counts counts;
};

soak_churn *soak_churn_new(kcr_client *c, const char *ns, int slots, uint64_t seed, tracker *t)
{
    soak_churn *ch = calloc(1, sizeof *ch);
    if (!ch)
        return NULL;
    ch->slots = calloc((size_t)slots, sizeof *ch->slots);
    if (!ch->slots) {
        free(ch);
        return NULL;
    }
    ch->c = c;
    snprintf(ch->ns, sizeof ch->ns, "%s", ns);
    ch->t = t;
    ch->rng.s = seed ^ 0x5eed0fc4a05ULL;
    ch->n = slots;
    return ch;
}

void soak_churn_free(soak_churn *ch)
{
    if (!ch)
        return;
    free(ch->slots);
    free(ch);
}

static void slot_name(int i, char *out, size_t len)
{
    snprintf(out, len, "obj-%03d", i);
}

static kcr_err create(soak_churn *ch, int i)
{
    slot *s = &ch->slots[i];
    char name[32], json[512];
    slot_name(i, name, sizeof name);
    snprintf(json, sizeof json,
             "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"%s\","
             "\"labels\":{\"app\":\"kcr-soak\",\"mirror\":\"true\"}},\"data\":{\"v\":\"%s-%u\"}}",
             name, name, ++s->version);
    kcr_object *o = NULL;
    kcr_err err = kcr_client_create(
        ch->c, &(kcr_request){.resource = &E2E_CM, .ns = ch->ns, .body = json}, &o);
    if (err == KCR_OK) {
        snprintf(s->uid, sizeof s->uid, "%s", kcr_object_uid(o));
        if (s->existed)
            ch->counts.recreates++;
        ch->counts.creates++;
        s->existed = true;
        s->state = SLOT_PRESENT_NEW;
    }
    kcr_object_unref(o);
    return err;
}

static kcr_err update(soak_churn *ch, int i)
{
    slot *s = &ch->slots[i];
    char name[32], value[64];
    slot_name(i, name, sizeof name);
    snprintf(value, sizeof value, "%s-%u", name, ++s->version);
    kcr_err err = e2e_update_cm(ch->c, ch->ns, name, value);
    if (err == KCR_OK)
        ch->counts.updates++;
    return err;
}

static kcr_err delete (soak_churn *ch, int i)
{
    slot *s = &ch->slots[i];
    char name[32];
    slot_name(i, name, sizeof name);
    kcr_err err = kcr_client_delete(
        ch->c, &(kcr_request){.resource = &E2E_CM, .ns = ch->ns, .name = name}, NULL);
    if (err == KCR_OK) {
        tracker_expect_deleted(ch->t, s->uid);
        ch->counts.deletes++;
        s->uid[0] = '\0';
        s->state = SLOT_GONE_NEW;
    }
    return err;
}

/* After a failed write: what does the server hold? A vanished incarnation
 * was deleted by our request after all; a new uid was created by it. */
static kcr_err resolve(soak_churn *ch, int i)
{
    slot *s = &ch->slots[i];
    char name[32];
    slot_name(i, name, sizeof name);
    kcr_object *o = NULL;
    kcr_err err =
        kcr_client_get(ch->c, &(kcr_request){.resource = &E2E_CM, .ns = ch->ns, .name = name}, &o);
    bool had = s->uid[0] != '\0';
    if (err == KCR_OK) {
        if (had && strcmp(s->uid, kcr_object_uid(o)) == 0) {
            s->state = SLOT_PRESENT_NEW; /* conservative: treat as unseen */
        } else {
            snprintf(s->uid, sizeof s->uid, "%s", kcr_object_uid(o));
            if (s->existed)
                ch->counts.recreates++;
            ch->counts.creates++;
            s->existed = true;
            s->state = SLOT_PRESENT_NEW;
        }
    } else if (err == KCR_ERR_NOT_FOUND) {
        if (had) { /* only this program deletes */
            tracker_expect_deleted(ch->t, s->uid);
            ch->counts.deletes++;
        }
        s->uid[0] = '\0';
        s->state = SLOT_GONE_NEW;
        err = KCR_OK;
    }
    kcr_object_unref(o);
    return err;
}

kcr_err soak_churn_populate(soak_churn *ch)
{
    for (int i = 0; i < ch->n; i++) {
        kcr_err err = create(ch, i);
        if (err != KCR_OK)
            return err;
        ch->slots[i].state = SLOT_PRESENT; /* listed by the informer when it starts */
    }
    return KCR_OK;
}

kcr_err soak_churn_step(soak_churn *ch)
{
    int i = (int)soak_rng_range(&ch->rng, 0, ch->n - 1);
    slot *s = &ch->slots[i];
    int dice = (int)soak_rng_range(&ch->rng, 0, 99);
    kcr_err err = KCR_OK;
    switch (s->state) {
    case SLOT_UNKNOWN:
        err = resolve(ch, i);
        if (err != KCR_OK)
            ch->counts.errors++;
        return err;
    case SLOT_GONE_NEW:
        return KCR_OK; /* wait for a sync point */
    case SLOT_ABSENT:
        err = create(ch, i);
        break;
    case SLOT_PRESENT_NEW:
        err = update(ch, i);
        break;
    case SLOT_PRESENT:
        err = dice < 30 ? delete (ch, i) : update(ch, i);
        break;
    }
    if (err != KCR_OK) {
        ch->counts.errors++;
        s->state = SLOT_UNKNOWN;
    }
    return err;
}

void soak_churn_synced(soak_churn *ch)
{
    for (int i = 0; i < ch->n; i++) {
        slot *s = &ch->slots[i];
        if (s->state == SLOT_PRESENT_NEW)
            s->state = SLOT_PRESENT;
        else if (s->state == SLOT_GONE_NEW)
            s->state = SLOT_ABSENT;
    }
}

soak_churn_counts soak_churn_get_counts(const soak_churn *ch)
{
    return ch->counts;
}
