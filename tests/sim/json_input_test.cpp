// The shared JSON input helpers every reader parses and converts through (sim/core/json_input.*).
#include "sim/core/json_input.hpp"

#include <doctest/doctest.h>

#include <cstdint>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "sim/core/input_error.hpp"
#include "sim/core/json_stream.hpp"

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
  // An integral float outside the range, converted first, is shown as the integer it is.
  CHECK_THROWS_WITH_AS(json_integer(json(12.0), 0, 10, "f", "k"), "f:k: value 12 outside [0, 10]", InputError);
  CHECK(json_integer_if(json(3.0), 0, 3) == 3);
  CHECK_FALSE(json_integer_if(json(3.5), 0, 3).has_value());
}

TEST_CASE("json_integer_if takes exactly what json_integer takes, the same value") {
  const json values[] = {json(0), json(5), json(-3), json(11), json(9223372036854775807ull),
                         json(9223372036854775808ull), json(3.0), json(-2.0), json(2.5), json(1e300),
                         json(-9223372036854775807.0 - 1.0), json(9223372036854775808.0), json("4"),
                         json(true), json(nullptr), json::array({1}), json::object()};
  const std::int64_t ranges[][2] = {{0, 10}, {-5, 5}, {INT64_MIN, INT64_MAX}, {0, 0}};
  for (const json& v : values) {
    for (const auto& r : ranges) {
      INFO(v.dump() << " in [" << r[0] << ", " << r[1] << "]");
      const std::optional<std::int64_t> quiet = json_integer_if(v, r[0], r[1]);
      try {
        const std::int64_t loud = json_integer(v, r[0], r[1], "f", "k");
        CHECK(quiet == loud);
      } catch (const InputError&) {
        CHECK_FALSE(quiet.has_value());
      }
    }
  }
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

namespace {

/// parse_json_line's outcome for `text`, one line: the document's dump or the error's message.
std::string line_outcome(const std::string& text, JsonListSink* lists = nullptr) {
  std::istringstream in(text + "\nnext line");
  std::uint64_t bytes = 0;
  try {
    const std::optional<json> doc = parse_json_line(in, "f.jsonl", 4, lists, bytes);
    std::string rest;
    std::getline(in, rest);
    CHECK(rest == "next line");  // the line's newline consumed, nothing after it
    CHECK(bytes == text.size() + 1);
    return doc ? doc->dump() : "blank";
  } catch (const InputError& e) {
    return std::string("error: ") + e.what();
  }
}

std::string text_outcome(const std::string& text) {
  try {
    return parse_json(text, "f.jsonl", 4).dump();
  } catch (const InputError& e) {
    return std::string("error: ") + e.what();
  }
}

/// Keeps the elements of the top-level "a" arrays it is handed, each as text.
struct ListOfA : JsonListSink {
  std::vector<std::string> taken;
  int starts_seen = 0;
  bool starts(const std::string& key) override {
    if (key != "a") return false;
    ++starts_seen;
    taken.clear();
    return true;
  }
  void take(json&& element) override { taken.push_back(element.dump()); }
};

}  // namespace

TEST_CASE("parse_json_line: a line from its stream reads as parse_json reads its text, errors and places included") {
  const std::string deep_at_70 = "[\"[{\"," + std::string(64, '[');
  for (const std::string& text :
       {std::string("{\"a\": [1, 2.5, \"x\", null, true], \"b\": {\"c\": []}}"), std::string("  \t{\"a\":1}\r"),
        std::string("[1, 2"), std::string("[1] x"), std::string("{\"b\": 1e400}"), std::string(65, '['),
        std::string(64, '[') + std::string(64, ']'), deep_at_70, std::string("\xEF\xBB\xBF[1]"),
        std::string(" \xEF\xBB\xBF[1]"), std::string("{\"a\":\"\x01\"}"), std::string("nul"), std::string("\r\t 7")}) {
    CAPTURE(text);
    CHECK(line_outcome(text) == text_outcome(text));
  }
  CHECK(line_outcome(deep_at_70) == "error: f.jsonl:line 4, column 70: invalid JSON: arrays and objects nested deeper "
                                    "than 64 levels");
  CHECK(line_outcome(" \t\r") == "blank");
  CHECK(line_outcome("") == "blank");
  // The parser takes a NUL character for the end of its text: one after the value is refused where
  // it is, by both, rather than the rest of the line left unread (one inside a string was already).
  const std::string after_nul = std::string("{\"a\":1}") + '\0' + "{\"b\":2}";
  CHECK(line_outcome(after_nul) == text_outcome(after_nul));
  CHECK(line_outcome(after_nul) == "error: f.jsonl:line 4, column 8: invalid JSON: a NUL character after the value");
  const std::string nul_in_string = std::string("{\"a\":\"x") + '\0' + "\"}";
  CHECK(line_outcome(nul_in_string) == text_outcome(nul_in_string));
  std::istringstream empty("");
  std::uint64_t bytes = 9;
  CHECK_FALSE(parse_json_line(empty, "f.jsonl", 1, nullptr, bytes).has_value());
  CHECK(bytes == 0);
}

TEST_CASE("parse_json_line: the elements of the arrays a sink chooses go to it, one at a time, in order") {
  ListOfA sink;
  CHECK(line_outcome(R"({"a": [1, {"x": [2, {"y": 3}]}, [4], "s"], "b": [5], "c": {"a": [6]}})", &sink) ==
        R"({"a":[],"b":[5],"c":{"a":[6]}})");
  CHECK(sink.taken == std::vector<std::string>{"1", R"({"x":[2,{"y":3}]})", "[4]", "\"s\""});
  // A key met again starts its list over; a value that is not an array stays in the document.
  sink = ListOfA{};
  CHECK(line_outcome(R"({"a": [1, 2], "a": [3]})", &sink) == R"({"a":[]})");
  CHECK(sink.taken == std::vector<std::string>{"3"});
  CHECK(sink.starts_seen == 2);
  sink = ListOfA{};
  CHECK(line_outcome(R"({"a": [1], "a": {"k": [2]}})", &sink) == R"({"a":{"k":[2]}})");
  CHECK(sink.taken.empty());
  // Not at the top: an array's arrays and an array document are left whole.
  sink = ListOfA{};
  CHECK(line_outcome(R"([{"a": [1]}])", &sink) == R"([{"a":[1]}])");
  CHECK(sink.taken.empty());
}

TEST_CASE("parse_json_stream: a whole stream reads as parse_json reads its text, on every line") {
  const auto stream_outcome = [](const std::string& text, JsonListSink* lists = nullptr) {
    std::istringstream in(text);
    try {
      return parse_json_stream(in, "f.json", lists).dump();
    } catch (const InputError& e) {
      return std::string("error: ") + e.what();
    }
  };
  const auto text_outcome = [](const std::string& text) {
    try {
      return parse_json(text, "f.json").dump();
    } catch (const InputError& e) {
      return std::string("error: ") + e.what();
    }
  };
  // Errors on the first, a middle and the last line, after a number the parser put back, at the end
  // of the input, and where nesting goes too deep on a later line.
  for (const std::string& text :
       {std::string("{\n  \"a\": [1, 2],\n  \"b\": {\"c\": null}\n}\n"), std::string("{\"a\": 1,\n \"b\": 1e400}"),
        std::string("[1,\n2x]"), std::string("[1,\n 22\n\n,]"), std::string("{\n\"a\":\n[1, 2\n"), std::string("\n\n"),
        std::string("[\n1\n]\nx"), std::string(" \n") + std::string(65, '['), std::string("[\n\"[\n") + std::string(70, '['),
        std::string("{\"a\": 1}\n\n  \n"), std::string("\n12\n3"), std::string("[\"a\n\"]"), std::string("\xEF\xBB\xBF\n{}"),
        std::string("[1]\n") + '\0' + "x"}) {
    CAPTURE(text);
    CHECK(stream_outcome(text) == text_outcome(text));
  }
  CHECK(stream_outcome(std::string("[1]\n") + '\0' + "x") ==
        "error: f.json:line 2, column 1: invalid JSON: a NUL character after the value");
  CHECK(stream_outcome("[1,\n 22\n\n,]").find("f.json:line 4, column 2: invalid JSON: syntax error") != std::string::npos);
  ListOfA sink;
  CHECK(stream_outcome("{\n \"a\": [\n  {\"x\": 1},\n  2\n ],\n \"b\": 3\n}\n", &sink) == R"({"a":[],"b":3})");
  CHECK(sink.taken == std::vector<std::string>{R"({"x":1})", "2"});
}
