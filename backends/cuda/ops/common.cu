// Failure recording shared by every op (ops/cuda_ops.h).
#include <cstdio>

#include "backends/cuda/ops/cuda_ops.h"

namespace ember::backends::cuda {

const char* to_string(DeviceError e) {
  switch (e) {
    case DeviceError::None: return "no error";
    case DeviceError::IdOutOfRange: return "a token id outside [0, vocab)";
    case DeviceError::BlockOutOfRange: return "a block id outside the KV pool";
    case DeviceError::SlotOutOfRange: return "a slot_mapping entry that is not the slot of its position";
    case DeviceError::ContextTooLong: return "a context_len below the query length or beyond the block table";
    case DeviceError::BadQueryStart: return "query_start not increasing from 0 or beyond the token count";
    case DeviceError::IndexOutOfRange: return "an index outside [-1, rows)";
    case DeviceError::Nan: return "a non-finite value";
    case DeviceError::BadSampling:
      return "a sampling parameter out of range (temperature finite >= 0, top_p in [0, 1], repetition_penalty "
             "finite > 0, position >= 0, history_len in [0, Hmax], history ids < vocab)";
  }
  return "an unknown device error";
}

void record_failure(LaunchContext& lc, const char* what, const char* detail) {
  if (lc.failed) return;
  lc.failed = true;
  std::snprintf(lc.message, sizeof(lc.message), "%s: %s", what, detail);
}

bool check_cuda(LaunchContext& lc, cudaError_t err, const char* what) {
  if (err == cudaSuccess) return true;
  record_failure(lc, what, cudaGetErrorString(err));
  return false;
}

bool check_launch(LaunchContext& lc, const char* what) { return check_cuda(lc, cudaGetLastError(), what); }

}  // namespace ember::backends::cuda
