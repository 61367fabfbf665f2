// Read-only views of a verified and validated program, shared by the executor and backends.
// Views borrow the Program's bytes: they are valid while the Program lives.
#pragma once

#include <cstddef>
#include <cstdint>

#include "runtime/core/span.h"
#include "runtime/core/tensor_view.h"
#include "schema/program_generated.h"

namespace ember {

// One segment of the file as loaded (a view into mapped or copied bytes).
struct SegmentData {
  const uint8_t* data = nullptr;
  uint64_t size = 0;
  fb::SegmentKind kind = fb::SegmentKind::Invalid;
};

class GraphView {
 public:
  GraphView() = default;
  GraphView(const fb::Graph* graph, Span<const SegmentData> segments)
      : graph_(graph), segments_(segments) {}

  const fb::Graph& graph() const { return *graph_; }
  uint32_t value_count() const;
  uint32_t input_count() const;
  uint32_t output_count() const;
  uint32_t instruction_count() const;
  const fb::Tensor& value(uint32_t index) const { return *graph_->values()->Get(index); }
  uint32_t input_value(uint32_t i) const { return graph_->inputs()->Get(i)->value(); }
  uint32_t output_value(uint32_t i) const { return graph_->outputs()->Get(i)->value(); }
  // dtype, rank and max dims of a value; data points at the bytes for a constant, else null.
  TensorView tensor(uint32_t index) const;
  // The bytes of a Constant value, or null.
  const uint8_t* constant_data(uint32_t index) const;
  // Whether a value is one of the graph's inputs or outputs (O(inputs + outputs)).
  bool is_io(uint32_t index) const;

 private:
  const fb::Graph* graph_ = nullptr;
  Span<const SegmentData> segments_;
};

// Fills rank/dims (at max) and dtype of `out` from a validated tensor table.
void tensor_shape(const fb::Tensor& tensor, TensorView* out);

}  // namespace ember
