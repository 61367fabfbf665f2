#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>

#include "runtime/backend/backend.h"

namespace ember {

void MemoryRequirements::add_part(const char* purpose, MemoryDomain domain, uint64_t bytes) {
  switch (domain) {
    case MemoryDomain::Host: host_bytes += bytes; break;
    case MemoryDomain::PinnedHost: pinned_bytes += bytes; break;
    case MemoryDomain::Device: device_bytes += bytes; break;
  }
  merge_part(purpose, domain, bytes);
}

// Parts are merged by content, not address: the same literal in two translation units (a backend
// and its tests, two delegates' backends) may have two addresses.
void MemoryRequirements::merge_part(const char* purpose, MemoryDomain domain, uint64_t bytes) {
  if (bytes == 0) return;
  for (uint32_t i = 0; i < part_count_; ++i) {
    if (parts_[i].domain == domain && std::strcmp(parts_[i].purpose, purpose) == 0) {
      parts_[i].bytes += bytes;
      return;
    }
  }
  if (part_count_ == kMaxMemoryParts) return;  // counted in the total only: unlisted()
  parts_[part_count_++] = MemoryPart{purpose, domain, bytes};
}

uint64_t MemoryRequirements::part_bytes(const char* purpose, MemoryDomain domain) const {
  uint64_t bytes = 0;
  for (uint32_t i = 0; i < part_count_; ++i) {
    if (parts_[i].domain == domain && std::strcmp(parts_[i].purpose, purpose) == 0) bytes += parts_[i].bytes;
  }
  return bytes;
}

uint64_t MemoryRequirements::total(MemoryDomain domain) const {
  switch (domain) {
    case MemoryDomain::Host: return host_bytes;
    case MemoryDomain::PinnedHost: return pinned_bytes;
    case MemoryDomain::Device: return device_bytes;
  }
  return 0;
}

uint64_t MemoryRequirements::unlisted(MemoryDomain domain) const {
  uint64_t listed = 0;
  for (uint32_t i = 0; i < part_count_; ++i) {
    if (parts_[i].domain == domain) listed += parts_[i].bytes;
  }
  const uint64_t all = total(domain);
  return all > listed ? all - listed : 0;
}

MemoryRequirements& MemoryRequirements::operator+=(const MemoryRequirements& o) {
  host_bytes += o.host_bytes;
  pinned_bytes += o.pinned_bytes;
  device_bytes += o.device_bytes;
  graph_count += o.graph_count;
  for (uint32_t i = 0; i < o.part_count_; ++i) merge_part(o.parts_[i].purpose, o.parts_[i].domain, o.parts_[i].bytes);
  return *this;
}

bool MemoryRequirements::operator==(const MemoryRequirements& o) const {
  if (host_bytes != o.host_bytes || pinned_bytes != o.pinned_bytes || device_bytes != o.device_bytes ||
      graph_count != o.graph_count) {
    return false;
  }
  // Every purpose either side lists has the same bytes on the other (absent = 0 bytes).
  for (uint32_t i = 0; i < part_count_; ++i) {
    const MemoryPart& p = parts_[i];
    if (part_bytes(p.purpose, p.domain) != o.part_bytes(p.purpose, p.domain)) return false;
  }
  for (uint32_t i = 0; i < o.part_count_; ++i) {
    const MemoryPart& p = o.parts_[i];
    if (part_bytes(p.purpose, p.domain) != o.part_bytes(p.purpose, p.domain)) return false;
  }
  return true;
}

const char* format_bytes(uint64_t bytes, char* out, size_t capacity) {
  if (capacity == 0) return out;
  if (bytes >= (uint64_t{1} << 30)) {
    std::snprintf(out, capacity, "%.1f GiB", static_cast<double>(bytes) / (uint64_t{1} << 30));
  } else if (bytes >= (uint64_t{1} << 20)) {
    std::snprintf(out, capacity, "%.1f MiB", static_cast<double>(bytes) / (uint64_t{1} << 20));
  } else if (bytes >= 1024) {
    std::snprintf(out, capacity, "%.1f KiB", static_cast<double>(bytes) / 1024);
  } else {
    std::snprintf(out, capacity, "%" PRIu64 " B", bytes);
  }
  return out;
}

const char* format_memory(const MemoryRequirements& m, MemoryDomain domain, char* out, size_t capacity) {
  if (capacity == 0) return out;
  size_t used = 0;
  // Appends while there is room; snprintf's return value may exceed what was written.
  auto append = [&](const char* text) {
    if (used + 1 >= capacity) return;
    const int n = std::snprintf(out + used, capacity - used, "%s", text);
    if (n > 0) used = std::min(capacity - 1, used + static_cast<size_t>(n));
  };
  char bytes[32];
  append(to_string(domain));
  append(" ");
  append(format_bytes(m.total(domain), bytes, sizeof(bytes)));
  const char* separator = ": ";
  for (const MemoryPart& part : m.parts()) {
    if (part.domain != domain) continue;
    append(separator);
    append(part.purpose);
    append(" ");
    append(format_bytes(part.bytes, bytes, sizeof(bytes)));
    separator = ", ";
  }
  const uint64_t other = m.unlisted(domain);
  if (other > 0 && separator[0] == ',') {  // only beside listed parts: a totals-only domain says nothing more
    append(", other ");
    append(format_bytes(other, bytes, sizeof(bytes)));
  }
  out[used] = '\0';
  return out;
}

}  // namespace ember
