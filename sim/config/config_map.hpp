// Strict reading of one YAML mapping. Every getter consumes a key; finish() rejects any key that was
// not consumed, naming it, its line and the keys that are allowed. Wrong types and out-of-range values
// are rejected with the file, line:column and what was expected. All loaders and every balancer's
// parameter block read through this class, so all of epsim's YAML speaks with one voice.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

namespace epsim {

class ConfigMap {
 public:
  /// `node` must be a mapping, or null/undefined (read as an empty mapping). `file` names the file for
  /// messages; `key_path` is where this mapping sits ("" at the top, "gpu", "balancer.params", ...).
  ConfigMap(const YAML::Node& node, std::string file, std::string key_path = "");

  /// Required values; throw InputError when absent or of the wrong type / out of range. Ranges are
  /// inclusive; a `min` in (0, 1e-200], e.g. 1e-300, means "greater than 0" (bandwidths, rates).
  /// Numbers must be plain YAML scalars: a quoted "450" is a string, not a number.
  std::string get_string(const std::string& key);
  double get_double(const std::string& key, double min, double max);
  std::int64_t get_int(const std::string& key, std::int64_t min, std::int64_t max);
  bool get_bool(const std::string& key);
  /// One of `choices`.
  std::string get_choice(const std::string& key, const std::vector<std::string>& choices);

  /// Optional values: `fallback` when the key is absent.
  std::string get_string_or(const std::string& key, const std::string& fallback);
  double get_double_or(const std::string& key, double fallback, double min, double max);
  std::int64_t get_int_or(const std::string& key, std::int64_t fallback, std::int64_t min, std::int64_t max);
  bool get_bool_or(const std::string& key, bool fallback);
  std::string get_choice_or(const std::string& key, const std::string& fallback,
                            const std::vector<std::string>& choices);

  bool has(const std::string& key) const;
  /// A nested mapping (required / optional).
  ConfigMap get_map(const std::string& key);
  std::optional<ConfigMap> get_map_opt(const std::string& key);
  /// A sequence of [x, y] pairs of numbers, at least `min_points`, x strictly increasing, x > 0,
  /// y within [y_min, y_max].
  std::vector<std::pair<double, double>> get_curve(const std::string& key, std::size_t min_points,
                                                   double y_min, double y_max);
  /// The raw node of a key (consumed), for blocks read by someone else (a balancer's params); a null
  /// node when the key is absent.
  YAML::Node get_raw(const std::string& key);

  /// Throws InputError for the first key not consumed by a getter.
  void finish() const;

  /// "file:line:col" of the key (or of the mapping itself when `key` is empty or absent).
  std::string where(const std::string& key = "") const;
  /// Throws InputError at `key` with `message` (for cross-field checks done by the caller).
  [[noreturn]] void fail(const std::string& key, const std::string& message) const;

  const std::string& file() const { return file_; }

 private:
  struct Entry {
    std::string key;
    YAML::Mark key_mark;
    YAML::Node value;
  };
  const Entry* find(const std::string& key) const;
  /// Marks `key` consumed and returns its entry; throws "missing key" (or names a near-miss typo).
  const Entry& require(const std::string& key);
  [[noreturn]] void missing(const std::string& key) const;
  [[noreturn]] void bad_value(const Entry& entry, const std::string& message) const;
  std::string full_key(const std::string& key) const;
  double to_double(const Entry& entry, double min, double max) const;
  std::int64_t to_int(const Entry& entry, std::int64_t min, std::int64_t max) const;
  bool to_bool(const Entry& entry) const;
  std::string to_string(const Entry& entry) const;
  std::string to_choice(const Entry& entry, const std::vector<std::string>& choices) const;

  YAML::Node node_;
  std::string file_;
  std::string key_path_;
  mutable std::set<std::string> consumed_;
  mutable std::set<std::string> known_;  ///< every key a getter or has() asked for: the allowed keys
  std::vector<Entry> entries_;           ///< the mapping's keys in document order
  YAML::Mark mark_;                      ///< the mapping's key in its parent (or the mapping itself)
};

}  // namespace epsim
