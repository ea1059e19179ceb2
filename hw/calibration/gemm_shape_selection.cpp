#include "hw/calibration/gemm_shape_selection.hpp"

#include <algorithm>
#include <cstdint>
#include <set>
#include <utility>

#include "sim/core/input_error.hpp"

namespace epsim {
namespace {

/// A positive integer written with digits alone, at most 9 of them (an int).
bool positive_int(const std::string& text, int& out) {
  if (text.empty() || text.size() > 9) return false;
  std::int64_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  if (v <= 0) return false;
  out = static_cast<int>(v);
  return true;
}

}  // namespace

std::string to_string(const ExpertShape& shape) {
  return std::to_string(shape.hidden_size) + "x" + std::to_string(shape.ffn_size);
}

std::string to_string(const std::vector<ExpertShape>& shapes) {
  std::string text;
  for (const ExpertShape& s : shapes) text += (text.empty() ? "" : ", ") + to_string(s);
  return text;
}

std::vector<ExpertShape> parse_expert_shapes(const std::string& text, const std::string& option) {
  std::vector<ExpertShape> shapes;
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = text.find(',', start);
    const std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    const std::size_t x = item.find('x');
    ExpertShape s;
    if (x == std::string::npos || !positive_int(item.substr(0, x), s.hidden_size) ||
        !positive_int(item.substr(x + 1), s.ffn_size))
      throw InputError("command line", option,
                       "'" + item + "' is not HIDDENxFFN (two positive integers, e.g. 6144x2048)" +
                           (item == text ? std::string() : " in '" + text + "'"));
    if (std::find(shapes.begin(), shapes.end(), s) == shapes.end()) shapes.push_back(s);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return shapes;
}

GemmShapeSelection select_gemm_shapes(std::vector<Measurements>& sources, const std::vector<ExpertShape>& shapes,
                                      const std::string& option) {
  GemmShapeSelection selection;
  std::set<std::pair<int, int>> measured;  // (sorted: the error lists them)
  for (Measurements& m : sources) {
    const auto asked = [&](const GemmPoint& p) {
      return std::find(shapes.begin(), shapes.end(), ExpertShape{p.shape.hidden_size, p.shape.ffn_size}) != shapes.end();
    };
    for (const GemmPoint& p : m.grouped_gemm) measured.insert({p.shape.hidden_size, p.shape.ffn_size});
    const auto kept_end = std::stable_partition(m.grouped_gemm.begin(), m.grouped_gemm.end(), asked);
    selection.kept += static_cast<int>(kept_end - m.grouped_gemm.begin());
    selection.left_out += static_cast<int>(m.grouped_gemm.end() - kept_end) + static_cast<int>(m.gemm.size());
    m.grouped_gemm.erase(kept_end, m.grouped_gemm.end());
    m.gemm.clear();
  }
  for (const ExpertShape& s : shapes)
    if (!measured.count({s.hidden_size, s.ffn_size})) selection.absent.push_back(s);
  if (selection.kept == 0) {
    std::vector<ExpertShape> held;
    for (const auto& [h, f] : measured) held.push_back({h, f});
    throw InputError("command line", option,
                     "no grouped_gemm point of shape " + to_string(shapes) + " (the files have: " +
                         (held.empty() ? std::string("no grouped_gemm points") : to_string(held)) + ")");
  }
  return selection;
}

}  // namespace epsim
