// The collector's seam without CUDA: what POOLSCOPE_LISTEN means, and the server as the
// collector's writer sees it (a LiveSink, the only feed it has).
#include "ServerFixture.h"
#include "poolscope/control/Discovery.h"

using namespace poolscope;
using namespace poolscope::control;
using namespace poolscope::control::test;

TEST(ListenSetting, Values) {
    for (const char* off : {"0", "off", "No", "FALSE"}) {
        auto r = socketPathFromListen(off);
        ASSERT_TRUE(r) << off;
        EXPECT_FALSE(r->has_value()) << off;
    }
    for (const char* on : {"", "1", "on", "Yes", "true"}) {
        auto r = socketPathFromListen(on);
        ASSERT_TRUE(r) << on;
        ASSERT_TRUE(r->has_value()) << on;
        EXPECT_EQ(**r, "") << "the discoverable default socket";
    }
    auto u = socketPathFromListen("unix:/tmp/x.sock");
    ASSERT_TRUE(u && u->has_value());
    EXPECT_EQ(**u, "/tmp/x.sock");
    auto p = socketPathFromListen("/run/y.sock");
    ASSERT_TRUE(p && p->has_value());
    EXPECT_EQ(**p, "/run/y.sock");
    auto tcp = socketPathFromListen("127.0.0.1:7700");
    ASSERT_FALSE(tcp);
    EXPECT_EQ(tcp.error().code, ErrorCode::InvalidArgument);
    EXPECT_NE(tcp.error().message.find("only local Unix sockets"), std::string::npos);
}

TEST_F(ServerTest, WriterFeedsClientsThroughLiveSink) {
    ControlServer& s = startServer();
    collector::LiveSink& live = s; // what TraceSink holds
    ClientOptions o;
    o.subscribeEvents = true;
    auto c = connect(o);
    ASSERT_TRUE(c);
    PoolInfo pool;
    pool.handle = 0x1000;
    live.onPool(pool); // entities need no forwarding: the hello and ListPools read the target
    Event e;
    e.seq = 42;
    live.onEvents(std::span(&e, 1));
    bool got = false;
    for (int i = 0; i < 50 && !got; ++i) {
        ASSERT_TRUE(c->pump(100));
        Incoming in;
        while (c->nextIncoming(in))
            if (in.kind == Incoming::Kind::Events && in.events.size() == 1 &&
                in.events[0].seq == 42)
                got = true;
    }
    EXPECT_TRUE(got);
    live.stop();
    EXPECT_FALSE(s.running());
}
