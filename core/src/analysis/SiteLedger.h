#pragma once
// Live bytes and allocations per call site of one pool, changed in time order, with snapshots
// that cost nothing until the ledger has changed as often as it has sites: the streaming
// report's `--top-sites` (issue #15) takes one at every new peak, and a pool's peak may rise at
// thousands of allocations in a row. A snapshot is the live map minus the changes logged since;
// once that log is as long as the map, the snapshot is copied out and the log dropped, so each
// change costs O(1) amortized whatever the number of snapshots. Internal to core.

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "poolscope/analysis/CallSites.h"

namespace poolscope::detail {

class SiteLedger {
public:
    static constexpr int kSlots = 2;

    void add(uint32_t site, int64_t bytes, int64_t count) {
        apply(cur_, site, bytes, count);
        for (Snap& s : snaps_) {
            if (!s.taken || s.copied) continue;
            s.log.push_back(Change{site, bytes, count});
            if (s.log.size() > cur_.size() + 64) copyOut(s);
        }
    }

    // Remembers the ledger as it is now in `slot`, replacing what the slot held.
    void snapshot(int slot) {
        Snap& s = snaps_[slot];
        s.taken = true;
        s.copied = false;
        s.map.clear();
        s.log.clear();
    }
    bool taken(int slot) const { return snaps_[slot].taken; }

    // The slot's sites with live allocations, and their totals.
    std::vector<analysis::SiteBytes> sites(int slot, uint64_t& bytes, uint64_t& count) const {
        const Snap& s = snaps_[slot];
        Map m = s.copied ? s.map : undo(s.log);
        std::vector<analysis::SiteBytes> out;
        bytes = count = 0;
        for (const auto& [site, c] : m) {
            if (c.count <= 0) continue;
            out.push_back({site, static_cast<uint64_t>(c.bytes), static_cast<uint64_t>(c.count)});
            bytes += static_cast<uint64_t>(c.bytes);
            count += static_cast<uint64_t>(c.count);
        }
        return out;
    }

private:
    struct Cell {
        int64_t bytes = 0;
        int64_t count = 0;
    };
    using Map = std::unordered_map<uint32_t, Cell>;
    struct Change {
        uint32_t site;
        int64_t bytes, count;
    };
    struct Snap {
        bool taken = false, copied = false;
        Map map;
        std::vector<Change> log;
    };

    // Sites whose last allocation ended leave the map, so it stays as large as the live sites.
    static void apply(Map& m, uint32_t site, int64_t bytes, int64_t count) {
        Cell& c = m[site];
        c.bytes += bytes;
        c.count += count;
        if (c.count == 0 && c.bytes == 0) m.erase(site);
    }
    Map undo(const std::vector<Change>& log) const {
        Map m = cur_;
        for (size_t i = log.size(); i-- > 0;) apply(m, log[i].site, -log[i].bytes, -log[i].count);
        return m;
    }
    void copyOut(Snap& s) {
        s.map = undo(s.log);
        s.log.clear();
        s.log.shrink_to_fit();
        s.copied = true;
    }

    Map cur_;
    Snap snaps_[kSlots];
};

} // namespace poolscope::detail
