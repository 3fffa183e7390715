#pragma once
// A trace's chunks turned into text on several threads, the text handed back in seq order
// (issue #15). `dump` and the CSV export format each event on its own, without a replay, so
// their work splits by chunk: each thread decodes and formats whole batches of chunks, and the
// calling thread writes the batches in order. Each thread reads through a reader of its own (a
// reader's SQLite connection belongs to one thread) that adopts the first reader's header scan;
// what those readers find damaged is then reported by the first (TraceReader::takeFindings), as
// if it had read every chunk itself.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "poolscope/Event.h"
#include "poolscope/Result.h"

namespace poolscope {

class TraceReader;

struct ChunkTextOptions {
    // Formatting threads: 0 for one per CPU (at most kMaxThreads), 1 for the calling thread alone.
    unsigned threads = 0;
    // Consecutive chunks a thread formats before handing their text on (a few MB of text each).
    size_t chunksPerBatch = 1;
    static constexpr unsigned kMaxThreads = 16;
    // Only the events with fromNs <= tsNs < untilNs (`dump --from/--to`): the chunks whose
    // headers lie outside are not read, and format gets each chunk's events in the range.
    int64_t fromNs = INT64_MIN, untilNs = INT64_MAX;
    bool ranged() const { return fromNs != INT64_MIN || untilNs != INT64_MAX; }
};

// What reader.forEachChunk with format then write, chunk by chunk, would do: the same text to
// write in the same order, the same status, and afterwards the same reader.damage(). format
// appends one chunk's text to `out`; it runs on the threads at once, so it may only read what it
// shares. write gets the text on the calling thread, a batch at a time (false stops the read:
// ErrorCode::Cancelled). About two batches a thread are held at once.
//
// The threads are used for a reader of a file that skips damaged chunks (setSkipDamaged), with
// at least two chunks; otherwise, or where threads 1 is asked for, everything runs on the
// calling thread. The reader is set to reuse its header scan (setReuseHeaderScan).
Status formatChunksInOrder(TraceReader& reader,
                           const std::function<void(const std::vector<Event>& chunk, std::string& out)>& format,
                           const std::function<bool(const std::string& text)>& write,
                           const ChunkTextOptions& options = {});

// What reader.forEachChunk(consume) does (the same chunks in the same order, the same status,
// afterwards the same damage()), with the chunks decoded on `threads` (0: one per CPU, at most
// kMaxThreads) while consume runs on the calling thread: for a pass whose own work is one
// replay in seq order (the names pass, the what-if models' reads), which one decoding thread
// cannot keep fed. Used where formatChunksInOrder would use threads and the reader reuses its
// header scan (setReuseHeaderScan); otherwise the chunks are decoded as detail::forEachChunk
// decodes them (read ahead on one thread with readAheadAlone). About two decoded chunks a
// thread are held. `decoders` (tests, benchmarks): the threads that decoded, 0 where none.
Status decodeChunksInOrder(const TraceReader& reader, const std::function<bool(std::vector<Event>& chunk)>& consume,
                           unsigned threads = 0, bool readAheadAlone = true, unsigned* decoders = nullptr);
// `threads` for such a pass: one per CPU beside the pass's own (at most kAutoDecoders) on 4 CPUs
// or more, where reading ahead pays (BuildOptions::defaultReadAhead); 1 below.
// POOLSCOPE_DECODE_THREADS sets the number.
inline constexpr unsigned kAutoDecoders = 8;
unsigned decodingThreadsBeside();

} // namespace poolscope
