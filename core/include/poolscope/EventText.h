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
// CUmemAccess_flags as a person reads them: "no access", "read-only", "read-write".
std::string describeAccessFlags(uint32_t flags);
// "GPU 1", or "unknown device" for -1.
std::string deviceLabel(int device);
// A timeline marker's text for the kinds whose marker packs its own values (Timeline.h Marker:
// PeerCopy "16.0 MiB GPU 0 → GPU 1", PoolSetAccess "GPU 1: read-write"); empty for the others.
std::string describeMarkerValues(EventKind kind, uint16_t attr, uint64_t value);

} // namespace poolscope
