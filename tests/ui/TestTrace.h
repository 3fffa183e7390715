#pragma once
// A generated trace written once per test program into a temporary folder.

#include "SyntheticTrace.h"

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

} // namespace poolscope::synth
