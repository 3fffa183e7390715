#include "ConsolePane.h"

#include <QFontDatabase>
#include <QScrollBar>
#include <QTextCharFormat>

namespace poolscope::ui {

ConsolePane::ConsolePane(QWidget* parent) : QPlainTextEdit(parent) {
    setReadOnly(true);
    setMaximumBlockCount(20000);
    setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
    setPlaceholderText(tr("The launched program's output appears here."));
}

void ConsolePane::appendOutput(const QString& text, bool isError) {
    QTextCharFormat f;
    if (isError) f.setForeground(palette().color(QPalette::LinkVisited));
    QTextCursor c(document());
    c.movePosition(QTextCursor::End);
    c.insertText(text, f);
    verticalScrollBar()->setValue(verticalScrollBar()->maximum());
}

void ConsolePane::appendNote(const QString& text) {
    QTextCharFormat f;
    f.setFontItalic(true);
    QTextCursor c(document());
    c.movePosition(QTextCursor::End);
    if (!document()->isEmpty() && !toPlainText().endsWith('\n')) c.insertText("\n");
    c.insertText("[poolscope] " + text + "\n", f);
    verticalScrollBar()->setValue(verticalScrollBar()->maximum());
}

} // namespace poolscope::ui
