// The report's analyses and the advisor's inputs read in the same pieces (issue #15): PieceRead.h.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "PieceRead.h"

namespace poolscope::detail {

Result<ReportPieces> reportPieces(const TraceReader& reader, size_t pieces, unsigned threads, size_t topN,
                                  bool models, const ReportPiecesSink& sink, const std::atomic<bool>* cancel) {
    using Clock = std::chrono::steady_clock;
    const Clock::time_point started = Clock::now();
    auto setUp = setUpPieces(reader, pieces);
    if (!setUp) return setUp.error();
    const PiecePlan& plan = setUp->plan;
    const size_t n = plan.pieces();
    ReportPieces out;
    out.pieces = n;
    auto note = [&](size_t k, const char* what) {
        if (out.inexact.empty()) out.inexact = "piece " + std::to_string(k + 1) + ": " + what;
    };
    auto streamsOf = [](const replay::Replay& r) {
        std::vector<StreamInfo> v;
        v.reserve(r.streams().size());
        for (const auto& st : r.streams()) v.push_back(st.info);
        return v;
    };
    struct Ended {
        std::unique_ptr<PieceAnalyses> analyses;
        std::unique_ptr<whatif::PoolModel> model;
        std::unique_ptr<whatif::RaceRecord> races;
        whatif::Tape tape;
        std::vector<StreamInfo> start, end; // the replay's streams before and after it
        std::optional<replay::Replay> endState; // for the sink (and the last piece's for the caller)
        bool startExact = false, endsAtNext = false, ended = false;
    };
    // The pieces are joined in order on this thread as they end, while runPieces replays them on
    // its own: its callbacks hold its scheduler's lock, and a join may wait for the sink. A piece
    // more than `ahead` past the next one to join waits before its replay, so that the pieces
    // ended and not joined yet (each holding its ops, race inputs and analyses) stay bounded
    // where the sink is slower than the pieces.
    const size_t ahead = std::max<size_t>(2, size_t{std::max(1u, threads)} * 2);
    std::vector<Ended> each(n);
    std::mutex m;
    std::condition_variable changed;
    size_t next = 0;
    bool runnerDone = false;
    std::atomic<bool> halt{false};
    Status run;
    auto before = [&](size_t k, replay::Replay& r) {
        auto analyses = std::make_unique<PieceAnalyses>(topN);
        if (k > 0) analyses->hazards.startPiece(plan.firstSeq(k));
        analyses->subscribe(r);
        std::unique_lock lock(m);
        // (Woken by the joins; a cancel is seen within the wait's slice.)
        while (!(k < next + ahead || halt || (cancel && *cancel)))
            changed.wait_for(lock, std::chrono::milliseconds(50));
        Ended& e = each[k];
        if (models) {
            e.model = std::make_unique<whatif::PoolModel>();
            e.model->recordInto(&e.tape);
            e.model->recordPiece(r, k > 0);
            r.subscribe(e.model.get(), whatif::PoolModel::kindMask());
            e.races = std::make_unique<whatif::RaceRecord>();
            r.subscribe(e.races.get(), whatif::RaceBounds::kindMask());
        }
        e.analyses = std::move(analyses);
    };
    auto after = [&](size_t k, const PieceEnd& end) {
        std::lock_guard lock(m);
        Ended& e = each[k];
        e.analyses->hazards.endPiece();
        e.start = streamsOf(end.start);
        e.end = streamsOf(end.end);
        e.endState = end.end.clone();
        e.startExact = end.startExact;
        e.endsAtNext = end.endsAtNext;
        e.ended = true;
        size_t waiting = 0;
        for (size_t j = next; j < n; ++j) waiting += each[j].ended;
        out.mostWaiting = std::max(out.mostWaiting, waiting);
        changed.notify_all();
    };
    std::thread runner;
    try {
        runner = std::thread([&] {
            Status st = runPieces(setUp->open, *setUp->declared, plan, setUp->samples, threads, before, after,
                                  cancel, &halt);
            std::lock_guard lock(m);
            run = std::move(st);
            runnerDone = true;
            changed.notify_all();
        });
    } catch (const std::system_error&) {
        return Error{ErrorCode::Io, "no thread to be had for the pieces"};
    }
    if (models) {
        out.recording = std::make_unique<whatif::PoolModel>();
        out.recording->recordOnly(true);
    }
    for (;;) {
        std::unique_lock lock(m);
        changed.wait(lock, [&] { return runnerDone || (next < n && each[next].ended); });
        if (!(next < n && each[next].ended)) break;
        Ended e = std::move(each[next]);
        each[next] = Ended{};
        const size_t k = next;
        lock.unlock();
        if (!e.startExact) note(k, "its start carried as a guess");
        if (!e.endsAtNext) note(k, "its replay did not end in the next piece's start");
        if (k == 0) {
            out.analyses = std::move(e.analyses);
        } else if (out.inexact.empty()) {
            PieceAnalyses& acc = *out.analyses;
            acc.pending.absorb(std::move(e.analyses->pending));
            acc.fragmentation.absorb(std::move(e.analyses->fragmentation));
            if (!acc.hazards.absorb(std::move(e.analyses->hazards), e.start, e.end))
                note(k, "its stream hazards not carried exactly");
        }
        if (models && out.inexact.empty()) {
            whatif::Tape joined;
            if (!out.recording->joinRecording(*e.model, e.tape, joined)) note(k, "its recording could not be joined");
            if (out.inexact.empty() && sink.piece) sink.piece(joined, e.races->taken, *e.endState);
        }
        if (k + 1 == n) out.last = std::move(e.endState);
        lock.lock();
        ++next;
        if (!out.inexact.empty()) halt = true;
        changed.notify_all();
    }
    runner.join();
    if (!run && !(halt && run.error().code == ErrorCode::Cancelled && !(cancel && *cancel))) return run.error();
    out.exact = out.inexact.empty() && next == n && out.last.has_value();
    out.piecesSeconds = std::chrono::duration<double>(Clock::now() - started).count();
    return out;
}

} // namespace poolscope::detail
