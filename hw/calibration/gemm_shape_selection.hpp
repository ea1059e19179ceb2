// Fitting the GEMM curve to the expert shapes a user will simulate (`epsim calibrate --gemm-shapes`).
//
// The hardware model's GEMM efficiency is one curve over rows per expert: it has no term for the
// matrices' shape. A measurement set with several shapes pools them, and the curve lands between:
// on epsim's own H100 suite the BF16 rows of hidden 4096 x FFN 1536 come out 6% slower than the pooled
// curve and those of 7168 x 2048 3% faster (median residuals at 256 rows or more). The plans of a
// 6144 x 2048 model were then predicted 7.1% slow in the median GEMM (`experiments/validate-hw.sh
// --calibrated`); fitted to the 7168 x 2048 rows alone, 5.0% (docs/validation.md, "Calibrated from
// epsim's own suite"). So a user fits the curve to their model's shape, or the nearest measured.
#pragma once

#include <string>
#include <vector>

#include "hw/calibration/measurements.hpp"

namespace epsim {

/// An expert's shape as the grouped_gemm series names it: hidden size x expert FFN size.
struct ExpertShape {
  int hidden_size = 0;
  int ffn_size = 0;
  bool operator==(const ExpertShape& o) const { return hidden_size == o.hidden_size && ffn_size == o.ffn_size; }
};

/// "6144x2048,7168x2048": one or more HIDDENxFFN, each two positive integers. Throws InputError at
/// ("command line", `option`) naming the item that is not one.
std::vector<ExpertShape> parse_expert_shapes(const std::string& text, const std::string& option);

/// What select_gemm_shapes kept and left out.
struct GemmShapeSelection {
  int kept = 0;          ///< grouped_gemm points of the shapes asked for
  int left_out = 0;      ///< grouped_gemm points of other shapes, and every single GEMM call (`gemm`)
  std::vector<ExpertShape> absent;  ///< shapes asked for that no point has, in the order asked
};

/// Keeps, in every set, the grouped_gemm points of `shapes` alone and drops the single GEMM calls
/// (`gemm`, named by M, N and K, not by an expert's shape); other series are untouched. Throws
/// InputError at ("command line", `option`) when no grouped_gemm point has any of the shapes, naming
/// the shapes the sets hold; a shape some other one stands beside is named in `absent`.
GemmShapeSelection select_gemm_shapes(std::vector<Measurements>& sources, const std::vector<ExpertShape>& shapes,
                                      const std::string& option);

/// "6144x2048".
std::string to_string(const ExpertShape& shape);
/// "6144x2048, 7168x2048": the shapes in the order given.
std::string to_string(const std::vector<ExpertShape>& shapes);

}  // namespace epsim
