// gtest main with a QApplication. Widget tests run offscreen unless the platform is chosen
// (the screenshot test runs under Xvfb with the xcb platform).
#include <QApplication>
#include <QStandardPaths>
#include <cstdlib>
#include <gtest/gtest.h>

static void initResources() {
    Q_INIT_RESOURCE(poolscope);
}

int main(int argc, char** argv) {
#ifndef POOLSCOPE_NO_FORCE_OFFSCREEN
    if (!std::getenv("QT_QPA_PLATFORM")) setenv("QT_QPA_PLATFORM", "offscreen", 1);
#endif
    // Keep tests away from the user's settings (recent files, window layout).
    QStandardPaths::setTestModeEnabled(true);
    QApplication app(argc, argv);
    initResources();
    QApplication::setOrganizationName("PoolScopeTests");
    QApplication::setApplicationName("PoolScopeTests");
    ::testing::InitGoogleTest(&argc, argv);
    return RUN_ALL_TESTS();
}
