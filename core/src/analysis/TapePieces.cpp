// whatif::recordTape's recording read in pieces (issue #15): PieceRead.h.
#include <algorithm>
#include <mutex>

#include "PieceRead.h"

namespace poolscope::detail {

Result<std::optional<whatif::Tape>> recordTapeInPieces(const TraceReader& reader, size_t pieces, unsigned threads,
                                                       const std::atomic<bool>* cancel,
                                                       const std::function<void(uint64_t, uint64_t)>& progress) {
    auto setUp = setUpPieces(reader, pieces);
    if (!setUp) return setUp.error();
    const PiecePlan& plan = setUp->plan;
    const size_t n = plan.pieces();
    uint64_t total = 0;
    std::vector<uint64_t> eventsOf(n, 0);
    for (size_t k = 0; k < n; ++k)
        for (size_t h = plan.cut[k]; h < plan.cut[k + 1]; ++h) eventsOf[k] += plan.headers[h].count;
    for (uint64_t e : eventsOf) total += e;

    // Each piece joined as soon as the pieces before it have been (on the thread that ended
    // the last of them), so that only the pieces on their way and those waiting for an earlier
    // one hold their recording. The first that cannot be joined stops the rest.
    struct Ended {
        std::unique_ptr<whatif::PoolModel> model;
        whatif::Tape tape;
        bool exact = false, ended = false;
    };
    std::vector<Ended> each(n);
    std::mutex joining;
    size_t next = 0;
    uint64_t done = 0;
    std::atomic<bool> halt{false};
    bool exact = true;
    whatif::PoolModel whole;
    whole.recordOnly(true);
    whatif::Tape tape;
    if (auto sum = reader.summary()) tape.ops.reserve(std::min<uint64_t>(sum->eventCount, uint64_t{1} << 26));
    std::optional<replay::Replay> last;
    auto join = [&] { // with `joining` held
        for (; next < n && each[next].ended && exact; ++next) {
            Ended& e = each[next];
            if (!e.exact || !whole.joinRecording(*e.model, e.tape, tape)) {
                exact = false;
                halt = true;
            }
            done += eventsOf[next];
            e = Ended{};
        }
    };
    Status st = runPieces(
        setUp->open, *setUp->declared, plan, setUp->samples, threads,
        [&](size_t k, replay::Replay& r) {
            auto model = std::make_unique<whatif::PoolModel>();
            std::lock_guard lock(joining);
            Ended& e = each[k];
            e.model = std::move(model);
            e.model->recordInto(&e.tape);
            e.model->recordPiece(r, k > 0);
            r.subscribe(e.model.get(), whatif::PoolModel::kindMask());
        },
        [&](size_t k, const PieceEnd& end) {
            std::lock_guard lock(joining);
            Ended& e = each[k];
            e.exact = end.startExact && end.endsAtNext;
            e.ended = true;
            if (k + 1 == n) last = end.end.clone();
            join();
            if (progress) progress(done, total);
        },
        cancel, &halt);
    if (!st) {
        if (halt && !exact && st.error().code == ErrorCode::Cancelled && !(cancel && *cancel))
            return std::optional<whatif::Tape>{};
        return st.error();
    }
    if (!exact || next != n || !last) return std::optional<whatif::Tape>{};
    tape.events = last->eventCount();
    whole.finishTape(tape, *last);
    // The predictions under the recorded settings, over the ops joined: what the recording
    // model would have predicted following the replay (PoolModel::run's answers are those).
    whatif::PoolModel asRecorded;
    const unsigned t = std::max(1u, threads);
    tape.recorded = tape.ops.size() >= whatif::kPiecesFromOps && t >= 2 ? asRecorded.runInPieces(tape, std::nullopt, t, t)
                                                                        : asRecorded.run(tape);
    tape.ops.shrink_to_fit();
    return std::optional<whatif::Tape>(std::move(tape));
}

} // namespace poolscope::detail
