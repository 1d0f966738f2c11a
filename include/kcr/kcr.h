/* The whole public API of kcr. */
#ifndef KCR_KCR_H
#define KCR_KCR_H

#include "kcr/client.h"
#include "kcr/config.h"
#include "kcr/controller.h"
#include "kcr/controllerutil.h"
#include "kcr/events.h"
#include "kcr/error.h"
#include "kcr/fake.h"
#include "kcr/informer.h"
#include "kcr/leader.h"
#include "kcr/log.h"
#include "kcr/metrics.h"
#include "kcr/object.h"
#include "kcr/quantity.h"
#include "kcr/store.h"
#include "kcr/testkit.h"
#include "kcr/time.h"
#include "kcr/typed.h" /* generated types: kcr/types/<group>_<version>.h */
#include "kcr/version.h"
#include "kcr/workqueue.h"

#endif
