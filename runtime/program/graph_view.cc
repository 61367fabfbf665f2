#include "runtime/program/graph_view.h"

namespace ember {

uint32_t GraphView::value_count() const { return graph_->values() ? graph_->values()->size() : 0; }
uint32_t GraphView::input_count() const { return graph_->inputs() ? graph_->inputs()->size() : 0; }
uint32_t GraphView::output_count() const { return graph_->outputs() ? graph_->outputs()->size() : 0; }
uint32_t GraphView::instruction_count() const {
  return graph_->instructions() ? graph_->instructions()->size() : 0;
}

void tensor_shape(const fb::Tensor& tensor, TensorView* out) {
  out->dtype = static_cast<ScalarType>(tensor.dtype());
  out->dim_order = static_cast<DimOrder>(tensor.dim_order());
  const auto* dims = tensor.dims();
  out->rank = static_cast<uint8_t>(dims ? dims->size() : 0);
  for (int i = 0; i < out->rank; ++i) out->dims[i] = dims->Get(i)->max();
}

const uint8_t* GraphView::constant_data(uint32_t index) const {
  const fb::Tensor& t = value(index);
  const fb::ConstantStorage* c = t.storage_as_ConstantStorage();
  if (c == nullptr) return nullptr;
  return segments_[c->segment()].data + c->offset();
}

bool GraphView::is_io(uint32_t index) const {
  for (uint32_t i = 0; i < input_count(); ++i) {
    if (input_value(i) == index) return true;
  }
  for (uint32_t i = 0; i < output_count(); ++i) {
    if (output_value(i) == index) return true;
  }
  return false;
}

TensorView GraphView::tensor(uint32_t index) const {
  TensorView view;
  tensor_shape(value(index), &view);
  view.data = const_cast<uint8_t*>(constant_data(index));
  return view;
}

}  // namespace ember
