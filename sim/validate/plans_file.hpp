// Reading the plans.jsonl that `epsim run --write-plans` writes: one Plan JSON per line.
#pragma once

#include <string>
#include <vector>

#include "sim/plan/plan.hpp"

namespace epsim {

/// Every Plan of the file, in file order. Blank lines are skipped. Throws InputError
/// (`FILE:line N: ...`) on bad JSON, a bad plan or a second plan for the same (step, micro_batch,
/// layer), and on a file without plans.
std::vector<Plan> read_plans_jsonl(const std::string& path);

}  // namespace epsim
