#include <cstring>

#include "runtime/backend/backend.h"

namespace ember {

MemoryRequirements Backend::state_requirements(const StateSpec&) const { return MemoryRequirements(); }

Result<StateBuffer*> Backend::create_state(BackendLoadContext& ctx, const StateSpec& spec) const {
  return EMBER_FAIL(ctx.error, Error::NotSupported, "backend '%s' does not own program state (state '%s')",
                    ctx.backend_id, spec.name);
}

void Backend::destroy_state(StateBuffer*) const noexcept {}

Result<DelegateHandle*> Backend::init_opaque(BackendInitContext& ctx, const OpaquePayload&,
                                             Span<const CompileSpec>) const {
  return EMBER_FAIL(ctx.error, Error::NotSupported, "backend '%s' takes no OPAQUE payloads", ctx.backend_id);
}

Status Backend::synchronize(BackendExecuteContext&, DelegateHandle*) const { return Status::ok(); }

Status BackendRegistry::add(const char* name, const Backend& backend) {
  if (name == nullptr || name[0] == '\0') return EMBER_ERROR(Error::InvalidArgument, "empty backend name");
  if (std::strcmp(name, "portable") == 0) {
    return EMBER_ERROR(Error::InvalidArgument, "'portable' names the portable kernels, not a backend");
  }
  if (find(name) != nullptr) return EMBER_ERROR(Error::InvalidArgument, "backend already registered");
  if (size_ == kCapacity) return EMBER_ERROR(Error::OutOfMemory, "backend registry full");
  names_[size_] = name;
  backends_[size_] = &backend;
  ++size_;
  return Status::ok();
}

const Backend* BackendRegistry::find(const char* name) const {
  for (size_t i = 0; i < size_; ++i) {
    if (std::strcmp(names_[i], name) == 0) return backends_[i];
  }
  return nullptr;
}

}  // namespace ember
