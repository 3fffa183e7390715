#include "poolscope/EventCsv.h"

#include "poolscope/EventFields.h"
#include "poolscope/EventJson.h"
#include "poolscope/EventText.h"
#include "poolscope/TextCursor.h"

namespace poolscope {

void appendCsvField(std::string& out, std::string_view s) {
    TextCursor c(out, 2 * s.size() + 2);
    c.csvField(s);
}

void writeEventDetails(TextCursor& c, const Event& e) {
    // Most rows are allocations, whose text is their API's name: no string of its own, and
    // nothing to quote (lower-case words; EventCsv.FieldsAtTheirLimitsAndEveryKindAreThePrintfRow
    // quotes every variant's name as printf's row would).
    if (e.kind == EventKind::Alloc && !e.failed()) {
        c.put(allocApiName(AllocFields::of(e).api));
        return;
    }
    c.csvField(describeEvent(e));
}

void writeEventCsv(TextCursor& c, const Event& e) {
    auto num = [&](auto v) {
        c.number(v);
        c.put(',');
    };
    num(e.seq);
    num(e.tsNs);
    c.put(eventKindName(e.kind));
    c.put(',');
    num(unsigned(e.variant));
    num(unsigned(e.tid));
    num(int(e.device));
    num(unsigned(e.correlation));
    num(int(e.result));
    num(uint64_t(e.stream));
    num(uint64_t(e.pool));
    num(uint64_t(e.ptr));
    num(uint64_t(e.size));
    num(uint64_t(e.aux));
    num(unsigned(e.attr));
    num(unsigned(e.flags));
    num(uint64_t(e.reserved));
    num(uint64_t(e.used));
    num(unsigned(e.site));
    writeEventDetails(c, e);
}

void appendEventCsv(std::string& out, const Event& e) {
    TextCursor c(out, 512);
    writeEventCsv(c, e);
}

} // namespace poolscope
