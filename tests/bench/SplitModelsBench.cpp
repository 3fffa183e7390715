// Can the what-if models be split in time? (issue #15: `report` of 100 M events in 5 s needs
// every pass over the trace cut into pieces run at once, the models' included.)
//
// A model's piece can start before the piece before it has ended only from a guessed state.
// Once the guessed model is in the same state as the one that modelled every op before it
// (PoolModel::sameState), every later op does the same to both, so from there the piece's
// figures are right and only its beginning must be modelled again from the true state. This
// prints, per candidate release threshold and per guess, how soon that happens in each piece of
// a trace's ops: the share of the piece modelled twice.
//
//   poolscope_bench_split_models TRACE [PIECES]
#include "poolscope/TraceReader.h"
#include "poolscope/Units.h"
#include "poolscope/whatif/PoolModel.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

using namespace poolscope;
using namespace poolscope::whatif;

namespace {

struct Feeder {
    const Tape& tape;
    std::vector<uint64_t> allocsBefore; // by op index

    explicit Feeder(const Tape& t) : tape(t) {
        allocsBefore.resize(t.ops.size() + 1);
        uint64_t n = 0;
        for (size_t i = 0; i < t.ops.size(); ++i) {
            allocsBefore[i] = n;
            n += t.ops[i].kind == Op::Kind::Alloc;
        }
        allocsBefore[t.ops.size()] = n;
    }
    void feed(PoolModel& m, size_t a, size_t b) const {
        static const std::vector<uint8_t> noMute;
        const uint64_t s0 = allocsBefore[a], s1 = allocsBefore[b];
        const uint64_t* seq = tape.allocSeq.data() + std::min<uint64_t>(s0, tape.allocSeq.size());
        const size_t nSeq = s1 <= tape.allocSeq.size() ? size_t(s1 - s0) : 0;
        m.feed(tape.ops.data() + a, tape.ops.data() + b, seq, nSeq, tape.streamHandles, noMute);
    }
};

struct Candidate {
    std::string name;
    Settings settings;
};

} // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: %s TRACE [PIECES]\n", argv[0]);
        return 2;
    }
    const size_t pieces = argc > 2 ? std::max(2, std::atoi(argv[2])) : 8;
    auto reader = TraceReader::open(argv[1]);
    if (!reader) {
        std::fprintf(stderr, "%s\n", reader.error().message.c_str());
        return 1;
    }
    auto tape = recordTape(**reader);
    if (!tape) {
        std::fprintf(stderr, "%s\n", tape.error().message.c_str());
        return 1;
    }
    const Feeder feeder(*tape);
    const size_t n = tape->ops.size();
    std::printf("%s: %zu ops, %zu pieces of %zu\n", argv[1], n, pieces, n / pieces);
    if (n < pieces * 64) return 0;
    std::vector<size_t> at(pieces + 1);
    for (size_t k = 0; k <= pieces; ++k) at[k] = n * k / pieces;

    std::vector<Candidate> candidates = {{"recorded", {}},
                                         {"0", Settings{uint64_t{0}, {}, {}, {}}},
                                         {"64 MiB", Settings{uint64_t{64} << 20, {}, {}, {}}},
                                         {"256 MiB", Settings{uint64_t{256} << 20, {}, {}, {}}},
                                         {"1 GiB", Settings{uint64_t{1} << 30, {}, {}, {}}},
                                         {"never", neverReleasing()}};
    // The true state at each boundary, per candidate.
    std::vector<std::vector<std::unique_ptr<PoolModel>>> truth(candidates.size());
    for (size_t c = 0; c < candidates.size(); ++c) {
        PoolModel m(candidates[c].settings);
        truth[c].push_back(m.clone());
        for (size_t k = 0; k < pieces; ++k) {
            feeder.feed(m, at[k], at[k + 1]);
            truth[c].push_back(m.clone());
        }
    }
    const size_t recordedIdx = 0, neverIdx = candidates.size() - 1;

    struct Guess {
        const char* name;
        bool forget;
        int from; // -1: the floor; else the reserved of this candidate's true model
    };
    const Guess guesses[] = {{"floor (live + pending)", false, -1},
                             {"as the recorded lane", false, int(recordedIdx)},
                             {"as never releasing", false, int(neverIdx)},
                             {"floor, pending forgotten", true, -1}};
    constexpr size_t kBatch = 64;
    std::printf("%-10s %-26s %9s %12s %12s %12s\n", "threshold", "guess", "converged",
                "median ops", "max ops", "modelled 2x");
    for (size_t c = 0; c < candidates.size(); ++c) {
        for (const Guess& g : guesses) {
            std::vector<double> shares;
            size_t converged = 0, tried = 0;
            uint64_t twice = 0, total = 0;
            for (size_t k = 1; k < pieces; ++k) {
                const PoolModel& start = *truth[c][k];
                std::unique_ptr<PoolModel> guess = start.clone(), right = start.clone();
                if (g.forget) guess->forgetPending();
                const PoolModel* ref = g.from >= 0 ? truth[size_t(g.from)][k].get() : nullptr;
                guess->guessReserved([&](uint32_t pool, uint64_t floor, uint64_t) {
                    return ref ? ref->reservedOf(pool) : floor;
                });
                ++tried;
                const size_t len = at[k + 1] - at[k];
                total += len;
                size_t done = 0;
                bool same = guess->sameState(*right);
                while (!same && done < len) {
                    const size_t step = std::min(kBatch, len - done);
                    feeder.feed(*guess, at[k] + done, at[k] + done + step);
                    feeder.feed(*right, at[k] + done, at[k] + done + step);
                    done += step;
                    same = guess->sameState(*right);
                }
                if (same) {
                    ++converged;
                    shares.push_back(double(done) / double(len));
                    twice += done;
                } else {
                    shares.push_back(1.0);
                    twice += len;
                }
            }
            std::sort(shares.begin(), shares.end());
            auto pct = [](double v) { return std::to_string(int(v * 1000 + 0.5) / 10.0).substr(0, 5) + " %"; };
            std::printf("%-10s %-26s %5zu/%-3zu %12s %12s %12s\n", candidates[c].name.c_str(), g.name,
                        converged, tried, pct(shares[shares.size() / 2]).c_str(),
                        pct(shares.back()).c_str(), pct(double(twice) / double(total)).c_str());
        }
    }
    return 0;
}
