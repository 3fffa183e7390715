#include "LaneLayout.h"

namespace poolscope::ui {

std::shared_ptr<const LaneLayout> LaneLayout::build(const Timeline& tl,
                                                    const std::atomic<bool>* cancel) {
    auto out = std::make_shared<LaneLayout>();
    if (!out->compute(tl, cancel)) return nullptr;
    return out;
}

} // namespace poolscope::ui
