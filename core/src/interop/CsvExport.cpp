// `poolscope export --format csv`: one row per event for spreadsheets. Unlike `dump --format
// csv` (the record's raw fields), each value a person reads comes first in human form (time since
// the first event, "stream #2", "1.00 MiB", the call site) with the raw value beside it, so a
// sheet can both be read and computed on. Columns: eventsCsvHeader(), docs/INTEROP.md.

#include "poolscope/interop/Export.h"

#include <charconv>
#include <unordered_map>

#include "poolscope/ChunksInOrder.h"
#include "poolscope/EventCsv.h"
#include "poolscope/EventFields.h"
#include "poolscope/EventJson.h"
#include "poolscope/EventText.h"
#include "poolscope/TraceReader.h"
#include "poolscope/Units.h"
#include "poolscope/analysis/CallSites.h"
#include "poolscope/view/EntityNames.h"

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
    auto nameField = [](std::string& buf, const std::unordered_map<uint64_t, std::string>& known, uint64_t h,
                        auto&& name) {
        if (auto it = known.find(h); it != known.end()) buf += it->second;
        else appendCsvField(buf, name(h));
    };
    auto handle = [](std::string& buf, uint64_t h) { // hexHandle's text, appended
        char hex[24] = {'0', 'x'};
        buf.append(hex, static_cast<size_t>(std::to_chars(hex + 2, hex + sizeof hex, h, 16).ptr - hex));
    };
    // A row is its event's alone (the names, stacks and the maps above are only read): the chunks
    // are formatted on several threads (ChunksInOrder.h).
    auto format = [&](const std::vector<Event>& chunk, std::string& buf) {
        auto comma = [&] { buf += ','; };
        for (const Event& e : chunk) {
            const int64_t since = nsBetween(t0, e.tsNs);
            const bool hasStream = e.kind == EventKind::Alloc || e.kind == EventKind::Free ||
                                   e.kind == EventKind::EventRecord || e.kind == EventKind::StreamWaitEvent ||
                                   e.kind == EventKind::StreamSynchronize ||
                                   e.kind == EventKind::StreamCreate || e.kind == EventKind::StreamDestroy;
            const bool wm = e.has(kHasWatermarks);
            appendNumber(buf, e.seq);
            comma();
            appendDuration(buf, since); // no character of it needs quoting, nor below
            comma();
            appendNumber(buf, since);
            comma();
            appendNumber(buf, e.tsNs);
            comma();
            buf += eventKindName(e.kind);
            comma();
            appendNumber(buf, e.tid);
            comma();
            appendNumber(buf, int(e.device));
            comma();
            if (hasStream) nameField(buf, streamField, e.stream, [&](uint64_t h) { return names.stream(h); });
            comma();
            if (hasStream) handle(buf, e.stream);
            comma();
            if (e.pool) nameField(buf, poolField, e.pool, [&](uint64_t h) { return names.pool(h); });
            comma();
            if (e.pool) handle(buf, e.pool);
            comma();
            if (sizeIsBytes(e)) appendBytes(buf, e.size);
            comma();
            appendNumber(buf, e.size);
            comma();
            if (e.ptr) handle(buf, e.ptr);
            comma();
            if (e.result) appendCsvField(buf, formatCuResult(e.result));
            comma();
            appendNumber(buf, e.result);
            comma();
            for (const uint64_t v : {e.reserved, e.used}) { // human, then bytes
                if (wm) appendBytes(buf, v);
                comma();
                if (wm) appendNumber(buf, v);
                comma();
            }
            if (e.site) appendCsvField(buf, analysis::siteText(stacks, e.site, 8));
            comma();
            appendNumber(buf, e.site);
            comma();
            appendEventDetails(buf, e);
            buf += '\n';
        }
    };
    const Status st = formatChunksInOrder(reader, format, write, threads);
    if (!st) return failed ? writeFailed : st;
    return {};
}

} // namespace poolscope::interop
