// MaskSums (sim/engine/mask_sums.hpp): per-link sums gathered by link mask for the coupled solve,
// against the sums added link by link, worked out by hand.
#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

#include "sim/engine/mask_sums.hpp"

using epsim::MaskSums;

namespace {

/// Per-link sums, as the solve keeps them.
struct Links {
  std::vector<double> x = std::vector<double>(16, 0.0);
  std::vector<double> y = std::vector<double>(16, 0.0);
  void operator()(int bit, double dx, double dy) {
    x[static_cast<std::size_t>(bit)] += dx;
    y[static_cast<std::size_t>(bit)] += dy;
  }
};

}  // namespace

TEST_CASE("MaskSums: classes summed by mask reach each of their links once spread") {
  // Three classes on links 0 and 2 (mask 0b101), two on link 1 alone, one on links 1 and 2: link 0
  // carries the first three, link 1 the last three, link 2 all but the two on link 1 alone.
  MaskSums sums;
  Links links;
  auto spill = [&](int bit, double dx, double dy) { links(bit, dx, dy); };
  sums.add(0b101, 2, 0.5, spill);
  sums.add(0b101, 3, 0.25, spill);
  sums.add(0b010, 1, 1.0, spill);
  sums.add(0b101, 1, 0.125, spill);
  sums.add(0b010, 4, 2.0, spill);
  sums.add(0b110, 5, 4.0, spill);
  CHECK(links.x == std::vector<double>(16, 0.0));  // (nothing reaches the links before the spread)
  sums.spread(spill);
  CHECK(links.x[0] == 6);
  CHECK(links.y[0] == 0.875);
  CHECK(links.x[1] == 10);
  CHECK(links.y[1] == 7.0);
  CHECK(links.x[2] == 11);
  CHECK(links.y[2] == 4.875);
  for (std::size_t b = 3; b < 16; ++b) CHECK(links.x[b] == 0);
}

TEST_CASE("MaskSums: a spread starts it empty, and a mask past its slots goes straight to its links") {
  MaskSums sums;
  Links links;
  auto to_links = [&](int bit, double dx, double dy) { links(bit, dx, dy); };
  // A first spread, then the same mask again: the second spread carries only what came after.
  sums.add(0b1, 1, 1, to_links);
  sums.spread(to_links);
  sums.add(0b1, 2, 2, to_links);
  sums.spread(to_links);
  CHECK(links.x[0] == 3);
  CHECK(links.y[0] == 3);
  sums.spread(to_links);  // (empty: nothing more)
  CHECK(links.x[0] == 3);
  // kSlots masks take the slots (one bit each, links 1 to 8); a ninth, on links 9 and 10, is added
  // to them at once, and again at once when it comes back.
  Links spilled;
  auto spill = [&](int bit, double dx, double dy) { spilled(bit, dx, dy); };
  for (int s = 0; s < MaskSums::kSlots; ++s) sums.add(1u << (s + 1), 1, 0.5, spill);
  sums.add(0b11u << 9, 7, 3, spill);
  sums.add(0b11u << 9, 1, 1, spill);
  sums.add(1u << 1, 1, 0.5, spill);  // (a mask with a slot still sums there)
  CHECK(spilled.x[9] == 8);
  CHECK(spilled.y[10] == 4);
  CHECK(spilled.x[1] == 0);
  sums.spread(to_links);
  CHECK(links.x[1] == 2);
  CHECK(links.y[1] == 1);
  for (int s = 1; s < MaskSums::kSlots; ++s) CHECK(links.x[static_cast<std::size_t>(s + 1)] == 1);
  CHECK(links.x[9] == 0);
}
