#include "poolscope/control/FrameReader.h"

#include <cstring>

namespace poolscope::control {

void FrameReader::append(const uint8_t* data, size_t n) {
    if (failed() || n == 0) return;
    // Compact before growing so a long-lived connection does not keep every byte it ever read.
    if (pos_ > 0 && pos_ == buf_.size()) {
        buf_.clear();
        pos_ = 0;
    } else if (pos_ > 64 * 1024 && pos_ * 2 > buf_.size()) {
        buf_.erase(buf_.begin(), buf_.begin() + static_cast<std::ptrdiff_t>(pos_));
        pos_ = 0;
    }
    buf_.insert(buf_.end(), data, data + n);
}

FrameReader::Status FrameReader::next(Frame& out) {
    if (failed()) return Status::Failed;
    if (buffered() < sizeof(FrameHeader)) return Status::NeedMore;
    FrameHeader h;
    std::memcpy(&h, buf_.data() + pos_, sizeof h);
    if (h.magic != kMagic) {
        error_ = "not a PoolScope control stream (bad frame magic); is this the right socket?";
        return Status::Failed;
    }
    if (h.length > maxPayload_) {
        error_ = "message of " + std::to_string(h.length) + " bytes exceeds the limit of " +
                 std::to_string(maxPayload_) + " bytes";
        return Status::Failed;
    }
    if (buffered() < sizeof h + h.length) return Status::NeedMore;
    out.header = h;
    const uint8_t* p = buf_.data() + pos_ + sizeof h;
    out.payload.assign(p, p + h.length);
    pos_ += sizeof h + h.length;
    return Status::Frame;
}

} // namespace poolscope::control
