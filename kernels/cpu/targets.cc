#include "kernels/cpu/targets.h"

#include <strings.h>

#include <cstdint>
#include <cstdio>
#include <cstring>

#include "hwy/highway.h"
#include "hwy/targets.h"

namespace ember::kernels {
namespace {

#if defined(EMBER_HWY_STATIC_DISPATCH) && EMBER_HWY_STATIC_DISPATCH
constexpr bool kStatic = true;
#else
constexpr bool kStatic = false;
#endif

// Compiled and supported targets, best first (Highway: a lower bit is a better target).
int64_t usable_targets() { return kStatic ? HWY_STATIC_TARGET : (hwy::SupportedTargets() & HWY_TARGETS); }

}  // namespace

const char* cpu_target() {
  if (kStatic) return hwy::TargetName(HWY_STATIC_TARGET);
  const int64_t usable = usable_targets();
  return usable == 0 ? "none" : hwy::TargetName(usable & -usable);
}

void cpu_targets_text(char* out, size_t capacity) {
  if (capacity == 0) return;
  out[0] = '\0';
  size_t used = 0;
  for (int64_t bits = usable_targets(); bits != 0 && used < capacity; bits &= bits - 1) {
    const int n = std::snprintf(out + used, capacity - used, "%s%s", used == 0 ? "" : ", ",
                                hwy::TargetName(bits & -bits));
    if (n < 0) break;
    used += static_cast<size_t>(n);
  }
}

Status set_cpu_target(const char* name, ErrorContext* ctx) {
  char available[256];
  cpu_targets_text(available, sizeof(available));
  if (kStatic) {
    return EMBER_FAIL(ctx, Error::NotSupported,
                      "cpu target '%s': this build dispatches statically to %s only (EMBER_HWY_DISPATCH=static)",
                      name, cpu_target());
  }
  const int64_t usable = usable_targets();
  for (int64_t bits = usable; bits != 0; bits &= bits - 1) {
    const int64_t bit = bits & -bits;
    if (strcasecmp(hwy::TargetName(bit), name) != 0) continue;
    // This target and every worse one. SetSupportedTargetsForTest, not DisableTargets: the latter
    // did not take effect in a benchmark binary (Highway 1.0.3), the former always does.
    hwy::SetSupportedTargetsForTest(usable & ~(bit - 1));
    return Status::ok();
  }
  return EMBER_FAIL(ctx, Error::InvalidArgument, "cpu target '%s': not one this build and CPU can run (%s)", name,
                    available);
}

}  // namespace ember::kernels
