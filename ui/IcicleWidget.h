#pragma once
// An icicle (a flame graph hanging from the top): the root spans the width, each frame's
// callees sit below it, each as wide as the bytes its allocations hold at one instant. Values
// come from analysis::liveBytesAt over a top-down SiteTree; the widget only lays out and paints.

#include "poolscope/analysis/SiteTree.h"

#include <QWidget>
#include <memory>
#include <vector>

namespace poolscope::ui {

class IcicleWidget : public QWidget {
    Q_OBJECT
public:
    explicit IcicleWidget(QWidget* parent = nullptr);
    // values: per node of tree (analysis::liveBytesAt). rootLabel names the root box.
    void setData(std::shared_ptr<const analysis::SiteTree> tree, std::vector<uint64_t> values,
                 QString rootLabel);
    void setSelectedNode(uint32_t node); // outlined; 0: none
    uint32_t selectedNode() const { return selected_; }
    uint32_t nodeAt(QPoint pos) const;   // 0 where no frame is drawn
    QRect nodeRect(uint32_t node) const; // empty when not drawn (too narrow or no bytes)
    uint64_t value(uint32_t node) const { return node < values_.size() ? values_[node] : 0; }
    static constexpr int kRowH = 20;
    QSize sizeHint() const override { return {600, 10 * kRowH}; }

signals:
    void nodeClicked(uint32_t node);

protected:
    void paintEvent(QPaintEvent*) override;
    void resizeEvent(QResizeEvent*) override;
    void mousePressEvent(QMouseEvent*) override;
    bool event(QEvent*) override;

private:
    void relayout();
    struct Box {
        QRectF r;
        uint32_t node;
    };
    std::shared_ptr<const analysis::SiteTree> tree_;
    std::vector<uint64_t> values_;
    QString rootLabel_;
    std::vector<Box> boxes_;
    uint32_t selected_ = 0;
};

} // namespace poolscope::ui
