#pragma once
// A hand-built two-device trace (issue #19): NOT a recording. What the collector would write for a
// program that uses GPU 0 and GPU 1 from one thread: each device's default pool and an explicit
// pool, cudaMallocAsync on each device's streams, an explicit pool opened to the other device
// (cudaMemPoolSetAccess), and peer copies both ways. Its metadata, command line and device
// names say it was built by hand. Shared by the core tests and the window's screenshot.

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "poolscope/Entities.h"
#include "poolscope/EventFields.h"
#include "poolscope/Result.h"
#include "poolscope/TraceWriter.h"
#include "poolscope/replay/Replay.h"

namespace poolscope::test {

struct TwoDeviceBuilt {
    static constexpr uint64_t kDefault0 = 0x7f00d0000000ull, kExplicit0 = 0x7f00e0000000ull;
    static constexpr uint64_t kDefault1 = 0x7f01d0000000ull, kExplicit1 = 0x7f01e0000000ull;
    static constexpr uint64_t kStream0 = 0x5555000100ull;  // GPU 0
    static constexpr uint64_t kStream1 = 0x5555001100ull;  // GPU 1
    static constexpr uint64_t kStream1b = 0x5555001200ull; // GPU 1, the explicit pool's
    std::vector<DeviceInfo> devices;
    std::vector<PoolInfo> pools;
    std::vector<StreamInfo> streams;
    std::vector<Event> events; // completed as the collector's writer would (free sizes)
    // What the generator itself counted, for the tests to compare with.
    uint64_t peerCopies01 = 0, peerBytes01 = 0, peerCopies10 = 0, peerBytes10 = 0;
    uint64_t allocs[2] = {0, 0};
};

inline TwoDeviceBuilt twoDeviceBuilt() {
    constexpr uint64_t MiB = uint64_t{1} << 20;
    constexpr int64_t ms = 1'000'000;
    TwoDeviceBuilt b;
    for (int d = 0; d < 2; ++d) {
        DeviceInfo di;
        di.ordinal = d;
        di.name = "Hand-built GPU " + std::to_string(d) + " (not a recording)";
        di.totalMemory = uint64_t{80} << 30;
        b.devices.push_back(di);
    }
    auto pool = [&](uint64_t h, int dev, PoolKind k) {
        PoolInfo p;
        p.handle = h;
        p.device = dev;
        p.kind = k;
        p.locationType = 1;
        p.locationId = dev;
        b.pools.push_back(p);
    };
    pool(TwoDeviceBuilt::kDefault0, 0, PoolKind::Default);
    pool(TwoDeviceBuilt::kDefault1, 1, PoolKind::Default);
    auto stream = [&](uint64_t h, int dev) {
        StreamInfo s;
        s.handle = h;
        s.device = dev;
        b.streams.push_back(s);
    };
    stream(TwoDeviceBuilt::kStream0, 0);
    stream(TwoDeviceBuilt::kStream1, 1);
    stream(TwoDeviceBuilt::kStream1b, 1);

    std::vector<Event>& ev = b.events;
    uint64_t seq = 1;
    auto add = [&](EventKind k, int64_t ts, int dev) -> Event& {
        Event e;
        e.seq = seq++;
        e.tsNs = ts;
        e.kind = k;
        e.device = static_cast<int16_t>(dev);
        e.tid = 4242;
        ev.push_back(e);
        return ev.back();
    };
    struct PoolState {
        uint64_t reserved = 0, used = 0, slack = 0;
    };
    std::map<uint64_t, PoolState> st;
    st[TwoDeviceBuilt::kDefault0].slack = 24 * MiB;
    st[TwoDeviceBuilt::kDefault1].slack = 40 * MiB;
    st[TwoDeviceBuilt::kExplicit0].slack = 8 * MiB;
    st[TwoDeviceBuilt::kExplicit1].slack = 0;
    auto wm = [&](Event& e, uint64_t p) {
        e.flags |= kHasWatermarks;
        e.reserved = st[p].reserved;
        e.used = st[p].used;
    };
    auto alloc = [&](int64_t t, int dev, uint64_t s, uint64_t p, uint64_t ptr, uint64_t n,
                     AllocApi api) {
        PoolState& ps = st[p];
        ps.used += n;
        ps.reserved = std::max(ps.reserved, ps.used + ps.slack);
        Event& e = add(EventKind::Alloc, t, dev);
        AllocFields{ptr, n, api}.into(e);
        e.stream = s;
        e.pool = p;
        wm(e, p);
        b.allocs[dev]++;
    };
    auto free = [&](int64_t t, int dev, uint64_t s, uint64_t p, uint64_t ptr, uint64_t n) {
        PoolState& ps = st[p];
        ps.used -= n;
        // Release threshold 0, released at once: each pool's reserved follows its own working
        // set, so the device's pools peak at different times.
        ps.reserved = ps.used ? ps.used + ps.slack : 0;
        Event& e = add(EventKind::Free, t, dev);
        FreeFields{ptr, std::nullopt}.into(e);
        e.stream = s;
        e.pool = p;
        wm(e, p);
    };
    auto create = [&](int64_t t, int dev, uint64_t p) {
        Event& e = add(EventKind::PoolCreate, t, dev);
        e.pool = p;
        PoolCreateFields f{PoolKind::Explicit};
        f.locationType = 1;
        f.into(e);
        wm(e, p);
    };
    auto access = [&](int64_t t, uint64_t p, int toDevice, uint32_t flags) {
        Event& e = add(EventKind::PoolSetAccess, t, toDevice);
        e.pool = p;
        SetAccessFields{flags, 1, 1}.into(e);
    };
    auto peer = [&](int64_t t, int streamDev, uint64_t s, int src, int dst, uint64_t n) {
        Event& e = add(EventKind::PeerCopy, t, streamDev);
        PeerCopyFields{0xC000'0000 + uint64_t(seq) * 0x1000, 0xB000'0000, n, src, dst,
                       PeerCopyApi::Async}
            .into(e);
        e.stream = s;
        (src == 0 ? b.peerCopies01 : b.peerCopies10)++;
        (src == 0 ? b.peerBytes01 : b.peerBytes10) += n;
    };

    for (uint64_t s : {TwoDeviceBuilt::kStream0, TwoDeviceBuilt::kStream1,
                       TwoDeviceBuilt::kStream1b}) {
        Event& e = add(EventKind::StreamCreate, 0, s == TwoDeviceBuilt::kStream0 ? 0 : 1);
        e.stream = s;
        StreamCreateFields{1, 0}.into(e);
    }
    create(1 * ms, 0, TwoDeviceBuilt::kExplicit0);
    create(2 * ms, 1, TwoDeviceBuilt::kExplicit1);
    access(3 * ms, TwoDeviceBuilt::kExplicit0, 1, 3); // GPU 1 reads and writes GPU 0's pool
    access(4 * ms, TwoDeviceBuilt::kExplicit1, 0, 1); // GPU 0 reads GPU 1's pool
    struct Live {
        int64_t until;
        int dev;
        uint64_t s, p, ptr, n;
    };
    std::vector<Live> live;
    for (int i = 0; i < 48; ++i) {
        const int64_t t = 10 * ms + i * 5 * ms;
        for (auto it = live.begin(); it != live.end();) {
            if (it->until <= t) {
                free(t, it->dev, it->s, it->p, it->ptr, it->n);
                it = live.erase(it);
            } else {
                ++it;
            }
        }
        const uint64_t ptr = 0x7000'0000'0000 + uint64_t(i) * 0x1000'0000;
        // GPU 0's default pool, a growing then shrinking working set.
        const uint64_t n0 = (8 + uint64_t(i < 24 ? i : 48 - i) / 3 * 4) * MiB;
        alloc(t + 1 * ms, 0, TwoDeviceBuilt::kStream0, TwoDeviceBuilt::kDefault0, ptr, n0,
              AllocApi::Async);
        live.push_back({t + 1 * ms + 12 * ms, 0, TwoDeviceBuilt::kStream0,
                        TwoDeviceBuilt::kDefault0, ptr, n0});
        // GPU 1's default pool, busiest in the second half.
        const uint64_t n1 = (12 + uint64_t(i) / 4 * 6) * MiB;
        alloc(t + 2 * ms, 1, TwoDeviceBuilt::kStream1, TwoDeviceBuilt::kDefault1, ptr + 0x100'0000,
              n1, AllocApi::Async);
        live.push_back({t + 2 * ms + 9 * ms, 1, TwoDeviceBuilt::kStream1,
                        TwoDeviceBuilt::kDefault1, ptr + 0x100'0000, n1});
        if (i % 4 == 0 && i <= 8) { // GPU 0's explicit pool: long-lived blocks, early
            alloc(t + 3 * ms, 0, TwoDeviceBuilt::kStream0, TwoDeviceBuilt::kExplicit0,
                  ptr + 0x200'0000, 48 * MiB, AllocApi::FromPool);
            live.push_back({t + 3 * ms + 25 * ms, 0, TwoDeviceBuilt::kStream0,
                            TwoDeviceBuilt::kExplicit0, ptr + 0x200'0000, 48 * MiB});
        }
        if (i % 8 == 4 && i < 24) { // GPU 1's explicit pool, on its second stream, early
            alloc(t + 3 * ms, 1, TwoDeviceBuilt::kStream1b, TwoDeviceBuilt::kExplicit1,
                  ptr + 0x300'0000, 64 * MiB, AllocApi::FromPool);
            live.push_back({t + 3 * ms + 30 * ms, 1, TwoDeviceBuilt::kStream1b,
                            TwoDeviceBuilt::kExplicit1, ptr + 0x300'0000, 64 * MiB});
        }
        if (i % 4 == 1)
            peer(t + 4 * ms, 1, TwoDeviceBuilt::kStream1, 0, 1, 16 * MiB);
        if (i % 12 == 7)
            peer(t + 4 * ms, 0, TwoDeviceBuilt::kStream0, 1, 0, 4 * MiB);
    }
    const int64_t end = 10 * ms + 48 * 5 * ms;
    for (const Live& l : live) free(end, l.dev, l.s, l.p, l.ptr, l.n);
    replay::Replay r; // the free sizes, as the collector's writer fills them
    for (Event& e : ev) r.complete(e);
    return b;
}

inline Status writeTwoDeviceBuiltTrace(const std::string& path, TwoDeviceBuilt* out = nullptr) {
    const TwoDeviceBuilt b = twoDeviceBuilt();
    auto w = TraceWriter::create(path);
    if (!w) return w.error();
    ProcessInfo proc;
    proc.pid = 4242;
    proc.commandLine = "hand-built two-device trace from tests/core/MultiGpuBuilt.h (not a recording)";
    proc.host = "hand-built";
    if (Status s = (*w)->setProcess(proc); !s) return s;
    if (Status s = (*w)->setMeta("synthetic", "hand-built by tests/core/MultiGpuBuilt.h; not recorded on a GPU"); !s)
        return s;
    for (const DeviceInfo& d : b.devices)
        if (Status s = (*w)->addDevice(d); !s) return s;
    for (const PoolInfo& p : b.pools)
        if (Status s = (*w)->addPool(p); !s) return s;
    for (const StreamInfo& s : b.streams)
        if (Status st = (*w)->addStream(s); !st) return st;
    if (Status s = (*w)->append(b.events); !s) return s;
    if (Status s = (*w)->close(); !s) return s;
    if (out) *out = b;
    return {};
}

} // namespace poolscope::test
