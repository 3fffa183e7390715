// formatChunksInOrder (ChunksInOrder.h): chunks formatted on several threads give what one read
// on the calling thread gives (the text, in order; the status; the damage the reader reports
// afterwards), on intact traces and on traces damaged by hand in the ways a read finds.
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>
#include <random>
#include <set>
#include <span>
#include <thread>

#include <sys/wait.h>

#include "TestTraces.h"
#include "poolscope/ChunksInOrder.h"
#include "poolscope/TraceReader.h"
#include "poolscope/TraceWriter.h"
#include "poolscope/analysis/TraceReport.h"
#include "poolscope/interop/Export.h"

namespace poolscope {
namespace {

// Allocations and frees on a few streams, committed unevenly so that chunks differ in size.
std::string writeTrace(const std::string& path, size_t n) {
    std::mt19937_64 rng(7);
    test::Events ev;
    std::vector<uint64_t> live;
    uint64_t nextPtr = 0x7f4000000000;
    int64_t ts = 1'000'000'000;
    for (size_t i = 0; i < n; ++i) {
        ts += 50 + int64_t(rng() % 400);
        const uint64_t stream = 0x7000 + 0x100 * (rng() % 3);
        if (live.empty() || rng() % 2) {
            live.push_back(nextPtr += 0x1000 * (1 + rng() % 64));
            ev.alloc(ts, stream, 0x55aa00, live.back(), 1 + rng() % (1u << 20));
        } else {
            const size_t k = rng() % live.size();
            ev.free(ts, stream, 0x55aa00, live[k]);
            live[k] = live.back();
            live.pop_back();
        }
    }
    WriterOptions o;
    o.wal = false;
    o.synchronousOff = true;
    auto w = TraceWriter::create(path, o);
    EXPECT_TRUE(w) << (w ? "" : w.error().message);
    if (!w) return path;
    const std::vector<Event>& all = ev.all();
    for (size_t i = 0; i < all.size();) {
        const size_t k = std::min(all.size() - i, size_t(2500 + i % 5000));
        EXPECT_TRUE((*w)->append(std::span<const Event>(all.data() + i, k)));
        EXPECT_TRUE((*w)->commit());
        i += k;
    }
    EXPECT_TRUE((*w)->close());
    return path;
}

struct Outcome {
    std::string text;
    bool ok = false;
    ErrorCode code = ErrorCode::Io;
    std::string damage;
    size_t formatThreads = 0;
    std::vector<size_t> writes; // each write's length
};

// One read of `path`: each event's seq, time and kind as a line. stopAfter: write says stop
// after that many batches.
Outcome read(const std::string& path, unsigned threads, size_t perBatch, bool skip = true,
             size_t stopAfter = SIZE_MAX) {
    Outcome out;
    auto r = TraceReader::open(path);
    EXPECT_TRUE(r) << (r ? "" : r.error().message);
    if (!r) return out;
    (*r)->setSkipDamaged(skip);
    std::mutex m;
    std::set<std::thread::id> ids;
    ChunkTextOptions o;
    o.threads = threads;
    o.chunksPerBatch = perBatch;
    const Status st = formatChunksInOrder(
        **r,
        [&](const std::vector<Event>& chunk, std::string& text) {
            {
                std::lock_guard lk(m);
                ids.insert(std::this_thread::get_id());
            }
            for (const Event& e : chunk)
                text += std::to_string(e.seq) + " " + std::to_string(e.tsNs) + " " +
                        std::to_string(int(e.kind)) + "\n";
        },
        [&](const std::string& text) {
            out.text += text;
            out.writes.push_back(text.size());
            return out.writes.size() < stopAfter;
        },
        o);
    out.ok = static_cast<bool>(st);
    if (!st) out.code = st.error().code;
    for (const TraceDamage& d : (*r)->damage())
        out.damage += d.what + " [" + std::to_string(d.events) + "]\n";
    out.formatThreads = ids.size();
    return out;
}

void expectSame(const Outcome& a, const Outcome& ref) {
    EXPECT_EQ(a.ok, ref.ok);
    if (!a.ok && !ref.ok) {
        EXPECT_EQ(int(a.code), int(ref.code));
    }
    EXPECT_EQ(a.text.size(), ref.text.size());
    EXPECT_TRUE(a.text == ref.text) << "the text differs";
    EXPECT_EQ(a.damage, ref.damage);
}

struct DamageCase {
    const char* name;
    std::string sql;
    bool forged; // chunk_headers rows re-signed: a lie only the chunk's read finds
};

// The damage a read finds, each kind once.
std::vector<DamageCase> damageCases() {
    return {
        {"intact", "", false},
        {"a byte of two chunks' data flipped",
         "UPDATE event_chunks SET data = CAST(substr(data,1,99) || CASE WHEN substr(data,100,1) = "
         "x'5a' THEN x'a5' ELSE x'5a' END || substr(data,101) AS BLOB) WHERE id IN (2, 9)",
         false},
        {"a row deleted", "DELETE FROM event_chunks WHERE id = 4", false},
        {"a row duplicated",
         "INSERT INTO event_chunks(first_seq,last_seq,t_min,t_max,count,kinds,codec,data,"
         "prev_last_seq,crc) SELECT first_seq,last_seq,t_min,t_max,count,kinds,codec,data,"
         "prev_last_seq,crc FROM event_chunks WHERE id = 3",
         false},
        {"rows reordered",
         "UPDATE event_chunks SET id = 100 WHERE id = 1; UPDATE event_chunks SET id = 1 WHERE "
         "id = 6; UPDATE event_chunks SET id = 6 WHERE id = 100;",
         false},
        {"a chunk's own crc changed", "UPDATE event_chunks SET crc = -1 WHERE id = 5", false},
        {"header copies lying about three chunks",
         "UPDATE chunk_headers SET crc = (crc | 1) - (crc & 1) WHERE chunk IN (3, 8, 14)", true},
    };
}

// `base` copied with the case's damage done to it.
std::string damagedCopy(const test::ScratchDir& dir, const std::string& base, const DamageCase& c) {
    const std::string path = dir.file("t.poolscope");
    std::filesystem::copy_file(base, path, std::filesystem::copy_options::overwrite_existing);
    if (!c.sql.empty()) test::execSql(path, c.sql);
    if (c.forged) test::forgeChunkHeaders(path);
    return path;
}

TEST(ChunksInOrder, ThreadsGiveTheOneThreadReadOfIntactAndDamagedTraces) {
    test::ScratchDir dir;
    const std::string base = writeTrace(dir.file("base.poolscope"), 90000);
    for (const DamageCase& c : damageCases()) {
        SCOPED_TRACE(c.name);
        const std::string path = damagedCopy(dir, base, c);
        const Outcome ref = read(path, 1, 2);
        ASSERT_TRUE(ref.ok);
        EXPECT_EQ(ref.formatThreads, 1u);
        if (std::string(c.name) == "intact") {
            EXPECT_EQ(ref.damage, "");
            EXPECT_EQ(size_t(std::count(ref.text.begin(), ref.text.end(), '\n')), 90000u);
        } else {
            EXPECT_NE(ref.damage, "") << "the damage must be one a read finds";
        }
        for (unsigned threads : {2u, 3u, 4u, 8u})
            for (size_t per : {size_t(1), size_t(2), size_t(5)}) {
                SCOPED_TRACE("threads " + std::to_string(threads) + ", chunks per batch " +
                             std::to_string(per));
                const Outcome got = read(path, threads, per);
                expectSame(got, ref);
                EXPECT_GT(got.formatThreads, 1u) << "the threads were not used";
            }
    }
}

// decodeChunksInOrder's read: each chunk's events as lines (every field the codec keeps), a
// line per chunk between them, the status and the damage found.
struct Decoded {
    std::string text;
    bool ok = false;
    ErrorCode code = ErrorCode::Io;
    std::string damage;
    size_t chunks = 0;
    unsigned decoders = 0;
    bool otherThread = false; // consume ran on a thread other than the caller's
};

Decoded decode(const std::string& path, unsigned threads, size_t stopAfter = SIZE_MAX, bool skip = true) {
    Decoded out;
    auto r = TraceReader::open(path);
    EXPECT_TRUE(r) << (r ? "" : r.error().message);
    if (!r) return out;
    (*r)->setSkipDamaged(skip);
    (*r)->setReuseHeaderScan(true);
    const std::thread::id caller = std::this_thread::get_id();
    const Status st = decodeChunksInOrder(
        **r,
        [&](std::vector<Event>& chunk) {
            out.otherThread = out.otherThread || std::this_thread::get_id() != caller;
            out.text += "chunk\n";
            for (const Event& e : chunk)
                out.text += std::to_string(e.seq) + " " + std::to_string(e.tsNs) + " " +
                            std::to_string(int(e.kind)) + " " + std::to_string(e.stream) + " " +
                            std::to_string(e.pool) + " " + std::to_string(e.ptr) + " " +
                            std::to_string(e.size) + " " + std::to_string(e.tid) + "\n";
            return ++out.chunks < stopAfter;
        },
        threads, false, &out.decoders);
    out.ok = static_cast<bool>(st);
    if (!st) out.code = st.error().code;
    for (const TraceDamage& d : (*r)->damage())
        out.damage += d.what + " [" + std::to_string(d.events) + "]\n";
    return out;
}

TEST(ChunksInOrder, DecodingThreadsGiveTheOneThreadReadOfIntactAndDamagedTraces) {
    test::ScratchDir dir;
    const std::string base = writeTrace(dir.file("base.poolscope"), 90000);
    for (const DamageCase& c : damageCases()) {
        SCOPED_TRACE(c.name);
        const std::string path = damagedCopy(dir, base, c);
        const Decoded ref = decode(path, 1);
        ASSERT_TRUE(ref.ok);
        EXPECT_EQ(ref.decoders, 0u);
        EXPECT_GT(ref.chunks, 10u);
        if (std::string(c.name) != "intact") {
            EXPECT_NE(ref.damage, "") << "the damage must be one a read finds";
        }
        for (unsigned threads : {2u, 3u, 8u}) {
            SCOPED_TRACE("threads " + std::to_string(threads));
            const Decoded got = decode(path, threads);
            EXPECT_TRUE(got.ok);
            EXPECT_EQ(got.chunks, ref.chunks);
            EXPECT_TRUE(got.text == ref.text) << "the chunks differ";
            EXPECT_EQ(got.damage, ref.damage);
            EXPECT_EQ(got.decoders, threads) << "the threads were not used";
            EXPECT_FALSE(got.otherThread) << "consume must run on the calling thread";
        }
    }
    // Stopped by consume: the chunks before, then Cancelled, as one thread stops.
    for (size_t stop : {size_t(1), size_t(4)}) {
        const Decoded ref = decode(base, 1, stop), got = decode(base, 4, stop);
        EXPECT_FALSE(got.ok);
        EXPECT_EQ(int(got.code), int(ErrorCode::Cancelled));
        EXPECT_EQ(int(got.code), int(ref.code));
        EXPECT_EQ(got.chunks, stop);
        EXPECT_TRUE(got.text == ref.text);
    }
    // A strict reader stops at its first damaged chunk, which threads would pass over: it is
    // read on the calling thread.
    const std::string damaged = dir.file("d.poolscope");
    std::filesystem::copy_file(base, damaged, std::filesystem::copy_options::overwrite_existing);
    test::execSql(damaged, "UPDATE event_chunks SET crc = -1 WHERE id = 4");
    const Decoded strictRef = decode(damaged, 1, SIZE_MAX, false), strict = decode(damaged, 4, SIZE_MAX, false);
    EXPECT_FALSE(strict.ok);
    EXPECT_EQ(int(strict.code), int(ErrorCode::Corrupt));
    EXPECT_EQ(strict.decoders, 0u);
    EXPECT_TRUE(strict.text == strictRef.text);
}

// The names pass decodes on several threads: the same names, start and live blocks as on one.
TEST(ChunksInOrder, TheNamesPassGivesTheSameOnAnyNumberOfDecodingThreads) {
    test::ScratchDir dir;
    const std::string path = writeTrace(dir.file("t.poolscope"), 70000);
    auto pass = [&](unsigned threads, std::vector<Allocation>& live, std::set<uint64_t>& streams) {
        auto r = TraceReader::open(path);
        EXPECT_TRUE(r);
        (*r)->setSkipDamaged(true);
        (*r)->setReuseHeaderScan(true);
        LiveBlocksBefore before;
        before.beforeSeq = 40000;
        NamesPassControl control;
        control.threads = threads;
        auto got = traceNamesAndStart(**r, &before, control);
        EXPECT_TRUE(got);
        EXPECT_TRUE((*r)->forEachChunk([&](std::vector<Event>& chunk) {
            for (const Event& e : chunk) streams.insert(e.stream);
            return true;
        }));
        live = before.blocks;
        std::string text = std::to_string(got->t0) + "\n";
        for (uint64_t s : streams) text += got->names.streamWithHandle(s) + "\n";
        text += got->names.poolWithHandle(0x55aa00) + "\n";
        return text;
    };
    std::vector<Allocation> refLive, live;
    std::set<uint64_t> streams;
    const std::string ref = pass(1, refLive, streams);
    EXPECT_EQ(streams.size(), 3u);
    EXPECT_GT(refLive.size(), 10u);
    for (unsigned threads : {3u, 6u}) {
        EXPECT_EQ(pass(threads, live, streams), ref);
        ASSERT_EQ(live.size(), refLive.size());
        for (size_t i = 0; i < live.size(); ++i) {
            EXPECT_EQ(live[i].ptr, refLive[i].ptr);
            EXPECT_EQ(live[i].allocSeq, refLive[i].allocSeq);
            EXPECT_EQ(live[i].size, refLive[i].size);
        }
    }
}

// The names pass over the filtered events (NamesFilter) reads damaged traces as one read of
// every event does: the same names, start and damage found, on one thread and on several; and
// a cancel ends it.
TEST(ChunksInOrder, TheFilteredNamesPassReadsDamagedTracesAsOneRead) {
    test::ScratchDir dir;
    const std::string base = writeTrace(dir.file("base.poolscope"), 90000);
    auto pass = [&](const std::string& path, NamesPassControl c, bool& filtered, ErrorCode* code = nullptr,
                    uint64_t liveBefore = 0) {
        auto r = TraceReader::open(path);
        EXPECT_TRUE(r);
        if (!r) return std::string();
        (*r)->setSkipDamaged(true);
        (*r)->setReuseHeaderScan(true);
        LiveBlocksBefore live;
        live.beforeSeq = liveBefore;
        auto got = traceNamesAndStart(**r, liveBefore ? &live : nullptr, c);
        if (code) *code = got ? ErrorCode::Io : got.error().code;
        if (!got) return std::string("failed");
        filtered = got->filtered;
        std::string text = std::to_string(got->t0) + "\n";
        for (uint64_t s : {0x7000, 0x7100, 0x7200}) text += got->names.streamWithHandle(s) + "\n";
        text += got->names.poolWithHandle(0x55aa00) + "\n";
        for (const TraceDamage& d : (*r)->damage()) text += d.what + " [" + std::to_string(d.events) + "]\n";
        for (const Allocation& a : live.blocks)
            text += std::to_string(a.ptr) + " " + std::to_string(a.allocSeq) + " " + std::to_string(a.size) + " " +
                    std::to_string(a.pool) + " " + std::to_string(a.device) + " " + std::to_string(a.allocStream) + "\n";
        return text;
    };
    for (const DamageCase& c : damageCases()) {
        SCOPED_TRACE(c.name);
        const std::string path = damagedCopy(dir, base, c);
        bool filtered = true;
        NamesPassControl whole;
        whole.threads = 1;
        const std::string ref = pass(path, whole, filtered);
        EXPECT_FALSE(filtered);
        for (unsigned threads : {1u, 3u, 8u}) {
            SCOPED_TRACE("threads " + std::to_string(threads));
            NamesPassControl f;
            f.threads = threads;
            f.filterAlone = true;
            filtered = false;
            EXPECT_EQ(pass(path, f, filtered), ref);
            EXPECT_TRUE(filtered);
        }
        // With the blocks live before seq 50000, taken on threads from contiguous runs.
        const std::string liveRef = pass(path, whole, filtered, nullptr, 50000);
        EXPECT_GT(liveRef.size(), ref.size() + 1000) << "blocks are live there";
        for (unsigned threads : {1u, 2u, 3u, 8u}) {
            SCOPED_TRACE("live blocks, threads " + std::to_string(threads));
            NamesPassControl f;
            f.threads = threads;
            f.filterAlone = true;
            EXPECT_EQ(pass(path, f, filtered, nullptr, 50000), liveRef);
            EXPECT_TRUE(filtered);
        }
    }
    std::atomic<bool> cancel{false};
    NamesPassControl c;
    c.threads = 3;
    c.cancel = &cancel;
    size_t calls = 0;
    c.progress = [&](uint64_t, uint64_t) {
        ++calls;
        cancel = true;
    };
    bool filtered = false;
    ErrorCode code = ErrorCode::Io;
    EXPECT_EQ(pass(base, c, filtered, &code), "failed");
    EXPECT_EQ(int(code), int(ErrorCode::Cancelled));
    EXPECT_EQ(calls, 1u) << "no chunk after the cancel";
}

TEST(ChunksInOrder, AWriteThatStopsStopsTheThreadsAfterThatBatch) {
    test::ScratchDir dir;
    const std::string path = writeTrace(dir.file("t.poolscope"), 60000);
    const Outcome whole = read(path, 1, 1);
    for (unsigned threads : {1u, 2u, 4u})
        for (size_t stop : {size_t(1), size_t(3), size_t(7)}) {
            SCOPED_TRACE("threads " + std::to_string(threads) + ", stop after " + std::to_string(stop));
            const Outcome got = read(path, threads, 1, true, stop);
            EXPECT_FALSE(got.ok);
            EXPECT_EQ(int(got.code), int(ErrorCode::Cancelled));
            // The first `stop` chunks' text (a batch is a chunk here), nothing after it.
            size_t at = 0;
            for (size_t i = 0; i < stop; ++i) at += whole.writes.at(i);
            EXPECT_TRUE(got.text == whole.text.substr(0, at));
        }
}

TEST(ChunksInOrder, StrictReadersAndImagesAreReadOnTheCallingThread) {
    test::ScratchDir dir;
    const std::string base = writeTrace(dir.file("t.poolscope"), 40000);
    // A strict reader stops at the first damaged chunk, after the text of those before it.
    const std::string damaged = dir.file("d.poolscope");
    std::filesystem::copy_file(base, damaged);
    test::execSql(damaged, "UPDATE event_chunks SET crc = -1 WHERE id = 4");
    const Outcome strictRef = read(damaged, 1, 1, false);
    EXPECT_FALSE(strictRef.ok);
    EXPECT_EQ(int(strictRef.code), int(ErrorCode::Corrupt));
    EXPECT_NE(strictRef.text, "");
    const Outcome strict = read(damaged, 4, 1, false);
    expectSame(strict, strictRef);
    EXPECT_EQ(strict.formatThreads, 1u);

    // A trace held in memory has no file for the threads' readers.
    std::ifstream in(base, std::ios::binary);
    const std::string image((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    auto r = TraceReader::openImage(image, "image");
    ASSERT_TRUE(r);
    (*r)->setSkipDamaged(true);
    std::string text;
    ChunkTextOptions o;
    o.threads = 4;
    ASSERT_TRUE(formatChunksInOrder(
        **r,
        [](const std::vector<Event>& chunk, std::string& t) {
            for (const Event& e : chunk)
                t += std::to_string(e.seq) + " " + std::to_string(e.tsNs) + " " +
                     std::to_string(int(e.kind)) + "\n";
        },
        [&](const std::string& t) {
            text += t;
            return true;
        },
        o));
    EXPECT_TRUE(text == read(base, 1, 1).text);
}


std::string readFile(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// The two users as a user runs them: `dump` (each format, with names and samples) prints the
// same bytes and warnings, and exits the same, on any number of threads, and the CSV export
// writes the same file; on a trace with two damaged chunks among 20-odd.
TEST(ChunksInOrder, DumpAndTheCsvExportAreTheSameOnAnyNumberOfThreads) {
    test::ScratchDir dir;
    const std::string path = writeTrace(dir.file("t.poolscope"), 90000);
    test::execSql(path, "UPDATE event_chunks SET crc = -1 WHERE id IN (3, 11)");
    for (const std::string opts : {"", " --names --samples", " --format csv --names"}) {
        SCOPED_TRACE("dump" + opts);
        const auto one = test::runCli("dump --threads 1" + opts + " " + path);
        EXPECT_EQ(one.exitCode, exitCodeFor(ErrorCode::Corrupt)) << "damage is a warning and its exit code";
        EXPECT_NE(one.output.find("is damaged"), std::string::npos);
        EXPECT_GT(std::count(one.output.begin(), one.output.end(), '\n'), 80000);
        for (const char* threads : {"2", "5"}) {
            const auto many = test::runCli(std::string("dump --threads ") + threads + opts + " " + path);
            EXPECT_EQ(many.exitCode, one.exitCode);
            EXPECT_TRUE(many.output == one.output) << "the output differs on " << threads << " threads";
        }
    }
    auto r = TraceReader::open(path);
    ASSERT_TRUE(r);
    (*r)->setSkipDamaged(true);
    TraceReportOptions o;
    o.report.topN = 0;
    o.advice = false;
    auto pass = reportTrace(**r, o);
    ASSERT_TRUE(pass);
    std::string csv[2];
    for (unsigned threads : {1u, 4u}) {
        const std::string file = dir.file("t" + std::to_string(threads) + ".csv");
        std::FILE* f = std::fopen(file.c_str(), "wb");
        ASSERT_TRUE(f);
        ChunkTextOptions t;
        t.threads = threads;
        EXPECT_TRUE(interop::writeEventsCsv(**r, pass->report.names, pass->report.t0, StackTables{}, f, t));
        std::fclose(f);
        csv[threads == 1 ? 0 : 1] = readFile(file);
    }
    EXPECT_GT(csv[0].size(), 1000000u);
    EXPECT_TRUE(csv[0] == csv[1]) << "the CSV differs on 4 threads";
}


// The lines of a text, and those whose value in a field pass a test (the header line kept).
std::vector<std::string> linesOf(const std::string& text) {
    std::vector<std::string> out;
    size_t at = 0;
    for (size_t nl; (nl = text.find('\n', at)) != std::string::npos; at = nl + 1) out.push_back(text.substr(at, nl - at));
    return out;
}

std::string joined(const std::vector<std::string>& lines) {
    std::string out;
    for (const std::string& l : lines) out += l + '\n';
    return out;
}

// `dump --from/--to` and `export --format csv --from/--to`: the rows of the whole dump (and the
// whole CSV) whose time since the trace's start lies in [from, to), on one thread and on
// several; a range holding a damaged chunk warns and fails as a whole dump does, one beside it
// reads no damage; ranges that cannot be are refused in words.
TEST(ChunksInOrder, ATimeRangeIsTheWholeDumpsRowsInIt) {
    test::ScratchDir dir;
    const std::string path = writeTrace(dir.file("t.poolscope"), 90000);
    test::execSql(path, "UPDATE event_chunks SET crc = -1 WHERE id = 11");
    std::vector<ChunkHeaderInfo> h;
    {
        auto r = TraceReader::open(path);
        ASSERT_TRUE(r);
        auto hs = (*r)->chunkHeaders();
        ASSERT_TRUE(hs);
        h = *hs;
    }
    ASSERT_GT(h.size(), 25u);
    ASSERT_EQ(h[10].id, 11);
    const int64_t t0 = h[0].tMin; // no samples: the first event
    const std::string wholeFile = dir.file("whole.jsonl"), wholeCsv = dir.file("whole.csv");
    // stdout to a file; stderr (and the exit code) to runCli.
    const std::string err = dir.file("stderr");
    auto toFile = [&](const std::string& file) {
        return " > '" + file + "' 2> '" + err + "'; rc=$?; cat '" + err + "'; exit $rc";
    };
    ASSERT_EQ(test::runCli("dump --threads 1 '" + path + "'" + toFile(wholeFile)).exitCode,
              exitCodeFor(ErrorCode::Corrupt));
    ASSERT_EQ(test::runCli("export --format csv --threads 1 '" + path + "' -o '" + wholeCsv + "'").exitCode,
              exitCodeFor(ErrorCode::Corrupt));
    const std::vector<std::string> whole = linesOf(readFile(wholeFile)), csv = linesOf(readFile(wholeCsv));
    ASSERT_GT(whole.size(), 80000u);
    ASSERT_EQ(csv.size(), whole.size() + 1);
    auto tsOf = [](const std::string& line) {
        const size_t at = line.find("\"ts_ns\":");
        return std::stoll(line.substr(at + 8));
    };
    auto csvT = [](const std::string& line) { // the t_ns column: time since the start
        const size_t a = line.find(',', line.find(',') + 1);
        return std::stoll(line.substr(a + 1));
    };
    struct Range {
        int64_t from, to; // since t0
        bool damaged;
    };
    for (const Range& q : {Range{h[10].tMin - t0 - 5000, h[10].tMax - t0 + 7000, true},
                           Range{h[20].tMin - t0 + 333, h[25].tMax - t0, false}}) {
        SCOPED_TRACE(std::to_string(q.from) + "ns.." + std::to_string(q.to) + "ns");
        std::vector<std::string> want, wantCsv{csv[0]};
        for (const std::string& l : whole)
            if (tsOf(l) - t0 >= q.from && tsOf(l) - t0 < q.to) want.push_back(l);
        for (size_t i = 1; i < csv.size(); ++i)
            if (csvT(csv[i]) >= q.from && csvT(csv[i]) < q.to) wantCsv.push_back(csv[i]);
        ASSERT_GT(want.size(), q.damaged ? 10u : 1000u); // the damaged chunk's rows are not there
        ASSERT_EQ(wantCsv.size(), want.size() + 1);
        const std::string range = " --from " + std::to_string(q.from) + "ns --to " + std::to_string(q.to) + "ns '" + path + "'";
        const int code = q.damaged ? exitCodeFor(ErrorCode::Corrupt) : 0;
        for (const char* threads : {"1", "3"}) {
            SCOPED_TRACE(std::string("threads ") + threads);
            const std::string out = dir.file("range.jsonl"), outCsv = dir.file("range.csv");
            const auto d = test::runCli(std::string("dump --threads ") + threads + range + toFile(out));
            EXPECT_EQ(d.exitCode, code) << d.output;
            EXPECT_EQ(d.output.find("is damaged") != std::string::npos, q.damaged) << d.output;
            EXPECT_TRUE(readFile(out) == joined(want)) << "the dump differs from the whole dump's rows in the range";
            const auto c = test::runCli(std::string("export --format csv --threads ") + threads + range + " -o '" + outCsv + "'");
            // The exports' names come from a pass over the whole trace, which meets the damage.
            EXPECT_EQ(c.exitCode, exitCodeFor(ErrorCode::Corrupt)) << c.output;
            EXPECT_TRUE(readFile(outCsv) == joined(wantCsv)) << "the CSV differs from the whole CSV's rows in the range";
        }
        if (!q.damaged) {
            const std::string json = dir.file("range.json");
            const auto p = test::runCli("export" + range + " -o '" + json + "'");
            EXPECT_EQ(p.exitCode, exitCodeFor(ErrorCode::Corrupt)) << p.output;
            EXPECT_NE(p.output.find("the range exported: +"), std::string::npos) << p.output;
            EXPECT_GT(readFile(json).size(), 10000u);
        }
    }
    struct Refused {
        std::string args, says;
    };
    for (const Refused& bad : {Refused{"dump --from 10min '" + path + "'", "after the trace's end"},
                               Refused{"dump --from 2ms --to 1ms '" + path + "'", "is not before --to"},
                               Refused{"export --format csv --from 1s --to 1s '" + path + "' -o /dev/null", "is not before --to"},
                               Refused{"dump --stacks --from 1ms '" + path + "'", "have no time"},
                               Refused{"export --from 1ms '" + path + "' '" + path + "' -o /dev/null", "take one trace"}}) {
        const auto run = test::runCli(bad.args);
        EXPECT_EQ(run.exitCode, exitCodeFor(ErrorCode::InvalidArgument)) << bad.args << ": " << run.output;
        EXPECT_NE(run.output.find(bad.says), std::string::npos) << bad.args << ": " << run.output;
    }
    const auto garbage = test::runCli("dump --from 1x '" + path + "'");
    EXPECT_NE(garbage.exitCode, 0);
    EXPECT_NE(garbage.output.find("not a time"), std::string::npos) << garbage.output;
}

// A dump whose output cannot be written (a full disk: /dev/full) says so and fails; one whose
// reader went away (| head) ends quietly, as before.
TEST(ChunksInOrder, ADumpToAFullDiskSaysSo) {
    if (!std::filesystem::exists("/dev/full")) GTEST_SKIP() << "no /dev/full here";
    test::ScratchDir dir;
    const std::string path = writeTrace(dir.file("t.poolscope"), 30000);
    for (const char* threads : {"1", "4"}) {
        SCOPED_TRACE(std::string("threads ") + threads);
        const std::string cmd = std::string("'") + POOLSCOPE_CLI + "' dump --threads " + threads + " '" + path +
                                "' 2>&1 >/dev/full";
        FILE* f = ::popen(cmd.c_str(), "r");
        ASSERT_TRUE(f);
        std::string err;
        char buf[4096];
        for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) err.append(buf, n);
        const int status = ::pclose(f);
        ASSERT_TRUE(WIFEXITED(status));
        EXPECT_EQ(WEXITSTATUS(status), exitCodeFor(ErrorCode::WriteFailed)) << err;
        EXPECT_NE(err.find("could not write the dump: No space left on device"), std::string::npos) << err;
    }
    const auto head = test::runCli("dump --threads 4 '" + path + "' | head -c 100 > /dev/null; echo \"status ${PIPESTATUS[0]}\"");
    EXPECT_EQ(head.output.find("could not write"), std::string::npos) << head.output;
}

} // namespace
} // namespace poolscope
