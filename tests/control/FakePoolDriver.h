#pragma once
// In-memory control::PoolControl for tests: models the semantics the real driver has for what the
// control channel touches (see ../shared/seeds and GPU_FACTS.md):
//   - reserved grows when used exceeds it (allocation granularity ignored);
//   - at a synchronize, memory above the release threshold goes back: reserved becomes
//     min(reserved, max(used, threshold));
//   - trimTo(k) releases unused memory down to k but never below what is in use:
//     reserved becomes min(reserved, max(used, k));
//   - resetting watermarks sets both highs to the current values;
//   - the three reuse policies are booleans, on by default for a default pool.
// Recorded KnobChange events are kept in order, as the collector would append them to its trace.
// Thread-safe: the server thread drives it while the test thread inspects it.

#include "PoolControl.h"
#include "poolscope/control/UnixSocket.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <string>

namespace poolscope::control::test {

class FakePoolDriver : public PoolControl {
public:
    FakePoolDriver() {
        addPool(0x1000, 0, PoolKind::Default);
        addPool(0x2000, 1, PoolKind::Default);
    }

    void addPool(uint64_t handle, int device, PoolKind kind) {
        std::lock_guard lock(m_);
        PoolState s;
        s.info.handle = handle;
        s.info.device = device;
        s.info.kind = kind;
        s.reuseFollowEventDependencies = s.reuseAllowOpportunistic =
            s.reuseAllowInternalDependencies = true;
        pools_[handle] = s;
    }

    // The application side of the model.
    void alloc(uint64_t pool, uint64_t bytes) {
        std::lock_guard lock(m_);
        auto& p = pools_.at(pool);
        p.usedCurrent += bytes;
        if (p.usedCurrent > p.reservedCurrent) p.reservedCurrent = p.usedCurrent;
        bumpHighs(p);
    }
    void free(uint64_t pool, uint64_t bytes) {
        std::lock_guard lock(m_);
        auto& p = pools_.at(pool);
        p.usedCurrent -= std::min(bytes, p.usedCurrent);
    }
    void synchronize() {
        std::lock_guard lock(m_);
        for (auto& [h, p] : pools_)
            p.reservedCurrent =
                std::min(p.reservedCurrent, std::max(p.usedCurrent, p.releaseThreshold));
    }
    PoolState state(uint64_t pool) {
        std::lock_guard lock(m_);
        return pools_.at(pool);
    }
    void failNextSet(std::string message) {
        std::lock_guard lock(m_);
        failNext_ = std::move(message);
    }
    // The devices the target knows (a real one learns each at its first use there).
    void setDevices(std::vector<DeviceInfo> devices) {
        std::lock_guard lock(m_);
        devices_ = std::move(devices);
    }
    // A driver that clamps: models a driver reading back something else than requested.
    void clampThresholdTo(uint64_t v) {
        std::lock_guard lock(m_);
        clamp_ = v;
    }

    TargetDescription describe() override {
        TargetDescription d;
        d.process.pid = 4242;
        d.process.commandLine = "fake_workload --iterations 10";
        d.process.driverVersion = 13000;
        {
            std::lock_guard lock(m_);
            d.devices = devices_;
        }
        StreamInfo s;
        s.handle = 0x5000;
        s.device = 0;
        d.streams = {s};
        d.tracePath = "/tmp/fake.poolscope";
        return d;
    }
    Result<std::vector<PoolState>> listPools() override {
        std::lock_guard lock(m_);
        std::vector<PoolState> out;
        for (auto& [h, p] : pools_)
            out.push_back(p);
        return out;
    }
    Result<uint64_t> getAttribute(uint64_t pool, PoolAttr attr) override {
        std::lock_guard lock(m_);
        auto it = pools_.find(pool);
        if (it == pools_.end()) return notFound(pool);
        return it->second.attribute(attr);
    }
    Status setAttribute(uint64_t pool, PoolAttr attr, uint64_t value) override {
        std::lock_guard lock(m_);
        auto it = pools_.find(pool);
        if (it == pools_.end()) return notFound(pool);
        if (!failNext_.empty()) {
            std::string m = std::move(failNext_);
            failNext_.clear();
            return Error{ErrorCode::Io, m};
        }
        PoolState& p = it->second;
        switch (attr) {
        case PoolAttr::ReleaseThreshold:
            p.releaseThreshold = std::min(value, clamp_);
            break;
        case PoolAttr::ReuseFollowEventDependencies:
            p.reuseFollowEventDependencies = value;
            break;
        case PoolAttr::ReuseAllowOpportunistic:
            p.reuseAllowOpportunistic = value;
            break;
        case PoolAttr::ReuseAllowInternalDependencies:
            p.reuseAllowInternalDependencies = value;
            break;
        default:
            return Error{ErrorCode::InvalidArgument, "CUDA_ERROR_INVALID_VALUE: read-only"};
        }
        ++sets;
        return {};
    }
    Status trimTo(uint64_t pool, uint64_t keep) override {
        std::lock_guard lock(m_);
        auto it = pools_.find(pool);
        if (it == pools_.end()) return notFound(pool);
        PoolState& p = it->second;
        p.reservedCurrent = std::min(p.reservedCurrent, std::max(p.usedCurrent, keep));
        return {};
    }
    Status resetHighWatermarks(uint64_t pool) override {
        std::lock_guard lock(m_);
        auto it = pools_.find(pool);
        if (it == pools_.end()) return notFound(pool);
        it->second.reservedHigh = it->second.reservedCurrent;
        it->second.usedHigh = it->second.usedCurrent;
        return {};
    }

    // The recorder's part, as the collector does it: seq, time and thread.
    void recordKnobChange(const Event& change) override {
        std::lock_guard lock(m_);
        Event e = change;
        e.seq = ++seq_;
        e.tsNs = monotonicNs();
        e.tid = 1;
        knobChanges_.push_back(e);
    }
    std::vector<Event> knobChanges() {
        std::lock_guard lock(m_);
        return knobChanges_;
    }

    int sets = 0;

private:
    static Error notFound(uint64_t pool) {
        return Error{ErrorCode::NotFound, "no pool with handle " + std::to_string(pool)};
    }
    static void bumpHighs(PoolState& p) {
        p.reservedHigh = std::max(p.reservedHigh, p.reservedCurrent);
        p.usedHigh = std::max(p.usedHigh, p.usedCurrent);
    }
    std::mutex m_;
    std::map<uint64_t, PoolState> pools_;
    std::string failNext_;
    uint64_t clamp_ = ~uint64_t{0};
    std::vector<DeviceInfo> devices_ = {{0, "Fake GPU 0", 80ull << 30, "GPU-0"},
                                        {1, "Fake GPU 1", 80ull << 30, "GPU-1"}};
    std::vector<Event> knobChanges_;
    uint64_t seq_ = 0;
};

} // namespace poolscope::control::test
