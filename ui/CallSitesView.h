#pragma once
// The Call sites view (issue #13): allocations grouped by call stack, top-down or bottom-up,
// with peak live bytes, bytes allocated, count and what is still live at the end; beside it an
// icicle of the bytes live at the replay cursor or at a pool's peak reserved. Selecting a frame
// (in the tree or the icicle) reports the sites under it; the window highlights their
// allocations on the timeline and in the plot. The trees are built in core (SiteTree.h).

#include "TraceSnapshot.h"
#include "poolscope/analysis/SiteTree.h"

#include <QWidget>
#include <memory>
#include <vector>

class QButtonGroup;
class QComboBox;
class QLabel;
class QSplitter;
class QStackedWidget;
class QTreeView;

namespace poolscope::ui {

class CallSiteTreeModel;
class IcicleWidget;

class CallSitesView : public QWidget {
    Q_OBJECT
public:
    explicit CallSitesView(QWidget* parent = nullptr);

    void setSnapshot(const TraceSnapshot& s);
    void setCursorTime(int64_t t); // INT64_MIN: no cursor
    void setOrder(analysis::SiteOrder order);
    analysis::SiteOrder order() const { return order_; }
    // Which instant the icicle shows: 0 = the replay cursor, 1.. = the peak reserved of the
    // (i-1)-th pool of the timeline that has allocations with stacks.
    void setIcicleInstant(int choice);
    void selectNode(uint32_t node); // in the tree (and the icicle when top-down)

    QTreeView* treeView() const { return view_; }
    CallSiteTreeModel* model() const { return model_; }
    IcicleWidget* icicle() const { return icicle_; }
    QString icicleCaption() const;
    bool hasStacks() const { return snap_.hasStacks(); }
    // The tree and the icicle side by side when the dock is wide, the icicle under the tree
    // when it is not (beside the Pools & streams dock at 1600 px, side by side cut the frames).
    static constexpr int kSideBySideWidth = 760;
    Qt::Orientation splitOrientation() const;

protected:
    void resizeEvent(QResizeEvent* e) override;

signals:
    // The sites under the chosen frame (ascending) and a name for it; empty: nothing chosen.
    void sitesSelected(const std::vector<uint32_t>& sites, const QString& label);

private:
    void rebuildTree();
    void refreshIcicle();
    void onCurrentChanged(const QModelIndex& index);

    TraceSnapshot snap_;
    analysis::SiteOrder order_ = analysis::SiteOrder::TopDown;
    std::shared_ptr<const analysis::SiteTree> topDown_, bottomUp_;
    int64_t cursor_ = INT64_MIN;
    int instant_ = 0;
    std::vector<uint64_t> instantPools_; // pool of each choice after the cursor

    QStackedWidget* stack_;
    QLabel* empty_;
    QButtonGroup* orderButtons_;
    QComboBox* instantBox_;
    QLabel* icicleLabel_;
    QTreeView* view_;
    CallSiteTreeModel* model_;
    IcicleWidget* icicle_;
    QSplitter* split_;
};

} // namespace poolscope::ui
