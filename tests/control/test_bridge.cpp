// The adapter between the collector's seam (collector/src/ControlHook.h) and the server:
// startControlServer() with a fake CollectorApi, driven through the real client.
#include "ControlHook.h"
#include "ServerFixture.h"

#include <map>
#include <mutex>

using namespace poolscope;
using namespace poolscope::control;

namespace {

class FakeApi : public collector::CollectorApi {
public:
    ProcessInfo process() const override {
        ProcessInfo p;
        p.pid = 777;
        return p;
    }
    std::vector<DeviceInfo> devices() const override { return {{0, "dev", 0, ""}}; }
    std::vector<PoolInfo> pools() const override {
        PoolInfo p;
        p.handle = 0xabc;
        p.device = 0;
        return {p}; // kind left Unknown, as the collector reports it today
    }
    Result<uint64_t> poolAttribute(uint64_t pool, PoolAttr attr) override {
        std::lock_guard lock(m);
        if (pool != 0xabc) return Error{ErrorCode::InvalidArgument, "CUDA_ERROR_INVALID_VALUE"};
        return attrs[attr];
    }
    Result<uint64_t> setPoolAttribute(uint64_t pool, PoolAttr attr, uint64_t value,
                                      KnobOrigin origin) override {
        std::lock_guard lock(m);
        calls.push_back({attr, value, origin});
        if (pool != 0xabc) return Error{ErrorCode::InvalidArgument, "CUDA_ERROR_INVALID_VALUE"};
        attrs[attr] = value;
        return value;
    }
    Status trimPool(uint64_t, uint64_t keep, KnobOrigin origin) override {
        std::lock_guard lock(m);
        calls.push_back({PoolAttr(1001), keep, origin});
        attrs[PoolAttr::ReservedMemCurrent] = std::max(keep, attrs[PoolAttr::UsedMemCurrent]);
        return {};
    }
    struct Call {
        PoolAttr attr;
        uint64_t value;
        KnobOrigin origin;
    };
    std::mutex m;
    std::map<PoolAttr, uint64_t> attrs{{PoolAttr::ReservedMemCurrent, 500},
                                       {PoolAttr::UsedMemCurrent, 100},
                                       {PoolAttr::ReservedMemHigh, 900}};
    std::vector<Call> calls;
};

} // namespace

TEST(CollectorBridge, ListenValuesAndKnobsThroughCollectorApi) {
    char tmpl[] = "/tmp/pscp-bridge-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    std::string sock = std::string(tmpl) + "/t.sock";
    FakeApi api;
    EXPECT_EQ(collector::startControlServer("0", api), nullptr);
    EXPECT_EQ(collector::startControlServer("127.0.0.1:7700", api), nullptr);
    auto live = collector::startControlServer("unix:" + sock, api);
    ASSERT_NE(live, nullptr);

    ClientOptions o;
    o.origin = KnobOrigin::Script;
    auto c = ControlClient::connect(sock, o);
    ASSERT_TRUE(c) << c.error().message;
    EXPECT_EQ((*c)->hello().process.pid, 777);
    EXPECT_FALSE((*c)->hello().process.commandLine.empty()) << "filled from /proc/self";
    ASSERT_EQ((*c)->hello().pools.size(), 1u);
    EXPECT_EQ((*c)->hello().pools[0].reservedCurrent, 500u);

    auto a = (*c)->set(0xabc, PoolAttr::ReleaseThreshold, 64);
    ASSERT_TRUE(a) << a.error().message;
    EXPECT_EQ(a->value, 64u);
    auto t = (*c)->trimTo(0xabc, 0);
    ASSERT_TRUE(t);
    EXPECT_EQ(t->oldValue, 500u);
    EXPECT_EQ(t->value, 100u);
    ASSERT_TRUE((*c)->resetWatermarks(0xabc));
    auto bad = (*c)->set(0x999, PoolAttr::ReleaseThreshold, 1);
    ASSERT_FALSE(bad);
    EXPECT_EQ(bad.error().code, ErrorCode::NotFound);

    std::lock_guard lock(api.m);
    ASSERT_EQ(api.calls.size(), 4u) << "the unknown pool never reached the driver";
    EXPECT_EQ(api.calls[0].attr, PoolAttr::ReleaseThreshold);
    EXPECT_EQ(api.calls[0].origin, KnobOrigin::Script);
    EXPECT_EQ(int(api.calls[1].attr), 1001);
    EXPECT_EQ(api.calls[2].attr, PoolAttr::ReservedMemHigh);
    EXPECT_EQ(api.calls[2].value, 0u);
    EXPECT_EQ(api.calls[3].attr, PoolAttr::UsedMemHigh);

    // Events the collector writes reach a subscribed client.
    ASSERT_TRUE((*c)->subscribe(true));
    Event e;
    e.seq = 42;
    live->onEvents(std::span(&e, 1));
    bool got = false;
    for (int i = 0; i < 50 && !got; ++i) {
        ASSERT_TRUE((*c)->pump(100));
        Incoming in;
        while ((*c)->nextIncoming(in))
            if (in.kind == Incoming::Kind::Events && in.events.size() == 1 &&
                in.events[0].seq == 42)
                got = true;
    }
    EXPECT_TRUE(got);
    live->stop();
    rmdir(tmpl);
}
