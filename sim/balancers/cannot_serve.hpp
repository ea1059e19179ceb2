// What a balancer throws from plan() when the configuration it is given (EP degree, cluster shape,
// model) is one its algorithm cannot serve, e.g. DeepSeek EPLB's hierarchical policy on an EP group
// that fills nodes unevenly. It is the user's choice of balancer and configuration that is wrong, not
// epsim: the replay reports it as an InputError naming the balancer, and a comparison shows that row
// as n/a with this message and goes on with the others.
#pragma once

#include <stdexcept>
#include <string>

namespace epsim {

class CannotServe : public std::runtime_error {
 public:
  /// `message` says what the balancer needs and what it was given, without the balancer's name.
  explicit CannotServe(const std::string& message) : std::runtime_error(message) {}
};

}  // namespace epsim
