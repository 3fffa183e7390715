#pragma once
// A generated trace written once per test program into a temporary folder.

#include "SyntheticTrace.h"
#include "poolscope/TimelineBuilder.h"
#include "poolscope/TraceReader.h"

#include <QDir>
#include <QString>
#include <QTemporaryDir>
#include <gtest/gtest.h>

namespace poolscope::synth {

inline QString syntheticTracePath(uint64_t events = 20000) {
    static QTemporaryDir dir;
    const QString path = dir.filePath(QStringLiteral("synthetic-%1.poolscope").arg(events));
    if (!QFile::exists(path)) {
        SyntheticOptions o;
        o.events = events;
        Status st = writeSyntheticTrace(path.toStdString(), o);
        EXPECT_TRUE(st.ok()) << (st.ok() ? "" : st.error().message);
    }
    return path;
}

// The whole timeline of a trace file (a committed sample or a generated one), or nullptr with
// the reason reported as a test failure.
inline std::shared_ptr<const Timeline> loadTimeline(const QString& path) {
    auto reader = TraceReader::open(path.toStdString());
    EXPECT_TRUE(reader.ok()) << (reader.ok() ? "" : reader.error().message);
    if (!reader) return nullptr;
    auto tl = buildTimeline(**reader);
    EXPECT_TRUE(tl.ok());
    return tl ? tl.value() : nullptr;
}

} // namespace poolscope::synth
