// EventTracer: an optional hook around every instruction a Method runs (profiling, debugging).
// Compiled out entirely with EMBER_ENABLE_EVENT_TRACER=0. The tracer is called on the executing
// thread; it must not fail and should not allocate (runner --profile preallocates its records).
#pragma once

#include <cstdint>

#ifndef EMBER_ENABLE_EVENT_TRACER
#define EMBER_ENABLE_EVENT_TRACER 1
#endif

namespace ember {

class EventTracer {
 public:
  virtual ~EventTracer() = default;
  // `what` is the op ("conv2d") or "delegate <backend>"; `node` the debug name ("" if stripped).
  virtual void begin_instruction(uint32_t index, const char* what, const char* node) = 0;
  virtual void end_instruction(uint32_t index) = 0;
};

}  // namespace ember
