// The shared JSON input helpers every reader parses and converts through (sim/core/json_input.*).
#include "sim/core/json_input.hpp"

#include <doctest/doctest.h>

#include <cstdint>
#include <string>

#include "sim/core/input_error.hpp"

using namespace epsim;
using nlohmann::json;

TEST_CASE("parse_json: 64 levels of nesting are read, the 65th is refused where it opens") {
  const json ok = parse_json(std::string(64, '[') + std::string(64, ']'), "f.json");
  CHECK(ok.is_array());
  CHECK_THROWS_WITH_AS(parse_json(" \n" + std::string(65, '['), "f.json"),
                       "f.json:line 2, column 65: invalid JSON: arrays and objects nested deeper than 64 levels",
                       InputError);
  // Brackets inside strings do not count.
  const std::string strings = "[\"[[[\"," + std::string(63, '[') + std::string(63, ']') + "]";
  CHECK(parse_json(strings, "f.json").size() == 2);
  // `["[{",` is level 1 and 6 columns; the next arrays open levels 2, 3, ... from column 7, level 65 at
  // column 70, on the text's first line, line 5 of its file.
  CHECK_THROWS_WITH_AS(parse_json("[\"[{\"," + std::string(64, '['), "f.json", 5),
                       "f.json:line 5, column 70: invalid JSON: arrays and objects nested deeper than 64 levels",
                       InputError);
}

TEST_CASE("parse_json: syntax errors and numbers beyond a double name line and column") {
  CHECK_THROWS_WITH_AS(parse_json("{\"a\": 1,\n \"b\": 1e400}", "f.json"),
                       "f.json:line 2, column 11: invalid JSON: number overflow parsing '1e400'", InputError);
  CHECK_THROWS_WITH_AS(parse_json("[1, 2", "f.jsonl", 9),
                       doctest::Contains("f.jsonl:line 9, column 6: invalid JSON: syntax error"), InputError);
  CHECK_THROWS_WITH_AS(parse_json("[1] x", "f.json"), doctest::Contains("f.json:line 1, column 5: invalid JSON"),
                       InputError);
  CHECK(parse_json("{\"a\": [1, 2.5, \"x\", null, true]}", "f.json") ==
        json::parse("{\"a\": [1, 2.5, \"x\", null, true]}"));
}

TEST_CASE("json_integer: integers and integral floats in range, fractions, strings, out of range refused") {
  CHECK(json_integer(json(5), 0, 10, "f", "k") == 5);
  CHECK(json_integer(json(5.0), 0, 10, "f", "k") == 5);
  CHECK(json_integer(json(-9223372036854775807.0 - 1.0), INT64_MIN, 0, "f", "k") == INT64_MIN);
  CHECK(json_integer(json(9223372036854775807ull), 0, INT64_MAX, "f", "k") == INT64_MAX);
  CHECK_THROWS_WITH_AS(json_integer(json(9223372036854775808ull), 0, INT64_MAX, "f", "k"),
                       "f:k: value 9223372036854775808 outside [0, 9223372036854775807]", InputError);
  // 2^63 as a double cannot be converted to int64_t: refused before any conversion.
  CHECK_THROWS_WITH_AS(json_integer(json(9223372036854775808.0), 0, INT64_MAX, "f", "k"),
                       "f:k: value 9.223372036854776e+18 outside [0, 9223372036854775807]", InputError);
  CHECK_THROWS_WITH_AS(json_integer(json(2.5), 0, 10, "f", "k"), "f:k: expected an integer, found a fraction: 2.5",
                       InputError);
  CHECK_THROWS_WITH_AS(json_integer(json(11), 0, 10, "f", "k"), "f:k: value 11 outside [0, 10]", InputError);
  CHECK_THROWS_WITH_AS(json_integer(json(-1e300), 0, 10, "f", "k"), "f:k: value -1e+300 outside [0, 10]", InputError);
  CHECK_THROWS_WITH_AS(json_integer(json("7"), 0, 10, "f", "k"), "f:k: expected an integer, found the string \"7\"",
                       InputError);
  CHECK_THROWS_WITH_AS(json_integer(json::array({1}), 0, 10, "f", "k"), "f:k: expected an integer, found an array",
                       InputError);
  CHECK(json_integer_if(json(3.0), 0, 3) == 3);
  CHECK_FALSE(json_integer_if(json(3.5), 0, 3).has_value());
}

TEST_CASE("json_excerpt: bounded, whatever the value") {
  CHECK(json_excerpt(json(std::string(1000, 'a'))) == "\"" + std::string(40, 'a') + "\"...");
  json deep = json::array();
  for (int i = 0; i < 100; ++i) deep = json::array({deep});
  CHECK(json_excerpt(deep) == "an array");
  CHECK(json_excerpt(json::object()) == "an object");
  CHECK(json_excerpt(json(1.5)) == "1.5");
  // A cut through a multi-byte character still prints.
  CHECK(json_excerpt(json(std::string(39, 'a') + "\xc3\xa9")).size() > 40);
}

TEST_CASE("json_number, json_string, json_member, json_array name the place") {
  CHECK(json_number(json(2), 0, 3, "f", "k") == 2.0);
  CHECK_THROWS_WITH_AS(json_number(json(4.5), 0, 3, "f", "k"), "f:k: value 4.5 outside [0, 3]", InputError);
  CHECK_THROWS_WITH_AS(json_number(json(true), 0, 3, "f", "k"), "f:k: expected a number, found true", InputError);
  CHECK_THROWS_WITH_AS(json_string(json(1), "f", "k"), "f:k: expected a string, found a number", InputError);
  CHECK_THROWS_WITH_AS(json_member(json::object(), "x", "f", "k"), "f:k: missing key 'x'", InputError);
  CHECK_THROWS_WITH_AS(json_member(json(1), "x", "f", "k"), "f:k: expected an object, found a number", InputError);
  CHECK_THROWS_WITH_AS(json_array(json(nullptr), "f", "k"), "f:k: expected an array, found null", InputError);
}
