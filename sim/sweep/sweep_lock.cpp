#include "sim/sweep/sweep_lock.hpp"

#include <fstream>
#include <optional>
#include <set>

#include <nlohmann/json.hpp>

#include "sim/core/input_error.hpp"
#include "sim/hardware/hardware_spec.hpp"

namespace epsim {
namespace {

const char* const kFormat = "epsim-sweep-lock";
constexpr int kVersion = 1;

/// Ids and trace names become file names (and --restart removes those files): plain names only.
std::string plain_name(const std::string& path, const std::string& name) {
  bool ok = !name.empty() && name != "." && name != "..";
  for (const char c : name)
    ok = ok && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
                c == '-' || c == '+');
  if (!ok) throw InputError(path, "", "not a sweep lock file of this epsim: '" + name + "' is not a plain file name");
  return name;
}

/// A point's sharing goes into the tables as it is: one of the modes a point resolves to, or empty
/// (a folder joined from one whose lock is from before the mode was kept).
std::string sharing_name(const std::string& path, const std::string& name) {
  if (name.empty()) return name;
  // A point records the mode it resolved to, never auto itself.
  const std::optional<BandwidthSharing> mode = bandwidth_sharing_from_string(name);
  if (mode && *mode != BandwidthSharing::automatic) return name;
  throw InputError(path, "", "not a sweep lock file of this epsim: '" + name + "' is not a bandwidth sharing a point runs with "
                                "(exact, epochs, per_link, local or coupled)");
}

}  // namespace

SweepLock SweepLock::of(const SweepSpec& spec) {
  SweepLock lock;
  lock.name = spec.name;
  lock.hash = spec.hash;
  lock.baseline = spec.baseline;
  for (const SweepBalancer& b : spec.balancers) lock.balancers.emplace_back(b.label, b.choice.name);
  lock.columns = spec.columns;
  std::set<std::string> traces;
  for (const SweepPoint& p : spec.points) {
    Point lp;
    lp.id = p.id;
    for (const SweepAssignment& a : p.assignments) lp.values.emplace_back(a.key, a.text());
    if (!p.experiments.empty()) {
      const ExperimentSpec& x = p.experiments.front();  // (every balancer's runs on the same hardware)
      lp.sharing = to_string(sharing_for(x.hardware.engine, x.ep_degree));
    }
    lock.points.push_back(std::move(lp));
    if (!p.trace_file.empty() && traces.insert(p.trace_file).second) lock.traces.push_back(p.trace_file);
  }
  return lock;
}

std::string SweepLock::json() const {
  // ordered_json keeps the keys in the order written, so the file reads top-down.
  nlohmann::ordered_json j;
  j["format"] = kFormat;
  j["version"] = kVersion;
  j["name"] = name;
  j["hash"] = hash;
  j["baseline"] = baseline;
  j["balancers"] = nlohmann::ordered_json::array();
  for (const auto& [label, registry] : balancers) j["balancers"].push_back({label, registry});
  j["columns"] = columns;
  j["points"] = nlohmann::ordered_json::array();
  for (const Point& p : points) {
    nlohmann::ordered_json values = nlohmann::ordered_json::array();
    for (const auto& [k, v] : p.values) values.push_back({k, v});
    j["points"].push_back({{"id", p.id}, {"values", values}, {"sharing", p.sharing}});
  }
  j["traces"] = traces;
  return j.dump(1) + "\n";
}

SweepLock SweepLock::read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path, "", "cannot open the sweep lock file");
  try {
    const nlohmann::json j = nlohmann::json::parse(in);
    if (!j.is_object() || j.value("format", "") != kFormat || j.value("version", 0) != kVersion)
      throw InputError(path, "", "not a sweep lock file of this epsim (format or version)");
    SweepLock lock;
    lock.name = j.at("name").get<std::string>();
    lock.hash = j.at("hash").get<std::string>();
    lock.baseline = j.at("baseline").get<std::string>();
    for (const auto& b : j.at("balancers")) lock.balancers.emplace_back(b.at(0).get<std::string>(), b.at(1).get<std::string>());
    lock.columns = j.at("columns").get<std::vector<std::string>>();
    for (const auto& p : j.at("points")) {
      Point lp;
      lp.id = plain_name(path, p.at("id").get<std::string>());
      for (const auto& v : p.at("values")) lp.values.emplace_back(v.at(0).get<std::string>(), v.at(1).get<std::string>());
      // (A lock written before the sharing was kept has none: its tables leave the cell empty.)
      if (p.contains("sharing")) lp.sharing = sharing_name(path, p.at("sharing").get<std::string>());
      lock.points.push_back(std::move(lp));
    }
    for (const auto& t : j.at("traces")) lock.traces.push_back(plain_name(path, t.get<std::string>()));
    return lock;
  } catch (const nlohmann::json::exception& e) {
    throw InputError(path, "", std::string("not a sweep lock file of this epsim: ") + e.what());
  }
}

}  // namespace epsim
