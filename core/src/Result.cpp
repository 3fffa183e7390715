#include "poolscope/Result.h"

namespace poolscope {

int exitCodeFor(ErrorCode c) {
    switch (c) {
    case ErrorCode::Ok: return 0;
    case ErrorCode::InvalidArgument: return 2;
    case ErrorCode::NotFound: return 3;
    case ErrorCode::NotReadable: return 4;
    case ErrorCode::NotSqlite: return 5;
    case ErrorCode::NotATrace: return 6;
    case ErrorCode::NewerVersion: return 7;
    case ErrorCode::MissingTables: return 8;
    case ErrorCode::Corrupt: return 9;
    case ErrorCode::WriteFailed: return 10;
    case ErrorCode::Cancelled: return 11;
    case ErrorCode::Protocol: return 12;
    case ErrorCode::Io: return 13;
    case ErrorCode::Internal: return 1;
    }
    return 1;
}

} // namespace poolscope
