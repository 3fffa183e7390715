// The report's tape spilled to an anonymous temporary file (TapeSpill.h).
//
// The file is a run of blocks: u32 compressed size, u32 raw size, one zstd frame. The raw bytes
// are steps, which may cross blocks: varint op count, varint new streams, varint new pools, the
// new streams' and pools' handles (varints), varint note count and the notes, then the ops. An op is a byte (kind in the low four
// bits; 0x10: a flag byte follows, 0x20: an attr byte, 0x40: aux), its time as a zigzag varint
// from the previous op's, value, pool + 1 and stream + 1 (kNone becomes 0) as varints, aux, attr,
// flag, and for an Alloc its seq as a zigzag varint from the previous Alloc's: about 9 bytes
// an op before zstd, against 40 in memory.
#include "TapeSpill.h"

#include "../Varint.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <limits>
#include <linux/magic.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <unistd.h>

namespace poolscope::whatif {

namespace {

std::atomic<uint64_t> gCapForTests{0};
std::atomic<uint64_t> gReplayed{0}, gFellBack{0};
std::atomic<uint64_t> gFailLoadAt{0}, gLoads{0};

std::mutex gDirsMutex;
std::string gTmpForTests, gVarTmpForTests; // empty: /tmp and /var/tmp

bool inMemory(int fd) {
    struct statfs fs {};
    return ::fstatfs(fd, &fs) == 0 && (fs.f_type == TMPFS_MAGIC || fs.f_type == RAMFS_MAGIC);
}

int openIn(const std::string& dir) {
#ifdef O_TMPFILE
    const int fd = ::open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (fd >= 0) return fd;
#endif
    // Filesystems without O_TMPFILE: a name, unlinked at once.
    std::string path = dir + "/poolscope-spill-XXXXXX";
    const int named = ::mkostemp(path.data(), O_CLOEXEC);
    if (named >= 0) ::unlink(path.c_str());
    return named;
}

// $TMPDIR where it is set (the user's choice, memory or not). Otherwise /tmp, unless /tmp is
// held in memory (a tmpfs: Debian 13's default and many others') and /var/tmp, the place for
// large temporary files, is on a disk: a long trace's spill is gigabytes (about 4 bytes an
// event), which a tmpfs would keep to the memory budget and then give up on.
int openAnonymous() {
    const char* env = std::getenv("TMPDIR");
    if (env && *env) return openIn(env);
    std::string tmp = "/tmp", varTmp = "/var/tmp";
    {
        std::lock_guard lk(gDirsMutex);
        if (!gTmpForTests.empty()) tmp = gTmpForTests, varTmp = gVarTmpForTests;
    }
    const int fd = openIn(tmp);
    if (fd >= 0 && !inMemory(fd)) return fd;
    const int onDisk = openIn(varTmp);
    if (onDisk >= 0 && !inMemory(onDisk)) {
        if (fd >= 0) ::close(fd);
        return onDisk;
    }
    if (onDisk >= 0) ::close(onDisk);
    return fd;
}

bool writeAll(int fd, const void* p, size_t n) {
    const char* c = static_cast<const char*>(p);
    while (n) {
        const ssize_t w = ::write(fd, c, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return false;
        c += w;
        n -= static_cast<size_t>(w);
    }
    return true;
}

bool readAll(int fd, void* p, size_t n, uint64_t at) {
    char* c = static_cast<char*>(p);
    while (n) {
        const ssize_t r = ::pread(fd, c, n, static_cast<off_t>(at));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return false;
        c += r;
        n -= static_cast<size_t>(r);
        at += static_cast<uint64_t>(r);
    }
    return true;
}

inline uint8_t* putVar(uint8_t* p, uint64_t v) { return p + poolscope::detail::putVarint(p, v); }

using poolscope::detail::unzigzag;
using poolscope::detail::zigzag;

// The spill is a speed-up, never worth harming the machine for: on a filesystem held in memory
// it keeps to a memory-sized budget (past it the advisor reads the trace again, in bounded
// memory), and elsewhere it leaves the disk at least kKeepFree plus half of what was free.
uint64_t capFor(int fd, uint64_t cap) {
    if (inMemory(fd)) cap = std::min(cap, TapeSpill::kMemoryCap);
    struct statvfs vs {};
    if (::fstatvfs(fd, &vs) == 0) {
        const uint64_t avail = uint64_t(vs.f_bavail) * uint64_t(vs.f_frsize);
        const uint64_t spare = avail > TapeSpill::kKeepFree ? (avail - TapeSpill::kKeepFree) / 2 : 0;
        cap = std::min(cap, spare);
    }
    return cap;
}

} // namespace

TapeSpill::TapeSpill(uint64_t cap) : cap_(cap), zc_(1) {
    if (const uint64_t forced = gCapForTests.load(std::memory_order_relaxed)) cap_ = forced;
    pub_.closed = pub_.failed = true; // until it opens
    if (!zstd::available()) return;
    fd_ = openAnonymous();
    if (fd_ < 0) return;
    if (!gCapForTests.load(std::memory_order_relaxed)) cap_ = capFor(fd_, cap_);
    raw_.resize(kBlock);
    ok_ = true;
    pub_.closed = pub_.failed = false;
}

TapeSpill::~TapeSpill() {
    if (fd_ >= 0) ::close(fd_);
}

void TapeSpill::fail() {
    ok_ = false;
    pos_ = 0; // later writes land in the buffer harmlessly
    // The disk space goes now; the descriptor stays until the spill does, for readers
    // following it may still be reading (they find nothing there and stop).
    if (fd_ >= 0) (void)!::ftruncate(fd_, 0);
    std::string().swap(packed_);
    publish(true, true);
}

TapeSpill::Published TapeSpill::published(bool wait, uint64_t steps) const {
    std::unique_lock lk(pubMutex_);
    if (wait) grew_.wait(lk, [&] { return pub_.closed || pub_.steps > steps; });
    return pub_;
}

void TapeSpill::publish(bool close, bool failed) {
    {
        std::lock_guard lk(pubMutex_);
        if (pub_.closed) return;
        if (!failed) {
            pub_.fileBytes = fileBytes_;
            pub_.rawBytes = rawBytes_;
            pub_.steps = steps_; // appends are whole before they count: flushed mid-step, the
                                 // step being written is not among them
        }
        pub_.closed = close;
        pub_.failed = failed;
    }
    grew_.notify_all();
}

void TapeSpill::abandon() { publish(true, true); }

void TapeSpill::flush() {
    if (!ok_ || pos_ == 0) {
        pos_ = 0;
        return;
    }
    const size_t n = pos_;
    pos_ = 0;
    if (!zc_.compress(std::string_view(reinterpret_cast<const char*>(raw_.data()), n), packed_))
        return fail();
    uint32_t head[2] = {static_cast<uint32_t>(packed_.size()), static_cast<uint32_t>(n)};
    const uint64_t add = sizeof head + packed_.size();
    if (fileBytes_ + add > cap_) return fail();
    if (!writeAll(fd_, head, sizeof head) || !writeAll(fd_, packed_.data(), packed_.size()))
        return fail();
    fileBytes_ += add;
    rawBytes_ += n;
    publish(false, false);
}

void TapeSpill::append(const Tape& tape, const std::vector<uint64_t>& poolHandles,
                       const std::vector<uint64_t>& notes) {
    if (!ok_ || finishedSet_) return;
    const size_t nStreams = tape.streamHandles.size(), nPools = poolHandles.size();
    if (nStreams < streamsWritten_ || nPools < poolsWritten_) return fail();
    uint8_t* p = room(kSlack);
    p = putVar(p, tape.ops.size());
    p = putVar(p, nStreams - streamsWritten_);
    p = putVar(p, nPools - poolsWritten_);
    pos_ = static_cast<size_t>(p - raw_.data());
    for (; streamsWritten_ < nStreams; ++streamsWritten_) {
        p = putVar(room(kSlack), tape.streamHandles[streamsWritten_]);
        pos_ = static_cast<size_t>(p - raw_.data());
    }
    for (; poolsWritten_ < nPools; ++poolsWritten_) {
        p = putVar(room(kSlack), poolHandles[poolsWritten_]);
        pos_ = static_cast<size_t>(p - raw_.data());
    }
    p = putVar(room(kSlack), notes.size());
    pos_ = static_cast<size_t>(p - raw_.data());
    for (uint64_t n : notes) {
        p = putVar(room(kSlack), n);
        pos_ = static_cast<size_t>(p - raw_.data());
    }
    size_t seqAt = 0;
    const size_t nSeq = tape.allocSeq.size();
    for (const Op& op : tape.ops) {
        p = room(kSlack);
        uint8_t head = static_cast<uint8_t>(op.kind);
        if (op.flag) head |= 0x10;
        if (op.attr) head |= 0x20;
        if (op.aux) head |= 0x40;
        *p++ = head;
        p = putVar(p, zigzag(static_cast<uint64_t>(op.ts) - static_cast<uint64_t>(prevTs_)));
        prevTs_ = op.ts;
        p = putVar(p, op.value);
        p = putVar(p, static_cast<uint32_t>(op.pool + 1));
        p = putVar(p, static_cast<uint32_t>(op.stream + 1));
        if (op.aux) p = putVar(p, op.aux);
        if (op.attr) *p++ = op.attr;
        if (op.flag) *p++ = op.flag;
        if (op.kind == Op::Kind::Alloc) {
            if (seqAt == nSeq) return fail(); // every Alloc has its seq in a recording
            const uint64_t seq = tape.allocSeq[seqAt++];
            p = putVar(p, zigzag(seq - prevSeq_));
            prevSeq_ = seq;
        }
        pos_ = static_cast<size_t>(p - raw_.data());
    }
    if (seqAt != nSeq) return fail();
    steps_++;
}

void TapeSpill::finish(const Tape& finished) {
    if (!ok_ || finishedSet_) return;
    flush();
    finishedSet_ = true;
    // What the advisor's recording model (recordOnly, keepRecorded(false)) would have finished:
    // the pools the ops touched, none of the recorded figures (which it never keeps). The
    // recorded side's end and the settings in force at the end are the same replay's.
    finished_.streamHandles = finished.streamHandles;
    finished_.lastTs = finished.lastTs;
    finished_.events = finished.events;
    for (size_t k = 0; k < finished.recorded.size() && k < finished.poolIndex.size(); ++k) {
        const PoolPrediction& rec = finished.recorded[k];
        if (!rec.touched) continue;
        PoolPrediction p;
        p.handle = rec.handle;
        p.device = rec.device;
        p.touched = true;
        p.releaseThreshold = rec.releaseThreshold;
        p.followEventDependencies = rec.followEventDependencies;
        p.allowOpportunistic = rec.allowOpportunistic;
        p.allowInternalDependencies = rec.allowInternalDependencies;
        finished_.recorded.push_back(std::move(p));
        finished_.poolIndex.push_back(finished.poolIndex[k]);
        finished_.recordedEnd.push_back(k < finished.recordedEnd.size()
                                            ? finished.recordedEnd[k]
                                            : std::numeric_limits<int64_t>::min());
    }
    std::vector<uint8_t>().swap(raw_); // the writing is over
    publish(true, false);
}

TapeSpill::Reader::Reader(const TapeSpill& spill) : spill_(&spill) {
    pub_ = spill.published(false, 0);
    ok_ = !pub_.failed;
}

bool TapeSpill::Reader::load() {
    if (const uint64_t at = gFailLoadAt.load(std::memory_order_relaxed))
        if (gLoads.fetch_add(1, std::memory_order_relaxed) + 1 == at) return false;
    const uint64_t fileBytes = pub_.fileBytes; // the step being read is wholly within it
    uint32_t head[2];
    if (readAt_ + sizeof head > fileBytes || !readAll(spill_->fd_, head, sizeof head, readAt_))
        return false;
    readAt_ += sizeof head;
    if (head[0] > fileBytes - readAt_ || head[1] > kBlock || head[1] == 0) return false;
    packed_.resize(head[0]);
    if (!readAll(spill_->fd_, packed_.data(), head[0], readAt_)) return false;
    readAt_ += head[0];
    std::string why;
    if (!zstd::decompress(packed_, kBlock, block_, why) || block_.size() != head[1]) return false;
    rpos_ = 0;
    return true;
}

bool TapeSpill::Reader::getVar(uint64_t& v) {
    v = 0;
    for (unsigned shift = 0; shift < 64; shift += 7) {
        uint8_t b;
        if (!get(b)) return false;
        v |= static_cast<uint64_t>(b & 0x7F) << shift;
        if (!(b & 0x80)) return true;
    }
    return false;
}

bool TapeSpill::Reader::next(Tape& tape, std::vector<uint64_t>& poolHandles,
                             std::vector<uint64_t>* notes) {
    if (!ok_) return false;
    if (readSteps_ >= pub_.steps) {
        if (pub_.closed) return false;
        pub_ = spill_->published(true, readSteps_);
        if (pub_.failed) return bad();
        if (readSteps_ >= pub_.steps) return false; // finished here
    }
    const uint64_t rawBytes = pub_.rawBytes;
    uint64_t nOps, nStreams, nPools;
    if (!getVar(nOps) || !getVar(nStreams) || !getVar(nPools)) return bad();
    // The file is this process's own; still, nothing it says allocates without bound.
    if (nOps > rawBytes / 5 || nStreams > rawBytes || nPools > rawBytes) return bad();
    for (uint64_t i = 0; i < nStreams; ++i) {
        uint64_t h;
        if (!getVar(h)) return bad();
        tape.streamHandles.push_back(h);
    }
    for (uint64_t i = 0; i < nPools; ++i) {
        uint64_t h;
        if (!getVar(h)) return bad();
        poolHandles.push_back(h);
    }
    uint64_t nNotes;
    if (!getVar(nNotes) || nNotes > rawBytes) return bad();
    if (notes) notes->clear();
    for (uint64_t i = 0; i < nNotes; ++i) {
        uint64_t n;
        if (!getVar(n)) return bad();
        if (notes) notes->push_back(n);
    }
    tape.ops.clear();
    tape.allocSeq.clear();
    // Sized ahead and written in place: no capacity check and call per op.
    tape.ops.resize(nOps);
    // The reader's own get/getVar, checked against the block's end byte by byte.
    struct Checked {
        Reader& r;
        bool get(uint8_t& b) { return r.get(b); }
        bool var(uint64_t& v) { return r.getVar(v); }
    } checked{*this};
    // Straight from the block: an op's code takes at most kSlack bytes, so none of its reads
    // can pass the block's end. (One thread decodes the spill for all those asking the
    // advisor's questions: its pace is theirs.)
    struct InBlock {
        const uint8_t *p, *end;
        bool get(uint8_t& b) {
            b = *p++;
            return true;
        }
        bool var(uint64_t& v) { return poolscope::detail::getVarint(p, end, v); }
    };
    for (uint64_t i = 0; i < nOps; ++i) {
        if (block_.size() - rpos_ >= TapeSpill::kSlack) {
            const auto* base = reinterpret_cast<const uint8_t*>(block_.data());
            InBlock src{base + rpos_, base + block_.size()};
            const bool good = readOp(src, tape, tape.ops[i]);
            rpos_ = static_cast<size_t>(src.p - base);
            if (!good) return bad();
        } else if (!readOp(checked, tape, tape.ops[i])) {
            return bad();
        }
    }
    readSteps_++;
    return true;
}

template <class Src> bool TapeSpill::Reader::readOp(Src& src, Tape& tape, Op& op) {
    uint8_t head;
    uint64_t dt, value, pool, stream, aux = 0;
    if (!src.get(head) || !src.var(dt) || !src.var(value) || !src.var(pool) || !src.var(stream))
        return false;
    if ((head & 0x0F) > static_cast<uint8_t>(Op::Kind::Reset)) return false;
    op.kind = static_cast<Op::Kind>(head & 0x0F);
    op.ts = static_cast<int64_t>(static_cast<uint64_t>(prevTs_) + unzigzag(dt));
    prevTs_ = op.ts;
    op.value = value;
    op.pool = static_cast<uint32_t>(pool - 1);
    op.stream = static_cast<uint32_t>(stream - 1);
    if ((head & 0x40) && !src.var(aux)) return false;
    op.aux = static_cast<uint32_t>(aux);
    if ((head & 0x20) && !src.get(op.attr)) return false;
    if ((head & 0x10) && !src.get(op.flag)) return false;
    if (op.kind == Op::Kind::Alloc) {
        uint64_t dz;
        if (!src.var(dz)) return false;
        prevSeq_ += unzigzag(dz);
        tape.allocSeq.push_back(prevSeq_);
    }
    return true;
}

namespace detail {

void setSpillCapForTests(uint64_t cap) { gCapForTests.store(cap); }
void setSpillDirsForTests(std::string tmp, std::string varTmp) {
    std::lock_guard lk(gDirsMutex);
    gTmpForTests = std::move(tmp);
    gVarTmpForTests = std::move(varTmp);
}

SpillCounts spillCounts() { return {gReplayed.load(), gFellBack.load()}; }

void countSpill(bool replayed) { (replayed ? gReplayed : gFellBack).fetch_add(1); }

void failSpillLoadForTests(uint64_t n) {
    gLoads.store(0);
    gFailLoadAt.store(n);
}

} // namespace detail

} // namespace poolscope::whatif
