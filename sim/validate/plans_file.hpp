// Reading the plans.jsonl that `epsim run --write-plans` writes: one Plan JSON per line. The one reader
// of plan files: `epsim validate` and the hw runner (`epsim-hw run`) both read through it, so every
// plan from a file passes the same checks before anything indexes with its fields.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "sim/plan/plan.hpp"

namespace epsim {

/// Every Plan of the file, in file order; `limit` > 0 stops after that many. Blank lines are
/// skipped. Throws InputError (`FILE:line N, column C: ...` for bad JSON, `FILE:line N, KEY.PATH:
/// ...` for a bad or structurally impossible plan, see plan_from_json) and on a second plan for the
/// same (step, micro_batch, layer) and on a file without plans.
std::vector<Plan> read_plans_jsonl(const std::string& path, std::size_t limit = 0);

}  // namespace epsim
