// A trace's chunks formatted on several threads, written in seq order (ChunksInOrder.h).
#include "poolscope/ChunksInOrder.h"

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "ChunkPipe.h"
#include "ChunksInOrderImpl.h"
#include "ChunkScan.h"
#include "poolscope/TimelineBuilder.h"
#include "poolscope/TraceReader.h"
#include "poolscope/view/EventFilter.h"

namespace poolscope {

void TraceReader::takeFindings(const TraceReader& other) const {
    if (&other == this) return;
    std::map<int64_t, TraceDamage> damage;
    std::vector<int64_t> lies;
    {
        std::lock_guard lock(other.mutex_);
        damage = other.chunkDamage_;
        lies = other.copyLies_;
    }
    if (!lies.empty()) distrustCopy_ = true;
    std::lock_guard lock(mutex_);
    for (auto& [id, d] : damage) chunkDamage_.emplace(id, std::move(d));
    for (int64_t id : lies)
        if (std::find(copyLies_.begin(), copyLies_.end(), id) == copyLies_.end()) copyLies_.push_back(id);
    // The first lie is the one named: the first in seq order, as one read finds them.
    if (index_ && copyLies_.size() > 1) {
        std::unordered_map<int64_t, size_t> position;
        for (size_t i = 0; i < index_->chunks.size(); ++i) position.emplace(index_->chunks[i].id, i);
        auto at = [&](int64_t id) {
            auto it = position.find(id);
            return it == position.end() ? std::numeric_limits<size_t>::max() : it->second;
        };
        std::stable_sort(copyLies_.begin(), copyLies_.end(),
                         [&](int64_t a, int64_t b) { return at(a) < at(b); });
    }
}

namespace {

using detail::inOrder;

Status sequential(const TraceReader& reader,
                  const std::function<void(const std::vector<Event>&, std::string&)>& format,
                  const std::function<bool(const std::string&)>& write, const ChunkTextOptions& options) {
    std::string text;
    auto each = [&](std::vector<Event>& chunk) {
        text.clear();
        format(chunk, text);
        return write(text);
    };
    if (!options.ranged()) return reader.forEachChunk(each);
    // The reader's own time-filtered read: the same chunks, damage handled the same way.
    view::EventFilter range;
    range.t0 = options.fromNs;
    range.t1 = options.untilNs;
    return reader.forEachMatchingChunk(range, [&](std::vector<Event>& matches) {
        return matches.empty() || each(matches);
    });
}

// A chunk's events in the range, in place.
void keepRange(std::vector<Event>& chunk, const ChunkTextOptions& options) {
    if (!options.ranged()) return;
    chunk.erase(std::remove_if(chunk.begin(), chunk.end(),
                               [&](const Event& e) { return e.tsNs < options.fromNs || e.tsNs >= options.untilNs; }),
                chunk.end());
}

unsigned threadsFor(unsigned asked) {
    if (asked != 0) return asked;
    return std::min(std::max(1u, std::thread::hardware_concurrency()), ChunkTextOptions::kMaxThreads);
}

} // namespace

Status formatChunksInOrder(TraceReader& reader,
                           const std::function<void(const std::vector<Event>&, std::string&)>& format,
                           const std::function<bool(const std::string&)>& write,
                           const ChunkTextOptions& options) {
    const unsigned n = threadsFor(options.threads);
    // A strict read stops at the first damaged chunk; the threads' reads skip them.
    if (n <= 1 || !reader.skipDamaged()) return sequential(reader, format, write, options);
    reader.setReuseHeaderScan(true);
    auto chunks = detail::threadedChunks(reader, n, [&](const ChunkHeaderInfo& h) {
        return !options.ranged() || (h.tMin < options.untilNs && h.tMax >= options.fromNs);
    });
    if (!chunks) return chunks.error();
    if (!*chunks) return sequential(reader, format, write, options);

    bool noThreads = false;
    const Status st = inOrder<std::string>(
        reader, (*chunks)->headers, (*chunks)->scan, n, std::max<size_t>(1, options.chunksPerBatch),
        [&](std::vector<Event>& chunk, std::string& text) {
            keepRange(chunk, options);
            format(chunk, text);
        },
        [](std::string&) {}, write, noThreads);
    return noThreads ? sequential(reader, format, write, options) : st;
}

unsigned decodingThreadsBeside() {
    // (Set for the hostile corpus, whose machines may have too few CPUs for the threads.)
    if (const char* n = std::getenv("POOLSCOPE_DECODE_THREADS"))
        return std::clamp(static_cast<unsigned>(std::strtoul(n, nullptr, 10)), 1u, ChunkTextOptions::kMaxThreads);
    if (!BuildOptions::defaultReadAhead()) return 1;
    return std::min(std::thread::hardware_concurrency() - 1, kAutoDecoders);
}

Status decodeChunksInOrder(const TraceReader& reader, const std::function<bool(std::vector<Event>&)>& consume,
                           unsigned threads, bool readAheadAlone, unsigned* decoders) {
    if (decoders) *decoders = 0;
    const unsigned n = threadsFor(threads);
    auto alone = [&] { return detail::forEachChunk(reader, readAheadAlone, consume); };
    // (Without a scan to share, the threads' readers would each scan again.)
    auto chunks = detail::threadedChunks(reader, n);
    if (!chunks) return chunks.error();
    if (!*chunks) return alone();
    const std::vector<ChunkHeaderInfo>& headers = (*chunks)->headers;

    // Decoded buffers go back to the threads once consumed, so that a chunk is decoded into
    // memory already allocated.
    std::mutex sparesMutex;
    std::vector<std::vector<Event>> spares;
    bool noThreads = false;
    const Status st = inOrder<std::vector<Event>>(
        reader, headers, (*chunks)->scan, n, 1,
        [](std::vector<Event>& chunk, std::vector<Event>& part) { part.swap(chunk); },
        [&](std::vector<Event>& part) {
            std::lock_guard lk(sparesMutex);
            if (!spares.empty()) {
                part = std::move(spares.back());
                spares.pop_back();
            }
        },
        [&](std::vector<Event>& chunk) {
            if (chunk.empty()) return true; // its chunk was damaged, and skipped
            const bool go = consume(chunk);
            chunk.clear();
            std::lock_guard lk(sparesMutex);
            spares.push_back(std::move(chunk));
            return go;
        },
        noThreads);
    if (noThreads) return alone();
    if (decoders) *decoders = static_cast<unsigned>(std::min<size_t>(n, headers.size()));
    return st;
}

} // namespace poolscope
