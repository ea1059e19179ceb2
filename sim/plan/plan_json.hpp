// Plans as JSON: the form `epsim run --write-plans` writes and the hw runner reads. Versioned: a
// reader refuses a version it does not know.
#pragma once

#include <cstdint>
#include <istream>
#include <optional>
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
/// The plan on the next line of `in`, line `line` of the plans.jsonl `file`, read as the text streams
/// by: the routes, transfers and instances are converted one at a time, so neither the line's text nor
/// its document tree is held (a wide plan's line is hundreds of megabytes; as a tree, ten times more).
/// Same checks, errors and places as plan_from_json(parse_json(line), file, "line N"). nullopt for a
/// blank line and at the stream's end (`bytes` 0 there, else the line's length with its newline).
std::optional<Plan> read_plan_line(std::istream& in, const std::string& file, std::uint64_t line,
                                   std::uint64_t& bytes);

}  // namespace epsim
