// How epsim proves that a folder is its own before it removes anything in it. Every output folder
// carries a marker file, ".epsim-output", that lists each file epsim wrote there; a name is added to
// the list before the file is created, so even a run killed mid-way leaves a complete list. A folder
// may be replaced (--overwrite) or cleaned only while every entry in it is the marker or a plain file
// the marker names: anything else, a user's note or a sub-folder, makes epsim refuse and touch nothing.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace epsim {

inline constexpr const char* kOutputMarkerName = ".epsim-output";
/// The marker's first line; a file without it is not epsim's marker.
inline constexpr const char* kOutputMarkerHeader = "epsim output folder";

/// Entries of `folder` that epsim cannot prove it wrote (empty: the folder is epsim's own, or empty).
/// Sub-folders and links are never epsim's.
std::vector<std::string> foreign_entries(const std::filesystem::path& folder);

/// "a.txt, b/ and 3 more": the start of a list of entries, for an error message.
std::string describe_entries(const std::vector<std::string>& entries);

/// Removes the files the marker lists, the marker and the then empty folder. Call only after
/// foreign_entries(folder) came back empty. Returns false if the folder could not be removed whole.
bool remove_owned_folder(const std::filesystem::path& folder);

}  // namespace epsim
