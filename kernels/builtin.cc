#include "kernels/builtin.h"

#include "kernels/cpu/register.h"
#include "kernels/reference/register.h"

namespace ember {

Status register_builtin(KernelRegistry& registry) {
  EMBER_RETURN_IF_ERROR(kernels::register_cpu_kernels(registry));
  return kernels::register_reference_kernels(registry, /*only_missing=*/true);
}

}  // namespace ember
