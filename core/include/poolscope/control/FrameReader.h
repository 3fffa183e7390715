#pragma once
// Incremental frame parser for the control protocol (Protocol.h). Bytes arrive in arbitrary
// pieces from a socket; next() hands out complete frames. A bad magic or an oversized length is
// a framing error: the stream cannot be resynchronised, so the reader stays failed and the owner
// replies with an Error and closes the connection.

#include "poolscope/control/Protocol.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace poolscope::control {

class FrameReader {
public:
    explicit FrameReader(uint32_t maxPayload = kMaxPayload) : maxPayload_(maxPayload) {}

    void append(const uint8_t* data, size_t n);

    enum class Status { Frame, NeedMore, Failed };
    // Frame: `out` holds the next complete frame. Failed: error() says why, in plain words.
    Status next(Frame& out);

    const std::string& error() const { return error_; }
    bool failed() const { return !error_.empty(); }
    size_t buffered() const { return buf_.size() - pos_; }

private:
    std::vector<uint8_t> buf_;
    size_t pos_ = 0; // consumed bytes at the front of buf_, compacted lazily
    uint32_t maxPayload_;
    std::string error_;
};

} // namespace poolscope::control
