// The SAX handler every JSON reader parses through: it builds nlohmann's document as its own DOM
// parser would, but refuses nesting deeper than kMaxJsonDepth, turns every parse error into one
// InputError at its place, and can hand the elements of chosen top-level arrays to a JsonListSink one
// at a time instead of keeping them (a wide plan's million routes would otherwise cost a tree node and
// a map of keys each: 3.5 GB for a 386 MB line).
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace epsim {

/// Takes the elements of a document's top-level arrays as they are parsed (parse_json_line).
class JsonListSink {
 public:
  virtual ~JsonListSink() = default;
  /// Called for every key of the top-level object, in document order: whether the elements of its
  /// value, if that is an array, come here. A key met again starts its list over, as the document
  /// keeps the last value of a repeated key.
  virtual bool starts(const std::string& key) = 0;
  /// The next element of the array under the last key starts() took.
  virtual void take(nlohmann::json&& element) = 0;
};

class BoundedDom {
 public:
  /// The place ("line L, column C") of a 1-based position in the text parsed.
  using PlaceOf = std::function<std::string(std::size_t)>;

  /// Builds into `root`; `lists`, when given, takes the elements of the arrays it chooses, which the
  /// document then holds empty.
  BoundedDom(nlohmann::json& root, const std::string& file, PlaceOf place_of, JsonListSink* lists = nullptr)
      : root_(root), file_(file), place_of_(std::move(place_of)), lists_(lists) {}

  bool null() { return put(nullptr); }
  bool boolean(bool v) { return put(v); }
  bool number_integer(nlohmann::json::number_integer_t v) { return put(v); }
  bool number_unsigned(nlohmann::json::number_unsigned_t v) { return put(v); }
  bool number_float(nlohmann::json::number_float_t v, const nlohmann::json::string_t&) { return put(v); }
  bool string(nlohmann::json::string_t& v) { return put(std::move(v)); }
  bool binary(nlohmann::json::binary_t& v) { return put(nlohmann::json::binary(std::move(v))); }
  bool start_object(std::size_t) { return open(nlohmann::json::object()); }
  bool start_array(std::size_t) { return open(nlohmann::json::array()); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }
  bool key(nlohmann::json::string_t& k);
  /// Throws InputError(file, place of `position`, "invalid JSON: " + nlohmann's reason).
  bool parse_error(std::size_t position, const std::string&, const nlohmann::json::exception& e);

  /// Whether the parse stopped at an array or object that would nest deeper than kMaxJsonDepth.
  bool too_deep() const { return too_deep_; }

 private:
  bool put(nlohmann::json&& value);
  nlohmann::json* place(nlohmann::json&& value);
  bool open(nlohmann::json&& container);
  bool close();
  /// Whether the innermost open container is an array whose elements go to lists_.
  bool in_list() const { return list_open_ && stack_.size() == 2; }

  nlohmann::json& root_;
  const std::string& file_;
  PlaceOf place_of_;
  JsonListSink* lists_;
  std::vector<nlohmann::json*> stack_;  ///< the open arrays and objects, innermost last
  nlohmann::json* member_ = nullptr;    ///< the object member the next value goes to
  bool key_listed_ = false;             ///< lists_ took the top-level key last met
  bool list_open_ = false;              ///< stack_[1] is an array whose elements go to lists_
  bool too_deep_ = false;
};

}  // namespace epsim
