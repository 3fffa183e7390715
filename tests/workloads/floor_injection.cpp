// The floor of the overhead benchmark: a CUPTI subscriber with an empty callback on exactly the
// driver callback ids the collector uses. What the collector costs above this is its own work.
#include <cstdio>
#include <cupti.h>

#include "Decode.h"

namespace {
void CUPTIAPI empty(void*, CUpti_CallbackDomain, CUpti_CallbackId, const void*) {}
} // namespace

extern "C" __attribute__((visibility("default"))) int InitializeInjection(void) {
    CUpti_SubscriberHandle sub;
    if (cuptiSubscribe(&sub, empty, nullptr) != CUPTI_SUCCESS) {
        std::fprintf(stderr, "[floor] cuptiSubscribe failed\n");
        return 1;
    }
    for (CUpti_CallbackId id : poolscope::collector::tracedCallbackIds())
        cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_DRIVER_API, id);
    return 1;
}
