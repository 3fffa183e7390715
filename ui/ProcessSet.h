#pragma once
// Several traces of one process tree, ready to be shown together (issue #16): the processes in
// tree order (parents first, interop::processTree), the pools and blocks one exported and
// another imported (interop::findIpcLinks, the functions `poolscope merge` prints), and one
// time axis (interop::alignProcesses). Qt widgets only read it: MultiProcessView draws it,
// ProcessTreeModel lists it.

#include "TraceLoad.h"
#include "poolscope/interop/ProcessTree.h"

#include <QString>
#include <utility>
#include <vector>

namespace poolscope::ui {

struct ProcessEntry {
    // The trace, its lane layout's linked pools marked in their titles ("⇄ pid 527").
    TraceSnapshot snap;
    std::vector<Event> ipc;
    QString title;        // "ipc (pid 526)"
    int depth = 0;        // in the process tree
    int parent = -1;      // entry index of the parent process, -1 when not among the inputs
    int64_t offsetNs = 0; // this trace's time + offset = the shared axis' time
};

class ProcessSet {
public:
    // The traces that loaded (results with an error or cancelled are left out), in tree order.
    static ProcessSet build(const std::vector<TraceLoadResult>& loaded);

    std::vector<ProcessEntry> entries;
    // exporter / importer are entry indices (not input indices).
    std::vector<interop::IpcLink> links;
    interop::TimeAlignment alignment; // offsets per entry (also in ProcessEntry::offsetNs)

    bool empty() const { return entries.empty(); }
    // The pools of other processes tied to (entry, pool) by a link, each once.
    std::vector<std::pair<int, uint64_t>> linkedPools(int entry, uint64_t pool) const;
    // How the traces were aligned, and what t = 0 is, for the window.
    QString alignmentText() const;
    // Shared-axis time <-> one entry's own clock.
    int64_t toShared(int entry, int64_t t) const { return t + entries[size_t(entry)].offsetNs; }
    int64_t fromShared(int entry, int64_t t) const { return t - entries[size_t(entry)].offsetNs; }
};

} // namespace poolscope::ui
