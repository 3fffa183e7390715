// Fuzz-style robustness: random and mutated frames thrown at a live server, which must keep
// serving well-behaved clients throughout. Deterministic seed, bounded count and time.
#include "ServerFixture.h"

#include <climits>
#include <cstdlib>
#include <cstring>
#include <random>

using namespace poolscope;
using namespace poolscope::control;
using namespace poolscope::control::test;

namespace {

std::vector<uint8_t> validFrame(std::mt19937_64& rng) {
    switch (rng() % 5) {
    case 0:
        return encodeClientHello({});
    case 1:
        return encodeRequest({Op::Set, 0x1000, uint16_t(PoolAttr::ReleaseThreshold), rng()}, 1);
    case 2:
        return encodeRequest({Op::Get, 0x2000, uint16_t(1 + rng() % 8), 0}, 2);
    case 3:
        return encodeRequest({Op::TrimTo, 0x1000, 0, rng() % (1u << 30)}, 3);
    default:
        return encodeRequest({Op(rng() % 9), rng() % 3 ? 0x1000 : rng(), uint16_t(rng()), rng()},
                             4);
    }
}

void mutate(std::vector<uint8_t>& b, std::mt19937_64& rng) {
    switch (rng() % 7) {
    case 0: // flip a few bytes anywhere (header included)
        for (int i = 0, n = 1 + int(rng() % 4); i < n && !b.empty(); ++i)
            b[rng() % b.size()] ^= uint8_t(rng());
        break;
    case 1: // truncate
        b.resize(rng() % (b.size() + 1));
        break;
    case 2: { // lie about the length
        FrameHeader h;
        std::memcpy(&h, b.data(), sizeof h);
        h.length = uint32_t(rng());
        std::memcpy(b.data(), &h, sizeof h);
        break;
    }
    case 3: { // wrong type or version
        FrameHeader h;
        std::memcpy(&h, b.data(), sizeof h);
        if (rng() % 2)
            h.type = MsgType(rng() % 12);
        else
            h.version = uint16_t(rng());
        std::memcpy(b.data(), &h, sizeof h);
        break;
    }
    case 4: { // replace the JSON with garbage of the same length
        for (size_t i = sizeof(FrameHeader); i < b.size(); ++i)
            b[i] = uint8_t(rng());
        break;
    }
    case 5: { // valid framing, hostile JSON values
        static const char* kJson[] = {
            "{\"op\":\"set\",\"pool\":4096,\"attr\":4,\"value\":-1}",
            "{\"op\":\"set\",\"pool\":4096,\"attr\":4,\"value\":1e400}",
            "{\"op\":\"set\",\"pool\":4096,\"attr\":4,\"value\":{\"a\":[[[[[[]]]]]]}}",
            "{\"op\":\"get\",\"pool\":18446744073709551616,\"attr\":4}",
            "{\"op\":null}",
            "\"just a string\"",
            "{\"op\":\"trim_to\",\"pool\":4096,\"value\":\"\\ud800\"}",
            "{\"protocol\":1,\"origin\":\"gui\",\"subscribe_events\":\"yes\"}",
        };
        std::string j = kJson[rng() % std::size(kJson)];
        FrameHeader h;
        std::memcpy(&h, b.data(), sizeof h);
        h.length = uint32_t(j.size());
        b.assign(reinterpret_cast<uint8_t*>(&h), reinterpret_cast<uint8_t*>(&h) + sizeof h);
        b.insert(b.end(), j.begin(), j.end());
        break;
    }
    default: // pure noise
        b.resize(rng() % 512);
        for (auto& x : b)
            x = uint8_t(rng());
    }
}

} // namespace

TEST_F(ServerTest, SurvivesRandomAndMutatedFrames) {
    ServerOptions so;
    so.helloTimeoutMs = 300;
    ControlServer& s = startServer(so);
    std::mt19937_64 rng(20261121);
    auto watcher = connect(); // a well-behaved client connected throughout
    ASSERT_TRUE(watcher);
    const int kRounds = 300;
    const int64_t kBudgetMs = 20000;
    int64_t start = monotonicMs();
    int rounds = 0;
    for (; rounds < kRounds && monotonicMs() - start < kBudgetMs; ++rounds) {
        RawConn raw(s.socketPath());
        ASSERT_GE(raw.fd, 0) << "round " << rounds << ": the server stopped accepting";
        // Usually a valid hello first so the mutations reach the request path too.
        if (rng() % 4 != 0) raw.send(encodeClientHello({}));
        for (int i = 0, n = 1 + int(rng() % 6); i < n; ++i) {
            auto b = validFrame(rng);
            if (rng() % 5 != 0) mutate(b, rng);
            if (!raw.send(b)) break; // the server may already have disconnected us
        }
        raw.receive(rng() % 3 == 0 ? 20 : 1);
        if (rounds % 25 == 0) {
            ASSERT_TRUE(watcher->ping()) << "round " << rounds;
            auto fresh = connect();
            ASSERT_TRUE(fresh) << "round " << rounds;
            EXPECT_TRUE(fresh->ping());
        }
    }
    EXPECT_GT(rounds, 50);
    ASSERT_TRUE(watcher->ping());
    auto list = watcher->listPools();
    ASSERT_TRUE(list);
    EXPECT_EQ(list->pools.size(), 2u);
    EXPECT_TRUE(s.running());
    EXPECT_GT(s.stats().errorsSent, 0u);
}

TEST_F(ServerTest, OversizedFrameIsRefusedWithoutReadingIt) {
    startServer();
    RawConn raw(server_->socketPath());
    ASSERT_TRUE(raw.send(encodeClientHello({})));
    FrameHeader h;
    h.type = MsgType::Request;
    h.length = kMaxPayload; // far above what a client may send
    std::vector<uint8_t> b(reinterpret_cast<uint8_t*>(&h),
                           reinterpret_cast<uint8_t*>(&h) + sizeof h);
    ASSERT_TRUE(raw.send(b));
    bool closed = false;
    auto frames = raw.receive(2000, &closed);
    ASSERT_EQ(frames.size(), 2u); // hello, then the error
    EXPECT_EQ(frames[1].header.type, MsgType::Error);
    EXPECT_NE(decodeError(frames[1].payload)->message.find("exceeds the limit"), std::string::npos);
    EXPECT_TRUE(closed);
}

TEST_F(ServerTest, ErrorFloodDisconnects) {
    startServer();
    RawConn raw(server_->socketPath());
    ASSERT_TRUE(raw.send(encodeClientHello({})));
    std::string j = "{\"op\":\"nope\"}";
    FrameHeader h;
    h.type = MsgType::Request;
    h.length = uint32_t(j.size());
    std::vector<uint8_t> one(reinterpret_cast<uint8_t*>(&h),
                             reinterpret_cast<uint8_t*>(&h) + sizeof h);
    one.insert(one.end(), j.begin(), j.end());
    std::vector<uint8_t> many;
    for (int i = 0; i < 100; ++i)
        many.insert(many.end(), one.begin(), one.end());
    raw.send(many);
    bool closed = false;
    auto frames = raw.receive(2000, &closed);
    EXPECT_TRUE(closed);
    EXPECT_LE(frames.size(), 70u);
}

// The decoders alone, no socket: a bounded in-process fuzz run (count and time) that CI makes on
// every submission. Seeds are valid frames of every type, mutated as above; every decoder sees
// every payload that frames, and the raw bytes after the header too. A throw or a crash fails.
TEST(ProtocolFuzz, DecodersSurviveMutatedFrames) {
    // The same knobs as the trace fuzz targets (docs/SANITIZERS.md): POOLSCOPE_FUZZ_INPUTS=N runs
    // exactly N inputs with no time limit, POOLSCOPE_FUZZ_SEED=N moves the generator (shards).
    const char* seedVar = std::getenv("POOLSCOPE_FUZZ_SEED");
    std::mt19937_64 rng(20261124 + (seedVar ? std::strtoull(seedVar, nullptr, 10) : 0));
    std::vector<std::vector<uint8_t>> seeds;
    for (int i = 0; i < 32; ++i)
        seeds.push_back(validFrame(rng));
    ServerHello sh;
    sh.process.commandLine = "seed";
    seeds.push_back(encodeServerHello(sh));
    seeds.push_back(encodeAck({}, 7));
    seeds.push_back(encodeError({RemoteError::NoSuchPool, "no pool 0x1"}, 8));
    seeds.push_back(encodeNotice({12, 40, "dropped 12"}));
    std::vector<Event> events(3);
    std::vector<uint8_t> batch;
    appendEventBatch(batch, events);
    seeds.push_back(batch);
    uint64_t decoded = 0;
    auto decodeAll = [&](std::span<const uint8_t> p) {
        decoded += decodeClientHello(p).ok() + decodeServerHello(p).ok() + decodeRequest(p).ok() +
                   decodeAck(p).ok() + decodeError(p).ok() + decodeNotice(p).ok() +
                   decodeEventBatch(p).ok();
    };
    const int64_t start = monotonicMs();
    // Bounded for CI by count and by time (sanitizer builds are slower); the figures of the run
    // are printed.
    const char* inputsVar = std::getenv("POOLSCOPE_FUZZ_INPUTS");
    const long long exact = inputsVar && *inputsVar ? std::strtoll(inputsVar, nullptr, 10) : 0;
    const long long kInputs = exact > 0 ? exact : 20000;
    const long long kMinInputs = exact > 0 ? exact : 500; // even when slow (ASan: ~330 inputs/s)
    const char* secondsVar = std::getenv("POOLSCOPE_FUZZ_SECONDS");
    const long long seconds = secondsVar && *secondsVar ? std::strtoll(secondsVar, nullptr, 10) : 0;
    const long long limitMs = seconds > 0 ? seconds * 1000 : 2000;
    const long long maxInputs = seconds > 0 && exact <= 0 ? LLONG_MAX : kInputs;
    long long inputs = 0;
    for (; inputs < maxInputs && (inputs < kMinInputs || monotonicMs() - start < limitMs);
         ++inputs) {
        std::vector<uint8_t> b = seeds[rng() % seeds.size()];
        mutate(b, rng);
        if (b.size() > sizeof(FrameHeader))
            decodeAll(std::span<const uint8_t>(b).subspan(sizeof(FrameHeader)));
        FrameReader reader(kMaxRequestPayload);
        reader.append(b.data(), b.size());
        Frame f;
        while (reader.next(f) == FrameReader::Status::Frame)
            decodeAll(f.payload);
    }
    std::printf("decoder fuzz: %lld inputs, %llu decoded, %lld ms\n", inputs,
                static_cast<unsigned long long>(decoded),
                static_cast<long long>(monotonicMs() - start));
    EXPECT_GT(decoded, 0u) << "some mutated inputs must still decode: the seeds are valid";
}
