#pragma once
// The machinery of ChunksInOrder.h: a trace's chunks read on several threads, each through a
// reader of its own, and handed to the calling thread in seq order, as one payload per batch of
// consecutive chunks. Internal to core: formatChunksInOrder (text), decodeChunksInOrder (decoded
// chunks) and the names pass (TraceReport.cpp: the events the names depend on) fill their own
// payloads.

#include <algorithm>
#include <condition_variable>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <system_error>
#include <thread>
#include <vector>

#include "poolscope/TraceReader.h"

namespace poolscope::detail {

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

// What the threads' readers need: the chunks' headers and the scan they adopt.
struct ThreadedChunks {
    std::vector<ChunkHeaderInfo> headers;
    std::shared_ptr<const TraceReader::SharedScan> scan;
};
// Those of `reader`'s chunks that `keep` keeps (all without it), where they can be read on
// `threads` threads: 2 or more, a reader that skips damaged chunks and reuses its header scan,
// at least two chunks. Empty where they are read alone instead; an error reading the headers.
inline Result<std::optional<ThreadedChunks>> threadedChunks(
    const TraceReader& reader, unsigned threads, const std::function<bool(const ChunkHeaderInfo&)>& keep = {}) {
    if (threads <= 1 || !reader.skipDamaged() || !reader.reusesHeaderScan()) return std::optional<ThreadedChunks>();
    auto headers = reader.chunkHeaders();
    if (!headers) return headers.error();
    ThreadedChunks out{std::move(*headers), reader.sharedScan()};
    if (keep) std::erase_if(out.headers, [&](const ChunkHeaderInfo& h) { return !keep(h); });
    // (No scan to share: an image in memory, a live trace (its rows change).)
    if (!out.scan || out.headers.size() < 2) return std::optional<ThreadedChunks>();
    return std::optional<ThreadedChunks>(std::move(out));
}

} // namespace poolscope::detail
