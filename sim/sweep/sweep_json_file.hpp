// A JSON file that epsim writes into a sweep's folder (a point's results, a point's check against
// exact) and reads back: one object whose "format" and "version" say what it is. Anything else,
// a file cut short, changed by hand or written by another version, is one InputError naming the
// file, what it should be and what to do.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace epsim {

class SweepJsonFile {
 public:
  /// `kind` names what the file should be ("sweep point file"); `remedy` what a user does about a
  /// bad one ("remove it and run the sweep again to recompute that point").
  SweepJsonFile(std::string path, std::string kind, std::string remedy)
      : path_(std::move(path)), kind_(std::move(kind)), remedy_(std::move(remedy)) {}

  /// The file's object, checked to be of `format` and `version`.
  nlohmann::json read(const char* format, int version) const;
  /// The InputError for a file that is not what it should be, `what` saying how.
  [[noreturn]] void bad(const std::string& what) const;

 private:
  std::string path_, kind_, remedy_;
};

}  // namespace epsim
