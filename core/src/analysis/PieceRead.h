#pragma once
// A trace's read split in time (issue #15): contiguous runs of chunks ("pieces") replayed at once,
// each from the replay's state at its start. Internal to core.
//
// planPieces cuts the chunks; findPieceStarts replays every piece at once without its start
// (Replay::startPiece, each on a reader of its own) and carries the states over in order
// (Replay::afterPiece); runPieces replays every piece from its start with the observers the
// caller subscribes, finding the starts that way on the way, and checks that each ended in the
// state the next one started from.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "poolscope/Result.h"
#include "poolscope/analysis/Fragmentation.h"
#include "poolscope/analysis/PendingFrees.h"
#include "poolscope/analysis/StreamHazards.h"
#include "poolscope/TraceReader.h"
#include "poolscope/replay/Replay.h"
#include "poolscope/whatif/PoolModel.h"
#include "poolscope/whatif/RaceRange.h"

namespace poolscope::detail {

struct PiecePlan {
    std::vector<ChunkHeaderInfo> headers; // every chunk, in seq order
    std::vector<size_t> cut;              // piece k holds headers [cut[k], cut[k + 1])
    // The samples a piece starts merging from: those after the latest time of the chunks before
    // it (the earlier pieces took the rest, as one read's SampleMerge would have).
    std::vector<size_t> firstSample;
    size_t pieces() const { return cut.empty() ? 0 : cut.size() - 1; }
    // The first seq of piece k (of the trace's next event past the last piece).
    uint64_t firstSeq(size_t k) const;
    std::vector<int64_t> ids(size_t k) const;
};

// About `pieces` runs of chunks of about as many events each (fewer where the trace has fewer
// chunks; at least one). `samples` as TraceReader::samples over all time.
PiecePlan planPieces(std::vector<ChunkHeaderInfo> headers, const std::vector<Event>& samples, size_t pieces);

// A reader of the same trace for each piece's thread (the trace's file opened again).
using ReaderOpener = std::function<Result<std::unique_ptr<TraceReader>>()>;

struct PieceStarts {
    // starts[k]: the state before piece k; starts[pieces]: after the last one. starts[0] is the
    // declared replay's.
    std::vector<replay::Replay> starts;
    // Whether afterPiece carried piece k over exactly (else starts[k + 1] is a guess).
    std::vector<bool> exact;
    bool allExact() const;
};

// `declared`: a replay given the trace's tables (detail::declareTraceEntities), cloned for each
// piece. Cancelled where `cancel` is set on the way.
Result<PieceStarts> findPieceStarts(const ReaderOpener& open, const replay::Replay& declared, const PiecePlan& plan,
                                    const std::vector<Event>& samples, unsigned threads,
                                    const std::atomic<bool>* cancel = nullptr);

// How a piece ended (runPieces): the replay's state before and after it, whether its start was
// exact (carried exactly, or the end of the piece before replayed from an exact start) and
// whether its replay ended in the next piece's start where that was carried from elsewhere.
struct PieceEnd {
    const replay::Replay& start;
    const replay::Replay& end;
    bool startExact;
    bool endsAtNext;
};
// What a read in pieces of `reader`'s file starts from: its readers, samples, a replay given its
// tables (detail::declareTraceEntities, the pools' first knobs included) and its chunks cut.
struct PieceSetUp {
    ReaderOpener open;
    std::vector<Event> samples;
    std::unique_ptr<replay::Replay> declared;
    PiecePlan plan;
};
Result<PieceSetUp> setUpPieces(const TraceReader& reader, size_t pieces);

// Every piece replayed from its start with the observers `before(k, replay)` subscribes (on the
// piece's thread; they must outlive the call), on up to `threads` threads, its start found on
// the way: pieces whose start is known are replayed first, earliest first; an idle thread
// replays a later piece without its start (Replay::startPiece) so that its end state can be
// carried over as soon as its start is known (Replay::afterPiece), unless the piece before it
// ends first. `after(k, end)` is called on the piece's thread once its events are through, with
// the scheduler's lock held (it must not wait on another piece). Only the pieces on their way
// hold a replay. `halt` (the caller's own reason to stop, as `cancel`) stops the pieces with a
// Cancelled error.
Status runPieces(const ReaderOpener& open, const replay::Replay& declared, const PiecePlan& plan,
                 const std::vector<Event>& samples, unsigned threads,
                 const std::function<void(size_t, replay::Replay&)>& before,
                 const std::function<void(size_t, const PieceEnd&)>& after, const std::atomic<bool>* cancel = nullptr,
                 const std::atomic<bool>* halt = nullptr);

// The report's replay analyses (pending frees, stream hazards, fragmentation) of a trace, read
// in pieces: each piece's analyses on its own replay, then taken in by the first piece's in
// order (their absorb()). `topN`: the report's list lengths (ReportReducer's settings).
struct PieceAnalyses {
    PendingFreesAnalysis pending;
    StreamHazardsAnalysis hazards;
    FragmentationAnalysis fragmentation;
    explicit PieceAnalyses(size_t topN);
    void subscribe(replay::Replay& r);
};
struct AnalysesInPieces {
    std::unique_ptr<PieceAnalyses> analyses;
    size_t pieces = 0;
    // Every piece's start carried exactly, every piece's replay ending where the next began, and
    // every piece's hazards taken in exactly: else the analyses are not those of one read, and a
    // caller reads the trace whole instead.
    bool exact = false;
    std::string inexact; // where not exact: the first piece and step that was not
    // Wall time of the pieces (their starts found and their taking in, on the pieces' threads
    // as they end, included), and of the taking in alone.
    double piecesSeconds = 0, absorbSeconds = 0;
};
// The first way a's results differ from b's ("" where they agree), the replay's block tags aside
// (a piece's replay numbers its blocks itself; a report shows none).
std::string analysesDiffer(const PieceAnalyses& a, const PieceAnalyses& b);
// The same analyses of the trace in one read on this thread (what the pieces must give).
Result<std::unique_ptr<PieceAnalyses>> analysesInOneRead(const TraceReader& reader, size_t topN);
// Pieces are taken in as they end, in order, and stop at the first one not exact (`analyses`
// then holds what was taken in, or is null).
Result<AnalysesInPieces> analysesInPieces(const TraceReader& reader, size_t pieces, unsigned threads, size_t topN,
                                          const std::atomic<bool>* cancel = nullptr);

// What whatif::recordTape records, read in `pieces` pieces on `threads` threads: each piece's
// recording model on its replay (PoolModel::recordPiece), joined in order as the pieces end
// (PoolModel::joinRecording); the predictions under the recorded settings then over the joined
// ops, in pieces too (PoolModel::runInPieces). Empty (not an error) where a piece's start was
// only guessed, its replay did not end in the next one's start, or its recording could not be
// joined: the caller records the trace whole. `progress`: (events of the pieces ended, all).
// The same tape in one read on this thread (what the pieces must give; whatif::recordTape's
// way where they are not used).
Result<whatif::Tape> recordTapeInOneRead(const TraceReader& reader, const std::atomic<bool>* cancel = nullptr,
                                         const std::function<void(uint64_t, uint64_t)>& progress = {});
Result<std::optional<whatif::Tape>> recordTapeInPieces(const TraceReader& reader, size_t pieces, unsigned threads,
                                                       const std::atomic<bool>* cancel = nullptr,
                                                       const std::function<void(uint64_t, uint64_t)>& progress = {});

// The report's replay analyses and, with `models`, the advisor's inputs read in the same pieces:
// each piece's replay drives its analyses, its recording model (PoolModel::recordPiece) and a
// RaceRecord. The pieces are joined in order on the calling thread as they end (the analyses
// taken in, the recording joined: PoolModel::joinRecording), and each joined piece's ops (one
// read's, op for op), racing threads' inputs (one read's, input for input) and end state handed
// to `sink.piece` there, in order. A piece more than twice `threads` past the next one to join
// waits before its replay. The first piece not exact stops the rest (`exact` false: what was
// handed is a prefix, and the caller reads the trace whole instead).
struct ReportPiecesSink {
    std::function<void(whatif::Tape& ops, whatif::RaceInputs& races, const replay::Replay& end)> piece;
};
struct ReportPieces {
    std::unique_ptr<PieceAnalyses> analyses;
    std::unique_ptr<whatif::PoolModel> recording; // with `models`: every piece's recording joined
    std::optional<replay::Replay> last;           // the replay's state after the last piece
    size_t pieces = 0;
    bool exact = false;
    std::string inexact; // where not exact: the first piece and step that was not
    double piecesSeconds = 0;
    size_t mostWaiting = 0; // the most pieces ended at once and not joined yet
};
Result<ReportPieces> reportPieces(const TraceReader& reader, size_t pieces, unsigned threads, size_t topN,
                                  bool models, const ReportPiecesSink& sink,
                                  const std::atomic<bool>* cancel = nullptr);

} // namespace poolscope::detail
