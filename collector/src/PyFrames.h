#pragma once
// The calling thread's Python frames, read from CPython's memory without the GIL (issue #13).
//
// PyTorch releases the GIL before it allocates, so the C API (which needs the GIL, and whose
// frame accessors return new references) cannot be used at an allocation. What makes a raw read
// sound: the thread's own frame chain only changes when that thread runs Python code, and while
// it is inside a C call (the allocation) it runs none; the code objects on the chain are kept
// alive by their frames. So the walk reads only the calling thread's own thread state (found
// through thread-local storage: PyGILState_GetThisThreadState, or the 3.12+ current-thread
// variable), never takes the GIL, never touches a reference count and never calls into Python.
//
// Where the fields are differs by minor version: 3.13 publishes its offsets in _PyRuntime's
// _Py_DebugOffsets (made for out-of-process debuggers); 3.10-3.12 come from a table checked
// against each version's headers (tests/collector/pyframes_check.py runs every interpreter it is
// given). Any other version turns Python frames off with the reason in the trace's meta.
//
// A wrong layout must never crash the target: the first walks read through process_vm_readv on
// this process (a bad address is an error, not a fault) and must find real code objects
// (ob_type == &PyCode_Type) before plain loads are trusted; strings and line tables are always
// read that way (cold: once per code object). A failed check turns Python frames off.
// GPU-free: tests drive it on CPU.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>

#include "poolscope/Stacks.h"

namespace poolscope::collector {

// Byte offsets of what the walk reads (LP64). -1: the version has no such field.
struct PyLayout {
    int minor = 0;               // 3.<minor>
    const char* source = "";     // "table" or "_Py_DebugOffsets"
    // Thread state -> innermost frame: 3.10 tstate->frame (a PyFrameObject); 3.11/3.12
    // tstate->cframe then _PyCFrame.current_frame; 3.13 tstate->current_frame.
    int32_t tsFrame = -1;
    int32_t cframeFrame = -1;    // 3.11/3.12 only
    int32_t frPrevious = -1;     // f_back (3.10) / previous
    int32_t frCode = -1;         // f_code / f_executable
    // 3.10: f_lasti, an int counting code units; 3.11+: prev_instr / instr_ptr, a pointer into
    // the code object's co_code_adaptive.
    int32_t frInstr = -1;
    int32_t frOwner = -1;        // 3.12+: a char; kOwnedByCStack marks the C-stack shim frames
    int32_t coFilename = -1, coName = -1, coQualname = -1, coLinetable = -1, coFirstlineno = -1;
    int32_t coCode = -1;         // co_code_adaptive (3.11+)
    int32_t obType = 8;
    int32_t varSize = 16;        // PyVarObject.ob_size
    int32_t bytesData = 32;      // PyBytesObject.ob_sval
    int32_t strLength = 16, strState = 32;
    int32_t asciiData = -1;      // sizeof(PyASCIIObject): compact ASCII data
    int32_t compactData = -1;    // sizeof(PyCompactUnicodeObject): other compact strings' data
    bool locationTable = false;  // 3.11+ co_linetable (else 3.10's (address, line) pairs)
};
inline constexpr int kOwnedByCStack = 3;

// The built-in layout of 3.<minor> (10-13); false for others.
bool pyLayoutForMinor(int minor, PyLayout& out);
// 3.13's layout from the _Py_DebugOffsets at the start of _PyRuntime (`runtime`, read through
// checked reads). false with `why` when it is not one this code knows.
bool pyLayoutFromDebugOffsets(uintptr_t runtime, PyLayout& out, std::string& why);

// The line of the instruction at byte offset `addr` (negative: before the first: the first
// line) from a co_linetable. 0 when the table has no line there.
int pyLineFromTable(const uint8_t* table, size_t n, int firstLine, int addr, bool locationTable);

// Copies n bytes at `src` of this process into dst without faulting on a bad address
// (process_vm_readv, else /proc/self/mem). false: not readable or no way to check.
bool checkedRead(void* dst, uintptr_t src, size_t n);

// One Python frame as the hot path keeps it.
struct PyRawFrame {
    uintptr_t code;   // the code object
    int32_t addr;     // byte offset of the instruction in its bytecode (-2/-1: not started)
};

class PyFrameReader {
public:
    // Cold: finds CPython in the process (dlsym), its version and layout.
    bool init();
    bool ok() const { return state_.load(std::memory_order_acquire) >= Checking; }
    // What was found ("3.12 (table), checked"), or why Python frames are off.
    std::string status() const;

    // Hot: the calling thread's frames, innermost first (at most max). No GIL, no reference
    // counts, no allocation, no lock.
    int walk(PyRawFrame* out, int max);
    // Cold, during the capture that walked the frame (so it is still live): its file,
    // function and line. Callers serialize (the recorder's mutex).
    bool resolve(const PyRawFrame& f, PythonFrame& out);

    // Tests: the line table decoder applied to a live code object; the layout in use.
    int lineOf(uintptr_t code, int addr);
    const PyLayout& layout() const { return L_; }
    // Tests: another layout, to be checked again from the start (a wrong one must turn the
    // reader off, not crash).
    void useLayoutForTest(const PyLayout& l);

private:
    enum State : int { Off = 0, Checking = 1, Ready = 2 };
    struct CodeInfo {
        uintptr_t filename, name, linetable; // identity check against a reused address
        int firstLine;
        std::string file, function, table;
    };
    uintptr_t threadState() const;
    template <bool Checked>
    int walkImpl(uintptr_t tstate, PyRawFrame* out, int max, bool& bad);
    const CodeInfo* codeInfo(uintptr_t code);
    bool readString(uintptr_t obj, std::string& out);
    void disable(const std::string& why);

    PyLayout L_;
    std::atomic<int> state_{Off};
    std::atomic<int> inconclusive_{0};
    std::string version_;
    std::string why_ = "no Python interpreter in the process";
    mutable std::mutex whyMutex_;
    int (*isInitialized_)() = nullptr;
    void* (*thisThreadState_)() = nullptr; // PyGILState_GetThisThreadState
    void* (*currentState_)() = nullptr;    // 3.12+: the thread-local current thread state
    uintptr_t codeType_ = 0, unicodeType_ = 0, bytesType_ = 0;
    std::unordered_map<uintptr_t, CodeInfo> codes_;
};

} // namespace poolscope::collector
