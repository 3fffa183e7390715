#include "AppPaths.h"

#include <QCoreApplication>
#include <QDir>
#include <QFileInfo>

namespace poolscope::ui {

QStringList sampleDirs() {
    QStringList dirs;
    const QString env = qEnvironmentVariable("POOLSCOPE_SAMPLES_DIR");
    if (!env.isEmpty()) dirs << env;
    const QString exeDir = QCoreApplication::applicationDirPath();
    dirs << QDir::cleanPath(exeDir + "/../share/poolscope/samples") << exeDir + "/samples";
#ifdef POOLSCOPE_SOURCE_SAMPLES_DIR
    dirs << QStringLiteral(POOLSCOPE_SOURCE_SAMPLES_DIR);
#endif
    return dirs;
}

QString bundledSampleTrace() {
    for (const QString& dir : sampleDirs()) {
        QFileInfo fi(dir + "/churn.poolscope");
        if (fi.isFile() && fi.size() > 0) return fi.absoluteFilePath();
    }
    return {};
}

} // namespace poolscope::ui
