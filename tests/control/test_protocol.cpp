// Protocol round trips and rejection of bad messages, without sockets.
#include "poolscope/control/FrameReader.h"
#include "poolscope/control/Protocol.h"

#include <cstring>
#include <gtest/gtest.h>

using namespace poolscope;
using namespace poolscope::control;

namespace {

// Splits a complete frame into header and payload through the reader, as a receiver would.
Frame readOne(const std::vector<uint8_t>& bytes) {
    FrameReader r;
    r.append(bytes.data(), bytes.size());
    Frame f;
    EXPECT_EQ(r.next(f), FrameReader::Status::Frame) << r.error();
    EXPECT_EQ(r.buffered(), 0u);
    return f;
}

std::span<const uint8_t> text(const std::string& s) {
    return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

PoolState samplePool() {
    PoolState s;
    s.info.handle = 0x7f00deadbeef;
    s.info.device = 1;
    s.info.kind = PoolKind::Explicit;
    s.info.maxSize = 1ull << 34;
    s.releaseThreshold = ~uint64_t{0};
    s.reuseAllowOpportunistic = true;
    s.reservedCurrent = 21ull << 30;
    s.reservedHigh = 22ull << 30;
    s.usedCurrent = 5 << 20;
    s.usedHigh = 6 << 20;
    return s;
}

} // namespace

TEST(Protocol, ClientHelloRoundTrip) {
    ClientHello h;
    h.client = "poolscope-gui 0.1";
    h.origin = KnobOrigin::Gui;
    h.subscribeEvents = true;
    Frame f = readOne(encodeClientHello(h));
    EXPECT_EQ(f.header.type, MsgType::ClientHello);
    EXPECT_EQ(f.header.version, kProtocolVersion);
    auto d = decodeClientHello(f.payload);
    ASSERT_TRUE(d) << d.error().message;
    EXPECT_EQ(d->client, h.client);
    EXPECT_EQ(d->origin, KnobOrigin::Gui);
    EXPECT_TRUE(d->subscribeEvents);
    EXPECT_EQ(d->protocol, kProtocolVersion);
}

TEST(Protocol, ServerHelloRoundTripKeepsFullRangeValues) {
    ServerHello h;
    h.server = "poolscope collector";
    h.process.pid = 1234;
    h.process.commandLine = "python train.py --épochs 3"; // non-ASCII survives
    h.process.driverVersion = 13000;
    h.devices = {{0, "NVIDIA H200", 141ull << 30, "GPU-abc"}};
    h.pools = {samplePool()};
    StreamInfo s;
    s.handle = 0xffffffffffffffffull;
    s.device = 0;
    s.priority = -2;
    h.streams = {s};
    h.tracePath = "/tmp/x.poolscope";
    auto d = decodeServerHello(readOne(encodeServerHello(h)).payload);
    ASSERT_TRUE(d) << d.error().message;
    EXPECT_EQ(d->process.pid, 1234);
    EXPECT_EQ(d->process.commandLine, h.process.commandLine);
    ASSERT_EQ(d->devices.size(), 1u);
    EXPECT_EQ(d->devices[0].totalMemory, 141ull << 30);
    ASSERT_EQ(d->pools.size(), 1u);
    const PoolState& p = d->pools[0];
    EXPECT_EQ(p.info.handle, 0x7f00deadbeefull);
    EXPECT_EQ(p.info.kind, PoolKind::Explicit);
    EXPECT_EQ(p.releaseThreshold, ~uint64_t{0}); // UINT64_MAX exact, not a double
    EXPECT_TRUE(p.reuseAllowOpportunistic);
    EXPECT_FALSE(p.reuseFollowEventDependencies);
    EXPECT_EQ(p.reservedCurrent, 21ull << 30);
    EXPECT_EQ(p.usedHigh, 6u << 20);
    ASSERT_EQ(d->streams.size(), 1u);
    EXPECT_EQ(d->streams[0].handle, 0xffffffffffffffffull);
    EXPECT_EQ(d->streams[0].priority, -2);
    EXPECT_EQ(d->tracePath, h.tracePath);
}

TEST(Protocol, RequestAckErrorNoticeRoundTrip) {
    Request r{Op::Set, 0x1234, uint16_t(PoolAttr::ReleaseThreshold), ~uint64_t{0}};
    Frame f = readOne(encodeRequest(r, 77));
    EXPECT_EQ(f.header.requestId, 77u);
    auto rd = decodeRequest(f.payload);
    ASSERT_TRUE(rd);
    EXPECT_EQ(rd->op, Op::Set);
    EXPECT_EQ(rd->pool, 0x1234u);
    EXPECT_EQ(rd->value, ~uint64_t{0});

    Ack a;
    a.op = Op::Set;
    a.pool = 0x1234;
    a.attr = uint16_t(PoolAttr::ReleaseThreshold);
    a.requested = 64 << 20;
    a.hasOld = true;
    a.oldValue = 0;
    a.value = 64 << 20;
    a.state = samplePool();
    f = readOne(encodeAck(a, 77));
    EXPECT_EQ(f.header.type, MsgType::Ack);
    auto ad = decodeAck(f.payload);
    ASSERT_TRUE(ad);
    EXPECT_EQ(ad->op, Op::Set);
    EXPECT_TRUE(ad->hasOld);
    EXPECT_EQ(ad->oldValue, 0u);
    EXPECT_EQ(ad->value, 64u << 20);
    ASSERT_TRUE(ad->state.has_value());
    EXPECT_EQ(ad->state->reservedCurrent, 21ull << 30);

    Ack list;
    list.op = Op::ListPools;
    list.pools = {samplePool(), samplePool()};
    auto ld = decodeAck(readOne(encodeAck(list, 1)).payload);
    ASSERT_TRUE(ld);
    EXPECT_EQ(ld->pools.size(), 2u);
    EXPECT_FALSE(ld->hasOld);
    EXPECT_TRUE(ld->devices.empty());

    // ListPools carries the devices known now (a target learns one at its first use there,
    // after the hello): an optional field, so neither side's version changes.
    list.devices = {{0, "NVIDIA H100 80GB HBM3", 80ull << 30, "GPU-abc"}, {3, "", 0, ""}};
    ld = decodeAck(readOne(encodeAck(list, 2)).payload);
    ASSERT_TRUE(ld);
    ASSERT_EQ(ld->devices.size(), 2u);
    EXPECT_EQ(ld->devices[0].name, "NVIDIA H100 80GB HBM3");
    EXPECT_EQ(ld->devices[0].totalMemory, 80ull << 30);
    EXPECT_EQ(ld->devices[0].uuid, "GPU-abc");
    EXPECT_EQ(ld->devices[1].ordinal, 3);
    // What a server from before the field sends: no "devices" key at all.
    const std::string old = R"({"op":"list_pools","pool":0,"attr":0,"requested":0,"value":0,"pools":[]})";
    ld = decodeAck(std::span(reinterpret_cast<const uint8_t*>(old.data()), old.size()));
    ASSERT_TRUE(ld);
    EXPECT_TRUE(ld->devices.empty());
    // ...and what a client from before it reads: the same ack with a key it does not know.
    const std::string newer = R"({"op":"list_pools","pools":[],"devices":[{"ordinal":0}],"x":1})";
    ld = decodeAck(std::span(reinterpret_cast<const uint8_t*>(newer.data()), newer.size()));
    ASSERT_TRUE(ld);
    EXPECT_EQ(ld->devices.size(), 1u);

    auto ed =
        decodeError(readOne(encodeError({RemoteError::NoSuchPool, "no pool 0x1"}, 5)).payload);
    ASSERT_TRUE(ed);
    EXPECT_EQ(ed->code, RemoteError::NoSuchPool);
    EXPECT_EQ(ed->message, "no pool 0x1");

    auto nd = decodeNotice(readOne(encodeNotice({12, 40, "dropped 12"})).payload);
    ASSERT_TRUE(nd);
    EXPECT_EQ(nd->dropped, 12u);
    EXPECT_EQ(nd->totalDropped, 40u);
}

TEST(Protocol, EventBatchRoundTripIsBitExact) {
    std::vector<Event> ev(100);
    for (size_t i = 0; i < ev.size(); ++i) {
        ev[i].seq = i + 1;
        ev[i].tsNs = int64_t(i) * 1000;
        ev[i].kind = i % 2 ? EventKind::Free : EventKind::Alloc;
        ev[i].size = i * 4096;
        ev[i].pool = 0xabc;
        ev[i].flags = kHasWatermarks;
    }
    std::vector<uint8_t> bytes;
    appendEventBatch(bytes, ev);
    appendEventBatch(bytes, std::span<const Event>(ev).first(3));
    FrameReader r;
    r.append(bytes.data(), bytes.size());
    Frame f;
    ASSERT_EQ(r.next(f), FrameReader::Status::Frame);
    EXPECT_EQ(f.header.type, MsgType::EventBatch);
    auto d = decodeEventBatch(f.payload);
    ASSERT_TRUE(d);
    ASSERT_EQ(d->size(), ev.size());
    EXPECT_EQ(std::memcmp(d->data(), ev.data(), ev.size() * sizeof(Event)), 0);
    ASSERT_EQ(r.next(f), FrameReader::Status::Frame);
    EXPECT_EQ(decodeEventBatch(f.payload)->size(), 3u);
    EXPECT_EQ(r.next(f), FrameReader::Status::NeedMore);
}

TEST(Protocol, ReaderReassemblesByteByByte) {
    std::vector<uint8_t> bytes = encodeRequest({Op::Ping, 0, 0, 0}, 9);
    auto more = encodeRequest({Op::Get, 1, 4, 0}, 10);
    bytes.insert(bytes.end(), more.begin(), more.end());
    FrameReader r;
    std::vector<uint32_t> ids;
    Frame f;
    for (uint8_t b : bytes) {
        r.append(&b, 1);
        while (r.next(f) == FrameReader::Status::Frame)
            ids.push_back(f.header.requestId);
    }
    EXPECT_EQ(ids, (std::vector<uint32_t>{9, 10}));
}

TEST(Protocol, ReaderRejectsBadMagicAndOversize) {
    FrameReader r;
    const char junk[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    r.append(reinterpret_cast<const uint8_t*>(junk), sizeof junk);
    Frame f;
    EXPECT_EQ(r.next(f), FrameReader::Status::Failed);
    EXPECT_NE(r.error().find("magic"), std::string::npos);
    // Once failed it stays failed: the stream cannot be trusted.
    auto ok = encodeRequest({Op::Ping, 0, 0, 0}, 1);
    r.append(ok.data(), ok.size());
    EXPECT_EQ(r.next(f), FrameReader::Status::Failed);

    FrameReader small(kMaxRequestPayload);
    FrameHeader h;
    h.type = MsgType::Request;
    h.length = kMaxRequestPayload + 1;
    small.append(reinterpret_cast<const uint8_t*>(&h), sizeof h);
    EXPECT_EQ(small.next(f), FrameReader::Status::Failed);
    EXPECT_NE(small.error().find("exceeds the limit"), std::string::npos);
}

TEST(Protocol, DecodersRejectMalformedPayloads) {
    EXPECT_FALSE(decodeRequest(text("")));
    EXPECT_FALSE(decodeRequest(text("{")));
    EXPECT_FALSE(decodeRequest(text("[1,2]")));
    EXPECT_FALSE(decodeRequest(text("{\"pool\": 1}")));                      // no op
    EXPECT_FALSE(decodeRequest(text("{\"op\": \"explode\"}")));              // unknown op
    EXPECT_FALSE(decodeRequest(text("{\"op\": \"set\", \"pool\": -1}")));    // negative handle
    EXPECT_FALSE(decodeRequest(text("{\"op\": \"set\", \"attr\": 70000}"))); // out of uint16
    EXPECT_FALSE(decodeRequest(text("{\"op\": \"set\", \"value\": \"64MiB\"}")));
    EXPECT_FALSE(decodeRequest(text("{\"op\": \"set\", \"value\": 3.7}")));
    EXPECT_TRUE(decodeRequest(text("{\"op\": \"set\", \"value\": 18446744073709551615}")));
    EXPECT_FALSE(decodeClientHello(text("{\"client\": \"x\"}"))); // no protocol
    EXPECT_FALSE(decodeClientHello(text("{\"protocol\": 1, \"origin\": \"martian\"}")));
    auto e = decodeRequest(text("{\"op\": 3}"));
    ASSERT_FALSE(e);
    EXPECT_EQ(e.error().code, ErrorCode::Protocol);
    EXPECT_NE(e.error().message.find("malformed request"), std::string::npos);

    EXPECT_FALSE(decodeEventBatch(text("abc")));
    EventBatchHeader b;
    b.count = 2;
    std::vector<uint8_t> p(sizeof b + sizeof(Event)); // claims 2, carries 1
    std::memcpy(p.data(), &b, sizeof b);
    EXPECT_FALSE(decodeEventBatch(p));
    b.count = 1;
    b.eventSize = 64; // another Event layout
    std::memcpy(p.data(), &b, sizeof b);
    auto bad = decodeEventBatch(p);
    ASSERT_FALSE(bad);
    EXPECT_NE(bad.error().message.find("64-byte"), std::string::npos);
}

TEST(Protocol, AttributeNames) {
    PoolAttr a;
    ASSERT_TRUE(attrFromCliName("release-threshold", a));
    EXPECT_EQ(a, PoolAttr::ReleaseThreshold);
    ASSERT_TRUE(attrFromCliName("reuse_allow_opportunistic", a));
    EXPECT_EQ(a, PoolAttr::ReuseAllowOpportunistic);
    ASSERT_TRUE(attrFromCliName("reserved-mem-current", a));
    EXPECT_EQ(a, PoolAttr::ReservedMemCurrent);
    EXPECT_FALSE(attrFromCliName("threshold-ish", a));
    EXPECT_TRUE(attrIsSettable(PoolAttr::ReleaseThreshold));
    EXPECT_TRUE(attrIsSettable(PoolAttr::ReuseFollowEventDependencies));
    EXPECT_FALSE(attrIsSettable(PoolAttr::ReservedMemHigh));
    for (uint16_t v = 1; v <= 8; ++v) {
        ASSERT_TRUE(attrFromCliName(attrCliName(PoolAttr(v)), a));
        EXPECT_EQ(uint16_t(a), v);
    }
}

TEST(Protocol, VersionMismatchMessageIsPlain) {
    std::string m = versionMismatchMessage(7, true);
    EXPECT_NE(m.find("protocol mismatch"), std::string::npos);
    EXPECT_NE(m.find("version 7"), std::string::npos);
}
