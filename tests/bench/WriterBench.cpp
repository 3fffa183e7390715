// Writer throughput: TraceWriter::append against the raw SQLite floor, in the same binary.
//
// The floor inserts the very rows TraceWriter produces (event_chunks rows of the same schema,
// schema::createSql(), with the blobs already encoded) through one prepared statement inside
// one transaction: what SQLite itself costs. TraceWriter's extra is encoding, chunk bookkeeping
// and the per-kind counts. A third benchmark, one row per event in a plain table, is kept for
// reference: it is the design the chunked format replaced. BM_EncodeEvents/N and
// BM_DecodeEvents/N time the chunk codec alone in version N (6: written, zstd; 5: its
// predecessor; 4: written without libzstd; 2 and 3: older). BM_WriterSummariesCost: the writer with and without the
// per-chunk pool summaries, and the file sizes; BM_WriterChunkHeadersCost the same for the
// chunk_headers table.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <sqlite3.h>
#include <string>
#include <time.h>
#include <vector>

#include "SyntheticTrace.h"
#include "poolscope/EventCodec.h"
#include "poolscope/Schema.h"
#include "poolscope/TraceWriter.h"

namespace {

using namespace poolscope;
using Clock = std::chrono::steady_clock;

// This thread's CPU seconds (user + system: SQLite's writes are syscalls on this thread). On a
// machine shared with other jobs the wall clock also counts their time slices; CPU time does not.
double threadCpu() {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

struct Times {
    double wall = 0;
    double cpu = 0;
};

constexpr size_t kEvents = 1'000'000;
constexpr size_t kAppendBatch = 1024; // what the collector's writer thread drains at a time

const std::vector<Event>& workload() {
    static const std::vector<Event> events = [] {
        std::vector<Event> all = bench::SyntheticTrace(7).generate(kEvents);
        // Events only: samples go to another table and would blur the comparison.
        std::erase_if(all, [](const Event& e) { return e.kind == EventKind::Sample; });
        all.resize(kEvents);
        return all;
    }();
    return events;
}

std::string scratchPath(const char* name) {
    std::filesystem::create_directories(POOLSCOPE_BENCH_DIR "/scratch");
    return std::string(POOLSCOPE_BENCH_DIR "/scratch/") + name;
}

void removeDb(const std::string& path) {
    for (const char* suffix : {"", "-wal", "-shm", "-journal"})
        std::filesystem::remove(path + suffix);
}

void exec(sqlite3* db, const std::string& sql) {
    char* err = nullptr;
    if (sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
        std::fprintf(stderr, "sqlite: %s\n", err ? err : "?");
        std::abort();
    }
}

// The same connection set-up as TraceWriter (page size, WAL, synchronous=NORMAL).
sqlite3* openLikeWriter(const std::string& path, bool withSchema) {
    removeDb(path);
    sqlite3* db = nullptr;
    sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr);
    exec(db, "PRAGMA page_size=2048; PRAGMA cache_size=-16384; PRAGMA journal_mode=WAL;"
             "PRAGMA synchronous=NORMAL;");
    if (withSchema) exec(db, std::string(schema::createSql()));
    return db;
}

struct Chunk {
    uint64_t firstSeq, lastSeq;
    int64_t tMin, tMax;
    uint64_t count, kinds;
    std::string data;
};

const std::vector<Chunk>& encodedChunks() {
    static const std::vector<Chunk> chunks = [] {
        std::vector<Chunk> out;
        const auto& ev = workload();
        for (size_t i = 0; i < ev.size(); i += schema::kChunkEvents) {
            const size_t n = std::min(schema::kChunkEvents, ev.size() - i);
            std::span<const Event> run(ev.data() + i, n);
            Chunk c{run.front().seq, run.back().seq, run.front().tsNs, run.front().tsNs, n, 0, {}};
            for (const Event& e : run) {
                c.tMin = std::min(c.tMin, e.tsNs);
                c.tMax = std::max(c.tMax, e.tsNs);
                c.kinds |= uint64_t{1} << static_cast<unsigned>(e.kind);
            }
            encodeEvents(run, c.data, kEventCodecVersion); // what TraceWriter writes
            out.push_back(std::move(c));
        }
        return out;
    }();
    return chunks;
}

// Seconds for TraceWriter to append the workload and commit it; bytes: the closed file's size.
Times writerOnce(bool poolSummaries = true, uint64_t* bytes = nullptr, bool chunkHeaders = true) {
    const std::string path = scratchPath("writer.poolscope");
    WriterOptions options;
    options.poolSummaries = poolSummaries;
    options.chunkHeaders = chunkHeaders;
    auto w = TraceWriter::create(path, options);
    if (!w) std::abort();
    const auto& ev = workload();
    const double c0 = threadCpu();
    const auto t0 = Clock::now();
    for (size_t i = 0; i < ev.size(); i += kAppendBatch)
        if (!(*w)->append(std::span<const Event>(ev.data() + i, std::min(kAppendBatch, ev.size() - i))))
            std::abort();
    if (!(*w)->commit()) std::abort();
    const Times t{std::chrono::duration<double>(Clock::now() - t0).count(), threadCpu() - c0};
    (void)(*w)->close();
    if (bytes) *bytes = std::filesystem::file_size(path);
    removeDb(path);
    return t;
}

// Seconds for raw SQLite to insert the same chunk rows: one statement, one transaction.
Times floorOnce() {
    const std::string path = scratchPath("floor.poolscope");
    sqlite3* db = openLikeWriter(path, true);
    const auto& chunks = encodedChunks();
    sqlite3_stmt* st = nullptr;
    sqlite3_prepare_v2(db,
                       "INSERT INTO event_chunks(first_seq,last_seq,t_min,t_max,count,kinds,codec,"
                       "data) VALUES(?,?,?,?,?,?,?,?)",
                       -1, &st, nullptr);
    const double c0 = threadCpu();
    const auto t0 = Clock::now();
    exec(db, "BEGIN");
    for (const Chunk& c : chunks) {
        sqlite3_bind_int64(st, 1, static_cast<int64_t>(c.firstSeq));
        sqlite3_bind_int64(st, 2, static_cast<int64_t>(c.lastSeq));
        sqlite3_bind_int64(st, 3, c.tMin);
        sqlite3_bind_int64(st, 4, c.tMax);
        sqlite3_bind_int64(st, 5, static_cast<int64_t>(c.count));
        sqlite3_bind_int64(st, 6, static_cast<int64_t>(c.kinds));
        sqlite3_bind_int(st, 7, kEventCodecVersion);
        sqlite3_bind_blob64(st, 8, c.data.data(), c.data.size(), SQLITE_STATIC);
        if (sqlite3_step(st) != SQLITE_DONE) std::abort();
        sqlite3_reset(st);
    }
    exec(db, "COMMIT");
    const Times t{std::chrono::duration<double>(Clock::now() - t0).count(), threadCpu() - c0};
    sqlite3_finalize(st);
    sqlite3_close(db);
    removeDb(path);
    return t;
}

// Seconds to insert one row per event (17 integer columns), one statement, one transaction.
double rowPerEventOnce() {
    const std::string path = scratchPath("rows.db");
    sqlite3* db = openLikeWriter(path, false);
    exec(db, "CREATE TABLE events(seq INTEGER PRIMARY KEY, ts_ns INTEGER, kind INTEGER, variant "
             "INTEGER, tid INTEGER, device INTEGER, correlation INTEGER, result INTEGER, stream "
             "INTEGER, pool INTEGER, ptr INTEGER, size INTEGER, aux INTEGER, attr INTEGER, flags "
             "INTEGER, reserved INTEGER, used INTEGER)");
    sqlite3_stmt* st = nullptr;
    sqlite3_prepare_v2(db, "INSERT INTO events VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", -1, &st,
                       nullptr);
    const auto t0 = Clock::now();
    exec(db, "BEGIN");
    for (const Event& e : workload()) {
        const int64_t v[17] = {static_cast<int64_t>(e.seq), e.tsNs, static_cast<int64_t>(e.kind),
                               e.variant, e.tid, e.device, e.correlation, e.result,
                               static_cast<int64_t>(e.stream), static_cast<int64_t>(e.pool),
                               static_cast<int64_t>(e.ptr), static_cast<int64_t>(e.size),
                               static_cast<int64_t>(e.aux), e.attr, e.flags,
                               static_cast<int64_t>(e.reserved), static_cast<int64_t>(e.used)};
        for (int i = 0; i < 17; ++i) sqlite3_bind_int64(st, i + 1, v[i]);
        if (sqlite3_step(st) != SQLITE_DONE) std::abort();
        sqlite3_reset(st);
    }
    exec(db, "COMMIT");
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    sqlite3_finalize(st);
    sqlite3_close(db);
    removeDb(path);
    return s;
}

void report(benchmark::State& state, double seconds) { state.SetIterationTime(seconds); }

void BM_TraceWriterAppend(benchmark::State& state) {
    workload();
    for (auto _ : state) report(state, writerOnce().wall);
    state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * kEvents));
}

void BM_RawSqliteFloor(benchmark::State& state) {
    encodedChunks();
    for (auto _ : state) report(state, floorOnce().wall);
    state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * kEvents));
}

void BM_RowPerEventReference(benchmark::State& state) {
    workload();
    for (auto _ : state) report(state, rowPerEventOnce());
    state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * kEvents));
}

// Writer and floor alternated in one loop (the machine is shared: alternating cancels drift),
// best of each: the ratio the target is stated in, by wall clock and by CPU time.
void BM_WriterVsFloor(benchmark::State& state) {
    encodedChunks();
    Times bestW{1e9, 1e9}, bestF{1e9, 1e9};
    for (auto _ : state) {
        const Times w = writerOnce();
        const Times f = floorOnce();
        bestW = {std::min(bestW.wall, w.wall), std::min(bestW.cpu, w.cpu)};
        bestF = {std::min(bestF.wall, f.wall), std::min(bestF.cpu, f.cpu)};
        state.SetIterationTime(w.wall);
    }
    const double n = static_cast<double>(kEvents);
    state.counters["writer_ev_per_s"] = n / bestW.wall;
    state.counters["floor_ev_per_s"] = n / bestF.wall;
    state.counters["ratio_wall"] = bestF.wall / bestW.wall;
    state.counters["writer_ev_per_cpu_s"] = n / bestW.cpu;
    state.counters["floor_ev_per_cpu_s"] = n / bestF.cpu;
    state.counters["ratio_cpu"] = bestF.cpu / bestW.cpu;
    size_t bytes = 0;
    for (const Chunk& c : encodedChunks()) bytes += c.data.size();
    state.counters["bytes_per_event"] = static_cast<double>(bytes) / n;
}

// The per-chunk pool summaries' cost (issue #15): the writer with and without them, alternated
// in one loop, best of each, and the closed files' sizes per event.
void BM_WriterSummariesCost(benchmark::State& state) {
    workload();
    Times bestWith{1e9, 1e9}, bestWithout{1e9, 1e9};
    uint64_t bytesWith = 0, bytesWithout = 0;
    for (auto _ : state) {
        const Times a = writerOnce(true, &bytesWith);
        const Times b = writerOnce(false, &bytesWithout);
        bestWith = {std::min(bestWith.wall, a.wall), std::min(bestWith.cpu, a.cpu)};
        bestWithout = {std::min(bestWithout.wall, b.wall), std::min(bestWithout.cpu, b.cpu)};
        state.SetIterationTime(a.wall);
    }
    const double n = static_cast<double>(kEvents);
    state.counters["with_ev_per_s"] = n / bestWith.wall;
    state.counters["without_ev_per_s"] = n / bestWithout.wall;
    state.counters["ratio_wall"] = bestWithout.wall / bestWith.wall;
    state.counters["with_ev_per_cpu_s"] = n / bestWith.cpu;
    state.counters["without_ev_per_cpu_s"] = n / bestWithout.cpu;
    state.counters["ratio_cpu"] = bestWithout.cpu / bestWith.cpu;
    state.counters["file_bytes_per_event_with"] = static_cast<double>(bytesWith) / n;
    state.counters["file_bytes_per_event_without"] = static_cast<double>(bytesWithout) / n;
}

// The chunk_headers table's cost (issue #15): the writer with and without it, alternated in one
// loop, best of each, and the closed files' sizes per event.
void BM_WriterChunkHeadersCost(benchmark::State& state) {
    workload();
    Times bestWith{1e9, 1e9}, bestWithout{1e9, 1e9};
    uint64_t bytesWith = 0, bytesWithout = 0;
    for (auto _ : state) {
        const Times a = writerOnce(true, &bytesWith, true);
        const Times b = writerOnce(true, &bytesWithout, false);
        bestWith = {std::min(bestWith.wall, a.wall), std::min(bestWith.cpu, a.cpu)};
        bestWithout = {std::min(bestWithout.wall, b.wall), std::min(bestWithout.cpu, b.cpu)};
        state.SetIterationTime(a.wall);
    }
    const double n = static_cast<double>(kEvents);
    state.counters["with_ev_per_s"] = n / bestWith.wall;
    state.counters["without_ev_per_s"] = n / bestWithout.wall;
    state.counters["ratio_wall"] = bestWithout.wall / bestWith.wall;
    state.counters["with_ev_per_cpu_s"] = n / bestWith.cpu;
    state.counters["without_ev_per_cpu_s"] = n / bestWithout.cpu;
    state.counters["ratio_cpu"] = bestWithout.cpu / bestWith.cpu;
    state.counters["file_bytes_per_event_with"] = static_cast<double>(bytesWith) / n;
    state.counters["file_bytes_per_event_without"] = static_cast<double>(bytesWithout) / n;
}

// TraceWriter's own work on top of the floor, isolated: the chunk codec, per version (range(0)).
// Version 3 goes through EventEncoder, one append per event, as TraceWriter does; version 2
// (the previous codec, still read) through encodeEvents into a std::string, as the writer did.
void BM_EncodeEvents(benchmark::State& state) {
    const int version = static_cast<int>(state.range(0));
    const auto& ev = workload();
    std::string out;
    EventEncoder enc, enc5(kZstdCodecVersion), enc6(kBlocksCodecVersion);
    size_t bytes = 0;
    for (auto _ : state) {
        bytes = 0;
        for (size_t i = 0; i < ev.size(); i += schema::kChunkEvents) {
            std::span<const Event> run(ev.data() + i, std::min(schema::kChunkEvents, ev.size() - i));
            if (version >= 4) {
                EventEncoder& e = version == 6 ? enc6 : version == 5 ? enc5 : enc;
                e.reset();
                for (const Event& ev1 : run) e.append(ev1);
                const std::string_view d = e.finish();
                benchmark::DoNotOptimize(d.data());
                bytes += d.size();
            } else if (version == 3) {
                enc.reset();
                for (const Event& e : run) enc.append(e);
                benchmark::DoNotOptimize(enc.data().data());
                bytes += enc.size();
            } else {
                out.clear();
                encodeEvents(run, out, version);
                benchmark::DoNotOptimize(out.data());
                bytes += out.size();
            }
        }
    }
    state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * kEvents));
    state.counters["bytes_per_event"] = static_cast<double>(bytes) / kEvents;
}

// The reader's side: every chunk of the workload decoded into a reused vector, as
// TraceReader::forEachEvent does (the timeline loader decodes every chunk of a trace).
void BM_DecodeEvents(benchmark::State& state) {
    const int version = static_cast<int>(state.range(0));
    const auto& ev = workload();
    std::vector<std::string> chunks;
    for (size_t i = 0; i < ev.size(); i += schema::kChunkEvents) {
        chunks.emplace_back();
        encodeEvents(std::span<const Event>(ev.data() + i,
                                            std::min(schema::kChunkEvents, ev.size() - i)),
                     chunks.back(), version);
    }
    std::vector<Event> out;
    for (auto _ : state) {
        size_t left = ev.size();
        for (const std::string& c : chunks) {
            out.clear();
            const size_t n = std::min(schema::kChunkEvents, left);
            if (!decodeEvents(c, n, out, version)) std::abort();
            left -= n;
            benchmark::DoNotOptimize(out.data());
        }
    }
    state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * kEvents));
}

BENCHMARK(BM_TraceWriterAppend)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(5);
BENCHMARK(BM_RawSqliteFloor)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(5);
BENCHMARK(BM_RowPerEventReference)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK(BM_WriterVsFloor)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(7);
BENCHMARK(BM_WriterSummariesCost)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(7);
BENCHMARK(BM_WriterChunkHeadersCost)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(7);
BENCHMARK(BM_EncodeEvents)->Arg(2)->Arg(3)->Arg(4)->Arg(5)->Arg(6)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_DecodeEvents)->Arg(2)->Arg(3)->Arg(4)->Arg(5)->Arg(6)->Unit(benchmark::kMillisecond);

} // namespace

BENCHMARK_MAIN();
