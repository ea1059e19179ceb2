#include "sim/validate/measured_timeline.hpp"

#include <fstream>
#include <limits>
#include <set>
#include <sstream>
#include <tuple>

#include "sim/core/input_error.hpp"
#include "sim/core/json_input.hpp"

namespace epsim {

namespace {

using nlohmann::json;

constexpr Track kTracks[] = {Track::compute,    Track::comm_kernel, Track::copy_engine,
                             Track::nvlink_out, Track::nic_out,     Track::host_cpu};

const char* type_name(const json& j) { return j.type_name(); }

/// Checks that `object` is an object holding exactly `keys`.
void expect_keys(const json& object, const std::vector<std::string>& keys, const std::string& file,
                 const std::string& place) {
  if (!object.is_object()) throw InputError(file, place, std::string("expected an object, found ") + type_name(object));
  for (const auto& key : keys)
    if (!object.contains(key)) throw InputError(file, place, "missing key '" + key + "'");
  for (const auto& item : object.items()) {
    bool known = false;
    for (const auto& key : keys) known = known || item.key() == key;
    if (!known) {
      std::string allowed;
      for (const auto& key : keys) allowed += (allowed.empty() ? "" : ", ") + key;
      throw InputError(file, place, "unknown key '" + item.key() + "' (allowed: " + allowed + ")");
    }
  }
}

std::string text(const json& j, bool non_empty, const std::string& file, const std::string& place) {
  std::string s = json_string(j, file, place);
  if (non_empty && s.empty()) throw InputError(file, place, "empty string");
  return s;
}

TimelineEvent read_event(const json& j, const std::string& file, const std::string& place) {
  expect_keys(j, {"gpu", "track", "pass", "name", "start_ps", "end_ps", "bytes"}, file, place);
  TimelineEvent e;
  e.gpu = static_cast<int>(json_integer(j["gpu"], 0, 1 << 20, file, place + ".gpu"));
  const std::string track = text(j["track"], true, file, place + ".track");
  if (!track_from_string(track, e.track))
    throw InputError(
        file, place + ".track",
        "unknown track '" + track + "' (compute, comm_kernel, copy_engine, nvlink_out, nic_out, host_cpu)");
  const std::string pass = text(j["pass"], true, file, place + ".pass");
  if (pass == "forward")
    e.pass = Pass::forward;
  else if (pass == "backward")
    e.pass = Pass::backward;
  else
    throw InputError(file, place + ".pass", "unknown pass '" + pass + "' (forward, backward)");
  e.name = text(j["name"], true, file, place + ".name");
  const std::int64_t max = std::numeric_limits<std::int64_t>::max();
  e.start_ps = json_integer(j["start_ps"], 0, max, file, place + ".start_ps");
  e.end_ps = json_integer(j["end_ps"], 0, max, file, place + ".end_ps");
  if (e.end_ps < e.start_ps)
    throw InputError(file, place + ".end_ps",
                     "end_ps " + std::to_string(e.end_ps) + " before start_ps " + std::to_string(e.start_ps));
  e.bytes = json_number(j["bytes"], 0, 1e18, file, place + ".bytes");
  return e;
}

}  // namespace

bool track_from_string(const std::string& name, Track& track) {
  for (Track t : kTracks)
    if (name == to_string(t)) {
      track = t;
      return true;
    }
  return false;
}

const char* to_string(Pass pass) { return pass == Pass::forward ? "forward" : "backward"; }

MeasuredTimeline measured_timeline_from_json(const json& doc, const std::string& file) {
  expect_keys(doc, {"format", "version", "gpu_name", "records"}, file, "");
  const std::string format = text(doc["format"], true, file, "format");
  if (format != kMeasuredTimelineFormat)
    throw InputError(file, "format",
                     "format '" + format + "' is not '" + kMeasuredTimelineFormat + "' (not a measured timeline)");
  const std::int64_t version = json_integer(doc["version"], 0, 1 << 30, file, "version");
  if (version != kMeasuredTimelineVersion)
    throw InputError(file, "version",
                     "measured-timeline version " + std::to_string(version) +
                         " is not supported (this epsim reads version " + std::to_string(kMeasuredTimelineVersion) +
                         ")");
  MeasuredTimeline out;
  out.gpu_name = text(doc["gpu_name"], true, file, "gpu_name");
  const json& records = doc["records"];
  json_array(records, file, "records");
  if (records.empty()) throw InputError(file, "records", "no records");
  std::set<std::tuple<std::uint32_t, std::uint32_t, std::uint32_t>> seen;
  const std::int64_t u32 = std::numeric_limits<std::uint32_t>::max();
  for (std::size_t r = 0; r < records.size(); ++r) {
    const std::string place = "records[" + std::to_string(r) + "]";
    const json& jr = records[r];
    expect_keys(jr, {"step", "micro_batch", "layer", "events"}, file, place);
    MeasuredRecord rec;
    rec.step = static_cast<std::uint32_t>(json_integer(jr["step"], 0, u32, file, place + ".step"));
    rec.micro_batch = static_cast<std::uint32_t>(json_integer(jr["micro_batch"], 0, u32, file, place + ".micro_batch"));
    rec.layer = static_cast<std::uint32_t>(json_integer(jr["layer"], 0, u32, file, place + ".layer"));
    if (!seen.insert({rec.step, rec.micro_batch, rec.layer}).second)
      throw InputError(file, place,
                       "duplicate record (step " + std::to_string(rec.step) + ", micro_batch " +
                           std::to_string(rec.micro_batch) + ", layer " + std::to_string(rec.layer) + ")");
    const json& events = jr["events"];
    json_array(events, file, place + ".events");
    if (events.empty()) throw InputError(file, place + ".events", "no events");
    for (std::size_t i = 0; i < events.size(); ++i)
      rec.events.push_back(read_event(events[i], file, place + ".events[" + std::to_string(i) + "]"));
    out.records.push_back(std::move(rec));
  }
  return out;
}

MeasuredTimeline read_measured_timeline(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path, "", "cannot open file");
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) throw InputError(path, "", "read error");
  return measured_timeline_from_json(parse_json(buffer.str(), path), path);
}

json measured_timeline_to_json(const MeasuredTimeline& timeline) {
  json records = json::array();
  for (const auto& rec : timeline.records) {
    json events = json::array();
    for (const auto& e : rec.events)
      events.push_back({{"gpu", e.gpu},
                        {"track", to_string(e.track)},
                        {"pass", to_string(e.pass)},
                        {"name", e.name},
                        {"start_ps", e.start_ps},
                        {"end_ps", e.end_ps},
                        {"bytes", e.bytes}});
    records.push_back({{"step", rec.step}, {"micro_batch", rec.micro_batch}, {"layer", rec.layer}, {"events", events}});
  }
  return {{"format", kMeasuredTimelineFormat},
          {"version", kMeasuredTimelineVersion},
          {"gpu_name", timeline.gpu_name},
          {"records", records}};
}

}  // namespace epsim
