#pragma once
// The window's view of the core lane layout (poolscope/view/LaneLayout.h): the same lanes,
// rows and names, handed out as QString where widgets want them.

#include "poolscope/view/LaneLayout.h"

#include <QString>
#include <atomic>
#include <memory>

namespace poolscope::ui {

using view::gallopPast;
using view::Lane;
using view::LaneKind;

class LaneLayout : public view::LaneLayout {
public:
    // Returns nullptr when cancelled.
    static std::shared_ptr<const LaneLayout> build(const Timeline& tl,
                                                   const std::atomic<bool>* cancel = nullptr);

    // Short, stable names: "pool #1 (default)", "stream #2". Numbered in lane order.
    QString poolName(uint64_t pool) const { return QString::fromStdString(names.pool(pool)); }
    QString streamName(uint64_t stream) const {
        return QString::fromStdString(names.stream(stream));
    }
};

inline QString hexHandle(uint64_t h) {
    return QString::fromStdString(view::EntityNames::hexHandle(h));
}

} // namespace poolscope::ui
