// The pool model over a trace's tape whole (PoolModel::run) against the same tape in pieces at
// once (PoolModel::runInPieces), alternated, for four questions with the reserved series kept
// (as the window's What-if panel asks them); it fails unless every answer is the same. First
// the tape's recording, one read against the read in pieces (detail::recordTapeInPieces),
// alternated, the tapes compared.
//
//   poolscope_bench_model_pieces TRACE [PIECES [THREADS [ROUNDS]]]
#include <vector>

#include "../../core/src/analysis/PieceRead.h"
#include "PiecesBenchArgs.h"
#include "poolscope/TraceReader.h"
#include "poolscope/whatif/PoolModel.h"

using namespace poolscope;

namespace {

bool same(const std::vector<whatif::PoolPrediction>& a, const std::vector<whatif::PoolPrediction>& b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i) {
        const whatif::PoolPrediction &x = a[i], &y = b[i];
        if (x.peakReserved != y.peakReserved || x.peakReservedTsNs != y.peakReservedTsNs ||
            x.releases != y.releases || x.releasedBytes != y.releasedBytes || x.growths != y.growths ||
            x.grownBytes != y.grownBytes || x.maxIdle != y.maxIdle || x.meanIdle != y.meanIdle ||
            x.finalReserved != y.finalReserved || x.peakLive != y.peakLive ||
            x.growthAllocs.size() != y.growthAllocs.size() || x.reserved.t != y.reserved.t ||
            x.reserved.v != y.reserved.v)
            return false;
    }
    return true;
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

} // namespace

int main(int argc, char** argv) {
    const auto args = bench::piecesArgs(argc, argv, "TRACE [PIECES [THREADS [ROUNDS]]]");
    if (!args) return 2;
    auto reader = TraceReader::open(args->path);
    if (!reader) {
        std::fprintf(stderr, "%s\n", reader.error().message.c_str());
        return 1;
    }
    Result<whatif::Tape> tape = Error{ErrorCode::InvalidArgument, "no round"};
    std::vector<double> oneRead, inPieces, pieceCpu;
    bool joined = true;
    int bad = 0;
    for (int r = 0; r < args->rounds; ++r) {
        double t0 = bench::wallNow();
        tape = detail::recordTapeInOneRead(**reader);
        oneRead.push_back(bench::wallNow() - t0);
        if (!tape) {
            std::fprintf(stderr, "%s\n", tape.error().message.c_str());
            return 1;
        }
        t0 = bench::wallNow();
        const double c0 = bench::processCpu();
        auto cut = detail::recordTapeInPieces(**reader, args->pieces, args->threads);
        inPieces.push_back(bench::wallNow() - t0);
        pieceCpu.push_back(bench::processCpu() - c0);
        if (!cut) {
            std::fprintf(stderr, "%s\n", cut.error().message.c_str());
            return 1;
        }
        joined = joined && cut->has_value();
        if (*cut && ((*cut)->ops.size() != tape->ops.size() || (*cut)->allocSeq != tape->allocSeq ||
                     !std::equal(tape->ops.begin(), tape->ops.end(), (*cut)->ops.begin(),
                                 [](const whatif::Op& a, const whatif::Op& b) {
                                     return a.ts == b.ts && a.value == b.value && a.pool == b.pool &&
                                            a.stream == b.stream && a.kind == b.kind && a.aux == b.aux &&
                                            a.attr == b.attr && a.flag == b.flag;
                                 }) ||
                     !same((*cut)->recorded, tape->recorded))) {
            std::fprintf(stderr, "the tape recorded in pieces differs\n");
            bad = 1;
        }
    }
    std::printf("%s: %zu ops; %zu pieces on %u threads, %d rounds\n", args->path, tape->ops.size(),
                args->pieces, args->threads, args->rounds);
    std::printf("recording: one read %.2f s, in pieces %.2f s (CPU %.1f s): %.2f%s\n", median(oneRead),
                median(inPieces), median(pieceCpu), median(inPieces) / median(oneRead),
                joined ? "" : " (not joined: recorded in one read)");
    double t0 = 0;
    // POOLSCOPE_BENCH_NO_SERIES: the figures alone (as the advisor's questions ask them).
    const bool series = std::getenv("POOLSCOPE_BENCH_NO_SERIES") == nullptr;
    const char* names[] = {"recorded", "0", "256 MiB", "never"};
    std::vector<whatif::Settings> settings(4);
    settings[1].releaseThreshold = 0;
    settings[2].releaseThreshold = uint64_t{256} << 20;
    settings[3] = whatif::neverReleasing();
    std::printf("%-10s %12s %12s %8s %8s %14s\n", "question", "whole s", "pieces s", "ratio",
                "joined", "ops twice");
    for (size_t qi = 0; qi < settings.size(); ++qi) {
        std::vector<double> whole, cut;
        whatif::PoolModel::PieceStats st;
        for (int r = 0; r < args->rounds; ++r) {
            whatif::PoolModel a(settings[qi]), b(settings[qi]);
            a.keepSeries(series);
            b.keepSeries(series);
            t0 = bench::wallNow();
            const auto x = a.run(*tape);
            whole.push_back(bench::wallNow() - t0);
            t0 = bench::wallNow();
            const auto y = b.runInPieces(*tape, std::nullopt, args->pieces, args->threads, &st);
            cut.push_back(bench::wallNow() - t0);
            if (!same(x, y)) {
                std::fprintf(stderr, "question %s: the pieces' answer differs\n", names[qi]);
                bad = 1;
            }
        }
        std::printf("%-10s %12.3f %12.3f %8.2f %4zu/%-3zu %13.1f%%\n", names[qi], median(whole),
                    median(cut), median(cut) / median(whole), st.joined, st.pieces,
                    100.0 * double(st.opsTwice) / double(std::max<size_t>(1, tape->ops.size())));
    }
    std::printf("max RSS %.0f MiB\n", bench::maxRssMiB());
    return bad;
}
