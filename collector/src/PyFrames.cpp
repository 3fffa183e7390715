#include "PyFrames.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/uio.h>
#include <unistd.h>

namespace poolscope::collector {

namespace {
// Longest string and line table read (a file name longer than this is cut; a longer line table
// leaves its later lines unknown).
constexpr int64_t kMaxString = 4096;
constexpr int64_t kMaxTable = 1 << 20;
// Walks that find frames but no code object before the layout is judged wrong.
constexpr int kMaxInconclusive = 16;

template <class T>
T sym(const char* name) {
    return reinterpret_cast<T>(dlsym(RTLD_DEFAULT, name));
}

// /proc/self/mem, for kernels or sandboxes without process_vm_readv: opened once per process
// (a descriptor inherited through fork() would read the parent's memory).
int memFd() {
    static std::mutex m;
    static pid_t owner = 0;
    static int fd = -1;
    std::lock_guard lock(m);
    if (owner != getpid()) {
        if (fd >= 0) close(fd);
        fd = open("/proc/self/mem", O_RDONLY | O_CLOEXEC);
        owner = getpid();
    }
    return fd;
}

template <bool Checked, class T>
inline bool rd(uintptr_t addr, T& v) {
    if constexpr (Checked) {
        return checkedRead(&v, addr, sizeof v);
    } else {
        std::memcpy(&v, reinterpret_cast<const void*>(addr), sizeof v);
        return true;
    }
}

void appendUtf8(std::string& s, uint32_t c) {
    if (c < 0x80) {
        s += char(c);
    } else if (c < 0x800) {
        s += char(0xC0 | (c >> 6));
        s += char(0x80 | (c & 0x3F));
    } else if (c < 0x10000) {
        s += char(0xE0 | (c >> 12));
        s += char(0x80 | ((c >> 6) & 0x3F));
        s += char(0x80 | (c & 0x3F));
    } else {
        s += char(0xF0 | ((c >> 18) & 0x07));
        s += char(0x80 | ((c >> 12) & 0x3F));
        s += char(0x80 | ((c >> 6) & 0x3F));
        s += char(0x80 | (c & 0x3F));
    }
}

// Variable-length integers of the 3.11+ location table: 6-bit chunks, least significant first,
// bit 6 set on all but the last.
uint32_t readVarint(const uint8_t* t, size_t n, size_t& i) {
    uint32_t v = 0;
    for (int shift = 0; i < n && shift < 32; shift += 6) {
        const uint8_t b = t[i++];
        v |= uint32_t(b & 63) << shift;
        if (!(b & 64)) break;
    }
    return v;
}
int readSvarint(const uint8_t* t, size_t n, size_t& i) {
    const uint32_t u = readVarint(t, n, i);
    return (u & 1) ? -int(u >> 1) : int(u >> 1);
}
} // namespace

bool checkedRead(void* dst, uintptr_t src, size_t n) {
    if (n == 0) return true;
    if (src == 0 || src + n < src) return false;
    static std::atomic<bool> noVmRead{false};
    if (!noVmRead.load(std::memory_order_relaxed)) {
        iovec local{dst, n};
        iovec remote{reinterpret_cast<void*>(src), n};
        const ssize_t r = process_vm_readv(getpid(), &local, 1, &remote, 1, 0);
        if (r == ssize_t(n)) return true;
        if (r >= 0 || errno == EFAULT) return false;
        noVmRead.store(true, std::memory_order_relaxed); // ENOSYS, EPERM (seccomp): the fallback
    }
    const int fd = memFd();
    return fd >= 0 && pread(fd, dst, n, off_t(src)) == ssize_t(n);
}

bool pyLayoutForMinor(int minor, PyLayout& L) {
    L = PyLayout{};
    L.minor = minor;
    L.source = "table";
    // Offsets read from each version's own headers (3.10.13, 3.11.7, 3.12.1, 3.13.0 with
    // Py_BUILD_CORE; struct layouts do not change within a minor version).
    switch (minor) {
    case 10:
        L.tsFrame = 24;
        L.frPrevious = 24, L.frCode = 32, L.frInstr = 96;
        L.coFilename = 104, L.coName = 112, L.coLinetable = 120, L.coFirstlineno = 40;
        L.asciiData = 48, L.compactData = 72;
        return true;
    case 11:
        L.tsFrame = 56, L.cframeFrame = 8;
        L.frCode = 32, L.frPrevious = 48, L.frInstr = 56;
        L.coFilename = 112, L.coName = 120, L.coQualname = 128, L.coLinetable = 136;
        L.coFirstlineno = 72, L.coCode = 184;
        L.asciiData = 48, L.compactData = 72;
        L.locationTable = true;
        return true;
    case 12:
        L.tsFrame = 56, L.cframeFrame = 0;
        L.frCode = 0, L.frPrevious = 8, L.frInstr = 56, L.frOwner = 70;
        L.coFilename = 112, L.coName = 120, L.coQualname = 128, L.coLinetable = 136;
        L.coFirstlineno = 68, L.coCode = 192;
        L.asciiData = 40, L.compactData = 56;
        L.locationTable = true;
        return true;
    case 13:
        L.tsFrame = 72;
        L.frCode = 0, L.frPrevious = 8, L.frInstr = 56, L.frOwner = 70;
        L.coFilename = 112, L.coName = 120, L.coQualname = 128, L.coLinetable = 136;
        L.coFirstlineno = 68, L.coCode = 200;
        L.asciiData = 40, L.compactData = 56;
        L.locationTable = true;
        return true;
    default:
        return false;
    }
}

bool pyLayoutFromDebugOffsets(uintptr_t runtime, PyLayout& L, std::string& why) {
    // 3.13's _Py_DebugOffsets as an array of 64-bit words: the cookie, then the version, the
    // free-threaded flag and one group per structure, each group starting with that
    // structure's size. Only stable within a minor version, hence the version check first.
    constexpr int kWords = 73;
    uint64_t w[kWords];
    if (!checkedRead(w, runtime, sizeof w)) {
        why = "_PyRuntime is not readable";
        return false;
    }
    if (std::memcmp(w, "xdebugpy", 8) != 0) {
        why = "_PyRuntime does not start with the debug offsets' cookie";
        return false;
    }
    const uint64_t version = w[1];
    if ((version >> 24) != 3 || ((version >> 16) & 0xFF) != 13) {
        why = "debug offsets of another version";
        return false;
    }
    if (w[2] != 0) {
        why = "free-threaded build (its objects have another header)";
        return false;
    }
    enum : int {
        TsSize = 19, TsCurrentFrame = 23,
        FrSize = 28, FrPrevious = 29, FrExecutable = 30, FrInstr = 31, FrOwner = 33,
        CoSize = 34, CoFilename = 35, CoName = 36, CoQualname = 37, CoLinetable = 38,
        CoFirstlineno = 39, CoCodeAdaptive = 43,
        ObSize = 44, ObType = 45,
        BySize = 64, ByObSize = 65, BySval = 66,
        UnSize = 67, UnState = 68, UnLength = 69, UnAsciiSize = 70,
    };
    // Each offset must lie inside its structure, each structure be of a plausible size.
    auto inside = [&](int field, int size) { return w[size] > 0 && w[size] < 65536 && w[field] < w[size]; };
    for (auto [f, s] : {std::pair{TsCurrentFrame, TsSize}, {FrPrevious, FrSize}, {FrExecutable, FrSize},
                        {FrInstr, FrSize}, {FrOwner, FrSize}, {CoFilename, CoSize}, {CoName, CoSize},
                        {CoQualname, CoSize}, {CoLinetable, CoSize}, {CoFirstlineno, CoSize},
                        {ObType, ObSize}, {ByObSize, BySize}, {UnState, UnSize}, {UnLength, UnSize}})
        if (!inside(f, s)) {
            why = "implausible debug offsets";
            return false;
        }
    if (w[CoCodeAdaptive] > w[CoSize] || w[BySval] > w[BySize] || w[UnAsciiSize] >= w[UnSize] ||
        w[UnSize] < 8) {
        why = "implausible debug offsets";
        return false;
    }
    L = PyLayout{};
    L.minor = 13;
    L.source = "_Py_DebugOffsets";
    L.tsFrame = int32_t(w[TsCurrentFrame]);
    L.frPrevious = int32_t(w[FrPrevious]);
    L.frCode = int32_t(w[FrExecutable]);
    L.frInstr = int32_t(w[FrInstr]);
    L.frOwner = int32_t(w[FrOwner]);
    L.coFilename = int32_t(w[CoFilename]);
    L.coName = int32_t(w[CoName]);
    L.coQualname = int32_t(w[CoQualname]);
    L.coLinetable = int32_t(w[CoLinetable]);
    L.coFirstlineno = int32_t(w[CoFirstlineno]);
    L.coCode = int32_t(w[CoCodeAdaptive]);
    L.obType = int32_t(w[ObType]);
    L.varSize = int32_t(w[ByObSize]);
    L.bytesData = int32_t(w[BySval]);
    L.strState = int32_t(w[UnState]);
    L.strLength = int32_t(w[UnLength]);
    L.asciiData = int32_t(w[UnAsciiSize]);
    // PyUnicodeObject is the compact header plus one data pointer.
    L.compactData = int32_t(w[UnSize] - 8);
    L.locationTable = true;
    return true;
}

int pyLineFromTable(const uint8_t* t, size_t n, int firstLine, int addr, bool locationTable) {
    if (addr < 0) return firstLine;
    int line = firstLine;
    int64_t end = 0;
    if (!locationTable) {
        // 3.10: (address delta, line delta) byte pairs; a line delta of -128 marks a range
        // without a line and leaves the running line as it was.
        for (size_t i = 0; i + 1 < n; i += 2) {
            end += t[i];
            const int8_t d = int8_t(t[i + 1]);
            int rangeLine = -1;
            if (d != -128) {
                line += d;
                rangeLine = line;
            }
            if (end > addr) return std::max(rangeLine, 0);
        }
        return 0;
    }
    // 3.11+: entries of a first byte 1cccclll (code, length - 1 in code units) and the bytes
    // that code takes; the start line is a delta from the previous entry's.
    const int64_t unit = addr / 2;
    size_t i = 0;
    while (i < n) {
        const uint8_t b = t[i++];
        if (!(b & 0x80)) return 0; // not at an entry: a table this code does not understand
        const int code = (b >> 3) & 15;
        end += (b & 7) + 1;
        int rangeLine = line;
        if (code == 15) {
            rangeLine = -1; // no location
        } else if (code == 13 || code == 14) {
            line += readSvarint(t, n, i);
            rangeLine = line;
        } else if (code >= 10) {
            line += code - 10;
            rangeLine = line;
        }
        // The rest of the entry (end line, columns) is skipped up to the next first byte.
        while (i < n && !(t[i] & 0x80)) ++i;
        if (end > unit) return std::max(rangeLine, 0);
    }
    return 0;
}

bool PyFrameReader::init() {
    state_.store(Off, std::memory_order_release);
    isInitialized_ = sym<int (*)()>("Py_IsInitialized");
    thisThreadState_ = sym<void* (*)()>("PyGILState_GetThisThreadState");
    if (!isInitialized_ || !thisThreadState_) {
        why_ = "no Python interpreter in the process";
        return false;
    }
    int major = 0, minor = 0, micro = 0;
    if (const auto* v = sym<const unsigned long*>("Py_Version")) { // 3.11+
        unsigned long hex = 0;
        if (checkedRead(&hex, reinterpret_cast<uintptr_t>(v), sizeof hex)) {
            major = int(hex >> 24), minor = int((hex >> 16) & 0xFF), micro = int((hex >> 8) & 0xFF);
        }
    } else if (auto getVersion = sym<const char* (*)()>("Py_GetVersion")) {
        if (const char* s = getVersion()) std::sscanf(s, "%d.%d.%d", &major, &minor, &micro);
    }
    version_ = std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(micro);
    if (major != 3 || minor < 10 || minor > 13) {
        why_ = "Python " + version_ + ": this collector knows the frame layout of 3.10 to 3.13 only";
        return false;
    }
    std::string how;
    bool have = false;
    if (minor >= 13) {
        if (auto rt = sym<const void*>("_PyRuntime"))
            have = pyLayoutFromDebugOffsets(reinterpret_cast<uintptr_t>(rt), L_, how);
        else
            how = "no _PyRuntime";
    }
    if (!have && !pyLayoutForMinor(minor, L_)) {
        why_ = "Python " + version_ + ": no frame layout";
        return false;
    }
    if (minor >= 12) {
        currentState_ = sym<void* (*)()>("PyThreadState_GetUnchecked");
        if (!currentState_) currentState_ = sym<void* (*)()>("_PyThreadState_UncheckedGet");
    }
    codeType_ = reinterpret_cast<uintptr_t>(sym<void*>("PyCode_Type"));
    unicodeType_ = reinterpret_cast<uintptr_t>(sym<void*>("PyUnicode_Type"));
    bytesType_ = reinterpret_cast<uintptr_t>(sym<void*>("PyBytes_Type"));
    if (!codeType_ || !unicodeType_ || !bytesType_) {
        why_ = "Python " + version_ + ": its type objects are not exported";
        return false;
    }
    uint64_t probe = 0;
    if (!checkedRead(&probe, codeType_, sizeof probe)) {
        why_ = "Python " + version_ + ": this process's memory cannot be read with checks "
               "(process_vm_readv and /proc/self/mem refused)";
        return false;
    }
    if (!how.empty()) how = " (" + how + ")";
    why_ = std::string(L_.source) + how;
    inconclusive_.store(0);
    codes_.clear();
    state_.store(Checking, std::memory_order_release);
    return true;
}

std::string PyFrameReader::status() const {
    std::lock_guard lock(whyMutex_);
    const int s = state_.load(std::memory_order_acquire);
    if (s == Off) return "off: " + why_;
    return version_ + ", " + why_ + (s == Ready ? ", checked" : ", not checked yet");
}

void PyFrameReader::disable(const std::string& why) {
    {
        std::lock_guard lock(whyMutex_);
        why_ = "Python " + version_ + ": " + why;
    }
    state_.store(Off, std::memory_order_release);
}

uintptr_t PyFrameReader::threadState() const {
    // 3.12+: the thread-local current state first (set while the thread holds the GIL, also
    // for thread states made without PyGILState); then the state PyGILState bound to this
    // thread, which stays set while the thread runs C code with the GIL released. Before
    // 3.12 the "current" state is a global (the GIL holder's, maybe another thread's): unused.
    if (currentState_)
        if (void* t = currentState_()) return reinterpret_cast<uintptr_t>(t);
    return reinterpret_cast<uintptr_t>(thisThreadState_());
}

template <bool Checked>
int PyFrameReader::walkImpl(uintptr_t ts, PyRawFrame* out, int max, bool& bad) {
    const PyLayout& L = L_;
    uintptr_t f = 0;
    if (!rd<Checked>(ts + L.tsFrame, f)) return bad = true, 0;
    if (L.cframeFrame >= 0 && f && !rd<Checked>(f + L.cframeFrame, f)) return bad = true, 0;
    int n = 0;
    // Shim frames are skipped, so the links walked are bounded apart from the frames kept.
    for (int links = 0; f && n < max && links < 4 * max + 64; ++links) {
        if (f & 7) return bad = true, n; // frames are pointer-aligned
        uintptr_t code = 0;
        if (!rd<Checked>(f + L.frCode, code)) return bad = true, n;
        int8_t owner = 0;
        if (L.frOwner >= 0 && !rd<Checked>(f + L.frOwner, owner)) return bad = true, n;
        if (owner != kOwnedByCStack && code && !(code & 7)) {
            uintptr_t type = 0;
            if (!rd<Checked>(code + L.obType, type)) return bad = true, n;
            if (type == codeType_) {
                int64_t addr = -1;
                if (L.coCode < 0) { // 3.10: f_lasti counts code units
                    int32_t lasti = 0;
                    if (!rd<Checked>(f + L.frInstr, lasti)) return bad = true, n;
                    addr = lasti < 0 ? -1 : int64_t(lasti) * 2;
                } else {
                    uintptr_t ip = 0;
                    if (!rd<Checked>(f + L.frInstr, ip)) return bad = true, n;
                    addr = int64_t(ip) - int64_t(code + uintptr_t(L.coCode));
                }
                if (addr < -2 || addr > (int64_t(1) << 30)) addr = -1;
                out[n++] = {code, int32_t(addr)};
            }
        }
        uintptr_t prev = 0;
        if (!rd<Checked>(f + L.frPrevious, prev)) return bad = true, n;
        f = prev;
    }
    return n;
}

int PyFrameReader::walk(PyRawFrame* out, int max) {
    const int s = state_.load(std::memory_order_acquire);
    if (s == Off || max <= 0) return 0;
    // Not while the interpreter finalizes: it frees other threads' states.
    if (!isInitialized_()) return 0;
    const uintptr_t ts = threadState();
    if (!ts) return 0;
    bool bad = false;
    if (s == Ready) return walkImpl<false>(ts, out, max, bad);
    // Until one walk has found real code objects through checked reads, plain loads are not
    // trusted: a wrong layout then reads an error here instead of faulting in the target.
    const int n = walkImpl<true>(ts, out, max, bad);
    if (bad) {
        disable("a frame read through the " + std::string(L_.source) + " layout failed");
        return 0;
    }
    if (n > 0) {
        state_.store(Ready, std::memory_order_release);
        return n;
    }
    uintptr_t first = 0;
    if (checkedRead(&first, ts + L_.tsFrame, sizeof first) && first &&
        inconclusive_.fetch_add(1) + 1 >= kMaxInconclusive)
        disable("frames found but no code object in them: the layout does not match");
    return 0;
}

bool PyFrameReader::readString(uintptr_t obj, std::string& out) {
    out.clear();
    const PyLayout& L = L_;
    uintptr_t type = 0;
    int64_t length = 0;
    uint32_t state = 0;
    if (!obj || !checkedRead(&type, obj + L.obType, sizeof type) || type != unicodeType_) return false;
    if (!checkedRead(&length, obj + L.strLength, sizeof length) ||
        !checkedRead(&state, obj + L.strState, sizeof state) || length < 0)
        return false;
    // state: interned:2, kind:3, compact:1, ascii:1 (the same bits 3.10-3.13).
    const unsigned kind = (state >> 2) & 7;
    const bool compact = (state >> 5) & 1, ascii = (state >> 6) & 1;
    if (!compact) return false; // legacy strings: code objects never hold them
    const int64_t n = std::min(length, kMaxString);
    if (ascii) {
        out.resize(size_t(n));
        return checkedRead(out.data(), obj + uintptr_t(L.asciiData), size_t(n));
    }
    if (kind != 1 && kind != 2 && kind != 4) return false;
    std::string raw(size_t(n) * kind, '\0');
    if (!checkedRead(raw.data(), obj + uintptr_t(L.compactData), raw.size())) return false;
    for (int64_t i = 0; i < n; ++i) {
        uint32_t c = 0;
        std::memcpy(&c, raw.data() + i * kind, kind); // little-endian
        appendUtf8(out, c);
    }
    return true;
}

const PyFrameReader::CodeInfo* PyFrameReader::codeInfo(uintptr_t code) {
    const PyLayout& L = L_;
    uintptr_t type = 0, file = 0, name = 0, table = 0;
    int32_t first = 0;
    if (!checkedRead(&type, code + L.obType, sizeof type) || type != codeType_) return nullptr;
    if (!checkedRead(&file, code + L.coFilename, sizeof file) ||
        !checkedRead(&name, code + (L.coQualname >= 0 ? L.coQualname : L.coName), sizeof name) ||
        !checkedRead(&table, code + L.coLinetable, sizeof table) ||
        !checkedRead(&first, code + L.coFirstlineno, sizeof first))
        return nullptr;
    // Keyed by address; a code object freed and another made at its address is told apart by
    // its own filename, name and line table objects.
    auto it = codes_.find(code);
    if (it != codes_.end() && it->second.filename == file && it->second.name == name &&
        it->second.linetable == table && it->second.firstLine == first)
        return &it->second;
    if (codes_.size() > 200'000) codes_.clear(); // code made at run time without end
    CodeInfo ci{file, name, table, first, {}, {}, {}};
    if (!readString(file, ci.file)) ci.file = "?";
    if (!readString(name, ci.function)) ci.function = "?";
    uintptr_t btype = 0;
    int64_t size = 0;
    if (table && checkedRead(&btype, table + L.obType, sizeof btype) && btype == bytesType_ &&
        checkedRead(&size, table + L.varSize, sizeof size) && size > 0) {
        ci.table.resize(size_t(std::min(size, kMaxTable)));
        if (!checkedRead(ci.table.data(), table + uintptr_t(L.bytesData), ci.table.size()))
            ci.table.clear();
    }
    return &(codes_[code] = std::move(ci));
}

bool PyFrameReader::resolve(const PyRawFrame& f, PythonFrame& out) {
    const CodeInfo* ci = codeInfo(f.code);
    if (!ci) return false;
    out.file = ci->file;
    out.function = ci->function;
    out.line = pyLineFromTable(reinterpret_cast<const uint8_t*>(ci->table.data()), ci->table.size(),
                               ci->firstLine, f.addr, L_.locationTable);
    return true;
}

void PyFrameReader::useLayoutForTest(const PyLayout& l) {
    L_ = l;
    codes_.clear();
    inconclusive_.store(0);
    state_.store(Checking, std::memory_order_release);
}

int PyFrameReader::lineOf(uintptr_t code, int addr) {
    PythonFrame f;
    return resolve({code, addr}, f) ? f.line : -1;
}

} // namespace poolscope::collector
