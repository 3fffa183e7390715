#include "IcicleWidget.h"

#include "poolscope/Units.h"

#include <QHelpEvent>
#include <QMouseEvent>
#include <QPainter>
#include <QToolTip>
#include <algorithm>

namespace poolscope::ui {

namespace {
QString qb(uint64_t v) {
    return QString::fromStdString(formatBytes(v));
}
constexpr double kMinBoxW = 1.0; // narrower frames (and their callees) are not drawn
} // namespace

IcicleWidget::IcicleWidget(QWidget* parent) : QWidget(parent) {
    setMouseTracking(false);
    setMinimumHeight(3 * kRowH);
    setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Minimum);
}

void IcicleWidget::setData(std::shared_ptr<const analysis::SiteTree> tree,
                           std::vector<uint64_t> values, QString rootLabel) {
    tree_ = std::move(tree);
    values_ = std::move(values);
    rootLabel_ = std::move(rootLabel);
    if (!tree_ || values_.size() != tree_->nodes.size()) {
        tree_.reset();
        values_.clear();
    }
    relayout();
    update();
}

void IcicleWidget::setSelectedNode(uint32_t node) {
    if (selected_ == node) return;
    selected_ = node;
    update();
}

void IcicleWidget::resizeEvent(QResizeEvent*) {
    relayout();
}

void IcicleWidget::relayout() {
    boxes_.clear();
    int depth = 0;
    if (tree_ && !values_.empty() && values_[0] > 0) {
        const double W = std::max(1, width());
        // Depth first; each node's callees share its width in proportion to their bytes.
        struct Item {
            uint32_t node;
            double x, w;
        };
        std::vector<Item> stack{{0, 0.0, W}};
        while (!stack.empty()) {
            const Item it = stack.back();
            stack.pop_back();
            const analysis::SiteNode& n = tree_->nodes[it.node];
            boxes_.push_back({QRectF(it.x, n.depth * kRowH, it.w, kRowH), it.node});
            depth = std::max(depth, int(n.depth) + 1);
            double x = it.x;
            const double v = double(values_[it.node]);
            // Largest first from the left (children come sorted by peak; order by bytes now).
            std::vector<uint32_t> ch;
            for (uint32_t c : n.children)
                if (values_[c] > 0) ch.push_back(c);
            std::stable_sort(ch.begin(), ch.end(),
                             [&](uint32_t a, uint32_t b) { return values_[a] > values_[b]; });
            for (uint32_t c : ch) {
                const double w = it.w * double(values_[c]) / v;
                if (w >= kMinBoxW) stack.push_back({c, x, w});
                x += w;
            }
        }
    }
    setMinimumHeight(std::max(3, depth) * kRowH + 1);
}

uint32_t IcicleWidget::nodeAt(QPoint pos) const {
    for (const Box& b : boxes_)
        if (b.r.contains(pos)) return b.node;
    return 0;
}

QRect IcicleWidget::nodeRect(uint32_t node) const {
    for (const Box& b : boxes_)
        if (b.node == node) return b.r.toAlignedRect();
    return {};
}

void IcicleWidget::paintEvent(QPaintEvent*) {
    QPainter p(this);
    p.fillRect(rect(), palette().base());
    if (boxes_.empty()) {
        p.setPen(palette().color(QPalette::PlaceholderText));
        p.drawText(rect().adjusted(8, 0, -8, 0), Qt::AlignCenter | Qt::TextWordWrap,
                   tree_ ? tr("No memory held by the recorded allocations at this instant.")
                         : tr("No call stacks to show."));
        return;
    }
    const QFontMetrics fm = fontMetrics();
    const uint64_t total = values_[0];
    for (const Box& b : boxes_) {
        const analysis::SiteNode& n = tree_->nodes[b.node];
        // Python frames in blues, native frames in warm colours, each frame a shade of its own
        // (by name) so that neighbours stay apart.
        const uint32_t h = uint32_t(qHash(QString::fromStdString(n.frame)));
        QColor c;
        if (b.node == 0)
            c = QColor(170, 170, 170);
        else if (n.kind == analysis::StackFrame::Kind::Python)
            c = QColor::fromHsv(195 + int(h % 30), 90 + int(h / 30 % 60), 225);
        else if (n.kind == analysis::StackFrame::Kind::Native)
            c = QColor::fromHsv(20 + int(h % 30), 110 + int(h / 30 % 70), 240);
        else
            c = QColor(200, 200, 200);
        const QRectF r = b.r.adjusted(0, 0, -1, -1);
        p.fillRect(r, c);
        if (r.width() > 12) {
            QString text = b.node == 0 ? rootLabel_ : QString::fromStdString(n.frame);
            if (b.node != 0 && r.width() > 80)
                text += QStringLiteral("  ") + qb(values_[b.node]);
            const QString shown =
                fm.elidedText(text, Qt::ElideRight, int(r.width()) - 6);
            if (shown.size() > 1) {
                p.setPen(Qt::black);
                p.drawText(r.adjusted(3, 0, -3, 0), Qt::AlignVCenter | Qt::AlignLeft, shown);
            }
        }
    }
    if (selected_) {
        for (const Box& b : boxes_)
            if (b.node == selected_) {
                p.setPen(QPen(QColor(220, 0, 150), 2));
                p.setBrush(Qt::NoBrush);
                p.drawRect(b.r.adjusted(1, 1, -2, -2));
            }
    }
    (void)total;
}

void IcicleWidget::mousePressEvent(QMouseEvent* e) {
    if (e->button() != Qt::LeftButton) return;
    const uint32_t n = nodeAt(e->position().toPoint());
    setSelectedNode(n);
    emit nodeClicked(n);
}

bool IcicleWidget::event(QEvent* e) {
    if (e->type() == QEvent::ToolTip && tree_) {
        auto* he = static_cast<QHelpEvent*>(e);
        for (const Box& b : boxes_)
            if (b.r.contains(he->pos())) {
                const analysis::SiteNode& n = tree_->nodes[b.node];
                const double pct = 100.0 * double(values_[b.node]) / double(std::max<uint64_t>(1, values_[0]));
                const QString name = b.node == 0 ? rootLabel_ : QString::fromStdString(n.frame);
                QToolTip::showText(he->globalPos(),
                                   tr("<b>%1</b><br>%2 live here (%3 % of %4)")
                                       .arg(name.toHtmlEscaped(), qb(values_[b.node]))
                                       .arg(pct, 0, 'f', 1)
                                       .arg(qb(values_[0])),
                                   this);
                return true;
            }
        QToolTip::hideText();
        e->ignore();
        return true;
    }
    return QWidget::event(e);
}

} // namespace poolscope::ui
