// `poolscope export --format csv`: one row per event for spreadsheets. Unlike `dump --format
// csv` (the record's raw fields), each value a person reads comes first in human form (time since
// the first event, "stream #2", "1.00 MiB", the call site) with the raw value beside it, so a
// sheet can both be read and computed on. Columns: eventsCsvHeader(), docs/INTEROP.md.

#include "poolscope/interop/Export.h"

#include <unordered_map>
#include <utility>
#include <vector>

#include "poolscope/ChunksInOrder.h"
#include "poolscope/EventCsv.h"
#include "poolscope/EventFields.h"
#include "poolscope/EventJson.h"
#include "poolscope/EventText.h"
#include "poolscope/TraceReader.h"
#include "poolscope/Units.h"
#include "poolscope/analysis/CallSites.h"
#include "poolscope/view/EntityNames.h"
#include "poolscope/TextCursor.h"

namespace poolscope::interop {

namespace {

// Whether Event::size holds bytes for this event (else it is the kind's value: an attribute's
// setting, a count of access descriptors...).
bool sizeIsBytes(const Event& e) {
    switch (e.kind) {
    case EventKind::Alloc:
    case EventKind::PoolTrimTo:
    case EventKind::ImplicitRelease: return true;
    case EventKind::Free: return e.has(kSizeKnown);
    case EventKind::PoolCreate: return e.size != 0;
    default: return false;
    }
}

} // namespace

std::string eventsCsvHeader() {
    return "seq,time,t_ns,ts_ns,kind,thread,device,stream,stream_handle,pool,pool_handle,size,"
           "value,ptr,result,result_code,reserved,reserved_bytes,used,used_bytes,call_site,site,"
           "details";
}

Status writeEventsCsv(TraceReader& reader, const Timeline& tl, const StackTables& stacks,
                      std::FILE* out, const ChunkTextOptions& threads) {
    return writeEventsCsv(reader, view::EntityNames::fromTimeline(tl), tl.t0, stacks, out, threads);
}

Status writeEventsCsv(TraceReader& reader, const view::EntityNames& names, int64_t t0,
                      const StackTables& stacks, std::FILE* out, const ChunkTextOptions& threads) {
    bool failed = false;
    auto write = [&](const std::string& text) {
        if (!text.empty() && std::fwrite(text.data(), 1, text.size(), out) != text.size()) failed = true;
        return !failed && !std::ferror(out);
    };
    const Error writeFailed{ErrorCode::WriteFailed, "could not write the CSV"};
    if (!write(eventsCsvHeader() + "\n")) return writeFailed;
    // The name columns of the pools and streams the tables list, made once: EntityNames hands
    // out a new string per call, two per row. Handles no table lists are named as they come.
    std::unordered_map<uint64_t, std::string> poolField, streamField;
    if (auto pools = reader.pools(); pools)
        for (const PoolInfo& p : *pools) appendCsvField(poolField[p.handle], names.pool(p.handle));
    if (auto streams = reader.streams(); streams)
        for (const StreamInfo& st : *streams) appendCsvField(streamField[st.handle], names.stream(st.handle));
    // Few handles (a stream per thread or so) are found faster by a scan than by hashing.
    struct Known {
        std::vector<std::pair<uint64_t, const std::string*>> few; // all of them, where few
        const std::unordered_map<uint64_t, std::string>* all;
        explicit Known(const std::unordered_map<uint64_t, std::string>& m) : all(&m) {
            if (m.size() <= 16)
                for (const auto& [h, field] : m) few.emplace_back(h, &field);
        }
        const std::string* find(uint64_t h) const {
            if (few.size() == all->size()) {
                for (const auto& [k, field] : few)
                    if (k == h) return field;
                return nullptr;
            }
            auto it = all->find(h);
            return it == all->end() ? nullptr : &it->second;
        }
    };
    const Known pools(poolField), streams(streamField);
    auto nameField = [](TextCursor& c, const Known& known, uint64_t h, auto&& name) {
        if (const std::string* field = known.find(h)) c.put(*field);
        else c.csvField(name(h));
    };
    // A row is its event's alone (the names, stacks and the maps above are only read): the chunks
    // are formatted on several threads (ChunksInOrder.h).
    auto format = [&](const std::vector<Event>& chunk, std::string& buf) {
        TextCursor c(buf);
        for (const Event& e : chunk) {
            const int64_t since = nsBetween(t0, e.tsNs);
            const bool hasStream = e.kind == EventKind::Alloc || e.kind == EventKind::Free ||
                                   e.kind == EventKind::EventRecord || e.kind == EventKind::StreamWaitEvent ||
                                   e.kind == EventKind::StreamSynchronize ||
                                   e.kind == EventKind::StreamCreate || e.kind == EventKind::StreamDestroy;
            const bool wm = e.has(kHasWatermarks);
            c.number(e.seq);
            c.put(',');
            c.duration(since); // no character of it needs quoting, nor below
            c.put(',');
            c.number(since);
            c.put(',');
            c.number(e.tsNs);
            c.put(',');
            c.put(eventKindName(e.kind));
            c.put(',');
            c.number(e.tid);
            c.put(',');
            c.number(int(e.device));
            c.put(',');
            if (hasStream) nameField(c, streams, e.stream, [&](uint64_t h) { return names.stream(h); });
            c.put(',');
            if (hasStream) c.hex(e.stream);
            c.put(',');
            if (e.pool) nameField(c, pools, e.pool, [&](uint64_t h) { return names.pool(h); });
            c.put(',');
            if (e.pool) c.hex(e.pool);
            c.put(',');
            if (sizeIsBytes(e)) c.bytes(e.size);
            c.put(',');
            c.number(e.size);
            c.put(',');
            if (e.ptr) c.hex(e.ptr);
            c.put(',');
            if (e.result) c.csvField(formatCuResult(e.result));
            c.put(',');
            c.number(e.result);
            c.put(',');
            for (const uint64_t v : {e.reserved, e.used}) { // human, then bytes
                if (wm) c.bytes(v);
                c.put(',');
                if (wm) c.number(v);
                c.put(',');
            }
            if (e.site) c.csvField(analysis::siteText(stacks, e.site, 8));
            c.put(',');
            c.number(e.site);
            c.put(',');
            writeEventDetails(c, e);
            c.put('\n');
        }
    };
    const Status st = formatChunksInOrder(reader, format, write, threads);
    if (!st) return failed ? writeFailed : st;
    return {};
}

} // namespace poolscope::interop
