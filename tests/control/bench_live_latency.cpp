// Benchmark (not a ctest test): event-to-screen latency of the live session. An in-process control
// server (the collector's, with the fake driver) publishes one event at a time to a window with
// the live session installed, at the default refresh interval; the latency is the time from
// onEvents() until the window's snapshot holds that event. Measured with 0, 100k and 1M events
// already in the session, since each refresh rebuilds the window's snapshot.
//   QT_QPA_PLATFORM=offscreen build/default/bin/poolscope_bench_live_latency
#include "LiveController.h"
#include "LiveSession.h"
#include "MainWindow.h"
#include "ServerFixture.h"

#include <QApplication>
#include <QElapsedTimer>
#include <QThread>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>

using namespace poolscope;
using namespace poolscope::control;
using namespace poolscope::control::test;
using namespace poolscope::ui;

namespace {

bool waitFor(const std::function<bool()>& cond, int ms) {
    QElapsedTimer t;
    t.start();
    while (!cond()) {
        if (t.elapsed() > ms) return false;
        QCoreApplication::processEvents(QEventLoop::AllEvents, 5);
        QThread::usleep(200);
    }
    return true;
}

Event churnEvent(uint64_t seq) {
    Event e;
    e.seq = seq;
    e.tsNs = int64_t(seq) * 1000;
    e.kind = seq % 2 ? EventKind::Alloc : EventKind::Free;
    e.pool = 0x1000;
    e.stream = 0x5000 + (seq / 2) % 2;
    e.ptr = 0x7000000 + ((seq - 1) / 2 % 512) * 4096;
    e.size = 4096;
    e.flags = kHasWatermarks;
    e.reserved = 64 << 20;
    e.used = (seq % 512) * 4096;
    return e;
}

class LiveLatency : public ServerTest {
public:
    void TestBody() override {}
    void run() {
        SetUp();
        startServer();
        MainWindow w;
        w.resize(1600, 1000);
        w.show();
        LiveController* live = installLiveSession(&w);
        QString err = live->attach(QString::fromStdString(server_->socketPath()));
        if (!err.isEmpty()) {
            std::fprintf(stderr, "attach failed: %s\n", qPrintable(err));
            return;
        }
        auto count = [&] { return w.snapshot().valid() ? w.snapshot().timeline->eventCount : 0; };
        std::printf("| events in the session | median latency | max latency | samples |\n");
        std::printf("|---|---|---|---|\n");
        uint64_t seq = 0;
        for (uint64_t preload : {uint64_t{0}, uint64_t{100'000}, uint64_t{1'000'000}}) {
            std::vector<Event> batch;
            while (seq < preload) {
                batch.push_back(churnEvent(++seq));
                if (batch.size() == 20'000) {
                    server_->onEvents(batch);
                    batch.clear();
                    QCoreApplication::processEvents(QEventLoop::AllEvents, 5);
                    QThread::msleep(5); // a live source, not a flood the queue would drop
                }
            }
            if (!batch.empty()) server_->onEvents(batch);
            // A flood is partly dropped for display by design (the trace on disk stays complete):
            // wait until the window has settled, then time single events against what it holds.
            uint64_t settled = count();
            for (;;) {
                waitFor([] { return false; }, 500);
                if (count() == settled) break;
                settled = count();
            }
            const uint64_t held = settled;
            std::vector<double> ms;
            for (int i = 0; i < 15; ++i) {
                waitFor([] { return false; }, 37); // land at different points of the refresh tick
                const Event e = churnEvent(++seq);
                const uint64_t before = count();
                auto t0 = std::chrono::steady_clock::now();
                server_->onEvents(std::vector<Event>{e});
                if (!waitFor([&] { return count() > before; }, 10'000)) break;
                ms.push_back(std::chrono::duration<double, std::milli>(
                                 std::chrono::steady_clock::now() - t0)
                                 .count());
            }
            std::sort(ms.begin(), ms.end());
            if (ms.empty()) continue;
            std::printf("| %llu published, %llu shown | %.0f ms | %.0f ms | %zu |\n",
                        (unsigned long long)preload, (unsigned long long)held, ms[ms.size() / 2],
                        ms.back(), ms.size());
            std::fflush(stdout);
        }
        TearDown();
    }
};

} // namespace

int main(int argc, char** argv) {
    if (!std::getenv("QT_QPA_PLATFORM")) setenv("QT_QPA_PLATFORM", "offscreen", 1);
    QApplication app(argc, argv);
    LiveLatency bench;
    bench.run();
    return 0;
}
