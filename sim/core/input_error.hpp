// The one error type for bad user input (traces, YAML, command lines). Its message is a single line
// "FILE:PLACE: what was wrong; what was expected" so that a user can jump straight to the spot.
#pragma once

#include <stdexcept>
#include <string>

namespace epsim {

class InputError : public std::runtime_error {
 public:
  /// `file` is the path as the user gave it; `place` is a line:column, a record number, a byte offset
  /// or a key path, whatever locates the problem best; `message` says what was found and expected.
  InputError(const std::string& file, const std::string& place, const std::string& message)
      : std::runtime_error(format(file, place, message)), file_(file), place_(place) {}

  const std::string& file() const { return file_; }
  const std::string& place() const { return place_; }

 private:
  static std::string format(const std::string& file, const std::string& place,
                            const std::string& message) {
    std::string out = file;
    if (!place.empty()) out += ":" + place;
    return out + ": " + message;
  }
  std::string file_;
  std::string place_;
};

}  // namespace epsim
