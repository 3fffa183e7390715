#include "poolscope/Symbolizer.h"

#include <cstdlib>
#include <cxxabi.h>
#include <dlfcn.h>
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <fcntl.h>
#include <map>
#include <memory>
#include <set>
#include <sqlite3.h>
#include <unistd.h>

#include "poolscope/Schema.h"
#include "poolscope/TraceReader.h"

namespace poolscope {

namespace {

std::string hex(const unsigned char* bits, int n) {
    static const char* digits = "0123456789abcdef";
    std::string s;
    for (int i = 0; i < n; ++i) {
        s += digits[bits[i] >> 4];
        s += digits[bits[i] & 15];
    }
    return s;
}

std::string demangle(const char* name) {
    int status = 0;
    std::unique_ptr<char, decltype(&std::free)> d(abi::__cxa_demangle(name, nullptr, nullptr, &status),
                                                  &std::free);
    if (status != 0 || !d) return name;
    // "ns::fn(int, float)" reads as "ns::fn": the arguments make the frame too wide for a list.
    std::string s = d.get();
    int depth = 0;
    for (size_t i = s.size(); i-- > 0;) {
        if (s[i] == ')') ++depth;
        else if (s[i] == '(' && --depth == 0) {
            if (i > 0) return s.substr(0, i);
            break;
        }
    }
    return s;
}

// elfutils' libdw, opened at first use: a `poolscope` built here runs where libdw1 is not
// installed (a GPU server), and then leaves frames as module + offset.
struct DwApi {
    decltype(&::dwfl_begin) dwfl_begin = nullptr;
    decltype(&::dwfl_end) dwfl_end = nullptr;
    decltype(&::dwfl_report_begin) dwfl_report_begin = nullptr;
    decltype(&::dwfl_report_elf) dwfl_report_elf = nullptr;
    decltype(&::dwfl_report_end) dwfl_report_end = nullptr;
    decltype(&::dwfl_module_build_id) dwfl_module_build_id = nullptr;
    decltype(&::dwfl_module_addrdie) dwfl_module_addrdie = nullptr;
    decltype(&::dwarf_getscopes) dwarf_getscopes = nullptr;
    decltype(&::dwarf_tag) dwarf_tag = nullptr;
    decltype(&::dwarf_attr_integrate) dwarf_attr_integrate = nullptr;
    decltype(&::dwarf_formstring) dwarf_formstring = nullptr;
    decltype(&::dwarf_diename) dwarf_diename = nullptr;
    decltype(&::dwarf_attr) dwarf_attr = nullptr;
    decltype(&::dwarf_formref_die) dwarf_formref_die = nullptr;
    decltype(&::dwfl_module_addrname) dwfl_module_addrname = nullptr;
    decltype(&::dwfl_module_getsrc) dwfl_module_getsrc = nullptr;
    decltype(&::dwfl_lineinfo) dwfl_lineinfo = nullptr;
    decltype(&::dwfl_standard_find_debuginfo) dwfl_standard_find_debuginfo = nullptr;
    decltype(&::dwfl_offline_section_address) dwfl_offline_section_address = nullptr;
    bool ok = false;
};

const DwApi& dw() {
    static const DwApi api = [] {
        DwApi a;
        void* h = dlopen("libdw.so.1", RTLD_NOW | RTLD_LOCAL);
        if (!h) return a;
        a.dwfl_begin = reinterpret_cast<decltype(a.dwfl_begin)>(dlsym(h, "dwfl_begin"));
        if (!a.dwfl_begin) return a;
        a.dwfl_end = reinterpret_cast<decltype(a.dwfl_end)>(dlsym(h, "dwfl_end"));
        if (!a.dwfl_end) return a;
        a.dwfl_report_begin = reinterpret_cast<decltype(a.dwfl_report_begin)>(dlsym(h, "dwfl_report_begin"));
        if (!a.dwfl_report_begin) return a;
        a.dwfl_report_elf = reinterpret_cast<decltype(a.dwfl_report_elf)>(dlsym(h, "dwfl_report_elf"));
        if (!a.dwfl_report_elf) return a;
        a.dwfl_report_end = reinterpret_cast<decltype(a.dwfl_report_end)>(dlsym(h, "dwfl_report_end"));
        if (!a.dwfl_report_end) return a;
        a.dwfl_module_build_id = reinterpret_cast<decltype(a.dwfl_module_build_id)>(dlsym(h, "dwfl_module_build_id"));
        if (!a.dwfl_module_build_id) return a;
        a.dwfl_module_addrdie = reinterpret_cast<decltype(a.dwfl_module_addrdie)>(dlsym(h, "dwfl_module_addrdie"));
        if (!a.dwfl_module_addrdie) return a;
        a.dwarf_getscopes = reinterpret_cast<decltype(a.dwarf_getscopes)>(dlsym(h, "dwarf_getscopes"));
        if (!a.dwarf_getscopes) return a;
        a.dwarf_tag = reinterpret_cast<decltype(a.dwarf_tag)>(dlsym(h, "dwarf_tag"));
        if (!a.dwarf_tag) return a;
        a.dwarf_attr_integrate = reinterpret_cast<decltype(a.dwarf_attr_integrate)>(dlsym(h, "dwarf_attr_integrate"));
        if (!a.dwarf_attr_integrate) return a;
        a.dwarf_formstring = reinterpret_cast<decltype(a.dwarf_formstring)>(dlsym(h, "dwarf_formstring"));
        if (!a.dwarf_formstring) return a;
        a.dwarf_diename = reinterpret_cast<decltype(a.dwarf_diename)>(dlsym(h, "dwarf_diename"));
        if (!a.dwarf_diename) return a;
        a.dwarf_attr = reinterpret_cast<decltype(a.dwarf_attr)>(dlsym(h, "dwarf_attr"));
        if (!a.dwarf_attr) return a;
        a.dwarf_formref_die = reinterpret_cast<decltype(a.dwarf_formref_die)>(dlsym(h, "dwarf_formref_die"));
        if (!a.dwarf_formref_die) return a;
        a.dwfl_module_addrname = reinterpret_cast<decltype(a.dwfl_module_addrname)>(dlsym(h, "dwfl_module_addrname"));
        if (!a.dwfl_module_addrname) return a;
        a.dwfl_module_getsrc = reinterpret_cast<decltype(a.dwfl_module_getsrc)>(dlsym(h, "dwfl_module_getsrc"));
        if (!a.dwfl_module_getsrc) return a;
        a.dwfl_lineinfo = reinterpret_cast<decltype(a.dwfl_lineinfo)>(dlsym(h, "dwfl_lineinfo"));
        if (!a.dwfl_lineinfo) return a;
        a.dwfl_standard_find_debuginfo = reinterpret_cast<decltype(a.dwfl_standard_find_debuginfo)>(dlsym(h, "dwfl_standard_find_debuginfo"));
        if (!a.dwfl_standard_find_debuginfo) return a;
        a.dwfl_offline_section_address = reinterpret_cast<decltype(a.dwfl_offline_section_address)>(dlsym(h, "dwfl_offline_section_address"));
        if (!a.dwfl_offline_section_address) return a;
        a.ok = true;
        return a;
    }();
    return api;
}

const Dwfl_Callbacks* callbacks() {
    static const Dwfl_Callbacks cb = {
        nullptr,                            // find_elf: the file is always given
        dw().dwfl_standard_find_debuginfo,  // separate debug files by build-id / .gnu_debuglink
        dw().dwfl_offline_section_address,
        nullptr,
    };
    return &cb;
}

// One ELF file reported at bias 0, so that a recorded offset (address - load address) is the
// file's own address.
struct OpenModule {
    Dwfl* dwfl = nullptr;
    Dwfl_Module* mod = nullptr;
    std::string buildId;
    ~OpenModule() {
        if (dwfl) dw().dwfl_end(dwfl);
    }
};

std::unique_ptr<OpenModule> openElf(const std::string& path) {
    auto m = std::make_unique<OpenModule>();
    if (!dw().ok) return nullptr;
    m->dwfl = dw().dwfl_begin(callbacks());
    if (!m->dwfl) return nullptr;
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return nullptr;
    dw().dwfl_report_begin(m->dwfl);
    // libdw owns fd from here (closed by dwfl_end), also on failure.
    m->mod = dw().dwfl_report_elf(m->dwfl, path.c_str(), path.c_str(), fd, 0, false);
    dw().dwfl_report_end(m->dwfl, nullptr, nullptr);
    if (!m->mod) return nullptr;
    const unsigned char* bits = nullptr;
    GElf_Addr vaddr = 0;
    const int n = dw().dwfl_module_build_id(m->mod, &bits, &vaddr);
    if (n > 0) m->buildId = hex(bits, n);
    return m;
}

bool exists(const std::string& p) { return ::access(p.c_str(), R_OK) == 0; }

// The file to read a module's symbols from: its recorded path if the build-id matches, else a
// debug file found by build-id.
std::unique_ptr<OpenModule> findModule(const ModuleInfo& info) {
    if (!info.path.empty() && exists(info.path)) {
        auto m = openElf(info.path);
        if (m && m->buildId == info.buildId) return m;
    }
    if (info.buildId.size() < 4) return nullptr;
    const std::string rel = ".build-id/" + info.buildId.substr(0, 2) + "/" + info.buildId.substr(2);
    std::vector<std::string> dirs;
    if (const char* env = std::getenv("POOLSCOPE_DEBUG_DIRS")) {
        std::string all = env;
        size_t start = 0;
        while (start <= all.size()) {
            const size_t colon = all.find(':', start);
            const std::string d = all.substr(start, colon == std::string::npos ? std::string::npos
                                                                                : colon - start);
            if (!d.empty()) dirs.push_back(d);
            if (colon == std::string::npos) break;
            start = colon + 1;
        }
    }
    dirs.push_back("/usr/lib/debug");
    for (const std::string& d : dirs) {
        for (const std::string& candidate :
             {d + "/" + rel + ".debug", d + "/" + rel, d + "/" + moduleName(info.path)}) {
            if (!exists(candidate)) continue;
            auto m = openElf(candidate);
            if (m && m->buildId == info.buildId) return m;
        }
    }
    return nullptr;
}

// The innermost function at pc: DWARF's (inlined subroutines count: the source line the user
// wrote is in the function inlined there), else the symbol table's.
std::string functionAt(Dwfl_Module* mod, Dwarf_Addr pc) {
    Dwarf_Addr bias = 0;
    if (Dwarf_Die* cu = dw().dwfl_module_addrdie(mod, pc, &bias)) {
        Dwarf_Die* scopes = nullptr;
        const int n = dw().dwarf_getscopes(cu, pc - bias, &scopes);
        std::string name;
        for (int i = 0; i < n && name.empty(); ++i) {
            const int tag = dw().dwarf_tag(&scopes[i]);
            if (tag != DW_TAG_subprogram && tag != DW_TAG_inlined_subroutine) continue;
            Dwarf_Attribute attr;
            Dwarf_Die origin = scopes[i];
            // Inlined copies and out-of-line definitions name their function through
            // abstract_origin / specification.
            for (int hop = 0; hop < 4; ++hop) {
                const char* linkage = nullptr;
                if (dw().dwarf_attr_integrate(&origin, DW_AT_linkage_name, &attr))
                    linkage = dw().dwarf_formstring(&attr);
                if (linkage) {
                    name = demangle(linkage);
                    break;
                }
                if (const char* dn = dw().dwarf_diename(&origin)) {
                    name = dn;
                    break;
                }
                Dwarf_Die next;
                if (!dw().dwarf_attr(&origin, DW_AT_abstract_origin, &attr) &&
                    !dw().dwarf_attr(&origin, DW_AT_specification, &attr))
                    break;
                if (!dw().dwarf_formref_die(&attr, &next)) break;
                origin = next;
            }
        }
        std::free(scopes);
        if (!name.empty()) return name;
    }
    if (const char* sym = dw().dwfl_module_addrname(mod, pc)) return demangle(sym);
    return {};
}

} // namespace

std::string readBuildId(const std::string& path) {
    auto m = openElf(path);
    return m ? m->buildId : std::string();
}

SymbolizeResult symbolize(StackTables& t, std::vector<Symbol>* added) {
    SymbolizeResult r;
    std::map<uint32_t, std::set<uint64_t>> wanted;
    for (const auto& [id, frames] : t.nativeStacks)
        for (const NativeFrame& f : frames)
            if (f.module && !t.symbol(f)) wanted[f.module].insert(f.offset);
    if (!wanted.empty() && !dw().ok) {
        for (const auto& [moduleId, offsets] : wanted) r.unresolved += offsets.size();
        r.missing.push_back("libdw.so.1 (elfutils) is not installed: no symbols");
        return r;
    }
    for (const auto& [moduleId, offsets] : wanted) {
        const ModuleInfo* info = t.module(moduleId);
        std::unique_ptr<OpenModule> m = info ? findModule(*info) : nullptr;
        if (!m) {
            r.unresolved += offsets.size();
            if (info) r.missing.push_back(info->path);
            continue;
        }
        for (uint64_t off : offsets) {
            // A recorded frame is a return address: the call is the instruction before it.
            const Dwarf_Addr pc = off ? off - 1 : 0;
            Symbol s;
            s.module = moduleId;
            s.offset = off;
            s.function = functionAt(m->mod, pc);
            if (Dwfl_Line* line = dw().dwfl_module_getsrc(m->mod, pc)) {
                int lineNo = 0;
                if (const char* file = dw().dwfl_lineinfo(line, nullptr, &lineNo, nullptr, nullptr, nullptr)) {
                    s.file = file;
                    s.line = lineNo;
                }
            }
            if (s.function.empty()) {
                ++r.unresolved;
                continue;
            }
            ++r.resolved;
            if (added) added->push_back(s);
            t.symbols[{moduleId, off}] = std::move(s);
        }
    }
    return r;
}

Result<size_t> storeSymbols(const std::string& path) {
    std::vector<Symbol> added;
    {
        auto r = TraceReader::open(path);
        if (!r) return r.error();
        if ((*r)->schemaVersion() < schema::kStacksVersion) return size_t{0};
        auto t = (*r)->stacks();
        if (!t) return t.error();
        if (t->nativeStacks.empty()) return size_t{0};
        symbolize(*t, &added);
    }
    if (added.empty()) return size_t{0};
    sqlite3* db = nullptr;
    auto fail = [&](const char* what) {
        Error e{ErrorCode::WriteFailed, std::string("could not ") + what + " '" + path +
                                            "': " + (db ? sqlite3_errmsg(db) : "out of memory")};
        sqlite3_close(db);
        return e;
    };
    if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE, nullptr) != SQLITE_OK)
        return fail("open");
    sqlite3_busy_timeout(db, 2000);
    if (sqlite3_exec(db, "BEGIN", nullptr, nullptr, nullptr) != SQLITE_OK) return fail("write");
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(db, "INSERT OR REPLACE INTO symbols(module,pc_offset,function,file,line) "
                               "VALUES(?,?,?,?,?)", -1, &st, nullptr) != SQLITE_OK)
        return fail("write symbols to");
    bool ok = true;
    for (const Symbol& s : added) {
        sqlite3_bind_int64(st, 1, s.module);
        sqlite3_bind_int64(st, 2, static_cast<int64_t>(s.offset));
        sqlite3_bind_text(st, 3, s.function.c_str(), -1, SQLITE_TRANSIENT);
        sqlite3_bind_text(st, 4, s.file.c_str(), -1, SQLITE_TRANSIENT);
        sqlite3_bind_int(st, 5, s.line);
        ok = ok && sqlite3_step(st) == SQLITE_DONE;
        sqlite3_reset(st);
    }
    sqlite3_finalize(st);
    if (!ok || sqlite3_exec(db, "COMMIT", nullptr, nullptr, nullptr) != SQLITE_OK)
        return fail("write symbols to");
    sqlite3_close(db);
    return added.size();
}

} // namespace poolscope
