#pragma once
// Where PoolScope finds files that ship with it (the bundled sample traces), both in a build tree
// and in an installed prefix, without relying on the current directory.

#include <QString>

namespace poolscope::ui {

// Folders searched, in order: $POOLSCOPE_SAMPLES_DIR, <exe>/../share/poolscope/samples,
// <exe>/samples, the source tree's resources/samples (build tree only).
QStringList sampleDirs();
// The bundled sample trace (churn.poolscope), or an empty string when none is installed.
QString bundledSampleTrace();

} // namespace poolscope::ui
