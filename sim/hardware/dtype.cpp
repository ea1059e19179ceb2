#include "sim/hardware/dtype.hpp"

#include <stdexcept>

namespace epsim {

const char* to_string(Dtype dtype) {
  switch (dtype) {
    case Dtype::fp8: return "fp8";
    case Dtype::bf16: return "bf16";
    case Dtype::fp16: return "fp16";
    case Dtype::fp32: return "fp32";
  }
  return "?";
}

const std::vector<std::string>& dtype_names() {
  static const std::vector<std::string> names{"fp8", "bf16", "fp16", "fp32"};
  return names;
}

Dtype parse_dtype(const std::string& name) {
  for (Dtype d : {Dtype::fp8, Dtype::bf16, Dtype::fp16, Dtype::fp32})
    if (name == to_string(d)) return d;
  throw std::invalid_argument("unknown dtype '" + name + "'");
}

int element_bytes(Dtype dtype) {
  switch (dtype) {
    case Dtype::fp8: return 1;
    case Dtype::bf16:
    case Dtype::fp16: return 2;
    case Dtype::fp32: return 4;
  }
  return 0;
}

Dtype dtype_of_bytes(int bytes) {
  switch (bytes) {
    case 1: return Dtype::fp8;
    case 2: return Dtype::bf16;
    case 4: return Dtype::fp32;
    default: throw std::invalid_argument("no dtype has " + std::to_string(bytes) + " bytes per element");
  }
}

std::int64_t activation_bytes(Dtype dtype, int hidden, int fp8_scale_block) {
  std::int64_t bytes = static_cast<std::int64_t>(hidden) * element_bytes(dtype);
  if (dtype == Dtype::fp8 && fp8_scale_block > 0)
    bytes += 4 * ((static_cast<std::int64_t>(hidden) + fp8_scale_block - 1) / fp8_scale_block);
  return bytes;
}

}  // namespace epsim
