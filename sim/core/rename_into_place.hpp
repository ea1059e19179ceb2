// The two atomic moves that put a finished result where the user asked for it. Each either happens
// whole or not at all, so a reader of the final path sees the old result or the new one, never a mix.
#pragma once

#include <string>

namespace epsim {

/// Moves `from` to `to` unless `to` exists (also an empty folder, which rename(2) would replace).
/// Returns 0, or the errno: EEXIST when `to` exists.
int rename_no_replace(const std::string& from, const std::string& to);

/// Swaps two existing paths (here: a finished folder and the old one it replaces) in one step.
/// Returns 0, or the errno. Where the file system cannot swap (EINVAL), it falls back to two renames
/// through `spare`, a free name beside them: then a reader may briefly find `b` missing, never mixed.
int rename_exchange(const std::string& a, const std::string& b, const std::string& spare);

}  // namespace epsim
