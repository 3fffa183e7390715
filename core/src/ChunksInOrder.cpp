// A trace's chunks formatted on several threads, written in seq order (ChunksInOrder.h).
#include "poolscope/ChunksInOrder.h"

#include <algorithm>
#include <condition_variable>
#include <cstdlib>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "ChunkPipe.h"
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

// The batches' meeting place: each thread hands in its batches' payload (text, or a decoded
// chunk); the calling thread takes them in order. A thread that fails says at which batch (the
// one its failing chunk is in) and what of that batch came before the failure.
template <class Payload>
struct Exchange {
    std::mutex m;
    std::condition_variable changed;
    size_t written = 0;                 // batches taken by the calling thread
    std::map<size_t, Payload> ready;    // batch -> its payload
    size_t failAt = std::numeric_limits<size_t>::max();
    Payload failPart{};
    Error failError;
    bool stop = false;

    void hand(size_t batch, Payload p) {
        {
            std::lock_guard lk(m);
            ready.emplace(batch, std::move(p));
        }
        changed.notify_all();
    }
    void fail(size_t batch, Payload part, Error e) {
        {
            std::lock_guard lk(m);
            if (batch < failAt) {
                failAt = batch;
                failPart = std::move(part);
                failError = std::move(e);
            }
        }
        changed.notify_all();
    }
    // Until the batch may be started (at most `window` batches past the written ones); false
    // once the read stops.
    bool waitTurn(size_t batch, size_t window) {
        std::unique_lock lk(m);
        changed.wait(lk, [&] { return stop || batch < written + window; });
        return !stop;
    }
    bool stopped() {
        std::lock_guard lk(m);
        return stop;
    }
    void stopAll() {
        {
            std::lock_guard lk(m);
            stop = true;
        }
        changed.notify_all();
    }
};

// The work split by batches of `per` consecutive chunks of `headers`: thread w reads batches w,
// w + n, w + 2n, ... through a reader of its own that adopts `scan`, putting each chunk into its
// batch's payload (fill(chunk, payload)); the calling thread hands the payloads to deliver in
// batch order (deliver returns false to stop: ErrorCode::Cancelled). A batch whose chunks were
// all damaged comes as an empty payload. renew(payload) readies a payload for the next batch
// after one was handed on. Afterwards `reader` takes what the threads' readers found. When no
// thread could be started, nothing is delivered and `noThreads` is set.
template <class Payload, class Fill, class Renew, class Deliver>
Status inOrder(const TraceReader& reader, const std::vector<ChunkHeaderInfo>& headers,
               const std::shared_ptr<const TraceReader::SharedScan>& scan, unsigned n, size_t per,
               Fill&& fill, Renew&& renew, Deliver&& deliver, bool& noThreads) {
    const size_t batches = (headers.size() + per - 1) / per;
    n = static_cast<unsigned>(std::min<size_t>(n, batches));
    // Each thread may be a round of batches ahead of the one being delivered (n + 2 left them
    // waiting: 1.7x the time on 16 threads, docs/PERFORMANCE.md); about two batches a thread
    // are held.
    const size_t window = 2 * size_t{n};
    Exchange<Payload> ex;
    std::vector<std::unique_ptr<TraceReader>> readers(n);

    auto work = [&](unsigned w) {
        auto opened = TraceReader::open(reader.path());
        if (!opened) {
            ex.fail(w, Payload{}, opened.error());
            return;
        }
        TraceReader& r = **opened;
        r.setSkipDamaged(true);
        r.adoptScan(scan);
        std::vector<int64_t> ids;
        std::vector<size_t> positions; // into headers, of ids
        std::vector<size_t> mine;      // this thread's batches, in order
        for (size_t b = w; b < batches; b += n) {
            mine.push_back(b);
            for (size_t i = b * per; i < std::min(headers.size(), (b + 1) * per); ++i) {
                ids.push_back(headers[i].id);
                positions.push_back(i);
            }
        }
        size_t next = 0;  // into positions: the first chunk not handed to fill yet
        size_t mi = 0;    // into mine: the batch being filled
        bool started = false;
        Payload part{};
        renew(part);
        auto handOn = [&] {
            ex.hand(mine[mi++], std::move(part));
            part = Payload{};
            renew(part);
            started = false;
        };
        // A chunk is told by its first event, whose seq its header gives (a chunk whose events
        // disagree with its header is damaged, and skipped). Damaged ones are not handed over.
        const Status st = r.forEachChunkById(ids, [&](std::vector<Event>& chunk) {
            if (!chunk.empty())
                while (next < positions.size() && headers[positions[next]].firstSeq != chunk.front().seq) ++next;
            const size_t batch = (next < positions.size() ? positions[next] : positions.back()) / per;
            while (mi < mine.size() && mine[mi] < batch) handOn();
            if (mi == mine.size()) return false; // (a chunk after the last asked for: none comes)
            if (!started) {
                if (!ex.waitTurn(batch, window)) return false;
                started = true;
            }
            fill(chunk, part);
            ++next;
            // The batch's last chunk: on its way at once, not when the thread's next one is read.
            if (next >= positions.size() || positions[next] / per != batch) handOn();
            // Once its last batch is handed on, the read may be over and stopped: not a failure.
            return mi == mine.size() || !ex.stopped();
        });
        if (st) {
            while (mi < mine.size()) handOn();
        } else {
            // The failing chunk is at or after the next one not handed over; where every chunk
            // was, the failure follows them all.
            const size_t failBatch = next < positions.size() ? positions[next] / per : batches;
            while (mi < mine.size() && mine[mi] < failBatch) handOn();
            ex.fail(failBatch, mi < mine.size() && mine[mi] == failBatch ? std::move(part) : Payload{},
                    st.error());
        }
        readers[w] = std::move(*opened);
    };

    std::vector<std::thread> threads;
    threads.reserve(n);
    Status result;
    try {
        for (unsigned w = 0; w < n; ++w) threads.emplace_back(work, w);
    } catch (const std::system_error&) {
        // No thread could be started for some: those batches are never filled.
        ex.stopAll();
        for (std::thread& t : threads) t.join();
        noThreads = true;
        return {};
    }
    for (size_t b = 0; b < batches; ++b) {
        std::unique_lock lk(ex.m);
        ex.changed.wait(lk, [&] { return ex.ready.count(b) || ex.failAt <= b; });
        auto it = ex.ready.find(b);
        if (it == ex.ready.end()) {
            Payload part = std::move(ex.failPart);
            result = ex.failError;
            lk.unlock();
            if (!part.empty() && !deliver(part)) result = Error{ErrorCode::Cancelled, "cancelled"};
            break;
        }
        Payload p = std::move(it->second);
        ex.ready.erase(it);
        ex.written = b + 1;
        lk.unlock();
        ex.changed.notify_all();
        if (!deliver(p)) {
            result = Error{ErrorCode::Cancelled, "cancelled"};
            break;
        }
    }
    ex.stopAll();
    for (std::thread& t : threads) t.join();
    // Every batch delivered: a thread may still have failed after its last chunk.
    if (result && ex.failAt == batches) result = ex.failError;
    for (const auto& r : readers)
        if (r) reader.takeFindings(*r);
    return result;
}

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
    auto headersRead = reader.chunkHeaders();
    if (!headersRead) return headersRead.error();
    std::vector<ChunkHeaderInfo> headers = std::move(*headersRead);
    if (options.ranged())
        std::erase_if(headers, [&](const ChunkHeaderInfo& h) {
            return !(h.tMin < options.untilNs && h.tMax >= options.fromNs);
        });
    // No scan to share: an image in memory, a live trace (its rows change).
    std::shared_ptr<const TraceReader::SharedScan> scan = reader.sharedScan();
    if (!scan || headers.size() < 2) return sequential(reader, format, write, options);

    bool noThreads = false;
    const Status st = inOrder<std::string>(
        reader, headers, scan, n, std::max<size_t>(1, options.chunksPerBatch),
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
    if (n <= 1 || !reader.skipDamaged() || !reader.reusesHeaderScan()) return alone();
    auto headersRead = reader.chunkHeaders();
    if (!headersRead) return headersRead.error();
    const std::vector<ChunkHeaderInfo> headers = std::move(*headersRead);
    std::shared_ptr<const TraceReader::SharedScan> scan = reader.sharedScan();
    if (!scan || headers.size() < 2) return alone();

    // Decoded buffers go back to the threads once consumed, so that a chunk is decoded into
    // memory already allocated.
    std::mutex sparesMutex;
    std::vector<std::vector<Event>> spares;
    bool noThreads = false;
    const Status st = inOrder<std::vector<Event>>(
        reader, headers, scan, n, 1,
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
