#include "CallSitesView.h"

#include "CallSiteTreeModel.h"
#include "IcicleWidget.h"
#include "LaneLayout.h"
#include "poolscope/Units.h"

#include <QButtonGroup>
#include <QComboBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QRadioButton>
#include <QScrollArea>
#include <QSplitter>
#include <QStackedWidget>
#include <QTreeView>
#include <QVBoxLayout>

namespace poolscope::ui {

namespace {
QString qb(uint64_t v) {
    return QString::fromStdString(formatBytes(v));
}
QString qd(int64_t ns) {
    return QString::fromStdString(formatDuration(ns));
}
} // namespace

CallSitesView::CallSitesView(QWidget* parent) : QWidget(parent) {
    auto* outer = new QVBoxLayout(this);
    outer->setContentsMargins(0, 0, 0, 0);
    stack_ = new QStackedWidget(this);
    outer->addWidget(stack_);

    empty_ = new QLabel(this);
    empty_->setAlignment(Qt::AlignCenter);
    empty_->setWordWrap(true);
    empty_->setTextFormat(Qt::RichText);
    stack_->addWidget(empty_);

    auto* page = new QWidget(this);
    auto* pl = new QVBoxLayout(page);
    pl->setContentsMargins(4, 2, 4, 2);
    pl->setSpacing(2);
    split_ = new QSplitter(Qt::Horizontal, page);

    // Left: the tree with its order.
    auto* left = new QWidget(split_);
    auto* ll = new QVBoxLayout(left);
    ll->setContentsMargins(0, 0, 0, 0);
    ll->setSpacing(2);
    auto* bar = new QHBoxLayout;
    bar->addWidget(new QLabel(tr("Group:"), left));
    orderButtons_ = new QButtonGroup(this);
    // Short labels, the order explained in the tooltips: with the long ones this bar alone made
    // the dock (tabbed with the events) 600 px wide at least, squeezing the Pools & streams
    // dock beside it.
    auto* down = new QRadioButton(tr("Top-down"), left);
    auto* up = new QRadioButton(tr("Bottom-up"), left);
    down->setToolTip(tr("Callers first: from the outermost caller (main, the script) down to "
                        "the call that allocated"));
    up->setToolTip(tr("Allocating function first: from the function that allocated up through "
                      "its callers"));
    orderButtons_->addButton(down, int(analysis::SiteOrder::TopDown));
    orderButtons_->addButton(up, int(analysis::SiteOrder::BottomUp));
    down->setChecked(true);
    bar->addWidget(down);
    bar->addWidget(up);
    bar->addStretch(1);
    ll->addLayout(bar);
    model_ = new CallSiteTreeModel(this);
    view_ = new QTreeView(left);
    view_->setModel(model_);
    view_->setUniformRowHeights(true);
    view_->setAlternatingRowColors(true);
    view_->setSelectionBehavior(QAbstractItemView::SelectRows);
    view_->setIndentation(14); // stacks are deep: the default 20 px a level pushed frames out
    // Frames are never cut: the column is as wide as its longest frame, and the tree scrolls
    // sideways when the dock is narrower.
    view_->header()->setStretchLastSection(false);
    view_->header()->setSectionResizeMode(CallSiteTreeModel::Frame, QHeaderView::ResizeToContents);
    view_->setTextElideMode(Qt::ElideNone);
    for (int c = 1; c < CallSiteTreeModel::ColumnCount; ++c)
        view_->header()->setSectionResizeMode(c, QHeaderView::ResizeToContents);
    ll->addWidget(view_, 1);
    connect(orderButtons_, &QButtonGroup::idClicked, this,
            [this](int id) { setOrder(analysis::SiteOrder(id)); });
    connect(view_->selectionModel(), &QItemSelectionModel::currentRowChanged, this,
            [this](const QModelIndex& cur) { onCurrentChanged(cur); });

    // Right: the icicle and which instant it shows.
    auto* right = new QWidget(split_);
    auto* rl = new QVBoxLayout(right);
    rl->setContentsMargins(0, 0, 0, 0);
    rl->setSpacing(2);
    auto* ibar = new QHBoxLayout;
    ibar->addWidget(new QLabel(tr("Bytes live"), right));
    instantBox_ = new QComboBox(right);
    instantBox_->setSizeAdjustPolicy(QComboBox::AdjustToContents);
    ibar->addWidget(instantBox_);
    ibar->addStretch(1);
    rl->addLayout(ibar);
    icicleLabel_ = new QLabel(right);
    icicleLabel_->setWordWrap(true);
    rl->addWidget(icicleLabel_);
    icicle_ = new IcicleWidget(right);
    auto* scroll = new QScrollArea(right);
    scroll->setWidget(icicle_);
    scroll->setWidgetResizable(true);
    scroll->setFrameShape(QFrame::StyledPanel);
    rl->addWidget(scroll, 1);
    connect(instantBox_, &QComboBox::currentIndexChanged, this,
            [this](int i) { setIcicleInstant(i); });
    connect(icicle_, &IcicleWidget::nodeClicked, this, [this](uint32_t node) {
        if (order_ == analysis::SiteOrder::TopDown) {
            selectNode(node);
            return;
        }
        // The tree shows the other order: report the frame's sites directly.
        view_->selectionModel()->clearCurrentIndex();
        if (node && topDown_)
            emit sitesSelected(topDown_->nodes[node].sites,
                               QString::fromStdString(topDown_->nodes[node].frame));
        else
            emit sitesSelected({}, {});
    });

    split_->addWidget(left);
    split_->addWidget(right);
    split_->setStretchFactor(0, 3);
    split_->setStretchFactor(1, 2);
    pl->addWidget(split_, 1);
    stack_->addWidget(page);
    setSnapshot({});
}

Qt::Orientation CallSitesView::splitOrientation() const {
    return split_->orientation();
}

void CallSitesView::resizeEvent(QResizeEvent* e) {
    QWidget::resizeEvent(e);
    const Qt::Orientation o = width() >= kSideBySideWidth ? Qt::Horizontal : Qt::Vertical;
    if (split_->orientation() != o) split_->setOrientation(o);
}

void CallSitesView::setSnapshot(const TraceSnapshot& s) {
    snap_ = s;
    topDown_.reset();
    bottomUp_.reset();
    instantPools_.clear();
    if (!s.valid() || !s.hasStacks()) {
        QString text;
        if (!s.valid())
            text = tr("No trace open.");
        else if (s.timeline->partial && !s.timeline->limited)
            text = tr("Call sites appear when the whole trace is loaded.");
        else if (!s.stacks)
            text = tr("This source carries no call stacks.");
        else
            text = tr("This trace has no call stacks. Record one with them:<br><tt>poolscope "
                      "record --stacks auto|native|python|all -o run.poolscope -- "
                      "PROGRAM</tt><br>(traces before format 4 and those recorded with "
                      "<tt>--stacks off</tt> have none)");
        empty_->setText(text);
        stack_->setCurrentIndex(0);
        model_->setTree(nullptr);
        icicle_->setData(nullptr, {}, {});
        return;
    }
    stack_->setCurrentIndex(1);
    const Timeline& tl = *s.timeline;
    topDown_ = std::make_shared<const analysis::SiteTree>(
        analysis::buildSiteTree(tl, *s.stacks, analysis::SiteOrder::TopDown));
    {
        const QSignalBlocker b(instantBox_);
        instantBox_->clear();
        instantBox_->addItem(tr("at the replay cursor"));
        for (const PoolTimeline& p : tl.pools) {
            bool any = false;
            for (const Allocation& a : tl.allocations)
                if (a.pool == p.info.handle && a.ptr) {
                    any = true;
                    break;
                }
            if (!any) continue;
            instantPools_.push_back(p.info.handle);
            const bool reserved = p.peakReserved > 0;
            // Short: the caption under it says how many bytes and when.
            instantBox_->addItem(reserved
                                     ? tr("at %1's peak reserved").arg(s.layout->poolName(p.info.handle))
                                     : tr("at %1's peak live").arg(s.layout->poolName(p.info.handle)));
        }
        instant_ = std::min(instant_, instantBox_->count() - 1);
        instantBox_->setCurrentIndex(instant_);
    }
    rebuildTree();
    refreshIcicle();
}

void CallSitesView::setOrder(analysis::SiteOrder order) {
    if (QAbstractButton* b = orderButtons_->button(int(order)); b && !b->isChecked())
        b->setChecked(true);
    if (order_ == order && model_->tree()) return;
    order_ = order;
    rebuildTree();
}

void CallSitesView::rebuildTree() {
    if (!topDown_) return;
    std::shared_ptr<const analysis::SiteTree> t = topDown_;
    if (order_ == analysis::SiteOrder::BottomUp) {
        if (!bottomUp_)
            bottomUp_ = std::make_shared<const analysis::SiteTree>(analysis::buildSiteTree(
                *snap_.timeline, *snap_.stacks, analysis::SiteOrder::BottomUp));
        t = bottomUp_;
    }
    model_->setTree(t);
    icicle_->setSelectedNode(0); // the choice is gone with the old tree
    // Open the paths that hold most of the memory: every frame whose peak is at least a tenth
    // of the whole (a long chain of single callers opens down to where it branches).
    const uint64_t total = std::max<uint64_t>(1, t->nodes[0].peakLive);
    std::vector<uint32_t> todo = t->nodes[0].children;
    while (!todo.empty()) {
        const uint32_t n = todo.back();
        todo.pop_back();
        const analysis::SiteNode& sn = t->nodes[n];
        if (sn.children.empty() || sn.peakLive * 10 < total || sn.depth > 40) continue;
        view_->expand(model_->indexOfNode(n));
        todo.insert(todo.end(), sn.children.begin(), sn.children.end());
    }
    emit sitesSelected({}, {});
}

void CallSitesView::setCursorTime(int64_t t) {
    if (cursor_ == t) return;
    cursor_ = t;
    if (instant_ == 0) refreshIcicle();
}

void CallSitesView::setIcicleInstant(int choice) {
    if (choice < 0) return;
    instant_ = choice;
    if (instantBox_->currentIndex() != choice) {
        const QSignalBlocker b(instantBox_);
        instantBox_->setCurrentIndex(choice);
    }
    refreshIcicle();
}

QString CallSitesView::icicleCaption() const {
    return icicleLabel_->text();
}

void CallSitesView::refreshIcicle() {
    if (!topDown_) return;
    const Timeline& tl = *snap_.timeline;
    int64_t at = 0;
    uint64_t pool = 0;
    QString when;
    if (instant_ == 0 || size_t(instant_ - 1) >= instantPools_.size()) {
        if (cursor_ != INT64_MIN) {
            at = cursor_;
            when = tr("at the replay cursor, %1").arg(qd(nsBetween(tl.t0, at)));
        } else {
            // No cursor yet: the instant the recorded allocations held the most.
            at = topDown_->nodes[0].peakLiveTsNs;
            when = tr("at the peak of live bytes, %1 (no replay cursor placed)").arg(qd(nsBetween(tl.t0, at)));
        }
    } else {
        pool = instantPools_[size_t(instant_ - 1)];
        const PoolTimeline* p = tl.pool(pool);
        const bool reserved = p && p->peakReserved > 0;
        at = !p ? tl.t0 : reserved ? p->peakReservedTsNs : p->peakLiveTsNs;
        when = tr("in %1 at its peak %2, %3")
                   .arg(snap_.layout->poolName(pool), reserved ? tr("reserved") : tr("live"),
                        qd(nsBetween(tl.t0, at)));
    }
    std::vector<uint64_t> v = analysis::liveBytesAt(*topDown_, tl, at, pool);
    const uint64_t total = v.empty() ? 0 : v[0];
    icicleLabel_->setText(tr("%1 live %2").arg(qb(total), when));
    icicle_->setData(topDown_, std::move(v), tr("all: %1").arg(qb(total)));
}

void CallSitesView::selectNode(uint32_t node) {
    const QModelIndex idx = model_->indexOfNode(node);
    if (!idx.isValid()) {
        view_->selectionModel()->clearCurrentIndex();
        view_->clearSelection();
        onCurrentChanged({});
        return;
    }
    for (QModelIndex p = idx.parent(); p.isValid(); p = p.parent()) view_->expand(p);
    view_->setCurrentIndex(idx);
    view_->scrollTo(idx);
}

void CallSitesView::onCurrentChanged(const QModelIndex& index) {
    const analysis::SiteTree* t = model_->tree();
    const uint32_t node = model_->nodeOf(index);
    if (order_ == analysis::SiteOrder::TopDown) icicle_->setSelectedNode(node);
    if (!t || node == 0 || node >= t->nodes.size()) {
        emit sitesSelected({}, {});
        return;
    }
    emit sitesSelected(t->nodes[node].sites, QString::fromStdString(t->nodes[node].frame));
}

} // namespace poolscope::ui
