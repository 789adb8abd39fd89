#include "phi/core/errors.h"

#include <cstdarg>
#include <cstring>

namespace phi {

const char* ErrorCodeName(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument: return "InvalidArgument";
    case ErrorCode::kOutOfRange: return "OutOfRange";
    case ErrorCode::kPreconditionNotMet: return "PreconditionNotMet";
    case ErrorCode::kUnavailable: return "Unavailable";
    case ErrorCode::kTimeout: return "Timeout";
    case ErrorCode::kExternal: return "External";
    case ErrorCode::kUnimplemented: return "Unimplemented";
    case ErrorCode::kNotFound: return "NotFound";
  }
  return "Unknown";
}

namespace errors {
namespace detail {
std::string Format(const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  va_list copy;
  va_copy(copy, args);
  int n = std::vsnprintf(nullptr, 0, fmt, copy);
  va_end(copy);
  std::string out(n > 0 ? static_cast<size_t>(n) : 0, '\0');
  if (n > 0) std::vsnprintf(&out[0], out.size() + 1, fmt, args);
  va_end(args);
  return out;
}
}  // namespace detail
}  // namespace errors

[[noreturn]] static void ThrowCode(ErrorCode code, const std::string& msg) {
  switch (code) {
    case ErrorCode::kInvalidArgument: throw InvalidArgumentError(msg);
    case ErrorCode::kOutOfRange: throw OutOfRangeError(msg);
    case ErrorCode::kPreconditionNotMet: throw PreconditionNotMetError(msg);
    case ErrorCode::kUnavailable: throw UnavailableError(msg);
    case ErrorCode::kTimeout: throw TimeoutError(msg);
    case ErrorCode::kExternal: throw ExternalError(msg);
    case ErrorCode::kUnimplemented: throw UnimplementedError(msg);
    case ErrorCode::kNotFound: throw NotFoundError(msg);
  }
  throw EnforceNotMet(code, msg);
}

void ThrowError(const ErrorSummary& summary, const std::string& hint, const char* file,
                int line) {
  const char* base = std::strrchr(file, '/');
  std::string msg = std::string(ErrorCodeName(summary.code)) + "Error: " + summary.message;
  if (!hint.empty()) msg += "\n  [Hint: " + hint + "]";
  msg += " (at " + std::string(base ? base + 1 : file) + ":" + std::to_string(line) + ")";
  ThrowCode(summary.code, msg);
}

void RethrowWithContext(std::exception_ptr error, const std::string& context) {
  try {
    std::rethrow_exception(error);
  } catch (const EnforceNotMet& e) {
    ThrowCode(e.code(), context + ": " + e.what());
  } catch (const std::exception& e) {
    throw ExternalError("ExternalError: " + context + ": " + e.what());
  } catch (...) {
    throw ExternalError("ExternalError: " + context + ": unknown exception");
  }
}

}  // namespace phi
