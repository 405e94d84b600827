// NCCL version query (NCCL is part of the CUDA build).
#include <nccl.h>

#include "kernels/cuda/cuda_probe.hpp"

namespace moeplan::kernels::cuda {

int nccl_version() {
  int v = 0;
  if (ncclGetVersion(&v) != ncclSuccess) return 0;
  return v;
}

}  // namespace moeplan::kernels::cuda
