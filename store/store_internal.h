/* Internal to store/: the store key of an object, shared by the indexer and
 * the FIFOs. (Their string map and pointer ring are core/'s.) */
#ifndef KCR_STORE_STORE_INTERNAL_H
#define KCR_STORE_STORE_INTERNAL_H

#include "kcr/store.h"

/* The store key of obj, malloc'd; NULL on OOM. */
char *kcr__object_key(const kcr_object *obj);

#endif
