// The report's replay analyses (pending frees, stream hazards, fragmentation) read in pieces at
// once (issue #15: detail::analysesInPieces), against one replay of every event with the same
// analyses on one thread (what the report's analyses' thread does today, without the live set
// kept for it). The results are compared: the pieces must give the one read's.
//
//   poolscope_bench_analyses_pieces TRACE [PIECES [THREADS [ROUNDS]]]
#include "../../core/src/analysis/PieceRead.h"
#include "poolscope/TraceReader.h"
#include "PiecesBenchArgs.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <thread>
#include <vector>

using namespace poolscope;

namespace {

constexpr size_t kTopN = 10; // the report's default list length

} // namespace

int main(int argc, char** argv) {
    const auto args = bench::piecesArgs(argc, argv, "TRACE [PIECES [THREADS [ROUNDS]]]");
    if (!args) return 2;
    const char* path = args->path;
    const size_t pieces = args->pieces;
    const unsigned threads = args->threads;
    const int rounds = args->rounds;
    auto reader = TraceReader::open(path);
    if (!reader) {
        std::fprintf(stderr, "%s\n", reader.error().message.c_str());
        return 1;
    }
    std::printf("%s: %zu pieces on %u threads\n", path, pieces, threads);
    std::printf("| round | one read: wall s | CPU s | pieces: wall s | CPU s | of which taken in | exact | same results |\n");
    std::printf("|---:|---:|---:|---:|---:|---|---|---|\n");
    bool allSame = true;
    double piecesRss = 0;
    for (int round = 0; round < rounds; ++round) {
        // The pieces first: the largest resident set after the first round's is theirs.
        double t0 = bench::wallNow(), c0 = bench::processCpu();
        auto split = detail::analysesInPieces(**reader, pieces, threads, kTopN);
        const double splitWall = bench::wallNow() - t0, splitCpu = bench::processCpu() - c0;
        if (!split) {
            std::fprintf(stderr, "%s\n", split.error().message.c_str());
            return 1;
        }
        if (round == 0) piecesRss = bench::maxRssMiB();
        t0 = bench::wallNow();
        c0 = bench::processCpu();
        auto oneRead = detail::analysesInOneRead(**reader, kTopN);
        if (!oneRead) {
            std::fprintf(stderr, "%s\n", oneRead.error().message.c_str());
            return 1;
        }
        const detail::PieceAnalyses& one = **oneRead;
        const double oneWall = bench::wallNow() - t0, oneCpu = bench::processCpu() - c0;
        const std::string differ = split->analyses ? detail::analysesDiffer(*split->analyses, one) : "none read";
        allSame = allSame && differ.empty();
        std::printf("| %d | %.3f | %.3f | %.3f | %.3f | %.3f | %s | %s |\n", round + 1, oneWall, oneCpu,
                    splitWall, splitCpu, split->absorbSeconds,
                    split->exact ? "yes" : ("no (" + split->inexact + ")").c_str(), differ.empty() ? "yes" : differ.c_str());
        if (round == 0) {
            const StreamHazards& h = one.hazards.result();
            std::printf("(hazards: %llu unordered frees, %llu reuses%s%s; %zu streams with pending frees)\n",
                        static_cast<unsigned long long>(h.unorderedFrees),
                        static_cast<unsigned long long>(h.unorderedReuses),
                        h.truncated ? ", orderings forgotten" : "", h.freedForgotten ? ", freed addresses forgotten" : "",
                        one.pending.result().streams.size());
        }
    }
    std::printf("max RSS after the first pieces: %.0f MiB; after everything: %.0f MiB\n", piecesRss, bench::maxRssMiB());
    return allSame ? 0 : 3;
}
