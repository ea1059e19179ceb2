#include "sim/validate/measured_timeline.hpp"

#include <exception>
#include <fstream>
#include <initializer_list>
#include <limits>
#include <set>
#include <tuple>

#include "sim/core/input_error.hpp"
#include "sim/core/json_input.hpp"
#include "sim/core/json_stream.hpp"

namespace epsim {

namespace {

using nlohmann::json;

constexpr Track kTracks[] = {Track::compute,    Track::comm_kernel, Track::copy_engine,
                             Track::nvlink_out, Track::nic_out,     Track::host_cpu};

const char* type_name(const json& j) { return j.type_name(); }

/// Checks that `object` is an object holding exactly `keys` (distinct). An object of as many members,
/// every key among them, is one (the common case: a calibration run's hundreds of thousands of
/// events); otherwise the missing or unknown key is named.
void expect_keys(const json& object, std::initializer_list<const char*> keys, const std::string& file,
                 const std::string& place) {
  if (!object.is_object()) throw InputError(file, place, std::string("expected an object, found ") + type_name(object));
  const bool all = object.size() == keys.size();
  for (const char* key : keys) {
    if (object.contains(key)) continue;
    throw InputError(file, place, "missing key '" + std::string(key) + "'");
  }
  if (all) return;
  for (const auto& item : object.items()) {
    bool known = false;
    for (const char* key : keys) known = known || item.key() == key;
    if (!known) {
      std::string allowed;
      for (const char* key : keys) allowed += (allowed.empty() ? "" : ", ") + std::string(key);
      throw InputError(file, place, "unknown key '" + item.key() + "' (allowed: " + allowed + ")");
    }
  }
}

std::string text(const json& j, bool non_empty, const std::string& file, const std::string& place) {
  std::string s = json_string(j, file, place);
  if (non_empty && s.empty()) throw InputError(file, place, "empty string");
  return s;
}

/// An event of a record, read with its place ("records[3].events[12]") spelled only for an error: a
/// calibration run's hundreds of thousands of events would otherwise build eight strings each.
class EventReader {
 public:
  EventReader(const json& j, const std::string& file, std::size_t record, std::size_t event)
      : file_(file), record_(record), event_(event) {
    // Its members in kKeys order; an object without exactly these keys gets expect_keys' error.
    bool exact = j.is_object() && j.size() == kKeyCount;
    for (std::size_t k = 0; k < kKeyCount && exact; ++k) {
      const auto it = j.find(kKeys[k]);
      exact = it != j.end();
      if (exact) members_[k] = &*it;
    }
    if (!exact)
      expect_keys(j, {kKeys[0], kKeys[1], kKeys[2], kKeys[3], kKeys[4], kKeys[5], kKeys[6]}, file_, at());
  }

  TimelineEvent read() const {
    TimelineEvent e;
    e.gpu = static_cast<int>(integer(kGpu, 1 << 20));
    const std::string& track = name_of(kTrack);
    if (!track_from_string(track, e.track))
      throw InputError(
          file_, at(".track"),
          "unknown track '" + track + "' (compute, comm_kernel, copy_engine, nvlink_out, nic_out, host_cpu)");
    const std::string& pass = name_of(kPass);
    if (pass == "forward")
      e.pass = Pass::forward;
    else if (pass == "backward")
      e.pass = Pass::backward;
    else
      throw InputError(file_, at(".pass"), "unknown pass '" + pass + "' (forward, backward)");
    e.name = name_of(kName);
    const std::int64_t max = std::numeric_limits<std::int64_t>::max();
    e.start_ps = integer(kStart, max);
    e.end_ps = integer(kEnd, max);
    if (e.end_ps < e.start_ps)
      throw InputError(file_, at(".end_ps"),
                       "end_ps " + std::to_string(e.end_ps) + " before start_ps " + std::to_string(e.start_ps));
    const json& bytes = *members_[kBytes];
    const double d = bytes.is_number() ? bytes.get<double>() : -1;
    e.bytes = d >= 0 && d <= 1e18 ? d : json_number(bytes, 0, 1e18, file_, at(".bytes"));
    return e;
  }

 private:
  enum Key { kGpu, kTrack, kPass, kName, kStart, kEnd, kBytes, kKeyCount };
  static constexpr const char* kKeys[kKeyCount] = {"gpu", "track", "pass", "name", "start_ps", "end_ps", "bytes"};

  std::string at(const std::string& field = "") const {
    return "records[" + std::to_string(record_) + "].events[" + std::to_string(event_) + "]" + field;
  }
  /// The integer in [0, hi] (json_integer's rule and error).
  std::int64_t integer(Key key, std::int64_t hi) const {
    const json& v = *members_[key];
    if (const std::optional<std::int64_t> x = json_integer_if(v, 0, hi)) return *x;
    return json_integer(v, 0, hi, file_, at(std::string(".") + kKeys[key]));  // (throws)
  }
  /// A non-empty string (text's rule and error).
  const std::string& name_of(Key key) const {
    const json& v = *members_[key];
    if (!v.is_string() || v.get_ref<const std::string&>().empty())
      text(v, true, file_, at(std::string(".") + kKeys[key]));  // throws
    return v.get_ref<const std::string&>();
  }

  const std::string& file_;
  std::size_t record_;
  std::size_t event_;
  const json* members_[kKeyCount] = {};
};

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

namespace {

/// The records, converted one by one: from a document's array (measured_timeline_from_json) or as the
/// parser completes each (read_measured_timeline), the document never holding them. The first bad
/// record's error is kept and raised where the checks of the whole document reach the records, so
/// both readers name the same first defect.
class MeasuredRecords : public JsonListSink {
 public:
  explicit MeasuredRecords(const std::string& file) : file_(file) {}

  bool starts(const std::string& key) override {
    if (key != "records") return false;
    // A repeated key's last value is the timeline's.
    records_.clear();
    seen_.clear();
    count_ = 0;
    error_ = nullptr;
    return true;
  }
  void take(json&& record) override { add(record); }
  void add(const json& record) {
    const std::size_t r = count_++;
    if (error_) return;
    try {
      records_.push_back(read_record(record, r));
    } catch (const InputError&) {
      error_ = std::current_exception();
    }
  }
  /// The records of `doc`'s array, as the parser would have handed them over.
  void add_all(const json& doc) {
    if (!doc.is_object() || !doc.contains("records") || !doc["records"].is_array()) return;
    starts("records");
    for (const json& record : doc["records"]) add(record);
  }

  /// The records, after the document's own checks (`records` an array): the first bad one's error,
  /// or none at all.
  std::vector<MeasuredRecord> take_records() {
    if (error_) std::rethrow_exception(error_);
    if (count_ == 0) throw InputError(file_, "records", "no records");
    return std::move(records_);
  }

 private:
  MeasuredRecord read_record(const json& jr, std::size_t r) {
    const std::string place = "records[" + std::to_string(r) + "]";
    expect_keys(jr, {"step", "micro_batch", "layer", "events"}, file_, place);
    const std::int64_t u32 = std::numeric_limits<std::uint32_t>::max();
    MeasuredRecord rec;
    rec.step = static_cast<std::uint32_t>(json_integer(jr["step"], 0, u32, file_, place + ".step"));
    rec.micro_batch = static_cast<std::uint32_t>(json_integer(jr["micro_batch"], 0, u32, file_, place + ".micro_batch"));
    rec.layer = static_cast<std::uint32_t>(json_integer(jr["layer"], 0, u32, file_, place + ".layer"));
    if (!seen_.insert({rec.step, rec.micro_batch, rec.layer}).second)
      throw InputError(file_, place,
                       "duplicate record (step " + std::to_string(rec.step) + ", micro_batch " +
                           std::to_string(rec.micro_batch) + ", layer " + std::to_string(rec.layer) + ")");
    const json& events = jr["events"];
    json_array(events, file_, place + ".events");
    if (events.empty()) throw InputError(file_, place + ".events", "no events");
    rec.events.reserve(events.size());
    for (std::size_t i = 0; i < events.size(); ++i)
      rec.events.push_back(EventReader(events[i], file_, r, i).read());
    return rec;
  }

  const std::string& file_;
  std::vector<MeasuredRecord> records_;
  std::set<std::tuple<std::uint32_t, std::uint32_t, std::uint32_t>> seen_;
  std::size_t count_ = 0;
  std::exception_ptr error_;
};

/// The timeline `doc` describes, its records from `records`: every check in one order, whichever way
/// the records were read.
MeasuredTimeline finish_timeline(const json& doc, MeasuredRecords& records, const std::string& file) {
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
  json_array(doc["records"], file, "records");
  out.records = records.take_records();
  return out;
}

}  // namespace

MeasuredTimeline measured_timeline_from_json(const json& doc, const std::string& file) {
  MeasuredRecords records(file);
  records.add_all(doc);
  return finish_timeline(doc, records, file);
}

MeasuredTimeline read_measured_timeline(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path, "", "cannot open file");
  // Each record is converted as the parser completes it: the document's tree of a calibration run's
  // events would be ten times the file.
  MeasuredRecords records(path);
  const json doc = parse_json_stream(in, path, &records);
  if (in.bad()) throw InputError(path, "", "read error");
  return finish_timeline(doc, records, path);
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
