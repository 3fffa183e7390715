// The names pass (`dump --names`, `export --format csv`, `whatif`, `advise`, the Perfetto export):
// the report's names of a trace's pools and streams from a pass that replays it and keeps nothing
// else of it, and the live blocks before a stretch (analysis/TraceReport.h).
#include "poolscope/analysis/TraceReport.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <functional>
#include <limits>
#include <optional>
#include <thread>
#include <unordered_map>

#include "../ChunkPipe.h"
#include "../ChunksInOrderImpl.h"
#include "poolscope/ChunksInOrder.h"
#include "../replay/TraceEntities.h"
#include "LaneNames.h"
#include "poolscope/EventFields.h"
#include "poolscope/TraceReader.h"

namespace poolscope {

namespace {

// The live blocks' call sites and APIs for LiveBlocksBefore, by replay tag: a slot per block an
// alloc handed out, given back at its free.
class BlockSites {
public:
    static constexpr uint32_t kNoSlot = ~uint32_t{0};
    uint32_t next(const Event& e) const {
        if (e.kind != EventKind::Alloc) return kNoSlot;
        return free_.empty() ? static_cast<uint32_t>(slots_.size()) : free_.back();
    }
    // Before the event is applied: a pointer import that replaces a live block drops it.
    // (An imported mapping's block has no slot: its tag says nothing.)
    void before(const replay::Replay& replay, const Event& e) {
        if (e.kind != EventKind::PointerImport || e.failed()) return;
        const replay::Block* b = replay.liveBlock(SharedPointerFields::of(e).ptr);
        if (b && !b->imported) give(b->tag);
    }
    void after(const Event& e, const replay::Fact& f, uint32_t tag) {
        if (f.replacedLive && !f.closed.imported) give(f.closed.tag);
        if (f.freed && !f.block.imported) give(f.block.tag);
        if (!f.allocated || f.block.ptr == 0 || tag == kNoSlot) return;
        const Slot s{e.site, static_cast<uint8_t>(AllocFields::of(e).api)};
        if (tag == slots_.size())
            slots_.push_back(s);
        else
            slots_[tag] = s, free_.pop_back();
    }
    std::vector<Allocation> live(const replay::Replay& replay) const {
        std::vector<Allocation> out;
        replay.forEachLive([&](const replay::Block& b) {
            if (b.imported) return;
            Allocation a;
            a.ptr = b.ptr;
            a.size = b.bytes;
            if (b.pool != replay::kNone) {
                a.pool = replay.pools()[b.pool].info.handle;
                a.device = static_cast<int16_t>(replay.pools()[b.pool].info.device);
            }
            if (b.stream != replay::kNone) a.allocStream = replay.streams()[b.stream].info.handle;
            a.allocTsNs = b.allocTsNs;
            a.allocSeq = b.allocSeq;
            a.tid = b.tid;
            if (b.tag < slots_.size()) a.site = slots_[b.tag].site, a.api = slots_[b.tag].api;
            a.beforeLoaded = true;
            out.push_back(a);
        });
        std::sort(out.begin(), out.end(), [](const Allocation& x, const Allocation& y) { return x.allocSeq < y.allocSeq; });
        return out;
    }

private:
    void give(uint32_t tag) {
        if (tag < slots_.size()) free_.push_back(tag);
    }
    struct Slot {
        uint32_t site;
        uint8_t api;
    };
    std::vector<Slot> slots_;
    std::vector<uint32_t> free_;
};

// What a run of chunks did to the live pool blocks. A pointer's state after the run depends on
// its last event in it alone, whatever was live there before: an allocation replaces a live
// block, a free or a cudaFree ends it, an import puts a mapping there (which LiveBlocksBefore
// leaves out). So the run's effect is the blocks it left live (allocated in it) and the
// pointers whose block it ended (a pointer in both was allocated again after).
struct LiveDelta {
    struct Block {
        uint64_t bytes = 0, allocSeq = 0, pool = 0, stream = 0;
        int64_t allocTsNs = 0;
        uint32_t tid = 0, site = 0;
        uint8_t api = 0;
    };
    std::unordered_map<uint64_t, Block> live;
    std::vector<uint64_t> ended; // sorted and without repeats past `compactAt` entries
    size_t compactAt = 1 << 16;
    uint64_t events = 0;
    bool empty() const { return events == 0; }

    void add(const Event& e) {
        ++events;
        if (e.failed() || e.ptr == 0) return;
        switch (e.kind) {
        case EventKind::Alloc: {
            const AllocFields a = AllocFields::of(e);
            live[a.ptr] = Block{a.bytes, e.seq, e.pool, e.stream, e.tsNs, e.tid, e.site, static_cast<uint8_t>(a.api)};
            break;
        }
        case EventKind::Free:
        case EventKind::DeviceFree:
        case EventKind::PointerImport:
            live.erase(e.ptr);
            ended.push_back(e.ptr);
            // A run's frees mostly end pointers it allocated, again and again: its memory is
            // bounded by the pointers it touched, not by its frees.
            if (ended.size() >= compactAt) {
                std::sort(ended.begin(), ended.end());
                ended.erase(std::unique(ended.begin(), ended.end()), ended.end());
                compactAt = std::max(compactAt, 2 * ended.size());
            }
            break;
        default: break;
        }
    }
};

// LiveBlocksBefore's blocks from the chunks before `beforeSeq`, split in as many contiguous runs
// as threads (each run's LiveDelta made on its thread through a reader adopting `scan`, the one
// the names pass's threads adopted, applied in order on this one), or, without a scan, from
// `read`, which the names pass made as it read on this thread. Pool devices as the replay knew
// them at `beforeSeq` (`deviceOf`).
// `advanced` gets the events of each run as it is applied. (Four runs a thread: progress in
// steps that short, and each run's delta a quarter as large.) Empty where the runs' threads
// could not be started: the blocks are then not known.
std::optional<Status> liveBlocks(const TraceReader& reader, unsigned threads,
                                 const std::optional<detail::ThreadedChunks>& chunks, const LiveDelta& read,
                                 LiveBlocksBefore& live, const std::unordered_map<uint64_t, int>& deviceOf,
                                 const std::atomic<bool>* cancel, const std::function<void(uint64_t)>& advanced) {
    auto cancelled = [&] { return cancel && cancel->load(std::memory_order_relaxed); };
    std::unordered_map<uint64_t, LiveDelta::Block> blocks;
    auto apply = [&](const LiveDelta& d) {
        for (uint64_t ptr : d.ended)
            if (!d.live.count(ptr)) blocks.erase(ptr);
        for (const auto& [ptr, b] : d.live) blocks[ptr] = b;
        return !cancelled();
    };
    Status st;
    if (!chunks) {
        apply(read);
    } else {
        std::vector<ChunkHeaderInfo> headers = chunks->headers;
        std::erase_if(headers, [&](const ChunkHeaderInfo& h) { return h.firstSeq >= live.beforeSeq; });
        const size_t runs = size_t{threads} * 4;
        bool noThreads = false;
        if (!headers.empty())
            st = detail::inOrder<LiveDelta>(
                reader, headers, chunks->scan, threads, (headers.size() + runs - 1) / runs,
                [&](std::vector<Event>& chunk, LiveDelta& d) {
                    for (const Event& e : chunk)
                        if (e.seq < live.beforeSeq) d.add(e);
                },
                [](LiveDelta&) {},
                [&](const LiveDelta& d) {
                    if (advanced) advanced(d.events);
                    return apply(d);
                },
                noThreads);
        if (noThreads) return std::nullopt;
    }
    if (!st) return st;
    live.blocks.clear();
    live.blocks.reserve(blocks.size());
    for (const auto& [ptr, b] : blocks) {
        Allocation a;
        a.ptr = ptr;
        a.size = b.bytes;
        a.pool = b.pool;
        auto d = deviceOf.find(b.pool);
        a.device = static_cast<int16_t>(d == deviceOf.end() ? -1 : d->second);
        a.allocStream = b.stream;
        a.allocTsNs = b.allocTsNs;
        a.allocSeq = b.allocSeq;
        a.tid = b.tid;
        a.site = b.site;
        a.api = b.api;
        a.beforeLoaded = true;
        live.blocks.push_back(a);
    }
    std::sort(live.blocks.begin(), live.blocks.end(),
              [](const Allocation& x, const Allocation& y) { return x.allocSeq < y.allocSeq; });
    return Status{};
}

// The names pass over the events NamesFilter keeps of each chunk (LaneNames.h), the chunks
// filtered on `threads` threads while the calling thread replays what they keep (with
// `threads` 1, or where the trace cannot be read on threads, all on the calling thread).
// Empty where the trace must be replayed whole instead: frees marked a pool as reserved that
// nothing else marked, or the live blocks' threads could not be started.
std::optional<Result<TraceNames>> filteredNamesPass(const TraceReader& reader, LiveBlocksBefore* live,
                                                    const NamesPassControl& control, unsigned threads) {
    using Out = std::optional<Result<TraceNames>>;
    replay::Replay replay;
    auto devices = detail::declareTraceEntities(reader, replay, true);
    if (!devices) return Out(devices.error());
    auto samples = reader.samples(0, std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max());
    if (!samples) return Out(samples.error());
    const std::vector<Event>& ss = *samples;
    detail::LaneNameKeeper keeper;
    keeper.setFiltered(true);
    TraceNames out;
    bool anyTime = false;
    auto time = [&](int64_t t) {
        out.t0 = anyTime ? std::min(out.t0, t) : t;
        anyTime = true;
    };
    auto apply = [&](const Event& e) {
        time(e.tsNs);
        keeper.add(replay, e, replay.apply(e));
    };
    // As SampleMerge: a sample goes before the first event whose time reaches its own, which
    // the greatest time among the events so far (kept or not) tells.
    size_t next = 0;
    int64_t newest = INT64_MIN;
    auto samplesUpTo = [&](int64_t t) {
        while (next < ss.size() && ss[next].tsNs <= t) {
            Event s = ss[next++];
            s.kind = EventKind::Sample;
            apply(s);
        }
    };
    uint64_t total = control.progress ? detail::progressTotal(reader) : 0;
    uint64_t done = 0;
    auto cancelled = [&] { return control.cancel && control.cancel->load(std::memory_order_relaxed); };
    // The pools' devices where the live blocks are taken: before the first event at or after
    // beforeSeq (the events dropped before it change no pool's device).
    std::unordered_map<uint64_t, int> deviceOf;
    bool taken = false;
    auto take = [&] {
        for (const replay::PoolState& p : replay.pools()) deviceOf[p.info.handle] = p.info.device;
        taken = true;
    };
    auto deliver = [&](detail::NamesChunk& c) {
        if (c.empty()) return true; // a damaged chunk, skipped
        for (size_t i = 0; i < c.kept.size(); ++i) {
            samplesUpTo(std::max(newest, c.upTo[i]));
            if (live && !taken && c.kept[i].seq >= live->beforeSeq) take();
            apply(c.kept[i]);
        }
        newest = std::max(newest, c.maxTs);
        time(c.minTs);
        done += c.events;
        if (control.progress) control.progress(done, total);
        return !cancelled();
    };
    auto chunks = detail::threadedChunks(reader, threads);
    if (!chunks) return Out(chunks.error());
    bool noThreads = !*chunks;
    Status st;
    if (*chunks) {
        // The live blocks' runs read the chunks before the stretch again, after this pass,
        // through the same scan.
        if (live && control.progress)
            for (const ChunkHeaderInfo& h : (*chunks)->headers)
                if (h.firstSeq < live->beforeSeq) total += h.count;
        st = detail::inOrder<detail::NamesChunk>(
            reader, (*chunks)->headers, (*chunks)->scan, threads, 1,
            [](std::vector<Event>& chunk, detail::NamesChunk& part) { detail::NamesFilter().reduce(chunk, part); },
            [](detail::NamesChunk&) {}, deliver, noThreads);
    }
    LiveDelta liveRead; // the blocks live before the stretch, where this thread reads alone
    if (noThreads) {
        chunks->reset();
        detail::NamesFilter filter;
        detail::NamesChunk part;
        st = detail::forEachChunk(reader, TraceReportOptions::defaultParallel(), [&](std::vector<Event>& chunk) {
            if (live)
                for (const Event& e : chunk)
                    if (e.seq < live->beforeSeq) liveRead.add(e);
            filter.reduce(chunk, part);
            return deliver(part);
        });
    }
    if (cancelled()) return Out(Error{ErrorCode::Cancelled, "reading the trace was cancelled"});
    if (!st) return Out(st.error());
    samplesUpTo(std::numeric_limits<int64_t>::max());
    if (!keeper.exactWithoutFreeMarks()) return std::nullopt;
    if (live) {
        if (!taken) take();
        auto advanced = [&](uint64_t events) {
            done += events;
            if (control.progress) control.progress(std::min(done, total), total);
        };
        const auto blocks = liveBlocks(reader, threads, *chunks, liveRead, *live, deviceOf, control.cancel, advanced);
        if (!blocks) return std::nullopt;
        if (cancelled()) return Out(Error{ErrorCode::Cancelled, "reading the trace was cancelled"});
        if (!*blocks) return Out(blocks->error());
    }
    out.names = keeper.names(replay, *devices);
    if (control.describe) out.madeFrom = keeper.describe(replay);
    out.filtered = true;
    return Out(std::move(out));
}

unsigned namesThreads() {
    if (std::getenv("POOLSCOPE_DECODE_THREADS")) return decodingThreadsBeside();
    return std::clamp(std::thread::hardware_concurrency(), 1u, ChunkTextOptions::kMaxThreads);
}

} // namespace

Result<TraceNames> traceNamesAndStart(const TraceReader& reader, LiveBlocksBefore* live,
                                      const NamesPassControl& control) {
    {
        const unsigned threads = control.threads ? control.threads : namesThreads();
        if (threads > 1 || control.filterAlone)
            if (auto filtered = filteredNamesPass(reader, live, control, threads)) return std::move(*filtered);
    }
    // Set up as reportTrace sets up its replay: the same facts follow.
    replay::Replay replay;
    auto devices = detail::declareTraceEntities(reader, replay, true);
    if (!devices) return devices.error();
    auto samples = reader.samples(0, std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max());
    if (!samples) return samples.error();
    detail::LaneNameKeeper keeper;
    TraceNames out;
    bool anyTime = false;
    BlockSites sites;
    bool taken = false;
    auto apply = [&](const Event& e) {
        out.t0 = anyTime ? std::min(out.t0, e.tsNs) : e.tsNs;
        anyTime = true;
        if (!live) {
            keeper.add(replay, e, replay.apply(e));
            return;
        }
        if (!taken && e.kind != EventKind::Sample && e.seq >= live->beforeSeq) {
            live->blocks = sites.live(replay);
            taken = true;
        }
        sites.before(replay, e);
        const uint32_t tag = sites.next(e);
        const replay::Fact& f = replay.apply(e, tag);
        sites.after(e, f, tag);
        keeper.add(replay, e, f);
    };
    detail::SampleMerge merge;
    merge.expect(&*samples);
    const uint64_t total = control.progress ? detail::progressTotal(reader) : 0;
    uint64_t done = 0;
    auto cancelled = [&] { return control.cancel && control.cancel->load(std::memory_order_relaxed); };
    // Decoding a chunk costs about as much as replaying it: several threads decode, the replay
    // stays one (and bounds the pass).
    const unsigned decoders = control.threads ? control.threads : decodingThreadsBeside();
    const Status st = decodeChunksInOrder(reader, [&](std::vector<Event>& chunk) {
        merge.chunk(chunk, replay, apply);
        done += chunk.size();
        if (control.progress) control.progress(done, total);
        return !cancelled();
    }, decoders, TraceReportOptions::defaultParallel());
    if (cancelled()) return Error{ErrorCode::Cancelled, "reading the trace was cancelled"};
    if (!st) return st.error();
    merge.rest(apply);
    if (live && !taken) live->blocks = sites.live(replay);
    out.names = keeper.names(replay, *devices);
    if (control.describe) out.madeFrom = keeper.describe(replay);
    return out;
}

Result<view::EntityNames> traceNames(const TraceReader& reader) {
    auto r = traceNamesAndStart(reader);
    if (!r) return r.error();
    return std::move(r->names);
}

} // namespace poolscope
