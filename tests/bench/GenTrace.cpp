// Writes a synthetic trace (SyntheticTrace.h, the benchmarks' training-loop generator) holding
// at least N allocations, for the size and read benchmarks that need a file of a given size
// (tests/bench/vs_heaptrack.sh). Prints the events, allocations, bytes and write rate.
//
//   poolscope_bench_gentrace OUT.poolscope N_ALLOCATIONS [--plain] [--codec5] [--variety]
//     --plain: codec 4. --codec5: codec 5 instead of the newest (write-rate comparisons).
//     --variety: side streams in bursts, a third pool and out-of-memory spikes
//     (SyntheticTrace's variety), for the events-table filter benchmark (FilterBench.cpp).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>

#include "SyntheticTrace.h"
#include "poolscope/EventCodec.h"
#include "poolscope/TraceWriter.h"

using namespace poolscope;

int main(int argc, char** argv) {
    if (argc < 3) {
        std::fprintf(stderr, "usage: %s OUT.poolscope N_ALLOCATIONS [--plain] [--codec5] [--variety]\n",
                     argv[0]);
        return 2;
    }
    const std::string out = argv[1];
    const uint64_t allocs = std::strtoull(argv[2], nullptr, 10);
    WriterOptions options;
    options.synchronousOff = true;
    bool variety = false;
    for (int i = 3; i < argc; ++i) {
        if (std::strcmp(argv[i], "--plain") == 0) options.compressEvents = false;
        else if (std::strcmp(argv[i], "--codec5") == 0) options.zstdCodec = kZstdCodecVersion;
        else if (std::strcmp(argv[i], "--variety") == 0) variety = true;
        else {
            std::fprintf(stderr, "unknown option %s\n", argv[i]);
            return 2;
        }
    }
    auto w = TraceWriter::create(out, options);
    if (!w) {
        std::fprintf(stderr, "%s\n", w.error().message.c_str());
        return 1;
    }
    (*w)->setProcess(ProcessInfo{12345, "synthetic training loop (bench generator)", 0, 0, "bench",
                                 13000, 0, "bench", 0});
    (*w)->addDevice(DeviceInfo{0, "synthetic GPU", 141ull << 30, ""});
    for (uint64_t pool : bench::SyntheticTrace::kPools) {
        PoolInfo p;
        p.handle = pool;
        p.device = 0;
        p.kind = pool == bench::SyntheticTrace::kPools[0] ? PoolKind::Default : PoolKind::Explicit;
        (*w)->addPool(p);
    }
    for (uint64_t stream : bench::SyntheticTrace::kStreams) {
        StreamInfo si;
        si.handle = stream;
        si.device = 0;
        (*w)->addStream(si);
    }
    if (variety) {
        PoolInfo p;
        p.handle = bench::SyntheticTrace::kSidePool;
        p.device = 0;
        p.kind = PoolKind::Explicit;
        (*w)->addPool(p);
        for (uint64_t stream : bench::SyntheticTrace::kSideStreams) {
            StreamInfo si;
            si.handle = stream;
            si.device = 0;
            (*w)->addStream(si);
        }
    }
    bench::SyntheticTrace gen(42, variety);
    std::vector<Event> batch;
    uint64_t nAllocs = 0, nEvents = 0;
    double seconds = 0;
    while (nAllocs < allocs) {
        batch.clear();
        while (batch.size() < 65536 && nAllocs < allocs) {
            const size_t from = batch.size();
            gen.step(batch);
            for (size_t i = from; i < batch.size(); ++i) {
                nAllocs += batch[i].kind == EventKind::Alloc;
                nEvents += batch[i].kind != EventKind::Sample;
            }
        }
        const auto t0 = std::chrono::steady_clock::now();
        if (!(*w)->append(batch) || !(*w)->commit()) return 1;
        seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
    if (Status s = (*w)->close(); !s) {
        std::fprintf(stderr, "%s\n", s.error().message.c_str());
        return 1;
    }
    const auto bytes = std::filesystem::file_size(out);
    std::printf("events %llu allocations %llu bytes %llu bytes_per_event %.2f write_Mev_per_s %.2f\n",
                static_cast<unsigned long long>(nEvents), static_cast<unsigned long long>(nAllocs),
                static_cast<unsigned long long>(bytes), double(bytes) / double(nEvents),
                double(nEvents) / seconds / 1e6);
    return 0;
}
