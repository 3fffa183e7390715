// How soon the replay's state at the start of every piece of a trace is known (issue #15: the
// read split in time needs each piece's start without a pass over what came before it).
//
// One replay of every event on one thread (what a piece's start costs today), against the
// pieces replayed at once without their start (Replay::startPiece, each through a reader of its
// own) and then carried over in order (Replay::afterPiece). The carried end state is compared
// with the whole replay's (sameState), and the pieces carried exactly are counted.
//
//   poolscope_bench_piece_starts TRACE [PIECES [THREADS]]
#include "../../core/src/analysis/ReplayThread.h"
#include "../../core/src/replay/TraceEntities.h"
#include "poolscope/TraceReader.h"
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

namespace {

double now() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double cpu() {
    timespec t{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return double(t.tv_sec) + double(t.tv_nsec) * 1e-9;
}

} // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: %s TRACE [PIECES [THREADS]]\n", argv[0]);
        return 2;
    }
    const char* path = argv[1];
    const size_t pieces = argc > 2 ? size_t(std::max(1, std::atoi(argv[2]))) : 16;
    const unsigned threads = argc > 3 ? unsigned(std::max(1, std::atoi(argv[3])))
                                      : std::max(1u, std::thread::hardware_concurrency());
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
    double t0 = now(), c0 = cpu();
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
    const double seqWall = now() - t0, seqCpu = cpu() - c0;
    if (!st) {
        std::fprintf(stderr, "%s\n", st.error().message.c_str());
        return 1;
    }

    // The pieces: contiguous runs of chunks of about the same number of events. Each starts with
    // the samples after the latest time of the chunks before it (those before it took the rest).
    std::vector<size_t> cut(pieces + 1, headers->size());
    cut[0] = 0;
    {
        uint64_t seen = 0;
        size_t k = 1;
        for (size_t i = 0; i < headers->size() && k < pieces; ++i) {
            seen += (*headers)[i].count;
            if (seen >= events * k / pieces) cut[k++] = i + 1;
        }
    }
    std::vector<size_t> firstSample(pieces, 0);
    {
        int64_t latest = INT64_MIN;
        size_t k = 0;
        for (size_t i = 0; i <= headers->size(); ++i) {
            while (k < pieces && cut[k] == i) {
                firstSample[k++] = size_t(std::upper_bound(samples->begin(), samples->end(), latest,
                                                           [](int64_t t, const Event& s) { return t < s.tsNs; }) -
                                          samples->begin());
            }
            if (i < headers->size()) latest = std::max(latest, (*headers)[i].tMax);
        }
    }
    t0 = now();
    c0 = cpu();
    std::vector<std::unique_ptr<Replay>> local(pieces);
    std::atomic<size_t> next{0};
    std::atomic<bool> failed{false};
    auto work = [&] {
        for (size_t k; (k = next++) < pieces;) {
            auto r = TraceReader::open(path);
            if (!r) {
                failed = true;
                return;
            }
            local[k] = std::make_unique<Replay>(declared.clone());
            Replay& piece = *local[k];
            piece.startPiece();
            std::vector<int64_t> ids;
            for (size_t i = cut[k]; i < cut[k + 1]; ++i) ids.push_back((*headers)[i].id);
            const std::vector<Event> rest(samples->begin() + std::ptrdiff_t(firstSample[k]), samples->end());
            detail::SampleMerge m;
            m.expect(&rest);
            if (!(*r)->forEachChunkById(ids, [&](std::vector<Event>& chunk) {
                    m.chunk(chunk, piece, apply(piece));
                    return true;
                }))
                failed = true;
            if (k + 1 == pieces) m.rest(apply(piece));
        }
    };
    std::vector<std::thread> pool;
    for (unsigned t = 0; t < std::min<size_t>(threads, pieces); ++t) pool.emplace_back(work);
    for (std::thread& t : pool) t.join();
    const double piecesWall = now() - t0;
    if (failed) {
        std::fprintf(stderr, "a piece could not be read\n");
        return 1;
    }
    const double t1 = now();
    Replay start = declared.clone();
    size_t exact = 0;
    for (size_t k = 0; k < pieces; ++k) {
        bool ok = false;
        start = local[k]->afterPiece(start, &ok);
        exact += ok;
    }
    const double chainWall = now() - t1, piecesCpu = cpu() - c0;
    const bool same = start.sameState(whole);
    std::printf("%s: %llu events, %zu samples, %zu chunks; %zu pieces on %u threads\n", path,
                static_cast<unsigned long long>(events), samples->size(), headers->size(), pieces,
                threads);
    std::printf("| | wall s | CPU s |\n|---|---:|---:|\n");
    std::printf("| one replay of every event | %.3f | %.3f |\n", seqWall, seqCpu);
    std::printf("| the pieces, each replayed alone | %.3f | |\n", piecesWall);
    std::printf("| carried over, in order | %.3f | |\n", chainWall);
    std::printf("| every piece's start known | %.3f | %.3f |\n", piecesWall + chainWall, piecesCpu);
    std::printf("pieces carried exactly: %zu of %zu; the end state the whole replay's: %s; "
                "wall / one replay: %.2f\n",
                exact, pieces, same ? "yes" : "NO", (piecesWall + chainWall) / seqWall);
    return same ? 0 : 3;
}
