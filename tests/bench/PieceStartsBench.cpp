// How soon the replay's state at the start of every piece of a trace is known (issue #15: the
// read split in time needs each piece's start without a pass over what came before it).
//
// One replay of every event on one thread (what a piece's start costs today), against the
// pieces replayed at once without their start (Replay::startPiece, each through a reader of its
// own) and then carried over in order (Replay::afterPiece). The carried end state is compared
// with the whole replay's (sameState), and the pieces carried exactly are counted.
//
//   poolscope_bench_piece_starts TRACE [PIECES [THREADS]]
#include "../../core/src/analysis/PieceRead.h"
#include "../../core/src/analysis/ReplayThread.h"
#include "../../core/src/replay/TraceEntities.h"
#include "poolscope/TraceReader.h"
#include "PiecesBenchArgs.h"
#include "poolscope/replay/Replay.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <memory>
#include <thread>
#include <vector>

using namespace poolscope;
using replay::Replay;

int main(int argc, char** argv) {
    const auto args = bench::piecesArgs(argc, argv, "TRACE [PIECES [THREADS]]");
    if (!args) return 2;
    const char* path = args->path;
    const size_t pieces = args->pieces;
    const unsigned threads = args->threads;
    auto reader = TraceReader::open(path);
    if (!reader) {
        std::fprintf(stderr, "%s\n", reader.error().message.c_str());
        return 1;
    }
    // Every replay starts as a replay of the file does: its tables declared, the samples merged
    // in by time (detail::SampleMerge).
    auto samples = (*reader)->samples(0, INT64_MIN, INT64_MAX);
    auto headers = (*reader)->chunkHeaders();
    Replay declared;
    if (!samples || !headers || !detail::declareTraceEntities(**reader, declared, /*knobs=*/true)) {
        std::fprintf(stderr, "cannot read the trace's tables\n");
        return 1;
    }

    // One replay of everything.
    double t0 = bench::wallNow(), c0 = bench::processCpu();
    Replay whole = declared.clone();
    detail::SampleMerge wm;
    wm.expect(&*samples);
    uint64_t events = 0;
    auto apply = [](Replay& r) { return [&r](const Event& e) { r.apply(e); }; };
    Status st = (*reader)->forEachChunk([&](std::vector<Event>& chunk) {
        wm.chunk(chunk, whole, apply(whole));
        events += chunk.size();
        return true;
    });
    wm.rest(apply(whole));
    const double seqWall = bench::wallNow() - t0, seqCpu = bench::processCpu() - c0;
    if (!st) {
        std::fprintf(stderr, "%s\n", st.error().message.c_str());
        return 1;
    }

    // The pieces (detail::planPieces), each replayed alone and carried over in order
    // (detail::findPieceStarts; the two steps are timed together there).
    const std::string file = path;
    const detail::PiecePlan plan = detail::planPieces(std::move(*headers), *samples, pieces);
    t0 = bench::wallNow();
    c0 = bench::processCpu();
    auto starts = detail::findPieceStarts([&] { return TraceReader::open(file); }, declared, plan, *samples, threads);
    if (!starts) {
        std::fprintf(stderr, "%s\n", starts.error().message.c_str());
        return 1;
    }
    const double piecesWall = bench::wallNow() - t0, piecesCpu = bench::processCpu() - c0;
    size_t exact = 0;
    for (bool ok : starts->exact) exact += ok;
    const Replay& start = starts->starts.back();
    const bool same = start.sameState(whole);
    std::printf("%s: %llu events, %zu samples, %zu chunks; %zu pieces on %u threads\n", path,
                static_cast<unsigned long long>(events), samples->size(), plan.headers.size(), plan.pieces(),
                threads);
    std::printf("| | wall s | CPU s |\n|---|---:|---:|\n");
    std::printf("| one replay of every event | %.3f | %.3f |\n", seqWall, seqCpu);
    std::printf("| every piece's start known | %.3f | %.3f |\n", piecesWall, piecesCpu);
    std::printf("pieces carried exactly: %zu of %zu; the end state the whole replay's: %s; "
                "wall / one replay: %.2f\n",
                exact, plan.pieces(), same ? "yes" : "NO", piecesWall / seqWall);
    return same ? 0 : 3;
}
