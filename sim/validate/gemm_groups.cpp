#include "sim/validate/gemm_groups.hpp"

#include <algorithm>
#include <cctype>
#include <map>
#include <numeric>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>

namespace epsim {

namespace {

constexpr std::string_view kGemmNames[] = {"gemm fwd", "gemm dgrad", "gemm wgrad"};

const std::vector<int>& groups_named(const GemmGroupOrder& order, int name) {
  return name == 0 ? order.fwd : name == 1 ? order.dgrad : order.wgrad;
}

/// Which of the three names `name` is (exactly, or followed by a group when `named`): 0..2, else -1.
int gemm_name(const std::string& name, bool named) {
  for (int n = 0; n < 3; ++n) {
    const std::string_view base = kGemmNames[n];
    if (!named && name == base) return n;
    if (named && name.size() > base.size() && name.compare(0, base.size(), base) == 0 && name[base.size()] == ' ' &&
        names_gemm_group(name))
      return n;
  }
  return -1;
}

/// Per (GPU of `gpus`, name): the indices of its compute events with that name, by start then end (the
/// order a FIFO compute stream ran them). One pass over the events.
std::map<std::pair<int, int>, std::vector<std::size_t>> events_by_name(const std::vector<TimelineEvent>& events,
                                                                      const std::set<int>& gpus, bool named) {
  std::map<std::pair<int, int>, std::vector<std::size_t>> out;
  for (std::size_t i = 0; i < events.size(); ++i) {
    const TimelineEvent& e = events[i];
    if (e.track != Track::compute || !gpus.count(e.gpu)) continue;
    const int n = gemm_name(e.name, named);
    if (n >= 0) out[{e.gpu, n}].push_back(i);
  }
  for (auto& [key, at] : out)
    std::stable_sort(at.begin(), at.end(), [&](std::size_t a, std::size_t b) {
      return std::tie(events[a].start_ps, events[a].end_ps) < std::tie(events[b].start_ps, events[b].end_ps);
    });
  return out;
}

void name_in_order(std::vector<TimelineEvent>& events, const std::vector<std::size_t>& at, const std::vector<int>& groups) {
  for (std::size_t i = 0; i < at.size(); ++i) events[at[i]].name += " g" + std::to_string(groups[i]);
}

/// Takes the group off each event's name ("gemm fwd g2" -> "gemm fwd").
void unname(std::vector<TimelineEvent>& events, const std::vector<std::size_t>& at) {
  for (std::size_t i : at) events[i].name.erase(events[i].name.rfind(" g"));
}

}  // namespace

GemmGroupOrder gemm_group_order(const std::vector<GemmGroup>& groups, const std::vector<int>& forward_order) {
  GemmGroupOrder out;
  out.fwd = forward_order;
  for (int k : forward_order)
    if (groups.at(static_cast<std::size_t>(k)).backward_first) {
      out.dgrad.push_back(k);
      out.wgrad.push_back(k);
    }
  for (int k : forward_order)
    if (!groups.at(static_cast<std::size_t>(k)).backward_first) {
      out.dgrad.push_back(k);
      out.wgrad.push_back(k);
    }
  return out;
}

bool names_gemm_group(const std::string& name) {
  const auto space = name.rfind(" g");
  if (space == std::string::npos || space + 2 >= name.size()) return false;
  return std::all_of(name.begin() + static_cast<std::ptrdiff_t>(space) + 2, name.end(),
                     [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
}

void name_gemm_groups(const Plan& plan, const std::vector<std::vector<int>>& predicted_forward,
                      std::vector<TimelineEvent>& predicted, std::vector<TimelineEvent>& measured) {
  // Only the GPUs the measurement covers are compared, so only theirs are named.
  std::set<int> gpus;
  for (const auto& e : measured)
    if (e.gpu >= 0 && static_cast<std::size_t>(e.gpu) < plan.gemm_order.size() &&
        static_cast<std::size_t>(e.gpu) < predicted_forward.size())
      gpus.insert(e.gpu);
  const auto pred_at = events_by_name(predicted, gpus, false);
  const auto meas_at = events_by_name(measured, gpus, false);
  const auto meas_named = events_by_name(measured, gpus, true);
  static const std::vector<std::size_t> kNone;
  auto at = [](const auto& by_name, int g, int n) -> const std::vector<std::size_t>& {
    const auto it = by_name.find({g, n});
    return it == by_name.end() ? kNone : it->second;
  };
  for (int g : gpus) {
    const std::vector<GemmGroup>& groups = plan.gemm_order[static_cast<std::size_t>(g)];
    std::vector<int> plan_order(groups.size());
    std::iota(plan_order.begin(), plan_order.end(), 0);
    const GemmGroupOrder pred_order = gemm_group_order(groups, predicted_forward[static_cast<std::size_t>(g)]);
    const GemmGroupOrder meas_order = gemm_group_order(groups, plan_order);
    for (int n = 0; n < 3; ++n) {
      const std::vector<int>& pred_groups = groups_named(pred_order, n);
      if (at(pred_at, g, n).size() != pred_groups.size()) {
        unname(measured, at(meas_named, g, n));  // both sides unnamed: pairing by occurrence
        continue;
      }
      if (at(meas_named, g, n).empty()) {  // measured in the plan's order, as epsim-hw run runs it
        const std::vector<int>& meas_groups = groups_named(meas_order, n);
        if (at(meas_at, g, n).size() != meas_groups.size()) continue;
        name_in_order(measured, at(meas_at, g, n), meas_groups);
      }
      name_in_order(predicted, at(pred_at, g, n), pred_groups);
    }
  }
}

}  // namespace epsim
