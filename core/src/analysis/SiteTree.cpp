#include "poolscope/analysis/SiteTree.h"

#include <algorithm>
#include <map>

#include "poolscope/analysis/CallSites.h"

namespace poolscope::analysis {

namespace {

bool startsWith(const std::string& s, const char* prefix) {
    return s.rfind(prefix, 0) == 0;
}

// "forward (gpt2/modeling_gpt2.py:42)" -> function "forward", location "gpt2/...py:42"; a frame
// without symbols ("libfoo.so+0x1a2b") is all location.
StackFrame splitFrame(std::string text, StackFrame::Kind kind, bool hasFunction) {
    StackFrame f;
    f.kind = kind;
    const size_t open = text.rfind(" (");
    if (hasFunction && open != std::string::npos && !text.empty() && text.back() == ')') {
        f.function = text.substr(0, open);
        f.location = text.substr(open + 2, text.size() - open - 3);
    } else if (hasFunction) {
        f.function = text;
    } else {
        f.location = text;
    }
    f.text = std::move(text);
    return f;
}

StackFrame nativeFrame(const StackTables& t, const NativeFrame& n) {
    const Symbol* s = t.symbol(n);
    return splitFrame(frameText(t, n), StackFrame::Kind::Native, s && !s->function.empty());
}

} // namespace

bool isInterpreterFrame(const StackTables& t, const NativeFrame& f) {
    if (const ModuleInfo* m = t.module(f.module)) {
        const std::string name = moduleName(m->path);
        if (startsWith(name, "libpython")) return true;
    }
    const Symbol* s = t.symbol(f);
    if (!s) return false;
    // CPython's C API and internals are all Py/_Py-prefixed; the static helpers of its call
    // machinery that show up between two Python frames are named here.
    const std::string& fn = s->function;
    return startsWith(fn, "_Py") || startsWith(fn, "Py") || startsWith(fn, "method_vectorcall") ||
           startsWith(fn, "cfunction_") || startsWith(fn, "slot_tp_") ||
           startsWith(fn, "vectorcall_") || startsWith(fn, "function_code_fastcall") ||
           startsWith(fn, "object_vacall") || startsWith(fn, "builtin_");
}

CallStack callStack(const StackTables& t, uint32_t site) {
    CallStack cs;
    auto it = t.sites.find(site);
    if (site == 0 || it == t.sites.end()) return cs;
    static const std::vector<NativeFrame> noNative;
    static const std::vector<PythonFrame> noPython;
    auto nat = t.nativeStacks.find(it->second.nativeStack);
    auto py = t.pythonStacks.find(it->second.pythonStack);
    const std::vector<NativeFrame>& N = nat == t.nativeStacks.end() ? noNative : nat->second;
    const std::vector<PythonFrame>& P = py == t.pythonStacks.end() ? noPython : py->second;

    // Innermost first: the runtime's frames at the allocating end are left out (all of them
    // kept when there is nothing else).
    size_t first = 0;
    while (first < N.size() && isRuntimeFrame(t, N[first])) ++first;
    if (first == N.size() && P.empty()) first = 0;
    cs.runtimeFrames = first;

    // N[first, inner) was called from Python; N(outer, end) called the interpreter (main,
    // Py_RunMain's callers). What lies between is the interpreter running the Python frames.
    size_t inner = N.size(), outer = N.size();
    if (!P.empty()) {
        for (size_t i = first; i < N.size(); ++i)
            if (isInterpreterFrame(t, N[i])) {
                if (inner == N.size()) inner = i;
                outer = i;
            }
        if (inner < N.size()) cs.interpreterFrames = outer - inner + 1;
    }
    auto pushNative = [&](size_t i) { cs.frames.push_back(nativeFrame(t, N[i])); };
    if (inner < N.size())
        for (size_t i = N.size(); i-- > outer + 1;) pushNative(i);
    for (size_t i = P.size(); i-- > 0;)
        cs.frames.push_back(splitFrame(frameText(P[i]), StackFrame::Kind::Python, true));
    for (size_t i = std::min(inner, N.size()); i-- > first;) pushNative(i);
    return cs;
}

std::vector<const NvtxRange*> openRanges(const StackTables& t, uint32_t tid, int64_t tsNs) {
    std::vector<const NvtxRange*> out;
    for (const NvtxRange& r : t.ranges)
        if (r.tid == tid && r.startNs <= tsNs && (r.endNs == 0 || r.endNs > tsNs))
            out.push_back(&r);
    std::stable_sort(out.begin(), out.end(), [](const NvtxRange* a, const NvtxRange* b) {
        return a->startNs != b->startNs ? a->startNs < b->startNs : a->depth < b->depth;
    });
    return out;
}

SiteTree buildSiteTree(const Timeline& tl, const StackTables& t, SiteOrder order) {
    SiteTree tree;
    tree.order = order;
    tree.nodes.emplace_back(); // the root

    // Per site: its allocations' totals and their alloc/free steps as positions in one global
    // time order, so each node's peak is a sweep over the positions of its sites only.
    struct PerSite {
        uint64_t bytes = 0, count = 0, liveBytes = 0, liveCount = 0;
        std::vector<uint32_t> steps;
    };
    struct Step {
        int64_t ts;
        int64_t delta;
        uint32_t site;
    };
    std::vector<Step> steps;
    steps.reserve(tl.allocations.size() * 2);
    std::map<uint32_t, PerSite> perSite;
    for (const Allocation& a : tl.allocations) {
        if (!a.ptr) continue;
        const uint32_t site = t.sites.count(a.site) ? a.site : 0;
        PerSite& ps = perSite[site];
        ps.bytes += a.size;
        ps.count++;
        if (a.live()) {
            ps.liveBytes += a.size;
            ps.liveCount++;
        }
        steps.push_back({a.allocTsNs, int64_t(a.size), site});
        if (!a.live()) steps.push_back({a.freeTsNs, -int64_t(a.size), site});
    }
    // At one instant frees and allocs both apply before the instant is measured.
    std::stable_sort(steps.begin(), steps.end(),
                     [](const Step& x, const Step& y) { return x.ts < y.ts; });
    for (size_t i = 0; i < steps.size(); ++i) perSite[steps[i].site].steps.push_back(uint32_t(i));

    std::unordered_map<std::string, uint32_t> childOf; // "parent\x1f" kind text -> node
    auto child = [&](uint32_t parent, const StackFrame& f) {
        std::string key = std::to_string(parent);
        key += '\x1f';
        key += char('0' + int(f.kind));
        key += f.text;
        auto [it, added] = childOf.try_emplace(std::move(key), uint32_t(tree.nodes.size()));
        if (added) {
            SiteNode n;
            n.parent = parent;
            n.depth = tree.nodes[parent].depth + 1;
            n.kind = f.kind;
            n.frame = f.text;
            n.location = f.location;
            tree.nodes.push_back(std::move(n));
            tree.nodes[parent].children.push_back(it->second);
        }
        return it->second;
    };
    std::vector<std::vector<uint32_t>> nodeSites(1);
    for (auto& [site, ps] : perSite) {
        std::vector<StackFrame> path;
        if (site != 0) path = callStack(t, site).frames;
        if (path.empty()) {
            StackFrame none;
            none.kind = StackFrame::Kind::None;
            none.text = site == 0 ? "(no stack)" : "(no frames)";
            path.push_back(std::move(none));
        }
        if (order == SiteOrder::BottomUp) std::reverse(path.begin(), path.end());
        uint32_t node = 0;
        auto visit = [&](uint32_t n) {
            SiteNode& sn = tree.nodes[n];
            sn.bytesAllocated += ps.bytes;
            sn.count += ps.count;
            sn.liveAtEndBytes += ps.liveBytes;
            sn.liveAtEndCount += ps.liveCount;
            sn.sites.push_back(site);
        };
        visit(0);
        for (const StackFrame& f : path) {
            node = child(node, f);
            visit(node);
        }
        tree.leafOfSite[site] = node;
    }

    // Peaks: each node sweeps the steps of its sites in time order.
    std::vector<uint32_t> pos;
    for (SiteNode& n : tree.nodes) {
        pos.clear();
        for (uint32_t s : n.sites) {
            const std::vector<uint32_t>& sp = perSite[s].steps;
            pos.insert(pos.end(), sp.begin(), sp.end());
        }
        if (n.sites.size() > 1) std::sort(pos.begin(), pos.end());
        int64_t live = 0, best = 0;
        for (size_t i = 0; i < pos.size(); ++i) {
            const Step& st = steps[pos[i]];
            live += st.delta;
            const bool lastAtTs = i + 1 == pos.size() || steps[pos[i + 1]].ts != st.ts;
            if (lastAtTs && live > best) {
                best = live;
                n.peakLiveTsNs = st.ts;
            }
        }
        n.peakLive = uint64_t(best);
        std::sort(n.sites.begin(), n.sites.end());
        n.sites.erase(std::unique(n.sites.begin(), n.sites.end()), n.sites.end());
    }
    for (SiteNode& n : tree.nodes)
        std::sort(n.children.begin(), n.children.end(), [&](uint32_t a, uint32_t b) {
            const SiteNode &x = tree.nodes[a], &y = tree.nodes[b];
            if (x.peakLive != y.peakLive) return x.peakLive > y.peakLive;
            if (x.bytesAllocated != y.bytesAllocated) return x.bytesAllocated > y.bytesAllocated;
            return x.frame < y.frame;
        });
    return tree;
}

std::vector<uint64_t> liveBytesAt(const SiteTree& tree, const Timeline& tl, int64_t tsNs,
                                  uint64_t pool) {
    std::vector<uint64_t> out(tree.nodes.size(), 0);
    std::unordered_map<uint32_t, uint64_t> bySite;
    for (const Allocation& a : tl.allocations) {
        if (!a.ptr || (pool && a.pool != pool)) continue;
        if (a.allocTsNs > tsNs || (!a.live() && a.freeTsNs <= tsNs)) continue;
        bySite[a.site] += a.size;
    }
    for (auto [site, bytes] : bySite) {
        auto leaf = tree.leafOfSite.find(site);
        if (leaf == tree.leafOfSite.end()) leaf = tree.leafOfSite.find(0); // a site not in the tables
        if (leaf == tree.leafOfSite.end()) continue;
        for (uint32_t n = leaf->second;; n = tree.nodes[n].parent) {
            out[n] += bytes;
            if (n == 0) break;
        }
    }
    return out;
}

std::vector<uint32_t> allocationsOfSites(const Timeline& tl, const std::vector<uint32_t>& sites) {
    std::vector<uint32_t> out;
    for (size_t i = 0; i < tl.allocations.size(); ++i) {
        const Allocation& a = tl.allocations[i];
        if (a.ptr && std::binary_search(sites.begin(), sites.end(), a.site))
            out.push_back(uint32_t(i));
    }
    return out;
}

Series liveBytesSeries(const Timeline& tl, const std::vector<uint32_t>& allocations) {
    std::vector<std::pair<int64_t, int64_t>> steps;
    steps.reserve(allocations.size() * 2);
    for (uint32_t i : allocations) {
        if (i >= tl.allocations.size()) continue;
        const Allocation& a = tl.allocations[i];
        steps.push_back({a.allocTsNs, int64_t(a.size)});
        if (!a.live()) steps.push_back({a.freeTsNs, -int64_t(a.size)});
    }
    std::stable_sort(steps.begin(), steps.end(),
                     [](const auto& x, const auto& y) { return x.first < y.first; });
    Series s;
    int64_t live = 0;
    if (!steps.empty() && steps.front().first > tl.t0) s.push(tl.t0, 0);
    for (const auto& [ts, d] : steps) {
        live += d;
        s.push(ts, uint64_t(std::max<int64_t>(live, 0)));
    }
    return s;
}

} // namespace poolscope::analysis
