// The report's spill (whatif/TapeSpill.h): the first read's ops on disk for the advisor's
// questions after it. Ops of every kind read back as written, a spill past its cap fails, a
// reader follows the writing step by step, and the spill keeps to its place and budget where
// /tmp is a tmpfs. The advice and the report through the spill: WhatIfSearchTest.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <limits>
#include <linux/magic.h>
#include <random>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <thread>

#include "../../core/src/whatif/TapeSpill.h"
#include "TestTraces.h"
#include "poolscope/Zstd.h"
#include "poolscope/whatif/PoolModel.h"

namespace poolscope {
namespace {

constexpr uint64_t MiB = uint64_t{1} << 20;

// Ops of every kind with values at the ends of their ranges, in steps that cross the spill's
// 1 MiB blocks, read back as written.
TEST(WhatIfSpill, OpsReadBackAsWritten) {
    std::vector<uint64_t> allPools; // the replay's pools' handles, as far as stepped
    std::mt19937_64 rng(7);
    whatif::TapeSpill spill;
    ASSERT_TRUE(spill.ok()) << zstd::unavailableReason();
    std::vector<whatif::Tape> steps;
    std::vector<std::vector<uint64_t>> newPools;
    whatif::Tape tape;
    const int64_t times[] = {0, 1, -1, std::numeric_limits<int64_t>::min(),
                             std::numeric_limits<int64_t>::max(), 1'700'000'000'000'000'000};
    for (int s = 0; s < 40; ++s) {
        std::vector<uint64_t> pools;
        for (int k = 0; k < s % 3; ++k) {
            const uint64_t handle = rng();
            allPools.push_back(handle);
            pools.push_back(handle);
        }
        newPools.push_back(pools);
        if (s % 5 == 0) tape.streamHandles.push_back(rng());
        tape.ops.clear();
        tape.allocSeq.clear();
        const size_t n = s == 7 ? 0 : rng() % 20'000;
        for (size_t i = 0; i < n; ++i) {
            whatif::Op op;
            op.kind = static_cast<whatif::Op::Kind>(rng() % 12);
            op.ts = rng() % 4 == 0 ? times[rng() % 6] : static_cast<int64_t>(1'000'000 + i * 1000);
            op.value = rng() % 3 == 0 ? rng() : rng() % 4096;
            op.pool = rng() % 5 == 0 ? replay::kNone : static_cast<uint32_t>(rng() % 4);
            op.stream = rng() % 5 == 0 ? replay::kNone : static_cast<uint32_t>(rng());
            op.aux = rng() % 2 ? 0 : static_cast<uint32_t>(rng());
            op.attr = static_cast<uint8_t>(rng() % 3 ? 0 : rng());
            op.flag = static_cast<uint8_t>(rng() % 3 ? 0 : rng());
            tape.ops.push_back(op);
            if (op.kind == whatif::Op::Kind::Alloc)
                tape.allocSeq.push_back(rng() % 7 == 0 ? rng() : 100 + i);
        }
        spill.append(tape, allPools);
        steps.push_back(tape);
    }
    whatif::Tape end;
    end.lastTs = 42;
    spill.finish(end);
    ASSERT_TRUE(spill.ok());
    EXPECT_EQ(spill.steps(), steps.size());
    EXPECT_GT(spill.fileBytes(), 0u);
    for (int pass = 0; pass < 2; ++pass) { // and again by a reader started after the first
        whatif::TapeSpill::Reader reader(spill);
        ASSERT_TRUE(reader.ok());
        whatif::Tape got;
        std::vector<uint64_t> handles;
        size_t poolsBefore = 0;
        for (size_t s = 0; s < steps.size(); ++s) {
            SCOPED_TRACE(s);
            ASSERT_TRUE(reader.next(got, handles));
            const whatif::Tape& want = steps[s];
            ASSERT_EQ(got.ops.size(), want.ops.size());
            for (size_t i = 0; i < want.ops.size(); ++i) {
                const whatif::Op &a = got.ops[i], &b = want.ops[i];
                ASSERT_TRUE(a.kind == b.kind && a.ts == b.ts && a.value == b.value &&
                            a.pool == b.pool && a.stream == b.stream && a.aux == b.aux &&
                            a.attr == b.attr && a.flag == b.flag)
                    << "op " << i;
            }
            EXPECT_EQ(got.allocSeq, want.allocSeq);
            EXPECT_EQ(got.streamHandles, want.streamHandles);
            ASSERT_EQ(handles.size(), poolsBefore + newPools[s].size());
            for (size_t k = 0; k < newPools[s].size(); ++k)
                EXPECT_EQ(handles[poolsBefore + k], newPools[s][k]);
            poolsBefore = handles.size();
        }
        EXPECT_TRUE(reader.atEnd());
        EXPECT_FALSE(reader.next(got, handles));
        EXPECT_TRUE(reader.ok());
        EXPECT_TRUE(spill.ok());
        EXPECT_EQ(spill.finished().lastTs, 42);
    }
    // Independent readers (one per thread in the advisor), taking turns unevenly: each reads
    // every step as written, whatever the others have read.
    std::vector<whatif::TapeSpill::Reader> readers(3, whatif::TapeSpill::Reader(spill));
    std::vector<whatif::Tape> got(3);
    std::vector<std::vector<uint64_t>> handles(3);
    std::vector<size_t> at(3, 0);
    for (size_t turn = 0; at[0] + at[1] + at[2] < 3 * steps.size(); ++turn) {
        const size_t k = (turn * 7 + turn / 3) % 3;
        for (size_t n = 0; n <= turn % 4 && at[k] < steps.size(); ++n, ++at[k]) {
            SCOPED_TRACE(at[k]);
            ASSERT_TRUE(readers[k].next(got[k], handles[k]));
            const whatif::Tape& want = steps[at[k]];
            ASSERT_EQ(got[k].ops.size(), want.ops.size());
            for (size_t i = 0; i < want.ops.size(); ++i)
                ASSERT_TRUE(got[k].ops[i].ts == want.ops[i].ts &&
                            got[k].ops[i].value == want.ops[i].value) << "op " << i;
            EXPECT_EQ(got[k].allocSeq, want.allocSeq);
            EXPECT_EQ(got[k].streamHandles, want.streamHandles);
        }
    }
    for (whatif::TapeSpill::Reader& r : readers) {
        EXPECT_TRUE(r.atEnd());
        EXPECT_TRUE(r.ok());
    }
    EXPECT_EQ(handles[0].size(), handles[2].size());
}

// Past its cap the spill gives up (and says so), keeping no more than a block in memory.
TEST(WhatIfSpill, ASpillPastItsCapFails) {
    whatif::TapeSpill spill(100'000);
    ASSERT_TRUE(spill.ok());
    whatif::Tape tape;
    std::mt19937_64 rng(3);
    for (int s = 0; s < 50 && spill.ok(); ++s) {
        tape.ops.assign(50'000, whatif::Op{});
        for (whatif::Op& op : tape.ops) {
            op.kind = whatif::Op::Kind::Free;
            op.value = rng();
        }
        spill.append(tape, std::vector<uint64_t>{});
    }
    EXPECT_FALSE(spill.ok());
    EXPECT_LE(spill.fileBytes(), 100'000u);
    spill.finish(tape);
    EXPECT_FALSE(whatif::TapeSpill::Reader(spill).ok());
}

// Random steps of ops, some large enough to fill several of the spill's blocks.
std::vector<whatif::Tape> randomSteps(uint64_t seed, int n) {
    std::mt19937_64 rng(seed);
    std::vector<whatif::Tape> steps;
    whatif::Tape tape;
    for (int s = 0; s < n; ++s) {
        if (s % 5 == 0) tape.streamHandles.push_back(rng());
        tape.ops.clear();
        tape.allocSeq.clear();
        const size_t ops = rng() % 4 == 0 ? 60'000 : rng() % 3'000;
        for (size_t i = 0; i < ops; ++i) {
            whatif::Op op;
            op.kind = static_cast<whatif::Op::Kind>(rng() % 12);
            op.ts = static_cast<int64_t>(rng() % (uint64_t{1} << 40));
            op.value = rng();
            op.pool = static_cast<uint32_t>(rng() % 3);
            op.stream = static_cast<uint32_t>(rng() % 7);
            tape.ops.push_back(op);
            if (op.kind == whatif::Op::Kind::Alloc) tape.allocSeq.push_back(rng());
        }
        steps.push_back(tape);
    }
    return steps;
}

// A reader made before the spill is written follows it from another thread: every step as
// written, each once the blocks holding it are written, and the end once the spill is finished.
// Abandoned part-way, a following reader stops, failed.
TEST(WhatIfSpill, AReaderFollowsTheWriting) {
    const std::vector<whatif::Tape> steps = randomSteps(5, 40);
    for (bool abandon : {false, true}) {
        SCOPED_TRACE(abandon ? "abandoned" : "finished");
        whatif::TapeSpill spill;
        ASSERT_TRUE(spill.ok()) << zstd::unavailableReason();
        whatif::TapeSpill::Reader reader(spill);
        ASSERT_TRUE(reader.ok());
        const size_t written = abandon ? steps.size() / 2 : steps.size();
        std::thread writer([&] {
            std::vector<uint64_t> pools{11, 22, 33};
            for (size_t s = 0; s < written; ++s) {
                spill.append(steps[s], pools);
                if (s % 7 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
            }
            if (abandon) {
                spill.abandon();
            } else {
                whatif::Tape end;
                end.lastTs = 7;
                spill.finish(end);
            }
        });
        whatif::Tape got;
        std::vector<uint64_t> handles;
        size_t read = 0;
        bool same = true;
        while (reader.next(got, handles)) {
            const whatif::Tape& want = steps[read++];
            same = same && got.ops.size() == want.ops.size() && got.allocSeq == want.allocSeq &&
                   got.streamHandles == want.streamHandles;
            for (size_t i = 0; same && i < want.ops.size(); ++i)
                same = got.ops[i].ts == want.ops[i].ts && got.ops[i].value == want.ops[i].value &&
                       got.ops[i].kind == want.ops[i].kind;
        }
        writer.join();
        EXPECT_TRUE(same);
        if (abandon) {
            EXPECT_FALSE(reader.ok());
            EXPECT_FALSE(reader.atEnd());
            EXPECT_LE(read, written);
        } else {
            EXPECT_TRUE(reader.ok());
            EXPECT_TRUE(reader.atEnd());
            EXPECT_EQ(read, steps.size());
            EXPECT_EQ(handles, (std::vector<uint64_t>{11, 22, 33}));
        }
    }
}

// The spill's cap follows where it lands: a tmpfs gets the memory budget, a disk keeps its
// reserve. /dev/shm is the tmpfs every Linux test machine has.
TEST(WhatIfSpill, ASpillOnATmpfsKeepsToTheMemoryBudget) {
    struct statfs fs {};
    if (::statfs("/dev/shm", &fs) != 0 || fs.f_type != TMPFS_MAGIC)
        GTEST_SKIP() << "skipped: /dev/shm is not a tmpfs here";
    const char* old = std::getenv("TMPDIR");
    const std::string saved = old ? old : "";
    ::setenv("TMPDIR", "/dev/shm", 1);
    {
        whatif::TapeSpill spill;
        ASSERT_TRUE(spill.ok());
        EXPECT_LE(spill.cap(), whatif::TapeSpill::kMemoryCap);
    }
    ::setenv("TMPDIR", ".", 1); // the build tree: a disk, or at least not /dev/shm
    {
        whatif::TapeSpill spill;
        ASSERT_TRUE(spill.ok());
        struct statvfs vs {};
        ASSERT_EQ(::statvfs(".", &vs), 0);
        const uint64_t avail = uint64_t(vs.f_bavail) * vs.f_frsize;
        EXPECT_LE(spill.cap(), avail > whatif::TapeSpill::kKeepFree
                                   ? (avail - whatif::TapeSpill::kKeepFree) / 2 : 0);
        EXPECT_LE(spill.cap(), whatif::TapeSpill::kDefaultCap);
    }
    if (old) ::setenv("TMPDIR", saved.c_str(), 1);
    else ::unsetenv("TMPDIR");
}

// Without $TMPDIR, a /tmp held in memory leaves the spill to /var/tmp where that is a disk (a
// long trace's spill is gigabytes), and to the memory budget where neither is.
TEST(WhatIfSpill, ASpillLeavesATmpfsTmpForADiskVarTmp) {
    struct statfs fs {};
    if (::statfs("/dev/shm", &fs) != 0 || fs.f_type != TMPFS_MAGIC)
        GTEST_SKIP() << "skipped: /dev/shm is not a tmpfs here";
    if (::statfs(".", &fs) != 0 || fs.f_type == TMPFS_MAGIC || fs.f_type == RAMFS_MAGIC)
        GTEST_SKIP() << "skipped: the build tree is held in memory here";
    struct statvfs vs {};
    ASSERT_EQ(::statvfs(".", &vs), 0);
    const uint64_t avail = uint64_t(vs.f_bavail) * vs.f_frsize;
    const uint64_t diskCap = std::min(whatif::TapeSpill::kDefaultCap,
                                      avail > whatif::TapeSpill::kKeepFree ? (avail - whatif::TapeSpill::kKeepFree) / 2 : 0);
    if (diskCap < 4 * whatif::TapeSpill::kMemoryCap)
        GTEST_SKIP() << "skipped: too little free disk here to tell the two budgets apart";
    const char* old = std::getenv("TMPDIR");
    const std::string saved = old ? old : "";
    ::unsetenv("TMPDIR");
    whatif::detail::setSpillDirsForTests("/dev/shm", ".");
    {
        whatif::TapeSpill spill;
        ASSERT_TRUE(spill.ok());
        EXPECT_GT(spill.cap(), 2 * whatif::TapeSpill::kMemoryCap) << "the spill stayed on the tmpfs";
        EXPECT_LE(spill.cap(), whatif::TapeSpill::kDefaultCap);
    }
    whatif::detail::setSpillDirsForTests("/dev/shm", "/dev/shm");
    {
        whatif::TapeSpill spill;
        ASSERT_TRUE(spill.ok());
        EXPECT_LE(spill.cap(), whatif::TapeSpill::kMemoryCap);
    }
    whatif::detail::setSpillDirsForTests("/dev/shm", "./no such directory");
    {
        whatif::TapeSpill spill; // /var/tmp missing: the tmpfs, within its budget
        ASSERT_TRUE(spill.ok());
        EXPECT_LE(spill.cap(), whatif::TapeSpill::kMemoryCap);
    }
    whatif::detail::setSpillDirsForTests({}, {});
    if (old) ::setenv("TMPDIR", saved.c_str(), 1);
}

} // namespace
} // namespace poolscope
