#pragma once
// The seam between the collector and the live control server (collector/control/). Two
// interfaces, one each way:
//   - control::PoolControl (collector/control/PoolControl.h): what the server asks of the
//     process, which PoolControl.cpp implements directly with the CUDA driver API;
//   - LiveSink (collector/control/LiveSink.h): the events the collector's writer has written,
//     fed to the server (ControlServer implements it).
// The collector knows nothing about sockets or the protocol: when POOLSCOPE_LISTEN is set it
// calls startControlServer() and hands the result to its TraceSink.

#include "LiveSink.h"

#include <memory>
#include <string>

namespace poolscope::collector {

// listen is the value of POOLSCOPE_LISTEN (e.g. "1" or "unix:/tmp/x.sock"). Returns nullptr,
// after logging one "[poolscope]" line, when the server cannot start (or listen says "0");
// recording goes on without it. Defined in PoolControl.cpp.
std::unique_ptr<LiveSink> startControlServer(const std::string& listen);

} // namespace poolscope::collector
