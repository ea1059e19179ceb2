#include "sim/sweep/point_check.hpp"

#include <utility>

#include <nlohmann/json.hpp>

#include "sim/core/input_error.hpp"
#include "sim/hardware/hardware_spec.hpp"
#include "sim/replay/replay.hpp"
#include "sim/sweep/sweep_json_file.hpp"

namespace epsim {
namespace {

const char* const kFormat = "epsim-sweep-check";
constexpr int kVersion = 1;

BandwidthSharing sharing_of(const ExperimentSpec& x) { return sharing_for(x.hardware.engine, x.ep_degree); }


}  // namespace

bool point_runs_fast(const SweepPoint& point) {
  return !point.experiments.empty() && sharing_of(point.experiments.front()) != BandwidthSharing::exact;
}

PointCheck point_check_of(const SweepPoint& point, std::size_t records) {
  if (!point_runs_fast(point)) throw std::logic_error("point_check_of: the point runs exact sharing");
  PointCheck result;
  result.id = point.id;
  result.hash = point.hash;
  result.wanted = records;
  result.sharing = to_string(sharing_of(point.experiments.front()));
  result.balancers.resize(point.experiments.size());
  for (std::size_t b = 0; b < point.experiments.size(); ++b) result.balancers[b].label = point.labels[b];
  return result;
}

BalancerCheck check_point_balancer(const SweepPoint& point, std::size_t b, const std::string& trace_path,
                                   std::size_t records, unsigned threads) {
  if (!point_runs_fast(point)) throw std::logic_error("check_point_balancer: the point runs exact sharing");
  ExperimentSpec x = point.experiments[b];
  x.trace_path = trace_path;
  x.timeline_records = 0;
  // The first records of the replay, warm-up ones included: the check is of the sharing model.
  if (x.max_records == 0 || static_cast<std::size_t>(x.max_records) > records) x.max_records = static_cast<int>(records);
  BalancerCheck out;
  out.label = point.labels[b];
  ExactCheck check(records);
  try {
    replay(x, [&](const LayerOutcome& o) { check.add_run(o.metrics, o.result); }, threads);
    check.run_exact(x, threads);
  } catch (const BalancerCannotServe& e) {
    out.not_served = e.what();
  }
  if (out.not_served.empty()) {
    if (check.checked() == 0) throw InputError(trace_path, "", "the trace has no records to replay");
    out.summary = check.summary();
  }
  return out;
}

std::string point_check_json(const PointCheck& c) {
  // nlohmann writes each double in the shortest form that reads back to the same double.
  nlohmann::json j = {{"format", kFormat}, {"version", kVersion}, {"id", c.id},
                      {"hash", c.hash},     {"records", c.wanted}, {"sharing", c.sharing}};
  nlohmann::json balancers = nlohmann::json::array();
  for (const BalancerCheck& b : c.balancers) {
    nlohmann::json e = {{"label", b.label}, {"not_served", b.not_served}};
    if (b.not_served.empty()) {
      const ExactCheck::Summary& s = b.summary;
      e["checked"] = s.records;
      e["layer_error"] = {s.layer_error_min, s.layer_error_max};
      e["gpu_error"] = {s.gpu_error_min, s.gpu_error_max};
      e["same_last"] = s.same_last;
      e["worst_pick"] = s.worst_pick;
      e["layer_us_median"] = s.layer_us_median;
      e["exact_layer_us_median"] = s.exact_layer_us_median;
    }
    balancers.push_back(std::move(e));
  }
  j["balancers"] = std::move(balancers);
  return j.dump() + "\n";
}

PointCheck read_point_check_json(const std::string& path) {
  const SweepJsonFile file(path, "sweep check file", "remove it and run the sweep with --check-exact again to recompute it");
  const nlohmann::json j = file.read(kFormat, kVersion);
  try {
    PointCheck c;
    c.id = j.at("id").get<std::string>();
    c.hash = j.at("hash").get<std::string>();
    c.wanted = j.at("records").get<std::size_t>();
    c.sharing = j.at("sharing").get<std::string>();
    for (const nlohmann::json& e : j.at("balancers")) {
      BalancerCheck b;
      b.label = e.at("label").get<std::string>();
      b.not_served = e.at("not_served").get<std::string>();
      if (b.not_served.empty()) {
        ExactCheck::Summary& s = b.summary;
        s.records = e.at("checked").get<std::size_t>();
        s.layer_error_min = e.at("layer_error").at(0).get<double>();
        s.layer_error_max = e.at("layer_error").at(1).get<double>();
        s.gpu_error_min = e.at("gpu_error").at(0).get<double>();
        s.gpu_error_max = e.at("gpu_error").at(1).get<double>();
        s.same_last = e.at("same_last").get<std::size_t>();
        s.worst_pick = e.at("worst_pick").get<double>();
        s.layer_us_median = e.at("layer_us_median").get<double>();
        s.exact_layer_us_median = e.at("exact_layer_us_median").get<double>();
      }
      c.balancers.push_back(std::move(b));
    }
    return c;
  } catch (const nlohmann::json::exception& e) {
    file.bad(e.what());
  }
}

}  // namespace epsim
