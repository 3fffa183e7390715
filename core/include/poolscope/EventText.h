#pragma once
// One line of text that says what an event's kind-dependent values mean ("release_threshold:
// 64.0 MiB → 1.00 GiB", "keep at least 32.0 MiB"). The window's "Details" column and
// `poolscope dump`'s `details` field both print it, so the two never disagree.

#include <string>

#include "poolscope/Event.h"

namespace poolscope {

// Empty for kinds whose shared fields (stream, pool, pointer) already say everything.
std::string describeEvent(const Event& e);
// "portable|mapped|write-combined" (HostAlloc) or "portable|mapped|io-memory|read-only"
// (HostRegister); "default" for no flags.
std::string describePinnedFlags(EventKind kind, uint32_t flags);

} // namespace poolscope
