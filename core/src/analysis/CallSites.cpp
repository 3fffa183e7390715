#include "poolscope/analysis/CallSites.h"

#include <algorithm>
#include <unordered_map>

namespace poolscope::analysis {

// The CUDA runtime's own frames between the program's call and the driver: cudaMallocAsync,
// cudart::... and the local symbols of static cudart inside the program (named
// libcudart_static_HASH), anything in libcudart; and PyTorch's allocator, whose frames every
// PyTorch allocation shares.
bool isRuntimeFrame(const StackTables& t, const NativeFrame& f) {
    if (const ModuleInfo* m = t.module(f.module); m && moduleName(m->path).rfind("libcudart", 0) == 0)
        return true;
    const Symbol* s = t.symbol(f);
    if (!s) return false;
    const std::string& fn = s->function;
    return fn.rfind("cudart::", 0) == 0 || fn.rfind("__cudart", 0) == 0 ||
           fn.rfind("libcudart_static", 0) == 0 || fn.rfind("cudaMalloc", 0) == 0 ||
           fn.rfind("cudaFree", 0) == 0 || fn.rfind("c10::cuda::CUDACachingAllocator::", 0) == 0;
}

std::vector<PoolSites> topSitesAtPeaks(const Timeline& tl, const Report& report, size_t n) {
    std::vector<PoolSites> out;
    // One pass over the allocations, not one per pool (traces with hundreds of pools).
    std::unordered_map<uint64_t, std::vector<const Allocation*>> byPool;
    for (const Allocation& a : tl.allocations)
        if (a.ptr) byPool[a.pool].push_back(&a);
    for (const PoolReport& pr : report.pools) {
        PoolSites ps;
        ps.pool = pr.info.handle;
        const std::vector<const Allocation*>& mine = byPool[ps.pool];
        const bool reservedPeak = pr.hasWatermarks && pr.peakReserved > 0;
        // A pool that never held a block has no sites to name (and no instant to name them at).
        if (!reservedPeak && mine.empty()) continue;
        if (reservedPeak) {
            ps.atTsNs = pr.peakReservedTsNs;
            ps.reserved = pr.peakReserved;
        } else {
            // No watermarks: the instant of most live bytes, from the allocations.
            ps.atPeakReserved = false;
            std::vector<std::pair<int64_t, int64_t>> steps;
            for (const Allocation* a : mine) {
                steps.push_back({a->allocTsNs, int64_t(a->size)});
                if (!a->live()) steps.push_back({a->freeTsNs, -int64_t(a->size)});
            }
            std::sort(steps.begin(), steps.end());
            int64_t live = 0, best = -1;
            for (size_t i = 0; i < steps.size(); ++i) {
                live += steps[i].second;
                const bool lastAtTs = i + 1 == steps.size() || steps[i + 1].first != steps[i].first;
                if (lastAtTs && live > best) {
                    best = live;
                    ps.atTsNs = steps[i].first;
                }
            }
        }
        std::unordered_map<uint32_t, SiteBytes> bySite;
        for (const Allocation* a : mine) {
            if (a->allocTsNs > ps.atTsNs || (!a->live() && a->freeTsNs <= ps.atTsNs)) continue;
            SiteBytes& s = bySite[a->site];
            s.site = a->site;
            s.bytes += a->size;
            s.count++;
            ps.liveBytes += a->size;
            ps.liveCount++;
        }
        for (auto& [site, sb] : bySite) ps.top.push_back(sb);
        std::sort(ps.top.begin(), ps.top.end(), [](const SiteBytes& a, const SiteBytes& b) {
            return a.bytes != b.bytes ? a.bytes > b.bytes : a.site < b.site;
        });
        if (ps.top.size() > n) ps.top.resize(n);
        out.push_back(std::move(ps));
    }
    return out;
}

std::vector<std::string> siteFrames(const StackTables& t, uint32_t site) {
    std::vector<std::string> out;
    auto it = t.sites.find(site);
    if (it == t.sites.end()) return out;
    if (auto py = t.pythonStacks.find(it->second.pythonStack); py != t.pythonStacks.end())
        for (const PythonFrame& f : py->second) out.push_back(frameText(f));
    if (auto nat = t.nativeStacks.find(it->second.nativeStack); nat != t.nativeStacks.end())
        for (const NativeFrame& f : nat->second) out.push_back(frameText(t, f));
    return out;
}

std::string sitePath(const StackTables& t, uint32_t site) {
    auto it = t.sites.find(site);
    if (it == t.sites.end()) return {};
    auto p = t.nvtxPaths.find(it->second.nvtxPath);
    if (p == t.nvtxPaths.end()) return {};
    std::string s;
    for (const std::string& name : p->second) s += (s.empty() ? "" : "/") + name;
    return s;
}

std::string siteText(const StackTables& t, uint32_t site, size_t maxFrames) {
    auto it = t.sites.find(site);
    if (site == 0 || it == t.sites.end()) return "(no stack)";
    std::vector<std::string> frames;
    if (auto py = t.pythonStacks.find(it->second.pythonStack); py != t.pythonStacks.end())
        for (const PythonFrame& f : py->second) frames.push_back(frameText(f));
    if (frames.size() < maxFrames)
        if (auto nat = t.nativeStacks.find(it->second.nativeStack); nat != t.nativeStacks.end()) {
            size_t first = 0;
            while (first < nat->second.size() && isRuntimeFrame(t, nat->second[first])) ++first;
            if (first == nat->second.size()) first = 0; // nothing but the runtime: show it
            for (size_t i = first; i < nat->second.size(); ++i)
                frames.push_back(frameText(t, nat->second[i]));
        }
    std::string s;
    for (size_t i = 0; i < frames.size() && i < maxFrames; ++i) s += (i ? " < " : "") + frames[i];
    if (s.empty()) s = "(no frames)";
    if (std::string path = sitePath(t, site); !path.empty()) s += "  [" + path + "]";
    return s;
}

} // namespace poolscope::analysis
