#include "hw/host/hw_args.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <stdexcept>

namespace epsim::hw {

namespace {

std::int64_t parse_int(const std::string& key, const std::string& s) {
  std::size_t used = 0;
  long long v = 0;
  try {
    v = std::stoll(s, &used);
  } catch (const std::exception&) {
    throw std::invalid_argument("--" + key + ": '" + s + "' is not an integer");
  }
  if (used != s.size()) throw std::invalid_argument("--" + key + ": '" + s + "' is not an integer");
  return v;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s) {
    if (c == sep) {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  out.push_back(cur);
  return out;
}

}  // namespace

std::string HwArgs::text(const std::string& key, const std::string& fallback) const {
  auto it = options.find(key);
  return it == options.end() ? fallback : it->second;
}

std::int64_t HwArgs::integer(const std::string& key, std::int64_t fallback, std::int64_t lo, std::int64_t hi) const {
  auto it = options.find(key);
  if (it == options.end()) return fallback;
  const std::int64_t v = parse_int(key, it->second);
  if (v < lo || v > hi)
    throw std::invalid_argument("--" + key + ": " + it->second + " outside [" + std::to_string(lo) + ", " +
                                std::to_string(hi) + "]");
  return v;
}

double HwArgs::number(const std::string& key, double fallback, double lo, double hi) const {
  auto it = options.find(key);
  if (it == options.end()) return fallback;
  const std::string& s = it->second;
  std::size_t used = 0;
  double v = 0;
  try {
    v = std::stod(s, &used);
  } catch (const std::exception&) {
    throw std::invalid_argument("--" + key + ": '" + s + "' is not a number");
  }
  if (used != s.size() || !std::isfinite(v)) throw std::invalid_argument("--" + key + ": '" + s + "' is not a number");
  if (v < lo || v > hi) {
    char range[64];
    std::snprintf(range, sizeof range, "[%g, %g]", lo, hi);
    throw std::invalid_argument("--" + key + ": " + s + " outside " + range);
  }
  return v;
}

std::vector<std::int64_t> HwArgs::integers(const std::string& key, const std::vector<std::int64_t>& fallback,
                                           std::int64_t lo, std::int64_t hi) const {
  auto it = options.find(key);
  if (it == options.end()) return fallback;
  std::vector<std::int64_t> out;
  for (const auto& item : split(it->second, ',')) {
    const auto parts = split(item, ':');
    if (parts.size() == 1) {
      out.push_back(parse_int(key, parts[0]));
    } else if (parts.size() == 2 || (parts.size() == 3 && parts[2] == "pow2")) {
      const std::int64_t a = parse_int(key, parts[0]), b = parse_int(key, parts[1]);
      if (a > b || a < 1) throw std::invalid_argument("--" + key + ": bad range '" + item + "'");
      if (parts.size() == 2) {
        if (b - a > 100000) throw std::invalid_argument("--" + key + ": range '" + item + "' too long");
        for (std::int64_t v = a; v <= b; ++v) out.push_back(v);
      } else {
        // Stops before a doubling that would pass b, or pass the largest 64-bit integer (which wrapped).
        for (std::int64_t v = a;; v *= 2) {
          out.push_back(v);
          if (v > b / 2) break;
        }
      }
    } else {
      throw std::invalid_argument("--" + key + ": bad item '" + item + "' (N, A:B or A:B:pow2)");
    }
  }
  if (out.empty()) throw std::invalid_argument("--" + key + ": empty list");
  for (auto v : out)
    if (v < lo || v > hi)
      throw std::invalid_argument("--" + key + ": " + std::to_string(v) + " outside [" + std::to_string(lo) + ", " +
                                  std::to_string(hi) + "]");
  return out;
}

HwArgs parse_hw_args(const std::vector<std::string>& argv, const std::set<std::string>& allowed,
                     const std::set<std::string>& switches) {
  HwArgs a;
  if (argv.empty()) throw std::invalid_argument("missing command");
  a.command = argv[0];
  for (std::size_t i = 1; i < argv.size(); ++i) {
    const std::string& s = argv[i];
    std::string key;
    if (s == "-o" || s == "--output") {
      key = "o";
    } else if (s.size() > 2 && s.compare(0, 2, "--") == 0) {
      key = s.substr(2);
    } else if (!s.empty() && s[0] == '-' && s.size() > 1) {
      throw std::invalid_argument("unknown option '" + s + "'");
    } else {
      a.positional.push_back(s);
      continue;
    }
    std::string value;
    const auto eq = key.find('=');
    bool inline_value = false;
    if (eq != std::string::npos) {
      value = key.substr(eq + 1);
      key = key.substr(0, eq);
      inline_value = true;
    }
    if (switches.count(key)) {
      if (inline_value) throw std::invalid_argument("--" + key + " takes no value");
      a.flags.insert(key);
      continue;
    }
    if (!allowed.count(key)) throw std::invalid_argument("unknown option '" + (inline_value ? "--" + key : s) + "'");
    if (!inline_value) {
      if (i + 1 >= argv.size()) throw std::invalid_argument("option '" + s + "' needs a value");
      value = argv[++i];
    }
    a.options[key] = value;
  }
  return a;
}

std::vector<std::int64_t> parse_sizes(const std::string& text) {
  std::vector<std::int64_t> out;
  for (const auto& item : split(text, ',')) {
    if (item.empty()) throw std::invalid_argument("empty size in '" + text + "'");
    std::int64_t mult = 1;
    std::string digits = item;
    const char last = item.back();
    if (last == 'K' || last == 'k') mult = 1024;
    if (last == 'M' || last == 'm') mult = 1024 * 1024;
    if (last == 'G' || last == 'g') mult = 1024LL * 1024 * 1024;
    if (mult != 1) digits = item.substr(0, item.size() - 1);
    const std::int64_t v = parse_int("size", digits);
    if (v <= 0) throw std::invalid_argument("size '" + item + "' must be > 0");
    if (v > INT64_MAX / mult) throw std::invalid_argument("size '" + item + "' is too large");
    out.push_back(v * mult);
  }
  return out;
}

double median(std::vector<double> values) {
  if (values.empty()) throw std::invalid_argument("median of no values");
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

}  // namespace epsim::hw
