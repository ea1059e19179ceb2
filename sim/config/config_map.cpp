#include "sim/config/config_map.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <sstream>

#include "sim/core/input_error.hpp"

namespace epsim {
namespace {

/// "line:col", 1-based, of a yaml-cpp mark (which is 0-based); "1:1" for a node with no position.
std::string place(const YAML::Mark& mark) {
  if (mark.is_null()) return "1:1";
  return std::to_string(mark.line + 1) + ":" + std::to_string(mark.column + 1);
}

/// How a node looks in "got ..." messages: scalars as written, in quotes.
std::string describe(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Scalar:
      return "'" + node.Scalar() + "'";
    case YAML::NodeType::Sequence:
      return "a sequence";
    case YAML::NodeType::Map:
      return "a mapping";
    default:
      return "nothing";
  }
}

/// A plain (unquoted) scalar: only those may be numbers or booleans.
bool plain_scalar(const YAML::Node& node) { return node.IsScalar() && node.Tag() == "?"; }

std::string number_text(double value) {
  std::ostringstream out;
  out.precision(12);
  out << value;
  return out.str();
}

bool tiny_positive(double min) { return min > 0 && min <= 1e-200; }

/// "in [0, 1]", ">= 1", "> 0", "in (0, 1]", or "" when unbounded. An upper bound at the type's limit
/// is left out of the text unless `value` is beyond it.
std::string range_text(double min, double max, bool show_max) {
  const bool has_min = min > -1e300;
  const bool has_max = show_max && max < 1e300;
  const std::string lo = tiny_positive(min) ? "0" : number_text(min);
  if (has_min && has_max)
    return std::string("in ") + (tiny_positive(min) ? "(" : "[") + lo + ", " + number_text(max) + "]";
  if (has_min) return (tiny_positive(min) ? "> " : ">= ") + lo;
  if (has_max) return "<= " + number_text(max);
  return "";
}

std::string int_range_text(std::int64_t min, std::int64_t max, bool show_max) {
  const bool has_min = min > std::numeric_limits<std::int64_t>::min();
  const bool has_max = show_max && max < std::numeric_limits<std::int64_t>::max();
  if (has_min && has_max) return "in [" + std::to_string(min) + ", " + std::to_string(max) + "]";
  if (has_min) return ">= " + std::to_string(min);
  if (has_max) return "<= " + std::to_string(max);
  return "";
}

bool parse_double(const std::string& text, double& out) {
  if (text.empty() || text.find_first_not_of("0123456789+-.eE") != std::string::npos) return false;
  char* end = nullptr;
  errno = 0;
  out = std::strtod(text.c_str(), &end);
  return end == text.c_str() + text.size() && errno == 0 && std::isfinite(out);
}

/// 0 = not an integer, 1 = ok, 2 = an integer too large for 64 bits.
int parse_int(const std::string& text, std::int64_t& out) {
  if (text.empty() || text.find_first_not_of("0123456789+-") != std::string::npos) return 0;
  char* end = nullptr;
  errno = 0;
  const long long value = std::strtoll(text.c_str(), &end, 10);
  if (end != text.c_str() + text.size()) return 0;
  if (errno == ERANGE) return 2;
  out = value;
  return 1;
}

/// Optimal-string-alignment distance, case-insensitive (a transposition counts as one edit).
std::size_t edit_distance(std::string a, std::string b) {
  auto lower = [](std::string& s) {
    std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  };
  lower(a);
  lower(b);
  std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
  for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.size()][b.size()];
}

constexpr std::size_t kTypoDistance = 2;

/// Within kTypoDistance edits, and short words need proportionally fewer ("3" is no typo of "1").
bool is_typo(const std::string& word, const std::string& candidate, std::size_t dist) {
  return dist <= kTypoDistance && dist * 3 <= std::max(word.size(), candidate.size());
}

/// The closest of `candidates` to `word` that looks like a typo of it, or "".
std::string closest(const std::string& word, const std::set<std::string>& candidates) {
  std::string best;
  std::size_t best_distance = kTypoDistance + 1;
  for (const auto& c : candidates) {
    const std::size_t dist = edit_distance(word, c);
    if (is_typo(word, c, dist) && dist < best_distance) {
      best = c;
      best_distance = dist;
    }
  }
  return best;
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : ", ") + item;
  return out;
}

}  // namespace

ConfigMap::ConfigMap(const YAML::Node& node, std::string file, std::string key_path)
    : node_(node), file_(std::move(file)), key_path_(std::move(key_path)) {
  mark_ = node_.IsDefined() ? node_.Mark() : YAML::Mark::null_mark();
  if (!node_.IsDefined() || node_.IsNull()) return;
  if (!node_.IsMap()) {
    const std::string where_text = key_path_.empty() ? "the top of the file" : key_path_;
    throw InputError(file_, place(node_.Mark()),
                     "expected a mapping (key: value lines) at " + where_text + ", got " + describe(node_));
  }
  for (auto it = node_.begin(); it != node_.end(); ++it) {
    if (!it->first.IsScalar())
      throw InputError(file_, place(it->first.Mark()), "expected a key name, got " + describe(it->first));
    const std::string key = it->first.Scalar();
    if (const Entry* first = find(key))
      throw InputError(file_, place(it->first.Mark()),
                       "duplicate key '" + full_key(key) + "' (first at line " +
                           std::to_string(first->key_mark.line + 1) + ")");
    entries_.push_back(Entry{key, it->first.Mark(), it->second});
  }
}

const ConfigMap::Entry* ConfigMap::find(const std::string& key) const {
  for (const auto& e : entries_)
    if (e.key == key) return &e;
  return nullptr;
}

std::string ConfigMap::full_key(const std::string& key) const {
  return key_path_.empty() ? key : key_path_ + "." + key;
}

void ConfigMap::missing(const std::string& key) const {
  // A misspelt key is the likeliest reason for a missing one: point at the typo instead.
  for (const auto& e : entries_) {
    if (known_.count(e.key) || consumed_.count(e.key)) continue;
    if (is_typo(e.key, key, edit_distance(e.key, key)))
      throw InputError(file_, place(e.key_mark),
                       "unknown key '" + e.key + "'" + (key_path_.empty() ? "" : " in " + key_path_) +
                           "; did you mean '" + key + "'?");
  }
  throw InputError(file_, place(mark_),
                   "missing key '" + key + "'" + (key_path_.empty() ? "" : " in " + key_path_));
}

void ConfigMap::bad_value(const Entry& entry, const std::string& message) const {
  const YAML::Mark mark = entry.value.Mark().is_null() ? entry.key_mark : entry.value.Mark();
  throw InputError(file_, place(mark), full_key(entry.key) + ": " + message);
}

const ConfigMap::Entry& ConfigMap::require(const std::string& key) {
  known_.insert(key);
  const Entry* e = find(key);
  if (e == nullptr) missing(key);
  consumed_.insert(key);
  return *e;
}

bool ConfigMap::has(const std::string& key) const {
  known_.insert(key);
  return find(key) != nullptr;
}

std::string ConfigMap::to_string(const Entry& e) const {
  if (!e.value.IsScalar()) bad_value(e, "expected a string, got " + describe(e.value));
  if (e.value.Scalar().empty()) bad_value(e, "expected a non-empty string, got ''");
  return e.value.Scalar();
}

double ConfigMap::to_double(const Entry& e, double min, double max) const {
  double value = 0;
  if (!plain_scalar(e.value) || !parse_double(e.value.Scalar(), value))
    bad_value(e, std::string("expected a number, got ") +
                     (e.value.IsScalar() && !plain_scalar(e.value) ? "the string " : "") + describe(e.value));
  if (value < min || value > max)
    bad_value(e, "expected a number " + range_text(min, max, max < 1e300 || value > max) + ", got " +
                     e.value.Scalar());
  return value;
}

std::int64_t ConfigMap::to_int(const Entry& e, std::int64_t min, std::int64_t max) const {
  std::int64_t value = 0;
  const int parsed = plain_scalar(e.value) ? parse_int(e.value.Scalar(), value) : 0;
  if (parsed == 0)
    bad_value(e, std::string("expected an integer, got ") +
                     (e.value.IsScalar() && !plain_scalar(e.value) ? "the string " : "") + describe(e.value));
  if (parsed == 2) bad_value(e, "integer out of range, got " + e.value.Scalar());
  if (value < min || value > max) {
    const bool show_max = max < std::numeric_limits<std::int32_t>::max() || value > max;
    bad_value(e, "expected an integer " + int_range_text(min, max, show_max) + ", got " + e.value.Scalar());
  }
  return value;
}

bool ConfigMap::to_bool(const Entry& e) const {
  if (plain_scalar(e.value) && e.value.Scalar() == "true") return true;
  if (plain_scalar(e.value) && e.value.Scalar() == "false") return false;
  bad_value(e, "expected true or false, got " + describe(e.value));
}

std::string ConfigMap::to_choice(const Entry& e, const std::vector<std::string>& choices) const {
  if (e.value.IsScalar() && std::find(choices.begin(), choices.end(), e.value.Scalar()) != choices.end())
    return e.value.Scalar();
  std::string message = "expected one of " + join(choices) + ", got " + describe(e.value);
  if (e.value.IsScalar()) {
    const std::string guess =
        closest(e.value.Scalar(), std::set<std::string>(choices.begin(), choices.end()));
    if (!guess.empty()) message += "; did you mean '" + guess + "'?";
  }
  bad_value(e, message);
}

std::string ConfigMap::get_string(const std::string& key) { return to_string(require(key)); }
double ConfigMap::get_double(const std::string& key, double min, double max) {
  return to_double(require(key), min, max);
}
std::int64_t ConfigMap::get_int(const std::string& key, std::int64_t min, std::int64_t max) {
  return to_int(require(key), min, max);
}
bool ConfigMap::get_bool(const std::string& key) { return to_bool(require(key)); }
std::string ConfigMap::get_choice(const std::string& key, const std::vector<std::string>& choices) {
  return to_choice(require(key), choices);
}

std::string ConfigMap::get_string_or(const std::string& key, const std::string& fallback) {
  return has(key) ? get_string(key) : fallback;
}
double ConfigMap::get_double_or(const std::string& key, double fallback, double min, double max) {
  return has(key) ? get_double(key, min, max) : fallback;
}
std::int64_t ConfigMap::get_int_or(const std::string& key, std::int64_t fallback, std::int64_t min,
                                   std::int64_t max) {
  return has(key) ? get_int(key, min, max) : fallback;
}
bool ConfigMap::get_bool_or(const std::string& key, bool fallback) {
  return has(key) ? get_bool(key) : fallback;
}
std::string ConfigMap::get_choice_or(const std::string& key, const std::string& fallback,
                                     const std::vector<std::string>& choices) {
  return has(key) ? get_choice(key, choices) : fallback;
}

ConfigMap ConfigMap::get_map(const std::string& key) {
  const Entry& e = require(key);
  if (!e.value.IsMap())
    bad_value(e, "expected a mapping (nested key: value lines), got " + describe(e.value));
  ConfigMap child(e.value, file_, full_key(key));
  child.mark_ = e.key_mark;
  return child;
}

std::optional<ConfigMap> ConfigMap::get_map_opt(const std::string& key) {
  if (!has(key)) return std::nullopt;
  return get_map(key);
}

std::vector<std::pair<double, double>> ConfigMap::get_curve(const std::string& key, std::size_t min_points,
                                                            double y_min, double y_max) {
  const Entry& e = require(key);
  const std::string name = full_key(key);
  if (!e.value.IsSequence()) bad_value(e, "expected a sequence of [x, y] pairs, got " + describe(e.value));
  std::vector<std::pair<double, double>> curve;
  for (std::size_t i = 0; i < e.value.size(); ++i) {
    const YAML::Node point = e.value[i];
    const Entry as_entry{key + "[" + std::to_string(i) + "]", point.Mark(), point};
    const auto fail_point = [&](const std::string& message) { bad_value(as_entry, message); };
    if (!point.IsSequence() || point.size() != 2)
      fail_point("expected an [x, y] pair, got " + describe(point));
    double xy[2] = {0, 0};
    for (std::size_t j = 0; j < 2; ++j) {
      const YAML::Node value = point[j];
      if (!plain_scalar(value) || !parse_double(value.Scalar(), xy[j]))
        fail_point(std::string("expected numbers in [x, y], got ") + describe(value));
    }
    if (xy[0] <= 0) fail_point("x must be > 0, got " + number_text(xy[0]));
    if (!curve.empty() && xy[0] <= curve.back().first)
      fail_point("x must be strictly increasing, got " + number_text(xy[0]) + " after " +
                 number_text(curve.back().first));
    if (xy[1] < y_min || xy[1] > y_max)
      fail_point("y expected " + range_text(y_min, y_max, true) + ", got " + number_text(xy[1]));
    curve.emplace_back(xy[0], xy[1]);
  }
  if (curve.size() < min_points)
    bad_value(e, "expected at least " + std::to_string(min_points) + " [x, y] point" +
                     (min_points == 1 ? "" : "s") + ", got " + std::to_string(curve.size()));
  return curve;
}

YAML::Node ConfigMap::get_raw(const std::string& key) {
  known_.insert(key);
  const Entry* e = find(key);
  if (e == nullptr) return YAML::Node();
  consumed_.insert(key);
  return e->value;
}

void ConfigMap::finish() const {
  for (const auto& e : entries_) {
    if (consumed_.count(e.key)) continue;
    std::vector<std::string> allowed(known_.begin(), known_.end());
    std::string message = "unknown key '" + e.key + "'" + (key_path_.empty() ? "" : " in " + key_path_);
    message +=
        allowed.empty() ? " (this mapping takes no keys)" : " (expected one of: " + join(allowed) + ")";
    std::set<std::string> absent;
    for (const auto& k : known_)
      if (!find(k)) absent.insert(k);
    const std::string guess = closest(e.key, absent.empty() ? known_ : absent);
    if (!guess.empty()) message += "; did you mean '" + guess + "'?";
    throw InputError(file_, place(e.key_mark), message);
  }
}

std::string ConfigMap::where(const std::string& key) const {
  const Entry* e = key.empty() ? nullptr : find(key);
  return file_ + ":" + place(e ? e->key_mark : mark_);
}

void ConfigMap::fail(const std::string& key, const std::string& message) const {
  const Entry* e = key.empty() ? nullptr : find(key);
  throw InputError(file_, place(e ? e->key_mark : mark_), message);
}

}  // namespace epsim
