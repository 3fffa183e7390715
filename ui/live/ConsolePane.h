#pragma once
// The target's stdout and stderr, as it prints them (stderr in the theme's error colour), with a
// bounded history so a chatty program cannot grow the window's memory without limit.

#include <QPlainTextEdit>

namespace poolscope::ui {

class ConsolePane : public QPlainTextEdit {
    Q_OBJECT
public:
    explicit ConsolePane(QWidget* parent = nullptr);
    void appendOutput(const QString& text, bool isError);
    void appendNote(const QString& text); // PoolScope's own lines ("started pid 42")
};

} // namespace poolscope::ui
