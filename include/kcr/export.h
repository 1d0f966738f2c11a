/* KCR_API marks the exported public API; everything else stays hidden. */
#ifndef KCR_EXPORT_H
#define KCR_EXPORT_H

#if defined(KCR_BUILDING) && defined(__GNUC__)
#define KCR_API __attribute__((visibility("default")))
#else
#define KCR_API
#endif

#endif
