// _pyframes_probe: a Python extension module that runs the collector's StackRecorder (Python
// mode) inside whichever interpreter imports it, so tests/collector/pyframes_check.py can check
// the frames it reads against the interpreter's own traceback on every Python version the
// build finds. Built once against the stable ABI (Py_LIMITED_API 3.10): the same file loads
// into 3.10 to 3.13; the collector's reader finds the running version at run time.
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <mutex>
#include <thread>
#include <unistd.h>

#include "Stacks.h"

using namespace poolscope;
using namespace poolscope::collector;

namespace {

StackRecorder* g_rec = nullptr;
std::mutex g_mutex;
StackTables g_tables; // everything drained so far (drain hands out each row once)

int64_t identity(int64_t t) { return t; }

ThreadSites& sitesOfThisThread() {
    thread_local ThreadSites* mine = g_rec->newThread(uint32_t(gettid()));
    return *mine;
}

PyObject* framesOf(uint32_t site) {
    std::lock_guard lock(g_mutex);
    StackTables t;
    g_rec->drain(t, identity);
    g_tables.sites.merge(t.sites);
    g_tables.pythonStacks.merge(t.pythonStacks);
    PyObject* list = PyList_New(0);
    auto s = g_tables.sites.find(site);
    if (!list || s == g_tables.sites.end()) return list;
    auto p = g_tables.pythonStacks.find(s->second.pythonStack);
    if (p == g_tables.pythonStacks.end()) return list;
    for (const PythonFrame& f : p->second) {
        PyObject* item = Py_BuildValue("(ssi)", f.file.c_str(), f.function.c_str(), f.line);
        if (!item || PyList_Append(list, item) != 0) {
            Py_XDECREF(item);
            Py_DECREF(list);
            return nullptr;
        }
        Py_DECREF(item);
    }
    return list;
}

// capture(release_gil) -> [(file, function, line), ...], innermost first.
PyObject* capture(PyObject*, PyObject* args) {
    int release = 1;
    if (!PyArg_ParseTuple(args, "p", &release)) return nullptr;
    uint32_t site = 0;
    if (release) {
        Py_BEGIN_ALLOW_THREADS
        site = g_rec->capture(sitesOfThisThread());
        Py_END_ALLOW_THREADS
    } else {
        site = g_rec->capture(sitesOfThisThread());
    }
    return framesOf(site);
}

// line_of(code, byte_offset) -> the collector's line for that instruction.
PyObject* lineOf(PyObject*, PyObject* args) {
    PyObject* code = nullptr;
    int addr = 0;
    if (!PyArg_ParseTuple(args, "Oi", &code, &addr)) return nullptr;
    std::lock_guard lock(g_mutex);
    return PyLong_FromLong(g_rec->pythonReader().lineOf(reinterpret_cast<uintptr_t>(code), addr));
}

PyObject* status(PyObject*, PyObject*) { return PyUnicode_FromString(g_rec->describe().c_str()); }

PyMethodDef kMethods[] = {{"capture", capture, METH_VARARGS, nullptr},
                          {"line_of", lineOf, METH_VARARGS, nullptr},
                          {"status", status, METH_NOARGS, nullptr},
                          {nullptr, nullptr, 0, nullptr}};
PyModuleDef kModule = {PyModuleDef_HEAD_INIT, "_pyframes_probe", nullptr, -1, kMethods,
                       nullptr, nullptr, nullptr, nullptr};

} // namespace

extern "C" __attribute__((visibility("default"))) PyObject* PyInit__pyframes_probe() {
    if (!g_rec) {
        g_rec = new StackRecorder();
        g_rec->configure({StackMode::Python, 64}, {});
    }
    return PyModule_Create(&kModule);
}
