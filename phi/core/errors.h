// Typed errors and the ENFORCE macros.
//
// Every failure the runtime reports is a C++ exception of one of the types below, so a
// caller can catch exactly what it can handle (a Timeout, say) and let the rest pass.
// Messages follow one shape: what went wrong, what was expected and what came, and the
// source location that raised it.
#pragma once

#include <cstdio>
#include <exception>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace phi {

enum class ErrorCode {
  kInvalidArgument,
  kOutOfRange,
  kPreconditionNotMet,
  kUnavailable,
  kTimeout,
  kExternal,
  kUnimplemented,
  kNotFound,
};

const char* ErrorCodeName(ErrorCode code);

// Base of every error raised by the runtime.
class EnforceNotMet : public std::runtime_error {
 public:
  EnforceNotMet(ErrorCode code, const std::string& message)
      : std::runtime_error(message), code_(code) {}
  ErrorCode code() const { return code_; }

 private:
  ErrorCode code_;
};

#define PHI_DECLARE_ERROR_TYPE(Name)                                 \
  class Name##Error : public EnforceNotMet {                         \
   public:                                                           \
    explicit Name##Error(const std::string& message)                 \
        : EnforceNotMet(ErrorCode::k##Name, message) {}              \
  };
PHI_DECLARE_ERROR_TYPE(InvalidArgument)
PHI_DECLARE_ERROR_TYPE(OutOfRange)
PHI_DECLARE_ERROR_TYPE(PreconditionNotMet)
PHI_DECLARE_ERROR_TYPE(Unavailable)
PHI_DECLARE_ERROR_TYPE(Timeout)
PHI_DECLARE_ERROR_TYPE(External)
PHI_DECLARE_ERROR_TYPE(Unimplemented)
PHI_DECLARE_ERROR_TYPE(NotFound)
#undef PHI_DECLARE_ERROR_TYPE

// An error not yet thrown: a code plus its message. phi::errors::InvalidArgument("...%d", x)
// builds one; PADDLE_THROW / PADDLE_ENFORCE_* turn it into the typed exception.
struct ErrorSummary {
  ErrorCode code;
  std::string message;
};

// Throws the exception type that matches summary.code, message extended with `where`.
[[noreturn]] void ThrowError(const ErrorSummary& summary, const std::string& hint,
                             const char* file, int line);

// Rethrows `error` as the same typed error with `context` before its message; an exception
// that is not a phi error becomes ExternalError. Used where an engine failure surfaces to
// the caller (Task::Wait) so the message names the group, op and sequence number.
[[noreturn]] void RethrowWithContext(std::exception_ptr error, const std::string& context);

namespace errors {
namespace detail {
std::string Format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
inline std::string Format() { return std::string(); }
}  // namespace detail

#define PHI_DEFINE_ERROR_FACTORY(Name)                                         \
  template <typename... Args>                                                  \
  ErrorSummary Name(const char* fmt, Args&&... args) {                         \
    return ErrorSummary{ErrorCode::k##Name,                                    \
                        detail::Format(fmt, std::forward<Args>(args)...)};     \
  }                                                                            \
  inline ErrorSummary Name(const std::string& msg) {                           \
    return ErrorSummary{ErrorCode::k##Name, msg};                              \
  }
PHI_DEFINE_ERROR_FACTORY(InvalidArgument)
PHI_DEFINE_ERROR_FACTORY(OutOfRange)
PHI_DEFINE_ERROR_FACTORY(PreconditionNotMet)
PHI_DEFINE_ERROR_FACTORY(Unavailable)
PHI_DEFINE_ERROR_FACTORY(Timeout)
PHI_DEFINE_ERROR_FACTORY(External)
PHI_DEFINE_ERROR_FACTORY(Unimplemented)
PHI_DEFINE_ERROR_FACTORY(NotFound)
#undef PHI_DEFINE_ERROR_FACTORY
}  // namespace errors

namespace enforce_detail {
template <typename T>
std::string ToString(const T& v) {
  std::ostringstream os;
  os << v;
  return os.str();
}
template <typename A, typename B>
std::string CompareHint(const char* a_expr, const char* op, const char* b_expr, const A& a,
                        const B& b) {
  return std::string("Expected ") + a_expr + " " + op + " " + b_expr + ", but received " +
         a_expr + ":" + ToString(a) + " vs " + b_expr + ":" + ToString(b) + ".";
}
}  // namespace enforce_detail

}  // namespace phi

#define PADDLE_THROW(summary) ::phi::ThrowError((summary), "", __FILE__, __LINE__)

#define PADDLE_ENFORCE(cond, summary)                                                  \
  do {                                                                                 \
    if (!(cond)) {                                                                     \
      ::phi::ThrowError((summary), "Expected " #cond ", but it is false.", __FILE__,   \
                        __LINE__);                                                     \
    }                                                                                  \
  } while (0)

#define PHI_ENFORCE_CMP_(a, b, op, summary)                                            \
  do {                                                                                 \
    const auto& phi_a_ = (a);                                                          \
    const auto& phi_b_ = (b);                                                          \
    if (!(phi_a_ op phi_b_)) {                                                         \
      ::phi::ThrowError((summary),                                                     \
                        ::phi::enforce_detail::CompareHint(#a, #op, #b, phi_a_, phi_b_), \
                        __FILE__, __LINE__);                                           \
    }                                                                                  \
  } while (0)

#define PADDLE_ENFORCE_EQ(a, b, summary) PHI_ENFORCE_CMP_(a, b, ==, summary)
#define PADDLE_ENFORCE_NE(a, b, summary) PHI_ENFORCE_CMP_(a, b, !=, summary)
#define PADDLE_ENFORCE_GT(a, b, summary) PHI_ENFORCE_CMP_(a, b, >, summary)
#define PADDLE_ENFORCE_GE(a, b, summary) PHI_ENFORCE_CMP_(a, b, >=, summary)
#define PADDLE_ENFORCE_LT(a, b, summary) PHI_ENFORCE_CMP_(a, b, <, summary)
#define PADDLE_ENFORCE_LE(a, b, summary) PHI_ENFORCE_CMP_(a, b, <=, summary)
#define PADDLE_ENFORCE_NOT_NULL(p, summary) PADDLE_ENFORCE((p) != nullptr, summary)
