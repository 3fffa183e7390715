#include "PieceRead.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <limits>
#include <mutex>
#include <optional>
#include <thread>

#include "../replay/TraceEntities.h"
#include "ReplayThread.h"

namespace poolscope::detail {

uint64_t PiecePlan::firstSeq(size_t k) const {
    if (k < pieces() && cut[k] < headers.size()) return headers[cut[k]].firstSeq;
    return headers.empty() ? 0 : headers.back().lastSeq + 1;
}

std::vector<int64_t> PiecePlan::ids(size_t k) const {
    std::vector<int64_t> out;
    for (size_t i = cut[k]; i < cut[k + 1]; ++i) out.push_back(headers[i].id);
    return out;
}

bool PieceStarts::allExact() const {
    return std::all_of(exact.begin(), exact.end(), [](bool b) { return b; });
}

PiecePlan planPieces(std::vector<ChunkHeaderInfo> headers, const std::vector<Event>& samples, size_t pieces) {
    PiecePlan p;
    p.headers = std::move(headers);
    pieces = std::clamp<size_t>(pieces, 1, std::max<size_t>(1, p.headers.size()));
    uint64_t total = 0;
    for (const ChunkHeaderInfo& h : p.headers) total += h.count;
    p.cut.assign(pieces + 1, p.headers.size());
    p.cut[0] = 0;
    uint64_t seen = 0;
    size_t k = 1;
    for (size_t i = 0; i < p.headers.size() && k < pieces; ++i) {
        seen += p.headers[i].count;
        if (seen >= total * k / pieces) p.cut[k++] = i + 1;
    }
    // Pieces left empty (chunks fewer or larger than the share) are dropped.
    p.cut.erase(std::unique(p.cut.begin(), p.cut.end()), p.cut.end());
    if (p.cut.size() == 1) p.cut.push_back(p.cut[0]);
    p.firstSample.assign(p.pieces(), 0);
    int64_t latest = INT64_MIN;
    size_t next = 0;
    for (size_t i = 0; i <= p.headers.size() && next < p.pieces(); ++i) {
        while (next < p.pieces() && p.cut[next] == i) {
            p.firstSample[next++] = static_cast<size_t>(
                std::upper_bound(samples.begin(), samples.end(), latest,
                                 [](int64_t t, const Event& s) { return t < s.tsNs; }) -
                samples.begin());
        }
        if (i < p.headers.size()) latest = std::max(latest, p.headers[i].tMax);
    }
    return p;
}

namespace {

// The caller's cancel and, for runPieces, the pieces' own reason to stop.
struct Stop {
    const std::atomic<bool>* cancel = nullptr;
    const std::atomic<bool>* halt = nullptr;
    bool operator()() const {
        return (cancel && cancel->load(std::memory_order_relaxed)) || (halt && halt->load(std::memory_order_relaxed));
    }
};

// `work` on n threads, this one among them, until each returns.
void onWorkers(size_t n, const std::function<void()>& work) {
    std::vector<std::thread> pool;
    try {
        for (size_t t = 1; t < n; ++t) pool.emplace_back(work);
    } catch (const std::system_error&) {
        // Fewer threads than asked: the ones started (and this one) take every piece.
    }
    work();
    for (std::thread& t : pool) t.join();
}

// fn(k) for every piece, on up to `threads` threads; the first error stops the pieces not begun.
Status onThreads(size_t pieces, unsigned threads, Stop stopped, const std::function<Status(size_t)>& fn) {
    std::atomic<size_t> next{0};
    std::atomic<bool> stop{false};
    std::mutex m;
    Status first;
    auto work = [&] {
        for (size_t k; !stop && (k = next++) < pieces;) {
            if (stopped()) {
                std::lock_guard lock(m);
                if (first) first = Error{ErrorCode::Cancelled, "reading the trace was cancelled"};
                stop = true;
                return;
            }
            Status st = fn(k);
            if (!st) {
                std::lock_guard lock(m);
                if (first) first = std::move(st);
                stop = true;
            }
        }
    };
    onWorkers(std::clamp<size_t>(threads, 1, std::max<size_t>(1, pieces)), work);
    return first;
}

// Piece k's events, the samples merged in by time, through `apply` on `r`.
template <class Apply>
Status readPiece(const ReaderOpener& open, const PiecePlan& plan, const std::vector<Event>& samples, size_t k,
                 const replay::Replay& r, Stop stopped, Apply&& apply) {
    auto reader = open();
    if (!reader) return reader.error();
    // The samples from the piece's first on: a piece stops at its own last event, the last
    // piece takes the rest.
    SampleMerge merge;
    merge.expect(&samples, plan.firstSample[k]);
    Status st = (*reader)->forEachChunkById(plan.ids(k), [&](std::vector<Event>& chunk) {
        merge.chunk(chunk, r, apply);
        return !stopped();
    });
    if (!st) return st;
    if (k + 1 == plan.pieces()) merge.rest(apply);
    return Status{};
}

} // namespace

Result<PieceStarts> findPieceStarts(const ReaderOpener& open, const replay::Replay& declared, const PiecePlan& plan,
                                    const std::vector<Event>& samples, unsigned threads,
                                    const std::atomic<bool>* cancel) {
    const size_t n = plan.pieces();
    PieceStarts out;
    out.starts.reserve(n + 1);
    out.starts.push_back(declared.clone());
    // Each piece carried over as soon as the pieces before it have been (on the thread that
    // ended the last of them): a piece's replay holds a note of every pointer it met, and only
    // those on their way or waiting for an earlier one are held.
    std::vector<std::unique_ptr<replay::Replay>> local(n);
    std::vector<char> ended(n, 0);
    std::mutex carrying;
    size_t next = 0;
    Status st = onThreads(n, threads, Stop{cancel}, [&](size_t k) {
        auto piece = std::make_unique<replay::Replay>(declared.clone());
        piece->startPiece();
        Status read = readPiece(open, plan, samples, k, *piece, Stop{cancel}, [&](const Event& e) { piece->apply(e); });
        if (!read) return read;
        std::lock_guard lock(carrying);
        local[k] = std::move(piece);
        ended[k] = 1;
        for (; next < n && ended[next]; ++next) {
            bool exact = false;
            out.starts.push_back(local[next]->afterPiece(out.starts.back(), &exact));
            out.exact.push_back(exact);
            local[next].reset();
        }
        return Status{};
    });
    if (!st) return st.error();
    return out;
}

Status runPieces(const ReaderOpener& open, const replay::Replay& declared, const PiecePlan& plan,
                 const std::vector<Event>& samples, unsigned threads,
                 const std::function<void(size_t, replay::Replay&)>& before,
                 const std::function<void(size_t, const PieceEnd&)>& after, const std::atomic<bool>* cancel,
                 const std::atomic<bool>* halt) {
    const size_t n = plan.pieces();
    const Stop stopped{cancel, halt};
    struct Piece {
        std::optional<replay::Replay> start; // the state before it, from when it is known until
                                             // this piece and the one before have ended
        bool known = false, startExact = false;
        std::unique_ptr<replay::Replay> scout; // it replayed without its start, ended
        bool scouting = false, replaying = false, ended = false;
    };
    std::vector<Piece> p(n + 1);
    p[0].start = declared.clone();
    p[0].known = p[0].startExact = true;
    std::mutex m;
    std::condition_variable changed;
    Status first;
    size_t ended = 0;

    auto setStart = [&](size_t k, replay::Replay r, bool exact) { // with `m` held
        p[k].start = std::move(r);
        p[k].known = true;
        p[k].startExact = exact;
    };
    // With `m` held: each scout whose piece's start is known carries it to the next one's.
    auto carry = [&] {
        for (size_t k = 0; k + 1 < n; ++k) {
            if (!p[k].scout || !p[k].known || p[k + 1].known) continue;
            bool exact = false;
            replay::Replay next = p[k].scout->afterPiece(*p[k].start, &exact);
            setStart(k + 1, std::move(next), p[k].startExact && exact);
            p[k].scout.reset();
        }
    };
    // Piece k's start goes once piece k and the one before (which checks its end against it)
    // have ended.
    auto drop = [&](size_t k) {
        if (k < n && p[k].ended && (k == 0 || p[k - 1].ended)) p[k].start.reset();
    };
    auto fail = [&](Status st) { // with `m` held
        if (first) first = std::move(st);
    };
    auto work = [&] {
        std::unique_lock lock(m);
        for (;;) {
            if (!first || ended == n) return;
            if (stopped()) {
                fail(Error{ErrorCode::Cancelled, "reading the trace was cancelled"});
                changed.notify_all();
                return;
            }
            // The earliest piece whose start is known, else a piece to scout: one whose replay
            // has not begun and whose end nobody knows yet (the last piece's end is its replay's).
            size_t real = n, scout = n;
            for (size_t k = 0; k < n && real == n; ++k)
                if (p[k].known && !p[k].replaying) real = k;
            for (size_t k = 0; k + 1 < n && real == n && scout == n; ++k)
                if (!p[k].replaying && !p[k].scouting && !p[k].scout && !p[k + 1].known) scout = k;
            if (real == n && scout == n) {
                changed.wait(lock);
                continue;
            }
            if (scout < n) {
                p[scout].scouting = true;
                lock.unlock();
                auto r = std::make_unique<replay::Replay>(declared.clone());
                r->startPiece();
                Status st = readPiece(open, plan, samples, scout, *r, stopped, [&](const Event& e) { r->apply(e); });
                lock.lock();
                p[scout].scouting = false;
                if (!st) fail(std::move(st));
                else if (!stopped() && !p[scout + 1].known && !p[scout].replaying) p[scout].scout = std::move(r);
                carry();
            } else {
                p[real].replaying = true;
                lock.unlock();
                // Unlocked: once replaying, nothing but this thread changes or drops the start.
                replay::Replay r = p[real].start->clone();
                if (before) before(real, r);
                Status st = readPiece(open, plan, samples, real, r, stopped, [&](const Event& e) { r.apply(e); });
                if (st && stopped()) st = Error{ErrorCode::Cancelled, "reading the trace was cancelled"};
                lock.lock();
                if (!st) {
                    fail(std::move(st));
                } else {
                    bool same = true;
                    if (p[real + 1].known)
                        same = r.sameState(*p[real + 1].start);
                    else
                        setStart(real + 1, r.clone(), p[real].startExact);
                    p[real].scout.reset();
                    carry();
                    if (after) after(real, PieceEnd{*p[real].start, *p[real + 1].start, p[real].startExact, same});
                    p[real].ended = true;
                    ++ended;
                    drop(real);
                    drop(real + 1);
                }
            }
            changed.notify_all();
        }
    };
    onWorkers(std::clamp<size_t>(threads, 1, std::max<size_t>(1, n)), work);
    return first;
}

PieceAnalyses::PieceAnalyses(size_t topN) {
    // As ReportReducer keeps them: peaks without series, the first topN of each list.
    pending.keepSeries(false);
    hazards.setMaxKept(topN);
    fragmentation.keepFragmentedOnly(topN);
}

void PieceAnalyses::subscribe(replay::Replay& r) {
    r.subscribe(&pending, PendingFreesAnalysis::kindMask());
    r.subscribe(&hazards, StreamHazardsAnalysis::kindMask());
    r.subscribe(&fragmentation, FragmentationAnalysis::kindMask());
}

Result<PieceSetUp> setUpPieces(const TraceReader& reader, size_t pieces) {
    if (reader.path().empty()) return Error{ErrorCode::InvalidArgument, "a trace read in pieces must be a file"};
    PieceSetUp s;
    const std::string path = reader.path();
    s.open = [path] { return TraceReader::open(path); };
    auto samples = reader.samples(0, std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max());
    if (!samples) return samples.error();
    s.samples = std::move(*samples);
    auto headers = reader.chunkHeaders();
    if (!headers) return headers.error();
    s.declared = std::make_unique<replay::Replay>();
    if (auto d = declareTraceEntities(reader, *s.declared, /*knobs=*/true); !d) return d.error();
    s.plan = planPieces(std::move(*headers), s.samples, pieces);
    return s;
}

Result<AnalysesInPieces> analysesInPieces(const TraceReader& reader, size_t pieces, unsigned threads, size_t topN,
                                          const std::atomic<bool>* cancel) {
    using Clock = std::chrono::steady_clock;
    auto since = [](Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); };
    auto setUp = setUpPieces(reader, pieces);
    if (!setUp) return setUp.error();
    const ReaderOpener& open = setUp->open;
    const replay::Replay& declared = *setUp->declared;
    const std::vector<Event>& samples = setUp->samples;
    const PiecePlan& plan = setUp->plan;
    AnalysesInPieces out;
    out.pieces = plan.pieces();
    auto note = [&](size_t k, const char* what) {
        if (out.inexact.empty()) out.inexact = "piece " + std::to_string(k + 1) + ": " + what;
    };
    // Each piece taken in as soon as the pieces before it have been (on the thread that ended
    // the last of them), so that only the pieces on their way and those waiting for an earlier
    // one hold their analyses. The first piece not exact stops the rest: the caller reads the
    // trace whole instead.
    const size_t n = plan.pieces();
    struct Ended {
        std::unique_ptr<PieceAnalyses> analyses;
        std::vector<StreamInfo> start, end; // the replay's streams before and after it
        bool startExact = false, endsAtNext = false, ended = false;
    };
    std::vector<Ended> each(n);
    std::mutex absorbing;
    size_t next = 0;
    double absorbSeconds = 0;
    std::atomic<bool> halt{false};
    auto streamsOf = [](const replay::Replay& r) {
        std::vector<StreamInfo> v;
        v.reserve(r.streams().size());
        for (const auto& st : r.streams()) v.push_back(st.info);
        return v;
    };
    auto takeIn = [&] { // with `absorbing` held
        const Clock::time_point a = Clock::now();
        for (; next < n && each[next].ended; ++next) {
            const size_t k = next;
            Ended& e = each[k];
            if (!e.startExact) note(k, "its start carried as a guess");
            if (!e.endsAtNext) note(k, "its replay did not end in the next piece's start");
            if (k == 0) {
                out.analyses = std::move(e.analyses);
            } else {
                PieceAnalyses& acc = *out.analyses;
                acc.pending.absorb(std::move(e.analyses->pending));
                acc.fragmentation.absorb(std::move(e.analyses->fragmentation));
                if (!acc.hazards.absorb(std::move(e.analyses->hazards), e.start, e.end))
                    note(k, "its stream hazards not carried exactly");
            }
            e = Ended{};
            if (!out.inexact.empty()) halt = true;
        }
        absorbSeconds += since(a);
    };
    const Clock::time_point t = Clock::now();
    Status st = runPieces(
        open, declared, plan, samples, threads,
        [&](size_t k, replay::Replay& r) {
            auto mine = std::make_unique<PieceAnalyses>(topN);
            if (k > 0) mine->hazards.startPiece(plan.firstSeq(k));
            mine->subscribe(r);
            std::lock_guard lock(absorbing);
            each[k].analyses = std::move(mine);
        },
        [&](size_t k, const PieceEnd& end) {
            std::lock_guard lock(absorbing);
            Ended& e = each[k];
            e.analyses->hazards.endPiece();
            e.start = streamsOf(end.start);
            e.end = streamsOf(end.end);
            e.startExact = end.startExact;
            e.endsAtNext = end.endsAtNext;
            e.ended = true;
            takeIn();
        },
        cancel, &halt);
    if (!st && !(halt && st.error().code == ErrorCode::Cancelled && !(cancel && *cancel))) return st.error();
    out.piecesSeconds = since(t);
    out.absorbSeconds = absorbSeconds;
    out.exact = out.inexact.empty() && next == n;
    return out;
}

std::string analysesDiffer(const PieceAnalyses& a, const PieceAnalyses& b) {
    auto num = [](uint64_t v) { return std::to_string(v); };
    const PendingFrees &pa = a.pending.result(), &pb = b.pending.result();
    if (pa.streams.size() != pb.streams.size())
        return "pending frees: " + num(pa.streams.size()) + " streams against " + num(pb.streams.size());
    for (size_t i = 0; i < pa.streams.size(); ++i) {
        const PendingFrees::Stream &x = pa.streams[i], &y = pb.streams[i];
        if (x.handle != y.handle || x.peak != y.peak || x.peakTsNs != y.peakTsNs)
            return "pending frees: stream " + num(i) + " (peak " + num(x.peak) + " against " + num(y.peak) + ")";
    }
    const StreamHazards &ha = a.hazards.result(), &hb = b.hazards.result();
    if (ha.unorderedFrees != hb.unorderedFrees || ha.unorderedReuses != hb.unorderedReuses)
        return "hazards: " + num(ha.unorderedFrees) + "/" + num(ha.unorderedReuses) + " unordered frees/reuses against " +
               num(hb.unorderedFrees) + "/" + num(hb.unorderedReuses);
    if (ha.truncated != hb.truncated || ha.freedForgotten != hb.freedForgotten) return "hazards: their bounds' flags";
    if (ha.hazards.size() != hb.hazards.size())
        return "hazards: " + num(ha.hazards.size()) + " listed against " + num(hb.hazards.size());
    auto at = [](const StreamHazard::At& x, const StreamHazard::At& y) {
        return x.seq == y.seq && x.tsNs == y.tsNs && x.stream == y.stream;
    };
    for (size_t i = 0; i < ha.hazards.size(); ++i) {
        const StreamHazard &x = ha.hazards[i], &y = hb.hazards[i];
        if (x.kind != y.kind || !at(x.first, y.first) || !at(x.second, y.second) || x.ptr != y.ptr ||
            x.bytes != y.bytes || x.pool != y.pool || x.opportunistic != y.opportunistic)
            return "hazards: the " + num(i) + "th listed (seq " + num(x.second.seq) + " against " + num(y.second.seq) + ")";
    }
    const Fragmentation &fa = a.fragmentation.result(), &fb = b.fragmentation.result();
    if (fa.pools.size() != fb.pools.size()) return "fragmentation: pools";
    for (size_t i = 0; i < fa.pools.size(); ++i) {
        const Fragmentation::Pool &x = fa.pools[i], &y = fb.pools[i];
        if (x.handle != y.handle || x.growths != y.growths || x.growthsWhileIdle != y.growthsWhileIdle ||
            x.fragmentedGrowths != y.fragmentedGrowths || x.failures != y.failures ||
            x.failuresWhileIdle != y.failuresWhileIdle || x.fragmentedFailures != y.fragmentedFailures ||
            x.grownBytes != y.grownBytes)
            return "fragmentation: pool " + num(i) + " (growths " + num(x.growths) + " against " + num(y.growths) + ")";
    }
    if (fa.events.size() != fb.events.size())
        return "fragmentation: " + num(fa.events.size()) + " listed against " + num(fb.events.size());
    for (size_t i = 0; i < fa.events.size(); ++i) {
        const PoolGrowth &x = fa.events[i], &y = fb.events[i];
        if (x.seq != y.seq || x.tsNs != y.tsNs || x.pool != y.pool || x.stream != y.stream || x.bytes != y.bytes ||
            x.idleBefore != y.idleBefore || x.pendingElsewhere != y.pendingElsewhere || x.grewBy != y.grewBy ||
            x.failed != y.failed || x.result != y.result)
            return "fragmentation: the " + num(i) + "th listed (seq " + num(x.seq) + " against " + num(y.seq) + ")";
    }
    return {};
}

Result<std::unique_ptr<PieceAnalyses>> analysesInOneRead(const TraceReader& reader, size_t topN) {
    auto samples = reader.samples(0, std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max());
    if (!samples) return samples.error();
    replay::Replay r;
    if (auto d = declareTraceEntities(reader, r, /*knobs=*/true); !d) return d.error();
    auto out = std::make_unique<PieceAnalyses>(topN);
    out->subscribe(r);
    SampleMerge merge;
    merge.expect(&*samples);
    auto apply = [&](const Event& e) { r.apply(e); };
    const Status st = reader.forEachChunk([&](std::vector<Event>& chunk) {
        merge.chunk(chunk, r, apply);
        return true;
    });
    if (!st) return st.error();
    merge.rest(apply);
    return out;
}

} // namespace poolscope::detail
