#pragma once
// A minimal aligned text table for the terminal report: first column left-aligned (names),
// the rest right-aligned (numbers line up by their last digit).

#include <algorithm>
#include <string>
#include <vector>

namespace poolscope::detail {

class TextTable {
public:
    explicit TextTable(std::vector<std::string> header) { rows_.push_back(std::move(header)); }
    void row(std::vector<std::string> cells) { rows_.push_back(std::move(cells)); }
    bool empty() const { return rows_.size() <= 1; }

    std::string render(const std::string& indent = "  ") const {
        std::vector<size_t> width;
        for (const auto& r : rows_)
            for (size_t c = 0; c < r.size(); ++c) {
                if (width.size() <= c) width.push_back(0);
                width[c] = std::max(width[c], displayWidth(r[c]));
            }
        std::string out;
        for (const auto& r : rows_) {
            std::string line = indent;
            for (size_t c = 0; c < r.size(); ++c) {
                const std::string pad(width[c] - displayWidth(r[c]), ' ');
                if (c) line += "  ";
                line += c == 0 ? r[c] + pad : pad + r[c];
            }
            while (!line.empty() && line.back() == ' ') line.pop_back();
            out += line + "\n";
        }
        return out;
    }

private:
    // UTF-8 aware ("µs"): counts code points, not bytes.
    static size_t displayWidth(const std::string& s) {
        size_t n = 0;
        for (unsigned char ch : s) n += (ch & 0xC0) != 0x80;
        return n;
    }
    std::vector<std::vector<std::string>> rows_;
};

} // namespace poolscope::detail
