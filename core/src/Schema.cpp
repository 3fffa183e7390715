#include "poolscope/Schema.h"

#include "SchemaSql.h"

namespace poolscope::schema {

std::string_view createSql() { return detail::kCreateSql; }

} // namespace poolscope::schema
