#include "poolscope/PoolSummary.h"

#include <algorithm>
#include <limits>

#include "poolscope/Crc32c.h"

namespace poolscope {

namespace schema {
uint32_t poolSummaryChecksum(const PoolChunkSummary& r, uint32_t chunkCrc) {
    const uint64_t words[] = {static_cast<uint64_t>(r.chunk), r.pool, r.chunkRows,
                              static_cast<uint64_t>(r.tMin), static_cast<uint64_t>(r.tMax),
                              r.reservedMin, r.reservedMax, r.usedMin, r.usedMax,
                              r.reservedLast, r.usedLast};
    const unsigned char tail[] = {static_cast<unsigned char>(chunkCrc),
                                  static_cast<unsigned char>(chunkCrc >> 8),
                                  static_cast<unsigned char>(chunkCrc >> 16),
                                  static_cast<unsigned char>(chunkCrc >> 24)};
    return crc32c(crc32cOfWords(0, words), tail, sizeof tail);
}
uint32_t poolBlockChecksum(const PoolBlockSummary& r) {
    const uint64_t words[] = {static_cast<uint64_t>(r.chunk), r.pool,
                              static_cast<uint64_t>(r.lastChunk), r.chunkRows,
                              static_cast<uint64_t>(r.tMin), static_cast<uint64_t>(r.tMax),
                              r.reservedMin, r.reservedMax, r.usedMin, r.usedMax,
                              r.reservedLast, r.usedLast};
    return crc32cOfWords(0, words);
}
} // namespace schema

void PoolBlockAccumulator::add(const std::vector<PoolChunkSummary>& rows, int64_t chunk) {
    if (!chunks_++) {
        first_ = chunk;
        tMin_ = std::numeric_limits<int64_t>::max();
        tMax_ = std::numeric_limits<int64_t>::min();
    }
    last_ = chunk;
    for (const PoolChunkSummary& r : rows) {
        if (r.pool == 0) {
            tMin_ = std::min(tMin_, r.tMin);
            tMax_ = std::max(tMax_, r.tMax);
            continue;
        }
        auto it = std::find_if(acc_.begin(), acc_.end(),
                               [&](const PoolBlockSummary& a) { return a.pool == r.pool; });
        if (it == acc_.end()) {
            PoolBlockSummary b;
            static_cast<PoolChunkSummary&>(b) = r;
            acc_.push_back(b);
            continue;
        }
        it->tMin = std::min(it->tMin, r.tMin);
        it->tMax = std::max(it->tMax, r.tMax);
        it->reservedMin = std::min(it->reservedMin, r.reservedMin);
        it->reservedMax = std::max(it->reservedMax, r.reservedMax);
        it->usedMin = std::min(it->usedMin, r.usedMin);
        it->usedMax = std::max(it->usedMax, r.usedMax);
        it->reservedLast = r.reservedLast; // chunks come in seq order
        it->usedLast = r.usedLast;
    }
}

std::vector<PoolBlockSummary> PoolBlockAccumulator::take() {
    std::vector<PoolBlockSummary> rows;
    if (!chunks_) return rows;
    rows.swap(acc_);
    if (rows.empty()) {
        PoolBlockSummary none;
        none.tMin = tMin_;
        none.tMax = tMax_;
        rows.push_back(none);
    }
    std::sort(rows.begin(), rows.end(),
              [](const PoolBlockSummary& a, const PoolBlockSummary& b) { return a.pool < b.pool; });
    for (PoolBlockSummary& r : rows) {
        r.chunk = first_;
        r.lastChunk = last_;
        r.chunkRows = rows.size();
    }
    chunks_ = 0;
    return rows;
}

size_t PoolSummaryAccumulator::find(uint64_t pool) {
    for (size_t i = 0; i < acc_.size(); ++i)
        if (acc_[i].pool == pool) return i;
    PoolChunkSummary a;
    a.pool = pool;
    a.tMin = std::numeric_limits<int64_t>::max();
    a.tMax = std::numeric_limits<int64_t>::min();
    a.reservedMin = a.usedMin = std::numeric_limits<uint64_t>::max();
    acc_.push_back(a);
    return acc_.size() - 1;
}

std::vector<PoolChunkSummary> PoolSummaryAccumulator::take(int64_t chunk, int64_t tMin,
                                                          int64_t tMax) {
    std::vector<PoolChunkSummary> rows;
    rows.swap(acc_);
    last_ = 0;
    if (rows.empty()) {
        PoolChunkSummary none;
        none.tMin = tMin;
        none.tMax = tMax;
        rows.push_back(none);
    }
    std::sort(rows.begin(), rows.end(),
              [](const PoolChunkSummary& a, const PoolChunkSummary& b) { return a.pool < b.pool; });
    for (PoolChunkSummary& r : rows) {
        r.chunk = chunk;
        r.chunkRows = rows.size();
    }
    return rows;
}

} // namespace poolscope
