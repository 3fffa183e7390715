#pragma once
// What the main window shows: an immutable Timeline plus its lane layout, and where it came from.
// File loading and (later) a live session both produce one of these; the window never cares which.

#include "LaneLayout.h"
#include "poolscope/Entities.h"
#include "poolscope/Stacks.h"
#include "poolscope/Timeline.h"
#include "poolscope/TraceReader.h"
#include "poolscope/view/Overview.h"

#include <QString>
#include <QStringList>
#include <memory>

namespace poolscope::ui {

struct TraceSnapshot {
    std::shared_ptr<const Timeline> timeline;
    std::shared_ptr<const LaneLayout> layout;
    QString path;  // the trace file; empty for a live source
    QString title; // shown in the window title
    bool bundledSample = false;
    ProcessInfo process;
    // Call sites and NVTX ranges (issue #13), symbolized where the binaries are found here;
    // null for a live source, empty for a trace recorded without stacks.
    std::shared_ptr<const StackTables> stacks;
    // Parts of the file found damaged and left out (what is shown is the intact rest).
    QStringList damage;
    // The pools' per-chunk summaries (issue #15), read at open: what a partial timeline draws
    // past the part loaded. Null for a live source and for traces written before them.
    std::shared_ptr<const view::Overview> overview;
    // The load's header scan and pool summaries: a range read of the same file reuses them
    // (RangeLoader) instead of reading both again. Null where there is none to share.
    std::shared_ptr<const TraceReader::SharedScan> scan;

    bool valid() const { return timeline && layout; }
    bool hasStacks() const { return stacks && !stacks->sites.empty(); }
    // Builds the layout synchronously: call from a worker thread for big timelines.
    static TraceSnapshot fromTimeline(std::shared_ptr<const Timeline> tl, QString title) {
        TraceSnapshot s;
        s.layout = LaneLayout::build(*tl);
        s.timeline = std::move(tl);
        s.title = std::move(title);
        return s;
    }
};

} // namespace poolscope::ui
