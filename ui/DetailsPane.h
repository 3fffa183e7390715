#pragma once
// Everything about the selected allocation, marker or event: all fields in human units, where it
// sits in time, and the pool's state at that moment (and at the replay cursor).

#include "Selection.h"
#include "TraceSnapshot.h"

#include <QTextBrowser>

namespace poolscope::ui {

class DetailsPane : public QTextBrowser {
    Q_OBJECT
public:
    explicit DetailsPane(QWidget* parent = nullptr);
    void setSnapshot(const TraceSnapshot& s, bool keepSelection = false);
    void showSelection(const Selection& s);
    void setCursorTime(int64_t t);
    const Selection& selection() const { return sel_; }

    // A pool's settable attributes at time t, as shown here and in the timeline's replay labels:
    // the release threshold in bytes ("max" for UINT64_MAX) and each reuse policy as on/off;
    // "unknown" before the first recorded value (a pool that existed before recording).
    static QString thresholdText(const PoolTimeline& p, int64_t t);
    static QString policyText(const Series& s, int64_t t);
    // Which attribute an attribute/knob marker changed ("release threshold", "reuse allow
    // opportunistic"...) and its new value in that attribute's unit; empty when unknown.
    static QString attributeChange(const Timeline& tl, const Marker& m);

signals:
    // A link in the pane (a stream-order hazard's other event, a pool growth) was clicked.
    void selectionRequested(const poolscope::ui::Selection& s);

private:
    void render();
    QString poolState(uint64_t pool, int64_t t, const QString& when) const;
    QString traceSummary() const;
    QString hazardText(const StreamHazard& h) const;
    QString growthText(const PoolGrowth& g) const;
    // The allocation's call stack and the NVTX ranges open on its thread (issue #13).
    QString callSiteText(const Allocation& a) const;

    TraceSnapshot snap_;
    Selection sel_;
    int64_t cursor_ = INT64_MIN;
};

} // namespace poolscope::ui
