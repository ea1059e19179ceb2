#include "sim/validate/task_matching.hpp"

#include <algorithm>
#include <cctype>
#include <map>
#include <tuple>

namespace epsim {

namespace {

using Key = std::tuple<int, int, int, std::string>;  // gpu, track, pass, name

Key key_of(const TimelineEvent& e) { return {e.gpu, static_cast<int>(e.track), static_cast<int>(e.pass), e.name}; }

/// Total order used for occurrences and for output: time first, then identity.
bool earlier(const TimelineEvent& a, const TimelineEvent& b) {
  return std::tie(a.start_ps, a.end_ps, a.gpu, a.track, a.pass, a.name, a.bytes) <
         std::tie(b.start_ps, b.end_ps, b.gpu, b.track, b.pass, b.name, b.bytes);
}

std::map<Key, std::vector<TimelineEvent>> group(const std::vector<TimelineEvent>& events) {
  std::map<Key, std::vector<TimelineEvent>> out;
  for (const auto& e : events)
    if (is_matched_track(e.track)) out[key_of(e)].push_back(e);
  for (auto& [key, list] : out) std::stable_sort(list.begin(), list.end(), earlier);
  return out;
}

bool is_suffix_token(const std::string& token) {
  if (token.size() < 2 || (token[0] != 's' && token[0] != 'e' && token[0] != 'g')) return false;
  return std::all_of(token.begin() + 1, token.end(),
                     [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
}

}  // namespace

bool is_matched_track(Track track) { return track != Track::nvlink_out && track != Track::nic_out; }

std::string task_kind(const std::string& name) {
  std::string kind = name;
  for (;;) {
    const auto space = kind.rfind(' ');
    if (space == std::string::npos || !is_suffix_token(kind.substr(space + 1))) return kind;
    kind.erase(space);
  }
}

TaskMatch match_tasks(const std::vector<TimelineEvent>& predicted, const std::vector<TimelineEvent>& measured) {
  auto pred = group(predicted);
  auto meas = group(measured);
  TaskMatch out;
  for (const auto& [key, list] : pred) {
    const auto it = meas.find(key);
    const std::size_t n = it == meas.end() ? 0 : it->second.size();
    for (std::size_t i = 0; i < list.size(); ++i) {
      if (i < n)
        out.matched.push_back({list[i], it->second[i], static_cast<int>(i)});
      else
        out.predicted_only.push_back({list[i], static_cast<int>(i)});
    }
  }
  for (const auto& [key, list] : meas) {
    const auto it = pred.find(key);
    const std::size_t n = it == pred.end() ? 0 : it->second.size();
    for (std::size_t i = n; i < list.size(); ++i) out.measured_only.push_back({list[i], static_cast<int>(i)});
  }
  std::stable_sort(out.matched.begin(), out.matched.end(),
                   [](const MatchedTask& a, const MatchedTask& b) { return earlier(a.predicted, b.predicted); });
  auto by_event = [](const UnmatchedTask& a, const UnmatchedTask& b) { return earlier(a.event, b.event); };
  std::stable_sort(out.predicted_only.begin(), out.predicted_only.end(), by_event);
  std::stable_sort(out.measured_only.begin(), out.measured_only.end(), by_event);
  return out;
}

}  // namespace epsim
