#pragma once
// Shades the part of a view's time axis that a progressive load has not reached yet, with a
// "loading 23 %" note, so a partial timeline (Timeline::partial) is never mistaken for the whole
// trace: the views draw the last known values on to the end of the trace, and this covers them
// (the plot shows, over it, the min/max overview of the trace's summaries where it has them).
// A child widget laid over the view (the timeline or the plot), transparent to the mouse; the
// owner tells it where the loaded part ends (a callback from time to x, since each view maps
// time its own way) and calls update() when the view or the progress changes. Header-only on
// purpose: no Q_OBJECT, nothing to moc.

#include <QEvent>
#include <QPainter>
#include <QRectF>
#include <QWidget>
#include <algorithm>
#include <cstdint>
#include <functional>
#include <optional>

namespace poolscope::ui {

class LoadingOverlay : public QWidget {
public:
    // The area to shade, in the view's coordinates (from where the loaded part ends to the end
    // of the view's plot area); nullopt when there is nothing to shade.
    using Band = std::function<std::optional<QRectF>()>;

    LoadingOverlay(QWidget* view, Band band) : QWidget(view), band_(std::move(band)) {
        setAttribute(Qt::WA_TransparentForMouseEvents);
        setAttribute(Qt::WA_NoSystemBackground);
        setFocusPolicy(Qt::NoFocus);
        view->installEventFilter(this);
        setGeometry(view->rect());
        hide();
    }

    // A range timeline (Timeline::isRange) is loaded in the middle of the trace: the area before
    // its loaded part, shaded the same way, its dashed edge on the right.
    void setLeadingBand(Band band) { leading_ = std::move(band); }

    // Drawn over the shading, under the note: what is known of the part not loaded yet (the
    // plot's min/max overview from the trace's summaries), in the view's coordinates.
    using Content = std::function<void(QPainter&, const QRectF&)>;
    void setContent(Content c) { content_ = std::move(c); }

    // Repaints only where the note is (a repaint of the overlay makes the view under it paint
    // that area again, and the timeline's painting is not free).
    void setText(const QString& text) {
        if (text == text_) return;
        text_ = text;
        if (textBox_.isEmpty())
            update();
        else
            update(textBox_.toAlignedRect().adjusted(-40, -2, 40, 2));
    }

protected:
    bool eventFilter(QObject* o, QEvent* e) override {
        if (o == parent() && e->type() == QEvent::Resize) {
            setGeometry(parentWidget()->rect());
            raise();
        }
        return false;
    }

    void paintEvent(QPaintEvent*) override {
        QPainter p(this);
        const auto lead = leading_ ? leading_() : std::nullopt;
        QRectF leadRect;
        if (lead) {
            leadRect = lead->intersected(QRectF(rect()));
            if (leadRect.width() >= 1 && leadRect.height() >= 1) shade(p, leadRect, leadRect.right());
            else leadRect = {};
        }
        const auto b = band_ ? band_() : std::nullopt;
        QRectF r = b ? b->intersected(QRectF(rect())) : QRectF();
        if (r.width() >= 1 && r.height() >= 1) shade(p, r, r.left());
        else r = {};
        // The note goes in the wider of the two.
        if (leadRect.width() > r.width()) r = leadRect;
        if (r.isEmpty()) return;
        note(p, r);
    }

private:
    void shade(QPainter& p, const QRectF& r, double edge) {
        // Mostly opaque: what the views draw past the loaded part is a placeholder.
        QColor wash = palette().color(QPalette::Window);
        wash.setAlpha(215);
        p.fillRect(r, wash);
        QColor hatch = palette().color(QPalette::Mid);
        hatch.setAlpha(110);
        p.fillRect(r, QBrush(hatch, Qt::BDiagPattern));
        p.setPen(QPen(palette().color(QPalette::Highlight), 2, Qt::DashLine));
        p.drawLine(QPointF(edge, r.top()), QPointF(edge, r.bottom()));
        if (content_) {
            p.save();
            p.setClipRect(r);
            content_(p, r);
            p.restore();
        }
    }

    void note(QPainter& p, const QRectF& r) {
        if (text_.isEmpty()) return;
        QFont f = font();
        f.setBold(true);
        p.setFont(f);
        const QRectF textBox = p.boundingRect(r, Qt::AlignCenter, text_).adjusted(-8, -4, 8, 4);
        textBox_ = textBox;
        if (textBox.width() > r.width()) return; // a sliver: the dashed edge says enough
        QColor box = palette().color(QPalette::Base);
        box.setAlpha(235);
        p.setPen(Qt::NoPen);
        p.setBrush(box);
        p.drawRoundedRect(textBox, 4, 4);
        p.setPen(palette().color(QPalette::Text));
        p.drawText(r, Qt::AlignCenter, text_);
    }

    Band band_;
    Band leading_;
    Content content_;
    QString text_;
    QRectF textBox_; // where the note was last drawn
};

} // namespace poolscope::ui
