// Plans as JSON: the form `epsim run --write-plans` writes and the hw runner reads. Versioned: a
// reader refuses a version it does not know.
#pragma once

#include <ostream>
#include <string>

#include <nlohmann/json.hpp>

#include "sim/plan/plan.hpp"

namespace epsim {

nlohmann::json plan_to_json(const Plan& plan);
/// plan_to_json(plan).dump(), written straight to `out`: a wide plan's document tree was hundreds
/// of bytes per route and transfer (LAER-MoE's EP 256 plan, half a million transfers: 800 MB and
/// four times the run's time), where this holds a small buffer.
void write_plan_json(std::ostream& out, const Plan& plan);
/// Reads and checks one plan: every field present with a value of its type and range (an integer
/// field refuses a fraction), and no structural defect (find_plan_defect without the model). Any
/// defect throws InputError(file, "PLACE, KEY.PATH", what was expected), `place` locating the plan in
/// `file` ("line 3"; empty for a whole-file plan).
Plan plan_from_json(const nlohmann::json& json, const std::string& file, const std::string& place);

}  // namespace epsim
