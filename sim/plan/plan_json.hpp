// Plans as JSON: the form `epsim run --write-plans` writes and the hw runner reads. Versioned: a
// reader refuses a version it does not know.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "sim/plan/plan.hpp"

namespace epsim {

nlohmann::json plan_to_json(const Plan& plan);
/// `where` names the source (file and position) for InputError messages.
Plan plan_from_json(const nlohmann::json& json, const std::string& where);

}  // namespace epsim
