// Number formats of activations, weights and GEMM inputs, and the bytes one token's hidden state takes
// in each. FP8 activations carry one FP32 scale per `scale_block` channels (DeepSeek-V3's fine-grained
// 1 x 128 quantisation, DeepEP's FP8 dispatch): hidden 7168 in FP8 is 7168 + 56 * 4 = 7392 bytes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace epsim {

enum class Dtype { fp8, bf16, fp16, fp32 };

/// "fp8", "bf16", "fp16", "fp32".
const char* to_string(Dtype dtype);
/// The names above, in that order (for YAML choices and messages).
const std::vector<std::string>& dtype_names();
/// Inverse of to_string; throws std::invalid_argument for anything else.
Dtype parse_dtype(const std::string& name);
/// Bytes of one element: 1, 2, 2, 4.
int element_bytes(Dtype dtype);
/// The dtype whose elements take `bytes` (1: fp8, 2: bf16, 4: fp32); throws std::invalid_argument otherwise.
Dtype dtype_of_bytes(int bytes);
/// Bytes of one token's `hidden`-wide activation row in `dtype`, FP8 scales included.
std::int64_t activation_bytes(Dtype dtype, int hidden, int fp8_scale_block);

}  // namespace epsim
