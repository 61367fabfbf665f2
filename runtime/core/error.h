// Error codes: stable uint8 values that show up in logs and bug reports. Never reuse a number.
#pragma once

#include <cstdint>

namespace ember {

enum class Error : uint8_t {
  Ok = 0,
  InvalidArgument = 1,     // The caller passed something unusable.
  InvalidProgram = 2,      // The program file is malformed or inconsistent.
  IntegrityError = 3,      // A checksum did not match: the file is corrupted.
  VersionMismatch = 4,     // The file (or an OPAQUE payload) needs another format version.
  FeatureMissing = 5,      // The file needs a feature this runtime build does not have.
  KernelMissing = 6,       // No kernel is registered for an instruction's key.
  BackendUnavailable = 7,  // A delegate's backend is absent or unusable and fallback is Fail.
  NotFound = 8,            // No method, input, state or backend by that name.
  NotSupported = 9,        // A valid request this build or device cannot serve.
  NotImplemented = 10,     // A known gap; see the folder's README.
  OutOfMemory = 11,        // An arena, pool or device allocation was too small.
  InvalidState = 12,       // The object is not in a state that allows the call.
  BackendFailed = 13,      // A backend reported failure; the ErrorContext has details.
  DeviceLost = 14,         // The device went away.
  Cancelled = 15,          // request_abort() stopped the call.
  Internal = 16,           // A bug in Ember.
};

// "InvalidProgram", ...; never null.
const char* to_string(Error error);

}  // namespace ember
