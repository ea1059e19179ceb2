#include "hw/host/timeline_writer.hpp"

#include <cmath>

#include "sim/core/atomic_file.hpp"

namespace epsim::hw {

std::int64_t ms_to_ps(double ms) {
  if (!(ms > 0)) return 0;
  return static_cast<std::int64_t>(std::llround(ms * 1e9));
}

nlohmann::json run_records_to_json(const std::string& gpu_name, const std::vector<RunRecord>& records) {
  nlohmann::json recs = nlohmann::json::array();
  for (const auto& r : records) {
    nlohmann::json events = nlohmann::json::array();
    for (const auto& e : r.events)
      events.push_back({{"gpu", e.gpu},
                        {"track", to_string(e.track)},
                        {"pass", e.pass == Pass::forward ? "forward" : "backward"},
                        {"name", e.name},
                        {"start_ps", e.start_ps},
                        {"end_ps", e.end_ps},
                        {"bytes", e.bytes}});
    recs.push_back({{"step", r.step}, {"micro_batch", r.micro_batch}, {"layer", r.layer}, {"events", events}});
  }
  return {{"format", "epsim-measured-timeline"}, {"version", 1}, {"gpu_name", gpu_name}, {"records", recs}};
}

void write_run_records(const std::string& path, const std::string& gpu_name, const std::vector<RunRecord>& records,
                       bool replace) {
  AtomicFile out(path, replace);
  out.stream() << run_records_to_json(gpu_name, records).dump(1) << "\n";
  out.commit();
}

}  // namespace epsim::hw
