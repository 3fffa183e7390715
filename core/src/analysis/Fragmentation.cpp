#include "poolscope/analysis/Fragmentation.h"

#include <algorithm>

#include "poolscope/EventFields.h"

namespace poolscope {

const Fragmentation::Pool* Fragmentation::pool(uint64_t handle) const {
    for (const Pool& p : pools)
        if (p.handle == handle) return &p;
    return nullptr;
}

const PoolGrowth* Fragmentation::at(uint64_t seq) const {
    auto it = std::lower_bound(events.begin(), events.end(), seq,
                               [](const PoolGrowth& g, uint64_t s) { return g.seq < s; });
    return it != events.end() && it->seq == seq ? &*it : nullptr;
}

uint32_t FragmentationAnalysis::kindMask() { return 1u << static_cast<unsigned>(EventKind::Alloc); }

void FragmentationAnalysis::onFact(const replay::Fact& f, const replay::Replay& r) {
    if (f.pool == replay::kNone) return;
    const replay::PoolState& p = r.pools()[f.pool];
    PoolGrowth g;
    if (f.failedAlloc) {
        // A failure changes nothing; a failed call that carried watermarks read the same state.
        if (f.watermarks ? !f.watermarksBefore : !p.watermarksKnown) return;
        g.failed = true;
        g.result = f.event->result;
        const uint64_t reserved = f.watermarks ? f.reservedBefore : p.reserved;
        const uint64_t used = f.watermarks ? f.usedBefore : p.used;
        g.idleBefore = reserved > used ? reserved - used : 0;
    } else {
        if (!f.allocated || !f.watermarks || !f.watermarksBefore) return;
        if (p.reserved <= f.reservedBefore) return; // served from what the pool held
        g.grewBy = p.reserved - f.reservedBefore;
        g.idleBefore = f.reservedBefore > f.usedBefore ? f.reservedBefore - f.usedBefore : 0;
        g.allocation = f.block.tag;
    }
    const Event& e = *f.event;
    g.seq = e.seq;
    g.tsNs = e.tsNs;
    g.pool = p.info.handle;
    g.stream = e.stream;
    g.bytes = AllocFields::of(e).bytes;
    g.pendingElsewhere = r.pendingFreeBytes() - r.streams()[f.stream].pendingFreeBytes();

    if (slot_.size() <= f.pool) slot_.resize(r.pools().size(), -1);
    int32_t& si = slot_[f.pool];
    if (si < 0) {
        si = static_cast<int32_t>(out_.pools.size());
        out_.pools.push_back(Fragmentation::Pool{});
        out_.pools.back().handle = p.info.handle;
    }
    Fragmentation::Pool& s = out_.pools[static_cast<size_t>(si)];
    if (g.failed) {
        s.failures++;
        s.failuresWhileIdle += g.whileIdle();
        s.fragmentedFailures += g.fragmented();
    } else {
        s.growths++;
        s.growthsWhileIdle += g.whileIdle();
        s.fragmentedGrowths += g.fragmented();
        s.grownBytes += g.grewBy;
    }
    if (fragmentedOnly_) {
        if (seen_ < Fragmentation::kMaxKept && g.fragmented() && out_.events.size() < maxFragmented_) {
            out_.events.push_back(g);
            seenAt_.push_back(seen_);
        }
    } else if (out_.events.size() < Fragmentation::kMaxKept) {
        out_.events.push_back(g);
    }
    ++seen_;
}

void FragmentationAnalysis::absorb(FragmentationAnalysis&& later) {
    for (const Fragmentation::Pool& l : later.out_.pools) {
        auto it = std::find_if(out_.pools.begin(), out_.pools.end(),
                               [&](const Fragmentation::Pool& p) { return p.handle == l.handle; });
        if (it == out_.pools.end()) {
            out_.pools.push_back(l);
            continue;
        }
        it->growths += l.growths;
        it->growthsWhileIdle += l.growthsWhileIdle;
        it->fragmentedGrowths += l.fragmentedGrowths;
        it->failures += l.failures;
        it->failuresWhileIdle += l.failuresWhileIdle;
        it->fragmentedFailures += l.fragmentedFailures;
        it->grownBytes += l.grownBytes;
    }
    for (size_t i = 0; i < later.out_.events.size(); ++i) {
        // Where a single read would have met it.
        const uint64_t at = seen_ + (fragmentedOnly_ ? later.seenAt_[i] : i);
        if (at >= Fragmentation::kMaxKept || out_.events.size() >= (fragmentedOnly_ ? maxFragmented_ : Fragmentation::kMaxKept))
            break;
        out_.events.push_back(later.out_.events[i]);
        if (fragmentedOnly_) seenAt_.push_back(at);
    }
    seen_ += later.seen_;
}

} // namespace poolscope
