// Where a trace's bytes go, stream by stream, in the zstd codecs 5 and 6 (EventCodec.h), and how
// fast each encodes and decodes (issue #15's 6-bytes-an-event target). A plain program printing
// a table (not a test).
//
//   poolscope_bench_codec_streams TRACE...        each file's chunks, as stored
//   poolscope_bench_codec_streams --gen N_ALLOCS  the bench generator (SyntheticTrace.h)
//
// Per file: for each codec the chunk bytes an event and each stream's bytes an event, raw (before
// zstd) and compressed alone; then encode and decode ns an event (median of 9 passes, the two
// codecs alternating, CPU time of this thread).
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <time.h>
#include <vector>

#include "SyntheticTrace.h"
#include "poolscope/EventCodec.h"
#include "poolscope/Schema.h"
#include "poolscope/TraceReader.h"
#include "poolscope/Zstd.h"

using namespace poolscope;

namespace {

double cpuSeconds() {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

const char* const kStreamNames[] = {"headers", "seq", "tsNs", "stream", "pool", "ptr",
                                    "size", "aux", "reserved", "used", "tid", "correlation",
                                    "result", "packed", "sites", "refs"};

double median(std::vector<double> t) {
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}

void report(const std::string& name, const std::vector<std::vector<Event>>& chunks) {
    uint64_t n = 0;
    for (const auto& c : chunks) n += c.size();
    std::printf("== %s: %llu events, %zu chunks\n", name.c_str(), static_cast<unsigned long long>(n),
                chunks.size());
    if (n == 0) return;
    const int versions[2] = {kZstdCodecVersion, kBlocksCodecVersion};
    std::vector<std::string> data[2];
    std::vector<double> enc[2], dec[2], unz[2];
    for (int v = 0; v < 2; ++v) {
        data[v].resize(chunks.size());
        for (size_t i = 0; i < chunks.size(); ++i)
            if (!encodeEvents(chunks[i], data[v][i], versions[v])) std::abort();
    }
    // The two codecs alternate, pass by pass, so that a machine's load weighs on both alike.
    std::vector<Event> out;
    for (int pass = 0; pass < 9; ++pass) {
        for (int v = 0; v < 2; ++v) {
            std::string tmp;
            double t0 = cpuSeconds();
            for (const auto& c : chunks) {
                tmp.clear();
                encodeEvents(c, tmp, versions[v]);
            }
            enc[v].push_back((cpuSeconds() - t0) * 1e9 / double(n));
            t0 = cpuSeconds();
            for (size_t i = 0; i < chunks.size(); ++i) {
                out.clear();
                std::string why;
                if (!decodeEvents(data[v][i], chunks[i].size(), out, versions[v], &why)) {
                    std::fprintf(stderr, "decode failed: %s\n", why.c_str());
                    std::abort();
                }
                if (std::memcmp(out.data(), chunks[i].data(), out.size() * sizeof(Event)) != 0) {
                    std::fprintf(stderr, "codec %d does not round-trip chunk %zu\n", versions[v], i);
                    std::abort();
                }
            }
            dec[v].push_back((cpuSeconds() - t0) * 1e9 / double(n));
            t0 = cpuSeconds(); // of which zstd
            std::string plain, why;
            for (const std::string& d : data[v]) zstd::decompress(d, size_t{1} << 30, plain, why);
            unz[v].push_back((cpuSeconds() - t0) * 1e9 / double(n));
        }
    }
    for (int v = 0; v < 2; ++v) {
        std::vector<detail::StreamBytes> sum;
        size_t bytes = 0;
        for (size_t i = 0; i < chunks.size(); ++i) {
            const auto s = detail::streamBytes(chunks[i], versions[v]);
            if (sum.size() < s.size()) sum.resize(s.size());
            for (size_t k = 0; k < s.size(); ++k) {
                sum[k].raw += s[k].raw;
                sum[k].packed += s[k].packed;
            }
            bytes += data[v][i].size();
        }
        std::printf("codec %d: %.3f bytes/event; encode %.0f ns/event, decode %.1f ns/event "
                    "(zstd %.1f)\n", versions[v], double(bytes) / double(n), median(enc[v]),
                    median(dec[v]), median(unz[v]));
        std::printf("  %-12s %9s %9s\n", "stream", "raw B/ev", "zstd B/ev");
        for (size_t k = 0; k < sum.size(); ++k)
            std::printf("  %-12s %9.3f %9.3f\n", kStreamNames[k], double(sum[k].raw) / double(n),
                        double(sum[k].packed) / double(n));
    }
}

} // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: %s TRACE... | --gen N_ALLOCS\n", argv[0]);
        return 2;
    }
    if (std::strcmp(argv[1], "--gen") == 0 && argc == 3) {
        const uint64_t allocs = std::strtoull(argv[2], nullptr, 10);
        bench::SyntheticTrace gen(42); // gentrace's seed
        std::vector<Event> all;
        uint64_t nAllocs = 0;
        while (nAllocs < allocs) {
            const size_t from = all.size();
            gen.step(all);
            for (size_t i = from; i < all.size(); ++i) nAllocs += all[i].kind == EventKind::Alloc;
        }
        // The writer keeps samples out of the chunks.
        std::erase_if(all, [](const Event& e) { return e.kind == EventKind::Sample; });
        std::vector<std::vector<Event>> chunks;
        for (size_t i = 0; i < all.size(); i += schema::kChunkEvents)
            chunks.emplace_back(all.begin() + static_cast<long>(i),
                                all.begin() + static_cast<long>(std::min(all.size(), i + schema::kChunkEvents)));
        report("generator " + std::string(argv[2]) + " allocations", chunks);
        return 0;
    }
    for (int a = 1; a < argc; ++a) {
        auto r = TraceReader::open(argv[a]);
        if (!r) {
            std::fprintf(stderr, "%s\n", r.error().message.c_str());
            return 1;
        }
        std::vector<std::vector<Event>> chunks;
        if (!(*r)->forEachChunk([&](std::vector<Event>& c) { chunks.push_back(c); return true; }))
            return 1;
        std::string name = argv[a];
        name = name.substr(name.find_last_of('/') + 1);
        report(name, chunks);
    }
    return 0;
}
