/* The whole public API of libkcr. The fake API server (kcr/fake.h) and the
 * reconciler test kit (kcr/testkit.h) are libkcr_testing's, and the
 * metrics/health endpoint (kcr/health.h) is libkcr_http's: include those
 * where you use them. */
#ifndef KCR_KCR_H
#define KCR_KCR_H

#include "kcr/client.h"
#include "kcr/config.h"
#include "kcr/controller.h"
#include "kcr/controllerutil.h"
#include "kcr/events.h"
#include "kcr/error.h"
#include "kcr/informer.h"
#include "kcr/leader.h"
#include "kcr/log.h"
#include "kcr/metrics.h"
#include "kcr/object.h"
#include "kcr/quantity.h"
#include "kcr/shard.h"
#include "kcr/store.h"
#include "kcr/time.h"
#include "kcr/typed.h" /* generated types: kcr/types/<group>_<version>.h */
#include "kcr/version.h"
#include "kcr/workqueue.h"

#endif
