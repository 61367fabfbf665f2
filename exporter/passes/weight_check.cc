#include "exporter/passes/weight_check.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "runtime/core/float_codecs.h"

namespace ember::exporter {
namespace {

// Elements of type T (raw bits) for which `is_bad(bits)` holds, and the first one's index in
// *first (when there is one and `first` is set). Counted per chunk into a 32-bit accumulator: the
// loop has no branch and vectorizes; the first index is looked for only when something was found.
template <typename T, typename Pred>
uint64_t count_where(const uint8_t* data, uint64_t n, Pred is_bad, uint64_t* first) {
  auto bits_at = [data](uint64_t i) {
    T bits;
    std::memcpy(&bits, data + i * sizeof(T), sizeof(T));
    return bits;
  };
  constexpr uint64_t kChunk = uint64_t{1} << 20;
  uint64_t total = 0;
  for (uint64_t begin = 0; begin < n; begin += kChunk) {
    const uint64_t end = std::min(n, begin + kChunk);
    uint32_t count = 0;
    for (uint64_t i = begin; i < end; ++i) count += static_cast<uint32_t>(is_bad(bits_at(i)));
    total += count;
  }
  if (total != 0 && first != nullptr) {
    for (uint64_t i = 0; i < n; ++i) {
      if (is_bad(bits_at(i))) {
        *first = i;
        break;
      }
    }
  }
  return total;
}

// NaN or ±Inf: bits & mask == mask (an all-ones exponent, or the NaN code of an FP8 format).
template <typename T>
uint64_t count_with_first(const uint8_t* data, uint64_t n, T mask, uint64_t* first) {
  return count_where<T>(data, n, [mask](T bits) { return (bits & mask) == mask; }, first);
}

// NaNs only: the magnitude bits (sign cleared) above infinity's (an all-ones exponent with a
// nonzero mantissa).
template <typename T>
uint64_t count_nan_with_first(const uint8_t* data, uint64_t n, T inf, uint64_t* first) {
  constexpr T kMagnitude = static_cast<T>(~(T{1} << (8 * sizeof(T) - 1)));
  return count_where<T>(data, n, [inf](T bits) { return static_cast<T>(bits & kMagnitude) > inf; }, first);
}

std::string float_text(double v) { return std::isnan(v) ? "nan" : v > 0 ? "inf" : "-inf"; }

}  // namespace

std::string non_finite_text(ScalarType dtype, const uint8_t* data, uint64_t i) {
  switch (dtype) {
    case ScalarType::F32: {
      float v;
      std::memcpy(&v, data + 4 * i, 4);
      return float_text(v);
    }
    case ScalarType::F64: {
      double v;
      std::memcpy(&v, data + 8 * i, 8);
      return float_text(v);
    }
    case ScalarType::F16:
    case ScalarType::BF16: {
      uint16_t h;
      std::memcpy(&h, data + 2 * i, 2);
      return float_text(dtype == ScalarType::F16 ? f16_to_f32(h) : bf16_to_f32(h));
    }
    case ScalarType::F8E5M2:
      if ((data[i] & 0x7f) == 0x7c) return data[i] & 0x80 ? "-inf" : "inf";
      break;
    default: break;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), "NaN code 0x%02x", data[i]);
  return buf;
}

namespace {

std::string dims_text(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

// Adds `data` (count elements of dtype) to the check; records it when it has a NaN, or (when
// `include_inf`) an infinity.
void scan(WeightCheck& check, const std::string& name, const std::string& what, ScalarType dtype, const uint8_t* data,
          uint64_t count, bool include_inf) {
  ++check.tensors_checked;
  check.bytes_checked += nbytes_of(dtype, count);
  uint64_t first = 0;
  const uint64_t bad = count_non_finite(dtype, data, count, &first, include_inf);
  if (bad == 0) return;
  check.tensors.push_back({name, what, bad, count, first, non_finite_text(dtype, data, first)});
}

}  // namespace

uint64_t count_non_finite(ScalarType dtype, const uint8_t* data, uint64_t count, uint64_t* first, bool include_inf) {
  if (!include_inf) {
    switch (dtype) {
      case ScalarType::F32: return count_nan_with_first<uint32_t>(data, count, 0x7f800000u, first);
      case ScalarType::F64: return count_nan_with_first<uint64_t>(data, count, 0x7ff0000000000000ull, first);
      case ScalarType::F16: return count_nan_with_first<uint16_t>(data, count, 0x7c00, first);
      case ScalarType::BF16: return count_nan_with_first<uint16_t>(data, count, 0x7f80, first);
      case ScalarType::F8E5M2: return count_nan_with_first<uint8_t>(data, count, 0x7c, first);
      default: break;  // the other formats have no infinity: every non-finite code is a NaN
    }
  }
  switch (dtype) {
    case ScalarType::F32: return count_with_first<uint32_t>(data, count, 0x7f800000u, first);
    case ScalarType::F64: return count_with_first<uint64_t>(data, count, 0x7ff0000000000000ull, first);
    case ScalarType::F16: return count_with_first<uint16_t>(data, count, 0x7c00, first);
    case ScalarType::BF16: return count_with_first<uint16_t>(data, count, 0x7f80, first);
    case ScalarType::F8E4M3FN:  // no Inf; S.1111.111 is NaN
    case ScalarType::UE4M3: return count_with_first<uint8_t>(data, count, 0x7f, first);
    case ScalarType::F8E5M2: return count_with_first<uint8_t>(data, count, 0x7c, first);
    case ScalarType::E8M0: return count_with_first<uint8_t>(data, count, 0xff, first);
    default: return 0;  // integers, bool, f4_e2m1 (no NaN or Inf)
  }
}

bool is_weight_input(OpCode op, size_t input) {
  switch (op) {
    case OpCode::MatMul:
    case OpCode::Linear:
    case OpCode::Conv2d:
    case OpCode::LayerNorm:
    case OpCode::BatchNorm:
    case OpCode::RmsNorm:
    case OpCode::Rope:
      return input > 0;
    case OpCode::Embedding:
      return input == 0;
    default:
      return false;
  }
}

WeightCheck check_weights(const Graph& graph, std::set<const void*>* seen) {
  WeightCheck check;
  std::vector<bool> weight(graph.values.size(), false);
  for (const Node& n : graph.nodes) {
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      if (n.inputs[i] >= 0 && is_weight_input(n.op, i)) weight[static_cast<size_t>(n.inputs[i])] = true;
    }
  }
  for (size_t id = 0; id < graph.values.size(); ++id) {
    const Value& v = graph.values[id];
    if (!v.is_constant()) continue;
    // A constant that is not a weight may hold ±Inf on purpose (a mask's fill value, a bound); a NaN
    // is refused everywhere.
    const bool include_inf = weight[id] || v.quant != nullptr;
    std::vector<int64_t> dims;
    for (const Dim& d : v.dims) dims.push_back(d.max);
    if (seen == nullptr || seen->insert(v.data.get()).second) {
      // Sub-byte types have no NaN; the byte count, not the element count, bounds the read.
      const uint64_t count = is_sub_byte(v.dtype) ? 0 : v.data->size() / std::max(1, bits_of(v.dtype) / 8);
      scan(check, v.name, std::string(to_string(v.dtype)) + dims_text(dims), v.dtype, v.data->data(), count, include_inf);
    }
    if (v.quant && v.quant->scale && (seen == nullptr || seen->insert(v.quant->scale.get()).second)) {
      const QuantParams& q = *v.quant;
      const uint64_t count = q.scale->size() / std::max(1, bits_of(q.scale_dtype) / 8);
      scan(check, v.name, std::string(to_string(q.scale_dtype)) + dims_text(q.scale_dims) + " scale", q.scale_dtype,
           q.scale->data(), count, true);
      if (q.has_global_scale && !std::isfinite(q.global_scale)) {
        check.tensors.push_back({v.name, "global scale", 1, 1, 0, float_text(q.global_scale)});
      }
    }
  }
  return check;
}

std::string WeightCheck::format(size_t max_listed) const {
  std::string s;
  for (size_t i = 0; i < tensors.size() && i < max_listed; ++i) {
    const NonFiniteTensor& t = tensors[i];
    s += (i ? "; '" : "'") + t.name + "' " + t.what + ": " + std::to_string(t.count) + " of " + std::to_string(t.numel) +
         " non-finite, first at index " + std::to_string(t.first) + " (" + t.first_value + ")";
  }
  if (tensors.size() > max_listed) s += " (" + std::to_string(tensors.size()) + " tensors in all)";
  return s;
}

}  // namespace ember::exporter
