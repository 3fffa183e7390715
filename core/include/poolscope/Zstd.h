#pragma once
// libzstd, opened at run time (dlopen "libzstd.so.1", RTLD_LOCAL) rather than linked: core is
// linked into the collector module, which is injected into programs that may carry their own
// libzstd (conda, PyTorch wheels), and a trace must still be written where the library is
// missing (then in the uncompressed codec 4). Only the one-shot API of zstd 1.3+ is used.

#include <cstddef>
#include <string>
#include <string_view>

namespace poolscope::zstd {

// True when libzstd.so.1 was found and has every function used here (looked up once).
bool available();
// Why not, in words ("" when available).
const std::string& unavailableReason();

// Compresses src as one zstd frame (with its content size) into out (replaced); false when the
// library is missing or fails. Not thread-safe per Compressor (each holds a context).
class Compressor {
public:
    explicit Compressor(int level = 1);
    ~Compressor();
    Compressor(const Compressor&) = delete;
    Compressor& operator=(const Compressor&) = delete;
    bool compress(std::string_view src, std::string& out);

private:
    void* cctx_ = nullptr;
    int level_;
};

// Decompresses src into out (replaced), which may take at most maxBytes: a frame that declares
// or produces more fails (bounded allocation whatever the file claims). false with why set.
bool decompress(std::string_view src, size_t maxBytes, std::string& out, std::string& why);
// The same into the front of buf, whose size becomes at least the frame's size + slack (never
// less than it was: what lies after the frame's bytes is left as it was, not zeroed, so a
// reused buffer costs no fill per call); n gets the frame's size. For a decoder that reads
// past the data with unchecked wide loads.
bool decompressInto(std::string_view src, size_t maxBytes, std::string& buf, size_t slack,
                    size_t& n, std::string& why);

namespace detail {
// Tests only: pretend the library is missing (true) or restore the real lookup (false).
void simulateMissing(bool missing);
} // namespace detail

} // namespace poolscope::zstd
