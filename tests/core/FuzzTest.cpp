// Fuzz targets for the core's reader surfaces (issue #12), in the manner of
// tests/control/test_fuzz.cpp: an in-process mutation fuzzer with a fixed seed, bounded by count
// and by time so that CI runs it on every submission. POOLSCOPE_FUZZ_INPUTS=N runs N inputs with
// no time limit (docs/SANITIZERS.md, "Fuzzing", has the long runs).
//   ChunkCodecFuzz: real encoded chunks (the bundled samples' events, codec 4, 3 and 2), mutated,
//     decoded with every codec version: never a crash, never more events than claimed.
//   TraceFileFuzz: copies of the bundled samples, damaged as bytes or as SQL, then opened and
//     read as the window reads them (skipDamaged): errors are values, never a crash.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <limits>
#include <random>
#include <sqlite3.h>
#include <string>
#include <vector>

#include "TestTraces.h"
#include "poolscope/EventCodec.h"
#include "poolscope/TimelineBuilder.h"
#include "poolscope/TraceReader.h"

namespace poolscope {
namespace {

using Clock = std::chrono::steady_clock;

int64_t msSince(Clock::time_point t0) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
}

// Inputs to run: POOLSCOPE_FUZZ_INPUTS (no time limit then), else `ciInputs` within `ciMs`
// (but at least `minInputs`, however slow the build).
struct Budget {
    uint64_t inputs;
    int64_t ms;
    uint64_t minInputs;
    Budget(uint64_t ciInputs, int64_t ciMs, uint64_t min) : inputs(ciInputs), ms(ciMs), minInputs(min) {
        if (const char* e = std::getenv("POOLSCOPE_FUZZ_INPUTS"); e && *e) {
            inputs = std::strtoull(e, nullptr, 10);
            ms = std::numeric_limits<int64_t>::max();
            minInputs = inputs;
        }
    }
    bool more(uint64_t done, Clock::time_point t0) const {
        return done < inputs && (done < minInputs || msSince(t0) < ms);
    }
};

const char* const kSamples[] = {"churn",    "cupy",         "ipc-child",   "ipc-parent",
                                "pools",    "thread_first", "torch_async", "trims_oom",
                                "jax",      "threads"};

std::string samplePath(const std::string& name) {
    return std::string(POOLSCOPE_SAMPLES_DIR) + "/" + name + ".poolscope";
}

std::string readFile(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void writeFile(const std::string& path, const std::string& bytes) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// Byte-level damage shared by both targets: flips, truncation, splices, insertion, runs of
// 0x00/0xFF (a varint or a v3 length code at its extreme), noise.
void mutateBytes(std::string& b, const std::vector<std::string>& others, std::mt19937_64& rng) {
    switch (rng() % 7) {
    case 0:
        for (int i = 0, n = 1 + int(rng() % 4); i < n && !b.empty(); ++i)
            b[rng() % b.size()] ^= char(1 + rng() % 255);
        break;
    case 1:
        b.resize(rng() % (b.size() + 1));
        break;
    case 2: { // splice: a prefix of this, the suffix of another
        const std::string& o = others[rng() % others.size()];
        b.resize(rng() % (b.size() + 1));
        b.append(o, rng() % (o.size() + 1));
        break;
    }
    case 3: { // insert random bytes
        std::string ins(1 + rng() % 16, '\0');
        for (char& c : ins)
            c = char(rng());
        b.insert(rng() % (b.size() + 1), ins);
        break;
    }
    case 4:
    case 5: { // a run of extremes (v3 header codes all 7, varints that never end, zeros)
        if (b.empty()) break;
        const size_t at = rng() % b.size();
        const size_t n = std::min<size_t>(1 + rng() % 12, b.size() - at);
        const char v = rng() % 3 == 0 ? '\0' : rng() % 2 ? char(0xFF) : char(0x7F);
        for (size_t i = 0; i < n; ++i)
            b[at + i] = v;
        break;
    }
    default: // noise over a stretch
        if (b.empty()) break;
        for (size_t i = rng() % b.size(), n = 1 + rng() % 64; i < b.size() && n; ++i, --n)
            b[i] = char(rng());
    }
}

// ---- chunk codec -------------------------------------------------------------------------------

struct Seed {
    std::string data;
    uint64_t count;
    int version;
};

std::vector<Seed> codecSeeds() {
    std::vector<Seed> seeds;
    std::mt19937_64 rng(7);
    for (const char* name : kSamples) {
        auto r = TraceReader::open(samplePath(name));
        if (!r) {
            ADD_FAILURE() << name << ": " << r.error().message;
            continue;
        }
        std::vector<Event> all;
        (void)(*r)->forEachChunk([&](std::vector<Event>& c) {
            all.insert(all.end(), c.begin(), c.end());
            return all.size() < 20000;
        });
        if (all.empty()) continue;
        // Runs of several lengths from each sample (short ones keep the rate high; a full chunk
        // or two keep the fast path and the tail both in play).
        for (size_t len : {size_t{1}, size_t{2}, size_t{5}, size_t{17}, size_t{64}, size_t{300},
                           all.size()}) {
            len = std::min(len, all.size());
            const size_t at = rng() % (all.size() - len + 1);
            std::span<const Event> run(all.data() + at, len);
            if (len > 1000 && seeds.size() % 3) continue; // a few large seeds only
            for (int v : {4, 3, 2}) {
                Seed s{{}, len, v};
                if (v == 4) {
                    // Codec 4 with call sites on some events (the samples predate them).
                    std::vector<Event> withSites(run.begin(), run.end());
                    for (size_t i = 0; i < withSites.size(); i += 3) withSites[i].site = uint32_t(i + 1);
                    encodeEvents(withSites, s.data, v);
                } else {
                    encodeEvents(run, s.data, v);
                }
                seeds.push_back(std::move(s));
            }
        }
    }
    return seeds;
}

uint64_t mutateCount(uint64_t count, size_t bytes, std::mt19937_64& rng) {
    switch (rng() % 8) {
    case 0: return count + 1;
    case 1: return count - 1; // 0 - 1 = 2^64 - 1 too
    case 2: return 0;
    case 3: return std::numeric_limits<uint64_t>::max();
    case 4: return bytes / (1 + rng() % 17); // just fits the smallest event of some codec
    case 5: return rng();
    default: return count;
    }
}

TEST(ChunkCodecFuzz, DecoderSurvivesMutatedChunks) {
    const std::vector<Seed> seeds = codecSeeds();
    ASSERT_GE(seeds.size(), 20u);
    std::vector<std::string> datas;
    for (const Seed& s : seeds)
        datas.push_back(s.data);
    std::mt19937_64 rng(20261124);
    const Budget budget(1'000'000, 2500, 1000);
    const auto t0 = Clock::now();
    uint64_t inputs = 0, decoded = 0;
    std::vector<Event> out;
    for (; budget.more(inputs, t0); ++inputs) {
        const Seed& s = seeds[rng() % seeds.size()];
        std::string b = s.data;
        uint64_t count = s.count;
        if (rng() % 8) mutateBytes(b, datas, rng); // an unmutated seed now and then
        if (rng() % 4 == 0) count = mutateCount(count, b.size(), rng);
        // Every version the decoder accepts, and two it must refuse.
        for (int v : {0, 1, 2, 3, 4, 5}) {
            out.clear();
            out.shrink_to_fit();
            const bool ok = decodeEvents(b, count, out, v);
            // Never allocates for more events than the bytes could hold (1 byte an event at
            // least, in codec 2), whatever count claims.
            ASSERT_LE(out.capacity(), b.size() + 1)
                << "input " << inputs << " v" << v << " count " << count;
            if (ok) {
                ASSERT_TRUE(v >= 1 && v <= 4) << "input " << inputs << " v" << v;
                ASSERT_EQ(out.size(), count) << "input " << inputs << " v" << v;
                ++decoded;
            } else {
                ASSERT_LE(out.size(), count) << "input " << inputs << " v" << v;
            }
        }
    }
    const int64_t ms = msSince(t0);
    std::printf("chunk codec fuzz: %llu inputs (x6 versions), %llu decoded, %lld ms, %.0f inputs/s\n",
                static_cast<unsigned long long>(inputs), static_cast<unsigned long long>(decoded),
                static_cast<long long>(ms), ms ? 1000.0 * double(inputs) / double(ms) : 0.0);
    EXPECT_GT(decoded, 0u) << "some inputs must still decode: the seeds are valid";
}

// ---- trace files -------------------------------------------------------------------------------

// SQL-level damage of a trace: the columns a reader trusts, set to what an attacker would.
std::string sqlMutation(std::mt19937_64& rng) {
    static const char* kExtreme[] = {"0", "-1", "1", "4096", "4097", "9223372036854775807",
                                     "-9223372036854775808", "'x'", "NULL", "X'00'", "1e300"};
    const std::string v = kExtreme[rng() % std::size(kExtreme)];
    // (not SQLite's random(): the run must replay from its seed)
    const std::string rowN = "(SELECT id FROM event_chunks ORDER BY id LIMIT 1 OFFSET " +
                             std::to_string(rng() % 4) + ")";
    static const char* kChunkCols[] = {"first_seq", "last_seq", "t_min", "t_max", "count",
                                       "kinds",     "codec",    "id"};
    switch (rng() % 9) {
    case 0:
        return "UPDATE event_chunks SET " + std::string(kChunkCols[rng() % std::size(kChunkCols)]) +
               " = " + v + " WHERE id = " + rowN;
    case 1:
        return "UPDATE event_chunks SET codec = " + std::to_string(int(rng() % 6) - 1) +
               " WHERE id = " + rowN;
    case 2: // data cut short, or emptied, or replaced with noise of the same length
        return rng() % 2 ? "UPDATE event_chunks SET data = substr(data, 1, " +
                               std::to_string(rng() % 200) + ") WHERE id = " + rowN
                         : "UPDATE event_chunks SET data = zeroblob(length(data)) WHERE id = " + rowN;
    case 3:
        return "UPDATE event_counts SET count = " + v +
               " WHERE kind = (SELECT kind FROM event_counts ORDER BY kind LIMIT 1 OFFSET " +
               std::to_string(rng() % 4) + ")";
    case 4:
        return "INSERT OR REPLACE INTO event_counts(kind, count) VALUES (" +
               std::to_string(int(rng() % 300) - 20) + ", " + v + ")";
    case 5:
        return "UPDATE meta SET value = " + v +
               " WHERE key = (SELECT key FROM meta ORDER BY key LIMIT 1 OFFSET " +
               std::to_string(rng() % 8) + ")";
    case 6:
        return "DELETE FROM event_chunks WHERE id = " + rowN;
    case 7: // a chunk row duplicated (overlapping seqs)
        return "INSERT INTO event_chunks(first_seq, last_seq, t_min, t_max, count, kinds, codec, "
               "data) SELECT first_seq, last_seq, t_min, t_max, count, kinds, codec, data FROM "
               "event_chunks WHERE id = " + rowN;
    default:
        return rng() % 2 ? "UPDATE samples SET ts_ns = " + v + " WHERE id % 7 = 0"
                         : "UPDATE process SET pid = " + v;
    }
}

// Damages chunk data in place (bytes), keeping the header, so that the decoder sees it.
void mutateChunkData(const std::string& path, std::mt19937_64& rng,
                     const std::vector<std::string>& others) {
    sqlite3* db = nullptr;
    if (sqlite3_open(path.c_str(), &db) != SQLITE_OK) {
        sqlite3_close(db);
        return;
    }
    sqlite3_stmt* st = nullptr;
    const std::string sel = "SELECT id, data FROM event_chunks ORDER BY id LIMIT 1 OFFSET " +
                            std::to_string(rng() % 3);
    if (sqlite3_prepare_v2(db, sel.c_str(), -1, &st, nullptr) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW) {
        const int64_t id = sqlite3_column_int64(st, 0);
        const auto* p = static_cast<const char*>(sqlite3_column_blob(st, 1));
        std::string data(p ? p : "", static_cast<size_t>(sqlite3_column_bytes(st, 1)));
        sqlite3_finalize(st);
        st = nullptr;
        mutateBytes(data, others, rng);
        if (sqlite3_prepare_v2(db, "UPDATE event_chunks SET data = ? WHERE id = ?", -1, &st,
                               nullptr) == SQLITE_OK) {
            sqlite3_bind_blob(st, 1, data.data(), int(data.size()), SQLITE_TRANSIENT);
            sqlite3_bind_int64(st, 2, id);
            sqlite3_step(st);
        }
    }
    sqlite3_finalize(st);
    sqlite3_close(db);
}

TEST(TraceFileFuzz, ReaderSurvivesDamagedFiles) {
    test::ScratchDir dir;
    std::vector<std::string> files;
    for (const char* name : kSamples)
        if (std::string(name) != "jax" && std::string(name) != "threads") // the small ones
            files.push_back(readFile(samplePath(name)));
    ASSERT_FALSE(files.empty());
    std::vector<std::string> small = {std::string(64, '\0'), std::string(40, '\xFF')};
    std::mt19937_64 rng(20261125);
    const Budget budget(100'000, 3000, 200);
    const auto t0 = Clock::now();
    const std::string path = dir.file("fuzz.poolscope");
    uint64_t inputs = 0, opened = 0, built = 0;
    for (; budget.more(inputs, t0); ++inputs) {
        std::remove(path.c_str());
        std::remove((path + "-journal").c_str());
        std::string bytes = files[rng() % files.size()];
        const int how = int(rng() % 4);
        if (how == 0) { // raw bytes of the file: flips (pages, headers), truncation, noise
            for (int i = 0, n = 1 + int(rng() % 3); i < n; ++i)
                mutateBytes(bytes, files, rng);
            writeFile(path, bytes);
        } else {
            writeFile(path, bytes);
            if (how == 1) {
                mutateChunkData(path, rng, small);
            } else {
                sqlite3* db = nullptr;
                if (sqlite3_open(path.c_str(), &db) == SQLITE_OK)
                    for (int i = 0, n = 1 + int(rng() % 3); i < n; ++i)
                        sqlite3_exec(db, sqlMutation(rng).c_str(), nullptr, nullptr, nullptr);
                sqlite3_close(db);
            }
        }
        auto r = TraceReader::open(path);
        if (!r) {
            EXPECT_FALSE(r.error().message.empty()) << "input " << inputs;
            continue;
        }
        ++opened;
        TraceReader& reader = **r;
        reader.setSkipDamaged(true);
        (void)reader.verifyChunks();
        (void)reader.summary();
        (void)reader.meta();
        (void)reader.damage();
        auto tl = buildTimeline(reader);
        built += tl.ok();
    }
    const int64_t ms = msSince(t0);
    std::printf("trace file fuzz: %llu inputs, %llu opened, %llu timelines, %lld ms, %.0f inputs/s\n",
                static_cast<unsigned long long>(inputs), static_cast<unsigned long long>(opened),
                static_cast<unsigned long long>(built), static_cast<long long>(ms),
                ms ? 1000.0 * double(inputs) / double(ms) : 0.0);
    EXPECT_GT(built, 0u) << "some damaged files must still build: most damage is partial";
}

} // namespace
} // namespace poolscope
