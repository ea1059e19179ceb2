#include "sim/validate/plans_file.hpp"

#include <set>

#include "sim/core/input_error.hpp"
#include "sim/core/json_input.hpp"
#include "sim/plan/plan_json.hpp"

namespace epsim {

namespace {

Plan plan_of_line(const std::string& line, const std::string& path, std::uint64_t number) {
  return plan_from_json(parse_json(line, path, number), path, "line " + std::to_string(number));
}

bool blank(const std::string& line) { return line.find_first_not_of(" \t\r") == std::string::npos; }

}  // namespace

std::size_t for_each_plan(const std::string& path, std::size_t limit,
                          const std::function<void(Plan&&, std::uint64_t, std::uint64_t)>& each) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path, "", "cannot open file");
  std::set<std::tuple<std::uint32_t, std::uint32_t, std::uint32_t>> seen;
  std::size_t count = 0;
  std::string line;
  std::uint64_t offset = 0;
  for (std::uint64_t number = 1; std::getline(in, line); ++number) {
    const std::uint64_t line_offset = offset;
    offset += line.size() + 1;
    if (blank(line)) continue;
    Plan plan = plan_of_line(line, path, number);
    if (!seen.insert({plan.step, plan.micro_batch, plan.layer}).second)
      throw InputError(path, "line " + std::to_string(number),
                       "second plan for step " + std::to_string(plan.step) + ", micro_batch " +
                           std::to_string(plan.micro_batch) + ", layer " + std::to_string(plan.layer));
    each(std::move(plan), line_offset, number);
    ++count;
    if (limit > 0 && count >= limit) break;
  }
  if (in.bad()) throw InputError(path, "", "read error");
  if (count == 0) throw InputError(path, "", "no plans in file");
  return count;
}

std::vector<Plan> read_plans_jsonl(const std::string& path, std::size_t limit) {
  std::vector<Plan> plans;
  for_each_plan(path, limit, [&](Plan&& plan, std::uint64_t, std::uint64_t) { plans.push_back(std::move(plan)); });
  return plans;
}

PlansIndex::PlansIndex(const std::string& path) : path_(path) {
  for_each_plan(path, 0, [&](Plan&& plan, std::uint64_t offset, std::uint64_t line) {
    offsets_[{plan.step, plan.micro_batch, plan.layer}] = Place{offset, line};
  });
  in_.open(path, std::ios::binary);
  if (!in_) throw InputError(path, "", "cannot open file");
}

std::optional<Plan> PlansIndex::find(std::uint32_t step, std::uint32_t micro_batch, std::uint32_t layer) {
  const auto it = offsets_.find({step, micro_batch, layer});
  if (it == offsets_.end()) return std::nullopt;
  in_.clear();
  in_.seekg(static_cast<std::streamoff>(it->second.offset));
  std::string line;
  if (!std::getline(in_, line))
    throw InputError(path_, "line " + std::to_string(it->second.line), "the file changed while it was read");
  Plan plan = plan_of_line(line, path_, it->second.line);
  if (plan.step != step || plan.micro_batch != micro_batch || plan.layer != layer)
    throw InputError(path_, "line " + std::to_string(it->second.line), "the file changed while it was read");
  return plan;
}

}  // namespace epsim
