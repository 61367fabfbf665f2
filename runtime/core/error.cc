#include <cstdarg>
#include <cstdio>

#include "runtime/core/status.h"
#include "runtime/platform/platform.h"

namespace ember {

const char* to_string(Error error) {
  switch (error) {
    case Error::Ok: return "Ok";
    case Error::InvalidArgument: return "InvalidArgument";
    case Error::InvalidProgram: return "InvalidProgram";
    case Error::IntegrityError: return "IntegrityError";
    case Error::VersionMismatch: return "VersionMismatch";
    case Error::FeatureMissing: return "FeatureMissing";
    case Error::KernelMissing: return "KernelMissing";
    case Error::BackendUnavailable: return "BackendUnavailable";
    case Error::NotFound: return "NotFound";
    case Error::NotSupported: return "NotSupported";
    case Error::NotImplemented: return "NotImplemented";
    case Error::OutOfMemory: return "OutOfMemory";
    case Error::InvalidState: return "InvalidState";
    case Error::BackendFailed: return "BackendFailed";
    case Error::DeviceLost: return "DeviceLost";
    case Error::Cancelled: return "Cancelled";
    case Error::Internal: return "Internal";
  }
  return "UnknownError";
}

const char* to_string(ErrorContext::Phase phase) {
  switch (phase) {
    case ErrorContext::Phase::None: return "none";
    case ErrorContext::Phase::Header: return "header";
    case ErrorContext::Phase::Verify: return "verify";
    case ErrorContext::Phase::Validate: return "validate";
    case ErrorContext::Phase::Load: return "load";
    case ErrorContext::Phase::Execute: return "execute";
  }
  return "unknown";
}

Status fail(ErrorContext* ctx, Error code, const char* file, int line, const char* format, ...) {
  char message[ErrorContext::kMessageSize];
  va_list args;
  va_start(args, format);
  std::vsnprintf(message, sizeof(message), format, args);
  va_end(args);
  if (ctx != nullptr) {
    // The caller reports the ErrorContext (one line per error); the log keeps a debug trace, which
    // also shows errors that a later, outer failure replaces.
    if (!ctx->has_error()) {
      ctx->code = code;
      std::snprintf(ctx->message, sizeof(ctx->message), "%s", message);
    }
    EMBER_LOG(Debug, "%s: %s", to_string(code), message);
  } else {
    // No ErrorContext: the log is the only place the message can go.
    EMBER_LOG(Error, "%s: %s", to_string(code), message);
  }
  return Status(code, "see ErrorContext", file, line);
}

}  // namespace ember
