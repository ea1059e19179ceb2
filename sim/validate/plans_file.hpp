// Reading the plans.jsonl that `epsim run --write-plans` writes: one Plan JSON per line. The one reader
// of plan files: `epsim validate` and the hw runner (`epsim-hw run`) both read through it, so every
// plan from a file passes the same checks before anything indexes with its fields.
#pragma once

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "sim/plan/plan.hpp"

namespace epsim {

/// Calls `each(plan, byte_offset_of_its_line, line_number)` for every Plan of the file, in file order,
/// one at a time; `limit` > 0 stops after that many. Blank lines are skipped. Throws InputError
/// (`FILE:line N, column C: ...` for bad JSON, `FILE:line N, KEY.PATH: ...` for a bad or
/// structurally impossible plan, see plan_from_json) and on a second plan for the same (step,
/// micro_batch, layer) and on a file without plans. Returns the number of plans.
std::size_t for_each_plan(const std::string& path, std::size_t limit,
                          const std::function<void(Plan&&, std::uint64_t, std::uint64_t)>& each);

/// Every Plan of the file, in file order (for_each_plan's checks and errors).
std::vector<Plan> read_plans_jsonl(const std::string& path, std::size_t limit = 0);

/// A plans.jsonl checked whole on opening (for_each_plan's errors) but kept on disk: only where each
/// plan's line starts is held, and find() reads one plan back, so memory does not grow with the plans.
/// A file of one plan (a wide what-if's record: hundreds of megabytes, seconds to read) keeps that
/// plan from the check, for its one find().
class PlansIndex {
 public:
  explicit PlansIndex(const std::string& path);
  std::size_t size() const { return offsets_.size(); }
  /// The plan for (step, micro_batch, layer), read again from the file (or, the first time, the
  /// one plan of a file of one, as checked on opening); nullopt if there is none. Throws InputError
  /// if the file changed since it was opened.
  std::optional<Plan> find(std::uint32_t step, std::uint32_t micro_batch, std::uint32_t layer);

 private:
  struct Place {
    std::uint64_t offset = 0;
    std::uint64_t line = 0;
  };
  std::string path_;
  std::ifstream in_;
  std::map<std::tuple<std::uint32_t, std::uint32_t, std::uint32_t>, Place> offsets_;
  std::optional<Plan> only_;  ///< a file of one plan: that plan, until find() hands it out
};

}  // namespace epsim
