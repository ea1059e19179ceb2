#include "sim/core/bounded_dom.hpp"

#include <utility>

#include "sim/core/input_error.hpp"
#include "sim/core/json_input.hpp"

namespace epsim {

using nlohmann::json;

bool BoundedDom::key(json::string_t& k) {
  if (lists_ != nullptr && stack_.size() == 1) key_listed_ = lists_->starts(k);
  member_ = &(*stack_.back())[k];
  return true;
}

bool BoundedDom::parse_error(std::size_t position, const std::string&, const json::exception& e) {
  std::string reason = e.what();
  // nlohmann's text is "[json.exception.parse_error.101] parse error at line 1, column 4: why";
  // the place is ours, the explanation is its.
  const std::size_t column = reason.find("column ");
  const std::size_t colon = column == std::string::npos ? std::string::npos : reason.find(": ", column);
  if (colon != std::string::npos) {
    reason = reason.substr(colon + 2);
  } else {
    const std::size_t bracket = reason.find("] ");
    if (bracket != std::string::npos) reason = reason.substr(bracket + 2);
  }
  throw InputError(file_, place_of_(position), "invalid JSON: " + reason);
}

bool BoundedDom::put(json&& value) {
  if (in_list()) {
    lists_->take(std::move(value));
    return true;
  }
  place(std::move(value));
  return true;
}

json* BoundedDom::place(json&& value) {
  if (stack_.empty()) {
    root_ = std::move(value);
    return &root_;
  }
  json& top = *stack_.back();
  if (top.is_array()) {
    top.push_back(std::move(value));
    return &top.back();
  }
  *member_ = std::move(value);
  return member_;
}

bool BoundedDom::open(json&& container) {
  if (static_cast<int>(stack_.size()) >= kMaxJsonDepth) {
    too_deep_ = true;
    return false;  // stops the parser
  }
  const bool list = key_listed_ && container.is_array() && stack_.size() == 1 && stack_.back()->is_object();
  stack_.push_back(place(std::move(container)));
  if (list) list_open_ = true;
  return true;
}

bool BoundedDom::close() {
  stack_.pop_back();
  if (list_open_ && stack_.size() == 1) {
    list_open_ = false;
  } else if (in_list()) {
    // An element of a listed array is complete: it goes to the sink, and the array stays empty.
    json::array_t& list = stack_.back()->get_ref<json::array_t&>();
    lists_->take(std::move(list.back()));
    list.pop_back();
  }
  return true;
}

}  // namespace epsim
