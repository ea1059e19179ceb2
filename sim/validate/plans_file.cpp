#include "sim/validate/plans_file.hpp"

#include <set>

#include "sim/core/input_error.hpp"
#include "sim/plan/plan_json.hpp"

namespace epsim {

std::size_t for_each_plan(const std::string& path, std::size_t limit,
                          const std::function<void(Plan&&, std::uint64_t, std::uint64_t)>& each) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path, "", "cannot open file");
  std::set<std::tuple<std::uint32_t, std::uint32_t, std::uint32_t>> seen;
  std::size_t count = 0;
  std::uint64_t offset = 0;
  for (std::uint64_t number = 1;; ++number) {
    const std::uint64_t line_offset = offset;
    std::uint64_t bytes = 0;
    std::optional<Plan> read = read_plan_line(in, path, number, bytes);
    offset += bytes;
    if (!read) {
      if (bytes == 0) break;  // the file's end
      continue;               // a blank line
    }
    Plan& plan = *read;
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
    // The first plan is kept while it may be the only one; a second lets it go.
    if (offsets_.size() == 1) only_ = std::move(plan);
    else only_.reset();
  });
  in_.open(path, std::ios::binary);
  if (!in_) throw InputError(path, "", "cannot open file");
}

std::optional<Plan> PlansIndex::find(std::uint32_t step, std::uint32_t micro_batch, std::uint32_t layer) {
  const auto it = offsets_.find({step, micro_batch, layer});
  if (it == offsets_.end()) return std::nullopt;
  if (only_) {
    std::optional<Plan> plan = std::move(only_);
    only_.reset();
    return plan;
  }
  in_.clear();
  in_.seekg(static_cast<std::streamoff>(it->second.offset));
  std::uint64_t bytes = 0;
  std::optional<Plan> read = read_plan_line(in_, path_, it->second.line, bytes);
  if (!read)
    throw InputError(path_, "line " + std::to_string(it->second.line), "the file changed while it was read");
  Plan& plan = *read;
  if (plan.step != step || plan.micro_batch != micro_batch || plan.layer != layer)
    throw InputError(path_, "line " + std::to_string(it->second.line), "the file changed while it was read");
  return plan;
}

}  // namespace epsim
