// Sizes in configs and on the command line: "4GiB", "512 MiB", "1.5GB".
#include "pipetune/base/size.h"

#include <fmt/format.h>

#include <cctype>
#include <cmath>
#include <string>

namespace pipetune {
namespace {

// Multiplier of a unit suffix, case-insensitive except that a lone "b" is not
// accepted as "bits": sizes are bytes. Returns 0 for an unknown unit.
double UnitMultiplier(std::string unit) {
  for (char& c : unit) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (unit.empty() || unit == "b") return 1;
  static constexpr struct {
    const char* binary_short;   // "ki"
    const char* binary;         // "kib"
    const char* decimal_short;  // "k"
    const char* decimal;        // "kb"
    int power;
  } kUnits[] = {
      {"ki", "kib", "k", "kb", 1},
      {"mi", "mib", "m", "mb", 2},
      {"gi", "gib", "g", "gb", 3},
      {"ti", "tib", "t", "tb", 4},
  };
  for (const auto& u : kUnits) {
    if (unit == u.binary_short || unit == u.binary) return std::pow(1024.0, u.power);
    if (unit == u.decimal_short || unit == u.decimal) return std::pow(1000.0, u.power);
  }
  return 0;
}

}  // namespace

StatusOr<uint64_t> ParseSize(std::string_view text) {
  std::string s(text);
  auto bad = [&](std::string_view why) {
    return InvalidInput(
        fmt::format("malformed size \"{}\": {} (examples: 4096, \"512MiB\", \"4GiB\", \"1.5GB\")", s, why));
  };
  size_t i = 0;
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  size_t number_start = i;
  bool seen_digit = false, seen_dot = false;
  while (i < s.size() && (std::isdigit(static_cast<unsigned char>(s[i])) || s[i] == '.')) {
    if (s[i] == '.') {
      if (seen_dot) return bad("more than one decimal point");
      seen_dot = true;
    } else {
      seen_digit = true;
    }
    ++i;
  }
  if (!seen_digit) return bad("expected a number first");
  double number = std::stod(s.substr(number_start, i - number_start));
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  size_t unit_start = i;
  while (i < s.size() && std::isalpha(static_cast<unsigned char>(s[i]))) ++i;
  std::string unit = s.substr(unit_start, i - unit_start);
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  if (i != s.size()) return bad("unexpected text after the unit");
  double multiplier = UnitMultiplier(unit);
  if (multiplier == 0) return bad(fmt::format("unknown unit \"{}\"", unit));
  double bytes = number * multiplier;
  if (!(bytes < 1.8e19)) return bad("too large");
  return static_cast<uint64_t>(std::llround(bytes));
}

std::string FormatBytes(double bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int unit = 0;
  while (std::fabs(bytes) >= 1024.0 && unit < 4) {
    bytes /= 1024.0;
    ++unit;
  }
  if (unit == 0) return fmt::format("{:.0f} B", bytes);
  return fmt::format("{:.1f} {}", bytes, kUnits[unit]);
}

}  // namespace pipetune
