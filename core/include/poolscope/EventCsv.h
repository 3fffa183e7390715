#pragma once
// `dump --format csv`'s row: the record's fields as stored, then the details (describeEvent).

#include <string>
#include <string_view>

#include "poolscope/Event.h"

namespace poolscope {

// RFC 4180: quoted when it holds a comma, a quote or a line break, its quotes doubled.
void appendCsvField(std::string& out, std::string_view s);

// seq,ts_ns,kind,variant,tid,device,correlation,result,stream,pool,ptr,size,aux,attr,flags,
// reserved,used,site,details (no newline).
void appendEventCsv(std::string& out, const Event& e);

// The same, through a cursor that lives over a chunk's rows (`dump --format csv`); the details
// alone (describeEvent(e) as a field) for the CSV export's row.
class TextCursor;
void writeEventDetails(TextCursor& c, const Event& e);
void writeEventCsv(TextCursor& c, const Event& e);

} // namespace poolscope
