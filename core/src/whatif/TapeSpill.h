#pragma once
// The streaming report's tape on disk (internal to core). The report's first read already turns
// the replay's facts into the what-if model's ops, a chunk at a time; the advisor's questions
// (adviseAfter) need exactly those ops again, and reading the trace a second time to make them
// (decode, replay, a recording model) was about half of `poolscope report`. Kept in memory they
// would cost ~40 bytes an event, so they go to an anonymous temporary file instead, varint-coded
// and zstd-compressed in blocks: memory stays one block either way, and the file is gone when
// the spill is (O_TMPFILE, or a name unlinked at once).
//
// Any failure (no temporary directory, a write error, a full disk, no libzstd, the size cap)
// leaves the spill !ok(), and the advisor reads the trace again as before.

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "poolscope/Zstd.h"
#include "poolscope/whatif/PoolModel.h"

namespace poolscope::whatif {

class TapeSpill {
public:
    // Opens the file in $TMPDIR, or where that is not set in /tmp, or in /var/tmp where /tmp is
    // held in memory and /var/tmp is not; `cap`: the most it may take on disk.
    explicit TapeSpill(uint64_t cap = kDefaultCap);
    ~TapeSpill();
    TapeSpill(const TapeSpill&) = delete;
    TapeSpill& operator=(const TapeSpill&) = delete;

    // About 16 G events (a week of training); capFor() keeps it to half the disk's free space.
    static constexpr uint64_t kDefaultCap = uint64_t{64} << 30;
    // Where $TMPDIR is tmpfs or ramfs (the file is memory), and the disk space always left.
    static constexpr uint64_t kMemoryCap = uint64_t{256} << 20;
    static constexpr uint64_t kKeepFree = uint64_t{1} << 30;

    bool ok() const { return ok_; }
    // One step of the first read (where the advisor's search steps too): the ops and allocSeq
    // taken since the last (tape.streamHandles already seen), and the handles of the replay's
    // pools by now, in its order; `notes`, numbers the writer keeps with the step for the
    // readers (AdviceFeed: the events so far and each pool's releases as recorded).
    void append(const Tape& tape, const std::vector<uint64_t>& poolHandles,
                const std::vector<uint64_t>& notes = {});
    // After the last step: what the recording model made of the whole read (finishTape), kept
    // as a recordOnly, keepRecorded(false) recording model would have finished it.
    void finish(const Tape& finished);
    uint64_t fileBytes() const { return fileBytes_; }
    uint64_t cap() const { return cap_; }
    uint64_t steps() const { return steps_; }

    // finish()'s tape, without ops: for the models' collect().
    const Tape& finished() const { return finished_; }
    // Ends the writing without finish() (a read that stopped early): readers following the
    // spill stop, failed. Nothing once finished.
    void abandon();

    // What readers may read: the blocks written so far, their raw bytes, the steps wholly in
    // them; closed once no more come (finished, failed or abandoned). The writer's own
    // counters run ahead of it and are its alone.
    struct Published {
        uint64_t fileBytes = 0, rawBytes = 0, steps = 0;
        bool closed = false, failed = false;
    };

    // An independent reader over the spill, from its start, for one thread: the file
    // is read by pread at the reader's own offsets, into its own block (zstd's decompression
    // context is per thread), so that several threads each step their own models over the
    // same ops. Memory: a block per reader. A failure ends that reader (!ok()), not the spill,
    // which no reader changes: the readers may outlive no spill.
    //
    // A reader made before finish() follows the writing: next() waits for the blocks of its
    // step to be written (a step is read once the blocks holding all of it are: at most one
    // block behind the writer), until finish() or abandon().
    class Reader {
    public:
        explicit Reader(const TapeSpill& spill);
        bool ok() const { return ok_; }
        bool next(Tape& tape, std::vector<uint64_t>& poolHandles,
                  std::vector<uint64_t>* notes = nullptr);
        bool atEnd() const { return ok_ && pub_.closed && readSteps_ == pub_.steps; }
        uint64_t steps() const { return readSteps_; } // read so far

    private:
        bool load();
        bool get(uint8_t& b) {
            if (rpos_ == block_.size()) [[unlikely]]
                if (!load()) return false;
            b = static_cast<uint8_t>(block_[rpos_++]);
            return true;
        }
        bool getVar(uint64_t& v);
        // One op's code (what append() wrote for it) into `op` through `src`: the reader's own
        // get() and getVar() (each byte checked against the block's end), or a pointer into the
        // block where at least kSlack bytes are left (an op's code is never longer).
        template <class Src> bool readOp(Src& src, Tape& tape, Op& op);
        bool bad() {
            ok_ = false;
            std::string().swap(block_);
            std::string().swap(packed_);
            return false;
        }

        const TapeSpill* spill_;
        Published pub_; // the spill's as last seen
        bool ok_ = false;
        uint64_t readAt_ = 0;
        uint64_t readSteps_ = 0;
        std::string packed_;
        std::string block_;
        size_t rpos_ = 0;
        int64_t prevTs_ = 0;
        uint64_t prevSeq_ = 0;
    };

private:
    // The published state, once it holds a step past `steps` or is closed (wait), or as it is.
    Published published(bool wait, uint64_t steps) const;
    void publish(bool close, bool failed);

    static constexpr size_t kBlock = size_t{1} << 20; // raw bytes per zstd frame
    static constexpr size_t kSlack = 64;               // one op's code at most

    void fail();
    void flush();
    uint8_t* room(size_t n) {
        if (pos_ + n > raw_.size()) [[unlikely]]
            flush();
        return raw_.data() + pos_;
    }

    int fd_ = -1;
    bool ok_ = false;
    uint64_t cap_;
    zstd::Compressor zc_;
    std::vector<uint8_t> raw_;
    size_t pos_ = 0;
    std::string packed_;
    uint64_t fileBytes_ = 0;
    uint64_t rawBytes_ = 0;
    uint64_t steps_ = 0;
    size_t streamsWritten_ = 0;
    size_t poolsWritten_ = 0;
    int64_t prevTs_ = 0;
    uint64_t prevSeq_ = 0;
    bool finishedSet_ = false;
    Tape finished_;
    mutable std::mutex pubMutex_;
    mutable std::condition_variable grew_;
    Published pub_;
};

namespace detail {
// Tests only: the cap every TapeSpill gets instead of its own (0: each its own).
void setSpillCapForTests(uint64_t cap);
// Tests only: the directories openAnonymous() takes for /tmp and /var/tmp where $TMPDIR is not
// set (empty: those two).
void setSpillDirsForTests(std::string tmp, std::string varTmp);
// Tests only: how many advisor searches read a spill to their end (or early stop) and how many
// fell back to reading the trace again, since the process started.
struct SpillCounts {
    uint64_t replayed = 0;
    uint64_t fellBack = 0;
};
SpillCounts spillCounts();
void countSpill(bool replayed);
// Tests only: the n-th block loaded by any reader from now on fails to read (0: none fails).
void failSpillLoadForTests(uint64_t n);
} // namespace detail

} // namespace poolscope::whatif
