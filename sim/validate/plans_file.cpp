#include "sim/validate/plans_file.hpp"

#include <fstream>
#include <set>
#include <tuple>

#include "sim/core/input_error.hpp"
#include "sim/core/json_input.hpp"
#include "sim/plan/plan_json.hpp"

namespace epsim {

std::vector<Plan> read_plans_jsonl(const std::string& path, std::size_t limit) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path, "", "cannot open file");
  std::vector<Plan> plans;
  std::set<std::tuple<std::uint32_t, std::uint32_t, std::uint32_t>> seen;
  std::string line;
  for (std::uint64_t number = 1; std::getline(in, line); ++number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string place = "line " + std::to_string(number);
    Plan plan = plan_from_json(parse_json(line, path, number), path, place);
    if (!seen.insert({plan.step, plan.micro_batch, plan.layer}).second)
      throw InputError(path, place,
                       "second plan for step " + std::to_string(plan.step) + ", micro_batch " +
                           std::to_string(plan.micro_batch) + ", layer " + std::to_string(plan.layer));
    plans.push_back(std::move(plan));
    if (limit > 0 && plans.size() >= limit) break;
  }
  if (in.bad()) throw InputError(path, "", "read error");
  if (plans.empty()) throw InputError(path, "", "no plans in file");
  return plans;
}

}  // namespace epsim
