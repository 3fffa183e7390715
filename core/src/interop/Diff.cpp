// poolscope diff: two traces' reports compared entity by entity (interop/Diff.h says how pools,
// streams and sites are matched).

#include "poolscope/interop/Diff.h"

#include "poolscope/JsonText.h"
#include "poolscope/TraceReader.h"
#include "poolscope/Units.h"
#include "poolscope/analysis/CallSites.h"
#include "poolscope/analysis/TraceReport.h"
#include "poolscope/replay/Replay.h"

#include <algorithm>
#include <cctype>
#include <cinttypes>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

namespace poolscope::interop {

bool DiffValue::changed() const {
    if (unit == Unit::Text) return textA != textB;
    return a != b;
}

namespace {

using Unit = DiffValue::Unit;

DiffValue bytes(const char* m, std::optional<uint64_t> a, std::optional<uint64_t> b) {
    DiffValue v;
    v.metric = m;
    v.unit = Unit::Bytes;
    v.a = a;
    v.b = b;
    return v;
}
DiffValue count(const char* m, std::optional<uint64_t> a, std::optional<uint64_t> b) {
    DiffValue v = bytes(m, a, b);
    v.unit = Unit::Count;
    return v;
}
DiffValue duration(const char* m, std::optional<uint64_t> a, std::optional<uint64_t> b) {
    DiffValue v = bytes(m, a, b);
    v.unit = Unit::Duration;
    return v;
}
DiffValue text(const char* m, std::string a, std::string b) {
    DiffValue v;
    v.metric = m;
    v.unit = Unit::Text;
    v.textA = std::move(a);
    v.textB = std::move(b);
    return v;
}

std::string thresholdText(const PoolReport& p) {
    if (!p.thresholdKnown) return "unknown";
    return p.releaseThreshold == UINT64_MAX ? "max" : formatBytes(p.releaseThreshold);
}

// A reuse policy at the end (PoolReport: 1 on, 0 off, -1 never known).
std::string policyText(int8_t v) {
    if (v < 0) return "unknown";
    return v ? "on" : "off";
}

template <class T> std::optional<T> maybe(bool known, T v) {
    return known ? std::optional<T>(v) : std::nullopt;
}

// Each key of either side with its index in A and in B (-1 where that side has none), in key
// order.
std::map<std::string, std::pair<int, int>> matchKeys(const std::vector<std::string>& ka,
                                                     const std::vector<std::string>& kb) {
    std::map<std::string, std::pair<int, int>> m;
    for (size_t i = 0; i < ka.size(); ++i) m[ka[i]] = {int(i), -1};
    for (size_t i = 0; i < kb.size(); ++i) {
        auto [it, fresh] = m.emplace(kb[i], std::make_pair(-1, int(i)));
        if (!fresh) it->second.second = int(i);
    }
    return m;
}

// Pool keys: "dev D kind #n", n counting the device's pools of that kind in creation order
// (pools that existed before recording first, by handle: they have no creation time).
std::vector<std::string> poolKeys(const Report& r) {
    std::vector<size_t> order(r.pools.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) {
        const PoolInfo& a = r.pools[x].info;
        const PoolInfo& b = r.pools[y].info;
        if (a.createdTsNs != b.createdTsNs) return a.createdTsNs < b.createdTsNs;
        return a.handle < b.handle;
    });
    std::map<std::pair<int, int>, int> seen;
    std::vector<std::string> keys(r.pools.size());
    for (size_t i : order) {
        const PoolInfo& p = r.pools[i].info;
        const int n = ++seen[{p.device, static_cast<int>(p.kind)}];
        keys[i] = p.handle == 0 ? std::string("unknown pool (allocations whose pool is not known)")
                                : "dev " + std::to_string(p.device) + " " + std::string(poolKindName(p.kind)) +
                                      " #" + std::to_string(n);
    }
    return keys;
}

// Stream keys: the special handles by name; others "dev D stream #n" in order of first activity.
// Only the streams that streamKeys numbers by their first use: the runtime's special handles
// (0-2) are named instead.
void seeUse(std::map<uint64_t, int64_t>& first, uint64_t stream, int64_t t) {
    if (stream <= 2) return;
    auto [it, fresh] = first.emplace(stream, t);
    if (!fresh) it->second = std::min(it->second, t);
}

std::vector<std::string> streamKeys(const Report& r, const DiffFacts& facts) {
    std::vector<size_t> order(r.streams.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    auto firstOf = [&](size_t i) {
        auto it = facts.firstUse.find(r.streams[i].info.handle);
        return it == facts.firstUse.end() ? INT64_MAX : it->second;
    };
    std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) {
        return firstOf(x) != firstOf(y) ? firstOf(x) < firstOf(y)
                                        : r.streams[x].info.handle < r.streams[y].info.handle;
    });
    std::map<int, int> seen;
    std::vector<std::string> keys(r.streams.size());
    for (size_t i : order) {
        const StreamInfo& s = r.streams[i].info;
        if (s.handle <= 2) {
            keys[i] = s.handle == 0 ? "default stream" : s.handle == 1 ? "legacy stream" : "per-thread stream";
            keys[i] += " (dev " + std::to_string(s.device) + ")";
        } else {
            keys[i] = "dev " + std::to_string(s.device) + " stream #" + std::to_string(++seen[s.device]);
        }
    }
    return keys;
}

std::vector<DiffValue> poolValues(const PoolReport* a, const DiffFacts& fa, const PoolReport* b,
                                  const DiffFacts& fb) {
    auto releases = [](const std::map<uint64_t, uint64_t>& n, const PoolReport* p) -> std::optional<uint64_t> {
        if (!p) return std::nullopt;
        auto it = n.find(p->info.handle);
        return it == n.end() ? 0 : it->second;
    };
    auto wm = [](const PoolReport* p) { return p && p->hasWatermarks; };
    std::vector<DiffValue> v;
    v.push_back(bytes("peak reserved", maybe(wm(a), a ? a->peakReserved : 0), maybe(wm(b), b ? b->peakReserved : 0)));
    v.push_back(bytes("peak used", maybe(wm(a), a ? a->peakUsed : 0), maybe(wm(b), b ? b->peakUsed : 0)));
    v.push_back(bytes("idle at peak", maybe(wm(a), a ? a->idleAtPeak : 0), maybe(wm(b), b ? b->idleAtPeak : 0)));
    v.push_back(bytes("max idle", maybe(wm(a), a ? a->maxIdle : 0), maybe(wm(b), b ? b->maxIdle : 0)));
    v.push_back(bytes("mean idle", maybe(wm(a), a ? a->meanIdle : 0), maybe(wm(b), b ? b->meanIdle : 0)));
    v.push_back(bytes("final reserved", maybe(wm(a), a ? a->finalReserved : 0), maybe(wm(b), b ? b->finalReserved : 0)));
    v.push_back(bytes("peak live", maybe(a != nullptr, a ? a->peakLive : 0), maybe(b != nullptr, b ? b->peakLive : 0)));
    v.push_back(bytes("bytes allocated", maybe(a != nullptr, a ? a->bytesAllocated : 0),
                      maybe(b != nullptr, b ? b->bytesAllocated : 0)));
    v.push_back(count("allocations", maybe(a != nullptr, a ? a->allocCount : 0), maybe(b != nullptr, b ? b->allocCount : 0)));
    v.push_back(count("failed allocations", maybe(a != nullptr, a ? a->failedCount : 0),
                      maybe(b != nullptr, b ? b->failedCount : 0)));
    v.push_back(count("implicit releases", releases(fa.releases, a), releases(fb.releases, b)));
    v.push_back(count("trims", releases(fa.trims, a), releases(fb.trims, b)));
    v.push_back(count("growths", maybe(a != nullptr, a ? a->growths : 0), maybe(b != nullptr, b ? b->growths : 0)));
    v.push_back(bytes("live at end", maybe(a != nullptr, a ? a->liveAtEndBytes : 0),
                      maybe(b != nullptr, b ? b->liveAtEndBytes : 0)));
    v.push_back(text("release threshold", a ? thresholdText(*a) : "-", b ? thresholdText(*b) : "-"));
    v.push_back(text("reuse follow event dependencies", a ? policyText(a->reuseFollowEventDependencies) : "-",
                     b ? policyText(b->reuseFollowEventDependencies) : "-"));
    v.push_back(text("reuse allow opportunistic", a ? policyText(a->reuseAllowOpportunistic) : "-",
                     b ? policyText(b->reuseAllowOpportunistic) : "-"));
    v.push_back(text("reuse allow internal dependencies", a ? policyText(a->reuseAllowInternalDependencies) : "-",
                     b ? policyText(b->reuseAllowInternalDependencies) : "-"));
    return v;
}

std::vector<DiffValue> streamValues(const StreamReport* a, const StreamReport* b) {
    auto f = [](const StreamReport* s, uint64_t StreamReport::*m) -> std::optional<uint64_t> {
        return s ? std::optional<uint64_t>(s->*m) : std::nullopt;
    };
    return {bytes("peak live", f(a, &StreamReport::peakLive), f(b, &StreamReport::peakLive)),
            bytes("bytes allocated", f(a, &StreamReport::bytesAllocated), f(b, &StreamReport::bytesAllocated)),
            count("allocations", f(a, &StreamReport::allocCount), f(b, &StreamReport::allocCount)),
            count("failed allocations", f(a, &StreamReport::failedCount), f(b, &StreamReport::failedCount)),
            count("cross-stream frees", f(a, &StreamReport::crossStreamFrees), f(b, &StreamReport::crossStreamFrees)),
            bytes("peak pending frees", f(a, &StreamReport::peakPendingFree), f(b, &StreamReport::peakPendingFree)),
            bytes("live at end", f(a, &StreamReport::liveAtEndBytes), f(b, &StreamReport::liveAtEndBytes))};
}

std::map<std::string, std::pair<uint64_t, uint64_t>> siteTotals(const DiffFacts& facts, const StackTables& st) {
    std::map<std::string, std::pair<uint64_t, uint64_t>> byText;
    for (auto& [site, cb] : facts.sites) {
        auto& t = byText[analysis::siteText(st, site, 4)];
        t.first += cb.first;
        t.second += cb.second;
    }
    return byText;
}

// "dev 0 stream #2" before "dev 0 stream #10": digit runs compare as numbers.
bool naturalLess(const std::string& a, const std::string& b) {
    size_t i = 0, j = 0;
    while (i < a.size() && j < b.size()) {
        if (std::isdigit(static_cast<unsigned char>(a[i])) && std::isdigit(static_cast<unsigned char>(b[j]))) {
            size_t ei = i, ej = j;
            while (ei < a.size() && std::isdigit(static_cast<unsigned char>(a[ei]))) ++ei;
            while (ej < b.size() && std::isdigit(static_cast<unsigned char>(b[ej]))) ++ej;
            const std::string na = a.substr(i, ei - i), nb = b.substr(j, ej - j);
            if (na.size() != nb.size()) return na.size() < nb.size();
            if (na != nb) return na < nb;
            i = ei;
            j = ej;
        } else {
            if (a[i] != b[j]) return a[i] < b[j];
            ++i;
            ++j;
        }
    }
    return a.size() - i < b.size() - j;
}

} // namespace

void DiffFacts::keepSites(const StackTables& stacks) {
    sitesKept = !stacks.sites.empty();
    knownSites.clear();
    for (const auto& [site, s] : stacks.sites) knownSites.insert(site);
}

// Sites not in the stacks table are counted as site 0: siteText names them all "(no stack)".
void DiffFacts::addSite(uint32_t site, uint64_t bytes) {
    auto& s = sites[knownSites.count(site) ? site : 0];
    s.first++;
    s.second += bytes;
}

void DiffFacts::see(const Event& e, const replay::Fact& f, const replay::Replay& r) {
    switch (e.kind) {
    case EventKind::Alloc:
        seeUse(firstUse, e.stream, e.tsNs);
        if (!f.failedAlloc && sitesKept) addSite(e.site, f.block.bytes);
        break;
    case EventKind::StreamSynchronize:
    case EventKind::PeerCopy: seeUse(firstUse, e.stream, e.tsNs); break;
    case EventKind::StreamWaitEvent:
        if (f.edge) {
            seeUse(firstUse, r.streams()[f.edgeFrom].info.handle, f.edgeRecordTsNs);
            seeUse(firstUse, e.stream, e.tsNs);
        }
        break;
    case EventKind::ImplicitRelease: releases[e.pool]++; break;
    case EventKind::PoolTrimTo: trims[e.pool]++; break;
    default: break;
    }
}

DiffFacts diffFacts(const Timeline& tl, const StackTables* stacks) {
    DiffFacts f;
    for (const Allocation& a : tl.allocations) seeUse(f.firstUse, a.allocStream, a.allocTsNs);
    for (const FailedAllocation& x : tl.failed) seeUse(f.firstUse, x.stream, x.tsNs);
    for (const Marker& m : tl.markers) {
        seeUse(f.firstUse, m.stream, m.tsNs);
        if (m.kind == EventKind::ImplicitRelease) f.releases[m.pool]++;
        if (m.kind == EventKind::PoolTrimTo) f.trims[m.pool]++;
    }
    for (const WaitEdge& e : tl.edges) {
        seeUse(f.firstUse, e.fromStream, e.recordTsNs);
        seeUse(f.firstUse, e.toStream, e.waitTsNs);
    }
    if (stacks) f.keepSites(*stacks);
    if (f.sitesKept)
        for (const Allocation& a : tl.allocations) f.addSite(a.site, a.size);
    return f;
}

Result<DiffRead> readForDiff(const TraceReader& reader, const StackTables* stacks, std::string path,
                             ProcessInfo process, std::map<std::string, std::string> meta,
                             const std::atomic<bool>* cancel,
                             std::function<void(uint64_t, uint64_t)> progress) {
    DiffRead out;
    if (stacks) out.facts.keepSites(*stacks);
    TraceReportOptions options;
    options.advice = false;
    options.diffFacts = &out.facts;
    options.cancel = cancel;
    options.progress = std::move(progress);
    auto r = reportTrace(reader, options, std::move(path), std::move(process), std::move(meta));
    if (!r) return r.error();
    out.report = std::move(r->report);
    return out;
}

TraceDiff diffTraces(const DiffSide& a, const DiffSide& b, size_t topSites) {
    DiffFacts madeA, madeB;
    if (!a.facts && a.timeline) madeA = diffFacts(*a.timeline, a.stacks);
    if (!b.facts && b.timeline) madeB = diffFacts(*b.timeline, b.stacks);
    const DiffFacts& fa = a.facts ? *a.facts : madeA;
    const DiffFacts& fb = b.facts ? *b.facts : madeB;
    TraceDiff d;
    d.pathA = a.report->tracePath;
    d.pathB = b.report->tracePath;
    const Report& ra = *a.report;
    const Report& rb = *b.report;
    uint64_t peakA = 0, peakB = 0;
    for (const PoolReport& p : ra.pools) peakA += p.peakReserved;
    for (const PoolReport& p : rb.pools) peakB += p.peakReserved;
    d.totals = {
        duration("duration", uint64_t(nsBetween(ra.t0, ra.t1)), uint64_t(nsBetween(rb.t0, rb.t1))),
        count("events", ra.eventCount, rb.eventCount),
        bytes("sum of pools' peak reserved", peakA, peakB),
        count("implicit releases", ra.implicitReleases, rb.implicitReleases),
        count("trims", ra.trims, rb.trims),
        count("failed allocations", ra.failedCount, rb.failedCount),
        count("synchronizes", ra.syncCount, rb.syncCount),
        count("event waits across streams", ra.waitEdges, rb.waitEdges),
        count("leaked allocations", ra.leakCount, rb.leakCount),
        bytes("leaked bytes", ra.leakBytes, rb.leakBytes),
        count("unordered cross-stream frees", ra.unorderedFrees, rb.unorderedFrees),
        count("unordered reuses", ra.unorderedReuses, rb.unorderedReuses),
    };

    for (auto& [key, ix] : matchKeys(poolKeys(ra), poolKeys(rb))) {
        DiffEntity e;
        e.key = key;
        e.inA = ix.first >= 0;
        e.inB = ix.second >= 0;
        const PoolReport* pa = e.inA ? &ra.pools[ix.first] : nullptr;
        const PoolReport* pb = e.inB ? &rb.pools[ix.second] : nullptr;
        if (pa) e.nameA = ra.names.poolWithHandle(e.handleA = pa->info.handle);
        if (pb) e.nameB = rb.names.poolWithHandle(e.handleB = pb->info.handle);
        e.values = poolValues(pa, fa, pb, fb);
        d.pools.push_back(std::move(e));
    }

    for (auto& [key, ix] : matchKeys(streamKeys(ra, fa), streamKeys(rb, fb))) {
        DiffEntity e;
        e.key = key;
        e.inA = ix.first >= 0;
        e.inB = ix.second >= 0;
        const StreamReport* xa = e.inA ? &ra.streams[ix.first] : nullptr;
        const StreamReport* xb = e.inB ? &rb.streams[ix.second] : nullptr;
        if (xa) e.nameA = ra.names.streamWithHandle(e.handleA = xa->info.handle);
        if (xb) e.nameB = rb.names.streamWithHandle(e.handleB = xb->info.handle);
        e.values = streamValues(xa, xb);
        d.streams.push_back(std::move(e));
    }

    for (auto* list : {&d.pools, &d.streams})
        std::stable_sort(list->begin(), list->end(),
                         [](const DiffEntity& x, const DiffEntity& y) { return naturalLess(x.key, y.key); });

    const bool stacksA = a.stacks && !a.stacks->sites.empty();
    const bool stacksB = b.stacks && !b.stacks->sites.empty();
    d.sitesCompared = stacksA && stacksB;
    if (!d.sitesCompared) {
        d.sitesNote = !stacksA && !stacksB ? "neither trace has stacks"
                      : !stacksA          ? "trace A has no stacks"
                                          : "trace B has no stacks";
    } else {
        const auto ta = siteTotals(fa, *a.stacks), tb = siteTotals(fb, *b.stacks);
        std::map<std::string, SiteDiff> all;
        for (auto& [k, v] : ta) {
            SiteDiff& s = all[k];
            s.site = k;
            s.countA = v.first;
            s.bytesA = v.second;
        }
        for (auto& [k, v] : tb) {
            SiteDiff& s = all[k];
            s.site = k;
            s.countB = v.first;
            s.bytesB = v.second;
        }
        for (auto& [k, s] : all) d.sites.push_back(s);
        auto mag = [](const SiteDiff& s) { return s.bytesA > s.bytesB ? s.bytesA - s.bytesB : s.bytesB - s.bytesA; };
        std::stable_sort(d.sites.begin(), d.sites.end(),
                         [&](const SiteDiff& x, const SiteDiff& y) { return mag(x) > mag(y); });
        if (d.sites.size() > topSites) d.sites.resize(topSites);
    }
    return d;
}

namespace {

std::string human(Unit u, uint64_t x) {
    if (u == Unit::Bytes) return formatBytes(x);
    if (u == Unit::Duration) return formatDuration(static_cast<int64_t>(std::min<uint64_t>(x, INT64_MAX)));
    return formatCount(x);
}

std::string valueText(const DiffValue& v, bool isA) {
    if (v.unit == Unit::Text) return isA ? v.textA : v.textB;
    const auto& x = isA ? v.a : v.b;
    if (!x) return "-";
    return human(v.unit, *x);
}

std::string deltaText(const DiffValue& v) {
    if (v.unit == Unit::Text) return v.changed() ? "changed" : "";
    if (!v.a || !v.b) return "";
    if (*v.a == *v.b) return "0";
    const bool up = *v.b > *v.a;
    const uint64_t mag = up ? *v.b - *v.a : *v.a - *v.b;
    std::string s = (up ? "+" : "-") + human(v.unit, mag);
    if (*v.a) {
        char pct[32];
        std::snprintf(pct, sizeof pct, " (%s%.1f %%)", up ? "+" : "-", 100.0 * double(mag) / double(*v.a));
        s += pct;
    }
    return s;
}

void table(std::string& out, const std::vector<DiffValue>& values, bool all, const char* indent) {
    for (const DiffValue& v : values) {
        if (!all && !v.changed()) continue;
        char row[256];
        std::string metric = v.metric;
        std::snprintf(row, sizeof row, "%s%-34s %14s %14s  %s\n", indent, metric.c_str(),
                      valueText(v, true).c_str(), valueText(v, false).c_str(), deltaText(v).c_str());
        out += row;
    }
}

void entities(std::string& out, const char* title, const std::vector<DiffEntity>& list, bool all) {
    out += std::string("\n") + title + "\n";
    size_t same = 0;
    for (const DiffEntity& e : list) {
        const bool changed = !(e.inA && e.inB) ||
                             std::any_of(e.values.begin(), e.values.end(), [](const DiffValue& v) { return v.changed(); });
        if (!all && !changed) {
            ++same;
            continue;
        }
        out += "  " + e.key + ": ";
        if (e.inA && e.inB)
            out += "A " + e.nameA + ", B " + e.nameB + "\n";
        else
            out += std::string(e.inA ? "only in A (" + e.nameA : "only in B (" + e.nameB) + ")\n";
        size_t before = out.size();
        table(out, e.values, all, "    ");
        if (out.size() == before) out += "    (no difference)\n";
    }
    if (same) out += "  " + std::to_string(same) + " more in both traces with no difference\n";
    if (list.empty()) out += "  none\n";
}

nlohmann::ordered_json valuesJson(const std::vector<DiffValue>& values) {
    nlohmann::ordered_json o = nlohmann::ordered_json::object();
    for (const DiffValue& v : values) {
        nlohmann::ordered_json j;
        if (v.unit == Unit::Text) {
            j["a"] = v.textA;
            j["b"] = v.textB;
            j["changed"] = v.changed();
        } else {
            j["unit"] = v.unit == Unit::Bytes ? "bytes" : v.unit == Unit::Duration ? "ns" : "count";
            j["a"] = v.a ? nlohmann::ordered_json(*v.a) : nlohmann::ordered_json(nullptr);
            j["b"] = v.b ? nlohmann::ordered_json(*v.b) : nlohmann::ordered_json(nullptr);
            if (v.a && v.b)
                j["delta"] = *v.b >= *v.a ? nlohmann::ordered_json(*v.b - *v.a)
                                          : nlohmann::ordered_json(-static_cast<int64_t>(*v.a - *v.b));
        }
        std::string key = v.metric;
        for (char& c : key)
            if (c == ' ' || c == '-' || c == '\'') c = '_';
        o[key] = j;
    }
    return o;
}

} // namespace

std::string diffToText(const TraceDiff& d, bool all) {
    std::string out = "diff  A: " + d.pathA + "\n      B: " + d.pathB + "\n";
    char head[160];
    std::snprintf(head, sizeof head, "\n%-36s %14s %14s  %s\n", "Totals", "A", "B", "B - A");
    out += head;
    table(out, d.totals, true, "  ");
    entities(out, "Pools (matched by device, kind and creation order)", d.pools, all);
    entities(out, "Streams (matched by device and order of first use)", d.streams, all);
    out += "\nCall sites (bytes allocated over the run)\n";
    if (!d.sitesCompared) {
        out += "  not compared: " + d.sitesNote + "\n";
    } else {
        for (const SiteDiff& s : d.sites) {
            DiffValue v = bytes("", s.bytesA, s.bytesB);
            char row[160];
            std::snprintf(row, sizeof row, "  %12s %12s  %-24s ", formatBytes(s.bytesA).c_str(),
                          formatBytes(s.bytesB).c_str(), deltaText(v).c_str());
            out += row + s.site + "\n";
        }
    }
    if (!all) out += "\n(only what differs is listed; --all lists every metric)\n";
    return out;
}

std::string diffToJson(const TraceDiff& d, int indent) {
    nlohmann::ordered_json j;
    j["a"] = d.pathA;
    j["b"] = d.pathB;
    j["totals"] = valuesJson(d.totals);
    auto ents = [](const std::vector<DiffEntity>& list) {
        nlohmann::ordered_json arr = nlohmann::ordered_json::array();
        for (const DiffEntity& e : list) {
            nlohmann::ordered_json o;
            o["key"] = e.key;
            o["in_a"] = e.inA;
            o["in_b"] = e.inB;
            o["name_a"] = e.nameA;
            o["name_b"] = e.nameB;
            o["values"] = valuesJson(e.values);
            arr.push_back(o);
        }
        return arr;
    };
    j["pools"] = ents(d.pools);
    j["streams"] = ents(d.streams);
    if (d.sitesCompared) {
        nlohmann::ordered_json arr = nlohmann::ordered_json::array();
        for (const SiteDiff& s : d.sites)
            arr.push_back({{"site", s.site}, {"count_a", s.countA}, {"count_b", s.countB},
                           {"bytes_a", s.bytesA}, {"bytes_b", s.bytesB}});
        j["call_sites"] = arr;
    } else {
        j["call_sites"] = nullptr;
        j["call_sites_note"] = d.sitesNote;
    }
    return dumpJson(j, indent);
}

std::string diffValueText(const DiffValue& v, bool sideA) {
    return valueText(v, sideA);
}

std::string diffDeltaText(const DiffValue& v) {
    return deltaText(v);
}

int diffDirection(const DiffValue& v) {
    if (v.unit == Unit::Text || !v.a || !v.b || *v.a == *v.b) return 0;
    return *v.b > *v.a ? 1 : -1;
}

Report reportForDiff(const TraceReader& reader, const Timeline& timeline, const std::string& path) {
    auto meta = reader.meta();
    auto process = reader.process();
    return buildReport(timeline, {}, path, process ? std::move(*process) : ProcessInfo{},
                       meta ? std::move(*meta) : std::map<std::string, std::string>{});
}

std::vector<std::string> commonNvtxRanges(const StackTables* a, const StackTables* b) {
    std::vector<std::string> out;
    if (!a || !b || a->ranges.empty() || b->ranges.empty()) return out;
    std::set<std::string> inB;
    for (const NvtxRange& r : b->ranges)
        inB.insert(r.name);
    std::vector<const NvtxRange*> byStart;
    for (const NvtxRange& r : a->ranges)
        byStart.push_back(&r);
    std::stable_sort(byStart.begin(), byStart.end(), [](const NvtxRange* x, const NvtxRange* y) {
        return x->startNs < y->startNs;
    });
    std::set<std::string> seen;
    for (const NvtxRange* r : byStart)
        if (inB.count(r->name) && seen.insert(r->name).second) out.push_back(r->name);
    return out;
}

RunAlignment alignRuns(const Timeline& a, const StackTables* sa, const Timeline& b,
                       const StackTables* sb, const std::optional<std::string>& range) {
    RunAlignment al;
    al.originA = a.t0;
    al.originB = b.t0;
    al.description = "Aligned by start: each run's first event is at 0";
    if (!range) return al;
    std::string name = *range;
    if (name.empty()) {
        const auto common = commonNvtxRanges(sa, sb);
        if (common.empty()) {
            if (sa && sb && !sa->ranges.empty() && !sb->ranges.empty())
                al.description += " (the runs have no NVTX range name in common)";
            return al;
        }
        name = common.front();
    }
    auto firstStart = [&](const StackTables* st) -> std::optional<int64_t> {
        std::optional<int64_t> t;
        if (st)
            for (const NvtxRange& r : st->ranges)
                if (r.name == name && (!t || r.startNs < *t)) t = r.startNs;
        return t;
    };
    const auto ta = firstStart(sa), tb = firstStart(sb);
    if (!ta || !tb) {
        al.description += " (NVTX range '" + name + "' is not in both runs)";
        return al;
    }
    al.basis = RunAlignment::Basis::NvtxRange;
    al.originA = *ta;
    al.originB = *tb;
    al.range = name;
    al.description = "Aligned by NVTX range '" + name + "': its first start in each run is at 0";
    return al;
}

} // namespace poolscope::interop
