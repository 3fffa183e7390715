#include "poolscope/Stacks.h"

#include <cstdio>

namespace poolscope {

std::string moduleName(const std::string& path) {
    const size_t slash = path.rfind('/');
    return slash == std::string::npos ? path : path.substr(slash + 1);
}

namespace {
// "a/b/c.py" -> "b/c.py": the file and the directory it sits in, which tells apart the many
// __init__.py and modeling_*.py a user sees, without the site-packages prefix.
std::string shortFile(const std::string& path) {
    const size_t last = path.rfind('/');
    if (last == std::string::npos || last == 0) return path;
    const size_t prev = path.rfind('/', last - 1);
    return prev == std::string::npos ? path : path.substr(prev + 1);
}
} // namespace

namespace {
// "(anonymous namespace)::f" reads as "f": the qualifier says nothing a user acts on.
std::string readableFunction(std::string fn) {
    static const std::string anon = "(anonymous namespace)::";
    for (size_t at; (at = fn.find(anon)) != std::string::npos;) fn.erase(at, anon.size());
    return fn;
}
} // namespace

std::string frameText(const StackTables& t, const NativeFrame& f) {
    if (const Symbol* s = t.symbol(f); s && !s->function.empty()) {
        std::string out = readableFunction(s->function);
        if (!s->file.empty()) {
            out += " (" + moduleName(s->file);
            if (s->line > 0) out += ":" + std::to_string(s->line);
            out += ")";
        } else if (const ModuleInfo* m = t.module(f.module)) {
            out += " (" + moduleName(m->path) + ")";
        }
        return out;
    }
    char hex[32];
    std::snprintf(hex, sizeof hex, "0x%llx", static_cast<unsigned long long>(f.offset));
    if (const ModuleInfo* m = t.module(f.module)) return moduleName(m->path) + "+" + hex;
    return hex;
}

std::string frameText(const PythonFrame& f) {
    return f.function + " (" + shortFile(f.file) + ":" + std::to_string(f.line) + ")";
}

} // namespace poolscope
