// The advisor's second read after the streaming report (whatif::adviseAfter): its models follow
// one recording model's ops a chunk at a time with the pools they do not answer for muted
// (PoolModel::feed), stop a candidate threshold for a pool once its releases pass what the advice
// allows, stand the never-releasing answer in for the candidates at or above a pool's
// never-releasing peak, and stop reading once nothing is open. Each of those must give what
// separate models over the whole trace give: checked on generated random traces (not
// recordings) and on the samples, against PoolModel::run one pool at a time and against
// whatif::advise (two full reads, every question a model on every event). The report reads the
// first read's ops back from its spill (TapeSpill.h) instead of the trace: the same report, and
// the same where the spill fails and the trace is read again.
#include <gtest/gtest.h>

#include <cstdlib>
#include <random>

#include "../../core/src/analysis/ReplayThread.h"
#include "../../core/src/whatif/QuestionSearch.h"
#include "../../core/src/whatif/TapeSpill.h"
#include "PredictionChecks.h"
#include "TestTraces.h"
#include "poolscope/EventFields.h"
#include "poolscope/Report.h"
#include "poolscope/Zstd.h"
#include "poolscope/analysis/TraceReport.h"
#include "poolscope/TraceReader.h"
#include "poolscope/TraceWriter.h"
#include "poolscope/whatif/PoolModel.h"

namespace poolscope {
namespace {

using whatif::PoolPrediction;
using whatif::Question;

constexpr uint64_t MiB = uint64_t{1} << 20;

// A random multi-pool, multi-stream workload with synchronizes, event waits, trims and the
// pools' knobs set along the way; `policyOff` turns a reuse policy off on pool 1.
class RandomTrace {
public:
    explicit RandomTrace(uint64_t seed, bool policyOff) : rng_(seed), policyOff_(policyOff) {}

    test::Events generate(size_t n) {
        test::Events ev;
        int64_t ts = 1'000;
        if (policyOff_) {
            Event& e = ev.add(EventKind::PoolSetAttribute, ts);
            e.pool = kPools[1];
            AttributeFields{PoolAttr::ReuseAllowOpportunistic, 0, std::nullopt}.into(e);
        }
        // Pool 2's threshold is set high: few or no releases there.
        Event& t = ev.add(EventKind::PoolSetAttribute, ts);
        t.pool = kPools[2];
        AttributeFields{PoolAttr::ReleaseThreshold, 96 * MiB, std::nullopt}.into(t);
        while (ev.all().size() < n) {
            ts += 1 + static_cast<int64_t>(rng_() % 200'000);
            const uint64_t r = rng_() % 1000;
            const int p = static_cast<int>(rng_() % 3), s = static_cast<int>(rng_() % 3);
            if (r < 450 || live_.empty()) {
                const uint64_t size = (1 + rng_() % 64) * (rng_() % 4 == 0 ? MiB : 64 * 1024);
                ev.alloc(ts, kStreams[s], kPools[p], next_, size);
                live_.push_back({next_, kPools[p]});
                next_ += 128 * MiB;
            } else if (r < 900) {
                const size_t k = rng_() % live_.size();
                ev.free(ts, kStreams[s], live_[k].pool, live_[k].ptr);
                live_[k] = live_.back();
                live_.pop_back();
            } else if (r < 940) {
                Event& e = ev.add(EventKind::StreamSynchronize, ts);
                e.stream = kStreams[s];
            } else if (r < 960) {
                Event& e = ev.add(EventKind::EventRecord, ts);
                e.stream = kStreams[s];
                CuEventFields{0xE0, 0}.into(e);
                Event& w = ev.add(EventKind::StreamWaitEvent, ts + 1);
                w.stream = kStreams[(s + 1) % 3];
                CuEventFields{0xE0, 0}.into(w);
            } else if (r < 970) {
                ev.add(EventKind::ContextSynchronize, ts);
            } else if (r < 975) {
                Event& e = ev.add(EventKind::PoolTrimTo, ts);
                e.pool = kPools[p];
                e.size = (rng_() % 4) * 32 * MiB;
            } else if (r < 980) {
                Event& e = ev.add(EventKind::PoolSetAttribute, ts);
                e.pool = kPools[0];
                AttributeFields{PoolAttr::ReleaseThreshold, (rng_() % 3) * 32 * MiB, std::nullopt}.into(e);
            }
        }
        return ev;
    }

private:
    static constexpr uint64_t kPools[3] = {0xA00, 0xB00, 0xC00};
    static constexpr uint64_t kStreams[3] = {0x10, 0x20, 0x30};
    struct Live {
        uint64_t ptr, pool;
    };
    std::mt19937_64 rng_;
    bool policyOff_;
    std::vector<Live> live_;
    uint64_t next_ = 0x7000'0000'0000;
};

std::string write(const std::string& path, const std::vector<Event>& events) {
    auto w = TraceWriter::create(path);
    EXPECT_TRUE(w);
    EXPECT_TRUE((*w)->addDevice(DeviceInfo{0, "generated device (not a recording)", 80ull << 30, ""}));
    EXPECT_TRUE((*w)->append(events));
    EXPECT_TRUE((*w)->close());
    return path;
}

void expectSameAdvice(const std::vector<whatif::PoolAdvice>& a,
                      const std::vector<whatif::PoolAdvice>& b) {
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) {
        SCOPED_TRACE(i);
        EXPECT_EQ(a[i].handle, b[i].handle);
        EXPECT_EQ(a[i].currentReleases, b[i].currentReleases);
        EXPECT_EQ(a[i].thresholdAdvice, b[i].thresholdAdvice);
        EXPECT_EQ(a[i].suggestedThreshold, b[i].suggestedThreshold);
        EXPECT_EQ(a[i].suggestedReleases, b[i].suggestedReleases);
        EXPECT_EQ(a[i].suggestedPeakReserved, b[i].suggestedPeakReserved);
        EXPECT_EQ(a[i].suggestedMeanIdle, b[i].suggestedMeanIdle);
        ASSERT_EQ(a[i].policies.size(), b[i].policies.size());
        for (size_t k = 0; k < a[i].policies.size(); ++k) {
            EXPECT_EQ(a[i].policies[k].name, b[i].policies[k].name);
            EXPECT_EQ(a[i].policies[k].peakReservedOn, b[i].policies[k].peakReservedOn);
        }
        // (advise() gives every racing pool its range; the report's advice only where it says
        // something, and only that is printed.)
        if (b[i].any()) EXPECT_EQ(a[i].race.has_value(), b[i].race.has_value());
        EXPECT_EQ(whatif::adviceText(a[i], "p"), whatif::adviceText(b[i], "p"));
    }
}

// The first read's models (as the streaming report has them) and the advice after them.
std::vector<whatif::PoolAdvice> adviceAfter(const TraceReader& reader, bool sameReplay) {
    std::vector<Question> q(2);
    q[1].all = whatif::neverReleasing();
    auto first = whatif::predict(reader, q, {}, /*races=*/true);
    EXPECT_TRUE(first);
    if (!first) return {};
    auto a = whatif::adviseAfter(reader, first->perQuestion[0], first->perQuestion[1], first->races,
                                 sameReplay);
    EXPECT_TRUE(a);
    return a ? *a : std::vector<whatif::PoolAdvice>{};
}

// advise(): one read, then the questions over its spill. The same advice as every question on
// every event over two reads, every racing pool's range included (the verb prints them all), and
// its progress only ever moves forward, within its total.
void expectAdviseAsTwoReads(const TraceReader& reader, const std::vector<whatif::PoolAdvice>& full) {
    std::vector<std::pair<uint64_t, uint64_t>> seen;
    const auto before = whatif::detail::spillCounts();
    auto got = whatif::advise(reader, {}, [&](uint64_t done, uint64_t total) {
        seen.emplace_back(done, total);
    });
    ASSERT_TRUE(got);
    expectSameAdvice(*got, full);
    bool decide = false;
    for (size_t i = 0; i < got->size() && i < full.size(); ++i) {
        const whatif::PoolAdvice &a = (*got)[i], &b = full[i];
        ASSERT_EQ(a.race.has_value(), b.race.has_value());
        if (a.race) {
            EXPECT_EQ(a.race->threads, b.race->threads);
            EXPECT_EQ(a.race->low, b.race->low);
            EXPECT_EQ(a.race->high, b.race->high);
        }
        decide = decide || a.currentReleases >= 3 || !a.policies.empty();
    }
    // Where a pool had something to decide, its questions were asked over the spill.
    if (decide) EXPECT_EQ(whatif::detail::spillCounts().replayed, before.replayed + 1);
    // And with the questions asked during the read (as on 12 or more CPUs), and with the read's
    // models on threads of their own (6 or more), with and without them: the same advice.
    for (bool threaded : {false, true})
        for (bool askAhead : {false, true}) {
            if (!threaded && !askAhead) continue; // (the first call above, on this machine's CPUs)
            SCOPED_TRACE(testing::Message() << "threaded " << threaded << ", asked ahead " << askAhead);
            auto again = whatif::advise(reader, {}, {}, askAhead, threaded);
            ASSERT_TRUE(again);
            expectSameAdvice(*again, full);
        }
    ASSERT_FALSE(seen.empty());
    for (size_t i = 0; i < seen.size(); ++i) {
        EXPECT_LE(seen[i].first, seen[i].second);
        if (i) EXPECT_LE(seen[i - 1].first * seen[i].second, seen[i].first * seen[i - 1].second);
    }
}

TEST(WhatIfSearch, FedModelsWithOtherPoolsMutedAnswerAsSeparateModels) {
    for (uint64_t seed = 1; seed <= 4; ++seed) {
        SCOPED_TRACE(seed);
        test::ScratchDir dir;
        const test::Events ev = RandomTrace(seed, seed % 2 == 0).generate(20'000);
        auto reader = TraceReader::open(write(dir.file("random.poolscope"), ev.all()));
        ASSERT_TRUE(reader);
        auto tape = whatif::recordTape(**reader);
        ASSERT_TRUE(tape);
        ASSERT_GE(tape->recorded.size(), 3u);
        std::vector<Question> qs(4);
        qs[1].all.releaseThreshold = 32 * MiB;
        qs[2].all.releaseThreshold = 64 * MiB;
        qs[3].all.allowOpportunistic = true;
        std::mt19937_64 rng(seed);
        for (const Question& q : qs) {
            for (size_t k = 0; k < tape->recorded.size(); ++k) {
                const uint64_t handle = tape->recorded[k].handle;
                const auto separate = whatif::predict(*tape, q, {}, handle);
                ASSERT_EQ(separate.size(), 1u);
                // The same ops in random batches, every other pool muted from its first op.
                whatif::PoolModel m(q.all);
                std::vector<uint8_t> mute(tape->poolIndex.size() + 4, 1);
                mute[tape->poolIndex[k]] = 0;
                size_t at = 0, seqAt = 0;
                while (at < tape->ops.size()) {
                    const size_t n = std::min<size_t>(1 + rng() % 3000, tape->ops.size() - at);
                    size_t allocs = 0;
                    for (size_t j = at; j < at + n; ++j)
                        allocs += tape->ops[j].kind == whatif::Op::Kind::Alloc;
                    m.feed(tape->ops.data() + at, tape->ops.data() + at + n,
                           tape->allocSeq.data() + seqAt, allocs, tape->streamHandles, mute);
                    at += n;
                    seqAt += allocs;
                }
                const auto fed = m.collect(*tape, tape->poolIndex[k]);
                ASSERT_EQ(fed.size(), 1u);
                test::expectSamePrediction(fed[0], separate[0], "fed, others muted");
                EXPECT_EQ(m.releasesOf(tape->poolIndex[k]), separate[0].releases);
            }
        }
        // The traces reach what they are for: releases to decide on, a pool that releases
        // less, the policy off.
        EXPECT_GT(tape->recorded[0].releases, 20u);
    }
}

TEST(WhatIfSearch, AdviceAfterTheFirstReadIsTheAdviceOfTwoFullReads) {
    size_t advised = 0, policies = 0;
    for (uint64_t seed = 1; seed <= 6; ++seed) {
        SCOPED_TRACE(seed);
        test::ScratchDir dir;
        const test::Events ev = RandomTrace(seed, seed % 2 == 0).generate(seed == 1 ? 60'000 : 15'000);
        auto reader = TraceReader::open(write(dir.file("random.poolscope"), ev.all()));
        ASSERT_TRUE(reader);
        auto full = whatif::adviseTwoReads(**reader);
        ASSERT_TRUE(full);
        for (bool same : {true, false}) {
            SCOPED_TRACE(same);
            expectSameAdvice(adviceAfter(**reader, same), *full);
        }
        expectAdviseAsTwoReads(**reader, *full);
        for (const whatif::PoolAdvice& a : *full) {
            advised += a.thresholdAdvice;
            policies += a.policies.size();
        }
    }
    // Some advice is given (and some is not), or the comparison would prove little.
    EXPECT_GT(advised, 0u);
    EXPECT_GT(policies, 0u);
}

TEST(WhatIfSearch, AdviceAfterTheFirstReadOnTheSamples) {
    size_t advised = 0;
    for (const char* name : {"jax", "churn", "gpt2", "pools", "threads", "threads_race",
                             "trims_oom", "cupy", "torch_async"}) {
        SCOPED_TRACE(name);
        auto reader = TraceReader::open(std::string(POOLSCOPE_SAMPLES_DIR) + "/" + name + ".poolscope");
        ASSERT_TRUE(reader);
        auto full = whatif::adviseTwoReads(**reader);
        ASSERT_TRUE(full);
        expectSameAdvice(adviceAfter(**reader, true), *full);
        expectAdviseAsTwoReads(**reader, *full);
        for (const whatif::PoolAdvice& a : *full) advised += a.any();
    }
    EXPECT_GE(advised, 2u); // jax and churn
}

// ---- The report's advice through its spill (the spill alone: WhatIfSpillTest) ----

// The streaming report's first read, as far as the advisor sees it (TraceReport.cpp): the
// as-recorded model recording each chunk's ops into a spill, the never-releasing model
// following them, the racing threads' range; then the spill finished.
struct FirstRead {
    uint64_t events = 0;
    std::vector<PoolPrediction> asRecorded, never;
    std::vector<whatif::RaceRange> races;
    std::unique_ptr<whatif::TapeSpill> spill;
};

FirstRead firstRead(const TraceReader& reader) {
    FirstRead out;
    replay::Replay r;
    auto devices = reader.devices();
    auto pools = reader.pools();
    auto streams = reader.streams();
    EXPECT_TRUE(devices && pools && streams);
    if (!devices || !pools || !streams) return out;
    r.setDevices(std::move(*devices));
    for (const PoolInfo& p : *pools) r.declarePool(p);
    for (const StreamInfo& st : *streams) r.declareStream(st);
    whatif::PoolModel asRecorded, never(whatif::neverReleasing());
    whatif::RaceBounds races;
    whatif::Tape tape;
    asRecorded.recordInto(&tape);
    r.subscribe(&asRecorded, whatif::PoolModel::kindMask());
    r.subscribe(&races, whatif::RaceBounds::kindMask());
    out.spill = std::make_unique<whatif::TapeSpill>();
    const std::vector<uint8_t> noMute;
    auto follow = [&] {
        tape.seeStreams(r);
        std::vector<uint64_t> handles;
        for (const replay::PoolState& p : r.pools()) handles.push_back(p.info.handle);
        // The notes the report's feed keeps for questions asked ahead: the events so far and
        // each pool's releases under the recorded settings.
        std::vector<uint64_t> notes{r.eventCount()};
        for (uint32_t i = 0; i < handles.size(); ++i) notes.push_back(asRecorded.releasesOf(i));
        out.spill->append(tape, handles, notes);
        never.feed(tape.ops.data(), tape.ops.data() + tape.ops.size(), tape.allocSeq.data(),
                   tape.allocSeq.size(), tape.streamHandles, noMute);
        tape.dropOps();
    };
    EXPECT_TRUE(reader.forEachChunk([&](std::vector<Event>& chunk) {
        for (const Event& e : chunk) r.apply(e);
        follow();
        return true;
    }));
    follow();
    asRecorded.finishTape(tape, r);
    out.spill->finish(tape);
    out.asRecorded = tape.recorded;
    out.events = r.eventCount();
    out.never = never.collect(tape);
    out.races = races.result(r);
    return out;
}

// A generated random trace (not a recording), written, then read once as the report's first
// read is: the advisor's inputs and the spill.
struct Spilled {
    test::ScratchDir dir;
    std::unique_ptr<TraceReader> reader;
    FirstRead first;
};

std::unique_ptr<Spilled> spilledTrace(uint64_t seed, bool policyOff, size_t events) {
    auto s = std::make_unique<Spilled>();
    const test::Events ev = RandomTrace(seed, policyOff).generate(events);
    auto reader = TraceReader::open(write(s->dir.file("random.poolscope"), ev.all()));
    EXPECT_TRUE(reader);
    if (!reader) return nullptr;
    s->reader = std::move(*reader);
    s->first = firstRead(*s->reader);
    EXPECT_TRUE(s->first.spill && s->first.spill->ok()) << zstd::unavailableReason();
    if (!s->first.spill || !s->first.spill->ok()) return nullptr;
    return s;
}

// The questions asked after the read over a spilled trace's spill (on 4 threads), the reference
// the questions asked ahead are held to, and the candidate thresholds of its largest
// never-releasing peak (`top`).
struct AfterTheRead {
    std::vector<whatif::PoolAdvice> advice;
    uint64_t top = 0;
    std::vector<uint64_t> cands;
};
AfterTheRead afterTheRead(Spilled& s) {
    AfterTheRead out;
    FirstRead& first = s.first;
    auto after = whatif::adviseAfter(*s.reader, first.asRecorded, first.never, first.races, true,
                                     {}, first.spill.get(), 4);
    EXPECT_TRUE(after);
    if (after) out.advice = std::move(*after);
    for (const PoolPrediction& p : first.never) out.top = std::max(out.top, p.peakReserved);
    out.cands = whatif::candidatesUpTo(out.top, {});
    return out;
}

// The advisor's questions stepped over the spill on 2 to 16 threads (on 2 and 3 each its own
// reader and share of the questions; from 4 one thread decodes the spill for the others) answer
// as on one thread, and as a second read of the trace, on workloads with predicted implicit
// releases, with a reuse policy off and with none off. Without a spill the trace is read again,
// its questions stepped on 2 to 15 other threads beside that read, or on the reading thread
// where no thread can be had: the same answers, whichever replay the first read had (the
// never-releasing answers taken or not).
TEST(WhatIfSpill, TheAdviceOnThreadsIsTheAdviceOnOneThread) {
    size_t advised = 0, policies = 0;
    for (uint64_t seed = 1; seed <= 6; ++seed) {
        SCOPED_TRACE(seed);
        auto spilled = spilledTrace(seed, seed % 2 == 0, seed == 1 ? 60'000 : 15'000);
        ASSERT_TRUE(spilled);
        auto reader = &spilled->reader;
        FirstRead& first = spilled->first;
        for (bool sameReplay : {true, false}) {
            SCOPED_TRACE(sameReplay ? "the first read's replay" : "another replay");
            auto advise = [&](whatif::TapeSpill* spill, unsigned threads) {
                auto a = whatif::adviseAfter(**reader, first.asRecorded, first.never, first.races,
                                             sameReplay, {}, spill, threads);
                EXPECT_TRUE(a);
                return a ? *a : std::vector<whatif::PoolAdvice>{};
            };
            const auto reread = advise(nullptr, 1);
            for (unsigned threads : {1u, 2u, 3u, 4u, 5u, 8u, 16u}) {
                SCOPED_TRACE(threads);
                const auto before = whatif::detail::spillCounts();
                expectSameAdvice(advise(first.spill.get(), threads), reread);
                EXPECT_EQ(whatif::detail::spillCounts().replayed, before.replayed + sameReplay);
                if (threads > 2) expectSameAdvice(advise(nullptr, threads), reread);
            }
            poolscope::detail::simulateNoReplayThreads(true);
            expectSameAdvice(advise(nullptr, 8), reread);
            poolscope::detail::simulateNoReplayThreads(false);
            for (const whatif::PoolAdvice& a : reread) {
                advised += a.thresholdAdvice;
                policies += a.policies.size();
            }
        }
    }
    EXPECT_GT(advised, 0u);
    EXPECT_GT(policies, 0u);
}

// Questions asked ahead (whatif::Speculation: every pool, none decided on the way) answer as the
// same questions asked after the read, a candidate's decided pools included: with waves that
// cover every question the search would ask, and with waves that leave some out (asked after,
// over the spill) or ask thresholds it would not. Told the trace's length, a candidate stops
// following a pool far past what the advice could allow; told a length far too short (and no
// slack), it stops too soon, and the questions that stopped short are asked again after the read. On generated
// random traces (not recordings).
TEST(WhatIfSpill, QuestionsAskedAheadAnswerAsAfterTheRead) {
    uint64_t given = 0, asked = 0, decided = 0, stoppedShort = 0;
    for (uint64_t seed = 1; seed <= 6; ++seed) {
        SCOPED_TRACE(seed);
        auto spilled = spilledTrace(seed, seed % 2 == 0, seed == 1 ? 60'000 : 15'000);
        ASSERT_TRUE(spilled);
        auto reader = &spilled->reader;
        FirstRead& first = spilled->first;
        const AfterTheRead ref = afterTheRead(*spilled);
        for (const whatif::PoolAdvice& a : ref.advice) decided += a.thresholdAdvice;
        const uint64_t top = ref.top;
        const std::vector<uint64_t>& cands = ref.cands;
        for (uint64_t events : {first.events, uint64_t{0}, uint64_t{1}})
        for (bool whole : {true, false}) {
            SCOPED_TRACE(std::string(whole ? "every question ahead" : "some left for after") +
                         ", told " + std::to_string(events) + " events");
            // Two waves, as the report asks them: the first with the policies.
            std::vector<uint64_t> one, two;
            for (size_t i = 0; i < cands.size(); ++i) {
                if (!whole && i == cands.size() / 2) continue;
                (i % 2 ? two : one).push_back(cands[i]);
            }
            one.push_back(top + 12345); // a threshold the search does not ask
            const uint64_t slack = events == 1 ? 0 : whatif::Speculation::kSlack;
            // The candidates as lanes of LaneModels, several to one in the first wave.
            whatif::Speculation waveOne(*first.spill, whole ? 7u : 2u, one, {}, 4, events, slack,
                                        3);
            whatif::Speculation waveTwo(*first.spill, 0, two, {}, 5, events, slack, 1);
            const auto before = whatif::detail::aheadCounts();
            auto got = whatif::adviseAfter(**reader, first.asRecorded, first.never, first.races,
                                           true, {}, first.spill.get(), 4, {}, {&waveOne, &waveTwo});
            ASSERT_TRUE(got);
            expectSameAdvice(*got, ref.advice);
            const auto counts = whatif::detail::aheadCounts();
            given += counts.given - before.given;
            asked += counts.asked - before.asked;
            if (whole && events != 1) EXPECT_EQ(counts.asked, before.asked);
            if (whole && events == 1) stoppedShort += counts.asked - before.asked;
        }
    }
    EXPECT_GT(decided, 0u);
    EXPECT_GT(given, 0u);
    EXPECT_GT(asked, 0u);
    EXPECT_GT(stoppedShort, 0u);
}

// A candidate asked ahead keeps at most so many step counts: past them it stops, spoiled, and
// is asked after the read (the same advice), its counts let go.
TEST(WhatIfSpill, ACandidateAskedAheadKeepsBoundedCounts) {
    auto spilled = spilledTrace(1, false, 60'000);
    ASSERT_TRUE(spilled);
    auto reader = &spilled->reader;
    FirstRead& first = spilled->first;
    const AfterTheRead ref = afterTheRead(*spilled);
    const std::vector<uint64_t>& cands = ref.cands;
    whatif::detail::setAheadKeptForTests(2);
    whatif::Speculation wave(*first.spill, 7, cands, {}, 4, first.events,
                             whatif::Speculation::kSlack, 4);
    whatif::detail::setAheadKeptForTests(0);
    ASSERT_TRUE(wave.wait());
    size_t spoiled = 0;
    for (uint64_t t : cands) spoiled += wave.threshold(t) == nullptr;
    EXPECT_GT(spoiled, 0u);
    const auto before = whatif::detail::aheadCounts();
    auto got = whatif::adviseAfter(**reader, first.asRecorded, first.never, first.races, true, {},
                                   first.spill.get(), 4, {}, {&wave});
    ASSERT_TRUE(got);
    expectSameAdvice(*got, ref.advice);
    EXPECT_GT(whatif::detail::aheadCounts().asked, before.asked);
}

struct ReportOut {
    std::string text, json;
};

ReportOut report(const TraceReader& reader, unsigned adviceThreads = 0, bool askAhead = false) {
    TraceReportOptions o;
    o.parallel = false;
    o.adviceThreads = adviceThreads;
    o.askAhead = askAhead ? TraceReportOptions::FeedThread::On : TraceReportOptions::FeedThread::Off;
    auto r = reportTrace(reader, o, "generated.poolscope");
    EXPECT_TRUE(r);
    if (!r) return {};
    return {reportToText(r->report), reportToJson(r->report)};
}

// The report whose advisor read the first read's ops back from the spill is the report whose
// advisor read the trace again (the spill made to fail at once by a cap of one byte). The
// generated traces record no implicit releases, so the report asks the advisor only with a
// reuse policy off: on every one here.
TEST(WhatIfSpill, TheReportFromTheSpillIsTheReportOfASecondRead) {
    size_t advised = 0;
    for (uint64_t seed = 1; seed <= 4; ++seed) {
        SCOPED_TRACE(seed);
        test::ScratchDir dir;
        const test::Events ev = RandomTrace(seed, true).generate(seed == 1 ? 60'000 : 15'000);
        auto reader = TraceReader::open(write(dir.file("random.poolscope"), ev.all()));
        ASSERT_TRUE(reader);
        const auto before = whatif::detail::spillCounts();
        const ReportOut spilled = report(**reader);
        const auto mid = whatif::detail::spillCounts();
        EXPECT_EQ(mid.replayed, before.replayed + 1); // the spill was read, not the trace
        EXPECT_EQ(mid.fellBack, before.fellBack);
        whatif::detail::setSpillCapForTests(1);
        const ReportOut reread = report(**reader);
        whatif::detail::setSpillCapForTests(0);
        const auto after = whatif::detail::spillCounts();
        EXPECT_EQ(after.fellBack, mid.fellBack + 1);
        EXPECT_EQ(spilled.text, reread.text);
        EXPECT_EQ(spilled.json, reread.json);
        advised += spilled.text.find("a release threshold of") != std::string::npos;
    }
    EXPECT_GT(advised, 0u); // the advice is there to compare
}

// A strict read that meets a damaged chunk part-way ends with that error, on one thread or with
// the models on threads of their own (stopped there, before the samples and models they use go;
// ThreadSanitizer runs this too), and the same read of the intact trace advises.
TEST(WhatIfSearch, AdviseOfADamagedTraceSaysSoWithItsModelsOnThreads) {
    test::ScratchDir dir;
    const test::Events ev = RandomTrace(3, true).generate(40'000);
    const std::string path = write(dir.file("random.poolscope"), ev.all());
    {
        auto intact = TraceReader::open(path);
        ASSERT_TRUE(intact);
        ASSERT_TRUE(whatif::advise(**intact, {}, {}, false, true));
    }
    test::execSql(path, "UPDATE event_chunks SET data = CAST(substr(data,1,99) || CASE WHEN "
                        "substr(data,100,1) = x'5a' THEN x'a5' ELSE x'5a' END || substr(data,101) "
                        "AS BLOB) WHERE id = (SELECT max(id) - 1 FROM event_chunks)");
    for (bool threaded : {false, true})
        for (bool askAhead : {false, true}) {
            SCOPED_TRACE(testing::Message() << "threaded " << threaded << ", asked ahead " << askAhead);
            auto reader = TraceReader::open(path);
            ASSERT_TRUE(reader);
            (*reader)->setSkipDamaged(false);
            auto advice = whatif::advise(**reader, {}, {}, askAhead, threaded);
            ASSERT_FALSE(advice);
            EXPECT_NE(advice.error().message.find("damaged"), std::string::npos) << advice.error().message;
        }
}

// A trace that records the pools' attributes at first sight (pool_initial_attributes: what the
// collector writes since format 6) has them declared to every replay of it: the report's, the
// models' beside it and the advisor's own (`advise`). So the spill stands in for the advisor's
// second read whichever replay the models follow, and where the spill fails the trace read
// again, its questions on threads, answers the same. The same report every way, and the same
// as the report from a whole Timeline (whose advisor is `advise`). The bundled recordings with
// the table, and generated traces given one by hand here, one attribute unlike the driver's
// defaults (a model that did not see it predicts otherwise).
TEST(WhatIfSearch, TheReportOfATraceWithInitialAttributesIsTheSameEveryWay) {
    using F = TraceReportOptions::FeedThread;
    size_t advised = 0;
    auto compare = [&](const TraceReader& reader) {
        // spillsRead: the advisor's questions were asked over the spill after the read (1), or
        // of the trace read again (0); with ahead On, they may have all been answered during the
        // read instead.
        auto run = [&](F models, F analyses, F ahead, unsigned threads, uint64_t spillsRead) {
            SCOPED_TRACE(testing::Message() << "models " << int(models) << ", analyses "
                                            << int(analyses) << ", ahead " << int(ahead)
                                            << ", threads " << threads);
            TraceReportOptions o;
            o.parallel = false;
            o.adviceFeedThread = models;
            o.analysesThread = analyses;
            o.askAhead = ahead;
            o.adviceThreads = threads;
            const auto before = whatif::detail::spillCounts();
            const auto aheadBefore = whatif::detail::aheadCounts();
            auto r = reportTrace(reader, o, "generated.poolscope");
            EXPECT_TRUE(r);
            if (!r) return ReportOut{};
            const uint64_t read = whatif::detail::spillCounts().replayed - before.replayed;
            if (ahead == F::On && spillsRead)
                EXPECT_GT(read + whatif::detail::aheadCounts().given - aheadBefore.given, 0u);
            else
                EXPECT_EQ(read, spillsRead);
            return ReportOut{reportToText(r->report), reportToJson(r->report)};
        };
        TraceReportOptions via;
        via.parallel = false;
        auto timeline = reportTraceViaTimeline(reader, via, "generated.poolscope");
        EXPECT_TRUE(timeline);
        if (!timeline) return;
        const ReportOut want{reportToText(timeline->report), reportToJson(timeline->report)};
        const uint64_t asks = want.text.find("what-if model") != std::string::npos;
        advised += want.text.find("a release threshold of") != std::string::npos;
        std::vector<ReportOut> got = {
            run(F::Off, F::Off, F::Off, 1, asks), // the models on the report's replay
            run(F::On, F::Off, F::Off, 1, asks),  // a replay of their own, lent to the analyses
            run(F::On, F::On, F::Off, 6, asks),   // beside the analyses', 6 threads after
            run(F::On, F::On, F::On, 6, asks),    // the questions asked during the read
        };
        whatif::detail::setSpillCapForTests(1); // the spill fails: the trace is read again
        got.push_back(run(F::On, F::On, F::Off, 1, 0));
        got.push_back(run(F::On, F::On, F::Off, 6, 0));
        whatif::detail::setSpillCapForTests(0);
        for (size_t i = 0; i < got.size(); ++i) {
            SCOPED_TRACE(i);
            EXPECT_EQ(got[i].text, want.text);
            EXPECT_EQ(got[i].json, want.json);
        }
    };
    for (const char* name : {"callsites", "churn_format7", "threads_race_indexed", "torchrun-rank0"}) {
        SCOPED_TRACE(name);
        auto reader = TraceReader::open(std::string(POOLSCOPE_SAMPLES_DIR) + "/" + name + ".poolscope");
        ASSERT_TRUE(reader);
        auto attrs = (*reader)->poolAttributes();
        ASSERT_TRUE(attrs);
        EXPECT_FALSE(attrs->empty());
        compare(**reader);
    }
    for (uint64_t seed = 1; seed <= 3; ++seed) {
        SCOPED_TRACE(seed);
        test::ScratchDir dir;
        const test::Events ev = RandomTrace(seed, true).generate(20'000);
        const std::string path = write(dir.file("random.poolscope"), ev.all());
        // The pools declared, every reuse policy recorded on at first sight (the generator turns
        // one off later), the thresholds 0 but the first pool's (not what the advisor, which
        // does not see them, takes for it).
        test::execSql(path, "INSERT OR IGNORE INTO pools(handle) VALUES (2560), (2816), (3072);"
                            "INSERT INTO pool_initial_attributes SELECT handle, a, a < 4 FROM pools, "
                            "(SELECT 1 AS a UNION SELECT 2 UNION SELECT 3 UNION SELECT 4);"
                            "UPDATE pool_initial_attributes SET value = 33554432 WHERE pool = 2560 AND attr = 4");
        auto reader = TraceReader::open(path);
        ASSERT_TRUE(reader);
        auto attrs = (*reader)->poolAttributes();
        ASSERT_TRUE(attrs);
        ASSERT_FALSE(attrs->empty());
        compare(**reader);
    }
    EXPECT_GT(advised, 0u); // the advice is there to compare
}

// Wherever the spill fails (no temporary directory, no libzstd, its cap), the advisor reads the
// trace again: the same report.
TEST(WhatIfSpill, AFailedSpillFallsBackToASecondRead) {
    test::ScratchDir dir;
    const test::Events ev = RandomTrace(5, true).generate(30'000);
    // Written uncompressed (as where libzstd is missing), so that it reads without libzstd too.
    zstd::detail::simulateMissing(true);
    const std::string path = write(dir.file("random.poolscope"), ev.all());
    zstd::detail::simulateMissing(false);
    auto reader = TraceReader::open(path);
    ASSERT_TRUE(reader);
    const ReportOut want = report(**reader);
    ASSERT_NE(want.text.find("what-if model"), std::string::npos);
    auto wantAdvice = whatif::adviseTwoReads(**reader);
    ASSERT_TRUE(wantAdvice);
    // `report` and `advise` (which asks its questions over the spill too), and both with the
    // questions asked during the read, which follow the failed spill no further.
    auto fallsBack = [&](const char* how) {
        SCOPED_TRACE(how);
        for (bool ahead : {false, true}) {
            SCOPED_TRACE(ahead ? "asked ahead" : "asked after");
            const auto before = whatif::detail::spillCounts();
            const ReportOut got = report(**reader, 0, ahead);
            EXPECT_EQ(whatif::detail::spillCounts().fellBack, before.fellBack + 1);
            EXPECT_EQ(got.text, want.text);
            EXPECT_EQ(got.json, want.json);
            for (bool threaded : {false, true}) {
                SCOPED_TRACE(threaded ? "advise's models on threads" : "advise on one thread");
                const auto advised = whatif::detail::spillCounts();
                auto advice = whatif::advise(**reader, {}, {}, ahead, threaded);
                ASSERT_TRUE(advice);
                EXPECT_EQ(whatif::detail::spillCounts().fellBack, advised.fellBack + 1);
                expectSameAdvice(*advice, *wantAdvice);
            }
        }
    };
    {
        const char* old = std::getenv("TMPDIR");
        const std::string saved = old ? old : "";
        ::setenv("TMPDIR", dir.file("no such directory").c_str(), 1);
        fallsBack("TMPDIR cannot be written");
        if (old) ::setenv("TMPDIR", saved.c_str(), 1);
        else ::unsetenv("TMPDIR");
    }
    zstd::detail::simulateMissing(true);
    fallsBack("no libzstd");
    zstd::detail::simulateMissing(false);
    whatif::detail::setSpillCapForTests(200);
    fallsBack("past its cap");
    whatif::detail::setSpillCapForTests(0);
}

// A spill reader that fails part-way (the n-th block read fails), on one thread or on several:
// the models it fed are dropped, the trace is read again, and the report is the same.
TEST(WhatIfSpill, AReaderThatFailsPartWayFallsBackToASecondRead) {
    test::ScratchDir dir;
    // ~3 MB of ops before zstd: 3 blocks a reader.
    const test::Events ev = RandomTrace(21, true).generate(300'000);
    auto reader = TraceReader::open(write(dir.file("random.poolscope"), ev.all()));
    ASSERT_TRUE(reader);
    const ReportOut want = report(**reader, 1);
    ASSERT_NE(want.text.find("what-if model"), std::string::npos);
    for (unsigned threads : {1u, 2u, 3u, 4u, 8u}) {
        SCOPED_TRACE(threads);
        EXPECT_EQ(report(**reader, threads).text, want.text); // whole, for comparison
        for (uint64_t failAt : {2u, 3u}) {
            SCOPED_TRACE(failAt);
            const auto before = whatif::detail::spillCounts();
            whatif::detail::failSpillLoadForTests(failAt);
            const ReportOut got = report(**reader, threads);
            whatif::detail::failSpillLoadForTests(0);
            const auto after = whatif::detail::spillCounts();
            EXPECT_EQ(after.fellBack, before.fellBack + 1);
            EXPECT_EQ(after.replayed, before.replayed);
            EXPECT_EQ(got.text, want.text);
            EXPECT_EQ(got.json, want.json);
        }
    }
}

} // namespace
} // namespace poolscope
